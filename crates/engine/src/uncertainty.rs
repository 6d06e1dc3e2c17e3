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
//!   over CPUs) and the count `c_k`; the reads are every 100 ms under the kernel's rotation,
//!   or at every turn of tmetric's own (`tmetric_runtime::Rotation`);
//! * the event's rate is a ratio estimate, `r = Σc / R` over the intervals it ran (`R = Σ dR`),
//!   extrapolated over `E = Σ dE`; its variance comes from the residuals `c_k - r dR_k`
//!   between intervals (`K / (K - 1)` of their sum of squares over `R²`), times `E²` and the
//!   share of the time never seen, `1 - R/E`; the intervals are also merged in blocks of 2,
//!   4, ... and the largest spread is taken, since nearby intervals can see the same part of
//!   a phase and are then not independent;
//! * events of one group run in the same slices, so their errors correlate: their covariance
//!   takes the product of their residuals; events of different groups are taken as
//!   independent;
//! * a metric's variance is `gᵀ C g` with `g` its gradient over its inputs (numerically, over
//!   the same evaluation `tmetric stat` prints) and `C` that covariance.
//!
//! Under the kernel's fixed timer a workload whose phases repeat with the rotation shows each
//! group one phase in every turn: every read is equally biased and the spread hides it.
//! tmetric's own rotation (turns of random length) samples the run's time at random, so the
//! spread between turns is the error's.
//!
//! The bar is [`BAR_SIGMAS`] standard deviations either side of the value. A metric whose
//! inputs all ran the whole time has no bar ([`Bar::Exact`]); one with multiplexed inputs and
//! fewer than two read intervals to judge the variation by has [`Bar::Unknown`]. A value with
//! a multiplexed input is never exact: where it does not move with its inputs (a `max(x, 0)`
//! clamp holding it at 0) its bar comes from the value over inputs drawn from their spread,
//! so the truth on the clamp's other side is still inside it; only a value no draw moves (a
//! literal decides it) stays exact.

use tmetric_runtime::Snapshot;
use tmetric_runtime::event::resolve::Topdown;

use crate::plan::{Plan, Source};
use crate::plan_eval::{EvalInput, Evaluators, RootResult, input_aggr_nr, input_value};

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

    /// Whether `truth` lies within the bar around `value`. An exact value covers only the
    /// truth it equals (to rounding): it claims no error, so any error is a miss.
    pub fn covers(self, value: f64, truth: f64) -> bool {
        match self {
            Bar::Exact => (value - truth).abs() <= 1e-6 * truth.abs().max(value.abs()) + 1e-12,
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
            let (mut v, mut e, mut r) = (0.0, 0.0, 0.0);
            let mut open = false;
            // `specs`' changes alone, as `Snapshot::since` takes them CPU by CPU: a whole
            // snapshot's difference per spec and window was most of an interval's evaluation
            // of serve's software metrics.
            for &spec in specs {
                let Some(cpus) = w[1].events.get(spec).and_then(Option::as_ref) else { continue };
                open = true;
                let before = w[0].events.get(spec).and_then(Option::as_ref);
                for c in cpus {
                    let old = before
                        .and_then(|b| b.iter().find(|o| o.cpu == c.cpu && o.thread == c.thread))
                        .map_or(tmetric_runtime::RawCount::default(), |o| o.raw);
                    let d = c.raw.since(old);
                    v += d.value as f64;
                    e += d.enabled as f64;
                    r += d.running as f64;
                }
            }
            open.then_some((v, e, r))
        })
        .collect()
}

