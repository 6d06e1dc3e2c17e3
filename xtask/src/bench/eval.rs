//! (b) Compiled against interpreted evaluation of every metric of one model over random input
//! vectors: the rates, and that both agree.

use std::hint::black_box;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, ensure};
use tmetric_catalog::{IdKind, Model};
use tmetric_engine::Evaluator;
use tmetric_expr::Literal;
use tmetric_pmu_events::oracle::{Oracle, OracleInputs};
use tmetric_pmu_events::resolve::{ResolvedTable, SlotKind};

use super::{AGREEMENT_VECTORS, COMPILED_SWEEPS, EVAL_MODEL, PASSES, VECTORS};

pub(super) struct EvalFigures {
    pub(super) metrics: usize,
    pub(super) compiled_ns: f64,
    pub(super) interpreted_ns: f64,
}

/// SplitMix64: deterministic, so every run evaluates the same inputs, and good enough to
/// scatter values over magnitudes.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in [0, 1).
    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// One input value for a slot: counts are zero (10%, which exercises perf's division rules),
/// small (25%) or spread log-uniformly over 1e3..1e11; retire latencies are cycles; tool
/// events are seconds.
fn random_value(rng: &mut Rng, kind: SlotKind, retire_latency: bool) -> f64 {
    let u = rng.unit();
    match kind {
        SlotKind::Tool(_) => 0.05 + u,
        _ if retire_latency => (1.0 + 300.0 * u).floor(),
        _ if u < 0.10 => 0.0,
        _ if u < 0.35 => (u * 4_000.0).floor(),
        _ => 10f64.powf(3.0 + 8.0 * rng.unit()).floor(),
    }
}

/// Plausible literals of a two-socket sapphirerapids with SMT on.
fn literals() -> [f64; Literal::COUNT] {
    let mut literals = [f64::NAN; Literal::COUNT];
    for literal in Literal::ALL {
        literals[literal.index()] = match literal {
            Literal::NumCpus | Literal::NumCpusOnline => 224.0,
            Literal::NumCores => 112.0,
            Literal::NumDies | Literal::NumPackages => 2.0,
            Literal::SmtOn | Literal::CoreWide | Literal::TargetCpu => 1.0,
            Literal::Slots => 6.0,
            Literal::HasPmem => 0.0,
            Literal::SystemTscFreq => 2.1e9,
        };
    }
    literals
}

/// The compiled model and the resolved table (with `ok` metrics that compile) must describe
/// the same slots and metrics, or the comparison is meaningless.
fn ensure_same_slots(model: &Model, table: &ResolvedTable<'_>, ok: usize) -> Result<()> {
    ensure!(
        ok == model.metric_count() && table.ids.len() == model.ids.len(),
        "the catalogue is stale ({} metrics and {} slots compiled, {} and {} in pmu-events): run `cargo xtask regen`",
        model.metric_count(),
        model.ids.len(),
        ok,
        table.ids.len()
    );
    for (slot, id) in table.ids.iter().enumerate() {
        ensure!(
            model.str(model.ids[slot].text) == id.text,
            "the catalogue is stale (slot {slot} is `{}`, pmu-events says `{}`): run `cargo xtask regen`",
            model.str(model.ids[slot].text),
            id.text
        );
    }
    Ok(())
}

