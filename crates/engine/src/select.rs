//! perf's `-M` lookup for live front ends (`stat`, `record`, the region API): an item names a
//! common metric or group first, else one of the machine's CPU model; picks are unique and in
//! the order the items name them. Also the names a "did you mean" draws from and the models
//! that define an item elsewhere, so every front end words a miss the same way: [`items`]
//! resolves a whole `-M` list and says why an item selects nothing as a [`Miss`].

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

/// Where the CPU model a `-M` item was looked up in came from (a miss says so).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ModelFrom {
    /// `--model`.
    Named,
    /// This machine's cpuid.
    Machine,
    /// The recording being evaluated (its `-M` model, or its machine's cpuid).
    Recording,
}

/// Why a `-M` item selects nothing.
#[derive(Debug, thiserror::Error)]
pub enum Miss {
    /// It is not a common metric or group, and the CPU model to look in is unknown.
    #[error("`{item}` is not a common metric or group, so it must be a CPU model's")]
    NoModel {
        /// The item.
        item: String,
        /// Why the model is unknown.
        #[source]
        why: Box<dyn std::error::Error + Send + Sync + 'static>,
    },
    /// Neither the common metrics nor the model define it.
    #[error("{0}")]
    Unknown(Box<Unknown>),
}

/// An item that neither the common metrics nor the model define, with what a user needs to
/// find the right name or machine.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unknown {
    /// The item.
    pub item: String,
    /// The model it was looked up in, `arch/name`.
    pub model: String,
    /// Where that model came from.
    pub from: ModelFrom,
    /// Metric and group names of the common metrics and the model close to the item.
    pub close: Vec<String>,
    /// The CPU models that define the item ([`defined_for`]).
    pub defined_for: Vec<String>,
    /// A simulated machine whose model defines it: the flag (`--pmu-sim NAME`) and the model.
    pub simulated: Option<(String, String)>,
}

impl std::fmt::Display for Unknown {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let Unknown { item, model, .. } = self;
        write!(
            f,
            "cannot find metric or group `{item}` among the common metrics or those of {model}"
        )?;
        if self.defined_for.is_empty() {
            return if self.close.is_empty() {
                write!(f, "; `tmetric list metrics --model {model}` lists them")
            } else {
                write!(f, "; did you mean {}?", tmetric_text::suggest::join_code(&self.close))
            };
        }
        let shown: Vec<&str> = self.defined_for.iter().take(6).map(String::as_str).collect();
        write!(f, ": `{item}` is defined for {}", shown.join(", "))?;
        if self.defined_for.len() > 6 {
            write!(f, " and {} more", self.defined_for.len() - 6)?;
        }
        let whose = match self.from {
            ModelFrom::Named => "--model names",
            ModelFrom::Machine => "this machine is",
            ModelFrom::Recording => "the recorded machine is",
        };
        write!(f, "; {whose} {model}; ")?;
        match &self.simulated {
            Some((flag, on)) => write!(
                f,
                "count it on a simulated {on} with `{flag}`, or evaluate a log of such a machine with `tmetric eval --from-perf LOG --model {on}`"
            ),
            None => write!(
                f,
                "evaluate a log of such a machine with `tmetric eval --from-perf LOG --model {}`",
                shown[0]
            ),
        }
    }
}

/// The metrics a `-M` list selects, in order and each once: every item from the common
/// metrics first, else from the CPU model `host` gives (asked once, only when an item needs
/// it; `from` says where it comes from). `simulated` names a simulated machine whose model
/// defines an item, for the miss's advice (the engine does not know the simulator).
pub fn items<E>(
    items: &[String],
    mut host: impl FnMut() -> Result<&'static Model, E>,
    from: ModelFrom,
    simulated: impl Fn(&str) -> Option<(String, String)>,
) -> Result<Vec<Pick>, Miss>
where
    E: Into<Box<dyn std::error::Error + Send + Sync + 'static>>,
{
    let common = tmetric_catalog::common();
    let mut model: Option<&'static Model> = None;
    let mut chosen: Vec<Pick> = Vec::new();
    for item in items.iter().map(|i| i.trim()).filter(|i| !i.is_empty()) {
        // `all` is every metric of the model as well as the common ones.
        let mut found =
            if item.eq_ignore_ascii_case("all") { Vec::new() } else { find(item, common, None) };
        if found.is_empty() {
            let model = match model {
                Some(model) => model,
                None => *model.insert(
                    host().map_err(|e| Miss::NoModel { item: item.to_string(), why: e.into() })?,
                ),
            };
            found = find(item, common, Some(model));
            if found.is_empty() {
                let close = tmetric_text::suggest::closest(item, names(&[common, model]), 5);
                return Err(Miss::Unknown(Box::new(Unknown {
                    item: item.to_string(),
                    model: model.path(),
                    from,
                    close,
                    defined_for: defined_for(item),
                    simulated: simulated(item),
                })));
            }
        }
        add_unique(&mut chosen, found);
    }
    Ok(chosen)
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

    #[test]
    fn a_list_is_resolved_in_order_and_a_miss_says_why() {
        let spr = tmetric_catalog::model("sapphirerapids").unwrap();
        let host = || Ok::<_, std::io::Error>(spr);
        let none = |_: &str| None;
        let list = ["tma_retiring".to_string(), " ".into(), "TopdownL1".into()];
        let picks = items(&list, host, ModelFrom::Named, none).unwrap();
        assert_eq!(spr.str(spr.metrics[picks[0].metric].name), "tma_retiring");
        assert!(picks.len() >= 4, "level 1 added without repeating tma_retiring");
        let err = items(&["tma_retirng".into()], host, ModelFrom::Named, none).unwrap_err();
        assert_eq!(
            err.to_string(),
            "cannot find metric or group `tma_retirng` among the common metrics or those of x86/sapphirerapids; did you mean `Ret` or `tma_retiring`?"
        );
        let zen = tmetric_catalog::model("amdzen4").unwrap();
        let sim = |_: &str| Some(("--pmu-sim sapphirerapids".into(), "x86/sapphirerapids".into()));
        let err = items(
            &["tma_dtlb_store".into()],
            || Ok::<_, std::io::Error>(zen),
            ModelFrom::Recording,
            sim,
        )
        .unwrap_err();
        let text = err.to_string();
        assert!(text.contains("is defined for x86/alderlake, "), "{text}");
        assert!(text.contains(" more; the recorded machine is x86/amdzen4; count it on a simulated x86/sapphirerapids with `--pmu-sim sapphirerapids`"), "{text}");
        // The model is asked for only when an item is not common, and its failure is the cause.
        let no_model = || Err::<&'static Model, _>(std::io::Error::other("no cpuid"));
        assert!(items(&["page_faults_per_sec".into()], no_model, ModelFrom::Machine, none).is_ok());
        let err = items(&["tma_retiring".into()], no_model, ModelFrom::Machine, none).unwrap_err();
        assert_eq!(
            err.to_string(),
            "`tma_retiring` is not a common metric or group, so it must be a CPU model's"
        );
        assert_eq!(std::error::Error::source(&err).unwrap().to_string(), "no cpuid");
    }
}
