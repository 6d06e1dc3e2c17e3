//! The scheduler: a pure, deterministic function from metrics (each a set of events with the
//! counters they may use) and a PMU model to perf_event groups, plus perf 6.12's own strategy
//! as a baseline and a lower bound on the time slices any schedule needs.
//!
//! A *time slice* is one group of a PMU that must take its turn on the counters: with N
//! groups on a PMU the kernel rotates them and each counts about 1/N of the time. Fewer slices
//! mean less multiplexing error; a metric whose events share one group is exact whatever the
//! rotation, because its ratio is taken over the same time.

use std::collections::BTreeSet;

use crate::pmu::{Demand, PmuCounters, PmuModel};

/// One distinct event to count.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct SchedEvent {
    /// The printed name.
    pub name: String,
    /// Index into [`PmuModel::pmus`]; `None` for events that take no hardware counter
    /// (software, tracepoints, `msr`, tool events).
    pub pmu: Option<usize>,
    /// The counters it may use.
    pub demand: Demand,
}

/// One metric's needs.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct SchedMetric {
    /// The metric's name.
    pub name: String,
    /// Indices into [`Request::events`]: what its value needs.
    pub events: Vec<usize>,
    /// Events only its `MetricThreshold` needs: counted, but not required to share the
    /// value's group (they colour the value, they do not change it).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub threshold_events: Vec<usize>,
    /// Whether perf would group its events (false for `MetricConstraint`,
    /// `MetricgroupNoGroup` or `--metric-no-group`).
    pub grouped: bool,
    /// Whether tmetric packs its events as a unit anyway: true when perf's reason not to
    /// group is one the scheduler models (the NMI watchdog's counter, SMT's halved counters,
    /// the topdown group perf builds itself), false for `NO_GROUP_EVENTS` and
    /// `--metric-no-group`.
    pub pack: bool,
}

/// What to schedule.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize)]
pub struct Request {
    /// Distinct events.
    pub events: Vec<SchedEvent>,
    /// Metrics, in selection order.
    pub metrics: Vec<SchedMetric>,
}

/// Which strategy to plan with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Strategy {
    /// tmetric's: counter-aware packing of whole metrics, fewest slices first.
    Tmetric,
    /// perf 6.12's `parse_groups` (tools/perf/util/metricgroup.c) followed by weak-group splitting at open (builtin-stat.c).
    Perf,
}

/// The counter a group member is placed on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Slot {
    /// General-purpose counter `n`.
    General(u8),
    /// Fixed counter `n`.
    Fixed(u8),
    /// Arm's cycle counter.
    Cycle,
    /// A PERF_METRICS field read through the `slots` leader: no counter of its own.
    Metric,
    /// Takes no hardware counter (software or msr event in a hardware group).
    None,
}

/// One group to open, leader first.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Group {
    /// The PMU; `None` for the group of counterless events.
    pub pmu: Option<usize>,
    /// Event indices, leader first.
    pub events: Vec<usize>,
    /// Per member, where the kernel can place it (one valid assignment).
    pub slots: Vec<Slot>,
}

/// How one metric's events were placed.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Placement {
    /// All its hardware events count together: one group per PMU it uses.
    Together {
        /// The groups, one per PMU.
        groups: Vec<usize>,
    },
    /// Its events are spread over rotating groups, so they were counted over different time.
    Spread {
        /// The groups its events are in.
        groups: Vec<usize>,
        /// Why.
        why: String,
    },
    /// It needs no hardware counter.
    NoCounters,
    /// Some event can never be placed on this machine.
    Impossible {
        /// Why.
        why: String,
    },
}

/// The result of planning.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Schedule {
    /// Groups to open: hardware groups, then at most one group of counterless events.
    pub groups: Vec<Group>,
    /// Events opened alone (perf's ungrouped events and broken weak groups).
    pub singles: Vec<usize>,
    /// Per metric of the request.
    pub placements: Vec<Placement>,
    /// Per PMU: the time slices (groups that rotate).
    pub slices_per_pmu: Vec<usize>,
}

impl Schedule {
    /// The time slices of the busiest PMU.
    pub fn slices(&self) -> usize {
        self.slices_per_pmu.iter().copied().max().unwrap_or(0)
    }
}

