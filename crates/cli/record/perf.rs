//! `tmetric record`'s default format: a perf.data file (or pipe, `-o -`) as `perf stat
//! record` writes it, so `perf stat report` and `perf script` read it, with tmetric's own
//! data (the JSON-lines record's header, latencies, sample statistics and end line) in records
//! perf skips (docs/record-format.md). Owns the choice of format ([`RecordTo`]), the writer
//! stat's run loop calls ([`RecordSink`]), the machine facts of the file's header features,
//! and the reading back into a [`Recording`] for `report`.

use std::collections::HashMap;
use std::fs::{File, OpenOptions};
use std::io::{self, BufWriter, IsTerminal, Seek, SeekFrom, Write};
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, bail};
use serde::{Deserialize, Serialize};
use tmetric_perfstat::perfdata::write::{self as pw, Features, Setup, Writer};
use tmetric_perfstat::perfdata::{PerfData, RoundKind, StatValue};
use tmetric_runtime::counter::CpuCount;
use tmetric_runtime::{RawCount, Snapshot, Target};

use super::{FORMAT, Header, HeaderFacts, Interval, Line, Recorder, Recording, RunEnd, VERSION};

/// The file formats of `tmetric record`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
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
    ) -> anyhow::Result<RecordSink> {
        let header = super::header(facts);
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
    ) -> anyhow::Result<()> {
        match self {
            RecordSink::Jsonl(r) => r.interval(n, at, length, counts, latencies),
            RecordSink::Perf(r) => r.interval(n, at, counts, latencies),
        }
    }

    /// The totals and the end of the run.
    pub fn finish(self, end: &RunEnd<'_>) -> anyhow::Result<()> {
        match self {
            RecordSink::Jsonl(r) => r.finish(end),
            RecordSink::Perf(r) => r.finish(end),
        }
    }
}

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
        match self {
            Out::File(f) => f.write(buf),
            Out::Stdout(s) => s.write(buf),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        match self {
            Out::File(f) => f.flush(),
            Out::Stdout(s) => s.flush(),
        }
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
pub fn create_file(path: &Path) -> anyhow::Result<File> {
    let shown = path.display();
    match std::fs::symlink_metadata(path) {
        Ok(meta) if meta.file_type().is_symlink() || (meta.is_file() && meta.len() > 0) => {
            let mut old = path.as_os_str().to_owned();
            old.push(".old");
            let old = PathBuf::from(old);
            match std::fs::symlink_metadata(&old) {
                Ok(m) if m.is_dir() => bail!(
                    "cannot move {shown} to {}: that is a directory; remove it or give another -o",
                    old.display()
                ),
                Ok(_) => std::fs::remove_file(&old)
                    .with_context(|| format!("cannot remove the old {}", old.display()))?,
                Err(_) => {}
            }
            std::fs::rename(path, &old)
                .with_context(|| format!("cannot move {shown} to {}", old.display()))?;
        }
        Ok(meta) if meta.is_file() => std::fs::remove_file(path)
            .with_context(|| format!("cannot replace the empty {shown}"))?,
        Ok(meta) if meta.is_dir() => {
            bail!("{shown} is a directory; give the record file with -o FILE")
        }
        Ok(meta) if meta.file_type().is_char_device() || meta.file_type().is_fifo() => {
            return OpenOptions::new()
                .write(true)
                .open(path)
                .with_context(|| format!("cannot open {shown}"));
        }
        Ok(_) => bail!("{shown} is not a regular file; give the record file with -o FILE"),
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        Err(e) => return Err(e).with_context(|| format!("cannot look at {shown}")),
    }
    OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
        .with_context(|| format!("cannot create the record file {shown}"))
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

impl PerfRecorder {
    fn create(
        to: &RecordTo,
        facts: &HeaderFacts<'_>,
        header: Header,
        target: &Target,
        thread_map: Vec<(i32, String)>,
    ) -> anyhow::Result<PerfRecorder> {
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
        let header_groups = header.groups.clone();
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
                for &cpu in &cpus {
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
                    attr: pw::Attr {
                        type_: e.type_,
                        config: e.config,
                        config1: e.config1,
                        config2: e.config2,
                        config3: e.config3,
                        // perf stat record leaves `sample_type` 0 in a pipe; `perf script`
                        // refuses a piped event that has one.
                        sample_type: if to.to_stdout() { 0 } else { pw::SAMPLE_IDENTIFIER },
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
        let args = facts.args;
        let aggr_mode = if args.no_aggr {
            pw::aggr::NONE
        } else if args.per_core {
            pw::aggr::CORE
        } else if args.per_die {
            pw::aggr::DIE
        } else if args.per_socket {
            pw::aggr::SOCKET
        } else if args.per_thread {
            pw::aggr::THREAD
        } else {
            pw::aggr::GLOBAL
        };
        let setup = Setup {
            threads: threads_setup,
            cpus,
            aggr_mode,
            interval_ms: args.interval.unwrap_or(0),
            aggr_level: 0,
        };
        let features = machine_features(facts, &header, groups);
        let name;
        let mut writer = if to.to_stdout() {
            name = "standard output".to_string();
            let stdout = io::stdout();
            if stdout.is_terminal() {
                bail!(
                    "-o -: standard output is a terminal; pipe it (`| perf stat report -i -`) or redirect it to a file"
                );
            }
            Writer::pipe(Out::Stdout(stdout), events, &setup)
        } else {
            name = to.path.display().to_string();
            let file = create_file(&to.path)?;
            Writer::file(Out::File(BufWriter::new(file)), events, &setup)
        }
        .with_context(|| format!("cannot write the record to {name}"))?;
        let map = PerfMap { t: "perf".into(), attrs: order.clone(), threads: thread_ids.clone() };
        let mut text = serde_json::to_string(&header).expect("a header serializes");
        text.push('\n');
        text.push_str(&serde_json::to_string(&map).expect("the map serializes"));
        text.push('\n');
        writer
            .extra(text.as_bytes())
            .with_context(|| format!("cannot write the record to {name}"))?;
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
            interval: args.interval.is_some(),
            features,
            order,
            groups: header_groups,
        })
    }

    fn io<T>(&self, result: io::Result<T>) -> anyhow::Result<T> {
        result.with_context(|| format!("cannot write the record to {}", self.name))
    }

    fn writer(&mut self) -> &mut Writer<Out> {
        self.writer.as_mut().expect("the writer lives until finish")
    }

    /// Where a reading goes: its place among the event's ids.
    fn place(&self, event: usize, c: &CpuCount) -> anyhow::Result<usize> {
        self.index[event].get(&(c.cpu, c.thread)).copied().with_context(|| {
            format!(
                "a reading of event {event} on CPU {} thread {} that the record did not announce",
                c.cpu, c.thread
            )
        })
    }

    /// STAT records of `sums`, in perf's event order, for the places read so far.
    fn write_stats(&mut self) -> anyhow::Result<()> {
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

    fn extra_line(&mut self, line: &Line) -> anyhow::Result<()> {
        let mut text = serde_json::to_string(line).expect("a record line serializes");
        text.push('\n');
        let r = self.writer().extra(text.as_bytes());
        self.io(r)
    }

    fn interval(
        &mut self,
        n: usize,
        at: Duration,
        counts: &Snapshot,
        latencies: Option<&[(String, f64)]>,
    ) -> anyhow::Result<()> {
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
            self.extra_line(&Line::Latency {
                n: Some(n as u64),
                values: values.iter().cloned().collect(),
            })?;
        }
        Ok(())
    }

    fn finish(mut self: Box<Self>, end: &RunEnd<'_>) -> anyhow::Result<()> {
        let RunEnd { totals, elapsed, rusage, exit, intervals, samples, latencies, reads } = *end;
        // The totals replace the sums of the intervals (they are the same counts, read once
        // more at the end).
        for (event, per) in totals.events.iter().enumerate() {
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
            let r = self.writer().round(RoundKind::Final, elapsed.as_nanos() as u64);
            self.io(r)?;
        }
        if let Some(values) = latencies {
            self.extra_line(&Line::Latency { n: None, values: values.iter().cloned().collect() })?;
        }
        // perf has no place for the error-bar reads: tmetric's extras keep them.
        for line in super::read_lines(&self.groups, reads) {
            self.extra_line(&line)?;
        }
        for r in samples {
            let t = &r.total;
            self.extra_line(&Line::Tpebs {
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
        self.extra_line(&Line::End {
            elapsed_ns: elapsed.as_nanos() as u64,
            user_ns: rusage.map(|r| r.0.as_nanos() as u64),
            sys_ns: rusage.map(|r| r.1.as_nanos() as u64),
            exit,
            intervals: intervals as u64,
        })?;
        let writer = self.writer.take().expect("the writer lives until finish");
        let result = if writer.is_pipe() {
            writer.finish_pipe().map(drop)
        } else {
            writer.finish_file(&self.features).map(drop)
        };
        self.io(result)
    }
}

/// A file's first line, trimmed, or `None`.
fn read_line(path: &Path) -> Option<String> {
    let text = std::fs::read_to_string(path).ok()?;
    Some(text.lines().next()?.trim().to_string()).filter(|s| !s.is_empty())
}

/// A CPU list as the kernel prints it (`0-3,8`).
fn cpu_list(cpus: &[u32]) -> String {
    let mut out: Vec<String> = Vec::new();
    let mut i = 0;
    while i < cpus.len() {
        let start = cpus[i];
        let mut end = start;
        while i + 1 < cpus.len() && cpus[i + 1] == end + 1 {
            i += 1;
            end = cpus[i];
        }
        out.push(if start == end { start.to_string() } else { format!("{start}-{end}") });
        i += 1;
    }
    out.join(",")
}

/// The header features, from the machine: the host's name, kernel and memory, and the
/// counted machine's CPUs, topology, caches and PMUs from its sysfs tree (the simulated one
/// with `--pmu-sim`).
fn machine_features(facts: &HeaderFacts<'_>, header: &Header, groups: Vec<pw::Group>) -> Features {
    let sys = facts.sysfs.root();
    let cpu_dir = sys.join("devices/system/cpu");
    let online = &header.topology.cpus;
    let present = read_line(&cpu_dir.join("present"))
        .and_then(|t| tmetric_runtime::sysfs::parse_cpu_list(&t))
        .unwrap_or_else(|| online.clone());
    let avail = present.iter().chain(online).max().map_or(0, |&m| m + 1);
    let cpuid = header.cpuid.as_deref().map(header_cpuid);
    let arch = match &header.cpuid {
        Some(id) if id.starts_with("GenuineIntel") || id.starts_with("AuthenticAMD") => {
            "x86_64".to_string()
        }
        Some(id) if id.starts_with("0x") => "aarch64".to_string(),
        _ => std::env::consts::ARCH.to_string(),
    };
    let cpuinfo = std::fs::read_to_string(facts.proc_root.join("cpuinfo")).unwrap_or_default();
    let cpu_desc = cpuinfo.lines().find_map(|l| {
        let (k, v) = l.split_once(':')?;
        (k.trim() == "model name").then(|| v.trim().to_string())
    });
    let total_mem_kb = std::fs::read_to_string("/proc/meminfo").ok().and_then(|t| {
        t.lines()
            .find_map(|l| l.strip_prefix("MemTotal:"))
            .and_then(|v| v.split_whitespace().next()?.parse().ok())
    });
    let mut cmdline: Vec<String> = std::env::args().collect();
    if let (Some(first), Ok(exe)) = (cmdline.first_mut(), std::env::current_exe()) {
        *first = exe.display().to_string();
    }
    // Topology from the places the header recorded (every online CPU).
    let places = &header.topology.places;
    let group_by = |key: &dyn Fn(&[u32; 4]) -> Vec<u32>| -> Vec<String> {
        let mut keys: Vec<(Vec<u32>, Vec<u32>)> = Vec::new();
        for p in places {
            let k = key(p);
            match keys.iter_mut().find(|(x, _)| *x == k) {
                Some((_, cpus)) => cpus.push(p[0]),
                None => keys.push((k, vec![p[0]])),
            }
        }
        keys.into_iter()
            .map(|(_, mut cpus)| {
                cpus.sort_unstable();
                cpu_list(&cpus)
            })
            .collect()
    };
    let topology = pw::CpuTopology {
        package_cpus: group_by(&|p| vec![p[1]]),
        core_cpus: group_by(&|p| vec![p[1], p[2], p[3]]),
        die_cpus: group_by(&|p| vec![p[1], p[2]]),
        ids: (0..avail)
            .map(|cpu| match places.iter().find(|p| p[0] == cpu) {
                Some(p) => (p[3] as i32, p[1] as i32, p[2] as i32),
                None => (-1, -1, -1),
            })
            .collect(),
    };
    let pmus = facts.sysfs.pmu_names();
    let pmu_dir = facts.sysfs.pmu_devices();
    let pmu_mappings: Vec<(u32, String)> = pmus
        .iter()
        .filter_map(|p| Some((read_line(&pmu_dir.join(p).join("type"))?.parse().ok()?, p.clone())))
        .collect();
    let caps = |pmu: &str| -> Option<Vec<(String, String)>> {
        let mut caps: Vec<(String, String)> = std::fs::read_dir(pmu_dir.join(pmu).join("caps"))
            .ok()?
            .flatten()
            .filter_map(|e| {
                let value = read_line(&e.path()).unwrap_or_default();
                Some((e.file_name().into_string().ok()?, value))
            })
            .collect();
        caps.sort();
        (!caps.is_empty()).then_some(caps)
    };
    let hybrid: Vec<(String, String)> = ["cpu_core", "cpu_atom"]
        .iter()
        .filter_map(|p| Some((p.to_string(), read_line(&pmu_dir.join(p).join("cpus"))?)))
        .collect();
    let pmu_caps: Vec<(String, Vec<(String, String)>)> =
        pmus.iter().filter(|p| *p != "cpu").filter_map(|p| Some((p.clone(), caps(p)?))).collect();
    Features {
        hostname: read_line(Path::new("/proc/sys/kernel/hostname")),
        os_release: read_line(Path::new("/proc/sys/kernel/osrelease")),
        version: Some(format!("tmetric {}", env!("CARGO_PKG_VERSION"))),
        arch: Some(arch),
        nr_cpus: Some((avail, online.len() as u32)),
        cpu_desc,
        cpuid,
        total_mem_kb,
        cmdline: Some(cmdline),
        topology: Some(topology),
        numa: numa_nodes(sys),
        pmu_mappings: Some(pmu_mappings),
        groups,
        caches: caches(&cpu_dir, online),
        cpu_pmu_caps: caps("cpu"),
        hybrid: (!hybrid.is_empty()).then_some(hybrid),
        pmu_caps: Some(pmu_caps),
    }
}

/// `devices/system/node/node*`: each node's CPUs and memory.
fn numa_nodes(sys: &Path) -> Option<Vec<pw::NumaNode>> {
    let dir = sys.join("devices/system/node");
    let mut nodes = Vec::new();
    for entry in std::fs::read_dir(&dir).ok()?.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let Some(node) = name.strip_prefix("node").and_then(|n| n.parse::<u32>().ok()) else {
            continue;
        };
        let meminfo = std::fs::read_to_string(entry.path().join("meminfo")).unwrap_or_default();
        let field = |key: &str| -> u64 {
            meminfo
                .lines()
                .find_map(|l| {
                    let rest = l.split_once(key)?.1.trim_start_matches(':');
                    rest.split_whitespace().next()?.parse().ok()
                })
                .unwrap_or(0)
        };
        nodes.push(pw::NumaNode {
            node,
            mem_total_kb: field("MemTotal"),
            mem_free_kb: field("MemFree"),
            cpus: read_line(&entry.path().join("cpulist")).unwrap_or_default(),
        });
    }
    nodes.sort_by_key(|n| n.node);
    (!nodes.is_empty()).then_some(nodes)
}

/// Every distinct cache of the online CPUs (`cache/index*`), by level and type.
fn caches(cpu_dir: &Path, online: &[u32]) -> Option<Vec<pw::Cache>> {
    let mut out: Vec<pw::Cache> = Vec::new();
    for cpu in online {
        let Ok(entries) = std::fs::read_dir(cpu_dir.join(format!("cpu{cpu}/cache"))) else {
            continue;
        };
        let mut dirs: Vec<PathBuf> = entries
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.file_name().is_some_and(|n| n.to_string_lossy().starts_with("index")))
            .collect();
        dirs.sort();
        for d in dirs {
            let num = |f: &str| read_line(&d.join(f)).and_then(|t| t.parse::<u32>().ok());
            let (Some(level), Some(type_), Some(cpus)) =
                (num("level"), read_line(&d.join("type")), read_line(&d.join("shared_cpu_list")))
            else {
                continue;
            };
            let cache = pw::Cache {
                level,
                line_size: num("coherency_line_size").unwrap_or(0),
                sets: num("number_of_sets").unwrap_or(0),
                ways: num("ways_of_associativity").unwrap_or(0),
                type_,
                size: read_line(&d.join("size")).unwrap_or_default(),
                cpus,
            };
            if !out
                .iter()
                .any(|c| c.level == cache.level && c.type_ == cache.type_ && c.cpus == cache.cpus)
            {
                out.push(cache);
            }
        }
    }
    out.sort_by(|a, b| (a.level, &a.type_).cmp(&(b.level, &b.type_)));
    (!out.is_empty()).then_some(out)
}

/// Reads tmetric's perf.data back: the extras give the header and what perf has no place
/// for, the STAT records the counts. `name` names the input in errors.
pub fn read(name: &str, data: &PerfData) -> anyhow::Result<Recording> {
    let text = std::str::from_utf8(&data.extras)
        .map_err(|e| anyhow::anyhow!("{name}: tmetric's data in the file is not UTF-8 ({e})"))?;
    let mut lines = text.lines().enumerate();
    let where_ = |i: usize| format!("{name}: tmetric's data, line {}", i + 1);
    let (_, first) = lines.next().context("no header")?;
    let probe: serde_json::Value = serde_json::from_str(first)
        .map_err(|e| anyhow::anyhow!("{}: not a tmetric record header ({e})", where_(0)))?;
    if probe.get("format").and_then(|f| f.as_str()) != Some(FORMAT) {
        bail!("{}: not a tmetric record header (no \"format\": \"{FORMAT}\")", where_(0));
    }
    match probe.get("version").and_then(|v| v.as_u64()) {
        Some(v) if v == u64::from(VERSION) => {}
        v => bail!(
            "{}: record format version {}, written by tmetric {}; this tmetric ({}) reads version {VERSION}",
            where_(0),
            v.map_or("?".to_string(), |v| v.to_string()),
            probe.get("tmetric").and_then(|t| t.as_str()).unwrap_or("?"),
            env!("CARGO_PKG_VERSION")
        ),
    }
    let header: Header = serde_json::from_value(probe)
        .map_err(|e| anyhow::anyhow!("{}: a bad header: {e}", where_(0)))?;
    let (i, second) = lines.next().with_context(|| format!("{}: no event map", where_(1)))?;
    let map: PerfMap = serde_json::from_str(second)
        .map_err(|e| anyhow::anyhow!("{}: not tmetric's event map ({e})", where_(i)))?;
    let specs = header.events.len();
    let mut sorted = map.attrs.clone();
    sorted.sort_unstable();
    if sorted != (0..specs).collect::<Vec<_>>() || map.attrs.len() != data.events.len() {
        bail!(
            "{name}: the file has {} events and tmetric's header {specs}, mapped as {:?}: the file was changed after it was written",
            data.events.len(),
            map.attrs
        );
    }
    let snapshot = |values: &[StatValue]| -> anyhow::Result<Snapshot> {
        let mut events: Vec<Option<Vec<CpuCount>>> = vec![None; specs];
        for v in values {
            let spec = map.attrs[v.event];
            let thread = *map.threads.get(v.thread as usize).with_context(|| {
                format!("{name}: a reading names thread {}, beyond the thread map", v.thread)
            })?;
            let raw = RawCount { value: v.value, enabled: v.enabled, running: v.running };
            events[spec].get_or_insert_with(Vec::new).push(CpuCount { cpu: v.cpu, thread, raw });
        }
        Ok(Snapshot { events })
    };
    let mut rec = Recording {
        header,
        intervals: Vec::new(),
        totals: Snapshot { events: vec![None; specs] },
        final_latency: None,
        tpebs: Vec::new(),
        elapsed: Duration::ZERO,
        rusage: None,
        reads: Vec::new(),
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
        let line: Line = serde_json::from_str(text)
            .map_err(|e| anyhow::anyhow!("{}: not a record line ({e})", where_(i)))?;
        match line {
            Line::Latency { n: Some(n), values } => {
                match rec.intervals.iter_mut().find(|x| x.n == n) {
                    Some(x) => x.latency = Some(values),
                    None => bail!("{}: latencies for interval {n}, which has no counts", where_(i)),
                }
            }
            Line::Latency { n: None, values } => rec.final_latency = Some(values),
            line @ Line::Tpebs { .. } => rec.tpebs.push(line),
            Line::Read { n, group, cpu, thread, counts } => {
                if rec.header.system_wide
                    && cpu >= 0
                    && !rec.header.topology.cpus.contains(&(cpu as u32))
                {
                    bail!("{}: a read on CPU {cpu}, which the topology does not list", where_(i));
                }
                rec.add_read(n, group, (cpu, thread), &counts)
                    .map_err(|e| anyhow::anyhow!("{}: {e}", where_(i)))?;
            }
            Line::End { elapsed_ns, user_ns, sys_ns, intervals, .. } => {
                if intervals != rec.intervals.len() as u64 {
                    bail!(
                        "{}: the run had {intervals} intervals but the file holds {}: it was cut or changed",
                        where_(i),
                        rec.intervals.len()
                    );
                }
                rec.elapsed = Duration::from_nanos(elapsed_ns);
                rec.rusage = user_ns
                    .zip(sys_ns)
                    .map(|(u, s)| (Duration::from_nanos(u), Duration::from_nanos(s)));
                ended = true;
            }
            Line::Interval { .. } | Line::Final { .. } => bail!(
                "{}: a counts line, which a perf.data record keeps in perf's STAT records",
                where_(i)
            ),
        }
    }
    if !ended {
        bail!(
            "{name}: the record is truncated: tmetric's end line is missing (the run that wrote it did not finish)"
        );
    }
    Ok(rec)
}
