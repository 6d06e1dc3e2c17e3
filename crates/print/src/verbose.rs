//! What `stat -v` says on standard error before counting: the counters assumed per PMU and
//! where the numbers came from, the groups the events were put in, and how each metric's
//! events were placed; and perf's `unit_width` for a plan's printed rows.

use tmetric_engine::{Placement, Plan, PmuModel};

/// Which perf vintage's vendor tables (models, events, formulas) are in use and whose output is
/// printed, one line: `stat -v`, `list models` and `describe` say it, as the default tables
/// (the newest stored) are not the perf whose output tmetric prints (6.12).
pub fn vendor_tables() -> String {
    let data = tmetric_catalog::vintage();
    let contract = tmetric_engine::contract::current().perf;
    let why = if tmetric_catalog::vintage_is_chosen() {
        ", chosen with --perf-version".to_string()
    } else if std::ptr::eq(data, tmetric_catalog::default_vintage()) {
        let base = tmetric_catalog::base_vintage().version;
        format!(", the newest stored (--perf-version {base} for perf {base}'s)")
    } else {
        String::new()
    };
    format!(
        "vendor tables: perf {}'s (Linux {}){why}; output as perf {contract} prints it",
        data.version, data.kernel
    )
}

/// `-v`: the counters tmetric assumed per PMU and where the numbers came from (sysfs
/// `caps/`, `counter.json`, or a documented vendor default for trees without one), a line each.
pub fn pmus(pmus: &PmuModel) -> Vec<String> {
    pmus.pmus
        .iter()
        .map(|pmu| {
            let adjustments: Vec<String> = pmu.adjustments.iter().map(|a| a.to_string()).collect();
            format!(
                "PMU {}: {} general + {} fixed counters ({}){}",
                pmu.name,
                pmu.general,
                pmu.fixed,
                pmu.source,
                if adjustments.is_empty() {
                    String::new()
                } else {
                    format!("; {}", adjustments.join("; "))
                }
            )
        })
        .collect()
}

/// `-v`: how the events were grouped, a line per group, then where each metric's events
/// landed, a line per metric.
pub fn plan(plan: &Plan) -> Vec<String> {
    let mut lines = Vec::new();
    for (g, group) in plan.groups().iter().enumerate() {
        let names: Vec<&str> = group.iter().map(|&s| plan.specs()[s].name.as_str()).collect();
        lines.push(format!("group {}: {{{}}}", g + 1, names.join(",")));
    }
    for root in plan.roots() {
        let name = root.model.str(root.model.metric(root.metric).name);
        let how = match &root.placement {
            Placement::Together { .. } => "its events count together".to_string(),
            Placement::Spread { why, .. } => format!("multiplexed: {why}"),
            Placement::NoCounters => "no hardware counters".to_string(),
            Placement::Impossible { why } => format!("cannot be counted: {why}"),
        };
        lines.push(format!("{name}: {how}"));
    }
    lines
}

/// perf's `unit_width`: the longest unit of a printed event, at least 4 (`unit`).
pub fn unit_width(plan: &Plan) -> usize {
    plan.rows().iter().filter(|r| r.show).map(|r| r.unit.chars().count()).max().unwrap_or(0).max(4)
}
