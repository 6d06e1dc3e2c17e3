//! Writes perf.data files as `perf stat record` (perf 6.12) writes them, so that `perf stat
//! report` and `perf script` read them: a file (header, event ids, attributes, data records,
//! then the feature sections, the header rewritten at the end) or a pipe (`-o -`: a 16-byte
//! header, then attributes, event names and everything else as records, no features).
//!
//! The data records are perf's: `EVENT_UPDATE` (unit, scale, CPUs; names in a pipe),
//! `THREAD_MAP`, `CPU_MAP`, `STAT_CONFIG`, then `STAT` readings closed by `STAT_ROUND`s. Data
//! of the caller's own travels in `HEADER_EVENT_TYPE` records ([`EXTRA_MAGIC`] first): perf
//! 6.1 and 6.12 skip that deprecated record type without a word (`perf_session__process_user_event`
//! returns 0 for it), where an unknown record type stops them, and an unknown feature in a
//! pipe is an error to `perf script`.
//!
//! Two choices keep the files readable by perf 6.1 as well as 6.12: attributes are written
//! with `size` 128 (`PERF_ATTR_SIZE_VER7`) in a file when no event sets `config3` (perf 6.1
//! refuses a file attribute larger than its own 128 bytes; 6.12 reads smaller ones), and
//! `STAT_CONFIG` leaves out the `AGGR_LEVEL` term while it is 0, its default (perf 6.1 warns
//! about a term it does not know). Layouts from Linux 6.12's `tools/perf/util/header.c`,
//! `util/synthetic-events.c` and `tools/lib/perf/include/perf/event.h` (facts only).

use std::io::{self, Seek, SeekFrom, Write};

use super::{
    FEAT_CMDLINE, FEAT_CPUID, FEAT_EVENT_DESC, FEAT_HOSTNAME, FEAT_NRCPUS, FEAT_OSRELEASE,
    FEAT_VERSION, MAGIC, RECORD_CPU_MAP, RECORD_EVENT_UPDATE, RECORD_HEADER_ATTR,
    RECORD_HEADER_EVENT_TYPE, RECORD_STAT, RECORD_STAT_CONFIG, RECORD_STAT_ROUND,
    RECORD_THREAD_MAP, RoundKind,
};

/// The first bytes of every record of the caller's own data (see the module documentation).
pub const EXTRA_MAGIC: &[u8; 8] = b"tmetric\0";

/// `read_format` `PERF_FORMAT_TOTAL_TIME_ENABLED`.
pub const FORMAT_TOTAL_TIME_ENABLED: u64 = 1;
/// `read_format` `PERF_FORMAT_TOTAL_TIME_RUNNING`.
pub const FORMAT_TOTAL_TIME_RUNNING: u64 = 1 << 1;
/// `read_format` `PERF_FORMAT_ID`.
pub const FORMAT_ID: u64 = 1 << 2;
/// `read_format` `PERF_FORMAT_GROUP`.
pub const FORMAT_GROUP: u64 = 1 << 3;
/// `sample_type` `PERF_SAMPLE_IDENTIFIER`, which `perf stat record` sets.
pub const SAMPLE_IDENTIFIER: u64 = 1 << 16;

/// perf's `enum aggr_mode` (6.12 numbering) for `STAT_CONFIG`.
pub mod aggr {
    /// `-A`: per CPU.
    pub const NONE: u64 = 0;
    /// The default: one total.
    pub const GLOBAL: u64 = 1;
    /// `--per-socket`.
    pub const SOCKET: u64 = 2;
    /// `--per-die`.
    pub const DIE: u64 = 3;
    /// `--per-core` (4 in perf 6.1, which had no cluster and cache modes).
    pub const CORE: u64 = 6;
    /// `--per-thread` (5 in perf 6.1).
    pub const THREAD: u64 = 7;
    /// `--per-node`.
    pub const NODE: u64 = 9;
}

