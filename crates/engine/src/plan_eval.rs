//! A plan's sample evaluated: each root metric from its own group's counts (through
//! [`crate::metric_eval`]) and each row's printed count, with the reason for every value that is
//! missing, uncounted or computed around a missing input.

use std::collections::HashMap;
use std::time::Duration;

use tmetric_catalog::Model;
use tmetric_model::sem::Fail;
use tmetric_perfstat::PrintedCount;
use tmetric_runtime::{Aggregate, CpuCount, Snapshot, ToolEvent};

use crate::metric_eval::{MetricEval, Why};
pub use crate::notes::{MetricWhy, Note, RowWhy};
use crate::notes::{Refusal, explanation};
use crate::plan::{Plan, PlanRow, Root, Source};

mod sample;

pub use sample::{Evaluated, UnitEval};

/// The inputs of one evaluation of a plan: counts, the span they cover, the workload's rusage
/// and the retire latencies sampled over it (a whole run's or one interval's). Everything a
/// sample's values depend on travels here, so the plan stays as it was planned.
#[derive(Debug, Clone, Copy)]
pub struct EvalInput<'a> {
    /// Counter readings (per spec).
    pub counts: &'a Snapshot,
    /// Seconds covered (`duration_time`).
    pub seconds: f64,
    /// The workload's user and system time, when it ended.
    pub rusage: Option<(Duration, Duration)>,
    /// The retire latencies (cycles, by `:R` input name) sampled over this span; `None`
    /// reads the plan's ([`Plan::retire_latency`]: a file's, or recorded for the run).
    pub latencies: Option<&'a [(String, f64)]>,
    /// Readings of 0 are not summed and not counted in `aggr_nr()`, as perf's
    /// `process_counter_values` skips them under `--per-thread -a`.
    pub skip_zero: bool,
}

impl<'a> EvalInput<'a> {
    /// `counts` over `seconds`, without rusage, with the plan's retire latencies.
    pub fn new(counts: &'a Snapshot, seconds: f64) -> EvalInput<'a> {
        EvalInput { counts, seconds, rusage: None, latencies: None, skip_zero: false }
    }

    /// Skipping readings of 0, as perf does for each thread under `--per-thread -a`.
    pub fn skipping_zero(self, skip_zero: bool) -> EvalInput<'a> {
        EvalInput { skip_zero, ..self }
    }

    /// With the workload's user and system time.
    pub fn with_rusage(self, rusage: Option<(Duration, Duration)>) -> EvalInput<'a> {
        EvalInput { rusage, ..self }
    }

    /// With the retire latencies sampled over this span (`None`: the plan's).
    pub fn with_latencies(self, latencies: Option<&'a [(String, f64)]>) -> EvalInput<'a> {
        EvalInput { latencies, ..self }
    }

    /// The same input over other counts (one aggregation unit's part of them).
    pub fn on(self, counts: &'a Snapshot) -> EvalInput<'a> {
        EvalInput { counts, ..self }
    }

    /// The retire latency `:R` input `name` reads in this sample: the sample's when sampled,
    /// else the plan's (0 when unknown, as perf 6.12 does).
    pub fn latency_of(&self, plan: &Plan, name: &str) -> f64 {
        match self.latencies {
            Some(l) => l.iter().find(|(n, _)| n == name).map_or(0.0, |(_, v)| *v),
            None => plan.retire_latency_of(name),
        }
    }
}

/// A row's printed state: its count as perf prints it, with the ns it was enabled and ran on
/// a counter (0 and 0 when it has no value).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RowCount {
    /// The count as printed (row scale applied).
    pub count: PrintedCount,
    /// ns on a counter.
    pub running: u64,
    /// ns enabled.
    pub enabled: u64,
}

impl RowCount {
    const NOT_SUPPORTED: RowCount =
        RowCount { count: PrintedCount::NotSupported, running: 0, enabled: 0 };
    const NOT_COUNTED: RowCount =
        RowCount { count: PrintedCount::NotCounted, running: 0, enabled: 0 };