/// The covariance of the extrapolated totals of counters `a` and `b` of one group (the same
/// counter for a variance); `None` when it cannot be judged.
///
/// A ratio estimate: the group's rate is `Σc / Σr` over the intervals it ran, extrapolated
/// over `Σe`. Its variance is the spread of the residuals `c_k - rate * r_k` between
/// intervals (`K / (K - 1)` of their sum of squares, over `R²`), times `E²` and the share of
/// the time never seen, `1 - R/E`. With reads every 100 ms that all saw each group run, it
/// equals "the spread of the per-interval rates, scaled to the unseen time"; with a read at
/// every turn of a rotation, intervals the group did not run in add nothing and each turn's
/// rate counts as one sample of the run's time.
fn covariance(a: &[(f64, f64, f64)], b: &[(f64, f64, f64)]) -> Option<f64> {
    let total_e: f64 = a.iter().map(|x| x.1).sum();
    let total_r: f64 = a.iter().map(|x| x.2).sum();
    if total_r >= total_e {
        return Some(0.0);
    }
    let ran: Vec<usize> = (0..a.len().min(b.len())).filter(|&k| a[k].2 > 0.0).collect();
    if ran.len() < 2 || total_r <= 0.0 {
        return None;
    }
    let rate = |x: &[(f64, f64, f64)]| ran.iter().map(|&k| x[k].0).sum::<f64>() / total_r;
    let (ma, mb) = (rate(a), rate(b));
    // Blocking: consecutive intervals merged in blocks of 1, 2, 4, ... (while eight blocks at
    // least remain). Nearby intervals can see the same phase of the workload (turns whose
    // starts drift slowly against a periodic phase), and then the spread of single intervals
    // understates the error; the blocks' spread does not. The largest is taken.
    let mut best: Option<(f64, f64)> = None;
    let mut size = 1;
    while size == 1 || ran.len() / size >= 8 {
        let blocks: Vec<(f64, f64, f64)> = ran
            .chunks(size)
            .map(|ks| {
                ks.iter().fold((0.0, 0.0, 0.0), |acc, &k| {
                    (acc.0 + a[k].0, acc.1 + b[k].0, acc.2 + a[k].2)
                })
            })
            .collect();
        let n = blocks.len() as f64;
        if n < 2.0 {
            break;
        }
        let sums = blocks.iter().fold((0.0, 0.0, 0.0), |acc, &(ca, cb, r)| {
            let (da, db) = (ca - ma * r, cb - mb * r);
            (acc.0 + da * db, acc.1 + da * da, acc.2 + db * db)
        });
        // Few blocks: widened to Student's t, as the regression's bars are.
        let scale = n / (n - 1.0) * crate::estimate::student_widening(n as usize - 1);
        let (cov, spread) = (sums.0 * scale, (sums.1 + sums.2) * scale);
        if best.is_none_or(|(_, s)| spread > s) {
            best = Some((cov, spread));
        }
        size *= 2;
    }
    let rate_cov = best.map_or(0.0, |(cov, _)| cov) / (total_r * total_r);
    Some(rate_cov * total_e * total_e * (1.0 - total_r / total_e))
}

/// A deterministic stream of standard normal draws (splitmix64 and Box-Muller): the sampled
/// bars of a run are the same each time they are computed.
struct Normals(u64);

impl Normals {
    fn uniform(&mut self) -> f64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^= z >> 31;
        ((z >> 11) as f64 + 0.5) / (1u64 << 53) as f64
    }

    fn next(&mut self) -> f64 {
        let (u, v) = (self.uniform(), self.uniform());
        (-2.0 * u.ln()).sqrt() * (std::f64::consts::TAU * v).cos()
    }
}

/// The lower Cholesky factor of the symmetric matrix `m` (`n x n`, row-major), with
/// directions of no variance left at zero.
fn cholesky(m: &[f64], n: usize) -> Vec<f64> {
    let mut l = vec![0.0; n * n];
    for i in 0..n {
        for j in 0..=i {
            let s: f64 = m[i * n + j] - (0..j).map(|k| l[i * n + k] * l[j * n + k]).sum::<f64>();
            if i == j {
                l[i * n + i] = s.max(0.0).sqrt();
            } else if l[j * n + j] > 0.0 {
                l[i * n + j] = s / l[j * n + j];
            }
        }
    }
    l
}

/// How much a hardware counter may overcount, as a share of its count: the bound of the
/// non-determinism Weaver, Terpstra and Moore (ISPASS 2013) measured, at the small end of
/// what they show (the simulator's `DEFAULT_NOISE` takes the same figure from them).
pub const COUNT_NOISE: f64 = 0.001;

/// Draws for a sampled bar: enough for the 2.5 and 97.5 percentiles to settle.
const SAMPLES: usize = 400;

