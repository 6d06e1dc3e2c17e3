//! Reads perf stat's `-j` layout: one JSON object per line.
//!
//! Keys (tools/perf/util/stat-display.c, `print_*_json`): `interval`, an aggregation key (`cpu`, `core`, `die`, `socket`, `node`,
//! `cluster`, `cache`, `thread`) with `aggregate-number` (`counters` from perf 7.x on), `counter-value` (a string: a number,
//! `<not counted>` or `<not supported>`), `unit`, `event`, `cgroup`, `variance`, `event-runtime`,
//! `pcnt-running`, `metric-value` (a string in 6.12, a bare number in 6.1) and `metric-unit`.
//! An object without `counter-value` continues the previous row's metrics; one with
//! `metricgroup` is a `Default` metric-group line. perf 6.1 prints NaN metric values as a bare
//! `nan`, which is not JSON; such values are read as NaN. Under a decimal-comma locale perf
//! prints `"pcnt-running" : 51,32`, not JSON either; such values are read with their comma.
//!
//! A key given twice is an error naming the line (perf never writes one twice, and taking
//! either value would be a guess); so is a key of the wrong type. Lines that are not objects,
//! and objects without any of perf's keys (a benchmark's own JSON), are noise.

use std::fmt;
use std::ops::ControlFlow;

use crate::assemble::{Item, Prefix, RawRow};
use crate::error::LineError;
use crate::log::{Aggr, PrintedCount, PrintedMetric};
use crate::mode::Aggregation;
use crate::number::{Numbers, parse_count, parse_metric_value, parse_value};
use crate::text::Line;
use serde::de::{self, Deserializer, MapAccess, Visitor};
use serde_json::Value;

/// The keys perf writes; an object with none of them is not perf's.
const PERF_KEYS: [&str; 20] = [
    "counter-value",
    "event",
    "unit",
    "event-runtime",
    "pcnt-running",
    "metric-value",
    "metric-unit",
    "metricgroup",
    "interval",
    "cpu",
    "core",
    "die",
    "socket",
    "node",
    "cluster",
    "cache",
    "thread",
    "aggregate-number",
    "counters",
    "variance",
];

/// perf 6.1 prints `"metric-value" : nan`; make such values JSON strings so they still read
/// as NaN. Under a decimal-comma locale, `"pcnt-running" : 51,32` and `"variance" : 0,12`
/// become strings read with their comma.
fn repair(line: &str) -> String {
    let mut out = line.to_string();
    for bare in [": -nan", ": nan", ": -inf", ": inf"] {
        out = out.replace(bare, ": \"nan\"");
    }
    for key in ["\"pcnt-running\"", "\"variance\""] {
        let Some(at) = out.find(key) else { continue };
        let after = at + key.len();
        let rest = &out[after..];
        let Some(colon) = rest.find(':') else { continue };
        let value_start = after + colon + 1;
        let value = out[value_start..].trim_start();
        let lead = out.len() - value_start - value.len();
        let digits = |s: &str| s.bytes().take_while(u8::is_ascii_digit).count();
        let int = digits(value);
        if int > 0 && value[int..].starts_with(',') {
            let frac = digits(&value[int + 1..]);
            if frac > 0 {
                let start = value_start + lead;
                let number = out[start..start + int + 1 + frac].to_string();
                out.replace_range(start..start + int + 1 + frac, &format!("\"{number}\""));
            }
        }
    }
    out
}

/// A JSON object's keys in order, refusing a key given twice.
struct Object(Vec<(String, Value)>);

/// The duplicated key of an object, with what it held first.
#[derive(Debug)]
struct Duplicate(String);

impl fmt::Display for Duplicate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "duplicate key `{}`", self.0)
    }
}

