//! perf's `-M` lookup for every front end: an item names a common metric or group first, else
//! one of the CPU model's; picks are unique and in the order the items name them. [`items`]
//! resolves a live front end's list (`stat`, `record`, `report`, `serve`, the region API: the
//! model is found only when an item needs it), [`select`] one whose model is already known
//! (`eval --counts`, `eval --from-perf`), [`plan`] `tmetric plan`'s. An item nothing selects is
//! a typed [`Miss`] (no model to look in, or an [`Unknown`] name with the close names a "did
//! you mean" offers, the CPU models that define it, where the model searched came from,
//! [`ModelFrom`], and the front end's next step, [`Advice`]), worded once by its `Display`, so
//! every front end says a miss the same way. [`find`], [`names`] and [`defined_for`] are the
//! pieces.

use std::fmt;

use tmetric_catalog::Model;
use tmetric_text::join_code;

use crate::compiled::Select;
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

/// Where the CPU model that `-M` items are looked up in comes from; a [`Miss`] of an item
/// another model defines says so, since the model is then the likely mistake.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ModelFrom {
    /// `--model`.
    Named,
    /// This machine's cpuid.
    Machine,
    /// The recording being evaluated (its `-M` model, or its machine's cpuid).
    Recording,
    /// The perf stat log being evaluated: its `--cpuid`, or inferred from its rows.
    Log,
    /// The counts file being evaluated (its `model`).
    CountsFile,
    /// The machine `tmetric plan` plans for (`--cpuid`, `--sysfs`, `--pmu-sim`).
    Planned,
}

/// What a [`Miss`] of an item another model defines advises: the front end's next step.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Advice {
    /// A live front end ([`items`]: `stat`, `record`, `report`, `serve`, the region API):
    /// count it on a simulated machine, or evaluate a log of such a machine.
    Count,
    /// Counts already taken ([`select`]: `eval`): name the model they come from.
    Evaluate,
    /// `tmetric plan` ([`plan`]): plan it there.
    Plan,
    /// `tmetric rules`: generate the rules for such a machine (`--model`).
    Rules,
}

/// Why a `-M` item selects nothing. Its `Display` is the one wording of a miss, so every
/// front end (`stat`, `report`, `eval --counts`, `eval --from-perf`, `plan`, the region API)
/// says it the same way.
#[derive(Debug, thiserror::Error)]
pub enum Miss {
    /// It is not a common metric or group, and the CPU model to look in is unknown.
    #[error("`{item}` is not a common metric or group, so it must be a CPU model's")]
    NoModel {
        /// The item.
        item: String,
        /// Why the model is unknown (the error's source, so callers see its own chain).
        #[source]
        why: Box<dyn std::error::Error + Send + Sync + 'static>,
    },
    /// Neither the common metrics nor the CPU model define it (boxed: errors travel by
    /// value).
    #[error("{0}")]
    Unknown(Box<Unknown>),
}

/// An item that neither the common metrics nor the CPU model define, with what a user needs
/// to find the right name or machine.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unknown {
    /// The item.
    pub item: String,
    /// The CPU model it was looked up in, `arch/name`; `None`: there is none (a log of
    /// generic or software events only), so only the common metrics were searched.
    pub model: Option<String>,
    /// Where that model came from.
    pub from: ModelFrom,
    /// Metric and group names of the tables searched close to the item, best first (at most
    /// [`CLOSE`]).
    pub close: Vec<String>,
    /// The CPU models that define the item ([`defined_for`]).
    pub defined_for: Vec<String>,
    /// A simulated machine whose model defines it: the flag (`--pmu-sim NAME`) and the
    /// model, given by front ends that can count there.
    pub simulated: Option<(String, String)>,
    /// What to advise doing with a model that defines it.
    pub advice: Advice,
}

/// How many close names a miss offers.
pub const CLOSE: usize = 5;

/// How many defining models a miss names before saying how many more there are.
const DEFINED_SHOWN: usize = 6;

