//! Plans: which inputs a metric selection needs, how each is counted on this machine (a
//! counter, a tool value, a retire latency, or nothing and why), the scheduler's groups turned
//! into runtime counter specs, and per-metric input maps that read each metric from its own
//! group.

use std::path::Path;

use tmetric_catalog::{Constraint, Id, IdKind, Model};
use tmetric_model::Literal;
use tmetric_runtime::event::{self, EventError, EventKind, ResolvedEvent};
use tmetric_runtime::{CounterEvent, CounterSpec, Environment, Sysfs, ToolEvent};

use crate::evaluator::Select;
use crate::pmu::{self, Demand, PmuModel, Vendor};
use crate::schedule::{self, Placement, Request, SchedEvent, SchedMetric, Schedule, Strategy};

mod read;

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

/// A warning a plan gives once, before counting: what it is, as data; the wording is its
/// `Display`, for the printer only.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Warning {
    /// The event parser's warning about one `-e` list.
    EventList {
        /// The list as given.
        list: String,
        /// The parser's warning.
        warning: String,
    },
    /// These metrics read `:R` retire latencies that this run does not sample: they read 0,
    /// as perf 6.12 does without `--record-tpebs`.
    RetireLatencyUnsampled {
        /// The metrics.
        metrics: Vec<String>,
    },
    /// `--retire-latency FILE` has no latency for these inputs: they read 0.
    RetireLatencyUnknown {
        /// The `:R` inputs.
        events: Vec<String>,
        /// The file.
        file: String,
    },
    /// The event counts user mode only: `perf_event_paranoid` forbids kernel counting.
    UserOnly {
        /// The event.
        event: String,
    },
    /// A metric replayed from a recording whose inputs were not recorded.
    NotRecorded {
        /// The metric.
        metric: String,
        /// Its inputs the recording lacks.
        inputs: Vec<String>,
    },
}

impl std::fmt::Display for Warning {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Warning::EventList { list, warning } => write!(f, "-e {list}: {warning}"),
            Warning::RetireLatencyUnsampled { metrics } => write!(
                f,
                "retire latencies (`:R` events) are not sampled in this run, so they read as 0, as perf does without --record-tpebs; affected: {}",
                metrics.join(", ")
            ),
            Warning::RetireLatencyUnknown { events, file } => {
                write!(f, "no retire latency for {} in {file}: they read as 0", events.join(", "))
            }
            Warning::UserOnly { event } => write!(
                f,
                "`{event}` counts user mode only (exclude_kernel): perf_event_paranoid forbids kernel counting without privilege"
            ),
            Warning::NotRecorded { metric, inputs } => write!(
                f,
                "{metric}: {} {} not counted in the recording",
                inputs.join(", "),
                if inputs.len() == 1 { "was" } else { "were" }
            ),
        }
    }
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
    /// perf's `-A`/`--no-merge` (`AGGR_NONE`): the boxes of an uncore row print one line each
    /// and metrics read box 0 (the box a line shows for events of that line's PMU), as perf
    /// does; otherwise the boxes are summed into one line.
    pub(crate) per_box: bool,
}

/// A retire-latency input and the sampling event behind it.
#[derive(Debug, Clone)]
pub struct RetireEvent {
    /// The input's name (`cpu_core/MEM_INST_RETIRED.STLB_HIT_LOADS/R`).
    pub name: String,
    /// The metrics that read it.
    pub metrics: Vec<String>,
    /// The event to sample (the same event without `R`), or why there is none.
    pub event: Result<CounterEvent, String>,
}

/// The printed name of a model input: perf's `pmu@terms@` spelled `pmu/terms/`.
pub fn id_name(model: &Model, id: &Id) -> String {
    model.str(id.text).replace('@', "/")
}

fn from_event_result(
    result: Result<ResolvedEvent, EventError>,
    display: &str,
    env: &Environment,
) -> Resolution {
    match result {
        Ok(ResolvedEvent::Counter(mut event)) => {
            event.name = display.to_string();
            Resolution::Counter(event)
        }
        Ok(ResolvedEvent::Tool(tool)) => Resolution::Tool(tool),
        Err(EventError::NoPmu { pmu, .. }) if pmu::is_core_name(&pmu) => {
            Resolution::Missing(env.no_hardware_pmu().to_string())
        }
        Err(EventError::NoPmu { pmu, .. }) => {
            Resolution::Missing(format!("this machine has no `{pmu}` PMU"))
        }
        Err(err) => Resolution::Missing(err.to_string()),
    }
}

/// How input `id` of `model` is counted on the machine `sysfs` describes.
pub fn resolve_id(model: &Model, id: &Id, sysfs: &Sysfs, env: &Environment) -> Resolution {
    let display = id_name(model, id);
    if id.retire_latency {
        return Resolution::RetireLatency;
    }
    let modifiers = model.str(id.modifiers);
    // `uncore_cha_0@event\=0x1@` has terms and no event name.
    let with_terms = |event: &str| {
        let terms = model.str(id.terms);
        match (event.is_empty(), terms.is_empty()) {
            (_, true) => event.to_string(),
            (true, false) => terms.to_string(),
            (false, false) => format!("{event},{terms}"),
        }
    };
    // An uncore PMU named without its box number is every box, as perf matches it.
    let on_boxes = |pmu: &str, terms: &str| match event::resolve_on_boxes(
        pmu, terms, modifiers, &display, sysfs,
    ) {
        Ok(mut boxes) if boxes.len() == 1 => {
            Resolution::Counter(boxes.pop().expect("one box").event)
        }
        Ok(boxes) => Resolution::Boxes(boxes),
        Err(err) => from_event_result(Err(err), &display, env),
    };
    match id.kind {
        IdKind::Tool(tool) => Resolution::Tool(match tool {
            tmetric_catalog::Tool::DurationTime => ToolEvent::DurationTime,
            tmetric_catalog::Tool::UserTime => ToolEvent::UserTime,
            tmetric_catalog::Tool::SystemTime => ToolEvent::SystemTime,
        }),
        IdKind::Kernel => {
            let event = model.str(id.event);
            let pmu = model.str(id.pmu);
            // A hybrid metric's kernel event lives on its own core PMU (`cpu_atom/cycles/`).
            if (pmu == "cpu_core" || pmu == "cpu_atom") && sysfs.has_pmu(pmu) {
                let result = event::resolve_on_pmu(pmu, event, modifiers, &display, sysfs);
                return from_event_result(result.map(ResolvedEvent::Counter), &display, env);
            }
            let text = if modifiers.is_empty() {
                event.to_string()
            } else {
                format!("{event}:{modifiers}")
            };
            match event::resolve(&text, sysfs) {
                // `topdown-*`, `slots` and the like are core PMU aliases: without a core PMU
                // the reason is the missing PMU, not an unknown name.
                Err(EventError::Unknown { .. }) if sysfs.core_pmu().is_none() => {
                    Resolution::Missing(env.no_hardware_pmu().to_string())
                }
                result => from_event_result(result, &display, env),
            }
        }
        IdKind::Sysfs => {
            let pmu = model.str(id.pmu);
            let terms = with_terms(model.str(id.event));
            if pmu::is_core_name(pmu) {
                let result = event::resolve_on_pmu(pmu, &terms, modifiers, &display, sysfs);
                return from_event_result(result.map(ResolvedEvent::Counter), &display, env);
            }
            on_boxes(pmu, &terms)
        }
        IdKind::Event(index) => {
            let json = &model.events.at(index as usize);
            let pmu = model.str(json.pmu);
            let pmu = if pmu::is_core_name(pmu) && !sysfs.has_pmu(pmu) {
                match sysfs.core_pmu() {
                    Some(core) => core,
                    None => return Resolution::Missing(env.no_hardware_pmu().to_string()),
                }
            } else {
                pmu.to_string()
            };
            let terms = with_terms(model.str(json.encoding));
            if pmu::is_core_name(&pmu) || sysfs.has_pmu(&pmu) {
                let result = event::resolve_on_pmu(&pmu, &terms, modifiers, &display, sysfs);
                return from_event_result(result.map(ResolvedEvent::Counter), &display, env);
            }
            on_boxes(&pmu, &terms)
        }
        IdKind::Probe => {
            Resolution::Missing("only an argument of has_event() or strcmp_cpuid_str()".into())
        }
    }
}

