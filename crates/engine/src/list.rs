//! The compiled catalogue as listing rows (`tmetric list`): models with their cpuids, metrics,
//! metric groups and vendor events, filtered and sorted as perf's `list` shows them, and the
//! kernel's own PMU events from sysfs. Data only; `tmetric_print::list` lays the rows out as
//! text or JSON lines (a row's fields are its JSON keys).

use std::collections::BTreeMap;

use serde::Serialize;
use tmetric_catalog::catalog::{Constraint, CounterMask, Event, Metric, event_flags};
use tmetric_catalog::{Model, cpuid_map};

/// Whether a name passes the user's filter (every name passes without one).
pub type Keep<'a> = &'a dyn Fn(&str) -> bool;

/// One kernel PMU event: a file under `<pmu>/events/` in sysfs.
#[derive(Debug, Serialize, PartialEq)]
pub struct KernelPmuEvent {
    /// The PMU's sysfs name.
    pub pmu: String,
    /// The event's file name.
    pub event: String,
    /// The event as `-e` takes it: `pmu/event/`.
    pub encoding: String,
    /// The file's terms, such as `event=0x3c`.
    pub terms: String,
    /// Whether the PMU is a core PMU, whose events perf names without the PMU prefix.
    pub core: bool,
}

/// Every `events/*` alias of every PMU under `sysfs` whose name or `pmu/event/` passes
/// `keep`, sorted by PMU then name, as perf 6.12's `list pmu` finds them (its sysfs half; the
/// vendor JSON events are [`events`]).
pub fn kernel_pmu_events(sysfs: &tmetric_runtime::Sysfs, keep: Keep) -> Vec<KernelPmuEvent> {
    let core = sysfs.core_pmu();
    let mut events = Vec::new();
    for name in sysfs.pmu_names() {
        let Ok(pmu) = sysfs.pmu(&name) else { continue };
        let is_core = core.as_deref() == Some(name.as_str()) || name == "cpu_atom";
        for event in pmu.alias_names() {
            let encoding = format!("{name}/{event}/");
            if !keep(&event) && !keep(&encoding) {
                continue;
            }
            let terms = tmetric_runtime::input::read_sysfs(pmu.dir().join("events").join(&event))
                .map(|t| t.trim().to_string())
                .unwrap_or_default();
            events.push(KernelPmuEvent {
                pmu: name.clone(),
                event,
                encoding,
                terms,
                core: is_core,
            });
        }
    }
    events
}

/// perf's `list --raw-dump`'s words: the metric groups and the metric names (each sorted,
/// without repeats) of `model`'s metrics and the common metrics whose names pass `keep`.
pub fn raw_names(
    model: Option<&'static Model>,
    keep: Keep,
) -> (Vec<&'static str>, Vec<&'static str>) {
    let common = tmetric_catalog::common();
    let mut tables = vec![common];
    if let Some(m) = model.filter(|m| !std::ptr::eq(*m, common)) {
        tables.insert(0, m);
    }
    let mut groups: Vec<&str> = Vec::new();
    let mut names: Vec<&str> = Vec::new();
    for table in &tables {
        for metric in table.metrics() {
            let name = table.str(metric.name);
            if !keep(name) {
                continue;
            }
            names.push(name);
            groups.extend(split_groups(table.str(metric.groups)));
        }
    }
    groups.sort_unstable();
    groups.dedup();
    names.sort_unstable();
    names.dedup();
    (groups, names)
}

/// One cpuid pattern of perf's mapfile that selects a model.
#[derive(Debug, Serialize)]
pub struct CpuidRow {
    /// The mapfile's regex.
    pub regex: &'static str,
    /// The mapfile's version column.
    pub version: &'static str,
    /// The mapfile's type column (`core`, ...).
    pub event_type: &'static str,
}

