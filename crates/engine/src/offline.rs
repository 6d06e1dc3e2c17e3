//! One model's metrics over input values that a front end looks up: the evaluator every front
//! end shares (`stat` through [`crate::Plan::evaluate`], `eval --counts`, `eval --from-perf`,
//! `report`). The front end says where a value comes from (a counter, a counts-file key, a
//! log row); this type owns the literals, the probes, the needed-input sets and which metrics a
//! set of present inputs can compute.

use std::collections::HashMap;
use std::rc::Rc;

use tmetric_catalog::Model;
use tmetric_catalog::catalog::{Facts, id_calls};
use tmetric_model::Literal;
use tmetric_model::cpuid::cpuid_matches;
use tmetric_model::sem::Fail;

use crate::evaluator::{Evaluator, MetricResult, Select};

/// A root's needed input slots, with and without its threshold's.
#[derive(Debug, Clone, PartialEq)]
pub struct Needed {
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

/// One model's evaluator with its literals, probes and cached needed-input sets.
#[derive(Debug, Clone)]
pub struct Offline {
    /// The model whose metrics this evaluates.
    pub model: &'static Model,
    evaluator: Evaluator,
    /// Slots named by `has_event()`: the only probes that change between samples.
    has_event: Vec<u16>,
    /// Slots given a value since the last [`Offline::clear_inputs`].
    filled: Vec<u16>,
    /// Needed inputs by root and `has_event()` values.
    needed: HashMap<(usize, Vec<u64>), Rc<Needed>>,
    /// Evaluation order (the root and what it references) by root: a long log evaluates the
    /// same roots in every block, and the closure walk allocated for each.
    orders: HashMap<usize, Rc<[u16]>>,
}

impl Offline {
    /// An evaluator for `model` with these literal values (NaN when unknown). With `cpuid`,
    /// `strcmp_cpuid_str()` compares against it; without, it is NaN, as the machine is unknown.
    /// Every input is unknown and every `has_event()` probe false until set.
    pub fn new(
        model: &'static Model,
        literals: [f64; Literal::COUNT],
        cpuid: Option<&str>,
    ) -> Offline {
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
        Offline {
            model,
            evaluator,
            has_event,
            filled: Vec::new(),
            needed: HashMap::new(),
            orders: HashMap::new(),
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

    /// Gives input `slot` a value (NaN: not counted) and `source_count()`.
    pub fn set_input(&mut self, slot: u16, value: f64, source_count: f64) {
        self.evaluator.values[slot as usize] = value;
        self.evaluator.source_counts[slot as usize] = source_count;
        self.filled.push(slot);
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
        }
    }

    /// Root `m`'s needed inputs under the current literals and probes (cached: long logs ask
    /// for the same roots in every block).
    pub fn needed(&mut self, m: usize) -> Rc<Needed> {
        // Without `has_event()` slots the key's vector is empty and never allocates.
        let probes: Vec<u64> =
            self.has_event.iter().map(|&s| self.evaluator.probes[s as usize].to_bits()).collect();
        let key = (m, probes);
        if let Some(known) = self.needed.get(&key) {
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
        let found = Rc::new(Needed { expr, all });
        self.needed.insert(key, Rc::clone(&found));
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

    /// Evaluates `roots` and what they reference over the current inputs.
    pub fn evaluate(&mut self, roots: &[usize]) -> Vec<MetricResult> {
        self.evaluator.evaluate(self.model, roots)
    }

    /// Evaluates one root, as [`Offline::evaluate`] does, from the cached order and needed
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
        MetricResult {
            metric: root,
            value: self.evaluator.metrics[root],
            failure: self.evaluator.failures[root],
            missing,
            threshold,
        }
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
        let mut off = Offline::new(model, [f64::NAN; Literal::COUNT], None);
        let ids = off.needed(ipc).expr.clone().unwrap();
        assert_eq!(ids.len(), 2, "instructions and cycles");
        assert_eq!(off.coverage(ipc, |_| false), Coverage::Absent);
        let first = ids[0];
        assert_eq!(off.coverage(ipc, |s| s == first), Coverage::Partial(vec![ids[1]]));
        assert_eq!(off.coverage(ipc, |_| true), Coverage::Complete);
        // The TMA level-1 metrics read #slots-free formulas on SPR but `#smt_on` elsewhere:
        // a metric reading an unknown literal is never complete.
        let smt = (0..model.metrics.len())
            .find(|&m| model.literals_of(&[m]).contains(&Literal::SmtOn))
            .expect("an SPR metric reads #smt_on");
        if matches!(&off.needed(smt).expr, Ok(ids) if !ids.is_empty()) {
            assert_eq!(off.coverage(smt, |_| true), Coverage::UnknownLiteral);
        }
    }

    #[test]
    fn one_root_evaluates_as_the_evaluator_does() {
        let model = spr();
        let mut off = Offline::new(model, [1.0; Literal::COUNT], None);
        for slot in 0..model.ids.len() {
            off.set_input(slot as u16, 1000.0 + slot as f64, 1.0);
        }
        let roots: Vec<usize> = (0..model.metrics.len()).step_by(7).collect();
        let all = off.evaluate(&roots);
        for (result, &root) in all.iter().zip(&roots) {
            let one = off.evaluate_one(root);
            assert_eq!(one.metric, result.metric);
            assert!(
                one.value.to_bits() == result.value.to_bits()
                    || (one.value.is_nan() && result.value.is_nan()),
                "{}",
                model.str(model.metrics[root].name)
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
        let mut off = Offline::new(model, [f64::NAN; Literal::COUNT], None);
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
