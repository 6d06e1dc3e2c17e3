//! From a [`Workload`]'s truth to every event count of a simulated machine, through the vendor
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

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, Mutex, OnceLock};

use tmetric_catalog::{IdKind, Model};
use tmetric_runtime::Attr;
use tmetric_runtime::sys::TYPE_HARDWARE;

use crate::formula::{self, Expr, ProbeFn};
use crate::kernel::classify;
use crate::machine::{CpuId, Machine, PmuClass};
use crate::profile::{Source, retire_latency_mean};
use crate::workload::{PhaseSpec, Workload};

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
    /// Every event it reads (in the branches taken) exists on the machine; `false` for a
    /// metric perf cannot compute there either.
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
    pub fn of(machine: &Machine, workload: &Workload) -> Arc<Derivation> {
        static CACHE: OnceLock<Mutex<HashMap<String, Arc<Derivation>>>> = OnceLock::new();
        let key = format!("{machine:?}{workload:?}");
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

/// Where a linked identifier's value comes from.
#[derive(Debug, Clone)]
enum Input {
    /// `Σ value(var) * mult`.
    Vars(Vec<(usize, f64)>),
    /// A constant (literals, probes, `duration_time`, retire latencies).
    Const(f64),
    /// Another metric.
    Metric(usize),
    /// An event this machine does not have (NaN).
    Missing,
}

/// One unknown (or known) quantity.
#[derive(Debug, Clone)]
struct Var {
    source: Source,
    per_cycle: bool,
    value: Option<f64>,
    hi: f64,
    default: f64,
    /// Fixed by the clock, a target or a default of a stuck target: not free for repairs.
    pinned: bool,
    /// Fixed only by one of the workload's named (non-tree) metrics: a repair of a metric out
    /// of range may still move it.
    soft: bool,
    /// A clock family's count or a topdown field: never solved for.
    known: bool,
    label: String,
}

#[derive(Debug, Clone)]
struct MetricDef {
    name: String,
    pmu: String,
    expr: Expr,
    scale: f64,
    range: (f64, f64),
    tree: bool,
}

struct Problem {
    /// Metrics that evaluate to a fixed value (their targets, while the topdown fields are
    /// not fitted yet).
    overrides: HashMap<usize, f64>,
    metrics: Vec<MetricDef>,
    inputs: Vec<Input>,
    vars: Vec<Var>,
    /// Per metric: the vars it reads, directly or through other metrics.
    deps: Vec<BTreeSet<usize>>,
}

impl Problem {
    fn eval(&self, metric: usize, memo: &mut Vec<Option<f64>>, depth: usize) -> f64 {
        if let Some(v) = memo[metric] {
            return v;
        }
        if let Some(&v) = self.overrides.get(&metric) {
            return v;
        }
        if depth > 64 {
            return f64::NAN;
        }
        let v = self.metrics[metric].expr.eval(&mut |i| self.input(i, memo, depth));
        memo[metric] = Some(v);
        v
    }

    fn input(&self, i: usize, memo: &mut Vec<Option<f64>>, depth: usize) -> f64 {
        match &self.inputs[i] {
            Input::Const(v) => *v,
            Input::Missing => f64::NAN,
            Input::Metric(m) => self.eval(*m, memo, depth + 1),
            Input::Vars(vars) => vars
                .iter()
                .map(|&(v, mult)| self.vars[v].value.map_or(f64::NAN, |x| x * mult))
                .sum(),
        }
    }

    /// Whether `metric` reads an event the machine lacks, in the branches it takes.
    fn reads_missing(&self, metric: usize, depth: usize) -> bool {
        if depth > 64 || self.overrides.contains_key(&metric) {
            return false;
        }
        let known = |i: usize| match &self.inputs[i] {
            Input::Const(v) => Some(*v),
            _ => None,
        };
        let mut used = Vec::new();
        self.metrics[metric].expr.live_values(&known, &mut used);
        used.into_iter().any(|i| match &self.inputs[i] {
            Input::Missing => true,
            Input::Metric(r) => self.reads_missing(*r, depth + 1),
            _ => false,
        })
    }

    fn value(&self, metric: usize) -> f64 {
        let mut memo = vec![None; self.metrics.len()];
        self.eval(metric, &mut memo, 0)
    }

    fn compute_deps(&mut self) {
        let n = self.metrics.len();
        let mut deps: Vec<Option<BTreeSet<usize>>> = vec![None; n];
        fn visit(
            p: &Problem,
            m: usize,
            deps: &mut Vec<Option<BTreeSet<usize>>>,
            stack: &mut Vec<usize>,
        ) -> BTreeSet<usize> {
            if let Some(d) = &deps[m] {
                return d.clone();
            }
            if stack.contains(&m) {
                return BTreeSet::new();
            }
            stack.push(m);
            let mut out = BTreeSet::new();
            let mut used = Vec::new();
            let known = |i: usize| match &p.inputs[i] {
                Input::Const(v) => Some(*v),
                _ => None,
            };
            p.metrics[m].expr.live_values(&known, &mut used);
            for i in used {
                match &p.inputs[i] {
                    Input::Vars(vs) => out.extend(vs.iter().map(|&(v, _)| v)),
                    Input::Metric(r) if p.overrides.contains_key(r) => {}
                    Input::Metric(r) => out.extend(visit(p, *r, deps, stack)),
                    Input::Const(_) | Input::Missing => {}
                }
            }
            stack.pop();
            deps[m] = Some(out.clone());
            out
        }
        let mut stack = Vec::new();
        for m in 0..n {
            visit(self, m, &mut deps, &mut stack);
        }
        self.deps = deps.into_iter().map(Option::unwrap_or_default).collect();
    }

    /// Solves `metric(var) = target` for `var` in `[0, hi]`: sets the closest value found.
    /// When the metric does not change with `var` (its branch is not taken), `var` is left
    /// unknown and [`Solve::Insensitive`] returned.
    fn solve(&mut self, metric: usize, var: usize, target: f64) -> Solve {
        let hi = self.vars[var].hi;
        let before = self.vars[var].value;
        let f = |p: &mut Problem, x: f64| -> f64 {
            p.vars[var].value = Some(x);
            p.value(metric) - target
        };
        // A grid from 0 over twelve decades below `hi`, then bisection on the first sign
        // change; without one, the grid point closest to the target.
        let mut grid = vec![0.0];
        let steps = 96;
        for k in 0..=steps {
            grid.push(hi * 10f64.powf(-12.0 + 12.0 * f64::from(k) / f64::from(steps)));
        }
        let values: Vec<(f64, f64)> =
            grid.iter().map(|&x| (x, f(self, x))).filter(|(_, g)| g.is_finite()).collect();
        let varies = values.windows(2).any(|w| w[0].1 != w[1].1);
        if !varies {
            self.vars[var].value = before;
            return Solve::Insensitive;
        }
        let met = |p: &Problem| close(p.value(metric), target);
        if let Some(&(x, _)) = values.iter().find(|(_, g)| *g == 0.0) {
            self.vars[var].value = Some(x);
            return if met(self) { Solve::Met } else { Solve::Missed };
        }
        for w in values.windows(2) {
            let ((mut a, mut ga), (mut b, _)) = (w[0], w[1]);
            if ga.signum() == w[1].1.signum() {
                continue;
            }
            for _ in 0..200 {
                let m = 0.5 * (a + b);
                if m <= a || m >= b {
                    break;
                }
                let gm = f(self, m);
                if !gm.is_finite() {
                    break;
                }
                if gm == 0.0 {
                    a = m;
                    b = m;
                    break;
                }
                if gm.signum() == ga.signum() {
                    a = m;
                    ga = gm;
                } else {
                    b = m;
                }
            }
            // The side closer to the target.
            let (ya, yb) = (f(self, a).abs(), f(self, b).abs());
            self.vars[var].value = Some(if ya <= yb { a } else { b });
            if met(self) {
                return Solve::Met;
            }
        }
        let x = values
            .iter()
            .min_by(|p, q| p.1.abs().total_cmp(&q.1.abs()))
            .map_or(self.vars[var].default, |&(x, _)| x);
        self.vars[var].value = Some(x);
        if met(self) { Solve::Met } else { Solve::Missed }
    }
}

impl Problem {
    /// Levenberg-Marquardt over `vars` (in log space, within their ranges) for `goals`
    /// `(metric, raw target, weight)`: relative residuals, a NaN counting as a large miss.
    fn least_squares(&mut self, goals: &[(usize, f64, f64)], vars: &[usize]) {
        let n = vars.len();
        if n == 0 || goals.is_empty() {
            return;
        }
        // `max(x, 0)` and `if` make flat regions where the fit cannot move: several starts
        // (the defaults, then spread pseudo-randomly over each range), the best kept.
        let floor = |v: usize, p: &Problem| p.vars[v].hi * 1e-15;
        let start: Vec<f64> = vars
            .iter()
            .map(|&v| {
                let x = self.vars[v].value.unwrap_or(self.vars[v].default);
                x.max(floor(v, self)).ln()
            })
            .collect();
        let mut best: Option<(f64, Vec<f64>)> = None;
        for attempt in 0..8u64 {
            let z0: Vec<f64> = if attempt == 0 {
                start.clone()
            } else {
                vars.iter()
                    .enumerate()
                    .map(|(j, &v)| {
                        let h = splitmix(attempt * 7919 + j as u64 * 104_729 + v as u64);
                        let u = (h % 1_000_000) as f64 / 1e6;
                        // Log-uniform between a ten-thousandth of the range and the range.
                        (self.vars[v].hi * 10f64.powf(-4.0 + 4.0 * u)).ln()
                    })
                    .collect()
            };
            let (cost, z) = self.fit_from(goals, vars, z0);
            if best.as_ref().is_none_or(|(c, _)| cost < *c) {
                best = Some((cost, z));
            }
            if best.as_ref().is_some_and(|(c, _)| *c < 1e-20) {
                break;
            }
        }
        if let Some((_, z)) = best {
            for (j, &v) in vars.iter().enumerate() {
                let top = self.vars[v].hi.ln();
                self.vars[v].value = Some(z[j].min(top).max(top - 40.0).exp());
            }
        }
    }

    /// One Levenberg-Marquardt run from `z` (log values); returns the cost and the end point.
    fn fit_from(
        &mut self,
        goals: &[(usize, f64, f64)],
        vars: &[usize],
        mut z: Vec<f64>,
    ) -> (f64, Vec<f64>) {
        let n = vars.len();
        let floor = |v: usize, p: &Problem| p.vars[v].hi * 1e-15;
        let set = |p: &mut Problem, z: &[f64]| {
            for (j, &v) in vars.iter().enumerate() {
                let top = p.vars[v].hi.ln();
                p.vars[v].value = Some(z[j].min(top).max(top - 40.0).exp());
            }
        };
        let residual = |p: &Problem, g: &(usize, f64, f64)| -> f64 {
            let (m, t, w) = *g;
            let r = (p.value(m) - t) / t.abs().max(1e-4) * w;
            if r.is_finite() { r } else { 1e3 * w }
        };
        // Which goals each var moves.
        let touches: Vec<Vec<usize>> = vars
            .iter()
            .map(|v| (0..goals.len()).filter(|&i| self.deps[goals[i].0].contains(v)).collect())
            .collect();
        // A weak pull of each unknown towards its default picks, among the many solutions of
        // an underdetermined fit, the one that changes least.
        let anchor: Vec<f64> =
            vars.iter().map(|&v| self.vars[v].default.max(floor(v, self)).ln()).collect();
        const PULL: f64 = 1e-7;
        let regular = |z: &[f64], j: usize| PULL * (z[j] - anchor[j]);
        set(self, &z);
        let mut r: Vec<f64> = goals.iter().map(|g| residual(self, g)).collect();
        let reg_cost = |z: &[f64]| (0..n).map(|j| regular(z, j).powi(2)).sum::<f64>();
        let mut cost: f64 = r.iter().map(|x| x * x).sum::<f64>() + reg_cost(&z);
        let mut lambda = 1e-3;
        for _ in 0..60 {
            if r.iter().all(|x| x.abs() < 1e-10) {
                break;
            }
            // Jacobian columns, goal by goal where the var matters.
            let mut jac = vec![vec![0.0; n]; goals.len()];
            for j in 0..n {
                let h = 1e-6;
                let mut zh = z.clone();
                zh[j] += h;
                set(self, &zh);
                for &i in &touches[j] {
                    jac[i][j] = (residual(self, &goals[i]) - r[i]) / h;
                }
            }
            set(self, &z);
            let mut jtj = vec![vec![0.0; n]; n];
            let mut jtr = vec![0.0; n];
            for j in 0..n {
                jtj[j][j] += PULL * PULL;
                jtr[j] += PULL * regular(&z, j);
            }
            for i in 0..goals.len() {
                for a in 0..n {
                    if jac[i][a] == 0.0 {
                        continue;
                    }
                    jtr[a] += jac[i][a] * r[i];
                    for b in 0..n {
                        jtj[a][b] += jac[i][a] * jac[i][b];
                    }
                }
            }
            let mut improved = false;
            for _ in 0..12 {
                let mut a = jtj.clone();
                for (k, row) in a.iter_mut().enumerate() {
                    row[k] += lambda * (row[k] + 1e-9);
                }
                let Some(step) = solve_linear(a, jtr.iter().map(|x| -x).collect()) else {
                    lambda *= 10.0;
                    continue;
                };
                let z2: Vec<f64> =
                    z.iter().zip(&step).map(|(a, b)| a + b.clamp(-20.0, 20.0)).collect();
                set(self, &z2);
                let r2: Vec<f64> = goals.iter().map(|g| residual(self, g)).collect();
                let c2: f64 = r2.iter().map(|x| x * x).sum::<f64>() + reg_cost(&z2);
                if c2 < cost {
                    z = z2;
                    r = r2;
                    cost = c2;
                    lambda = (lambda / 3.0).max(1e-12);
                    improved = true;
                    break;
                }
                lambda *= 4.0;
            }
            set(self, &z);
            if !improved {
                break;
            }
        }
        (cost, z)
    }
}

/// SplitMix64, for repeatable fit starts.
fn splitmix(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// Gaussian elimination with partial pivoting; `None` when singular.
fn solve_linear(mut a: Vec<Vec<f64>>, mut b: Vec<f64>) -> Option<Vec<f64>> {
    let n = b.len();
    for col in 0..n {
        let pivot = (col..n).max_by(|&i, &j| a[i][col].abs().total_cmp(&a[j][col].abs()))?;
        if a[pivot][col].abs() < 1e-300 || !a[pivot][col].is_finite() {
            return None;
        }
        a.swap(col, pivot);
        b.swap(col, pivot);
        for row in col + 1..n {
            let f = a[row][col] / a[col][col];
            let (upper, lower) = a.split_at_mut(row);
            for (x, y) in lower[0][col..n].iter_mut().zip(&upper[col][col..n]) {
                *x -= f * y;
            }
            b[row] -= f * b[col];
        }
    }
    let mut x = vec![0.0; n];
    for row in (0..n).rev() {
        let s: f64 = (row + 1..n).map(|k| a[row][k] * x[k]).sum();
        x[row] = (b[row] - s) / a[row][row];
    }
    Some(x)
}

/// What a one-unknown solve did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Solve {
    /// The target is met.
    Met,
    /// The closest value in range misses it.
    Missed,
    /// The metric does not depend on the unknown here.
    Insensitive,
}

/// `event=0x3c,umask=1` terms, later ones overriding earlier ones; a term without a value
/// is 1.
fn terms(text: &str) -> Vec<(String, u64)> {
    let mut out: Vec<(String, u64)> = Vec::new();
    for part in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let (name, value) = match part.split_once('=') {
            Some((n, v)) => {
                let v = v.trim();
                let parsed = if let Some(hex) = v.strip_prefix("0x").or(v.strip_prefix("0X")) {
                    u64::from_str_radix(hex, 16).ok()
                } else {
                    v.parse().ok()
                };
                let Some(parsed) = parsed else { continue };
                (n.trim().to_string(), parsed)
            }
            None => (part.to_string(), 1),
        };
        out.retain(|(n, _)| *n != name);
        out.push((name, value));
    }
    out
}