    fn value(count: f64, running: u64, enabled: u64) -> RowCount {
        RowCount { count: PrintedCount::Value(count), running, enabled }
    }
}

/// A counter row's reading in `sample`: its counter's, or the sum of its uncore boxes' (perf's
/// `evsel__merge_aggr_counters`: values, enabled and running times added, the CPUs those of
/// box 0) unless [`Plan::per_box`] keeps box 0 alone; `None` when no box is open.
pub fn row_aggregate(plan: &Plan, row: &PlanRow, sample: &EvalInput<'_>) -> Option<Aggregate> {
    let Source::Counter(spec) = row.source else { return None };
    if row.boxes.len() < 2 || plan.per_box {
        return sample.counts.aggregate(spec);
    }
    let mut total: Option<Aggregate> = None;
    for b in &row.boxes {
        let Some(a) = sample.counts.aggregate(b.spec) else { continue };
        total = Some(match total {
            None => a,
            Some(t) => Aggregate {
                value: t.value.saturating_add(a.value),
                enabled: t.enabled.saturating_add(a.enabled),
                running: t.running.saturating_add(a.running),
                cpus: t.cpus,
            },
        });
    }
    total
}

/// A row's printed state in `sample`.
pub fn row_count(plan: &Plan, row: &PlanRow, sample: &EvalInput<'_>) -> RowCount {
    match &row.source {
        Source::Counter(_) => match row_aggregate(plan, row, sample) {
            None => RowCount::NOT_SUPPORTED,
            Some(a) if !a.counted() => RowCount::NOT_COUNTED,
            Some(a) => RowCount::value(a.value as f64 * row.scale, a.running, a.enabled),
        },
        Source::Tool(ToolEvent::Fact(fact)) => match fact_value(plan, fact) {
            Some(v) => RowCount::value(v, 1, 1),
            None => RowCount::NOT_COUNTED,
        },
        Source::Tool(tool) => match tool_seconds(*tool, sample) {
            Some(s) => {
                let ns = (s * 1e9).round();
                RowCount::value(ns, ns as u64, ns as u64)
            }
            None => RowCount::NOT_COUNTED,
        },
        Source::RetireLatency => RowCount::value(sample.latency_of(plan, &row.name), 1, 1),
        Source::Missing(_) => RowCount::NOT_SUPPORTED,
    }
}

fn tool_seconds(tool: ToolEvent, sample: &EvalInput<'_>) -> Option<f64> {
    match tool {
        ToolEvent::DurationTime => Some(sample.seconds),
        ToolEvent::UserTime => sample.rusage.map(|r| r.0.as_secs_f64()),
        ToolEvent::SystemTime => sample.rusage.map(|r| r.1.as_secs_f64()),
        ToolEvent::Fact(_) => None,
    }
}

/// What a tool PMU fact (`-e num_cpus`) prints in this plan's run; `None` when the machine
/// could not tell.
fn fact_value(plan: &Plan, fact: &tmetric_names::ToolPmuEvent) -> Option<f64> {
    let literal = crate::tool_pmu::literal_of(fact)?;
    Some(plan.tool_values[literal.index()]).filter(|v| !v.is_nan())
}

/// The value a metric expression sees for a row: raw counts (stat-shadow.c `prepare_metric`: ScaleUnit is for printing only), seconds for tools,
/// 0 for a counter that never ran and NaN for one that could not be counted (`prepare_metric`).
pub fn input_value(plan: &Plan, row: &PlanRow, sample: &EvalInput<'_>) -> f64 {
    match &row.source {
        Source::Counter(_) => match row_aggregate(plan, row, sample) {
            None => f64::NAN,
            Some(a) if !a.counted() => 0.0,
            Some(a) => a.value as f64,
        },
        Source::Tool(ToolEvent::Fact(fact)) => fact_value(plan, fact).unwrap_or(f64::NAN),
        Source::Tool(tool) => tool_seconds(*tool, sample).unwrap_or(f64::NAN),
        Source::RetireLatency => sample.latency_of(plan, &row.name),
        Source::Missing(_) => f64::NAN,
    }
}

