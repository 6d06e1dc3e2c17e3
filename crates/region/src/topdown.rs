//! PERF_METRICS decoding for regions read with `rdpmc` (perf's `topdown.txt`, Linux 6.12):
//! the 8-bit fields, slots-scaled at each read and differenced between reads (never an
//! average of fractions), level 2 on Sapphire Rapids and later with the siblings as
//! differences, and the reset schedule that keeps the 8-bit fields precise.

/// `rdpmc` selector bit for fixed counters.
pub const RDPMC_FIXED: u32 = 1 << 30;
/// Fixed counter 3 counts `slots`.
pub const FIXED_COUNTER_SLOTS: u32 = 3;
/// `rdpmc` selector of `slots`.
pub const SLOTS_SELECTOR: u32 = RDPMC_FIXED | FIXED_COUNTER_SLOTS;
/// `rdpmc` selector of PERF_METRICS (the kernel publishes it as a metric event's
/// `index - 1`).
pub const METRICS_SELECTOR: u32 = 1 << 29;

/// Field `i` (0..8) of a PERF_METRICS value: a fraction of slots in 255ths.
pub fn field(metrics: u64, i: usize) -> u64 {
    (metrics >> (8 * i)) & 0xff
}

/// The PERF_METRICS field a topdown metric event reads: `event=0x00,umask=0x8N` is field N
/// (retiring 0x80, bad spec 0x81, fe bound 0x82, be bound 0x83, heavy ops 0x84, br mispredict
/// 0x85, fetch lat 0x86, mem bound 0x87). `None` for any other config.
pub fn field_of_config(config: u64) -> Option<usize> {
    let event = config & 0xff;
    let umask = (config >> 8) & 0xff;
    (event == 0 && (0x80..=0x87).contains(&umask) && config >> 16 == 0)
        .then(|| (umask - 0x80) as usize)
}

/// `slots` config (fixed counter 3's pseudo event `event=0x00,umask=0x04`).
pub const SLOTS_CONFIG: u64 = 0x0400;

/// `slots` and PERF_METRICS read together with `rdpmc` (raw: both since the last hardware
/// reset, which the kernel does on every `read()`, every reschedule and
/// `PERF_EVENT_IOC_RESET`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TopdownRead {
    /// Raw fixed counter 3.
    pub slots: u64,
    /// Raw PERF_METRICS.
    pub metrics: u64,
}

impl TopdownRead {
    /// Field `i` scaled by slots, in 255ths of a slot: exact integer arithmetic (255 * 2^48
    /// fits easily in u128).
    pub fn scaled(&self, i: usize) -> u128 {
        u128::from(field(self.metrics, i)) * u128::from(self.slots)
    }
}

/// Level 1 as fractions of the region's slots (0..1).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Level1 {
    /// Retiring.
    pub retiring: f64,
    /// Bad speculation.
    pub bad_speculation: f64,
    /// Frontend bound.
    pub frontend_bound: f64,
    /// Backend bound.
    pub backend_bound: f64,
}

impl Level1 {
    /// The four fractions' sum: 1 up to rounding, since the fields of every read add to 0xff.
    pub fn sum(&self) -> f64 {
        self.retiring + self.bad_speculation + self.frontend_bound + self.backend_bound
    }
}

/// Level 2 (Sapphire Rapids and later) as fractions of the region's slots.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Level2 {
    /// Heavy operations (field 4).
    pub heavy_operations: f64,
    /// Light operations = retiring - heavy operations.
    pub light_operations: f64,
    /// Branch mispredicts (field 5).
    pub branch_mispredicts: f64,
    /// Machine clears = bad speculation - branch mispredicts.
    pub machine_clears: f64,
    /// Fetch latency (field 6).
    pub fetch_latency: f64,
    /// Fetch bandwidth = frontend bound - fetch latency.
    pub fetch_bandwidth: f64,
    /// Memory bound (field 7).
    pub memory_bound: f64,
    /// Core bound = backend bound - memory bound.
    pub core_bound: f64,
}