/// The event a `:R` input samples: the same event and PMU, without the `R` modifier.
fn retire_base(
    model: &Model,
    id: &Id,
    sysfs: &Sysfs,
    env: &Environment,
) -> Result<CounterEvent, String> {
    let display = id_name(model, id);
    let modifiers: String = model.str(id.modifiers).chars().filter(|&c| c != 'R').collect();
    let terms = model.str(id.terms);
    let (pmu, event) = match id.kind {
        IdKind::Event(index) => {
            let json = &model.events.at(index as usize);
            let pmu = model.str(json.pmu);
            let pmu = if pmu::is_core_name(pmu) && !sysfs.has_pmu(pmu) {
                sysfs.core_pmu().ok_or_else(|| env.no_hardware_pmu().to_string())?
            } else {
                pmu.to_string()
            };
            (pmu, model.str(json.encoding).to_string())
        }
        _ => {
            let pmu = model.str(id.pmu);
            let pmu = if pmu.is_empty() {
                sysfs.core_pmu().ok_or_else(|| env.no_hardware_pmu().to_string())?
            } else {
                pmu.to_string()
            };
            (pmu, model.str(id.event).to_string())
        }
    };
    let terms = if terms.is_empty() { event } else { format!("{event},{terms}") };
    event::resolve_on_pmu(&pmu, &terms, &modifiers, &display, sysfs).map_err(|e| e.to_string())
}

/// The counters input `id` may use on `pmus`, and its PMU index; `None` for inputs that take
/// no hardware counter. `pmu_name` is the PMU the input was resolved to.
pub fn demand_of(
    model: &Model,
    id: &Id,
    pmu_name: &str,
    pmus: &PmuModel,
) -> Option<(usize, Demand)> {
    let p = pmus.find(pmu_name)?;
    let pmu = &pmus.pmus[p];
    let demand = match id.kind {
        IdKind::Event(index) => {
            let json = &model.events.at(index as usize);
            pmu::event_demand(pmu, model.str(json.encoding), model.str(id.terms), json.counters)
        }
        IdKind::Kernel => {
            let name = model.str(id.event);
            if event::software_config(name).is_some() {
                return None;
            }
            pmu::named_demand(name, pmu.vendor, pmu.metric_events)?
        }
        IdKind::Sysfs => Demand::GENERAL,
        IdKind::Tool(_) | IdKind::Probe => return None,
    };
    Some((p, demand))
}

/// The input slots root `metric` needs (its threshold's too when `thresholds`), with the
/// model's literals and probe values (from [`machine_probes`] or [`offline_probes`]).
pub fn needed_slots(
    model: &Model,
    metric: usize,
    literals: &[f64; Literal::COUNT],
    probes: &[f64],
    thresholds: bool,
) -> Vec<u16> {
    let facts = tmetric_catalog::Facts { literals, probes };
    let mut slots = model.needed_ids(metric, &facts, false).unwrap_or_default();
    if thresholds && model.metrics[metric].threshold.is_some() {
        for s in model.needed_ids(metric, &facts, true).unwrap_or_default() {
            if !slots.contains(&s) {
                slots.push(s);
            }
        }
    }
    slots.sort_unstable();
    slots
}

/// Why perf does not put a metric's events in one group (`metric__group_events` in perf's
/// `util/metricgroup.c`); tmetric's scheduler reads the kind, the printer the wording.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NoGroup {
    /// `--metric-no-group`.
    MetricNoGroupFlag,
    /// The metric group the metric was selected by is in its `MetricgroupNoGroup`.
    MetricgroupNoGroup(String),
    /// `MetricConstraint: NO_GROUP_EVENTS`.
    NoGroupEvents,
    /// `MetricConstraint: NO_GROUP_EVENTS_NMI` and the NMI watchdog is on.
    NoGroupEventsNmi,
    /// `MetricConstraint: NO_GROUP_EVENTS_SMT` and SMT is on.
    NoGroupEventsSmt,
}

/// Serialized as its wording, as `plan --json` has always printed it.
impl serde::Serialize for NoGroup {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl std::fmt::Display for NoGroup {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            NoGroup::MetricNoGroupFlag => f.write_str("--metric-no-group"),
            NoGroup::MetricgroupNoGroup(group) => write!(f, "MetricgroupNoGroup of `{group}`"),
            NoGroup::NoGroupEvents => f.write_str("MetricConstraint NO_GROUP_EVENTS"),
            NoGroup::NoGroupEventsNmi => {
                f.write_str("MetricConstraint NO_GROUP_EVENTS_NMI with the NMI watchdog on")
            }
            NoGroup::NoGroupEventsSmt => {
                f.write_str("MetricConstraint NO_GROUP_EVENTS_SMT with SMT on")
            }
        }
    }
}

/// Whether a root's events should share a group, and if not why, following perf's
/// `metric__group_events` (`tools/perf/util/metricgroup.c`).
pub fn grouping(pick: &Pick, options: &PlanOptions, pmus: &PmuModel) -> Result<(), NoGroup> {
    let model = pick.model;
    let metric = &model.metrics[pick.metric];
    if options.no_group {
        return Err(NoGroup::MetricNoGroupFlag);
    }
    if model
        .str(metric.no_group)
        .split(';')
        .any(|g| !g.is_empty() && g.eq_ignore_ascii_case(&pick.item))
    {
        return Err(NoGroup::MetricgroupNoGroup(pick.item.clone()));
    }
    match metric.constraint {
        Constraint::None => Ok(()),
        Constraint::NoGroupEvents => Err(NoGroup::NoGroupEvents),
        Constraint::NoGroupEventsNmi if pmus.nmi_watchdog => Err(NoGroup::NoGroupEventsNmi),
        Constraint::NoGroupEventsSmt if pmus.smt_on => Err(NoGroup::NoGroupEventsSmt),
        _ => Ok(()),
    }
}

/// Whether tmetric packs a root's events as a unit even where perf would not group them:
/// yes unless `--metric-no-group` or `NO_GROUP_EVENTS`, because the other reasons (the NMI
/// watchdog's counter, SMT's halved counters, perf's own topdown grouping) are modelled by
/// the scheduler.
pub fn packs(pick: &Pick, options: &PlanOptions) -> bool {
    !options.no_group && pick.model.metrics[pick.metric].constraint != Constraint::NoGroupEvents
}

