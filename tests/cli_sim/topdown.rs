//! `--topdown` and TopdownL1 on the simulated machines: level 1 sums to 100 and equals the
//! workload, the metric-only layout (intervals, CSV, JSON), the older topdown events, no PMU.

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
    // kernel's topdown-* aliases: the `--topdown` patch series' per-core level 1.
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
        // tmetric's warnings join CSV lines on standard error only when asked for.
        "-v",
        "sleep",
        "0.1",
    ]);
    let text = stderr(&out);
    assert!(out.status.success(), "{text}");
    assert!(text.contains("# tmetric: the NMI watchdog is on"), "{text}");
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
        .filter(|l| l.starts_with('{') && !l.contains("simulated-pmu"))
        .map(|l| serde_json::from_str(l).expect(l))
        .collect();
    assert!(lines.len() >= 2, "{text}");
    assert_eq!(text.lines().next(), Some(r#"{"simulated-pmu":"sapphirerapids"}"#), "{text}");
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
