//! `tmetric eval --from-perf` end to end through the binary.
//!
//! Inputs are `perf stat` logs: the importer's fixtures (crates/perfstat/tests/data: real perf
//! 6.1 captures, hand-written logs, the seed 004 Meteor Lake blocks) and the hand-written logs
//! of tests/data/perf. Expected values are worked out here from the raw numbers of each log
//! (read with plain string handling) and the formulas quoted next to them, or are what perf
//! itself printed; never outputs of the code under test.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use serde_json::Value;

use crate::support::{check, ok, stderr, stdout};

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

/// The three Meteor Lake blocks of seed 004: tmetric prints what perf printed, to perf's
/// precision, with the model inferred from the log or given.
#[test]
fn seed_004_blocks_print_as_perf() {
    let blocks = [
        ("seed004/mtl_tma_dtlb_store.txt", "tma_dtlb_store", "0.6"),
        ("seed004/mtl_tma_split_loads.txt", "tma_split_loads", "1.6"),
        ("seed004/mtl_tma_contested_accesses.txt", "tma_contested_accesses", "0.0"),
    ];
    for (file, metric, expected) in blocks {
        let log = read(file);
        assert_eq!(perf_printed(&log, metric), expected, "{file}");
        let path = fixture(file);
        let inferred = ok(&["eval", "--from-perf", &path, "--color", "never"]);
        let out = stdout(&inferred);
        let header = out.lines().next().unwrap();
        assert!(header.contains("x86/meteorlake") && header.contains("inferred"), "{header}");
        assert_eq!(text_value(&out, metric), expected, "{file}:\n{out}");
        assert!(!out.contains("perf printed"), "{out}");

        let given = ok(&["eval", "--from-perf", &path, "--model", "meteorlake", "--json"]);
        let (header, rows) = json(&given);
        assert_eq!(header["model"], "x86/meteorlake");
        let row = one(&rows, metric);
        assert_eq!(row["pmu"], "cpu_core");
        assert_eq!(row["perf"]["printed"], expected);
        assert_eq!(row["perf"]["agrees"], true);
        let value = row["value"].as_f64().unwrap();
        assert_eq!(format!("{value:.1}"), expected, "{file}");
        assert!(stderr(&given).contains("all agree"), "{}", stderr(&given));
    }
}

/// The values behind the seed 004 numbers, from the counts and mtl-metrics.json:
/// tma_split_loads = 100 * SPLIT_LOADS * min(SPLIT_LOADS:R, L1D_PEND_MISS.PENDING /
///                   MEM_LOAD_COMPLETED.L1_MISS_ANY) / CPU_CLK_UNHALTED.THREAD, with the R row (3).
/// tma_dtlb_store = 100 * (STLB_HIT_STORES * min(STLB_HIT_STORES:R, 7) / THREAD
///                  + DTLB_STORE_MISSES.WALK_ACTIVE / core_clks), core_clks being
///                  CPU_CLK_UNHALTED.DISTRIBUTED with SMT on (the default) and THREAD with --smt off.
#[test]
fn seed_004_values_come_from_the_rows() {
    let log = read("seed004/mtl_tma_split_loads.txt");
    let c = |event: &str| count(&log, &format!("cpu_core/{event}/"));
    let latency = count(&log, "cpu_core/MEM_INST_RETIRED.SPLIT_LOADS/R");
    assert_eq!(latency, 3.0);
    let want = 100.0
        * c("MEM_INST_RETIRED.SPLIT_LOADS")
        * latency.min(c("L1D_PEND_MISS.PENDING") / c("MEM_LOAD_COMPLETED.L1_MISS_ANY"))
        / c("CPU_CLK_UNHALTED.THREAD");
    let path = fixture("seed004/mtl_tma_split_loads.txt");
    let (_, rows) = json(&ok(&["eval", "--from-perf", &path, "--json"]));
    let row = one(&rows, "tma_split_loads");
    assert_close(&row["value"], want);
    assert_eq!(row["latency_zero"], serde_json::json!([]));
    assert_eq!(row["running_pct"], 50.0);

    let log = read("seed004/mtl_tma_dtlb_store.txt");
    let c = |event: &str| count(&log, &format!("cpu_core/{event}/"));
    let (hits, thread, walk) = (
        c("MEM_INST_RETIRED.STLB_HIT_STORES"),
        c("CPU_CLK_UNHALTED.THREAD"),
        c("DTLB_STORE_MISSES.WALK_ACTIVE"),
    );
    // The RFC-era retire-latency row: `0.00 MEM_INST_RETIRED.STLB_HIT_STORES:p 0 0`.
    let latency = 0.0_f64;
    let path = fixture("seed004/mtl_tma_dtlb_store.txt");
    for (flags, core_clks, literal) in [
        (&[][..], c("CPU_CLK_UNHALTED.DISTRIBUTED"), "default"),
        (&["--smt", "off"][..], thread, "flag"),
    ] {
        let mut args = vec!["eval", "--from-perf", &path, "--json"];
        args.extend(flags);
        let (header, rows) = json(&ok(&args));
        assert_eq!(header["literals"][0]["literal"], "smt_on");
        assert_eq!(header["literals"][0]["source"], literal);
        let want = 100.0 * (hits * latency.min(7.0) / thread + walk / core_clks);
        assert_close(&one(&rows, "tma_dtlb_store")["value"], want);
    }
}

