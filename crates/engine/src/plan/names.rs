//! A root metric's name as every view and note prints it: with its PMU where a hybrid
//! machine's two core types define a metric of that name.

use tmetric_model::Model;
use tmetric_model::catalog::Str;

use super::Plan;

/// Whether another root has `root`'s metric name on another PMU (a hybrid machine's two
/// core types).
pub(crate) fn twice(plan: &Plan, root: usize) -> bool {
    let r = &plan.roots[root];
    let m = r.model.metric(r.metric);
    // Every note of a metric asks, for every target and interval: one model's string ids are
    // compared before its strings, and the PMUs before the names, since off hybrid machines
    // every root has the same PMU.
    let same = |a: &'static Model, x: Str, y: Str| {
        (x == y && std::ptr::eq(a, r.model)) || a.str(x) == r.model.str(y)
    };
    plan.roots.iter().any(|o| {
        let n = o.model.metric(o.metric);
        !same(o.model, n.pmu, m.pmu) && same(o.model, n.name, m.name)
    })
}

/// A root's metric name as every view prints it: with its PMU (`tma_retiring (cpu_core)`)
/// where another core type has a metric of the same name.
pub fn metric_name(plan: &Plan, root: usize) -> String {
    let r = &plan.roots[root];
    let m = r.model.metric(r.metric);
    let name = r.model.str(m.name);
    if twice(plan, root) { format!("{name} ({})", r.model.str(m.pmu)) } else { name.to_string() }
}

/// Whether any two roots of `plan` share a metric name on different PMUs.
pub fn has_hybrid_twins(plan: &Plan) -> bool {
    (0..plan.roots.len()).any(|r| twice(plan, r))
}
