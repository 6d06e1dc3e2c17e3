//! Reads perf stat's default text layout.
//!
//! A counter row is
//! `[timestamp] [aggr-id [cpus]] count [unit] event [cgroup] [# value label] [( +- var% )] [(run%)]`,
//! where the count is a number (locale-grouped), `<not counted>` or `<not supported>`. A line
//! `[timestamp] [aggr-id [cpus]] # value label` continues the previous row's metrics.
//! Also read: the "Performance counter stats for" header, the "seconds time elapsed",
//! "seconds user" and "seconds sys" footers. Skipped silently: blank lines, `#` comments and
//! headers, `[ perf record: ... ]` and perf's NMI-watchdog hint. Any other line that does not
//! start with a count or a row prefix is skipped with a warning; a line that does and cannot be
//! read is an error. A `-G` cgroup column is recognised after a unit, or when it starts with `/`
//! after an event whose name is not a plain word.
//!
//! One perf RFC series (seed 004, TPEBS v1-v3) printed retire latencies as
//! `0.00 MEM_INST_RETIRED.STLB_HIT_STORES:p 0 0` (latency, event with `:p`, then two counters);
//! such a row is read as the retire latency `X:R`.

use crate::build::{Item, Prefix, RawRow};
use crate::error::LineError;
use crate::key::EventKey;
use crate::log::{Aggr, AggrKind, Count, PrintedMetric};
use crate::number::{
    looks_numeric, parse_count, parse_metric_value, parse_percent, parse_plain, parse_timestamp,
    parse_uint,
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

/// What one line held.
pub(crate) enum Line {
    Item(Item),
    Nothing,
    Skipped(String),
}

pub(crate) fn read_line(full_line: &str, n: usize) -> Result<Line, LineError> {
    // `( +- 1.2% )` and `(50.00%)` end rows and continuation lines, in either order.
    let (body_end, running_pct, variance_pct) = strip_tail(full_line);
    let line = &full_line[..body_end];
    let toks = tokens(line);
    let Some(first) = toks.first() else { return Ok(Line::Nothing) };
    let trimmed = line.trim();

    if first.text.starts_with('#') {
        // `#   0.5 %  tma_x` continues a row; `#  time  counts unit events` and
        // `# started on ...` are headers.
        if first.text == "#" && toks.get(1).is_some_and(|t| parse_metric_value(t.text).is_some()) {
            let metric = metric_after_hash(line, first.end(), n, None);
            return Ok(Line::Item(Item::Metric { prefix: Prefix::default(), metric }));
        }
        return Ok(Line::Nothing);
    }
    if let Some(rest) = trimmed.strip_prefix("Performance counter stats for") {
        return Ok(Line::Item(header(rest, n)));
    }
    if let Some(item) = footer(&toks, n) {
        return Ok(Line::Item(item));
    }
    if QUIET_PREFIXES.iter().any(|p| trimmed.starts_with(p)) {
        return Ok(Line::Nothing);
    }

    let (prefix, mut idx) = read_prefix(line, &toks);
    let has_prefix = idx > 0;
    let Some(tok) = toks.get(idx) else {
        return Err(LineError::new(
            n,
            line.len(),
            "row has a timestamp or aggregation id but no count (truncated line?)",
        ));
    };
    if tok.text == "#" {
        let metric = metric_after_hash(line, tok.end(), n, None);
        return Ok(Line::Item(Item::Metric { prefix, metric }));
    }

    let value = if tok.text == "<not" {
        match toks.get(idx + 1).map(|t| t.text) {
            Some("counted>") => Count::NotCounted,
            Some("supported>") => Count::NotSupported,
            _ => return Err(not_a_count(n, tok)),
        }
    } else if tok.text.starts_with('<') {
        return Err(not_a_count(n, tok));
    } else if looks_numeric(tok.text) {
        Count::Counted(parse_count(tok.text).map_err(|m| LineError::new(n, tok.start, m))?)
    } else if has_prefix {
        return Err(LineError::new(
            n,
            tok.start,
            format!("expected a count after the row prefix, found `{}`", tok.text),
        ));
    } else {
        return Ok(loose_or_skipped(line, &toks, n));
    };
    let count_tok = *tok;
    let count_end =
        if matches!(value, Count::Counted(_)) { tok.end() } else { toks[idx + 1].end() };
    idx += if matches!(value, Count::Counted(_)) { 1 } else { 2 };
    let count_text = line[count_tok.start..count_end].to_string();

    let rest_toks = &toks[idx..];
    let hash = rest_toks.iter().position(|t| t.text.starts_with('#'));
    let before = &rest_toks[..hash.unwrap_or(rest_toks.len())];
    let mut metrics = Vec::new();
    let mut running_pct = running_pct;
    if let Some(h) = hash {
        let hash_tok = rest_toks[h];
        let mut metric = metric_after_hash(line, hash_tok.start + 1, n, None);
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

    for t in before {
        if parse_plain(t.text).is_some() && !is_rfc_counter(before, t) {
            return Err(LineError::new(
                n,
                t.start,
                format!(
                    "expected `[unit] event` after the count, found the number `{}`; `--metric-only` output has no counts and cannot be imported",
                    t.text
                ),
            ));
        }
    }
    let (unit, event, cgroup, key) = match before {
        [] => {
            return Err(LineError::new(
                n,
                count_end,
                "counter row has no event name after the count (truncated line?)",
            ));
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
        [event] => (String::new(), event.text.to_string(), None, None),
        [event, cgroup] if cgroup.text.starts_with('/') && !looks_like_unit(event.text) => {
            (String::new(), event.text.to_string(), Some(cgroup.text.to_string()), None)
        }
        [unit, event] => (unit.text.to_string(), event.text.to_string(), None, None),
        [unit, event, cgroup] => {
            (unit.text.to_string(), event.text.to_string(), Some(cgroup.text.to_string()), None)
        }
        [_, _, _, extra, ..] => {
            return Err(LineError::new(
                n,
                extra.start,
                format!(
                    "expected `[unit] event [cgroup]` after the count, found {} words; a `#` should start the metric",
                    before.len()
                ),
            ));
        }
    };

    Ok(Line::Item(Item::Row(Box::new(RawRow {
        line: n,
        prefix,
        value,
        count_text,
        unit: if unit == "(null)" { String::new() } else { unit },
        event,
        key,
        cgroup,
        running_pct,
        variance_pct,
        metrics,
    }))))
}

/// Peels `( +- x% )` (variance) and `(x%)` (run share) off the end of a line; returns the
/// length of what is left and the two values.
fn strip_tail(line: &str) -> (usize, Option<f64>, Option<f64>) {
    let mut end = line.trim_end().len();
    let mut running_pct = None;
    let mut variance_pct = None;
    while line[..end].ends_with(')') {
        let Some(open) = line[..end].rfind('(') else { break };
        let inner = line[open + 1..end - 1].trim();
        if let Some(var) = inner.strip_prefix("+-") {
            match parse_percent(var) {
                Some(v) => variance_pct = Some(v),
                None => break,
            }
        } else if let Some(pct) = parse_percent(inner) {
            running_pct = Some(pct);
        } else {
            break;
        }
        end = line[..open].trim_end().len();
    }
    (end, running_pct, variance_pct)
}

/// `(60.00%)  checked` → (Some(60.0), Some("checked")); text without a leading share is returned
/// whole.
fn leading_share(note: &str) -> (Option<f64>, Option<String>) {
    if let Some(inner) = note.strip_prefix('(')
        && let Some((pct, rest)) = inner.split_once(')')
        && let Some(share) = parse_percent(pct.trim())
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

fn footer(toks: &[Tok], n: usize) -> Option<Item> {
    // Every footer has `seconds` second or fourth: most lines are rows and stop here.
    let word = |i: usize| toks.get(i).map(|t| t.text);
    if word(1) != Some("seconds") && word(3) != Some("seconds") {
        return None;
    }
    let seconds = parse_plain(word(0)?)?;
    match (word(1), word(2), word(3), word(4), word(5)) {
        (Some("seconds"), Some("time"), Some("elapsed"), ..)
        | (Some("+-"), _, Some("seconds"), Some("time"), Some("elapsed")) => {
            Some(Item::Elapsed { line: n, seconds })
        }
        (Some("seconds"), Some("user"), ..) => Some(Item::User { line: n, seconds }),
        (Some("seconds"), Some("sys"), ..) => Some(Item::Sys { line: n, seconds }),
        _ => None,
    }
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

/// The metric after a `#` at byte `from`: value, then the label.
fn metric_after_hash(line: &str, from: usize, n: usize, header: Option<String>) -> PrintedMetric {
    let rest = line.get(from..).unwrap_or("");
    // The first word only (no token list for it).
    let start = rest.bytes().position(|b| !b.is_ascii_whitespace());
    let first = start.map(|s| {
        let end =
            rest[s..].bytes().position(|b| b.is_ascii_whitespace()).map_or(rest.len(), |e| s + e);
        Tok { start: s, text: &rest[s..end] }
    });
    match first {
        Some(t) if parse_metric_value(t.text).is_some() => {
            PrintedMetric::new(n, t.text, &rest[t.end()..], header)
        }
        Some(_) => PrintedMetric::new(n, "", rest, header),
        None => PrintedMetric::new(n, "", "", header),
    }
}

/// A line without a count: perf's `Default` metric-group line (`TopdownL1 (cpu_core)  # 38.9 %
/// tma_backend_bound`) or prose.
fn loose_or_skipped(line: &str, toks: &[Tok], n: usize) -> Line {
    if let Some(h) = toks.iter().position(|t| t.text == "#")
        && toks.get(h + 1).is_some_and(|t| parse_metric_value(t.text).is_some())
    {
        let header = line[..toks[h].start].trim().to_string();
        let metric = metric_after_hash(line, toks[h].end(), n, Some(header));
        return Line::Item(Item::Metric { prefix: Prefix::default(), metric });
    }
    Line::Skipped(format!(
        "skipped `{}`: not a perf stat counter row",
        crate::error::shorten(line.trim(), 60)
    ))
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
    fn thread_ids() {
        assert!(is_thread_id("rust_worker-1"));
        assert!(is_thread_id("Web Content-1234"));
        assert!(!is_thread_id("page-faults"));
        assert!(!is_thread_id("1-2"));
    }
}
