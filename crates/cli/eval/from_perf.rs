//! `tmetric eval --from-perf`: a model's metrics over the counts of a `perf stat` log, per
//! block (run × `-I` interval × aggregation id), each input explained and each value checked
//! against what perf printed.
//!
//! The evaluation is the engine's (`tmetric_engine::perflog`: model inference, literals implied
//! by the log, the rows each input came from, the checks against perf's printed values). This
//! file reads the log (streaming long ones), takes the flags and metric selection of `eval
//! --counts` (the parent module), and prints: the header, one line per metric and block in the
//! text, CSV or JSON layout, and what was left out and why.

use std::io::{BufRead, BufReader, Write};
use std::path::Path;

use anyhow::{Context, anyhow, bail};
use serde::Serialize;
use tmetric_catalog::Model;
use tmetric_engine::perflog::infer::{Inference, compare_models, infer_model};
use tmetric_engine::perflog::literals::{Unsolved, infer_literals};
use tmetric_engine::perflog::{
    Checks, InputSource, LogEvaluator, Outcome, Selection, default_selection, lookup_pmu_name,
    printed_metrics,
};
use tmetric_engine::{Literals, Select};
use tmetric_model::Literal;
use tmetric_perfstat::{Block, Layout, PerfLog, Reader, Run, Warning};

use super::{
    EvalArgs, LiteralJson, bottleneck_of, describe_literals, explain_failure, first_names,
    literals_json, metric_head, resolve_literals, select_items, warn, why_text,
};
use crate::models::{examples, find_model, join_code};
use crate::output::{json_line, json_number, perf_number};

pub mod builtin;

/// The model, the default selection and the layout of the output are chosen from the intervals
/// read before this many bytes of the log (at least one); a longer log is then read and
/// evaluated block by block, so memory does not grow with it (docs/from-perf.md).
pub const PREFIX_BYTES: u64 = 4 << 20;

