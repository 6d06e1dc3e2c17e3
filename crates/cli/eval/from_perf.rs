//! `tmetric eval --from-perf`: a model's metrics over the counts of a `perf stat` log, per
//! block (run × `-I` interval × aggregation id), each input explained and each value checked
//! against what perf printed.
//!
//! The log is read by `tmetric_perfstat`; the literal flags, metric selection and the perf-like
//! metric layout are those of `eval --counts` (the parent module). What this file adds:
//! choosing the model from the log, filling the engine's `Offline` evaluator per block and root metric from the
//! rows of the group perf printed that metric in, and saying where every value came from.
//!
//! Rules that are choices rather than perf's code (docs/from-perf.md):
//! * `<not counted>` reads as 0 and `<not supported>` as NaN, as in perf; both are named.
//! * A retire latency (`X:R`) without a row reads as 0 when perf printed the metric in that
//!   block (perf 6.12 without `--record-tpebs` uses 0, and the printed value proves perf ran it),
//!   and is missing (NaN) otherwise.
//! * A count printed in a unit perf scaled it to (`MiB`, `Bytes`) is divided by the event's
//!   ScaleUnit factor; without a known factor the input is unusable (NaN) and named.

use std::cell::RefCell;
use std::collections::{BTreeSet, HashMap, HashSet};
use std::io::{BufRead, BufReader, Write};
use std::path::Path;

use anyhow::{Context, anyhow, bail};
use serde::Serialize;
use tmetric_catalog::catalog::IdKind;
use tmetric_catalog::{MODELS, Model};
use tmetric_engine::{MetricResult, Needed, Offline, Select};
use tmetric_model::Literal;
use tmetric_perfstat::{
    Block, EventKey, Layout, Lookup, PerfLog, PrintedMetric, Reader, Row, Run, TimeSource, Warning,
};

use super::{
    EvalArgs, LiteralJson, Literals, explain_failure, first_names, metric_head, select_items, warn,
};
use crate::models::{examples, find_model, join_code};
use crate::output::{is_core_pmu, json_line, json_number, perf_number};

pub mod builtin;
pub mod infer_literal;

/// How many distinct printed metrics model inference evaluates per candidate model.
const INFER_PRINTED: usize = 24;

/// The model, the default selection and the layout of the output are chosen from the intervals
/// read before this many bytes of the log (at least one); a longer log is then read and
/// evaluated block by block, so memory does not grow with it (docs/from-perf.md).
pub const PREFIX_BYTES: u64 = 4 << 20;

/// Runs `tmetric eval --from-perf PATH`.
pub fn run(args: &EvalArgs, path: &Path, out: &mut dyn Write) -> anyhow::Result<()> {
    if path.as_os_str() == "-" {
        let stdin = std::io::stdin();
        return run_log(args, "<stdin>", stdin.lock(), out);
    }
    let file = std::fs::File::open(path)
        .with_context(|| format!("cannot read perf stat log `{}`", path.display()))?;
    run_log(args, &path.display().to_string(), BufReader::with_capacity(1 << 16, file), out)
}

/// The log's first blocks, and the reader of the rest when the log is longer than
/// [`PREFIX_BYTES`] (`None`: `log` is the whole log).
struct Prefix<R> {
    log: PerfLog,
    rest: Option<Reader<R>>,
}

