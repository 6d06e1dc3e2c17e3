//! `tmetric record`: `stat`'s flags plus `-o FILE`; counts as `stat` does and also writes the
//! raw counts, with everything needed to evaluate them later, to a JSON-lines file
//! (docs/record-format.md). This module owns that format: its types, the writer and the
//! reader (with file:line errors); `report.rs` evaluates what the reader returns.

use std::collections::BTreeMap;
use std::io::{BufRead, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, bail};
use serde::{Deserialize, Serialize};
use tmetric_engine::{Plan, Source};
use tmetric_model::literal::Literal;
use tmetric_runtime::{EventKind, EventReport, Snapshot, Sysfs};

use crate::stat::StatArgs;

/// The `format` field of every record file's header.
pub const FORMAT: &str = "tmetric-record";
/// The format version this build writes and reads.
pub const VERSION: u32 = 1;

pub mod perf;

/// `tmetric record` flags: all of `stat`'s; `-o` names the record file.
#[derive(Debug, Clone, clap::Args)]
#[command(
    mut_arg("output", |a| a.help("The record file to write (default perf.data, an existing one moved to perf.data.old, as perf does); `-` writes a perf pipe to standard output. The counts still print to standard error, except to a pipe (as perf)")),
    after_help = "Examples:\n  tmetric record -e task-clock,context-switches -- ./bench\n  \
    tmetric record --pmu-sim sapphirerapids -M TopdownL1 -a -o td.data sleep 1\n  \
    tmetric report -i td.data -M tma_retiring\n  \
    tmetric record -e task-clock -o - true | perf stat report -i -\n  \
    tmetric record --format jsonl -o run.jsonl -e task-clock true"
)]
pub struct RecordArgs {
    #[command(flatten)]
    pub stat: StatArgs,
    /// The file format: `perf` (perf.data as `perf stat record` writes it, which `perf stat
    /// report` and `perf script` read, with tmetric's plan inside) or `jsonl` (JSON lines,
    /// docs/record-format.md).
    #[arg(long, value_enum, default_value = "perf", value_name = "FORMAT")]
    pub format: perf::Format,
}

/// Runs `tmetric record`.
pub fn run(args: &RecordArgs) -> anyhow::Result<i32> {
    if args.format == perf::Format::Jsonl && args.stat.output.is_none() {
        bail!("--format jsonl needs -o FILE (perf.data is the name of the perf format)");
    }
    let path = args.stat.output.clone().unwrap_or_else(|| PathBuf::from("perf.data"));
    let to = perf::RecordTo { path, format: args.format };
    if to.format == perf::Format::Perf && args.stat.repeat > 1 {
        bail!("Cannot use -r option with tmetric record (as with perf stat record)");
    }
    if to.format == perf::Format::Jsonl && to.to_stdout() {
        bail!(
            "--format jsonl -o -: JSON lines are written to a file (`-o /dev/stdout` for a pipe)"
        );
    }
    let mut stat = args.stat.clone();
    stat.output = None;
    crate::stat::run_recording(&stat, Some(&to))
}

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

/// The first line.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Header {
    pub format: String,
    pub version: u32,
    /// The tmetric version that wrote it.
    pub tmetric: String,
    pub cpuid: Option<String>,
    /// The model of `-M` (arch/name).
    pub model: Option<String>,
    /// `--pmu-sim`: the simulated PMU.
    pub simulated: Option<String>,
    /// What was counted, as stat's title says it (`sleep 1`, `system wide`).
    pub target: String,
    pub system_wide: bool,
    pub interval_ms: Option<u64>,
    pub topology: Topology,
    #[serde(with = "exact_map")]
    pub literals: BTreeMap<String, f64>,
    pub selection: Selection,
    pub events: Vec<EventRec>,
    pub groups: Vec<Vec<usize>>,
    pub rows: Vec<RowRec>,
    pub roots: Vec<RootRec>,
    /// Per model of the metrics: its `has_event()`/`strcmp_cpuid_str()` values on the machine.
    pub probes: Vec<ProbeRec>,
    /// `--retire-latency FILE` values (cycles).
    #[serde(with = "exact_map")]
    pub retire_latency: BTreeMap<String, f64>,
    /// Per event: why the kernel refused to open it (null when it opened).
    pub failures: Vec<Option<String>>,
    /// Groups the kernel refused, so their events were counted alone.
    pub splits: Vec<String>,
    /// `--per-thread`: the threads printed apart, (comm, tid).
    pub threads: Vec<(String, i32)>,
    /// `--per-thread -a`: rows that counted nothing were left out.
    pub skip_zero: bool,
}