/// Writes `value` into the bits `spec` names (`config:0-7,21`, `config1:0-63`).
fn apply_format(spec: &str, value: u64, words: &mut [u64; 3]) -> bool {
    let Some((field, ranges)) = spec.split_once(':') else { return false };
    let word = match field {
        "config" => 0,
        "config1" => 1,
        "config2" => 2,
        _ => return false,
    };
    let mut v = value;
    for range in ranges.split(',') {
        let (lo, hi) = match range.split_once('-') {
            Some((a, b)) => (a.parse::<u32>().ok(), b.parse::<u32>().ok()),
            None => (range.parse().ok(), range.parse().ok()),
        };
        let (Some(lo), Some(hi)) = (lo, hi) else { return false };
        let width = hi - lo + 1;
        let mask = if width >= 64 { u64::MAX } else { (1u64 << width) - 1 };
        words[word] |= (v & mask) << lo;
        v = if width >= 64 { 0 } else { v >> width };
    }
    true
}

impl Machine {
    /// The attribute perf's term list `terms` (`event=0x3c,umask=1,cmask=1`, later terms
    /// overriding earlier ones; `config1=` and friends as raw words) makes on this machine's
    /// PMU `pmu`; `None` without that PMU or when a term has no format there.
    pub fn encode(&self, pmu: &str, terms: &str) -> Option<Attr> {
        let index = self.pmus.iter().position(|p| p.name == pmu)?;
        attr_on(self, index, terms)
    }
}

