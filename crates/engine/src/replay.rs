//! A recorded plan rebuilt for evaluation (`tmetric report`): the rows, counters and groups a
//! recording describes, renumbered into a [`Plan`]; recorded metrics read the very rows they
//! read when they were printed, and any other metric has its inputs matched to the recorded
//! rows by event name, from the group holding most of them, with a row saying so for each
//! input nobody counted. The recording's format is the record crate's: this module takes what
//! a recording says as data ([`Recorded`]) and never reads a file.

use std::collections::BTreeMap;

use tmetric_catalog::Model;
use tmetric_model::Literal;
use tmetric_runtime::{CounterEvent, Snapshot, ToolEvent};

use crate::compiled::Select;
use crate::plan::{Pick, Plan, Resolution, Root, RowBox, Source, Warning, id_name, needed_slots};
use crate::schedule::Placement;

/// A recorded plan: what a record file says of the counters, rows and machine.
#[derive(Debug, Clone)]
pub struct Recorded {
    /// Every `#literal` as recorded (NaN when unknown).
    pub literals: [f64; Literal::COUNT],
    /// The counters, in recorded order (an index into this is a recorded *event*).
    pub events: Vec<CounterEvent>,
    /// Groups of recorded events, leader first; every event in at most one.
    pub groups: Vec<Vec<usize>>,
    /// The printed rows, in order.
    pub rows: Vec<RecordedRow>,
    /// Per model of the recorded metrics: its probe values on the recorded machine.
    pub probes: Vec<(&'static Model, Vec<f64>)>,
    /// The retire latencies the recorded metrics used (cycles, by event name).
    pub retire_latency: Vec<(String, f64)>,
    /// The recorded machine's cpuid as perf's mapfile spells it, for `strcmp_cpuid_str()`
    /// of metrics that were not recorded.
    pub cpuid: Option<String>,
    /// What the estimate of rotated groups' missed turns needs ([`crate::estimate`]).
    pub estimate: RecordedEstimate,
}

/// What [`crate::estimate`] needs of a recorded plan: the groups tmetric rotated itself and
/// their anchors (by recorded event), the kernel's HZ and the CPUs' SMT siblings. Empty for
/// records without them (perf's, or tmetric's from before): their counts are scaled by time.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RecordedEstimate {
    /// tmetric rotated the groups itself.
    pub rotating: bool,
    /// Per rotated group: its PMU (any number the same for one PMU), leading event and
    /// anchor event.
    pub rotated: Vec<(usize, usize, Option<usize>)>,
    /// The kernel's timer ticks per second (0: unknown).
    pub tick_hz: f64,
    /// (CPU, its SMT sibling).
    pub siblings: Vec<(u32, u32)>,
}

/// One recorded row.
#[derive(Debug, Clone)]
pub struct RecordedRow {
    /// The printed name.
    pub name: String,
    /// Where its value came from.
    pub source: RecordedSource,
    /// Whether it was printed.
    pub show: bool,
    /// The row it counted again for another group's metric.
    pub copy_of: Option<usize>,
    /// An uncore event on several boxes: per box, its recorded event and the name it prints
    /// under `-A` (the first is [`RecordedRow::source`]'s event). Empty otherwise.
    pub boxes: Vec<(usize, String)>,
}

/// Where a recorded row's value came from.
#[derive(Debug, Clone, PartialEq)]
pub enum RecordedSource {
    /// A recorded event.
    Counter(usize),
    /// A tool event, by name (`duration_time`).
    Tool(String),
    /// A retire latency.
    RetireLatency,
    /// Nothing counted it; the reason.
    Missing(String),
}

/// A metric as recorded.
#[derive(Debug, Clone)]
pub struct RecordedRoot {
    /// Its model, `arch/name`.
    pub model: String,
    /// Its name.
    pub metric: String,
    /// Its PMU (a model may define a name once per PMU).
    pub pmu: String,
    /// (input slot of the model, the input's name, recorded row) per input it read.
    pub inputs: Vec<(usize, String, usize)>,
    /// The recorded row it printed on.
    pub host: Option<usize>,
}

