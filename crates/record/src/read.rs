//! Reading a record back: [`Recording`], what either format holds, and the JSON-lines reader,
//! which refuses whatever a damaged or joined file shows, naming the line.

use std::collections::{BTreeMap, HashMap};
use std::io::BufRead;
use std::time::Duration;

use tmetric_runtime::counter::CpuCount;
use tmetric_runtime::{RawCount, Snapshot};

use crate::error::{At, Kind, ReadError, Reading};
use crate::format::{FORMAT, Header, Line, VERSION};

/// A record file read back.
#[derive(Debug, Clone)]
pub struct Recording {
    /// The header.
    pub header: Header,
    /// The `-I` intervals, in order.
    pub intervals: Vec<Interval>,
    /// The counts from start to end.
    pub totals: Snapshot,
    /// `--record-tpebs`: the retire latencies the totals' metrics used.
    pub final_latency: Option<BTreeMap<String, f64>>,
    /// `--record-tpebs`: the sample statistics ([`Line::Tpebs`] lines).
    pub tpebs: Vec<Line>,
    /// The run's length.
    pub elapsed: Duration,
    /// The workload's user and system time.
    pub rusage: Option<(Duration, Duration)>,
    /// `--errors`/`-v` at record time: the reads for error bars (cumulative), else empty.
    pub reads: Vec<Snapshot>,
    /// Per read, the `-I` interval it was read inside, where the file says (files written
    /// before it was kept do not).
    pub read_intervals: Vec<Option<u64>>,
    /// A perf.data file: what perf's own records say beyond tmetric's.
    pub perf: Option<PerfFile>,
}

/// What a perf.data record says of itself beyond tmetric's data.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PerfFile {
    /// `STAT_CONFIG`'s aggregation mode (`None`: unset).
    pub aggr: Option<tmetric_perfstat::Aggregation>,
    /// `STAT_CONFIG`'s aggregation level (`--per-cache=L`).
    pub aggr_level: Option<u64>,
    /// Written to a pipe (`-o -`).
    pub pipe: bool,
    /// Counts are scaled for multiplexing (false: recorded with `--no-scale`).
    pub scaled: bool,
}

/// One `-I` interval read back.
#[derive(Debug, Clone)]
pub struct Interval {
    /// Its number, from 1.
    pub n: u64,
    /// When it ended, since the start.
    pub at: Duration,
    /// Its length.
    pub length: Duration,
    /// The counts over it (deltas).
    pub counts: Snapshot,
    /// `--record-tpebs`: the retire latencies its metrics used.
    pub latency: Option<BTreeMap<String, f64>>,
}

impl Recording {
    /// A recording of `header` with nothing read yet.
    pub fn new(header: Header) -> Recording {
        let empty = Snapshot { events: vec![None; header.events.len()] };
        Recording {
            header,
            intervals: Vec::new(),
            totals: empty,
            final_latency: None,
            tpebs: Vec::new(),
            elapsed: Duration::ZERO,
            rusage: None,
            reads: Vec::new(),
            read_intervals: Vec::new(),
            perf: None,
        }
    }

    /// Adds `read` line `n`'s counts of `group` on (`cpu`, `thread`), read inside `-I`
    /// interval `interval`: reads are numbered 1, 2, 3, ... in order, each place once, every
    /// line of a read in the same interval.
    pub fn add_read(
        &mut self,
        n: u64,
        group: usize,
        place: (i32, i32),
        counts: &[Option<[u64; 3]>],
        interval: Option<u64>,
    ) -> Result<(), Kind> {
        let have = self.reads.len() as u64;
        if n == 0 || n > have + 1 || n + 1 < have {
            return Err(Kind::ReadOrder { n, have });
        }
        if n == have + 1 {
            if let (Some(now), Some(Some(last))) = (interval, self.read_intervals.last())
                && now < *last
            {
                return Err(Kind::ReadInterval { n, interval });
            }
            self.reads.push(Snapshot { events: vec![None; self.header.events.len()] });
            self.read_intervals.push(interval);
        } else if self.read_intervals.get(n as usize - 1) != Some(&interval) {
            return Err(Kind::ReadInterval { n, interval });
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
            return Err(Kind::ReadAgain { n, group, place });
        }
        add_counts(snap, &self.header.groups, group, place, counts)
    }

    /// Refuses a CPU below -1, and in a system-wide record one its topology does not list
    /// (`report -A` could not place it).
    pub(crate) fn check_cpu(&self, cpu: i32) -> Result<(), Kind> {
        if cpu < -1 {
            return Err(Kind::NotCpu { cpu });
        }
        let cpus = &self.header.topology.cpus;
        if self.header.system_wide && cpu >= 0 && !cpus.contains(&(cpu as u32)) {
            return Err(Kind::ForeignCpu { cpu, cpus: cpus.clone() });
        }
        Ok(())
    }

