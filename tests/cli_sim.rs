//! `tmetric stat --pmu-sim`: hardware metrics end to end on the simulated kernel, with the
//! numbers checked against the simulator's workload (its truth).

use crate::support::{stderr, tmetric};

/// The default workload's level 1 (`crates/sim/workloads/default.json`): retiring, bad
/// speculation, frontend bound, backend bound.
const LEVEL1: [(&str, f64); 4] = [
    ("tma_retiring", 0.40),
    ("tma_bad_speculation", 0.10),
    ("tma_frontend_bound", 0.20),
    ("tma_backend_bound", 0.30),
];

/// The value printed before `%  name` on a metric line.
fn percent(text: &str, name: &str) -> f64 {
    let line = text
        .lines()
        .find(|l| l.contains(&format!("%  {name}")))
        .unwrap_or_else(|| panic!("no {name} in\n{text}"));
    let after = line.split('#').nth(1).expect("a metric");
    after.split_whitespace().next().expect("a value").parse().expect("a number")
}

#[test]
fn topdown_level_1_on_simulated_sapphire_rapids_sums_to_100() {
    let out =
        tmetric(&["stat", "--pmu-sim", "sapphirerapids", "-M", "TopdownL1", "-a", "sleep", "0.3"]);
    let text = stderr(&out);
    assert!(out.status.success(), "{text}");
    assert!(text.contains("simulated PMU `sapphirerapids`"), "{text}");
    assert!(text.contains("on simulated PMU 'sapphirerapids'"), "{text}");
    let mut sum = 0.0;
    for (name, fraction) in LEVEL1 {
        let value = percent(&text, name);
        assert!((value - 100.0 * fraction).abs() < 0.06, "{name}: {value} vs {}", 100.0 * fraction);
        sum += value;
    }
    assert!((sum - 100.0).abs() <= 0.1, "level 1 sums to {sum}\n{text}");
    assert!(!text.contains("not supported"), "{text}");
    assert!(!text.contains("nan"), "{text}");
}

#[test]
fn hybrid_alder_lake_counts_on_both_core_types() {
    let out = tmetric(&[
        "stat",
        "--pmu-sim",
        "alderlake",
        "-M",
        "tma_dtlb_store,TopdownL1",
        "-a",
        "sleep",
        "0.2",
    ]);
    let text = stderr(&out);
    assert!(out.status.success(), "{text}");
    assert!(!text.contains("not supported"), "{text}");
    assert!(text.contains("cpu_core/"), "{text}");
    assert!(text.contains("cpu_atom/"), "{text}");
    let dtlb = text.lines().find(|l| l.contains("tma_dtlb_store")).expect(&text);
    assert!(!dtlb.contains("nan"), "{dtlb}");
}

#[test]
fn unknown_simulated_machines_are_named() {
    let out = tmetric(&["stat", "--pmu-sim", "pentium", "-a", "sleep", "0"]);
    assert_eq!(out.status.code(), Some(2));
    let text = stderr(&out);
    assert!(
        text.contains("no simulated PMU `pentium`") && text.contains("sapphirerapids"),
        "{text}"
    );
}

/// The metric-only table: a header of `unit  name` columns, then one row of values.
fn metric_only_values(text: &str) -> Vec<(String, f64)> {
    let header =
        text.lines().find(|l| l.contains("%  tma_retiring")).unwrap_or_else(|| panic!("{text}"));
    let names: Vec<String> = header.split("%  ").skip(1).map(|n| n.trim().to_string()).collect();
    let values_line = text
        .lines()
        .skip_while(|l| !l.contains("%  tma_retiring"))
        .nth(1)
        .unwrap_or_else(|| panic!("{text}"));
    let values: Vec<f64> = values_line.split_whitespace().map(|v| v.parse().unwrap()).collect();
    assert_eq!(names.len(), values.len(), "{text}");
    names.into_iter().zip(values).collect()
}

#[test]
fn topdown_prints_level_1_metric_only_on_simulated_sapphire_rapids() {
    let out = tmetric(&["--pmu-sim", "sapphirerapids", "--topdown", "-a", "sleep", "0.2"]);
    let text = stderr(&out);
    assert!(out.status.success(), "{text}");
    let columns = metric_only_values(&text);
    assert_eq!(columns.len(), 4, "{text}");
    let sum: f64 = columns.iter().map(|c| c.1).sum();
    assert!((sum - 100.0).abs() <= 0.1, "{text}");
    for (name, fraction) in LEVEL1 {
        let v = columns.iter().find(|c| c.0 == name).expect(name).1;
        assert!((v - 100.0 * fraction).abs() < 0.06, "{name} {v}");
    }
    // Level 2 has the eight level-2 metrics.
    let out = tmetric(&[
        "--pmu-sim",
        "sapphirerapids",
        "--topdown",
        "--td-level",
        "2",
        "-a",
        "sleep",
        "0.1",
    ]);
    let text = stderr(&out);
    assert!(out.status.success(), "{text}");
    assert!(text.contains("tma_heavy_operations") && text.contains("tma_memory_bound"), "{text}");
    let too_deep = tmetric(&[
        "--pmu-sim",
        "sapphirerapids",
        "--topdown",
        "--td-level",
        "9",
        "-a",
        "sleep",
        "0",
    ]);
    assert_eq!(too_deep.status.code(), Some(2));
    assert!(stderr(&too_deep).contains("TopdownL1 to TopdownL6"), "{}", stderr(&too_deep));
}

#[test]
fn metric_only_intervals_repeat_the_header_and_csv_names_the_time_column() {
    let out =
        tmetric(&["--pmu-sim", "sapphirerapids", "--topdown", "-a", "-I", "10", "sleep", "0.6"]);
    let text = stderr(&out);
    let headers = text.lines().filter(|l| l.contains("%  tma_retiring")).count();
    let rows =
        text.lines().filter(|l| l.trim_start().starts_with(|c: char| c.is_ascii_digit())).count();
    assert!(rows > 26, "{rows} rows\n{text}");
    // perf's print_header: `if (num_print_iv++ == 25) num_print_iv = 0;` repeats the header
    // every 26 intervals, not 25 (a loaded machine giving 51 or 52 rows told them apart).
    assert_eq!(headers, rows.div_ceil(26), "{text}");
    let out = tmetric(&[
        "--pmu-sim",
        "sapphirerapids",
        "--topdown",
        "-a",
        "-I",
        "100",
        "-x",
        ",",
        "sleep",
        "0.25",
    ]);
    let text = stderr(&out);
    let header = text.lines().find(|l| l.starts_with("time,")).unwrap_or_else(|| panic!("{text}"));
    let fields = header.split(',').count();
    for line in text.lines().filter(|l| l.starts_with(|c: char| c.is_ascii_digit())) {
        assert_eq!(line.split(',').count(), fields, "{line}");
    }
}

#[test]
fn topdown_from_the_older_kernel_events_follows_seed_000() {
    // goldmont has no TopdownL metrics, and the simulated Skylake server's core PMU has the
    // kernel's topdown-* aliases: seed 000's per-core level 1.
    let per_task =
        tmetric(&["--pmu-sim", "skylakex", "--model", "goldmont", "--topdown", "sleep", "0"]);
    assert_eq!(per_task.status.code(), Some(2));
    assert!(stderr(&per_task).contains("add -a"), "{}", stderr(&per_task));
    let out = tmetric(&[
        "--pmu-sim",
        "skylakex",
        "--model",
        "goldmont",
        "--topdown",
        "-a",
        "-x",
        ",",
        "sleep",
        "0.1",
    ]);
    let text = stderr(&out);
    assert!(out.status.success(), "{text}");
    assert!(text.contains("the NMI watchdog is on"), "{text}");
    assert!(
        text.contains("core,cpus,retiring,bad speculation,frontend bound,backend bound"),
        "{text}"
    );
    let cores: Vec<&str> = text.lines().filter(|l| l.starts_with("S0-C")).collect();
    assert_eq!(cores.len(), 4, "{text}");
    for line in cores {
        // The five events are multiplexed (the watchdog holds a counter), so each is scaled
        // from a share of the time: backend bound is the remainder, and the four add up to
        // 100 unless a small negative remainder was clamped to 0.
        let v: Vec<f64> = line.split(',').skip(2).map(|x| x.parse().unwrap()).collect();
        let sum: f64 = v.iter().sum();
        assert!(
            (sum - 100.0).abs() < 1e-6 || (v[3] == 0.0 && (100.0..102.0).contains(&sum)),
            "{line}"
        );
        assert!(!line.contains("-0.0") && !line.contains(",-0,"), "{line}");
    }
}

