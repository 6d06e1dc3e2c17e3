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
    prefixes(regex).is_none_or(|p| p.iter().any(|p| text.starts_with(p.as_str())))
        && full_regex_match(regex, text)
}

fn full_regex_match(regex: &str, text: &str) -> bool {
    Regex::new(&format!("^(?:{regex})$")).is_ok_and(|re| re.is_match(text))
}

/// The most strings [`prefixes`] builds before it stops extending them.
const MAX_PREFIXES: usize = 64;

/// Strings one of which starts every match of `regex`, or `None` when it cannot tell.
///
/// Finding the host's model tries every `mapfile.csv` row in file order, and compiling each
/// row's regex was most of tmetric's start-up; these prefixes rule out almost every row
/// without a regex. They cover the part of the pattern made of literal characters, bracket
/// classes and groups of alternatives, and stop at anything else (`.`, `\`, a quantifier,
/// which may make the atom before it optional, an anchor after the start), so they are a
/// necessary condition only: a row they do not rule out is decided by the regex as before.
fn prefixes(regex: &str) -> Option<Vec<String>> {
    let pattern = regex.strip_prefix('^').unwrap_or(regex).as_bytes();
    let mut at = 0;
    let (found, _) = alternatives(pattern, &mut at)?;
    Some(found)
}

/// `a|b|...` up to the end of the pattern or a closing parenthesis: the union of the
/// alternatives' prefixes, and whether each alternative was followed to its end.
fn alternatives(p: &[u8], at: &mut usize) -> Option<Prefixes> {
    let mut all = Vec::new();
    let mut complete = true;
    loop {
        let (found, whole) = sequence(p, at)?;
        complete &= whole;
        all.extend(found);
        if all.len() > MAX_PREFIXES {
            return None;
        }
        match p.get(*at) {
            Some(b'|') => *at += 1,
            _ => return Some((all, complete)),
        }
    }
}

/// One alternative: its prefixes and whether they are the whole alternative. On return `at` is
/// at its `|` or `)`, or the end of the pattern.
fn sequence(p: &[u8], at: &mut usize) -> Option<Prefixes> {
    let mut found = vec![String::new()];
    while let Some(&c) = p.get(*at) {
        if matches!(c, b'|' | b')') {
            return Some((found, true));
        }
        let start = *at;
        let followed = atom(p, at)?.filter(|(choices, _)| {
            !matches!(p.get(*at), Some(b'?' | b'*' | b'+' | b'{'))
                && found.len() * choices.len() <= MAX_PREFIXES
        });
        let Some((choices, whole)) = followed else {
            // Not followed: what is known so far, up to this alternative's end.
            *at = start;
            skip_alternative(p, at)?;
            return Some((found, false));
        };
        found = found.iter().flat_map(|f| choices.iter().map(move |c| format!("{f}{c}"))).collect();
        if !whole {
            skip_alternative(p, at)?;
            return Some((found, false));
        }
    }
    Some((found, true))
}

/// Prefixes, and whether they are whole matches rather than their beginnings.
type Prefixes = (Vec<String>, bool);

/// One literal character, bracket class or group: its strings and whether they are all of it.
/// `Some(None)` for what the prefixes do not follow, `None` for a pattern that does not parse.
fn atom(p: &[u8], at: &mut usize) -> Option<Option<Prefixes>> {
    match p[*at] {
        b'(' => {
            if p[*at + 1..].starts_with(b"?") && !p[*at + 1..].starts_with(b"?:") {
                return Some(None);
            }
            *at += if p[*at + 1..].starts_with(b"?:") { 3 } else { 1 };
            let group = alternatives(p, at)?;
            if p.get(*at) != Some(&b')') {
                return None;
            }
            *at += 1;
            Some(Some(group))
        }
        b'[' => Some(class(p, at).map(|chars| (chars, true))),
        c if c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b',' | b':' | b'/' | b'=') => {
            *at += 1;
            Some(Some((vec![char::from(c).to_string()], true)))
        }
        _ => Some(None),
    }
}