    /// Takes an `end` line: the run's length and the workload's times; `intervals` must be
    /// the intervals read.
    pub(crate) fn end(
        &mut self,
        elapsed_ns: u64,
        user_ns: Option<u64>,
        sys_ns: Option<u64>,
        intervals: u64,
    ) -> Result<(), Kind> {
        let read = self.intervals.last().map_or(0, |x| x.n);
        if intervals != read {
            return Err(Kind::EndCount { intervals, read });
        }
        self.elapsed = Duration::from_nanos(elapsed_ns);
        self.rusage =
            user_ns.zip(sys_ns).map(|(u, s)| (Duration::from_nanos(u), Duration::from_nanos(s)));
        Ok(())
    }
}

/// Adds one group line's readings to `snap`.
pub(crate) fn add_counts(
    snap: &mut Snapshot,
    groups: &[Vec<usize>],
    group: usize,
    (cpu, thread): (i32, i32),
    counts: &[Option<[u64; 3]>],
) -> Result<(), Kind> {
    let members = groups.get(group).ok_or(Kind::NoGroup { group, groups: groups.len() })?;
    if members.len() != counts.len() {
        return Err(Kind::Members { group, members: members.len(), counts: counts.len() });
    }
    for (&spec, c) in members.iter().zip(counts) {
        let Some([value, enabled, running]) = *c else { continue };
        if running > enabled {
            return Err(Kind::RunningAboveEnabled { event: spec, running, enabled });
        }
        let raw = RawCount { value, enabled, running };
        let per = snap.events[spec].get_or_insert_with(Vec::new);
        if overflows(per, raw) {
            return Err(Kind::Overflow { event: spec });
        }
        per.push(CpuCount { cpu, thread, raw });
    }
    Ok(())
}

/// Whether adding `raw` to an event's readings `per` makes a sum past 2^64. Every view adds
/// readings up (over CPUs, threads, units), scaled for multiplexing: such sums would wrap
/// into wrong numbers (or abort a debug build). No kernel counts that far; a damaged file does.
fn overflows(per: &[CpuCount], raw: RawCount) -> bool {
    let sum = |f: &dyn Fn(&RawCount) -> u64| -> u128 {
        per.iter().map(|c| u128::from(f(&c.raw))).sum::<u128>() + u128::from(f(&raw))
    };
    // Multiplexed readings scale in f64, as `RawCount::scaled` does before it saturates at
    // u64::MAX; the others add up exactly.
    let multiplexed = |r: &RawCount| r.running > 0 && r.running < r.enabled;
    let readings = || per.iter().map(|c| c.raw).chain(std::iter::once(raw));
    let exact: u128 = readings().filter(|r| !multiplexed(r)).map(|r| u128::from(r.value)).sum();
    let scaled: f64 = readings()
        .filter(multiplexed)
        .map(|r| r.value as f64 * r.enabled as f64 / r.running as f64)
        .sum();
    sum(&|r| r.value) > u128::from(u64::MAX)
        || (scaled > 0.0 && exact as f64 + scaled >= 18_446_744_073_709_551_616.0)
        || sum(&|r| r.enabled) > u128::from(u64::MAX)
        || sum(&|r| r.running) > u128::from(u64::MAX)
}

/// Reads a header line: a tmetric record of a version this build reads, consistent in
/// itself (groups name existing events, every listed CPU placed and every placed CPU listed).
pub(crate) fn header(text: &str) -> Result<Header, Kind> {
    let probe: serde_json::Value = serde_json::from_str(text).map_err(Kind::NotHeader)?;
    if probe.get("format").and_then(|f| f.as_str()) != Some(FORMAT) {
        return Err(Kind::NotTmetric);
    }
    match probe.get("version").and_then(|v| v.as_u64()) {
        Some(v) if v == u64::from(VERSION) => {}
        Some(found) => {
            let writer = probe.get("tmetric").and_then(|t| t.as_str()).unwrap_or("?");
            return Err(Kind::Version { found, writer: writer.to_string() });
        }
        None => return Err(Kind::NoVersion),
    }
    let header: Header = serde_json::from_value(probe).map_err(Kind::BadHeader)?;
    let events = header.events.len();
    if let Some(&event) = header.groups.iter().flatten().find(|&&s| s >= events) {
        return Err(Kind::GroupEvent { event, events });
    }
    let topo = &header.topology;
    let placed: Vec<u32> = topo.places.iter().map(|p| p[0]).collect();
    if let Some(&cpu) = topo.cpus.iter().find(|c| !placed.contains(c)) {
        return Err(Kind::Unplaced { cpu });
    }
    if let Some(&cpu) = placed.iter().find(|c| !topo.cpus.contains(c)) {
        return Err(Kind::Unlisted { cpu });
    }
    Ok(header)
}

/// The stored vintage a header's `field` names exactly (the base when absent): a newer
/// tmetric's vintage is not stood in for by an older one, whose formulas may differ. Checked
/// when the recording is evaluated with its own vintage, not on reading: `--perf-version`
/// evaluates any file with a vintage of the user's choice.
pub(crate) fn stored_vintage(
    field: &'static str,
    version: Option<&str>,
) -> Result<&'static tmetric_catalog::Vintage, Kind> {
    let Some(version) = version else { return Ok(tmetric_catalog::base_vintage()) };
    tmetric_catalog::VINTAGES.iter().find(|v| v.version == version).ok_or_else(|| {
        let stored: Vec<&str> = tmetric_catalog::VINTAGES.iter().map(|v| v.version).collect();
        Kind::UnknownVintage { field, found: version.to_string(), stored: stored.join(", ") }
    })
}

