//! Which CPU model a `perf stat` log comes from, when nobody says: every model of the
//! catalogue recomputes the metrics perf printed from the log's rows, and the one whose values
//! agree with perf's (then: whose inputs explain the most rows, then: which knows the most event
//! names) is chosen, but only when it beats the next best. An ambiguous log is an answer too,
//! with the candidates, never a silent pick.

use std::collections::{BTreeSet, HashSet};

use tmetric_catalog::{MODELS, Model};
use tmetric_perfstat::PerfLog;

use super::{LogEvaluator, PrintedAt, lookup_pmu_name, printed_metrics};
use crate::evaluator::Select;
use crate::literals::Literals;

/// How many distinct printed metrics model inference evaluates per candidate model.
const INFER_PRINTED: usize = 24;

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
    /// Several models explain the log equally well.
    Tied {
        /// In catalogue order.
        models: Vec<&'static Model>,
        /// Their score.
        score: Score,
        /// As in [`Inference::Model`].
        rows: usize,
        /// As in [`Inference::Model`].
        events: usize,
    },
    /// The catalogue has no CPU models.
    NoModels,
}

/// Scores every model against the log; the best one is chosen when it beats the next.
pub fn infer_model(log: &PerfLog, literals: &Literals) -> Inference {
    let printed = printed_metrics(log);
    let events: BTreeSet<String> = log
        .event_keys()
        .into_iter()
        .filter(|k| !k.is_tool())
        .map(|k| k.name.split(',').next().unwrap_or("").to_string())
        .filter(|name| !is_generic_event(name))
        .collect();
    // The rows of the blocks whose printed metrics are recomputed.
    let blocks: BTreeSet<usize> = printed.iter().take(INFER_PRINTED).map(|p| p.block).collect();
    let rows: usize = blocks.iter().map(|&b| log.blocks[b].rows.len()).sum();
    // perf names the core PMUs `cpu_core` and `cpu_atom` only on hybrid machines.
    let hybrid_log = log.core_pmus().iter().any(|p| p == "cpu_core" || p == "cpu_atom");
    let mut scored: Vec<(Score, &'static Model)> = MODELS
        .iter()
        .copied()
        .filter(|m| !m.is_sys && m.arch != "test" && m.arch != "common")
        .filter(|m| !hybrid_log || is_hybrid_model(m))
        .map(|model| (score_model(model, log, &printed, &events, literals), model))
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
            // them: the common metrics are all that applies.
            return Inference::SoftwareOnly { ignored: ignored_rows(log, &unknown) };
        }
        return Inference::Unknown { events: unknown };
    }
    let tied: Vec<&'static Model> =
        scored.iter().take_while(|(s, _)| *s == best).map(|(_, m)| *m).collect();
    if tied.len() > 1 {
        return Inference::Tied { models: tied, score: best, rows, events: events.len() };
    }
    let next = scored.get(1).map(|&(s, m)| (m, s));
    Inference::Model { model, score: best, next, rows, events: events.len() }
}

fn score_model(
    model: &'static Model,
    log: &PerfLog,
    printed: &[PrintedAt],
    events: &BTreeSet<String>,
    literals: &Literals,
) -> Score {
    let mut score = Score::default();
    let names: HashSet<String> =
        model.events.iter().map(|e| model.str(e.name).to_ascii_lowercase()).collect();
    score.known_events = events.iter().filter(|e| names.contains(e.as_str())).count();
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

/// The metric of `model` named `name` for a row on core PMU `pmu`: the one on that PMU on
/// hybrid models, else the first.
fn metric_for(model: &Model, name: &str, pmu: Option<&str>) -> Option<usize> {
    let all = model.metrics_named(name);
    all.iter()
        .copied()
        .find(|&m| pmu.is_some_and(|p| model.str(model.metrics[m].pmu).eq_ignore_ascii_case(p)))
        .or_else(|| {
            all.iter().copied().find(|&m| {
                let mp = model.str(model.metrics[m].pmu);
                pmu.is_none() || lookup_pmu_name(mp).is_none()
            })
        })
}

/// Whether a model describes a hybrid CPU (events on `cpu_core` or `cpu_atom`).
fn is_hybrid_model(model: &Model) -> bool {
    model.events.iter().any(|e| matches!(model.str(e.pmu), "cpu_core" | "cpu_atom"))
}

/// perf's software and generic hardware events, and the names of `msr/`: no model's JSON
/// lists them, so they say nothing about the CPU.
fn is_generic_event(name: &str) -> bool {
    const GENERIC: [&str; 27] = [
        "task-clock",
        "cpu-clock",
        "context-switches",
        "cs",
        "cpu-migrations",
        "migrations",
        "page-faults",
        "faults",
        "minor-faults",
        "major-faults",
        "alignment-faults",
        "emulation-faults",
        "dummy",
        "bpf-output",
        "cycles",
        "cpu-cycles",
        "instructions",
        "branches",
        "branch-instructions",
        "branch-misses",
        "cache-references",
        "cache-misses",
        "bus-cycles",
        "ref-cycles",
        "stalled-cycles-frontend",
        "stalled-cycles-backend",
        "tsc",
    ];
    GENERIC.contains(&name)
        // The kernel's topdown events (`slots`, `topdown-retiring`, seed 000's
        // `topdown-total-slots`): sysfs aliases, not the vendor's event names.
        || name == "topdown.slots"
        || name.starts_with("topdown-")
        || name.starts_with("l1-")
        || name.starts_with("llc-")
        || name.starts_with("dtlb-")
        || name.starts_with("itlb-")
        || name.starts_with("branch-")
        || name.starts_with("node-")
}

/// perf's software PMU events missing from [`is_generic_event`] and tracepoints
/// (`subsystem:name`), as perf prints them, lower case.
fn is_software_or_tracepoint(name: &str) -> bool {
    const SOFTWARE: [&str; 4] = ["cgroup-switches", "cpu-migrations", "dummy", "bpf-output"];
    is_generic_event(name)
        || SOFTWARE.contains(&name)
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
