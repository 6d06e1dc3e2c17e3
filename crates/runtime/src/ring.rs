//! The perf mmap ring buffer: decoding its records (`PERF_RECORD_SAMPLE`, `PERF_RECORD_LOST`,
//! throttling) from the perf_event ABI, walking them between `data_tail` and `data_head` with
//! wrap-around, and [`Mapping`], the mapped control page plus data area the kernel writes.
//!
//! # Public API
//! * [`SampleFormat::new`]`(sample_type)`: the layout of one sample record; refuses
//!   `sample_type` bits this decoder cannot place (variable-length fields) and
//!   `WEIGHT | WEIGHT_STRUCT`, which the kernel refuses too. [`SAMPLE_TYPE`] is the layout
//!   tmetric's sampler asks for.
//! * [`Header::parse`], [`decode`]`(format, record)`: one record (header included) from a
//!   contiguous byte slice, to a [`Record`] ([`RingSample`], `Lost`, `Throttle`, `Other`).
//! * [`walk`]`(ring, tail, head, format, scratch, on_record)`: every record between two ring
//!   positions, copying records that wrap around the end of the data area into `scratch`;
//!   returns the new tail and the first [`DecodeError`]. [`RingData`] is the data area: a
//!   plain `[u8]` (tests, benchmarks) or a [`Mapping`].
//! * [`Mapping`]: one mapped ring (from [`crate::Syscalls::mmap`], or [`Mapping::heap`] for
//!   tests and simulated kernels) with `data_head` (acquire load), `data_tail` (release
//!   store) and `data_offset`/`data_size`; [`Reader`] drains one mapping and advances
//!   `data_tail`. [`Mapping::share`], [`Mapping::write_data`] and [`Mapping::publish_head`]
//!   are a producer's side of a heap ring; [`Mapping::with_refresh`] lets a simulated kernel
//!   write the records due each time the reader loads `data_head`. [`explain_mmap`] gives
//!   the kernel's reasons.
//!
//! # The sample layout
//! `PERF_RECORD_SAMPLE` fields appear in this fixed ABI order (uapi `perf_event.h`), each
//! present only when its `sample_type` bit is set; every field this decoder accepts is 8
//! bytes, so a record is `8 + 8 * popcount(sample_type)` bytes:
//!
//! | bit | field |
//! |---|---|
//! | `IDENTIFIER` (1<<16) | `u64 id` |
//! | `IP` (1<<0) | `u64 ip` |
//! | `TID` (1<<1) | `u32 pid, u32 tid` |
//! | `TIME` (1<<2) | `u64 time` |
//! | `ADDR` (1<<3) | `u64 addr` |
//! | `ID` (1<<6) | `u64 id` |
//! | `STREAM_ID` (1<<9) | `u64 stream_id` |
//! | `CPU` (1<<7) | `u32 cpu, u32 res` |
//! | `PERIOD` (1<<8) | `u64 period` |
//! | `WEIGHT` (1<<14) or `WEIGHT_STRUCT` (1<<24) | `u64` weight |
//! | `DATA_SRC` (1<<15) | `u64 data_src` |
//! | `TRANSACTION` (1<<17) | `u64 transaction` |
//! | `PHYS_ADDR` (1<<19) | `u64 phys_addr` |
//!
//! `READ`, `CALLCHAIN`, `RAW`, `BRANCH_STACK`, `REGS_*`, `STACK_USER`, `AUX`, `CGROUP` and the
//! page sizes are refused: they are variable-length or depend on other attr fields.
//! `WEIGHT_STRUCT` is `union perf_sample_weight` as `{u32 var1_dw; u16 var2_w; u16 var3_w}`
//! on little-endian machines (reversed on big-endian, which is the same u64 read natively):
//! `var3_w`, bits 48-63 of the native u64, is the retire latency in cycles (Intel TPEBS).
//!
//! # Ring rules
//! The control page holds `data_head` at byte 1024, `data_tail` at 1032, `data_offset` at
//! 1040 and `data_size` at 1048 (`struct perf_event_mmap_page`). Positions only grow; the byte
//! of position `p` is at `data_offset + p % data_size`. The kernel publishes `data_head` after
//! writing the records, so the reader loads it with acquire ordering, and it stores
//! `data_tail` with release ordering after copying the records out, so the kernel (mapping
//! writable) never overwrites unread data and counts what it drops in `PERF_RECORD_LOST`.
//! Malformed input (a size below 8 or beyond the unread bytes, a head behind the tail) is a
//! [`DecodeError`]: the walk skips to the head rather than loop or panic.

use std::alloc::{Layout, alloc_zeroed, dealloc, handle_alloc_error};
use std::ptr::NonNull;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::sys::Errno;

/// `PERF_RECORD_LOST`.
pub const RECORD_LOST: u32 = 2;
/// `PERF_RECORD_THROTTLE`.
pub const RECORD_THROTTLE: u32 = 5;
/// `PERF_RECORD_UNTHROTTLE`.
pub const RECORD_UNTHROTTLE: u32 = 6;
/// `PERF_RECORD_SAMPLE`.
pub const RECORD_SAMPLE: u32 = 9;

/// `PERF_SAMPLE_IP`.
pub const SAMPLE_IP: u64 = 1 << 0;
/// `PERF_SAMPLE_TID`.
pub const SAMPLE_TID: u64 = 1 << 1;
/// `PERF_SAMPLE_TIME`.
pub const SAMPLE_TIME: u64 = 1 << 2;
/// `PERF_SAMPLE_ADDR`.
pub const SAMPLE_ADDR: u64 = 1 << 3;
/// `PERF_SAMPLE_ID`.
pub const SAMPLE_ID: u64 = 1 << 6;
/// `PERF_SAMPLE_CPU`.
pub const SAMPLE_CPU: u64 = 1 << 7;
/// `PERF_SAMPLE_PERIOD`.
pub const SAMPLE_PERIOD: u64 = 1 << 8;
/// `PERF_SAMPLE_STREAM_ID`.
pub const SAMPLE_STREAM_ID: u64 = 1 << 9;
/// `PERF_SAMPLE_WEIGHT`: the weight as one u64.
pub const SAMPLE_WEIGHT: u64 = 1 << 14;
/// `PERF_SAMPLE_DATA_SRC`.
pub const SAMPLE_DATA_SRC: u64 = 1 << 15;
/// `PERF_SAMPLE_IDENTIFIER`.
pub const SAMPLE_IDENTIFIER: u64 = 1 << 16;
/// `PERF_SAMPLE_TRANSACTION`.
pub const SAMPLE_TRANSACTION: u64 = 1 << 17;
/// `PERF_SAMPLE_PHYS_ADDR`.
pub const SAMPLE_PHYS_ADDR: u64 = 1 << 19;
/// `PERF_SAMPLE_WEIGHT_STRUCT`: the weight as `{var1_dw, var2_w, var3_w}`.
pub const SAMPLE_WEIGHT_STRUCT: u64 = 1 << 24;