/// Which metrics a replay evaluates.
#[derive(Debug, Clone, Copy)]
pub enum Choice<'a> {
    /// The recorded metrics.
    Recorded,
    /// These metrics (`-M`): a recorded one reads its recorded rows, others are matched by name.
    Picks(&'a [Pick]),
    /// The recorded metrics with this model's formulas (`--model`); common metrics stay common.
    Model(&'static Model),
}

/// A recording that cannot be replayed: it contradicts itself.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ReplayError {
    /// A row names an event the recording lacks.
    #[error("row {row} names event {event}, which the header lacks")]
    RowEvent {
        /// The row.
        row: usize,
        /// The event.
        event: usize,
    },
    /// A row names a tool event this build does not know.
    #[error("row {row} names the unknown tool event `{name}`")]
    UnknownTool {
        /// The row.
        row: usize,
        /// The tool's name.
        name: String,
    },
    /// A row's first box is not its own counter.
    #[error("row `{row}`'s first box is event {event}, not its counter")]
    FirstBox {
        /// The row's name.
        row: String,
        /// The first box's event.
        event: usize,
    },
    /// A row names a box event the recording lacks.
    #[error("row `{row}` names box event {event}, which the header lacks")]
    BoxEvent {
        /// The row's name.
        row: String,
        /// The event.
        event: usize,
    },
    /// Two rows count one event.
    #[error("event {event} is named by two rows")]
    TwoRows {
        /// The event.
        event: usize,
    },
    /// A recorded metric reads a row the recording lacks.
    #[error("metric {metric} reads row {row}, which the header lacks")]
    RootRow {
        /// The metric.
        metric: String,
        /// The row.
        row: usize,
    },
    /// No recorded row printed a recorded metric.
    #[error("no row prints metric {metric}")]
    NoHost {
        /// The metric.
        metric: String,
    },
}

/// What a replay leaves out, said once.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReplayWarning {
    /// Recorded metrics this build's catalogue does not have.
    UnknownMetrics,
    /// `--model`'s model has no metric of a recorded metric's name.
    NoSuchMetric {
        /// The model, `arch/name`.
        model: String,
        /// The metric.
        metric: String,
    },
}

impl std::fmt::Display for ReplayWarning {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ReplayWarning::UnknownMetrics => f.write_str(
                "some recorded metrics are not in this tmetric's catalogue; they are left out",
            ),
            ReplayWarning::NoSuchMetric { model, metric } => {
                write!(f, "{model}: has no metric `{metric}`")
            }
        }
    }
}

/// A recorded plan rebuilt (see the module documentation).
#[derive(Debug, Clone)]
pub struct Replay {
    plan: Plan,
    /// Per recorded event: its spec in the plan.
    spec_map: Vec<usize>,
    /// Per plan spec: its recorded group.
    group_of: Vec<usize>,
    cpuid: Option<String>,
}

/// Not yet given a spec.
const UNMAPPED: usize = usize::MAX;

