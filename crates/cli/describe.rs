//! `tmetric describe METRIC`: everything about one metric in one place: descriptions, the
//! formula and threshold as the vendor wrote them, the tree of metrics and events it resolves
//! to, and the events it needs with SMT on and off.

use std::io::Write;

use anyhow::bail;
use serde::Serialize;
use tmetric_catalog::{Facts, IdKind, MODELS, Model, Ref};
use tmetric_engine::{Evaluator, Select};

use crate::models::{closest, find_model, join_code};

/// `tmetric describe` flags.
#[derive(Debug, clap::Args)]
#[command(after_help = "Examples:\n  tmetric describe tma_dtlb_store --model sapphirerapids\n  \
    tmetric describe tma_backend_bound --model alderlake --json\n  \
    tmetric describe tma_retiring --model sapphirerapids --counts counts.json")]
pub struct DescribeArgs {
    /// The metric.
    #[arg(value_name = "METRIC")]
    metric: String,
    /// The model whose metric to describe (default: this machine's model when it defines the
    /// metric, else the common metrics', else the first model that does; the others are
    /// listed).
    #[arg(long, value_name = "MODEL")]
    model: Option<String>,
    /// Evaluate the tree over this counts file (docs/counts-format.md; `-` reads standard
    /// input): each node's value, with the reason for every `nan` or out-of-range value.
    #[arg(long, value_name = "FILE")]
    counts: Option<std::path::PathBuf>,
    /// One JSON document.
    #[arg(long)]
    json: bool,
}

/// A node's value over a counts file, and what is wrong with it.
#[derive(Serialize, Clone)]
struct Valued {
    value: Option<f64>,
    why: Option<String>,
}

