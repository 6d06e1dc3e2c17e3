//! Short constructors the generated tables are written with, to keep them small.

use tmetric_model::Needed;
use tmetric_model::catalog::{Counters, Event, Id, IdKind, Ref, Str};

/// Needed-events node over model references.
pub(crate) type N = Needed<Ref>;

/// A string of the model's blob.
#[allow(non_snake_case)]
pub(crate) const fn S(offset: u32, len: u32) -> Str {
    Str(offset, len)
}

/// Counter restrictions: general counter mask, fixed counter mask.
#[allow(non_snake_case)]
pub(crate) const fn C(generic: u32, fixed: u8) -> Counters {
    Counters { generic, fixed }
}

/// One event row.
#[allow(clippy::too_many_arguments)]
pub(crate) const fn ev(
    name: Str,
    pmu: Str,
    topic: Str,
    encoding: Str,
    brief: Str,
    public: Str,
    compat: Str,
    unit: Str,
    scale: f64,
    counters: Counters,
    pebs: u8,
    flags: u8,
) -> Event {
    Event { name, pmu, topic, encoding, brief, public, compat, unit, scale, counters, pebs, flags }
}

/// One input slot row.
pub(crate) const fn id(
    text: Str,
    kind: IdKind,
    pmu: Str,
    event: Str,
    terms: Str,
    modifiers: Str,
    retire_latency: bool,
) -> Id {
    Id { text, kind, pmu, event, terms, modifiers, retire_latency }
}
