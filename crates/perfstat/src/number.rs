//! Numbers as perf prints them: counts with the locale's digit grouping and decimal mark,
//! timestamps, metric values, run shares and times.
//!
//! perf calls `setlocale(LC_ALL, "")`, so every `%f` it prints uses the locale's decimal mark
//! and its counts (`%'.0f`, `%'.2f`) the locale's digit grouping: `4.595.014.128` and `2,155
//! GHz` (de_DE), `4 595 014 128` with a narrow no-break space (fr_FR), `4,59,50,14,128` (en_IN's
//! lakh grouping). Only the `-I` timestamp (`%lu.%09lu`) keeps a literal `.`.
//!
//! Each number is read on its own shape ([`Marks`]: which character grouped digits and which was
//! the decimal mark), which perf's fixed formats make unambiguous: counts have no decimals or
//! exactly two (six in `-j`), never three, so one separator before three digits groups them;
//! metric values, run shares and times are never grouped, so their one separator is the decimal
//! mark. [`Numbers`] then holds the log to one convention: a number whose marks contradict
//! what earlier lines showed (`1,02` after `1,234,567`) is an error naming both lines, never a
//! guess.

use std::fmt;

/// How digits were grouped, as far as one number shows.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Grouping {
    /// Not shown (fewer than two groups, or groups that fit both conventions).
    #[default]
    Either,
    /// Groups of three: `4,595,014,128`.
    Thousands,
    /// Indian lakh grouping, three digits then twos: `4,59,50,14,128`.
    Lakh,
}

/// Which characters played which role in one number.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Marks {
    pub decimal: Option<char>,
    pub group: Option<char>,
    pub grouping: Grouping,
}

impl Marks {
    fn plain() -> Marks {
        Marks::default()
    }
}

/// Characters that group digits only: spaces (ASCII, no-break, narrow no-break) and apostrophes
/// (de_CH). `,` and `.` may be either.
fn only_groups(c: char) -> bool {
    matches!(c, ' ' | '\u{a0}' | '\u{202f}' | '\'' | '\u{2019}')
}

fn is_mark(c: char) -> bool {
    c == ',' || c == '.' || only_groups(c)
}

/// Parses a count such as `181,047,168`, `3038`, `1.02`, `151505816.000000`, `4.595.014.128`,
/// `1.520,45`, `4 595 014 128` or `4,59,50,14,128`, with the marks it used.
///
/// The error says what was wrong, for the caller to put after the line and column.
pub(crate) fn parse_count(text: &str) -> Result<(f64, Marks), String> {
    if let Some(found) = plain_grouped_integer(text).or_else(|| plain_decimal(text)) {
        return Ok(found);
    }
    let unsigned = text.strip_prefix('-').unwrap_or(text);
    let not_a_number = || format!("count `{text}` is not a number");
    if unsigned.is_empty() || !unsigned.starts_with(|c: char| c.is_ascii_digit()) {
        return Err(not_a_number());
    }
    if !unsigned.chars().all(|c| c.is_ascii_digit() || is_mark(c)) {
        return Err(not_a_number());
    }
    // The separators in order, and the digit runs between them.
    let mut seps: Vec<char> = Vec::new();
    let mut runs: Vec<&str> = Vec::new();
    let mut start = 0;
    for (i, c) in unsigned.char_indices() {
        if is_mark(c) {
            runs.push(&unsigned[start..i]);
            seps.push(c);
            start = i + c.len_utf8();
        }
    }
    runs.push(&unsigned[start..]);
    if runs.iter().any(|r| r.is_empty()) {
        return Err(not_a_number());
    }
    let Some(&last) = seps.last() else {
        // Digits only, too many for the fast path.
        return text.parse::<f64>().map(|v| (v, Marks::plain())).map_err(|_| not_a_number());
    };
    let distinct = {
        let mut d: Vec<char> = seps.clone();
        d.dedup();
        d.sort_unstable();
        d.dedup();
        d
    };
    // Which separator is the decimal mark.
    let decimal = match distinct.len() {
        1 if seps.len() > 1 || only_groups(last) => None,
        1 => {
            // One `,` or `.`: digits grouped by three (perf never prints three decimals),
            // unless the first group is a lone 0, which grouping never writes.
            if runs[1].len() == 3 && runs[0] != "0" { None } else { Some(last) }
        }
        2 => {
            // `1.520,45`: the last separator, once, is the decimal mark; the other groups.
            if seps.iter().filter(|&&c| c == last).count() != 1 || only_groups(last) {
                return Err(format!(
                    "count `{text}` mixes `{}` and `{}` in a way no locale prints numbers",
                    distinct[0], distinct[1]
                ));
            }
            Some(last)
        }
        _ => {
            return Err(format!(
                "count `{text}` has three kinds of separators; no locale prints numbers so"
            ));
        }
    };
    let int_runs = if decimal.is_some() { &runs[..runs.len() - 1] } else { &runs[..] };
    let group = if int_runs.len() > 1 { Some(seps[0]) } else { None };
    let grouping = match group {
        None => Grouping::Either,
        Some(_) => grouping_of(int_runs).ok_or_else(|| {
            format!(
                "count `{text}` is not a number with digits grouped by three (or by the Indian lakh pattern, `4,59,50,14,128`)"
            )
        })?,
    };
    let mut plain = String::with_capacity(unsigned.len() + 1);
    if text.starts_with('-') {
        plain.push('-');
    }
    for r in int_runs {
        plain.push_str(r);
    }
    if decimal.is_some() {
        plain.push('.');
        plain.push_str(runs[runs.len() - 1]);
    }
    let value = plain.parse::<f64>().map_err(|_| not_a_number())?;
    Ok((value, Marks { decimal, group, grouping }))
}

