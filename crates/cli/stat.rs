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
use tmetric_engine::aggr::{self, Aggr, units_for};
use tmetric_engine::session::Session;
use tmetric_engine::view::{Split, UnitId};
use tmetric_engine::{self as engine, Machine, Pick, Plan, PlanOptions, PmuModel};
use tmetric_engine::{Sample, Select, Strategy};
use tmetric_print::{Aggregation, Config, Title};
use tmetric_runtime::{Environment, Kernel, RunOptions, Syscalls, Sysfs, Target};
use tmetric_runtime::{EventReport, SampleSpec, Sampler, SamplerOptions, TpebsMode, Workload};

use crate::models;
use crate::out::{Sink, warn};
use crate::output::ColorChoice;

/// `tmetric stat` flags (perf's names where perf has them).
#[derive(Debug, Clone, clap::Args)]
#[command(after_help = "Counts go to standard error, as perf's do, unless -o names a file.\n\
    Without -e or -M: perf's default events (task-clock, context-switches, cpu-migrations, \
    page-faults, cycles, instructions, branches, branch-misses) with perf's built-in metrics, \
    and the model's `Default` metric group where it has one.\n\
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
    #[arg(long)]
    pub summary: bool,
    /// Events to count, comma-separated, in perf's grammar: perf's names (`cycles`, `cs`,
    /// `L1-dcache-loads`), vendor events (`INST_RETIRED.ANY`), `pmu/event/`,
    /// `pmu/term=value,.../`, raw `rNNN`, `subsystem:tracepoint`, tool events, modifiers
    /// (`:u`, `:k`, ...) and `{a,b}[:mods]` groups.
    #[arg(short = 'e', long = "event", value_name = "EVENTS")]
    pub events: Vec<String>,
    /// Metrics or metric groups, comma-separated: tmetric's common ones (group `Software`)
    /// or those of this machine's CPU model (see --model).
    #[arg(short = 'M', long = "metrics", value_name = "METRICS", value_delimiter = ',')]
    pub metrics: Vec<String>,
    /// The CPU model whose metrics -M may name (default: the one this machine's cpuid maps to).
    #[arg(long, value_name = "MODEL")]
    pub model: Option<String>,
    /// CSV output with this field separator (perf's fields; `\t` for a tab).
    #[arg(short = 'x', long = "field-separator", value_name = "SEP", conflicts_with = "json")]
    pub separator: Option<String>,
    /// JSON lines output, perf's keys.
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
    /// Count on a simulated PMU instead of this machine's (sapphirerapids, icelake,
    /// skylakex, skylakex-nosmt, alderlake, meteorlake, amdzen4, neoverse-n2); every output
    /// then says it is simulated.
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
    #[arg(
        long,
        conflicts_with = "no_tree",
        default_value_if("all", clap::builder::ArgPredicate::IsPresent, "true")
    )]
    pub tree: bool,
    /// With --topdown on a terminal: columns, not the tree.
    #[arg(long)]
    pub no_tree: bool,
    /// The TMA tree with every node, those below their threshold too (marked `(below)`, or
    /// dimmed on a terminal); implies --tree.
    #[arg(long, conflicts_with = "no_tree")]
    pub all: bool,
    /// Print only metrics: one column each, with a header.
    #[arg(long)]
    pub metric_only: bool,
    /// Sample the retire latency of every `:R` input in-process (Timed PEBS, a precise
    /// sampling event with the weight struct), instead of reading it as 0 as perf does
    /// without `--record-tpebs`.
    #[arg(long)]
    pub record_tpebs: bool,
    /// Which statistic of the sampled latencies the metrics use: mean, min, max, last, or p97,
    /// the mean of the lowest 97% of the samples (the highest 3% left out; not the 97th
    /// percentile).
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
    /// Per CPU: no aggregation over CPUs (perf's `-A`, `--no-aggr`).
    #[arg(short = 'A', long = "no-aggr", conflicts_with_all = ["per_core", "per_socket", "per_die", "per_node", "per_cache", "per_cluster"])]
    pub no_aggr: bool,
    /// The same as -A (perf's `--no-merge`).
    #[arg(long = "no-merge", conflicts_with_all = ["per_core", "per_socket", "per_die", "per_node", "per_cache", "per_cluster"])]
    pub no_merge: bool,
    /// Aggregate per physical core.
    #[arg(long, conflicts_with_all = ["per_socket", "per_die", "per_node", "per_cache", "per_cluster"])]
    pub per_core: bool,
    /// Aggregate per die.
    #[arg(long, conflicts_with_all = ["per_socket", "per_node", "per_cache", "per_cluster"])]
    pub per_die: bool,
    /// Aggregate per socket (package).
    #[arg(long, conflicts_with_all = ["per_node", "per_cache", "per_cluster"])]
    pub per_socket: bool,
    /// Aggregate per NUMA node.
    #[arg(long, conflicts_with_all = ["per_cache", "per_cluster"])]
    pub per_node: bool,
    /// Aggregate per cache instance of this level (`L2`, `2`; default: the last level).
    #[arg(long, value_name = "LEVEL", num_args = 0..=1, require_equals = true, default_missing_value = "", conflicts_with = "per_cluster")]
    pub per_cache: Option<String>,
    /// Aggregate per cluster (CPUs sharing a cluster id).
    #[arg(long)]
    pub per_cluster: bool,
    /// Count an existing process (every thread it has at the start) until it exits or
    /// Ctrl-C; with a command, while the command runs (`-p PID sleep 5`: the command is only
    /// the timer and is not counted).
    #[arg(short = 'p', long = "pid", value_name = "PID", conflicts_with = "tid")]
    pub pid: Option<i32>,
    /// Count existing threads (comma-separated ids) until they all exit or Ctrl-C; with a
    /// command, while the command runs.
    #[arg(short = 't', long = "tid", value_name = "TID", value_delimiter = ',')]
    pub tid: Vec<i32>,
    /// Per thread: one row per thread and event, `comm-tid` first, with -p or -t (the
    /// threads they have at the start), or with -a (every thread, rows that counted nothing
    /// left out).
    #[arg(long, conflicts_with_all = ["no_aggr", "per_core", "per_socket", "per_die"])]
    pub per_thread: bool,
    /// Only this core PMU: legacy and bare events open on it alone, and only its metrics
    /// (`core`, `atom`, or a PMU name such as `cpu_core`, `cpu_atom`, `cpu`), as perf's.
    #[arg(long, value_name = "TYPE")]
    pub cputype: Option<String>,
    /// Detailed run: also L1 and last-level data cache events (-dd: instruction cache and
    /// TLB events too; -ddd: L1 prefetch events too).
    #[arg(short = 'd', long = "detailed", action = clap::ArgAction::Count)]
    pub detailed: u8,
    /// Null run: count no events, print only the elapsed time.
    #[arg(short = 'n', long = "null")]
    pub null_run: bool,
    /// Print no counts, messages or warnings (useful with record).
    #[arg(short = 'q', long)]
    pub quiet: bool,
    /// Group digits with the locale's thousands separator (the default without -x).
    #[arg(short = 'B', long = "big-num", overrides_with = "no_big_num")]
    pub big_num: bool,
    /// Do not group digits.
    #[arg(long = "no-big-num", overrides_with = "big_num")]
    pub no_big_num: bool,
    /// Count every event in user mode only.
    #[arg(long, conflicts_with = "all_kernel")]
    pub all_user: bool,
    /// Count every event in kernel mode only.
    #[arg(long)]
    pub all_kernel: bool,
    /// Count the events given before it only in these cgroups (names relative to the cgroup
    /// root, comma-separated: one per event, the last repeating); system-wide only.
    #[arg(short = 'G', long = "cgroup", value_name = "NAMES", value_delimiter = ',')]
    pub cgroup: Vec<String>,
    /// Count every event once per cgroup in the list (comma-separated); system-wide only.
    #[arg(long, value_name = "NAMES", value_delimiter = ',', conflicts_with = "cgroup")]
    pub for_each_cgroup: Vec<String>,
    /// With -o: append to the file instead of replacing it.
    #[arg(long, requires = "output")]
    pub append: bool,
    /// With -I on a terminal: clear the screen before each interval.
    #[arg(long)]
    pub interval_clear: bool,
    /// Stop the command (SIGTERM) and print the counts after MS milliseconds (at least 10).
    #[arg(long, value_name = "MS")]
    pub timeout: Option<u64>,
    /// With --summary and -x: no `summary` first field on the totals' lines.
    #[arg(long)]
    pub no_csv_summary: bool,
    /// With -r: print each run's elapsed time in a table.
    #[arg(long)]
    pub table: bool,
    /// tmetric's additions to perf's layouts: each metric's name beside perf's label, values
    /// at full precision, and a metric's unit and name as separate CSV fields and JSON keys
    /// (`metric-name`).
    #[arg(long)]
    pub full_metrics: bool,
    /// Say how the events were grouped and why, before counting.
    #[arg(short = 'v', long)]
    pub verbose: bool,
    /// Colour metric values by their thresholds: auto (when the counts go to a terminal:
    /// standard error, unless -o names a file), always or never.
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
    let Some(cpuid) = engine::plan::cpuid_of(sysfs, proc_root) else {
        // Say why the files could not be read when that is the reason: under a low
        // `ulimit -n` the cpuid is unknown only because no descriptor was left to read it.
        let cpuinfo = proc_root.join("cpuinfo");
        if let Err(e) = std::fs::File::open(&cpuinfo)
            && crate::sim::out_of_descriptors(&e)
        {
            bail!(
                "cannot read {}: descriptors ran out; raise the limit with `ulimit -n`",
                cpuinfo.display()
            );
        }
        bail!(
            "cannot tell this machine's cpuid (no x86 /proc/cpuinfo fields or arm64 midr_el1); name a model with --model"
        );
    };
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
    let named = model;
    let mut host: Option<&'static Model> = None;
    let mut chosen: Vec<Pick> = Vec::new();
    for item in items.iter().map(|i| i.trim()).filter(|i| !i.is_empty()) {
        // `all` is every metric of the model as well as the common ones.
        let mut found = if item.eq_ignore_ascii_case("all") {
            Vec::new()
        } else {
            engine::select::find(item, common, None)
        };
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
                    let whose = if named.is_some() { "--model names" } else { "this machine is" };
                    let hint = match models::simulated_hint(item, None) {
                        Some((flag, on)) => format!(
                            "count it on a simulated {on} with `{flag}`, or evaluate a log of such a machine with `tmetric eval --from-perf LOG --model {on}`"
                        ),
                        None => format!(
                            "evaluate a log of such a machine with `tmetric eval --from-perf LOG --model {}`",
                            shown[0]
                        ),
                    };
                    bail!(
                        "cannot find metric or group `{item}` among the common metrics or those of {}: `{item}` is defined for {}{more}; {whose} {}; {hint}",
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
    // perf's `-A`/`--no-merge` print each uncore box apart; every other mode merges them.
    plan.per_box = aggregation(args) == Aggregation::Cpu;
    if args.null_run {
        return Ok(plan);
    }
    let cputype = match &args.cputype {
        Some(text) => {
            Some(engine::events::cputype_pmu(machine.sysfs, text).map_err(anyhow::Error::msg)?)
        }
        None => None,
    };
    let model = args.model.as_deref().map(models::find_model).transpose()?;
    let tables =
        engine::events::CatalogTables::for_machine(machine.sysfs, machine.proc_root, model);
    let resolver = tmetric_runtime::event::Resolver::new(machine.sysfs)
        .with_tables(&tables)
        .with_pmu_filter(cputype.as_deref());
    for list in &args.events {
        plan.add_event_lists(std::slice::from_ref(list), &resolver)
            .with_context(|| format!("-e {list}"))?;
    }
    if !args.cgroup.is_empty() {
        // perf's -G applies to the events given before it; metrics come later.
        plan.assign_cgroups(&args.cgroup).map_err(anyhow::Error::msg).context("-G")?;
    }
    let mut picks =
        select_items(&args.metrics, args.model.as_deref(), machine.sysfs, machine.proc_root)?;
    let explicit = !args.metrics.is_empty();
    let mut default_view = false;
    if args.events.is_empty() && !explicit {
        // perf's default events, and its `Default` metric group where the model has one.
        let events = default_events(system_wide(args), machine.sysfs);
        plan.add_event_lists(&[events.join(",")], &resolver).context("perf's default events")?;
        if let Ok(model) = host_model(args.model.as_deref(), machine.sysfs, machine.proc_root) {
            picks = engine::select::find("Default", tmetric_catalog::common(), Some(model))
                .into_iter()
                .filter(|p| !std::ptr::eq(p.model, tmetric_catalog::common()))
                .collect();
            default_view = !picks.is_empty();
        }
    }
    if args.detailed > 0 {
        plan.add_event_lists(&[detailed_events(args.detailed).join(",")], &resolver)
            .context("-d's events")?;
    }
    if let (Some(kind), Some(pmu)) = (&args.cputype, &cputype) {
        // Hybrid metrics name their PMU (`cpu_core`, `cpu_atom`); others apply to both.
        picks.retain(|p| {
            let metric_pmu = p.model.str(p.model.metrics[p.metric].pmu);
            metric_pmu == pmu.as_str() || !(metric_pmu == "cpu_core" || metric_pmu == "cpu_atom")
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
    let rows_before = plan.rows.len();
    plan.add_metrics(&picks, machine, &options, explicit);
    if default_view {
        // perf prints `Default` metrics under their group's name on the line of their first
        // event, and none of their other events.
        // perf's metrics of one group share their first event (the group's leader), so
        // they print together: each group under its name, in name order, its metrics in
        // name order.
        plan.default_metrics = true;
        let key = |r: usize| {
            let root = &plan.roots[r];
            let m = &root.model.metrics[root.metric];
            (root.model.str(m.default_group), root.model.str(m.name))
        };
        let pmu_of = |r: usize| {
            let root = &plan.roots[r];
            root.model.str(root.model.metrics[root.metric].pmu).to_string()
        };
        // Per PMU (hybrid machines have one leader per core type): the row that hosts its
        // first root hosts them all.
        let mut hosts: Vec<(String, usize, Vec<usize>)> = Vec::new();
        for (row, r) in
            plan.rows.iter().enumerate().flat_map(|(i, row)| row.roots.iter().map(move |&r| (i, r)))
        {
            let pmu = pmu_of(r);
            match hosts.iter_mut().find(|h| h.0 == pmu) {
                Some(h) => h.2.push(r),
                None => hosts.push((pmu, row, vec![r])),
            }
        }
        for row in &mut plan.rows {
            row.roots.clear();
        }
        for (_, host, mut roots) in hosts {
            roots.sort_by(|&a, &b| key(a).cmp(&key(b)));
            plan.rows[host].roots = roots;
        }
        for row in &mut plan.rows[rows_before..] {
            if row.roots.is_empty() {
                row.show = false;
            }
        }
    }
    if args.all_user || args.all_kernel {
        // perf's --all-user/--all-kernel: every event counts in one mode only.
        for (spec, event) in plan.specs.iter_mut().zip(plan.events.iter_mut()) {
            for attr in [&mut spec.attr, &mut event.attr] {
                attr.exclude_kernel = args.all_user;
                attr.exclude_user = args.all_kernel;
            }
        }
    }
    if !args.for_each_cgroup.is_empty() {
        plan.expand_cgroups(&args.for_each_cgroup);
    }
    if let Err(why) = refuse_uncountable(&plan, machine, args.model.is_some()) {
        // perf prints such metrics' events `<not supported>` and goes on, and scripts rely
        // on that: say why once, then count what can be counted.
        warn(&format!("{why:#}"));
    }
    Ok(plan)
}

/// perf 6.12's default events (`add_default_attributes`): `cpu-clock` instead of
/// `task-clock` when counting CPUs, and the stalled-cycles events only where the core PMU
/// lists them.
fn default_events(system_wide: bool, sysfs: &Sysfs) -> Vec<&'static str> {
    let mut events = vec![
        if system_wide { "cpu-clock" } else { "task-clock" },
        "context-switches",
        "cpu-migrations",
        "page-faults",
        "cycles",
    ];
    let has = |name: &str| sysfs.pmu_devices().join("cpu/events").join(name).exists();
    if has("stalled-cycles-frontend") {
        events.push("stalled-cycles-frontend");
    }
    if has("stalled-cycles-backend") {
        events.push("stalled-cycles-backend");
    }
    events.extend(["instructions", "branches", "branch-misses"]);
    events
}

/// perf's `-d` (level 1), `-dd` (2) and `-ddd` (3) events.
fn detailed_events(level: u8) -> Vec<&'static str> {
    tmetric_runtime::event::legacy::DETAILED
        .iter()
        .take(level.min(3) as usize)
        .flat_map(|l| l.iter().copied())
        .collect()
}

/// Why no selected CPU-model metric can count a single input here (a machine without a
/// hardware PMU, such as most VMs): which models define the metrics and what to do instead.
fn refuse_uncountable(plan: &Plan, machine: &Machine<'_>, named: bool) -> anyhow::Result<()> {
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
    let advice = match models::simulated_hint(first, Some(model_roots[0].model)) {
        Some((flag, on)) => format!(
            "Count it on a simulated {on} (`{flag}`), plan it there (`tmetric plan -M {first} {flag}`), \
             or evaluate recorded counts (`tmetric eval --from-perf LOG`)"
        ),
        None => format!(
            "No simulated PMU has a model that defines it: plan it (`tmetric plan -M {first} --model {}`) \
             or evaluate recorded counts (`tmetric eval --from-perf LOG`)",
            model_roots[0].model.path()
        ),
    };
    bail!(
        "cannot count {} here, so its events print <not supported>: {}; `{first}` is defined for {}{more}; {} {}. {advice}",
        models_list(&names),
        machine.env.no_hardware_pmu(),
        shown.join(", "),
        if named { "--model names" } else { "this machine is" },
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

pub use crate::printer::Printer;
use crate::printer::names_summary;
pub use tmetric_print::Layout;

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

fn command_text(command: &[OsString]) -> String {
    command.iter().map(|a| a.to_string_lossy().into_owned()).collect::<Vec<_>>().join(" ")
}

/// Runs `tmetric stat`; returns the exit code (the workload's, as perf does).
pub fn run(args: &StatArgs) -> anyhow::Result<i32> {
    run_recording(args, None)
}

/// Runs `tmetric stat`, also writing the raw counts to `record` (`tmetric record`).
pub fn run_recording(
    args: &StatArgs,
    record: Option<&tmetric_record::RecordTo>,
) -> anyhow::Result<i32> {
    let attach = args.pid.is_some() || !args.tid.is_empty();
    if args.command.is_empty() && !system_wide(args) && !attach {
        // perf's `setup_system_wide`: without a command or a target, count every CPU (until
        // Ctrl-C, --interval-count or --timeout).
        let mut all = args.clone();
        all.all_cpus = true;
        return run_recording(&all, record);
    }
    if attach && args.repeat > 1 {
        bail!(
            "-r {} repeats a command to count it; -p/-t count a running process, so give -r without them",
            args.repeat
        );
    }
    let cgroups = !args.cgroup.is_empty() || !args.for_each_cgroup.is_empty();
    if (aggregation(args) != Aggregation::Global && !args.per_thread || cgroups)
        && !system_wide(args)
    {
        bail!(
            "both cgroup and no-aggregation modes only available in system-wide mode: -A, --no-merge, --per-core, --per-cache, --per-cluster, --per-die, --per-socket, --per-node, -G and --for-each-cgroup split counts by CPU or cgroup, so add -a or -C"
        );
    }
    check_per_thread(args, attach)?;
    check_perf_flags(args)?;
    if args.quiet {
        crate::out::set_quiet();
    }
    // Warnings share standard error with CSV or JSON counts unless -o names a file: keep
    // the counts' stream parseable as perf's (`tmetric -j 2>&1 | jq`). CSV warnings become
    // `#` comment lines; JSON ones are left out unless -v or a terminal reads them.
    if args.output.is_none() && !std::io::stderr().is_terminal() {
        match layout_of(args) {
            Layout::Json if !args.verbose => crate::out::set_quiet(),
            Layout::Csv(_) => crate::out::set_comment_warnings(),
            _ => {}
        }
    }
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
    record: Option<&tmetric_record::RecordTo>,
) -> anyhow::Result<i32> {
    // Before anything slow: a signal that comes while planning is kept for the run loop.
    let _early_signals = tmetric_runtime::signal::catch_stop_signals()
        .map_err(|e| anyhow::anyhow!("cannot catch signals: {e}"))?;
    let layout = layout_of(args);
    let env = Environment::probe(sysfs, proc_root);
    // The model's counter numbers (`counter.json`) size the PMU model with or without -M:
    // an `-e` list is scheduled on the same counters.
    let model = host_model(args.model.as_deref(), sysfs, proc_root).ok();
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
            // perf 6.12's columns count no threshold events; the tree needs them, since the
            // thresholds decide which nodes show and where `<==` goes, so that it is the same
            // tree as `-M TopdownLN --tree`'s.
            owned.metric_no_threshold = !prints_tree(args, &layout);
            owned.metric_only = true;
        }
        Some(TopdownMode::Legacy(events)) => {
            owned.events = vec![events.join(",")];
            owned.metric_only = true;
        }
        None => {}
    }
    let args = &owned;
    let pmus = PmuModel::probe(sysfs, proc_root, model);
    if topdown.is_some() && pmus.nmi_watchdog {
        let fix = match simulated {
            Some(name) => format!(
                "it is the simulated `{name}` machine's watchdog (on, as x86 distributions ship it): this machine's /proc/sys/kernel/nmi_watchdog does not change it"
            ),
            None => "disable it with `echo 0 > /proc/sys/kernel/nmi_watchdog`".to_string(),
        };
        warn(&format!(
            "the NMI watchdog is on and holds a counter, so topdown results may be less accurate; {fix}"
        ));
    }
    let machine = Machine { sysfs, proc_root, env: &env, pmus: &pmus };
    let mut plan = build(args, &machine)?;
    if let Some(path) = &args.retire_latency {
        apply_retire_latency_file(&mut plan, path)?;
    }
    if args.record_tpebs || args.retire_latency.is_some() {
        // The generic "read as 0" warning is replaced by one naming what is still unknown.
        plan.warnings.retain(|w| !matches!(w, engine::Warning::RetireLatencyUnsampled { .. }));
        let unknown: Vec<&str> = plan
            .retire_events
            .iter()
            .filter(|r| {
                !args.record_tpebs && !plan.retire_latency.iter().any(|(n, _)| *n == r.name)
            })
            .map(|r| r.name.as_str())
            .collect();
        if !unknown.is_empty() {
            plan.warnings.push(engine::Warning::RetireLatencyUnknown {
                events: unknown.iter().map(|u| u.to_string()).collect(),
                file: args
                    .retire_latency
                    .as_ref()
                    .map_or(String::new(), |p| p.display().to_string()),
            });
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
    let out = if args.quiet || record.is_some_and(|r| r.to_stdout()) {
        Sink::nowhere()
    } else {
        match &args.output {
            Some(path) if args.append => Sink::append(path)?,
            Some(path) => Sink::create(path)?,
            None => Sink::stderr(),
        }
    };
    let legacy = match &topdown {
        Some(TopdownMode::Legacy(_)) => Some(core_map(sysfs)),
        _ => None,
    };
    let to_terminal = args.output.is_none() && std::io::stderr().is_terminal();
    if args.interval_clear && !to_terminal {
        bail!(
            "--interval-clear does not work with output: it clears a terminal, and the counts go to a file or pipe"
        );
    }
    let mut config = print_config(args, &layout, plan_unit_width(&plan));
    config.colour = match args.color {
        ColorChoice::Always => true,
        ColorChoice::Never => false,
        ColorChoice::Auto => to_terminal,
    } && layout == Layout::Std;
    let title = Title { target: target_text(args, simulated), runs: args.repeat };
    let mut printer = Printer::new(out, config, title);
    // `tmetric -j 2>&1 | jq`: tmetric's notes and warnings would break perf's JSON lines.
    let json_shares_stderr = layout == Layout::Json
        && args.output.is_none()
        && !std::io::stderr().is_terminal()
        && !args.verbose;
    printer.json_notes = !json_shares_stderr;
    printer.simulated = simulated.map(str::to_string);
    printer.legacy = legacy;
    printer.interval = args.interval.map(Duration::from_millis);
    printer.tree = prints_tree(args, &layout).then_some(args.all);
    if args.output.is_some() && !args.quiet {
        printer.started_on(&tmetric_runtime::locale::ctime_now())?;
    }

    let mut workload = if args.command.is_empty() {
        None
    } else {
        Some(Workload::prepare(&args.command).context("cannot start the workload")?)
    };
    let threads = listed_threads(args)?;
    let target = if let Some(list) = &args.cpu_list {
        let online = sysfs.online_cpus().context("cannot list the online CPUs")?;
        Target::Cpus(crate::target::cpu_list(list, &online)?)
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
    printer.split = split_of(args, sysfs, &target);
    // The signal pipe before the events: when descriptors run out, the events say so.
    tmetric_runtime::signal::prepare().map_err(|e| anyhow::anyhow!("cannot catch signals: {e}"))?;
    // -r N: the first N-1 runs count quietly; the last one runs as usual and the printed
    // counts are the mean of all N, with perf's `( +- x% )` spread.
    let mut earlier: Vec<tmetric_runtime::RunReport> = Vec::new();
    for _ in 1..args.repeat.max(1) {
        let mut w = Workload::prepare(&args.command).context("cannot start the workload")?;
        let t = Target::Task { pid: w.pid(), on_exec: true };
        let mut run = Session::open(sys.clone(), plan.clone(), t, env.clone())?;
        let report = run.run(
            Some(&mut w),
            &RunOptions { catch_signals: true, ..RunOptions::default() },
            |_, _| Ok(()),
        )?;
        if report.interrupted_by.is_some() {
            break;
        }
        earlier.push(report);
    }
    let sys_for_sampler = sys.clone();
    let mut session = Session::open(sys, plan, target.clone(), env.clone())?;
    warn_user_only(&session);
    if let Some(threads) = &threads {
        let gone = session.vanished();
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
            printer.split = Split::Threads {
                threads: threads
                    .iter()
                    .filter(|(t, _)| !gone.contains(t))
                    .map(|(t, comm)| (comm.clone(), *t))
                    .collect(),
                skip_zero: args.all_cpus,
            };
        }
    }
    let options = RunOptions {
        interval: args.interval.map(Duration::from_millis),
        catch_signals: true,
        delay: args.delay.map(Duration::from_millis),
        interval_count: args.interval_count.map(|n| n as usize),
        until_gone: crate::target::watched(args.pid, &args.tid, !args.command.is_empty()),
        timeout: args.timeout.map(Duration::from_millis),
        sample_every: error_bar_reads(args),
    };
    let has_workload = workload.is_some();
    let mode: TpebsMode =
        args.tpebs_mode.parse().map_err(|e| anyhow::anyhow!("--tpebs-mode: {e}"))?;
    let mut sampler = if args.record_tpebs {
        Some(start_sampler(session.plan(), sys_for_sampler, &target, sysfs)?)
    } else {
        None
    };
    let mut recorder = match record {
        Some(to) => {
            use tmetric_perfstat::perfdata::write::aggr;
            let facts = tmetric_record::HeaderFacts {
                plan: session.plan(),
                failures: session.failures(),
                splits: session.split_notes(),
                threads: match &printer.split {
                    Split::Threads { threads, .. } => threads.clone(),
                    _ => Vec::new(),
                },
                skip_zero: matches!(printer.split, Split::Threads { skip_zero: true, .. }),
                sysfs,
                proc_root,
                model: model.map(Model::path),
                simulated,
                target: target_text(args, simulated),
                system_wide: system_wide(args),
                interval_ms: args.interval,
                selection: tmetric_record::format::Selection {
                    metrics: args.metrics.clone(),
                    events: args.events.clone(),
                    model: args.model.clone(),
                    tpebs_mode: args.record_tpebs.then(|| args.tpebs_mode.clone()),
                    summary: args.summary,
                },
                aggr_mode: [
                    (args.no_aggr, aggr::NONE),
                    (args.per_core, aggr::CORE),
                    (args.per_die, aggr::DIE),
                    (args.per_socket, aggr::SOCKET),
                    (args.per_thread, aggr::THREAD),
                ]
                .into_iter()
                .find_map(|(on, mode)| on.then_some(mode))
                .unwrap_or(aggr::GLOBAL),
            };
            let gone = session.vanished();
            let thread_map = threads.iter().flatten().filter(|t| !gone.contains(&t.0)).cloned();
            let thread_map = thread_map.collect();
            Some(tmetric_record::RecordSink::create(to, &facts, &target, thread_map)?)
        }
        None => None,
    };
    let interval_failures = session.failure_texts();
    // A record file that cannot be written never stops the workload (as `-o`): the record
    // stops there, counting and printing go on, and the run fails at its end.
    let mut record_failed: Option<anyhow::Error> = None;
    let report = {
        let recorder = &mut recorder;
        let record_failed = &mut record_failed;
        let printer = &mut printer;
        let interval_failures = &interval_failures;
        let sampler = &mut sampler;
        session.run(workload.as_mut(), &options, |plan, tick| {
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
                if let Err(e) = r
                    .interval(tick.number, tick.at, tick.length, tick.counts, latencies)
                    .map_err(anyhow::Error::from)
                {
                    warn(&format!(
                        "{e:#}; the record stops here, counting goes on and the counts still print"
                    ));
                    *record_failed = Some(e);
                    *recorder = None;
                }
            }
            printer.interval(plan, &sample, tick.number, tick.at)?;
            printer.interval_notes(plan, &sample, interval_failures, tick.at)?;
            printer.out().flush()?;
            if printer.out().closed() && !has_workload {
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
        session.plan_mut().retire_latency = latencies(&reports, mode, false);
        report_samples(&reports, args.verbose, layout == Layout::Json, printer.out())?;
        sampled = reports;
    }
    let elapsed_runs: Option<Vec<f64>> = (!earlier.is_empty())
        .then(|| earlier.iter().chain([&report]).map(|r| r.elapsed.as_secs_f64()).collect());
    let report = if earlier.is_empty() {
        report
    } else {
        earlier.push(report);
        printer.spread =
            tmetric_runtime::RunReport::spread_of(&earlier, session.plan().specs.len());
        tmetric_runtime::RunReport::mean_of(earlier).expect("at least this run")
    };
    // --interval-count, --timeout or SIGUSR1 ended the run and stopped the command: not its
    // failure.
    let stopped = report.stopped;
    if let Some(signal) = report.exit.and_then(|e| e.signal()).filter(|_| !stopped) {
        warn(&format!("the workload was killed by signal {signal} ({})", signal_name(signal)));
    }
    let rusage = report.exit.map(|e| (e.user, e.system));
    let sample = Sample { counts: &report.totals, seconds: report.elapsed.as_secs_f64(), rusage };
    if let Some(r) = recorder {
        let latencies = args.record_tpebs.then_some(session.plan().retire_latency.as_slice());
        let code = if stopped { 0 } else { report.exit.map_or(0, |e| e.shell_code()) };
        let end = r.finish(&tmetric_record::RunEnd {
            totals: &report.totals,
            elapsed: report.elapsed,
            rusage,
            exit: code,
            intervals: report.ticks,
            samples: &sampled,
            latencies,
            reads: if error_bar_reads(args).is_some() { &report.samples } else { &[] },
        });
        // Said after the counts, which still print.
        record_failed = record_failed.or(end.err().map(Into::into));
    }
    if args.interval.is_none() || args.summary {
        // perf's `ru_display`: user and system time for one run of a command with no other
        // target (-a, -C, -p, -t).
        let task_only =
            args.repeat == 1 && !system_wide(args) && args.pid.is_none() && args.tid.is_empty();
        let mut footer = crate::printer::footer(report.elapsed, rusage.filter(|_| task_only));
        if let Some(elapsed) = &elapsed_runs {
            footer.elapsed_sd = Some(spread_of_mean(elapsed));
            if args.table {
                footer.runs_table = elapsed.clone();
            }
        }
        footer.null_run = args.null_run;
        footer.nmi_hint = pmus.nmi_watchdog;
        if args.errors {
            printer.error_reads = Some(report.samples.clone());
        }
        printer.summary(session.plan(), &sample, &footer)?;
    }
    let notes = printer.notes_for(
        session.plan(),
        &sample,
        &session.failure_texts(),
        &session.split_notes(),
    );
    printer.notes(&notes)?;
    // The block of bars: with -v, or where --errors cannot show them beside the values.
    if args.verbose || (args.errors && !printer.errors_inline()) {
        let bars = session.plan().uncertainties(
            &mut engine::Evaluators::default(),
            &report.samples,
            sample.seconds,
        );
        printer.error_bars(session.plan(), &sample, &bars)?;
    }
    printer.finish()?;
    if let Some(e) = record_failed {
        return Err(e.context("the record file is incomplete"));
    }
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
        if list.chars().all(|c| c == ',' || c.is_whitespace()) {
            bail!(
                "-e `{}` names no event; give a comma-separated list such as `-e task-clock,page-faults` (`tmetric list events` lists them)",
                list.escape_debug()
            );
        }
        tmetric_runtime::event::check_syntax(list).with_context(|| format!("-e {list}"))?;
    }
    if !args.metrics.is_empty() && args.metrics.iter().all(|m| m.trim().is_empty()) {
        bail!("-M names no metric or group; give a comma-separated list such as `-M Software`");
    }
    if let Some(name) = &args.model {
        models::find_model(name).context("--model")?;
    }
    Ok(())
}

/// perf's `exclude_kernel` fallback, said once: events that count user mode only.
fn warn_user_only<S: Syscalls>(session: &Session<S>) {
    let user_only = session.user_only();
    if user_only.is_empty() {
        return;
    }
    let paranoid = std::fs::read_to_string("/proc/sys/kernel/perf_event_paranoid")
        .map(|t| t.trim().to_string())
        .unwrap_or_else(|_| "?".into());
    warn(&format!(
        "kernel.perf_event_paranoid is {paranoid} and tmetric has no CAP_PERFMON: counting user mode only (exclude_kernel), as perf does, for {}",
        names_summary(&user_only)
    ));
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
                "retire latency of {}: {} samples ({} lost), mean {}, min {}, max {}, last {}, p97 (mean of the lowest 97%) {} cycles",
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

/// perf's aggregation mode for the flags.
pub fn aggregation(args: &StatArgs) -> Aggregation {
    if args.per_thread {
        Aggregation::Thread
    } else if args.no_aggr || args.no_merge {
        Aggregation::Cpu
    } else if args.per_core {
        Aggregation::Core
    } else if args.per_cache.is_some() {
        Aggregation::Cache
    } else if args.per_cluster {
        Aggregation::Cluster
    } else if args.per_die {
        Aggregation::Die
    } else if args.per_socket {
        Aggregation::Socket
    } else if args.per_node {
        Aggregation::Node
    } else {
        Aggregation::Global
    }
}

/// The layout `-x` and `-j` ask for (perf's `-x '\t'` is a tab).
pub fn layout_of(args: &StatArgs) -> Layout {
    match (&args.separator, args.json) {
        (Some(sep), _) if sep == "\\t" => Layout::Csv("\t".into()),
        (Some(sep), _) => Layout::Csv(sep.clone()),
        (None, true) => Layout::Json,
        (None, false) => Layout::Std,
    }
}

/// The printer's layout options for the flags, in the user's numeric locale.
pub fn print_config(args: &StatArgs, layout: &Layout, unit_width: usize) -> Config {
    let mut config = Config::new(layout.clone());
    config.metric_only = args.metric_only;
    // perf groups digits by default, never in CSV (-B is refused there), not with
    // --no-big-num.
    config.big_num = !matches!(layout, Layout::Csv(_)) && !args.no_big_num;
    config.locale = tmetric_runtime::locale::NumericLocale::from_env();
    config.full = args.full_metrics;
    config.aggregation = aggregation(args);
    config.interval = args.interval.is_some();
    config.cgroups = !args.cgroup.is_empty() || !args.for_each_cgroup.is_empty();
    config.runs = args.repeat;
    config.csv_summary = args.summary && !args.no_csv_summary && args.interval.is_some();
    config.unit_width = unit_width;
    config.interval_clear = args.interval_clear;
    config.errors = args.errors;
    config
}

/// perf's `unit_width`: the longest unit of a printed event, at least 4 (`unit`).
pub fn plan_unit_width(plan: &Plan) -> usize {
    plan.rows.iter().filter(|r| r.show).map(|r| r.unit.chars().count()).max().unwrap_or(0).max(4)
}

/// How the counts split into printed units: perf's aggregation units (`-A`, `--per-*`) with
/// their CPUs, or one total. (`--per-thread` is set once the threads are known.)
fn split_of(args: &StatArgs, sysfs: &Sysfs, target: &Target) -> Split {
    let Target::Cpus(cpus) = target else { return Split::Global };
    let aggr = match aggregation(args) {
        Aggregation::Cpu => Aggr::Cpu,
        Aggregation::Core => Aggr::Core,
        Aggregation::Cache => Aggr::Cache,
        Aggregation::Cluster => Aggr::Cluster,
        Aggregation::Die => Aggr::Die,
        Aggregation::Socket => Aggr::Socket,
        Aggregation::Node => Aggr::Node,
        Aggregation::Global | Aggregation::Thread => return Split::Global,
    };
    let level = args.per_cache.as_deref().and_then(cache_level);
    let units = units_for(cpus, aggr, |cpu| aggr::place_of(sysfs, cpu, level));
    Split::Cpus(
        units
            .into_iter()
            .map(|(label, cpus)| {
                let id = match aggr {
                    Aggr::Cpu => UnitId::Cpu(cpus[0]),
                    _ => UnitId::Label(label),
                };
                (id, cpus)
            })
            .collect(),
    )
}

/// `--per-cache=L2` (or `2`, `l2`): the cache level; `None` for the last level.
fn cache_level(text: &str) -> Option<u32> {
    let t = text.trim();
    let t = t.strip_prefix(['L', 'l']).unwrap_or(t);
    t.parse().ok()
}

/// The standard deviation of the mean of `values` (perf's `stddev_stats`).
pub fn spread_of_mean(values: &[f64]) -> f64 {
    let n = values.len() as f64;
    if values.len() < 2 {
        return 0.0;
    }
    let mean = values.iter().sum::<f64>() / n;
    let variance = values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (n - 1.0);
    (variance / n).sqrt()
}

/// A cgroup named with `-G` or `--for-each-cgroup` must exist (perf stops too: "no access
/// to cgroup").
fn check_cgroup(flag: &str, name: &str) -> anyhow::Result<()> {
    let Some(mount) = tmetric_runtime::sys::cgroup_mount() else {
        bail!(
            "{flag} {name}: no cgroup2 (or cgroup v1 perf_event) mount in /proc/self/mounts: mount one, or count without cgroups"
        );
    };
    match tmetric_runtime::sys::open_cgroup_dir(name) {
        Ok(fd) => {
            tmetric_runtime::sys::close_fd(fd);
            Ok(())
        }
        Err(errno) => bail!(
            "{flag} {name}: no access to cgroup {} ({errno}); names are paths under {}, such as `system.slice/ssh.service`",
            mount.join(name.trim_start_matches('/')).display(),
            mount.display()
        ),
    }
}

/// perf's checks of flags that go together, with perf's messages (and what to do).
fn check_perf_flags(args: &StatArgs) -> anyhow::Result<()> {
    if args.metric_only && args.repeat > 1 {
        bail!("--metric-only is not supported with -r");
    }
    if args.table && args.repeat <= 1 {
        bail!("--table is only supported with -r");
    }
    if args.big_num && args.separator.is_some() {
        bail!("-B option not supported with -x");
    }
    if let Some(ms) = args.timeout {
        if ms < 10 {
            bail!("timeout must be >= 10ms.");
        }
        if args.interval.is_some() {
            bail!("timeout option is not supported with interval-print.");
        }
        if ms < 100 {
            warn(
                "timeout < 100ms. The overhead percentage could be high in some cases. Please proceed with caution.",
            );
        }
    }
    for (flag, names) in [("-G", &args.cgroup), ("--for-each-cgroup", &args.for_each_cgroup)] {
        for name in names.iter().filter(|n| !n.is_empty()) {
            check_cgroup(flag, name)?;
        }
    }
    if let Some(level) = &args.per_cache
        && !level.is_empty()
        && cache_level(level).is_none()
    {
        bail!("--per-cache={level}: expected a cache level such as L2, L3 or 3");
    }
    Ok(())
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
                let texts: Vec<String> = pmu.adjustments.iter().map(|a| a.to_string()).collect();
                format!("; {}", texts.join("; "))
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

/// Whether the metrics print as the TMA tree: `--tree` (or `--all`), or `--topdown` in the
/// default layout on a terminal unless `--no-tree`.
fn prints_tree(args: &StatArgs, layout: &Layout) -> bool {
    let to_terminal = args.output.is_none() && std::io::stderr().is_terminal();
    args.tree || (args.topdown && !args.no_tree && *layout == Layout::Std && to_terminal)
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

/// How often to read the counters for error bars: with `--errors` or `-v`.
fn error_bar_reads(args: &StatArgs) -> Option<Duration> {
    (args.errors || args.verbose).then(|| Duration::from_millis(100))
}
