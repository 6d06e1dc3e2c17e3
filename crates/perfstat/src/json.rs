//! Reads perf stat's `-j` layout: one JSON object per line.
//!
//! Keys (spec D6): `interval`, an aggregation key (`cpu`, `core`, `die`, `socket`, `node`,
//! `cluster`, `cache`, `thread`) with `aggregate-number`, `counter-value` (a string: a number,
//! `<not counted>` or `<not supported>`), `unit`, `event`, `cgroup`, `variance`, `event-runtime`,
//! `pcnt-running`, `metric-value` (a string in 6.12, a bare number in 6.1) and `metric-unit`.
//! An object without `counter-value` continues the previous row's metrics; one with
//! `metricgroup` is a `Default` metric-group line. perf 6.1 prints NaN metric values as a bare
//! `nan`, which is not JSON; such values are read as NaN.

use crate::build::{Item, Prefix, RawRow};
use crate::error::LineError;
use crate::log::{Aggr, AggrKind, Count, PrintedMetric};
use crate::number::parse_count;
use serde_json::{Map, Value};

/// perf 6.1 prints `"metric-value" : nan`; make such values JSON `null` with a marker so they
/// still read as NaN.
fn repair_bare_nan(line: &str) -> String {
    let mut out = line.to_string();
    for bare in [": -nan", ": nan", ": -inf", ": inf"] {
        out = out.replace(bare, ": \"nan\"");
    }
    out
}

pub(crate) fn read_line(line: &str, n: usize) -> Result<Option<Result<Item, String>>, LineError> {
    let trimmed = line.trim();
    if trimmed.is_empty() || trimmed.starts_with('#') {
        return Ok(None);
    }
    let offset = line.len() - line.trim_start().len();
    if !trimmed.starts_with('{') {
        return Ok(Some(Err(format!(
            "skipped `{}`: not a perf stat -j object",
            crate::error::shorten(trimmed, 60)
        ))));
    }
    let object: Map<String, Value> = match serde_json::from_str(trimmed) {
        Ok(o) => o,
        Err(first) => serde_json::from_str(&repair_bare_nan(trimmed)).map_err(|_| {
            LineError::new(
                n,
                offset + first.column().saturating_sub(1),
                format!("invalid JSON object ({first}); expected one perf stat -j object per line"),
            )
        })?,
    };
    let get = |k: &str| object.get(k);
    let string = |k: &str| match get(k) {
        Some(Value::String(s)) => Some(s.clone()),
        Some(Value::Number(num)) => Some(num.to_string()),
        _ => None,
    };
    let number = |k: &str| match get(k) {
        Some(Value::Number(num)) => num.as_f64(),
        Some(Value::String(s)) => crate::number::parse_plain(s),
        _ => None,
    };
    let key_error = |k: &str, what: &str| {
        let col = trimmed.find(&format!("\"{k}\"")).map_or(offset, |c| offset + c);
        LineError::new(n, col, format!("key `{k}` {what}"))
    };

    let mut prefix = Prefix::default();
    if get("interval").is_some() {
        prefix.interval =
            Some(number("interval").ok_or_else(|| key_error("interval", "is not a number"))?);
    }
    let aggr_keys = [
        ("cpu", AggrKind::Cpu),
        ("core", AggrKind::Core),
        ("die", AggrKind::Die),
        ("socket", AggrKind::Socket),
        ("node", AggrKind::Node),
        ("cluster", AggrKind::Cluster),
        ("cache", AggrKind::Cache),
        ("thread", AggrKind::Thread),
    ];
    for (k, kind) in aggr_keys {
        if get(k).is_some() {
            let id = string(k).ok_or_else(|| key_error(k, "is not a string"))?;
            let id = if kind == AggrKind::Cpu && !id.starts_with("CPU") {
                format!("CPU{id}")
            } else {
                id
            };
            let cpus = number("aggregate-number")
                .and_then(|c| (c >= 0.0 && c <= f64::from(u32::MAX)).then_some(c as u32));
            prefix.aggr = Some(Aggr { kind, id, cpus });
            break;
        }
    }
    let metric = {
        let unit = string("metric-unit").unwrap_or_default();
        let value = match get("metric-value") {
            Some(Value::Null) | None => String::new(),
            _ => string("metric-value").unwrap_or_default(),
        };
        let header = string("metricgroup");
        let has_label = !unit.is_empty() && unit != "(null)";
        (has_label || header.is_some() && !value.is_empty())
            .then(|| PrintedMetric::new(n, &value, &unit, header))
    };

    let Some(counter) = get("counter-value") else {
        return Ok(metric.map(|metric| Ok(Item::Metric { prefix, metric })));
    };
    let count_text = match counter {
        Value::String(s) => s.clone(),
        Value::Number(num) => num.to_string(),
        _ => return Err(key_error("counter-value", "is neither a string nor a number")),
    };
    let value = match count_text.trim() {
        "<not counted>" => Count::NotCounted,
        "<not supported>" => Count::NotSupported,
        text => Count::Counted(
            parse_count(text)
                .map_err(|m| key_error("counter-value", &format!("holds a bad {m}")))?,
        ),
    };
    let event = string("event").filter(|e| !e.trim().is_empty()).ok_or_else(|| {
        LineError::new(
            n,
            offset,
            "object has `counter-value` but no `event` (expected perf stat -j output)",
        )
    })?;
    let unit = string("unit").filter(|u| u != "(null)").unwrap_or_default();
    Ok(Some(Ok(Item::Row(Box::new(RawRow {
        line: n,
        prefix,
        value,
        count_text,
        unit,
        event,
        key: None,
        cgroup: string("cgroup"),
        running_pct: number("pcnt-running"),
        variance_pct: number("variance"),
        metrics: metric.into_iter().filter(|m| m.header.is_none()).collect(),
    })))))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bare_nan_is_repaired() {
        let line = r#"{"counter-value" : "1.000000", "unit" : "", "event" : "x", "event-runtime" : 1, "pcnt-running" : 100.00, "metric-value" : nan, "metric-unit" : "K/sec"}"#;
        let Ok(Some(Ok(Item::Row(row)))) = read_line(line, 1) else { panic!("not a row") };
        assert!(row.metrics[0].value.is_some_and(f64::is_nan));
    }
}