fn read_prefix<R: BufRead>(name: &str, input: R, budget: u64) -> anyhow::Result<Prefix<R>> {
    let mut reader = Reader::new(input, name)?;
    let mut blocks = Vec::new();
    // Whole intervals: every block of the last one read is in the prefix.
    while blocks.is_empty() || reader.bytes_read() < budget || reader.finished_blocks() > 0 {
        match reader.next_block()? {
            Some(block) => blocks.push(block),
            None => break,
        }
    }
    if reader.is_done() {
        return Ok(Prefix { log: reader.into_log(blocks)?, rest: None });
    }
    let log = PerfLog {
        layout: reader.layout().clone(),
        runs: reader.runs().to_vec(),
        blocks,
        warnings: reader.take_warnings(),
    };
    Ok(Prefix { log, rest: Some(reader) })
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
    let name = name.to_string();
    let Prefix { mut log, mut rest } = read_prefix(&name, input, budget)?;
    let streamed = rest.is_some();
    let mut warnings = Warnings::default();
    warnings.add(std::mem::take(&mut log.warnings));
    if !streamed {
        warnings.note(&name);
    }
    let literals = Literals::resolve(args, None, &[])?;
    let cpuid = args.cpuid.as_deref();
    let choice = choose_model(args, &log, &literals, &name)?;

    let common = tmetric_catalog::common();
    let mut engines: Vec<Engine> = Vec::new();
    if let Some(model) = choice.model {
        engines.push(Engine::new(model, false, &literals, cpuid));
    }
    if !engines.iter().any(|e| std::ptr::eq(e.model, common)) {
        engines.push(Engine::new(common, choice.model.is_some(), &literals, cpuid));
    }
    let where_ = match choice.model {
        Some(model) if !std::ptr::eq(model, common) => {
            format!("{} or the common metrics", model.path())
        }
        _ => "the common metrics".to_string(),
    };

    let all_items: Vec<&str> =
        args.metrics.iter().map(|s| s.trim()).filter(|s| !s.is_empty()).collect();
    // perf's built-in metrics (`insn per cycle`, ...) are not in any model: `builtin.rs`.
    let (builtins, items) = builtin::select(&all_items);
    let printed = printed_metrics(&log);
    let mut report = Selection::default();
    let roots: Vec<Vec<usize>> = if all_items.is_empty() {
        default_selection(&mut engines, &log, &printed, &mut report)
    } else if items.is_empty() {
        vec![Vec::new(); engines.len()]
    } else {
        let models: Vec<&'static Model> = engines.iter().map(|e| e.model).collect();
        select_items(
            &models,
            &items,
            &where_,
            "the log decides what was counted (perf prints `EVENT:u` rows for such events)",
        )?
    };

    // Literals the flags leave unknown, solved from perf's printed values: `infer_literal.rs`.
    let json_printed =
        printed.iter().any(|p| engines.iter().any(|e| !e.model.metrics_named(&p.name).is_empty()));
    let builtins = builtins.for_log(&log, json_printed);
    let mut literals = literals;
    infer_literal::infer(&mut engines, &roots, &log, &mut literals, args.cpuid.as_deref())?;
    let mut used: Vec<Literal> = Vec::new();
    for (engine, roots) in engines.iter().zip(&roots) {
        if !roots.is_empty() {
            for lit in engine.model.literals_of(roots) {
                if !used.contains(&lit) {
                    used.push(lit);
                }
            }
        }
    }
    used.sort();

    let format = match (&args.separator, args.json) {
        (Some(sep), _) if sep.is_empty() => bail!("-x needs a separator, e.g. `-x ,`"),
        (Some(sep), _) => Format::Csv { sep: sep.clone() },
        (None, true) => Format::Json,
        (None, false) => Format::Text { colour: args.color.enabled() },
    };
    let mut printer = Printer::new(out, format, &log);
    let models_text = match choice.model {
        Some(model) if !std::ptr::eq(model, common) => format!("{} + common", model.path()),
        _ => "common".to_string(),
    };
    printer.header(&Header {
        models: &models_text,
        model: choice.model.map_or_else(|| common.path(), Model::path),
        how: &choice.how,
        common: engines.len() > 1 || choice.model.is_none(),
        log: &name,
        log_data: &log,
        streamed,
        literals: &literals,
        used: &used,
    })?;

    let mut shown: Vec<Vec<bool>> = roots.iter().map(|r| vec![false; r.len()]).collect();
    let mut not_counted: Vec<Vec<usize>> = roots.iter().map(|r| vec![0; r.len()]).collect();
    let mut checks = Checks::default();
    let mut last_run = None;
    let mut builtins_shown = 0;
    // The first block serves the metrics no block has inputs for; the others are dropped once
    // printed.
    let mut first: Option<Block> = None;
    let prefix_blocks = log.blocks.len();
    let mut prefix = std::mem::take(&mut log.blocks).into_iter();
    let mut count = 0;
    loop {
        let block = match (prefix.next(), &mut rest) {
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
        count += 1;
        if last_run != Some(block.run) {
            last_run = Some(block.run);
            let runs = rest.as_ref().map_or(log.runs.as_slice(), |r| r.runs());
            printer.run_header(runs, block.run)?;
        }
        for (e, engine) in engines.iter_mut().enumerate() {
            for (r, &root) in roots[e].iter().enumerate() {
                let outcome = engine.evaluate(&block, root, &literals);
                if !outcome.any_present {
                    not_counted[e][r] += usize::from(outcome.all_not_counted);
                    continue;
                }
                shown[e][r] = true;
                checks.count(&outcome);
                printer.metric(engine, Some(&block), &outcome, "")?;
            }
        }
        builtins_shown += builtins.print_block(&mut printer, &block, &mut checks)?;
        first.get_or_insert(block);
    }
    // Metrics none of whose inputs any block has: one line each, with everything missing.
    let mut unplaced = 0;
    if let Some(first) = &first {
        for (e, engine) in engines.iter_mut().enumerate() {
            for (r, &root) in roots[e].iter().enumerate() {
                if !shown[e][r] {
                    unplaced += 1;
                    let outcome = engine.evaluate(first, root, &literals);
                    let why = if not_counted[e][r] > 0 {
                        "its input rows are <not counted> in every block"
                    } else {
                        "no block of the log has any of its inputs"
                    };
                    printer.metric(engine, None, &outcome, why)?;
                }
            }
        }
    }
    printer.finish()?;
    if streamed {
        warnings.note(&name);
        eprintln!(
            "tmetric: {name} was read block by block ({count} blocks): the model and the metrics shown were chosen from its first {prefix_blocks} block(s), in its first {budget} bytes",
        );
    }

    let skipped: Vec<String> = engines
        .iter()
        .zip(&roots)
        .zip(&not_counted)
        .flat_map(|((engine, roots), counts)| {
            roots.iter().zip(counts).filter(|(_, n)| **n > 0).map(|(&m, n)| {
                format!("{} ({n} blocks)", engine.model.str(engine.model.metrics[m].name))
            })
        })
        .collect();
    if !skipped.is_empty() {
        eprintln!(
            "tmetric: skipped blocks where every input row of a metric is <not counted> (perf prints no metric there): {}",
            first_names(&skipped)
        );
    }
    if unplaced > 0 {
        eprintln!(
            "tmetric: {unplaced} selected metric(s) have none of their inputs in {name}; they are listed last with what is missing"
        );
    }
    if roots.iter().all(Vec::is_empty) && builtins_shown == 0 {
        eprintln!("tmetric: no metric of {where_} has all its inputs in {name}");
    }
    checks.report(&name);
    report.print(&where_, &name);
    Ok(())
}

/// The importer's warnings: the first few and how many, so that a long log's do not pile up.
#[derive(Default)]
struct Warnings {
    first: Vec<Warning>,
    count: usize,
}

impl Warnings {
    const SHOWN: usize = 3;

    fn add(&mut self, warnings: Vec<Warning>) {
        self.count += warnings.len();
        self.first.extend(warnings);
        // In line order (a note on a mix of layouts comes at the end of the input).
        self.first.sort_by_key(|w| w.line);
        self.first.truncate(Self::SHOWN);
    }

    /// Lines the importer skipped (a shell prompt, mail text): named, never dropped silently.
    fn note(&self, name: &str) {
        if self.count == 0 {
            return;
        }
        let first: Vec<String> = self.first.iter().map(ToString::to_string).collect();
        let more = self.count.saturating_sub(Self::SHOWN);
        let more = if more > 0 { format!("; and {more} more") } else { String::new() };
        eprintln!(
            "tmetric: note: {name}: {} warning(s) while reading it ({}{more})",
            self.count,
            first.join("; ")
        );
    }
}

/// The model the log is evaluated with, and how it was chosen.
struct ModelChoice {
    /// `None`: the log only has generic events; only the common metrics apply.
    model: Option<&'static Model>,
    /// For the header: `given with --model`, `inferred: ...`.
    how: String,
}

fn choose_model(
    args: &EvalArgs,
    log: &PerfLog,
    literals: &Literals,
    name: &str,
) -> anyhow::Result<ModelChoice> {
    let by_cpuid = match &args.cpuid {
        Some(cpuid) => Some(tmetric_catalog::model_for_cpuid(cpuid).ok_or_else(|| {
            anyhow!(
                "no model of the catalogue matches cpuid `{cpuid}` (perf's mapfile.csv rules); pass --model MODEL (one of {}, ...)",
                examples()
            )
        })?),
        None => None,
    };
    if let Some(flag) = &args.model {
        let model = find_model(flag)?;
        if let Some(other) = by_cpuid.filter(|m| !std::ptr::eq(*m, model)) {
            warn(&format!(
                "using --model {} although cpuid `{}` is {}",
                model.path(),
                args.cpuid.as_deref().unwrap_or_default(),
                other.path()
            ));
        }
        return Ok(ModelChoice { model: Some(model), how: "given with --model".into() });
    }
    if let (Some(model), Some(cpuid)) = (by_cpuid, &args.cpuid) {
        return Ok(ModelChoice { model: Some(model), how: format!("for cpuid {cpuid}") });
    }
    infer_model(log, literals, name)
}

/// How well a model explains a log; compared field by field, best first.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord)]
pub struct Score {
    /// Printed metrics this model recomputes to perf's printed value.
    pub agree: usize,
    /// Counter rows that are inputs of the printed metrics this model knows.
    pub explained: usize,
    /// Printed metrics whose inputs are all in the log.
    pub complete: usize,
    /// Printed metric names this model has.
    pub known_metrics: usize,
    /// The log's event names this model's JSON lists.
    pub known_events: usize,
}

/// Scores every model against the log; the best one is used when it beats the next.
fn infer_model(log: &PerfLog, literals: &Literals, name: &str) -> anyhow::Result<ModelChoice> {
    let printed = printed_metrics(log);
    let events: BTreeSet<String> = log
        .event_keys()
        .into_iter()
        .filter(|k| !k.is_tool())
        .map(|k| k.name.split(',').next().unwrap_or("").to_string())
        .filter(|name| !is_generic_event(name))
        .collect();
    // The rows of the blocks whose printed metrics are recomputed.
    let blocks: BTreeSet<usize> = printed.iter().take(INFER_PRINTED).map(|p| p.block).collect();
    let rows: usize = blocks.iter().map(|&b| log.blocks[b].rows.len()).sum();
    // perf names the core PMUs `cpu_core` and `cpu_atom` only on hybrid machines.
    let hybrid_log = log.core_pmus().iter().any(|p| p == "cpu_core" || p == "cpu_atom");
    let mut scored: Vec<(Score, &'static Model)> = MODELS
        .iter()
        .copied()
        .filter(|m| !m.is_sys && m.arch != "test" && m.arch != "common")
        .filter(|m| !hybrid_log || is_hybrid_model(m))
        .map(|model| (score_model(model, log, &printed, &events, literals), model))
        .collect();
    // Best first; equal scores in catalogue order.
    scored.sort_by_key(|s| std::cmp::Reverse(s.0));
    let Some(&(best, model)) = scored.first() else {
        bail!("the catalogue has no CPU models");
    };
    if best == Score::default() {
        let common = tmetric_catalog::common();
        let unknown: Vec<String> =
            events.iter().filter(|e| !common_knows(common, e)).cloned().collect();
        if unknown.is_empty() {
            return Ok(ModelChoice {
                model: None,
                how: "no CPU model: the log has only generic events (pass --model or --cpuid for a model's metrics)".into(),
            });
        }
        if unknown.iter().all(|e| is_software_or_tracepoint(e)) {
            // Software events and tracepoints exist on every CPU and no model's JSON lists
            // them: the common metrics are all that applies. Say which rows nothing reads.
            let ignored = ignored_rows(log, &unknown);
            crate::out::warn(&format!(
                "{name} has only software events and tracepoints, so no CPU model applies; using the common metrics and ignoring {} row(s) no common metric reads: {}",
                ignored.iter().map(|(_, lines)| lines.len()).sum::<usize>(),
                ignored
                    .iter()
                    .map(|(event, lines)| format!(
                        "`{event}` ({} {})",
                        if lines.len() == 1 { "line" } else { "lines" },
                        join_lines_short(lines)
                    ))
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
            return Ok(ModelChoice {
                model: None,
                how: "no CPU model: the log has only software events and tracepoints (pass --model or --cpuid for a model's metrics)".into(),
            });
        }
        let shown: Vec<String> = unknown.iter().take(6).cloned().collect();
        bail!(
            "cannot tell which CPU model {name} comes from: no model of the catalogue knows its events ({}); pass --model MODEL (models with metrics include {}) or --cpuid CPUID",
            join_code(&shown),
            examples()
        );
    }
    let tied: Vec<String> =
        scored.iter().take_while(|(s, _)| *s == best).map(|(_, m)| m.path()).collect();
    if tied.len() > 1 {
        let count = tied.len();
        let listed: Vec<String> = tied.into_iter().take(8).collect();
        let more = if count > listed.len() {
            format!(" and {} more", count - listed.len())
        } else {
            String::new()
        };
        bail!(
            "cannot tell which CPU model {name} comes from: {}{more} explain it equally well ({}); pass --model MODEL or --cpuid CPUID",
            join_code(&listed),
            best.describe(rows, events.len())
        );
    }
    let next = scored.get(1).map(|(s, m)| format!("; next best {} ({})", m.path(), s.brief()));
    Ok(ModelChoice {
        model: Some(model),
        how: format!("inferred: {}{}", best.describe(rows, events.len()), next.unwrap_or_default()),
    })
}

impl Score {
    fn describe(&self, rows: usize, events: usize) -> String {
        let mut parts = Vec::new();
        if self.known_metrics > 0 {
            parts.push(format!(
                "{} of {} printed metrics recomputed to perf's value",
                self.agree, self.known_metrics
            ));
            parts.push(format!("{} of {rows} rows are their inputs", self.explained));
        }
        parts.push(format!("{} of {events} event names known", self.known_events));
        parts.join(", ")
    }

    fn brief(&self) -> String {
        format!("{} agree, {} rows, {} events", self.agree, self.explained, self.known_events)
    }
}

fn score_model(
    model: &'static Model,
    log: &PerfLog,
    printed: &[PrintedAt],
    events: &BTreeSet<String>,
    literals: &Literals,
) -> Score {
    let mut score = Score::default();
    let names: HashSet<String> =
        model.events.iter().map(|e| model.str(e.name).to_ascii_lowercase()).collect();
    score.known_events = events.iter().filter(|e| names.contains(e.as_str())).count();
    let mut engine: Option<Engine> = None;
    let mut explained: HashSet<(usize, usize)> = HashSet::new();
    for p in printed.iter().take(INFER_PRINTED) {
        let Some(root) = metric_for(model, &p.name, p.pmu.as_deref()) else { continue };
        score.known_metrics += 1;
        let engine = engine.get_or_insert_with(|| Engine::new(model, false, literals, None));
        let block = &log.blocks[p.block];
        let outcome = engine.evaluate(block, root, literals);
        if outcome.complete() {
            score.complete += 1;
        }
        if outcome.check == Some(true) {
            score.agree += 1;
        }
        for input in &outcome.inputs {
            for &line in input.source.row_lines() {
                explained.insert((p.block, line));
            }
        }
    }
    score.explained = explained.len();
    score
}

/// The metric of `model` named `name` for a row on core PMU `pmu`: the one on that PMU on
/// hybrid models, else the first.
fn metric_for(model: &Model, name: &str, pmu: Option<&str>) -> Option<usize> {
    let all = model.metrics_named(name);
    all.iter()
        .copied()
        .find(|&m| pmu.is_some_and(|p| model.str(model.metrics[m].pmu).eq_ignore_ascii_case(p)))
        .or_else(|| {
            all.iter().copied().find(|&m| {
                let mp = model.str(model.metrics[m].pmu);
                pmu.is_none() || lookup_pmu_name(mp).is_none()
            })
        })
}

/// Whether a model describes a hybrid CPU (events on `cpu_core` or `cpu_atom`).
fn is_hybrid_model(model: &Model) -> bool {
    model.events.iter().any(|e| matches!(model.str(e.pmu), "cpu_core" | "cpu_atom"))
}

/// perf's software and generic hardware events, and the names of `msr/`: no model's JSON
/// lists them, so they say nothing about the CPU.
fn is_generic_event(name: &str) -> bool {
    const GENERIC: [&str; 27] = [
        "task-clock",
        "cpu-clock",
        "context-switches",
        "cs",
        "cpu-migrations",
        "migrations",
        "page-faults",
        "faults",
        "minor-faults",
        "major-faults",
        "alignment-faults",
        "emulation-faults",
        "dummy",
        "bpf-output",
        "cycles",
        "cpu-cycles",
        "instructions",
        "branches",
        "branch-instructions",
        "branch-misses",
        "cache-references",
        "cache-misses",
        "bus-cycles",
        "ref-cycles",
        "stalled-cycles-frontend",
        "stalled-cycles-backend",
        "tsc",
    ];
    GENERIC.contains(&name)
        // The kernel's topdown events (`slots`, `topdown-retiring`, seed 000's
        // `topdown-total-slots`): sysfs aliases, not the vendor's event names.
        || name == "topdown.slots"
        || name.starts_with("topdown-")
        || name.starts_with("l1-")
        || name.starts_with("llc-")
        || name.starts_with("dtlb-")
        || name.starts_with("itlb-")
        || name.starts_with("branch-")
        || name.starts_with("node-")
}

/// perf's software PMU events missing from [`is_generic_event`] and tracepoints
/// (`subsystem:name`), as perf prints them, lower case.
fn is_software_or_tracepoint(name: &str) -> bool {
    const SOFTWARE: [&str; 4] = ["cgroup-switches", "cpu-migrations", "dummy", "bpf-output"];
    is_generic_event(name)
        || SOFTWARE.contains(&name)
        || name.split_once(':').is_some_and(|(subsystem, event)| {
            let word =
                |w: &str| !w.is_empty() && w.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
            word(subsystem) && word(event)
        })
}

/// The rows of `events` (names as in [`infer_model`]): each event with its lines, log order.
fn ignored_rows(log: &PerfLog, events: &[String]) -> Vec<(String, Vec<usize>)> {
    let mut out: Vec<(String, Vec<usize>)> = Vec::new();
    for row in log.blocks.iter().flat_map(|b| &b.rows) {
        let name = row.key.name.split(',').next().unwrap_or("");
        if !events.iter().any(|e| e == name) {
            continue;
        }
        match out.iter_mut().find(|(e, _)| e == &row.event) {
            Some((_, lines)) => lines.push(row.line),
            None => out.push((row.event.clone(), vec![row.line])),
        }
    }
    out
}

/// `4, 9, 14 and 37 more`: the first few lines of a long list.
fn join_lines_short(lines: &[usize]) -> String {
    const SHOWN: usize = 3;
    let head: Vec<String> = lines.iter().take(SHOWN).map(usize::to_string).collect();
    match lines.len().checked_sub(SHOWN) {
        Some(more) if more > 0 => format!("{} and {more} more", head.join(", ")),
        _ => head.join(", "),
    }
}

fn common_knows(common: &Model, event: &str) -> bool {
    common.ids.iter().any(|id| common.str(id.event).eq_ignore_ascii_case(event))
}

/// A metric perf printed: its first block, name and the core PMU of its row.
#[derive(Debug, Clone)]
struct PrintedAt {
    block: usize,
    name: String,
    pmu: Option<String>,
}

/// Every distinct (name, core PMU) perf printed, in log order, shadow labels included.
fn printed_metrics(log: &PerfLog) -> Vec<PrintedAt> {
    let mut seen: HashSet<(String, Option<String>)> = HashSet::new();
    let mut out = Vec::new();
    for (b, block) in log.blocks.iter().enumerate() {
        let from_rows = block.rows.iter().flat_map(|row| {
            let pmu = row.key.pmu.clone().filter(|p| is_core_pmu(p));
            // perf's built-in labels (`Retiring` on `topdown-retiring`) are no JSON metric's name.
            row.metrics
                .iter()
                .filter(move |m| !builtin::is_builtin_label(row, m))
                .map(move |m| (m.name.clone(), pmu.clone()))
        });
        let loose = loose_metrics(block).into_iter().map(|(m, pmu)| (m.name.clone(), pmu));
        for (name, pmu) in from_rows.chain(loose) {
            if seen.insert((name.to_ascii_lowercase(), pmu.clone())) {
                out.push(PrintedAt { block: b, name, pmu });
            }
        }
    }
    out
}

/// perf's Default metric-group lines with the core PMU of their header. Continuation lines
/// carry no header: they are under the last one.
fn loose_metrics(block: &Block) -> Vec<(&PrintedMetric, Option<String>)> {
    let mut current: Option<String> = None;
    block
        .loose_metrics
        .iter()
        .map(|m| {
            if m.header.is_some() {
                current = header_pmu(m.header.as_deref());
            }
            (m, current.clone())
        })
        .collect()
}

/// `cpu_core` from a Default metric-group header such as `TopdownL1 (cpu_core)`.
pub fn header_pmu(header: Option<&str>) -> Option<String> {
    let inner = header?.rsplit_once('(')?.1.strip_suffix(')')?.trim();
    is_core_pmu(inner).then(|| inner.to_string())
}

/// The core PMU to restrict lookups to for a metric of PMU `pmu`: `cpu_core`/`cpu_atom` on
/// hybrid models, none for `default_core` (which stands for whatever core PMU the row names).
pub fn lookup_pmu_name(pmu: &str) -> Option<&str> {
    (is_core_pmu(pmu) && !pmu.is_empty() && pmu != "default_core").then_some(pmu)
}

/// Why metrics were left out of the default selection.
#[derive(Debug, Default)]
struct Selection {
    /// Computable (all inputs present) but not printed by perf: shown only with -M.
    also: Vec<String>,
    /// Some inputs present: name and missing ids.
    partial: Vec<(String, Vec<String>)>,
    /// Reads an unknown literal.
    literal: Vec<String>,
}

impl Selection {
    fn print(&self, where_: &str, log: &str) {
        if !self.also.is_empty() {
            eprintln!(
                "tmetric: also computable from {log} but not printed by perf: {} metrics of {where_} ({}); select them with -M",
                self.also.len(),
                first_names(&self.also)
            );
        }
        if !self.partial.is_empty() {
            const SHOWN: usize = 4;
            let mut partial: Vec<&(String, Vec<String>)> = self.partial.iter().collect();
            partial.sort_by_key(|(_, missing)| missing.len());
            let mut parts: Vec<String> = partial
                .iter()
                .take(SHOWN)
                .map(|(name, missing)| {
                    let more = missing.len().saturating_sub(3);
                    let mut list = missing.iter().take(3).cloned().collect::<Vec<_>>().join(", ");
                    if more > 0 {
                        list.push_str(&format!(" and {more} more"));
                    }
                    format!("{name} (missing {list})")
                })
                .collect();
            if self.partial.len() > SHOWN {
                parts.push(format!("and {} more", self.partial.len() - SHOWN));
            }
            eprintln!(
                "tmetric: not shown: {} metrics of {where_} with only some inputs in {log}, fewest missing first: {}; name them with -M to see each block",
                self.partial.len(),
                parts.join(", ")
            );
        }
        if !self.literal.is_empty() {
            eprintln!(
                "tmetric: not shown: {} metrics of {where_} that read unknown literals ({}); name them with -M to see which",
                self.literal.len(),
                first_names(&self.literal)
            );
        }
    }
}

/// Without -M: the metrics perf printed, if it printed any this catalogue knows; else every
/// metric whose inputs are all in the log. The rest is summarised in `report`.
fn default_selection(
    engines: &mut [Engine],
    log: &PerfLog,
    printed: &[PrintedAt],
    report: &mut Selection,
) -> Vec<Vec<usize>> {
    // In the order perf printed them.
    let mut roots: Vec<Vec<usize>> = engines
        .iter()
        .map(|engine| {
            let model = engine.model;
            let mut roots: Vec<usize> = Vec::new();
            for p in printed {
                for m in model.metrics_named(&p.name) {
                    let pmu = lookup_pmu_name(model.str(model.metrics[m].pmu));
                    let on_pmu = match (pmu, p.pmu.as_deref()) {
                        (Some(want), Some(row)) => want.eq_ignore_ascii_case(row),
                        _ => true,
                    };
                    if on_pmu && !roots.contains(&m) {
                        roots.push(m);
                    }
                }
            }
            roots
        })
        .collect();
    let presence = Presence::new(log);
    for (engine, roots) in engines.iter_mut().zip(&mut roots) {
        let model = engine.model;
        // The common table's metrics are shown whenever their inputs are there; perf prints
        // them under other names (`CPUs utilized`).
        let printed_mode = !roots.is_empty() && !engine.common;
        engine.set_log_probes(&presence);
        for m in 0..model.metrics.len() {
            let name = model.str(model.metrics[m].name).to_string();
            let pmu = lookup_pmu_name(model.str(model.metrics[m].pmu));
            let needed = match engine.offline.needed(m).expr.clone() {
                Ok(ids) => ids,
                Err(_) => {
                    if !printed_mode {
                        report.literal.push(name);
                    }
                    continue;
                }
            };
            // A metric that needs no input (`0 if not #has_pmem`) says nothing about the log.
            if needed.is_empty() {
                continue;
            }
            let missing: Vec<String> = needed
                .iter()
                .filter(|&&slot| !presence.has(model, slot, pmu))
                .map(|&slot| model.str(model.ids[slot as usize].text).to_string())
                .collect();
            if missing.len() == needed.len() || roots.contains(&m) {
                continue;
            }
            let literals_known = engine.offline.literals_known(m);
            match (missing.is_empty(), literals_known, printed_mode) {
                (true, true, false) => roots.push(m),
                (true, true, true) => report.also.push(name),
                (true, false, _) => report.literal.push(name),
                (false, _, _) => report.partial.push((name, missing)),
            }
        }
    }
    roots
}

/// Which input slots have a row somewhere in the log, checked on one block of each distinct
/// set of rows (an `-I -A` log repeats the same rows in every block).
struct Presence<'a> {
    blocks: Vec<&'a Block>,
    cache: RefCell<HashMap<PresenceKey, bool>>,
}

/// A model (by address), an input slot and the core PMU lookups are restricted to.
type PresenceKey = (usize, u16, Option<String>);

impl<'a> Presence<'a> {
    fn new(log: &'a PerfLog) -> Presence<'a> {
        let mut seen = HashSet::new();
        let blocks = log
            .blocks
            .iter()
            .filter(|b| seen.insert(b.rows.iter().map(|r| r.key.clone()).collect::<Vec<_>>()))
            .collect();
        Presence { blocks, cache: RefCell::new(HashMap::new()) }
    }

    /// Whether some block has a value for `slot` of `model`: a counted or `<not counted>` row,
    /// or a time.
    fn has(&self, model: &'static Model, slot: u16, pmu: Option<&str>) -> bool {
        let key = (std::ptr::from_ref(model) as usize, slot, pmu.map(str::to_string));
        if let Some(&known) = self.cache.borrow().get(&key) {
            return known;
        }
        let want = EventKey::from_expr_id(model.str(model.ids[slot as usize].text));
        let has = self.blocks.iter().any(|b| {
            matches!(
                lookup_clock(b, model, &want, None, pmu),
                Lookup::Found(_) | Lookup::NotCounted { .. }
            )
        });
        self.cache.borrow_mut().insert(key, has);
        has
    }
}

/// Where one input slot's value came from in one block.
#[derive(Debug, Clone, PartialEq)]
enum Source {
    /// A counted row (or uncore instances summed), or a time (`time`: not from a row).
    Row {
        value: f64,
        lines: Vec<usize>,
        group: Option<usize>,
        in_metric_group: bool,
        running_pct: Option<f64>,
        time: bool,
    },
    /// `<not counted>`: 0, as perf.
    NotCounted { line: usize, group: usize },
    /// `<not supported>`: NaN, as perf.
    NotSupported { line: usize, group: usize },
    /// Rows on several core PMUs and the metric names none.
    Ambiguous { lines: Vec<usize> },
    /// Printed in a unit whose scale factor is unknown.
    Unscaled { unit: String, lines: Vec<usize> },
    /// A retire latency without a row, for a metric perf printed here: 0, as perf 6.12
    /// without `--record-tpebs`.
    LatencyZero,
    /// No row.
    Missing,
}

impl Source {
    fn value(&self) -> f64 {
        match self {
            Source::Row { value, .. } => *value,
            Source::NotCounted { .. } | Source::LatencyZero => 0.0,
            _ => f64::NAN,
        }
    }

    /// Counter rows used (times excluded).
    fn row_lines(&self) -> &[usize] {
        match self {
            Source::Row { time: false, lines, .. } => lines,
            Source::NotCounted { line, .. } | Source::NotSupported { line, .. } => {
                std::slice::from_ref(line)
            }
            Source::Ambiguous { lines } | Source::Unscaled { lines, .. } => lines,
            _ => &[],
        }
    }

    fn group(&self) -> Option<usize> {
        match self {
            Source::Row { group, .. } => *group,
            Source::NotCounted { group, .. } | Source::NotSupported { group, .. } => Some(*group),
            _ => None,
        }
    }
}

/// One needed input of a root metric in one block.
#[derive(Debug, Clone)]
struct Input {
    slot: u16,
    source: Source,
    /// Needed by the expression (not only by the threshold).
    expr: bool,
}

/// What perf printed for a metric in a block.
#[derive(Debug, Clone)]
struct PerfPrinted {
    /// As printed, e.g. `0.6`.
    text: String,
    /// NaN for `nan`; `None` when perf left it blank.
    value: Option<f64>,
    /// A shadow label (`CPUs utilized`, `K/sec`) when perf printed its own metric.
    label: Option<String>,
    /// perf's value × `factor` is in the metric's scaled unit.
    factor: f64,
}

/// One root metric in one block.
#[derive(Debug, Clone)]
struct Outcome {
    result: MetricResult,
    error: Option<String>,
    inputs: Vec<Input>,
    printed: Option<PerfPrinted>,
    /// Whether tmetric's value agrees with perf's at perf's precision.
    check: Option<bool>,
    /// Some expression input has a row in this block other than `<not counted>`: perf
    /// prints no metric on rows that were not counted, and neither does tmetric.
    any_present: bool,
    /// Every expression input with a row in this block is `<not counted>`.
    all_not_counted: bool,
}

impl Outcome {
    fn complete(&self) -> bool {
        self.error.is_none() && self.result.missing.is_empty()
    }

    fn scaled(&self, model: &Model) -> Option<f64> {
        self.error.is_none().then(|| self.result.scaled(model))
    }
}

/// A model's evaluator, refilled for every block and root metric.
pub struct Engine {
    model: &'static Model,
    /// Tag the model's lines `[common]`.
    common: bool,
    /// The engine's evaluator: literals, probes, needed inputs (cached per `has_event()`
    /// values, the only facts that change between blocks).
    offline: Offline,
    /// Each slot's event key, parsed once: parsing it for every block made long `-I` logs slow.
    keys: Vec<Option<EventKey>>,
}

impl Engine {
    fn new(
        model: &'static Model,
        common: bool,
        literals: &Literals,
        cpuid: Option<&str>,
    ) -> Engine {
        // Without a cpuid, the log does not say which CPU it came from: strcmp_cpuid_str() is NaN.
        let offline = Offline::new(model, literals.values, cpuid);
        let keys = vec![None; model.ids.len()];
        Engine { model, common, offline, keys }
    }

    /// `has_event()` over the whole log, for the default selection.
    fn set_log_probes(&mut self, presence: &Presence) {
        for slot in self.offline.has_event_slots().to_vec() {
            self.offline.set_probe(slot, presence.has(self.model, slot, None));
        }
    }

    /// Evaluates `root` over `block`'s rows, preferring the group perf printed it in.
    fn evaluate(&mut self, block: &Block, root: usize, literals: &Literals) -> Outcome {
        let model = self.model;
        let metric = &model.metrics[root];
        let name = model.str(metric.name);
        let pmu = lookup_pmu_name(model.str(metric.pmu));
        self.offline.clear_inputs();
        for slot in self.offline.has_event_slots().to_vec() {
            let key = self.keys[slot as usize].get_or_insert_with(|| {
                EventKey::from_expr_id(model.str(model.ids[slot as usize].text))
            });
            let value = block.lookup_key(key, None, pmu).perf_value();
            self.offline.set_probe(slot, value.is_some_and(|v| !v.is_nan()));
        }
        let printed = printed_by_perf(block, name, pmu);

        let needed = self.offline.needed(root);
        let (expr_ids, all_ids): (&[u16], &[u16]) = match &*needed {
            Needed { expr: Ok(expr), all: Ok(all) } => (expr, all),
            Needed { expr: Ok(expr), all: Err(_) } => (expr, expr),
            &Needed { expr: Err(fail), .. } => {
                let result = MetricResult {
                    metric: root,
                    value: f64::NAN,
                    failure: Some(fail),
                    missing: Vec::new(),
                    threshold: None,
                };
                return Outcome {
                    error: Some(explain_failure(model, fail, root, literals)),
                    result,
                    inputs: Vec::new(),
                    any_present: printed.is_some(),
                    all_not_counted: false,
                    check: None,
                    printed,
                };
            }
        };

        let mut inputs = Vec::with_capacity(all_ids.len());
        for &slot in all_ids {
            let key = self.keys[slot as usize].get_or_insert_with(|| {
                EventKey::from_expr_id(model.str(model.ids[slot as usize].text))
            });
            let lookup = lookup_clock(block, model, key, Some(name), pmu);
            let source = classify(model, slot, lookup, printed.is_some());
            let source_count = match &source {
                Source::Row { lines, time: false, .. } => lines.len().max(1) as f64,
                _ => 1.0,
            };
            self.offline.set_input(slot, source.value(), source_count);
            inputs.push(Input { slot, source, expr: expr_ids.contains(&slot) });
        }
        let result = self.offline.evaluate_one(root);
        let error = result.failure.map(|fail| explain_failure(model, fail, root, literals));
        let with_rows = || inputs.iter().filter(|i| i.expr && !i.source.row_lines().is_empty());
        let not_counted = |i: &Input| matches!(i.source, Source::NotCounted { .. });
        let any_present = with_rows().any(|i| !not_counted(i));
        let all_not_counted = with_rows().next().is_some() && with_rows().all(not_counted);
        let printed = printed.or_else(|| shadow_printed(block, model, root, &inputs));
        let mut outcome =
            Outcome { result, error, inputs, printed, check: None, any_present, all_not_counted };
        outcome.check = check(block, model, &outcome);
        outcome
    }
}

/// `block.lookup_key`, except that the common metrics' `task-clock` falls back to a
/// `cpu-clock` row: perf's own `CPUs utilized` and `/sec` rates use whichever of the two clocks
/// was counted, and `perf stat -a` counts `cpu-clock`. The row used is named in the output.
fn lookup_clock(
    block: &Block,
    model: &Model,
    key: &EventKey,
    metric: Option<&str>,
    pmu: Option<&str>,
) -> Lookup {
    let found = block.lookup_key(key, metric, pmu);
    if matches!(found, Lookup::Missing)
        && key.pmu.is_none()
        && key.name == "task-clock"
        && std::ptr::eq(model, tmetric_catalog::common())
    {
        let cpu_clock = EventKey { name: "cpu-clock".to_string(), ..key.clone() };
        return block.lookup_key(&cpu_clock, metric, pmu);
    }
    found
}

/// What a lookup means for the evaluation.
fn classify(model: &Model, slot: u16, lookup: Lookup, printed: bool) -> Source {
    let id = &model.ids[slot as usize];
    match lookup {
        Lookup::Found(found) => {
            let mut value = found.value;
            if let Some(unit) = found.unscaled_unit {
                match event_scale(model, slot, &unit) {
                    Some(scale) => value /= scale,
                    None => return Source::Unscaled { unit, lines: found.lines },
                }
            }
            Source::Row {
                value,
                lines: found.lines,
                group: found.group,
                in_metric_group: found.in_metric_group,
                running_pct: found.running_pct,
                // A `duration_time` row is a row; the elapsed footer or an interval length
                // is not.
                time: found.time.is_some_and(|t| !matches!(t, TimeSource::Row { .. })),
            }
        }
        Lookup::NotCounted { line, group, .. } => Source::NotCounted { line, group },
        Lookup::NotSupported { line, group, .. } => Source::NotSupported { line, group },
        Lookup::Ambiguous { lines, .. } => Source::Ambiguous { lines },
        Lookup::Missing if id.retire_latency && printed => Source::LatencyZero,
        Lookup::Missing => Source::Missing,
    }
}

/// The ScaleUnit factor perf multiplied slot's event by before printing it in `unit`.
fn event_scale(model: &Model, slot: u16, unit: &str) -> Option<f64> {
    let IdKind::Event(index) = model.ids[slot as usize].kind else { return None };
    let event = model.events.get(index as usize)?;
    (model.str(event.unit).eq_ignore_ascii_case(unit) && event.scale.is_normal())
        .then_some(event.scale)
}

/// What perf printed for `name` in `block`: on a row, or as a Default metric-group line.
fn printed_by_perf(block: &Block, name: &str, pmu: Option<&str>) -> Option<PerfPrinted> {
    let metric = match block.printed_metric(name, pmu) {
        Some((_, metric)) => metric,
        None => {
            loose_metrics(block)
                .into_iter()
                .find(|(m, header)| {
                    m.name.eq_ignore_ascii_case(name)
                        && pmu.is_none_or(|p| {
                            header.as_deref().is_none_or(|h| h.eq_ignore_ascii_case(p))
                        })
                })?
                .0
        }
    };
    Some(PerfPrinted { text: metric.text.clone(), value: metric.value, label: None, factor: 1.0 })
}

/// perf's built-in metrics that print what a common metric computes: the common metric,
/// the event whose row carries it, perf's label (`/sec` stands for `/sec`, `K/sec`, `M/sec`
/// and `G/sec`), and the factor from perf's value to the metric's scaled unit.
const SHADOWS: [(&str, &str, &str, f64); 6] = [
    ("cpus_utilized", "task-clock", "CPUs utilized", 1.0),
    ("context_switches_per_sec", "context-switches", "/sec", 1.0),
    ("cpu_migrations_per_sec", "cpu-migrations", "/sec", 1.0),
    ("page_faults_per_sec", "page-faults", "/sec", 1.0),
    ("major_faults_per_sec", "major-faults", "/sec", 1.0),
    // perf prints the TSC rate in ticks per second, the metric in GHz.
    ("tsc_rate", "tsc", "/sec", 1e-9),
];

/// For a common metric: the value perf printed next to the same event, if it did.
fn shadow_printed(
    block: &Block,
    model: &Model,
    root: usize,
    inputs: &[Input],
) -> Option<PerfPrinted> {
    if model.arch != "common" {
        return None;
    }
    let name = model.str(model.metrics[root].name);
    // In -I mode perf's `CPUs utilized` divides by the -I setting, not by the interval's
    // length (which `duration_time` is), so the two differ by design in short intervals.
    if name == "cpus_utilized" && block.interval.is_some() {
        return None;
    }
    let &(_, event, label, factor) = SHADOWS.iter().find(|s| s.0 == name)?;
    let lines: Vec<usize> = inputs.iter().flat_map(|i| i.source.row_lines()).copied().collect();
    // perf prints `CPUs utilized` on whichever clock was counted (see `lookup_clock`).
    let is_event = |n: &str| n == event || (event == "task-clock" && n == "cpu-clock");
    let row = block.rows.iter().find(|r| is_event(&r.key.name) && lines.contains(&r.line))?;
    row.metrics.iter().find_map(|m| {
        let prefix = if label == "/sec" {
            match m.name.as_str() {
                "/sec" => 1.0,
                "K/sec" => 1e3,
                "M/sec" => 1e6,
                "G/sec" => 1e9,
                _ => return None,
            }
        } else if m.name == label {
            1.0
        } else {
            return None;
        };
        Some(PerfPrinted {
            text: m.text.clone(),
            value: m.value,
            label: Some(m.name.clone()),
            factor: prefix * factor,
        })
    })
}

/// Whether tmetric's value agrees with perf's printed one: within half a unit of perf's last
/// printed digit, widened by how precisely perf printed the input counts (`0.83 msec`).
fn check(block: &Block, model: &Model, outcome: &Outcome) -> Option<bool> {
    let printed = outcome.printed.as_ref()?;
    let theirs = printed.value?;
    // Without all its inputs tmetric's value says nothing about perf's.
    if !outcome.complete() {
        return None;
    }
    let ours = outcome.scaled(model).unwrap_or(f64::NAN);
    if theirs.is_nan() || ours.is_nan() {
        return Some(theirs.is_nan() && ours.is_nan());
    }
    let decimals = printed.text.split_once('.').map_or(0, |(_, f)| f.len());
    let half_ulp = 0.5 * 10f64.powi(-(decimals as i32)) * printed.factor.abs();
    let mut relative = 0.0;
    for input in outcome.inputs.iter().filter(|i| i.expr) {
        for &line in input.source.row_lines() {
            if let Some(row) = block.rows.iter().find(|r| r.line == line) {
                relative += count_precision(row);
            }
        }
    }
    let tolerance = half_ulp * (1.0 + 1e-9) + ours.abs() * relative;
    Some((ours - theirs * printed.factor).abs() <= tolerance)
}

/// Half a unit of the last digit of a printed count, relative to the count.
fn count_precision(row: &Row) -> f64 {
    let digits: String =
        row.count_text.chars().filter(|c| c.is_ascii_digit() || *c == '.').collect();
    let Ok(value) = digits.parse::<f64>() else { return 0.0 };
    if value == 0.0 {
        return 0.0;
    }
    let decimals = digits.split_once('.').map_or(0, |(_, f)| f.len());
    0.5 * 10f64.powi(-(decimals as i32)) / value
}

/// How many printed values were checked, and how many disagreed.
#[derive(Debug, Default)]
pub struct Checks {
    checked: usize,
    disagree: usize,
}

impl Checks {
    fn count(&mut self, outcome: &Outcome) {
        if let Some(agrees) = outcome.check {
            self.checked += 1;
            self.disagree += usize::from(!agrees);
        }
    }

    fn report(&self, log: &str) {
        if self.checked == 0 {
            return;
        }
        if self.disagree == 0 {
            eprintln!(
                "tmetric: perf printed {} of these values in {log}; all agree at its printed precision",
                self.checked
            );
        } else {
            eprintln!(
                "tmetric: perf printed {} of these values in {log}; {} disagree (marked `perf printed`)",
                self.checked, self.disagree
            );
        }
    }
}

/// The output layout.
#[derive(Debug, Clone)]
enum Format {
    Text { colour: bool },
    Json,
    Csv { sep: String },
}

/// What the header says.
struct Header<'a> {
    models: &'a str,
    model: String,
    how: &'a str,
    common: bool,
    log: &'a str,
    log_data: &'a PerfLog,
    /// `log_data` holds the first blocks only; the rest is read as it is printed.
    streamed: bool,
    literals: &'a Literals,
    used: &'a [Literal],
}

#[derive(Serialize)]
struct HeaderJson<'a> {
    model: String,
    model_source: &'a str,
    common: bool,
    log: &'a str,
    layout: String,
    /// `None` when the log is read block by block: the count is not known yet.
    blocks: Option<usize>,
    literals: Vec<LiteralJson>,
}

#[derive(Serialize)]
struct HeaderLine<'a> {
    assumptions: HeaderJson<'a>,
}

#[derive(Serialize)]
struct GroupJson {
    /// The group's index in its block (perfstat's heuristic split).
    index: usize,
    /// Line of the group's first row.
    line: usize,
    /// The group where perf printed this metric.
    metric_group: bool,
}

#[derive(Serialize)]
struct PerfJson<'a> {
    printed: &'a str,
    label: Option<&'a str>,
    agrees: Option<bool>,
}

