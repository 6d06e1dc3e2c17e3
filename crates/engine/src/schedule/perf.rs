//! perf 6.12's strategy, the baseline tmetric is measured against, reproduced step by step
//! from its source:
//!
//! 1. `parse_groups` (tools/perf/util/metricgroup.c): the root metrics in the order perf
//!    adds them (`metricgroup__add_metric`: every match at the head of its item's list,
//!    every item's list at the head of the whole), sorted by their number of identifiers
//!    other than tool events, largest first (`metric_list_cmp`, a stable `list_sort`); the
//!    identifiers of every ungrouped metric without a modifier joined into one flat list
//!    (`build_combined_expr_ctx`); every other metric reusing the list of an earlier metric
//!    whose identifiers hold all of its own (`expr__subset_of_ids`, same modifier and PMU),
//!    or getting its own, a weak group `{...}:W` when grouped; tool events added to every
//!    list (`parse_ids`); the flat list first in the event list, then the others in order.
//!    Identifiers keep perf's hashmap order ([`PerfIds`]), which is the order of the events
//!    in the text (`metricgroup__build_event_string`).
//! 2. `parse_events__sort_events_and_fix_groups` (tools/perf/util/parse-events.c) on each
//!    list: see [`order`].
//! 3. builtin-stat.c `__run_perf_stat`'s two passes: see [`open`].
//!
//! The result opens in perf's order ([`Schedule::open`]): the kernel rotates flexible groups
//! in the order they were created, so the order decides what counts together.

mod open;
mod order;

use tmetric_model::PerfIds;

use super::bound::counting_bound;
use super::{
    Group, Opened, PerfList, Placement, Request, SchedMetric, Schedule, Slot, assign,
    early_placements,
};
use crate::pmu::PmuModel;

/// perf's tool events, in its enum order (`perf_tool_event__for_each_event`, util/evsel.c).
const TOOL_EVENTS: [&str; 3] = ["duration_time", "user_time", "system_time"];

fn is_tool(key: &str) -> bool {
    TOOL_EVENTS.contains(&key)
}

/// One root metric as `parse_groups` holds it.
struct Root<'a> {
    metric: &'a SchedMetric,
    ids: PerfIds<String>,
    /// Key to request event.
    events: Vec<(String, usize)>,
}

/// One list perf parses: the identifiers in text order, the tool events after them.
#[derive(Debug, Clone)]
pub(super) struct List {
    pub(super) grouped: bool,
    pub(super) keys: Vec<String>,
    pub(super) tools: Vec<String>,
    pub(super) modifier: Option<String>,
    /// Key to request event, for the list's own identifiers.
    pub(super) events: Vec<(String, usize)>,
}

impl List {
    /// `metricgroup__build_event_string`: each identifier as an event with its `metric-id`
    /// (`@` spelled `/`, `,-=@` encoded as `!0`..`!3`), a weak group when grouped, tool
    /// events after.
    fn text(&self) -> String {
        let mut out = String::new();
        for (i, id) in self.keys.iter().enumerate() {
            if i == 0 {
                if self.grouped {
                    out.push('{');
                }
            } else {
                out.push(',');
            }
            let rest = if let Some(at) = id.find('@') {
                let last = id.rfind('@').unwrap_or(at);
                out.push_str(&id[..at]);
                out.push('/');
                out.push_str(&id[at + 1..last.max(at + 1)]);
                out.push_str(",metric-id=");
                Some(&id[last + 1..])
            } else if let Some(colon) = id.find(':') {
                out.push_str(&id[..colon]);
                out.push_str("/metric-id=");
                Some(&id[colon + 1..])
            } else {
                out.push_str(id);
                out.push_str("/metric-id=");
                None
            };
            for c in id.chars() {
                match ",-=@".find(c) {
                    Some(k) => {
                        out.push('!');
                        out.push(char::from(b'0' + k as u8));
                    }
                    None => out.push(c),
                }
            }
            out.push('/');
            if let Some(rest) = rest {
                out.push_str(rest);
            }
            if let Some(m) = &self.modifier {
                out.push_str(m);
            }
        }
        if !self.keys.is_empty() && self.grouped {
            out.push_str("}:W");
        }
        for tool in &self.tools {
            if !out.is_empty() {
                out.push(',');
            }
            out.push_str(tool);
        }
        out
    }
}

