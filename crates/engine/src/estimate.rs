//! The estimate of a rotated group's counts over the turns it did not count: a regression on
//! the anchor counted in every turn, in place of perf's scaling by time.
//!
//! perf scales a multiplexed count by `enabled / running`: it assumes the event ran at the
//! same rate in the time it was off its counter as in the time it was on. When the workload
//! changes phases, that rate differs between the slices, and the estimate is off by as much.
//! tmetric knows more: its own rotation reads the counters at every turn, and every rotated
//! group of an Intel core PMU also counts the retired instructions on their fixed counter
//! ([`Plan::add_anchors`]), so the instructions of *every* turn are known. Each phase of a
//! program retires at its own rate, so a turn's instructions and length say which phases it
//! held; an event's count in a turn is, to the extent the phases differ in it, a linear
//! function of the same two.
//!
//! * Per counter and CPU (or thread): the turns it ran throughout are points `x_k`, with
//!   the turn's length `e_k` and anchor count `a_k`. `x ≈ β₀ e + β₁ a` is fitted by least
//!   squares weighted by `1 / e_k` (a count's spread grows with its span).
//! * The estimate is the count itself plus the fit's prediction for the time the counter
//!   was off, `Σ_k (1 - r_k/e_k) (β₀ e_k + β₁ a_k)`, never below the count.
//! * Two phases are told apart exactly; more are told apart as far as their instruction
//!   rates differ, and what the fit misses is in its residuals.
//! * Where phases last longer than a round of turns, a missed turn's residual is its counted
//!   neighbours': a share of them is interpolated in ([`smooth`]), the share judged per
//!   group by leaving each counted turn out.
//! * Fewer than [`MIN_TURNS`] full turns, or instructions that never changed rate (the two
//!   regressors in proportion), fall back to the rate per second alone, which is perf's
//!   estimate over the same turns.
//!
//! The error of the estimate is the residuals of the turns it did not see plus the fitted
//! coefficients' own error: `s (E_U + z_Uᵀ M⁻¹ z_U)`, where `s` is the residuals' variance
//! per nanosecond, `E_U` the time unseen, `z_U` the unseen time's regressors and `M` the
//! fit's normal matrix. Residuals are summed over the CPUs of the unit before their spread
//! is taken (CPUs whose phases run in step add up their errors, and the spread sees it),
//! and merged over consecutive turns in blocks of 1, 2, 4, ... as the time-scaled bars are
//! ([`crate::uncertainty`]), the largest spread taken: nearby turns see the same phase.
//! After [`smooth`], the residuals are what the neighbours did not foresee. A fit that
//! borrowed the interval before's turns (too few of its own) is taken to miss at least the
//! share of what scaling by time would miss over the same turns ([`time_spread`]) that the
//! fits of every group leave of it ([`relative_spread`]): a few turns can be fitted exactly
//! and say nothing of a phase none of them held, which the other groups' turns saw.

use tmetric_runtime::{CpuCount, Snapshot};

use crate::plan::Plan;

/// The fewest turns a counter must have counted in on a CPU before its counts are regressed
/// (a model is kept only with more turns than coefficients; the bar widens for few turns).
pub const MIN_TURNS: usize = 5;

/// Copies whose time off their counters is at most this share of the time they count in
/// every turn (the moments that switch turns aside).
const EVERY_TURN: f64 = 1e-3;

/// A turn a counter ran in for at least this share of it is a point of its fit (the rest
/// of a turn goes to the ioctls that switch turns, a few microseconds on each CPU); its
/// count is fitted as that share of the turn's.
const COUNTED: f64 = 0.5;

/// What a PMU's anchor counts ([`crate::plan::ANCHORS`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Anchor {
    /// The retired instructions (Intel's fixed counter 0).
    Instructions,
    /// The core's cycles (Arm's cycle counter, AMD's cycles).
    Cycles,
}

impl Anchor {
    fn words(self) -> &'static str {
        match self {
            Anchor::Instructions => "retired instructions",
            Anchor::Cycles => "cycles",
        }
    }
}

/// How a rotated counter's count was estimated ([`Plan::estimate_kinds`]).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum EstimateKind {
    /// Its copies counted in every turn: the count is the total.
    EveryTurn,
    /// The turns it missed regressed on time and, where they told the turns apart, the
    /// anchor (the retired instructions or the cycles) and the SMT sibling's, over this many
    /// turns it counted in (the fewest on a CPU).
    Regressed {
        /// What the anchor counts.
        by: Anchor,
        /// On some CPU, the anchor was a regressor.
        anchor: bool,
        /// On some CPU, the sibling's anchor was.
        sibling: bool,
        /// Turns fitted.
        turns: usize,
        /// The share of the counted turns' residuals interpolated into the missed ones
        /// (0 when the phases were too short for the neighbours to foresee them).
        neighbours: f64,
    },
    /// Fewer than [`MIN_TURNS`] turns counted: scaled by time, as perf does.
    TooFewTurns,
}

impl std::fmt::Display for EstimateKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            EstimateKind::EveryTurn => write!(f, "counted in every turn: exact"),
            EstimateKind::Regressed { by, anchor, sibling, turns, neighbours } => {
                let by = by.words();
                let on = match (anchor, sibling) {
                    (false, false) => {
                        format!("time alone (the {by} told the turns apart no better)")
                    }
                    (true, false) => format!("time and the {by}"),
                    (false, true) => format!("time and the SMT sibling's {by}"),
                    (true, true) => format!("time, the {by} and the SMT sibling's"),
                };
                write!(f, "the turns it missed regressed on {on}, over {turns} turns")?;
                if *neighbours > 0.0 {
                    write!(
                        f,
                        ", plus {:.0} % of the residuals of the turns around them",
                        neighbours * 100.0
                    )?;
                }
                Ok(())
            }
            EstimateKind::TooFewTurns => {
                write!(f, "fewer than {MIN_TURNS} turns counted: scaled by time, as perf does")
            }
        }
    }
}

/// One counter's fit on one CPU (or thread).
#[derive(Debug, Clone, PartialEq)]
pub struct Fit {
    /// The estimated count over the whole run: counted plus predicted.
    pub total: f64,
    /// Each interval it ran throughout: its index, residual and running nanoseconds (after
    /// [`smooth`], what the residuals of its neighbours did not foresee of it).
    pub residuals: Vec<(usize, f64, f64)>,
    /// Enabled nanoseconds it was not counting.
    pub unseen: f64,
    /// `z_Uᵀ M⁻¹ z_U`: what the coefficients' own error adds, in nanoseconds of unseen time.
    pub leverage: f64,
    /// The same for each share of [`SMOOTHING`] that [`smooth`] may add.
    pub leverage_at: [f64; SMOOTHING.len()],
    /// Coefficients fitted (1 to 3).
    pub params: usize,
    /// Which regressors beyond time the kept model has: the anchor, the sibling's anchor.
    pub on: (bool, bool),
    /// What it counted.
    pub counted: f64,
    /// Each interval it was off its counter for a while: its index and the nanoseconds off.
    pub gaps: Vec<(usize, f64)>,
    /// The share of the neighbours' residuals [`smooth`] added to the turns it missed.
    pub neighbours: f64,
    /// What it counted per running nanosecond over the turns fitted.
    pub rate: f64,
    /// The least relative spread per nanosecond its residuals are taken to have (a share of
    /// [`time_spread`] where it borrowed the interval before's turns); 0 for a fit on enough
    /// of its own interval's turns.
    pub floor: f64,
}

