//! A model's metrics, and the common metrics, over a counts file: which metrics to show (`-M`,
//! else those whose inputs are all in the file), their values with the reason for every `nan`
//! or 0, the TMA bottleneck path, and every key that feeds nothing selected, as data for a
//! printer.

use tmetric_catalog::Model;
use tmetric_catalog::catalog::id_calls;
use tmetric_model::Literal;

use super::{Assigned, CountsError, CountsFile, assign};
use tmetric_engine::compiled::{MetricResult, Select};
use tmetric_engine::literals::Literals;
use tmetric_engine::metric_eval::{Coverage, MetricEval, Why};
use tmetric_engine::select::{self, Miss, ModelFrom};

/// How many keys that are inputs of no metric are named one by one.
pub const UNKNOWN_SHOWN: usize = 20;

/// How many keys that feed no selected metric are named before a count.
pub const UNSELECTED_SHOWN: usize = 10;

/// The evaluation of a counts file: one [`Table`] per model searched, the CPU model's first.
#[derive(Debug)]
pub struct CountsEval {
    /// The CPU model's table, then the common metrics' (unless the model is the common table).
    pub tables: Vec<Table>,
    /// What the selection without `-M` left out.
    pub skipped: Skipped,
}

/// One model's share of the work: its slot values, evaluator and selected metrics.
#[derive(Debug)]
pub struct Table {
    /// The model.
    pub model: &'static Model,
    /// Whether this is the common table added beside the CPU model.
    pub common: bool,
    /// How the file's keys fill its slots.
    pub assigned: Assigned,
    metric_eval: MetricEval,
    /// The selected metrics, in order.
    pub roots: Vec<usize>,
}

/// Why metrics were left out of a selection without -M.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Skipped {
    /// Some inputs are in the file, not all.
    pub partial: Vec<String>,
    /// None of the inputs are in the file (or the metric reads none).
    pub absent: usize,
    /// The metric reads a literal that is unknown.
    pub literal: Vec<String>,
}

/// Keys of the file that feed no selected metric: never dropped silently.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Unused {
    /// Keys (as written) that are an input of no metric of any table: the first
    /// [`UNKNOWN_SHOWN`].
    pub unknown: Vec<String>,
    /// How many such keys there are in all.
    pub unknown_count: usize,
    /// `source_count` keys that are an input of no metric.
    pub source_counts: Vec<String>,
    /// `aggr_nr` keys that are an input of no metric.
    pub aggr_nrs: Vec<String>,
    /// Keys that are inputs only of metrics not selected: the first [`UNSELECTED_SHOWN`].
    pub unselected: Vec<String>,
    /// How many such keys there are in all.
    pub unselected_count: usize,
}

/// One selected metric's value.
#[derive(Debug, Clone)]
pub struct Evaluated {
    /// The value, its missing inputs and why it failed.
    pub result: MetricResult,
    /// Why it is `nan` or 0 although it has every input ([`MetricEval::explain`]).
    pub why: Option<Why>,
    /// On the TMA bottleneck path of its table's results.
    pub bottleneck: bool,
}

impl CountsEval {
    /// `model`'s metrics and the common ones over `file`, with `literals`; nothing selected.
    pub fn new(
        model: &'static Model,
        file: &CountsFile,
        literals: &Literals,
    ) -> Result<CountsEval, CountsError> {
        let common = tmetric_catalog::common();
        let mut tables = vec![Table::new(model, false, file, literals)?];
        if !std::ptr::eq(model, common) {
            tables.push(Table::new(common, true, file, literals)?);
        }
        Ok(CountsEval { tables, skipped: Skipped::default() })
    }