/// The roots with their identifiers: perf's when the request has them, else the metric's
/// events (value and threshold) by name.
fn roots(request: &Request) -> Vec<Root<'_>> {
    request
        .metrics
        .iter()
        .map(|metric| {
            if !metric.perf.is_empty() {
                return Root {
                    metric,
                    ids: metric.perf.ids.clone(),
                    events: metric.perf.events.clone(),
                };
            }
            let mut ids = PerfIds::new();
            let mut events = Vec::new();
            for &e in metric.events.iter().chain(&metric.threshold_events) {
                let key = request.events[e].name.clone();
                if !events.iter().any(|(k, _): &(String, usize)| *k == key) {
                    ids.insert(key.clone());
                    events.push((key, e));
                }
            }
            Root { metric, ids, events }
        })
        .collect()
}

/// The roots' order after `metricgroup__add_metric_list` and `metric_list_cmp`.
fn sorted(roots: &[Root<'_>]) -> Vec<usize> {
    // Added at the head: the last item's last table entry comes first.
    let mut order: Vec<usize> = (0..roots.len()).collect();
    order.sort_by(|&a, &b| {
        let (a, b) = (&roots[a].metric.perf, &roots[b].metric.perf);
        (b.item, &b.table).cmp(&(a.item, &a.table))
    });
    let count = |r: &Root<'_>| r.ids.iter().filter(|k| !is_tool(k)).count();
    order.sort_by_key(|&r| std::cmp::Reverse(count(&roots[r])));
    order
}

/// `parse_groups` up to the event lists: the lists in event-list order, and per root the
/// list it reads (`None` for a root left out).
fn parse_groups(
    request: &Request,
    roots: &mut [Root<'_>],
    skip: &[bool],
) -> (Vec<List>, Vec<Option<usize>>) {
    let mut order = sorted(roots);
    order.retain(|&r| !skip[r]);
    let no_merge = request.perf.no_merge;
    // `find_tool_events`: every tool event any root needs, added to every list.
    let tools: Vec<String> = TOOL_EVENTS
        .iter()
        .filter(|t| roots.iter().any(|r| r.ids.contains(t)))
        .map(|t| t.to_string())
        .collect();
    // `parse_ids`: tool events inserted into the list's own set before it is written.
    let make = |ids: &mut PerfIds<String>,
                grouped: bool,
                modifier: Option<String>,
                events: &[(String, usize)]| {
        if !no_merge || ids.is_empty() {
            for t in &tools {
                ids.insert(t.clone());
            }
            if tools.is_empty() && ids.is_empty() {
                ids.insert("duration_time".into());
            }
        }
        let keys: Vec<String> = ids.iter().filter(|k| !is_tool(k)).cloned().collect();
        let tools: Vec<String> =
            TOOL_EVENTS.iter().filter(|t| ids.contains(t)).map(|t| t.to_string()).collect();
        let events = events.iter().filter(|(k, _)| keys.contains(k)).cloned().collect();
        List { grouped, keys, tools, modifier, events }
    };
    let mut lists: Vec<List> = Vec::new();
    let mut list_of: Vec<Option<usize>> = vec![None; roots.len()];
    let mut combined: Option<usize> = None;
    if !no_merge {
        let mut ids: PerfIds<String> = PerfIds::new();
        let mut events: Vec<(String, usize)> = Vec::new();
        for &r in &order {
            let root = &roots[r];
            if !root.metric.grouped && root.metric.perf.modifier.is_none() {
                for k in root.ids.iter() {
                    ids.insert(k.clone());
                }
                for ev in &root.events {
                    if !events.contains(ev) {
                        events.push(ev.clone());
                    }
                }
            }
        }
        if !ids.is_empty() {
            lists.push(make(&mut ids, false, None, &events));
            combined = Some(0);
        }
    }
    if request.perf.default {
        // `default_metricgroup_cmp`: by DefaultMetricgroupName, then name, both reversed.
        order.sort_by(|&a, &b| {
            let (a, b) = (&roots[a].metric, &roots[b].metric);
            (&b.perf.default_group, &b.name).cmp(&(&a.perf.default_group, &a.name))
        });
    }
    // Which roots own a list, in order.
    let mut own: Vec<(usize, usize)> = Vec::new();
    for (pos, &r) in order.iter().enumerate() {
        let grouped = roots[r].metric.grouped;
        if let (Some(c), false) = (combined, grouped) {
            list_of[r] = Some(c);
            continue;
        }
        if !no_merge {
            let earlier = order[..pos].iter().find_map(|&n| {
                let (m, o) = (&roots[r], &roots[n]);
                let owned = own.iter().find(|(root, _)| *root == n)?;
                let same = m.metric.perf.modifier == o.metric.perf.modifier
                    && m.metric.perf.table.0 == o.metric.perf.table.0;
                (same && m.ids.iter().all(|k| o.ids.contains(k))).then_some(owned.1)
            });
            if let Some(list) = earlier {
                list_of[r] = Some(list);
                continue;
            }
        }
        let modifier = roots[r].metric.perf.modifier.clone();
        let events = roots[r].events.clone();
        let list = make(&mut roots[r].ids, grouped, modifier, &events);
        lists.push(list);
        own.push((r, lists.len() - 1));
        list_of[r] = Some(lists.len() - 1);
    }
    (lists, list_of)
}

pub(super) fn perf(request: &Request, model: &PmuModel) -> Schedule {
    let all = &request.events;
    let early = early_placements(request, model);
    let mut roots = roots(request);
    // Roots with no counter to place keep their early placement; perf would fail on an
    // event it cannot parse at all, which the request never holds.
    let skip: Vec<bool> =
        early.iter().map(|p| matches!(p, Some(Placement::Impossible { .. }))).collect();
    let (lists, list_of) = parse_groups(request, &mut roots, &skip);
    let evlist = order::evlist(request, model, &lists);
    let opened = open::open(request, model, &evlist);
    // Groups and singles in the order perf opened them.
    let mut groups: Vec<Group> = Vec::new();
    let mut singles: Vec<usize> = Vec::new();
    let mut open: Vec<Opened> = Vec::new();
    let mut unit_list: Vec<usize> = Vec::new();
    for unit in &opened.units {
        let events: Vec<usize> = unit.members.iter().map(|&i| evlist[i].event).collect();
        unit_list.push(evlist[unit.members[0]].list);
        if events.len() == 1 {
            singles.push(events[0]);
            open.push(Opened::Single(events[0]));
        } else {
            let pmu = all[events[0]].pmu.expect("hardware events");
            let slots = assign(&model.pmus[pmu], all, &events, true)
                .unwrap_or_else(|| vec![Slot::None; events.len()]);
            groups.push(Group { pmu: Some(pmu), events, slots });
            open.push(Opened::Group(groups.len() - 1));
        }
    }
    // Time slices per PMU: one when everything perf opened there counts at once (the kernel
    // places flexible groups while they fit, the watchdog's counter taken); else its groups
    // plus what its lone events need at best.
    let mut slices_per_pmu = vec![0usize; model.pmus.len()];
    for (p, slices) in slices_per_pmu.iter_mut().enumerate() {
        let here: Vec<usize> = opened
            .units
            .iter()
            .flat_map(|u| u.members.iter().map(|&i| evlist[i].event))
            .filter(|&e| all[e].pmu == Some(p))
            .collect();
        if here.is_empty() {
            continue;
        }
        if assign(&model.pmus[p], all, &here, false).is_some() {
            *slices = 1;
            continue;
        }
        *slices = groups.iter().filter(|g| g.pmu == Some(p)).count();
        let alone: Vec<usize> =
            singles.iter().copied().filter(|&e| all[e].pmu == Some(p)).collect();
        if !alone.is_empty() {
            let request = Request {
                events: all.to_vec(),
                metrics: vec![SchedMetric {
                    name: String::new(),
                    events: alone,
                    threshold_events: Vec::new(),
                    grouped: false,
                    pack: false,
                    perf: Default::default(),
                }],
                perf: request.perf,
            };
            *slices += counting_bound(&request, model)[p];
        }
    }
    // Counterless inputs: one group, as every strategy reports them.
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
    let reads: Vec<Vec<usize>> = list_of
        .iter()
        .map(|l| match l {
            Some(l) => (0..open.len()).filter(|&u| unit_list[u] == *l).collect(),
            None => Vec::new(),
        })
        .collect();
    let placements = request
        .metrics
        .iter()
        .enumerate()
        .map(|(m, metric)| {
            early[m].clone().unwrap_or_else(|| {
                let reopened = list_of[m].is_some_and(|l| opened.reopened.contains(&l));
                let list = list_of[m].map(|l| &lists[l]);
                placement(metric, all, (&open, &groups), &reads[m], list, reopened)
            })
        })
        .collect();
    let perf_lists = lists
        .iter()
        .enumerate()
        .map(|(l, list)| PerfList {
            text: list.text(),
            metrics: (0..roots.len())
                .filter(|&r| list_of[r] == Some(l))
                .map(|r| request.metrics[r].name.clone())
                .collect(),
            reopened: opened.reopened.contains(&l),
        })
        .collect();
    Schedule { groups, singles, placements, slices_per_pmu, open, reads, perf_lists, loose: false }
}

/// Where a metric's value events were counted: together when, on each PMU it uses, one
/// opened group (or lone event) of its list holds them all.
fn placement(
    metric: &SchedMetric,
    all: &[super::SchedEvent],
    schedule: (&[Opened], &[Group]),
    reads: &[usize],
    list: Option<&List>,
    reopened: bool,
) -> Placement {
    let (open, groups) = schedule;
    let members = |u: usize| -> Vec<usize> {
        match open[u] {
            Opened::Group(g) => groups[g].events.clone(),
            Opened::Single(e) => vec![e],
        }
    };
    let group_of = |u: usize| match open[u] {
        Opened::Group(g) => Some(g),
        Opened::Single(_) => None,
    };
    let mut pmus: Vec<usize> = metric.events.iter().filter_map(|&e| all[e].pmu).collect();
    pmus.sort_unstable();
    pmus.dedup();
    let together: Vec<usize> = pmus
        .iter()
        .filter_map(|&p| {
            let needed: Vec<usize> =
                metric.events.iter().copied().filter(|&e| all[e].pmu == Some(p)).collect();
            reads.iter().copied().find(|&u| needed.iter().all(|e| members(u).contains(e)))
        })
        .collect();
    if together.len() == pmus.len() && together.iter().all(|&u| group_of(u).is_some()) {
        return Placement::Together {
            groups: together.iter().filter_map(|&u| group_of(u)).collect(),
        };
    }
    let why = match list {
        Some(list) if !list.grouped => {
            "not grouped (MetricConstraint, MetricgroupNoGroup or --metric-no-group)".to_string()
        }
        Some(_) if reopened => {
            "its events do not fit one group: perf broke its weak group".to_string()
        }
        _ => "its events are counted alone".to_string(),
    };
    Placement::Spread { groups: reads.iter().filter_map(|&u| group_of(u)).collect(), why }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_are_written_as_metricgroup_build_event_string_writes_them() {
        let list = List {
            grouped: true,
            keys: vec![
                "topdown-retiring".into(),
                "cpu_core@INST_RETIRED.ANY@".into(),
                "INT_MISC.RECOVERY_CYCLES:c1:e1".into(),
                "msr@tsc@".into(),
                "cpu@UOPS_EXECUTED.THREAD\\,cmask\\=1@".replace('\\', ""),
            ],
            tools: vec!["duration_time".into()],
            modifier: None,
            events: Vec::new(),
        };
        assert_eq!(
            list.text(),
            "{topdown-retiring/metric-id=topdown!1retiring/,\
             cpu_core/INST_RETIRED.ANY,metric-id=cpu_core!3INST_RETIRED.ANY!3/,\
             INT_MISC.RECOVERY_CYCLES/metric-id=INT_MISC.RECOVERY_CYCLES:c1:e1/c1:e1,\
             msr/tsc,metric-id=msr!3tsc!3/,\
             cpu/UOPS_EXECUTED.THREAD,cmask=1,metric-id=cpu!3UOPS_EXECUTED.THREAD!0cmask!21!3/}:W,\
             duration_time"
        );
        let flat = List { grouped: false, keys: Vec::new(), ..list };
        assert_eq!(flat.text(), "duration_time");
    }
}
