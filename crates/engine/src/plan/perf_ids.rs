//! The identifiers perf 6.12 collects for a root metric, in the order it keeps them: its
//! `MetricThreshold` (or `MetricExpr`) through `expr__find_ids`, then each referenced metric's
//! expression joined into the root's set as `resolve_metric` finds them
//! (tools/perf/util/metricgroup.c `__add_metric`, `resolve_metric`), all in perf's own
//! hashmap ([`PerfIds`]). That order is the order of the events in the groups perf builds
//! (`metricgroup__build_event_string`), so the perf baseline needs it to be perf.

use std::collections::HashMap;

use tmetric_catalog::Model;
use tmetric_expr::{Facts, Ident, Literal, PerfIds};
use tmetric_model::Literal as Lit;

/// Why perf could not collect a metric's identifiers (it then refuses the whole `-M`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Broken(pub String);

struct MachineFacts<'a> {
    literals: &'a [f64; Lit::COUNT],
    probes: &'a [f64],
    slots: &'a HashMap<&'static str, usize>,
}

impl Facts for MachineFacts<'_> {
    fn literal(&self, literal: Literal) -> Option<f64> {
        Some(self.literals[literal.index()])
    }

    fn has_event(&self, id: &Ident) -> bool {
        self.slots.get(id.name.as_str()).is_some_and(|&s| self.probes.get(s) == Some(&1.0))
    }

    fn cpuid_match(&self, id: &Ident) -> f64 {
        self.slots.get(id.name.as_str()).and_then(|&s| self.probes.get(s)).copied().unwrap_or(0.0)
    }
}

/// A model's identifiers by their normalised text, and its metrics by PMU and lower-case
/// name (`metricgroup__find_metric`: same PMU, names compared ignoring case).
pub(crate) struct Names {
    slots: HashMap<&'static str, usize>,
    metrics: HashMap<(&'static str, String), usize>,
}

impl Names {
    pub(crate) fn of(model: &'static Model) -> Names {
        let slots = model.ids.iter().enumerate().map(|(s, id)| (model.str(id.text), s)).collect();
        let mut metrics = HashMap::new();
        for (m, desc) in model.metrics().enumerate() {
            metrics
                .entry((model.str(desc.pmu), model.str(desc.name).to_ascii_lowercase()))
                .or_insert(m);
        }
        Names { slots, metrics }
    }

    /// The input slot an identifier names.
    pub(crate) fn slot(&self, key: &str) -> Option<usize> {
        self.slots.get(key).copied()
    }
}

/// perf's identifiers of root `metric` in its hashmap order; `thresholds` as perf's default
/// (off with `--metric-no-threshold`, which makes the root's expression its own name).
pub(crate) fn perf_ids(
    model: &'static Model,
    names: &Names,
    metric: usize,
    literals: &[f64; Lit::COUNT],
    probes: &[f64],
    thresholds: bool,
) -> Result<PerfIds<String>, Broken> {
    let facts = MachineFacts { literals, probes, slots: &names.slots };
    let mut ctx: PerfIds<String> = PerfIds::new();
    let mut refs: Vec<usize> = Vec::new();
    add(model, names, &facts, metric, true, thresholds, &mut ctx, &mut refs, &mut Vec::new())?;
    Ok(ctx)
}

/// `__add_metric` for `metric` (the root when `root`): its expression's identifiers joined
/// into `ctx`, then `resolve_metric`.
#[allow(clippy::too_many_arguments)]
fn add(
    model: &'static Model,
    names: &Names,
    facts: &MachineFacts<'_>,
    metric: usize,
    root: bool,
    thresholds: bool,
    ctx: &mut PerfIds<String>,
    refs: &mut Vec<usize>,
    visited: &mut Vec<usize>,
) -> Result<(), Broken> {
    let desc = model.metric(metric);
    let name = model.str(desc.name);
    if visited.contains(&metric) {
        return Err(Broken(format!("recursion detected for {name}")));
    }
    if !root {
        if refs.contains(&metric) {
            return Ok(());
        }
        refs.push(metric);
    }
    let threshold = model.str(desc.threshold_expr);
    let text = if root && !threshold.is_empty() {
        if thresholds { threshold } else { name }
    } else {
        model.str(desc.expr)
    };
    let expr = tmetric_expr::parse(text).map_err(|e| Broken(format!("{name}: {e}")))?;
    let found = tmetric_expr::needed_in::<PerfIds<&str>>(&expr, facts)
        .map_err(|e| Broken(format!("{name}: {e}")))?;
    // The `start` rule: `ctx->ids = ids__union($1.ids, ctx->ids)`.
    let mine = found.ids.map_keys(str::to_string);
    *ctx = mine.join(std::mem::take(ctx));
    // `resolve_metric`: the identifiers that name a metric of the same PMU, in the set's
    // order, taken out, then added one by one (each walks the whole set again).
    let pmu = model.str(desc.pmu);
    let pending: Vec<(String, usize)> = ctx
        .iter()
        .filter_map(|k| names.metrics.get(&(pmu, k.to_ascii_lowercase())).map(|&m| (k.clone(), m)))
        .collect();
    for (key, _) in &pending {
        ctx.remove(key);
    }
    // A threshold names its own metric; perf renames the root's visit so that is no loop.
    let me = if root && !threshold.is_empty() { None } else { Some(metric) };
    visited.extend(me);
    for (_, m) in pending {
        add(model, names, facts, m, false, thresholds, ctx, refs, visited)?;
    }
    if me.is_some() {
        visited.pop();
    }
    Ok(())
}
