//! Events and metrics as plain data, and how one JSON object (plus its `ArchStdEvent` entry) becomes them.
//!
//! The rules are those of `JsonEvent.__init__` in perf's jevents.py (Linux 6.12): the event string,
//! which fields an `ArchStdEvent` entry fills in, and the description suffixes.

use std::fmt;

use crate::diag::Severity;
use crate::error::ObjectError;
use crate::raw::{Key, RawObject};
use crate::unit::ScaleUnit;

mod encode;
mod object;

use object::{build_event, build_metric, merged_value, shared_fields};

/// A place in a vendor file, relative to the tree root (`arch/`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Location {
    /// File relative to the tree root, e.g. `x86/sapphirerapids/spr-metrics.json`.
    pub file: String,
    /// 1-based line.
    pub line: usize,
}

impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.file, self.line)
    }
}

/// The vendor JSON's `Counter` field as written: the counters an event may be scheduled on
/// (perf 6.12 ignores it). The catalogue keeps it as masks, `tmetric_model::catalog::CounterMask`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CounterField {
    /// No `Counter` key: any counter of the PMU.
    Any,
    /// `"0,1,2,3"`: these general-purpose counters.
    Generic(Vec<u8>),
    /// `"Fixed counter 1"`: this fixed counter. `"FIXED"`/`"Fixed"` (uncore clockticks) name no index: `None`.
    Fixed(Option<u8>),
}

/// `MetricConstraint`: when perf must not put the metric's events in one group.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Constraint {
    /// `NO_GROUP_EVENTS`: never group.
    NoGroupEvents,
    /// `NO_GROUP_EVENTS_NMI` (alias `NO_NMI_WATCHDOG`): do not group while the NMI watchdog is on.
    NoGroupEventsNmi,
    /// `NO_GROUP_EVENTS_SMT`: do not group while SMT is on.
    NoGroupEventsSmt,
}

/// `AggregationMode` (powerpc hv_24x7): what the runtime parameter `?` iterates over.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AggrMode {
    /// `PerChip`: one instance per socket.
    PerChip,
    /// `PerCore`: one instance per core.
    PerCore,
}

/// One event of a table, after `ArchStdEvent` expansion.
#[derive(Debug, Clone, PartialEq)]
pub struct Event {
    /// `EventName` as written (perf lower-cases it; compare case-insensitively).
    pub name: String,
    /// PMU from `Unit` ([`unit_to_pmu`](crate::unit::unit_to_pmu)); `default_core` when there is no Unit.
    pub pmu: String,
    /// From the file name: `cache.json` gives "cache", `uncore-memory.json` "uncore memory".
    pub topic: String,
    /// perf's event string, exactly as jevents.py builds it, e.g. `event=0xa3,cmask=4,period=1000003,umask=4`.
    pub encoding: String,
    /// `encoding` split at `,` and then at the first `=` (a term without `=` has an empty value).
    pub terms: Vec<(String, String)>,
    /// Parsed `Counter`.
    pub counters: CounterField,
    /// `PEBS`: 0, 1 (precise event) or 2 (must be precise).
    pub pebs: u8,
    /// `PerPkg` is "1": counted once per package.
    pub per_pkg: bool,
    /// `Deprecated` is "1": hidden by `perf list`, still usable.
    pub deprecated: bool,
    /// `Experimental` is "1".
    pub experimental: bool,
    /// Parsed `ScaleUnit`: perf scales the displayed count, metrics see the raw count.
    pub scale_unit: Option<ScaleUnit>,
    /// `BriefDescription` as written.
    pub brief: Option<String>,
    /// `PublicDescription` as written.
    pub public: Option<String>,
    /// What perf appends to `brief` in its description (Data_LA, Errata and PEBS notes), usually
    /// empty; see [`Event::perf_desc`].
    pub desc_note: String,
    /// What perf appends to `public` in its long description.
    pub long_desc_note: String,
    /// `Compat`: for sys events, a regex that must match the sys PMU's whole `identifier`.
    pub compat: Option<String>,
    /// The `ArchStdEvent` this object expanded, if any.
    pub arch_std: Option<String>,
    /// File relative to the tree root.
    pub file: String,
    /// 1-based line of `EventName` (of the object's `{` when the name came from `ArchStdEvent`).
    pub line: usize,
    /// Index of the object in the file's array.
    pub index_in_file: usize,
}

