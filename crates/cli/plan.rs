//! `tmetric plan`'s flags and glue: how a metric selection would be counted on a machine,
//! without counting. Here: the machine (`--model`, `--cpuid`, `--sysfs`, `--pmu-sim` or this
//! one) and the `-M` items' lookup (`engine::select::plan`, whose miss the engine words); the
//! plan is the engine's (`plan_offline`, `plan_on_machine`), printed by `tmetric_print::plan`.

use std::io::Write;
use std::path::PathBuf;

use anyhow::Context;
use tmetric_catalog::Model;
use tmetric_engine::plan::{OfflinePlan, plan_offline, plan_on_machine};
use tmetric_engine::select::ModelFrom;
use tmetric_engine::{Host, MachineFacts, Pick, PlanOptions, PmuModel, Strategy};
use tmetric_print::plan as print;
use tmetric_runtime::Sysfs;
use tmetric_sim::private::{self, PrivateTree};

/// How a metric selection would be grouped and scheduled on a machine's counters.
#[derive(Debug, clap::Args)]
#[command(
    mut_arg("metrics", |a| a.required(true)),
    mut_arg("model", |a| a.help("Plan for this catalogue model, without its machine").conflicts_with_all(["cpuid", "sysfs"])),
    after_help = "Examples:\n  tmetric plan -M TopdownL1 --model sapphirerapids\n  \
    tmetric plan -M tma_backend_bound_group --model icelake --nmi-watchdog off --json\n  \
    tmetric plan -M PipelineL1 --cpuid AuthenticAMD-25-17-0"
)]
pub struct PlanArgs {
    #[command(flatten)]
    metric: crate::args::MetricArgs,
    /// Plan for the model this cpuid string maps to.
    #[arg(long, value_name = "CPUID", conflicts_with = "sysfs")]
    cpuid: Option<String>,
    /// Plan for the machine this sysfs tree describes (its `bus/event_source/devices`), as
    /// `tmetric stat` would plan there: its literals, `has_event()` and cpuid probes.
    #[arg(long, value_name = "DIR")]
    sysfs: Option<PathBuf>,
    /// Plan for a simulated machine (sapphirerapids, icelake, skylakex, skylakex-nosmt,
    /// alderlake, meteorlake, amdzen4, amdzen5, neoverse-n2) or a machine file (JSON), as
    /// `tmetric stat --pmu-sim MODEL` plans.
    #[arg(long, value_name = "MODEL|FILE", conflicts_with_all = ["model", "cpuid", "sysfs"])]
    pmu_sim: Option<String>,
    /// The procfs root that goes with --sysfs (cpuinfo, nmi_watchdog).
    #[arg(long, value_name = "DIR", requires = "sysfs")]
    proc: Option<PathBuf>,
    /// SMT state to assume without a machine.
    #[arg(long, value_name = "on|off", default_value = "on", value_parser = on_off, action = clap::ArgAction::Set)]
    smt: bool,
    /// NMI watchdog state to assume without a machine (it holds one counter).
    #[arg(long, value_name = "on|off", default_value = "on", value_parser = on_off, action = clap::ArgAction::Set)]
    nmi_watchdog: bool,
    #[command(flatten)]
    grouping: crate::args::GroupingArgs,
    /// Plan with perf 6.12's strategy instead of tmetric's.
    #[arg(long)]
    perf_strategy: bool,
    /// One JSON document.
    #[arg(long)]
    json: bool,
}

fn on_off(text: &str) -> Result<bool, String> {
    match text {
        "on" | "1" | "yes" => Ok(true),
        "off" | "0" | "no" => Ok(false),
        other => Err(format!("`{other}` is not on or off")),
    }
}

/// The metrics `items` select on `model` (`engine::select::plan`: the common metrics first, as
/// `stat`); a miss is the engine's, worded as every front end words it.
fn picks_for(
    model: &'static Model,
    items: &[String],
    from: ModelFrom,
) -> Result<Vec<Pick>, tmetric_engine::select::Miss> {
    tmetric_engine::select::plan(items, model, from, |item| {
        crate::sim_hint::simulated_hint(item, None)
    })
}