/// A region's topdown breakdown.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Topdown {
    /// Slots in the region.
    pub slots: u64,
    /// Level 1.
    pub level1: Level1,
    /// Level 2, when the PMU has the 8-field PERF_METRICS.
    pub level2: Option<Level2>,
    /// Worst-case error of each fraction from the 8-bit rounding of both reads, as a fraction
    /// (each field is within half a 255th of its true value at each read).
    pub error_bound: f64,
}

/// Why two reads give no breakdown.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum TopdownError {
    /// slots went down: the hardware was reset between the reads (a reschedule or a
    /// `read()`), so the raw values do not share a base.
    #[error("slots went from {before} to {after}: the counters were reset between the reads")]
    Reset {
        /// slots at the first read.
        before: u64,
        /// slots at the second read.
        after: u64,
    },
    /// No slots elapsed.
    #[error("no slots elapsed between the reads")]
    Empty,
}

/// Per-field slots of the region, in 255ths of a slot: `field_b * slots_b - field_a *
/// slots_a` (perf's topdown.txt, "compute delta scaled metrics between b and a").
pub fn field_slots(a: TopdownRead, b: TopdownRead, i: usize) -> i128 {
    b.scaled(i) as i128 - a.scaled(i) as i128
}

/// The breakdown of the region between reads `a` and `b`; `level2` when the PMU has the
/// level-2 fields (fields 4..7).
pub fn between(a: TopdownRead, b: TopdownRead, level2: bool) -> Result<Topdown, TopdownError> {
    if b.slots < a.slots {
        return Err(TopdownError::Reset { before: a.slots, after: b.slots });
    }
    let slots = b.slots - a.slots;
    if slots == 0 {
        return Err(TopdownError::Empty);
    }
    // topdown.txt divides the scaled slots by the slots delta but leaves out the 255 the
    // fields are in; the fractions need it.
    let ratio = |i: usize| field_slots(a, b, i) as f64 / (255.0 * slots as f64);
    let level1 = Level1 {
        retiring: ratio(0),
        bad_speculation: ratio(1),
        frontend_bound: ratio(2),
        backend_bound: ratio(3),
    };
    let level2 = level2.then(|| {
        let (heavy, mispredict, latency, memory) = (ratio(4), ratio(5), ratio(6), ratio(7));
        Level2 {
            heavy_operations: heavy,
            light_operations: level1.retiring - heavy,
            branch_mispredicts: mispredict,
            machine_clears: level1.bad_speculation - mispredict,
            fetch_latency: latency,
            fetch_bandwidth: level1.frontend_bound - latency,
            memory_bound: memory,
            core_bound: level1.backend_bound - memory,
        }
    });
    let error_bound = 0.5 * (a.slots + b.slots) as f64 / (255.0 * slots as f64);
    Ok(Topdown { slots, level1, level2, error_bound })
}

/// When a region's `start` resets `slots` and PERF_METRICS together
/// (`PERF_EVENT_IOC_RESET` on the `slots` leader with `PERF_IOC_FLAG_GROUP`).
///
/// The rule: the rounding error of a region's fraction is at most
/// `(slots_a + slots_b) / (2 * 255 * (slots_b - slots_a))` (half a 255th at each read, scaled
/// by the slots since the last reset), so it grows with the slots accumulated before the
/// region relative to the region's own length. A start resets when nothing is known yet
/// (the first region) or when the slots since the last reset exceed `ratio` times the last
/// region's slots. With the default `ratio` 1 the bound stays below
/// `(1 + 2) / (2 * 255)` = 0.59 percentage points for a region as long as the last one,
/// and the reset (one ioctl) is paid only when the accumulated slots have grown past a
/// region's worth. A region much shorter than its predecessor can still see a larger
/// bound; [`Topdown::error_bound`] reports the actual one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ResetSchedule {
    /// Slots since the last reset allowed before a start, in units of the last region.
    pub ratio: u64,
}