const FEAT_ARCH: usize = 6;
const FEAT_CPUDESC: usize = 8;
const FEAT_TOTAL_MEM: usize = 10;
const FEAT_CPU_TOPOLOGY: usize = 13;
const FEAT_NUMA_TOPOLOGY: usize = 14;
const FEAT_PMU_MAPPINGS: usize = 16;
const FEAT_GROUP_DESC: usize = 17;
const FEAT_STAT: usize = 19;
const FEAT_CACHE: usize = 20;
const FEAT_SAMPLE_TIME: usize = 21;
const FEAT_CLOCKID: usize = 23;
const FEAT_COMPRESSED: usize = 27;
const FEAT_CPU_PMU_CAPS: usize = 28;
const FEAT_CLOCK_DATA: usize = 29;
const FEAT_HYBRID_TOPOLOGY: usize = 30;
const FEAT_PMU_CAPS: usize = 31;

/// `PERF_ATTR_SIZE_VER7`: perf 6.1's `perf_event_attr`.
const ATTR_SIZE_VER7: u32 = 128;
/// `PERF_ATTR_SIZE_VER8` (adds `config3`): perf 6.12's.
const ATTR_SIZE_VER8: u32 = 136;
/// `sizeof(struct perf_record_event_update)` with its union: records are this plus the
/// payload, rounded up to 8 bytes.
const EVENT_UPDATE_BASE: usize = 40;
/// The largest record: `perf_event_header.size` is 16 bits.
const MAX_RECORD: usize = u16::MAX as usize & !7;
/// Strings in feature sections are padded to this (`NAME_ALIGN`).
const NAME_ALIGN: usize = 64;

/// The `perf_event_attr` fields `perf stat record` sets.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Attr {
    /// `type`.
    pub type_: u32,
    /// `config`.
    pub config: u64,
    /// `config1`.
    pub config1: u64,
    /// `config2`.
    pub config2: u64,
    /// `config3` (an attribute of 136 bytes when not 0).
    pub config3: u64,
    /// `sample_type` ([`SAMPLE_IDENTIFIER`] for perf stat).
    pub sample_type: u64,
    /// `read_format` (`FORMAT_*`).
    pub read_format: u64,
    /// Group leaders start disabled.
    pub disabled: bool,
    /// Children of the counted task are counted.
    pub inherit: bool,
    /// A task's group leaders start at its `exec`.
    pub enable_on_exec: bool,
    /// `:k`: user mode not counted.
    pub exclude_user: bool,
    /// `:u`: kernel mode not counted.
    pub exclude_kernel: bool,
    /// The hypervisor not counted.
    pub exclude_hv: bool,
    /// Guests not counted (perf's default).
    pub exclude_guest: bool,
}

impl Attr {
    /// The attribute's bytes, `size` of them (128 or 136).
    fn bytes(&self, size: u32) -> Vec<u8> {
        let mut b = vec![0u8; size as usize];
        put_u32(&mut b, 0, self.type_);
        put_u32(&mut b, 4, size);
        put_u64(&mut b, 8, self.config);
        put_u64(&mut b, 24, self.sample_type);
        put_u64(&mut b, 32, self.read_format);
        let bits = [
            (0, self.disabled),
            (1, self.inherit),
            (4, self.exclude_user),
            (5, self.exclude_kernel),
            (6, self.exclude_hv),
            (12, self.enable_on_exec),
            (20, self.exclude_guest),
        ];
        let flags = bits.iter().filter(|(_, on)| *on).fold(0u64, |f, (bit, _)| f | 1 << bit);
        put_u64(&mut b, 40, flags);
        put_u64(&mut b, 56, self.config1);
        put_u64(&mut b, 64, self.config2);
        if size >= ATTR_SIZE_VER8 {
            put_u64(&mut b, 128, self.config3);
        }
        b
    }
}

/// One event (perf's evsel): its attribute, the ids its `STAT` records name it by (one per
/// CPU and thread it was opened on; none when it could not be opened, which perf prints as
/// `<not supported>`), and what perf keeps beside the attribute.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Event {
    /// The name perf prints (`EVENT_DESC`, or `EVENT_UPDATE` in a pipe).
    pub name: String,
    /// The attribute.
    pub attr: Attr,
    /// The ids its readings carry, unique over all events.
    pub ids: Vec<u64>,
    /// `EVENT_UPDATE` unit (`msec`), when not empty.
    pub unit: Option<String>,
    /// `EVENT_UPDATE` scale, when not 1.
    pub scale: Option<f64>,
    /// `EVENT_UPDATE` CPUs: the PMU's own CPUs when they differ from the CPU map.
    pub cpus: Option<Vec<i32>>,
}

