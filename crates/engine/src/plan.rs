//! Plans: which inputs a metric selection needs, how each is counted on this machine (a
//! counter, a tool value, a retire latency, or nothing and why), the scheduler's groups turned
//! into runtime counter specs, and per-metric input maps that read each metric from its own
//! group.

use tmetric_catalog::Model;
use tmetric_model::Literal;
use tmetric_runtime::event;
use tmetric_runtime::{CounterEvent, CounterSpec, Sysfs, ToolEvent};

use crate::schedule::{Placement, Request, Schedule, Strategy};

mod adjust;
mod facts;
mod grouping;
mod metrics;
mod names;
mod notes;
mod offline;
mod perf_ids;
mod read;
mod resolve;
mod retire;
mod rows;

pub(crate) use facts::probes_with;
pub use facts::{cpuid_of, machine_probes, offline_probes, tsc_from_model_name};
pub(crate) use facts::{cpuid_with, literals_of};
pub use grouping::{NoGroup, grouping, packs};
pub use metrics::{ANCHOR, ANCHORS, anchor_named, anchors_of, names_anchor};
pub(crate) use names::twice;
pub use names::{has_hybrid_twins, metric_name};
pub use notes::Warning;
pub use offline::{OfflinePlan, offline_literals, plan_offline, plan_on_machine};
pub(crate) use perf_ids::{Names, perf_ids};
pub use resolve::{demand_of, id_name, needed_slots, resolve_id};
pub use retire::RetireEvent;

/// Options of planning, with perf's names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PlanOptions {
    /// Count the events of `MetricThreshold` too (perf's default; off with
    /// `--metric-no-threshold`).
    pub thresholds: bool,
    /// `--metric-no-group`: never require a metric's events to share a group.
    pub no_group: bool,
    /// `--metric-no-merge`: each metric gets its own groups, even when that duplicates events.
    pub no_merge: bool,
    /// The scheduler's strategy.
    pub strategy: Strategy,
    /// Counting system-wide (`-a`): decides `#core_wide`.
    pub system_wide: bool,
}

impl Default for PlanOptions {
    fn default() -> PlanOptions {
        PlanOptions {
            thresholds: true,
            no_group: false,
            no_merge: false,
            strategy: Strategy::Tmetric,
            system_wide: false,
        }
    }
}

/// A root metric: one metric of one model, as selected.
#[derive(Debug, Clone)]
pub struct Pick {
    /// The model.
    pub model: &'static Model,
    /// Index into its metrics.
    pub metric: usize,
    /// The `-M` item that selected it (for `MetricgroupNoGroup`).
    pub item: String,
}

/// How one metric input is obtained.
#[derive(Debug, Clone, PartialEq)]
pub enum Resolution {
    /// A counter.
    Counter(CounterEvent),
    /// One counter per box of an uncore PMU (perf opens the event on every box and merges
    /// their counts): box 0 first.
    Boxes(Vec<event::BoxEvent>),
    /// A value tmetric computes.
    Tool(ToolEvent),
    /// A retire latency (`:R`): sampled, or given by the user, never a counter.
    RetireLatency,
    /// Nothing can count it; the reason.
    Missing(String),
}

/// Where a row's value comes from.
#[derive(Debug, Clone, PartialEq)]
pub enum Source {
    /// A counter: index into [`Plan::specs`].
    Counter(usize),
    /// A value tmetric computes.
    Tool(ToolEvent),
    /// A retire latency, read from [`Plan::retire_latency`] by event name.
    RetireLatency,
    /// Nothing can count it; the reason.
    Missing(String),
}

/// What makes two needs the same input.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Key {
    Counter(tmetric_runtime::Attr, Option<Vec<u32>>),
    /// An event on several uncore boxes: box 0's attributes and every box's PMU type (so the
    /// event on box 0 alone, `cha_0/event=0x0/`, is another input than on every box).
    Boxes(tmetric_runtime::Attr, Vec<u32>),
    Tool(ToolEvent),
    Named(String),
}

/// One line a plan prints: an input and the metrics printed beside it.
#[derive(Debug, Clone)]
pub struct PlanRow {
    /// The printed event name.
    pub name: String,
    /// Where its value comes from.
    pub source: Source,
    /// Unit text (`msec` for clocks, a sysfs `.unit`).
    pub unit: String,
    /// The printed count is the raw count times this.
    pub scale: f64,
    /// Printed (inputs the user did not ask for, such as tool events, may be hidden).
    pub show: bool,
    /// Roots printed on this row.
    pub roots: Vec<usize>,
    /// The row this one duplicates (the same event counted again in another group).
    pub copy_of: Option<usize>,
    /// The cgroup it counts in (`-G`, `--for-each-cgroup`); `None` counts every task.
    pub cgroup: Option<String>,
    /// An uncore event opened on every box of its PMU: each box's counter, the first being
    /// [`PlanRow::source`]'s. perf merges them into this one line (the counts summed, metrics
    /// reading the sum) unless `-A`/`--no-merge` ([`Plan::per_box`]). Empty for any other row.
    pub boxes: Vec<RowBox>,
    pub(crate) key: Key,
}

