//! `tmetric eval` end to end through the binary.
//!
//! The counts files are written here, and every expected value is worked out here by hand
//! from the formulas in pmu-events/arch (quoted next to each computation), never by calling
//! the code under test.

use std::path::PathBuf;
use std::process::Output;

use serde_json::Value;

use crate::support::{check, ok, stderr, stdout, tmetric};

/// Writes `text` to a file of this test's own and returns its path.
fn counts_file(name: &str, text: &str) -> String {
    let path = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("cli_eval_{name}.json"));
    std::fs::write(&path, text).expect("the test can write its counts file");
    path.display().to_string()
}

/// The metric objects of `--json` output, after checking the assumptions line comes first.
fn metric_rows(output: &Output) -> Vec<Value> {
    let text = stdout(output);
    let mut lines = text.lines();
    let first: Value = serde_json::from_str(lines.next().expect("an assumptions line")).unwrap();
    assert!(first.get("assumptions").is_some(), "{first}");
    lines
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON: {l}: {e}")))
        .collect()
}

fn row<'a>(rows: &'a [Value], metric: &str) -> &'a Value {
    rows.iter()
        .find(|r| r["metric"] == metric)
        .unwrap_or_else(|| panic!("no row for {metric}: {rows:?}"))
}

fn assert_close(got: &Value, want: f64) {
    let got = got.as_f64().unwrap_or_else(|| panic!("not a number: {got}"));
    assert!((got - want).abs() <= 1e-9 * want.abs().max(1.0), "got {got}, want {want}");
}

/// Counts for sapphirerapids TopdownL1.
struct TopdownL1 {
    fe: f64,
    bad: f64,
    retiring: f64,
    be: f64,
    heavy: f64,
    dropping: f64,
    slots: f64,
}

const L1: TopdownL1 = TopdownL1 {
    fe: 2.1e9,
    bad: 0.9e9,
    retiring: 4.2e9,
    be: 2.8e9,
    heavy: 0.6e9,
    dropping: 1.4e8,
    slots: 1.0e10,
};

impl TopdownL1 {
    /// The four metrics (unscaled) and their threshold states, from spr-metrics.json:
    /// tma_frontend_bound = topdown-fe-bound / (fe + bad-spec + retiring + be) - INT_MISC.UOP_DROPPING / tma_info_thread_slots
    /// tma_backend_bound  = topdown-be-bound / (...) + 0 * tma_info_thread_slots
    /// tma_retiring       = topdown-retiring / (...) + 0 * tma_info_thread_slots
    /// tma_bad_speculation = max(1 - (tma_frontend_bound + tma_backend_bound + tma_retiring), 0)
    /// tma_info_thread_slots = TOPDOWN.SLOTS; tma_heavy_operations = topdown-heavy-ops / (...).
    /// Thresholds: fe > 0.15, be > 0.2, bad > 0.15, retiring > 0.7 | heavy > 0.1.
    fn expected(&self) -> Vec<(&'static str, f64, bool)> {
        let sum = self.fe + self.bad + self.retiring + self.be;
        let frontend = self.fe / sum - self.dropping / self.slots;
        let backend = self.be / sum;
        let retiring = self.retiring / sum;
        let bad = (1.0 - (frontend + backend + retiring)).max(0.0);
        let heavy = self.heavy / sum;
        vec![
            ("tma_backend_bound", backend, backend > 0.2),
            ("tma_bad_speculation", bad, bad > 0.15),
            ("tma_frontend_bound", frontend, frontend > 0.15),
            ("tma_retiring", retiring, retiring > 0.7 || heavy > 0.1),
        ]
    }
}

fn l1_counts(name: &str, keys: [&str; 7]) -> String {
    let values = [L1.fe, L1.bad, L1.retiring, L1.be, L1.heavy, L1.dropping, L1.slots];
    let body: Vec<String> =
        keys.iter().zip(values).map(|(k, v)| format!("  {}: {v:e}", Value::from(*k))).collect();
    counts_file(name, &format!("{{\n{}\n}}\n", body.join(",\n")))
}

