//! A model's metrics over the counts of a `perf stat` log, per block (run × `-I` interval ×
//! aggregation id): each input explained, each value checked against what perf printed. The
//! log is read by `tmetric_perfstat`; this module fills the [`MetricEval`] evaluator per block and
//! root metric from the rows of the group perf printed that metric in. Front ends (`eval
//! --from-perf`, exporters of recorded runs) choose what to print; nothing here prints.
//!
//! * [`infer`]: which CPU model a log comes from.
//! * [`literals`]: the `#literals` perf's printed values imply.
//! * [`builtins`]: perf's built-in metrics (`insn per cycle`, ...) over a log's rows.
//! * [`run`]: a whole log block by block: the model chosen, the metrics selected, the
//!   literals solved, each block's metrics, and what was left out.
//! * [`encoding`]: rows matched to inputs by encoding when their names differ (an older
//!   vintage's `INT_MISC.RECOVERY_CYCLES,cmask=1,edge` is 6.12's `INT_MISC.CLEARS_COUNT`).
//! * [`param`]: metrics with perf's runtime parameter (`?`: POWER's per-chip hv_24x7
//!   metrics), evaluated once per chip or core the log holds, as perf runs them.
//!
//! Rules that are choices rather than perf's code (docs/from-perf.md):
//! * `<not counted>` reads as 0 and `<not supported>` as NaN, as in perf; both are named.
//! * A retire latency (`X:R`) without a row reads as 0 when perf printed the metric in that
//!   block (perf 6.12 without `--record-tpebs` uses 0, and the printed value proves perf ran it),
//!   and is missing (NaN) otherwise.
//! * A count printed in a unit perf scaled it to (`MiB`, `Bytes`) is divided by the event's
//!   ScaleUnit factor; without a known factor the input is unusable (NaN) and named.

pub mod builtins;
pub mod encoding;
pub mod infer;
pub mod literals;
pub mod param;
pub mod run;

use foldhash::{HashMap, HashSet};
use std::borrow::Cow;
use std::cell::RefCell;

use tmetric_catalog::Model;
use tmetric_catalog::catalog::IdKind;
use tmetric_perfstat::{Block, EventKey, LogRow, Lookup, PerfLog, PrintedMetric, TimeSource};

use encoding::{ByEncoding, Encodings};
pub use param::Root;
use tmetric_engine::compiled::{MetricResult, Select};
use tmetric_engine::literals::Literals;
use tmetric_engine::metric_eval::{MetricEval, NeededInputs};

/// Whether `pmu` names a core PMU: `default_core` (or no PMU), or a name perf gives the core
/// PMU (`cpu`, `cpu_core`, `cpu_atom`, `cpum_cf`, `armv8_pmuv3_0`).
pub fn is_core_pmu(pmu: &str) -> bool {
    pmu.is_empty() || pmu == "default_core" || tmetric_perfstat::is_core_pmu(pmu)
}

/// A metric perf printed: its first block, name and the core PMU of its row.
#[derive(Debug, Clone)]
pub struct PrintedAt {
    /// Index of the first block it is printed in.
    pub block: usize,
    /// As perf printed it.
    pub name: String,
    /// The core PMU of its row or metric-group header.
    pub pmu: Option<String>,
}

/// Every distinct (name, core PMU) perf printed, in log order, shadow labels included.
pub fn printed_metrics(log: &PerfLog) -> Vec<PrintedAt> {
    // A long log prints the same few metrics in every block: each is looked up by a key built
    // in one buffer (`PMU` line end, then the name in lower case), and only a new one allocates.
    let mut seen: HashSet<String> = HashSet::default();
    let mut key = String::new();
    let mut out = Vec::new();
    for (b, block) in log.blocks.iter().enumerate() {
        let from_rows = block.rows.iter().flat_map(|row| {
            let pmu = row.key.pmu.as_deref().filter(|p| is_core_pmu(p));
            // perf's built-in labels (`Retiring` on `topdown-retiring`) are no JSON metric's name.
            row.metrics
                .iter()
                .filter(move |m| !builtins::is_builtin_label(row, m))
                .map(move |m| (m.name.as_str(), pmu))
        });
        let loose = loose_metrics(block);
        let loose = loose.iter().map(|(m, pmu)| (m.name.as_str(), pmu.as_deref()));
        for (name, pmu) in from_rows.chain(loose) {
            key.clear();
            if let Some(pmu) = pmu {
                key.push_str(pmu);
                key.push('\n');
            }
            key.extend(name.chars().map(|c| c.to_ascii_lowercase()));
            if !seen.contains(key.as_str()) {
                seen.insert(key.clone());
                out.push(PrintedAt {
                    block: b,
                    name: name.to_string(),
                    pmu: pmu.map(str::to_string),
                });
            }
        }
    }
    out
}