#[test]
fn without_a_pmu_there_is_no_topdown() {
    if std::path::Path::new("/sys/bus/event_source/devices/cpu/type").exists() {
        return;
    }
    let out = tmetric(&["--topdown", "-a", "sleep", "0"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("System does not support topdown"), "{}", stderr(&out));
}

#[test]
fn thresholds_colour_values_only_when_asked_or_on_a_terminal() {
    let always = stderr(&tmetric(&[
        "--pmu-sim",
        "sapphirerapids",
        "-M",
        "TopdownL1",
        "-a",
        "--color",
        "always",
        "sleep",
        "0.1",
    ]));
    // Backend bound 29.8% crosses its 20% threshold: red; bad speculation 10.2% does not
    // cross 15%: green.
    let backend = always.lines().find(|l| l.contains("tma_backend_bound")).expect(&always);
    assert!(backend.contains("\x1b[31m"), "{backend:?}");
    let bad = always.lines().find(|l| l.contains("tma_bad_speculation")).expect(&always);
    assert!(bad.contains("\x1b[32m"), "{bad:?}");
    for args in [["--color", "never"], ["--color", "auto"]] {
        let mut all = vec!["--pmu-sim", "sapphirerapids", "-M", "TopdownL1", "-a"];
        all.extend_from_slice(&args);
        all.extend_from_slice(&["sleep", "0.1"]);
        let plain = stderr(&tmetric(&all));
        assert!(!plain.contains('\x1b'), "{args:?}: {plain:?}");
    }
}

#[test]
fn per_core_and_per_socket_evaluate_each_unit_and_cputype_filters_hybrids() {
    let out = tmetric(&[
        "--pmu-sim",
        "sapphirerapids",
        "-M",
        "TopdownL1",
        "-a",
        "--per-socket",
        "-x",
        ",",
        "sleep",
        "0.1",
    ]);
    let text = stderr(&out);
    assert!(out.status.success(), "{text}");
    let retiring: Vec<&str> = text.lines().filter(|l| l.contains("tma_retiring")).collect();
    assert_eq!(retiring.len(), 2, "two sockets: {text}");
    assert!(retiring.iter().all(|l| l.starts_with("S0,4,") || l.starts_with("S1,4,")), "{text}");
    let out = tmetric(&[
        "--pmu-sim",
        "sapphirerapids",
        "-M",
        "TopdownL1",
        "-a",
        "--per-core",
        "sleep",
        "0.1",
    ]);
    let text = stderr(&out);
    assert_eq!(text.lines().filter(|l| l.contains("tma_retiring")).count(), 4, "{text}");
    let out = tmetric(&[
        "--pmu-sim",
        "alderlake",
        "-M",
        "TopdownL1",
        "--cputype",
        "atom",
        "-a",
        "-v",
        "sleep",
        "0.1",
    ]);
    let text = stderr(&out);
    assert!(out.status.success(), "{text}");
    assert!(text.contains("cpu_atom/") && !text.contains("cpu_core/"), "{text}");
    assert!(text.contains("group 1: {"), "-v shows the groups: {text}");
    assert!(text.contains("its events count together"), "{text}");
    // Alder Lake's vendor tree has no counter.json: -v says the numbers are vendor defaults.
    assert!(text.contains("PMU cpu_atom: 6 general + 3 fixed counters (vendor default"), "{text}");
}

#[test]
fn tree_nests_children_hides_quiet_nodes_and_marks_the_bottleneck() {
    let out = tmetric(&[
        "--pmu-sim",
        "sapphirerapids",
        "-M",
        "TopdownL1,TopdownL2",
        "--tree",
        "-a",
        "sleep",
        "0.1",
    ]);
    let text = stderr(&out);
    assert!(out.status.success(), "{text}");
    let line =
        |name: &str| text.lines().find(|l| l.trim_start().starts_with(name)).map(str::to_string);
    // Level 2 is indented under level 1.
    let fetch = line("tma_fetch_latency").expect(&text);
    assert!(fetch.starts_with("  tma_fetch_latency"), "{fetch}");
    assert!(line("tma_frontend_bound").expect(&text).starts_with("tma_frontend_bound"));
    // Bad speculation (10%) is below its 15% threshold: hidden unless --all.
    assert!(line("tma_bad_speculation").is_none(), "{text}");
    let all = stderr(&tmetric(&[
        "--pmu-sim",
        "sapphirerapids",
        "-M",
        "TopdownL1,TopdownL2",
        "--tree",
        "--all",
        "-a",
        "sleep",
        "0.1",
    ]));
    assert!(all.contains("tma_bad_speculation"), "{all}");
    // The bottleneck path: one marked node per level, parents before children.
    let marked: Vec<&str> = text.lines().filter(|l| l.ends_with("<==")).collect();
    assert!(!marked.is_empty(), "{text}");
    assert!(!marked[0].starts_with(' '), "the path starts at level 1: {text}");
}

#[test]
fn metric_only_json_has_one_object_per_line() {
    let out = tmetric(&[
        "--pmu-sim",
        "sapphirerapids",
        "--topdown",
        "-a",
        "-j",
        "-I",
        "100",
        "sleep",
        "0.25",
    ]);
    let text = stderr(&out);
    let lines: Vec<serde_json::Value> = text
        .lines()
        .filter(|l| l.starts_with('{'))
        .map(|l| serde_json::from_str(l).expect(l))
        .collect();
    assert!(lines.len() >= 2, "{text}");
    // perf's metric-only JSON: `"label" : "value"` pairs after the interval, the values as
    // perf prints them (`%8.1f`).
    for line in &lines {
        assert!(line["interval"].as_f64().is_some(), "{line}");
        let metrics: Vec<(&String, f64)> = line
            .as_object()
            .unwrap()
            .iter()
            .filter(|(k, _)| k.starts_with("%  tma_"))
            .map(|(k, v)| (k, v.as_str().unwrap().parse().unwrap()))
            .collect();
        assert_eq!(metrics.len(), 4, "{line}");
        let sum: f64 = metrics.iter().map(|m| m.1).sum();
        assert!((sum - 100.0).abs() < 0.3, "{line}");
    }
}

#[test]
fn retire_latencies_come_from_a_file_or_a_clear_sampler_error() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("rl.json");
    std::fs::write(&file, r#"{"MEM_INST_RETIRED.STLB_HIT_LOADS": 7, "NOT_AN_EVENT": 3}"#).unwrap();
    let path = file.to_str().unwrap();
    let zero = stderr(&tmetric(&[
        "--pmu-sim",
        "meteorlake",
        "-M",
        "tma_load_stlb_hit",
        "-a",
        "sleep",
        "0.1",
    ]));
    assert!(zero.contains("read as 0") && zero.contains("tma_load_stlb_hit"), "{zero}");
    let out = tmetric(&[
        "--pmu-sim",
        "meteorlake",
        "-M",
        "tma_load_stlb_hit",
        "--retire-latency",
        path,
        "-a",
        "sleep",
        "0.1",
    ]);
    let text = stderr(&out);
    assert!(out.status.success(), "{text}");
    assert!(
        text.lines()
            .any(|l| l.trim_start().starts_with("7 cycles") && l.trim_end().ends_with("/R")),
        "{text}"
    );
    assert!(!text.contains("read as 0"), "{text}");
    assert!(text.contains("no selected metric reads NOT_AN_EVENT"), "{text}");
    let value = |t: &str| -> f64 {
        let line =
            t.lines().find(|l| l.contains("tma_load_stlb_hit") && l.contains(" # ")).unwrap();
        line.split('#').nth(1).unwrap().split_whitespace().next().unwrap().parse().unwrap()
    };
    assert_eq!(value(&zero), 0.0);
    assert!(value(&text) > 0.0, "{text}");
    std::fs::write(&file, r#"{"MEM_INST_RETIRED.STLB_HIT_LOADS": "fast"}"#).unwrap();
    let bad = tmetric(&[
        "--pmu-sim",
        "meteorlake",
        "-M",
        "tma_load_stlb_hit",
        "--retire-latency",
        path,
        "-a",
        "sleep",
        "0",
    ]);
    assert_eq!(bad.status.code(), Some(2));
    assert!(stderr(&bad).contains("must be a number of cycles"), "{}", stderr(&bad));
}

/// Per cpu_core CPU of the simulated Meteor Lake, the true rate of a `cpu_core` raw config.
fn mtl_rate(config: u64) -> f64 {
    use tmetric_runtime::Attr;
    use tmetric_sim::SimKernel;
    let kernel = SimKernel::for_model("meteorlake").expect("meteorlake");
    (0..4)
        .map(|cpu| match kernel.rate(&Attr { type_: 4, config, ..Attr::default() }, cpu) {
            Ok(rate) => rate.per_sec(0),
            other => panic!("{config:#x}: {other:?}"),
        })
        .sum()
}

/// `tmetric --pmu-sim meteorlake -M tma_dtlb_store --record-tpebs --tpebs-mode MODE -a
/// EXTRA sleep SECONDS`: the metric in percent (from `-j`) and the sample statistics line.
///
/// The simulator runs on the real clock, so a reader thread starved of CPU for longer than
/// its ring holds (about 0.3 s at 4000 samples/s) loses samples, which the run reports; on a
/// loaded test machine the run is then repeated (up to 3 times) for exact statistics.
fn dtlb_store_sampled(
    mode: &str,
    extra: &[&str],
    seconds: &str,
) -> (f64, serde_json::Value, String) {
    for _ in 0..2 {
        let run = dtlb_store_run(mode, extra, seconds);
        if run.1["lost"] == 0 {
            return run;
        }
        assert!(run.2.contains("were lost (the reader fell behind)"), "{}", run.2);
    }
    dtlb_store_run(mode, extra, seconds)
}

fn dtlb_store_run(mode: &str, extra: &[&str], seconds: &str) -> (f64, serde_json::Value, String) {
    let mut args = vec![
        "--pmu-sim",
        "meteorlake",
        "-M",
        "tma_dtlb_store",
        "--record-tpebs",
        "--tpebs-mode",
        mode,
        "-a",
    ];
    args.extend_from_slice(extra);
    args.extend_from_slice(&["sleep", seconds]);
    let out = tmetric(&args);
    let text = stderr(&out);
    assert!(out.status.success(), "{text}");
    let json: Vec<serde_json::Value> = text
        .lines()
        .filter(|l| l.starts_with('{'))
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    let stats = json.iter().find(|j| j.get("tpebs-event").is_some()).cloned().unwrap_or_default();
    let metric = json
        .iter()
        .find(|j| j["metric-unit"] == "%  tma_dtlb_store")
        .and_then(|j| j["metric-value"].as_str().and_then(|v| v.parse().ok()))
        .unwrap_or(f64::NAN);
    (metric, stats, text)
}

#[test]
fn sampled_retire_latency_on_simulated_meteor_lake_matches_the_profile() {
    // tma_dtlb_store = STLB_HIT_STORES * min(STLB_HIT_STORES:R, 7) / CPU_CLK_UNHALTED.THREAD
    //                  + DTLB_STORE_MISSES.WALK_ACTIVE / CPU_CLK_UNHALTED.DISTRIBUTED (SMT on)
    // over the cpu_core CPUs, from the profile's true rates (the run's length cancels).
    let stlb = mtl_rate(0x0ad0);
    let clks = mtl_rate(0x003c);
    let walk = mtl_rate(0x0100_1013);
    let distributed = mtl_rate(0x02ec);
    let expected = |latency: f64| 100.0 * (stlb * latency.min(7.0) / clks + walk / distributed);
    // The profile's period for STLB_HIT_STORES: 3 x 40, 60 x 3, 37 x 5 cycles, in that
    // order; the 97% tail mean over whole periods drops the 40s.
    let modes = [
        ("mean", 485.0 / 100.0),
        ("min", 3.0),
        ("max", 40.0),
        ("last", 5.0),
        ("p97", 365.0 / 97.0),
    ];
    let mut values = Vec::new();
    for (mode, latency) in modes {
        let (metric, stats, text) = dtlb_store_sampled(mode, &["-j"], "0.2");
        let want = expected(latency);
        assert!(((metric - want) / want).abs() < 1e-4, "{mode}: {metric} vs {want}\n{text}");
        // -j: the sample statistics, whole periods of 100 on each of the 4 cpu_core CPUs.
        assert_eq!(stats["tpebs-event"], "cpu_core/MEM_INST_RETIRED.STLB_HIT_STORES/R", "{text}");
        let samples = stats["samples"].as_u64().expect("samples");
        assert!(samples > 0 && samples.is_multiple_of(100), "{samples}\n{text}");
        assert_eq!(stats["lost"], 0, "{text}");
        // serde_json's default float parsing may be one ulp off the printed shortest form.
        for (key, want) in modes {
            let got = stats[key].as_f64().unwrap_or(f64::NAN);
            assert!((got - want).abs() < 1e-12, "{key}: {got} vs {want}\n{text}");
        }
        values.push(metric);
    }
    // The modes give different values, max capped at 7 cycles by the formula's min().
    // max > last > mean > p97 > min.
    for pair in [2, 3, 0, 4, 1].windows(2) {
        assert!(values[pair[0]] > values[pair[1]], "{values:?}");
    }
    // -v: the statistics in words, on standard error (repeated like the runs above when a
    // starved reader lost samples).
    let args = [
        "--pmu-sim",
        "meteorlake",
        "-M",
        "tma_dtlb_store",
        "--record-tpebs",
        "-v",
        "-a",
        "sleep",
        "0.3",
    ];
    let mut text = String::new();
    for _ in 0..3 {
        let out = tmetric(&args);
        text = stderr(&out);
        assert!(out.status.success(), "{text}");
        if !text.contains("were lost") {
            break;
        }
    }
    let line = text
        .lines()
        .find(|l| l.contains("retire latency of cpu_core/MEM_INST_RETIRED.STLB_HIT_STORES/R:"))
        .unwrap_or_else(|| panic!("{text}"));
    assert!(
        line.contains("(0 lost), mean 4.8, min 3.0, max 40.0, last 5.0, p97 (mean of the lowest 97%) 3.8 cycles"),
        "{line}"
    );
}

#[test]
fn each_interval_uses_its_own_simulated_samples() {
    // -I 200 over 0.5 s (the last interval about 100 ms): every interval has whole periods of
    // samples (one every 25 ms per CPU), so each interval's 97% mean is the profile's 365/97
    // cycles.
    let (stlb, clks) = (mtl_rate(0x0ad0), mtl_rate(0x003c));
    let (walk, distributed) = (mtl_rate(0x0100_1013), mtl_rate(0x02ec));
    let want = 100.0 * (stlb * (365.0 / 97.0) / clks + walk / distributed);
    let (_, stats, text) = dtlb_store_sampled("p97", &["-j", "-I", "200"], "0.5");
    let values: Vec<f64> = text
        .lines()
        .filter(|l| l.starts_with('{') && l.contains("\"interval\""))
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|j| j["metric-unit"] == "%  tma_dtlb_store")
        .map(|j| j["metric-value"].as_str().unwrap().parse().unwrap())
        .collect();
    assert!(values.len() >= 3, "{text}");
    for v in &values {
        assert!(((v - want) / want).abs() < 1e-4, "{v} vs {want}\n{text}");
    }
    assert_eq!(stats["lost"], 0, "{text}");
}

#[test]
fn a_workload_on_the_simulated_hybrid_is_sampled_on_its_core_cpus() {
    // Without -a the sampler follows the task, per CPU of cpu_core only (the simulated kernel
    // refuses cpu_core on the E-cores, as Linux does).
    let out = tmetric(&[
        "--pmu-sim",
        "meteorlake",
        "-M",
        "tma_dtlb_store",
        "--record-tpebs",
        "-j",
        "sleep",
        "0.3",
    ]);
    let text = stderr(&out);
    assert!(out.status.success(), "{text}");
    let stats: serde_json::Value = text
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .find(|j| j.get("tpebs-event").is_some())
        .unwrap_or_else(|| panic!("{text}"));
    let samples = stats["samples"].as_u64().unwrap();
    assert!(samples > 0 && samples.is_multiple_of(100), "{text}");
    if stats["lost"] == 0 {
        assert!((stats["mean"].as_f64().unwrap() - 4.85).abs() < 1e-12, "{text}");
    }
}

/// Issue 24 item 3: with `-C` on a hybrid machine's E-core, the P-core PMU's events are never
/// opened: they are not printed as `<not counted>`, and the notes say why (no "never ran on
/// a counter"); the E-core's metrics print, named with their PMU.
#[test]
fn cpu_lists_of_one_core_type_show_only_that_types_events() {
    let out = tmetric(&["--pmu-sim", "alderlake", "-M", "TopdownL1", "-C", "7", "sleep", "0.1"]);
    let text = stderr(&out);
    assert!(out.status.success(), "{text}");
    let counts = text.split(" Notes:").next().unwrap();
    assert!(!counts.contains("cpu_core/"), "{text}");
    assert!(!counts.contains("<not counted>"), "{text}");
    assert!(counts.contains("tma_retiring (cpu_atom)"), "{text}");
    assert!(!text.contains("never ran on a counter"), "{text}");
    assert!(
        text.contains("none of the CPUs counted has their PMU (they count on CPUs 0-3 only)"),
        "{text}"
    );
    // Only P-core events asked for on an E-core: nothing to print, said, not an empty reason.
    let out = tmetric(&[
        "--pmu-sim",
        "alderlake",
        "--cputype",
        "core",
        "-e",
        "cycles",
        "-C",
        "7",
        "sleep",
        "0.1",
    ]);
    let text = stderr(&out);
    assert!(text.contains("cpu_core/cycles/: not counted and not shown"), "{text}");
    assert!(!text.contains("nothing could be counted: \n"), "{text}");
}

/// `-j` metric lines of a run: (name, printed value).
fn json_metrics(text: &str) -> Vec<(String, f64)> {
    text.lines()
        .filter(|l| l.starts_with('{'))
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter_map(|v| {
            // `--full-metrics` names the metric; perf's layout puts it after the unit. A
            // hybrid machine's names carry their PMU: the truth is per name.
            let name = match v.get("metric-name").and_then(|n| n.as_str()) {
                Some(name) => name.to_string(),
                None => v.get("metric-unit")?.as_str()?.rsplit("  ").next()?.to_string(),
            };
            let name = name.split(" (cpu_").next()?.to_string();
            let value = v.get("metric-value")?.as_str()?.parse::<f64>().ok()?;
            Some((name, value))
        })
        .collect()
}

/// The tree groups each simulated machine's catalogue model has.
const TREE_GROUPS: &[(&str, &[&str])] = &[
    (
        "sapphirerapids",
        &["TopdownL1", "TopdownL2", "TopdownL3", "TopdownL4", "TopdownL5", "TopdownL6"],
    ),
    ("icelake", &["TopdownL1", "TopdownL2", "TopdownL3", "TopdownL4", "TopdownL5", "TopdownL6"]),
    ("skylakex", &["TopdownL1", "TopdownL2", "TopdownL3", "TopdownL4", "TopdownL5", "TopdownL6"]),
    (
        "skylakex-nosmt",
        &["TopdownL1", "TopdownL2", "TopdownL3", "TopdownL4", "TopdownL5", "TopdownL6"],
    ),
    ("alderlake", &["TopdownL1", "TopdownL2", "TopdownL3", "TopdownL4", "TopdownL5", "TopdownL6"]),
    ("meteorlake", &["TopdownL1", "TopdownL2", "TopdownL3", "TopdownL4", "TopdownL5", "TopdownL6"]),
    ("amdzen4", &["PipelineL1", "PipelineL2"]),
    ("neoverse-n2", &["TopdownL1"]),
];

/// Every tree level on every simulated machine, as `tmetric --pmu-sim MODEL -M TopdownLN -a`
/// prints it (multiplexed where the level needs more counters than the machine has): every
/// value within its valid range and equal to the truth the simulator derived from its
/// workload (for a metric of a hybrid's two core types, one of the two truths), up to the
/// multiplexing error of a constant workload.
///
/// `cargo test` runs a representative subset (every level of one machine, one or two of the
/// others); `TMETRIC_SIM_SWEEP=1` runs every machine and level.
#[test]
fn every_tree_level_on_every_simulated_machine_is_in_range_and_true() {
    use tmetric_sim::{Derivation, Machine, Workload};
    const SUBSET: &[(&str, &str)] = &[
        ("icelake", "TopdownL3"),
        ("skylakex", "TopdownL4"),
        ("skylakex-nosmt", "TopdownL2"),
        ("alderlake", "TopdownL2"),
        ("alderlake", "TopdownL5"),
        ("meteorlake", "TopdownL6"),
        ("amdzen4", "PipelineL2"),
        ("neoverse-n2", "TopdownL1"),
    ];
    let sweep = std::env::var_os("TMETRIC_SIM_SWEEP").is_some();
    let workload = Workload::default_workload();
    let mut checked = 0;
    for (name, groups) in TREE_GROUPS {
        let machine = Machine::named(name).expect("machine");
        let derivation = Derivation::of(&machine, &workload);
        for group in *groups {
            if !sweep && *name != "sapphirerapids" && !SUBSET.contains(&(*name, *group)) {
                continue;
            }
            // Long enough for every group of the deepest levels to run on every CPU (20
            // groups rotate every 4 ms).
            // Meteor Lake's formulas read sampled retire latencies (`:R`).
            let mut args = vec!["--pmu-sim", name, "-M", group, "-a", "-j", "--full-metrics"];
            if *name == "meteorlake" && ["TopdownL4", "TopdownL5"].contains(group) {
                args.push("--record-tpebs");
            }
            args.extend(["sleep", "0.3"]);
            let out = tmetric(&args);
            let text = stderr(&out);
            assert!(out.status.success(), "{name} {group}: {text}");
            let printed = json_metrics(&text);
            assert!(!printed.is_empty(), "{name} {group}: {text}");
            for (metric, value) in printed {
                let truths: Vec<_> = derivation.report[0]
                    .iter()
                    .filter(|t| t.name == metric && t.available)
                    .collect();
                assert!(!truths.is_empty(), "{name} {group}: {metric} has no truth");
                let in_range = truths.iter().any(|t| {
                    value >= t.range.0 * t.scale - 1e-9 && value <= t.range.1 * t.scale + 1e-9
                });
                assert!(in_range, "{name} {group}: {metric} = {value} out of range");
                // Levels that need more counters than the machine has are multiplexed; each
                // CPU's count is scaled to its own time and metrics spread over groups are
                // brought to one span (`Plan::common_span`), so under load (the tool
                // preempted between ioctls) the value stays within rounding of the truth.
                let true_value = truths.iter().any(|t| {
                    let want = t.value * t.scale;
                    (value - want).abs() <= 1e-2 * want.abs() + 0.05
                });
                assert!(
                    true_value,
                    "{name} {group}: {metric} = {value}, the truth is {:?}",
                    truths.iter().map(|t| t.value * t.scale).collect::<Vec<_>>()
                );
                checked += 1;
            }
        }
    }
    assert!(checked > if sweep { 600 } else { 200 }, "{checked} values checked");
}

/// `-M tma_dtlb_store` equals the workload's truth (the default workload names it: 0.8 % of
/// slots) on Meteor Lake (with sampled retire latencies, which its formula reads), Alder Lake
/// and Sapphire Rapids.
#[test]
fn dtlb_store_equals_the_workloads_truth() {
    use tmetric_sim::{Derivation, Machine, Workload};
    let workload = Workload::default_workload();
    for (name, extra) in
        [("meteorlake", &["--record-tpebs"][..]), ("alderlake", &[]), ("sapphirerapids", &[])]
    {
        let machine = Machine::named(name).expect("machine");
        let truth = Derivation::of(&machine, &workload);
        let core = if name == "sapphirerapids" { "default_core" } else { "cpu_core" };
        let truth = truth.truth(0, "tma_dtlb_store", core).expect("a truth");
        assert!(truth.met(), "{name}: the simulator meets the workload's {:?}", truth.target);
        assert!((truth.value - 0.008).abs() < 1e-9, "{name}: {}", truth.value);
        let mut args =
            vec!["--pmu-sim", name, "-M", "tma_dtlb_store", "-a", "-j", "--full-metrics"];
        args.extend_from_slice(extra);
        args.extend(["sleep", "0.1"]);
        let out = tmetric(&args);
        let text = stderr(&out);
        assert!(out.status.success(), "{name}: {text}");
        let values: Vec<f64> = json_metrics(&text)
            .into_iter()
            .filter(|m| m.0 == "tma_dtlb_store")
            .map(|m| m.1)
            .collect();
        assert!(!values.is_empty(), "{name}: {text}");
        for v in values {
            assert!(
                (v - 0.8).abs() < 1e-3,
                "{name}: tma_dtlb_store {v} % vs the truth 0.8 %\n{text}"
            );
        }
    }
}

/// `--pmu-sim-workload` runs another workload (built in or a file), and a bad file is named
/// with its line and what is wrong.
#[test]
fn simulated_machines_run_the_workload_given() {
    let out = tmetric(&[
        "--pmu-sim",
        "sapphirerapids",
        "--pmu-sim-workload",
        "memory-bound",
        "-M",
        "TopdownL2",
        "-a",
        "-j",
        "sleep",
        "0.05",
    ]);
    let text = stderr(&out);
    assert!(out.status.success(), "{text}");
    let memory = json_metrics(&text).into_iter().find(|m| m.0 == "tma_memory_bound").expect(&text);
    assert!((memory.1 - 48.0).abs() < 1e-3, "{text}");
    let temp = tempfile::tempdir().unwrap();
    let bad = temp.path().join("bad.json");
    std::fs::write(&bad, "{\n  \"ipc\": 1.5,\n  \"topdown\": { \"tma_retiring\": 140 }\n}\n")
        .unwrap();
    let out = tmetric(&[
        "--pmu-sim",
        "sapphirerapids",
        "--pmu-sim-workload",
        bad.to_str().unwrap(),
        "-M",
        "TopdownL1",
        "-a",
        "sleep",
        "0.01",
    ]);
    assert_eq!(out.status.code(), Some(2));
    let text = stderr(&out);
    assert!(text.contains("bad.json:3: `tma_retiring`: 140 % is not in 0..=100"), "{text}");
    std::fs::write(&bad, "{\"ipc\": 1.5,\n \"topdwn\": {}}").unwrap();
    let text = stderr(&tmetric(&[
        "--pmu-sim",
        "sapphirerapids",
        "--pmu-sim-workload",
        bad.to_str().unwrap(),
        "-a",
        "sleep",
        "0.01",
    ]));
    assert!(text.contains("bad.json:2:9: unknown field `topdwn`"), "{text}");
}

/// One of perf 6.12's relationship rules (tools/perf/tests/shell/lib/
/// perf_metric_validation_rules.json): `lower <= Σ sign * metric <= upper`, bounds a number or
/// another metric, within `tolerance` (percentage points; relative to a bound other than 100).
struct Rule {
    terms: &'static [(f64, &'static str)],
    lower: Bound,
    upper: Bound,
    tolerance: f64,
}

