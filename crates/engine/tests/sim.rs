//! The engine against the simulated kernel: random metric selections on every simulated
//! machine open without a refusal, every metric gets a value, and metrics counted together
//! equal the simulator's true values after multiplex scaling.

use std::path::PathBuf;
use std::sync::{Arc, Mutex, Weak};

use proptest::prelude::*;
use tmetric_catalog::Model;
use tmetric_engine::{
    EvalInput, Evaluator, Evaluators, Host, Pick, Placement, Plan, PlanOptions, Root, Select,
};
use tmetric_runtime::{CounterSet, Sysfs, Target};
use tmetric_sim::{Machine as SimMachine, SimKernel};

/// A simulated machine's sysfs and procfs.
struct Tree {
    name: &'static str,
    sys: PathBuf,
    proc_root: PathBuf,
    model: &'static Model,
}

/// Every simulated machine's tree, in one private temporary directory removed when the last
/// test using it drops it (a static would never be dropped, leaving the directory behind).
struct Trees {
    trees: Vec<Tree>,
    _dir: tempfile::TempDir,
}

impl std::ops::Deref for Trees {
    type Target = Vec<Tree>;
    fn deref(&self) -> &Vec<Tree> {
        &self.trees
    }
}

/// The trees, shared by the tests that run at the same time. Each test's thread keeps them
/// until it ends (a property test's cases then share one copy), so they are written again
/// only when no test thread holds them, and removed when the last one ends.
fn trees() -> Arc<Trees> {
    static SHARED: Mutex<Weak<Trees>> = Mutex::new(Weak::new());
    thread_local! {
        static KEPT: std::cell::RefCell<Option<Arc<Trees>>> = const { std::cell::RefCell::new(None) };
    }
    let mut shared = SHARED.lock().unwrap_or_else(|p| p.into_inner());
    let trees = shared.upgrade().unwrap_or_else(|| {
        let trees = Arc::new(write_trees());
        *shared = Arc::downgrade(&trees);
        trees
    });
    KEPT.with(|kept| *kept.borrow_mut() = Some(trees.clone()));
    trees
}

fn write_trees() -> Trees {
    let dir = tempfile::Builder::new().prefix("tmetric-engine-sim-").tempdir().expect("a temp dir");
    let trees = SimMachine::names()
        .iter()
        .map(|&name| {
            let machine = SimMachine::named(name).expect("a named machine");
            let root = dir.path().join(name);
            machine.write_sysfs(&root.join("sys"), &root.join("proc")).expect("sysfs written");
            let sysfs = Sysfs::new(root.join("sys"));
            let cpuid =
                tmetric_runtime::sysfs::host_cpuid(&sysfs, &root.join("proc")).expect("cpuid");
            let model = tmetric_catalog::model_for_cpuid(&cpuid)
                .unwrap_or_else(|| panic!("{name}: cpuid {cpuid} maps to no model"));
            Tree { name, sys: root.join("sys"), proc_root: root.join("proc"), model }
        })
        .collect();
    Trees { trees, _dir: dir }
}

/// Metrics of the model on PMUs the machine has, excluding the ones that need inputs no
/// kernel counts (retire latencies, tool-only metrics are fine).
fn candidates(tree: &Tree) -> Vec<usize> {
    let model = tree.model;
    (0..model.metric_count())
        .filter(|&m| {
            let metric = model.metric(m);
            !metric.runtime_param && model.str(metric.compat).is_empty()
        })
        .collect()
}

struct Outcome {
    open_failures: Vec<String>,
    splits: Vec<String>,
    checked: usize,
    problems: Vec<String>,
}

