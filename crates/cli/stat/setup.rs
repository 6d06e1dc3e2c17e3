//! The plan `tmetric stat` counts, from its flags: `StatArgs` as the engine's typed request
//! (`engine::setup` builds the plan: `-e`, `-M`, perf's default and `-d` events), and
//! `--topdown`'s choice on the machine found.

use super::*;
use tmetric_engine::defaults::{self, TopdownMode};
use tmetric_engine::setup::{Metrics, Request};

/// The metrics a `-M` list selects on `host` (`engine::select::on_machine`), a miss naming
/// the simulated machine that could count it.
pub fn select_items(items: &[String], host: &Host) -> anyhow::Result<Vec<Pick>> {
    let hint = |item: &str| crate::sim_hint::simulated_hint(item, None);
    Ok(engine::select::on_machine(items, host, hint)?)
}

/// The engine's request for the flags: the plan is `engine::setup`'s to build.
pub(super) fn request(args: &StatArgs) -> anyhow::Result<Request> {
    let grouping = &args.grouping;
    Ok(Request {
        events: args.events.clone(),
        // `--filter` before any `-e` is refused by `check_perf_flags`.
        filters: args.order.filters.iter().filter_map(|(l, f)| Some(((*l)?, f.clone()))).collect(),
        metrics: Metrics::Items(args.metric.metrics.clone()),
        model: args.metric.model.as_deref().map(engine::models::find_model).transpose()?,
        cputype: args.cputype.clone(),
        cgroups: args.cgroup.clone(),
        for_each_cgroup: args.for_each_cgroup.clone(),
        detailed: args.detailed,
        all_cpus: args.all_cpus,
        cpu_list: args.cpu_list.clone(),
        // perf's `-A`/`--no-merge` print each uncore box apart; every other mode merges them.
        per_box: aggregation(args) == Aggregation::Cpu,
        inherit: !args.perf.no_inherit,
        null_run: args.null_run,
        options: PlanOptions {
            thresholds: !grouping.metric_no_threshold,
            no_group: grouping.metric_no_group,
            no_merge: grouping.metric_no_merge,
            ..PlanOptions::default()
        },
        user_only: args.all_user,
        kernel_only: args.all_kernel,
    })
}

/// Builds the plan from the flags on `host`.
pub(super) fn build(args: &StatArgs, host: &Host) -> anyhow::Result<Plan> {
    let setup = engine::setup::build(&request(args)?, host, crate::sim_hint::HINTS)?;
    if let Some(why) = setup.uncountable {
        // perf prints such metrics' events `<not supported>` and goes on, and scripts rely
        // on that: say why once, then count what can be counted.
        warn(&why.to_string());
    }
    Ok(setup.plan)
}

/// `--topdown`'s flags as `-M`/`-e` ones: the model's TopdownL group as metric-only columns
/// (or the tree), else the kernel's older `topdown-*` events; `None` (after saying so) when
/// the machine supports neither.
pub(super) fn topdown_args(
    args: &StatArgs,
    layout: &Layout,
    host: &Host,
) -> anyhow::Result<Option<(StatArgs, Option<TopdownMode>)>> {
    let mut owned = args.clone();
    if !args.topdown {
        return Ok(Some((owned, None)));
    }
    let mode = defaults::topdown_mode(args.td_level, args.all_cpus, host)?;
    let Some(mode) = mode else {
        warn(
            "System does not support topdown: no TopdownL metrics for this CPU model and no kernel `topdown-*` events",
        );
        return Ok(None);
    };
    match &mode {
        TopdownMode::Json(group) => {
            owned.metric.metrics = vec![group.clone()];
            // perf 6.12's columns count no threshold events; the tree needs them, since the
            // thresholds decide which nodes show and where `<==` goes, so that it is the same
            // tree as `-M TopdownLN --tree`'s.
            owned.grouping.metric_no_threshold = !prints_tree(args, layout);
            owned.metric_only = !args.perf.no_metric_only;
        }
        TopdownMode::Legacy(events) => {
            owned.events = vec![events.join(",")];
            owned.metric_only = !args.perf.no_metric_only;
        }
    }
    Ok(Some((owned, Some(mode))))
}
