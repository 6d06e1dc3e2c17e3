//! Reads the `perf.data` files `perf stat record` writes: the file header, the event
//! attributes with their ids, the `EVENT_DESC` feature (event names), and the stat records
//! of the data section (`PERF_RECORD_STAT`, `STAT_ROUND`, `STAT_CONFIG`, `THREAD_MAP`,
//! `CPU_MAP`, `EVENT_UPDATE`). Pipe-mode files (`perf stat record -o -`) are read from their
//! `HEADER_ATTR` and `HEADER_FEATURE` records. [`write`] writes such files.
//!
//! Layouts from Linux 6.12's `tools/lib/perf/include/perf/event.h` and
//! `tools/perf/util/header.{c,h}` (facts only). Only little-endian files are read: a
//! byte-swapped magic is refused by name. Every offset and length is checked, so a damaged
//! file is an error with the byte offset, never a panic.

use std::collections::HashMap;
use std::fmt;

pub mod write;

/// The magic of a perf.data file (`PERFILE2`, little-endian).
pub const MAGIC: &[u8; 8] = b"PERFILE2";

/// Whether `bytes` starts like a perf.data file (either byte order).
pub fn is_perf_data(bytes: &[u8]) -> bool {
    bytes.starts_with(MAGIC) || bytes.starts_with(b"2ELIFREP")
}

/// A problem reading a perf.data file: where (byte offset) and what.
#[derive(Debug, Clone, PartialEq)]
pub struct DataError {
    /// Byte offset in the file.
    pub offset: u64,
    /// What was expected.
    pub message: String,
}

impl fmt::Display for DataError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "at byte {}: {}", self.offset, self.message)
    }
}

impl std::error::Error for DataError {}

/// One counted event.
#[derive(Debug, Clone, PartialEq)]
pub struct DataEvent {
    /// Its name (`EVENT_DESC`, else an `EVENT_UPDATE` name, else `type/config`).
    pub name: String,
    /// `perf_event_attr.type`.
    pub type_: u32,
    /// `config`.
    pub config: u64,
    /// `config1`.
    pub config1: u64,
    /// `config2`.
    pub config2: u64,
    /// `config3` (0 in an attribute of perf 6.1's 128 bytes).
    pub config3: u64,
    /// `exclude_user`, `exclude_kernel`, `exclude_hv` bits.
    pub exclude: (bool, bool, bool),
    /// The sample ids STAT records name it by.
    pub ids: Vec<u64>,
    /// Unit from `EVENT_UPDATE` (`msec`).
    pub unit: Option<String>,
    /// Scale from `EVENT_UPDATE` (1e-6 for the clocks).
    pub scale: Option<f64>,
    /// The PMU's own CPUs from `EVENT_UPDATE`, when they differ from the CPU map.
    pub cpus: Option<Vec<i32>>,
}

/// One `PERF_RECORD_STAT`: an event's reading on one CPU and thread.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StatValue {
    /// Index into [`PerfData::events`].
    pub event: usize,
    /// The CPU (-1 for a task counter).
    pub cpu: i32,
    /// Index into the thread map.
    pub thread: u32,
    /// The count.
    pub value: u64,
    /// `time_enabled`, ns.
    pub enabled: u64,
    /// `time_running`, ns.
    pub running: u64,
}

/// What a `STAT_ROUND` closes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RoundKind {
    /// An `-I` interval (values are cumulative since the start).
    Interval,
    /// The end of the run.
    Final,
}

/// The STAT records up to one `STAT_ROUND`.
#[derive(Debug, Clone, PartialEq)]
pub struct Round {
    /// Interval or final.
    pub kind: RoundKind,
    /// ns since the start (the elapsed time for the final round).
    pub time_ns: u64,
    /// The readings.
    pub values: Vec<StatValue>,
}

