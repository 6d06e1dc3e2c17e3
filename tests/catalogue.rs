//! The catalogue end to end: every vendor expression parses, every metric resolves or is
//! reported, every model is generated, and the generated code agrees with the interpreter.
//!
//! `TMETRIC_TEST=sapphirerapids,meteorlake` limits the slow differential tests to models
//! whose path contains one of the words.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::OnceLock;

use tmetric_catalog::{MODELS, Model};
use tmetric_engine::{Evaluator, Select};
use tmetric_expr::{Facts, Ident, Literal};
use tmetric_model::catalog::Facts as ModelFacts;
use tmetric_pmu_events::Tree;
use tmetric_pmu_events::oracle::{Oracle, OracleInputs};
use tmetric_pmu_events::resolve::{ResolvedTable, Target, resolve_tree};

fn tree() -> &'static Tree {
    static TREE: OnceLock<Tree> = OnceLock::new();
    TREE.get_or_init(|| {
        // The base vintage (the catalogue's `MODELS`) with tmetric's generic metrics, as regen
        // loads it; only another vintage would be rebuilt in the scratch directory.
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("pmu-events");
        tmetric_pmu_events::load_vintage(&root, None, Path::new("unused"))
            .expect("pmu-events/arch loads")
    })
}

pub(crate) fn resolved() -> &'static [ResolvedTable<'static>] {
    static RESOLVED: OnceLock<Vec<ResolvedTable<'static>>> = OnceLock::new();
    RESOLVED.get_or_init(|| resolve_tree(tree()))
}

