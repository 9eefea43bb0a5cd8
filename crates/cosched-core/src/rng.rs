//! Seeded, named random streams.
//!
//! Every consumer of randomness gets its own stream derived from the run's
//! master seed and a purpose name (`"workload.sizes"`, `"task-skew"`...), so
//! adding draws in one place never shifts the numbers seen in another, and
//! every scheme simulated from the same seed sees the same workload.
//!
//! The generator is PCG-XSH-RR 64/32 (O'Neill 2014), implemented here so that
//! the stream of numbers is fixed by this code and not by a dependency version.

/// FNV-1a over the bytes of a name: a stable, documented hash for stream names.
fn fnv1a64(bytes: &[u8]) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in bytes {
        hash ^= b as u64;
        hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
    }
    hash
}

/// SplitMix64 finaliser: spreads nearby integers far apart.
fn mix64(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// A master seed from which named streams are derived.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct StreamSeed(pub u64);

impl StreamSeed {
    /// The stream for one purpose.
    pub fn stream(self, purpose: &str) -> Rng {
        self.substream(purpose, 0)
    }
    /// The `index`-th stream for one purpose (e.g. one per task).
    pub fn substream(self, purpose: &str, index: u64) -> Rng {
        let state = mix64(self.0 ^ fnv1a64(purpose.as_bytes()));
        let seq = mix64(state ^ mix64(index.wrapping_add(0x5851_f42d_4c95_7f2d)));
        Rng::from_state(state ^ index.rotate_left(17), seq)
    }
}

/// PCG-XSH-RR 64/32 with a selectable increment (stream).
#[derive(Clone, Debug)]
pub struct Rng {
    state: u64,
    increment: u64,
}

const PCG_MULTIPLIER: u64 = 6_364_136_223_846_793_005;

impl Rng {
    pub fn from_state(initial_state: u64, sequence: u64) -> Rng {
        let mut rng = Rng { state: 0, increment: (sequence << 1) | 1 };
        rng.next_u32();
        rng.state = rng.state.wrapping_add(initial_state);
        rng.next_u32();
        rng
    }

    pub fn next_u32(&mut self) -> u32 {
        let old = self.state;
        self.state = old.wrapping_mul(PCG_MULTIPLIER).wrapping_add(self.increment);
        let xorshifted = (((old >> 18) ^ old) >> 27) as u32;
        let rot = (old >> 59) as u32;
        xorshifted.rotate_right(rot)
    }

    pub fn next_u64(&mut self) -> u64 {
        ((self.next_u32() as u64) << 32) | self.next_u32() as u64
    }

    /// Uniform in [0, 1) with 53 bits of precision.
    pub fn uniform(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    /// Uniform in (0, 1): safe to take the logarithm of.
    pub fn uniform_open(&mut self) -> f64 {
        loop {
            let u = self.uniform();
            if u > 0.0 {
                return u;
            }
        }
    }

    /// Uniform in [lo, hi).
    pub fn uniform_range(&mut self, lo: f64, hi: f64) -> f64 {
        debug_assert!(lo <= hi);
        lo + (hi - lo) * self.uniform()
    }

    /// Uniform integer in [0, n), without modulo bias.
    pub fn below(&mut self, n: u32) -> u32 {
        assert!(n > 0, "below(0)");
        let threshold = n.wrapping_neg() % n;
        loop {
            let r = self.next_u32();
            if r >= threshold {
                return r % n;
            }
        }
    }

    pub fn bernoulli(&mut self, p: f64) -> bool {
        self.uniform() < p
    }

    /// Exponential with the given mean.
    pub fn exponential(&mut self, mean: f64) -> f64 {
        -mean * self.uniform_open().ln()
    }

    /// Standard normal, by the Marsaglia polar method (one value per call).
    pub fn standard_normal(&mut self) -> f64 {
        loop {
            let u = 2.0 * self.uniform() - 1.0;
            let v = 2.0 * self.uniform() - 1.0;
            let s = u * u + v * v;
            if s > 0.0 && s < 1.0 {
                return u * (-2.0 * s.ln() / s).sqrt();
            }
        }
    }

    /// Gamma(shape, scale) by Marsaglia and Tsang (2000); shapes below one use
    /// the boost `Gamma(a) = Gamma(a + 1) · U^(1/a)`.
    pub fn gamma(&mut self, shape: f64, scale: f64) -> f64 {
        assert!(shape > 0.0 && scale > 0.0, "gamma({shape}, {scale})");
        if shape < 1.0 {
            let boost = self.uniform_open().powf(1.0 / shape);
            return self.gamma(shape + 1.0, scale) * boost;
        }
        let d = shape - 1.0 / 3.0;
        let c = 1.0 / (9.0 * d).sqrt();
        loop {
            let x = self.standard_normal();
            let v = (1.0 + c * x).powi(3);
            if v <= 0.0 {
                continue;
            }
            let u = self.uniform_open();
            if u.ln() < 0.5 * x * x + d - d * v + d * v.ln() {
                return d * v * scale;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn streams_are_reproducible_and_distinct() {
        let seed = StreamSeed(42);
        let a: Vec<u32> = (0..4).map(|_| seed.stream("a").next_u32()).collect();
        assert!(a.windows(2).all(|w| w[0] == w[1]), "same stream, same first draw");
        let mut a1 = seed.stream("a");
        let mut b1 = seed.stream("b");
        let mut t0 = seed.substream("task", 0);
        let mut t1 = seed.substream("task", 1);
        assert_ne!(a1.next_u64(), b1.next_u64());
        assert_ne!(t0.next_u64(), t1.next_u64());
        assert_ne!(StreamSeed(1).stream("a").next_u64(), StreamSeed(2).stream("a").next_u64());
    }

    fn mean_and_variance(xs: &[f64]) -> (f64, f64) {
        let n = xs.len() as f64;
        let mean = xs.iter().sum::<f64>() / n;
        let var = xs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1.0);
        (mean, var)
    }

    #[test]
    fn gamma_moments_match_theory() {
        let mut rng = StreamSeed(7).stream("gamma");
        for &(shape, scale) in &[(0.5, 2.0), (1.0, 1.0), (6.57, 0.823), (639.1, 0.0156)] {
            let xs: Vec<f64> = (0..200_000).map(|_| rng.gamma(shape, scale)).collect();
            let (mean, var) = mean_and_variance(&xs);
            let want_mean = shape * scale;
            let want_var = shape * scale * scale;
            assert!((mean - want_mean).abs() < 0.02 * want_mean, "mean {mean} vs {want_mean}");
            assert!((var - want_var).abs() < 0.05 * want_var, "var {var} vs {want_var}");
        }
    }

    #[test]
    fn uniform_and_exponential_moments() {
        let mut rng = StreamSeed(3).stream("u");
        let us: Vec<f64> = (0..100_000).map(|_| rng.uniform()).collect();
        let (m, v) = mean_and_variance(&us);
        assert!((m - 0.5).abs() < 0.01 && (v - 1.0 / 12.0).abs() < 0.005);
        let es: Vec<f64> = (0..100_000).map(|_| rng.exponential(3.0)).collect();
        let (m, v) = mean_and_variance(&es);
        assert!((m - 3.0).abs() < 0.06 && (v - 9.0).abs() < 0.5);
        let mut counts = [0u32; 5];
        for _ in 0..50_000 {
            counts[rng.below(5) as usize] += 1;
        }
        assert!(counts.iter().all(|&c| (9_500..10_500).contains(&c)), "{counts:?}");
    }
}
