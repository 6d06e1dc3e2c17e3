//! The record file's content, as serde types: the header (the plan, the machine, the
//! flags) and the reading lines (docs/record-format.md). Both formats carry them: JSON lines
//! as the file, perf.data in tmetric's extras.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use tmetric_engine::{Refusal, RefusedGroup};

/// The `format` field of every record file's header.
pub const FORMAT: &str = "tmetric-record";
/// The format version this build writes and reads.
pub const VERSION: u32 = 1;

/// Floats are written as the shortest decimal that reads back to the same bits (Rust's
/// `Display`), in JSON strings: JSON readers need not parse numbers exactly.
mod exact_map {
    use std::collections::BTreeMap;

    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(v: &BTreeMap<String, f64>, s: S) -> Result<S::Ok, S::Error> {
        s.collect_map(v.iter().map(|(k, v)| (k, format!("{v}"))))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<BTreeMap<String, f64>, D::Error> {
        let raw = BTreeMap::<String, String>::deserialize(d)?;
        raw.into_iter()
            .map(|(k, t)| match t.parse() {
                Ok(v) => Ok((k, v)),
                Err(_) => Err(serde::de::Error::custom(format!("`{k}`: `{t}` is not a number"))),
            })
            .collect()
    }
}

/// The first line: the plan, the machine and the flags (docs/record-format.md, "Header").
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Header {
    /// Always [`FORMAT`].
    pub format: String,
    /// [`VERSION`].
    pub version: u32,
    /// The tmetric version that wrote it.
    pub tmetric: String,
    /// The machine's cpuid as perf's mapfile spells it (`GenuineIntel-6-8F-8`).
    pub cpuid: Option<String>,
    /// The model of `-M` (arch/name).
    pub model: Option<String>,
    /// `--pmu-sim`: the simulated PMU.
    pub simulated: Option<String>,
    /// What was counted, as stat's title says it (`sleep 1`, `system wide`).
    pub target: String,
    /// Counted per CPU (`-a`, `-C`).
    pub system_wide: bool,
    /// `-I`, in ms.
    pub interval_ms: Option<u64>,
    /// The online CPUs and where each is.
    pub topology: Topology,
    /// Every `#literal` by name (NaN when unknown).
    #[serde(with = "exact_map")]
    pub literals: BTreeMap<String, f64>,
    /// The flags that chose what was counted.
    pub selection: Selection,
    /// The counters, in plan order (an index into this is an *event*).
    pub events: Vec<EventRec>,
    /// Groups of events, leader first; every event in exactly one.
    pub groups: Vec<Vec<usize>>,
    /// The printed rows, in order.
    pub rows: Vec<RowRec>,
    /// The selected metrics.
    pub roots: Vec<RootRec>,
    /// Per model of the metrics: its `has_event()`/`strcmp_cpuid_str()` values on the machine.
    pub probes: Vec<ProbeRec>,
    /// `--retire-latency FILE` values (cycles).
    #[serde(with = "exact_map")]
    pub retire_latency: BTreeMap<String, f64>,
    /// Per event: why the kernel refused to open it (null when it opened). Files written
    /// before refusals were data hold their text; they read as the same refusals.
    #[serde(deserialize_with = "refusals::deserialize")]
    pub failures: Vec<Option<Refusal>>,
    /// Groups the kernel refused, and where their events went. Files written before these
    /// were data hold their text; they read as the same groups.
    #[serde(deserialize_with = "refused_groups::deserialize")]
    pub splits: Vec<RefusedGroup>,
    /// `--per-thread`: the threads printed apart, (comm, tid).
    pub threads: Vec<(String, i32)>,
    /// `--per-thread -a`: rows that counted nothing were left out.
    pub skip_zero: bool,
    /// The aggregation mode counts printed in (perf's `enum aggr_mode` number in perf 6.12's
    /// numbering: 0 `-A`, 2 `--per-socket`, 6 `--per-core`, ...), which `report` prints in
    /// when no flag asks for another; absent in files written before tmetric kept it (read as
    /// the default, 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub aggr_mode: Option<u64>,
    /// `--per-cache=L`'s level (perf's 5 for the last level).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub aggr_level: Option<u32>,
    /// The totals showed the workload's user and system time (perf's `ru_display`: one run
    /// of a command with no other target); absent in files written before tmetric kept it
    /// (read as: when not system-wide).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ru_display: Option<bool>,
    /// What the estimate of the turns a rotated group missed needs (docs/record-format.md,
    /// "Estimate"); absent when tmetric did not rotate anchored groups, and in files
    /// written before it did (their counts are scaled by time).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub estimate: Option<EstimateRec>,
    /// The perf vintage whose vendor tables the metrics came from (`7.2`), one this build
    /// stores; absent in files written before tmetric kept it, which read as perf 6.12's (the
    /// only tables a run used unless `--perf-version` chose others).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vintage: Option<String>,
    /// The perf release whose output `stat` printed (`6.12`), which `report` prints as; absent
    /// in files written before tmetric kept it (read as 6.12).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub contract: Option<String>,
}

/// The groups tmetric rotated itself, with their anchors, and what the estimate's bars
/// need of the machine.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EstimateRec {
    /// tmetric rotated the groups itself (not `--rotation kernel`).
    pub rotating: bool,
    /// Per rotated group: [its PMU's number, its leading event, its anchor event or null].
    pub rotated: Vec<(usize, usize, Option<usize>)>,
    /// The kernel's timer ticks per second.
    pub tick_hz: f64,
    /// [CPU, its SMT sibling] pairs.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub siblings: Vec<(u32, u32)>,
}