/// perf 7.x's `aggr_nr()` of a row in `sample` (stat-shadow.c `prepare_metric`): how many
/// counters were summed into its value, one per CPU and thread each of its uncore boxes was
/// read on (`perf_stat_aggr.nr`, added up over the boxes `evsel__merge_aggr_counters` merges);
/// 0 for a counter that could not be opened or never ran, 1 for every other input. Under
/// `--per-thread -a` ([`EvalInput::skip_zero`]) perf adds nothing for a reading of 0
/// (`process_counter_values`), so a thread whose every reading is 0 has 0.
pub fn input_aggr_nr(plan: &Plan, row: &PlanRow, sample: &EvalInput<'_>) -> f64 {
    let Source::Counter(spec) = row.source else {
        return if matches!(row.source, Source::Missing(_)) { 0.0 } else { 1.0 };
    };
    let specs: &mut dyn Iterator<Item = usize> = if row.boxes.len() < 2 || plan.per_box {
        &mut std::iter::once(spec)
    } else {
        &mut row.boxes.iter().map(|b| b.spec)
    };
    let (mut counters, mut counted) = (0usize, false);
    for spec in specs {
        let Some(a) = sample.counts.aggregate(spec) else { continue };
        counted |= a.counted();
        counters += if sample.skip_zero {
            let readings = sample.counts.events[spec].iter().flatten();
            readings.filter(|c| c.raw.value > 0).count()
        } else {
            a.cpus
        };
    }
    if !counted {
        0.0
    } else if sample.skip_zero {
        counters as f64
    } else {
        counters.max(1) as f64
    }
}

/// One root's outcome.
#[derive(Debug, Clone, PartialEq)]
pub struct RootResult {
    /// The expression's value before `ScaleUnit` (NaN when an input is missing).
    pub value: f64,
    /// Why there is no value at all.
    pub failure: Option<Fail>,
    /// Rows of needed inputs that could not be counted (NaN).
    pub missing: Vec<usize>,
    /// Rows of needed inputs that never ran (read as 0).
    pub not_counted: Vec<usize>,
    /// perf's colour rule: crossed (`Some(true)`), not crossed, or no threshold.
    pub threshold: Option<bool>,
    /// Why the value is NaN or 0 although every input was counted: a literal or probe of
    /// the machine, or a 0/0 ([`crate::MetricEval::explain`]).
    pub why: Option<Why>,
}

impl RootResult {
    /// The value as printed: scaled by the metric's `ScaleUnit`.
    pub fn scaled(&self, model: &Model, metric: usize) -> f64 {
        self.value * model.metric(metric).scale
    }

    /// Whether a printed number would hide a problem: some input was not counted.
    pub fn is_partial(&self) -> bool {
        !self.missing.is_empty() || !self.not_counted.is_empty()
    }
}

/// Reusable evaluators, one per model of a plan.
#[derive(Debug, Default)]
pub struct Evaluators {
    evaluators: Vec<MetricEval>,
}

impl Evaluators {
    fn get(&mut self, model: &'static Model, plan: &Plan) -> &mut MetricEval {
        let i = match self.evaluators.iter().position(|e| std::ptr::eq(e.model, model)) {
            Some(i) => i,
            None => {
                let mut metric_eval = MetricEval::new(model, plan.literals, None);
                for (slot, &value) in plan.probes_of(model).iter().enumerate() {
                    metric_eval.set_probe_value(slot as u16, value);
                }
                self.evaluators.push(metric_eval);
                self.evaluators.len() - 1
            }
        };
        &mut self.evaluators[i]
    }
}

