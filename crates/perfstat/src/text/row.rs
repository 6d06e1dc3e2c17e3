//! A counter row after its prefix: the count column (locale-grouped numbers, `<not counted>`,
//! the TPEBS RFC's counters), unit, event and cgroup columns, the metric after `#`, and the
//! `( +- var% )` and `(run%)` tail.

use std::ops::ControlFlow;

use super::shape::looks_like_unit;
use super::{Line, Tok, UNITS, noise, only_numbers};
use crate::assemble::{Item, Prefix};
use crate::error::LineError;
use crate::key::EventKey;
use crate::log::{PrintedCount, PrintedMetric};
use crate::number::{
    Numbers, looks_numeric, parse_count, parse_metric_value, parse_percent, parse_timestamp,
    parse_uint, parse_value,
};

/// A row's count, read by [`read_count_column`].
pub(super) struct CountColumn {
    pub(super) value: PrintedCount,
    /// The count as printed.
    pub(super) text: String,
    /// Where the count's text ends.
    pub(super) end: usize,
    /// The index of the first word after the count.
    pub(super) next: usize,
    /// Whether the line carries perf's marks (damage, not noise, when it cannot be read).
    pub(super) marked: bool,
}

/// Reads the count at `toks[idx]` (after the row prefix): a number, `<not counted>` or
/// `<not supported>`; breaks with the line's reading when it cannot be a counter row.
pub(super) fn read_count_column(
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
            Some("counted>") => PrintedCount::NotCounted,
            Some("supported>") => PrintedCount::NotSupported,
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
                PrintedCount::Value(v)
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
            // A per-core or per-socket `--topdown` (or `--metric-only`) table: a share where
            // the count would be.
            Err(_) if tok.text.strip_suffix('%').is_some_and(|v| parse_value(v).is_some()) => {
                return Err(LineError::new(
                    n,
                    tok.start,
                    format!(
                        "`{}` is a metric's value, not a count: a `--topdown` or `--metric-only` table has no counts and cannot be imported (log perf stat without those options, with -M for the metrics)",
                        tok.text
                    ),
                ));
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
    let counted = matches!(value, PrintedCount::Value(_));
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
pub(super) fn row_metrics(
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
pub(super) fn event_columns(
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
        // perf 4.x and older put the clocks' unit after the event, in brackets:
        // `2140.543052      task-clock (msec)         #    0.998 CPUs utilized`.
        [event, unit] if unit.text == "(msec)" && !looks_like_unit(event.text) => {
            ("msec".to_string(), event.text.to_string(), None, None)
        }
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
pub(super) struct Tail<'a> {
    pub(super) end: usize,
    pub(super) running_pct: Option<f64>,
    pub(super) variance_pct: Option<f64>,
    /// The marks of the two numbers, where they start and their text, to hold them to the
    /// log's convention.
    pub(super) marks: [Option<(crate::number::Marks, usize, &'a str)>; 2],
}

/// Peels `( +- x% )` (variance) and `(x%)` (run share) off the end of a line.
pub(super) fn strip_tail(line: &str) -> Tail<'_> {
    let mut end = trim_end(line).len();
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
        end = trim_end(&line[..open]).len();
    }
    tail.end = end;
    tail
}

/// `str::trim_end`, with the ASCII blanks perf pads its columns with (up to 60 of them after
/// a `<not supported>` row's event) dropped byte by byte first: `trim_end` decodes every
/// character from the end, a third of the time spent on a row's tail.
pub(super) fn trim_end(text: &str) -> &str {
    let bytes = text.as_bytes();
    let mut end = bytes.len();
    // Every one of these is `White_Space`, which `trim_end` removes too.
    while end > 0 && matches!(bytes[end - 1], b' ' | b'\t' | b'\n' | b'\x0b' | b'\x0c' | b'\r') {
        end -= 1;
    }
    text[..end].trim_end()
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

/// The metric after a `#` at byte `from`: value, then the label. The value's decimal mark is
/// held to the log's.
pub(super) fn metric_after_hash(
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
    proptest::proptest! {
        /// Blanks of every kind, ASCII and not, in any order.
        #[test]
        fn trim_end_is_strs(text in "[a( \t\n\u{b}\u{c}\r\u{a0}\u{2003}\u{202f}é]{0,12}") {
            proptest::prop_assert_eq!(super::trim_end(&text), text.trim_end());
        }
    }
}
