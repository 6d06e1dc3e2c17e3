//! `tmetric serve` and `tmetric rules`: flags, the machine (real or `--pmu-sim`), the metric
//! selection with `stat`'s messages; the exporter, the rules and the dashboard are
//! `tmetric-serve`'s.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, bail};
use clap::Args;
use tmetric_catalog::Model;
use tmetric_engine::aggr::Aggr;
use tmetric_engine::{Machine, PmuModel};
use tmetric_runtime::{Environment, Kernel, Syscalls, Sysfs};
use tmetric_serve::cgroups::Selection;
use tmetric_serve::{Collector, MachineInfo, Options, ServeOptions};

use crate::stat;
use tmetric_print::out::warn;

/// How counts are split.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Per {
    /// One value per host or cgroup.
    Global,
    /// Per CPU (`cpu` label).
    Cpu,
    /// Per core (`core` label, perf's `S0-D0-C1`).
    Core,
    /// Per die.
    Die,
    /// Per socket (`socket` label).
    Socket,
    /// Per NUMA node.
    Node,
}

/// `tmetric serve`.
#[derive(Debug, Clone, Args)]
#[command(mut_arg("metrics", |a| a.help("Metrics or metric groups, comma-separated, as `stat -M` (default: the common software metrics, and the model's `Default` group, TopdownL1 on Intel, where it has one)")))]
pub struct ServeArgs {
    #[command(flatten)]
    pub metric: crate::args::MetricArgs,
    /// Address to listen on (`host:port`; port 0 picks a free one, printed at start).
    #[arg(long, default_value = "127.0.0.1:9464", value_name = "ADDR")]
    pub listen: String,
    /// Events, as `stat -e` (exported as raw counters).
    #[arg(short = 'e', long = "event", value_name = "EVENTS")]
    pub events: Vec<String>,
    /// Count the cgroups whose path matches (repeatable): `/system.slice/*.service`,
    /// `/kubepods.slice/**` (`*` within a component, `**` any depth), or a plain path.
    #[arg(long = "cgroup", value_name = "PATTERN")]
    pub cgroup: Vec<String>,
    /// `auto`: count every cgroup of the tree (within --max-descriptors); or a
    /// comma-separated list of cgroups or patterns, as perf's --for-each-cgroup.
    #[arg(long, value_name = "auto|NAMES")]
    pub for_each_cgroup: Option<String>,
    /// Metrics are computed over this interval (`10s`, `500ms`, `1m`; at least 100ms).
    #[arg(long, default_value = "10s", value_name = "DURATION")]
    pub interval: String,
    /// Reads per interval, for the error bars (at least 2).
    #[arg(long, default_value_t = 5, value_name = "N")]
    pub reads: u32,
    /// Split counts by CPU, core, die, socket or node.
    #[arg(long, value_enum, default_value = "global")]
    pub per: Per,
    /// At most this many event descriptors (events x CPUs x cgroups); cgroups past it are
    /// left out and listed on /metrics (default: the open-file limit less 256).
    #[arg(long, value_name = "N")]
    pub max_descriptors: Option<usize>,
    /// Count only the cgroups, not the whole host.
    #[arg(long)]
    pub no_host: bool,
    /// Do not count the events of the metrics' thresholds.
    #[arg(long)]
    pub metric_no_threshold: bool,
    /// Stop after this many intervals (default: until SIGINT or SIGTERM).
    #[arg(long, value_name = "N", conflicts_with = "once")]
    pub intervals: Option<u64>,
    /// Count one interval and print it on standard output in Prometheus text, without a
    /// server (for node_exporter's textfile collector, cron or a pipe).
    #[arg(long)]
    pub once: bool,
    /// Count on a simulated PMU (as `stat --pmu-sim`): hardware metrics on any machine.
    #[arg(long, value_name = "MODEL")]
    pub pmu_sim: Option<String>,
    /// With --pmu-sim: the simulated workload (a built-in name or a JSON file).
    #[arg(long, value_name = "NAME|FILE", requires = "pmu_sim")]
    pub pmu_sim_workload: Option<String>,
}

