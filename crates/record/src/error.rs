//! Why a record file cannot be read: [`ReadError`] names the file and where in it (a line of
//! a JSON-lines record, a line of the extras in a perf.data file), [`Kind`] what was wrong.
//! Messages are worded here only; readers return the kind.

use std::fmt;

use tmetric_engine::replay::ReplayError;

use crate::format::{FORMAT, VERSION};

/// Where in the file an error is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum At {
    /// The file as a whole.
    File,
    /// A line of a JSON-lines record (from 1).
    Line(usize),
    /// A line of tmetric's extras inside a perf.data file (from 1).
    Extras(usize),
}

impl fmt::Display for At {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            At::File => Ok(()),
            At::Line(n) => write!(f, ":{n}"),
            At::Extras(n) => write!(f, ": tmetric's data, line {n}"),
        }
    }
}

/// A record file that cannot be read: `FILE:LINE: what`.
#[derive(Debug)]
pub struct ReadError {
    /// The file as the user named it (`standard input` for `-`).
    pub file: String,
    /// Where in it.
    pub at: At,
    /// What is wrong.
    pub kind: Kind,
}

impl ReadError {
    /// `kind` at `at` of `file`.
    pub fn new(file: &str, at: At, kind: impl Into<Kind>) -> ReadError {
        ReadError { file: file.to_string(), at, kind: kind.into() }
    }
}

impl fmt::Display for ReadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}{}: {}", self.file, self.at, self.kind)
    }
}

impl std::error::Error for ReadError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        std::error::Error::source(&self.kind)
    }
}

/// A reading a damaged or joined file gives twice.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Reading {
    /// (interval, group, cpu, thread).
    Interval(u64, usize, i32, i32),
    /// (group, cpu, thread).
    Final(usize, i32, i32),
    /// An interval's (or, `None`, the totals') retire latencies.
    Latency(Option<u64>),
    /// The sample statistics of an event.
    Tpebs(String),
}

impl fmt::Display for Reading {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let place = |cpu: i32, thread: i32| match (cpu, thread) {
            (-1, -1) => String::new(),
            (c, -1) => format!(" on CPU {c}"),
            (-1, t) => format!(" of thread {t}"),
            (c, t) => format!(" on CPU {c} of thread {t}"),
        };
        match self {
            Reading::Interval(n, g, c, t) => {
                write!(f, "interval {n}'s counts of group {g}{}", place(*c, *t))
            }
            Reading::Final(g, c, t) => write!(f, "the final counts of group {g}{}", place(*c, *t)),
            Reading::Latency(Some(n)) => write!(f, "interval {n}'s retire latencies"),
            Reading::Latency(None) => f.write_str("the final retire latencies"),
            Reading::Tpebs(e) => write!(f, "the sample statistics of `{e}`"),
        }
    }
}