/// perf's Default metric-group lines with the core PMU of their header. Continuation lines
/// carry no header: they are under the last one.
fn loose_metrics(block: &Block) -> Vec<(&PrintedMetric, Option<String>)> {
    let mut current: Option<String> = None;
    block
        .loose_metrics
        .iter()
        .map(|m| {
            if m.header.is_some() {
                current = header_pmu(m.header.as_deref());
            }
            (m, current.clone())
        })
        .collect()
}

/// `cpu_core` from a Default metric-group header such as `TopdownL1 (cpu_core)`.
pub fn header_pmu(header: Option<&str>) -> Option<String> {
    let inner = header?.rsplit_once('(')?.1.strip_suffix(')')?.trim();
    is_core_pmu(inner).then(|| inner.to_string())
}

/// The core PMU to restrict lookups to for a metric of PMU `pmu`: `cpu_core`/`cpu_atom` on
/// hybrid models, none for `default_core` (which stands for whatever core PMU the row names).
pub fn lookup_pmu_name(pmu: &str) -> Option<&str> {
    (is_core_pmu(pmu) && !pmu.is_empty() && pmu != "default_core").then_some(pmu)
}

/// Why metrics were left out of the default selection.
#[derive(Debug, Default)]
pub struct Selection {
    /// Computable (all inputs present) but not printed by perf: shown only when selected.
    pub also: Vec<String>,
    /// Some inputs present: name and missing ids.
    pub partial: Vec<(String, Vec<String>)>,
    /// Reads an unknown literal.
    pub literal: Vec<String>,
}

/// Without a selection: per evaluator, the metrics perf printed, if it printed any this
/// catalogue knows; else every metric whose inputs are all in the log. What is left out is
/// summarised in `report`. `printed` is [`printed_metrics`] of `log`. A metric with perf's
/// runtime parameter is selected once per chip or core the log holds ([`param::values_in`]):
/// perf ran it on each, so an instance whose events are missing is shown missing them.
pub fn default_selection(
    evaluators: &mut [LogEvaluator],
    log: &PerfLog,
    printed: &[PrintedAt],
    report: &mut Selection,
) -> Vec<Vec<Root>> {
    let presence = Presence::new(log);
    // In the order perf printed them.
    let mut roots: Vec<Vec<Root>> = evaluators
        .iter()
        .map(|evaluator| {
            let model = evaluator.model;
            let mut roots: Vec<Root> = Vec::new();
            for p in printed {
                for m in model.metrics_named(&p.name) {
                    let pmu = lookup_pmu_name(model.str(model.metric(m).pmu));
                    let on_pmu = match (pmu, p.pmu.as_deref()) {
                        (Some(want), Some(row)) => want.eq_ignore_ascii_case(row),
                        _ => true,
                    };
                    if on_pmu && !roots.contains(&m.into()) {
                        roots.push(m.into());
                    }
                }
                // perf printed one instance of a metric it ran on every chip: the others
                // too, those it did not print (their events missing) among them.
                for instance in param::instances_named(model, &p.name) {
                    let others = presence.params(model, instance.metric).into_iter();
                    let all = std::iter::once(instance)
                        .chain(others.map(|param| Root { param: Some(param), ..instance }));
                    for root in all {
                        if !roots.contains(&root) {
                            roots.push(root);
                        }
                    }
                }
            }
            roots
        })
        .collect();
    for (evaluator, roots) in evaluators.iter_mut().zip(&mut roots) {
        let model = evaluator.model;
        // The common table's metrics are shown whenever their inputs are there; perf prints
        // them under other names (`CPUs utilized`).
        let printed_mode = !roots.is_empty() && !evaluator.common;
        evaluator.set_log_probes(&presence);
        for m in 0..model.metric_count() {
            let pmu = lookup_pmu_name(model.str(model.metric(m).pmu));
            let needed = match evaluator.metric_eval.needed(m).expr.clone() {
                Ok(ids) => ids,
                Err(_) => {
                    if !printed_mode {
                        report.literal.push(model.str(model.metric(m).name).to_string());
                    }
                    continue;
                }
            };
            // A metric that needs no input (`0 if not #has_pmem`) says nothing about the log.
            if needed.is_empty() {
                continue;
            }
            let instances: Vec<Root> = if model.metric(m).runtime_param {
                let params = presence.params(model, m);
                params.into_iter().map(|p| Root { metric: m, param: Some(p) }).collect()
            } else {
                vec![m.into()]
            };
            for root in instances {
                let missing: Vec<String> = needed
                    .iter()
                    .filter(|&&slot| !presence.has(model, slot, pmu, root.param))
                    .map(|&slot| param::id_text(model, slot, root.param).into_owned())
                    .collect();
                if missing.len() == needed.len() || roots.contains(&root) {
                    continue;
                }
                let name = root.name(model).into_owned();
                let literals_known = evaluator.metric_eval.literals_known(m);
                match (missing.is_empty(), literals_known, printed_mode) {
                    (true, true, false) => roots.push(root),
                    (true, true, true) => report.also.push(name),
                    (true, false, _) => report.literal.push(name),
                    (false, _, _) => report.partial.push((name, missing)),
                }
            }
        }
    }
    roots
}