/// The layout tmetric's sampler asks for: `IDENTIFIER | IP | TID | TIME | CPU |
/// WEIGHT_STRUCT`, i.e. records of `header, id, ip, pid+tid, time, cpu+res, weight` (56
/// bytes).
pub const SAMPLE_TYPE: u64 =
    SAMPLE_IDENTIFIER | SAMPLE_IP | SAMPLE_TID | SAMPLE_TIME | SAMPLE_CPU | SAMPLE_WEIGHT_STRUCT;

/// `PERF_RECORD_MISC_EXACT_IP`: the sample's ip is the exact instruction (precise sampling).
pub const MISC_EXACT_IP: u16 = 1 << 14;

/// Size of `struct perf_event_header`.
pub const HEADER_SIZE: usize = 8;

/// Byte offsets in `struct perf_event_mmap_page`.
const DATA_HEAD: usize = 1024;
const DATA_TAIL: usize = 1032;
const DATA_OFFSET: usize = 1040;
const DATA_SIZE: usize = 1048;

/// The control page's size in a [`Mapping::heap`] ring (the x86 and arm64 page size).
pub const HEAP_PAGE: usize = 4096;

/// The fields in ABI order, each 8 bytes, that [`SampleFormat`] accepts.
const ORDER: [u64; 13] = [
    SAMPLE_IDENTIFIER,
    SAMPLE_IP,
    SAMPLE_TID,
    SAMPLE_TIME,
    SAMPLE_ADDR,
    SAMPLE_ID,
    SAMPLE_STREAM_ID,
    SAMPLE_CPU,
    SAMPLE_PERIOD,
    SAMPLE_WEIGHT | SAMPLE_WEIGHT_STRUCT,
    SAMPLE_DATA_SRC,
    SAMPLE_TRANSACTION,
    SAMPLE_PHYS_ADDR,
];

/// Why a record or a ring could not be decoded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    /// A `sample_type` bit this decoder cannot place.
    #[error(
        "sample_type {sample_type:#x} has bits {unsupported:#x} this decoder does not place (only fixed 8-byte fields: IDENTIFIER, IP, TID, TIME, ADDR, ID, STREAM_ID, CPU, PERIOD, WEIGHT or WEIGHT_STRUCT, DATA_SRC, TRANSACTION, PHYS_ADDR)"
    )]
    UnsupportedSampleType {
        /// The whole `sample_type`.
        sample_type: u64,
        /// The bits refused.
        unsupported: u64,
    },
    /// `WEIGHT` and `WEIGHT_STRUCT` together (the kernel refuses the attr with EINVAL).
    #[error(
        "sample_type {0:#x} sets both WEIGHT and WEIGHT_STRUCT, which the kernel refuses (EINVAL)"
    )]
    BothWeights(u64),
    /// Fewer than 8 bytes where a header should be.
    #[error("{available} bytes left at ring position {at}, less than a record header")]
    ShortHeader {
        /// Ring position.
        at: u64,
        /// Bytes there.
        available: u64,
    },
    /// A header whose size is below the header's own or beyond the bytes written.
    #[error(
        "record at ring position {at} (type {type_}) claims {size} bytes, but {available} are unread; the ring is corrupt or overwritten"
    )]
    BadSize {
        /// Ring position.
        at: u64,
        /// The record type.
        type_: u32,
        /// The size in the header.
        size: u16,
        /// Unread bytes from this position.
        available: u64,
    },
    /// A record whose size does not match its type's layout.
    #[error(
        "{what} record of {size} bytes, expected {expected}: the sample_type does not match the event's"
    )]
    Length {
        /// Which record type.
        what: &'static str,
        /// Its size.
        size: usize,
        /// What the layout gives (the minimum for `LOST`).
        expected: usize,
    },
    /// `data_head` behind `data_tail`, or more unread bytes than the data area holds.
    #[error("data_head {head} and data_tail {tail} are inconsistent for a {size}-byte ring")]
    Positions {
        /// `data_head`.
        head: u64,
        /// `data_tail`.
        tail: u64,
        /// `data_size`.
        size: u64,
    },
}

/// The layout of `PERF_RECORD_SAMPLE` for one `sample_type`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SampleFormat {
    sample_type: u64,
    size: usize,
    /// Byte offsets in the record (header included) of the fields [`RingSample`] keeps, computed
    /// once so decoding one sample is a few loads.
    id: Option<usize>,
    ip: Option<usize>,
    tid: Option<usize>,
    time: Option<usize>,
    cpu: Option<usize>,
    period: Option<usize>,
    weight: Option<usize>,
}

