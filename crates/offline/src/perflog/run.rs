//! A whole `perf stat` log evaluated block by block, as `eval --from-perf` does it: the model
//! chosen (given, by cpuid, or inferred), the metrics selected (`-M`, else what perf printed),
//! the literals perf's printed values imply, then each block's metrics and built-ins with the
//! TMA bottleneck path, and at the end what was left out and why. Blocks are handed in one at
//! a time ([`LogRun::block`]), so a long log is evaluated in bounded memory; nothing here
//! prints or reads files.

use std::fmt;

use tmetric_catalog::Model;
use tmetric_catalog::catalog::id_calls;
use tmetric_model::Literal;
use tmetric_perfstat::{Block, PerfLog};

use super::builtins::{BuiltinOutcome, Builtins};
use super::infer::{Difference, Inference, compare_models, infer_model};
use super::literals::{Unsolved, infer_literals};
use super::{
    BlockOutcome, Checks, LogEvaluator, Root, Selection, default_selection, instances,
    lookup_pmu_name, printed_metrics,
};
use tmetric_engine::compiled::Select;
use tmetric_engine::literals::Literals;
use tmetric_engine::select::{self, Miss, ModelFrom};

/// How many inputs read from a row of another name (by encoding) are kept to be said.
const BY_ENCODING_KEPT: usize = 16;

/// The model a log is evaluated with, and how it was chosen.
#[derive(Debug, Clone)]
pub struct ModelChoice {
    /// `None`: the log only has generic or software events; only the common metrics apply.
    pub model: Option<&'static Model>,
    /// How it was chosen.
    pub how: How,
    /// Models that explain the log as well as `model` and agree with it on what perf printed:
    /// a metric selected with `-M` must agree on them too.
    pub agreeing: Vec<&'static Model>,
}

/// How the model was chosen.
#[derive(Debug, Clone)]
pub enum How {
    /// Given by name (`--model`); `cpuid_names` is the other model the cpuid given beside it
    /// names, if it names another.
    Given {
        /// The cpuid given too, and the model it names, when that is another one.
        cpuid_names: Option<(String, &'static Model)>,
    },
    /// The model of this cpuid (`--cpuid`).
    Cpuid(String),
    /// Inferred from the log: [`Inference::Model`], [`Inference::GenericOnly`],
    /// [`Inference::SoftwareOnly`] or [`Inference::Agreeing`].
    Inferred(Inference),
}

impl How {
    /// Where the model came from, as a `-M` miss words it: `--model`, else the log.
    pub fn model_from(&self) -> ModelFrom {
        match self {
            How::Given { .. } => ModelFrom::Named,
            How::Cpuid(_) | How::Inferred(_) => ModelFrom::Log,
        }
    }
}

/// Why no model can be chosen, or the one chosen cannot be trusted for what `-M` selects.
#[derive(Debug, Clone)]
pub enum ChoiceError {
    /// No model of the catalogue matches the cpuid given.
    UnknownCpuid(String),
    /// The log (named `log`) is [`Inference::Unknown`], [`Inference::Tied`] or
    /// [`Inference::NoModels`].
    Inference {
        /// The log's name.
        log: String,
        /// What the log says (boxed: it is large, and errors travel by value).
        inference: Box<Inference>,
    },
    /// Models that agree on what perf printed compute differently what `-M` selects.
    Differ {
        /// The log's name.
        log: String,
        /// The model chosen, then those that agree with it.
        models: Vec<&'static Model>,
        /// The first metric they compute differently (boxed, as `inference` above).
        differ: Box<Difference>,
    },
}

impl fmt::Display for ChoiceError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let examples = select::examples;
        match self {
            ChoiceError::UnknownCpuid(cpuid) => write!(
                f,
                "no model of the catalogue matches cpuid `{cpuid}` (perf's mapfile.csv rules); pass --model MODEL (one of {}, ...)",
                examples()
            ),
            ChoiceError::Differ { log, models, differ } => write!(
                f,
                "cannot tell which CPU model {log} comes from: {} explain it equally well and agree on what perf printed, but compute differently what -M selects: {}; pass --model MODEL or --cpuid CPUID",
                listed_models(models),
                differ.describe()
            ),
            ChoiceError::Inference { log, inference } => match inference.as_ref() {
                Inference::Unknown { events } => {
                    let shown: Vec<String> = events.iter().take(6).cloned().collect();
                    write!(
                        f,
                        "cannot tell which CPU model {log} comes from: no model of the catalogue knows its events ({}); pass --model MODEL (models with metrics include {}) or --cpuid CPUID",
                        tmetric_text::join_code(&shown),
                        examples()
                    )
                }
                Inference::Tied { models, score, rows, events, differ } => {
                    let differ = differ.as_ref().map_or(String::new(), |d| {
                        format!("; they compute differently {}", d.describe())
                    });
                    write!(
                        f,
                        "cannot tell which CPU model {log} comes from: {} explain it equally well ({}){differ}; pass --model MODEL or --cpuid CPUID",
                        listed_models(models),
                        score.describe(*rows, *events)
                    )
                }
                Inference::NoModels => f.write_str("the catalogue has no CPU models"),
                other => write!(f, "{other:?}"),
            },
        }
    }
}

