//! The compiled catalogue: every model of every stored perf vintage (`pmu-events/arch`, the base,
//! and `pmu-events/vintage/X.Y`) as generated Rust, the vintage a process uses, and lookups.
//!
//! Everything under `generated/` is written by `cargo xtask regen`; only this file and `rt.rs`
//! are hand-written. The lookups below read the selected vintage ([`select_vintage`]; the
//! newest stored until one is selected, while the output stays perf 6.12's:
//! [`contract_vintage`]). Nothing here parses an expression or reads a file: the binary tables are
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

use std::sync::atomic::{AtomicUsize, Ordering};

pub use generated::{BASE_VINTAGE, CPUID_MAP, MODELS, VINTAGES};
pub use tmetric_model::catalog::{self, *};

/// The index in [`VINTAGES`] of the vintage whose vendor data this process uses, [`NEWEST`]
/// until one is selected.
static SELECTED: AtomicUsize = AtomicUsize::new(NEWEST);

/// The index in [`VINTAGES`] of the vintage whose perf release's output this process follows:
/// the base (perf 6.12, the drop-in tmetric is) until the user chooses a vintage, which sets
/// both.
static CONTRACT: AtomicUsize = AtomicUsize::new(BASE_VINTAGE);

/// Stands for the last of [`VINTAGES`] (the newest), which a constant cannot name.
const NEWEST: usize = usize::MAX;

/// Whether the user chose the vintage (`--perf-version`): then nothing else may change it.
static CHOSEN: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Whether [`select_vintage`] chose the vintage (the user did); inference may change it only
/// when not.
pub fn vintage_is_chosen() -> bool {
    CHOSEN.load(Ordering::Relaxed)
}

std::thread_local! {
    /// The vintages inference or a recording chose for what this thread evaluates (`eval
    /// --from-perf`, `report`), over the process's selection, as (vendor data, output
    /// contract): logs evaluated on other threads (tests run them in-process) each infer
    /// their own.
    static INFERRED: std::cell::Cell<Option<(usize, usize)>> = const { std::cell::Cell::new(None) };
}

fn index_of(v: &'static Vintage) -> Option<usize> {
    VINTAGES.iter().position(|x| std::ptr::eq(x, v))
}

/// Makes this thread's lookups and output contract use `v` (one of [`VINTAGES`]) without it
/// counting as the user's choice: for inference that tries each vintage on a perf log, which
/// that perf release printed. Undone by [`clear_inferred_vintage`].
pub fn use_vintage(v: &'static Vintage) {
    use_vintages(v, v);
}

/// Makes this thread's lookups use `data`'s vendor tables and its output follow `contract`'s
/// perf release, without it counting as the user's choice: for a recording, which says what
/// it was made with. Undone by [`clear_inferred_vintage`].
pub fn use_vintages(data: &'static Vintage, contract: &'static Vintage) {
    if let (Some(data), Some(contract)) = (index_of(data), index_of(contract)) {
        INFERRED.with(|cell| cell.set(Some((data, contract))));
    }
}

/// Back to the process's vintage on this thread (before inferring for another log).
pub fn clear_inferred_vintage() {
    INFERRED.with(|cell| cell.set(None));
}

/// The vintage whose vendor tables lookups use: the one inference or a recording chose on this
/// thread, else the process's (the newest stored, unless [`select_vintage`] chose another).
pub fn vintage() -> &'static Vintage {
    &VINTAGES[vintage_index()]
}

/// The vintage whose perf release's output (layouts, built-in metrics, exit codes) is
/// followed: the one inference or a recording chose on this thread, else the user's choice,
/// else the base (perf 6.12's), whatever vintage the vendor tables come from.
pub fn contract_vintage() -> &'static Vintage {
    let index = INFERRED.with(std::cell::Cell::get).map(|(_, contract)| contract);
    &VINTAGES[index.unwrap_or(CONTRACT.load(Ordering::Relaxed))]
}

/// The index in [`VINTAGES`] of [`vintage`].
fn vintage_index() -> usize {
    let index = INFERRED.with(std::cell::Cell::get).map(|(data, _)| data);
    match index.unwrap_or(SELECTED.load(Ordering::Relaxed)) {
        NEWEST => VINTAGES.len() - 1,
        index => index,
    }
}

/// The base vintage: perf 6.12's, whose output tmetric matches unless told otherwise.
pub fn base_vintage() -> &'static Vintage {
    &VINTAGES[BASE_VINTAGE]
}

/// The vintage whose vendor tables are used when none is chosen: the newest stored (its newer
/// CPU models and corrected formulas), printed as perf 6.12 prints ([`contract_vintage`]).
pub fn default_vintage() -> &'static Vintage {
    VINTAGES.last().expect("the catalogue holds a vintage")
}

/// The stored vintage for perf release `version` (`7.2`, `6.12.3`, `6.5`): its own, or for a
/// release without one the newest older vintage (perf's vendor tables only grow between
/// releases; the caller says which was used). `None` for a malformed version or one older than
/// every vintage.
pub fn vintage_for(version: &str) -> Option<&'static Vintage> {
    let wanted = version_key(version)?;
    VINTAGES.iter().rev().find(|v| version_key(v.version).is_some_and(|key| key <= wanted))
}

