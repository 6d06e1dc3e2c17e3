//! Which simulated machine and workload run: unknown machines named, a machine file counted on
//! and a bad one named, a hybrid's two core types counted (and one of them alone with `-C`),
//! `--pmu-sim-workload` built in or from a file.

use crate::support::{stderr, tmetric};

use super::json_metrics;

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

/// `--pmu-sim FILE.json` counts on the machine a user's file describes (here Zen 5's file
/// under another name): PipelineL1 is the default workload's level 1.
#[test]
fn a_machine_file_is_counted_on() {
    let temp = tempfile::tempdir().unwrap();
    let path = temp.path().join("my-zen5.json");
    let (_, text) = tmetric_sim::MACHINE_FILES.iter().find(|(n, _)| *n == "amdzen5").unwrap();
    std::fs::write(&path, text.replace("\"name\": \"amdzen5\"", "\"name\": \"my-zen5\"")).unwrap();
    let path = path.display().to_string();
    let out = tmetric(&["--pmu-sim", &path, "-M", "PipelineL1", "-a", "-j", "sleep", "0.1"]);
    let text = stderr(&out);
    assert!(out.status.success(), "{text}");
    let printed = json_metrics(&text);
    // The default workload's level 1 in percent of dispatch slots.
    for (metric, want) in [
        ("frontend_bound", 20.0),
        ("bad_speculation", 10.0),
        ("backend_bound", 30.0),
        ("retiring", 40.0),
    ] {
        let value = printed.iter().find(|(m, _)| m == metric).map(|(_, v)| *v);
        assert!(value.is_some_and(|v| (v - want).abs() < 0.05), "{metric}: {value:?} in {text}");
    }
}

/// A machine file the simulator cannot take is an error naming the file, line and column
/// and what was expected; nothing is counted.
#[test]
fn a_bad_machine_file_is_named_with_its_line() {
    let temp = tempfile::tempdir().unwrap();
    let path = temp.path().join("zen6.json");
    let (_, text) = tmetric_sim::MACHINE_FILES.iter().find(|(n, _)| *n == "amdzen5").unwrap();
    let text = text.replace("\"Zen5\"", "\"Zen6\"");
    std::fs::write(&path, &text).unwrap();
    let line = text.lines().position(|l| l.contains("Zen6")).unwrap() + 1;
    let path = path.display().to_string();
    let out = tmetric(&["--pmu-sim", &path, "-M", "PipelineL1", "-a", "sleep", "0"]);
    assert_eq!(out.status.code(), Some(2));
    let err = stderr(&out);
    assert!(
        err.contains(&format!("--pmu-sim: {path}:{line}:"))
            && err.contains("unknown variant `Zen6`, expected one of `Skylake`"),
        "{err}"
    );
}

/// Issue 24 item 3: with `-C` on a hybrid machine's E-core, the P-core PMU's events are never
/// opened: they are not printed as `<not counted>`, and the notes say why (no "never ran on
/// a counter"); the E-core's metrics print, named with their PMU.
#[test]
fn cpu_lists_of_one_core_type_show_only_that_types_events() {
    let out = tmetric(&["--pmu-sim", "alderlake", "-M", "TopdownL1", "-C", "7", "sleep", "0.1"]);
    let text = stderr(&out);
    assert!(out.status.success(), "{text}");
    let counts = text.split(" seconds time elapsed").next().unwrap();
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

/// `-v` says how the simulated kernel multiplexes: the exact lockstep model at the machine's
/// HZ by default, or a workload's `kernel` object's HZ and realism.
#[test]
fn verbose_says_the_simulated_kernels_hz_and_realism() {
    let run = |workload: &str| {
        let out = tmetric(&[
            "--pmu-sim",
            "skylakex",
            "--pmu-sim-workload",
            workload,
            "-M",
            "TopdownL1",
            "-a",
            "-v",
            "sleep",
            "0.01",
        ]);
        let text = stderr(&out);
        assert!(out.status.success(), "{text}");
        text
    };
    let text = run("phased");
    assert!(
        text.contains("simulated PMU `skylakex`: kernel HZ 250, multiplexed groups rotate every 4 ms on every CPU in step"),
        "{text}"
    );
    let temp = tempfile::tempdir().unwrap();
    let file = temp.path().join("hz1000.json");
    std::fs::write(&file, r#"{ "kernel": { "hz": 1000, "realistic": true, "seed": 3 } }"#).unwrap();
    let text = run(file.to_str().unwrap());
    assert!(text.contains("kernel HZ 1000, multiplexed groups rotate every 1 ms, on the hrtimer grid since boot, timers up to 30 us late, each CPU at its own phase"), "{text}");
    assert!(text.contains("8-bit PERF_METRICS (seed 3)"), "{text}");
}
