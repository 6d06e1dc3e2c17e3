//! The statistics of one group of samples, with the seed script's rounding and 97% tail rule.
//!
//! Pure integer arithmetic: no float is involved, so no value is ever too large to be printed or
//! rounded (the seed lost groups whose average reached 1e15 because sqlite printed `1.0e+15`
//! and `bc` rejected it).

use serde::Serialize;

/// Statistics of one group, every field in the unit of the value field.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Stats {
    /// Number of samples (the seed's `CNT`).
    pub count: u64,
    /// Smallest sample.
    pub min: u64,
    /// Largest sample.
    pub max: u64,
    /// Mean of all samples, rounded half up.
    pub avg: u64,
    /// Mean of the lowest `round(count * 0.97)` samples, rounded half up (the seed's `lat_avg(97%)`).
    pub avg97: u64,
    /// Nearest-rank median.
    pub p50: u64,
    /// Nearest-rank 99th percentile.
    pub p99: u64,
}

impl Stats {
    /// Computes the statistics of `samples`, which must be sorted ascending; `None` when empty.
    pub fn from_sorted(samples: &[u64]) -> Option<Stats> {
        let (&min, &max) = (samples.first()?, samples.last()?);
        debug_assert!(samples.is_sorted());
        let count = samples.len() as u64;
        let kept = &samples[..tail_count(count) as usize];
        Some(Stats {
            count,
            min,
            max,
            avg: rounded_mean(samples),
            avg97: rounded_mean(kept),
            p50: nearest_rank(samples, 50),
            p99: nearest_rank(samples, 99),
        })
    }
}

impl Stats {
    /// [`Stats::from_sorted`] of `samples` in any order, which this reorders: three selections
    /// of the ranks the statistics read (the 97% tail's end, the median, the 99th percentile)
    /// instead of a sort, the same figures for less work on groups of many samples.
    pub fn of(samples: &mut [u64]) -> Option<Stats> {
        let (&first, _) = samples.split_first()?;
        let count = samples.len() as u64;
        let (mut min, mut max) = (first, first);
        for &s in samples.iter() {
            min = min.min(s);
            max = max.max(s);
        }
        let avg = rounded_mean(samples);
        let kept = tail_count(count) as usize;
        samples.select_nth_unstable(kept - 1);
        let avg97 = rounded_mean(&samples[..kept]);
        let mut rank = |percent: u64| {
            let at = nearest_rank_index(samples.len(), percent);
            *samples.select_nth_unstable(at).1
        };
        let (p50, p99) = (rank(50), rank(99));
        Some(Stats { count, min, max, avg, avg97, p50, p99 })
    }
}

/// How many of the lowest samples the 97% average keeps: the retire-latency sampler's rule,
/// one definition for both (`floor((97 n + 50) / 100)`, the original script's `bc` rounding).
pub use tmetric_runtime::tpebs::tail_count;

/// The mean rounded half up: the seed pipes sqlite's `avg()` into `scale=0; (x+0.5)/1` in bc.
/// Computed exactly as `floor((2 sum + n) / 2n)`, which equals the seed's figure whenever the
/// seed prints one (sqlite shows 15 significant digits, so the two could only differ for groups
/// of more than about 10^13 samples).
pub fn rounded_mean(samples: &[u64]) -> u64 {
    let count = samples.len() as u128;
    if count == 0 {
        return 0;
    }
    let sum: u128 = samples.iter().map(|&s| u128::from(s)).sum();
    // The mean is at most the largest sample, so it fits back into a u64.
    ((2 * sum + count) / (2 * count)) as u64
}

/// Nearest-rank percentile of sorted samples: the value at 1-based rank `ceil(p/100 * n)`
/// (rank 1 at least), so it is always one of the samples.
pub fn nearest_rank(sorted: &[u64], percent: u64) -> u64 {
    sorted[nearest_rank_index(sorted.len(), percent)]
}