/// The maps and configuration written before the readings.
#[derive(Debug, Clone, PartialEq)]
pub struct Setup {
    /// `THREAD_MAP`: (pid, comm); `[(-1, "")]` for CPUs.
    pub threads: Vec<(i32, String)>,
    /// `CPU_MAP`; `[-1]` for a task.
    pub cpus: Vec<i32>,
    /// `STAT_CONFIG` aggregation mode ([`aggr`]).
    pub aggr_mode: u64,
    /// `STAT_CONFIG` interval in ms (0: none).
    pub interval_ms: u64,
    /// `STAT_CONFIG` aggregation level (`--per-cache`); 0 leaves the term out.
    pub aggr_level: u64,
}

/// `HEADER_CPU_TOPOLOGY`: the CPU lists of each package, core and die, and per possible CPU
/// (index = CPU number, `-1` for one not online) its core, package and die ids.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CpuTopology {
    /// Each package's CPU list (`0-3`).
    pub package_cpus: Vec<String>,
    /// Each core's CPU list (its SMT siblings).
    pub core_cpus: Vec<String>,
    /// Each die's CPU list (empty: no die section).
    pub die_cpus: Vec<String>,
    /// Per CPU: (core_id, socket_id, die_id).
    pub ids: Vec<(i32, i32, i32)>,
}

/// One node of `HEADER_NUMA_TOPOLOGY`.
#[derive(Debug, Clone, PartialEq)]
pub struct NumaNode {
    /// The node number.
    pub node: u32,
    /// Its memory, kB.
    pub mem_total_kb: u64,
    /// Its free memory, kB.
    pub mem_free_kb: u64,
    /// Its CPU list (`0-3`).
    pub cpus: String,
}

/// One cache of `HEADER_CACHE`.
#[derive(Debug, Clone, PartialEq)]
pub struct Cache {
    /// 1, 2, 3.
    pub level: u32,
    /// Bytes per line.
    pub line_size: u32,
    /// Number of sets.
    pub sets: u32,
    /// Ways of associativity.
    pub ways: u32,
    /// `Data`, `Instruction`, `Unified`.
    pub type_: String,
    /// `48K`.
    pub size: String,
    /// The CPUs sharing it (`0-1`).
    pub cpus: String,
}

/// One group of `HEADER_GROUP_DESC` (groups of more than one event).
#[derive(Debug, Clone, PartialEq)]
pub struct Group {
    /// perf's `{anon_group}` unless named.
    pub name: String,
    /// Index of the leader among the events; the members follow it.
    pub leader: u32,
    /// Number of events in the group, the leader included.
    pub members: u32,
}

/// A PMU's `caps/`: (name, value) pairs.
pub type Caps = Vec<(String, String)>;

/// The feature sections of a file. A `None` is left out, as perf leaves out a feature it
/// cannot write; `EVENT_DESC`, `GROUP_DESC`, `STAT`, `SAMPLE_TIME`, `CLOCKID`, `COMPRESSED`
/// and `CLOCK_DATA` are always written (the last four as perf stat writes them: zeros).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Features {
    /// `HEADER_HOSTNAME`.
    pub hostname: Option<String>,
    /// `HEADER_OSRELEASE`: the kernel release.
    pub os_release: Option<String>,
    /// The writer's version (`HEADER_VERSION`).
    pub version: Option<String>,
    /// `HEADER_ARCH` (`x86_64`).
    pub arch: Option<String>,
    /// (CPUs available: the highest present CPU + 1, CPUs online).
    pub nr_cpus: Option<(u32, u32)>,
    /// `HEADER_CPUDESC`: the CPU's model name.
    pub cpu_desc: Option<String>,
    /// perf's spelling: `GenuineIntel,6,143,8` on x86.
    pub cpuid: Option<String>,
    /// `HEADER_TOTAL_MEM`, kB.
    pub total_mem_kb: Option<u64>,
    /// The program's path, then its arguments.
    pub cmdline: Option<Vec<String>>,
    /// `HEADER_CPU_TOPOLOGY` (written only with `nr_cpus`).
    pub topology: Option<CpuTopology>,
    /// `HEADER_NUMA_TOPOLOGY`.
    pub numa: Option<Vec<NumaNode>>,
    /// (type, name) of every PMU.
    pub pmu_mappings: Option<Vec<(u32, String)>>,
    /// `HEADER_GROUP_DESC`: the groups of more than one event.
    pub groups: Vec<Group>,
    /// `HEADER_CACHE`.
    pub caches: Option<Vec<Cache>>,
    /// The `cpu` PMU's `caps/`.
    pub cpu_pmu_caps: Option<Caps>,
    /// Hybrid machines: (core PMU, its CPU list).
    pub hybrid: Option<Vec<(String, String)>>,
    /// Other PMUs with `caps/`: (PMU, caps).
    pub pmu_caps: Option<Vec<(String, Caps)>>,
}

