//! `tmetric eval --from-perf`: reads a `perf stat` log (streaming long ones) and hands it to
//! the engine block by block (`tmetric_offline::perflog::run`: the model chosen, the metrics
//! selected, literals solved, each block's metrics and perf's built-ins checked against what
//! perf printed), printing each block as it is evaluated (`tmetric_print::eval::log`) and
//! what was left out and why on standard error.

use std::io::{BufRead, BufReader, Write};
use std::path::Path;

use anyhow::Context;
use tmetric_offline::perflog::run::{LogRun, choose_model};
use tmetric_perfstat::{Block, PerfLog, Reader};
use tmetric_print::eval::log::{Header, LogPrinter, log_where, notes};

use super::{EvalArgs, items, refuse_modifiers, resolve_literals, warn};
use tmetric_engine::models::find_model;
use tmetric_print::out;

/// The model, the default selection and the layout of the output are chosen from the intervals
/// read before this many bytes of the log (at least one); a longer log is then read and
/// evaluated block by block, so memory does not grow with it (docs/from-perf.md).
pub const PREFIX_BYTES: u64 = 4 << 20;

/// Runs `tmetric eval --from-perf PATH`.
pub fn run(args: &EvalArgs, path: &Path, out: &mut dyn Write) -> anyhow::Result<()> {
    if path.as_os_str() == "-" {
        tmetric_print::out::stdin_hint(
            "a perf stat log",
            "a file (`--from-perf perf.log`) or a pipe (`perf stat -a sleep 1 2>&1 | tmetric eval --from-perf -`)",
        );
        let stdin = std::io::stdin();
        return run_log(args, "<stdin>", stdin.lock(), out);
    }
    let file = std::fs::File::open(path)
        .with_context(|| format!("cannot read perf stat log `{}`", path.display()))?;
    run_log(args, &path.display().to_string(), BufReader::with_capacity(1 << 16, file), out)
}

/// Evaluates the log read from `input`, called `name` in messages.
pub fn run_log<R: BufRead>(
    args: &EvalArgs,
    name: &str,
    input: R,
    out: &mut dyn Write,
) -> anyhow::Result<()> {
    run_log_with(args, name, input, out, PREFIX_BYTES)
}

