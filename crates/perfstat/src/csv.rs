//! Reads perf stat's `-x SEP` layout.
//!
//! Fields (tools/perf/util/stat-display.c, `print_*_csv`): `[interval] [aggr-id [cpus]] value unit event [cgroup] [variance%]
//! run-time pcnt-running [metric-value metric-unit]`. The optional fields are told apart by
//! shape: the interval has nine decimals, aggregation ids have perf's forms, the variance ends
//! in `%`, and run-time/pcnt-running are the first integer/decimal pair after the event. A
//! line whose value field is empty continues the previous row's metrics. perf does not quote
//! fields, so an event such as `cpu/UOPS_EXECUTED.THREAD,cmask=1/` printed with `-x,` is
//! rejoined while its `pmu/` is not closed.
//!
//! Under a locale with a decimal comma, `-x,` splits every decimal perf prints (`1520,45`
//! msec, the run share `51,32`, the metric value `0,998`) into two fields. perf's fixed
//! formats tell where: a count's fraction is all digits where the unit would be, the run share
//! always has two decimals after the integer run time, and a metric value's fraction is
//! followed by its unit. Such rows are rejoined when the log's decimal mark is `,`, or when
//! only the rejoined row reads.
//!
//! Lines without the separator, or whose fields are not a row's and carry none of perf's
//! marks (a prefix, `<not counted>`, five or more fields), are noise.

use std::borrow::Cow;

use crate::assemble::{Item, Prefix, RawRow};
use crate::error::LineError;
use crate::log::{Aggr, PrintedCount, PrintedMetric};
use crate::mode::Aggregation;
use crate::number::{
    Numbers, looks_numeric, parse_count, parse_metric_value, parse_percent, parse_timestamp,
    parse_uint, parse_value,
};
use crate::text::{Line, aggr_kind, is_thread_id, plausible_event};

/// A field and its byte offset in the line.
type Field<'a> = (usize, Cow<'a, str>);

pub(crate) fn read_line(
    line: &str,
    n: usize,
    sep: &str,
    numbers: &mut Numbers,
) -> Result<Line, LineError> {
    let trimmed = line.trim();
    if trimmed.is_empty() || trimmed.starts_with('#') {
        return Ok(Line::Nothing);
    }
    if sep.is_empty() || !line.contains(sep) {
        return Ok(noise(trimmed, "no separator, not a perf stat -x row"));
    }
    // Fields with their byte offsets, for error columns.
    let mut fields: Vec<Field> = Vec::new();
    let mut start = 0;
    for piece in line.split(sep) {
        fields.push((start, Cow::Borrowed(piece)));
        start += piece.len() + sep.len();
    }
    let field = |i: usize| fields.get(i).map(|(_, f)| f.trim());

    let (prefix, idx) = prefix_fields(&fields);
    let has_prefix = prefix.interval.is_some()
        || prefix.aggr.as_ref().is_some_and(|a| a.kind != Aggregation::Thread);
    let Some(value_text) = field(idx) else {
        return Err(LineError::new(
            n,
            line.len(),
            "row has a prefix but no value field (truncated line?)",
        ));
    };

    if value_text.is_empty() {
        return continuation(&fields, idx, prefix, n, sep, numbers, trimmed);
    }
    let not_counted = value_text.starts_with("<not");
    // perf's marks: rows this shaped that cannot be read are damaged, not someone's text.
    let marked = has_prefix || not_counted || fields.len() - idx >= 5;
    if !not_counted && !looks_numeric(value_text) {
        if has_prefix || value_text.starts_with('<') && marked {
            return Err(LineError::new(
                n,
                fields[idx].0,
                format!(
                    "expected a count, `<not counted>` or `<not supported>`, found `{value_text}`"
                ),
            ));
        }
        return Ok(noise(trimmed, "not a perf stat -x row"));
    }

    let parts = match read_parts(&fields, idx, n, sep, line, numbers) {
        Ok(parts) => parts,
        Err(_) if !marked && !plausible_event(field(idx + 2).unwrap_or("")) => {
            return Ok(noise(trimmed, "not a perf stat -x row"));
        }
        Err(err) => return Err(err),
    };
    row_item(parts, prefix, fields[idx].0, n, numbers).map(Line::Item)
}

