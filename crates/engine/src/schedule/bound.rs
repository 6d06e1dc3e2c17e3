//! Lower bounds on the time slices any schedule needs, per PMU: distinct events against the
//! counters each may use, and, for schedules that keep each packable metric whole, the
//! topdown groups and metrics that pairwise cannot share a group.

use std::collections::BTreeSet;

use super::counters::max_at_once;
use super::pack::{Search, merge, pack_into};
use super::{Request, SchedEvent, fits, parts_of, unplaceable};
use crate::pmu::PmuModel;

/// A lower bound on the time slices of any schedule of `request`'s events, per PMU: counts
/// of distinct events against the counters each may use.
pub(super) fn counting_bound(request: &Request, model: &PmuModel) -> Vec<usize> {
    let all = &request.events;
    let used = used_events(request);
    let mut bounds = vec![0usize; model.pmus.len()];
    for (p, pmu) in model.pmus.iter().enumerate() {
        let events: Vec<&SchedEvent> = used
            .iter()
            .map(|&e| &all[e])
            .filter(|ev| ev.pmu == Some(p) && unplaceable(model, ev).is_none())
            .collect();
        if events.is_empty() {
            continue;
        }
        let counted: Vec<&&SchedEvent> =
            events.iter().filter(|e| !e.demand.topdown_metric).collect();
        let mut bound = 1usize;
        bound = bound.max(counted.len().div_ceil(pmu.capacity().max(1)));
        // No slice counts more events than a maximum matching places at once.
        let indices: Vec<usize> = used
            .iter()
            .copied()
            .filter(|&e| {
                all[e].pmu == Some(p)
                    && !all[e].demand.topdown_metric
                    && unplaceable(model, &all[e]).is_none()
            })
            .collect();
        let at_once = max_at_once(pmu, all, &indices);
        if at_once > 0 {
            bound = bound.max(indices.len().div_ceil(at_once));
        }
        let general_only: Vec<&&&SchedEvent> = counted
            .iter()
            .filter(|e| {
                e.demand.fixed & !pmu.fixed_reserved == 0
                    && !(e.demand.cycle_counter && pmu.cycle_counter)
            })
            .collect();
        bound = bound.max(general_only.len().div_ceil((pmu.general as usize).max(1)));
        // Events confined to a subset of the general counters.
        let mut masks: Vec<u32> =
            general_only.iter().map(|e| e.demand.general & low(pmu.general)).collect();
        masks.sort_unstable();
        masks.dedup();
        for mask in masks {
            let within = general_only
                .iter()
                .filter(|e| (e.demand.general & low(pmu.general)) & !mask == 0)
                .count();
            bound = bound.max(within.div_ceil((mask.count_ones() as usize).max(1)));
        }
        // Events that only one fixed counter can count.
        for f in 0..pmu.fixed.min(8) {
            let only = counted
                .iter()
                .filter(|e| {
                    e.demand.general == 0 && !e.demand.cycle_counter && e.demand.fixed == 1 << f
                })
                .count();
            bound = bound.max(only);
        }
        let metrics = events.len() - counted.len();
        if pmu.metric_events > 0 {
            bound = bound.max(metrics.div_ceil(pmu.metric_events as usize));
        }
        bounds[p] = bound;
    }
    bounds
}

/// A lower bound on the time slices of any schedule of `request`'s events, per PMU: counts of
/// distinct events against the counters each may use.
pub fn lower_bound(request: &Request, model: &PmuModel) -> Vec<usize> {
    counting_bound(request, model)
}

/// A lower bound for schedules that keep each packable metric in one group, per PMU: at least
/// [`lower_bound`], and usually more.
pub fn together_lower_bound(request: &Request, model: &PmuModel) -> Vec<usize> {
    let mut bounds = counting_bound(request, model);
    for (p, bound) in bounds.iter_mut().enumerate() {
        if *bound > 0 {
            *bound = together_bound(request, model, p, *bound);
        }
    }
    bounds
}

