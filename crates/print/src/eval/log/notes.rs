//! What `eval --from-perf` says on standard error, worded here and written by the front end:
//! lines of the log that were not perf's, the importer's warnings, how the model was chosen
//! when that needs a warning, literals the log could not fix, what was left out of the
//! selection and why, inputs read by encoding, and how many of perf's printed values were
//! checked.

use tmetric_offline::perflog::infer::Inference;
use tmetric_offline::perflog::literals::Unsolved;
use tmetric_offline::perflog::run::{How, ModelChoice, Summary};
use tmetric_offline::perflog::{Checks, Selection};
use tmetric_perfstat::Warning;

use crate::eval::first_names;

/// Which lines were skipped as not perf's output, and where they lie; `None` when none were.
pub fn skipped_lines(skipped: &tmetric_perfstat::Skipped, name: &str) -> Option<String> {
    if skipped.lines() == 0 {
        return None;
    }
    let first = skipped
        .first
        .first()
        .map_or(String::new(), |(line, why)| format!("; the first, line {line}: {why}"));
    Some(format!("note: {name}: skipped {skipped}{first}"))
}

/// The importer's warnings: the first few and how many, so that a long log's do not pile up.
#[derive(Debug, Default)]
pub struct ImportWarnings {
    first: Vec<Warning>,
    count: usize,
    /// Found by the reader and not kept (beyond its bound).
    pub dropped: usize,
}

impl ImportWarnings {
    const SHOWN: usize = 3;

    /// Adds warnings taken from the reader.
    pub fn add(&mut self, warnings: Vec<Warning>) {
        self.count += warnings.len();
        self.first.extend(warnings);
        // In line order (a note on a mix of layouts comes at the end of the input).
        self.first.sort_by_key(|w| w.line);
        self.first.truncate(Self::SHOWN);
    }

    /// The lines the importer warned about (a shell prompt, mail text): named, never dropped
    /// silently; `None` without any.
    pub fn note(&self, name: &str) -> Option<String> {
        let count = self.count + self.dropped;
        if count == 0 {
            return None;
        }
        let first: Vec<String> = self.first.iter().map(ToString::to_string).collect();
        let more = count.saturating_sub(Self::SHOWN);
        let more = if more > 0 { format!("; and {more} more") } else { String::new() };
        Some(format!(
            "note: {name}: {count} warning(s) while reading it ({}{more})",
            first.join("; ")
        ))
    }
}

/// `--model` against the cpuid given beside it, when they name different models (worded as a
/// warning).
pub fn model_conflict(choice: &ModelChoice) -> Option<String> {
    let How::Given { cpuid_names: Some((cpuid, other)) } = &choice.how else { return None };
    let model = choice.model.map_or_else(String::new, |m| m.path());
    Some(format!("using --model {model} although cpuid `{cpuid}` is {}", other.path()))
}

