//! `tmetric eval`'s flags and glue: a model's compiled metrics over a counts file (evaluated by
//! `tmetric_offline::counts`, printed by `tmetric_print::eval`), a `perf stat` log
//! (`eval/from_perf.rs`), or an ad-hoc expression through the interpreter (`--expr`, here).
//! The literal flags and the `-M` items serve every input.

use std::collections::HashMap;
use std::io::Write;
use std::path::PathBuf;

use anyhow::{Context, anyhow, bail};
use tmetric_catalog::Model;
use tmetric_engine::Literals;
use tmetric_engine::literals::{literal_named, literal_names};
use tmetric_engine::select::{self, ModelFrom};
use tmetric_expr::adhoc::{self, AdhocError};
use tmetric_expr::{EvalError, normalize};
use tmetric_model::Literal;
use tmetric_offline::counts::eval::CountsEval;
use tmetric_offline::counts::{CountsFile, ExprValues, assignment};
use tmetric_print::eval::{self as print, CountsPrinter};

pub mod from_perf;

use crate::counts;
use tmetric_engine::models::find_model;
use tmetric_engine::select::examples;

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
  the same value for everything perf printed are all named, the one in perf's vendor data longest
  standing for them; a tie that differs is an error listing the candidates); the common metrics are
  always added. POWER's hv_24x7 metrics with perf's runtime parameter (`?`) are evaluated once per
  chip or core in the log, named as perf prints them (PowerBUS_Frequency_1).
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

/// Evaluate a model's metrics over a counts file, or an ad-hoc expression.
#[derive(Debug, clap::Args)]
#[command(
    after_long_help = EVAL_HELP,
    mut_arg("model", |a| a.help("The model: `x86/sapphirerapids` or `sapphirerapids`; defaults to the counts file's `model`")),
    mut_arg("metrics", |a| a.help("Metrics or metric groups to evaluate, as for `perf stat -M`; comma-separated, repeatable")),
    mut_arg("json", |a| a.help("One JSON object per line")),
    mut_arg("separator", |a| a.help("With --from-perf: CSV output with this separator (columns in --help)").requires("from_perf").conflicts_with("json")),
    mut_arg("color", |a| a.help("When to colour threshold states: auto (when standard output is a terminal), always or never")),
)]
pub struct EvalArgs {
    #[command(flatten)]
    metric: crate::args::MetricArgs,
    #[command(flatten)]
    out: crate::args::OutputArgs,
    /// The counts file (JSON; see --help or docs/counts-format.md).
    #[arg(long, value_name = "FILE")]
    counts: Option<PathBuf>,
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
    /// Evaluate this expression with perf's semantics instead of the model's metrics.
    #[arg(long, value_name = "EXPR", conflicts_with = "metrics")]
    expr: Option<String>,
    /// A value for an identifier of --expr (`--var INST_RETIRED.ANY=5e9`, `--var '#smt_on=1'`); repeatable.
    #[arg(long = "var", value_name = "NAME=VALUE", requires = "expr")]
    vars: Vec<String>,
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

/// Every literal's value: given by flags (`--smt`, `--literal`, `--var`), by the counts file,
/// else perf's defaults ([`Literals::resolve`]); two different values for one literal are an
/// error naming both.
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
        let (name, value) = assignment(text, "--literal").map_err(anyhow::Error::msg)?;
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
    let mut literals = Literals::resolve(&given, file.map_or(&[][..], |f| &f.literals))?;
    // What the file says was counted (`-a`, a task) decides `#core_wide` as perf's core_wide().
    if let Some(file) = file {
        literals.set_counting(file.counting);
    }
    Ok(literals)
}

fn warn(message: &str) {
    tmetric_print::out::warn(&format!("warning: {message}"));
}

/// The `-M` items, trimmed, empty ones dropped.
fn items(args: &EvalArgs) -> Vec<&str> {
    args.metric.metrics.iter().map(|s| s.trim()).filter(|s| !s.is_empty()).collect()
}

/// perf's `-M item:u` puts a modifier on the item's events; eval reads what was counted, so it
/// refuses one (saying `hint`), after the items before it, whose miss would come first
/// (`model`, from `from`, is the CPU model they are looked up in).
fn refuse_modifiers(
    items: &[&str],
    model: Option<&'static Model>,
    from: ModelFrom,
    hint: &str,
) -> anyhow::Result<()> {
    if let Some(k) = items.iter().position(|i| i.contains(':')) {
        select::select(&items[..k], model, from)?;
        bail!("-M `{}`: modifiers on -M items are not supported by eval; {hint}", items[k]);
    }
    Ok(())
}