/// A `perf stat record` file.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct PerfData {
    /// Events in attribute order.
    pub events: Vec<DataEvent>,
    /// `CPU_MAP`: the CPUs counted (`[-1]` for a task).
    pub cpus: Vec<i32>,
    /// `THREAD_MAP`: (pid, comm).
    pub threads: Vec<(u64, String)>,
    /// `STAT_CONFIG` interval in ms (0: none).
    pub interval_ms: u64,
    /// `STAT_CONFIG` aggregation mode: the number, in the writer's numbering of perf's
    /// `enum aggr_mode` ([`tmetric_perfstat::Aggregation::from_code`] with [`PerfData::numbering`]).
    pub aggr_mode: Option<u64>,
    /// `STAT_CONFIG` aggregation level (`--per-cache=L`; perf writes 5 for the last level).
    pub aggr_level: Option<u64>,
    /// `STAT_CONFIG`'s scale term: 0 when recorded with `--no-scale` (counts read as raw).
    pub scale: Option<u64>,
    /// Rounds in order.
    pub rounds: Vec<Round>,
    /// STAT records after the last round (perf writes the totals of an `-I` run so).
    pub unrounded: Vec<StatValue>,
    /// `HEADER_HOSTNAME`.
    pub hostname: Option<String>,
    /// `HEADER_OSRELEASE`.
    pub os_release: Option<String>,
    /// `HEADER_VERSION`: perf's version.
    pub perf_version: Option<String>,
    /// `HEADER_CPUID`.
    pub cpuid: Option<String>,
    /// `HEADER_NRCPUS`: (available, online).
    pub nr_cpus: Option<(u32, u32)>,
    /// `HEADER_CMDLINE`.
    pub cmdline: Vec<String>,
    /// `HEADER_CPU_TOPOLOGY`: per CPU (index = CPU number) its (core, socket, die) ids, -1
    /// for a CPU that was not online; empty without the feature.
    pub topology: Vec<(i32, i32, i32)>,
    /// Written to a pipe (`-o -`): a 16-byte header, attributes as records.
    pub pipe: bool,
    /// The bytes of every `HEADER_EVENT_TYPE` record that starts with
    /// [`write::EXTRA_MAGIC`], concatenated in file order without the magic and the padding:
    /// data a writer added that perf skips (tmetric's record extras).
    pub extras: Vec<u8>,
}

impl PerfData {
    /// The aggregation mode `STAT_CONFIG` names, read in the numbering of the perf that
    /// wrote the file (`HEADER_VERSION`); `None` when unset or when the numbering cannot tell.
    pub fn aggregation(&self) -> Option<tmetric_perfstat::Aggregation> {
        let numbering = tmetric_perfstat::Numbering::of_version(self.perf_version.as_deref());
        tmetric_perfstat::Aggregation::from_code(self.aggr_mode?, numbering)
    }
}

const RECORD_HEADER_ATTR: u32 = 64;
const RECORD_HEADER_EVENT_TYPE: u32 = 65;
const RECORD_THREAD_MAP: u32 = 73;
const RECORD_CPU_MAP: u32 = 74;
const RECORD_STAT_CONFIG: u32 = 75;
const RECORD_STAT: u32 = 76;
const RECORD_STAT_ROUND: u32 = 77;
const RECORD_EVENT_UPDATE: u32 = 78;
const RECORD_HEADER_FEATURE: u32 = 80;

const FEAT_HOSTNAME: usize = 3;
const FEAT_OSRELEASE: usize = 4;
const FEAT_VERSION: usize = 5;
const FEAT_NRCPUS: usize = 7;
const FEAT_CPUID: usize = 9;
const FEAT_CMDLINE: usize = 11;
const FEAT_EVENT_DESC: usize = 12;
const FEAT_CPU_TOPOLOGY: usize = 13;

/// Bounds-checked little-endian reads over the file.
struct Bytes<'a>(&'a [u8]);

impl Bytes<'_> {
    fn slice(&self, offset: u64, len: u64, what: &str) -> Result<&[u8], DataError> {
        let end = offset.checked_add(len);
        match end {
            Some(end) if end <= self.0.len() as u64 => Ok(&self.0[offset as usize..end as usize]),
            _ => Err(DataError {
                offset,
                message: format!(
                    "{what} needs {len} bytes but the file ends at byte {} (truncated or damaged)",
                    self.0.len()
                ),
            }),
        }
    }

    fn u64(&self, offset: u64, what: &str) -> Result<u64, DataError> {
        let b = self.slice(offset, 8, what)?;
        Ok(u64::from_le_bytes(b.try_into().expect("8 bytes")))
    }

    fn u32(&self, offset: u64, what: &str) -> Result<u32, DataError> {
        let b = self.slice(offset, 4, what)?;
        Ok(u32::from_le_bytes(b.try_into().expect("4 bytes")))
    }

    fn u16(&self, offset: u64, what: &str) -> Result<u16, DataError> {
        let b = self.slice(offset, 2, what)?;
        Ok(u16::from_le_bytes(b.try_into().expect("2 bytes")))
    }
}