fn put_u32(b: &mut [u8], at: usize, v: u32) {
    b[at..at + 4].copy_from_slice(&v.to_le_bytes());
}

fn put_u64(b: &mut [u8], at: usize, v: u64) {
    b[at..at + 8].copy_from_slice(&v.to_le_bytes());
}

fn align8(n: usize) -> usize {
    n.div_ceil(8) * 8
}

/// Feature section bytes, built field by field.
#[derive(Default)]
struct Section(Vec<u8>);

impl Section {
    fn u32(&mut self, v: u32) -> &mut Self {
        self.0.extend_from_slice(&v.to_le_bytes());
        self
    }

    fn u64(&mut self, v: u64) -> &mut Self {
        self.0.extend_from_slice(&v.to_le_bytes());
        self
    }

    /// perf's `do_write_string`: a `u32` length (with the NUL, padded to 64), then the
    /// padded bytes.
    fn string(&mut self, s: &str) -> &mut Self {
        let len = (s.len() + 1).div_ceil(NAME_ALIGN) * NAME_ALIGN;
        self.u32(len as u32);
        self.0.extend_from_slice(s.as_bytes());
        self.0.resize(self.0.len() + len - s.len(), 0);
        self
    }

    fn strings(&mut self, list: &[String]) -> &mut Self {
        self.u32(list.len() as u32);
        for s in list {
            self.string(s);
        }
        self
    }
}

/// `perf_record_cpu_map_data` for `cpus`, in the encoding perf picks: a range when the CPUs
/// are consecutive, else a list or a 32-bit mask, whichever is smaller (a list when -1 is
/// among them); padded to 8 bytes.
fn cpu_map_data(cpus: &[i32]) -> Vec<u8> {
    let any = cpus.first() == Some(&-1);
    let real: Vec<i32> = cpus.iter().copied().filter(|&c| c >= 0).collect();
    let mut b = Vec::new();
    let (min, max) = (real.iter().min().copied(), real.iter().max().copied());
    if let (Some(min), Some(max)) = (min, max)
        && (max - min + 1) as usize == real.len()
    {
        b.extend_from_slice(&2u16.to_le_bytes());
        b.push(u8::from(any));
        b.push(0);
        b.extend_from_slice(&(min as u16).to_le_bytes());
        b.extend_from_slice(&(max as u16).to_le_bytes());
        return b;
    }
    let words = max.map_or(0, |m| (m as usize + 1).div_ceil(32));
    let list_size = 2 + 2 + 2 * cpus.len();
    let mask_size = 2 + 4 + 4 * words;
    if any || list_size < mask_size {
        b.extend_from_slice(&0u16.to_le_bytes());
        b.extend_from_slice(&(cpus.len() as u16).to_le_bytes());
        for &c in cpus {
            b.extend_from_slice(&(c as i16 as u16).to_le_bytes());
        }
    } else {
        b.extend_from_slice(&1u16.to_le_bytes());
        b.extend_from_slice(&(words as u16).to_le_bytes());
        b.extend_from_slice(&4u16.to_le_bytes());
        let mut mask = vec![0u32; words];
        for &c in &real {
            mask[c as usize / 32] |= 1 << (c % 32);
        }
        for w in mask {
            b.extend_from_slice(&w.to_le_bytes());
        }
    }
    b.resize(align8(b.len()), 0);
    b
}

/// A perf.data writer over `W` (see the module documentation).
pub struct Writer<W: Write> {
    out: W,
    pipe: bool,
    /// Bytes written so far: the file position.
    at: u64,
    data_offset: u64,
    events: Vec<Event>,
    attr_size: u32,
}

