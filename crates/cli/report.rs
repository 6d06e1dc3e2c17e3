//! `tmetric report -i FILE`: evaluates and prints recorded counts with `stat`'s printer. The
//! file is a `tmetric record` file (perf.data or JSON lines) or a `perf stat record`
//! perf.data file; `tmetric_record` reads it and rebuilds the recorded plan through the
//! engine, so the recorded metrics give the values `stat` printed; `-M` adds any metric whose
//! inputs were counted (by event name, preferring one group), and `--model` evaluates with
//! another model's formulas. This module is the flags, the choice of metrics and the printing.

use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use tmetric_catalog::Model;
use tmetric_engine::replay::Choice;
use tmetric_engine::select;
use tmetric_engine::{EvalInput, Evaluators, Note, Pick};
use tmetric_record::{Input, Options, Playback};

use crate::stat::Printer;
use tmetric_engine::aggr::Aggregation;
use tmetric_engine::view::Partition;
use tmetric_print::out::{Sink, warn};
use tmetric_print::stat::{Explain, TreeView};
use tmetric_print::{Config, Title};

/// Evaluate and print a `tmetric record` file or a `perf stat record` perf.data file.
#[derive(Debug, Clone, clap::Args)]
#[command(
    mut_arg("metrics", |a| a.help("Metrics or metric groups to evaluate (default: those recorded, or for perf.data the common metrics whose events were counted); any metric whose events were counted works")),
    mut_arg("model", |a| a.help("Use this model's formulas (default: the recorded model, or perf.data's cpuid)")),
    mut_arg("color", |a| a.help("Colour metric values by their thresholds: auto (when the report goes to a terminal: standard error, unless -o names a file), always or never")),
    after_help = "Examples:\n  tmetric report                      (perf.data, or the pipe on standard input)\n  \
    tmetric report -i td.data -M tma_frontend_bound --model icelake -x,\n  \
    tmetric record -a -e task-clock -o - sleep 1 | tmetric report -i -\n  \
    perf stat record -o perf.data -e task-clock,context-switches sleep 1 && tmetric report -i perf.data"
)]
pub struct ReportArgs {
    /// The file: from `tmetric record` (perf.data or JSON lines), or perf.data from `perf
    /// stat record`; `-` reads standard input (a pipe of either). Default: standard input
    /// when it is a pipe, else perf.data (as perf stat report).
    #[arg(short = 'i', long = "input", value_name = "FILE")]
    input: Option<PathBuf>,
    #[command(flatten)]
    metric: crate::args::MetricArgs,
    #[command(flatten)]
    out: crate::args::OutputArgs,
    /// Per CPU: no aggregation over CPUs.
    #[arg(short = 'A', long = "no-aggr", group = "aggregation")]
    no_aggr: bool,
    /// Aggregate per physical core (from the file's CPU topology).
    #[arg(long, group = "aggregation")]
    per_core: bool,
    /// Aggregate per cache instance of this level (`L2`; default: the last level).
    #[arg(long, value_name = "LEVEL", num_args = 0..=1, require_equals = true, default_missing_value = "", group = "aggregation")]
    per_cache: Option<String>,
    /// Aggregate per cluster.
    #[arg(long, group = "aggregation")]
    per_cluster: bool,
    /// Aggregate per die.
    #[arg(long, group = "aggregation")]
    per_die: bool,
    /// Aggregate per socket.
    #[arg(long, group = "aggregation")]
    per_socket: bool,
    /// Aggregate per NUMA node.
    #[arg(long, group = "aggregation")]
    per_node: bool,
    /// Per thread, for a file that counted threads (`-p`, `-t`, `--per-thread`).
    #[arg(long, group = "aggregation")]
    per_thread: bool,
    /// Print only metrics: one column each.
    #[arg(long)]
    metric_only: bool,
    /// Print the metrics as the TMA tree (the bottleneck path marked `<==`).
    #[arg(long, default_value_if("all", clap::builder::ArgPredicate::IsPresent, "true"))]
    tree: bool,
    /// The TMA tree with every node, those below their threshold too; implies --tree.
    #[arg(long)]
    all: bool,
    /// Which statistic of `--record-tpebs` samples the metrics use (default: the recorded one):
    /// mean, min, max, last, or p97, the mean of the lowest 97% of the samples (not the 97th
    /// percentile).
    #[arg(long, value_name = "MODE", value_parser = ["mean", "min", "max", "last", "p97"])]
    tpebs_mode: Option<String>,
    /// Write the report to FILE instead of standard error.
    #[arg(short = 'o', long, value_name = "FILE")]
    output: Option<PathBuf>,
    /// tmetric's additions to perf's layouts, as `stat --full-metrics`: metric names and
    /// units as fields of their own, full precision, and with `-x`/`-j` the notes among
    /// the lines (`#` comments, JSON objects).
    #[arg(long)]
    full_metrics: bool,
    /// Every note, also those the default layout's block leaves out; with `-x` as `#`
    /// comment lines.
    #[arg(short = 'v', long)]
    verbose: bool,
    /// Each metric's error bar, as `stat --errors` printed it, from the reads the record keeps
    /// (recorded with --errors or -v).
    #[arg(long)]
    errors: bool,
}