/// A retire latency without a row: 0 where perf printed the metric (perf without
/// --record-tpebs), a named missing input otherwise.
#[test]
fn missing_retire_latency_rule() {
    let log = read("seed004/mtl_tma_split_loads.txt");
    let without_row: String =
        log.lines().filter(|l| !l.ends_with("/R")).map(|l| format!("{l}\n")).collect();
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
    let printed = dir.join("from_perf_no_latency.txt");
    std::fs::write(&printed, &without_row).unwrap();
    let printed = printed.display().to_string();
    let output = ok(&["eval", "--from-perf", &printed, "--model", "meteorlake", "--json"]);
    let (_, rows) = json(&output);
    let row = one(&rows, "tma_split_loads");
    let id = "cpu_core@MEM_INST_RETIRED.SPLIT_LOADS@R";
    assert_eq!(row["latency_zero"], serde_json::json!([id]));
    assert_eq!(row["value"], 0.0);
    // perf printed 1.6 with a latency of 3: the disagreement is shown, not hidden.
    assert_eq!(row["perf"]["agrees"], false);
    let text = stdout(&ok(&["eval", "--from-perf", &printed, "--model", "meteorlake"]));
    assert!(text.contains("(perf printed 1.6)"), "{text}");

    let unprinted: String = without_row.replace("# 1.6 % tma_split_loads", "");
    let path = dir.join("from_perf_no_latency_unprinted.txt");
    std::fs::write(&path, unprinted).unwrap();
    let path = path.display().to_string();
    let args = ["eval", "--from-perf", &path, "--model", "meteorlake", "-M", "tma_split_loads"];
    let text = stdout(&ok(&args));
    let line = text.lines().find(|l| l.contains("tma_split_loads")).unwrap();
    assert!(line.contains(&format!("missing: {id}")) && line.contains("--record-tpebs"), "{line}");
    // The latency reads as NaN, and perf's min() returns its second argument when the first is
    // NaN (util/expr.y divides as C does): 100 * SPLIT_LOADS * (L1D_PEND_MISS.PENDING / L1_MISS_ANY) / THREAD.
    let c = |event: &str| count(&log, &format!("cpu_core/{event}/"));
    let want = 100.0 * c("MEM_INST_RETIRED.SPLIT_LOADS") * c("L1D_PEND_MISS.PENDING")
        / c("MEM_LOAD_COMPLETED.L1_MISS_ANY")
        / c("CPU_CLK_UNHALTED.THREAD");
    assert_eq!(line.split_whitespace().next(), Some(format!("{want:.1}").as_str()), "{line}");
}

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

/// -I: one result per interval, each over that interval's length.
#[test]
fn intervals_give_one_result_each() {
    let objects: Vec<Value> =
        read("real/json_interval.txt").lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    let task: Vec<(f64, f64)> = objects
        .iter()
        .filter(|o| o["event"] == "task-clock")
        .map(|o| {
            let ms: f64 = o["counter-value"].as_str().unwrap().parse().unwrap();
            (o["interval"].as_f64().unwrap(), ms)
        })
        .collect();
    assert_eq!(task.len(), 2);
    let path = fixture("real/json_interval.txt");
    let (_, rows) = json(&ok(&["eval", "--from-perf", &path, "--json"]));
    let got = rows_of(&rows, "cpus_utilized");
    assert_eq!(got.len(), task.len());
    let mut previous = 0.0;
    for (row, (t, ms)) in got.iter().zip(&task) {
        assert_eq!(row["interval"].as_f64(), Some(*t));
        assert_close(&row["value"], ms * 1e6 / ((t - previous) * 1e9));
        previous = *t;
    }

    // Intervals where every input is <not counted> are skipped, as perf prints no metric there.
    let path = fixture("real/std_interval.txt");
    let output = ok(&["eval", "--from-perf", &path, "--json"]);
    let (_, rows) = json(&output);
    let times: Vec<f64> =
        rows_of(&rows, "cpus_utilized").iter().map(|r| r["interval"].as_f64().unwrap()).collect();
    assert_eq!(times, [0.050126688, 0.151769412]);
    assert!(stderr(&output).contains("cpus_utilized (2 blocks)"), "{}", stderr(&output));
}

/// -A: one result per CPU, from that CPU's rows.
#[test]
fn per_cpu_gives_one_result_each() {
    let log = read("real/std_per_cpu.txt");
    let task = counts(&log, "task-clock");
    let switches = counts(&log, "context-switches");
    let path = fixture("real/std_per_cpu.txt");
    let output = ok(&["eval", "--from-perf", &path, "--json"]);
    let (_, rows) = json(&output);
    let got = rows_of(&rows, "context_switches_per_sec");
    assert_eq!(got.len(), 2);
    for (cpu, row) in got.iter().enumerate() {
        assert_eq!(row["aggr"], format!("CPU{cpu}"));
        assert_close(&row["value"], switches[cpu] / (task[cpu] * 1e6 / 1e9));
    }
    let text = stdout(&ok(&["eval", "--from-perf", &path]));
    let cpu1: Vec<&str> = text.lines().filter(|l| l.starts_with("CPU1 ")).collect();
    assert_eq!(cpu1.len(), 3, "{text}");
}

