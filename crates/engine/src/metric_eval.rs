//! One model's metrics over input values that a front end looks up: the evaluator every front
//! end shares (`stat` through [`crate::Plan::evaluate`], `eval --counts`, `eval --from-perf`,
//! `report`). The front end says where a value comes from (a counter, a counts-file key, a
//! log row); this type owns the literals, the probes, the needed-input sets and which metrics a
//! set of present inputs can compute.

use rustc_hash::FxHashMap;
use std::rc::Rc;

use tmetric_catalog::Model;
use tmetric_catalog::catalog::{Facts, id_calls};
use tmetric_model::Literal;
use tmetric_model::cpuid::cpuid_matches;
use tmetric_model::sem::Fail;

use crate::compiled::{Evaluator, MetricResult, Select};

/// A root's needed input slots, with and without its threshold's.
#[derive(Debug, Clone, PartialEq)]
pub struct NeededInputs {
    /// What the expression reads (perf's needed-events pass).
    pub expr: Result<Vec<u16>, Fail>,
    /// The expression's inputs followed by the threshold's that are not among them; the
    /// expression's alone when the threshold's pass fails.
    pub all: Result<Vec<u16>, Fail>,
}

/// How far a set of present inputs covers a metric.
#[derive(Debug, Clone, PartialEq)]
pub enum Coverage {
    /// Every input is present and every literal known: it can be computed.
    Complete,
    /// The inputs are present, a literal it reads is unknown.
    UnknownLiteral,
    /// Some inputs are present; these are not.
    Partial(Vec<u16>),
    /// None of its inputs is present.
    Absent,
    /// It reads no input at all (`0 if not #has_pmem`): it says nothing about the inputs.
    NoInputs,
    /// Its needed-inputs pass fails (an unknown literal decides what it reads).
    Fails(Fail),
}

/// Why a metric is NaN or 0 although every input it needs has a value: a fact of the machine
/// or inputs that counted 0 ([`MetricEval::explain`]).
#[derive(Debug, Clone, PartialEq)]
pub enum Why {
    /// `#literal` has this value (NaN: unknown) on the machine; with 1 the metric would be a
    /// number.
    Literal(Literal, f64),
    /// `has_event(arg)` or `strcmp_cpuid_str(arg)` (`call`) gave `value` (0: false, NaN:
    /// unknown); with 1 the metric would be a number.
    Probe {
        /// The function's name.
        call: &'static str,
        /// Its argument as perf normalises it.
        arg: &'static str,
        /// What it gave.
        value: f64,
    },
    /// A division by zero although every input was counted: these input slots counted 0,
    /// these metrics it references (indices into `Model::metrics`) are 0; with one of them
    /// non-zero (with all, when one is not enough) the metric would be a number.
    DivisionByZero {
        /// Input slots that counted 0.
        inputs: Vec<u16>,
        /// Referenced metrics that are 0.
        metrics: Vec<usize>,
    },
}

/// One model's evaluator with its literals, probes and cached needed-input sets: the metric
/// evaluation every source of values shares (a live or recorded plan, a counts file, a perf stat
/// log), which only fills its inputs. Named for what it does rather than where values come from:
/// live counting uses it as much as recorded counts do.
#[derive(Debug, Clone)]
pub struct MetricEval {
    /// The model whose metrics this evaluates.
    pub model: &'static Model,
    evaluator: Evaluator,
    /// Slots named by `has_event()`: the only probes that change between samples.
    has_event: Vec<u16>,
    /// Slots given a value since the last [`MetricEval::clear_inputs`].
    filled: Vec<u16>,
    /// Needed inputs by root and `has_event()` values.
    needed: FxHashMap<usize, Rc<NeededInputs>>,
    /// The `has_event()` probes (as bits) the cached needed sets were found under.
    needed_probes: Vec<u64>,
    /// Evaluation order (the root and what it references) by root: a long log evaluates the
    /// same roots in every block, and the closure walk allocated for each.
    orders: FxHashMap<usize, Rc<[u16]>>,
}

