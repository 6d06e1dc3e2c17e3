//! The `#literals` a log implies. A selected metric that reads a literal nobody gave (`#slots`
//! on Arm, `#smt_on`, `#num_cpus`, ...) and that perf printed fixes it: every candidate value
//! (an integer for `#slots` and the counts, 0/1 for the switches) is tried, and one is used only
//! when it alone reproduces every printed occurrence at perf's printed precision. Otherwise a
//! value the vendor documents for the CPU is used, else the literal stays unknown and the
//! metrics that read it say so.

use tmetric_model::Literal;
use tmetric_perfstat::PerfLog;

use super::{LogEvaluator, Root, lookup_pmu_name, printed_by_perf};
use tmetric_engine::compiled::Select;
use tmetric_engine::literals::{Counting, LiteralSource, Literals};

/// Printed occurrences tried per literal: enough to rule out coincidences, bounded for long
/// `-I` logs.
const OCCURRENCES: usize = 32;

/// Values documented by the vendor, per CPU (`cpuid` substring, lower case): Arm's Neoverse N2
/// technical reference gives its PMMIR_EL1.SLOTS as 5 (the `caps/slots` perf reads as
/// `#slots`). The `neoverse-n2-v2` model also covers V2, so only a cpuid tells them apart.
const VENDOR: &[(Literal, &str, f64, &str)] = &[(Literal::Slots, "410fd49", 5.0, "Neoverse N2")];

/// A literal the log printed metrics for, that stays as it was.
#[derive(Debug, Clone, PartialEq)]
pub enum Unsolved {
    /// No candidate value reproduces `metric` as perf printed it on `line`.
    NoValue {
        /// The literal.
        literal: Literal,
        /// The first metric perf printed that reads it.
        metric: &'static str,
        /// Where perf printed it.
        line: usize,
    },
    /// Several values do (the first few of them).
    Several {
        /// The literal.
        literal: Literal,
        /// How many values fit.
        count: usize,
        /// The first values that fit.
        values: Vec<f64>,
        /// The first metric perf printed that reads it.
        metric: &'static str,
        /// Where perf printed it.
        line: usize,
    },
}