/// `tmetric rules`.
#[derive(Debug, Clone, Args)]
#[command(
    mut_arg("metrics", |a| a.help("Metrics or metric groups, comma-separated, as `stat -M`").required(true)),
    mut_arg("model", |a| a.help("The CPU model (default: this machine's)"))
)]
pub struct RulesArgs {
    #[command(flatten)]
    pub metric: crate::args::MetricArgs,
    /// The window of rate() (a Prometheus duration: at least four scrape intervals).
    #[arg(long, default_value = "1m", value_name = "DURATION")]
    pub window: String,
    /// Write a Grafana dashboard (JSON) of the metrics per host and per cgroup instead.
    #[arg(long)]
    pub dashboard: bool,
    /// Write to this file instead of standard output (created 0600).
    #[arg(short = 'o', long, value_name = "FILE")]
    pub output: Option<PathBuf>,
}

/// A duration as `10s`, `500ms`, `1m`, `2.5s` or plain seconds.
pub fn parse_duration(text: &str) -> anyhow::Result<Duration> {
    let t = text.trim();
    let (number, unit) = match t.find(|c: char| !(c.is_ascii_digit() || c == '.')) {
        Some(i) => (&t[..i], &t[i..]),
        None => (t, "s"),
    };
    let value: f64 = number.parse().map_err(|_| {
        anyhow::anyhow!(
            "`{text}` is not a duration: give a number and a unit, such as 10s, 500ms or 1m"
        )
    })?;
    let seconds = match unit {
        "ms" => value / 1e3,
        "s" => value,
        "m" => value * 60.0,
        "h" => value * 3600.0,
        _ => bail!("`{text}`: unknown unit `{unit}`; use ms, s, m or h"),
    };
    if !seconds.is_finite() || seconds <= 0.0 {
        bail!("`{text}` is not a positive duration");
    }
    Ok(Duration::from_secs_f64(seconds))
}

/// Runs `tmetric serve`.
pub fn run(args: &ServeArgs) -> anyhow::Result<()> {
    let interval = parse_duration(&args.interval).context("--interval")?;
    if interval < Duration::from_millis(100) {
        bail!("--interval {}: the interval must be at least 100ms", args.interval);
    }
    let selection = Selection::from_flags(&args.cgroup, args.for_each_cgroup.as_deref())
        .map_err(anyhow::Error::msg)?;
    if args.no_host && selection == Selection::None {
        bail!("--no-host counts only cgroups: give --cgroup or --for-each-cgroup too");
    }
    let options = Options {
        interval,
        reads: args.reads.max(2),
        max_descriptors: args.max_descriptors,
        per: match args.per {
            Per::Global => None,
            Per::Cpu => Some(Aggr::Cpu),
            Per::Core => Some(Aggr::Core),
            Per::Die => Some(Aggr::Die),
            Per::Socket => Some(Aggr::Socket),
            Per::Node => Some(Aggr::Node),
        },
        host: !args.no_host,
        selection,
    };
    match &args.pmu_sim {
        Some(name) => {
            let sim =
                tmetric_sim::private::simulated(name, args.pmu_sim_workload.as_deref(), warn)?;
            warn(&format!(
                "simulated PMU `{name}`: every count served comes from a simulator, not hardware"
            ));
            let result =
                run_on(args, options, sim.kernel.clone(), &sim.sysfs, &sim.proc_root, Some(name));
            drop(sim);
            result
        }
        None => run_on(args, options, Kernel, &Sysfs::system(), Path::new("/proc"), None),
    }
}

