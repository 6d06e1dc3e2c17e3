//! tmetric's engine: between the compiled catalogue and its front ends (`tmetric stat`,
//! `plan`, `eval`, the region API, exporters). It selects metrics, computes literals, models
//! the machine's PMUs, schedules events into groups, opens them through the runtime, reads,
//! scales and evaluates, and explains every value it cannot give. Counts measured elsewhere (perf
//! stat logs, counts files) are `tmetric-offline`'s.
//!
//! * [`Error`]: every error the engine returns, typed, each module's own converting into it.
//! * [`aggr`]: perf's aggregation units (`-A`, `--per-core`, ...) and their labels.
//! * [`Host`]: the machine a run measures, probed once per run and passed down.
//! * [`pmu`]: counters per PMU and the kernel's placement rules.
//! * [`schedule`]: the counter-aware scheduler, perf's strategy as a baseline, a lower bound.
//! * [`plan`]: metric inputs resolved on a machine, groups as runtime counter specs.
//! * [`plan_eval`]: a plan's sample evaluated: each root metric from its own group's counts,
//!   each row's printed count, with the reason for every missing value.
//! * [`events`]: user event names on a machine: the catalogue's vendor events as the
//!   runtime resolver's tables, `--cputype`.
//! * [`compiled`]: a model's metrics over input values; metric selection and needed inputs.
//! * [`contract`]: what perf stat prints per perf release (6.12's built-in metrics and
//!   defaults, 7.x's `Default` metric groups, ...), chosen by the vintage in use.
//! * [`defaults`]: perf's default and `-d` events, `--topdown`'s choice on a machine, and why
//!   a CPU model's metrics cannot count on a machine without a hardware PMU.
//! * [`describe`]: one metric as `tmetric describe` shows it: descriptions, formula, the
//!   tree of metrics and events, needed events, valued over a counts file when given.
//! * [`interval`]: one `-I` interval's rotated counts estimated from the turns read inside
//!   it, and the reads its bars are judged on.
//! * [`metric_eval`]: one model's metrics over inputs a front end looks up, the evaluator
//!   every input source shares (a plan's sample through [`plan_eval`], a counts file, a log).
//! * [`list`]: the compiled catalogue as `tmetric list`'s rows (models, metrics, groups,
//!   events) and the kernel's PMU events in sysfs.
//! * [`literals`]: literal values with where each came from, and perf's defaults.
//! * [`models`]: a catalogue model by the name a user typed, with close names when none
//!   matches; the model `-M` items are looked up in on a machine.
//! * [`notes`]: what a run's output explains, as data (rows not counted, metrics without a
//!   value, the kernel's refusals of counters and groups), below session, evaluation and views.
//! * [`replay`]: a recorded plan rebuilt for evaluation (`tmetric report`), other metrics
//!   matched to the recorded rows by name.
//! * [`session`]: a plan's counters opened on a target, run, read and explained: the one
//!   path front ends take from a plan to counts (`-r`'s repeats and a run's outcome too).
//! * [`setup`]: the plan a measurement counts from its flags, typed (`Request`): `stat`'s,
//!   `record`'s and `serve`'s.
//! * [`tpebs`]: retire latencies for `:R` inputs: the sampler a session runs beside its
//!   counters, and latency files.
//! * [`threads`]: the threads of `-p`, `-t` and `--per-thread -a`, listed under a tasks root.
//! * [`select`]: perf's `-M` lookup (common metrics first), suggestions, defining models.
//! * [`tool_pmu`]: the values perf 7.x's tool PMU events (`-e num_cpus`) print on a machine.
//! * [`topdown`]: perf's built-in level-1 TopDown from the older `topdown-*` events (perf's `--topdown` patch series).
//! * [`view`]: what `perf stat` prints per line, as data: counts, metric cells with perf's
//!   formats, labels and colours, and perf 6.12's built-in metrics.
//! * [`uncertainty`]: error bars of metrics over multiplexed counts, from the reads taken
//!   during a run.
#![warn(missing_docs)]
#![forbid(unsafe_code)]

pub mod aggr;
pub mod builtin;
pub mod compiled;
pub mod contract;
pub mod defaults;
pub mod describe;
mod error;
pub mod estimate;
pub mod events;
mod host;
pub mod interval;
pub mod list;
pub mod literals;
pub mod metric_eval;
pub mod models;
pub mod notes;
pub mod plan;
pub mod plan_eval;
pub mod pmu;
pub mod replay;
pub mod schedule;
pub mod select;
pub mod session;
pub mod setup;
pub mod threads;
pub mod tool_pmu;
pub mod topdown;
pub mod tpebs;
pub mod uncertainty;
pub mod view;

pub use compiled::{Evaluator, MetricResult, Select};
pub use contract::Contract;
pub use error::{CgroupError, CpuTypeError, Error, FilterError};
pub use estimate::{Anchor, EstimateKind};
pub use host::Host;
pub use literals::{Counting, LiteralSource, Literals};
pub use metric_eval::{Coverage, MetricEval, NeededInputs, Why};
pub use notes::{MetricWhy, Note, Refusal, RefusedGroup, Reopened, RowWhy};
pub use plan::{
    NoGroup, Pick, Plan, PlanOptions, PlanRow, Resolution, RetireEvent, Root, Source, Warning,
};
pub use plan_eval::{EvalInput, Evaluated, Evaluators, RootResult, RowCount, UnitEval};
pub use pmu::{Adjustment, Demand, MachineFacts, PmuCounters, PmuModel, Vendor};
pub use schedule::{Group, Placement, Request, SchedEvent, SchedMetric, Schedule, Slot, Strategy};
pub use uncertainty::{BAR_SIGMAS, Bar};

/// The default events, in perf's order; also the order software events of a merged group
/// print in.
pub const DEFAULT_EVENTS: &[&str] = &[
    "task-clock",
    "cpu-clock",
    "context-switches",
    "cpu-migrations",
    "page-faults",
    "minor-faults",
    "major-faults",
    "msr/tsc/",
];

/// Position of `name` in perf's default order (unknown names last).
pub fn default_rank(name: &str) -> usize {
    DEFAULT_EVENTS.iter().position(|d| *d == name).unwrap_or(DEFAULT_EVENTS.len())
}