/// The attribute `terms` make on machine PMU `pmu`; `None` when a term has no format.
fn attr_on(machine: &Machine, pmu: usize, text: &str) -> Option<Attr> {
    let p = &machine.pmus[pmu];
    let mut words = [0u64; 3];
    for (name, value) in terms(text) {
        if name == "period" {
            continue;
        }
        // perf's built-in terms for the raw attribute words.
        let raw = match name.as_str() {
            "config" => Some(0),
            "config1" => Some(1),
            "config2" => Some(2),
            _ => None,
        };
        if let Some(word) = raw {
            words[word] = value;
            continue;
        }
        let spec = p.formats.iter().find(|(n, _)| *n == name).map(|(_, s)| s.as_str())?;
        if !apply_format(spec, value, &mut words) {
            return None;
        }
    }
    Some(Attr {
        type_: p.type_,
        config: words[0],
        config1: words[1],
        config2: words[2],
        ..Attr::default()
    })
}

/// `PERF_TYPE_HARDWARE` ids by name.
fn generic_id(name: &str) -> Option<u64> {
    Some(match name {
        "cycles" | "cpu-cycles" => 0,
        "instructions" => 1,
        "cache-references" => 2,
        "cache-misses" => 3,
        "branches" | "branch-instructions" => 4,
        "branch-misses" => 5,
        "bus-cycles" => 6,
        "stalled-cycles-frontend" => 7,
        "stalled-cycles-backend" => 8,
        "ref-cycles" => 9,
        _ => return None,
    })
}

