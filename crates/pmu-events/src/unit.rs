//! `ScaleUnit` parsing (perf's strtod rule) and `Unit` to PMU name mapping (jevents.py `unit_to_pmu`).

/// A parsed `ScaleUnit`: the displayed value is `value * scale`, labelled with `unit`.
#[derive(Debug, Clone, PartialEq)]
pub struct ScaleUnit {
    /// The leading number.
    pub scale: f64,
    /// The rest of the string, untrimmed (perf prints it as is).
    pub unit: String,
}

impl ScaleUnit {
    /// Parses like perf's `perf_pmu__convert_scale`: `strtod` in the C locale takes the longest
    /// numeric prefix (decimal, hex float, `inf`, `nan`) and the unit is everything after it.
    ///
    /// Returns `None` when the text does not start with a number: strtod would then give a scale
    /// of 0, which silently prints zeros, so the loader reports it instead.
    pub fn parse(text: &str) -> Option<ScaleUnit> {
        let (scale, rest) = strtod(text)?;
        Some(ScaleUnit { scale, unit: rest.to_string() })
    }
}

/// C `strtod` on the prefix of `text`: the value and the unparsed rest, or `None` if no number.
fn strtod(text: &str) -> Option<(f64, &str)> {
    let bytes = text.as_bytes();
    let mut pos = 0;
    // C isspace: space, \t, \n, \v, \f, \r.
    while pos < bytes.len() && matches!(bytes[pos], b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r') {
        pos += 1;
    }
    let sign_start = pos;
    let negative = bytes.get(pos) == Some(&b'-');
    if matches!(bytes.get(pos), Some(b'+' | b'-')) {
        pos += 1;
    }
    let sign = if negative { -1.0 } else { 1.0 };
    let rest_lower = text[pos..].to_ascii_lowercase();
    if rest_lower.starts_with("inf") {
        let len = if rest_lower.starts_with("infinity") { 8 } else { 3 };
        return Some((sign * f64::INFINITY, &text[pos + len..]));
    }
    if rest_lower.starts_with("nan") {
        let mut end = pos + 3;
        // "nan(n-char-sequence)" is consumed whole when the bracket closes.
        if bytes.get(end) == Some(&b'(') {
            let mut probe = end + 1;
            while probe < bytes.len()
                && (bytes[probe].is_ascii_alphanumeric() || bytes[probe] == b'_')
            {
                probe += 1;
            }
            if bytes.get(probe) == Some(&b')') {
                end = probe + 1;
            }
        }
        return Some((f64::NAN, &text[end..]));
    }
    if rest_lower.starts_with("0x") {
        if let Some((value, end)) = hex_float(bytes, pos + 2) {
            return Some((sign * value, &text[end..]));
        }
        // "0x" without hex digits: strtod reads just the "0".
        return Some((0.0 * sign, &text[pos + 1..]));
    }
    let mut digits = 0;
    while pos < bytes.len() && bytes[pos].is_ascii_digit() {
        pos += 1;
        digits += 1;
    }
    if bytes.get(pos) == Some(&b'.') {
        pos += 1;
        while pos < bytes.len() && bytes[pos].is_ascii_digit() {
            pos += 1;
            digits += 1;
        }
    }
    if digits == 0 {
        return None;
    }
    if matches!(bytes.get(pos), Some(b'e' | b'E')) {
        let mut probe = pos + 1;
        if matches!(bytes.get(probe), Some(b'+' | b'-')) {
            probe += 1;
        }
        if bytes.get(probe).is_some_and(u8::is_ascii_digit) {
            while probe < bytes.len() && bytes[probe].is_ascii_digit() {
                probe += 1;
            }
            pos = probe;
        }
    }
    // Rust's float parser accepts exactly this decimal syntax (sign, digits, '.', exponent).
    let value: f64 = text[sign_start..pos].parse().ok()?;
    Some((value, &text[pos..]))
}

/// Parses the hex digits (with optional `.` fraction and `p` binary exponent) of a hex float
/// starting at `pos`, just after "0x". Returns the value and the end offset.
fn hex_float(bytes: &[u8], mut pos: usize) -> Option<(f64, usize)> {
    let mut value = 0.0f64;
    let mut digits = 0;
    let mut exponent: i64 = 0;
    while let Some(digit) = bytes.get(pos).and_then(|b| (*b as char).to_digit(16)) {
        value = value * 16.0 + f64::from(digit);
        pos += 1;
        digits += 1;
    }
    if bytes.get(pos) == Some(&b'.') {
        let mut probe = pos + 1;
        while let Some(digit) = bytes.get(probe).and_then(|b| (*b as char).to_digit(16)) {
            value = value * 16.0 + f64::from(digit);
            exponent -= 4;
            probe += 1;
            digits += 1;
        }
        if digits > 0 {
            pos = probe;
        }
    }
    if digits == 0 {
        return None;
    }
    if matches!(bytes.get(pos), Some(b'p' | b'P')) {
        let mut probe = pos + 1;
        let negative = bytes.get(probe) == Some(&b'-');
        if matches!(bytes.get(probe), Some(b'+' | b'-')) {
            probe += 1;
        }
        let digits_start = probe;
        let mut power: i64 = 0;
        while let Some(digit) = bytes.get(probe).filter(|b| b.is_ascii_digit()) {
            power = power.saturating_mul(10).saturating_add(i64::from(digit - b'0'));
            probe += 1;
        }
        if probe > digits_start {
            exponent += if negative { -power } else { power };
            pos = probe;
        }
    }
    let exponent = i32::try_from(exponent.clamp(-2000, 2000)).unwrap_or(0);
    Some((value * 2f64.powi(exponent), pos))
}

/// Maps a JSON `Unit` to the PMU name perf stores in its tables (jevents.py `unit_to_pmu`).
///
/// No unit gives `default_core`, perf's wildcard for the core PMU(s). A few units have fixed names;
/// every other unit becomes `uncore_<lower-case unit>`.
pub fn unit_to_pmu(unit: Option<&str>) -> String {
    let Some(unit) = unit.filter(|u| !u.is_empty()) else {
        return "default_core".to_string();
    };
    let fixed = match unit {
        "CBO" => "uncore_cbox",
        "QPI LL" => "uncore_qpi",
        "SBO" => "uncore_sbox",
        "iMPH-U" => "uncore_arb",
        "CPU-M-CF" => "cpum_cf",
        "CPU-M-SF" => "cpum_sf",
        "PAI-CRYPTO" => "pai_crypto",
        "PAI-EXT" => "pai_ext",
        "UPI LL" => "uncore_upi",
        "hisi_sicl,cpa" | "hisi_sccl,ddrc" | "hisi_sccl,hha" | "hisi_sccl,l3c" | "imx8_ddr"
        | "imx9_ddr" | "cpu_core" | "cpu_atom" | "ali_drw" | "arm_cmn" => unit,
        "L3PMC" => "amd_l3",
        "DFPMC" => "amd_df",
        "UMCPMC" => "amd_umc",
        _ => return format!("uncore_{}", unit.to_lowercase()),
    };
    fixed.to_string()
}