/// Which input slots have a row somewhere in the log, checked on one block of each distinct
/// set of rows (an `-I -A` log repeats the same rows in every block).
struct Presence<'a> {
    blocks: Vec<&'a Block>,
    cache: RefCell<HashMap<PresenceKey, bool>>,
    /// Per model (by address), the encodings rows are matched by when names differ.
    encodings: RefCell<HashMap<usize, Encodings>>,
}

/// A model (by address), an input slot, the core PMU lookups are restricted to and the value
/// of the runtime parameter.
type PresenceKey = (usize, u16, Option<String>, Option<u32>);

impl<'a> Presence<'a> {
    fn new(log: &'a PerfLog) -> Presence<'a> {
        let mut seen = HashSet::default();
        let blocks = log
            .blocks
            .iter()
            .filter(|b| seen.insert(b.rows.iter().map(|r| r.key.clone()).collect::<Vec<_>>()))
            .collect();
        Presence { blocks, cache: RefCell::new(HashMap::default()), encodings: Default::default() }
    }

    /// Whether some block has a value for `slot` of `model` (with `?` as `param`): a counted
    /// or `<not counted>` row, or a time.
    fn has(&self, model: &'static Model, slot: u16, pmu: Option<&str>, param: Option<u32>) -> bool {
        let key = (std::ptr::from_ref(model) as usize, slot, pmu.map(str::to_string), param);
        if let Some(&known) = self.cache.borrow().get(&key) {
            return known;
        }
        let want = EventKey::from_expr_id(&param::id_text(model, slot, param));
        let mut encodings = self.encodings.borrow_mut();
        let encodings = encodings
            .entry(std::ptr::from_ref(model) as usize)
            .or_insert_with(|| Encodings::new(model));
        let has = self.blocks.iter().any(|b| {
            let (lookup, _) = lookup_input(b, model, encodings, slot, &want, None, pmu);
            matches!(lookup, Lookup::Found(_) | Lookup::NotCounted { .. })
        });
        self.cache.borrow_mut().insert(key, has);
        has
    }

    /// The values the runtime parameter of `metric` takes in the log.
    fn params(&self, model: &Model, metric: usize) -> Vec<u32> {
        param::values_in(model, metric, self.blocks.iter().copied())
    }
}

/// The instances of `roots` (metrics of `model`, as `-M` selected them) perf ran on `log`: a
/// metric with the runtime parameter once per chip or core the log holds, or, when it holds
/// none, once without a parameter, to be said to have no inputs; any other metric as it is.
pub fn instances(model: &Model, roots: &[usize], log: &PerfLog) -> Vec<Root> {
    let mut out = Vec::with_capacity(roots.len());
    let mut presence: Option<Presence> = None;
    for &m in roots {
        let params = if model.metric(m).runtime_param {
            presence.get_or_insert_with(|| Presence::new(log)).params(model, m)
        } else {
            Vec::new()
        };
        if params.is_empty() {
            out.push(m.into());
        }
        out.extend(params.into_iter().map(|p| Root { metric: m, param: Some(p) }));
    }
    out
}

/// Where one input slot's value came from in one block.
#[derive(Debug, Clone, PartialEq)]
pub enum InputSource {
    /// A counted row (or uncore instances summed), or a time (`time`: not from a row).
    Row {
        /// The value the metric reads.
        value: f64,
        /// The rows summed.
        lines: Vec<usize>,
        /// The group of the rows in their block.
        group: Option<usize>,
        /// The rows are in the group perf printed the metric in.
        in_metric_group: bool,
        /// perf's multiplexing percentage, when below 100.
        running_pct: Option<f64>,
        /// A time (the elapsed footer, an interval's length), not a row.
        time: bool,
    },
    /// `<not counted>`: 0, as perf.
    NotCounted {
        /// Of the row.
        line: usize,
        /// Of the row.
        group: usize,
    },
    /// `<not supported>`: NaN, as perf.
    NotSupported {
        /// Of the row.
        line: usize,
        /// Of the row.
        group: usize,
    },
    /// Rows on several core PMUs and the metric names none.
    Ambiguous {
        /// The rows.
        lines: Vec<usize>,
    },
    /// Printed in a unit whose scale factor is unknown.
    Unscaled {
        /// As printed.
        unit: String,
        /// The rows.
        lines: Vec<usize>,
    },
    /// A retire latency without a row, for a metric perf printed here: 0, as perf 6.12
    /// without `--record-tpebs`.
    LatencyZero,
    /// No row.
    Missing,
}

impl InputSource {
    /// The value the metric reads.
    pub fn value(&self) -> f64 {
        match self {
            InputSource::Row { value, .. } => *value,
            InputSource::NotCounted { .. } | InputSource::LatencyZero => 0.0,
            _ => f64::NAN,
        }
    }

