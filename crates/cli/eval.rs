//! `tmetric eval`: a model's compiled metrics over a counts file (or a `perf stat` log, in
//! `eval/from_perf.rs`), or an ad-hoc expression through the interpreter, printed perf-like or
//! as JSON lines. The literal flags, -M selection and metric layout here serve both inputs.
//!
//! Every literal a metric reads is either given (flag, counts file) or a stated default,
//! and the assumptions are printed with the results, so an assumption is never mistaken for
//! a measurement. Vendor metrics run as the generated functions of `tmetric_catalog`; which
//! literals and probes a metric reads comes from the catalogue's literal sets and call bits,
//! so the expression text is never scanned.

use std::collections::HashMap;
use std::io::Write;
use std::path::PathBuf;

use anyhow::{anyhow, bail};
use serde::Serialize;
use tmetric_catalog::Model;
use tmetric_catalog::catalog::id_calls;
use tmetric_engine::{Coverage, LiteralSource, Literals, MetricResult, Offline, Select};
use tmetric_expr::{Env, EvalError, Ident, caret_lines, normalize};
use tmetric_model::{Fail, Literal};

pub mod from_perf;

use crate::counts::{
    self, Assigned, CountsFile, SlotName, literal_named, literal_names, slot_matches,
};
use crate::models::{closest, examples, find_model, join_code};
use crate::output::{ColorChoice, json_line, json_number, paint, perf_number, plain_number};