impl<'de> serde::Deserialize<'de> for Object {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Object, D::Error> {
        struct Keys;
        impl<'de> Visitor<'de> for Keys {
            type Value = Object;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Object, A::Error> {
                let mut out: Vec<(String, Value)> = Vec::new();
                while let Some((key, value)) = map.next_entry::<String, Value>()? {
                    if out.iter().any(|(k, _)| *k == key) {
                        return Err(de::Error::custom(Duplicate(key)));
                    }
                    out.push((key, value));
                }
                Ok(Object(out))
            }
        }
        deserializer.deserialize_map(Keys)
    }
}

impl Object {
    fn get(&self, key: &str) -> Option<&Value> {
        self.0.iter().find(|(k, _)| k == key).map(|(_, v)| v)
    }
}

/// A JSON value's type, for messages.
fn type_name(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

pub(crate) fn read_line(line: &str, n: usize, numbers: &mut Numbers) -> Result<Line, LineError> {
    let trimmed = line.trim();
    if trimmed.is_empty() || trimmed.starts_with('#') {
        return Ok(Line::Nothing);
    }
    let offset = line.len() - line.trim_start().len();
    let object = match parse_object(trimmed, offset, n)? {
        ControlFlow::Break(done) => return Ok(done),
        ControlFlow::Continue(object) => object,
    };
    let fields = Fields { object: &object, trimmed, offset, n };
    let prefix = fields.prefix(numbers)?;
    for k in ["metric-unit", "unit", "event", "cgroup", "metricgroup"] {
        if let Some(v) = fields.get(k)
            && !matches!(v, Value::String(_) | Value::Null)
        {
            return Err(fields.wrong_type(k, "a string"));
        }
    }
    let metric = fields.metric(numbers)?;

    let Some(counter) = fields.get("counter-value") else {
        return Ok(match metric {
            Some(metric) => Line::Item(Item::Metric { prefix, metric }),
            None => Line::Nothing,
        });
    };
    let (value, count_text) = fields.count(counter, numbers)?;
    let event = match fields.get("event") {
        Some(Value::String(e)) if !e.trim().is_empty() => e.clone(),
        Some(Value::String(_)) => return Err(fields.key_error("event", "is empty")),
        None => {
            return Err(LineError::new(
                n,
                offset,
                "object has `counter-value` but no `event` (expected perf stat -j output)",
            ));
        }
        Some(_) => return Err(fields.wrong_type("event", "a string")),
    };
    let unit = fields.string("unit").filter(|u| u != "(null)").unwrap_or_default();
    let running_pct = fields.number("pcnt-running", numbers)?;
    let variance_pct = fields.number("variance", numbers)?;
    Ok(Line::Item(Item::Row(Box::new(RawRow {
        line: n,
        prefix,
        value,
        count_text,
        unit,
        event,
        key: None,
        cgroup: fields.string("cgroup"),
        running_pct,
        variance_pct,
        metrics: metric.into_iter().filter(|m| m.header.is_none()).collect(),
    }))))
}

/// Parses the line (`trimmed`, starting at byte `offset`) as one JSON object, repairing
/// perf's bare `nan` and decimal commas; breaks with noise for a line that is not perf's.
fn parse_object(
    trimmed: &str,
    offset: usize,
    n: usize,
) -> Result<ControlFlow<Line, Object>, LineError> {
    let noise = |why: &'static str| Ok(ControlFlow::Break(Line::Noise(why)));
    if !trimmed.starts_with('{') {
        return noise("not a perf stat -j object");
    }
    let perf_like = PERF_KEYS.iter().any(|k| trimmed.contains(&format!("\"{k}\"")));
    let object: Object = match serde_json::from_str(trimmed) {
        Ok(o) => o,
        Err(first) => match serde_json::from_str(&repair(trimmed)) {
            Ok(o) => o,
            Err(_) if !perf_like => return noise("not a perf stat -j object"),
            Err(_) => {
                let message = first.to_string();
                let suffix = format!(" at line {} column {}", first.line(), first.column());
                let message = message.strip_suffix(&suffix).unwrap_or(&message);
                // A line that starts with `{` and is valid JSON is an object, so the only
                // data error (not syntax) `Object` raises is its `Duplicate` key.
                let what = if first.classify() == serde_json::error::Category::Data {
                    format!(
                        "{message}: perf writes each key once, and either value could be meant; fix the line"
                    )
                } else {
                    format!(
                        "invalid JSON object ({message}); expected one perf stat -j object per line"
                    )
                };
                return Err(LineError::new(n, offset + first.column().saturating_sub(1), what));
            }
        },
    };
    if !object.0.iter().any(|(k, _)| PERF_KEYS.contains(&k.as_str())) {
        return noise("a JSON object without perf stat's keys");
    }
    Ok(ControlFlow::Continue(object))
}

/// An object of line `n` (text `trimmed`, starting at byte `offset`), read key by key with
/// errors that point at the key.
struct Fields<'a> {
    object: &'a Object,
    trimmed: &'a str,
    offset: usize,
    n: usize,
}

