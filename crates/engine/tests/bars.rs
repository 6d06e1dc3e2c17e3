//! Error bars and estimates under multiplexing, on the simulated kernel against the truth:
//! the kernel's fixed rotation against tmetric's own (turns of random length, a read at every
//! turn), on a workload whose phases repeat with the kernel's rotation period, where every
//! group of the kernel's rotation sees the same phase in every turn.

use tmetric_engine::{Bar, Strategy};
use tmetric_sim::SimWorkload;

use crate::harness::{Rotation, SimTree, measure_rotated, percent_metrics};

/// Compute and memory phases alternating every 4 ms: the kernel's rotation period at HZ 250,
/// so with an even number of groups each sees one phase only.
const ALTERNATING: &str = r#"{
  "description": "compute and memory phases alternating every 4 ms",
  "cycles_ghz": 2.5, "ref_ghz": 2.0, "tsc_ghz": 2.0, "cpu_step_percent": 5,
  "ipc": 1.6, "kernel_percent": 10, "package_watts": 50, "topdown": {},
  "phases": { "switch_every_ms": 4, "list": [
    { "name": "compute", "ipc": 2.6, "topdown": {
      "tma_frontend_bound": 10, "tma_fetch_latency": 5, "tma_bad_speculation": 5,
      "tma_branch_mispredicts": 4, "tma_backend_bound": 25, "tma_memory_bound": 2,
      "tma_core_bound": 23, "tma_retiring": 60, "tma_heavy_operations": 8 } },
    { "name": "memory", "ipc": 0.5, "topdown": {
      "tma_frontend_bound": 8, "tma_fetch_latency": 5, "tma_bad_speculation": 3,
      "tma_branch_mispredicts": 2, "tma_backend_bound": 69, "tma_memory_bound": 56,
      "tma_core_bound": 13, "tma_retiring": 20, "tma_heavy_operations": 4 } } ] }
}"#;

fn alternating() -> SimWorkload {
    SimWorkload::parse(ALTERNATING, "alternating").expect("the workload parses")
}

/// One metric measured: value, truth, bar, whether flagged impossible, `ScaleUnit` factor.
#[derive(Debug, Clone)]
struct Judged {
    name: String,
    value: f64,
    truth: f64,
    bar: Bar,
    flagged: bool,
    scale: f64,
}

impl Judged {
    /// The error in printed units (percentage points).
    fn error(&self) -> f64 {
        (self.value - self.truth).abs() * self.scale
    }

    /// Whether the truth is inside `k` standard deviations.
    fn within(&self, k: f64) -> bool {
        match self.bar {
            Bar::Sigma(s) => (self.value - self.truth).abs() <= k * s + 1e-9,
            bar => bar.covers(self.value, self.truth),
        }
    }
}

/// Counts `metrics` of `machine` (the `-M` item `item`) system-wide for `ms` of simulated
/// time on `workload`, rotated by `rotation` (the kernel's read every 100 ms), and judges each
/// value against the simulator's exact counts over the same span.
fn judge(
    machine: &'static str,
    item: &str,
    metrics: &[usize],
    workload: &SimWorkload,
    rotation: Rotation,
    ms: u64,
) -> Vec<Judged> {
    let tree = SimTree::new(machine);
    measure_rotated(&tree, item, metrics, Strategy::Tmetric, rotation, workload, ms, 100)
        .into_iter()
        .map(|m| Judged {
            name: tree.model.str(tree.model.metric(m.metric).name).to_string(),
            value: m.value,
            truth: m.truth,
            bar: m.bar,
            flagged: m.flagged,
            scale: m.scale,
        })
        .filter(|j| j.value.is_finite() && j.truth.is_finite())
        .collect()
}

fn mean_error(judged: &[Judged]) -> f64 {
    judged.iter().map(Judged::error).sum::<f64>() / judged.len() as f64
}