impl MetricEval {
    /// An evaluator for `model` with these literal values (NaN when unknown). With `cpuid`,
    /// `strcmp_cpuid_str()` compares against it; without, it is NaN, as the machine is unknown.
    /// Every input is unknown and every `has_event()` probe false until set.
    pub fn new(
        model: &'static Model,
        literals: [f64; Literal::COUNT],
        cpuid: Option<&str>,
    ) -> MetricEval {
        let mut evaluator = Evaluator::new(model);
        evaluator.literals = literals;
        for slot in model.call_slots(id_calls::STRCMP_CPUID_STR) {
            evaluator.probes[slot] = cpuid.map_or(f64::NAN, |cpuid| {
                let wanted = model.str(model.ids[slot].text);
                f64::from(u8::from(cpuid_matches(model.arch, wanted, cpuid)))
            });
        }
        let has_event =
            model.call_slots(id_calls::HAS_EVENT).into_iter().map(|s| s as u16).collect();
        MetricEval {
            model,
            evaluator,
            has_event,
            filled: Vec::new(),
            needed: FxHashMap::default(),
            needed_probes: Vec::new(),
            orders: FxHashMap::default(),
        }
    }

    /// The literal values.
    pub fn literals(&self) -> &[f64; Literal::COUNT] {
        &self.evaluator.literals
    }

    /// Sets literal `lit` (NaN for unknown). Cached needed sets depend on literals.
    pub fn set_literal(&mut self, lit: Literal, value: f64) {
        self.evaluator.literals[lit.index()] = value;
        self.needed.clear();
    }

