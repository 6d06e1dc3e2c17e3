//! Event names on a machine, for every front end: the catalogue's vendor events as the event
//! tables of the runtime's [`Resolver`] (perf's pmu-events for this CPU, `sys/` tables by
//! the PMUs' `identifier`), `--cputype`, and the resolver a machine's user events go through
//! ([`resolver`]: `stat`/`record` `-e`, `serve -e`, the region API, `has_event()` probes, each
//! read by the output contract in use), and why a vendor event cannot
//! count on a machine without a core PMU ([`NoCorePmu`]). Readers of perf's output resolve
//! printed names with [`tmetric_runtime::event::legacy`].

use tmetric_catalog::Model;
use tmetric_runtime::Sysfs;
use tmetric_runtime::event::resolve::table_pmu_matches;
use tmetric_runtime::event::{EventError, EventTables, PmuFacts, Resolver, TableEvent};

/// How `-e` reads event lists on a machine for every front end (`stat` and `record` `-e`,
/// `serve -e`, the region API's events, `has_event()`'s probes): `sysfs`'s PMUs, the vendor
/// events of `tables`, and perf 7.x's tool PMU (`tool/num_cpus/`, bare tool names) when
/// `contract`, the perf release whose output the run follows, reads it.
pub fn resolver<'a>(
    sysfs: &'a Sysfs,
    tables: &'a CatalogTables,
    contract: &crate::Contract,
) -> Resolver<'a> {
    Resolver::new(sysfs).with_tables(tables).with_tool_pmu(contract.tool_pmu)
}

/// The vendor events of a machine: its CPU model's, and the `sys/` models whose `Compat`
/// matches a PMU's `identifier`.
#[derive(Debug, Clone, Default)]
pub struct CatalogTables {
    core: Vec<&'static Model>,
    /// `(sysfs PMU, model)`: a `sys/` model applies to the PMU whose identifier it matched.
    sys: Vec<(String, &'static Model)>,
}

impl CatalogTables {
    /// The tables of `model` alone.
    pub fn new(model: Option<&'static Model>) -> CatalogTables {
        CatalogTables { core: model.into_iter().collect(), sys: Vec::new() }
    }

    /// The tables perf would load on this machine with `model` (the model of its cpuid, or
    /// `--model`'s): `model`'s, and the `sys/` models by PMU `identifier`.
    pub fn for_machine(sysfs: &Sysfs, model: Option<&'static Model>) -> CatalogTables {
        let mut tables = CatalogTables::new(model);
        for pmu in sysfs.pmu_names() {
            let Ok(id) = tmetric_runtime::input::read_sysfs(
                sysfs.pmu_devices().join(&pmu).join("identifier"),
            ) else {
                continue;
            };
            for m in tmetric_catalog::sys_models_for(id.trim()) {
                tables.sys.push((pmu.clone(), m));
            }
        }
        tables
    }

    /// These tables with `model` as the CPU model.
    pub fn with_core(&self, model: &'static Model) -> CatalogTables {
        CatalogTables { core: vec![model], sys: self.sys.clone() }
    }

    /// The CPU model the tables come from.
    pub fn model(&self) -> Option<&'static Model> {
        self.core.first().copied()
    }
}

fn table_event(model: &'static Model, e: &tmetric_catalog::Event) -> TableEvent {
    let unit = model.str(e.unit);
    TableEvent {
        name: model.str(e.name).to_string(),
        terms: model.str(e.encoding).to_string(),
        unit: (!unit.is_empty()).then(|| unit.to_string()),
        scale: (e.scale != 1.0).then_some(e.scale),
    }
}

impl EventTables for CatalogTables {
    fn find(&self, pmu: &PmuFacts<'_>, name: &str) -> Option<TableEvent> {
        for &model in &self.core {
            if let Some(e) = model.events.iter().find(|e| {
                model.str(e.name).eq_ignore_ascii_case(name)
                    && table_pmu_matches(model.str(e.pmu), pmu)
            }) {
                return Some(table_event(model, &e));
            }
        }
        for (sys_pmu, model) in &self.sys {
            if sys_pmu != pmu.name {
                continue;
            }
            if let Some(e) = model.events.iter().find(|e| {
                model.str(e.name).eq_ignore_ascii_case(name)
                    && table_pmu_matches(model.str(e.pmu), pmu)
            }) {
                return Some(table_event(model, &e));
            }
        }
        None
    }
}

/// An unknown event that is a vendor event of this machine's model on a machine without a
/// core PMU (a guest without a virtual PMU): `tmetric list events` lists it, so this says why
/// `-e` cannot count it here and where it can, rather than "unknown event".
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "`{name}` is an event of {model} (this machine's model), counted on its `{pmu}` PMU, which this machine does not have: a virtual machine without a virtual PMU shows none in /sys/bus/event_source/devices{}",
    match .simulated {
        Some((sim, on)) => format!("; `--pmu-sim {sim}` counts it on a simulated {on}, or give the machine a PMU (a VM's virtual PMU)"),
        None => "; give the machine a PMU (a VM's virtual PMU) to count it".to_string(),
    }
)]
pub struct NoCorePmu {
    /// The event as given.
    pub name: String,
    /// The model's `arch/name`.
    pub model: String,
    /// The PMU the model counts it on.
    pub pmu: &'static str,
    /// A simulated machine (`--pmu-sim NAME`) whose model has the event, with that model.
    pub simulated: Option<(&'static str, String)>,
}

/// `err` as [`NoCorePmu`] when it is an unknown event that `model` (the machine's) has and
/// `sysfs` shows no core PMU; `simulated` finds a simulated machine whose model has an event.
pub fn without_core_pmu(
    err: &EventError,
    model: Option<&'static Model>,
    sysfs: &Sysfs,
    simulated: impl Fn(&str) -> Option<(&'static str, String)>,
) -> Option<NoCorePmu> {
    let (Some(model), None) = (model, sysfs.core_pmu()) else { return None };
    let name = match err {
        EventError::Located { error, .. } => match error.as_ref() {
            EventError::Unknown { name, .. } => name,
            _ => return None,
        },
        EventError::Unknown { name, .. } => name,
        _ => return None,
    };
    let event = model.events.iter().find(|e| model.str(e.name).eq_ignore_ascii_case(name))?;
    let pmu = model.str(event.pmu);
    let pmu = if pmu.is_empty() || pmu == "default_core" {
        crate::list::core_pmu_name(model.arch)
    } else {
        pmu
    };
    let simulated = simulated(name);
    Some(NoCorePmu { name: name.clone(), model: model.path(), pmu, simulated })
}

/// The PMU `--cputype TEXT` chooses (`core`, `atom`, `cpu_core`, `cpu_atom`, `cpu`), or why
/// none: perf 6.12 fails with "--cputype TEXT is not supported!" and so does this.
pub fn cputype_pmu(sysfs: &Sysfs, text: &str) -> Result<String, crate::CpuTypeError> {
    Resolver::cputype_pmu(sysfs, text).ok_or_else(|| crate::CpuTypeError {
        text: text.to_string(),
        core_pmus: Resolver::new(sysfs).core_pmus(),
    })
}
