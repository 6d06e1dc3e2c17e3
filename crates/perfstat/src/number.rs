//! Numbers as perf prints them: counts with locale digit grouping, timestamps, metric values.
//!
//! Strict on purpose: a count that could be read two ways (a locale that uses `,` as the
//! decimal mark) is an error, never a silently wrong number.

/// Parses a count such as `181,047,168`, `3038`, `1.02`, `151505816.000000` or `1'234`.
///
/// Digit grouping with `,` or `'` (and the no-break spaces some locales use) must be in groups
/// of three; a count with two or more `.` is taken for a locale that groups digits with `.`.
/// The error says what was wrong, for the caller to put after the line and column.
pub(crate) fn parse_count(text: &str) -> Result<f64, String> {
    if let Some(value) = plain_grouped_integer(text) {
        return Ok(value);
    }
    let cleaned: String = text.chars().filter(|c| !matches!(c, '\u{a0}' | '\u{202f}')).collect();
    let unsigned = cleaned.strip_prefix('-').unwrap_or(&cleaned);
    let (int_part, frac_part) = match unsigned.split_once('.') {
        Some((int_part, frac)) => (int_part, Some(frac)),
        None => (unsigned, None),
    };
    if let Some(frac) = frac_part {
        if frac.contains('.') {
            return Err(format!(
                "count `{text}` has several `.`: perf ran with a locale that groups digits with `.`; rerun it with LC_NUMERIC=C"
            ));
        }
        if frac.is_empty() || !frac.bytes().all(|b| b.is_ascii_digit()) {
            return Err(format!("count `{text}` is not a number"));
        }
    }
    if int_part.is_empty() {
        return Err(format!("count `{text}` is not a number"));
    }
    let mut digits = String::with_capacity(int_part.len());
    if int_part.contains([',', '\'']) {
        let groups: Vec<&str> = int_part.split([',', '\'']).collect();
        let well_formed = groups[0].len() <= 3
            && !groups[0].is_empty()
            && groups[1..].iter().all(|g| g.len() == 3)
            && groups.iter().all(|g| g.bytes().all(|b| b.is_ascii_digit()));
        if !well_formed {
            return Err(format!(
                "count `{text}` is not a number with digits grouped by three; if perf ran with a locale that uses `,` as the decimal mark, rerun it with LC_NUMERIC=C"
            ));
        }
        groups.iter().for_each(|g| digits.push_str(g));
    } else if int_part.bytes().all(|b| b.is_ascii_digit()) {
        digits.push_str(int_part);
    } else {
        return Err(format!("count `{text}` is not a number"));
    }
    let mut plain = String::with_capacity(digits.len() + 8);
    if cleaned.starts_with('-') {
        plain.push('-');
    }
    plain.push_str(&digits);
    if let Some(frac) = frac_part {
        plain.push('.');
        plain.push_str(frac);
    }
    plain.parse::<f64>().map_err(|_| format!("count `{text}` is not a number"))
}

/// The common case without allocating: a non-negative integer of at most 15 digits, plain or
/// grouped by `,` in threes (`181,047,168`). Such a value is exact in an `f64`, so it equals what
/// the general path parses. `None` for anything else, which the general path then reads.
fn plain_grouped_integer(text: &str) -> Option<f64> {
    let bytes = text.as_bytes();
    let mut value: u64 = 0;
    let mut digits = 0;
    // Digits since the last `,`, and whether a `,` was seen.
    let mut run = 0;
    let mut grouped = false;
    for &b in bytes {
        match b {
            b'0'..=b'9' => {
                value = value * 10 + u64::from(b - b'0');
                digits += 1;
                run += 1;
                if digits > 15 {
                    return None;
                }
            }
            b',' => {
                // The first group has one to three digits, every later one exactly three.
                if run == 0 || run > 3 || (grouped && run != 3) {
                    return None;
                }
                grouped = true;
                run = 0;
            }
            _ => return None,
        }
    }
    if digits == 0 || (grouped && run != 3) {
        return None;
    }
    Some(value as f64)
}

/// Whether a token could only be meant as a count (it starts like a number), so that failing
/// to parse it is an error rather than a line of prose.
pub(crate) fn looks_numeric(text: &str) -> bool {
    let rest = text.strip_prefix('-').unwrap_or(text);
    rest.bytes().next().is_some_and(|b| b.is_ascii_digit())
}

/// A plain decimal: optional sign, digits, optional fraction, optional exponent. Used for
/// timestamps, percentages, run times and metric values, which perf never groups.
pub(crate) fn parse_plain(text: &str) -> Option<f64> {
    let t = text.trim();
    let body = t.strip_prefix(['-', '+']).unwrap_or(t);
    let mantissa_end = body.find(['e', 'E']).unwrap_or(body.len());
    let (mantissa, exponent) = body.split_at(mantissa_end);
    let (int_part, frac) = mantissa.split_once('.').unwrap_or((mantissa, ""));
    let digits_ok = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
    if int_part.is_empty() && frac.is_empty() || !digits_ok(int_part) || !digits_ok(frac) {
        return None;
    }
    if !exponent.is_empty() {
        let exp = &exponent[1..];
        let exp = exp.strip_prefix(['-', '+']).unwrap_or(exp);
        if exp.is_empty() || !digits_ok(exp) {
            return None;
        }
    }
    t.parse::<f64>().ok()
}

