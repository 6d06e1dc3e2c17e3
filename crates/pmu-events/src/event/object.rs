//! One vendor JSON object (and its `ArchStdEvent` entry) made an [`Event`] or a [`Metric`]: the
//! fields both share, the merging of the entry's fields, and jevents.py's description suffixes.

use super::encode::{encode, fixed_encoding, parse_counters, parse_flag, parse_merged_flag};
use super::{AggrMode, Constraint, CounterField, Event, Location, Metric, Problem, Source};
use crate::error::ObjectError;
use crate::raw::{Key, RawObject};
use crate::unit::{ScaleUnit, unit_to_pmu};

/// What the event and the metric of one object share.
pub(super) struct Shared {
    pmu: String,
    arch_std: Option<String>,
    scale_unit: Option<ScaleUnit>,
    compat: Option<String>,
    brief: Option<String>,
    public: Option<String>,
}

pub(super) type Failure = (Option<Key>, ObjectError);

pub(super) fn shared_fields(
    own: Source<'_>,
    std: Option<Source<'_>>,
) -> Result<Shared, (Key, ObjectError)> {
    let object = own.object;
    let text = |key: Key| merged_value(own, std, key).map(|(v, _)| v.to_string());
    let scale_unit = match merged_value(own, std, Key::ScaleUnit) {
        Some((value, _)) => Some(ScaleUnit::parse(value).ok_or_else(|| {
            (Key::ScaleUnit, ObjectError::BadScaleUnit { value: value.to_string() })
        })?),
        None => None,
    };
    let compat = text(Key::Compat);
    if let Some(compat) = &compat
        // Validated with the engine the catalogue matches with (`tmetric_model::cpuid`).
        && let Err(err) = regex_lite::Regex::new(&format!("^(?:{compat})$"))
    {
        return Err((
            Key::Compat,
            ObjectError::BadCompat { value: compat.clone(), message: err.to_string() },
        ));
    }
    Ok(Shared {
        pmu: unit_to_pmu(object.get(Key::Unit)),
        arch_std: object.get(Key::ArchStdEvent).map(str::to_string),
        scale_unit,
        compat,
        brief: text(Key::BriefDescription),
        public: text(Key::PublicDescription),
    })
}

pub(super) fn build_event(
    own: Source<'_>,
    std: Option<Source<'_>>,
    topic: &str,
    shared: &Shared,
    problems: &mut Vec<Problem>,
) -> Result<Event, Failure> {
    let object = own.object;
    let merged = |key: Key| merged_value(own, std, key);
    let Some((name, _)) = merged(Key::EventName) else {
        return Err((Some(Key::EventName), ObjectError::Nameless));
    };
    let encoding = match std {
        Some(std_source) => {
            let std_object = std_source.object;
            let Some(std_name) = std_object.get(Key::EventName) else {
                let name = shared.arch_std.clone().unwrap_or_default();
                return Err((Some(Key::ArchStdEvent), ObjectError::ArchStdNotEvent { name }));
            };
            match fixed_encoding(std_name) {
                Some(fixed) => fixed.to_string(),
                // The standard entry's own findings are reported at the entry itself.
                None => encode(std_object, &mut Vec::new())?,
            }
        }
        None => encode(object, problems)?,
    };
    let encoding = fixed_encoding(name).map_or(encoding, str::to_string);
    let terms = encoding
        .split(',')
        .map(|term| match term.split_once('=') {
            Some((key, value)) => (key.to_string(), value.to_string()),
            None => (term.to_string(), String::new()),
        })
        .collect();
    // Each description comes with the notes of the object it was taken from.
    let desc_note = match std {
        Some(std_source) if !own_desc_set(object) => description_note(std_source.object),
        _ => description_note(object),
    };
    let long_desc_note = match std {
        Some(std_source) if !own_long_desc_set(object) => description_note(std_source.object),
        _ => description_note(object),
    };
    // perf 6.12 does not read `Counter`; a value it cannot parse only loses scheduling hints.
    let counters = parse_counters(object.get(Key::Counter)).unwrap_or_else(|kind| {
        problems.push(Problem::ignored(Some(Key::Counter), kind, "any counter assumed"));
        CounterField::Any
    });
    // PEBS, Deprecated and Experimental change listings and descriptions, never counts.
    let mut soft_flag = |key: Key, result: Result<u8, ObjectError>| {
        result.unwrap_or_else(|kind| {
            problems.push(Problem::ignored(Some(key), kind, "read as 0"));
            0
        })
    };
    let pebs = soft_flag(Key::Pebs, parse_flag(object, Key::Pebs, 2));
    let deprecated = soft_flag(
        Key::Deprecated,
        parse_merged_flag(merged(Key::Deprecated), Key::Deprecated).map(u8::from),
    ) != 0;
    let experimental = soft_flag(Key::Experimental, parse_flag(object, Key::Experimental, 1)) != 0;
    let per_pkg = parse_merged_flag(merged(Key::PerPkg), Key::PerPkg)
        .map_err(|kind| (Some(Key::PerPkg), kind))?;
    Ok(Event {
        name: name.to_string(),
        pmu: shared.pmu.clone(),
        topic: topic.to_string(),
        encoding,
        terms,
        counters,
        pebs,
        per_pkg,
        deprecated,
        experimental,
        scale_unit: shared.scale_unit.clone(),
        brief: shared.brief.clone(),
        public: shared.public.clone(),
        desc_note,
        long_desc_note,
        compat: shared.compat.clone(),
        arch_std: shared.arch_std.clone(),
        file: own.file.to_string(),
        line: nonzero_or(object.key_lines[0], object.line),
        index_in_file: object.index,
    })
}

