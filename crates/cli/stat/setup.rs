//! The plan `tmetric stat` counts, from its flags: `-e`, `-M`, perf's default and `-d`
//! events, `--topdown`'s choice, on the machine found. The choices themselves are the
//! engine's (`engine::defaults`, `engine::select`); this maps `StatArgs` onto them.

use super::*;
use tmetric_engine::contract::Defaults;
use tmetric_engine::defaults::{self, TopdownMode, detailed_events};

/// The metrics a `-M` list selects on `host` (`engine::select::on_machine`), a miss naming
/// the simulated machine that could count it.
pub fn select_items(items: &[String], host: &Host) -> anyhow::Result<Vec<Pick>> {
    let hint = |item: &str| crate::sim_hint::simulated_hint(item, None);
    Ok(engine::select::on_machine(items, host, hint)?)
}

/// Builds the plan from the flags on `host`.
pub(super) fn build(args: &StatArgs, host: &Host) -> anyhow::Result<Plan> {
    let sysfs = host.sysfs();
    // `-C`'s list as written: its errors are the target's to say, after the plan.
    let cpus = args.cpu_list.as_deref().and_then(tmetric_runtime::sysfs::parse_cpu_list);
    let mut plan = Plan::new(host.literals(args.all_cpus, cpus.as_deref()));
    // perf's `-A`/`--no-merge` print each uncore box apart; every other mode merges them.
    plan.set_per_box(aggregation(args) == Aggregation::Cpu);
    plan.set_inherit(!args.perf.no_inherit);
    if args.null_run {
        return Ok(plan);
    }
    let cputype = match &args.cputype {
        Some(text) => Some(engine::events::cputype_pmu(sysfs, text)?),
        None => None,
    };
    let model = args.metric.model.as_deref().map(engine::models::find_model).transpose()?;
    let tables = host.tables(model);
    let resolver = engine::events::resolver(sysfs, &tables, plan.contract())
        .with_pmu_filter(cputype.as_deref());
    plan.set_tool_values(engine::tool_pmu::values(host, args.all_cpus, cpus.as_deref()));
    for (i, list) in args.events.iter().enumerate() {
        let rows = plan.rows().len();
        plan.add_event_lists(std::slice::from_ref(list), &resolver)
            .map_err(|e| {
                let hint = crate::sim_hint::simulated_for_event;
                match engine::events::without_core_pmu(&e, tables.model(), sysfs, hint) {
                    Some(better) => anyhow::Error::from(better),
                    None => e.into(),
                }
            })
            .with_context(|| format!("-e {list}"))?;
        for (_, filter) in args.order.filters.iter().filter(|(l, _)| *l == Some(i)) {
            plan.set_filter(rows..plan.rows().len(), filter)?;
        }
    }
    if !args.cgroup.is_empty() {
        // perf's -G applies to the events given before it; metrics come later.
        plan.assign_cgroups(&args.cgroup).context("-G")?;
    }
    let mut picks = select_items(&args.metric.metrics, host)?;
    let explicit = !args.metric.metrics.is_empty();
    let contract = plan.contract();
    let mut default_view = false;
    let mut metric_group_defaults = false;
    if args.events.is_empty() && !explicit {
        let chosen =
            defaults::default_selection(contract.defaults, system_wide(args), args.detailed, host);
        if let Some(events) = &chosen.events {
            plan.add_event_lists(&[events.join(",")], &resolver)
                .context("perf's default events")?;
        }
        picks = chosen.picks;
        default_view = chosen.default_view;
        metric_group_defaults = chosen.metric_groups;
    }
    // perf 7.x's -d only chooses more default metric groups: with -e it adds nothing.
    if args.detailed > 0 && contract.defaults == Defaults::Events {
        plan.add_event_lists(&[detailed_events(args.detailed).join(",")], &resolver)
            .context("-d's events")?;
    }
    if let (Some(kind), Some(pmu)) = (&args.cputype, &cputype) {
        // Hybrid metrics name their PMU (`cpu_core`, `cpu_atom`); others apply to both.
        picks.retain(|p| {
            let metric_pmu = p.model.str(p.model.metric(p.metric).pmu);
            metric_pmu == pmu.as_str() || !(metric_pmu == "cpu_core" || metric_pmu == "cpu_atom")
        });
        if picks.is_empty() && !args.metric.metrics.is_empty() {
            bail!("--cputype {kind}: none of the selected metrics is a `{pmu}` metric");
        }
    }
    let options = PlanOptions {
        thresholds: !args.grouping.metric_no_threshold,
        no_group: args.grouping.metric_no_group,
        no_merge: args.grouping.metric_no_merge,
        strategy: Strategy::Tmetric,
        system_wide: system_wide(args),
    };
    let rows_before = plan.rows().len();
    plan.add_metrics(&picks, host, &options, explicit);
    if default_view {
        plan.show_as_default_view(rows_before);
    }
    if metric_group_defaults {
        plan.show_default_events(rows_before);
    }
    if args.all_user || args.all_kernel {
        // perf's --all-user/--all-kernel: every event counts in one mode only.
        plan.exclude_modes(args.all_kernel, args.all_user);
    }
    if !args.for_each_cgroup.is_empty() {
        plan.expand_cgroups(&args.for_each_cgroup);
    }
    let hint = |item: &str, model| crate::sim_hint::simulated_hint(item, Some(model));
    let defaulted = default_view || metric_group_defaults;
    // Where a run that can open nothing is refused (perf 7.x), the refusal says why instead.
    let refused = contract.needs_an_event
        && plan.rows().iter().all(|r| matches!(r.source, engine::Source::Missing(_)));
    if let Some(why) = defaults::uncountable(&plan, host, hint).filter(|_| !defaulted && !refused) {
        // perf prints such metrics' events `<not supported>` and goes on, and scripts rely
        // on that: say why once, then count what can be counted. perf's `Default` view
        // skips the metrics it cannot count without a word: so does tmetric's.
        warn(&why.to_string());
    }
    Ok(plan)
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
