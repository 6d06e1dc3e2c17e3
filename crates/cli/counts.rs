//! The counts file of `tmetric eval` (format: docs/counts-format.md) and how its keys are
//! mapped to a model's input slots.
//!
//! Key spelling is canonicalised by `tmetric_perfstat::EventKey`, the same normaliser the
//! perf stat importer uses, so `cpu_core/TOPDOWN.SLOTS/`, `cpu_core@TOPDOWN.SLOTS@`,
//! `topdown.slots` and `slots` are one event. What this file adds is the PMU rule between a
//! key and a slot ([`slot_matches`]): which prefixes a slot accepts, and uncore instances
//! (`uncore_imc_0/X/`, `uncore_imc_1/X/`) that are summed as perf merges them.

use std::fmt;
use std::path::Path;

use anyhow::{Context, bail};
use serde::de::{self, Deserialize, Deserializer, MapAccess, Unexpected, Visitor};
use tmetric_catalog::Model;
use tmetric_catalog::catalog::{Id, IdKind};
use tmetric_model::Literal;
use tmetric_perfstat::EventKey;

use crate::output::is_core_pmu;

/// One value of the counts file.
#[derive(Debug, Clone)]
pub(crate) struct Entry {
    /// The key matched against inputs (`duration_time` for `duration_time_ns`).
    pub key: String,
    /// The key as written in the file, for messages.
    pub written: String,
    /// The value; NaN for `null` or `"<not supported>"`.
    pub value: f64,
    /// The key came from the `retire_latency` object: it names a retire latency.
    pub retire_latency: bool,
}

/// A parsed counts file.
#[derive(Debug, Clone, Default)]
pub(crate) struct CountsFile {
    /// Where it came from, for messages.
    pub path: String,
    /// Counts, retire latencies and tool-event values, in file order.
    pub entries: Vec<Entry>,
    /// The `literals` object.
    pub literals: Vec<(Literal, f64)>,
    /// The `source_count` object: how many PMU instances were merged into a count.
    pub source_counts: Vec<(String, f64)>,
    /// The `model` string.
    pub model: Option<String>,
}

/// Reads and parses a counts file (`-`: standard input); errors carry `path:line:column`.
pub(crate) fn read(path: &Path) -> anyhow::Result<CountsFile> {
    if path.as_os_str() == "-" {
        let mut text = String::new();
        std::io::Read::read_to_string(&mut std::io::stdin().lock(), &mut text)
            .context("cannot read the counts from standard input")?;
        return parse(&text, "<stdin>");
    }
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("cannot read counts file `{}`", path.display()))?;
    parse(&text, &path.display().to_string())
}

/// A value of the counts file or of `--var`/`--literal` given as text: a finite number that
/// is not negative. `NaN`, `inf` and numbers beyond a double (`1e400`) are refused, as the
/// expression parser refuses `1e999`; a count has no value through `null` or
/// `"<not supported>"` instead.
pub(crate) fn number(text: &str) -> Result<f64, String> {
    let trimmed = text.trim();
    let shown = tmetric_text::quote(trimmed);
    let value: f64 = trimmed.parse().map_err(|_| format!("{shown} is not a number"))?;
    if !trimmed.bytes().any(|b| b.is_ascii_digit()) {
        // `inf`, `NaN`, `infinity`: Rust parses them, the format does not have them.
        return Err(format!("{shown} is not a finite number"));
    }
    if value.is_infinite() {
        return Err(format!("{shown} is out of the range of a double"));
    }
    finite_count(value).map_err(|why| format!("{shown} {why}"))
}

/// The rule for numeric values: not negative (counts, latencies and instance counts never
/// are). `-0` reads as `0`, so that no division by it yields `-inf`.
fn finite_count(value: f64) -> Result<f64, &'static str> {
    if value < 0.0 { Err("is negative; counts cannot be") } else { Ok(value + 0.0) }
}