impl Replay {
    /// Rebuilds the rows, counters and groups of `recorded`, without metrics.
    pub fn new(recorded: &Recorded) -> Result<Replay, ReplayError> {
        let mut plan = Plan::new(recorded.literals);
        let mut spec_map = vec![UNMAPPED; recorded.events.len()];
        for (i, row) in recorded.rows.iter().enumerate() {
            let resolution = match &row.source {
                RecordedSource::Counter(s) => {
                    let event = recorded
                        .events
                        .get(*s)
                        .ok_or(ReplayError::RowEvent { row: i, event: *s })?;
                    // Each counter row (and box) has its own event: one named twice would
                    // leave the other's counter without counts.
                    if spec_map[*s] != UNMAPPED {
                        return Err(ReplayError::TwoRows { event: *s });
                    }
                    Resolution::Counter(event.clone())
                }
                RecordedSource::Tool(name) => match ToolEvent::from_name(name) {
                    Some(tool) => Resolution::Tool(tool),
                    // perf 7.x's tool PMU facts are read when counting starts, for the run's
                    // target, and a recording does not keep them: no value beats a guess.
                    None if ToolEvent::on_tool_pmu(name).is_some() => Resolution::Missing(format!(
                        "`{name}` of perf 7.x's tool PMU is read when counting starts, and recordings do not keep it"
                    )),
                    None => return Err(ReplayError::UnknownTool { row: i, name: name.clone() }),
                },
                RecordedSource::RetireLatency => Resolution::RetireLatency,
                RecordedSource::Missing(why) => Resolution::Missing(why.clone()),
            };
            let r = plan.add(resolution, row.name.clone(), row.show);
            plan.rows[r].copy_of = row.copy_of;
            if let (RecordedSource::Counter(old), Source::Counter(new)) =
                (&row.source, &plan.rows[r].source)
            {
                spec_map[*old] = *new;
            }
            add_boxes(&mut plan, r, row, &recorded.events, &mut spec_map)?;
        }
        // Events no row names still count (a user's `-e` group member): keep their specs.
        for (old, event) in recorded.events.iter().enumerate() {
            if spec_map[old] == UNMAPPED {
                let r = plan.add(Resolution::Counter(event.clone()), event.name.clone(), false);
                if let Source::Counter(new) = plan.rows[r].source {
                    spec_map[old] = new;
                }
            }
        }
        let mut group_of = vec![UNMAPPED; plan.specs.len()];
        for (g, members) in recorded.groups.iter().enumerate() {
            for &s in members {
                if let Some(&spec) = spec_map.get(s) {
                    group_of[spec] = g;
                }
            }
        }
        plan.groups = recorded
            .groups
            .iter()
            .map(|g| g.iter().filter_map(|&s| spec_map.get(s).copied()).collect())
            .collect();
        plan.retire_latency = recorded.retire_latency.clone();
        let est = &recorded.estimate;
        let mapped = |e: usize| spec_map.get(e).copied().filter(|&s| s != UNMAPPED);
        for &(pmu, leader, anchor) in &est.rotated {
            if let Some(leader) = mapped(leader) {
                plan.rotated.push((pmu, leader));
                plan.anchors.push(anchor.and_then(mapped));
            }
        }
        plan.rotating = est.rotating;
        if est.tick_hz > 0.0 {
            plan.tick_hz = est.tick_hz;
        }
        plan.siblings = est.siblings.clone();
        for (model, values) in &recorded.probes {
            if values.len() == model.ids.len() {
                plan.probes.push((model, values.clone()));
            }
        }
        Ok(Replay { plan, spec_map, group_of, cpuid: recorded.cpuid.clone() })
    }

