//! `tmetric eval`'s layouts: a model's metrics over a counts file (this module) or a perf stat
//! log ([`log`]), one line per metric as perf prints a metric after `#` (value, unit, name,
//! `[pmu]`, `<==` on the TMA bottleneck path) followed by why a value is missing or `nan`, or
//! one JSON object per line; and the wording of the notes and warnings around them, which the
//! front end writes to standard error. The data comes from `tmetric_offline::counts` and
//! `tmetric_offline::perflog`; nothing here evaluates.
//!
//! Every literal a metric reads is either given or a stated default, and the assumptions are
//! printed with the results, so an assumption is never mistaken for a measurement: a literal is
//! always worded with where its value came from and the flag that sets it ([`flag_for`]).

pub mod log;

use std::borrow::Cow;
use std::io::{self, Write};

use serde::Serialize;
use tmetric_catalog::Model;
use tmetric_engine::{Counting, LiteralSource, Literals, Select, Why};
use tmetric_model::{Fail, Literal};
use tmetric_offline::counts::eval::{Evaluated, Skipped, UNSELECTED_SHOWN, Unused};
use tmetric_offline::perflog::{self, Root};

use crate::json_line;
use crate::num::{json_number, plain_number, push_perf_number};

/// The `eval` flag that sets a literal, as messages name it.
pub fn flag_for(literal: Literal) -> &'static str {
    match literal {
        Literal::NumCpus | Literal::NumCpusOnline => "--cpus N",
        Literal::NumCores => "--cores N",
        Literal::NumDies => "--dies N",
        Literal::NumPackages => "--packages N",
        Literal::SmtOn => "--smt on|off",
        Literal::CoreWide => "--core-wide on|off",
        Literal::Slots => "--slots N",
        Literal::HasPmem => "--literal has_pmem=1",
        Literal::SystemTscFreq => "--tsc-freq HZ",
        Literal::TargetCpu => "--literal target_cpu=1",
    }
}

/// Where a literal's value came from, as the header words it.
pub fn source_word(source: LiteralSource) -> String {
    match source {
        LiteralSource::Flag => "flag".into(),
        LiteralSource::File => "counts file".into(),
        LiteralSource::Default => "default".into(),
        LiteralSource::Derived(from) => format!("derived from #{}", from.name()),
        LiteralSource::Inferred(metric, line) => {
            format!("inferred from {metric} printed on line {line}")
        }
        LiteralSource::Vendor(cpu) => format!("vendor default for {cpu}"),
        LiteralSource::Unknown => "unknown".into(),
        LiteralSource::Counting(Counting::SystemWide(said)) => {
            format!("counted system-wide, as {said} says")
        }
        LiteralSource::Counting(Counting::NotSystemWide(said)) => {
            format!("not counted system-wide, as {said} says")
        }
        LiteralSource::Counting(Counting::Unsaid) => {
            "assumed counted per task: nothing says whether it was system-wide (-a)".into()
        }
    }
}

/// `#smt_on=1 (default; set with --smt on|off)` for each of `used`, for the assumptions line;
/// `none` without any.
pub fn describe_literals(literals: &Literals, used: &[Literal]) -> String {
    let parts: Vec<String> = used
        .iter()
        .map(|&lit| {
            let source = literals.source(lit);
            let value = plain_number(literals.get(lit));
            match source {
                LiteralSource::Unknown => {
                    format!("#{} unknown (pass {})", lit.name(), flag_for(lit))
                }
                LiteralSource::Default | LiteralSource::Derived(_) | LiteralSource::Counting(_) => {
                    format!(
                        "#{}={value} ({}; set with {})",
                        lit.name(),
                        source_word(source),
                        flag_for(lit)
                    )
                }
                _ => format!("#{}={value} ({})", lit.name(), source_word(source)),
            }
        })
        .collect();
    if parts.is_empty() { "none".to_string() } else { parts.join(", ") }
}

/// A literal of the JSON assumptions line.
#[derive(Debug, Clone, Serialize)]
pub struct LiteralJson {
    /// Its name, without `#`.
    pub literal: &'static str,
    /// Its value; `null` when unknown.
    pub value: Option<f64>,
    /// Where the value came from ([`source_word`]).
    pub source: String,
}

/// `used` as JSON objects.
pub fn literals_json(literals: &Literals, used: &[Literal]) -> Vec<LiteralJson> {
    used.iter()
        .map(|&lit| LiteralJson {
            literal: lit.name(),
            value: json_number(literals.get(lit)),
            source: source_word(literals.source(lit)),
        })
        .collect()
}

/// `eval --expr`'s result as a JSON line.
#[derive(Serialize)]
struct ExprJson<'a> {
    expr: &'a str,
    value: Option<f64>,
    missing: &'a [String],
    literals: Vec<LiteralJson>,
}