#[derive(Serialize)]
struct MetricJson<'a> {
    run: usize,
    interval: Option<f64>,
    aggr: Option<&'a str>,
    metric: &'a str,
    pmu: &'a str,
    value: Option<f64>,
    unit: &'a str,
    threshold: Option<bool>,
    group: Vec<GroupJson>,
    missing: Vec<String>,
    not_supported: Vec<String>,
    not_counted: Vec<String>,
    latency_zero: Vec<String>,
    unusable: Vec<String>,
    error: Option<String>,
    running_pct: Option<f64>,
    perf: Option<PerfJson<'a>>,
    model: String,
}

/// Writes the header and one line per outcome in the chosen format.
pub struct Printer<'a> {
    out: &'a mut dyn Write,
    format: Format,
    /// Width of the aggregation id column.
    aggr_width: usize,
    runs: usize,
    /// The last block's line prefix and what it was made from: every metric of a block
    /// starts with the same timestamp and id, and formatting the time for each line was a
    /// tenth of a long log's run time.
    last_prefix: std::cell::RefCell<Option<(PrefixKey, String)>>,
}

/// A block's interval (as bits) and aggregation id and CPU count.
type PrefixKey = (Option<u64>, Option<(String, Option<usize>)>);

/// The explanations of one outcome, for every format.
#[derive(Debug, Default)]
struct Notes {
    groups: Vec<(usize, usize, bool)>,
    missing: Vec<String>,
    not_supported: Vec<String>,
    not_counted: Vec<String>,
    latency_zero: Vec<String>,
    unusable: Vec<String>,
    running_pct: Option<f64>,
}