/// Places `events` (indices into `all`) on `pmu`'s counters: one valid assignment, in the
/// given order, or `None` when the kernel would refuse the group. `ignore_reserved` models
/// the kernel's open-time check, which schedules on an empty PMU and does not see the NMI
/// watchdog.
pub fn assign(
    pmu: &PmuCounters,
    all: &[SchedEvent],
    events: &[usize],
    ignore_reserved: bool,
) -> Option<Vec<Slot>> {
    if !extra_regs_fit(all, events) {
        return None;
    }
    let reserved = if ignore_reserved { 0 } else { pmu.fixed_reserved };
    let general =
        if ignore_reserved && pmu.source_general_reduced() { pmu.general + 1 } else { pmu.general };
    let cycle = pmu.cycle_counter || (ignore_reserved && pmu.vendor == crate::pmu::Vendor::Arm);
    let metrics = events.iter().filter(|&&e| all[e].demand.topdown_metric).count();
    if metrics > 0 {
        if metrics > pmu.metric_events as usize {
            return None;
        }
        if !events.iter().any(|&e| all[e].demand.slots) {
            return None;
        }
    }
    // More counted members than counters can never fit: skip the matching.
    let counted = events.len() - metrics;
    let fixed_free = (0..pmu.fixed.min(8)).filter(|f| reserved & (1 << f) == 0).count();
    if counted > general as usize + fixed_free + usize::from(cycle) {
        return None;
    }
    // Counters: general 0..g, then fixed, then the cycle counter.
    let g = general as usize;
    let f = pmu.fixed as usize;
    let total = g + f + 1;
    // Fixed (and Arm's cycle) counters first: the kernel tries them before the general ones
    // (`__perf_sched_find_counter`, `armv8pmu_get_event_idx`), so this is its assignment.
    let allowed = |d: &Demand| -> Vec<usize> {
        let mut out = Vec::new();
        for c in 0..f.min(8) {
            if d.fixed & (1 << c) != 0 && reserved & (1 << c) == 0 {
                out.push(g + c);
            }
        }
        if d.cycle_counter && cycle {
            out.push(g + f);
        }
        for c in 0..g.min(32) {
            if d.general & (1 << c) != 0 {
                out.push(c);
            }
        }
        out
    };
    let members: Vec<usize> =
        events.iter().copied().filter(|&e| !all[e].demand.topdown_metric).collect();
    let options: Vec<Vec<usize>> = members.iter().map(|&e| allowed(&all[e].demand)).collect();
    let mut owner: Vec<Option<usize>> = vec![None; total];
    // Fewest options first, as the kernel places by constraint weight.
    let mut order: Vec<usize> = (0..members.len()).collect();
    order.sort_by_key(|&i| (options[i].len(), i));
    for &i in &order {
        let mut seen = vec![false; total];
        if !augment(i, &options, &mut owner, &mut seen) {
            return None;
        }
    }
    let mut placed = vec![Slot::None; members.len()];
    for (c, o) in owner.iter().enumerate() {
        if let Some(i) = o {
            placed[*i] = if c < g {
                Slot::General(c as u8)
            } else if c < g + f {
                Slot::Fixed((c - g) as u8)
            } else {
                Slot::Cycle
            };
        }
    }
    let mut slots = Vec::with_capacity(events.len());
    let mut next = 0;
    for &e in events {
        if all[e].demand.topdown_metric {
            slots.push(Slot::Metric);
        } else {
            slots.push(placed[next]);
            next += 1;
        }
    }
    Some(slots)
}

