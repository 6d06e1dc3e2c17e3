//! The log layouts read (text, `-x,`, `-j`, standard input, notes and truncated lines, software
//! and tracepoint logs) and the columns `-x` writes.

use serde_json::Value;

use crate::support::{ok, stderr, stdout};

use super::{assert_close, count, elapsed, fixture, json, line_of, one, read, tmetric_stdin};

/// The common metrics from real perf 6.1 captures in each layout.
/// cpus_utilized = task-clock / (duration_time * 1e9); context_switches_per_sec =
/// context-switches / (task-clock / 1e9); task-clock is printed in msec.
#[test]
fn common_metrics_from_each_layout() {
    // Text: duration_time is the elapsed footer.
    let log = read("real/std_global.txt");
    let task_ns = count(&log, "task-clock") * 1e6;
    let path = fixture("real/std_global.txt");
    let (header, rows) = json(&ok(&["eval", "--from-perf", &path, "--json"]));
    assert_eq!(header["layout"], "text");
    assert_close(&one(&rows, "cpus_utilized")["value"], task_ns / (elapsed(&log) * 1e9));
    let switches = one(&rows, "context_switches_per_sec");
    assert_close(&switches["value"], count(&log, "context-switches") / (task_ns / 1e9));
    // perf printed 958.777 /sec from the unrounded task-clock: equal at the printed precision
    // of its inputs (1.04 msec).
    assert_eq!(switches["perf"]["printed"], "958.777");
    assert_eq!(switches["perf"]["agrees"], true);

    // -x, : a duration_time row in ns.
    let csv = read("real/csv_tools.txt");
    let field = |event: &str| -> f64 {
        let line = csv.lines().find(|l| l.split(',').nth(2) == Some(event)).unwrap();
        line.split(',').next().unwrap().parse().unwrap()
    };
    let path = fixture("real/csv_tools.txt");
    let (header, rows) = json(&ok(&["eval", "--from-perf", &path, "--json"]));
    assert_eq!(header["layout"], "-x ,");
    let want = field("task-clock") * 1e6 / field("duration_time");
    assert_close(&one(&rows, "cpus_utilized")["value"], want);

    // -j: counter values are strings.
    let objects: Vec<Value> =
        read("real/json_duration.txt").lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    let value = |event: &str| -> f64 {
        let o = objects.iter().find(|o| o["event"] == event).unwrap();
        o["counter-value"].as_str().unwrap().parse().unwrap()
    };
    let path = fixture("real/json_duration.txt");
    let (header, rows) = json(&ok(&["eval", "--from-perf", &path, "--json"]));
    assert_eq!(header["layout"], "-j");
    let want = value("task-clock") * 1e6 / value("duration_time");
    assert_close(&one(&rows, "cpus_utilized")["value"], want);
    let want = value("page-faults") / (value("task-clock") * 1e6 / 1e9);
    assert_close(&one(&rows, "page_faults_per_sec")["value"], want);
}

