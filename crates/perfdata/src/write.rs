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

use std::io::{self, Write};

mod file;
mod layout;
mod records;

use layout::{put_u32, put_u64};

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
pub struct FileAttr {
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

impl FileAttr {
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
    pub attr: FileAttr,
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
    /// `STAT_CONFIG` aggregation mode, written in perf 6.12's numbering.
    pub aggr_mode: tmetric_perfstat::Aggregation,
    /// `STAT_CONFIG` interval in ms (0: none).
    pub interval_ms: u64,
    /// `STAT_CONFIG` aggregation level (`--per-cache`); 0 leaves the term out.
    pub aggr_level: u64,
    /// `STAT_CONFIG` scale term: counts were scaled for multiplexing (false: `--no-scale`).
    pub scale: bool,
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