fn run_on<S: Syscalls + Clone>(
    args: &ServeArgs,
    options: Options,
    sys: S,
    sysfs: &Sysfs,
    proc_root: &Path,
    simulated: Option<&str>,
) -> anyhow::Result<()> {
    let env = Environment::probe(sysfs, proc_root);
    let named = args.metric.model.as_deref().map(tmetric_engine::models::find_model).transpose()?;
    let model = match named {
        Some(m) => Some(m),
        None => tmetric_engine::models::host_model(None, sysfs, proc_root).ok(),
    };
    let metrics = if args.metric.metrics.is_empty() && args.events.is_empty() {
        tmetric_serve::collector::default_metrics(model)
    } else {
        args.metric.metrics.clone()
    };
    let picks = stat::select_items(&metrics, args.metric.model.as_deref(), sysfs, proc_root)?;
    let pmus = PmuModel::probe(sysfs, proc_root, model);
    let machine = Machine { sysfs, proc_root, env: &env, pmus: &pmus };
    let plan = tmetric_serve::collector::build_plan(
        &machine,
        named,
        &args.events,
        &picks,
        !args.metric_no_threshold,
    )
    .map_err(anyhow::Error::msg)?;
    for warning in plan.warnings() {
        warn(&format!("warning: {warning}"));
    }
    let info = MachineInfo {
        sysfs: sysfs.clone(),
        proc_root: proc_root.to_path_buf(),
        host: tmetric_serve::collector::host_name(),
        model,
        simulated: simulated.map(str::to_string),
        cgroup_mount: tmetric_runtime::sys::cgroup_mount(),
    };
    let collector = Collector::new(sys, plan, env.clone(), info, options)?;
    for (cgroup, why) in &collector.left_out {
        warn(&format!("cgroup {cgroup} is not counted: {why}"));
    }
    if args.once {
        let text = tmetric_serve::once(collector).map_err(anyhow::Error::msg)?;
        let mut out = std::io::stdout().lock();
        return out.write_all(text.as_bytes()).and_then(|()| out.flush()).or_else(|e| {
            // `tmetric serve --once | head`: the reader has what it wanted.
            if e.kind() == std::io::ErrorKind::BrokenPipe { Ok(()) } else { Err(e.into()) }
        });
    }
    let serve = ServeOptions { listen: args.listen.clone(), workers: 4, intervals: args.intervals };
    tmetric_serve::serve(collector, &serve, |addr| {
        warn(&format!("serving on http://{addr}/metrics (also /json and /healthz)"));
    })
    .map_err(anyhow::Error::msg)
}

/// Runs `tmetric rules`.
pub fn rules(args: &RulesArgs, out: &mut dyn Write) -> anyhow::Result<()> {
    let sysfs = Sysfs::system();
    let proc_root = Path::new("/proc");
    let picks =
        stat::select_items(&args.metric.metrics, args.metric.model.as_deref(), &sysfs, proc_root)?;
    if !args.window.chars().next().is_some_and(|c| c.is_ascii_digit())
        || !args.window.chars().all(|c| c.is_ascii_alphanumeric())
    {
        bail!("--window {}: give a Prometheus duration such as 1m or 30s", args.window);
    }
    let mut by_model: Vec<(&'static Model, Vec<usize>)> = Vec::new();
    for p in &picks {
        match by_model.iter_mut().find(|(m, _)| std::ptr::eq(*m, p.model)) {
            Some((_, v)) => v.push(p.metric),
            None => by_model.push((p.model, vec![p.metric])),
        }
    }
    let command = format!(
        "tmetric rules -M {}{}",
        args.metric.metrics.join(","),
        args.metric.model.as_deref().map(|m| format!(" --model {m}")).unwrap_or_default()
    );
    let text = if args.dashboard {
        let (model, metrics) = by_model
            .iter()
            .find(|(m, _)| !std::ptr::eq(*m, tmetric_catalog::common()))
            .or(by_model.first())
            .context("no metric selected")?;
        let title = format!("tmetric: {} on {}", args.metric.metrics.join(", "), model.path());
        let dash = tmetric_serve::rules::dashboard(model, metrics, &title);
        serde_json::to_string_pretty(&dash)? + "\n"
    } else {
        let sets: Vec<_> = by_model
            .iter()
            .map(|(m, metrics)| (*m, tmetric_serve::rules::rules(m, metrics, &args.window)))
            .collect();
        for (m, set) in &sets {
            for (metric, why) in &set.skipped {
                warn(&format!("{} {metric} is not translated: {why}", m.path()));
            }
        }
        tmetric_serve::rules::yaml(&sets, &command)
    };
    match &args.output {
        Some(path) => {
            let mut sink = tmetric_print::out::Sink::create(path)?;
            sink.write_all(text.as_bytes())?;
            sink.flush()?;
        }
        None => out.write_all(text.as_bytes())?,
    }
    Ok(())
}