/// A bracket class of literal characters, ranges and `[:digit:]`/`[:xdigit:]`: its characters.
/// `None` (and `at` unmoved) for any other class.
fn class(p: &[u8], at: &mut usize) -> Option<Vec<String>> {
    let mut i = *at + 1;
    let mut chars: Vec<u8> = Vec::new();
    loop {
        let c = *p.get(i)?;
        if c == b']' && i > *at + 1 {
            break;
        }
        if p[i..].starts_with(b"[:xdigit:]") {
            chars.extend(b"0123456789abcdefABCDEF");
            i += 10;
        } else if p[i..].starts_with(b"[:digit:]") {
            chars.extend(b"0123456789");
            i += 9;
        } else if c.is_ascii_alphanumeric() {
            match (p.get(i + 1), p.get(i + 2)) {
                (Some(b'-'), Some(&end)) if end.is_ascii_alphanumeric() && end >= c => {
                    chars.extend(c..=end);
                    i += 3;
                }
                _ => {
                    chars.push(c);
                    i += 1;
                }
            }
        } else {
            return None;
        }
    }
    *at = i + 1;
    chars.sort_unstable();
    chars.dedup();
    Some(chars.into_iter().map(|c| char::from(c).to_string()).collect())
}

/// Moves `at` to the end of the current alternative (its `|` or `)` at this depth, or the end
/// of the pattern), over nested groups and classes.
fn skip_alternative(p: &[u8], at: &mut usize) -> Option<()> {
    let mut depth = 0usize;
    while let Some(&c) = p.get(*at) {
        match c {
            b'\\' => *at += 1,
            b'[' => {
                // A class may hold `(`, `|` or `)`; `]` first in it is a literal.
                *at += 2;
                while *p.get(*at)? != b']' {
                    *at += 1;
                }
            }
            b'(' => depth += 1,
            b')' if depth == 0 => return Some(()),
            b')' => depth -= 1,
            b'|' if depth == 0 => return Some(()),
            _ => {}
        }
        *at += 1;
    }
    Some(())
}

fn x86_matches(regex: &str, cpuid: &str) -> bool {
    prefixes(regex).is_none_or(|p| p.iter().any(|p| cpuid.contains(p.as_str())))
        && x86_regex_matches(regex, cpuid)
}