/// A log (named `name`) of software events and tracepoints only: which rows no common metric
/// reads.
pub fn software_only(how: &How, name: &str) -> Option<String> {
    let How::Inferred(Inference::SoftwareOnly { ignored }) = how else { return None };
    let rows: usize = ignored.iter().map(|(_, lines)| lines.len()).sum();
    let listed: Vec<String> = ignored
        .iter()
        .map(|(event, lines)| {
            let word = if lines.len() == 1 { "line" } else { "lines" };
            format!("`{event}` ({word} {})", join_lines_short(lines))
        })
        .collect();
    Some(format!(
        "{name} has only software events and tracepoints, so no CPU model applies; using the common metrics and ignoring {rows} row(s) no common metric reads: {}",
        listed.join(", ")
    ))
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

/// The unknown literals perf's printed values could not fix, one warning each.
pub fn unsolved(unsolved: &[Unsolved]) -> Vec<String> {
    unsolved
        .iter()
        .map(|u| match u {
            Unsolved::NoValue { literal, metric, line } => format!(
                "#{} could not be inferred: no value reproduces {metric} as perf printed it on line {line}",
                literal.name()
            ),
            Unsolved::Several { literal, count, values, metric, line } => {
                let shown: Vec<String> = values.iter().map(|v| v.to_string()).collect();
                let more = if *count > values.len() { ", ..." } else { "" };
                format!(
                    "#{} could not be inferred: {count} values reproduce {metric} as perf printed it on line {line} ({}{more})",
                    literal.name(),
                    shown.join(", ")
                )
            }
        })
        .collect()
}

/// A log read block by block: how many blocks, and that the model and metrics were chosen
/// from the first ones.
pub fn streamed(name: &str, blocks: usize, prefix_blocks: usize, budget: u64) -> String {
    format!(
        "{name} was read block by block ({blocks} blocks): the model and the metrics shown were chosen from its first {prefix_blocks} block(s), in its first {budget} bytes"
    )
}

/// What the end of the evaluation says (`name`: the log, `where_`: the tables).
pub fn summary(summary: &Summary, name: &str, where_: &str) -> Vec<String> {
    let mut out = Vec::new();
    if !summary.skipped.is_empty() {
        let skipped: Vec<String> =
            summary.skipped.iter().map(|(metric, n)| format!("{metric} ({n} blocks)")).collect();
        out.push(format!(
            "skipped blocks where every input row of a metric is <not counted> (perf prints no metric there): {}",
            first_names(&skipped)
        ));
    }
    if summary.without_inputs > 0 {
        out.push(format!(
            "{} selected metric(s) have none of their inputs in {name}; they are listed last with what is missing",
            summary.without_inputs
        ));
    }
    if summary.never_counted > 0 {
        out.push(format!(
            "{} selected metric(s) have input rows in {name}, but every one of them is <not counted> in every block (perf prints no value there either); they are listed last",
            summary.never_counted
        ));
    }
    if summary.nothing {
        out.push(format!("no metric of {where_} has all its inputs in {name}"));
    }
    out
}

/// Inputs read from a row of another name by their common encoding, one note each.
pub fn by_encoding(read: &[(String, String, String)]) -> Vec<String> {
    read.iter()
        .map(|(input, row, encoding)| format!(
            "note: {input} read from `{row}`, which the log names otherwise: both are {encoding} (the catalogue's encoding; an older perf or JSON vintage named the event so)"
        ))
        .collect()
}

/// How many of perf's printed values were checked and how many disagree; `None` when none.
pub fn checks(checks: &Checks, log: &str) -> Option<String> {
    if checks.checked == 0 {
        return None;
    }
    Some(if checks.disagree == 0 {
        format!(
            "perf printed {} of these values in {log}; all agree at its printed precision",
            checks.checked
        )
    } else {
        format!(
            "perf printed {} of these values in {log}; {} disagree (marked `perf printed`)",
            checks.checked, checks.disagree
        )
    })
}

/// What the default selection left out (`where_`: the tables, `log`: its name).
pub fn selection(selection: &Selection, where_: &str, log: &str) -> Vec<String> {
    let mut out = Vec::new();
    if !selection.also.is_empty() {
        out.push(format!(
            "also computable from {log} but not printed by perf: {} metrics of {where_} ({}); select them with -M",
            selection.also.len(),
            first_names(&selection.also)
        ));
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
        out.push(format!(
            "not shown: {} metrics of {where_} with only some inputs in {log}, fewest missing first: {}; name them with -M to see each block",
            selection.partial.len(),
            parts.join(", ")
        ));
    }
    if !selection.literal.is_empty() {
        out.push(format!(
            "not shown: {} metrics of {where_} that read unknown literals ({}); name them with -M to see which",
            selection.literal.len(),
            first_names(&selection.literal)
        ));
    }
    out
}

/// perf's global layout prints no counters column, so `aggr_nr()` of input `slot` reads
/// `assumed` (one counter per printed row) where perf summed one counter per CPU and box:
/// says so, why the header did not tell, and which layouts print them.
pub fn aggr_nr_assumed(
    model: &tmetric_catalog::Model,
    slot: u16,
    assumed: f64,
    counters: tmetric_offline::perflog::LogCounters,
) -> String {
    let text = model.str(model.ids[slot as usize].text);
    let why = match counters {
        tmetric_offline::perflog::LogCounters::Unsaid(why) => why,
        _ => "its header names CPUs, and this event is an uncore box's",
    };
    format!(
        "assuming aggr_nr({text}) = {assumed} (one counter per printed row): the log prints no counters column and {why}; perf stat --per-socket, --per-die or -A prints the counters it summed beside each row"
    )
}