/// A model's probe values, per input slot.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProbeRec {
    /// The model, `arch/name`.
    pub model: String,
    /// Per input slot: `has_event()`/`strcmp_cpuid_str()`'s value (0 for other slots).
    #[serde(with = "exact_vec")]
    pub values: Vec<f64>,
}

mod exact_vec {
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(v: &[f64], s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(v.iter().map(|v| format!("{v}")))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<f64>, D::Error> {
        Vec::<String>::deserialize(d)?
            .into_iter()
            .map(|t| {
                t.parse().map_err(|_| serde::de::Error::custom(format!("`{t}` is not a number")))
            })
            .collect()
    }
}

/// The online CPUs and where each is.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Topology {
    /// Online CPUs.
    pub cpus: Vec<u32>,
    /// How many cores.
    pub cores: usize,
    /// How many sockets.
    pub sockets: usize,
    /// Per online CPU: [cpu, socket, die, core].
    pub places: Vec<[u32; 4]>,
    /// Per online CPU, in the order of `places`: its NUMA node, cluster and caches, for
    /// `report --per-node`, `--per-cluster` and `--per-cache`; empty in files written before
    /// tmetric kept them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub units: Vec<CpuUnits>,
}

/// Where one CPU sits beyond its socket, die and core.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CpuUnits {
    /// Its NUMA node (0 without NUMA information, as perf's `--per-node` reads it).
    pub node: u32,
    /// Its cluster id (`topology/cluster_id`; 0 when the kernel gives none).
    pub cluster: u32,
    /// The caches it uses: (level, id) for each level sysfs describes.
    pub caches: Vec<[u32; 2]>,
}

/// The flags that chose what was counted.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Selection {
    /// `-M` items.
    pub metrics: Vec<String>,
    /// `-e` lists.
    pub events: Vec<String>,
    /// `--model`.
    pub model: Option<String>,
    /// `--record-tpebs`: the statistic metrics used.
    pub tpebs_mode: Option<String>,
    /// `--summary`: totals printed after the intervals.
    pub summary: bool,
}

/// One counter (a `Plan` spec).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EventRec {
    /// The name it prints under.
    pub name: String,
    /// `software`, `hardware`, `tracepoint` or the PMU's name.
    pub pmu: String,
    /// `perf_event_attr.type`.
    #[serde(rename = "type")]
    pub type_: u32,
    /// `config`.
    pub config: u64,
    /// `config1`.
    pub config1: u64,
    /// `config2`.
    pub config2: u64,
    /// `config3`.
    pub config3: u64,
    /// exclude_user, exclude_kernel, exclude_hv.
    pub exclude: [bool; 3],
    /// The PMU's cpumask, when it has one.
    pub cpus: Option<Vec<u32>>,
    /// A sysfs alias's `.unit`.
    pub unit: Option<String>,
    /// A sysfs alias's `.scale`.
    #[serde(with = "exact_opt")]
    pub scale: Option<f64>,
}

mod exact_opt {
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(v: &Option<f64>, s: S) -> Result<S::Ok, S::Error> {
        match v {
            Some(v) => s.serialize_some(&format!("{v}")),
            None => s.serialize_none(),
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<f64>, D::Error> {
        match Option::<String>::deserialize(d)? {
            None => Ok(None),
            Some(t) => t
                .parse()
                .map(Some)
                .map_err(|_| serde::de::Error::custom(format!("`{t}` is not a number"))),
        }
    }
}

/// A printed input row.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RowRec {
    /// The printed name.
    pub name: String,
    /// Where its value came from.
    pub source: SourceRec,
    /// Whether it was printed.
    pub show: bool,
    /// The row it counted again for another group's metric.
    pub copy_of: Option<usize>,
    /// Roots printed on this row.
    pub roots: Vec<usize>,
    /// An uncore event on several boxes: per box, its event and the name it prints under
    /// `-A` (the first is `source`'s event); the row's count is their sum. Absent otherwise.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub boxes: Vec<(usize, String)>,
}

/// Where a row's value came from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SourceRec {
    /// Index into `events`.
    Counter(usize),
    /// A tool event, by name.
    Tool(String),
    /// A retire latency.
    RetireLatency,
    /// Nothing counted it; why.
    Missing(String),
}