/// A model's probe values, per input slot.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProbeRec {
    pub model: String,
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

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Topology {
    /// Online CPUs.
    pub cpus: Vec<u32>,
    pub cores: usize,
    pub sockets: usize,
    /// Per online CPU: [cpu, socket, die, core].
    pub places: Vec<[u32; 4]>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Selection {
    pub metrics: Vec<String>,
    pub events: Vec<String>,
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
    pub name: String,
    /// `software`, `hardware`, `tracepoint` or the PMU's name.
    pub pmu: String,
    #[serde(rename = "type")]
    pub type_: u32,
    pub config: u64,
    pub config1: u64,
    pub config2: u64,
    pub config3: u64,
    /// exclude_user, exclude_kernel, exclude_hv.
    pub exclude: [bool; 3],
    pub cpus: Option<Vec<u32>>,
    pub unit: Option<String>,
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
    pub name: String,
    pub source: SourceRec,
    pub show: bool,
    pub copy_of: Option<usize>,
    /// Roots printed on this row.
    pub roots: Vec<usize>,
    /// An uncore event on several boxes: per box, its event and the name it prints under
    /// `-A` (the first is `source`'s event); the row's count is their sum. Absent otherwise.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub boxes: Vec<(usize, String)>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SourceRec {
    /// Index into `events`.
    Counter(usize),
    Tool(String),
    RetireLatency,
    Missing(String),
}

/// A selected metric and the rows its inputs came from.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RootRec {
    pub model: String,
    pub metric: String,
    pub pmu: String,
    /// (input slot of the model, its name, row) per input; the name guards against a
    /// catalogue whose slots moved.
    pub inputs: Vec<(usize, String, usize)>,
}

/// Every line after the header.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "t", rename_all = "snake_case", deny_unknown_fields)]
pub enum Line {
    /// One group's reading on one CPU over one `-I` interval (deltas).
    Interval {
        n: u64,
        at_ns: u64,
        length_ns: u64,
        group: usize,
        cpu: i32,
        /// The thread of a `-t`/`-p` per-thread counter, or -1.
        thread: i32,
        /// Per member: [value, time_enabled, time_running], or null when not open.
        counts: Vec<Option<[u64; 3]>>,
    },
    /// The retire latencies an interval's metrics used (--record-tpebs).
    Latency {
        n: Option<u64>,
        #[serde(with = "exact_map")]
        values: BTreeMap<String, f64>,
    },
    /// One group's totals on one CPU.
    Final { group: usize, cpu: i32, thread: i32, counts: Vec<Option<[u64; 3]>> },
    /// `--errors`/`-v`: one group's reading on one CPU at the `n`-th read of the run (every
    /// 100 ms, since the start), from which `report --errors` computes the error bars as stat
    /// did.
    Read { n: u64, group: usize, cpu: i32, thread: i32, counts: Vec<Option<[u64; 3]>> },
    /// Sampled retire latencies of one event over the run (cycles).
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
    /// The last line: the run's length and the workload's resource use.
    End { elapsed_ns: u64, user_ns: Option<u64>, sys_ns: Option<u64>, exit: i32, intervals: u64 },
}

/// Per group member: [value, time_enabled, time_running], or `None` when it was not open.
type MemberCounts = Vec<Option<[u64; 3]>>;