/// Which event each sample id names: the first attribute that lists it, as perf's
/// `evlist__id2sid` finds it. A map, so a file of many STAT records and many ids costs time
/// linear in its size.
#[derive(Default)]
struct Ids(HashMap<u64, usize>);

impl Ids {
    fn add(&mut self, event: usize, ids: &[u64]) {
        for &id in ids {
            self.0.entry(id).or_insert(event);
        }
    }

    fn event(&self, id: u64) -> Option<usize> {
        self.0.get(&id).copied()
    }
}

/// A NUL-padded string.
fn c_string(bytes: &[u8]) -> String {
    let end = bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len());
    String::from_utf8_lossy(&bytes[..end]).into_owned()
}

/// The attribute fields tmetric uses, from `perf_event_attr` at `offset` (`size` bytes).
fn attr_at(b: &Bytes<'_>, offset: u64, size: u64) -> Result<DataEvent, DataError> {
    if size < 72 {
        return Err(DataError {
            offset,
            message: format!("perf_event_attr of {size} bytes: expected at least 72"),
        });
    }
    let flags = b.u64(offset + 40, "perf_event_attr flags")?;
    let config3 = if size >= 136 { b.u64(offset + 128, "perf_event_attr.config3")? } else { 0 };
    Ok(DataEvent {
        name: String::new(),
        type_: b.u32(offset, "perf_event_attr.type")?,
        config: b.u64(offset + 8, "perf_event_attr.config")?,
        config1: b.u64(offset + 56, "perf_event_attr.config1")?,
        config2: b.u64(offset + 64, "perf_event_attr.config2")?,
        config3,
        exclude: (flags & (1 << 4) != 0, flags & (1 << 5) != 0, flags & (1 << 6) != 0),
        ids: Vec::new(),
        unit: None,
        scale: None,
        cpus: None,
    })
}

/// perf's fallback spelling of an event without a name.
fn fallback_name(e: &DataEvent) -> String {
    match e.type_ {
        1 => tmetric_names::SW_NAMES
            .get(e.config as usize)
            .map_or(format!("software/config={:#x}/", e.config), |s| s.to_string()),
        0 => tmetric_names::HW_NAMES
            .get(e.config as usize)
            .map_or(format!("hardware/config={:#x}/", e.config), |s| s.to_string()),
        4 => format!("r{:x}", e.config),
        t => format!("{t}/config={:#x}/", e.config),
    }
}