/// One interval of one counter on one CPU: count, enabled, running, and the anchor's count
/// over the interval on the CPU and on its SMT sibling (`None` when not known).
#[derive(Debug, Clone, Copy)]
struct Point {
    x: f64,
    e: f64,
    r: f64,
    a: Option<f64>,
    sibling: Option<f64>,
}

/// The points of one spec, or of an event's copies added up, on every reading, with the
/// anchors of their turns ([`Plan::fits_from`]).
type PointsOf<'a> = &'a dyn Fn(&[usize], &[usize]) -> Option<Vec<Vec<Point>>>;

/// `now - before` of one reading (saturating, as [`Snapshot::since`]).
fn delta(now: &CpuCount, before: Option<&CpuCount>) -> (f64, f64, f64) {
    let b = before.map(|b| b.raw).unwrap_or_default();
    (
        now.raw.value.saturating_sub(b.value) as f64,
        now.raw.enabled.saturating_sub(b.enabled) as f64,
        now.raw.running.saturating_sub(b.running) as f64,
    )
}

/// The reading of `spec` at position `i` of `snapshot`, if it is the same CPU and thread as
/// `like`.
fn at<'a>(snapshot: &'a Snapshot, spec: usize, i: usize, like: &CpuCount) -> Option<&'a CpuCount> {
    let c = snapshot.events.get(spec)?.as_ref()?.get(i)?;
    (c.cpu == like.cpu && c.thread == like.thread).then_some(c)
}

/// Solves `m x = b` for the symmetric positive definite `m` (`n x n`, row-major) by
/// Cholesky; `None` when it is not.
fn solve(m: &[f64], b: &[f64], n: usize) -> Option<Vec<f64>> {
    let mut l = vec![0.0; n * n];
    for i in 0..n {
        for j in 0..=i {
            let s: f64 = m[i * n + j] - (0..j).map(|k| l[i * n + k] * l[j * n + k]).sum::<f64>();
            if i == j {
                if s <= 0.0 {
                    return None;
                }
                l[i * n + i] = s.sqrt();
            } else {
                l[i * n + j] = s / l[j * n + j];
            }
        }
    }
    let mut y = vec![0.0; n];
    for i in 0..n {
        y[i] = (b[i] - (0..i).map(|k| l[i * n + k] * y[k]).sum::<f64>()) / l[i * n + i];
    }
    let mut x = vec![0.0; n];
    for i in (0..n).rev() {
        x[i] = (y[i] - (i + 1..n).map(|k| l[k * n + i] * x[k]).sum::<f64>()) / l[i * n + i];
    }
    Some(x)
}

/// The regressors of a point: its length, the anchor over it and the anchor of the CPU's SMT
/// sibling over it (an event counting both threads of a core follows both threads'
/// phases), `None` where not known.
fn regressors(p: &Point) -> [Option<f64>; 3] {
    [Some(p.e), p.a, p.sibling]
}

/// The anchor's count over the interval from `before` to `now` at reading `i` (which is
/// `like`), over `e` nanoseconds: the turns' anchors added up, scaled to the whole interval
/// by their running time; `None` when none ran.
fn anchor_over(
    now: &Snapshot,
    before: &Snapshot,
    anchors: &[usize],
    i: usize,
    like: &CpuCount,
    e: f64,
) -> Option<f64> {
    let (mut av, mut ar) = (0.0, 0.0);
    for &a in anchors {
        if let Some(ca) = at(now, a, i, like) {
            let (v, _, r) = delta(ca, at(before, a, i, like));
            av += v;
            ar += r;
        }
    }
    (ar > 0.0).then(|| av * e / ar)
}

/// Fits the points of one CPU (see the module documentation); `None` when too few turns
/// counted.
#[cfg(test)]
fn fit(points: &[Point]) -> Option<Fit> {
    pooled_fit(&[points.to_vec()]).pop().flatten()
}

/// The fit of one counter over every CPU (or thread) at once: each CPU its own rate per
/// nanosecond (`β₀`, its frequency and its own share of the phases), the coefficients of
/// the anchors shared (each phase retires instructions and counts the event at the same
/// rates per cycle on every CPU). A CPU whose turns of the group saw one phase only then
/// borrows what the others saw of the rest. Of the models (time alone, with the anchor,
/// with the sibling's, with both) the one whose own prediction error is least is kept
/// ([`Plan::fits`] chooses one per group instead); `None` for a CPU with fewer than
/// [`MIN_TURNS`] counted turns.
#[cfg(test)]
fn pooled_fit(cpus: &[Vec<Point>]) -> Vec<Option<Fit>> {
    [vec![], vec![1], vec![2], vec![1, 2]]
        .iter()
        .filter_map(|shared| pooled_at(cpus, shared, 0, false))
        .min_by(|a, b| a.0.total_cmp(&b.0))
        .map_or_else(|| vec![None; cpus.len()], |(_, f)| f)
}

/// [`pooled_with`] over every CPU's counted turns; `None` when no CPU has enough, or the
/// shared regressors are not known in every counted turn or tell nothing apart. Only the
/// points from `from` on are estimated (the interval's, [`Plan::fits_from`]); the earlier
/// ones are fitted too when `borrow`.
fn pooled_at(
    cpus: &[Vec<Point>],
    shared: &[usize],
    from: usize,
    borrow: bool,
) -> Option<(f64, Vec<Option<Fit>>)> {
    let full: Vec<Vec<usize>> = cpus
        .iter()
        .map(|points| {
            let f: Vec<usize> = (0..points.len())
                .filter(|&k| borrow || k >= from)
                .filter(|&k| points[k].e > 0.0 && points[k].r >= COUNTED * points[k].e)
                .collect();
            if f.len() < MIN_TURNS { Vec::new() } else { f }
        })
        .collect();
    let used: Vec<usize> = (0..cpus.len()).filter(|&c| !full[c].is_empty()).collect();
    if used.is_empty() {
        return None;
    }
    let known = shared.iter().all(|&j| {
        used.iter().all(|&c| full[c].iter().all(|&k| regressors(&cpus[c][k])[j].is_some()))
    });
    if !known {
        return None;
    }
    pooled_with(cpus, &full, &used, shared, from)
}