const EVAL_HELP: &str = "\
COUNTS FILE (docs/counts-format.md):
  A JSON object. Either flat, {\"INST_RETIRED.ANY\": 123, \"duration_time\": 1.5, ...}, or
  {\"counts\": {...}, \"retire_latency\": {\"MEM_LOAD_RETIRED.L3_HIT\": 3.0},
   \"literals\": {\"smt_on\": 1, \"num_cpus\": 8}, \"source_count\": {\"UNC_CHA_CLOCKTICKS\": 60},
   \"duration_time\": 1.0, \"model\": \"x86/sapphirerapids\"}.
  Keys name events as perf prints them (`cpu_core/TOPDOWN.SLOTS/`, `cpu/UOPS_EXECUTED.THREAD,cmask=1/`,
  `msr/tsc/`, `topdown-retiring`) or as metric expressions do (`cpu_core@TOPDOWN.SLOTS@`, `TSC`), in any
  case, with or without a core PMU prefix; modifiers (`:k`, `/u`) make a different event; `EVENT:R` is a
  retire latency. `duration_time` is in seconds (`duration_time_ns` in nanoseconds). Values are numbers;
  null or \"<not supported>\" mean no value (NaN), \"<not counted>\" means 0. Numbered uncore instances
  (`uncore_imc_0/X/`, `uncore_imc_1/X/`) are summed.

LITERALS:
  Flags win over the counts file's `literals`; otherwise: #smt_on=1, #core_wide=0 (1 with --smt off),
  #has_pmem=0, #num_cpus_online=#num_cpus, #num_dies=#num_packages, #num_cores=#num_cpus_online with
  SMT off; every other literal is unknown, and a metric that reads it fails, naming the flag to pass.
  `has_event(X)` is 1 when the counts file gives X a value; `strcmp_cpuid_str(...)` is NaN.

OUTPUT:
  One line per metric, as perf prints it: the value (%8.1f with a ScaleUnit, else %8.2f), the unit and
  the name, `[pmu]` off the default core PMU, `<==` on the TMA bottleneck path (as `stat --tree` marks it:
  level by level the crossed node with the largest value; the value is red when its threshold is crossed),
  then `missing: EVENT, ...` for NaN, `error: ...` for a metric without a value, or `why: ...` for a
  NaN or 0 that a literal, a has_event()/strcmp_cpuid_str() probe or a division by zero decides. With
  --json: a first line {\"assumptions\": ...}, then one object per metric: metric, pmu, value (scaled,
  null for NaN), unit, threshold (true, false or null), bottleneck, missing, error, why, model.
  Without -M, the metrics whose inputs are all in the file are shown; the others are counted on stderr.

FROM A PERF STAT LOG (--from-perf FILE|-; docs/from-perf.md):
  Reads perf 5.x-6.x `perf stat` output in any layout (text, -x SEP, -j; -I, -A, --per-*, -r) and
  evaluates per block (interval x aggregation id), each metric from the rows of the group perf printed
  it in. A workload's own lines before, inside and after perf's blocks are skipped and counted on
  stderr; numbers in perf's locale (`4.595.014.128`, `2,155 GHz`) are read, and the header says which
  convention was assumed. perf's aliases (cs, faults, cpu-cycles, ...) are the events they stand for,
  and an input no row names is read from a row of the same encoding (said per line). Model: --model,
  else --cpuid, else inferred from the printed metrics and event names (models that tie and compute
  the same value for everything perf printed are used, and said; a tie that differs is an error
  listing the candidates); the common metrics are always added.
  Without -M: the metrics perf printed (else those whose inputs are all in the log), plus the common
  metrics whose inputs are there; partly covered metrics are summarised on stderr.
  `<not counted>` reads as 0 and `<not supported>` as NaN, as in perf, and both are named; a block
  where every input is `<not counted>` is skipped, as perf prints no metric there. A retire latency
  (`X:R`) without a row reads as 0 where perf printed the metric (perf without --record-tpebs), else it
  is missing. Where perf printed the metric, a value that differs at perf's printed precision is
  marked `(perf printed X)`. Output: `#` header lines (model and why, literals assumed), then the
  -I timestamp and aggregation id, the metric as above, `(group of line N ...)` when the block has
  several groups, and notes. --json: a first line {\"assumptions\": ...}, then objects with run,
  interval, aggr, metric, pmu, value, unit, threshold, group [{index, line, metric_group}], missing,
  not_supported, not_counted, latency_zero, unusable, by_encoding [{input, row, encoding}], error,
  why, running_pct, perf {printed, label, agrees}, model. -x SEP: `#` header lines, then interval, aggr, value, unit, metric, pmu, threshold
  (1/0/empty), group (first lines of the groups used, `+`-joined), perf_printed, perf_agrees, notes.";

/// Flags of `tmetric eval`.
#[derive(Debug, clap::Args)]
#[command(after_long_help = EVAL_HELP)]
pub struct EvalArgs {
    /// The model: `x86/sapphirerapids` or `sapphirerapids`; defaults to the counts file's `model`.
    #[arg(long, value_name = "MODEL")]
    model: Option<String>,
    /// The counts file (JSON; see --help or docs/counts-format.md).
    #[arg(long, value_name = "FILE")]
    counts: Option<PathBuf>,
    /// Metrics or metric groups to evaluate, as for `perf stat -M`; comma-separated, repeatable.
    #[arg(short = 'M', long = "metrics", value_name = "METRIC|GROUP,...", value_delimiter = ',')]
    metrics: Vec<String>,
    /// One JSON object per line.
    #[arg(short = 'j', long)]
    json: bool,
    /// `#smt_on` (default: on).
    #[arg(long, value_name = "on|off")]
    smt: Option<OnOff>,
    /// `#num_cpus` and `#num_cpus_online`.
    #[arg(long, value_name = "N")]
    cpus: Option<u32>,
    /// `#num_cores`.
    #[arg(long, value_name = "N")]
    cores: Option<u32>,
    /// `#num_packages`.
    #[arg(long, value_name = "N")]
    packages: Option<u32>,
    /// `#num_dies`.
    #[arg(long, value_name = "N")]
    dies: Option<u32>,
    /// `#system_tsc_freq`, in Hz.
    #[arg(long = "tsc-freq", value_name = "HZ")]
    tsc_freq: Option<f64>,
    /// `#core_wide`: whether counting covered whole cores (`perf stat -a`); default off with SMT on.
    #[arg(long = "core-wide", value_name = "on|off")]
    core_wide: Option<OnOff>,
    /// `#slots`: the core PMU's slots per cycle.
    #[arg(long, value_name = "N")]
    slots: Option<u32>,
    /// Any literal, e.g. `--literal has_pmem=1`; repeatable.
    #[arg(long = "literal", value_name = "NAME=VALUE")]
    literals: Vec<String>,
    /// A `perf stat` log (text, `-x SEP` or `-j` output; `-` reads standard input) to evaluate
    /// instead of a counts file; see --help.
    #[arg(long = "from-perf", value_name = "FILE|-", conflicts_with_all = ["counts", "expr"])]
    from_perf: Option<PathBuf>,
    /// With --from-perf: the cpuid of the machine the log came from (`GenuineIntel-6-AA-4`),
    /// to pick its model and answer `strcmp_cpuid_str()`.
    #[arg(long, value_name = "CPUID", requires = "from_perf")]
    cpuid: Option<String>,
    /// With --from-perf: CSV output with this separator (columns in --help).
    #[arg(
        short = 'x',
        long = "field-separator",
        value_name = "SEP",
        requires = "from_perf",
        conflicts_with = "json"
    )]
    separator: Option<String>,
    /// Evaluate this expression with perf's semantics instead of the model's metrics.
    #[arg(long, value_name = "EXPR", conflicts_with = "metrics")]
    expr: Option<String>,
    /// A value for an identifier of --expr (`--var INST_RETIRED.ANY=5e9`, `--var '#smt_on=1'`); repeatable.
    #[arg(long = "var", value_name = "NAME=VALUE", requires = "expr")]
    vars: Vec<String>,
    /// When to colour threshold states: auto (when standard output is a terminal), always or
    /// never.
    #[arg(long, value_enum, value_name = "WHEN", default_value = "auto")]
    color: ColorChoice,
}

/// `on` or `off`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum OnOff {
    /// 1.
    #[value(alias = "1", alias = "yes", alias = "true")]
    On,
    /// 0.
    #[value(alias = "0", alias = "no", alias = "false")]
    Off,
}

