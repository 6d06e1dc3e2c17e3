//! `tmetric plan`'s text and JSON over the engine's `OfflinePlan`: the PMUs assumed, the groups
//! with their counters, per metric together / multiplexed / impossible and why, the time
//! slices next to perf 6.12's strategy and the lower bound, and what a machine cannot count.

use std::io::{self, Write};

use tmetric_engine::PmuModel;
use tmetric_engine::plan::OfflinePlan;
use tmetric_engine::schedule::{Opened, Placement, Request, Schedule, Slot};

/// Per root metric, the inputs the machine cannot count, each with the reason.
pub type Missing = [Vec<(String, String)>];

/// A simulated machine that can count what this one cannot: its `--pmu-sim NAME` flag and
/// the model whose metrics it counts.
pub type Simulated = Option<(String, String)>;

/// Per PMU whose groups take turns: the events every group counts (the anchor the estimate
/// of a group's missed turns regresses on, and copies on free counters), said in a line.
fn every_turn(plan: &OfflinePlan) -> Vec<String> {
    let schedule = &plan.tmetric;
    let mut lines = Vec::new();
    for (p, pmu) in plan.pmus.pmus.iter().enumerate() {
        let groups: Vec<&tmetric_engine::Group> =
            schedule.groups.iter().filter(|g| g.pmu == Some(p)).collect();
        if groups.len() < 2 {
            continue;
        }
        let common: Vec<&str> = groups[0]
            .events
            .iter()
            .filter(|e| groups.iter().all(|g| g.events.contains(e)))
            .map(|&e| plan.request.events[e].name.as_str())
            .collect();
        if common.is_empty() {
            continue;
        }
        // What `stat` regresses on: the PMU's anchor, where its groups count it.
        let anchored = tmetric_engine::plan::anchors_of(pmu)
            .iter()
            .find(|a| common.iter().any(|n| tmetric_engine::plan::names_anchor(n, a)))
            .and_then(|a| tmetric_engine::plan::anchor_named(a));
        let regressed = match anchored {
            Some(tmetric_engine::Anchor::Instructions) => {
                "tmetric's own rotation estimates the turns a group misses by regression on the retired instructions; "
            }
            Some(tmetric_engine::Anchor::Cycles) => {
                "tmetric's own rotation estimates the turns a group misses by regression on the cycles; "
            }
            None => "",
        };
        lines.push(format!(
            "counted in every turn of {}: {} ({regressed}an event counted in every turn is exact)",
            pmu.name,
            common.join(", ")
        ));
    }
    lines
}

/// The plan as one pretty-printed JSON document.
pub fn json(
    out: &mut dyn Write,
    model: &str,
    plan: &OfflinePlan,
    machine: &str,
    missing: &Missing,
    simulated: &Simulated,
) -> io::Result<()> {
    let doc = serde_json::json!({
        "model": model,
        "machine": machine,
        "pmus": plan.pmus,
        "events": plan.request.events,
        "metrics": plan.request.metrics,
        "ungrouped_why": plan.ungrouped_why,
        "schedule": plan.tmetric,
        "perf_schedule": plan.perf,
        "slices": { "tmetric": plan.tmetric.slices(), "perf": plan.perf.slices(), "lower_bound": plan.lower(), "together_lower_bound": plan.together_bound.iter().max() },
        "metrics_together": { "tmetric": plan.together().0, "perf": plan.together().1 },
        "missing": missing.iter().map(|m| m.iter().map(|(event, why)| serde_json::json!({"event": event, "why": why})).collect::<Vec<_>>()).collect::<Vec<_>>(),
        "simulated": simulated.as_ref().map(|(flag, on)| serde_json::json!({"flag": flag, "model": on})),
    });
    writeln!(out, "{}", serde_json::to_string_pretty(&doc)?)
}

