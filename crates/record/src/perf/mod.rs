//! `tmetric record`'s default format: a perf.data file (or pipe, `-o -`) as `perf stat
//! record` writes it, so `perf stat report` and `perf script` read it, with tmetric's own
//! data (the JSON-lines record's header, latencies, reads, sample statistics and end line) in
//! records perf skips (docs/record-format.md). The writer ([`PerfRecorder`]), perf's
//! `perf.data`/`perf.data.old` handling ([`create_file`]), the header features from the
//! machine (`features.rs`) and the reading back (`read.rs`).

use std::collections::HashMap;
use std::fs::{File, OpenOptions};
use std::io::{self, BufWriter, IsTerminal, Seek, SeekFrom, Write};
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use tmetric_perfdata::RoundKind;
use tmetric_perfdata::write::{self as pw, Features, Setup, Writer};
use tmetric_runtime::counter::CpuCount;
use tmetric_runtime::{Snapshot, Target};

use crate::format::{Header, Line};
use crate::header::HeaderFacts;
use crate::write::{RecordTo, RunEnd, WriteError, latency_line, read_lines};

mod features;
mod read;

pub use read::{read, read_perf_stat};

/// The first extras line after the header: how perf's numbering maps to tmetric's.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct PerfMap {
    /// Always `perf`.
    t: String,
    /// Per perf attribute, in file order: the header's event (perf orders events by group).
    attrs: Vec<usize>,
    /// Per thread-map entry: the thread of the readings (-1 for a task or CPUs).
    threads: Vec<i32>,
}

/// The destination: a file (seekable, for the header perf rewrites at the end) or standard
/// output (a pipe, never sought).
enum Out {
    File(BufWriter<File>),
    Stdout(io::Stdout),
}

impl Write for Out {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        // A pipe whose reader stopped: a stop signal still ends the run.
        tmetric_runtime::signal::blocking(|| match self {
            Out::File(f) => f.write(buf),
            Out::Stdout(s) => s.write(buf),
        })
    }

    fn flush(&mut self) -> io::Result<()> {
        tmetric_runtime::signal::blocking(|| match self {
            Out::File(f) => f.flush(),
            Out::Stdout(s) => s.flush(),
        })
    }
}

impl Seek for Out {
    fn seek(&mut self, pos: SeekFrom) -> io::Result<u64> {
        match self {
            Out::File(f) => f.seek(pos),
            Out::Stdout(_) => Err(io::Error::new(io::ErrorKind::Unsupported, "a pipe")),
        }
    }
}

/// Creates the perf.data file at `path` as perf does, without its risks: an existing
/// non-empty file is moved to `PATH.old` (replacing one there), a symbolic link is moved
/// rather than followed, and the new file is created afresh, mode 0600. An existing device
/// or FIFO is written in place, as perf would.
pub fn create_file(path: &Path) -> Result<File, WriteError> {
    let shown = || path.display().to_string();
    match std::fs::symlink_metadata(path) {
        Ok(meta) if meta.file_type().is_symlink() || (meta.is_file() && meta.len() > 0) => {
            let mut old = path.as_os_str().to_owned();
            old.push(".old");
            let old = PathBuf::from(old);
            let old_shown = old.display().to_string();
            match std::fs::symlink_metadata(&old) {
                Ok(m) if m.is_dir() => {
                    return Err(WriteError::OldIsDirectory { path: shown(), old: old_shown });
                }
                Ok(_) => std::fs::remove_file(&old)
                    .map_err(|source| WriteError::RemoveOld { old: old_shown.clone(), source })?,
                Err(_) => {}
            }
            std::fs::rename(path, &old).map_err(|source| WriteError::MoveToOld {
                path: shown(),
                old: old_shown,
                source,
            })?;
        }
        Ok(meta) if meta.is_file() => std::fs::remove_file(path)
            .map_err(|source| WriteError::ReplaceEmpty { path: shown(), source })?,
        Ok(meta) if meta.is_dir() => return Err(WriteError::IsDirectory { path: shown() }),
        Ok(meta) if meta.file_type().is_char_device() || meta.file_type().is_fifo() => {
            // A FIFO's open waits for a reader: a stop signal must still end the run.
            return tmetric_runtime::signal::blocking(|| OpenOptions::new().write(true).open(path))
                .map_err(|source| WriteError::Open { path: shown(), source });
        }
        Ok(_) => return Err(WriteError::NotRegular { path: shown() }),
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        Err(source) => return Err(WriteError::Stat { path: shown(), source }),
    }
    OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
        .map_err(|source| WriteError::Create { path: shown(), source })
}