pub(super) fn build_metric(
    own: Source<'_>,
    std: Option<Source<'_>>,
    shared: &Shared,
    problems: &mut Vec<Problem>,
) -> Result<Metric, Failure> {
    let object = own.object;
    let merged = |key: Key| merged_value(own, std, key);
    let Some((name, _)) = merged(Key::MetricName) else {
        return Err((Some(Key::MetricName), ObjectError::Nameless));
    };
    let Some((expr, expr_source)) = merged(Key::MetricExpr) else {
        return Err((Some(Key::MetricName), ObjectError::MetricWithoutExpr));
    };
    let location = |source: Source<'_>, slot: usize| Location {
        file: source.file.to_string(),
        line: nonzero_or(source.object.key_lines[slot], source.object.line),
    };
    let threshold = merged(Key::MetricThreshold);
    let split = |key: Key| {
        merged(key)
            .map(|(v, _)| v.split(';').filter(|g| !g.is_empty()).map(str::to_string).collect())
            .unwrap_or_default()
    };
    // The constraint only decides grouping (how precise multiplexed counts are), not the formula.
    let constraint = match merged(Key::MetricConstraint).map(|(v, _)| v) {
        None => None,
        Some("NO_GROUP_EVENTS") => Some(Constraint::NoGroupEvents),
        Some("NO_GROUP_EVENTS_NMI" | "NO_NMI_WATCHDOG") => Some(Constraint::NoGroupEventsNmi),
        Some("NO_GROUP_EVENTS_SMT") => Some(Constraint::NoGroupEventsSmt),
        Some(other) => {
            problems.push(Problem::ignored(
                Some(Key::MetricConstraint),
                ObjectError::BadConstraint { value: other.to_string() },
                "events grouped as without a constraint",
            ));
            None
        }
    };
    // The aggregation mode decides what `?` iterates over, so a wrong one gives wrong numbers.
    let aggr_mode = match merged(Key::AggregationMode).map(|(v, _)| v) {
        None => None,
        Some("PerChip") => Some(AggrMode::PerChip),
        Some("PerCore") => Some(AggrMode::PerCore),
        Some(other) => {
            return Err((
                Some(Key::AggregationMode),
                ObjectError::BadAggregationMode { value: other.to_string() },
            ));
        }
    };
    Ok(Metric {
        name: name.to_string(),
        pmu: shared.pmu.clone(),
        expr: expr.to_string(),
        threshold: threshold.map(|(v, _)| v.to_string()),
        groups: split(Key::MetricGroup),
        brief: shared.brief.clone(),
        public: shared.public.clone(),
        scale_unit: shared.scale_unit.clone(),
        constraint,
        no_group: split(Key::MetricgroupNoGroup),
        default_group: merged(Key::DefaultMetricgroupName).map(|(v, _)| v.to_string()),
        compat: shared.compat.clone(),
        aggr_mode,
        arch_std: shared.arch_std.clone(),
        file: own.file.to_string(),
        line: nonzero_or(object.key_lines[1], object.line),
        index_in_file: object.index,
        expr_at: location(expr_source, 2),
        threshold_at: threshold.map(|(_, source)| location(source, 3)),
    })
}

/// The value jevents.py ends up with for `key`: the object's own one when it is truthy (present
/// and non-empty; descriptions judged after the trailing-period strip), else the standard entry's.
pub(super) fn merged_value<'a>(
    own: Source<'a>,
    std: Option<Source<'a>>,
    key: Key,
) -> Option<(&'a str, Source<'a>)> {
    let value_of = |source: Source<'a>| -> Option<&'a str> {
        source.object.get(key).filter(|v| match key {
            Key::BriefDescription | Key::PublicDescription => !strip_period(v).is_empty(),
            _ => !v.is_empty(),
        })
    };
    match value_of(own) {
        Some(v) => Some((v, own)),
        None => std.and_then(|s| value_of(s).map(|v| (v, s))),
    }
}

fn nonzero_or(line: usize, fallback: usize) -> usize {
    if line != 0 { line } else { fallback }
}

fn own_desc_set(object: &RawObject) -> bool {
    object.get(Key::BriefDescription).is_some_and(|d| !strip_period(d).is_empty())
}

fn own_long_desc_set(object: &RawObject) -> bool {
    object.get(Key::PublicDescription).is_some_and(|d| !strip_period(d).is_empty())
}

/// jevents.py `fixdesc` without the C escaping: drop a trailing ".  ", then ". ", then ".".
pub(super) fn strip_period(text: &str) -> &str {
    let text = text.strip_suffix(".  ").unwrap_or(text);
    let text = text.strip_suffix(". ").unwrap_or(text);
    text.strip_suffix('.').unwrap_or(text)
}

/// The notes jevents.py appends to an object's own descriptions (none when it has no description).
fn description_note(object: &RawObject) -> String {
    let Some(desc) = object.get(Key::BriefDescription).map(strip_period).filter(|d| !d.is_empty())
    else {
        // The notes are only appended to descriptions that exist; the PEBS one needs a short one.
        return description_note_without_pebs(object);
    };
    let mut note = description_note_without_pebs(object);
    // Any non-empty PEBS value counts here, even "0", as in jevents.py.
    if let Some(pebs) = object.get(Key::Pebs).filter(|p| !p.is_empty())
        && !desc.contains("(Precise Event)")
    {
        note.push_str(if pebs == "2" { " (Must be precise)" } else { " (Precise event)" });
    }
    note
}

fn description_note_without_pebs(object: &RawObject) -> String {
    let mut note = String::new();
    if object.get(Key::DataLa).is_some() {
        note.push_str("  Supports address when precise");
        if object.get(Key::Errata).is_some() {
            note.push('.');
        }
    }
    if let Some(errata) = object.get(Key::Errata) {
        note.push_str("  Spec update: ");
        note.push_str(errata);
    }
    note
}
