//! perf.data read back: tmetric's files into a [`Recording`] (the extras give the header and
//! what perf has no place for, perf's STAT records the counts), and the counts of the files
//! `perf stat record` writes ([`read_perf_stat`]).

use std::time::Duration;

use tmetric_perfdata::{PerfData, RoundKind, StatValue};
use tmetric_runtime::counter::CpuCount;
use tmetric_runtime::{RawCount, Snapshot};

use super::PerfMap;
use crate::error::{At, Kind, ReadError};
use crate::format::Line;
use crate::read::{Interval, PerfFile, Recording, header};

/// Reads tmetric's perf.data back; `name` names the input in errors.
pub fn read(name: &str, data: &PerfData) -> Result<Recording, ReadError> {
    let err = |at: At, kind: Kind| ReadError::new(name, at, kind);
    let text = std::str::from_utf8(&data.extras).map_err(|e| err(At::File, Kind::NotUtf8(e)))?;
    let mut lines = text.lines().enumerate();
    let (_, first) = lines.next().ok_or_else(|| err(At::Extras(1), Kind::NoHeader))?;
    let mut rec = Recording::new(header(first).map_err(|kind| err(At::Extras(1), kind))?);
    rec.perf = Some(PerfFile {
        aggr: data.aggregation(),
        aggr_level: data.aggr_level,
        pipe: data.pipe,
        scaled: data.scale != Some(0),
    });
    let (i, second) = lines.next().ok_or_else(|| err(At::Extras(2), Kind::NoMap))?;
    let map: PerfMap =
        serde_json::from_str(second).map_err(|e| err(At::Extras(i + 1), Kind::NotMap(e)))?;
    let specs = rec.header.events.len();
    let mut sorted = map.attrs.clone();
    sorted.sort_unstable();
    if sorted != (0..specs).collect::<Vec<_>>() || map.attrs.len() != data.events.len() {
        let kind = Kind::MapMismatch { file: data.events.len(), header: specs, attrs: map.attrs };
        return Err(err(At::File, kind));
    }
    let snapshot = |values: &[StatValue]| -> Result<Snapshot, ReadError> {
        let mut events: Vec<Option<Vec<CpuCount>>> = vec![None; specs];
        for v in values {
            let spec = map.attrs[v.event];
            let thread = *map
                .threads
                .get(v.thread as usize)
                .ok_or_else(|| err(At::File, Kind::ThreadIndex { index: v.thread }))?;
            let raw = RawCount { value: v.value, enabled: v.enabled, running: v.running };
            events[spec].get_or_insert_with(Vec::new).push(CpuCount { cpu: v.cpu, thread, raw });
        }
        Ok(Snapshot { events })
    };
    let mut previous = Snapshot { events: vec![None; specs] };
    let mut previous_at = 0u64;
    let mut totals = None;
    for round in &data.rounds {
        let now = snapshot(&round.values)?;
        match round.kind {
            RoundKind::Interval => {
                rec.intervals.push(Interval {
                    n: rec.intervals.len() as u64 + 1,
                    at: Duration::from_nanos(round.time_ns),
                    length: Duration::from_nanos(round.time_ns.saturating_sub(previous_at)),
                    counts: now.since(&previous),
                    latency: None,
                });
                previous_at = round.time_ns;
                previous = now;
            }
            RoundKind::Final => totals = Some(now),
        }
    }
    rec.totals = match totals {
        Some(t) => t,
        None => snapshot(&data.unrounded)?,
    };
    let mut ended = false;
    for (i, text) in lines {
        if text.trim().is_empty() {
            continue;
        }
        let at = At::Extras(i + 1);
        if ended {
            return Err(err(at, Kind::AfterEnd));
        }
        ended = extra(&mut rec, text).map_err(|kind| err(at, kind))?;
    }
    if !ended {
        return Err(err(At::File, Kind::NoEnd));
    }
    Ok(rec)
}