/// The `-I` timestamp and aggregation id (with its CPU count) that start a row, and the
/// index of the field after them.
fn prefix_fields(fields: &[Field]) -> (Prefix, usize) {
    let field = |i: usize| fields.get(i).map(|(_, f)| f.trim());
    let mut prefix = Prefix::default();
    let mut idx = 0;
    if fields.len() > 3
        && let Some(t) = field(0).and_then(parse_timestamp)
    {
        prefix.interval = Some(t);
        idx = 1;
    }
    let value_like = |i: usize| {
        field(i).is_some_and(|f| f.is_empty() || looks_numeric(f) || f.starts_with("<not "))
    };
    if let Some(id) = field(idx) {
        if let Some(kind) = aggr_kind(id) {
            let mut aggr = Aggr { kind, id: id.to_string(), cpus: None };
            idx += 1;
            if kind != Aggregation::Cpu
                && let Some(cpus) = field(idx).and_then(parse_uint)
                && value_like(idx + 1)
            {
                aggr.cpus = u32::try_from(cpus).ok();
                idx += 1;
            }
            prefix.aggr = Some(aggr);
        } else if !id.is_empty() && is_thread_id(id) && value_like(idx + 1) {
            prefix.aggr = Some(Aggr { kind: Aggregation::Thread, id: id.to_string(), cpus: None });
            idx += 1;
        }
    }
    (prefix, idx)
}

/// The row's fields from the value (`fields[idx]`) on, as split, and rejoined where a
/// decimal comma split them: first when the log's decimal mark is `,`, else when the row as
/// split does not read.
fn read_parts(
    fields: &[Field],
    idx: usize,
    n: usize,
    sep: &str,
    line: &str,
    numbers: &Numbers,
) -> Result<Parts, LineError> {
    let comma_decimals = sep == "," && numbers.decimal.as_ref().is_some_and(|d| d.mark == ',');
    let split = (!comma_decimals).then(|| row(fields, idx, n, sep, line));
    match split {
        Some(Ok(parts)) => Ok(parts),
        split => {
            let joined = if sep == "," { rejoin_decimal_commas(fields, idx) } else { None };
            match (joined.map(|j| row(&j, idx, n, sep, line)), split) {
                (Some(Ok(parts)), _) => Ok(parts),
                (_, Some(err)) => err,
                (Some(err), None) => err,
                (None, None) => row(fields, idx, n, sep, line),
            }
        }
    }
}

/// The row from its fields (the value at byte `at`), its numbers held to the log's
/// convention.
fn row_item(
    parts: Parts,
    prefix: Prefix,
    at: usize,
    n: usize,
    numbers: &mut Numbers,
) -> Result<Item, LineError> {
    let accept = |numbers: &mut Numbers, marks, text: &str| {
        numbers.accept(marks, n, text).map_err(|m| LineError::new(n, at, m))
    };
    let value = match parts.value.as_str() {
        "<not counted>" => PrintedCount::NotCounted,
        "<not supported>" => PrintedCount::NotSupported,
        v if looks_numeric(v) => {
            let (count, marks) = parse_count(v).map_err(|m| LineError::new(n, at, m))?;
            accept(numbers, marks, v)?;
            PrintedCount::Value(count)
        }
        v => {
            return Err(LineError::new(
                n,
                at,
                format!("expected a count, `<not counted>` or `<not supported>`, found `{v}`"),
            ));
        }
    };
    if let Some((_, marks)) = parse_value(&parts.running) {
        accept(numbers, marks, &parts.running)?;
    }
    if let Some(var) = &parts.variance
        && let Some((_, marks)) = parse_percent(var)
    {
        accept(numbers, marks, var)?;
    }
    let mut metrics = Vec::new();
    if let Some((mv, mu)) = &parts.metric
        && !(mv.is_empty() && (mu.is_empty() || mu == "(null)"))
    {
        if let Some((_, marks)) = parse_metric_value(mv) {
            accept(numbers, marks, mv)?;
        }
        metrics.push(PrintedMetric::new(n, mv, if mu == "(null)" { "" } else { mu }, None));
    }
    Ok(Item::Row(Box::new(RawRow {
        line: n,
        prefix,
        value,
        count_text: parts.value.clone(),
        unit: if parts.unit == "(null)" { String::new() } else { parts.unit },
        event: parts.event,
        key: None,
        cgroup: parts.cgroup,
        running_pct: parse_value(&parts.running).map(|v| v.0),
        variance_pct: parts.variance.as_deref().and_then(parse_percent).map(|v| v.0),
        metrics,
    })))
}

