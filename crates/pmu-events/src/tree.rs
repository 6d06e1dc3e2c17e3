//! The loaded tree: architectures, their mapfiles and tables, and the cpuid and sys-PMU lookups.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

use crate::cpuid::{MapRow, compat_matches, cpuid_matches};
use crate::diag::{Diagnostic, Severity};
use crate::event::{Event, Location, Metric};

/// Everything under `pmu-events/arch`.
#[derive(Debug, Clone)]
pub struct Tree {
    /// The directory that was loaded.
    pub root: PathBuf,
    /// Every architecture directory except `common`, sorted by name (`test` included).
    pub arches: Vec<Arch>,
    /// `arch/common` (perf 7.x's `arch/common/common`), which applies to every model of every
    /// architecture, with tmetric's generic metrics when loaded by `load_vintage`. Empty if absent.
    pub common: Table,
    /// What the loader ignored or dropped, sorted by file and line (empty for a clean tree).
    pub diagnostics: Vec<Diagnostic>,
}

/// One architecture directory, e.g. `x86`.
#[derive(Debug, Clone)]
pub struct Arch {
    /// Directory name: `x86`, `arm64`, `powerpc`, `s390`, `riscv`, `nds32`, `test`.
    pub name: String,
    /// Data rows of `mapfile.csv`, in file order (empty when there is none, as for `test`).
    pub mapfile: Vec<MapRow>,
    /// Every model directory (a leaf, or holding only `sys/`) and every `sys` directory, sorted by
    /// path. Directories without json files (e.g. `freescale/imx8mm`, which holds only `sys/`) are
    /// included, empty.
    pub tables: Vec<Table>,
    /// The architecture-standard files (json files directly in the directory, the targets of
    /// `ArchStdEvent`), relative to the tree root.
    pub std_files: Vec<String>,
}

/// The events and metrics of one model or sys directory.
#[derive(Debug, Clone, Default)]
pub struct Table {
    /// Architecture name (`common` for the common table).
    pub arch: String,
    /// Directory relative to the tree root: `x86/sapphirerapids`, `arm64/freescale/imx8mm/sys`.
    pub path: String,
    /// Directory relative to the architecture, as mapfile.csv names it: `sapphirerapids`,
    /// `arm/cortex-a76`, `freescale/imx8mm/sys`. Unique within the architecture.
    pub name: String,
    /// A `sys` directory: events and metrics of system PMUs, selected by `Compat` rather than cpuid.
    pub is_sys: bool,
    /// Events in file order (files sorted by name), after `ArchStdEvent` expansion.
    pub events: Vec<Event>,
    /// Metrics in file order, after `ArchStdEvent` expansion. An object with both `EventName`
    /// and `MetricName` gives an event and a metric.
    pub metrics: Vec<Metric>,
    /// `metricgroups.json` and perf 7.x's generated `extra-metricgroups.json`: group name to
    /// description.
    pub metric_groups: BTreeMap<String, String>,
    /// `counter.json`: counters per PMU.
    pub counters: Vec<CounterInfo>,
}

/// One entry of `counter.json`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CounterInfo {
    /// `Unit` as written (`core`, `CHA`, `iMC`, `cbox_0`, ...).
    pub unit: String,
    /// The PMU: `default_core` for `core`, otherwise [`crate::unit_to_pmu`] of the unit.
    pub pmu: String,
    /// `CountersNumFixed`.
    pub fixed: u32,
    /// `CountersNumGeneric`.
    pub generic: u32,
    /// Where the entry is.
    pub at: Location,
}

impl Tree {
    /// The architecture named `name`.
    pub fn arch(&self, name: &str) -> Option<&Arch> {
        self.arches.iter().find(|arch| arch.name == name)
    }

    /// The model table perf would pick for `cpuid` on `arch` (see [`Arch::model_for_cpuid`]).
    pub fn model_for_cpuid(&self, arch: &str, cpuid: &str) -> Option<&Table> {
        self.arch(arch)?.model_for_cpuid(cpuid)
    }