const L1_KEYS: [&str; 7] = [
    "topdown-fe-bound",
    "topdown-bad-spec",
    "topdown-retiring",
    "topdown-be-bound",
    "topdown-heavy-ops",
    "INT_MISC.UOP_DROPPING",
    "TOPDOWN.SLOTS",
];

#[test]
fn topdown_l1_text_matches_hand_computation() {
    let path = l1_counts("l1_text", L1_KEYS);
    let output = ok(&[
        "eval",
        "--model",
        "sapphirerapids",
        "--counts",
        &path,
        "-M",
        "TopdownL1",
        "--color",
        "never",
    ]);
    // `<==` marks the bottleneck as `stat --tree` does: the crossed level-1 node with the
    // largest value (not every crossed node).
    let metrics = L1.expected();
    let bottleneck = metrics
        .iter()
        .filter(|m| m.2)
        .max_by(|a, b| a.1.total_cmp(&b.1))
        .map(|m| m.0)
        .expect("a crossed node");
    assert_eq!(bottleneck, "tma_backend_bound", "frontend is crossed too, with less");
    let expected: Vec<String> = metrics
        .into_iter()
        .map(|(name, value, _)| {
            // ScaleUnit 100%: perf prints %8.1f, then the unit and the name.
            let mark = if name == bottleneck { "  <==" } else { "" };
            format!("{:8.1} %  {name}{mark}", value * 100.0)
        })
        .collect();
    assert_eq!(stdout(&output).lines().collect::<Vec<_>>(), expected);
}

#[test]
fn topdown_l1_json_matches_hand_computation() {
    let path = l1_counts("l1_json", L1_KEYS);
    let output = ok(&[
        "eval",
        "--model",
        "x86/sapphirerapids",
        "--counts",
        &path,
        "-M",
        "TopdownL1",
        "--json",
    ]);
    let rows = metric_rows(&output);
    assert_eq!(rows.len(), 4);
    for (name, value, crossed) in L1.expected() {
        let r = row(&rows, name);
        assert_close(&r["value"], value * 100.0);
        assert_eq!(r["threshold"], crossed, "{name}");
        assert_eq!(r["bottleneck"], name == "tma_backend_bound", "{name}");
        assert_eq!(r["unit"], "%");
        assert_eq!(r["pmu"], "default_core");
        assert_eq!(r["missing"], serde_json::json!([]));
        assert_eq!(r["error"], Value::Null);
    }
}

#[test]
fn keys_match_in_any_case_and_with_pmu_prefixes() {
    let keys = [
        "CPU/Topdown-FE-Bound/",
        r"cpu@topdown\-bad\-spec@",
        "Topdown-Retiring",
        "cpu_core/topdown-be-bound/",
        "cpu/TOPDOWN-HEAVY-OPS/",
        "int_misc.uop_dropping",
        "cpu/slots/",
    ];
    let path = l1_counts("l1_keys", keys);
    let output =
        ok(&["eval", "--model", "sapphirerapids", "--counts", &path, "-M", "TopdownL1", "-j"]);
    let rows = metric_rows(&output);
    for (name, value, _) in L1.expected() {
        assert_close(&row(&rows, name)["value"], value * 100.0);
    }
    assert!(!stderr(&output).contains("ignored"), "{}", stderr(&output));
}

#[test]
fn a_missing_event_makes_the_metric_nan_and_is_named() {
    let mut keys = L1_KEYS;
    keys[5] = "SOMETHING.ELSE";
    let path = l1_counts("l1_missing", keys);
    // The whole output: the assumptions line, the rows and the note on the ignored key; the
    // values the snapshot masks are compared below.
    let output = check(
        &["eval", "--model", "sapphirerapids", "--counts", &path, "-M", "TopdownL1", "--json"],
        "cli_eval__missing_event_json",
    );
    assert!(output.status.success());
    let rows = metric_rows(&output);
    let frontend = row(&rows, "tma_frontend_bound");
    assert_eq!(frontend["value"], Value::Null);
    assert_eq!(frontend["missing"], serde_json::json!(["INT_MISC.UOP_DROPPING"]));
    assert_eq!(frontend["threshold"], Value::Null);
    // max(1 - (NaN + ...), 0) is C's `a > b ? a : b`: a NaN `a` gives 0 (util/expr.y).
    let bad = row(&rows, "tma_bad_speculation");
    assert_close(&bad["value"], 0.0);
    assert_eq!(bad["missing"], serde_json::json!(["INT_MISC.UOP_DROPPING"]));

    let output =
        ok(&["eval", "--model", "sapphirerapids", "--counts", &path, "-M", "tma_frontend_bound"]);
    assert_eq!(
        stdout(&output).trim_end(),
        "     nan %  tma_frontend_bound  missing: INT_MISC.UOP_DROPPING"
    );
}

