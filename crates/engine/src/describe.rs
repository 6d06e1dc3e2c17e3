//! One metric described as data (`tmetric describe`): its descriptions, formula and threshold
//! as perf reads them, the tree of metrics and events it resolves to (each node valued over a
//! counts file when one is given (`tmetric_offline::counts::evaluate_tree`), with the reason
//! for every `nan` or out-of-range value), the
//! events it needs with SMT on and off, and the other models that define it.
//! `tmetric_print::describe` prints it; its fields are the JSON keys.

use serde::Serialize;
use tmetric_catalog::{Facts, IdKind, Model, Ref, models};

use crate::Select;

/// A node's value over a counts file, and what is wrong with it.
#[derive(Debug, Serialize, Clone, PartialEq)]
pub struct Valued {
    /// The scaled value; `None` for NaN.
    pub value: Option<f64>,
    /// Why the value is missing, partial or out of range.
    pub why: Option<String>,
}

/// One metric of the tree, with the metrics and events it reads.
#[derive(Debug, Serialize)]
pub struct Node {
    /// The metric's name.
    pub metric: String,
    /// Its formula, as perf reads it ([`unescaped`]).
    pub expr: String,
    /// Its ScaleUnit's unit.
    pub value_unit: String,
    /// Its value over the counts file, when one was given.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub counted: Option<Valued>,
    /// The metrics it reads (at most 12 deep, a cycle cut).
    pub metrics: Vec<Node>,
    /// The events it reads itself, `pmu/event` for `pmu@event@`.
    pub events: Vec<String>,
}

/// The metric's formula in one perf vintage.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct VintageFormula {
    /// The vintage (`7.2`).
    pub perf: &'static str,
    /// `MetricExpr` as perf reads it, `None` where the vintage's model lacks the metric (or the
    /// vintage lacks the model).
    pub expr: Option<String>,
}

/// Everything `describe` says of one metric of one model.
#[derive(Debug, Serialize)]
pub struct Description {
    /// The perf vintage whose vendor tables this description is of (`7.2`).
    pub vintage: &'static str,
    /// The metric's formula in every stored perf vintage, oldest first.
    pub by_perf_version: Vec<VintageFormula>,
    /// `arch/name` of the model.
    pub model: String,
    /// The metric's name.
    pub metric: String,
    /// The PMU the vendor names.
    pub pmu: String,
    /// Its metric groups.
    pub groups: Vec<String>,
    /// BriefDescription.
    pub brief: String,
    /// PublicDescription.
    pub public: String,
    /// MetricExpr, as perf reads it.
    pub expr: String,
    /// MetricThreshold, as perf reads it.
    pub threshold: Option<String>,
    /// ScaleUnit, when the vendor gives one.
    pub scale_unit: Option<String>,
    /// MetricConstraint, when not none.
    pub constraint: Option<String>,
    /// The tree of metrics and events it resolves to.
    pub tree: Node,
    /// The events it needs with SMT on.
    pub needed_smt_on: Vec<String>,
    /// The events it needs with SMT off.
    pub needed_smt_off: Vec<String>,
    /// The other models that define a metric of this name.
    pub also_defined_in: Vec<String>,
    /// Simulated machines (`--pmu-sim NAME`) whose model defines the metric.
    pub simulated_on: Vec<String>,
}

/// Every model that defines a metric named `metric`, in catalogue order.
pub fn defining(metric: &str) -> Vec<&'static Model> {
    models().iter().copied().filter(|m| !m.metrics_named(metric).is_empty()).collect()
}

