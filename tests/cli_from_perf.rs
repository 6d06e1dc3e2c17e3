//! `tmetric eval --from-perf` end to end through the binary.
//!
//! Inputs are `perf stat` logs: the importer's fixtures (crates/perfstat/tests/data: real perf
//! 6.1 captures, hand-written logs, the Meteor Lake blocks of perf's TPEBS patch series) and the hand-written logs
//! of tests/data/perf. Expected values are worked out here from the raw numbers of each log
//! (read with plain string handling) and the formulas quoted next to them, or are what perf
//! itself printed; never outputs of the code under test.
//!
//! This file holds the helpers that read logs and tmetric's output; the tests are by what they
//! check: `seed_004` (Meteor Lake blocks and retire latencies), `layouts` (text, CSV, JSON and
//! standard input in, columns out), `rows` (which rows a result reads), `builtins` (perf's
//! built-in metrics), `topdown`, `inference` (model and facts the log decides), `power` (POWER's
//! per-chip hv_24x7 metrics) and `errors`.

use std::io::Write;
use std::path::Path;
use std::process::{Command, Output, Stdio};

use serde_json::Value;

use crate::support::{check, stderr, stdout};

mod builtins;
mod errors;
mod inference;
mod layouts;
mod power;
mod rows;
mod seed_004;
mod topdown;

fn fixture(rel: &str) -> String {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let path = if let Some(rest) = rel.strip_prefix("perf/") {
        root.join("tests/data/perf").join(rest)
    } else {
        root.join("crates/perfstat/tests/data").join(rel)
    };
    path.display().to_string()
}

fn read(rel: &str) -> String {
    std::fs::read_to_string(fixture(rel)).expect("the fixture is readable")
}

fn tmetric_stdin(args: &[&str], input: &str) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_tmetric"))
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the tmetric binary runs");
    child.stdin.take().unwrap().write_all(input.as_bytes()).unwrap();
    child.wait_with_output().unwrap()
}

/// Exit code 2, the whole transcript compared with the snapshot `expect`; returns standard
/// error.
fn refused(args: &[&str], expect: &str) -> String {
    let output = check(args, expect);
    assert_eq!(output.status.code(), Some(2), "tmetric {args:?}");
    stderr(&output)
}

/// The header object and the metric objects of `--json` output.
fn json(output: &Output) -> (Value, Vec<Value>) {
    let text = stdout(output);
    let mut lines = text.lines();
    let first: Value = serde_json::from_str(lines.next().expect("a header line")).unwrap();
    let header = first.get("assumptions").expect("the first line holds the assumptions").clone();
    let rows = lines
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON: {l}: {e}")))
        .collect();
    (header, rows)
}

fn rows_of<'a>(rows: &'a [Value], metric: &str) -> Vec<&'a Value> {
    rows.iter().filter(|r| r["metric"] == metric).collect()
}

fn one<'a>(rows: &'a [Value], metric: &str) -> &'a Value {
    match rows_of(rows, metric).as_slice() {
        [row] => row,
        other => panic!("expected one row for {metric}, got {other:?}"),
    }
}

fn assert_close(got: &Value, want: f64) {
    let got = got.as_f64().unwrap_or_else(|| panic!("not a number: {got}"));
    assert!((got - want).abs() <= 1e-9 * want.abs().max(1.0), "got {got}, want {want}");
}

/// A count as perf printed it in the text layout: the first field of the line whose event
/// column is exactly `event` (after an optional `CPUn` prefix), thousands separators removed.
fn count(log: &str, event: &str) -> f64 {
    counts(log, event).into_iter().next().unwrap_or_else(|| panic!("no row for {event}"))
}

/// Every count of `event`, in log order.
fn counts(log: &str, event: &str) -> Vec<f64> {
    log.lines()
        .filter(|l| !l.trim_start().starts_with('#'))
        .filter_map(|l| {
            let fields: Vec<&str> = l.split('#').next()?.split_whitespace().collect();
            let fields = match fields.first() {
                Some(f) if f.starts_with("CPU") => &fields[1..],
                _ => &fields[..],
            };
            // `1.04 msec task-clock` or `1,234 cycles`.
            let name = fields.iter().rev().find(|f| !f.starts_with('('))?;
            (*name == event).then(|| fields[0].replace(',', "").parse().ok())?
        })
        .collect()
}

/// The line number (1-based) of the `n`th row of `event`.
fn line_of(log: &str, event: &str, n: usize) -> usize {
    log.lines()
        .enumerate()
        .filter(|(_, l)| l.split_whitespace().nth(1) == Some(event))
        .nth(n)
        .unwrap_or_else(|| panic!("no row {n} of {event}"))
        .0
        + 1
}

/// What perf printed for `metric`: the value after `#` on the line naming it.
fn perf_printed(log: &str, metric: &str) -> String {
    let line = log
        .lines()
        .find(|l| l.split_once('#').is_some_and(|(_, m)| m.split_whitespace().any(|w| w == metric)))
        .unwrap_or_else(|| panic!("perf printed no {metric}"));
    line.split('#').nth(1).unwrap().split_whitespace().next().unwrap().to_string()
}

/// Seconds from the "seconds time elapsed" footer.
fn elapsed(log: &str) -> f64 {
    let line = log.lines().find(|l| l.contains("seconds time elapsed")).expect("a footer");
    line.split_whitespace().next().unwrap().parse().unwrap()
}

/// The value tmetric printed for `metric` in the text layout: the first field of its line.
fn text_value(out: &str, metric: &str) -> String {
    let line = out
        .lines()
        .filter(|l| !l.starts_with('#'))
        .find(|l| l.split_whitespace().any(|w| w == metric))
        .unwrap_or_else(|| panic!("no line for {metric} in:\n{out}"));
    line.split_whitespace().next().unwrap().to_string()
}

/// The built-in row of `metric` (perf's built-in metrics carry `"model": "perf built-in"`).
fn builtin<'a>(rows: &'a [Value], metric: &str) -> &'a Value {
    let row = one(rows, metric);
    assert_eq!(row["model"], "perf built-in", "{row}");
    row
}