/// perf 4.x's layout puts the clocks' unit after the event (`task-clock (msec)`): read as
/// `msec task-clock`, so the common metrics and perf's own figures come out and agree.
#[test]
fn perf_4_clocks_with_the_unit_after_the_event() {
    let log = read("perf/std_perf4_msec.txt");
    let path = fixture("perf/std_perf4_msec.txt");
    let (header, rows) = json(&ok(&["eval", "--from-perf", &path, "--json"]));
    assert_eq!(header["layout"], "text");
    let task_ms: f64 = log
        .lines()
        .find(|l| !l.starts_with('#') && l.contains("task-clock (msec)"))
        .and_then(|l| l.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .expect("the task-clock row");
    assert_close(&one(&rows, "cpus_utilized")["value"], task_ms * 1e6 / (elapsed(&log) * 1e9));
    let cpus = one(&rows, "cpus_utilized");
    assert_eq!(cpus["perf"]["printed"], "0.998");
    assert_eq!(cpus["perf"]["agrees"], true);
    let switches = one(&rows, "context_switches_per_sec");
    assert_close(&switches["value"], 12.0 / (task_ms / 1e3));
    assert_eq!(switches["perf"]["agrees"], true);
}

/// Two rows pasted onto one line are both read, each with its own run share, and the reader
/// says so naming the line.
#[test]
fn two_rows_on_one_line_are_both_read_and_said() {
    let path = fixture("perf/std_two_rows_one_line.txt");
    let output = ok(&["eval", "--from-perf", &path, "--json"]);
    let (_, rows) = json(&output);
    let ghz = one(&rows, "ghz");
    assert_eq!(ghz["perf"]["printed"], "3.480");
    assert_eq!(ghz["perf"]["agrees"], true);
    let ipc = one(&rows, "insn_per_cycle");
    assert_close(&ipc["value"], 11_236_720_130.0 / 7_448_373_470.0);
    assert_eq!(ipc["perf"]["agrees"], true);
    let log = read("perf/std_two_rows_one_line.txt");
    let line =
        log.lines().position(|l| !l.starts_with('#') && l.contains("instructions")).unwrap() + 1;
    let err = stderr(&output);
    assert!(
        err.contains(&format!(
            "line {line}: two counter rows on one line (pasted together?): read both"
        )),
        "{err}"
    );
}

/// -x SEP output: the documented columns.
#[test]
fn csv_output_columns() {
    let path = fixture("seed004/mtl_tma_dtlb_store.txt");
    let text = stdout(&ok(&["eval", "--from-perf", &path, "-x", ";"]));
    let mut lines = text.lines();
    assert!(lines.next().unwrap().starts_with("# tmetric: x86/meteorlake"));
    assert!(lines.next().unwrap().starts_with("# assumed, not measured: #smt_on=1"));
    let columns = lines.next().unwrap();
    assert_eq!(
        columns,
        "# columns: interval;aggr;value;unit;metric;pmu;threshold;group;perf_printed;perf_agrees;notes"
    );
    let rows: Vec<Vec<&str>> = lines.map(|l| l.split(';').collect()).collect();
    assert_eq!(rows.len(), 1, "{text}");
    let row = &rows[0];
    assert_eq!(row.len(), 11);
    assert_eq!(&row[2..6], ["0.6", "%", "tma_dtlb_store", "cpu_core"]);
    assert_eq!(&row[8..10], ["0.6", "1"]);
    let log = read("seed004/mtl_tma_dtlb_store.txt");
    assert_eq!(row[7], line_of(&log, "cpu_core/TOPDOWN.SLOTS/", 0).to_string());

    // The interval and aggregation columns.
    let path = fixture("real/csv_semicolon_interval_per_core.txt");
    let text = stdout(&ok(&["eval", "--from-perf", &path, "-x", ","]));
    let ids: Vec<(String, String)> = text
        .lines()
        .filter(|l| !l.starts_with('#'))
        .filter(|l| l.split(',').nth(4) == Some("cpus_utilized"))
        .map(|l| {
            let f: Vec<&str> = l.split(',').collect();
            (f[0].to_string(), f[1].to_string())
        })
        .collect();
    let log = read("real/csv_semicolon_interval_per_core.txt");
    let want: Vec<(String, String)> = log
        .lines()
        .filter(|l| l.split(';').nth(5) == Some("task-clock"))
        .map(|l| {
            let f: Vec<&str> = l.split(';').collect();
            (f[0].trim().to_string(), f[1].to_string())
        })
        .collect();
    assert!(!want.is_empty());
    assert_eq!(ids, want);
}

/// `-` reads standard input. common tsc_rate = msr/tsc/ / task-clock (ns), in GHz.
#[test]
fn reads_standard_input() {
    let log = read("real/std_msr.txt");
    let output = tmetric_stdin(&["eval", "--from-perf", "-", "--json"], &log);
    assert!(output.status.success(), "{}", stderr(&output));
    let (header, rows) = json(&output);
    assert_eq!(header["log"], "<stdin>");
    let want = count(&log, "msr/tsc/") / (count(&log, "task-clock") * 1e6);
    let row = one(&rows, "tsc_rate");
    assert_close(&row["value"], want);
    // perf printed `2.596 G/sec` next to msr/tsc/.
    assert_eq!(row["perf"]["printed"], "2.596");
    assert_eq!(row["perf"]["agrees"], true);
}

/// Issue 12, item 4: a log of software events and tracepoints (perf 6.1, this machine, `-a`)
/// falls back to the common metrics and names the rows nothing reads, with their lines.
/// common cpus_utilized = task-clock (ns) / duration_time (s) / 1e9;
/// context_switches_per_sec = context-switches / (task-clock / 1e9), as perf's `/sec` rates.
#[test]
fn software_and_tracepoint_logs_use_the_common_metrics() {
    let log = read("perf/std_software_tracepoints.txt");
    let path = fixture("perf/std_software_tracepoints.txt");
    let output = ok(&["eval", "--from-perf", &path, "--json"]);
    let (_, rows) = json(&output);
    let seconds = elapsed(&log);
    let cpus = one(&rows, "cpus_utilized");
    assert_close(&cpus["value"], count(&log, "task-clock") * 1e6 / seconds / 1e9);
    assert_eq!(cpus["perf"]["agrees"], true);
    let cs = one(&rows, "context_switches_per_sec");
    assert_close(&cs["value"], count(&log, "context-switches") / (count(&log, "task-clock") / 1e3));
    assert_eq!(cs["perf"]["agrees"], true);
    let err = stderr(&output);
    assert!(err.contains("only software events and tracepoints"), "{err}");
    let sched = line_of(&log, "sched:sched_switch", 0);
    let cgroup = line_of(&log, "cgroup-switches", 0);
    assert!(err.contains(&format!("`sched:sched_switch` (line {sched})")), "{err}");
    assert!(err.contains(&format!("`cgroup-switches` (line {cgroup})")), "{err}");
    assert!(err.contains("ignoring 3 row(s)"), "{err}");
}

/// Issue 12, item 6: a note appended after the metric name (and after the run share) and a
/// truncated last line; the metric is still read, checked and computed from its own group.
#[test]
fn notes_and_truncated_lines_are_read_and_reported() {
    let log = read("perf/std_multiplexed_groups.txt");
    let noted = log.replace(
        "tma_ports_utilized_2  (60.00%)",
        "tma_ports_utilized_2  (60.00%)   <- rerun on Monday",
    );
    assert_ne!(noted, log);
    let cut = format!("{}\n        25,000,0", noted.trim_end());
    let output = tmetric_stdin(&["eval", "--from-perf", "-", "--model", "icelake", "--json"], &cut);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let (_, rows) = json(&output);
    let two = one(&rows, "tma_ports_utilized_2");
    assert_close(&two["value"], 12.0);
    assert_eq!(two["perf"]["agrees"], true);
    assert_eq!(two["running_pct"], 60.0);
    let err = stderr(&output);
    assert!(err.contains("ignored `<- rerun on Monday` after the metric name"), "{err}");
    assert!(err.contains("truncated last line `25,000,0`"), "{err}");
}
