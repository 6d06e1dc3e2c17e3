//! Evaluation vectors: every case of `tests/vectors/eval/*.toml` is an expression as vendor
//! JSON writes it (or a catalogue metric), its inputs, and the value perf 6.12's rules give
//! (tools/perf/util/expr.y and expr.c): a number, `nan`, or no value with the kind of error,
//! plus the ids the needed-events pass keeps and, for catalogue metrics, the reason
//! `MetricEval::explain` gives for a NaN or 0. Expressions run through `tmetric_expr` (parse,
//! `eval`, `needed`: the interpreter `tmetric eval --expr` uses), catalogue metrics through
//! the generated code behind `MetricEval` (what `stat` and `report` use). Every mismatch is
//! collected and reported by file and case name; the test fails once.
//!
//! The format is described in `tests/vectors/README.md`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use tmetric_engine::{MetricEval, Select, Why};
use tmetric_expr::{Env, EvalError, Facts, Ident, Literal};

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    #[serde(default)]
    case: Vec<Case>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Case {
    name: String,
    /// The perf source or spec section the expectation comes from.
    source: String,
    /// An expression as vendor JSON writes it (JSON string escapes already undone: one
    /// backslash before `-`, `,`, `=`).
    expr: Option<String>,
    /// Or a catalogue model and metric.
    model: Option<String>,
    metric: Option<String>,
    /// Input values by normalised id (escapes removed).
    #[serde(default)]
    inputs: BTreeMap<String, f64>,
    /// Catalogue cases: the value of every input not in `inputs` (default: not given, NaN).
    other_inputs: Option<f64>,
    /// Literal values by name without `#` (missing ones are unknown).
    #[serde(default)]
    literals: BTreeMap<String, f64>,
    /// Ids `has_event()` finds.
    #[serde(default)]
    has_event: Vec<String>,
    /// `strcmp_cpuid_str()` results by argument (default NaN: the cpuid is unknown).
    #[serde(default)]
    cpuid: BTreeMap<String, f64>,
    /// `source_count()` by id (default 1 for a given input, 0 for a missing one).
    #[serde(default)]
    source_count: BTreeMap<String, f64>,
    /// `aggr_nr()` by id (default: its `source_count()`; NaN for a missing one, perf 7.x's
    /// value of an id it does not know).
    #[serde(default)]
    aggr_nr: BTreeMap<String, f64>,
    /// The value (`nan` allowed).
    value: Option<f64>,
    /// No value: `parse`, `remainder_by_zero` or `literal`.
    error: Option<String>,
    /// Ids read as NaN because no value was given, in first-use order.
    missing: Option<Vec<String>>,
    /// The needed-events pass: the ids it keeps, in first-seen order.
    needs: Option<Vec<String>>,
    /// Catalogue cases: `MetricEval::explain`'s reason, as `literal:NAME`, `probe:CALL:ARG`,
    /// `division_by_zero:ID,...` or `none`.
    why: Option<String>,
}

fn vectors_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/vectors/eval")
}

/// The world of an expression case.
struct World<'a> {
    case: &'a Case,
    missing: Vec<String>,
}

impl World<'_> {
    fn literal_value(case: &Case, literal: Literal) -> Option<f64> {
        case.literals
            .iter()
            .find(|(name, _)| Literal::from_name(name) == Some(literal))
            .map(|(_, v)| *v)
    }
}

impl Env for World<'_> {
    fn id(&mut self, id: &Ident) -> f64 {
        match self.case.inputs.get(&id.name) {
            Some(v) => *v,
            None => {
                if !self.missing.contains(&id.name) {
                    self.missing.push(id.name.clone());
                }
                f64::NAN
            }
        }
    }
    fn literal(&mut self, literal: Literal) -> Option<f64> {
        World::literal_value(self.case, literal)
    }
    fn source_count(&mut self, id: &Ident) -> f64 {
        let given = self.case.inputs.contains_key(&id.name);
        self.case.source_count.get(&id.name).copied().unwrap_or(if given { 1.0 } else { 0.0 })
    }
    fn aggr_nr(&mut self, id: &Ident) -> f64 {
        if !self.case.inputs.contains_key(&id.name) {
            return f64::NAN;
        }
        let count = self.case.source_count.get(&id.name).copied().unwrap_or(1.0);
        self.case.aggr_nr.get(&id.name).copied().unwrap_or(count)
    }
    fn has_event(&mut self, id: &Ident) -> bool {
        self.case.has_event.contains(&id.name)
    }
    fn cpuid_match(&mut self, id: &Ident) -> f64 {
        self.case.cpuid.get(&id.name).copied().unwrap_or(f64::NAN)
    }
}