impl Plan {
    /// Root `root`'s value over row values `inputs` with their `aggr_nr()`s `aggr_nrs` (as
    /// [`Plan::evaluate`] computes it).
    pub(crate) fn root_value(
        &self,
        evaluators: &mut Evaluators,
        root: usize,
        inputs: &[f64],
        aggr_nrs: &[f64],
    ) -> f64 {
        let root = &self.roots[root];
        let evaluator = evaluators.get(root.model, self);
        evaluator.clear_inputs();
        for (slot, row) in root.slot_rows.iter().enumerate() {
            if let Some(r) = row {
                evaluator.set_input(slot as u16, inputs[*r], self.source_count(*r));
                evaluator.set_aggr_nr(slot as u16, aggr_nrs[*r]);
            }
        }
        evaluator.evaluate_one(root.metric).value
    }

    /// perf's `source_count()` of row `r`: how many counters its value sums (the boxes of an
    /// uncore event: `evsel__source_count`), 1 for any other input.
    pub fn source_count(&self, r: usize) -> f64 {
        self.rows[r].boxes.len().max(1) as f64
    }

    /// The retire latency used for `:R` event `name` (0 when unknown, as perf 6.12 does).
    pub fn retire_latency_of(&self, name: &str) -> f64 {
        self.retire_latency.iter().find(|(n, _)| n == name).map_or(0.0, |(_, v)| *v)
    }

    /// Whether `row` is a counter opened on none of the CPUs counted: its PMU covers other
    /// CPUs only (a hybrid machine's other core type under `-C`). Such a row is not printed.
    pub fn opened_nowhere(&self, row: &PlanRow, sample: &EvalInput<'_>) -> bool {
        match row.source {
            Source::Counter(spec) => {
                matches!(sample.counts.events.get(spec), Some(Some(v)) if v.is_empty())
                    && self.events[spec].cpus.is_some()
            }
            _ => false,
        }
    }

    /// `root`'s counter inputs brought to one span, where their spans differ: `(row, value)`.
    ///
    /// perf scales each CPU's count to the time its own counter was enabled. Counters in one
    /// group are enabled and disabled together, but separate groups are enabled one ioctl
    /// after another, and a tool preempted between two of them (a loaded machine) gives one
    /// group milliseconds more than the next; every counter is also enabled a little before
    /// the run's clock (`duration_time`) starts and disabled after it stops. A metric whose
    /// events sit in different groups, or that divides counts by `duration_time`, then
    /// combines numbers over different spans: on the simulator under load, 25 ms of skew in
    /// a 300 ms run moved `tma_ports_utilization` by 3 % and `tma_contested_accesses` (which
    /// reads the core frequency, cycles per `duration_time`) by 13 %.
    ///
    /// With a steady workload each scaled count is `rate * enabled`, so each CPU's (thread's)
    /// scaled count is multiplied by a common span over its own enabled time. The span is
    /// `duration_time` for a metric that reads it, on counters whose enabled time is wall
    /// time (per CPU, no cgroup); else the shortest enabled time among the root's counters
    /// on that CPU (thread). Counters of one group in a metric without `duration_time` share
    /// one enabled time and are left exactly as perf computes them.
    pub(crate) fn common_span(&self, root: &Root, sample: &EvalInput<'_>) -> Vec<(usize, f64)> {
        // Each counter row with the specs its value sums (its uncore boxes, merged as perf
        // merges them, or its one counter).
        let mut rows: Vec<(usize, Vec<usize>)> = Vec::new();
        let mut reads_duration = false;
        for &row in root.slot_rows.iter().flatten() {
            let r = &self.rows[row];
            match r.source {
                Source::Counter(spec) if !rows.iter().any(|(x, _)| *x == row) => {
                    let specs = if r.boxes.len() < 2 || self.per_box {
                        vec![spec]
                    } else {
                        r.boxes.iter().map(|b| b.spec).collect()
                    };
                    rows.push((row, specs));
                }
                Source::Tool(ToolEvent::DurationTime) => reads_duration = true,
                _ => {}
            }
        }
        let duration_ns = sample.seconds * 1e9;
        let wall = reads_duration && duration_ns > 0.0;
        let distinct = {
            let mut all: Vec<usize> = rows.iter().flat_map(|(_, s)| s.iter().copied()).collect();
            all.sort_unstable();
            all.dedup();
            all.len()
        };
        if distinct == 0 || (distinct < 2 && !wall) {
            return Vec::new();
        }
        let readings = |spec: usize| sample.counts.events.get(spec).and_then(Option::as_ref);
        let wall_time = |spec: usize, c: &CpuCount| {
            wall && c.cpu >= 0 && c.thread == -1 && self.specs[spec].cgroup.is_none()
        };
        let mut shortest: HashMap<(i32, i32), u64> = HashMap::new();
        for &spec in rows.iter().flat_map(|(_, s)| s) {
            for c in readings(spec).into_iter().flatten().filter(|c| c.raw.enabled > 0) {
                let e = shortest.entry((c.cpu, c.thread)).or_insert(u64::MAX);
                *e = (*e).min(c.raw.enabled);
            }
        }
        let span = |spec: usize, c: &CpuCount| -> f64 {
            if wall_time(spec, c) {
                duration_ns
            } else {
                shortest.get(&(c.cpu, c.thread)).map_or(c.raw.enabled as f64, |&e| e as f64)
            }
        };
        let mut common = Vec::new();
        for (row, specs) in &rows {
            let differs = specs.iter().any(|&spec| {
                readings(spec)
                    .into_iter()
                    .flatten()
                    .any(|c| c.raw.enabled > 0 && span(spec, c) != c.raw.enabled as f64)
            });
            let counted =
                row_aggregate(self, &self.rows[*row], sample).is_some_and(|a| a.counted());
            if !differs || !counted {
                continue;
            }
            let value = specs
                .iter()
                .flat_map(|&spec| readings(spec).into_iter().flatten().map(move |c| (spec, c)))
                .filter(|(_, c)| c.raw.enabled > 0)
                .filter_map(|(spec, c)| {
                    Some(c.raw.scaled()? as f64 * span(spec, c) / c.raw.enabled as f64)
                })
                .sum();
            common.push((*row, value));
        }
        common
    }

