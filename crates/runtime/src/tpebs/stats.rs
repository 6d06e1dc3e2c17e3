//! One event's retire-latency statistics: the modes `--tpebs-mode` picks from, the O(1)
//! accumulator with its 2^16-bucket histogram, and the 97% tail mean (the XSAVE latency script's rule).

use std::fmt;
use std::str::FromStr;

/// Which statistic of the sampled retire latencies the metrics use (`--tpebs-mode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum TpebsMode {
    /// The arithmetic mean (perf 6.12's choice, and the default).
    #[default]
    Mean,
    /// The smallest sample.
    Min,
    /// The largest sample.
    Max,
    /// The most recent sample.
    Last,
    /// The mean of the lowest 97% (the XSAVE latency script's tail statistic).
    P97,
}

impl TpebsMode {
    /// Every mode, in the order `--help` lists them.
    pub const ALL: [TpebsMode; 5] =
        [TpebsMode::Mean, TpebsMode::Min, TpebsMode::Max, TpebsMode::Last, TpebsMode::P97];

    /// The flag value.
    pub fn name(self) -> &'static str {
        match self {
            TpebsMode::Mean => "mean",
            TpebsMode::Min => "min",
            TpebsMode::Max => "max",
            TpebsMode::Last => "last",
            TpebsMode::P97 => "p97",
        }
    }
}

impl fmt::Display for TpebsMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// An unknown `--tpebs-mode` value.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown --tpebs-mode `{0}`: expected one of mean, min, max, last, p97")]
pub struct UnknownMode(pub String);

impl FromStr for TpebsMode {
    type Err = UnknownMode;

    fn from_str(text: &str) -> Result<TpebsMode, UnknownMode> {
        TpebsMode::ALL
            .into_iter()
            .find(|m| m.name().eq_ignore_ascii_case(text.trim()))
            .ok_or_else(|| UnknownMode(text.to_string()))
    }
}

/// How many of the lowest samples the 97% mean keeps: `floor((97 n + 50) / 100)`, i.e. the
/// original latency script's `scale=0; (n*0.97 + 0.5)/1` in `bc`; `tmetric latency` uses it
/// too. At least 1 for any non-empty set.
pub fn tail_count(count: u64) -> u64 {
    ((u128::from(count) * 97 + 50) / 100) as u64
}

const BUCKETS: usize = 1 << 16;

/// One event's retire-latency samples over some span.
#[derive(Clone, Default)]
pub struct LatencyStats {
    count: u64,
    sum: u128,
    min: u16,
    max: u16,
    last: u16,
    /// Samples per `var3_w` value, allocated at the first sample (512 KiB).
    histogram: Option<Box<[u64]>>,
    lost: u64,
    throttles: u64,
}

impl fmt::Debug for LatencyStats {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LatencyStats")
            .field("count", &self.count)
            .field("sum", &self.sum)
            .field("min", &self.min)
            .field("max", &self.max)
            .field("last", &self.last)
            .field("lost", &self.lost)
            .field("throttles", &self.throttles)
            .finish()
    }
}

impl LatencyStats {
    /// No samples.
    pub fn new() -> LatencyStats {
        LatencyStats::default()
    }

    /// Adds one sample's retire latency (cycles).
    pub fn add(&mut self, latency: u16) {
        if self.count == 0 {
            self.min = latency;
            self.max = latency;
        } else {
            self.min = self.min.min(latency);
            self.max = self.max.max(latency);
        }
        self.count += 1;
        self.sum += u128::from(latency);
        self.last = latency;
        let histogram = self.histogram.get_or_insert_with(|| vec![0; BUCKETS].into_boxed_slice());
        histogram[usize::from(latency)] += 1;
    }

    /// Counts `n` records the kernel dropped (`PERF_RECORD_LOST`).
    pub fn add_lost(&mut self, n: u64) {
        self.lost = self.lost.saturating_add(n);
    }

    /// Counts one `PERF_RECORD_THROTTLE`.
    pub fn add_throttle(&mut self) {
        self.throttles += 1;
    }

    /// Adds `other`'s samples (taken after this one's, so its `last` wins when it has samples).
    pub fn merge(&mut self, other: &LatencyStats) {
        if other.count > 0 {
            if self.count == 0 {
                self.min = other.min;
                self.max = other.max;
            } else {
                self.min = self.min.min(other.min);
                self.max = self.max.max(other.max);
            }
            self.count += other.count;
            self.sum += other.sum;
            self.last = other.last;
            if let Some(theirs) = &other.histogram {
                let ours =
                    self.histogram.get_or_insert_with(|| vec![0; BUCKETS].into_boxed_slice());
                for (o, t) in ours.iter_mut().zip(theirs.iter()) {
                    *o += t;
                }
            }
        }
        self.lost = self.lost.saturating_add(other.lost);
        self.throttles += other.throttles;
    }

    /// Number of samples.
    pub fn count(&self) -> u64 {
        self.count
    }

