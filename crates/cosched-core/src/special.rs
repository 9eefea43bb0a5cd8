//! Special functions needed by the workload models (the Gamma CDF of the
//! Lublin–Feitelson daily cycle).

/// ln Γ(x) for x > 0 (Lanczos approximation, g = 7, n = 9; |error| < 1e-13).
pub fn ln_gamma(x: f64) -> f64 {
    const COEFFS: [f64; 9] = [
        0.999_999_999_999_809_9,
        676.520_368_121_885_1,
        -1_259.139_216_722_402_8,
        771.323_428_777_653_1,
        -176.615_029_162_140_6,
        12.507_343_278_686_905,
        -0.138_571_095_265_720_12,
        9.984_369_578_019_572e-6,
        1.505_632_735_149_311_6e-7,
    ];
    assert!(x > 0.0, "ln_gamma needs x > 0, got {x}");
    if x < 0.5 {
        // Reflection keeps the approximation in its accurate range.
        let pi = std::f64::consts::PI;
        return (pi / (pi * x).sin()).ln() - ln_gamma(1.0 - x);
    }
    let x = x - 1.0;
    let mut sum = COEFFS[0];
    for (i, c) in COEFFS.iter().enumerate().skip(1) {
        sum += c / (x + i as f64);
    }
    let t = x + 7.5;
    0.5 * (2.0 * std::f64::consts::PI).ln() + (x + 0.5) * t.ln() - t + sum.ln()
}

/// Regularised lower incomplete gamma P(a, x): the CDF of Gamma(a, 1) at x.
pub fn gamma_p(a: f64, x: f64) -> f64 {
    assert!(a > 0.0, "gamma_p needs a > 0");
    if x <= 0.0 {
        return 0.0;
    }
    if x < a + 1.0 {
        gamma_p_series(a, x)
    } else {
        1.0 - gamma_q_continued_fraction(a, x)
    }
}

/// CDF of Gamma(shape, scale) at x.
pub fn gamma_cdf(shape: f64, scale: f64, x: f64) -> f64 {
    gamma_p(shape, x / scale)
}

fn gamma_p_series(a: f64, x: f64) -> f64 {
    let mut term = 1.0 / a;
    let mut sum = term;
    let mut denom = a;
    for _ in 0..1_000 {
        denom += 1.0;
        term *= x / denom;
        sum += term;
        if term.abs() < sum.abs() * 1e-15 {
            break;
        }
    }
    sum * (-x + a * x.ln() - ln_gamma(a)).exp()
}

/// Q(a, x) by Lentz's continued fraction.
fn gamma_q_continued_fraction(a: f64, x: f64) -> f64 {
    const TINY: f64 = 1e-300;
    let mut b = x + 1.0 - a;
    let mut c = 1.0 / TINY;
    let mut d = 1.0 / b;
    let mut h = d;
    for i in 1..1_000 {
        let an = -(i as f64) * (i as f64 - a);
        b += 2.0;
        d = an * d + b;
        if d.abs() < TINY {
            d = TINY;
        }
        c = b + an / c;
        if c.abs() < TINY {
            c = TINY;
        }
        d = 1.0 / d;
        let delta = d * c;
        h *= delta;
        if (delta - 1.0).abs() < 1e-15 {
            break;
        }
    }
    (-x + a * x.ln() - ln_gamma(a)).exp() * h
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ln_gamma_of_integers_is_log_factorial() {
        let mut fact = 1.0f64;
        for n in 1..20 {
            assert!((ln_gamma(n as f64) - fact.ln()).abs() < 1e-10, "n={n}");
            fact *= n as f64;
        }
        assert!((ln_gamma(0.5) - std::f64::consts::PI.sqrt().ln()).abs() < 1e-12);
    }

    #[test]
    fn gamma_p_matches_closed_forms() {
        // Shape 1 is the exponential distribution: P(1, x) = 1 - e^-x.
        for &x in &[0.1f64, 1.0, 2.5, 10.0] {
            assert!((gamma_p(1.0, x) - (1.0 - (-x).exp())).abs() < 1e-12);
        }
        // Shape 2: P(2, x) = 1 - (1 + x) e^-x.
        for &x in &[0.3f64, 3.0, 7.0] {
            let want = 1.0 - (1.0 + x) * (-x).exp();
            assert!((gamma_p(2.0, x) - want).abs() < 1e-12);
        }
        assert!((gamma_cdf(6.1271, 5.2740, 1e6) - 1.0).abs() < 1e-12);
    }
}