fn is_core_pmu(class: &PmuClass) -> bool {
    matches!(class, PmuClass::X86Core(_) | PmuClass::Arm(_))
}

/// Machine PMUs a JSON or identifier PMU name means: the PMU itself, its numbered boxes
/// (`uncore_cha` -> `uncore_cha_0`, `uncore_cha_1`), `default_core`/`cpu` the core PMU(s).
fn pmus_named(machine: &Machine, name: &str, context: &[usize]) -> Vec<usize> {
    let cores: Vec<usize> =
        (0..machine.pmus.len()).filter(|&i| is_core_pmu(&machine.pmus[i].class)).collect();
    if name.is_empty() || name == "default_core" || (name == "cpu" && machine.pmu("cpu").is_none())
    {
        return if context.is_empty() { cores } else { context.to_vec() };
    }
    // perf matches `cha` and `imc_0` to `uncore_cha_*` and `uncore_imc_0` too.
    let matches = |p: &str| {
        let bare = p.strip_prefix("uncore_").unwrap_or(p);
        [p, bare].iter().any(|p| {
            *p == name
                || p.strip_prefix(name)
                    .and_then(|rest| rest.strip_prefix('_'))
                    .is_some_and(|n| !n.is_empty() && n.chars().all(|c| c.is_ascii_digit()))
        })
    };
    (0..machine.pmus.len()).filter(|&i| matches(&machine.pmus[i].name)).collect()
}

/// The CPUs an event of PMU `pmu` is counted on under `-a`: its `cpumask`, else its `cpus`,
/// else every CPU.
fn cpus_of(machine: &Machine, pmu: usize, context: &[u32]) -> Vec<u32> {
    let p = &machine.pmus[pmu];
    if let Some(mask) = &p.cpumask {
        return mask.clone();
    }
    if let Some(cpus) = &p.cpus {
        return cpus.clone();
    }
    // `msr` and other PMUs without a mask are opened on every CPU, also in a metric of one
    // hybrid core type (as perf does).
    let _ = context;
    machine.cpu_ids()
}

/// What the clock families count: known, never solved.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Family {
    Cycles,
    Instructions,
    Slots,
    /// Per second, the reference clock.
    Ref,
    /// Per second, the TSC.
    Tsc,
    /// A topdown PERF_METRICS field of slots: the tree node it is.
    Topdown(&'static str),
    /// A fixed per-second rate.
    Fixed(f64),
    /// A fixed per-cycle ratio.
    PerCycle(f64),
}

/// The PERF_METRICS fields (umask 0x80 + n) and the tree node each is.
const TOPDOWN_FIELDS: [&str; 8] = [
    "tma_retiring",
    "tma_bad_speculation",
    "tma_frontend_bound",
    "tma_backend_bound",
    "tma_heavy_operations",
    "tma_branch_mispredicts",
    "tma_fetch_latency",
    "tma_memory_bound",
];

/// The family of an identifier by its vendor or kernel name and extra terms.
fn family(name: &str, extra_terms: bool) -> Option<Family> {
    if extra_terms {
        return None;
    }
    // The AnyThread variants count the same thing for both threads (a factor the kernel
    // applies).
    let name =
        name.strip_suffix("_ANY").filter(|n| n.starts_with("CPU_CLK_UNHALTED.")).unwrap_or(name);
    Some(match name {
        "CPU_CLK_UNHALTED.THREAD"
        | "CPU_CLK_UNHALTED.THREAD_P"
        | "CPU_CLK_UNHALTED.CORE"
        | "CPU_CLK_UNHALTED.CORE_P"
        | "CPU_CLK_UNHALTED.DISTRIBUTED"
        | "CPU_CLK_UNHALTED.THREAD_ANY"
        | "cycles"
        | "cpu-cycles"
        | "ls_not_halted_cyc"
        | "CPU_CYCLES"
        | "cpu_cycles" => Family::Cycles,
        "INST_RETIRED.ANY"
        | "INST_RETIRED.ANY_P"
        | "INST_RETIRED.PREC_DIST"
        | "instructions"
        | "ex_ret_instr"
        | "INST_RETIRED"
        | "inst_retired" => Family::Instructions,
        "TOPDOWN.SLOTS" | "TOPDOWN.SLOTS_P" | "slots" => Family::Slots,
        "CPU_CLK_UNHALTED.REF_TSC"
        | "CPU_CLK_UNHALTED.REF_TSC_P"
        | "CPU_CLK_UNHALTED.REF_DISTRIBUTED"
        | "CPU_CLK_UNHALTED.REF_XCLK"
        | "ref-cycles" => Family::Ref,
        "topdown-retiring" => Family::Topdown(TOPDOWN_FIELDS[0]),
        "topdown-bad-spec" => Family::Topdown(TOPDOWN_FIELDS[1]),
        "topdown-fe-bound" => Family::Topdown(TOPDOWN_FIELDS[2]),
        "topdown-be-bound" => Family::Topdown(TOPDOWN_FIELDS[3]),
        "topdown-heavy-ops" => Family::Topdown(TOPDOWN_FIELDS[4]),
        "topdown-br-mispredict" => Family::Topdown(TOPDOWN_FIELDS[5]),
        "topdown-fetch-lat" => Family::Topdown(TOPDOWN_FIELDS[6]),
        "topdown-mem-bound" => Family::Topdown(TOPDOWN_FIELDS[7]),
        _ => return None,
    })
}

