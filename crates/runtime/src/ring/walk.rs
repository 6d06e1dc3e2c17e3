//! Walking a ring's data area between `data_tail` and `data_head`: positions taken modulo
//! the size, records that wrap around the end copied whole, malformed sizes skipped to the
//! head.

use super::record::{DecodeError, HEADER_SIZE, Header, Record, SampleFormat, decode};

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
pub(super) fn index(pos: u64, size: u64) -> usize {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ring::record::tests::{format, lost, sample};
    use crate::ring::record::{RECORD_SAMPLE, Weight};

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
}