/// What the end of a run adds to a record: the totals and how the run ended.
pub struct RunEnd<'a> {
    pub totals: &'a Snapshot,
    pub elapsed: Duration,
    pub rusage: Option<(Duration, Duration)>,
    pub exit: i32,
    pub intervals: usize,
    /// `--record-tpebs` sample statistics.
    pub samples: &'a [EventReport],
    /// `--record-tpebs`: the retire latencies the totals' metrics used.
    pub latencies: Option<&'a [(String, f64)]>,
    /// `--errors`/`-v`: the reads taken for error bars (cumulative), else empty.
    pub reads: &'a [Snapshot],
}

/// The `read` lines of `reads` (error-bar reads) for a record of `groups`.
pub fn read_lines(groups: &[Vec<usize>], reads: &[Snapshot]) -> Vec<Line> {
    let mut lines = Vec::new();
    for (n, snap) in reads.iter().enumerate() {
        for (group, (cpu, thread), counts) in group_lines(groups, snap) {
            lines.push(Line::Read { n: n as u64 + 1, group, cpu, thread, counts });
        }
    }
    lines
}

/// Per group and CPU (and thread): the members' readings.
fn group_lines(groups: &[Vec<usize>], counts: &Snapshot) -> Vec<(usize, (i32, i32), MemberCounts)> {
    let mut lines = Vec::new();
    for (g, members) in groups.iter().enumerate() {
        let mut places: Vec<(i32, i32)> = Vec::new();
        for &s in members {
            for c in counts.events.get(s).and_then(Option::as_ref).into_iter().flatten() {
                if !places.contains(&(c.cpu, c.thread)) {
                    places.push((c.cpu, c.thread));
                }
            }
        }
        for (cpu, thread) in places {
            let values = members
                .iter()
                .map(|&s| {
                    let per = counts.events.get(s)?.as_ref()?;
                    let c = per.iter().find(|c| c.cpu == cpu && c.thread == thread)?;
                    Some([c.raw.value, c.raw.enabled, c.raw.running])
                })
                .collect();
            lines.push((g, (cpu, thread), values));
        }
    }
    lines
}

/// Writes a record file line by line.
pub struct Recorder {
    path: PathBuf,
    out: std::io::BufWriter<std::fs::File>,
    groups: Vec<Vec<usize>>,
}

impl Recorder {
    /// Creates `path` and writes the header for `plan`.
    pub fn create(path: &Path, header: &Header) -> anyhow::Result<Recorder> {
        let file = crate::out::create_private(path)
            .with_context(|| format!("cannot create the record file {}", path.display()))?;
        let mut r = Recorder {
            path: path.to_path_buf(),
            out: std::io::BufWriter::new(file),
            groups: header.groups.clone(),
        };
        let line = serde_json::to_string(header).expect("a header serializes");
        r.write(&line)?;
        Ok(r)
    }

    fn write(&mut self, line: &str) -> anyhow::Result<()> {
        writeln!(self.out, "{line}")
            .with_context(|| format!("cannot write the record file {}", self.path.display()))
    }

    fn line(&mut self, line: &Line) -> anyhow::Result<()> {
        let text = serde_json::to_string(line).expect("a record line serializes");
        self.write(&text)
    }

    /// Per group and CPU: the members' readings.
    fn group_lines(&self, counts: &Snapshot) -> Vec<(usize, (i32, i32), MemberCounts)> {
        group_lines(&self.groups, counts)
    }

    /// One `-I` interval's counts (and the retire latencies its metrics used).
    pub fn interval(
        &mut self,
        n: usize,
        at: Duration,
        length: Duration,
        counts: &Snapshot,
        latencies: Option<&[(String, f64)]>,
    ) -> anyhow::Result<()> {
        for (group, (cpu, thread), counts) in self.group_lines(counts) {
            self.line(&Line::Interval {
                n: n as u64,
                at_ns: at.as_nanos() as u64,
                length_ns: length.as_nanos() as u64,
                group,
                cpu,
                thread,
                counts,
            })?;
        }
        if let Some(values) = latencies {
            self.line(&Line::Latency {
                n: Some(n as u64),
                values: values.iter().cloned().collect(),
            })?;
        }
        // Each interval reaches the file as it ends: a full disk is found (and said) at
        // once, and a run that is killed leaves every finished interval behind.
        self.out
            .flush()
            .with_context(|| format!("cannot write the record file {}", self.path.display()))
    }