fn noise(_trimmed: &str, why: &'static str) -> Line {
    Line::Noise(why)
}

/// A line whose value field is empty: a continuation carrying one more metric of the row
/// above (its last two fields), or nothing.
fn continuation(
    fields: &[Field],
    idx: usize,
    prefix: Prefix,
    n: usize,
    sep: &str,
    numbers: &mut Numbers,
    trimmed: &str,
) -> Result<Line, LineError> {
    let len = fields.len();
    if len < idx + 2 {
        return Ok(Line::Nothing);
    }
    let field = |i: usize| fields[i].1.trim();
    let (mut mv, mu) = (Cow::Borrowed(field(len - 2)), field(len - 1));
    // `0,998` split by `-x,` under a decimal comma.
    if sep == ","
        && len >= idx + 3
        && numbers.decimal.as_ref().is_some_and(|d| d.mark == ',')
        && digits(field(len - 3))
        && digits(&mv)
    {
        mv = Cow::Owned(format!("{},{}", field(len - 3), mv));
    }
    if mv.is_empty() && (mu.is_empty() || mu == "(null)") {
        return Ok(Line::Nothing);
    }
    match parse_metric_value(&mv) {
        Some((_, marks)) => {
            numbers.accept(marks, n, &mv).map_err(|m| LineError::new(n, fields[len - 2].0, m))?
        }
        None if !mv.is_empty() => return Ok(noise(trimmed, "not a perf stat -x row")),
        None => {}
    }
    Ok(Line::Item(Item::Metric { prefix, metric: PrintedMetric::new(n, &mv, mu, None) }))
}

fn digits(text: &str) -> bool {
    !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit())
}

/// The fields of a row after its prefix, as text.
struct Parts {
    value: String,
    unit: String,
    event: String,
    cgroup: Option<String>,
    variance: Option<String>,
    running: String,
    metric: Option<(String, String)>,
}