/// One model of the catalogue.
#[derive(Debug, Serialize)]
pub struct ModelRow {
    /// `arch/name`.
    pub model: String,
    /// The architecture directory.
    pub arch: &'static str,
    /// The model's name below the architecture.
    pub name: &'static str,
    /// A `sys/` model, matched by PMU identifier rather than cpuid.
    pub sys: bool,
    /// How many events it has.
    pub events: usize,
    /// How many metrics it has.
    pub metrics: usize,
    /// How many metric groups metricgroups.json describes.
    pub groups: usize,
    /// The cpuids that select it.
    pub cpuids: Vec<CpuidRow>,
    /// The model of the machine listing it (set by the caller, which knows the machine).
    pub this_machine: bool,
    /// The perf vintages that define a model of this `arch/name`, oldest first.
    pub vintages: Vec<&'static str>,
    /// The vintage whose vendor tables this row's figures come from (the one in use).
    pub vintage: &'static str,
}

/// Every model whose `arch/name` passes `keep`, in catalogue order.
pub fn models(keep: Keep) -> Vec<ModelRow> {
    tmetric_catalog::models()
        .iter()
        .enumerate()
        .filter(|(_, m)| keep(&m.path()))
        .map(|(index, model)| ModelRow {
            model: model.path(),
            arch: model.arch,
            name: model.name,
            sys: model.is_sys,
            events: model.events.len(),
            metrics: model.metric_count(),
            groups: model.groups.len(),
            cpuids: cpuid_map()
                .iter()
                .filter(|row| row.model == index)
                .map(|row| CpuidRow {
                    regex: row.regex,
                    version: row.version,
                    event_type: row.event_type,
                })
                .collect(),
            this_machine: false,
            vintages: tmetric_catalog::vintages_of(&model.path())
                .into_iter()
                .map(|v| v.version)
                .collect(),
            vintage: tmetric_catalog::vintage().version,
        })
        .collect()
}

/// One metric of a model.
#[derive(Debug, Serialize)]
pub struct MetricRow {
    /// The metric's name.
    pub metric: &'static str,
    /// `arch/name` of the model that defines it.
    pub model: String,
    /// True for the common table's metrics, which apply to every model.
    pub common: bool,
    /// The PMU the vendor names (`default_core` for the core PMU).
    pub pmu: &'static str,
    /// Its metric groups.
    pub groups: Vec<&'static str>,
    /// The ScaleUnit's unit.
    pub unit: &'static str,
    /// The ScaleUnit's scale.
    pub scale: f64,
    /// BriefDescription.
    pub brief: &'static str,
    /// PublicDescription.
    pub public: &'static str,
    /// MetricExpr as the vendor wrote it.
    pub expr: &'static str,
    /// MetricThreshold, if any.
    pub threshold: Option<&'static str>,
    /// MetricConstraint, as perf names it.
    pub constraint: Option<&'static str>,
    /// DefaultMetricgroupName, if any.
    pub default_group: Option<&'static str>,
    /// MetricgroupNoGroup's groups.
    pub no_group: Vec<&'static str>,
    /// Compat, if any.
    pub compat: Option<&'static str>,
}

/// The listed rows of one table: a model's own, or the common metrics'.
#[derive(Debug)]
pub struct Table<R> {
    /// The table's model.
    pub model: &'static Model,
    /// Whether it is the common table, which applies to every model.
    pub common: bool,
    /// Its rows that passed the filter.
    pub rows: Vec<R>,
}

/// `model`, then the common table when `model` is not it.
fn tables(model: &'static Model) -> Vec<(&'static Model, bool)> {
    let common = tmetric_catalog::common();
    let mut tables = vec![(model, false)];
    if !std::ptr::eq(model, common) {
        tables.push((common, true));
    }
    tables
}

fn metric_row(model: &'static Model, metric: &Metric, common: bool) -> MetricRow {
    MetricRow {
        metric: model.str(metric.name),
        model: model.path(),
        common,
        pmu: model.str(metric.pmu),
        groups: split_groups(model.str(metric.groups)),
        unit: model.str(metric.unit),
        scale: metric.scale,
        brief: model.str(metric.brief),
        public: model.str(metric.public),
        expr: model.str(metric.expr),
        threshold: non_empty(model.str(metric.threshold_expr)),
        constraint: constraint_name(metric.constraint),
        default_group: non_empty(model.str(metric.default_group)),
        no_group: split_groups(model.str(metric.no_group)),
        compat: non_empty(model.str(metric.compat)),
    }
}