    /// Evaluates every root over `sample`, each from its own inputs.
    pub fn evaluate(&self, evaluators: &mut Evaluators, sample: &EvalInput<'_>) -> Vec<RootResult> {
        self.evaluate_on_box(evaluators, sample, 0)
    }

    /// The most uncore boxes a row has (1 when none has several).
    pub fn max_boxes(&self) -> usize {
        self.rows.iter().map(|r| r.boxes.len()).max().unwrap_or(0).max(1)
    }

    /// Every root over `sample` as perf computes it on the line of box `k` of its host row
    /// under `-A`/`--no-merge` (`prepare_metric`): inputs on the PMU of the host's box 0 read
    /// their box `k`, the others box 0 ([`Plan::per_box`]). Box 0 is [`Plan::evaluate`].
    pub fn evaluate_on_box(
        &self,
        evaluators: &mut Evaluators,
        sample: &EvalInput<'_>,
        k: usize,
    ) -> Vec<RootResult> {
        let mut inputs: Vec<f64> = self.rows.iter().map(|r| input_value(self, r, sample)).collect();
        let mut states: Vec<Option<PrintedCount>> = self
            .rows
            .iter()
            .map(|r| {
                matches!(r.source, Source::Counter(_)).then(|| row_count(self, r, sample).count)
            })
            .collect();
        let mut sources: Vec<f64> = (0..self.rows.len()).map(|r| self.source_count(r)).collect();
        let mut nrs: Vec<f64> = self.rows.iter().map(|r| input_aggr_nr(self, r, sample)).collect();
        // Box 0, every target's every interval, changes no row: only other boxes need a copy.
        let base = (k > 0).then(|| (inputs.clone(), states.clone(), sources.clone(), nrs.clone()));
        let pmu_of = |row: &PlanRow| row.boxes.first().map(|b| &self.events[b.spec].kind);
        self.roots
            .iter()
            .enumerate()
            .map(|(i, root)| {
                // Rows read from box `k` keep perf's scaling: the common span is box 0's.
                let mut from_box_k: Vec<usize> = Vec::new();
                if let Some(base) = &base {
                    (inputs, states, sources, nrs) = base.clone();
                    let host = self.rows.iter().find(|r| r.roots.contains(&i));
                    if let Some(host_pmu) = host.and_then(pmu_of) {
                        for &r in root.slot_rows.iter().flatten() {
                            let row = &self.rows[r];
                            let Some(b) = row.boxes.get(k) else { continue };
                            if pmu_of(row) != Some(host_pmu) {
                                continue;
                            }
                            let one = PlanRow {
                                source: Source::Counter(b.spec),
                                boxes: Vec::new(),
                                ..row.clone()
                            };
                            inputs[r] = input_value(self, &one, sample);
                            states[r] = Some(row_count(self, &one, sample).count);
                            sources[r] = 1.0;
                            nrs[r] = input_aggr_nr(self, &one, sample);
                            from_box_k.push(r);
                        }
                    }
                }
                let model = root.model;
                let mut common = self.common_span(root, sample);
                common.retain(|(r, _)| !from_box_k.contains(r));
                let evaluator = evaluators.get(model, self);
                evaluator.clear_inputs();
                for (slot, row) in root.slot_rows.iter().enumerate() {
                    if let Some(r) = row {
                        let value =
                            common.iter().find(|(c, _)| c == r).map_or(inputs[*r], |&(_, v)| v);
                        evaluator.set_input(slot as u16, value, sources[*r]);
                        evaluator.set_aggr_nr(slot as u16, nrs[*r]);
                    }
                }
                let mut result = evaluator.evaluate_one(root.metric);
                let mut missing = Vec::new();
                let mut not_counted = Vec::new();
                for row in root.slot_rows.iter().flatten() {
                    if inputs[*row].is_nan() && !missing.contains(row) {
                        missing.push(*row);
                    } else if states[*row] == Some(PrintedCount::NotCounted)
                        && !not_counted.contains(row)
                    {
                        not_counted.push(*row);
                    }
                }
                // A value computed from none of its measured inputs measures nothing, whatever
                // perf's `min`/`max`/`if` made of the NaNs (`max(1 - NaN, 0)` is 0): `nan`.
                let measured = root.slot_rows.iter().flatten().filter(|&&r| {
                    matches!(self.rows[r].source, Source::Counter(_) | Source::Missing(_))
                });
                let mut measured = measured.peekable();
                if measured.peek().is_some()
                    && measured.all(|r| missing.contains(r))
                    && !result.value.is_nan()
                {
                    result.value = f64::NAN;
                    result.threshold = None;
                }
                // Only inputs the value (not just the threshold) needs explain the value.
                let needed = &result.missing;
                missing.retain(|&r| {
                    root.slot_rows
                        .iter()
                        .enumerate()
                        .any(|(slot, x)| *x == Some(r) && needed.contains(&(slot as u16)))
                        || result.value.is_nan()
                });
                let why = (result.failure.is_none()
                    && missing.is_empty()
                    && not_counted.is_empty()
                    && (result.value.is_nan() || result.value == 0.0))
                    .then(|| evaluator.explain(root.metric))
                    .flatten();
                RootResult {
                    value: result.value,
                    failure: result.failure,
                    missing,
                    not_counted,
                    threshold: result.threshold,
                    why,
                }
            })
            .collect()
    }