/// The true value of `root`: the metric over the simulator's exact counts for the same
/// `ns` on `cpus`.
fn true_value(
    tree: &Tree,
    plan: &Plan,
    root: &Root,
    kernel: &SimKernel,
    cpus: &[u32],
    ns: u64,
    literals: [f64; tmetric_model::Literal::COUNT],
) -> f64 {
    let mut evaluator = Evaluator::new(tree.model);
    evaluator.literals = literals;
    for (slot, row) in root.slot_rows.iter().enumerate() {
        let Some(r) = row else { continue };
        let row = &plan.rows()[*r];
        // An uncore event sums its boxes; `source_count()` is how many.
        evaluator.source_counts[slot] = plan.source_count(*r);
        // `aggr_nr()`: one counter per box and CPU it is read on.
        let mut counters = 0usize;
        evaluator.values[slot] = match &row.source {
            tmetric_engine::Source::Counter(_) => row
                .specs()
                .iter()
                .map(|&s| {
                    let spec = &plan.specs()[s];
                    let on: Vec<u32> = match &spec.cpus {
                        Some(mask) => cpus.iter().copied().filter(|c| mask.contains(c)).collect(),
                        None => cpus.to_vec(),
                    };
                    counters += on.len();
                    on.iter()
                        .map(|&c| kernel.true_count(&spec.attr, c, ns).unwrap_or(0) as f64)
                        .sum::<f64>()
                })
                .sum(),
            tmetric_engine::Source::Tool(_) => ns as f64 / 1e9,
            // Not sampled: 0, as perf 6.12 reads it without --record-tpebs.
            tmetric_engine::Source::RetireLatency => plan.retire_latency_of(&row.name),
            _ => f64::NAN,
        };
        evaluator.aggr_nrs[slot] = counters.max(1) as f64;
    }
    evaluator.evaluate(tree.model, &[root.metric]).remove(0).value
}

fn run(tree: &Tree, metrics: &[usize], ms: u64) -> Outcome {
    let sysfs = Sysfs::new(&tree.sys);
    let machine = Host::probe(&sysfs, &tree.proc_root, None);
    let literals = machine.literals(true, None);
    let mut plan = Plan::new(literals);
    let picks: Vec<Pick> = metrics
        .iter()
        .map(|&metric| Pick { model: tree.model, metric, item: String::new() })
        .collect();
    plan.add_metrics(
        &picks,
        &machine,
        &PlanOptions { system_wide: true, ..PlanOptions::default() },
        true,
    );
    let kernel = SimKernel::manual(SimMachine::named(tree.name).expect("machine"));
    let cpus = sysfs.online_cpus().expect("online cpus");
    let mut counters = CounterSet::open_with(
        kernel.clone(),
        plan.specs().to_vec(),
        plan.groups(),
        plan.sticky(),
        Target::Cpus(cpus.clone()),
    )
    .expect("plan is consistent");
    let open_failures: Vec<String> = (0..plan.specs().len())
        .filter_map(|s| {
            counters.failure(s).map(|f| format!("{}: {}", plan.specs()[s].name, f.errno))
        })
        .collect();
    counters.enable().expect("enable");
    let ns = ms * 1_000_000;
    kernel.advance(ns);
    counters.disable().expect("disable");
    let snapshot = counters.read().expect("read");
    let sample = EvalInput::new(&snapshot, ns as f64 / 1e9);
    let mut evaluators = Evaluators::default();
    let results = plan.evaluate(&mut evaluators, &sample);
    let mut problems = Vec::new();
    let mut checked = 0;
    for (root, result) in plan.roots().iter().zip(&results) {
        let name = tree.model.str(tree.model.metric(root.metric).name);
        if let Some(fail) = result.failure {
            problems.push(format!("{name}: no value: {fail}"));
            continue;
        }
        if !result.missing.is_empty() || !matches!(root.placement, Placement::Together { .. }) {
            continue;
        }
        let truth = true_value(tree, &plan, root, &kernel, &cpus, ns, literals);
        checked += 1;
        // Counts are whole numbers per CPU, scaled by enabled/running: an input counted n
        // times on c CPUs is known to about c/n, and events the workload makes rare count a few hundred times in a
        // short run; a difference of two such inputs is known to an absolute 1e-5 (a
        // thousandth of a percentage point).
        // Each CPU's count is whole (up to one off per CPU, times enabled/running once
        // scaled), and the inputs' errors add up in a product or ratio.
        let counts: Vec<(f64, f64)> = root
            .slot_rows
            .iter()
            .flatten()
            .flat_map(|&row| plan.rows()[row].specs())
            .filter_map(|spec| snapshot.aggregate(spec))
            .map(|a| {
                let stretch = a.enabled as f64 / (a.running as f64).max(1.0);
                (a.value.max(1) as f64, stretch.max(1.0))
            })
            .collect();
        let fewest = counts.iter().map(|c| c.0).fold(f64::INFINITY, f64::min);
        let granularity: f64 =
            counts.iter().map(|(n, stretch)| 2.0 * cpus.len() as f64 * stretch / n).sum();
        let close = (truth.is_nan() && result.value.is_nan())
            || (result.value - truth).abs() <= (1e-6 + granularity) * truth.abs().max(1e-9) + 1e-5;
        if !close {
            problems.push(format!(
                "{name}: {} measured, {truth} true (fewest count {fewest})",
                result.value
            ));
        }
    }
    let splits = counters
        .splits()
        .iter()
        .map(|s| {
            let names: Vec<String> =
                s.events.iter().map(|&e| plan.specs()[e].name.clone()).collect();
            format!("{{{}}}: {}", names.join(","), s.errno)
        })
        .collect();
    Outcome { open_failures, splits, checked, problems }
}

