//! perf's `-M` lookup for every front end (`stat`, `record`, `report`, `eval`, the region
//! API): an item names a common metric or group first, else one of the CPU model's; picks are
//! unique and in the order the items name them. An item nothing selects is a [`Miss`], with
//! the close names a "did you mean" offers and the CPU models that define it elsewhere, worded
//! once by its `Display` so every front end says a miss the same way.

use std::fmt;

use tmetric_catalog::Model;
use tmetric_text::join_code;

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

/// The metrics `items` select, each item through [`find`] (the common metrics first, then
/// `model`'s), unique and in the order the items name them; the first item that selects
/// nothing is a [`Miss`] naming the tables searched (`model`'s, then the common metrics).
pub fn select(
    items: &[&str],
    common: &'static Model,
    model: Option<&'static Model>,
) -> Result<Vec<Pick>, Miss> {
    let mut picks = Vec::new();
    for &item in items {
        let found = find(item, common, model);
        if found.is_empty() {
            let mut searched: Vec<&'static Model> = model.into_iter().collect();
            if !searched.iter().any(|m| std::ptr::eq(*m, common)) {
                searched.push(common);
            }
            return Err(Miss::new(item, &searched));
        }
        add_unique(&mut picks, found);
    }
    Ok(picks)
}

/// How many close names a [`Miss`] offers.
const NEAR: usize = 8;

/// How many defining models a [`Miss`] names before saying how many more there are.
const DEFINED_SHOWN: usize = 6;

/// A `-M` item that selects nothing in the tables searched.
#[derive(Debug, Clone)]
pub enum Miss {
    /// CPU models other than those searched define it (`TopdownL1` on a machine whose model
    /// has no TMA metrics): the user has the wrong model, not a typo.
    Elsewhere {
        /// The item as given.
        item: String,
        /// The tables searched, a CPU model's before the common metrics.
        searched: Vec<&'static Model>,
        /// The CPU models that define it, as `arch/name`, in catalogue order.
        defined_for: Vec<String>,
    },
    /// No model defines it.
    Unknown {
        /// The item as given.
        item: String,
        /// The tables searched, a CPU model's before the common metrics.
        searched: Vec<&'static Model>,
        /// Metric and group names of the searched tables close to it, best first.
        near: Vec<String>,
    },
}

impl Miss {
    /// The miss of `item` in `searched` (at least one table): where else it is defined, else
    /// which names of `searched` are close to it.
    pub fn new(item: &str, searched: &[&'static Model]) -> Miss {
        let defined_for = defined_for(item);
        if defined_for.is_empty() {
            Miss::Unknown {
                item: item.to_string(),
                searched: searched.to_vec(),
                near: tmetric_text::closest(item, names(searched), NEAR),
            }
        } else {
            Miss::Elsewhere { item: item.to_string(), searched: searched.to_vec(), defined_for }
        }
    }

    /// The item as given.
    pub fn item(&self) -> &str {
        match self {
            Miss::Elsewhere { item, .. } | Miss::Unknown { item, .. } => item,
        }
    }

    /// The tables searched.
    pub fn searched(&self) -> &[&'static Model] {
        match self {
            Miss::Elsewhere { searched, .. } | Miss::Unknown { searched, .. } => searched,
        }
    }
}

/// `x86/sapphirerapids or the common metrics`: the tables a selection searched.
pub struct Searched<'a>(pub &'a [&'static Model]);

impl fmt::Display for Searched<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let names: Vec<String> = self
            .0
            .iter()
            .map(|m| if m.arch == "common" { "the common metrics".into() } else { m.path() })
            .collect();
        f.write_str(&names.join(" or "))
    }
}

impl fmt::Display for Miss {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let item = self.item();
        let searched = Searched(self.searched());
        write!(f, "cannot find metric or group `{item}` in {searched}")?;
        match self {
            Miss::Elsewhere { defined_for, .. } => {
                let shown = defined_for[..defined_for.len().min(DEFINED_SHOWN)].join(", ");
                write!(f, ": `{item}` is defined for {shown}")?;
                match defined_for.len().checked_sub(DEFINED_SHOWN) {
                    Some(more) if more > 0 => write!(f, " and {more} more"),
                    _ => Ok(()),
                }
            }
            Miss::Unknown { near, .. } if !near.is_empty() => {
                write!(f, "; did you mean {}?", join_code(near))
            }
            Miss::Unknown { searched, .. } => {
                let first = searched.first().map_or_else(String::new, |m| m.path());
                write!(f, "; `tmetric list metrics --model {first}` lists them")
            }
        }
    }
}

impl std::error::Error for Miss {}

/// A few models to name when the user gave none: per architecture, the one with the most
/// metrics, x86 first.
pub fn examples() -> String {
    let mut best: Vec<&Model> = Vec::new();
    let with_metrics = tmetric_catalog::MODELS.iter().copied().filter(|m| !m.metrics.is_empty());
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
