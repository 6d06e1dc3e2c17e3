//! perf 7.x's `aggr_nr()` in each aggregation mode, on the simulated two-socket Sapphire Rapids
//! (two CHA boxes, each read on the first CPU of each package): the `lpm_miss_lat_*` metrics
//! divide the summed CHA clockticks by it to get one CHA's, so each mode's value is checked
//! against the Python generator's formula (intel_metrics.py `IntelMissLat`) over the readings
//! of that mode's unit, with the counters perf's `perf_stat_aggr.nr` counts there: every box
//! on every CPU of the unit under `-a` and `--per-socket` (boxes merged), box 0 alone on its CPU
//! under `-A` (perf merges nothing there).

use tmetric_engine::aggr::{Aggregation, place_of, units_for};
use tmetric_engine::view::{Partition, UnitId};
use tmetric_engine::{EvalInput, Evaluators, Plan, Select, Source, Strategy};
use tmetric_runtime::{Snapshot, Sysfs};
use tmetric_sim::SimWorkload;

use crate::harness::{SimTree, count};

/// The inputs of `lpm_miss_lat_*` as the Python source names them.
#[derive(Default)]
struct Inputs {
    /// `UNC_CHA_CLOCKTICKS`'s row.
    ticks: usize,
    /// `UNC_CHA_TOR_OCCUPANCY.*`'s row.
    occupancy: usize,
    /// `UNC_CHA_TOR_INSERTS.*`'s row.
    inserts: usize,
}

fn inputs(plan: &Plan) -> Inputs {
    let root = &plan.roots()[0];
    let mut found = Inputs::default();
    for &r in root.slot_rows.iter().flatten() {
        let name = &plan.rows()[r].name;
        if name.contains("CLOCKTICKS") {
            found.ticks = r;
        } else if name.contains("OCCUPANCY") {
            found.occupancy = r;
        } else if name.contains("INSERTS") {
            found.inserts = r;
        }
    }
    assert!(found.inserts != found.ticks && found.occupancy != found.ticks, "{:?}", plan.rows());
    found
}

/// The specs of row `r`'s uncore boxes, in box order.
fn box_specs(plan: &Plan, r: usize) -> Vec<usize> {
    let row = &plan.rows()[r];
    assert!(matches!(row.source, Source::Counter(_)));
    row.boxes.iter().map(|b| b.spec).collect()
}

/// The first `boxes` of `specs` read on `cpus` (every CPU when `None`): (sum of the counts,
/// readings summed).
fn summed(
    snapshot: &Snapshot,
    specs: &[usize],
    boxes: usize,
    cpus: Option<&[i32]>,
) -> (f64, usize) {
    let (mut value, mut n) = (0.0, 0);
    for &spec in specs.iter().take(boxes) {
        for c in snapshot.events[spec].iter().flatten() {
            if cpus.is_none_or(|cpus| cpus.contains(&c.cpu)) {
                // Nothing multiplexes here (three events on four counters per box).
                assert_eq!(c.raw.running, c.raw.enabled);
                value += c.raw.value as f64;
                n += 1;
            }
        }
    }
    (value, n)
}

/// The Python source's `interval_sec * 1e9 * occ / ((ticks / aggr_nr(ins)) * ins)`.
fn latency(seconds: f64, ticks: f64, occupancy: f64, inserts: f64, aggr_nr: f64) -> f64 {
    let ticks_per_cha = ticks / aggr_nr;
    seconds * 1e9 * occupancy / (ticks_per_cha * inserts)
}

fn close(got: f64, want: f64) -> bool {
    (got - want).abs() <= 1e-9 * want.abs()
}