/// Parses counts-file text; `name` is used in errors. A UTF-8 byte-order mark is skipped.
pub(crate) fn parse(text: &str, name: &str) -> anyhow::Result<CountsFile> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let mut file: CountsFile = match serde_json::from_str::<RawFile>(text) {
        Ok(raw) => raw.0,
        Err(err) => {
            let message = err.to_string();
            // serde_json appends the position to its message; put it in front, compiler style.
            let suffix = format!(" at line {} column {}", err.line(), err.column());
            let message = message.strip_suffix(&suffix).unwrap_or(&message);
            bail!(
                "{name}:{}:{}: {message} (see docs/counts-format.md or `tmetric eval --help`)",
                err.line(),
                err.column()
            );
        }
    };
    file.path = name.to_string();
    Ok(file)
}

struct RawFile(CountsFile);

impl<'de> Deserialize<'de> for RawFile {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_map(FileVisitor)
    }
}

struct FileVisitor;

impl<'de> Visitor<'de> for FileVisitor {
    type Value = RawFile;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON object of event counts, such as {\"INST_RETIRED.ANY\": 123}")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<RawFile, A::Error> {
        let mut file = CountsFile::default();
        while let Some(key) = map.next_key::<String>()? {
            match key.as_str() {
                "counts" => {
                    let counts: NumberMap = map.next_value()?;
                    file.entries.extend(counts.0.into_iter().map(|(key, value)| Entry {
                        written: key.clone(),
                        key,
                        value,
                        retire_latency: false,
                    }));
                }
                "retire_latency" => {
                    let latencies: NumberMap = map.next_value()?;
                    file.entries.extend(latencies.0.into_iter().map(|(key, value)| Entry {
                        written: key.clone(),
                        key,
                        value,
                        retire_latency: true,
                    }));
                }
                "literals" => file.literals.extend(map.next_value::<LiteralMap>()?.0),
                "source_count" => file.source_counts.extend(map.next_value::<NumberMap>()?.0),
                "model" => file.model = Some(map.next_value::<String>()?),
                "duration_time_ns" => {
                    let ns = map.next_value::<Count>()?.0;
                    file.entries.push(Entry {
                        key: "duration_time".into(),
                        written: key,
                        value: ns / 1e9,
                        retire_latency: false,
                    });
                }
                _ => {
                    let value = map.next_value::<Count>()?.0;
                    file.entries.push(Entry {
                        written: key.clone(),
                        key,
                        value,
                        retire_latency: false,
                    });
                }
            }
        }
        Ok(RawFile(file))
    }
}

/// A count: a number, `null` (not supported: NaN), or perf's `-j` strings.
struct Count(f64);

impl<'de> Deserialize<'de> for Count {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(CountVisitor)
    }
}

struct CountVisitor;

impl Visitor<'_> for CountVisitor {
    type Value = Count;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a number, null, \"<not counted>\" or \"<not supported>\"")
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Count, E> {
        Ok(Count(v as f64))
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Count, E> {
        finite_count(v as f64).map(Count).map_err(|why| E::custom(format!("{v} {why}")))
    }

    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Count, E> {
        finite_count(v).map(Count).map_err(|why| E::custom(format!("{v} {why}")))
    }

    fn visit_unit<E: de::Error>(self) -> Result<Count, E> {
        Ok(Count(f64::NAN))
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<Count, E> {
        // perf -j prints counts as strings, and these two markers for events without a count;
        // perf's metrics read them as 0 and NaN.
        match v.trim() {
            "<not counted>" => Ok(Count(0.0)),
            "<not supported>" => Ok(Count(f64::NAN)),
            other => number(other).map(Count).map_err(|why| {
                if other.parse::<f64>().is_ok() {
                    E::custom(format!("{why}; expected {}", CountExpecting))
                } else {
                    E::invalid_value(Unexpected::Str(&tmetric_text::quote(v)), &self)
                }
            }),
        }
    }
}

/// [`CountVisitor`]'s expectation, for custom messages.
struct CountExpecting;

impl fmt::Display for CountExpecting {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a number, null, \"<not counted>\" or \"<not supported>\"")
    }
}

/// An object of counts, in file order.
struct NumberMap(Vec<(String, f64)>);