    /// Adds the metrics `choice` names: recorded ones (`roots`) read the rows they read when
    /// recorded, others their inputs matched by name ([`Replay::add_metric`]).
    pub fn choose(
        &mut self,
        roots: &[RecordedRoot],
        choice: Choice<'_>,
        warn: &mut dyn FnMut(ReplayWarning),
    ) -> Result<(), ReplayError> {
        let recorded: Vec<(&'static Model, usize, usize)> = roots
            .iter()
            .enumerate()
            .filter_map(|(i, root)| {
                let model = tmetric_catalog::model(&root.model)?;
                let metric = model
                    .metrics_named(&root.metric)
                    .into_iter()
                    .find(|&m| model.str(model.metric(m).pmu) == root.pmu)?;
                Some((model, metric, i))
            })
            .collect();
        if recorded.len() < roots.len() {
            warn(ReplayWarning::UnknownMetrics);
        }
        let picks: Vec<(&'static Model, usize)> = match choice {
            Choice::Picks(picks) => picks.iter().map(|p| (p.model, p.metric)).collect(),
            Choice::Recorded => recorded.iter().map(|&(m, x, _)| (m, x)).collect(),
            Choice::Model(other) => {
                let common = tmetric_catalog::common();
                let mut out = Vec::new();
                for &(model, metric, _) in &recorded {
                    let name = model.str(model.metric(metric).name);
                    let target = if std::ptr::eq(model, common) { common } else { other };
                    match target.metrics_named(name).first() {
                        Some(&m) => out.push((target, m)),
                        None => warn(ReplayWarning::NoSuchMetric {
                            model: target.path(),
                            metric: name.to_string(),
                        }),
                    }
                }
                out
            }
        };
        for (model, metric) in picks {
            let same = recorded.iter().find(|(m, x, _)| std::ptr::eq(*m, model) && *x == metric);
            match same {
                Some(&(model, metric, i)) => self.add_recorded(model, metric, &roots[i])?,
                None => {
                    self.add_metric(model, metric);
                }
            }
        }
        Ok(())
    }

    /// Adds recorded metric `metric` of `model`, reading the rows `root` says it read; by
    /// name when the catalogue's input slots moved since it was recorded.
    fn add_recorded(
        &mut self,
        model: &'static Model,
        metric: usize,
        root: &RecordedRoot,
    ) -> Result<(), ReplayError> {
        let mut slot_rows = vec![None; model.ids.len()];
        let mut moved = false;
        for (slot, name, row) in &root.inputs {
            match model.ids.get(*slot) {
                Some(id) if id_name(model, id) == *name => slot_rows[*slot] = Some(*row),
                _ => moved = true,
            }
        }
        if moved {
            // Written by a catalogue whose slots differ: match the inputs by name.
            self.add_metric(model, metric);
            return Ok(());
        }
        let plan = &mut self.plan;
        if let Some(&bad) = slot_rows.iter().flatten().find(|&&r| r >= plan.rows.len()) {
            return Err(ReplayError::RootRow { metric: root.metric.clone(), row: bad });
        }
        let r = plan.roots.len();
        plan.roots.push(Root { model, metric, slot_rows, placement: Placement::NoCounters });
        // Rows are rebuilt in recorded order, so the recorded host is the plan's row.
        let host = root.host.ok_or_else(|| ReplayError::NoHost { metric: root.metric.clone() })?;
        plan.rows[host].show = true;
        plan.rows[host].roots.push(r);
        Ok(())
    }

    /// Adds `model`'s `metric`, its inputs matched to the rows by name and taken from one
    /// recorded group where possible; an input nobody counted becomes a row that says so.
    /// Returns whether every input the value needs was found.
    pub fn add_metric(&mut self, model: &'static Model, metric: usize) -> bool {
        let plan = &mut self.plan;
        if plan.probes_of(model).is_empty() {
            let probes = crate::plan::probes_with(
                model,
                |text| counted(plan, &text.replace('@', "/")),
                self.cpuid.as_deref(),
            );
            plan.probes.push((model, probes));
        }
        let probes = plan.probes_of(model).to_vec();
        let value_slots = needed_slots(model, metric, &plan.literals, &probes, false);
        let all_slots = needed_slots(model, metric, &plan.literals, &probes, true);
        let candidates: Vec<(u16, Vec<usize>)> =
            all_slots.iter().map(|&slot| (slot, rows_giving(plan, model, slot))).collect();
        let best = best_group(plan, &self.group_of, &candidates);
        let mut slot_rows = vec![None; model.ids.len()];
        let mut complete = true;
        let mut lacking: Vec<String> = Vec::new();
        for (slot, rows) in candidates {
            let pick = rows
                .iter()
                .copied()
                .find(|&r| match plan.rows[r].source {
                    Source::Counter(s) => self.group_of.get(s).copied() == best,
                    _ => true,
                })
                .or_else(|| rows.first().copied());
            let row = match pick {
                Some(r) => r,
                None if value_slots.contains(&slot) => {
                    complete = false;
                    missing_row(plan, model, slot, &mut lacking)
                }
                // A threshold input nobody counted: the value is still right, only its colour
                // is unknown.
                None => continue,
            };
            slot_rows[slot as usize] = Some(row);
        }
        if !lacking.is_empty() {
            plan.warnings.push(Warning::NotRecorded {
                metric: model.str(model.metric(metric).name).to_string(),
                inputs: lacking,
            });
        }
        let r = plan.roots.len();
        plan.roots.push(Root { model, metric, slot_rows, placement: Placement::NoCounters });
        // perf prints a metric on its first event's line, as the engine's plan does.
        plan.host_root(r, &probes);
        complete
    }

    /// The plan.
    pub fn plan(&self) -> &Plan {
        &self.plan
    }

    /// The plan, for evaluating and printing.
    pub fn into_plan(self) -> Plan {
        self.plan
    }

    /// Recorded counts (numbered by recorded event) numbered as the plan's specs.
    pub fn counts(&self, recorded: &Snapshot) -> Snapshot {
        Snapshot { events: self.per_spec(&recorded.events) }
    }

    /// Per-event values of the recording (the kernel's refusals, counts) numbered as the
    /// plan's specs; specs without one get `None`.
    pub fn per_spec<T: Clone>(&self, recorded: &[Option<T>]) -> Vec<Option<T>> {
        let mut out = vec![None; self.plan.specs.len()];
        for (old, value) in recorded.iter().enumerate() {
            if let Some(&new) = self.spec_map.get(old) {
                out[new] = value.clone();
            }
        }
        out
    }
}

/// The further uncore boxes of recorded row `row` (plan row `r`), their events numbered in
/// `spec_map`.
fn add_boxes(
    plan: &mut Plan,
    r: usize,
    row: &RecordedRow,
    events: &[CounterEvent],
    spec_map: &mut [usize],
) -> Result<(), ReplayError> {
    let Some(((first, first_name), rest)) = row.boxes.split_first() else { return Ok(()) };
    if row.source != RecordedSource::Counter(*first) {
        return Err(ReplayError::FirstBox { row: row.name.clone(), event: *first });
    }
    if let Source::Counter(spec) = plan.rows[r].source {
        plan.rows[r].boxes = vec![RowBox { spec, name: first_name.clone() }];
    }
    for (s, name) in rest {
        let event = events
            .get(*s)
            .ok_or_else(|| ReplayError::BoxEvent { row: row.name.clone(), event: *s })?;
        if spec_map[*s] != UNMAPPED {
            return Err(ReplayError::TwoRows { event: *s });
        }
        spec_map[*s] = plan.add_box(r, event.clone(), name.clone());
    }
    Ok(())
}

/// The rows that give input `slot` of `model`: counters by event name, tools and retire
/// latencies by name.
fn rows_giving(plan: &Plan, model: &Model, slot: u16) -> Vec<usize> {
    let id = &model.ids[slot as usize];
    let name = id_name(model, id);
    (0..plan.rows.len())
        .filter(|&r| {
            let row = &plan.rows[r];
            match &row.source {
                Source::Counter(s) => {
                    !id.retire_latency && gives(plan, &row.name, &plan.events[*s].name, &name)
                }
                Source::Tool(t) => t.name() == name,
                Source::RetireLatency => id.retire_latency && row.name == name,
                Source::Missing(_) => false,
            }
        })
        .collect()
}

/// The recorded group holding most of a metric's inputs (`candidates`: the rows giving each
/// input): a metric's inputs should come from one group, as when it was scheduled. Ties go
/// to the first group.
fn best_group(plan: &Plan, group_of: &[usize], candidates: &[(u16, Vec<usize>)]) -> Option<usize> {
    let mut votes: BTreeMap<usize, usize> = BTreeMap::new();
    for (_, rows) in candidates {
        let mut groups: Vec<usize> = rows
            .iter()
            .filter_map(|&r| match plan.rows[r].source {
                Source::Counter(s) => group_of.get(s).copied(),
                _ => None,
            })
            .collect();
        groups.dedup();
        for g in groups {
            *votes.entry(g).or_default() += 1;
        }
    }
    votes.iter().max_by_key(|(g, n)| (**n, std::cmp::Reverse(**g))).map(|(g, _)| *g)
}

/// The row for input `slot` that nobody counted: one another metric added already, a tool or
/// retire-latency row (their values do not come from counters), or a new row saying it was
/// not counted. Inputs said to be missing are added to `lacking`.
fn missing_row(plan: &mut Plan, model: &Model, slot: u16, lacking: &mut Vec<String>) -> usize {
    let id = &model.ids[slot as usize];
    let name = id_name(model, id);
    let known = plan
        .rows
        .iter()
        .position(|r| matches!(r.source, Source::Missing(_)) && normal(&r.name) == normal(&name));
    if let Some(row) = known {
        // Another metric found it missing already: one row says so.
        lacking.push(format!("`{name}`"));
        row
    } else if let Some(tool) = ToolEvent::from_name(&name) {
        plan.add(Resolution::Tool(tool), name, false)
    } else if id.retire_latency {
        plan.add(Resolution::RetireLatency, name, false)
    } else {
        let why = format!("`{name}` was not counted in the recording");
        lacking.push(format!("`{name}`"));
        plan.add(Resolution::Missing(why), name, false)
    }
}

/// A lower-case event name without a core PMU's `cpu/.../` wrapping and with perf's aliases
/// (`cs`, `faults`, `cpu-cycles`, ...) as one name, for matching inputs to recorded rows.
pub fn normal(name: &str) -> String {
    let lower = name.to_ascii_lowercase();
    for pmu in ["cpu/", "cpu_core/", "cpu_atom/", "armv8_pmuv3_0/"] {
        if let Some(inner) = lower.strip_prefix(pmu).and_then(|r| r.strip_suffix('/')) {
            return tmetric_perfstat::canonical_event_name(inner);
        }
    }
    tmetric_perfstat::canonical_event_name(&lower)
}

/// Whether `plan` has a row that gives input `name`: a counter of that name, or a tool
/// (perf's `has_event()` over a recording).
fn counted(plan: &Plan, name: &str) -> bool {
    ToolEvent::from_name(name).is_some()
        || plan.rows.iter().any(|r| match r.source {
            Source::Counter(s) => gives(plan, &r.name, &plan.events[s].name, name),
            _ => false,
        })
}

/// Whether a counter row `row` of event `event` gives input `input`: by name, or `cpu-clock`
/// for `task-clock` when the plan counted no `task-clock`. perf computes its CPUs-utilized
/// and per-second figures from either clock, and `perf stat record -a` counts `cpu-clock`,
/// where the common metrics read `task-clock`.
fn gives(plan: &Plan, row: &str, event: &str, input: &str) -> bool {
    let input = normal(input);
    let (row, event) = (normal(row), normal(event));
    if row == input || event == input {
        return true;
    }
    input == "task-clock"
        && (row == "cpu-clock" || event == "cpu-clock")
        && !plan.rows.iter().any(|r| match r.source {
            Source::Counter(s) => {
                normal(&r.name) == "task-clock" || normal(&plan.events[s].name) == "task-clock"
            }
            _ => false,
        })
}

#[cfg(test)]
mod tests {
    use tmetric_runtime::counter::CpuCount;
    use tmetric_runtime::{Attr, EventKind, RawCount};

