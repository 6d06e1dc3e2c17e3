//! The system a phase is solved as: unknown (or known) counts, the inputs formulas read, the
//! metrics; evaluating a metric over them and solving one unknown for a metric's target.

use std::collections::{BTreeSet, HashMap};

use super::close;
use crate::formula::Expr;
use crate::profile::Source;

/// Where a linked identifier's value comes from.
#[derive(Debug, Clone)]
pub(super) enum Input {
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
pub(super) struct Var {
    pub(super) source: Source,
    pub(super) per_cycle: bool,
    pub(super) value: Option<f64>,
    pub(super) hi: f64,
    pub(super) default: f64,
    /// Fixed by the clock, a target or a default of a stuck target: not free for repairs.
    pub(super) pinned: bool,
    /// Fixed only by one of the workload's named (non-tree) metrics: a repair of a metric out
    /// of range may still move it.
    pub(super) soft: bool,
    /// A clock family's count or a topdown field: never solved for.
    pub(super) known: bool,
    pub(super) label: String,
}

#[derive(Debug, Clone)]
pub(super) struct MetricDef {
    pub(super) name: String,
    pub(super) pmu: String,
    pub(super) expr: Expr,
    pub(super) scale: f64,
    pub(super) range: (f64, f64),
    pub(super) tree: bool,
}

pub(super) struct Problem {
    /// Metrics that evaluate to a fixed value (their targets, while the topdown fields are
    /// not fitted yet).
    pub(super) overrides: HashMap<usize, f64>,
    pub(super) metrics: Vec<MetricDef>,
    pub(super) inputs: Vec<Input>,
    pub(super) vars: Vec<Var>,
    /// Per metric: the vars it reads, directly or through other metrics.
    pub(super) deps: Vec<BTreeSet<usize>>,
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
    pub(super) fn reads_missing(&self, metric: usize, depth: usize) -> bool {
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

    /// Whether `metric` is NaN by its formula's own `NaN` in the branches the machine's
    /// probes take (directly or through a metric it reads): perf gives NaN there too.
    pub(super) fn nan_by_formula(&self, metric: usize, depth: usize) -> bool {
        if depth > 64 || self.overrides.contains_key(&metric) {
            return false;
        }
        let known = |i: usize| match &self.inputs[i] {
            Input::Const(v) => Some(*v),
            _ => None,
        };
        let expr = &self.metrics[metric].expr;
        if expr.live_nan(&known) {
            return true;
        }
        let mut used = Vec::new();
        expr.live_values(&known, &mut used);
        used.into_iter().any(|i| match &self.inputs[i] {
            Input::Metric(r) => self.nan_by_formula(*r, depth + 1),
            _ => false,
        })
    }

    pub(super) fn value(&self, metric: usize) -> f64 {
        let mut memo = vec![None; self.metrics.len()];
        self.eval(metric, &mut memo, 0)
    }

    pub(super) fn compute_deps(&mut self) {
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
    pub(super) fn solve(&mut self, metric: usize, var: usize, target: f64) -> Solve {
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

/// What a one-unknown solve did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Solve {
    /// The target is met.
    Met,
    /// The closest value in range misses it.
    Missed,
    /// The metric does not depend on the unknown here.
    Insensitive,
}
