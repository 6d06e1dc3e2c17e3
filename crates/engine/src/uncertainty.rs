//! Error bars: how far a metric computed from multiplexed counts may be from the value the
//! counts would have given if every event had run all the time.
//!
//! A multiplexed event is counted in some time slices and extrapolated over the others
//! (`count * enabled / running`). When the workload changes during the run, the slices it
//! missed differ from the ones it saw, and the estimate errs. The reads taken during the run
//! (intervals of `-I`, or the reads a front end takes for the purpose) show how much the
//! event's rate per running second varies between them; that variation, scaled to one slice,
//! is the variance the unseen slices may add:
//!
//! * per event and read interval `k`: `dE_k` enabled and `dR_k` running nanoseconds (summed
//!   over CPUs) and the rate `r_k = dCount_k / dR_k`;
//! * the variance of a running nanosecond's rate, times a slice, `S = Σ dR_k (r_k - r̄)² /
//!   (K - 1)` over the `K` intervals that ran (`r̄` the overall rate): what a rate measured
//!   over `dR` nanoseconds varies by is `S / dR`;
//! * the count's variance `Σ_k S (dE_k - dR_k) dE_k / dR_k`: the unseen time extrapolated
//!   from the seen, zero when the event ran all the time;
//! * events of one group run in the same slices, so their errors correlate: their covariance
//!   uses `Σ dR_k (r_k - r̄)(q_k - q̄)`; events of different groups are taken as independent;
//! * a metric's variance is `gᵀ C g` with `g` its gradient over its inputs (numerically, over
//!   the same evaluation `tmetric stat` prints) and `C` that covariance.
//!
//! The bar is [`BAR_SIGMAS`] standard deviations either side of the value. A metric whose
//! inputs all ran the whole time has no bar ([`Bar::Exact`]); one with multiplexed inputs and
//! fewer than two read intervals to judge the variation by has [`Bar::Unknown`].

use tmetric_runtime::Snapshot;

use crate::eval::{EvalInput, Evaluators, RootResult, input_value};
use crate::plan::{Plan, Source};

/// Standard deviations either side of the value that the bar spans (about 95 % of a normal
/// spread).
pub const BAR_SIGMAS: f64 = 2.0;

/// A metric's error bar.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Bar {
    /// Every input ran the whole time (or is not a count): the value is what the counts give.
    Exact,
    /// Some input was multiplexed, and the reads do not show how its rate varies (fewer than
    /// two intervals in which it ran).
    Unknown,
    /// One standard deviation of the value, before `ScaleUnit`.
    Sigma(f64),
}

impl Bar {
    /// Half the bar's width, before `ScaleUnit` (`None` for [`Bar::Exact`] and
    /// [`Bar::Unknown`]).
    pub fn half_width(self) -> Option<f64> {
        match self {
            Bar::Sigma(s) => Some(BAR_SIGMAS * s),
            _ => None,
        }
    }

    /// Whether `truth` lies within the bar around `value` (always for an exact value).
    pub fn covers(self, value: f64, truth: f64) -> bool {
        match self {
            Bar::Exact => true,
            Bar::Unknown => false,
            Bar::Sigma(s) => (value - truth).abs() <= BAR_SIGMAS * s + 1e-12 * truth.abs(),
        }
    }
}

/// One row's per-interval aggregates: `(count, enabled, running)` deltas over CPUs and over
/// the counters `specs` it sums (an uncore event's boxes).
fn intervals(reads: &[Snapshot], specs: &[usize]) -> Vec<(f64, f64, f64)> {
    reads
        .windows(2)
        .filter_map(|w| {
            let d = w[1].since(&w[0]);
            let (mut v, mut e, mut r) = (0.0, 0.0, 0.0);
            let mut open = false;
            for &spec in specs {
                let Some(cpus) = d.events.get(spec).and_then(Option::as_ref) else { continue };
                open = true;
                for c in cpus {
                    v += c.raw.value as f64;
                    e += c.raw.enabled as f64;
                    r += c.raw.running as f64;
                }
            }
            open.then_some((v, e, r))
        })
        .collect()
}