/// `ids` must be unique over every event.
fn check_ids(events: &[Event]) -> io::Result<()> {
    let mut all: Vec<u64> = events.iter().flat_map(|e| e.ids.iter().copied()).collect();
    let n = all.len();
    all.sort_unstable();
    all.dedup();
    if all.len() != n {
        return Err(io::Error::new(io::ErrorKind::InvalidInput, "event ids must be unique"));
    }
    Ok(())
}

impl<W: Write> Writer<W> {
    fn emit(&mut self, bytes: &[u8]) -> io::Result<()> {
        self.out.write_all(bytes)?;
        self.at += bytes.len() as u64;
        Ok(())
    }

    /// One record: `perf_event_header` (type, misc 0, size) and `body`, padded to 8 bytes.
    fn record(&mut self, kind: u32, body: &[u8]) -> io::Result<()> {
        let size = align8(8 + body.len());
        if size > MAX_RECORD {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("a record of {size} bytes does not fit perf's 16-bit record size"),
            ));
        }
        let mut r = Vec::with_capacity(size);
        r.extend_from_slice(&kind.to_le_bytes());
        r.extend_from_slice(&0u16.to_le_bytes());
        r.extend_from_slice(&(size as u16).to_le_bytes());
        r.extend_from_slice(body);
        r.resize(size, 0);
        self.emit(&r)
    }

    fn event_update(&mut self, kind: u64, id: u64, payload: &[u8]) -> io::Result<()> {
        let mut body = Vec::new();
        body.extend_from_slice(&kind.to_le_bytes());
        body.extend_from_slice(&id.to_le_bytes());
        body.extend_from_slice(payload);
        // perf sizes every EVENT_UPDATE from the whole struct, union included.
        body.resize(EVENT_UPDATE_BASE - 8 + payload.len(), 0);
        self.record(RECORD_EVENT_UPDATE, &body)
    }

    /// The records before the readings: units, scales, CPUs (and names in a pipe), the
    /// thread and CPU maps, the configuration.
    fn setup(&mut self, setup: &Setup) -> io::Result<()> {
        for i in 0..self.events.len() {
            let e = self.events[i].clone();
            // perf describes an event by its first id; one that did not open has none.
            let Some(&id) = e.ids.first() else { continue };
            if let Some(unit) = e.unit.as_ref().filter(|u| !u.is_empty()) {
                let mut s = unit.as_bytes().to_vec();
                s.push(0);
                self.event_update(0, id, &s)?;
            }
            if let Some(scale) = e.scale.filter(|&s| s != 1.0) {
                self.event_update(1, id, &scale.to_le_bytes())?;
            }
            if let Some(cpus) = &e.cpus {
                let data = cpu_map_data(cpus);
                // The CPU map sits at the union: no base padding beyond the map itself.
                let mut body = Vec::new();
                body.extend_from_slice(&3u64.to_le_bytes());
                body.extend_from_slice(&id.to_le_bytes());
                body.extend_from_slice(&data);
                self.record(RECORD_EVENT_UPDATE, &body)?;
            }
            if self.pipe {
                let mut s = e.name.as_bytes().to_vec();
                s.push(0);
                self.event_update(2, id, &s)?;
            }
        }
        let mut body = (setup.threads.len() as u64).to_le_bytes().to_vec();
        for (pid, comm) in &setup.threads {
            body.extend_from_slice(&(*pid as i64 as u64).to_le_bytes());
            let mut c = [0u8; 16];
            let n = comm.len().min(15);
            c[..n].copy_from_slice(&comm.as_bytes()[..n]);
            body.extend_from_slice(&c);
        }
        self.record(RECORD_THREAD_MAP, &body)?;
        self.record(RECORD_CPU_MAP, &cpu_map_data(&setup.cpus))?;
        let mut terms = vec![(0u64, setup.aggr_mode), (1, setup.interval_ms), (2, 1)];
        if setup.aggr_level != 0 {
            terms.push((3, setup.aggr_level));
        }
        let mut body = (terms.len() as u64).to_le_bytes().to_vec();
        for (tag, val) in terms {
            body.extend_from_slice(&tag.to_le_bytes());
            body.extend_from_slice(&val.to_le_bytes());
        }
        self.record(RECORD_STAT_CONFIG, &body)
    }

    /// Starts a pipe (`-o -`): the pipe header, the attributes with their ids, the event
    /// updates (names included), the maps and the configuration.
    pub fn pipe(out: W, events: Vec<Event>, setup: &Setup) -> io::Result<Writer<W>> {
        check_ids(&events)?;
        let mut w =
            Writer { out, pipe: true, at: 0, data_offset: 16, events, attr_size: ATTR_SIZE_VER8 };
        let mut head = MAGIC.to_vec();
        head.extend_from_slice(&16u64.to_le_bytes());
        w.emit(&head)?;
        for i in 0..w.events.len() {
            let mut body = w.events[i].attr.bytes(ATTR_SIZE_VER8);
            for id in w.events[i].ids.clone() {
                body.extend_from_slice(&id.to_le_bytes());
            }
            w.record(RECORD_HEADER_ATTR, &body)?;
        }
        w.setup(setup)?;
        Ok(w)
    }

    /// One reading: `id` of an event, on `cpu` (-1 for a task), `thread` (an index into the
    /// thread map). Values are counts since the start, as perf writes them.
    pub fn stat(
        &mut self,
        id: u64,
        cpu: i32,
        thread: u32,
        [value, enabled, running]: [u64; 3],
    ) -> io::Result<()> {
        let mut body = Vec::with_capacity(40);
        body.extend_from_slice(&id.to_le_bytes());
        body.extend_from_slice(&(cpu as u32).to_le_bytes());
        body.extend_from_slice(&thread.to_le_bytes());
        for v in [value, enabled, running] {
            body.extend_from_slice(&v.to_le_bytes());
        }
        self.record(RECORD_STAT, &body)
    }

    /// Closes the readings since the last round: an interval at `time_ns` since the start,
    /// or the end of the run (`time_ns`: the elapsed time).
    pub fn round(&mut self, kind: RoundKind, time_ns: u64) -> io::Result<()> {
        let mut body = Vec::with_capacity(16);
        let kind: u64 = match kind {
            RoundKind::Interval => 0,
            RoundKind::Final => 1,
        };
        body.extend_from_slice(&kind.to_le_bytes());
        body.extend_from_slice(&time_ns.to_le_bytes());
        self.record(RECORD_STAT_ROUND, &body)
    }

    /// The caller's own bytes, in as many `HEADER_EVENT_TYPE` records as they need. A reader
    /// gets back the concatenation of every call's bytes ([`super::PerfData::extras`]); they
    /// must hold no NUL byte (the padding of the last record is NULs).
    pub fn extra(&mut self, bytes: &[u8]) -> io::Result<()> {
        if bytes.contains(&0) {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, "extra data holds a NUL"));
        }
        let room = MAX_RECORD - 8 - EXTRA_MAGIC.len();
        for chunk in bytes.chunks(room) {
            let mut body = EXTRA_MAGIC.to_vec();
            body.extend_from_slice(chunk);
            self.record(RECORD_HEADER_EVENT_TYPE, &body)?;
        }
        Ok(())
    }

    /// Whether this writes a pipe.
    pub fn is_pipe(&self) -> bool {
        self.pipe
    }

    /// Ends a pipe: flushes and returns the writer.
    pub fn finish_pipe(mut self) -> io::Result<W> {
        debug_assert!(self.pipe, "finish_pipe on a file");
        self.out.flush()?;
        Ok(self.out)
    }

    /// The file header: magic, sizes, the attribute and data sections, the feature bits.
    fn file_header(&self, attrs: (u64, u64), data_size: u64, bits: &[usize]) -> Vec<u8> {
        let mut h = vec![0u8; 104];
        h[..8].copy_from_slice(MAGIC);
        put_u64(&mut h, 8, 104);
        put_u64(&mut h, 16, u64::from(self.attr_size) + 16);
        put_u64(&mut h, 24, attrs.0);
        put_u64(&mut h, 32, attrs.1);
        put_u64(&mut h, 40, self.data_offset);
        put_u64(&mut h, 48, data_size);
        // event_types (56..72) stays zero, as perf leaves it.
        for &bit in bits {
            let at = 72 + 8 * (bit / 64);
            let word = u64::from_le_bytes(h[at..at + 8].try_into().expect("8 bytes"));
            put_u64(&mut h, at, word | 1 << (bit % 64));
        }
        h
    }

    /// The ids of every event, then the attributes (each followed by where its ids are).
    fn ids_and_attrs(&self) -> (Vec<u8>, (u64, u64)) {
        let mut b = Vec::new();
        let mut places = Vec::new();
        for e in &self.events {
            places.push((104 + b.len() as u64, 8 * e.ids.len() as u64));
            for id in &e.ids {
                b.extend_from_slice(&id.to_le_bytes());
            }
        }
        let attrs_at = 104 + b.len() as u64;
        for (e, (at, len)) in self.events.iter().zip(places) {
            b.extend_from_slice(&e.attr.bytes(self.attr_size));
            b.extend_from_slice(&at.to_le_bytes());
            b.extend_from_slice(&len.to_le_bytes());
        }
        let attrs_len = 104 + b.len() as u64 - attrs_at;
        (b, (attrs_at, attrs_len))
    }
}