/// One metric of a table, after `ArchStdEvent` expansion.
#[derive(Debug, Clone, PartialEq)]
pub struct Metric {
    /// `MetricName` as written.
    pub name: String,
    /// PMU from `Unit` ([`unit_to_pmu`](crate::unit::unit_to_pmu)): `default_core`, or `cpu_core`/`cpu_atom` on hybrid, ...
    pub pmu: String,
    /// `MetricExpr`, raw (perf stores a simplified form; the two differ only in NaN * 0 cases).
    pub expr: String,
    /// `MetricThreshold`, raw.
    pub threshold: Option<String>,
    /// `MetricGroup` split at `;` (empty pieces dropped, no trimming, as perf matches them).
    pub groups: Vec<String>,
    /// `BriefDescription` as written.
    pub brief: Option<String>,
    /// `PublicDescription` as written.
    pub public: Option<String>,
    /// Parsed `ScaleUnit`: the displayed value is `expr * scale`.
    pub scale_unit: Option<ScaleUnit>,
    /// `MetricConstraint`.
    pub constraint: Option<Constraint>,
    /// `MetricgroupNoGroup` split at `;`.
    pub no_group: Vec<String>,
    /// `DefaultMetricgroupName`.
    pub default_group: Option<String>,
    /// `Compat`.
    pub compat: Option<String>,
    /// `AggregationMode`.
    pub aggr_mode: Option<AggrMode>,
    /// The `ArchStdEvent` this object expanded, if any.
    pub arch_std: Option<String>,
    /// File relative to the tree root.
    pub file: String,
    /// 1-based line of `MetricName` (of the object's `{` when the name came from `ArchStdEvent`).
    pub line: usize,
    /// Index of the object in the file's array.
    pub index_in_file: usize,
    /// Where the `MetricExpr` text is: in this object, or in the `ArchStdEvent` entry.
    pub expr_at: Location,
    /// Where the `MetricThreshold` text is.
    pub threshold_at: Option<Location>,
}

/// An object and the file (relative to the tree root) it is in.
#[derive(Clone, Copy)]
pub(crate) struct Source<'a> {
    pub file: &'a str,
    pub object: &'a RawObject,
}

/// One finding while building an object: which key it is about (for its line), what is wrong,
/// and what the loader did about it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Problem {
    /// The key to point at; `None` points at the object's name.
    pub key: Option<Key>,
    /// What is wrong.
    pub kind: ObjectError,
    /// Error when the event or metric was dropped.
    pub severity: Severity,
    /// What the loader did, e.g. "event dropped".
    pub outcome: &'static str,
}

impl Problem {
    fn dropped(key: Option<Key>, kind: ObjectError, what: &'static str) -> Problem {
        Problem { key, kind, severity: Severity::Error, outcome: what }
    }

    fn ignored(key: Option<Key>, kind: ObjectError, outcome: &'static str) -> Problem {
        Problem { key, kind, severity: Severity::Warning, outcome }
    }
}

/// What one object gave: an event, a metric, both or neither, and the findings on the way.
#[derive(Debug, Default)]
pub(crate) struct Built {
    pub event: Option<Event>,
    pub metric: Option<Metric>,
    pub problems: Vec<Problem>,
}

/// Keys without which an event cannot be built as the vendor meant it (its event string, PMU,
/// scaling or counting mode). A bad value drops the event rather than count something else.
const EVENT_CRITICAL: [Key; 28] = [
    Key::EventName,
    Key::EventCode,
    Key::ExtSel,
    Key::ConfigCode,
    Key::EventidCode,
    Key::LegacyConfigCode,
    Key::LegacyCacheCode,
    Key::UMask,
    Key::CounterMask,
    Key::EdgeDetect,
    Key::Invert,
    Key::AnyThread,
    Key::PortMask,
    Key::FcMask,
    Key::NodeType,
    Key::RdWrMask,
    Key::EnAllCores,
    Key::EnAllSlices,
    Key::SliceId,
    Key::ThreadMask,
    Key::Filter,
    Key::MsrIndex,
    Key::MsrValue,
    Key::Unit,
    Key::PerPkg,
    Key::ScaleUnit,
    Key::Compat,
    Key::ArchStdEvent,
];

