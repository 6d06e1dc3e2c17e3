//! Finding a model of the compiled catalogue by the name a user typed, and suggesting close
//! names (models, metrics, groups) when nothing matches.

use anyhow::bail;
use tmetric_catalog::{MODELS, Model};

/// The model `name` names: `arch/name` (`x86/sapphirerapids`), the name below the
/// architecture (`sapphirerapids`, `arm/cortex-a76`) or, when unique, its last component
/// (`cortex-a76`); case is ignored.
pub fn find_model(name: &str) -> anyhow::Result<&'static Model> {
    let name = name.trim();
    if let Some(model) = tmetric_catalog::model(name) {
        return Ok(model);
    }
    let by_leaf: Vec<&'static Model> =
        MODELS.iter().copied().filter(|m| leaf(m.name).eq_ignore_ascii_case(name)).collect();
    if let [model] = by_leaf.as_slice() {
        return Ok(model);
    }
    let found: Vec<String> = if by_leaf.len() > 1 {
        by_leaf.iter().map(|m| m.path()).collect()
    } else {
        closest(name, MODELS.iter().flat_map(|m| [m.path(), m.name.to_string()]), 12)
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
        let near = near_models(name);
        if !near.is_empty() {
            bail!(
                "unknown model `{name}`; the nearest names are {} (`tmetric list models` lists all {})",
                join_code(&near),
                MODELS.len()
            );
        }
        bail!(
            "unknown model `{name}`; models with metrics include {} (`tmetric list models` lists all {})",
            examples(),
            MODELS.len()
        );
    }
    let what = if by_leaf.len() > 1 { "is ambiguous" } else { "is not a model" };
    bail!(
        "`{name}` {what}; did you mean {}? (`tmetric list models` lists all {})",
        join_code(&candidates),
        MODELS.len()
    )
}

/// The models nearest to `name` when nothing is close enough for [`closest`]: within the
/// architecture it names (`x86/nonexist`: x86 models), or across all, by edit distance over
/// the part below the architecture; at most 6.
fn near_models(name: &str) -> Vec<String> {
    let lower = name.to_ascii_lowercase();
    let (arch, leaf_part) = match lower.split_once('/') {
        Some((arch, rest)) if MODELS.iter().any(|m| m.arch == arch) => (Some(arch), rest),
        _ => (None, lower.as_str()),
    };
    let mut scored: Vec<(usize, String)> = MODELS
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

fn leaf(name: &str) -> &str {
    name.rsplit('/').next().unwrap_or(name)
}

pub use tmetric_engine::select::examples;
use tmetric_text::levenshtein;
pub use tmetric_text::{closest, join_code};

/// The simulated machines (`--pmu-sim NAME`) whose catalogue model defines `item` (a metric or
/// metric group, by perf's `-M` matching), each with that model's `arch/name`: one machine
/// per model, in [`tmetric_sim::Machine::names`] order, a machine of `prefer`'s model first
/// (this machine's model, or `--model`'s, when it is simulated).
pub fn simulated_for(item: &str, prefer: Option<&Model>) -> Vec<(&'static str, String)> {
    use tmetric_engine::Select;
    let mut found: Vec<(&'static str, String)> = Vec::new();
    for &name in tmetric_sim::Machine::names() {
        let Some(machine) = tmetric_sim::Machine::named(name) else { continue };
        let Some(model) = tmetric_catalog::model(&machine.catalogue_model) else { continue };
        if model.select(item).is_empty() || found.iter().any(|(_, m)| *m == model.path()) {
            continue;
        }
        let preferred = prefer.is_some_and(|p| std::ptr::eq(p, model));
        let entry = (name, model.path());
        if preferred { found.insert(0, entry) } else { found.push(entry) }
    }
    found
}

/// `--pmu-sim amdzen4` (x86/amdzen4's metrics): the first of [`simulated_for`], as a flag
/// with its model, for "try it there" advice; `None` when no simulated machine's model
/// defines `item`.
pub fn simulated_hint(item: &str, prefer: Option<&Model>) -> Option<(String, String)> {
    simulated_for(item, prefer)
        .into_iter()
        .next()
        .map(|(name, model)| (format!("--pmu-sim {name}"), model))
}
