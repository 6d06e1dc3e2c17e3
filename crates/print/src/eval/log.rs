//! `eval --from-perf`'s layouts: the header (model and why, literals assumed), then one line
//! per metric and block (the `-I` timestamp and aggregation id, the metric as `eval` prints
//! it, the groups it was read from, and notes: missing, `<not counted>`, multiplexing, perf's
//! own value when it differs) in the text, CSV (`-x SEP`) or JSON-lines layout; perf's
//! built-in metrics in the same layout ([`LogPrinter::builtin`]). The notes that go to
//! standard error (what was left out, checks against perf, the importer's warnings) are
//! worded in [`notes`].

pub mod notes;

use std::cell::RefCell;
use std::io::{self, Write};

use serde::Serialize;
use tmetric_catalog::Model;
use tmetric_engine::builtin::{NSECS, NoValue};
use tmetric_engine::select::Searched;
use tmetric_engine::{Literals, Why};
use tmetric_model::Literal;
use tmetric_offline::perflog::builtins::BuiltinOutcome;
use tmetric_offline::perflog::infer::{Inference, StandsFor};
use tmetric_offline::perflog::run::{How, ModelChoice};
use tmetric_offline::perflog::{BlockOutcome, InputSource};
use tmetric_perfstat::{Block, Layout as LogLayout, PerfLog, Run};

use super::{
    LiteralJson, describe_literals, explain_failure, literals_json, push_metric_head, why_text,
};
use crate::num::{json_number, perf_number};
use crate::{Layout, json_line};

/// The CSV layout's columns.
const CSV_COLUMNS: [&str; 11] = [
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

/// What the header says.
pub struct Header<'a> {
    /// The model chosen and how.
    pub choice: &'a ModelChoice,
    /// The common metrics are evaluated too.
    pub common: bool,
    /// The log's name.
    pub log: &'a str,
    /// The log (its first blocks when `streamed`).
    pub log_data: &'a PerfLog,
    /// `log_data` holds the first blocks only; the rest is read as it is printed.
    pub streamed: bool,
    /// The literals the selected metrics read.
    pub used: &'a [Literal],
}

/// The tables a log's metrics come from, as notes name them: `x86/icelake or the common
/// metrics`, or `the common metrics` without a CPU model.
pub fn log_where(model: Option<&'static Model>) -> String {
    let common = tmetric_catalog::common();
    match model {
        Some(model) if !std::ptr::eq(model, common) => Searched(&[model, common]).to_string(),
        _ => Searched(&[common]).to_string(),
    }
}

/// How the model was chosen, as the header (and JSON's `model_source`) says it.
pub fn how_text(how: &How) -> String {
    let text = how_text_of(how);
    // Another vintage than perf 6.12's: chosen with --perf-version or inferred from the log.
    let v = tmetric_catalog::vintage();
    if std::ptr::eq(v, tmetric_catalog::base_vintage()) {
        text
    } else {
        format!("{text}; perf {}'s vendor tables", v.version)
    }
}

fn how_text_of(how: &How) -> String {
    match how {
        How::Given { .. } => "given with --model".into(),
        How::Cpuid(cpuid) => format!("for cpuid {cpuid}"),
        How::Inferred(Inference::Model { score, next, rows, events, .. }) => {
            let next = next.map(|(m, s)| format!("; next best {} ({})", m.path(), s.brief()));
            format!("inferred: {}{}", score.describe(*rows, *events), next.unwrap_or_default())
        }
        How::Inferred(Inference::GenericOnly) => "no CPU model: the log has only generic events (pass --model or --cpuid for a model's metrics)".into(),
        How::Inferred(Inference::SoftwareOnly { .. }) => "no CPU model: the log has only software events and tracepoints (pass --model or --cpuid for a model's metrics)".into(),
        How::Inferred(Inference::Agreeing {
            model, score, compared, rows, events, stands_for, ..
        }) => {
            format!(
                "inferred: they explain it equally well ({}) and agree: each computes the same value for every metric perf printed ({compared} values compared); {}",
                score.describe(*rows, *events),
                stands_for_text(model, stands_for)
            )
        }
        How::Inferred(other) => format!("{other:?}"),
    }
}

