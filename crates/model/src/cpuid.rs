//! perf's cpuid matching rules per architecture (mapfile.csv rows, `strcmp_cpuid_str`) and
//! sys-PMU `Compat` matching. Shared by the vendor loader and the compiled catalogue.

use regex_lite::Regex;

/// Does the cpuid string of a CPU match a mapfile row? Follows perf's `strcmp_cpuid_str` for `arch`:
///
/// * x86 (`<vendor>-<family>-<MODEL>-<STEPPING>`): the regex is searched POSIX-style (leftmost,
///   longest) and must cover the whole cpuid. If the regex has 3 dashes it is "full" and the cpuid must
///   be full too; otherwise the cpuid's `-<stepping>` suffix is not part of what must be matched.
/// * arm64 (MIDR as hex): implementer, architecture and part must be equal; the CPU's variant and
///   revision must be at least the row's (so a row with r0p0 matches every revision).
/// * everything else: the regex must match the whole cpuid.
///
/// An invalid regex never matches (perf prints a note and moves on).
pub fn cpuid_matches(arch: &str, regex: &str, cpuid: &str) -> bool {
    match arch {
        "x86" => x86_matches(regex, cpuid),
        "arm64" => arm64_matches(regex, cpuid),
        _ => full_match(regex, cpuid),
    }
}

/// Does a sys event's or metric's `Compat` regex match a PMU's sysfs `identifier`? The match must
/// cover the whole identifier (perf's `pmu_uncore_identifier_match`).
pub fn compat_matches(compat: &str, identifier: &str) -> bool {
    full_match(compat, identifier)
}

fn full_match(regex: &str, text: &str) -> bool {
    Regex::new(&format!("^(?:{regex})$")).is_ok_and(|re| re.is_match(text))
}

fn x86_matches(regex: &str, cpuid: &str) -> bool {
    let is_full = |s: &str| s.matches('-').count() == 3;
    let full_regex = is_full(regex);
    let full_cpuid = is_full(cpuid);
    if full_regex && !full_cpuid {
        return false;
    }
    let Ok(searcher) = Regex::new(regex) else { return false };
    let Some(leftmost) = searcher.find(cpuid) else { return false };
    // Rust regexes prefer the first alternative; POSIX regexec reports the longest match at the
    // leftmost start, so try the possible ends from the longest down.
    let start = leftmost.start();
    let Ok(anchored) = Regex::new(&format!("^(?:{regex})$")) else { return false };
    let longest_end = (start..=cpuid.len())
        .rev()
        .filter(|&end| cpuid.is_char_boundary(end))
        .find(|&end| anchored.is_match(&cpuid[start..end]))
        .unwrap_or(leftmost.end());
    let match_len = longest_end - start;
    let required_len = match cpuid.rfind('-') {
        Some(last_dash) if !full_regex && full_cpuid => last_dash,
        _ => cpuid.len(),
    };
    match_len == required_len
}

const MIDR_REVISION_MASK: u64 = 0xf;
const MIDR_VARIANT_MASK: u64 = 0xf << 20;

fn arm64_matches(map_midr: &str, cpuid: &str) -> bool {
    let (Some(map_id), Some(id)) = (parse_hex_u64(map_midr), parse_hex_u64(cpuid)) else {
        return false;
    };
    let id_fields = !(MIDR_VARIANT_MASK | MIDR_REVISION_MASK);
    if map_id & id_fields != id & id_fields {
        return false;
    }
    let version = |midr: u64| ((midr & MIDR_VARIANT_MASK) >> 20, midr & MIDR_REVISION_MASK);
    // Compared like two-part versions: r2p0 > r1p3.
    version(id) >= version(map_id)
}

/// Parses `0x...` or bare hex, as strtoull(s, NULL, 16) would for well-formed input.
pub fn parse_hex_u64(text: &str) -> Option<u64> {
    let text = text.trim();
    let digits = text.strip_prefix("0x").or_else(|| text.strip_prefix("0X")).unwrap_or(text);
    u64::from_str_radix(digits, 16).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn x86_prefers_longest_alternative_like_posix() {
        // Leftmost-first would match "A-1" (length 3); POSIX takes "A-12" which covers the cpuid.
        assert!(cpuid_matches("x86", "A-(1|12)", "A-12"));
        assert!(!full_match("A-(1|12)", "A-123"));
    }

    #[test]
    fn x86_full_regex_needs_full_cpuid() {
        assert!(!cpuid_matches("x86", "GenuineIntel-6-55-[01234]", "GenuineIntel-6-55"));
        assert!(cpuid_matches("x86", "GenuineIntel-6-55-[01234]", "GenuineIntel-6-55-4"));
        assert!(cpuid_matches("x86", "GenuineIntel-6-55", "GenuineIntel-6-55"));
        assert!(cpuid_matches("x86", "GenuineIntel-6-55", "GenuineIntel-6-55-9"));
        assert!(!cpuid_matches("x86", "GenuineIntel-6-5", "GenuineIntel-6-55-9"));
    }

    #[test]
    fn arm64_compares_variant_and_revision_as_versions() {
        let row = "0x00000000411fd0c2"; // r1p2
        assert!(cpuid_matches("arm64", row, "0x00000000411fd0c2"));
        assert!(cpuid_matches("arm64", row, "0x00000000411fd0c3"));
        assert!(cpuid_matches("arm64", row, "0x00000000412fd0c0"));
        assert!(!cpuid_matches("arm64", row, "0x00000000411fd0c1"));
        assert!(!cpuid_matches("arm64", row, "0x00000000410fd0c9"));
        assert!(!cpuid_matches("arm64", row, "0x00000000411fd0d2"));
        assert!(!cpuid_matches("arm64", row, "not hex"));
    }
}
