//! `tmetric stat`: counts events for a command (or the whole system) through the runtime,
//! evaluates tmetric's common metrics and selected model metrics over the counts, and prints
//! them as `perf stat` does: the default layout, `-x` CSV or `--json` lines, as totals or per
//! `-I` interval. Events that cannot be counted print `<not supported>` with the reason and
//! their metrics `nan`; nothing is estimated.

use std::ffi::OsString;
use std::io::{self, IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, bail};
use tmetric_catalog::Model;
use tmetric_engine::aggr::{Aggr, units_for};
use tmetric_engine::{self as engine, Evaluators, Machine, Pick, Plan, PlanOptions, PmuModel};
use tmetric_engine::{RootResult, Row, Sample, Select, Shown, Strategy};
use tmetric_runtime::{Counters, Environment, Kernel, RunOptions, Syscalls, Sysfs, Target};
use tmetric_runtime::{EventReport, SampleSpec, Sampler, SamplerOptions, TpebsMode, Workload};

use crate::models;
use crate::out::{Sink, warn};
use crate::output::{ColorChoice, paint, perf_number, plain_number};

/// `tmetric stat` flags (perf's names where perf has them).
#[derive(Debug, Clone, clap::Args)]
#[command(after_help = "Counts go to standard error, as perf's do, unless -o names a file.\n\
    Without -e or -M: task-clock, context-switches, cpu-migrations, page-faults, major-faults \
    and msr/tsc/ (where the msr PMU exists), with every common metric.\n\
    Examples:\n  tmetric stat -- make -j4\n  tmetric stat -a -I 1000 -M Software\n  \
    tmetric stat -e task-clock,cs -x, -- ./bench")]
pub struct StatArgs {
    /// Count every task on every online CPU instead of the command and its children.
    #[arg(short = 'a', long = "all-cpus")]
    pub all_cpus: bool,
    /// Print the counts of every MS milliseconds (at least 10).
    #[arg(short = 'I', long = "interval-print", value_name = "MS")]
    pub interval: Option<u64>,
    /// With -I, print the totals at the end too.
    #[arg(long, requires = "interval")]
    pub summary: bool,
    /// Events to count, comma-separated: software and hardware names, `pmu/event/`,
    /// `pmu/term=value,.../`, `subsystem:tracepoint`, tool events, `{a,b}` groups.
    #[arg(short = 'e', long = "event", value_name = "EVENTS")]
    pub events: Vec<String>,
    /// Metrics or metric groups, comma-separated: tmetric's common ones (group `Software`)
    /// or those of this machine's CPU model (see --model).
    #[arg(short = 'M', long = "metrics", value_name = "METRICS", value_delimiter = ',')]
    pub metrics: Vec<String>,
    /// The CPU model whose metrics -M may name (default: the one this machine's cpuid maps to).
    #[arg(long, value_name = "MODEL")]
    pub model: Option<String>,
    /// CSV output with this field separator: perf's fields, except that a metric's unit and
    /// name are two fields and its value keeps full precision.
    #[arg(short = 'x', long = "field-separator", value_name = "SEP", conflicts_with = "json")]
    pub separator: Option<String>,
    /// JSON lines output (`metric-value` at full precision, `metric-unit`, `metric-name`).
    #[arg(short = 'j', long)]
    pub json: bool,
    /// Write the counts to FILE instead of standard error.
    #[arg(short = 'o', long, value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// Do not count the events of metric thresholds (they only colour values).
    #[arg(long)]
    pub metric_no_threshold: bool,
    /// Do not require a metric's events to be counted in one group.
    #[arg(long)]
    pub metric_no_group: bool,
    /// Do not share groups between metrics.
    #[arg(long)]
    pub metric_no_merge: bool,
    /// Count on a simulated PMU instead of this machine's (sapphirerapids, icelake, skylakex,
    /// skylakex-nosmt, alderlake, meteorlake, amdzen4, neoverse-n2); every output then says it
    /// is simulated.
    #[arg(long, value_name = "MODEL")]
    pub pmu_sim: Option<String>,
    /// With --pmu-sim: what the simulated machine runs, a built-in workload (`default`,
    /// `phased`, `memory-bound`) or a workload JSON file (its TMA tree and other metrics'
    /// true values; see `crates/sim/src/workload.rs`).
    #[arg(long, value_name = "NAME|FILE", requires = "pmu_sim")]
    pub pmu_sim_workload: Option<String>,
    /// Give each metric an error bar: how far multiplexing may have moved it from the value
    /// its events would give counted all the time (reads the counters every 100 ms to see
    /// how their rates vary; also with -v).
    #[arg(long)]
    pub errors: bool,
    /// TopDown level 1 (or --td-level N): the model's TopdownLN metrics through a
    /// `slots`-led group; on CPUs with only the kernel's older `topdown-*` events, perf's
    /// level-1 formulas per core (needs -a). Implies --metric-only.
    #[arg(long)]
    pub topdown: bool,
    /// The TopDown level for --topdown (1 when 0 or not given).
    #[arg(long, value_name = "N", requires = "topdown")]
    pub td_level: Option<u8>,
    /// Print the metrics as the TMA tree: children under parents, nodes below their threshold
    /// hidden (see --all), the bottleneck path marked `<==` (the default for --topdown on a
    /// terminal).
    #[arg(long, conflicts_with = "no_tree")]
    pub tree: bool,
    /// With --topdown on a terminal: columns, not the tree.
    #[arg(long)]
    pub no_tree: bool,
    /// With --tree: also the nodes below their threshold (dimmed).
    #[arg(long)]
    pub all: bool,
    /// Print only metrics: one column each, with a header.
    #[arg(long)]
    pub metric_only: bool,
    /// Sample the retire latency of every `:R` input in-process (Timed PEBS, a precise
    /// sampling event with the weight struct), instead of reading it as 0 as perf does
    /// without `--record-tpebs`.
    #[arg(long)]
    pub record_tpebs: bool,
    /// Which statistic of the sampled latencies the metrics use.
    #[arg(long, value_name = "MODE", default_value = "mean", value_parser = ["mean", "min", "max", "last", "p97"], requires = "record_tpebs")]
    pub tpebs_mode: String,
    /// Retire latencies in cycles from a JSON file `{"EVENT": cycles, ...}`, for `:R` inputs
    /// when they are not sampled.
    #[arg(long, value_name = "FILE", conflicts_with = "record_tpebs")]
    pub retire_latency: Option<PathBuf>,
    /// Start counting MS milliseconds after the command starts.
    #[arg(short = 'D', long = "delay", value_name = "MS")]
    pub delay: Option<u64>,
    /// With -I: stop after N intervals (a command still running gets SIGTERM).
    #[arg(long, value_name = "N", requires = "interval", value_parser = clap::value_parser!(u64).range(1..))]
    pub interval_count: Option<u64>,
    /// Run the command N times and print the mean counts with their spread.
    #[arg(short = 'r', long = "repeat", value_name = "N", default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=100))]
    pub repeat: u32,
    /// Count on these CPUs only (a list such as `0-3,8`); implies system-wide counting there.
    #[arg(short = 'C', long = "cpu", value_name = "CPUS")]
    pub cpu_list: Option<String>,
    /// Per CPU: no aggregation over CPUs.
    #[arg(short = 'A', long = "no-aggr", conflicts_with_all = ["per_core", "per_socket", "per_die"])]
    pub no_aggr: bool,
    /// Aggregate per physical core.
    #[arg(long, conflicts_with_all = ["per_socket", "per_die"])]
    pub per_core: bool,
    /// Aggregate per die.
    #[arg(long, conflicts_with = "per_socket")]
    pub per_die: bool,
    /// Aggregate per socket (package).
    #[arg(long)]
    pub per_socket: bool,
    /// Count an existing process (every thread it has at the start) until Ctrl-C, instead of
    /// a command.
    #[arg(short = 'p', long = "pid", value_name = "PID", conflicts_with = "tid")]
    pub pid: Option<i32>,
    /// Count existing threads (comma-separated ids) until Ctrl-C, instead of a command.
    #[arg(short = 't', long = "tid", value_name = "TID", value_delimiter = ',')]
    pub tid: Vec<i32>,
    /// Per thread: one row per thread and event, `comm-tid` first, with -p or -t (the
    /// threads they have at the start), or with -a (every thread, rows that counted nothing
    /// left out).
    #[arg(long, conflicts_with_all = ["no_aggr", "per_core", "per_socket", "per_die"])]
    pub per_thread: bool,
    /// On hybrid CPUs, only the metrics of this core type.
    #[arg(long, value_name = "core|atom", value_parser = ["core", "atom"])]
    pub cputype: Option<String>,
    /// Say how the events were grouped and why, before counting.
    #[arg(short = 'v', long)]
    pub verbose: bool,
    /// Colour metric values by their thresholds: auto (on a terminal), always or never.
    #[arg(long, value_enum, default_value = "auto", value_name = "WHEN")]
    pub color: ColorChoice,
    /// The command to run and count (after `--` when it has options of its own).
    #[arg(trailing_var_arg = true, value_name = "COMMAND")]
    pub command: Vec<OsString>,
}

/// The model -M items not among the common metrics come from.
pub fn host_model(
    model: Option<&str>,
    sysfs: &Sysfs,
    proc_root: &Path,
) -> anyhow::Result<&'static Model> {
    if let Some(name) = model {
        return models::find_model(name);
    }
    let cpuid = engine::plan::cpuid_of(sysfs, proc_root)
        .context("cannot tell this machine's cpuid (no x86 /proc/cpuinfo fields or arm64 midr_el1); name a model with --model")?;
    tmetric_catalog::model_for_cpuid(&cpuid).with_context(|| {
        format!("no model of the catalogue matches this machine's cpuid `{cpuid}`; name one with --model")
    })
}