/// `model`'s metrics and then the common ones, each table sorted by name and PMU, keeping a
/// metric whose name or one of whose groups passes `keep`.
pub fn metrics(model: &'static Model, keep: Keep) -> Vec<Table<MetricRow>> {
    tables(model)
        .into_iter()
        .map(|(table, common)| {
            let mut rows: Vec<MetricRow> = table
                .metrics()
                .map(|m| metric_row(table, &m, common))
                .filter(|row| keep(row.metric) || row.groups.iter().any(|g| keep(g)))
                .collect();
            rows.sort_by(|a, b| a.metric.cmp(b.metric).then(a.pmu.cmp(b.pmu)));
            Table { model: table, common, rows }
        })
        .collect()
}

/// One metric group of a model.
#[derive(Debug, Serialize)]
pub struct GroupRow {
    /// The group's name.
    pub group: &'static str,
    /// `arch/name` of its model.
    pub model: String,
    /// Whether it is a group of the common metrics.
    pub common: bool,
    /// What metricgroups.json says of it (empty when nothing).
    pub description: &'static str,
    /// Its metrics, sorted.
    pub metrics: Vec<&'static str>,
}

/// `model`'s metric groups and then the common ones, by name, keeping those whose name passes
/// `keep`. A group is listed when a metric names it; one that metricgroups.json describes but
/// no metric names cannot be selected with -M, so it is not listed.
pub fn groups(model: &'static Model, keep: Keep) -> Vec<Table<GroupRow>> {
    tables(model)
        .into_iter()
        .map(|(table, common)| {
            // Every group a metric names, with the description metricgroups.json gives, if any.
            let mut groups: BTreeMap<&str, (&str, Vec<&str>)> = BTreeMap::new();
            for group in table.groups {
                groups.entry(table.str(group.name)).or_default().0 = table.str(group.description);
            }
            for metric in table.metrics() {
                for group in split_groups(table.str(metric.groups)) {
                    let names = &mut groups.entry(group).or_default().1;
                    let name = table.str(metric.name);
                    if !names.contains(&name) {
                        names.push(name);
                    }
                }
            }
            let rows = groups
                .into_iter()
                .filter(|(_, (_, metrics))| !metrics.is_empty())
                .filter(|(name, _)| keep(name))
                .map(|(group, (description, mut metrics))| {
                    metrics.sort_unstable();
                    GroupRow { group, model: table.path(), common, description, metrics }
                })
                .collect();
            Table { model: table, common, rows }
        })
        .collect()
}

/// The counters an event may use.
#[derive(Debug, Serialize, PartialEq)]
pub struct CountersRow {
    /// General-purpose counters the event may use; `None` when the JSON sets no restriction.
    pub generic: Option<Vec<u32>>,
    /// Fixed counters the event may use.
    pub fixed: Vec<u32>,
}

impl From<CounterMask> for CountersRow {
    fn from(c: CounterMask) -> CountersRow {
        CountersRow {
            generic: (c.generic != CounterMask::ANY.generic).then(|| bits(c.generic)),
            fixed: bits(u32::from(c.fixed)),
        }
    }
}

