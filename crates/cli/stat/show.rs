//! What the printer is told: the title's target, the print configuration, aggregation units and `-v` descriptions.

use super::*;

/// What was counted, as the title of the totals says it.
pub(super) fn target_text(args: &StatArgs, simulated: Option<&str>) -> String {
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

pub(super) fn command_text(command: &[OsString]) -> String {
    command.iter().map(|a| a.to_string_lossy().into_owned()).collect::<Vec<_>>().join(" ")
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
pub(super) fn split_of(args: &StatArgs, sysfs: &Sysfs, target: &Target) -> Split {
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
pub(super) fn cache_level(text: &str) -> Option<u32> {
    let t = text.trim();
    let t = t.strip_prefix(['L', 'l']).unwrap_or(t);
    t.parse().ok()
}

/// `-v`: the counters tmetric assumed per PMU and where the numbers came from (sysfs
/// `caps/`, `counter.json`, or a documented vendor default for trees without one).
pub(super) fn describe_pmus(pmus: &PmuModel) {
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
pub(super) fn describe_plan(plan: &Plan) {
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
