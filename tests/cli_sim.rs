//! `tmetric stat --pmu-sim`: hardware metrics end to end on the simulated kernel, with the
//! numbers checked against the simulator's workload (its truth).
//!
//! This file holds what several of them read; the tests are by what they check: `bars`
//! (error bars and impossible values under multiplexing), `topdown`
//! (`--topdown` and level 1), `views` (colour, per-unit, tree, error bars, reasons), `machines`
//! (machine and workload choice, hybrids), `guest` (a guest without a virtual PMU), `tpebs` (retire latencies), `truth` (every tree level
//! against the workload), `validation` (perf's metric validation rules), `uncore` (boxes) and
//! `plan` (`plan` against what `stat` opens).

mod bars;
mod guest;
mod machines;
mod plan;
mod topdown;
mod tpebs;
mod truth;
mod uncore;
mod validation;
mod views;

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