impl Plan {
    /// Per root (in [`Plan::roots`] order), the error bar of its value in `results` (the
    /// evaluation of `sample`) over `reads`: the counters read during and at the end of the
    /// run (cumulative), the last being `sample`'s counts; whether the bar was sampled
    /// (the value does not move with its inputs where it stands); and whether an input was
    /// multiplexed (else the bar is counting's own error only). With `from` > 0, `reads`
    /// begin with an earlier interval's, whose windows only the anchored fits see
    /// ([`Plan::fits_from`]); the rest judges the windows from the read before `from` on.
    pub(crate) fn uncertainties(
        &self,
        evaluators: &mut Evaluators,
        reads: &[Snapshot],
        from: usize,
        sample: &EvalInput<'_>,
        results: &[RootResult],
    ) -> Vec<(Bar, bool, bool)> {
        if reads.len() <= from {
            return vec![(Bar::Unknown, false, false); self.roots.len()];
        }
        let all = reads;
        let reads = &reads[from.saturating_sub(1)..];
        let inputs: Vec<f64> = self.rows.iter().map(|r| input_value(self, r, sample)).collect();
        let aggr_nrs: Vec<f64> = self.rows.iter().map(|r| input_aggr_nr(self, r, sample)).collect();
        let spec_of = |row: usize| match self.rows[row].source {
            Source::Counter(spec) => Some(spec),
            _ => None,
        };
        let group_of: Vec<Option<usize>> = (0..self.specs.len())
            .map(|s| self.groups.iter().position(|g| g.contains(&s)))
            .collect();
        let mut per_spec: Vec<Option<Vec<(f64, f64, f64)>>> = vec![None; self.specs.len()];
        // Per row: what counting adds to it, found once (a PERF_METRICS field's rounding is a
        // pass over every read, and many roots read the same field).
        let mut noise_of: Vec<Option<f64>> = vec![None; self.rows.len()];
        // Counters whose estimate regressed on the anchor ([`crate::estimate`]) take that
        // estimate's error.
        let fits = if self.anchored() { self.fits_from(all, from) } else { Vec::new() };
        let fit_of = |s: usize| fits.get(s).and_then(Option::as_ref);
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
                let multiplexed =
                    !counters.iter().all(|&(_, s)| series(s).iter().all(|&(_, e, r)| r >= e));
                // What counting itself adds, multiplexed or not.
                let noise: Vec<f64> = counters
                    .iter()
                    .map(|&(row, s)| {
                        *noise_of[row].get_or_insert_with(|| {
                            self.counting_noise(s, inputs[row], sample, reads)
                        })
                    })
                    .collect();
                if !multiplexed && noise.iter().all(|&v| v <= 0.0) {
                    return (Bar::Exact, false, false);
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
                    return (Bar::Unknown, false, multiplexed);
                }
                // The covariance of the counted inputs: within a group, events ran in the same
                // slices; between groups they are taken as independent.
                let n = counters.len();
                let mut cov = vec![0.0; n * n];
                for (a, &(_, sa)) in counters.iter().enumerate() {
                    cov[a * n + a] += noise[a];
                    if !multiplexed {
                        continue;
                    }
                    for (b, &(_, sb)) in counters.iter().enumerate().skip(a) {
                        let same_group =
                            sa == sb || (group_of[sa].is_some() && group_of[sa] == group_of[sb]);
                        if !same_group {
                            continue;
                        }
                        let judged = match (fit_of(sa), fit_of(sb)) {
                            (Some(fa), Some(fb)) if fa.iter().chain(fb).all(Option::is_some) => {
                                crate::estimate::covariance(fa, fb)
                            }
                            _ => covariance(series(sa), series(sb)),
                        };
                        match judged {
                            Some(c) => {
                                cov[a * n + b] += c;
                                if a != b {
                                    cov[b * n + a] += c;
                                }
                            }
                            None => return (Bar::Unknown, false, multiplexed),
                        }
                    }
                }
                // The gradient over the counted inputs.
                let mut grad = Vec::with_capacity(n);
                let mut probe = inputs.clone();
                for &(row, _) in &counters {
                    let x = inputs[row];
                    let h = (x.abs() * 1e-6).max(1e-6);
                    probe[row] = x + h;
                    let up = self.root_value(evaluators, i, &probe, &aggr_nrs);
                    probe[row] = x;
                    grad.push(if up.is_finite() { (up - value) / h } else { 0.0 });
                }
                let mut variance = 0.0;
                for a in 0..n {
                    for b in 0..n {
                        variance += grad[a] * grad[b] * cov[a * n + b];
                    }
                }
                // Two biases move every hardware count alike, so they move the value along
                // the gradient summed over those counts: the overcount, much the same share of
                // every count (not at all for a ratio of counts), and one count per interrupt,
                // the same number per second enabled whatever the count (which the fit takes
                // for part of the rate): the timer tick at HZ and, while the kernel
                // multiplexes, its rotation hrtimer as often (Weaver, Terpstra and Moore,
                // ISPASS 2013). Both at their second moment: the overcount's share is anywhere
                // up to its bound, while an interrupt adds its count to most counters (ibid.),
                // so that bias is taken whole.
                let interrupts_per_second =
                    if self.rotating { self.tick_hz } else { 2.0 * self.tick_hz };
                let (mut along, mut per_interrupt) = (0.0, 0.0);
                for (&(row, s), g) in counters.iter().zip(&grad) {
                    if crate::session::own::counts_on_hardware(&self.events[s].kind) {
                        let enabled: f64 = series(s).iter().map(|i| i.1).sum();
                        along += g * inputs[row];
                        per_interrupt += g * interrupts_per_second * enabled / 1e9;
                    }
                }
                variance += (along * COUNT_NOISE).powi(2) / 3.0;
                variance += per_interrupt.powi(2);
                if variance > 0.0 {
                    return (Bar::Sigma(variance.sqrt()), false, multiplexed);
                }
                if (0..n).all(|a| cov[a * n + a] <= 0.0) {
                    // Multiplexed, but the rates never varied: nothing unseen to miss.
                    return (Bar::Sigma(0.0), false, multiplexed);
                }
                // Multiplexed inputs that vary, and a value that does not move with them
                // where it stands: a clamp (`max(..., 0)`) or a step. Its bar comes from
                // the value over inputs drawn from their spread.
                match self.sampled_sigma(evaluators, i, (inputs, &aggr_nrs), &counters, &cov, value)
                {
                    // The value does not depend on the counts at all (a literal decides it).
                    Some(0.0) => (Bar::Exact, false, multiplexed),
                    Some(sigma) => (Bar::Sigma(sigma), true, multiplexed),
                    None => (Bar::Unknown, false, multiplexed),
                }
            })
            .collect()
    }

    /// The variance counting itself adds to spec `s`'s count `x` over `reads`, multiplexed or
    /// not: the spread of a hardware counter's overcount and non-determinism, up to
    /// [`COUNT_NOISE`] of the count; and a PERF_METRICS field's 8-bit rounding
    /// ([`Plan::metrics_rounding`]). Software events, tracepoints and `msr` add nothing.
    fn counting_noise(&self, s: usize, x: f64, sample: &EvalInput<'_>, reads: &[Snapshot]) -> f64 {
        let event = &self.events[s];
        if !crate::session::own::counts_on_hardware(&event.kind) || !x.is_finite() {
            return 0.0;
        }
        // The spread of a uniform overcount in [0, COUNT_NOISE] (its bias is shared by every
        // count and taken apart, in `uncertainties`).
        let mut v = (COUNT_NOISE * x).powi(2) / 12.0;
        // A topdown metric event led by `slots` reads PERF_METRICS; Skylake's `topdown-*`
        // events (`topdown-total-slots`, ...) are ordinary counters and round nothing.
        let is = |spec: usize, role| {
            tmetric_runtime::event::resolve::topdown_of_config(self.events[spec].attr.config)
                == Some(role)
        };
        let leader = self.groups.iter().find(|g| g.contains(&s)).and_then(|g| g.first().copied());
        if let Some(leader) = leader.filter(|&l| is(s, Topdown::Metric) && is(l, Topdown::Slots)) {
            let slots = self
                .rows
                .iter()
                .find(|r| r.source == Source::Counter(leader))
                .map(|row| input_value(self, row, sample))
                .filter(|v| v.is_finite());
            if let Some(slots) = slots {
                v += self.metrics_rounding(s, leader, slots, reads);
            }
        }
        v
    }

    /// The variance of topdown metric event `s`'s count from PERF_METRICS' 8-bit fractions
    /// ([`rounding_variance`] over each read and CPU of `reads`: `s`'s delta and its
    /// `leader`'s, the slots), scaled from the slots read to `slots`, the estimate's.
    fn metrics_rounding(&self, s: usize, leader: usize, slots: f64, reads: &[Snapshot]) -> f64 {
        let delta = |w: &[Snapshot], spec: usize, i: usize| -> Option<(i32, f64)> {
            let now = w[1].events.get(spec)?.as_ref()?.get(i)?;
            let before = w[0].events.get(spec)?.as_ref()?.get(i)?;
            (now.cpu == before.cpu).then_some(())?;
            Some((now.cpu, now.raw.value.saturating_sub(before.raw.value) as f64))
        };
        let mut pairs = Vec::new();
        for w in reads.windows(2) {
            let cpus = w[1].events.get(s).and_then(Option::as_ref).map_or(0, Vec::len);
            for i in 0..cpus {
                if let (Some((cm, m)), Some((cs, d))) = (delta(w, s, i), delta(w, leader, i))
                    && cm == cs
                {
                    pairs.push((m, d));
                }
            }
        }
        rounding_variance(&pairs, slots)
    }

    /// One standard deviation equivalent of root `root`'s value over inputs drawn from a
    /// normal spread with covariance `cov` over `counters` (row, spec) around `inputs`: half
    /// the larger distance from `value` to the 2.5 or 97.5 percentile of the draws, over
    /// [`BAR_SIGMAS`], so that the bar spans both; `Some(0.0)` when no draw moved it, `None`
    /// when too few draws had a value.
    fn sampled_sigma(
        &self,
        evaluators: &mut Evaluators,
        root: usize,
        (inputs, aggr_nrs): (&[f64], &[f64]),
        counters: &[(usize, usize)],
        cov: &[f64],
        value: f64,
    ) -> Option<f64> {
        let n = counters.len();
        let l = cholesky(cov, n);
        let mut normals = Normals(0x7a11_5eed ^ root as u64);
        let mut probe = inputs.to_vec();
        let mut z = vec![0.0; n];
        let mut draws = Vec::with_capacity(SAMPLES);
        for _ in 0..SAMPLES {
            for x in z.iter_mut() {
                *x = normals.next();
            }
            for (a, &(row, _)) in counters.iter().enumerate() {
                let shift: f64 = (0..=a).map(|k| l[a * n + k] * z[k]).sum();
                // A count is never negative.
                probe[row] = (inputs[row] + shift).max(0.0);
            }
            let v = self.root_value(evaluators, root, &probe, aggr_nrs);
            if v.is_finite() {
                draws.push(v);
            }
        }
        if draws.len() < SAMPLES / 2 {
            return None;
        }
        if draws.iter().all(|&d| d == value) {
            return Some(0.0);
        }
        draws.sort_by(f64::total_cmp);
        let at = |q: f64| draws[((draws.len() - 1) as f64 * q).round() as usize];
        let reach = (at(0.975) - value).max(value - at(0.025)).max(0.0);
        // Some draw moved it: never a zero bar.
        Some((reach / BAR_SIGMAS).max(f64::MIN_POSITIVE))
    }
}