/// `eval --expr`'s value for expression `text`: the number alone, or with `json` one line
/// with the identifiers that had no value (`missing`) and the literals it read (`used`).
pub fn expr_value(
    out: &mut dyn Write,
    text: &str,
    value: f64,
    missing: &[String],
    literals: &Literals,
    used: &[Literal],
    json: bool,
) -> io::Result<()> {
    if json {
        let literals = literals_json(literals, used);
        json_line(out, &ExprJson { expr: text, value: json_number(value), missing, literals })
    } else {
        writeln!(out, "{}", plain_number(value))
    }
}

/// The warning for `eval --expr` identifiers without a value, if any.
pub fn expr_missing_warning(missing: &[String]) -> Option<String> {
    if missing.is_empty() {
        return None;
    }
    let names: Vec<String> = missing.iter().map(|m| format!("`{m}`")).collect();
    let verb = if names.len() == 1 { "it reads" } else { "they read" };
    Some(format!("no value for {}; {verb} as NaN (pass --var NAME=VALUE)", names.join(", ")))
}

/// Why a metric is `nan` or 0 although every input it reads has a value (`why`, from
/// `MetricEval::explain`), worded for a front end without the machine: a literal with where its
/// value came from and the flag that sets it, a `has_event()` probe with what `absent` says of
/// an event the input has no value for, inputs and metrics that are 0 in a division by zero
/// (inputs named with `?` as `param`, for an instance of a metric with the runtime parameter).
pub fn why_text(
    model: &Model,
    why: &Why,
    value: f64,
    literals: &Literals,
    absent: &str,
    param: Option<u32>,
) -> String {
    let shown = if value.is_nan() { "nan" } else { "0" };
    match why {
        Why::Literal(lit, held) => {
            let source = literals.source(*lit);
            let how = match source {
                LiteralSource::Unknown => format!("pass {}", flag_for(*lit)),
                LiteralSource::Default | LiteralSource::Derived(_) | LiteralSource::Counting(_) => {
                    format!("{}; set with {}", source_word(source), flag_for(*lit))
                }
                _ => source_word(source),
            };
            let held = if held.is_nan() { "unknown".to_string() } else { plain_number(*held) };
            format!("{shown} because #{} is {held} ({how})", lit.name())
        }
        Why::Probe { call: "has_event", arg, .. } => {
            format!("{shown} because has_event({arg}) is false: {absent} `{arg}`")
        }
        Why::Probe { call, arg, value: held } if held.is_nan() => format!(
            "{shown} because {call}({arg}) is unknown: which CPU the counts come from is not known"
        ),
        Why::Probe { call, arg, .. } => {
            format!("{shown} because {call}({arg}) is false: the counts come from another CPU")
        }
        Why::DivisionByZero { inputs, metrics } => {
            let mut zeros: Vec<Cow<str>> =
                inputs.iter().map(|&s| perflog::param::id_text(model, s, param)).collect();
            zeros.extend(metrics.iter().map(|&m| Cow::Borrowed(model.str(model.metric(m).name))));
            let verb = if zeros.len() == 1 { "is" } else { "are" };
            format!(
                "nan (a division by zero): every input has a value, and {} {verb} 0",
                zeros.join(", ")
            )
        }
    }
}

/// Why metric `metric` has no value, naming the flag for an unknown literal.
pub fn explain_failure(model: &Model, fail: Fail, metric: usize, literals: &Literals) -> String {
    match fail {
        Fail::Literal => {
            let unknown: Vec<String> = model
                .literals_of(&[metric])
                .into_iter()
                .filter(|lit| literals.get(*lit).is_nan())
                .map(|lit| format!("#{} is unknown: pass {}", lit.name(), flag_for(lit)))
                .collect();
            if unknown.is_empty() { fail.to_string() } else { unknown.join("; ") }
        }
        Fail::RemainderByZero => fail.to_string(),
    }
}

/// A metric as perf prints it after `#`, without the notes that follow: the value (blank
/// when `scaled` is `None`, coloured by `threshold`), the unit and name, `[pmu]` off the
/// default core PMU, `[common]` for the common table and `<==` on the bottleneck path. An
/// instance of a metric with the runtime parameter is named as perf names it (`NAME_1`).
pub fn metric_head(
    model: &Model,
    root: Root,
    scaled: Option<f64>,
    threshold: Option<bool>,
    bottleneck: bool,
    common: bool,
    colour: bool,
) -> String {
    let mut line = String::new();
    push_metric_head(&mut line, model, root, scaled, threshold, bottleneck, common, colour);
    line
}

