//! Accuracy against the truth on a simulated machine whose workload changes phases (the
//! representative case of `benches/accuracy.rs`): tmetric's schedule errs less than half as
//! much as perf 6.12's strategy, and the error bars hold the truth for at least 90 % of the
//! values (none for values whose inputs all ran the whole time).

use tmetric_engine::{Bar, Strategy};
use tmetric_sim::Workload;

use crate::harness::{SimTree, measure, percent_metrics};

/// Mean absolute error in percentage points and the share of values whose bar holds the
/// truth.
fn errors(measured: &[crate::harness::Measured]) -> (f64, f64, usize) {
    let kept: Vec<_> =
        measured.iter().filter(|m| m.value.is_finite() && m.truth.is_finite()).collect();
    let mean =
        kept.iter().map(|m| (m.value - m.truth).abs() * m.scale).sum::<f64>() / kept.len() as f64;
    let covered = kept.iter().filter(|m| m.bar.covers(m.value, m.truth)).count();
    (mean, covered as f64 / kept.len() as f64, kept.len())
}

#[test]
fn tmetric_errs_less_than_half_as_much_as_perf_and_its_bars_hold_the_truth() {
    let tree = SimTree::new("sapphirerapids");
    let workload = Workload::builtin("phased").expect("built in");
    let metrics = percent_metrics(tree.model, "TopdownL3");
    assert!(metrics.len() > 20, "{}", metrics.len());
    let ours = measure(&tree, "TopdownL3", &metrics, Strategy::Tmetric, &workload, 1_000, 100);
    let perf = measure(&tree, "TopdownL3", &metrics, Strategy::Perf, &workload, 1_000, 100);
    let (ours_mean, coverage, n) = errors(&ours);
    let (perf_mean, _, _) = errors(&perf);
    assert!(n > 20, "{n} values");
    assert!(perf_mean > 0.05, "the phases make perf's strategy err: {perf_mean} pp");
    assert!(ours_mean <= 0.5 * perf_mean, "tmetric {ours_mean} pp, perf {perf_mean} pp");
    assert!(coverage >= 0.9, "bars hold the truth for {:.1} %", 100.0 * coverage);
    // Multiplexed values have a bar (but for one that is 0 whatever its counts).
    let with_bar = ours.iter().filter(|m| matches!(m.bar, Bar::Sigma(s) if s > 0.0)).count();
    assert!(with_bar + 1 >= ours.len(), "{ours:?}");
    // Level 1 fits one group that runs the whole time: no bar, and exact.
    let level1 = measure(
        &tree,
        "TopdownL1",
        &percent_metrics(tree.model, "TopdownL1"),
        Strategy::Tmetric,
        &workload,
        300,
        100,
    );
    assert_eq!(level1.len(), 4);
    for m in level1 {
        assert_eq!(m.bar, Bar::Exact, "{m:?}");
        assert!((m.value - m.truth).abs() <= 1e-6 * m.truth.abs() + 1e-9, "{m:?}");
    }
}

/// A constant workload gives multiplexed counts nothing to miss: no error beyond rounding,
/// and bars that are tiny.
#[test]
fn a_constant_workload_leaves_nothing_to_miss() {
    let tree = SimTree::new("icelake");
    let workload = Workload::default_workload();
    let metrics = percent_metrics(tree.model, "TopdownL2");
    let ours = measure(&tree, "TopdownL2", &metrics, Strategy::Tmetric, &workload, 400, 100);
    for m in &ours {
        let e = (m.value - m.truth).abs() * m.scale;
        assert!(e < 0.05, "{m:?}: {e} pp");
        if let Bar::Sigma(s) = m.bar {
            assert!(s * m.scale < 0.05, "{m:?}");
        }
    }
}