/// One uncore box of a row's event.
#[derive(Debug, Clone, PartialEq)]
pub struct RowBox {
    /// Its counter: index into [`Plan::specs`].
    pub spec: usize,
    /// The name perf prints for the box alone (`UNC_M_CAS_COUNT.RD [uncore_imc_0]`).
    pub name: String,
}

impl PlanRow {
    /// Whether it is perf's `cycles` (`cpu-cycles`), the one default event perf 7.x prints
    /// when it cannot be opened, so that a machine without it says so.
    pub fn is_cycles(&self) -> bool {
        tmetric_runtime::event::hardware_config(&self.name) == Some(0)
    }

    /// The counters whose sum is the row's count: every box, or its one counter.
    pub fn specs(&self) -> Vec<usize> {
        match self.source {
            Source::Counter(_) if !self.boxes.is_empty() => {
                self.boxes.iter().map(|b| b.spec).collect()
            }
            Source::Counter(s) => vec![s],
            _ => Vec::new(),
        }
    }
}

/// A selected metric with its inputs.
#[derive(Debug, Clone)]
pub struct Root {
    /// The model.
    pub model: &'static Model,
    /// Index into the model's metrics.
    pub metric: usize,
    /// Per input slot of the model: the row that feeds it (only the slots it needs).
    pub slot_rows: Vec<Option<usize>>,
    /// Where the scheduler put its events.
    pub placement: Placement,
}

/// A plan: rows, counters, groups and roots. Its fields are the engine's: front ends read
/// them through accessors of the same names (`plan/read.rs`) and change a plan through its
/// methods.
#[derive(Debug, Clone)]
pub struct Plan {
    /// Inputs, in print order.
    pub(crate) rows: Vec<PlanRow>,
    /// Counters to open.
    pub(crate) specs: Vec<CounterSpec>,
    /// The events behind the specs.
    pub(crate) events: Vec<CounterEvent>,
    /// Groups: spec indices, leader first.
    pub(crate) groups: Vec<Vec<usize>>,
    /// Per spec: it must stay in its group with the `slots` leader if the group is split.
    pub(crate) sticky: Vec<bool>,
    /// The selected metrics.
    pub(crate) roots: Vec<Root>,
    /// The scheduler's output for the metrics' hardware events.
    pub(crate) schedule: Option<Schedule>,
    /// The scheduler's request (for `plan` output).
    pub(crate) request: Request,
    /// Machine literals.
    pub(crate) literals: [f64; Literal::COUNT],
    /// Per literal, what perf 7.x's tool PMU event of its name prints (`-e num_cpus`:
    /// [`crate::tool_pmu::values`]); the literals until a front end sets them.
    pub(crate) tool_values: [f64; Literal::COUNT],
    /// Per model of the roots: its probe values on the machine ([`machine_probes`]).
    pub(crate) probes: Vec<(&'static Model, Vec<f64>)>,
    /// Retire latencies in cycles by event name (from sampling or `--retire-latency`); an
    /// event missing here reads 0, as perf 6.12 does, and is warned about.
    pub(crate) retire_latency: Vec<(String, f64)>,
    /// Warnings to print once before counting.
    pub(crate) warnings: Vec<Warning>,
    /// Per `:R` input: its name (as [`Plan::retire_latency`] keys it), the metrics that read
    /// it, and the event to sample for it (or why it cannot be sampled here).
    pub(crate) retire_events: Vec<RetireEvent>,
    /// The roots are perf's `Default` metric group (no `-e`, no `-M`): they print under their
    /// group's name (`TopdownL1`) instead of their first event's count.
    pub(crate) default_metrics: bool,
    /// The rows are perf 7.x's default metric groups' inputs ([`Plan::show_default_events`]):
    /// a row that hosts no metric, or (but `cycles`) could not be opened, is not printed.
    pub(crate) default_events: bool,
    /// perf's `-A`/`--no-merge` (`AGGR_NONE`): the boxes of an uncore row print one line each
    /// and metrics read box 0 (the box a line shows for events of that line's PMU), as perf
    /// does; otherwise the boxes are summed into one line.
    pub(crate) per_box: bool,
    /// A task's counters follow the children it creates (`inherit`, perf's default); off
    /// with perf's `-i`/`--no-inherit`.
    pub(crate) inherit: bool,
    /// Per-CPU software events opened alone are opened as one group per CPU, one read each
    /// (`tmetric_runtime::counter::Opening`); off unless a front end says nothing switches
    /// events one by one.
    pub(crate) software_together: bool,
    /// Groups tmetric may rotate itself: (PMU, leading spec) of each group of a PMU whose
    /// groups cannot count at once ([`Plan::rotation`]).
    pub(crate) rotated: Vec<(usize, usize)>,
    /// Per entry of [`Plan::rotated`]: the group's copy of the event counted in every turn
    /// of its PMU (its anchor, [`crate::estimate`]), if the PMU has one.
    pub(crate) anchors: Vec<Option<usize>>,
    /// The kernel's timer ticks per second, as its default rotation interval tells them
    /// (`perf_event_mux_interval_ms` = 1000 / HZ); 1000, the most, when unknown.
    pub(crate) tick_hz: f64,
    /// Each online CPU with an SMT sibling, and that sibling (the first other CPU of its
    /// `thread_siblings_list`).
    pub(crate) siblings: Vec<(u32, u32)>,
    /// The run's groups were rotated by tmetric ([`Plan::rotation`]), not by the kernel.
    pub(crate) rotating: bool,
    /// The perf release whose output the plan is printed as: the vintage's when the plan was
    /// made ([`crate::contract::current`]).
    pub(crate) contract: &'static crate::Contract,
}

impl Plan {
    /// An empty plan with these literals.
    pub fn new(literals: [f64; Literal::COUNT]) -> Plan {
        Plan {
            rows: Vec::new(),
            specs: Vec::new(),
            events: Vec::new(),
            groups: Vec::new(),
            sticky: Vec::new(),
            roots: Vec::new(),
            schedule: None,
            request: Request::default(),
            literals,
            tool_values: literals,
            probes: Vec::new(),
            retire_latency: Vec::new(),
            warnings: Vec::new(),
            retire_events: Vec::new(),
            default_metrics: false,
            default_events: false,
            per_box: false,
            inherit: true,
            software_together: false,
            rotated: Vec::new(),
            anchors: Vec::new(),
            tick_hz: MAX_HZ,
            siblings: Vec::new(),
            rotating: false,
            contract: crate::contract::current(),
        }
    }

