//! Sample statistics for repeated measurements: mean and standard error, the
//! error of a ratio of two independent means, and straight-line fits.

use crate::special::ln_gamma;
use serde::{Deserialize, Serialize};

/// Mean and spread of repeated measurements of one quantity.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Estimate {
    pub mean: f64,
    /// Standard error of the mean: sample standard deviation / sqrt(n); 0 for n < 2.
    pub std_error: f64,
    pub min: f64,
    pub max: f64,
    pub n: usize,
}

impl Estimate {
    /// Summarise samples; `None` when there are none.
    pub fn of(samples: &[f64]) -> Option<Estimate> {
        let n = samples.len();
        if n == 0 {
            return None;
        }
        let mean = samples.iter().sum::<f64>() / n as f64;
        let variance =
            if n > 1 { samples.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1) as f64 } else { 0.0 };
        let min = samples.iter().copied().fold(f64::INFINITY, f64::min);
        let max = samples.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        Some(Estimate { mean, std_error: (variance / n as f64).sqrt(), min, max, n })
    }

    /// Sample standard deviation (0 for n < 2).
    pub fn std_dev(&self) -> f64 {
        self.std_error * (self.n as f64).sqrt()
    }

    /// Half-width of the 95 % confidence interval of the mean (Student's t;
    /// 0 for n < 2).
    pub fn ci95_half_width(&self) -> f64 {
        if self.n < 2 {
            return 0.0;
        }
        student_t_quantile_975((self.n - 1) as f64) * self.std_error
    }

    /// Relative spread: standard deviation over mean (0 when the mean is 0).
    pub fn coefficient_of_variation(&self) -> f64 {
        if self.mean == 0.0 {
            0.0
        } else {
            self.std_dev() / self.mean.abs()
        }
    }

    /// `self / other` for independent estimates, with first-order error
    /// propagation: (se/r)^2 = (se_a/a)^2 + (se_b/b)^2.
    pub fn ratio(&self, other: &Estimate) -> Ratio {
        let value = self.mean / other.mean;
        let relative = ((self.std_error / self.mean).powi(2) + (other.std_error / other.mean).powi(2)).sqrt();
        Ratio { value, std_error: (value * relative).abs() }
    }
}

/// A ratio of two estimates with its propagated standard error.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Ratio {
    pub value: f64,
    pub std_error: f64,
}

/// The middle value, the lower of the two middle ones for an even count (an observed value, never an average
/// of two); `None` for none. Floats compare by `total_cmp`.
pub fn lower_median<T: Copy + LowerMedianKey>(values: &[T]) -> Option<T> {
    let mut sorted = values.to_vec();
    let middle = sorted.len().checked_sub(1)? / 2;
    Some(*sorted.select_nth_unstable_by(middle, T::compare).1)
}

/// How [`lower_median`] orders values.
pub trait LowerMedianKey {
    fn compare(a: &Self, b: &Self) -> std::cmp::Ordering;
}

impl LowerMedianKey for f64 {
    fn compare(a: &f64, b: &f64) -> std::cmp::Ordering {
        a.total_cmp(b)
    }
}

impl LowerMedianKey for u64 {
    fn compare(a: &u64, b: &u64) -> std::cmp::Ordering {
        a.cmp(b)
    }
}

/// Ordinary least-squares line through `(xs[i], ys[i])`: `(intercept, slope)`
/// minimising the sum of squared residuals. `None` when the lengths differ or
/// fewer than two distinct x values make the slope undefined.
pub fn least_squares(xs: &[f64], ys: &[f64]) -> Option<(f64, f64)> {
    weighted_least_squares(xs, ys, &vec![1.0; xs.len()])
}

/// Weighted least-squares line: minimises `sum w_i (y_i - a - b x_i)^2` and
/// returns `(a, b)`. With `w_i = 1 / y_i^2` it minimises relative residuals,
/// which suits measurements whose error grows with their size.
pub fn weighted_least_squares(xs: &[f64], ys: &[f64], ws: &[f64]) -> Option<(f64, f64)> {
    if xs.len() != ys.len() || xs.len() != ws.len() {
        return None;
    }
    let total_w: f64 = ws.iter().sum();
    if total_w <= 0.0 {
        return None;
    }
    let points = || xs.iter().zip(ys).zip(ws).map(|((&x, &y), &w)| (x, y, w));
    let mean_x = points().map(|(x, _, w)| w * x).sum::<f64>() / total_w;
    let mean_y = points().map(|(_, y, w)| w * y).sum::<f64>() / total_w;
    let sxx: f64 = points().map(|(x, _, w)| w * (x - mean_x).powi(2)).sum();
    let sxy: f64 = points().map(|(x, y, w)| w * (x - mean_x) * (y - mean_y)).sum();
    if sxx <= 0.0 {
        return None;
    }
    let slope = sxy / sxx;
    Some((mean_y - slope * mean_x, slope))
}