/// A selected metric and the rows its inputs came from.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RootRec {
    /// Its model, `arch/name`.
    pub model: String,
    /// Its name.
    pub metric: String,
    /// Its PMU.
    pub pmu: String,
    /// (input slot of the model, its name, row) per input; the name guards against a
    /// catalogue whose slots moved.
    pub inputs: Vec<(usize, String, usize)>,
}

/// Every line after the header (docs/record-format.md, "Reading lines"). Counts are
/// [`MemberCounts`]: per group member, [value, time_enabled, time_running], or null when it
/// was not open; a place is a CPU (-1 for a task counter) and a thread (that of a `-t`/`-p`
/// per-thread counter, or -1).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "t", rename_all = "snake_case", deny_unknown_fields)]
#[allow(missing_docs)]
pub enum Line {
    /// One group's reading at one place over the `n`-th `-I` interval (deltas), which ended
    /// `at_ns` after the start and lasted `length_ns`.
    Interval {
        n: u64,
        at_ns: u64,
        length_ns: u64,
        group: usize,
        cpu: i32,
        thread: i32,
        counts: MemberCounts,
    },
    /// The retire latencies interval `n`'s metrics used (`None`: the totals'), with
    /// `--record-tpebs`.
    Latency {
        n: Option<u64>,
        #[serde(with = "exact_map")]
        values: BTreeMap<String, f64>,
    },
    /// One group's totals at one place.
    Final { group: usize, cpu: i32, thread: i32, counts: MemberCounts },
    /// `--errors`/`-v`: one group's reading at one place at the `n`-th read of the run (every
    /// 100 ms, or at every turn of tmetric's rotation, since the start), from which `report`
    /// computes the estimate and the error bars as stat did; with `-I`, the interval it was
    /// read inside (1 for the first; absent for a read outside every interval and in files
    /// written before it was kept).
    Read {
        n: u64,
        group: usize,
        cpu: i32,
        thread: i32,
        counts: MemberCounts,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        interval: Option<u64>,
    },
    /// Sampled retire latencies of one event over the run (cycles): how many samples, how
    /// many lost, and the statistics (`p97`: the mean of the lowest 97%).
    Tpebs {
        event: String,
        samples: u64,
        lost: u64,
        #[serde(with = "exact_opt")]
        mean: Option<f64>,
        #[serde(with = "exact_opt")]
        min: Option<f64>,
        #[serde(with = "exact_opt")]
        max: Option<f64>,
        #[serde(with = "exact_opt")]
        last: Option<f64>,
        #[serde(with = "exact_opt")]
        p97: Option<f64>,
    },
    /// The last line: the run's length, the workload's user and system time, the exit
    /// status and how many intervals ran.
    End { elapsed_ns: u64, user_ns: Option<u64>, sys_ns: Option<u64>, exit: i32, intervals: u64 },
}

/// Per group member: [value, time_enabled, time_running], or `None` when it was not open.
pub type MemberCounts = Vec<Option<[u64; 3]>>;

/// `failures` entries: a [`Refusal`], or its text as files written before held it.
mod refusals {
    use serde::{Deserialize, Deserializer};
    use tmetric_engine::Refusal;

    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Form {
        Text(String),
        Typed(Refusal),
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<Option<Refusal>>, D::Error> {
        let forms = Vec::<Option<Form>>::deserialize(d)?;
        Ok(forms
            .into_iter()
            .map(|f| {
                f.map(|f| match f {
                    Form::Text(text) => Refusal::from_text(&text),
                    Form::Typed(refusal) => refusal,
                })
            })
            .collect())
    }
}

mod refused_groups {
    use serde::{Deserialize, Deserializer};
    use tmetric_engine::RefusedGroup;

    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Form {
        Text(String),
        Typed(RefusedGroup),
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<RefusedGroup>, D::Error> {
        Vec::<Form>::deserialize(d)?
            .into_iter()
            .map(|form| match form {
                Form::Typed(group) => Ok(group),
                Form::Text(text) => RefusedGroup::from_text(&text).ok_or_else(|| {
                    serde::de::Error::custom(format!(
                        "`{text}` is not a refused group's note (`the kernel refused the group {{...}} (ERRNO): ...`)"
                    ))
                }),
            })
            .collect()
    }
}