impl Notes {
    fn of(model: &Model, block: Option<&Block>, outcome: &Outcome) -> Notes {
        let mut notes = Notes::default();
        let text = |slot: u16| model.str(model.ids[slot as usize].text).to_string();
        let metric_group = block.and_then(|b| printed_group(b, model, outcome));
        for input in outcome.inputs.iter().filter(|i| i.expr) {
            let id = text(input.slot);
            match &input.source {
                Source::Row { running_pct, time, .. } => {
                    if !time && let Some(pct) = running_pct.filter(|p| *p < 100.0) {
                        notes.running_pct = Some(notes.running_pct.map_or(pct, |m| m.min(pct)));
                    }
                }
                Source::NotCounted { .. } => notes.not_counted.push(id),
                Source::NotSupported { .. } => notes.not_supported.push(id),
                Source::LatencyZero => notes.latency_zero.push(id),
                Source::Missing => notes.missing.push(id),
                Source::Ambiguous { lines } => notes
                    .unusable
                    .push(format!("{id}: rows on several core PMUs (lines {})", join_lines(lines))),
                Source::Unscaled { unit, lines } => notes.unusable.push(format!(
                    "{id}: printed in {unit} at line {}, and its scale factor is unknown",
                    join_lines(lines)
                )),
            }
            if let (Some(block), Some(group)) = (block, input.source.group())
                && !notes.groups.iter().any(|g| g.0 == group)
            {
                let line = block.group_rows(group).next().map_or(0, |r| r.line);
                notes.groups.push((group, line, metric_group == Some(group)));
            }
        }
        notes.groups.sort_unstable();
        notes
    }

