//! Event names on a machine, for every front end: the catalogue's vendor events as the event
//! tables of the runtime's [`Resolver`] (perf's pmu-events for this CPU, `sys/` tables by
//! the PMUs' `identifier`), `--cputype`, and the resolver a machine's user events go through
//! (`stat`/`record` `-e`, the region API, `has_event()` probes). Readers of perf's output
//! resolve printed names with [`tmetric_runtime::event::legacy`].

use tmetric_catalog::Model;
use tmetric_runtime::Sysfs;
use tmetric_runtime::event::resolve::table_pmu_matches;
use tmetric_runtime::event::{EventTables, PmuFacts, Resolver, TableEvent};

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

/// The PMU `--cputype TEXT` chooses (`core`, `atom`, `cpu_core`, `cpu_atom`, `cpu`), or why
/// none: perf 6.12 fails with "--cputype TEXT is not supported!" and so does this.
pub fn cputype_pmu(sysfs: &Sysfs, text: &str) -> Result<String, crate::CpuTypeError> {
    Resolver::cputype_pmu(sysfs, text).ok_or_else(|| crate::CpuTypeError {
        text: text.to_string(),
        core_pmus: Resolver::new(sysfs).core_pmus(),
    })
}