/// Welch's t-test of two samples' means (unequal variances).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct TTest {
    pub t: f64,
    /// Welch-Satterthwaite degrees of freedom.
    pub df: f64,
    /// Two-sided p-value: the chance of a |t| this large if the means were equal.
    pub p: f64,
}

/// Welch's t-test of mean(a) - mean(b); `None` with fewer than two samples
/// on a side or no variance at all.
pub fn welch_t_test(a: &[f64], b: &[f64]) -> Option<TTest> {
    let (ea, eb) = (Estimate::of(a)?, Estimate::of(b)?);
    if ea.n < 2 || eb.n < 2 {
        return None;
    }
    let (va, vb) = (ea.std_error.powi(2), eb.std_error.powi(2));
    if va + vb == 0.0 {
        return None;
    }
    let t = (ea.mean - eb.mean) / (va + vb).sqrt();
    let df = (va + vb).powi(2) / (va.powi(2) / (ea.n - 1) as f64 + vb.powi(2) / (eb.n - 1) as f64);
    Some(TTest { t, df, p: student_t_two_sided_p(t, df) })
}

/// P(|T| >= |t|) for Student's t with `df` degrees of freedom.
pub fn student_t_two_sided_p(t: f64, df: f64) -> f64 {
    regularized_incomplete_beta(df / 2.0, 0.5, df / (df + t * t))
}

/// The t with P(|T| >= t) = 0.05 for `df` degrees of freedom (bisection).
pub fn student_t_quantile_975(df: f64) -> f64 {
    let (mut low, mut high) = (0.0, 1e4);
    for _ in 0..100 {
        let mid = 0.5 * (low + high);
        if student_t_two_sided_p(mid, df) > 0.05 {
            low = mid;
        } else {
            high = mid;
        }
    }
    0.5 * (low + high)
}

/// I_x(a, b), by the continued fraction (modified Lentz), using the symmetry
/// I_x(a, b) = 1 - I_{1-x}(b, a) where the fraction converges slowly.
fn regularized_incomplete_beta(a: f64, b: f64, x: f64) -> f64 {
    if x <= 0.0 {
        return 0.0;
    }
    if x >= 1.0 {
        return 1.0;
    }
    if x > (a + 1.0) / (a + b + 2.0) {
        return 1.0 - regularized_incomplete_beta(b, a, 1.0 - x);
    }
    let front = (ln_gamma(a + b) - ln_gamma(a) - ln_gamma(b) + a * x.ln() + b * (1.0 - x).ln()).exp() / a;
    let tiny = 1e-300;
    let (mut c, mut d) = (1.0, 1.0 - (a + b) * x / (a + 1.0));
    d = if d.abs() < tiny { tiny } else { d };
    d = 1.0 / d;
    let mut f = d;
    for m in 1..300 {
        let m = m as f64;
        for numerator in [
            m * (b - m) * x / ((a + 2.0 * m - 1.0) * (a + 2.0 * m)),
            -(a + m) * (a + b + m) * x / ((a + 2.0 * m) * (a + 2.0 * m + 1.0)),
        ] {
            d = 1.0 + numerator * d;
            d = if d.abs() < tiny { tiny } else { d };
            c = 1.0 + numerator / c;
            c = if c.abs() < tiny { tiny } else { c };
            d = 1.0 / d;
            f *= c * d;
        }
        if (c * d - 1.0).abs() < 1e-15 {
            break;
        }
    }
    front * f
}

/// One coefficient of a linear regression.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Coefficient {
    pub value: f64,
    pub std_error: f64,
    /// value / std_error.
    pub t: f64,
}

/// Ordinary least squares of y on an intercept and the columns of `xs`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Regression {
    pub intercept: Coefficient,
    pub slopes: Vec<Coefficient>,
    pub r_squared: f64,
    pub n: usize,
}