/// Machine literals for metric expressions, from sysfs and `cpuinfo` under `proc_root`.
pub fn literals(sysfs: &Sysfs, proc_root: &Path, system_wide: bool) -> [f64; Literal::COUNT] {
    let mut values = [f64::NAN; Literal::COUNT];
    if let Ok(t) = sysfs.topology() {
        values[Literal::NumCpus.index()] = t.num_cpus as f64;
        values[Literal::NumCpusOnline.index()] = t.online.len() as f64;
        values[Literal::NumCores.index()] = t.cores as f64;
        values[Literal::NumDies.index()] = t.dies as f64;
        values[Literal::NumPackages.index()] = t.packages as f64;
        values[Literal::SmtOn.index()] = f64::from(u8::from(t.smt_on));
        // perf's core_wide(): whole cores are counted without SMT, or system-wide.
        values[Literal::CoreWide.index()] = f64::from(u8::from(!t.smt_on || system_wide));
    }
    if let Some(core) = sysfs.core_pmu()
        && let Ok(text) = std::fs::read_to_string(sysfs.pmu_devices().join(core).join("caps/slots"))
        && let Some(slots) = tmetric_runtime::sysfs::parse_number(text.trim())
    {
        values[Literal::Slots.index()] = slots as f64;
    }
    values[Literal::HasPmem.index()] =
        f64::from(u8::from(sysfs.root().join("firmware/acpi/tables/NFIT").exists()));
    if let Ok(cpuinfo) = std::fs::read_to_string(proc_root.join("cpuinfo")) {
        values[Literal::SystemTscFreq.index()] = tsc_from_model_name(&cpuinfo);
    }
    values
}

/// perf's fallback for `#system_tsc_freq` on x86: the `@ 2.10GHz` of the model name.
pub fn tsc_from_model_name(cpuinfo: &str) -> f64 {
    let Some(line) = cpuinfo.lines().find(|l| l.starts_with("model name")) else { return f64::NAN };
    let Some((_, after)) = line.split_once('@') else { return f64::NAN };
    let text = after.trim();
    let Some(number) = text.strip_suffix("GHz") else { return f64::NAN };
    number.trim().parse::<f64>().map_or(f64::NAN, |ghz| ghz * 1e9)
}

/// The PMU a resolved counter lives on, by sysfs name (`None` for counterless kinds).
fn counter_pmu(event: &CounterEvent, sysfs: &Sysfs) -> Option<String> {
    match &event.kind {
        EventKind::Software | EventKind::Tracepoint => None,
        // A hybrid legacy event names its core PMU in the config's upper half.
        EventKind::Hardware if event.attr.config >> 32 != 0 => {
            sysfs.pmu_by_type((event.attr.config >> 32) as u32).or_else(|| sysfs.core_pmu())
        }
        EventKind::Hardware => sysfs.core_pmu(),
        EventKind::Pmu(p) if p == "msr" || p.starts_with("cstate") || p == "power" => None,
        EventKind::Pmu(p) => Some(p.clone()),
    }
}

/// Events the kernel lets into any group: software events, tracepoints and `msr`.
fn software_context(event: &CounterEvent) -> bool {
    match &event.kind {
        EventKind::Software | EventKind::Tracepoint => true,
        EventKind::Pmu(p) => p == "msr",
        EventKind::Hardware => false,
    }
}

/// This machine's cpuid as perf reads it: `PERF_CPUID` when set (perf's own override), else
/// `/proc/cpuinfo` or arm64's `midr_el1`.
pub fn cpuid_of(sysfs: &Sysfs, proc_root: &Path) -> Option<String> {
    std::env::var("PERF_CPUID")
        .ok()
        .or_else(|| tmetric_runtime::sysfs::host_cpuid(sysfs, proc_root))
}

/// Per input slot of `model`, the constant perf gives `has_event()` and `strcmp_cpuid_str()`
/// when it parses a metric on `machine` (metricgroup.c's `metricgroup__has_event` and `strcmp_cpuid_str` in util/expr.c): `has_event(X)` is 1 when X parses as an
/// event here, `strcmp_cpuid_str(ID)` is 1 when the machine's cpuid matches ID and NaN when the
/// cpuid is unknown. Other slots read 0.
pub fn machine_probes(model: &Model, machine: &Machine<'_>) -> Vec<f64> {
    let cpuid = cpuid_of(machine.sysfs, machine.proc_root);
    // perf parses the argument as an event of this machine: its sysfs and its vendor events.
    let tables = crate::events::CatalogTables::for_machine(machine.sysfs, machine.proc_root, None);
    let resolver = event::Resolver::new(machine.sysfs).with_tables(&tables);
    probes_with(
        model,
        |text| matches!(resolver.single(&text.replace('@', "/")), Ok(ResolvedEvent::Counter(_))),
        cpuid.as_deref(),
    )
}

/// Probe values without a machine (`tmetric plan --model`): every `has_event()` argument is
/// assumed to exist, as perf's own metric tests assume, and `strcmp_cpuid_str()` is unknown.
pub fn offline_probes(model: &Model) -> Vec<f64> {
    probes_with(model, |_| true, None)
}

/// Per input slot of `model`: `has_event(X)` is 1 when `exists(X)` (X as the catalogue spells
/// it, `pmu@terms@`), `strcmp_cpuid_str(ID)` is 1 when `cpuid` matches ID and NaN without a
/// cpuid; other slots 0. The one probe computation: on a machine, without one, and over a
/// recording ([`crate::replay`]).
pub(crate) fn probes_with(
    model: &Model,
    exists: impl Fn(&str) -> bool,
    cpuid: Option<&str>,
) -> Vec<f64> {
    use tmetric_catalog::catalog::id_calls;
    let mut probes = vec![0.0; model.ids.len()];
    for (slot, id) in model.ids.iter().enumerate() {
        let text = model.str(id.text);
        if id.calls & id_calls::STRCMP_CPUID_STR != 0 {
            probes[slot] = cpuid.map_or(f64::NAN, |cpuid| {
                f64::from(u8::from(tmetric_model::cpuid::cpuid_matches(model.arch, text, cpuid)))
            });
        } else if id.calls & id_calls::HAS_EVENT != 0 {
            probes[slot] = f64::from(u8::from(exists(text)));
        }
    }
    probes
}