/// A CPU and thread an event counts on, and the id perf knows that counter by.
#[derive(Debug, Clone, Copy)]
struct Place {
    cpu: i32,
    /// The reading's thread (-1 for a task or CPUs).
    thread: i32,
    /// Its index in the thread map (what a STAT record carries).
    thread_index: u32,
    id: u64,
}

/// Writes the perf.data format.
pub struct PerfRecorder {
    name: String,
    writer: Option<Writer<Out>>,
    /// Per header event: the places it counts on, with their perf ids.
    places: Vec<Vec<Place>>,
    /// Per header event: (cpu, thread) -> index into its places.
    index: Vec<HashMap<(i32, i32), usize>>,
    /// Per header event and place: the counts since the start (perf writes them so).
    sums: Vec<Vec<[u64; 3]>>,
    /// Per header event and place: whether it was ever read (only those get STAT records).
    seen: Vec<Vec<bool>>,
    interval: bool,
    features: Features,
    /// Events in perf's (file) order: header event indices.
    order: Vec<usize>,
    /// The header's groups (for the error-bar reads in the extras).
    groups: Vec<Vec<usize>>,
}

/// The header's cpuid in perf's `HEADER_CPUID` spelling: x86 `GenuineIntel,6,143,8`
/// (decimal) from the mapfile's `GenuineIntel-6-8F-8`; others as they are.
pub fn header_cpuid(cpuid: &str) -> String {
    let parts: Vec<&str> = cpuid.split('-').collect();
    if let [vendor, family, model, stepping] = parts.as_slice()
        && let (Ok(f), Ok(m), Ok(s)) = (
            family.parse::<u32>(),
            u32::from_str_radix(model, 16),
            u32::from_str_radix(stepping, 16),
        )
    {
        return format!("{vendor},{f},{m},{s}");
    }
    cpuid.to_string()
}

/// perf.data's `GenuineIntel,6,167,8` as perf's mapfile spells cpuids
/// (`GenuineIntel-6-A7-8`); other spellings unchanged.
pub fn perf_cpuid(cpuid: &str) -> String {
    let parts: Vec<&str> = cpuid.split(',').collect();
    if let [vendor, family, model, stepping] = parts.as_slice()
        && let (Ok(f), Ok(m), Ok(s)) =
            (family.parse::<u32>(), model.parse::<u32>(), stepping.parse::<u32>())
    {
        return format!("{vendor}-{f}-{m:X}-{s:X}");
    }
    cpuid.to_string()
}

/// The counters as perf sees them: perf's events (in group order) with their ids per place,
/// and the groups of several events.
struct Layout {
    events: Vec<pw::Event>,
    groups: Vec<pw::Group>,
    places: Vec<Vec<Place>>,
}