/// The metrics a `-M` list selects, in order.
pub fn select_items(
    items: &[String],
    model: Option<&str>,
    sysfs: &Sysfs,
    proc_root: &Path,
) -> anyhow::Result<Vec<Pick>> {
    let common = tmetric_catalog::common();
    let mut host: Option<&'static Model> = None;
    let mut chosen: Vec<Pick> = Vec::new();
    for item in items.iter().map(|i| i.trim()).filter(|i| !i.is_empty()) {
        let mut found = engine::select::find(item, common, None);
        if found.is_empty() {
            let model = match host {
                Some(model) => model,
                None => *host.insert(host_model(model, sysfs, proc_root).with_context(|| {
                    format!("`{item}` is not a common metric or group, so it must be a CPU model's")
                })?),
            };
            found = engine::select::find(item, common, Some(model));
            if found.is_empty() {
                let close = models::closest(item, engine::select::names(&[common, model]), 5);
                let hint = if close.is_empty() {
                    format!("`tmetric list metrics --model {}` lists them", model.path())
                } else {
                    format!("did you mean {}?", models::join_code(&close))
                };
                let defining = engine::select::defined_for(item);
                if !defining.is_empty() {
                    let shown: Vec<&str> = defining.iter().take(6).map(String::as_str).collect();
                    let more = if defining.len() > 6 {
                        format!(" and {} more", defining.len() - 6)
                    } else {
                        String::new()
                    };
                    bail!(
                        "cannot find metric or group `{item}` among the common metrics or those of {}: `{item}` is defined for {}{more}; this machine is {}; see --model, --pmu-sim or `tmetric list metrics`",
                        model.path(),
                        shown.join(", "),
                        model.path()
                    );
                }
                bail!(
                    "cannot find metric or group `{item}` among the common metrics or those of {}; {hint}",
                    model.path()
                );
            }
        }
        engine::select::add_unique(&mut chosen, found);
    }
    Ok(chosen)
}

/// Builds the plan from the flags on `machine`.
fn build(args: &StatArgs, machine: &Machine<'_>) -> anyhow::Result<Plan> {
    let literals = engine::plan::literals(machine.sysfs, machine.proc_root, system_wide(args));
    let mut plan = Plan::new(literals);
    for list in &args.events {
        plan.add_event_lists(std::slice::from_ref(list), machine.sysfs)
            .with_context(|| format!("-e {list}"))?;
    }
    let mut picks =
        select_items(&args.metrics, args.model.as_deref(), machine.sysfs, machine.proc_root)?;
    let explicit = !args.metrics.is_empty();
    if args.events.is_empty() && !explicit {
        picks = engine::select::default_picks(machine);
    } else if !explicit {
        picks.extend(engine::select::shadow_picks(&plan, machine, &literals));
    }
    if let Some(kind) = &args.cputype {
        // Hybrid metrics name their PMU (`cpu_core`, `cpu_atom`); others apply to both.
        let pmu = format!("cpu_{kind}");
        picks.retain(|p| {
            let metric_pmu = p.model.str(p.model.metrics[p.metric].pmu);
            metric_pmu == pmu || !(metric_pmu == "cpu_core" || metric_pmu == "cpu_atom")
        });
        if picks.is_empty() && !args.metrics.is_empty() {
            bail!("--cputype {kind}: none of the selected metrics is a `{pmu}` metric");
        }
    }
    let options = PlanOptions {
        thresholds: !args.metric_no_threshold,
        no_group: args.metric_no_group,
        no_merge: args.metric_no_merge,
        strategy: Strategy::Tmetric,
        system_wide: system_wide(args),
    };
    plan.add_metrics(&picks, machine, &options, explicit);
    refuse_uncountable(&plan, machine)?;
    Ok(plan)
}

/// Stops before running when no selected CPU-model metric can count a single input here (a
/// machine without a hardware PMU, such as most VMs): printing a table of `<not supported>`
/// helps nobody. Says which models define the metrics and what to do instead.
fn refuse_uncountable(plan: &Plan, machine: &Machine<'_>) -> anyhow::Result<()> {
    let common = tmetric_catalog::common();
    let model_roots: Vec<&engine::Root> =
        plan.roots.iter().filter(|r| !std::ptr::eq(r.model, common)).collect();
    if model_roots.is_empty() || machine.sysfs.core_pmu().is_some() {
        return Ok(());
    }
    let countable = model_roots.iter().any(|root| {
        root.slot_rows
            .iter()
            .flatten()
            .any(|&row| matches!(plan.rows[row].source, engine::Source::Counter(_)))
    });
    if countable {
        return Ok(());
    }
    let names: Vec<&str> =
        model_roots.iter().map(|r| r.model.str(r.model.metrics[r.metric].name)).collect();
    let first = names[0];
    let defining: Vec<String> = tmetric_catalog::MODELS
        .iter()
        .filter(|m| !m.is_sys && !m.metrics_named(first).is_empty())
        .map(|m| m.path())
        .collect();
    let shown: Vec<&str> = defining.iter().take(6).map(String::as_str).collect();
    let more = if defining.len() > 6 {
        format!(" and {} more", defining.len() - 6)
    } else {
        String::new()
    };
    bail!(
        "cannot count {} here: {}; `{first}` is defined for {}{more}; this machine is {}. \
         Try it on a simulated PMU (`--pmu-sim sapphirerapids`), plan it (`tmetric plan -M {first} --model M`), \
         or evaluate recorded counts (`tmetric eval --from-perf LOG`)",
        models_list(&names),
        machine.env.no_hardware_pmu(),
        shown.join(", "),
        model_roots[0].model.path()
    )
}

fn models_list(names: &[&str]) -> String {
    let shown: Vec<String> = names.iter().take(4).map(|n| format!("`{n}`")).collect();
    if names.len() > 4 {
        format!("{} and {} more metrics", shown.join(", "), names.len() - 4)
    } else {
        shown.join(", ")
    }
}

/// The output layout.
#[derive(Debug, Clone, PartialEq)]
pub enum Layout {
    Std,
    Csv(String),
    Json,
}