#[derive(Clone, Copy)]
enum Bound {
    Value(f64),
    Metric(&'static str),
    Open,
}

/// perf's rules 1-17, as its validator reads them (`RelationshipTest` and the explicit
/// `SingleMetricTest`s); the percentage rule and the non-negative rule are checked apart.
const RULES: &[Rule] = &[
    Rule {
        terms: &[(1.0, "pmem_memory_bandwidth_read"), (1.0, "pmem_memory_bandwidth_write")],
        lower: Bound::Metric("pmem_memory_bandwidth_total"),
        upper: Bound::Metric("pmem_memory_bandwidth_total"),
        tolerance: 5.0,
    },
    Rule {
        terms: &[(1.0, "memory_bandwidth_read"), (1.0, "memory_bandwidth_write")],
        lower: Bound::Metric("memory_bandwidth_total"),
        upper: Bound::Metric("memory_bandwidth_total"),
        tolerance: 5.0,
    },
    Rule {
        terms: &[
            (1.0, "numa_reads_addressed_to_local_dram"),
            (1.0, "numa_reads_addressed_to_remote_dram"),
        ],
        lower: Bound::Value(100.0),
        upper: Bound::Value(100.0),
        tolerance: 5.0,
    },
    Rule { terms: &[(1.0, "cpi")], lower: Bound::Value(0.125), upper: Bound::Open, tolerance: 5.0 },
    Rule {
        terms: &[
            (1.0, "tma_frontend_bound"),
            (1.0, "tma_bad_speculation"),
            (1.0, "tma_backend_bound"),
            (1.0, "tma_retiring"),
        ],
        lower: Bound::Value(100.0),
        upper: Bound::Value(100.0),
        tolerance: 5.0,
    },
    Rule {
        terms: &[(1.0, "tma_fetch_latency"), (1.0, "tma_fetch_bandwidth")],
        lower: Bound::Metric("tma_frontend_bound"),
        upper: Bound::Metric("tma_frontend_bound"),
        tolerance: 5.0,
    },
    Rule {
        terms: &[(1.0, "tma_branch_mispredicts"), (1.0, "tma_machine_clears")],
        lower: Bound::Metric("tma_bad_speculation"),
        upper: Bound::Metric("tma_bad_speculation"),
        tolerance: 5.0,
    },
    Rule {
        terms: &[(1.0, "tma_memory_bound"), (1.0, "tma_core_bound")],
        lower: Bound::Metric("tma_backend_bound"),
        upper: Bound::Metric("tma_backend_bound"),
        tolerance: 5.0,
    },
    Rule {
        terms: &[(1.0, "tma_light_operations"), (1.0, "tma_heavy_operations")],
        lower: Bound::Metric("tma_retiring"),
        upper: Bound::Metric("tma_retiring"),
        tolerance: 5.0,
    },
    Rule {
        terms: &[
            (1.0, "memory_page_empty_vs_all_requests"),
            (1.0, "memory_page_misses_vs_all_requests"),
            (1.0, "memory_page_hits_vs_all_requests"),
        ],
        lower: Bound::Value(100.0),
        upper: Bound::Value(100.0),
        tolerance: 5.0,
    },
    Rule {
        terms: &[(1.0, "cpu_utilization"), (-1.0, "cpu_utilization_in_kernel_mode")],
        lower: Bound::Value(0.0),
        upper: Bound::Open,
        tolerance: 5.0,
    },
    Rule {
        terms: &[(1.0, "l2_mpi"), (-1.0, "l2_demand_data_read_mpi")],
        lower: Bound::Value(0.0),
        upper: Bound::Open,
        tolerance: 5.0,
    },
    Rule {
        terms: &[(1.0, "l2_mpi"), (-1.0, "l2_demand_code_mpi")],
        lower: Bound::Value(0.0),
        upper: Bound::Open,
        tolerance: 5.0,
    },
    Rule {
        terms: &[
            (1.0, "llc_data_read_mpi_demand_plus_prefetch"),
            (1.0, "llc_rfo_read_mpi_demand_plus_prefetch"),
            (1.0, "llc_code_read_mpi_demand_plus_prefetch"),
        ],
        lower: Bound::Metric("llc_mpi"),
        upper: Bound::Metric("llc_mpi"),
        tolerance: 5.0,
    },
    Rule {
        terms: &[(1.0, "uncore_freq")],
        lower: Bound::Value(0.0),
        upper: Bound::Value(8.0),
        tolerance: 0.0,
    },
    Rule {
        terms: &[(1.0, "cpu_operating_frequency")],
        lower: Bound::Value(0.0),
        upper: Bound::Value(8.0),
        tolerance: 0.0,
    },
];

/// Rule 5: ratios per instruction within [0, 1) (perf's tolerance 5 % of the bound).
const PER_INSTRUCTION: &[&str] = &[
    "loads_per_instr",
    "stores_per_instr",
    "l1d_mpi",
    "l1d_demand_data_read_hits_per_instr",
    "l1_i_code_read_misses_with_prefetches_per_instr",
    "l2_demand_data_read_hits_per_instr",
    "l2_mpi",
    "l2_demand_data_read_mpi",
    "l2_demand_code_mpi",
];

/// perf's skip list: metrics its validator does not check.
const SKIPPED: &[&str] = &[
    "tsx_aborted_cycles",
    "tsx_transactional_cycles",
    "c2_pkg_residency",
    "c6_pkg_residency",
    "c1_core_residency",
    "c6_core_residency",
    "tma_false_sharing",
    "tma_remote_cache",
    "tma_contested_accesses",
];

/// perf 6.12's metric validation (tools/perf/tests/shell/lib/perf_metric_validation.py and
/// its rules file) on every simulated Intel machine's output: every metric of the machine's
/// model counted system-wide, every value not negative (the positive-value test), every
/// percentage within 0..100 (within perf's tolerance of 5 points), and the relationship and
/// single-metric rules, with perf's bounds and tolerances, for the metrics the model has.
/// Every metric the machine can compute (its events exist there) has a value: uncore metrics
/// included, their events opened on every box as perf opens them.
#[test]
fn perfs_metric_validation_rules_hold_on_every_simulated_intel_machine() {
    use tmetric_sim::{Derivation, Machine, Workload};
    let workload = Workload::default_workload();
    let (mut rules_checked, mut checked) = (0, 0);
    for name in
        ["sapphirerapids", "icelake", "skylakex", "skylakex-nosmt", "alderlake", "meteorlake"]
    {
        let machine = Machine::named(name).expect("machine");
        let truth = Derivation::of(&machine, &workload);
        let model = tmetric_catalog::model(&machine.catalogue_model).expect("model");
        let mut names: Vec<&str> = model
            .metrics
            .iter()
            .filter(|m| !m.runtime_param && model.str(m.compat).is_empty())
            .map(|m| model.str(m.name))
            .filter(|n| truth.report[0].iter().any(|t| t.name == *n && t.available))
            .collect();
        names.sort_unstable();
        names.dedup();
        checked += values_in_range(name, model, &names);
        rules_checked += relationship_rules_hold(name, model, &names);
    }
    assert!(rules_checked >= 40, "{rules_checked} rule checks");
    assert!(checked >= 1500, "{checked} values checked");
    eprintln!("{checked} values and {rules_checked} rule checks");
}

/// Counts `metrics` system-wide for half a second on simulated machine `name` (`-j
/// --full-metrics`, then `flags`; `--record-tpebs` when they read retire latencies): the
/// output and each metric's values.
fn count_metrics(
    name: &str,
    metrics: &[&str],
    flags: &[&str],
    tpebs: bool,
) -> (String, std::collections::BTreeMap<String, Vec<f64>>) {
    let list = metrics.join(",");
    let mut args = vec!["--pmu-sim", name, "-M", &list, "-a", "-j", "--full-metrics"];
    args.extend(flags);
    if tpebs {
        args.push("--record-tpebs");
    }
    args.extend(["sleep", "0.5"]);
    let out = tmetric(&args);
    let text = stderr(&out);
    assert!(out.status.success(), "{name}: {text}");
    let values = metric_values(&text);
    (text, values)
}

/// Each metric's values in a `-j --full-metrics` run's output, by lower-case name.
fn metric_values(text: &str) -> std::collections::BTreeMap<String, Vec<f64>> {
    json_metrics(text).into_iter().fold(Default::default(), |mut acc, (n, v)| {
        acc.entry(n.to_ascii_lowercase()).or_default().push(v);
        acc
    })
}

/// perf's positive-value and percentage tests on simulated machine `name`, every metric of
/// `names` counted at once: each has a value, none negative, percentages within 0..100 (5
/// points of tolerance), per-instruction ratios within 0..1. Returns the values checked.
fn values_in_range(name: &str, model: &'static tmetric_catalog::Model, names: &[&str]) -> usize {
    // -v: the notes too (JSON on standard error keeps them out unless asked).
    let (text, values) = count_metrics(name, names, &["-v"], name == "meteorlake");
    let mut checked = 0;
    // Every metric computable here has a value, not negative: uncore metrics too (their
    // events open on every box of their PMU, as perf's).
    for n in names {
        let lower = n.to_ascii_lowercase();
        let Some(got) = values.get(&lower) else {
            panic!("{name}: no value for {n}: {text}");
        };
        for v in got {
            assert!(v.is_finite() && *v >= 0.0, "{name}: {n} = {v}");
        }
        checked += got.len();
    }
    // Percentages within 0..100, within 5 points.
    for m in model.metrics {
        let unit = model.str(m.unit);
        let percent = matches!(model.str(m.unit), "%") && (m.scale == 1.0 || m.scale == 100.0);
        let lower = model.str(m.name).to_ascii_lowercase();
        if !percent || SKIPPED.contains(&lower.as_str()) {
            continue;
        }
        for v in values.get(&lower).into_iter().flatten().filter(|v| !v.is_nan()) {
            assert!((-5.0..=105.0).contains(v), "{name}: {lower} = {v} {unit}");
        }
    }
    for lower in PER_INSTRUCTION {
        for v in values.get(*lower).into_iter().flatten() {
            assert!((-0.05..=1.05).contains(v), "{name}: {lower} = {v}");
        }
    }
    checked
}

/// The metrics a relationship rule reads, its bounds' included.
fn rule_metrics(rule: &Rule) -> Vec<&'static str> {
    let mut metrics: Vec<&'static str> = rule.terms.iter().map(|(_, n)| *n).collect();
    for b in [rule.lower, rule.upper] {
        if let Bound::Metric(m) = b {
            metrics.push(m);
        }
    }
    metrics
}

