//! Propagation of tree targets: a decided node passes its difference to its subtree and open
//! siblings, targets with one unknown are solved, and targets that stay stuck (or the topdown
//! fields) are fitted.

use std::collections::BTreeSet;

use super::close;
use super::link::TOPDOWN_FIELDS;
use super::problem::{Problem, Solve};
use super::targets::{INFO_STAGE, Target, fraction};
use super::trace;
use crate::profile::Source;

/// Tree target `t` is decided: when its value differs from its target, the targets of its
/// descendants scale with it, and its siblings still open share what the parent leaves of the
/// decided ones, in their workload proportions.
pub(super) fn decide(p: &Problem, targets: &mut [Target], t: usize) {
    targets[t].done = true;
    if targets[t].stage == INFO_STAGE {
        return;
    }
    let m = targets[t].metric;
    let achieved = p.value(m);
    if !achieved.is_finite() {
        // Decided later (its unknowns are another target's): nothing to pass on now.
        return;
    }
    if targets[t].value > 0.0 {
        scale_subtree(targets, m, achieved.max(0.0) / targets[t].value);
    }
    let parent = targets[t].parent;
    let whole = match parent {
        None => 1.0,
        Some(pm) => match targets.iter().find(|x| x.metric == pm) {
            Some(x) if x.done && fraction(p, pm).is_finite() => fraction(p, pm),
            Some(x) => x.value * p.metrics[pm].scale / 100.0,
            None => return,
        },
    };
    let tree = targets[t].tree;
    let siblings: Vec<usize> = (0..targets.len())
        .filter(|&s| {
            targets[s].tree == tree
                && targets[s].stage == targets[t].stage
                && targets[s].parent == parent
        })
        .collect();
    if siblings.len() < 2 {
        return;
    }
    let decided: f64 = siblings
        .iter()
        .filter(|&&s| targets[s].done)
        .map(|&s| {
            let v = fraction(p, targets[s].metric);
            if v.is_finite() {
                v
            } else {
                targets[s].value * p.metrics[targets[s].metric].scale / 100.0
            }
        })
        .sum();
    let open: Vec<usize> = siblings.iter().copied().filter(|&s| !targets[s].done).collect();
    let shares: f64 = open.iter().map(|&s| targets[s].share).sum();
    let left = (whole - decided).max(0.0);
    for &s in &open {
        let share = if shares > 0.0 { targets[s].share / shares } else { 1.0 / open.len() as f64 };
        let old = targets[s].value;
        let new = left * share * 100.0 / p.metrics[targets[s].metric].scale;
        targets[s].value = new;
        if old > 0.0 {
            scale_subtree(targets, targets[s].metric, new / old);
        }
    }
}

/// Scales the open targets below tree node `metric` by `ratio`.
fn scale_subtree(targets: &mut [Target], metric: usize, ratio: f64) {
    if (ratio - 1.0).abs() <= 1e-9 || !ratio.is_finite() {
        return;
    }
    let mut stack = vec![metric];
    while let Some(parent) = stack.pop() {
        for c in targets.iter_mut().filter(|c| c.parent == Some(parent) && c.stage != INFO_STAGE) {
            if !c.done {
                c.value *= ratio;
            }
            stack.push(c.metric);
        }
    }
}

