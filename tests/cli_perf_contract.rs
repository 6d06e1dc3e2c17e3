//! perf 6.12's output contract, as its own shell tests state it
//! (`tools/perf/tests/shell/stat+std_output.sh`, `stat+csv_output.sh`, `stat+json_output.sh`
//! with `lib/perf_json_output_lint.py`, `stat+csv_summary.sh`, `stat.sh`), checked on
//! `tmetric stat` run for real on this machine; and a comparison with the installed perf
//! (6.1 here) for the flags both versions share: the same lines, fields and labels.

use std::collections::BTreeSet;
use std::process::Command;

use crate::support::{stderr, tmetric};

/// The aggregation modes perf's linters check, with the flags they pass (`-A -a --no-merge`
/// is perf's "system wide no aggregation").
const MODES: &[(&str, &[&str])] = &[
    ("no-args", &[]),
    ("system-wide", &["-a"]),
    ("interval", &["-I", "1000"]),
    ("event", &["-e", "cpu-clock"]),
    ("system-wide-no-aggr", &["-A", "-a", "--no-merge"]),
    ("per-core", &["--per-core", "-a"]),
    ("per-cache", &["--per-cache", "-a"]),
    ("per-cluster", &["--per-cluster", "-a"]),
    ("per-die", &["--per-die", "-a"]),
    ("per-node", &["--per-node", "-a"]),
    ("per-socket", &["--per-socket", "-a"]),
];

/// Runs `tmetric stat ARGS [extra] -o FILE true` as perf's linters do, and returns the file.
fn stat_to_file(args: &[&str], extra: &[&str]) -> String {
    let dir = tempdir();
    let file = dir.path().join("out");
    let file_arg = file.to_str().unwrap().to_string();
    let mut all: Vec<&str> = vec!["stat"];
    all.extend_from_slice(extra);
    all.extend_from_slice(args);
    all.extend_from_slice(&["-o", &file_arg, "true"]);
    let out = tmetric(&all);
    assert!(out.status.success(), "{all:?}: {}", stderr(&out));
    std::fs::read_to_string(&file).unwrap()
}

/// A private directory for one test's files, under a name nobody can guess (the tests run
/// as root), removed when it is dropped.
fn tempdir() -> tempfile::TempDir {
    tempfile::Builder::new().prefix("tmetric-contract-").tempdir().unwrap()
}

/// `stat+std_output.sh`'s `commachecker`: every counted line names a known event, and its
/// metric (when it has one) is the one perf prints for that event.
#[test]
fn default_layout_passes_perfs_std_linter() {
    let events = [
        "cpu-clock",
        "task-clock",
        "context-switches",
        "cpu-migrations",
        "page-faults",
        "stalled-cycles-frontend",
        "stalled-cycles-backend",
        "cycles",
        "instructions",
        "branches",
        "branch-misses",
    ];
    let metrics = [
        "CPUs utilized",
        "CPUs utilized",
        "/sec",
        "/sec",
        "/sec",
        "frontend cycles idle",
        "backend cycles idle",
        "GHz",
        "insn per cycle",
        "/sec",
        "of all branches",
    ];
    let skip = [
        "stalled cycles per insn",
        "tma_",
        "retiring",
        "frontend_bound",
        "bad_speculation",
        "backend_bound",
    ];
    for (mode, args) in MODES {
        let prefix = match *mode {
            "interval" | "per-thread" | "system-wide-no-aggr" => 2,
            m if m.starts_with("per-") => 3,
            _ => 1,
        };
        let text = stat_to_file(args, &[]);
        let mut checked = 0;
        for line in text.lines() {
            if line.starts_with('#') || line.is_empty() {
                continue;
            }
            // The shell reads lines with `read`, which strips leading blanks.
            let line = line.trim_start();
            if line.starts_with("Performance counter stats") {
                continue;
            }
            if line.contains("time elapsed") {
                break;
            }
            // `echo $line | cut -d' ' -f$prefix-`: words split on blanks.
            let words: Vec<&str> = line.split_whitespace().collect();
            let main_body = words[(prefix - 1).min(words.len())..].join(" ");
            let x = main_body.rsplit_once('#').map_or(main_body.as_str(), |(a, _)| a);
            if x.is_empty() {
                continue;
            }
            let y = main_body.split_once('#').map_or(main_body.as_str(), |(_, b)| b);
            if skip.iter().any(|s| y.contains(s)) {
                continue;
            }
            let i = events
                .iter()
                .position(|e| x.contains(e))
                .unwrap_or_else(|| panic!("{mode}: unknown event name in {line}\n{text}"));
            if main_body.contains('#') {
                assert!(main_body.contains(metrics[i]), "{mode}: wrong metric in {line}");
            }
            checked += 1;
        }
        assert!(checked > 0, "{mode}: no line checked:\n{text}");
    }
}