    /// Counter rows used (times excluded).
    pub fn row_lines(&self) -> &[usize] {
        match self {
            InputSource::Row { time: false, lines, .. } => lines,
            InputSource::NotCounted { line, .. } | InputSource::NotSupported { line, .. } => {
                std::slice::from_ref(line)
            }
            InputSource::Ambiguous { lines } | InputSource::Unscaled { lines, .. } => lines,
            _ => &[],
        }
    }

    /// The group of the rows read.
    pub fn group(&self) -> Option<usize> {
        match self {
            InputSource::Row { group, .. } => *group,
            InputSource::NotCounted { group, .. } | InputSource::NotSupported { group, .. } => {
                Some(*group)
            }
            _ => None,
        }
    }
}

/// One needed input of a root metric in one block.
#[derive(Debug, Clone)]
pub struct Input {
    /// The model's input slot.
    pub slot: u16,
    /// Where its value came from.
    pub source: InputSource,
    /// Needed by the expression (not only by the threshold).
    pub expr: bool,
    /// Read from a row of another name that counts the same event (same encoding); boxed,
    /// as it is rare and every input of every block carries the field.
    pub by_encoding: Option<Box<ByEncoding>>,
}

/// What perf printed for a metric in a block.
#[derive(Debug, Clone)]
pub struct PerfPrinted {
    /// As printed, e.g. `0.6`.
    pub text: String,
    /// NaN for `nan`; `None` when perf left it blank.
    pub value: Option<f64>,
    /// A shadow label (`CPUs utilized`, `K/sec`) when perf printed its own metric.
    pub label: Option<String>,
    /// perf's value × `factor` is in the metric's scaled unit.
    pub factor: f64,
}

/// One root metric in one block.
#[derive(Debug, Clone)]
pub struct BlockOutcome {
    /// The value, or why there is none (`result.failure`), and the threshold.
    pub result: MetricResult,
    /// The value of the runtime parameter `?` (the chip or core) the metric was evaluated
    /// for; `None` for a metric without one.
    pub param: Option<u32>,
    /// Every needed input, with where its value came from.
    pub inputs: Vec<Input>,
    /// What perf printed for the metric here.
    pub printed: Option<PerfPrinted>,
    /// Whether tmetric's value agrees with perf's at perf's precision.
    pub check: Option<bool>,
    /// Some expression input has a row in this block other than `<not counted>`: perf
    /// prints no metric on rows that were not counted, and neither does tmetric.
    pub any_present: bool,
    /// Every expression input with a row in this block is `<not counted>`.
    pub all_not_counted: bool,
    /// Why the value is NaN or 0 although every input has a value: a literal, a
    /// `has_event()`/`strcmp_cpuid_str()` probe, or a division by inputs that are 0
    /// ([`MetricEval::explain`]).
    pub why: Option<tmetric_engine::Why>,
}

impl BlockOutcome {
    /// A value from every input.
    pub fn complete(&self) -> bool {
        self.result.failure.is_none() && self.result.missing.is_empty()
    }

    /// The value in the metric's unit, unless it failed.
    pub fn scaled(&self, model: &Model) -> Option<f64> {
        self.result.failure.is_none().then(|| self.result.scaled(model))
    }

    /// The metric and its parameter.
    pub fn root(&self) -> Root {
        Root { metric: self.result.metric, param: self.param }
    }

    /// The name perf prints the metric under (`PowerBUS_Frequency_1` for an instance).
    pub fn name(&self, model: &Model) -> Cow<'static, str> {
        self.root().name(model)
    }

    /// The text of input `slot`, the runtime parameter put in (`hv_24x7@PM_PB_CYC,chip=1@`).
    pub fn input_text(&self, model: &Model, slot: u16) -> Cow<'static, str> {
        param::id_text(model, slot, self.param)
    }

    /// The group of the row perf printed this metric on in `block`.
    pub fn printed_group(&self, block: &Block, model: &Model) -> Option<usize> {
        let metric = model.metric(self.result.metric);
        let pmu = lookup_pmu_name(model.str(metric.pmu));
        block.printed_metric(&self.name(model), pmu).map(|(row, _)| row.group)
    }
}

