//! Writes a [`Report`] as the seed's aligned table, as CSV or as JSON, plus the human-readable
//! notes (noise, malformed lines, lost events) that go under the table or to stderr.

use std::io::{self, Write};

use serde_json::{Map, Value, json};

use crate::analyze::{GroupValue, NOISE_TOLERANCE_NS, Report};

/// The column headers: the seed's, with `lat_` standing for the value field when it is
/// `latency` and the field's own name otherwise, then the two percentile columns.
pub fn headers(report: &Report) -> Vec<String> {
    let prefix = if report.value_field == "latency" { "lat" } else { report.value_field.as_str() };
    let mut headers = vec!["EVENTs".to_owned()];
    headers.extend(report.group_by.iter().cloned());
    headers.push("CNT".to_owned());
    for stat in ["min", "max", "avg", "avg(97%)", "p50", "p99"] {
        headers.push(format!("{prefix}_{stat}"));
    }
    headers
}

fn cells(report: &Report) -> Vec<Vec<String>> {
    let rows = report.rows.iter().map(|row| {
        let mut cells = vec![row.event.clone()];
        cells.extend(row.group.iter().map(GroupValue::to_string));
        let s = row.stats;
        cells.extend([s.count, s.min, s.max, s.avg, s.avg97, s.p50, s.p99].map(|n| n.to_string()));
        cells
    });
    rows.collect()
}

/// The seed's `sqlite3 -column -header` layout: left-aligned columns as wide as their widest
/// cell, two spaces apart, a dashed rule under the headers (trailing blanks trimmed).
pub fn write_table(report: &Report, out: &mut dyn Write) -> io::Result<()> {
    let headers = headers(report);
    let rows = cells(report);
    let mut widths: Vec<usize> = headers.iter().map(|h| h.chars().count()).collect();
    for row in &rows {
        for (width, cell) in widths.iter_mut().zip(row) {
            *width = (*width).max(cell.chars().count());
        }
    }
    let rule: Vec<String> = widths.iter().map(|&w| "-".repeat(w)).collect();
    for line in std::iter::once(&headers).chain(std::iter::once(&rule)).chain(&rows) {
        let mut text = String::new();
        for (idx, (cell, width)) in line.iter().zip(&widths).enumerate() {
            if idx > 0 {
                text.push_str("  ");
            }
            text.push_str(cell);
            text.extend(std::iter::repeat_n(' ', width - cell.chars().count()));
        }
        writeln!(out, "{}", text.trim_end())?;
    }
    Ok(())
}

/// RFC 4180 CSV with the table's headers.
pub fn write_csv(report: &Report, out: &mut dyn Write) -> io::Result<()> {
    for line in std::iter::once(headers(report)).chain(cells(report)) {
        let quoted: Vec<String> = line.iter().map(|cell| csv_field(cell)).collect();
        writeln!(out, "{}", quoted.join(","))?;
    }
    Ok(())
}

fn csv_field(cell: &str) -> String {
    if cell.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", cell.replace('"', "\"\""))
    } else {
        cell.to_owned()
    }
}

fn group_object(names: &[String], values: &[GroupValue]) -> Value {
    let map: Map<String, Value> =
        names.iter().zip(values).map(|(n, v)| (n.clone(), json!(v.to_string()))).collect();
    Value::Object(map)
}

/// One group's object.
fn row_value(report: &Report, row: &crate::analyze::LatencyRow) -> Value {
    let s = row.stats;
    json!({
        "event": row.event,
        "group": group_object(&report.group_by, &row.group),
        "count": s.count, "min": s.min, "max": s.max, "avg": s.avg, "avg97": s.avg97,
        "p50": s.p50, "p99": s.p99,
    })
}

/// The groups, each made into JSON only as it is written: a document of 300,000 groups built
/// whole took 918 MB.
struct Rows<'a>(&'a Report);

impl serde::Serialize for Rows<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeSeq;
        let mut seq = serializer.serialize_seq(Some(self.0.rows.len()))?;
        for row in &self.0.rows {
            seq.serialize_element(&row_value(self.0, row))?;
        }
        seq.end()
    }
}