impl fmt::Display for Unknown {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let item = &self.item;
        write!(f, "cannot find metric or group `{item}` among the common metrics")?;
        if let Some(model) = &self.model {
            write!(f, " or those of {model}")?;
        }
        let listed = self.model.clone().unwrap_or_else(|| tmetric_catalog::common().path());
        if self.defined_for.is_empty() {
            return if self.close.is_empty() {
                write!(f, "; `tmetric list metrics --model {listed}` lists them")
            } else {
                write!(f, "; did you mean {}?", join_code(&self.close))
            };
        }
        let shown = &self.defined_for[..self.defined_for.len().min(DEFINED_SHOWN)];
        write!(f, ": `{item}` is defined for {}", shown.join(", "))?;
        if self.defined_for.len() > DEFINED_SHOWN {
            write!(f, " and {} more", self.defined_for.len() - DEFINED_SHOWN)?;
        }
        let whose = match self.from {
            ModelFrom::Named => "--model names",
            ModelFrom::Machine => "this machine is",
            ModelFrom::Recording => "the recorded machine is",
            ModelFrom::Log => "the log reads as",
            ModelFrom::CountsFile => "the counts file names",
            ModelFrom::Planned => "the machine planned for is",
        };
        match (&self.model, self.from) {
            (Some(model), _) => write!(f, "; {whose} {model}; ")?,
            (None, ModelFrom::Log) => {
                f.write_str("; the log has only generic or software events; ")?
            }
            (None, _) => write!(f, "; {whose} {listed}; ")?,
        }
        match (&self.simulated, self.advice) {
            (simulated, Advice::Plan) => {
                f.write_str("plan it there with ")?;
                if let Some((flag, _)) = simulated {
                    write!(f, "`tmetric plan -M {item} {flag}` or ")?;
                }
                write!(f, "`tmetric plan -M {item} --model {}`", shown[0])
            }
            (simulated, Advice::Rules) => {
                // A simulated machine's model first: the one `stat` would advise counting on.
                let on = simulated.as_ref().map_or(shown[0].as_str(), |(_, on)| on.as_str());
                write!(
                    f,
                    "generate the rules for such a machine with `tmetric rules -M {item} --model {on}`"
                )
            }
            (Some((flag, on)), _) => write!(
                f,
                "count it on a simulated {on} with `{flag}`, or evaluate a log of such a machine with `tmetric eval --from-perf LOG --model {on}`"
            ),
            (None, Advice::Evaluate) => {
                write!(f, "if the counts come from such a machine, pass `--model {}`", shown[0])
            }
            (None, Advice::Count) => write!(
                f,
                "evaluate a log of such a machine with `tmetric eval --from-perf LOG --model {}`",
                shown[0]
            ),
        }
    }
}

/// The metrics a live front end's `-M` list selects (`stat`, `record`, `report`), in order
/// and each once: every item from the common metrics first, else from the CPU model `host`
/// gives (asked once, only when an item needs it, so a list of common metrics runs where no
/// model is known; `from` says where it comes from). `simulated` names a simulated machine
/// whose model defines an item, for the miss's advice (the engine does not know the
/// simulator). Empty items are skipped; `all` is every metric of the model and the common
/// ones.
pub fn items<E>(
    items: &[String],
    mut host: impl FnMut() -> Result<&'static Model, E>,
    from: ModelFrom,
    simulated: impl Fn(&str) -> Option<(String, String)>,
) -> Result<Vec<Pick>, Miss>
where
    E: Into<Box<dyn std::error::Error + Send + Sync + 'static>>,
{
    let items: Vec<&str> = items.iter().map(|i| i.trim()).filter(|i| !i.is_empty()).collect();
    let host = || host().map(Some).map_err(Into::into);
    resolve(&items, host, from, simulated, Advice::Count)
}

/// The metrics `items` select when the CPU model is already known (`eval`: given, the counts
/// file's, or the log's; `None`: a log of generic or software events, so the common metrics
/// alone), by the rules of [`items`]; `from` says where `model` came from.
pub fn select(
    items: &[&str],
    model: Option<&'static Model>,
    from: ModelFrom,
) -> Result<Vec<Pick>, Miss> {
    resolve(items, || Ok(model), from, |_| None, Advice::Evaluate)
}

/// The metrics `tmetric plan`'s `-M` list selects on `model`, by the rules of [`items`];
/// `simulated` names a simulated machine whose model defines an item, for the miss's advice.
pub fn plan(
    items: &[String],
    model: &'static Model,
    from: ModelFrom,
    simulated: impl Fn(&str) -> Option<(String, String)>,
) -> Result<Vec<Pick>, Miss> {
    let items: Vec<&str> = items.iter().map(|i| i.trim()).filter(|i| !i.is_empty()).collect();
    resolve(&items, || Ok(Some(model)), from, simulated, Advice::Plan)
}

