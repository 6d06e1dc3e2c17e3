//! A root metric's name as every view and note prints it: with its PMU where a hybrid
//! machine's two core types define a metric of that name.

use super::Plan;

/// Whether another root has `root`'s metric name on another PMU (a hybrid machine's two
/// core types).
pub(crate) fn twice(plan: &Plan, root: usize) -> bool {
    let r = &plan.roots[root];
    let name = r.model.str(r.model.metric(r.metric).name);
    let pmu = r.model.str(r.model.metric(r.metric).pmu);
    plan.roots.iter().any(|o| {
        let m = o.model.metric(o.metric);
        o.model.str(m.name) == name && o.model.str(m.pmu) != pmu
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