/// Runs `tmetric plan`.
pub fn run(args: &PlanArgs, out: &mut dyn Write) -> anyhow::Result<()> {
    args.metric.check()?;
    let options = PlanOptions {
        thresholds: !args.grouping.metric_no_threshold,
        no_group: args.grouping.metric_no_group,
        no_merge: args.grouping.metric_no_merge,
        strategy: if args.perf_strategy { Strategy::Perf } else { Strategy::Tmetric },
        system_wide: true,
    };
    let (model, pmus, machine_text) = match (&args.metric.model, &args.cpuid, &args.sysfs) {
        (Some(name), _, _) => {
            let model = tmetric_engine::models::find_model(name)?;
            let facts = MachineFacts { nmi_watchdog: args.nmi_watchdog, smt_on: args.smt };
            (
                model,
                PmuModel::for_model(model, facts),
                format!("{} (no machine: assumed)", model.path()),
            )
        }
        (None, Some(cpuid), _) => {
            let model = tmetric_catalog::model_for_cpuid(cpuid)
                .with_context(|| format!("no model of the catalogue matches cpuid `{cpuid}`"))?;
            let facts = MachineFacts { nmi_watchdog: args.nmi_watchdog, smt_on: args.smt };
            (model, PmuModel::for_model(model, facts), format!("{} (cpuid {cpuid})", model.path()))
        }
        (None, None, sysfs_dir) => {
            // A machine: plan as `tmetric stat` does there.
            let simulated = match &args.pmu_sim {
                Some(name) => Some(simulated_tree(name)?),
                None => None,
            };
            let (sys_root, proc_root, where_) = match (&simulated, sysfs_dir) {
                (Some((dir, name)), _) => (
                    dir.path().join("sys"),
                    dir.path().join("proc"),
                    format!("simulated PMU `{name}`"),
                ),
                (None, Some(dir)) => {
                    readable_dir(&dir.join("bus/event_source/devices"), "--sysfs", dir)?;
                    let proc_root = args.proc.clone().unwrap_or_else(|| PathBuf::from("/proc"));
                    if let Some(p) = &args.proc {
                        readable_dir(p, "--proc", p)?;
                    }
                    (dir.clone(), proc_root, dir.display().to_string())
                }
                (None, None) => {
                    (PathBuf::from("/sys"), PathBuf::from("/proc"), "this machine".to_string())
                }
            };
            let sysfs = if sysfs_dir.is_none() && simulated.is_none() {
                Sysfs::system()
            } else {
                Sysfs::new(&sys_root)
            };
            let host = Host::probe(&sysfs, &proc_root, None);
            let model = host.model()?;
            let from =
                if where_ == "this machine" { ModelFrom::Machine } else { ModelFrom::Planned };
            let picks = picks_for(model, &args.metric.metrics, from)?;
            let (live, plan) = plan_on_machine(&picks, &host, &options)?;
            let machine_text = if where_ == "this machine" {
                format!(
                    "{} (this machine's model; --model, --sysfs or --pmu-sim plan for another)",
                    model.path()
                )
            } else {
                format!("{} ({where_})", model.path())
            };
            let missing = live.missing_inputs();
            return print_plan(args, out, model, &plan, &machine_text, &missing);
        }
    };
    let from = if args.metric.model.is_some() { ModelFrom::Named } else { ModelFrom::Planned };
    let picks = picks_for(model, &args.metric.metrics, from)?;
    let plan = plan_offline(&picks, &pmus, &options);
    print_plan(args, out, model, &plan, &machine_text, &[])
}

/// A directory the plan needs that must exist and be readable.
fn readable_dir(path: &std::path::Path, flag: &str, given: &std::path::Path) -> anyhow::Result<()> {
    std::fs::read_dir(path).map(|_| ()).with_context(|| {
        format!(
            "{flag} {}: cannot read {}: give the root of a {} tree",
            given.display(),
            path.display(),
            if flag == "--sysfs" { "sysfs (/sys)" } else { "procfs (/proc)" }
        )
    })
}

/// The simulated PMU `name`'s sysfs and procfs tree in a private directory (0700, removed
/// on drop), as `stat --pmu-sim` writes it.
fn simulated_tree(name: &str) -> anyhow::Result<(PrivateTree, String)> {
    let machine = private::machine(name).context("--pmu-sim")?;
    let dir = private::private_tree(&machine, name, tmetric_print::out::warn)?;
    Ok((dir, name.to_string()))
}

/// Prints `plan` for `model` (text or `--json`).
fn print_plan(
    args: &PlanArgs,
    out: &mut dyn Write,
    model: &'static Model,
    plan: &OfflinePlan,
    machine_text: &str,
    missing: &[Vec<(String, String)>],
) -> anyhow::Result<()> {
    // Where the machine cannot count a metric at all, the simulated machine that can.
    let simulated = if missing.iter().any(|m| !m.is_empty()) {
        args.metric
            .metrics
            .first()
            .and_then(|item| crate::sim_hint::simulated_hint(item, Some(model)))
    } else {
        None
    };
    if args.json {
        print::json(out, &model.path(), plan, machine_text, missing, &simulated)?;
    } else {
        print::text(out, plan, machine_text, &args.metric.metrics, missing, &simulated)?;
    }
    Ok(())
}