/// A model's evaluator over a log, refilled for every block and root metric.
#[derive(Debug, Clone)]
pub struct LogEvaluator {
    /// The model whose metrics this evaluates.
    pub model: &'static Model,
    /// The model is the common table, added to a CPU model's (its lines are tagged).
    pub common: bool,
    /// The engine's evaluator: literals, probes, needed inputs (cached per `has_event()`
    /// values, the only facts that change between blocks).
    metric_eval: MetricEval,
    /// Each slot's event key, parsed once: parsing it for every block made long `-I` logs slow.
    keys: Vec<Option<EventKey>>,
    /// The keys of the slots that read the runtime parameter, per value of the parameter.
    param_keys: HashMap<(u16, u32), EventKey>,
    /// Encodings, for inputs whose rows the log names otherwise.
    encodings: Encodings,
    /// What the log's header says of the counters behind a row without a counters column.
    counters: LogCounters,
    /// Slots whose `aggr_nr()` no row's counters column and no header gave: the value
    /// assumed (one counter per printed row), the first time.
    assumed_aggr_nr: std::collections::BTreeMap<u16, f64>,
}

/// What a log's header says of the counters perf summed into a row of the global layout,
/// which prints no counters column (perf's `perf_stat_aggr.nr`, what `aggr_nr()` reads).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogCounters {
    /// A command, a process or threads: one counter per task, read once.
    PerTask,
    /// `-C` without `-a` (`'CPU(s) LIST'`): each per-CPU event read on these many CPUs.
    Cpus(u32),
    /// Not said, and why (`'system wide'`, no header).
    Unsaid(&'static str),
}

impl LogCounters {
    /// From `log`'s header (perf's `print_header_std`).
    pub fn of(log: &PerfLog) -> LogCounters {
        match log.command() {
            None => LogCounters::Unsaid("the log has no header saying what perf counted"),
            Some("system wide") => LogCounters::Unsaid(
                "its 'system wide' header does not say on how many CPUs and boxes",
            ),
            Some(c) if c.starts_with("BPF program(s)") => LogCounters::Unsaid(
                "its BPF program header does not say on how many CPUs and boxes",
            ),
            Some(c) => match c.strip_prefix("CPU(s) ") {
                Some(list) => cpu_list_len(list).map_or(
                    LogCounters::Unsaid("its 'CPU(s)' header lists CPUs tmetric cannot read"),
                    LogCounters::Cpus,
                ),
                None => LogCounters::PerTask,
            },
        }
    }
}

/// Whether input `slot` of `model` is counted once per CPU `-C` names: an event of a core
/// PMU or a kernel-named one (`cycles`, `task-clock`), not an uncore box's.
fn per_cpu(model: &Model, slot: u16) -> bool {
    match model.ids[slot as usize].kind {
        IdKind::Event(i) => is_core_pmu(model.str(model.events.at(i as usize).pmu)),
        IdKind::Kernel => true,
        _ => false,
    }
}

/// How many CPUs perf's CPU list `0-3,8` names; `None` when it is not one.
fn cpu_list_len(list: &str) -> Option<u32> {
    let mut n = 0u32;
    for part in list.trim().split(',') {
        let (a, b) = part.split_once('-').unwrap_or((part, part));
        let (a, b): (u32, u32) = (a.trim().parse().ok()?, b.trim().parse().ok()?);
        n = n.checked_add(b.checked_sub(a)?.checked_add(1)?)?;
    }
    (n > 0).then_some(n)
}

impl LogEvaluator {
    /// An evaluator of `model` with these literals. Without `cpuid` (the log does not say
    /// which CPU it came from) `strcmp_cpuid_str()` is NaN.
    pub fn new(
        model: &'static Model,
        common: bool,
        literals: &Literals,
        cpuid: Option<&str>,
    ) -> LogEvaluator {
        let metric_eval = MetricEval::new(model, literals.values, cpuid);
        let keys = vec![None; model.ids.len()];
        LogEvaluator {
            model,
            common,
            metric_eval,
            keys,
            param_keys: HashMap::default(),
            encodings: Encodings::new(model),
            counters: LogCounters::Unsaid("the log has no header saying what perf counted"),
            assumed_aggr_nr: std::collections::BTreeMap::new(),
        }
    }

    /// Says what the log's header says of the counters behind its rows.
    pub fn set_counters(&mut self, counters: LogCounters) {
        self.counters = counters;
    }

