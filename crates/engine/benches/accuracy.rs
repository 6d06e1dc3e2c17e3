//! Accuracy benchmark: how far multiplexed metrics land from the truth on simulated machines
//! as unkind as hardware, over workload classes that stress multiplexing in different ways,
//! for tmetric's schedule, perf 6.12's grouping and each metric counted alone.
//!
//! Every class is a workload generated here from the built-in `phased` workload's phases
//! (compute, memory, frontend) with its own phase schedule, run on the simulated kernel with
//! every rule of `tmetric_sim::Realism` on (rotation hrtimers on the grid since boot at a
//! random point with up to 30 us of interrupt lateness, each CPU and SMT sibling at its own
//! random point of the phases (but in the `CPUs in step` classes, whose threads meet at
//! barriers), one count per interrupt and up to 0.1 % overcount on core
//! events, 8-bit PERF_METRICS), at kernel HZ 250 (rotation every 4 ms) and 1000 (1 ms), with
//! three seeds (each its own timer offsets, CPU offsets and random phase lengths). Each
//! selection (TopdownL1..L6 on Intel, PipelineL1/L2 on AMD, TopdownL1 and TopdownL1 with
//! Operation_Mix and Cycle_Accounting on Arm) is counted for
//! 1 s of simulated time, read every 100 ms, three ways:
//!
//! * `tmetric`: tmetric's schedule and estimate;
//! * `perf`: perf 6.12's grouping for the same `-M` item (the engine's [`Strategy::Perf`]),
//!   scaled by time as perf does;
//! * `alone`: each metric counted by itself (what noise and 8-bit rounding alone cost).
//!
//! Errors are absolute, in percentage points, of the metrics that print as percentages,
//! against the metric over the simulator's exact counts of the same second (each CPU's own
//! phases), over the values both tmetric and perf gave (`alone`: over those of the first
//! seed, which is all that is counted alone, to keep the bench within minutes). Bars: the share of tmetric's values with a real
//! bar (a spread, not `Exact` or `Unknown`) whose truth lies within 1, 2 and 3 sigma.
//! Impossible values: a share outside 0-100 %, a child above its parent, or level 1 not
//! summing to 100 %, where the truth is possible (tolerance 0.5 pp, 1 pp for the sum):
//! tmetric's count when printed without its `impossible` flag, perf's all (perf flags none).
//!
//! `cargo bench -p tmetric-engine --bench accuracy` (or `cargo xtask bench --only accuracy`);
//! `-- --quick`: three machines (sapphirerapids, skylakex, amdzen4) and levels 1-3 (AMD's
//! PipelineL1/L2), one seed; `-- --seeds N`; `-- --machine NAME`, `-- --selection NAME`,
//! `-- --hz 250|1000`: one of each; `-- --class NAME` (repeatable): those classes; `-- --exact`: the simulator's exact
//! lockstep model instead; `-- --detail`: a row per class, machine, selection and HZ;
//! `-- --check`: exit 1 when a target is missed; `-- --perf-version X.Y`: that vintage's tables; `-- --misses`: print every tmetric value
//! whose truth lies outside 2 sigma or more than 5 points away.
//!
//! `-- --intervals`: also each run as `stat -I 250` prints it, counted again with a read
//! every 250 ms between tmetric's turns: each interval's values estimated from the turns
//! inside it with their bars (what `-I` prints now) against the same interval's counts
//! scaled by time (what it printed before), both against the truth of that interval;
//! tables per class, per class and HZ, and per machine and selection after the others.
//! `-- --only-intervals`: the intervals alone (the totals, perf's and each metric alone are
//! not counted); `-- --dump-z`: a tab-separated `z` line per interval value with a bar
//! (class, machine, selection, HZ, interval, metric, error and sigma in points, time scaling's error, the truth), for
//! looking at where bars miss; `-- --kernel-reads MS`: the intervals under the kernel's
//! rotation instead, read every MS ms (`stat -I --errors --rotation kernel` reads every 100).

#[path = "../tests/harness.rs"]
mod harness;

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

use harness::{
    Measured, Rotation, SimTree, measure, measure_intervals, measure_intervals_kernel,
    percent_metrics,
};
use tmetric_catalog::Model;
use tmetric_engine::{Bar, Select, Strategy};
use tmetric_sim::{Machine, PmuClass, SimWorkload};