/// [`pooled_fit`] with the shared regressors `shared` (indices of [`regressors`] beyond
/// time): each CPU's fit and the model's prediction error, or `None` when the shared
/// regressors tell nothing apart over the counted turns. The fit's total, gaps and unseen
/// time are of the points from `from` on.
fn pooled_with(
    cpus: &[Vec<Point>],
    full: &[Vec<usize>],
    used: &[usize],
    shared: &[usize],
    from: usize,
) -> Option<(f64, Vec<Option<Fit>>)> {
    let k = shared.len();
    let cols: Vec<usize> = std::iter::once(0).chain(shared.iter().copied()).collect();
    let n = cols.len();
    // Per CPU its normal equations; the shared block with each CPU's own rate eliminated
    // (the Schur complement, summed over the CPUs).
    let mut normals = Vec::with_capacity(used.len());
    let (mut schur, mut rhs, mut scale) = (vec![0.0; k * k], vec![0.0; k], vec![0.0; k]);
    for &c in used {
        let (m, b) = normal(&cpus[c], &full[c], &cols);
        if m[0] <= 0.0 {
            return None;
        }
        for i in 0..k {
            rhs[i] += b[1 + i] - m[(1 + i) * n] * b[0] / m[0];
            scale[i] += m[(1 + i) * n + 1 + i];
            for j in 0..k {
                schur[i * k + j] += m[(1 + i) * n + 1 + j] - m[(1 + i) * n] * m[1 + j] / m[0];
            }
        }
        normals.push((c, m, b));
    }
    // Each shared regressor must say something the CPUs' own rates do not.
    if (0..k).any(|i| schur[i * k + i] <= 1e-6 * scale[i]) {
        return None;
    }
    let beta_s = if k == 0 { Vec::new() } else { solve(&schur, &rhs, k)? };
    let mut fits = vec![None; cpus.len()];
    let (mut sum_sq, mut points_n, mut spread) = (0.0, 0usize, 0.0);
    let mut per_cpu = Vec::with_capacity(used.len());
    for (c, m, b) in &normals {
        let beta0 = (b[0] - (0..k).map(|i| m[1 + i] * beta_s[i]).sum::<f64>()) / m[0];
        let value = |p: &Point| -> Option<f64> {
            let z = regressors(p);
            let mut v = beta0 * p.e;
            for (i, &j) in shared.iter().enumerate() {
                v += beta_s[i] * z[j]?;
            }
            Some(v)
        };
        let rate = b[0] / m[0];
        let points = &cpus[*c];
        let (mut predicted, mut unseen, mut counted) = (0.0, 0.0, 0.0);
        let mut zu = vec![0.0; n];
        let mut gaps = Vec::new();
        for (kk, p) in points.iter().enumerate().skip(from) {
            counted += p.x;
            if p.e <= 0.0 {
                continue;
            }
            let off = ((p.e - p.r) / p.e).clamp(0.0, 1.0);
            if off == 0.0 {
                continue;
            }
            unseen += off * p.e;
            gaps.push((kk, off * p.e));
            let z = regressors(p);
            match value(p) {
                Some(v) => {
                    predicted += off * v;
                    for (u, &j) in zu.iter_mut().zip(&cols) {
                        *u += off * z[j].unwrap_or(0.0);
                    }
                }
                None => {
                    predicted += off * rate * p.e;
                    zu[0] += off * p.e;
                }
            }
        }
        // The prediction's own error: its rate's, and the shared coefficients' along what
        // the unseen turns hold beyond what the rate explains.
        let leverage_along = |zu: &[f64]| -> f64 {
            let w: Vec<f64> = (0..k).map(|i| zu[1 + i] - zu[0] * m[(1 + i) * n] / m[0]).collect();
            let shared = if k == 0 {
                0.0
            } else {
                solve(&schur, &w, k).map_or(0.0, |x| x.iter().zip(&w).map(|(a, b)| a * b).sum())
            };
            (zu[0] * zu[0] / m[0] + shared).max(0.0)
        };
        // [`smooth`] adds `share` of the counted turns' residuals, which hold the opposite of
        // a coefficient's error along their own regressors: the estimate then moves with it
        // along the unseen turns' regressors less `share` of the counted turns' interpolated
        // into the gaps (a rate's error cancels whole at a share of 1; the anchor's as far as
        // the instructions per nanosecond change slowly).
        let at: Vec<usize> = full[*c].clone();
        let mut zi = vec![0.0; n];
        for &(kk, off_ns) in &gaps {
            for (u, &j) in zi.iter_mut().zip(&cols) {
                *u += off_ns
                    * interpolate(&at, kk, |q| {
                        let z = regressors(&points[q]);
                        z[j].unwrap_or(0.0) / points[q].e
                    });
            }
        }
        let leverage_at = SMOOTHING.map(|share| {
            let moved: Vec<f64> = zu.iter().zip(&zi).map(|(u, i)| u - share * i).collect();
            leverage_along(&moved)
        });
        let leverage = leverage_at[0];
        let residuals: Vec<(usize, f64, f64)> = full[*c]
            .iter()
            .map(|&kk| {
                let p = &points[kk];
                (kk, p.x - p.r / p.e * value(p).unwrap_or(rate * p.e), p.r)
            })
            .collect();
        let (fx, fr) =
            full[*c].iter().fold((0.0, 0.0), |(x, r), &kk| (x + points[kk].x, r + points[kk].r));
        let rate = if fr > 0.0 { fx / fr } else { 0.0 };
        sum_sq += residuals.iter().map(|&(_, r, e)| r * r / e).sum::<f64>();
        points_n += residuals.len();
        spread += unseen + leverage.max(0.0);
        per_cpu.push((
            *c,
            counted + predicted.max(0.0),
            residuals,
            unseen,
            leverage_at,
            counted,
            gaps,
            rate,
        ));
    }
    let dof = points_n.checked_sub(used.len() + k).filter(|&d| d > 0)?;
    let v = sum_sq / dof as f64 * spread;
    for (c, total, residuals, unseen, leverage_at, counted, gaps, rate) in per_cpu {
        fits[c] = Some(Fit {
            total,
            residuals,
            unseen,
            leverage: leverage_at[0],
            leverage_at,
            params: n,
            on: (shared.contains(&1), shared.contains(&2)),
            counted,
            gaps,
            neighbours: 0.0,
            rate,
            floor: 0.0,
        });
    }
    Some((v, fits))
}

/// The weighted normal matrix and right-hand side of regressors `cols` over the points
/// `at`: a point's count is its running share `f = r / e` of the turn's, so its regressors
/// are `f z`, weighted by `1 / r` (a count's spread grows with its span).
fn normal(points: &[Point], at: &[usize], cols: &[usize]) -> (Vec<f64>, Vec<f64>) {
    let n = cols.len();
    let (mut m, mut b) = (vec![0.0; n * n], vec![0.0; n]);
    for &k in at {
        let p = &points[k];
        let z = regressors(p);
        let f = p.r / p.e;
        for (i, &ci) in cols.iter().enumerate() {
            let zi = z[ci].unwrap_or(0.0);
            b[i] += zi * p.x / p.e;
            for (j, &cj) in cols.iter().enumerate() {
                m[i * n + j] += f * zi * z[cj].unwrap_or(0.0) / p.e;
            }
        }
    }
    (m, b)
}

