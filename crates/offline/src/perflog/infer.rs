//! Which CPU model a `perf stat` log comes from, when nobody says: every model of the
//! catalogue recomputes the metrics perf printed from the log's rows, and the one whose values
//! agree with perf's (then: whose inputs explain the most rows, then: which knows the most event
//! names) is chosen, but only when it beats the next best. An ambiguous log is an answer too,
//! with the candidates, never a silent pick.

use std::collections::{BTreeMap, BTreeSet, HashSet};

use tmetric_catalog::{Model, models};
use tmetric_perfstat::{EventKey, PerfLog};

use super::{LogEvaluator, PrintedAt, Root, lookup_pmu_name, param, printed_metrics};
use tmetric_engine::compiled::Select;
use tmetric_engine::literals::Literals;

/// How many distinct printed metrics model inference evaluates per candidate model.
const INFER_PRINTED: usize = 24;

/// How many blocks of each metric tied models are compared on.
const COMPARE_BLOCKS: usize = 64;

/// A metric two models compute differently on a log.
#[derive(Debug, Clone)]
pub struct Difference {
    /// The metric.
    pub metric: String,
    /// The block compared, as [`tmetric_perfstat::Block::label`] gives it.
    pub block: String,
    /// Each model that defines it, with its value (`None`: no value).
    pub values: Vec<(&'static Model, Option<f64>)>,
    /// The models that do not define it.
    pub undefined: Vec<&'static Model>,
}

impl Difference {
    /// `tma_false_sharing (global): 0.00065 with x86/icelake, 0.00108 with x86/tigerlake`
    pub fn describe(&self) -> String {
        let mut parts: Vec<String> = self
            .values
            .iter()
            .map(|(m, v)| match v {
                Some(v) => format!("{} with {}", short(*v), m.path()),
                None => format!("no value with {}", m.path()),
            })
            .collect();
        if !self.undefined.is_empty() {
            let names: Vec<String> = self.undefined.iter().map(|m| m.path()).collect();
            parts.push(format!("not defined by {}", names.join(", ")));
        }
        format!("{} ({}): {}", self.metric, self.block, parts.join(", "))
    }
}

/// A value to six decimals, trailing zeros cut (`0.00065`); tiny or huge ones in `e` notation.
fn short(v: f64) -> String {
    if v == 0.0 || (1e-4..1e9).contains(&v.abs()) {
        let s = format!("{v:.6}");
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        format!("{v:.4e}")
    }
}

/// Whether `models` compute the same value for each metric of `names` (name, core PMU of the
/// row perf printed it on) over `log`: in the blocks where perf printed it (`printed_only`),
/// else in every block, at most [`COMPARE_BLOCKS`] per metric. A metric some of the models do
/// not define differs, and so does a value from all its inputs in one model and not in
/// another. `Ok` holds the number of finite values from all their inputs compared (the same
/// NaN, or no value, in every model is not counted), `Err` the first difference.
pub fn compare_models(
    models: &[&'static Model],
    log: &PerfLog,
    literals: &Literals,
    names: &[(String, Option<String>)],
    printed_only: bool,
) -> Result<usize, Difference> {
    let mut evaluators: Vec<LogEvaluator> =
        models.iter().map(|m| LogEvaluator::new(m, false, literals, None)).collect();
    let mut compared = 0;
    for (name, pmu) in names {
        let roots: Vec<Option<Root>> =
            models.iter().map(|m| metric_for(m, name, pmu.as_deref())).collect();
        if roots.iter().all(Option::is_none) {
            continue;
        }
        let mut blocks = log
            .blocks
            .iter()
            .filter(|b| !printed_only || super::printed_by_perf(b, name, pmu.as_deref()).is_some())
            .take(COMPARE_BLOCKS)
            .peekable();
        if roots.iter().any(Option::is_none) {
            let block = blocks.peek().map_or_else(|| "global".to_string(), |b| b.label());
            let (defined, undefined): (Vec<_>, Vec<_>) =
                models.iter().zip(&roots).partition(|(_, r)| r.is_some());
            return Err(Difference {
                metric: name.clone(),
                block,
                values: defined.into_iter().map(|(m, _)| (*m, None)).collect(),
                undefined: undefined.into_iter().map(|(m, _)| *m).collect(),
            });
        }
        for block in blocks {
            let values: Vec<Option<f64>> = evaluators
                .iter_mut()
                .zip(&roots)
                .map(|(e, r)| {
                    // A value from only some of its inputs says little: such values are
                    // compared as no value.
                    let outcome = e.evaluate(block, r.expect("every model defines it"));
                    if outcome.complete() { outcome.scaled(e.model) } else { None }
                })
                .collect();
            compared += values.iter().filter(|v| v.is_some_and(f64::is_finite)).count();
            let same = |a: Option<f64>, b: Option<f64>| match (a, b) {
                (None, None) => true,
                (Some(a), Some(b)) if a.is_nan() || b.is_nan() => a.is_nan() && b.is_nan(),
                (Some(a), Some(b)) => (a - b).abs() <= 1e-9 * a.abs().max(b.abs()) + 1e-300,
                _ => false,
            };
            if values.iter().any(|v| !same(*v, values[0])) {
                return Err(Difference {
                    metric: name.clone(),
                    block: block.label(),
                    values: models.iter().copied().zip(values).collect(),
                    undefined: Vec::new(),
                });
            }
        }
    }
    Ok(compared)
}

/// How well a model explains a log; compared field by field, best first.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord)]
pub struct Score {
    /// Printed metrics this model recomputes to perf's printed value.
    pub agree: usize,
    /// Counter rows that are inputs of the printed metrics this model knows.
    pub explained: usize,
    /// Printed metrics whose inputs are all in the log.
    pub complete: usize,
    /// Printed metric names this model has.
    pub known_metrics: usize,
    /// The log's event names this model's JSON lists.
    pub known_events: usize,
}

impl Score {
    /// `3 of 4 printed metrics recomputed to perf's value, 12 of 20 rows are their inputs, ...`
    /// (`rows`: of the blocks recomputed; `events`: the log's event names).
    pub fn describe(&self, rows: usize, events: usize) -> String {
        let mut parts = Vec::new();
        if self.known_metrics > 0 {
            parts.push(format!(
                "{} of {} printed metrics recomputed to perf's value",
                self.agree, self.known_metrics
            ));
            parts.push(format!("{} of {rows} rows are their inputs", self.explained));
        }
        parts.push(format!("{} of {events} event names known", self.known_events));
        parts.join(", ")
    }

    /// `3 agree, 12 rows, 5 events`.
    pub fn brief(&self) -> String {
        format!("{} agree, {} rows, {} events", self.agree, self.explained, self.known_events)
    }
}

/// What the log says about its CPU model.
#[derive(Debug, Clone)]
pub enum Inference {
    /// One model explains the log best.
    Model {
        /// The model.
        model: &'static Model,
        /// Its score.
        score: Score,
        /// The next best model and its score.
        next: Option<(&'static Model, Score)>,
        /// Rows of the blocks whose printed metrics were recomputed.
        rows: usize,
        /// The log's event names that are not generic.
        events: usize,
    },
    /// The log has only generic events: only the common metrics apply.
    GenericOnly,
    /// The log has only software events and tracepoints: the common metrics apply, and these
    /// events (as perf printed them, with their lines) are read by none of them.
    SoftwareOnly {
        /// Each event with its lines, in log order.
        ignored: Vec<(String, Vec<usize>)>,
    },
    /// No model knows the log's events: those no common metric reads, lower case.
    Unknown {
        /// The event names.
        events: Vec<String>,
    },
    /// Several models explain the log equally well, and every one computes the same value for
    /// every metric perf printed, in every block it printed it: one stands for them
    /// ([`order_agreeing`]), and which ones agree is said.
    Agreeing {
        /// The one that stands for them: the first by [`order_agreeing`].
        model: &'static Model,
        /// The others, in that order.
        others: Vec<&'static Model>,
        /// Why `model` stands for them.
        stands_for: StandsFor,
        /// Their score.
        score: Score,
        /// Values compared (metric × block × model).
        compared: usize,
        /// As in [`Inference::Model`].
        rows: usize,
        /// As in [`Inference::Model`].
        events: usize,
    },
    /// Several models explain the log equally well, and compute different values.
    Tied {
        /// In catalogue order.
        models: Vec<&'static Model>,
        /// Their score.
        score: Score,
        /// As in [`Inference::Model`].
        rows: usize,
        /// As in [`Inference::Model`].
        events: usize,
        /// A metric perf printed that they compute differently.
        differ: Option<Difference>,
    },
    /// The catalogue has no CPU models.
    NoModels,
}

/// Scores every model against the log; the best one is chosen when it beats the next.
pub fn infer_model(log: &PerfLog, literals: &Literals) -> Inference {
    let printed = printed_metrics(log);
    let keys: Vec<&EventKey> = log.event_keys().into_iter().filter(|k| !k.is_tool()).collect();
    let logged: BTreeSet<String> =
        keys.iter().map(|k| k.name.split(',').next().unwrap_or("").to_string()).collect();
    let events: BTreeSet<String> =
        logged.iter().filter(|name| !is_generic_event(name)).cloned().collect();
    // Each event name with the PMUs its rows name.
    let mut on_pmus: BTreeMap<String, BTreeSet<String>> =
        events.iter().map(|e| (e.clone(), BTreeSet::new())).collect();
    for key in keys {
        let event = key.name.split(',').next().unwrap_or("");
        if let (Some(pmus), Some(pmu)) = (on_pmus.get_mut(event), &key.pmu) {
            pmus.insert(pmu.clone());
        }
    }
    // The rows of the blocks whose printed metrics are recomputed.
    let blocks: BTreeSet<usize> = printed.iter().take(INFER_PRINTED).map(|p| p.block).collect();
    let rows: usize = blocks.iter().map(|&b| log.blocks[b].rows.len()).sum();
    // perf names the core PMUs `cpu_core` and `cpu_atom` only on hybrid machines.
    let hybrid_log = log.core_pmus().iter().any(|p| p == "cpu_core" || p == "cpu_atom");
    let mut scored: Vec<(Score, &'static Model)> = models()
        .iter()
        .copied()
        .filter(|m| !m.is_sys && m.arch != "test" && m.arch != "common")
        .filter(|m| !hybrid_log || is_hybrid_model(m))
        .map(|model| (score_model(model, log, &printed, &on_pmus, literals), model))
        .collect();
    // Best first; equal scores in catalogue order.
    scored.sort_by_key(|s| std::cmp::Reverse(s.0));
    let Some(&(best, model)) = scored.first() else {
        return Inference::NoModels;
    };
    if best == Score::default() {
        let common = tmetric_catalog::common();
        let unknown: Vec<String> =
            events.iter().filter(|e| !common_knows(common, e)).cloned().collect();
        if unknown.is_empty() {
            return Inference::GenericOnly;
        }
        if unknown.iter().all(|e| is_software_or_tracepoint(e)) {
            // Software events and tracepoints exist on every CPU and no model's JSON lists
            // them: the common metrics are all that applies, and the rows none reads (of
            // perf's own events too) are named.
            let unread: Vec<String> =
                logged.iter().filter(|e| !common_knows(common, e)).cloned().collect();
            return Inference::SoftwareOnly { ignored: ignored_rows(log, &unread) };
        }
        return Inference::Unknown { events: unknown };
    }
    let mut tied: Vec<&'static Model> =
        scored.iter().take_while(|(s, _)| *s == best).map(|(_, m)| *m).collect();
    if tied.len() > 1 {
        // In catalogue order, so that the model used does not depend on the sort.
        tied.sort_by_key(|m| models().iter().position(|c| std::ptr::eq(*c, *m)));
        let names: Vec<(String, Option<String>)> =
            printed.iter().map(|p| (p.name.clone(), p.pmu.clone())).collect();
        return match compare_models(&tied, log, literals, &names, true) {
            // Agreeing on no value at all (every input missing) says nothing.
            Ok(0) => Inference::Tied {
                models: tied,
                score: best,
                rows,
                events: events.len(),
                differ: None,
            },
            Ok(compared) => {
                let stands_for = order_agreeing(&mut tied, hybrid_log);
                Inference::Agreeing {
                    model: tied[0],
                    others: tied[1..].to_vec(),
                    stands_for,
                    score: best,
                    compared,
                    rows,
                    events: events.len(),
                }
            }
            Err(differ) => Inference::Tied {
                models: tied,
                score: best,
                rows,
                events: events.len(),
                differ: Some(differ),
            },
        };
    }
    let next = scored.get(1).map(|&(s, m)| (m, s));
    Inference::Model { model, score: best, next, rows, events: events.len() }
}

/// Why one of several models that agree on every value stands for them
/// ([`order_agreeing`]).
#[derive(Debug, Clone)]
pub struct StandsFor {
    /// Hybrid models (events on `cpu_core` and `cpu_atom`) passed over because the log's rows
    /// name no hybrid PMU.
    pub hybrid: Vec<&'static Model>,
    /// The oldest stored perf vintage that has it (`6.1`).
    pub since: &'static str,
    /// `since` is the oldest vintage stored: the model may be older still.
    pub since_oldest_stored: bool,
    /// The others in perf's vendor data as long, in order.
    pub as_old: Vec<&'static Model>,
    /// Among those, perf's `mapfile.csv` lists it first (else catalogue order decided).
    pub mapfile_first: bool,
    /// The others, each with the oldest stored vintage that has it, in order.
    pub newer: Vec<(&'static Model, &'static str)>,
}

/// Orders models that explain a log alike and agree on every value perf printed so that the
/// first stands for them, and says why: one whose PMUs the log's rows name (a hybrid model's
/// events are on `cpu_core` and `cpu_atom`, which a log of `hybrid_log` false never names),
/// then the one in perf's vendor data longest (first in the oldest stored vintage: every perf
/// that knows any of them knows it, so a log written before the others came could only be
/// its), then the one perf's `mapfile.csv` lists first (the generation order on s390 and
/// POWER, alphabetical on x86), then catalogue order.
pub fn order_agreeing(models: &mut [&'static Model], hybrid_log: bool) -> StandsFor {
    let catalogue = |m: &Model| tmetric_catalog::models().iter().position(|c| std::ptr::eq(*c, m));
    let mapfile = |m: &Model| {
        let v = tmetric_catalog::vintage();
        v.cpuid_map.iter().position(|row| std::ptr::eq(v.models[row.model], m))
    };
    let oldest = |m: &Model| {
        let first = in_perf_since(m);
        tmetric_catalog::VINTAGES.iter().position(|v| first.is_some_and(|f| std::ptr::eq(v, f)))
    };
    let foreign_pmus = |m: &Model| is_hybrid_model(m) != hybrid_log;
    // `None` (not found) sorts last.
    let rank = |i: Option<usize>| i.unwrap_or(usize::MAX);
    models
        .sort_by_key(|m| (foreign_pmus(m), rank(oldest(m)), rank(mapfile(m)), rank(catalogue(m))));
    let version = |m: &Model| in_perf_since(m).map_or("?", |v| v.version);
    let Some((&first, rest)) = models.split_first() else {
        return StandsFor {
            hybrid: Vec::new(),
            since: "?",
            since_oldest_stored: false,
            as_old: Vec::new(),
            mapfile_first: false,
            newer: Vec::new(),
        };
    };
    let (hybrid, rest): (Vec<&'static Model>, Vec<&'static Model>) =
        rest.iter().partition(|m| foreign_pmus(m) && !foreign_pmus(first));
    let (as_old, newer): (Vec<&'static Model>, Vec<&'static Model>) =
        rest.into_iter().partition(|m| oldest(m) == oldest(first));
    StandsFor {
        hybrid,
        since: version(first),
        since_oldest_stored: oldest(first) == Some(0),
        mapfile_first: mapfile(first).is_some()
            && as_old.iter().all(|m| rank(mapfile(m)) > rank(mapfile(first))),
        as_old,
        newer: newer.into_iter().map(|m| (m, version(m))).collect(),
    }
}

/// The oldest stored perf vintage whose vendor data has `model` (by `arch/name`).
pub fn in_perf_since(model: &Model) -> Option<&'static tmetric_catalog::Vintage> {
    tmetric_catalog::vintages_of(&model.path()).first().copied()
}

fn score_model(
    model: &'static Model,
    log: &PerfLog,
    printed: &[PrintedAt],
    events: &BTreeMap<String, BTreeSet<String>>,
    literals: &Literals,
) -> Score {
    let mut score = Score::default();
    // The log's events this model's JSON names, found with one reused buffer: every model is
    // scored, and a set of all its names, each a new string, was most of the time a log took.
    let mut names: HashSet<&str> = HashSet::new();
    if !events.is_empty() {
        let mut lower = String::new();
        for event in model.events.iter() {
            lower.clear();
            lower.push_str(model.str(event.name));
            lower.make_ascii_lowercase();
            if let Some((name, _)) = events.get_key_value(lower.as_str()) {
                names.insert(name.as_str());
            }
        }
    }
    // The hypervisor's events its runtime-parameter metrics read (`hv_24x7/PM_PB_CYC,chip=0/`)
    // are the model's too, though its JSON lists none of them.
    let param_events = param::param_events(model);
    score.known_events = events
        .iter()
        .filter(|(e, pmus)| {
            names.contains(e.as_str())
                || pmus.iter().any(|p| param_events.contains(&(p.clone(), e.to_string())))
        })
        .count();
    let mut evaluator: Option<LogEvaluator> = None;
    let mut explained: HashSet<(usize, usize)> = HashSet::new();
    for p in printed.iter().take(INFER_PRINTED) {
        let Some(root) = metric_for(model, &p.name, p.pmu.as_deref()) else { continue };
        score.known_metrics += 1;
        let evaluator =
            evaluator.get_or_insert_with(|| LogEvaluator::new(model, false, literals, None));
        let block = &log.blocks[p.block];
        let outcome = evaluator.evaluate(block, root);
        if outcome.complete() {
            score.complete += 1;
        }
        if outcome.check == Some(true) {
            score.agree += 1;
        }
        for input in &outcome.inputs {
            for &line in input.source.row_lines() {
                explained.insert((p.block, line));
            }
        }
    }
    score.explained = explained.len();
    score
}

/// The metric of `model` perf printed as `name` for a row on core PMU `pmu`: the one on that
/// PMU on hybrid models, else the first; `NAME_N` is instance N of a metric with the runtime
/// parameter.
fn metric_for(model: &Model, name: &str, pmu: Option<&str>) -> Option<Root> {
    let mut all: Vec<Root> = model.metrics_named(name).into_iter().map(Root::from).collect();
    all.extend(param::instances_named(model, name));
    let pmu_of = |r: &Root| model.str(model.metric(r.metric).pmu);
    all.iter().copied().find(|r| pmu.is_some_and(|p| pmu_of(r).eq_ignore_ascii_case(p))).or_else(
        || all.iter().copied().find(|r| pmu.is_none() || lookup_pmu_name(pmu_of(r)).is_none()),
    )
}

/// Whether a model describes a hybrid CPU (events on `cpu_core` or `cpu_atom`).
fn is_hybrid_model(model: &Model) -> bool {
    model.events.iter().any(|e| matches!(model.str(e.pmu), "cpu_core" | "cpu_atom"))
}

/// perf's legacy events (software, generic hardware and cache, any alias) and `msr/tsc/`: no
/// model's JSON lists them, so they say nothing about the CPU.
fn is_generic_event(name: &str) -> bool {
    tmetric_names::is_legacy_name(name)
        || name == "tsc"
        // The kernel's topdown events (`slots`, `topdown-retiring`, the older
        // `topdown-total-slots`): sysfs aliases, not the vendor's event names.
        || name == "topdown.slots"
        || name.starts_with("topdown-")
}

/// perf's legacy events and tracepoints (`subsystem:name`), as perf prints them, lower case.
fn is_software_or_tracepoint(name: &str) -> bool {
    is_generic_event(name)
        || name.split_once(':').is_some_and(|(subsystem, event)| {
            let word =
                |w: &str| !w.is_empty() && w.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
            word(subsystem) && word(event)
        })
}

/// The rows of `events` (names as in [`infer_model`]): each event with its lines, log order.
fn ignored_rows(log: &PerfLog, events: &[String]) -> Vec<(String, Vec<usize>)> {
    let mut out: Vec<(String, Vec<usize>)> = Vec::new();
    for row in log.blocks.iter().flat_map(|b| &b.rows) {
        let name = row.key.name.split(',').next().unwrap_or("");
        if !events.iter().any(|e| e == name) {
            continue;
        }
        match out.iter_mut().find(|(e, _)| e == &row.event) {
            Some((_, lines)) => lines.push(row.line),
            None => out.push((row.event.clone(), vec![row.line])),
        }
    }
    out
}

fn common_knows(common: &Model, event: &str) -> bool {
    common.ids.iter().any(|id| common.str(id.event).eq_ignore_ascii_case(event))
}
