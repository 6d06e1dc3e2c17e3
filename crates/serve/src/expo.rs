//! The exposition: the collector's last interval as Prometheus text (0.0.4) or OpenMetrics
//! 1.0 (content negotiated), every family with `# HELP` and `# TYPE`, and as JSON.
//!
//! Families, besides one gauge per compiled metric (base units; labels `model`, `pmu` for
//! hybrid metrics, the cgroup's and the aggregation unit's):
//! * `tmetric_event_total`, `tmetric_event_enabled_seconds_total`,
//!   `tmetric_event_running_seconds_total`: raw counts (not scaled) and their times, per
//!   counter (`event`, `group`), cumulative since the target was opened;
//! * `tmetric_metric_running_ratio`, `tmetric_metric_inputs_together`,
//!   `tmetric_metric_error_bar`, `tmetric_metric_threshold_crossed`, `tmetric_metric_missing`
//!   (info, with the reason): per metric, by `metric` label;
//! * the exporter's own: intervals, CPU time, descriptors and budget, cgroups counted, added,
//!   removed and left out (with the reason), notes.

use std::fmt::Write;
use std::time::UNIX_EPOCH;

use serde_json::{Value, json};
use tmetric_engine::{Bar, Source};
use tmetric_runtime::{Syscalls, ToolEvent};

use crate::collector::{Collector, Counted, Detail, UnitValues};
use crate::names::{number, push_help};

/// The exposition format.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// `text/plain; version=0.0.4`.
    Prometheus,
    /// `application/openmetrics-text; version=1.0.0`.
    OpenMetrics,
}

impl Format {
    /// The format an `Accept` header asks for (OpenMetrics when it is named).
    pub fn from_accept(accept: Option<&str>) -> Format {
        match accept {
            Some(a) if a.contains("application/openmetrics-text") => Format::OpenMetrics,
            _ => Format::Prometheus,
        }
    }

    /// The `Content-Type`.
    pub fn content_type(self) -> &'static str {
        match self {
            Format::Prometheus => "text/plain; version=0.0.4; charset=utf-8",
            Format::OpenMetrics => "application/openmetrics-text; version=1.0.0; charset=utf-8",
        }
    }
}

/// A family's type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A gauge.
    Gauge,
    /// A counter: samples are `NAME_total`.
    Counter,
    /// An info: samples are `NAME_info` with value 1.
    Info,
}

/// One family with its samples, in order.
#[derive(Debug, Clone)]
pub struct Family {
    /// The name without `_total`/`_info`.
    pub name: String,
    /// The type.
    pub kind: Kind,
    /// The help text.
    pub help: String,
    /// Its sample lines (`NAME_total{a="1",b="2"} value`): both formats write samples alike,
    /// so they are written once, straight into one buffer, without a string per sample.
    lines: String,
}

/// Families in first-seen order.
#[derive(Debug, Default)]
pub struct Families {
    list: Vec<Family>,
    // Looked up once per sample; the names are the exporter's own (the catalogue's metrics and
    // fixed families), never a client's or a cgroup's, so a fast unkeyed hash is safe.
    index: rustc_hash::FxHashMap<String, usize>,
}

/// A label written after a sample's shared labels: its name and value (left out when empty).
pub type Extra<'a> = (&'a str, &'a str);

impl Families {
    /// The family `name`, made with `kind` and `help` the first time.
    pub fn family(&mut self, name: &str, kind: Kind, help: &str) -> &mut Family {
        let i = match self.index.get(name) {
            Some(&i) => i,
            None => {
                self.list.push(Family {
                    name: name.to_string(),
                    kind,
                    help: help.to_string(),
                    lines: String::new(),
                });
                self.index.insert(name.to_string(), self.list.len() - 1);
                self.list.len() - 1
            }
        };
        &mut self.list[i]
    }

    /// Adds a sample.
    pub fn add(&mut self, name: &str, kind: Kind, help: &str, labels: &Labels, value: String) {
        self.sample(name, kind, help, labels, &[], &value);
    }