/// Keys without which a metric would give other numbers than the vendor's.
const METRIC_CRITICAL: [Key; 7] = [
    Key::MetricName,
    Key::MetricExpr,
    Key::Unit,
    Key::ScaleUnit,
    Key::Compat,
    Key::AggregationMode,
    Key::ArchStdEvent,
];

/// Builds the event and/or metric of `own`, copying unset fields from `std` (its `ArchStdEvent`
/// entry, already looked up) as jevents.py does. Never fails: a bad value drops only the event or
/// metric it makes meaningless, and is otherwise ignored, each with a [`Problem`].
pub(crate) fn build<'a>(own: Source<'a>, std: Option<Source<'a>>, topic: &str) -> Built {
    let object = own.object;
    let mut built = Built::default();
    for key in &object.duplicates {
        built.problems.push(Problem::ignored(
            Some(*key),
            ObjectError::DuplicateKey { key: key.json_name() },
            "last value used",
        ));
    }
    let merged = |key: Key| merged_value(own, std, key);
    let wants_event = merged(Key::EventName).is_some()
        || object.bad_types.iter().any(|(k, _)| *k == Key::EventName);
    let wants_metric = merged(Key::MetricName).is_some()
        || object.bad_types.iter().any(|(k, _)| *k == Key::MetricName);
    // Values that are not strings: fatal for what they define, ignored elsewhere.
    let mut event_blocker = None;
    let mut metric_blocker = None;
    for &(key, found) in &object.bad_types {
        let kind = || ObjectError::NotString { key: key.json_name(), found };
        let hits_event = wants_event && EVENT_CRITICAL.contains(&key);
        let hits_metric = wants_metric && METRIC_CRITICAL.contains(&key);
        if hits_event && event_blocker.is_none() {
            event_blocker = Some(Problem::dropped(Some(key), kind(), "event dropped"));
        }
        if hits_metric && metric_blocker.is_none() {
            metric_blocker = Some(Problem::dropped(Some(key), kind(), "metric dropped"));
        }
        if !hits_event && !hits_metric {
            built.problems.push(Problem::ignored(Some(key), kind(), "value ignored"));
        }
    }
    if !wants_event && !wants_metric {
        if object.get(Key::MetricExpr).is_some() {
            built.problems.push(Problem::ignored(
                Some(Key::MetricExpr),
                ObjectError::ExprWithoutName,
                "`MetricExpr` ignored",
            ));
        } else if object.bad_types.is_empty() {
            built.problems.push(Problem::ignored(None, ObjectError::Nameless, "object ignored"));
        }
        return built;
    }
    // Fields shared by the event and the metric.
    let shared = match shared_fields(own, std) {
        Ok(shared) => shared,
        Err((key, kind)) => {
            if wants_event {
                built.problems.push(Problem::dropped(Some(key), kind.clone(), "event dropped"));
            }
            if wants_metric {
                built.problems.push(Problem::dropped(Some(key), kind, "metric dropped"));
            }
            return built;
        }
    };
    if let Some(blocker) = event_blocker {
        built.problems.push(blocker);
    } else if wants_event {
        match build_event(own, std, topic, &shared, &mut built.problems) {
            Ok(event) => built.event = Some(event),
            Err((key, kind)) => {
                built.problems.push(Problem::dropped(key, kind, "event dropped"));
            }
        }
    }
    if let Some(blocker) = metric_blocker {
        built.problems.push(blocker);
    } else if wants_metric {
        match build_metric(own, std, &shared, &mut built.problems) {
            Ok(metric) => built.metric = Some(metric),
            Err((key, kind)) => {
                built.problems.push(Problem::dropped(key, kind, "metric dropped"));
            }
        }
    } else if object.get(Key::MetricExpr).is_some() {
        built.problems.push(Problem::ignored(
            Some(Key::MetricExpr),
            ObjectError::ExprWithoutName,
            "`MetricExpr` ignored",
        ));
    }
    built
}

/// jevents.py `get_topic`: the topic of the events in a file, from its name.
pub(crate) fn topic_of(file_name: &str) -> String {
    if file_name.ends_with("metrics.json") {
        return "metrics".to_string();
    }
    file_name.strip_suffix(".json").unwrap_or(file_name).replace('-', " ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn topics() {
        assert_eq!(topic_of("uncore-memory.json"), "uncore memory");
        assert_eq!(topic_of("spr-metrics.json"), "metrics");
        assert_eq!(topic_of("cache.json"), "cache");
    }
}