/// [`run_log`] with the prefix ending after `budget` bytes.
pub fn run_log_with<R: BufRead>(
    args: &EvalArgs,
    name: &str,
    input: R,
    out: &mut dyn Write,
    budget: u64,
) -> anyhow::Result<()> {
    // Each log infers its own vintage (unless --perf-version chose one), from perf 6.12's: a
    // log is perf's output, and the newest vintage live runs use is not the perf that wrote it.
    tmetric_catalog::clear_inferred_vintage();
    if !tmetric_catalog::vintage_is_chosen() {
        tmetric_catalog::use_vintage(tmetric_catalog::base_vintage());
    }
    let (mut log, mut rest) = Reader::new(input, name)?.prefix(budget)?;
    let mut warnings = notes::ImportWarnings::default();
    warnings.add(std::mem::take(&mut log.warnings));
    if rest.is_none() {
        warnings.dropped = log.warnings_dropped;
        say(warnings.note(name));
        say(notes::skipped_lines(&log.skipped, name));
    }
    let mut literals = resolve_literals(args, None, &[])?;
    literals.set_counting(tmetric_offline::perflog::literals::counting_of(&log));
    let cpuid = args.cpuid.as_deref();
    // A cpuid no model matches is said before a --model that names none.
    let given = match &args.metric.model {
        Some(model) if cpuid.is_none_or(|c| tmetric_catalog::model_for_cpuid(c).is_some()) => {
            Some(find_model(model)?)
        }
        _ => None,
    };
    let choice = choose_model(given, cpuid, &log, &literals, name)?;
    if let Some(warning) = notes::model_conflict(&choice) {
        warn(&warning);
    }
    if let Some(warning) = notes::software_only(&choice.how, name) {
        out::warn(&warning);
    }
    let items = items(args);
    let (_, models_items) = tmetric_offline::perflog::builtins::select(&items);
    let hint = "the log decides what was counted (perf prints `EVENT:u` rows for such events)";
    refuse_modifiers(&models_items, choice.model, choice.how.model_from(), hint)?;
    let mut run = LogRun::new(&log, &choice, literals, cpuid, &items, name)?;
    for warning in notes::unsolved(&run.unsolved) {
        out::warn(&warning);
    }
    let format = args.out.layout();
    let mut printer = LogPrinter::new(
        out,
        format,
        args.out.colour(crate::args::eval_results_to_terminal()),
        &log,
        &run.literals,
    );
    printer.header(&Header {
        choice: &choice,
        common: run.evaluators.len() > 1 || choice.model.is_none(),
        log: name,
        log_data: &log,
        streamed: rest.is_some(),
        used: &run.used,
    })?;
    let prefix_blocks = log.blocks.len();
    let blocks = std::mem::take(&mut log.blocks);
    print_blocks(&mut run, &mut printer, blocks, &log, &mut rest, &mut warnings)?;
    for unplaced in run.unplaced() {
        let evaluator = &run.evaluators[unplaced.evaluator];
        let why = if unplaced.not_counted {
            "its input rows are <not counted> in every block"
        } else {
            "no block of the log has any of its inputs"
        };
        let (model, common) = (evaluator.model, evaluator.common);
        printer.metric(model, common, None, &unplaced.outcome, why, false)?;
    }
    printer.finish()?;
    let counters = tmetric_offline::perflog::LogCounters::of(&log);
    for (model, slot, assumed) in run.assumed_aggr_nrs() {
        warn(&notes::aggr_nr_assumed(model, slot, assumed, counters));
    }
    if let Some(reader) = &rest {
        warnings.dropped = reader.warnings_dropped();
        say(warnings.note(name));
        say(notes::skipped_lines(reader.skipped(), name));
        say(Some(notes::streamed(name, run.blocks, prefix_blocks, budget)));
    }
    let where_ = log_where(choice.model);
    let said = [
        notes::summary(&run.summary(), name, &where_),
        notes::by_encoding(&run.by_encoding),
        notes::checks(&run.checks, name).into_iter().collect(),
        notes::selection(&run.selection, &where_, name),
    ];
    said.into_iter().flatten().for_each(|note| say(Some(note)));
    Ok(())
}

/// Evaluates and prints the log's blocks: `blocks` (the prefix), then those `rest` reads,
/// with a comment line at each new run.
fn print_blocks<R: BufRead>(
    run: &mut LogRun,
    printer: &mut LogPrinter,
    blocks: Vec<Block>,
    log: &PerfLog,
    rest: &mut Option<Reader<R>>,
    warnings: &mut notes::ImportWarnings,
) -> anyhow::Result<()> {
    let mut prefix = blocks.into_iter();
    let mut last_run = None;
    loop {
        let block = match (prefix.next(), &mut *rest) {
            (Some(block), _) => block,
            (None, Some(reader)) => {
                let next = reader.next_block()?;
                warnings.add(reader.take_warnings());
                match next {
                    Some(block) => block,
                    None => break,
                }
            }
            (None, None) => break,
        };
        if last_run != Some(block.run) {
            last_run = Some(block.run);
            let (count, info) = match &mut *rest {
                Some(reader) => {
                    // Earlier runs are printed: forget them, so that a log of many runs keeps
                    // bounded memory.
                    reader.forget_runs_before(block.run);
                    (reader.run_count(), reader.run(block.run))
                }
                None => (log.runs.len(), log.runs.get(block.run)),
            };
            printer.run_header(count, info, block.run)?;
        }
        let (lines, builtins) = run.block(&block);
        for line in &lines {
            let evaluator = &run.evaluators[line.evaluator];
            let (model, common) = (evaluator.model, evaluator.common);
            printer.metric(model, common, Some(&block), &line.outcome, "", line.bottleneck)?;
        }
        for builtin in &builtins {
            printer.builtin(&block, builtin)?;
        }
        run.retire(block);
    }
    Ok(())
}

/// Says `note` on standard error, if there is one.
fn say(note: Option<String>) {
    if let Some(note) = note {
        eprintln!("tmetric: {note}");
    }
}
