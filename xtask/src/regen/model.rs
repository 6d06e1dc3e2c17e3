//! One model's file: its event records, its compiled metrics renumbered and bound to the shared
//! descriptors, its groups and counters; and the literal helpers its tokens use.

use std::collections::HashMap;
use std::fmt::Write as _;

use proc_macro2::TokenStream;
use quote::quote;
use tmetric_pmu_events::resolve::{ResolvedTable, SlotKind};
use tmetric_pmu_events::{CounterField, Table};

use super::EVENT_RECORD;
use super::lower::{LoweredMetric, lower_metric, metric};
use super::shared::Shared;

/// An integer literal without a type suffix (the field types say it).
pub(super) fn int(v: impl Into<u64>) -> proc_macro2::Literal {
    proc_macro2::Literal::u64_unsuffixed(v.into())
}

/// A float literal that reads back bit for bit.
pub(super) fn float(v: f64) -> TokenStream {
    if v.is_nan() {
        quote!(f64::NAN)
    } else if v.is_infinite() {
        if v > 0.0 { quote!(f64::INFINITY) } else { quote!(f64::NEG_INFINITY) }
    } else if v < 0.0 || (v == 0.0 && v.is_sign_negative()) {
        let abs = float(-v);
        quote!((-#abs))
    } else {
        format!("{v:?}_f64").parse().expect("a finite float is a Rust literal")
    }
}

fn counters(c: &CounterField) -> (u32, u8) {
    match c {
        CounterField::Any => (u32::MAX, 0u8),
        CounterField::Generic(list) => {
            (list.iter().filter(|n| **n < 32).fold(0u32, |m, n| m | 1 << n), 0)
        }
        CounterField::Fixed(Some(n)) if *n < 8 => (0, 1u8 << n),
        CounterField::Fixed(_) => (0, u8::MAX),
    }
}

/// Adds one table's events to the shared record table; the index of its list of them.
fn add_events(table: &Table, shared: &mut Shared) -> usize {
    let mut records = Vec::with_capacity(table.events.len());
    for e in &table.events {
        let flags =
            u8::from(e.per_pkg) | u8::from(e.deprecated) << 1 | u8::from(e.experimental) << 2;
        let (scale, unit) = e.scale_unit.as_ref().map_or((1.0, ""), |s| (s.scale, s.unit.as_str()));
        let empty = String::new();
        let (brief, public) =
            (e.brief.as_ref().unwrap_or(&empty), e.public.as_ref().unwrap_or(&empty));
        let strings = [
            shared.blob.id(&e.name),
            shared.blob.id(&e.pmu),
            shared.blob.id(&e.topic),
            shared.blob.id(&e.encoding),
            shared.cold.id(brief),
            shared.cold.id(public),
            shared.blob.id(e.compat.as_ref().unwrap_or(&empty)),
            shared.blob.id(unit),
        ];
        let mut record = [0u8; EVENT_RECORD];
        for (field, id) in strings.iter().enumerate() {
            record[field * 4..field * 4 + 4].copy_from_slice(&id.to_le_bytes());
        }
        record[32..40].copy_from_slice(&scale.to_le_bytes());
        let (generic, fixed) = counters(&e.counters);
        record[40..44].copy_from_slice(&generic.to_le_bytes());
        record[44..48].copy_from_slice(&[fixed, e.pebs, flags, 0]);
        records.push(record);
    }
    shared.event_list(&records)
}

/// A model's metrics that compile, renumbered, each lowered to Rust text.
pub(super) struct LoweredModel {
    /// Old index and lowered form, in order.
    metrics: Vec<(usize, LoweredMetric)>,
    /// Old index to new.
    new_index: HashMap<usize, usize>,
}

pub(super) fn lower_model(r: &ResolvedTable<'_>) -> LoweredModel {
    let kept: Vec<usize> = (0..r.metrics.len()).filter(|&m| r.metrics[m].ok).collect();
    let new_index: HashMap<usize, usize> =
        kept.iter().enumerate().map(|(new, &old)| (old, new)).collect();
    let metrics = kept.iter().map(|&old| (old, lower_metric(r, old, &new_index))).collect();
    LoweredModel { metrics, new_index }
}

/// The Rust source of one model from its lowered metrics, adding its shared parts to `shared`.
pub(super) fn model_file(
    r: &ResolvedTable<'_>,
    lowered: LoweredModel,
    shared: &mut Shared,
) -> String {
    let table: &Table = r.table;
    let event_list = add_events(table, shared);
    let event_count = table.events.len();

    let mut calls = vec![0u8; r.ids.len()];
    // One line per metric in each table; a metric's locals are its slots, then its references.
    let (mut metrics, mut locals, mut at) = (String::new(), String::new(), 0);
    let LoweredModel { metrics: lowered, new_index } = lowered;
    for (old, lowered) in lowered {
        let binding = metric(r, old, lowered, shared);
        for &(slot, bits) in &binding.calls {
            calls[slot] |= bits;
        }
        let (slots, refs) = (binding.slots.len(), binding.refs.len());
        let _ = writeln!(
            metrics,
            "    MetricAt {{ desc: {}, at: {at}, slots: {slots}, refs: {refs} }},",
            binding.desc
        );
        if slots + refs > 0 {
            let all: Vec<String> =
                binding.slots.iter().chain(&binding.refs).map(usize::to_string).collect();
            let _ = writeln!(locals, "    {},", all.join(", "));
        }
        at += slots + refs;
    }

    // Input slots.
    let mut ids = String::new();
    for (id, calls) in r.ids.iter().zip(&calls) {
        let kind = match id.kind {
            SlotKind::Event(i) => format!("IdKind::Event({i})"),
            SlotKind::Kernel => "IdKind::Kernel".to_string(),
            SlotKind::Sysfs => "IdKind::Sysfs".to_string(),
            SlotKind::Tool(tool) => format!("IdKind::Tool(Tool::{tool:?})"),
            SlotKind::Probe => "IdKind::Probe".to_string(),
        };
        let _ = writeln!(
            ids,
            "    Id {{ text: {}, kind: {kind}, pmu: {}, event: {}, terms: {}, modifiers: {}, retire_latency: {}, calls: {calls} }},",
            shared.blob.add(&id.text),
            shared.blob.add(&id.pmu),
            shared.blob.add(&id.event),
            shared.blob.add(&id.terms),
            shared.blob.add(&id.modifiers),
            id.retire_latency,
        );
    }
    let order: Vec<usize> = r.eval_order().into_iter().map(|m| new_index[&m]).collect();
    let mut groups = String::new();
    for (name, desc) in &table.metric_groups {
        let (name, desc) = (shared.blob.add(name), shared.cold.add(desc));
        let _ = writeln!(groups, "    Group {{ name: {name}, description: {desc} }},");
    }
    let mut counter_info = String::new();
    for c in &table.counters {
        let _ = writeln!(
            counter_info,
            "    CounterInfo {{ pmu: {}, fixed: {}, generic: {} }},",
            shared.blob.add(&c.pmu),
            c.fixed.min(255),
            c.generic.min(255)
        );
    }
    // Tables are data: one record per line, written as text. prettyplease would spread each
    // record over a dozen lines and double the source for nothing.
    // Only what the file uses, so that no input makes an unused import.
    let mut out = String::from("#![allow(clippy::all)]\n");
    out.push_str(
        "use crate::generated::TABLES;\nuse crate::generated::metrics::CODE;\nuse tmetric_model::catalog::*;\n\n",
    );
    let _ = writeln!(
        out,
        "pub static MODEL: Model = Model {{\n    arch: {:?},\n    name: {:?},\n    is_sys: {},\n    tables: &TABLES,\n    \
         events: Events::new(&TABLES, {event_list}, {event_count}),\n    code: &CODE,\n    ids: IDS,\n    \
         metric_table: METRICS,\n    locals: LOCALS,\n    eval_order: &{order:?},\n    groups: GROUPS,\n    \
         counters: COUNTERS,\n}};\n",
        table.arch, table.name, table.is_sys
    );
    let _ = writeln!(out, "static IDS: &[Id] = &[\n{ids}];\n");
    let _ = writeln!(out, "static METRICS: &[MetricAt] = &[\n{metrics}];\n");
    let _ = writeln!(out, "static LOCALS: &[u16] = &[\n{locals}];\n");
    let _ = writeln!(out, "static GROUPS: &[Group] = &[\n{groups}];\n");
    let _ = write!(out, "static COUNTERS: &[CounterInfo] = &[\n{counter_info}];\n");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn floats_read_back_bit_for_bit() {
        for v in [0.0, 1.0, 0.1, 1e-300, 1e300, 123456789.125, -2.5, -0.0] {
            let text = float(v).to_string().replace(' ', "");
            let text = text.trim_start_matches('(').trim_end_matches(')');
            let (neg, digits) = match text.strip_prefix('-') {
                Some(rest) => (true, rest.trim_start_matches('(').trim_end_matches(')')),
                None => (false, text),
            };
            let parsed: f64 = digits.trim_end_matches("_f64").parse().unwrap();
            let parsed = if neg { -parsed } else { parsed };
            assert_eq!(parsed.to_bits(), v.to_bits(), "{v} as {text}");
        }
        assert_eq!(float(f64::NAN).to_string().replace(' ', ""), "f64::NAN");
    }
}
