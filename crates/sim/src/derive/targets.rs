//! A phase's targets (the workload's named metrics, then each core PMU's tree level by
//! level), the topdown fields pinned to the tree, the staged solving, and the repair of
//! metrics left out of their valid range.

use std::collections::{BTreeSet, HashMap};

use super::close;
use super::link::TOPDOWN_FIELDS;
use super::problem::{Problem, Var};
use super::propagate::{fit_fields, propagate};
use super::tree::{build_tree, effective_tree};
use crate::machine::Machine;
use crate::profile::Source;
use crate::workload::PhaseSpec;

/// The propagation's targets for `phase`: each core PMU's tree level by level, each node a
/// share of its parent's achieved value, then the workload's named metrics. Also each tree
/// node's absolute fraction.
pub(super) fn phase_targets(
    problem: &Problem,
    groups: &[String],
    phase: &PhaseSpec,
) -> (Vec<Target>, HashMap<usize, f64>) {
    // Targets: the named metrics first (stage 0), then each core PMU's tree level by level,
    // each node a share of its parent's achieved value.
    let mut targets: Vec<Target> = Vec::new();
    let mut pmu_names: Vec<String> = problem.metrics.iter().map(|m| m.pmu.clone()).collect();
    pmu_names.sort();
    pmu_names.dedup();
    let mut tree_fractions: HashMap<usize, f64> = HashMap::new();
    for (tree_id, pmu) in pmu_names.iter().enumerate() {
        let tree = build_tree(&problem.metrics, groups, pmu);
        let values = effective_tree(&tree, &problem.metrics, &phase.topdown);
        for &(m, parent, level) in &tree.nodes {
            let whole = parent.map_or(1.0, |p| values[&p]);
            let siblings = tree.nodes.iter().filter(|n| n.1 == parent).count();
            let share = if whole > 0.0 { values[&m] / whole } else { 1.0 / siblings as f64 };
            targets.push(Target {
                metric: m,
                tree: tree_id,
                stage: level,
                parent,
                share,
                value: f64::NAN,
                done: false,
            });
            tree_fractions.insert(m, values[&m]);
        }
    }
    for (name, value) in &phase.metrics {
        for (m, d) in problem.metrics.iter().enumerate() {
            if d.name == *name && !d.tree && !targets.iter().any(|t| t.metric == m) {
                targets.push(Target {
                    metric: m,
                    tree: usize::MAX,
                    stage: INFO_STAGE,
                    parent: None,
                    share: 0.0,
                    value: value / d.scale,
                    done: false,
                });
            }
        }
    }
    (targets, tree_fractions)
}

/// The PERF_METRICS fields take their node's fraction of slots.
pub(super) fn pin_topdown_fields(
    problem: &mut Problem,
    machine: &Machine,
    tree_fractions: &HashMap<usize, f64>,
) {
    for v in 0..problem.vars.len() {
        let Source::X86 { pmu, config, .. } = problem.vars[v].source else { continue };
        let code = config & 0xffff;
        if problem.vars[v].value.is_some() || !(0x8000..=0x8700).contains(&code) || code & 0xff != 0
        {
            continue;
        }
        let node = TOPDOWN_FIELDS[((code - 0x8000) >> 8) as usize];
        let pmu_name = &machine.pmus[pmu].name;
        let frac = problem
            .metrics
            .iter()
            .enumerate()
            .find(|(i, m)| {
                m.name == node
                    && (m.pmu == *pmu_name || m.pmu == "default_core" || m.pmu == "cpu")
                    && tree_fractions.contains_key(i)
            })
            .map_or(0.0, |(i, _)| tree_fractions[&i]);
        let width = machine.pmus[pmu].x86().map_or(4.0, |c| c.width as f64);
        problem.vars[v].value = Some(frac * width);
        problem.vars[v].pinned = true;
        problem.vars[v].known = true;
    }
}