/// The variance PERF_METRICS' 8-bit rounding adds to a topdown metric event's total of
/// `slots`, from `pairs`, its count and the slots' in each read (per CPU): the kernel derives
/// the count from a byte (a 255th of the slots) at every read of the group while it counts,
/// so each read rounds by up to half a step of its slots. Reads that gave the same byte may
/// round alike (a steady share rounds the same way every time), so their slots add up before
/// the square; reads with other bytes round apart. The whole of `slots` at one byte when no
/// read counted slots.
fn rounding_variance(pairs: &[(f64, f64)], slots: f64) -> f64 {
    let mut per_byte: std::collections::BTreeMap<u64, f64> = Default::default();
    let mut read_slots = 0.0;
    for &(m, d) in pairs.iter().filter(|p| p.1 > 0.0) {
        let byte = (255.0 * m / d).round().clamp(0.0, 255.0) as u64;
        *per_byte.entry(byte).or_default() += d;
        read_slots += d;
    }
    if read_slots <= 0.0 {
        return (slots / 255.0).powi(2) / 12.0;
    }
    let scale = slots / read_slots;
    per_byte.values().map(|&d| (d * scale / 255.0).powi(2) / 12.0).sum()
}

/// How far a share may stray outside what is possible before it is called impossible: the
/// rounding of counts and the vendor formulas' own approximations, not multiplexing.
const SHARE_SLACK: f64 = 0.005;