impl std::error::Error for ChoiceError {}

/// `` `x86/icelake`, `x86/tigerlake` and 3 more ``
pub fn listed_models(models: &[&'static Model]) -> String {
    let listed: Vec<String> = models.iter().take(8).map(|m| m.path()).collect();
    let more = models.len().saturating_sub(listed.len());
    let more = if more > 0 { format!(" and {more} more") } else { String::new() };
    format!("{}{more}", tmetric_text::join_code(&listed))
}

/// The model an inference chose.
fn model_of(inference: &Inference) -> Option<&'static Model> {
    match inference {
        Inference::Model { model, .. } | Inference::Agreeing { model, .. } => Some(*model),
        _ => None,
    }
}

/// [`infer_model`] over the chosen vintage, or perf 6.12's and then every other:
/// a vintage is switched to (for the rest of the process) only when the selected vintage's best
/// model recomputes none of perf's printed values and another vintage's model of another name
/// recomputes some while explaining as many rows and knowing as many event names (older perf's `IPC`, `Retiring`, ... of a model whose name changed), or
/// when the selected vintage explains none of the log and another knows the printed names.
fn infer_with_vintage(log: &PerfLog, literals: &Literals) -> Inference {
    if tmetric_catalog::vintage_is_chosen() {
        return infer_model(log, literals);
    }
    // A log is read against perf 6.12's tables first, whatever live runs default to: a
    // vintage it does not need is not switched to.
    tmetric_catalog::use_vintage(tmetric_catalog::base_vintage());
    let first = infer_model(log, literals);
    let score = |inference: &Inference| match inference {
        Inference::Model { score, .. } | Inference::Agreeing { score, .. } => Some(*score),
        _ => None,
    };
    let start = tmetric_catalog::vintage();
    let mut best = (score(&first), start, first);
    for v in tmetric_catalog::VINTAGES {
        if std::ptr::eq(v, start) {
            continue;
        }
        tmetric_catalog::use_vintage(v);
        let inference = infer_model(log, literals);
        // A value another vintage's formula for the same model fits better is more often a
        // literal still to solve (`#smt_on`) than another perf: only another model counts.
        let better = match (score(&inference), best.0) {
            (Some(new), Some(old)) => {
                new.agree > 0
                    && old.agree == 0
                    && new.explained >= old.explained
                    && new.known_events >= old.known_events
                    && model_of(&inference).map(|m| m.path()) != model_of(&best.2).map(|m| m.path())
            }
            (Some(new), None) => new.known_metrics > 0,
            (None, _) => false,
        };
        if better {
            best = (score(&inference), v, inference);
        }
    }
    tmetric_catalog::use_vintage(best.1);
    best.2
}

