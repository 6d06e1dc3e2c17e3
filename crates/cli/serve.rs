//! `tmetric serve` and `tmetric rules`: flags, the machine (real or `--pmu-sim`), the metric
//! selection with `stat`'s messages; the exporter, the rules and the dashboard are
//! `tmetric-serve`'s.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, bail};
use clap::Args;
use tmetric_catalog::Model;
use tmetric_engine::aggr::Aggregation;
use tmetric_engine::select::ModelFrom;
use tmetric_engine::setup::{Metrics, Request};
use tmetric_engine::{Host, PlanOptions};
use tmetric_runtime::{Kernel, Syscalls, Sysfs};
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

/// Which series /metrics holds per host and cgroup, each level adding to the one before.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum MetricsDetail {
    /// Each metric's gauge, and why one has no value.
    Metrics,
    /// Also each metric's running share, inputs together, error bar and threshold crossed.
    Quality,
    /// Also each counter's raw count and its group's times, which `tmetric rules` reads.
    Events,
}

/// Export metrics per host and per cgroup to Prometheus over HTTP (/metrics, /json,
/// /healthz), read every interval.
#[derive(Debug, Clone, Args)]
#[command(mut_arg("metrics", |a| a.help("Metrics or metric groups, comma-separated, as `stat -M` (default: the common software metrics, and the model's `Default` group, TopdownL1 on Intel, where it has one)")))]
pub struct ServeArgs {
    #[command(flatten)]
    pub metric: crate::args::MetricArgs,
    /// Address to listen on (`host:port`; port 0 picks a free one, printed at start). An
    /// address other machines reach is warned about: give --web.config.file for TLS and
    /// basic authentication there.
    #[arg(long, default_value = "127.0.0.1:10064", value_name = "ADDR")]
    pub listen: String,
    /// TLS and basic authentication, in the format of Prometheus's exporter toolkit
    /// (node_exporter's --web.config.file): tls_server_config, basic_auth_users.
    #[arg(long = "web.config.file", value_name = "FILE")]
    pub web_config_file: Option<PathBuf>,
    /// HTTP connections served at once; past it the oldest one whose client sent nothing, else the
    /// longest idle one is closed, or the new one answered 503 when none is.
    #[arg(long = "web.max-connections", default_value_t = 64, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=65536))]
    pub web_max_connections: u32,
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
    /// Reads per interval, for the error bars of counters that can be multiplexed (2 to 1000,
    /// at least 10ms apart). A selection none of whose counters can be (software events,
    /// tracepoints, msr) is read once per interval, at its end: a count that was never
    /// multiplexed has no multiplexing error, so its bars are exact from one read.
    #[arg(long, default_value_t = 5, value_name = "N", value_parser = clap::value_parser!(u32).range(2..=1000))]
    pub reads: u32,
    /// Which series /metrics (and --once) holds per host and cgroup: the cardinality a fleet
    /// pays for. `tmetric rules` reads the raw counters of `events`; /json holds everything.
    #[arg(long, value_enum, default_value = "events", value_name = "LEVEL")]
    pub metrics_detail: MetricsDetail,
    /// Split counts by CPU, core, die, socket or node.
    #[arg(long, value_enum, default_value = "global")]
    pub per: Per,
    /// At most this many event descriptors (events x CPUs x cgroups); cgroups past it are
    /// left out and listed on /metrics (default: the open-file limit less 256).
    #[arg(long, value_name = "N")]
    pub max_descriptors: Option<usize>,
    /// Where the kubelet keeps `pods/` and `containers/` (a node's /var/log): counted pod
    /// cgroups get their namespace, pod and container names from those directories' entry
    /// names (tmetric_cgroup_kubernetes_info); no file is opened and no link followed.
    #[arg(long, default_value = "/var/log", value_name = "DIR")]
    pub kubelet_log_dir: PathBuf,
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
    /// Count on a simulated PMU or a machine file (as `stat --pmu-sim`): hardware metrics on
    /// any machine.
    #[arg(long, value_name = "MODEL|FILE")]
    pub pmu_sim: Option<String>,
    /// With --pmu-sim: the simulated workload (a built-in name or a JSON file).
    #[arg(long, value_name = "NAME|FILE", requires = "pmu_sim")]
    pub pmu_sim_workload: Option<String>,
}