/// Reads a `perf stat record` file. `bytes` is the whole file.
pub fn parse_perf_data(bytes: &[u8]) -> Result<PerfData, DataError> {
    let b = Bytes(bytes);
    if bytes.starts_with(b"2ELIFREP") {
        return Err(DataError {
            offset: 0,
            message: "a big-endian perf.data file: read it on a machine of its byte order (`perf stat report -i FILE`)".into(),
        });
    }
    if !bytes.starts_with(MAGIC) {
        return Err(DataError {
            offset: 0,
            message: "not a perf.data file (no `PERFILE2` magic)".into(),
        });
    }
    let header_size = b.u64(8, "the file header's size")?;
    let mut data = PerfData::default();
    let mut ids_index = Ids::default();
    let (data_offset, data_size) = if header_size == 16 {
        // Pipe mode: records follow the 16-byte header, attributes come as records.
        data.pipe = true;
        (16, bytes.len() as u64 - 16)
    } else if header_size >= 104 {
        let attr_size = b.u64(16, "attr_size")?;
        let (attrs_off, attrs_len) = (b.u64(24, "attrs.offset")?, b.u64(32, "attrs.size")?);
        if attr_size < 88 {
            return Err(DataError {
                offset: 16,
                message: format!(
                    "attr_size {attr_size}: expected perf_event_attr plus a file section (at least 88 bytes)"
                ),
            });
        }
        if attrs_len % attr_size != 0 {
            return Err(DataError {
                offset: 32,
                message: format!(
                    "the attribute section ({attrs_len} bytes) is not a multiple of attr_size {attr_size}"
                ),
            });
        }
        b.slice(attrs_off, attrs_len, "the attribute section")?;
        // perf gives each attribute its own id section; sections that overlap (a crafted file
        // whose every attribute points at the whole file) would need memory in the square of
        // the file's size, so the ids together may not exceed the file.
        let mut id_bytes = 0u64;
        for i in 0..attrs_len / attr_size {
            let at = attrs_off + i * attr_size;
            let attr_len = attr_size - 16;
            let mut event = attr_at(&b, at, attr_len)?;
            let (ids_off, ids_len) =
                (b.u64(at + attr_len, "ids.offset")?, b.u64(at + attr_len + 8, "ids.size")?);
            let ids = b.slice(ids_off, ids_len, "the event ids")?;
            id_bytes += ids_len;
            if id_bytes > bytes.len() as u64 {
                return Err(DataError {
                    offset: at + attr_len,
                    message: format!(
                        "the attributes' id sections add up to more than the file's {} bytes: they overlap, so the file is damaged",
                        bytes.len()
                    ),
                });
            }
            event.ids = ids
                .chunks_exact(8)
                .map(|c| u64::from_le_bytes(c.try_into().expect("8 bytes")))
                .collect();
            ids_index.add(data.events.len(), &event.ids);
            data.events.push(event);
        }
        let data_offset = b.u64(40, "data.offset")?;
        let data_size = b.u64(48, "data.size")?;
        // perf (and tmetric) write the data size and the feature bitmap last: a file with
        // neither but bytes after the header was left by a run killed before it finished.
        let mut features = 0;
        for word in 0..4 {
            features |= b.u64(72 + 8 * word, "the feature bitmap")?;
        }
        if data_size == 0 && features == 0 && bytes.len() as u64 > data_offset {
            return Err(DataError {
                offset: 48,
                message: format!(
                    "the header says no data was written, yet {} bytes follow it: the run that wrote this file was killed before it finished (its counts cannot be read); record again",
                    bytes.len() as u64 - data_offset
                ),
            });
        }
        b.slice(data_offset, data_size, "the data section")?;
        read_features(&b, &mut data, &ids_index, data_offset + data_size)?;
        (data_offset, data_size)
    } else {
        return Err(DataError {
            offset: 8,
            message: format!("header size {header_size}: expected 104 (a file) or 16 (a pipe)"),
        });
    };
    read_records(&b, &mut data, &mut ids_index, data_offset, data_size)?;
    for e in &mut data.events {
        if e.name.is_empty() {
            e.name = fallback_name(e);
        }
    }
    Ok(data)
}

/// The feature sections after the data section: names, hostname, cpuid, command line.
fn read_features(b: &Bytes<'_>, data: &mut PerfData, ids: &Ids, at: u64) -> Result<(), DataError> {
    let mut bits = Vec::new();
    for word in 0..4u64 {
        let w = b.u64(72 + 8 * word, "the feature bitmap")?;
        for bit in 0..64 {
            if w & (1 << bit) != 0 {
                bits.push((word * 64 + bit) as usize);
            }
        }
    }
    for (k, &bit) in bits.iter().enumerate() {
        let sec = at + 16 * k as u64;
        let (off, size) = (b.u64(sec, "a feature section")?, b.u64(sec + 8, "a feature section")?);
        b.slice(off, size, "a feature")?;
        read_feature(b, data, ids, bit, off, off + size)?;
    }
    Ok(())
}

/// A string of a feature section: `u32` length, then NUL-padded bytes.
fn feature_string(b: &Bytes<'_>, off: u64, end: u64) -> Result<(String, u64), DataError> {
    let len = b.u32(off, "a string length")? as u64;
    if off + 4 + len > end {
        return Err(DataError {
            offset: off,
            message: format!("a string of {len} bytes runs past its section"),
        });
    }
    Ok((c_string(b.slice(off + 4, len, "a string")?), off + 4 + len))
}