impl Default for ResetSchedule {
    fn default() -> ResetSchedule {
        ResetSchedule { ratio: 1 }
    }
}

impl ResetSchedule {
    /// Whether a start with `slots_now` raw slots since the last reset should reset first,
    /// given the last region's slots (`None` before the first region).
    pub fn due(&self, slots_now: u64, last_region: Option<u64>) -> bool {
        match last_region {
            None => true,
            Some(last) => slots_now > self.ratio.saturating_mul(last.max(1)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// PERF_METRICS from its eight fields, field 0 lowest.
    fn metrics(fields: [u8; 8]) -> u64 {
        fields.iter().enumerate().map(|(i, &f)| u64::from(f) << (8 * i)).sum()
    }

    #[test]
    fn selectors_and_fields() {
        assert_eq!(SLOTS_SELECTOR, 0x4000_0003);
        assert_eq!(METRICS_SELECTOR, 0x2000_0000);
        let m = metrics([1, 2, 3, 4, 5, 6, 7, 8]);
        assert_eq!(m, 0x0807_0605_0403_0201);
        assert_eq!((0..8).map(|i| field(m, i)).collect::<Vec<_>>(), vec![1, 2, 3, 4, 5, 6, 7, 8]);
        assert_eq!(field_of_config(0x8000), Some(0));
        assert_eq!(field_of_config(0x8700), Some(7));
        assert_eq!(field_of_config(0x8800), None);
        assert_eq!(field_of_config(0x0400), None);
        assert_eq!(field_of_config(0x8001), None);
    }

    #[test]
    fn level1_from_one_read_after_a_reset() {
        // A region starting right after a reset: read a is zero. Fields 51/26/77/101 (sum
        // 255) over 1000 slots: retiring = 51*1000 / (255*1000) = 0.2, bad spec 26/255,
        // fe 77/255, be 101/255.
        let a = TopdownRead::default();
        let b = TopdownRead { slots: 1000, metrics: metrics([51, 26, 77, 101, 0, 0, 0, 0]) };
        let t = between(a, b, false).unwrap();
        assert_eq!(t.slots, 1000);
        assert_eq!(t.level1.retiring, 0.2);
        assert!((t.level1.bad_speculation - 26.0 / 255.0).abs() < 1e-15);
        assert!((t.level1.frontend_bound - 77.0 / 255.0).abs() < 1e-15);
        assert!((t.level1.backend_bound - 101.0 / 255.0).abs() < 1e-15);
        assert!((t.level1.sum() - 1.0).abs() < 1e-12);
        assert!(t.level2.is_none());
        // Half a 255th: (0 + 1000) / (2 * 255 * 1000).
        assert!((t.error_bound - 1.0 / 510.0).abs() < 1e-15);
    }

    #[test]
    fn deltas_across_two_reads_are_slot_weighted_not_averaged() {
        // Read a: 1000 slots, retiring 255 (100%). Read b: 3000 slots, retiring 85 (1/3).
        // Scaled retiring is 255*1000 = 255_000 at a and 85*3000 = 255_000 at b: the region
        // retired nothing, and all its 2000 slots are backend bound (b's field 170:
        // 170*3000 - 0 = 510_000 = 2000*255).
        let a = TopdownRead { slots: 1000, metrics: metrics([255, 0, 0, 0, 0, 0, 0, 0]) };
        let b = TopdownRead { slots: 3000, metrics: metrics([85, 0, 0, 170, 0, 0, 0, 0]) };
        let t = between(a, b, false).unwrap();
        assert_eq!(t.slots, 2000);
        assert_eq!(field_slots(a, b, 0), 0);
        assert_eq!(field_slots(a, b, 3), 510_000);
        assert_eq!(t.level1.retiring, 0.0);
        assert_eq!(t.level1.backend_bound, 1.0);
        // The average of the two reads' fractions would say 2/3 retiring: wrong.
        let averaged = (255.0 / 255.0 + 85.0 / 255.0) / 2.0;
        assert!((averaged - t.level1.retiring).abs() > 0.6);
        // Rounding bound: (1000 + 3000) / (2 * 255 * 2000).
        assert!((t.error_bound - 4000.0 / 1_020_000.0).abs() < 1e-15);
    }

    #[test]
    fn level2_fields_and_siblings() {
        // 2550 slots after a reset; L1 fields 102/51/51/51 (0.4/0.2/0.2/0.2); L2 fields
        // heavy 51 (0.2), mispredict 26 (26/255), fetch latency 0, memory bound 51 (0.2).
        let a = TopdownRead::default();
        let b = TopdownRead { slots: 2550, metrics: metrics([102, 51, 51, 51, 51, 26, 0, 51]) };
        let t = between(a, b, true).unwrap();
        let l2 = t.level2.unwrap();
        assert_eq!(t.level1.retiring, 0.4);
        assert_eq!(l2.heavy_operations, 0.2);
        assert_eq!(l2.light_operations, 0.4 - 0.2);
        assert_eq!(l2.branch_mispredicts, 26.0 / 255.0);
        assert!((l2.machine_clears - 25.0 / 255.0).abs() < 1e-15);
        assert_eq!(l2.fetch_latency, 0.0);
        assert_eq!(l2.fetch_bandwidth, 0.2);
        assert_eq!(l2.memory_bound, 0.2);
        assert_eq!(l2.core_bound, 0.0);
    }

    #[test]
    fn level2_across_two_reads() {
        // Heavy field 51 at 1000 and at 2000 slots: (51*2000 - 51*1000) / (255 * 1000) = 0.2;
        // light = retiring - heavy = (102*2000 - 102*1000) / 255000 - 0.2 = 0.2.
        let a = TopdownRead { slots: 1000, metrics: metrics([102, 51, 51, 51, 51, 0, 0, 0]) };
        let b = TopdownRead { slots: 2000, metrics: metrics([102, 51, 51, 51, 51, 0, 0, 0]) };
        let t = between(a, b, true).unwrap();
        assert_eq!(t.level2.unwrap().heavy_operations, 0.2);
        assert_eq!(t.level2.unwrap().light_operations, 0.2);
    }

    #[test]
    fn a_reset_between_reads_is_an_error_not_a_number() {
        let a = TopdownRead { slots: 5000, metrics: metrics([255, 0, 0, 0, 0, 0, 0, 0]) };
        let b = TopdownRead { slots: 100, metrics: metrics([255, 0, 0, 0, 0, 0, 0, 0]) };
        assert_eq!(between(a, b, false), Err(TopdownError::Reset { before: 5000, after: 100 }));
        assert_eq!(between(a, a, false), Err(TopdownError::Empty));
    }

    #[test]
    fn reset_schedule() {
        let s = ResetSchedule::default();
        // The first region always starts from a reset.
        assert!(s.due(0, None));
        // 1000 slots accumulated, last region 1000: not yet.
        assert!(!s.due(1000, Some(1000)));
        // 1001 > 1 * 1000: reset.
        assert!(s.due(1001, Some(1000)));
        // Ratio 4: up to 4000 allowed.
        let s4 = ResetSchedule { ratio: 4 };
        assert!(!s4.due(4000, Some(1000)));
        assert!(s4.due(4001, Some(1000)));
        // A last region of 0 slots counts as 1.
        assert!(s.due(2, Some(0)));
        // The bound the rule promises for a region as long as the last one: a at <= 1000
        // slots, b = a + 1000.
        let a = TopdownRead { slots: 1000, metrics: metrics([255, 0, 0, 0, 0, 0, 0, 0]) };
        let b = TopdownRead { slots: 2000, metrics: metrics([255, 0, 0, 0, 0, 0, 0, 0]) };
        let t = between(a, b, false).unwrap();
        assert!((t.error_bound - 3.0 / 510.0).abs() < 1e-15);
    }
}