#[test]
fn topdown_l1_on_sapphire_rapids_equals_the_profile() {
    let all = trees();
    let tree = all.iter().find(|t| t.name == "sapphirerapids").expect("spr");
    let metrics = tree.model.select("TopdownL1");
    let outcome = run(tree, &metrics, 200);
    assert!(outcome.open_failures.is_empty(), "{:?}", outcome.open_failures);
    assert!(outcome.splits.is_empty(), "{:?}", outcome.splits);
    assert!(outcome.problems.is_empty(), "{:?}", outcome.problems);
    assert_eq!(outcome.checked, metrics.len());
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: std::env::var("TMETRIC_SIM_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(24),
        ..ProptestConfig::default()
    })]

    /// Random selections on every simulated machine: no refusal, no split, every metric a
    /// value, and metrics counted together equal to the truth.
    #[test]
    fn random_selections_open_and_agree(machine in 0usize..64, picks in proptest::collection::vec(0usize..10_000, 1..12)) {
        let trees = trees();
        let tree = &trees[machine % trees.len()];
        let pool = candidates(tree);
        let mut metrics: Vec<usize> = picks.iter().map(|p| pool[p % pool.len()]).collect();
        metrics.sort_unstable();
        metrics.dedup();
        let outcome = run(tree, &metrics, 50);
        prop_assert!(outcome.open_failures.is_empty(), "{}: {:?}", tree.name, outcome.open_failures);
        prop_assert!(outcome.splits.is_empty(), "{}: refused: {:?}", tree.name, outcome.splits);
        prop_assert!(outcome.problems.is_empty(), "{}: {:?}", tree.name, outcome.problems);
    }
}

/// A kernel that refuses topdown metric events, as one without PERF_METRICS would, to show
/// what the user sees when inputs are missing.
#[derive(Clone)]
struct NoTopdown(SimKernel);

impl tmetric_runtime::Syscalls for NoTopdown {
    fn perf_event_open(
        &mut self,
        attr: &tmetric_runtime::Attr,
        pid: i32,
        cpu: i32,
        group_fd: i32,
    ) -> Result<i32, tmetric_runtime::Errno> {
        if attr.type_ == 4 && (0x8000..=0x87ff).contains(&attr.config) {
            return Err(tmetric_runtime::Errno(libc_enoent()));
        }
        self.0.perf_event_open(attr, pid, cpu, group_fd)
    }
    fn read(&mut self, fd: i32, buf: &mut [u8]) -> Result<usize, tmetric_runtime::Errno> {
        self.0.read(fd, buf)
    }
    fn enable(&mut self, fd: i32, group: bool) -> Result<(), tmetric_runtime::Errno> {
        self.0.enable(fd, group)
    }
    fn disable(&mut self, fd: i32, group: bool) -> Result<(), tmetric_runtime::Errno> {
        self.0.disable(fd, group)
    }
    fn reset(&mut self, fd: i32, group: bool) -> Result<(), tmetric_runtime::Errno> {
        self.0.reset(fd, group)
    }
    fn event_id(&mut self, fd: i32) -> Result<u64, tmetric_runtime::Errno> {
        self.0.event_id(fd)
    }
    fn close(&mut self, fd: i32) {
        self.0.close(fd)
    }
}

