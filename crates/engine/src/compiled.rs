//! Evaluating a compiled model's metrics over input values, and the queries that select
//! metrics and find what they read (perf's `-M` matching, the reference closure, needed
//! inputs). They live above the catalogue so that editing them never recompiles the
//! generated code (ARCHITECTURE.md); `model::catalog` keeps only plain data.

use tmetric_catalog::Model;
use tmetric_model::Literal;
use tmetric_model::catalog::{Facts, Inputs, MetricFn, Ref};
use tmetric_model::sem::Fail;

/// Selection and dependency queries over a compiled model.
pub trait Select {
    /// Metrics whose name equals `name`, ignoring case (one per PMU on hybrid models).
    fn metrics_named(&self, name: &str) -> Vec<usize>;
    /// perf's `-M` matching (`match_metric` in tools/perf/util/metricgroup.c): `item` equals, ignoring case, the metric name or one of
    /// its `;`-separated groups; `all` selects every metric.
    fn select(&self, item: &str) -> Vec<usize>;
    /// `roots` and every metric they reference, transitively, in evaluation order.
    fn closure(&self, roots: &[usize]) -> Vec<u16>;
    /// The `#literal`s `roots` and the metrics they reference read, in order of first use.
    fn literals_of(&self, roots: &[usize]) -> Vec<Literal>;
    /// Slots that `calls` (`id_calls` bits) functions take as argument in `roots` and the
    /// metrics they reference, sorted.
    fn call_slots_of(&self, roots: &[usize], calls: u8) -> Vec<usize>;
    /// Slots that `calls` functions take as argument in any metric of the model.
    fn call_slots(&self, calls: u8) -> Vec<usize>;
    /// Input slots `metric` needs on a machine with these facts, following metric references
    /// as perf does (`expr__find_ids`, util/metricgroup.c's references). With `threshold`, the root is processed through its
    /// `MetricThreshold`, as perf does unless `--metric-no-threshold`.
    fn needed_ids(
        &self,
        metric: usize,
        facts: &Facts<'_>,
        threshold: bool,
    ) -> Result<Vec<u16>, Fail>;
}

impl Select for Model {
    fn metrics_named(&self, name: &str) -> Vec<usize> {
        (0..self.metric_count())
            .filter(|&m| self.str(self.metric(m).name).eq_ignore_ascii_case(name))
            .collect()
    }

    fn select(&self, item: &str) -> Vec<usize> {
        (0..self.metric_count())
            .filter(|&m| {
                let metric = self.metric(m);
                item.eq_ignore_ascii_case("all")
                    || self.str(metric.name).eq_ignore_ascii_case(item)
                    || self.str(metric.groups).split(';').any(|g| g.eq_ignore_ascii_case(item))
                    || (item.eq_ignore_ascii_case("No_group") && metric.groups.is_empty())
            })
            .collect()
    }

    fn closure(&self, roots: &[usize]) -> Vec<u16> {
        let mut wanted = vec![false; self.metric_count()];
        let mut stack: Vec<usize> = roots.to_vec();
        while let Some(m) = stack.pop() {
            if std::mem::replace(&mut wanted[m], true) {
                continue;
            }
            stack.extend(self.metric(m).refs.iter().map(|&r| r as usize));
        }
        self.eval_order.iter().copied().filter(|&m| wanted[m as usize]).collect()
    }

    fn literals_of(&self, roots: &[usize]) -> Vec<Literal> {
        let mut out: Vec<Literal> = Vec::new();
        for m in self.closure(roots) {
            for &lit in self.metric(m as usize).literals() {
                if !out.contains(&lit) {
                    out.push(lit);
                }
            }
        }
        out
    }

    fn call_slots_of(&self, roots: &[usize], calls: u8) -> Vec<usize> {
        let mut out: Vec<usize> = self
            .closure(roots)
            .into_iter()
            .flat_map(|m| self.metric(m as usize).call_slots(calls))
            .map(usize::from)
            .collect();
        out.sort_unstable();
        out.dedup();
        out
    }

