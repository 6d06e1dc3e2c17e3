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
    may_match(regex, text, false) && full_regex_match(regex, text)
}

fn full_regex_match(regex: &str, text: &str) -> bool {
    Regex::new(&format!("^(?:{regex})$")).is_ok_and(|re| re.is_match(text))
}

/// Whether some match of `regex` could begin at `text`'s start (or, with `search`, anywhere in
/// it): `false` only when none can.
///
/// Finding the host's model tries every `mapfile.csv` row in file order, and compiling each
/// row's regex was most of tmetric's start-up; this rules out almost every row without
/// compiling one. It follows literal characters, bracket classes and groups of alternatives,
/// and takes anything else (`.`, an escape, an anchor after the start, a quantifier, which may
/// make the atom before it optional) as matching whatever follows. So it is a necessary
/// condition only: a row it does not rule out is decided by the regex as before.
fn may_match(regex: &str, text: &str, search: bool) -> bool {
    let p = regex.strip_prefix('^').unwrap_or(regex).as_bytes();
    // Where the top level's alternatives start, found once rather than at every position.
    let mut starts = vec![0];
    while let Some(&b'|') = p.get(boundary(p, starts[starts.len() - 1])) {
        starts.push(boundary(p, starts[starts.len() - 1]) + 1);
    }
    let mut m = Prefilter { p, t: text.as_bytes(), budget: 10_000 };
    let last = if search { text.len() } else { 0 };
    (0..=last).any(|j| starts.iter().any(|&a| m.from(a, j)))
}

/// The state of [`may_match`]: pattern, text, and steps left before it gives up (and answers
/// that a match is possible).
struct Prefilter<'a> {
    p: &'a [u8],
    t: &'a [u8],
    budget: u32,
}

impl Prefilter<'_> {
    /// Could one of the alternatives starting at `first` (up to their group's `)` or the end)
    /// match the text from `j` on?
    fn alternatives(&mut self, first: usize, j: usize) -> bool {
        let mut at = first;
        loop {
            if self.from(at, j) {
                return true;
            }
            match boundary(self.p, at) {
                bar if self.p.get(bar) == Some(&b'|') => at = bar + 1,
                _ => return false,
            }
        }
    }

    /// Could the pattern from `i` on match the text from `j` on?
    fn from(&mut self, i: usize, j: usize) -> bool {
        if self.budget == 0 {
            return true;
        }
        self.budget -= 1;
        let (p, t) = (self.p, self.t);
        let Some(&c) = p.get(i) else { return true };
        let quantified = |k: usize| matches!(p.get(k), Some(b'?' | b'*' | b'+' | b'{'));
        match c {
            // This alternative matched: go on after its group (or, at the top level, done).
            b'|' | b')' => match close(p, i) {
                end if end < p.len() => self.from(end + 1, j),
                _ => true,
            },
            b'(' => {
                let first = match (p.get(i + 1), p.get(i + 2)) {
                    (Some(b'?'), Some(b':')) => i + 3,
                    (Some(b'?'), _) => return true,
                    _ => i + 1,
                };
                let end = close(p, first);
                if end >= p.len() || quantified(end + 1) {
                    return true;
                }
                self.alternatives(first, j)
            }
            b'[' => match class(p, i) {
                Some((set, next)) if !quantified(next) => {
                    t.get(j).is_some_and(|&b| b < 128 && set & 1 << b != 0)
                        && self.from(next, j + 1)
                }
                _ => true,
            },
            c if (c.is_ascii_alphanumeric()
                || matches!(c, b'-' | b'_' | b',' | b':' | b'/' | b'='))
                && !quantified(i + 1) =>
            {
                t.get(j) == Some(&c) && self.from(i + 1, j + 1)
            }
            _ => true,
        }
    }
}

