//! One sample of a run evaluated once, for every reader of it: each root's result over the
//! whole sample and over each aggregation unit the output splits it into (with the uncore
//! boxes' own results under `-A`), the error bars when the run's reads are given, and the
//! typed notes. Printers, recorders and exporters take this and never evaluate themselves.

use tmetric_runtime::Snapshot;

use super::{EvalInput, Evaluators, Note, RootResult};
use crate::plan::Plan;
use crate::session::Refusal;
use crate::uncertainty::Bar;
use crate::view::Partition;

/// One aggregation unit's evaluation (or the whole sample's).
#[derive(Debug, Clone, PartialEq)]
pub struct UnitEval {
    /// The unit's part of the sample's counts; `None` for the whole sample (the counts are
    /// the sample's own).
    pub counts: Option<Snapshot>,
    /// Each root's result, in [`Plan::roots`] order.
    pub results: Vec<RootResult>,
    /// Under `-A`/`--no-merge` ([`Plan::per_box`]): each root's result on the line of its
    /// host's uncore box `k`, at `k - 1` ([`Plan::evaluate_on_box`]); empty otherwise.
    pub box_results: Vec<Vec<RootResult>>,
    /// Each root's error bar over the unit's reads, when reads were given.
    pub bars: Option<Vec<Bar>>,
    /// Per root, with bars: whether its bar was sampled from its inputs' spread rather than
    /// propagated along its gradient (a value held by a clamp).
    pub sampled: Vec<bool>,
    /// Per root, with bars: whether an input was multiplexed (else its bar is counting's own
    /// error only: the overcount and PERF_METRICS' 8-bit rounding).
    pub multiplexed: Vec<bool>,
    /// Per root: why its value cannot be true ([`Plan::impossible`]), if it cannot.
    pub impossible: Vec<Option<String>>,
    /// A thread's own notes (`--per-thread` without `-a`: a thread that never ran has
    /// `<not counted>` rows the totals do not show); empty for other units.
    pub notes: Vec<Note>,
}

impl UnitEval {
    /// The unit's sample: `sample` over the unit's own counts.
    pub fn sample<'a>(&'a self, sample: &EvalInput<'a>) -> EvalInput<'a> {
        match &self.counts {
            Some(counts) => sample.on(counts),
            None => *sample,
        }
    }
}

/// A sample evaluated once (see the module documentation).
#[derive(Debug, Clone, PartialEq)]
pub struct Evaluated {
    /// The whole sample: what `--tree`, the notes and the block of error bars read.
    pub total: UnitEval,
    /// Each unit of the output's split, in its order; empty when the split is
    /// [`Partition::Global`], whose one unit is [`Evaluated::total`].
    pub units: Vec<UnitEval>,
    /// Why rows and metrics of the whole sample print as they do, and the kernel's
    /// refusals, typed (a session adds the groups it refused as [`Note::Group`]).
    pub notes: Vec<Note>,
}

impl Evaluated {
    /// The units the output prints, in the split's order: the split's, or the total alone.
    pub fn printed(&self) -> &[UnitEval] {
        if self.units.is_empty() { std::slice::from_ref(&self.total) } else { &self.units }
    }
}

impl Plan {
    /// Evaluates `sample` once for every reader: the whole sample and each unit of `split`,
    /// with error bars from `reads` (the counters read during the run, cumulative, the last
    /// being the sample's counts) when given, and notes; `failures` is the kernel's refusal
    /// of each spec.
    pub fn evaluate_sample(
        &self,
        evaluators: &mut Evaluators,
        sample: &EvalInput<'_>,
        split: &Partition,
        reads: Option<&[Snapshot]>,
        failures: &[Option<Refusal>],
    ) -> Evaluated {
        self.evaluate_sample_from(evaluators, sample, split, reads, 0, failures)
    }

