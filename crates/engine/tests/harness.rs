//! Measuring metrics on a simulated machine against the truth: a plan (tmetric's schedule or
//! perf 6.12's strategy) counted on the simulated kernel for a span of simulated time while the
//! workload changes phases, evaluated as `tmetric stat` evaluates it, next to the same metrics
//! over the simulator's exact counts for the same span. Shared by the accuracy benchmark
//! (`benches/accuracy.rs`) and the error-bar tests.
#![allow(dead_code)]

use std::path::PathBuf;

use tmetric_catalog::Model;
use tmetric_engine::{EvalInput, Evaluator, Evaluators, Host, Pick, Plan, PlanOptions, Strategy};
use tmetric_runtime::{CounterSet, Sysfs, Target};
use tmetric_sim::{Machine as SimMachine, SimKernel, SimWorkload};

/// A simulated machine's sysfs and procfs under a temporary directory (removed on drop).
pub struct SimTree {
    /// The machine name.
    pub name: &'static str,
    /// The kernel's HZ its sysfs says (`perf_event_mux_interval_ms`); a workload run on the
    /// tree must give its kernel the same.
    pub hz: u32,
    /// The sysfs root.
    pub sys: PathBuf,
    /// The procfs root.
    pub proc_root: PathBuf,
    /// Its catalogue model.
    pub model: &'static Model,
    /// What planning reads of the tree, probed once (every count plans on the same tree).
    host: Host,
    /// Removed when the tree drops.
    _dir: tempfile::TempDir,
}

impl SimTree {
    /// Writes the tree of machine `name` at its own HZ.
    pub fn new(name: &'static str) -> SimTree {
        let hz = SimMachine::named(name).expect("a named machine").hz;
        SimTree::with_hz(name, hz)
    }

    /// Writes the tree of machine `name` with a kernel at `hz`, as `--pmu-sim` writes it for
    /// a workload whose kernel runs at `hz`: planning reads the rotation interval (and from it
    /// the interrupts per second the bars allow for) from the tree.
    pub fn with_hz(name: &'static str, hz: u32) -> SimTree {
        let machine = SimMachine::named(name).expect("a named machine").with_hz(hz);
        let temp = tempfile::Builder::new()
            .prefix(&format!("tmetric-accuracy-{name}-"))
            .tempdir()
            .expect("a temporary directory");
        let dir = temp.path();
        machine.write_sysfs(&dir.join("sys"), &dir.join("proc")).expect("sysfs written");
        let sysfs = Sysfs::new(dir.join("sys"));
        let cpuid = tmetric_runtime::sysfs::host_cpuid(&sysfs, &dir.join("proc")).expect("cpuid");
        let model = tmetric_catalog::model_for_cpuid(&cpuid).expect("a model");
        let proc_root = dir.join("proc");
        let host = Host::probe(&sysfs, &proc_root, None);
        SimTree { name, hz: machine.hz, sys: dir.join("sys"), proc_root, model, host, _dir: temp }
    }
}

/// One metric measured: its value as counted and its truth, both before `ScaleUnit`.
#[derive(Debug, Clone)]
pub struct Measured {
    /// The metric's index in the model.
    pub metric: usize,
    /// The value from the multiplexed counts (NaN when not computable).
    pub value: f64,
    /// The value over the exact counts of the same span.
    pub truth: f64,
    /// The error bar the engine gives the value.
    pub bar: tmetric_engine::Bar,
    /// `ScaleUnit` factor.
    pub scale: f64,
    /// The metric prints as a percentage.
    pub percent: bool,
    /// The engine flags the value impossible.
    pub flagged: bool,
}

/// Who rotates the groups of a count.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Rotation {
    /// The kernel's fixed timer, read every `step_ms` (perf's way).
    Kernel,
    /// tmetric's own turns of random length, read at every turn (what `stat` does).
    Own,
    /// [`Rotation::Own`] with turns drawn from another seed.
    Seeded(u64),
}

impl Rotation {
    /// How `tmetric stat` rotates the groups of `strategy`'s plan: perf's strategy keeps the
    /// kernel's rotation, as perf does.
    pub fn of(strategy: Strategy) -> Rotation {
        if strategy == Strategy::Tmetric { Rotation::Own } else { Rotation::Kernel }
    }
}