impl<W: Write + Seek> Writer<W> {
    /// Starts a file: the header (rewritten by [`Writer::finish_file`]), the ids and
    /// attributes, then the first data records.
    pub fn file(out: W, events: Vec<Event>, setup: &Setup) -> io::Result<Writer<W>> {
        check_ids(&events)?;
        // perf 6.1 refuses a file attribute larger than its own (128 bytes).
        let attr_size = if events.iter().any(|e| e.attr.config3 != 0) {
            ATTR_SIZE_VER8
        } else {
            ATTR_SIZE_VER7
        };
        let mut w = Writer { out, pipe: false, at: 0, data_offset: 0, events, attr_size };
        let (body, attrs) = w.ids_and_attrs();
        w.data_offset = 104 + body.len() as u64;
        let header = w.file_header(attrs, 0, &[]);
        w.emit(&header)?;
        w.emit(&body)?;
        w.setup(setup)?;
        Ok(w)
    }

    /// Ends a file: the feature sections after the data, then the header again with the data
    /// size and the feature bits. Returns the writer, positioned at the end.
    pub fn finish_file(mut self, features: &Features) -> io::Result<W> {
        debug_assert!(!self.pipe, "finish_file on a pipe");
        let data_size = self.at - self.data_offset;
        let sections = self.sections(features);
        let table_at = self.at;
        let mut offset = table_at + 16 * sections.len() as u64;
        let mut table = Vec::new();
        for (_, bytes) in &sections {
            table.extend_from_slice(&offset.to_le_bytes());
            table.extend_from_slice(&(bytes.len() as u64).to_le_bytes());
            offset += bytes.len() as u64;
        }
        self.emit(&table)?;
        for (_, bytes) in &sections {
            self.emit(bytes)?;
        }
        let (_, attrs) = self.ids_and_attrs();
        let bits: Vec<usize> = sections.iter().map(|(bit, _)| *bit).collect();
        let header = self.file_header(attrs, data_size, &bits);
        self.out.flush()?;
        self.out.seek(SeekFrom::Start(0))?;
        self.out.write_all(&header)?;
        self.out.seek(SeekFrom::End(0))?;
        self.out.flush()?;
        Ok(self.out)
    }