/// The 0-based index of [`nearest_rank`]'s sample among `count` sorted ones.
fn nearest_rank_index(count: usize, percent: u64) -> usize {
    let rank = (u128::from(percent) * count as u128).div_ceil(100).max(1);
    (rank - 1) as usize
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mean_rounds_half_up() {
        assert_eq!(rounded_mean(&[98, 99]), 99);
        assert_eq!(rounded_mean(&[1, 2, 2]), 2); // 1.666…
        assert_eq!(rounded_mean(&[1, 1, 2]), 1); // 1.333…
        assert_eq!(rounded_mean(&[u64::MAX, u64::MAX]), u64::MAX);
    }

    #[test]
    fn percentiles_use_nearest_rank() {
        let hundred: Vec<u64> = (1..=100).collect();
        assert_eq!(nearest_rank(&hundred, 50), 50);
        assert_eq!(nearest_rank(&hundred, 99), 99);
        assert_eq!(nearest_rank(&[7], 99), 7);
        assert_eq!(nearest_rank(&[1, 2], 50), 1);
        assert_eq!(nearest_rank(&[1, 2, 3], 50), 2);
    }

    #[test]
    fn stats_of_a_small_group() {
        let samples = [112, 150, 200, 250, 300, 1152];
        let stats = Stats::from_sorted(&samples).unwrap();
        // 6 * 0.97 + 0.5 = 6.32 -> all six kept.
        assert_eq!(
            stats,
            Stats { count: 6, min: 112, max: 1152, avg: 361, avg97: 361, p50: 200, p99: 1152 }
        );
        assert_eq!(Stats::from_sorted(&[]), None);
    }

    proptest::proptest! {
        /// The statistics by selection are those of the sorted samples, whatever their order.
        #[test]
        fn selection_gives_the_sorted_figures(mut samples in proptest::collection::vec(
            proptest::prop_oneof![0u64..300, 0u64..5000, proptest::num::u64::ANY], 1..400)) {
            let mut sorted = samples.clone();
            sorted.sort_unstable();
            let n = sorted.len();
            let mean = |s: &[u64]| {
                let sum: u128 = s.iter().map(|&v| u128::from(v)).sum();
                ((2 * sum + s.len() as u128) / (2 * s.len() as u128)) as u64
            };
            let kept = (97 * n + 50) / 100;
            let at = |p: usize| sorted[(p * n).div_ceil(100).max(1) - 1];
            let expected = Stats {
                count: n as u64,
                min: sorted[0],
                max: sorted[n - 1],
                avg: mean(&sorted),
                avg97: mean(&sorted[..kept]),
                p50: at(50),
                p99: at(99),
            };
            proptest::prop_assert_eq!(Stats::of(&mut samples), Some(expected));
        }
    }

    #[test]
    fn the_tail_mean_equals_the_tpebs_samplers() {
        // This crate computes the statistics on sorted integer samples and rounds half up; the
        // retire-latency sampler keeps unrounded means over a histogram. Rounded the same way,
        // they agree on every set.
        let mut x = 0x1234_5678_9abc_def1u64;
        for n in [1usize, 2, 3, 16, 17, 33, 34, 50, 99, 100, 101, 1000, 4321] {
            let mut samples: Vec<u64> = (0..n)
                .map(|_| {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    x % if x.is_multiple_of(7) { 65536 } else { 300 }
                })
                .collect();
            let mut stats = tmetric_runtime::LatencyStats::new();
            for &s in &samples {
                stats.add(s as u16);
            }
            samples.sort_unstable();
            let theirs = Stats::from_sorted(&samples).expect("non-empty");
            let ours = stats.summary();
            let half_up = |v: Option<f64>| (v.expect("samples") + 0.5).floor() as u64;
            assert_eq!(half_up(ours.p97), theirs.avg97, "n = {n}");
            assert_eq!(half_up(ours.mean), theirs.avg, "n = {n}");
            assert_eq!((ours.min, ours.max), (Some(theirs.min as f64), Some(theirs.max as f64)));
        }
    }
}