    /// [`Plan::evaluate_sample`] of an `-I` interval whose bars are judged on the windows of
    /// `reads` from window `from` on, the earlier ones those of the interval before it
    /// ([`Plan::estimate_interval`]: a group with too few turns inside the interval was
    /// fitted over both).
    pub fn evaluate_sample_from(
        &self,
        evaluators: &mut Evaluators,
        sample: &EvalInput<'_>,
        split: &Partition,
        reads: Option<&[Snapshot]>,
        from: usize,
        failures: &[Option<Refusal>],
    ) -> Evaluated {
        let failure = |spec: usize| failures.get(spec).cloned().flatten();
        let global = matches!(split, Partition::Global);
        let total = self.evaluate_unit(evaluators, sample, None, reads, from, global);
        let mut notes = self.notes(&total.results, sample, failure);
        for (r, flag) in total.impossible.iter().enumerate() {
            if let Some(text) = flag {
                let metric = crate::plan::metric_name(self, r);
                notes.push(Note::Metric {
                    metric,
                    why: crate::notes::MetricWhy::Impossible(text.clone()),
                });
            }
        }
        let units = match split {
            Partition::Global => Vec::new(),
            Partition::Cpus(units) => units
                .iter()
                .map(|(_, cpus)| {
                    let counts = sample.counts.on_cpus(cpus);
                    let reads: Option<Vec<Snapshot>> =
                        reads.map(|r| r.iter().map(|s| s.on_cpus(cpus)).collect());
                    self.evaluate_unit(
                        evaluators,
                        sample,
                        Some(counts),
                        reads.as_deref(),
                        from,
                        true,
                    )
                })
                .collect(),
            Partition::Threads { threads, skip_zero } => threads
                .iter()
                .map(|&(_, tid)| {
                    let counts = sample.counts.of_thread(tid);
                    let reads: Option<Vec<Snapshot>> =
                        reads.map(|r| r.iter().map(|s| s.of_thread(tid)).collect());
                    let sample = &sample.skipping_zero(*skip_zero);
                    let mut unit = self.evaluate_unit(
                        evaluators,
                        sample,
                        Some(counts),
                        reads.as_deref(),
                        from,
                        true,
                    );
                    if !skip_zero {
                        unit.notes = self.notes(&unit.results, &unit.sample(sample), failure);
                    }
                    unit
                })
                .collect(),
        };
        Evaluated { total, units, notes }
    }

    /// One unit's evaluation: over `counts` (the whole sample's when `None`), with its
    /// uncore boxes' results when `printed` under `-A`, and bars over `reads`.
    fn evaluate_unit(
        &self,
        evaluators: &mut Evaluators,
        sample: &EvalInput<'_>,
        counts: Option<Snapshot>,
        reads: Option<&[Snapshot]>,
        from: usize,
        printed: bool,
    ) -> UnitEval {
        let mut unit = UnitEval {
            counts,
            results: Vec::new(),
            box_results: Vec::new(),
            bars: None,
            sampled: Vec::new(),
            multiplexed: Vec::new(),
            impossible: Vec::new(),
            notes: Vec::new(),
        };
        let part = unit.sample(sample);
        let results = self.evaluate(evaluators, &part);
        let box_results = if printed && self.per_box {
            (1..self.max_boxes()).map(|k| self.evaluate_on_box(evaluators, &part, k)).collect()
        } else {
            Vec::new()
        };
        let judged =
            reads.map(|reads| self.uncertainties(evaluators, reads, from, &part, &results));
        unit.sampled = judged.as_ref().map_or_else(Vec::new, |j| j.iter().map(|b| b.1).collect());
        unit.multiplexed =
            judged.as_ref().map_or_else(Vec::new, |j| j.iter().map(|b| b.2).collect());
        let mut bars: Option<Vec<Bar>> = judged.map(|j| j.into_iter().map(|b| b.0).collect());
        let impossible = self.impossible(&results);
        // An impossible value's bar reaches at least a possible one.
        for (bar, flag) in bars.iter_mut().flatten().zip(&impossible) {
            if let (Bar::Sigma(s), Some((_, least))) = (bar, flag) {
                *s = s.max(*least);
            }
        }
        if let Some(bars) = bars.as_mut() {
            self.bound_bars(&results, bars);
        }
        unit.impossible = impossible.into_iter().map(|f| f.map(|(text, _)| text)).collect();
        unit.results = results;
        unit.box_results = box_results;
        unit.bars = bars;
        unit
    }
}