/// A metric value as perf prints it: a plain decimal, or `nan`/`-nan`/`inf` for results perf
/// could not compute.
pub(crate) fn parse_metric_value(text: &str) -> Option<f64> {
    let text = text.trim();
    let word = |w: &str| text.eq_ignore_ascii_case(w);
    if word("nan") || word("-nan") || word("+nan") {
        Some(f64::NAN)
    } else if word("inf") || word("+inf") {
        Some(f64::INFINITY)
    } else if word("-inf") {
        Some(f64::NEG_INFINITY)
    } else {
        // `1E9` reads as `1e9` (the lower-casing this replaces did the same).
        parse_plain(text)
    }
}

/// An interval timestamp: perf prints `%6lu.%09lu`, so exactly nine decimals. Requiring them
/// keeps a count such as `303.75` from being taken for a timestamp.
pub(crate) fn parse_timestamp(text: &str) -> Option<f64> {
    let t = text.trim();
    let (secs, nanos) = t.split_once('.')?;
    if secs.is_empty() || nanos.len() != 9 {
        return None;
    }
    if !secs.bytes().all(|b| b.is_ascii_digit()) || !nanos.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    t.parse().ok()
}

/// A percentage such as `50.00%` (run share) or `14.01%` (variance), without the sign.
pub(crate) fn parse_percent(text: &str) -> Option<f64> {
    parse_plain(text.trim().strip_suffix('%')?)
}

/// A non-negative integer such as a CPU count or a run time.
pub(crate) fn parse_uint(text: &str) -> Option<u64> {
    let t = text.trim();
    if t.is_empty() || !t.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    t.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts() {
        assert_eq!(parse_count("181,047,168"), Ok(181_047_168.0));
        assert_eq!(parse_count("3038"), Ok(3038.0));
        assert_eq!(parse_count("1.02"), Ok(1.02));
        assert_eq!(parse_count("151505816.000000"), Ok(151_505_816.0));
        assert_eq!(parse_count("1'234'567"), Ok(1_234_567.0));
        assert_eq!(parse_count("1\u{202f}234"), Ok(1234.0));
        assert_eq!(parse_count("53,259,156,071"), Ok(53_259_156_071.0));
        assert_eq!(parse_count("1,234.50"), Ok(1234.5));
    }

    #[test]
    fn the_fast_path_agrees_with_the_general_one() {
        for text in ["0", "7", "1,234", "999,999,999,999,999", "123456789012345", "12,345,678"] {
            let plain: String = text.chars().filter(|c| *c != ',').collect();
            assert_eq!(plain_grouped_integer(text), plain.parse::<f64>().ok(), "{text}");
        }
        // Left to the general path, which knows what is wrong with them.
        for text in ["", ",123", "1,", "1,2", "1,2345", "12,34,567", "1234,567", "1.5", "-1"] {
            assert_eq!(plain_grouped_integer(text), None, "{text}");
        }
        assert_eq!(plain_grouped_integer("1234567890123456"), None);
        assert_eq!(parse_count("1234567890123456789"), Ok(1_234_567_890_123_456_789.0));
    }

    #[test]
    fn ambiguous_counts_are_errors() {
        for bad in
            ["1,02", "1.234.567", "12,34,567", ",123", "1,", "1.", "abc", "1x", "", "-", "1,2a4"]
        {
            assert!(parse_count(bad).is_err(), "{bad}");
        }
        assert!(parse_count("1,02").unwrap_err().contains("LC_NUMERIC=C"));
        assert!(parse_count("1.234.567").unwrap_err().contains("LC_NUMERIC=C"));
    }

    #[test]
    fn timestamps_need_nine_decimals() {
        assert_eq!(parse_timestamp("     1.001234567"), Some(1.001234567));
        assert_eq!(parse_timestamp("303.75"), None);
        assert_eq!(parse_timestamp("1,001234567"), None);
    }

    #[test]
    fn plain_and_metric_values() {
        assert_eq!(parse_plain("0.6"), Some(0.6));
        assert_eq!(parse_plain("1e9"), Some(1e9));
        assert_eq!(parse_plain("inf"), None);
        assert_eq!(parse_plain("."), None);
        assert!(parse_metric_value("nan").is_some_and(f64::is_nan));
        assert!(parse_metric_value("-nan").is_some_and(f64::is_nan));
        assert!(parse_metric_value(" NaN ").is_some_and(f64::is_nan));
        assert_eq!(parse_metric_value("-INF"), Some(f64::NEG_INFINITY));
        assert_eq!(parse_metric_value("1E3"), Some(1000.0));
        assert_eq!(parse_metric_value("nanx"), None);
        assert_eq!(parse_percent("(50.00%)".trim_matches(['(', ')'])), Some(50.0));
    }
}
