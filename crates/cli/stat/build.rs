//! The plan `tmetric stat` counts: `-e`, `-M`, perf's default and `-d` events, `--topdown`'s choice, on the machine found.

use super::*;
use tmetric_engine::select::ModelFrom;

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
            && tmetric_runtime::sys::out_of_descriptors(&e)
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

/// The metrics a `-M` list selects, in order (`engine::select::items`): the common metrics
/// first, else those of `--model` or of this machine's model, found only when an item needs
/// it.
pub fn select_items(
    items: &[String],
    model: Option<&str>,
    sysfs: &Sysfs,
    proc_root: &Path,
) -> anyhow::Result<Vec<Pick>> {
    let from = if model.is_some() { ModelFrom::Named } else { ModelFrom::Machine };
    let host = || host_model(model, sysfs, proc_root);
    Ok(engine::select::items(items, host, from, |item| models::simulated_hint(item, None))?)
}

/// Builds the plan from the flags on `machine`.
pub(super) fn build(args: &StatArgs, machine: &Machine<'_>) -> anyhow::Result<Plan> {
    let literals = engine::plan::literals(machine.sysfs, machine.proc_root, system_wide(args));
    let mut plan = Plan::new(literals);
    // perf's `-A`/`--no-merge` print each uncore box apart; every other mode merges them.
    plan.set_per_box(aggregation(args) == Aggregation::Cpu);
    if args.null_run {
        return Ok(plan);
    }
    let cputype = match &args.cputype {
        Some(text) => Some(engine::events::cputype_pmu(machine.sysfs, text)?),
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
        plan.assign_cgroups(&args.cgroup).context("-G")?;
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
        plan.show_as_default_view(rows_before);
    }
    if args.all_user || args.all_kernel {
        // perf's --all-user/--all-kernel: every event counts in one mode only.
        plan.exclude_modes(args.all_kernel, args.all_user);
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
pub(super) fn default_events(system_wide: bool, sysfs: &Sysfs) -> Vec<&'static str> {
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
pub(super) fn detailed_events(level: u8) -> Vec<&'static str> {
    tmetric_runtime::event::legacy::DETAILED
        .iter()
        .take(level.min(3) as usize)
        .flat_map(|l| l.iter().copied())
        .collect()
}

/// Why no selected CPU-model metric can count a single input here (a machine without a
/// hardware PMU, such as most VMs): which models define the metrics and what to do instead.
pub(super) fn refuse_uncountable(
    plan: &Plan,
    machine: &Machine<'_>,
    named: bool,
) -> anyhow::Result<()> {
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

pub(super) fn models_list(names: &[&str]) -> String {
    let shown: Vec<String> = names.iter().take(4).map(|n| format!("`{n}`")).collect();
    if names.len() > 4 {
        format!("{} and {} more metrics", shown.join(", "), names.len() - 4)
    } else {
        shown.join(", ")
    }
}

/// How `--topdown` measures on this machine.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum TopdownMode {
    /// The model's `TopdownLN` metric group.
    Json(String),
    /// The kernel's older `topdown-*` events (seed 000's formulas).
    Legacy(Vec<String>),
}

/// `--topdown` on this machine: the model's TopdownL metrics when it has them, else the
/// kernel's older events, else `None` (no topdown support).
pub(super) fn topdown_mode(
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
pub(super) fn core_map(sysfs: &Sysfs) -> Vec<(u32, (u32, u32))> {
    let cpus = sysfs.online_cpus().unwrap_or_default();
    cpus.into_iter()
        .map(|c| {
            let (package, _, core) = sysfs.cpu_place(c);
            (c, (package, core))
        })
        .collect()
}

/// `--topdown`'s flags as `-M`/`-e` ones: the model's TopdownL group as metric-only columns
/// (or the tree), else the kernel's older `topdown-*` events; `None` (after saying so) when
/// the machine supports neither.
pub(super) fn topdown_args(
    args: &StatArgs,
    layout: &Layout,
    sysfs: &Sysfs,
    proc_root: &Path,
) -> anyhow::Result<Option<(StatArgs, Option<TopdownMode>)>> {
    let mut owned = args.clone();
    if !args.topdown {
        return Ok(Some((owned, None)));
    }
    let Some(mode) = topdown_mode(args, sysfs, proc_root)? else {
        warn(
            "System does not support topdown: no TopdownL metrics for this CPU model and no kernel `topdown-*` events",
        );
        return Ok(None);
    };
    match &mode {
        TopdownMode::Json(group) => {
            owned.metrics = vec![group.clone()];
            // perf 6.12's columns count no threshold events; the tree needs them, since the
            // thresholds decide which nodes show and where `<==` goes, so that it is the same
            // tree as `-M TopdownLN --tree`'s.
            owned.metric_no_threshold = !prints_tree(args, layout);
            owned.metric_only = true;
        }
        TopdownMode::Legacy(events) => {
            owned.events = vec![events.join(",")];
            owned.metric_only = true;
        }
    }
    Ok(Some((owned, Some(mode))))
}
