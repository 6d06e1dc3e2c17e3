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
//! # Numbers
//! perf prints numbers in its locale (`4.595.014.128` and `2,155 GHz` under de_DE). The
//! convention is read from the log's own numbers ([`Numbers`], [`PerfLog::numbers`]); a number
//! that contradicts it is an error naming both lines.
//!
//! # Errors, warnings and lines that are not perf's
//! Input without any counter row is [`ImportError::NotPerfStat`]. Lines that are not perf's
//! output (a benchmark's own lines before, inside or after perf's block, a shell prompt, mail
//! text) are skipped and summarised in [`PerfLog::skipped`]. A line that carries perf's marks
//! (a prefix, `<not counted>`, a `#` metric, a run share, perf's column alignment) but cannot
//! be read is [`ImportError::Malformed`] with line and column; damaged rows perf could not have
//! printed (negative counts, ...) are skipped and listed in [`PerfLog::warnings`]. Memory is
//! bounded whatever the input: a line longer than [`MAX_LINE`] bytes is
//! [`ImportError::LineTooLong`], and skipped lines are counted, not kept.
//! No input makes the importer panic.
// Only `tmetric-runtime` may hold `unsafe` (ARCHITECTURE.md, invariants).
#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod assemble;
mod csv;
mod error;
mod json;
mod key;
mod log;
mod lookup;
pub mod mode;
mod number;
mod skipped;
mod stream;
mod text;

pub use error::{ImportError, Warning};
pub use key::{EventKey, canonical_event_name, is_core_pmu};
pub use log::{Aggr, Block, LogRow, PerfLog, PrintedCount, PrintedMetric, Run, TimeSource, Timed};
pub use lookup::{Found, Lookup, same_name};
pub use mode::{Aggregation, Layout, Numbering};
pub use number::{Grouping, Numbers, Seen, printed_decimals, printed_value};
pub use skipped::{Skipped, Stretch};
pub use stream::{MAX_LINE, Reader};

use error::LineError;

/// Separators tried when detecting the `-x` layout, in order of preference; others (`-x ::`)
/// are found in the lines themselves.
const CSV_SEPARATORS: [&str; 5] = [",", ";", "\t", "|", ":"];

/// How many meaningful lines layout detection looks at, from the first one that reads as
/// perf's in some layout.
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

/// Detects the layout: whichever of text, `-j` and the `-x` separators reads the most counter
/// rows, text on a tie, and text when a perf header or footer is there and text reads rows.
pub fn detect_layout(input: &str) -> Layout {
    detect_lines(input.split('\n'))
}

/// Reads `line` in `layout` with a throw-away number convention.
fn read_in(line: &str, n: usize, layout: &Layout) -> Result<text::Line, error::LineError> {
    let numbers = &mut Numbers::default();
    match layout {
        Layout::Std => text::read_line(line, n, numbers),
        Layout::Csv(sep) => csv::read_line(line, n, sep, numbers),
        Layout::Json => json::read_line(line, n, numbers),
    }
}

fn is_row(read: &Result<text::Line, error::LineError>) -> bool {
    matches!(
        read,
        Ok(text::Line::Item(assemble::Item::Row(_)) | text::Line::WeakRow(assemble::Item::Row(_)))
    )
}

/// Whether a line is perf's in some layout: a header or footer, or a row.
fn perf_line(line: &str) -> bool {
    let trimmed = line.trim_start();
    if trimmed.starts_with("Performance counter stats for") || line.contains("seconds time elapsed")
    {
        return true;
    }
    if !trimmed.starts_with(|c: char| c.is_ascii_digit() || c == '<' || c == '{') {
        return false;
    }
    layouts_of(std::iter::once(line)).iter().any(|l| is_row(&read_in(line, 1, l)))
}

/// The layouts to try on these lines: text, `-j`, the usual separators, and the separators the
/// lines show after a leading count (`1234::msec::task-clock`).
fn layouts_of<'a>(lines: impl Iterator<Item = &'a str>) -> Vec<Layout> {
    let mut layouts = vec![Layout::Std, Layout::Json];
    let mut seps: Vec<String> = CSV_SEPARATORS.iter().map(|s| s.to_string()).collect();
    for line in lines.take(DETECT_LINES) {
        let trimmed = line.trim_start();
        let number = trimmed.bytes().take_while(|b| b.is_ascii_digit() || *b == b'.').count();
        if number == 0 {
            continue;
        }
        let run: String = trimmed[number..]
            .chars()
            .take_while(|c| {
                !c.is_alphanumeric()
                    && !c.is_whitespace()
                    && !matches!(c, '<' | '(' | '{' | '"' | '.')
            })
            .take(8)
            .collect();
        // `::::` is one separator twice around an empty unit: try each period of the run.
        let chars: Vec<char> = run.chars().collect();
        for period in 1..=chars.len() {
            if chars.len().is_multiple_of(period)
                && chars.chunks(period).all(|c| c == &chars[..period])
            {
                let sep: String = chars[..period].iter().collect();
                if !seps.contains(&sep) && seps.len() < 12 {
                    seps.push(sep);
                }
            }
        }
    }
    layouts.extend(seps.into_iter().map(Layout::Csv));
    layouts
}

