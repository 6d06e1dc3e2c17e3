//! Recorded counts made ready to evaluate and print (`tmetric report`): the input told apart
//! ([`open`]: tmetric's perf.data or JSON lines, or perf's own perf.data), the recorded plan
//! rebuilt through the engine's [`Replay`], and every snapshot numbered as that plan's specs
//! ([`Playback`]).

use std::collections::BTreeMap;
use std::fmt;
use std::time::Duration;

use tmetric_catalog::Vintage;
use tmetric_engine::aggr::{self, Aggregation};
use tmetric_engine::replay::{
    Choice, Recorded, RecordedEstimate, RecordedRoot, RecordedRow, RecordedSource, Replay,
    ReplayWarning,
};
use tmetric_engine::view::Partition;
use tmetric_engine::{Plan, Refusal};
use tmetric_model::literal::Literal;
use tmetric_perfdata::{self as perfdata, PerfData};
use tmetric_runtime::{Attr, CounterEvent, EventKind, Snapshot};

use crate::error::{At, Kind, ReadError};
use crate::format::{EventRec, Line, SourceRec};
use crate::read::{Recording, read_jsonl};

/// What `report` was given.
#[derive(Debug, Clone)]
pub enum Input {
    /// A tmetric record, in either format.
    Record(Box<Recording>),
    /// A perf.data file `perf stat record` wrote (no tmetric extras).
    PerfStat(Box<PerfData>),
}

/// Reads `bytes`: perf.data (by perf's magic), with tmetric's extras or without, or a
/// JSON-lines record. `name` names the input in errors.
pub fn open(name: &str, bytes: &[u8]) -> Result<Input, ReadError> {
    if !perfdata::is_perf_data(bytes) {
        return read_jsonl(name, std::io::Cursor::new(bytes)).map(|r| Input::Record(Box::new(r)));
    }
    let data = perfdata::parse_perf_data(bytes).map_err(|e| ReadError::new(name, At::File, e))?;
    if data.extras.is_empty() {
        Ok(Input::PerfStat(Box::new(data)))
    } else {
        // Written by `tmetric record`: its plan, literals and model are inside.
        crate::perf::read(name, &data).map(|r| Input::Record(Box::new(r)))
    }
}

/// What a replay says once, before the counts.
#[derive(Debug, Clone, PartialEq)]
pub enum Warning {
    /// The engine left recorded metrics out.
    Replay(ReplayWarning),
    /// perf.data with STAT records but no `STAT_ROUND`.
    NoRound,
}

impl fmt::Display for Warning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Warning::Replay(w) => w.fmt(f),
            Warning::NoRound => f.write_str(
                "the perf.data file has no STAT_ROUND: the counts are printed without their elapsed time",
            ),
        }
    }
}

/// One `-I` interval made ready to print.
#[derive(Debug, Clone)]
pub struct Step {
    /// Its number, from 1.
    pub number: usize,
    /// When it ended, since the start.
    pub at: Duration,
    /// Its length.
    pub length: Duration,
    /// Its counts, numbered as the plan's specs.
    pub counts: Snapshot,
    /// The retire latencies its metrics used, when they differ per interval.
    pub latency: Option<Vec<(String, f64)>>,
    /// The reads taken inside it (cumulative, numbered as the plan's specs, oldest first),
    /// from which `stat -I` estimated its rotated counts and bars; empty when the file does
    /// not say which reads were inside which interval (files written before it did).
    pub reads: Vec<Snapshot>,
}

/// A counted CPU and where it sits, where the file says.
pub type Place = (u32, Option<CpuPlace>);

/// Where a recorded CPU sits: its socket, die and core (every file with a CPU topology), and
/// its node, cluster and caches (tmetric's files).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct CpuPlace {
    /// Package.
    pub socket: u32,
    /// Die within the package.
    pub die: u32,
    /// Core within the die.
    pub core: u32,
    /// NUMA node, cluster and caches, when recorded.
    pub units: Option<crate::format::CpuUnits>,
}