    /// `X:R` ids shown with how to get them.
    fn missing_text(&self) -> Vec<String> {
        self.missing
            .iter()
            .map(|m| {
                if m.ends_with('R') && (m.ends_with(":R") || m.ends_with("@R")) {
                    format!("{m} (a retire latency: perf stat --record-tpebs records it)")
                } else {
                    m.clone()
                }
            })
            .collect()
    }

    /// Free-text notes, in the order the text layout prints them.
    fn texts(&self, outcome: &Outcome) -> Vec<String> {
        let mut out = Vec::new();
        if let Some(error) = &outcome.error {
            out.push(format!("error: {error}"));
        }
        if !self.missing.is_empty() {
            out.push(format!("missing: {}", self.missing_text().join(", ")));
        }
        if !self.not_supported.is_empty() {
            out.push(format!("not supported (NaN, as perf): {}", self.not_supported.join(", ")));
        }
        for unusable in &self.unusable {
            out.push(format!("unusable: {unusable}"));
        }
        if !self.not_counted.is_empty() {
            out.push(format!("not counted (read as 0, as perf): {}", self.not_counted.join(", ")));
        }
        if !self.latency_zero.is_empty() {
            out.push(format!(
                "no retire-latency row, read as 0 as perf does without --record-tpebs: {}",
                self.latency_zero.join(", ")
            ));
        }
        out
    }
}