/// `major.minor` of a version as numbers (`6.12.117-rc1` -> `[6, 12]`).
fn version_key(version: &str) -> Option<[u32; 2]> {
    let mut parts = version.split('.');
    let major = parts.next()?.parse().ok()?;
    let minor: String = parts.next()?.chars().take_while(char::is_ascii_digit).collect();
    Some([major, minor.parse().ok()?])
}

/// Makes the lookups of this process use vintage `version` (see [`vintage_for`]) and its
/// output follow that perf release's; the vintage used, or an error listing the stored ones.
pub fn select_vintage(version: &str) -> Result<&'static Vintage, String> {
    let chosen = vintage_for(version).ok_or_else(|| {
        let known: Vec<&str> = VINTAGES.iter().map(|v| v.version).collect();
        format!(
            "no perf vintage for `{version}`: the catalogue holds perf {} (give a version like 7.2)",
            known.join(", ")
        )
    })?;
    let index = index_of(chosen).expect("a stored vintage");
    SELECTED.store(index, Ordering::Relaxed);
    CONTRACT.store(index, Ordering::Relaxed);
    CHOSEN.store(true, Ordering::Relaxed);
    Ok(chosen)
}

/// Makes the process's vendor tables perf 6.12's (the base) unless the user chose a vintage:
/// for the accuracy bench, whose documented full run and targets (`docs/accuracy.md`) are
/// measured on the base's tables (its quick run with three seeds gives the same figures on
/// perf 7.2's within noise: 21.2 and 21.3 % of perf's error). The output contract is unchanged.
pub fn prefer_base_data() {
    if !CHOSEN.load(Ordering::Relaxed) {
        SELECTED.store(BASE_VINTAGE, Ordering::Relaxed);
    }
}

/// The models of the selected vintage.
pub fn models() -> &'static [&'static Model] {
    vintage().models
}

/// The cpuid map of the selected vintage.
pub fn cpuid_map() -> &'static [CpuidRow] {
    vintage().cpuid_map
}

/// The vintages that define a model `arch/name` (`x86/arrowlake`), oldest first.
pub fn vintages_of(path: &str) -> Vec<&'static Vintage> {
    VINTAGES.iter().filter(|v| v.models.iter().any(|m| m.path() == path)).collect()
}

/// The model `arch/name` of vintage `v`, if it has one.
pub fn model_in(v: &Vintage, path: &str) -> Option<&'static Model> {
    v.models.iter().copied().find(|m| m.path() == path)
}

/// Finds a model by `arch/name` (`x86/sapphirerapids`) or by name alone
/// (`sapphirerapids`, `arm/cortex-a76`), ignoring case. The common table is `common`.
pub fn model(name: &str) -> Option<&'static Model> {
    // Compared in place: evaluating a long log asks for the common table once per block, and
    // building each model's `arch/name` to compare was most of that time.
    let is = |m: &Model| match name.split_once('/') {
        Some((arch, rest)) => {
            (m.arch.eq_ignore_ascii_case(arch) && m.name.eq_ignore_ascii_case(rest))
                || m.name.eq_ignore_ascii_case(name)
        }
        None => m.name.eq_ignore_ascii_case(name),
    };
    models().iter().copied().find(|m| is(m))
}

/// The common table: perf 7.x's own common metrics (in vintages that have them) and tmetric's
/// generic metrics built only from software events and `msr/tsc/`: they apply on every machine,
/// virtual ones included.
pub fn common() -> &'static Model {
    // Once per vintage: evaluating a log asks for it for every input of every block.
    static COMMONS: std::sync::OnceLock<Vec<&'static Model>> = std::sync::OnceLock::new();
    let commons = COMMONS.get_or_init(|| {
        VINTAGES
            .iter()
            .map(|v| {
                v.models
                    .iter()
                    .copied()
                    .find(|m| m.arch == "common" && m.name == "common")
                    .expect("the common table is always generated")
            })
            .collect()
    });
    commons[vintage_index()]
}

/// The model perf would pick for a cpuid string (`GenuineIntel-6-8F-8`, an arm64 MIDR, a
/// powerpc PVR, ...): the first `mapfile.csv` row that matches, in file order (perf's `perf_pmu__find_events_table` in tools/perf/util/pmu.c).
pub fn model_for_cpuid(cpuid: &str) -> Option<&'static Model> {
    let v = vintage();
    v.cpuid_map
        .iter()
        .find(|row| tmetric_model::cpuid::cpuid_matches(row.arch, row.regex, cpuid))
        .map(|row| v.models[row.model])
}

/// The `sys/` models whose `Compat` regexes match a system PMU's sysfs `identifier`.
pub fn sys_models_for(identifier: &str) -> Vec<&'static Model> {
    models()
        .iter()
        .copied()
        .filter(|m| m.is_sys)
        .filter(|m| {
            m.events.iter().map(|e| e.compat).chain(m.metrics().map(|x| x.compat)).any(|compat| {
                !compat.is_empty()
                    && tmetric_model::cpuid::compat_matches(m.str(compat), identifier)
            })
        })
        .collect()
}
