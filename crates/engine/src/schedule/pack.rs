//! tmetric's strategy: whole metrics packed first-fit by overlap under several orders, each
//! followed by a pass that empties groups into the others, then a bounded exact search for
//! fewer groups on PMUs still above their lower bound; loose events as fillers, and never
//! more time slices than perf's strategy.

use super::bound::counting_bound;
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
    let mut loose = tmetric_with(request, model, true);
    loose.loose = true;
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
    let mut groups = best_packing(model, all, &items);
    fewer_groups(model, all, &items, &counting_bound(request, model), &mut groups);
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

/// How many `fits` checks the exact search may make per PMU while planning a run: a few
/// milliseconds at most, however large the selection.
const SEARCH_BUDGET: usize = 5_000;

/// Where the heuristics left a PMU above its lower bound, searches exactly (depth first, within
/// [`SEARCH_BUDGET`]) for a packing into fewer groups, from the bound up, and takes the first
/// found. The heuristics are fast and usually optimal; the bound says when they may not be.
fn fewer_groups(
    model: &PmuModel,
    all: &[SchedEvent],
    items: &[(usize, Vec<usize>)],
    bounds: &[usize],
    groups: &mut Vec<(usize, Vec<usize>)>,
) {
    for (p, &bound) in bounds.iter().enumerate() {
        let found = groups.iter().filter(|(gp, _)| *gp == p).count();
        if found <= bound.max(1) {
            continue;
        }
        let mine: Vec<usize> = (0..items.len()).filter(|&i| items[i].0 == p).collect();
        let mut budget = SEARCH_BUDGET;
        for k in bound.max(1)..found {
            match pack_into(model, all, items, &mine, p, k, &mut budget) {
                Search::Packed(packed) => {
                    groups.retain(|(gp, _)| *gp != p);
                    groups.extend(packed.into_iter().map(|events| (p, events)));
                    break;
                }
                Search::Refuted => {}
                Search::Unknown => break,
            }
        }
    }
}

/// What the exact search found.
pub(super) enum Search {
    /// A packing into at most `k` groups: each group's events.
    Packed(Vec<Vec<usize>>),
    /// Every placement was tried: no packing into `k` groups exists.
    Refuted,
    /// The budget ran out first.
    Unknown,
}

/// Packs the items `mine` (all on PMU `p`) into at most `k` groups, exhaustively within
/// `budget`. Items whose events another item holds ride with that item: sharing its group
/// costs no counter, so some packing into `k` groups has them there if any has.
pub(super) fn pack_into(
    model: &PmuModel,
    all: &[SchedEvent],
    items: &[(usize, Vec<usize>)],
    mine: &[usize],
    p: usize,
    k: usize,
    budget: &mut usize,
) -> Search {
    let pmu = &model.pmus[p];
    let mut order: Vec<usize> = mine.to_vec();
    order.sort_by_key(|&i| (std::cmp::Reverse(items[i].1.len()), i));
    let mut leaders: Vec<usize> = Vec::new();
    for &i in &order {
        if !leaders.iter().any(|&l| items[i].1.iter().all(|e| items[l].1.contains(e))) {
            leaders.push(i);
        }
    }
    // Most constrained first among equals in size: they have the fewest places to go.
    let weight = |i: usize| -> u32 {
        items[i].1.iter().map(|&e| all[e].demand.weight(pmu)).min().unwrap_or(0)
    };
    leaders.sort_by_key(|&i| (std::cmp::Reverse(items[i].1.len()), weight(i), i));
    let mut search = Searcher::new(pmu, all, items, &leaders, k, budget);
    if search.place(0) {
        Search::Packed(search.groups)
    } else if *search.budget == 0 {
        Search::Unknown
    } else {
        Search::Refuted
    }
}

/// The depth-first search of [`pack_into`].
struct Searcher<'a> {
    pmu: &'a crate::pmu::PmuCounters,
    all: &'a [SchedEvent],
    items: &'a [(usize, Vec<usize>)],
    leaders: &'a [usize],
    k: usize,
    groups: Vec<Vec<usize>>,
    /// Per event: how many groups hold it.
    covered: Vec<u32>,
    /// Per position in `leaders`: the counted events of the leaders from there on.
    suffix: Vec<Vec<usize>>,
    budget: &'a mut usize,
}