/// The machine a plan is for.
#[derive(Debug, Clone, Copy)]
pub struct Machine<'a> {
    /// Its sysfs tree.
    pub sysfs: &'a Sysfs,
    /// Its procfs root (`/proc`, or a simulated one).
    pub proc_root: &'a Path,
    /// Errno explanations.
    pub env: &'a Environment,
    /// Its PMUs.
    pub pmus: &'a PmuModel,
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
            probes: Vec::new(),
            retire_latency: Vec::new(),
            warnings: Vec::new(),
            retire_events: Vec::new(),
            default_metrics: false,
            per_box: false,
        }
    }

    /// Per root, the inputs nothing can count on this machine, each once with the reason (a
    /// machine without a hardware PMU has only these).
    pub fn missing_inputs(&self) -> Vec<Vec<(String, String)>> {
        self.roots
            .iter()
            .map(|root| {
                let mut missing: Vec<(String, String)> = Vec::new();
                for &row in root.slot_rows.iter().flatten() {
                    let row = &self.rows[row];
                    if let Source::Missing(why) = &row.source
                        && !missing.iter().any(|(name, _)| *name == row.name)
                    {
                        missing.push((row.name.clone(), why.clone()));
                    }
                }
                missing
            })
            .collect()
    }

    /// Puts root `r` on the row perf prints a metric on: its first directly read counter, else
    /// any counted input, else any input, else a `duration_time` row added for it. `probes` are
    /// the root's model's probe values.
    pub fn host_root(&mut self, r: usize, probes: &[f64]) {
        let root = &self.roots[r];
        let model = root.model;
        let facts = tmetric_catalog::Facts { literals: &self.literals, probes };
        let direct: Vec<u16> = model.metrics[root.metric]
            .needed_refs(&facts)
            .unwrap_or_default()
            .into_iter()
            .filter_map(|x| match x {
                tmetric_catalog::Ref::Id(slot) => Some(slot),
                tmetric_catalog::Ref::Metric(_) => None,
            })
            .collect();
        let all = model.needed_ids(root.metric, &facts, false).unwrap_or_default();
        let host = direct
            .iter()
            .chain(all.iter())
            .filter_map(|&s| root.slot_rows[s as usize])
            .find(|&row| matches!(self.rows[row].source, Source::Counter(_)))
            .or_else(|| all.iter().filter_map(|&s| root.slot_rows[s as usize]).next());
        match host {
            Some(row) => {
                self.rows[row].show = true;
                self.rows[row].roots.push(r);
            }
            None => {
                let row = self.add(
                    Resolution::Tool(ToolEvent::DurationTime),
                    "duration_time".into(),
                    true,
                );
                self.rows[row].key = Key::Named(format!("metric host {r}"));
                self.rows[row].roots.push(r);
            }
        }
    }

    /// Sets the retire latencies (cycles, by event name) the metrics read: sampled per
    /// interval, or as recorded.
    pub fn set_retire_latency(&mut self, values: Vec<(String, f64)>) {
        self.retire_latency = values;
    }

    /// One retire-latency input's value in cycles (`--retire-latency FILE`), replacing an
    /// earlier one.
    pub fn set_retire_latency_of(&mut self, name: String, cycles: f64) {
        self.retire_latency.retain(|(n, _)| *n != name);
        self.retire_latency.push((name, cycles));
    }

    /// Adds a warning the front end found about this plan (the region API's user-only
    /// events, the retire-latency file's unknown inputs).
    pub fn add_warning(&mut self, warning: Warning) {
        self.warnings.push(warning);
    }

    /// Keeps only the warnings `keep` accepts: a front end that has given what a warning
    /// says is missing (retire latencies sampled or read from a file) drops it.
    pub fn retain_warnings(&mut self, keep: impl FnMut(&Warning) -> bool) {
        self.warnings.retain(keep);
    }

    /// perf's `-A`/`--no-merge` for uncore rows ([`Plan::per_box`]).
    pub fn set_per_box(&mut self, per_box: bool) {
        self.per_box = per_box;
    }

    /// `model`'s probe values (empty when no root of the plan is from `model`).
    pub fn probes_of(&self, model: &Model) -> &[f64] {
        self.probes.iter().find(|(m, _)| std::ptr::eq(*m, model)).map_or(&[], |(_, p)| p)
    }

    fn find(&self, key: &Key) -> Option<usize> {
        self.rows.iter().position(|r| &r.key == key && r.copy_of.is_none())
    }

    /// Adds an input row; counters get a spec (each box of [`Resolution::Boxes`] one).
    /// Returns the row.
    pub fn add(&mut self, resolution: Resolution, name: String, show: bool) -> usize {
        let resolution = match resolution {
            Resolution::Boxes(boxes) => {
                let mut boxes = boxes.into_iter();
                let Some(first) = boxes.next() else {
                    return self.add(Resolution::Missing("no box".into()), name, show);
                };
                let row = self.add(Resolution::Counter(first.event), name, show);
                if let Source::Counter(spec) = self.rows[row].source {
                    self.rows[row].boxes.push(RowBox { spec, name: first.name });
                }
                for b in boxes {
                    self.add_box(row, b.event, b.name);
                }
                return row;
            }
            other => other,
        };
        let (source, key, unit, scale) = match resolution {
            Resolution::Counter(event) => {
                let key = Key::Counter(event.attr.clone(), event.cpus.clone());
                let clock = event.kind == EventKind::Software && event.attr.config <= 1;
                let (unit, scale) = if clock {
                    ("msec".to_string(), 1e-6)
                } else {
                    (event.unit.clone().unwrap_or_default(), event.scale.unwrap_or(1.0))
                };
                self.specs.push(CounterSpec::from(&event));
                self.events.push(event);
                self.sticky.push(false);
                (Source::Counter(self.specs.len() - 1), key, unit, scale)
            }
            Resolution::Tool(tool) => (Source::Tool(tool), Key::Tool(tool), "ns".to_string(), 1.0),
            Resolution::RetireLatency => {
                (Source::RetireLatency, Key::Named(name.clone()), "cycles".to_string(), 1.0)
            }
            Resolution::Missing(reason) => {
                (Source::Missing(reason), Key::Named(name.clone()), String::new(), 1.0)
            }
            Resolution::Boxes(_) => unreachable!("boxes are added above"),
        };
        self.rows.push(PlanRow {
            name,
            source,
            unit,
            scale,
            show,
            roots: Vec::new(),
            copy_of: None,
            cgroup: None,
            boxes: Vec::new(),
            key,
        });
        self.rows.len() - 1
    }

    /// Adds a further uncore box to counter row `row` (whose first box is its own counter):
    /// a spec for `event`, printed as `name` under `-A`/`--no-merge`. Returns the spec.
    pub fn add_box(&mut self, row: usize, event: CounterEvent, name: String) -> usize {
        self.specs.push(CounterSpec::from(&event));
        self.events.push(event);
        self.sticky.push(false);
        let spec = self.specs.len() - 1;
        if self.rows[row].boxes.is_empty()
            && let Source::Counter(first) = self.rows[row].source
        {
            let name = self.rows[row].name.clone();
            self.rows[row].boxes.push(RowBox { spec: first, name });
        }
        self.rows[row].boxes.push(RowBox { spec, name });
        let types = self.rows[row].boxes.iter().map(|b| self.events[b.spec].attr.type_).collect();
        let first = self.events[self.rows[row].boxes[0].spec].attr.clone();
        self.rows[row].key = Key::Boxes(first, types);
        spec
    }

    /// For every group with a member whose row has several uncore boxes, the same group on
    /// each further box (perf opens a metric's group of uncore events on every box). Members
    /// without that box (an event of one box only) are left out of the box's group.
    fn replicate_box_groups(&mut self, from: usize) {
        let box_of: std::collections::HashMap<usize, &Vec<RowBox>> = self
            .rows
            .iter()
            .filter(|r| r.boxes.len() > 1)
            .map(|r| (r.boxes[0].spec, &r.boxes))
            .collect();
        let mut more = Vec::new();
        for group in &self.groups[from..] {
            let boxes = group.iter().filter_map(|s| box_of.get(s)).map(|b| b.len()).max();
            let Some(n) = boxes else { continue };
            for k in 1..n {
                let g: Vec<usize> = group
                    .iter()
                    .filter_map(|s| box_of.get(s).and_then(|b| b.get(k)).map(|b| b.spec))
                    .collect();
                if !g.is_empty() {
                    more.push(g);
                }
            }
        }
        self.groups.extend(more);
    }

    /// perf's `--for-each-cgroup`: every row, counter, group and root once per cgroup, in
    /// cgroup order (perf's `evlist__expand_cgroup`), each counting in its cgroup only.
    pub fn expand_cgroups(&mut self, cgroups: &[String]) {
        let (rows, specs, events, groups, sticky, roots) = (
            std::mem::take(&mut self.rows),
            std::mem::take(&mut self.specs),
            std::mem::take(&mut self.events),
            std::mem::take(&mut self.groups),
            std::mem::take(&mut self.sticky),
            std::mem::take(&mut self.roots),
        );
        for cgroup in cgroups {
            let (row0, spec0, root0) = (self.rows.len(), self.specs.len(), self.roots.len());
            for row in &rows {
                let mut row = row.clone();
                if let Source::Counter(s) = &mut row.source {
                    *s += spec0;
                }
                for b in &mut row.boxes {
                    b.spec += spec0;
                }
                row.copy_of = row.copy_of.map(|r| r + row0);
                row.roots = row.roots.iter().map(|r| r + root0).collect();
                row.cgroup = Some(cgroup.clone());
                if let Key::Named(name) = &mut row.key {
                    *name = format!("{name}\u{0}{cgroup}");
                }
                self.rows.push(row);
            }
            for spec in &specs {
                let mut spec = spec.clone();
                spec.cgroup = Some(cgroup.clone());
                self.specs.push(spec);
            }
            self.events.extend(events.iter().cloned());
            self.sticky.extend(sticky.iter().copied());
            self.groups.extend(groups.iter().map(|g| g.iter().map(|s| s + spec0).collect()));
            for root in &roots {
                let mut root = root.clone();
                root.slot_rows = root.slot_rows.iter().map(|r| r.map(|r| r + row0)).collect();
                self.roots.push(root);
            }
        }
    }

    /// perf's view of its `Default` metric group: the metrics print under their group's
    /// name on the line of their first event, and none of their other events (rows from
    /// `first_row` on, which the metrics added) print. perf's metrics of one group share
    /// their first event (the group's leader), so they print together: each group under its
    /// name, in name order, its metrics in name order; per PMU, as hybrid machines have one
    /// leader per core type.
    pub fn show_as_default_view(&mut self, first_row: usize) {
        self.default_metrics = true;
        let roots = &self.roots;
        let key = |r: usize| {
            let root = &roots[r];
            let m = &root.model.metrics[root.metric];
            (root.model.str(m.default_group), root.model.str(m.name))
        };
        let pmu_of = |r: usize| {
            let root = &roots[r];
            root.model.str(root.model.metrics[root.metric].pmu).to_string()
        };
        // The row that hosts a PMU's first root hosts them all.
        let mut hosts: Vec<(String, usize, Vec<usize>)> = Vec::new();
        for (row, r) in
            self.rows.iter().enumerate().flat_map(|(i, row)| row.roots.iter().map(move |&r| (i, r)))
        {
            let pmu = pmu_of(r);
            match hosts.iter_mut().find(|h| h.0 == pmu) {
                Some(h) => h.2.push(r),
                None => hosts.push((pmu, row, vec![r])),
            }
        }
        for row in &mut self.rows {
            row.roots.clear();
        }
        for (_, host, mut roots) in hosts {
            roots.sort_by(|&a, &b| key(a).cmp(&key(b)));
            self.rows[host].roots = roots;
        }
        for row in &mut self.rows[first_row..] {
            if row.roots.is_empty() {
                row.show = false;
            }
        }
    }

    /// Sets every counter's `exclude_user` and `exclude_kernel`: perf's `--all-kernel`
    /// excludes user mode, `--all-user` kernel mode.
    pub fn exclude_modes(&mut self, exclude_user: bool, exclude_kernel: bool) {
        for (spec, event) in self.specs.iter_mut().zip(self.events.iter_mut()) {
            for attr in [&mut spec.attr, &mut event.attr] {
                attr.exclude_user = exclude_user;
                attr.exclude_kernel = exclude_kernel;
            }
        }
    }

    /// perf's `-G`: the i-th cgroup for the i-th counted row (an empty name leaves that row
    /// counting every task); one cgroup alone applies to every row. Rows in a group must
    /// share a cgroup: the kernel counts a group in one.
    pub fn assign_cgroups(&mut self, cgroups: &[String]) -> Result<(), crate::CgroupError> {
        let counters: Vec<usize> = (0..self.rows.len())
            .filter(|&r| matches!(self.rows[r].source, Source::Counter(_)))
            .collect();
        if counters.is_empty() {
            return Err(crate::CgroupError::NoEvents);
        }
        for (i, &r) in counters.iter().enumerate() {
            let name = if cgroups.len() == 1 { cgroups.first() } else { cgroups.get(i) };
            let Some(name) = name.filter(|n| !n.is_empty()) else { continue };
            self.rows[r].cgroup = Some(name.clone());
            for s in self.rows[r].specs() {
                self.specs[s].cgroup = Some(name.clone());
            }
        }
        for group in &self.groups {
            let first = group.first().map(|&s| &self.specs[s].cgroup);
            if let Some(first) = first
                && group.iter().any(|&s| &self.specs[s].cgroup != first)
            {
                let events = group.iter().map(|&s| self.specs[s].name.clone()).collect();
                return Err(crate::CgroupError::GroupSplit { events });
            }
        }
        Ok(())
    }

    /// A second counter for `row`'s event (every box of it), for another group.
    fn duplicate(&mut self, row: usize) -> usize {
        let Source::Counter(_) = self.rows[row].source else { return row };
        let mut copy = self.rows[row].clone();
        let mut again = |spec: usize| {
            self.specs.push(self.specs[spec].clone());
            self.events.push(self.events[spec].clone());
            self.sticky.push(false);
            self.specs.len() - 1
        };
        if let Source::Counter(spec) = copy.source {
            copy.source = Source::Counter(again(spec));
        }
        for (k, b) in copy.boxes.iter_mut().enumerate() {
            b.spec = match copy.source {
                Source::Counter(first) if k == 0 => first,
                _ => again(b.spec),
            };
        }
        copy.copy_of = Some(row);
        copy.roots.clear();
        self.rows.push(copy);
        self.rows.len() - 1
    }

    /// Adds `-e` event lists as `resolver` reads them (perf 6.12's grammar, hybrid
    /// expansion, `--cputype`, perf's regrouping): user groups are opened as regrouped, and
    /// their topdown events are sticky, so that if the kernel refuses the group they stay
    /// behind `slots`. The resolver's warnings go to [`Plan::warnings`].
    pub fn add_event_lists(
        &mut self,
        lists: &[String],
        resolver: &event::Resolver<'_>,
    ) -> Result<(), EventError> {
        for list in lists {
            let parsed = resolver.list(list)?;
            // The row of each written uncore event opened on several boxes: its further
            // boxes are added to it, as perf merges them into one line.
            let mut box_rows: Vec<(usize, usize)> = Vec::new();
            for warning in parsed.warnings {
                let warning = Warning::EventList { list: list.clone(), warning };
                if !self.warnings.contains(&warning) {
                    self.warnings.push(warning);
                }
            }
            for group in parsed.groups {
                let mut specs = Vec::new();
                for ev in &group.events {
                    if let (ResolvedEvent::Counter(c), Some(b)) = (&ev.event, &ev.uncore_box)
                        && let Some(&(_, row)) = box_rows.iter().find(|(o, _)| *o == b.origin)
                    {
                        specs.push(self.add_box(row, c.clone(), b.name.clone()));
                        continue;
                    }
                    let (resolution, name) = match &ev.event {
                        ResolvedEvent::Counter(c) => {
                            (Resolution::Counter(c.clone()), c.name.clone())
                        }
                        ResolvedEvent::Tool(t) => (Resolution::Tool(*t), t.name().to_string()),
                    };
                    let row = self.add(resolution, name, true);
                    if let Some(b) = &ev.uncore_box
                        && let Source::Counter(spec) = self.rows[row].source
                    {
                        box_rows.push((b.origin, row));
                        self.rows[row].boxes.push(RowBox { spec, name: b.name.clone() });
                    }
                    if let Source::Counter(s) = self.rows[row].source {
                        specs.push(s);
                        self.sticky[s] = group.grouped && ev.topdown.is_some();
                    }
                }
                if specs.len() > 1 || group.grouped {
                    self.groups.push(specs);
                }
            }
        }
        Ok(())
    }

    /// A group the kernel refused and the runtime split, as data: which events, the errno,
    /// which stayed together behind `slots`, and the metrics that read them (now computed
    /// from counts of different time slices).
    pub fn split_note(&self, split: &tmetric_runtime::Split) -> crate::session::RefusedGroup {
        use crate::session::{RefusedGroup, Reopened};
        let name = |s: &usize| self.specs[*s].name.clone();
        let rows: Vec<usize> = (0..self.rows.len())
            .filter(
                |&r| matches!(self.rows[r].source, Source::Counter(s) if split.events.contains(&s)),
            )
            .collect();
        let mut multiplexed: Vec<String> = Vec::new();
        for root in &self.roots {
            if root.slot_rows.iter().flatten().any(|r| rows.contains(r)) {
                let m = root.model.str(root.model.metrics[root.metric].name).to_string();
                if !multiplexed.contains(&m) {
                    multiplexed.push(m);
                }
            }
        }
        let alone: Vec<String> =
            split.events.iter().filter(|e| !split.kept.contains(e)).map(name).collect();
        let kept: Vec<String> = split.kept.iter().map(name).collect();
        let reopened = match (kept.is_empty(), alone.is_empty()) {
            (true, _) => Reopened::Alone,
            (false, true) => Reopened::Together(kept),
            (false, false) => Reopened::Split { kept, alone },
        };
        RefusedGroup {
            events: split.events.iter().map(name).collect(),
            errno: split.errno.0,
            reopened,
            multiplexed,
        }
    }

    /// Adds metric roots: resolves their inputs on `machine`, schedules their hardware events
    /// and turns the groups into counter specs.
    pub fn add_metrics(
        &mut self,
        picks: &[Pick],
        machine: &Machine<'_>,
        options: &PlanOptions,
        show_tools: bool,
    ) {
        let first_root = self.roots.len();
        // Resolve every needed input once.
        let mut root_rows: Vec<Vec<(u16, usize)>> = Vec::new();
        let mut request = Request::default();
        let mut sched_of_row: Vec<Option<usize>> = Vec::new();
        for pick in picks {
            let rows =
                self.pick_rows(pick, machine, options, show_tools, &mut request, &mut sched_of_row);
            root_rows.push(rows);
        }
        let schedule = schedule::schedule(&request, machine.pmus, options.strategy);
        let group_rows = self.add_scheduled_groups(&schedule, &request, &sched_of_row);
        self.group_software_inputs(&root_rows, &sched_of_row);
        self.add_roots(picks, &schedule, &root_rows, &group_rows);
        self.note_retire_latency(first_root, machine);
        self.request = request;
        self.schedule = Some(schedule);
    }

    /// The rows (by input slot) `pick` reads, resolved on `machine` and added where new; its
    /// hardware events and the metric itself go into the scheduler's `request`
    /// (`sched_of_row`: each row's event there).
    fn pick_rows(
        &mut self,
        pick: &Pick,
        machine: &Machine<'_>,
        options: &PlanOptions,
        show_tools: bool,
        request: &mut Request,
        sched_of_row: &mut Vec<Option<usize>>,
    ) -> Vec<(u16, usize)> {
        let model = pick.model;
        if !self.probes.iter().any(|(m, _)| std::ptr::eq(*m, model)) {
            self.probes.push((model, machine_probes(model, machine)));
        }
        let probes = self.probes_of(model).to_vec();
        let value_slots = needed_slots(model, pick.metric, &self.literals, &probes, false);
        let slots = needed_slots(model, pick.metric, &self.literals, &probes, options.thresholds);
        let mut rows = Vec::new();
        for slot in slots {
            let id = &model.ids[slot as usize];
            if id.kind == IdKind::Probe {
                continue;
            }
            let row = self.input_row(model, id, machine, show_tools, request, sched_of_row);
            rows.push((slot, row));
        }
        sched_of_row.resize(self.rows.len(), None);
        let events: Vec<usize> = rows
            .iter()
            .filter(|(slot, _)| value_slots.contains(slot))
            .filter_map(|&(_, r)| sched_of_row[r])
            .collect();
        let threshold_events: Vec<usize> = rows
            .iter()
            .filter(|(slot, _)| !value_slots.contains(slot))
            .filter_map(|&(_, r)| sched_of_row[r])
            .collect();
        let why = grouping(pick, options, machine.pmus).err();
        request.metrics.push(SchedMetric {
            name: model.str(model.metrics[pick.metric].name).to_string(),
            events,
            threshold_events,
            grouped: why.is_none(),
            pack: packs(pick, options),
        });
        rows
    }

    /// The row of input `id`: the one already resolved to the same counter, box set, tool or
    /// name, else a new row, whose hardware event joins the scheduler's `request`.
    fn input_row(
        &mut self,
        model: &'static Model,
        id: &Id,
        machine: &Machine<'_>,
        show_tools: bool,
        request: &mut Request,
        sched_of_row: &mut Vec<Option<usize>>,
    ) -> usize {
        let name = id_name(model, id);
        let resolution = resolve_id(model, id, machine.sysfs, machine.env);
        let key = match &resolution {
            Resolution::Counter(e) => Key::Counter(e.attr.clone(), e.cpus.clone()),
            Resolution::Boxes(b) => {
                Key::Boxes(b[0].event.attr.clone(), b.iter().map(|b| b.event.attr.type_).collect())
            }
            Resolution::Tool(t) => Key::Tool(*t),
            Resolution::RetireLatency | Resolution::Missing(_) => Key::Named(name.clone()),
        };
        match self.find(&key) {
            Some(row) => {
                if matches!(self.rows[row].source, Source::Tool(_)) && show_tools {
                    self.rows[row].show = true;
                }
                row
            }
            None => {
                let show = show_tools || !matches!(resolution, Resolution::Tool(_));
                let pmu_name = match &resolution {
                    Resolution::Counter(e) => counter_pmu(e, machine.sysfs),
                    // Scheduled on box 0; every box gets the same groups.
                    Resolution::Boxes(b) => counter_pmu(&b[0].event, machine.sysfs),
                    _ => None,
                };
                let row = self.add(resolution, name.clone(), show);
                sched_of_row.resize(self.rows.len(), None);
                if let Some(pmu_name) = pmu_name
                    && let Some((p, demand)) = demand_of(model, id, &pmu_name, machine.pmus)
                {
                    request.events.push(SchedEvent { name, pmu: Some(p), demand });
                    sched_of_row[row] = Some(request.events.len() - 1);
                }
                row
            }
        }
    }

    /// Turns the scheduled groups into spec groups: the first group an event is in uses its
    /// row, later ones a copy. Returns each scheduled group's rows.
    fn add_scheduled_groups(
        &mut self,
        schedule: &Schedule,
        request: &Request,
        sched_of_row: &[Option<usize>],
    ) -> Vec<Vec<usize>> {
        let row_of_sched: Vec<usize> = {
            let mut v = vec![usize::MAX; request.events.len()];
            for (r, s) in sched_of_row.iter().enumerate() {
                if let Some(s) = s {
                    v[*s] = r;
                }
            }
            v
        };
        // Rows already in a user's `-e` group count as used.
        let mut used: Vec<bool> = (0..self.rows.len())
            .map(|r| match self.rows[r].source {
                Source::Counter(s) => self.groups.iter().any(|g| g.contains(&s)),
                _ => false,
            })
            .collect();
        let mut group_rows: Vec<Vec<usize>> = Vec::new();
        let first_group = self.groups.len();
        for group in &schedule.groups {
            let Some(_) = group.pmu else {
                group_rows.push(Vec::new());
                continue;
            };
            let mut rows = Vec::new();
            for &e in &group.events {
                let base = row_of_sched[e];
                let row = if used[base] { self.duplicate(base) } else { base };
                used[base] = true;
                used.resize(self.rows.len(), true);
                rows.push(row);
            }
            let specs: Vec<usize> = rows
                .iter()
                .filter_map(|&r| match self.rows[r].source {
                    Source::Counter(s) => Some(s),
                    _ => None,
                })
                .collect();
            for (&s, &e) in specs.iter().zip(&group.events) {
                let d = request.events[e].demand;
                self.sticky[s] = d.slots || d.topdown_metric;
            }
            self.groups.push(specs);
            group_rows.push(rows);
        }
        self.replicate_box_groups(first_group);
        group_rows
    }

    /// Puts the software and msr inputs of the roots (`root_rows`) that no group holds into
    /// one group.
    fn group_software_inputs(
        &mut self,
        root_rows: &[Vec<(u16, usize)>],
        sched_of_row: &[Option<usize>],
    ) {
        // Software and msr inputs of metrics share one group: they take no hardware counter
        // and may join any group. Other counterless PMUs (cstate, power) are separate
        // hardware PMUs the kernel will not mix in one group, so they are opened alone.
        let soft: Vec<usize> = root_rows
            .iter()
            .flatten()
            .filter_map(|&(_, r)| match self.rows[r].source {
                Source::Counter(s)
                    if sched_of_row[r].is_none()
                        && software_context(&self.events[s])
                        && !self.groups.iter().any(|g| g.contains(&s)) =>
                {
                    Some(s)
                }
                _ => None,
            })
            .collect::<std::collections::BTreeSet<usize>>()
            .into_iter()
            .collect();
        if !soft.is_empty() {
            let mut soft = soft;
            let names: Vec<String> = self.specs.iter().map(|s| s.name.clone()).collect();
            soft.sort_by_key(|&s| (crate::default_rank(&names[s]), s));
            self.groups.push(soft);
        }
    }

    /// Adds a root per pick: each reads its inputs from its own group.
    fn add_roots(
        &mut self,
        picks: &[Pick],
        schedule: &Schedule,
        root_rows: &[Vec<(u16, usize)>],
        group_rows: &[Vec<usize>],
    ) {
        for (i, pick) in picks.iter().enumerate() {
            let model = pick.model;
            let placement = schedule.placements[i].clone();
            let mut slot_rows = vec![None; model.ids.len()];
            let own: Vec<usize> = match &placement {
                Placement::Together { groups } => {
                    groups.iter().flat_map(|&g| group_rows[g].clone()).collect()
                }
                _ => Vec::new(),
            };
            for &(slot, row) in &root_rows[i] {
                let mine =
                    own.iter().copied().find(|&r| r == row || self.rows[r].copy_of == Some(row));
                slot_rows[slot as usize] = Some(mine.unwrap_or(row));
            }
            self.roots.push(Root { model, metric: pick.metric, slot_rows, placement });
        }
    }

    /// Hosts the roots from `first_root` on, and lists the retire latencies they read, with a
    /// warning that they are not sampled.
    fn note_retire_latency(&mut self, first_root: usize, machine: &Machine<'_>) {
        for r in first_root..self.roots.len() {
            let probes = self.probes_of(self.roots[r].model).to_vec();
            self.host_root(r, &probes);
        }
        for root in &self.roots[first_root..] {
            let model = root.model;
            let metric = model.str(model.metrics[root.metric].name).to_string();
            for (slot, row) in root.slot_rows.iter().enumerate() {
                let Some(row) = row else { continue };
                if self.rows[*row].source != Source::RetireLatency {
                    continue;
                }
                let name = self.rows[*row].name.clone();
                match self.retire_events.iter_mut().find(|r| r.name == name) {
                    Some(r) => {
                        if !r.metrics.contains(&metric) {
                            r.metrics.push(metric.clone());
                        }
                    }
                    None => {
                        let event =
                            retire_base(model, &model.ids[slot], machine.sysfs, machine.env);
                        self.retire_events.push(RetireEvent {
                            name,
                            metrics: vec![metric.clone()],
                            event,
                        });
                    }
                }
            }
        }
        let retire: Vec<String> = self
            .roots
            .iter()
            .filter(|root| {
                root.slot_rows
                    .iter()
                    .flatten()
                    .any(|&row| self.rows[row].source == Source::RetireLatency)
            })
            .map(|root| root.model.str(root.model.metrics[root.metric].name).to_string())
            .collect();
        if !retire.is_empty() {
            self.warnings.push(Warning::RetireLatencyUnsampled { metrics: retire });
        }
    }
}