/// Hybrid: the cpu_core and cpu_atom variants of a metric, each from its own PMU's rows.
/// alderlake tma_retiring: cpu_core topdown-retiring / (fe + bad + retiring + be);
/// cpu_atom TOPDOWN_RETIRING.ALL / (5 * CPU_CLK_UNHALTED.CORE).
#[test]
fn hybrid_pmus_are_separate() {
    let log = read("hand/std_hybrid.txt");
    let core = |e: &str| count(&log, &format!("cpu_core/{e}/"));
    let atom = |e: &str| count(&log, &format!("cpu_atom/{e}/"));
    let sum = core("topdown-fe-bound")
        + core("topdown-bad-spec")
        + core("topdown-retiring")
        + core("topdown-be-bound");
    let path = fixture("hand/std_hybrid.txt");
    let (header, rows) = json(&ok(&["eval", "--from-perf", &path, "--json"]));
    assert_eq!(header["model"], "x86/alderlake");
    let retiring = rows_of(&rows, "tma_retiring");
    let on = |pmu: &str| *retiring.iter().find(|r| r["pmu"] == pmu).unwrap();
    assert_eq!(retiring.len(), 2);
    assert_close(&on("cpu_core")["value"], 100.0 * core("topdown-retiring") / sum);
    let want = 100.0 * atom("TOPDOWN_RETIRING.ALL") / (5.0 * atom("CPU_CLK_UNHALTED.CORE"));
    assert_close(&on("cpu_atom")["value"], want);
    assert_eq!(on("cpu_atom")["perf"]["agrees"], true);

    // Per CPU: a P-core block has only the cpu_core metric, an E-core block the cpu_atom one.
    let path = fixture("perf/std_hybrid_per_cpu.txt");
    let (_, rows) = json(&ok(&["eval", "--from-perf", &path, "--json"]));
    let got: Vec<(&str, &str)> =
        rows.iter().map(|r| (r["aggr"].as_str().unwrap(), r["pmu"].as_str().unwrap())).collect();
    assert_eq!(got, [("CPU0", "cpu_core"), ("CPU16", "cpu_atom")]);
    let log = read("perf/std_hybrid_per_cpu.txt");
    let atom = |e: &str| count(&log, &format!("cpu_atom/{e}/"));
    let want = 100.0 * atom("TOPDOWN_RETIRING.ALL") / (5.0 * atom("CPU_CLK_UNHALTED.CORE"));
    assert_close(&rows[1]["value"], want);
}

/// The same events counted in two groups: each metric is evaluated from the group perf printed
/// it in, and the output says which.
/// icelake tma_retiring = topdown-retiring / (fe + bad + retiring + be);
/// tma_info_thread_uoppi = tma_retiring * TOPDOWN.SLOTS / INST_RETIRED.ANY.
#[test]
fn duplicate_events_use_their_own_group() {
    let log = read("perf/std_duplicate_groups.txt");
    let nth = |event: &str, n: usize| counts(&log, event)[n];
    let retiring = |n: usize| {
        nth("topdown-retiring", n)
            / (nth("topdown-fe-bound", n)
                + nth("topdown-bad-spec", n)
                + nth("topdown-retiring", n)
                + nth("topdown-be-bound", n))
    };
    let path = fixture("perf/std_duplicate_groups.txt");
    let args = ["eval", "--from-perf", &path, "--model", "icelake", "--json"];
    let (_, rows) = json(&ok(&args));
    let first = one(&rows, "tma_retiring");
    assert_close(&first["value"], 100.0 * retiring(0));
    let group = &first["group"][0];
    assert_eq!(group["line"].as_u64(), Some(line_of(&log, "TOPDOWN.SLOTS", 0) as u64));
    assert_eq!(group["metric_group"], true);
    assert_eq!(first["running_pct"], 50.0);

    let second = one(&rows, "tma_info_thread_uoppi");
    let want = retiring(1) * nth("TOPDOWN.SLOTS", 1) / count(&log, "INST_RETIRED.ANY");
    assert_close(&second["value"], want);
    assert_eq!(second["group"].as_array().unwrap().len(), 1);
    let second_line = line_of(&log, "TOPDOWN.SLOTS", 1);
    assert_eq!(second["group"][0]["line"].as_u64(), Some(second_line as u64));
    assert_eq!(second["running_pct"], 49.0);
    // Had the first group been used, the value would differ.
    assert!((want - retiring(0) * nth("TOPDOWN.SLOTS", 0) / 1e9).abs() > 0.05);

    let text = stdout(&ok(&args[..5]));
    let line = text.lines().find(|l| l.contains("tma_info_thread_uoppi")).unwrap();
    assert!(
        line.contains(&format!("(group of line {second_line}, where perf printed it)")),
        "{line}"
    );
    assert!(line.contains("(multiplexed: ran 49.00%)"), "{line}");
}