/// `stat+csv_output.sh`: the number of separators per line, per mode.
#[test]
fn csv_fields_per_mode_are_perfs() {
    for (mode, args) in MODES {
        let expected = match *mode {
            "interval" | "system-wide-no-aggr" | "per-thread" => 7,
            m if m.starts_with("per-") => 8,
            _ => 6,
        };
        let text = stat_to_file(args, &["-x@"]);
        let mut lines = 0;
        for line in text.lines().filter(|l| !l.starts_with('#') && !l.is_empty()) {
            assert_eq!(line.matches('@').count(), expected, "{mode}: {line}");
            lines += 1;
        }
        assert!(lines > 0, "{mode}: {text}");
    }
}

/// `stat+json_output.sh` with `lib/perf_json_output_lint.py`: keys per line, the allowed
/// keys and their values' forms.
#[test]
fn json_lines_pass_perfs_linter() {
    for (mode, args) in MODES {
        let expected = match *mode {
            "no-args" | "system-wide" | "event" => 7,
            "interval" | "per-thread" | "system-wide-no-aggr" => 8,
            _ => 9,
        };
        let text = stat_to_file(args, &["-j"]);
        let mut lines = 0;
        for line in text.lines().filter(|l| !l.is_empty()) {
            let item: serde_json::Value =
                serde_json::from_str(line).unwrap_or_else(|e| panic!("{mode}: {e}: {line}"));
            let item = item.as_object().unwrap();
            let count = item.len();
            let isolated_metric = (1..=6).contains(&count) && item.contains_key("metric-value");
            let group = (1..=5).contains(&count) && item.contains_key("metricgroup");
            assert!(
                count == expected || isolated_metric || group,
                "{mode}: {count} keys in {line}"
            );
            for (key, value) in item {
                let text = value.as_str().map(str::to_string).unwrap_or_else(|| value.to_string());
                let float = text.parse::<f64>().is_ok();
                let ok = match key.as_str() {
                    "aggregate-number" | "event-runtime" | "interval" | "metric-value"
                    | "pcnt-running" => float,
                    "counter-value" => {
                        float || text == "<not counted>" || text == "<not supported>"
                    }
                    "cpu" => text.parse::<i64>().is_ok(),
                    "core" | "cgroup" | "cache" | "cluster" | "die" | "event" | "metric-unit"
                    | "metricgroup" | "node" | "socket" | "thread" | "unit" => true,
                    other => panic!("{mode}: unexpected key {other} in {line}"),
                };
                assert!(ok, "{mode}: check failed for {key}={value} in {line}");
            }
            lines += 1;
        }
        assert!(lines > 0, "{mode}: {text}");
    }
}

/// `stat+csv_summary.sh`: with -I and --summary, the totals' lines start with `summary`;
/// `--no-csv-summary` drops it. And `stat.sh`'s title.
#[test]
fn csv_summary_and_title_are_perfs() {
    let run = |extra: &[&str]| {
        let mut args =
            vec!["stat", "-e", "cpu-clock", "-x", " ", "-I", "100", "--interval-count", "1"];
        args.extend_from_slice(extra);
        let out = tmetric(&args);
        assert!(out.status.success(), "{}", stderr(&out));
        stderr(&out)
    };
    let text = run(&["--summary"]);
    let summary: Vec<&str> = text.lines().filter(|l| l.contains("summary")).collect();
    assert_eq!(summary.len(), 1, "{text}");
    assert_eq!(summary[0].split_whitespace().next(), Some("summary"), "{text}");
    let text = run(&["--summary", "--no-csv-summary"]);
    assert!(!text.contains("summary"), "{text}");
    let out = tmetric(&["stat", "true"]);
    assert!(stderr(&out).contains("Performance counter stats for 'true':"), "{}", stderr(&out));
}

