//! From a [`SimWorkload`]'s truth to every event count of a simulated machine, through the vendor
//! formulas of the machine's catalogue model.
//!
//! The view is the one `tmetric stat -a` takes: one second, core events summed over the
//! CPUs of their PMU, uncore events over every box and package, `msr` events over the CPUs of
//! the metric's core PMU, `duration_time` 1. Each counted quantity the kernel tells apart
//! ([`Source`]: PMU, kept config, config1) is one unknown: a count per cycle for core events,
//! per second for the others; the AnyThread bit and `:k`/`:u` are factors on it. The clock
//! families are known (cycles, instructions, reference cycles, TSC, slots, and the
//! PERF_METRICS topdown fields as their tree nodes' fractions of slots); everything else
//! is solved so that the metrics evaluate to the truth:
//!
//! 1. targets: the workload's other named metrics first (stage 0: rates per instruction set
//!    the scale of counts that the tree's ratios leave free), then each core PMU's TMA tree
//!    level by level, made whole for the model (see [`crate::workload`]), each node's target a
//!    share of its parent's value;
//! 2. propagation, shallowest stage first: a target whose formula reads exactly one unknown is
//!    solved for it (a bracketed root search over the unknown's range; cycle-type events stay
//!    at or under one per cycle, micro-op events under twice the width), unless a shallower
//!    open target also reads that count; a target whose unknowns are all known is decided as
//!    the formulas make it; when the shallowest stage has only targets with two or more
//!    unknowns, a Levenberg-Marquardt fit (log space, several starts, a weak pull towards
//!    default rates) over that target and the open targets its unknowns connect it to chooses
//!    their values;
//! 3. a tree node that ends away from its target passes the difference on: its subtree's
//!    targets scale with it and its open siblings share what the parent leaves, so children
//!    keep summing to their parent where the formulas allow it;
//! 4. corrections that level-1 and level-2 formulas subtract from the topdown fields
//!    (`INT_MISC.UOP_DROPPING`, Ice Lake's `INT_MISC.CLEARS_COUNT`) are decided by the targets
//!    deeper down first (the tree's other nodes seeing those levels at their targets), then the
//!    fields are fitted to them and everything else is solved again;
//! 5. every unknown some metric reads and no target fixed gets a default rate; a metric out of
//!    its valid range (negative, a percentage above 100, a tree node outside 0..1) is brought
//!    back by solving one of those free unknowns, or one only a named non-tree metric fixed.
//!
//! A target that cannot be met keeps the value the formulas give (the vendor formulas
//! approximate, and some cannot all hold at once: `tma_mispredicts_resteers` and
//! `tma_clears_resteers` split one count in the ratio of their parents, the port
//! utilizations average where the tree shows children, Skylake's fused-branch share follows
//! from IPC and the heavy-operations fraction); [`Derivation::report`] lists every metric with
//! the workload's target and the value, and that value is the metric's truth. The example
//! `cargo run -p tmetric-sim --example truth -- MACHINE [WORKLOAD]` prints what a workload
//! becomes on a machine. Events no metric reads keep the simulator's pseudo rates.
//!
//! The formulas are read with this crate's own parser ([`crate::formula`]), not through
//! tmetric's compiled catalogue or interpreter, so the counts are the vendor formulas'
//! consequence and tmetric's evaluation is checked against them. `TMETRIC_SIM_TRACE` set
//! prints each step to standard error.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

use tmetric_catalog::Model;

use crate::machine::Machine;
use crate::profile::Source;
use crate::workload::{PhaseSpec, SimWorkload};

mod encode;
mod fit;
mod link;
mod problem;
mod propagate;
mod targets;
mod tree;

pub use link::counts_cycles;
use link::{Builder, parse_metrics};
use problem::Problem;
use targets::{INFO_STAGE, phase_targets, pin_topdown_fields, repair_out_of_range, solve_targets};

/// How a derived quantity counts.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Amount {
    /// Per cycle of the CPU it is counted on.
    PerCycle(f64),
    /// Per second per instance (CPU, box or package).
    PerSecond(f64),
}

/// One metric's outcome for one phase.
#[derive(Debug, Clone, PartialEq)]
pub struct MetricTruth {
    /// The metric name.
    pub name: String,
    /// Its PMU (`cpu`, `cpu_core`, `cpu_atom`, `default_core`, ...).
    pub pmu: String,
    /// The value the formulas give over the derived counts, raw (before `ScaleUnit`).
    pub value: f64,
    /// What the workload asked for, raw, when it did.
    pub target: Option<f64>,
    /// `ScaleUnit` factor: the printed value is `value * scale`.
    pub scale: f64,
    /// The valid range, raw.
    pub range: (f64, f64),
    /// A TopdownL*/PipelineL* tree node.
    pub tree: bool,
    /// Every event it reads (in the branches taken) exists on the machine and no `NaN` of its
    /// formula is taken; `false` for a metric perf cannot compute there either.
    pub available: bool,
}

impl MetricTruth {
    /// The target was set and the formulas reach it (relative 1e-6, or 1e-9 absolute).
    pub fn met(&self) -> bool {
        self.target.is_none_or(|t| close(self.value, t))
    }

    /// Within its valid range (with a 1e-9 slack for rounding).
    pub fn in_range(&self) -> bool {
        self.value.is_finite()
            && self.value >= self.range.0 - 1e-9
            && self.value <= self.range.1 + 1e-9 * self.range.1.abs().max(1.0)
    }
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-9_f64.max(1e-6 * b.abs())
}