/// Why `model` stands for the models that agree with it: `x86/sapphirerapids stands for
/// them: it is in perf's vendor data since 6.1, x86/emeraldrapids since 6.12`.
fn stands_for_text(model: &Model, why: &StandsFor) -> String {
    let mut text = format!("{} stands for them: ", model.path());
    if !why.hybrid.is_empty() {
        text.push_str(&format!(
            "the events of {} are on cpu_core and cpu_atom, which the log's rows do not name; ",
            or_list(&why.hybrid).replace(" or ", " and ")
        ));
    }
    text.push_str(&format!("it is in perf's vendor data since {}", why.since));
    if why.since_oldest_stored {
        text.push_str(" or earlier (the oldest vintage stored)");
    }
    if !why.as_old.is_empty() {
        let order = if why.mapfile_first {
            "perf's mapfile.csv lists it first"
        } else {
            "it comes first by name"
        };
        text.push_str(&format!(", as is {}, and {order}", or_list(&why.as_old)));
    }
    // The newer ones by vintage, oldest first: `x86/a and x86/b only since 6.1`.
    let mut newer: Vec<(&str, Vec<String>)> = Vec::new();
    for (m, since) in &why.newer {
        match newer.iter_mut().find(|(v, _)| v == since) {
            Some((_, names)) => names.push(m.path()),
            None => newer.push((since, vec![m.path()])),
        }
    }
    let newer: Vec<String> = newer
        .into_iter()
        .map(|(since, names)| match names.split_last() {
            Some((last, init)) if !init.is_empty() => {
                format!("{} and {last} only since {since}", init.join(", "))
            }
            _ => format!("{} only since {since}", names.join("")),
        })
        .collect();
    if !newer.is_empty() {
        let sep = if why.as_old.is_empty() { ", " } else { "; " };
        text.push_str(&format!("{sep}{}", newer.join(", ")));
    }
    text
}

/// `a`, `a or b`, `a, b or c`, `a, b, ... and 3 more` (models by `arch/name`).
pub fn or_list(models: &[&'static Model]) -> String {
    const SHOWN: usize = 8;
    let names: Vec<String> = models.iter().take(SHOWN).map(|m| m.path()).collect();
    let more = models.len().saturating_sub(SHOWN);
    match names.as_slice() {
        [] => String::new(),
        [one] if more == 0 => one.clone(),
        _ if more > 0 => format!("{} and {more} more", names.join(", ")),
        [init @ .., last] => format!("{} or {last}", init.join(", ")),
    }
}

/// The model part of the header: `x86/sapphirerapids`, or every model that agrees on every
/// value, the one used first.
fn models_text(choice: &ModelChoice) -> Option<String> {
    let model = choice.model?;
    if choice.agreeing.is_empty() {
        return Some(model.path());
    }
    let mut all = vec![model];
    all.extend(&choice.agreeing);
    Some(format!("{} (they agree on every value here)", or_list(&all)))
}

#[derive(Serialize)]
struct HeaderJson<'a> {
    model: String,
    /// Every model that explains the log as well as `model` and agrees with it on every value
    /// shown, `model` first; empty when `model` alone explains it best.
    agreeing: Vec<String>,
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

/// An input read from a row of another name that counts the same event.
#[derive(Debug, Clone, PartialEq, Serialize)]
struct ByEncodingJson {
    input: String,
    row: String,
    encoding: String,
}

/// Writes the header and one line per outcome in the chosen layout.
pub struct LogPrinter<'a> {
    out: &'a mut dyn Write,
    /// `stat`'s layouts: text for people, `-x SEP` (`#` header lines, then one line of
    /// fields per metric) or JSON lines.
    format: Layout,
    /// Text only: colour escapes paint values by their thresholds.
    colour: bool,
    /// To say which flag sets a literal a metric could not do without.
    literals: Literals,
    /// Width of the aggregation id column.
    aggr_width: usize,
    runs: usize,
    /// The last block's line prefix and what it was made from: every metric of a block
    /// starts with the same timestamp and id, and formatting the time for each line was a
    /// tenth of a long log's run time.
    last_prefix: RefCell<Option<(PrefixKey, String)>>,
}

/// A block's interval (as bits) and aggregation id and CPU count.
type PrefixKey = (Option<u64>, Option<(String, Option<usize>)>);