/// Runs `tmetric report`.
pub fn run(args: &ReportArgs) -> anyhow::Result<()> {
    args.metric.check()?;
    let mut args = args.clone();
    let path = args.input.get_or_insert_with(tmetric_perfopts::rules::report_input).clone();
    let args = &args;
    let stdin = path.as_os_str() == "-";
    if let Some(output) = &args.output
        && !stdin
    {
        refuse_same_file(&path, output)?;
    }
    let bytes = if stdin {
        tmetric_print::out::stdin_hint(
            "a record",
            "a file (`-i perf.data`) or a pipe (`tmetric record -o - ... | tmetric report -i -`)",
        );
        tmetric_runtime::input::read_stdin(tmetric_runtime::input::RECORD)
            .context("cannot read standard input")?
    } else {
        tmetric_runtime::input::read(&path, tmetric_runtime::input::RECORD).with_context(|| {
            format!("cannot read {} (give the file with -i FILE)", path.display())
        })?
    };
    let name = if stdin { "standard input".to_string() } else { path.display().to_string() };
    if bytes.is_empty() {
        // Not "not a tmetric record": whichever kind was meant, the input holds nothing.
        if stdin {
            bail!("standard input is empty: expected a record (`tmetric record -o - ... |`)");
        }
        bail!(
            "{name}: the file is empty (0 bytes), so it holds no recording, neither a `tmetric record` file nor a `perf stat record` perf.data; the run that wrote it may have failed before writing"
        );
    }
    let input = tmetric_record::open(&name, &bytes)?;
    // A recording is evaluated with the tables it was made with and printed as it was, unless
    // --perf-version asks for others.
    if !tmetric_catalog::vintage_is_chosen()
        && let Some((data, contract)) = input.vintages(&name)?
    {
        tmetric_catalog::use_vintages(data, contract);
    }
    let picks = choose(args, &input)?;
    let choice = match (&picks, &args.metric.model) {
        (Some(picks), _) => Choice::Picks(picks),
        (None, Some(model)) => {
            Choice::Model(tmetric_engine::models::find_model(model).context("--model")?)
        }
        (None, None) => Choice::Recorded,
    };
    let options = Options { choice, tpebs_mode: args.tpebs_mode.as_deref() };
    let playback = input.replay(&name, options, &mut |w| warn(&w.to_string()))?;
    print(args, playback)
}

/// `-M`'s metrics, each item from the common metrics first, else from the model `--model`
/// names, else the one the file's metrics came from, else the recorded machine's; `None`
/// without `-M`. Never reads this machine's sysfs: the recording says what it ran on. A miss
/// is `engine::select::Miss`, worded as `stat` words it.
fn choose(args: &ReportArgs, input: &Input) -> anyhow::Result<Option<Vec<Pick>>> {
    if args.metric.metrics.is_empty() {
        return Ok(None);
    }
    let from = if args.metric.model.is_some() {
        select::ModelFrom::Named
    } else {
        select::ModelFrom::Recording
    };
    let host = || recorded_model(args, input);
    let hint = |item: &str| crate::sim_hint::simulated_hint(item, None);
    Ok(Some(select::items(&args.metric.metrics, host, from, hint)?))
}

