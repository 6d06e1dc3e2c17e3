//! A sample is evaluated once for every reader: the whole sample and each unit of the
//! output's split in one [`Plan::evaluate_sample`], each unit's results those of its own
//! counts, and per-interval retire latencies carried by the evaluation input while the plan
//! keeps the values it was planned with.

use tmetric_engine::view::{Partition, UnitId};
use tmetric_engine::{EvalInput, Evaluators, Source, Strategy};
use tmetric_sim::SimWorkload;

use crate::harness::{SimTree, count};

#[test]
fn each_unit_is_its_own_counts_evaluated_and_the_total_is_the_whole() {
    let tree = SimTree::new("icelake");
    let metrics = crate::harness::percent_metrics(tree.model, "TopdownL2");
    let workload = SimWorkload::builtin("phased").expect("built in");
    let counted = count(&tree, "TopdownL2", &metrics, Strategy::Tmetric, &workload, 300, 100);
    let plan = &counted.plan;
    let last = counted.reads.last().unwrap();
    let sample = EvalInput::new(last, 0.3);
    let cpus: Vec<i32> = counted.cpus.iter().map(|&c| c as i32).collect();
    let (a, b) = cpus.split_at(cpus.len() / 2);
    let split = Partition::Cpus(vec![
        (UnitId::Label("A".into()), a.to_vec()),
        (UnitId::Label("B".into()), b.to_vec()),
    ]);
    let mut evaluators = Evaluators::default();
    let evaluated =
        plan.evaluate_sample(&mut evaluators, &sample, &split, Some(&counted.reads), &[]);
    assert_eq!(evaluated.units.len(), 2);
    assert_eq!(evaluated.printed().len(), 2);
    assert_eq!(evaluated.total.results, plan.evaluate(&mut evaluators, &sample));
    for (unit, part) in evaluated.units.iter().zip([a, b]) {
        let counts = last.on_cpus(part);
        assert_eq!(unit.counts.as_ref(), Some(&counts));
        let own = plan.evaluate(&mut evaluators, &EvalInput::new(&counts, 0.3));
        assert_eq!(unit.results, own);
        assert_eq!(unit.bars.as_ref().map(Vec::len), Some(plan.roots().len()));
    }
    // Real values: every level-2 share of slots lies in (0, 1).
    for r in &evaluated.total.results {
        assert!(r.value > 0.0 && r.value < 1.0, "{r:?}");
    }
    // Without a split the total is the one printed unit.
    let global = plan.evaluate_sample(&mut evaluators, &sample, &Partition::Global, None, &[]);
    assert!(global.units.is_empty());
    assert_eq!(global.printed(), std::slice::from_ref(&global.total));
    assert!(global.total.bars.is_none());
}

#[test]
fn an_intervals_sampled_latencies_travel_in_its_input_and_leave_the_plan_alone() {
    let tree = SimTree::new("meteorlake");
    let model = tree.model;
    // A metric that reads a retire latency (`:R`), as only Meteor Lake's do in 6.12.
    let metric = (0..model.metric_count())
        .find(|&m| {
            let desc = model.metric(m);
            desc.slots.iter().any(|&s| model.ids[s as usize].retire_latency)
        })
        .expect("a metric reading a retire latency");
    let workload = SimWorkload::default_workload();
    let counted = count(&tree, "", &[metric], Strategy::Tmetric, &workload, 100, 100);
    let plan = &counted.plan;
    let latency_rows: Vec<String> = plan
        .rows()
        .iter()
        .filter(|r| r.source == Source::RetireLatency)
        .map(|r| r.name.clone())
        .collect();
    assert!(!latency_rows.is_empty());
    assert!(plan.retire_latency().is_empty(), "no file gave latencies");
    let last = counted.reads.last().unwrap();
    let mut evaluators = Evaluators::default();
    let value = |evaluators: &mut Evaluators, cycles: Option<f64>| {
        let latencies: Option<Vec<(String, f64)>> =
            cycles.map(|c| latency_rows.iter().map(|n| (n.clone(), c)).collect());
        let sample = EvalInput::new(last, 0.1).with_latencies(latencies.as_deref());
        plan.evaluate_sample(evaluators, &sample, &Partition::Global, None, &[]).total.results[0]
            .value
    };
    let planned = value(&mut evaluators, None);
    let sampled = value(&mut evaluators, Some(200.0));
    let zero = value(&mut evaluators, Some(0.0));
    assert!(sampled.is_finite() && sampled != zero, "{sampled} vs {zero}");
    // The plan's latencies (none: perf's 0) are what a sample without its own reads.
    assert_eq!(planned, zero);
    assert!(plan.retire_latency().is_empty());
    // The per-row shown value is the sample's too.
    let row = plan.rows().iter().find(|r| r.source == Source::RetireLatency).unwrap();
    let sample = EvalInput::new(last, 0.1);
    let l = [(row.name.clone(), 7.5)];
    assert_eq!(sample.with_latencies(Some(&l)).latency_of(plan, &row.name), 7.5);
    assert_eq!(sample.latency_of(plan, &row.name), 0.0);
}