/// `<not counted>` reads as 0 and `<not supported>` as NaN, as in perf, and both are named.
/// icelake tma_backend_bound = be / (fe + bad + retiring + be) + 5 * INT_MISC.CLEARS_COUNT / SLOTS.
#[test]
fn not_counted_and_not_supported_are_explained() {
    let log = read("perf/std_not_counted.txt");
    let c = |e: &str| count(&log, e);
    let path = fixture("perf/std_not_counted.txt");
    let args = ["eval", "--from-perf", &path, "--model", "icelake", "-M"];
    let mut json_args = args.to_vec();
    json_args.extend(["tma_backend_bound,tma_info_thread_ipc", "--json"]);
    let (_, rows) = json(&ok(&json_args));
    let backend = one(&rows, "tma_backend_bound");
    let sum = c("topdown-fe-bound")
        + c("topdown-bad-spec")
        + c("topdown-retiring")
        + c("topdown-be-bound");
    assert_close(&backend["value"], 100.0 * c("topdown-be-bound") / sum);
    assert_eq!(backend["not_counted"], serde_json::json!(["INT_MISC.CLEARS_COUNT"]));
    assert_eq!(backend["threshold"], true);
    let ipc = one(&rows, "tma_info_thread_ipc");
    assert_eq!(ipc["value"], Value::Null);
    assert_eq!(ipc["not_supported"], serde_json::json!(["INST_RETIRED.ANY"]));

    let mut text_args = args.to_vec();
    text_args.extend(["tma_info_thread_ipc,tma_backend_bound", "--color", "never"]);
    let text = stdout(&ok(&text_args));
    assert!(text.contains("not supported (NaN, as perf): INST_RETIRED.ANY"), "{text}");
    assert!(text.contains("not counted (read as 0, as perf): INT_MISC.CLEARS_COUNT"), "{text}");
    assert!(text.contains("<=="), "{text}");
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

/// --cpuid picks the model perf would.
#[test]
fn cpuid_picks_the_model() {
    let path = fixture("perf/std_duplicate_groups.txt");
    let output = ok(&["eval", "--from-perf", &path, "--cpuid", "GenuineIntel-6-7E-5", "--json"]);
    let (header, rows) = json(&output);
    assert_eq!(header["model"], "x86/icelake");
    assert_eq!(header["model_source"], "for cpuid GenuineIntel-6-7E-5");
    assert_eq!(rows_of(&rows, "tma_retiring").len(), 1);
}

#[test]
fn malformed_line_is_an_error_with_its_position() {
    let log = read("real/std_global.txt");
    let line = line_of(&log, "context-switches", 0);
    let broken = log.replace(
        "                 1      context-switches",
        "              1,0x      context-switches",
    );
    assert_ne!(broken, log);
    let path = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("from_perf_malformed.txt");
    std::fs::write(&path, broken).unwrap();
    let path = path.display().to_string();
    let err = refused(&["eval", "--from-perf", &path], "cli_from_perf__malformed_line");
    // The line the snapshot holds is the one the fixture has the row on.
    assert!(err.contains(&format!("{path}:{line}:")), "{err}");
}

#[test]
fn not_perf_output_says_what_was_expected() {
    let path = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("from_perf_not_perf.txt");
    std::fs::write(&path, "Dear list,\nplease find my numbers below.\n").unwrap();
    let path = path.display().to_string();
    refused(&["eval", "--from-perf", &path], "cli_from_perf__not_perf_output");
    refused(&["eval", "--from-perf", "/nonexistent/perf.txt"], "cli_from_perf__no_such_log");
}

#[test]
fn no_model_inferable_lists_candidates() {
    // Ice Lake-like topdown rows: several models explain them equally well, and compute the
    // same values for what perf printed (issue 27, item 4): the first is used, and that is said.
    let path = fixture("perf/std_duplicate_groups.txt");
    let out = stdout(&ok(&["eval", "--from-perf", &path]));
    let header = out.lines().next().unwrap();
    assert!(header.contains("`x86/icelake`") && header.contains("`x86/tigerlake`"), "{header}");
    assert!(header.contains("and agree: each computes the same value"), "{header}");
    // Models that differ on what perf printed are refused with the candidates and their
    // values: cli_logs' a_tie_whose_models_differ_is_refused_with_the_values.
    // Events no model knows.
    let path = fixture("perf/std_unknown_events.txt");
    refused(&["eval", "--from-perf", &path], "cli_from_perf__unknown_events");
}

#[test]
fn unknown_metric_is_an_error_with_suggestions() {
    let path = fixture("seed004/mtl_tma_dtlb_store.txt");
    refused(
        &["eval", "--from-perf", &path, "-M", "tma_dtbl_store"],
        "cli_from_perf__unknown_metric",
    );
}

/// -M groups and metrics none of whose inputs the log has are still listed, with what is missing.
#[test]
fn selected_metrics_without_inputs_are_listed() {
    let path = fixture("seed004/mtl_tma_dtlb_store.txt");
    let args = ["eval", "--from-perf", &path, "-M", "tma_dtlb_store,tma_info_system_gflops"];
    let mut json_args = args.to_vec();
    json_args.push("--json");
    let (_, rows) = json(&ok(&json_args));
    // meteorlake has it on both core PMUs.
    let both = rows_of(&rows, "tma_info_system_gflops");
    assert_eq!(both.len(), 2);
    let gflops = *both.iter().find(|r| r["pmu"] == "cpu_core").unwrap();
    assert_eq!(gflops["value"], Value::Null);
    assert_eq!(gflops["interval"], Value::Null);
    let missing = gflops["missing"].as_array().unwrap();
    assert!(missing.iter().any(|m| m == "cpu_core@FP_ARITH_INST_RETIRED.SCALAR@"), "{missing:?}");
    assert_eq!(one(&rows, "tma_dtlb_store")["perf"]["agrees"], true);
}

/// Issue 12, item 1: perf printed tma_ports_utilized_2 in the second multiplexed group (60%),
/// whose own CPU_CLK_UNHALTED.THREAD is 25,000,000; icelake tma_ports_utilized_2 =
/// EXE_ACTIVITY.2_PORTS_UTIL / tma_info_thread_clks = 3,000,000 / 25,000,000 = 12.0%.
#[test]
fn multiplexed_metric_uses_the_group_it_was_printed_in() {
    let log = read("perf/std_multiplexed_groups.txt");
    let path = fixture("perf/std_multiplexed_groups.txt");
    let args = ["eval", "--from-perf", &path, "--model", "icelake", "--json"];
    let (_, rows) = json(&ok(&args));
    let two = one(&rows, "tma_ports_utilized_2");
    let clks = counts(&log, "CPU_CLK_UNHALTED.THREAD");
    assert_eq!(clks, [20e6, 25e6]);
    assert_close(&two["value"], 100.0 * count(&log, "EXE_ACTIVITY.2_PORTS_UTIL") / clks[1]);
    assert_close(&two["value"], 12.0);
    assert_eq!(two["perf"]["agrees"], true);
    assert_eq!(two["running_pct"], 60.0);
    let line = line_of(&log, "EXE_ACTIVITY.2_PORTS_UTIL", 0);
    assert_eq!(two["group"][0]["line"].as_u64(), Some(line as u64));
    assert_eq!(two["group"][0]["metric_group"], true);
    let first = one(&rows, "tma_ports_utilized_1");
    assert_close(&first["value"], 100.0 * count(&log, "EXE_ACTIVITY.1_PORTS_UTIL") / clks[0]);
    assert_eq!(first["perf"]["agrees"], true);

    let output = ok(&args[..5]);
    let text = stdout(&output);
    let line_text = text.lines().find(|l| l.contains("tma_ports_utilized_2")).unwrap();
    assert!(line_text.trim_start().starts_with("12.0 %"), "{line_text}");
    assert!(line_text.contains(&format!("(group of line {line}, where perf printed it)")));
    assert!(!line_text.contains("perf printed 12.0"), "{line_text}");
    assert!(stderr(&output).contains("0 disagree") || !stderr(&output).contains("disagree"));
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

/// Issue 12, item 3 (part): a system-wide log whose clock is `cpu-clock` (perf 6.1, this machine,
/// `-a`). perf's `CPUs utilized` and `/sec` rates use that clock; so do the common metrics:
/// cpus_utilized = clock (ns) / (duration_time * 1e9), rates = count / (clock / 1e9).
#[test]
fn system_wide_cpu_clock_logs_give_perfs_builtin_metrics() {
    let log = read("perf/std_system_wide_cpu_clock.txt");
    let path = fixture("perf/std_system_wide_cpu_clock.txt");
    let output = ok(&["eval", "--from-perf", &path, "--json"]);
    let (_, rows) = json(&output);
    let clock_s = count(&log, "cpu-clock") / 1e3;
    let cpus = one(&rows, "cpus_utilized");
    assert_close(&cpus["value"], clock_s / elapsed(&log));
    assert_eq!(cpus["perf"]["agrees"], true, "{cpus}");
    for (metric, event) in [
        ("context_switches_per_sec", "context-switches"),
        ("cpu_migrations_per_sec", "cpu-migrations"),
        ("page_faults_per_sec", "page-faults"),
    ] {
        let row = one(&rows, metric);
        assert_close(&row["value"], count(&log, event) / clock_s);
        assert_eq!(row["perf"]["agrees"], true, "{row}");
    }
    assert!(!stderr(&output).contains("disagree"), "{}", stderr(&output));
}

/// The built-in row of `metric` (perf's built-in metrics carry `"model": "perf built-in"`).
fn builtin<'a>(rows: &'a [Value], metric: &str) -> &'a Value {
    let row = one(rows, metric);
    assert_eq!(row["model"], "perf built-in", "{row}");
    row
}