/// The model `-M`'s items that are not common come from: `--model`, else the recorded one,
/// else the recorded machine's cpuid's.
fn recorded_model(args: &ReportArgs, input: &Input) -> anyhow::Result<&'static Model> {
    if let Some(name) = &args.metric.model {
        return Ok(tmetric_engine::models::find_model(name)?);
    }
    let recorded = input.model().and_then(tmetric_catalog::model);
    recorded
        .or_else(|| tmetric_catalog::model_for_cpuid(&input.cpuid()?))
        .context("the file names no CPU model: give one with --model")
}

/// `-o` must not be the input: creating the report truncates it before a byte is read (by
/// any name: the same path, a symbolic or a hard link, so device and inode are compared).
fn refuse_same_file(input: &Path, output: &Path) -> anyhow::Result<()> {
    use std::os::unix::fs::MetadataExt;
    let (Ok(i), Ok(o)) = (std::fs::metadata(input), std::fs::metadata(output)) else {
        return Ok(());
    };
    if i.dev() == o.dev() && i.ino() == o.ino() && i.is_file() {
        bail!(
            "-o {} is the input file {} (the same file{}): writing the report would destroy the recording; give another output file",
            output.display(),
            input.display(),
            if input == output { "" } else { " by another name" }
        );
    }
    Ok(())
}

/// The aggregation the flags ask for, else the recorded one (as `perf stat report`), with
/// `--per-cache`'s level.
fn aggregation_of(
    args: &ReportArgs,
    replay: &Playback,
) -> anyhow::Result<(Aggregation, Option<u32>)> {
    let asked = [
        (args.no_aggr, Aggregation::Cpu),
        (args.per_core, Aggregation::Core),
        (args.per_cache.is_some(), Aggregation::Cache),
        (args.per_cluster, Aggregation::Cluster),
        (args.per_die, Aggregation::Die),
        (args.per_socket, Aggregation::Socket),
        (args.per_node, Aggregation::Node),
        (args.per_thread, Aggregation::Thread),
    ]
    .into_iter()
    .find_map(|(on, mode)| on.then_some(mode));
    let level = match args.per_cache.as_deref() {
        Some("") | None => replay.cache_level.filter(|_| asked.is_none()),
        Some(text) => Some(crate::stat::cache_level(text).with_context(|| {
            format!("--per-cache={text}: expected a cache level such as L2, L3 or 3")
        })?),
    };
    Ok((asked.or(replay.aggr).unwrap_or(Aggregation::Global), level))
}