/// The group of the row perf printed the outcome's metric on.
fn printed_group(block: &Block, model: &Model, outcome: &Outcome) -> Option<usize> {
    let metric = &model.metrics[outcome.result.metric];
    let pmu = lookup_pmu_name(model.str(metric.pmu));
    block.printed_metric(model.str(metric.name), pmu).map(|(row, _)| row.group)
}

fn join_lines(lines: &[usize]) -> String {
    lines.iter().map(ToString::to_string).collect::<Vec<_>>().join(", ")
}

impl<'a> Printer<'a> {
    fn new(out: &'a mut dyn Write, format: Format, log: &PerfLog) -> Printer<'a> {
        let aggr_width = log
            .blocks
            .iter()
            .filter_map(|b| b.aggr.as_ref())
            .map(|a| a.id.len())
            .max()
            .unwrap_or(0);
        Printer { out, format, aggr_width, runs: log.runs.len(), last_prefix: Default::default() }
    }

    fn header(&mut self, header: &Header) -> anyhow::Result<()> {
        let layout = match &header.log_data.layout {
            Layout::Text => "text".to_string(),
            Layout::Csv { sep } => format!("-x {sep}"),
            Layout::Json => "-j".to_string(),
        };
        let blocks = header.log_data.blocks.len();
        let blocks_json = (!header.streamed).then_some(blocks);
        let blocks = if header.streamed {
            format!("read block by block, metrics chosen from its first {blocks} block(s)")
        } else {
            format!("{blocks} block(s)")
        };
        match &self.format {
            Format::Json => json_line(
                self.out,
                &HeaderLine {
                    assumptions: HeaderJson {
                        model: header.model.clone(),
                        model_source: header.how,
                        common: header.common,
                        log: header.log,
                        layout,
                        blocks: blocks_json,
                        literals: header.literals.json(header.used),
                    },
                },
            )?,
            Format::Text { .. } | Format::Csv { .. } => {
                writeln!(
                    self.out,
                    "# tmetric: {} metrics ({}) from {} (perf stat {layout} layout, {blocks})",
                    header.models, header.how, header.log
                )?;
                writeln!(
                    self.out,
                    "# assumed, not measured: {}",
                    header.literals.describe(header.used)
                )?;
                if let Format::Csv { sep } = &self.format {
                    let columns = [
                        "interval",
                        "aggr",
                        "value",
                        "unit",
                        "metric",
                        "pmu",
                        "threshold",
                        "group",
                        "perf_printed",
                        "perf_agrees",
                        "notes",
                    ];
                    writeln!(self.out, "# columns: {}", columns.join(sep))?;
                }
            }
        }
        Ok(())
    }

    /// A comment naming the run, for logs holding several `perf stat` runs (`runs`: those
    /// known so far, when the log is read block by block).
    fn run_header(&mut self, runs: &[Run], run: usize) -> anyhow::Result<()> {
        if self.runs.max(runs.len()) < 2 || matches!(self.format, Format::Json) {
            return Ok(());
        }
        let Some(info) = runs.get(run) else { return Ok(()) };
        let what = info.command.as_deref().map_or(String::new(), |c| format!(" for '{c}'"));
        let line = info.header_line.map_or(String::new(), |l| format!(" (line {l})"));
        writeln!(self.out, "# run {}: performance counter stats{what}{line}", run + 1)?;
        Ok(())
    }

    /// One metric of one block; `block` is `None` for a metric no block has inputs for.
    fn metric(
        &mut self,
        engine: &Engine,
        block: Option<&Block>,
        outcome: &Outcome,
        unplaced: &str,
    ) -> anyhow::Result<()> {
        let model = engine.model;
        let m = &model.metrics[outcome.result.metric];
        let notes = Notes::of(model, block, outcome);
        let scaled = outcome.scaled(model);
        let printed = outcome.printed.as_ref();
        match &self.format {
            Format::Json => {
                json_line(
                    self.out,
                    &MetricJson {
                        run: block.map_or(0, |b| b.run) + 1,
                        interval: block.and_then(|b| b.interval),
                        aggr: block.and_then(|b| b.aggr.as_ref()).map(|a| a.id.as_str()),
                        metric: model.str(m.name),
                        pmu: model.str(m.pmu),
                        value: scaled.and_then(json_number),
                        unit: model.str(m.unit),
                        threshold: outcome.result.threshold,
                        group: notes
                            .groups
                            .iter()
                            .map(|&(index, line, metric_group)| GroupJson {
                                index,
                                line,
                                metric_group,
                            })
                            .collect(),
                        missing: notes.missing.clone(),
                        not_supported: notes.not_supported.clone(),
                        not_counted: notes.not_counted.clone(),
                        latency_zero: notes.latency_zero.clone(),
                        unusable: notes.unusable.clone(),
                        error: outcome.error.clone(),
                        running_pct: notes.running_pct,
                        perf: printed.map(|p| PerfJson {
                            printed: &p.text,
                            label: p.label.as_deref(),
                            agrees: outcome.check,
                        }),
                        model: model.path(),
                    },
                )?;
            }
            Format::Text { colour } => {
                let mut line = self.prefix(block);
                line.push_str(&metric_head(
                    model,
                    outcome.result.metric,
                    scaled,
                    outcome.result.threshold,
                    engine.common,
                    *colour,
                ));
                if let Some(block) = block
                    && (block.rows.iter().any(|r| r.group > 0) || notes.groups.len() > 1)
                    && !notes.groups.is_empty()
                {
                    line.push_str(&format!("  ({})", group_text(&notes.groups, outcome)));
                }
                if let Some(pct) = notes.running_pct {
                    line.push_str(&format!("  (multiplexed: ran {pct:.2}%)"));
                }
                for note in notes.texts(outcome) {
                    line.push_str(&format!("  {note}"));
                }
                if outcome.check == Some(false)
                    && let Some(p) = printed
                {
                    let label = p.label.as_deref().map_or(String::new(), |l| format!(" {l}"));
                    line.push_str(&format!("  (perf printed {}{label})", p.text));
                }
                if block.is_none() {
                    line.push_str(&format!("  ({unplaced})"));
                }
                writeln!(self.out, "{line}")?;
            }
            Format::Csv { sep } => {
                let clean = |text: &str| text.replace(sep.as_str(), " ");
                let value = match scaled {
                    Some(v) if v.is_finite() => perf_number(v, m.has_scale_unit).trim().to_string(),
                    _ => String::new(),
                };
                let threshold = match outcome.result.threshold {
                    Some(true) => "1",
                    Some(false) => "0",
                    None => "",
                };
                let group: Vec<String> = notes.groups.iter().map(|g| g.1.to_string()).collect();
                let agrees = match outcome.check {
                    Some(true) => "1",
                    Some(false) => "0",
                    None => "",
                };
                let mut texts = notes.texts(outcome);
                if let Some(pct) = notes.running_pct {
                    texts.push(format!("multiplexed: ran {pct:.2}%"));
                }
                let pmu = model.str(m.pmu);
                let fields = [
                    block.and_then(|b| b.interval).map_or(String::new(), |t| format!("{t:.9}")),
                    block.and_then(|b| b.aggr.as_ref()).map_or(String::new(), |a| a.id.clone()),
                    value,
                    model.str(m.unit).to_string(),
                    model.str(m.name).to_string(),
                    if pmu == "default_core" { String::new() } else { pmu.to_string() },
                    threshold.to_string(),
                    group.join("+"),
                    printed.map_or(String::new(), |p| p.text.clone()),
                    agrees.to_string(),
                    texts.join("; "),
                ];
                let fields: Vec<String> = fields.iter().map(|f| clean(f)).collect();
                writeln!(self.out, "{}", fields.join(sep))?;
            }
        }
        Ok(())
    }

    /// perf's row prefix: the `-I` timestamp and the aggregation id (with its CPU count).
    fn prefix(&self, block: Option<&Block>) -> String {
        let Some(block) = block else { return String::new() };
        let key: PrefixKey = (
            block.interval.map(f64::to_bits),
            block.aggr.as_ref().map(|a| (a.id.clone(), a.cpus.map(|c| c as usize))),
        );
        if let Some((known, text)) = &*self.last_prefix.borrow()
            && *known == key
        {
            return text.clone();
        }
        let prefix = self.format_prefix(block);
        *self.last_prefix.borrow_mut() = Some((key, prefix.clone()));
        prefix
    }

    fn format_prefix(&self, block: &Block) -> String {
        let mut prefix = String::new();
        if let Some(t) = block.interval {
            prefix.push_str(&format!("{t:16.9} "));
        }
        if let Some(aggr) = &block.aggr {
            prefix.push_str(&format!("{:<width$} ", aggr.id, width = self.aggr_width));
            if let Some(cpus) = aggr.cpus {
                prefix.push_str(&format!("{cpus:>4} "));
            }
        }
        prefix
    }

    fn finish(&mut self) -> anyhow::Result<()> {
        self.out.flush()?;
        Ok(())
    }
}

/// `group of line 12, where perf printed it` or `groups of lines 4 and 12`.
fn group_text(groups: &[(usize, usize, bool)], outcome: &Outcome) -> String {
    let printed_here = outcome.printed.as_ref().is_some_and(|p| p.label.is_none());
    match groups {
        [(_, line, in_metric)] => {
            let whose = match (printed_here, in_metric) {
                (true, true) => ", where perf printed it",
                (true, false) => ", not the one perf printed it in",
                _ => "",
            };
            format!("group of line {line}{whose}")
        }
        _ => {
            let lines: Vec<String> = groups
                .iter()
                .map(|(_, line, in_metric)| {
                    if printed_here && *in_metric {
                        format!("{line} (where perf printed it)")
                    } else {
                        line.to_string()
                    }
                })
                .collect();
            format!("groups of lines {}", lines.join(", "))
        }
    }
}
