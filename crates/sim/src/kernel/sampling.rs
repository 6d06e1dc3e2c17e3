//! Sampling in the simulated kernel: a sampling event's state and ring, the retire latencies
//! its samples carry, and the sample and lost records written as simulated time passes.

use super::{Home, Init, MISC_USER, State};
use crate::machine::PmuClass;
use tmetric_runtime::ring;
use tmetric_runtime::sys::Attr;

impl State {
    /// The retire latency of each sample of one period for a new sampling event: the
    /// profile's, for precise (PEBS) events of an Intel core PMU when the machine has
    /// PMU_FL_RETIRE_LATENCY; 0 otherwise, as `ds.c` leaves `var3_w` without the feature and
    /// non-PEBS samples have no weight.
    pub(super) fn latencies(&self, init: &Init, attr: &Attr) -> Vec<u16> {
        let core = match init.home {
            Home::Hw(p) => match &self.machine.pmus[p].class {
                PmuClass::X86Core(core) if !core.kind.is_amd() => {
                    Some((core, self.machine.pmus[p].name.as_str()))
                }
                _ => None,
            },
            Home::Soft => None,
        };
        match core {
            Some((core, pmu)) if attr.precise_ip > 0 && self.machine.retire_latency => self
                .profile
                .retire_latencies(core, pmu, init.kept)
                .into_iter()
                .flat_map(|(cycles, n)| std::iter::repeat_n(cycles, n as usize))
                .collect(),
            _ => vec![0],
        }
    }

    /// Writes the samples that running time has made due into each mapped ring, a whole
    /// period of the profile's latencies at a time (so statistics over the samples are the
    /// period's, computable by hand), honouring `data_tail`: a sample that does not fit is
    /// counted lost, and the next one that fits is preceded by PERF_RECORD_LOST
    /// (`perf_output_begin`). Samples due before the ring was mapped are dropped unseen, as
    /// the kernel drops them without a buffer.
    pub(super) fn emit_samples(&mut self) {
        let now = self.now;
        for e in self.events.values_mut() {
            let Some(s) = e.sampling.as_mut() else { continue };
            let per_period = s.latencies.len().max(1) as u64;
            let due = if s.freq {
                (u128::from(e.running_ns) * u128::from(s.period) / 1_000_000_000) as u64
            } else {
                e.count as u64 / s.period
            };
            let due = due / per_period * per_period;
            let Some(SimRing(ring)) = e.ring.as_ref() else {
                s.taken = due;
                continue;
            };
            // Events per sample, for PERF_SAMPLE_PERIOD.
            let period =
                if s.freq { (e.rate.per_sec(0) as u64) / s.period.max(1) } else { s.period };
            while s.taken < due {
                let latency = s.latencies[(s.taken % per_period) as usize];
                let record = sample_record(s, e.id, e.cpu, e.task, now, period, latency);
                let lost = (s.pending_lost > 0).then(|| lost_record(e.id, s.pending_lost));
                let need = record.len() + lost.as_ref().map_or(0, Vec::len);
                if !has_room(ring, need) {
                    // Nothing frees space until the reader moves data_tail: the rest of what
                    // is due is lost too.
                    let rest = due - s.taken;
                    s.lost += rest;
                    s.pending_lost += rest;
                    s.taken = due;
                    break;
                }
                if let Some(lost) = lost {
                    put(ring, &lost);
                    s.pending_lost = 0;
                }
                put(ring, &record);
                s.taken += 1;
            }
        }
    }
}

/// How a sampling event samples, and what its ring has seen.
#[derive(Debug, Clone)]
pub(super) struct Sampling {
    /// `freq`: `period` is samples per second of running time; else events per sample.
    pub(super) freq: bool,
    pub(super) period: u64,
    pub(super) sample_type: u64,
    /// Precise (PEBS on x86): samples carry MISC_EXACT_IP and, with PMU_FL_RETIRE_LATENCY,
    /// the retire latency.
    pub(super) precise: bool,
    /// The retire latency of each sample of one period, in write order.
    pub(super) latencies: Vec<u16>,
    /// Samples taken so far (written or lost).
    pub(super) taken: u64,
    /// Samples dropped since the last PERF_RECORD_LOST (`rb->lost`).
    pub(super) pending_lost: u64,
    /// Every sample dropped (`event->lost_samples`, read with PERF_FORMAT_LOST).
    pub(super) lost: u64,
}