/// Prints `replay` as `stat` printed it, in the layout and aggregation `args` ask for.
fn print(args: &ReportArgs, replay: Playback) -> anyhow::Result<()> {
    let (aggr, level) = aggregation_of(args, &replay)?;
    let split = replay.split(aggr, level)?;
    let out = match &args.output {
        Some(path) => Sink::create(path)?,
        None => Sink::stderr(),
    };
    let colour = args.out.colour(crate::args::counts_to_terminal(args.output.as_deref()));
    let mut config = Config::new(args.out.layout());
    config.metric_only = args.metric_only;
    config.colour = colour;
    config.locale = tmetric_runtime::locale::NumericLocale::from_env();
    config.contract = replay.plan.contract();
    config.aggregation = match &split {
        Partition::Threads { .. } => Aggregation::Thread,
        _ => aggr,
    };
    config.interval = !replay.intervals.is_empty();
    // An interval record's totals were printed with --summary: perf's `summary` field.
    config.csv_summary = !replay.intervals.is_empty();
    config.csv_with_json = args.out.csv_with_json();
    // perf's config files apply to `perf stat report` as to every perf command.
    // Counts recorded with --no-scale are printed raw, as perf stat report reads them.
    tmetric_runtime::counter::set_scaling(replay.scaled);
    let perf_config = tmetric_perfopts::config::load(warn);
    if perf_config.big_num == Some(false) {
        config.big_num = false;
    }
    if perf_config.no_csv_summary == Some(true) {
        config.csv_summary = false;
    }
    config.unit_width = tmetric_print::verbose::unit_width(&replay.plan);
    config.errors = args.errors;
    config.full = args.full_metrics;
    let title = Title { target: replay.target.clone(), runs: 1 };
    let mut printer = Printer::new(out, config, title, Box::new(warn));
    printer.split = split;
    printer.tree = TreeView::new(args.tree, args.all);
    printer.interval = replay.interval;
    // As stat: the lines scripts read stay perf's.
    printer.explain =
        Explain::choose(&args.out.layout(), args.output.is_none(), args.verbose, args.full_metrics);
    printer.verbose = args.verbose;
    printer.simulated = replay.simulated.clone();
    printer.simulated_mark()?;
    if args.errors && replay.totals.is_some() && replay.reads.is_empty() {
        warn(
            "--errors: the record keeps no reads for error bars (record with --errors or -v); the metrics print without them",
        );
    }
    let mut plan = replay.plan;
    // As stat printed it: each uncore box apart under -A, merged otherwise.
    plan.set_per_box(aggr == Aggregation::Cpu);
    let failures = &replay.failures;
    for warning in plan.warnings() {
        warn(&format!("warning: {warning}"));
    }
    // Each sample is evaluated once, as stat evaluated it: an interval with the latencies
    // sampled in it.
    let mut evaluators = Evaluators::default();
    // As stat estimated each interval: from the reads inside it, a group with few turns
    // borrowing the interval before's (`tmetric_engine::interval`), when the file says which
    // reads were inside which interval; older files print the intervals scaled by time.
    let multiplexed = plan.rotation().is_some();
    let (mut before, mut earlier) = (tmetric_runtime::Snapshot::default(), Vec::new());
    for step in &replay.intervals {
        let estimate = (multiplexed && !step.reads.is_empty())
            .then(|| plan.estimate_interval(&earlier, &before, &step.reads, &step.counts));
        earlier.clear();
        if multiplexed && !step.reads.is_empty() {
            earlier.push(before.clone());
            earlier.extend_from_slice(&step.reads);
        }
        before = tmetric_engine::interval::plus(&before, &step.counts);
        let counts = estimate.as_ref().map_or(&step.counts, |e| &e.counts);
        let sample = EvalInput::new(counts, step.length.as_secs_f64())
            .with_latencies(step.latency.as_deref());
        let reads = estimate.as_ref().filter(|_| args.errors).map(|e| e.reads.as_slice());
        let from = estimate.as_ref().map_or(0, |e| e.from);
        let mut evaluated = plan.evaluate_sample_from(
            &mut evaluators,
            &sample,
            &printer.split,
            reads,
            from,
            failures,
        );
        if let Some(e) = estimate.as_ref().filter(|e| !e.scaled.is_empty()) {
            evaluated.notes.push(tmetric_engine::interval::scaled_note(&plan, e));
        }
        printer.tick(&plan, &sample, &evaluated, step.at)?;
    }
    if let Some(totals) = &replay.totals {
        // As stat printed them: the counts of anchored rotated groups estimated from the
        // turns' reads.
        let totals = &plan.estimated(totals, &replay.reads);
        let sample =
            EvalInput::new(totals, replay.elapsed.as_secs_f64()).with_rusage(replay.rusage);
        let reads = (args.errors && !replay.reads.is_empty()).then_some(replay.reads.as_slice());
        let mut evaluated =
            plan.evaluate_sample(&mut evaluators, &sample, &printer.split, reads, failures);
        evaluated.notes.extend(replay.splits.iter().cloned().map(Note::Group));
        // As stat printed it: user and system time only for a command with no other target.
        let rusage = replay.rusage.filter(|_| replay.ru_display);
        let footer = tmetric_print::stat::footer(replay.elapsed, rusage);
        let bars = args.errors && !printer.errors_inline();
        printer.totals(&plan, &sample, &evaluated, Some(&footer), bars)?;
    }
    Ok(printer.into_inner().finish()?)
}