impl OnOff {
    fn value(self) -> f64 {
        match self {
            OnOff::On => 1.0,
            OnOff::Off => 0.0,
        }
    }
}

/// How the header words where a literal came from.
fn source_word(source: LiteralSource) -> String {
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
    }
}

/// Why a metric is `nan` or 0 although every input it reads has a value (`why`, from
/// [`Offline::explain`]), worded for a front end without the machine: a literal with where its
/// value came from and the flag that sets it, a `has_event()` probe with what `absent` says of
/// an event the input has no value for, inputs and metrics that are 0 in a division by zero.
pub fn why_text(
    model: &Model,
    why: &tmetric_engine::Why,
    value: f64,
    literals: &Literals,
    absent: &str,
) -> String {
    use tmetric_engine::Why;
    let shown = if value.is_nan() { "nan" } else { "0" };
    match why {
        Why::Literal(lit, held) => {
            let source = literals.source(*lit);
            let how = match source {
                LiteralSource::Unknown => format!("pass {}", flag_for(*lit)),
                LiteralSource::Default | LiteralSource::Derived(_) => {
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
            let mut zeros: Vec<&str> =
                inputs.iter().map(|&s| model.str(model.ids[s as usize].text)).collect();
            zeros.extend(metrics.iter().map(|&m| model.str(model.metrics[m].name)));
            let verb = if zeros.len() == 1 { "is" } else { "are" };
            format!(
                "nan (a division by zero): every input has a value, and {} {verb} 0",
                zeros.join(", ")
            )
        }
    }
}

/// The flag that sets a literal.
fn flag_for(literal: Literal) -> &'static str {
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
    }
}

/// Every literal's value: given by flags (`--smt`, `--literal`, `--var`), by the counts file,
/// else perf's defaults ([`Literals::apply_defaults`]); two different values for one literal
/// are an error naming both.
pub fn resolve_literals(
    args: &EvalArgs,
    file: Option<&CountsFile>,
    from_vars: &[(Literal, f64)],
) -> anyhow::Result<Literals> {
    let mut given: Vec<(Literal, f64, String)> = Vec::new();
    let mut flag = |literal: Literal, value: Option<f64>, name: &str| {
        if let Some(value) = value {
            given.push((literal, value, name.to_string()));
        }
    };
    flag(Literal::SmtOn, args.smt.map(OnOff::value), "--smt");
    flag(Literal::NumCpus, args.cpus.map(f64::from), "--cpus");
    flag(Literal::NumCpusOnline, args.cpus.map(f64::from), "--cpus");
    flag(Literal::NumCores, args.cores.map(f64::from), "--cores");
    flag(Literal::NumPackages, args.packages.map(f64::from), "--packages");
    flag(Literal::NumDies, args.dies.map(f64::from), "--dies");
    flag(Literal::SystemTscFreq, args.tsc_freq, "--tsc-freq");
    flag(Literal::CoreWide, args.core_wide.map(OnOff::value), "--core-wide");
    flag(Literal::Slots, args.slots.map(f64::from), "--slots");
    for text in &args.literals {
        let (name, value) = split_assignment(text, "--literal")?;
        let literal = literal_named(name).ok_or_else(|| {
            anyhow!(
                "--literal `{text}`: unknown literal `{name}`; expected one of {}",
                literal_names()
            )
        })?;
        given.push((literal, value, format!("--literal {name}")));
    }
    for &(literal, value) in from_vars {
        given.push((literal, value, format!("--var #{}", literal.name())));
    }

    let mut literals = Literals::default();
    let mut set_by: Vec<Option<String>> = vec![None; Literal::COUNT];
    for (literal, value, name) in given {
        let i = literal.index();
        if let Some(previous) = &set_by[i]
            && literals.get(literal).to_bits() != value.to_bits()
        {
            bail!(
                "#{} is given twice with different values ({previous} and {name})",
                literal.name()
            );
        }
        literals.set(literal, value, LiteralSource::Flag);
        set_by[i] = Some(name);
    }
    for &(literal, value) in file.map_or(&[][..], |f| &f.literals) {
        if matches!(literals.source(literal), LiteralSource::Unknown | LiteralSource::File) {
            literals.set(literal, value, LiteralSource::File);
        }
    }
    literals.apply_defaults();
    Ok(literals)
}