/// How far TMA level 1 may sum from 100 % before it is called impossible: a point, twice
/// the rounding of four 8-bit PERF_METRICS fields at its worst (their level 1 sums to 0xff
/// as read; formulas that derive one node as the rest of the slots sum exactly).
const LEVEL1_SLACK: f64 = 0.01;

impl Plan {
    /// Narrows each TMA share's bar (see [`Plan::impossible`] for which roots are shares) to
    /// the width that covers every possible value, 0-100 %, from where the value lies. A
    /// share's truth is never outside that range, so the narrower bar holds it whenever the
    /// wider one did: a near-zero divisor in a difference of two multiplexed counts gave
    /// `tma_other_mispredicts` a bar of +-21,634 points, which said less than +-118.
    pub fn bound_bars(&self, results: &[RootResult], bars: &mut [Bar]) {
        for (i, bar) in bars.iter_mut().enumerate() {
            let Some(v) = results.get(i).map(|r| r.value).filter(|v| v.is_finite()) else {
                continue;
            };
            if let Bar::Sigma(s) = bar
                && let Some(f) = self.share_factor(i)
            {
                let v = v * f;
                *s = s.min(v.max(1.0 - v) / BAR_SIGMAS / f);
            }
        }
    }

    /// Whether root `i` is a share of the slots, a percentage in a `TopdownL<n>` (Intel's and
    /// Arm's trees) or `PipelineL<n>` (AMD's) group, and if so what its value is multiplied
    /// by to be a fraction: Intel's and AMD's formulas give fractions that print scaled by
    /// 100, Arm's multiply by 100 themselves (`100 * (stall_slot_frontend / ...)`, scale unit
    /// `1percent of slots`).
    fn share_factor(&self, i: usize) -> Option<f64> {
        let r = &self.roots[i];
        let m = r.model.metric(r.metric);
        let unit = r.model.str(m.unit);
        let percent = m.scale == 100.0 || unit.contains('%') || unit.contains("percent");
        let tree = r
            .model
            .str(m.groups)
            .split(';')
            .any(|g| g.starts_with("TopdownL") || g.starts_with("PipelineL"));
        (percent && tree && m.scale > 0.0).then_some(m.scale / 100.0)
    }