pub(crate) fn generated(r: &ResolvedTable<'_>) -> &'static Model {
    MODELS
        .iter()
        .copied()
        .find(|m| m.arch == r.table.arch && m.name == r.table.name)
        .unwrap_or_else(|| panic!("{} is not generated; run `cargo xtask regen`", r.table.path))
}

fn selected(path: &str) -> bool {
    match std::env::var("TMETRIC_TEST") {
        Ok(filter) if !filter.is_empty() => filter.split(',').any(|word| path.contains(word)),
        _ => true,
    }
}

#[test]
fn every_vendor_expression_parses() {
    let (mut exprs, mut thresholds, mut failures) = (0, 0, Vec::new());
    for table in tree().arches.iter().flat_map(|a| &a.tables) {
        for metric in &table.metrics {
            exprs += 1;
            if let Err(err) = tmetric_expr::parse(&metric.expr) {
                failures.push(format!("{} {}: {err}", table.path, metric.name));
            }
            if let Some(threshold) = &metric.threshold {
                thresholds += 1;
                if let Err(err) = tmetric_expr::parse(threshold) {
                    failures.push(format!("{} {} threshold: {err}", table.path, metric.name));
                }
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    // The counts of perf 6.12's tree (counted over pmu-events/arch).
    assert_eq!((exprs, thresholds), (6093, 2291));
}

/// The lines of the checked-in report, without comments.
fn reported() -> BTreeSet<String> {
    let path =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("crates/catalog/src/generated/skipped.txt");
    let text = std::fs::read_to_string(&path).expect("skipped.txt exists");
    text.lines().filter(|l| !l.starts_with('#') && !l.is_empty()).map(str::to_string).collect()
}

#[test]
fn every_metric_resolves_or_is_reported() {
    let mut per_arch: BTreeMap<&str, (usize, usize)> = BTreeMap::new();
    let mut current = BTreeSet::new();
    for r in resolved() {
        let entry = per_arch.entry(r.table.arch.as_str()).or_default();
        entry.0 += r.metrics.iter().filter(|m| m.ok).count();
        entry.1 += r.metrics.iter().filter(|m| !m.ok).count();
        for d in &r.diagnostics {
            current
                .insert(format!("{}\t{}\t{}:{}\t{}", d.table, d.metric, d.file, d.line, d.message));
        }
    }
    let known = reported();
    let new: Vec<&String> = current.difference(&known).collect();
    assert!(
        new.is_empty(),
        "metrics that newly fail to compile (fix, or regen and review):\n{}",
        { new.iter().map(|s| s.as_str()).collect::<Vec<_>>().join("\n") }
    );
    // Every failure is in perf's own test fixtures (events its harness injects, and the
    // deliberate M1/M2/M3 cycles); every vendor metric compiles.
    let resolved_total: usize = per_arch.values().map(|v| v.0).sum();
    assert_eq!(per_arch["x86"], (4617, 0), "x86 compiles completely");
    assert_eq!(per_arch["powerpc"].1, 0);
    assert_eq!(per_arch["s390"].1, 0);
    assert!(resolved_total >= 6084, "resolved {resolved_total}: {per_arch:?}");
}

#[test]
fn every_model_is_generated_from_the_current_tree() {
    for r in resolved() {
        let model = generated(r);
        let compiled: Vec<&str> = r
            .table
            .metrics
            .iter()
            .zip(&r.metrics)
            .filter(|(_, m)| m.ok)
            .map(|(v, _)| v.name.as_str())
            .collect();
        let names: Vec<&str> = model.metrics().map(|m| model.str(m.name)).collect();
        assert_eq!(names, compiled, "metrics of {}", r.table.path);
        assert_eq!(model.events.len(), r.table.events.len(), "events of {}", r.table.path);
        let ids: Vec<&str> = model.ids.iter().map(|i| model.str(i.text)).collect();
        let want: Vec<&str> = r.ids.iter().map(|i| i.text.as_str()).collect();
        assert_eq!(ids, want, "input slots of {}", r.table.path);
        for (event, want) in model.events.iter().zip(&r.table.events) {
            assert_eq!(model.str(event.encoding), want.encoding);
        }
    }
    assert_eq!(MODELS.len(), resolved().len());
}

/// Metric and metric group descriptions, kept deflated in the binary, read back as the JSON's.
#[test]
fn descriptions_decode_to_the_json() {
    let mut checked = 0;
    for r in resolved() {
        let model = generated(r);
        let compiled = r.table.metrics.iter().zip(&r.metrics).filter(|(_, m)| m.ok);
        for (metric, (want, _)) in model.metrics().zip(compiled) {
            assert_eq!(model.str(metric.brief), want.brief.as_deref().unwrap_or(""));
            assert_eq!(model.str(metric.public), want.public.as_deref().unwrap_or(""));
            checked += 1;
        }
        assert_eq!(model.groups.len(), r.table.metric_groups.len(), "{}", r.table.path);
        for (group, (name, description)) in model.groups.iter().zip(&r.table.metric_groups) {
            assert_eq!(model.str(group.name), name);
            assert_eq!(model.str(group.description), description);
        }
    }
    assert!(checked > 5_000, "checked {checked}");
}

/// A small deterministic generator (xorshift64*).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn pick(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    /// A value that exercises perf's edge cases: zeros, negatives, huge, tiny, NaN.
    fn value(&mut self) -> f64 {
        match self.pick(12) {
            0 => 0.0,
            1 => f64::NAN,
            2 => 1e300,
            3 => -3.0,
            4 => 0.5,
            5 => 1.0,
            6 => (self.next() % 7) as f64,
            _ => (self.next() % 1_000_000_000) as f64,
        }
    }
}

/// Random inputs for one model: values, source counts, aggr_nr()s, probes and literals.
type Random = (Vec<f64>, Vec<f64>, Vec<f64>, Vec<f64>, [f64; Literal::COUNT]);

fn inputs(rng: &mut Rng, n_slots: usize) -> Random {
    let values = (0..n_slots).map(|_| rng.value()).collect();
    let counts = (0..n_slots).map(|_| [0.0, 1.0, 2.0, 6.0][rng.pick(4)]).collect();
    // Never the source count's choices, so reading one for the other cannot agree by chance.
    let aggr_nrs = (0..n_slots).map(|_| [3.0, 5.0, 112.0][rng.pick(3)]).collect();
    let probes = (0..n_slots).map(|_| [0.0, 1.0, f64::NAN][rng.pick(3)]).collect();
    let mut literals = [0.0; Literal::COUNT];
    for lit in &mut literals {
        *lit = [0.0, 1.0, 2.0, 4.0, 8.0, 2.1e9, f64::NAN][rng.pick(7)];
    }
    // Keep most vectors free of failing literals so the values themselves get compared.
    if rng.pick(4) != 0 {
        for lit in &mut literals {
            if lit.is_nan() {
                *lit = 1.0;
            }
        }
    }
    (values, counts, aggr_nrs, probes, literals)
}

fn same(a: f64, b: f64) -> bool {
    a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan())
}

#[test]
fn compiled_metrics_equal_the_interpreter() {
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let (mut compared, mut mismatches) = (0usize, Vec::new());
    for r in resolved().iter().filter(|r| selected(&r.table.path)) {
        let model = generated(r);
        let table_index: Vec<usize> = (0..r.metrics.len()).filter(|&m| r.metrics[m].ok).collect();
        for _ in 0..12 {
            let (values, counts, aggr_nrs, probes, literals) = inputs(&mut rng, r.ids.len());
            let mut evaluator = Evaluator::new(model);
            evaluator.values.clone_from(&values);
            evaluator.source_counts.clone_from(&counts);
            evaluator.aggr_nrs.clone_from(&aggr_nrs);
            evaluator.probes.clone_from(&probes);
            evaluator.literals = literals;
            evaluator.run(model, model.eval_order);
            let mut oracle = Oracle::new(
                r,
                OracleInputs {
                    values: &values,
                    source_counts: &counts,
                    aggr_nrs: &aggr_nrs,
                    probes: &probes,
                    literals: &literals,
                },
            );
            for (generated_index, &m) in table_index.iter().enumerate() {
                compared += 1;
                let want = oracle.metric(m).map_err(|e| e.fail());
                let got = match evaluator.failures[generated_index] {
                    Some(fail) => Err(fail),
                    None => Ok(evaluator.metrics[generated_index]),
                };
                let agree = match (&want, &got) {
                    (Ok(a), Ok(b)) => same(*a, *b),
                    (Err(a), Err(b)) => a == b,
                    _ => false,
                };
                if !agree {
                    mismatches.push(format!(
                        "{} {}: interpreter {want:?}, compiled {got:?}",
                        r.table.path, r.table.metrics[m].name
                    ));
                }
                let want_t = oracle.threshold(m).map(|t| t.map_err(|e| e.fail()));
                let got_t = evaluator.threshold(model, generated_index);
                let agree_t = match (&want_t, &got_t) {
                    (None, None) => true,
                    (Some(Ok(a)), Some(Ok(b))) => same(*a, *b),
                    (Some(Err(a)), Some(Err(b))) => a == b,
                    _ => false,
                };
                if !agree_t {
                    mismatches.push(format!(
                        "{} {} threshold: interpreter {want_t:?}, compiled {got_t:?}",
                        r.table.path, r.table.metrics[m].name
                    ));
                }
            }
        }
    }
    assert!(
        mismatches.is_empty(),
        "{} mismatches of {compared}:\n{}",
        mismatches.len(),
        mismatches[..mismatches.len().min(20)].join("\n")
    );
    assert!(compared > 6000, "compared only {compared} metric evaluations");
}

/// The interpreter's needed-events pass with perf's reference expansion.
struct OracleFacts<'a> {
    literals: &'a [f64; Literal::COUNT],
    probes: &'a [f64],
    targets: &'a BTreeMap<String, Target>,
}

impl Facts for OracleFacts<'_> {
    fn literal(&self, literal: Literal) -> Option<f64> {
        Some(self.literals[literal.index()])
    }
    fn has_event(&self, id: &Ident) -> bool {
        matches!(self.targets.get(&id.name), Some(Target::Id(slot)) if self.probes[*slot] != 0.0)
    }
    fn cpuid_match(&self, id: &Ident) -> f64 {
        match self.targets.get(&id.name) {
            Some(Target::Id(slot)) => self.probes[*slot],
            _ => f64::NAN,
        }
    }
}