    /// The totals, the sampled latencies and the end line; flushes.
    pub fn finish(mut self, end: &RunEnd<'_>) -> anyhow::Result<()> {
        let RunEnd { totals, elapsed, rusage, exit, intervals, samples, latencies, reads } = *end;
        for line in read_lines(&self.groups, reads) {
            self.line(&line)?;
        }
        for (group, (cpu, thread), counts) in self.group_lines(totals) {
            self.line(&Line::Final { group, cpu, thread, counts })?;
        }
        if let Some(values) = latencies {
            self.line(&Line::Latency { n: None, values: values.iter().cloned().collect() })?;
        }
        for r in samples {
            let t = &r.total;
            self.line(&Line::Tpebs {
                event: r.name.clone(),
                samples: t.count,
                lost: r.kernel_lost.unwrap_or(t.lost),
                mean: t.mean,
                min: t.min,
                max: t.max,
                last: t.last,
                p97: t.p97,
            })?;
        }
        self.line(&Line::End {
            elapsed_ns: elapsed.as_nanos() as u64,
            user_ns: rusage.map(|r| r.0.as_nanos() as u64),
            sys_ns: rusage.map(|r| r.1.as_nanos() as u64),
            exit,
            intervals: intervals as u64,
        })?;
        self.out
            .flush()
            .with_context(|| format!("cannot write the record file {}", self.path.display()))
    }
}

/// What the header records of the machine and plan.
pub struct HeaderFacts<'a> {
    pub args: &'a StatArgs,
    pub plan: &'a Plan,
    /// Per spec, why the kernel refused it.
    pub failures: Vec<Option<String>>,
    /// The groups the kernel refused, as notes.
    pub splits: Vec<String>,
    /// `--per-thread`: the threads printed apart.
    pub threads: Vec<(String, i32)>,
    /// `--per-thread -a`: rows that counted nothing are left out.
    pub skip_zero: bool,
    pub sysfs: &'a Sysfs,
    pub proc_root: &'a Path,
    pub model: Option<String>,
    pub simulated: Option<&'a str>,
    pub target: String,
    pub system_wide: bool,
}

