//! tmetric's strategy: whole metrics packed first-fit by overlap under several orders, each
//! followed by a pass that empties groups into the others, loose events as fillers, and never
//! more time slices than perf's strategy.

use super::perf::perf;
use super::placement::finish;
use super::{Placement, Request, SchedEvent, Schedule, early_placements, fits, parts_of};
use crate::pmu::PmuModel;

pub(super) fn tmetric(request: &Request, model: &PmuModel) -> Schedule {
    let packed = tmetric_with(request, model, false);
    // Keeping each metric whole makes its ratios exact under multiplexing, which is worth a
    // slice or two; but never more slices than perf's strategy needs. Then every event is a
    // filler instead (the placements say which metrics are no longer together).
    let perf_slices = perf(request, model).slices();
    if packed.slices() <= perf_slices {
        return packed;
    }
    let loose = tmetric_with(request, model, true);
    if loose.slices() < packed.slices() { loose } else { packed }
}

fn tmetric_with(request: &Request, model: &PmuModel, all_loose: bool) -> Schedule {
    let all = &request.events;
    let placements = early_placements(request, model);
    // Items to pack: grouped parts whole (or in chunks when they cannot fit one group).
    let mut items: Vec<(usize, Vec<usize>)> = Vec::new();
    let mut loose: Vec<(usize, usize)> = Vec::new();
    let mut split: Vec<bool> = vec![false; request.metrics.len()];
    for (m, metric) in request.metrics.iter().enumerate() {
        // A metric whose value needs no counter here (`0 if not #has_pmem`) still colours by
        // its threshold, whose events must be placed like any other: left out of every group,
        // a topdown event would be opened without its `slots` leader, which the kernel refuses.
        if !matches!(placements[m], Some(Placement::Impossible { .. })) {
            loose
                .extend(metric.threshold_events.iter().filter_map(|&e| all[e].pmu.map(|p| (p, e))));
        }
    }
    for part in parts_of(request) {
        if placements[part.metric].is_some() {
            continue;
        }
        let pmu = &model.pmus[part.pmu];
        if !part.pack || all_loose {
            loose.extend(part.events.iter().map(|&e| (part.pmu, e)));
        } else if fits(pmu, all, &part.events) {
            items.push((part.pmu, part.events));
        } else {
            // Spread anyway: its events fill free counters like an ungrouped metric's.
            split[part.metric] = true;
            loose.extend(part.events.iter().map(|&e| (part.pmu, e)));
        }
    }
    // Loose events become one-event items (a topdown metric event brings `slots`, which must
    // lead its group), packed after the whole metrics so they fill free counters, and moved by
    // the same improvement pass.
    loose.sort_unstable();
    loose.dedup();
    loose.sort_by_key(|&(pmu, e)| {
        let d = &all[e].demand;
        (pmu, d.weight(&model.pmus[pmu]), e)
    });
    let whole = items.len();
    for (pmu, e) in loose {
        if items[..whole].iter().any(|(p, events)| *p == pmu && events.contains(&e)) {
            continue;
        }
        let item = if all[e].demand.topdown_metric {
            match (0..all.len()).find(|&s| all[s].demand.slots && all[s].pmu == Some(pmu)) {
                Some(s) => vec![s, e],
                None => vec![e],
            }
        } else {
            vec![e]
        };
        items.push((pmu, item));
    }
    let groups = best_packing(model, all, &items);
    finish(request, model, groups, Vec::new(), placements, &split, false)
}

/// A group being packed: its PMU, its events and the items placed in it.
type Packed = (usize, Vec<usize>, Vec<usize>);