impl<'de> Deserialize<'de> for NumberMap {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = NumberMap;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("an object of event names to numbers")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<NumberMap, A::Error> {
                let mut out = Vec::new();
                while let Some((key, value)) = map.next_entry::<String, Count>()? {
                    out.push((key, value.0));
                }
                Ok(NumberMap(out))
            }
        }
        deserializer.deserialize_map(V)
    }
}

/// The `literals` object: names with or without `#`, any case; numbers or booleans.
struct LiteralMap(Vec<(Literal, f64)>);

impl<'de> Deserialize<'de> for LiteralMap {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = LiteralMap;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("an object of literal names to numbers, such as {\"smt_on\": 1}")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<LiteralMap, A::Error> {
                let mut out = Vec::new();
                while let Some(key) = map.next_key::<String>()? {
                    let Some(literal) = literal_named(&key) else {
                        return Err(de::Error::custom(format!(
                            "unknown literal `{key}`: expected one of {}",
                            literal_names()
                        )));
                    };
                    let value = map.next_value::<LiteralValue>()?.0;
                    out.push((literal, value));
                }
                Ok(LiteralMap(out))
            }
        }
        deserializer.deserialize_map(V)
    }
}

struct LiteralValue(f64);

impl<'de> Deserialize<'de> for LiteralValue {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = LiteralValue;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a number or a boolean")
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<LiteralValue, E> {
                Ok(LiteralValue(v as f64))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<LiteralValue, E> {
                finite_count(v as f64)
                    .map(LiteralValue)
                    .map_err(|why| E::custom(format!("{v} {why}")))
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<LiteralValue, E> {
                finite_count(v).map(LiteralValue).map_err(|why| E::custom(format!("{v} {why}")))
            }
            fn visit_bool<E: de::Error>(self, v: bool) -> Result<LiteralValue, E> {
                Ok(LiteralValue(f64::from(u8::from(v))))
            }
        }
        deserializer.deserialize_any(V)
    }
}

/// A literal by name, with or without `#`, ignoring case (unlike perf's lexer, because these
/// names come from users and files, not from the vendor JSON).
pub(crate) fn literal_named(name: &str) -> Option<Literal> {
    let name = name.trim().trim_start_matches('#');
    Literal::ALL.into_iter().find(|lit| lit.name().eq_ignore_ascii_case(name))
}

/// Every literal name, for messages.
pub(crate) fn literal_names() -> String {
    Literal::ALL.iter().map(|l| l.name()).collect::<Vec<_>>().join(", ")
}

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
pub(crate) struct SlotName {
    key: EventKey,
    rule: PmuRule,
}

impl SlotName {
    /// The name of input slot `id` of `model`, built from its parsed parts (PMU, event,
    /// terms, modifiers) rather than its text, so `EVENT@terms@` ids come out right.
    pub(crate) fn of_id(model: &Model, id: &Id) -> SlotName {
        let text = model.str(id.text);
        let pmu = model.str(id.pmu).to_ascii_lowercase();
        let event = model.str(id.event);
        let terms = model.str(id.terms);
        let body = match (event.is_empty(), terms.is_empty()) {
            (_, true) => event.to_string(),
            (true, false) => terms.to_string(),
            (false, false) => format!("{event},{terms}"),
        };
        // The PMU part is a placeholder: only the name, terms and modifiers are kept.
        let mut key = EventKey::from_perf(&format!("pmu/{body}/{}", model.str(id.modifiers)));
        key.pmu = None;
        let names_pmu = matches!(id.kind, IdKind::Sysfs)
            || (text.contains('@')
                && !text.split('@').next().unwrap_or("").eq_ignore_ascii_case(event));
        let rule = match id.kind {
            IdKind::Tool(_) => PmuRule::Bare,
            _ if pmu.is_empty() || pmu == "default_core" => PmuRule::AnyCore,
            _ if is_core_pmu(&pmu) => PmuRule::Core(pmu),
            _ => PmuRule::Other { pmu, bare_ok: !names_pmu },
        };
        SlotName { key, rule }
    }