fn x86_regex_matches(regex: &str, cpuid: &str) -> bool {
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

    /// The distinct regexes of perf's mapfile.csv rows (every stored vintage), and a few forms
    /// the prefixes must give up on.
    const REGEXES: &[&str] = &[
        "004[bcd][[:xdigit:]]{4}",
        "0x0066[[:xdigit:]]{4}",
        "0x00ffffff",
        "0x31e-0x8000000000008a45-0x[[:xdigit:]]+",
        "0x489-0x8000000000000[1-6]08-0x[9b][[:xdigit:]]+",
        "0x489-0x8000000000000[1-9a-e]07-0x[78ac][[:xdigit:]]+",
        "0x67e-0x80000000db0000[89]0-0x[[:xdigit:]]+",
        "AuthenticAMD-23-([12][0-9A-F]|[0-9A-F])",
        "AuthenticAMD-23-[[:xdigit:]]+",
        "AuthenticAMD-25-([245][[:xdigit:]]|[[:xdigit:]])",
        "AuthenticAMD-26-([12467][[:xdigit:]]|[[:xdigit:]])",
        "GenuineIntel-6-(1C|26|27|35|36)",
        "GenuineIntel-6-(97|9A|B7|BA|BE|BF)",
        "GenuineIntel-6-1[AEF]",
        "GenuineIntel-6-55-[01234]",
        "GenuineIntel-6-55-[56789ABCDEF]",
        "GenuineIntel-6-[4589]E",
        "GenuineIntel-6-8F",
        "^IBM.209[78].*[13]\\.[1-5].[[:xdigit:]]+$",
        "^IBM.393[12].*$",
        "(?i)genuineintel-6-8f",
        "GenuineIntel-6-(8F)?",
        "Genuine(Intel|AMD)-6-.*",
        "GenuineIntel-6-[^0]F",
        "(GenuineIntel|AuthenticAMD)-1[0-9]",
    ];

    fn cpuids() -> Vec<String> {
        let mut out = vec!["genuineintel-6-8F-4".to_string()];
        for vendor in ["GenuineIntel", "AuthenticAMD"] {
            for family in [6, 23, 25, 26] {
                for model in [0x02u32, 0x0F, 0x1A, 0x1E, 0x1F, 0x3D, 0x4E, 0x55, 0x8F, 0xBF] {
                    out.push(format!("{vendor}-{family}-{model:X}"));
                    for stepping in [4, 0xb] {
                        out.push(format!("{vendor}-{family}-{model:X}-{stepping:X}"));
                    }
                }
            }
        }
        for pvr in ["0x004b1234", "0x0080abcd", "0x0066ffff", "004c0000", "0x00ffffff"] {
            out.push(pvr.to_string());
        }
        out.extend(
            [
                "IBM,2097,x,3.4,abc",
                "IBM,3931,y,3.7,00ff",
                "IBM.3932",
                "0x489-0x8000000000000308-0x9f",
            ]
            .map(String::from),
        );
        out
    }

    #[test]
    fn prefixes_rule_out_only_what_the_regex_does_not_match() {
        let (mut matched, mut ruled_out, mut decided_by_regex) = (0, 0, 0);
        for regex in REGEXES {
            for cpuid in cpuids() {
                for arch in ["x86", "powerpc"] {
                    let (got, want) = if arch == "x86" {
                        (x86_matches(regex, &cpuid), x86_regex_matches(regex, &cpuid))
                    } else {
                        (full_match(regex, &cpuid), full_regex_match(regex, &cpuid))
                    };
                    assert_eq!(got, want, "{arch} {regex} {cpuid}");
                    matched += usize::from(want);
                    let possible = prefixes(regex).is_none_or(|p| {
                        p.iter().any(|p| {
                            if arch == "x86" {
                                cpuid.contains(p.as_str())
                            } else {
                                cpuid.starts_with(p.as_str())
                            }
                        })
                    });
                    ruled_out += usize::from(!possible);
                    decided_by_regex += usize::from(possible);
                }
            }
        }
        assert!(matched > 100, "the sweep matches: {matched}");
        assert!(ruled_out > 10 * decided_by_regex, "{ruled_out} ruled out, {decided_by_regex} not");
    }

    #[test]
    fn prefixes_follow_literals_classes_and_groups_and_stop_at_the_rest() {
        let of = |regex: &str| {
            prefixes(regex).map(|mut p| {
                p.sort();
                p
            })
        };
        assert_eq!(
            of("GenuineIntel-6-(3D|47)").unwrap(),
            ["GenuineIntel-6-3D", "GenuineIntel-6-47"]
        );
        assert_eq!(of("GenuineIntel-6-1[AE]").unwrap(), ["GenuineIntel-6-1A", "GenuineIntel-6-1E"]);
        assert_eq!(of("0x004e[[:xdigit:]]{4}").unwrap(), ["0x004e"]);
        assert_eq!(of("^IBM.393[12].*$").unwrap(), ["IBM"]);
        assert_eq!(of("GenuineIntel-6-(8F)?").unwrap(), ["GenuineIntel-6-"]);
        assert_eq!(of("(?i)intel").unwrap(), [""]);
        assert_eq!(of("AuthenticAMD-25-([245][[:xdigit:]]|[[:xdigit:]])").unwrap().len(), 25);
        // More than 64 alternatives at once: no prefixes, the regex decides.
        assert_eq!(
            of(
                "[[:xdigit:]][[:xdigit:]][[:xdigit:]]|a|b|c|d|e|f|g|h|i|j|k|l|m|n|o|p|q|r|s|t|u|v|w|x|y|z|A|B|C|D|E|F|G|H|I|J|K|L|M|N|O|P|Q|R|S|T|U|V|W|X|Y|Z|0|1|2|3|4|5|6|7|8|9|-"
            ),
            None
        );
        assert_eq!(of("a(b"), None);
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