    use super::*;

    #[test]
    fn names_match_without_the_core_pmu() {
        assert_eq!(normal("cpu/TOPDOWN.SLOTS/"), "topdown.slots");
        assert_eq!(normal("cpu_core/topdown-retiring/"), "topdown-retiring");
        assert_eq!(normal("msr/tsc/"), "msr/tsc/");
        assert_eq!(normal("cs"), "context-switches");
    }

    fn software(name: &str, config: u64) -> CounterEvent {
        CounterEvent {
            name: name.into(),
            attr: Attr { type_: 1, config, ..Attr::default() },
            kind: EventKind::Software,
            unit: None,
            scale: None,
            cpus: None,
        }
    }

    fn row(name: &str, event: usize, copy_of: Option<usize>) -> RecordedRow {
        RecordedRow {
            name: name.into(),
            source: RecordedSource::Counter(event),
            show: true,
            copy_of,
            boxes: Vec::new(),
        }
    }

    /// task-clock and context-switches in one group, page-faults and task-clock again in
    /// another; the rows in another order than the events.
    fn recorded() -> Recorded {
        Recorded {
            literals: [f64::NAN; Literal::COUNT],
            events: vec![
                software("task-clock", 1),
                software("page-faults", 2),
                software("task-clock", 1),
                software("context-switches", 3),
            ],
            groups: vec![vec![0, 3], vec![1, 2]],
            rows: vec![
                row("task-clock", 0, None),
                row("context-switches", 3, None),
                row("page-faults", 1, None),
                row("task-clock", 2, Some(0)),
            ],
            probes: Vec::new(),
            retire_latency: Vec::new(),
            cpuid: None,
            estimate: RecordedEstimate::default(),
        }
    }