/// The grouping the digit runs of an integer part follow, `None` when neither.
fn grouping_of(runs: &[&str]) -> Option<Grouping> {
    let (first, rest) = runs.split_first()?;
    let (last, middle) = rest.split_last()?;
    if last.len() != 3 || first.is_empty() {
        return None;
    }
    let thousands = first.len() <= 3 && middle.iter().all(|g| g.len() == 3);
    let lakh = first.len() <= 2 && middle.iter().all(|g| g.len() == 2);
    match (thousands, lakh) {
        (true, true) => Some(Grouping::Either),
        (true, false) => Some(Grouping::Thousands),
        (false, true) => Some(Grouping::Lakh),
        (false, false) => None,
    }
}

/// The common case without allocating: a non-negative integer of at most 15 digits, plain or
/// grouped by `,` in threes (`181,047,168`). Such a value is exact in an `f64`, so it equals what
/// the general path parses. `None` for anything else, which the general path then reads.
fn plain_grouped_integer(text: &str) -> Option<(f64, Marks)> {
    let bytes = text.as_bytes();
    let mut value: u64 = 0;
    let mut digits = 0;
    // Digits since the last `,`, and how many `,` were seen.
    let mut run = 0;
    let mut groups = 0;
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
                if run == 0 || run > 3 || (groups > 0 && run != 3) {
                    return None;
                }
                groups += 1;
                run = 0;
            }
            _ => return None,
        }
    }
    if digits == 0 || (groups > 0 && run != 3) {
        return None;
    }
    let marks = match groups {
        0 => Marks::plain(),
        // `1,234` and `12,345` fit the lakh pattern too; `123,456` and `1,234,567` do not.
        1 if digits <= 5 => Marks { decimal: None, group: Some(','), grouping: Grouping::Either },
        _ => Marks { decimal: None, group: Some(','), grouping: Grouping::Thousands },
    };
    Some((value as f64, marks))
}

/// Powers of ten that are exact in an `f64`, for [`plain_decimal`].
const EXACT_POWERS_OF_TEN: [f64; 16] =
    [1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15];