/// Feature `bit` whose data is at `off..end` (a file's feature section or a pipe's
/// `HEADER_FEATURE` record).
fn read_feature(
    b: &Bytes<'_>,
    data: &mut PerfData,
    index: &Ids,
    bit: usize,
    off: u64,
    end: u64,
) -> Result<(), DataError> {
    let string = |off: u64| feature_string(b, off, end);
    match bit {
        FEAT_HOSTNAME => data.hostname = Some(string(off)?.0),
        FEAT_OSRELEASE => data.os_release = Some(string(off)?.0),
        FEAT_VERSION => data.perf_version = Some(string(off)?.0),
        FEAT_CPUID => data.cpuid = Some(string(off)?.0),
        FEAT_NRCPUS => {
            data.nr_cpus = Some((b.u32(off, "nr_cpus")?, b.u32(off + 4, "nr_cpus_online")?));
        }
        FEAT_CPU_TOPOLOGY => data.topology = cpu_topology(b, data, off, end)?,
        FEAT_CMDLINE => {
            let n = b.u32(off, "the argument count")?;
            let mut p = off + 4;
            for _ in 0..n {
                let (s, next) = string(p)?;
                data.cmdline.push(s);
                p = next;
            }
        }
        FEAT_EVENT_DESC => {
            let n = b.u32(off, "the event count")? as u64;
            let attr_len = b.u32(off + 4, "the attribute size")? as u64;
            let mut p = off + 8;
            for _ in 0..n {
                let attr = attr_at(b, p, attr_len)?;
                p += attr_len;
                let nids = b.u32(p, "the id count")? as u64;
                let (name, next) = string(p + 4)?;
                p = next;
                let ids = b.slice(p, nids * 8, "the event's ids")?;
                p += nids * 8;
                let first = ids.get(..8).map(|c| u64::from_le_bytes(c.try_into().expect("8")));
                // Names go to the attribute with the same ids (or, without ids, the same
                // encoding).
                let target = match first {
                    Some(id) => index.event(id).and_then(|i| data.events.get_mut(i)),
                    None => data.events.iter_mut().find(|e| {
                        e.type_ == attr.type_ && e.config == attr.config && e.name.is_empty()
                    }),
                };
                if let Some(e) = target {
                    e.name = name;
                }
            }
        }
        _ => {}
    }
    Ok(())
}

/// `HEADER_CPU_TOPOLOGY` at `off..end`: the package and core CPU lists (skipped), then per
/// available CPU its core and socket ids and, when present, the die lists and die ids.
/// Files from before the ids (or without `HEADER_NRCPUS`) give none.
fn cpu_topology(
    b: &Bytes<'_>,
    data: &PerfData,
    off: u64,
    end: u64,
) -> Result<Vec<(i32, i32, i32)>, DataError> {
    let skip_strings = |mut p: u64| -> Result<u64, DataError> {
        let n = b.u32(p, "a CPU list count")?;
        p += 4;
        for _ in 0..n {
            p = feature_string(b, p, end)?.1;
        }
        Ok(p)
    };
    let mut p = skip_strings(skip_strings(off)?)?;
    let Some((avail, _)) = data.nr_cpus else { return Ok(Vec::new()) };
    let avail = u64::from(avail);
    if p + 8 * avail > end {
        return Ok(Vec::new());
    }
    let mut ids = Vec::new();
    for _ in 0..avail {
        ids.push((b.u32(p, "a core id")? as i32, b.u32(p + 4, "a socket id")? as i32, 0));
        p += 8;
    }
    if p < end {
        p = skip_strings(p)?;
        if p + 4 * avail <= end {
            for id in &mut ids {
                id.2 = b.u32(p, "a die id")? as i32;
                p += 4;
            }
        }
    }
    Ok(ids)
}