/// Reads the fields from `idx` (the value) on as a row.
fn row(fields: &[Field], idx: usize, n: usize, sep: &str, line: &str) -> Result<Parts, LineError> {
    let field = |i: usize| fields.get(i).map(|(_, f)| f.trim());
    let at = |i: usize| fields.get(i).map_or(line.len(), |(s, _)| *s);
    let value = field(idx).unwrap_or("").to_string();
    let (Some(unit), Some(first_event)) = (field(idx + 1), field(idx + 2)) else {
        return Err(LineError::new(
            n,
            line.len(),
            "expected unit and event fields after the value (perf's -x layout: value, unit, event, run-time, pcnt-running, metric-value, metric-unit)",
        ));
    };
    // A unit is a word (`msec`, `Joules`); digits there are a decimal split off the count.
    if digits(unit) {
        return Err(LineError::new(
            n,
            at(idx + 1),
            format!("expected a unit after the count, found the number `{unit}`"),
        ));
    }
    let mut event = first_event.to_string();
    let mut next = idx + 3;
    while event.matches('/').count() == 1 && !event.ends_with('/') && next < fields.len() {
        event.push_str(sep);
        event.push_str(&fields[next].1);
        next += 1;
    }
    if event.is_empty() || parse_value(&event).is_some() {
        return Err(LineError::new(
            n,
            at(idx + 2),
            format!(
                "expected an event name in field {}, found `{event}`; `--metric-only` output has no counts and cannot be imported",
                idx + 3
            ),
        ));
    }

    // run-time (integer) and pcnt-running (decimal), after at most a cgroup and a variance,
    // and followed by nothing or by metric-value and metric-unit. A cgroup is a name: a
    // number there is a run time read one field early.
    let rest: Vec<&str> = fields[next.min(fields.len())..].iter().map(|(_, f)| f.trim()).collect();
    let pair = (0..=2.min(rest.len())).find(|&p| {
        p + 2 <= rest.len()
            && parse_uint(rest[p]).is_some()
            && parse_value(rest[p + 1]).is_some()
            && matches!(rest.len() - (p + 2), 0 | 2)
            && rest[..p].iter().all(|f| f.ends_with('%') || !digits(f))
    });
    let Some(p) = pair else {
        return Err(LineError::new(
            n,
            at(next),
            format!(
                "expected run-time and pcnt-running fields after event `{event}` (perf's -x layout: value, unit, event, run-time, pcnt-running, metric-value, metric-unit)"
            ),
        ));
    };
    let mut cgroup = None;
    let mut variance = None;
    for extra in &rest[..p] {
        match parse_percent(extra) {
            Some(_) if extra.ends_with('%') => variance = Some(extra.to_string()),
            _ => cgroup = Some(extra.to_string()),
        }
    }
    let metric = (rest.len() == p + 4).then(|| (rest[p + 2].to_string(), rest[p + 3].to_string()));
    Ok(Parts {
        value,
        unit: unit.to_string(),
        event,
        cgroup,
        variance,
        running: rest[p + 1].to_string(),
        metric,
    })
}

/// The fields of a `-x,` row written under a decimal-comma locale, with each decimal perf split
/// joined again; `None` when no split shows.
fn rejoin_decimal_commas<'a>(fields: &[Field<'a>], idx: usize) -> Option<Vec<Field<'a>>> {
    let text = |i: usize| fields.get(i).map_or("", |(_, f)| f.trim());
    let join = |a: usize, b: usize| -> Field<'a> {
        (fields[a].0, Cow::Owned(format!("{},{}", text(a), text(b))))
    };
    let mut out: Vec<Field> = fields[..idx].to_vec();
    // The value, with its fraction where the unit would be.
    let mut i = idx;
    if digits(text(i)) && digits(text(i + 1)) {
        out.push(join(i, i + 1));
        i += 2;
    } else {
        out.push(fields[i].clone());
        i += 1;
    }
    // Unit and event (the event may hold the separator; `row` rejoins it).
    let event_start = i + 1;
    let mut end = event_start + 1;
    let mut event = text(event_start).to_string();
    while event.matches('/').count() == 1 && !event.ends_with('/') && end < fields.len() {
        event.push(',');
        event.push_str(&fields[end].1);
        end += 1;
    }
    out.extend(fields.get(i..end.min(fields.len()))?.iter().cloned());
    // The rest: [cgroup] [variance int, frac%] run-time, pcnt int, pcnt frac (two digits),
    // then nothing, the two empty metric fields, or metric int, [frac], unit.
    let rest: Vec<&str> = (end..fields.len()).map(text).collect();
    let run = (0..rest.len()).find(|&r| {
        digits(rest[r])
            && rest.get(r + 1).is_some_and(|f| digits(f))
            && rest.get(r + 2).is_some_and(|f| f.len() == 2 && digits(f))
    })?;
    let mut k = end;
    while k < end + run {
        let (this, next) = (text(k), text(k + 1));
        if digits(this) && next.ends_with('%') && digits(&next[..next.len() - 1]) {
            out.push(join(k, k + 1));
            k += 2;
        } else {
            out.push(fields[k].clone());
            k += 1;
        }
    }
    out.push(fields[end + run].clone());
    out.push(join(end + run + 1, end + run + 2));
    let after = end + run + 3;
    match fields.len() - after {
        0 | 2 => out.extend(fields[after..].iter().cloned()),
        3 if digits(text(after)) && digits(text(after + 1)) => {
            out.push(join(after, after + 1));
            out.push(fields[after + 2].clone());
        }
        _ => return None,
    }
    Some(out)
}