/// Bounds that hold for schedules that keep each packable metric in one group (tmetric's
/// promise): groups with topdown metric events each need `slots`, which only fixed counter 3
/// counts, so they are distinct slices and must hold all those metrics' other events; and
/// metrics that pairwise cannot share a group need a group each (a greedy clique); then the
/// counts an exact search proves impossible.
fn together_bound(request: &Request, model: &PmuModel, p: usize, counting: usize) -> usize {
    let all = &request.events;
    let pmu = &model.pmus[p];
    let items: Vec<Vec<usize>> = parts_of(request)
        .into_iter()
        .filter(|part| part.pmu == p && part.pack)
        .map(|part| part.events)
        .filter(|events| {
            events.iter().all(|&e| unplaceable(model, &all[e]).is_none()) && fits(pmu, all, events)
        })
        .collect();
    let mut bound = counting;
    let topdown: BTreeSet<usize> = items
        .iter()
        .filter(|events| events.iter().any(|&e| all[e].demand.topdown_metric))
        .flatten()
        .copied()
        .filter(|&e| !all[e].demand.topdown_metric && !all[e].demand.slots)
        .collect();
    if !topdown.is_empty() || items.iter().any(|events| events.iter().any(|&e| all[e].demand.slots))
    {
        bound = bound.max(1).max(topdown.len().div_ceil(pmu.capacity().saturating_sub(1).max(1)));
    }
    let mut order: Vec<usize> = (0..items.len()).collect();
    order.sort_by_key(|&i| (std::cmp::Reverse(items[i].len()), i));
    let mut clique: Vec<usize> = Vec::new();
    for i in order.into_iter().take(200) {
        let apart = clique.iter().all(|&j| {
            let mut union = items[j].clone();
            merge(&mut union, &items[i]);
            !fits(pmu, all, &union)
        });
        if apart {
            clique.push(i);
        }
    }
    bound = bound.max(clique.len());
    refuted_bound(request, model, p, items, bound)
}

/// How many `fits` checks [`refuted_bound`] may make per PMU (a planning report's cost, not a
/// run's).
const REFUTE_BUDGET: usize = 200_000;

/// Raises `bound` past every group count the exact search proves impossible for whole
/// metrics: the packable metrics as items, and every other event of the PMU alone (each
/// event needs a counter in some group; a topdown metric event brings `slots`, which it needs
/// beside it). Stops at the first count it packs into, or cannot settle within the budget.
fn refuted_bound(
    request: &Request,
    model: &PmuModel,
    p: usize,
    mut items: Vec<Vec<usize>>,
    mut bound: usize,
) -> usize {
    let all = &request.events;
    let slots = (0..all.len()).find(|&s| all[s].demand.slots && all[s].pmu == Some(p));
    let used = used_events(request);
    for e in used {
        if all[e].pmu != Some(p)
            || unplaceable(model, &all[e]).is_some()
            || items.iter().any(|item| item.contains(&e))
        {
            continue;
        }
        match (all[e].demand.topdown_metric, slots) {
            (true, Some(s)) => items.push(vec![s, e]),
            (true, None) => return bound,
            (false, _) => items.push(vec![e]),
        }
    }
    let owned: Vec<(usize, Vec<usize>)> = items.into_iter().map(|events| (p, events)).collect();
    let mine: Vec<usize> = (0..owned.len()).collect();
    let mut budget = REFUTE_BUDGET;
    while bound > 0 && bound < owned.len() {
        match pack_into(model, all, &owned, &mine, p, bound, &mut budget) {
            Search::Refuted => bound += 1,
            Search::Packed(_) | Search::Unknown => break,
        }
    }
    bound
}

/// Every event the request's metrics read, in their values or their thresholds.
fn used_events(request: &Request) -> BTreeSet<usize> {
    let mut used = BTreeSet::new();
    for metric in &request.metrics {
        used.extend(metric.events.iter().copied());
        used.extend(metric.threshold_events.iter().copied());
    }
    used
}

fn low(n: u8) -> u32 {
    if n >= 32 { u32::MAX } else { (1u32 << n) - 1 }
}
