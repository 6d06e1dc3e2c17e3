//! Imports `perf stat` output (perf 5.x-6.x) so that metric expressions can be evaluated from it.
//!
//! Pure: no I/O, no knowledge of the metric catalogue. The caller reads the file, calls
//! [`parse`], and for each metric identifier asks a [`Block`] for its value with
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
mod text;

pub use error::{ImportError, Warning};
pub use key::EventKey;
pub use log::{
    Aggr, AggrKind, Block, Count, Layout, PerfLog, PrintedMetric, Row, Run, TimeSource, Timed,
};
pub use lookup::{Found, Lookup};

use build::Item;
use error::LineError;
use std::collections::HashSet;

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
    parse(&String::from_utf8_lossy(input), source_name)
}

/// Reads `perf stat` output in the given layout, or detects it when `layout` is `None`.
pub fn parse_with(
    input: &str,
    source_name: &str,
    layout: Option<Layout>,
) -> Result<PerfLog, ImportError> {
    let layout = layout.unwrap_or_else(|| detect_layout(input));
    // perf ends every line with a newline: a last line without one was cut short (a log copied
    // while perf was still writing, or a truncated file). It is read apart from the rest.
    let (body, last) = match input.rfind('\n') {
        Some(at) if at + 1 < input.len() => (&input[..=at], Some(&input[at + 1..])),
        None if !input.is_empty() => ("", Some(input)),
        _ => (input, None),
    };
    let last = last.filter(|l| !l.trim().is_empty());
    let last_n = body.matches('\n').count() + 1;
    let read = match &layout {
        Layout::Text => text::read(body),
        Layout::Csv { sep } => csv::read(body, sep),
        Layout::Json => json::read(body),
    };
    let read = read.and_then(|(mut items, mut warnings)| {
        if let Some(last) = last {
            read_unterminated(&layout, last, last_n, &mut items, &mut warnings)?;
        }
        Ok((items, warnings))
    });
    let (items, warnings) = match read {
        Ok(read) => read,
        Err(err) => {
            let line_text = input.split('\n').nth(err.line.saturating_sub(1)).unwrap_or("");
            // An error before anything perf-like was seen means the input is not perf stat
            // output at all; say that rather than complain about its first line.
            if !seen_perf_output_before(input, &layout, err.line) {
                return Err(not_perf_stat(input, source_name, Some(&err)));
            }
            // A row of another layout after rows of this one: say that, not what this
            // layout's reader made of it.
            let mut err = err;
            let line = line_text.strip_suffix('\r').unwrap_or(line_text);
            if let Some(other) = other_layout_row(line, err.line, &layout) {
                err.message = format!(
                    "a mix of layouts in one file: this line is a row of the {other} layout, but the rows before it are in the {} layout; split the file and read each part",
                    layout_name(&layout)
                );
                err.byte = 0;
            }
            return Err(
                err.into_import(source_name, line_text.strip_suffix('\r').unwrap_or(line_text))
            );
        }
    };
    if !items.iter().any(|item| matches!(item, Item::Row(_))) {
        return Err(not_perf_stat(input, source_name, None));
    }
    let mut warnings = warnings;
    note_other_layouts(input, &layout, &mut warnings);
    Ok(build::build(layout, items, warnings))
}

