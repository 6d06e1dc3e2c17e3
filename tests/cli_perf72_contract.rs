//! perf 7.2's output contract under `--perf-version 7.2` (`tmetric_engine::contract`), as its
//! own stat shell tests state it where they differ from 6.12's: the default run counts the
//! `Default` metric groups and prints their metrics by name (`CPUs_utilized`, `cs/sec`), no
//! built-in metrics, metrics beside events that were not counted, JSON's `counters`, and a
//! run that opens no event ends with `No supported events found.`. Each check is run beside
//! the default (perf 6.12's contract), which must stay as it was. `.ci/perf-shell-tests` runs
//! perf's scripts themselves.

use crate::support::{stderr, tmetric};

/// `tmetric ARGS` under perf 7.2 (`v72`) or perf 6.12 (tables and contract both): exit code and
/// standard error (where `stat` prints its counts).
fn run(v72: bool, args: &[&str]) -> (i32, String) {
    let mut all: Vec<&str> = vec!["--perf-version", if v72 { "7.2" } else { "6.12" }];
    all.extend_from_slice(args);
    let out = tmetric(&all);
    (out.status.code().unwrap_or(-1), stderr(&out))
}

/// The counted lines of a default-layout output: (count field, event, metric text after `#`).
fn lines(text: &str) -> Vec<(String, String, String)> {
    let mut out = Vec::new();
    for line in text.lines() {
        let (body, metric) = match line.split_once('#') {
            Some((body, metric)) => (body, metric.trim().to_string()),
            None => (line, String::new()),
        };
        let words: Vec<&str> = body.split_whitespace().collect();
        let frame = line.contains("seconds") || line.contains("Performance counter stats");
        if line.starts_with(' ') && words.len() >= 2 && !frame {
            let count = if words[0] == "<not" { "<not supported>" } else { words[0] };
            let event = words.last().unwrap().to_string();
            out.push((count.to_string(), event, metric));
        }
    }
    out
}

/// A number printed with perf's digit grouping.
fn number(text: &str) -> f64 {
    text.replace(',', "").parse().unwrap_or_else(|_| panic!("not a number: {text}"))
}

/// The value before a metric's label (`   1185.9 cs/sec  cs_per_second`).
fn metric_value(metric: &str) -> f64 {
    metric.split_whitespace().next().unwrap().parse().unwrap()
}

/// perf 7.2 counts its `Default` metric groups when no event is named: the software events
/// first by name, each with its common metric (`CPUs_utilized`, `cs_per_second`, ...), whose
/// value agrees with the printed counts; no built-in metric; an event that cannot be opened
/// is left out unless it is `cycles`, which then prints `<not supported>` with its metric.
#[test]
fn the_default_run_is_perf_72s_default_metric_groups() {
    let (code, text) = run(true, &["stat", "true"]);
    assert_eq!(code, 0, "{text}");
    let rows = lines(&text);
    let order: Vec<&str> = rows.iter().map(|r| r.1.as_str()).collect();
    let at = |event: &str| {
        order.iter().position(|e| *e == event).unwrap_or_else(|| panic!("no {event}: {text}"))
    };
    let software = ["context-switches", "cpu-migrations", "page-faults", "task-clock"];
    let positions: Vec<usize> = software.iter().map(|e| at(e)).collect();
    assert!(positions.windows(2).all(|w| w[0] < w[1]), "software events by name: {text}");
    let labels = [
        ("context-switches", "cs/sec  cs_per_second"),
        ("cpu-migrations", "migrations/sec  migrations_per_second"),
        ("page-faults", "faults/sec  page_faults_per_second"),
        ("task-clock", "CPUs  CPUs_utilized"),
    ];
    for (event, label) in labels {
        let metric = &rows[at(event)].2;
        assert!(metric.ends_with(label), "{event}: `{metric}` in {text}");
    }
    assert!(!text.contains("CPUs utilized") && !text.contains("K/sec"), "{text}");
    for (count, event, metric) in &rows {
        if count == "<not supported>" {
            assert_eq!(event, "cpu-cycles", "only cycles prints unsupported: {text}");
            assert!(metric.ends_with("nan GHz  cycles_frequency"), "{text}");
        }
    }
    // The values are the formulas over the printed counts (rounded as printed).
    let task_clock_ms = number(&rows[at("task-clock")].0);
    let elapsed: f64 = text
        .lines()
        .find(|l| l.contains("seconds time elapsed"))
        .and_then(|l| l.split_whitespace().next())
        .unwrap()
        .parse()
        .unwrap();
    let cpus = metric_value(&rows[at("task-clock")].2);
    assert!((cpus - task_clock_ms / 1e3 / elapsed).abs() <= 0.06, "{cpus}: {text}");
    let faults = number(&rows[at("page-faults")].0);
    let per_second = metric_value(&rows[at("page-faults")].2);
    let expected = faults / (task_clock_ms / 1e3);
    assert!((per_second - expected).abs() <= expected * 0.03 + 0.1, "{per_second}: {text}");

    // perf 6.12's own default run is unchanged: its built-in metrics beside its events.
    let (code, text) = run(false, &["stat", "true"]);
    assert_eq!(code, 0, "{text}");
    assert!(text.contains("CPUs utilized") && !text.contains("CPUs_utilized"), "{text}");
}