/// perf's events for `header`'s, counted on `cpus` and threads `thread_ids`.
fn layout(
    header: &Header,
    target: &Target,
    cpus: &[i32],
    thread_ids: &[i32],
    pipe: bool,
) -> Layout {
    let on_exec = matches!(target, Target::Task { on_exec: true, .. });
    let mut next_id = 1u64;
    let mut places: Vec<Vec<Place>> = vec![Vec::new(); header.events.len()];
    let mut events = Vec::new();
    let mut groups = Vec::new();
    for group in &header.groups {
        if group.len() > 1 {
            groups.push(pw::Group {
                name: "{anon_group}".into(),
                leader: events.len() as u32,
                members: group.len() as u32,
            });
        }
        for (k, &i) in group.iter().enumerate() {
            let e = &header.events[i];
            // Every place gets an id, also for an event the kernel refused somewhere: it
            // may count on the other CPUs. Places that never read get no STAT record, so
            // perf prints an event that read nowhere `<not supported>`, as its own.
            for &cpu in cpus {
                if cpu >= 0 && e.cpus.as_ref().is_some_and(|m| !m.contains(&(cpu as u32))) {
                    continue;
                }
                for (t, &thread) in thread_ids.iter().enumerate() {
                    places[i].push(Place { cpu, thread, thread_index: t as u32, id: next_id });
                    next_id += 1;
                }
            }
            let clock = e.type_ == 1 && e.config <= 1;
            let mut read_format = pw::FORMAT_TOTAL_TIME_ENABLED | pw::FORMAT_TOTAL_TIME_RUNNING;
            if group.len() > 1 {
                read_format |= pw::FORMAT_ID | pw::FORMAT_GROUP;
            }
            events.push(pw::Event {
                name: e.name.clone(),
                attr: pw::FileAttr {
                    type_: e.type_,
                    config: e.config,
                    config1: e.config1,
                    config2: e.config2,
                    config3: e.config3,
                    // perf stat record leaves `sample_type` 0 in a pipe; `perf script`
                    // refuses a piped event that has one.
                    sample_type: if pipe { 0 } else { pw::SAMPLE_IDENTIFIER },
                    read_format,
                    disabled: k == 0,
                    inherit: true,
                    enable_on_exec: k == 0 && on_exec,
                    exclude_user: e.exclude[0],
                    exclude_kernel: e.exclude[1],
                    exclude_hv: e.exclude[2],
                    exclude_guest: true,
                },
                ids: places[i].iter().map(|p| p.id).collect(),
                // perf counts the clocks in ns and prints them in msec.
                unit: e.unit.clone().or_else(|| clock.then(|| "msec".to_string())),
                scale: e.scale.or_else(|| clock.then_some(1e-6)),
                // A PMU on some CPUs only: the counted ones among them (what perf 6.12
                // keeps of an event's own CPUs).
                cpus: {
                    let own: Vec<i32> = places[i].iter().map(|p| p.cpu).collect();
                    let per_cpu = matches!(target, Target::Cpus(_));
                    (per_cpu && e.cpus.is_some() && own != cpus).then_some(own)
                },
            });
        }
    }
    Layout { events, groups, places }
}

impl PerfRecorder {
    /// Creates the file (or pipe) `to` names for the run `facts` describe, writing perf's
    /// header, attributes and maps and tmetric's `header`.
    pub fn create(
        to: &RecordTo,
        facts: &HeaderFacts<'_>,
        header: Header,
        target: &Target,
        thread_map: Vec<(i32, String)>,
    ) -> Result<PerfRecorder, WriteError> {
        let (threads_setup, thread_ids, cpus): (Vec<(i32, String)>, Vec<i32>, Vec<i32>) =
            match target {
                Target::Task { pid, .. } => (vec![(*pid, String::new())], vec![-1], vec![-1]),
                Target::Cpus(list) => {
                    (vec![(-1, String::new())], vec![-1], list.iter().map(|&c| c as i32).collect())
                }
                Target::Threads(_) => {
                    (thread_map.clone(), thread_map.iter().map(|t| t.0).collect(), vec![-1])
                }
            };
        // perf orders its events group by group; every event is in exactly one group.
        let order: Vec<usize> = header.groups.iter().flatten().copied().collect();
        let Layout { events, groups, places } =
            layout(&header, target, &cpus, &thread_ids, to.to_stdout());
        let setup = Setup {
            threads: threads_setup,
            cpus,
            aggr_mode: facts.aggr_mode,
            interval_ms: facts.interval_ms.unwrap_or(0),
            aggr_level: u64::from(facts.aggr_level),
            scale: tmetric_runtime::counter::scaling(),
        };
        let features = features::machine(facts, &header, groups);
        let (name, mut writer) = if to.to_stdout() {
            let name = "standard output".to_string();
            let stdout = io::stdout();
            if stdout.is_terminal() {
                return Err(WriteError::Terminal);
            }
            let writer = Writer::pipe(Out::Stdout(stdout), events, &setup);
            (name.clone(), writer.map_err(|source| WriteError::WritePerf { name, source })?)
        } else {
            let name = to.path.display().to_string();
            let file = create_file(&to.path)?;
            let writer = Writer::file(Out::File(BufWriter::new(file)), events, &setup);
            (name.clone(), writer.map_err(|source| WriteError::WritePerf { name, source })?)
        };
        let map = PerfMap { t: "perf".into(), attrs: order.clone(), threads: thread_ids };
        let mut text = serde_json::to_string(&header).expect("a header serializes");
        text.push('\n');
        text.push_str(&serde_json::to_string(&map).expect("the map serializes"));
        text.push('\n');
        writer
            .extra(text.as_bytes())
            .map_err(|source| WriteError::WritePerf { name: name.clone(), source })?;
        let sums = places.iter().map(|p| vec![[0u64; 3]; p.len()]).collect();
        let seen = places.iter().map(|p| vec![false; p.len()]).collect();
        let index = places
            .iter()
            .map(|p| p.iter().enumerate().map(|(k, p)| ((p.cpu, p.thread), k)).collect())
            .collect();
        Ok(PerfRecorder {
            name,
            writer: Some(writer),
            places,
            index,
            sums,
            seen,
            interval: facts.interval_ms.is_some(),
            features,
            order,
            groups: header.groups,
        })
    }