/// One vendor event of a model.
#[derive(Debug, Serialize)]
pub struct EventRow {
    /// The event's name.
    pub event: &'static str,
    /// `arch/name` of its model.
    pub model: String,
    /// The PMU the vendor names.
    pub pmu: &'static str,
    /// The vendor's topic (the JSON file it came from).
    pub topic: &'static str,
    /// `pmu/terms/`, as it would be passed to `perf stat -e`.
    pub encoding: String,
    /// The terms alone, as jevents writes them.
    pub terms: &'static str,
    /// BriefDescription.
    pub brief: &'static str,
    /// PublicDescription.
    pub public: &'static str,
    /// ScaleUnit's unit.
    pub unit: &'static str,
    /// ScaleUnit's scale.
    pub scale: f64,
    /// The counters it may use.
    pub counters: CountersRow,
    /// The PEBS field.
    pub pebs: u8,
    /// Counted once per package.
    pub per_pkg: bool,
    /// Deprecated.
    pub deprecated: bool,
    /// Experimental.
    pub experimental: bool,
    /// Compat, if any.
    pub compat: Option<&'static str>,
}

/// `model`'s events whose name passes `keep` (deprecated ones only when asked), as perf's
/// list orders them: by topic, then name, then PMU.
pub fn events(model: &'static Model, deprecated: bool, keep: Keep) -> Vec<EventRow> {
    let mut events: Vec<Event> = model
        .events
        .iter()
        .filter(|e| deprecated || e.flags & event_flags::DEPRECATED == 0)
        .filter(|e| keep(model.str(e.name)))
        .collect();
    events.sort_by(|a, b| {
        (model.str(a.topic), model.str(a.name), model.str(a.pmu)).cmp(&(
            model.str(b.topic),
            model.str(b.name),
            model.str(b.pmu),
        ))
    });
    events
        .iter()
        .map(|event| EventRow {
            event: model.str(event.name),
            model: model.path(),
            pmu: model.str(event.pmu),
            topic: model.str(event.topic),
            encoding: event_encoding(model, event),
            terms: model.str(event.encoding),
            brief: model.str(event.brief),
            public: model.str(event.public),
            unit: model.str(event.unit),
            scale: event.scale,
            counters: event.counters.into(),
            pebs: event.pebs,
            per_pkg: event.flags & event_flags::PER_PKG != 0,
            deprecated: event.flags & event_flags::DEPRECATED != 0,
            experimental: event.flags & event_flags::EXPERIMENTAL != 0,
            compat: non_empty(model.str(event.compat)),
        })
        .collect()
}

fn non_empty(s: &str) -> Option<&str> {
    (!s.is_empty()).then_some(s)
}

fn split_groups(s: &str) -> Vec<&str> {
    s.split(';').filter(|g| !g.is_empty()).collect()
}

fn constraint_name(c: Constraint) -> Option<&'static str> {
    match c {
        Constraint::None => None,
        Constraint::NoGroupEvents => Some("NO_GROUP_EVENTS"),
        Constraint::NoGroupEventsNmi => Some("NO_GROUP_EVENTS_NMI"),
        Constraint::NoGroupEventsSmt => Some("NO_GROUP_EVENTS_SMT"),
    }
}

fn bits(mask: u32) -> Vec<u32> {
    (0..32).filter(|b| mask & (1 << b) != 0).collect()
}

/// The name perf gives the core PMU of an architecture, for spelling `default_core` events.
pub fn core_pmu_name(arch: &str) -> &'static str {
    match arch {
        "s390" => "cpum_cf",
        "arm64" => "armv8_pmuv3",
        _ => "cpu",
    }
}

fn event_encoding(model: &Model, event: &Event) -> String {
    let pmu = model.str(event.pmu);
    let pmu = if pmu == "default_core" || pmu.is_empty() { core_pmu_name(model.arch) } else { pmu };
    format!("{pmu}/{}/", model.str(event.encoding))
}

/// perf 7.x's tool PMU events `keep` keeps, in perf's order (by name), when the perf release
/// whose output is followed has that PMU (`--perf-version 7.2`); none for perf 6.12.
pub fn tool_pmu_events(keep: &dyn Fn(&str) -> bool) -> Vec<&'static tmetric_names::ToolPmuEvent> {
    if !crate::contract::current().tool_pmu {
        return Vec::new();
    }
    let mut events: Vec<_> = tmetric_names::tool_pmu_events().filter(|e| keep(e.name)).collect();
    events.sort_by_key(|e| e.name);
    events
}
