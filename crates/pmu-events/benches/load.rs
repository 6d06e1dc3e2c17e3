//! Benchmark: `load_tree` over the whole checked-in pmu-events tree, and perf's jevents.py over the
//! same tree in the same run when `TMETRIC_JEVENTS_DIR` names perf's `tools/perf/pmu-events`.
//!
//! Run with `cargo bench -p tmetric-pmu-events`. Without `--bench` (as under `cargo test --all-targets`)
//! it only loads the tree once as a smoke check.

use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

const RUNS: usize = 10;

fn main() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../pmu-events/arch");
    if !std::env::args().any(|arg| arg == "--bench") {
        let tree = tmetric_pmu_events::load_tree(&root).unwrap_or_else(|err| panic!("{err}"));
        assert!(!tree.arches.is_empty());
        return;
    }
    let mut times: Vec<Duration> = (0..=RUNS)
        .map(|_| {
            let start = Instant::now();
            let tree = tmetric_pmu_events::load_tree(&root).unwrap_or_else(|err| panic!("{err}"));
            let elapsed = start.elapsed();
            drop(tree);
            elapsed
        })
        .skip(1) // The first run warms the page cache.
        .collect();
    times.sort();
    let median = times[RUNS / 2];
    println!(
        "load_tree (whole tree, {RUNS} runs): min {:.1} ms, median {:.1} ms",
        ms(times[0]),
        ms(median)
    );

    let Some(jevents_dir) = std::env::var_os("TMETRIC_JEVENTS_DIR").map(PathBuf::from) else {
        println!("jevents.py not timed: set TMETRIC_JEVENTS_DIR to perf's tools/perf/pmu-events");
        return;
    };
    // jevents.py runs on its own copy of the tree: ours has `common/`, which it would take for an
    // architecture without a mapfile.
    let scratch =
        tempfile::Builder::new().prefix("tmetric-jevents-").tempdir().expect("a temp dir");
    let out = scratch.path().join("pmu-events.c");
    let start = Instant::now();
    let status = Command::new("python3")
        .arg(jevents_dir.join("jevents.py"))
        .args(["all", "all"])
        .arg(jevents_dir.join("arch"))
        .arg(&out)
        .status();
    let elapsed = start.elapsed();
    let _ = std::fs::remove_file(&out);
    match status {
        Ok(status) if status.success() => println!(
            "jevents.py all all: {:.0} ms, {:.0}x the load_tree median",
            ms(elapsed),
            elapsed.as_secs_f64() / median.as_secs_f64()
        ),
        other => println!("jevents.py could not run: {other:?}"),
    }
}

fn ms(duration: Duration) -> f64 {
    duration.as_secs_f64() * 1e3
}