/// Fits y = b0 + sum_k b_k x_k; `None` when there are too few samples for
/// the residual variance or the regressors are collinear.
pub fn linear_regression(y: &[f64], xs: &[Vec<f64>]) -> Option<Regression> {
    let (n, k) = (y.len(), xs.len() + 1);
    if n <= k || xs.iter().any(|x| x.len() != n) {
        return None;
    }
    let row = |i: usize| std::iter::once(1.0).chain(xs.iter().map(move |x| x[i]));
    let mut xtx = vec![vec![0.0; k]; k];
    let mut xty = vec![0.0; k];
    for (i, &yi) in y.iter().enumerate() {
        let r: Vec<f64> = row(i).collect();
        for a in 0..k {
            xty[a] += r[a] * yi;
            for b in 0..k {
                xtx[a][b] += r[a] * r[b];
            }
        }
    }
    let inverse = invert(xtx)?;
    let beta: Vec<f64> = (0..k).map(|a| (0..k).map(|b| inverse[a][b] * xty[b]).sum()).collect();
    let fitted = |i: usize| row(i).zip(&beta).map(|(x, b)| x * b).sum::<f64>();
    let residual: f64 = (0..n).map(|i| (y[i] - fitted(i)).powi(2)).sum();
    let mean = y.iter().sum::<f64>() / n as f64;
    let total: f64 = y.iter().map(|v| (v - mean).powi(2)).sum();
    let sigma2 = residual / (n - k) as f64;
    let coefficient = |a: usize| {
        let std_error = (sigma2 * inverse[a][a]).sqrt();
        Coefficient { value: beta[a], std_error, t: beta[a] / std_error }
    };
    Some(Regression {
        intercept: coefficient(0),
        slopes: (1..k).map(coefficient).collect(),
        r_squared: if total > 0.0 { 1.0 - residual / total } else { 1.0 },
        n,
    })
}