/// Packs items (event sets that must share a group) into as few groups per PMU as the
/// heuristics find: several deterministic orders, each followed by a pass that tries to empty
/// groups into the others; the first best wins.
fn best_packing(
    model: &PmuModel,
    all: &[SchedEvent],
    items: &[(usize, Vec<usize>)],
) -> Vec<(usize, Vec<usize>)> {
    let weight = |events: &Vec<usize>, pmu: usize| -> u32 {
        events.iter().map(|&e| all[e].demand.weight(&model.pmus[pmu])).min().unwrap_or(0)
    };
    let mut orders: Vec<Vec<usize>> = Vec::new();
    let mut by_size: Vec<usize> = (0..items.len()).collect();
    by_size.sort_by_key(|&i| (std::cmp::Reverse(items[i].1.len()), i));
    orders.push(by_size.clone());
    let mut by_constraint: Vec<usize> = (0..items.len()).collect();
    by_constraint.sort_by_key(|&i| {
        (weight(&items[i].1, items[i].0), std::cmp::Reverse(items[i].1.len()), i)
    });
    orders.push(by_constraint);
    let mut by_size_rev_ties: Vec<usize> = (0..items.len()).collect();
    by_size_rev_ties.sort_by_key(|&i| (std::cmp::Reverse(items[i].1.len()), std::cmp::Reverse(i)));
    orders.push(by_size_rev_ties);
    orders.push((0..items.len()).collect());
    let mut best: Option<Vec<Packed>> = None;
    for order in orders {
        let mut groups = first_fit(model, all, items, &order);
        improve(model, all, items, &mut groups);
        if best.as_ref().is_none_or(|b| groups.len() < b.len()) {
            best = Some(groups);
        }
    }
    best.unwrap_or_default().into_iter().map(|(p, events, _)| (p, events)).collect()
}

/// Places each item, in `order`, into the group of its PMU that it overlaps most and still
/// fits, or a new group. Groups are (PMU, events, items).
fn first_fit(
    model: &PmuModel,
    all: &[SchedEvent],
    items: &[(usize, Vec<usize>)],
    order: &[usize],
) -> Vec<Packed> {
    let mut groups: Vec<Packed> = Vec::new();
    for &i in order {
        let (pmu, events) = &items[i];
        match best_group(model, all, &groups, *pmu, events, None) {
            Some(g) => {
                merge(&mut groups[g].1, events);
                groups[g].2.push(i);
            }
            None => groups.push((*pmu, events.clone(), vec![i])),
        }
    }
    groups
}

pub(super) fn merge(into: &mut Vec<usize>, events: &[usize]) {
    for &e in events {
        if !into.contains(&e) {
            into.push(e);
        }
    }
}

/// The group (other than `skip`) on `pmu` where `events` fit with the fewest new events.
fn best_group(
    model: &PmuModel,
    all: &[SchedEvent],
    groups: &[Packed],
    pmu: usize,
    events: &[usize],
    skip: Option<usize>,
) -> Option<usize> {
    let mut best: Option<(usize, usize)> = None;
    for (g, (gp, members, _)) in groups.iter().enumerate() {
        if *gp != pmu || Some(g) == skip {
            continue;
        }
        let new: Vec<usize> = events.iter().copied().filter(|e| !members.contains(e)).collect();
        if best.is_some_and(|(_, n)| n <= new.len()) {
            continue;
        }
        let mut union = members.clone();
        union.extend(&new);
        if fits(&model.pmus[pmu], all, &union) {
            best = Some((g, new.len()));
            if new.is_empty() {
                break;
            }
        }
    }
    best.map(|(g, _)| g)
}

/// Tries to empty each group, smallest first, by moving its items into other groups.
fn improve(
    model: &PmuModel,
    all: &[SchedEvent],
    items: &[(usize, Vec<usize>)],
    groups: &mut Vec<Packed>,
) {
    let mut changed = true;
    while changed {
        changed = false;
        let mut order: Vec<usize> = (0..groups.len()).collect();
        order.sort_by_key(|&g| (groups[g].1.len(), g));
        for g in order {
            let mut trial = groups.clone();
            let moved: Vec<usize> = std::mem::take(&mut trial[g].2);
            trial[g].1.clear();
            let mut ok = true;
            for &i in &moved {
                let (pmu, events) = &items[i];
                match best_group(model, all, &trial, *pmu, events, Some(g)) {
                    Some(t) => {
                        merge(&mut trial[t].1, events);
                        trial[t].2.push(i);
                    }
                    None => {
                        ok = false;
                        break;
                    }
                }
            }
            if ok {
                trial.remove(g);
                *groups = trial;
                changed = true;
                break;
            }
        }
    }
}