/// A plan made from the catalogue alone, for a model named without its machine
/// (`tmetric plan --model M`): the scheduler's request and its outcome under each strategy.
#[derive(Debug, Clone, serde::Serialize)]
pub struct OfflinePlan {
    /// The PMUs assumed (uncore boxes the metrics use are added).
    pub pmus: PmuModel,
    /// The request.
    pub request: Request,
    /// tmetric's schedule.
    pub tmetric: Schedule,
    /// perf 6.12's strategy on the same request.
    pub perf: Schedule,
    /// Per PMU: a lower bound on the time slices.
    pub lower_bound: Vec<usize>,
    /// Per PMU: a lower bound for schedules that keep each packable metric in one group.
    pub together_bound: Vec<usize>,
    /// Per metric: why it is not grouped, if it is not.
    pub ungrouped_why: Vec<Option<NoGroup>>,
}

impl OfflinePlan {
    /// Lower bound on the slices of the busiest PMU.
    pub fn lower(&self) -> usize {
        self.lower_bound.iter().copied().max().unwrap_or(0)
    }

    /// Metrics whose value events tmetric's schedule counts together, and perf's.
    pub fn together(&self) -> (usize, usize) {
        let count = |s: &Schedule| {
            s.placements.iter().filter(|p| matches!(p, Placement::Together { .. })).count()
        };
        (count(&self.tmetric), count(&self.perf))
    }
}