/// perf's built-ins on a hand-written system-wide perf 6.1 log whose time base is cpu-clock:
/// insn per cycle = instructions / cycles; GHz = cycles / cpu-clock (ns); stalled cycles per
/// insn = max(stalled-cycles-frontend, stalled-cycles-backend) / instructions; frontend and
/// backend cycles idle = stalled / cycles * 100; of all branches = branch-misses / branches * 100.
#[test]
fn builtins_from_a_hardware_log_agree_with_perf() {
    let log = read("perf/hw_builtins_perf61.txt");
    let (cycles, insns) = (count(&log, "cycles"), count(&log, "instructions"));
    let (fe, be) = (count(&log, "stalled-cycles-frontend"), count(&log, "stalled-cycles-backend"));
    let clock_ns = count(&log, "cpu-clock") * 1e6;
    let path = fixture("perf/hw_builtins_perf61.txt");
    let output = ok(&["eval", "--from-perf", &path, "--json"]);
    let (_, rows) = json(&output);
    let want = [
        ("insn_per_cycle", insns / cycles, "insn per cycle"),
        ("ghz", cycles / clock_ns, "GHz"),
        ("stalled_cycles_per_insn", fe.max(be) / insns, "stalled cycles per insn"),
        ("frontend_cycles_idle", fe / cycles * 100.0, "frontend cycles idle"),
        ("backend_cycles_idle", be / cycles * 100.0, "backend cycles idle"),
        (
            "branch_miss_rate",
            count(&log, "branch-misses") / count(&log, "branches") * 100.0,
            "of all branches",
        ),
    ];
    for (metric, value, label) in want {
        let row = builtin(&rows, metric);
        assert_close(&row["value"], value);
        assert_eq!(row["perf"]["label"], label, "{row}");
        assert_eq!(row["perf"]["agrees"], true, "{row}");
    }
    assert_eq!(builtin(&rows, "ghz")["perf"]["printed"], "2.400");
    // CPUs utilized on the cpu-clock row (the common metric) agrees too.
    assert_eq!(one(&rows, "cpus_utilized")["perf"]["agrees"], true);
    assert!(stderr(&output).contains("all agree"), "{}", stderr(&output));

    // A value perf did not print is flagged, with perf's own text.
    let edited = log.replace("1.50  insn per cycle", "1.60  insn per cycle");
    let output = tmetric_stdin(&["eval", "--from-perf", "-"], &edited);
    assert!(output.status.success(), "{}", stderr(&output));
    let text = stdout(&output);
    let line = text.lines().find(|l| l.contains(" insn_per_cycle")).expect("an IPC line");
    assert!(line.contains("(perf printed 1.60 insn per cycle)"), "{line}");
    assert_eq!(text_value(&text, "insn_per_cycle"), "1.50");
    assert!(stderr(&output).contains("1 disagree"), "{}", stderr(&output));

    // Without cycles IPC has no value and says why (perf prints it blank), and there is no GHz
    // (perf prints it on the cycles row); without stalled counts no stalled-per-insn line.
    let stripped: String =
        log.lines().filter(|l| !l.contains("cycles")).map(|l| format!("{l}\n")).collect();
    let output = tmetric_stdin(&["eval", "--from-perf", "-", "--json"], &stripped);
    assert!(output.status.success(), "{}", stderr(&output));
    let (_, rows) = json(&output);
    let ipc = builtin(&rows, "insn_per_cycle");
    assert!(ipc["value"].is_null(), "{ipc}");
    assert_eq!(ipc["missing"], serde_json::json!(["cycles"]));
    assert!(rows_of(&rows, "ghz").is_empty());
    assert!(rows_of(&rows, "stalled_cycles_per_insn").is_empty());
    assert_eq!(builtin(&rows, "branch_miss_rate")["perf"]["agrees"], true);

    // Only the built-ins named with -M, and no catalogue metric.
    let (_, rows) = json(&ok(&["eval", "--from-perf", &path, "--json", "-M", "ghz"]));
    assert_eq!(rows.len(), 1, "{rows:?}");
    assert_close(&builtin(&rows, "ghz")["value"], cycles / clock_ns);
}

