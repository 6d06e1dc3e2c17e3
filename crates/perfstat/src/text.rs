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
//! One perf RFC series (seed 004, TPEBS v1-v3) printed retire latencies as
//! `0.00 MEM_INST_RETIRED.STLB_HIT_STORES:p 0 0` (latency, event with `:p`, then two counters);
//! such a row is read as the retire latency `X:R`.

use std::ops::ControlFlow;

use crate::build::{Item, Prefix, RawRow};
use crate::error::LineError;
use crate::key::EventKey;
use crate::log::{Aggr, AggrKind, Count, PrintedMetric};
use crate::number::{
    Numbers, looks_numeric, parse_count, parse_metric_value, parse_percent, parse_timestamp,
    parse_uint, parse_value,
};

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
    let mut start = None;
    for (i, b) in line.bytes().enumerate() {
        if b.is_ascii_whitespace() {
            if let Some(s) = start.take() {
                out.push(Tok { start: s, text: &line[s..i] });
            }
        } else if start.is_none() {
            start = Some(i);
        }
    }
    if let Some(s) = start {
        out.push(Tok { start: s, text: &line[s..] });
    }
    out
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
        || prefix.aggr.as_ref().is_some_and(|a| a.kind != AggrKind::Thread);
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
        return Ok(Some(if tail_end < full_line.trim_end().len() {
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

/// A row's count, read by [`read_count_column`].
struct CountColumn {
    value: Count,
    /// The count as printed.
    text: String,
    /// Where the count's text ends.
    end: usize,
    /// The index of the first word after the count.
    next: usize,
    /// Whether the line carries perf's marks (damage, not noise, when it cannot be read).
    marked: bool,
}

/// Reads the count at `toks[idx]` (after the row prefix): a number, `<not counted>` or
/// `<not supported>`; breaks with the line's reading when it cannot be a counter row.
fn read_count_column(
    line: &str,
    toks: &[Tok],
    mut idx: usize,
    has_prefix: bool,
    tail: &Tail<'_>,
    n: usize,
    numbers: &mut Numbers,
) -> Result<ControlFlow<Line, CountColumn>, LineError> {
    let tok = toks[idx];
    // The `#` that starts perf's metric column, if any.
    let hash = toks[idx..].iter().position(|t| t.text.starts_with('#')).map(|h| h + idx);
    // perf's marks on this line besides its shape: damage, not noise, when it cannot be read.
    // The cheap ones first: most rows have a prefix or a run share.
    let marked = has_prefix
        || tail.running_pct.is_some()
        || tail.variance_pct.is_some()
        // `%18s`: the count right-aligned in perf's 18 columns.
        || (idx == 0 && tok.start > 0 && tok.end() == 18)
        || hash.is_some_and(|h| {
            let rest = &line[toks[h].start + 1..];
            rest.split_ascii_whitespace().next().is_some_and(|w| parse_metric_value(w).is_some())
        })
        || parse_timestamp(tok.text).is_some()
        || toks.get(idx + 1).is_some_and(|t| UNITS.contains(&t.text));

    let value = if tok.text == "<not" {
        match toks.get(idx + 1).map(|t| t.text) {
            Some("counted>") => Count::NotCounted,
            Some("supported>") => Count::NotSupported,
            _ => return Err(not_a_count(n, &tok)),
        }
    } else if tok.text.starts_with('<') {
        if marked {
            return Err(not_a_count(n, &tok));
        }
        return Ok(ControlFlow::Break(noise(line, "not a perf stat counter row")));
    } else if looks_numeric(tok.text) {
        match read_count(line, toks, idx) {
            Ok((v, marks, last)) => {
                numbers
                    .accept(marks, n, &line[tok.start..toks[last].end()])
                    .map_err(|m| LineError::new(n, tok.start, m))?;
                // `idx` is the count's last word (several with space grouping).
                idx = last;
                Count::Counted(v)
            }
            Err(_) if !marked && only_numbers(&toks[idx..hash.unwrap_or(toks.len())]) => {
                return Ok(ControlFlow::Break(noise(
                    line,
                    "only numbers (`--metric-only` output has no counts)",
                )));
            }
            Err(_) if !marked => {
                return Ok(ControlFlow::Break(noise(line, "not a perf stat counter row")));
            }
            Err(m) => return Err(LineError::new(n, tok.start, m)),
        }
    } else if has_prefix {
        return Err(LineError::new(
            n,
            tok.start,
            format!("expected a count after the row prefix, found `{}`", tok.text),
        ));
    } else {
        return loose_or_noise(line, toks, n, numbers).map(ControlFlow::Break);
    };
    let counted = matches!(value, Count::Counted(_));
    let end = if counted { toks[idx].end() } else { toks[idx + 1].end() };
    Ok(ControlFlow::Continue(CountColumn {
        value,
        text: line[tok.start..end].to_string(),
        end,
        next: idx + if counted { 1 } else { 2 },
        marked: marked || !counted,
    }))
}

/// The metric perf printed after a row's `#` (`hash`), and the row's run share, which a
/// note appended after it hid from `strip_tail` (`running_pct` otherwise).
fn row_metrics(
    line: &str,
    hash: Option<Tok<'_>>,
    mut running_pct: Option<f64>,
    n: usize,
    numbers: &mut Numbers,
) -> Result<(Vec<PrintedMetric>, Option<f64>), LineError> {
    let mut metrics = Vec::new();
    if let Some(hash_tok) = hash {
        let mut metric = metric_after_hash(line, hash_tok.start + 1, n, None, numbers)?;
        // A note appended after the run share hid the share from `strip_tail`: take it back.
        if running_pct.is_none()
            && let Some(note) = metric.note.take()
        {
            let (share, rest) = leading_share(&note);
            running_pct = share;
            metric.note = rest;
        }
        if !metric.text.is_empty() || !metric.name.is_empty() {
            metrics.push(metric);
        }
    }
    Ok((metrics, running_pct))
}

/// A row's unit, event, cgroup and (for the TPEBS RFC's `X:p a b`) key.
type EventColumns = (String, String, Option<String>, Option<EventKey>);

/// Reads the words between the count (ending at `count_end`) and the metric:
/// `[unit] event [cgroup]`. Breaks with noise where an unmarked line does not fit.
fn event_columns(
    line: &str,
    before: &[Tok],
    marked: bool,
    count_end: usize,
    n: usize,
) -> Result<ControlFlow<Line, EventColumns>, LineError> {
    let refuse = |at: usize, message: String| {
        if marked {
            Err(LineError::new(n, at, message))
        } else {
            Ok(ControlFlow::Break(noise(line, "not a perf stat counter row")))
        }
    };
    for t in before {
        // Event names and units start with a letter: only the others can be numbers.
        let maybe_number = t.text.starts_with(|c: char| c.is_ascii_digit() || "+-.".contains(c));
        if maybe_number && parse_value(t.text).is_some() && !is_rfc_counter(before, t) {
            if !marked && only_numbers(before) {
                return Ok(ControlFlow::Break(noise(
                    line,
                    "only numbers (`--metric-only` output has no counts)",
                )));
            }
            return refuse(
                t.start,
                format!(
                    "expected `[unit] event` after the count, found the number `{}`; `--metric-only` output has no counts and cannot be imported",
                    t.text
                ),
            );
        }
    }
    let columns = match before {
        [] => {
            return refuse(
                count_end,
                "counter row has no event name after the count (truncated line?)".to_string(),
            );
        }
        [event, a, b]
            if event.text.ends_with(":p")
                && parse_uint(a.text).is_some()
                && parse_uint(b.text).is_some() =>
        {
            let mut key = EventKey::from_perf(&event.text[..event.text.len() - 2]);
            key.retire_latency = true;
            (String::new(), event.text.to_string(), None, Some(key))
        }
        [unit] if UNITS.contains(&unit.text) => {
            return refuse(
                unit.end(),
                format!(
                    "counter row has no event name after the unit `{}` (truncated line?)",
                    unit.text
                ),
            );
        }
        [event] => (String::new(), event.text.to_string(), None, None),
        [event, cgroup] if cgroup.text.starts_with('/') && !looks_like_unit(event.text) => {
            (String::new(), event.text.to_string(), Some(cgroup.text.to_string()), None)
        }
        [unit, event] if marked || UNITS.contains(&unit.text) => {
            (unit.text.to_string(), event.text.to_string(), None, None)
        }
        [unit, event, cgroup] if marked || UNITS.contains(&unit.text) => {
            (unit.text.to_string(), event.text.to_string(), Some(cgroup.text.to_string()), None)
        }
        [_, _] | [_, _, _] => {
            return Ok(ControlFlow::Break(noise(line, "not a perf stat counter row")));
        }
        [_, _, _, extra, ..] => {
            return refuse(
                extra.start,
                format!(
                    "expected `[unit] event [cgroup]` after the count, found {} words; a `#` should start the metric",
                    before.len()
                ),
            );
        }
    };
    Ok(ControlFlow::Continue(columns))
}

fn noise(_line: &str, why: &'static str) -> Line {
    Line::Noise(why)
}

/// Whether every word is a number (a `--metric-only` row, a table of figures).
fn only_numbers(toks: &[Tok]) -> bool {
    !toks.is_empty()
        && toks.iter().all(|t| parse_value(t.text).is_some() || parse_count(t.text).is_ok())
}

/// The count starting at `toks[idx]`: one word, or several when the locale groups digits
/// with an ASCII space (`4 595 014 128`, `1 520,45`). Returns the value, its marks and the
/// index of its last word.
fn read_count(
    line: &str,
    toks: &[Tok],
    idx: usize,
) -> Result<(f64, crate::number::Marks, usize), String> {
    let first = toks[idx];
    let mut last = idx;
    // Groups follow after exactly one space: three digits, the last maybe with decimals.
    if first.text.len() <= 3 && first.text.bytes().all(|b| b.is_ascii_digit()) {
        while let Some(next) = toks.get(last + 1) {
            let digits = next.text.split([',', '.']).next().unwrap_or("");
            let grouped = next.start == toks[last].end() + 1
                && digits.len() == 3
                && digits.bytes().all(|b| b.is_ascii_digit())
                && toks[last].text.bytes().all(|b| b.is_ascii_digit());
            if !grouped {
                break;
            }
            last += 1;
        }
    }
    let text = &line[first.start..toks[last].end()];
    let (value, marks) = parse_count(text)?;
    Ok((value, marks, last))
}

/// The run share and variance peeled off the end of a line, and the length of what is left.
struct Tail<'a> {
    end: usize,
    running_pct: Option<f64>,
    variance_pct: Option<f64>,
    /// The marks of the two numbers, where they start and their text, to hold them to the
    /// log's convention.
    marks: [Option<(crate::number::Marks, usize, &'a str)>; 2],
}

/// Peels `( +- x% )` (variance) and `(x%)` (run share) off the end of a line.
fn strip_tail(line: &str) -> Tail<'_> {
    let mut end = line.trim_end().len();
    let mut tail = Tail { end, running_pct: None, variance_pct: None, marks: [None, None] };
    while line[..end].ends_with(')') {
        let Some(open) = line[..end].rfind('(') else { break };
        let inner = line[open + 1..end - 1].trim();
        if let Some(var) = inner.strip_prefix("+-") {
            match parse_percent(var) {
                Some((v, m)) => {
                    tail.variance_pct = Some(v);
                    tail.marks[1] = Some((m, open + 1, var.trim()));
                }
                None => break,
            }
        } else if let Some((pct, m)) = parse_percent(inner) {
            tail.running_pct = Some(pct);
            tail.marks[0] = Some((m, open + 1, inner));
        } else {
            break;
        }
        end = line[..open].trim_end().len();
    }
    tail.end = end;
    tail
}

/// `(60.00%)  checked` → (Some(60.0), Some("checked")); text without a leading share is returned
/// whole.
fn leading_share(note: &str) -> (Option<f64>, Option<String>) {
    if let Some(inner) = note.strip_prefix('(')
        && let Some((pct, rest)) = inner.split_once(')')
        && let Some((share, _)) = parse_percent(pct.trim())
    {
        let rest = rest.trim();
        return (Some(share), (!rest.is_empty()).then(|| rest.to_string()));
    }
    (None, Some(note.to_string()))
}

fn not_a_count(n: usize, tok: &Tok) -> LineError {
    LineError::new(
        n,
        tok.start,
        format!("expected a count, `<not counted>` or `<not supported>`, found `{}`", tok.text),
    )
}

/// The two trailing counters of the RFC retire-latency row are numbers but not a metric-only row.
fn is_rfc_counter(before: &[Tok], t: &Tok) -> bool {
    before.len() == 3
        && before[0].text.ends_with(":p")
        && t.start > before[0].start
        && parse_uint(t.text).is_some()
}

/// Units perf prints are plain words (`msec`, `ns`, `Joules`, `MiB`); event names carry
/// `/`, `.`, `-`, `_` or `:`.
fn looks_like_unit(text: &str) -> bool {
    text.chars().all(|c| c.is_ascii_alphabetic() || matches!(c, '%' | '(' | ')'))
}

/// perf's event names that are one lower-case word: the legacy hardware and software events
/// and their aliases (tools/perf/util/parse-events.c), the tool events and sysfs aliases.
const PLAIN_EVENTS: [&str; 11] = [
    "cycles",
    "instructions",
    "branches",
    "faults",
    "migrations",
    "cs",
    "dummy",
    "slots",
    "tsc",
    "mperf",
    "aperf",
];

/// The first word of perf's hyphenated lower-case event names (`cpu-clock`, `page-faults`,
/// `topdown-retiring`, `l1-dcache-loads`, `mem-loads`, `tx-start`, `cycles-ct`).
const HYPHEN_HEADS: [&str; 31] = [
    "cpu",
    "task",
    "page",
    "context",
    "minor",
    "major",
    "alignment",
    "emulation",
    "bpf",
    "cgroup",
    "branch",
    "cache",
    "bus",
    "stalled",
    "idle",
    "ref",
    "topdown",
    "mem",
    "tx",
    "el",
    "cycles",
    "l1",
    "llc",
    "l2",
    "dtlb",
    "itlb",
    "d",
    "i",
    "data",
    "instruction",
    "node",
];

/// Whether `event` is shaped like an event name perf prints: `pmu/terms/mods`, a vendor name
/// (`INST_RETIRED.ANY`), a tracepoint (`sched:sched_switch`), a raw `r1a2`, or one of perf's
/// own names. Words people print (`iterations`, `ops/sec`, `done.`) are not.
pub(crate) fn plausible_event(event: &str) -> bool {
    let valid = |c: char| c.is_ascii_alphanumeric() || "_.-:/,=@!+[]".contains(c);
    if event.is_empty()
        || !event.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
        || !event.chars().all(valid)
        || event.ends_with(['.', ',', ':'])
    {
        return false;
    }
    let slashes = event.matches('/').count();
    if slashes > 0 {
        // `pmu/terms/` with optional modifiers after the second slash.
        return slashes >= 2 && !event.starts_with('/') && !event.contains("//");
    }
    let base = event.split(':').next().unwrap_or(event);
    if event.contains(':') {
        // `name:mods` or a tracepoint `subsystem:name`.
        return !base.is_empty();
    }
    if base.contains(['_', '.', '=', ',', '@']) || base.bytes().any(|b| b.is_ascii_uppercase()) {
        return true;
    }
    let lower = base.to_ascii_lowercase();
    if crate::key::is_legacy_name(&lower) {
        return true;
    }
    if let Some((head, _)) = lower.split_once('-') {
        return HYPHEN_HEADS.contains(&head);
    }
    PLAIN_EVENTS.contains(&lower.as_str())
        || (lower.len() > 1
            && lower.starts_with('r')
            && lower[1..].bytes().all(|b| b.is_ascii_hexdigit()))
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

/// Reads `[timestamp] [aggr-id [cpus]]` and returns the index of the first token after it.
pub(crate) fn read_prefix(line: &str, toks: &[Tok]) -> (Prefix, usize) {
    let mut prefix = Prefix::default();
    let mut idx = 0;
    if toks.len() >= 2
        && let Some(t) = parse_timestamp(toks[0].text)
    {
        prefix.interval = Some(t);
        idx = 1;
    }
    let count_like =
        |i: usize| toks.get(i).is_some_and(|t| looks_numeric(t.text) || t.text.starts_with('<'));
    if let Some(tok) = toks.get(idx) {
        if let Some(kind) = aggr_kind(tok.text) {
            let mut aggr = Aggr { kind: kind.clone(), id: tok.text.to_string(), cpus: None };
            idx += 1;
            // The per-X modes always print the number of CPUs after the id; a bare integer
            // there is that number even when what follows is not a count (then an error).
            if !matches!(kind, AggrKind::Cpu | AggrKind::Thread)
                && let Some(cpus) = toks.get(idx).and_then(|t| parse_uint(t.text))
                && toks.len() > idx + 1
            {
                aggr.cpus = u32::try_from(cpus).ok();
                idx += 1;
            }
            prefix.aggr = Some(aggr);
        } else if !count_like(idx) && !tok.text.starts_with('#') {
            // `--per-thread`: `comm-tid`, where comm may contain spaces.
            for j in idx + 1..toks.len().min(idx + 6) {
                if count_like(j) {
                    let id = &line[tok.start..toks[j - 1].end()];
                    if is_thread_id(id) {
                        prefix.aggr =
                            Some(Aggr { kind: AggrKind::Thread, id: id.to_string(), cpus: None });
                        idx = j;
                    }
                    break;
                }
            }
        }
    }
    (prefix, idx)
}

pub(crate) fn is_thread_id(id: &str) -> bool {
    id.rsplit_once('-').is_some_and(|(comm, tid)| !comm.is_empty() && parse_uint(tid).is_some())
        && !looks_numeric(id)
}

/// Recognises the ids of `-A` (`CPU3`), `--per-socket` (`S0`), `--per-die` (`S0-D0`),
/// `--per-core` (`S0-D0-C1`, older perf `S0-C1`), `--per-cluster` (`S0-D0-CLS0`),
/// `--per-cache` (`S0-D0-L3-ID0`) and `--per-node` (`N0`).
pub(crate) fn aggr_kind(text: &str) -> Option<AggrKind> {
    // Most words asked about are counts and event names.
    if !matches!(text.as_bytes().first(), Some(b'C' | b'N' | b'S')) {
        return None;
    }
    let numbered = |s: &str, p: &str| s.strip_prefix(p).is_some_and(|d| parse_uint(d).is_some());
    if numbered(text, "CPU") {
        return Some(AggrKind::Cpu);
    }
    if numbered(text, "N") {
        return Some(AggrKind::Node);
    }
    let parts: Vec<&str> = text.split('-').collect();
    if !numbered(parts[0], "S") {
        return None;
    }
    match parts[1..] {
        [] => Some(AggrKind::Socket),
        [d] if numbered(d, "D") => Some(AggrKind::Die),
        [c] if numbered(c, "C") => Some(AggrKind::Core),
        [d, c] if numbered(d, "D") && numbered(c, "CLS") => Some(AggrKind::Cluster),
        [d, c] if numbered(d, "D") && numbered(c, "C") => Some(AggrKind::Core),
        [d, l, id] if numbered(d, "D") && numbered(l, "L") && numbered(id, "ID") => {
            Some(AggrKind::Cache)
        }
        _ => None,
    }
}

/// The metric after a `#` at byte `from`: value, then the label. The value's decimal mark is
/// held to the log's.
fn metric_after_hash(
    line: &str,
    from: usize,
    n: usize,
    header: Option<String>,
    numbers: &mut Numbers,
) -> Result<PrintedMetric, LineError> {
    let rest = line.get(from..).unwrap_or("");
    // The first word only (no token list for it).
    let start = rest.bytes().position(|b| !b.is_ascii_whitespace());
    let first = start.map(|s| {
        let end =
            rest[s..].bytes().position(|b| b.is_ascii_whitespace()).map_or(rest.len(), |e| s + e);
        Tok { start: s, text: &rest[s..end] }
    });
    Ok(match first {
        Some(t) => match parse_metric_value(t.text) {
            Some((_, marks)) => {
                numbers
                    .accept(marks, n, t.text)
                    .map_err(|m| LineError::new(n, from + t.start, m))?;
                PrintedMetric::new(n, t.text, &rest[t.end()..], header)
            }
            None => PrintedMetric::new(n, "", rest, header),
        },
        None => PrintedMetric::new(n, "", "", header),
    })
}

/// A line without a count: perf's `Default` metric-group line (`TopdownL1 (cpu_core)  # 38.9 %
/// tma_backend_bound`) or noise.
fn loose_or_noise(
    line: &str,
    toks: &[Tok],
    n: usize,
    numbers: &mut Numbers,
) -> Result<Line, LineError> {
    if let Some(h) = toks.iter().position(|t| t.text == "#")
        && toks.get(h + 1).is_some_and(|t| parse_metric_value(t.text).is_some())
    {
        let header = line[..toks[h].start].trim().to_string();
        let metric = metric_after_hash(line, toks[h].end(), n, Some(header), numbers)?;
        return Ok(Line::Item(Item::Metric { prefix: Prefix::default(), metric }));
    }
    Ok(noise(line, "not a perf stat counter row"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aggregation_ids() {
        assert_eq!(aggr_kind("CPU12"), Some(AggrKind::Cpu));
        assert_eq!(aggr_kind("S0"), Some(AggrKind::Socket));
        assert_eq!(aggr_kind("S1-D0"), Some(AggrKind::Die));
        assert_eq!(aggr_kind("S0-D0-C3"), Some(AggrKind::Core));
        assert_eq!(aggr_kind("S0-C3"), Some(AggrKind::Core));
        assert_eq!(aggr_kind("S0-D0-CLS1"), Some(AggrKind::Cluster));
        assert_eq!(aggr_kind("S0-D0-L3-ID0"), Some(AggrKind::Cache));
        assert_eq!(aggr_kind("N1"), Some(AggrKind::Node));
        for not in ["CPU", "S", "Sx", "cycles", "S0-X1", "N", "SLOTS"] {
            assert_eq!(aggr_kind(not), None, "{not}");
        }
    }

    #[test]
    fn event_shapes() {
        for yes in [
            "cycles",
            "cpu-cycles",
            "cs",
            "page-faults",
            "L1-dcache-load-misses",
            "dTLB-loads",
            "topdown-retiring",
            "INST_RETIRED.ANY",
            "cpu/UOPS_EXECUTED.THREAD,cmask=1/",
            "cpu_core/TOPDOWN.SLOTS/",
            "msr/tsc/",
            "TSC",
            "sched:sched_switch",
            "cycles:u",
            "r01c2",
            "duration_time",
            "power/energy-pkg/",
            "cpu/event=0x3c/k",
            "ls_dispatch.ld_dispatch",
            "UNC_M_CAS_COUNT.RD",
            "migrations",
            "l1d",
            "bpu",
            "L1-dcache-load-misses",
        ] {
            assert!(plausible_event(yes), "{yes}");
        }
        for no in [
            "iterations",
            "ops/sec",
            "done.",
            "requests,",
            "test-cases",
            "ms",
            "/sec",
            "a//b",
            "$HOME",
            "(null)",
            "42x",
            "apples",
        ] {
            assert!(!plausible_event(no), "{no}");
        }
    }

    #[test]
    fn thread_ids() {
        assert!(is_thread_id("rust_worker-1"));
        assert!(is_thread_id("Web Content-1234"));
        assert!(!is_thread_id("page-faults"));
        assert!(!is_thread_id("1-2"));
    }
}
