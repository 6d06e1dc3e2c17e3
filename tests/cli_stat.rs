//! `tmetric stat` end to end, counting for real with this machine's kernel: software events
//! work everywhere, virtual machines included. Expected values are recomputed here from the
//! printed counts (metrics), from sysfs (CPU counts) or from the parts (interval sums).

use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

fn tmetric(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_tmetric")).args(args).output().expect("run tmetric")
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// The JSON lines of a `--json` run (notes are other lines of standard error).
fn json_rows(out: &Output) -> Vec<Value> {
    stderr(out)
        .lines()
        .filter(|l| l.starts_with('{'))
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect()
}

/// `counter-value` of the (first) row of `event`, among rows without an interval.
fn counter(rows: &[Value], event: &str) -> f64 {
    let row = rows
        .iter()
        .find(|r| r["event"] == event && r.get("interval").is_none())
        .unwrap_or_else(|| panic!("no row for {event} in {rows:?}"));
    row["counter-value"].as_str().unwrap().parse().unwrap()
}

/// A JSON metric's value: perf's layout labels it `unit  name` in `metric-unit`.
fn metric(rows: &[Value], name: &str) -> f64 {
    let row = rows
        .iter()
        .find(|r| {
            r.get("interval").is_none()
                && r["metric-unit"].as_str().is_some_and(|u| u.ends_with(&format!("  {name}")))
        })
        .unwrap_or_else(|| panic!("no metric {name} in {rows:?}"));
    let value: f64 = row["metric-value"].as_str().unwrap().parse().unwrap();
    // A common `*_per_sec` metric prints in its row's built-in rate, with perf's K/M/G.
    let unit = row["metric-unit"].as_str().unwrap();
    let prefix = match unit.split("/sec").next() {
        Some("K") if unit.contains("/sec") => 1e3,
        Some("M") if unit.contains("/sec") => 1e6,
        Some("G") if unit.contains("/sec") => 1e9,
        _ => 1.0,
    };
    value * prefix
}

/// A shell command that keeps a CPU busy for about `ms` milliseconds of wall time.
fn busy(ms: u64) -> String {
    format!("end=$(($(date +%s%N) + {ms}000000)); while [ $(date +%s%N) -lt $end ]; do :; done")
}

fn has_pmu(name: &str) -> bool {
    Path::new("/sys/bus/event_source/devices").join(name).join("type").exists()
}

fn has_core_pmu() -> bool {
    ["cpu", "cpu_core"].into_iter().any(has_pmu)
        || std::fs::read_dir("/sys/bus/event_source/devices")
            .map(|d| d.flatten().any(|e| e.file_name().to_string_lossy().starts_with("armv")))
            .unwrap_or(false)
}

fn relative_error(a: f64, b: f64) -> f64 {
    (a - b).abs() / b.abs().max(1e-12)
}

#[test]
fn default_run_prints_perfs_default_events_and_built_in_metrics() {
    let out =
        tmetric(&["stat", "--", "sh", "-c", "i=0; while [ $i -lt 20000 ]; do i=$((i+1)); done"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stderr(&out);
    assert!(text.contains(" Performance counter stats for 'sh -c i=0;"), "{text}");
    // perf 6.12's default events (`add_default_attributes`), in its order.
    let expected = [
        "task-clock",
        "context-switches",
        "cpu-migrations",
        "page-faults",
        "cycles",
        "instructions",
        "branches",
        "branch-misses",
    ];
    let rows: Vec<&str> = text
        .lines()
        .skip_while(|l| !l.contains("Performance counter stats"))
        .skip(2)
        .take_while(|l| !l.is_empty())
        .collect();
    let names: Vec<&str> =
        rows.iter().map(|l| l[24..].split_whitespace().next().unwrap()).collect();
    assert_eq!(names, expected, "{text}");
    // perf's columns: count right-aligned in 18, unit in 4, name in 32, then ` # `, the
    // value in 8 and the label in the rest of perf 6.12's 38-wide metric column.
    assert_eq!(&rows[0][18..24], " msec ");
    assert_eq!(rows[0].find(" # "), Some(56));
    assert_eq!(rows[0].len(), 56 + 38);
    assert_eq!(&rows[0][68..81], "CPUs utilized");
    let cpus: f64 = rows[0][59..67].trim().parse().unwrap();
    assert!(cpus > 0.0 && cpus < 2.0, "{text}");
    // Rates per second of task-clock, in perf's K/M/G steps.
    assert!(rows[1][68..].trim_end().ends_with("/sec"), "{}", rows[1]);
    for footer in ["seconds time elapsed", "seconds user", "seconds sys"] {
        assert!(text.contains(footer), "{footer}: {text}");
    }
    if !has_core_pmu() {
        assert!(rows[4].trim_start().starts_with("<not supported>"), "{text}");
    }
}

#[test]
fn json_metrics_agree_with_the_printed_counts() {
    // perf 6.12's tables: tmetric's `Software` metrics by their 6.12 names and inputs.
    let out = tmetric(&[
        "--perf-version",
        "6.12",
        "stat",
        "--json",
        "-M",
        "Software",
        "--",
        "sh",
        "-c",
        "i=0; while [ $i -lt 20000 ]; do i=$((i+1)); done",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let rows = json_rows(&out);
    let task_clock_ms = counter(&rows, "task-clock");
    let duration_ns = counter(&rows, "duration_time");
    let faults = counter(&rows, "page-faults");
    assert!(task_clock_ms > 0.0 && faults > 0.0);
    // cpus_utilized is task-clock over wall-clock time; page_faults_per_sec per task-clock second.
    let utilized = metric(&rows, "cpus_utilized");
    assert!(relative_error(utilized, task_clock_ms * 1e6 / duration_ns) < 1e-5, "{utilized}");
    // Loose: other tests share the CPUs.
    assert!(utilized > 0.02 && utilized < 1.05, "{utilized}");
    let per_sec = metric(&rows, "page_faults_per_sec");
    assert!(relative_error(per_sec, faults / (task_clock_ms / 1e3)) < 1e-5, "{per_sec}");
    for row in &rows {
        for key in ["counter-value", "unit", "event", "event-runtime", "pcnt-running"] {
            assert!(row.get(key).is_some() || row.get("event").is_none(), "{key} missing in {row}");
        }
    }
}

/// perf's seven fields; with `--full-metrics` one more: the metric's unit and name apart.
#[test]
fn csv_rows_have_perfs_fields_with_unit_and_name_apart() {
    let out = tmetric(&["stat", "-x", ";", "-e", "task-clock,page-faults", "--", "true"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stderr(&out);
    for line in text.lines() {
        assert_eq!(line.split(';').count(), 7, "{line}");
    }
    let cpus: Vec<&str> = text.lines().next().unwrap().split(';').collect();
    assert_eq!(cpus[6], "CPUs utilized");
    let out = tmetric(&[
        "stat",
        "-x",
        ";",
        "--full-metrics",
        "-e",
        "task-clock,page-faults",
        "--",
        "true",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stderr(&out);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 2, "{text}");
    let full: Vec<&str> = lines[0].split(';').collect();
    assert_eq!((full[6], full[7]), ("CPUs utilized", "cpus_utilized"), "{text}");
    // Full precision: more than perf's three decimals.
    assert!(full[5].len() > 5, "{text}");
    for line in &lines {
        let fields: Vec<&str> = line.split(';').collect();
        assert_eq!(fields.len(), 8, "{line}");
        let count: f64 = fields[0].parse().expect("a count");
        assert!(count > 0.0, "{line}");
        assert_eq!(fields[4], "100.00", "software counters run all the time: {line}");
    }
    let task_clock: Vec<&str> = lines[0].split(';').collect();
    assert_eq!((task_clock[1], task_clock[2]), ("msec", "task-clock"));
    // The run time is the task-clock's enabled time, in ns; the count is msec with 2 decimals.
    let ms: f64 = task_clock[0].parse().unwrap();
    let run_ns: f64 = task_clock[3].parse().unwrap();
    assert!((ms - run_ns / 1e6).abs() < 0.05 + 0.2 * ms, "{ms} msec vs {run_ns} ns");
}

#[test]
fn the_exit_status_is_the_workloads() {
    assert_eq!(tmetric(&["stat", "-x,", "--", "sh", "-c", "exit 7"]).status.code(), Some(7));
    // perf's code is WEXITSTATUS of the workload: 0 when a signal killed it, which perf's
    // `psignal` line says instead.
    let killed = tmetric(&["stat", "-x,", "--", "sh", "-c", "kill -TERM $$"]);
    assert_eq!(killed.status.code(), Some(0));
    assert_eq!(stderr(&killed).lines().next(), Some("sh: Terminated"), "{}", stderr(&killed));
    // As perf: `Workload failed:` and 255 for a command that is not found.
    let missing = tmetric(&["stat", "--", "tmetric-no-such-command"]);
    assert_eq!(missing.status.code(), Some(255));
    let text = stderr(&missing);
    assert_eq!(text.lines().next(), Some("Workload failed: No such file or directory"), "{text}");
    assert!(text.contains("command not found"), "{text}");
}

#[test]
fn an_unsupported_hardware_event_is_reported_and_the_run_continues() {
    let out = tmetric(&["stat", "-e", "task-clock,cycles,page-faults", "--", "true"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stderr(&out);
    let row = |name: &str| {
        text.lines()
            .find(|l| l.contains(&format!(" {name}")))
            .unwrap_or_else(|| panic!("{name}: {text}"))
    };
    assert!(row("task-clock").trim_start().as_bytes()[0].is_ascii_digit(), "{text}");
    assert!(row("page-faults").trim_start().as_bytes()[0].is_ascii_digit(), "{text}");
    if has_core_pmu() {
        assert!(!row("cycles").contains("<not supported>"), "{text}");
    } else {
        assert!(row("cycles").trim_start().starts_with("<not supported>"), "{text}");
        let note = text
            .lines()
            .find(|l| l.trim_start().starts_with("cycles: <not supported>"))
            .expect(&text);
        assert!(
            note.contains("ENOENT") || note.contains("EOPNOTSUPP") || note.contains("ENODEV"),
            "{note}"
        );
        assert!(note.contains("no hardware PMU"), "{note}");
    }
}

#[test]
fn a_model_metric_without_its_hardware_events_says_why_and_prints_not_supported() {
    let out = tmetric(&[
        "stat",
        "--model",
        "x86/amdzen4",
        "-M",
        "branch_misprediction_ratio",
        "--",
        "true",
    ]);
    let text = stderr(&out);
    if has_core_pmu() {
        // Another machine's events may open here; only that it runs is certain.
        assert!(text.contains("branch_misprediction_ratio"), "{text}");
        return;
    }
    // Nothing it needs can be counted here: as perf, its events print `<not supported>`
    // and the run goes on (perf's own shell tests rely on it); tmetric says why first and
    // what to do instead.
    assert_eq!(out.status.code(), Some(0), "{text}");
    assert!(
        text.contains(
            "`branch_misprediction_ratio` of x86/amdzen4 cannot be counted here: no hardware PMU"
        ),
        "{text}"
    );
    assert!(text.contains("so its events print <not supported>"), "{text}");
    assert!(text.contains("no hardware PMU"), "{text}");
    assert!(text.contains("x86/amdzen4"), "{text}");
    let row = text.lines().find(|l| l.contains(" ex_ret_brn_misp")).expect(&text);
    assert!(row.trim_start().starts_with("<not supported>"), "{text}");
}

#[test]
fn interval_deltas_add_up_to_the_summary() {
    let script = busy(450);
    let out = tmetric(&[
        "stat",
        "--json",
        "-I",
        "100",
        "--summary",
        "-e",
        "task-clock,page-faults",
        "--",
        "sh",
        "-c",
        &script,
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let rows = json_rows(&out);
    let intervals: Vec<&Value> = rows.iter().filter(|r| r.get("interval").is_some()).collect();
    let stamps: Vec<f64> = intervals
        .iter()
        .filter(|r| r["event"] == "task-clock")
        .map(|r| r["interval"].as_f64().unwrap())
        .collect();
    assert!(stamps.len() >= 4, "450 ms at 100 ms: {stamps:?}");
    assert!(stamps.windows(2).all(|w| w[0] < w[1]), "{stamps:?}");
    for event in ["task-clock", "page-faults"] {
        let values: Vec<f64> = intervals
            .iter()
            .filter(|r| r["event"] == event)
            .filter_map(|r| r["counter-value"].as_str().unwrap().parse().ok())
            .collect();
        let sum: f64 = values.iter().sum();
        let total = counter(&rows, event);
        // JSON prints 6 decimals: task-clock in msec is exact to the ns.
        assert!(
            (sum - total).abs() <= 1e-6 * values.len() as f64 + 1e-9,
            "{event}: {sum} vs {total}"
        );
    }
    let std = tmetric(&["stat", "-I", "100", "-e", "task-clock", "--", "sh", "-c", &busy(250)]);
    let text = stderr(&std);
    assert!(text.starts_with("#           time             counts unit events\n"), "{text}");
    assert!(!text.contains("seconds time elapsed"), "no totals without --summary: {text}");
}

#[test]
fn system_wide_counts_every_online_cpu() {
    let online = std::fs::read_to_string("/sys/devices/system/cpu/online").unwrap();
    let cpus: usize = online
        .trim()
        .split(',')
        .map(|part| match part.split_once('-') {
            Some((lo, hi)) => hi.parse::<usize>().unwrap() - lo.parse::<usize>().unwrap() + 1,
            None => 1,
        })
        .sum();
    let out =
        tmetric(&["stat", "-a", "--json", "-e", "cpu-clock,duration_time", "--", "sleep", "0.2"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let rows = json_rows(&out);
    let cpu_clock_ms = counter(&rows, "cpu-clock");
    let wall_ms = counter(&rows, "duration_time") / 1e6;
    let ratio = cpu_clock_ms / wall_ms;
    assert!(
        (ratio - cpus as f64).abs() < 0.15 * cpus as f64,
        "{cpu_clock_ms} ms on {cpus} CPUs in {wall_ms} ms"
    );
}

#[test]
fn sigint_still_prints_what_was_counted() {
    let child = Command::new(env!("CARGO_BIN_EXE_tmetric"))
        .args(["stat", "-e", "task-clock,context-switches", "--", "sleep", "10"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    let start = Instant::now();
    std::thread::sleep(Duration::from_millis(300));
    let status =
        Command::new("kill").args(["-INT", &child.id().to_string()]).status().expect("kill");
    assert!(status.success());
    let out = child.wait_with_output().expect("wait");
    assert!(start.elapsed() < Duration::from_secs(5), "tmetric waited for sleep 10");
    let text = stderr(&out);
    assert!(text.contains("Performance counter stats for 'sleep 10'"), "{text}");
    let task_clock = text.lines().find(|l| l.contains(" task-clock")).expect(&text);
    assert!(task_clock.trim_start().as_bytes()[0].is_ascii_digit(), "{task_clock}");
    // The SIGINT went on to sleep, which died of it: perf's psignal line says so, and the
    // exit code is perf's, WEXITSTATUS (0).
    assert!(text.lines().any(|l| l == "sleep: Interrupt"), "{text}");
    assert_eq!(out.status.code(), Some(0));
}

#[test]
fn bad_requests_are_clear_errors() {
    // Without a command or a target, perf counts every CPU (`setup_system_wide`).
    let no_command = tmetric(&["stat", "-x,", "-I", "100", "--interval-count", "1"]);
    assert_eq!(no_command.status.code(), Some(0), "{}", stderr(&no_command));
    assert!(stderr(&no_command).contains(",cpu-clock,"), "{}", stderr(&no_command));
    let unknown = tmetric(&["stat", "-e", "no-such-event", "--", "true"]);
    assert_eq!(unknown.status.code(), Some(2));
    assert!(stderr(&unknown).contains("unknown event `no-such-event`"), "{}", stderr(&unknown));
    let metric = tmetric(&["stat", "--model", "x86/amdzen4", "-M", "no_such_metric", "--", "true"]);
    assert_eq!(metric.status.code(), Some(2));
    assert!(
        stderr(&metric).contains("cannot find metric or group `no_such_metric`"),
        "{}",
        stderr(&metric)
    );
    // perf 6.12 takes any period (its help warns of overhead at 100 ms or less).
    let interval = tmetric(&["stat", "-x,", "-I", "5", "-e", "task-clock", "--", "sleep", "0.1"]);
    assert_eq!(interval.status.code(), Some(0), "{}", stderr(&interval));
    let lines = stderr(&interval).lines().filter(|l| l.contains(",task-clock,")).count();
    assert!(lines >= 2, "{}", stderr(&interval));
}

/// A Ctrl-C that comes while tmetric is still planning or forking (a loaded machine makes
/// that window long) is kept for the run: the workload gets it and the counts print.
#[test]
fn an_early_sigint_is_not_lost() {
    let child = Command::new(env!("CARGO_BIN_EXE_tmetric"))
        .args(["-e", "task-clock", "--", "sleep", "10"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    std::thread::sleep(Duration::from_millis(15));
    let start = Instant::now();
    let status =
        Command::new("kill").args(["-INT", &child.id().to_string()]).status().expect("kill");
    assert!(status.success());
    let out = child.wait_with_output().expect("wait");
    assert!(start.elapsed() < Duration::from_secs(5), "tmetric waited for sleep 10");
    // Either tmetric had not yet installed its handler (then SIGINT ends it at once) or it
    // kept the signal and passed it on (then it exits as perf does, with the workload's
    // WEXITSTATUS, 0): never a 10 s wait.
    assert!(matches!(out.status.code(), Some(0) | None), "{:?}", out.status);
}

/// An interval in which a counter did not run says why, with its time, once, in the block
/// after the last interval (the intervals' lines stay perf's).
#[test]
fn intervals_say_why_a_line_was_not_counted() {
    let out = tmetric(&["stat", "-I", "100", "-e", "task-clock", "--", "sleep", "0.35"]);
    let text = stderr(&out);
    assert!(out.status.success(), "{text}");
    let uncounted: Vec<&str> =
        text.lines().filter(|l| l.contains("<not counted>") && l.contains("task-clock")).collect();
    assert!(!uncounted.is_empty(), "sleep runs in no interval but the first: {text}");
    let time = uncounted[0].split_whitespace().next().unwrap();
    let notes: Vec<&str> =
        text.lines().filter(|l| l.starts_with(time) && l.contains("<not counted>:")).collect();
    assert_eq!(notes.len(), 1, "said once: {text}");
    assert!(notes[0].starts_with(&format!("{time}: task-clock: <not counted>")), "{text}");
    let lines: Vec<&str> = text.lines().collect();
    let last = lines.iter().rposition(|l| l.contains(" msec task-clock")).unwrap();
    let note = text.lines().position(|l| l == notes[0]).unwrap();
    assert!(note > last, "after the last interval: {text}");
}