/// Prometheus recording rules (or a Grafana dashboard) computing metrics from the raw
/// counters `serve` exports.
#[derive(Debug, Clone, Args)]
#[command(
    mut_arg("metrics", |a| a.help("Metrics or metric groups, comma-separated, as `stat -M`").required_unless_present_any(["events", "alerts"])),
    mut_arg("model", |a| a.help("The CPU model (default: this machine's)"))
)]
pub struct RulesArgs {
    #[command(flatten)]
    pub metric: crate::args::MetricArgs,
    /// The window of rate() (a Prometheus duration: at least four scrape intervals, and
    /// longer than two of serve's --interval for the error bars to mean the same).
    #[arg(long, default_value = "1m", value_name = "DURATION")]
    pub window: String,
    /// Write the event rates' group every metric rule reads (load it once, however many
    /// metric rule files); with -M, in the same file as the metric rules.
    #[arg(long)]
    pub events: bool,
    /// Write alerting rules instead: cgroups left out, metrics multiplexed below a running
    /// share, error bars wider than 5 points, the event rule missing, the collector late.
    #[arg(long, conflicts_with = "dashboard")]
    pub alerts: bool,
    /// Write a Grafana dashboard (JSON) of the metrics per host and per cgroup instead.
    #[arg(long, conflicts_with = "events")]
    pub dashboard: bool,
    /// Write to this file instead of standard output (created 0600).
    #[arg(short = 'o', long, value_name = "FILE")]
    pub output: Option<PathBuf>,
}

