//! What `stat` counts when a flag asks for perf's built-in choices rather than naming
//! events: perf 6.12's default and `-d` event lists, perf 7.x's default metric groups
//! (`crate::contract` says which a run uses), `--topdown`'s choice on a machine
//! ([`topdown_mode`]), the CPU-to-core map the older topdown events are printed per core
//! with, why the CPU model's metrics cannot count here at all ([`uncountable`]), and what a
//! run without `-e` or `-M` selects ([`default_selection`]).

use std::fmt;

use tmetric_catalog::Model;
use tmetric_runtime::Sysfs;

use crate::Host;
use crate::compiled::Select;
use crate::contract::Defaults;
use crate::plan::{Pick, Plan, Root, Source};
use crate::select;

/// perf 6.12's default events (`add_default_attributes`): `cpu-clock` instead of
/// `task-clock` when counting CPUs, and the stalled-cycles events only where the core PMU
/// lists them.
pub fn default_events(system_wide: bool, sysfs: &Sysfs) -> Vec<&'static str> {
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

/// perf 7.x's default metric groups: `Default`, and with `-d` (level 1) to `-ddd` (3) also
/// `Default2` to `Default4` (`add_default_events`).
pub fn default_metric_groups(level: u8) -> &'static [&'static str] {
    const GROUPS: [&str; 4] = ["Default", "Default2", "Default3", "Default4"];
    &GROUPS[..=usize::from(level.min(3))]
}

/// perf's `-d` (level 1), `-dd` (2) and `-ddd` (3) events.
pub fn detailed_events(level: u8) -> Vec<&'static str> {
    tmetric_runtime::event::legacy::DETAILED
        .iter()
        .take(level.min(3) as usize)
        .flat_map(|l| l.iter().copied())
        .collect()
}

/// What a run without `-e` or `-M` counts, as its perf release chooses ([`Defaults`]).
#[derive(Debug, Clone)]
pub struct DefaultSelection {
    /// perf 6.12's default events ([`default_events`]); `None` for perf 7.x, whose defaults
    /// are metric groups only.
    pub events: Option<Vec<&'static str>>,
    /// The metrics: perf 6.12's, the model's own `Default` metric group where it has one;
    /// perf 7.x's, the `Default` groups (with `-d`, `Default2`...) of the common metrics and
    /// the model.
    pub picks: Vec<Pick>,
    /// Whether the metrics print as perf's `Default` view (`Plan::show_as_default_view`):
    /// some pick belongs to a model's `Default` group.
    pub default_view: bool,
    /// perf 7.x's metric groups, whose events print as default events
    /// (`Plan::show_default_events`).
    pub metric_groups: bool,
}

/// What `stat` counts without `-e` or `-M` on `host` (`system_wide` for `-a` or `-C`, where
/// `cpu-clock` replaces `task-clock`; `detailed` is `-d`'s level), by the contract's
/// `defaults`. A machine without a known model gets perf 6.12's events with no metrics.
pub fn default_selection(
    defaults: Defaults,
    system_wide: bool,
    detailed: u8,
    host: &Host,
) -> DefaultSelection {
    let model = host.model().ok();
    let mut chosen = DefaultSelection {
        events: None,
        picks: Vec::new(),
        default_view: false,
        metric_groups: false,
    };
    match defaults {
        Defaults::Events => {
            // perf's default events, and its `Default` metric group where the model has one.
            chosen.events = Some(default_events(system_wide, host.sysfs()));
            if let Some(model) = model {
                let common = tmetric_catalog::common();
                chosen.picks = select::find("Default", common, Some(model))
                    .into_iter()
                    .filter(|p| !std::ptr::eq(p.model, common))
                    .collect();
                chosen.default_view = !chosen.picks.is_empty();
            }
        }
        Defaults::MetricGroups => {
            // perf 7.x's `Default` groups (with -d, `Default2`...) of every table.
            let tables = std::iter::once(tmetric_catalog::common()).chain(model);
            for table in tables {
                for group in default_metric_groups(detailed) {
                    select::add_unique(&mut chosen.picks, select::find(group, table, None));
                }
            }
            chosen.metric_groups = true;
            // A model's own `Default` metrics (`TopdownL1`) print under their group's name,
            // as in perf 6.12.
            chosen.default_view = chosen
                .picks
                .iter()
                .any(|p| !p.model.str(p.model.metric(p.metric).default_group).is_empty());
        }
    }
    chosen
}

/// Why no selected CPU-model metric can count a single input on a machine without a
/// hardware PMU (most VMs): which models define the metrics and what to do instead. Its
/// `Display` is the whole warning.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Uncountable {
    /// The CPU-model metrics selected.
    pub metrics: Vec<String>,
    /// Why the machine has no hardware PMU.
    pub no_pmu: String,
    /// The model the metrics were selected from, `arch/name` (it defines them: the machine
    /// lacks the counters, not the model the metrics).
    pub model: String,
    /// A simulated machine whose model defines the first metric: the flag and the model.
    pub simulated: Option<(String, String)>,
}