impl CpuPlace {
    /// The aggregation place of this CPU, with `cache_level`'s cache (the last level when
    /// `None`); `None` when `aggr` needs what the file did not record.
    pub fn place(&self, aggr: Aggregation, cache_level: Option<u32>) -> Option<aggr::Place> {
        let mut place = aggr::Place {
            socket: self.socket,
            die: self.die,
            core: self.core,
            ..Default::default()
        };
        let needs_units =
            matches!(aggr, Aggregation::Node | Aggregation::Cluster | Aggregation::Cache);
        let Some(units) = &self.units else { return (!needs_units).then_some(place) };
        place.node = units.node;
        place.cluster = units.cluster;
        let cache = match cache_level {
            Some(level) => units.caches.iter().find(|c| c[0] == level),
            None => units.caches.iter().max_by_key(|c| c[0]),
        };
        match (cache, aggr) {
            (Some(c), _) => place.cache = (c[0], c[1]),
            (None, Aggregation::Cache) => return None,
            (None, _) => {}
        }
        Some(place)
    }
}

/// Recorded counts made ready to print.
#[derive(Debug, Clone)]
pub struct Playback {
    /// The recorded plan, with the chosen metrics.
    pub plan: Plan,
    /// The `-I` intervals.
    pub intervals: Vec<Step>,
    /// The totals, when they were printed (always without `-I`; with `--summary`).
    pub totals: Option<Snapshot>,
    /// The run's length.
    pub elapsed: Duration,
    /// The workload's user and system time.
    pub rusage: Option<(Duration, Duration)>,
    /// What was counted, as the title says it.
    pub target: String,
    /// The CPUs counted, with their (socket, die, core) where known.
    pub places: Vec<Place>,
    /// Per plan spec: why the kernel refused it, when recorded.
    pub failures: Vec<Option<Refusal>>,
    /// Groups the kernel refused, as recorded.
    pub splits: Vec<tmetric_engine::RefusedGroup>,
    /// `--per-thread`: the threads printed apart (comm, tid).
    pub threads: Vec<(String, i32)>,
    /// `--per-thread -a`: rows that counted nothing were left out.
    pub skip_zero: bool,
    /// `-I`'s interval when recorded: perf's wall time for `CPUs utilized` per interval.
    pub interval: Option<Duration>,
    /// The aggregation the file was recorded with (perf.data's `STAT_CONFIG`), for when no
    /// flag asks for one, as `perf stat report` does; `None` when unset or unknown.
    pub aggr: Option<Aggregation>,
    /// `--per-cache=L`'s level when recorded so (`None`: the last level).
    pub cache_level: Option<u32>,
    /// Counts are scaled for multiplexing; false for perf.data recorded with `--no-scale`.
    pub scaled: bool,
    /// The totals show the workload's user and system time, as `stat` showed them.
    pub ru_display: bool,
    /// `--pmu-sim`: the simulated machine the counts come from.
    pub simulated: Option<String>,
    /// The error-bar reads the record keeps, numbered as the plan's specs; empty when none.
    pub reads: Vec<Snapshot>,
}

impl Playback {
    /// How the counts print apart: per unit of `aggr` (from the recorded CPUs and topology,
    /// `level`'s cache for `--per-cache`), per recorded thread, or as one total.
    pub fn split(&self, aggr: Aggregation, level: Option<u32>) -> Result<Partition, SplitError> {
        if aggr == Aggregation::Thread || aggr == Aggregation::Global {
            if !self.threads.is_empty() {
                return Ok(Partition::Threads {
                    threads: self.threads.clone(),
                    skip_zero: self.skip_zero,
                });
            }
            if aggr == Aggregation::Thread {
                return Err(SplitError::NoThreads);
            }
            return Ok(Partition::Global);
        }
        let cpus: Vec<u32> = self.places.iter().map(|p| p.0).collect();
        if cpus.is_empty() {
            return Err(SplitError::NotPerCpu(aggr));
        }
        let mut places = Vec::new();
        for (cpu, place) in &self.places {
            let Some(place) = place
                .as_ref()
                .and_then(|p| p.place(aggr, level))
                .or_else(|| (aggr == Aggregation::Cpu).then(aggr::Place::default))
            else {
                return Err(SplitError::NoPlace { aggr, cpu: *cpu });
            };
            places.push((*cpu, place));
        }
        let place = |cpu: u32| places.iter().find(|p| p.0 == cpu).map(|p| p.1).unwrap_or_default();
        Ok(aggr::split(&cpus, aggr, place))
    }
}

