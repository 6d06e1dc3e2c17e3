//! The interpreter over a resolved table: perf's run-time evaluation, used as the oracle
//! the generated metric functions are checked against, and as the baseline they are
//! benchmarked against.

use tmetric_expr::{Env, EvalError, Expr, Ident, Literal, eval};

use crate::resolve::{ResolvedTable, Target};

/// Inputs by slot, the same arrays the generated code reads.
#[derive(Debug, Clone, Copy)]
pub struct OracleInputs<'a> {
    /// Per slot value.
    pub values: &'a [f64],
    /// Per slot `source_count()`.
    pub source_counts: &'a [f64],
    /// Per slot `aggr_nr()`.
    pub aggr_nrs: &'a [f64],
    /// Per slot `has_event()`/`strcmp_cpuid_str()` result.
    pub probes: &'a [f64],
    /// Literal values in `Literal::ALL` order.
    pub literals: &'a [f64],
}

/// Evaluates metrics of one resolved table by interpreting their trees, with perf's lazy,
/// cached evaluation of metric references (a failed reference reads as NaN).
pub struct Oracle<'r, 'a> {
    resolved: &'r ResolvedTable<'r>,
    inputs: OracleInputs<'a>,
    cache: Vec<Option<f64>>,
}

impl<'r, 'a> Oracle<'r, 'a> {
    /// An oracle over `resolved` with these inputs.
    pub fn new(resolved: &'r ResolvedTable<'r>, inputs: OracleInputs<'a>) -> Oracle<'r, 'a> {
        Oracle { resolved, inputs, cache: vec![None; resolved.metrics.len()] }
    }

    /// The value of metric `m` (index into the table's metrics).
    pub fn metric(&mut self, m: usize) -> Result<f64, EvalError> {
        let expr =
            self.resolved.metrics[m].expr.as_ref().expect("only compiled metrics are evaluated");
        self.eval_in(m, expr)
    }

    /// The value of metric `m`'s threshold, if it has a compiled one.
    pub fn threshold(&mut self, m: usize) -> Option<Result<f64, EvalError>> {
        let expr = self.resolved.metrics[m].threshold.as_ref()?;
        Some(self.eval_in(m, expr))
    }

    fn eval_in(&mut self, m: usize, expr: &Expr) -> Result<f64, EvalError> {
        let mut env = MetricEnv { oracle: self, metric: m };
        eval(expr, &mut env)
    }
}

struct MetricEnv<'o, 'r, 'a> {
    oracle: &'o mut Oracle<'r, 'a>,
    metric: usize,
}

impl MetricEnv<'_, '_, '_> {
    fn target(&self, id: &Ident) -> Target {
        self.oracle.resolved.metrics[self.metric].targets[&id.name]
    }

    fn slot(&self, id: &Ident) -> usize {
        match self.target(id) {
            Target::Id(slot) => slot,
            Target::Metric(_) => unreachable!("function arguments are never metrics"),
        }
    }
}

impl Env for MetricEnv<'_, '_, '_> {
    fn id(&mut self, id: &Ident) -> f64 {
        match self.target(id) {
            Target::Id(slot) => self.oracle.inputs.values[slot],
            Target::Metric(r) => {
                if let Some(v) = self.oracle.cache[r] {
                    return v;
                }
                let v = self.oracle.metric(r).unwrap_or(f64::NAN);
                self.oracle.cache[r] = Some(v);
                v
            }
        }
    }

    fn literal(&mut self, literal: Literal) -> Option<f64> {
        Some(self.oracle.inputs.literals[literal.index()])
    }

    fn source_count(&mut self, id: &Ident) -> f64 {
        self.oracle.inputs.source_counts[self.slot(id)]
    }

    fn aggr_nr(&mut self, id: &Ident) -> f64 {
        self.oracle.inputs.aggr_nrs[self.slot(id)]
    }

    fn has_event(&mut self, id: &Ident) -> bool {
        self.oracle.inputs.probes[self.slot(id)] != 0.0
    }

    fn cpuid_match(&mut self, id: &Ident) -> f64 {
        self.oracle.inputs.probes[self.slot(id)]
    }
}