fn check_metric(name: &str) {
    tmetric_catalog::use_vintage(tmetric_catalog::vintage_for("7.2").expect("perf 7.2's"));
    let tree = SimTree::new("sapphirerapids");
    let model = tree.model;
    let metric = *model.metrics_named(name).first().expect("perf 7.2's sapphirerapids has it");
    let workload = SimWorkload::default_workload();
    let counted = count(&tree, "", &[metric], Strategy::Tmetric, &workload, 100, 100);
    let mut plan = counted.plan;
    let last = counted.reads.last().unwrap();
    let rows = inputs(&plan);
    let (ticks, occupancy, inserts) = (
        box_specs(&plan, rows.ticks),
        box_specs(&plan, rows.occupancy),
        box_specs(&plan, rows.inserts),
    );
    let boxes = inserts.len();
    assert_eq!(boxes, 2, "the simulated machine has two CHA boxes");
    // The span every counter was enabled for: `duration_time`, so nothing is rescaled.
    let enabled = last.events[ticks[0]].as_ref().unwrap()[0].raw.enabled;
    let seconds = enabled as f64 / 1e9;
    let sample = EvalInput::new(last, seconds);
    let expect = |cpus: Option<&[i32]>, boxes: usize| {
        let (ticks, _) = summed(last, &ticks, boxes, cpus);
        let (occupancy, _) = summed(last, &occupancy, boxes, cpus);
        let (inserts, n) = summed(last, &inserts, boxes, cpus);
        assert!(ticks > 0.0 && occupancy > 0.0 && inserts > 0.0, "{name}: the workload misses");
        (latency(seconds, ticks, occupancy, inserts, n as f64), n)
    };
    let sysfs = Sysfs::new(&tree.sys);
    let cpus = sysfs.online_cpus().unwrap();
    let mut evaluators = Evaluators::default();

    // -a: both boxes on both packages' reader CPUs.
    let (want, n) = expect(None, boxes);
    assert_eq!(n, 4, "two boxes read on two CPUs");
    let got = plan.evaluate(&mut evaluators, &sample)[0].value;
    assert!(close(got, want), "{name} -a: {got} for {want}");

    // --per-socket: both boxes on the one reader CPU of the package.
    let sockets = units_for(&cpus, Aggregation::Socket, |c| place_of(&sysfs, c, None));
    assert_eq!(sockets.len(), 2);
    let split = Partition::Cpus(
        sockets.iter().map(|(label, cpus)| (UnitId::Label(label.clone()), cpus.clone())).collect(),
    );
    let evaluated = plan.evaluate_sample(&mut evaluators, &sample, &split, None, &[]);
    for ((label, unit_cpus), unit) in sockets.iter().zip(&evaluated.units) {
        let (want, n) = expect(Some(unit_cpus), boxes);
        assert_eq!(n, 2, "two boxes read on one CPU of {label}");
        let got = unit.results[0].value;
        assert!(close(got, want), "{name} --per-socket {label}: {got} for {want}");
    }

    // -A: each box apart on each CPU it is read on, box 0 on the CPU's line.
    plan.set_per_box(true);
    let readers: Vec<i32> = last.events[inserts[0]].iter().flatten().map(|c| c.cpu).collect();
    assert_eq!(readers.len(), 2, "one reader CPU per package");
    let split = Partition::Cpus(readers.iter().map(|&c| (UnitId::Cpu(c), vec![c])).collect());
    let evaluated = plan.evaluate_sample(&mut evaluators, &sample, &split, None, &[]);
    for (&cpu, unit) in readers.iter().zip(&evaluated.units) {
        let (want, n) = expect(Some(&[cpu]), 1);
        assert_eq!(n, 1, "box 0 alone on CPU {cpu}");
        let got = unit.results[0].value;
        assert!(close(got, want), "{name} -A CPU{cpu}: {got} for {want}");
    }
    tmetric_catalog::clear_inferred_vintage();
}

#[test]
fn local_miss_latency_divides_by_the_counters_summed_in_each_mode() {
    check_metric("lpm_miss_lat_loc");
}

#[test]
fn remote_miss_latency_divides_by_the_counters_summed_in_each_mode() {
    check_metric("lpm_miss_lat_rem");
}

/// The fifteen server models whose perf 7.2 tables have `lpm_miss_lat_loc` and `_rem`, with
/// `aggr_nr()` (six of them also give their CHA events several filter terms).
const MISS_LATENCY_MODELS: [&str; 15] = [
    "x86/broadwellde",
    "x86/broadwellx",
    "x86/cascadelakex",
    "x86/clearwaterforest",
    "x86/emeraldrapids",
    "x86/grandridge",
    "x86/graniterapids",
    "x86/haswellx",
    "x86/icelakex",
    "x86/ivytown",
    "x86/jaketown",
    "x86/sapphirerapids",
    "x86/sierraforest",
    "x86/skylakex",
    "x86/snowridgex",
];

