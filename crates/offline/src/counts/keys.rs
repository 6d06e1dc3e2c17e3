//! How a counts file's keys give a model's input slots: the PMU rule between a key and a slot
//! ([`slot_matches`]): which prefixes a slot accepts, and uncore instances (`uncore_imc_0/X/`,
//! `uncore_imc_1/X/`) that are summed as perf merges them.

use tmetric_catalog::Model;
use tmetric_catalog::catalog::{Id, IdKind};
use tmetric_perfstat::EventKey;

use super::{CountsError, CountsFile};
use crate::perflog::is_core_pmu;

/// Which PMU prefixes a slot accepts in a key.
#[derive(Debug, Clone, PartialEq, Eq)]
enum PmuRule {
    /// The id names no PMU and the event is on the core PMU (or is a kernel event such as
    /// `topdown-retiring`): a bare key or any core PMU prefix (`cpu/`, `cpu_core/`).
    AnyCore,
    /// A named core PMU (`cpu@X,cmask=1@`, `cpu_core@X@`): that prefix, or none.
    Core(String),
    /// Tool events (`duration_time`): a bare key only.
    Bare,
    /// Another PMU (`uncore_imc`, `msr`): that PMU, `uncore_<pmu>`, or their numbered instances
    /// (summed); a bare key too when the id itself did not name the PMU.
    Other {
        /// Lower-case PMU name.
        pmu: String,
        /// Whether a key without a PMU may stand for it.
        bare_ok: bool,
    },
}

/// An input slot, or an ad-hoc identifier, in the form keys are matched against.
#[derive(Debug, Clone)]
pub struct SlotName {
    key: EventKey,
    rule: PmuRule,
}

impl SlotName {
    /// The name of input slot `id` of `model`, built from its parsed parts (PMU, event,
    /// terms, modifiers) rather than its text, so `EVENT@terms@` ids come out right.
    pub fn of_id(model: &Model, id: &Id) -> SlotName {
        let text = model.str(id.text);
        let pmu = model.str(id.pmu).to_ascii_lowercase();
        let event = model.str(id.event);
        // `name=` only names what is printed (perf 7.x's common metrics write
        // `software@task-clock,name=task-clock@`): the counted event is the same without it.
        let terms = model
            .str(id.terms)
            .split(',')
            .filter(|t| !t.is_empty() && !t.trim_start().starts_with("name="))
            .collect::<Vec<_>>()
            .join(",");
        let terms = terms.as_str();
        let body = match (event.is_empty(), terms.is_empty()) {
            (_, true) => event.to_string(),
            (true, false) => terms.to_string(),
            (false, false) => format!("{event},{terms}"),
        };
        let modifiers = model.str(id.modifiers);
        let core = pmu.is_empty() || pmu == "default_core" || is_core_pmu(&pmu);
        // A core slot is read as a bare key is, so perf's legacy names and aliases come out in
        // the one spelling a key's do (`cpu-cycles:uH` is `cycles:uH`); another PMU's slot gets
        // a placeholder PMU, whose events keep their own names. Only the name, terms and
        // modifiers are kept.
        let mut key = match (core, modifiers.is_empty()) {
            (true, true) => EventKey::from_perf(&body),
            (true, false) => EventKey::from_perf(&format!("{body}:{modifiers}")),
            (false, _) => EventKey::from_perf(&format!("pmu/{body}/{modifiers}")),
        };
        key.pmu = None;
        let names_pmu = matches!(id.kind, IdKind::Sysfs)
            || (text.contains('@')
                && !text.split('@').next().unwrap_or("").eq_ignore_ascii_case(event));
        let rule = match id.kind {
            IdKind::Tool(_) => PmuRule::Bare,
            _ if pmu.is_empty() || pmu == "default_core" => PmuRule::AnyCore,
            _ if is_core_pmu(&pmu) => PmuRule::Core(pmu),
            // The kernel's software events keep their perf names whatever PMU the formula
            // writes them through (perf 7.x's `software@task-clock,name=task-clock@`): a
            // counts file's bare `task-clock` is that event.
            _ if pmu == "software" => PmuRule::Other { pmu, bare_ok: true },
            _ => PmuRule::Other { pmu, bare_ok: !names_pmu },
        };
        SlotName { key, rule }
    }