/// The offline identity of an input: its PMU and encoding, so that the same event reached
/// through two names is counted once.
fn offline_key(model: &Model, id: &Id) -> String {
    let mods = model.str(id.modifiers);
    match id.kind {
        IdKind::Event(i) => {
            let e = &model.events.at(i as usize);
            format!("{}/{},{}/{mods}", model.str(e.pmu), model.str(e.encoding), model.str(id.terms))
        }
        _ => format!("{}/{}/{mods}", model.str(id.pmu), model.str(id.text)),
    }
}

/// Literals for planning without a machine. They only decide which branch an expression takes:
/// 1 keeps every branch a non-zero value takes (`#slots`, `#num_cpus`, ...); `#smt_on` and
/// `#core_wide` follow the assumed SMT state and system-wide counting.
pub fn offline_literals(smt_on: bool, system_wide: bool) -> [f64; Literal::COUNT] {
    let mut literals = [1.0; Literal::COUNT];
    literals[Literal::SmtOn.index()] = f64::from(u8::from(smt_on));
    literals[Literal::CoreWide.index()] = f64::from(u8::from(!smt_on || system_wide));
    literals
}

/// Plans `picks` from the catalogue alone on the PMUs `pmus` describes.
pub fn plan_offline(picks: &[Pick], pmus: &PmuModel, options: &PlanOptions) -> OfflinePlan {
    let mut pmus = pmus.clone();
    let literals = offline_literals(pmus.smt_on, options.system_wide);
    let mut request = Request::default();
    let mut keys: Vec<String> = Vec::new();
    let mut ungrouped_why = Vec::new();
    for pick in picks {
        let model = pick.model;
        let mut events = Vec::new();
        let mut threshold_events = Vec::new();
        let probes = offline_probes(model);
        let value_slots = needed_slots(model, pick.metric, &literals, &probes, false);
        for slot in needed_slots(model, pick.metric, &literals, &probes, options.thresholds) {
            let list =
                if value_slots.contains(&slot) { &mut events } else { &mut threshold_events };
            let id = &model.ids[slot as usize];
            if id.retire_latency || matches!(id.kind, IdKind::Tool(_) | IdKind::Probe) {
                continue;
            }
            let key = offline_key(model, id);
            if let Some(i) = keys.iter().position(|k| *k == key) {
                list.push(i);
                continue;
            }
            let pmu_name = match id.kind {
                IdKind::Event(i) => model.str(model.events.at(i as usize).pmu).to_string(),
                _ => model.str(id.pmu).to_string(),
            };
            let software =
                id.kind == IdKind::Kernel && event::software_config(model.str(id.event)).is_some();
            let counterless = software
                || pmu_name == "msr"
                || pmu_name.starts_with("cstate")
                || pmu_name == "power"
                || pmu_name.starts_with("tool");
            let pmu_name = if pmu_name.is_empty() {
                pmus.pmus
                    .iter()
                    .find(|p| p.core)
                    .map_or_else(|| "default_core".into(), |p| p.name.clone())
            } else {
                pmu_name
            };
            let (pmu, demand) = if counterless {
                (None, Demand::GENERAL)
            } else {
                if pmus.find(&pmu_name).is_none() {
                    pmus.pmus.push(uncore_pmu(model, &pmu_name));
                }
                match demand_of(model, id, &pmu_name, &pmus) {
                    Some((p, d)) => (Some(p), d),
                    None => (None, Demand::GENERAL),
                }
            };
            keys.push(key);
            request.events.push(SchedEvent { name: id_name(model, id), pmu, demand });
            list.push(request.events.len() - 1);
        }
        let why = grouping(pick, options, &pmus).err();
        request.metrics.push(SchedMetric {
            name: model.str(model.metrics[pick.metric].name).to_string(),
            events,
            threshold_events,
            grouped: why.is_none(),
            pack: packs(pick, options),
        });
        ungrouped_why.push(why);
    }
    let tmetric = schedule::schedule(&request, &pmus, options.strategy);
    let perf = schedule::schedule(&request, &pmus, Strategy::Perf);
    let lower_bound = schedule::lower_bound(&request, &pmus);
    let together_bound = schedule::together_lower_bound(&request, &pmus);
    OfflinePlan { pmus, request, tmetric, perf, lower_bound, together_bound, ungrouped_why }
}