/// On a simulated Sapphire Rapids every default event counts: perf 7.x's legacy hardware
/// events (JSON with `LegacyConfigCode`) are each their own generic event, so the metrics
/// are the printed counts' ratios, and the model's `Default` metrics print under their
/// group's name, as perf 7.2 prints them.
#[test]
fn default_metrics_on_a_simulated_machine_read_each_legacy_event() {
    let (code, text) = run(true, &["stat", "--pmu-sim", "sapphirerapids", "true"]);
    assert_eq!(code, 0, "{text}");
    let rows = lines(&text);
    let row = |event: &str| {
        rows.iter().find(|r| r.1 == event).unwrap_or_else(|| panic!("no {event}: {text}"))
    };
    let (instructions, cycles) = (number(&row("instructions").0), number(&row("cpu-cycles").0));
    let (branches, misses) = (number(&row("branches").0), number(&row("branch-misses").0));
    assert!(instructions != cycles && branches != misses, "distinct events: {text}");
    let ipc = metric_value(&row("instructions").2);
    assert!((ipc - instructions / cycles).abs() <= 0.051, "{ipc}: {text}");
    assert!(row("instructions").2.ends_with("instructions  insn_per_cycle"), "{text}");
    let rate = metric_value(&row("branch-misses").2);
    assert!((rate - 100.0 * misses / branches).abs() <= 0.051, "{rate}: {text}");
    assert!(row("branch-misses").2.ends_with("%  branch_miss_rate"), "{text}");
    assert!(text.contains("TopdownL1") && text.contains("tma_retiring"), "{text}");
}

/// perf 7.x has no built-in metrics: `-e` events print none; perf 6.12's print theirs.
#[test]
fn named_events_get_no_built_in_metrics_in_72() {
    let args = ["stat", "-e", "task-clock,page-faults", "true"];
    let (code, text) = run(true, &args);
    assert_eq!(code, 0, "{text}");
    let rows = lines(&text);
    assert_eq!(rows.len(), 2, "{text}");
    assert!(rows.iter().all(|r| r.2.is_empty()), "no metric: {text}");
    let (_, text) = run(false, &args);
    assert!(text.contains("CPUs utilized") && text.contains("/sec"), "{text}");
}

/// JSON names the CPUs an aggregation unit sums `counters` in perf 7.x, `aggregate-number`
/// in 6.12.
#[test]
fn json_units_count_their_cpus_as_each_release_names_it() {
    for (v72, key) in [(true, "counters"), (false, "aggregate-number")] {
        let (code, text) = run(v72, &["stat", "-j", "-a", "--per-node", "-e", "cpu-clock", "true"]);
        assert_eq!(code, 0, "{text}");
        let objects: Vec<serde_json::Value> = text
            .lines()
            .filter(|l| l.contains("\"node\""))
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert!(!objects.is_empty(), "{text}");
        for object in objects {
            assert!(object[key].as_f64().is_some_and(|n| n >= 1.0), "{key}: {object}");
            let other = if v72 { "aggregate-number" } else { "counters" };
            assert!(object.get(other).is_none(), "{object}");
        }
    }
}

