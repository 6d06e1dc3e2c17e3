//! One `-I` interval's counts as tmetric prints them: the rotated groups' counts estimated
//! from the turns of tmetric's own rotation read inside the interval ([`crate::estimate`]),
//! and the reads its error bars are judged on ([`crate::uncertainty`]), as the totals are.
//!
//! An interval is printed as soon as it ends, so nothing after it can be used. Only the
//! reads inside the interval are: the fit's coefficients are this interval's own, and no
//! earlier interval's turns are mixed in, since a phase change at an interval's boundary
//! would then bias this interval's estimate by the earlier phases (and the intervals are
//! printed to show such changes). A counter with fewer than [`crate::estimate::MIN_TURNS`]
//! turns in the interval on a CPU is scaled by time there, as perf scales it, and said so
//! under `-v` ([`crate::notes::RowWhy::ScaledByTime`]).

use tmetric_runtime::Snapshot;

use crate::plan::Plan;

/// One interval's counts as estimated, and the reads they were estimated from.
#[derive(Debug, Clone, PartialEq)]
pub struct IntervalEstimate {
    /// The interval's counts, those of anchored rotated groups estimated (stored so that
    /// scaling by `enabled / running` gives the estimate, as [`Plan::estimated`] stores the
    /// totals').
    pub counts: Snapshot,
    /// The reads inside the interval, counted from its start, the last being the interval's
    /// own counts: what [`Plan::evaluate_sample`] judges the interval's bars on.
    pub reads: Vec<Snapshot>,
    /// The specs of anchored rotated groups with too few turns in the interval on some CPU,
    /// whose counts there were scaled by time.
    pub scaled: Vec<usize>,
}

impl Plan {
    /// The estimate of one interval whose counts are `counts`, from the cumulative `reads`
    /// taken inside it (oldest first) and the cumulative read `before` at its start.
    pub fn estimate_interval(
        &self,
        before: &Snapshot,
        reads: &[Snapshot],
        counts: &Snapshot,
    ) -> IntervalEstimate {
        let mut relative: Vec<Snapshot> = Vec::with_capacity(reads.len() + 1);
        relative.extend(reads.iter().map(|r| r.since(before)));
        relative.push(counts.clone());
        let mut out = counts.clone();
        let mut scaled = Vec::new();
        if self.anchored() {
            let fits = self.fits(&relative);
            for (s, fits) in fits.iter().enumerate() {
                let Some(fits) = fits else { continue };
                let ran = |i: usize| {
                    counts
                        .events
                        .get(s)
                        .and_then(Option::as_ref)
                        .and_then(|c| c.get(i))
                        .is_some_and(|c| c.raw.running > 0 && c.raw.running < c.raw.enabled)
                };
                if fits.iter().enumerate().any(|(i, f)| f.is_none() && ran(i)) {
                    scaled.push(s);
                }
            }
            self.apply_fits(&mut out, fits);
        }
        IntervalEstimate { counts: out, reads: relative, scaled }
    }
}
