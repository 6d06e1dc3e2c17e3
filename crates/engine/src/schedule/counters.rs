//! Whether a group fits a PMU's counters, as the kernel decides: one valid assignment of
//! members to general, fixed and cycle counters (fixed first, fewest options first), the
//! bit-mask check the packer asks thousands of times, shared extra registers, and how many
//! events a PMU counts at once.

use super::{SchedEvent, Slot};
use crate::pmu::{Demand, PmuCounters};

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
pub(super) fn max_at_once(pmu: &PmuCounters, all: &[SchedEvent], events: &[usize]) -> usize {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schedule::tests::{ev, general, intel};

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
}