impl SampleFormat {
    /// The layout of `sample_type`, or why it cannot be decoded.
    pub fn new(sample_type: u64) -> Result<SampleFormat, DecodeError> {
        if sample_type & SAMPLE_WEIGHT != 0 && sample_type & SAMPLE_WEIGHT_STRUCT != 0 {
            return Err(DecodeError::BothWeights(sample_type));
        }
        let known = ORDER.iter().fold(0, |acc, bit| acc | bit);
        let unsupported = sample_type & !known;
        if unsupported != 0 {
            return Err(DecodeError::UnsupportedSampleType { sample_type, unsupported });
        }
        let mut format = SampleFormat {
            sample_type,
            size: HEADER_SIZE,
            id: None,
            ip: None,
            tid: None,
            time: None,
            cpu: None,
            period: None,
            weight: None,
        };
        for bit in ORDER {
            if sample_type & bit == 0 {
                continue;
            }
            let at = Some(format.size);
            match bit {
                SAMPLE_IDENTIFIER => format.id = at,
                // ID duplicates IDENTIFIER; the first present wins.
                SAMPLE_ID => format.id = format.id.or(at),
                SAMPLE_IP => format.ip = at,
                SAMPLE_TID => format.tid = at,
                SAMPLE_TIME => format.time = at,
                SAMPLE_CPU => format.cpu = at,
                SAMPLE_PERIOD => format.period = at,
                b if b == SAMPLE_WEIGHT | SAMPLE_WEIGHT_STRUCT => format.weight = at,
                _ => {}
            }
            format.size += 8;
        }
        Ok(format)
    }

    /// The `sample_type`.
    pub fn sample_type(&self) -> u64 {
        self.sample_type
    }

    /// The size of one sample record, header included.
    pub fn record_size(&self) -> usize {
        self.size
    }
}

/// `struct perf_event_header`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header {
    /// `type`: `PERF_RECORD_*`.
    pub type_: u32,
    /// `misc`: `PERF_RECORD_MISC_*` bits.
    pub misc: u16,
    /// `size`: the whole record, header included.
    pub size: u16,
}

impl Header {
    /// The header at the start of `bytes`, `None` when shorter than 8 bytes.
    pub fn parse(bytes: &[u8]) -> Option<Header> {
        let b = bytes.get(..HEADER_SIZE)?;
        Some(Header {
            type_: u32::from_ne_bytes([b[0], b[1], b[2], b[3]]),
            misc: u16::from_ne_bytes([b[4], b[5]]),
            size: u16::from_ne_bytes([b[6], b[7]]),
        })
    }

    /// The 8 header bytes (for tests and simulated kernels that write records).
    pub fn to_bytes(self) -> [u8; HEADER_SIZE] {
        let mut out = [0; HEADER_SIZE];
        out[..4].copy_from_slice(&self.type_.to_ne_bytes());
        out[4..6].copy_from_slice(&self.misc.to_ne_bytes());
        out[6..].copy_from_slice(&self.size.to_ne_bytes());
        out
    }
}

/// `union perf_sample_weight`, as the native u64 the kernel writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Weight(pub u64);

impl Weight {
    /// `var1_dw`: the load/cache latency on Intel.
    pub fn var1_dw(self) -> u32 {
        self.0 as u32
    }

    /// `var2_w`: the instruction latency on Intel (PMU_FL_INSTR_LATENCY).
    pub fn var2_w(self) -> u16 {
        (self.0 >> 32) as u16
    }

    /// `var3_w`: the retire latency in cycles (Intel TPEBS); 0 on PMUs without it.
    pub fn var3_w(self) -> u16 {
        (self.0 >> 48) as u16
    }

    /// The weight of the three parts (inverse of the accessors).
    pub fn from_parts(var1_dw: u32, var2_w: u16, var3_w: u16) -> Weight {
        Weight(u64::from(var1_dw) | u64::from(var2_w) << 32 | u64::from(var3_w) << 48)
    }
}

/// One decoded `PERF_RECORD_SAMPLE` of a ring buffer: the fields tmetric uses, `None` when the layout lacks them. `ADDR`,
/// `STREAM_ID`, `DATA_SRC`, `TRANSACTION` and `PHYS_ADDR` are stepped over.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct RingSample {
    /// `misc` of the header (`MISC_EXACT_IP` for precise samples).
    pub misc: u16,
    /// `IDENTIFIER`, or `ID` when only that is present: which event (PERF_EVENT_IOC_ID).
    pub id: Option<u64>,
    /// `IP`.
    pub ip: Option<u64>,
    /// `TID`: pid and tid.
    pub pid_tid: Option<(u32, u32)>,
    /// `TIME`.
    pub time: Option<u64>,
    /// `CPU`.
    pub cpu: Option<u32>,
    /// `PERIOD`.
    pub period: Option<u64>,
    /// `WEIGHT` or `WEIGHT_STRUCT`.
    pub weight: Option<Weight>,
}

/// One decoded record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Record {
    /// `PERF_RECORD_SAMPLE`.
    Sample(RingSample),
    /// `PERF_RECORD_LOST`: the kernel dropped `lost` records of event `id` (ring full).
    Lost {
        /// The event id.
        id: u64,
        /// How many records were dropped.
        lost: u64,
    },
    /// `PERF_RECORD_THROTTLE` (`throttle`) or `UNTHROTTLE`: the kernel stopped or resumed
    /// sampling the event because its interrupt rate exceeded `perf_event_max_sample_rate`.
    Throttle {
        /// The event id.
        id: u64,
        /// Throttled (true) or unthrottled.
        throttle: bool,
    },
    /// Any other record type, skipped by its size.
    Other(Header),
}

fn u64_at(bytes: &[u8], at: usize) -> u64 {
    let mut b = [0u8; 8];
    b.copy_from_slice(&bytes[at..at + 8]);
    u64::from_ne_bytes(b)
}

fn pair_at(bytes: &[u8], at: usize) -> (u32, u32) {
    let lo = u32::from_ne_bytes([bytes[at], bytes[at + 1], bytes[at + 2], bytes[at + 3]]);
    let hi = u32::from_ne_bytes([bytes[at + 4], bytes[at + 5], bytes[at + 6], bytes[at + 7]]);
    (lo, hi)
}

