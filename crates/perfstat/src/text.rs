//! Reads perf stat's default text layout.
//!
//! A counter row is
//! `[timestamp] [aggr-id [cpus]] count [unit] event [cgroup] [# value label] [( +- var% )] [(run%)]`,
//! where the count is a number (grouped as the locale groups digits, see `number`), `<not
//! counted>` or `<not supported>`. A line `[timestamp] [aggr-id [cpus]] # value label`
//! continues the previous row's metrics. Also read: the "Performance counter stats for" header,
//! the "seconds time elapsed", "seconds user" and "seconds sys" footers. Ignored: blank lines,
//! `#` comments and headers, `[ perf record: ... ]` and perf's NMI-watchdog hint.
//!
//! Other lines are not perf's (a benchmark's own output, a shell prompt, mail text) and are
//! [`Line::Noise`]: skipped and counted by the reader. A line that carries perf's marks (a `-I`
//! timestamp, an aggregation id, `<not counted>`, a `#` metric, a `(50.00%)` run share, a unit
//! perf prints such as `msec`, or a count right-aligned in perf's 18 columns) and cannot be
//! read is damaged perf output and an error. A row without any of those marks whose event is
//! not shaped like a perf event (`1234 ops/sec`, `3 iterations`) is noise too; one whose event
//! is is a [`Line::WeakRow`], which the reader drops where the rows around it have a prefix it
//! lacks. A `-G` cgroup column is recognised after a unit, or when it starts with `/` after an
//! event whose name is not a plain word.
//!
//! One perf RFC series (TPEBS counting mode, v1-v3) printed retire latencies as
//! `0.00 MEM_INST_RETIRED.STLB_HIT_STORES:p 0 0` (latency, event with `:p`, then two counters);
//! such a row is read as the retire latency `X:R`.

use std::ops::ControlFlow;

use crate::assemble::{Item, Prefix, RawRow};
use crate::error::LineError;
use crate::mode::Aggregation;
use crate::number::{Numbers, parse_count, parse_metric_value, parse_value};

mod prefix;
mod row;
mod shape;

pub(crate) use prefix::{aggr_kind, is_thread_id, read_prefix};
use row::{event_columns, metric_after_hash, read_count_column, row_metrics, strip_tail};
pub(crate) use shape::plausible_event;

/// A word of a line and its byte offset.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Tok<'a> {
    pub start: usize,
    pub text: &'a str,
}

impl Tok<'_> {
    fn end(&self) -> usize {
        self.start + self.text.len()
    }
}

/// Splits on ASCII whitespace only, so the no-break spaces some locales put between digit
/// groups stay inside the count.
pub(crate) fn tokens(line: &str) -> Vec<Tok<'_>> {
    // A row has a dozen words or so: one allocation, not a doubling series.
    let mut out = Vec::with_capacity(16);
    let bytes = line.as_bytes();
    let mut i = 0;
    // Two tight loops (the blanks, then the word) rather than one that tests whether a word
    // is open at every byte: perf pads its columns with long runs of spaces.
    loop {
        while i < bytes.len() && bytes[i].is_ascii_whitespace() {
            i += 1;
        }
        if i == bytes.len() {
            return out;
        }
        let start = i;
        while i < bytes.len() && !bytes[i].is_ascii_whitespace() {
            i += 1;
        }
        out.push(Tok { start, text: &line[start..i] });
    }
}

/// Lines perf itself prints around the counts that carry nothing to import.
const QUIET_PREFIXES: [&str; 5] = [
    "[ perf record:",
    "Some events weren't counted",
    "echo 0 > /proc/sys/kernel/nmi_watchdog",
    "echo 1 > /proc/sys/kernel/nmi_watchdog",
    "perf stat ...",
];

/// Units perf prints in the unit column: the clocks' `msec`, sysfs units (`Joules`, `MiB`)
/// and the JSON ScaleUnit units of events (`Bytes`, `KB`, `MB`, `ns`).
const UNITS: [&str; 17] = [
    "msec", "ns", "usec", "us", "Joules", "MiB", "KiB", "GiB", "Bytes", "KB", "MB", "GB", "kB",
    "Watts", "MHz", "%", "(null)",
];