    fn slot(model: &Model, name: &str) -> usize {
        model.ids.iter().position(|id| id_name(model, id) == name).unwrap()
    }

    #[test]
    fn counts_follow_the_rows_and_inputs_come_from_one_group() {
        // perf 6.12's tables: the expectations name its metrics.
        tmetric_catalog::use_vintage(tmetric_catalog::base_vintage());
        let mut replay = Replay::new(&recorded()).unwrap();
        let plan = replay.plan();
        assert_eq!(plan.rows[3].source, Source::Counter(3));
        assert_eq!(plan.rows[3].copy_of, Some(0));
        assert_eq!(plan.groups, vec![vec![0, 1], vec![2, 3]]);
        let reading = |value| {
            Some(vec![CpuCount {
                cpu: -1,
                thread: -1,
                raw: RawCount { value, enabled: 1, running: 1 },
            }])
        };
        let counts = Snapshot { events: vec![reading(10), reading(11), reading(12), reading(13)] };
        let numbered = replay.counts(&counts);
        let values: Vec<u64> =
            numbered.events.iter().map(|e| e.as_ref().unwrap()[0].raw.value).collect();
        assert_eq!(values, [10, 13, 11, 12]);
        assert_eq!(
            replay.per_spec(&[None, Some("refused"), None, None]),
            [None, None, Some("refused"), None]
        );

        // page-faults is only in the second group, which also has a task-clock: both inputs
        // come from there.
        let common = tmetric_catalog::common();
        let faults = common.metrics_named("page_faults_per_sec")[0];
        assert!(replay.add_metric(common, faults));
        let root = &replay.plan().roots[0];
        assert_eq!(root.slot_rows[slot(common, "task-clock")], Some(3));
        assert_eq!(root.slot_rows[slot(common, "page-faults")], Some(2));
        assert!(replay.plan().rows[2].roots.contains(&0), "printed on its first event's row");

        // Nobody counted cpu-migrations: a row says so, and a warning names it once.
        let migrations = common.metrics_named("cpu_migrations_per_sec")[0];
        assert!(!replay.add_metric(common, migrations));
        let plan = replay.plan();
        let missing = plan.roots[1].slot_rows[slot(common, "cpu-migrations")].unwrap();
        assert_eq!(
            plan.rows[missing].source,
            Source::Missing("`cpu-migrations` was not counted in the recording".into())
        );
        assert_eq!(
            plan.warnings,
            [Warning::NotRecorded {
                metric: "cpu_migrations_per_sec".into(),
                inputs: vec!["`cpu-migrations`".into()],
            }]
        );
    }

