//! `-I` intervals under tmetric's rotation against each interval's truth (the simulator's
//! exact counts over the interval's span): the estimate from the turns read inside an
//! interval against the interval's counts scaled by time, the bars' coverage and the flags
//! of impossible values.

use tmetric_engine::Bar;
use tmetric_sim::SimWorkload;

use crate::harness::{IntervalMeasured, Measured, Rotation, SimTree, measure_intervals};

/// The built-in phased workload's compute and memory phases in turn, every 8 ms (two of the
/// kernel's rotation intervals at HZ 250).
fn periodic() -> SimWorkload {
    let (_, text) = tmetric_sim::workload::BUILTIN
        .iter()
        .find(|(n, _)| *n == "phased")
        .expect("the phased workload is built in");
    let mut json: serde_json::Value = serde_json::from_str(text).expect("phased parses");
    let list = json["phases"]["list"].as_array().expect("a phase list")[..2].to_vec();
    json["phases"] = serde_json::json!({ "list": list, "switch_every_ms": 8 });
    json["description"] = serde_json::json!("compute and memory phases in turn every 8 ms");
    SimWorkload::parse(&json.to_string(), "periodic").expect("the workload parses")
}

/// The phased and periodic workloads, TopdownL2 on skylakex and TopdownL3 on icelake, each
/// for 2 s of simulated time in intervals of 250 ms, under two seeds of the rotation;
/// measured once for every test here.
fn intervals() -> &'static [IntervalMeasured] {
    static MEASURED: std::sync::OnceLock<Vec<IntervalMeasured>> = std::sync::OnceLock::new();
    MEASURED.get_or_init(measure_all)
}

fn measure_all() -> Vec<IntervalMeasured> {
    let mut out = Vec::new();
    for (machine, item) in [("skylakex", "TopdownL2"), ("icelake", "TopdownL3")] {
        let tree = SimTree::new(machine);
        let metrics = crate::harness::percent_metrics(tree.model, item);
        for workload in [SimWorkload::builtin("phased").expect("built in"), periodic()] {
            for seed in 1..=2 {
                let rotation = Rotation::Seeded(seed);
                let measured =
                    measure_intervals(&tree, item, &metrics, rotation, &workload, 2_000, 250);
                out.extend(measured.expect("the groups rotate"));
            }
        }
    }
    out
}

/// Both ways of an interval's value: ours and time scaling's, where both have one.
fn pairs(measured: &[IntervalMeasured]) -> Vec<(&Measured, &Measured)> {
    measured
        .iter()
        .flat_map(|i| i.ours.iter().zip(&i.scaled))
        .filter(|(o, s)| o.value.is_finite() && s.value.is_finite() && o.truth.is_finite())
        .collect()
}

fn error(m: &Measured) -> f64 {
    (m.value - m.truth).abs() * m.scale
}

/// The estimate from each interval's own turns errs well below the interval's counts
/// scaled by time (what `-I` printed before), on both workloads.
#[test]
fn interval_estimates_err_well_below_time_scaling() {
    let measured = intervals();
    let pairs = pairs(measured);
    assert!(pairs.len() > 500, "{} values", pairs.len());
    let n = pairs.len() as f64;
    let ours = pairs.iter().map(|(o, _)| error(o)).sum::<f64>() / n;
    let scaled = pairs.iter().map(|(_, s)| error(s)).sum::<f64>() / n;
    eprintln!(
        "mean interval error over {n} values: estimate {ours:.3} pp, time scaling {scaled:.3} pp"
    );
    assert!(ours <= 0.5 * scaled, "estimate {ours:.3} pp, time scaling {scaled:.3} pp");
}