/// `#smt_on=1 (default)` for each of `used`, for the assumptions line.
fn describe_literals(literals: &Literals, used: &[Literal]) -> String {
    let parts: Vec<String> = used
        .iter()
        .map(|&lit| {
            let source = literals.source(lit);
            match source {
                LiteralSource::Unknown => {
                    format!("#{} unknown (pass {})", lit.name(), flag_for(lit))
                }
                LiteralSource::Default | LiteralSource::Derived(_) => format!(
                    "#{}={} ({}; set with {})",
                    lit.name(),
                    plain_number(literals.get(lit)),
                    source_word(source),
                    flag_for(lit)
                ),
                _ => format!(
                    "#{}={} ({})",
                    lit.name(),
                    plain_number(literals.get(lit)),
                    source_word(source)
                ),
            }
        })
        .collect();
    if parts.is_empty() { "none".to_string() } else { parts.join(", ") }
}

fn literals_json(literals: &Literals, used: &[Literal]) -> Vec<LiteralJson> {
    used.iter()
        .map(|&lit| LiteralJson {
            literal: lit.name(),
            value: json_number(literals.get(lit)),
            source: source_word(literals.source(lit)),
        })
        .collect()
}

#[derive(Serialize)]
struct LiteralJson {
    literal: &'static str,
    value: Option<f64>,
    source: String,
}

#[derive(Serialize)]
struct AssumptionsJson {
    model: String,
    /// The common table's metrics were considered too.
    common: bool,
    counts: String,
    literals: Vec<LiteralJson>,
}

#[derive(Serialize)]
struct AssumptionsLine {
    assumptions: AssumptionsJson,
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

#[derive(Serialize)]
struct ExprJson<'a> {
    expr: &'a str,
    value: Option<f64>,
    missing: Vec<String>,
    literals: Vec<LiteralJson>,
}

/// `NAME=VALUE`, split at the last `=` because event names may hold `=` (`cmask=1`). The
/// value follows the counts file's rule ([`counts::number`]): a finite, non-negative number.
fn split_assignment<'a>(text: &'a str, flag: &str) -> anyhow::Result<(&'a str, f64)> {
    let shown = tmetric_text::quote(text);
    let (name, value) = text
        .rsplit_once('=')
        .ok_or_else(|| anyhow!("{flag} {shown}: expected NAME=VALUE, e.g. `{flag} smt_on=1`"))?;
    if name.trim().is_empty() {
        bail!("{flag} {shown}: the name is empty; expected NAME=VALUE, e.g. `{flag} smt_on=1`");
    }
    // A negative value is refused as the counts file refuses one, but said in the flag's words:
    // what `--var` and `--literal` give are not counts.
    if value.trim().parse::<f64>().is_ok_and(|v| v < 0.0) {
        let what = if flag == "--literal" {
            "literals (#smt_on, #num_cpus, #system_tsc_freq, ...) are never negative".to_string()
        } else {
            format!(
                "a variable stands for an event, a time or a latency, none of which is ever negative (put the minus in the expression instead: `-{}`)",
                name.trim()
            )
        };
        bail!("{flag} {shown}: {} is negative; {what}", tmetric_text::quote(value.trim()));
    }
    let number = counts::number(value).map_err(|why| anyhow!("{flag} {shown}: {why}"))?;
    Ok((name.trim(), number))
}

fn warn(message: &str) {
    crate::out::warn(&format!("warning: {message}"));
}