/// The covariance of the estimates of two counters of one group over the CPUs of a unit,
/// from their fits on each (in the same order); `None` when it cannot be judged.
pub(crate) fn covariance(a: &[Option<Fit>], b: &[Option<Fit>]) -> Option<f64> {
    let pairs: Vec<(&Fit, &Fit)> =
        a.iter().zip(b).filter_map(|(x, y)| Some((x.as_ref()?, y.as_ref()?))).collect();
    if pairs.is_empty() {
        return None;
    }
    // Residuals summed over the CPUs, interval by interval.
    let mut by_k: std::collections::BTreeMap<usize, (f64, f64, f64)> = Default::default();
    let (mut unseen, mut leverage) = (0.0, 0.0);
    let mut params = 1;
    for (x, y) in &pairs {
        unseen += x.unseen;
        leverage += x.leverage;
        params = params.max(x.params);
        // Fits over different turns (an event and a copied one): their errors are taken as
        // independent.
        if x.residuals.len() != y.residuals.len()
            || x.residuals.iter().zip(&y.residuals).any(|(p, q)| p.0 != q.0)
        {
            return Some(0.0);
        }
        for (&(k, ra, e), &(_, rb, _)) in x.residuals.iter().zip(&y.residuals) {
            let slot = by_k.entry(k).or_default();
            slot.0 += ra;
            slot.1 += rb;
            slot.2 += e;
        }
    }
    let series: Vec<(f64, f64, f64)> = by_k.into_values().collect();
    if series.len() <= params {
        return None;
    }
    let mut best: Option<(f64, f64)> = None;
    let mut size = 1;
    while size == 1 || series.len() / size >= 8 {
        let blocks: Vec<(f64, f64, f64)> = series
            .chunks(size)
            .map(|c| c.iter().fold((0.0, 0.0, 0.0), |s, v| (s.0 + v.0, s.1 + v.1, s.2 + v.2)))
            .collect();
        let n = blocks.len();
        let lost = if size == 1 { params } else { 1 };
        if n <= lost {
            break;
        }
        // The spread of few blocks is itself uncertain: widened to Student's t at 95 %.
        let scale = n as f64 / (n - lost) as f64 * student_widening(n - lost);
        let sums = blocks
            .iter()
            .filter(|b| b.2 > 0.0)
            .fold((0.0, 0.0), |s, b| (s.0 + b.0 * b.1 / b.2, s.1 + (b.0 * b.0 + b.1 * b.1) / b.2));
        // Per nanosecond: the mean over the blocks of their square over their length.
        let (cov, spread) = (sums.0 * scale / n as f64, sums.1 * scale / n as f64);
        if best.is_none_or(|(_, s)| spread > s) {
            best = Some((cov, spread));
        }
        size *= 2;
    }
    let mut per_ns = best.map_or(0.0, |(c, _)| c);
    // A counter's own spread is at least its floor, on its rate summed over the CPUs (whose
    // errors add as their residuals do).
    if std::ptr::eq(a, b) {
        let floor = pairs.iter().map(|(x, _)| x.floor).fold(0.0, f64::max);
        let rate: f64 = pairs.iter().map(|(x, _)| x.rate).sum();
        per_ns = per_ns.max(floor * rate * rate);
    }
    Some(per_ns * (unseen + leverage))
}

/// A counter's relative spread per nanosecond over the CPUs of its fits: its residuals
/// summed over the CPUs window by window, squared over their length, against its rate
/// summed over the CPUs; `None` without residuals.
fn relative_spread(fits: &[Option<Fit>]) -> Option<f64> {
    let mut by_k: std::collections::BTreeMap<usize, (f64, f64)> = Default::default();
    let mut rate = 0.0;
    for f in fits.iter().flatten() {
        rate += f.rate;
        for &(k, r, e) in &f.residuals {
            let slot = by_k.entry(k).or_default();
            slot.0 += r;
            slot.1 += e;
        }
    }
    let n = by_k.len();
    if n < 2 || rate <= 0.0 {
        return None;
    }
    let sq: f64 = by_k.values().filter(|v| v.1 > 0.0).map(|v| v.0 * v.0 / v.1).sum();
    Some(sq / (n - 1) as f64 / (rate * rate))
}

/// How far a counter's counted turns stray from its rate alone (time scaling's model),
/// relative to that rate, per nanosecond: the misses summed over the CPUs window by window
/// (CPUs whose phases run in step add up their errors), squared over their length, against
/// the rate summed over the CPUs; `None` without a counted turn.
fn time_spread(cpus: &[Vec<Point>]) -> Option<f64> {
    let counted = |p: &Point| p.e > 0.0 && p.r >= COUNTED * p.e;
    let mut by_k: std::collections::BTreeMap<usize, (f64, f64)> = Default::default();
    let mut total_rate = 0.0;
    for points in cpus {
        let (x, r) =
            points.iter().filter(|p| counted(p)).fold((0.0, 0.0), |s, p| (s.0 + p.x, s.1 + p.r));
        if r <= 0.0 {
            continue;
        }
        let rate = x / r;
        total_rate += rate;
        for (k, p) in points.iter().enumerate().filter(|(_, p)| counted(p)) {
            let slot = by_k.entry(k).or_default();
            slot.0 += p.x - rate * p.r;
            slot.1 += p.r;
        }
    }
    let n = by_k.len();
    if n < 2 || total_rate <= 0.0 {
        return None;
    }
    let sq: f64 = by_k.values().filter(|v| v.1 > 0.0).map(|v| v.0 * v.0 / v.1).sum();
    Some(sq / (n - 1) as f64 / (total_rate * total_rate))
}

/// The shares of the neighbours' residuals tried by [`smooth`]: 0 is the fit alone.
const SMOOTHING: [f64; 3] = [0.0, 0.5, 1.0];

/// How many times the fit's residual spread the neighbours must leave unforeseen before
/// [`smooth`] takes the coefficients' error as interpolated away with the residuals.
const FORESEEN: f64 = 4.0;

/// `value(q)` at interval `k`, linearly between the intervals of `at` (in order) around it,
/// the nearest one's past either end; 0 when `at` is empty.
fn interpolate(at: &[usize], k: usize, value: impl Fn(usize) -> f64) -> f64 {
    let after = at.partition_point(|&q| q < k);
    match (after.checked_sub(1), (after < at.len()).then_some(after)) {
        (Some(a), Some(b)) if at[b] > at[a] => {
            let t = (k - at[a]) as f64 / (at[b] - at[a]) as f64;
            value(at[a]) + (value(at[b]) - value(at[a])) * t
        }
        (Some(a), _) => value(at[a]),
        (None, Some(b)) => value(at[b]),
        (None, None) => 0.0,
    }
}

/// Each counted interval's residual less `share` of what its two counted neighbours'
/// residuals foresee of it: the error [`smooth`] would make there, judged without it.
fn unforeseen(res: &[(usize, f64, f64)], share: f64) -> Vec<(usize, f64, f64)> {
    let rate = |i: usize| res[i].1 / res[i].2;
    (0..res.len())
        .map(|i| {
            let (k, r, e) = res[i];
            let guess = match (i.checked_sub(1), (i + 1 < res.len()).then_some(i + 1)) {
                (Some(a), Some(b)) => {
                    let t = (k - res[a].0) as f64 / (res[b].0 - res[a].0) as f64;
                    rate(a) + (rate(b) - rate(a)) * t
                }
                (Some(a), None) => rate(a),
                (None, Some(b)) => rate(b),
                (None, None) => return (k, r, e),
            };
            (k, r - share * guess * e, e)
        })
        .collect()
}