    /// The sys tables of `arch` with at least one event or metric whose `Compat` matches the
    /// sysfs `identifier` of a PMU (whole-string regex match).
    pub fn sys_tables_for(&self, arch: &str, identifier: &str) -> Vec<&Table> {
        let Some(arch) = self.arch(arch) else { return Vec::new() };
        let mut memo: HashMap<String, bool> = HashMap::new();
        let mut matches = |compat: Option<&str>| {
            compat.is_some_and(|compat| {
                *memo
                    .entry(compat.to_string())
                    .or_insert_with(|| compat_matches(compat, identifier))
            })
        };
        arch.sys_tables()
            .filter(|table| {
                table.events.iter().any(|e| matches(e.compat.as_deref()))
                    || table.metrics.iter().any(|m| matches(m.compat.as_deref()))
            })
            .collect()
    }

    /// How many diagnostics have `severity`.
    pub fn diagnostic_count(&self, severity: Severity) -> usize {
        self.diagnostics.iter().filter(|d| d.severity == severity).count()
    }

    /// The file system path of a location in the tree.
    pub fn path_of(&self, location: &Location) -> PathBuf {
        self.root.join(&location.file)
    }
}

impl Arch {
    /// The table named `name` (a mapfile directory such as `arm/cortex-a76`).
    pub fn table(&self, name: &str) -> Option<&Table> {
        self.tables.iter().find(|table| table.name == name)
    }

    /// The first mapfile row, in file order, that matches `cpuid` (per [`cpuid_matches`]) and names
    /// a non-empty table; perf skips rows whose directory has no events and no metrics.
    pub fn model_for_cpuid(&self, cpuid: &str) -> Option<&Table> {
        self.mapfile
            .iter()
            .filter(|row| cpuid_matches(&self.name, &row.cpuid_regex, cpuid))
            .find_map(|row| self.table(&row.dir).filter(|table| !table.is_empty()))
    }

    /// The mapfile row that [`Arch::model_for_cpuid`] uses.
    pub fn map_row_for_cpuid(&self, cpuid: &str) -> Option<&MapRow> {
        self.mapfile
            .iter()
            .filter(|row| cpuid_matches(&self.name, &row.cpuid_regex, cpuid))
            .find(|row| self.table(&row.dir).is_some_and(|table| !table.is_empty()))
    }

    /// The `sys` tables.
    pub fn sys_tables(&self) -> impl Iterator<Item = &Table> {
        self.tables.iter().filter(|table| table.is_sys)
    }
}

impl Table {
    /// No events and no metrics.
    pub fn is_empty(&self) -> bool {
        self.events.is_empty() && self.metrics.is_empty()
    }

    /// The events named `name` (case-insensitive, as perf looks them up), one per PMU at most.
    pub fn events_named<'t, 'n>(
        &'t self,
        name: &'n str,
    ) -> impl Iterator<Item = &'t Event> + use<'t, 'n> {
        self.events.iter().filter(move |event| event.name.eq_ignore_ascii_case(name))
    }

    /// The metrics named `name` (case-insensitive), e.g. one per hybrid PMU.
    pub fn metrics_named<'t, 'n>(
        &'t self,
        name: &'n str,
    ) -> impl Iterator<Item = &'t Metric> + use<'t, 'n> {
        self.metrics.iter().filter(move |metric| metric.name.eq_ignore_ascii_case(name))
    }

    /// The counter.json entry for a PMU name as used in [`Event::pmu`].
    pub fn counter_info(&self, pmu: &str) -> Option<&CounterInfo> {
        self.counters.iter().find(|info| info.pmu == pmu)
    }
}

/// Joins path components with `/` whatever the platform, for stable relative names.
pub(crate) fn rel_join(base: &str, name: &str) -> String {
    if base.is_empty() { name.to_string() } else { format!("{base}/{name}") }
}

pub(crate) fn abs(root: &Path, rel: &str) -> PathBuf {
    if rel.is_empty() { root.to_path_buf() } else { root.join(rel) }
}