/// The records of the data section.
fn read_records(
    b: &Bytes<'_>,
    data: &mut PerfData,
    ids: &mut Ids,
    start: u64,
    len: u64,
) -> Result<(), DataError> {
    let end = start + len;
    let mut p = start;
    let mut pending: Vec<StatValue> = Vec::new();
    while p < end {
        let kind = b.u32(p, "a record header")?;
        let size = b.u16(p + 6, "a record header")? as u64;
        if size < 8 || p + size > end {
            return Err(DataError {
                offset: p,
                message: format!(
                    "record of type {kind} claims {size} bytes (the data section ends at byte {end}): the file is damaged or truncated"
                ),
            });
        }
        let body = p + 8;
        match kind {
            RECORD_HEADER_ATTR => {
                let attr_len = b.u32(body + 4, "perf_event_attr.size")? as u64;
                let mut event = attr_at(b, body, attr_len)?;
                let mut q = body + attr_len;
                while q + 8 <= p + size {
                    event.ids.push(b.u64(q, "an event id")?);
                    q += 8;
                }
                ids.add(data.events.len(), &event.ids);
                data.events.push(event);
            }
            RECORD_STAT => pending.push(stat_value(b, ids, p)?),
            RECORD_STAT_ROUND => {
                let kind = match b.u64(body, "a STAT_ROUND type")? {
                    0 => RoundKind::Interval,
                    1 => RoundKind::Final,
                    other => {
                        return Err(DataError {
                            offset: p,
                            message: format!(
                                "STAT_ROUND type {other}: expected 0 (interval) or 1 (final)"
                            ),
                        });
                    }
                };
                let time_ns = b.u64(body + 8, "a STAT_ROUND time")?;
                data.rounds.push(Round { kind, time_ns, values: std::mem::take(&mut pending) });
            }
            RECORD_STAT_CONFIG => {
                let n = b.u64(body, "the STAT_CONFIG count")?;
                for i in 0..n.min(size.saturating_sub(16) / 16) {
                    let tag = b.u64(body + 8 + 16 * i, "a STAT_CONFIG tag")?;
                    let val = b.u64(body + 16 + 16 * i, "a STAT_CONFIG value")?;
                    match tag {
                        0 => data.aggr_mode = Some(val),
                        1 => data.interval_ms = val,
                        2 => data.scale = Some(val),
                        3 => data.aggr_level = Some(val),
                        _ => {}
                    }
                }
            }
            RECORD_THREAD_MAP => {
                let n = b.u64(body, "the thread count")?;
                // Entries: u64 pid, char comm[16].
                for i in 0..n.min(size.saturating_sub(16) / 24) {
                    let e = body + 8 + 24 * i;
                    data.threads
                        .push((b.u64(e, "a pid")?, c_string(b.slice(e + 8, 16, "a comm")?)));
                }
            }
            RECORD_CPU_MAP => data.cpus = cpu_map(b, body, p + size)?,
            RECORD_HEADER_EVENT_TYPE => {
                let payload = b.slice(body, size - 8, "a HEADER_EVENT_TYPE record")?;
                if let Some(rest) = payload.strip_prefix(write::EXTRA_MAGIC) {
                    let len = rest.iter().rposition(|&c| c != 0).map_or(0, |i| i + 1);
                    data.extras.extend_from_slice(&rest[..len]);
                }
            }
            RECORD_HEADER_FEATURE => {
                let bit = b.u64(body, "the HEADER_FEATURE id")?;
                if bit < 256 {
                    read_feature(b, data, ids, bit as usize, body + 8, p + size)?;
                }
            }
            RECORD_EVENT_UPDATE => event_update(b, data, ids, p, size)?,
            _ => {}
        }
        p += size;
    }
    data.unrounded = pending;
    Ok(())
}

/// The `PERF_RECORD_STAT` at `p`: one reading of an event the attributes name.
fn stat_value(b: &Bytes<'_>, ids: &Ids, p: u64) -> Result<StatValue, DataError> {
    let body = p + 8;
    let id = b.u64(body, "a STAT id")?;
    let Some(event) = ids.event(id) else {
        return Err(DataError {
            offset: p,
            message: format!("a STAT record names event id {id}, which no attribute has"),
        });
    };
    let (enabled, running) =
        (b.u64(body + 24, "a STAT enabled time")?, b.u64(body + 32, "a STAT running time")?);
    if running > enabled {
        return Err(DataError {
            offset: p,
            message: format!(
                "a STAT record ran {running} ns of {enabled} ns enabled; the kernel never counts a running time above the enabled time"
            ),
        });
    }
    Ok(StatValue {
        event,
        cpu: b.u32(body + 8, "a STAT cpu")? as i32,
        thread: b.u32(body + 12, "a STAT thread")?,
        value: b.u64(body + 16, "a STAT value")?,
        enabled,
        running,
    })
}