/// Adds to the estimate of every counter of one group (per member, per CPU) a share of the
/// residuals of its counted intervals, interpolated into the intervals it missed.
///
/// The fit's two regressors tell two phases apart; a third one leaves residuals that last
/// as long as the phase does. When phases are long against the rotation, the intervals a
/// counter missed sit between counted ones of the same phase, and their residuals are the
/// neighbours'. When phases are short, the neighbours say nothing and adding them adds
/// noise. Which holds is judged by leaving each counted interval out and asking its
/// neighbours for it (at twice the distance an interval it missed has to its nearest, so the
/// judgement is on the safe side); the share whose errors are least over the group is kept,
/// one for the group so that a count that is the difference of two others stays so. The
/// left-out errors replace the residuals, so the bar ([`covariance`]) is what the
/// interpolation misses, not what the fit misses.
fn smooth(members: &mut [Vec<Option<Fit>>]) {
    let score = |share: f64| -> f64 {
        members
            .iter()
            .map(|cpus| {
                let total: f64 = cpus.iter().flatten().map(|f| f.total).sum();
                let sq: f64 = cpus
                    .iter()
                    .flatten()
                    .flat_map(|f| unforeseen(&f.residuals, share))
                    .map(|(_, r, e)| r * r / e)
                    .sum();
                if total > 0.0 { sq / (total * total) } else { 0.0 }
            })
            .sum()
    };
    let best = SMOOTHING
        .iter()
        .copied()
        .map(|share| (share, score(share)))
        .min_by(|a, b| a.1.total_cmp(&b.1))
        .map_or(0.0, |b| b.0);
    if best == 0.0 {
        return;
    }
    for f in members.iter_mut().flatten().flatten() {
        if f.residuals.len() < 2 {
            continue;
        }
        // The residual rate per running nanosecond, interpolated into each gap.
        let at: Vec<usize> = f.residuals.iter().map(|r| r.0).collect();
        let rate = |q: usize| {
            let i = at.partition_point(|&p| p < q);
            f.residuals[i].1 / f.residuals[i].2
        };
        let added: f64 =
            f.gaps.iter().map(|&(k, off)| off * interpolate(&at, k, rate)).sum::<f64>();
        f.total = (f.total + best * added).max(f.counted);
        let spread = |res: &[(usize, f64, f64)]| res.iter().map(|r| r.1 * r.1 / r.2).sum::<f64>();
        let fitted = spread(&f.residuals);
        f.residuals = unforeseen(&f.residuals, best);
        // Where the neighbours foresee most of the residuals (phases clearly longer than a
        // round of turns), the residuals hold what the fit misses and the coefficients' own
        // error, and the interpolation takes both back: the leverage is the share's, scaled
        // by the residuals the bar is then given. Where they foresee little, the
        // coefficients' error is the fit's: the residuals' misfit stays in it.
        let left = spread(&f.residuals);
        if fitted >= FORESEEN * left && left > 0.0 {
            let which = SMOOTHING.iter().position(|&s| s == best).unwrap_or(0);
            f.leverage = f.leverage_at[which] * fitted / left;
        }
        // A phase that changes inside a gap is interpolated as a ramp across it: every missed
        // turn of the gap errs the same way, by up to half the step, so the gap's error grows
        // with its length squared (a twelfth of it, the step's place in the gap uniform),
        // where the left-out errors, made at a counted turn, grow with the turn's length (a
        // half of it, one each side of the step). Gaps longer than six counted turns add the
        // difference.
        let is_counted = |k: usize| f.residuals.binary_search_by_key(&k, |r| r.0).is_ok();
        let mut gaps = 0usize;
        let mut before: Option<usize> = None;
        for &(k, _) in &f.gaps {
            if is_counted(k) {
                before = None;
                continue;
            }
            if before.is_none_or(|b| b + 1 != k) {
                gaps += 1;
            }
            before = Some(k);
        }
        let gaps = gaps.max(1);
        let counted_ns = f.residuals.iter().map(|r| r.2).sum::<f64>() / f.residuals.len() as f64;
        let gap_ns = f.unseen / gaps as f64;
        f.leverage += f.unseen * (gap_ns / (6.0 * counted_ns) - 1.0).max(0.0);
        f.neighbours = best;
    }
}

/// `(t / z)²` for Student's t with `dof` degrees of freedom at the two-sided 95 % point
/// (`z` = 1.96): how much wider a variance estimated from few samples must be for its 2-sigma
/// bar to hold the truth as often (Cornish-Fisher expansion, within 1 % from 3 degrees up).
pub(crate) fn student_widening(dof: usize) -> f64 {
    let z: f64 = 1.959_964;
    let v = dof.max(1) as f64;
    let t = z
        + (z.powi(3) + z) / (4.0 * v)
        + (5.0 * z.powi(5) + 16.0 * z.powi(3) + 3.0 * z) / (96.0 * v * v)
        + (3.0 * z.powi(7) + 19.0 * z.powi(5) + 17.0 * z.powi(3) - 15.0 * z) / (384.0 * v.powi(3));
    (t / z).powi(2)
}

impl Plan {
    /// Per spec: the anchors of the turns of its PMU (one per rotated group), when its group
    /// is rotated and every rotated group of its PMU has an anchor.
    fn anchor_sets(&self) -> Vec<Option<Vec<usize>>> {
        let mut out = vec![None; self.specs.len()];
        for (k, &(pmu, leader)) in self.rotated.iter().enumerate() {
            let all: Option<Vec<usize>> = self
                .rotated
                .iter()
                .enumerate()
                .filter(|(_, r)| r.0 == pmu)
                .map(|(j, _)| self.anchors.get(j).copied().flatten())
                .collect();
            let Some(all) = all else { continue };
            if self.anchors.get(k).copied().flatten().is_none() {
                continue;
            }
            let Some(group) = self.groups.iter().find(|g| g.first() == Some(&leader)) else {
                continue;
            };
            for &s in group {
                out[s] = Some(all.clone());
            }
        }
        out
    }

    /// What a record keeps for [`crate::estimate`], by spec (a record's events are the
    /// plan's specs, in order).
    pub fn estimate_facts(&self) -> crate::replay::RecordedEstimate {
        crate::replay::RecordedEstimate {
            rotating: self.rotating,
            rotated: self
                .rotated
                .iter()
                .enumerate()
                .map(|(k, &(pmu, leader))| (pmu, leader, self.anchors.get(k).copied().flatten()))
                .collect(),
            tick_hz: self.tick_hz,
            siblings: self.siblings.clone(),
        }
    }

    /// Whether any counter's estimate can come from the anchor ([`crate::estimate`]).
    pub fn anchored(&self) -> bool {
        self.anchors.iter().any(Option::is_some)
    }