/// perf's relationship rules whose metrics the model has (among `names`), on simulated
/// machine `name`. They are counted apart from the rest, as perf's collect_perf counts each
/// rule's metrics in a run of their own (with every metric at once, a group that misses a
/// CPU's slices skews the sums); all rules of a machine in one run to keep the test short;
/// the first value of a hybrid's core types, as perf keeps one per name. Returns the rules
/// checked.
fn relationship_rules_hold(
    name: &str,
    model: &'static tmetric_catalog::Model,
    names: &[&str],
) -> usize {
    let has = |m: &&str| names.iter().any(|n| n.eq_ignore_ascii_case(m));
    let rules: Vec<&Rule> =
        RULES.iter().filter(|rule| rule_metrics(rule).iter().all(has)).collect();
    let mut metrics: Vec<&str> = rules.iter().flat_map(|rule| rule_metrics(rule)).collect();
    metrics.sort_unstable();
    metrics.dedup();
    let (_, values) = count_metrics(name, &metrics, &[], reads_retire_latency(model, &metrics));
    let mut rules_checked = 0;
    for rule in rules {
        let first = |n: &str| values.get(n).and_then(|v| v.first().copied());
        let bound_value = |b: Bound, open: f64| match b {
            Bound::Value(v) => Some(v),
            Bound::Metric(m) => first(m),
            Bound::Open => Some(open),
        };
        let Some(sum) =
            rule.terms.iter().map(|(s, n)| first(n).map(|v| s * v)).sum::<Option<f64>>()
        else {
            continue;
        };
        let (Some(lo), Some(hi)) =
            (bound_value(rule.lower, f64::NEG_INFINITY), bound_value(rule.upper, f64::INFINITY))
        else {
            continue;
        };
        assert!(
            !(sum.is_nan() || lo.is_nan() || hi.is_nan()),
            "{name}: {:?} = {sum}, bounds [{lo}, {hi}]",
            rule.terms
        );
        // perf's denormalised tolerance: relative to the upper bound unless it is 100.
        let tolerance = if hi != 100.0 && hi > 0.0 && hi.is_finite() {
            rule.tolerance * hi / 100.0
        } else {
            rule.tolerance
        };
        assert!(
            sum >= lo - tolerance && sum <= hi + tolerance,
            "{name}: {:?} = {sum}, expected [{lo}, {hi}] within {tolerance}",
            rule.terms
        );
        rules_checked += 1;
    }
    rules_checked
}