/// Reads the last line when the input does not end with a newline. A row or metric there is
/// kept with a warning (it may be cut in its event name or metric); a line that cannot be read
/// is reported as truncated and skipped rather than failing the whole log, unless it is the
/// only row-like line (then the error says what is wrong with it).
fn read_unterminated(
    layout: &Layout,
    line: &str,
    n: usize,
    items: &mut Vec<Item>,
    warnings: &mut Vec<Warning>,
) -> Result<(), LineError> {
    let line = line.strip_suffix('\r').unwrap_or(line);
    let read: Result<Option<Item>, LineError> = match layout {
        Layout::Text => text::read_line(line, n).map(|l| match l {
            text::Line::Item(item) => Some(item),
            text::Line::Nothing | text::Line::Skipped(_) => None,
        }),
        Layout::Csv { sep } => match csv::read_line(line, n, sep) {
            Ok(Some(Ok(item))) => Ok(Some(item)),
            Ok(Some(Err(_)) | None) => Ok(None),
            Err(err) => Err(err),
        },
        Layout::Json => match json::read_line(line, n) {
            Ok(Some(Ok(item))) => Ok(Some(item)),
            Ok(Some(Err(_)) | None) => Ok(None),
            Err(err) => Err(err),
        },
    };
    let shown = error::shorten(line.trim(), 60);
    match read {
        Ok(Some(item)) => {
            if matches!(item, Item::Row(_) | Item::Metric { .. }) {
                warnings.push(Warning {
                    line: n,
                    message: format!(
                        "the log ends without a newline after `{shown}`: the file may be truncated and this last row cut short; it was read as it is"
                    ),
                });
            }
            items.push(item);
        }
        Ok(None) => {}
        Err(err) if !items.iter().any(|item| matches!(item, Item::Row(_))) => return Err(err),
        Err(err) => warnings.push(Warning {
            line: n,
            message: format!(
                "truncated last line `{shown}` (the log ends without a newline; {}); skipped",
                err.message
            ),
        }),
    }
    Ok(())
}

/// A log where some skipped lines are rows of another layout holds a mix of layouts (two runs
/// with different options appended to one file): say so once, with the layout and lines.
fn note_other_layouts(input: &str, layout: &Layout, warnings: &mut Vec<Warning>) {
    let skipped: HashSet<usize> = warnings.iter().map(|w| w.line).collect();
    if skipped.is_empty() {
        return;
    }
    let mut found: Vec<(String, Vec<usize>)> = Vec::new();
    for (idx, raw) in input.split('\n').enumerate() {
        if !skipped.contains(&(idx + 1)) {
            continue;
        }
        let l = raw.strip_suffix('\r').unwrap_or(raw);
        let other = other_layout_row(l, idx + 1, layout);
        if let Some(other) = other {
            match found.iter_mut().find(|(o, _)| *o == other) {
                Some((_, lines)) => lines.push(idx + 1),
                None => found.push((other, vec![idx + 1])),
            }
        }
    }
    let this = layout_name(layout);
    for (other, lines) in found {
        warnings.push(Warning {
            line: lines[0],
            message: format!(
                "a mix of layouts in one file: the log was read in the {this} layout, but {} line(s) from line {} on are rows of the {other} layout and were skipped; split the file and read each part",
                lines.len(),
                lines[0]
            ),
        });
    }
}

/// Detects the layout: JSON when the first meaningful line is an object, text when a perf
/// header or footer is present, otherwise whichever of text and the `-x` separators reads the
/// most counter rows (text on a tie or when nothing reads).
pub fn detect_layout(input: &str) -> Layout {
    let lines: Vec<&str> = input
        .split('\n')
        .map(|l| l.strip_suffix('\r').unwrap_or(l))
        .filter(|l| !l.trim().is_empty() && !l.trim_start().starts_with('#'))
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

fn seen_perf_output_before(input: &str, layout: &Layout, line: usize) -> bool {
    input.split('\n').take(line.saturating_sub(1)).enumerate().any(|(n, raw)| {
        let l = raw.strip_suffix('\r').unwrap_or(raw);
        match layout {
            Layout::Text => matches!(text::read_line(l, n + 1), Ok(text::Line::Item(_))),
            Layout::Csv { sep } => matches!(csv::read_line(l, n + 1, sep), Ok(Some(Ok(_)))),
            Layout::Json => matches!(json::read_line(l, n + 1), Ok(Some(Ok(_)))),
        }
    })
}

fn not_perf_stat(input: &str, source_name: &str, err: Option<&LineError>) -> ImportError {
    let first = input.split('\n').map(str::trim).find(|l| !l.is_empty());
    let found = match (err, first) {
        (Some(err), _) => format!(" (line {}: {})", err.line, err.message),
        (None, Some(first)) => format!(" (first line: `{}`)", error::shorten(first, 60)),
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