    /// The input slots whose `aggr_nr()` was assumed (one counter per printed row), with the
    /// value assumed the first time.
    pub fn assumed_aggr_nrs(&self) -> impl Iterator<Item = (u16, f64)> + '_ {
        self.assumed_aggr_nr.iter().map(|(&slot, &value)| (slot, value))
    }

    /// Sets literal `literal` (which drops the cached needed inputs: `#smt_on` picks a
    /// branch).
    pub fn set_literal(&mut self, literal: tmetric_model::Literal, value: f64) {
        self.metric_eval.set_literal(literal, value);
    }

    /// `has_event()` over the whole log, for the default selection.
    fn set_log_probes(&mut self, presence: &Presence) {
        for slot in self.metric_eval.has_event_slots().to_vec() {
            self.metric_eval.set_probe(slot, presence.has(self.model, slot, None, None));
        }
    }

    /// Evaluates `root` (a metric, or an instance of one with the runtime parameter) over
    /// `block`'s rows, preferring the group perf printed it in.
    pub fn evaluate(&mut self, block: &Block, root: impl Into<Root>) -> BlockOutcome {
        let Root { metric: root, param } = root.into();
        let model = self.model;
        let metric = model.metric(root);
        let name = param::instance_name(model, root, param);
        let pmu = lookup_pmu_name(model.str(metric.pmu));
        self.metric_eval.clear_inputs();
        for slot in self.metric_eval.has_event_slots().to_vec() {
            let key = key_of(&mut self.keys, &mut self.param_keys, model, slot, param);
            let (lookup, _) = lookup_input(block, model, &mut self.encodings, slot, key, None, pmu);
            let value = lookup.perf_value();
            self.metric_eval.set_probe(slot, value.is_some_and(|v| !v.is_nan()));
        }
        let printed = printed_by_perf(block, &name, pmu);

        let needed = self.metric_eval.needed(root);
        let (expr_ids, all_ids): (&[u16], &[u16]) = match &*needed {
            NeededInputs { expr: Ok(expr), all: Ok(all) } => (expr, all),
            NeededInputs { expr: Ok(expr), all: Err(_) } => (expr, expr),
            &NeededInputs { expr: Err(fail), .. } => {
                let result = MetricResult {
                    metric: root,
                    value: f64::NAN,
                    failure: Some(fail),
                    missing: Vec::new(),
                    threshold: None,
                };
                return BlockOutcome {
                    result,
                    param,
                    inputs: Vec::new(),
                    any_present: printed.is_some(),
                    all_not_counted: false,
                    check: None,
                    printed,
                    why: None,
                };
            }
        };

        let mut inputs = Vec::with_capacity(all_ids.len());
        let preferred = block.printed_group(&name, pmu);
        for &slot in all_ids {
            let key = key_of(&mut self.keys, &mut self.param_keys, model, slot, param);
            let (lookup, by_encoding) =
                lookup_input(block, model, &mut self.encodings, slot, key, preferred, pmu);
            let source = classify(model, slot, lookup, printed.is_some());
            let (source_count, aggr_nr) = match &source {
                InputSource::Row { lines, time: false, .. } => {
                    let rows = lines.len().max(1) as f64;
                    // The counters perf summed, as the per-X modes print them beside each row;
                    // else one per row summed.
                    let printed: Option<u32> = lines
                        .iter()
                        .map(|&l| block.rows.iter().find(|r| r.line == l).and_then(|r| r.counters))
                        .sum();
                    // The global layout prints no counters: the header may say them.
                    let counters = match (printed, self.counters) {
                        (Some(n), _) => f64::from(n),
                        (None, LogCounters::PerTask) => rows,
                        (None, LogCounters::Cpus(n)) if per_cpu(model, slot) => rows * f64::from(n),
                        (None, _) => {
                            self.assumed_aggr_nr.entry(slot).or_insert(rows);
                            rows
                        }
                    };
                    (rows, counters)
                }
                _ => (1.0, 1.0),
            };
            self.metric_eval.set_input(slot, source.value(), source_count);
            self.metric_eval.set_aggr_nr(slot, aggr_nr);
            inputs.push(Input { slot, source, expr: expr_ids.contains(&slot), by_encoding });
        }
        let result = self.metric_eval.evaluate_one(root);
        let with_rows = || inputs.iter().filter(|i| i.expr && !i.source.row_lines().is_empty());
        let not_counted = |i: &Input| matches!(i.source, InputSource::NotCounted { .. });
        let any_present = with_rows().any(|i| !not_counted(i));
        let all_not_counted = with_rows().next().is_some() && with_rows().all(not_counted);
        let printed = printed.or_else(|| shadow_printed(block, model, root, &inputs));
        // A NaN or 0 with every input at hand: what decides it, as stat's notes say.
        // (Inputs read as 0 because they were not counted say so themselves.)
        let read_as_zero = inputs.iter().any(|i| {
            i.expr && matches!(i.source, InputSource::NotCounted { .. } | InputSource::LatencyZero)
        });
        let why = (result.failure.is_none()
            && result.missing.is_empty()
            && !read_as_zero
            && (result.value.is_nan() || result.value == 0.0))
            .then(|| self.metric_eval.explain(root))
            .flatten();
        let mut outcome = BlockOutcome {
            result,
            param,
            inputs,
            printed,
            check: None,
            any_present,
            all_not_counted,
            why,
        };
        outcome.check = check(block, model, &outcome);
        outcome
    }
}