/// The other common case without allocating: `20.00`, `1,234.56` (the clocks' `msec` counts,
/// `-j`'s six decimals): digits, maybe grouped by `,` in threes, a `.` and at most 15 digits in
/// all. `N / 10^d` with both exact in an `f64` is one correctly rounded division, the value
/// `str::parse` gives for the same digits, so this equals the general path. A lone `.` before
/// three digits (`1.234`, de_DE's grouping or three decimals) is left to the general path.
fn plain_decimal(text: &str) -> Option<(f64, Marks)> {
    let (int, frac) = text.split_once('.')?;
    let (_, int_marks) = plain_grouped_integer(int)?;
    if frac.is_empty() || !frac.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    if int_marks.group.is_none() && frac.len() == 3 {
        return None;
    }
    let mut value: u64 = 0;
    let mut digits = 0;
    for b in int.bytes().chain(frac.bytes()).filter(u8::is_ascii_digit) {
        value = value * 10 + u64::from(b - b'0');
        digits += 1;
        if digits > 15 {
            return None;
        }
    }
    // At most 15 digits, so `frac.len()` indexes the table.
    let value = value as f64 / EXACT_POWERS_OF_TEN[frac.len()];
    Some((value, Marks { decimal: Some('.'), ..int_marks }))
}

/// Whether a token could only be meant as a count (it starts like a number), so that failing
/// to parse it is an error rather than a line of prose.
pub(crate) fn looks_numeric(text: &str) -> bool {
    let rest = text.strip_prefix('-').unwrap_or(text);
    rest.bytes().next().is_some_and(|b| b.is_ascii_digit())
}

/// A plain decimal with a `.`: optional sign, digits, optional fraction, optional exponent.
/// Used where perf writes `.` whatever the locale (JSON numbers) and for the C locale's values.
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

/// A value perf prints with `%f` and never groups (metric values, run shares, variances,
/// times): a plain decimal whose one separator, `.` or `,`, is the decimal mark.
pub(crate) fn parse_value(text: &str) -> Option<(f64, Marks)> {
    let t = text.trim();
    // The common case, digits and at most one `.`, in one pass over the bytes.
    let mut dots = 0;
    if t.bytes().all(|b| {
        dots += usize::from(b == b'.');
        b.is_ascii_digit() || b == b'.'
    }) && dots <= 1
    {
        let value = match exact_decimal(t) {
            Some(value) => value,
            None => parse_plain(t)?,
        };
        let decimal = (dots == 1).then_some('.');
        return Some((value, Marks { decimal, ..Marks::plain() }));
    }
    match t.find(',') {
        None => {
            let value = parse_plain(t)?;
            let decimal = t.contains('.').then_some('.');
            Some((value, Marks { decimal, ..Marks::plain() }))
        }
        Some(_) if t.contains('.') => None,
        Some(at) => {
            let mut c = String::with_capacity(t.len());
            c.push_str(&t[..at]);
            c.push('.');
            c.push_str(&t[at + 1..]);
            let value = parse_plain(&c)?;
            Some((value, Marks { decimal: Some(','), ..Marks::plain() }))
        }
    }
}

/// A value perf printed next to a count or metric (`2.155`, `2,155`, `nan`), read with either
/// decimal mark. For callers that compare against perf's printed text.
pub fn printed_value(text: &str) -> Option<f64> {
    parse_metric_value(text).map(|(v, _)| v)
}

/// Number of decimals in a value perf printed with either decimal mark (`2,155` has 3).
pub fn printed_decimals(text: &str) -> usize {
    let t = text.trim().trim_end_matches('%');
    t.rsplit_once(['.', ',']).map_or(0, |(_, frac)| frac.len())
}

/// A metric value as perf prints it: a decimal with either mark, or `nan`/`-nan`/`inf` for
/// results perf could not compute.
pub(crate) fn parse_metric_value(text: &str) -> Option<(f64, Marks)> {
    let text = text.trim();
    let word = |w: &str| text.eq_ignore_ascii_case(w);
    if word("nan") || word("-nan") || word("+nan") {
        Some((f64::NAN, Marks::plain()))
    } else if word("inf") || word("+inf") {
        Some((f64::INFINITY, Marks::plain()))
    } else if word("-inf") {
        Some((f64::NEG_INFINITY, Marks::plain()))
    } else {
        // `1E9` reads as `1e9` (the lower-casing this replaces did the same).
        parse_value(text)
    }
}