/// What `describe` says of `model`'s metric number `metric`: `defining` are the models that
/// define its name ([`defining`]), `values` the tree valued by [`evaluate_tree`] (empty
/// without a counts file), `simulated_on` the simulated machines whose model defines it.
pub fn describe(
    model: &'static Model,
    metric: usize,
    defining: &[&'static Model],
    values: &[(usize, Valued)],
    simulated_on: Vec<String>,
) -> Description {
    let m = model.metric(metric);
    Description {
        vintage: tmetric_catalog::vintage().version,
        model: model.path(),
        metric: model.str(m.name).to_string(),
        pmu: model.str(m.pmu).to_string(),
        groups: model
            .str(m.groups)
            .split(';')
            .filter(|g| !g.is_empty())
            .map(String::from)
            .collect(),
        brief: model.str(m.brief).to_string(),
        public: model.str(m.public).to_string(),
        expr: unescaped(model.str(m.expr)),
        threshold: (!m.threshold_expr.is_empty()).then(|| unescaped(model.str(m.threshold_expr))),
        scale_unit: m.has_scale_unit.then(|| format!("{}{}", m.scale, model.str(m.unit))),
        constraint: match m.constraint {
            tmetric_catalog::Constraint::None => None,
            other => Some(format!("{other:?}")),
        },
        tree: tree(model, metric, 0, &mut vec![metric], values),
        needed_smt_on: needed_names(model, metric, true),
        needed_smt_off: needed_names(model, metric, false),
        also_defined_in: defining
            .iter()
            .filter(|d| !std::ptr::eq(**d, model))
            .map(|d| d.path())
            .collect(),
        simulated_on,
        by_perf_version: by_perf_version(model, metric),
    }
}

/// The formula of `model`'s metric `metric` in every vintage (the metric found by name in the
/// model of the same `arch/name`).
pub fn by_perf_version(model: &Model, metric: usize) -> Vec<VintageFormula> {
    let name = model.str(model.metric(metric).name);
    let path = model.path();
    tmetric_catalog::VINTAGES
        .iter()
        .map(|v| VintageFormula {
            perf: v.version,
            expr: tmetric_catalog::model_in(v, &path).and_then(|m| {
                m.metrics_named(name).first().map(|&i| unescaped(m.str(m.metric(i).expr)))
            }),
        })
        .collect()
}

/// A formula as perf reads it: perf's JSON writes `-` and other characters inside event
/// names escaped (`task\-clock`, `cstate_core@c1\-residency@`), and its lexer drops the
/// backslash, so that is how it is shown.
pub fn unescaped(expr: &str) -> String {
    let mut out = String::with_capacity(expr.len());
    let mut chars = expr.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => out.extend(chars.next()),
            c => out.push(c),
        }
    }
    out
}

fn needed_names(model: &Model, metric: usize, smt: bool) -> Vec<String> {
    let literals = crate::plan::offline_literals(smt, false);
    let probes = vec![0.0; model.ids.len()];
    let facts = Facts { literals: &literals, probes: &probes };
    let mut names: Vec<String> = model
        .needed_ids(metric, &facts, false)
        .unwrap_or_default()
        .into_iter()
        .map(|s| model.str(model.ids[s as usize].text).replace('@', "/"))
        .collect();
    names.sort();
    names
}

fn tree(
    model: &Model,
    metric: usize,
    depth: usize,
    seen: &mut Vec<usize>,
    values: &[(usize, Valued)],
) -> Node {
    let m = model.metric(metric);
    let literals = crate::plan::offline_literals(true, false);
    let probes = vec![0.0; model.ids.len()];
    let facts = Facts { literals: &literals, probes: &probes };
    let refs = m.needed_refs(&facts).unwrap_or_default();
    let mut metrics = Vec::new();
    let mut events = Vec::new();
    for r in refs {
        match r {
            Ref::Metric(x) => {
                let x = x as usize;
                if depth < 12 && !seen.contains(&x) {
                    seen.push(x);
                    metrics.push(tree(model, x, depth + 1, seen, values));
                    seen.pop();
                }
            }
            Ref::Id(slot) => {
                let id = &model.ids[slot as usize];
                if id.kind != IdKind::Probe {
                    let name = model.str(id.text).replace('@', "/");
                    if !events.contains(&name) {
                        events.push(name);
                    }
                }
            }
        }
    }
    Node {
        metric: model.str(m.name).to_string(),
        expr: unescaped(model.str(m.expr)),
        value_unit: model.str(m.unit).to_string(),
        counted: values.iter().find(|(i, _)| *i == metric).map(|(_, v)| v.clone()),
        metrics,
        events,
    }
}