/// The metrics of `model` (by name) that read an event of an uncore PMU, directly or through
/// the metrics they reference.
fn uncore_metrics(model: &'static tmetric_catalog::Model) -> Vec<&'static str> {
    use tmetric_catalog::IdKind;
    use tmetric_engine::Select;
    let uncore = |pmu: &str| {
        !["", "default_core", "cpu", "cpu_core", "cpu_atom", "msr", "power"].contains(&pmu)
            && !pmu.starts_with("cstate")
    };
    let mut names: Vec<&str> = (0..model.metrics.len())
        .filter(|&m| {
            model.closure(&[m]).iter().any(|&k| {
                model.metrics[k as usize].slots.iter().any(|&s| {
                    let id = &model.ids[s as usize];
                    match id.kind {
                        IdKind::Event(i) => uncore(model.str(model.events.at(i as usize).pmu)),
                        IdKind::Sysfs => uncore(model.str(id.pmu)),
                        _ => false,
                    }
                })
            })
        })
        .filter(|&m| model.str(model.metrics[m].compat).is_empty())
        .map(|m| model.str(model.metrics[m].name))
        .collect();
    names.sort_unstable();
    names.dedup();
    names
}

/// Metrics on uncore PMUs open their events on every box of the PMU (`uncore_cha` on
/// `uncore_cha_0`, `uncore_cha_1`; `cha_0` on `uncore_cha_0`) and read the boxes' sum, as
/// perf merges them, so they print the workload's truth on the server machines (the
/// simulated boxes count what the vendor formulas derive from it); the events print once,
/// merged, and once per box with `-A`.
#[test]
fn uncore_metrics_read_every_box_and_equal_the_truth() {
    use tmetric_sim::{Derivation, Machine, Workload};
    let workload = Workload::default_workload();
    let mut checked = 0;
    for name in ["sapphirerapids", "skylakex", "amdzen4"] {
        let machine = Machine::named(name).expect("machine");
        let derivation = Derivation::of(&machine, &workload);
        let model = tmetric_catalog::model(&machine.catalogue_model).expect("model");
        let names: Vec<&str> = uncore_metrics(model)
            .into_iter()
            .filter(|n| derivation.report[0].iter().any(|t| t.name == *n && t.available))
            .collect();
        assert!(names.len() >= 9, "{name}: {names:?}");
        let list = names.join(",");
        // One second: some formulas divide by a count rather than a rate
        // (`tma_info_system_mem_dram_read_latency` by `uncore_cha_0/event=0x1/`), and the
        // truth is the one-second view. The simulated kernel counts on the real clock, so a
        // run that a loaded machine stretches to `d` seconds moves such a metric by `d` or
        // `1/d`: `duration_time` says what `d` was.
        let out = tmetric(&[
            "--pmu-sim",
            name,
            "-M",
            &list,
            "-e",
            "duration_time",
            "-a",
            "-j",
            "--full-metrics",
            "sleep",
            "1",
        ]);
        let text = stderr(&out);
        assert!(out.status.success(), "{name}: {text}");
        let printed = json_metrics(&text);
        let seconds = text
            .lines()
            .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
            .find(|v| v["event"] == "duration_time")
            .and_then(|v| v["counter-value"].as_str()?.parse::<f64>().ok())
            .map(|ns| ns / 1e9)
            .expect("duration_time is printed");
        assert!((1.0..2.0).contains(&seconds), "{name}: sleep 1 took {seconds} s");
        for n in &names {
            let truth = derivation.report[0].iter().find(|t| t.name == *n && t.available);
            let want = truth.map(|t| t.value * t.scale).expect("a truth");
            let got: Vec<f64> =
                printed.iter().filter(|(m, _)| m.eq_ignore_ascii_case(n)).map(|m| m.1).collect();
            assert!(!got.is_empty(), "{name}: {n} printed no value: {text}");
            for v in got {
                // The truth of a rate, of a count over the run, or of a count's inverse.
                let near = [want, want * seconds, want / seconds]
                    .iter()
                    .any(|w| (v - w).abs() <= 3e-2 * w.abs() + 1e-6);
                assert!(near, "{name}: {n} = {v}, the truth is {want} (run {seconds} s)\n{text}");
                checked += 1;
            }
        }
        // No event line is a box's: each uncore event prints once, merged.
        assert!(!text.contains("[uncore_") && !text.contains("[amd_"), "{name}: {text}");
    }
    assert!(checked >= 40, "{checked} values checked");
}

/// `-e` with an uncore PMU or event name opens every box and prints one merged line, as perf
/// does; `-A` (and `--no-merge`) print each box on its own line under its own name, per CPU
/// of the PMU's cpumask; a metric's uncore input prints per box with its value per box.
#[test]
fn uncore_boxes_merge_into_one_line_unless_no_merge() {
    let merged = tmetric(&[
        "--pmu-sim",
        "sapphirerapids",
        "-e",
        "uncore_imc/cas_count_read/,cas_count_write",
        "-a",
        "-x,",
        "sleep",
        "0.2",
    ]);
    let text = stderr(&merged);
    assert!(merged.status.success(), "{text}");
    let rows: Vec<Vec<&str>> =
        text.lines().filter(|l| !l.starts_with('#')).map(|l| l.split(',').collect()).collect();
    let events: Vec<&str> = rows.iter().map(|r| r[2]).collect();
    assert_eq!(events, ["uncore_imc/cas_count_read/", "cas_count_write"], "{text}");
    let read: f64 = rows[0][0].parse().expect("a count");
    let per_box = tmetric(&[
        "--pmu-sim",
        "sapphirerapids",
        "-e",
        "uncore_imc/cas_count_read/,cas_count_write",
        "-A",
        "-x,",
        "sleep",
        "0.2",
    ]);
    let text = stderr(&per_box);
    assert!(!per_box.status.success(), "-A needs -a, as perf's: {text}");
    for flag in ["-A", "--no-merge"] {
        let out = tmetric(&[
            "--pmu-sim",
            "sapphirerapids",
            "-e",
            "uncore_imc/cas_count_read/,cas_count_write",
            flag,
            "-a",
            "-x,",
            "sleep",
            "0.2",
        ]);
        let text = stderr(&out);
        assert!(out.status.success(), "{text}");
        let lines: Vec<(String, String)> = text
            .lines()
            .filter(|l| !l.starts_with('#'))
            .map(|l| {
                let f: Vec<&str> = l.split(',').collect();
                (f[0].to_string(), f[3].to_string())
            })
            .collect();
        let want: Vec<(String, String)> = [
            ("CPU0", "uncore_imc_0/cas_count_read/"),
            ("CPU4", "uncore_imc_0/cas_count_read/"),
            ("CPU0", "uncore_imc_1/cas_count_read/"),
            ("CPU4", "uncore_imc_1/cas_count_read/"),
            ("CPU0", "cas_count_write [uncore_imc_0]"),
            ("CPU4", "cas_count_write [uncore_imc_0]"),
            ("CPU0", "cas_count_write [uncore_imc_1]"),
            ("CPU4", "cas_count_write [uncore_imc_1]"),
        ]
        .iter()
        .map(|(a, b)| (a.to_string(), b.to_string()))
        .collect();
        assert_eq!(lines, want, "{flag}: {text}");
        // Each box counts a quarter of the merged read count (two boxes, two packages).
        for l in text.lines().filter(|l| l.contains("cas_count_read")) {
            let v: f64 = l.split(',').nth(1).and_then(|c| c.parse().ok()).expect("a count");
            assert!((v - read / 4.0).abs() < 0.05 * read, "{flag}: {v} vs {read} / 4: {text}");
        }
    }
}

/// A metric on every box: one line merged; per box (`-A`), each box's line carries the metric
/// computed from that box (perf's `prepare_metric`), a quarter of the merged value on the
/// simulated Sapphire Rapids (two boxes, two packages).
#[test]
fn an_uncore_metric_prints_per_box_with_each_box_value() {
    let out = tmetric(&[
        "--pmu-sim",
        "sapphirerapids",
        "-M",
        "memory_bandwidth_read",
        "-A",
        "-a",
        "-j",
        "--full-metrics",
        "sleep",
        "0.2",
    ]);
    let text = stderr(&out);
    assert!(out.status.success(), "{text}");
    let boxes: Vec<(String, f64)> = text
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|v| v["event"].as_str().is_some_and(|e| e.starts_with("UNC_M_CAS_COUNT.RD")))
        .map(|v| {
            let event = v["event"].as_str().unwrap_or_default().to_string();
            (event, v["metric-value"].as_str().and_then(|m| m.parse().ok()).unwrap_or(f64::NAN))
        })
        .collect();
    let events: Vec<&str> = boxes.iter().map(|b| b.0.as_str()).collect();
    assert_eq!(
        events,
        [
            "UNC_M_CAS_COUNT.RD [uncore_imc_0]",
            "UNC_M_CAS_COUNT.RD [uncore_imc_0]",
            "UNC_M_CAS_COUNT.RD [uncore_imc_1]",
            "UNC_M_CAS_COUNT.RD [uncore_imc_1]"
        ],
        "{text}"
    );
    // One box on one CPU is a quarter of the machine's memory bandwidth.
    let merged = tmetric(&[
        "--pmu-sim",
        "sapphirerapids",
        "-M",
        "memory_bandwidth_read",
        "-a",
        "-j",
        "--full-metrics",
        "sleep",
        "0.2",
    ]);
    let total = json_metrics(&stderr(&merged))
        .into_iter()
        .find(|m| m.0 == "memory_bandwidth_read")
        .map(|m| m.1)
        .expect("a value");
    for (event, v) in &boxes {
        assert!((v - total / 4.0).abs() < 0.02 * total, "{event}: {v} vs {total} / 4: {text}");
    }
}