/// The event key of input `slot` with `?` as `param`, parsed once (`keys`, per slot) or once
/// per value of the parameter (`param_keys`).
fn key_of<'k>(
    keys: &'k mut [Option<EventKey>],
    param_keys: &'k mut HashMap<(u16, u32), EventKey>,
    model: &Model,
    slot: u16,
    param: Option<u32>,
) -> &'k EventKey {
    match param {
        Some(n) if param::has_param(model, slot) => param_keys
            .entry((slot, n))
            .or_insert_with(|| EventKey::from_expr_id(&param::id_text(model, slot, param))),
        _ => keys[slot as usize].get_or_insert_with(|| {
            EventKey::from_expr_id(model.str(model.ids[slot as usize].text))
        }),
    }
}

/// The row for input `slot` (`key`): by name (see [`lookup_clock`]), else a row of another
/// name with the same encoding, which is then named.
fn lookup_input(
    block: &Block,
    model: &Model,
    encodings: &mut Encodings,
    slot: u16,
    key: &EventKey,
    preferred: Option<usize>,
    pmu: Option<&str>,
) -> (Lookup, Option<Box<ByEncoding>>) {
    let found = lookup_clock(block, model, key, preferred, pmu);
    if !matches!(found, Lookup::Missing) {
        return (found, None);
    }
    let Some((alias, encoding)) = encodings.row_for(block, slot, key) else {
        return (found, None);
    };
    let lookup = block.lookup_key_preferring(&alias, preferred, pmu);
    let row = match &lookup {
        Lookup::Found(f) => f.event.clone(),
        Lookup::NotCounted { event, .. } | Lookup::NotSupported { event, .. } => event.clone(),
        Lookup::Ambiguous { .. } | Lookup::Missing => return (found, None),
    };
    (lookup, Some(Box::new(ByEncoding { row, encoding: encoding.to_string() })))
}

/// `block.lookup_key`, except that the common metrics' `task-clock` falls back to a
/// `cpu-clock` row: perf's own `CPUs utilized` and `/sec` rates use whichever of the two clocks
/// was counted, and `perf stat -a` counts `cpu-clock`. The row used is named in the output.
fn lookup_clock(
    block: &Block,
    model: &Model,
    key: &EventKey,
    preferred: Option<usize>,
    pmu: Option<&str>,
) -> Lookup {
    let found = block.lookup_key_preferring(key, preferred, pmu);
    if matches!(found, Lookup::Missing)
        && key.pmu.is_none()
        && key.name == "task-clock"
        && std::ptr::eq(model, tmetric_catalog::common())
    {
        let cpu_clock = EventKey { name: "cpu-clock".to_string(), ..key.clone() };
        return block.lookup_key_preferring(&cpu_clock, preferred, pmu);
    }
    found
}

/// What a lookup means for the evaluation.
fn classify(model: &Model, slot: u16, lookup: Lookup, printed: bool) -> InputSource {
    let id = &model.ids[slot as usize];
    match lookup {
        Lookup::Found(found) => {
            let mut value = found.value;
            if let Some(unit) = found.unscaled_unit {
                match event_scale(model, slot, &unit) {
                    Some(scale) => value /= scale,
                    None => return InputSource::Unscaled { unit, lines: found.lines },
                }
            }
            InputSource::Row {
                value,
                lines: found.lines,
                group: found.group,
                in_metric_group: found.in_metric_group,
                running_pct: found.running_pct,
                // A `duration_time` row is a row; the elapsed footer or an interval length
                // is not.
                time: found.time.is_some_and(|t| !matches!(t, TimeSource::Row { .. })),
            }
        }
        Lookup::NotCounted { line, group, .. } => InputSource::NotCounted { line, group },
        Lookup::NotSupported { line, group, .. } => InputSource::NotSupported { line, group },
        Lookup::Ambiguous { lines, .. } => InputSource::Ambiguous { lines },
        Lookup::Missing if id.retire_latency && printed => InputSource::LatencyZero,
        Lookup::Missing => InputSource::Missing,
    }
}

/// The ScaleUnit factor perf multiplied slot's event by before printing it in `unit`.
fn event_scale(model: &Model, slot: u16, unit: &str) -> Option<f64> {
    let IdKind::Event(index) = model.ids[slot as usize].kind else { return None };
    let event = model.events.get(index as usize)?;
    (model.str(event.unit).eq_ignore_ascii_case(unit) && event.scale.is_normal())
        .then_some(event.scale)
}

/// What perf printed for `name` in `block`: on a row, or as a Default metric-group line.
pub fn printed_by_perf(block: &Block, name: &str, pmu: Option<&str>) -> Option<PerfPrinted> {
    let metric = match block.printed_metric(name, pmu) {
        Some((_, metric)) => metric,
        None => {
            loose_metrics(block)
                .into_iter()
                .find(|(m, header)| {
                    m.name.eq_ignore_ascii_case(name)
                        && pmu.is_none_or(|p| {
                            header.as_deref().is_none_or(|h| h.eq_ignore_ascii_case(p))
                        })
                })?
                .0
        }
    };
    Some(PerfPrinted { text: metric.text.clone(), value: metric.value, label: None, factor: 1.0 })
}