/// Runs `tmetric eval`.
pub fn run(args: &EvalArgs, out: &mut dyn Write) -> anyhow::Result<()> {
    if let Some(expr) = &args.expr {
        return run_expr(args, expr, out);
    }
    if let Some(path) = &args.from_perf {
        return from_perf::run(args, path, out);
    }
    let Some(path) = &args.counts else {
        bail!(
            "`tmetric eval` needs --counts FILE (and --model MODEL), --from-perf FILE, or --expr EXPR; see `tmetric eval --help`"
        )
    };
    let file = counts::read(path)?;
    let model = match (&args.model, &file.model) {
        (Some(flag), Some(named)) => {
            let model = find_model(flag)?;
            if find_model(named).ok().is_none_or(|m| !std::ptr::eq(m, model)) {
                warn(&format!(
                    "using --model {} although {} says `{named}`",
                    model.path(),
                    file.path
                ));
            }
            model
        }
        (Some(name), None) | (None, Some(name)) => find_model(name)?,
        (None, None) => bail!(
            "which model are these counts from? pass --model MODEL (one of {}, ...) or add \"model\" to {}",
            examples(),
            file.path
        ),
    };
    let literals = resolve_literals(args, Some(&file), &[])?;

    let common = tmetric_catalog::common();
    let mut tables = vec![Table::new(model, false, &file, &literals)?];
    if !std::ptr::eq(model, common) {
        tables.push(Table::new(common, true, &file, &literals)?);
    }
    let where_ = if tables.len() > 1 {
        format!("{} or the common metrics", model.path())
    } else {
        model.path()
    };

    let items: Vec<&str> =
        args.metrics.iter().map(|s| s.trim()).filter(|s| !s.is_empty()).collect();
    let mut skipped = Skipped::default();
    if items.is_empty() {
        for table in &mut tables {
            table.select_complete(&mut skipped);
        }
    } else {
        let models: Vec<&'static Model> = tables.iter().map(|t| t.model).collect();
        let roots = select_items(
            &models,
            &items,
            &where_,
            "the counts file decides what was counted (use keys such as `EVENT:u`)",
        )?;
        for (table, roots) in tables.iter_mut().zip(roots) {
            table.roots = roots;
        }
    }

    report_unused(&tables, &file, &where_);
    for table in &tables {
        table.warn_source_counts();
    }

    let mut used: Vec<Literal> = Vec::new();
    for table in &tables {
        for lit in table.literals_used() {
            if !used.contains(&lit) {
                used.push(lit);
            }
        }
    }
    used.sort();
    let counted_models =
        if tables.len() > 1 { format!("{} + common", model.path()) } else { model.path() };
    if args.json {
        json_line(
            out,
            &AssumptionsLine {
                assumptions: AssumptionsJson {
                    model: model.path(),
                    common: tables.len() > 1,
                    counts: file.path.clone(),
                    literals: literals_json(&literals, &used),
                },
            },
        )?;
    } else {
        eprintln!(
            "tmetric: {counted_models} from {}; literals used: {}",
            file.path,
            describe_literals(&literals, &used)
        );
    }

    let colour = !args.json && args.color.enabled();
    let mut shown = 0;
    for table in &mut tables {
        let roots = std::mem::take(&mut table.roots);
        let results = table.offline.evaluate(&roots);
        shown += results.len();
        let path = bottleneck_of(table.model, &results, |r| (r.metric, r.value, r.threshold));
        for (i, result) in results.iter().enumerate() {
            table.print(out, result, &literals, args.json, colour, path.contains(&i))?;
        }
        table.roots = roots;
    }
    if shown == 0 && !args.json {
        eprintln!("tmetric: no metric of {where_} has all its inputs in {}", file.path);
    }
    skipped.report(&where_, &file.path);
    Ok(())
}

/// Why metrics were left out of a selection without -M.
#[derive(Debug, Default)]
struct Skipped {
    /// Some inputs are in the file, not all.
    partial: Vec<String>,
    /// None of the inputs are in the file.
    absent: usize,
    /// The metric needs a literal that is unknown.
    literal: Vec<String>,
}

impl Skipped {
    fn report(&self, where_: &str, path: &str) {
        if !self.partial.is_empty() {
            eprintln!(
                "tmetric: not shown: {} metrics of {where_} with only some inputs in {path} ({}); name them with -M to see what is missing",
                self.partial.len(),
                first_names(&self.partial)
            );
        }
        if !self.literal.is_empty() {
            eprintln!(
                "tmetric: not shown: {} metrics of {where_} that read unknown literals ({}); name them with -M to see which",
                self.literal.len(),
                first_names(&self.literal)
            );
        }
        if self.absent > 0 {
            eprintln!(
                "tmetric: not shown: {} metrics of {where_} with none of their inputs in {path}",
                self.absent
            );
        }
    }
}

/// `a, b, c and 5 more`.
fn first_names(names: &[String]) -> String {
    const SHOWN: usize = 8;
    let mut text = names.iter().take(SHOWN).cloned().collect::<Vec<_>>().join(", ");
    if names.len() > SHOWN {
        text.push_str(&format!(" and {} more", names.len() - SHOWN));
    }
    text
}

/// One model's share of the work: the model, its slot values and its selected metrics.
struct Table {
    model: &'static Model,
    common: bool,
    assigned: Assigned,
    offline: Offline,
    roots: Vec<usize>,
}

impl Table {
    fn new(
        model: &'static Model,
        common: bool,
        file: &CountsFile,
        literals: &Literals,
    ) -> anyhow::Result<Table> {
        let assigned = counts::assign(model, file)?;
        // The cpuid of the machine the counts came from is not known: strcmp_cpuid_str() is NaN.
        let mut offline = Offline::new(model, literals.values, None);
        for slot in 0..model.ids.len() {
            offline.set_input(slot as u16, assigned.values[slot], assigned.source_counts[slot]);
        }
        for slot in offline.has_event_slots().to_vec() {
            offline.set_probe(slot, assigned.present[slot as usize]);
        }
        Ok(Table { model, common, assigned, offline, roots: Vec::new() })
    }

