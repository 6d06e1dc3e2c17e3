//! Byte layout: little-endian fields at offsets, 8-byte alignment, a feature section built up
//! field by field, and perf's CPU map encodings.

use super::NAME_ALIGN;

pub(super) fn put_u32(b: &mut [u8], at: usize, v: u32) {
    b[at..at + 4].copy_from_slice(&v.to_le_bytes());
}

pub(super) fn put_u64(b: &mut [u8], at: usize, v: u64) {
    b[at..at + 8].copy_from_slice(&v.to_le_bytes());
}

pub(super) fn align8(n: usize) -> usize {
    n.div_ceil(8) * 8
}

/// Feature section bytes, built field by field.
#[derive(Default)]
pub(super) struct Section(pub(super) Vec<u8>);

impl Section {
    pub(super) fn u32(&mut self, v: u32) -> &mut Self {
        self.0.extend_from_slice(&v.to_le_bytes());
        self
    }

    pub(super) fn u64(&mut self, v: u64) -> &mut Self {
        self.0.extend_from_slice(&v.to_le_bytes());
        self
    }

    /// perf's `do_write_string`: a `u32` length (with the NUL, padded to 64), then the
    /// padded bytes.
    pub(super) fn string(&mut self, s: &str) -> &mut Self {
        let len = (s.len() + 1).div_ceil(NAME_ALIGN) * NAME_ALIGN;
        self.u32(len as u32);
        self.0.extend_from_slice(s.as_bytes());
        self.0.resize(self.0.len() + len - s.len(), 0);
        self
    }

    pub(super) fn strings(&mut self, list: &[String]) -> &mut Self {
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
pub(super) fn cpu_map_data(cpus: &[i32]) -> Vec<u8> {
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
