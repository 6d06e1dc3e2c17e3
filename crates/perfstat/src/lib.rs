//! Imports `perf stat` output (perf 5.x-6.x) so that metric expressions can be evaluated from it.
//!
//! No knowledge of the metric catalogue. [`Reader`] reads any [`std::io::BufRead`] block by
//! block in one pass, holding one `-I` interval's blocks at a time; [`parse`] collects a whole
//! log from a string. For each metric identifier the caller asks a [`Block`] for its value with
//! [`Block::lookup`] or [`Block::lookup_on_pmu`].
//!
//! # Layouts
//! [`parse`] detects the layout: the default text layout (`Performance counter stats for ...`,
//! counts with thousands separators, `# value unit metric` annotations, `(xx.xx%)` run shares,
//! `<not counted>`/`<not supported>`, `-I` timestamps, `-A`/`--per-*` prefixes, footers), the
//! `-x SEP` layout (separators `,` `;` tab `|` `:` are detected; pass others to
//! [`parse_with`]) and the `-j` layout.
//!
//! # Blocks and groups
//! A [`Block`] is one evaluation unit: one run × one `-I` timestamp × one aggregation id
//! (global, `CPU3`, `S0-D0-C1`, `S0`, ...), as perf computes metrics per printed row.
//! perf prints no group braces. Rows are split into groups by print order: a row starts a new
//! group when its event already occurs in the current group, when it is a slots row
//! (`slots`/`TOPDOWN.SLOTS`, always a topdown group's leader) and the group is not empty, or when it
//! follows a tool event (`duration_time`), which perf appends after a group's events. When a
//! repeated event starts a group, the rows just before it with its run share (after one with
//! another share) move with it, as the kernel schedules a group's members together. Lookups
//! prefer the group where the requested metric was printed and report the group they used.
//!
//! # Values
//! Rows keep perf's printed values. Lookups return what perf's metric code sees: raw counts
//! (`msec` rows of `task-clock`/`cpu-clock` are turned back into ns; other units such as
//! `Joules` are reported in [`Found::unscaled_unit`]), retire latencies for `R` ids, and
//! seconds for `duration_time` (a `duration_time` row, else the `-I` interval length, else
//! "seconds time elapsed"), `user_time` and `system_time`.
//!
//! # Errors and warnings
//! Input without any counter row is [`ImportError::NotPerfStat`]. A line that must be a row
//! (it starts with a count, a timestamp, an aggregation id or `{`, or has CSV fields) but
//! cannot be read is [`ImportError::Malformed`] with line and column. Other lines (prose,
//! a shell prompt, perf's hints) are skipped and listed in [`PerfLog::warnings`].
//! No input makes the importer panic.
// Only `tmetric-runtime` may hold `unsafe` (ARCHITECTURE.md, invariants).
#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod build;
mod csv;
mod error;
mod json;
mod key;
mod log;
mod lookup;
mod number;
pub mod perfdata;
mod stream;
mod text;

pub use error::{ImportError, Warning};
pub use key::{EventKey, is_core_pmu};
pub use log::{
    Aggr, AggrKind, Block, Count, Layout, PerfLog, PrintedMetric, Row, Run, TimeSource, Timed,
};
pub use lookup::{Found, Lookup};
pub use stream::Reader;

use build::Item;
use error::LineError;

/// Separators tried when detecting the `-x` layout, in order of preference.
const CSV_SEPARATORS: [&str; 5] = [",", ";", "\t", "|", ":"];

/// How many meaningful lines layout detection looks at.
const DETECT_LINES: usize = 200;

/// Reads `perf stat` output in any layout. `source_name` (a path or `-`) is used in errors.
pub fn parse(input: &str, source_name: &str) -> Result<PerfLog, ImportError> {
    parse_with(input, source_name, None)
}

/// Reads `perf stat` output from bytes; invalid UTF-8 (which perf only prints inside command
/// or thread names) is replaced by U+FFFD.
pub fn parse_bytes(input: &[u8], source_name: &str) -> Result<PerfLog, ImportError> {
    Reader::new(input, source_name)?.into_log(Vec::new())
}