/// Takes one line of tmetric's extras after the event map; true for the `end` line.
fn extra(rec: &mut Recording, text: &str) -> Result<bool, Kind> {
    let line: Line = serde_json::from_str(text).map_err(Kind::NotLine)?;
    match line {
        Line::Latency { n: Some(n), values } => match rec.intervals.iter_mut().find(|x| x.n == n) {
            Some(x) => x.latency = Some(values),
            None => return Err(Kind::LatencyInterval { n }),
        },
        Line::Latency { n: None, values } => rec.final_latency = Some(values),
        line @ Line::Tpebs { .. } => rec.tpebs.push(line),
        Line::Read { n, group, cpu, thread, counts, interval } => {
            rec.check_cpu(cpu)?;
            rec.add_read(n, group, (cpu, thread), &counts, interval)?;
        }
        Line::End { elapsed_ns, user_ns, sys_ns, intervals, .. } => {
            rec.end(elapsed_ns, user_ns, sys_ns, intervals)?;
            return Ok(true);
        }
        Line::Interval { .. } | Line::Final { .. } => return Err(Kind::CountsLine),
    }
    Ok(false)
}

/// The counts of a perf.data file `perf stat record` wrote.
#[derive(Debug, Clone)]
pub struct PerfStatCounts {
    /// The `-I` intervals (perf stores them cumulative; these are the changes).
    pub intervals: Vec<Interval>,
    /// The totals, when the file has them.
    pub totals: Option<Snapshot>,
    /// The run's length (the final round's time; zero without one).
    pub elapsed: Duration,
    /// The file has STAT records but no `STAT_ROUND`: the totals' time is unknown.
    pub no_round: bool,
}

/// The counts of `data`, a file `perf stat record` wrote: readings per event, CPU by CPU
/// (threads summed, as perf aggregates them).
pub fn read_perf_stat(data: &PerfData) -> PerfStatCounts {
    let snapshot = |values: &[StatValue]| -> Snapshot {
        let mut events: Vec<Option<Vec<CpuCount>>> = vec![None; data.events.len()];
        for v in values {
            let per = events[v.event].get_or_insert_with(Vec::new);
            let raw = RawCount { value: v.value, enabled: v.enabled, running: v.running };
            match per.iter_mut().find(|c| c.cpu == v.cpu) {
                Some(c) => {
                    // Saturating: a damaged file's sums must not wrap (or abort).
                    c.raw.value = c.raw.value.saturating_add(raw.value);
                    c.raw.enabled = c.raw.enabled.saturating_add(raw.enabled);
                    c.raw.running = c.raw.running.saturating_add(raw.running);
                }
                None => per.push(CpuCount { cpu: v.cpu, thread: -1, raw }),
            }
        }
        Snapshot { events }
    };
    let mut counts = PerfStatCounts {
        intervals: Vec::new(),
        totals: None,
        elapsed: Duration::ZERO,
        no_round: false,
    };
    let mut previous = Snapshot { events: vec![None; data.events.len()] };
    let mut previous_ns = 0u64;
    for round in &data.rounds {
        let now = snapshot(&round.values);
        match round.kind {
            // Interval records hold counts since the start: the change is printed.
            RoundKind::Interval => {
                counts.intervals.push(Interval {
                    n: counts.intervals.len() as u64 + 1,
                    at: Duration::from_nanos(round.time_ns),
                    length: Duration::from_nanos(round.time_ns.saturating_sub(previous_ns)),
                    counts: now.since(&previous),
                    latency: None,
                });
                previous = now;
                previous_ns = round.time_ns;
            }
            RoundKind::Final => {
                counts.totals = Some(now);
                counts.elapsed = Duration::from_nanos(round.time_ns);
            }
        }
    }
    if counts.intervals.is_empty() && counts.totals.is_none() {
        // STAT records without a round (a run cut short): totals, time unknown.
        counts.no_round = true;
        counts.totals = Some(snapshot(&data.unrounded));
    }
    counts
}