/// `--errors` puts each multiplexed metric's error bar on its JSON object (`metric-error`, in
/// the metric's printed unit) and beside its value in the default layout; metrics whose events
/// ran together the whole time have none; without `--errors` JSON has perf's keys only; CSV
/// (whose fields are perf's) gets the block of bars as comment lines.
#[test]
fn errors_show_beside_metrics_in_json_and_the_default_layout() {
    let run = |group: &str, extra: &[&str]| {
        let mut args =
            vec!["--pmu-sim", "sapphirerapids", "--pmu-sim-workload", "phased", "-M", group, "-a"];
        args.extend_from_slice(extra);
        args.extend(["sleep", "0.5"]);
        let out = tmetric(&args);
        let text = stderr(&out);
        assert!(out.status.success(), "{text}");
        text
    };
    let json = |text: &str| -> Vec<serde_json::Value> {
        text.lines().filter_map(|l| serde_json::from_str(l).ok()).collect()
    };
    // Level 1 fits the counters: exact, no bar.
    let l1 = json(&run("TopdownL1", &["-j", "--errors"]));
    assert!(l1.iter().any(|v| v.get("metric-value").is_some()));
    assert!(l1.iter().all(|v| v.get("metric-error").is_none()), "{l1:?}");
    // Level 3 is multiplexed: each metric has a bar, a number in its unit, smaller than
    // the value's range.
    let l3 = json(&run("TopdownL3", &["-j", "--errors", "--full-metrics"]));
    let bars: Vec<(&str, f64, f64)> = l3
        .iter()
        .filter_map(|v| {
            let name = v.get("metric-name")?.as_str()?;
            let value = v.get("metric-value")?.as_str()?.parse().ok()?;
            let error = v.get("metric-error")?.as_str()?.parse().ok()?;
            Some((name, value, error))
        })
        .collect();
    assert!(bars.len() >= 10, "{l3:?}");
    assert!(bars.iter().all(|&(_, _, e)| e > 0.0 && e < 50.0), "{bars:?}");
    let plain = json(&run("TopdownL3", &["-j"]));
    assert!(plain.iter().all(|v| v.get("metric-error").is_none()));
    // The default layout: `± x` after the label, in the value's decimals.
    let text = run("TopdownL3", &["--errors"]);
    let shown: Vec<&str> =
        text.lines().filter(|l| l.contains(" % ") && l.contains(" ± ")).collect();
    assert!(shown.len() >= 10, "{text}");
    assert!(
        shown.iter().all(|l| {
            let after = l.split(" ± ").nth(1).unwrap_or_default();
            let number = after.split_whitespace().next().unwrap_or_default();
            number.parse::<f64>().is_ok() && number.split('.').nth(1).is_some_and(|d| d.len() == 1)
        }),
        "{text}"
    );
    // CSV: perf's fields, the bars as a block of comment lines.
    let csv = run("TopdownL3", &["-x,", "--errors"]);
    assert!(!csv.lines().any(|l| !l.starts_with('#') && l.contains('±')), "{csv}");
    assert!(csv.lines().any(|l| l.starts_with("# Error bars (2 standard deviations")), "{csv}");
}