    /// Per spec, per reading of it (CPU or thread, in the snapshots' order): its fit over
    /// `reads` (cumulative, the last being the run's totals), for the counters of anchored
    /// rotated groups; `None` elsewhere.
    ///
    /// * The counters of one group are fitted with one model (the regressors whose
    ///   prediction errors, relative to the estimates, sum least over the group): a fit is
    ///   linear in the counts, so an event that is the difference of two others in every
    ///   turn is estimated as that difference, and a metric that divides by such a
    ///   difference does not divide by the gap between two models' errors.
    /// * The copies of one event in several groups (an anchor, or a copy on a free counter)
    ///   that together count in every turn are added up turn by turn: their sum is the
    ///   event's total, and each copy gets it.
    pub(crate) fn fits(&self, reads: &[Snapshot]) -> Vec<Option<Vec<Option<Fit>>>> {
        self.fits_from(reads, 0)
    }

    /// [`Plan::fits`] of the windows of `reads` from window `from` on (window `k` ends at
    /// `reads[k]`, the first starts at zero): an `-I` interval's, after the earlier
    /// interval's windows. Those are fitted only for a group that counted fewer than
    /// [`MIN_TURNS`] turns inside the interval on some CPU it ran on: its coefficients then
    /// come from the earlier turns and this interval's together, its total from this
    /// interval's counts and the prediction for this interval's gaps, its bar from the
    /// residuals of every turn fitted (`crate::interval` says why only then).
    pub(crate) fn fits_from(
        &self,
        reads: &[Snapshot],
        from: usize,
    ) -> Vec<Option<Vec<Option<Fit>>>> {
        let sets = self.anchor_sets();
        let mut out = vec![None; self.specs.len()];
        let Some(last) = reads.last() else { return out };
        let zero = Snapshot::default();
        let windows: Vec<(&Snapshot, &Snapshot)> =
            std::iter::once(&zero).chain(reads).zip(reads).collect();
        // The points of `copies` (one spec, or an event's copies added up) on every reading.
        let points_of = |copies: &[usize], anchors: &[usize]| -> Option<Vec<Vec<Point>>> {
            let cpus = last.events.get(copies[0])?.as_ref()?;
            // Each CPU's SMT sibling: its place among the anchor's readings.
            let sibling_of: Vec<Option<(usize, CpuCount)>> = cpus
                .iter()
                .map(|c| {
                    let other = self.siblings.iter().find(|p| p.0 as i32 == c.cpu)?.1 as i32;
                    let readings = last.events.get(anchors[0])?.as_ref()?;
                    let j = readings.iter().position(|r| r.cpu == other && r.thread == c.thread)?;
                    Some((j, readings[j]))
                })
                .collect();
            Some(
                (0..cpus.len())
                    .map(|i| {
                        let like = &cpus[i];
                        windows
                            .iter()
                            .filter_map(|(before, now)| {
                                let (mut x, mut e, mut r) = (0.0, 0.0f64, 0.0);
                                let mut seen = false;
                                for &c in copies {
                                    let Some(now_c) = at(now, c, i, like) else { continue };
                                    let (cx, ce, cr) = delta(now_c, at(before, c, i, like));
                                    x += cx;
                                    e = e.max(ce);
                                    r += cr;
                                    seen = true;
                                }
                                if !seen {
                                    return None;
                                }
                                let a = anchor_over(now, before, anchors, i, like, e);
                                let sibling = sibling_of[i].and_then(|(j, ref other)| {
                                    anchor_over(now, before, anchors, j, other, e)
                                });
                                Some(Point { x, e, r: r.min(e), a, sibling })
                            })
                            .collect()
                    })
                    .collect(),
            )
        };
        // One model per group.
        let mut misfit = (0.0, 0.0);
        for (k, &(_, leader)) in self.rotated.iter().enumerate() {
            if self.anchors.get(k).copied().flatten().is_none() {
                continue;
            }
            let Some(group) = self.groups.iter().find(|g| g.first() == Some(&leader)) else {
                continue;
            };
            let members: Vec<(usize, Vec<Vec<Point>>)> = group
                .iter()
                .filter_map(|&m| {
                    let anchors = sets[m].as_ref()?;
                    Some((m, points_of(&[m], anchors)?))
                })
                .collect();
            let mut best = self.group_fits(&members, from, false);
            // A CPU the group ran on in the interval with too few of its turns there to fit.
            let short = |fits: &[Vec<Option<Fit>>]| {
                members.iter().zip(fits).any(|((_, points), f)| {
                    points
                        .iter()
                        .zip(f)
                        .any(|(p, f)| f.is_none() && p[from..].iter().any(|p| p.r > 0.0))
                })
            };
            let mut borrowed = false;
            if from > 0 && best.as_ref().is_none_or(|(_, f)| short(f)) {
                let with = self.group_fits(&members, from, true);
                borrowed = with.is_some();
                best = with.or(best);
            }
            if let Some((_, mut fits)) = best {
                smooth(&mut fits);
                for ((m, points), mut f) in members.iter().zip(fits) {
                    // A few turns that all fell in two of three phases are fitted exactly on
                    // time and the anchor, so their residuals, and with them the bar, are
                    // zero while the turns the group missed held the third phase (skylakex
                    // TopdownL3 with the CPUs in step held its truth at 2 sigma in 62.7-73.3
                    // % of such intervals). A fit on so few of its own interval's turns is
                    // taken to miss at least the share of what scaling by time would miss
                    // over them that every group's fit misses of it (below); groups fitted on
                    // enough of their own turns keep their own spread.
                    let spread = time_spread(points);
                    if borrowed && let Some(floor) = spread {
                        for fit in f.iter_mut().flatten() {
                            fit.floor = floor;
                        }
                    }
                    if let (Some(t), Some(r)) = (spread, relative_spread(&f)) {
                        misfit.0 += r;
                        misfit.1 += t;
                    }
                    out[*m] = Some(f);
                }
            }
        }
        // What the fits on time and the anchor leave of time scaling's misfit, over every
        // group's turns on the same CPUs: near nothing where two phases are all there is,
        // so fits that are exact and right are not widened (the periodic classes held
        // their truth at 1 sigma 75 % of the time with the whole of time's misfit as the
        // floor, 70 % with this share of it, as without a floor).
        if misfit.1 > 0.0 {
            let share = (misfit.0 / misfit.1).min(1.0);
            for f in out.iter_mut().flatten().flatten().flatten() {
                f.floor *= share;
            }
        }
        self.copies_fits(from, &sets, &points_of, &mut out);
        out
    }