    /// The models of the tables, in order.
    pub fn models(&self) -> Vec<&'static Model> {
        self.tables.iter().map(|t| t.model).collect()
    }

    /// Without -M: the metrics whose inputs are all in the file; the rest is counted in
    /// [`CountsEval::skipped`].
    pub fn select_complete(&mut self) {
        for table in &mut self.tables {
            table.select_complete(&mut self.skipped);
        }
    }

    /// The metrics `items` select (perf's `-M`, [`select::select`]); `from` says where the
    /// CPU model came from, for a miss.
    pub fn select(&mut self, items: &[&str], from: ModelFrom) -> Result<(), Miss> {
        let model = self.tables.iter().find(|t| !t.common).map(|t| t.model);
        let picks = select::select(items, model, from)?;
        for table in &mut self.tables {
            table.roots = picks
                .iter()
                .filter(|p| std::ptr::eq(p.model, table.model))
                .map(|p| p.metric)
                .collect();
        }
        Ok(())
    }

    /// The literals the selected metrics read, in [`Literal`] order.
    pub fn literals_used(&self) -> Vec<Literal> {
        let mut used: Vec<Literal> = Vec::new();
        for table in self.tables.iter().filter(|t| !t.roots.is_empty()) {
            for lit in table.model.literals_of(&table.roots) {
                if !used.contains(&lit) {
                    used.push(lit);
                }
            }
        }
        used.sort();
        used
    }

    /// The keys of `file` (the file the tables were built from) that feed no selected metric.
    pub fn unused(&self, file: &CountsFile) -> Unused {
        let used: Vec<Vec<bool>> = self.tables.iter().map(Table::used_slots).collect();
        let mut unused = Unused::default();
        for (index, entry) in file.entries.iter().enumerate() {
            // No allocation per key: a counts file may hold millions.
            let slots = || {
                self.tables
                    .iter()
                    .enumerate()
                    .map(|(t, table)| (t, &table.assigned.entry_slots[index]))
            };
            if slots().all(|(_, s)| s.is_empty()) {
                unused.unknown_count += 1;
                if unused.unknown.len() < UNKNOWN_SHOWN {
                    unused.unknown.push(entry.written.clone());
                }
            } else if !slots().any(|(t, s)| s.iter().any(|&slot| used[t][slot as usize])) {
                unused.unselected_count += 1;
                if unused.unselected.len() < UNSELECTED_SHOWN {
                    unused.unselected.push(entry.written.clone());
                }
            }
        }
        for (index, (key, _)) in file.source_counts.iter().enumerate() {
            if self.tables.iter().all(|t| t.assigned.source_count_slots[index].is_empty()) {
                unused.source_counts.push(key.clone());
            }
        }
        for (index, (key, _)) in file.aggr_nrs.iter().enumerate() {
            if self.tables.iter().all(|t| t.assigned.aggr_nr_slots[index].is_empty()) {
                unused.aggr_nrs.push(key.clone());
            }
        }
        unused
    }

    /// The inputs of the selected metrics whose `source_count()` reads 1 only because one
    /// key of a non-core PMU gives them and the file does not say how many boxes were merged
    /// into it: per table, in order, (model, input slot).
    pub fn assumed_source_counts(&self) -> Vec<(&'static Model, u16)> {
        let mut out = Vec::new();
        for table in self.tables.iter().filter(|t| !t.roots.is_empty()) {
            for slot in table.model.call_slots_of(&table.roots, id_calls::SOURCE_COUNT) {
                if table.assigned.merged_unknown[slot] {
                    out.push((table.model, slot as u16));
                }
            }
        }
        out
    }

    /// The inputs of the selected metrics whose `aggr_nr()` is only assumed: the file's
    /// `aggr_nr` does not give it, so it reads the instance keys summed (1 for one key),
    /// where perf counts every instance once per CPU it was read on: per table, in order,
    /// (model, input slot, the value assumed).
    pub fn assumed_aggr_nrs(&self) -> Vec<(&'static Model, u16, f64)> {
        let mut out = Vec::new();
        for table in self.tables.iter().filter(|t| !t.roots.is_empty()) {
            for slot in table.model.call_slots_of(&table.roots, id_calls::AGGR_NR) {
                if !table.assigned.aggr_nr_given[slot] {
                    out.push((table.model, slot as u16, table.assigned.aggr_nrs[slot]));
                }
            }
        }
        out
    }

    /// The selected metrics' values, per table (in order), each with why it is `nan` or 0
    /// and whether it is on the TMA bottleneck path.
    pub fn evaluate(&mut self) -> Vec<Vec<Evaluated>> {
        self.tables.iter_mut().map(Table::evaluate).collect()
    }
}

impl Table {
    fn new(
        model: &'static Model,
        common: bool,
        file: &CountsFile,
        literals: &Literals,
    ) -> Result<Table, CountsError> {
        let assigned = assign(model, file)?;
        // The cpuid of the machine the counts came from is not known: strcmp_cpuid_str() is NaN.
        let mut metric_eval = MetricEval::new(model, literals.values, None);
        for slot in 0..model.ids.len() {
            metric_eval.set_input(slot as u16, assigned.values[slot], assigned.source_counts[slot]);
            metric_eval.set_aggr_nr(slot as u16, assigned.aggr_nrs[slot]);
        }
        for slot in metric_eval.has_event_slots().to_vec() {
            metric_eval.set_probe(slot, assigned.present[slot as usize]);
        }
        Ok(Table { model, common, assigned, metric_eval, roots: Vec::new() })
    }

    fn select_complete(&mut self, skipped: &mut Skipped) {
        let Table { model, assigned, metric_eval, roots, .. } = self;
        for m in 0..model.metric_count() {
            let name = model.str(model.metric(m).name).to_string();
            match metric_eval.coverage(m, |s| assigned.present[s as usize]) {
                Coverage::Complete => roots.push(m),
                Coverage::UnknownLiteral | Coverage::Fails(_) => skipped.literal.push(name),
                Coverage::Partial(_) => skipped.partial.push(name),
                // A metric that needs no input here (`0 if not #has_pmem`) says nothing about
                // these counts: leave it out with those whose inputs are all absent.
                Coverage::Absent | Coverage::NoInputs => skipped.absent += 1,
            }
        }
    }

    /// Slots the selected metrics read: needed inputs (of expression and threshold) and probes.
    fn used_slots(&self) -> Vec<bool> {
        let mut used = vec![false; self.model.ids.len()];
        let mut metric_eval = self.metric_eval.clone();
        for &m in &self.roots {
            for &slot in metric_eval.needed(m).all.as_deref().unwrap_or_default() {
                used[slot as usize] = true;
            }
        }
        let calls = id_calls::HAS_EVENT
            | id_calls::SOURCE_COUNT
            | id_calls::AGGR_NR
            | id_calls::STRCMP_CPUID_STR;
        for slot in self.model.call_slots_of(&self.roots, calls) {
            used[slot] = true;
        }
        used
    }

    fn evaluate(&mut self) -> Vec<Evaluated> {
        let results = self.metric_eval.evaluate(&self.roots);
        let path = tmetric_engine::view::bottleneck_of(self.model, &results, |r| {
            (r.metric, r.value, r.threshold)
        });
        results
            .into_iter()
            .enumerate()
            .map(|(i, result)| {
                // A nan or 0 that a fact decides says why, as stat's notes do.
                let why = (result.failure.is_none()
                    && result.missing.is_empty()
                    && (result.value.is_nan() || result.value == 0.0))
                    .then(|| self.metric_eval.explain(result.metric))
                    .flatten();
                Evaluated { result, why, bottleneck: path.contains(&i) }
            })
            .collect()
    }
}
