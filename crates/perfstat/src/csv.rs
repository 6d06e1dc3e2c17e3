//! Reads perf stat's `-x SEP` layout.
//!
//! Fields (spec D6): `[interval] [aggr-id [cpus]] value unit event [cgroup] [variance%]
//! run-time pcnt-running [metric-value metric-unit]`. The optional fields are told apart by
//! shape: the interval has nine decimals, aggregation ids have perf's forms, the variance ends
//! in `%`, and run-time/pcnt-running are the first integer/decimal pair after the event. A
//! line whose value field is empty continues the previous row's metrics. perf does not quote
//! fields, so an event such as `cpu/UOPS_EXECUTED.THREAD,cmask=1/` printed with `-x,` is
//! rejoined while its `pmu/` is not closed.

use crate::build::{Item, Prefix, RawRow};
use crate::error::LineError;
use crate::log::{Aggr, AggrKind, Count, PrintedMetric};
use crate::number::{
    looks_numeric, parse_count, parse_percent, parse_plain, parse_timestamp, parse_uint,
};
use crate::text::{aggr_kind, is_thread_id};

/// `None` for blank and comment lines, `Some(Err(reason))` for a skipped line.
pub(crate) fn read_line(
    line: &str,
    n: usize,
    sep: &str,
) -> Result<Option<Result<Item, String>>, LineError> {
    let trimmed = line.trim();
    if trimmed.is_empty() || trimmed.starts_with('#') {
        return Ok(None);
    }
    if sep.is_empty() || !line.contains(sep) {
        return Ok(Some(Err(format!(
            "skipped `{}`: no `{sep}` separator, not a perf stat -x row",
            crate::error::shorten(trimmed, 60)
        ))));
    }
    // Fields with their byte offsets, for error columns.
    let mut fields: Vec<(usize, &str)> = Vec::new();
    let mut start = 0;
    for piece in line.split(sep) {
        fields.push((start, piece));
        start += piece.len() + sep.len();
    }
    let field = |i: usize| fields.get(i).map(|(_, f)| f.trim());
    let at = |i: usize| fields.get(i).map_or(line.len(), |(s, _)| *s);

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
            let mut aggr = Aggr { kind: kind.clone(), id: id.to_string(), cpus: None };
            idx += 1;
            if kind != AggrKind::Cpu
                && let Some(cpus) = field(idx).and_then(parse_uint)
                && value_like(idx + 1)
            {
                aggr.cpus = u32::try_from(cpus).ok();
                idx += 1;
            }
            prefix.aggr = Some(aggr);
        } else if !id.is_empty() && is_thread_id(id) && value_like(idx + 1) {
            prefix.aggr = Some(Aggr { kind: AggrKind::Thread, id: id.to_string(), cpus: None });
            idx += 1;
        }
    }
    let has_prefix = idx > 0;
    let Some(value_text) = field(idx) else {
        return Err(LineError::new(
            n,
            line.len(),
            "row has a prefix but no value field (truncated line?)",
        ));
    };

    let value = match value_text {
        "" => {
            // A continuation: only the last two fields (metric-value, metric-unit) are set.
            let len = fields.len();
            if len < idx + 2 {
                return Ok(None);
            }
            let (mv, mu) = (field(len - 2).unwrap_or(""), field(len - 1).unwrap_or(""));
            if mv.is_empty() && (mu.is_empty() || mu == "(null)") {
                return Ok(None);
            }
            return Ok(Some(Ok(Item::Metric {
                prefix,
                metric: PrintedMetric::new(n, mv, mu, None),
            })));
        }
        "<not counted>" => Count::NotCounted,
        "<not supported>" => Count::NotSupported,
        v if looks_numeric(v) => {
            Count::Counted(parse_count(v).map_err(|m| LineError::new(n, at(idx), m))?)
        }
        v if has_prefix || v.starts_with('<') => {
            return Err(LineError::new(
                n,
                at(idx),
                format!("expected a count, `<not counted>` or `<not supported>`, found `{v}`"),
            ));
        }
        _ => {
            return Ok(Some(Err(format!(
                "skipped `{}`: not a perf stat -x row",
                crate::error::shorten(trimmed, 60)
            ))));
        }
    };
    let count_text = value_text.to_string();
    let (Some(unit), Some(first_event)) = (field(idx + 1), field(idx + 2)) else {
        return Err(LineError::new(
            n,
            line.len(),
            "expected unit and event fields after the value (perf's -x layout: value, unit, event, run-time, pcnt-running, metric-value, metric-unit)",
        ));
    };
    let mut event = first_event.to_string();
    let mut next = idx + 3;
    while event.matches('/').count() == 1 && !event.ends_with('/') && next < fields.len() {
        event.push_str(sep);
        event.push_str(fields[next].1);
        next += 1;
    }
    if event.is_empty() || parse_plain(&event).is_some() {
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
    // and followed by nothing or by metric-value and metric-unit.
    let rest: Vec<&str> = fields[next.min(fields.len())..].iter().map(|(_, f)| f.trim()).collect();
    let pair = (0..=2.min(rest.len())).find(|&p| {
        p + 2 <= rest.len()
            && parse_uint(rest[p]).is_some()
            && parse_plain(rest[p + 1]).is_some()
            && matches!(rest.len() - (p + 2), 0 | 2)
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
    let mut variance_pct = None;
    for extra in &rest[..p] {
        match parse_percent(extra) {
            Some(v) if extra.ends_with('%') => variance_pct = Some(v),
            _ => cgroup = Some(extra.to_string()),
        }
    }
    let running_pct = parse_plain(rest[p + 1]);
    let mut metrics = Vec::new();
    if rest.len() == p + 4 {
        let (mv, mu) = (rest[p + 2], rest[p + 3]);
        if !(mv.is_empty() && (mu.is_empty() || mu == "(null)")) {
            metrics.push(PrintedMetric::new(n, mv, if mu == "(null)" { "" } else { mu }, None));
        }
    }
    Ok(Some(Ok(Item::Row(Box::new(RawRow {
        line: n,
        prefix,
        value,
        count_text,
        unit: if unit == "(null)" { String::new() } else { unit.to_string() },
        event,
        key: None,
        cgroup,
        running_pct,
        variance_pct,
        metrics,
    })))))
}