    /// One group's fits (per member, per CPU), by the model whose prediction errors relative
    /// to the estimates sum least over the members, with the error they sum to.
    fn group_fits(
        &self,
        members: &[(usize, Vec<Vec<Point>>)],
        from: usize,
        borrow: bool,
    ) -> Option<(f64, Vec<Vec<Option<Fit>>>)> {
        let mut best: Option<(f64, Vec<Vec<Option<Fit>>>)> = None;
        for shared in [vec![], vec![1], vec![2], vec![1, 2]] {
            let mut score = 0.0;
            let mut fits = Vec::with_capacity(members.len());
            let mut posed = true;
            for (_, points) in members {
                match pooled_at(points, &shared, from, borrow) {
                    Some((v, f)) => {
                        let total: f64 = f.iter().flatten().map(|f| f.total).sum();
                        if total > 0.0 {
                            score += v / (total * total);
                        }
                        fits.push(f);
                    }
                    // Too few turns on every CPU for any model: time, as perf.
                    None if shared.is_empty() => fits.push(vec![None; points.len()]),
                    None => {
                        posed = false;
                        break;
                    }
                }
            }
            if posed && best.as_ref().is_none_or(|(b, _)| score < *b) {
                best = Some((score, fits));
            }
        }
        best
    }

    /// The fits of copies that together count in every turn (their sum) into `out`.
    fn copies_fits(
        &self,
        from: usize,
        sets: &[Option<Vec<usize>>],
        points_of: PointsOf<'_>,
        out: &mut [Option<Vec<Option<Fit>>>],
    ) {
        // Copies that together count in every turn: their sum.
        let mut base: Vec<Option<usize>> = vec![None; self.specs.len()];
        for (r, row) in self.rows.iter().enumerate() {
            if let crate::plan::Source::Counter(s) = row.source {
                base[s] = Some(row.copy_of.unwrap_or(r));
            }
        }
        let mut done = vec![false; self.specs.len()];
        for s in 0..self.specs.len() {
            let (Some(anchors), Some(b)) = (sets[s].as_ref(), base[s]) else { continue };
            if done[s] {
                continue;
            }
            let copies: Vec<usize> = (0..self.specs.len())
                .filter(|&c| base[c] == Some(b) && sets[c].as_ref() == Some(anchors))
                .collect();
            for &c in &copies {
                done[c] = true;
            }
            if copies.len() < 2 {
                continue;
            }
            let Some(points) = points_of(&copies, anchors) else { continue };
            let every_turn = points.iter().all(|cpu| {
                let (unseen, enabled) =
                    cpu.iter().fold((0.0, 0.0), |(u, t), p| (u + (p.e - p.r).max(0.0), t + p.e));
                unseen <= EVERY_TURN * enabled
            });
            if every_turn && let Some((_, fits)) = pooled_at(&points, &[], from, false) {
                for &c in &copies {
                    let kept = self.unless_scaled(c, out, fits.clone());
                    out[c] = Some(kept);
                }
            }
        }
    }

    /// `fits` (copy `c`'s sum of its copies, per CPU) left out on the CPUs where a member of
    /// `c`'s group has no fit in `out`, so is scaled by time there: the group's counts then
    /// stay over the same turns, and a metric of the difference of two of them (Skylake's
    /// `tma_heavy_operations`, retired slots less the retired instructions) keeps the
    /// cancellation of time scaling's errors that a total from other groups' turns would
    /// break (0.02 pp off for 1.2 with the total, in the `-I` bench's intervals, where few
    /// turns leave every other counter of a 13-group selection scaled by time).
    fn unless_scaled(
        &self,
        c: usize,
        out: &[Option<Vec<Option<Fit>>>],
        mut fits: Vec<Option<Fit>>,
    ) -> Vec<Option<Fit>> {
        let Some(group) = self.groups.iter().find(|g| g.contains(&c)) else { return fits };
        for (i, fit) in fits.iter_mut().enumerate() {
            let scaled = group
                .iter()
                .filter(|&&m| m != c)
                .any(|&m| out[m].as_ref().is_some_and(|f| f.get(i).is_some_and(Option::is_none)));
            if scaled {
                *fit = None;
            }
        }
        fits
    }

    /// Per spec, how [`Plan::estimated`] estimates its count over `reads`, for `-v`: `None`
    /// for counters outside anchored rotated groups (perf's estimate, by time).
    pub fn estimate_kinds(&self, reads: &[Snapshot]) -> Vec<Option<EstimateKind>> {
        let sets = self.anchor_sets();
        self.fits(reads)
            .into_iter()
            .zip(sets)
            .map(|(fits, anchors)| {
                let by = anchors
                    .and_then(|a| a.first().copied())
                    .and_then(|a| self.specs.get(a))
                    .and_then(|spec| crate::plan::anchor_named(&spec.name))
                    .unwrap_or(Anchor::Instructions);
                let fits = fits?;
                let fitted: Vec<&Fit> = fits.iter().flatten().collect();
                if fitted.is_empty() {
                    return Some(EstimateKind::TooFewTurns);
                }
                let anchor = fitted.iter().any(|f| f.on.0);
                let sibling = fitted.iter().any(|f| f.on.1);
                let turns = fitted.iter().map(|f| f.residuals.len()).min().unwrap_or(0);
                let neighbours = fitted.iter().map(|f| f.neighbours).fold(0.0, f64::max);
                // Counted in every turn but the moments that switch turns.
                let unseen = fitted
                    .iter()
                    .all(|f| f.unseen <= EVERY_TURN * f.residuals.iter().map(|r| r.2).sum::<f64>());
                Some(if unseen {
                    EstimateKind::EveryTurn
                } else {
                    EstimateKind::Regressed { by, anchor, sibling, turns, neighbours }
                })
            })
            .collect()
    }

    /// `totals` (the run's last read) with the count of every counter of an anchored rotated
    /// group replaced by its estimate over `reads` ([`crate::estimate`]), stored so that
    /// scaling by `enabled / running` gives the estimate (the running share still prints as
    /// counted). Counters without a fit keep their count: perf's estimate.
    pub fn estimated(&self, totals: &Snapshot, reads: &[Snapshot]) -> Snapshot {
        let mut out = totals.clone();
        // Reads of another run (`-r`'s mean is not its last run's) say nothing of these.
        if !self.anchored() || reads.last() != Some(totals) {
            return out;
        }
        self.apply_fits(&mut out, self.fits(reads));
        out
    }