/// Decodes one record, `record` being exactly its bytes, header included.
pub fn decode(format: &SampleFormat, record: &[u8]) -> Result<Record, DecodeError> {
    let header = Header::parse(record)
        .ok_or(DecodeError::ShortHeader { at: 0, available: record.len() as u64 })?;
    match header.type_ {
        RECORD_SAMPLE => {
            if record.len() != format.size {
                return Err(DecodeError::Length {
                    what: "sample",
                    size: record.len(),
                    expected: format.size,
                });
            }
            let word = |at: Option<usize>| at.map(|at| u64_at(record, at));
            let pair = |at: Option<usize>| at.map(|at| pair_at(record, at));
            let sample = RingSample {
                misc: header.misc,
                id: word(format.id),
                ip: word(format.ip),
                pid_tid: pair(format.tid),
                time: word(format.time),
                cpu: pair(format.cpu).map(|(cpu, _)| cpu),
                period: word(format.period),
                weight: word(format.weight).map(Weight),
            };
            Ok(Record::Sample(sample))
        }
        RECORD_LOST => {
            // `id, lost`, then a `sample_id` trailer when the attr has sample_id_all.
            if record.len() < HEADER_SIZE + 16 {
                return Err(DecodeError::Length {
                    what: "lost",
                    size: record.len(),
                    expected: HEADER_SIZE + 16,
                });
            }
            Ok(Record::Lost { id: u64_at(record, 8), lost: u64_at(record, 16) })
        }
        RECORD_THROTTLE | RECORD_UNTHROTTLE => {
            // `time, id, stream_id`, then the optional `sample_id` trailer.
            if record.len() < HEADER_SIZE + 24 {
                return Err(DecodeError::Length {
                    what: "throttle",
                    size: record.len(),
                    expected: HEADER_SIZE + 24,
                });
            }
            Ok(Record::Throttle {
                id: u64_at(record, 16),
                throttle: header.type_ == RECORD_THROTTLE,
            })
        }
        _ => Ok(Record::Other(header)),
    }
}

/// A ring's data area, addressed by ring position (taken modulo its size).
pub trait RingData {
    /// The data area's size in bytes (`data_size`); never 0.
    fn size(&self) -> u64;
    /// Copies `out.len()` bytes starting at ring position `pos`, wrapping at the end.
    /// `out.len()` is at most [`RingData::size`].
    fn copy_out(&self, pos: u64, out: &mut [u8]);
}

/// The byte index of ring position `pos`: a mask for the kernel's power-of-two sizes (a
/// division costs more than the rest of a record's decoding), a remainder otherwise.
fn index(pos: u64, size: u64) -> usize {
    if size.is_power_of_two() { (pos & (size - 1)) as usize } else { (pos % size) as usize }
}

impl RingData for [u8] {
    fn size(&self) -> u64 {
        self.len() as u64
    }

    fn copy_out(&self, pos: u64, out: &mut [u8]) {
        let start = index(pos, self.len() as u64);
        let first = out.len().min(self.len() - start);
        out[..first].copy_from_slice(&self[start..start + first]);
        let rest = out.len() - first;
        out[first..].copy_from_slice(&self[..rest]);
    }
}

/// What one [`walk`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Walk {
    /// The position to store into `data_tail`: the head, also after an error (the bytes from
    /// a corrupt record on cannot be framed, so they are dropped).
    pub tail: u64,
    /// Records handed to the callback.
    pub records: u64,
    /// The first malformed record or position; the walk stops there.
    pub error: Option<DecodeError>,
}

/// Decodes every record from `tail` up to `head`, calling `on_record` for each, in order.
/// A record that wraps around the end of the data area is copied whole into `scratch`
/// (reused across calls, so the steady state does not allocate).
pub fn walk<R: RingData + ?Sized>(
    ring: &R,
    tail: u64,
    head: u64,
    format: &SampleFormat,
    scratch: &mut Vec<u8>,
    mut on_record: impl FnMut(Record),
) -> Walk {
    let size = ring.size();
    let mut done = Walk { tail: head, records: 0, error: None };
    if size == 0 || head < tail || head - tail > size {
        done.error = Some(DecodeError::Positions { head, tail, size });
        return done;
    }
    let mut at = tail;
    while at < head {
        let available = head - at;
        if available < HEADER_SIZE as u64 {
            done.error = Some(DecodeError::ShortHeader { at, available });
            return done;
        }
        let mut raw = [0u8; HEADER_SIZE];
        ring.copy_out(at, &mut raw);
        let header = Header::parse(&raw).expect("8 bytes");
        let len = u64::from(header.size);
        if len < HEADER_SIZE as u64 || len > available {
            done.error = Some(DecodeError::BadSize {
                at,
                type_: header.type_,
                size: header.size,
                available,
            });
            return done;
        }
        // copy_out overwrites every byte, so only the length needs setting.
        if scratch.len() != len as usize {
            scratch.resize(len as usize, 0);
        }
        ring.copy_out(at, scratch);
        match decode(format, scratch) {
            Ok(record) => {
                on_record(record);
                done.records += 1;
            }
            Err(error) => {
                // The size framed the record, so later records are still readable.
                done.error.get_or_insert(error);
            }
        }
        at += len;
    }
    done
}

enum Backing {
    /// From `mmap(2)` of a perf event's descriptor; unmapped on drop.
    Mmap { fd: i32 },
    /// Process memory laid out like the kernel's (tests, simulated kernels), shared between
    /// the reader and a producer. The pointer points into this block. `refresh`, when set,
    /// runs before each `data_head` load: a simulated kernel writes the records due by now,
    /// as the real kernel would have written them while the reader slept.
    Heap { block: Arc<HeapBlock>, refresh: Option<Refresh> },
}

/// A producer's catch-up hook on a heap ring (see [`Mapping::with_refresh`]).
pub type Refresh = Arc<dyn Fn() + Send + Sync>;

/// Zeroed memory reached only through raw pointers and atomics (never references), so a
/// producer and a reader may hold it at once, like the kernel and a tool share a ring.
struct HeapBlock {
    ptr: NonNull<u8>,
    layout: Layout,
}

// SAFETY: the block is plain memory; all accesses are atomics or raw copies ordered by the
// ring protocol (release store of data_head, acquire load by the reader).
unsafe impl Send for HeapBlock {}
// SAFETY: as above.
unsafe impl Sync for HeapBlock {}

impl Drop for HeapBlock {
    fn drop(&mut self) {
        // SAFETY: allocated in `Mapping::heap` with this layout, freed once (last Arc).
        unsafe { dealloc(self.ptr.as_ptr(), self.layout) }
    }
}

/// One mapped ring: the control page followed by the data area. Only raw-pointer accesses
/// reach the memory (never references), since the kernel writes it concurrently.
pub struct Mapping {
    ptr: NonNull<u8>,
    len: usize,
    backing: Backing,
}

