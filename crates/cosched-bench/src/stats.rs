//! Sample statistics for repeated measurements: mean and standard error, the
//! error of a ratio of two independent means, and straight-line fits.

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

#[cfg(test)]
mod tests {
    use super::*;

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
}