fn show(judged: &[Judged]) -> String {
    judged
        .iter()
        .map(|j| {
            let half = j.bar.half_width().map_or(f64::NAN, |h| h * j.scale);
            format!(
                "{} {:.2} ± {:.2} (truth {:.2}{})",
                j.name,
                j.value * j.scale,
                half,
                j.truth * j.scale,
                if j.flagged { ", flagged" } else { "" }
            )
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// The case the kernel's rotation gets confidently wrong: TopdownL2 on skylakex, phases
/// alternating every 4 ms. Under the kernel's rotation some value is far off and neither its
/// bar nor a flag says so; under tmetric's every value holds its truth in its bar or is
/// flagged.
#[test]
fn the_aliasing_case_holds_its_truth_in_the_bar_or_is_flagged() {
    let model = SimTree::new("skylakex").model;
    let metrics = percent_metrics(model, "TopdownL2");
    let workload = alternating();
    let kernel = judge("skylakex", "TopdownL2", &metrics, &workload, Rotation::Kernel, 1_000);
    let ours = judge("skylakex", "TopdownL2", &metrics, &workload, Rotation::Own, 1_000);
    eprintln!("kernel's rotation:\n{}\ntmetric's:\n{}", show(&kernel), show(&ours));
    assert!(ours.len() >= 6, "{}", show(&ours));
    let lied = kernel.iter().filter(|j| !j.within(2.0) && !j.flagged && j.error() > 1.0).count();
    assert!(lied > 0, "the kernel's rotation should mislead here:\n{}", show(&kernel));
    for j in &ours {
        assert!(j.within(2.0) || j.flagged, "{j:?}\n{}", show(&ours));
        assert!(matches!(j.bar, Bar::Sigma(_)), "multiplexed, so never exact: {j:?}");
    }
}

/// tmetric's own rotation is the better estimator where the kernel's aliases: on the
/// alternating workload its mean error against the truth is at most half the time-scaled
/// kernel rotation's, on two machines.
#[test]
fn own_rotation_beats_the_kernels_time_scaling_on_an_alternating_workload() {
    let workload = alternating();
    for (machine, item) in [("skylakex", "TopdownL2"), ("icelake", "TopdownL3")] {
        let model = SimTree::new(machine).model;
        let metrics = percent_metrics(model, item);
        let kernel = judge(machine, item, &metrics, &workload, Rotation::Kernel, 1_000);
        let ours = judge(machine, item, &metrics, &workload, Rotation::Own, 1_000);
        let (k, o) = (mean_error(&kernel), mean_error(&ours));
        // The shipped phased workload (random phases of 2-40 ms): the kernel's round robin
        // samples slow phases evenly and may err less there (measured, not asserted).
        let phased = SimWorkload::builtin("phased").expect("built in");
        let kp = mean_error(&judge(machine, item, &metrics, &phased, Rotation::Kernel, 1_000));
        let op = mean_error(&judge(machine, item, &metrics, &phased, Rotation::Own, 1_000));
        eprintln!("{machine} {item} phased: mean error own {op:.3} pp, kernel {kp:.3} pp");
        eprintln!("{machine} {item}: mean error own {o:.3} pp, kernel {k:.3} pp");
        assert!(o <= 0.5 * k, "{machine} {item}: own {o:.2} pp, kernel {k:.2} pp");
    }
}

/// Bars over tmetric's rotation hold the truth about as often as they claim: over the
/// alternating and the shipped phased workloads, at 1, 2 and 3 standard deviations.
#[test]
fn bars_hold_the_truth_as_often_as_they_claim() {
    // perf 6.12's tables: the bars' claimed and measured coverage were set on its formulas.
    tmetric_catalog::use_vintage(tmetric_catalog::base_vintage());
    let mut judged = Vec::new();
    for (machine, item) in [("skylakex", "TopdownL2"), ("icelake", "TopdownL3")] {
        let model = SimTree::new(machine).model;
        let metrics = percent_metrics(model, item);
        for workload in [alternating(), SimWorkload::builtin("phased").expect("built in")] {
            judged.extend(judge(machine, item, &metrics, &workload, Rotation::Own, 1_000));
        }
    }
    // The kernel's rotation on the same runs, for comparison (its bars cannot see aliasing).
    let mut kernel = Vec::new();
    for (machine, item) in [("skylakex", "TopdownL2"), ("icelake", "TopdownL3")] {
        let model = SimTree::new(machine).model;
        let metrics = percent_metrics(model, item);
        for workload in [alternating(), SimWorkload::builtin("phased").expect("built in")] {
            kernel.extend(judge(machine, item, &metrics, &workload, Rotation::Kernel, 1_000));
        }
    }
    let kreal: Vec<&Judged> =
        kernel.iter().filter(|j| matches!(j.bar, Bar::Sigma(s) if s > 0.0)).collect();
    let kshare = |k: f64| kreal.iter().filter(|j| j.within(k)).count() as f64 / kreal.len() as f64;
    eprintln!(
        "kernel's rotation: coverage over {} bars: {:.3} / {:.3} / {:.3}",
        kreal.len(),
        kshare(1.0),
        kshare(2.0),
        kshare(3.0)
    );
    let real: Vec<&Judged> =
        judged.iter().filter(|j| matches!(j.bar, Bar::Sigma(s) if s > 0.0)).collect();
    assert!(real.len() > 30, "{} real bars", real.len());
    let share = |k: f64| real.iter().filter(|j| j.within(k)).count() as f64 / real.len() as f64;
    let (one, two, three) = (share(1.0), share(2.0), share(3.0));
    eprintln!("coverage over {} bars: {one:.3} / {two:.3} / {three:.3}", real.len());
    assert!(two >= 0.85, "2 sigma: {two:.3}");
    assert!(three >= 0.95, "3 sigma: {three:.3}");
    assert!(one >= 0.5, "1 sigma: {one:.3}");
    // Nor far too wide: a bar that always holds the truth at 1 sigma overstates the error.
    assert!(one <= 0.9, "1 sigma: {one:.3}");
}

const CLAMPED: &str = r#"{
  "description": "light operations whose named kinds leave almost nothing to the other kinds",
  "cycles_ghz": 2.5, "ref_ghz": 2.0, "tsc_ghz": 2.0, "cpu_step_percent": 5,
  "ipc": 1.6, "kernel_percent": 10, "package_watts": 50, "topdown": {},
  "phases": { "switch_every_ms": 4, "list": [
    { "name": "compute", "ipc": 2.6, "topdown": {
      "tma_retiring": 60, "tma_heavy_operations": 10, "tma_light_operations": 50,
      "tma_fp_arith": 20, "tma_memory_operations": 15, "tma_fused_instructions": 5,
      "tma_non_fused_branches": 10, "tma_other_light_ops": 0 } },
    { "name": "memory", "ipc": 0.5, "topdown": {
      "tma_retiring": 20, "tma_heavy_operations": 4, "tma_light_operations": 16,
      "tma_fp_arith": 2, "tma_memory_operations": 10, "tma_fused_instructions": 1,
      "tma_non_fused_branches": 1, "tma_other_light_ops": 2 } } ] }
}"#;

/// `tma_other_light_ops` is `max(0, light - its named kinds)`: where the estimate falls below
/// 0 the clamp holds it at 0 and its gradient is 0, yet its inputs were multiplexed. Its bar
/// comes from the inputs' spread and reaches the truth on the clamp's other side.
#[test]
fn a_clamped_value_with_multiplexed_inputs_has_a_bar() {
    let workload = SimWorkload::parse(CLAMPED, "clamped").expect("the workload parses");
    let model = SimTree::new("skylakex-nosmt").model;
    let metrics = percent_metrics(model, "TopdownL3");
    let mut clamped = 0;
    // Short runs (few turns per group) leave the estimate room to fall below 0.
    for seed in 1..25 {
        let judged =
            judge("skylakex-nosmt", "TopdownL3", &metrics, &workload, Rotation::Seeded(seed), 150);
        let other = judged.iter().find(|j| j.name == "tma_other_light_ops").expect("measured");
        assert!(other.truth > 0.0, "{other:?}");
        if other.value != 0.0 {
            continue;
        }
        clamped += 1;
        assert!(matches!(other.bar, Bar::Sigma(s) if s > 0.0), "{other:?}");
        assert!(other.within(2.0), "{other:?}");
    }
    assert!(clamped > 0, "no run clamped the value: the test shows nothing");
}

/// The tree's constraints as a constrained estimate (in the spirit of BayesPerf): values moved
/// the least, weighted by their variances, so that TMA level 1 sums to 100 % and each parent
/// whose children (two or more) are all measured equals their sum (generalised least squares
/// onto `A v = b`, each value weighted by its bar's variance).
fn constrained(model: &'static tmetric_catalog::Model, judged: &[Judged]) -> Vec<f64> {
    let n = judged.len();
    let groups = |name: &str| -> &'static str {
        model.metrics().find(|m| model.str(m.name) == name).map_or("", |m| model.str(m.groups))
    };
    let mut rows: Vec<(Vec<f64>, f64)> = Vec::new();
    let level1: Vec<usize> =
        (0..n).filter(|&i| groups(&judged[i].name).split(';').any(|g| g == "TopdownL1")).collect();
    if level1.len() == 4 {
        let mut a = vec![0.0; n];
        for &i in &level1 {
            a[i] = 1.0;
        }
        rows.push((a, 1.0));
    }
    for p in 0..n {
        let family = format!("{}_group", judged[p].name);
        let all_children =
            model.metrics().filter(|m| model.str(m.groups).split(';').any(|g| g == family)).count();
        let children: Vec<usize> =
            (0..n).filter(|&c| groups(&judged[c].name).split(';').any(|g| g == family)).collect();
        // A single child is a share of its parent (`tma_other_mispredicts`), not a sum.
        if children.len() < 2 || children.len() != all_children {
            continue;
        }
        let mut a = vec![0.0; n];
        a[p] = -1.0;
        for &c in &children {
            a[c] = 1.0;
        }
        rows.push((a, 0.0));
    }
    let v: Vec<f64> = judged.iter().map(|j| j.value).collect();
    let var: Vec<f64> = judged
        .iter()
        .map(|j| match j.bar {
            Bar::Sigma(s) => (s * s).max(1e-12),
            _ => 1e-12,
        })
        .collect();
    let m = rows.len();
    if m == 0 {
        return v;
    }
    // (A S Aᵀ) x = A v - b, then v - S Aᵀ x.
    let mut mat = vec![0.0; m * (m + 1)];
    for r in 0..m {
        for c in 0..m {
            mat[r * (m + 1) + c] = (0..n).map(|k| rows[r].0[k] * var[k] * rows[c].0[k]).sum();
        }
        mat[r * (m + 1) + m] = (0..n).map(|k| rows[r].0[k] * v[k]).sum::<f64>() - rows[r].1;
    }
    for col in 0..m {
        let pivot = (col..m)
            .max_by(|&a, &b| mat[a * (m + 1) + col].abs().total_cmp(&mat[b * (m + 1) + col].abs()))
            .unwrap_or(col);
        for k in 0..=m {
            mat.swap(col * (m + 1) + k, pivot * (m + 1) + k);
        }
        let d = mat[col * (m + 1) + col];
        if d.abs() < 1e-300 {
            continue;
        }
        for r in 0..m {
            if r != col {
                let f = mat[r * (m + 1) + col] / d;
                for k in col..=m {
                    mat[r * (m + 1) + k] -= f * mat[col * (m + 1) + k];
                }
            }
        }
    }
    let x: Vec<f64> = (0..m)
        .map(|r| {
            let d = mat[r * (m + 1) + r];
            if d.abs() < 1e-300 { 0.0 } else { mat[r * (m + 1) + m] / d }
        })
        .collect();
    (0..n).map(|k| v[k] - var[k] * (0..m).map(|r| rows[r].0[k] * x[r]).sum::<f64>()).collect()
}

/// The tree's constraints measured as an estimator against time scaling, both over tmetric's
/// rotation, on the alternating and phased workloads, levels 1 to 3 together. Where the
/// vendor's formulas sum as the tree does (icelake: the truth moves less than 0.2 pp under
/// the constraints) the constrained estimate errs less; where they do not (skylakex: the
/// memory and core bound children's formulas miss their parents by up to 2.8 pp of the
/// truth) it adds that bias, and loses on the alternating workload. So the printed values
/// stay time-scaled over tmetric's rotation: the constraint is not true of every model.
#[test]
fn tree_constraints_help_only_where_the_vendor_formulas_sum() {
    // perf 6.12's tables: the bars' claimed and measured coverage were set on its formulas.
    tmetric_catalog::use_vintage(tmetric_catalog::base_vintage());
    for machine in ["skylakex", "icelake"] {
        let model = SimTree::new(machine).model;
        let mut metrics: Vec<usize> = ["TopdownL1", "TopdownL2", "TopdownL3"]
            .iter()
            .flat_map(|item| percent_metrics(model, item))
            .collect();
        metrics.sort_unstable();
        metrics.dedup();
        for (name, workload) in [
            ("alternating", alternating()),
            ("phased", SimWorkload::builtin("phased").expect("built in")),
        ] {
            let judged = judge(machine, "TopdownL3", &metrics, &workload, Rotation::Own, 1_000);
            let error = |values: &[f64]| {
                judged.iter().zip(values).map(|(j, &v)| (v - j.truth).abs() * j.scale).sum::<f64>()
                    / judged.len() as f64
            };
            let plain = mean_error(&judged);
            let tree = error(&constrained(model, &judged));
            // How far the constraints are from true: the truth itself, projected.
            let truths: Vec<Judged> =
                judged.iter().map(|j| Judged { value: j.truth, ..j.clone() }).collect();
            let moved = truths
                .iter()
                .zip(constrained(model, &truths))
                .map(|(j, v)| (v - j.truth).abs() * j.scale)
                .fold(0.0, f64::max);
            eprintln!(
                "{machine} L1-L3 {name}: time scaling {plain:.3} pp, tree-constrained {tree:.3} pp over {} values; the truth moves {moved:.2} pp",
                judged.len()
            );
            if machine == "icelake" {
                assert!(moved < 0.2, "{machine} {name}: the truth moves {moved} pp");
                // Where the anchor regression is already exact (two phases), the constraints
                // have nothing left to correct and may only move values by rounding.
                if plain > 0.02 {
                    assert!(tree < plain, "{machine} {name}: constrained {tree}, plain {plain}");
                } else {
                    assert!(tree < plain + 0.02, "{machine} {name}: constrained {tree}");
                }
            } else {
                assert!(moved > 1.0, "{machine} {name}: the truth moves {moved} pp");
            }
        }
    }
}

/// PERF_METRICS' 8-bit rounding is in the bar of a value read through it and only there: on
/// a steady workload (one share, so every read rounds alike) Ice Lake's `tma_retiring`, from
/// the `topdown-retiring` field, carries the spread of one rounding of the whole count (a
/// step is 0.39 pp: 0.39 / sqrt(12) = 0.11 pp), not divided among the reads; Skylake's, from
/// ordinary counters, carries only counting's own spread (hundredths of a point).
#[test]
fn only_perf_metrics_fields_carry_the_8_bit_rounding() {
    let workload = SimWorkload::builtin("default").expect("built in");
    let mut bars = Vec::new();
    for machine in ["icelake", "skylakex"] {
        let model = SimTree::new(machine).model;
        let metrics = percent_metrics(model, "TopdownL1");
        let judged = judge(machine, "TopdownL1", &metrics, &workload, Rotation::Own, 500);
        let retiring = judged.iter().find(|j| j.name == "tma_retiring").expect("tma_retiring");
        let Bar::Sigma(s) = retiring.bar else { panic!("{machine}: {:?}", retiring.bar) };
        bars.push(s * retiring.scale);
    }
    let step = 100.0 / 255.0 / 12f64.sqrt();
    assert!((bars[0] / step - 1.0).abs() < 0.2, "icelake: {} pp, half a step {step}", bars[0]);
    assert!(bars[1] < 0.2 * step, "skylakex: {} pp", bars[1]);
}
