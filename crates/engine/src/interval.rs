//! One `-I` interval's counts as tmetric prints them: the rotated groups' counts estimated
//! from the turns of tmetric's own rotation read inside the interval ([`crate::estimate`]),
//! and the reads its error bars are judged on ([`crate::uncertainty`]), as the totals are.
//!
//! An interval is printed as soon as it ends, so nothing after it can be used. A group
//! with [`crate::estimate::MIN_TURNS`] turns or more in the interval on every CPU it ran
//! on is fitted on the reads inside the interval alone: its coefficients are this
//! interval's own, since a phase change at an interval's boundary would otherwise bias
//! this interval's estimate by the earlier phases (and the intervals are printed to show
//! such changes). A group with fewer (`-I 250` with a dozen groups, a few turns each)
//! borrows the turns of the interval before: its coefficients are fitted over both
//! intervals' turns (on time and the retired instructions, which every turn counts, so a
//! change of phases between the intervals is seen in this interval's instructions), only
//! this interval's gaps are predicted, and its bar takes the residuals of every turn
//! fitted, with the neighbours' residuals carried across the boundary
//! ([`crate::estimate`]). Only the first interval, or a counter with too few turns in both,
//! is scaled by time, as perf scales it, and said so under `-v`
//! ([`crate::notes::RowWhy::ScaledByTime`]).

use tmetric_runtime::Snapshot;

use crate::plan::Plan;

/// One interval's counts as estimated, and the reads they were estimated from.
#[derive(Debug, Clone, PartialEq)]
pub struct IntervalEstimate {
    /// The interval's counts, those of anchored rotated groups estimated (stored so that
    /// scaling by `enabled / running` gives the estimate, as [`Plan::estimated`] stores the
    /// totals').
    pub counts: Snapshot,
    /// The reads the estimate used, counted from the start of the interval before when it
    /// borrowed that one's turns, else from this one's start; the last being the
    /// interval's end: what [`Plan::evaluate_sample_from`] judges the interval's bars on.
    pub reads: Vec<Snapshot>,
    /// The first window of `reads` inside the interval (window `k` ends at `reads[k]`, the
    /// first starts at zero).
    pub from: usize,
    /// The specs of anchored rotated groups with too few turns in the interval on some CPU,
    /// whose counts there were scaled by time.
    pub scaled: Vec<usize>,
}

impl Plan {
    /// The estimate of one interval whose counts are `counts`, from the cumulative `reads`
    /// taken inside it (oldest first) and the cumulative read `before` at its start;
    /// `earlier` are the interval before's cumulative read at its start and its reads
    /// (empty for the first interval, or to use this interval's reads alone).
    pub fn estimate_interval(
        &self,
        earlier: &[Snapshot],
        before: &Snapshot,
        reads: &[Snapshot],
        counts: &Snapshot,
    ) -> IntervalEstimate {
        let origin = earlier.first().unwrap_or(before);
        let from = earlier.len();
        let mut relative: Vec<Snapshot> = Vec::with_capacity(from + reads.len() + 1);
        relative.extend(earlier.iter().skip(1).map(|r| r.since(origin)));
        let start = before.since(origin);
        if from > 0 {
            relative.push(start.clone());
        }
        relative.extend(reads.iter().map(|r| r.since(origin)));
        relative.push(if from > 0 { plus(&start, counts) } else { counts.clone() });
        let mut out = counts.clone();
        let mut scaled = Vec::new();
        if self.anchored() {
            let fits = self.fits_from(&relative, from);
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
        IntervalEstimate { counts: out, reads: relative, from, scaled }
    }
}

/// `-v`'s note for an interval whose `estimate` scaled some counters by time: their rows,
/// each once.
pub fn scaled_note(plan: &Plan, estimate: &IntervalEstimate) -> crate::notes::Note {
    let mut rows: Vec<String> = Vec::new();
    for name in estimate.scaled.iter().map(|&s| &plan.specs[s].name) {
        if !rows.contains(name) {
            rows.push(name.clone());
        }
    }
    crate::notes::Note::Rows { rows, why: crate::notes::RowWhy::ScaledByTime }
}

/// `base` with `delta` added, reading by reading (CPU and thread; `delta`'s readings that
/// `base` lacks taken whole): the cumulative read at an interval's end from the one at its
/// start and its counts.
pub fn plus(base: &Snapshot, delta: &Snapshot) -> Snapshot {
    let events = delta
        .events
        .iter()
        .enumerate()
        .map(|(i, d)| {
            let d = d.as_ref()?;
            let b = base.events.get(i).and_then(Option::as_ref);
            Some(
                d.iter()
                    .map(|c| {
                        let mut out = *c;
                        if let Some(o) = b
                            .and_then(|b| b.iter().find(|o| o.cpu == c.cpu && o.thread == c.thread))
                        {
                            out.raw.value = out.raw.value.saturating_add(o.raw.value);
                            out.raw.enabled = out.raw.enabled.saturating_add(o.raw.enabled);
                            out.raw.running = out.raw.running.saturating_add(o.raw.running);
                        }
                        out
                    })
                    .collect(),
            )
        })
        .collect();
    Snapshot { events }
}
