//! `eval --from-perf`: the `#literals` a log implies. A selected metric that reads a literal
//! the flags leave unknown (`#slots` on Arm, `#smt_on`, `#num_cpus`, ...) and that perf printed
//! fixes it: every candidate value (an integer for `#slots` and the counts, 0/1 for the
//! switches) is tried, and one is used only when it alone reproduces every printed occurrence
//! at perf's printed precision. Otherwise a value the vendor documents for the CPU is used,
//! else the literal stays unknown and the metric says which flag sets it, as before.

use tmetric_model::Literal;
use tmetric_perfstat::PerfLog;

use super::{Engine, lookup_pmu_name, printed_by_perf};
use crate::eval::{Literals, Source};
use tmetric_engine::Select;

/// Printed occurrences tried per literal: enough to rule out coincidences, bounded for long
/// `-I` logs.
const OCCURRENCES: usize = 32;

/// Values documented by the vendor, per CPU (`cpuid` substring, lower case): Arm's Neoverse N2
/// technical reference gives its PMMIR_EL1.SLOTS as 5 (the `caps/slots` perf reads as
/// `#slots`). The `neoverse-n2-v2` model also covers V2, so only a cpuid tells them apart.
const VENDOR: &[(Literal, &str, f64, &str)] = &[(Literal::Slots, "410fd49", 5.0, "Neoverse N2")];

/// The values tried for `literal`, or none when it cannot be solved for by trying.
fn candidates(literal: Literal) -> Vec<f64> {
    match literal {
        Literal::Slots => (1..=16).map(f64::from).collect(),
        Literal::SmtOn | Literal::CoreWide | Literal::HasPmem => vec![0.0, 1.0],
        Literal::NumCpus
        | Literal::NumCpusOnline
        | Literal::NumCores
        | Literal::NumPackages
        | Literal::NumDies => (1..=1024).map(f64::from).collect(),
        // A frequency is not a small set of values.
        Literal::SystemTscFreq => Vec::new(),
    }
}

/// One metric perf printed in one block.
struct Occurrence {
    engine: usize,
    root: usize,
    block: usize,
    line: usize,
}

/// Fills the literals the selected metrics need and the flags did not give, from the log or
/// the vendor; says on stderr when a literal stays unknown though perf printed a metric.
pub fn infer(
    engines: &mut [Engine],
    roots: &[Vec<usize>],
    log: &PerfLog,
    literals: &mut Literals,
    cpuid: Option<&str>,
) -> anyhow::Result<()> {
    for literal in Literal::ALL {
        // A flag or counts file decides; a default (`#smt_on=1`) is only a guess the log may
        // correct.
        let source = literals.sources[literal.index()];
        if !matches!(source, Source::Unknown | Source::Default | Source::Derived(_)) {
            continue;
        }
        let needed = engines
            .iter()
            .zip(roots)
            .any(|(e, roots)| e.model.literals_of(roots).contains(&literal));
        if !needed {
            continue;
        }
        let found = occurrences(engines, roots, log, literals, literal);
        if let Some((value, source)) = solve(engines, log, literals, literal, &found) {
            set(engines, literals, literal, value, source);
            continue;
        }
        let vendor = cpuid.and_then(|cpuid| {
            let cpuid = cpuid.to_ascii_lowercase();
            VENDOR.iter().find(|(l, part, _, _)| *l == literal && cpuid.contains(part))
        });
        if let Some(&(_, _, value, cpu)) = vendor
            && source == Source::Unknown
        {
            set(engines, literals, literal, value, Source::Vendor(cpu));
        }
    }
    Ok(())
}

fn set(
    engines: &mut [Engine],
    literals: &mut Literals,
    literal: Literal,
    value: f64,
    source: Source,
) {
    literals.values[literal.index()] = value;
    literals.sources[literal.index()] = source;
    set_all(engines, literal, value);
    // As `Literals::resolve` derives it: without SMT every count is core-wide.
    let core_wide = Literal::CoreWide.index();
    if literal == Literal::SmtOn && value == 0.0 && literals.sources[core_wide] == Source::Default {
        literals.values[core_wide] = 1.0;
        literals.sources[core_wide] = Source::Derived(Literal::SmtOn);
        set_all(engines, Literal::CoreWide, 1.0);
    }
}

/// Sets `literal` in every evaluator (which drops its cache of needed inputs: `#smt_on` picks
/// a branch).
fn set_all(engines: &mut [Engine], literal: Literal, value: f64) {
    for engine in engines {
        engine.offline.set_literal(literal, value);
    }
}

/// The printed occurrences of the selected metrics that read `literal` and no other unknown
/// literal, in log order.
fn occurrences(
    engines: &[Engine],
    roots: &[Vec<usize>],
    log: &PerfLog,
    literals: &Literals,
    literal: Literal,
) -> Vec<Occurrence> {
    let mut found = Vec::new();
    for (e, engine) in engines.iter().enumerate() {
        let model = engine.model;
        for &root in &roots[e] {
            let lits = model.literals_of(&[root]);
            let only_this = lits.iter().all(|&l| l == literal || !literals.get(l).is_nan());
            if !lits.contains(&literal) || !only_this {
                continue;
            }
            let metric = &model.metrics[root];
            let pmu = lookup_pmu_name(model.str(metric.pmu));
            for (b, block) in log.blocks.iter().enumerate() {
                let Some(printed) = printed_by_perf(block, model.str(metric.name), pmu) else {
                    continue;
                };
                if printed.value.is_some_and(f64::is_finite) {
                    let line = block
                        .printed_metric(model.str(metric.name), pmu)
                        .map_or(0, |(_, m)| m.line);
                    found.push(Occurrence { engine: e, root, block: b, line });
                }
                if found.len() >= OCCURRENCES {
                    return found;
                }
            }
        }
    }
    found
}

/// The one candidate that reproduces every occurrence perf printed, with its source; `None`
/// (and a note on stderr) when none or several do.
fn solve(
    engines: &mut [Engine],
    log: &PerfLog,
    literals: &Literals,
    literal: Literal,
    found: &[Occurrence],
) -> Option<(f64, Source)> {
    let first = found.first()?;
    let before = literals.get(literal);
    let mut fits = Vec::new();
    for value in candidates(literal) {
        set_all(engines, literal, value);
        let mut checked = 0;
        let all = found.iter().all(|o| {
            let outcome = engines[o.engine].evaluate(&log.blocks[o.block], o.root, literals);
            checked += usize::from(outcome.check.is_some());
            outcome.check != Some(false)
        });
        if all && checked > 0 {
            fits.push(value);
        }
    }
    set_all(engines, literal, before);
    let engine = &engines[first.engine];
    let name = engine.model.str(engine.model.metrics[first.root].name);
    let unknown = before.is_nan();
    match fits.as_slice() {
        [value] => Some((*value, Source::Inferred(name, first.line))),
        // A default the log does not contradict stays, without a word.
        _ if !unknown => None,
        [] => {
            if !candidates(literal).is_empty() {
                crate::out::warn(&format!(
                    "#{} could not be inferred: no value reproduces {name} as perf printed it on line {}",
                    literal.name(),
                    first.line
                ));
            }
            None
        }
        several => {
            let shown: Vec<String> = several.iter().take(6).map(|v| v.to_string()).collect();
            let more = if several.len() > 6 { ", ..." } else { "" };
            crate::out::warn(&format!(
                "#{} could not be inferred: {} values reproduce {name} as perf printed it on line {} ({}{more})",
                literal.name(),
                several.len(),
                first.line,
                shown.join(", ")
            ));
            None
        }
    }
}