/// Runs `tmetric eval`.
pub fn run(args: &EvalArgs, out: &mut dyn Write) -> anyhow::Result<()> {
    args.metric.check()?;
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
    let model = counts_model(args, &file)?;
    let literals = resolve_literals(args, Some(&file), &[])?;
    let mut eval = CountsEval::new(model, &file, &literals)?;
    let models = eval.models();
    let where_ = print::counts_where(&models);
    let items = items(args);
    if items.is_empty() {
        eval.select_complete();
    } else {
        let hint = "the counts file decides what was counted (use keys such as `EVENT:u`)";
        let from =
            if args.metric.model.is_some() { ModelFrom::Named } else { ModelFrom::CountsFile };
        refuse_modifiers(&items, Some(model), from, hint)?;
        eval.select(&items, from)?;
    }
    for warning in print::unused_warnings(&eval.unused(&file), &where_) {
        warn(&warning);
    }
    for (model, slot) in eval.assumed_source_counts() {
        warn(&print::source_count_warning(model, slot));
    }
    for (model, slot, assumed) in eval.assumed_aggr_nrs() {
        warn(&print::aggr_nr_warning(model, slot, assumed));
    }
    let used = eval.literals_used();
    let mut printer = CountsPrinter::new(
        out,
        &literals,
        args.out.json,
        args.out.colour(crate::args::eval_results_to_terminal()),
    );
    if args.out.json {
        printer.assumptions(&models, &file.path, &used)?;
    } else {
        eprintln!("tmetric: {}", print::counts_assumptions(&models, &file.path, &literals, &used));
    }
    let results = eval.evaluate();
    for (table, results) in eval.tables.iter().zip(&results) {
        for evaluated in results {
            printer.metric(table.model, table.common, evaluated)?;
        }
    }
    if results.iter().all(Vec::is_empty) && !args.out.json {
        eprintln!("tmetric: no metric of {where_} has all its inputs in {}", file.path);
    }
    for note in print::skipped_notes(&eval.skipped, &where_, &file.path) {
        eprintln!("tmetric: {note}");
    }
    Ok(())
}

/// The model of a counts file: `--model`, else the file's `model` (a warning when they differ).
fn counts_model(args: &EvalArgs, file: &CountsFile) -> anyhow::Result<&'static Model> {
    Ok(match (&args.metric.model, &file.model) {
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
    })
}

/// An ad-hoc expression that cannot be evaluated: the interpreter's error, a hint naming the
/// flag for a literal, and the expression with a caret under the culprit.
#[derive(Debug)]
struct ExprError {
    error: EvalError,
    hint: String,
    caret: String,
}

impl std::fmt::Display for ExprError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}{}\n{}", self.error, self.hint, self.caret)
    }
}

impl std::error::Error for ExprError {}

/// `--expr`: the interpreter over `--var` values (and the counts file's keys, if given).
fn run_expr(args: &EvalArgs, text: &str, out: &mut dyn Write) -> anyhow::Result<()> {
    let expr = tmetric_expr::parse(text).context("cannot parse the expression")?;
    tmetric_engine::contract::check_expr(&expr, text).map_err(anyhow::Error::msg)?;
    let mut vars: HashMap<String, f64> = HashMap::new();
    let mut literal_vars = Vec::new();
    // Each name once: a second value would silently win.
    let mut given: HashMap<String, &str> = HashMap::new();
    for var in &args.vars {
        let (name, value) = assignment(var, "--var").map_err(anyhow::Error::msg)?;
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
    let given = ExprValues { vars, file: file.as_ref(), literals: &literals };
    let adhoc = adhoc::evaluate(&expr, text, &given)
        .map_err(|AdhocError { error, caret }| {
            let hint = match &error {
                EvalError::Literal { name, .. } => match literal_named(name) {
                    Some(lit) if Literal::from_name(name).is_some() => {
                        format!(" (pass {})", print::flag_for(lit))
                    }
                    _ => format!(" (known literals: {})", literal_names()),
                },
                EvalError::RemainderByZero { .. } => String::new(),
            };
            ExprError { error, hint, caret }
        })
        .context("cannot evaluate the expression")?;
    let (value, missing, used) = (adhoc.value, adhoc.missing, adhoc.literals);
    if !args.out.json && !used.is_empty() {
        eprintln!("tmetric: literals used: {}", print::describe_literals(&literals, &used));
    }
    print::expr_value(out, text, value, &missing, &literals, &used, args.out.json)?;
    if let Some(warning) = print::expr_missing_warning(&missing) {
        warn(&warning);
    }
    Ok(())
}