/// The model for `log` (called `name` in errors): `given` (a model named by the user), else
/// the one `cpuid` names, else the one the log's rows and printed metrics point to
/// ([`infer_model`]). A cpuid no model matches is an error even beside `given`.
pub fn choose_model(
    given: Option<&'static Model>,
    cpuid: Option<&str>,
    log: &PerfLog,
    literals: &Literals,
    name: &str,
) -> Result<ModelChoice, ChoiceError> {
    let by_cpuid = match cpuid {
        Some(cpuid) => Some(
            tmetric_catalog::model_for_cpuid(cpuid)
                .ok_or_else(|| ChoiceError::UnknownCpuid(cpuid.to_string()))?,
        ),
        None => None,
    };
    let chosen = |model, how| ModelChoice { model: Some(model), how, agreeing: Vec::new() };
    if let Some(model) = given {
        let cpuid_names = by_cpuid
            .filter(|m| !std::ptr::eq(*m, model))
            .map(|other| (cpuid.unwrap_or_default().to_string(), other));
        return Ok(chosen(model, How::Given { cpuid_names }));
    }
    if let (Some(model), Some(cpuid)) = (by_cpuid, cpuid) {
        return Ok(chosen(model, How::Cpuid(cpuid.to_string())));
    }
    let inference = infer_with_vintage(log, literals);
    let (model, agreeing) = match &inference {
        Inference::Model { model, .. } => (Some(*model), Vec::new()),
        Inference::Agreeing { model, others, .. } => (Some(*model), others.clone()),
        Inference::GenericOnly | Inference::SoftwareOnly { .. } => (None, Vec::new()),
        Inference::Unknown { .. } | Inference::Tied { .. } | Inference::NoModels => {
            return Err(ChoiceError::Inference {
                log: name.to_string(),
                inference: Box::new(inference),
            });
        }
    };
    Ok(ModelChoice { model, how: How::Inferred(inference), agreeing })
}

/// Why a log's evaluation cannot start.
#[derive(Debug, thiserror::Error)]
pub enum SetupError {
    /// A `-M` item selects nothing.
    #[error(transparent)]
    Miss(#[from] Miss),
    /// Agreeing models differ on what `-M` selects.
    #[error(transparent)]
    Choice(#[from] ChoiceError),
}

/// A log's evaluation: the evaluators (the CPU model's, then the common metrics'), the
/// metrics selected from each, and what has been seen so far.
#[derive(Debug)]
pub struct LogRun {
    /// The CPU model's evaluator (when there is a model), then the common metrics'.
    pub evaluators: Vec<LogEvaluator>,
    /// Per evaluator, the selected metrics in order (a metric with the runtime parameter once
    /// per chip or core).
    pub roots: Vec<Vec<Root>>,
    /// perf's built-in metrics selected.
    pub builtins: Builtins,
    /// What the selection without `-M` left out.
    pub selection: Selection,
    /// Literals perf printed metrics for that no single value explains.
    pub unsolved: Vec<Unsolved>,
    /// Every literal's value, with those inferred from the log.
    pub literals: Literals,
    /// The literals the selected metrics read, in [`Literal`] order.
    pub used: Vec<Literal>,
    /// perf's printed values checked, and how many disagree.
    pub checks: Checks,
    /// Inputs read from a row of another name with the same encoding, each once (input,
    /// row, encoding), the first few.
    pub by_encoding: Vec<(String, String, String)>,
    /// Blocks evaluated.
    pub blocks: usize,
    /// Per evaluator and root: shown in some block.
    shown: Vec<Vec<bool>>,
    /// Per evaluator and root: blocks skipped because every input row is `<not counted>`.
    not_counted: Vec<Vec<usize>>,
    builtins_shown: usize,
    /// The first block, for the metrics no block has inputs for.
    first: Option<Block>,
}

/// One metric of one block.
#[derive(Debug, Clone)]
pub struct Line {
    /// Index into [`LogRun::evaluators`].
    pub evaluator: usize,
    /// Its value, inputs and check against perf.
    pub outcome: BlockOutcome,
    /// On the TMA bottleneck path of the block's metrics.
    pub bottleneck: bool,
}

/// A selected metric no block showed, evaluated over the first block.
#[derive(Debug, Clone)]
pub struct Unplaced {
    /// Index into [`LogRun::evaluators`].
    pub evaluator: usize,
    /// Its outcome over the first block (everything missing).
    pub outcome: BlockOutcome,
    /// Its input rows are `<not counted>` in every block (else no block has any of them).
    pub not_counted: bool,
}

/// What the end of a log's evaluation has to say.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Summary {
    /// Metrics with blocks skipped because every input row is `<not counted>`, with how many.
    pub skipped: Vec<(String, usize)>,
    /// Selected metrics that no block has any input row for.
    pub without_inputs: usize,
    /// Selected metrics whose input rows are `<not counted>` in every block.
    pub never_counted: usize,
    /// Nothing was selected and no built-in shown.
    pub nothing: bool,
}

impl LogRun {
    /// Sets up the evaluation of `log` with `choice`'s model and the common metrics: selects
    /// `items` (`-M`, trimmed; empty: what perf printed, else what the log covers), checks
    /// that agreeing models agree on them, and solves the literals `literals` leaves assumed
    /// from perf's printed values. `name` names the log in errors.
    pub fn new(
        log: &PerfLog,
        choice: &ModelChoice,
        mut literals: Literals,
        cpuid: Option<&str>,
        items: &[&str],
        name: &str,
    ) -> Result<LogRun, SetupError> {
        let common = tmetric_catalog::common();
        let mut evaluators: Vec<LogEvaluator> = Vec::new();
        if let Some(model) = choice.model {
            evaluators.push(LogEvaluator::new(model, false, &literals, cpuid));
        }
        if !evaluators.iter().any(|e| std::ptr::eq(e.model, common)) {
            evaluators.push(LogEvaluator::new(common, choice.model.is_some(), &literals, cpuid));
        }
        let counters = super::LogCounters::of(log);
        for evaluator in &mut evaluators {
            evaluator.set_counters(counters);
        }
        // perf's built-in metrics (`insn per cycle`, ...) are not in any model.
        let (builtins, rest) = super::builtins::select(items);
        let printed = printed_metrics(log);
        let mut selection = Selection::default();
        let roots: Vec<Vec<Root>> = if items.is_empty() {
            default_selection(&mut evaluators, log, &printed, &mut selection)
        } else if rest.is_empty() {
            vec![Vec::new(); evaluators.len()]
        } else {
            let picks = select::select(&rest, choice.model, choice.how.model_from())?;
            let of = |e: &LogEvaluator| {
                let picked: Vec<usize> = picks
                    .iter()
                    .filter(|p| std::ptr::eq(p.model, e.model))
                    .map(|p| p.metric)
                    .collect();
                instances(e.model, &picked, log)
            };
            evaluators.iter().map(of).collect()
        };
        if !items.is_empty() {
            agree_on_selection(choice, &roots, log, &literals, name)?;
        }
        let json_printed = printed
            .iter()
            .any(|p| evaluators.iter().any(|e| !e.model.metrics_named(&p.name).is_empty()));
        let builtins = builtins.for_log(log, json_printed);
        // Literals the flags leave unknown, solved from perf's printed values.
        let unsolved = infer_literals(&mut evaluators, &roots, log, &mut literals, cpuid);
        let mut used: Vec<Literal> = Vec::new();
        for (evaluator, roots) in evaluators.iter().zip(&roots) {
            let metrics: Vec<usize> = roots.iter().map(|r| r.metric).collect();
            for lit in evaluator.model.literals_of(&metrics) {
                if !roots.is_empty() && !used.contains(&lit) {
                    used.push(lit);
                }
            }
        }
        used.sort();
        Ok(LogRun {
            shown: roots.iter().map(|r| vec![false; r.len()]).collect(),
            not_counted: roots.iter().map(|r| vec![0; r.len()]).collect(),
            evaluators,
            roots,
            builtins,
            selection,
            unsolved,
            literals,
            used,
            checks: Checks::default(),
            by_encoding: Vec::new(),
            blocks: 0,
            builtins_shown: 0,
            first: None,
        })
    }