/// [`metric_head`] appended to `line`: `eval --from-perf` prints one for every metric of
/// every block, so the number and names are written in place, not through strings of their own.
#[allow(clippy::too_many_arguments)]
pub fn push_metric_head(
    line: &mut String,
    model: &Model,
    root: Root,
    scaled: Option<f64>,
    threshold: Option<bool>,
    bottleneck: bool,
    common: bool,
    colour: bool,
) {
    use std::fmt::Write as _;
    let m = model.metric(root.metric);
    let (name, pmu, unit) = (root.name(model), model.str(m.pmu), model.str(m.unit));
    match scaled {
        None => line.push_str("        "),
        Some(value) => {
            let paint = crate::paint_codes(threshold, colour);
            if let Some((on, _)) = paint {
                line.push_str(on);
            }
            push_perf_number(line, value, m.has_scale_unit);
            if let Some((_, off)) = paint {
                line.push_str(off);
            }
        }
    }
    line.push(' ');
    if m.has_scale_unit && !unit.is_empty() {
        line.push_str(unit);
        line.push_str("  ");
    }
    line.push_str(&name);
    if !pmu.is_empty() && pmu != "default_core" {
        let _ = write!(line, "  [{pmu}]");
    }
    if common {
        line.push_str("  [common]");
    }
    if bottleneck {
        line.push_str("  <==");
    }
}

/// `a, b, c and 5 more`.
pub fn first_names(names: &[String]) -> String {
    const SHOWN: usize = 8;
    let mut text = names.iter().take(SHOWN).cloned().collect::<Vec<_>>().join(", ");
    if names.len() > SHOWN {
        text.push_str(&format!(" and {} more", names.len() - SHOWN));
    }
    text
}

/// The tables of a counts file's evaluation as notes name them: `x86/skylake or the common
/// metrics`, or the one model.
pub fn counts_where(models: &[&'static Model]) -> String {
    match models {
        [model, _, ..] => format!("{} or the common metrics", model.path()),
        [model] => model.path(),
        [] => String::new(),
    }
}

/// The assumptions note of `eval --counts` (standard error, text layout):
/// `x86/skylake + common from FILE; literals used: ...`.
pub fn counts_assumptions(
    models: &[&'static Model],
    path: &str,
    literals: &Literals,
    used: &[Literal],
) -> String {
    let counted = match models {
        [model, _, ..] => format!("{} + common", model.path()),
        [model] => model.path(),
        [] => String::new(),
    };
    format!("{counted} from {path}; literals used: {}", describe_literals(literals, used))
}

/// What the selection without -M left out of a counts file's metrics (`where_`: the tables,
/// `path`: the file), one note each.
pub fn skipped_notes(skipped: &Skipped, where_: &str, path: &str) -> Vec<String> {
    let mut notes = Vec::new();
    if !skipped.partial.is_empty() {
        notes.push(format!(
            "not shown: {} metrics of {where_} with only some inputs in {path} ({}); name them with -M to see what is missing",
            skipped.partial.len(),
            first_names(&skipped.partial)
        ));
    }
    if !skipped.literal.is_empty() {
        notes.push(format!(
            "not shown: {} metrics of {where_} that read unknown literals ({}); name them with -M to see which",
            skipped.literal.len(),
            first_names(&skipped.literal)
        ));
    }
    if skipped.absent > 0 {
        notes.push(format!(
            "not shown: {} metrics of {where_} with none of their inputs in {path}",
            skipped.absent
        ));
    }
    notes
}

/// The warnings about keys that feed no selected metric, in order.
pub fn unused_warnings(unused: &Unused, where_: &str) -> Vec<String> {
    let quote = tmetric_text::quote;
    let mut out: Vec<String> = unused
        .unknown
        .iter()
        .map(|key| format!("ignored: {} is not an input of any metric of {where_}", quote(key)))
        .collect();
    for key in &unused.source_counts {
        out.push(format!(
            "ignored: source_count of `{key}`: it is not an input of any metric of {where_}"
        ));
    }
    for key in &unused.aggr_nrs {
        out.push(format!(
            "ignored: aggr_nr of `{key}`: it is not an input of any metric of {where_}"
        ));
    }
    if unused.unknown_count > unused.unknown.len() {
        out.push(format!(
            "ignored: ... and {} more keys that are not inputs of any metric of {where_}",
            unused.unknown_count - unused.unknown.len()
        ));
    }
    if unused.unselected_count > 0 {
        let shown: Vec<String> = unused.unselected.iter().map(|k| quote(k)).collect();
        let more = unused.unselected_count.saturating_sub(UNSELECTED_SHOWN);
        let more = if more > 0 { format!(" and {more} more") } else { String::new() };
        let verb = if unused.unselected_count == 1 { "is not an input" } else { "are not inputs" };
        out.push(format!(
            "ignored: {}{more} {verb} of any selected metric of {where_}",
            shown.join(", ")
        ));
    }
    out
}

/// perf would know how many uncore boxes were merged into a count; a single key does not
/// say, so `source_count()` of input `slot` reads 1 unless the file says otherwise.
pub fn source_count_warning(model: &Model, slot: u16) -> String {
    let id = &model.ids[slot as usize];
    let (text, pmu) = (model.str(id.text), model.str(id.pmu));
    format!(
        "assuming source_count({text}) = 1: give per-instance keys (`{pmu}_0/{text}/`, ...) or \"source_count\": {{\"{text}\": N}}"
    )
}

/// perf counts how many counters it summed into a value (each uncore box once per CPU it
/// is read on); a counts file says it only in its `aggr_nr` object, so `aggr_nr()` of input
/// `slot` reads `assumed`, the instance keys summed.
pub fn aggr_nr_warning(model: &Model, slot: u16, assumed: f64) -> String {
    let text = model.str(model.ids[slot as usize].text);
    format!(
        "assuming aggr_nr({text}) = {assumed} (the instance keys summed): give \"aggr_nr\": {{\"{text}\": N}}, the counters perf summed (each box once per CPU it was read on: under -a, boxes times sockets)"
    )
}

#[derive(Serialize)]
struct AssumptionsJson<'a> {
    model: String,
    /// The common table's metrics were considered too.
    common: bool,
    counts: &'a str,
    literals: Vec<LiteralJson>,
}

#[derive(Serialize)]
struct AssumptionsLine<'a> {
    assumptions: AssumptionsJson<'a>,
}