    /// The mean of the lowest [`tail_count`] samples.
    fn tail_mean(&self) -> Option<f64> {
        let histogram = self.histogram.as_ref()?;
        let mut keep = tail_count(self.count);
        if keep == 0 {
            return None;
        }
        let kept = keep;
        let mut sum = 0u128;
        for (value, &n) in histogram.iter().enumerate() {
            let take = n.min(keep);
            sum += u128::from(take) * value as u128;
            keep -= take;
            if keep == 0 {
                break;
            }
        }
        Some(sum as f64 / kept as f64)
    }

    /// The statistics.
    pub fn summary(&self) -> Summary {
        let some = |v: u16| (self.count > 0).then_some(f64::from(v));
        Summary {
            count: self.count,
            lost: self.lost,
            throttles: self.throttles,
            mean: (self.count > 0).then(|| self.sum as f64 / self.count as f64),
            min: some(self.min),
            max: some(self.max),
            last: some(self.last),
            p97: self.tail_mean(),
        }
    }
}

/// The statistics of one event's retire latencies (cycles); `None` without samples.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Summary {
    /// Samples.
    pub count: u64,
    /// Records the kernel dropped because the ring was full.
    pub lost: u64,
    /// Times the kernel throttled the event (too many interrupts).
    pub throttles: u64,
    /// Mean.
    pub mean: Option<f64>,
    /// Smallest.
    pub min: Option<f64>,
    /// Largest.
    pub max: Option<f64>,
    /// Most recent.
    pub last: Option<f64>,
    /// Mean of the lowest 97%.
    pub p97: Option<f64>,
}

impl Summary {
    /// The statistic `mode` selects.
    pub fn value(&self, mode: TpebsMode) -> Option<f64> {
        match mode {
            TpebsMode::Mean => self.mean,
            TpebsMode::Min => self.min,
            TpebsMode::Max => self.max,
            TpebsMode::Last => self.last,
            TpebsMode::P97 => self.p97,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modes_parse_and_print() {
        for mode in TpebsMode::ALL {
            assert_eq!(mode.to_string().parse::<TpebsMode>(), Ok(mode));
        }
        assert_eq!("P97".parse::<TpebsMode>(), Ok(TpebsMode::P97));
        assert_eq!(TpebsMode::default(), TpebsMode::Mean);
        let err = "median".parse::<TpebsMode>().unwrap_err();
        assert_eq!(
            err.to_string(),
            "unknown --tpebs-mode `median`: expected one of mean, min, max, last, p97"
        );
    }

    #[test]
    fn statistics_of_known_samples() {
        let mut stats = LatencyStats::new();
        assert_eq!(stats.summary(), Summary::default());
        // 40 samples: 38 of 10 cycles, then 300 and 500. tail_count(40) = floor(38.8 + 0.5) =
        // 39, so the 97% mean keeps the 38 tens and the 300: (380 + 300) / 39.
        for _ in 0..38 {
            stats.add(10);
        }
        stats.add(500);
        stats.add(300);
        stats.add_lost(4);
        stats.add_throttle();
        let s = stats.summary();
        assert_eq!(s.count, 40);
        assert_eq!(s.mean, Some(1180.0 / 40.0));
        assert_eq!((s.min, s.max, s.last), (Some(10.0), Some(500.0), Some(300.0)));
        assert_eq!(s.p97, Some(680.0 / 39.0));
        assert_eq!((s.lost, s.throttles), (4, 1));
        assert_eq!(s.value(TpebsMode::Mean), Some(29.5));
        assert_eq!(s.value(TpebsMode::Last), Some(300.0));
        assert_eq!(s.value(TpebsMode::P97), s.p97);
        // One sample: the tail keeps it.
        let mut one = LatencyStats::new();
        one.add(u16::MAX);
        assert_eq!(one.summary().p97, Some(65535.0));
        assert_eq!(one.summary().mean, Some(65535.0));
    }

    #[test]
    fn merge_equals_adding_in_order() {
        let (mut a, mut b, mut all) =
            (LatencyStats::new(), LatencyStats::new(), LatencyStats::new());
        for (k, v) in [5u16, 9, 1, 7, 3, 8].into_iter().enumerate() {
            if k < 3 {
                a.add(v)
            } else {
                b.add(v)
            }
            all.add(v);
        }
        b.add_lost(2);
        all.add_lost(2);
        let mut merged = a.clone();
        merged.merge(&b);
        assert_eq!(merged.summary(), all.summary());
        let mut empty = LatencyStats::new();
        empty.merge(&a);
        assert_eq!(empty.summary(), a.summary());
        a.merge(&LatencyStats::new());
        assert_eq!(a.summary().last, Some(1.0));
    }

    #[test]
    fn tail_count_follows_bc_rounding() {
        assert_eq!(
            [0, 1, 2, 16, 17, 40, 50, 100, 1000].map(tail_count),
            [0, 1, 2, 16, 16, 39, 49, 97, 970]
        );
    }
}