    /// The inputs of the selected metrics whose `aggr_nr()` the log did not give (the global
    /// layout prints no counters column, and its header did not say them): (model, input
    /// slot, the value assumed, one counter per printed row).
    pub fn assumed_aggr_nrs(&self) -> Vec<(&'static Model, u16, f64)> {
        let mut out = Vec::new();
        for (evaluator, roots) in self.evaluators.iter().zip(&self.roots) {
            let metrics: Vec<usize> = roots.iter().map(|r| r.metric).collect();
            let args = evaluator.model.call_slots_of(&metrics, id_calls::AGGR_NR);
            for (slot, value) in evaluator.assumed_aggr_nrs() {
                if args.contains(&(slot as usize)) {
                    out.push((evaluator.model, slot, value));
                }
            }
        }
        out
    }

    /// The selected metrics of `block` that have an input row there (per evaluator, in
    /// selection order), then perf's built-ins on its rows; hand the block to
    /// [`LogRun::retire`] once printed.
    pub fn block(&mut self, block: &Block) -> (Vec<Line>, Vec<BuiltinOutcome>) {
        self.blocks += 1;
        let mut lines = Vec::new();
        for (e, evaluator) in self.evaluators.iter_mut().enumerate() {
            // The block's metrics first, so that the bottleneck path is the one the whole
            // tree decides, as in every other view.
            let mut outcomes = Vec::new();
            for (r, &root) in self.roots[e].iter().enumerate() {
                let outcome = evaluator.evaluate(block, root);
                if !outcome.any_present {
                    self.not_counted[e][r] += usize::from(outcome.all_not_counted);
                    continue;
                }
                outcomes.push((r, outcome));
            }
            let path = tmetric_engine::view::bottleneck_of(evaluator.model, &outcomes, |(_, o)| {
                (o.result.metric, o.result.value, o.result.threshold)
            });
            for (i, (r, outcome)) in outcomes.into_iter().enumerate() {
                self.shown[e][r] = true;
                self.checks.count(outcome.check);
                note_by_encoding(&mut self.by_encoding, evaluator.model, &outcome);
                lines.push(Line { evaluator: e, outcome, bottleneck: path.contains(&i) });
            }
        }
        let builtins = self.builtins.evaluate(block);
        for outcome in &builtins {
            self.checks.count(outcome.agrees);
        }
        self.builtins_shown += builtins.len();
        (lines, builtins)
    }

