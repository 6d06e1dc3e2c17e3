//! Quoting user input in error messages, capping repeated warnings, and suggesting names
//! close to a mistyped one.
//!
//! Every reader that echoes what it was given (an expression, a counts-file key, a perf log
//! line, an ftrace field) quotes it through [`quote`], so a 100 MB line is never copied whole
//! into a message; and warnings that can repeat per input line go through [`Capped`], which
//! prints the first few and then one summary.
// Only `tmetric-runtime` may hold `unsafe` (ARCHITECTURE.md, invariants).
#![forbid(unsafe_code)]

/// How many characters of quoted input a message shows.
pub const QUOTE_CHARS: usize = 80;

/// `text` between backticks, cut to [`QUOTE_CHARS`] characters with a note of the full length
/// when longer, and with control characters escaped so they cannot garble the terminal.
pub fn quote(text: &str) -> String {
    quote_with(text, QUOTE_CHARS)
}

/// [`quote`] with a chosen limit (at least one character).
pub fn quote_with(text: &str, max_chars: usize) -> String {
    let max_chars = max_chars.max(1);
    let mut out = String::with_capacity(text.len().min(max_chars * 2) + 2);
    out.push('`');
    let mut cut = false;
    for (shown, c) in text.chars().enumerate() {
        if shown == max_chars {
            cut = true;
            break;
        }
        if c.is_control() {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    if cut {
        out.push_str("...` (");
        out.push_str(&text.len().to_string());
        out.push_str(" bytes)");
    } else {
        out.push('`');
    }
    out
}

/// Counts repeated warnings of one kind: the first [`Capped::new`]`(limit)` are to be printed,
/// the rest only counted, and [`Capped::summary`] says how many were left out.
#[derive(Debug, Clone)]
pub struct Capped {
    limit: usize,
    seen: usize,
}

impl Capped {
    /// A counter that lets `limit` warnings through.
    pub fn new(limit: usize) -> Capped {
        Capped { limit, seen: 0 }
    }

    /// Counts one warning; true when it is among the first `limit` and should be printed.
    pub fn admit(&mut self) -> bool {
        self.seen += 1;
        self.seen <= self.limit
    }

    /// How many warnings were counted in all.
    pub fn seen(&self) -> usize {
        self.seen
    }

    /// `"... and N more <what>"` when some were not printed.
    pub fn summary(&self, what: &str) -> Option<String> {
        (self.seen > self.limit).then(|| format!("... and {} more {what}", self.seen - self.limit))
    }
}

/// `` `a`, `b` or `c` ``: names as a message lists alternatives.
pub fn join_code(items: &[String]) -> String {
    let quoted: Vec<String> = items.iter().map(|i| format!("`{i}`")).collect();
    match quoted.as_slice() {
        [] => String::new(),
        [one] => one.clone(),
        [init @ .., last] => format!("{} or {last}", init.join(", ")),
    }
}

/// Up to 8 names, comma-separated, then how many more.
pub fn names_summary(names: &[&str]) -> String {
    if names.len() <= 8 {
        names.join(", ")
    } else {
        format!("{} and {} more", names[..8].join(", "), names.len() - 8)
    }
}

/// Up to `limit` of `names` closest to `wanted`, for "did you mean": those containing it (or
/// contained in it), then those within a small edit distance, best first; case is ignored.
pub fn closest(wanted: &str, names: impl IntoIterator<Item = String>, limit: usize) -> Vec<String> {
    let wanted_lower = wanted.to_ascii_lowercase();
    let budget = (wanted.chars().count() / 3).max(2);
    let mut scored: Vec<(usize, String)> = names
        .into_iter()
        .filter_map(|name| {
            let lower = name.to_ascii_lowercase();
            let score = if lower == wanted_lower {
                0
            } else if lower.contains(&wanted_lower)
                || (lower.len() >= 3 && wanted_lower.contains(&lower))
            {
                1 + lower.len().abs_diff(wanted_lower.len()) / 8
            } else {
                let distance = levenshtein(&lower, &wanted_lower);
                if distance > budget {
                    return None;
                }
                2 + distance
            };
            Some((score, name))
        })
        .collect();
    scored.sort();
    scored.dedup_by(|a, b| a.1.eq_ignore_ascii_case(&b.1));
    scored.into_iter().take(limit).map(|(_, name)| name).collect()
}

/// The edit distance between `a` and `b`, in characters.
pub fn levenshtein(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut diagonal = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let above = row[j + 1];
            row[j + 1] = (above + 1).min(row[j] + 1).min(diagonal + usize::from(ca != *cb));
            diagonal = above;
        }
    }
    row[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_input_is_quoted_whole() {
        assert_eq!(quote("cycles"), "`cycles`");
        assert_eq!(quote("a\u{1}b\n"), "`a\\u{1}b\\n`");
    }

    #[test]
    fn long_input_is_cut_with_its_length() {
        let long = "x".repeat(100_000_000);
        let quoted = quote(&long);
        assert_eq!(quoted, format!("`{}...` (100000000 bytes)", "x".repeat(QUOTE_CHARS)));
        // Multi-byte characters are counted as characters and never split.
        assert_eq!(quote_with("ééé", 2), "`éé...` (6 bytes)");
    }

    #[test]
    fn capped_counts_the_rest() {
        let mut cap = Capped::new(2);
        assert_eq!((0..5).filter(|_| cap.admit()).count(), 2);
        assert_eq!(cap.seen(), 5);
        assert_eq!(cap.summary("unknown keys").as_deref(), Some("... and 3 more unknown keys"));
        assert_eq!(Capped::new(9).summary("x"), None);
    }
}