/// perf 6.1 prints level 1 from PERF_METRICS events as each event over the sum of the four
/// level-1 events (`td_metric_ratio`); level 2 is the level-2 event over the same sum, and its
/// sibling the parent minus it (light ops = retiring - heavy ops, machine clears = bad spec -
/// mispredicts, fetch bandwidth = frontend - fetch latency, core bound = backend - memory).
#[test]
fn topdown_levels_1_and_2_from_slots_and_topdown_rows() {
    for (file, printed) in
        [("perf/hw_topdown_perf61.txt", true), ("perf/hw_topdown_perf612.txt", false)]
    {
        let log = read(file);
        let c = |e: &str| count(&log, e);
        let sum = c("topdown-retiring")
            + c("topdown-bad-spec")
            + c("topdown-fe-bound")
            + c("topdown-be-bound");
        let pct = |x: f64| x / sum * 100.0;
        let l1 = [
            ("td_retiring", pct(c("topdown-retiring")), "Retiring"),
            ("td_bad_speculation", pct(c("topdown-bad-spec")), "Bad Speculation"),
            ("td_frontend_bound", pct(c("topdown-fe-bound")), "Frontend Bound"),
            ("td_backend_bound", pct(c("topdown-be-bound")), "Backend Bound"),
        ];
        let l2 = [
            ("td_heavy_operations", pct(c("topdown-heavy-ops"))),
            ("td_light_operations", pct(c("topdown-retiring") - c("topdown-heavy-ops"))),
            ("td_branch_mispredict", pct(c("topdown-br-mispredict"))),
            ("td_machine_clears", pct(c("topdown-bad-spec") - c("topdown-br-mispredict"))),
            ("td_fetch_latency", pct(c("topdown-fetch-lat"))),
            ("td_fetch_bandwidth", pct(c("topdown-fe-bound") - c("topdown-fetch-lat"))),
            ("td_memory_bound", pct(c("topdown-mem-bound"))),
            ("td_core_bound", pct(c("topdown-be-bound") - c("topdown-mem-bound"))),
        ];
        let path = fixture(file);
        let output = ok(&["eval", "--from-perf", &path, "--json"]);
        let (_, rows) = json(&output);
        for (metric, value, label) in l1 {
            let row = builtin(&rows, metric);
            assert_close(&row["value"], value);
            if printed {
                assert_eq!(row["perf"]["label"], label, "{row}");
                assert_eq!(row["perf"]["agrees"], true, "{row}");
            } else {
                assert!(row["perf"].is_null(), "{row}");
            }
        }
        for (metric, value) in l2 {
            let row = builtin(&rows, metric);
            assert_close(&row["value"], value);
            assert!(row["perf"].is_null(), "{row}");
        }
    }
    // A level-1 value perf printed differently is a disagreement.
    let log = read("perf/hw_topdown_perf61.txt").replace("40.0% Retiring", "41.0% Retiring");
    let output = tmetric_stdin(&["eval", "--from-perf", "-", "--json"], &log);
    let (_, rows) = json(&output);
    assert_eq!(builtin(&rows, "td_retiring")["perf"]["agrees"], false);
}

/// Seed 000's level 1 from the older events: retiring = slots-retired / total-slots; bad
/// speculation = (slots-issued - slots-retired + recovery-bubbles) / total-slots; frontend =
/// fetch-bubbles / total-slots; backend = 1 - the three. Without recovery bubbles perf labels
/// the backend line "backend bound/bad spec".
#[test]
fn seed_000_topdown_from_the_older_events() {
    let log = read("perf/hw_topdown_legacy.txt");
    let c = |e: &str| count(&log, e);
    let total = c("topdown-total-slots");
    let retiring = c("topdown-slots-retired") / total;
    let bad = (c("topdown-slots-issued") - c("topdown-slots-retired")
        + c("topdown-recovery-bubbles"))
        / total;
    let frontend = c("topdown-fetch-bubbles") / total;
    let path = fixture("perf/hw_topdown_legacy.txt");
    let (_, rows) = json(&ok(&["eval", "--from-perf", &path, "--json"]));
    for (metric, value, label) in [
        ("td_legacy_retiring", retiring, "retiring"),
        ("td_legacy_bad_speculation", bad, "bad speculation"),
        ("td_legacy_frontend_bound", frontend, "frontend bound"),
        ("td_legacy_backend_bound", 1.0 - retiring - bad - frontend, "backend bound"),
    ] {
        let row = builtin(&rows, metric);
        assert_close(&row["value"], value * 100.0);
        assert_eq!(row["perf"]["label"], label, "{row}");
        assert_eq!(row["perf"]["agrees"], true, "{row}");
    }

    let without: String = log
        .lines()
        .filter(|l| !l.contains("topdown-recovery-bubbles  "))
        .map(|l| format!("{l}\n"))
        .collect();
    let without = without.replace("18.0% backend bound", "20.0% backend bound/bad spec");
    let output = tmetric_stdin(&["eval", "--from-perf", "-", "--json"], &without);
    assert!(output.status.success(), "{}", stderr(&output));
    let (_, rows) = json(&output);
    let bad = (c("topdown-slots-issued") - c("topdown-slots-retired")) / total;
    let row = builtin(&rows, "td_legacy_backend_bound");
    assert_close(&row["value"], (1.0 - retiring - bad - frontend) * 100.0);
    assert_eq!(row["perf"]["label"], "backend bound/bad spec", "{row}");
    assert_eq!(row["perf"]["agrees"], true, "{row}");
    assert!(rows_of(&rows, "td_legacy_bad_speculation").is_empty());
}