/// The header of a record of `plan`.
pub fn header(f: &HeaderFacts<'_>) -> Header {
    let plan = f.plan;
    let cpus = f.sysfs.online_cpus().unwrap_or_default();
    let places: Vec<[u32; 4]> = cpus
        .iter()
        .map(|&c| {
            let (s, d, core) = f.sysfs.cpu_place(c);
            [c, s, d, core]
        })
        .collect();
    let mut cores: Vec<(u32, u32, u32)> = places.iter().map(|p| (p[1], p[2], p[3])).collect();
    cores.sort_unstable();
    cores.dedup();
    let mut sockets: Vec<u32> = places.iter().map(|p| p[1]).collect();
    sockets.sort_unstable();
    sockets.dedup();
    let events = plan
        .events
        .iter()
        .map(|e| EventRec {
            name: e.name.clone(),
            pmu: match &e.kind {
                EventKind::Software => "software".into(),
                EventKind::Hardware => "hardware".into(),
                EventKind::Tracepoint => "tracepoint".into(),
                EventKind::Pmu(p) => p.clone(),
            },
            type_: e.attr.type_,
            config: e.attr.config,
            config1: e.attr.config1,
            config2: e.attr.config2,
            config3: e.attr.config3,
            exclude: [e.attr.exclude_user, e.attr.exclude_kernel, e.attr.exclude_hv],
            cpus: e.cpus.clone(),
            unit: e.unit.clone(),
            scale: e.scale,
        })
        .collect();
    // Every spec in exactly one group: the plan's groups, then each other spec alone.
    let mut groups: Vec<Vec<usize>> = Vec::new();
    for g in &plan.groups {
        let fresh: Vec<usize> =
            g.iter().copied().filter(|s| !groups.iter().flatten().any(|x| x == s)).collect();
        if !fresh.is_empty() {
            groups.push(fresh);
        }
    }
    for s in 0..plan.specs.len() {
        if !groups.iter().flatten().any(|&x| x == s) {
            groups.push(vec![s]);
        }
    }
    let rows = plan
        .rows
        .iter()
        .map(|r| RowRec {
            name: r.name.clone(),
            source: match &r.source {
                Source::Counter(s) => SourceRec::Counter(*s),
                Source::Tool(t) => SourceRec::Tool(t.name().to_string()),
                Source::RetireLatency => SourceRec::RetireLatency,
                Source::Missing(why) => SourceRec::Missing(why.clone()),
            },
            show: r.show,
            copy_of: r.copy_of,
            roots: r.roots.clone(),
            boxes: r.boxes.iter().map(|b| (b.spec, b.name.clone())).collect(),
        })
        .collect();
    let roots = plan
        .roots
        .iter()
        .map(|root| {
            let m = &root.model.metrics[root.metric];
            RootRec {
                model: root.model.path(),
                metric: root.model.str(m.name).to_string(),
                pmu: root.model.str(m.pmu).to_string(),
                inputs: root
                    .slot_rows
                    .iter()
                    .enumerate()
                    .filter_map(|(slot, row)| {
                        let id = &root.model.ids[slot];
                        Some((slot, tmetric_engine::plan::id_name(root.model, id), (*row)?))
                    })
                    .collect(),
            }
        })
        .collect();
    let cpuid = tmetric_engine::plan::cpuid_of(f.sysfs, f.proc_root);
    Header {
        format: FORMAT.into(),
        version: VERSION,
        tmetric: env!("CARGO_PKG_VERSION").into(),
        cpuid,
        model: f.model.clone(),
        simulated: f.simulated.map(str::to_string),
        target: f.target.clone(),
        system_wide: f.system_wide,
        interval_ms: f.args.interval,
        topology: Topology { cpus, cores: cores.len(), sockets: sockets.len(), places },
        literals: Literal::ALL
            .iter()
            .map(|l| (l.name().to_string(), plan.literals[l.index()]))
            .collect(),
        selection: Selection {
            metrics: f.args.metrics.clone(),
            events: f.args.events.clone(),
            model: f.args.model.clone(),
            tpebs_mode: f.args.record_tpebs.then(|| f.args.tpebs_mode.clone()),
            summary: f.args.summary,
        },
        events,
        groups,
        rows,
        roots,
        probes: plan
            .probes
            .iter()
            .map(|(model, values)| ProbeRec { model: model.path(), values: values.clone() })
            .collect(),
        retire_latency: plan.retire_latency.iter().cloned().collect(),
        failures: f.failures.clone(),
        splits: f.splits.clone(),
        threads: f.threads.clone(),
        skip_zero: f.skip_zero,
    }
}

/// A record file read back.
#[derive(Debug, Clone)]
pub struct Recording {
    pub header: Header,
    /// Per interval: (n, at, length, counts per spec, latencies).
    pub intervals: Vec<Interval>,
    pub totals: Snapshot,
    pub final_latency: Option<BTreeMap<String, f64>>,
    pub tpebs: Vec<Line>,
    pub elapsed: Duration,
    pub rusage: Option<(Duration, Duration)>,
    /// `--errors`/`-v` at record time: the reads for error bars (cumulative), else empty.
    pub reads: Vec<Snapshot>,
}

impl Recording {
    /// Adds `read` line `n`'s counts of `group` on (`cpu`, `thread`): reads are numbered
    /// 1, 2, 3, ... in order, each place once.
    pub fn add_read(
        &mut self,
        n: u64,
        group: usize,
        place: (i32, i32),
        counts: &[Option<[u64; 3]>],
    ) -> Result<(), String> {
        let have = self.reads.len() as u64;
        if n == 0 || n > have + 1 || n + 1 < have {
            return Err(format!(
                "read {n} follows read {have}; reads are numbered 1, 2, 3, ... in order"
            ));
        }
        if n == have + 1 {
            self.reads.push(Snapshot { events: vec![None; self.header.events.len()] });
        }
        let snap = &mut self.reads[n as usize - 1];
        let members = self.header.groups.get(group).map_or(&[][..], |g| g.as_slice());
        let repeated = members.iter().any(|&s| {
            snap.events
                .get(s)
                .and_then(Option::as_ref)
                .is_some_and(|per| per.iter().any(|c| (c.cpu, c.thread) == place))
        });
        if repeated {
            return Err(format!("read {n} of group {group} at {place:?} again"));
        }
        add_counts(snap, &self.header.groups, group, place, counts)
    }
}