/// Whether a metric of `names` or one it references reads a retire latency (`:R`).
fn reads_retire_latency(model: &'static tmetric_catalog::Model, names: &[&str]) -> bool {
    use tmetric_engine::Select;
    let roots: Vec<usize> = names.iter().flat_map(|n| model.metrics_named(n)).collect();
    model.closure(&roots).iter().any(|&m| {
        model.metrics[m as usize].slots.iter().any(|&s| model.ids[s as usize].retire_latency)
    })
}

/// The hardware groups `tmetric stat -v` opened, as sorted sets of event names.
fn stat_groups(text: &str, hardware: &std::collections::BTreeSet<String>) -> Vec<Vec<String>> {
    let mut groups: Vec<Vec<String>> = text
        .lines()
        .filter_map(|l| l.split_once("group ").map(|(_, rest)| rest))
        .filter_map(|rest| rest.split_once(": {").map(|(_, g)| g.trim_end_matches('}')))
        .map(|g| {
            // `cpu/X,cmask=1/` holds commas: pieces join until their slashes pair up.
            let mut names: Vec<String> = Vec::new();
            let mut open = false;
            for piece in g.split(',') {
                match names.last_mut() {
                    Some(last) if open => {
                        last.push(',');
                        last.push_str(piece);
                    }
                    _ => names.push(piece.to_string()),
                }
                if piece.matches('/').count() % 2 == 1 {
                    open = !open;
                }
            }
            names.sort();
            names
        })
        .filter(|g| g.iter().any(|n| hardware.contains(n)))
        .collect();
    groups.sort();
    groups
}