impl Facts for World<'_> {
    fn literal(&self, literal: Literal) -> Option<f64> {
        World::literal_value(self.case, literal)
    }
    fn has_event(&self, id: &Ident) -> bool {
        self.case.has_event.contains(&id.name)
    }
    fn cpuid_match(&self, id: &Ident) -> f64 {
        self.case.cpuid.get(&id.name).copied().unwrap_or(f64::NAN)
    }
}

fn same(expected: f64, got: f64) -> bool {
    (expected.is_nan() && got.is_nan())
        || expected == got
        || (expected - got).abs() <= 1e-12 * expected.abs().max(1.0)
}

fn error_kind(err: &EvalError) -> &'static str {
    match err {
        EvalError::RemainderByZero { .. } => "remainder_by_zero",
        EvalError::Literal { .. } => "literal",
    }
}

/// The outcome of an expression case: value or error kind, missing ids, needed ids.
fn run_expr(case: &Case, text: &str) -> Vec<String> {
    let mut problems = Vec::new();
    let expr = match tmetric_expr::parse(text) {
        Ok(expr) => expr,
        Err(err) => {
            if case.error.as_deref() != Some("parse") {
                problems.push(format!("does not parse: {}", err.message()));
            }
            return problems;
        }
    };
    let mut world = World { case, missing: Vec::new() };
    let result = tmetric_expr::eval(&expr, &mut world);
    match (&result, case.value, case.error.as_deref()) {
        (Ok(got), Some(wanted), None) if same(wanted, *got) => {}
        (Ok(got), Some(wanted), None) => {
            problems.push(format!("value: expected {wanted}, got {got}"))
        }
        (Err(err), None, Some(kind)) if error_kind(err) == kind => {}
        (Err(err), _, _) => problems.push(format!("error `{}` ({err})", error_kind(err))),
        (Ok(got), _, Some(kind)) => problems.push(format!("expected error `{kind}`, got {got}")),
        (Ok(_), None, None) => problems.push("give value or error".into()),
    }
    if let Some(wanted) = &case.missing
        && *wanted != world.missing
    {
        problems.push(format!("missing: expected {wanted:?}, got {:?}", world.missing));
    }
    if let Some(wanted) = &case.needs {
        let world = World { case, missing: Vec::new() };
        match tmetric_expr::needed(&expr, &world) {
            Ok(needed) => {
                let got: Vec<&str> = needed.ids;
                if got != *wanted {
                    problems.push(format!("needs: expected {wanted:?}, got {got:?}"));
                }
            }
            Err(err) => problems.push(format!("needs: the events pass fails: {err}")),
        }
    }
    problems
}

fn why_text(model: &tmetric_catalog::Model, why: &Option<Why>) -> String {
    match why {
        None => "none".into(),
        Some(Why::Literal(lit, _)) => format!("literal:{}", lit.name()),
        Some(Why::Probe { call, arg, .. }) => format!("probe:{call}:{arg}"),
        Some(Why::DivisionByZero { inputs, metrics }) => {
            let mut names: Vec<String> =
                inputs.iter().map(|&s| model.str(model.ids[s as usize].text).to_string()).collect();
            names.extend(metrics.iter().map(|&m| model.str(model.metric(m).name).to_string()));
            format!("division_by_zero:{}", names.join(","))
        }
    }
}

