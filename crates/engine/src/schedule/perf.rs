//! perf 6.12's strategy, as the baseline: `parse_groups` (tools/perf/util/metricgroup.c)
//! merging metrics' id sets, then weak groups broken at open (tools/perf/builtin-stat.c) and
//! loose topdown events gathered behind `slots`.

use std::collections::BTreeSet;

use super::placement::finish;
use super::{Request, Schedule, assign, early_placements};
use crate::pmu::PmuModel;

pub(super) fn perf(request: &Request, model: &PmuModel) -> Schedule {
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