/// A log from this machine's perf (no hardware PMU): the hardware rows are <not supported>, so
/// no built-in is shown; CPUs utilized on both clocks and the /sec rate are checked.
#[test]
fn builtins_on_a_real_system_wide_log() {
    let path = fixture("perf/std_real_builtins_system_wide.txt");
    let output = ok(&["eval", "--from-perf", &path, "--json"]);
    let (_, rows) = json(&output);
    assert!(rows.iter().all(|r| r["model"] != "perf built-in"), "{rows:?}");
    assert_eq!(one(&rows, "cpus_utilized")["perf"]["agrees"], true);
    assert_eq!(one(&rows, "context_switches_per_sec")["perf"]["agrees"], true);
    assert!(stderr(&output).contains("all agree"), "{}", stderr(&output));
}

/// `#slots` solved from perf's printed frontend_bound on Neoverse N2:
/// frontend_bound = 100 * (STALL_SLOT_FRONTEND / (CPU_CYCLES * #slots) - BR_MIS_PRED / CPU_CYCLES)
/// is 35.0 only for #slots = 5 among 1..16.
#[test]
fn slots_inferred_from_a_printed_arm_metric() {
    let log = read("perf/arm_n2_frontend_bound.txt");
    let (cycles, stall, mispred) =
        (count(&log, "CPU_CYCLES"), count(&log, "STALL_SLOT_FRONTEND"), count(&log, "BR_MIS_PRED"));
    let fits: Vec<u32> = (1..=16)
        .filter(|&s| {
            let v = 100.0 * (stall / (cycles * f64::from(s)) - mispred / cycles);
            (v - 35.0).abs() <= 0.05
        })
        .collect();
    assert_eq!(fits, vec![5]);
    let path = fixture("perf/arm_n2_frontend_bound.txt");
    let args = ["eval", "--from-perf", &path, "--model", "neoverse-n2-v2"];
    let text = stdout(&ok(&args));
    let line = line_of(&log, "CPU_CYCLES", 0);
    assert!(
        text.contains(&format!("#slots=5 (inferred from frontend_bound printed on line {line})")),
        "{text}"
    );
    let mut json_args = args.to_vec();
    json_args.push("--json");
    let (header, rows) = json(&ok(&json_args));
    let slots = header["literals"].as_array().unwrap().iter().find(|l| l["literal"] == "slots");
    assert_eq!(slots.unwrap()["value"], 5.0);
    let row = one(&rows, "frontend_bound");
    assert_close(&row["value"], 100.0 * (stall / (cycles * 5.0) - mispred / cycles));
    assert_eq!(row["perf"]["agrees"], true);
}

/// With no stall slots perf's printed frontend_bound (-1.0) is the same for every #slots: no
/// inference, a warning that says so and the error naming --slots; without a printed value the
/// vendor's documented N2 value applies when the cpuid names an N2.
#[test]
fn slots_not_fixed_by_the_log() {
    let log = read("perf/arm_n2_frontend_bound.txt")
        .replace("1,800,000,000      STALL_SLOT_FRONTEND", "            0      STALL_SLOT_FRONTEND")
        .replace("35.0 percent of slots", "-1.0 percent of slots");
    let output = tmetric_stdin(&["eval", "--from-perf", "-", "--model", "neoverse-n2-v2"], &log);
    assert!(output.status.success(), "{}", stderr(&output));
    let err = stderr(&output);
    assert!(
        err.contains("#slots could not be inferred: 16 values reproduce frontend_bound"),
        "{err}"
    );
    let text = stdout(&output);
    assert!(text.contains("#slots is unknown: pass --slots N"), "{text}");

    // Not printed: nothing to solve from; the cpuid of an N2 (MIDR part 0xd49) gives 5.
    let unprinted = read("perf/arm_n2_frontend_bound.txt")
        .replace("#     35.0 percent of slots  frontend_bound", "");
    let args = ["eval", "--from-perf", "-", "-M", "frontend_bound", "--model", "neoverse-n2-v2"];
    let output = tmetric_stdin(&args, &unprinted);
    assert!(stdout(&output).contains("#slots is unknown: pass --slots N"), "{}", stdout(&output));
    let mut with_cpuid = args.to_vec();
    with_cpuid.extend(["--cpuid", "0x00000000410fd493"]);
    let output = tmetric_stdin(&with_cpuid, &unprinted);
    let text = stdout(&output);
    assert!(text.contains("#slots=5 (vendor default for Neoverse N2)"), "{text}");
    let value: f64 = text_value(&text, "frontend_bound").parse().unwrap();
    assert!((value - 35.0).abs() < 0.05, "{text}");
}

