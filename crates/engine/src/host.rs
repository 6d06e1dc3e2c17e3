//! The machine a run measures, probed once per run ([`Host::probe`]): its sysfs tree and
//! procfs root, `/proc/cpuinfo`, the cpuid and catalogue model, the PMU model, the topology
//! and the literals, the errno [`Environment`], the vendor event tables. Every front end that
//! plans on a machine (`stat`, `plan`, `serve`, the region API) probes it once and passes it
//! down by reference.
//!
//! A `Host` is a value, not a process-wide cache: each run probes its own, and what a
//! long-running exporter must see change (its cgroups, found again every interval) is read
//! by the exporter, not kept here.

use std::path::{Path, PathBuf};

use tmetric_catalog::Model;
use tmetric_model::Literal;
use tmetric_runtime::{Environment, Sysfs, SysfsError, Topology};

use crate::events::CatalogTables;
use crate::models::{HostModelError, find_model, model_of_cpuid};
use crate::pmu::{MachineFacts, PmuModel};

/// The machine a run measures, as probed at its start.
#[derive(Debug)]
pub struct Host {
    sysfs: Sysfs,
    proc_root: PathBuf,
    cpuinfo: String,
    env: Environment,
    cpuid: Option<String>,
    model: Result<&'static Model, HostModelError>,
    named: bool,
    topology: Result<Topology, SysfsError>,
    pmus: PmuModel,
    /// The machine's own tables: its cpuid's model and the `sys/` models of its PMUs.
    tables: CatalogTables,
    /// The literals of a run that does not count system-wide.
    literals: [f64; Literal::COUNT],
    tick_hz: f64,
}

impl Host {
    /// Probes the machine `sysfs` and `proc_root` describe. `model` is `--model`'s name: the
    /// model `-M` items are looked up in and the PMU model's counter numbers come from;
    /// without it, the model of the machine's cpuid (or `PERF_CPUID`). A model that cannot be
    /// found is kept as [`Host::model`]'s error, for the front ends that need one.
    pub fn probe(sysfs: &Sysfs, proc_root: &Path, model: Option<&str>) -> Host {
        let sysfs = sysfs.clone();
        let cpuinfo_path = proc_root.join("cpuinfo");
        let (cpuinfo, unreadable) = match tmetric_runtime::input::read_sysfs(&cpuinfo_path) {
            Ok(text) => (text, None),
            Err(e) => (String::new(), Some(e)),
        };
        let cpuid =
            crate::plan::cpuid_with(|| tmetric_runtime::sysfs::cpuid_from(&cpuinfo, &sysfs));
        // The cpuid's model is looked up once (every mapfile row's regex is tried): it is both
        // the model without `--model` and the machine's own tables with it.
        let own = cpuid.as_deref().and_then(tmetric_catalog::model_for_cpuid);
        let found = match model {
            Some(name) => find_model(name).map_err(HostModelError::from),
            None => model_of_cpuid(cpuid.as_deref(), own, cpuinfo_path, |_| {
                unreadable.as_ref().is_some_and(tmetric_runtime::sys::out_of_descriptors)
            }),
        };
        let topology = sysfs.topology();
        let env = Environment::with_cpuinfo(&sysfs, proc_root, &cpuinfo);
        let nmi_watchdog =
            tmetric_runtime::input::read_sysfs(proc_root.join("sys/kernel/nmi_watchdog"))
                .is_ok_and(|t| t.trim() == "1");
        let smt_on = topology.as_ref().is_ok_and(|t| t.smt_on);
        let facts = MachineFacts { nmi_watchdog, smt_on };
        let pmus = PmuModel::from_sysfs(&sysfs, facts, found.as_ref().ok().copied());
        let tables = CatalogTables::for_machine(&sysfs, own);
        let literals = crate::plan::literals_of(&sysfs, topology.as_ref().ok(), &cpuinfo);
        let tick_hz = crate::plan::tick_hz(&sysfs);
        Host {
            sysfs,
            proc_root: proc_root.to_path_buf(),
            cpuinfo,
            env,
            cpuid,
            model: found,
            named: model.is_some(),
            topology,
            pmus,
            tables,
            literals,
            tick_hz,
        }
    }

    /// Its sysfs tree.
    pub fn sysfs(&self) -> &Sysfs {
        &self.sysfs
    }

    /// Its procfs root (`/proc`, or a simulated one).
    pub fn proc_root(&self) -> &Path {
        &self.proc_root
    }

    /// `/proc/cpuinfo`'s text; empty when it could not be read.
    pub fn cpuinfo(&self) -> &str {
        &self.cpuinfo
    }