/// The covariance of the extrapolated totals of counters `a` and `b` of one group (the same
/// counter for a variance); `None` when it cannot be judged.
fn covariance(a: &[(f64, f64, f64)], b: &[(f64, f64, f64)]) -> Option<f64> {
    let multiplexed = a.iter().any(|&(_, e, r)| r < e);
    if !multiplexed {
        return Some(0.0);
    }
    let ran: Vec<usize> = (0..a.len().min(b.len())).filter(|&k| a[k].2 > 0.0).collect();
    if ran.len() < 2 {
        return None;
    }
    let total_r: f64 = ran.iter().map(|&k| a[k].2).sum();
    let mean = |x: &[(f64, f64, f64)]| ran.iter().map(|&k| x[k].0).sum::<f64>() / total_r;
    let (ma, mb) = (mean(a), mean(b));
    let s: f64 = ran
        .iter()
        .map(|&k| {
            let r = a[k].2;
            r * (a[k].0 / r - ma) * (b[k].0 / r - mb)
        })
        .sum::<f64>()
        / (ran.len() - 1) as f64;
    // A slice that never ran leaves its whole interval to extrapolate from the others.
    let mean_r = total_r / ran.len() as f64;
    Some(
        a.iter()
            .map(
                |&(_, e, r)| {
                    if e <= r { 0.0 } else { s * (e - r) * e / r.max(mean_r * 1e-3).max(1.0) }
                },
            )
            .sum(),
    )
}

impl Plan {
    /// Per root (in [`Plan::roots`] order), the error bar of its value in `results` (the
    /// evaluation of `sample`) over `reads`: the counters read during and at the end of the
    /// run (cumulative), the last being `sample`'s counts.
    pub(crate) fn uncertainties(
        &self,
        evaluators: &mut Evaluators,
        reads: &[Snapshot],
        sample: &EvalInput<'_>,
        results: &[RootResult],
    ) -> Vec<Bar> {
        if reads.is_empty() {
            return vec![Bar::Unknown; self.roots.len()];
        }
        let inputs: Vec<f64> = self.rows.iter().map(|r| input_value(self, r, sample)).collect();
        let spec_of = |row: usize| match self.rows[row].source {
            Source::Counter(spec) => Some(spec),
            _ => None,
        };
        let group_of: Vec<Option<usize>> = (0..self.specs.len())
            .map(|s| self.groups.iter().position(|g| g.contains(&s)))
            .collect();
        let mut per_spec: Vec<Option<Vec<(f64, f64, f64)>>> = vec![None; self.specs.len()];
        self.roots
            .iter()
            .enumerate()
            .map(|(i, root)| {
                let rows: Vec<usize> = {
                    let mut r: Vec<usize> = root.slot_rows.iter().flatten().copied().collect();
                    r.sort_unstable();
                    r.dedup();
                    r
                };
                let counters: Vec<(usize, usize)> =
                    rows.iter().filter_map(|&row| spec_of(row).map(|s| (row, s))).collect();
                for &(row, s) in &counters {
                    if per_spec[s].is_none() {
                        let specs = if self.per_box { vec![s] } else { self.rows[row].specs() };
                        per_spec[s] = Some(intervals(reads, &specs));
                    }
                }
                let series = |s: usize| per_spec[s].as_deref().unwrap_or(&[]);
                if counters.iter().all(|&(_, s)| series(s).iter().all(|&(_, e, r)| r >= e)) {
                    return Bar::Exact;
                }
                // The value as `evaluate` computes it: on the counters' common span.
                let common = self.common_span(root, sample);
                let mut own;
                let inputs = if common.is_empty() {
                    &inputs
                } else {
                    own = inputs.clone();
                    for (row, v) in common {
                        own[row] = v;
                    }
                    &own
                };
                let value = results[i].value;
                if !value.is_finite() {
                    return Bar::Unknown;
                }
                // The gradient over the counted inputs.
                let mut grad = Vec::with_capacity(counters.len());
                let mut probe = inputs.clone();
                for &(row, _) in &counters {
                    let x = inputs[row];
                    let h = (x.abs() * 1e-6).max(1e-6);
                    probe[row] = x + h;
                    let up = self.root_value(evaluators, i, &probe);
                    probe[row] = x;
                    grad.push(if up.is_finite() { (up - value) / h } else { 0.0 });
                }
                let mut variance = 0.0;
                for (a, &(_, sa)) in counters.iter().enumerate() {
                    for (b, &(_, sb)) in counters.iter().enumerate() {
                        if grad[a] == 0.0 || grad[b] == 0.0 {
                            continue;
                        }
                        let same_group =
                            sa == sb || (group_of[sa].is_some() && group_of[sa] == group_of[sb]);
                        if !same_group {
                            continue;
                        }
                        match covariance(series(sa), series(sb)) {
                            Some(c) => variance += grad[a] * grad[b] * c,
                            None => return Bar::Unknown,
                        }
                    }
                }
                // Rates that never varied leave nothing to miss.
                if variance > 0.0 { Bar::Sigma(variance.sqrt()) } else { Bar::Exact }
            })
            .collect()
    }
}