/// `1234567.5` as `1,234,567.50` (2 decimals) or `1,234,568` (none).
pub fn grouped_number(value: f64, decimals: usize) -> String {
    let text = format!("{value:.decimals$}");
    let (sign, digits) = text.strip_prefix('-').map_or(("", text.as_str()), |d| ("-", d));
    let (int, frac) = digits.split_once('.').map_or((digits, None), |(i, f)| (i, Some(f)));
    let mut out = String::new();
    for (i, c) in int.chars().enumerate() {
        if i > 0 && (int.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    match frac {
        Some(f) => format!("{sign}{out}.{f}"),
        None => format!("{sign}{out}"),
    }
}

/// perf prints counts of scaled events (`msec`, `Joules`) with 2 decimals, others without.
fn count_decimals(row: &Row) -> usize {
    if row.scale == 1.0 { 0 } else { 2 }
}

/// A metric's label: `"<unit>  <name>"` with a ScaleUnit, else the name (spec D2).
fn metric_label(model: &Model, metric: usize) -> String {
    let (unit, name) = metric_unit_name(model, metric);
    if unit.is_empty() { name.to_string() } else { format!("{unit}  {name}") }
}

/// A metric's unit (empty without a ScaleUnit) and name, the separate fields of CSV and JSON.
fn metric_unit_name(model: &Model, metric: usize) -> (&str, &str) {
    let m = &model.metrics[metric];
    let unit = if m.has_scale_unit { model.str(m.unit) } else { "" };
    (unit, model.str(m.name))
}

fn json_string(text: &str) -> String {
    serde_json::to_string(text).expect("a string serializes")
}

pub fn c_float(value: f64) -> String {
    if value.is_nan() {
        "nan".into()
    } else if value.is_infinite() {
        if value > 0.0 { "inf".into() } else { "-inf".into() }
    } else {
        format!("{value:.6}")
    }
}

pub struct Printer {
    out: Sink,
    layout: Layout,
    evaluators: Evaluators,
    /// `--metric-only`: one column per metric.
    metric_only: bool,
    /// `--topdown` from the older events: each CPU's (package, core).
    legacy: Option<Vec<(u32, (u32, u32))>>,
    /// Metric-only lines printed, for the header repeated every 25.
    lines: usize,
    /// Colour metric values by their `MetricThreshold` (red crossed, green not).
    colour: bool,
    /// `-A`/`--per-*`: the aggregation units (label, CPUs); empty for one global total.
    units: Vec<(String, Vec<i32>)>,
    /// `--per-thread`: the threads (comm, tid) as listed at the start, without those gone
    /// before their counters opened; empty otherwise.
    threads: Vec<(String, i32)>,
    /// `--per-thread -a`: leave out rows that counted nothing, as perf does (most threads
    /// of a system count nothing most of the time).
    skip_zero: bool,
    /// `--tree`: show nodes below their threshold too (`--all`).
    tree: Option<bool>,
    /// `-r`: per spec, the relative standard deviation of its count over the runs, in %.
    spread: Vec<Option<f64>>,
}

impl Printer {
    /// A printer for counts that were recorded (`tmetric report`): `units` are the
    /// aggregation units (empty for totals), `threads` the `--per-thread` threads (comm, tid)
    /// and whether rows that counted nothing are left out, `tree` is `--tree` (with `--all`).
    pub fn offline(
        out: Sink,
        layout: Layout,
        metric_only: bool,
        colour: bool,
        units: Vec<(String, Vec<i32>)>,
        threads: (Vec<(String, i32)>, bool),
        tree: Option<bool>,
    ) -> Printer {
        Printer {
            out,
            layout,
            evaluators: Evaluators::default(),
            metric_only,
            legacy: None,
            lines: 0,
            colour,
            units,
            threads: threads.0,
            skip_zero: threads.1,
            tree,
            spread: Vec::new(),
        }
    }

    /// Flushes and reports a write error.
    pub fn finish(self) -> anyhow::Result<()> {
        self.out.finish()
    }

    /// Prints every shown row of `sample`; `at` is the interval timestamp.
    fn rows(&mut self, plan: &Plan, sample: &Sample<'_>, at: Option<Duration>) -> io::Result<()> {
        if self.legacy.is_some() {
            return self.legacy_topdown(plan, sample, at);
        }
        if self.tree.is_some() {
            return self.tree_view(plan, sample, at);
        }
        if self.metric_only {
            return self.metric_columns(plan, sample, at);
        }
        if !self.threads.is_empty() {
            return self.thread_rows(plan, sample, at);
        }
        if self.units.is_empty() {
            return self.rows_for(plan, sample, at, None, None);
        }
        for (label, cpus) in self.units.clone() {
            // Each unit evaluates over its own CPUs' counts, as perf's aggregation does.
            let counts = sample.counts.on_cpus(&cpus);
            let unit = Sample { counts: &counts, ..*sample };
            self.rows_for(plan, &unit, at, Some(Unit::Cpus(&label, cpus.len())), None)?;
        }
        Ok(())
    }

    /// `--per-thread`: perf's order, event by event and, within an event, thread by thread;
    /// each thread's metrics are evaluated over that thread's counts alone.
    fn thread_rows(
        &mut self,
        plan: &Plan,
        sample: &Sample<'_>,
        at: Option<Duration>,
    ) -> io::Result<()> {
        let threads = self.threads.clone();
        let counts: Vec<_> = threads.iter().map(|(_, tid)| sample.counts.of_thread(*tid)).collect();
        for (r, _) in plan.rows.iter().enumerate().filter(|(_, row)| row.show) {
            for ((comm, tid), counts) in threads.iter().zip(&counts) {
                let unit = Sample { counts, ..*sample };
                self.rows_for(plan, &unit, at, Some(Unit::Thread(comm, *tid)), Some(r))?;
            }
        }
        Ok(())
    }

    /// The rows of one aggregation unit, or of the total (`unit` None); `only` limits them
    /// to one row of the plan.
    fn rows_for(
        &mut self,
        plan: &Plan,
        sample: &Sample<'_>,
        at: Option<Duration>,
        unit: Option<Unit<'_>>,
        only: Option<usize>,
    ) -> io::Result<()> {
        let results = plan.evaluate(&mut self.evaluators, sample);
        let time = match (&self.layout, at) {
            (Layout::Std, Some(at)) => format!("{:>6}.{:09} ", at.as_secs(), at.subsec_nanos()),
            (Layout::Csv(sep), Some(at)) => {
                format!("{}.{:09}{sep}", at.as_secs(), at.subsec_nanos())
            }
            (Layout::Json, Some(at)) => {
                format!("\"interval\" : {}.{:09}, ", at.as_secs(), at.subsec_nanos())
            }
            (_, None) => String::new(),
        };
        let per_cpu = matches!(unit, Some(Unit::Cpus(label, _)) if label.starts_with("CPU"));
        let prefix = match (&self.layout, unit) {
            (_, None) => time,
            (layout, Some(Unit::Thread(comm, tid))) => thread_prefix(layout, &time, comm, tid),
            (Layout::Std, Some(Unit::Cpus(label, _))) if per_cpu => format!("{time}{label:<8}"),
            (Layout::Std, Some(Unit::Cpus(label, n))) => format!("{time}{label:<12}{n:>4} "),
            (Layout::Csv(sep), Some(Unit::Cpus(label, _))) if per_cpu => {
                format!("{time}{label}{sep}")
            }
            (Layout::Csv(sep), Some(Unit::Cpus(label, n))) => {
                format!("{time}{label}{sep}{n}{sep}")
            }
            (Layout::Json, Some(Unit::Cpus(label, _))) if per_cpu => {
                format!("{time}\"cpu\" : \"{}\", ", label.trim_start_matches("CPU"))
            }
            (Layout::Json, Some(Unit::Cpus(label, n))) => {
                format!("{time}\"aggregate-number\" : {n}, \"unit\" : \"{label}\", ")
            }
        };
        let thread = matches!(unit, Some(Unit::Thread(..)));
        let rows =
            plan.rows.iter().enumerate().filter(|(i, r)| r.show && only.is_none_or(|o| o == *i));
        for (_, row) in rows {
            let state = engine::eval::shown(plan, row, sample);
            if thread
                && self.skip_zero
                && !matches!(state, Shown::Value { count, .. } if count != 0.0)
            {
                continue;
            }
            // (label, value, has ScaleUnit, unit, name)
            let metrics: Vec<(String, f64, bool, &str, &str)> = row
                .roots
                .iter()
                .map(|&r| {
                    let root = &plan.roots[r];
                    let (model, m) = (root.model, root.metric);
                    let result: &RootResult = &results[r];
                    let (unit, name) = metric_unit_name(model, m);
                    let scaled = model.metrics[m].has_scale_unit;
                    (metric_label(model, m), result.scaled(model, m), scaled, unit, name)
                })
                .collect();
            let crossed: Vec<Option<bool>> =
                row.roots.iter().map(|&r| results[r].threshold).collect();
            let (running, enabled) = match state {
                Shown::Value { running, enabled, .. } => (running, enabled),
                _ => (0, 0),
            };
            match &self.layout {
                Layout::Std => {
                    let count = match state {
                        Shown::NotSupported => "<not supported>".to_string(),
                        Shown::NotCounted => "<not counted>".to_string(),
                        Shown::Value { count, .. } => grouped_number(count, count_decimals(row)),
                    };
                    let mut line = format!("{prefix}{count:>18} {:<4} {:<32}", row.unit, row.name);
                    let spread = match row.source {
                        engine::Source::Counter(spec) => self.spread.get(spec).copied().flatten(),
                        _ => None,
                    };
                    let run = (running != enabled)
                        .then(|| format!("  ({:.2}%)", 100.0 * running as f64 / enabled as f64));
                    let run = match (run, spread) {
                        (run, Some(sd)) => {
                            Some(format!("{}  ( +- {sd:.2}% )", run.unwrap_or_default()))
                        }
                        (run, None) => run,
                    };
                    if metrics.is_empty()
                        && let Some(run) = &run
                    {
                        line.push_str(&" ".repeat(38));
                        line.push_str(run);
                    }
                    for (i, (label, value, scaled, _, _)) in metrics.iter().enumerate() {
                        if i > 0 {
                            writeln!(self.out, "{}", line.trim_end())?;
                            line = format!("{prefix}{}", " ".repeat(49));
                        }
                        let number = perf_number(*value, *scaled);
                        let width = 38usize.saturating_sub(3 + number.len() + 1);
                        let number = paint(&number, crossed[i], self.colour);
                        line.push_str(&format!(" # {number} {label:<width$}"));
                        if i + 1 == metrics.len()
                            && let Some(run) = &run
                        {
                            line.push_str(run);
                        }
                    }
                    writeln!(self.out, "{}", line.trim_end())?;
                }
                Layout::Csv(sep) => {
                    let count = match state {
                        Shown::NotSupported => "<not supported>".to_string(),
                        Shown::NotCounted => "<not counted>".to_string(),
                        Shown::Value { count, .. } => format!("{count:.*}", count_decimals(row)),
                    };
                    let percent = if running == enabled {
                        100.0
                    } else {
                        100.0 * running as f64 / enabled as f64
                    };
                    let head = format!(
                        "{prefix}{count}{sep}{}{sep}{}{sep}{running}{sep}{percent:.2}",
                        row.unit, row.name
                    );
                    // perf's fields, except that the metric's unit and name are two fields
                    // (perf joins them in one) and its value keeps full precision.
                    if metrics.is_empty() {
                        writeln!(self.out, "{head}{sep}{sep}{sep}")?;
                    }
                    for (i, (_, value, _, unit, name)) in metrics.iter().enumerate() {
                        let lead = if i == 0 {
                            head.clone()
                        } else {
                            format!("{prefix}{}", sep.repeat(4))
                        };
                        // NaN and infinities print empty, as in perf's CSV.
                        let value =
                            if value.is_finite() { plain_number(*value) } else { String::new() };
                        writeln!(self.out, "{lead}{sep}{value}{sep}{unit}{sep}{name}")?;
                    }
                }
                Layout::Json => {
                    let count = match state {
                        Shown::NotSupported => json_string("<not supported>"),
                        Shown::NotCounted => json_string("<not counted>"),
                        Shown::Value { count, .. } => json_string(&c_float(count)),
                    };
                    let percent = if running == enabled {
                        100.0
                    } else {
                        100.0 * running as f64 / enabled as f64
                    };
                    let head = format!(
                        "{{{prefix}\"counter-value\" : {count}, \"unit\" : {}, \"event\" : {}, \"event-runtime\" : {running}, \"pcnt-running\" : {percent:.2}",
                        json_string(&row.unit),
                        json_string(&row.name)
                    );
                    if metrics.is_empty() {
                        writeln!(self.out, "{head}}}")?;
                    }
                    for (i, (_, value, _, unit, name)) in metrics.iter().enumerate() {
                        let lead = if i == 0 { format!("{head}, ") } else { format!("{{{prefix}") };
                        writeln!(
                            self.out,
                            "{lead}\"metric-value\" : {}, \"metric-unit\" : {}, \"metric-name\" : {}}}",
                            json_string(&plain_number(*value)),
                            json_string(unit),
                            json_string(name)
                        )?;
                    }
                }
            }
        }
        Ok(())
    }
}

/// One aggregation unit of the output.
#[derive(Debug, Clone, Copy)]
enum Unit<'a> {
    /// `-A`/`--per-*`: the label (`CPU3`, `S0-D0-C1`, ...) and how many CPUs it sums.
    Cpus(&'a str, usize),
    /// `--per-thread`: the thread's comm and id.
    Thread(&'a str, i32),
}

/// perf's `comm-tid` column: `%16s-%-7d ` in the default layout, `comm-tid,` in CSV,
/// `"thread" : "comm-tid"` in JSON.
pub fn thread_prefix(layout: &Layout, time: &str, comm: &str, tid: i32) -> String {
    match layout {
        Layout::Std => format!("{time}{comm:>16}-{tid:<7} "),
        Layout::Csv(sep) => format!("{time}{comm}-{tid}{sep}"),
        Layout::Json => format!("{time}\"thread\" : {}, ", json_string(&format!("{comm}-{tid}"))),
    }
}

/// Why rows print `<not supported>`/`<not counted>` and metrics `nan`, and how the groups
/// were opened when the kernel refused some.
fn notes<S: Syscalls>(
    plan: &Plan,
    printer: &mut Printer,
    counters: &Counters<S>,
    env: &Environment,
    sample: &Sample<'_>,
) -> Vec<String> {
    let failures = open_failures(plan, counters, env);
    printer.notes_for(plan, sample, &failures, &split_notes(plan, counters))
}

impl Printer {
    /// The notes of `sample`: `failures` per spec (why the kernel refused it), each thread's
    /// own notes with `--per-thread`, then `splits` (the groups the kernel refused).
    pub fn notes_for(
        &mut self,
        plan: &Plan,
        sample: &Sample<'_>,
        failures: &[Option<String>],
        splits: &[String],
    ) -> Vec<String> {
        let failure = |spec: usize| failures.get(spec).cloned().flatten();
        let results = plan.evaluate(&mut self.evaluators, sample);
        let mut notes = plan.notes(&results, sample, failure);
        if !self.threads.is_empty() && !self.skip_zero {
            // Each thread's rows were evaluated over its own counts: a thread that never ran
            // (a sleeping main thread) has `<not counted>` rows and metrics read from 0, which
            // the totals do not show. Threads with the same note share it.
            let mut per_thread: Vec<(String, Vec<String>)> = Vec::new();
            for (comm, tid) in self.threads.clone() {
                let counts = sample.counts.of_thread(tid);
                let unit = Sample { counts: &counts, ..*sample };
                let results = plan.evaluate(&mut self.evaluators, &unit);
                for note in plan.notes(&results, &unit, failure) {
                    if notes.contains(&note) {
                        continue;
                    }
                    let label = format!("{comm}-{tid}");
                    match per_thread.iter_mut().find(|(n, _)| *n == note) {
                        Some((_, labels)) => labels.push(label),
                        None => per_thread.push((note, vec![label])),
                    }
                }
            }
            for (note, labels) in per_thread {
                let labels: Vec<&str> = labels.iter().map(String::as_str).collect();
                notes.push(format!("{}: {note}", names_summary(&labels)));
            }
        }
        notes.extend(splits.iter().cloned());
        notes
    }
}

/// Per spec, why the kernel refused it (the text after its name in the notes).
pub fn open_failures<S: Syscalls>(
    plan: &Plan,
    counters: &Counters<S>,
    env: &Environment,
) -> Vec<Option<String>> {
    (0..plan.specs.len())
        .map(|spec| {
            counters.failure(spec).map(|failure| {
                let cpu = failure.cpu.map(|c| format!(" (on CPU {c})")).unwrap_or_default();
                format!("{cpu}: {}", env.explain(failure.errno, &plan.events[spec]))
            })
        })
        .collect()
}

/// The groups the kernel refused, as notes.
pub fn split_notes<S: Syscalls>(plan: &Plan, counters: &Counters<S>) -> Vec<String> {
    counters
        .splits()
        .iter()
        .map(|split| {
            let names: Vec<&str> =
                split.events.iter().map(|&e| plan.specs[e].name.as_str()).collect();
            let kept = if split.kept.is_empty() {
                String::new()
            } else {
                let kept: Vec<&str> =
                    split.kept.iter().map(|&e| plan.specs[e].name.as_str()).collect();
                format!("; {} stayed together behind their `slots` leader", kept.join(", "))
            };
            format!(
                "the kernel refused the group {{{}}} ({}), so its events were counted alone and their metrics multiplexed{kept}",
                names.join(","),
                split.errno
            )
        })
        .collect()
}

/// What was counted, as the title of the totals says it.
fn target_text(args: &StatArgs, simulated: Option<&str>) -> String {
    let what = if let Some(pid) = args.pid {
        format!("process id {pid}")
    } else if !args.tid.is_empty() {
        let tids: Vec<String> = args.tid.iter().map(i32::to_string).collect();
        format!("thread id {}", tids.join(","))
    } else if let Some(list) = &args.cpu_list {
        format!("CPU(s) {list}")
    } else if args.all_cpus {
        "system wide".to_string()
    } else {
        command_text(&args.command)
    };
    match simulated {
        Some(name) => format!("{what}' on simulated PMU '{name}"),
        None => what,
    }
}

impl Printer {
    /// The totals as perf prints them: the title (default layout), the rows, the elapsed,
    /// user and system times.
    pub fn summary(
        &mut self,
        plan: &Plan,
        sample: &Sample<'_>,
        what: &str,
        elapsed: Duration,
    ) -> io::Result<()> {
        if self.layout == Layout::Std {
            writeln!(self.out, "\n Performance counter stats for '{what}':\n")?;
        }
        self.rows(plan, sample, None)?;
        if self.layout == Layout::Std {
            writeln!(self.out, "\n {:>17.9} seconds time elapsed", elapsed.as_secs_f64())?;
            if let Some((user, system)) = sample.rusage {
                writeln!(self.out, "\n {:>17.9} seconds user", user.as_secs_f64())?;
                writeln!(self.out, " {:>17.9} seconds sys", system.as_secs_f64())?;
            }
            writeln!(self.out)?;
        }
        Ok(())
    }

    /// The notes after the counts: in the default layout below them, else on standard error
    /// so CSV and JSON stay parseable.
    pub fn notes(&mut self, notes: &[String]) -> io::Result<()> {
        if notes.is_empty() {
            return Ok(());
        }
        if self.layout == Layout::Std {
            writeln!(self.out, " Notes:")?;
            for note in notes {
                writeln!(self.out, "   {note}")?;
            }
            writeln!(self.out)?;
        } else {
            // Both go to standard error: the counts first, as they were printed first.
            self.out.flush()?;
            for note in notes {
                warn(note);
            }
        }
        Ok(())
    }

    /// One `-I` interval: the column header every 25 intervals, then the rows.
    pub fn interval(
        &mut self,
        plan: &Plan,
        sample: &Sample<'_>,
        number: usize,
        at: Duration,
    ) -> io::Result<()> {
        if self.layout == Layout::Std && !self.metric_only && (number - 1).is_multiple_of(25) {
            if self.threads.is_empty() {
                writeln!(self.out, "#           time             counts unit events")?;
            } else {
                writeln!(
                    self.out,
                    "#{:>15} {:>16}-{:<7} {:>18} unit events",
                    "time", "comm", "pid", "counts"
                )?;
            }
        }
        self.rows(plan, sample, Some(at))
    }
}

fn command_text(command: &[OsString]) -> String {
    command.iter().map(|a| a.to_string_lossy().into_owned()).collect::<Vec<_>>().join(" ")
}

/// Runs `tmetric stat`; returns the exit code (the workload's, as perf does).
pub fn run(args: &StatArgs) -> anyhow::Result<i32> {
    run_recording(args, None)
}

/// Runs `tmetric stat`, also writing the raw counts to `record` (`tmetric record`).
pub fn run_recording(args: &StatArgs, record: Option<&Path>) -> anyhow::Result<i32> {
    let attach = args.pid.is_some() || !args.tid.is_empty();
    if args.command.is_empty() && !system_wide(args) && !attach {
        bail!(
            "give a command to count (`tmetric stat -- COMMAND ...`), -a or -C to count CPUs until Ctrl-C, or -p/-t to count a running process"
        );
    }
    if attach && !args.command.is_empty() {
        bail!(
            "-p/-t count a running process until Ctrl-C; give either them or a command, not both"
        );
    }
    if (args.no_aggr || args.per_core || args.per_die || args.per_socket) && !system_wide(args) {
        bail!("-A, --per-core, --per-die and --per-socket split counts by CPU: add -a or -C");
    }
    check_per_thread(args, attach)?;
    if let Some(ms) = args.interval
        && ms < 10
    {
        bail!("-I {ms}: the interval must be at least 10 ms");
    }
    validate_flags(args)?;
    match &args.pmu_sim {
        Some(name) => crate::sim::run_simulated(args, name, record),
        None => {
            let sysfs = Sysfs::system();
            run_on(args, Kernel, &sysfs, Path::new("/proc"), None, record)
        }
    }
}

/// Runs `tmetric stat` with `sys` on the machine `sysfs` and `proc_root` describe;
/// `simulated` names the simulated PMU, printed with every output.
pub fn run_on<S: Syscalls + Clone>(
    args: &StatArgs,
    sys: S,
    sysfs: &Sysfs,
    proc_root: &Path,
    simulated: Option<&str>,
    record: Option<&Path>,
) -> anyhow::Result<i32> {
    // Before anything slow: a signal that comes while planning is kept for the run loop.
    let _early_signals = tmetric_runtime::signal::catch_stop_signals()
        .map_err(|e| anyhow::anyhow!("cannot catch signals: {e}"))?;
    let layout = match (&args.separator, args.json) {
        (Some(sep), _) => Layout::Csv(sep.clone()),
        (None, true) => Layout::Json,
        (None, false) => Layout::Std,
    };
    let env = Environment::probe(sysfs, proc_root);
    let model = if args.metrics.is_empty() {
        None
    } else {
        host_model(args.model.as_deref(), sysfs, proc_root).ok()
    };
    let topdown = if args.topdown {
        match topdown_mode(args, sysfs, proc_root)? {
            Some(mode) => Some(mode),
            None => {
                warn(
                    "System does not support topdown: no TopdownL metrics for this CPU model and no kernel `topdown-*` events",
                );
                return Ok(1);
            }
        }
    } else {
        None
    };
    let mut owned = args.clone();
    match &topdown {
        Some(TopdownMode::Json(group)) => {
            owned.metrics = vec![group.clone()];
            owned.metric_no_threshold = true;
            owned.metric_only = true;
        }
        Some(TopdownMode::Legacy(events)) => {
            owned.events = vec![events.join(",")];
            owned.metric_only = true;
        }
        None => {}
    }
    let args = &owned;
    let model = if args.metrics.is_empty() {
        model
    } else {
        host_model(args.model.as_deref(), sysfs, proc_root).ok()
    };
    let pmus = PmuModel::probe(sysfs, proc_root, model);
    if topdown.is_some() && pmus.nmi_watchdog {
        warn(
            "the NMI watchdog is on and holds a counter, so topdown results may be less accurate; disable it with `echo 0 > /proc/sys/kernel/nmi_watchdog`",
        );
    }
    let machine = Machine { sysfs, proc_root, env: &env, pmus: &pmus };
    let mut plan = build(args, &machine)?;
    if let Some(path) = &args.retire_latency {
        apply_retire_latency_file(&mut plan, path)?;
    }
    if args.record_tpebs || args.retire_latency.is_some() {
        // The generic "read as 0" warning is replaced by one naming what is still unknown.
        plan.warnings.retain(|w| !w.starts_with("retire latencies"));
        let unknown: Vec<&str> = plan
            .retire_events
            .iter()
            .filter(|r| {
                !args.record_tpebs && !plan.retire_latency.iter().any(|(n, _)| *n == r.name)
            })
            .map(|r| r.name.as_str())
            .collect();
        if !unknown.is_empty() {
            plan.warnings.push(format!(
                "no retire latency for {} in {}: they read as 0",
                unknown.join(", "),
                args.retire_latency.as_ref().map_or(String::new(), |p| p.display().to_string())
            ));
        }
    }
    if let Some(name) = simulated {
        warn(&format!(
            "simulated PMU `{name}`: every count below comes from a simulator, not hardware"
        ));
    }
    for warning in &plan.warnings {
        warn(&format!("warning: {warning}"));
    }
    let out = match &args.output {
        Some(path) => Sink::create(path)?,
        None => Sink::stderr(),
    };
    let legacy = match &topdown {
        Some(TopdownMode::Legacy(_)) => Some(core_map(sysfs)),
        _ => None,
    };
    let mut printer = Printer {
        out,
        layout: layout.clone(),
        evaluators: Evaluators::default(),
        metric_only: args.metric_only,
        legacy,
        lines: 0,
        colour: match args.color {
            ColorChoice::Always => true,
            ColorChoice::Never => false,
            // Counts go to standard error (or a file, never coloured).
            ColorChoice::Auto => args.output.is_none() && std::io::stderr().is_terminal(),
        } && layout == Layout::Std,
        units: Vec::new(),
        threads: Vec::new(),
        skip_zero: false,
        spread: Vec::new(),
        tree: (args.tree
            || (args.topdown
                && !args.no_tree
                && layout == Layout::Std
                && std::io::stderr().is_terminal()
                && args.output.is_none()))
        .then_some(args.all),
    };

    let mut workload = if args.command.is_empty() {
        None
    } else {
        Some(Workload::prepare(&args.command).context("cannot start the workload")?)
    };
    let threads = listed_threads(args)?;
    let target = if let Some(list) = &args.cpu_list {
        let online = sysfs.online_cpus().context("cannot list the online CPUs")?;
        let wanted = tmetric_runtime::sysfs::parse_cpu_list(list.trim())
            .with_context(|| format!("-C `{list}`: expected a CPU list such as `0-3,8`"))?;
        let offline: Vec<u32> = wanted.iter().copied().filter(|c| !online.contains(c)).collect();
        if !offline.is_empty() {
            bail!("-C `{list}`: CPU {offline:?} is not online (online: {online:?})");
        }
        Target::Cpus(wanted)
    } else if let Some(threads) = &threads {
        // perf's `-p`: every thread the process has at the start, each with its own counters.
        Target::Threads(threads.iter().map(|t| t.0).collect())
    } else if args.all_cpus {
        Target::Cpus(sysfs.online_cpus().context("cannot list the online CPUs")?)
    } else {
        // With -D the counters are enabled after the delay, not at exec.
        let on_exec = args.delay.is_none_or(|d| d == 0);
        Target::Task { pid: workload.as_ref().map_or(0, Workload::pid), on_exec }
    };
    if args.verbose {
        describe_pmus(&pmus);
        describe_plan(&plan);
    }
    printer.units = aggregation_units(args, sysfs, &target);
    // The signal pipe before the events: when descriptors run out, the events say so.
    tmetric_runtime::signal::prepare().map_err(|e| anyhow::anyhow!("cannot catch signals: {e}"))?;
    // -r N: the first N-1 runs count quietly; the last one runs as usual and the printed
    // counts are the mean of all N, with perf's `( +- x% )` spread.
    let mut earlier: Vec<tmetric_runtime::RunReport> = Vec::new();
    for _ in 1..args.repeat.max(1) {
        let mut w = Workload::prepare(&args.command).context("cannot start the workload")?;
        let t = Target::Task { pid: w.pid(), on_exec: true };
        let mut c = Counters::open_with(
            sys.clone(),
            plan.specs.clone(),
            &plan.groups,
            &plan.sticky,
            t.clone(),
        )?;
        let report = tmetric_runtime::run(
            &mut c,
            &t,
            Some(&mut w),
            &RunOptions { catch_signals: true, ..RunOptions::default() },
            |_| Ok(()),
        )?;
        if report.interrupted_by.is_some() {
            break;
        }
        earlier.push(report);
    }
    let sys_for_sampler = sys.clone();
    let mut counters =
        Counters::open_with(sys, plan.specs.clone(), &plan.groups, &plan.sticky, target.clone())?;
    if let Some(threads) = &threads
        && !threads.is_empty()
        && counters.vanished().len() == threads.len()
    {
        bail!("every thread to count had exited before its counters could be opened");
    }
    check_opened(&plan, &counters, &env)?;
    if let Some(threads) = &threads {
        let gone = counters.vanished();
        if args.verbose {
            warn(&format!(
                "counting {} threads apart, as listed at the start{}; a thread started later has no counters of its own: the kernel adds its counts to the counted thread that created it (inherit), as with perf",
                threads.len() - gone.len(),
                if gone.is_empty() {
                    String::new()
                } else {
                    format!(" ({} had exited before their counters opened)", gone.len())
                }
            ));
        }
        if args.per_thread {
            printer.threads = threads
                .iter()
                .filter(|(t, _)| !gone.contains(t))
                .map(|(t, comm)| (comm.clone(), *t))
                .collect();
            printer.skip_zero = args.all_cpus;
        }
    }
    let options = RunOptions {
        interval: args.interval.map(Duration::from_millis),
        catch_signals: true,
        delay: args.delay.map(Duration::from_millis),
        interval_count: args.interval_count.map(|n| n as usize),
        sample_every: error_bar_reads(args),
    };
    let has_workload = workload.is_some();
    let mode: TpebsMode =
        args.tpebs_mode.parse().map_err(|e| anyhow::anyhow!("--tpebs-mode: {e}"))?;
    let mut sampler = if args.record_tpebs {
        Some(start_sampler(&plan, sys_for_sampler, &target, sysfs)?)
    } else {
        None
    };
    let mut recorder = match record {
        Some(path) => {
            let facts = crate::record::HeaderFacts {
                args,
                plan: &plan,
                failures: open_failures(&plan, &counters, &env),
                splits: split_notes(&plan, &counters),
                threads: printer.threads.clone(),
                skip_zero: printer.skip_zero,
                sysfs,
                proc_root,
                model: model.map(Model::path),
                simulated,
                target: target_text(args, simulated),
                system_wide: system_wide(args),
            };
            Some(crate::record::Recorder::create(path, &crate::record::header(&facts))?)
        }
        None => None,
    };
    let report = {
        let recorder = &mut recorder;
        let plan = &plan;
        let printer = &mut printer;
        let sampler = &mut sampler;
        tmetric_runtime::run(&mut counters, &target, workload.as_mut(), &options, |tick| {
            let sample =
                Sample { counts: tick.counts, seconds: tick.length.as_secs_f64(), rusage: None };
            // Each interval's metrics use that interval's samples.
            let sampled;
            let plan = match sampler.as_mut() {
                Some(s) => {
                    let reports = s.read().map_err(|e| io::Error::other(e.to_string()))?;
                    let mut p = plan.clone();
                    p.retire_latency = latencies(&reports, mode, true);
                    sampled = p;
                    &sampled
                }
                None => plan,
            };
            if let Some(r) = recorder.as_mut() {
                let latencies = sampler.is_some().then_some(plan.retire_latency.as_slice());
                r.interval(tick.number, tick.at, tick.length, tick.counts, latencies)
                    .map_err(|e| io::Error::other(format!("{e:#}")))?;
            }
            printer.interval(plan, &sample, tick.number, tick.at)?;
            printer.out.flush()?;
            if printer.out.closed() && !has_workload {
                // Nobody reads a system-wide run any more: end it. With a workload, counting
                // goes on quietly so the workload is not disturbed and its status is kept.
                return Err(io::Error::from(io::ErrorKind::BrokenPipe));
            }
            Ok(())
        })
    };
    let report = match report {
        Ok(report) => report,
        // The reader went away during a system-wide run: nothing more to say, quietly.
        Err(tmetric_runtime::RunError::Report(err)) if err.kind() == io::ErrorKind::BrokenPipe => {
            return Ok(0);
        }
        Err(err) => return Err(err.into()),
    };
    let mut sampled: Vec<EventReport> = Vec::new();
    if let Some(s) = sampler {
        let reports = s.stop().map_err(|e| anyhow::anyhow!("--record-tpebs: {e}"))?;
        plan.retire_latency = latencies(&reports, mode, false);
        report_samples(&reports, args.verbose, layout == Layout::Json, &mut printer.out)?;
        sampled = reports;
    }
    let report = if earlier.is_empty() {
        report
    } else {
        earlier.push(report);
        printer.spread = tmetric_runtime::RunReport::spread_of(&earlier, plan.specs.len());
        tmetric_runtime::RunReport::mean_of(earlier).expect("at least this run")
    };
    // --interval-count ended the run and stopped the command: that is not its failure.
    let stopped = args.interval_count.is_some_and(|n| report.ticks as u64 >= n);
    if let Some(signal) = report.exit.and_then(|e| e.signal()).filter(|_| !stopped) {
        warn(&format!("the workload was killed by signal {signal} ({})", signal_name(signal)));
    }
    let rusage = report.exit.map(|e| (e.user, e.system));
    let sample = Sample { counts: &report.totals, seconds: report.elapsed.as_secs_f64(), rusage };
    if let Some(r) = recorder {
        let latencies = args.record_tpebs.then_some(plan.retire_latency.as_slice());
        let code = if stopped { 0 } else { report.exit.map_or(0, |e| e.shell_code()) };
        r.finish(&crate::record::RunEnd {
            totals: &report.totals,
            elapsed: report.elapsed,
            rusage,
            exit: code,
            intervals: report.ticks,
            samples: &sampled,
            latencies,
        })?;
    }
    if args.interval.is_none() || args.summary {
        printer.summary(&plan, &sample, &target_text(args, simulated), report.elapsed)?;
    }
    let notes = notes(&plan, &mut printer, &counters, &env, &sample);
    printer.notes(&notes)?;
    if error_bar_reads(args).is_some() {
        let bars = plan.uncertainties(&mut Evaluators::default(), &report.samples, sample.seconds);
        printer.error_bars(&plan, &sample, &bars)?;
    }
    printer.out.finish()?;
    Ok(if stopped { 0 } else { report.exit.map_or(0, |e| e.shell_code()) })
}

/// `--per-thread`'s rules, perf 6.12's: only with -p, -t or -a (not -C), because a
/// command's threads do not exist yet when counting starts and -C counts CPUs, not threads;
/// and not with the metric-only layouts, which have no thread column.
fn check_per_thread(args: &StatArgs, attach: bool) -> anyhow::Result<()> {
    if !args.per_thread {
        return Ok(());
    }
    if !(attach || (args.all_cpus && args.cpu_list.is_none())) {
        bail!(
            "The --per-thread option is only available when monitoring via -p -t -a options: a command's threads do not exist yet when counting starts and -C counts CPUs, so start the command first and give -p PID"
        );
    }
    if args.metric_only {
        bail!("--metric-only is not supported with --per-thread");
    }
    if args.topdown {
        bail!("--topdown is not supported with --per-thread: it prints metric-only columns");
    }
    if args.tree {
        bail!("--tree is not supported with --per-thread");
    }
    Ok(())
}

/// The threads of `-p`, `-t` and `--per-thread -a`, each with its `comm`, listed once under
/// the real `/proc` (a simulated PMU still counts real tasks); `None` for other targets.
fn listed_threads(args: &StatArgs) -> anyhow::Result<Option<Vec<(i32, String)>>> {
    let proc_root = Path::new("/proc");
    let comm = |path: PathBuf| {
        std::fs::read_to_string(path).map(|c| c.trim_end_matches('\n').to_string()).ok()
    };
    if let Some(pid) = args.pid {
        let tids = task_ids(&proc_root.join(pid.to_string()).join("task"))
            .with_context(|| format!("-p {pid}: no such process"))?;
        let threads: Vec<(i32, String)> = tids
            .into_iter()
            .filter_map(|t| comm(proc_root.join(format!("{pid}/task/{t}/comm"))).map(|c| (t, c)))
            .collect();
        if threads.is_empty() {
            bail!("-p {pid}: the process has no threads left (it is exiting)");
        }
        return Ok(Some(threads));
    }
    if !args.tid.is_empty() {
        let mut threads = Vec::new();
        for &tid in &args.tid {
            let name = comm(proc_root.join(format!("{tid}/comm")))
                .filter(|_| tid > 0)
                .with_context(|| {
                    format!(
                        "-t {tid}: no such thread ({} has no comm)",
                        proc_root.join(tid.to_string()).display()
                    )
                })?;
            if !threads.iter().any(|(t, _)| *t == tid) {
                threads.push((tid, name));
            }
        }
        return Ok(Some(threads));
    }
    if args.per_thread && args.all_cpus {
        let mut threads = Vec::new();
        let entries = std::fs::read_dir(proc_root).context("cannot list /proc")?;
        let mut pids: Vec<i32> =
            entries.filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok()).collect();
        pids.sort_unstable();
        for pid in pids {
            // A process that ended while /proc was read has no threads to count.
            let Ok(tids) = task_ids(&proc_root.join(format!("{pid}/task"))) else { continue };
            threads.extend(tids.into_iter().filter_map(|t| {
                comm(proc_root.join(format!("{pid}/task/{t}/comm"))).map(|c| (t, c))
            }));
        }
        return Ok(Some(threads));
    }
    Ok(None)
}

/// The numeric entries of a `/proc/PID/task` directory, in ascending order.
fn task_ids(dir: &Path) -> io::Result<Vec<i32>> {
    let mut tids: Vec<i32> = std::fs::read_dir(dir)?
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
        .collect();
    tids.sort_unstable();
    Ok(tids)
}

/// Flag checks made before anything runs: empty `-e`/`-M` lists and an unknown `--model`
/// are usage errors even where nothing would read them.
fn validate_flags(args: &StatArgs) -> anyhow::Result<()> {
    if args.repeat > 1 && (args.command.is_empty() || args.interval.is_some()) {
        bail!(
            "-r {} repeats a command and prints the mean of its counts: give a command, without -I",
            args.repeat
        );
    }
    for list in &args.events {
        let groups =
            tmetric_runtime::event::split_list(list).with_context(|| format!("-e {list}"))?;
        if groups.iter().all(Vec::is_empty) {
            bail!(
                "-e `{}` names no event; give a comma-separated list such as `-e task-clock,page-faults` (`tmetric list events` lists them)",
                list.escape_debug()
            );
        }
    }
    if !args.metrics.is_empty() && args.metrics.iter().all(|m| m.trim().is_empty()) {
        bail!("-M names no metric or group; give a comma-separated list such as `-M Software`");
    }
    if let Some(name) = &args.model {
        models::find_model(name).context("--model")?;
    }
    Ok(())
}

/// After opening: say once when events count user mode only (perf's `exclude_kernel`
/// fallback), and fail when nothing at all could be counted.
fn check_opened<S: Syscalls>(
    plan: &Plan,
    counters: &Counters<S>,
    env: &Environment,
) -> anyhow::Result<()> {
    let user_only: Vec<&str> = (0..plan.specs.len())
        .filter(|&i| counters.user_only(i))
        .map(|i| plan.specs[i].name.as_str())
        .collect();
    if !user_only.is_empty() {
        let paranoid = std::fs::read_to_string("/proc/sys/kernel/perf_event_paranoid")
            .map(|t| t.trim().to_string())
            .unwrap_or_else(|_| "?".into());
        warn(&format!(
            "kernel.perf_event_paranoid is {paranoid} and tmetric has no CAP_PERFMON: counting user mode only (exclude_kernel), as perf does, for {}",
            names_summary(&user_only)
        ));
    }
    if !plan.specs.is_empty() && counters.descriptors() == 0 {
        let mut reasons: Vec<String> = Vec::new();
        for (i, event) in plan.events.iter().enumerate() {
            if let Some(failure) = counters.failure(i) {
                let why = env.explain(failure.errno, event);
                if !reasons.contains(&why) {
                    reasons.push(why);
                }
            }
        }
        bail!("nothing could be counted: {}", reasons.join("; "));
    }
    Ok(())
}

/// Up to 8 names, then how many more.
fn names_summary(names: &[&str]) -> String {
    if names.len() <= 8 {
        names.join(", ")
    } else {
        format!("{} and {} more", names[..8].join(", "), names.len() - 8)
    }
}

/// `--record-tpebs`: one precise sampling event per `:R` input, on the CPUs or task counted.
fn start_sampler<S: Syscalls>(
    plan: &Plan,
    sys: S,
    target: &Target,
    sysfs: &Sysfs,
) -> anyhow::Result<Sampler<S>> {
    let mut specs = Vec::new();
    for r in &plan.retire_events {
        let event = r.event.as_ref().map_err(|why| {
            anyhow::anyhow!(
                "--record-tpebs: cannot sample `{}` (for {}): {why}",
                r.name,
                r.metrics.join(", ")
            )
        })?;
        let mut attr = event.attr.clone();
        // Timed PEBS: a precise event; the retire latency is the weight struct's var3_w.
        attr.precise_ip = 1;
        specs.push(SampleSpec { name: r.name.clone(), attr, cpus: event.cpus.clone() });
    }
    if specs.is_empty() {
        bail!("--record-tpebs: no selected metric has a retire-latency (`:R`) input");
    }
    // The sampler follows a task with `inherit`: the process of -p, the first thread of -t.
    let target = match target {
        Target::Threads(tids) => {
            Target::Task { pid: tids.first().copied().unwrap_or(0), on_exec: false }
        }
        other => other.clone(),
    };
    let options = SamplerOptions {
        task_cpus: match target {
            Target::Task { .. } | Target::Threads(_) => sysfs.online_cpus().unwrap_or_default(),
            Target::Cpus(_) => Vec::new(),
        },
        ..SamplerOptions::default()
    };
    Sampler::start(sys, &specs, &target, &options).map_err(|e| {
        anyhow::anyhow!("--record-tpebs: the sampler cannot start: {e}; without it, --retire-latency FILE gives the values")
    })
}

/// The retire latency each `:R` input gets from its samples (0 with none, as perf does).
fn latencies(reports: &[EventReport], mode: TpebsMode, interval: bool) -> Vec<(String, f64)> {
    reports
        .iter()
        .map(|r| {
            let summary = if interval { &r.interval } else { &r.total };
            let value = summary.value(mode).unwrap_or(0.0);
            (r.name.clone(), value)
        })
        .collect()
}

/// `-v` (and `-j`): per sampled event, the sample statistics.
fn report_samples(
    reports: &[EventReport],
    verbose: bool,
    json: bool,
    out: &mut Sink,
) -> io::Result<()> {
    for r in reports {
        let t = &r.total;
        if json {
            let line = serde_json::json!({
                "tpebs-event": r.name, "samples": t.count, "lost": r.kernel_lost.unwrap_or(t.lost),
                "mean": t.mean, "min": t.min, "max": t.max, "last": t.last, "p97": t.p97,
            });
            writeln!(out, "{line}")?;
        } else if verbose {
            let show = |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{v:.1}"));
            warn(&format!(
                "retire latency of {}: {} samples ({} lost), mean {}, min {}, max {}, last {}, p97 {} cycles",
                r.name,
                t.count,
                r.kernel_lost.unwrap_or(t.lost),
                show(t.mean),
                show(t.min),
                show(t.max),
                show(t.last),
                show(t.p97)
            ));
        }
        if r.kernel_lost.unwrap_or(t.lost) > 0 {
            warn(&format!(
                "--record-tpebs: {} samples of {} were lost (the reader fell behind)",
                r.kernel_lost.unwrap_or(t.lost),
                r.name
            ));
        }
    }
    Ok(())
}

/// `--retire-latency FILE`: `{"EVENT": cycles}`. A key names a `:R` input as printed
/// (`cpu_core/MEM_INST_RETIRED.STLB_HIT_LOADS/R`) or just its event (`MEM_INST_RETIRED.STLB_HIT_LOADS`),
/// in any case.
fn apply_retire_latency_file(plan: &mut Plan, path: &Path) -> anyhow::Result<()> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("--retire-latency {}: cannot read it", path.display()))?;
    let map: serde_json::Map<String, serde_json::Value> =
        serde_json::from_str(text.trim_start_matches('\u{feff}')).with_context(|| {
            format!(
                "--retire-latency {}: expected a JSON object {{\"EVENT\": cycles, ...}}",
                path.display()
            )
        })?;
    let bare = |name: &str| -> String {
        let name = name.trim_end_matches('/').trim_end_matches(":R").trim_end_matches("/R");
        let name = name.rsplit('/').next().unwrap_or(name);
        name.to_ascii_lowercase()
    };
    let mut unused = Vec::new();
    for (key, value) in &map {
        let Some(cycles) = value.as_f64().filter(|v| v.is_finite() && *v >= 0.0) else {
            bail!(
                "--retire-latency {}: `{key}` must be a number of cycles, not {value}",
                path.display()
            );
        };
        let matched: Vec<String> = plan
            .retire_events
            .iter()
            .filter(|r| r.name.eq_ignore_ascii_case(key) || bare(&r.name) == bare(key))
            .map(|r| r.name.clone())
            .collect();
        if matched.is_empty() {
            unused.push(key.as_str());
        }
        for name in matched {
            plan.retire_latency.retain(|(n, _)| *n != name);
            plan.retire_latency.push((name, cycles));
        }
    }
    if !unused.is_empty() {
        warn(&format!(
            "--retire-latency {}: no selected metric reads {}",
            path.display(),
            unused.join(", ")
        ));
    }
    Ok(())
}