    fn io<T>(&self, result: io::Result<T>) -> Result<T, WriteError> {
        result.map_err(|source| WriteError::WritePerf { name: self.name.clone(), source })
    }

    fn writer(&mut self) -> &mut Writer<Out> {
        self.writer.as_mut().expect("the writer lives until finish")
    }

    /// Where a reading goes: its place among the event's ids.
    fn place(&self, event: usize, c: &CpuCount) -> Result<usize, WriteError> {
        self.index[event].get(&(c.cpu, c.thread)).copied().ok_or(WriteError::Unannounced {
            event,
            cpu: c.cpu,
            thread: c.thread,
        })
    }

    /// STAT records of `sums`, in perf's event order, for the places read so far.
    fn write_stats(&mut self) -> Result<(), WriteError> {
        let writer = self.writer.as_mut().expect("the writer lives until finish");
        let mut result = Ok(());
        'events: for &event in &self.order {
            for (k, p) in self.places[event].iter().enumerate() {
                if self.seen[event][k] {
                    result = writer.stat(p.id, p.cpu, p.thread_index, self.sums[event][k]);
                    if result.is_err() {
                        break 'events;
                    }
                }
            }
        }
        self.io(result)
    }

    fn extra_line(&mut self, line: &Line) -> Result<(), WriteError> {
        let mut text = serde_json::to_string(line).expect("a record line serializes");
        text.push('\n');
        let r = self.writer().extra(text.as_bytes());
        self.io(r)
    }

    /// One `-I` interval's counts (deltas, added to the sums perf writes) and the retire
    /// latencies its metrics used.
    pub fn interval(
        &mut self,
        n: usize,
        at: Duration,
        counts: &Snapshot,
        latencies: Option<&[(String, f64)]>,
    ) -> Result<(), WriteError> {
        for (event, per) in counts.events.iter().enumerate() {
            for c in per.iter().flatten() {
                let k = self.place(event, c)?;
                self.seen[event][k] = true;
                let sum = &mut self.sums[event][k];
                sum[0] += c.raw.value;
                sum[1] += c.raw.enabled;
                sum[2] += c.raw.running;
            }
        }
        self.write_stats()?;
        let r = self.writer().round(RoundKind::Interval, at.as_nanos() as u64);
        self.io(r)?;
        if let Some(values) = latencies {
            self.extra_line(&latency_line(Some(n as u64), values))?;
        }
        Ok(())
    }

    /// The totals, tmetric's closing extras, and perf's header rewritten with the features.
    pub fn finish(mut self: Box<Self>, end: &RunEnd<'_>) -> Result<(), WriteError> {
        // The totals replace the sums of the intervals (they are the same counts, read once
        // more at the end).
        for (event, per) in end.totals.events.iter().enumerate() {
            for c in per.iter().flatten() {
                let k = self.place(event, c)?;
                self.seen[event][k] = true;
                self.sums[event][k] = [c.raw.value, c.raw.enabled, c.raw.running];
            }
        }
        self.write_stats()?;
        // perf closes the totals with a final round only without -I; with -I they follow
        // the last interval unrounded.
        if !self.interval {
            let r = self.writer().round(RoundKind::Final, end.elapsed.as_nanos() as u64);
            self.io(r)?;
        }
        if let Some(values) = end.latencies {
            self.extra_line(&latency_line(None, values))?;
        }
        // perf has no place for the error-bar reads: tmetric's extras keep them.
        for line in read_lines(&self.groups, end.reads, end.read_intervals) {
            self.extra_line(&line)?;
        }
        for line in end.tpebs_lines() {
            self.extra_line(&line)?;
        }
        self.extra_line(&end.end_line())?;
        let writer = self.writer.take().expect("the writer lives until finish");
        let result = if writer.is_pipe() {
            writer.finish_pipe().map(drop)
        } else {
            writer.finish_file(&self.features).map(drop)
        };
        self.io(result)
    }
}
