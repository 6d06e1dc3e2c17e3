//! Finding a model of the compiled catalogue by the name a user typed (`--model`), with the
//! close names (models) offered when nothing matches ([`ModelError`]), and the model a live
//! front end's `-M` items are looked up in ([`host_model`]: named, or this machine's).

use std::path::{Path, PathBuf};

use tmetric_catalog::{Model, models};
use tmetric_runtime::Sysfs;
use tmetric_text::{closest, join_code, levenshtein};

/// Why a typed name finds no model; its `Display` offers the names to try.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ModelError {
    /// Nothing is close: the models nearest the name (in the architecture it names), or
    /// none, and then examples of models with metrics.
    #[error("unknown model `{name}`; {}", unknown_advice(.near))]
    Unknown {
        /// The name as typed (trimmed).
        name: String,
        /// The nearest models' `arch/name`, at most 6; may be empty.
        near: Vec<String>,
    },
    /// Close names exist: the models the name could mean.
    #[error(
        "`{name}` {}; did you mean {}? (`tmetric list models` lists all {})",
        if *.ambiguous { "is ambiguous" } else { "is not a model" },
        join_code(.candidates),
        models().len()
    )]
    Close {
        /// The name as typed (trimmed).
        name: String,
        /// Several models share the name below their architecture (`arch/name` needed).
        ambiguous: bool,
        /// The candidates' `arch/name`, at most 6.
        candidates: Vec<String>,
    },
}

fn unknown_advice(near: &[String]) -> String {
    if near.is_empty() {
        format!(
            "models with metrics include {} (`tmetric list models` lists all {})",
            examples(),
            models().len()
        )
    } else {
        format!(
            "the nearest names are {} (`tmetric list models` lists all {})",
            join_code(near),
            models().len()
        )
    }
}

/// The model `name` names: `arch/name` (`x86/sapphirerapids`), the name below the
/// architecture (`sapphirerapids`, `arm/cortex-a76`) or, when unique, its last component
/// (`cortex-a76`); case is ignored.
pub fn find_model(name: &str) -> Result<&'static Model, ModelError> {
    let name = name.trim();
    if let Some(model) = tmetric_catalog::model(name) {
        return Ok(model);
    }
    let by_leaf: Vec<&'static Model> =
        models().iter().copied().filter(|m| leaf(m.name).eq_ignore_ascii_case(name)).collect();
    if let [model] = by_leaf.as_slice() {
        return Ok(model);
    }
    let found: Vec<String> = if by_leaf.len() > 1 {
        by_leaf.iter().map(|m| m.path()).collect()
    } else {
        closest(name, models().iter().flat_map(|m| [m.path(), m.name.to_string()]), 12)
            .into_iter()
            .map(|n| tmetric_catalog::model(&n).map_or(n, Model::path))
            .collect()
    };
    let mut candidates: Vec<String> = Vec::new();
    for path in found {
        if !candidates.contains(&path) && candidates.len() < 6 {
            candidates.push(path);
        }
    }
    if candidates.is_empty() {
        return Err(ModelError::Unknown { name: name.to_string(), near: near_models(name) });
    }
    Err(ModelError::Close { name: name.to_string(), ambiguous: by_leaf.len() > 1, candidates })
}

/// The models nearest to `name` when nothing is close enough for [`closest`]: within the
/// architecture it names (`x86/nonexist`: x86 models), or across all, by edit distance over
/// the part below the architecture; at most 6.
fn near_models(name: &str) -> Vec<String> {
    let lower = name.to_ascii_lowercase();
    let (arch, leaf_part) = match lower.split_once('/') {
        Some((arch, rest)) if models().iter().any(|m| m.arch == arch) => (Some(arch), rest),
        _ => (None, lower.as_str()),
    };
    let mut scored: Vec<(usize, String)> = models()
        .iter()
        .filter(|m| arch.is_none_or(|a| m.arch == a) && m.arch != "test")
        .map(|m| (levenshtein(&leaf(m.name).to_ascii_lowercase(), leaf_part), m.path()))
        .collect();
    scored.sort();
    scored.dedup_by(|a, b| a.1 == b.1);
    // Within a named architecture the nearest are always worth listing; across all, only
    // those within half the name's length of it.
    let budget = if arch.is_some() { usize::MAX } else { (leaf_part.chars().count() / 2).max(2) };
    scored.into_iter().filter(|(d, _)| *d <= budget).take(6).map(|(_, path)| path).collect()
}