    /// Why rows print `<not supported>`/`<not counted>` and why metrics print `nan` or a number
    /// computed without some input, as typed notes (their `Display` is the wording).
    /// `failure(spec)` is the kernel's refusal of a counter.
    pub fn notes(
        &self,
        results: &[RootResult],
        sample: &EvalInput<'_>,
        failure: impl Fn(usize) -> Option<Refusal>,
    ) -> Vec<Note> {
        // Events with the same explanation share one note: a TMA group without a PMU would
        // otherwise repeat it dozens of times.
        let mut notes: Vec<Note> = Vec::new();
        // perf's `Default` view skips a group whose events did not run, and says nothing of
        // it: neither do its notes.
        let headed = |row: &PlanRow| row.roots.iter().any(|&r| self.prints_under_group(r));
        let skipped = |row: &PlanRow| match row_count(self, row, sample).count {
            PrintedCount::Value(_) => false,
            PrintedCount::NotCounted => headed(row),
            PrintedCount::NotSupported => headed(row) || self.default_events && !row.is_cycles(),
        };
        for row in self.rows.iter().filter(|r| (r.show || !r.roots.is_empty()) && !skipped(r)) {
            let why = if self.opened_nowhere(row, sample) {
                let cpus = match &row.source {
                    Source::Counter(spec) => self.events[*spec].cpus.clone().unwrap_or_default(),
                    _ => Vec::new(),
                };
                RowWhy::OtherCpusOnly { cpus }
            } else {
                match (&row.source, row_count(self, row, sample).count) {
                    (Source::Missing(reason), _) => RowWhy::Missing(reason.clone()),
                    (Source::Counter(spec), PrintedCount::NotSupported) => match failure(*spec) {
                        Some(refusal) => RowWhy::Refused(refusal),
                        None => continue,
                    },
                    (Source::Counter(_), PrintedCount::NotCounted) => RowWhy::NeverRan,
                    _ => continue,
                }
            };
            let found = notes.iter_mut().find_map(|n| match n {
                Note::Rows { rows, why: w } if *w == why => Some(rows),
                _ => None,
            });
            match found {
                Some(rows) => {
                    if !rows.contains(&row.name) {
                        rows.push(row.name.clone());
                    }
                }
                None => notes.push(Note::Rows { rows: vec![row.name.clone()], why }),
            }
        }
        for (r, result) in results.iter().enumerate() {
            if self.rows.iter().any(|row| row.roots.contains(&r) && skipped(row)) {
                continue;
            }
            if let Some(why) = self.metric_why(r, result, sample) {
                // A hybrid machine's metric names carry their PMU where both core types have
                // one.
                notes.push(Note::Metric { metric: crate::plan::metric_name(self, r), why });
            }
        }
        notes
    }