/// Why a record's counts cannot print apart as asked ([`Playback::split`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SplitError {
    /// `--per-thread` over a file without counts per thread.
    #[error(
        "--per-thread: the file holds no counts per thread (record with -p, -t or --per-thread)"
    )]
    NoThreads,
    /// A per-CPU aggregation over a task's counts.
    #[error("{}: the file holds counts of a task, not per CPU", .0.flag())]
    NotPerCpu(Aggregation),
    /// A counted CPU whose place for the aggregation the file does not give.
    #[error(
        "{}: the file does not say where CPU {cpu} sits (a file without that topology); use -A",
        .aggr.flag()
    )]
    NoPlace {
        /// The aggregation asked for.
        aggr: Aggregation,
        /// The CPU.
        cpu: u32,
    },
}

/// What to evaluate: `choice` names the metrics; `tpebs_mode` the statistic of recorded
/// `--record-tpebs` samples the metrics read (`mean`, `min`, `max`, `last`, `p97`), instead
/// of the recorded latencies.
#[derive(Debug, Clone, Copy)]
pub struct Options<'a> {
    /// The metrics.
    pub choice: Choice<'a>,
    /// `--tpebs-mode`.
    pub tpebs_mode: Option<&'a str>,
}

impl Input {
    /// The model the recorded `-M` items came from (`arch/name`).
    pub fn model(&self) -> Option<&str> {
        match self {
            Input::Record(rec) => rec.header.model.as_deref(),
            Input::PerfStat(_) => None,
        }
    }

    /// The perf vintages a tmetric record was made with: its vendor tables' and the perf
    /// release whose output it printed; perf 6.12's for files written before tmetric kept
    /// them. `None` for perf's own files, which say neither; an error (naming `name`) for a
    /// vintage this build does not store.
    #[allow(clippy::type_complexity)]
    pub fn vintages(
        &self,
        name: &str,
    ) -> Result<Option<(&'static Vintage, &'static Vintage)>, ReadError> {
        let Input::Record(rec) = self else { return Ok(None) };
        let of = |field, v: &Option<String>| {
            crate::read::stored_vintage(field, v.as_deref())
                .map_err(|kind| ReadError::new(name, At::File, kind))
        };
        Ok(Some((of("vintage", &rec.header.vintage)?, of("contract", &rec.header.contract)?)))
    }

    /// The recorded machine's cpuid as perf's mapfile spells it.
    pub fn cpuid(&self) -> Option<String> {
        match self {
            Input::Record(rec) => rec.header.cpuid.clone(),
            Input::PerfStat(data) => data.cpuid.as_deref().map(crate::perf::perf_cpuid),
        }
    }

    /// The recorded plan with the metrics `options` choose, and the counts to print.
    /// `name` names the input in errors; `warn` hears what is left out.
    pub fn replay(
        &self,
        name: &str,
        options: Options<'_>,
        warn: &mut dyn FnMut(Warning),
    ) -> Result<Playback, ReadError> {
        match self {
            Input::Record(rec) => {
                let at = if rec.perf.is_some() { At::Extras(1) } else { At::Line(1) };
                let mut playback = of_record(rec, options, warn)
                    .map_err(|e| ReadError::new(name, at, Kind::Replay(e)))?;
                if let Some(perf) = rec.perf {
                    playback.aggr = perf.aggr;
                    playback.cache_level = cache_level(perf.aggr_level);
                    playback.scaled = perf.scaled;
                    if perf.pipe {
                        // perf stat report names no command for a pipe: its title says 'pipe'.
                        playback.target = "pipe".into();
                    }
                }
                Ok(playback)
            }
            Input::PerfStat(data) => of_perf_stat(name, data, options.choice, warn),
        }
    }
}