/// Gauss-Jordan inversion with partial pivoting; `None` if singular.
fn invert(mut m: Vec<Vec<f64>>) -> Option<Vec<Vec<f64>>> {
    let k = m.len();
    let scale = m.iter().flatten().fold(0.0f64, |s, v| s.max(v.abs()));
    let mut inv: Vec<Vec<f64>> = (0..k).map(|i| (0..k).map(|j| f64::from(u8::from(i == j))).collect()).collect();
    for col in 0..k {
        let pivot = (col..k).max_by(|&a, &b| m[a][col].abs().total_cmp(&m[b][col].abs()))?;
        if m[pivot][col].abs() <= scale * 1e-12 {
            return None;
        }
        m.swap(col, pivot);
        inv.swap(col, pivot);
        let p = m[col][col];
        for j in 0..k {
            m[col][j] /= p;
            inv[col][j] /= p;
        }
        for r in (0..k).filter(|&r| r != col) {
            let factor = m[r][col];
            for j in 0..k {
                m[r][j] -= factor * m[col][j];
                inv[r][j] -= factor * inv[col][j];
            }
        }
    }
    Some(inv)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_lower_median_is_an_observed_value() {
        assert_eq!(lower_median(&[3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(lower_median(&[4u64, 1, 3, 2]), Some(2));
        assert_eq!(lower_median::<f64>(&[]), None);
    }

    #[test]
    fn t_quantiles_match_the_tables() {
        // Two-sided 95 %: 12.706 (1), 2.776 (4), 2.262 (9), 1.960 (infinity).
        for (df, t) in [(1.0, 12.706), (4.0, 2.776), (9.0, 2.262), (1e6, 1.960)] {
            assert!((student_t_quantile_975(df) - t).abs() < 1e-3, "df {df}");
        }
        let e = Estimate::of(&[2.0, 4.0, 6.0]).unwrap();
        assert!((e.ci95_half_width() - 4.303 * 2.0 / 3f64.sqrt()).abs() < 1e-3);
    }

    #[test]
    fn mean_and_standard_error_by_hand() {
        // 2, 4, 6: mean 4, sample variance 4, sd 2, se 2/sqrt(3).
        let e = Estimate::of(&[2.0, 4.0, 6.0]).unwrap();
        assert_eq!(e.mean, 4.0);
        assert!((e.std_error - 2.0 / 3f64.sqrt()).abs() < 1e-12);
        assert_eq!((e.min, e.max, e.n), (2.0, 6.0, 3));
        assert!((e.coefficient_of_variation() - 0.5).abs() < 1e-12);
    }

    #[test]
    fn one_sample_has_no_spread_and_none_is_none() {
        assert_eq!(Estimate::of(&[3.0]).unwrap().std_error, 0.0);
        assert!(Estimate::of(&[]).is_none());
    }

    #[test]
    fn ratio_errors_add_in_quadrature() {
        let a = Estimate { mean: 8.0, std_error: 0.4, min: 0.0, max: 0.0, n: 4 }; // 5 %
        let b = Estimate { mean: 2.0, std_error: 0.24, min: 0.0, max: 0.0, n: 4 }; // 12 %
        let r = a.ratio(&b);
        assert_eq!(r.value, 4.0);
        assert!((r.std_error - 4.0 * 0.13).abs() < 1e-12);
    }

    #[test]
    fn least_squares_by_hand() {
        // x 0..3, y 1 3 4 8: means 1.5 and 4, Sxx 5, Sxy 11, slope 2.2, intercept 4 - 2.2 * 1.5 = 0.7.
        let (a, b) = least_squares(&[0.0, 1.0, 2.0, 3.0], &[1.0, 3.0, 4.0, 8.0]).unwrap();
        assert!((b - 2.2).abs() < 1e-12 && (a - 0.7).abs() < 1e-12, "{a} {b}");
    }

    #[test]
    fn weighted_least_squares_by_hand() {
        // Weights 1 1 2 at x 0 1 2, y 0 2 2: weighted means 1.25 and 1.5,
        // Sxx 2.75, Sxy 2.5, slope 10/11, intercept 1.5 - 1.25 * 10/11 = 4/11.
        let (a, b) = weighted_least_squares(&[0.0, 1.0, 2.0], &[0.0, 2.0, 2.0], &[1.0, 1.0, 2.0]).unwrap();
        assert!((b - 10.0 / 11.0).abs() < 1e-12 && (a - 4.0 / 11.0).abs() < 1e-12, "{a} {b}");
    }

    #[test]
    fn exact_line_is_recovered_whatever_the_weights() {
        let xs = [1.0, 16.0, 1024.0, 65536.0];
        let ys: Vec<f64> = xs.iter().map(|x| 5e-6 + 2e-10 * x).collect();
        let ws: Vec<f64> = ys.iter().map(|y| 1.0 / (y * y)).collect();
        let (a, b) = weighted_least_squares(&xs, &ys, &ws).unwrap();
        assert!((a - 5e-6).abs() < 1e-15 && (b - 2e-10).abs() < 1e-18, "{a} {b}");
    }

    #[test]
    fn degenerate_fits_are_none() {
        assert!(least_squares(&[2.0, 2.0], &[1.0, 3.0]).is_none());
        assert!(least_squares(&[1.0], &[1.0]).is_none());
        assert!(least_squares(&[1.0, 2.0], &[1.0]).is_none());
    }

    #[test]
    fn student_t_p_values_match_tables() {
        // Two-sided critical values: t(0.05, 10) = 2.228, t(0.01, 30) = 2.750, t(0.05, 1) = 12.706.
        for (t, df, p) in [(2.228, 10.0, 0.05), (2.750, 30.0, 0.01), (12.706, 1.0, 0.05), (0.0, 5.0, 1.0)] {
            let got = student_t_two_sided_p(t, df);
            assert!((got - p).abs() < 2e-4, "t {t} df {df}: p {got}, expected {p}");
        }
    }

    #[test]
    fn welch_test_on_known_samples() {
        let a = [19.8, 20.4, 19.6, 17.8, 18.5, 18.9, 18.3, 18.9, 19.5, 22.0];
        let b = [
            28.2, 26.6, 20.1, 23.3, 25.2, 22.1, 17.7, 27.6, 20.6, 13.7, 23.2, 17.5, 20.6, 18.0, 23.9, 21.6, 24.3, 20.4,
            24.0, 13.2,
        ];
        let test = welch_t_test(&a, &b).unwrap();
        // By hand: means 19.37 and 21.59, variances 1.449 and 17.1157, so
        // t = -2.2192 on 24.50 degrees of freedom; tables put p between 0.02 and 0.05.
        assert!((test.t - (-2.2192)).abs() < 1e-3, "{test:?}");
        assert!((test.df - 24.50).abs() < 0.01, "{test:?}");
        assert!(test.p > 0.02 && test.p < 0.05, "{test:?}");
        assert!(welch_t_test(&[1.0], &b).is_none());
    }

    #[test]
    fn regression_recovers_exact_coefficients() {
        let x1: Vec<f64> = (0..20).map(|i| i as f64).collect();
        let x2: Vec<f64> = (0..20).map(|i| ((i * 7) % 5) as f64).collect();
        let y: Vec<f64> =
            (0..20).map(|i| 3.0 + 0.5 * x1[i] - 2.0 * x2[i] + if i % 2 == 0 { 0.01 } else { -0.01 }).collect();
        let fit = linear_regression(&y, &[x1.clone(), x2]).unwrap();
        assert!((fit.intercept.value - 3.0).abs() < 0.02);
        assert!((fit.slopes[0].value - 0.5).abs() < 1e-3);
        assert!((fit.slopes[1].value + 2.0).abs() < 1e-2);
        assert!(fit.r_squared > 0.999 && fit.slopes[0].t > 100.0);
        assert!(linear_regression(&y, &[x1.clone(), x1]).is_none(), "collinear regressors");
    }
}