/// `-a` or `-C`: counting CPUs rather than a task.
fn system_wide(args: &StatArgs) -> bool {
    args.all_cpus || args.cpu_list.is_some()
}

/// The aggregation units of `-A`, `--per-core`, `--per-die` and `--per-socket`, perf's labels
/// (`CPU3`, `S0-D0-C1`, `S0-D0`, `S0`) with their CPUs; empty without one of them.
fn aggregation_units(args: &StatArgs, sysfs: &Sysfs, target: &Target) -> Vec<(String, Vec<i32>)> {
    let Target::Cpus(cpus) = target else { return Vec::new() };
    let aggr = if args.no_aggr {
        Aggr::Cpu
    } else if args.per_core {
        Aggr::Core
    } else if args.per_die {
        Aggr::Die
    } else if args.per_socket {
        Aggr::Socket
    } else {
        return Vec::new();
    };
    units_for(cpus, aggr, |cpu| sysfs.cpu_place(cpu))
}

/// `-v`: the counters tmetric assumed per PMU and where the numbers came from (sysfs
/// `caps/`, `counter.json`, or a documented vendor default for trees without one).
fn describe_pmus(pmus: &PmuModel) {
    for pmu in &pmus.pmus {
        warn(&format!(
            "PMU {}: {} general + {} fixed counters ({}){}",
            pmu.name,
            pmu.general,
            pmu.fixed,
            pmu.source,
            if pmu.adjustments.is_empty() {
                String::new()
            } else {
                format!("; {}", pmu.adjustments.join("; "))
            }
        ));
    }
}