    /// The facts (literals, probes) the needed-inputs pass reads.
    pub fn facts(&self) -> Facts<'_> {
        self.evaluator.facts()
    }

    /// Slots named by `has_event()`.
    pub fn has_event_slots(&self) -> &[u16] {
        &self.has_event
    }

    /// Sets probe `slot` (`has_event()`: whether the event was counted).
    pub fn set_probe(&mut self, slot: u16, present: bool) {
        self.evaluator.probes[slot as usize] = f64::from(u8::from(present));
    }

    /// Sets probe `slot` to a value: `strcmp_cpuid_str()` results, which may be NaN.
    pub fn set_probe_value(&mut self, slot: u16, value: f64) {
        self.evaluator.probes[slot as usize] = value;
    }

    /// Gives input `slot` a value (NaN: not counted) and `source_count()`. Its `aggr_nr()`
    /// is `source_count()` until [`MetricEval::set_aggr_nr`] says otherwise: a front end that
    /// knows only the instances it summed has summed one counter per instance.
    pub fn set_input(&mut self, slot: u16, value: f64, source_count: f64) {
        self.evaluator.values[slot as usize] = value;
        self.evaluator.source_counts[slot as usize] = source_count;
        self.evaluator.aggr_nrs[slot as usize] = source_count;
        self.filled.push(slot);
    }

    /// Sets input `slot`'s `aggr_nr()` (perf 7.x): how many counters, one per CPU and thread
    /// of each PMU instance, were summed into its value. Call after [`MetricEval::set_input`].
    pub fn set_aggr_nr(&mut self, slot: u16, aggr_nr: f64) {
        self.evaluator.aggr_nrs[slot as usize] = aggr_nr;
    }

    /// The value input `slot` has now.
    pub fn input(&self, slot: u16) -> f64 {
        self.evaluator.values[slot as usize]
    }

    /// Forgets every input set since the last call, so the next sample starts unknown.
    pub fn clear_inputs(&mut self) {
        for slot in self.filled.drain(..) {
            self.evaluator.values[slot as usize] = f64::NAN;
            self.evaluator.source_counts[slot as usize] = 1.0;
            self.evaluator.aggr_nrs[slot as usize] = 1.0;
        }
    }

    /// Root `m`'s needed inputs under the current literals and probes (cached: long logs ask
    /// for the same roots in every block).
    pub fn needed(&mut self, m: usize) -> Rc<NeededInputs> {
        // The sets hold for the probes they were found under: compared in place (a long log
        // asks once per root and block, and the probes seldom change), forgotten on a change.
        let probes = &self.evaluator.probes;
        let same = self.needed_probes.len() == self.has_event.len()
            && self
                .has_event
                .iter()
                .zip(&self.needed_probes)
                .all(|(&s, &bits)| probes[s as usize].to_bits() == bits);
        if !same {
            self.needed.clear();
            self.needed_probes.clear();
            self.needed_probes.extend(self.has_event.iter().map(|&s| probes[s as usize].to_bits()));
        }
        if let Some(known) = self.needed.get(&m) {
            return Rc::clone(known);
        }
        let facts = self.evaluator.facts();
        let expr = self.model.needed_ids(m, &facts, false);
        let all = match (&expr, self.model.needed_ids(m, &facts, true)) {
            (Ok(expr), Ok(threshold)) => {
                let mut all = expr.clone();
                all.extend(threshold.into_iter().filter(|s| !expr.contains(s)));
                Ok(all)
            }
            (expr, _) => expr.clone(),
        };
        let found = Rc::new(NeededInputs { expr, all });
        self.needed.insert(m, Rc::clone(&found));
        found
    }

    /// Whether every literal `m` and the metrics it references read is known.
    pub fn literals_known(&self, m: usize) -> bool {
        self.model
            .literals_of(&[m])
            .iter()
            .all(|&lit| !self.evaluator.literals[lit.index()].is_nan())
    }

    /// How far the inputs for which `present` holds cover metric `m`'s expression.
    pub fn coverage(&mut self, m: usize, present: impl Fn(u16) -> bool) -> Coverage {
        let needed = self.needed(m);
        let ids = match &needed.expr {
            Ok(ids) => ids,
            Err(fail) => return Coverage::Fails(*fail),
        };
        if ids.is_empty() {
            return Coverage::NoInputs;
        }
        let missing: Vec<u16> = ids.iter().copied().filter(|&s| !present(s)).collect();
        if missing.len() == ids.len() {
            Coverage::Absent
        } else if !missing.is_empty() {
            Coverage::Partial(missing)
        } else if self.literals_known(m) {
            Coverage::Complete
        } else {
            Coverage::UnknownLiteral
        }
    }

    /// Why root `m`, evaluated over the current inputs, is NaN or 0 although its inputs have
    /// values (the caller checks that none is missing): the first `#literal` that is 0 or
    /// unknown, then the first `has_event()`/`strcmp_cpuid_str()` probe that is false or
    /// unknown, which turned to 1 makes the value a number (NaN) or non-zero (0); else, for
    /// NaN, the inputs that counted 0 (a 0/0). `None` when the value is neither, or nothing
    /// of that kind decides it (a 0 from inputs that counted 0 is a measurement). The
    /// inputs, literals and probes are left as they were.
    pub fn explain(&mut self, m: usize) -> Option<Why> {
        let model = self.model;
        let order = Rc::clone(self.orders.entry(m).or_insert_with(|| model.closure(&[m]).into()));
        let value = |evaluator: &mut Evaluator| {
            evaluator.run(model, &order);
            evaluator.metrics[m]
        };
        let base = value(&mut self.evaluator);
        if !(base.is_nan() || base == 0.0) {
            return None;
        }
        // A value the fact changes into: a number for NaN, non-zero for 0.
        let decides =
            |v: f64| if base.is_nan() { v.is_finite() } else { v.is_finite() && v != 0.0 };
        // Inputs the fact left out (`x if has_event(x) else 0` does not count `x`) read 1
        // while a fact is turned.
        let unread: Vec<usize> = order
            .iter()
            .flat_map(|&k| model.metric(k as usize).slots.iter().map(|&s| s as usize))
            .filter(|&s| self.evaluator.values[s].is_nan())
            .collect();
        for &s in &unread {
            self.evaluator.values[s] = 1.0;
        }
        let mut why = None;
        for lit in model.literals_of(&[m]) {
            let held = self.evaluator.literals[lit.index()];
            if held != 0.0 && !held.is_nan() {
                continue;
            }
            self.evaluator.literals[lit.index()] = 1.0;
            let changed = value(&mut self.evaluator);
            self.evaluator.literals[lit.index()] = held;
            if decides(changed) {
                why = Some(Why::Literal(lit, held));
                break;
            }
        }
        let probes =
            [(id_calls::HAS_EVENT, "has_event"), (id_calls::STRCMP_CPUID_STR, "strcmp_cpuid_str")];
        for (calls, call) in probes {
            if why.is_some() {
                break;
            }
            for slot in model.call_slots_of(&[m], calls) {
                let held = self.evaluator.probes[slot];
                if held != 0.0 && !held.is_nan() {
                    continue;
                }
                self.evaluator.probes[slot] = 1.0;
                let changed = value(&mut self.evaluator);
                self.evaluator.probes[slot] = held;
                if decides(changed) {
                    let arg = model.str(model.ids[slot].text);
                    why = Some(Why::Probe { call, arg, value: held });
                    break;
                }
            }
        }
        for &s in &unread {
            self.evaluator.values[s] = f64::NAN;
        }
        if why.is_none() && base.is_nan() {
            why = self.division_by_zero(m, &order);
        }
        // Leave the metrics as the caller's evaluation computed them.
        value(&mut self.evaluator);
        why
    }

    /// For a NaN root with every input counted: the inputs that counted 0 and the metrics it
    /// references that are 0 (`tma_dsb + tma_mite` as a divisor) which, made 1 one at a
    /// time, turn the value into a number; all of them when it takes more than one.
    fn division_by_zero(&mut self, m: usize, order: &[u16]) -> Option<Why> {
        let model = self.model;
        self.evaluator.run(model, order);
        let inputs: Vec<u16> = match &self.needed(m).expr {
            Ok(ids) => {
                ids.iter().copied().filter(|&s| self.evaluator.values[s as usize] == 0.0).collect()
            }
            Err(_) => Vec::new(),
        };
        let metrics: Vec<usize> = order
            .iter()
            .map(|&k| k as usize)
            .filter(|&k| k != m && self.evaluator.metrics[k] == 0.0)
            .collect();
        // Made 1 together, then the value: an input changes everything after it, a
        // referenced metric what follows it in the evaluation order.
        let try_with = |evaluator: &mut Evaluator, inputs: &[u16], metrics: &[usize]| {
            for &s in inputs {
                evaluator.values[s as usize] = 1.0;
            }
            evaluator.run(model, order);
            if let Some(first) = order.iter().position(|&k| metrics.contains(&(k as usize))) {
                for &k in metrics {
                    evaluator.metrics[k] = 1.0;
                }
                // Every metric after the first one made 1, except the others made 1.
                let rest: Vec<u16> = order[first + 1..]
                    .iter()
                    .copied()
                    .filter(|&k| !metrics.contains(&(k as usize)))
                    .collect();
                evaluator.run(model, &rest);
            }
            let finite = evaluator.metrics[m].is_finite();
            for &s in inputs {
                evaluator.values[s as usize] = 0.0;
            }
            finite
        };
        let mut deciding_inputs = Vec::new();
        for &s in &inputs {
            if try_with(&mut self.evaluator, &[s], &[]) {
                deciding_inputs.push(s);
            }
        }
        let mut deciding_metrics = Vec::new();
        for &k in &metrics {
            if try_with(&mut self.evaluator, &[], &[k]) {
                deciding_metrics.push(k);
            }
        }
        if deciding_inputs.is_empty() && deciding_metrics.is_empty() {
            if try_with(&mut self.evaluator, &inputs, &[]) {
                deciding_inputs = inputs;
            } else if try_with(&mut self.evaluator, &[], &metrics) {
                deciding_metrics = metrics;
            } else {
                return None;
            }
        }
        Some(Why::DivisionByZero { inputs: deciding_inputs, metrics: deciding_metrics })
    }

    /// Evaluates `roots` and what they reference over the current inputs.
    pub fn evaluate(&mut self, roots: &[usize]) -> Vec<MetricResult> {
        let mut results = self.evaluator.evaluate(self.model, roots);
        for result in &mut results {
            self.nan_without_inputs(result);
        }
        results
    }

    /// A value computed from none of the inputs it needs measures nothing, whatever perf's
    /// `min`/`max`/`if` made of the NaNs (`tma_bad_speculation`'s `max(1 - NaN, 0)` is 0):
    /// it is `nan`, and its missing inputs say why, in every front end.
    fn nan_without_inputs(&mut self, result: &mut MetricResult) {
        if result.value.is_nan() || result.missing.is_empty() {
            return;
        }
        let needed = self.needed(result.metric);
        if matches!(&needed.expr, Ok(ids) if ids.len() == result.missing.len()) {
            result.value = f64::NAN;
            result.threshold = None;
        }
    }

    /// Evaluates one root, as [`MetricEval::evaluate`] does, from the cached order and needed
    /// inputs.
    pub fn evaluate_one(&mut self, root: usize) -> MetricResult {
        let model = self.model;
        let order =
            Rc::clone(self.orders.entry(root).or_insert_with(|| model.closure(&[root]).into()));
        self.evaluator.run(model, &order);
        let needed = self.needed(root);
        let values = &self.evaluator.values;
        let missing = match &needed.expr {
            Ok(ids) => ids.iter().copied().filter(|&s| values[s as usize].is_nan()).collect(),
            Err(_) => Vec::new(),
        };
        let threshold = match self.evaluator.threshold(model, root) {
            Some(Ok(v)) if !v.is_nan() => Some(v != 0.0),
            _ => None,
        };
        let mut result = MetricResult {
            metric: root,
            value: self.evaluator.metrics[root],
            failure: self.evaluator.failures[root],
            missing,
            threshold,
        };
        self.nan_without_inputs(&mut result);
        result
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spr() -> &'static Model {
        tmetric_catalog::model("sapphirerapids").expect("sapphirerapids")
    }

    fn named(model: &Model, name: &str) -> usize {
        model.metrics_named(name)[0]
    }

    #[test]
    fn coverage_follows_the_present_inputs_and_literals() {
        let model = spr();
        let ipc = named(model, "tma_info_thread_ipc");
        let mut off = MetricEval::new(model, [f64::NAN; Literal::COUNT], None);
        let ids = off.needed(ipc).expr.clone().unwrap();
        assert_eq!(ids.len(), 2, "instructions and cycles");
        assert_eq!(off.coverage(ipc, |_| false), Coverage::Absent);
        let first = ids[0];
        assert_eq!(off.coverage(ipc, |s| s == first), Coverage::Partial(vec![ids[1]]));
        assert_eq!(off.coverage(ipc, |_| true), Coverage::Complete);
        // The TMA level-1 metrics read #slots-free formulas on SPR but `#smt_on` elsewhere:
        // a metric reading an unknown literal is never complete.
        let smt = (0..model.metric_count())
            .find(|&m| model.literals_of(&[m]).contains(&Literal::SmtOn))
            .expect("an SPR metric reads #smt_on");
        if matches!(&off.needed(smt).expr, Ok(ids) if !ids.is_empty()) {
            assert_eq!(off.coverage(smt, |_| true), Coverage::UnknownLiteral);
        }
    }

    /// Inputs every slot of `model` with a distinct non-zero count.
    fn filled(model: &'static Model, literals: [f64; Literal::COUNT]) -> MetricEval {
        let mut off = MetricEval::new(model, literals, None);
        for slot in 0..model.ids.len() {
            off.set_input(slot as u16, 1000.0 + slot as f64, 1.0);
        }
        off
    }

    #[test]
    fn a_nan_or_zero_from_a_fact_or_a_division_by_zero_is_explained() {
        // perf 6.12's tables: the expectations name its metrics.
        tmetric_catalog::use_vintage(tmetric_catalog::base_vintage());
        let model = spr();
        let mut literals = [1.0; Literal::COUNT];
        literals[Literal::HasPmem.index()] = 0.0;
        let mut off = filled(model, literals);
        // has_event(cycles-t) is false until set: the TSX metrics are 0 by that probe.
        let tsx = named(model, "tsx_transactional_cycles");
        assert_eq!(off.evaluate_one(tsx).value, 0.0);
        let why = off.explain(tsx);
        assert!(
            matches!(why, Some(Why::Probe { call: "has_event", arg: "cycles-t", value: 0.0 })),
            "{why:?}"
        );
        // #has_pmem is 0: the PMM metrics are 0 by that literal.
        let pmm = named(model, "tma_info_system_pmm_read_bw");
        assert_eq!(off.evaluate_one(pmm).value, 0.0);
        assert_eq!(off.explain(pmm), Some(Why::Literal(Literal::HasPmem, 0.0)));
        // A division by a counted 0: the divisor is named, not the dividend.
        let latency = named(model, "tma_info_memory_load_miss_real_latency");
        let ids = off.needed(latency).expr.clone().unwrap();
        for &slot in &ids {
            off.set_input(slot, 0.0, 1.0);
        }
        assert!(off.evaluate_one(latency).value.is_nan());
        let why = off.explain(latency);
        let Some(Why::DivisionByZero { inputs: zeros, metrics }) = &why else { panic!("{why:?}") };
        assert!(metrics.is_empty(), "{why:?}");
        let names: Vec<&str> =
            zeros.iter().map(|&s| model.str(model.ids[s as usize].text)).collect();
        assert_eq!(names, ["MEM_LOAD_COMPLETED.L1_MISS_ANY"], "{why:?}");
        // A number, or a 0 the counts give, has no explanation; the inputs are untouched.
        let ipc = named(model, "tma_info_thread_ipc");
        assert!(off.evaluate_one(ipc).value > 0.0);
        assert_eq!(off.explain(ipc), None);
        let zero = ids
            .iter()
            .copied()
            .find(|&s| model.str(model.ids[s as usize].text).contains("PENDING"));
        let zero = zero.expect("L1D_PEND_MISS.PENDING");
        off.set_input(zero, 0.0, 1.0);
        for &slot in &ids {
            if slot != zero {
                off.set_input(slot, 5.0, 1.0);
            }
        }
        assert_eq!(off.evaluate_one(latency).value, 0.0);
        assert_eq!(off.explain(latency), None);
        assert_eq!(off.input(zero), 0.0);
        assert_eq!(off.evaluate_one(latency).value, 0.0);
    }

    #[test]
    fn one_root_evaluates_as_the_evaluator_does() {
        let model = spr();
        let mut off = MetricEval::new(model, [1.0; Literal::COUNT], None);
        for slot in 0..model.ids.len() {
            off.set_input(slot as u16, 1000.0 + slot as f64, 1.0);
        }
        let roots: Vec<usize> = (0..model.metric_count()).step_by(7).collect();
        let all = off.evaluate(&roots);
        for (result, &root) in all.iter().zip(&roots) {
            let one = off.evaluate_one(root);
            assert_eq!(one.metric, result.metric);
            assert!(
                one.value.to_bits() == result.value.to_bits()
                    || (one.value.is_nan() && result.value.is_nan()),
                "{}",
                model.str(model.metric(root).name)
            );
            assert_eq!(
                (one.failure, &one.missing, one.threshold),
                (result.failure, &result.missing, result.threshold)
            );
        }
    }

    #[test]
    fn inputs_are_cleared_between_samples() {
        let model = spr();
        let ipc = named(model, "tma_info_thread_ipc");
        let mut off = MetricEval::new(model, [f64::NAN; Literal::COUNT], None);
        let ids = off.needed(ipc).expr.clone().unwrap();
        let (a, b) = (ids[0], ids[1]);
        let inst = if model.str(model.ids[a as usize].text).contains("INST") { a } else { b };
        let clk = if inst == a { b } else { a };
        off.set_input(inst, 300.0, 1.0);
        off.set_input(clk, 100.0, 1.0);
        assert_eq!(off.evaluate_one(ipc).value, 3.0);
        off.clear_inputs();
        let after = off.evaluate_one(ipc);
        assert!(after.value.is_nan());
        assert_eq!(after.missing.len(), 2);
    }
}
