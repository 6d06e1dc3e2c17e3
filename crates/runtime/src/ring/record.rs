//! Records of the perf mmap ring: their types and `sample_type` bits (uapi
//! `perf_event.h`), the layout of one sample ([`SampleFormat`]) and the decoding of one record
//! from contiguous bytes ([`decode`]).

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

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A sample record of [`SAMPLE_TYPE`] built field by field from the ABI.
    pub(crate) fn sample(
        id: u64,
        ip: u64,
        pid: u32,
        tid: u32,
        time: u64,
        cpu: u32,
        weight: u64,
    ) -> Vec<u8> {
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

    pub(crate) fn lost(id: u64, n: u64) -> Vec<u8> {
        let mut out = Header { type_: RECORD_LOST, misc: 0, size: 24 }.to_bytes().to_vec();
        out.extend_from_slice(&id.to_ne_bytes());
        out.extend_from_slice(&n.to_ne_bytes());
        out
    }

    pub(crate) fn format() -> SampleFormat {
        SampleFormat::new(SAMPLE_TYPE).unwrap()
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
}