/// What one line held.
#[derive(Debug)]
pub(crate) enum Line {
    /// A row, metric, header or footer.
    Item(Item),
    /// A row with no mark of perf's but its shape (`1,234 cycles`): read unless the rows
    /// around it show a prefix it lacks.
    WeakRow(Item),
    /// Nothing to read (blank, comment, perf's own hints).
    Nothing,
    /// Not perf's output; why (the reader quotes the line only for the few it keeps).
    Noise(&'static str),
}

/// Where a second counter row starts on `line` when two were pasted onto one: after the first
/// row's `#` metric, a count and an event followed by a `#` of their own
/// (`... #    3.480 GHz  (73.98%)    11,236,720,130      instructions   #    1.51  insn per
/// cycle`). perf never prints two `#` in one row.
pub(crate) fn pasted_row(line: &str) -> Option<usize> {
    let hash = line.find('#')?;
    if !line[hash + 1..].contains('#') || line[..hash].trim().is_empty() {
        return None;
    }
    let toks = tokens(line);
    let mut hashes = toks.iter().enumerate().filter(|(_, t)| t.text == "#").map(|(i, _)| i);
    let (first, second) = (hashes.next()?, hashes.next()?);
    // The count, then the event (`cycles`) or a unit and the event (`msec task-clock`).
    [2, 3].into_iter().filter_map(|back| second.checked_sub(back)).find_map(|i| {
        let count = toks[i];
        let counted =
            count.text.starts_with(|c: char| c.is_ascii_digit()) && parse_count(count.text).is_ok();
        (i > first + 1 && counted).then_some(count.start)
    })
}

pub(crate) fn read_line(
    full_line: &str,
    n: usize,
    numbers: &mut Numbers,
) -> Result<Line, LineError> {
    // `( +- 1.2% )` and `(50.00%)` end rows and continuation lines, in either order.
    let tail = strip_tail(full_line);
    let line = &full_line[..tail.end];
    let toks = tokens(line);
    if let Some(done) = line_without_count(full_line, line, &toks, tail.end, n, numbers)? {
        return Ok(done);
    }

    let (prefix, idx) = read_prefix(line, &toks);
    // A `comm-tid` before a number is as likely someone's prose (`bench-2 3 times`) as
    // `--per-thread`'s column: only timestamps and the other aggregation ids are perf's marks.
    let has_prefix = prefix.interval.is_some()
        || prefix.aggr.as_ref().is_some_and(|a| a.kind != Aggregation::Thread);
    let Some(tok) = toks.get(idx) else {
        return Err(LineError::new(
            n,
            line.len(),
            "row has a timestamp or aggregation id but no count (truncated line?)",
        ));
    };
    if tok.text == "#" {
        let metric = metric_after_hash(line, tok.end(), n, None, numbers)?;
        return Ok(Line::Item(Item::Metric { prefix, metric }));
    }
    let count = match read_count_column(line, &toks, idx, has_prefix, &tail, n, numbers)? {
        ControlFlow::Break(done) => return Ok(done),
        ControlFlow::Continue(count) => count,
    };
    let marked = count.marked;
    for (marks, at, text) in tail.marks.iter().flatten() {
        numbers.accept(*marks, n, text).map_err(|m| LineError::new(n, *at, m))?;
    }

    let rest_toks = &toks[count.next..];
    let hash = rest_toks.iter().position(|t| t.text.starts_with('#'));
    let before = &rest_toks[..hash.unwrap_or(rest_toks.len())];
    let hash_tok = hash.map(|h| rest_toks[h]);
    let (metrics, running_pct) = row_metrics(line, hash_tok, tail.running_pct, n, numbers)?;

    let (unit, event, cgroup, key) = match event_columns(line, before, marked, count.end, n)? {
        ControlFlow::Break(done) => return Ok(done),
        ControlFlow::Continue(columns) => columns,
    };
    if !marked && !plausible_event(&event) {
        return Ok(noise(line, "not a perf stat counter row"));
    }

    let item = Item::Row(Box::new(RawRow {
        line: n,
        prefix,
        value: count.value,
        count_text: count.text,
        unit: if unit == "(null)" { String::new() } else { unit },
        event,
        key,
        cgroup,
        running_pct,
        variance_pct: tail.variance_pct,
        metrics,
    }));
    Ok(if marked { Line::Item(item) } else { Line::WeakRow(item) })
}

/// The lines that are not counter rows: blank, `#` comments, headers and continued metrics,
/// the "Performance counter stats for" header, the footers and perf's own hints. `None` for
/// a line that may be a row.
fn line_without_count(
    full_line: &str,
    line: &str,
    toks: &[Tok],
    tail_end: usize,
    n: usize,
    numbers: &mut Numbers,
) -> Result<Option<Line>, LineError> {
    let Some(first) = toks.first() else {
        return Ok(Some(if tail_end < row::trim_end(full_line).len() {
            noise(full_line, "not a perf stat counter row")
        } else {
            Line::Nothing
        }));
    };
    let trimmed = line.trim();

    if first.text.starts_with('#') {
        // `#   0.5 %  tma_x` continues a row; `#  time  counts unit events` and
        // `# started on ...` are headers.
        if first.text == "#" && toks.get(1).is_some_and(|t| parse_metric_value(t.text).is_some()) {
            let metric = metric_after_hash(line, first.end(), n, None, numbers)?;
            return Ok(Some(Line::Item(Item::Metric { prefix: Prefix::default(), metric })));
        }
        return Ok(Some(Line::Nothing));
    }
    if let Some(rest) = trimmed.strip_prefix("Performance counter stats for") {
        return Ok(Some(Line::Item(header(rest, n))));
    }
    if let Some(item) = footer(toks, n, numbers)? {
        return Ok(Some(Line::Item(item)));
    }
    if QUIET_PREFIXES.iter().any(|p| trimmed.starts_with(p)) {
        return Ok(Some(Line::Nothing));
    }
    Ok(None)
}

fn noise(_line: &str, why: &'static str) -> Line {
    Line::Noise(why)
}

/// Whether every word is a number (a `--metric-only` row, a table of figures).
fn only_numbers(toks: &[Tok]) -> bool {
    !toks.is_empty()
        && toks.iter().all(|t| parse_value(t.text).is_some() || parse_count(t.text).is_ok())
}

fn header(rest: &str, n: usize) -> Item {
    let mut text = rest.trim().trim_end_matches(':').trim();
    let mut repeats = None;
    if let Some(open) = text.rfind('(')
        && let Some(inner) = text[open + 1..].strip_suffix(')')
        && let Some(count) = inner.trim().strip_suffix("runs")
    {
        repeats = count.trim().parse().ok();
        text = text[..open].trim();
    }
    let command = text
        .strip_prefix('\'')
        .and_then(|t| t.strip_suffix('\''))
        .filter(|inner| !inner.contains('\''))
        .unwrap_or(text);
    Item::RunHeader {
        line: n,
        command: (!command.is_empty()).then(|| command.to_string()),
        repeats,
    }
}

fn footer(toks: &[Tok], n: usize, numbers: &mut Numbers) -> Result<Option<Item>, LineError> {
    // Every footer has `seconds` second or fourth: most lines are rows and stop here.
    let word = |i: usize| toks.get(i).map(|t| t.text);
    if word(1) != Some("seconds") && word(3) != Some("seconds") {
        return Ok(None);
    }
    let Some((seconds, marks)) = word(0).and_then(parse_value) else { return Ok(None) };
    let item = match (word(1), word(2), word(3), word(4), word(5)) {
        (Some("seconds"), Some("time"), Some("elapsed"), ..)
        | (Some("+-"), _, Some("seconds"), Some("time"), Some("elapsed")) => {
            Item::Elapsed { line: n, seconds }
        }
        (Some("seconds"), Some("user"), ..) => Item::User { line: n, seconds },
        (Some("seconds"), Some("sys"), ..) => Item::Sys { line: n, seconds },
        _ => return Ok(None),
    };
    numbers.accept(marks, n, toks[0].text).map_err(|m| LineError::new(n, toks[0].start, m))?;
    Ok(Some(item))
}