/// An event that counts cycles (so at most one per cycle): a `cmask`/`edge` term, or a name
/// of the cycle and stall families.
pub fn counts_cycles(name: &str, terms_text: &str) -> bool {
    let t = terms(terms_text);
    if t.iter().any(|(n, v)| (n == "cmask" || n == "thresh") && *v >= 1 || n == "edge") {
        return true;
    }
    let upper = name.to_ascii_uppercase();
    // Dispatch and issue slots count up to the pipeline width per cycle.
    if upper.contains("SLOT") {
        return false;
    }
    const PARTS: [&str; 22] = [
        "CYCLES",
        "STALLS",
        "STALL_",
        "_ACTIVE",
        "ACTIVITY.",
        "PENALTY",
        "DECODE.LCP",
        "FB_FULL",
        "L2_STALL",
        "AMX_BUSY",
        "_AT_RET",
        "MEM_BOUND_STALLS",
        "MEM_SCHEDULER_BLOCK",
        "CPU_CLK_UNHALTED",
        "BOUND_ON",
        "SCOREBOARD",
        "CLEAR_RESTEER",
        "RS.EMPTY",
        "XQ.FULL",
        "LSD.CYCLES",
        "ICACHE_DATA",
        "ICACHE_TAG",
    ];
    PARTS.iter().any(|p| upper.contains(p))
}

/// Default share of the rate a free unknown gets: per cycle for core events.
const DEFAULT_PER_CYCLE: f64 = 0.01;
/// Default per-second rate of a free uncore quantity, per box.
const DEFAULT_PER_SECOND: f64 = 2e7;

struct Builder<'a> {
    machine: &'a Machine,
    model: &'static Model,
    workload: &'a Workload,
    phase: &'a PhaseSpec,
    phase_index: usize,
    vars: Vec<Var>,
    var_of: HashMap<Source, usize>,
    inputs: Vec<Input>,
    input_of: HashMap<(String, String), usize>,
    notes: Vec<String>,
}