/// Reads `perf stat` output in the given layout, or detects it when `layout` is `None`.
///
/// The whole log at once: [`Reader`] gives the same blocks one at a time.
pub fn parse_with(
    input: &str,
    source_name: &str,
    layout: Option<Layout>,
) -> Result<PerfLog, ImportError> {
    Reader::with_layout(input.as_bytes(), source_name, layout)?.into_log(Vec::new())
}

/// Whether layout detection counts a line: not blank, not a `#` comment.
fn meaningful(line: &str) -> bool {
    let line = line.strip_suffix('\r').unwrap_or(line);
    !line.trim().is_empty() && !line.trim_start().starts_with('#')
}

/// Detects the layout: JSON when the first meaningful line is an object, text when a perf
/// header or footer is present, otherwise whichever of text and the `-x` separators reads the
/// most counter rows (text on a tie or when nothing reads).
pub fn detect_layout(input: &str) -> Layout {
    detect_lines(input.split('\n'))
}

/// [`detect_layout`] over the log's first lines.
fn detect_lines<'a>(lines: impl Iterator<Item = &'a str>) -> Layout {
    let lines: Vec<&str> = lines
        .map(|l| l.strip_suffix('\r').unwrap_or(l))
        .filter(|l| meaningful(l))
        .take(DETECT_LINES)
        .collect();
    if lines.first().is_some_and(|l| l.trim_start().starts_with('{')) {
        return Layout::Json;
    }
    if lines
        .iter()
        .any(|l| l.contains("Performance counter stats for") || l.contains("seconds time elapsed"))
    {
        return Layout::Text;
    }
    let text_rows = lines
        .iter()
        .enumerate()
        .filter(|(n, l)| matches!(text::read_line(l, n + 1), Ok(text::Line::Item(Item::Row(_)))))
        .count();
    let mut best = (text_rows, Layout::Text);
    for sep in CSV_SEPARATORS {
        let rows = lines
            .iter()
            .enumerate()
            .filter(|(n, l)| matches!(csv::read_line(l, n + 1, sep), Ok(Some(Ok(Item::Row(_))))))
            .count();
        if rows > best.0 {
            best = (rows, Layout::Csv { sep: sep.to_string() });
        }
    }
    best.1
}

fn not_perf_stat(source_name: &str, first: Option<&str>, err: Option<&LineError>) -> ImportError {
    let found = match (err, first) {
        (Some(err), _) => format!(" (line {}: {})", err.line, err.message),
        (None, Some(first)) => format!(" (first line: `{first}`)"),
        (None, None) => " (it is empty)".to_string(),
    };
    ImportError::NotPerfStat { source_name: source_name.to_string(), found }
}

/// The layout, other than `layout`, in which `line` reads as a counter row.
fn other_layout_row(line: &str, n: usize, layout: &Layout) -> Option<String> {
    if *layout != Layout::Json && matches!(json::read_line(line, n), Ok(Some(Ok(Item::Row(_))))) {
        return Some(layout_name(&Layout::Json));
    }
    if *layout != Layout::Text
        && matches!(text::read_line(line, n), Ok(text::Line::Item(Item::Row(_))))
    {
        return Some(layout_name(&Layout::Text));
    }
    CSV_SEPARATORS
        .iter()
        .filter(|sep| !matches!(layout, Layout::Csv { sep: s } if s == *sep))
        .find(|sep| matches!(csv::read_line(line, n, sep), Ok(Some(Ok(Item::Row(_))))))
        .map(|sep| layout_name(&Layout::Csv { sep: sep.to_string() }))
}

fn layout_name(layout: &Layout) -> String {
    match layout {
        Layout::Text => "default text".to_string(),
        Layout::Csv { sep } => format!("-x {sep} (CSV)"),
        Layout::Json => "-j (JSON)".to_string(),
    }
}
