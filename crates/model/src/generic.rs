//! tmetric's own generic metrics (`pmu-events/generic/`) that perf 7.x's common table defines
//! under another name: the loader drops tmetric's copy where the vintage has perf's, and the
//! exporter keeps the series a dashboard made under the earlier name.

/// `(tmetric's name, perf 7.x's name)` of each generic metric perf 7.x renamed.
pub const PERF_NAMES: &[(&str, &str)] = &[
    ("cpus_utilized", "CPUs_utilized"),
    ("context_switches_per_sec", "cs_per_second"),
    ("cpu_migrations_per_sec", "migrations_per_second"),
    ("page_faults_per_sec", "page_faults_per_second"),
];

/// perf 7.x's name for tmetric's generic metric `ours`, if perf renamed it.
pub fn perf_name(ours: &str) -> Option<&'static str> {
    PERF_NAMES.iter().find(|(o, _)| *o == ours).map(|(_, perf)| *perf)
}

/// tmetric's generic metric that perf 7.x's common metric `perf` stands for, if any.
pub fn generic_name(perf: &str) -> Option<&'static str> {
    PERF_NAMES.iter().find(|(_, p)| *p == perf).map(|(ours, _)| *ours)
}