/// The plan as text, for `-M items` on `machine`; when some input cannot be counted, why, and
/// the simulated machine that can count it (`simulated`).
pub fn text(
    out: &mut dyn Write,
    plan: &OfflinePlan,
    machine: &str,
    items: &[String],
    missing: &Missing,
    simulated: &Simulated,
) -> io::Result<()> {
    let request: &Request = &plan.request;
    let pmus = &plan.pmus;
    writeln!(out, "# plan for -M {} on {machine}", items.join(","))?;
    for pmu in &pmus.pmus {
        let mut line = format!(
            "# PMU {}: {} general + {} fixed counters ({})",
            pmu.name, pmu.general, pmu.fixed, pmu.source
        );
        if pmu.metric_events > 0 {
            line.push_str(&format!(", {} topdown metric events", pmu.metric_events));
        }
        if pmu.cycle_counter {
            line.push_str(", cycle counter");
        }
        writeln!(out, "{line}")?;
        for adjustment in &pmu.adjustments {
            writeln!(out, "#   {adjustment}")?;
        }
    }
    writeln!(out)?;
    schedule(out, request, pmus, &plan.tmetric)?;
    writeln!(out)?;
    writeln!(out, "metrics:")?;
    let width = request.metrics.iter().map(|m| m.name.len()).max().unwrap_or(0);
    for (i, metric) in request.metrics.iter().enumerate() {
        let text = match &plan.tmetric.placements[i] {
            Placement::Together { groups } => {
                let g: Vec<String> = groups.iter().map(|g| (g + 1).to_string()).collect();
                format!("together in group {}", g.join(" + "))
            }
            Placement::Spread { groups, why } => {
                let g: Vec<String> = groups.iter().map(|g| (g + 1).to_string()).collect();
                format!("multiplexed: spread over rotating groups {} ({why})", g.join(", "))
            }
            Placement::NoCounters => match missing.get(i).filter(|m| !m.is_empty()) {
                Some(inputs) => {
                    let names: Vec<&str> = inputs.iter().map(|(n, _)| n.as_str()).collect();
                    format!("cannot be counted here: needs {}", tmetric_text::names_summary(&names))
                }
                None => "no hardware counters needed".into(),
            },
            Placement::Impossible { why } => format!("impossible here: {why}"),
        };
        let ungrouped = plan.ungrouped_why[i].as_ref();
        let why = match (&plan.tmetric.placements[i], ungrouped) {
            // Not required to share a group, yet scheduled in one: say both without
            // contradicting "together".
            (Placement::Together { .. }, Some(w)) => {
                format!(", though not required to share it ({w})")
            }
            (_, Some(w)) => format!(" [not grouped: {w}]"),
            (_, None) => String::new(),
        };
        writeln!(out, "  {:<width$}  {text}{why}", metric.name)?;
    }
    writeln!(out)?;
    perf_lists(out, request, pmus, &plan.perf)?;
    let (ours, perfs) = plan.together();
    writeln!(
        out,
        "metrics counted together: tmetric {ours} of {}, perf 6.12 {perfs}",
        request.metrics.len()
    )?;
    writeln!(
        out,
        "time slices: tmetric {}, perf 6.12 {}, lower bound {} (keeping each metric whole: {})",
        plan.tmetric.slices(),
        plan.perf.slices(),
        plan.lower(),
        plan.together_bound.iter().max().copied().unwrap_or(0)
    )?;
    for line in every_turn(plan) {
        writeln!(out, "{line}")?;
    }
    if missing.iter().any(|m| !m.is_empty()) {
        let mut reasons: Vec<&str> = Vec::new();
        for (_, why) in missing.iter().flatten() {
            if !reasons.contains(&why.as_str()) {
                reasons.push(why);
            }
        }
        let advice = match simulated {
            Some((flag, on)) => {
                format!("a simulated {on} can: `tmetric plan -M {} {flag}`", items.join(","))
            }
            None => "no simulated machine's model defines them".to_string(),
        };
        writeln!(out, "\nthis machine cannot count them ({}); {advice}", reasons.join("; "))?;
    }
    Ok(())
}

fn slot_text(slot: Slot) -> String {
    match slot {
        Slot::General(n) => format!("gp{n}"),
        Slot::Fixed(n) => format!("fixed{n}"),
        Slot::Cycle => "cycle".into(),
        Slot::Metric => "metric".into(),
        Slot::None => "-".into(),
    }
}

fn schedule(
    out: &mut dyn Write,
    request: &Request,
    pmus: &PmuModel,
    schedule: &Schedule,
) -> io::Result<()> {
    for (g, group) in schedule.groups.iter().enumerate() {
        let pmu =
            group.pmu.map_or("software (no counters)".to_string(), |p| pmus.pmus[p].name.clone());
        let members: Vec<String> = group
            .events
            .iter()
            .zip(&group.slots)
            .map(|(&e, &s)| match group.pmu {
                Some(_) => format!("{} [{}]", request.events[e].name, slot_text(s)),
                None => request.events[e].name.clone(),
            })
            .collect();
        writeln!(out, "group {} on {pmu}: {}", g + 1, members.join(", "))?;
    }
    if !schedule.singles.is_empty() {
        let names: Vec<&str> =
            schedule.singles.iter().map(|&e| request.events[e].name.as_str()).collect();
        writeln!(out, "alone: {}", names.join(", "))?;
    }
    Ok(())
}

/// perf 6.12's strategy on the same selection: the event lists it parses (`perf stat -vv`
/// prints each as `Parsing metric events '...'`) and what it opens, in the order the kernel
/// rotates it.
fn perf_lists(
    out: &mut dyn Write,
    request: &Request,
    pmus: &PmuModel,
    perf: &Schedule,
) -> io::Result<()> {
    if perf.perf_lists.is_empty() {
        return Ok(());
    }
    writeln!(out, "perf 6.12 on the same selection parses (perf stat -vv):")?;
    for list in &perf.perf_lists {
        let broken = if list.reopened {
            " [weak group did not fit: reopened alone after the rest, topdown events behind slots]"
        } else {
            ""
        };
        writeln!(out, "  '{}' for {}{broken}", list.text, list.metrics.join(", "))?;
    }
    if perf.open.is_empty() {
        writeln!(out, "and opens no hardware counter")?;
        return writeln!(out);
    }
    writeln!(out, "and opens, in the kernel's rotation order:")?;
    for (u, unit) in perf.open.iter().enumerate() {
        let (pmu, members) = match *unit {
            Opened::Group(g) => {
                let group = &perf.groups[g];
                let members: Vec<String> = group
                    .events
                    .iter()
                    .zip(&group.slots)
                    .map(|(&e, &s)| format!("{} [{}]", request.events[e].name, slot_text(s)))
                    .collect();
                (group.pmu, format!("group: {}", members.join(", ")))
            }
            Opened::Single(e) => {
                (request.events[e].pmu, format!("alone: {}", request.events[e].name))
            }
        };
        let pmu = pmu.map_or("software", |p| pmus.pmus[p].name.as_str());
        writeln!(out, "  {}. on {pmu}, {members}", u + 1)?;
    }
    writeln!(out)
}