/// The installed perf (6.1 on these machines) and tmetric print the same lines, fields and
/// labels for the flags and events both versions share; values differ (they are separate
/// runs), and so do what 6.12 changed: its JSON quotes metric values, its CSV interval time
/// is not padded.
#[test]
fn perf_and_tmetric_agree_on_fields_and_labels() {
    if Command::new("perf").arg("--version").output().is_err() {
        eprintln!("skipped: no perf installed");
        return;
    }
    let events = "task-clock,context-switches,page-faults";
    let cases: &[&[&str]] = &[
        &["-x,", "-e", events],
        &["-x,", "-a", "-A", "-e", events],
        &["-x,", "-a", "--per-core", "-e", events],
        &["-x,", "-a", "--per-socket", "-e", events],
        &["-j", "-e", events],
        &["-j", "-a", "-A", "-e", events],
        &["-e", events],
    ];
    for case in cases {
        let mut args: Vec<&str> = vec!["stat"];
        args.extend_from_slice(case);
        args.extend_from_slice(&["--", "sleep", "0.05"]);
        let perf = Command::new("perf").args(&args).output().unwrap();
        let perf = String::from_utf8_lossy(&perf.stderr).into_owned();
        if perf.contains("not supported") || perf.contains("Permission") || perf.is_empty() {
            eprintln!("skipped {case:?}: perf cannot count them here: {perf}");
            continue;
        }
        let ours = stderr(&tmetric(&args));
        assert_eq!(shape(&ours), shape(&perf), "{case:?}\nperf:\n{perf}\ntmetric:\n{ours}");
    }
}

/// What must agree between two outputs: per counted line, the CSV field count and every
/// field that is not a number, the JSON keys and string values, or the default layout's
/// words that are not numbers.
fn shape(text: &str) -> BTreeSet<String> {
    let number = |w: &str| {
        let w = w.trim_matches(|c| c == '(' || c == ')' || c == '%');
        !w.is_empty() && w.replace(',', "").parse::<f64>().is_ok()
    };
    // A rate's K/M/G step depends on the value, which differs between runs.
    let text = text.replace("K/sec", "/sec").replace("M/sec", "/sec").replace("G/sec", "/sec");
    text.lines()
        .filter(|l| !l.trim().is_empty() && !l.starts_with("tmetric:") && !l.contains("seconds"))
        .map(|l| {
            if l.starts_with('{') {
                let v: serde_json::Value = serde_json::from_str(l).expect(l);
                let mut keys: Vec<String> = v
                    .as_object()
                    .unwrap()
                    .iter()
                    .map(|(k, v)| match v.as_str() {
                        Some(s) if !number(s) => format!("{k}={s}"),
                        _ => k.clone(),
                    })
                    .collect();
                keys.sort();
                keys.join(" ")
            } else if l.contains(',') && !l.contains(" # ") {
                let fields: Vec<&str> = l.split(',').collect();
                let words: Vec<&str> =
                    fields.iter().map(|f| if number(f) { "N" } else { f }).collect();
                words.join(",")
            } else {
                l.split_whitespace().filter(|w| !number(w)).collect::<Vec<_>>().join(" ")
            }
        })
        .collect()
}