/// Milliseconds of simulated time each selection is counted for, and between reads.
const RUN_MS: u64 = 1_000;
const READ_MS: u64 = 100;
/// `-- --intervals`: the `-I` interval, in ms.
const INTERVAL_MS: u64 = 250;
/// How far a value may pass a bound of the TMA tree before it is impossible (8-bit
/// PERF_METRICS rounding is 0.4 pp a field).
const TOLERANCE_PP: f64 = 0.5;
const SUM_TOLERANCE_PP: f64 = 1.0;

/// The kernels' HZ: Debian's and Ubuntu's 250, Fedora's and RHEL's 1000.
const HZ: [u32; 2] = [250, 1000];

/// How a class's phases follow each other.
#[derive(Clone)]
enum Pattern {
    /// A random phase for a random length in `[lo, hi]` ms.
    Random(f64, f64),
    /// Phases in turn, each for this many rotation intervals (1000 / HZ ms).
    Rotations(f64),
    /// Phases in turn, each for a random length in its `[lo, hi]` ms.
    Lengths(Vec<[f64; 2]>),
    /// Phases in turn, each for a random length in `[lo, hi]` rotation intervals.
    RotationLengths(f64, f64),
}

/// A workload class: which of the `phased` workload's phases it runs (0 compute, 1 memory,
/// 2 frontend) and how they follow each other.
#[derive(Clone)]
struct Class {
    name: &'static str,
    phases: &'static [usize],
    pattern: Pattern,
    /// Every CPU at the same point of the phases (a program whose threads meet at barriers),
    /// where the others give each CPU its own random point.
    in_step: bool,
}

fn classes() -> Vec<Class> {
    use Pattern::*;
    let c = |name, phases, pattern| Class { name, phases, pattern, in_step: false };
    let in_step = |name, phases, pattern| Class { name, phases, pattern, in_step: true };
    vec![
        c("random 2-40 ms", &[0, 1, 2], Random(2.0, 40.0)),
        c("short random 0.1-1 ms", &[0, 1, 2], Random(0.1, 1.0)),
        c("rare bursts", &[0, 1], Lengths(vec![[50.0, 150.0], [0.5, 2.0]])),
        c("slow 150-400 ms", &[0, 1, 2], Random(150.0, 400.0)),
        c("periodic 1/2 rotation", &[0, 1], Rotations(0.5)),
        c("periodic 1 rotation", &[0, 1], Rotations(1.0)),
        c("periodic 2 rotations", &[0, 1], Rotations(2.0)),
        c("periodic 4 rotations", &[0, 1], Rotations(4.0)),
        c("periodic 8 rotations", &[0, 1], Rotations(8.0)),
        c("periodic 12 rotations", &[0, 1], Rotations(12.0)),
        c("jittered ~1 rotation", &[0, 1], RotationLengths(0.8, 1.2)),
        c("frames 16.7 ms", &[0, 2], Lengths(vec![[11.7, 11.7], [5.0, 5.0]])),
        c("100 Hz", &[0, 1], Lengths(vec![[6.0, 6.0], [4.0, 4.0]])),
        in_step("random 2-40 ms, CPUs in step", &[0, 1, 2], Random(2.0, 40.0)),
        in_step("periodic 1 rotation, CPUs in step", &[0, 1], Rotations(1.0)),
        in_step("periodic 2 rotations, CPUs in step", &[0, 1], Rotations(2.0)),
    ]
}