/// The propagation over `targets` (see the module documentation). Unknowns in `reserved`
/// are not solved by the targets that read topdown fields (`fielded`): a correction such as
/// `INT_MISC.CLEARS_COUNT` is left to deeper targets, and the fields are fitted to it after.
pub(super) fn propagate(
    problem: &mut Problem,
    targets: &mut [Target],
    reserved: &BTreeSet<usize>,
    fielded: &BTreeSet<usize>,
) {
    for &v in reserved {
        if problem.vars[v].value.is_none() {
            problem.vars[v].value = Some(0.0);
        }
    }
    loop {
        let pending: Vec<usize> = (0..targets.len()).filter(|&t| !targets[t].done).collect();
        if pending.is_empty() {
            break;
        }
        let unknown = |p: &Problem, m: usize| unknowns(p, m, reserved, fielded);
        // A named metric with two or more unknowns, one of which an open tree target reads,
        // waits for the tree: fitted first, it would choose a count on its own that a tree
        // level needs (Skylake's `UOPS_ISSUED.ANY`, which the delivered-uops percentages divide
        // by and level 1 shares with `INT_MISC.RECOVERY_CYCLES_ANY`: a fit that took it past
        // what level 1 leaves held backend bound at 28.8 % for a true 30 %). Once the tree has
        // decided that count, the named metric is solved for the ones left.
        let stage_of = |t: usize| {
            let waits = targets[t].stage == INFO_STAGE && {
                let us = unknown(problem, targets[t].metric);
                us.len() >= 2
                    && us.iter().any(|v| {
                        pending.iter().any(|&o| {
                            targets[o].stage != INFO_STAGE
                                && problem.deps[targets[o].metric].contains(v)
                        })
                    })
            };
            if waits { u32::MAX } else { targets[t].stage }
        };
        // The shallowest stage still open: its stuck targets come before deeper ones.
        let stage = pending.iter().map(|&t| stage_of(t)).min().expect("pending");
        let current: Vec<usize> =
            pending.iter().copied().filter(|&t| stage_of(t) == stage).collect();
        // A count a shallower open target reads is not for a deeper one to fix.
        let shallower_reads = |v: usize, t: usize| {
            pending
                .iter()
                .any(|&o| stage_of(o) < stage_of(t) && problem.deps[targets[o].metric].contains(&v))
        };
        if let Some(&t) = pending.iter().find(|&&t| unknown(problem, targets[t].metric).is_empty())
        {
            trace(problem, &format!("forced {}", problem.metrics[targets[t].metric].name));
            decide(problem, targets, t);
            continue;
        }
        // One unknown: the unknown fewest other targets read first (it is this target's
        // own), then the shallower target.
        let one = pending
            .iter()
            .copied()
            .filter_map(|t| {
                let u = unknown(problem, targets[t].metric);
                (u.len() == 1 && !shallower_reads(u[0], t)).then(|| {
                    (targets[t].stage, readers(problem, targets, &pending, u[0], t), t, u[0])
                })
            })
            .min();
        if let Some((_, _, t, v)) = one {
            let m = targets[t].metric;
            let r = problem.solve(m, v, targets[t].value);
            if r != Solve::Insensitive {
                problem.vars[v].pinned = true;
                problem.vars[v].soft = targets[t].stage == INFO_STAGE;
            }
            trace(
                problem,
                &format!(
                    "solve {} for {} -> {r:?}",
                    problem.metrics[m].name, problem.vars[v].label
                ),
            );
            decide(problem, targets, t);
            continue;
        }
        // Stuck: the shallowest target with fewest unknowns. A least-squares fit over it and
        // the open targets its unknowns connect it to chooses their values.
        let &t = current
            .iter()
            .min_by_key(|&&t| (unknown(problem, targets[t].metric).len(), t))
            .expect("pending is not empty");
        fit_stuck(problem, targets, &pending, t, reserved, fielded);
    }
}

/// The unknowns target metric `m` still has. A reserved correction holds a provisional 0
/// that only the fields' own targets read as known.
pub(super) fn unknowns(
    p: &Problem,
    m: usize,
    reserved: &BTreeSet<usize>,
    fielded: &BTreeSet<usize>,
) -> Vec<usize> {
    let fields_target = fielded.contains(&m);
    p.deps[m]
        .iter()
        .copied()
        .filter(|&v| {
            p.vars[v].value.is_none()
                || (!fields_target && reserved.contains(&v) && !p.vars[v].pinned)
        })
        .collect()
}

/// How many `pending` targets other than `except` read unknown `v`.
fn readers(p: &Problem, targets: &[Target], pending: &[usize], v: usize, except: usize) -> usize {
    pending.iter().filter(|&&o| o != except && p.deps[targets[o].metric].contains(&v)).count()
}

