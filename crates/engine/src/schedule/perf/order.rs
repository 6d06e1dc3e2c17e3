//! perf's event list from its metric lists: each list parsed on its own (`__parse_events`),
//! one event per identifier that is a hardware event of the request, then
//! `parse_events__sort_events_and_fix_groups` (tools/perf/util/parse-events.c):
//!
//! * lone events that must be in a group (`arch_evsel__must_be_in_group`,
//!   tools/perf/arch/x86/util/evsel.c: an event whose name holds `topdown` or `slots`, but
//!   not `uops_retired.slots`, on a core PMU with PERF_METRICS) all move to where the first
//!   of them stood and form one group there;
//! * events sort by their group's place, then (inside a group) by PMU name, then by
//!   `arch_evlist__cmp` (tools/perf/arch/x86/util/evlist.c): `slots` first, then the other
//!   topdown events, then the rest in order;
//! * groups split where the PMU changes.

use super::List;
use crate::pmu::PmuModel;
use crate::schedule::Request;

/// One event of perf's event list.
#[derive(Debug, Clone)]
pub(crate) struct Evsel {
    /// Index into [`Request::events`].
    pub(crate) event: usize,
    /// The metric list it came from.
    pub(crate) list: usize,
    /// Index into the event list of its group leader (itself when it leads or is alone).
    pub(crate) leader: usize,
    /// From a `{...}:W` group: a member that does not fit breaks the group at open.
    pub(crate) weak: bool,
    /// perf keeps it behind its leader when a weak group breaks.
    pub(crate) must_group: bool,
}

/// `arch_evsel__must_be_in_group` on identifier `key`, for an event on a PMU with
/// PERF_METRICS (`evsel__sys_has_perf_metrics`: the core PMU with a `slots` event).
fn named_topdown(key: &str) -> bool {
    let name = key.to_ascii_lowercase();
    !name.contains("uops_retired.slots") && (name.contains("topdown") || name.contains("slots"))
}

/// `arch_evlist__cmp`'s rank: `slots` first, then other topdown events.
fn rank(key: &str, must: bool) -> u8 {
    let name = key.to_ascii_lowercase();
    match (must, name.contains("slots") && !name.contains("uops_retired.slots")) {
        (false, _) => 2,
        (true, true) => 0,
        (true, false) => 1,
    }
}

/// The event list: every list's events, sorted and grouped as perf does, in list order.
pub(super) fn evlist(request: &Request, model: &PmuModel, lists: &[List]) -> Vec<Evsel> {
    let all = &request.events;
    let perf_metrics_pmu = |p: usize| model.pmus[p].core && model.pmus[p].metric_events > 0;
    let sys_has_perf_metrics = (0..model.pmus.len()).any(perf_metrics_pmu);
    let mut out: Vec<Evsel> = Vec::new();
    for (l, list) in lists.iter().enumerate() {
        // One event per identifier that is a counter here, in the text's order.
        let entries: Vec<(usize, &str)> = list
            .keys
            .iter()
            .filter_map(|k| {
                let e = list.events.iter().find(|(key, _)| key == k)?.1;
                all[e].pmu.map(|_| (e, k.as_str()))
            })
            .collect();
        let n = entries.len();
        if n == 0 {
            continue;
        }
        let pmu_of = |i: usize| all[entries[i].0].pmu.expect("hardware");
        let pmu_name = |i: usize| model.pmus[pmu_of(i)].name.as_str();
        let must = |i: usize| perf_metrics_pmu(pmu_of(i)) && named_topdown(entries[i].1);
        // A `{...}` of one event is no group (`nr_members > 1`).
        let has_group = list.grouped && n > 1;
        let force = if has_group { None } else { (0..n).find(|&i| must(i)) };
        let sort_idx = |i: usize| {
            if has_group {
                0
            } else if force.is_some() && must(i) {
                force.unwrap_or(i)
            } else {
                i
            }
        };
        let mut sorted: Vec<usize> = (0..n).collect();
        sorted.sort_by(|&a, &b| {
            sort_idx(a)
                .cmp(&sort_idx(b))
                .then_with(|| {
                    if has_group { pmu_name(a).cmp(pmu_name(b)) } else { std::cmp::Ordering::Equal }
                })
                .then_with(|| {
                    if sys_has_perf_metrics && (must(a) || must(b)) {
                        rank(entries[a].1, must(a)).cmp(&rank(entries[b].1, must(b)))
                    } else {
                        std::cmp::Ordering::Equal
                    }
                })
                .then(a.cmp(&b))
        });
        // Regroup: a new leader where the original group or the PMU changes; forced events
        // stay with each other.
        let base = out.len();
        let mut cur_leader: Option<usize> = None;
        let mut cur_group: Option<usize> = None;
        let mut cur_forced = false;
        for (pos, &i) in sorted.iter().enumerate() {
            let forced = force.is_some() && must(i);
            let group = if has_group { 0 } else { i + 1 };
            let leader = *cur_leader.get_or_insert(pos);
            let leader_pmu = pmu_name(sorted[leader]);
            if (cur_group != Some(group) && !(forced && cur_forced)) || leader_pmu != pmu_name(i) {
                cur_leader = Some(pos);
                cur_group = Some(group);
                cur_forced = forced;
            }
            out.push(Evsel {
                event: entries[i].0,
                list: l,
                leader: base + cur_leader.unwrap_or(pos),
                weak: has_group,
                must_group: must(i),
            });
        }
    }
    out
}