// SAFETY: the mapping is plain memory owned by this value (or shared through `HeapBlock`);
// every access is an atomic or a raw copy, so moving the owner to another thread is sound.
unsafe impl Send for Mapping {}

impl std::fmt::Debug for Mapping {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let kind = match &self.backing {
            Backing::Mmap { fd } => format!("mmap of fd {fd}"),
            Backing::Heap { .. } => "heap".to_string(),
        };
        f.debug_struct("Mapping").field("len", &self.len).field("backing", &kind).finish()
    }
}

impl Mapping {
    /// Takes ownership of an `mmap` of perf event `fd` (`len` bytes at `ptr`).
    ///
    /// # Safety
    /// `ptr` must be the start of a live, page-aligned, readable and writable shared mapping
    /// of `len` bytes returned by `mmap` for a perf event, with `len` at least two pages,
    /// that nothing else unmaps.
    pub(crate) unsafe fn from_mmap(ptr: NonNull<u8>, len: usize, fd: i32) -> Mapping {
        Mapping { ptr, len, backing: Backing::Mmap { fd } }
    }

    /// A zeroed ring in process memory laid out as the kernel's: a [`HEAP_PAGE`] control page
    /// with `data_offset` = [`HEAP_PAGE`] and `data_size` = `data_size` (rounded up to a
    /// multiple of 8, at least 8), followed by the data area. Writers use
    /// [`Mapping::write_data`] and [`Mapping::publish_head`].
    pub fn heap(data_size: usize) -> Mapping {
        Mapping::heap_exact(data_size.max(8).next_multiple_of(8))
    }

    /// A zeroed heap ring whose data area is exactly `data_size` bytes (a multiple of 8, or
    /// 0 for a control page alone, which the kernel maps too: nothing can be written there).
    pub fn heap_exact(data_size: usize) -> Mapping {
        let data_size = data_size.next_multiple_of(8);
        let len = HEAP_PAGE + data_size;
        let layout = Layout::from_size_align(len, HEAP_PAGE).expect("ring layout");
        // SAFETY: the layout has a non-zero size.
        let raw = unsafe { alloc_zeroed(layout) };
        let Some(ptr) = NonNull::new(raw) else { handle_alloc_error(layout) };
        let block = Arc::new(HeapBlock { ptr, layout });
        let mapping = Mapping { ptr, len, backing: Backing::Heap { block, refresh: None } };
        mapping.store(DATA_OFFSET, HEAP_PAGE as u64, Ordering::Relaxed);
        mapping.store(DATA_SIZE, data_size as u64, Ordering::Release);
        mapping
    }

    /// This heap ring with `refresh` run before every [`Mapping::data_head`] load (the
    /// reader's side of a simulated kernel, which produces records lazily: the hook writes
    /// whatever simulated time has made due). Kernel rings are returned unchanged.
    pub fn with_refresh(mut self, refresh: Refresh) -> Mapping {
        if let Backing::Heap { refresh: slot, .. } = &mut self.backing {
            *slot = Some(refresh);
        }
        self
    }

    fn word(&self, offset: usize) -> &AtomicU64 {
        debug_assert!(offset.is_multiple_of(8) && offset + 8 <= self.len);
        // SAFETY: offset is 8-aligned inside the mapping (page- or u64-aligned base, len at
        // least one control page), the memory lives as long as `self`, and the kernel
        // accesses these control words atomically too.
        unsafe { AtomicU64::from_ptr(self.ptr.as_ptr().add(offset).cast::<u64>()) }
    }

    fn load(&self, offset: usize, order: Ordering) -> u64 {
        self.word(offset).load(order)
    }

    fn store(&self, offset: usize, value: u64, order: Ordering) {
        self.word(offset).store(value, order)
    }

    /// The mapped length in bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the mapping is empty (never: a mapping has at least its control page).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The perf event descriptor this ring belongs to, when it came from `mmap`: the one to
    /// `poll`. `None` for heap rings.
    pub fn fd(&self) -> Option<i32> {
        match &self.backing {
            Backing::Mmap { fd } => Some(*fd),
            Backing::Heap { .. } => None,
        }
    }

    /// Another handle on the same heap ring (a producer's, for tests and simulated kernels),
    /// without the refresh hook; `None` for kernel rings, which have one owner.
    pub fn share(&self) -> Option<Mapping> {
        match &self.backing {
            Backing::Heap { block, .. } => Some(Mapping {
                ptr: self.ptr,
                len: self.len,
                backing: Backing::Heap { block: Arc::clone(block), refresh: None },
            }),
            Backing::Mmap { .. } => None,
        }
    }

    /// `data_head`, loaded with acquire ordering so the records before it are visible (after
    /// the refresh hook, when the ring has one).
    pub fn data_head(&self) -> u64 {
        if let Backing::Heap { refresh: Some(refresh), .. } = &self.backing {
            refresh();
        }
        self.load(DATA_HEAD, Ordering::Acquire)
    }

    /// `data_tail`.
    pub fn data_tail(&self) -> u64 {
        self.load(DATA_TAIL, Ordering::Acquire)
    }

    /// Stores `data_tail` with release ordering: the records before it are consumed.
    pub fn set_data_tail(&self, tail: u64) {
        self.store(DATA_TAIL, tail, Ordering::Release)
    }

    /// `(data_offset, data_size)`, checked to lie inside the mapping. Kernels before 4.1 leave
    /// both 0; the data area then starts at the first page and fills the rest.
    pub fn data_area(&self) -> Result<(usize, usize), DecodeError> {
        let offset = self.load(DATA_OFFSET, Ordering::Acquire) as usize;
        let size = self.load(DATA_SIZE, Ordering::Acquire) as usize;
        let (offset, size) = if offset == 0 && size == 0 {
            let page = page_size();
            (page, self.len.saturating_sub(page))
        } else {
            (offset, size)
        };
        if size == 0
            || offset < DATA_SIZE + 8
            || offset.checked_add(size).is_none_or(|e| e > self.len)
        {
            return Err(DecodeError::Positions { head: offset as u64, tail: 0, size: size as u64 });
        }
        Ok((offset, size))
    }

