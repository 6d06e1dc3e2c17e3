//! perf's regrouping of a resolved list (`parse_events__sort_events_and_fix_groups`):
//! groups split per PMU, topdown events behind `slots`, lone topdown events gathered.

use std::cmp::Ordering;

use super::expand::Built;
use super::{ListEvent, ListGroup, ResolvedEvent, Resolver, Topdown, UncoreBox};

/// One event on its way through perf's regrouping.
#[derive(Debug, Clone)]
pub(super) struct Entry {
    built: Built,
    pub(super) uncore_box: Option<UncoreBox>,
    /// The group it was written in (each lone event has its own).
    pub(super) group: usize,
    braced: bool,
    weak: bool,
    idx: usize,
    pmu_name: String,
    software_like: bool,
    topdown: Option<Topdown>,
    /// The event's text in the list.
    pub(super) written: String,
}

impl Entry {
    pub(super) fn new(
        built: Built,
        group: usize,
        braced: bool,
        weak: bool,
        r: &Resolver<'_>,
    ) -> Entry {
        let topdown = match &built.event {
            ResolvedEvent::Counter(c) => r.topdown_role(c),
            ResolvedEvent::Tool(_) => None,
        };
        let (pmu_name, software_like) = match &built.pmu {
            Some(p) => (p.clone(), false),
            None => (String::from("software"), true),
        };
        Entry {
            built,
            uncore_box: None,
            group,
            braced,
            weak,
            idx: 0,
            pmu_name,
            software_like,
            topdown,
            written: String::new(),
        }
    }
}

/// perf's `parse_events__sort_events_and_fix_groups`: lone topdown events are gathered at the
/// first one's place, every group is sorted so `slots` leads and topdown events follow, and
/// groups are split where their PMUs differ. Returns the groups and whether anything moved.
pub(super) fn fix_groups(mut entries: Vec<Entry>, perf_metrics: bool) -> (Vec<ListGroup>, bool) {
    for (i, e) in entries.iter_mut().enumerate() {
        e.idx = i;
    }
    let n = entries.len();
    let members = |g: usize, entries: &[Entry]| entries.iter().filter(|e| e.group == g).count();
    let counts: Vec<usize> = entries.iter().map(|e| members(e.group, &entries)).collect();
    let leader_idx: Vec<usize> = entries
        .iter()
        .map(|e| entries.iter().find(|x| x.group == e.group).map_or(e.idx, |x| x.idx))
        .collect();
    // Software events in a group count on its hardware PMU.
    let group_pmu: Vec<String> = entries
        .iter()
        .map(|e| {
            if !e.software_like {
                return e.pmu_name.clone();
            }
            entries
                .iter()
                .find(|x| x.group == e.group && !x.software_like)
                .map_or_else(|| e.pmu_name.clone(), |x| x.pmu_name.clone())
        })
        .collect();
    let must = |e: &Entry| perf_metrics && e.topdown.is_some();
    let has_group: Vec<bool> = entries.iter().map(|e| e.braced && counts[e.idx] > 1).collect();
    let force = entries
        .iter()
        .find(|e| leader_idx[e.idx] == e.idx && counts[e.idx] < 2 && must(e))
        .map(|e| e.idx);
    let sort_idx = |e: &Entry| -> usize {
        if has_group[e.idx] {
            leader_idx[e.idx]
        } else if force.is_some() && must(e) {
            force.unwrap_or(e.idx)
        } else {
            e.idx
        }
    };
    let rank = |e: &Entry| match e.topdown {
        Some(Topdown::Slots) => 0,
        Some(Topdown::Metric) => 1,
        None => 2,
    };
    let mut order: Vec<usize> = (0..n).collect();
    order.sort_by(|&a, &b| {
        let (l, r) = (&entries[a], &entries[b]);
        sort_idx(l)
            .cmp(&sort_idx(r))
            .then_with(|| {
                if has_group[a] && has_group[b] {
                    group_pmu[a].cmp(&group_pmu[b])
                } else {
                    Ordering::Equal
                }
            })
            .then_with(|| if must(l) || must(r) { rank(l).cmp(&rank(r)) } else { Ordering::Equal })
            .then_with(|| l.idx.cmp(&r.idx))
    });
    // Regroup in the sorted order.
    let mut leaders: Vec<usize> = Vec::with_capacity(n);
    let mut cur_leader: Option<usize> = None;
    let mut cur_group: Option<usize> = None;
    let mut cur_forced = false;
    for &i in &order {
        let e = &entries[i];
        let forced = force.is_some() && must(e);
        let leader = *cur_leader.get_or_insert(i);
        let other_group = cur_group != Some(e.group) && !(forced && cur_forced);
        if other_group || group_pmu[leader] != group_pmu[i] {
            cur_leader = Some(i);
            cur_group = Some(e.group);
            cur_forced = forced;
        }
        leaders.push(cur_leader.unwrap_or(i));
    }
    let moved = order.iter().enumerate().any(|(pos, &i)| pos != i);
    let orig_leaders = entries.iter().filter(|e| leader_idx[e.idx] == e.idx).count();
    let mut distinct = leaders.clone();
    distinct.dedup();
    let changed = moved || distinct.len() != orig_leaders;
    let mut groups: Vec<ListGroup> = Vec::new();
    let mut last_leader = None;
    for (pos, &i) in order.iter().enumerate() {
        let leader = leaders[pos];
        let e = &mut entries[i];
        let event = ListEvent {
            tool_name: matches!(e.built.event, ResolvedEvent::Tool(_)).then(|| e.written.clone()),
            event: e.built.event.clone(),
            pmu: e.built.pmu.clone(),
            topdown: e.topdown,
            uncore_box: e.uncore_box.clone(),
        };
        if last_leader == Some(leader)
            && let Some(g) = groups.last_mut()
        {
            g.events.push(event);
            g.grouped = true;
            g.weak |= e.weak;
        } else {
            groups.push(ListGroup { events: vec![event], grouped: e.braced, weak: e.weak });
        }
        last_leader = Some(leader);
    }
    (groups, changed)
}