/// Target `t` is stuck (the shallowest with fewest unknowns, none solvable alone): a
/// least-squares fit over it and the open targets its unknowns connect it to chooses their
/// values, then `t` is decided.
pub(super) fn fit_stuck(
    problem: &mut Problem,
    targets: &mut [Target],
    pending: &[usize],
    t: usize,
    reserved: &BTreeSet<usize>,
    fielded: &BTreeSet<usize>,
) {
    let m = targets[t].metric;
    let us = unknowns(problem, m, reserved, fielded);
    let mut order = us.clone();
    order.sort_by_key(|&v| (readers(problem, targets, pending, v, t), std::cmp::Reverse(v)));
    let mut vars: BTreeSet<usize> = us.iter().copied().collect();
    let mut members: BTreeSet<usize> = BTreeSet::from([t]);
    loop {
        let before = (vars.len(), members.len());
        for &o in pending {
            let u = unknowns(problem, targets[o].metric, reserved, fielded);
            if u.iter().any(|v| vars.contains(v)) && members.len() < 64 {
                members.insert(o);
                vars.extend(u);
            }
        }
        if (vars.len(), members.len()) == before || vars.len() > 48 {
            break;
        }
    }
    let goals: Vec<(usize, f64, f64)> = members
        .iter()
        .map(|&o| {
            let w = if targets[o].stage == INFO_STAGE {
                0.05
            } else {
                1.0 / (1.0 + f64::from(targets[o].stage))
            };
            (targets[o].metric, targets[o].value, w)
        })
        .collect();
    let vars: Vec<usize> = vars.into_iter().collect();
    problem.least_squares(&goals, &vars);
    let all_met = goals.iter().all(|g| close(problem.value(g.0), g.1));
    if all_met {
        // The fit meets every connected target: keep all of it (what it chose for the
        // other targets' unknowns stays movable by repairs).
        for &v in &vars {
            problem.vars[v].pinned = true;
            problem.vars[v].soft = !us.contains(&v);
        }
    } else {
        // Only this target's unknowns keep the fit's values; the others are left to
        // their own targets.
        for &v in &vars {
            if !us.contains(&v) {
                problem.vars[v].value = None;
            }
        }
    }
    // The fit's compromise missed this target: one of its unknowns, solved alone,
    // may still meet it.
    if !close(problem.value(m), targets[t].value) {
        let saved: Vec<Option<f64>> = us.iter().map(|&v| problem.vars[v].value).collect();
        for &cand in &order {
            if problem.solve(m, cand, targets[t].value) == Solve::Met {
                break;
            }
            for (&v, &value) in us.iter().zip(&saved) {
                problem.vars[v].value = value;
            }
        }
    }
    for &v in &us {
        problem.vars[v].pinned = true;
    }
    trace(
        problem,
        &format!(
            "fit {} over {:?}: met {}",
            problem.metrics[m].name,
            us.iter().map(|&v| problem.vars[v].label.as_str()).collect::<Vec<_>>(),
            close(problem.value(m), targets[t].value)
        ),
    );
    decide(problem, targets, t);
}

/// Sets the topdown fields so that their tree nodes meet their targets with the corrections
/// as they are: level 1 (retiring, frontend, backend; bad speculation takes the rest of the
/// slots), then level 2.
pub(super) fn fit_fields(
    problem: &mut Problem,
    targets: &[Target],
    fields: &BTreeSet<usize>,
    pmu_names: &[String],
) {
    let node_of = |v: usize, p: &Problem| -> Option<&'static str> {
        match p.vars[v].source {
            Source::X86 { config, .. } => {
                TOPDOWN_FIELDS.get(((config & 0xffff) - 0x8000) as usize >> 8).copied()
            }
            _ => None,
        }
    };
    // The node's target on the field's own PMU (a hybrid has one tree per core type).
    let target_for = |node: &str, v: usize, p: &Problem| {
        let Source::X86 { pmu, .. } = p.vars[v].source else { return None };
        let pmu = pmu_names[pmu].as_str();
        targets.iter().find(|t| {
            let d = &p.metrics[t.metric];
            t.stage != INFO_STAGE
                && d.name == node
                && (d.pmu == pmu || d.pmu == "default_core" || d.pmu == "cpu")
        })
    };
    let l1: Vec<usize> = fields
        .iter()
        .copied()
        .filter(|&f| node_of(f, problem).is_some_and(|x| TOPDOWN_FIELDS[..4].contains(&x)))
        .collect();
    let bs: Vec<usize> =
        l1.iter().copied().filter(|&f| node_of(f, problem) == Some(TOPDOWN_FIELDS[1])).collect();
    // Bad speculation takes what the other level-1 fields leave of the slots, so their sum
    // stays the slots and each node depends on its own field alone.
    let pmu_of = |v: usize, p: &Problem| match p.vars[v].source {
        Source::X86 { pmu, .. } => pmu,
        _ => usize::MAX,
    };
    let settle = |p: &mut Problem| {
        for &b in &bs {
            let width = p.vars[b].hi;
            let others: f64 = l1
                .iter()
                .filter(|&&f| !bs.contains(&f) && pmu_of(f, p) == pmu_of(b, p))
                .filter_map(|&f| p.vars[f].value)
                .sum();
            p.vars[b].value = Some((width - others).max(0.0));
        }
    };
    for n in [0usize, 2, 3, 4, 5, 6, 7] {
        for &v in fields {
            if node_of(v, problem) != Some(TOPDOWN_FIELDS[n]) {
                continue;
            }
            let Some(t) = target_for(TOPDOWN_FIELDS[n], v, problem) else { continue };
            let (m, goal) = (t.metric, t.value);
            // Bisection over the field with the slots' sum held (the node rises with it).
            let (mut lo, mut hi) = (0.0, problem.vars[v].hi);
            for _ in 0..100 {
                let mid = 0.5 * (lo + hi);
                problem.vars[v].value = Some(mid);
                if n < 4 {
                    settle(problem);
                }
                if problem.value(m) < goal {
                    lo = mid;
                } else {
                    hi = mid;
                }
            }
            problem.vars[v].value = Some(0.5 * (lo + hi));
            if n < 4 {
                settle(problem);
            }
        }
    }
}