    /// Adds a sample labelled `labels` and then `extra`, of value `value` (written as is).
    pub fn sample(
        &mut self,
        name: &str,
        kind: Kind,
        help: &str,
        labels: &Labels,
        extra: &[Extra<'_>],
        value: &str,
    ) {
        self.sample_with(name, kind, help, labels, extra, |out| out.push_str(value));
    }

    fn sample_with(
        &mut self,
        name: &str,
        kind: Kind,
        help: &str,
        labels: &Labels,
        extra: &[Extra<'_>],
        value: impl FnOnce(&mut String),
    ) {
        let f = self.family(name, kind, help);
        let suffix = match f.kind {
            Kind::Gauge => "",
            Kind::Counter => "_total",
            Kind::Info => "_info",
        };
        let out = &mut f.lines;
        out.push_str(&f.name);
        out.push_str(suffix);
        let mut first = labels.0.is_empty();
        if !first {
            out.push('{');
            out.push_str(&labels.0);
        }
        for (k, v) in extra.iter().filter(|(_, v)| !v.is_empty()) {
            out.push(if first { '{' } else { ',' });
            first = false;
            push_label(out, k, v);
        }
        if !first {
            out.push('}');
        }
        out.push(' ');
        value(out);
        out.push('\n');
    }

    /// Adds a sample of a number (Prometheus' spelling: `NaN`, `+Inf`, integers plainly).
    pub fn sample_number(
        &mut self,
        name: &str,
        kind: Kind,
        help: &str,
        labels: &Labels,
        extra: &[Extra<'_>],
        value: f64,
    ) {
        self.sample_with(name, kind, help, labels, extra, |out| write_number(out, value));
    }

    /// The families.
    pub fn list(&self) -> &[Family] {
        &self.list
    }

    /// Writes them in `format` (with OpenMetrics' `# EOF`).
    pub fn render(&self, format: Format) -> String {
        let mut out = String::with_capacity(64 * 1024);
        self.render_into(&mut out, format, true);
        out
    }

    /// Appends them to `out` in `format`; `eof`: close an OpenMetrics exposition.
    pub fn render_into(&self, out: &mut String, format: Format, eof: bool) {
        let size: usize = self.list.iter().map(|f| f.lines.len() + f.help.len() + 64).sum();
        out.reserve(size);
        for f in &self.list {
            let (type_word, suffix) = match (f.kind, format) {
                (Kind::Gauge, _) => ("gauge", ""),
                (Kind::Counter, Format::Prometheus) => ("counter", "_total"),
                (Kind::Counter, Format::OpenMetrics) => ("counter", ""),
                (Kind::Info, Format::Prometheus) => ("gauge", "_info"),
                (Kind::Info, Format::OpenMetrics) => ("info", ""),
            };
            out.push_str("# HELP ");
            out.push_str(&f.name);
            out.push_str(suffix);
            out.push(' ');
            push_help(out, &f.help, format == Format::OpenMetrics);
            out.push_str("\n# TYPE ");
            out.push_str(&f.name);
            out.push_str(suffix);
            out.push(' ');
            out.push_str(type_word);
            out.push('\n');
            out.push_str(&f.lines);
        }
        if format == Format::OpenMetrics && eof {
            out.push_str("# EOF\n");
        }
    }
}

/// Writes `value` as [`number`] spells it, without a string of its own.
fn write_number(out: &mut String, value: f64) {
    if value.is_finite() && value == value.trunc() && value.abs() < 1e15 {
        let _ = write!(out, "{}", value as i64);
    } else if value.is_finite() {
        let _ = write!(out, "{value:?}");
    } else {
        out.push_str(&number(value));
    }
}

/// `value` in decimal, written into `buf` (no allocation).
fn itoa(buf: &mut [u8; 20], mut value: u64) -> &str {
    let mut i = buf.len();
    loop {
        i -= 1;
        buf[i] = b'0' + (value % 10) as u8;
        value /= 10;
        if value == 0 {
            break;
        }
    }
    std::str::from_utf8(&buf[i..]).unwrap_or("0")
}

/// Writes `key="value"`, the value escaped as the text formats want.
fn push_label(out: &mut String, key: &str, value: &str) {
    out.push_str(key);
    out.push_str("=\"");
    // Copied in runs between the characters to escape, found with memchr: every sample of
    // every scrape writes its labels, nearly always with nothing to escape, and notes and
    // reasons are sentences. Each is ASCII, so a byte position is a character boundary.
    let mut rest = value;
    while let Some(i) = memchr::memchr3(b'\\', b'"', b'\n', rest.as_bytes()) {
        out.push_str(&rest[..i]);
        out.push_str(match rest.as_bytes()[i] {
            b'\\' => "\\\\",
            b'"' => "\\\"",
            _ => "\\n",
        });
        rest = &rest[i + 1..];
    }
    out.push_str(rest);
    out.push('"');
}

/// A label set being built, kept as it is written in a sample (`a="1",b="2"`).
#[derive(Debug, Clone, Default)]
pub struct Labels(String);

impl Labels {
    /// With `key="value"` added (empty values are left out, as Prometheus reads them).
    pub fn with(&self, key: &str, value: &str) -> Labels {
        let mut l = self.clone();
        l.push(key, value);
        l
    }

    /// Adds `key="value"` (an empty value is left out).
    pub fn push(&mut self, key: &str, value: &str) {
        if value.is_empty() {
            return;
        }
        if !self.0.is_empty() {
            self.0.push(',');
        }
        push_label(&mut self.0, key, value);
    }

    /// As quoted in a sample.
    pub fn text(&self) -> &str {
        &self.0
    }
}

const EVENT_HELP: &str = "Raw count of a perf event counter (not scaled for multiplexing: scale with its group's enabled over running time), cumulative since this host or cgroup was first counted, read at the scrape";
const ENABLED_HELP: &str = "Time the counter group was enabled (perf's time_enabled), summed over the CPUs of the unit, in seconds";
const RUNNING_HELP: &str = "Time the counter group was on the hardware counters (perf's time_running), summed over the CPUs of the unit, in seconds";
const DURATION_HELP: &str = "Wall-clock seconds counted (-e duration_time), cumulative since this host or cgroup was first counted, read at the scrape";
const DURATION_ONCE_HELP: &str = "Wall-clock seconds of this run's one interval (-e duration_time)";
const TOOL_VALUE_HELP: &str = "A fact perf 7.x's tool PMU reads when it opens the event (-e num_cpus, smt_on, ...: --perf-version 7.2), for this host or cgroup";
const EVENT_ONCE_HELP: &str = "Raw count of a perf event counter over this run's one interval (not scaled for multiplexing: scale with its group's enabled over running time)";
const ENABLED_ONCE_HELP: &str = "Time the counter group was enabled over this run's one interval, summed over the CPUs of the unit, in seconds";
const RUNNING_ONCE_HELP: &str = "Time the counter group was on the hardware counters over this run's one interval, summed over the CPUs of the unit, in seconds";
const SHARE_HELP: &str = "The smallest share of the last interval that any counted input of the metric ran on a counter (1: measured all the time; less: the rest is scaled)";
const TOGETHER_HELP: &str = "1 when every input of the metric was counted in one group (the same time slices), 0 when its inputs were spread over groups or the kernel split their group";
/// The help of a metric's error bar family.
fn bar_help<S: Syscalls + Clone>(c: &Collector<S>, r: usize) -> String {
    let e = &c.exports[r];
    format!(
        "Half width of the error bar of {} in the same unit (2 standard deviations of the value over the interval's reads): 0 when every input ran all the time; absent when the reads cannot tell",
        e.family
    )
}
const THRESHOLD_HELP: &str = "1 when the metric crossed its vendor threshold (MetricThreshold) in the last interval, 0 when not; absent without a threshold";
const CGROUP_HELP: &str = "A counted cgroup: leaf (no child cgroups: a parent's counts include its children's, so sum over leaf=\"true\" to count each task once) and id (the kernel's cgroup id, new when the cgroup is made again)";
const KUBERNETES_HELP: &str = "A counted pod's or container's cgroup and its Kubernetes names, from the kubelet's log directories (--kubelet-log-dir); join on cgroup: metric * on (instance, cgroup) group_left (namespace, pod, container) tmetric_cgroup_kubernetes_info";
const MISSING_HELP: &str = "A metric with no value in the last interval, and why";

/// The labels of a target's every sample: none for the host, else `cgroup` and the labels
/// its path gives (made once, when the target is opened: [`Counted::base_labels`]).
pub fn target_labels(cgroup: Option<&str>, labels: &[(&'static str, String)]) -> Labels {
    let mut l = Labels::default();
    if let Some(cg) = cgroup {
        l.push("cgroup", cg);
        for (k, v) in labels {
            l.push(k, v);
        }
    }
    l
}

/// [`target_labels`] as a JSON object.
fn target_labels_json<S: Syscalls>(counted: &Counted<S>) -> Value {
    let mut map = serde_json::Map::new();
    if let Some(cg) = &counted.cgroup {
        map.insert("cgroup".into(), Value::String(cg.clone()));
        for (k, v) in counted.labels.iter().filter(|(_, v)| !v.is_empty()) {
            map.insert((*k).to_string(), Value::String(v.clone()));
        }
    }
    Value::Object(map)
}

fn unit_labels(base: &Labels, unit: &UnitValues) -> Labels {
    match &unit.label {
        Some((k, v)) => base.with(k, v),
        None => base.clone(),
    }
}

/// The help of root `root` of `plan`, exported as `e`: description, formula, unit.
pub fn metric_help(plan: &tmetric_engine::Plan, e: &crate::names::Exported, root: usize) -> String {
    let r = &plan.roots()[root];
    let m = r.model.metric(r.metric);
    let brief = r.model.str(m.brief);
    let unit = if e.base {
        format!("Unit: {} (base unit)", e.unit)
    } else if e.unit.is_empty() {
        "No unit".to_string()
    } else {
        format!("Unit: {}", e.unit)
    };
    let threshold = r.model.str(m.threshold_expr);
    let threshold =
        if threshold.is_empty() { String::new() } else { format!(" Threshold: {threshold}.") };
    format!(
        "{}{}Formula ({}): {}. {unit}.{threshold}",
        brief.trim_end_matches('.'),
        if brief.is_empty() { "" } else { ". " },
        r.model.path(),
        r.model.str(m.expr)
    )
}

/// The HELP of a renamed metric's earlier family ([`crate::names::Exported::earlier`]).
fn earlier_help(e: &crate::names::Exported, help: &str) -> String {
    format!(
        "Deprecated: {}'s name in perf 6.12's tables, the default before perf 7.2's, which renamed the metric; the same samples. Move dashboards and alerts to {}; serve and rules with --perf-version 6.12 keep the earlier names alone. {help}",
        e.family, e.family
    )
}

/// Why a metric exports no value for an interval: the `reason` label of
/// `tmetric_metric_missing`, and `missing` in the JSON.
#[derive(Debug, Clone, Copy, PartialEq, thiserror::Error)]
pub enum NoValue {
    /// The evaluation failed (a division by zero, ...).
    #[error("no value: {0}")]
    Failed(tmetric_model::Fail),
    /// An input could not be counted at all.
    #[error("an input could not be counted (see tmetric_note)")]
    Missing,
    /// An input never ran on a counter in the interval.
    #[error(
        "an input never ran on a counter in the interval (the cgroup did not run, or the counter was never scheduled)"
    )]
    NotCounted,
    /// Not a number, with a note that says why.
    #[error("nan: see tmetric_note for why")]
    NanNoted,
    /// Not a number.
    #[error("nan")]
    Nan,
}

/// The value of root `r` in its exported unit, when it has one worth exporting.
pub fn exported_value<S: Syscalls + Clone>(
    c: &Collector<S>,
    unit: &UnitValues,
    r: usize,
) -> Result<f64, NoValue> {
    let result = &unit.results[r];
    if let Some(fail) = result.failure {
        return Err(NoValue::Failed(fail));
    }
    if !result.missing.is_empty() {
        return Err(NoValue::Missing);
    }
    if !result.not_counted.is_empty() {
        return Err(NoValue::NotCounted);
    }
    if !result.value.is_finite() {
        return Err(if result.why.is_some() { NoValue::NanNoted } else { NoValue::Nan });
    }
    Ok(result.value * c.exports[r].factor)
}

/// The whole exposition in `format`: the interval's families, then the read's (`once`:
/// `serve --once`'s, whose counts are gauges).
pub fn render<S: Syscalls + Clone>(c: &Collector<S>, format: Format, once: bool) -> String {
    let mut text = String::with_capacity(64 * 1024);
    interval_families(c, once).render_into(&mut text, format, false);
    read_families(c, once, None).render_into(&mut text, format, true);
    text
}

/// The families that change once per interval: the exporter's identity and state, cgroups
/// left out, notes, and every target's metrics (their values, running shares, error bars and
/// thresholds).
pub fn interval_families<S: Syscalls + Clone>(c: &Collector<S>, once: bool) -> Families {
    let mut f = Families::default();
    let model = c.machine.model.map(|m| m.path()).unwrap_or_default();
    add_host(&mut f, c, &model);
    add_status(&mut f, c, once);
    add_cgroups_left_out_and_notes(&mut f, c);
    // Families of every target, so each family's samples stay together.
    for (r, e) in c.exports.iter().enumerate() {
        f.family(&e.family, Kind::Gauge, &c.helps[r]);
        if let Some(earlier) = &e.earlier {
            f.family(&earlier.family, Kind::Gauge, &earlier_help(e, &c.helps[r]));
        }
    }
    if c.options.detail >= Detail::Quality {
        f.family("tmetric_metric_running_ratio", Kind::Gauge, SHARE_HELP);
        f.family("tmetric_metric_inputs_together", Kind::Gauge, TOGETHER_HELP);
        for (r, e) in c.exports.iter().enumerate() {
            if c.exports[..r].iter().all(|o| o.bar_family != e.bar_family) {
                f.family(&e.bar_family, Kind::Gauge, &bar_help(c, r));
            }
            if let Some(earlier) = &e.earlier {
                let help = earlier_help(e, &bar_help(c, r));
                f.family(&earlier.bar_family, Kind::Gauge, &help);
            }
        }
        f.family("tmetric_metric_threshold_crossed", Kind::Gauge, THRESHOLD_HELP);
    }
    f.family("tmetric_metric_missing", Kind::Info, MISSING_HELP);
    f.family("tmetric_cgroup", Kind::Info, CGROUP_HELP);
    for counted in c.cgroups.values() {
        let id = counted.id.map(|i| i.to_string()).unwrap_or_default();
        let l = counted
            .base_labels
            .with("leaf", if counted.leaf { "true" } else { "false" })
            .with("id", &id);
        f.add("tmetric_cgroup", Kind::Info, "", &l, "1".into());
    }
    for counted in c.cgroups.values() {
        if let Some(k) = c.kubernetes.of(&counted.labels) {
            let l = Labels::default()
                .with("cgroup", counted.cgroup.as_deref().unwrap_or_default())
                .with("namespace", &k.namespace)
                .with("pod", &k.pod)
                .with("container", k.container.as_deref().unwrap_or_default())
                .with("pod_uid", &k.pod_uid);
            f.add("tmetric_cgroup_kubernetes", Kind::Info, KUBERNETES_HELP, &l, "1".into());
        }
    }
    let mut words = Words::default();
    for counted in c.targets() {
        add_target(&mut f, c, counted, &mut words);
    }
    f
}

/// Notes and missing-value reasons worded once per render: targets that did not run (a
/// fleet's idle cgroups) share the same ones, and wording each again was a third of the
/// interval families' instructions at 20 such cgroups.
#[derive(Default)]
struct Words<'a> {
    notes: Vec<(&'a tmetric_engine::Note, String)>,
    reasons: Vec<(NoValue, String)>,
}

impl<'a> Words<'a> {
    fn note(&mut self, note: &'a tmetric_engine::Note) -> &str {
        let i = match self.notes.iter().position(|(n, _)| *n == note) {
            Some(i) => i,
            None => {
                self.notes.push((note, note.to_string()));
                self.notes.len() - 1
            }
        };
        &self.notes[i].1
    }

    fn reason(&mut self, why: NoValue) -> &str {
        let i = match self.reasons.iter().position(|(w, _)| *w == why) {
            Some(i) => i,
            None => {
                self.reasons.push((why, why.to_string()));
                self.reasons.len() - 1
            }
        };
        &self.reasons[i].1
    }
}

/// The families that change with every read: each counter's raw count and its group's
/// enabled and running times, cumulative since the target was opened (so `rate()` over them
/// is exact whatever the scrape interval), and the HTTP server's own counters. With `once`
/// (`serve --once`), the counts of the one interval counted, as gauges: a run's counts are
/// not a counter that later runs continue.
pub fn read_families<S: Syscalls + Clone>(
    c: &Collector<S>,
    once: bool,
    http: Option<&crate::http::Stats>,
) -> Families {
    let mut f = Families::default();
    let model = c.machine.model.map(|m| m.path()).unwrap_or_default();
    let (kind, event, enabled, running) = if once {
        (
            Kind::Gauge,
            "tmetric_event_raw",
            "tmetric_group_enabled_seconds",
            "tmetric_group_running_seconds",
        )
    } else {
        (
            Kind::Counter,
            "tmetric_event",
            "tmetric_group_enabled_seconds",
            "tmetric_group_running_seconds",
        )
    };
    let counters = c.options.detail >= Detail::Events;
    if counters {
        f.family(event, kind, if once { EVENT_ONCE_HELP } else { EVENT_HELP });
        f.family(enabled, kind, if once { ENABLED_ONCE_HELP } else { ENABLED_HELP });
        f.family(running, kind, if once { RUNNING_ONCE_HELP } else { RUNNING_HELP });
    }
    // Tool events (`-e duration_time`, perf 7.x's tool PMU facts) have no counter: the time
    // counted, and the fact perf reads at open.
    let tools = crate::collector::tool_rows(c.base_plan());
    let (duration, duration_kind) = if once {
        ("tmetric_tool_seconds", Kind::Gauge)
    } else {
        ("tmetric_tool_seconds", Kind::Counter)
    };
    if counters && tools.iter().any(|(_, t)| *t == ToolEvent::DurationTime) {
        let help = if once { DURATION_ONCE_HELP } else { DURATION_HELP };
        f.family(duration, duration_kind, help);
    }
    if counters && tools.iter().any(|(_, t)| matches!(t, ToolEvent::Fact(_))) {
        f.family("tmetric_tool_value", Kind::Gauge, TOOL_VALUE_HELP);
    }
    for counted in c.targets().filter(|_| counters && !tools.is_empty()) {
        let base = &counted.base_labels;
        let plan = counted.session.plan();
        for (name, tool) in &tools {
            let extra = [("event", name.as_str()), ("model", model.as_str())];
            match tool {
                ToolEvent::DurationTime => {
                    let seconds = if once {
                        counted.last.as_ref().map_or(0.0, |l| l.seconds)
                    } else {
                        counted.seconds_open()
                    };
                    f.sample_number(duration, duration_kind, "", base, &extra, seconds);
                }
                ToolEvent::Fact(_) => {
                    let row = plan.rows().iter().find(|r| r.source == Source::Tool(*tool));
                    let sample = tmetric_engine::EvalInput::new(&counted.latest, 0.0);
                    let value = row.map_or(f64::NAN, |r| {
                        tmetric_engine::plan_eval::input_value(plan, r, &sample)
                    });
                    if !value.is_nan() {
                        f.sample_number("tmetric_tool_value", Kind::Gauge, "", base, &extra, value);
                    }
                }
                // Refused when the collector is made: serve runs no workload.
                ToolEvent::UserTime | ToolEvent::SystemTime => {}
            }
        }
    }
    for counted in c.targets().filter(|_| counters) {
        let base = &counted.base_labels;
        let mut digits = [0u8; 20];
        for (label, _cpus, totals) in c.totals(counted, once) {
            let ul = match &label {
                Some((k, v)) => base.with(k, v),
                None => base.clone(),
            };
            for (s, t) in totals.iter().enumerate() {
                let Some((value, en, run)) = *t else { continue };
                let group = &counted.group_ids[s];
                let extra =
                    [("event", c.event_names[s].as_str()), ("group", &group.0), ("model", &model)];
                f.sample(event, kind, "", &ul, &extra, itoa(&mut digits, value));
                // One pair of times per group: the first of its events with a count says it.
                let first =
                    (0..s).all(|o| totals[o].is_none() || counted.group_ids[o].1 != group.1);
                if first {
                    let g = [("group", group.0.as_str()), ("model", &model)];
                    f.sample_number(enabled, kind, "", &ul, &g, en as f64 / 1e9);
                    f.sample_number(running, kind, "", &ul, &g, run as f64 / 1e9);
                }
            }
        }
    }
    if let Some(h) = http {
        use std::sync::atomic::Ordering::Relaxed;
        let none = Labels::default();
        f.add(
            "tmetric_http_connections_open",
            Kind::Gauge,
            "HTTP connections open now",
            &none,
            h.open.load(Relaxed).to_string(),
        );
        f.add(
            "tmetric_http_connections",
            Kind::Counter,
            "HTTP connections accepted",
            &none,
            h.accepted.load(Relaxed).to_string(),
        );
        let closed = "HTTP connections closed by the server, by why: shed (every slot busy: answered 503 at once), evicted (silent or the longest idle, for a new one), idle (no byte moved for the idle timeout), no_descriptor (none left to serve it)";
        f.family("tmetric_http_connections_closed", Kind::Counter, closed);
        for (why, v) in [
            ("shed", &h.shed),
            ("evicted", &h.evicted),
            ("idle", &h.timed_out),
            ("no_descriptor", &h.no_descriptor),
        ] {
            f.add(
                "tmetric_http_connections_closed",
                Kind::Counter,
                closed,
                &none.with("reason", why),
                v.load(Relaxed).to_string(),
            );
        }
        f.add(
            "tmetric_http_unauthorized_requests",
            Kind::Counter,
            "HTTP requests refused for their credentials (401)",
            &none,
            h.unauthorized.load(Relaxed).to_string(),
        );
    }
    f
}

/// The host's identity and the machine literals formulas read.
fn add_host<S: Syscalls + Clone>(f: &mut Families, c: &Collector<S>, model: &str) {
    let none = Labels::default();
    f.add(
        "tmetric_host",
        Kind::Info,
        "The host tmetric serve counts on: its name, CPU model in the catalogue, and the simulated PMU when counts come from a simulator",
        &none
            .with("host", &c.machine.host)
            .with("model", model)
            .with("simulated", c.machine.simulated.as_deref().unwrap_or("")),
        "1".into(),
    );
    for lit in tmetric_model::Literal::ALL {
        let v = c.base_plan().literals()[lit.index()];
        if v.is_finite() {
            f.add(
                "tmetric_machine_literal",
                Kind::Gauge,
                "A machine fact metric formulas read as #literal (counted system-wide): smt_on, num_cores, slots, system_tsc_freq, ...",
                &none.with("literal", lit.name()),
                number(v),
            );
        }
    }
}

/// The collector's own state: intervals, CPU time, descriptors and cgroup counts.
fn add_status<S: Syscalls + Clone>(f: &mut Families, c: &Collector<S>, once: bool) {
    let none = Labels::default();
    let s = &c.status;
    if !once {
        add_status_counters(f, c);
    }
    f.add(
        "tmetric_interval_seconds",
        Kind::Gauge,
        "Length of the last interval, in seconds",
        &none,
        number(s.seconds),
    );
    f.add(
        "tmetric_interval_reads",
        Kind::Gauge,
        "Reads of the counters per interval: --reads when a counter can be multiplexed (for its error bars), 1 when none can (software events, tracepoints, msr: their bars are exact from one read)",
        &none,
        c.reads_per_interval().to_string(),
    );
    let ended =
        s.ended.and_then(|t| t.duration_since(UNIX_EPOCH).ok()).map_or(0.0, |d| d.as_secs_f64());
    f.add(
        "tmetric_last_interval_end_timestamp_seconds",
        Kind::Gauge,
        "When the last interval ended (Unix time), in seconds",
        &none,
        number(ended),
    );
    f.add("tmetric_collector_interval_cpu_seconds", Kind::Gauge, "CPU time the collector spent on the last interval (its reads, the evaluation of every target, the cgroup walk), in seconds", &none, number(s.cpu_seconds));
    f.add(
        "tmetric_descriptors",
        Kind::Gauge,
        "Event descriptors open (events x CPUs x targets)",
        &none,
        c.descriptors().to_string(),
    );
    let budget = if c.budget == usize::MAX { f64::INFINITY } else { c.budget as f64 };
    f.add("tmetric_descriptor_budget", Kind::Gauge, "At most this many event descriptors are opened (--max-descriptors, or the open-file limit less a reserve); cgroups that would pass it are left out", &none, number(budget));
    f.add(
        "tmetric_target_descriptors",
        Kind::Gauge,
        "Event descriptors one target (the host or a cgroup) takes: counters x CPUs",
        &none,
        c.cost.to_string(),
    );
    f.add(
        "tmetric_cgroups",
        Kind::Gauge,
        "Cgroups by state: counted, or left out (see tmetric_cgroup_left_out_info)",
        &none.with("state", "counted"),
        c.cgroups.len().to_string(),
    );
    f.add(
        "tmetric_cgroups",
        Kind::Gauge,
        "",
        &none.with("state", "left_out"),
        c.left_out.len().to_string(),
    );
}

/// The exporter's counters (left out of `--once`, whose run is not continued by the next).
fn add_status_counters<S: Syscalls + Clone>(f: &mut Families, c: &Collector<S>) {
    let none = Labels::default();
    let s = &c.status;
    f.add(
        "tmetric_intervals",
        Kind::Counter,
        "Intervals ended (each computes every metric anew)",
        &none,
        s.intervals.to_string(),
    );
    f.add("tmetric_collector_cpu_seconds", Kind::Counter, "CPU time tmetric's collector spent reading counters, evaluating and walking cgroups, in seconds", &none, number(s.cpu_seconds_total));
    f.add("tmetric_render_cpu_seconds", Kind::Counter, "CPU time spent rendering /metrics and /json (each format at most once per read, and only when asked), in seconds", &none, number(s.render_cpu_seconds_total));
    f.add(
        "tmetric_cgroups_added",
        Kind::Counter,
        "Cgroups picked up after the start, a cgroup made again under a name it had counting anew",
        &none,
        s.added.to_string(),
    );
    f.add(
        "tmetric_cgroups_removed",
        Kind::Counter,
        "Cgroups dropped because they vanished or were made again under the same name (a new cgroup id)",
        &none,
        s.removed.to_string(),
    );
}

/// The cgroups left out and why, and the notes that belong to no target.
fn add_cgroups_left_out_and_notes<S: Syscalls + Clone>(f: &mut Families, c: &Collector<S>) {
    let none = Labels::default();
    let s = &c.status;
    f.family(
        "tmetric_cgroup_left_out",
        Kind::Info,
        "A cgroup that matches but is not counted, and why (the descriptor budget, a refusal, ...)",
    );
    for (cg, why) in &c.left_out {
        f.add(
            "tmetric_cgroup_left_out",
            Kind::Info,
            "",
            &none.with("cgroup", cg).with("reason", why),
            "1".into(),
        );
    }
    f.family("tmetric_note", Kind::Info, "Why a value is missing, partial or not counted, what the kernel refused or split, and read errors; by target");
    if s.cut {
        f.add(
            "tmetric_note",
            Kind::Info,
            "",
            &none.with(
                "note",
                &format!(
                    "the cgroup walk stopped after {} cgroups; later ones are not counted",
                    crate::cgroups::MAX_LISTED
                ),
            ),
            "1".into(),
        );
    }
    for e in &s.errors {
        f.add("tmetric_note", Kind::Info, "", &none.with("note", e), "1".into());
    }
    for p in &c.kubernetes.problems {
        f.add("tmetric_note", Kind::Info, "", &none.with("note", p), "1".into());
    }
}

/// One target's samples (the host or a cgroup): its notes, and per unit its events and
/// metrics.
fn add_target<'a, S: Syscalls + Clone>(
    f: &mut Families,
    c: &Collector<S>,
    counted: &'a Counted<S>,
    words: &mut Words<'a>,
) {
    let Some(last) = &counted.last else { return };
    let base = &counted.base_labels;
    for note in &last.notes {
        f.sample("tmetric_note", Kind::Info, "", base, &[("note", words.note(note))], "1");
    }
    for unit in &last.units {
        let ul = unit_labels(base, unit);
        for (r, e) in c.exports.iter().enumerate() {
            let (model, pmu) = (c.root_models[r].0.as_str(), c.root_models[r].1);
            let ml = [("model", model), ("pmu", pmu)];
            let value = exported_value(c, unit, r);
            // A renamed metric's earlier names carry the same samples.
            let earlier = e.earlier.as_ref().map(|x| (&x.family, &x.bar_family));
            for (family, bar_family) in std::iter::once((&e.family, &e.bar_family)).chain(earlier) {
                let mut metric = family.as_str();
                while let Some(rest) = metric.strip_prefix("tmetric_") {
                    metric = rest;
                }
                let per = [("model", model), ("pmu", pmu), ("metric", metric)];
                match &value {
                    Ok(v) => f.sample_number(family, Kind::Gauge, "", &ul, &ml, *v),
                    Err(why) => {
                        let missing = [per[0], per[1], per[2], ("reason", words.reason(*why))];
                        f.sample("tmetric_metric_missing", Kind::Info, "", &ul, &missing, "1");
                    }
                }
                // A metric without a value has no running share, grouping or error bar to tell.
                if value.is_err() || c.options.detail < Detail::Quality {
                    continue;
                }
                if let Some(share) = unit.shares[r] {
                    let name = "tmetric_metric_running_ratio";
                    f.sample_number(name, Kind::Gauge, "", &ul, &per, share);
                }
                let together = counted.together.get(r).copied().unwrap_or(false);
                let together = if together { "1" } else { "0" };
                f.sample("tmetric_metric_inputs_together", Kind::Gauge, "", &ul, &per, together);
                match unit.bars[r] {
                    Bar::Exact => f.sample(bar_family, Kind::Gauge, "", &ul, &ml, "0"),
                    Bar::Sigma(_) => {
                        let half = unit.bars[r].half_width().unwrap_or(f64::NAN) * e.factor;
                        f.sample_number(bar_family, Kind::Gauge, "", &ul, &ml, half.abs());
                    }
                    Bar::Unknown => {}
                }
                if let Some(crossed) = unit.results[r].threshold {
                    let crossed = if crossed { "1" } else { "0" };
                    let name = "tmetric_metric_threshold_crossed";
                    f.sample(name, Kind::Gauge, "", &ul, &per, crossed);
                }
            }
        }
    }
}

/// The JSON view: the same numbers, by target and unit, with the metrics' units and the
/// notes in full.
pub fn json<S: Syscalls + Clone>(c: &Collector<S>) -> Value {
    let s = &c.status;
    let ended = s.ended.and_then(|t| t.duration_since(UNIX_EPOCH).ok()).map(|d| d.as_secs_f64());
    let targets: Vec<Value> = c
        .targets()
        .map(|counted| {
            let plan = counted.session.plan();
            let all_totals = c.totals(counted, false);
            let units: Vec<Value> = counted.last.iter().flat_map(|last| &last.units).enumerate().map(|(u, unit)| {
                let metrics: Vec<Value> = plan.roots().iter().enumerate().map(|(r, root)| {
                    let m = root.model.metric(root.metric);
                    let value = exported_value(c, unit, r);
                    json!({
                        "metric": root.model.str(m.name),
                        "model": root.model.path(),
                        "family": c.exports[r].family,
                        "earlier_family": c.exports[r].earlier.as_ref().map(|e| &e.family),
                        "unit": c.exports[r].unit,
                        "value": value.as_ref().ok(),
                        "missing": value.as_ref().err().map(ToString::to_string),
                        "running_share": unit.shares[r],
                        "together": counted.together.get(r).copied().unwrap_or(false),
                        "error_bar": match unit.bars[r] {
                            Bar::Exact => Some(0.0),
                            Bar::Sigma(_) => unit.bars[r].half_width().map(|h| (h * c.exports[r].factor).abs()),
                            Bar::Unknown => None,
                        },
                        "threshold_crossed": unit.results[r].threshold,
                    })
                }).collect();
                let totals = all_totals.get(u).map(|t| t.2.as_slice()).unwrap_or_default();
                let events: Vec<Value> = (0..plan.specs().len()).filter_map(|sp| {
                    let (value, enabled, running) = (*totals.get(sp)?)?;
                    Some(json!({
                        "event": c.event_names[sp],
                        "group": counted.group_ids[sp].0,
                        "raw": value,
                        "enabled_ns": enabled,
                        "running_ns": running,
                    }))
                }).collect();
                json!({
                    "unit": unit.label.as_ref().map(|(k, v)| json!({k.to_string(): v})),
                    "metrics": metrics,
                    "events": events,
                })
            }).collect();
            json!({
                "cgroup": counted.cgroup,
                "cgroup_id": counted.id,
                "leaf": counted.cgroup.is_some().then_some(counted.leaf),
                "labels": target_labels_json(counted),
                "kubernetes": counted.cgroup.as_ref().and_then(|_| c.kubernetes.of(&counted.labels)).map(|k| json!({
                    "namespace": k.namespace, "pod": k.pod, "container": k.container, "pod_uid": k.pod_uid,
                })),
                "descriptors": counted.descriptors,
                "seconds": counted.last.as_ref().map(|l| l.seconds),
                "units": units,
                "notes": counted.last.as_ref().map_or(Vec::new(), |l| l.notes.iter().map(ToString::to_string).collect()),
            })
        })
        .collect();
    let rows_hidden: Vec<&str> = c
        .base_plan()
        .rows()
        .iter()
        .filter(|r| matches!(r.source, Source::Missing(_)))
        .map(|r| r.name.as_str())
        .collect();
    json!({
        "host": c.machine.host,
        "model": c.machine.model.map(|m| m.path()),
        "simulated": c.machine.simulated,
        "interval": {
            "number": s.intervals,
            "seconds": s.seconds,
            "ended": ended,
            "collector_cpu_seconds": s.cpu_seconds,
        },
        "descriptors": { "open": c.descriptors(), "budget": (c.budget != usize::MAX).then_some(c.budget), "per_target": c.cost },
        "targets": targets,
        "left_out": c.left_out.iter().map(|(k, v)| json!({"cgroup": k, "reason": v})).collect::<Vec<_>>(),
        "cgroups_added": s.added,
        "cgroups_removed": s.removed,
        "inputs_not_countable": rows_hidden,
        "errors": s.errors,
        "kubernetes_problems": c.kubernetes.problems,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn label_values_escape_backslashes_quotes_and_line_ends_only() {
        // The exposition formats' rule, written out character by character.
        let reference = |value: &str| {
            let mut out = String::from("k=\"");
            for c in value.chars() {
                match c {
                    '\\' => out.push_str("\\\\"),
                    '"' => out.push_str("\\\""),
                    '\n' => out.push_str("\\n"),
                    c => out.push(c),
                }
            }
            out + "\""
        };
        for value in [
            "",
            "plain",
            "/sys/fs/cgroup/kubepods.slice",
            "\\",
            "\"quoted\"",
            "a\nb",
            "end\\",
            "\n\n\"\\x\"",
            "üñïçødé \"€\" \\ ok",
        ] {
            let mut out = String::new();
            push_label(&mut out, "k", value);
            assert_eq!(out, reference(value), "{value:?}");
        }
    }
}