/// Every metric of the tree evaluated over the counts: `(metric index, value and reason)`.
fn evaluate_tree(
    model: &'static Model,
    metric: usize,
    file: &tmetric_engine::counts::CountsFile,
) -> anyhow::Result<Vec<(usize, Valued)>> {
    let assigned = tmetric_engine::counts::assign(model, file)?;
    let mut evaluator = Evaluator::new(model);
    evaluator.values.clone_from(&assigned.values);
    evaluator.source_counts.clone_from(&assigned.source_counts);
    for (literal, value) in &file.literals {
        evaluator.literals[literal.index()] = *value;
    }
    for slot in 0..model.ids.len() {
        evaluator.probes[slot] = f64::from(u8::from(assigned.present[slot]));
    }
    let order = model.closure(&[metric]);
    let roots: Vec<usize> = order.iter().map(|&m| m as usize).collect();
    let results = evaluator.evaluate(model, &roots);
    Ok(results
        .into_iter()
        .map(|r| {
            let m = &model.metrics[r.metric];
            let scaled = r.value * m.scale;
            let why = if let Some(fail) = r.failure {
                Some(format!("no value: {fail}"))
            } else if !r.missing.is_empty() {
                let names: Vec<&str> = r.missing.iter().map(|&s| model.str(model.ids[s as usize].text)).collect();
                let what = if r.value.is_nan() { "nan" } else { "computed without" };
                Some(format!("{what}: the counts have no {}", names.join(", ")))
            } else if r.value < 0.0 {
                Some("negative: the counts do not fit together (multiplexed over different time, or from different runs)".into())
            } else if model.str(m.unit) == "%" && m.scale == 100.0 && r.value > 1.0 {
                Some("over 100%: the counts do not fit together (multiplexed over different time, or from different runs)".into())
            } else {
                None
            };
            (r.metric, Valued { value: (!scaled.is_nan()).then_some(scaled), why })
        })
        .collect())
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

#[derive(Serialize)]
struct Node {
    metric: String,
    expr: String,
    value_unit: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    counted: Option<Valued>,
    metrics: Vec<Node>,
    events: Vec<String>,
}

#[derive(Serialize)]
struct Description {
    model: String,
    metric: String,
    pmu: String,
    groups: Vec<String>,
    brief: String,
    public: String,
    expr: String,
    threshold: Option<String>,
    scale_unit: Option<String>,
    constraint: Option<String>,
    tree: Node,
    needed_smt_on: Vec<String>,
    needed_smt_off: Vec<String>,
    also_defined_in: Vec<String>,
    /// Simulated machines (`--pmu-sim NAME`) whose model defines the metric.
    simulated_on: Vec<String>,
}

fn needed_names(model: &Model, metric: usize, smt: bool) -> Vec<String> {
    let literals = tmetric_engine::plan::offline_literals(smt, false);
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
    let m = &model.metrics[metric];
    let literals = tmetric_engine::plan::offline_literals(true, false);
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

fn print_tree(out: &mut dyn Write, node: &Node, indent: usize) -> std::io::Result<()> {
    let pad = "  ".repeat(indent);
    match &node.counted {
        Some(v) => {
            let value = v.value.map_or("nan".to_string(), |x| format!("{x:.4}"));
            let why = v.why.as_ref().map(|w| format!("  [{w}]")).unwrap_or_default();
            writeln!(
                out,
                "{pad}{} = {value} {}{why}    ({})",
                node.metric, node.value_unit, node.expr
            )?;
        }
        None => writeln!(out, "{pad}{} = {}", node.metric, node.expr)?,
    }
    if !node.events.is_empty() {
        writeln!(out, "{pad}  events: {}", node.events.join(", "))?;
    }
    for child in &node.metrics {
        print_tree(out, child, indent + 1)?;
    }
    Ok(())
}

/// Runs `tmetric describe`.
pub fn run(args: &DescribeArgs, out: &mut dyn Write) -> anyhow::Result<()> {
    let defining: Vec<&'static Model> =
        MODELS.iter().copied().filter(|m| !m.metrics_named(&args.metric).is_empty()).collect();
    let model = chosen_model(args, &defining)?;
    let found = model.metrics_named(&args.metric);
    if found.is_empty() {
        let others: Vec<String> = defining.iter().take(8).map(|m| m.path()).collect();
        if others.is_empty() {
            bail!("{} has no metric `{}`, and no other model does", model.path(), args.metric);
        }
        bail!(
            "{} has no metric `{}`; it is defined for {}{}",
            model.path(),
            args.metric,
            others.join(", "),
            if defining.len() > 8 {
                format!(" and {} more", defining.len() - 8)
            } else {
                String::new()
            }
        );
    }
    let file = args.counts.as_deref().map(crate::counts::read).transpose()?;
    for (i, &metric) in found.iter().enumerate() {
        let values = match &file {
            Some(file) => evaluate_tree(model, metric, file)?,
            None => Vec::new(),
        };
        let description = describe(args, model, metric, &defining, &values);
        if args.json {
            writeln!(out, "{}", serde_json::to_string_pretty(&description)?)?;
            continue;
        }
        if i > 0 {
            writeln!(out)?;
        }
        print_text(out, &description)?;
    }
    Ok(())
}

/// `--model`'s model, else [`default_model`]'s; a metric no model defines is an error with
/// the close names.
fn chosen_model(
    args: &DescribeArgs,
    defining: &[&'static Model],
) -> anyhow::Result<&'static Model> {
    if let Some(name) = &args.model {
        return find_model(name);
    }
    if let Some(model) = default_model(&args.metric, defining) {
        return Ok(model);
    }
    let names =
        MODELS.iter().flat_map(|m| m.metrics.iter().map(move |x| m.str(x.name).to_string()));
    let close = closest(&args.metric, names, 5);
    let hint = if close.is_empty() {
        "`tmetric list metrics` lists them".to_string()
    } else {
        format!("did you mean {}?", join_code(&close))
    };
    bail!("no model of the catalogue defines a metric `{}`; {hint}", args.metric)
}

/// What `describe` says of `model`'s metric number `metric`, as data (the JSON form).
fn describe(
    args: &DescribeArgs,
    model: &'static Model,
    metric: usize,
    defining: &[&'static Model],
    values: &[(usize, Valued)],
) -> Description {
    let m = &model.metrics[metric];
    Description {
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
        threshold: (m.threshold_expr.1 > 0).then(|| unescaped(model.str(m.threshold_expr))),
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
        simulated_on: crate::models::simulated_for(&args.metric, Some(model))
            .into_iter()
            .map(|(name, _)| name.to_string())
            .collect(),
    }
}

/// A description as text.
fn print_text(out: &mut dyn Write, description: &Description) -> anyhow::Result<()> {
    writeln!(out, "{}  ({}, PMU {})", description.metric, description.model, description.pmu)?;
    if !description.brief.is_empty() {
        writeln!(out, "  {}", description.brief)?;
    }
    if !description.public.is_empty() && description.public != description.brief {
        writeln!(out, "  {}", description.public)?;
    }
    if !description.groups.is_empty() {
        writeln!(out, "  groups: {}", description.groups.join(", "))?;
    }
    if let Some(unit) = &description.scale_unit {
        writeln!(out, "  ScaleUnit: {unit}")?;
    }
    if let Some(constraint) = &description.constraint {
        writeln!(out, "  MetricConstraint: {constraint}")?;
    }
    writeln!(out, "  formula: {}", description.expr)?;
    if let Some(threshold) = &description.threshold {
        writeln!(out, "  threshold: {threshold}")?;
    }
    writeln!(out, "  tree:")?;
    print_tree(out, &description.tree, 2)?;
    writeln!(out, "  needed events, SMT on: {}", description.needed_smt_on.join(", "))?;
    if description.needed_smt_off != description.needed_smt_on {
        writeln!(out, "  needed events, SMT off: {}", description.needed_smt_off.join(", "))?;
    } else {
        writeln!(out, "  needed events, SMT off: the same")?;
    }
    if !description.also_defined_in.is_empty() {
        let n = description.also_defined_in.len();
        let shown: Vec<&str> =
            description.also_defined_in.iter().take(6).map(String::as_str).collect();
        writeln!(
            out,
            "  also defined for: {}{}",
            shown.join(", "),
            if n > 6 { format!(" and {} more", n - 6) } else { String::new() }
        )?;
    }
    if let Some(sim) = description.simulated_on.first() {
        writeln!(
            out,
            "  counted on a simulated PMU: `tmetric --pmu-sim {sim} -M {} -a sleep 1`{}",
            description.metric,
            if description.simulated_on.len() > 1 {
                format!(" (also --pmu-sim {})", description.simulated_on[1..].join(", "))
            } else {
                String::new()
            }
        )?;
    }
    Ok(())
}

/// The model `describe` uses without `--model`: the common metrics' table when it defines
/// `metric` (perf looks there first), else this machine's model when it does, else the first
/// model that does; says which on standard error for a CPU model.
fn default_model(metric: &str, defining: &[&'static Model]) -> Option<&'static Model> {
    // perf's -M looks among the common metrics first; they apply to every machine.
    let common = tmetric_catalog::common();
    if let Some(common) = defining.iter().copied().find(|d| std::ptr::eq(*d, common)) {
        return Some(common);
    }
    let sysfs = tmetric_runtime::Sysfs::system();
    let here = crate::stat::host_model(None, &sysfs, std::path::Path::new("/proc")).ok();
    if let Some(here) = here
        && defining.iter().any(|d| std::ptr::eq(*d, here))
    {
        crate::out::warn(&format!(
            "describing {}'s `{metric}` (this machine's model; --model names another)",
            here.path()
        ));
        return Some(here);
    }
    let chosen = defining.first().copied()?;
    let here_text = match here {
        Some(here) => format!("this machine's model, {}, has no metric `{metric}`", here.path()),
        None => "this machine's model is not known".to_string(),
    };
    crate::out::warn(&format!(
        "{here_text}; describing {}'s, the first of {} models that define it (--model names another)",
        chosen.path(),
        defining.len()
    ));
    Some(chosen)
}
