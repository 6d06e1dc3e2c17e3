//! Retire latencies (TPEBS) on the simulated Meteor Lake: from a file or sampled
//! (`--record-tpebs`), each `--tpebs-mode` equal to the profile's, per interval and per task.

use crate::support::{stderr, tmetric};

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