/// The workload of `class` at kernel `hz` with `seed`, as the JSON a user would write.
fn workload(class: &Class, hz: u32, seed: u64, realistic: bool, machine: &str) -> SimWorkload {
    let (_, text) = tmetric_sim::workload::BUILTIN
        .iter()
        .find(|(n, _)| *n == "phased")
        .expect("the phased workload is built in");
    let mut json: serde_json::Value = serde_json::from_str(text).expect("phased parses");
    let rotation = tmetric_sim::realism::mux_interval_ms(hz) as f64;
    let list = json["phases"]["list"].as_array().expect("a phase list").clone();
    let list: Vec<serde_json::Value> = class.phases.iter().map(|&i| list[i].clone()).collect();
    let mut phases = serde_json::json!({ "list": list, "seed": seed.wrapping_mul(7919) + 17 });
    match &class.pattern {
        Pattern::Random(lo, hi) => phases["switch_random_ms"] = serde_json::json!([lo, hi]),
        Pattern::Rotations(k) => phases["switch_every_ms"] = serde_json::json!(k * rotation),
        Pattern::Lengths(l) => phases["lengths_ms"] = serde_json::json!(l),
        Pattern::RotationLengths(lo, hi) => {
            let one = [lo * rotation, hi * rotation];
            phases["lengths_ms"] = serde_json::json!(vec![one; class.phases.len()]);
        }
    }
    json["phases"] = phases;
    // Shares off the round numbers the built-in workload gives where PERF_METRICS rounds them:
    // a share of 40 % is 102/255 exactly, so it would round nothing, kinder than hardware.
    // (Only there: on Skylake the simulator's derivation of `UOPS_ISSUED.ANY` from the tree
    // jumps to near zero for some shares off those numbers.)
    let rounds = Machine::named(machine).is_some_and(|m| {
        m.pmus.iter().any(|p| matches!(&p.class, PmuClass::X86Core(c) if c.topdown_events > 0))
    });
    if let Some(top) = json["topdown"].as_object_mut().filter(|_| rounds) {
        jitter_shares(top, seed, 0);
    }
    if let Some(list) = json["phases"]["list"].as_array_mut().filter(|_| rounds) {
        for (k, phase) in list.iter_mut().enumerate() {
            if let Some(top) = phase["topdown"].as_object_mut() {
                jitter_shares(top, seed, k as u64 + 1);
            }
        }
    }
    json["description"] = serde_json::json!(class.name);
    // The kernel's draws (timer and CPU offsets, each event's overcount) are each run's own.
    // With the bench's seed alone, every class and HZ of a seed repeated the same overcount
    // draws, so a selection's coverage rested on three draws per event (TopdownL1 alone on
    // neoverse-n2 held 83.3 % at 2 sigma: one seed's draw near the bound missed in every class).
    let kernel_seed = class
        .name
        .bytes()
        .fold(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ u64::from(hz), |h, b| {
            (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
        });
    json["kernel"] = serde_json::json!({ "hz": hz, "realistic": realistic, "seed": kernel_seed });
    if class.in_step {
        json["cpu_offsets_ms"] = serde_json::json!(vec![0; 256]);
    }
    let text = serde_json::to_string_pretty(&json).expect("serialises");
    SimWorkload::parse(&text, &format!("class `{}`", class.name)).unwrap_or_else(|e| panic!("{e}"))
}

/// Moves a workload's level-1 topdown shares (percent) off round numbers, the same for a
/// `seed` and `phase`: retiring and backend bound trade up to 0.2 points (half a PERF_METRICS
/// step either way), so level 1 still sums to 100. Only those two: moving frontend bound and
/// bad speculation, or the deeper nodes, can leave the simulator's derived counts
/// inconsistent (Skylake's `UOPS_ISSUED.ANY` then comes out near zero).
fn jitter_shares(top: &mut serde_json::Map<String, serde_json::Value>, seed: u64, phase: u64) {
    let draw = |key: &str| {
        let mut h = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ phase.wrapping_mul(0xbf58_476d);
        for b in key.bytes() {
            h = (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3);
        }
        h ^= h >> 29;
        h = h.wrapping_mul(0x94d0_49bb_1331_11eb);
        (h >> 11) as f64 / (1u64 << 53) as f64
    };
    let pairs = [("tma_retiring", "tma_backend_bound"), ("retiring", "backend_bound")];
    for (a, b) in pairs {
        let share = |k: &str| top.get(k).and_then(serde_json::Value::as_f64);
        let (Some(x), Some(y)) = (share(a), share(b)) else { continue };
        let d = ((draw(a) - 0.5) * 0.4).clamp(0.5 - x, y - 0.5);
        top[a] = serde_json::json!(x + d);
        top[b] = serde_json::json!(y - d);
    }
}

/// Errors, bars and impossible values of one strategy over some values.
#[derive(Default, Clone, Copy)]
struct Stats {
    sum: f64,
    worst: f64,
    n: usize,
    /// Values with a real bar, and those whose truth is within 1, 2, 3 sigma.
    bars: usize,
    within: [usize; 3],
    /// `Exact` values more than 0.05 pp off.
    exact_off: usize,
    impossible: usize,
}

impl Stats {
    fn add(&mut self, m: &Measured) {
        let e = (m.value - m.truth).abs() * m.scale;
        self.sum += e;
        self.worst = self.worst.max(e);
        self.n += 1;
        match m.bar {
            Bar::Sigma(s) if s > 0.0 => {
                self.bars += 1;
                for (k, within) in self.within.iter_mut().enumerate() {
                    if (m.value - m.truth).abs() <= (k + 1) as f64 * s + 1e-12 * m.truth.abs() {
                        *within += 1;
                    }
                }
            }
            Bar::Exact if e > 0.05 => self.exact_off += 1,
            _ => {}
        }
    }

    fn merge(&mut self, o: &Stats) {
        self.sum += o.sum;
        self.worst = self.worst.max(o.worst);
        self.n += o.n;
        self.bars += o.bars;
        for k in 0..3 {
            self.within[k] += o.within[k];
        }
        self.exact_off += o.exact_off;
        self.impossible += o.impossible;
    }

    fn mean(&self) -> f64 {
        if self.n == 0 { 0.0 } else { self.sum / self.n as f64 }
    }

    fn cover(&self, k: usize) -> f64 {
        100.0 * self.within[k] as f64 / self.bars.max(1) as f64
    }
}

/// tmetric's, perf's and the alone errors over the same values.
#[derive(Default, Clone, Copy)]
struct Three {
    t: Stats,
    p: Stats,
    a: Stats,
    /// Values tmetric gave that perf did not.
    perf_missing: usize,
    /// `--intervals`: each interval's values as estimated, and as scaled by time.
    it: Stats,
    is: Stats,
}

impl Three {
    fn merge(&mut self, o: &Three) {
        self.t.merge(&o.t);
        self.p.merge(&o.p);
        self.a.merge(&o.a);
        self.perf_missing += o.perf_missing;
        self.it.merge(&o.it);
        self.is.merge(&o.is);
    }

    fn ratio(&self) -> f64 {
        100.0 * self.t.mean() / self.p.mean().max(1e-12)
    }

    /// `--intervals`: the estimate's mean interval error as a share of time scaling's.
    fn interval_ratio(&self) -> f64 {
        100.0 * self.it.mean() / self.is.mean().max(1e-12)
    }
}

fn given(m: &Measured) -> bool {
    m.percent && m.value.is_finite() && m.truth.is_finite()
}

/// The values of `measured` that break the TMA tree's bounds where the truth does not.
fn impossible(model: &Model, measured: &[Measured]) -> usize {
    let pct = |m: &Measured, truth: bool| if truth { m.truth } else { m.value } * m.scale;
    let name = |m: &Measured| model.str(model.metric(m.metric).name);
    let groups = |m: &Measured| model.str(model.metric(m.metric).groups);
    let parent = |m: &Measured| -> Option<&Measured> {
        groups(m).split(';').find_map(|g| {
            let p = g.strip_suffix("_group")?;
            measured.iter().find(|o| name(o) == p && o.metric != m.metric)
        })
    };
    let range = |m: &Measured, truth: bool| {
        let v = pct(m, truth);
        (-TOLERANCE_PP..=100.0 + TOLERANCE_PP).contains(&v)
    };
    let mut bad = 0;
    for m in measured.iter().filter(|m| given(m)) {
        if range(m, true) && !range(m, false) {
            bad += 1;
            continue;
        }
        if let Some(p) = parent(m).filter(|p| given(p))
            && pct(m, true) <= pct(p, true) + TOLERANCE_PP
            && pct(m, false) > pct(p, false) + TOLERANCE_PP
        {
            bad += 1;
        }
    }
    let level1: Vec<&Measured> = measured
        .iter()
        .filter(|m| given(m) && parent(m).is_none())
        .filter(|m| groups(m).split(';').any(|g| g == "TopdownL1" || g == "PipelineL1"))
        .collect();
    if level1.len() >= 4 {
        let sum = |truth: bool| level1.iter().map(|m| pct(m, truth)).sum::<f64>();
        if (sum(true) - 100.0).abs() <= 0.1 && (sum(false) - 100.0).abs() > SUM_TOLERANCE_PP {
            bad += 1;
        }
    }
    bad
}

/// One selection on one workload: tmetric and perf over the values both gave, and with
/// `alone` each of those metrics counted alone too.
fn measure_three(
    tree: &SimTree,
    item: &str,
    metrics: &[usize],
    workload: &SimWorkload,
    alone: bool,
) -> Three {
    if ONLY_INTERVALS.load(Ordering::Relaxed) {
        let mut out = Three::default();
        add_intervals(tree, item, metrics, workload, &mut out);
        return out;
    }
    let tm = measure(tree, item, metrics, Strategy::Tmetric, workload, RUN_MS, READ_MS);
    let pm = measure(tree, item, metrics, Strategy::Perf, workload, RUN_MS, READ_MS);
    let mut out = Three::default();
    // tmetric's values count when it prints them without a flag; perf flags none.
    let unflagged: Vec<Measured> = tm.iter().filter(|m| !m.flagged).cloned().collect();
    out.t.impossible = impossible(tree.model, &unflagged);
    out.p.impossible = impossible(tree.model, &pm);
    for m in tm.iter().filter(|m| given(m)) {
        let Some(p) = pm.iter().find(|o| o.metric == m.metric).filter(|o| given(o)) else {
            out.perf_missing += 1;
            continue;
        };
        if MISSES.load(Ordering::Relaxed)
            && let Bar::Sigma(s) = m.bar
            && ((m.value - m.truth).abs() > 2.0 * s || (m.value - m.truth).abs() * m.scale > 5.0)
        {
            println!(
                "miss {} {} {} {}: {:.3} truth {:.3} sigma {:.4} ({:.1}) perf {:.3}",
                workload.description,
                tree.name,
                item,
                tree.model.str(tree.model.metric(m.metric).name),
                m.value * m.scale,
                m.truth * m.scale,
                s * m.scale,
                (m.value - m.truth).abs() / s,
                p.value * p.scale
            );
        }
        out.t.add(m);
        out.p.add(p);
        if !alone {
            continue;
        }
        let name = tree.model.str(tree.model.metric(m.metric).name);
        let alone = measure(tree, name, &[m.metric], Strategy::Tmetric, workload, RUN_MS, READ_MS);
        if let Some(a) = alone.iter().find(|o| o.metric == m.metric).filter(|o| given(o)) {
            out.a.add(a);
        }
    }
    if INTERVALS.load(Ordering::Relaxed) {
        add_intervals(tree, item, metrics, workload, &mut out);
    }
    out
}

/// `--intervals`: the run again as `stat -I` prints it, into `out`'s interval stats.
fn add_intervals(
    tree: &SimTree,
    item: &str,
    metrics: &[usize],
    workload: &SimWorkload,
    out: &mut Three,
) {
    let kernel_read_ms = KERNEL_READ_MS.load(Ordering::Relaxed);
    let intervals = if kernel_read_ms > 0 {
        Some(measure_intervals_kernel(
            tree,
            item,
            metrics,
            workload,
            (RUN_MS, INTERVAL_MS),
            kernel_read_ms,
        ))
    } else {
        measure_intervals(tree, item, metrics, Rotation::Own, workload, RUN_MS, INTERVAL_MS)
    };
    let Some(intervals) = intervals else {
        return;
    };
    for (k, interval) in intervals.iter().enumerate() {
        if DUMP_Z.load(Ordering::Relaxed) {
            for (m, scaled) in interval.ours.iter().zip(&interval.scaled).filter(|m| given(m.0)) {
                if let Bar::Sigma(s) = m.bar {
                    println!(
                        "z\t{}\t{}\t{item}\t{}\t{}\t{}\t{:.6}\t{:.6}\t{:.6}\t{:.6}",
                        workload.description,
                        tree.name,
                        tree.hz,
                        k + 1,
                        tree.model.str(tree.model.metric(m.metric).name),
                        (m.value - m.truth) * m.scale,
                        s * m.scale,
                        (scaled.value - m.truth) * m.scale,
                        m.truth * m.scale
                    );
                }
            }
        }
        // What each way prints without a flag beside it (time scaling has no bar, so none).
        let unflagged: Vec<Measured> =
            interval.ours.iter().filter(|m| !m.flagged).cloned().collect();
        out.it.impossible += impossible(tree.model, &unflagged);
        out.is.impossible += impossible(tree.model, &interval.scaled);
        for (o, s) in interval.ours.iter().zip(&interval.scaled) {
            if given(o) && given(s) {
                out.it.add(o);
                out.is.add(s);
            }
        }
    }
}

/// `-- --misses`: print each tmetric value whose truth is outside 2 sigma or 5 points away.
static MISSES: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
/// `-- --kernel-reads MS`: the intervals under the kernel's rotation, read every MS.
static KERNEL_READ_MS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
/// `-- --dump-z`: print each interval value's error and sigma, a line each (`z` first).
static DUMP_Z: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
/// `-- --only-intervals`: measure the `-I` intervals alone (not the totals, perf or alone).
static ONLY_INTERVALS: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
/// `-- --intervals`: measure each run's `-I` intervals too.
static INTERVALS: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Arm's TopdownL1 fits its counters, so the Arm models are also measured with their
/// instruction mix and cycle accounting beside it (`-M` with three items), which do not.
const ARM_MULTIPLEXED: &str = "TopdownL1,Operation_Mix,Cycle_Accounting";

fn selections(model: &'static Model, quick: bool) -> Vec<String> {
    let levels = if quick { 3 } else { 6 };
    let arm = ARM_MULTIPLEXED.split(',').all(|g| !model.select(g).is_empty());
    (1..=levels)
        .map(|l| format!("TopdownL{l}"))
        .chain((1..=2).map(|l| format!("PipelineL{l}")))
        .filter(|g| !model.select(g).is_empty())
        .chain(arm.then(|| ARM_MULTIPLEXED.to_string()))
        .collect()
}

/// One unit of work: a machine, a selection, a class, an HZ and a seed.
struct Task {
    machine: &'static str,
    selection: String,
    class: usize,
    hz: u32,
    seed: u64,
}

/// Results by (class, machine, selection, HZ).
type Results = BTreeMap<(usize, &'static str, String, u32), Three>;

fn arg<'a>(args: &'a [String], flag: &str) -> Option<&'a str> {
    args.iter().position(|a| a == flag).and_then(|i| args.get(i + 1)).map(String::as_str)
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    // `-- --perf-version X.Y`: that vintage's tables, for the simulator's truth and for
    // tmetric and perf's grouping alike.
    if let Some(version) = arg(&args, "--perf-version")
        && let Err(e) = tmetric_catalog::select_vintage(version)
    {
        eprintln!("accuracy: --perf-version: {e}");
        std::process::exit(2);
    }
    // Without `--perf-version`, perf 6.12's tables, on which docs/accuracy.md's full run and
    // targets are measured; `--quick --seeds 3` gives the same on 7.2's within noise (tmetric
    // 0.054 vs 0.057 pp, 21.2 vs 21.3 % of perf's error, 2 sigma 96.4 vs 96.2 %).
    tmetric_catalog::prefer_base_data();
    let quick = args.iter().any(|a| a == "--quick");
    let exact = args.iter().any(|a| a == "--exact");
    let detail = args.iter().any(|a| a == "--detail");
    MISSES.store(args.iter().any(|a| a == "--misses"), Ordering::Relaxed);
    DUMP_Z.store(args.iter().any(|a| a == "--dump-z"), Ordering::Relaxed);
    let kernel_reads = arg(&args, "--kernel-reads").and_then(|s| s.parse().ok()).unwrap_or(0);
    KERNEL_READ_MS.store(kernel_reads, Ordering::Relaxed);
    let only_intervals = args.iter().any(|a| a == "--only-intervals");
    ONLY_INTERVALS.store(only_intervals, Ordering::Relaxed);
    INTERVALS.store(only_intervals || args.iter().any(|a| a == "--intervals"), Ordering::Relaxed);
    let check = args.iter().any(|a| a == "--check");
    let seeds: u64 =
        arg(&args, "--seeds").and_then(|s| s.parse().ok()).unwrap_or(if quick { 1 } else { 3 });
    let mut machines: Vec<&'static str> = if quick {
        vec!["sapphirerapids", "skylakex", "amdzen4"]
    } else {
        Machine::names().to_vec()
    };
    if let Some(name) = arg(&args, "--machine") {
        machines.retain(|m| *m == name);
    }
    let all_classes = classes();
    // `--class NAME`, as often as wanted.
    let wanted: Vec<&str> =
        args.windows(2).filter(|w| w[0] == "--class").map(|w| w[1].as_str()).collect();
    let class_ids: Vec<usize> = (0..all_classes.len())
        .filter(|&i| wanted.is_empty() || wanted.contains(&all_classes[i].name))
        .collect();
    let hzs: Vec<u32> = HZ
        .iter()
        .copied()
        .filter(|h| arg(&args, "--hz").is_none_or(|a| a == h.to_string()))
        .collect();
    // Trees per machine and HZ (the tree says the kernel's rotation interval), made once.
    let trees: Vec<SimTree> =
        machines.iter().flat_map(|m| hzs.iter().map(|&hz| SimTree::with_hz(m, hz))).collect();
    let mut tasks = Vec::new();
    for tree in trees.iter().filter(|t| Some(&t.hz) == hzs.first()) {
        for selection in selections(tree.model, quick) {
            if arg(&args, "--selection").is_some_and(|s| s != selection) {
                continue;
            }
            for &class in &class_ids {
                for &hz in &hzs {
                    for seed in 0..seeds {
                        tasks.push(Task {
                            machine: tree.name,
                            selection: selection.clone(),
                            class,
                            hz,
                            seed,
                        });
                    }
                }
            }
        }
    }
    println!(
        "accuracy on simulated machines: {} machines, {} classes, HZ {:?}, {} seed(s), {} runs of {RUN_MS} ms read every {READ_MS} ms; simulator: {}",
        machines.len(),
        class_ids.len(),
        hzs,
        seeds,
        tasks.len(),
        if exact {
            "exact lockstep model"
        } else {
            "realistic (hrtimer grid at a random boot offset, up to 30 us lateness, per-CPU phases, interrupt overcount, up to 0.1 % noise, 8-bit PERF_METRICS)"
        }
    );
    let start = std::time::Instant::now();
    let results: Mutex<Results> = Mutex::new(BTreeMap::new());
    let next = AtomicUsize::new(0);
    let workers =
        std::thread::available_parallelism().map_or(1, |n| n.get()).min(tasks.len().max(1));
    std::thread::scope(|scope| {
        for _ in 0..workers {
            scope.spawn(|| {
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let Some(task) = tasks.get(i) else { break };
                    let tree = trees
                        .iter()
                        .find(|t| t.name == task.machine && t.hz == task.hz)
                        .expect("a tree");
                    let metrics = percent_metrics(tree.model, &task.selection);
                    if metrics.is_empty() {
                        continue;
                    }
                    let w = workload(
                        &all_classes[task.class],
                        task.hz,
                        task.seed,
                        !exact,
                        task.machine,
                    );
                    // Alone, a metric meets only noise and rounding, which the seeds
                    // change little: counted for the first seed only, to keep the
                    // bench within minutes.
                    let three = measure_three(tree, &task.selection, &metrics, &w, task.seed == 0);
                    let key = (task.class, task.machine, task.selection.clone(), task.hz);
                    results.lock().unwrap().entry(key).or_default().merge(&three);
                    if (i + 1).is_multiple_of(100) {
                        eprintln!(
                            "{} of {} runs, {:.0} s",
                            i + 1,
                            tasks.len(),
                            start.elapsed().as_secs_f64()
                        );
                    }
                }
            });
        }
    });
    let results = results.into_inner().unwrap();
    report(&results, &all_classes, detail, start.elapsed().as_secs_f64(), check);
}