/// Plans `picks` as `tmetric stat` plans them on `machine`: its `literals`, its probes
/// (`has_event`, `strcmp_cpuid_str`), every input resolved through its sysfs; the plan stat
/// would open (the schedule of [`PlanOptions::strategy`]) and, on the same request, perf
/// 6.12's strategy and the lower bounds.
pub fn plan_on_machine(
    picks: &[Pick],
    machine: &Machine<'_>,
    literals: [f64; Literal::COUNT],
    options: &PlanOptions,
) -> (Plan, OfflinePlan) {
    let mut plan = Plan::new(literals);
    plan.add_metrics(picks, machine, options, true);
    let pmus = machine.pmus.clone();
    let request = plan.request.clone();
    let tmetric = plan
        .schedule
        .clone()
        .unwrap_or_else(|| schedule::schedule(&request, &pmus, options.strategy));
    let perf = schedule::schedule(&request, &pmus, Strategy::Perf);
    let lower_bound = schedule::lower_bound(&request, &pmus);
    let together_bound = schedule::together_lower_bound(&request, &pmus);
    let ungrouped_why = picks.iter().map(|pick| grouping(pick, options, &pmus).err()).collect();
    let offline =
        OfflinePlan { pmus, request, tmetric, perf, lower_bound, together_bound, ungrouped_why };
    (plan, offline)
}

/// An uncore PMU a model's metrics use, with `counter.json` numbers or the 4-counter default.
fn uncore_pmu(model: &Model, name: &str) -> crate::pmu::PmuCounters {
    let unit = name.strip_prefix("uncore_").unwrap_or(name);
    let (general, fixed, source) = match pmu::counter_json(model, unit) {
        Some((generic, fixed)) => (generic, fixed, crate::pmu::CountSource::CounterJson),
        None => (
            4,
            0,
            crate::pmu::CountSource::VendorDefault(
                "uncore box: assuming 4 general counters".into(),
            ),
        ),
    };
    crate::pmu::PmuCounters {
        name: name.to_string(),
        core: false,
        vendor: Vendor::Other,
        general: general.max(1),
        fixed,
        fixed_reserved: 0,
        metric_events: 0,
        cycle_counter: false,
        cpus: None,
        source,
        adjustments: Vec::new(),
    }
}