    fn call_slots(&self, calls: u8) -> Vec<usize> {
        (0..self.ids.len()).filter(|&s| self.ids[s].calls & calls != 0).collect()
    }

    fn needed_ids(
        &self,
        metric: usize,
        facts: &Facts<'_>,
        threshold: bool,
    ) -> Result<Vec<u16>, Fail> {
        let root = self.metric(metric);
        let first = match (threshold, root.needed_threshold_refs(facts)) {
            (true, Some(refs)) => refs?,
            _ => root.needed_refs(facts)?,
        };
        let mut ids = Vec::new();
        let mut seen = vec![false; self.metric_count()];
        let mut queue = first;
        while let Some(r) = queue.pop() {
            match r {
                Ref::Id(slot) => {
                    if !ids.contains(&slot) {
                        ids.push(slot);
                    }
                }
                Ref::Metric(m) => {
                    if !std::mem::replace(&mut seen[m as usize], true) {
                        // A reference whose own pass fails contributes nothing; perf then
                        // evaluates it to NaN.
                        if let Ok(refs) = self.metric(m as usize).needed_refs(facts) {
                            queue.extend(refs);
                        }
                    }
                }
            }
        }
        ids.sort_unstable();
        Ok(ids)
    }
}

/// Reusable buffers to evaluate a model's metrics over one set of counts.
#[derive(Debug, Clone)]
pub struct Evaluator {
    /// Per input slot: its value (NaN when unknown).
    pub values: Vec<f64>,
    /// Per input slot: `source_count()`.
    pub source_counts: Vec<f64>,
    /// Per input slot: `aggr_nr()` (perf 7.x): the counters summed into its value.
    pub aggr_nrs: Vec<f64>,
    /// Per input slot: `has_event()`/`strcmp_cpuid_str()` results.
    pub probes: Vec<f64>,
    /// Literal values, NaN when unknown.
    pub literals: [f64; Literal::COUNT],
    /// Per metric: the last computed value (NaN when failed or not computed).
    pub metrics: Vec<f64>,
    /// Per metric: why the last evaluation produced no value.
    pub failures: Vec<Option<Fail>>,
    /// Per metric of the model the buffers were made for: its functions and inputs, read once
    /// rather than through the catalogue's indices at every evaluation.
    bound: Vec<Bound>,
    /// That model's address, to tell it from another one passed to [`Evaluator::run`].
    bound_to: usize,
}

/// One metric's functions and local inputs, as [`Evaluator::run`] reads them.
#[derive(Debug, Clone, Copy)]
struct Bound {
    value: MetricFn,
    threshold: Option<MetricFn>,
    slots: &'static [u16],
    refs: &'static [u16],
}

impl Bound {
    fn of(model: &Model, m: usize) -> Bound {
        let metric = model.metric(m);
        Bound {
            value: metric.value_fn(),
            threshold: metric.threshold_fn(),
            slots: metric.slots,
            refs: metric.refs,
        }
    }
}

impl Evaluator {
    /// Buffers for `model`, every input unknown.
    pub fn new(model: &Model) -> Evaluator {
        Evaluator {
            values: vec![f64::NAN; model.ids.len()],
            source_counts: vec![1.0; model.ids.len()],
            aggr_nrs: vec![1.0; model.ids.len()],
            probes: vec![0.0; model.ids.len()],
            literals: [f64::NAN; Literal::COUNT],
            metrics: vec![f64::NAN; model.metric_count()],
            failures: vec![None; model.metric_count()],
            bound: (0..model.metric_count()).map(|m| Bound::of(model, m)).collect(),
            bound_to: std::ptr::from_ref(model).addr(),
        }
    }

    /// Metric `m` of `model`: from the buffers' own table when they were made for it.
    #[inline]
    fn bound(&self, model: &Model, m: usize) -> Bound {
        if self.bound_to == std::ptr::from_ref(model).addr() {
            self.bound[m]
        } else {
            Bound::of(model, m)
        }
    }