/// `stat.sh`'s record checks: `perf stat record -o - | perf stat report -i -` titles the
/// counts 'pipe'; `perf stat record` is tmetric's `record` (and `stat report` its `report`).
#[test]
fn stat_record_and_report_through_a_pipe_are_perfs() {
    use std::io::Write;
    use std::process::Stdio;
    let bin = env!("CARGO_BIN_EXE_tmetric");
    let record = Command::new(bin)
        .args(["stat", "record", "-e", "task-clock", "-o", "-", "true"])
        .output()
        .unwrap();
    assert!(record.status.success(), "{}", String::from_utf8_lossy(&record.stderr));
    assert!(record.stdout.starts_with(b"PERFILE2"), "a perf.data pipe on standard output");
    let mut report = Command::new(bin)
        .args(["stat", "report", "-i", "-"])
        .stdin(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    report.stdin.take().unwrap().write_all(&record.stdout).unwrap();
    let out = report.wait_with_output().unwrap();
    let text = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(text.contains("Performance counter stats for 'pipe':"), "{text}");
    assert!(text.lines().any(|l| l.contains(" task-clock ")), "{text}");
}

/// `stat+json_output.sh` pipes `2>&1` into perf's JSON linter for `--per-cache`, `--per-die`
/// and the other units: every line on standard error must be one of perf's JSON objects, so
/// tmetric's notes and warnings stay out of that stream. CSV on standard error holds perf's
/// lines only as well (`:P` and `<not supported>` add nothing). With `-v` or `--full-metrics`
/// they join it: `#` comment lines among CSV lines, JSON objects with a `"note"` or
/// `"warning"` key among JSON lines; with `-o FILE` they go to standard error and the file
/// holds perf's lines.
#[test]
fn json_and_csv_on_standard_error_hold_only_perfs_lines() {
    for args in
        [&["-j", "--per-cache", "-a", "true"][..], &["-j", "-e", "task-clock,cycles", "true"]]
    {
        let mut all = vec!["stat"];
        all.extend_from_slice(args);
        let out = tmetric(&all);
        for line in stderr(&out).lines().filter(|l| !l.is_empty()) {
            let v: serde_json::Value =
                serde_json::from_str(line).unwrap_or_else(|e| panic!("{args:?}: {e}: {line}"));
            assert!(v.is_object(), "{line}");
        }
    }
    for events in ["task-clock,cycles", "cycles:P,task-clock:S", "{task-clock,cycles}:S"] {
        let out = tmetric(&["stat", "-x,", "-e", events, "true"]);
        let text = stderr(&out);
        assert!(out.status.success(), "{text}");
        for line in text.lines() {
            assert_eq!(line.matches(',').count(), 6, "-e {events}: {line}");
        }
        assert_eq!(text.lines().count(), 2, "-e {events}: {text}");
    }
    // An interval run: perf's lines only, none between the intervals.
    let out = tmetric(&["stat", "-x,", "-I", "100", "-e", "task-clock,cycles", "sleep", "0.25"]);
    let text = stderr(&out);
    for line in text.lines() {
        assert_eq!(line.matches(',').count(), 7, "{line}");
    }
    // Asked for: the reason cycles is not supported, as a comment.
    let out = tmetric(&["stat", "-x,", "--full-metrics", "-e", "task-clock,cycles", "true"]);
    let text = stderr(&out);
    assert!(text.lines().any(|l| l.starts_with("# cycles: <not supported>")), "{text}");
    let out = tmetric(&["stat", "-x,", "-v", "-e", "cycles:P", "true"]);
    let text = stderr(&out);
    assert!(text.lines().any(|l| l.starts_with("# cycles:P: <not supported>")), "{text}");
    let out = tmetric(&["stat", "-j", "--full-metrics", "-e", "task-clock,cycles:P", "true"]);
    let text = stderr(&out);
    let objects: Vec<serde_json::Value> =
        text.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert!(
        objects.iter().any(|o| o["note"].as_str().is_some_and(|n| n.starts_with("cycles:P: "))),
        "{text}"
    );
    assert!(objects.iter().any(|o| o["warning"].is_string()), "the `P` modifier: {text}");
    // Counts in a file: the file holds perf's lines, the notes go to standard error.
    let dir = tempdir();
    let file = dir.path().join("out.csv");
    let out = tmetric(&["stat", "-x,", "-o", file.to_str().unwrap(), "-e", "cycles", "true"]);
    let lines = std::fs::read_to_string(&file).unwrap();
    assert_eq!(
        lines.lines().filter(|l| !l.is_empty() && !l.starts_with("# started on")).count(),
        1,
        "{lines}"
    );
    assert!(stderr(&out).contains("tmetric: cycles: <not supported>"), "{}", stderr(&out));
}