/// A catalogue metric through `MetricEval`: the generated code and its explanations.
fn run_metric(case: &Case, model_name: &str, metric: &str) -> Result<Vec<String>, String> {
    let model =
        tmetric_catalog::model(model_name).ok_or_else(|| format!("no model `{model_name}`"))?;
    let m = *model
        .metrics_named(metric)
        .first()
        .ok_or_else(|| format!("{model_name} has no metric `{metric}`"))?;
    let mut literals = [f64::NAN; Literal::COUNT];
    for (name, value) in &case.literals {
        let lit = Literal::from_name(name).ok_or_else(|| format!("no literal `#{name}`"))?;
        literals[lit.index()] = *value;
    }
    let mut off = MetricEval::new(model, literals, None);
    for (slot, id) in model.ids.iter().enumerate() {
        let text = model.str(id.text);
        let slot = slot as u16;
        if case.has_event.iter().any(|h| h == text) {
            off.set_probe(slot, true);
        }
        if let Some(v) = case.cpuid.get(text) {
            off.set_probe_value(slot, *v);
        }
        let count = case.source_count.get(text).copied().unwrap_or(1.0);
        if let Some(v) = case.inputs.get(text) {
            off.set_input(slot, *v, count);
        } else if let Some(v) = case.other_inputs {
            off.set_input(slot, v, count);
        }
        if let Some(n) = case.aggr_nr.get(text) {
            off.set_aggr_nr(slot, *n);
        }
    }
    for name in case.inputs.keys() {
        if !model.ids.iter().any(|id| model.str(id.text) == name) {
            return Err(format!("`{name}` is no input of {model_name}"));
        }
    }
    let result = off.evaluate_one(m);
    let mut problems = Vec::new();
    match (case.value, case.error.as_deref()) {
        (Some(wanted), None) if same(wanted, result.value) && result.failure.is_none() => {}
        (Some(wanted), None) => problems.push(format!(
            "value: expected {wanted}, got {} (failure {:?})",
            result.value, result.failure
        )),
        (None, Some(kind)) => {
            let got = result.failure.map(|f| format!("{f:?}"));
            let wanted = match kind {
                "remainder_by_zero" => "RemainderByZero",
                "literal" => "Literal",
                other => other,
            };
            if got.as_deref() != Some(wanted) {
                problems.push(format!("error: expected {kind}, got {got:?}"));
            }
        }
        _ => return Err("give value or error".into()),
    }
    if let Some(wanted) = &case.missing {
        let got: Vec<&str> =
            result.missing.iter().map(|&s| model.str(model.ids[s as usize].text)).collect();
        if got != *wanted {
            problems.push(format!("missing: expected {wanted:?}, got {got:?}"));
        }
    }
    if let Some(wanted) = &case.why {
        let got = why_text(model, &off.explain(m));
        if got != *wanted {
            problems.push(format!("why: expected {wanted}, got {got}"));
        }
    }
    if case.needs.is_some() {
        return Err("needs is checked for expressions only".into());
    }
    Ok(problems)
}

fn check(case: &Case) -> Result<Vec<String>, String> {
    if case.value.is_some() == case.error.is_some() {
        return Err("give exactly one of value and error".into());
    }
    match (&case.expr, &case.model, &case.metric) {
        (Some(text), None, None) => {
            if case.why.is_some() || case.other_inputs.is_some() {
                return Err("why and other_inputs are for catalogue metrics".into());
            }
            Ok(run_expr(case, text))
        }
        (None, Some(model), Some(metric)) => run_metric(case, model, metric),
        _ => Err("give expr, or model and metric".into()),
    }
}

#[test]
fn eval_vectors() {
    // perf 6.12's tables: the vectors are perf 6.12's evaluation, each case citing its source.
    tmetric_catalog::use_vintage(tmetric_catalog::base_vintage());
    let mut failures = Vec::new();
    let mut count = 0;
    for (file_name, file) in crate::vector_files::load::<File>(&vectors_dir(), &mut failures) {
        let mut seen = Vec::new();
        for case in &file.case {
            count += 1;
            let at = crate::vector_files::label(
                &file_name,
                &case.name,
                &case.source,
                &mut seen,
                &mut failures,
            );
            match check(case) {
                Err(e) => failures.push(format!("{at}: bad case: {e}")),
                Ok(problems) if problems.is_empty() => {}
                Ok(problems) => failures.push(format!("{at}:\n    {}", problems.join("\n    "))),
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {count} evaluation vectors failed:\n{}",
        failures.len(),
        failures.join("\n")
    );
    eprintln!("{count} evaluation vectors");
}
