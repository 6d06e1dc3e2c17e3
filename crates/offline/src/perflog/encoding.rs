//! Matching a log's rows to a model's inputs by what they count, not only by name: a Tiger Lake
//! log of 2023 counts `cpu/INT_MISC.RECOVERY_CYCLES,cmask=1,edge/`, which perf 6.12's formulas
//! call `INT_MISC.CLEARS_COUNT` (both event 0x0d, umask 0x01, cmask 1, edge).
//!
//! An event's encoding is perf's term list from the model's JSON (`event=0xd,umask=0x1,...`),
//! with the terms a row or identifier adds (`cmask=1,edge`) put over it; `period` (a sampling
//! setting) and terms that are 0 (the default) are left out. A row's encoding comes from the
//! model's event of its name, or from its own terms (`cpu/event=0xd,umask=0x1,cmask=1,edge/`).
//! Only core PMU events are matched: a row with no PMU or a core PMU, an input of the core PMU.

use foldhash::HashMap;
use std::fmt;

use tmetric_catalog::Model;
use tmetric_catalog::catalog::IdKind;
use tmetric_perfstat::{Block, EventKey, is_core_pmu};

/// Terms that say how to sample or name an event, not what it counts.
const IGNORED: [&str; 4] = ["period", "name", "metric-id", "sample_period"];

/// An event's encoding: its terms with values, sorted, without [`IGNORED`] terms and zeros.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Encoding(Vec<(String, String)>);

/// A term value: numbers in decimal (`0x0d` is `13`), other text lower-cased.
fn value(text: &str) -> String {
    let t = text.trim().to_ascii_lowercase();
    let parsed = match t.strip_prefix("0x") {
        Some(hex) => u64::from_str_radix(hex, 16).ok(),
        None => t.parse::<u64>().ok(),
    };
    parsed.map_or(t, |n| n.to_string())
}

impl Encoding {
    /// `event=0xd,umask=0x1,cmask=1,edge`: terms over `self` (a bare term is 1).
    fn with(mut self, terms: &str) -> Encoding {
        for term in terms.split(',').map(str::trim).filter(|t| !t.is_empty()) {
            let (k, v) =
                term.split_once('=').map_or((term, "1".to_string()), |(k, v)| (k, value(v)));
            let k = k.trim().to_ascii_lowercase();
            self.0.retain(|(key, _)| *key != k);
            if !IGNORED.contains(&k.as_str()) && v != "0" {
                self.0.push((k, v));
            }
        }
        self.0.sort();
        self
    }

    fn parse(terms: &str) -> Encoding {
        Encoding(Vec::new()).with(terms)
    }
}

impl fmt::Display for Encoding {
    /// perf's order (`event`, `umask`, the rest sorted), `event` and `umask` in hex.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let first = ["event", "umask"];
        let mut terms: Vec<String> = Vec::new();
        for name in first {
            if let Some((_, v)) = self.0.iter().find(|(k, _)| k == name) {
                let shown = v.parse::<u64>().map_or(v.clone(), |n| format!("{n:#04x}"));
                terms.push(format!("{name}={shown}"));
            }
        }
        for (k, v) in self.0.iter().filter(|(k, _)| !first.contains(&k.as_str())) {
            terms.push(format!("{k}={v}"));
        }
        f.write_str(&terms.join(","))
    }
}

/// A row read for an input because it counts the same thing.
#[derive(Debug, Clone, PartialEq)]
pub struct ByEncoding {
    /// The row's event, as perf printed it.
    pub row: String,
    /// The encoding both have.
    pub encoding: String,
}

/// `a == b` without a `memcmp` call per string (`same_name`): this runs for every row of
/// every block, and equal keys (the common case) make `memcmp` read them whole through a
/// library call.
fn same_key(a: &EventKey, b: &EventKey) -> bool {
    let same = tmetric_perfstat::same_name;
    a.retire_latency == b.retire_latency
        && same(&a.name, &b.name)
        && same(&a.modifiers, &b.modifiers)
        && match (&a.pmu, &b.pmu) {
            (None, None) => true,
            (Some(p), Some(q)) => same(p, q),
            _ => false,
        }
}

/// What is known of an input slot's encoding.
#[derive(Debug, Clone, Default)]
enum SlotState {
    /// Not worked out yet.
    #[default]
    Unknown,
    /// Not a core event of the model, or without an encoding.
    None,
    /// Its encoding, the row events seen with it, and the row event found for it among the
    /// rows of the blocks of one key generation.
    Known { encoding: Encoding, candidates: Vec<EventKey>, found: Option<(u64, Option<EventKey>)> },
}

/// A model's encodings, worked out once per identifier and per row event.
///
/// Every missing input of every metric in every block asks for a row: the rows of a block are
/// gone through once per block (their events, when new, get an encoding), and each input keeps
/// the events seen with its encoding, so that the question costs an index and a look at that
/// (usually empty) list.
#[derive(Debug, Clone)]
pub struct Encodings {
    model: &'static Model,
    /// Core PMU events by lower-case name.
    by_name: Option<HashMap<String, u32>>,
    /// Per input slot, indexed by slot.
    slots: Vec<SlotState>,
    /// Per row event seen: its encoding, when known.
    rows: HashMap<EventKey, Option<Encoding>>,
    /// The block whose rows were last gone through: (rows, first line, last line).
    block: Option<(usize, usize, usize)>,
    /// That block's row events: the next block's are most often the same (an `-I` log
    /// prints the same events every interval), and comparing them in order is cheaper than
    /// hashing them.
    last_keys: Vec<EventKey>,
    /// Counts the changes of `last_keys`: what was found for an input holds while it stays.
    generation: u64,
}