    /// The name of an identifier of an ad-hoc expression (`--expr`).
    pub(crate) fn of_expr_id(text: &str) -> SlotName {
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
pub(crate) fn key_of(text: &str, retire_latency: bool) -> EventKey {
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
pub(crate) fn slot_matches(slot: &SlotName, key: &EventKey) -> Option<bool> {
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
pub(crate) fn slots_for_key(
    names: &[SlotName],
    key: &EventKey,
    model: &Model,
    written: &str,
) -> anyhow::Result<Vec<(u16, bool)>> {
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
) -> anyhow::Result<Vec<(u16, bool)>> {
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
            bail!(
                "`{written}` is ambiguous on {}: it is an input on PMUs {}; prefix it with the PMU, e.g. `{}/{written}/`",
                model.path(),
                cores.join(" and "),
                cores[0]
            );
        }
    }
    Ok(found)
}

/// How the counts file fills the input slots of one model.
#[derive(Debug, Clone)]
pub(crate) struct Assigned {
    /// Per slot: the value (NaN when no key gives one).
    pub values: Vec<f64>,
    /// Per slot: how many instance keys were summed (1 otherwise).
    pub source_counts: Vec<f64>,
    /// Per slot: a key gives it a value that is not NaN.
    pub present: Vec<bool>,
    /// Per slot: the value came from one key of a non-core PMU, so how many PMU instances were
    /// merged into it is unknown unless the file's `source_count` says.
    pub merged_unknown: Vec<bool>,
    /// Per file entry: the slots it feeds.
    pub entry_slots: Vec<Vec<u16>>,
    /// Per `source_count` entry of the file: the slots it sets.
    pub source_count_slots: Vec<Vec<u16>>,
}

/// Maps every key of `file` to the slots of `model` and fills the values.
pub(crate) fn assign(model: &Model, file: &CountsFile) -> anyhow::Result<Assigned> {
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
        let key = key_of(&entry.key, entry.retire_latency);
        let candidates = by_name.get(key.name.as_str()).map_or(&[][..], Vec::as_slice);
        let found = slots_among(&names, candidates, &key, model, &entry.written)?;
        for &(slot, instance) in &found {
            let previous = &mut givers[slot as usize];
            let clash = previous.iter().find(|&&(other, other_instance)| {
                !(instance && other_instance)
                    || key_of(&file.entries[other].key, false).pmu == key.pmu
            });
            if let Some(&(other, _)) = clash {
                bail!(
                    "{}: `{}` and `{}` both give `{}` of {}; keep one (numbered uncore instances such as `uncore_imc_0/X/` are summed)",
                    file.path,
                    file.entries[other].written,
                    entry.written,
                    model.str(model.ids[slot as usize].text),
                    model.path()
                );
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
    Ok(assigned)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn expr_slot(text: &str) -> SlotName {
        SlotName::of_expr_id(text)
    }

    #[test]
    fn pmu_rules() {
        let bare = expr_slot("INST_RETIRED.ANY");
        assert_eq!(slot_matches(&bare, &key_of("cpu/INST_RETIRED.ANY/", false)), Some(false));
        assert_eq!(slot_matches(&bare, &key_of("inst_retired.any", false)), Some(false));
        assert_eq!(slot_matches(&bare, &key_of("INST_RETIRED.ANY:k", false)), None);
        assert_eq!(slot_matches(&bare, &key_of("msr/INST_RETIRED.ANY/", false)), None);
        let core = expr_slot("cpu_core@TOPDOWN.SLOTS@");
        assert_eq!(slot_matches(&core, &key_of("cpu_core/slots/", false)), Some(false));
        assert_eq!(slot_matches(&core, &key_of("cpu_atom/TOPDOWN.SLOTS/", false)), None);
        let tsc = expr_slot("TSC");
        assert_eq!(slot_matches(&tsc, &key_of("msr/tsc/", false)), Some(false));
        let imc = expr_slot("uncore_imc@UNC_M_CAS_COUNT.RD@");
        assert_eq!(
            slot_matches(&imc, &key_of("uncore_imc_3/UNC_M_CAS_COUNT.RD/", false)),
            Some(true)
        );
        assert_eq!(slot_matches(&imc, &key_of("uncore_imc_x/UNC_M_CAS_COUNT.RD/", false)), None);
        let latency = expr_slot("MEM_LOAD_RETIRED.L3_HIT:R");
        assert_eq!(slot_matches(&latency, &key_of("MEM_LOAD_RETIRED.L3_HIT", true)), Some(false));
        assert_eq!(slot_matches(&latency, &key_of("MEM_LOAD_RETIRED.L3_HIT", false)), None);
        let tool = expr_slot("duration_time");
        assert_eq!(slot_matches(&tool, &key_of("cpu/duration_time/", false)), None);
        assert_eq!(slot_matches(&tool, &key_of("duration_time", false)), Some(false));
    }

    #[test]
    fn parse_errors_have_positions() {
        let err = parse("{\n  \"A\": 1,\n  \"B\": \"x\"\n}", "f.json").unwrap_err().to_string();
        assert!(err.starts_with("f.json:3:"), "{err}");
        let err = parse("{\"literals\": {\"smt\": 1}}", "f.json").unwrap_err().to_string();
        assert!(err.contains("unknown literal `smt`"), "{err}");
        let file = parse("{\"A\": null, \"duration_time_ns\": 2e9, \"B\": \"<not counted>\"}", "f")
            .unwrap();
        assert!(file.entries[0].value.is_nan());
        assert_eq!(file.entries[1].key, "duration_time");
        assert_eq!(file.entries[1].value, 2.0);
        assert_eq!(file.entries[2].value, 0.0);
    }

    #[test]
    fn values_follow_one_rule() {
        assert_eq!(number(" 12.5 "), Ok(12.5));
        assert_eq!(number("0"), Ok(0.0));
        assert!(number("NaN").unwrap_err().contains("not a finite number"));
        assert!(number("inf").unwrap_err().contains("not a finite number"));
        assert!(number("1e400").unwrap_err().contains("out of the range of a double"));
        assert!(number("-1").unwrap_err().contains("is negative"));
        assert!(number("x").unwrap_err().contains("is not a number"));
        let err = parse("{\"A\": -1}", "f").unwrap_err().to_string();
        assert!(err.starts_with("f:1:8: -1 is negative"), "{err}");
        let bom = parse("\u{feff}{\"A\": 1}", "f").unwrap();
        assert_eq!(bom.entries[0].value, 1.0);
    }
}

/// Fuzzing the counts-file reader (and the key-to-input mapping of what it accepts) with
/// proptest, on the stable toolchain. CI runs a short pass; `FUZZ_CASES=N` sets the cases per
/// property for a long run (`cargo test --bin tmetric counts::fuzz`). Shrunk failures are
/// kept in `crates/cli/counts.proptest-regressions` and replayed first.
#[cfg(test)]
mod fuzz {
    use proptest::prelude::*;
    use proptest::test_runner::FileFailurePersistence;

    use super::*;

    fn cases() -> u32 {
        std::env::var("FUZZ_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(256)
    }

    /// Parses; on success maps the keys onto a hybrid model, an uncore-heavy one and the
    /// common metrics; on failure checks the message is short and positioned.
    fn exercise(text: &str) -> Result<(), TestCaseError> {
        match parse(text, "fuzz.json") {
            Ok(file) => {
                for entry in &file.entries {
                    prop_assert!(!entry.value.is_sign_negative() || entry.value.is_nan());
                    prop_assert!(!entry.value.is_infinite());
                }
                for model in ["x86/meteorlake", "x86/sapphirerapids", "common/common"] {
                    if let Some(model) = tmetric_catalog::model(model) {
                        let _ = assign(model, &file);
                    }
                }
            }
            Err(err) => {
                let message = err.to_string();
                prop_assert!(message.starts_with("fuzz.json:"), "{message}");
                prop_assert!(message.len() < 2000, "{} bytes", message.len());
            }
        }
        Ok(())
    }

    const PIECES: &[&str] = &[
        "{",
        "}",
        "[",
        "]",
        ":",
        ",",
        " ",
        "\"",
        "\u{feff}",
        "null",
        "true",
        "1",
        "-1",
        "0.5",
        "1e400",
        "-0",
        "2e9",
        "\"NaN\"",
        "\"inf\"",
        "\"<not counted>\"",
        "\"<not supported>\"",
        "\"123.000000\"",
        "\"counts\"",
        "\"retire_latency\"",
        "\"literals\"",
        "\"source_count\"",
        "\"model\"",
        "\"duration_time\"",
        "\"duration_time_ns\"",
        "\"smt_on\"",
        "\"#num_cpus\"",
        "\"cpu_core/TOPDOWN.SLOTS/\"",
        "\"cpu_atom/TOPDOWN.SLOTS/\"",
        "\"slots\"",
        "\"uncore_imc_0/UNC_M_CAS_COUNT.RD/\"",
        "\"UNC_M_CAS_COUNT.RD\"",
        "\"INST_RETIRED.ANY\"",
        "\"cpu@X\\\\,cmask\\\\=1@\"",
        "\"MEM_LOAD_RETIRED.L3_HIT:R\"",
        "\"msr/tsc/\"",
        "\"é\"",
    ];

    fn soup() -> impl Strategy<Value = String> {
        prop::collection::vec(prop::sample::select(PIECES), 0..80).prop_map(|v| v.concat())
    }

    /// Well-formed files: keys and values from the pieces, in the flat or the structured form.
    fn objects() -> impl Strategy<Value = String> {
        let key = prop::sample::select(&PIECES[20..]);
        let value = prop::sample::select(&PIECES[9..24]);
        let pairs = prop::collection::vec((key, value), 0..30);
        (pairs, any::<bool>()).prop_map(|(pairs, nested)| {
            let body: Vec<String> = pairs.iter().map(|(k, v)| format!("{k}: {v}")).collect();
            if nested {
                format!("{{\"counts\": {{{}}}}}", body.join(", "))
            } else {
                format!("{{{}}}", body.join(", "))
            }
        })
    }

    proptest! {
        #![proptest_config(ProptestConfig {
            cases: cases(),
            failure_persistence: Some(Box::new(FileFailurePersistence::WithSource("proptest-regressions"))),
            ..ProptestConfig::default()
        })]

        #[test]
        fn random_bytes(bytes in prop::collection::vec(any::<u8>(), 0..300)) {
            exercise(&String::from_utf8_lossy(&bytes))?;
        }

        #[test]
        fn json_soup(text in soup()) {
            exercise(&text)?;
        }

        #[test]
        fn shaped_files(text in objects()) {
            exercise(&text)?;
        }
    }

    /// Inputs that failed once, kept as regression cases.
    #[test]
    fn regressions() {
        for text in [
            "{\"NaN\": \"NaN\"}".to_string(),
            "{\"A\": \"inf\"}".to_string(),
            "{\"A\": \"1e400\"}".to_string(),
            "{\"A\": -3}".to_string(),
            "[".repeat(100_000),
            "{\"A\": {\"B\": ".repeat(50_000),
            format!("{{\"A\": \"{}\"}}", "z".repeat(1_000_000)),
        ] {
            let err = parse(&text, "f").unwrap_err().to_string();
            assert!(err.len() < 2000, "{} bytes", err.len());
        }
        // Found by `shaped_files`: `-0` was kept negative, and x / -0 is -inf.
        let zero = parse("{\"<not supported>\": -0, \"B\": -0.0}", "f").unwrap();
        assert!(zero.entries.iter().all(|e| e.value.to_bits() == 0));
        let both = parse("{\"duration_time\": 1, \"duration_time_ns\": 2e9}", "f").unwrap();
        let err = assign(tmetric_catalog::common(), &both).unwrap_err().to_string();
        assert!(err.contains("`duration_time` and `duration_time_ns` both give"), "{err}");
    }
}