    /// Without -M: the metrics whose inputs are all in the file.
    fn select_complete(&mut self, skipped: &mut Skipped) {
        let Table { model, assigned, offline, roots, .. } = self;
        for m in 0..model.metrics.len() {
            let name = model.str(model.metrics[m].name).to_string();
            match offline.coverage(m, |s| assigned.present[s as usize]) {
                Coverage::Complete => roots.push(m),
                Coverage::UnknownLiteral | Coverage::Fails(_) => skipped.literal.push(name),
                Coverage::Partial(_) => skipped.partial.push(name),
                // A metric that needs no input here (`0 if not #has_pmem`) says nothing about
                // these counts: leave it out with those whose inputs are all absent.
                Coverage::Absent | Coverage::NoInputs => skipped.absent += 1,
            }
        }
    }

    fn literals_of(&self, roots: &[usize]) -> Vec<Literal> {
        self.model.literals_of(roots)
    }

    fn literals_used(&self) -> Vec<Literal> {
        if self.roots.is_empty() { Vec::new() } else { self.literals_of(&self.roots) }
    }

    /// Slots the selected metrics read: needed inputs (of expression and threshold) and probes.
    fn used_slots(&self) -> Vec<bool> {
        let mut used = vec![false; self.model.ids.len()];
        let mut offline = self.offline.clone();
        for &m in &self.roots {
            for &slot in offline.needed(m).all.as_deref().unwrap_or_default() {
                used[slot as usize] = true;
            }
        }
        let calls = id_calls::HAS_EVENT | id_calls::SOURCE_COUNT | id_calls::STRCMP_CPUID_STR;
        for slot in self.model.call_slots_of(&self.roots, calls) {
            used[slot] = true;
        }
        used
    }

    /// perf would know how many uncore boxes were merged into a count; a single key does not
    /// say, so `source_count()` of it reads 1 unless the file says otherwise.
    fn warn_source_counts(&self) {
        if self.roots.is_empty() {
            return;
        }
        for slot in self.model.call_slots_of(&self.roots, id_calls::SOURCE_COUNT) {
            if self.assigned.merged_unknown[slot] {
                let id = &self.model.ids[slot];
                let (text, pmu) = (self.model.str(id.text), self.model.str(id.pmu));
                warn(&format!(
                    "assuming source_count({text}) = 1: give per-instance keys (`{pmu}_0/{text}/`, ...) or \"source_count\": {{\"{text}\": N}}"
                ));
            }
        }
    }

    fn print(
        &mut self,
        out: &mut dyn Write,
        result: &MetricResult,
        literals: &Literals,
        json: bool,
        colour: bool,
        bottleneck: bool,
    ) -> anyhow::Result<()> {
        let model = self.model;
        let metric = &model.metrics[result.metric];
        let name = model.str(metric.name);
        let pmu = model.str(metric.pmu);
        let unit = model.str(metric.unit);
        let missing: Vec<&str> =
            result.missing.iter().map(|&s| model.str(model.ids[s as usize].text)).collect();
        let error =
            result.failure.map(|fail| explain_failure(model, fail, result.metric, literals));
        // A nan or 0 that a fact decides says why, as stat's notes do.
        let why = (error.is_none()
            && missing.is_empty()
            && (result.value.is_nan() || result.value == 0.0))
            .then(|| self.offline.explain(result.metric))
            .flatten()
            .map(|why| {
                why_text(model, &why, result.value, literals, "the counts file gives no value for")
            });
        if json {
            json_line(
                out,
                &MetricJson {
                    metric: name,
                    pmu,
                    value: if error.is_some() { None } else { json_number(result.scaled(model)) },
                    unit,
                    threshold: result.threshold,
                    bottleneck,
                    missing,
                    error,
                    why,
                    model: model.path(),
                },
            )?;
            return Ok(());
        }
        let scaled = error.is_none().then(|| result.scaled(model));
        let mut line = metric_head(
            model,
            result.metric,
            scaled,
            result.threshold,
            bottleneck,
            self.common,
            colour,
        );
        if let Some(error) = error {
            line.push_str(&format!("  error: {error}"));
        } else if !missing.is_empty() {
            line.push_str(&format!("  missing: {}", missing.join(", ")));
        } else if let Some(why) = why {
            line.push_str(&format!("  why: {why}"));
        }
        writeln!(out, "{line}")?;
        Ok(())
    }
}

