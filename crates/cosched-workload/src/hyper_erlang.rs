//! The hyper-Erlang model of common order (Jann, Pattnaik, Franke, Wang,
//! Skovira and Riordan, 1997), the workload model of the reference study.
//!
//! Per job-size class ({1}, {2}, {3-4}, {5-8}, ... up to the machine size),
//! inter-arrival times and run times each follow a two-branch hyper-Erlang of
//! common order `n`: with probability `p` a sum of `n` Exp(λ1), else a sum of
//! `n` Exp(λ2). The published parameter tables are not available, so the model
//! is fitted to a trace ([`HyperErlangModel::fit`]), saved as text
//! ([`HyperErlangModel::to_text`]) and generated from
//! ([`HyperErlangModel::generate`]).
//!
//! # The three-moment fit (`workloads.md` §3)
//!
//! For `n = 1, 2, …`: `y_k = m_k / (n(n+1)…(n+k−1))` are the moments of a
//! two-point distribution at the branch phase means `a = 1/λ1`, `b = 1/λ2`
//! with weights `p`, `1 − p`; `a` and `b` are the roots of
//! `t² − s·t + q`, and the smallest `n` giving real `a > b > 0` and
//! `0 < p < 1` is taken. Fits therefore put the longer branch first
//! (`lambda1 < lambda2`).
//!
//! With `r2 = m2/m1² = 1 + CV²` and `r3 = m1·m3/m2²`, such a solution exists at
//! order `n` exactly when `r2 > (n+1)/n` (CV² > 1/n) and `r3 > (n+2)/(n+1)`
//! (the quadratic is then negative at `y1`, so its roots straddle `y1`).
//! Both bounds fall with `n`, so every order from the smallest one up fits and
//! the method's answer is that smallest order. What this means for data:
//!
//! - **CV > 1 with a heavy enough tail** (`r3 > 3/2`): order 1, a
//!   hyperexponential.
//! - **Exponential-like data (CV ≈ 1)** sit on the boundary of order 1. For
//!   the exact moments of an exponential, order 1 degenerates (`a = b`, `p`
//!   undefined), so the method returns order 2 with `p = 1/2` and branch means
//!   `(1 ± 1/√3)·m1`: the same three moments as the exponential, not the
//!   exponential itself. For a sample, the noise decides: CV a little above 1
//!   gives order 1 (often with a small `p` on a long branch), a little below 1
//!   gives order 2. Both match the sample's three moments; nothing snaps to a
//!   pure exponential, since any threshold for that would be a guess.
//! - **Low variability (CV < 1)**: a hyperexponential cannot fit; the order
//!   rises to about `1/CV²` (CV 0.5 needs order 5). Below CV ≈ 0.1 the order
//!   exceeds [`MAX_ORDER`] and the fit fails with
//!   [`FitError::OrderTooHigh`], which states the order needed
//!   (`*_with_max_order` raise the limit). A third moment too light for the
//!   variance (e.g. two-valued data) raises the order in the same way, even
//!   with CV > 1. Zero variance needs an infinite order and is refused.
//! - A condition holding by less than 1e-9 (relative) counts as failed: the
//!   branch means it would give are rounding noise.
//!
//! Sample moments are the plain raw moments (sum of `x^k` over N). Zero values
//! are accepted (traces record seconds, so two jobs of a class are often
//! submitted in the same second); negative or non-finite values are refused.
//! A fit is also refused for fewer than [`MIN_POINTS`] values or all-equal
//! values. Every sample error says how many data points there were.
//!
//! # Generation
//!
//! Each fitted class is an independent arrival stream (its first job one gap
//! after time 0), with its own named random streams
//! (`hyper_erlang.<lo>-<hi>.arrival`, `.service`, `.size`). Streams are merged
//! by time (ties to the smaller class); submit times are rounded to whole
//! seconds and shifted so the first job is at 0; job numbers are 1..=n in
//! submit order. The size is uniform over the class's sizes *(our choice)*;
//! the run time is a draw of the class's service distribution rounded to whole
//! seconds, at least 1 s (SWF traces record whole seconds, and a run time of 0
//! makes a job unusable). Classes skipped by the fit generate no jobs.

use std::fmt;

use cosched_core::{Rng, StreamSeed};

use crate::param_text::{self, key_value, number, size_range};
use crate::swf::{TraceJob, Workload};

/// Highest order [`HyperErlang::fit_moments`] and [`HyperErlang::fit_sample`]
/// try; data with CV below about `1/√MAX_ORDER` need more.
pub const MAX_ORDER: u32 = 100;

/// Fewest data points a sample fit accepts (three moments need three values).
pub const MIN_POINTS: usize = 3;

/// Relative margin by which the existence conditions must hold.
const SLACK: f64 = 1e-9;

/// First line of a saved model (after comments): format name and version.
const TEXT_MAGIC: &str = "hyper-erlang-model 1";

/// Two-branch hyper-Erlang of common order n: with probability p a sum of n
/// Exp(lambda1), else a sum of n Exp(lambda2). Rates are per second when the
/// data were seconds.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct HyperErlang {
    pub order: u32,
    pub p: f64,
    pub lambda1: f64,
    pub lambda2: f64,
}

impl HyperErlang {
    /// `E[X^k] = n(n+1)…(n+k−1)·(p/λ1^k + (1−p)/λ2^k)`.
    pub fn moment(&self, k: u32) -> f64 {
        let n = self.order as f64;
        let rising: f64 = (0..k).map(|i| n + i as f64).product();
        let k = k as i32;
        rising * (self.p / self.lambda1.powi(k) + (1.0 - self.p) / self.lambda2.powi(k))
    }

    pub fn mean(&self) -> f64 {
        self.moment(1)
    }

    /// Within-branch plus between-branch variance (no cancellation, unlike
    /// `moment(2) − mean²`).
    pub fn variance(&self) -> f64 {
        let n = self.order as f64;
        let (a, b) = (1.0 / self.lambda1, 1.0 / self.lambda2);
        n * (self.p * a * a + (1.0 - self.p) * b * b) + n * n * self.p * (1.0 - self.p) * (a - b) * (a - b)
    }

    /// Coefficient of variation.
    pub fn cv(&self) -> f64 {
        self.variance().sqrt() / self.mean()
    }

    /// Means of the two branches, `n/λ1` and `n/λ2`.
    pub fn branch_means(&self) -> (f64, f64) {
        let n = self.order as f64;
        (n / self.lambda1, n / self.lambda2)
    }

    /// The branch, then its Erlang drawn as a Gamma of integer shape, so the
    /// cost does not grow with the order.
    pub fn sample(&self, rng: &mut Rng) -> f64 {
        let rate = if rng.bernoulli(self.p) { self.lambda1 } else { self.lambda2 };
        if self.order == 1 {
            rng.exponential(1.0 / rate)
        } else {
            rng.gamma(self.order as f64, 1.0 / rate)
        }
    }

    /// Why these parameters cannot be sampled, if they cannot. `p` may be 0 or
    /// 1 here (a hand-written pure Erlang), though fits never give that.
    pub fn validate(&self) -> Result<(), String> {
        if self.order == 0 {
            return Err("order n must be at least 1".to_string());
        }
        if !(0.0..=1.0).contains(&self.p) {
            return Err(format!("p = {:?} is not a probability", self.p));
        }
        for (name, rate) in [("lambda1", self.lambda1), ("lambda2", self.lambda2)] {
            if !(rate.is_finite() && rate > 0.0) {
                return Err(format!("{name} = {rate:?} is not a positive finite rate"));
            }
        }
        Ok(())
    }