fn oracle_needed(
    r: &ResolvedTable<'_>,
    m: usize,
    literals: &[f64; Literal::COUNT],
    probes: &[f64],
    threshold: bool,
) -> Option<BTreeSet<usize>> {
    let mut ids = BTreeSet::new();
    let mut seen = BTreeSet::new();
    let root = if threshold {
        r.metrics[m].threshold.as_ref().or(r.metrics[m].expr.as_ref())
    } else {
        r.metrics[m].expr.as_ref()
    };
    let mut queue = vec![(m, root?)];
    let mut first = true;
    while let Some((metric, expr)) = queue.pop() {
        let facts = OracleFacts { literals, probes, targets: &r.metrics[metric].targets };
        let needed = match tmetric_expr::needed(expr, &facts) {
            Ok(needed) => needed,
            Err(_) if first => return None,
            Err(_) => continue,
        };
        first = false;
        for name in needed.ids {
            match r.metrics[metric].targets[name] {
                Target::Id(slot) => {
                    ids.insert(slot);
                }
                Target::Metric(referenced) => {
                    if seen.insert(referenced) {
                        queue.push((
                            referenced,
                            r.metrics[referenced].expr.as_ref().expect("compiled"),
                        ));
                    }
                }
            }
        }
    }
    Some(ids)
}

