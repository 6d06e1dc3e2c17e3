//! Events and metrics as plain data, and how one JSON object (plus its `ArchStdEvent` entry) becomes them.
//!
//! The rules are those of `JsonEvent.__init__` in perf's jevents.py (Linux 6.12): the event string,
//! which fields an `ArchStdEvent` entry fills in, and the description suffixes.

use std::fmt;

use crate::diag::Severity;
use crate::error::ObjectError;
use crate::raw::{Key, RawObject};
use crate::unit::{ScaleUnit, unit_to_pmu};

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
    /// PMU from `Unit` ([`unit_to_pmu`]); `default_core` when there is no Unit.
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
    /// PMU from `Unit` ([`unit_to_pmu`]): `default_core`, or `cpu_core`/`cpu_atom` on hybrid, ...
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
const EVENT_CRITICAL: [Key; 26] = [
    Key::EventName,
    Key::EventCode,
    Key::ExtSel,
    Key::ConfigCode,
    Key::EventidCode,
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

/// What the event and the metric of one object share.
struct Shared {
    pmu: String,
    arch_std: Option<String>,
    scale_unit: Option<ScaleUnit>,
    compat: Option<String>,
    brief: Option<String>,
    public: Option<String>,
}

type Failure = (Option<Key>, ObjectError);

fn shared_fields(own: Source<'_>, std: Option<Source<'_>>) -> Result<Shared, (Key, ObjectError)> {
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

fn build_event(
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

fn build_metric(
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
fn merged_value<'a>(
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
fn strip_period(text: &str) -> &str {
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

impl Event {
    /// perf's description (`perf list`): `brief` without a trailing period, plus [`Event::desc_note`].
    pub fn perf_desc(&self) -> Option<String> {
        let brief = strip_period(self.brief.as_deref()?);
        (!brief.is_empty()).then(|| format!("{brief}{}", self.desc_note))
    }

    /// perf's long description: `public` without a trailing period, plus [`Event::long_desc_note`].
    pub fn perf_long_desc(&self) -> Option<String> {
        let public = strip_period(self.public.as_deref()?);
        (!public.is_empty()).then(|| format!("{public}{}", self.long_desc_note))
    }
}

/// jevents.py `real_event`: names whose event string is fixed regardless of the JSON fields.
fn fixed_encoding(name: &str) -> Option<&'static str> {
    match name.to_lowercase().as_str() {
        "inst_retired.any" | "inst_retired.any_p" => Some("event=0xc0,period=2000003"),
        "cpu_clk_unhalted.ref" => Some("event=0x0,umask=0x03,period=2000003"),
        "cpu_clk_unhalted.thread" | "cpu_clk_unhalted.core" => Some("event=0x3c,period=2000003"),
        "cpu_clk_unhalted.thread_any" => Some("event=0x3c,any=1,period=2000003"),
        _ => None,
    }
}

/// The optional terms, in jevents.py's fixed order (not sorted by name).
const TERM_FIELDS: [(Key, &str); 14] = [
    (Key::AnyThread, "any"),
    (Key::PortMask, "ch_mask"),
    (Key::CounterMask, "cmask"),
    (Key::EdgeDetect, "edge"),
    (Key::FcMask, "fc_mask"),
    (Key::Invert, "inv"),
    (Key::SampleAfterValue, "period"),
    (Key::UMask, "umask"),
    (Key::NodeType, "type"),
    (Key::RdWrMask, "rdwrmask"),
    (Key::EnAllCores, "enallcores"),
    (Key::EnAllSlices, "enallslices"),
    (Key::SliceId, "sliceid"),
    (Key::ThreadMask, "threadmask"),
];

/// The event string of one object on its own (jevents.py before `ArchStdEvent` and `real_event`).
/// A bad `SampleAfterValue` only loses the sampling period, so it is dropped with a [`Problem`];
/// any other bad term fails the event, whose string would otherwise select something else.
fn encode(object: &RawObject, problems: &mut Vec<Problem>) -> Result<String, Failure> {
    let number = |key: Key, text: &str, base: u32| {
        py_int(text, base).ok_or_else(|| {
            (Some(key), ObjectError::BadNumber { key: key.json_name(), value: text.to_string() })
        })
    };
    let mut event_code = match object.get(Key::EventCode) {
        Some(code) => number(Key::EventCode, first_of_list(code), 0)?,
        None => 0,
    };
    if let Some(ext) = object.get(Key::ExtSel) {
        event_code |= number(Key::ExtSel, ext, 10)?.checked_shl(8).unwrap_or(0);
    }
    let mut encoding = if let Some(config) = object.get(Key::ConfigCode) {
        format!("config={}", llx(number(Key::ConfigCode, config, 0)?))
    } else if let Some(eventid) = object.get(Key::EventidCode) {
        format!("eventid={}", llx(number(Key::EventidCode, eventid, 0)?))
    } else {
        format!("event={}", llx(event_code))
    };
    for (key, term) in TERM_FIELDS {
        let Some(value) = object.get(key) else { continue };
        // "0x.." is read as hex and re-printed with llx; anything else is read as decimal.
        // Surrounding blanks and an upper-case "0X" are read as Python's int() reads them.
        let trimmed = value.trim();
        let parsed = if trimmed.starts_with("0x") || trimmed.starts_with("0X") {
            number(key, trimmed, 16).map(llx)
        } else {
            number(key, trimmed, 10).map(|n| n.to_string())
        };
        let parsed = match parsed {
            Ok(parsed) => parsed,
            Err((_, kind)) if key == Key::SampleAfterValue => {
                problems.push(Problem::ignored(Some(key), kind, "no sampling period"));
                continue;
            }
            Err(failure) => return Err(failure),
        };
        if parsed != "0" {
            encoding.push(',');
            encoding.push_str(term);
            encoding.push('=');
            encoding.push_str(&parsed);
        }
    }
    if let Some(filter) = object.get(Key::Filter).filter(|f| !f.is_empty()) {
        encoding.push(',');
        encoding.push_str(filter);
    }
    if let Some(index) = object.get(Key::MsrIndex).filter(|i| !i.is_empty()) {
        let msr = number(Key::MsrIndex, first_of_list(index), 0)?;
        let term = match msr {
            0x3F6 => "ldlat=",
            0x1A6 | 0x1A7 => "offcore_rsp=",
            0x3F7 => "frontend=",
            _ => {
                return Err((
                    Some(Key::MsrIndex),
                    ObjectError::UnknownMsrIndex { value: index.to_string() },
                ));
            }
        };
        encoding.push(',');
        encoding.push_str(term);
        // jevents.py formats a missing MSRValue as Python's "None" (5 westmere/nehalem events);
        // kept so the strings stay identical, and perf then rejects the event when opening it.
        encoding.push_str(object.get(Key::MsrValue).unwrap_or("None"));
    }
    Ok(encoding)
}

/// "0x1a6,0x1a7" -> "0x1a6": jevents.py uses the first value of a list.
fn first_of_list(text: &str) -> &str {
    text.split_once(',').map_or(text, |(first, _)| first)
}

/// `%#llx` as jevents.py emulates it: decimal below 10, else lower-case hex with 0x.
fn llx(value: u64) -> String {
    if value < 10 { value.to_string() } else { format!("{value:#x}") }
}

/// Python's `int(text, base)` for non-negative values that fit in u64. `base` 0 detects the
/// prefix (0x, 0o, 0b) and rejects decimal leading zeros; base 16 allows a 0x prefix.
pub(crate) fn py_int(text: &str, base: u32) -> Option<u64> {
    let text = text.trim();
    let text = text.strip_prefix('+').unwrap_or(text);
    let lower = text.to_ascii_lowercase();
    let (radix, digits, prefixed) = match base {
        0 => {
            if let Some(rest) = lower.strip_prefix("0x") {
                (16, rest, true)
            } else if let Some(rest) = lower.strip_prefix("0o") {
                (8, rest, true)
            } else if let Some(rest) = lower.strip_prefix("0b") {
                (2, rest, true)
            } else {
                (10, lower.as_str(), false)
            }
        }
        16 => match lower.strip_prefix("0x") {
            Some(rest) => (16, rest, true),
            None => (16, lower.as_str(), false),
        },
        _ => (base, lower.as_str(), false),
    };
    // Python allows single underscores between digits, and one right after a prefix.
    let digits = if prefixed { digits.strip_prefix('_').unwrap_or(digits) } else { digits };
    if digits.is_empty()
        || digits.starts_with('_')
        || digits.ends_with('_')
        || digits.contains("__")
    {
        return None;
    }
    let clean: String = digits.chars().filter(|&c| c != '_').collect();
    if base == 0
        && radix == 10
        && clean.len() > 1
        && clean.starts_with('0')
        && clean.chars().any(|c| c != '0')
    {
        return None;
    }
    u64::from_str_radix(&clean, radix).ok()
}

fn parse_counters(value: Option<&str>) -> Result<CounterField, ObjectError> {
    let Some(value) = value else { return Ok(CounterField::Any) };
    let bad = || ObjectError::BadCounter { value: value.to_string() };
    let lower = value.trim().to_ascii_lowercase();
    if lower == "fixed" {
        return Ok(CounterField::Fixed(None));
    }
    if let Some(index) = lower.strip_prefix("fixed counter") {
        return index.trim().parse().map(|i| CounterField::Fixed(Some(i))).map_err(|_| bad());
    }
    // "0," (perf 6.1's broadwell and haswell uncore files): empty pieces are dropped, as any
    // reader that splits at commas and skips blanks would; perf 6.12 does not read the key at all.
    let list: Result<Vec<u8>, _> =
        value.split(',').map(str::trim).filter(|n| !n.is_empty()).map(str::parse::<u8>).collect();
    match list {
        Ok(list) if !list.is_empty() => Ok(CounterField::Generic(list)),
        _ => Err(bad()),
    }
}

/// A "0"/"1" flag of the object itself (`max` 2 for PEBS).
fn parse_flag(object: &RawObject, key: Key, max: u8) -> Result<u8, ObjectError> {
    match object.get(key) {
        None => Ok(0),
        Some(value) => {
            value.trim().parse::<u8>().ok().filter(|&v| v <= max).ok_or_else(|| {
                ObjectError::BadFlag { key: key.json_name(), value: value.to_string() }
            })
        }
    }
}

fn parse_merged_flag(value: Option<(&str, Source<'_>)>, key: Key) -> Result<bool, ObjectError> {
    match value.map(|(v, _)| v.trim()) {
        None | Some("0") => Ok(false),
        Some("1") => Ok(true),
        Some(other) => Err(ObjectError::BadFlag { key: key.json_name(), value: other.to_string() }),
    }
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
    fn py_int_follows_python() {
        assert_eq!(py_int("0x2A", 0), Some(42));
        assert_eq!(py_int(" 0x1a7", 0), Some(0x1a7));
        assert_eq!(py_int("10", 0), Some(10));
        assert_eq!(py_int("0", 0), Some(0));
        assert_eq!(py_int("00", 0), Some(0));
        assert_eq!(py_int("010", 0), None);
        assert_eq!(py_int("010", 10), Some(10));
        assert_eq!(py_int("0x_1f", 0), Some(31));
        assert_eq!(py_int("1_000", 10), Some(1000));
        assert_eq!(py_int("1__0", 10), None);
        assert_eq!(py_int("0x", 16), None);
        assert_eq!(py_int("0X1F", 16), Some(31));
        assert_eq!(py_int("-1", 10), None);
        assert_eq!(py_int("zz", 10), None);
    }

    #[test]
    fn counters() {
        assert_eq!(parse_counters(None), Ok(CounterField::Any));
        assert_eq!(parse_counters(Some("0,1,2,3")), Ok(CounterField::Generic(vec![0, 1, 2, 3])));
        assert_eq!(parse_counters(Some("Fixed counter 2")), Ok(CounterField::Fixed(Some(2))));
        assert_eq!(parse_counters(Some("FIXED")), Ok(CounterField::Fixed(None)));
        assert!(parse_counters(Some("0,x")).is_err());
        assert_eq!(parse_counters(Some("0,")), Ok(CounterField::Generic(vec![0])));
        assert_eq!(parse_counters(Some(" 0, 1 ,")), Ok(CounterField::Generic(vec![0, 1])));
        assert!(parse_counters(Some(",")).is_err());
        assert!(parse_counters(Some("256")).is_err());
    }

    #[test]
    fn topics() {
        assert_eq!(topic_of("uncore-memory.json"), "uncore memory");
        assert_eq!(topic_of("spr-metrics.json"), "metrics");
        assert_eq!(topic_of("cache.json"), "cache");
    }
}