/// [`items`] and [`select`]: `host` is asked for the model the first time an item is not a
/// common metric or group (`Ok(None)`: there is none); `advice` as [`Unknown::advice`].
fn resolve(
    items: &[&str],
    mut host: impl FnMut() -> Result<Option<&'static Model>, Box<dyn std::error::Error + Send + Sync>>,
    from: ModelFrom,
    simulated: impl Fn(&str) -> Option<(String, String)>,
    advice: Advice,
) -> Result<Vec<Pick>, Miss> {
    let common = tmetric_catalog::common();
    let mut model: Option<Option<&'static Model>> = None;
    let mut chosen: Vec<Pick> = Vec::new();
    for &item in items {
        // `all` is every metric of the model as well as the common ones.
        let mut found =
            if item.eq_ignore_ascii_case("all") { Vec::new() } else { find(item, common, None) };
        if found.is_empty() {
            let model = match model {
                Some(model) => model,
                None => *model
                    .insert(host().map_err(|why| Miss::NoModel { item: item.to_string(), why })?),
            };
            let model = model.filter(|m| !std::ptr::eq(*m, common));
            found = find(item, common, model);
            if found.is_empty() {
                let searched: Vec<&'static Model> = std::iter::once(common).chain(model).collect();
                return Err(Miss::Unknown(Box::new(Unknown {
                    item: item.to_string(),
                    model: model.map(Model::path),
                    from,
                    close: tmetric_text::closest(item, names(&searched), CLOSE),
                    defined_for: defined_for(item),
                    simulated: simulated(item),
                    advice,
                })));
            }
        }
        add_unique(&mut chosen, found);
    }
    Ok(chosen)
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

pub use crate::models::examples;

/// Every metric and metric-group name of `models`, for suggestions.
pub fn names<'a>(models: &'a [&'static Model]) -> impl Iterator<Item = String> + 'a {
    models.iter().flat_map(|m| {
        m.metrics().flat_map(move |x| {
            std::iter::once(m.str(x.name).to_string())
                .chain(m.str(x.groups).split(';').filter(|g| !g.is_empty()).map(String::from))
        })
    })
}

/// The CPU models (not the `sys` uncore tables) that define `item`, as `arch/name`.
pub fn defined_for(item: &str) -> Vec<String> {
    tmetric_catalog::models()
        .iter()
        .filter(|m| !m.is_sys && !m.select(item).is_empty())
        .map(|m| m.path())
        .collect()
}

/// [`items`] on a machine: the CPU model is `host`'s (`--model`'s, or the one its cpuid
/// matches), needed only when an item is not a common metric; `simulated` as for [`items`].
pub fn on_machine(
    list: &[String],
    host: &crate::Host,
    simulated: impl Fn(&str) -> Option<(String, String)>,
) -> Result<Vec<Pick>, Miss> {
    let from = if host.model_named() { ModelFrom::Named } else { ModelFrom::Machine };
    items(list, || host.model(), from, simulated)
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
        // perf 6.12's tables: the expectations name its metrics.
        tmetric_catalog::use_vintage(tmetric_catalog::base_vintage());
        let spr = tmetric_catalog::model("sapphirerapids").unwrap();
        let host = || Ok::<_, std::io::Error>(spr);
        let none = |_: &str| None;
        let list = ["tma_retiring".to_string(), " ".into(), "TopdownL1".into()];
        let picks = items(&list, host, ModelFrom::Named, none).unwrap();
        assert_eq!(spr.str(spr.metric(picks[0].metric).name), "tma_retiring");
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

    #[test]
    fn plan_words_a_miss_as_the_others_with_its_own_next_step() {
        // perf 6.12's tables: the expectations name its metrics.
        tmetric_catalog::use_vintage(tmetric_catalog::base_vintage());
        let spr = tmetric_catalog::model("sapphirerapids").unwrap();
        let sim = |_: &str| Some(("--pmu-sim amdzen4".into(), "x86/amdzen4".into()));
        let err = plan(&["PipelineL1".into()], spr, ModelFrom::Planned, sim).unwrap_err();
        assert_eq!(
            err.to_string(),
            "cannot find metric or group `PipelineL1` among the common metrics or those of x86/sapphirerapids: `PipelineL1` is defined for x86/amdzen4, x86/amdzen5; the machine planned for is x86/sapphirerapids; plan it there with `tmetric plan -M PipelineL1 --pmu-sim amdzen4` or `tmetric plan -M PipelineL1 --model x86/amdzen4`"
        );
        let live = items(
            &["tma_retirng".into()],
            || Ok::<_, std::io::Error>(spr),
            ModelFrom::Named,
            |_| None,
        );
        let planned = plan(&["tma_retirng".into()], spr, ModelFrom::Named, |_| None);
        assert_eq!(live.unwrap_err().to_string(), planned.unwrap_err().to_string());
    }

    #[test]
    fn eval_words_a_miss_as_the_live_front_ends_do() {
        let spr = tmetric_catalog::model("sapphirerapids").unwrap();
        let live = items(
            &["tma_retirng".into()],
            || Ok::<_, std::io::Error>(spr),
            ModelFrom::Named,
            |_| None,
        );
        let eval = select(&["tma_retirng"], Some(spr), ModelFrom::Named);
        assert_eq!(live.unwrap_err().to_string(), eval.unwrap_err().to_string());
        // A log of software events only: the common metrics alone are searched.
        let common = tmetric_catalog::common();
        let all = select(&["all"], None, ModelFrom::Log).unwrap();
        assert_eq!(all.len(), common.metric_count());
        assert!(all.iter().all(|p| std::ptr::eq(p.model, common)));
        let err = select(&["tma_dtlb_store"], None, ModelFrom::Log).unwrap_err().to_string();
        assert!(err.starts_with("cannot find metric or group `tma_dtlb_store` among the common metrics: `tma_dtlb_store` is defined for "), "{err}");
        assert!(err.contains("; the log has only generic or software events; if the counts come from such a machine, pass `--model x86/"), "{err}");
        let zen = tmetric_catalog::model("amdzen4").unwrap();
        let err =
            select(&["tma_dtlb_store"], Some(zen), ModelFrom::CountsFile).unwrap_err().to_string();
        assert!(err.contains("; the counts file names x86/amdzen4; if the counts come from such a machine, pass `--model x86/"), "{err}");
        let err = select(&["tma_dtlb_store"], Some(zen), ModelFrom::Named).unwrap_err().to_string();
        assert!(err.ends_with("; --model names x86/amdzen4; if the counts come from such a machine, pass `--model x86/alderlake`"), "{err}");
    }
}
