//! A tool preempted between two enable (or disable) ioctls: the groups it enabled before the
//! pause count milliseconds longer than the rest, and the run's clock (`duration_time`) is
//! shorter than every counter's enabled time. Metrics whose events sit in different groups,
//! or that divide by `duration_time`, still equal the truth, because the engine brings their
//! counts to one span; perf's per-counter scaling alone is off by percents.

use tmetric_engine::{EvalInput, Evaluators, Host, Pick, Placement, Plan, PlanOptions};
use tmetric_runtime::{Attr, CounterSet, Errno, Syscalls, Sysfs, Target};
use tmetric_sim::{Machine as SimMachine, SimKernel};

use crate::harness::SimTree;

/// The simulated kernel, with the tool descheduled for `pause_ns` before each enable ioctl
/// (not the disables, which would give every group the same span back): every group, on
/// every CPU, counts for its own span.
struct Preempted {
    kernel: SimKernel,
    pause_ns: u64,
}

impl Syscalls for Preempted {
    fn perf_event_open(
        &mut self,
        attr: &Attr,
        pid: i32,
        cpu: i32,
        group_fd: i32,
    ) -> Result<i32, Errno> {
        self.kernel.perf_event_open(attr, pid, cpu, group_fd)
    }
    fn read(&mut self, fd: i32, buf: &mut [u8]) -> Result<usize, Errno> {
        self.kernel.read(fd, buf)
    }
    fn enable(&mut self, fd: i32, group: bool) -> Result<(), Errno> {
        self.kernel.advance(self.pause_ns);
        self.kernel.enable(fd, group)
    }
    fn disable(&mut self, fd: i32, group: bool) -> Result<(), Errno> {
        self.kernel.disable(fd, group)
    }
    fn reset(&mut self, fd: i32, group: bool) -> Result<(), Errno> {
        self.kernel.reset(fd, group)
    }
    fn event_id(&mut self, fd: i32) -> Result<u64, Errno> {
        self.kernel.event_id(fd)
    }
    fn close(&mut self, fd: i32) {
        self.kernel.close(fd)
    }
}

/// Sapphire Rapids, 300 ms of the default workload, the tool paused 1 ms before every enable
/// ioctl; the run's clock starts after the enable loop and stops before the
/// disable loop, as `tmetric_runtime::run` does.
#[test]
fn metrics_over_groups_enabled_at_different_times_equal_the_truth() {
    let tree = SimTree::new("sapphirerapids");
    let model = tree.model;
    let named = |name: &str| {
        model
            .metrics()
            .position(|m| model.str(m.name) == name)
            .unwrap_or_else(|| panic!("{name} is a Sapphire Rapids metric"))
    };
    // Spread over groups; spread and dividing by `duration_time` (the core frequency);
    // together in one group (a ratio perf computes exactly anyway).
    let wanted = ["tma_ports_utilization", "tma_contested_accesses", "tma_l3_bound"];
    let sysfs = Sysfs::new(&tree.sys);
    let machine = Host::probe(&sysfs, &tree.proc_root, None);
    let literals = machine.literals(true, None);
    let mut plan = Plan::new(literals);
    let picks: Vec<Pick> =
        wanted.iter().map(|n| Pick { model, metric: named(n), item: String::new() }).collect();
    // The whole level, so that the first two really are spread over rotating groups.
    let mut all = picks.clone();
    for group in ["TopdownL3", "TopdownL4"] {
        all.extend(tmetric_engine::select::find(group, tmetric_catalog::common(), Some(model)));
    }
    let options = PlanOptions { system_wide: true, ..PlanOptions::default() };
    plan.add_metrics(&all, &machine, &options, true);
    for name in &wanted[..2] {
        let root = plan.roots().iter().find(|r| model.str(model.metric(r.metric).name) == *name);
        let placement = &root.expect("planned").placement;
        assert!(matches!(placement, Placement::Spread { .. }), "{name}: {placement:?}");
    }

    let sim = SimMachine::named(tree.name).expect("machine");
    let kernel = SimKernel::manual(sim);
    let cpus = sysfs.online_cpus().expect("online cpus");
    let preempted = Preempted { kernel: kernel.clone(), pause_ns: 1_000_000 };
    let mut counters = CounterSet::open_with(
        preempted,
        plan.specs().to_vec(),
        plan.groups(),
        plan.sticky(),
        Target::Cpus(cpus.clone()),
    )
    .expect("the plan opens");
    counters.enable().expect("enable");
    let start = kernel.now();
    let ms = 300;
    kernel.advance(ms * 1_000_000);
    let end = kernel.now();
    counters.disable().expect("disable");
    let counts = counters.read().expect("read");
    let sample = EvalInput::new(&counts, (end - start) as f64 / 1e9);
    let results = plan.evaluate(&mut Evaluators::default(), &sample);

    // The truth: every input's exact count over the run's clock.
    for name in wanted {
        let i = plan
            .roots()
            .iter()
            .position(|r| model.str(model.metric(r.metric).name) == name)
            .expect("planned");
        let root = &plan.roots()[i];
        let mut evaluator = tmetric_engine::Evaluator::new(model);
        evaluator.literals = literals;
        for (slot, row) in root.slot_rows.iter().enumerate() {
            let Some(row) = row else { continue };
            let row = &plan.rows()[*row];
            evaluator.values[slot] = match &row.source {
                tmetric_engine::Source::Counter(spec) => {
                    let spec = &plan.specs()[*spec];
                    let on =
                        cpus.iter().filter(|c| spec.cpus.as_ref().is_none_or(|m| m.contains(c)));
                    on.map(|&c| kernel.true_count_between(&spec.attr, c, start, end).unwrap_or(0))
                        .sum::<u64>() as f64
                        * row.scale
                }
                tmetric_engine::Source::Tool(_) => sample.seconds,
                _ => f64::NAN,
            };
        }
        let truth = evaluator.evaluate(model, &[root.metric]).remove(0).value;
        // perf's value: every input scaled to its own counter's enabled time.
        for (slot, row) in root.slot_rows.iter().enumerate() {
            if let Some(row) = row {
                evaluator.values[slot] =
                    tmetric_engine::plan_eval::input_value(&plan, &plan.rows()[*row], &sample);
            }
        }
        let perf = evaluator.evaluate(model, &[root.metric]).remove(0).value;
        let value = results[i].value;
        let error = |v: f64| (v - truth).abs() / truth;
        assert!(truth > 0.0, "{name}: the workload makes it nonzero");
        // Per-CPU counts are whole numbers: a few thousand events per CPU round by 0.05 %.
        assert!(
            error(value) < 5e-3,
            "{name}: {value} with the tool preempted, the truth is {truth}"
        );
        if name == "tma_l3_bound" {
            // One group, no `duration_time`: exactly perf's number.
            assert_eq!(value, perf, "{name}");
        } else {
            // The skew is real: perf's scaling alone is off by 10-16 % here.
            assert!(error(perf) > 0.05, "{name}: perf's scaling gives {perf}, truth {truth}");
        }
    }
}