/// The same built-ins in perf's -x layout, where perf prints level 1 as `40.0,Retiring`: a
/// label that is also a metric name of some models (`retiring`), which must not make the log
/// look like theirs.
#[test]
fn builtins_from_a_csv_log() {
    let path = fixture("perf/csv_builtins_perf61.txt");
    let log = read("perf/csv_builtins_perf61.txt");
    let field = |event: &str| -> f64 {
        let line = log.lines().find(|l| l.split(',').nth(2) == Some(event)).unwrap();
        line.split(',').next().unwrap().parse().unwrap()
    };
    let output = ok(&["eval", "--from-perf", &path, "--json"]);
    let (header, rows) = json(&output);
    assert_eq!(header["model"], "common/common", "{header}");
    let ipc = builtin(&rows, "insn_per_cycle");
    assert_close(&ipc["value"], field("instructions") / field("cycles"));
    assert_eq!(ipc["perf"]["agrees"], true);
    let ghz = builtin(&rows, "ghz");
    assert_close(&ghz["value"], field("cycles") / (field("cpu-clock") * 1e6));
    assert_eq!(ghz["perf"]["agrees"], true);
    let sum: f64 = ["topdown-retiring", "topdown-bad-spec", "topdown-fe-bound", "topdown-be-bound"]
        .iter()
        .map(|e| field(e))
        .sum();
    let retiring = builtin(&rows, "td_retiring");
    assert_close(&retiring["value"], field("topdown-retiring") / sum * 100.0);
    assert_eq!(retiring["perf"]["label"], "Retiring");
    assert_eq!(retiring["perf"]["agrees"], true);
    assert_eq!(builtin(&rows, "branch_miss_rate")["perf"]["agrees"], true);
}

/// `#smt_on` (defaulted to 1) solved from perf's printed value when only one of 0 and 1
/// reproduces it: tma_dtlb_store = 100 * (STLB_HIT_STORES * min(latency, 7) / THREAD +
/// WALK_ACTIVE / core_clks), core_clks = DISTRIBUTED with SMT on and THREAD with it off. With
/// 3,000,000 walk cycles the two give 9.9 and 9.8; the seed's own value (0.6) fits both, so the
/// default stays.
#[test]
fn smt_on_inferred_when_the_printed_value_decides() {
    let seed = read("seed004/mtl_tma_dtlb_store.txt");
    let log =
        seed.replace("168,486 cpu_core/DTLB_STORE_MISSES", "3,000,000 cpu_core/DTLB_STORE_MISSES");
    let c = |event: &str| count(&log, &format!("cpu_core/{event}/"));
    let walk = c("DTLB_STORE_MISSES.WALK_ACTIVE");
    assert_eq!(walk, 3e6);
    let on = 100.0 * walk / c("CPU_CLK_UNHALTED.DISTRIBUTED");
    let off = 100.0 * walk / c("CPU_CLK_UNHALTED.THREAD");
    assert_eq!((format!("{on:.1}"), format!("{off:.1}")), ("9.9".to_string(), "9.8".to_string()));
    let line = line_of(&log, "cpu_core/TOPDOWN.SLOTS/", 0);
    for (printed, smt, value) in [("9.9", 1.0, on), ("9.8", 0.0, off)] {
        let edited =
            log.replace("# 0.6 % tma_dtlb_store", &format!("# {printed} % tma_dtlb_store"));
        let output = tmetric_stdin(&["eval", "--from-perf", "-", "--json"], &edited);
        assert!(output.status.success(), "{}", stderr(&output));
        let (header, rows) = json(&output);
        let lit = &header["literals"][0];
        assert_eq!(lit["literal"], "smt_on");
        assert_eq!(lit["value"], smt);
        assert_eq!(lit["source"], format!("inferred from tma_dtlb_store printed on line {line}"));
        let row = one(&rows, "tma_dtlb_store");
        assert_close(&row["value"], value);
        assert_eq!(row["perf"]["agrees"], true);
    }
    // A flag wins over the log.
    let edited = log.replace("# 0.6 % tma_dtlb_store", "# 9.8 % tma_dtlb_store");
    let (header, _) =
        json(&tmetric_stdin(&["eval", "--from-perf", "-", "--json", "--smt", "on"], &edited));
    assert_eq!(header["literals"][0]["source"], "flag");
}

/// A metric perf printed as 0 because of a literal or a probe says why in every layout of
/// `eval --from-perf`, as `stat` said in its notes.
#[test]
fn a_zero_that_a_fact_decides_says_why() {
    let log = "\n Performance counter stats for 'system wide':\n\n\
        \x20      4543031826      topdown-be-bound\n\
        \x20     15143439429      TOPDOWN.SLOTS\n\
        \x20      2725819094      topdown-mem-bound\n\
        \x20       107342310 ns   duration_time                    #      0.0 %  tma_pmm_bound          \n\
        \x20       107342310 ns   duration_time                    #      0.0 %  tsx_transactional_cycles\n\
        \n       0.107342310 seconds time elapsed\n\n";
    let args = ["eval", "--from-perf", "-", "--model", "sapphirerapids", "--literal", "has_pmem=0"];
    let out = tmetric_stdin(&args, log);
    let text = stdout(&out);
    assert!(out.status.success(), "{}", stderr(&out));
    let line = |m: &str| text.lines().find(|l| l.contains(&format!("%  {m} "))).unwrap_or_default();
    assert!(line("tma_pmm_bound").contains("why: 0 because #has_pmem is 0 (flag)"), "{text}");
    assert!(
        line("tsx_transactional_cycles").contains(
            "why: 0 because has_event(cycles-t) is false: the log has no row for `cycles-t`"
        ),
        "{text}"
    );
    let mut json_args = args.to_vec();
    json_args.push("--json");
    let (_, rows) = json(&tmetric_stdin(&json_args, log));
    assert_eq!(one(&rows, "tma_pmm_bound")["why"], "0 because #has_pmem is 0 (flag)");
    assert!(
        one(&rows, "tsx_transactional_cycles")["why"]
            .as_str()
            .is_some_and(|w| w.starts_with("0 because has_event(cycles-t) is false")),
        "{rows:?}"
    );
}