/// The values tried for `literal`, or none when it cannot be solved for by trying.
fn candidates(literal: Literal) -> Vec<f64> {
    match literal {
        Literal::Slots => (1..=16).map(f64::from).collect(),
        Literal::SmtOn | Literal::CoreWide | Literal::HasPmem | Literal::TargetCpu => {
            vec![0.0, 1.0]
        }
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
    evaluator: usize,
    root: Root,
    block: usize,
    line: usize,
}

/// Fills the literals the selected metrics (`roots`, per evaluator) need and that were only
/// assumed, from the log or the vendor, in `literals` and every evaluator. Returns the
/// unknown literals perf printed metrics for that no single value explains.
pub fn infer_literals(
    evaluators: &mut [LogEvaluator],
    roots: &[Vec<Root>],
    log: &PerfLog,
    literals: &mut Literals,
    cpuid: Option<&str>,
) -> Vec<Unsolved> {
    let mut unsolved = Vec::new();
    for literal in Literal::ALL {
        // A flag or counts file decides; a default (`#smt_on=1`) is only a guess the log may
        // correct.
        let source = literals.source(literal);
        if !source.is_assumed() {
            continue;
        }
        let needed = evaluators
            .iter()
            .zip(roots)
            .any(|(e, roots)| e.model.literals_of(&metrics(roots)).contains(&literal));
        if !needed {
            continue;
        }
        let found = occurrences(evaluators, roots, log, literals, literal);
        match solve(evaluators, log, literals, literal, &found) {
            Ok(Some((value, source))) => {
                set(evaluators, literals, literal, value, source);
                continue;
            }
            Ok(None) => {}
            Err(why) => unsolved.push(why),
        }
        let vendor = cpuid.and_then(|cpuid| {
            let cpuid = cpuid.to_ascii_lowercase();
            VENDOR.iter().find(|(l, part, _, _)| *l == literal && cpuid.contains(part))
        });
        if let Some(&(_, _, value, cpu)) = vendor
            && source == LiteralSource::Unknown
        {
            set(evaluators, literals, literal, value, LiteralSource::Vendor(cpu));
        }
    }
    unsolved
}

fn set(
    evaluators: &mut [LogEvaluator],
    literals: &mut Literals,
    literal: Literal,
    value: f64,
    source: LiteralSource,
) {
    literals.set(literal, value, source);
    set_all(evaluators, literal, value);
    // `#core_wide` follows `#smt_on` for a system-wide count (perf's `core_wide()`).
    if literal == Literal::SmtOn {
        literals.derive_core_wide();
        set_all(evaluators, Literal::CoreWide, literals.get(Literal::CoreWide));
    }
}

/// Sets `literal` in every evaluator.
fn set_all(evaluators: &mut [LogEvaluator], literal: Literal, value: f64) {
    for evaluator in evaluators {
        evaluator.set_literal(literal, value);
    }
}

/// The printed occurrences of the selected metrics that read `literal` and no other unknown
/// literal, in log order.
fn occurrences(
    evaluators: &[LogEvaluator],
    roots: &[Vec<Root>],
    log: &PerfLog,
    literals: &Literals,
    literal: Literal,
) -> Vec<Occurrence> {
    let mut found = Vec::new();
    for (e, evaluator) in evaluators.iter().enumerate() {
        let model = evaluator.model;
        for &root in &roots[e] {
            let lits = model.literals_of(&[root.metric]);
            let only_this = lits.iter().all(|&l| l == literal || !literals.get(l).is_nan());
            if !lits.contains(&literal) || !only_this {
                continue;
            }
            let name = root.name(model);
            let pmu = lookup_pmu_name(model.str(model.metric(root.metric).pmu));
            for (b, block) in log.blocks.iter().enumerate() {
                let Some(printed) = printed_by_perf(block, &name, pmu) else {
                    continue;
                };
                if printed.value.is_some_and(f64::is_finite) {
                    let line = block.printed_metric(&name, pmu).map_or(0, |(_, m)| m.line);
                    found.push(Occurrence { evaluator: e, root, block: b, line });
                }
                if found.len() >= OCCURRENCES {
                    return found;
                }
            }
        }
    }
    found
}

/// The one candidate that reproduces every occurrence perf printed, with its source;
/// `Ok(None)` when there is nothing to solve or a default the log does not contradict stays,
/// `Err` when an unknown literal stays unknown although perf printed its metrics.
fn solve(
    evaluators: &mut [LogEvaluator],
    log: &PerfLog,
    literals: &Literals,
    literal: Literal,
    found: &[Occurrence],
) -> Result<Option<(f64, LiteralSource)>, Unsolved> {
    let Some(first) = found.first() else { return Ok(None) };
    let before = literals.get(literal);
    let mut fits = Vec::new();
    for value in candidates(literal) {
        set_all(evaluators, literal, value);
        let mut checked = 0;
        let all = found.iter().all(|o| {
            let outcome = evaluators[o.evaluator].evaluate(&log.blocks[o.block], o.root);
            checked += usize::from(outcome.check.is_some());
            outcome.check != Some(false)
        });
        if all && checked > 0 {
            fits.push(value);
        }
    }
    set_all(evaluators, literal, before);
    let evaluator = &evaluators[first.evaluator];
    // The metric's own name: no vendor metric with the runtime parameter reads a literal.
    let metric = evaluator.model.str(evaluator.model.metric(first.root.metric).name);
    let line = first.line;
    match fits.as_slice() {
        [value] => Ok(Some((*value, LiteralSource::Inferred(metric, line)))),
        // A default the log does not contradict stays, without a word.
        _ if !before.is_nan() => Ok(None),
        [] if candidates(literal).is_empty() => Ok(None),
        [] => Err(Unsolved::NoValue { literal, metric, line }),
        several => Err(Unsolved::Several {
            literal,
            count: several.len(),
            values: several.iter().take(6).copied().collect(),
            metric,
            line,
        }),
    }
}

/// The metrics of `roots`.
fn metrics(roots: &[Root]) -> Vec<usize> {
    roots.iter().map(|r| r.metric).collect()
}

/// Whether perf counted `log` system-wide, as its header says (perf's `print_header_std`
/// prints `'system wide'` exactly when `-a` was given or implied, `'CPU(s) LIST'` for `-C`
/// alone, else the command, process or threads); CSV and JSON logs have no header.
pub fn counting_of(log: &PerfLog) -> Counting {
    match log.command() {
        Some("system wide") => Counting::SystemWide("the log's header ('system wide')"),
        Some(command) if command.starts_with("CPU(s) ") => {
            Counting::NotSystemWide("the log's header ('CPU(s) ...': -C without -a)")
        }
        Some(command) if command.starts_with("BPF program(s)") => Counting::Unsaid,
        Some(_) => Counting::NotSystemWide("the log's header (a command, process or threads)"),
        None => Counting::Unsaid,
    }
}