/// A plan counted on a simulated machine: the plan, the kernel (for the truth), the CPUs
/// counted, the reads (the first at the start, then every step, cumulative) and the
/// simulated time the count started at.
pub struct Counted {
    /// The plan.
    pub plan: Plan,
    /// The simulated kernel.
    pub kernel: SimKernel,
    /// The CPUs counted.
    pub cpus: Vec<u32>,
    /// Cumulative reads: at the start, then every step.
    pub reads: Vec<tmetric_runtime::Snapshot>,
    /// Simulated ns at the start.
    pub start: u64,
    /// The literals the plan was made with.
    pub literals: [f64; tmetric_model::Literal::COUNT],
}

/// Counts `metrics` of `tree`'s model, selected by the `-M` item `item` (perf's grouping
/// depends on it: `MetricgroupNoGroup`), planned with `strategy`, for `ms` of simulated time
/// (read every `step_ms`) on the simulated machine running `workload`.
pub fn count(
    tree: &SimTree,
    item: &str,
    metrics: &[usize],
    strategy: Strategy,
    workload: &SimWorkload,
    ms: u64,
    step_ms: u64,
) -> Counted {
    count_rotated(tree, item, metrics, strategy, Rotation::of(strategy), workload, ms, step_ms)
}

/// A plan's counters opened on the simulated kernel and enabled: where every measurement here
/// starts.
struct Opened {
    plan: Plan,
    kernel: SimKernel,
    counters: CounterSet<SimKernel>,
    cpus: Vec<u32>,
    start: u64,
    literals: [f64; tmetric_model::Literal::COUNT],
}

/// tmetric's (or perf's) plan of `metrics` picked by `item` on `tree`, counting every CPU.
pub fn plan_with(tree: &SimTree, item: &str, metrics: &[usize], strategy: Strategy) -> Plan {
    let mut plan = Plan::new(tree.host.literals(true, None));
    // `-M a,b`: each metric picked by the first item that selects it, as perf reads the list.
    let item_of = |metric: usize| {
        item.split(',')
            .find(|part| tmetric_engine::Select::select(tree.model, part).contains(&metric))
            .unwrap_or(item)
            .to_string()
    };
    let picks: Vec<Pick> = metrics
        .iter()
        .map(|&metric| Pick { model: tree.model, metric, item: item_of(metric) })
        .collect();
    let options = PlanOptions { system_wide: true, strategy, ..PlanOptions::default() };
    plan.add_metrics(&picks, &tree.host, &options, true);
    plan
}

/// Plans `metrics` of `tree`'s model (selected by the `-M` item `item`) system-wide with
/// `strategy`, and opens and enables its counters on a kernel running `workload`.
fn open(
    tree: &SimTree,
    item: &str,
    metrics: &[usize],
    strategy: Strategy,
    workload: &SimWorkload,
) -> Opened {
    let sysfs = Sysfs::new(&tree.sys);
    let literals = tree.host.literals(true, None);
    let plan = plan_with(tree, item, metrics, strategy);
    let sim = SimMachine::named(tree.name).expect("machine");
    let kernel = SimKernel::manual_with_workload(sim, workload.clone());
    let cpus = sysfs.online_cpus().expect("online cpus");
    let mut counters = CounterSet::open_with(
        kernel.clone(),
        plan.specs().to_vec(),
        plan.groups(),
        plan.sticky(),
        Target::Cpus(cpus.clone()),
    )
    .expect("the plan opens");
    let start = kernel.now();
    counters.enable().expect("enable");
    Opened { plan, kernel, counters, cpus, start, literals }
}

/// The rotation tmetric runs itself for `rotation`, if the plan has groups to rotate.
fn own_rotation(plan: &Plan, rotation: Rotation) -> Option<tmetric_runtime::Rotation> {
    match rotation {
        Rotation::Kernel => None,
        Rotation::Own => plan.rotation(),
        Rotation::Seeded(seed) => plan.rotation().map(|r| tmetric_runtime::Rotation { seed, ..r }),
    }
}