    /// Fit to the first three raw moments (see the module docs): the smallest
    /// order up to [`MAX_ORDER`] with real `a > b > 0` and `0 < p < 1`.
    pub fn fit_moments(m1: f64, m2: f64, m3: f64) -> Result<HyperErlang, FitError> {
        HyperErlang::fit_moments_with_max_order(m1, m2, m3, MAX_ORDER)
    }

    /// [`HyperErlang::fit_moments`] trying orders up to `max_order`.
    pub fn fit_moments_with_max_order(m1: f64, m2: f64, m3: f64, max_order: u32) -> Result<HyperErlang, FitError> {
        let invalid = || FitError::InvalidMoments { points: None, m1, m2, m3 };
        if !(m1.is_finite() && m1 > 0.0 && m2.is_finite() && m3.is_finite()) {
            return Err(invalid());
        }
        fit_normalized(m1, m2 / (m1 * m1), m3 / (m1 * m1 * m1), max_order, None)
    }

    /// Fit to the raw moments of `data`. Zeros are allowed; see [`FitError`]
    /// for what is refused.
    pub fn fit_sample(data: &[f64]) -> Result<HyperErlang, FitError> {
        HyperErlang::fit_sample_with_max_order(data, MAX_ORDER)
    }

    /// [`HyperErlang::fit_sample`] trying orders up to `max_order`.
    pub fn fit_sample_with_max_order(data: &[f64], max_order: u32) -> Result<HyperErlang, FitError> {
        let points = data.len();
        if points < MIN_POINTS {
            return Err(FitError::TooFewPoints { points, needed: MIN_POINTS });
        }
        if let Some((index, &value)) = data.iter().enumerate().find(|(_, x)| !(x.is_finite() && **x >= 0.0)) {
            return Err(FitError::BadValue { points, index, value });
        }
        if data.iter().all(|&x| x == data[0]) {
            return Err(FitError::AllEqual { points, value: data[0] });
        }
        // Moments of x / mean: values of order 1, so that the cube of a large
        // value cannot overflow and the sums keep their precision.
        let mean = compensated_sum(data.iter().copied()) / points as f64;
        let n2 = compensated_sum(data.iter().map(|x| (x / mean).powi(2))) / points as f64;
        let n3 = compensated_sum(data.iter().map(|x| (x / mean).powi(3))) / points as f64;
        fit_normalized(mean, n2, n3, max_order, Some(points))
    }
}

/// Kahan–Babuška summation: sample moments of 10^5+ values stay exact to a
/// few ulps, which matters near the order boundaries.
fn compensated_sum(values: impl Iterator<Item = f64>) -> f64 {
    let (mut sum, mut carry) = (0.0f64, 0.0f64);
    for v in values {
        let t = sum + v;
        carry += if sum.abs() >= v.abs() { (sum - t) + v } else { (v - t) + sum };
        sum = t;
    }
    sum + carry
}

/// The fit on moments scaled to mean 1: `n2 = m2/m1²`, `n3 = m3/m1³`; branch
/// means are scaled back by `scale` (= m1).
fn fit_normalized(
    scale: f64,
    n2: f64,
    n3: f64,
    max_order: u32,
    points: Option<usize>,
) -> Result<HyperErlang, FitError> {
    let invalid = || FitError::InvalidMoments { points, m1: scale, m2: n2 * scale * scale, m3: n3 * scale.powi(3) };
    // Jensen (m2 ≥ m1²) and Cauchy–Schwarz (m1·m3 ≥ m2²), with room for the
    // rounding of sample moments of nearly constant data.
    if !(n2.is_finite() && n3.is_finite()) || n2 < 1.0 - 1e-12 || n3 < n2 * n2 * (1.0 - 1e-12) {
        return Err(invalid());
    }
    let r2 = n2;
    let r3 = n3 / (n2 * n2);
    for order in 1..=max_order {
        let n = order as f64;
        if r2 * n / (n + 1.0) <= 1.0 + SLACK || r3 * (n + 1.0) / (n + 2.0) <= 1.0 + SLACK {
            continue;
        }
        if let Some(fit) = solve_order(order, n2, n3, scale) {
            return Ok(fit);
        }
    }
    // Smallest n with r2 > (n+1)/n and r3 > (n+2)/(n+1), ignoring the slack;
    // since the orders up to max_order failed, at least max_order + 1.
    let needed = (r2 > 1.0 && r3 > 1.0).then(|| {
        let bound = (1.0 / (r2 - 1.0)).floor() + 1.0;
        let bound = bound.max((1.0 / (r3 - 1.0)).floor()).max(max_order as f64 + 1.0);
        bound.min(u32::MAX as f64) as u32
    });
    Err(FitError::OrderTooHigh { points, cv: (r2 - 1.0).max(0.0).sqrt(), r3, needed, max_order })
}

/// The §3 formulas at one order, on moments scaled to mean 1.
fn solve_order(order: u32, n2: f64, n3: f64, scale: f64) -> Option<HyperErlang> {
    let n = order as f64;
    let y1 = 1.0 / n;
    let y2 = n2 / (n * (n + 1.0));
    let y3 = n3 / (n * (n + 1.0) * (n + 2.0));
    let d = y2 - y1 * y1;
    let s = (y3 - y1 * y2) / d;
    let q = (y1 * y3 - y2 * y2) / d;
    let disc = s * s - 4.0 * q;
    if disc.is_nan() || disc <= 0.0 {
        return None;
    }
    let a = (s + disc.sqrt()) / 2.0;
    let b = q / a; // not (s − √disc)/2, which cancels when b ≪ a
    let p = (y1 - b) / (a - b);
    let fit = HyperErlang { order, p, lambda1: 1.0 / (a * scale), lambda2: 1.0 / (b * scale) };
    let ok = a > b && b > 0.0 && p > 0.0 && p < 1.0 && fit.lambda1.is_finite() && fit.lambda2.is_finite();
    ok.then_some(fit)
}

/// Why a hyper-Erlang (or a model of them) could not be fitted.
#[derive(Clone, Debug, PartialEq)]
pub enum FitError {
    /// Fewer than [`MIN_POINTS`] data points.
    TooFewPoints { points: usize, needed: usize },
    /// A negative or non-finite value (`index` is 0-based).
    BadValue { points: usize, index: usize, value: f64 },
    /// Every value is the same: zero variance.
    AllEqual { points: usize, value: f64 },
    /// Not the moments of a non-negative random variable with positive mean.
    /// `points` is None when the moments were given, not computed.
    InvalidMoments { points: Option<usize>, m1: f64, m2: f64, m3: f64 },
    /// No order up to `max_order` fits. `needed` is the smallest order that
    /// would, None if none would (zero variance, or `r3 = m1·m3/m2² = 1`:
    /// values that are 0 or one other value).
    OrderTooHigh { points: Option<usize>, cv: f64, r3: f64, needed: Option<u32>, max_order: u32 },
    /// A model fit for a machine of 0 CPUs.
    NoMachine,
    /// A model fit where no size class could be fitted; `jobs` counts the jobs
    /// within the machine's sizes.
    NoClassFitted { jobs: usize, skipped: Vec<SkippedClass> },
}

fn data_of(points: Option<usize>) -> String {
    match points {
        Some(n) => points_text(n),
        None => "the given moments".to_string(),
    }
}

fn points_text(n: usize) -> String {
    format!("{n} data point{}", if n == 1 { "" } else { "s" })
}