/// `-v`: how the events were grouped, per group, and where each metric's events landed.
fn describe_plan(plan: &Plan) {
    for (g, group) in plan.groups.iter().enumerate() {
        let names: Vec<&str> = group.iter().map(|&s| plan.specs[s].name.as_str()).collect();
        warn(&format!("group {}: {{{}}}", g + 1, names.join(",")));
    }
    for root in &plan.roots {
        let name = root.model.str(root.model.metrics[root.metric].name);
        let how = match &root.placement {
            engine::Placement::Together { .. } => "its events count together".to_string(),
            engine::Placement::Spread { why, .. } => format!("multiplexed: {why}"),
            engine::Placement::NoCounters => "no hardware counters".to_string(),
            engine::Placement::Impossible { why } => format!("cannot be counted: {why}"),
        };
        warn(&format!("{name}: {how}"));
    }
}

/// How `--topdown` measures on this machine.
#[derive(Debug, Clone, PartialEq)]
enum TopdownMode {
    /// The model's `TopdownLN` metric group.
    Json(String),
    /// The kernel's older `topdown-*` events (seed 000's formulas).
    Legacy(Vec<String>),
}

/// `--topdown` on this machine: the model's TopdownL metrics when it has them, else the
/// kernel's older events, else `None` (no topdown support).
fn topdown_mode(
    args: &StatArgs,
    sysfs: &Sysfs,
    proc_root: &Path,
) -> anyhow::Result<Option<TopdownMode>> {
    let level = args.td_level.unwrap_or(1).max(1);
    if sysfs.core_pmu().is_none() {
        // No core PMU (a VM without a virtual PMU): neither path can count.
        return Ok(None);
    }
    if let Ok(model) = host_model(args.model.as_deref(), sysfs, proc_root) {
        let max = (1..=9u8).filter(|l| !model.select(&format!("TopdownL{l}")).is_empty()).max();
        if let Some(max) = max {
            if level > max {
                bail!("--td-level {level}: {} has TopdownL1 to TopdownL{max}", model.path());
            }
            return Ok(Some(TopdownMode::Json(format!("TopdownL{level}"))));
        }
    }
    let Some(core) = sysfs.core_pmu() else { return Ok(None) };
    let events_dir = sysfs.pmu_devices().join(&core).join("events");
    if !events_dir.join("topdown-total-slots").exists() {
        return Ok(None);
    }
    if level > 1 {
        bail!("--td-level {level}: the kernel's older topdown events give level 1 only");
    }
    if !args.all_cpus {
        bail!(
            "--topdown on this CPU uses the kernel's older topdown events, which count per core: add -a (system-wide)"
        );
    }
    let events = engine::topdown::LEGACY_EVENTS
        .iter()
        .filter(|e| events_dir.join(e).exists())
        .map(|e| e.to_string())
        .collect();
    Ok(Some(TopdownMode::Legacy(events)))
}

