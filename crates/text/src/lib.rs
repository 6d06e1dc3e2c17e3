//! Quoting user input in error messages, and capping repeated warnings.
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