/// A bracket class at `p[i]` of literal characters, ranges and `[:digit:]`/`[:xdigit:]`: its
/// ASCII characters as bits, and where the pattern goes on. `None` for any other class.
fn class(p: &[u8], i: usize) -> Option<(u128, usize)> {
    let mut k = i + 1;
    let mut set = 0u128;
    let mut add = |from: u8, to: u8| (from..=to).for_each(|c| set |= 1 << c);
    loop {
        let c = *p.get(k)?;
        if c == b']' && k > i + 1 {
            return Some((set, k + 1));
        }
        if p[k..].starts_with(b"[:xdigit:]") {
            add(b'0', b'9');
            add(b'a', b'f');
            add(b'A', b'F');
            k += 10;
        } else if p[k..].starts_with(b"[:digit:]") {
            add(b'0', b'9');
            k += 9;
        } else if !c.is_ascii_alphanumeric() {
            return None;
        } else if let (Some(b'-'), Some(&end)) = (p.get(k + 1), p.get(k + 2))
            && end.is_ascii_alphanumeric()
        {
            add(c, end);
            k += 3;
        } else {
            add(c, c);
            k += 1;
        }
    }
}

/// The first `|` or `)` at the depth of `p[i]` (over nested groups and classes), or the end.
fn boundary(p: &[u8], mut i: usize) -> usize {
    let mut depth = 0usize;
    while let Some(&c) = p.get(i) {
        match c {
            b'\\' => i += 1,
            // A class may hold `(`, `|` or `)`; `]` first in it is a literal.
            b'[' => {
                i += 2;
                while p.get(i).is_some_and(|&c| c != b']') {
                    i += 1;
                }
            }
            b'(' => depth += 1,
            b')' | b'|' if depth == 0 => return i,
            b')' => depth -= 1,
            _ => {}
        }
        i += 1;
    }
    p.len()
}

/// The `)` that closes the group `p[i]` is in (the end of the pattern at the top level).
fn close(p: &[u8], i: usize) -> usize {
    let mut at = boundary(p, i);
    while p.get(at) == Some(&b'|') {
        at = boundary(p, at + 1);
    }
    at
}

fn x86_matches(regex: &str, cpuid: &str) -> bool {
    may_match(regex, cpuid, true) && x86_regex_matches(regex, cpuid)
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
                    let possible = may_match(regex, &cpuid, arch == "x86");
                    ruled_out += usize::from(!possible);
                    decided_by_regex += usize::from(possible);
                }
            }
        }
        assert!(matched > 100, "the sweep matches: {matched}");
        assert!(ruled_out > 10 * decided_by_regex, "{ruled_out} ruled out, {decided_by_regex} not");
    }

    #[test]
    fn the_prefilter_follows_literals_classes_and_groups_and_gives_up_on_the_rest() {
        let whole = |regex: &str, text: &str| may_match(regex, text, false);
        assert!(whole("GenuineIntel-6-(3D|47)", "GenuineIntel-6-47"));
        assert!(!whole("GenuineIntel-6-(3D|47)", "GenuineIntel-6-48"));
        assert!(!whole("GenuineIntel-6-(3D|47)", "GenuineIntel-6-4"));
        assert!(whole("GenuineIntel-6-1[AE]", "GenuineIntel-6-1E"));
        assert!(!whole("GenuineIntel-6-1[AE]", "GenuineIntel-6-1F"));
        assert!(whole("0x004e[[:xdigit:]]{4}", "0x004e"));
        assert!(!whole("0x004e[[:xdigit:]]{4}", "0x004f1234"));
        assert!(whole("^IBM.393[12].*$", "IBM"));
        assert!(!whole("^IBM.393[12].*$", "IBN.3931"));
        // After a quantifier or a group it cannot read, anything may follow.
        assert!(whole("GenuineIntel-6-(8F)?", "GenuineIntel-6-"));
        assert!(whole("(?i)intel", "INTEL"));
        assert!(whole("a|b|(c)", "c"));
        assert!(!whole("a|b|(c)", "d"));
        // A search finds the pattern anywhere; a whole match only at the start.
        assert!(may_match("Intel-6-8F", "GenuineIntel-6-8F-4", true));
        assert!(!whole("Intel-6-8F", "GenuineIntel-6-8F-4"));
        // Too many paths to try: it gives up and lets the regex decide.
        let many = format!("{}b", "(a|a)".repeat(20));
        assert!(whole(&many, &"a".repeat(21)));
        assert!(!whole("(a|a)(a|a)b", "aac"));
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