impl Builder<'_> {
    fn literal(&self, name: &str) -> f64 {
        let m = self.machine;
        let mut cores = BTreeSet::new();
        let mut dies = BTreeSet::new();
        let mut packages = BTreeSet::new();
        for c in &m.cpus {
            cores.insert((c.package, c.core));
            dies.insert((c.package, c.die));
            packages.insert(c.package);
        }
        match name.to_ascii_lowercase().as_str() {
            "num_cpus" | "num_cpus_online" => m.cpus.len() as f64,
            "num_cores" => cores.len() as f64,
            "num_dies" => dies.len() as f64,
            "num_packages" => packages.len() as f64,
            "smt_on" => f64::from(u8::from(m.smt)),
            // `-a` counts every CPU of each core.
            "core_wide" => 1.0,
            "slots" => m
                .pmus
                .iter()
                .find_map(|p| match &p.class {
                    PmuClass::Arm(a) => Some(a.width as f64),
                    _ => None,
                })
                .unwrap_or(f64::NAN),
            "has_pmem" => 0.0,
            "system_tsc_freq" => self.workload.tsc_hz,
            _ => f64::NAN,
        }
    }

    fn var(
        &mut self,
        source: Source,
        label: &str,
        per_cycle: bool,
        hi: f64,
        default: f64,
    ) -> usize {
        if let Some(&v) = self.var_of.get(&source) {
            return v;
        }
        self.vars.push(Var {
            source: source.clone(),
            per_cycle,
            value: None,
            hi,
            default,
            pinned: false,
            soft: false,
            known: false,
            label: label.to_string(),
        });
        self.var_of.insert(source, self.vars.len() - 1);
        self.vars.len() - 1
    }

    /// The machine PMUs, term text and display name of identifier slot `slot` in a metric
    /// of `context` PMUs.
    fn locate(&self, slot: usize, context: &[usize]) -> Option<(Vec<usize>, String, String)> {
        let model = self.model;
        let id = &model.ids[slot];
        let id_pmu = model.str(id.pmu);
        match id.kind {
            IdKind::Event(i) => {
                let ev = model.events.at(i as usize);
                let pmu = if id_pmu.is_empty() { model.str(ev.pmu) } else { id_pmu };
                let text = format!("{},{}", model.str(ev.encoding), model.str(id.terms));
                let pmus = pmus_named(self.machine, pmu, context);
                Some((pmus, text, model.str(ev.name).to_string()))
            }
            IdKind::Kernel | IdKind::Sysfs => {
                let event = model.str(id.event);
                let pmus = pmus_named(self.machine, id_pmu, context);
                if event.is_empty() {
                    return Some((
                        pmus,
                        model.str(id.terms).to_string(),
                        model.str(id.text).into(),
                    ));
                }
                // A sysfs alias of the PMU, else a generic hardware event (handled by the
                // caller through an empty term list and the name).
                let alias = pmus.iter().find_map(|&p| self.machine.pmus[p].alias(event));
                match alias {
                    Some(t) => Some((pmus, format!("{t},{}", model.str(id.terms)), event.into())),
                    None if generic_id(event).is_some() => {
                        Some((pmus, String::new(), event.to_string()))
                    }
                    None => None,
                }
            }
            _ => None,
        }
    }

    /// The input for identifier slot `slot` read by a metric of core PMUs `context`.
    fn input(&mut self, slot: usize, context: &[usize]) -> usize {
        let key = (slot.to_string(), format!("{context:?}"));
        if let Some(&i) = self.input_of.get(&key) {
            return i;
        }
        let input = self.build_input(slot, context);
        self.inputs.push(input);
        self.input_of.insert(key, self.inputs.len() - 1);
        self.inputs.len() - 1
    }

    fn build_input(&mut self, slot: usize, context: &[usize]) -> Input {
        let model = self.model;
        let id = &model.ids[slot];
        match id.kind {
            IdKind::Tool(_) => return Input::Const(1.0),
            IdKind::Probe => return Input::Const(f64::NAN),
            _ => {}
        }
        let text = model.str(id.text);
        if id.retire_latency {
            let mean = match id.kind {
                IdKind::Event(i) => {
                    let ev = model.events.at(i as usize);
                    let pmus = pmus_named(self.machine, model.str(ev.pmu), context);
                    pmus.first()
                        .and_then(|&p| attr_on(self.machine, p, model.str(ev.encoding)))
                        .map_or(0.0, |a| retire_latency_mean(self.machine, a.config))
                }
                _ => 0.0,
            };
            return Input::Const(mean);
        }
        let Some((pmus, terms_text, name)) = self.locate(slot, context) else {
            self.notes.push(format!("`{text}` names nothing on this machine"));
            return Input::Missing;
        };
        let modifiers = model.str(id.modifiers);
        let extra_terms = !model.str(id.terms).is_empty();
        let family = family(&name, extra_terms);
        let context_cpus: Vec<u32> = context
            .iter()
            .flat_map(|&p| cpus_of(self.machine, p, &[]))
            .collect::<BTreeSet<_>>()
            .into_iter()
            .collect();
        let mut parts = Vec::new();
        for &p in &pmus {
            let pmu = &self.machine.pmus[p];
            let attr = if terms_text.is_empty() {
                // A generic hardware event on this core PMU (extended type).
                let Some(g) = generic_id(&name) else { continue };
                Attr {
                    type_: TYPE_HARDWARE,
                    config: g | u64::from(pmu.type_) << 32,
                    ..Attr::default()
                }
            } else {
                match attr_on(self.machine, p, &terms_text) {
                    Some(a) => a,
                    None => {
                        self.notes.push(format!("`{text}`: a term has no format on {}", pmu.name));
                        continue;
                    }
                }
            };
            let attr = Attr {
                exclude_user: modifiers.contains('k') && !modifiers.contains('u'),
                exclude_kernel: modifiers.contains('u') && !modifiers.contains('k'),
                ..attr
            };
            let cpus = cpus_of(self.machine, p, &context_cpus);
            let Some(&first) = cpus.first() else { continue };
            let Ok(init) = classify(self.machine, &attr, -1, first as i32) else {
                self.notes.push(format!("`{text}` does not open on {}", pmu.name));
                continue;
            };
            let factor = init.factor(self.machine, &attr, self.phase.kernel_share);
            let Some(source) = init.source.clone() else { continue };
            let (per_cycle, hi, default, known) = self.kind_of(&source, family, &name, &terms_text);
            let v = self.var(source, &name, per_cycle, hi, default);
            if let Some(value) = known {
                // A known family decides the quantity, whichever name met it first.
                let var = &mut self.vars[v];
                var.per_cycle = per_cycle;
                var.hi = hi;
                var.default = default;
                var.value = Some(value);
                var.pinned = true;
                var.known = true;
            }
            let base: f64 = if per_cycle {
                cpus.iter().map(|&c| self.workload.cycles_on(self.phase_index, c)).sum()
            } else {
                cpus.len() as f64
            };
            parts.push((v, base * factor));
        }
        if parts.is_empty() {
            self.notes.push(format!("`{text}` opens on no PMU of this machine"));
            return Input::Missing;
        }
        Input::Vars(parts)
    }

    /// Per cycle or per second, the range, the default and the known value of a quantity.
    fn kind_of(
        &self,
        source: &Source,
        family: Option<Family>,
        name: &str,
        terms_text: &str,
    ) -> (bool, f64, f64, Option<f64>) {
        let phase = self.phase;
        let width = match source {
            Source::X86 { pmu, .. } | Source::Arm { pmu, .. } => {
                match &self.machine.pmus[*pmu].class {
                    PmuClass::X86Core(c) => c.width as f64,
                    PmuClass::Arm(a) => a.width as f64,
                    _ => 4.0,
                }
            }
            _ => 4.0,
        };
        let msr = match source {
            Source::Msr(c) => Some(match c {
                0 => Family::Tsc,
                1 => Family::Cycles,
                2 => Family::Ref,
                3 => Family::PerCycle(0.9),
                6 => Family::Instructions,
                _ => Family::Fixed(0.0),
            }),
            Source::Power(c) => {
                let pkg = self.workload.package_watts * 4_294_967_296.0;
                Some(Family::Fixed(if *c == 2 { pkg } else { pkg / 4.0 }))
            }
            _ => None,
        };
        match msr.or(family) {
            Some(Family::Cycles) => (true, 1.0, 1.0, Some(1.0)),
            Some(Family::Instructions) => (true, width, phase.ipc, Some(phase.ipc)),
            Some(Family::Slots) => (true, width, width, Some(width)),
            Some(Family::PerCycle(r)) => (true, r, r, Some(r)),
            Some(Family::Ref) => (false, phase.ref_hz, phase.ref_hz, Some(phase.ref_hz)),
            Some(Family::Tsc) => {
                (false, self.workload.tsc_hz, self.workload.tsc_hz, Some(self.workload.tsc_hz))
            }
            Some(Family::Fixed(v)) => (false, v, v, Some(v)),
            Some(Family::Topdown(node)) => {
                // The value is set once the tree is known (`topdown_fields`).
                let _ = node;
                (true, width, 0.0, None)
            }
            None => match source {
                Source::X86 { .. } | Source::Arm { .. } => {
                    let upper = name.to_ascii_uppercase();
                    if counts_cycles(name, terms_text) {
                        (true, 1.0, DEFAULT_PER_CYCLE, None)
                    } else if upper.contains("UOPS") || upper.contains("SLOT") {
                        // Micro-ops flow at a good part of the pipeline's width.
                        (true, 2.0 * width, 0.4 * width, None)
                    } else {
                        (true, 64.0, DEFAULT_PER_CYCLE, None)
                    }
                }
                Source::Cstate { .. } => {
                    let tsc = self.workload.tsc_hz;
                    (false, tsc, 0.05 * tsc, None)
                }
                _ => (false, 1e12, DEFAULT_PER_SECOND, None),
            },
        }
    }
}

/// The tree of one core PMU context: node metric indices with parent and level.
struct Tree {
    /// `(metric, parent metric or None, level)` in depth-first order.
    nodes: Vec<(usize, Option<usize>, u32)>,
}

fn tree_level(groups: &str) -> Option<u32> {
    groups.split(';').find_map(|g| {
        g.strip_prefix("TopdownL")
            .or_else(|| g.strip_prefix("PipelineL"))
            .and_then(|n| n.parse::<u32>().ok())
    })
}