#[derive(Debug, Clone)]
pub struct Interval {
    pub n: u64,
    pub at: Duration,
    pub length: Duration,
    pub counts: Snapshot,
    pub latency: Option<BTreeMap<String, f64>>,
}

/// Adds one group line's readings to `snap`.
fn add_counts(
    snap: &mut Snapshot,
    groups: &[Vec<usize>],
    group: usize,
    (cpu, thread): (i32, i32),
    counts: &[Option<[u64; 3]>],
) -> Result<(), String> {
    let members = groups.get(group).ok_or_else(|| {
        format!("group {group} does not exist (the header has {} groups)", groups.len())
    })?;
    if members.len() != counts.len() {
        return Err(format!(
            "group {group} has {} members but the line gives {} counts",
            members.len(),
            counts.len()
        ));
    }
    for (&spec, c) in members.iter().zip(counts) {
        let Some([value, enabled, running]) = *c else { continue };
        let raw = tmetric_runtime::RawCount { value, enabled, running };
        let slot = &mut snap.events[spec];
        let per = slot.get_or_insert_with(Vec::new);
        // Every view adds readings up (over CPUs, threads, units), scaled for multiplexing:
        // sums past 2^64 would wrap into wrong numbers (or abort a debug build). No kernel
        // counts that far; a damaged file does.
        let sum = |f: &dyn Fn(&tmetric_runtime::RawCount) -> u64| -> u128 {
            per.iter().map(|c| u128::from(f(&c.raw))).sum::<u128>() + u128::from(f(&raw))
        };
        // Multiplexed readings scale in f64, as `RawCount::scaled` does before it saturates
        // at u64::MAX; the others add up exactly.
        let multiplexed = |r: &tmetric_runtime::RawCount| r.running > 0 && r.running < r.enabled;
        let readings = || per.iter().map(|c| c.raw).chain(std::iter::once(raw));
        let exact: u128 = readings().filter(|r| !multiplexed(r)).map(|r| u128::from(r.value)).sum();
        let scaled: f64 = readings()
            .filter(multiplexed)
            .map(|r| r.value as f64 * r.enabled as f64 / r.running as f64)
            .sum();
        if sum(&|r| r.value) > u128::from(u64::MAX)
            || (scaled > 0.0 && exact as f64 + scaled >= 18_446_744_073_709_551_616.0)
            || sum(&|r| r.enabled) > u128::from(u64::MAX)
            || sum(&|r| r.running) > u128::from(u64::MAX)
        {
            return Err(format!(
                "event {spec}'s counts add up to more than 2^64 with this reading; no kernel counts that far, so the file was damaged"
            ));
        }
        per.push(tmetric_runtime::counter::CpuCount { cpu, thread, raw });
    }
    Ok(())
}

/// One reading of a record file, for finding repeated lines.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum Reading {
    /// (interval, group, cpu, thread).
    Interval(u64, usize, i32, i32),
    /// (group, cpu, thread).
    Final(usize, i32, i32),
    Latency(Option<u64>),
    Tpebs(String),
}

impl Reading {
    fn describe(&self) -> String {
        let place = |cpu: i32, thread: i32| match (cpu, thread) {
            (-1, -1) => String::new(),
            (c, -1) => format!(" on CPU {c}"),
            (-1, t) => format!(" of thread {t}"),
            (c, t) => format!(" on CPU {c} of thread {t}"),
        };
        match self {
            Reading::Interval(n, g, c, t) => {
                format!("interval {n}'s counts of group {g}{}", place(*c, *t))
            }
            Reading::Final(g, c, t) => format!("the final counts of group {g}{}", place(*c, *t)),
            Reading::Latency(Some(n)) => format!("interval {n}'s retire latencies"),
            Reading::Latency(None) => "the final retire latencies".into(),
            Reading::Tpebs(e) => format!("the sample statistics of `{e}`"),
        }
    }
}