/// Whether the kernel could place `events` (a group) on `pmu`: [`assign`] without building
/// the assignment, on bit masks, because the packer asks it thousands of times.
pub fn fits(pmu: &PmuCounters, all: &[SchedEvent], events: &[usize]) -> bool {
    if !extra_regs_fit(all, events) {
        return false;
    }
    let mut metrics = 0usize;
    let mut has_slots = false;
    for &e in events {
        metrics += usize::from(all[e].demand.topdown_metric);
        has_slots |= all[e].demand.slots;
    }
    if metrics > 0 && (metrics > pmu.metric_events as usize || !has_slots) {
        return false;
    }
    let g = pmu.general.min(32) as u32;
    let f = pmu.fixed.min(8) as u32;
    let counted = events.len() - metrics;
    let fixed_free = (0..f).filter(|c| pmu.fixed_reserved & (1 << c) == 0).count();
    if counted > g as usize + fixed_free + usize::from(pmu.cycle_counter) {
        return false;
    }
    let general_mask = if g >= 32 { u32::MAX } else { (1u32 << g) - 1 };
    let fixed_mask = (if f >= 8 { u8::MAX } else { (1u8 << f) - 1 }) & !pmu.fixed_reserved;
    let mut masks = [0u64; 64];
    let mut n = 0;
    for &e in events {
        let d = &all[e].demand;
        if d.topdown_metric {
            continue;
        }
        let mut m = u64::from(d.general & general_mask);
        m |= u64::from(d.fixed & fixed_mask) << g;
        if d.cycle_counter && pmu.cycle_counter {
            m |= 1 << (g + f);
        }
        if m == 0 {
            return false;
        }
        masks[n] = m;
        n += 1;
    }
    let masks = &mut masks[..n];
    masks.sort_unstable_by_key(|m| m.count_ones());
    let mut owner = [u8::MAX; 64];
    for i in 0..n {
        let mut seen = 0u64;
        if !augment_bits(i, masks, &mut owner, &mut seen) {
            return false;
        }
    }
    true
}

/// Whether the group's shared extra registers hold every value its events need: the kernel
/// refuses a group whose events want more distinct values than there are registers.
fn extra_regs_fit(all: &[SchedEvent], events: &[usize]) -> bool {
    let mut values: Vec<(crate::pmu::ExtraReg, u64)> =
        events.iter().filter_map(|&e| all[e].demand.extra).collect();
    if values.len() < 2 {
        return true;
    }
    values.sort_unstable();
    values.dedup();
    let mut i = 0;
    while i < values.len() {
        let kind = values[i].0;
        let n = values[i..].iter().take_while(|v| v.0 == kind).count();
        if n > kind.capacity() {
            return false;
        }
        i += n;
    }
    true
}

/// How many of `events` the PMU can count at once: the size of a maximum matching of events
/// to the counters they may use (topdown metric events aside).
fn max_at_once(pmu: &PmuCounters, all: &[SchedEvent], events: &[usize]) -> usize {
    let g = pmu.general.min(32) as u32;
    let f = pmu.fixed.min(8) as u32;
    let general_mask = if g >= 32 { u32::MAX } else { (1u32 << g) - 1 };
    let fixed_mask = (if f >= 8 { u8::MAX } else { (1u8 << f) - 1 }) & !pmu.fixed_reserved;
    let masks: Vec<u64> = events
        .iter()
        .map(|&e| &all[e].demand)
        .filter(|d| !d.topdown_metric)
        .map(|d| {
            let mut m =
                u64::from(d.general & general_mask) | (u64::from(d.fixed & fixed_mask) << g);
            if d.cycle_counter && pmu.cycle_counter {
                m |= 1 << (g + f);
            }
            m
        })
        .collect();
    let mut owner = [u8::MAX; 64];
    let mut placed = 0;
    for i in 0..masks.len().min(255) {
        let mut seen = 0u64;
        if augment_bits(i, &masks, &mut owner, &mut seen) {
            placed += 1;
        }
    }
    placed
}

fn augment_bits(i: usize, masks: &[u64], owner: &mut [u8; 64], seen: &mut u64) -> bool {
    let mut free = masks[i] & !*seen;
    while free != 0 {
        let c = free.trailing_zeros() as usize;
        free &= free - 1;
        *seen |= 1 << c;
        if owner[c] == u8::MAX || augment_bits(owner[c] as usize, masks, owner, seen) {
            owner[c] = i as u8;
            return true;
        }
    }
    false
}

fn augment(
    i: usize,
    options: &[Vec<usize>],
    owner: &mut [Option<usize>],
    seen: &mut [bool],
) -> bool {
    for &c in &options[i] {
        if seen[c] {
            continue;
        }
        seen[c] = true;
        if owner[c].is_none() || augment(owner[c].expect("checked"), options, owner, seen) {
            owner[c] = Some(i);
            return true;
        }
    }
    false
}

impl PmuCounters {
    /// Whether the NMI watchdog took a general counter off [`PmuCounters::general`].
    fn source_general_reduced(&self) -> bool {
        self.adjustments.contains(&crate::pmu::Adjustment::WatchdogGeneral)
    }
}

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

/// One metric's hardware events on one PMU.
#[derive(Debug, Clone)]
struct Part {
    metric: usize,
    pmu: usize,
    events: Vec<usize>,
    pack: bool,
}