impl fmt::Display for FitError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FitError::TooFewPoints { points, needed } => {
                write!(f, "{}: too few to fit three moments (at least {needed} needed)", points_text(*points))
            }
            FitError::BadValue { points, index, value } => {
                write!(f, "data point {} of {points} is {value}: values must be finite and not negative", index + 1)
            }
            FitError::AllEqual { points, value } => write!(
                f,
                "all {points} data points equal {value}: zero variance, which no hyper-Erlang of finite order has"
            ),
            FitError::InvalidMoments { points, m1, m2, m3 } => write!(
                f,
                "{}: moments m1 = {m1}, m2 = {m2}, m3 = {m3} are not those of a non-negative random variable \
                 (need m1 > 0, m2 >= m1^2, m1*m3 >= m2^2)",
                data_of(*points)
            ),
            FitError::OrderTooHigh { points, cv, r3, needed, max_order } => {
                write!(
                    f,
                    "no hyper-Erlang of common order up to {max_order} fits {}: CV = {cv:.4} and m1*m3/m2^2 = {r3:.4} \
                     (order n needs CV^2 > 1/n and m1*m3/m2^2 > (n+2)/(n+1)); ",
                    data_of(*points)
                )?;
                match needed {
                    Some(n) => {
                        write!(f, "the smallest order that fits is {n}; raise the order limit or use another model")
                    }
                    None => write!(f, "no finite order fits (zero variance, or only 0 and one other value)"),
                }
            }
            FitError::NoMachine => write!(f, "cannot fit a model for a machine of 0 CPUs"),
            FitError::NoClassFitted { jobs, skipped } => {
                write!(f, "no size class could be fitted from {jobs} jobs")?;
                for s in skipped {
                    write!(f, "; {}: {}", s.label(), s.reason)?;
                }
                Ok(())
            }
        }
    }
}

impl std::error::Error for FitError {}

/// The size classes of a machine of `procs` CPUs: {1}, {2}, {3-4}, {5-8}, …,
/// the last one ending at `procs` (e.g. {33-64}, {65-100} for 100 CPUs).
/// Empty for 0 CPUs.
pub fn size_classes(procs: u32) -> Vec<(u32, u32)> {
    let mut classes = Vec::new();
    let (mut lo, mut hi) = (1u32, 1u32);
    while lo <= procs {
        let top = hi.min(procs);
        classes.push((lo, top));
        if top == procs {
            break;
        }
        lo = top + 1;
        hi = hi.saturating_mul(2);
    }
    classes
}

fn range_label(lo: u32, hi: u32) -> String {
    if lo == hi {
        lo.to_string()
    } else {
        format!("{lo}-{hi}")
    }
}

/// The fitted distributions of one size class.
#[derive(Clone, Debug, PartialEq)]
pub struct ClassModel {
    pub lo: u32,
    pub hi: u32,
    /// Jobs of the class in the fitted trace.
    pub jobs: usize,
    /// Seconds between consecutive submits of jobs of this class.
    pub interarrival: HyperErlang,
    /// Run times, seconds.
    pub service: HyperErlang,
}

/// A size class the fit could not model, and why.
#[derive(Clone, Debug, PartialEq)]
pub struct SkippedClass {
    pub lo: u32,
    pub hi: u32,
    pub jobs: usize,
    /// One line, e.g. "run times: all 5 data points equal 60: …".
    pub reason: String,
}

impl SkippedClass {
    fn label(&self) -> String {
        format!("class {} ({} jobs)", range_label(self.lo, self.hi), self.jobs)
    }
}

/// Per size class, a hyper-Erlang for inter-arrival times and one for run
/// times.
#[derive(Clone, Debug, PartialEq)]
pub struct HyperErlangModel {
    pub procs: u32,
    /// Ascending, non-overlapping, within 1..=procs.
    pub classes: Vec<ClassModel>,
    /// Classes of the fitted trace that have no model (too few jobs, or data
    /// the method cannot fit); they generate no jobs.
    pub skipped: Vec<SkippedClass>,
    /// Jobs of the fitted trace with a size outside 1..=procs, left out.
    pub left_out: usize,
}

impl HyperErlangModel {
    /// Per class: inter-arrival times = gaps between consecutive submits of
    /// jobs of that class (in submit order); service = run times.
    ///
    /// A class whose fit fails (no jobs, fewer than [`MIN_POINTS`] + 1 jobs,
    /// data the method cannot fit) goes to `skipped` with the reason; the fit
    /// fails only if no class at all could be fitted, or `procs` is 0. Jobs
    /// wider than `procs` (or of size 0) are counted in `left_out`.
    pub fn fit(jobs: &[TraceJob], procs: u32) -> Result<HyperErlangModel, FitError> {
        if procs == 0 {
            return Err(FitError::NoMachine);
        }
        let left_out = jobs.iter().filter(|j| j.procs == 0 || j.procs > procs).count();
        let mut model = HyperErlangModel { procs, classes: Vec::new(), skipped: Vec::new(), left_out };
        for (lo, hi) in size_classes(procs) {
            let mut members: Vec<&TraceJob> = jobs.iter().filter(|j| (lo..=hi).contains(&j.procs)).collect();
            members.sort_by(|a, b| a.submit_s.total_cmp(&b.submit_s));
            let count = members.len();
            let fitted = if count == 0 {
                Err("no jobs".to_string())
            } else {
                let gaps: Vec<f64> = members.windows(2).map(|w| w[1].submit_s - w[0].submit_s).collect();
                let runs: Vec<f64> = members.iter().map(|j| j.run_s).collect();
                HyperErlang::fit_sample(&gaps).map_err(|e| format!("inter-arrival times: {e}")).and_then(|arrival| {
                    HyperErlang::fit_sample(&runs)
                        .map(|service| (arrival, service))
                        .map_err(|e| format!("run times: {e}"))
                })
            };
            match fitted {
                Ok((interarrival, service)) => {
                    model.classes.push(ClassModel { lo, hi, jobs: count, interarrival, service })
                }
                Err(reason) => model.skipped.push(SkippedClass { lo, hi, jobs: count, reason }),
            }
        }
        if model.classes.is_empty() {
            return Err(FitError::NoClassFitted { jobs: jobs.len() - left_out, skipped: model.skipped });
        }
        Ok(model)
    }

    /// Why this model cannot generate jobs, if it cannot.
    pub fn validate(&self) -> Result<(), String> {
        if self.procs == 0 {
            return Err("procs must be at least 1".to_string());
        }
        if self.classes.is_empty() {
            return Err("no size class has a model".to_string());
        }
        let mut previous_hi = 0;
        for c in &self.classes {
            let label = range_label(c.lo, c.hi);
            if c.lo == 0 || c.lo > c.hi || c.hi > self.procs {
                return Err(format!("class {label} is not a range of sizes within 1-{}", self.procs));
            }
            if c.lo <= previous_hi {
                return Err(format!("class {label} overlaps or precedes the class before it"));
            }
            previous_hi = c.hi;
            c.interarrival.validate().map_err(|e| format!("class {label} arrival: {e}"))?;
            c.service.validate().map_err(|e| format!("class {label} service: {e}"))?;
        }
        Ok(())
    }

