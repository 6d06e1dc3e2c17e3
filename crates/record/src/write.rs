//! Writing a record during a run, in either format: where and how ([`RecordTo`]), the sink
//! `stat`'s run loop feeds ([`RecordSink`]) with each interval and the end of the run
//! ([`RunEnd`]), and the JSON-lines writer ([`Recorder`]); the perf.data writer is
//! [`crate::perf::PerfRecorder`].

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Duration;

use tmetric_runtime::{EventReport, Snapshot, Target};

use crate::format::{Header, Line, MemberCounts};
use crate::header::{HeaderFacts, header};
use crate::perf::PerfRecorder;

/// The file formats of `tmetric record`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// perf.data, as `perf stat record` writes it, with tmetric's extras.
    Perf,
    /// JSON lines (format version 1 of docs/record-format.md).
    Jsonl,
}

/// Where and how `tmetric record` writes.
#[derive(Debug, Clone)]
pub struct RecordTo {
    /// The file; `-` is standard output (a perf pipe).
    pub path: PathBuf,
    /// The format.
    pub format: Format,
}

impl RecordTo {
    /// Whether the record goes to standard output: stat then prints nothing, as perf prints
    /// nothing when it records to a pipe (its report would print the counts a second time).
    pub fn to_stdout(&self) -> bool {
        self.path.as_os_str() == "-"
    }
}