fn libc_enoent() -> i32 {
    2
}

/// perf prints `tma_bad_speculation` as `0.0 %` when the topdown events are missing, because
/// `max(NaN, 0)` is 0. tmetric prints the number too (perf's rules), but never without the
/// reason.
#[test]
fn a_number_computed_around_a_missing_input_comes_with_its_reason() {
    let all = trees();
    let tree = all.iter().find(|t| t.name == "sapphirerapids").expect("spr");
    let sysfs = Sysfs::new(&tree.sys);
    let machine = Host::probe(&sysfs, &tree.proc_root, None);
    let mut plan = Plan::new(machine.literals(true, None));
    let picks: Vec<Pick> = tree
        .model
        .select("TopdownL1")
        .into_iter()
        .map(|metric| Pick { model: tree.model, metric, item: "TopdownL1".into() })
        .collect();
    plan.add_metrics(
        &picks,
        &machine,
        &PlanOptions { system_wide: true, ..PlanOptions::default() },
        true,
    );
    let kernel = SimKernel::manual(SimMachine::named("sapphirerapids").unwrap());
    let cpus = sysfs.online_cpus().unwrap();
    let mut counters = CounterSet::open_with(
        NoTopdown(kernel.clone()),
        plan.specs().to_vec(),
        plan.groups(),
        plan.sticky(),
        Target::Cpus(cpus),
    )
    .unwrap();
    counters.enable().unwrap();
    kernel.advance(50_000_000);
    let snapshot = counters.read().unwrap();
    let sample = EvalInput::new(&snapshot, 0.05);
    let results = plan.evaluate(&mut Evaluators::default(), &sample);
    let bad_spec = plan
        .roots()
        .iter()
        .position(|r| tree.model.str(tree.model.metric(r.metric).name) == "tma_bad_speculation")
        .expect("tma_bad_speculation selected");
    assert_eq!(results[bad_spec].value, 0.0, "perf's rule: max(NaN, 0) is 0");
    assert!(results[bad_spec].is_partial());
    let refusal = |spec: usize| {
        counters.failure(spec).map(|f| tmetric_engine::Refusal {
            cpu: f.cpu,
            errno: f.errno.0,
            why: f.errno.to_string(),
        })
    };
    let typed = plan.notes(&results, &sample, refusal);
    // The notes are data: the metric computed around the missing input names it, typed.
    assert!(
        typed.iter().any(|n| matches!(n,
            tmetric_engine::Note::Metric { metric, why: tmetric_engine::MetricWhy::ComputedWithout(rows) }
                if metric == "tma_bad_speculation" && rows.iter().any(|r| r == "topdown-retiring"))),
        "{typed:?}"
    );
    let notes: Vec<String> = typed.iter().map(ToString::to_string).collect();
    let note = notes.iter().find(|n| n.starts_with("tma_bad_speculation:")).expect("a note for it");
    assert!(note.contains("computed without") && note.contains("topdown-retiring"), "{note}");
    let retiring = notes.iter().find(|n| n.starts_with("tma_retiring:")).expect("a note");
    assert!(retiring.contains("nan"), "{retiring}");
    assert!(
        notes.iter().any(|n| n.contains("topdown-retiring") && n.contains("ENOENT")),
        "{notes:?}"
    );
}

#[test]
fn a_metric_whose_value_needs_no_counter_still_groups_its_threshold_events() {
    // perf 6.12's tables: the metric it names is 6.12's.
    tmetric_catalog::use_vintage(tmetric_catalog::base_vintage());
    // On a machine without persistent memory `tma_pmm_bound` is `0` (no events), but its
    // threshold reads `tma_memory_bound`, whose topdown events must open behind `slots`.
    let all = trees();
    let tree = all.iter().find(|t| t.name == "sapphirerapids").expect("sapphirerapids");
    let metric = tree.model.metrics_named("tma_pmm_bound")[0];
    let outcome = run(tree, &[metric], 50);
    assert!(outcome.open_failures.is_empty(), "{:?}", outcome.open_failures);
    assert!(outcome.splits.is_empty(), "{:?}", outcome.splits);
    assert!(outcome.problems.is_empty(), "{:?}", outcome.problems);
}

