//! A JSON metric's cell as every view prints it: its name (with its PMU where a hybrid
//! machine's two core types share it), number format, threshold colour and error bar.

use super::{Cell, CellSource, Colour, Fmt, ViewContext};
use crate::plan::Plan;
use crate::plan::twice;
pub use crate::plan::{has_hybrid_twins, metric_name};
use crate::plan_eval::RootResult;
use crate::uncertainty::Bar;

/// Root `root`'s error bar as [`Cell::error`] holds it: in the printed unit (`ScaleUnit`
/// applied), NaN when unknown, `None` when exact or not asked for.
pub(super) fn cell_error(plan: &Plan, root: usize, ctx: &ViewContext<'_>) -> Option<f64> {
    let r = &plan.roots[root];
    match ctx.bars?.get(root)? {
        Bar::Exact => None,
        Bar::Unknown => Some(f64::NAN),
        bar @ Bar::Sigma(_) => bar.half_width().map(|h| h * r.model.metric(r.metric).scale),
    }
}

/// A JSON metric's cell (`generic_metric`): `%8.1f` and `unit  name` with a `ScaleUnit`,
/// else `%8.2f` and the name; red when its threshold is crossed, green when not. With
/// `hybrid` (the plan has a metric of this name on both core types), the name carries its
/// PMU (`tma_retiring (cpu_core)`), so two columns or lines are never named alike.
pub fn metric_cell(plan: &Plan, root: usize, result: &RootResult, hybrid: bool) -> Cell {
    let r = &plan.roots[root];
    let (model, m) = (r.model, r.metric);
    let metric = model.metric(m);
    let mut name = model.str(metric.name).to_string();
    if hybrid && twice(plan, root) {
        name = format!("{name} ({})", model.str(metric.pmu));
    }
    let unit =
        if metric.has_scale_unit { model.str(metric.unit).to_string() } else { String::new() };
    let colour = match result.threshold {
        Some(true) => Some(Colour::Red),
        Some(false) => Some(Colour::Green),
        None => None,
    };
    let (fmt, label) = if metric.has_scale_unit {
        (Fmt::SCALED, format!("{unit}  {name}"))
    } else {
        (Fmt::PLAIN, name.clone())
    };
    let source = Some(CellSource { name, unit, root: Some(root) });
    if result.failure.is_some() && !result.value.is_nan() {
        return Cell {
            value: 0.0,
            fmt: None,
            label: Some(String::new()),
            colour,
            source,
            error: None,
            impossible: false,
        };
    }
    Cell {
        value: result.scaled(model, m),
        fmt: Some(fmt),
        label: Some(label),
        colour,
        source,
        error: None,
        impossible: false,
    }
}
