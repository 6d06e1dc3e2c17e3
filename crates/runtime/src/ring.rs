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

mod mapping;
mod record;
mod walk;

pub use mapping::{HEAP_PAGE, MappedData, Mapping, Reader, Refresh, explain_mmap, page_size};
pub use record::{
    DecodeError, HEADER_SIZE, Header, MISC_EXACT_IP, RECORD_LOST, RECORD_SAMPLE, RECORD_THROTTLE,
    RECORD_UNTHROTTLE, Record, RingSample, SAMPLE_ADDR, SAMPLE_CPU, SAMPLE_DATA_SRC, SAMPLE_ID,
    SAMPLE_IDENTIFIER, SAMPLE_IP, SAMPLE_PERIOD, SAMPLE_PHYS_ADDR, SAMPLE_STREAM_ID, SAMPLE_TID,
    SAMPLE_TIME, SAMPLE_TRANSACTION, SAMPLE_TYPE, SAMPLE_WEIGHT, SAMPLE_WEIGHT_STRUCT,
    SampleFormat, Weight, decode,
};
pub use walk::{RingData, Walk, walk};