/// `STAT_CONFIG`'s aggregation level as `--per-cache`'s level: perf writes 5 (above its
/// last level, 4) for the last level.
fn cache_level(level: Option<u64>) -> Option<u32> {
    level.filter(|l| (1..=4).contains(l)).map(|l| l as u32)
}

/// A recorded event as the runtime describes it.
fn counter_event(e: &EventRec) -> CounterEvent {
    let kind = match e.pmu.as_str() {
        "software" => EventKind::Software,
        "hardware" => EventKind::Hardware,
        "tracepoint" => EventKind::Tracepoint,
        pmu => EventKind::Pmu(pmu.to_string()),
    };
    CounterEvent {
        name: e.name.clone(),
        attr: Attr {
            type_: e.type_,
            config: e.config,
            config1: e.config1,
            config2: e.config2,
            config3: e.config3,
            exclude_user: e.exclude[0],
            exclude_kernel: e.exclude[1],
            exclude_hv: e.exclude[2],
            ..Attr::default()
        },
        kind,
        unit: e.unit.clone(),
        scale: e.scale,
        cpus: e.cpus.clone(),
    }
}

fn latency(values: &BTreeMap<String, f64>) -> Vec<(String, f64)> {
    values.iter().map(|(k, v)| (k.clone(), *v)).collect()
}

/// `--tpebs-mode`: the statistic `mode` of the recorded samples, per event.
fn tpebs_latencies(rec: &Recording, mode: &str) -> Vec<(String, f64)> {
    rec.tpebs
        .iter()
        .filter_map(|line| match line {
            Line::Tpebs { event, mean, min, max, last, p97, .. } => {
                let v = match mode {
                    "min" => *min,
                    "max" => *max,
                    "last" => *last,
                    "p97" => *p97,
                    _ => *mean,
                };
                Some((event.clone(), v.unwrap_or(0.0)))
            }
            _ => None,
        })
        .collect()
}

/// What a tmetric record says of its plan, for the engine.
fn recorded(rec: &Recording, tpebs: Option<&[(String, f64)]>) -> (Recorded, Vec<RecordedRoot>) {
    let h = &rec.header;
    let mut literals = [f64::NAN; Literal::COUNT];
    for lit in Literal::ALL {
        if let Some(v) = h.literals.get(lit.name()) {
            literals[lit.index()] = *v;
        }
    }
    // The latencies the totals used: recorded, sampled at the end, or `--tpebs-mode`'s.
    let retire_latency = match (tpebs, &rec.final_latency) {
        (Some(values), _) => values.to_vec(),
        (None, Some(values)) => latency(values),
        (None, None) => latency(&h.retire_latency),
    };
    let rows = h
        .rows
        .iter()
        .map(|row| RecordedRow {
            name: row.name.clone(),
            source: match &row.source {
                SourceRec::Counter(s) => RecordedSource::Counter(*s),
                SourceRec::Tool(name) => RecordedSource::Tool(name.clone()),
                SourceRec::RetireLatency => RecordedSource::RetireLatency,
                SourceRec::Missing(why) => RecordedSource::Missing(why.clone()),
            },
            show: row.show,
            copy_of: row.copy_of,
            boxes: row.boxes.clone(),
        })
        .collect();
    let roots = h
        .roots
        .iter()
        .enumerate()
        .map(|(i, root)| RecordedRoot {
            model: root.model.clone(),
            metric: root.metric.clone(),
            pmu: root.pmu.clone(),
            inputs: root.inputs.clone(),
            host: h.rows.iter().position(|row| row.roots.contains(&i)),
        })
        .collect();
    let recorded = Recorded {
        literals,
        events: h.events.iter().map(counter_event).collect(),
        groups: h.groups.clone(),
        rows,
        probes: h
            .probes
            .iter()
            .filter_map(|p| Some((tmetric_catalog::model(&p.model)?, p.values.clone())))
            .collect(),
        retire_latency,
        cpuid: h.cpuid.clone(),
        estimate: h
            .estimate
            .as_ref()
            .map(|e| RecordedEstimate {
                rotating: e.rotating,
                rotated: e.rotated.clone(),
                tick_hz: e.tick_hz,
                siblings: e.siblings.clone(),
            })
            .unwrap_or_default(),
    };
    (recorded, roots)
}