/// Each interval's bars hold its truth about as often as they claim (2 sigma: about 95 %),
/// and no value with a multiplexed input claims to be exact.
#[test]
fn interval_bars_hold_the_truth_as_often_as_they_claim() {
    let measured = intervals();
    let values: Vec<&Measured> = measured
        .iter()
        .flat_map(|i| &i.ours)
        .filter(|m| m.value.is_finite() && m.truth.is_finite())
        .collect();
    for m in &values {
        assert!(!matches!(m.bar, Bar::Exact), "multiplexed, so never exact: {m:?}");
    }
    let real: Vec<&&Measured> =
        values.iter().filter(|m| matches!(m.bar, Bar::Sigma(s) if s > 0.0)).collect();
    assert!(real.len() * 10 >= values.len() * 9, "{} bars of {} values", real.len(), values.len());
    let share = |k: f64| {
        real.iter()
            .filter(|m| match m.bar {
                Bar::Sigma(s) => (m.value - m.truth).abs() <= k * s + 1e-9,
                _ => false,
            })
            .count() as f64
            / real.len() as f64
    };
    let (one, two, three) = (share(1.0), share(2.0), share(3.0));
    eprintln!("interval coverage over {} bars: {one:.3} / {two:.3} / {three:.3}", real.len());
    assert!((0.88..=0.995).contains(&two), "2 sigma: {two:.3}");
    assert!(three >= 0.96, "3 sigma: {three:.3}");
    assert!((0.55..=0.9).contains(&one), "1 sigma: {one:.3}");
}

/// A TMA share outside 0-100 % in an interval is flagged beside its value, as in the totals
/// (time scaling prints some of them here, with nothing beside them).
#[test]
fn no_impossible_interval_value_is_printed_unflagged() {
    let measured = intervals();
    let outside = |m: &Measured| {
        m.percent && m.scale == 100.0 && !(-0.005..=1.005).contains(&m.value) && m.value.is_finite()
    };
    let scaled = measured.iter().flat_map(|i| &i.scaled).filter(|m| outside(m)).count();
    assert!(scaled > 0, "time scaling printed nothing impossible: the test shows nothing");
    let mut ours = 0;
    for i in measured {
        for m in i.ours.iter().filter(|m| outside(m)) {
            assert!(m.flagged, "at {} ms: {m:?}", i.at_ms);
        }
        ours += i.ours.iter().filter(|m| outside(m)).count();
    }
    eprintln!("values outside 0-100 %: estimate {ours}, time scaling {scaled}");
}

/// skylakex TopdownL3 in intervals of 250 ms: a dozen groups, so each counts a few turns
/// per interval, fewer than a fit needs on most CPUs; measured once for the tests below.
fn few_turns() -> &'static [IntervalMeasured] {
    static MEASURED: std::sync::OnceLock<Vec<IntervalMeasured>> = std::sync::OnceLock::new();
    MEASURED.get_or_init(|| {
        let tree = SimTree::new("skylakex");
        let metrics = crate::harness::percent_metrics(tree.model, "TopdownL3");
        let mut out = Vec::new();
        for workload in [SimWorkload::builtin("phased").expect("built in"), periodic()] {
            let measured = measure_intervals(
                &tree,
                "TopdownL3",
                &metrics,
                Rotation::Seeded(1),
                &workload,
                2_000,
                250,
            );
            out.extend(measured.expect("the groups rotate"));
        }
        out
    })
}

/// Groups with too few turns inside an interval borrow the interval before's: their
/// estimate errs well below time scaling after the first interval (which has nothing to
/// borrow and is scaled by time), where before they were scaled by time in every interval.
#[test]
fn groups_with_few_turns_borrow_the_interval_before() {
    let measured = few_turns();
    let later: Vec<IntervalMeasured> = measured
        .iter()
        .filter(|i| i.at_ms > 250)
        .map(|i| IntervalMeasured {
            at_ms: i.at_ms,
            ours: i.ours.clone(),
            scaled: i.scaled.clone(),
        })
        .collect();
    let pairs = pairs(&later);
    assert!(pairs.len() > 300, "{} values", pairs.len());
    let n = pairs.len() as f64;
    let ours = pairs.iter().map(|(o, _)| error(o)).sum::<f64>() / n;
    let scaled = pairs.iter().map(|(_, s)| error(s)).sum::<f64>() / n;
    eprintln!(
        "after the first interval, {n} values: estimate {ours:.3} pp, time scaling {scaled:.3} pp"
    );
    assert!(ours <= 0.6 * scaled, "estimate {ours:.3} pp, time scaling {scaled:.3} pp");
}

