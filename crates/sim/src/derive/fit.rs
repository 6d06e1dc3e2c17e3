//! Levenberg-Marquardt fits (log space, several starts, a weak pull towards default rates)
//! of unknowns that no single target decides.

use super::problem::Problem;

impl Problem {
    /// Levenberg-Marquardt over `vars` (in log space, within their ranges) for `goals`
    /// `(metric, raw target, weight)`: relative residuals, a NaN counting as a large miss.
    pub(super) fn least_squares(&mut self, goals: &[(usize, f64, f64)], vars: &[usize]) {
        let n = vars.len();
        if n == 0 || goals.is_empty() {
            return;
        }
        // `max(x, 0)` and `if` make flat regions where the fit cannot move: several starts
        // (the defaults, then spread pseudo-randomly over each range), the best kept.
        let floor = |v: usize, p: &Problem| p.vars[v].hi * 1e-15;
        let start: Vec<f64> = vars
            .iter()
            .map(|&v| {
                let x = self.vars[v].value.unwrap_or(self.vars[v].default);
                x.max(floor(v, self)).ln()
            })
            .collect();
        let mut best: Option<(f64, Vec<f64>)> = None;
        for attempt in 0..8u64 {
            let z0: Vec<f64> = if attempt == 0 {
                start.clone()
            } else {
                vars.iter()
                    .enumerate()
                    .map(|(j, &v)| {
                        let h = splitmix(attempt * 7919 + j as u64 * 104_729 + v as u64);
                        let u = (h % 1_000_000) as f64 / 1e6;
                        // Log-uniform between a ten-thousandth of the range and the range.
                        (self.vars[v].hi * 10f64.powf(-4.0 + 4.0 * u)).ln()
                    })
                    .collect()
            };
            let (cost, z) = self.fit_from(goals, vars, z0);
            if best.as_ref().is_none_or(|(c, _)| cost < *c) {
                best = Some((cost, z));
            }
            if best.as_ref().is_some_and(|(c, _)| *c < 1e-20) {
                break;
            }
        }
        if let Some((_, z)) = best {
            for (j, &v) in vars.iter().enumerate() {
                let top = self.vars[v].hi.ln();
                self.vars[v].value = Some(z[j].min(top).max(top - 40.0).exp());
            }
        }
    }

    /// One Levenberg-Marquardt run from `z` (log values); returns the cost and the end point.
    fn fit_from(
        &mut self,
        goals: &[(usize, f64, f64)],
        vars: &[usize],
        mut z: Vec<f64>,
    ) -> (f64, Vec<f64>) {
        let n = vars.len();
        let floor = |v: usize, p: &Problem| p.vars[v].hi * 1e-15;
        let set = |p: &mut Problem, z: &[f64]| {
            for (j, &v) in vars.iter().enumerate() {
                let top = p.vars[v].hi.ln();
                p.vars[v].value = Some(z[j].min(top).max(top - 40.0).exp());
            }
        };
        let residual = |p: &Problem, g: &(usize, f64, f64)| -> f64 {
            let (m, t, w) = *g;
            let r = (p.value(m) - t) / t.abs().max(1e-4) * w;
            if r.is_finite() { r } else { 1e3 * w }
        };
        // Which goals each var moves.
        let touches: Vec<Vec<usize>> = vars
            .iter()
            .map(|v| (0..goals.len()).filter(|&i| self.deps[goals[i].0].contains(v)).collect())
            .collect();
        // A weak pull of each unknown towards its default picks, among the many solutions of
        // an underdetermined fit, the one that changes least.
        let anchor: Vec<f64> =
            vars.iter().map(|&v| self.vars[v].default.max(floor(v, self)).ln()).collect();
        const PULL: f64 = 1e-7;
        let regular = |z: &[f64], j: usize| PULL * (z[j] - anchor[j]);
        set(self, &z);
        let mut r: Vec<f64> = goals.iter().map(|g| residual(self, g)).collect();
        let reg_cost = |z: &[f64]| (0..n).map(|j| regular(z, j).powi(2)).sum::<f64>();
        let mut cost: f64 = r.iter().map(|x| x * x).sum::<f64>() + reg_cost(&z);
        let mut lambda = 1e-3;
        for _ in 0..60 {
            if r.iter().all(|x| x.abs() < 1e-10) {
                break;
            }
            // Jacobian columns, goal by goal where the var matters.
            let mut jac = vec![vec![0.0; n]; goals.len()];
            for j in 0..n {
                let h = 1e-6;
                let mut zh = z.clone();
                zh[j] += h;
                set(self, &zh);
                for &i in &touches[j] {
                    jac[i][j] = (residual(self, &goals[i]) - r[i]) / h;
                }
            }
            set(self, &z);
            let mut jtj = vec![vec![0.0; n]; n];
            let mut jtr = vec![0.0; n];
            for j in 0..n {
                jtj[j][j] += PULL * PULL;
                jtr[j] += PULL * regular(&z, j);
            }
            for i in 0..goals.len() {
                for a in 0..n {
                    if jac[i][a] == 0.0 {
                        continue;
                    }
                    jtr[a] += jac[i][a] * r[i];
                    for b in 0..n {
                        jtj[a][b] += jac[i][a] * jac[i][b];
                    }
                }
            }
            let mut improved = false;
            for _ in 0..12 {
                let mut a = jtj.clone();
                for (k, row) in a.iter_mut().enumerate() {
                    row[k] += lambda * (row[k] + 1e-9);
                }
                let Some(step) = solve_linear(a, jtr.iter().map(|x| -x).collect()) else {
                    lambda *= 10.0;
                    continue;
                };
                let z2: Vec<f64> =
                    z.iter().zip(&step).map(|(a, b)| a + b.clamp(-20.0, 20.0)).collect();
                set(self, &z2);
                let r2: Vec<f64> = goals.iter().map(|g| residual(self, g)).collect();
                let c2: f64 = r2.iter().map(|x| x * x).sum::<f64>() + reg_cost(&z2);
                if c2 < cost {
                    z = z2;
                    r = r2;
                    cost = c2;
                    lambda = (lambda / 3.0).max(1e-12);
                    improved = true;
                    break;
                }
                lambda *= 4.0;
            }
            set(self, &z);
            if !improved {
                break;
            }
        }
        (cost, z)
    }
}

/// SplitMix64, for repeatable fit starts.
fn splitmix(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// Gaussian elimination with partial pivoting; `None` when singular.
fn solve_linear(mut a: Vec<Vec<f64>>, mut b: Vec<f64>) -> Option<Vec<f64>> {
    let n = b.len();
    for col in 0..n {
        let pivot = (col..n).max_by(|&i, &j| a[i][col].abs().total_cmp(&a[j][col].abs()))?;
        if a[pivot][col].abs() < 1e-300 || !a[pivot][col].is_finite() {
            return None;
        }
        a.swap(col, pivot);
        b.swap(col, pivot);
        for row in col + 1..n {
            let f = a[row][col] / a[col][col];
            let (upper, lower) = a.split_at_mut(row);
            for (x, y) in lower[0][col..n].iter_mut().zip(&upper[col][col..n]) {
                *x -= f * y;
            }
            b[row] -= f * b[col];
        }
    }
    let mut x = vec![0.0; n];
    for row in (0..n).rev() {
        let s: f64 = (row + 1..n).map(|k| a[row][k] * x[k]).sum();
        x[row] = (b[row] - s) / a[row][row];
    }
    Some(x)
}