    /// The name of an identifier of an ad-hoc expression (`--expr`).
    pub fn of_expr_id(text: &str) -> SlotName {
        let mut key = EventKey::from_expr_id(text);
        let rule = match key.pmu.take() {
            None if key.is_tool() => PmuRule::Bare,
            None => PmuRule::AnyCore,
            Some(p) if is_core_pmu(&p) => PmuRule::Core(p),
            Some(p) => PmuRule::Other { pmu: p, bare_ok: false },
        };
        SlotName { key, rule }
    }

    /// The core PMU the slot is bound to, if it names one.
    fn core_pmu(&self) -> Option<&str> {
        match &self.rule {
            PmuRule::Core(p) => Some(p),
            _ => None,
        }
    }
}

/// The canonical key of a counts-file key; `retire_latency` for keys of the
/// `retire_latency` object.
pub fn key_of(text: &str, retire_latency: bool) -> EventKey {
    let mut key = if (text.contains('@') || text.contains('\\')) && !text.contains('/') {
        EventKey::from_expr_id(text)
    } else {
        EventKey::from_perf(text)
    };
    key.retire_latency |= retire_latency;
    key
}

/// Whether `key` gives a value for `slot`: `None` if not, `Some(true)` when the key is one
/// numbered instance of the slot's PMU (`uncore_imc_0/X/`), to be summed with the others.
pub fn slot_matches(slot: &SlotName, key: &EventKey) -> Option<bool> {
    if slot.key.name != key.name
        || slot.key.modifiers != key.modifiers
        || slot.key.retire_latency != key.retire_latency
    {
        return None;
    }
    let key_pmu = key.pmu.as_deref();
    match &slot.rule {
        PmuRule::AnyCore => key_pmu.is_none_or(is_core_pmu).then_some(false),
        PmuRule::Core(core) => key_pmu.is_none_or(|p| p == core).then_some(false),
        PmuRule::Bare => key_pmu.is_none().then_some(false),
        PmuRule::Other { pmu, bare_ok } => match key_pmu {
            None => bare_ok.then_some(false),
            Some(p) => {
                let uncore = format!("uncore_{pmu}");
                [pmu.as_str(), uncore.as_str()].into_iter().find_map(|base| {
                    if p == base {
                        Some(false)
                    } else {
                        let suffix = p.strip_prefix(base)?.strip_prefix('_')?;
                        (!suffix.is_empty() && suffix.bytes().all(|b| b.is_ascii_digit()))
                            .then_some(true)
                    }
                })
            }
        },
    }
}

/// The slots of `names` that `key` gives a value for, and whether as an instance. An error
/// when the key would stand for the same event on two different core PMUs (hybrid models).
pub fn slots_for_key(
    names: &[SlotName],
    key: &EventKey,
    model: &Model,
    written: &str,
) -> Result<Vec<(u16, bool)>, CountsError> {
    let all: Vec<usize> = (0..names.len()).collect();
    slots_among(names, &all, key, model, written)
}

/// [`slots_for_key`] over the slots `candidates` only (those whose name can match).
fn slots_among(
    names: &[SlotName],
    candidates: &[usize],
    key: &EventKey,
    model: &Model,
    written: &str,
) -> Result<Vec<(u16, bool)>, CountsError> {
    let found: Vec<(u16, bool)> = candidates
        .iter()
        .filter_map(|&slot| Some((slot as u16, slot_matches(&names[slot], key)?)))
        .collect();
    if key.pmu.is_none() {
        let mut cores: Vec<&str> =
            found.iter().filter_map(|&(slot, _)| names[slot as usize].core_pmu()).collect();
        cores.sort_unstable();
        cores.dedup();
        if cores.len() > 1 {
            return Err(CountsError::Ambiguous {
                written: written.to_string(),
                model: model.path(),
                cores: cores.into_iter().map(str::to_string).collect(),
            });
        }
    }
    Ok(found)
}

/// How the counts file fills the input slots of one model.
#[derive(Debug, Clone)]
pub struct Assigned {
    /// Per slot: the value (NaN when no key gives one).
    pub values: Vec<f64>,
    /// Per slot: how many instance keys were summed (1 otherwise).
    pub source_counts: Vec<f64>,
    /// Per slot: `aggr_nr()`, the file's `aggr_nr`, else the instance keys summed.
    pub aggr_nrs: Vec<f64>,
    /// Per slot: the file's `aggr_nr` gives it.
    pub aggr_nr_given: Vec<bool>,
    /// Per slot: a key gives it a value that is not NaN.
    pub present: Vec<bool>,
    /// Per slot: the value came from one key of a non-core PMU, so how many PMU instances were
    /// merged into it is unknown unless the file's `source_count` says.
    pub merged_unknown: Vec<bool>,
    /// Per file entry: the slots it feeds.
    pub entry_slots: Vec<Vec<u16>>,
    /// Per `source_count` entry of the file: the slots it sets.
    pub source_count_slots: Vec<Vec<u16>>,
    /// Per `aggr_nr` entry of the file: the slots it sets.
    pub aggr_nr_slots: Vec<Vec<u16>>,
}

