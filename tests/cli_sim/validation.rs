//! perf 6.12's metric validation (positive values, percentages, relationship rules) on every
//! simulated Intel machine's output.

use crate::support::{stderr, tmetric};

use super::json_metrics;

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
    use tmetric_sim::{Derivation, Machine, SimWorkload};
    // perf 6.12's tables: under 7.2's, Alder Lake's `tma_bottleneck_*` metrics are NaN on the
    // simulator (the simulator's machines were built on 6.12's formulas).
    tmetric_catalog::use_vintage(tmetric_catalog::base_vintage());
    let workload = SimWorkload::default_workload();
    let (mut rules_checked, mut checked) = (0, 0);
    for name in
        ["sapphirerapids", "icelake", "skylakex", "skylakex-nosmt", "alderlake", "meteorlake"]
    {
        let machine = Machine::named(name).expect("machine");
        let truth = Derivation::of(&machine, &workload);
        let model = tmetric_catalog::model(&machine.catalogue_model).expect("model");
        let mut names: Vec<&str> = model
            .metrics()
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
    // The vintage of the truth this thread derived.
    let version = tmetric_catalog::vintage().version;
    let mut args = vec!["--perf-version", version, "--pmu-sim", name, "-M", &list, "-a", "-j"];
    args.push("--full-metrics");
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

/// Each metric's values with their error bars (`--errors`, half the bar's width; 0 where
/// none is printed), by lower-case name.
fn metric_bars(text: &str) -> std::collections::BTreeMap<String, Vec<(f64, f64)>> {
    let mut out: std::collections::BTreeMap<String, Vec<(f64, f64)>> = Default::default();
    for v in text.lines().filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok()) {
        let (Some(name), Some(value)) = (
            v.get("metric-name").and_then(|n| n.as_str()),
            v.get("metric-value").and_then(|x| x.as_str()?.parse::<f64>().ok()),
        ) else {
            continue;
        };
        let bar = v.get("metric-error").and_then(|e| e.as_str()?.parse::<f64>().ok());
        let name = name.split(" (cpu_").next().unwrap_or(name).to_ascii_lowercase();
        out.entry(name).or_default().push((value, bar.unwrap_or(0.0)));
    }
    out
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
    // -v: the notes too (JSON on standard error keeps them out unless asked). With every
    // metric at once the groups take turns, and a loaded machine gives each few of them: a
    // bound may be passed by what the value's error bar says it may be off, no more.
    let (text, values) = count_metrics(name, names, &["-v", "--errors"], name == "meteorlake");
    let bars = metric_bars(&text);
    // Three sigma (one and a half bars: a 2-sigma bar misses one value in twenty, and
    // hundreds are checked). A bar of `"nan"` is tmetric saying it cannot tell (multiplexed,
    // and the loaded run read the counters fewer than twice): it vouches for no bound.
    let bar = |lower: &str, v: f64| {
        let half =
            bars.get(lower).and_then(|b| b.iter().find(|(x, _)| *x == v)).map_or(0.0, |b| b.1);
        if half.is_nan() { f64::INFINITY } else { 1.5 * half }
    };
    let mut checked = 0;
    // Every metric computable here has a value, not negative: uncore metrics too (their
    // events open on every box of their PMU, as perf's).
    for n in names {
        let lower = n.to_ascii_lowercase();
        let Some(got) = values.get(&lower) else {
            panic!("{name}: no value for {n}: {text}");
        };
        for v in got {
            let slack = bar(&lower, *v);
            assert!(v.is_finite() && *v >= -slack, "{name}: {n} = {v} ± {slack}");
        }
        checked += got.len();
    }
    // Percentages within 0..100, within 5 points.
    for m in model.metrics() {
        let unit = model.str(m.unit);
        let percent = matches!(model.str(m.unit), "%") && (m.scale == 1.0 || m.scale == 100.0);
        let lower = model.str(m.name).to_ascii_lowercase();
        if !percent || SKIPPED.contains(&lower.as_str()) {
            continue;
        }
        for v in values.get(&lower).into_iter().flatten().filter(|v| !v.is_nan()) {
            let slack = 5.0 + bar(&lower, *v);
            assert!((-slack..=100.0 + slack).contains(v), "{name}: {lower} = {v} {unit}");
        }
    }
    for lower in PER_INSTRUCTION {
        for v in values.get(*lower).into_iter().flatten() {
            let slack = 0.05 + bar(lower, *v);
            assert!((-slack..=1.0 + slack).contains(v), "{name}: {lower} = {v}");
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

/// Whether a metric of `names` or one it references reads a retire latency (`:R`).
fn reads_retire_latency(model: &'static tmetric_catalog::Model, names: &[&str]) -> bool {
    use tmetric_engine::Select;
    let roots: Vec<usize> = names.iter().flat_map(|n| model.metrics_named(n)).collect();
    model.closure(&roots).iter().any(|&m| {
        model.metric(m as usize).slots.iter().any(|&s| model.ids[s as usize].retire_latency)
    })
}