/// A metric none of whose inputs the counts hold is `nan` with its missing inputs, in every
/// layout, even where perf's rules would make a number of the NaNs
/// (`tma_bad_speculation`'s `max(1 - NaN, 0)` is 0): it measured nothing.
#[test]
fn a_metric_without_any_of_its_inputs_is_nan_with_the_reason() {
    let path = counts_file("no_inputs", r#"{"cycles": 1000}"#);
    let base = ["eval", "--model", "sapphirerapids", "--counts", &path, "-M"];
    let output = ok(&[&base[..], &["tma_bad_speculation", "--json"]].concat());
    let bad = row(&metric_rows(&output), "tma_bad_speculation").clone();
    assert_eq!(bad["value"], Value::Null, "{bad}");
    assert_eq!(bad["threshold"], Value::Null, "{bad}");
    assert_eq!(bad["missing"].as_array().map(Vec::len), Some(6), "{bad}");
    let text = stdout(&ok(&[&base[..], &["tma_bad_speculation"]].concat()));
    assert!(
        text.starts_with("     nan %  tma_bad_speculation  missing: topdown-be-bound, "),
        "{text}"
    );
}

/// One `-M` resolver (`engine::select`): eval words a miss exactly as stat does, and a metric
/// of another model names the models that define it and the flag to pass.
#[test]
fn a_miss_is_worded_as_stat_words_it() {
    let path = l1_counts("l1_miss_words", L1_KEYS);
    let eval = |model: &str, item: &str| {
        let output = tmetric(&[
            "--perf-version",
            "6.12",
            "eval",
            "--model",
            model,
            "--counts",
            &path,
            "-M",
            item,
        ]);
        assert_eq!(output.status.code(), Some(2));
        stderr(&output)
    };
    let stat = tmetric(&[
        "--perf-version",
        "6.12",
        "stat",
        "--model",
        "sapphirerapids",
        "-M",
        "tma_fronted_bound",
        "true",
    ]);
    assert_eq!(stat.status.code(), Some(2));
    assert_eq!(eval("sapphirerapids", "tma_fronted_bound"), stderr(&stat));
    check(
        &[
            "--perf-version",
            "6.12",
            "eval",
            "--model",
            "amdzen4",
            "--counts",
            &path,
            "-M",
            "tma_dtlb_store",
        ],
        "cli_eval__other_models_metric",
    );
}

/// Inputs `eval` refuses, each with exit status 2, nothing on standard output and one message
/// that names the file and its line and column, the key or the expression with a caret.
#[test]
fn refusals_name_the_file_line_and_what_is_wrong() {
    let l1 = l1_counts("l1_unknown", L1_KEYS);
    // The missing comma is noticed at the `"` that starts line 4, column 3.
    let bad_json = counts_file(
        "bad_json",
        "{\n  \"INST_RETIRED.ANY\": 1,\n  \"CPU_CLK_UNHALTED.THREAD\": 2\n  \"X\": 3\n}\n",
    );
    let bad_value = counts_file("bad_value", "{\n  \"INST_RETIRED.ANY\": [1]\n}\n");
    let dup = counts_file("dup", r#"{"INST_RETIRED.ANY": 1, "cpu/inst_retired.any/": 2}"#);
    let hybrid = counts_file("hybrid", r#"{"INST_RETIRED.ANY": 10}"#);
    let spr = ["eval", "--model", "sapphirerapids", "--counts"];
    let cases: [(&[&str], &str); 6] = [
        (&[&spr[..], &[&bad_json]].concat(), "cli_eval__malformed_json"),
        (&[&spr[..], &[&bad_value]].concat(), "cli_eval__value_not_a_number"),
        (&[&spr[..], &[&l1, "-M", "tma_fronted_bound"]].concat(), "cli_eval__unknown_metric"),
        (&[&spr[..], &[&dup]].concat(), "cli_eval__two_keys_for_one_input"),
        (&["eval", "--model", "alderlake", "--counts", &hybrid], "cli_eval__hybrid_bare_key"),
        (&["eval", "--expr", "1 + * 2"], "cli_eval__expr_caret"),
    ];
    for (args, expect) in cases {
        let out = check(args, expect);
        assert_eq!(out.status.code(), Some(2), "{expect}");
    }
}

#[test]
fn uncore_instances_are_summed() {
    // memory_bandwidth_read = UNC_M_CAS_COUNT.RD * 64 / 1e6 / duration_time, ScaleUnit 1MB/s.
    let (imc0, imc1, seconds) = (1.0e6, 3.0e6, 2.0);
    let path = counts_file(
        "imc",
        &format!(
            r#"{{"uncore_imc_0/UNC_M_CAS_COUNT.RD/": {imc0}, "uncore_imc_1/UNC_M_CAS_COUNT.RD/": {imc1}, "duration_time_ns": {}}}"#,
            seconds * 1e9
        ),
    );
    let want = (imc0 + imc1) * 64.0 / 1e6 / seconds;
    let output = ok(&[
        "eval",
        "--model",
        "sapphirerapids",
        "--counts",
        &path,
        "-M",
        "memory_bandwidth_read",
    ]);
    assert_eq!(stdout(&output).trim_end(), format!("{want:8.1} MB/s  memory_bandwidth_read"));
}

/// perf 7.2's `lpm_miss_lat_loc` divides the CHAs' summed clockticks by `aggr_nr()`, the
/// counters summed: a counts file gives it in its `aggr_nr` object; without it tmetric reads
/// the instance keys summed and says so. The counts are built from a known latency (120 CHAs
/// at 2.2 GHz for 1 s, each miss 81 ns in the TOR: Little's law).
#[test]
fn aggr_nr_comes_from_the_file_or_is_said_to_be_assumed() {
    let (chas, ghz, ns, inserts) = (120.0, 2.2, 81.0, 1.2e7);
    let counts = |aggr_nr: &str| {
        format!(
            r#"{{"duration_time_ns": 1e9, "UNC_CHA_CLOCKTICKS": {}, "UNC_CHA_TOR_OCCUPANCY.IA_MISS_DRD_LOCAL": {}, "UNC_CHA_TOR_INSERTS.IA_MISS_DRD_LOCAL": {inserts}{aggr_nr}}}"#,
            chas * ghz * 1e9,
            inserts * ns * ghz
        )
    };
    let run = |name: &str, text: &str| {
        let path = counts_file(name, text);
        let args = ["--perf-version", "7.2", "eval", "--model", "sapphirerapids", "--counts"];
        ok(&[&args[..], &[path.as_str(), "-M", "lpm_miss_lat_loc", "--json"]].concat())
    };
    let given = run(
        "aggr_nr_given",
        &counts(r#", "aggr_nr": {"UNC_CHA_TOR_INSERTS.IA_MISS_DRD_LOCAL": 120}"#),
    );
    assert_close(&row(&metric_rows(&given), "lpm_miss_lat_loc")["value"], ns);
    assert!(!stderr(&given).contains("aggr_nr"), "{}", stderr(&given));
    let assumed = run("aggr_nr_assumed", &counts(""));
    // One key read as one counter: the clockticks of all 120 CHAs taken for one's.
    assert_close(&row(&metric_rows(&assumed), "lpm_miss_lat_loc")["value"], ns / chas);
    assert!(
        stderr(&assumed).contains(
            "assuming aggr_nr(UNC_CHA_TOR_INSERTS.IA_MISS_DRD_LOCAL) = 1 (the instance keys summed): give \"aggr_nr\""
        ),
        "{}",
        stderr(&assumed)
    );
}

#[test]
fn literals_come_from_flags_the_file_or_stated_defaults() {
    // tma_info_core_coreipc = INST_RETIRED.ANY / tma_info_core_core_clks, and
    // tma_info_core_core_clks = CPU_CLK_UNHALTED.DISTRIBUTED if #SMT_on else CPU_CLK_UNHALTED.THREAD.
    let (inst, distributed, thread) = (6.0e9, 4.0e9, 3.0e9);
    let counts = format!(
        r#""INST_RETIRED.ANY": {inst}, "CPU_CLK_UNHALTED.DISTRIBUTED": {distributed}, "CPU_CLK_UNHALTED.THREAD": {thread}"#
    );
    let path = counts_file("smt", &format!("{{{counts}}}"));
    let args =
        ["eval", "--model", "sapphirerapids", "--counts", &path, "-M", "tma_info_core_coreipc"];

    let output = ok(&args);
    assert_eq!(
        stdout(&output).trim_end(),
        format!("{:8.2} tma_info_core_coreipc", inst / distributed)
    );
    assert!(stderr(&output).contains("#smt_on=1 (default"), "{}", stderr(&output));

    let output = ok(&[&args[..], &["--smt", "off", "--json"]].concat());
    let text = stdout(&output);
    let assumptions: Value = serde_json::from_str(text.lines().next().unwrap()).unwrap();
    assert_eq!(
        assumptions["assumptions"]["literals"],
        serde_json::json!([{"literal": "smt_on", "value": 0.0, "source": "flag"}])
    );
    assert_close(&row(&metric_rows(&output), "tma_info_core_coreipc")["value"], inst / thread);

    let path = counts_file(
        "smt_file",
        &format!(r##"{{"counts": {{{counts}}}, "literals": {{"#SMT_on": false}}}}"##),
    );
    let output = ok(&[
        "eval",
        "--model",
        "sapphirerapids",
        "--counts",
        &path,
        "-M",
        "tma_info_core_coreipc",
        "-j",
    ]);
    let assumptions: Value = serde_json::from_str(stdout(&output).lines().next().unwrap()).unwrap();
    assert_eq!(assumptions["assumptions"]["literals"][0]["source"], "counts file");
    assert_close(&row(&metric_rows(&output), "tma_info_core_coreipc")["value"], inst / thread);
}

/// perf's `core_wide()` (util/smt.c) is 0 unless the count was system-wide (`-a`), SMT or not:
/// a counts file's `target` and a log's header say which, and without either a count per task
/// is assumed and said. Skylake's `tma_info_core_core_clks` is
/// `THREAD / 2 * (1 + ONE_THREAD_ACTIVE / REF_XCLK) if #core_wide < 1 else (THREAD_ANY / 2 if
/// #SMT_on else THREAD)`.
#[test]
fn core_wide_follows_whether_the_input_says_it_counted_system_wide() {
    let (thread, one_active, ref_xclk) = (4.0e9, 1.0e8, 4.0e8);
    let per_task = thread / 2.0 * (1.0 + one_active / ref_xclk);
    let counts = format!(
        r#""CPU_CLK_UNHALTED.THREAD": {thread}, "CPU_CLK_UNHALTED.ONE_THREAD_ACTIVE": {one_active}, "CPU_CLK_UNHALTED.REF_XCLK": {ref_xclk}"#
    );
    let metric = "tma_info_core_core_clks";
    for (name, target, want, said) in [
        (
            "target_none",
            "",
            per_task,
            "assumed counted per task: nothing says whether it was system-wide (-a)",
        ),
        (
            "target_a",
            r#", "target": "-a -C 0-7""#,
            thread,
            "counted system-wide, as the counts file's `target` (-a) says",
        ),
        (
            "target_pid",
            r#", "target": "-p 4242""#,
            per_task,
            "not counted system-wide, as the counts file's `target` (no -a) says",
        ),
    ] {
        let path = counts_file(name, &format!(r#"{{"counts": {{{counts}}}{target}}}"#));
        let output = ok(&[
            "eval", "--model", "skylake", "--counts", &path, "-M", metric, "--smt", "off", "--json",
        ]);
        let assumptions: Value =
            serde_json::from_str(stdout(&output).lines().next().unwrap()).unwrap();
        let core_wide = &assumptions["assumptions"]["literals"][1];
        assert_eq!(core_wide["literal"], "core_wide", "{name}: {assumptions}");
        assert_eq!(core_wide["source"], said, "{name}");
        assert_close(&row(&metric_rows(&output), metric)["value"], want);
    }
    let bad = counts_file("target_empty", &format!(r#"{{"counts": {{{counts}}}, "target": " "}}"#));
    let output = tmetric(&["eval", "--model", "skylake", "--counts", &bad, "-M", metric]);
    assert_eq!(output.status.code(), Some(2));
    assert!(stderr(&output).contains("`target` is empty; expected perf stat's target options"));

    for (header, want, said) in [
        (
            "system wide",
            thread,
            "#core_wide=1 (counted system-wide, as the log's header ('system wide') says",
        ),
        (
            "sleep 1",
            per_task,
            "#core_wide=0 (not counted system-wide, as the log's header (a command, process or threads) says",
        ),
        (
            "CPU(s) 0-3",
            per_task,
            "#core_wide=0 (not counted system-wide, as the log's header ('CPU(s) ...': -C without -a) says",
        ),
    ] {
        let log = format!(
            "\n Performance counter stats for '{header}':\n\n     4,000,000,000      CPU_CLK_UNHALTED.THREAD\n       100,000,000      CPU_CLK_UNHALTED.ONE_THREAD_ACTIVE\n       400,000,000      CPU_CLK_UNHALTED.REF_XCLK\n\n       1.001 seconds time elapsed\n"
        );
        let path = counts_file(&format!("log_{}", header.replace([' ', '(', ')'], "_")), &log);
        let output =
            ok(&["eval", "--from-perf", &path, "--model", "skylake", "-M", metric, "--smt", "off"]);
        assert!(stdout(&output).contains(said), "{header}: {}", stdout(&output));
        let value: f64 = stdout(&output)
            .lines()
            .find(|l| l.ends_with(metric))
            .and_then(|l| l.split_whitespace().next())
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("{header}: {}", stdout(&output)));
        assert_eq!(value, want, "{header}");
    }
}

#[test]
fn an_unknown_literal_fails_the_metric_and_names_the_flag() {
    // tma_info_system_cpu_utilization = tma_info_system_cpus_utilized / #num_cpus_online, and
    // tma_info_system_cpus_utilized = CPU_CLK_UNHALTED.REF_TSC / TSC.
    let (ref_tsc, tsc, cpus) = (6.0e9, 8.0e9, 4.0);
    let path = counts_file(
        "cpus",
        &format!(r#"{{"CPU_CLK_UNHALTED.REF_TSC": {ref_tsc}, "msr/tsc/": {tsc}}}"#),
    );
    let args = [
        "eval",
        "--model",
        "sapphirerapids",
        "--counts",
        &path,
        "-M",
        "tma_info_system_cpu_utilization",
    ];
    // The metric's row says why it has no value and the flag that gives one; a note says so.
    assert!(check(&args, "cli_eval__unknown_literal").status.success());

    let output = ok(&[&args[..], &["--cpus", "4"]].concat());
    assert_eq!(
        stdout(&output).trim_end(),
        format!("{:8.2} tma_info_system_cpu_utilization", ref_tsc / tsc / cpus)
    );
}

#[test]
fn retire_latencies_from_either_spelling() {
    // tma_lock_latency = cpu_core@MEM_INST_RETIRED.LOCK_LOADS@ * cpu_core@MEM_INST_RETIRED.LOCK_LOADS@R
    //                    / tma_info_thread_clks, with tma_info_thread_clks = cpu_core@CPU_CLK_UNHALTED.THREAD@.
    let (loads, latency, clocks) = (1000.0, 30.0, 1.0e6);
    let want = loads * latency / clocks * 100.0;
    for (name, latency_key) in [
        (
            "rl_section",
            format!(r#""retire_latency": {{"MEM_INST_RETIRED.LOCK_LOADS": {latency}}}"#),
        ),
        ("rl_colon", format!(r#""MEM_INST_RETIRED.LOCK_LOADS:R": {latency}"#)),
        ("rl_slash", format!(r#""cpu_core/MEM_INST_RETIRED.LOCK_LOADS/R": {latency}"#)),
    ] {
        let path = counts_file(
            name,
            &format!(
                r#"{{"model": "meteorlake", "cpu_core/MEM_INST_RETIRED.LOCK_LOADS/": {loads}, "cpu_core/CPU_CLK_UNHALTED.THREAD/": {clocks}, {latency_key}}}"#
            ),
        );
        let output = ok(&["eval", "--counts", &path, "-M", "tma_lock_latency", "--json"]);
        let rows = metric_rows(&output);
        let r = row(&rows, "tma_lock_latency");
        assert_close(&r["value"], want);
        assert_eq!(r["pmu"], "cpu_core");
    }
}

#[test]
fn common_metrics_from_software_events() {
    // common/metrics.json: cpus_utilized = task-clock / (duration_time * 1e9),
    // context_switches_per_sec = context-switches / (task-clock / 1e9); both with a ScaleUnit.
    let (task_clock, seconds, switches) = (4.0e9, 2.0, 2000.0);
    let path = counts_file(
        "software",
        &format!(
            r#"{{"task-clock": {task_clock}, "duration_time": {seconds}, "context-switches": {switches}}}"#
        ),
    );
    let utilized = task_clock / (seconds * 1e9);
    let per_sec = switches / (task_clock / 1e9);

    let output = ok(&["--perf-version", "6.12", "eval", "--model", "common", "--counts", &path]);
    let text = stdout(&output);
    assert!(text.lines().any(|l| l == format!("{utilized:8.1} CPUs  cpus_utilized")), "{text}");
    assert!(
        text.lines().any(|l| l == format!("{per_sec:8.1} /sec  context_switches_per_sec")),
        "{text}"
    );

    // Every model gets them too.
    let output = ok(&[
        "--perf-version",
        "6.12",
        "eval",
        "--model",
        "sapphirerapids",
        "--counts",
        &path,
        "--json",
    ]);
    let rows = metric_rows(&output);
    let r = row(&rows, "cpus_utilized");
    assert_close(&r["value"], utilized);
    assert_eq!(r["model"], "common/common");
    assert_close(&row(&rows, "context_switches_per_sec")["value"], per_sec);
}

#[test]
fn expr_follows_perf_precedence() {
    let output = ok(&["eval", "--expr", "1 + 2 if 0 else 3 + 4"]);
    assert_eq!(stdout(&output).trim(), "7");
    let output = ok(&["eval", "--expr", "d_ratio(a, 0)"]);
    assert_eq!(stdout(&output).trim(), "0");
    let output = ok(&["eval", "--expr", "a / b * 2", "--var", "a=3", "--var", "b=4"]);
    assert_eq!(stdout(&output).trim(), (3.0_f64 / 4.0 * 2.0).to_string());
    let output = ok(&["eval", "--expr", "a + b", "--var", "a=1"]);
    assert_eq!(stdout(&output).trim(), "nan");
    assert!(stderr(&output).contains("no value for `b`"), "{}", stderr(&output));
    let output = ok(&["eval", "--expr", "#smt_on * 10", "--var", "#smt_on=0"]);
    assert_eq!(stdout(&output).trim(), "0");
}

/// A `nan` or 0 that a literal, a `has_event()` probe or a division by inputs that are 0
/// decides says why, as `stat`'s notes do, worded for counts: the literal with where its value
/// came from and the flag that sets it, the event the counts file gives no value for, the
/// inputs that are 0. A 0 that the counts make (an input that counted 0) says nothing.
#[test]
fn a_nan_or_zero_that_a_fact_decides_says_why() {
    let path = counts_file(
        "why",
        r#"{"IDQ.DSB_CYCLES_ANY": 0, "IDQ.MITE_CYCLES_ANY": 0, "IDQ.DSB_CYCLES_OK": 0,
            "IDQ.MITE_CYCLES_OK": 0, "CPU_CLK_UNHALTED.DISTRIBUTED": 1000,
            "topdown-fe-bound": 10, "topdown-be-bound": 10, "topdown-bad-spec": 10,
            "topdown-retiring": 10, "TOPDOWN.SLOTS": 40, "INT_MISC.UOP_DROPPING": 0,
            "topdown-fetch-lat": 5, "topdown-mem-bound": 4}"#,
    );
    let metrics = "tma_pmm_bound,tsx_transactional_cycles,tma_info_botlnk_l2_dsb_bandwidth,tma_dsb";
    // Each row's `why:` in whole: tma_pmm_bound's literal and its flag, tsx_transactional_cycles'
    // probe, the division's inputs that are 0 for tma_info_botlnk_l2_dsb_bandwidth, and none
    // for tma_dsb, a 0 the counts make. Given, the literal is said to be given.
    let spr =
        ["--perf-version", "6.12", "eval", "--model", "sapphirerapids", "--counts", &path, "-M"];
    check(&[&spr[..], &[metrics]].concat(), "cli_eval__why_nan_or_zero");
    check(
        &[&spr[..], &["tma_pmm_bound", "--literal", "has_pmem=0"]].concat(),
        "cli_eval__why_given_literal",
    );
    let rows = metric_rows(&ok(&[
        "--perf-version",
        "6.12",
        "eval",
        "--model",
        "sapphirerapids",
        "--counts",
        &path,
        "-M",
        metrics,
        "--json",
    ]));
    assert_eq!(
        row(&rows, "tma_pmm_bound")["why"],
        "0 because #has_pmem is 0 (default; set with --literal has_pmem=1)"
    );
    assert!(row(&rows, "tma_dsb")["why"].is_null());
}

/// perf 6.12's expr.l has no `aggr_nr` keyword, so its parser reads `aggr_nr(x)` as a name
/// followed by `(` and refuses it; perf 7.2's reads it as the counters summed into `x`.
#[test]
fn aggr_nr_in_an_expression_is_refused_under_perf_6_12_as_its_grammar_refuses_it() {
    let refused = tmetric(&["eval", "--expr", "2 * aggr_nr(x)", "--var", "x=3"]);
    assert_eq!(refused.status.code(), Some(2));
    assert_eq!(
        stderr(&refused),
        "tmetric: cannot parse the expression: aggr_nr() is perf 7.x's; perf 6.12's expression grammar has no aggr_nr and refuses `aggr_nr(...)` as a syntax error (pass --perf-version 7.2 to evaluate it as perf 7.2 does)\n    2 * aggr_nr(x)\n        ^^^^^^^^^^\n"
    );
    // One value given with --var is one counter.
    let taken = ok(&["--perf-version", "7.2", "eval", "--expr", "2 * aggr_nr(x)", "--var", "x=3"]);
    assert_eq!(stdout(&taken).trim(), "2");
}

/// A global-layout log prints no counters column and a 'system wide' header does not say how
/// many CHA boxes and CPUs perf summed, so `aggr_nr()` reads one counter per row and stderr
/// says so, naming the layouts that print them.
#[test]
fn a_global_log_says_which_aggr_nr_it_assumed() {
    let log = counts_file(
        "global_aggr_nr",
        "\n Performance counter stats for 'system wide':\n\n   132,000,000,000      UNC_CHA_CLOCKTICKS\n     1,069,200,000      UNC_CHA_TOR_OCCUPANCY.IA_MISS_DRD_LOCAL\n         6,000,000      UNC_CHA_TOR_INSERTS.IA_MISS_DRD_LOCAL\n\n       1.000000000 seconds time elapsed\n",
    );
    let output = ok(&[
        "--perf-version",
        "7.2",
        "eval",
        "--from-perf",
        &log,
        "--model",
        "sapphirerapids",
        "-M",
        "lpm_miss_lat_loc",
    ]);
    assert_eq!(
        stderr(&output),
        "tmetric: warning: assuming aggr_nr(UNC_CHA_TOR_INSERTS.IA_MISS_DRD_LOCAL) = 1 (one counter per printed row): the log prints no counters column and its 'system wide' header does not say on how many CPUs and boxes; perf stat --per-socket, --per-die or -A prints the counters it summed beside each row\n"
    );
}