    /// `out`'s counts replaced by `fits`' totals (from [`Plan::fits`] over reads ending with
    /// `out`), stored so that scaling by `enabled / running` gives them.
    pub(crate) fn apply_fits(&self, out: &mut Snapshot, fits: Vec<Option<Vec<Option<Fit>>>>) {
        for (s, fits) in fits.into_iter().enumerate() {
            let (Some(fits), Some(Some(cpus))) = (fits, out.events.get_mut(s)) else { continue };
            for (c, f) in cpus.iter_mut().zip(fits) {
                let Some(f) = f else { continue };
                if c.raw.running == 0 || c.raw.enabled == 0 {
                    continue;
                }
                let share = c.raw.running as f64 / c.raw.enabled as f64;
                c.raw.value = (f.total * share).round().max(0.0) as u64;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A turn of `e` ns at event and anchor rates `rx`, `ra` per ns, counted or not.
    fn turn(rx: f64, ra: f64, e: f64, ran: bool) -> Point {
        Point {
            x: if ran { rx * e } else { 0.0 },
            e,
            r: if ran { e } else { 0.0 },
            a: Some(ra * e),
            sibling: None,
        }
    }

    /// Turns of 4 ms; the counter runs in one turn of four; two phases with their own rates
    /// for the counter and the anchor.
    fn two_phases(phase_of: impl Fn(usize) -> usize) -> (Vec<Point>, f64) {
        let rates = [(3.0, 2.0), (0.5, 0.2)]; // (event, anchor) per ns
        let mut points = Vec::new();
        let mut truth = 0.0;
        for k in 0..200 {
            let e = 4e6 + (k % 7) as f64 * 1e5;
            let (rx, ra) = rates[phase_of(k)];
            truth += rx * e;
            points.push(turn(rx, ra, e, k % 4 == 1));
        }
        (points, truth)
    }

    #[test]
    fn two_phases_in_step_with_the_turns_are_told_apart() {
        // Phase 0 holds one turn in eight, but half the turns the counter runs in: time
        // scaling takes the run for half phase 0. The anchor's rate tells the phases apart.
        let (points, truth) = two_phases(|k| usize::from(k % 8 != 1));
        let seen: f64 = points.iter().map(|p| p.x).sum();
        let e: f64 = points.iter().map(|p| p.e).sum();
        let r: f64 = points.iter().map(|p| p.r).sum();
        let scaled = seen * e / r;
        let f = fit(&points).expect("a fit");
        assert!((scaled - truth).abs() / truth > 0.3, "time scaling errs: {scaled} vs {truth}");
        assert!((f.total - truth).abs() / truth < 1e-9, "{} vs {truth}", f.total);
        assert_eq!(f.params, 2);
    }

    #[test]
    fn a_steady_anchor_falls_back_to_the_rate() {
        // One phase: the anchor is in proportion to time; the rate alone is fitted.
        let (points, truth) = two_phases(|_| 0);
        let f = fit(&points).expect("a fit");
        assert_eq!(f.params, 1);
        assert!((f.total - truth).abs() / truth < 1e-9);
    }

    /// Turns of random length (1 to 16 ms, as tmetric's own rotation draws them), the counter
    /// in one of four in turn; three phases of `len` ms each in turn: (event, anchor) rates
    /// per ns that no line through time and the anchor fits. The residuals of each phase last
    /// as long as it does, and the random turns give each phase its own share of the counted
    /// time.
    fn three_phases(len: f64, seed: u64) -> (Vec<Point>, f64) {
        let rates = [(3.0, 2.0), (0.5, 0.2), (2.5, 0.3)];
        let (mut points, mut truth, mut t, mut state) = (Vec::new(), 0.0, 0.0, seed);
        for k in 0..240 {
            state = state
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            let e = 1e6 * (1.0 + 15.0 * (state >> 11) as f64 / (1u64 << 53) as f64);
            // The phase at the turn's middle (a phase switch inside a turn is its own case).
            let (rx, ra) = rates[((t + e / 2.0) / (len * 1e6)) as usize % 3];
            t += e;
            truth += rx * e;
            points.push(turn(rx, ra, e, k % 4 == 1));
        }
        (points, truth)
    }

    #[test]
    fn long_phases_the_fit_cannot_tell_apart_are_read_from_the_neighbours() {
        // Phases of 150 and 300 ms over 240 random turns (about 2 s), eight draws each.
        let (mut before, mut after, mut inside) = (0.0, 0.0, [0; 2]);
        let mut n = 0;
        for len in [150.0, 300.0] {
            for seed in 1..=8 {
                let (points, truth) = three_phases(len, seed);
                let fitted = fit(&points).expect("a fit");
                let mut group = vec![vec![Some(fitted.clone())]];
                smooth(&mut group);
                let smoothed = group[0][0].clone().expect("kept");
                before += (fitted.total - truth).abs() / truth;
                let error = (smoothed.total - truth).abs();
                after += error / truth;
                let var = covariance(&[Some(smoothed.clone())], &[Some(smoothed)]).expect("judged");
                let sigma = var.sqrt();
                assert!(error <= 2.0 * sigma, "{len} ms, seed {seed}: {error} > 2 x {sigma}");
                inside[0] += usize::from(error <= sigma);
                inside[1] += 1;
                n += 1;
            }
        }
        let (before, after) = (before / n as f64, after / n as f64);
        assert!(after < before / 2.0, "mean error {after} against the fit's {before}");
        // The bar is what the interpolation misses: it holds the truth at 1 sigma about as
        // often as a normal spread does, neither always nor seldom.
        assert!((8..=14).contains(&inside[0]), "{} of {} inside 1 sigma", inside[0], inside[1]);
    }

    #[test]
    fn residuals_that_change_every_turn_are_left_alone() {
        // Two phases the fit tells apart, and a spread per turn the neighbours cannot
        // foresee: interpolating it would add noise, so nothing is added.
        let (exact, _) = two_phases(|k| (k / 3) % 2);
        let noisy: Vec<Point> = exact
            .iter()
            .enumerate()
            .map(|(k, p)| Point { x: p.x * (1.0 + 0.05 * ((k * 7919) % 13) as f64 / 13.0), ..*p })
            .collect();
        let fitted = fit(&noisy).expect("a fit");
        let mut group = vec![vec![Some(fitted.clone())]];
        smooth(&mut group);
        assert_eq!(group[0][0].as_ref().expect("kept"), &fitted);
    }

    #[test]
    fn few_samples_widen_the_bar_as_students_t_does() {
        // t at 97.5 %: 2.571 for 5 degrees of freedom, 2.228 for 10, 1.984 for 100.
        for (dof, t) in [(5, 2.571), (10, 2.228), (100, 1.984)] {
            let want = (t / 1.959_964f64).powi(2);
            assert!(
                (student_widening(dof) - want).abs() < 0.02 * want,
                "{dof}: {}",
                student_widening(dof)
            );
        }
    }

    #[test]
    fn too_few_turns_give_no_fit() {
        let (points, _) = two_phases(|k| k % 2);
        assert!(fit(&points[..4 * MIN_TURNS - 4]).is_none());
        assert!(fit(&points[..4 * MIN_TURNS]).is_some());
    }

    #[test]
    fn the_bar_grows_with_what_the_fit_misses() {
        // A third, unmodelled influence on the counter: noise per turn. Its residuals make
        // the covariance positive; a perfect fit's is zero.
        let (exact, _) = two_phases(|k| (k / 3) % 2);
        let f = fit(&exact).expect("a fit");
        let v = covariance(&[Some(f.clone())], &[Some(f)]).expect("judged");
        assert!(v.abs() < 1e-6, "{v}");
        let noisy: Vec<Point> = exact
            .iter()
            .enumerate()
            .map(|(k, p)| Point {
                x: if p.r > 0.0 {
                    p.x * (1.0 + 0.05 * ((k * 7919) % 13) as f64 / 13.0)
                } else {
                    0.0
                },
                ..*p
            })
            .collect();
        let g = fit(&noisy).expect("a fit");
        let w = covariance(&[Some(g.clone())], &[Some(g)]).expect("judged");
        assert!(w > 0.0);
    }
}