/// The producer's handle on a mapped ring.
#[derive(Debug)]
pub(super) struct SimRing(pub(super) ring::Mapping);

impl Clone for SimRing {
    fn clone(&self) -> SimRing {
        SimRing(self.0.share().expect("simulated rings live on the heap"))
    }
}

/// One PERF_RECORD_SAMPLE with the fields of `s.sample_type`, in the ABI's order.
fn sample_record(
    s: &Sampling,
    id: u64,
    cpu: u32,
    task: Option<i32>,
    now: u64,
    period: u64,
    latency: u16,
) -> Vec<u8> {
    let t = s.sample_type;
    let pid = task.unwrap_or(0).max(0) as u32;
    let ip = 0x0040_1000 + (s.taken % 64) * 4;
    let fields: [(u64, u64); 13] = [
        (ring::SAMPLE_IDENTIFIER, id),
        (ring::SAMPLE_IP, ip),
        (ring::SAMPLE_TID, u64::from(pid) | u64::from(pid) << 32),
        (ring::SAMPLE_TIME, now),
        (ring::SAMPLE_ADDR, 0),
        (ring::SAMPLE_ID, id),
        (ring::SAMPLE_STREAM_ID, id),
        (ring::SAMPLE_CPU, u64::from(cpu)),
        (ring::SAMPLE_PERIOD, period),
        // The weight: var3_w for WEIGHT_STRUCT; the plain WEIGHT holds load latency, which
        // the simulator does not model (0).
        (ring::SAMPLE_WEIGHT_STRUCT, ring::Weight::from_parts(0, 0, latency).0),
        (ring::SAMPLE_DATA_SRC, 0),
        (ring::SAMPLE_TRANSACTION, 0),
        (ring::SAMPLE_PHYS_ADDR, 0),
    ];
    let mut body = Vec::with_capacity(8 * 14);
    for (bit, value) in fields {
        if bit == ring::SAMPLE_WEIGHT_STRUCT && t & ring::SAMPLE_WEIGHT != 0 {
            body.extend_from_slice(&0u64.to_ne_bytes());
        } else if t & bit != 0 {
            body.extend_from_slice(&value.to_ne_bytes());
        }
    }
    let misc = MISC_USER | if s.precise { ring::MISC_EXACT_IP } else { 0 };
    let size = (ring::HEADER_SIZE + body.len()) as u16;
    let mut out = ring::Header { type_: ring::RECORD_SAMPLE, misc, size }.to_bytes().to_vec();
    out.extend_from_slice(&body);
    out
}

/// PERF_RECORD_LOST: `id, lost` (no `sample_id` trailer: tmetric never sets sample_id_all).
fn lost_record(id: u64, lost: u64) -> Vec<u8> {
    let mut out = ring::Header { type_: ring::RECORD_LOST, misc: 0, size: 24 }.to_bytes().to_vec();
    out.extend_from_slice(&id.to_ne_bytes());
    out.extend_from_slice(&lost.to_ne_bytes());
    out
}

/// Whether `need` bytes fit between `data_head` and the reader's `data_tail`. A tail the
/// reader moved past the head makes the unread span huge, so nothing fits, as in
/// `perf_output_space`.
fn has_room(ring: &ring::Mapping, need: usize) -> bool {
    let Ok((_, size)) = ring.data_area() else { return false };
    let unread = ring.data_head().wrapping_sub(ring.data_tail());
    unread <= size as u64 && size as u64 - unread >= need as u64
}

/// Appends `bytes` at `data_head` and publishes the new head.
fn put(ring: &ring::Mapping, bytes: &[u8]) {
    let head = ring.data_head();
    ring.write_data(head, bytes);
    ring.publish_head(head + bytes.len() as u64);
}