/// Maps every key of `file` to the slots of `model` and fills the values.
pub fn assign(model: &Model, file: &CountsFile) -> Result<Assigned, CountsError> {
    let names: Vec<SlotName> = model.ids.iter().map(|id| SlotName::of_id(model, id)).collect();
    // A key matches only slots of its name: index them, so a file of millions of keys costs
    // one lookup per key rather than a scan of every slot.
    let mut by_name: std::collections::HashMap<&str, Vec<usize>> = std::collections::HashMap::new();
    for (slot, name) in names.iter().enumerate() {
        by_name.entry(name.key.name.as_str()).or_default().push(slot);
    }
    let n = model.ids.len();
    let mut givers: Vec<Vec<(usize, bool)>> = vec![Vec::new(); n];
    let mut entry_slots = Vec::with_capacity(file.entries.len());
    for (index, entry) in file.entries.iter().enumerate() {
        let key = &entry.event;
        let Some(candidates) = by_name.get(key.name.as_str()) else {
            // Most keys of a big file name no input: nothing to match or to clash.
            entry_slots.push(Vec::new());
            continue;
        };
        let found = slots_among(&names, candidates, key, model, &entry.written)?;
        for &(slot, instance) in &found {
            let previous = &mut givers[slot as usize];
            let clash = previous.iter().find(|&&(other, other_instance)| {
                !(instance && other_instance) || file.entries[other].event.pmu == key.pmu
            });
            if let Some(&(other, _)) = clash {
                return Err(CountsError::Clash {
                    path: file.path.clone(),
                    first: file.entries[other].written.clone(),
                    second: entry.written.clone(),
                    input: model.str(model.ids[slot as usize].text).to_string(),
                    model: model.path(),
                });
            }
            previous.push((index, instance));
        }
        entry_slots.push(found.into_iter().map(|(slot, _)| slot).collect());
    }
    let mut assigned = Assigned {
        values: vec![f64::NAN; n],
        source_counts: vec![1.0; n],
        present: vec![false; n],
        merged_unknown: vec![false; n],
        entry_slots,
        source_count_slots: Vec::with_capacity(file.source_counts.len()),
        aggr_nrs: Vec::new(),
        aggr_nr_given: vec![false; n],
        aggr_nr_slots: Vec::with_capacity(file.aggr_nrs.len()),
    };
    for (slot, given) in givers.iter().enumerate() {
        if given.is_empty() {
            continue;
        }
        let value: f64 = given.iter().map(|&(entry, _)| file.entries[entry].value).sum();
        assigned.values[slot] = value;
        assigned.present[slot] = !value.is_nan();
        assigned.source_counts[slot] = given.len() as f64;
        assigned.merged_unknown[slot] =
            given.len() == 1 && !given[0].1 && matches!(names[slot].rule, PmuRule::Other { .. });
    }
    for (key_text, count) in &file.source_counts {
        let key = key_of(key_text, false);
        let found = slots_for_key(&names, &key, model, key_text)?;
        for &(slot, _) in &found {
            assigned.source_counts[slot as usize] = *count;
            assigned.merged_unknown[slot as usize] = false;
        }
        assigned.source_count_slots.push(found.into_iter().map(|(slot, _)| slot).collect());
    }
    // Each instance key read as one counter, unless the file says how many were summed.
    assigned.aggr_nrs.clone_from(&assigned.source_counts);
    for (key_text, count) in &file.aggr_nrs {
        let key = key_of(key_text, false);
        let found = slots_for_key(&names, &key, model, key_text)?;
        for &(slot, _) in &found {
            assigned.aggr_nrs[slot as usize] = *count;
            assigned.aggr_nr_given[slot as usize] = true;
        }
        assigned.aggr_nr_slots.push(found.into_iter().map(|(slot, _)| slot).collect());
    }
    Ok(assigned)
}