/// perf 6.12's built-in metrics beside `-e` events (`stat-shadow.c`), over known counts on a
/// simulated machine: `CPUs utilized` is task-clock over the wall time, `/sec` per second of
/// task-clock in perf's K/M/G steps, `GHz` cycles per task-clock ns, `insn per cycle`; and
/// inside a group of several only the group's own events pair up (`{cycles,instructions}`
/// has no `GHz`: task-clock is outside it).
#[test]
fn built_in_metrics_follow_perfs_shadow_rules() {
    use tmetric_engine::view::{self, Fmt, ViewContext};
    use tmetric_runtime::counter::CpuCount;
    use tmetric_runtime::{RawCount, Snapshot};
    let all = trees();
    let tree = &all[0];
    let sysfs = Sysfs::new(&tree.sys);
    let literals = Host::probe(&sysfs, &tree.proc_root, None).literals(true, None);
    let counts = |plan: &Plan, values: &[u64]| Snapshot {
        events: (0..plan.specs().len())
            .map(|i| {
                let raw = RawCount { value: values[i], enabled: 1000, running: 1000 };
                Some(vec![CpuCount { cpu: 0, thread: -1, raw }])
            })
            .collect(),
    };
    let labels = |lines: &[view::Line]| -> Vec<(String, Option<String>, f64)> {
        lines
            .iter()
            .flat_map(|l| l.cells.iter().map(|c| (l.name.clone(), c.label.clone(), c.value)))
            .collect()
    };
    let mut plan = Plan::new(literals);
    let resolver = tmetric_runtime::event::Resolver::new(&sysfs);
    plan.add_event_lists(&["task-clock,context-switches,cycles,instructions".into()], &resolver)
        .unwrap();
    // 500 ms of task-clock in 1 s; 2.5e9 cycles and 5e9 instructions.
    let snapshot = counts(&plan, &[500_000_000, 75_295, 2_500_000_000, 5_000_000_000]);
    let sample = EvalInput::new(&snapshot, 1.0);
    let ctx = ViewContext {
        wall_ns: 1e9,
        results: &[],
        box_results: &[],
        noise: &[],
        hybrid: false,
        bars: None,
        impossible: &[],
    };
    let lines = view::lines(&plan, &sample, &ctx, false, None);
    let got = labels(&lines);
    assert_eq!(got[0].1.as_deref(), Some("CPUs utilized"));
    assert!((got[0].2 - 0.5).abs() < 1e-12);
    // 75,295 switches in 0.5 s of task-clock: 150.59 K/sec.
    assert_eq!(got[1].1.as_deref(), Some("K/sec"));
    assert!((got[1].2 - 150.59).abs() < 1e-9, "{got:?}");
    assert_eq!(got[2].1.as_deref(), Some("GHz"));
    assert!((got[2].2 - 5.0).abs() < 1e-12);
    assert_eq!(got[3].1.as_deref(), Some("insn per cycle"));
    assert!((got[3].2 - 2.0).abs() < 1e-12);
    assert_eq!(lines[3].cells[0].fmt, Some(Fmt::PER_INSN));

    let mut plan = Plan::new(literals);
    plan.add_event_lists(&["task-clock,{cycles,instructions}".into()], &resolver).unwrap();
    let snapshot = counts(&plan, &[500_000_000, 2_500_000_000, 5_000_000_000]);
    let sample = EvalInput::new(&snapshot, 1.0);
    let lines = view::lines(&plan, &sample, &ctx, false, None);
    let got = labels(&lines);
    // perf prints the label with no value: the clock is not in the group.
    assert_eq!(got[1].1.as_deref(), Some("GHz"));
    assert_eq!(lines[1].cells[0].fmt, None);
    assert_eq!(got[2].1.as_deref(), Some("insn per cycle"));
    assert!((got[2].2 - 2.0).abs() < 1e-12);
}
