//! Matching a log's rows to a model's inputs by what they count, not only by name: a Tiger Lake
//! log of 2023 counts `cpu/INT_MISC.RECOVERY_CYCLES,cmask=1,edge/`, which perf 6.12's formulas
//! call `INT_MISC.CLEARS_COUNT` (both event 0x0d, umask 0x01, cmask 1, edge).
//!
//! An event's encoding is perf's term list from the model's JSON (`event=0xd,umask=0x1,...`),
//! with the terms a row or identifier adds (`cmask=1,edge`) put over it; `period` (a sampling
//! setting) and terms that are 0 (the default) are left out. A row's encoding comes from the
//! model's event of its name, or from its own terms (`cpu/event=0xd,umask=0x1,cmask=1,edge/`).
//! Only core PMU events are matched: a row with no PMU or a core PMU, an input of the core PMU.

use std::collections::HashMap;
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

/// A model's encodings, worked out once per identifier and per row event.
#[derive(Debug, Clone)]
pub struct Encodings {
    model: &'static Model,
    /// Core PMU events by lower-case name.
    by_name: Option<HashMap<String, u32>>,
    /// Per input slot: its encoding, when it is a core event of the model.
    slots: HashMap<u16, Option<Encoding>>,
    /// Per row event: its encoding, when known.
    rows: HashMap<EventKey, Option<Encoding>>,
}

impl Encodings {
    /// Encodings of `model`'s events.
    pub fn new(model: &'static Model) -> Encodings {
        Encodings { model, by_name: None, slots: HashMap::new(), rows: HashMap::new() }
    }

    fn core_event(pmu: &str) -> bool {
        pmu.is_empty() || pmu == "default_core" || is_core_pmu(pmu)
    }

    /// The encoding of input `slot`.
    fn slot(&mut self, slot: u16) -> Option<&Encoding> {
        let model = self.model;
        self.slots
            .entry(slot)
            .or_insert_with(|| {
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
            })
            .as_ref()
    }

    /// The encoding of a row's event: its own terms, or the model's event of its name with
    /// the row's terms over it.
    fn row(&mut self, key: &EventKey) -> Option<&Encoding> {
        if !self.rows.contains_key(key) {
            let encoding = self.compute_row(key);
            self.rows.insert(key.clone(), encoding);
        }
        self.rows.get(key).and_then(Option::as_ref)
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
        let wanted = self.slot(slot)?.clone();
        for row in &block.rows {
            if row.key.name == want.name || row.key.retire_latency {
                continue;
            }
            if self.row(&row.key) == Some(&wanted) {
                let key = EventKey {
                    pmu: want.pmu.clone(),
                    name: row.key.name.clone(),
                    modifiers: want.modifiers.clone(),
                    retire_latency: false,
                };
                return Some((key, wanted));
            }
        }
        None
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