    /// The data area as a [`RingData`].
    pub fn data(&self) -> Result<MappedData<'_>, DecodeError> {
        let (offset, size) = self.data_area()?;
        Ok(MappedData { mapping: self, offset, size })
    }

    /// Writes `bytes` at ring position `pos`, wrapping (a producer's side: tests and simulated
    /// kernels). Only for heap rings; ignored on kernel rings, which only the kernel writes.
    pub fn write_data(&self, pos: u64, bytes: &[u8]) {
        let Backing::Heap { .. } = &self.backing else { return };
        let Ok((offset, size)) = self.data_area() else { return };
        for (k, &byte) in bytes.iter().enumerate().take(size) {
            let at = offset + ((pos + k as u64) % size as u64) as usize;
            // SAFETY: `at` is inside the data area, inside the allocation `self` owns.
            unsafe { self.ptr.as_ptr().add(at).write(byte) };
        }
    }

    /// Stores `data_head` with release ordering (producer's side, heap rings only).
    pub fn publish_head(&self, head: u64) {
        if let Backing::Heap { .. } = &self.backing {
            self.store(DATA_HEAD, head, Ordering::Release);
        }
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        if let Backing::Mmap { .. } = &self.backing {
            // SAFETY: `ptr`/`len` are exactly what mmap returned (see `from_mmap`), and no
            // access outlives `self`.
            unsafe {
                libc::munmap(self.ptr.as_ptr().cast(), self.len);
            }
        }
    }
}

/// The data area of a [`Mapping`].
#[derive(Debug, Clone, Copy)]
pub struct MappedData<'a> {
    mapping: &'a Mapping,
    offset: usize,
    size: usize,
}

impl RingData for MappedData<'_> {
    fn size(&self) -> u64 {
        self.size as u64
    }

    fn copy_out(&self, pos: u64, out: &mut [u8]) {
        let start = index(pos, self.size as u64);
        let first = out.len().min(self.size - start);
        let base = self.mapping.ptr.as_ptr();
        // SAFETY: both ranges lie in the data area (`data_area` checked it against the
        // mapping's length) and `out` is ours; the bytes between tail and head are not written
        // by the kernel until data_tail moves past them.
        unsafe {
            std::ptr::copy_nonoverlapping(base.add(self.offset + start), out.as_mut_ptr(), first);
            std::ptr::copy_nonoverlapping(
                base.add(self.offset),
                out.as_mut_ptr().add(first),
                out.len() - first,
            );
        }
    }
}

/// The system page size.
pub fn page_size() -> usize {
    // SAFETY: sysconf reads a constant of the C library.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if page > 0 { page as usize } else { 4096 }
}

/// Drains one [`Mapping`]: decodes the records between `data_tail` and `data_head`, then
/// advances `data_tail`.
#[derive(Debug)]
pub struct Reader {
    mapping: Mapping,
    format: SampleFormat,
    scratch: Vec<u8>,
}

impl Reader {
    /// A reader of `mapping` whose samples have `format`.
    pub fn new(mapping: Mapping, format: SampleFormat) -> Reader {
        Reader { mapping, format, scratch: Vec::with_capacity(format.record_size()) }
    }

    /// The mapping.
    pub fn mapping(&self) -> &Mapping {
        &self.mapping
    }

    /// Hands every unread record to `on_record` and releases its bytes to the kernel.
    pub fn drain(&mut self, on_record: impl FnMut(Record)) -> Walk {
        let head = self.mapping.data_head();
        let tail = self.mapping.data_tail();
        let data = match self.mapping.data() {
            Ok(data) => data,
            Err(error) => return Walk { tail, records: 0, error: Some(error) },
        };
        let walk = walk(&data, tail, head, &self.format, &mut self.scratch, on_record);
        self.mapping.set_data_tail(walk.tail);
        walk
    }
}