impl<'a> Searcher<'a> {
    fn new(
        pmu: &'a crate::pmu::PmuCounters,
        all: &'a [SchedEvent],
        items: &'a [(usize, Vec<usize>)],
        leaders: &'a [usize],
        k: usize,
        budget: &'a mut usize,
    ) -> Searcher<'a> {
        let mut suffix = vec![Vec::new(); leaders.len() + 1];
        for at in (0..leaders.len()).rev() {
            let mut events = suffix[at + 1].clone();
            for &e in &items[leaders[at]].1 {
                if !all[e].demand.topdown_metric && !events.contains(&e) {
                    events.push(e);
                }
            }
            suffix[at] = events;
        }
        Searcher {
            pmu,
            all,
            items,
            leaders,
            k,
            groups: Vec::new(),
            covered: vec![0; all.len()],
            suffix,
            budget,
        }
    }

    /// Whether an event can only take a general counter.
    fn general_only(&self, e: usize) -> bool {
        let d = &self.all[e].demand;
        d.fixed & !self.pmu.fixed_reserved == 0 && !(d.cycle_counter && self.pmu.cycle_counter)
    }

    /// Whether the events no group holds yet could still find counters: each needs one in
    /// some group, and those that only general counters count need a general one.
    fn room_left(&self, next: usize) -> bool {
        let (cap, general) = (self.pmu.capacity(), self.pmu.general as usize);
        let (mut need, mut need_general) = (0, 0);
        for &e in &self.suffix[next] {
            if self.covered[e] == 0 {
                need += 1;
                need_general += usize::from(self.general_only(e));
            }
        }
        if need == 0 {
            return true;
        }
        let empty = self.k - self.groups.len();
        let (mut free, mut free_general) = (empty * cap, empty * general);
        for members in &self.groups {
            let counted = members.iter().filter(|&&e| !self.all[e].demand.topdown_metric);
            let (mut used, mut used_general) = (0, 0);
            for &e in counted {
                used += 1;
                used_general += usize::from(self.general_only(e));
            }
            free += cap.saturating_sub(used);
            free_general += general.saturating_sub(used_general);
        }
        need <= free && need_general <= free_general
    }

    fn add(&mut self, g: usize, from: usize) {
        for &e in &self.groups[g][from..] {
            self.covered[e] += 1;
        }
    }

    fn undo(&mut self, g: usize, to: usize) {
        for &e in &self.groups[g][to..] {
            self.covered[e] -= 1;
        }
        self.groups[g].truncate(to);
    }

    /// Places `leaders[next..]` into at most `k` groups.
    fn place(&mut self, next: usize) -> bool {
        let Some(&i) = self.leaders.get(next) else { return true };
        if !self.room_left(next) {
            return false;
        }
        let events = &self.items[i].1;
        // Existing groups, fewest new events first; then one new group (empty ones are alike).
        let mut tries: Vec<(usize, usize)> = self
            .groups
            .iter()
            .enumerate()
            .map(|(g, members)| (events.iter().filter(|e| !members.contains(e)).count(), g))
            .collect();
        tries.sort_unstable();
        for (new, g) in tries {
            if *self.budget == 0 {
                return false;
            }
            let before = self.groups[g].len();
            if new > 0 {
                merge(&mut self.groups[g], events);
                *self.budget -= 1;
                if !fits(self.pmu, self.all, &self.groups[g]) {
                    self.groups[g].truncate(before);
                    continue;
                }
                self.add(g, before);
            }
            if self.place(next + 1) {
                return true;
            }
            self.undo(g, before);
        }
        if self.groups.len() < self.k {
            self.groups.push(events.clone());
            let g = self.groups.len() - 1;
            self.add(g, 0);
            if self.place(next + 1) {
                return true;
            }
            self.undo(g, 0);
            self.groups.pop();
        }
        false
    }
}