/// Solves the unknowns toward the targets. Where topdown fields (PERF_METRICS) are counted
/// and their metrics subtract corrections, in two passes around fitting the fields.
pub(super) fn solve_targets(problem: &mut Problem, targets: &mut Vec<Target>, machine: &Machine) {
    // Topdown fields (PERF_METRICS) and the corrections their metrics subtract.
    let field_vars: BTreeSet<usize> = (0..problem.vars.len())
        .filter(|&v| {
            matches!(problem.vars[v].source, Source::X86 { config, .. }
            if (0x8000..=0x8700).contains(&(config & 0xffff)) && config & 0xff == 0)
        })
        .collect();
    // A node whose own field is counted (level 1 on Ice Lake, 1 and 2 on Golden Cove).
    let own_field = |p: &Problem, m: usize| {
        p.deps[m].iter().any(|&v| {
            field_vars.contains(&v)
                && matches!(p.vars[v].source, Source::X86 { config, .. }
                    if TOPDOWN_FIELDS.get(((config & 0xffff) - 0x8000) as usize >> 8)
                        == Some(&p.metrics[m].name.as_str()))
        })
    };
    let fielded: BTreeSet<usize> =
        targets.iter().map(|t| t.metric).filter(|&m| own_field(problem, m)).collect();
    let reserved: BTreeSet<usize> = fielded
        .iter()
        .flat_map(|&m| problem.deps[m].iter().copied())
        .filter(|&v| problem.vars[v].value.is_none())
        .collect();
    // A correction is a few percent of the slots at most, so the fields stay in range.
    for &v in &reserved {
        if let Source::X86 { pmu, .. } = problem.vars[v].source {
            let width = machine.pmus[pmu].x86().map_or(4.0, |c| c.width as f64);
            problem.vars[v].hi = problem.vars[v].hi.min(0.01 * width);
            problem.vars[v].default = problem.vars[v].default.min(0.002 * width);
        }
    }
    if field_vars.is_empty() || reserved.is_empty() {
        propagate(problem, targets, &BTreeSet::new(), &BTreeSet::new());
    } else {
        // Pass 1 decides the corrections without the fields' targets; the fields are fitted
        // to them; pass 2 solves everything else again with both fixed.
        let fresh: Vec<Var> = problem.vars.clone();
        let fresh_targets = targets.clone();
        // Other targets see the fields' nodes at their targets, as they will be.
        problem.overrides = targets
            .iter()
            .filter(|t| fielded.contains(&t.metric))
            .map(|t| (t.metric, t.value))
            .collect();
        problem.compute_deps();
        propagate(problem, targets, &reserved, &fielded);
        problem.overrides.clear();
        problem.compute_deps();
        let corrections: Vec<(usize, f64)> = reserved
            .iter()
            .map(|&v| {
                (v, if problem.vars[v].pinned { problem.vars[v].value.unwrap_or(0.0) } else { 0.0 })
            })
            .collect();
        problem.vars = fresh;
        *targets = fresh_targets;
        for &(v, x) in &corrections {
            problem.vars[v].value = Some(x);
            problem.vars[v].pinned = true;
        }
        let machine_pmus: Vec<String> = machine.pmus.iter().map(|p| p.name.clone()).collect();
        fit_fields(problem, targets, &field_vars, &machine_pmus);
        propagate(problem, targets, &BTreeSet::new(), &BTreeSet::new());
    }
}

/// Repairs metrics out of their valid range, nearest their targets, by moving free unknowns
/// (or, as a last resort, solved ones when that leaves fewer metrics out of range).
pub(super) fn repair_out_of_range(problem: &mut Problem, target_of: &HashMap<usize, f64>) {
    let met_targets = |p: &Problem| {
        target_of.iter().filter(|&(&m, &t)| p.metrics[m].tree && close(p.value(m), t)).count()
    };
    let out_of_range = |p: &Problem| {
        (0..p.metrics.len())
            .filter(|&m| {
                let v = p.value(m);
                let (lo, hi) = p.metrics[m].range;
                !(p.reads_missing(m, 0) || v.is_finite() && v >= lo - 1e-12 && v <= hi + 1e-12)
            })
            .count()
    };
    for _round in 0..8 {
        let mut changed = false;
        for m in 0..problem.metrics.len() {
            let value = problem.value(m);
            let (lo, hi) = problem.metrics[m].range;
            let ok = value.is_finite() && value >= lo - 1e-12 && value <= hi + 1e-12;
            if ok {
                continue;
            }
            let want = match target_of.get(&m) {
                Some(&t) if t >= lo && t <= hi => t,
                _ if hi.is_finite() => lo + 0.1 * (hi - lo),
                _ => lo + 0.1,
            };
            // Free unknowns first; as a last resort any solved one, when the change leaves
            // no more metrics out of range than before (a target it fixed then misses).
            let mut free: Vec<usize> = problem.deps[m]
                .iter()
                .copied()
                .filter(|&v| !problem.vars[v].pinned || problem.vars[v].soft)
                .rev()
                .collect();
            let last_resort: Vec<usize> = problem.deps[m]
                .iter()
                .copied()
                .filter(|&v| !problem.vars[v].known && !free.contains(&v))
                .collect();
            let tier = free.len();
            free.extend(last_resort);
            let bad_before = out_of_range(problem);
            let met_before = met_targets(problem);
            for (i, v) in free.into_iter().enumerate() {
                let before = problem.vars[v].value;
                problem.solve(m, v, want);
                let after = problem.value(m);
                let fixed = after.is_finite() && after >= lo - 1e-12 && after <= hi + 1e-12;
                if fixed
                    && (i < tier
                        || (out_of_range(problem) < bad_before
                            && met_targets(problem) >= met_before))
                {
                    problem.vars[v].pinned = true;
                    problem.vars[v].soft = false;
                    changed = true;
                    break;
                }
                problem.vars[v].value = before;
            }
        }
        if !changed {
            break;
        }
    }
}

/// The stage of the workload's named metrics: before the tree, so rates per instruction set
/// the scale of counts the tree's ratios leave free; a count they fix stays movable when a
/// tree node would otherwise leave its range.
pub(super) const INFO_STAGE: u32 = 0;

/// A tree target of the propagation.
#[derive(Debug, Clone)]
pub(super) struct Target {
    pub(super) metric: usize,
    /// Which PMU's tree.
    pub(super) tree: usize,
    /// The tree level, or [`INFO_STAGE`] for the workload's named metrics.
    pub(super) stage: u32,
    /// The parent node's metric.
    pub(super) parent: Option<usize>,
    /// The share of the parent's value (tree nodes).
    pub(super) share: f64,
    /// The raw value to reach.
    pub(super) value: f64,
    pub(super) done: bool,
}

/// A metric's value as a fraction of slots (TMA nodes are printed as percentages).
pub(super) fn fraction(p: &Problem, metric: usize) -> f64 {
    p.value(metric) * p.metrics[metric].scale / 100.0
}