/// Each online CPU's (package, core), from sysfs topology.
fn core_map(sysfs: &Sysfs) -> Vec<(u32, (u32, u32))> {
    let cpus = sysfs.online_cpus().unwrap_or_default();
    cpus.into_iter()
        .map(|c| {
            let (package, _, core) = sysfs.cpu_place(c);
            (c, (package, core))
        })
        .collect()
}

/// The usual name of a signal number.
fn signal_name(signal: i32) -> &'static str {
    match signal {
        1 => "SIGHUP",
        2 => "SIGINT",
        3 => "SIGQUIT",
        4 => "SIGILL",
        6 => "SIGABRT",
        7 => "SIGBUS",
        8 => "SIGFPE",
        9 => "SIGKILL",
        11 => "SIGSEGV",
        13 => "SIGPIPE",
        14 => "SIGALRM",
        15 => "SIGTERM",
        _ => "a signal",
    }
}

/// A legacy topdown column: wide enough for `% <label>`.
fn legacy_width(label: &str) -> usize {
    (label.len() + 2).max(10)
}

/// `1.5` as perf prints metric-only values (`%8.1f` with a ScaleUnit, else `%8.2f`).
fn column(value: f64, has_scale_unit: bool, width: usize) -> String {
    let text = perf_number(value, has_scale_unit);
    format!("{:>width$}", text.trim())
}

