//! Uncore PMUs: metrics read every box and equal the truth, boxes merge into one line unless
//! `-A`/`--no-merge`, and a metric prints per box with each box's value.

use crate::support::{stderr, tmetric};

use super::json_metrics;

/// The metrics of `model` (by name) that read an event of an uncore PMU, directly or through
/// the metrics they reference.
fn uncore_metrics(model: &'static tmetric_catalog::Model) -> Vec<&'static str> {
    use tmetric_catalog::IdKind;
    use tmetric_engine::Select;
    let uncore = |pmu: &str| {
        !["", "default_core", "cpu", "cpu_core", "cpu_atom", "msr", "power"].contains(&pmu)
            && !pmu.starts_with("cstate")
    };
    let mut names: Vec<&str> = (0..model.metric_count())
        .filter(|&m| {
            model.closure(&[m]).iter().any(|&k| {
                model.metric(k as usize).slots.iter().any(|&s| {
                    let id = &model.ids[s as usize];
                    match id.kind {
                        IdKind::Event(i) => uncore(model.str(model.events.at(i as usize).pmu)),
                        IdKind::Sysfs => uncore(model.str(id.pmu)),
                        _ => false,
                    }
                })
            })
        })
        .filter(|&m| model.str(model.metric(m).compat).is_empty())
        .map(|m| model.str(model.metric(m).name))
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
    use tmetric_sim::{Derivation, Machine, SimWorkload};
    let workload = SimWorkload::default_workload();
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
        // perf 7.2's C-state metrics read the power control unit's PMU, which the kernel
        // makes on Sapphire Rapids (`uncore_pcu`, one box per package).
        if name == "sapphirerapids" {
            for pcu in ["cpu_cstate_c0", "cpu_cstate_c6"] {
                assert!(names.contains(&pcu), "{name}: {pcu} is not counted: {names:?}");
            }
        }
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
        // The counters count from before the workload starts to after it ends, a few
        // milliseconds beyond `duration_time` on an idle machine, tens on a loaded one: a
        // count's window is its own, the same for every count of the run.
        let mut windows: Vec<(String, f64)> = Vec::new();
        for n in &names {
            let truth = derivation.report[0].iter().find(|t| t.name == *n && t.available);
            let want = truth.map(|t| t.value * t.scale).expect("a truth");
            let got: Vec<f64> =
                printed.iter().filter(|(m, _)| m.eq_ignore_ascii_case(n)).map(|m| m.1).collect();
            assert!(!got.is_empty(), "{name}: {n} printed no value: {text}");
            for v in got {
                // The truth of a rate, or of a count over the run's window, or of a count's
                // inverse: the window that explains the value lies between the run and a
                // quarter of a second past it.
                let rate = (v - want).abs() <= 3e-2 * want.abs() + 1e-6;
                let window = [v / want, want / v]
                    .into_iter()
                    .find(|w| (0.99 * seconds..seconds + 0.25).contains(w));
                assert!(
                    rate || window.is_some(),
                    "{name}: {n} = {v}, the truth is {want} (run {seconds} s)\n{text}"
                );
                if let (false, Some(w)) = (rate, window) {
                    windows.push((n.to_string(), w));
                }
                checked += 1;
            }
        }
        // Every count and inverse of the run saw the same window, to 2 %.
        let least = windows.iter().map(|w| w.1).fold(f64::INFINITY, f64::min);
        assert!(
            windows.iter().all(|(_, w)| *w <= 1.02 * least),
            "{name}: the counts' windows differ: {windows:?}\n{text}"
        );
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
    // The simulated kernel counts on the real clock, so the two runs' counts are compared
    // per second of their own `duration_time` (a loaded machine stretches `sleep 0.2`).
    let seconds = |text: &str| -> f64 {
        let line = text.lines().find(|l| l.contains(",duration_time")).expect("duration_time");
        // Under `-A` a CPU column comes first.
        let mut fields = line.split(',').skip_while(|f| f.starts_with("CPU"));
        let ns: f64 = fields.next().and_then(|c| c.parse().ok()).expect("a count");
        ns / 1e9
    };
    let merged = tmetric(&[
        "--pmu-sim",
        "sapphirerapids",
        "-e",
        "uncore_imc/cas_count_read/,cas_count_write",
        "-e",
        "duration_time",
        "-a",
        "-x,",
        "sleep",
        "0.2",
    ]);
    let text = stderr(&merged);
    assert!(merged.status.success(), "{text}");
    let rows: Vec<Vec<&str>> = text
        .lines()
        .filter(|l| !l.starts_with('#') && !l.contains(",duration_time"))
        .map(|l| l.split(',').collect())
        .collect();
    let events: Vec<&str> = rows.iter().map(|r| r[2]).collect();
    assert_eq!(events, ["uncore_imc/cas_count_read/", "cas_count_write"], "{text}");
    let read: f64 = rows[0][0].parse::<f64>().expect("a count") / seconds(&text);
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
            "-e",
            "duration_time",
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
            .filter(|l| !l.starts_with('#') && !l.contains(",duration_time"))
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
        let run = seconds(&text);
        for l in text.lines().filter(|l| l.contains("cas_count_read")) {
            let count: f64 = l.split(',').nth(1).and_then(|c| c.parse().ok()).expect("a count");
            let v = count / run;
            assert!((v - read / 4.0).abs() < 0.05 * read, "{flag}: {v}/s vs {read}/s / 4: {text}");
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