/// The `PERF_RECORD_EVENT_UPDATE` at `p` (`size` bytes): a unit, scale, name or CPU list
/// for the event with its id (ignored for an id no attribute has).
fn event_update(
    b: &Bytes<'_>,
    data: &mut PerfData,
    ids: &Ids,
    p: u64,
    size: u64,
) -> Result<(), DataError> {
    let body = p + 8;
    let kind = b.u64(body, "the EVENT_UPDATE type")?;
    let id = b.u64(body + 8, "the EVENT_UPDATE id")?;
    let rest = b.slice(body + 16, size.saturating_sub(24), "the EVENT_UPDATE body")?;
    if let Some(e) = ids.event(id).and_then(|i| data.events.get_mut(i)) {
        match kind {
            0 => e.unit = Some(c_string(rest)),
            1 if rest.len() >= 8 => {
                e.scale = Some(f64::from_le_bytes(rest[..8].try_into().expect("8")));
            }
            2 => e.name = c_string(rest),
            3 => e.cpus = Some(cpu_map(b, body + 16, p + size)?),
            _ => {}
        }
    }
    Ok(())
}

/// `perf_record_cpu_map_data` at `at`: a list, a bitmask or a range.
fn cpu_map(b: &Bytes<'_>, at: u64, end: u64) -> Result<Vec<i32>, DataError> {
    match b.u16(at, "the CPU map type")? {
        0 => {
            let n = b.u16(at + 2, "the CPU count")? as u64;
            (0..n).map(|i| Ok(b.u16(at + 4 + 2 * i, "a CPU")? as i16 as i32)).collect()
        }
        1 => {
            let nr = b.u16(at + 2, "the mask word count")? as u64;
            let long = b.u16(at + 4, "the mask word size")? as u64;
            if long != 4 && long != 8 {
                return Err(DataError {
                    offset: at + 4,
                    message: format!("CPU mask words of {long} bytes: expected 4 or 8"),
                });
            }
            let mut cpus = Vec::new();
            let words = if long == 4 { at + 6 } else { at + 8 };
            for w in 0..nr {
                let word = if long == 4 {
                    b.u32(words + 4 * w, "a mask word")? as u64
                } else {
                    b.u64(words + 8 * w, "a mask word")?
                };
                for bit in 0..long * 8 {
                    if word & (1 << bit) != 0 {
                        cpus.push((w * long * 8 + bit) as i32);
                    }
                }
            }
            Ok(cpus)
        }
        2 => {
            let any = b.slice(at + 2, 1, "the range flag")?[0] != 0;
            let first = b.u16(at + 4, "the first CPU")? as i32;
            let last = b.u16(at + 6, "the last CPU")? as i32;
            let mut cpus: Vec<i32> = if any { vec![-1] } else { Vec::new() };
            cpus.extend(first..=last);
            Ok(cpus)
        }
        other => Err(DataError {
            offset: at,
            message: format!(
                "CPU map type {other}: expected 0 (list), 1 (mask) or 2 (range); end {end}"
            ),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A minimal file: one task-clock attribute with id 7, a STAT and a final round.
    fn file(stat_id: u64, truncate: usize) -> Vec<u8> {
        let mut f = Vec::new();
        f.extend_from_slice(MAGIC);
        f.extend_from_slice(&104u64.to_le_bytes());
        f.extend_from_slice(&(128u64 + 16).to_le_bytes());
        // attrs at 104 + 8 (ids first), 144 bytes
        f.extend_from_slice(&112u64.to_le_bytes());
        f.extend_from_slice(&144u64.to_le_bytes());
        let data_off = 112 + 144;
        let mut records = Vec::new();
        // STAT
        records.extend_from_slice(&RECORD_STAT.to_le_bytes());
        records.extend_from_slice(&0u16.to_le_bytes());
        records.extend_from_slice(&48u16.to_le_bytes());
        records.extend_from_slice(&stat_id.to_le_bytes());
        records.extend_from_slice(&u32::MAX.to_le_bytes());
        records.extend_from_slice(&0u32.to_le_bytes());
        for v in [700_000u64, 1_000_000, 500_000] {
            records.extend_from_slice(&v.to_le_bytes());
        }
        // STAT_ROUND final at 2 ms
        records.extend_from_slice(&RECORD_STAT_ROUND.to_le_bytes());
        records.extend_from_slice(&0u16.to_le_bytes());
        records.extend_from_slice(&24u16.to_le_bytes());
        records.extend_from_slice(&1u64.to_le_bytes());
        records.extend_from_slice(&2_000_000u64.to_le_bytes());
        f.extend_from_slice(&(data_off as u64).to_le_bytes());
        f.extend_from_slice(&(records.len() as u64).to_le_bytes());
        f.extend_from_slice(&[0u8; 16]); // event types
        f.extend_from_slice(&[0u8; 32]); // no features
        assert_eq!(f.len(), 104);
        f.extend_from_slice(&7u64.to_le_bytes()); // ids at 104
        let mut attr = vec![0u8; 128];
        attr[0..4].copy_from_slice(&1u32.to_le_bytes());
        attr[4..8].copy_from_slice(&128u32.to_le_bytes());
        attr[8..16].copy_from_slice(&1u64.to_le_bytes());
        f.extend_from_slice(&attr);
        f.extend_from_slice(&104u64.to_le_bytes());
        f.extend_from_slice(&8u64.to_le_bytes());
        f.extend_from_slice(&records);
        f.truncate(f.len() - truncate);
        f
    }

    #[test]
    fn reads_a_minimal_file() {
        let data = parse_perf_data(&file(7, 0)).unwrap();
        assert_eq!(data.events.len(), 1);
        assert_eq!(data.events[0].name, "task-clock");
        assert_eq!(data.rounds.len(), 1);
        assert_eq!(data.rounds[0].kind, RoundKind::Final);
        assert_eq!(data.rounds[0].time_ns, 2_000_000);
        let v = data.rounds[0].values[0];
        assert_eq!((v.cpu, v.value, v.enabled, v.running), (-1, 700_000, 1_000_000, 500_000));
    }

    #[test]
    fn no_damage_makes_it_panic() {
        let good = file(7, 0);
        for len in 0..good.len() {
            let _ = parse_perf_data(&good[..len]);
        }
        for i in 8..good.len() {
            for value in [0u8, 1, 7, 8, 0x10, 0x7f, 0xff] {
                let mut bad = good.clone();
                bad[i] = value;
                let _ = parse_perf_data(&bad);
            }
        }
    }

    /// Every attribute's id section is the whole file: memory in the square of the file's
    /// size (1 MB took 5.36 GB, then an abort), now an error at the first id section past it.
    #[test]
    fn overlapping_id_sections_are_refused() {
        let attrs = 2000u64;
        let len = 104 + attrs * 144;
        let mut f = Vec::new();
        f.extend_from_slice(MAGIC);
        f.extend_from_slice(&104u64.to_le_bytes());
        f.extend_from_slice(&144u64.to_le_bytes());
        f.extend_from_slice(&104u64.to_le_bytes());
        f.extend_from_slice(&(attrs * 144).to_le_bytes());
        f.extend_from_slice(&len.to_le_bytes()); // an empty data section at the end
        f.extend_from_slice(&0u64.to_le_bytes());
        f.extend_from_slice(&[0u8; 48]);
        for _ in 0..attrs {
            let mut attr = vec![0u8; 128];
            attr[0..4].copy_from_slice(&1u32.to_le_bytes());
            attr[4..8].copy_from_slice(&128u32.to_le_bytes());
            f.extend_from_slice(&attr);
            f.extend_from_slice(&0u64.to_le_bytes());
            f.extend_from_slice(&len.to_le_bytes());
        }
        assert_eq!(f.len() as u64, len);
        let err = parse_perf_data(&f).unwrap_err();
        assert!(err.message.contains("overlap"), "{err}");
        assert_eq!(err.offset, 104 + 144 + 128);
    }

    #[test]
    fn damage_is_an_error_with_an_offset() {
        let err = parse_perf_data(&file(7, 10)).unwrap_err();
        assert!(err.message.contains("truncated"), "{err}");
        let err = parse_perf_data(&file(8, 0)).unwrap_err();
        assert!(err.message.contains("event id 8"), "{err}");
        assert_eq!(err.offset, 256);
        assert!(parse_perf_data(b"PERFILE2").is_err());
        assert!(parse_perf_data(b"hello").unwrap_err().message.contains("PERFILE2"));
    }
}