fn build_tree(metrics: &[MetricDef], groups: &[String], pmu: &str) -> Tree {
    let members: Vec<usize> = (0..metrics.len())
        .filter(|&m| metrics[m].pmu == pmu && metrics[m].tree && tree_level(&groups[m]).is_some())
        .collect();
    let by_name: HashMap<&str, usize> =
        members.iter().map(|&m| (metrics[m].name.as_str(), m)).collect();
    let parent_of = |m: usize| -> Option<usize> {
        groups[m].split(';').find_map(|g| {
            let parent = g.strip_suffix("_group")?;
            if parent.starts_with("tma_L") {
                return None;
            }
            by_name.get(parent).copied().filter(|&p| p != m)
        })
    };
    let mut children: BTreeMap<Option<usize>, Vec<usize>> = BTreeMap::new();
    for &m in &members {
        let parent = if tree_level(&groups[m]) == Some(1) { None } else { parent_of(m) };
        // A deeper node whose parent is not in the tree hangs nowhere: left out.
        if parent.is_none() && tree_level(&groups[m]) != Some(1) {
            continue;
        }
        children.entry(parent).or_default().push(m);
    }
    for list in children.values_mut() {
        list.sort_by(|&a, &b| metrics[a].name.cmp(&metrics[b].name));
    }
    let mut nodes = Vec::new();
    fn walk(
        at: Option<usize>,
        level: u32,
        children: &BTreeMap<Option<usize>, Vec<usize>>,
        nodes: &mut Vec<(usize, Option<usize>, u32)>,
    ) {
        for &c in children.get(&at).map(Vec::as_slice).unwrap_or(&[]) {
            if nodes.iter().any(|n| n.0 == c) || level > 12 {
                continue;
            }
            nodes.push((c, at, level));
            walk(Some(c), level + 1, children, nodes);
        }
    }
    walk(None, 1, &children, &mut nodes);
    Tree { nodes }
}

/// The workload's tree made whole for `tree`: fractions of slots per node.
fn effective_tree(
    tree: &Tree,
    metrics: &[MetricDef],
    given: &BTreeMap<String, f64>,
) -> HashMap<usize, f64> {
    let mut out: HashMap<usize, f64> = HashMap::new();
    let mut parents: Vec<Option<usize>> = vec![None];
    parents.extend(tree.nodes.iter().map(|n| Some(n.0)));
    for parent in parents {
        let kids: Vec<usize> = tree.nodes.iter().filter(|n| n.1 == parent).map(|n| n.0).collect();
        if kids.is_empty() {
            continue;
        }
        let whole = match parent {
            None => 1.0,
            Some(p) => out.get(&p).copied().unwrap_or(0.0),
        };
        if kids.len() == 1 && parent.is_some() {
            let k = kids[0];
            let v = given.get(&metrics[k].name).copied().unwrap_or(0.1 * whole).min(whole);
            out.insert(k, v);
            continue;
        }
        let named: Vec<(usize, f64)> =
            kids.iter().filter_map(|&k| given.get(&metrics[k].name).map(|&v| (k, v))).collect();
        let unnamed: Vec<usize> =
            kids.iter().copied().filter(|k| !named.iter().any(|n| n.0 == *k)).collect();
        let sum: f64 = named.iter().map(|n| n.1).sum();
        if sum > whole || (unnamed.is_empty() && sum > 0.0) {
            for (k, v) in named {
                out.insert(k, v * whole / sum);
            }
            for k in unnamed {
                out.insert(k, 0.0);
            }
        } else if unnamed.is_empty() {
            // Nothing named and nothing to share: equal parts.
            for &k in &kids {
                out.insert(k, whole / kids.len() as f64);
            }
        } else {
            for (k, v) in named {
                out.insert(k, v);
            }
            let share = (whole - sum) / unnamed.len() as f64;
            for k in unnamed {
                out.insert(k, share);
            }
        }
    }
    out
}

/// The valid range of a metric, raw: tree nodes 0..1, percentages 0..100 printed, else
/// non-negative.
fn valid_range(unit: &str, scale: f64, tree: bool) -> (f64, f64) {
    if tree {
        return (0.0, 100.0 / scale);
    }
    let percent = unit.contains('%') || unit.contains("percent");
    if percent {
        return (0.0, 100.0 / scale);
    }
    (0.0, f64::INFINITY)
}

/// arm64's `strcmp_cpuid_str`: implementer, architecture and part equal, variant and revision
/// at least the given ones.
fn midr_matches(machine: &Machine, arg: &str) -> f64 {
    let CpuId::Midr(midr) = machine.id else { return 0.0 };
    let Ok(want) = u64::from_str_radix(arg.trim_start_matches("0x"), 16) else { return 0.0 };
    let fixed = |m: u64| m & 0xff0f_fff0;
    let rev = |m: u64| (m >> 20 & 0xf) << 4 | (m & 0xf);
    f64::from(u8::from(fixed(midr) == fixed(want) && rev(midr) >= rev(want)))
}