/// An interval timestamp: perf prints `%6lu.%09lu`, so exactly nine decimals after a literal
/// `.` in every locale. Requiring them keeps a count such as `303.75` from being taken for a
/// timestamp.
pub(crate) fn parse_timestamp(text: &str) -> Option<f64> {
    let t = text.trim();
    let (secs, nanos) = t.split_once('.')?;
    if secs.is_empty() || nanos.len() != 9 {
        return None;
    }
    if !secs.bytes().all(|b| b.is_ascii_digit()) || !nanos.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    exact_decimal(t).or_else(|| t.parse().ok())
}

/// Digits with at most one `.` (`950.000`, `5.`, `.5`), at most 15 of them: their value as one
/// correctly rounded division of two numbers exact in an `f64`, which is what `str::parse`
/// gives for the same text, without its general algorithm. `None` for anything else.
fn exact_decimal(text: &str) -> Option<f64> {
    let mut value: u64 = 0;
    let mut digits = 0;
    let mut decimals = None;
    for b in text.bytes() {
        match b {
            b'0'..=b'9' => {
                value = value * 10 + u64::from(b - b'0');
                digits += 1;
                if digits > 15 {
                    return None;
                }
                if let Some(d) = decimals.as_mut() {
                    *d += 1;
                }
            }
            b'.' if decimals.is_none() => decimals = Some(0),
            _ => return None,
        }
    }
    if digits == 0 {
        return None;
    }
    Some(value as f64 / EXACT_POWERS_OF_TEN[decimals.unwrap_or(0)])
}

/// A percentage such as `50.00%` or `51,32%` (run share, variance), without the sign.
pub(crate) fn parse_percent(text: &str) -> Option<(f64, Marks)> {
    parse_value(text.trim().strip_suffix('%')?)
}

/// A non-negative integer such as a CPU count or a run time.
pub(crate) fn parse_uint(text: &str) -> Option<u64> {
    let t = text.trim();
    if t.is_empty() || !t.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    t.parse().ok()
}

/// Where a log showed a mark's role: its line and the number.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Seen {
    /// The character.
    pub mark: char,
    /// 1-based line.
    pub line: usize,
    /// The number it was in, as printed.
    pub text: String,
}

impl fmt::Display for Seen {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "line {} `{}`", self.line, self.text)
    }
}

/// The number convention of a log (perf's `LC_NUMERIC`), as far as its numbers have shown it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Numbers {
    /// The decimal mark and where it was first seen.
    pub decimal: Option<Seen>,
    /// The digit-group separator and where it was first seen.
    pub group: Option<Seen>,
    /// Groups of three or the lakh pattern, when a number showed which.
    pub grouping: Option<(Grouping, Seen)>,
}

/// How a mark is named in messages.
fn mark_name(c: char) -> String {
    match c {
        ' ' => "a space".to_string(),
        '\u{a0}' => "a no-break space (U+00A0)".to_string(),
        '\u{202f}' => "a narrow no-break space (U+202F)".to_string(),
        '\u{2019}' => "`’`".to_string(),
        c => format!("`{c}`"),
    }
}

