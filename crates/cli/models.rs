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

/// A few models to name when the user gave none: per architecture, the one with the most metrics.
pub fn examples() -> String {
    let mut best: Vec<&Model> = Vec::new();
    let with_metrics = MODELS.iter().copied().filter(|m| !m.metrics.is_empty());
    for model in with_metrics.filter(|m| !m.is_sys && m.arch != "test" && m.arch != "common") {
        match best.iter_mut().find(|b| b.arch == model.arch) {
            Some(b) if b.metrics.len() < model.metrics.len() => *b = model,
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

/// `a`, `b` or `c`.
pub fn join_code(items: &[String]) -> String {
    let quoted: Vec<String> = items.iter().map(|i| format!("`{i}`")).collect();
    match quoted.as_slice() {
        [] => String::new(),
        [one] => one.clone(),
        [init @ .., last] => format!("{} or {last}", init.join(", ")),
    }
}

/// Up to `limit` of `names` closest to `wanted`: those containing it (or contained in it),
/// then those within a small edit distance, best first.
pub fn closest(wanted: &str, names: impl IntoIterator<Item = String>, limit: usize) -> Vec<String> {
    let wanted_lower = wanted.to_ascii_lowercase();
    let budget = (wanted.chars().count() / 3).max(2);
    let mut scored: Vec<(usize, String)> = names
        .into_iter()
        .filter_map(|name| {
            let lower = name.to_ascii_lowercase();
            let score = if lower == wanted_lower {
                0
            } else if lower.contains(&wanted_lower)
                || (lower.len() >= 3 && wanted_lower.contains(&lower))
            {
                1 + lower.len().abs_diff(wanted_lower.len()) / 8
            } else {
                let distance = levenshtein(&lower, &wanted_lower);
                if distance > budget {
                    return None;
                }
                2 + distance
            };
            Some((score, name))
        })
        .collect();
    scored.sort();
    scored.dedup_by(|a, b| a.1.eq_ignore_ascii_case(&b.1));
    scored.into_iter().take(limit).map(|(_, name)| name).collect()
}

fn levenshtein(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut diagonal = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let above = row[j + 1];
            row[j + 1] = (above + 1).min(row[j] + 1).min(diagonal + usize::from(ca != *cb));
            diagonal = above;
        }
    }
    row[b.len()]
}

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