/// A few models to name when the user gave none: per architecture, the one with the most
/// metrics, x86 first.
pub fn examples() -> String {
    let mut best: Vec<&Model> = Vec::new();
    let with_metrics = tmetric_catalog::models().iter().copied().filter(|m| m.metric_count() > 0);
    for model in with_metrics.filter(|m| !m.is_sys && m.arch != "test" && m.arch != "common") {
        match best.iter_mut().find(|b| b.arch == model.arch) {
            Some(b) if b.metric_count() < model.metric_count() => *b = model,
            Some(_) => {}
            None => best.push(model),
        }
    }
    // x86 first: it is where most users come from.
    best.sort_by_key(|m| (m.arch != "x86", m.arch));
    best.iter().map(|m| m.path()).collect::<Vec<_>>().join(", ")
}

fn leaf(name: &str) -> &str {
    name.rsplit('/').next().unwrap_or(name)
}

/// Why the model `-M` items are looked up in is not known.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HostModelError {
    /// `--model` names no model.
    #[error(transparent)]
    Named(#[from] ModelError),
    /// The cpuid is unknown only because no descriptor was left to read it.
    #[error("cannot read {}: descriptors ran out; raise the limit with `ulimit -n`", .cpuinfo.display())]
    DescriptorsRanOut {
        /// The procfs `cpuinfo` file.
        cpuinfo: PathBuf,
    },
    /// Neither `/proc/cpuinfo` nor sysfs says what the CPU is.
    #[error(
        "cannot tell this machine's cpuid (no x86 /proc/cpuinfo fields or arm64 midr_el1); name a model with --model"
    )]
    NoCpuid,
    /// No model of the catalogue is for this cpuid.
    #[error(
        "no model of the catalogue matches this machine's cpuid `{cpuid}`; name one with --model"
    )]
    NoMatch {
        /// The cpuid, as perf computes it.
        cpuid: String,
    },
}

/// The model `-M` items not among the common metrics come from: `--model`'s (`model`), else
/// the one the machine's cpuid (or `PERF_CPUID`) matches. A front end that plans on the
/// machine has it from its [`crate::Host`]; this is for those that need the model alone.
pub fn host_model(
    model: Option<&str>,
    sysfs: &Sysfs,
    proc_root: &Path,
) -> Result<&'static Model, HostModelError> {
    if let Some(name) = model {
        return Ok(find_model(name)?);
    }
    let cpuid = crate::plan::cpuid_of(sysfs, proc_root);
    let own = cpuid.as_deref().and_then(tmetric_catalog::model_for_cpuid);
    model_of_cpuid(cpuid.as_deref(), own, proc_root.join("cpuinfo"), |cpuinfo| {
        std::fs::File::open(cpuinfo).is_err_and(|e| tmetric_runtime::sys::out_of_descriptors(&e))
    })
}

/// The model of `cpuid` (`own`, the catalogue's match for it); without one, why not: `ran_out`
/// says whether `cpuinfo` could not be read only because no descriptor was left to read it (a
/// low `ulimit -n`).
pub(crate) fn model_of_cpuid(
    cpuid: Option<&str>,
    own: Option<&'static Model>,
    cpuinfo: PathBuf,
    ran_out: impl FnOnce(&Path) -> bool,
) -> Result<&'static Model, HostModelError> {
    let Some(cpuid) = cpuid else {
        if ran_out(&cpuinfo) {
            return Err(HostModelError::DescriptorsRanOut { cpuinfo });
        }
        return Err(HostModelError::NoCpuid);
    };
    own.ok_or(HostModelError::NoMatch { cpuid: cpuid.into() })
}
