//! Import errors and warnings.
//!
//! Errors stop the import: the input is not perf stat output, or a line that is clearly a counter
//! row cannot be read. Lines that are clearly not counter rows (prose, perf's own hints) become
//! [`Warning`]s so that a log pasted from a mail or a terminal still imports.

use std::fmt;

/// What went wrong while importing perf stat output.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum ImportError {
    /// The input has no counter rows at all: an empty file, a binary file, `perf record` output,
    /// or `perf stat --metric-only` output (which prints no counts).
    #[error(
        "no perf stat counter rows found in `{source_name}`{found}: expected `perf stat` output in \
         the default layout (`     1,234,567      cycles`), the `-x,` layout \
         (`1234567,,cycles,1000,100.00,,`) or the `-j` layout \
         (`{{\"counter-value\" : \"1234567.000000\", \"unit\" : \"\", \"event\" : \"cycles\", ...}}`); \
         `--metric-only` output has no counts and cannot be imported"
    )]
    NotPerfStat {
        /// File name (or `-`) as given by the caller.
        source_name: String,
        /// ` (first line: `...`)` or empty, to show what was found instead.
        found: String,
    },
    /// A line that must be a counter row (it starts with a count, a `{`, or has CSV fields)
    /// cannot be read, for example `  1,02  cycles` or a truncated JSON object.
    #[error("{source_name}:{line}:{column}: {message}\n  | {text}")]
    Malformed {
        /// File name (or `-`) as given by the caller.
        source_name: String,
        /// 1-based line number.
        line: usize,
        /// 1-based column (in characters) where the problem starts.
        column: usize,
        /// What was expected and what to do.
        message: String,
        /// The offending line, shortened to 160 characters.
        text: String,
    },
    /// A line longer than [`crate::MAX_LINE`] bytes: perf's lines are a few hundred bytes, so the
    /// input is not a perf stat log (a binary file, `/dev/zero`). Reading stops there, so that
    /// memory stays bounded.
    #[error(
        "{source_name}:{line}: line {line} is longer than {limit} bytes and has no line end: perf stat prints lines of a few hundred bytes, so this is not a perf stat log (a binary file, or a stream without line ends such as /dev/zero?)"
    )]
    LineTooLong {
        /// File name (or `-`) as given by the caller.
        source_name: String,
        /// 1-based line number.
        line: usize,
        /// The limit, in bytes.
        limit: usize,
    },
    /// The input could not be read (an I/O error of the file or pipe).
    #[error("cannot read `{source_name}`: {message}")]
    Read {
        /// File name (or `-`) as given by the caller.
        source_name: String,
        /// The operating system's error.
        message: String,
    },
}

/// A line that was skipped because it is not part of perf's counter output.
#[derive(Debug, Clone, PartialEq)]
pub struct Warning {
    /// 1-based line number.
    pub line: usize,
    /// Why the line was skipped.
    pub message: String,
}

impl fmt::Display for Warning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "line {}: {}", self.line, self.message)
    }
}

/// A problem found on one line, before the file name is known to the line parsers.
#[derive(Debug)]
pub(crate) struct LineError {
    pub line: usize,
    /// 0-based byte offset into the line.
    pub byte: usize,
    pub message: String,
}

impl LineError {
    pub(crate) fn new(line: usize, byte: usize, message: impl Into<String>) -> LineError {
        LineError { line, byte, message: message.into() }
    }

    pub(crate) fn into_import(self, source_name: &str, text: &str) -> ImportError {
        let byte = self.byte.min(text.len());
        let byte = (0..=byte).rev().find(|&b| text.is_char_boundary(b)).unwrap_or(0);
        let column = text[..byte].chars().count() + 1;
        ImportError::Malformed {
            source_name: source_name.to_string(),
            line: self.line,
            column,
            message: self.message,
            text: shorten(text, 160),
        }
    }
}

/// The first `max` characters of a line, with `...` when cut.
pub(crate) fn shorten(text: &str, max: usize) -> String {
    let trimmed = text.trim_end();
    match trimmed.char_indices().nth(max) {
        Some((byte, _)) => format!("{}...", &trimmed[..byte]),
        None => trimmed.to_string(),
    }
}