/// The derived counts of one machine and workload, per phase.
#[derive(Debug)]
pub struct Derivation {
    /// Per phase: every derived quantity.
    pub tables: Vec<HashMap<Source, Amount>>,
    /// Per phase: every metric of the model with its derived value.
    pub report: Vec<Vec<MetricTruth>>,
    /// What the derivation could not do (unparsable formulas, unresolvable identifiers).
    pub notes: Vec<String>,
}

impl Derivation {
    /// The derivation for `machine` running `workload`; computed once per machine and
    /// workload in a process.
    pub fn of(machine: &Machine, workload: &SimWorkload) -> Arc<Derivation> {
        static CACHE: OnceLock<Mutex<HashMap<String, Arc<Derivation>>>> = OnceLock::new();
        // What the derivation reads: the machine and the phases with the workload's clock,
        // not the schedule or the kernel's rules, so workloads that differ only in when
        // their phases fall share one derivation.
        // The formulas are the vintage's in use: two vintages' truths differ where they do.
        let key = format!(
            "{}{machine:?}{:?}{}{}{}",
            tmetric_catalog::vintage().version,
            workload.phases,
            workload.tsc_hz,
            workload.cpu_step_percent,
            workload.package_watts
        );
        let cache = CACHE.get_or_init(Default::default);
        if let Some(d) = cache.lock().unwrap_or_else(|e| e.into_inner()).get(&key) {
            return d.clone();
        }
        let d = Arc::new(derive(machine, workload));
        cache.lock().unwrap_or_else(|e| e.into_inner()).insert(key, d.clone());
        d
    }

    /// The derived truth of `metric` (on `pmu`, or any PMU when empty) in `phase`, raw.
    pub fn truth(&self, phase: usize, metric: &str, pmu: &str) -> Option<&MetricTruth> {
        self.report
            .get(phase)?
            .iter()
            .find(|m| m.name == metric && (pmu.is_empty() || m.pmu == pmu))
    }
}

/// Derives every phase of `workload` on `machine`.
pub fn derive(machine: &Machine, workload: &SimWorkload) -> Derivation {
    let Some(model) = tmetric_catalog::model(&machine.catalogue_model) else {
        return Derivation {
            tables: vec![HashMap::new(); workload.phases.len()],
            report: vec![Vec::new(); workload.phases.len()],
            notes: vec![format!("no catalogue model `{}`", machine.catalogue_model)],
        };
    };
    let mut tables = Vec::new();
    let mut report = Vec::new();
    let mut notes = Vec::new();
    for (i, phase) in workload.phases.iter().enumerate() {
        let (table, rep, mut n) = derive_phase(machine, model, workload, phase, i);
        tables.push(table);
        report.push(rep);
        if i == 0 {
            notes.append(&mut n);
        }
    }
    Derivation { tables, report, notes }
}

fn derive_phase(
    machine: &Machine,
    model: &'static Model,
    workload: &SimWorkload,
    phase: &PhaseSpec,
    phase_index: usize,
) -> (HashMap<Source, Amount>, Vec<MetricTruth>, Vec<String>) {
    let mut b = Builder {
        machine,
        model,
        workload,
        phase,
        phase_index,
        vars: Vec::new(),
        var_of: HashMap::new(),
        inputs: Vec::new(),
        input_of: HashMap::new(),
        notes: Vec::new(),
    };
    let (mut defs, groups, parsed) = parse_metrics(model, &mut b.notes);
    b.link_metrics(&mut defs, parsed);
    let mut problem = Problem {
        overrides: HashMap::new(),
        metrics: defs,
        inputs: std::mem::take(&mut b.inputs),
        vars: std::mem::take(&mut b.vars),
        deps: Vec::new(),
    };
    problem.compute_deps();
    let (mut targets, tree_fractions) = phase_targets(&problem, &groups, phase);
    pin_topdown_fields(&mut problem, machine, &tree_fractions);
    // Tree targets start at the workload's absolute fractions.
    for t in &mut targets {
        if t.stage != INFO_STAGE {
            t.value = tree_fractions[&t.metric] * 100.0 / problem.metrics[t.metric].scale;
        }
    }
    solve_targets(&mut problem, &mut targets, machine);

    let target_of: HashMap<usize, f64> = targets.iter().map(|t| (t.metric, t.value)).collect();
    // Free unknowns take defaults; then repairs of metrics out of range.
    for v in &mut problem.vars {
        if v.value.is_none() {
            v.value = Some(v.default);
        }
    }
    repair_out_of_range(&mut problem, &target_of);
    let (table, rep) = truth(&problem, &target_of);
    (table, rep, b.notes)
}

/// The derived counts per source, and each metric's value against its target.
fn truth(
    problem: &Problem,
    target_of: &HashMap<usize, f64>,
) -> (HashMap<Source, Amount>, Vec<MetricTruth>) {
    let table = problem
        .vars
        .iter()
        .filter_map(|v| {
            let x = v.value?;
            Some((
                v.source.clone(),
                if v.per_cycle { Amount::PerCycle(x) } else { Amount::PerSecond(x) },
            ))
        })
        .collect();
    let rep = (0..problem.metrics.len())
        .map(|m| {
            let d = &problem.metrics[m];
            MetricTruth {
                name: d.name.clone(),
                pmu: d.pmu.clone(),
                value: problem.value(m),
                target: target_of.get(&m).copied(),
                scale: d.scale,
                range: d.range,
                tree: d.tree,
                available: !problem.reads_missing(m, 0) && !problem.nan_by_formula(m, 0),
            }
        })
        .collect();
    (table, rep)
}

/// With `TMETRIC_SIM_TRACE` set, prints a derivation step to standard error.
fn trace(_p: &Problem, step: &str) {
    if std::env::var_os("TMETRIC_SIM_TRACE").is_some() {
        eprintln!("derive: {step}");
    }
}