/// A tmetric record's plan rebuilt, with the metrics `options` choose.
fn of_record(
    rec: &Recording,
    options: Options<'_>,
    warn: &mut dyn FnMut(Warning),
) -> Result<Playback, tmetric_engine::replay::ReplayError> {
    let h = &rec.header;
    let tpebs = options.tpebs_mode.map(|mode| tpebs_latencies(rec, mode));
    let (recorded, roots) = recorded(rec, tpebs.as_deref());
    let mut replay = Replay::new(&recorded)?;
    replay.choose(&roots, options.choice, &mut |w| warn(Warning::Replay(w)))?;
    let intervals = rec
        .intervals
        .iter()
        .map(|x| Step {
            number: x.n as usize,
            at: x.at,
            length: x.length,
            counts: replay.counts(&x.counts),
            // `--tpebs-mode` applies to every interval alike.
            latency: x.latency.as_ref().filter(|_| tpebs.is_none()).map(latency),
            reads: rec
                .reads
                .iter()
                .zip(&rec.read_intervals)
                .filter(|(_, i)| **i == Some(x.n))
                .map(|(r, _)| replay.counts(r))
                .collect(),
        })
        .collect();
    let totals =
        (h.interval_ms.is_none() || h.selection.summary).then(|| replay.counts(&rec.totals));
    // Only CPUs that were counted.
    let counted: Vec<i32> = rec.totals.events.iter().flatten().flatten().map(|c| c.cpu).collect();
    let places = if h.system_wide {
        let units = h.topology.units.iter().map(Some).chain(std::iter::repeat(None));
        let places = h.topology.places.iter().zip(units);
        places
            .filter(|(p, _)| counted.contains(&(p[0] as i32)))
            .map(|(p, units)| {
                let place = CpuPlace { socket: p[1], die: p[2], core: p[3], units: units.cloned() };
                (p[0], Some(place))
            })
            .collect()
    } else {
        Vec::new()
    };
    Ok(Playback {
        scaled: true,
        failures: replay.per_spec(&h.failures),
        reads: rec.reads.iter().map(|r| replay.counts(r)).collect(),
        plan: replay.into_plan(),
        intervals,
        totals,
        elapsed: rec.elapsed,
        rusage: rec.rusage,
        target: h.target.clone(),
        places,
        splits: h.splits.clone(),
        threads: h.threads.clone(),
        skip_zero: h.skip_zero,
        interval: h.interval_ms.map(Duration::from_millis),
        aggr: h
            .aggr_mode
            .and_then(|code| Aggregation::from_code(code, tmetric_perfstat::Numbering::Since6_8)),
        cache_level: cache_level(h.aggr_level.map(u64::from)),
        ru_display: h.ru_display.unwrap_or(!h.system_wide),
        simulated: h.simulated.clone(),
    })
}