    /// Errno explanations.
    pub fn env(&self) -> &Environment {
        &self.env
    }

    /// Its PMUs.
    pub fn pmus(&self) -> &PmuModel {
        &self.pmus
    }

    /// The cpuid as perf reads it: `PERF_CPUID`, else `/proc/cpuinfo` or arm64's `midr_el1`.
    pub fn cpuid(&self) -> Option<&str> {
        self.cpuid.as_deref()
    }

    /// The model `-M` items not among the common metrics come from: `--model`'s, else the
    /// one the cpuid matches.
    pub fn model(&self) -> Result<&'static Model, HostModelError> {
        self.model.clone()
    }

    /// The model was named (`--model`), not found from the cpuid.
    pub fn model_named(&self) -> bool {
        self.named
    }

    /// CPU counts and SMT siblings, or why sysfs could not say.
    pub fn topology(&self) -> Result<&Topology, &SysfsError> {
        self.topology.as_ref()
    }

    /// The CPUs online when it was probed.
    pub fn online_cpus(&self) -> Result<Vec<u32>, SysfsError> {
        match &self.topology {
            Ok(t) => Ok(t.online.clone()),
            // Read again for the error itself (sysfs errors are not `Clone`): this is rare.
            Err(_) => self.sysfs.online_cpus(),
        }
    }

    /// The vendor events perf would load here: `model`'s (the cpuid's when `None`) and the
    /// `sys/` models of the PMUs' `identifier`s.
    pub fn tables(&self, model: Option<&'static Model>) -> CatalogTables {
        match model {
            Some(model) => self.tables.with_core(model),
            None => self.tables.clone(),
        }
    }

    /// Machine literals for metric expressions (`#num_cpus`, `#smt_on`, ...), for a run's
    /// target: `-a` (`all_cpus`: perf stat's `system_wide`, also a run without a command or
    /// target) and the CPUs `-C` lists (`cpus`). `#target_cpu` is either; `#core_wide` is
    /// [`core_wide`]'s.
    pub fn literals(&self, all_cpus: bool, cpus: Option<&[u32]>) -> [f64; Literal::COUNT] {
        let mut values = self.literals;
        values[Literal::TargetCpu.index()] = f64::from(u8::from(all_cpus || cpus.is_some()));
        if let Ok(t) = &self.topology {
            let whole = core_wide(all_cpus, t.smt_on, cpus, &t.siblings);
            values[Literal::CoreWide.index()] = f64::from(u8::from(whole));
        }
        values
    }

    /// The kernel's HZ as the core PMU's rotation interval tells it ([`crate::plan::tick_hz`]).
    pub fn tick_hz(&self) -> f64 {
        self.tick_hz
    }

    /// Each online CPU with an SMT sibling, and that sibling; empty when the topology is
    /// unknown.
    pub fn smt_siblings(&self) -> &[(u32, u32)] {
        self.topology.as_ref().map_or(&[], |t| t.siblings.as_slice())
    }
}

/// perf's `core_wide()` (`util/smt.c`, `cpu_topology__core_wide`), what `#core_wide` reads:
/// whether the run counts every thread of the cores it counts. Only a count with `-a` can
/// (perf stat's `system_wide`, which `-C` alone does not set); it does without SMT, or when
/// every CPU `-C` names has its SMT sibling named too (`siblings`: each online CPU with one).
pub fn core_wide(
    system_wide: bool,
    smt_on: bool,
    cpus: Option<&[u32]>,
    siblings: &[(u32, u32)],
) -> bool {
    if !system_wide {
        return false;
    }
    if !smt_on {
        return true;
    }
    match cpus {
        None => true,
        Some(cpus) => siblings
            .iter()
            .filter(|(cpu, _)| cpus.contains(cpu))
            .all(|(_, sibling)| cpus.contains(sibling)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_system_wide_count_covers_whole_cores() {
        let siblings = [(0, 2), (2, 0), (1, 3), (3, 1)];
        assert!(!core_wide(false, false, None, &siblings), "per task: never, even without SMT");
        assert!(!core_wide(false, true, Some(&[0, 2]), &siblings), "-C alone: never");
        assert!(core_wide(true, false, Some(&[0]), &siblings), "without SMT: always");
        assert!(core_wide(true, true, None, &siblings), "-a: every CPU");
        assert!(core_wide(true, true, Some(&[0, 2]), &siblings));
        assert!(!core_wide(true, true, Some(&[0, 1]), &siblings), "CPU 0 without its sibling 2");
    }
}