/// A metric that is the difference of two counts of one group (`tma_few_uops_instructions`
/// on Skylake: the retired slots less the retired instructions, over the slots) keeps time
/// scaling's cancellation where that group is scaled by time: the instructions are then
/// taken from the same turns as the slots, not from every turn.
#[test]
fn a_difference_within_a_scaled_group_keeps_its_cancellation() {
    let measured = few_turns();
    let tree = SimTree::new("skylakex");
    let name = |m: &Measured| tree.model.str(tree.model.metric(m.metric).name);
    let first: Vec<(&Measured, &Measured)> = measured
        .iter()
        .filter(|i| i.at_ms <= 250)
        .flat_map(|i| i.ours.iter().zip(&i.scaled))
        .filter(|(o, _)| name(o) == "tma_few_uops_instructions")
        .collect();
    assert!(!first.is_empty());
    for (o, s) in first {
        eprintln!(
            "tma_few_uops_instructions: estimate {:.3} pp off, time scaling {:.3}",
            error(o),
            error(s)
        );
        assert!(error(o) <= error(s) + 0.05, "{o:?} against {s:?}");
    }
}

/// A group that borrows the interval before's turns has few of its own: when those all
/// fell in two of three phases, the fit on time and the instructions is exact and its
/// residuals say nothing of the third phase the turns it missed held. Its bar is then at
/// least the share of what scaling by time would miss over the same turns that every
/// group's fit leaves of it, so bars are not confidently wrong: skylakex TopdownL3 (13
/// groups, four turns or so each per 250 ms interval) with every CPU in step through random
/// 2-40 ms phases, after the first interval, on the exact lockstep model, six rotation
/// seeds, held the truth at 2 sigma 78.0 % of the time without that floor, 82.7 % with it
/// (the bench's realistic model, the quick set's three seeds: 87.6 to 90.2 %).
#[test]
fn bars_of_fits_on_few_turns_are_not_confidently_wrong() {
    let (_, text) = tmetric_sim::workload::BUILTIN
        .iter()
        .find(|(n, _)| *n == "phased")
        .expect("the phased workload is built in");
    let mut json: serde_json::Value = serde_json::from_str(text).expect("phased parses");
    json["cpu_offsets_ms"] = serde_json::json!(vec![0; 256]);
    let workload = SimWorkload::parse(&json.to_string(), "in step").expect("the workload parses");
    let tree = SimTree::new("skylakex");
    let metrics = crate::harness::percent_metrics(tree.model, "TopdownL3");
    let (mut n, mut within) = (0usize, 0usize);
    for seed in 1..=6 {
        let measured = measure_intervals(
            &tree,
            "TopdownL3",
            &metrics,
            Rotation::Seeded(seed),
            &workload,
            2_000,
            250,
        )
        .expect("the groups rotate");
        for m in measured.iter().filter(|i| i.at_ms > 250).flat_map(|i| &i.ours) {
            if let Bar::Sigma(s) = m.bar
                && m.value.is_finite()
                && m.truth.is_finite()
            {
                n += 1;
                within += usize::from((m.value - m.truth).abs() <= 2.0 * s);
            }
        }
    }
    let coverage = within as f64 / n as f64;
    eprintln!("{n} bars after the first interval: {:.1} % within 2 sigma", 100.0 * coverage);
    assert!(n > 1000, "{n} bars");
    assert!(coverage >= 0.81, "{:.1} % within 2 sigma", 100.0 * coverage);
}