    #[test]
    fn recorded_metrics_read_their_rows_and_unknown_ones_are_said() {
        // perf 6.12's tables: the expectations name its metrics.
        tmetric_catalog::use_vintage(tmetric_catalog::base_vintage());
        let common = tmetric_catalog::common();
        let mut replay = Replay::new(&recorded()).unwrap();
        let faults = RecordedRoot {
            model: common.path(),
            metric: "page_faults_per_sec".into(),
            pmu: "default_core".into(),
            // As recorded: task-clock from the first row (another group than page-faults).
            inputs: vec![
                (slot(common, "task-clock"), "task-clock".into(), 0),
                (slot(common, "page-faults"), "page-faults".into(), 2),
            ],
            host: Some(2),
        };
        let gone = RecordedRoot { metric: "no_such_metric".into(), ..faults.clone() };
        let mut warnings = Vec::new();
        replay.choose(&[faults, gone], Choice::Recorded, &mut |w| warnings.push(w)).unwrap();
        assert_eq!(warnings, [ReplayWarning::UnknownMetrics]);
        let root = &replay.plan().roots[0];
        assert_eq!(root.slot_rows[slot(common, "task-clock")], Some(0));
        assert_eq!(replay.plan().rows[2].roots, [0]);
    }

    #[test]
    fn a_recording_that_contradicts_itself_is_refused() {
        let mut bad = recorded();
        bad.rows[1].source = RecordedSource::Counter(9);
        assert_eq!(Replay::new(&bad).unwrap_err(), ReplayError::RowEvent { row: 1, event: 9 });
        let mut bad = recorded();
        bad.rows[0].boxes = vec![(3, "box".into())];
        let err = Replay::new(&bad).unwrap_err();
        assert_eq!(err.to_string(), "row `task-clock`'s first box is event 3, not its counter");
        let mut bad = recorded();
        bad.rows[0].boxes = vec![(0, "box 0".into()), (2, "box 1".into())];
        assert_eq!(Replay::new(&bad).unwrap_err(), ReplayError::TwoRows { event: 2 });
        let mut bad = recorded();
        bad.rows[1].source = RecordedSource::Counter(0);
        assert_eq!(Replay::new(&bad).unwrap_err(), ReplayError::TwoRows { event: 0 });
        let mut bad = recorded();
        bad.rows[0].source = RecordedSource::Tool("no_such_tool".into());
        let err = Replay::new(&bad).unwrap_err();
        assert_eq!(err.to_string(), "row 0 names the unknown tool event `no_such_tool`");
    }
}