impl Fields<'_> {
    fn get(&self, k: &str) -> Option<&Value> {
        self.object.get(k)
    }

    fn key_error(&self, k: &str, what: &str) -> LineError {
        let col = self.trimmed.find(&format!("\"{k}\"")).map_or(self.offset, |c| self.offset + c);
        LineError::new(self.n, col, format!("key `{k}` {what}"))
    }

    fn wrong_type(&self, k: &str, want: &str) -> LineError {
        let found = self.get(k).map_or("missing", type_name);
        self.key_error(k, &format!("is {found}, expected {want}"))
    }

    /// A string key (or a number, as text).
    fn string(&self, k: &str) -> Option<String> {
        match self.get(k) {
            Some(Value::String(s)) => Some(s.clone()),
            Some(Value::Number(num)) => Some(num.to_string()),
            _ => None,
        }
    }

    /// A number key, or a string holding a number in the log's convention.
    fn number(&self, k: &str, numbers: &mut Numbers) -> Result<Option<f64>, LineError> {
        match self.get(k) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::Number(num)) => Ok(num.as_f64()),
            Some(Value::String(s)) => match parse_value(s) {
                Some((v, marks)) => {
                    numbers.accept(marks, self.n, s).map_err(|m| self.key_error(k, &m))?;
                    Ok(Some(v))
                }
                None => Err(self.key_error(k, &format!("holds `{s}`, which is not a number"))),
            },
            Some(_) => Err(self.wrong_type(k, "a number")),
        }
    }

    /// `interval` and the aggregation key with its `aggregate-number` (or `counters`).
    fn prefix(&self, numbers: &mut Numbers) -> Result<Prefix, LineError> {
        let mut prefix = Prefix::default();
        if self.get("interval").is_some() {
            prefix.interval = Some(match self.get("interval") {
                Some(Value::Number(num)) => num.as_f64().unwrap_or(f64::NAN),
                Some(Value::String(s)) => crate::number::parse_plain(s)
                    .ok_or_else(|| self.key_error("interval", "is not a number"))?,
                _ => return Err(self.wrong_type("interval", "a number")),
            });
        }
        let aggr_keys = [
            ("cpu", Aggregation::Cpu),
            ("core", Aggregation::Core),
            ("die", Aggregation::Die),
            ("socket", Aggregation::Socket),
            ("node", Aggregation::Node),
            ("cluster", Aggregation::Cluster),
            ("cache", Aggregation::Cache),
            ("thread", Aggregation::Thread),
        ];
        for (k, kind) in aggr_keys {
            if self.get(k).is_some() {
                let id = self.string(k).ok_or_else(|| self.wrong_type(k, "a string"))?;
                let id = if kind == Aggregation::Cpu && !id.starts_with("CPU") {
                    format!("CPU{id}")
                } else {
                    id
                };
                // perf 7.x names it `counters`.
                let cpus = match self.number("aggregate-number", numbers)? {
                    Some(c) => Some(c),
                    None => self.number("counters", numbers)?,
                };
                let cpus =
                    cpus.and_then(|c| (c >= 0.0 && c <= f64::from(u32::MAX)).then_some(c as u32));
                prefix.aggr = Some(Aggr { kind, id, cpus });
                break;
            }
        }
        Ok(prefix)
    }

    /// The metric (`metric-value`, `metric-unit`, a `Default` group's `metricgroup`), if the
    /// object carries one.
    fn metric(&self, numbers: &mut Numbers) -> Result<Option<PrintedMetric>, LineError> {
        let unit = self.string("metric-unit").unwrap_or_default();
        let value = match self.get("metric-value") {
            Some(Value::Null) | None => String::new(),
            Some(Value::String(_) | Value::Number(_)) => {
                self.string("metric-value").unwrap_or_default()
            }
            Some(_) => return Err(self.wrong_type("metric-value", "a string or a number")),
        };
        if let Some((_, marks)) = parse_metric_value(&value) {
            numbers
                .accept(marks, self.n, &value)
                .map_err(|m| self.key_error("metric-value", &m))?;
        }
        let header = self.string("metricgroup");
        let has_label = !unit.is_empty() && unit != "(null)";
        Ok((has_label || header.is_some() && !value.is_empty())
            .then(|| PrintedMetric::new(self.n, &value, &unit, header)))
    }

    /// The `counter-value` (`counter`): the count and its text.
    fn count(
        &self,
        counter: &Value,
        numbers: &mut Numbers,
    ) -> Result<(PrintedCount, String), LineError> {
        let count_text = match counter {
            Value::String(s) => s.clone(),
            Value::Number(num) => num.to_string(),
            _ => return Err(self.wrong_type("counter-value", "a string or a number")),
        };
        let value = match count_text.trim() {
            "<not counted>" => PrintedCount::NotCounted,
            "<not supported>" => PrintedCount::NotSupported,
            text => {
                let (count, marks) = parse_count(text)
                    .map_err(|m| self.key_error("counter-value", &format!("holds a bad {m}")))?;
                numbers
                    .accept(marks, self.n, text)
                    .map_err(|m| self.key_error("counter-value", &m))?;
                PrintedCount::Value(count)
            }
        };
        Ok((value, count_text))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(line: &str) -> Result<Line, LineError> {
        read_line(line, 1, &mut Numbers::default())
    }

    #[test]
    fn bare_nan_is_repaired() {
        let line = r#"{"counter-value" : "1.000000", "unit" : "", "event" : "x", "event-runtime" : 1, "pcnt-running" : 100.00, "metric-value" : nan, "metric-unit" : "K/sec"}"#;
        let Ok(Line::Item(Item::Row(row))) = read(line) else { panic!("not a row") };
        assert!(row.metrics[0].value.is_some_and(f64::is_nan));
    }

    #[test]
    fn decimal_commas_are_repaired() {
        let line = r#"{"counter-value" : "4595014128,000000", "unit" : "", "event" : "cycles", "event-runtime" : 2355000000, "pcnt-running" : 51,32, "metric-value" : "2,155000", "metric-unit" : "GHz"}"#;
        let Ok(Line::Item(Item::Row(row))) = read(line) else { panic!("not a row") };
        assert_eq!(row.value, PrintedCount::Value(4_595_014_128.0));
        assert_eq!(row.running_pct, Some(51.32));
        assert_eq!(row.metrics[0].value, Some(2.155));
    }

    #[test]
    fn duplicate_keys_and_wrong_types_are_named() {
        let dup = r#"{"counter-value" : "1.000000", "counter-value" : "2.000000", "unit" : "", "event" : "x"}"#;
        let err = read(dup).unwrap_err();
        assert!(err.message.starts_with("duplicate key `counter-value`"), "{}", err.message);
        let array = r#"{"counter-value" : "1.000000", "unit" : "", "event" : ["page-faults"]}"#;
        let err = read(array).unwrap_err();
        assert_eq!(err.message, "key `event` is an array, expected a string");
        assert!(matches!(read(r#"{"result": 5, "ok": true}"#), Ok(Line::Noise(_))));
    }
}