#[derive(Serialize)]
struct MetricJson<'a> {
    metric: &'a str,
    pmu: &'a str,
    value: Option<f64>,
    unit: &'a str,
    threshold: Option<bool>,
    /// On the TMA bottleneck path (`engine::view::tma_tree`), which text marks `<==`.
    bottleneck: bool,
    missing: Vec<&'a str>,
    error: Option<String>,
    /// Why the value is `nan` or 0 although every input has a value (a literal, a probe, a
    /// division by zero).
    why: Option<String>,
    model: String,
}

/// Prints the metrics of `eval --counts`, perf-like or as JSON lines.
pub struct CountsPrinter<'a> {
    out: &'a mut dyn Write,
    literals: &'a Literals,
    json: bool,
    colour: bool,
}

impl<'a> CountsPrinter<'a> {
    /// A printer to `out`; `literals` are those evaluated with (for the flags a failure
    /// names); `colour` applies to the text layout only.
    pub fn new(
        out: &'a mut dyn Write,
        literals: &'a Literals,
        json: bool,
        colour: bool,
    ) -> CountsPrinter<'a> {
        CountsPrinter { out, literals, json, colour: colour && !json }
    }

    /// The JSON layout's first line, `{"assumptions": ...}`; nothing in the text layout
    /// (whose assumptions are a note, [`counts_assumptions`]).
    pub fn assumptions(
        &mut self,
        models: &[&'static Model],
        counts: &str,
        used: &[Literal],
    ) -> io::Result<()> {
        if !self.json {
            return Ok(());
        }
        let assumptions = AssumptionsJson {
            model: models.first().map_or_else(String::new, |m| m.path()),
            common: models.len() > 1,
            counts,
            literals: literals_json(self.literals, used),
        };
        json_line(self.out, &AssumptionsLine { assumptions })
    }

    /// One metric of `model` (`common`: the common table beside a CPU model).
    pub fn metric(&mut self, model: &Model, common: bool, evaluated: &Evaluated) -> io::Result<()> {
        let result = &evaluated.result;
        let metric = model.metric(result.metric);
        let missing: Vec<&str> =
            result.missing.iter().map(|&s| model.str(model.ids[s as usize].text)).collect();
        let error =
            result.failure.map(|fail| explain_failure(model, fail, result.metric, self.literals));
        let why = evaluated.why.as_ref().map(|why| {
            let absent = "the counts file gives no value for";
            why_text(model, why, result.value, self.literals, absent, None)
        });
        if self.json {
            let row = MetricJson {
                metric: model.str(metric.name),
                pmu: model.str(metric.pmu),
                value: if error.is_some() { None } else { json_number(result.scaled(model)) },
                unit: model.str(metric.unit),
                threshold: result.threshold,
                bottleneck: evaluated.bottleneck,
                missing,
                error,
                why,
                model: model.path(),
            };
            return json_line(self.out, &row);
        }
        let scaled = error.is_none().then(|| result.scaled(model));
        let mut line = metric_head(
            model,
            result.metric.into(),
            scaled,
            result.threshold,
            evaluated.bottleneck,
            common,
            self.colour,
        );
        if let Some(error) = error {
            line.push_str(&format!("  error: {error}"));
        } else if !missing.is_empty() {
            line.push_str(&format!("  missing: {}", missing.join(", ")));
        } else if let Some(why) = why {
            line.push_str(&format!("  why: {why}"));
        }
        writeln!(self.out, "{line}")
    }
}