    /// Per root (in [`Plan::roots`] order): why its value in `results` cannot be true, with
    /// the least standard deviation a bar needs to reach a possible value. A TMA node
    /// (AMD's pipeline utilization nodes too) is a share of the slots: it lies within
    /// 0-100 %, a child never exceeds its parent, and level 1 sums to 100 %. Such values come from inputs counted over different time.
    pub fn impossible(&self, results: &[RootResult]) -> Vec<Option<(String, f64)>> {
        // Shares as fractions of the slots, whatever scale their formulas give them.
        let factors: Vec<Option<f64>> =
            (0..self.roots.len()).map(|i| self.share_factor(i)).collect();
        let nodes: Vec<crate::view::TmaNode<'_>> = self
            .roots
            .iter()
            .zip(results)
            .zip(&factors)
            .map(|((r, result), f)| {
                crate::view::TmaNode::of(r.model, r.metric, result.value * f.unwrap_or(1.0), None)
            })
            .collect();
        // AMD's level 1 sums to the dispatch slots as Intel's and Arm's do.
        let share = |i: usize| factors[i].is_some() && nodes[i].value.is_finite();
        let parent_of = |i: usize| -> Option<usize> {
            nodes[i].groups.split(';').find_map(|g| {
                let parent = g.strip_suffix("_group")?;
                nodes.iter().position(|n| n.name == parent && n.pmu == nodes[i].pmu)
            })
        };
        let mut out: Vec<Option<(String, f64)>> = vec![None; nodes.len()];
        let mut flag = |i: usize, why: String, reach: f64| {
            let sigma = reach / BAR_SIGMAS / factors[i].unwrap_or(1.0);
            match &mut out[i] {
                Some((text, s)) => {
                    text.push_str("; ");
                    text.push_str(&why);
                    *s = s.max(sigma);
                }
                slot => *slot = Some((why, sigma)),
            }
        };
        for i in (0..nodes.len()).filter(|&i| share(i)) {
            let v = nodes[i].value;
            if !(-SHARE_SLACK..=1.0 + SHARE_SLACK).contains(&v) {
                let reach = if v < 0.0 { -v } else { v - 1.0 };
                flag(i, format!("{:.1} % is outside 0-100 %", v * 100.0), reach);
            }
            if let Some(p) = parent_of(i).filter(|&p| share(p))
                && v > nodes[p].value + SHARE_SLACK
            {
                let over = v - nodes[p].value;
                flag(
                    i,
                    format!(
                        "above its parent {} ({:.1} % > {:.1} %)",
                        nodes[p].name,
                        v * 100.0,
                        nodes[p].value * 100.0
                    ),
                    over,
                );
            }
        }
        // Level 1, per core type: the four nodes of a complete level sum to the slots.
        let mut pmus: Vec<&str> = nodes.iter().map(|n| n.pmu).collect();
        pmus.sort_unstable();
        pmus.dedup();
        for pmu in pmus {
            let level1: Vec<usize> = (0..nodes.len())
                .filter(|&i| {
                    nodes[i].pmu == pmu
                        && share(i)
                        && parent_of(i).is_none()
                        && nodes[i].groups.split(';').any(|g| g == "TopdownL1" || g == "PipelineL1")
                })
                .collect();
            if level1.len() < 4 {
                continue;
            }
            let sum: f64 = level1.iter().map(|&i| nodes[i].value).sum();
            if (sum - 1.0).abs() > LEVEL1_SLACK {
                for &i in &level1 {
                    flag(i, format!("level 1 sums to {:.1} %", sum * 100.0), (sum - 1.0).abs());
                }
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::rounding_variance;

    /// Ten reads of 1e6 slots each.
    const READ: f64 = 1e6;

    fn step_variance(slots: f64) -> f64 {
        (slots / 255.0).powi(2) / 12.0
    }

    #[test]
    fn a_steady_share_rounds_alike_at_every_read() {
        // 40.2 % at every read: byte 103 each time, so the ten roundings add up.
        let pairs = vec![(0.402 * READ, READ); 10];
        let v = rounding_variance(&pairs, 10.0 * READ);
        assert!((v / step_variance(10.0 * READ) - 1.0).abs() < 1e-12, "{v}");
    }

    #[test]
    fn shares_that_move_round_apart() {
        // A share a step higher at every read: ten bytes, ten independent roundings, a tenth
        // of the variance of one rounding over the whole.
        let pairs: Vec<(f64, f64)> =
            (0..10).map(|k| ((100.0 + k as f64) / 255.0 * READ, READ)).collect();
        let v = rounding_variance(&pairs, 10.0 * READ);
        assert!((v / step_variance(10.0 * READ) - 0.1).abs() < 1e-12, "{v}");
        // Scaled to the estimate's slots: twice the slots, four times the variance.
        let w = rounding_variance(&pairs, 20.0 * READ);
        assert!((w / v - 4.0).abs() < 1e-12, "{w} {v}");
    }

    #[test]
    fn without_reads_the_whole_count_rounds_once() {
        let v = rounding_variance(&[(0.0, 0.0)], 5.0 * READ);
        assert_eq!(v, step_variance(5.0 * READ));
    }
}