/// The explanations of one outcome, for every layout.
#[derive(Debug, Default)]
struct Notes {
    /// Why the metric has no value, naming the flag for an unknown literal.
    error: Option<String>,
    /// (index, line of the first row, where perf printed the metric) per group read.
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

impl Notes {
    fn of(
        model: &Model,
        block: Option<&Block>,
        outcome: &BlockOutcome,
        literals: &Literals,
    ) -> Notes {
        let mut notes = Notes::default();
        let text = |slot: u16| outcome.input_text(model, slot).into_owned();
        let metric_group = block.and_then(|b| outcome.printed_group(b, model));
        let metric = outcome.result.metric;
        notes.error = outcome.result.failure.map(|f| explain_failure(model, f, metric, literals));
        notes.why = outcome.why.as_ref().map(|why: &Why| {
            let absent = "the log has no row for";
            why_text(model, why, outcome.result.value, literals, absent, outcome.param)
        });
        for input in outcome.inputs.iter().filter(|i| i.expr) {
            // Only a note names the input: most are counted rows, which need no name.
            let id = || text(input.slot);
            match &input.source {
                InputSource::Row { running_pct, time, .. } => {
                    if !time && let Some(pct) = running_pct.filter(|p| *p < 100.0) {
                        notes.running_pct = Some(notes.running_pct.map_or(pct, |m| m.min(pct)));
                    }
                }
                InputSource::NotCounted { .. } => notes.not_counted.push(id()),
                InputSource::NotSupported { .. } => notes.not_supported.push(id()),
                InputSource::LatencyZero => notes.latency_zero.push(id()),
                InputSource::Missing => notes.missing.push(id()),
                InputSource::Ambiguous { lines } => notes.unusable.push(format!(
                    "{}: rows on several core PMUs (lines {})",
                    id(),
                    join_lines(lines)
                )),
                InputSource::Unscaled { unit, lines } => notes.unusable.push(format!(
                    "{}: printed in {unit} at line {}, and its scale factor is unknown",
                    id(),
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

/// `1`, `0` or empty.
fn flag(value: Option<bool>) -> &'static str {
    match value {
        Some(true) => "1",
        Some(false) => "0",
        None => "",
    }
}

impl<'a> LogPrinter<'a> {
    /// A printer to `out` in `format` (`colour`: paint text values by their thresholds) for
    /// the blocks of `log` (the aggregation column is as wide as its widest id); `literals`
    /// are those evaluated with.
    pub fn new(
        out: &'a mut dyn Write,
        format: Layout,
        colour: bool,
        log: &PerfLog,
        literals: &Literals,
    ) -> LogPrinter<'a> {
        let aggr_width = log
            .blocks
            .iter()
            .filter_map(|b| b.aggr.as_ref())
            .map(|a| a.id.len())
            .max()
            .unwrap_or(0);
        LogPrinter {
            out,
            format,
            colour,
            literals: literals.clone(),
            aggr_width,
            runs: log.runs.len(),
            last_prefix: RefCell::default(),
        }
    }

    /// The header: a JSON `{"assumptions": ...}` line, or `#` lines.
    pub fn header(&mut self, header: &Header) -> io::Result<()> {
        let data = header.log_data;
        let layout = match &data.layout {
            LogLayout::Std => "text".to_string(),
            LogLayout::Csv(sep) => format!("-x {sep}"),
            LogLayout::Json => "-j".to_string(),
        };
        let blocks = data.blocks.len();
        let blocks_json = (!header.streamed).then_some(blocks);
        let blocks = if header.streamed {
            format!("read block by block, metrics chosen from its first {blocks} block(s)")
        } else {
            format!("{blocks} block(s)")
        };
        let numbers = data.numbers.describe();
        let common = tmetric_catalog::common();
        let how = how_text(&header.choice.how);
        let model = header.choice.model;
        if self.format == Layout::Json {
            let agreeing = match model {
                Some(model) if !header.choice.agreeing.is_empty() => std::iter::once(model)
                    .chain(header.choice.agreeing.iter().copied())
                    .map(Model::path)
                    .collect(),
                _ => Vec::new(),
            };
            let assumptions = HeaderJson {
                model: model.map_or_else(|| common.path(), Model::path),
                agreeing,
                model_source: &how,
                common: header.common,
                log: header.log,
                layout,
                blocks: blocks_json,
                numbers,
                literals: literals_json(&self.literals, header.used),
            };
            return json_line(self.out, &HeaderLine { assumptions });
        }
        let models = match (model, models_text(header.choice)) {
            (Some(model), Some(text)) if !std::ptr::eq(model, common) => format!("{text} + common"),
            _ => "common".to_string(),
        };
        let numbers = numbers.map_or(String::new(), |n| format!("; numbers: {n}"));
        writeln!(
            self.out,
            "# tmetric: {models} metrics ({how}) from {} (perf stat {layout} layout, {blocks}{numbers})",
            header.log
        )?;
        writeln!(
            self.out,
            "# assumed, not measured: {}",
            describe_literals(&self.literals, header.used)
        )?;
        if let Layout::Csv(sep) = &self.format {
            writeln!(self.out, "# columns: {}", CSV_COLUMNS.join(sep))?;
        }
        Ok(())
    }

    /// A comment naming the run, for logs holding several `perf stat` runs (`runs`: how many
    /// are known so far, when the log is read block by block; `info`: this one).
    pub fn run_header(&mut self, runs: usize, info: Option<&Run>, run: usize) -> io::Result<()> {
        if self.runs.max(runs) < 2 || self.format == Layout::Json {
            return Ok(());
        }
        let Some(info) = info else { return Ok(()) };
        let what = info.command.as_deref().map_or(String::new(), |c| format!(" for '{c}'"));
        let line = info.header_line.map_or(String::new(), |l| format!(" (line {l})"));
        writeln!(self.out, "# run {}: performance counter stats{what}{line}", run + 1)
    }

    /// One metric of `model` (`common`: the common table beside a CPU model) in one block;
    /// `block` is `None` for a metric no block has inputs for, and `unplaced` says why.
    pub fn metric(
        &mut self,
        model: &'static Model,
        common: bool,
        block: Option<&Block>,
        outcome: &BlockOutcome,
        unplaced: &str,
        bottleneck: bool,
    ) -> io::Result<()> {
        let notes = Notes::of(model, block, outcome, &self.literals);
        match &self.format {
            Layout::Json => self.metric_json(model, block, outcome, notes, bottleneck),
            Layout::Std => {
                let colour = self.colour;
                let mut line =
                    self.metric_text(model, common, block, outcome, &notes, bottleneck, colour);
                if block.is_none() {
                    line.push_str("  (");
                    line.push_str(unplaced);
                    line.push(')');
                }
                line.push('\n');
                self.out.write_all(line.as_bytes())
            }
            Layout::Csv(sep) => {
                let line = metric_csv(model, block, outcome, &notes, sep);
                writeln!(self.out, "{line}")
            }
        }
    }

    fn metric_json(
        &mut self,
        model: &'static Model,
        block: Option<&Block>,
        outcome: &BlockOutcome,
        notes: Notes,
        bottleneck: bool,
    ) -> io::Result<()> {
        let m = model.metric(outcome.result.metric);
        let group = notes
            .groups
            .iter()
            .map(|&(index, line, metric_group)| GroupJson { index, line, metric_group })
            .collect();
        let row = MetricJson {
            run: block.map_or(0, |b| b.run) + 1,
            interval: block.and_then(|b| b.interval),
            aggr: block.and_then(|b| b.aggr.as_ref()).map(|a| a.id.as_str()),
            metric: &outcome.name(model),
            pmu: model.str(m.pmu),
            value: outcome.scaled(model).and_then(json_number),
            unit: model.str(m.unit),
            threshold: outcome.result.threshold,
            bottleneck,
            group,
            missing: notes.missing,
            not_supported: notes.not_supported,
            not_counted: notes.not_counted,
            latency_zero: notes.latency_zero,
            unusable: notes.unusable,
            by_encoding: notes.by_encoding,
            error: notes.error,
            why: notes.why,
            running_pct: notes.running_pct,
            perf: outcome.printed.as_ref().map(|p| PerfJson {
                printed: &p.text,
                label: p.label.as_deref(),
                agrees: outcome.check,
            }),
            model: model.path(),
        };
        json_line(self.out, &row)
    }

    #[allow(clippy::too_many_arguments)]
    fn metric_text(
        &self,
        model: &'static Model,
        common: bool,
        block: Option<&Block>,
        outcome: &BlockOutcome,
        notes: &Notes,
        bottleneck: bool,
        colour: bool,
    ) -> String {
        let mut line = String::with_capacity(128);
        self.push_prefix(&mut line, block);
        let result = &outcome.result;
        let scaled = outcome.scaled(model);
        push_metric_head(
            &mut line,
            model,
            outcome.root(),
            scaled,
            result.threshold,
            bottleneck,
            common,
            colour,
        );
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
            && let Some(p) = &outcome.printed
        {
            let label = p.label.as_deref().map_or(String::new(), |l| format!(" {l}"));
            line.push_str(&format!("  (perf printed {}{label})", p.text));
        }
        line
    }

    /// One built-in of one block, in the layout of the metric lines.
    pub fn builtin(&mut self, block: &Block, o: &BuiltinOutcome) -> io::Result<()> {
        let value = o.value.as_ref().ok().copied();
        let (missing, blank): (Vec<String>, Option<&str>) = match &o.value {
            Err(NoValue::Missing(m)) => (m.iter().map(|s| display_input(s)).collect(), None),
            Err(NoValue::Blank(why)) => (Vec::new(), Some(*why)),
            Ok(_) | Err(NoValue::NotShown) => (Vec::new(), None),
        };
        let mut notes: Vec<String> = Vec::new();
        if !missing.is_empty() {
            notes.push(format!("missing: {}", missing.join(", ")));
        }
        if let Some(why) = blank {
            notes.push(format!("no value, as perf prints none: {why}"));
        }
        match &self.format {
            Layout::Json => builtin_json(self.out, block, o, value, missing, blank),
            Layout::Std => {
                let line = self.builtin_text(block, o, value, &notes);
                writeln!(self.out, "{line}")
            }
            Layout::Csv(sep) => {
                let line = builtin_csv(block, o, value, &notes, sep);
                writeln!(self.out, "{line}")
            }
        }
    }

    fn builtin_text(
        &self,
        block: &Block,
        o: &BuiltinOutcome,
        value: Option<f64>,
        notes: &[String],
    ) -> String {
        let b = o.builtin;
        let mut line = self.prefix(Some(block));
        let number = value.map_or(" ".repeat(8), |v| format!("{v:8.prec$}", prec = b.decimals));
        if b.unit.is_empty() {
            line.push_str(&format!("{number} {}", b.name));
        } else {
            line.push_str(&format!("{number} {}  {}", b.unit, b.name));
        }
        if !o.pmu.is_empty() && o.pmu != "cpu" {
            line.push_str(&format!("  [{}]", o.pmu));
        }
        line.push_str(&format!("  [perf built-in: {}, line {}]", o.label, o.carrier_line));
        if let Some(pct) = o.running_pct {
            line.push_str(&format!("  (multiplexed: ran {pct:.2}%)"));
        }
        for note in notes {
            line.push_str(&format!("  {note}"));
        }
        if o.agrees == Some(false)
            && let Some((text, _)) = &o.printed
        {
            line.push_str(&format!("  (perf printed {text} {})", o.label));
        }
        line
    }

    /// perf's row prefix: the `-I` timestamp and the aggregation id (with its CPU count).
    fn prefix(&self, block: Option<&Block>) -> String {
        let mut out = String::new();
        self.push_prefix(&mut out, block);
        out
    }

    /// [`LogPrinter::prefix`] appended to `out`; the last block's is kept, as every metric of
    /// a block has the same.
    fn push_prefix(&self, out: &mut String, block: Option<&Block>) {
        let Some(block) = block else { return };
        let same = |(interval, aggr): &PrefixKey| {
            *interval == block.interval.map(f64::to_bits)
                && match (aggr, &block.aggr) {
                    (None, None) => true,
                    (Some((id, cpus)), Some(a)) => {
                        *id == a.id && *cpus == a.cpus.map(|c| c as usize)
                    }
                    _ => false,
                }
        };
        if let Some((known, text)) = &*self.last_prefix.borrow()
            && same(known)
        {
            out.push_str(text);
            return;
        }
        let key: PrefixKey = (
            block.interval.map(f64::to_bits),
            block.aggr.as_ref().map(|a| (a.id.clone(), a.cpus.map(|c| c as usize))),
        );
        let prefix = self.format_prefix(block);
        out.push_str(&prefix);
        *self.last_prefix.borrow_mut() = Some((key, prefix));
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

    /// Flushes the output.
    pub fn finish(&mut self) -> io::Result<()> {
        self.out.flush()
    }
}

/// A metric's CSV line.
fn metric_csv(
    model: &Model,
    block: Option<&Block>,
    outcome: &BlockOutcome,
    notes: &Notes,
    sep: &str,
) -> String {
    let m = model.metric(outcome.result.metric);
    let value = match outcome.scaled(model) {
        Some(v) if v.is_finite() => perf_number(v, m.has_scale_unit).trim().to_string(),
        _ => String::new(),
    };
    let group: Vec<String> = notes.groups.iter().map(|g| g.1.to_string()).collect();
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
        outcome.name(model).into_owned(),
        if pmu == "default_core" { String::new() } else { pmu.to_string() },
        flag(outcome.result.threshold).to_string(),
        group.join("+"),
        outcome.printed.as_ref().map_or(String::new(), |p| p.text.clone()),
        flag(outcome.check).to_string(),
        texts.join("; "),
    ];
    csv_line(&fields, sep)
}

/// `fields` joined by `sep`, the separator replaced by a space inside each. An empty
/// separator (perf's `-x ''` glues the fields) has nothing to replace: `str::replace` with an
/// empty pattern would put a space between every character.
fn csv_line(fields: &[String], sep: &str) -> String {
    if sep.is_empty() {
        return fields.concat();
    }
    let fields: Vec<String> = fields.iter().map(|f| f.replace(sep, " ")).collect();
    fields.join(sep)
}

/// A built-in's JSON line.
fn builtin_json(
    out: &mut dyn Write,
    block: &Block,
    o: &BuiltinOutcome,
    value: Option<f64>,
    missing: Vec<String>,
    blank: Option<&str>,
) -> io::Result<()> {
    let b = o.builtin;
    let index = block.rows.iter().find(|r| r.line == o.carrier_line).map_or(0, |r| r.group);
    let row = MetricJson {
        run: block.run + 1,
        interval: block.interval,
        aggr: block.aggr.as_ref().map(|a| a.id.as_str()),
        metric: b.name,
        pmu: &o.pmu,
        value: value.and_then(json_number),
        unit: b.unit,
        threshold: None,
        bottleneck: false,
        group: vec![GroupJson { index, line: o.carrier_line, metric_group: o.printed.is_some() }],
        missing,
        not_supported: Vec::new(),
        not_counted: Vec::new(),
        latency_zero: Vec::new(),
        unusable: Vec::new(),
        by_encoding: Vec::new(),
        error: blank.map(str::to_string),
        why: None,
        running_pct: o.running_pct,
        perf: o.printed.as_ref().map(|(text, _)| PerfJson {
            printed: text,
            label: Some(o.label),
            agrees: o.agrees,
        }),
        model: "perf built-in".to_string(),
    };
    json_line(out, &row)
}

/// A built-in's CSV line.
fn builtin_csv(
    block: &Block,
    o: &BuiltinOutcome,
    value: Option<f64>,
    notes: &[String],
    sep: &str,
) -> String {
    let b = o.builtin;
    let mut all = vec![format!("perf built-in: {}", o.label)];
    all.extend(notes.iter().cloned());
    let fields = [
        block.interval.map_or(String::new(), |t| format!("{t:.9}")),
        block.aggr.as_ref().map_or(String::new(), |a| a.id.clone()),
        value.map_or(String::new(), |v| format!("{v:.prec$}", prec = b.decimals)),
        b.unit.to_string(),
        b.name.to_string(),
        if o.pmu == "cpu" { String::new() } else { o.pmu.clone() },
        String::new(),
        o.carrier_line.to_string(),
        o.printed.as_ref().map_or(String::new(), |(t, _)| t.clone()),
        flag(o.agrees).to_string(),
        all.join("; "),
    ];
    csv_line(&fields, sep)
}

fn display_input(input: &str) -> String {
    if input == NSECS { "task-clock or cpu-clock".to_string() } else { input.to_string() }
}

/// `group of line 12, where perf printed it` or `groups of lines 4 and 12`.
fn group_text(groups: &[(usize, usize, bool)], outcome: &BlockOutcome) -> String {
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