/// Each of the 30 metrics over counts built from a known truth: `sockets` packages of `chas`
/// CHA boxes each, every box clocked at `ghz` for `seconds`, each miss staying `ns` in the
/// TOR (Little's law: occupancy is inserts times cycles spent). The metric reads the sums
/// and must give back `ns`, which it can only with `aggr_nr()` the boxes summed: one
/// box's clock is the sum over them.
#[test]
fn the_thirty_miss_latency_metrics_give_back_the_latency_their_counts_were_built_from() {
    use tmetric_engine::MetricEval;
    use tmetric_model::Literal;

    let v72 = tmetric_catalog::vintage_for("7.2").expect("perf 7.2's");
    let (sockets, chas, seconds, ghz) = (2usize, 28usize, 0.5, 2.2);
    let mut checked = 0;
    for path in MISS_LATENCY_MODELS {
        let model = tmetric_catalog::model_in(v72, path).expect("a perf 7.2 model");
        for (name, ns) in [("lpm_miss_lat_loc", 81.0), ("lpm_miss_lat_rem", 143.0)] {
            let m = *model.metrics_named(name).first().unwrap_or_else(|| panic!("{path} {name}"));
            let (mut ticks, mut inserts, mut occupancy) = (0.0, 0.0, 0.0);
            for b in 0..sockets * chas {
                // Boxes see different traffic; the latency is the same for every miss.
                let box_inserts = 1.0e6 + 3.7e4 * b as f64;
                ticks += ghz * 1e9 * seconds;
                inserts += box_inserts;
                occupancy += box_inserts * ns * ghz;
            }
            let mut eval = MetricEval::new(model, [f64::NAN; Literal::COUNT], None);
            let mut set = 0;
            for &slot in model.metric(m).slots {
                let text = model.str(model.ids[slot as usize].text);
                let (value, counters) = if text == "duration_time" {
                    (seconds, 1.0)
                } else if text.contains("CLOCKTICKS") {
                    (ticks, (sockets * chas) as f64)
                } else if text.contains("OCCUPANCY") {
                    (occupancy, (sockets * chas) as f64)
                } else if text.contains("INSERTS") {
                    (inserts, (sockets * chas) as f64)
                } else {
                    panic!("{path} {name}: unexpected input `{text}`")
                };
                // One value per box, as a merged uncore event's.
                eval.set_input(slot, value, chas as f64);
                eval.set_aggr_nr(slot, counters);
                set += 1;
            }
            assert_eq!(set, 4, "{path} {name}: duration_time and three CHA events");
            let got = eval.evaluate_one(m);
            assert!(got.failure.is_none(), "{path} {name}: {got:?}");
            assert!(close(got.value, ns), "{path} {name}: {} ns for {ns} ns", got.value);
            checked += 1;
        }
    }
    assert_eq!(checked, 30);
}

/// perf's `process_counter_values` under `--per-thread -a` skips a reading of 0 before it
/// adds to the thread's `perf_stat_aggr.nr`, so `aggr_nr()` counts only the readings that
/// counted something. The simulated readings are given to one thread, the inserts of box 0
/// on every CPU are made 0, and the latency is computed by hand with the nonzero readings.
#[test]
fn per_thread_system_wide_skips_zero_readings_in_aggr_nr() {
    use tmetric_engine::view::Partition;

    tmetric_catalog::use_vintage(tmetric_catalog::vintage_for("7.2").expect("perf 7.2's"));
    let tree = SimTree::new("sapphirerapids");
    let metric = *tree.model.metrics_named("lpm_miss_lat_loc").first().unwrap();
    let workload = SimWorkload::default_workload();
    let counted = count(&tree, "", &[metric], Strategy::Tmetric, &workload, 100, 100);
    let plan = counted.plan;
    let rows = inputs(&plan);
    let (ticks, occupancy, inserts) = (
        box_specs(&plan, rows.ticks),
        box_specs(&plan, rows.occupancy),
        box_specs(&plan, rows.inserts),
    );
    let tid = 4242;
    let mut snapshot = counted.reads.last().unwrap().clone();
    for readings in snapshot.events.iter_mut().flatten() {
        for c in readings.iter_mut() {
            c.thread = tid;
        }
    }
    for c in snapshot.events[inserts[0]].iter_mut().flatten() {
        c.raw.value = 0;
    }
    let seconds = snapshot.events[ticks[0]].as_ref().unwrap()[0].raw.enabled as f64 / 1e9;
    let (ticks, _) = summed(&snapshot, &ticks, 2, None);
    let (occupancy, _) = summed(&snapshot, &occupancy, 2, None);
    let (inserts, readings) = summed(&snapshot, &inserts, 2, None);
    let nonzero = readings / 2;
    assert_eq!((readings, nonzero), (4, 2), "two boxes on two reader CPUs, box 0's all 0");
    let sample = EvalInput::new(&snapshot, seconds);
    let mut evaluators = Evaluators::default();
    for (skip_zero, nr) in [(true, nonzero), (false, readings)] {
        let split = Partition::Threads { threads: vec![("worker".into(), tid)], skip_zero };
        let evaluated = plan.evaluate_sample(&mut evaluators, &sample, &split, None, &[]);
        let got = evaluated.units[0].results[0].value;
        let want = latency(seconds, ticks, occupancy, inserts, nr as f64);
        assert!(close(got, want), "skip_zero {skip_zero}: {got} for {want}");
    }
    tmetric_catalog::clear_inferred_vintage();
}