/// What is wrong with a record file.
#[derive(Debug, thiserror::Error)]
pub enum Kind {
    /// It has no bytes.
    #[error(
        "the file is empty, so it holds no recording; expected a tmetric record (docs/record-format.md)"
    )]
    Empty,
    /// Reading failed.
    #[error("cannot read")]
    Io(#[source] std::io::Error),
    /// The first line is not JSON.
    #[error(
        "not a tmetric record header ({0}); expected a JSON line with \"format\": \"{FORMAT}\""
    )]
    NotHeader(serde_json::Error),
    /// The header is JSON of something else.
    #[error("not a tmetric record: the header has no \"format\": \"{FORMAT}\"")]
    NotTmetric,
    /// A format version this build does not read.
    #[error(
        "record format version {found}, written by tmetric {writer}; this tmetric ({}) reads version {VERSION}",
        env!("CARGO_PKG_VERSION")
    )]
    Version {
        /// The file's version.
        found: u64,
        /// The tmetric version that wrote it (`?` when the header does not say).
        writer: String,
    },
    /// The header names a perf vintage this build does not store.
    #[error(
        "the header's \"{field}\" is perf `{found}`, which this tmetric does not store (it holds perf {stored}); report it with a tmetric that stores it, or evaluate it with one of these with --perf-version X.Y"
    )]
    UnknownVintage {
        /// `vintage` or `contract`.
        field: &'static str,
        /// What the file says.
        found: String,
        /// The stored vintages, comma-separated.
        stored: String,
    },
    /// The header has no version.
    #[error("the header has no numeric \"version\"")]
    NoVersion,
    /// The header does not have the header's fields.
    #[error("a bad header: {0}")]
    BadHeader(serde_json::Error),
    /// A group names an event the header lacks.
    #[error("a group names event {event}, but there are {events} events")]
    GroupEvent {
        /// The event.
        event: usize,
        /// How many the header has.
        events: usize,
    },
    /// The topology lists a CPU it gives no place.
    #[error("the topology lists CPU {cpu} but gives no place (socket, die, core) for it")]
    Unplaced {
        /// The CPU.
        cpu: u32,
    },
    /// The topology places a CPU it does not list.
    #[error("the topology places CPU {cpu}, which its CPU list does not name")]
    Unlisted {
        /// The CPU.
        cpu: u32,
    },
    /// The recorded plan contradicts itself.
    #[error(transparent)]
    Replay(#[from] ReplayError),
    /// A reading given twice.
    #[error(
        "{reading} again (first at line {first}); the file was damaged or two records were joined"
    )]
    Again {
        /// The reading.
        reading: Reading,
        /// The line that gave it first.
        first: usize,
    },
    /// A CPU number below -1.
    #[error("CPU {cpu} is not a CPU number (-1 stands for any CPU)")]
    NotCpu {
        /// The number.
        cpu: i32,
    },
    /// A CPU the recorded topology does not list, in a system-wide record.
    #[error(
        "counts for CPU {cpu}, which the header's topology does not list (CPUs {cpus:?}); the file was damaged or joined from two machines"
    )]
    ForeignCpu {
        /// The CPU.
        cpu: i32,
        /// The topology's CPUs.
        cpus: Vec<u32>,
    },
    /// A line after the `end` line.
    #[error("a line after the `end` line; the file was appended to or damaged")]
    AfterEnd,
    /// A line cut short.
    #[error("the line is truncated ({0}); the run that wrote it was probably killed")]
    Truncated(serde_json::Error),
    /// A line that is not a record line.
    #[error(
        "not a record line ({0}): expected an object with \"t\" one of interval, latency, final, read, tpebs, end"
    )]
    NotLine(serde_json::Error),
    /// Intervals out of order.
    #[error(
        "interval {n} follows interval {previous}; intervals are numbered 1, 2, 3, ... in order"
    )]
    IntervalOrder {
        /// The interval.
        n: u64,
        /// The one before it.
        previous: u64,
    },
    /// An interval that ends before the one before it.
    #[error(
        "interval {n} ends at {at_ns} ns, before interval {previous} ({previous_ns} ns); interval times only grow"
    )]
    IntervalTime {
        /// The interval.
        n: u64,
        /// Its end, ns since the start.
        at_ns: u64,
        /// The one before it.
        previous: u64,
        /// That one's end.
        previous_ns: u64,
    },
    /// A reading that ran longer than it was enabled.
    #[error(
        "event {event} ran {running} ns of {enabled} ns enabled; the kernel never counts a running time above the enabled time"
    )]
    RunningAboveEnabled {
        /// The event.
        event: usize,
        /// Its running time.
        running: u64,
        /// Its enabled time.
        enabled: u64,
    },
    /// A counts line names a group the header lacks.
    #[error("group {group} does not exist (the header has {groups} groups)")]
    NoGroup {
        /// The group.
        group: usize,
        /// How many there are.
        groups: usize,
    },
    /// A counts line gives another number of counts than its group has members.
    #[error("group {group} has {members} members but the line gives {counts} counts")]
    Members {
        /// The group.
        group: usize,
        /// Its members.
        members: usize,
        /// The counts given.
        counts: usize,
    },
    /// Counts that add up past 2^64.
    #[error(
        "event {event}'s counts add up to more than 2^64 with this reading; no kernel counts that far, so the file was damaged"
    )]
    Overflow {
        /// The event.
        event: usize,
    },
    /// Reads out of order.
    #[error("read {n} follows read {have}; reads are numbered 1, 2, 3, ... in order")]
    ReadOrder {
        /// The read.
        n: u64,
        /// The reads so far.
        have: u64,
    },
    /// A read's interval that is not its other lines', or earlier than the read before's.
    #[error(
        "read {n} says it was read inside interval {}, unlike its other lines or the read before; a read belongs to one interval, and intervals only grow",
        interval.map_or("none".to_string(), |i| i.to_string())
    )]
    ReadInterval {
        /// The read.
        n: u64,
        /// The interval it says.
        interval: Option<u64>,
    },
    /// A read given twice.
    #[error("read {n} of group {group} at {place:?} again")]
    ReadAgain {
        /// The read.
        n: u64,
        /// The group.
        group: usize,
        /// (cpu, thread).
        place: (i32, i32),
    },
    /// Latencies of an interval without counts.
    #[error("latencies for interval {n}, which has no counts")]
    LatencyInterval {
        /// The interval.
        n: u64,
    },
    /// The `end` line's interval count is not the file's.
    #[error(
        "the `end` line counts {intervals} intervals, but the file holds {read}; intervals were lost or added"
    )]
    EndCount {
        /// The `end` line's count.
        intervals: u64,
        /// The intervals read.
        read: u64,
    },
    /// No `end` line.
    #[error("the record is truncated: no `end` line (the run that wrote it did not finish)")]
    NoEnd,
    /// perf.data: tmetric's extras are not text.
    #[error("tmetric's data in the file is not UTF-8 ({0})")]
    NotUtf8(std::str::Utf8Error),
    /// perf.data: tmetric's extras have no header line.
    #[error("the header line is missing")]
    NoHeader,
    /// perf.data: no event map after the header.
    #[error("no event map")]
    NoMap,
    /// perf.data: the event map is not one.
    #[error("not tmetric's event map ({0})")]
    NotMap(serde_json::Error),
    /// perf.data: perf's events and tmetric's header disagree.
    #[error(
        "the file has {file} events and tmetric's header {header}, mapped as {attrs:?}: the file was changed after it was written"
    )]
    MapMismatch {
        /// perf's events.
        file: usize,
        /// The header's events.
        header: usize,
        /// The map.
        attrs: Vec<usize>,
    },
    /// perf.data: a reading of a thread the thread map lacks.
    #[error("a reading names thread {index}, beyond the thread map")]
    ThreadIndex {
        /// The thread-map index.
        index: u32,
    },
    /// perf.data: a counts line in the extras, where perf's STAT records hold the counts.
    #[error("a counts line, which a perf.data record keeps in perf's STAT records")]
    CountsLine,
    /// perf.data that perf's reader refuses.
    #[error(transparent)]
    PerfData(#[from] tmetric_perfdata::DataError),
    /// perf.data without events.
    #[error("the perf.data file has no events")]
    NoEvents,
    /// perf.data without STAT records.
    #[error(
        "the perf.data file has no PERF_RECORD_STAT records: it was not written by `perf stat record`"
    )]
    NoStat,
}