impl Numbers {
    /// Holds the log to the marks of a number read on `line`; an error when they contradict
    /// what an earlier number showed (the message names both).
    pub(crate) fn accept(&mut self, marks: Marks, line: usize, text: &str) -> Result<(), String> {
        if marks == Marks::plain() {
            return Ok(());
        }
        let seen = |mark: char| Seen { mark, line, text: crate::error::shorten(text, 40) };
        if let Some(d) = marks.decimal {
            if let Some(g) = self.group.as_ref().filter(|g| g.mark == d) {
                return Err(conflict(text, d, "as the decimal mark", g, "groups digits with it"));
            }
            match &self.decimal {
                Some(known) if known.mark != d => {
                    return Err(conflict(
                        text,
                        d,
                        "as the decimal mark",
                        known,
                        &format!("uses {}", mark_name(known.mark)),
                    ));
                }
                Some(_) => {}
                None => self.decimal = Some(seen(d)),
            }
        }
        if let Some(g) = marks.group {
            if let Some(d) = self.decimal.as_ref().filter(|d| d.mark == g) {
                return Err(conflict(text, g, "to group digits", d, "uses it as the decimal mark"));
            }
            match &self.group {
                Some(known) if known.mark != g && !(only_groups(known.mark) && only_groups(g)) => {
                    return Err(conflict(
                        text,
                        g,
                        "to group digits",
                        known,
                        &format!("groups them with {}", mark_name(known.mark)),
                    ));
                }
                Some(_) => {}
                None => self.group = Some(seen(g)),
            }
        }
        if marks.grouping != Grouping::Either {
            match &self.grouping {
                Some((known, at)) if *known != marks.grouping => {
                    let (this, that) = match marks.grouping {
                        Grouping::Lakh => ("the Indian lakh pattern", "groups of three"),
                        _ => ("groups of three", "the Indian lakh pattern"),
                    };
                    return Err(format!(
                        "`{text}` groups digits in {this}, but {at} uses {that}: the log mixes number formats; split it where the format changes"
                    ));
                }
                Some(_) => {}
                None => self.grouping = Some((marks.grouping, seen(marks.group.unwrap_or(',')))),
            }
        }
        Ok(())
    }

    /// Whether every number read so far is also how the C locale prints numbers.
    pub fn is_c_like(&self) -> bool {
        self.decimal.as_ref().is_none_or(|d| d.mark == '.')
            && self.group.as_ref().is_none_or(|g| g.mark == ',')
            && self.grouping.as_ref().is_none_or(|(g, _)| *g != Grouping::Lakh)
    }

    /// The convention assumed, for a log whose numbers are not the C locale's:
    /// "`.` groups digits and `,` is the decimal mark, as de_DE prints them (line 4
    /// `4.595.014.128`, line 4 `2,155`)". `None` for C-like numbers.
    pub fn describe(&self) -> Option<String> {
        if self.is_c_like() {
            return None;
        }
        let lakh = matches!(self.grouping, Some((Grouping::Lakh, _)));
        let mut parts = Vec::new();
        let mut shown: Vec<String> = Vec::new();
        let mut show = |seen: &Seen| {
            let s = seen.to_string();
            if !shown.contains(&s) {
                shown.push(s);
            }
        };
        if let Some(g) = &self.group {
            let pattern = if lakh { " in the Indian lakh pattern" } else { "" };
            parts.push(format!("{} groups digits{pattern}", mark_name(g.mark)));
            show(g);
        }
        if let Some((Grouping::Lakh, at)) = &self.grouping {
            show(at);
        }
        if let Some(d) = &self.decimal {
            parts.push(format!("{} is the decimal mark", mark_name(d.mark)));
            show(d);
        }
        let group = self.group.as_ref().map(|g| g.mark);
        let like = match group {
            _ if lakh => "as en_IN prints them",
            Some('.') => "as de_DE prints them",
            Some('\'' | '\u{2019}') => "as de_CH prints them",
            Some(g) if only_groups(g) => "as fr_FR prints them",
            None if self.decimal.as_ref().is_some_and(|d| d.mark == ',') => {
                "as de_DE and fr_FR print them"
            }
            _ => "as the log's locale printed them",
        };
        Some(format!("{}, {like} ({})", parts.join(" and "), shown.join(", ")))
    }
}