/// Why a record cannot be written.
#[derive(Debug, thiserror::Error)]
pub enum WriteError {
    /// The JSON-lines file cannot be created.
    #[error("cannot create the record file {path}")]
    Create {
        /// The file.
        path: String,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The JSON-lines file cannot be written.
    #[error("cannot write the record file {path}")]
    Write {
        /// The file.
        path: String,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The perf.data file or pipe cannot be written.
    #[error("cannot write the record to {name}")]
    WritePerf {
        /// The file, or `standard output`.
        name: String,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// `-o -` to a terminal.
    #[error(
        "-o -: standard output is a terminal; pipe it (`| perf stat report -i -`) or redirect it to a file"
    )]
    Terminal,
    /// A reading of a place the file's header gave no id.
    #[error(
        "a reading of event {event} on CPU {cpu} thread {thread} that the record did not announce"
    )]
    Unannounced {
        /// The event.
        event: usize,
        /// The CPU.
        cpu: i32,
        /// The thread.
        thread: i32,
    },
    /// `FILE.old` is a directory, so `FILE` cannot be moved there.
    #[error("cannot move {path} to {old}: that is a directory; remove it or give another -o")]
    OldIsDirectory {
        /// The file.
        path: String,
        /// `FILE.old`.
        old: String,
    },
    /// An older `FILE.old` cannot be removed.
    #[error("cannot remove the old {old}")]
    RemoveOld {
        /// `FILE.old`.
        old: String,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// `FILE` cannot be moved to `FILE.old`.
    #[error("cannot move {path} to {old}")]
    MoveToOld {
        /// The file.
        path: String,
        /// `FILE.old`.
        old: String,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// An empty `FILE` cannot be removed to be created afresh.
    #[error("cannot replace the empty {path}")]
    ReplaceEmpty {
        /// The file.
        path: String,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// `FILE` is a directory.
    #[error("{path} is a directory; give the record file with -o FILE")]
    IsDirectory {
        /// The file.
        path: String,
    },
    /// A device or FIFO at `FILE` cannot be opened.
    #[error("cannot open {path}")]
    Open {
        /// The file.
        path: String,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// `FILE` is neither a regular file, a device nor a FIFO.
    #[error("{path} is not a regular file; give the record file with -o FILE")]
    NotRegular {
        /// The file.
        path: String,
    },
    /// What is at `FILE` cannot be looked at.
    #[error("cannot look at {path}")]
    Stat {
        /// The file.
        path: String,
        /// Why.
        #[source]
        source: std::io::Error,
    },
}

/// What the end of a run adds to a record: the totals and how the run ended.
pub struct RunEnd<'a> {
    /// The counts from start to end.
    pub totals: &'a Snapshot,
    /// The run's length.
    pub elapsed: Duration,
    /// The workload's user and system time.
    pub rusage: Option<(Duration, Duration)>,
    /// The exit status `stat` returns.
    pub exit: i32,
    /// How many `-I` intervals ran.
    pub intervals: usize,
    /// `--record-tpebs` sample statistics.
    pub samples: &'a [EventReport],
    /// `--record-tpebs`: the retire latencies the totals' metrics used.
    pub latencies: Option<&'a [(String, f64)]>,
    /// `--errors`/`-v`: the reads taken for error bars (cumulative), else empty.
    pub reads: &'a [Snapshot],
    /// With `-I`: per read, the interval it was read inside (1 for the first; `None` after
    /// the last); empty without `-I`.
    pub read_intervals: &'a [Option<u64>],
}

impl RunEnd<'_> {
    /// The lines after the totals, in either format: the totals' latencies (`latency`),
    /// the sample statistics (`tpebs`) and `end`.
    pub(crate) fn tpebs_lines(&self) -> Vec<Line> {
        self.samples
            .iter()
            .map(|r| {
                let t = &r.total;
                Line::Tpebs {
                    event: r.name.clone(),
                    samples: t.count,
                    lost: r.kernel_lost.unwrap_or(t.lost),
                    mean: t.mean,
                    min: t.min,
                    max: t.max,
                    last: t.last,
                    p97: t.p97,
                }
            })
            .collect()
    }

    /// The `end` line.
    pub(crate) fn end_line(&self) -> Line {
        Line::End {
            elapsed_ns: self.elapsed.as_nanos() as u64,
            user_ns: self.rusage.map(|r| r.0.as_nanos() as u64),
            sys_ns: self.rusage.map(|r| r.1.as_nanos() as u64),
            exit: self.exit,
            intervals: self.intervals as u64,
        }
    }
}

/// A latency line (`n`: the interval, `None` for the totals).
pub(crate) fn latency_line(n: Option<u64>, values: &[(String, f64)]) -> Line {
    Line::Latency { n, values: values.iter().cloned().collect() }
}

/// The record being written, in either format.
pub enum RecordSink {
    /// JSON lines.
    Jsonl(Recorder),
    /// perf.data.
    Perf(Box<PerfRecorder>),
}

impl RecordSink {
    /// Creates the record for the run `facts` describe, counted on `target`; `thread_map` is
    /// the threads counted apart (`-p`, `-t`), with their names.
    pub fn create(
        to: &RecordTo,
        facts: &HeaderFacts<'_>,
        target: &Target,
        thread_map: Vec<(i32, String)>,
    ) -> Result<RecordSink, WriteError> {
        let header = header(facts);
        match to.format {
            Format::Jsonl => Ok(RecordSink::Jsonl(Recorder::create(&to.path, &header)?)),
            Format::Perf => Ok(RecordSink::Perf(Box::new(PerfRecorder::create(
                to, facts, header, target, thread_map,
            )?))),
        }
    }

    /// One `-I` interval's counts (deltas) and the retire latencies its metrics used.
    pub fn interval(
        &mut self,
        n: usize,
        at: Duration,
        length: Duration,
        counts: &Snapshot,
        latencies: Option<&[(String, f64)]>,
    ) -> Result<(), WriteError> {
        match self {
            RecordSink::Jsonl(r) => r.interval(n, at, length, counts, latencies),
            RecordSink::Perf(r) => r.interval(n, at, counts, latencies),
        }
    }

    /// The totals and the end of the run.
    pub fn finish(self, end: &RunEnd<'_>) -> Result<(), WriteError> {
        match self {
            RecordSink::Jsonl(r) => r.finish(end),
            RecordSink::Perf(r) => r.finish(end),
        }
    }
}

/// The `read` lines of `reads` (error-bar reads) for a record of `groups`, each with the
/// `-I` interval of `intervals` it was read inside.
pub(crate) fn read_lines(
    groups: &[Vec<usize>],
    reads: &[Snapshot],
    intervals: &[Option<u64>],
) -> Vec<Line> {
    let mut lines = Vec::new();
    for (n, snap) in reads.iter().enumerate() {
        let interval = intervals.get(n).copied().flatten();
        for (group, (cpu, thread), counts) in group_lines(groups, snap) {
            lines.push(Line::Read { n: n as u64 + 1, group, cpu, thread, counts, interval });
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

/// Creates (or truncates) `path` for writing; a new file gets mode 0600, as perf creates
/// perf.data: record files name the command and what it did, and tmetric often runs as root.
/// An existing file keeps the mode its owner gave it; a link or file another user planted in
/// a shared sticky directory is refused.
fn create_private(path: &Path) -> std::io::Result<std::fs::File> {
    tmetric_runtime::output::create(path, false)
}

/// Writes a JSON-lines record file line by line.
pub struct Recorder {
    path: PathBuf,
    out: std::io::BufWriter<std::fs::File>,
    groups: Vec<Vec<usize>>,
}

impl Recorder {
    /// Creates `path` and writes `header`.
    pub fn create(path: &Path, header: &Header) -> Result<Recorder, WriteError> {
        let file = create_private(path)
            .map_err(|source| WriteError::Create { path: path.display().to_string(), source })?;
        let mut r = Recorder {
            path: path.to_path_buf(),
            out: std::io::BufWriter::new(file),
            groups: header.groups.clone(),
        };
        let line = serde_json::to_string(header).expect("a header serializes");
        r.write(&line)?;
        Ok(r)
    }

    fn io(&self, source: std::io::Error) -> WriteError {
        WriteError::Write { path: self.path.display().to_string(), source }
    }

    fn write(&mut self, line: &str) -> Result<(), WriteError> {
        // A FIFO whose reader stopped: a stop signal still ends the run.
        tmetric_runtime::signal::blocking(|| writeln!(self.out, "{line}")).map_err(|e| self.io(e))
    }

    fn line(&mut self, line: &Line) -> Result<(), WriteError> {
        let text = serde_json::to_string(line).expect("a record line serializes");
        self.write(&text)
    }

    /// One `-I` interval's counts (and the retire latencies its metrics used).
    pub fn interval(
        &mut self,
        n: usize,
        at: Duration,
        length: Duration,
        counts: &Snapshot,
        latencies: Option<&[(String, f64)]>,
    ) -> Result<(), WriteError> {
        for (group, (cpu, thread), counts) in group_lines(&self.groups, counts) {
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
            self.line(&latency_line(Some(n as u64), values))?;
        }
        // Each interval reaches the file as it ends: a full disk is found (and said) at
        // once, and a run that is killed leaves every finished interval behind.
        tmetric_runtime::signal::blocking(|| self.out.flush()).map_err(|e| self.io(e))
    }

    /// The reads, the totals, the sampled latencies and the end line; flushes.
    pub fn finish(mut self, end: &RunEnd<'_>) -> Result<(), WriteError> {
        for line in read_lines(&self.groups, end.reads, end.read_intervals) {
            self.line(&line)?;
        }
        for (group, (cpu, thread), counts) in group_lines(&self.groups, end.totals) {
            self.line(&Line::Final { group, cpu, thread, counts })?;
        }
        if let Some(values) = end.latencies {
            self.line(&latency_line(None, values))?;
        }
        for line in end.tpebs_lines() {
            self.line(&line)?;
        }
        self.line(&end.end_line())?;
        tmetric_runtime::signal::blocking(|| self.out.flush()).map_err(|e| self.io(e))
    }
}