#[test]
fn needed_events_equal_the_interpreter_pass() {
    let mut rng = Rng(42);
    let mut mismatches = Vec::new();
    let mut compared = 0;
    for r in resolved().iter().filter(|r| selected(&r.table.path)) {
        let model = generated(r);
        let table_index: Vec<usize> = (0..r.metrics.len()).filter(|&m| r.metrics[m].ok).collect();
        for smt in [0.0, 1.0] {
            let (_, _, _, probes, mut literals) = inputs(&mut rng, r.ids.len());
            literals[Literal::SmtOn.index()] = smt;
            let facts = ModelFacts { literals: &literals, probes: &probes };
            for (generated_index, &m) in table_index.iter().enumerate() {
                for threshold in [false, true] {
                    compared += 1;
                    let want = oracle_needed(r, m, &literals, &probes, threshold);
                    let got = model
                        .needed_ids(generated_index, &facts, threshold)
                        .ok()
                        .map(|ids| ids.into_iter().map(usize::from).collect::<BTreeSet<_>>());
                    if want != got {
                        mismatches.push(format!("{} {} (smt {smt}, threshold {threshold}): interpreter {want:?}, compiled {got:?}", r.table.path, r.table.metrics[m].name));
                    }
                }
            }
        }
    }
    assert!(
        mismatches.is_empty(),
        "{} mismatches of {compared}:\n{}",
        mismatches.len(),
        mismatches[..mismatches.len().min(20)].join("\n")
    );
}

#[test]
fn cpuid_strings_select_perfs_models() {
    let pick = |cpuid: &str| tmetric_catalog::model_for_cpuid(cpuid).map(|m| m.path());
    assert_eq!(pick("GenuineIntel-6-8F-8").as_deref(), Some("x86/sapphirerapids"));
    assert_eq!(pick("GenuineIntel-6-55-4").as_deref(), Some("x86/skylakex"));
    assert_eq!(pick("GenuineIntel-6-55-7").as_deref(), Some("x86/cascadelakex"));
    assert_eq!(pick("GenuineIntel-6-AA-4").as_deref(), Some("x86/meteorlake"));
    assert_eq!(pick("AuthenticAMD-25-11-1").as_deref(), Some("x86/amdzen4"));
    assert_eq!(pick("NotAVendor-1-2-3"), None);
}