    /// The saved parameter file: `#` comments, then `hyper-erlang-model 1`,
    /// `procs P`, `left_out N`, one line per class
    ///
    /// `class LO-HI jobs=N arrival n=.. p=.. lambda1=.. lambda2=.. service n=.. p=.. lambda1=.. lambda2=..`
    ///
    /// (rates per second) and one per skipped class, `skipped LO-HI jobs=N
    /// reason…`. Floats are written in Rust's shortest round-trip form, so
    /// [`HyperErlangModel::from_text`] gives back an equal model. Newlines and
    /// `#` in a skip reason are written as spaces.
    pub fn to_text(&self) -> String {
        let mut out = String::new();
        out.push_str("# cosched hyper-Erlang workload model (Jann et al. 1997), one line per size class.\n");
        out.push_str("# arrival = seconds between submits of jobs of the class, service = run time (s); each is a\n");
        out.push_str("# hyper-Erlang of common order n: with probability p a sum of n Exp(lambda1), else of n\n");
        out.push_str("# Exp(lambda2), rates per second. Sizes are uniform within a class.\n");
        out.push_str(TEXT_MAGIC);
        out.push('\n');
        out.push_str(&format!("procs {}\nleft_out {}\n", self.procs, self.left_out));
        let he = |h: &HyperErlang| format!("n={} p={:?} lambda1={:?} lambda2={:?}", h.order, h.p, h.lambda1, h.lambda2);
        for c in &self.classes {
            out.push_str(&format!(
                "# {}: mean gap {:.6e} s (CV {:.3}), mean run time {:.6e} s (CV {:.3})\n",
                range_label(c.lo, c.hi),
                c.interarrival.mean(),
                c.interarrival.cv(),
                c.service.mean(),
                c.service.cv()
            ));
            out.push_str(&format!(
                "class {}-{} jobs={} arrival {} service {}\n",
                c.lo,
                c.hi,
                c.jobs,
                he(&c.interarrival),
                he(&c.service)
            ));
        }
        for s in &self.skipped {
            let reason: String =
                s.reason.chars().map(|ch| if matches!(ch, '\n' | '\r' | '#') { ' ' } else { ch }).collect();
            out.push_str(&format!("skipped {}-{} jobs={} {}\n", s.lo, s.hi, s.jobs, reason.trim()));
        }
        out
    }

    /// Read a file written by [`HyperErlangModel::to_text`] (or by hand in
    /// the same format; `#` starts a comment anywhere). Class lines must come
    /// in ascending, non-overlapping order within 1..=procs. Errors start with
    /// `line N:` for a bad line.
    pub fn from_text(text: &str) -> Result<HyperErlangModel, String> {
        let mut seen_magic = false;
        let mut procs: Option<(u32, usize)> = None;
        let mut left_out: Option<usize> = None;
        let mut classes: Vec<(ClassModel, usize)> = Vec::new();
        let mut skipped: Vec<(SkippedClass, usize)> = Vec::new();
        for (i, raw) in text.lines().enumerate() {
            let line_no = i + 1;
            let at = |message: String| format!("line {line_no}: {message}");
            let line = raw.split('#').next().unwrap_or("").trim();
            if line.is_empty() {
                continue;
            }
            if !seen_magic {
                let words: Vec<&str> = line.split_whitespace().collect();
                if words != TEXT_MAGIC.split(' ').collect::<Vec<_>>() {
                    return Err(at(if words[0] == "hyper-erlang-model" {
                        format!("unsupported format '{line}' (expected '{TEXT_MAGIC}')")
                    } else {
                        format!("not a hyper-Erlang model file: expected '{TEXT_MAGIC}' first, found '{line}'")
                    }));
                }
                seen_magic = true;
                continue;
            }
            let tokens: Vec<&str> = line.split_whitespace().collect();
            match tokens[0] {
                "procs" => {
                    if procs.is_some() {
                        return Err(at("a second 'procs' line".to_string()));
                    }
                    let [_, value] = tokens[..] else {
                        return Err(at("expected 'procs <CPUs>'".to_string()));
                    };
                    let value: u32 = number(value, "procs").map_err(at)?;
                    if value == 0 {
                        return Err(at("procs must be at least 1".to_string()));
                    }
                    procs = Some((value, line_no));
                }
                "left_out" => {
                    if left_out.is_some() {
                        return Err(at("a second 'left_out' line".to_string()));
                    }
                    let [_, value] = tokens[..] else {
                        return Err(at("expected 'left_out <jobs>'".to_string()));
                    };
                    left_out = Some(number(value, "left_out").map_err(at)?);
                }
                "class" => {
                    let class = parse_class_line(&tokens).map_err(at)?;
                    if let Some((previous, _)) = classes.last() {
                        if class.lo <= previous.hi {
                            return Err(at(format!(
                                "class {}-{} overlaps or precedes class {}-{}",
                                class.lo, class.hi, previous.lo, previous.hi
                            )));
                        }
                    }
                    classes.push((class, line_no));
                }
                "skipped" => {
                    if tokens.len() < 3 {
                        return Err(at("expected 'skipped LO-HI jobs=N reason'".to_string()));
                    }
                    let (lo, hi) = size_range(tokens[1]).map_err(at)?;
                    let jobs = number(key_value(tokens[2], "jobs").map_err(at)?, "jobs").map_err(at)?;
                    // The reason is the rest of the line, inner spacing included.
                    let rest = [tokens[0], tokens[1], tokens[2]]
                        .iter()
                        .fold(line, |rest, token| rest.trim_start().strip_prefix(token).unwrap_or(rest))
                        .trim();
                    skipped.push((SkippedClass { lo, hi, jobs, reason: rest.to_string() }, line_no));
                }
                other => {
                    return Err(at(format!("unknown keyword '{other}' (expected procs, left_out, class or skipped)")))
                }
            }
        }
        if !seen_magic {
            return Err(format!("no '{TEXT_MAGIC}' line: not a hyper-Erlang model file"));
        }
        let Some((procs, _)) = procs else {
            return Err("no 'procs' line".to_string());
        };
        if classes.is_empty() {
            return Err("no 'class' line: the model has no size class".to_string());
        }
        for (lo, hi, line_no) in
            classes.iter().map(|(c, l)| (c.lo, c.hi, *l)).chain(skipped.iter().map(|(s, l)| (s.lo, s.hi, *l)))
        {
            if hi > procs {
                return Err(format!("line {line_no}: class {lo}-{hi} is wider than the machine (procs {procs})"));
            }
        }
        let model = HyperErlangModel {
            procs,
            classes: classes.into_iter().map(|(c, _)| c).collect(),
            skipped: skipped.into_iter().map(|(s, _)| s).collect(),
            left_out: left_out.unwrap_or(0),
        };
        model.validate()?;
        Ok(model)
    }

    /// `job_count` jobs from the fitted classes, as the module docs describe
    /// (queue field -1: the model has no job kinds).
    ///
    /// # Panics
    /// If `self.validate()` fails.
    pub fn generate(&self, job_count: usize, seed: StreamSeed) -> Vec<TraceJob> {
        if let Err(e) = self.validate() {
            panic!("invalid hyper-Erlang model: {e}");
        }
        struct ClassStream<'a> {
            class: &'a ClassModel,
            arrival: Rng,
            service: Rng,
            size: Rng,
            next_s: f64,
        }
        let mut streams: Vec<ClassStream> = self
            .classes
            .iter()
            .map(|class| {
                let stream = |what: &str| seed.stream(&format!("hyper_erlang.{}-{}.{what}", class.lo, class.hi));
                let mut arrival = stream("arrival");
                let next_s = class.interarrival.sample(&mut arrival);
                ClassStream { class, arrival, service: stream("service"), size: stream("size"), next_s }
            })
            .collect();
        let mut jobs = Vec::with_capacity(job_count);
        for number in 1..=job_count as u64 {
            let s = streams
                .iter_mut()
                .reduce(|best, s| if s.next_s < best.next_s { s } else { best })
                .expect("validate ensures a class");
            let size = s.class.lo + s.size.below(s.class.hi - s.class.lo + 1);
            let run_s = s.class.service.sample(&mut s.service).round().max(1.0);
            jobs.push(TraceJob::new(number, s.next_s.round(), run_s, size, -1));
            s.next_s += s.class.interarrival.sample(&mut s.arrival);
        }
        crate::load::shift_to_zero(&mut jobs);
        jobs
    }

    /// [`HyperErlangModel::generate`] wrapped in a workload whose header
    /// records the model, the seed and the machine size.
    pub fn generate_workload(&self, job_count: usize, seed: StreamSeed) -> Workload {
        Workload {
            header: vec![
                "Computer: synthetic (hyper-Erlang model of common order, Jann et al. 1997)".to_string(),
                format!(
                    "Note: generated by cosched-workload from a fitted model of {} size classes, seed {}",
                    self.classes.len(),
                    seed.0
                ),
                format!("MaxNodes: {}", self.procs),
                format!("MaxProcs: {}", self.procs),
            ],
            jobs: self.generate(job_count, seed),
            ..Workload::default()
        }
    }
}

