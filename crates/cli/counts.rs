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
pub struct Entry {
    /// The key as written in the file, for messages.
    pub written: String,
    /// The value; NaN for `null` or `"<not supported>"`.
    pub value: f64,
    /// The key matched against inputs (`duration_time` for `duration_time_ns`), canonicalised
    /// once per file; a key of the `retire_latency` object names a retire latency.
    pub event: EventKey,
}

impl Entry {
    fn new(key: &str, written: String, value: f64, retire_latency: bool) -> Entry {
        Entry { event: key_of(key, retire_latency), written, value }
    }

    /// An entry matched as written.
    fn as_written(written: String, value: f64, retire_latency: bool) -> Entry {
        Entry { event: key_of(&written, retire_latency), written, value }
    }
}

/// A parsed counts file.
#[derive(Debug, Clone, Default)]
pub struct CountsFile {
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
pub fn read(path: &Path) -> anyhow::Result<CountsFile> {
    if path.as_os_str() == "-" {
        crate::out::stdin_hint(
            "a counts file (JSON, docs/counts-format.md)",
            "a file (`--counts counts.json`) or a pipe (`... | tmetric eval --model M --counts -`)",
        );
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
pub fn number(text: &str) -> Result<f64, String> {
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
pub fn parse(text: &str, name: &str) -> anyhow::Result<CountsFile> {
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
                    file.entries.extend(
                        counts
                            .0
                            .into_iter()
                            .map(|(key, value)| Entry::as_written(key, value, false)),
                    );
                }
                "retire_latency" => {
                    let latencies: NumberMap = map.next_value()?;
                    file.entries.extend(
                        latencies
                            .0
                            .into_iter()
                            .map(|(key, value)| Entry::as_written(key, value, true)),
                    );
                }
                "literals" => file.literals.extend(map.next_value::<LiteralMap>()?.0),
                "source_count" => file.source_counts.extend(map.next_value::<NumberMap>()?.0),
                "model" => file.model = Some(map.next_value::<String>()?),
                "duration_time_ns" => {
                    let ns = map.next_value::<Count>()?.0;
                    file.entries.push(Entry::new("duration_time", key, ns / 1e9, false));
                }
                _ => {
                    let value = map.next_value::<Count>()?.0;
                    file.entries.push(Entry::as_written(key, value, false));
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
pub fn literal_named(name: &str) -> Option<Literal> {
    let name = name.trim().trim_start_matches('#');
    Literal::ALL.into_iter().find(|lit| lit.name().eq_ignore_ascii_case(name))
}

/// Every literal name, for messages.
pub fn literal_names() -> String {
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
pub struct Assigned {
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
pub fn assign(model: &Model, file: &CountsFile) -> anyhow::Result<Assigned> {
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