/// The data regen keeps so the binary never scans expression text: per-metric literal sets,
/// per-metric function-argument slots and per-slot call bits, against the parsed expressions.
#[test]
fn literal_sets_and_call_slots_equal_the_expressions() {
    use tmetric_expr::{ExprKind, IdFunc};
    use tmetric_model::catalog::id_calls;
    let mut checked = 0;
    for r in resolved() {
        let model = generated(r);
        let kept: Vec<usize> = (0..r.metrics.len()).filter(|&m| r.metrics[m].ok).collect();
        let mut model_calls = vec![0u8; r.ids.len()];
        for (generated_index, &m) in kept.iter().enumerate() {
            let rm = &r.metrics[m];
            let mut exprs = vec![rm.expr.as_ref().expect("compiled")];
            if rm.threshold_ok {
                exprs.extend(rm.threshold.as_ref());
            }
            let (mut literals, mut calls) = (BTreeSet::new(), BTreeMap::<usize, u8>::new());
            for expr in exprs {
                expr.walk(&mut |node| match &node.kind {
                    ExprKind::Literal(name) => {
                        literals.insert(Literal::from_name(name).expect("known literal"));
                    }
                    ExprKind::IdCall(func, id) => {
                        let Some(Target::Id(slot)) = rm.targets.get(&id.name) else {
                            panic!("{} {}: argument {} is not a slot", r.table.path, m, id.name)
                        };
                        *calls.entry(*slot).or_default() |= match func {
                            IdFunc::HasEvent => id_calls::HAS_EVENT,
                            IdFunc::StrcmpCpuidStr => id_calls::STRCMP_CPUID_STR,
                            IdFunc::SourceCount => id_calls::SOURCE_COUNT,
                            IdFunc::AggrNr => id_calls::AGGR_NR,
                        };
                    }
                    _ => {}
                });
            }
            let metric = model.metric(generated_index);
            let got: BTreeSet<Literal> = metric.literals().iter().copied().collect();
            assert_eq!(got, literals, "literals of {} {}", r.table.path, r.table.metrics[m].name);
            assert_eq!(metric.literals().len(), got.len(), "each literal once");
            for bit in [id_calls::HAS_EVENT, id_calls::STRCMP_CPUID_STR, id_calls::SOURCE_COUNT] {
                let want: BTreeSet<usize> =
                    calls.iter().filter(|(_, b)| **b & bit != 0).map(|(s, _)| *s).collect();
                let got: BTreeSet<usize> = metric.call_slots(bit).map(usize::from).collect();
                assert_eq!(got, want, "call {bit} of {} {}", r.table.path, r.table.metrics[m].name);
            }
            for (slot, bits) in calls {
                model_calls[slot] |= bits;
            }
            checked += 1;
        }
        let got: Vec<u8> = model.ids.iter().map(|id| id.calls).collect();
        assert_eq!(got, model_calls, "id call bits of {}", r.table.path);
    }
    assert!(checked >= 6084, "checked {checked}");
    // sapphirerapids' metrics name these literals (and `#Link` in descriptions is no literal).
    let spr = tmetric_catalog::model("sapphirerapids").expect("generated");
    let all: Vec<usize> = (0..spr.metric_count()).collect();
    let literals: BTreeSet<Literal> = spr.literals_of(&all).into_iter().collect();
    let want = [
        Literal::SmtOn,
        Literal::SystemTscFreq,
        Literal::HasPmem,
        Literal::NumCpusOnline,
        Literal::NumDies,
        Literal::NumPackages,
    ];
    assert_eq!(literals, want.into_iter().collect::<BTreeSet<_>>());
}

/// Events decode from the shared binary tables to exactly the JSON's fields.
#[test]
fn event_records_decode_to_the_json() {
    let mut checked = 0;
    for r in resolved() {
        let model = generated(r);
        assert_eq!(model.events.len(), r.table.events.len());
        for (i, (event, want)) in model.events.iter().zip(&r.table.events).enumerate() {
            let s = |x| model.str(x);
            assert_eq!(s(event.name), want.name);
            assert_eq!(s(event.pmu), want.pmu);
            assert_eq!(s(event.topic), want.topic);
            assert_eq!(s(event.encoding), want.encoding);
            assert_eq!(s(event.brief), want.brief.as_deref().unwrap_or(""));
            assert_eq!(s(event.public), want.public.as_deref().unwrap_or(""));
            assert_eq!(s(event.compat), want.compat.as_deref().unwrap_or(""));
            let (scale, unit) =
                want.scale_unit.as_ref().map_or((1.0, ""), |u| (u.scale, u.unit.as_str()));
            assert_eq!(s(event.unit), unit);
            assert_eq!(event.scale.to_bits(), scale.to_bits());
            assert_eq!(event.pebs, want.pebs);
            let flags = u8::from(want.per_pkg)
                | u8::from(want.deprecated) << 1
                | u8::from(want.experimental) << 2;
            assert_eq!(event.flags, flags, "{} {}", r.table.path, want.name);
            assert_eq!(model.events.get(i).map(|e| e.encoding), Some(event.encoding));
            checked += 1;
        }
        assert!(model.events.get(model.events.len()).is_none());
    }
    assert!(checked > 40_000, "checked {checked}");
}