    /// Why root `r`'s value needs a note, if it does (the region API asks per sample).
    pub fn metric_why(
        &self,
        r: usize,
        result: &RootResult,
        sample: &EvalInput<'_>,
    ) -> Option<MetricWhy> {
        let root = &self.roots[r];
        let model = root.model;
        let names = |rows: &[usize]| -> Vec<String> {
            let mut v: Vec<String> = rows.iter().map(|&r| self.rows[r].name.clone()).collect();
            v.dedup();
            v
        };
        Some(if let Some(fail) = result.failure {
            MetricWhy::NoValue(fail.to_string())
        } else if !result.missing.is_empty() {
            if result.value.is_nan() {
                MetricWhy::NanWithout(names(&result.missing))
            } else {
                MetricWhy::ComputedWithout(names(&result.missing))
            }
        } else if !result.not_counted.is_empty()
            && result.not_counted.iter().all(|&r| self.opened_nowhere(&self.rows[r], sample))
        {
            MetricWhy::OtherCoreType
        } else if !result.not_counted.is_empty() {
            MetricWhy::NeverRan(names(&result.not_counted))
        } else if let Some(why) = &result.why {
            let zeros = match why {
                Why::DivisionByZero { inputs, metrics } => {
                    let rows: Vec<usize> = inputs
                        .iter()
                        .filter_map(|&s| root.slot_rows.get(s as usize).copied().flatten())
                        .collect();
                    let mut zeros = vec![names(&rows).join(", ")];
                    zeros.extend(
                        metrics.iter().map(|&k| model.str(model.metric(k).name).to_string()),
                    );
                    zeros.retain(|z| !z.is_empty());
                    zeros
                }
                _ => Vec::new(),
            };
            MetricWhy::Decided(explanation(why, result.value, &zeros))
        } else {
            return None;
        })
    }
}