    /// Evaluates the metrics of `order` (dependency order, as from [`Select::closure`]).
    pub fn run(&mut self, model: &Model, order: &[u16]) {
        if self.bound_to == std::ptr::from_ref(model).addr() {
            // Taken out for the loop, which writes the other buffers.
            let bound = std::mem::take(&mut self.bound);
            self.run_with(order, |m| bound[m]);
            self.bound = bound;
        } else {
            self.run_with(order, |m| Bound::of(model, m));
        }
    }

    #[inline(always)]
    fn run_with(&mut self, order: &[u16], metric: impl Fn(usize) -> Bound) {
        for &m in order {
            let m = m as usize;
            let metric = metric(m);
            let inputs = Inputs {
                slots: metric.slots,
                refs: metric.refs,
                values: &self.values,
                source_counts: &self.source_counts,
                aggr_nrs: &self.aggr_nrs,
                probes: &self.probes,
                literals: &self.literals,
                metrics: &self.metrics,
            };
            let result = (metric.value)(&inputs);
            // A failed reference reads as NaN in the metrics that use it, as in perf.
            self.metrics[m] = *result.as_ref().unwrap_or(&f64::NAN);
            self.failures[m] = result.err();
        }
    }

    /// Evaluates metric `m`'s threshold over the current values; `None` without one.
    pub fn threshold(&self, model: &Model, m: usize) -> Option<Result<f64, Fail>> {
        let metric = self.bound(model, m);
        let threshold = metric.threshold?;
        Some(threshold(&Inputs {
            slots: metric.slots,
            refs: metric.refs,
            values: &self.values,
            source_counts: &self.source_counts,
            aggr_nrs: &self.aggr_nrs,
            probes: &self.probes,
            literals: &self.literals,
            metrics: &self.metrics,
        }))
    }
}

/// The outcome of one root metric.
#[derive(Debug, Clone, PartialEq)]
pub struct MetricResult {
    /// Index into [`Model::metrics`].
    pub metric: usize,
    /// The expression's value, before `ScaleUnit` (NaN when an input is missing).
    pub value: f64,
    /// Why there is no value at all.
    pub failure: Option<Fail>,
    /// Needed input slots that have no value (NaN), so the reader knows why it is NaN.
    pub missing: Vec<u16>,
    /// perf's colour rule: `Some(true)` when the threshold is crossed (non-zero), `Some(false)`
    /// when not (zero), `None` without a threshold or when it cannot be computed.
    pub threshold: Option<bool>,
}

impl MetricResult {
    /// The value scaled by the metric's `ScaleUnit`, as perf prints it.
    pub fn scaled(&self, model: &Model) -> f64 {
        self.value * model.metric(self.metric).scale
    }
}

impl Evaluator {
    /// The facts of the current literals and probes.
    pub fn facts(&self) -> Facts<'_> {
        Facts { literals: &self.literals, probes: &self.probes }
    }

    /// Evaluates `roots` and everything they reference from the current inputs, and explains
    /// each root's result.
    pub fn evaluate(&mut self, model: &Model, roots: &[usize]) -> Vec<MetricResult> {
        let order = model.closure(roots);
        self.run(model, &order);
        roots
            .iter()
            .map(|&m| {
                let missing = model
                    .needed_ids(m, &self.facts(), false)
                    .map(|ids| {
                        ids.into_iter()
                            .filter(|&slot| self.values[slot as usize].is_nan())
                            .collect()
                    })
                    .unwrap_or_default();
                let threshold = match self.threshold(model, m) {
                    Some(Ok(v)) if !v.is_nan() => Some(v != 0.0),
                    _ => None,
                };
                MetricResult {
                    metric: m,
                    value: self.metrics[m],
                    failure: self.failures[m],
                    missing,
                    threshold,
                }
            })
            .collect()
    }
}