fn parse_class_line(tokens: &[&str]) -> Result<ClassModel, String> {
    const SHAPE: &str = "expected 'class LO-HI jobs=N arrival n=.. p=.. lambda1=.. lambda2=.. \
                         service n=.. p=.. lambda1=.. lambda2=..'";
    if tokens.len() != 13 {
        return Err(format!("{SHAPE}, found {} words", tokens.len()));
    }
    let (lo, hi) = size_range(tokens[1])?;
    let jobs = number(key_value(tokens[2], "jobs")?, "jobs")?;
    let interarrival = labelled_hyper_erlang(&tokens[3..8], "arrival")?;
    let service = labelled_hyper_erlang(&tokens[8..13], "service")?;
    Ok(ClassModel { lo, hi, jobs, interarrival, service })
}

/// `label n=.. p=.. lambda1=.. lambda2=..`
fn labelled_hyper_erlang(tokens: &[&str], label: &str) -> Result<HyperErlang, String> {
    match tokens {
        [first, rest @ ..] if *first == label => param_text::hyper_erlang(rest.try_into().expect("five words"), label),
        _ => Err(format!("expected '{label}', found '{}'", tokens[0])),
    }
}

/// A table: per class, jobs, then order, p, mean and CV of each distribution.
impl fmt::Display for HyperErlangModel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "hyper-Erlang model for {} CPUs (two branches of common order n per distribution)", self.procs)?;
        writeln!(
            f,
            "{:>11} {:>8} | {:>3} {:>6} {:>12} {:>6} | {:>3} {:>6} {:>12} {:>6}",
            "class", "jobs", "n", "p", "gap mean s", "CV", "n", "p", "run mean s", "CV"
        )?;
        for c in &self.classes {
            write!(f, "{:>11} {:>8}", range_label(c.lo, c.hi), c.jobs)?;
            for h in [&c.interarrival, &c.service] {
                write!(f, " | {:>3} {:>6.3} {:>12.1} {:>6.2}", h.order, h.p, h.mean(), h.cv())?;
            }
            writeln!(f)?;
        }
        for s in &self.skipped {
            writeln!(f, "skipped {}: {}", s.label(), s.reason)?;
        }
        if self.left_out > 0 {
            writeln!(f, "left out: {} jobs with a size outside 1-{}", self.left_out, self.procs)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lublin::{self, LublinParams};

    fn rel(got: f64, want: f64) -> f64 {
        ((got - want) / want).abs()
    }

    /// A hyper-Erlang given by its branch means rather than its phase rates.
    fn by_means(order: u32, p: f64, mean1: f64, mean2: f64) -> HyperErlang {
        HyperErlang { order, p, lambda1: order as f64 / mean1, lambda2: order as f64 / mean2 }
    }

    fn draws(he: &HyperErlang, count: usize, seed: u64) -> Vec<f64> {
        let mut rng = StreamSeed(seed).stream("test.draws");
        (0..count).map(|_| he.sample(&mut rng)).collect()
    }

    fn raw_moments(xs: &[f64]) -> [f64; 3] {
        let n = xs.len() as f64;
        [1, 2, 3].map(|k| xs.iter().map(|x| x.powi(k)).sum::<f64>() / n)
    }

    /// Any successful fit reproduces the three moments it was fitted to.
    fn assert_matches_moments(fit: &HyperErlang, m: [f64; 3], tol: f64) {
        for k in 1..=3 {
            let got = fit.moment(k);
            assert!(rel(got, m[k as usize - 1]) < tol, "moment {k}: fit {got} vs data {} ({fit:?})", m[k as usize - 1]);
        }
    }

    #[test]
    fn moments_variance_and_sampling_agree() {
        let he = by_means(3, 0.3, 900.0, 120.0);
        assert_eq!(he.moment(0), 1.0);
        assert!(rel(he.mean(), 0.3 * 900.0 + 0.7 * 120.0) < 1e-12);
        assert!(rel(he.variance(), he.moment(2) - he.mean().powi(2)) < 1e-9);
        let xs = draws(&he, 200_000, 1);
        let m = raw_moments(&xs);
        assert!(rel(m[0], he.mean()) < 0.01, "sample mean {} vs {}", m[0], he.mean());
        assert!(rel(m[1], he.moment(2)) < 0.03, "sample m2 {} vs {}", m[1], he.moment(2));
        assert!(xs.iter().all(|&x| x > 0.0 && x.is_finite()));
    }

    #[test]
    fn fit_moments_recovers_parameters_exactly() {
        // Each case's order is the smallest that fits its moments (checked by
        // the recovery itself); lambda1 < lambda2 is the fit's convention.
        let cases = [
            HyperErlang { order: 1, p: 0.3, lambda1: 0.1, lambda2: 2.0 },
            HyperErlang { order: 1, p: 0.05, lambda1: 1e-4, lambda2: 1e-2 },
            HyperErlang { order: 1, p: 0.8, lambda1: 0.5, lambda2: 0.6 },
            by_means(2, 0.4, 3.6, 1.4),
            by_means(5, 0.4, 6000.0, 4500.0),
            by_means(20, 0.3, 21.2, 19.6),
        ];
        for want in cases {
            let swapped = HyperErlang { p: 1.0 - want.p, lambda1: want.lambda2, lambda2: want.lambda1, ..want };
            for given in [want, swapped] {
                let fit = HyperErlang::fit_moments(given.moment(1), given.moment(2), given.moment(3))
                    .unwrap_or_else(|e| panic!("{given:?}: {e}"));
                assert_eq!(fit.order, want.order, "{given:?} -> {fit:?}");
                assert!((fit.p - want.p).abs() < 1e-9, "{given:?} -> {fit:?}");
                assert!(rel(fit.lambda1, want.lambda1) < 1e-9, "{given:?} -> {fit:?}");
                assert!(rel(fit.lambda2, want.lambda2) < 1e-9, "{given:?} -> {fit:?}");
            }
        }
    }

    #[test]
    fn a_lower_order_with_the_same_moments_wins() {
        // Order 2 with very different branches has the moments of some order-1
        // distribution too: the method returns that one.
        let he = by_means(2, 0.1, 40.0, 1.0);
        let m = [1, 2, 3].map(|k| he.moment(k));
        let fit = HyperErlang::fit_moments(m[0], m[1], m[2]).unwrap();
        assert_eq!(fit.order, 1);
        assert_matches_moments(&fit, m, 1e-9);
    }

    #[test]
    fn fit_sample_recovers_parameters_from_large_samples() {
        // (distribution, tolerance on p, relative tolerance on branch means)
        let cases = [
            (by_means(1, 0.3, 1000.0, 100.0), 0.03, 0.05),
            (by_means(2, 0.4, 3600.0, 1400.0), 0.05, 0.06),
            // Close branches: moments are well determined, p much less so.
            (by_means(5, 0.4, 60.0, 45.0), 0.15, 0.06),
        ];
        for (seed, (want, p_tol, mean_tol)) in cases.into_iter().enumerate() {
            let xs = draws(&want, 200_000, seed as u64);
            let fit = HyperErlang::fit_sample(&xs).unwrap_or_else(|e| panic!("{want:?}: {e}"));
            assert_matches_moments(&fit, raw_moments(&xs), 1e-9);
            assert_eq!(fit.order, want.order, "{want:?} -> {fit:?}");
            assert!(rel(fit.mean(), want.mean()) < 0.02, "{want:?} -> {fit:?}");
            assert!(rel(fit.moment(2), want.moment(2)) < 0.05, "{want:?} -> {fit:?}");
            assert!(rel(fit.cv(), want.cv()) < 0.02, "{want:?} -> {fit:?}");
            assert!((fit.p - want.p).abs() < p_tol, "{want:?} -> {fit:?}");
            let (f1, f2) = fit.branch_means();
            let (w1, w2) = want.branch_means();
            assert!(rel(f1, w1) < mean_tol && rel(f2, w2) < mean_tol, "{want:?} -> {fit:?}");
        }
    }

    #[test]
    fn exact_exponential_moments_give_the_symmetric_order_two_fit() {
        let m = 50.0;
        let fit = HyperErlang::fit_moments(m, 2.0 * m * m, 6.0 * m * m * m).unwrap();
        assert_eq!(fit.order, 2);
        assert!((fit.p - 0.5).abs() < 1e-9, "{fit:?}");
        let (b1, b2) = fit.branch_means();
        let spread = 1.0 / 3f64.sqrt();
        assert!(rel(b1, m * (1.0 + spread)) < 1e-9 && rel(b2, m * (1.0 - spread)) < 1e-9, "{fit:?}");
    }

    #[test]
    fn exponential_samples_fit_at_order_one_or_two() {
        let mut orders = Vec::new();
        for seed in 0..4 {
            let mut rng = StreamSeed(seed).stream("test.exp");
            let xs: Vec<f64> = (0..200_000).map(|_| rng.exponential(50.0)).collect();
            let fit = HyperErlang::fit_sample(&xs).unwrap();
            assert_matches_moments(&fit, raw_moments(&xs), 1e-9);
            assert!(rel(fit.mean(), 50.0) < 0.02 && rel(fit.cv(), 1.0) < 0.02, "{fit:?}");
            orders.push(fit.order);
        }
        assert!(orders.iter().all(|&n| n == 1 || n == 2), "{orders:?}");
    }

    #[test]
    fn low_variability_needs_a_higher_order_or_is_refused() {
        // Gamma(16): CV 1/4, so order > 16.
        let mut rng = StreamSeed(5).stream("test.gamma");
        let xs: Vec<f64> = (0..100_000).map(|_| rng.gamma(16.0, 10.0)).collect();
        let fit = HyperErlang::fit_sample(&xs).unwrap();
        assert!((12..=24).contains(&fit.order), "{fit:?}");
        assert_matches_moments(&fit, raw_moments(&xs), 1e-9);

        // Gamma(400): CV 1/20, so order > 400, beyond MAX_ORDER.
        let xs: Vec<f64> = (0..20_000).map(|_| rng.gamma(400.0, 1.0)).collect();
        let err = HyperErlang::fit_sample(&xs).unwrap_err();
        let FitError::OrderTooHigh { points, needed: Some(needed), max_order, .. } = err else {
            panic!("expected OrderTooHigh, got {err:?}");
        };
        assert_eq!((points, max_order), (Some(20_000), MAX_ORDER));
        assert!((300..=550).contains(&needed), "needed {needed}");
        let text = err.to_string();
        assert!(text.contains("20000 data points") && text.contains(&format!("order that fits is {needed}")), "{text}");
        let fit = HyperErlang::fit_sample_with_max_order(&xs, 1000).unwrap();
        assert_eq!(fit.order, needed);
        assert_matches_moments(&fit, raw_moments(&xs), 1e-9);
    }

    #[test]
    fn degenerate_data_are_refused_with_reasons() {
        let err = |xs: &[f64]| HyperErlang::fit_sample(xs).unwrap_err();
        assert_eq!(err(&[]), FitError::TooFewPoints { points: 0, needed: MIN_POINTS });
        assert_eq!(err(&[1.0, 2.0]), FitError::TooFewPoints { points: 2, needed: MIN_POINTS });
        assert!(err(&[1.0, 2.0]).to_string().starts_with("2 data points: too few"));
        assert_eq!(err(&[5.0; 4]), FitError::AllEqual { points: 4, value: 5.0 });
        assert!(err(&[5.0; 4]).to_string().contains("all 4 data points equal 5"));
        assert_eq!(err(&[0.0; 3]), FitError::AllEqual { points: 3, value: 0.0 });
        assert_eq!(err(&[1.0, -2.0, 3.0]), FitError::BadValue { points: 3, index: 1, value: -2.0 });
        assert!(err(&[1.0, -2.0, 3.0]).to_string().contains("data point 2 of 3 is -2"));
        assert!(matches!(err(&[1.0, 2.0, f64::NAN]), FitError::BadValue { index: 2, .. }));
        assert!(matches!(err(&[f64::INFINITY, 2.0, 1.0]), FitError::BadValue { index: 0, .. }));
        // Only 0 and one other value: m1·m3 = m2², no finite order.
        let two_valued = err(&[0.0, 10.0, 0.0, 10.0, 0.0, 10.0]);
        assert!(matches!(two_valued, FitError::OrderTooHigh { needed: None, points: Some(6), .. }), "{two_valued:?}");
        assert!(two_valued.to_string().contains("no finite order"));
        // Zeros among other values are data (same-second submits).
        let fit = HyperErlang::fit_sample(&[0.0, 1.0, 0.0, 3.0, 10.0, 0.0, 2.0, 50.0]).unwrap();
        assert_matches_moments(&fit, raw_moments(&[0.0, 1.0, 0.0, 3.0, 10.0, 0.0, 2.0, 50.0]), 1e-9);

        let moments = |m1, m2, m3| HyperErlang::fit_moments(m1, m2, m3).unwrap_err();
        assert!(matches!(moments(1.0, 0.5, 1.0), FitError::InvalidMoments { points: None, .. }));
        assert!(matches!(moments(0.0, 1.0, 1.0), FitError::InvalidMoments { .. }));
        assert!(matches!(moments(1.0, 2.0, 3.0), FitError::InvalidMoments { .. }), "m1·m3 < m2²");
        assert!(matches!(moments(f64::NAN, 2.0, 6.0), FitError::InvalidMoments { .. }));
        let constant = moments(2.0, 4.0, 8.0);
        assert!(matches!(constant, FitError::OrderTooHigh { needed: None, points: None, .. }), "{constant:?}");
        assert!(constant.to_string().contains("the given moments"));
        // Exponential moments with only order 1 allowed: order 2 is needed.
        let capped = HyperErlang::fit_moments_with_max_order(1.0, 2.0, 6.0, 1).unwrap_err();
        assert!(matches!(capped, FitError::OrderTooHigh { needed: Some(2), max_order: 1, .. }), "{capped:?}");
    }

    #[test]
    fn size_classes_double_up_to_the_machine() {
        assert_eq!(size_classes(32), vec![(1, 1), (2, 2), (3, 4), (5, 8), (9, 16), (17, 32)]);
        assert_eq!(size_classes(1), vec![(1, 1)]);
        assert_eq!(size_classes(3), vec![(1, 1), (2, 2), (3, 3)]);
        assert_eq!(size_classes(100).last(), Some(&(65, 100)));
        assert!(size_classes(0).is_empty());
        let huge = size_classes(u32::MAX);
        assert_eq!(huge.len(), 33);
        assert_eq!(huge.last(), Some(&(1 << 31 | 1, u32::MAX)));
    }

    fn known_model() -> HyperErlangModel {
        let class = |lo, hi, interarrival, service| ClassModel { lo, hi, jobs: 0, interarrival, service };
        HyperErlangModel {
            procs: 32,
            classes: vec![
                class(1, 1, by_means(1, 0.2, 2000.0, 200.0), by_means(1, 0.3, 20_000.0, 500.0)),
                class(2, 2, by_means(2, 0.4, 3600.0, 1400.0), by_means(1, 0.1, 9000.0, 900.0)),
                class(3, 4, by_means(1, 0.1, 10_000.0, 1000.0), by_means(2, 0.4, 7200.0, 2800.0)),
                class(5, 8, by_means(1, 0.5, 3000.0, 600.0), by_means(1, 0.2, 30_000.0, 3000.0)),
                class(9, 16, by_means(2, 0.3, 8000.0, 2000.0), by_means(5, 0.4, 6000.0, 4500.0)),
                class(17, 32, by_means(1, 0.25, 20_000.0, 3000.0), by_means(1, 0.5, 40_000.0, 4000.0)),
            ],
            skipped: Vec::new(),
            left_out: 0,
        }
    }

    /// (count, mean run time) of the jobs of each class.
    fn per_class(jobs: &[TraceJob], classes: &[(u32, u32)]) -> Vec<(usize, f64)> {
        classes
            .iter()
            .map(|&(lo, hi)| {
                let runs: Vec<f64> = jobs.iter().filter(|j| (lo..=hi).contains(&j.procs)).map(|j| j.run_s).collect();
                (runs.len(), runs.iter().sum::<f64>() / runs.len() as f64)
            })
            .collect()
    }

    fn check_output_shape(jobs: &[TraceJob], model: &HyperErlangModel, count: usize) {
        assert_eq!(jobs.len(), count);
        assert_eq!(jobs[0].submit_s, 0.0);
        for (i, j) in jobs.iter().enumerate() {
            assert_eq!(j.job_number, i as u64 + 1);
            assert!(j.run_s >= 1.0 && j.run_s.fract() == 0.0 && j.submit_s.fract() == 0.0, "{j:?}");
            assert!(model.classes.iter().any(|c| (c.lo..=c.hi).contains(&j.procs)), "{j:?}");
            assert_eq!(j.fields[1], j.submit_s);
        }
        assert!(jobs.windows(2).all(|w| w[0].submit_s <= w[1].submit_s));
    }

    /// Relative difference within five standard errors of a mean of `n`
    /// values with coefficient of variation `cv`, for two independent samples.
    fn within_noise(got: f64, want: f64, cv: f64, n: usize) -> bool {
        rel(got, want) <= 5.0 * cv * (2.0 / n as f64).sqrt()
    }

    #[test]
    fn fit_on_a_generated_workload_then_generate_again() {
        let truth = known_model();
        let classes: Vec<(u32, u32)> = truth.classes.iter().map(|c| (c.lo, c.hi)).collect();
        let first = truth.generate(60_000, StreamSeed(11));
        check_output_shape(&first, &truth, 60_000);
        let fitted = HyperErlangModel::fit(&first, 32).unwrap();
        assert_eq!(fitted.classes.len(), 6, "{fitted}");
        assert!(fitted.skipped.is_empty() && fitted.left_out == 0);
        for (t, f) in truth.classes.iter().zip(&fitted.classes) {
            assert_eq!((t.lo, t.hi), (f.lo, f.hi));
            for (want, got) in [(&t.interarrival, &f.interarrival), (&t.service, &f.service)] {
                assert!(within_noise(got.mean(), want.mean(), want.cv(), f.jobs), "{want:?} vs {got:?}");
                assert!(rel(got.cv(), want.cv()) < 0.15, "{want:?} vs {got:?}");
            }
        }
        // Gaps are taken in submit order, whatever the order of the input.
        let reversed: Vec<TraceJob> = first.iter().rev().cloned().collect();
        let refit = HyperErlangModel::fit(&reversed, 32).unwrap();
        for (a, b) in fitted.classes.iter().zip(&refit.classes) {
            assert_eq!(
                (a.jobs, a.interarrival.order, a.service.order),
                (b.jobs, b.interarrival.order, b.service.order)
            );
            assert!(rel(b.interarrival.lambda1, a.interarrival.lambda1) < 1e-9, "{a:?} vs {b:?}");
            assert!(rel(b.service.lambda2, a.service.lambda2) < 1e-9, "{a:?} vs {b:?}");
        }
        let second = fitted.generate(60_000, StreamSeed(12));
        check_output_shape(&second, &fitted, 60_000);
        for ((c, (n1, run1)), (n2, run2)) in
            fitted.classes.iter().zip(per_class(&first, &classes)).zip(per_class(&second, &classes))
        {
            assert_eq!(c.jobs, n1);
            assert!(
                within_noise(n2 as f64, n1 as f64, c.interarrival.cv(), n1),
                "class {}-{}: {n1} vs {n2}",
                c.lo,
                c.hi
            );
            assert!(within_noise(run2, run1, c.service.cv(), n1), "class {}-{}: {run1} vs {run2}", c.lo, c.hi);
        }
    }

    #[test]
    fn fit_on_a_lublin_workload_then_generate() {
        let source = lublin::generate(&LublinParams::sized_to(32), 20_000, StreamSeed(3));
        let model = HyperErlangModel::fit(&source, 32).unwrap();
        assert_eq!(model.classes.len() + model.skipped.len(), 6, "{model}");
        let fitted_jobs: usize =
            model.classes.iter().map(|c| c.jobs).sum::<usize>() + model.skipped.iter().map(|s| s.jobs).sum::<usize>();
        assert_eq!(fitted_jobs + model.left_out, 20_000);
        let generated = model.generate(20_000, StreamSeed(4));
        check_output_shape(&generated, &model, 20_000);
        let classes: Vec<(u32, u32)> = model.classes.iter().map(|c| (c.lo, c.hi)).collect();
        // Shares of the modelled jobs, not of all jobs: skipped classes are absent.
        let modelled: usize = model.classes.iter().map(|c| c.jobs).sum();
        for (c, (n, run)) in model.classes.iter().zip(per_class(&generated, &classes)) {
            let share_then = c.jobs as f64 / modelled as f64;
            let share_now = n as f64 / 20_000.0;
            assert!(within_noise(share_now, share_then, c.interarrival.cv(), c.jobs), "{c:?}: {n} jobs");
            assert!(within_noise(run, c.service.mean(), c.service.cv(), n), "{c:?}: mean run {run}");
        }
        let table = model.to_string();
        for label in ["1", "2", "3-4", "5-8", "9-16", "17-32"] {
            assert!(
                table
                    .lines()
                    .any(|l| l.split_whitespace().next() == Some(label) || l.contains(&format!("class {label} "))),
                "{label}\n{table}"
            );
        }
    }

    #[test]
    fn same_seed_same_jobs() {
        let model = known_model();
        let a = model.generate(3_000, StreamSeed(9));
        assert_eq!(a, model.generate(3_000, StreamSeed(9)));
        assert_ne!(a, model.generate(3_000, StreamSeed(10)));
        // A prefix does not depend on how many jobs are asked for.
        assert_eq!(a[..1_000], model.generate(1_000, StreamSeed(9))[..]);
    }

    #[test]
    fn classes_without_a_fit_are_reported() {
        let mut jobs: Vec<TraceJob> = known_model().generate(500, StreamSeed(1));
        jobs.retain(|j| j.procs == 1 || (9..=16).contains(&j.procs));
        let t = jobs.last().unwrap().submit_s;
        jobs.push(TraceJob::new(9_001, t + 10.0, 100.0, 2, -1));
        jobs.push(TraceJob::new(9_002, t + 20.0, 100.0, 2, -1));
        for (i, gap) in [5.0, 17.0, 3.0, 40.0, 8.0].iter().enumerate() {
            jobs.push(TraceJob::new(9_010 + i as u64, t + gap * (i + 1) as f64, 60.0, 4, -1));
        }
        jobs.push(TraceJob::new(9_100, t, 60.0, 40, -1));
        let model = HyperErlangModel::fit(&jobs, 32).unwrap();
        let fitted: Vec<(u32, u32)> = model.classes.iter().map(|c| (c.lo, c.hi)).collect();
        assert_eq!(fitted, vec![(1, 1), (9, 16)]);
        assert_eq!(model.left_out, 1);
        let reasons: Vec<(u32, usize, &str)> =
            model.skipped.iter().map(|s| (s.lo, s.jobs, s.reason.as_str())).collect();
        assert_eq!(reasons.len(), 4, "{reasons:?}");
        assert_eq!((reasons[0].0, reasons[0].1), (2, 2));
        assert!(reasons[0].2.starts_with("inter-arrival times: 1 data point: too few"), "{reasons:?}");
        assert_eq!((reasons[1].0, reasons[1].1), (3, 5));
        assert!(reasons[1].2.starts_with("run times: all 5 data points equal 60"), "{reasons:?}");
        assert_eq!(reasons[2], (5, 0, "no jobs"));
        assert_eq!(reasons[3], (17, 0, "no jobs"));
        let table = model.to_string();
        assert!(table.contains("skipped class 3-4 (5 jobs): run times: all 5 data points"), "{table}");
        assert!(table.contains("left out: 1 jobs"), "{table}");
        // Generation draws only from fitted classes.
        assert!(model.generate(500, StreamSeed(2)).iter().all(|j| j.procs == 1 || (9..=16).contains(&j.procs)));

        let few: Vec<TraceJob> = jobs.iter().filter(|j| j.procs == 2).cloned().collect();
        let err = HyperErlangModel::fit(&few, 32).unwrap_err();
        assert!(matches!(&err, FitError::NoClassFitted { jobs: 2, skipped } if skipped.len() == 6), "{err:?}");
        assert!(err.to_string().starts_with("no size class could be fitted from 2 jobs; class 1 (0 jobs): no jobs"));
        assert_eq!(HyperErlangModel::fit(&jobs, 0).unwrap_err(), FitError::NoMachine);
    }

    fn awkward_model() -> HyperErlangModel {
        let mut model = known_model();
        model.classes[0].interarrival = HyperErlang { order: 1, p: 0.1 + 0.2, lambda1: 1e-300, lambda2: f64::MAX };
        model.classes[1].service = HyperErlang { order: 37, p: 5e-324, lambda1: 1.0 / 3.0, lambda2: 2.0f64.sqrt() };
        model.classes[2].jobs = 123_456;
        model.classes.remove(5);
        model.skipped.push(SkippedClass { lo: 17, hi: 32, jobs: 3, reason: "run times: all  3 data points".into() });
        model.left_out = 7;
        model
    }

    #[test]
    fn text_round_trip_is_exact() {
        for model in [known_model(), awkward_model()] {
            let text = model.to_text();
            let back = HyperErlangModel::from_text(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
            assert_eq!(back, model);
            assert_eq!(back.to_text(), text);
        }
        let lublin_fit =
            HyperErlangModel::fit(&lublin::generate(&LublinParams::sized_to(64), 3_000, StreamSeed(8)), 64).unwrap();
        assert_eq!(HyperErlangModel::from_text(&lublin_fit.to_text()).unwrap(), lublin_fit);
        // Hand-written: comments, blank lines, extra spaces, no left_out line.
        let hand = "# my model\n\n  hyper-erlang-model   1 # format\nprocs 4\n\
                    class 1-1 jobs=10 arrival n=1 p=0.5 lambda1=0.01 lambda2=0.1 service n=3 p=1 lambda1=1e-3 lambda2=1 # pure Erlang\n\
                    class 2-4 jobs=5 arrival n=2 p=0.25 lambda1=0.02 lambda2=0.2  service n=1 p=0.5 lambda1=0.001 lambda2=0.01\n";
        let model = HyperErlangModel::from_text(hand).unwrap();
        assert_eq!((model.procs, model.classes.len(), model.left_out), (4, 2, 0));
        assert_eq!(model.classes[0].service, HyperErlang { order: 3, p: 1.0, lambda1: 1e-3, lambda2: 1.0 });
    }

    #[test]
    fn from_text_names_the_bad_line() {
        let text = known_model().to_text();
        let lines: Vec<&str> = text.lines().collect();
        let class_line = lines.iter().position(|l| l.starts_with("class 3-4")).unwrap();
        let procs_line = lines.iter().position(|l| l.starts_with("procs")).unwrap();
        let edit = |index: usize, new: &str| {
            let mut edited: Vec<&str> = lines.clone();
            edited[index] = new;
            edited.join("\n")
        };
        let expect = |text: String, line: usize, words: &str| {
            let err = HyperErlangModel::from_text(&text).unwrap_err();
            assert!(
                err.starts_with(&format!("line {line}: ")) && err.contains(words),
                "want line {line} '{words}': {err}"
            );
        };
        let class = lines[class_line];
        let n = class_line + 1;
        expect(edit(class_line, &class.replacen("p=", "p=x", 1)), n, "arrival p");
        expect(edit(class_line, &class.replacen(" p=0.1 ", " p=1.5 ", 1)), n, "not a probability");
        expect(edit(class_line, &class.replacen("arrival n=1", "arrival n=0", 1)), n, "order n");
        expect(edit(class_line, &class.replacen("lambda2=", "lambda2=-", 1)), n, "not a positive");
        expect(edit(class_line, &class.replacen(" service", "", 1)), n, "found 12 words");
        expect(edit(class_line, &class.replacen("arrival", "arrivals", 1)), n, "expected 'arrival'");
        expect(edit(class_line, &class.replacen("3-4", "4-3", 1)), n, "size range");
        expect(edit(class_line, &class.replacen("3-4", "2-4", 1)), n, "overlaps");
        expect(edit(class_line, "frobnicate 3"), n, "unknown keyword 'frobnicate'");
        expect(edit(class_line, "procs 16"), n, "second 'procs'");
        let last_class = lines.iter().position(|l| l.starts_with("class 17-32")).unwrap();
        expect(edit(procs_line, "procs 16"), last_class + 1, "wider than the machine");
        expect(edit(procs_line, "procs sixteen"), procs_line + 1, "procs = 'sixteen'");
        expect(format!("; Version: 2.2\n{text}"), 1, "not a hyper-Erlang model file");
        expect(format!("# ok\n\nhyper-erlang-model 2\n{text}"), 3, "unsupported format");
        let no_classes: String = lines.iter().filter(|l| !l.starts_with("class")).map(|l| format!("{l}\n")).collect();
        assert_eq!(
            HyperErlangModel::from_text(&no_classes).unwrap_err(),
            "no 'class' line: the model has no size class"
        );
        assert!(HyperErlangModel::from_text("").unwrap_err().contains("not a hyper-Erlang model file"));
    }

    #[test]
    #[should_panic(expected = "invalid hyper-Erlang model")]
    fn generating_from_an_invalid_model_panics() {
        let mut model = known_model();
        model.classes[1].service.p = 2.0;
        model.generate(10, StreamSeed(1));
    }
}