/// [`count`], with the groups rotated by `rotation`.
#[allow(clippy::too_many_arguments)]
pub fn count_rotated(
    tree: &SimTree,
    item: &str,
    metrics: &[usize],
    strategy: Strategy,
    rotation: Rotation,
    workload: &SimWorkload,
    ms: u64,
    step_ms: u64,
) -> Counted {
    // The tree's sysfs must say the HZ the kernel runs at, as `--pmu-sim` writes it.
    assert!(
        workload.kernel.hz.is_none_or(|hz| hz == tree.hz),
        "the workload's kernel runs at HZ {:?}, the tree of {} says {}: use SimTree::with_hz",
        workload.kernel.hz,
        tree.name,
        tree.hz
    );
    let Opened { mut plan, kernel, mut counters, cpus, start, literals } =
        open(tree, item, metrics, strategy, workload);
    let mut reads = vec![counters.read().expect("read")];
    let total = ms * 1_000_000;
    let mut at = 0;
    // What `tmetric stat` does by default: tmetric's own rotation of the groups that cannot
    // count at once, in turns of random length, read at every turn; perf's strategy keeps
    // the kernel's rotation, as perf does.
    if let Some(own) = own_rotation(&plan, rotation) {
        plan.set_rotating(true);
        let mut order = own.schedule();
        // Until the first turn the kernel rotates, every group enabled.
        let mut dt = order.length().as_nanos() as u64;
        while at < total {
            let step = dt.min(total - at);
            kernel.advance(step);
            at += step;
            let (turn, length) = order.next_turn();
            counters.rotate(&own.turns, turn).expect("rotate");
            reads.push(counters.read().expect("read"));
            dt = length.as_nanos() as u64;
        }
    } else {
        let step = step_ms.max(1) * 1_000_000;
        while at < total {
            let dt = step.min(total - at);
            kernel.advance(dt);
            at += dt;
            reads.push(counters.read().expect("read"));
        }
    }
    counters.disable().expect("disable");
    Counted { plan, kernel, cpus, reads, start, literals }
}

/// [`count`], then each metric with its truth.
pub fn measure(
    tree: &SimTree,
    item: &str,
    metrics: &[usize],
    strategy: Strategy,
    workload: &SimWorkload,
    ms: u64,
    step_ms: u64,
) -> Vec<Measured> {
    measure_rotated(tree, item, metrics, strategy, Rotation::of(strategy), workload, ms, step_ms)
}

/// [`measure`], with the groups rotated by `rotation`.
#[allow(clippy::too_many_arguments)]
pub fn measure_rotated(
    tree: &SimTree,
    item: &str,
    metrics: &[usize],
    strategy: Strategy,
    rotation: Rotation,
    workload: &SimWorkload,
    ms: u64,
    step_ms: u64,
) -> Vec<Measured> {
    let Counted { plan, kernel, cpus, reads, start, literals } =
        count_rotated(tree, item, metrics, strategy, rotation, workload, ms, step_ms);
    let end = start + ms * 1_000_000;
    // What `tmetric stat` prints: the counts of the anchored rotated groups estimated from
    // the turns' reads (perf's strategy has no anchors: its counts stay as counted).
    let last = plan.estimated(reads.last().expect("a read"), &reads);
    let sample = EvalInput::new(&last, ms as f64 / 1e3);
    let evaluated = plan.evaluate_sample(
        &mut Evaluators::default(),
        &sample,
        &tmetric_engine::view::Partition::Global,
        Some(&reads),
        &[],
    );
    let seconds = ms as f64 / 1e3;
    let truths = truths(tree, &plan, &kernel, &cpus, literals, (start, end), seconds);
    judged(tree, &plan, &evaluated, &truths, true)
}