/// The groups `tmetric plan --json` schedules, as sorted sets of event names, and every
/// hardware event's name.
fn plan_groups(doc: &serde_json::Value) -> (Vec<Vec<String>>, std::collections::BTreeSet<String>) {
    let names: Vec<String> = doc["events"]
        .as_array()
        .expect("events")
        .iter()
        .map(|e| e["name"].as_str().expect("name").to_string())
        .collect();
    let mut groups: Vec<Vec<String>> = doc["schedule"]["groups"]
        .as_array()
        .expect("groups")
        .iter()
        .map(|g| {
            let mut members: Vec<String> = g["events"]
                .as_array()
                .expect("events")
                .iter()
                .map(|i| names[i.as_u64().expect("index") as usize].clone())
                .collect();
            members.sort();
            members
        })
        .collect();
    groups.sort();
    (groups, names.into_iter().collect())
}

/// `tmetric plan --pmu-sim MODEL` plans what `tmetric stat --pmu-sim MODEL` opens: the same
/// literals and probes (a `has_event()` the machine answers no to, `#SMT_on`, `#has_pmem`),
/// so the same groups. `cargo test` compares a few groups per machine (the ones with probes
/// and literals among them); `TMETRIC_SIM_SWEEP=1` every metric group of every machine.
#[test]
fn plan_opens_what_stat_opens_on_every_simulated_machine() {
    let sweep = std::env::var_os("TMETRIC_SIM_SWEEP").is_some();
    let (mut compared, mut differing) = (0, Vec::new());
    for name in tmetric_sim::Machine::names() {
        let machine = tmetric_sim::Machine::named(name).expect("machine");
        let model = tmetric_catalog::model(&machine.catalogue_model).expect("model");
        let mut groups: Vec<String> = model
            .metrics
            .iter()
            .flat_map(|m| {
                model
                    .str(m.groups)
                    .split(';')
                    .filter(|g| !g.is_empty())
                    .map(String::from)
                    .collect::<Vec<_>>()
            })
            .collect();
        groups.sort();
        groups.dedup();
        if !sweep {
            // One group per machine: SPR's and SKX's `Summary` hold `has_event()` and
            // `#SMT_on`-dependent metrics.
            let keep = match *name {
                "sapphirerapids" | "skylakex" => "Summary",
                "icelake" => "TopdownL2",
                "meteorlake" => "TopdownL4",
                "amdzen4" => "PipelineL2",
                _ => "TopdownL1",
            };
            groups.retain(|g| g == keep);
        }
        for group in groups {
            let out = tmetric(&["plan", "--pmu-sim", name, "-M", &group, "--json"]);
            if !out.status.success() {
                continue;
            }
            let doc: serde_json::Value = serde_json::from_slice(&out.stdout).expect("plan --json");
            let (planned, hardware) = plan_groups(&doc);
            let out = tmetric(&["--pmu-sim", name, "-M", &group, "-a", "-v", "sleep", "0.01"]);
            let text = stderr(&out);
            assert!(out.status.success(), "{name} {group}: {text}");
            let opened = stat_groups(&text, &hardware);
            compared += 1;
            if planned != opened {
                differing.push(format!("{name} {group}:\n  plan {planned:?}\n  stat {opened:?}"));
            }
        }
    }
    assert!(compared >= if sweep { 500 } else { 8 }, "{compared} groups compared");
    assert!(
        differing.is_empty(),
        "{} of {compared} differ:\n{}",
        differing.len(),
        differing.join("\n")
    );
    eprintln!("{compared} metric groups planned and opened alike");
}

/// `tmetric plan --sysfs` needs a sysfs tree: a missing one is an error that names it, not
/// a plan for this machine.
#[test]
fn plan_refuses_a_missing_sysfs_tree() {
    let out = tmetric(&["plan", "--sysfs", "/nonexistent/sys", "-M", "TopdownL1"]);
    assert_eq!(out.status.code(), Some(2));
    let text = stderr(&out);
    assert!(
        text.contains(
            "--sysfs /nonexistent/sys: cannot read /nonexistent/sys/bus/event_source/devices"
        ),
        "{text}"
    );
    assert!(out.stdout.is_empty());
}

/// A `nan` or 0 that a fact of the machine decides, or a division by a counted 0, says why
/// without `-v`: the TSX metrics are 0 because the simulated machines have no `cycles-t`
/// (`has_event`), the PMM metrics 0 because they have no NFIT table (`#has_pmem`), and
/// `tma_info_botlnk_l2_dsb_bandwidth` is 0/0 on a workload without fetch bandwidth loss.
#[test]
fn a_nan_or_zero_from_a_fact_or_a_zero_divisor_prints_its_reason() {
    let out = tmetric(&[
        "--pmu-sim",
        "sapphirerapids",
        "-M",
        "tsx_transactional_cycles,tma_info_system_pmm_read_bw,tma_info_thread_ipc",
        "-a",
        "sleep",
        "0.01",
    ]);
    let text = stderr(&out);
    assert!(out.status.success(), "{text}");
    for note in [
        "tsx_transactional_cycles: 0 because has_event(cycles-t) is false: this machine has no `cycles-t` event",
        "tma_info_system_pmm_read_bw: 0 because #has_pmem is 0 on this machine: this machine has no persistent memory (no ACPI NFIT table)",
    ] {
        assert!(text.contains(note), "{note}\n{text}");
    }
    assert!(!text.contains("tma_info_thread_ipc:"), "a number needs no reason:\n{text}");
    let workload = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/sim/no-fetch-bandwidth.json");
    let out = tmetric(&[
        "--pmu-sim",
        "sapphirerapids",
        "--pmu-sim-workload",
        workload,
        "-M",
        "tma_info_botlnk_l2_dsb_bandwidth",
        "-a",
        "sleep",
        "0.01",
    ]);
    let text = stderr(&out);
    assert!(out.status.success(), "{text}");
    let note = "tma_info_botlnk_l2_dsb_bandwidth: nan (a division by zero): every input was counted, and tma_dsb, tma_mite are 0";
    assert!(text.contains(note), "{text}");
}
