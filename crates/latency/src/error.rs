//! Typed errors of the latency library: bad options and unreadable input.
//!
//! Problems inside the trace text are not errors: they are counted and reported with the results
//! (see `Report::malformed`), because one bad line must not hide the statistics of a million good ones.

use std::io;

/// Why `tmetric latency` could not produce a report.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LatencyError {
    /// `--event '('`: the event filter does not compile.
    #[error("invalid `--event` regex `{pattern}`")]
    EventRegex {
        /// The pattern as given.
        pattern: String,
        /// What the regex parser said.
        #[source]
        source: Box<regex_lite::Error>,
    },
    /// `--value ''` or `--value 'a b'`: a field name must be a non-empty word.
    #[error(
        "invalid field name `{name}` for `{flag}`: field names are non-empty and contain no whitespace, `:` or `=`"
    )]
    FieldName {
        /// The flag that named the field.
        flag: &'static str,
        /// The rejected name.
        name: String,
    },
    /// `--value latency --group-by latency` or `--group-by RFBM,RFBM`.
    #[error("field `{name}` is named twice in `--value`/`--group-by`; each field can be used once")]
    DuplicateField {
        /// The repeated name.
        name: String,
    },
    /// The trace file does not exist or is not readable.
    #[error("cannot open trace file `{path}`")]
    Open {
        /// The path as given.
        path: String,
        /// The operating system's reason.
        #[source]
        source: io::Error,
    },
    /// A line longer than [`crate::MAX_LINE`] bytes without a line end: not ftrace text
    /// (a binary file, `/dev/zero`). Reading stops there so that memory stays bounded.
    #[error(
        "{path}:{line}: line {line} is longer than {limit} bytes and has no line end: ftrace prints lines of a few hundred bytes, so this is not trace text (a binary file, or a stream without line ends such as /dev/zero?)"
    )]
    LineTooLong {
        /// The path as given, or `<stdin>`.
        path: String,
        /// 1-based line number.
        line: u64,
        /// The limit, in bytes.
        limit: usize,
    },
    /// Reading failed part way, e.g. the path is a directory or the disk returned an I/O error.
    #[error("cannot read trace file `{path}` after line {line}")]
    Read {
        /// The path as given, or `<stdin>`.
        path: String,
        /// The last line read completely.
        line: u64,
        /// The operating system's reason.
        #[source]
        source: io::Error,
    },
}
