//! perf's `-M` lookup for live front ends (`stat`, `record`, the region API): an item names a
//! common metric or group first, else one of the machine's CPU model; picks are unique and in
//! the order the items name them. Also the names a "did you mean" draws from and the models
//! that define an item elsewhere, so every front end words a miss the same way.

use tmetric_catalog::Model;

use crate::evaluator::Select;
use crate::plan::Pick;

/// The metrics `item` selects: the common metrics' when it names any (perf looks there
/// first), else `model`'s (when the machine has one).
pub fn find(item: &str, common: &'static Model, model: Option<&'static Model>) -> Vec<Pick> {
    let pick = |m: &'static Model| -> Vec<Pick> {
        m.select(item)
            .into_iter()
            .map(|metric| Pick { model: m, metric, item: item.to_string() })
            .collect()
    };
    // perf's `-M all`: every metric of the machine's model, and the common ones.
    if item.eq_ignore_ascii_case("all") {
        let mut all = pick(common);
        if let Some(m) = model.filter(|m| !std::ptr::eq(*m, common)) {
            all.extend(pick(m));
        }
        return all;
    }
    let found = pick(common);
    match model {
        Some(model) if found.is_empty() => pick(model),
        _ => found,
    }
}

/// Appends `found` to `picks`, skipping metrics already picked.
pub fn add_unique(picks: &mut Vec<Pick>, found: Vec<Pick>) {
    for pick in found {
        if !picks.iter().any(|p| std::ptr::eq(p.model, pick.model) && p.metric == pick.metric) {
            picks.push(pick);
        }
    }
}

/// Every metric and metric-group name of `models`, for suggestions.
pub fn names<'a>(models: &'a [&'static Model]) -> impl Iterator<Item = String> + 'a {
    models.iter().flat_map(|m| {
        m.metrics.iter().flat_map(move |x| {
            std::iter::once(m.str(x.name).to_string())
                .chain(m.str(x.groups).split(';').filter(|g| !g.is_empty()).map(String::from))
        })
    })
}

/// The CPU models (not the `sys` uncore tables) that define `item`, as `arch/name`.
pub fn defined_for(item: &str) -> Vec<String> {
    tmetric_catalog::MODELS
        .iter()
        .filter(|m| !m.is_sys && !m.select(item).is_empty())
        .map(|m| m.path())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn common_first_then_the_model_and_picks_stay_unique() {
        let common = tmetric_catalog::common();
        let spr = tmetric_catalog::model("sapphirerapids").unwrap();
        let l1 = find("TopdownL1", common, Some(spr));
        assert!(l1.len() >= 4 && l1.iter().all(|p| std::ptr::eq(p.model, spr)));
        assert!(find("TopdownL1", common, None).is_empty());
        let mut picks = l1.clone();
        add_unique(&mut picks, find("tma_retiring", common, Some(spr)));
        assert_eq!(picks.len(), l1.len(), "tma_retiring is already a level-1 pick");
        let defined = defined_for("tma_dtlb_store");
        assert!(defined.contains(&"x86/sapphirerapids".to_string()), "{defined:?}");
        assert!(!defined.iter().any(|d| d.contains("amdzen")));
        assert!(names(&[spr]).any(|n| n == "TopdownL1"));
    }
}