/// Reads a record file, with `file:line` in every error.
pub fn read(path: &Path, reader: impl BufRead) -> anyhow::Result<Recording> {
    let name = path.display().to_string();
    let mut lines = reader.lines().enumerate();
    let Some((_, first)) = lines.next() else {
        bail!(
            "{name}: the file is empty, so it holds no recording; expected a tmetric record (docs/record-format.md)"
        );
    };
    let first = first.with_context(|| format!("{name}:1: cannot read"))?;
    let probe: serde_json::Value = serde_json::from_str(&first).map_err(|e| {
        anyhow::anyhow!("{name}:1: not a tmetric record header ({e}); expected a JSON line with \"format\": \"{FORMAT}\"")
    })?;
    if probe.get("format").and_then(|f| f.as_str()) != Some(FORMAT) {
        bail!("{name}:1: not a tmetric record: the header has no \"format\": \"{FORMAT}\"");
    }
    match probe.get("version").and_then(|v| v.as_u64()) {
        Some(v) if v == VERSION as u64 => {}
        Some(v) => bail!(
            "{name}:1: record format version {v}, written by tmetric {}; this tmetric ({}) reads version {VERSION}",
            probe.get("tmetric").and_then(|t| t.as_str()).unwrap_or("?"),
            env!("CARGO_PKG_VERSION")
        ),
        None => bail!("{name}:1: the header has no numeric \"version\""),
    }
    let header: Header = serde_json::from_value(probe)
        .map_err(|e| anyhow::anyhow!("{name}:1: a bad header: {e}"))?;
    let specs = header.events.len();
    if let Some(bad) = header.groups.iter().flatten().find(|&&s| s >= specs) {
        bail!("{name}:1: a group names event {bad}, but there are {specs} events");
    }
    let topo = &header.topology;
    let placed: Vec<u32> = topo.places.iter().map(|p| p[0]).collect();
    if let Some(cpu) = topo.cpus.iter().find(|c| !placed.contains(c)) {
        bail!(
            "{name}:1: the topology lists CPU {cpu} but gives no place (socket, die, core) for it"
        );
    }
    if let Some(cpu) = placed.iter().find(|c| !topo.cpus.contains(c)) {
        bail!("{name}:1: the topology places CPU {cpu}, which its CPU list does not name");
    }
    let empty = Snapshot { events: vec![None; specs] };
    let mut rec = Recording {
        header,
        intervals: Vec::new(),
        totals: empty.clone(),
        final_latency: None,
        tpebs: Vec::new(),
        elapsed: Duration::ZERO,
        rusage: None,
        reads: Vec::new(),
    };
    let mut ended = false;
    let mut last_line = 1;
    // Where each reading was given, so a repeated one is an error naming both lines (summing
    // it would double its counts); and whether a CPU is one the topology describes (else
    // `report -A` could not show it).
    let mut seen: std::collections::HashMap<Reading, usize> = std::collections::HashMap::new();
    let mut seen_at = |key: Reading, at: usize| -> anyhow::Result<()> {
        if let Some(first) = seen.insert(key.clone(), at) {
            bail!(
                "{name}:{at}: {} again (first at line {first}); the file was damaged or two records were joined",
                key.describe()
            );
        }
        Ok(())
    };
    let system_wide = rec.header.system_wide;
    let topology_cpus = rec.header.topology.cpus.clone();
    let known_cpu = |cpu: i32, at: usize| -> anyhow::Result<()> {
        if cpu < -1 {
            bail!("{name}:{at}: CPU {cpu} is not a CPU number (-1 stands for any CPU)");
        }
        if system_wide && cpu >= 0 && !topology_cpus.contains(&(cpu as u32)) {
            bail!(
                "{name}:{at}: counts for CPU {cpu}, which the header's topology does not list (CPUs {:?}); the file was damaged or joined from two machines",
                topology_cpus
            );
        }
        Ok(())
    };
    for (i, text) in lines {
        let at = i + 1;
        last_line = at;
        let text = text.with_context(|| format!("{name}:{at}: cannot read"))?;
        if text.trim().is_empty() {
            continue;
        }
        if ended {
            bail!("{name}:{at}: a line after the `end` line; the file was appended to or damaged");
        }
        let line: Line = serde_json::from_str(&text).map_err(|e| {
            if e.is_eof() {
                anyhow::anyhow!("{name}:{at}: the line is truncated ({e}); the run that wrote it was probably killed")
            } else {
                anyhow::anyhow!("{name}:{at}: not a record line ({e}): expected an object with \"t\" one of interval, latency, final, tpebs, end")
            }
        })?;
        let groups = &rec.header.groups;
        match line {
            Line::Interval { n, at_ns, length_ns, group, cpu, thread, counts } => {
                known_cpu(cpu, at)?;
                let previous = rec.intervals.last().map_or(0, |x| x.n);
                if !(n == previous + 1 || (n == previous && previous > 0)) {
                    bail!(
                        "{name}:{at}: interval {n} follows interval {previous}; intervals are numbered 1, 2, 3, ... in order"
                    );
                }
                seen_at(Reading::Interval(n, group, cpu, thread), at)?;
                if rec.intervals.last().is_none_or(|x| x.n != n) {
                    rec.intervals.push(Interval {
                        n,
                        at: Duration::from_nanos(at_ns),
                        length: Duration::from_nanos(length_ns),
                        counts: empty.clone(),
                        latency: None,
                    });
                }
                let last = rec.intervals.last_mut().expect("just pushed");
                add_counts(&mut last.counts, groups, group, (cpu, thread), &counts)
                    .map_err(|e| anyhow::anyhow!("{name}:{at}: {e}"))?;
            }
            Line::Latency { n: Some(n), values } => {
                seen_at(Reading::Latency(Some(n)), at)?;
                match rec.intervals.iter_mut().rev().find(|x| x.n == n) {
                    Some(x) => x.latency = Some(values),
                    None => bail!("{name}:{at}: latencies for interval {n}, which has no counts"),
                }
            }
            Line::Latency { n: None, values } => {
                seen_at(Reading::Latency(None), at)?;
                rec.final_latency = Some(values);
            }
            Line::Read { n, group, cpu, thread, counts } => {
                known_cpu(cpu, at)?;
                rec.add_read(n, group, (cpu, thread), &counts)
                    .map_err(|e| anyhow::anyhow!("{name}:{at}: {e}"))?;
            }
            Line::Final { group, cpu, thread, counts } => {
                known_cpu(cpu, at)?;
                seen_at(Reading::Final(group, cpu, thread), at)?;
                add_counts(&mut rec.totals, groups, group, (cpu, thread), &counts)
                    .map_err(|e| anyhow::anyhow!("{name}:{at}: {e}"))?;
            }
            Line::Tpebs { ref event, .. } => {
                seen_at(Reading::Tpebs(event.clone()), at)?;
                rec.tpebs.push(line);
            }
            Line::End { elapsed_ns, user_ns, sys_ns, intervals, .. } => {
                let read = rec.intervals.last().map_or(0, |x| x.n);
                if intervals != read {
                    bail!(
                        "{name}:{at}: the `end` line counts {intervals} intervals, but the file holds {read}; intervals were lost or added"
                    );
                }
                rec.elapsed = Duration::from_nanos(elapsed_ns);
                rec.rusage = user_ns
                    .zip(sys_ns)
                    .map(|(u, s)| (Duration::from_nanos(u), Duration::from_nanos(s)));
                ended = true;
            }
        }
    }
    if !ended {
        bail!(
            "{name}:{last_line}: the record is truncated: no `end` line (the run that wrote it did not finish)"
        );
    }
    Ok(rec)
}