/// Each root of `plan` over the simulator's exact counts of `cpus` in the simulated span
/// `[from, to)` ns (`seconds` long): the truth a value is judged against.
pub fn truths(
    tree: &SimTree,
    plan: &Plan,
    kernel: &SimKernel,
    cpus: &[u32],
    literals: [f64; tmetric_model::Literal::COUNT],
    (from, to): (u64, u64),
    seconds: f64,
) -> Vec<f64> {
    plan.roots()
        .iter()
        .map(|root| {
            let mut evaluator = Evaluator::new(tree.model);
            evaluator.literals = literals;
            for (slot, row) in root.slot_rows.iter().enumerate() {
                let Some(row) = row else { continue };
                let row = &plan.rows()[*row];
                evaluator.values[slot] = match &row.source {
                    tmetric_engine::Source::Counter(spec) => {
                        let spec = &plan.specs()[*spec];
                        let on: Vec<u32> = match &spec.cpus {
                            Some(mask) => {
                                cpus.iter().copied().filter(|c| mask.contains(c)).collect()
                            }
                            None => cpus.to_vec(),
                        };
                        on.iter()
                            .map(|&c| {
                                kernel.true_count_between(&spec.attr, c, from, to).unwrap_or(0)
                                    as f64
                            })
                            .sum::<f64>()
                            * row.scale
                    }
                    tmetric_engine::Source::Tool(_) => seconds,
                    tmetric_engine::Source::RetireLatency => plan.retire_latency_of(&row.name),
                    _ => f64::NAN,
                };
            }
            evaluator.evaluate(tree.model, &[root.metric]).remove(0).value
        })
        .collect()
}

/// Each root of an evaluated sample next to its truth. `shown_flag`: whether a flag is
/// printed where the engine finds a value impossible (beside a value only with its bar).
fn judged(
    tree: &SimTree,
    plan: &Plan,
    evaluated: &tmetric_engine::Evaluated,
    truths: &[f64],
    shown_flag: bool,
) -> Vec<Measured> {
    let results = &evaluated.total.results;
    let bars = evaluated.total.bars.clone().unwrap_or_default();
    let mut out = Vec::new();
    for (i, (root, result)) in plan.roots().iter().zip(results).enumerate() {
        let desc = tree.model.metric(root.metric);
        let unit = tree.model.str(desc.unit);
        out.push(Measured {
            metric: root.metric,
            value: if result.failure.is_some() { f64::NAN } else { result.value },
            truth: truths[i],
            bar: bars.get(i).copied().unwrap_or(tmetric_engine::Bar::Unknown),
            scale: desc.scale,
            percent: unit.contains('%') || unit.contains("percent"),
            flagged: shown_flag && evaluated.total.impossible.get(i).is_some_and(Option::is_some),
        });
    }
    out
}

/// One `-I` interval measured two ways against its truth.
pub struct IntervalMeasured {
    /// The interval's end, in ms since the count started.
    pub at_ms: u64,
    /// As `tmetric stat -I --errors` prints it: estimated from the turns read inside the
    /// interval ([`Plan::estimate_interval`]), with bars from those reads.
    pub ours: Vec<Measured>,
    /// The interval's counts scaled by time, evaluated without reads, as `-I` printed them
    /// before: no bar, so no flag beside a value.
    pub scaled: Vec<Measured>,
}

/// Counts `metrics` as [`count_rotated`] does with tmetric's rotation (a read at every
/// turn), and also reads every `interval_ms` as `stat -I` does between the turns, for `ms`
/// of simulated time; then each interval both ways against the simulator's exact counts of
/// that interval; `None` when the plan has no groups to rotate.
#[allow(clippy::too_many_arguments)]
pub fn measure_intervals(
    tree: &SimTree,
    item: &str,
    metrics: &[usize],
    rotation: Rotation,
    workload: &SimWorkload,
    ms: u64,
    interval_ms: u64,
) -> Option<Vec<IntervalMeasured>> {
    intervals_read(tree, item, metrics, rotation, workload, (ms, interval_ms), None)
}

/// [`measure_intervals`] under the kernel's rotation, read every `read_ms` between the
/// intervals' reads (what `stat -I --errors --rotation kernel` reads its bars from).
pub fn measure_intervals_kernel(
    tree: &SimTree,
    item: &str,
    metrics: &[usize],
    workload: &SimWorkload,
    (ms, interval_ms): (u64, u64),
    read_ms: u64,
) -> Vec<IntervalMeasured> {
    intervals_read(
        tree,
        item,
        metrics,
        Rotation::Kernel,
        workload,
        (ms, interval_ms),
        Some(read_ms),
    )
    .expect("reads at a fixed step always measure")
}