/// [`detect_layout`] over the log's first lines.
fn detect_lines<'a>(lines: impl Iterator<Item = &'a str> + Clone) -> Layout {
    let lines: Vec<&str> =
        lines.map(|l| l.strip_suffix('\r').unwrap_or(l)).filter(|l| meaningful(l)).collect();
    let has_text_marks = lines
        .iter()
        .any(|l| l.contains("Performance counter stats for") || l.contains("seconds time elapsed"));
    let mut best: Option<(usize, Layout)> = None;
    for layout in layouts_of(lines.iter().copied()) {
        let numbers = &mut Numbers::default();
        let rows = lines
            .iter()
            .enumerate()
            .filter(|(n, l)| {
                let read = match &layout {
                    Layout::Std => text::read_line(l, n + 1, numbers),
                    Layout::Csv(sep) => csv::read_line(l, n + 1, sep, numbers),
                    Layout::Json => json::read_line(l, n + 1, numbers),
                };
                is_row(&read)
            })
            .count();
        let better = match &best {
            None => true,
            Some((b, _)) => rows > *b,
        };
        if better {
            best = Some((rows, layout));
        }
    }
    match best {
        Some((rows, layout))
            if rows > 0 && !(has_text_marks && layout != Layout::Std && text_rows(&lines) > 0) =>
        {
            layout
        }
        _ => Layout::Std,
    }
}

fn text_rows(lines: &[&str]) -> usize {
    let numbers = &mut Numbers::default();
    lines.iter().enumerate().filter(|(n, l)| is_row(&text::read_line(l, n + 1, numbers))).count()
}

fn not_perf_stat(
    source_name: &str,
    first: Option<&str>,
    err: Option<&LineError>,
    skipped: &Skipped,
) -> ImportError {
    let found = match (err, first) {
        (Some(err), _) => format!(" (line {}: {})", err.line, err.message),
        (None, Some(first)) if skipped.lines() > 0 => {
            let why = skipped
                .first
                .iter()
                .find(|(_, why)| why.contains("--metric-only"))
                .map(|(line, why)| format!("; line {line}: {why}"))
                .unwrap_or_default();
            format!(" ({skipped}; first line: `{first}`{why})")
        }
        (None, Some(first)) => format!(" (first line: `{first}`)"),
        (None, None) => " (it is empty)".to_string(),
    };
    ImportError::NotPerfStat { source_name: source_name.to_string(), found }
}

/// The layout, other than `layout`, in which `line` reads as a counter row.
fn other_layout_row(line: &str, n: usize, layout: &Layout) -> Option<String> {
    // Rows of every layout start with a count, `<not counted>` or `{`, after a prefix.
    // Prose is most of what is skipped: only lines that start as a row of some layout are
    // read again.
    let trimmed = line.trim_start();
    if !(trimmed.starts_with(|c: char| c.is_ascii_digit() || c == '<' || c == '{')
        || trimmed.starts_with("CPU"))
    {
        return None;
    }
    // The usual layouts first, without allocating; the separators the line shows only then.
    static USUAL: std::sync::LazyLock<Vec<Layout>> =
        std::sync::LazyLock::new(|| layouts_of(std::iter::empty()));
    let found = USUAL.iter().filter(|l| *l != layout).find(|l| is_row(&read_in(line, n, l)));
    if let Some(l) = found {
        return Some(layout_name(l));
    }
    layouts_of(std::iter::once(line))
        .into_iter()
        .skip(USUAL.len())
        .filter(|l| l != layout)
        .find(|l| is_row(&read_in(line, n, l)))
        .map(|l| layout_name(&l))
}

fn layout_name(layout: &Layout) -> String {
    match layout {
        Layout::Std => "default text".to_string(),
        Layout::Csv(sep) => format!("-x {sep} (CSV)"),
        Layout::Json => "-j (JSON)".to_string(),
    }
}
