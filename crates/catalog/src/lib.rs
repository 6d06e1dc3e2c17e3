//! The compiled catalogue: every model of `pmu-events/arch` as generated Rust, and lookups.
//!
//! Everything under `generated/` is written by `cargo xtask regen`; only this file and `rt.rs`
//! are hand-written. Nothing here parses an expression or reads a file: the binary tables are
//! embedded with `include_bytes!` and decoded on access.
// Only `tmetric-runtime` may hold `unsafe` (ARCHITECTURE.md, invariants).
#![forbid(unsafe_code)]
#![warn(missing_docs)]

/// The generated catalogue. It is printed by `prettyplease`, not `rustfmt`; `include!` keeps
/// `cargo fmt` (which does not expand macros) from reformatting it, and `regen --check`
/// guards its bytes instead.
#[allow(missing_docs)]
mod generated {
    include!("generated/mod.rs");
}
mod rt;

pub use generated::{CPUID_MAP, MODELS};
pub use tmetric_model::catalog::{self, *};

/// Finds a model by `arch/name` (`x86/sapphirerapids`) or by name alone
/// (`sapphirerapids`, `arm/cortex-a76`), ignoring case. The common table is `common`.
pub fn model(name: &str) -> Option<&'static Model> {
    MODELS
        .iter()
        .copied()
        .find(|m| m.path().eq_ignore_ascii_case(name) || m.name.eq_ignore_ascii_case(name))
}

/// tmetric's generic metrics built only from software events and `msr/tsc/`: they apply
/// on every machine, virtual ones included.
pub fn common() -> &'static Model {
    model("common/common").expect("the common table is always generated")
}

/// The model perf would pick for a cpuid string (`GenuineIntel-6-8F-8`, an arm64 MIDR, a
/// powerpc PVR, ...): the first `mapfile.csv` row that matches, in file order (perf's `perf_pmu__find_events_table` in tools/perf/util/pmu.c).
pub fn model_for_cpuid(cpuid: &str) -> Option<&'static Model> {
    CPUID_MAP
        .iter()
        .find(|row| tmetric_model::cpuid::cpuid_matches(row.arch, row.regex, cpuid))
        .map(|row| MODELS[row.model])
}

/// The `sys/` models whose `Compat` regexes match a system PMU's sysfs `identifier`.
pub fn sys_models_for(identifier: &str) -> Vec<&'static Model> {
    MODELS
        .iter()
        .copied()
        .filter(|m| m.is_sys)
        .filter(|m| {
            m.events.iter().map(|e| e.compat).chain(m.metrics.iter().map(|x| x.compat)).any(
                |compat| {
                    compat.1 > 0 && tmetric_model::cpuid::compat_matches(m.str(compat), identifier)
                },
            )
        })
        .collect()
}