impl Printer {
    /// The time column of an interval line.
    fn interval_prefix(&self, at: Option<Duration>) -> String {
        match (&self.layout, at) {
            (Layout::Std, Some(at)) => format!("{:>6}.{:09} ", at.as_secs(), at.subsec_nanos()),
            (Layout::Csv(sep), Some(at)) => {
                format!("{}.{:09}{sep}", at.as_secs(), at.subsec_nanos())
            }
            _ => String::new(),
        }
    }

    /// `--metric-only`: a header of metric names (repeated every 25 lines in interval mode,
    /// and naming the time column in CSV so columns never shift), then one value per metric.
    fn metric_columns(
        &mut self,
        plan: &Plan,
        sample: &Sample<'_>,
        at: Option<Duration>,
    ) -> io::Result<()> {
        let results = plan.evaluate(&mut self.evaluators, sample);
        let labels: Vec<String> =
            plan.roots.iter().map(|r| metric_label(r.model, r.metric)).collect();
        let widths: Vec<usize> = labels.iter().map(|l| l.len().max(8)).collect();
        let header_due = self.lines.is_multiple_of(25);
        self.lines += 1;
        match self.layout.clone() {
            Layout::Std => {
                let prefix = self.interval_prefix(at);
                if header_due {
                    let time = if at.is_some() {
                        format!("{:<17}", "#           time")
                    } else {
                        String::new()
                    };
                    let cols: Vec<String> =
                        labels.iter().zip(&widths).map(|(l, w)| format!("{l:>w$}")).collect();
                    writeln!(self.out, "{time}{}", cols.join("  ").trim_end())?;
                }
                let cols: Vec<String> = plan
                    .roots
                    .iter()
                    .zip(&results)
                    .zip(&widths)
                    .map(|((root, result), &w)| {
                        let has = root.model.metrics[root.metric].has_scale_unit;
                        let text = column(result.scaled(root.model, root.metric), has, w);
                        paint(&text, result.threshold, self.colour)
                    })
                    .collect();
                writeln!(self.out, "{prefix}{}", cols.join("  "))?;
            }
            Layout::Csv(sep) => {
                if header_due {
                    let time = if at.is_some() { format!("time{sep}") } else { String::new() };
                    writeln!(self.out, "{time}{}", labels.join(&sep))?;
                }
                let prefix = self.interval_prefix(at);
                let cols: Vec<String> = plan
                    .roots
                    .iter()
                    .zip(&results)
                    .map(|(root, result)| {
                        let v = result.scaled(root.model, root.metric);
                        if v.is_nan() { String::new() } else { format!("{v}") }
                    })
                    .collect();
                writeln!(self.out, "{prefix}{}", cols.join(&sep))?;
            }
            Layout::Json => {
                let metrics: Vec<serde_json::Value> = plan
                    .roots
                    .iter()
                    .zip(&results)
                    .map(|(root, result)| {
                        let (unit, name) = metric_unit_name(root.model, root.metric);
                        let v = result.scaled(root.model, root.metric);
                        serde_json::json!({
                            "metric-name": name,
                            "metric-unit": unit,
                            "metric-value": if v.is_finite() { serde_json::json!(v) } else { serde_json::Value::Null },
                        })
                    })
                    .collect();
                let mut line = serde_json::json!({ "metrics": metrics });
                if let Some(at) = at {
                    line["interval"] = serde_json::json!(at.as_secs_f64());
                }
                writeln!(self.out, "{line}")?;
            }
        }
        Ok(())
    }