/// Runs `tmetric serve`.
pub fn run(args: &ServeArgs) -> anyhow::Result<()> {
    args.metric.check()?;
    let interval = tmetric_serve::parse_duration(&args.interval).context("--interval")?;
    if interval < Duration::from_millis(100) {
        bail!("--interval {}: the interval must be at least 100ms", args.interval);
    }
    if interval / args.reads < Duration::from_millis(10) {
        bail!(
            "--reads {} over --interval {}: reads must be at least 10ms apart; give fewer reads or a longer interval",
            args.reads,
            args.interval
        );
    }
    let selection = Selection::from_flags(&args.cgroup, args.for_each_cgroup.as_deref())?;
    if args.no_host && selection == Selection::None {
        bail!("--no-host counts only cgroups: give --cgroup or --for-each-cgroup too");
    }
    let options = Options {
        interval,
        reads: args.reads.max(2),
        max_descriptors: args.max_descriptors,
        per: match args.per {
            Per::Global => None,
            Per::Cpu => Some(Aggregation::Cpu),
            Per::Core => Some(Aggregation::Core),
            Per::Die => Some(Aggregation::Die),
            Per::Socket => Some(Aggregation::Socket),
            Per::Node => Some(Aggregation::Node),
        },
        host: !args.no_host,
        selection,
        detail: match args.metrics_detail {
            MetricsDetail::Metrics => tmetric_serve::Detail::Metrics,
            MetricsDetail::Quality => tmetric_serve::Detail::Quality,
            MetricsDetail::Events => tmetric_serve::Detail::Events,
        },
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
    let host = Host::probe(sysfs, proc_root, args.metric.model.as_deref());
    let named = args.metric.model.as_deref().map(tmetric_engine::models::find_model).transpose()?;
    let model = host.model().ok();
    let metrics = if args.metric.metrics.is_empty() && args.events.is_empty() {
        tmetric_serve::collector::default_metrics(model)
    } else {
        args.metric.metrics.clone()
    };
    let picks = stat::select_items(&metrics, &host)?;
    let (picks, repeated) = tmetric_serve::collector::distinct_picks(&picks);
    for line in &repeated {
        warn(&format!("warning: {line}"));
    }
    let request = Request {
        events: args.events.clone(),
        metrics: Metrics::Picks(picks),
        model: named,
        all_cpus: true,
        options: PlanOptions { thresholds: !args.metric_no_threshold, ..PlanOptions::default() },
        ..Request::default()
    };
    let plan = tmetric_engine::setup::build(&request, &host, crate::sim_hint::HINTS)?.plan;
    for warning in plan.warnings() {
        warn(&format!("warning: {warning}"));
    }
    let info = MachineInfo {
        sysfs: host.sysfs().clone(),
        proc_root: proc_root.to_path_buf(),
        host: tmetric_serve::collector::host_name(),
        model,
        simulated: simulated.map(str::to_string),
        cgroup_mount: tmetric_runtime::sys::cgroup_mount(),
        kubelet_log_dir: Some(args.kubelet_log_dir.clone()),
    };
    let collector = Collector::new(sys, plan, host.env().clone(), info, options)?;
    for (cgroup, why) in &collector.left_out {
        warn(&format!("cgroup {cgroup} is not counted: {why}"));
    }
    if args.once {
        let text = tmetric_serve::once(collector)?;
        let mut out = std::io::stdout().lock();
        return out.write_all(text.as_bytes()).and_then(|()| out.flush()).or_else(|e| {
            // `tmetric serve --once | head`: the reader has what it wanted.
            if e.kind() == std::io::ErrorKind::BrokenPipe { Ok(()) } else { Err(e.into()) }
        });
    }
    let web = match &args.web_config_file {
        Some(path) => {
            let web = tmetric_serve::web::load(path).context("--web.config.file")?;
            for why in &web.ignored {
                warn(&format!("warning: {}: {why}", path.display()));
            }
            Some(web)
        }
        None => None,
    };
    let listener = tmetric_serve::http::bind(&args.listen)?;
    let local = listener.local_addr()?;
    let scheme = if web.as_ref().is_some_and(|w| w.tls.is_some()) { "https" } else { "http" };
    if !tmetric_serve::http::is_loopback(&local)
        && web.as_ref().is_none_or(|w| w.tls.is_none() || w.auth.is_none())
    {
        warn(&format!(
            "warning: listening on {local}, which other machines can reach: /metrics and /json show host names, cgroup paths, pod uids and container ids to anyone who connects; give --web.config.file with tls_server_config and basic_auth_users, or listen on 127.0.0.1"
        ));
    }
    let limits = tmetric_serve::Limits {
        max_connections: args.web_max_connections as usize,
        ..tmetric_serve::Limits::default()
    };
    let serve = ServeOptions { listener, limits, web, intervals: args.intervals };
    tmetric_serve::serve(collector, serve, |addr| {
        warn(&format!("serving on {scheme}://{addr}/metrics (also /json and /healthz)"));
    })?;
    Ok(())
}

/// Runs `tmetric rules`.
pub fn rules(args: &RulesArgs, out: &mut dyn Write) -> anyhow::Result<()> {
    args.metric.check()?;
    let sysfs = Sysfs::system();
    let proc_root = Path::new("/proc");
    if !tmetric_serve::rules::is_prometheus_duration(&args.window) {
        bail!(
            "--window {}: give a Prometheus duration such as 1m, 90s or 1h30m (units ms, s, m, h, d, w, y, largest first, each once)",
            tmetric_text::quote(&args.window)
        );
    }
    let picks = if args.metric.metrics.is_empty() {
        Vec::new()
    } else {
        // A miss advises what `rules` takes (`--model`), not a simulated machine to count on.
        let model = args.metric.model.as_deref();
        let hint = |item: &str| crate::sim_hint::simulated_hint(item, None);
        let from = if model.is_some() { ModelFrom::Named } else { ModelFrom::Machine };
        let host = || tmetric_engine::models::host_model(model, &sysfs, proc_root);
        tmetric_engine::select::items(&args.metric.metrics, host, from, hint).map_err(|miss| {
            match miss {
                tmetric_engine::select::Miss::Unknown(mut unknown) => {
                    unknown.advice = tmetric_engine::select::Advice::Rules;
                    tmetric_engine::select::Miss::Unknown(unknown)
                }
                other => other,
            }
        })?
    };
    let mut by_model: Vec<(&'static Model, Vec<usize>)> = Vec::new();
    for p in &picks {
        match by_model.iter_mut().find(|(m, _)| std::ptr::eq(*m, p.model)) {
            Some((_, v)) => {
                if !v.contains(&p.metric) {
                    v.push(p.metric);
                }
            }
            None => by_model.push((p.model, vec![p.metric])),
        }
    }
    let mut command = String::from("tmetric rules");
    if !args.metric.metrics.is_empty() {
        command += &format!(" -M {}", args.metric.metrics.join(","));
    }
    if let Some(m) = &args.metric.model {
        command += &format!(" --model {m}");
    }
    command += &format!(" --window {}", args.window);
    if args.events {
        command += " --events";
    }
    let text = if args.alerts {
        tmetric_serve::rules::alerts_yaml(&args.window, "tmetric rules --alerts")
    } else if args.dashboard {
        let title = format!("tmetric: {}", args.metric.metrics.join(", "));
        let sets: Vec<(&'static Model, &[usize])> =
            by_model.iter().map(|(m, v)| (*m, v.as_slice())).collect();
        let dash = tmetric_serve::rules::dashboard(&sets, &title);
        serde_json::to_string_pretty(&dash)? + "\n"
    } else if by_model.is_empty() {
        tmetric_serve::rules::events_yaml(&args.window, &command)
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
        if !args.events {
            warn(&format!(
                "note: these rules read tmetric:event:rate{w}: load `tmetric rules --events --window {w}` once beside them",
                w = args.window
            ));
        }
        tmetric_serve::rules::yaml(&sets, &command, args.events)
    };
    match &args.output {
        Some(path) => {
            let mut file = tmetric_print::out::create_private(path)
                .with_context(|| format!("cannot create {}", path.display()))?;
            file.write_all(text.as_bytes())
                .and_then(|()| file.sync_data())
                .with_context(|| format!("cannot write {}", path.display()))?;
        }
        None => {
            out.write_all(text.as_bytes())?;
            out.flush()?;
        }
    }
    Ok(())
}