pub(super) fn bench_eval(resolved: &[ResolvedTable<'_>]) -> Result<EvalFigures> {
    // pmu-events/arch holds perf 6.12's tables, the base vintage: the newest, which the
    // catalogue uses by default, has more metrics for the same model.
    let model: &Model = tmetric_catalog::model_in(tmetric_catalog::base_vintage(), EVAL_MODEL)
        .with_context(|| format!("{EVAL_MODEL} is not in the catalogue's base vintage"))?;
    let table = resolved
        .iter()
        .find(|r| r.table.path == EVAL_MODEL)
        .with_context(|| format!("{EVAL_MODEL} is not in pmu-events/arch"))?;
    let ok: Vec<usize> = (0..table.metrics.len()).filter(|&m| table.metrics[m].ok).collect();
    ensure_same_slots(model, table, ok.len())?;

    let mut rng = Rng(0x746d_6574_7269_6321);
    let literals = literals();
    let source_counts = vec![1.0; model.ids.len()];
    // Probes are machine facts, fixed for a run: about half the `has_event` answers are yes.
    let probes: Vec<f64> = model
        .ids
        .iter()
        .map(|id| if matches!(id.kind, IdKind::Probe) && rng.unit() < 0.5 { 1.0 } else { 0.0 })
        .collect();
    let mut vectors: Vec<Vec<f64>> = (0..VECTORS)
        .map(|_| {
            table.ids.iter().map(|id| random_value(&mut rng, id.kind, id.retire_latency)).collect()
        })
        .collect();

    let mut evaluator = Evaluator::new(model);
    evaluator.literals = literals;
    evaluator.probes.clone_from(&probes);
    evaluator.source_counts.clone_from(&source_counts);
    // Agreement first: both sides must compute the same numbers.
    let mut mismatches = 0usize;
    let mut finite = 0usize;
    let mut first_mismatch = None;
    for values in vectors.iter_mut().take(AGREEMENT_VECTORS) {
        std::mem::swap(&mut evaluator.values, values);
        evaluator.run(model, model.eval_order);
        std::mem::swap(&mut evaluator.values, values);
        let inputs = OracleInputs {
            values,
            source_counts: &source_counts,
            aggr_nrs: &source_counts,
            probes: &probes,
            literals: &literals,
        };
        let mut oracle = Oracle::new(table, inputs);
        for (i, &m) in ok.iter().enumerate() {
            let interpreted = oracle.metric(m).unwrap_or(f64::NAN);
            let compiled = evaluator.metrics[i];
            finite += usize::from(compiled.is_finite());
            if !same(compiled, interpreted) {
                mismatches += 1;
                first_mismatch.get_or_insert_with(|| {
                    format!(
                        "{}: compiled {compiled}, interpreted {interpreted}",
                        table.table.metrics[m].name
                    )
                });
            }
        }
    }
    match &first_mismatch {
        // Mostly finite results show the inputs exercise the arithmetic, not just NaN paths.
        None => println!(
            "  agreement: {} metrics x {AGREEMENT_VECTORS} vectors, compiled and interpreted equal \
             ({:.0}% finite)",
            ok.len(),
            100.0 * finite as f64 / (ok.len() * AGREEMENT_VECTORS) as f64
        ),
        Some(first) => println!("  agreement: {mismatches} MISMATCHES, first {first}"),
    }
    ensure!(
        mismatches == 0,
        "compiled and interpreted results differ; the timings would compare different work"
    );

    let per_metric = |elapsed: Duration, vectors: usize| {
        elapsed.as_secs_f64() * 1e9 / (vectors * ok.len()) as f64
    };
    let mut compiled_ns = f64::INFINITY;
    for _ in 0..PASSES {
        let start = Instant::now();
        for _ in 0..COMPILED_SWEEPS {
            for values in &mut vectors {
                // Swapping the vector in costs nothing, where copying it would add to the time.
                std::mem::swap(&mut evaluator.values, values);
                evaluator.run(model, black_box(model.eval_order));
                std::mem::swap(&mut evaluator.values, values);
                black_box(&evaluator.metrics);
            }
        }
        compiled_ns = compiled_ns.min(per_metric(start.elapsed(), COMPILED_SWEEPS * VECTORS));
    }
    println!("  compiled (Evaluator::run over eval_order): {compiled_ns:.1} ns/metric");

    let mut interpreted_ns = f64::INFINITY;
    for _ in 0..PASSES {
        let start = Instant::now();
        for values in &vectors {
            // A fresh oracle per vector: perf re-evaluates every metric each interval, and the
            // cache only shares references within one.
            let inputs = OracleInputs {
                values,
                source_counts: &source_counts,
                aggr_nrs: &source_counts,
                probes: &probes,
                literals: &literals,
            };
            let mut oracle = Oracle::new(table, inputs);
            for &m in &ok {
                black_box(oracle.metric(black_box(m)).unwrap_or(f64::NAN));
            }
        }
        interpreted_ns = interpreted_ns.min(per_metric(start.elapsed(), VECTORS));
    }
    println!("  interpreted (vendor::oracle::Oracle): {interpreted_ns:.1} ns/metric");
    println!("  speed-up: {:.1}x", interpreted_ns / compiled_ns);
    Ok(EvalFigures { metrics: ok.len(), compiled_ns, interpreted_ns })
}

/// Equal values, NaN equal to NaN, with room for the last bit of a reassociated sum.
fn same(a: f64, b: f64) -> bool {
    (a.is_nan() && b.is_nan()) || a == b || (a - b).abs() <= 1e-12 * a.abs().max(b.abs())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rng_is_uniform_enough() {
        let mut rng = Rng(1);
        let values: Vec<f64> = (0..10_000).map(|_| rng.unit()).collect();
        assert!(values.iter().all(|v| (0.0..1.0).contains(v)));
        let mean = values.iter().sum::<f64>() / values.len() as f64;
        assert!((mean - 0.5).abs() < 0.02, "mean {mean}");
    }

    #[test]
    fn same_treats_nan_as_equal_and_tolerates_rounding() {
        assert!(same(f64::NAN, f64::NAN));
        assert!(same(1.0, 1.0 + 1e-15));
        assert!(!same(1.0, 1.0001));
        assert!(!same(f64::NAN, 0.0));
    }
}