fn stats_header(first: &str) {
    println!(
        "{first:<34} {:>5} | {:>6} {:>6} | {:>6} {:>6} | {:>6} {:>6} | {:>6} | {:>5} {:>5} {:>5} {:>5} | {:>4} {:>4}",
        "n",
        "tmetr",
        "worst",
        "perf",
        "worst",
        "alone",
        "worst",
        "t/p %",
        "bars",
        "1sig",
        "2sig",
        "3sig",
        "imp",
        "perf"
    );
}

fn stats_row(first: &str, r: &Three) {
    println!(
        "{first:<34} {:>5} | {:>6.3} {:>6.2} | {:>6.3} {:>6.2} | {:>6.3} {:>6.2} | {:>6.1} | {:>5} {:>5.1} {:>5.1} {:>5.1} | {:>4} {:>4}",
        r.t.n,
        r.t.mean(),
        r.t.worst,
        r.p.mean(),
        r.p.worst,
        r.a.mean(),
        r.a.worst,
        r.ratio(),
        r.t.bars,
        r.t.cover(0),
        r.t.cover(1),
        r.t.cover(2),
        r.t.impossible,
        r.p.impossible,
    );
}

fn report(results: &Results, classes: &[Class], detail: bool, seconds: f64, check: bool) {
    println!(
        "errors: mean and worst absolute error in percentage points; t/p %: tmetric's mean error as a share of perf's; bars: tmetric's values with a real bar, and the share whose truth is within 1/2/3 sigma; imp: impossible values printed unflagged (tmetric, perf)"
    );
    let mut by_class: BTreeMap<usize, Three> = BTreeMap::new();
    let mut by_class_hz: BTreeMap<(usize, u32), Three> = BTreeMap::new();
    let mut by_selection: BTreeMap<(&str, &str), Three> = BTreeMap::new();
    let mut total = Three::default();
    for ((class, machine, selection, hz), r) in results {
        by_class.entry(*class).or_default().merge(r);
        by_class_hz.entry((*class, *hz)).or_default().merge(r);
        by_selection.entry((machine, selection.as_str())).or_default().merge(r);
        total.merge(r);
    }
    println!("\nper class (all machines, selections, HZ and seeds)");
    stats_header("class");
    for (class, r) in &by_class {
        stats_row(classes[*class].name, r);
    }
    stats_row("TOTAL", &total);
    println!("\nper class and HZ");
    stats_header("class @ HZ");
    for ((class, hz), r) in &by_class_hz {
        stats_row(&format!("{} @ {hz}", classes[*class].name), r);
    }
    println!("\nper machine and selection (all classes)");
    stats_header("machine selection");
    for ((machine, selection), r) in &by_selection {
        stats_row(&format!("{machine} {selection}"), r);
    }
    if detail {
        println!("\nper class, machine, selection and HZ");
        stats_header("class machine selection @ HZ");
        for ((class, machine, selection, hz), r) in results {
            stats_row(&format!("{} {machine} {selection} @ {hz}", classes[*class].name), r);
        }
    }
    if total.it.n > 0 {
        println!(
            "\n-I {INTERVAL_MS} ms intervals, per class: each interval's values estimated from its turns (tmetric) and its counts scaled by time (scaled), against the interval's truth"
        );
        println!(
            "{:<34} {:>5} | {:>6} {:>6} | {:>6} {:>6} | {:>6} | {:>5} {:>5} {:>5} {:>5} | {:>4} {:>4}",
            "class",
            "n",
            "tmetr",
            "worst",
            "scaled",
            "worst",
            "t/s %",
            "bars",
            "1sig",
            "2sig",
            "3sig",
            "imp",
            "scal"
        );
        let row = |first: &str, r: &Three| {
            println!(
                "{first:<34} {:>5} | {:>6.3} {:>6.2} | {:>6.3} {:>6.2} | {:>6.1} | {:>5} {:>5.1} {:>5.1} {:>5.1} | {:>4} {:>4}",
                r.it.n,
                r.it.mean(),
                r.it.worst,
                r.is.mean(),
                r.is.worst,
                r.interval_ratio(),
                r.it.bars,
                r.it.cover(0),
                r.it.cover(1),
                r.it.cover(2),
                r.it.impossible,
                r.is.impossible,
            );
        };
        for (class, r) in &by_class {
            row(classes[*class].name, r);
        }
        row("TOTAL", &total);
        println!("\n-I intervals, per class and HZ");
        for ((class, hz), r) in &by_class_hz {
            row(&format!("{} @ {hz}", classes[*class].name), r);
        }
        println!("\n-I intervals, per machine and selection");
        for ((machine, selection), r) in &by_selection {
            row(&format!("{machine} {selection}"), r);
        }
    }
    let missing: usize = total.perf_missing;
    println!(
        "\n{} values ({} more that tmetric gave and perf did not); {:.1} s",
        total.t.n, missing, seconds
    );
    // The targets.
    let mut missed = Vec::new();
    for (class, r) in &by_class {
        if r.ratio() > 50.0 {
            missed.push(format!(
                "{}: tmetric/perf {:.1} % > 50 %",
                classes[*class].name,
                r.ratio()
            ));
        }
        if r.t.bars > 0 && !(90.0..=99.0).contains(&r.t.cover(1)) {
            missed.push(format!(
                "{}: 2 sigma {:.1} % not in 90-99 %",
                classes[*class].name,
                r.t.cover(1)
            ));
        }
        if r.t.bars > 0 && !(60.0..=80.0).contains(&r.t.cover(0)) {
            missed.push(format!(
                "{}: 1 sigma {:.1} % not in 60-80 %",
                classes[*class].name,
                r.t.cover(0)
            ));
        }
    }
    if total.ratio() > 20.0 {
        missed.push(format!("all classes: tmetric/perf {:.1} % > 20 %", total.ratio()));
    }
    if total.t.impossible > 0 {
        missed.push(format!("{} impossible values printed unflagged", total.t.impossible));
    }
    if total.t.exact_off > 0 {
        missed.push(format!("{} values called exact are more than 0.05 pp off", total.t.exact_off));
    }
    println!(
        "targets (per class t/p <= 50 %, all <= 20 %, 2 sigma 90-99 %, 1 sigma 60-80 %, no impossible value unflagged, no inexact `Exact`): {}",
        if missed.is_empty() { "met".to_string() } else { format!("{} missed", missed.len()) }
    );
    for m in &missed {
        println!("  missed: {m}");
    }
    if check && !missed.is_empty() {
        std::process::exit(1);
    }
}