/// The document, its keys in the sorted order a JSON map writes them.
#[derive(serde::Serialize)]
struct Document<'a> {
    event_regex: &'a str,
    group_by: &'a [String],
    groups: Rows<'a>,
    lines: u64,
    lost: Value,
    malformed: Value,
    noise: Value,
    other_event_lines: u64,
    samples: u64,
    source: &'a str,
    value_field: &'a str,
}

/// One JSON object holding the groups and every note, so nothing needs stderr.
pub fn write_json(report: &Report, out: &mut dyn Write) -> io::Result<()> {
    let noise: Vec<Value> = report
        .noise
        .iter()
        .map(|n| {
            json!({
                "line": n.line, "event": n.event, "group": group_object(&report.group_by, &n.group),
                "value": n.value, "timestamp": n.timestamp,
            })
        })
        .collect();
    let malformed: Vec<Value> = report
        .malformed
        .iter()
        .map(|m| json!({"line": m.line, "reason": m.reason, "text": m.text}))
        .collect();
    let document = Document {
        event_regex: &report.event_regex,
        group_by: &report.group_by,
        groups: Rows(report),
        lines: report.lines,
        lost: json!({ "lines": report.lost_lines, "events": report.lost_events, "first_line": report.first_lost_line }),
        malformed: json!({ "count": report.malformed_count, "first": malformed }),
        noise: json!({
            "detection": report.noise_detection,
            "tolerance_ns": NOISE_TOLERANCE_NS,
            "count": report.noise_count,
            "samples": noise,
        }),
        other_event_lines: report.other_events,
        samples: report.samples,
        source: &report.source,
        value_field: &report.value_field,
    };
    serde_json::to_writer_pretty(&mut *out, &document)?;
    writeln!(out)
}

/// The notes under the table: a summary, then every exclusion and problem, never silently.
pub fn write_notes(report: &Report, out: &mut dyn Write) -> io::Result<()> {
    let field = &report.value_field;
    writeln!(
        out,
        "{} samples in {} groups from {} lines of {} ({} lines of other events)",
        report.samples,
        report.rows.len(),
        report.lines,
        report.source,
        report.other_events
    )?;
    if report.rows.is_empty() {
        writeln!(
            out,
            "no samples: no line has an event matching `{}` with a `{field}` field{}",
            report.event_regex,
            if report.group_by.is_empty() {
                String::new()
            } else {
                format!(" and {}", report.group_by.join(", "))
            }
        )?;
    }
    if !report.noise_detection {
        writeln!(out, "noise detection is off (--keep-noise): enable-time samples are included")?;
    } else if report.noise_count > 0 {
        writeln!(
            out,
            "excluded {} enable-time noise sample{} ({field} within {} ms of its line's timestamp, \
             i.e. trace_clock()+1 from an unset start time; --keep-noise includes them):",
            report.noise_count,
            plural(report.noise_count),
            NOISE_TOLERANCE_NS / 1_000_000
        )?;
        for noise in &report.noise {
            let group: String = report
                .group_by
                .iter()
                .zip(&noise.group)
                .map(|(n, v)| format!(" {n}={v}"))
                .collect();
            writeln!(
                out,
                "  line {}: {}{group} {field}={} at {} s",
                noise.line, noise.event, noise.value, noise.timestamp
            )?;
        }
        if report.noise_count > report.noise.len() as u64 {
            writeln!(out, "  … and {} more", report.noise_count - report.noise.len() as u64)?;
        }
    }
    if report.malformed_count > 0 {
        writeln!(
            out,
            "skipped {} malformed line{}{}:",
            report.malformed_count,
            plural(report.malformed_count),
            if report.malformed.len() as u64 == report.malformed_count {
                String::new()
            } else {
                format!("; the first {}", report.malformed.len())
            }
        )?;
        for malformed in &report.malformed {
            writeln!(out, "  line {}: {}", malformed.line, malformed.reason)?;
            writeln!(out, "    | {}", malformed.text)?;
        }
    }
    if let Some(first) = report.first_lost_line {
        writeln!(
            out,
            "warning: the tracer lost {} events ({} report line{}, first at line {first}); \
             the statistics do not include them (enlarge buffer_size_kb or read faster)",
            report.lost_events,
            report.lost_lines,
            plural(report.lost_lines)
        )?;
    }
    Ok(())
}

fn plural(count: u64) -> &'static str {
    if count == 1 { "" } else { "s" }
}