    /// The values perf 7.x's tool PMU events print in this run (`-e num_cpus`, `-e smt_on`),
    /// per literal of the same name ([`crate::tool_pmu::values`]).
    pub fn set_tool_values(&mut self, values: [f64; Literal::COUNT]) {
        self.tool_values = values;
    }

    /// Whether the run's groups were rotated by tmetric ([`Plan::rotation`]): the estimate
    /// `-v` names.
    pub fn rotating(&self) -> bool {
        self.rotating
    }

    /// Says that the run's groups were rotated by tmetric (a record replayed says so too).
    pub fn set_rotating(&mut self, rotating: bool) {
        self.rotating = rotating;
    }

    /// tmetric's own rotation of the groups that cannot count at once: one group of each
    /// such PMU per turn, turns of random length around [`OWN_TURN`]; `None` when nothing
    /// needs rotating.
    pub fn rotation(&self) -> Option<tmetric_runtime::Rotation> {
        let mut per_pmu: Vec<(usize, Vec<usize>)> = Vec::new();
        for &(pmu, leader) in &self.rotated {
            match per_pmu.iter_mut().find(|p| p.0 == pmu) {
                Some(p) => p.1.push(leader),
                None => per_pmu.push((pmu, vec![leader])),
            }
        }
        per_pmu.retain(|p| p.1.len() > 1);
        let n = per_pmu.iter().map(|p| p.1.len()).max()?;
        let turns = (0..n).map(|k| per_pmu.iter().map(|p| p.1[k % p.1.len()]).collect()).collect();
        Some(tmetric_runtime::Rotation { turns, turn: OWN_TURN, seed: 0x7e7e_d17e })
    }
}

/// The highest HZ a Linux kernel is built with.
pub const MAX_HZ: f64 = 1000.0;

/// The kernel's HZ as the core PMU's default rotation interval tells it
/// (`PERF_CPU_HRTIMER` = 1000 / HZ ms, `kernel/events/core.c`), between 100 and 1000;
/// [`MAX_HZ`] when the file is missing or says nothing sensible.
pub fn tick_hz(sysfs: &Sysfs) -> f64 {
    let ms = sysfs
        .core_pmu()
        .and_then(|pmu| sysfs.mux_interval_ms(&pmu))
        .filter(|&ms| (1..=10).contains(&ms));
    ms.map_or(MAX_HZ, |ms| 1000.0 / ms as f64)
}

/// The mean length of a turn of tmetric's own rotation: the kernel's default rotation
/// interval (`perf_event_mux_interval_ms` at HZ 250).
pub const OWN_TURN: std::time::Duration = std::time::Duration::from_millis(4);