impl Encodings {
    /// Encodings of `model`'s events.
    pub fn new(model: &'static Model) -> Encodings {
        Encodings {
            model,
            by_name: None,
            slots: vec![SlotState::Unknown; model.ids.len()],
            rows: HashMap::default(),
            block: None,
            last_keys: Vec::new(),
            generation: 0,
        }
    }

    fn core_event(pmu: &str) -> bool {
        pmu.is_empty() || pmu == "default_core" || is_core_pmu(pmu)
    }

    /// The encoding of input `slot`, when it is a core event of the model.
    fn slot_encoding(&self, slot: u16) -> Option<Encoding> {
        let model = self.model;
        let id = model.ids.get(slot as usize)?;
        let IdKind::Event(index) = id.kind else { return None };
        if id.retire_latency {
            return None;
        }
        let event = model.events.get(index as usize)?;
        if !Self::core_event(model.str(event.pmu)) {
            return None;
        }
        let base = Encoding::parse(model.str(event.encoding));
        base.0.iter().any(|(k, _)| k == "event").then(|| base.with(model.str(id.terms)))
    }

    /// Goes through the rows of `block` once: each event not seen before gets its encoding,
    /// and joins the candidates of the inputs with that encoding.
    fn see(&mut self, block: &Block) {
        let id = (
            block.rows.len(),
            block.rows.first().map_or(0, |r| r.line),
            block.rows.last().map_or(0, |r| r.line),
        );
        if self.block == Some(id) {
            return;
        }
        self.block = Some(id);
        if block.rows.len() == self.last_keys.len()
            && block.rows.iter().zip(&self.last_keys).all(|(r, k)| same_key(&r.key, k))
        {
            return;
        }
        self.last_keys.clear();
        self.last_keys.extend(block.rows.iter().map(|r| r.key.clone()));
        self.generation += 1;

        for row in &block.rows {
            if self.rows.contains_key(&row.key) {
                continue;
            }
            let encoding = self.compute_row(&row.key);
            if let Some(encoding) = &encoding {
                for state in &mut self.slots {
                    if let SlotState::Known { encoding: e, candidates, .. } = state
                        && e == encoding
                    {
                        candidates.push(row.key.clone());
                    }
                }
            }
            self.rows.insert(row.key.clone(), encoding);
        }
    }

    fn compute_row(&mut self, key: &EventKey) -> Option<Encoding> {
        if key.retire_latency || key.pmu.as_deref().is_some_and(|p| !is_core_pmu(p)) {
            return None;
        }
        let (event, terms) = key.name.split_once(',').unwrap_or((&key.name, ""));
        if event.contains('=') {
            let encoding = Encoding::parse(&key.name);
            return encoding.0.iter().any(|(k, _)| k == "event").then_some(encoding);
        }
        let model = self.model;
        let by_name = self.by_name.get_or_insert_with(|| {
            model
                .events
                .iter()
                .enumerate()
                .filter(|(_, e)| Self::core_event(model.str(e.pmu)))
                .map(|(i, e)| (model.str(e.name).to_ascii_lowercase(), i as u32))
                .collect()
        });
        let index = *by_name.get(event)?;
        let base = Encoding::parse(model.str(model.events.at(index as usize).encoding));
        base.0.iter().any(|(k, _)| k == "event").then(|| base.with(terms))
    }

    /// A row of `block`, of another name, that counts what input `slot` (`want`) counts: the
    /// key to look it up with (the row's name, the input's PMU and modifiers) and the
    /// encoding.
    pub fn row_for(
        &mut self,
        block: &Block,
        slot: u16,
        want: &EventKey,
    ) -> Option<(EventKey, Encoding)> {
        let index = slot as usize;
        if matches!(self.slots.get(index)?, SlotState::Unknown) {
            self.slots[index] = match self.slot_encoding(slot) {
                Some(encoding) => {
                    let candidates = self
                        .rows
                        .iter()
                        .filter(|(_, e)| e.as_ref() == Some(&encoding))
                        .map(|(k, _)| k.clone())
                        .collect();
                    SlotState::Known { encoding, candidates, found: None }
                }
                None => SlotState::None,
            };
        }
        if matches!(self.slots[index], SlotState::None) {
            return None;
        }
        self.see(block);
        let generation = self.generation;
        let SlotState::Known { encoding, candidates, found } = &mut self.slots[index] else {
            return None;
        };
        let row = match found {
            Some((g, row)) if *g == generation => row.clone(),
            _ => {
                // A row of another name that the input's modifiers can read (as a lookup by
                // name would: the same modifiers, or `u` for none).
                let row = candidates
                    .iter()
                    .find(|k| {
                        k.name != want.name
                            && !k.retire_latency
                            && (k.modifiers == want.modifiers
                                || (want.modifiers.is_empty() && k.modifiers == "u"))
                            && block.rows.iter().any(|r| r.key == **k)
                    })
                    .cloned();
                *found = Some((generation, row.clone()));
                row
            }
        }?;
        let alias = EventKey {
            pmu: want.pmu.clone(),
            name: row.name,
            modifiers: want.modifiers.clone(),
            retire_latency: false,
        };
        Some((alias, encoding.clone()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encodings_compare_by_what_they_count() {
        let clears = Encoding::parse("event=0x0d,period=500009,umask=0x1,cmask=1,edge=1");
        let recovery = Encoding::parse("event=0xd,period=500009,umask=0x1").with("cmask=1,edge");
        assert_eq!(clears, recovery);
        assert_eq!(clears.to_string(), "event=0x0d,umask=0x01,cmask=1,edge=1");
        assert_ne!(clears, Encoding::parse("event=0xd,umask=0x1,cmask=1"));
        assert_eq!(Encoding::parse("event=0x3c,umask=0x0"), Encoding::parse("event=60"));
    }
}