impl fmt::Display for Uncountable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let first = &self.metrics[0];
        let names: Vec<&str> = self.metrics.iter().map(String::as_str).collect();
        let them = if names.len() == 1 { "it" } else { "them" };
        write!(
            f,
            "{} of {} cannot be counted here: {}, so {} events print <not supported>. ",
            metrics_list(&names),
            self.model,
            self.no_pmu,
            if names.len() == 1 { "its" } else { "their" }
        )?;
        match &self.simulated {
            Some((flag, on)) => write!(
                f,
                "To see {them}: count on a simulated {on} (`{flag}`), plan there \
                 (`tmetric plan -M {first} {flag}`), or evaluate a log of a machine with a PMU \
                 (`tmetric eval --from-perf LOG`)"
            ),
            None => write!(
                f,
                "To see {them}: plan for the model (`tmetric plan -M {first} --model {}`) or \
                 evaluate a log of a machine with a PMU (`tmetric eval --from-perf LOG`)",
                self.model
            ),
        }
    }
}

/// Whether every selected CPU-model metric of `plan` is uncountable on `machine` because it
/// has no core PMU. `simulated` names a simulated machine whose model defines a metric (the
/// engine does not know the simulator).
pub fn uncountable(
    plan: &Plan,
    machine: &Host,
    simulated: impl Fn(&str, &'static Model) -> Option<(String, String)>,
) -> Option<Uncountable> {
    let common = tmetric_catalog::common();
    let model_roots: Vec<&Root> =
        plan.roots.iter().filter(|r| !std::ptr::eq(r.model, common)).collect();
    if model_roots.is_empty() || machine.sysfs().core_pmu().is_some() {
        return None;
    }
    let countable = model_roots.iter().any(|root| {
        root.slot_rows
            .iter()
            .flatten()
            .any(|&row| matches!(plan.rows[row].source, Source::Counter(_)))
    });
    if countable {
        return None;
    }
    let metrics: Vec<String> = model_roots
        .iter()
        .map(|r| r.model.str(r.model.metric(r.metric).name).to_string())
        .collect();
    let model = model_roots[0].model;
    Some(Uncountable {
        simulated: simulated(&metrics[0], model),
        metrics,
        no_pmu: machine.env().no_hardware_pmu().to_string(),
        model: model.path(),
    })
}

/// Up to four names in backquotes, then how many more metrics.
fn metrics_list(names: &[&str]) -> String {
    let shown: Vec<String> = names.iter().take(4).map(|n| format!("`{n}`")).collect();
    if names.len() > 4 {
        format!("{} and {} more metrics", shown.join(", "), names.len() - 4)
    } else {
        shown.join(", ")
    }
}

/// How `--topdown` measures on a machine.
#[derive(Debug, Clone, PartialEq)]
pub enum TopdownMode {
    /// The model's `TopdownLN` metric group.
    Json(String),
    /// The kernel's older `topdown-*` events (the formulas of perf's `--topdown` patch series).
    Legacy(Vec<String>),
}

/// Why `--topdown` cannot measure as asked.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TopdownError {
    /// `--td-level` deeper than the model's TopdownL groups.
    #[error("--td-level {level}: {model} has TopdownL1 to TopdownL{max}")]
    TooDeep {
        /// The level asked for.
        level: u8,
        /// The model, `arch/name`.
        model: String,
        /// Its deepest TopdownL group.
        max: u8,
    },
    /// `--td-level` above 1 with the kernel's older events.
    #[error("--td-level {0}: the kernel's older topdown events give level 1 only")]
    LegacyLevel(u8),
    /// The older events count per core, so only system-wide.
    #[error(
        "--topdown on this CPU uses the kernel's older topdown events, which count per core: add -a (system-wide)"
    )]
    LegacyNeedsAllCpus,
}

/// `--topdown` on `host`: the model's (`--model`'s or the machine's) TopdownL metrics
/// at `td_level` (1 when not given) when it has them, else the kernel's older events (which
/// need `all_cpus`, `-a`), else `None` (no topdown support).
pub fn topdown_mode(
    td_level: Option<u8>,
    all_cpus: bool,
    host: &Host,
) -> Result<Option<TopdownMode>, TopdownError> {
    let level = td_level.unwrap_or(1).max(1);
    let sysfs = host.sysfs();
    if sysfs.core_pmu().is_none() {
        // No core PMU (a VM without a virtual PMU): neither path can count.
        return Ok(None);
    }
    if let Ok(model) = host.model() {
        let max = (1..=9u8).filter(|l| !model.select(&format!("TopdownL{l}")).is_empty()).max();
        if let Some(max) = max {
            if level > max {
                return Err(TopdownError::TooDeep { level, model: model.path(), max });
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
        return Err(TopdownError::LegacyLevel(level));
    }
    if !all_cpus {
        return Err(TopdownError::LegacyNeedsAllCpus);
    }
    let events = crate::topdown::LEGACY_EVENTS
        .iter()
        .filter(|e| events_dir.join(e).exists())
        .map(|e| e.to_string())
        .collect();
    Ok(Some(TopdownMode::Legacy(events)))
}

/// Each online CPU's (package, core), from sysfs topology.
pub fn core_map(sysfs: &Sysfs) -> Vec<(u32, (u32, u32))> {
    let cpus = sysfs.online_cpus().unwrap_or_default();
    cpus.into_iter()
        .map(|c| {
            let (package, _, core) = sysfs.cpu_place(c);
            (c, (package, core))
        })
        .collect()
}