    /// `--tree`: the TMA hierarchy. A metric is a child of `tma_X` when its groups name
    /// `tma_X_group`. Nodes whose threshold says "not a problem" are hidden (dimmed with
    /// `--all`); the bottleneck path follows, level by level, the crossed node with the
    /// largest value, as toplev marks it.
    fn tree_view(
        &mut self,
        plan: &Plan,
        sample: &Sample<'_>,
        at: Option<Duration>,
    ) -> io::Result<()> {
        let results = plan.evaluate(&mut self.evaluators, sample);
        let show_all = self.tree.unwrap_or(false);
        let names: Vec<&str> =
            plan.roots.iter().map(|r| r.model.str(r.model.metrics[r.metric].name)).collect();
        let parent_of = |i: usize| -> Option<usize> {
            let root = &plan.roots[i];
            let groups = root.model.str(root.model.metrics[root.metric].groups);
            groups.split(';').find_map(|g| {
                let parent = g.strip_suffix("_group")?;
                names.iter().position(|n| *n == parent).filter(|&p| p != i)
            })
        };
        let parents: Vec<Option<usize>> = (0..names.len()).map(parent_of).collect();
        let children = |p: Option<usize>| -> Vec<usize> {
            (0..names.len()).filter(|&i| parents[i] == p).collect()
        };
        // The bottleneck path.
        let mut path: Vec<usize> = Vec::new();
        let mut level = children(None);
        loop {
            let crossed: Vec<usize> =
                level.iter().copied().filter(|&i| results[i].threshold == Some(true)).collect();
            let pick = crossed.into_iter().max_by(|&a, &b| {
                results[a].value.partial_cmp(&results[b].value).unwrap_or(std::cmp::Ordering::Equal)
            });
            match pick {
                Some(i) => {
                    path.push(i);
                    level = children(Some(i));
                }
                None => break,
            }
        }
        if let Some(at) = at {
            writeln!(self.out, "# {:>6}.{:09}", at.as_secs(), at.subsec_nanos())?;
        }
        let mut stack: Vec<(usize, usize)> =
            children(None).into_iter().rev().map(|i| (i, 0)).collect();
        while let Some((i, depth)) = stack.pop() {
            let below = results[i].threshold == Some(false);
            if below && !show_all {
                continue;
            }
            let root = &plan.roots[i];
            let metric = &root.model.metrics[root.metric];
            let value = results[i].scaled(root.model, root.metric);
            let number = perf_number(value, metric.has_scale_unit);
            let unit = root.model.str(metric.unit);
            let mark = if path.contains(&i) { "  <==" } else { "" };
            let line = format!(
                "{}{:<w$} {number} {unit}{mark}",
                "  ".repeat(depth),
                names[i],
                w = 44 - 2 * depth.min(10)
            );
            let line = if below && self.colour { format!("\x1b[2m{line}\x1b[m") } else { line };
            writeln!(self.out, "{line}")?;
            for c in children(Some(i)).into_iter().rev() {
                stack.push((c, depth + 1));
            }
        }
        Ok(())
    }

    /// `--topdown` from the kernel's older events: seed 000's level 1 per core.
    fn legacy_topdown(
        &mut self,
        plan: &Plan,
        sample: &Sample<'_>,
        at: Option<Duration>,
    ) -> io::Result<()> {
        let cores = self.legacy.clone().unwrap_or_default();
        let mut units: Vec<(u32, u32)> = cores.iter().map(|c| c.1).collect();
        units.sort_unstable();
        units.dedup();
        let spec_of = |name: &str| plan.specs.iter().position(|s| s.name == name);
        let header_due = self.lines.is_multiple_of(25);
        self.lines += 1;
        let prefix = self.interval_prefix(at);
        let labels = ["retiring", "bad speculation", "frontend bound"];
        for (i, unit) in units.iter().enumerate() {
            let cpus: Vec<i32> =
                cores.iter().filter(|c| c.1 == *unit).map(|c| c.0 as i32).collect();
            let value = |name: &str| -> Option<f64> {
                let spec = spec_of(name)?;
                let per_cpu = sample.counts.events.get(spec)?.as_ref()?;
                let scale = plan.events[spec].scale.unwrap_or(1.0);
                Some(
                    per_cpu
                        .iter()
                        .filter(|c| cpus.contains(&c.cpu))
                        .map(|c| c.raw.scaled().unwrap_or(0) as f64 * scale)
                        .sum(),
                )
            };
            let counts = engine::topdown::LegacyCounts {
                total_slots: value("topdown-total-slots").unwrap_or(0.0),
                slots_issued: value("topdown-slots-issued").unwrap_or(0.0),
                slots_retired: value("topdown-slots-retired").unwrap_or(0.0),
                fetch_bubbles: value("topdown-fetch-bubbles").unwrap_or(0.0),
                recovery_bubbles: value("topdown-recovery-bubbles"),
            };
            let l1 = engine::topdown::level1(&counts);
            let values = [
                Some(l1.retiring),
                Some(l1.bad_speculation),
                Some(l1.frontend_bound),
                l1.backend_bound,
            ];
            let names = [labels[0], labels[1], labels[2], l1.backend_label];
            let core = format!("S{}-C{}", unit.0, unit.1);
            match self.layout.clone() {
                Layout::Std => {
                    if header_due && i == 0 {
                        let cols: Vec<String> = names
                            .iter()
                            .map(|n| format!("{:>w$}", format!("% {n}"), w = legacy_width(n)))
                            .collect();
                        let time = if at.is_some() {
                            format!("{:<17}", "#           time")
                        } else {
                            String::new()
                        };
                        writeln!(
                            self.out,
                            "{time}{:<8}{:>5}  {}",
                            "core",
                            "cpus",
                            cols.join("  ")
                        )?;
                    }
                    let cols: Vec<String> = values
                        .iter()
                        .zip(names)
                        .map(|(v, n)| {
                            let w = legacy_width(n);
                            v.map_or(format!("{:>w$}", ""), |v| {
                                let text = format!("{:>w$.1}", 100.0 * v);
                                let crossed = match engine::topdown::colour(n, v) {
                                    engine::topdown::Colour::Red => Some(true),
                                    engine::topdown::Colour::Green => Some(false),
                                    engine::topdown::Colour::Plain => None,
                                };
                                paint(&text, crossed, self.colour)
                            })
                        })
                        .collect();
                    writeln!(self.out, "{prefix}{core:<8}{:>5}  {}", cpus.len(), cols.join("  "))?;
                }
                Layout::Csv(sep) => {
                    if header_due && i == 0 {
                        let time = if at.is_some() { format!("time{sep}") } else { String::new() };
                        writeln!(self.out, "{time}core{sep}cpus{sep}{}", names.join(&sep))?;
                    }
                    let cols: Vec<String> = values
                        .iter()
                        .map(|v| v.map_or(String::new(), |v| format!("{}", 100.0 * v)))
                        .collect();
                    writeln!(
                        self.out,
                        "{prefix}{core}{sep}{}{sep}{}",
                        cpus.len(),
                        cols.join(&sep)
                    )?;
                }
                Layout::Json => {
                    let mut line = serde_json::json!({ "core": core, "cpus": cpus.len() });
                    for (n, v) in names.iter().zip(values) {
                        line[*n] =
                            v.map_or(serde_json::Value::Null, |v| serde_json::json!(100.0 * v));
                    }
                    if let Some(at) = at {
                        line["interval"] = serde_json::json!(at.as_secs_f64());
                    }
                    writeln!(self.out, "{line}")?;
                }
            }
        }
        Ok(())
    }
}

// ---------------------------------------------------------------------------------------
// Error bars (issue 23): kept apart from the printers above so the printer rework can take
// them over. What the printer must show: for every metric with `Bar::Sigma`, the value and
// `± half_width` in the metric's unit (ScaleUnit applied), e.g. `tma_l2_bound  3.1 % ± 0.4`;
// nothing for `Bar::Exact`; `± ?` with the reason for `Bar::Unknown`; in -j a
// `"metric-error"` field (the half width, unit applied) on the metric's object; in
// record/report the reads that `RunReport::samples` holds, so report can compute the same.
// ---------------------------------------------------------------------------------------

/// How often to read the counters for error bars: with `--errors` or `-v`.
fn error_bar_reads(args: &StatArgs) -> Option<Duration> {
    (args.errors || args.verbose).then(|| Duration::from_millis(100))
}

impl Printer {
    /// The error bars of the metrics of `plan` over `sample`, after the counts: a block in
    /// the default layout, else on standard error.
    fn error_bars(
        &mut self,
        plan: &Plan,
        sample: &Sample<'_>,
        bars: &[tmetric_engine::Bar],
    ) -> io::Result<()> {
        use tmetric_engine::Bar;
        let results = plan.evaluate(&mut self.evaluators, sample);
        let mut lines = Vec::new();
        for ((root, result), bar) in plan.roots.iter().zip(&results).zip(bars) {
            let model = root.model;
            let desc = &model.metrics[root.metric];
            let name = model.str(desc.name);
            let unit = model.str(desc.unit);
            let value = result.value * desc.scale;
            match bar {
                Bar::Exact => {}
                Bar::Unknown => lines.push(format!(
                    "{name:<40} {value:>12.3} {unit} ± ?: multiplexed, and the run was too short to see how its counts vary (two reads at least: 200 ms)"
                )),
                Bar::Sigma(_) => {
                    let half = bar.half_width().unwrap_or(0.0) * desc.scale;
                    lines.push(format!("{name:<40} {value:>12.3} {unit} ± {half:.3}"));
                }
            }
        }
        if lines.is_empty() {
            return Ok(());
        }
        let head = format!(
            "Error bars ({} standard deviations of the value, from reads every 100 ms; metrics whose events ran the whole time have none):",
            tmetric_engine::BAR_SIGMAS
        );
        if self.layout == Layout::Std {
            writeln!(self.out, " {head}")?;
            for line in &lines {
                writeln!(self.out, "   {line}")?;
            }
            writeln!(self.out)?;
        } else {
            self.out.flush()?;
            warn(&head);
            for line in &lines {
                warn(line);
            }
        }
        Ok(())
    }
}