/// The kernel's likely reason for refusing to map a ring.
pub fn explain_mmap(errno: Errno) -> &'static str {
    match errno.0 {
        libc::EPERM => {
            "the rings exceed the locked-memory allowance: use fewer data pages, or raise /proc/sys/kernel/perf_event_mlock_kb"
        }
        libc::EINVAL => "the data area must be a power-of-two number of pages",
        libc::ENOSYS => "this backend cannot map ring buffers",
        libc::ENOMEM => "out of memory for the ring",
        _ => "mmap of the event's ring buffer failed",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A sample record of [`SAMPLE_TYPE`] built field by field from the ABI.
    fn sample(id: u64, ip: u64, pid: u32, tid: u32, time: u64, cpu: u32, weight: u64) -> Vec<u8> {
        let mut out =
            Header { type_: RECORD_SAMPLE, misc: MISC_EXACT_IP, size: 56 }.to_bytes().to_vec();
        out.extend_from_slice(&id.to_ne_bytes());
        out.extend_from_slice(&ip.to_ne_bytes());
        out.extend_from_slice(&pid.to_ne_bytes());
        out.extend_from_slice(&tid.to_ne_bytes());
        out.extend_from_slice(&time.to_ne_bytes());
        out.extend_from_slice(&cpu.to_ne_bytes());
        out.extend_from_slice(&0u32.to_ne_bytes());
        out.extend_from_slice(&weight.to_ne_bytes());
        out
    }

    fn lost(id: u64, n: u64) -> Vec<u8> {
        let mut out = Header { type_: RECORD_LOST, misc: 0, size: 24 }.to_bytes().to_vec();
        out.extend_from_slice(&id.to_ne_bytes());
        out.extend_from_slice(&n.to_ne_bytes());
        out
    }

    fn format() -> SampleFormat {
        SampleFormat::new(SAMPLE_TYPE).unwrap()
    }

    fn collect<R: RingData + ?Sized>(
        ring: &R,
        tail: u64,
        head: u64,
        f: &SampleFormat,
    ) -> (Vec<Record>, Walk) {
        let mut out = Vec::new();
        let walk = walk(ring, tail, head, f, &mut Vec::new(), |r| out.push(r));
        (out, walk)
    }

    #[test]
    fn weight_struct_parts() {
        let w = Weight::from_parts(0x1122_3344, 0x5566, 0x7788);
        assert_eq!(w.0, 0x7788_5566_1122_3344);
        assert_eq!((w.var1_dw(), w.var2_w(), w.var3_w()), (0x1122_3344, 0x5566, 0x7788));
        // The ABI struct {u32 var1_dw; u16 var2_w; u16 var3_w} on little-endian: var3_w is
        // the last two bytes of the u64.
        if cfg!(target_endian = "little") {
            let bytes = w.0.to_ne_bytes();
            assert_eq!(u16::from_ne_bytes([bytes[6], bytes[7]]), 0x7788);
            assert_eq!(u16::from_ne_bytes([bytes[4], bytes[5]]), 0x5566);
        }
    }

    #[test]
    fn sample_with_the_weight_struct() {
        let bytes =
            sample(42, 0xffff_8000_1234, 7, 8, 1_000_000, 3, Weight::from_parts(5, 6, 123).0);
        assert_eq!(format().record_size(), 56);
        let Record::Sample(s) = decode(&format(), &bytes).unwrap() else { panic!("not a sample") };
        assert_eq!(s.id, Some(42));
        assert_eq!(s.ip, Some(0xffff_8000_1234));
        assert_eq!(s.pid_tid, Some((7, 8)));
        assert_eq!(s.time, Some(1_000_000));
        assert_eq!(s.cpu, Some(3));
        assert_eq!(s.period, None);
        assert_eq!(s.misc & MISC_EXACT_IP, MISC_EXACT_IP);
        assert_eq!(s.weight.unwrap().var3_w(), 123);
        assert_eq!(s.weight.unwrap().var2_w(), 6);
    }

    #[test]
    fn sample_without_the_weight_struct() {
        // IDENTIFIER | TID | CPU | PERIOD: id, pid+tid, cpu+res, period (40 bytes).
        let f =
            SampleFormat::new(SAMPLE_IDENTIFIER | SAMPLE_TID | SAMPLE_CPU | SAMPLE_PERIOD).unwrap();
        assert_eq!(f.record_size(), 40);
        let mut bytes = Header { type_: RECORD_SAMPLE, misc: 0, size: 40 }.to_bytes().to_vec();
        for word in [9u64, 0x0000_0002_0000_0001, 5, 10_000] {
            bytes.extend_from_slice(&word.to_ne_bytes());
        }
        let Record::Sample(s) = decode(&f, &bytes).unwrap() else { panic!("not a sample") };
        assert_eq!(s.id, Some(9));
        assert_eq!(s.ip, None);
        assert_eq!(s.pid_tid, Some((1, 2)));
        assert_eq!(s.cpu, Some(5));
        assert_eq!(s.period, Some(10_000));
        assert_eq!(s.weight, None);
        // The same bytes read with the wrong layout are refused, not misread.
        assert_eq!(
            decode(&format(), &bytes),
            Err(DecodeError::Length { what: "sample", size: 40, expected: 56 })
        );
    }

    #[test]
    fn plain_weight_and_id_only() {
        // ID (not IDENTIFIER) | WEIGHT: the u64 weight sits after the id.
        let f = SampleFormat::new(SAMPLE_ID | SAMPLE_WEIGHT).unwrap();
        let mut bytes = Header { type_: RECORD_SAMPLE, misc: 0, size: 24 }.to_bytes().to_vec();
        bytes.extend_from_slice(&77u64.to_ne_bytes());
        bytes.extend_from_slice(&300u64.to_ne_bytes());
        let Record::Sample(s) = decode(&f, &bytes).unwrap() else { panic!("not a sample") };
        assert_eq!((s.id, s.weight), (Some(77), Some(Weight(300))));
    }

    #[test]
    fn formats_the_decoder_cannot_place_are_refused() {
        assert_eq!(
            SampleFormat::new(SAMPLE_WEIGHT | SAMPLE_WEIGHT_STRUCT),
            Err(DecodeError::BothWeights(SAMPLE_WEIGHT | SAMPLE_WEIGHT_STRUCT))
        );
        // CALLCHAIN (1<<5) is variable-length.
        let err = SampleFormat::new(SAMPLE_IP | 1 << 5).unwrap_err();
        assert_eq!(
            err,
            DecodeError::UnsupportedSampleType { sample_type: 0x21, unsupported: 0x20 }
        );
        assert!(err.to_string().contains("0x20"));
    }

    #[test]
    fn lost_and_throttle_records() {
        assert_eq!(decode(&format(), &lost(42, 17)).unwrap(), Record::Lost { id: 42, lost: 17 });
        // With sample_id_all the kernel appends a trailer; the id and count stay in front.
        let mut trailer = lost(42, 3);
        trailer[6..8].copy_from_slice(&32u16.to_ne_bytes());
        trailer.extend_from_slice(&9u64.to_ne_bytes());
        assert_eq!(decode(&format(), &trailer).unwrap(), Record::Lost { id: 42, lost: 3 });
        let mut short = lost(1, 1);
        short.truncate(16);
        assert!(matches!(decode(&format(), &short), Err(DecodeError::Length { what: "lost", .. })));
        let mut throttle = Header { type_: RECORD_THROTTLE, misc: 0, size: 32 }.to_bytes().to_vec();
        for word in [123u64, 42, 42] {
            throttle.extend_from_slice(&word.to_ne_bytes());
        }
        assert_eq!(
            decode(&format(), &throttle).unwrap(),
            Record::Throttle { id: 42, throttle: true }
        );
        let mut comm = Header { type_: 3, misc: 0, size: 16 }.to_bytes().to_vec();
        comm.extend_from_slice(b"sh\0\0\0\0\0\0");
        assert!(matches!(
            decode(&format(), &comm).unwrap(),
            Record::Other(Header { type_: 3, .. })
        ));
    }

    #[test]
    fn walk_reads_records_in_order() {
        let mut ring = vec![0u8; 256];
        let mut data = sample(1, 2, 3, 4, 5, 0, Weight::from_parts(0, 0, 40).0);
        data.extend(lost(1, 9));
        data.extend(sample(1, 2, 3, 4, 6, 1, Weight::from_parts(0, 0, 50).0));
        ring[..data.len()].copy_from_slice(&data);
        let (records, walk) = collect(&ring[..], 0, data.len() as u64, &format());
        assert_eq!(walk, Walk { tail: 136, records: 3, error: None });
        assert_eq!(records.len(), 3);
        assert_eq!(records[1], Record::Lost { id: 1, lost: 9 });
        let Record::Sample(last) = records[2] else { panic!() };
        assert_eq!((last.cpu, last.weight.unwrap().var3_w()), (Some(1), 50));
        // Nothing unread: nothing decoded, the tail stays.
        let (records, walk) = collect(&ring[..], 136, 136, &format());
        assert!(records.is_empty());
        assert_eq!(walk, Walk { tail: 136, records: 0, error: None });
    }

    /// Writes `bytes` into a ring at position `pos`, wrapping, as the kernel does.
    fn put(ring: &mut [u8], pos: u64, bytes: &[u8]) {
        for (k, b) in bytes.iter().enumerate() {
            let n = ring.len() as u64;
            ring[((pos + k as u64) % n) as usize] = *b;
        }
    }

    #[test]
    fn records_that_wrap_around_the_end() {
        // A 128-byte ring whose positions have passed the end several times: the second sample
        // starts 16 bytes before the end (its header and id there, the rest at the start), and
        // a third record's header itself is split 4/4.
        let mut ring = vec![0xeeu8; 128];
        let start = 3 * 128 + 56;
        let first = sample(7, 1, 1, 1, 1, 0, Weight::from_parts(0, 0, 11).0);
        let second = sample(7, 2, 2, 2, 2, 1, Weight::from_parts(0, 0, 22).0);
        put(&mut ring, start, &first);
        put(&mut ring, start + 56, &second);
        let (records, walk) = collect(&ring[..], start, start + 112, &format());
        assert_eq!(walk.error, None);
        let latencies: Vec<u16> = records
            .iter()
            .map(|r| match r {
                Record::Sample(s) => s.weight.unwrap().var3_w(),
                _ => panic!("{r:?}"),
            })
            .collect();
        assert_eq!(latencies, [11, 22]);
        assert_eq!(walk.tail, start + 112);

        let at = 5 * 128 - 4;
        let third = lost(7, 5);
        put(&mut ring, at, &third);
        let (records, walk) = collect(&ring[..], at, at + 24, &format());
        assert_eq!((records, walk.error), (vec![Record::Lost { id: 7, lost: 5 }], None));
    }

    #[test]
    fn garbage_never_panics_and_skips_to_the_head() {
        let f = format();
        let mut ring = vec![0u8; 64];
        // Size 0: would loop for ever if trusted.
        put(&mut ring, 0, &Header { type_: RECORD_SAMPLE, misc: 0, size: 0 }.to_bytes());
        let (records, walk) = collect(&ring[..], 0, 32, &f);
        assert!(records.is_empty());
        assert_eq!(walk.tail, 32);
        assert!(matches!(walk.error, Some(DecodeError::BadSize { size: 0, .. })));
        // Size beyond the unread bytes (and beyond the ring).
        put(&mut ring, 0, &Header { type_: RECORD_SAMPLE, misc: 0, size: 60000 }.to_bytes());
        let (_, walk) = collect(&ring[..], 0, 64, &f);
        assert_eq!(walk.tail, 64);
        assert!(matches!(
            walk.error,
            Some(DecodeError::BadSize { size: 60000, available: 64, .. })
        ));
        // Fewer than 8 unread bytes.
        let (_, walk) = collect(&ring[..], 0, 5, &f);
        assert_eq!(walk.error, Some(DecodeError::ShortHeader { at: 0, available: 5 }));
        // Head behind tail, or more unread than the ring holds.
        let (_, walk) = collect(&ring[..], 10, 2, &f);
        assert!(matches!(walk.error, Some(DecodeError::Positions { .. })));
        let (_, walk) = collect(&ring[..], 0, 65, &f);
        assert!(matches!(walk.error, Some(DecodeError::Positions { .. })));
        // An empty ring.
        let (_, walk) = collect(&[][..], 0, 8, &f);
        assert!(matches!(walk.error, Some(DecodeError::Positions { .. })));
        // A framed record of the wrong length is reported, and the next one still decodes.
        let mut ring = vec![0u8; 128];
        put(&mut ring, 0, &Header { type_: RECORD_SAMPLE, misc: 0, size: 16 }.to_bytes());
        put(&mut ring, 16, &lost(3, 4));
        let (records, walk) = collect(&ring[..], 0, 40, &f);
        assert_eq!(records, [Record::Lost { id: 3, lost: 4 }]);
        assert!(matches!(walk.error, Some(DecodeError::Length { size: 16, .. })));
        // Random bytes at every offset: whatever they say, no panic and the tail reaches head.
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let noise: Vec<u8> = (0..512)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x as u8
            })
            .collect();
        for start in 0..64u64 {
            let (_, walk) = collect(&noise[..], start, start + 300, &f);
            assert_eq!(walk.tail, start + 300);
        }
    }

    #[test]
    fn heap_mapping_reader_advances_the_tail() {
        let ring = Mapping::heap(128);
        assert_eq!(ring.data_area().unwrap(), (HEAP_PAGE, 128));
        assert_eq!(ring.fd(), None);
        let mut reader = Reader::new(ring, format());
        let mut head = 0;
        let mut seen = Vec::new();
        // Three rounds of two samples: the positions pass the 128-byte end twice.
        for round in 0..3u16 {
            for k in 0..2u16 {
                let bytes = sample(1, 0, 0, 0, 0, 0, Weight::from_parts(0, 0, round * 10 + k).0);
                reader.mapping().write_data(head, &bytes);
                head += bytes.len() as u64;
            }
            reader.mapping().publish_head(head);
            let walk = reader.drain(|r| {
                if let Record::Sample(s) = r {
                    seen.push(s.weight.unwrap().var3_w());
                }
            });
            assert_eq!((walk.records, walk.error), (2, None));
            assert_eq!(reader.mapping().data_tail(), head);
        }
        assert_eq!(seen, [0, 1, 10, 11, 20, 21]);
    }
}