/// A perf.data file's events as rows (each its own group), with the `-M` metrics
/// (`choice`'s picks) matched to them by name. Without `-M`, perf's built-in metrics (which
/// the view computes) are what `perf stat report` shows.
fn of_perf_stat(
    name: &str,
    data: &PerfData,
    choice: Choice<'_>,
    warn: &mut dyn FnMut(Warning),
) -> Result<Playback, ReadError> {
    if data.events.is_empty() {
        return Err(ReadError::new(name, At::File, Kind::NoEvents));
    }
    if data.rounds.is_empty() && data.unrounded.is_empty() {
        return Err(ReadError::new(name, At::File, Kind::NoStat));
    }
    let events: Vec<CounterEvent> = data.events.iter().map(perf_event).collect();
    let recorded = Recorded {
        literals: tmetric_engine::plan::offline_literals(false, data.cpus.iter().any(|&c| c >= 0)),
        rows: events
            .iter()
            .enumerate()
            .map(|(i, e)| RecordedRow {
                name: e.name.clone(),
                source: RecordedSource::Counter(i),
                show: true,
                copy_of: None,
                boxes: Vec::new(),
            })
            .collect(),
        groups: (0..events.len()).map(|i| vec![i]).collect(),
        events,
        probes: Vec::new(),
        retire_latency: Vec::new(),
        cpuid: data.cpuid.as_deref().map(crate::perf::perf_cpuid),
        estimate: RecordedEstimate::default(),
    };
    let mut replay =
        Replay::new(&recorded).map_err(|e| ReadError::new(name, At::File, Kind::Replay(e)))?;
    if let Choice::Picks(picks) = choice {
        for pick in picks {
            replay.add_metric(pick.model, pick.metric);
        }
    }
    let counts = crate::perf::read_perf_stat(data);
    if counts.no_round {
        warn(Warning::NoRound);
    }
    // (socket, die, core) from the file's CPU topology, where it has one.
    let place = |cpu: i32| {
        let &(core, socket, die) = data.topology.get(cpu as usize)?;
        (core >= 0 && socket >= 0 && die >= 0).then_some(CpuPlace {
            socket: socket as u32,
            die: die as u32,
            core: core as u32,
            units: None,
        })
    };
    // perf's title: `pipe` for a piped file (perf stat report names no command then), else
    // the recorded command line.
    let target = match (data.pipe, data.cmdline.is_empty()) {
        (true, _) => "pipe".to_string(),
        (false, false) => data.cmdline.join(" "),
        (false, true) => "perf.data".to_string(),
    };
    Ok(Playback {
        scaled: data.scale != Some(0),
        intervals: counts
            .intervals
            .into_iter()
            .map(|x| Step {
                number: x.n as usize,
                at: x.at,
                length: x.length,
                counts: replay.counts(&x.counts),
                latency: None,
                reads: Vec::new(),
            })
            .collect(),
        totals: counts.totals.map(|t| replay.counts(&t)),
        plan: replay.into_plan(),
        elapsed: counts.elapsed,
        rusage: None,
        target,
        places: data.cpus.iter().filter(|&&c| c >= 0).map(|&c| (c as u32, place(c))).collect(),
        failures: Vec::new(),
        splits: Vec::new(),
        threads: Vec::new(),
        skip_zero: false,
        interval: (data.interval_ms > 0).then(|| Duration::from_millis(data.interval_ms)),
        aggr: data.aggregation(),
        cache_level: cache_level(data.aggr_level),
        // perf stat report shows no user and system time.
        ru_display: false,
        simulated: None,
        reads: Vec::new(),
    })
}

/// perf's event as the runtime describes it.
fn perf_event(e: &perfdata::DataEvent) -> CounterEvent {
    let kind = match e.type_ {
        0 => EventKind::Hardware,
        1 => EventKind::Software,
        2 => EventKind::Tracepoint,
        t => EventKind::Pmu(format!("type{t}")),
    };
    CounterEvent {
        name: e.name.clone(),
        attr: Attr {
            type_: e.type_,
            config: e.config,
            config1: e.config1,
            config2: e.config2,
            exclude_user: e.exclude.0,
            exclude_kernel: e.exclude.1,
            exclude_hv: e.exclude.2,
            ..Attr::default()
        },
        kind,
        unit: e.unit.clone().filter(|u| !u.is_empty()),
        scale: e.scale,
        cpus: None,
    }
}
