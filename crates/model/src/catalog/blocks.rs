//! The catalogue's compressed tables: strings, event records and each model's list of records,
//! stored as independently deflated blocks that are inflated on their first read, and the
//! layouts `cargo xtask regen` writes them in.
//!
//! Every vintage's tables together are megabytes of text that compress sevenfold, but a run
//! reads a few hundred strings of one model: small blocks keep most of the compression (64
//! strings a block: 334 KB against 212 KB for the whole text as one stream) while a lookup
//! inflates about 2.5 KB.

use std::sync::OnceLock;

use super::EVENT_RECORD;

/// Strings in each block of the plain string table (the last block may hold fewer): string id
/// `i` is string `i % STRINGS_PER_BLOCK` of block `i / STRINGS_PER_BLOCK`. A measurement reads a
/// few dozen names and encodings scattered over the table, each read inflating its block, so
/// the blocks are small: 64 strings (about 2.5 KB) deflate to 334 KB in all, 256 to 282 KB, but
/// `stat true` then inflated 0.35 M instructions' worth of blocks to read its 38 strings.
pub const STRINGS_PER_BLOCK: usize = 64;

/// Descriptions in each block of the description table: `list` reads them in runs and
/// `describe` a few, so larger blocks cost little there and deflate better (1024 a block:
/// 510 KB in all; 256: 551 KB).
pub const DESCRIPTIONS_PER_BLOCK: usize = 1024;

/// Event records in each block of the record table (the last may hold fewer).
pub const RECORDS_PER_BLOCK: usize = 256;

/// Blocks deflated back to back (`data`) with the little-endian `u32` offset of each, then the
/// end (`index`), each decoded once, on first use.
pub(super) struct Deflated<T: 'static> {
    data: &'static [u8],
    index: &'static [u8],
    decoded: OnceLock<Box<[OnceLock<T>]>>,
}

impl<T> Deflated<T> {
    pub(super) const fn new(data: &'static [u8], index: &'static [u8]) -> Deflated<T> {
        Deflated { data, index, decoded: OnceLock::new() }
    }

    /// Number of blocks.
    pub(super) fn len(&self) -> usize {
        (self.index.len() / 4).saturating_sub(1)
    }

    /// Bytes as embedded, offsets included.
    pub(super) fn embedded_bytes(&self) -> usize {
        self.data.len() + self.index.len()
    }

    /// Block `i`, inflated and decoded by `decode` the first time it is read. `what` names the
    /// table in the panic a broken build gives.
    pub(super) fn block(
        &'static self,
        i: usize,
        what: &str,
        decode: impl FnOnce(Vec<u8>) -> T,
    ) -> &'static T {
        let blocks =
            self.decoded.get_or_init(|| (0..self.len()).map(|_| OnceLock::new()).collect());
        blocks[i].get_or_init(|| {
            let start = u32_at(self.index, i * 4) as usize;
            let end = u32_at(self.index, i * 4 + 4) as usize;
            decode(inflate(&self.data[start..end], what))
        })
    }
}

impl<T> std::fmt::Debug for Deflated<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} blocks, {} bytes", self.len(), self.embedded_bytes())
    }
}

/// Inflates a block regen deflated. The tables are part of the binary, so a failure is a broken
/// build, not bad input.
fn inflate(bytes: &[u8], what: &str) -> Vec<u8> {
    miniz_oxide::inflate::decompress_to_vec(bytes).unwrap_or_else(|err| {
        panic!("the embedded {what} do not inflate ({err:?}): rerun `cargo xtask regen`")
    })
}

pub(super) fn u32_at(bytes: &[u8], at: usize) -> u32 {
    u32::from_le_bytes([bytes[at], bytes[at + 1], bytes[at + 2], bytes[at + 3]])
}

/// One inflated block of a string table: the strings' text back to back and where each ends.
#[derive(Debug)]
pub(super) struct StringBlock {
    text: String,
    ends: Box<[u32]>,
}

impl StringBlock {
    /// Reads [`string_block`]'s layout.
    pub(super) fn decode(bytes: Vec<u8>, what: &str) -> StringBlock {
        let broken =
            || -> ! { panic!("the embedded {what} are malformed: rerun `cargo xtask regen`") };
        let mut at = 0;
        let count = read_varint(&bytes, &mut at).unwrap_or_else(|| broken());
        let mut ends = Vec::with_capacity(count.min(bytes.len() as u64) as usize);
        let mut end = 0u32;
        for _ in 0..count {
            let len = read_varint(&bytes, &mut at).unwrap_or_else(|| broken());
            end = u32::try_from(len)
                .ok()
                .and_then(|len| end.checked_add(len))
                .unwrap_or_else(|| broken());
            ends.push(end);
        }
        let text = bytes.get(at..).map(<[u8]>::to_vec).unwrap_or_else(|| broken());
        let text = String::from_utf8(text).unwrap_or_else(|_| broken());
        if text.len() != end as usize {
            broken();
        }
        StringBlock { text, ends: ends.into() }
    }