/// Runs `tmetric eval --from-perf PATH`.
pub fn run(args: &EvalArgs, path: &Path, out: &mut dyn Write) -> anyhow::Result<()> {
    if path.as_os_str() == "-" {
        crate::out::stdin_hint(
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
        warnings_dropped: reader.warnings_dropped(),
        skipped: reader.skipped().clone(),
        numbers: reader.numbers().clone(),
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
        warnings.dropped = log.warnings_dropped;
        warnings.note(&name);
        note_skipped(&log.skipped, &name);
    }
    let literals = resolve_literals(args, None, &[])?;
    let cpuid = args.cpuid.as_deref();
    let choice = choose_model(args, &log, &literals, &name)?;

    let common = tmetric_catalog::common();
    let mut engines: Vec<LogEvaluator> = Vec::new();
    if let Some(model) = choice.model {
        engines.push(LogEvaluator::new(model, false, &literals, cpuid));
    }
    if !engines.iter().any(|e| std::ptr::eq(e.model, common)) {
        engines.push(LogEvaluator::new(common, choice.model.is_some(), &literals, cpuid));
    }
    let where_ = match choice.model {
        Some(model) if !std::ptr::eq(model, common) => {
            format!("{} or the common metrics", model.path())
        }
        _ => "the common metrics".to_string(),
    };

    let all_items: Vec<&str> =
        args.metrics.iter().map(|s| s.trim()).filter(|s| !s.is_empty()).collect();
    // perf's built-in metrics (`insn per cycle`, ...) are not in any model.
    let (builtins, items) = tmetric_engine::perflog::builtins::select(&all_items);
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

    // Models that agree on what perf printed must agree on what `-M` adds too.
    if let Some(model) = choice.model
        && !choice.agreeing.is_empty()
        && !all_items.is_empty()
    {
        let names: Vec<(String, Option<String>)> = roots
            .first()
            .into_iter()
            .flatten()
            .map(|&m| {
                let pmu = model.str(model.metrics[m].pmu);
                (
                    model.str(model.metrics[m].name).to_string(),
                    lookup_pmu_name(pmu).map(str::to_string),
                )
            })
            .collect();
        let mut models = vec![model];
        models.extend(&choice.agreeing);
        if let Err(differ) = compare_models(&models, &log, &literals, &names, false) {
            bail!(
                "cannot tell which CPU model {name} comes from: {} explain it equally well and agree on what perf printed, but compute differently what -M selects: {}; pass --model MODEL or --cpuid CPUID",
                listed_models(&models),
                differ.describe()
            );
        }
    }
    let json_printed =
        printed.iter().any(|p| engines.iter().any(|e| !e.model.metrics_named(&p.name).is_empty()));
    let builtins = builtins.for_log(&log, json_printed);
    // Literals the flags leave unknown, solved from perf's printed values.
    let mut literals = literals;
    let unsolved = infer_literals(&mut engines, &roots, &log, &mut literals, cpuid);
    report_unsolved(&unsolved);
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
    let mut printer = Printer::new(out, format, &log, &literals);
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
    // (input, row, encoding) read by encoding, each said once at the end.
    let mut by_encoding: Vec<(String, String, String)> = Vec::new();
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
            let (count, info) = match &mut rest {
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
        for (e, engine) in engines.iter_mut().enumerate() {
            // The block's metrics first, so that the bottleneck path is the one the whole
            // tree decides, as in every other view.
            let mut outcomes = Vec::new();
            for (r, &root) in roots[e].iter().enumerate() {
                let outcome = engine.evaluate(&block, root);
                if !outcome.any_present {
                    not_counted[e][r] += usize::from(outcome.all_not_counted);
                    continue;
                }
                outcomes.push((r, outcome));
            }
            let path = bottleneck_of(engine.model, &outcomes, |(_, o)| {
                (o.result.metric, o.result.value, o.result.threshold)
            });
            for (i, (r, outcome)) in outcomes.into_iter().enumerate() {
                shown[e][r] = true;
                checks.count(outcome.check);
                for input in &outcome.inputs {
                    if let Some(alias) = &input.by_encoding
                        && by_encoding.len() < 16
                    {
                        let id = engine.model.str(engine.model.ids[input.slot as usize].text);
                        let said = (id.to_string(), alias.row.clone(), alias.encoding.clone());
                        if !by_encoding.contains(&said) {
                            by_encoding.push(said);
                        }
                    }
                }
                printer.metric(engine, Some(&block), &outcome, "", path.contains(&i))?;
            }
        }
        builtins_shown += builtin::print_block(&builtins, &mut printer, &block, &mut checks)?;
        first.get_or_insert(block);
    }
    // Metrics none of whose inputs any block has: one line each, with everything missing.
    let mut unplaced = 0;
    let mut unplaced_not_counted = 0;
    if let Some(first) = &first {
        for (e, engine) in engines.iter_mut().enumerate() {
            for (r, &root) in roots[e].iter().enumerate() {
                if !shown[e][r] {
                    unplaced += 1;
                    let outcome = engine.evaluate(first, root);
                    let why = if not_counted[e][r] > 0 {
                        unplaced_not_counted += 1;
                        "its input rows are <not counted> in every block"
                    } else {
                        "no block of the log has any of its inputs"
                    };
                    printer.metric(engine, None, &outcome, why, false)?;
                }
            }
        }
    }
    printer.finish()?;
    if let Some(reader) = &rest {
        warnings.dropped = reader.warnings_dropped();
        warnings.note(&name);
        note_skipped(reader.skipped(), &name);
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
    let uncounted = unplaced_not_counted;
    if unplaced > uncounted {
        eprintln!(
            "tmetric: {} selected metric(s) have none of their inputs in {name}; they are listed last with what is missing",
            unplaced - uncounted
        );
    }
    if uncounted > 0 {
        eprintln!(
            "tmetric: {uncounted} selected metric(s) have input rows in {name}, but every one of them is <not counted> in every block (perf prints no value there either); they are listed last"
        );
    }
    if roots.iter().all(Vec::is_empty) && builtins_shown == 0 {
        eprintln!("tmetric: no metric of {where_} has all its inputs in {name}");
    }
    for (input, row, encoding) in &by_encoding {
        eprintln!(
            "tmetric: note: {input} read from `{row}`, which the log names otherwise: both are {encoding} (the catalogue's encoding; an older perf or JSON vintage named the event so)"
        );
    }
    report_checks(&checks, &name);
    print_selection(&report, &where_, &name);
    Ok(())
}

/// Says on stderr which lines were skipped as not perf's output, and where they lie.
fn note_skipped(skipped: &tmetric_perfstat::Skipped, name: &str) {
    if skipped.lines() == 0 {
        return;
    }
    let first = skipped
        .first
        .first()
        .map_or(String::new(), |(line, why)| format!("; the first, line {line}: {why}"));
    eprintln!("tmetric: note: {name}: skipped {skipped}{first}");
}

/// The importer's warnings: the first few and how many, so that a long log's do not pile up.
#[derive(Default)]
struct Warnings {
    first: Vec<Warning>,
    count: usize,
    /// Found by the reader and not kept (beyond its bound).
    dropped: usize,
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
        let count = self.count + self.dropped;
        if count == 0 {
            return;
        }
        let first: Vec<String> = self.first.iter().map(ToString::to_string).collect();
        let more = count.saturating_sub(Self::SHOWN);
        let more = if more > 0 { format!("; and {more} more") } else { String::new() };
        eprintln!(
            "tmetric: note: {name}: {count} warning(s) while reading it ({}{more})",
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
    /// Models that explain the log as well as `model` and agree with it on what perf printed:
    /// a metric selected with `-M` must agree on them too.
    agreeing: Vec<&'static Model>,
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
        return Ok(ModelChoice {
            model: Some(model),
            how: "given with --model".into(),
            agreeing: Vec::new(),
        });
    }
    if let (Some(model), Some(cpuid)) = (by_cpuid, &args.cpuid) {
        return Ok(ModelChoice {
            model: Some(model),
            how: format!("for cpuid {cpuid}"),
            agreeing: Vec::new(),
        });
    }
    infer_model_of(log, literals, name)
}

/// The model a log comes from, by the engine's inference, in the header's words; a log no
/// model or several models explain is an error naming what to pass.
fn infer_model_of(log: &PerfLog, literals: &Literals, name: &str) -> anyhow::Result<ModelChoice> {
    match infer_model(log, literals) {
        Inference::Model { model, score, next, rows, events } => {
            let next = next.map(|(m, s)| format!("; next best {} ({})", m.path(), s.brief()));
            Ok(ModelChoice {
                model: Some(model),
                how: format!("inferred: {}{}", score.describe(rows, events), next.unwrap_or_default()),
                agreeing: Vec::new(),
            })
        }
        Inference::GenericOnly => Ok(ModelChoice {
            model: None,
            how: "no CPU model: the log has only generic events (pass --model or --cpuid for a model's metrics)".into(),
            agreeing: Vec::new(),
        }),
        Inference::SoftwareOnly { ignored } => {
            // Say which rows nothing reads.
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
            Ok(ModelChoice {
                model: None,
                how: "no CPU model: the log has only software events and tracepoints (pass --model or --cpuid for a model's metrics)".into(),
                agreeing: Vec::new(),
            })
        }
        Inference::Unknown { events } => {
            let shown: Vec<String> = events.iter().take(6).cloned().collect();
            bail!(
                "cannot tell which CPU model {name} comes from: no model of the catalogue knows its events ({}); pass --model MODEL (models with metrics include {}) or --cpuid CPUID",
                join_code(&shown),
                examples()
            )
        }
        Inference::Agreeing { model, others, score, compared, rows, events } => {
            let mut all = vec![model];
            all.extend(&others);
            Ok(ModelChoice {
                model: Some(model),
                how: format!(
                    "inferred: {} explain it equally well ({}) and agree: each computes the same value for every metric perf printed ({compared} values compared), so {} is used",
                    listed_models(&all),
                    score.describe(rows, events),
                    model.path()
                ),
                agreeing: others,
            })
        }
        Inference::Tied { models, score, rows, events, differ } => {
            let differ = differ.map_or(String::new(), |d| {
                format!("; they compute differently {}", d.describe())
            });
            bail!(
                "cannot tell which CPU model {name} comes from: {} explain it equally well ({}){differ}; pass --model MODEL or --cpuid CPUID",
                listed_models(&models),
                score.describe(rows, events)
            )
        }
        Inference::NoModels => bail!("the catalogue has no CPU models"),
    }
}

/// `` `x86/icelake`, `x86/tigerlake` and 3 more ``
fn listed_models(models: &[&'static Model]) -> String {
    let listed: Vec<String> = models.iter().take(8).map(|m| m.path()).collect();
    let more = models.len().saturating_sub(listed.len());
    let more = if more > 0 { format!(" and {more} more") } else { String::new() };
    format!("{}{more}", join_code(&listed))
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

/// Says on stderr what the default selection left out (`where_`: the models, `log`: its name).
fn print_selection(selection: &Selection, where_: &str, log: &str) {
    if !selection.also.is_empty() {
        eprintln!(
            "tmetric: also computable from {log} but not printed by perf: {} metrics of {where_} ({}); select them with -M",
            selection.also.len(),
            first_names(&selection.also)
        );
    }
    if !selection.partial.is_empty() {
        const SHOWN: usize = 4;
        let mut partial: Vec<&(String, Vec<String>)> = selection.partial.iter().collect();
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
        if selection.partial.len() > SHOWN {
            parts.push(format!("and {} more", selection.partial.len() - SHOWN));
        }
        eprintln!(
            "tmetric: not shown: {} metrics of {where_} with only some inputs in {log}, fewest missing first: {}; name them with -M to see each block",
            selection.partial.len(),
            parts.join(", ")
        );
    }
    if !selection.literal.is_empty() {
        eprintln!(
            "tmetric: not shown: {} metrics of {where_} that read unknown literals ({}); name them with -M to see which",
            selection.literal.len(),
            first_names(&selection.literal)
        );
    }
}

/// Says on stderr how many of perf's printed values were checked and how many disagree.
fn report_checks(checks: &Checks, log: &str) {
    if checks.checked == 0 {
        return;
    }
    if checks.disagree == 0 {
        eprintln!(
            "tmetric: perf printed {} of these values in {log}; all agree at its printed precision",
            checks.checked
        );
    } else {
        eprintln!(
            "tmetric: perf printed {} of these values in {log}; {} disagree (marked `perf printed`)",
            checks.checked, checks.disagree
        );
    }
}

/// Says on stderr which unknown literals perf's printed values could not fix.
fn report_unsolved(unsolved: &[Unsolved]) {
    for u in unsolved {
        match u {
            Unsolved::NoValue { literal, metric, line } => crate::out::warn(&format!(
                "#{} could not be inferred: no value reproduces {metric} as perf printed it on line {line}",
                literal.name()
            )),
            Unsolved::Several { literal, count, values, metric, line } => {
                let shown: Vec<String> = values.iter().map(|v| v.to_string()).collect();
                let more = if *count > values.len() { ", ..." } else { "" };
                crate::out::warn(&format!(
                    "#{} could not be inferred: {count} values reproduce {metric} as perf printed it on line {line} ({}{more})",
                    literal.name(),
                    shown.join(", ")
                ));
            }
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
    /// The number convention of a log written under a locale other than C (`de_DE`'s
    /// `4.595.014.128`), as read from its numbers; null for C-like numbers.
    numbers: Option<String>,
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
    /// On the TMA bottleneck path, which text marks `<==`.
    bottleneck: bool,
    group: Vec<GroupJson>,
    missing: Vec<String>,
    not_supported: Vec<String>,
    not_counted: Vec<String>,
    latency_zero: Vec<String>,
    unusable: Vec<String>,
    by_encoding: Vec<ByEncodingJson>,
    error: Option<String>,
    /// Why the value is nan or 0 although every input has a value.
    why: Option<String>,
    running_pct: Option<f64>,
    perf: Option<PerfJson<'a>>,
    model: String,
}

/// Writes the header and one line per outcome in the chosen format.
pub struct Printer<'a> {
    out: &'a mut dyn Write,
    format: Format,
    /// To say which flag sets a literal a metric could not do without.
    literals: Literals,
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
    /// Why the metric has no value, naming the flag for an unknown literal.
    error: Option<String>,
    groups: Vec<(usize, usize, bool)>,
    missing: Vec<String>,
    not_supported: Vec<String>,
    not_counted: Vec<String>,
    latency_zero: Vec<String>,
    unusable: Vec<String>,
    running_pct: Option<f64>,
    /// Inputs read from a row of another name with the same encoding.
    by_encoding: Vec<ByEncodingJson>,
    /// Why the value is nan or 0 although every input has a value.
    why: Option<String>,
}

/// An input read from a row of another name that counts the same event.
#[derive(Debug, Clone, PartialEq, Serialize)]
struct ByEncodingJson {
    input: String,
    row: String,
    encoding: String,
}

impl Notes {
    fn of(
        model: &'static Model,
        block: Option<&Block>,
        outcome: &Outcome,
        literals: &Literals,
    ) -> Notes {
        let mut notes = Notes::default();
        let text = |slot: u16| model.str(model.ids[slot as usize].text).to_string();
        let metric_group = block.and_then(|b| outcome.printed_group(b, model));
        let metric = outcome.result.metric;
        notes.error = outcome.result.failure.map(|f| explain_failure(model, f, metric, literals));
        notes.why = outcome.why.as_ref().map(|why| {
            why_text(model, why, outcome.result.value, literals, "the log has no row for")
        });
        for input in outcome.inputs.iter().filter(|i| i.expr) {
            let id = text(input.slot);
            match &input.source {
                InputSource::Row { running_pct, time, .. } => {
                    if !time && let Some(pct) = running_pct.filter(|p| *p < 100.0) {
                        notes.running_pct = Some(notes.running_pct.map_or(pct, |m| m.min(pct)));
                    }
                }
                InputSource::NotCounted { .. } => notes.not_counted.push(id),
                InputSource::NotSupported { .. } => notes.not_supported.push(id),
                InputSource::LatencyZero => notes.latency_zero.push(id),
                InputSource::Missing => notes.missing.push(id),
                InputSource::Ambiguous { lines } => notes
                    .unusable
                    .push(format!("{id}: rows on several core PMUs (lines {})", join_lines(lines))),
                InputSource::Unscaled { unit, lines } => notes.unusable.push(format!(
                    "{id}: printed in {unit} at line {}, and its scale factor is unknown",
                    join_lines(lines)
                )),
            }
            if let Some(alias) = &input.by_encoding {
                notes.by_encoding.push(ByEncodingJson {
                    input: text(input.slot),
                    row: alias.row.clone(),
                    encoding: alias.encoding.clone(),
                });
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
    fn texts(&self) -> Vec<String> {
        let mut out = Vec::new();
        if let Some(error) = &self.error {
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
        for b in &self.by_encoding {
            out.push(format!("by encoding: {} from `{}` ({})", b.input, b.row, b.encoding));
        }
        if let Some(why) = &self.why {
            out.push(format!("why: {why}"));
        }
        out
    }
}

fn join_lines(lines: &[usize]) -> String {
    lines.iter().map(ToString::to_string).collect::<Vec<_>>().join(", ")
}

impl<'a> Printer<'a> {
    fn new(
        out: &'a mut dyn Write,
        format: Format,
        log: &PerfLog,
        literals: &Literals,
    ) -> Printer<'a> {
        let aggr_width = log
            .blocks
            .iter()
            .filter_map(|b| b.aggr.as_ref())
            .map(|a| a.id.len())
            .max()
            .unwrap_or(0);
        Printer {
            out,
            format,
            literals: literals.clone(),
            aggr_width,
            runs: log.runs.len(),
            last_prefix: Default::default(),
        }
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
        let numbers = header.log_data.numbers.describe();
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
                        numbers: numbers.clone(),
                        literals: literals_json(header.literals, header.used),
                    },
                },
            )?,
            Format::Text { .. } | Format::Csv { .. } => {
                let numbers = numbers.map_or(String::new(), |n| format!("; numbers: {n}"));
                writeln!(
                    self.out,
                    "# tmetric: {} metrics ({}) from {} (perf stat {layout} layout, {blocks}{numbers})",
                    header.models, header.how, header.log
                )?;
                writeln!(
                    self.out,
                    "# assumed, not measured: {}",
                    describe_literals(header.literals, header.used)
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

    /// A comment naming the run, for logs holding several `perf stat` runs (`runs`: how many
    /// are known so far, when the log is read block by block; `info`: this one).
    fn run_header(&mut self, runs: usize, info: Option<&Run>, run: usize) -> anyhow::Result<()> {
        if self.runs.max(runs) < 2 || matches!(self.format, Format::Json) {
            return Ok(());
        }
        let Some(info) = info else { return Ok(()) };
        let what = info.command.as_deref().map_or(String::new(), |c| format!(" for '{c}'"));
        let line = info.header_line.map_or(String::new(), |l| format!(" (line {l})"));
        writeln!(self.out, "# run {}: performance counter stats{what}{line}", run + 1)?;
        Ok(())
    }

    /// One metric of one block; `block` is `None` for a metric no block has inputs for.
    fn metric(
        &mut self,
        engine: &LogEvaluator,
        block: Option<&Block>,
        outcome: &Outcome,
        unplaced: &str,
        bottleneck: bool,
    ) -> anyhow::Result<()> {
        let model = engine.model;
        let m = &model.metrics[outcome.result.metric];
        let notes = Notes::of(model, block, outcome, &self.literals);
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
                        bottleneck,
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
                        by_encoding: notes.by_encoding.clone(),
                        error: notes.error.clone(),
                        why: notes.why.clone(),
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
                    bottleneck,
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
                for note in notes.texts() {
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
                let mut texts = notes.texts();
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