/// [`measure_intervals`], or with `read_ms` under the kernel's rotation read at that step.
fn intervals_read(
    tree: &SimTree,
    item: &str,
    metrics: &[usize],
    rotation: Rotation,
    workload: &SimWorkload,
    (ms, interval_ms): (u64, u64),
    read_ms: Option<u64>,
) -> Option<Vec<IntervalMeasured>> {
    let strategy = PlanOptions::default().strategy;
    let Opened { mut plan, kernel, mut counters, cpus, start, literals } =
        open(tree, item, metrics, strategy, workload);
    let own = match read_ms {
        Some(_) => None,
        None => Some(own_rotation(&plan, rotation)?),
    };
    plan.set_rotating(own.is_some());
    let mut order = own.as_ref().map(tmetric_runtime::Rotation::schedule);
    let step = |order: &mut Option<tmetric_runtime::Turns>| match order {
        Some(o) => o.length().as_nanos() as u64,
        None => read_ms.unwrap_or(100) * 1_000_000,
    };
    let (total, every) = (ms * 1_000_000, interval_ms * 1_000_000);
    let (mut at, mut next_turn, mut next_tick) = (0, step(&mut order), every.min(total));
    let mut reads: Vec<tmetric_runtime::Snapshot> = Vec::new();
    let mut before = tmetric_runtime::Snapshot::default();
    let mut earlier: Vec<tmetric_runtime::Snapshot> = Vec::new();
    let (mut first, mut tick_at) = (0, 0);
    let mut evaluators = Evaluators::default();
    let split = tmetric_engine::view::Partition::Global;
    let mut out = Vec::new();
    loop {
        let due = next_turn.min(next_tick);
        kernel.advance(due - at);
        at = due;
        if next_turn < next_tick {
            if let (Some(own), Some(order)) = (own.as_ref(), order.as_mut()) {
                let (turn, length) = order.next_turn();
                counters.rotate(&own.turns, turn).expect("rotate");
                reads.push(counters.read().expect("read"));
                next_turn = at + length.as_nanos() as u64;
            } else {
                reads.push(counters.read().expect("read"));
                next_turn = at + step(&mut order);
            }
            continue;
        }
        let read = counters.read().expect("read");
        let counts = read.since(&before);
        let seconds = (at - tick_at) as f64 / 1e9;
        let span = (start + tick_at, start + at);
        let truths = truths(tree, &plan, &kernel, &cpus, literals, span, seconds);
        let estimate = plan.estimate_interval(&earlier, &before, &reads[first..], &counts);
        earlier = std::iter::once(before.clone()).chain(reads[first..].iter().cloned()).collect();
        let sample = EvalInput::new(&estimate.counts, seconds);
        let ours = plan.evaluate_sample_from(
            &mut evaluators,
            &sample,
            &split,
            Some(&estimate.reads),
            estimate.from,
            &[],
        );
        let sample = EvalInput::new(&counts, seconds);
        let scaled = plan.evaluate_sample(&mut evaluators, &sample, &split, None, &[]);
        out.push(IntervalMeasured {
            at_ms: at / 1_000_000,
            ours: judged(tree, &plan, &ours, &truths, true),
            scaled: judged(tree, &plan, &scaled, &truths, scaled.total.bars.is_some()),
        });
        if at >= total {
            break;
        }
        before = read;
        first = reads.len();
        tick_at = at;
        next_tick = (at + every).min(total);
    }
    counters.disable().expect("disable");
    Some(out)
}

/// The metrics of `group` (each item of a comma-separated list, in turn) in `model` that
/// print as percentages and read no retire latency (nothing samples those here).
pub fn percent_metrics(model: &'static Model, group: &str) -> Vec<usize> {
    use tmetric_engine::Select;
    let mut picked: Vec<usize> = Vec::new();
    for m in group.split(',').flat_map(|g| model.select(g)) {
        if !picked.contains(&m) {
            picked.push(m);
        }
    }
    picked
        .into_iter()
        .filter(|&m| {
            let unit = model.str(model.metric(m).unit);
            let percent = unit.contains('%') || unit.contains("percent");
            let latency =
                model.metric(m).slots.iter().any(|&s| model.ids[s as usize].retire_latency);
            percent && !latency
        })
        .collect()
}