fn parts_of(request: &Request) -> Vec<Part> {
    let mut parts = Vec::new();
    for (m, metric) in request.metrics.iter().enumerate() {
        let mut pmus: Vec<usize> =
            metric.events.iter().filter_map(|&e| request.events[e].pmu).collect();
        pmus.sort_unstable();
        pmus.dedup();
        for pmu in pmus {
            let mut events: Vec<usize> = metric
                .events
                .iter()
                .copied()
                .filter(|&e| request.events[e].pmu == Some(pmu))
                .collect();
            events.sort_unstable();
            events.dedup();
            parts.push(Part { metric: m, pmu, events, pack: metric.grouped || metric.pack });
        }
    }
    parts
}

/// Why an event can never be counted on its PMU, if that is so.
fn unplaceable(model: &PmuModel, ev: &SchedEvent) -> Option<String> {
    let pmu = &model.pmus[ev.pmu?];
    if ev.demand.topdown_metric {
        return (pmu.metric_events == 0)
            .then(|| format!("`{}` needs PERF_METRICS, which {} lacks", ev.name, pmu.name));
    }
    (ev.demand.weight(pmu) == 0).then(|| {
        if ev.demand.fixed != 0 && ev.demand.general == 0 {
            format!(
                "`{}` runs only on a fixed counter that {} does not have free",
                ev.name, pmu.name
            )
        } else {
            format!("`{}` may use no counter that {} has", ev.name, pmu.name)
        }
    })
}

/// Plans `request` on `model` with `strategy`.
pub fn schedule(request: &Request, model: &PmuModel, strategy: Strategy) -> Schedule {
    match strategy {
        Strategy::Tmetric => tmetric(request, model),
        Strategy::Perf => perf(request, model),
    }
}

fn tmetric(request: &Request, model: &PmuModel) -> Schedule {
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

/// The placements known before packing: metrics with an event no counter here can take, and
/// metrics that need no hardware counter.
fn early_placements(request: &Request, model: &PmuModel) -> Vec<Option<Placement>> {
    let all = &request.events;
    request
        .metrics
        .iter()
        .map(|metric| {
            if let Some(why) = metric.events.iter().find_map(|&e| unplaceable(model, &all[e])) {
                Some(Placement::Impossible { why })
            } else if metric.events.iter().all(|&e| all[e].pmu.is_none()) {
                Some(Placement::NoCounters)
            } else {
                None
            }
        })
        .collect()
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

fn merge(into: &mut Vec<usize>, events: &[usize]) {
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

/// Builds the [`Schedule`]: orders members, assigns counters, adds the counterless group and
/// decides each metric's placement.
fn finish(
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
            }],
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
    }
}

fn perf(request: &Request, model: &PmuModel) -> Schedule {
    let all = &request.events;
    let placements = early_placements(request, model);
    // Sorted by event count, largest first (stable).
    let mut order: Vec<usize> = (0..request.metrics.len()).collect();
    // perf's id sets hold the threshold's events too.
    let hw = |m: usize| -> BTreeSet<usize> {
        let metric = &request.metrics[m];
        metric
            .events
            .iter()
            .chain(&metric.threshold_events)
            .copied()
            .filter(|&e| all[e].pmu.is_some())
            .collect()
    };
    order.sort_by_key(|&m| std::cmp::Reverse(hw(m).len()));
    let mut singles: Vec<usize> = Vec::new();
    let mut lists: Vec<BTreeSet<usize>> = Vec::new();
    for &m in &order {
        if placements[m].is_some() {
            continue;
        }
        let ids = hw(m);
        if !request.metrics[m].grouped {
            // --metric-no-merge aside, ungrouped metrics share one flat list.
            for e in ids {
                if !singles.contains(&e) {
                    singles.push(e);
                }
            }
            continue;
        }
        if lists.iter().any(|l| l.is_superset(&ids)) {
            continue;
        }
        lists.push(ids);
    }
    // Open: a weak group that the kernel's empty-PMU check rejects is broken into single
    // events, except the topdown events, which stay together behind `slots`.
    let mut groups: Vec<(usize, Vec<usize>)> = Vec::new();
    for list in lists {
        let mut pmus: Vec<usize> = list.iter().filter_map(|&e| all[e].pmu).collect();
        pmus.sort_unstable();
        pmus.dedup();
        for p in pmus {
            let events: Vec<usize> =
                list.iter().copied().filter(|&e| all[e].pmu == Some(p)).collect();
            if assign(&model.pmus[p], all, &events, true).is_some() {
                groups.push((p, events));
            } else {
                let (td, rest): (Vec<usize>, Vec<usize>) = events
                    .into_iter()
                    .partition(|&e| all[e].demand.slots || all[e].demand.topdown_metric);
                if !td.is_empty() {
                    groups.push((p, td));
                }
                singles.extend(rest);
            }
        }
    }
    // perf gathers topdown events that are not in a group into one group behind `slots`.
    let (td, singles): (Vec<usize>, Vec<usize>) =
        singles.into_iter().partition(|&e| all[e].demand.slots || all[e].demand.topdown_metric);
    let mut td_pmus: Vec<usize> = td.iter().filter_map(|&e| all[e].pmu).collect();
    td_pmus.sort_unstable();
    td_pmus.dedup();
    for p in td_pmus {
        let mut members: Vec<usize> =
            td.iter().copied().filter(|&e| all[e].pmu == Some(p)).collect();
        if !members.iter().any(|&e| all[e].demand.slots)
            && let Some(s) = (0..all.len()).find(|&s| all[s].demand.slots && all[s].pmu == Some(p))
        {
            members.insert(0, s);
        }
        groups.push((p, members));
    }
    let split = vec![false; request.metrics.len()];
    finish(request, model, groups, singles, placements, &split, true)
}