/// Why metric `metric` has no value, naming the flag for an unknown literal.
fn explain_failure(
    model: &'static Model,
    fail: Fail,
    metric: usize,
    literals: &Literals,
) -> String {
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

/// The indices of `results` on the TMA bottleneck path of `model`'s metrics, as `stat --tree`
/// marks it (`engine::view::tma_tree`, the one rule every view uses); `of` gives a result's
/// metric, value and threshold state.
pub(crate) fn bottleneck_of<R>(
    model: &Model,
    results: &[R],
    of: impl Fn(&R) -> (usize, f64, Option<bool>),
) -> Vec<usize> {
    let nodes: Vec<tmetric_engine::view::TmaNode<'_>> = results
        .iter()
        .map(|r| {
            let (metric, value, threshold) = of(r);
            tmetric_engine::view::TmaNode::of(model, metric, value, threshold)
        })
        .collect();
    tmetric_engine::view::tma_bottleneck(&nodes)
}

/// A metric as perf prints it after `#`, without the notes that follow: the value (blank
/// when `scaled` is `None`, coloured by `threshold`), the unit and name, `[pmu]` off the
/// default core PMU, `[common]` for the common table and `<==` on the bottleneck path.
fn metric_head(
    model: &Model,
    metric: usize,
    scaled: Option<f64>,
    threshold: Option<bool>,
    bottleneck: bool,
    common: bool,
    colour: bool,
) -> String {
    let m = &model.metrics[metric];
    let (name, pmu, unit) = (model.str(m.name), model.str(m.pmu), model.str(m.unit));
    let number = match scaled {
        None => " ".repeat(8),
        Some(value) => paint(&perf_number(value, m.has_scale_unit), threshold, colour),
    };
    let mut line = if m.has_scale_unit && !unit.is_empty() {
        format!("{number} {unit}  {name}")
    } else {
        format!("{number} {name}")
    };
    if !pmu.is_empty() && pmu != "default_core" {
        line.push_str(&format!("  [{pmu}]"));
    }
    if common {
        line.push_str("  [common]");
    }
    if bottleneck {
        line.push_str("  <==");
    }
    line
}

/// Resolves -M items against every table, as perf does (spec C1): per model, the selected
/// metrics in the order the items name them. An item no model knows is an error with
/// suggestions.
fn select_items(
    models: &[&'static Model],
    items: &[&str],
    where_: &str,
    modifier_hint: &str,
) -> anyhow::Result<Vec<Vec<usize>>> {
    let mut roots: Vec<Vec<usize>> = vec![Vec::new(); models.len()];
    for item in items {
        if item.contains(':') {
            bail!("-M `{item}`: modifiers on -M items are not supported by eval; {modifier_hint}");
        }
        let mut found = false;
        for (model, roots) in models.iter().zip(&mut roots) {
            for m in model.select(item) {
                found = true;
                if !roots.contains(&m) {
                    roots.push(m);
                }
            }
        }
        if !found {
            let names = models.iter().flat_map(|model| {
                model.metrics.iter().flat_map(|m| {
                    std::iter::once(model.str(m.name).to_string()).chain(
                        model
                            .str(m.groups)
                            .split(';')
                            .filter(|g| !g.is_empty())
                            .map(str::to_string),
                    )
                })
            });
            let near = closest(item, names, 8);
            let hint = if near.is_empty() {
                format!("`tmetric list metrics --model {}` lists them", models[0].path())
            } else {
                format!("did you mean {}?", join_code(&near))
            };
            bail!("cannot find metric or group `{item}` in {where_}; {hint}");
        }
    }
    Ok(roots)
}

/// Warns about every key that feeds no selected metric: never drop a value silently.
fn report_unused(tables: &[Table], file: &CountsFile, where_: &str) {
    let used: Vec<Vec<bool>> = tables.iter().map(Table::used_slots).collect();
    let mut unselected = Vec::new();
    // A file of millions of unknown keys gets the first few and a count, not a flood.
    let mut unknown = tmetric_text::Capped::new(20);
    let mut unselected_more = 0usize;
    for (index, entry) in file.entries.iter().enumerate() {
        // No allocation per key: a counts file may hold millions.
        let slots =
            || tables.iter().enumerate().map(|(t, table)| (t, &table.assigned.entry_slots[index]));
        if slots().all(|(_, s)| s.is_empty()) {
            if unknown.admit() {
                warn(&format!(
                    "ignored: {} is not an input of any metric of {where_}",
                    tmetric_text::quote(&entry.written)
                ));
            }
        } else if !slots().any(|(t, s)| s.iter().any(|&slot| used[t][slot as usize])) {
            if unselected.len() <= 10 {
                unselected.push(tmetric_text::quote(&entry.written));
            } else {
                unselected_more += 1;
            }
        }
    }
    for (index, (key, _)) in file.source_counts.iter().enumerate() {
        if tables.iter().all(|t| t.assigned.source_count_slots[index].is_empty()) {
            warn(&format!(
                "ignored: source_count of `{key}`: it is not an input of any metric of {where_}"
            ));
        }
    }
    if let Some(summary) = unknown.summary("keys that are not inputs of any metric") {
        warn(&format!("ignored: {summary} of {where_}"));
    }
    if !unselected.is_empty() {
        let count = unselected.len() + unselected_more;
        let more = count.saturating_sub(10);
        unselected.truncate(10);
        let more = if more > 0 { format!(" and {more} more") } else { String::new() };
        let verb = if count == 1 { "is not an input" } else { "are not inputs" };
        warn(&format!(
            "ignored: {}{more} {verb} of any selected metric of {where_}",
            unselected.join(", ")
        ));
    }
}

/// `--expr`: the interpreter over `--var` values (and the counts file's keys, if given).
fn run_expr(args: &EvalArgs, text: &str, out: &mut dyn Write) -> anyhow::Result<()> {
    let expr = tmetric_expr::parse(text).map_err(|err| {
        anyhow!("cannot parse the expression: {}\n{}", err.message(), err.caret())
    })?;
    let mut vars: HashMap<String, f64> = HashMap::new();
    let mut literal_vars = Vec::new();
    // Each name once: a second value would silently win.
    let mut given: HashMap<String, &str> = HashMap::new();
    for var in &args.vars {
        let (name, value) = split_assignment(var, "--var")?;
        let key = match literal_named(name) {
            Some(literal) if name.starts_with('#') => format!("#{}", literal.name()),
            _ => normalize(name),
        };
        if let Some(first) = given.insert(key, var) {
            bail!(
                "--var {}: `{name}` is already given ({}); give each name once",
                tmetric_text::quote(var),
                tmetric_text::quote(first)
            );
        }
        if name.starts_with('#') {
            let literal = literal_named(name).ok_or_else(|| {
                anyhow!(
                    "--var `{var}`: unknown literal `{name}`; expected one of {}",
                    literal_names()
                )
            })?;
            literal_vars.push((literal, value));
        } else {
            vars.insert(normalize(name), value);
        }
    }
    let file = args.counts.as_deref().map(counts::read).transpose()?;
    let literals = resolve_literals(args, file.as_ref(), &literal_vars)?;
    let mut env = ExprEnv { vars, file: file.as_ref(), literals: &literals, missing: Vec::new() };
    let value = tmetric_expr::eval(&expr, &mut env).map_err(|err| {
        let hint = match &err {
            EvalError::Literal { name, .. } => match literal_named(name) {
                Some(lit) if Literal::from_name(name).is_some() => {
                    format!(" (pass {})", flag_for(lit))
                }
                _ => format!(" (known literals: {})", literal_names()),
            },
            EvalError::RemainderByZero { .. } => String::new(),
        };
        anyhow!("cannot evaluate the expression: {err}{hint}\n{}", caret_lines(text, err.span()))
    })?;
    let missing = env.missing;
    let mut used: Vec<Literal> =
        expr.literals().into_iter().filter_map(Literal::from_name).collect();
    used.sort();
    used.dedup();
    if args.json {
        json_line(
            out,
            &ExprJson {
                expr: text,
                value: json_number(value),
                missing: missing.clone(),
                literals: literals_json(&literals, &used),
            },
        )?;
    } else {
        if !used.is_empty() {
            eprintln!("tmetric: literals used: {}", describe_literals(&literals, &used));
        }
        writeln!(out, "{}", plain_number(value))?;
    }
    if !missing.is_empty() {
        let names: Vec<String> = missing.iter().map(|m| format!("`{m}`")).collect();
        let verb = if names.len() == 1 { "it reads" } else { "they read" };
        warn(&format!("no value for {}; {verb} as NaN (pass --var NAME=VALUE)", names.join(", ")));
    }
    Ok(())
}

struct ExprEnv<'a> {
    vars: HashMap<String, f64>,
    file: Option<&'a CountsFile>,
    literals: &'a Literals,
    missing: Vec<String>,
}

impl ExprEnv<'_> {
    /// The value of `name` and how many values were summed into it, if any is given.
    fn lookup(&self, name: &str) -> Option<(f64, usize)> {
        if let Some(&value) = self.vars.get(name) {
            return Some((value, 1));
        }
        let file = self.file?;
        let slot = SlotName::of_expr_id(name);
        let matched: Vec<f64> = file
            .entries
            .iter()
            .filter(|e| slot_matches(&slot, &e.event).is_some())
            .map(|e| e.value)
            .collect();
        (!matched.is_empty()).then(|| (matched.iter().sum(), matched.len()))
    }
}

impl Env for ExprEnv<'_> {
    fn id(&mut self, id: &Ident) -> f64 {
        match self.lookup(&id.name) {
            Some((value, _)) => value,
            None => {
                if !self.missing.contains(&id.name) {
                    self.missing.push(id.name.clone());
                }
                f64::NAN
            }
        }
    }

    fn literal(&mut self, literal: Literal) -> Option<f64> {
        Some(self.literals.get(literal))
    }

    fn source_count(&mut self, id: &Ident) -> f64 {
        self.lookup(&id.name).map_or(0.0, |(_, n)| n as f64)
    }

    fn has_event(&mut self, id: &Ident) -> bool {
        self.lookup(&id.name).is_some_and(|(v, _)| !v.is_nan())
    }

    fn cpuid_match(&mut self, _id: &Ident) -> f64 {
        f64::NAN
    }
}
