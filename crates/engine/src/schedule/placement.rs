//! From packed groups to a [`Schedule`]: each group's members in the kernel's order with
//! their counters, the group of counterless events, the time slices per PMU and each
//! metric's placement (together, spread and why).

use super::bound::counting_bound;
use super::{Group, Placement, Request, SchedEvent, SchedMetric, Schedule, Slot, assign};
use crate::pmu::PmuModel;

/// Orders a group as the kernel requires: `slots` first, then topdown metric events, then
/// the rest in the given order.
fn leader_order(all: &[SchedEvent], events: &mut [usize]) {
    let rank = |e: &usize| {
        let d = &all[*e].demand;
        if d.slots {
            0
        } else if d.topdown_metric {
            1
        } else {
            2
        }
    };
    events.sort_by_key(rank);
}

/// Builds the [`Schedule`]: orders members, assigns counters, adds the counterless group and
/// decides each metric's placement.
pub(super) fn finish(
    request: &Request,
    model: &PmuModel,
    hw: Vec<(usize, Vec<usize>)>,
    singles: Vec<usize>,
    mut placements: Vec<Option<Placement>>,
    split: &[bool],
    perf_rules: bool,
) -> Schedule {
    let all = &request.events;
    let mut groups: Vec<Group> = hw
        .into_iter()
        .map(|(pmu, mut events)| {
            leader_order(all, &mut events);
            let slots = assign(&model.pmus[pmu], all, &events, perf_rules)
                .or_else(|| assign(&model.pmus[pmu], all, &events, true))
                .unwrap_or_else(|| vec![Slot::None; events.len()]);
            Group { pmu: Some(pmu), events, slots }
        })
        .collect();
    let mut counterless: Vec<usize> = Vec::new();
    for metric in &request.metrics {
        for &e in metric.events.iter().chain(&metric.threshold_events) {
            if all[e].pmu.is_none() && !counterless.contains(&e) {
                counterless.push(e);
            }
        }
    }
    if !counterless.is_empty() {
        let n = counterless.len();
        groups.push(Group { pmu: None, events: counterless, slots: vec![Slot::None; n] });
    }
    let mut slices_per_pmu = vec![0usize; model.pmus.len()];
    for g in &groups {
        if let Some(p) = g.pmu {
            slices_per_pmu[p] += 1;
        }
    }
    // Single events rotate as the kernel fits them: at best as tightly as the counters allow.
    if !singles.is_empty() {
        let alone = Request {
            events: all.to_vec(),
            metrics: vec![SchedMetric {
                name: String::new(),
                events: singles.clone(),
                threshold_events: Vec::new(),
                grouped: false,
                pack: false,
                perf: Default::default(),
            }],
            perf: Default::default(),
        };
        for (p, extra) in counting_bound(&alone, model).into_iter().enumerate() {
            slices_per_pmu[p] += extra;
        }
    }
    for (m, metric) in request.metrics.iter().enumerate() {
        if placements[m].is_some() {
            continue;
        }
        let mut pmus: Vec<usize> = metric.events.iter().filter_map(|&e| all[e].pmu).collect();
        pmus.sort_unstable();
        pmus.dedup();
        let mut together = Vec::new();
        for &p in &pmus {
            let needed: Vec<usize> =
                metric.events.iter().copied().filter(|&e| all[e].pmu == Some(p)).collect();
            if let Some(g) = groups
                .iter()
                .position(|g| g.pmu == Some(p) && needed.iter().all(|e| g.events.contains(e)))
            {
                together.push(g);
            }
        }
        let rotating =
            |gs: &[usize]| gs.iter().any(|&g| slices_per_pmu[groups[g].pmu.unwrap_or(0)] > 1);
        placements[m] = Some(if together.len() == pmus.len() {
            Placement::Together { groups: together }
        } else {
            let mut gs: Vec<usize> = (0..groups.len())
                .filter(|&g| groups[g].events.iter().any(|e| metric.events.contains(e)))
                .collect();
            gs.dedup();
            let why = if split[m] {
                "its events do not fit one group".to_string()
            } else if !metric.grouped {
                "not grouped (MetricConstraint, MetricgroupNoGroup or --metric-no-group)"
                    .to_string()
            } else {
                "its events are counted alone".to_string()
            };
            if rotating(&gs) || singles.iter().any(|e| metric.events.contains(e)) {
                Placement::Spread { groups: gs, why }
            } else {
                Placement::Together { groups: gs }
            }
        });
    }
    Schedule {
        groups,
        singles,
        placements: placements.into_iter().map(|p| p.expect("every metric placed")).collect(),
        slices_per_pmu,
        open: Vec::new(),
        reads: Vec::new(),
        perf_lists: Vec::new(),
        loose: false,
    }
}
