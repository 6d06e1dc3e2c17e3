//! How `perf stat` opens its event list (tools/perf/builtin-stat.c `__run_perf_stat`), the
//! same on every CPU, so the kernel's flexible list holds the groups in this order:
//!
//! * first pass, in event-list order: a leader opens alone (an event no counter can take is
//!   refused, `stat_handle_error` marks it unsupported and skips it); a member joins its
//!   leader's group if the kernel's check on an empty PMU (`validate_group`, which does not
//!   see the NMI watchdog) takes the group so far with it, and a topdown metric event only
//!   behind `slots` (`intel_pmu_hw_config`). A member of a weak group that does not fit
//!   breaks the group (`evlist__reset_weak_group`): every member, the leader too, is set
//!   aside for the second pass, and all but the topdown events leave the group
//!   (`evsel__remove_from_group` keeps `arch_evsel__must_be_in_group` events). A member of a
//!   group that is not weak and does not fit is unsupported.
//! * second pass: the set-aside events reopen in event-list order, the leader with what is
//!   left of its group, the others alone; a member that still does not fit is unsupported.

use super::order::Evsel;
use crate::pmu::PmuModel;
use crate::schedule::{Request, assign, unplaceable};

/// One opened group or lone event: indices into the event list, leader first.
#[derive(Debug, Clone)]
pub(super) struct Unit {
    pub(super) members: Vec<usize>,
}

/// What perf opened, in the kernel's order, and the metric lists whose weak group broke.
#[derive(Debug, Clone, Default)]
pub(super) struct Opened {
    pub(super) units: Vec<Unit>,
    pub(super) reopened: Vec<usize>,
}

/// Whether the kernel takes `members` (leader first) as one group.
fn fits(request: &Request, model: &PmuModel, evlist: &[Evsel], members: &[usize]) -> bool {
    let all = &request.events;
    let events: Vec<usize> = members.iter().map(|&i| evlist[i].event).collect();
    let leader = &all[events[0]];
    let Some(p) = leader.pmu else { return true };
    // A topdown metric event needs `slots` as its leader, not just in its group.
    if events[1..].iter().any(|&e| all[e].demand.topdown_metric) && !leader.demand.slots {
        return false;
    }
    assign(&model.pmus[p], all, &events, true).is_some()
}

pub(super) fn open(request: &Request, model: &PmuModel, evlist: &[Evsel]) -> Opened {
    let all = &request.events;
    let n = evlist.len();
    let mut leader: Vec<usize> = evlist.iter().map(|e| e.leader).collect();
    let mut reset = vec![false; n];
    let mut errored = vec![false; n];
    // First pass: per leader, the members opened with it so far.
    let mut first: Vec<Vec<usize>> = vec![Vec::new(); n];
    for i in 0..n {
        if reset[i] || errored[i] {
            continue;
        }
        if unplaceable(model, &all[evlist[i].event]).is_some() {
            errored[i] = true;
            continue;
        }
        let l = leader[i];
        if l == i {
            first[i].push(i);
            continue;
        }
        if errored[l] || reset[l] {
            // The leader never opened: perf's open of the member fails (EBADF), and a weak
            // group is then reset like any other failure.
            if evlist[i].weak {
                reset_group(evlist, &mut leader, &mut reset, l);
            } else {
                errored[i] = true;
            }
            continue;
        }
        let mut candidate = first[l].clone();
        candidate.push(i);
        if fits(request, model, evlist, &candidate) {
            first[l] = candidate;
        } else if evlist[i].weak {
            reset_group(evlist, &mut leader, &mut reset, l);
        } else {
            errored[i] = true;
        }
    }
    let mut opened = Opened::default();
    for i in 0..n {
        if !reset[i] && !first[i].is_empty() {
            opened.units.push(Unit { members: first[i].clone() });
        }
    }
    // Second pass.
    let mut second: Vec<Vec<usize>> = vec![Vec::new(); n];
    let mut order: Vec<usize> = Vec::new();
    for i in (0..n).filter(|&i| reset[i]) {
        let l = leader[i];
        if l == i {
            second[i].push(i);
            order.push(i);
            continue;
        }
        if second[l].is_empty() {
            continue;
        }
        let mut candidate = second[l].clone();
        candidate.push(i);
        if fits(request, model, evlist, &candidate) {
            second[l] = candidate;
        }
    }
    for i in order {
        opened.units.push(Unit { members: second[i].clone() });
    }
    for (i, e) in evlist.iter().enumerate() {
        if reset[i] && !opened.reopened.contains(&e.list) {
            opened.reopened.push(e.list);
        }
    }
    opened
}

/// `evlist__reset_weak_group`: every event of `leader`'s group is set aside; all but the
/// ones that must stay grouped leave it.
fn reset_group(evlist: &[Evsel], leader: &mut [usize], reset: &mut [bool], l: usize) {
    for i in 0..evlist.len() {
        if leader[i] == l {
            reset[i] = true;
            if i != l && !evlist[i].must_group {
                leader[i] = i;
            }
        }
    }
}