/// perf 7.x ends a run that can open none of its events; perf 6.12 prints them
/// `<not supported>`. `-C` CPUs that are not online: perf 7.x counts on the others (none
/// left: no event opens), perf 6.12 refuses the list.
#[test]
fn a_run_that_opens_no_event_is_refused_in_72() {
    let guest = ["stat", "--pmu-sim", "emeraldrapids-guest", "-e", "cycles", "true"];
    let (code, text) = run(true, &guest);
    assert_eq!(code, 1, "{text}");
    assert!(text.contains("No supported events found.") && text.contains("cycles"), "{text}");
    assert!(!text.contains("Performance counter stats"), "{text}");
    let (code, text) = run(false, &guest);
    assert_eq!(code, 0, "{text}");
    assert!(text.contains("<not supported>      cycles"), "{text}");

    let offline = ["stat", "-C", "100000", "-e", "task-clock", "true"];
    let (code, text) = run(true, &offline);
    assert_eq!(code, 1, "{text}");
    assert!(text.contains("No supported events found.") && text.contains("CPU 100000"), "{text}");
    let (code, text) = run(false, &offline);
    assert_eq!(code, 2, "{text}");
    assert!(text.contains("CPU 100000 is not online"), "{text}");

    let some = ["stat", "-C", "0,100000", "-e", "task-clock", "true"];
    let (code, text) = run(true, &some);
    assert_eq!(code, 0, "{text}");
    assert!(text.contains("counting on the online ones") && text.contains("task-clock"), "{text}");
}

/// A metric prints beside the line of its first event even when that event could not be
/// counted, its value `nan` (CSV: empty), as perf 7.x prints it.
#[test]
fn uncounted_lines_carry_their_metrics_in_72() {
    let args = [
        "stat",
        "--pmu-sim",
        "emeraldrapids-guest",
        "-x,",
        "-M",
        "insn_per_cycle,CPUs_utilized",
        "true",
    ];
    let (code, text) = run(true, &args);
    assert_eq!(code, 0, "{text}");
    let line =
        text.lines().find(|l| l.contains(",instructions,")).unwrap_or_else(|| panic!("{text}"));
    assert_eq!(line, "<not supported>,,instructions,0,100.00,,instructions  insn_per_cycle");
    let json = [
        "stat",
        "--pmu-sim",
        "emeraldrapids-guest",
        "-j",
        "-M",
        "insn_per_cycle,CPUs_utilized",
        "true",
    ];
    let (_, text) = run(true, &json);
    let object: serde_json::Value = text
        .lines()
        .find(|l| l.contains("\"instructions\""))
        .map(|l| serde_json::from_str(l).unwrap())
        .unwrap_or_else(|| panic!("{text}"));
    assert_eq!(object["metric-value"], "nan", "{object}");
    assert_eq!(object["metric-unit"], "instructions  insn_per_cycle", "{object}");
}

/// `perf list --raw pmu` (perf's tests abbreviate `--raw-dump`, as perf's option parser
/// allows) lists what `--raw-dump` lists.
#[test]
fn list_takes_an_abbreviated_raw_dump() {
    let full = tmetric(&["list", "--raw-dump", "pmu"]);
    let short = tmetric(&["list", "--raw", "pmu"]);
    assert!(full.status.success() && short.status.success(), "{}", stderr(&short));
    assert_eq!(full.stdout, short.stdout);
}

/// `--metric-only`'s values: right-aligned under their label with nothing after them in
/// perf 7.x; in a column one wider than a long label, then a blank, in perf 6.12.
#[test]
fn metric_only_values_fit_their_columns_as_each_release_prints_them() {
    for (v72, metric) in [(true, "page_faults_per_second"), (false, "page_faults_per_sec")] {
        let (code, text) = run(v72, &["stat", "--metric-only", "-M", metric, "true"]);
        assert_eq!(code, 0, "{text}");
        let lines: Vec<&str> = text.lines().collect();
        let header = lines.iter().position(|l| l.ends_with(&format!("{metric} "))).unwrap();
        let (label, value) = (lines[header], lines[header + 1]);
        let width = label.trim().len();
        if v72 {
            assert_eq!(value.len(), width, "`{label}` / `{value}`");
            assert!(!value.ends_with(' ') && value.trim().parse::<f64>().is_ok(), "{value}");
        } else {
            assert_eq!(value.len(), width + 2, "`{label}` / `{value}`");
            assert!(value.ends_with(' '), "{value}");
        }
    }
}