/// Derives every phase of `workload` on `machine`.
pub fn derive(machine: &Machine, workload: &Workload) -> Derivation {
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
    workload: &Workload,
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

/// Every metric of `model` with its valid range and TMA group, and its formula parsed
/// (`None`, with a note, where it does not parse).
fn parse_metrics(
    model: &'static Model,
    notes: &mut Vec<String>,
) -> (Vec<MetricDef>, Vec<String>, Vec<Option<Expr>>) {
    let mut defs: Vec<MetricDef> = Vec::new();
    let mut groups: Vec<String> = Vec::new();
    let mut parsed: Vec<Option<Expr>> = Vec::new();
    for metric in model.metrics {
        let name = model.str(metric.name).to_string();
        let pmu = model.str(metric.pmu).to_string();
        let g = model.str(metric.groups).to_string();
        let expr = match formula::parse(model.str(metric.expr)) {
            Ok(e) => Some(e),
            Err(e) => {
                notes.push(format!("{name}: {e}"));
                None
            }
        };
        let tree = tree_level(&g).is_some() && !name.starts_with("tma_info");
        let unit = model.str(metric.unit);
        defs.push(MetricDef {
            range: valid_range(unit, metric.scale, tree),
            name,
            pmu,
            expr: Expr::Num(f64::NAN),
            scale: metric.scale,
            tree,
        });
        groups.push(g);
        parsed.push(expr);
    }
    (defs, groups, parsed)
}

impl Builder<'_> {
    /// Links each parsed formula's identifiers to inputs: other metrics of the same PMU first,
    /// then the model's ids (on the metric's core PMUs), literals and probes as constants.
    fn link_metrics(&mut self, defs: &mut [MetricDef], parsed: Vec<Option<Expr>>) {
        // The core PMUs each metric's events default to.
        let core_pmus: Vec<usize> = (0..self.machine.pmus.len())
            .filter(|&i| is_core_pmu(&self.machine.pmus[i].class))
            .collect();
        let context_of = |pmu: &str| -> Vec<usize> {
            match self.machine.pmus.iter().position(|p| p.name == pmu) {
                Some(p) if is_core_pmu(&self.machine.pmus[p].class) => vec![p],
                _ => core_pmus.clone(),
            }
        };
        // Link identifiers: other metrics of the same PMU first, then the model's ids.
        let mut by_name: HashMap<(String, String), usize> = HashMap::new();
        for (i, d) in defs.iter().enumerate() {
            by_name.entry((d.pmu.clone(), d.name.to_ascii_lowercase())).or_insert(i);
        }
        let id_slot: HashMap<&str, usize> =
            self.model.ids.iter().enumerate().map(|(i, id)| (self.model.str(id.text), i)).collect();
        for (m, expr) in parsed.into_iter().enumerate() {
            let Some(mut expr) = expr else { continue };
            let pmu = defs[m].pmu.clone();
            let context = context_of(&pmu);
            let mut names = Vec::new();
            expr.names(&mut names);
            let mut table: HashMap<String, usize> = HashMap::new();
            for name in names {
                let (key, input) = match &name {
                    Expr::Ident(text) => {
                        let lower = text.to_ascii_lowercase();
                        let metric = by_name
                            .get(&(pmu.clone(), lower.clone()))
                            .or_else(|| {
                                by_name.iter().find(|((_, n), _)| *n == lower).map(|(_, i)| i)
                            })
                            .copied();
                        let input = match metric {
                            Some(r) if r != m => Some(Input::Metric(r)),
                            _ => id_slot.get(text.as_str()).map(|&s| {
                                let i = self.input(s, &context);
                                self.inputs[i].clone()
                            }),
                        };
                        (format!("i:{text}"), input.unwrap_or(Input::Const(f64::NAN)))
                    }
                    Expr::Literal(l) => (format!("l:{l}"), Input::Const(self.literal(l))),
                    Expr::Probe(f, arg) => {
                        let v = match f {
                            ProbeFn::HasEvent => {
                                let ok = id_slot.get(arg.as_str()).is_some_and(|&s| {
                                    let i = self.input(s, &context);
                                    matches!(self.inputs[i], Input::Vars(_))
                                });
                                f64::from(u8::from(ok))
                            }
                            ProbeFn::StrcmpCpuid => midr_matches(self.machine, arg),
                            ProbeFn::SourceCount => id_slot
                                .get(arg.as_str())
                                .and_then(|&s| self.locate(s, &context))
                                .map_or(1.0, |(pmus, _, _)| pmus.len().max(1) as f64),
                        };
                        (format!("p:{f:?}:{arg}"), Input::Const(v))
                    }
                    _ => continue,
                };
                table.entry(key).or_insert_with(|| {
                    self.inputs.push(input);
                    self.inputs.len() - 1
                });
            }
            expr.link(&mut |e| {
                let key = match e {
                    Expr::Ident(t) => format!("i:{t}"),
                    Expr::Literal(l) => format!("l:{l}"),
                    Expr::Probe(f, a) => format!("p:{f:?}:{a}"),
                    _ => return None,
                };
                table.get(&key).copied()
            });
            defs[m].expr = expr;
        }
    }
}

/// The propagation's targets for `phase`: each core PMU's tree level by level, each node a
/// share of its parent's achieved value, then the workload's named metrics. Also each tree
/// node's absolute fraction.
fn phase_targets(
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
fn pin_topdown_fields(
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
fn solve_targets(problem: &mut Problem, targets: &mut Vec<Target>, machine: &Machine) {
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
fn repair_out_of_range(problem: &mut Problem, target_of: &HashMap<usize, f64>) {
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
                available: !problem.reads_missing(m, 0),
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

/// The stage of the workload's named metrics: before the tree, so rates per instruction set
/// the scale of counts the tree's ratios leave free; a count they fix stays movable when a
/// tree node would otherwise leave its range.
const INFO_STAGE: u32 = 0;

/// A tree target of the propagation.
#[derive(Debug, Clone)]
struct Target {
    metric: usize,
    /// Which PMU's tree.
    tree: usize,
    /// The tree level, or [`INFO_STAGE`] for the workload's named metrics.
    stage: u32,
    /// The parent node's metric.
    parent: Option<usize>,
    /// The share of the parent's value (tree nodes).
    share: f64,
    /// The raw value to reach.
    value: f64,
    done: bool,
}

/// A metric's value as a fraction of slots (TMA nodes are printed as percentages).
fn fraction(p: &Problem, metric: usize) -> f64 {
    p.value(metric) * p.metrics[metric].scale / 100.0
}

/// Tree target `t` is decided: when its value differs from its target, the targets of its
/// descendants scale with it, and its siblings still open share what the parent leaves of the
/// decided ones, in their workload proportions.
fn decide(p: &Problem, targets: &mut [Target], t: usize) {
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
fn propagate(
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
        // The shallowest stage still open: its stuck targets come before deeper ones.
        let stage = pending.iter().map(|&t| targets[t].stage).min().expect("pending");
        let current: Vec<usize> =
            pending.iter().copied().filter(|&t| targets[t].stage == stage).collect();
        // A count a shallower open target reads is not for a deeper one to fix.
        let shallower_reads = |v: usize, t: usize| {
            pending.iter().any(|&o| {
                targets[o].stage < targets[t].stage && problem.deps[targets[o].metric].contains(&v)
            })
        };
        let unknown = |p: &Problem, m: usize| unknowns(p, m, reserved, fielded);
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
fn unknowns(
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
fn fit_stuck(
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
fn fit_fields(
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