    /// Every feature section, in bit order.
    fn sections(&self, f: &Features) -> Vec<(usize, Vec<u8>)> {
        let mut out: Vec<(usize, Vec<u8>)> = Vec::new();
        let mut add = |bit: usize, s: &Section| out.push((bit, s.0.clone()));
        let string = |s: &str| {
            let mut sec = Section::default();
            sec.string(s);
            sec
        };
        for (bit, value) in [
            (FEAT_HOSTNAME, &f.hostname),
            (FEAT_OSRELEASE, &f.os_release),
            (FEAT_VERSION, &f.version),
            (FEAT_ARCH, &f.arch),
        ] {
            if let Some(v) = value {
                add(bit, &string(v));
            }
        }
        if let Some((avail, online)) = f.nr_cpus {
            add(FEAT_NRCPUS, Section::default().u32(avail).u32(online));
        }
        if let Some(v) = &f.cpu_desc {
            add(FEAT_CPUDESC, &string(v));
        }
        if let Some(v) = &f.cpuid {
            add(FEAT_CPUID, &string(v));
        }
        if let Some(kb) = f.total_mem_kb {
            add(FEAT_TOTAL_MEM, Section::default().u64(kb));
        }
        if let Some(args) = &f.cmdline {
            add(FEAT_CMDLINE, Section::default().strings(args));
        }
        add(FEAT_EVENT_DESC, &self.event_desc());
        // NRCPUS first: perf reads the per-CPU ids of the topology for that many CPUs.
        if let (Some(t), Some(_)) = (&f.topology, f.nr_cpus) {
            add(FEAT_CPU_TOPOLOGY, &topology_section(t));
        }
        if let Some(nodes) = &f.numa {
            let mut s = Section::default();
            s.u32(nodes.len() as u32);
            for n in nodes {
                s.u32(n.node).u64(n.mem_total_kb).u64(n.mem_free_kb).string(&n.cpus);
            }
            add(FEAT_NUMA_TOPOLOGY, &s);
        }
        if let Some(pmus) = &f.pmu_mappings {
            let mut s = Section::default();
            s.u32(pmus.len() as u32);
            for (type_, name) in pmus {
                s.u32(*type_).string(name);
            }
            add(FEAT_PMU_MAPPINGS, &s);
        }
        let mut s = Section::default();
        s.u32(f.groups.len() as u32);
        for g in &f.groups {
            s.string(&g.name).u32(g.leader).u32(g.members);
        }
        add(FEAT_GROUP_DESC, &s);
        // `HEADER_STAT` has no data: its bit says the file holds counts.
        add(FEAT_STAT, &Section::default());
        if let Some(caches) = &f.caches {
            let mut s = Section::default();
            s.u32(1).u32(caches.len() as u32);
            for c in caches {
                s.u32(c.level).u32(c.line_size).u32(c.sets).u32(c.ways);
                s.string(&c.type_).string(&c.size).string(&c.cpus);
            }
            add(FEAT_CACHE, &s);
        }
        // No samples: first and last sample times 0; no clock: resolution 0.
        add(FEAT_SAMPLE_TIME, Section::default().u64(0).u64(0));
        add(FEAT_CLOCKID, Section::default().u64(0));
        // Not compressed: version, type, level, ratio, mmap length all 0.
        add(FEAT_COMPRESSED, Section::default().u32(0).u32(0).u32(0).u32(0).u64(0));
        if let Some(caps) = &f.cpu_pmu_caps {
            let mut s = Section::default();
            s.u32(caps.len() as u32);
            for (name, value) in caps {
                s.string(name).string(value);
            }
            add(FEAT_CPU_PMU_CAPS, &s);
        }
        // Version 1, clockid 0, no reference times.
        add(FEAT_CLOCK_DATA, Section::default().u32(1).u32(0).u64(0).u64(0));
        if let Some(pmus) = &f.hybrid {
            let mut s = Section::default();
            s.u32(pmus.len() as u32);
            for (name, cpus) in pmus {
                s.string(name).string(cpus);
            }
            add(FEAT_HYBRID_TOPOLOGY, &s);
        }
        if let Some(pmus) = &f.pmu_caps {
            add(FEAT_PMU_CAPS, &pmu_caps_section(pmus));
        }
        out
    }

