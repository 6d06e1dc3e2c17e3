//! Which rows a result reads: one per interval and per CPU, each hybrid PMU its own, the group
//! perf printed the metric in, and `<not counted>`/`<not supported>` rows explained.

use serde_json::Value;

use crate::support::{ok, stderr, stdout};

use super::{assert_close, count, counts, fixture, json, line_of, one, read, rows_of};

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