fn conflict(text: &str, mark: char, role: &str, known: &Seen, known_role: &str) -> String {
    format!(
        "`{text}` has {} {role}, but {known} {known_role}: the log mixes number formats (perf ran under two locales?); split it where the format changes",
        mark_name(mark)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn value(text: &str) -> f64 {
        parse_count(text).unwrap_or_else(|e| panic!("{text}: {e}")).0
    }

    #[test]
    fn counts() {
        assert_eq!(value("181,047,168"), 181_047_168.0);
        assert_eq!(value("3038"), 3038.0);
        assert_eq!(value("1.02"), 1.02);
        assert_eq!(value("151505816.000000"), 151_505_816.0);
        assert_eq!(value("1'234'567"), 1_234_567.0);
        assert_eq!(value("1\u{202f}234"), 1234.0);
        assert_eq!(value("53,259,156,071"), 53_259_156_071.0);
        assert_eq!(value("1,234.50"), 1234.5);
        // Other locales.
        assert_eq!(value("4.595.014.128"), 4_595_014_128.0);
        assert_eq!(value("1.520,45"), 1520.45);
        assert_eq!(value("0,83"), 0.83);
        assert_eq!(value("1.234"), 1234.0);
        assert_eq!(value("4\u{202f}595\u{202f}014\u{202f}128"), 4_595_014_128.0);
        assert_eq!(value("1\u{a0}520,45"), 1520.45);
        assert_eq!(value("4,59,50,14,128"), 4_595_014_128.0);
        assert_eq!(value("12,34,567"), 1_234_567.0);
        assert_eq!(value("4595014128,000000"), 4_595_014_128.0);
        assert_eq!(value("0.123"), 0.123);
    }

    #[test]
    fn marks_of_counts() {
        let marks = |t: &str| parse_count(t).unwrap().1;
        assert_eq!(marks("1,234,567").grouping, Grouping::Thousands);
        assert_eq!(marks("1,234").grouping, Grouping::Either);
        assert_eq!(marks("123,456").grouping, Grouping::Thousands);
        assert_eq!(marks("1,23,456").grouping, Grouping::Lakh);
        assert_eq!(
            marks("1.520,45"),
            Marks { decimal: Some(','), group: Some('.'), grouping: Grouping::Either }
        );
        assert_eq!(marks("1,02"), Marks { decimal: Some(','), ..Marks::plain() });
        assert_eq!(marks("4.595.014.128").group, Some('.'));
    }

    #[test]
    fn the_fast_path_agrees_with_the_general_one() {
        for text in ["0", "7", "1,234", "999,999,999,999,999", "123456789012345", "12,345,678"] {
            let plain: String = text.chars().filter(|c| *c != ',').collect();
            assert_eq!(plain_grouped_integer(text).map(|f| f.0), plain.parse::<f64>().ok());
        }
        // Left to the general path, which knows what is wrong with them.
        for text in ["", ",123", "1,", "1,2", "1,2345", "12,34,567", "1234,567", "1.5", "-1"] {
            assert_eq!(plain_grouped_integer(text), None, "{text}");
        }
        assert_eq!(plain_grouped_integer("1234567890123456"), None);
        assert_eq!(value("1234567890123456789"), 1_234_567_890_123_456_789.0);
    }

    proptest::proptest! {
        /// Digits with a `.`, read without `str::parse`, are what `str::parse` reads.
        #[test]
        fn exact_decimals_are_what_parse_gives(int in "[0-9]{0,10}", frac in "[0-9]{0,10}") {
            let text = format!("{int}.{frac}");
            let expected = text.parse::<f64>().ok();
            match exact_decimal(&text) {
                Some(v) => proptest::prop_assert_eq!(Some(v.to_bits()), expected.map(f64::to_bits)),
                // Left to the general reading: too many digits, or none.
                None => proptest::prop_assert!(int.len() + frac.len() > 15 || int.len() + frac.len() == 0),
            }
            proptest::prop_assert_eq!(parse_value(&text).map(|v| v.0.to_bits()), expected.map(f64::to_bits));
        }

        /// `1,234.56`-shaped counts: the value of the digits without their groups, `.` the
        /// decimal mark, `,` the group mark when there is one.
        #[test]
        fn grouped_counts_with_decimals(groups in proptest::collection::vec(0u32..1000, 1..5), first in 1u32..1000, frac in "[0-9]{1,6}") {
            let mut int = first.to_string();
            for g in &groups {
                int.push_str(&format!(",{g:03}"));
            }
            let text = format!("{int}.{frac}");
            let digits = format!("{}.{frac}", int.replace(',', ""));
            let (value, marks) = parse_count(&text).unwrap();
            proptest::prop_assert_eq!(value.to_bits(), digits.parse::<f64>().unwrap().to_bits());
            proptest::prop_assert_eq!(marks.decimal, Some('.'));
            proptest::prop_assert_eq!(marks.group, Some(','));
            let thousands = groups.len() > 1 || first >= 100;
            let expected = if thousands { Grouping::Thousands } else { Grouping::Either };
            proptest::prop_assert_eq!(marks.grouping, expected);
        }
    }

    #[test]
    fn counts_with_decimals_and_their_marks() {
        let read = |t: &str| parse_count(t).unwrap();
        assert_eq!(read("20.00"), (20.0, Marks { decimal: Some('.'), ..Marks::plain() }));
        assert_eq!(read("0.5").0, 0.5);
        assert_eq!(read("12.345678").0, 12.345678);
        // One `.` before three digits stays de_DE's grouping, a lone 0 three decimals.
        assert_eq!(read("1.234"), (1234.0, Marks { group: Some('.'), ..Marks::plain() }));
        assert_eq!(read("0.123").1.decimal, Some('.'));
        assert_eq!(read("1,234.567").0, 1234.567);
        assert_eq!(read("123456789.123456").0, 123_456_789.123_456);
        assert!(parse_count("1,23.45").is_err());
        assert!(parse_count("20.").is_err());
    }

    #[test]
    fn malformed_counts_are_errors() {
        for bad in [
            ",123",
            "1,",
            "1.",
            "abc",
            "1x",
            "",
            "-",
            "1,2a4",
            "1,2345,678",
            "1.2,3.4",
            "1,,2",
            "1,23,4567",
        ] {
            assert!(parse_count(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn one_convention_per_log() {
        let mut numbers = Numbers::default();
        let read = |numbers: &mut Numbers, line: usize, text: &str| {
            let (_, marks) = parse_count(text).unwrap();
            numbers.accept(marks, line, text)
        };
        read(&mut numbers, 4, "1,234,567").unwrap();
        let err = read(&mut numbers, 5, "1,02").unwrap_err();
        assert!(
            err.contains("`1,02` has `,` as the decimal mark, but line 4 `1,234,567`"),
            "{err}"
        );
        let err = read(&mut numbers, 6, "1.234.567").unwrap_err();
        assert!(err.contains("groups them with `,`"), "{err}");
        let err = read(&mut numbers, 7, "12,34,567").unwrap_err();
        assert!(err.contains("lakh"), "{err}");
        assert!(numbers.is_c_like());
        assert_eq!(numbers.describe(), None);

        let mut de = Numbers::default();
        read(&mut de, 3, "4.595.014.128").unwrap();
        let (_, m) = parse_value("2,155").unwrap();
        de.accept(m, 3, "2,155").unwrap();
        assert_eq!(
            de.describe().unwrap(),
            "`.` groups digits and `,` is the decimal mark, as de_DE prints them (line 3 `4.595.014.128`, line 3 `2,155`)"
        );
        let (_, m) = parse_value("2.155").unwrap();
        let err = de.accept(m, 9, "2.155").unwrap_err();
        assert!(err.contains("line 3 `4.595.014.128` groups digits with it"), "{err}");
        let (_, m) = parse_count("1,234").unwrap();
        assert!(de.accept(m, 9, "1,234").unwrap_err().contains("has `,` to group digits"));
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
        let metric = |t: &str| parse_metric_value(t).map(|v| v.0);
        assert!(metric("nan").is_some_and(f64::is_nan));
        assert!(metric("-nan").is_some_and(f64::is_nan));
        assert!(metric(" NaN ").is_some_and(f64::is_nan));
        assert_eq!(metric("-INF"), Some(f64::NEG_INFINITY));
        assert_eq!(metric("1E3"), Some(1000.0));
        assert_eq!(metric("nanx"), None);
        assert_eq!(metric("2,155"), Some(2.155));
        assert_eq!(metric("1.234,5"), None);
        assert_eq!(parse_percent("50.00%").map(|v| v.0), Some(50.0));
        assert_eq!(parse_percent("51,32%").map(|v| v.0), Some(51.32));
        assert_eq!(printed_decimals("2,155"), 3);
        assert_eq!(printed_decimals("45.0%"), 1);
        assert_eq!(printed_decimals("7"), 0);
    }
}