    /// Done with `block`: the first one is kept for [`LogRun::unplaced`], the others dropped.
    pub fn retire(&mut self, block: Block) {
        self.first.get_or_insert(block);
    }

    /// At the end: the selected metrics no block showed, each over the first block.
    pub fn unplaced(&mut self) -> Vec<Unplaced> {
        let Some(first) = &self.first else { return Vec::new() };
        let mut out = Vec::new();
        for (e, evaluator) in self.evaluators.iter_mut().enumerate() {
            for (r, &root) in self.roots[e].iter().enumerate() {
                if !self.shown[e][r] {
                    let outcome = evaluator.evaluate(first, root);
                    let not_counted = self.not_counted[e][r] > 0;
                    out.push(Unplaced { evaluator: e, outcome, not_counted });
                }
            }
        }
        out
    }

    /// What the end of the evaluation has to say (after [`LogRun::unplaced`]).
    pub fn summary(&self) -> Summary {
        let mut summary = Summary::default();
        for ((evaluator, roots), counts) in
            self.evaluators.iter().zip(&self.roots).zip(&self.not_counted)
        {
            let model = evaluator.model;
            for (root, &n) in roots.iter().zip(counts).filter(|(_, n)| **n > 0) {
                summary.skipped.push((root.name(model).into_owned(), n));
            }
        }
        if self.first.is_some() {
            for (shown, counts) in self.shown.iter().zip(&self.not_counted) {
                for (_, &n) in shown.iter().zip(counts).filter(|(s, _)| !**s) {
                    if n > 0 {
                        summary.never_counted += 1;
                    } else {
                        summary.without_inputs += 1;
                    }
                }
            }
        }
        summary.nothing = self.roots.iter().all(Vec::is_empty) && self.builtins_shown == 0;
        summary
    }
}

/// Models that agree on what perf printed must agree on what `-M` adds too.
fn agree_on_selection(
    choice: &ModelChoice,
    roots: &[Vec<Root>],
    log: &PerfLog,
    literals: &Literals,
    name: &str,
) -> Result<(), ChoiceError> {
    let Some(model) = choice.model.filter(|_| !choice.agreeing.is_empty()) else { return Ok(()) };
    let names: Vec<(String, Option<String>)> = roots
        .first()
        .into_iter()
        .flatten()
        .map(|root| {
            let pmu = model.str(model.metric(root.metric).pmu);
            (root.name(model).into_owned(), lookup_pmu_name(pmu).map(str::to_string))
        })
        .collect();
    let mut models = vec![model];
    models.extend(&choice.agreeing);
    compare_models(&models, log, literals, &names, false).map(|_| ()).map_err(|differ| {
        ChoiceError::Differ { log: name.to_string(), models, differ: Box::new(differ) }
    })
}

/// Keeps the (input, row, encoding) of each input `outcome` read by encoding, once each and
/// the first [`BY_ENCODING_KEPT`] only.
fn note_by_encoding(
    kept: &mut Vec<(String, String, String)>,
    model: &Model,
    outcome: &BlockOutcome,
) {
    for input in &outcome.inputs {
        if let Some(alias) = &input.by_encoding
            && kept.len() < BY_ENCODING_KEPT
        {
            let id = model.str(model.ids[input.slot as usize].text);
            let said = (id.to_string(), alias.row.clone(), alias.encoding.clone());
            if !kept.contains(&said) {
                kept.push(said);
            }
        }
    }
}