/// Reads a JSON-lines record file; `name` names it in errors (`name:line: what`).
pub fn read_jsonl(name: &str, reader: impl BufRead) -> Result<Recording, ReadError> {
    let mut lines = reader.lines().enumerate();
    let Some((_, first)) = lines.next() else {
        return Err(ReadError::new(name, At::File, Kind::Empty));
    };
    let at_header = |kind| ReadError::new(name, At::Line(1), kind);
    let first = first.map_err(|e| at_header(Kind::Io(e)))?;
    let mut state = Jsonl::new(Recording::new(header(&first).map_err(at_header)?));
    let mut last_line = 1;
    for (i, text) in lines {
        let at = i + 1;
        last_line = at;
        let text = text.map_err(|e| ReadError::new(name, At::Line(at), Kind::Io(e)))?;
        if text.trim().is_empty() {
            continue;
        }
        state.line(at, &text).map_err(|kind| ReadError::new(name, At::Line(at), kind))?;
    }
    if !state.ended {
        return Err(ReadError::new(name, At::Line(last_line), Kind::NoEnd));
    }
    Ok(state.rec)
}

/// A JSON-lines record being read.
struct Jsonl {
    rec: Recording,
    /// Where each reading was given, so a repeated one is an error naming both lines
    /// (summing it would double its counts).
    seen: HashMap<Reading, usize>,
    ended: bool,
}

impl Jsonl {
    fn new(rec: Recording) -> Jsonl {
        Jsonl { rec, seen: HashMap::new(), ended: false }
    }

    fn seen_at(&mut self, reading: Reading, at: usize) -> Result<(), Kind> {
        match self.seen.insert(reading.clone(), at) {
            Some(first) => Err(Kind::Again { reading, first }),
            None => Ok(()),
        }
    }

    /// Takes line `at`.
    fn line(&mut self, at: usize, text: &str) -> Result<(), Kind> {
        if self.ended {
            return Err(Kind::AfterEnd);
        }
        let line: Line = serde_json::from_str(text)
            .map_err(|e| if e.is_eof() { Kind::Truncated(e) } else { Kind::NotLine(e) })?;
        let rec = &mut self.rec;
        match line {
            Line::Interval { n, at_ns, length_ns, group, cpu, thread, counts } => {
                rec.check_cpu(cpu)?;
                let previous = rec.intervals.last().map_or(0, |x| x.n);
                if !(n == previous + 1 || (n == previous && previous > 0)) {
                    return Err(Kind::IntervalOrder { n, previous });
                }
                self.seen_at(Reading::Interval(n, group, cpu, thread), at)?;
                let rec = &mut self.rec;
                if let Some(last) = rec.intervals.last()
                    && last.n != n
                    && Duration::from_nanos(at_ns) < last.at
                {
                    return Err(Kind::IntervalTime {
                        n,
                        at_ns,
                        previous: last.n,
                        previous_ns: last.at.as_nanos() as u64,
                    });
                }
                if rec.intervals.last().is_none_or(|x| x.n != n) {
                    rec.intervals.push(Interval {
                        n,
                        at: Duration::from_nanos(at_ns),
                        length: Duration::from_nanos(length_ns),
                        counts: Snapshot { events: vec![None; rec.header.events.len()] },
                        latency: None,
                    });
                }
                let last = rec.intervals.last_mut().expect("just pushed");
                add_counts(&mut last.counts, &rec.header.groups, group, (cpu, thread), &counts)
            }
            Line::Latency { n: Some(n), values } => {
                self.seen_at(Reading::Latency(Some(n)), at)?;
                match self.rec.intervals.iter_mut().rev().find(|x| x.n == n) {
                    Some(x) => x.latency = Some(values),
                    None => return Err(Kind::LatencyInterval { n }),
                }
                Ok(())
            }
            Line::Latency { n: None, values } => {
                self.seen_at(Reading::Latency(None), at)?;
                self.rec.final_latency = Some(values);
                Ok(())
            }
            Line::Read { n, group, cpu, thread, counts, interval } => {
                rec.check_cpu(cpu)?;
                rec.add_read(n, group, (cpu, thread), &counts, interval)
            }
            Line::Final { group, cpu, thread, counts } => {
                rec.check_cpu(cpu)?;
                self.seen_at(Reading::Final(group, cpu, thread), at)?;
                let rec = &mut self.rec;
                add_counts(&mut rec.totals, &rec.header.groups, group, (cpu, thread), &counts)
            }
            Line::Tpebs { ref event, .. } => {
                self.seen_at(Reading::Tpebs(event.clone()), at)?;
                self.rec.tpebs.push(line);
                Ok(())
            }
            Line::End { elapsed_ns, user_ns, sys_ns, intervals, .. } => {
                rec.end(elapsed_ns, user_ns, sys_ns, intervals)?;
                self.ended = true;
                Ok(())
            }
        }
    }
}