    /// `HEADER_EVENT_DESC`: every event's attribute, ids and name.
    fn event_desc(&self) -> Section {
        let mut desc = Section::default();
        desc.u32(self.events.len() as u32).u32(self.attr_size);
        for e in &self.events {
            desc.0.extend_from_slice(&e.attr.bytes(self.attr_size));
            desc.u32(e.ids.len() as u32).string(&e.name);
            for &id in &e.ids {
                desc.u64(id);
            }
        }
        desc
    }
}

/// `HEADER_CPU_TOPOLOGY`: the sibling lists, each CPU's core and socket, and the dies when
/// there are any.
fn topology_section(t: &CpuTopology) -> Section {
    let mut s = Section::default();
    s.strings(&t.package_cpus).strings(&t.core_cpus);
    for &(core, socket, _) in &t.ids {
        s.u32(core as u32).u32(socket as u32);
    }
    if !t.die_cpus.is_empty() {
        s.strings(&t.die_cpus);
        for &(_, _, die) in &t.ids {
            s.u32(die as u32);
        }
    }
    s
}

/// `HEADER_PMU_CAPS`: each PMU's capabilities, then its name.
fn pmu_caps_section(pmus: &[(String, Caps)]) -> Section {
    let mut s = Section::default();
    s.u32(pmus.len() as u32);
    for (pmu, caps) in pmus {
        s.u32(caps.len() as u32);
        for (name, value) in caps {
            s.string(name).string(value);
        }
        s.string(pmu);
    }
    s
}