/// perf's built-in metrics that print what a common metric computes: the common metric,
/// the event whose row carries it, perf's label (`/sec` stands for `/sec`, `K/sec`, `M/sec`
/// and `G/sec`), and the factor from perf's value to the metric's scaled unit.
const SHADOWS: [(&str, &str, &str, f64); 6] = [
    ("cpus_utilized", "task-clock", "CPUs utilized", 1.0),
    ("context_switches_per_sec", "context-switches", "/sec", 1.0),
    ("cpu_migrations_per_sec", "cpu-migrations", "/sec", 1.0),
    ("page_faults_per_sec", "page-faults", "/sec", 1.0),
    ("major_faults_per_sec", "major-faults", "/sec", 1.0),
    // perf prints the TSC rate in ticks per second, the metric in GHz.
    ("tsc_rate", "tsc", "/sec", 1e-9),
];

/// For a common metric: the value perf printed next to the same event, if it did.
fn shadow_printed(
    block: &Block,
    model: &Model,
    root: usize,
    inputs: &[Input],
) -> Option<PerfPrinted> {
    if model.arch != "common" {
        return None;
    }
    let name = model.str(model.metric(root).name);
    // In -I mode perf's `CPUs utilized` divides by the -I setting, not by the interval's
    // length (which `duration_time` is), so the two differ by design in short intervals.
    if name == "cpus_utilized" && block.interval.is_some() {
        return None;
    }
    let &(_, event, label, factor) = SHADOWS.iter().find(|s| s.0 == name)?;
    let lines: Vec<usize> = inputs.iter().flat_map(|i| i.source.row_lines()).copied().collect();
    // perf prints `CPUs utilized` on whichever clock was counted (see `lookup_clock`).
    let is_event = |n: &str| n == event || (event == "task-clock" && n == "cpu-clock");
    let row = block.rows.iter().find(|r| is_event(&r.key.name) && lines.contains(&r.line))?;
    row.metrics.iter().find_map(|m| {
        let prefix = if label == "/sec" {
            match m.name.as_str() {
                "/sec" => 1.0,
                "K/sec" => 1e3,
                "M/sec" => 1e6,
                "G/sec" => 1e9,
                _ => return None,
            }
        } else if m.name == label {
            1.0
        } else {
            return None;
        };
        Some(PerfPrinted {
            text: m.text.clone(),
            value: m.value,
            label: Some(m.name.clone()),
            factor: prefix * factor,
        })
    })
}

/// Whether tmetric's value agrees with perf's printed one: within half a unit of perf's last
/// printed digit, widened by how precisely perf printed the input counts (`0.83 msec`).
fn check(block: &Block, model: &Model, outcome: &BlockOutcome) -> Option<bool> {
    let printed = outcome.printed.as_ref()?;
    let theirs = printed.value?;
    // Without all its inputs tmetric's value says nothing about perf's.
    if !outcome.complete() {
        return None;
    }
    let ours = outcome.scaled(model).unwrap_or(f64::NAN);
    if theirs.is_nan() || ours.is_nan() {
        return Some(theirs.is_nan() && ours.is_nan());
    }
    // `2.155` or, under a decimal-comma locale, `2,155`.
    let decimals = tmetric_perfstat::printed_decimals(&printed.text);
    let half_ulp = 0.5 * 10f64.powi(-(decimals as i32)) * printed.factor.abs();
    let mut relative = 0.0;
    for input in outcome.inputs.iter().filter(|i| i.expr) {
        for &line in input.source.row_lines() {
            if let Some(row) = block.rows.iter().find(|r| r.line == line) {
                relative += count_precision(row);
            }
        }
    }
    let tolerance = half_ulp * (1.0 + 1e-9) + ours.abs() * relative;
    Some((ours - theirs * printed.factor).abs() <= tolerance)
}

/// Half a unit of the last digit of a printed count, relative to the count.
fn count_precision(row: &LogRow) -> f64 {
    row.count_precision()
}

/// How many printed values were checked, and how many disagreed.
#[derive(Debug, Default, Clone, Copy)]
pub struct Checks {
    /// Values perf printed that were compared.
    pub checked: usize,
    /// Of those, the ones that differ at perf's printed precision.
    pub disagree: usize,
}

impl Checks {
    /// Counts one comparison (`None`: nothing to compare).
    pub fn count(&mut self, agrees: Option<bool>) {
        if let Some(agrees) = agrees {
            self.checked += 1;
            self.disagree += usize::from(!agrees);
        }
    }
}