    /// String `i` of the block.
    pub(super) fn get(&self, i: usize) -> &str {
        let start = if i == 0 { 0 } else { self.ends[i - 1] as usize };
        &self.text[start..self.ends[i] as usize]
    }
}

/// A block of a string table before it is deflated: the number of strings, each one's length
/// (LEB128), then their text.
pub fn string_block<'a>(strings: impl ExactSizeIterator<Item = &'a str> + Clone) -> Vec<u8> {
    let mut out = Vec::new();
    write_varint(&mut out, strings.len() as u64);
    for s in strings.clone() {
        write_varint(&mut out, s.len() as u64);
    }
    for s in strings {
        out.extend_from_slice(s.as_bytes());
    }
    out
}

/// A block of event records before it is deflated: byte 0 of every record, then byte 1 of
/// every record, and so on. Records of a block share most of their bytes position by position
/// (the PMU, topic and unit ids, masks, flags, the high bytes of ids), so laid out by byte
/// position they deflate to 217 KB where records one after another took 385 KB.
pub fn record_block(records: &[[u8; EVENT_RECORD]]) -> Vec<u8> {
    let mut out = Vec::with_capacity(records.len() * EVENT_RECORD);
    for k in 0..EVENT_RECORD {
        out.extend(records.iter().map(|r| r[k]));
    }
    out
}

/// Reads [`record_block`]'s layout back into records one after another.
pub(super) fn decode_record_block(bytes: Vec<u8>) -> Box<[u8]> {
    if !bytes.len().is_multiple_of(EVENT_RECORD) {
        panic!("the embedded event records are malformed: rerun `cargo xtask regen`");
    }
    let n = bytes.len() / EVENT_RECORD;
    let mut out = vec![0u8; bytes.len()];
    for (k, plane) in bytes.chunks_exact(n.max(1)).enumerate() {
        for (r, &b) in plane.iter().enumerate() {
            out[r * EVENT_RECORD + k] = b;
        }
    }
    out.into()
}

/// A model's event list before it is deflated: each record number's difference from the one
/// before plus one, zigzag-encoded as LEB128 (a vintage's model mostly lists the records an
/// earlier vintage added, in order, so most differences are 1 and the list deflates to little).
pub fn event_list(records: &[u32]) -> Vec<u8> {
    let mut out = Vec::with_capacity(records.len());
    let mut previous = -1i64;
    for &r in records {
        let step = i64::from(r) - previous - 1;
        previous = i64::from(r);
        let zigzag = if step >= 0 { step * 2 } else { -step * 2 - 1 };
        write_varint(&mut out, zigzag as u64);
    }
    out
}

/// Reads [`event_list`]'s layout.
pub(super) fn decode_event_list(bytes: Vec<u8>) -> Box<[u32]> {
    let mut out = Vec::with_capacity(bytes.len());
    let (mut at, mut previous) = (0, -1i64);
    while at < bytes.len() {
        let Some(zigzag) = read_varint(&bytes, &mut at) else {
            panic!("the embedded event lists are malformed: rerun `cargo xtask regen`")
        };
        let zigzag = zigzag as i64;
        let step = if zigzag % 2 == 0 { zigzag / 2 } else { -(zigzag + 1) / 2 };
        previous += step + 1;
        out.push(previous as u32);
    }
    out.into()
}

fn write_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push(v as u8 | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn read_varint(bytes: &[u8], at: &mut usize) -> Option<u64> {
    let mut v = 0u64;
    for shift in (0..64).step_by(7) {
        let b = *bytes.get(*at)?;
        *at += 1;
        v |= u64::from(b & 0x7f) << shift;
        if b < 0x80 {
            return Some(v);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_string_block_reads_back_each_string_by_position() {
        // Lengths past 127 take two varint bytes; the empty string takes none of the text.
        let long = "x".repeat(300);
        let strings = ["", "cycles", long.as_str(), "événement"];
        let block = StringBlock::decode(string_block(strings.iter().copied()), "test strings");
        for (i, s) in strings.iter().enumerate() {
            assert_eq!(block.get(i), *s);
        }
    }

    #[test]
    fn a_record_block_reads_back_record_by_record() {
        let records: Vec<[u8; EVENT_RECORD]> =
            (0..3u8).map(|r| std::array::from_fn(|k| r * 100 + k as u8)).collect();
        let block = record_block(&records);
        // Byte 1 of the second record sits after byte 0 of all three and byte 1 of the first.
        assert_eq!(block[4], 101);
        assert_eq!(&*decode_record_block(block), records.concat());
        assert!(decode_record_block(Vec::new()).is_empty());
    }

    #[test]
    fn an_event_list_reads_back_with_steps_back_and_forward() {
        let records = [0, 1, 2, 3, 40_000, 5, 5, 6, u32::MAX >> 1, 7];
        assert_eq!(&*decode_event_list(event_list(&records)), &records);
        // A run of consecutive records is one byte each.
        assert_eq!(event_list(&[10, 11, 12, 13]), [20, 0, 0, 0]);
    }
}