/// A lower bound on the time slices of any schedule of `request`'s events, per PMU: counts
/// of distinct events against the counters each may use.
fn counting_bound(request: &Request, model: &PmuModel) -> Vec<usize> {
    let all = &request.events;
    let mut used: BTreeSet<usize> = BTreeSet::new();
    for metric in &request.metrics {
        used.extend(metric.events.iter().copied());
        used.extend(metric.threshold_events.iter().copied());
    }
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
            *bound = (*bound).max(together_bound(request, model, p));
        }
    }
    bounds
}

/// Bounds that hold for schedules that keep each packable metric in one group (tmetric's
/// promise): groups with topdown metric events each need `slots`, which only fixed counter 3
/// counts, so they are distinct slices and must hold all those metrics' other events; and
/// metrics that pairwise cannot share a group need a group each (a greedy clique).
fn together_bound(request: &Request, model: &PmuModel, p: usize) -> usize {
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
    let mut bound = 0;
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
    bound.max(clique.len())
}

fn low(n: u8) -> u32 {
    if n >= 32 { u32::MAX } else { (1u32 << n) - 1 }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pmu::{CountSource, Vendor};

    fn intel(general: u8) -> PmuModel {
        PmuModel {
            pmus: vec![PmuCounters {
                name: "cpu".into(),
                core: true,
                vendor: Vendor::Intel,
                general,
                fixed: 4,
                fixed_reserved: 0,
                metric_events: 8,
                cycle_counter: false,
                cpus: None,
                source: CountSource::CounterJson,
                adjustments: Vec::new(),
            }],
            nmi_watchdog: false,
            smt_on: true,
        }
    }

    fn ev(name: &str, demand: Demand) -> SchedEvent {
        SchedEvent { name: name.into(), pmu: Some(0), demand }
    }

    fn general(mask: u32) -> Demand {
        Demand { general: mask, ..Demand::GENERAL }
    }

    #[test]
    fn masks_and_fixed_counters_decide_fit() {
        let model = intel(4);
        let any = tmetric_catalog::CounterMask::ANY;
        let mut events: Vec<SchedEvent> =
            (0..4).map(|i| ev(&format!("e{i}"), general(u32::MAX))).collect();
        events.push(ev("cycles", crate::pmu::intel_demand(0x3c, 0, any)));
        events.push(ev("ref", crate::pmu::intel_demand(0, 3, any)));
        // 4 general events plus cycles on fixed 1 plus ref-tsc on fixed 2.
        assert!(assign(&model.pmus[0], &events, &[0, 1, 2, 3, 4, 5], false).is_some());
        events.push(ev("e4", general(u32::MAX)));
        assert!(assign(&model.pmus[0], &events, &[0, 1, 2, 3, 6], false).is_none());
        // Two events confined to counter 0 never fit together.
        events.push(ev("c0a", general(1)));
        events.push(ev("c0b", general(1)));
        assert!(assign(&model.pmus[0], &events, &[7, 8], false).is_none());
        assert!(assign(&model.pmus[0], &events, &[7, 0], false).is_some());
    }

    #[test]
    fn topdown_needs_slots() {
        let model = intel(8);
        let any = tmetric_catalog::CounterMask::ANY;
        let events = vec![
            ev("topdown-retiring", crate::pmu::intel_demand(0, 0x80, any)),
            ev("slots", crate::pmu::intel_demand(0, 4, any)),
        ];
        assert!(assign(&model.pmus[0], &events, &[0], false).is_none());
        let slots = assign(&model.pmus[0], &events, &[0, 1], false).unwrap();
        assert_eq!(slots, vec![Slot::Metric, Slot::Fixed(3)]);
        let request = Request {
            events,
            metrics: vec![SchedMetric {
                name: "m".into(),
                events: vec![0, 1],
                grouped: true,
                pack: true,
                threshold_events: vec![],
            }],
        };
        let plan = schedule(&request, &model, Strategy::Tmetric);
        assert_eq!(plan.groups[0].events, vec![1, 0], "slots leads");
    }

    #[test]
    fn packing_shares_groups_and_beats_perf() {
        let model = intel(4);
        let events: Vec<SchedEvent> =
            (0..6).map(|i| ev(&format!("e{i}"), general(u32::MAX))).collect();
        // Three metrics of two events each: two fit in one 4-counter group.
        let metrics = vec![
            SchedMetric {
                name: "a".into(),
                events: vec![0, 1],
                grouped: true,
                pack: true,
                threshold_events: vec![],
            },
            SchedMetric {
                name: "b".into(),
                events: vec![2, 3],
                grouped: true,
                pack: true,
                threshold_events: vec![],
            },
            SchedMetric {
                name: "c".into(),
                events: vec![4, 5],
                grouped: true,
                pack: true,
                threshold_events: vec![],
            },
            SchedMetric {
                name: "d".into(),
                events: vec![0, 2],
                grouped: true,
                pack: true,
                threshold_events: vec![],
            },
        ];
        let request = Request { events, metrics };
        let ours = schedule(&request, &model, Strategy::Tmetric);
        let perf = schedule(&request, &model, Strategy::Perf);
        assert_eq!(ours.slices(), 2);
        assert_eq!(perf.slices(), 4);
        assert_eq!(lower_bound(&request, &model), vec![2]);
        for p in &ours.placements {
            assert!(matches!(p, Placement::Together { .. }), "{p:?}");
        }
    }

    proptest::proptest! {
        /// The bit-mask check agrees with the assignment on random groups.
        #[test]
        fn fits_agrees_with_assign(
            masks in proptest::collection::vec((0u32..256, 0u8..16, proptest::bool::ANY), 0..12),
            general in 1u8..9,
            reserved in 0u8..4,
        ) {
            let mut model = intel(general);
            model.pmus[0].fixed_reserved = reserved;
            let events: Vec<SchedEvent> = masks
                .iter()
                .enumerate()
                .map(|(i, &(g, f, metric))| {
                    let demand = if metric {
                        Demand { topdown_metric: true, general: 0, ..Demand::GENERAL }
                    } else if f == 8 {
                        Demand { slots: true, general: 0, fixed: 8, ..Demand::GENERAL }
                    } else {
                        Demand { general: g, fixed: f, ..Demand::GENERAL }
                    };
                    ev(&format!("e{i}"), demand)
                })
                .collect();
            let all: Vec<usize> = (0..events.len()).collect();
            proptest::prop_assert_eq!(
                fits(&model.pmus[0], &events, &all),
                assign(&model.pmus[0], &events, &all, false).is_some()
            );
        }
    }

    #[test]
    fn too_big_metrics_are_split_and_say_so() {
        let model = intel(2);
        let events: Vec<SchedEvent> =
            (0..5).map(|i| ev(&format!("e{i}"), general(u32::MAX))).collect();
        let request = Request {
            events,
            metrics: vec![SchedMetric {
                name: "big".into(),
                events: vec![0, 1, 2, 3, 4],
                grouped: true,
                pack: true,
                threshold_events: vec![],
            }],
        };
        let plan = schedule(&request, &model, Strategy::Tmetric);
        assert_eq!(plan.slices(), 3);
        assert!(
            matches!(&plan.placements[0], Placement::Spread { why, .. } if why.contains("do not fit"))
        );
    }
}
