//! The Lublin–Feitelson (2003) workload model, the default generator.
//!
//! Each job kind (batch, interactive, or the single "typeless" kind) is an
//! independent process with its own size, run-time and arrival laws, drawn
//! from its own named random streams (`lublin.<kind>.size`,
//! `lublin.<kind>.runtime`, `lublin.<kind>.arrival`). Changing one law or one
//! kind therefore never shifts the numbers another one sees, and the merged
//! output is fixed by the seed.
//!
//! The model as `workloads.md` §2 states it, with these readings of points it
//! leaves open:
//!
//! - **Sizing to a machine of `P` CPUs**: UHI = log2 P and UMED = UHI − 2.5 as
//!   specified; on small machines ULOW is lowered to at most UHI and UMED is
//!   kept within [ULOW, UHI], so the two uniform stages never run backwards.
//! - **No size above `P`**: a size rounded to a power of two that overshoots
//!   `P` (when `P` is not a power of two) becomes the largest power of two
//!   not above `P`, so power-of-two jobs stay powers of two. Other sizes are
//!   capped at `P`, which only matters if UHI was set above log2 P by hand.
//! - **Run times**: `exp` of the truncated Gamma draw, rounded to whole
//!   seconds; always at least 1 s since the draw is positive.
//! - **Daily cycle**: 48 half-hour buckets; the bucket that starts `j`
//!   half-hours after the day start (bucket 11, 05:30) weighs
//!   `F(j + 1) − F(j)`, with `F` the Gamma(ANUM, BNUM) CDF in units of
//!   half-hours. Weights are normalised to mean 1 (the Gamma mass beyond 48
//!   half-hours is dropped by this normalisation).
//! - **Arrivals**: the gap `exp(Gamma(AARR·ARAR, BARR))` (Gamma draws above
//!   13 redrawn) is *virtual* time, which passes at the current bucket's
//!   weight: the arrival rate in a bucket is proportional to its weight, and
//!   over whole days virtual and real time agree, so the mean gap is the mean
//!   of the truncated `exp(Gamma)`. Time 0 is midnight; the first job of a
//!   kind arrives one gap after it.
//! - **Merging**: kinds are merged by arrival time (ties go to the kind listed
//!   first), submit times are rounded to whole seconds and shifted so the
//!   first job is submitted at 0 (so SWF time 0 is the time of day of the
//!   first arrival, not midnight).

use cosched_core::special::gamma_cdf;
use cosched_core::{Rng, StreamSeed};

use crate::swf::{TraceJob, Workload};

/// Gamma draws of ln(run time) above this are redrawn.
pub const LN_RUNTIME_LIMIT: f64 = 12.0;
/// Gamma draws of ln(inter-arrival time) above this are redrawn.
pub const LN_GAP_LIMIT: f64 = 13.0;
/// Half-hour buckets in a day.
pub const BUCKETS_PER_DAY: usize = 48;
/// Length of one bucket, seconds.
pub const BUCKET_S: f64 = 1800.0;
/// The bucket where the modelled day starts (05:30).
pub const DAY_START_BUCKET: usize = 11;

/// Truncated draws whose acceptance is below this are refused by `validate`,
/// so a redraw loop can never spin (nearly) forever.
const MIN_ACCEPTANCE: f64 = 1e-3;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum JobKind {
    Batch,
    Interactive,
    Typeless,
}

impl JobKind {
    /// Lower-case name, used in stream names and reports.
    pub fn name(self) -> &'static str {
        match self {
            JobKind::Batch => "batch",
            JobKind::Interactive => "interactive",
            JobKind::Typeless => "typeless",
        }
    }

    /// SWF queue field (field 15) for jobs of this kind.
    pub fn queue(self) -> i64 {
        match self {
            JobKind::Interactive => 0,
            JobKind::Batch => 1,
            JobKind::Typeless => -1,
        }
    }
}

/// The parameters of one job kind, named as in the reference implementation.
#[derive(Clone, Debug, PartialEq)]
pub struct KindParams {
    pub serial_prob: f64,
    pub pow2_prob: f64,
    pub ulow: f64,
    pub umed: f64,
    pub uhi: f64,
    pub uprob: f64,
    pub a1: f64,
    pub b1: f64,
    pub a2: f64,
    pub b2: f64,
    pub pa: f64,
    pub pb: f64,
    pub aarr: f64,
    pub barr: f64,
    pub anum: f64,
    pub bnum: f64,
    pub arar: f64,
}

impl KindParams {
    /// The published constants for batch jobs (before sizing to a machine).
    pub fn batch() -> KindParams {
        KindParams {
            serial_prob: 0.2927,
            pow2_prob: 0.6686,
            ulow: 1.2,
            umed: 5.0,
            uhi: 7.0,
            uprob: 0.875,
            a1: 6.57,
            b1: 0.823,
            a2: 639.1,
            b2: 0.0156,
            pa: -0.003,
            pb: 0.6986,
            aarr: 6.0415,
            barr: 0.8531,
            anum: 6.1271,
            bnum: 5.2740,
            arar: 1.0519,
        }
    }

    /// The published constants for interactive jobs.
    pub fn interactive() -> KindParams {
        KindParams {
            serial_prob: 0.1541,
            pow2_prob: 0.625,
            ulow: 1.0,
            umed: 3.0,
            uhi: 5.5,
            uprob: 0.705,
            a1: 3.8351,
            b1: 0.6605,
            a2: 7.073,
            b2: 0.6856,
            pa: -0.0118,
            pb: 0.9156,
            aarr: 6.5510,
            barr: 0.6621,
            anum: 8.9186,
            bnum: 3.6680,
            arar: 0.9797,
        }
    }

    /// The published constants for the single-kind ("typeless") model.
    pub fn typeless() -> KindParams {
        KindParams {
            serial_prob: 0.244,
            pow2_prob: 0.576,
            ulow: 0.8,
            umed: 4.5,
            uhi: 7.0,
            uprob: 0.86,
            a1: 4.2,
            b1: 0.94,
            a2: 312.0,
            b2: 0.03,
            pa: -0.0054,
            pb: 0.78,
            aarr: 10.2303,
            barr: 0.4871,
            anum: 8.1737,
            bnum: 3.9631,
            arar: 1.0225,
        }
    }

    pub fn published(kind: JobKind) -> KindParams {
        match kind {
            JobKind::Batch => KindParams::batch(),
            JobKind::Interactive => KindParams::interactive(),
            JobKind::Typeless => KindParams::typeless(),
        }
    }

    /// Size the log2-uniform stages to a machine of `procs` CPUs (see the
    /// module docs for small machines).
    ///
    /// # Panics
    /// If `procs` is 0.
    pub fn sized_to(mut self, procs: u32) -> KindParams {
        assert!(procs > 0, "a machine needs at least one CPU");
        self.uhi = (procs as f64).log2();
        self.ulow = self.ulow.min(self.uhi);
        self.umed = (self.uhi - 2.5).clamp(self.ulow, self.uhi);
        self
    }

    /// Why these parameters cannot be used, if they cannot.
    pub fn validate(&self) -> Result<(), String> {
        for (name, p) in [("SERIAL_PROB", self.serial_prob), ("POW2_PROB", self.pow2_prob), ("UPROB", self.uprob)] {
            if !(0.0..=1.0).contains(&p) {
                return Err(format!("{name} = {p} is not a probability"));
            }
        }
        if !(self.ulow >= 0.0 && self.ulow <= self.umed && self.umed <= self.uhi && self.uhi.is_finite()) {
            return Err(format!("need 0 <= ULOW <= UMED <= UHI, got {} {} {}", self.ulow, self.umed, self.uhi));
        }
        for (name, x) in [
            ("A1", self.a1),
            ("B1", self.b1),
            ("A2", self.a2),
            ("B2", self.b2),
            ("AARR", self.aarr),
            ("BARR", self.barr),
            ("ANUM", self.anum),
            ("BNUM", self.bnum),
            ("ARAR", self.arar),
        ] {
            if !(x.is_finite() && x > 0.0) {
                return Err(format!("{name} = {x} must be positive"));
            }
        }
        if !(self.pa.is_finite() && self.pb.is_finite()) {
            return Err("PA and PB must be finite".to_string());
        }
        for (what, shape, scale, limit) in [
            ("ln(run time) Gamma(A1, B1)", self.a1, self.b1, LN_RUNTIME_LIMIT),
            ("ln(run time) Gamma(A2, B2)", self.a2, self.b2, LN_RUNTIME_LIMIT),
            ("ln(gap) Gamma(AARR*ARAR, BARR)", self.aarr * self.arar, self.barr, LN_GAP_LIMIT),
        ] {
            let acceptance = gamma_cdf(shape, scale, limit);
            if acceptance < MIN_ACCEPTANCE {
                return Err(format!("{what} almost never falls below {limit} (P = {acceptance:e})"));
            }
        }
        if self.day_weights_raw().iter().sum::<f64>() <= 0.0 {
            return Err("Gamma(ANUM, BNUM) puts no mass on the day".to_string());
        }
        Ok(())
    }

    /// Probability that ln(run time) comes from Gamma(A1, B1) for a job of
    /// `nodes` CPUs: `PA·nodes + PB`, clipped to [0, 1].
    pub fn first_runtime_branch_prob(&self, nodes: u32) -> f64 {
        (self.pa * nodes as f64 + self.pb).clamp(0.0, 1.0)
    }

    fn day_weights_raw(&self) -> [f64; BUCKETS_PER_DAY] {
        let mut w = [0.0; BUCKETS_PER_DAY];
        for (bucket, weight) in w.iter_mut().enumerate() {
            let j = ((bucket + BUCKETS_PER_DAY - DAY_START_BUCKET) % BUCKETS_PER_DAY) as f64;
            *weight = gamma_cdf(self.anum, self.bnum, j + 1.0) - gamma_cdf(self.anum, self.bnum, j);
        }
        w
    }

    /// Relative arrival rate in each half-hour bucket of the day (bucket 0
    /// starts at midnight), normalised to mean 1.
    pub fn day_weights(&self) -> [f64; BUCKETS_PER_DAY] {
        let mut w = self.day_weights_raw();
        let sum: f64 = w.iter().sum();
        assert!(sum > 0.0, "daily cycle has no mass");
        for x in w.iter_mut() {
            *x *= BUCKETS_PER_DAY as f64 / sum;
        }
        w
    }

    /// A job size on a machine of `max_procs` CPUs.
    pub fn draw_size(&self, rng: &mut Rng, max_procs: u32) -> u32 {
        debug_assert!(max_procs > 0);
        if rng.bernoulli(self.serial_prob) {
            return 1;
        }
        let x = if rng.bernoulli(self.uprob) {
            rng.uniform_range(self.ulow, self.umed)
        } else {
            rng.uniform_range(self.umed, self.uhi)
        };
        let max = max_procs as f64;
        let nodes = if rng.bernoulli(self.pow2_prob) {
            let pow = 2f64.powf(x.round());
            if pow <= max {
                pow
            } else {
                2f64.powi(max.log2().floor() as i32)
            }
        } else {
            2f64.powf(x).round().min(max)
        };
        let nodes = nodes.max(1.0) as u32;
        debug_assert!((1..=max_procs).contains(&nodes));
        nodes
    }

    /// ln(run time) of a job of `nodes` CPUs.
    pub fn draw_ln_runtime(&self, rng: &mut Rng, nodes: u32) -> f64 {
        let (shape, scale) =
            if rng.bernoulli(self.first_runtime_branch_prob(nodes)) { (self.a1, self.b1) } else { (self.a2, self.b2) };
        truncated_gamma(rng, shape, scale, LN_RUNTIME_LIMIT)
    }

    /// A run time in whole seconds (at least 1) for a job of `nodes` CPUs.
    pub fn draw_runtime_s(&self, rng: &mut Rng, nodes: u32) -> f64 {
        self.draw_ln_runtime(rng, nodes).exp().round().max(1.0)
    }

    /// One inter-arrival gap in virtual time (before the daily cycle).
    pub fn draw_virtual_gap(&self, rng: &mut Rng) -> f64 {
        truncated_gamma(rng, self.aarr * self.arar, self.barr, LN_GAP_LIMIT).exp()
    }
}

/// Gamma(shape, scale) conditioned on being at most `limit`, by redrawing.
fn truncated_gamma(rng: &mut Rng, shape: f64, scale: f64, limit: f64) -> f64 {
    // validate() guarantees acceptance >= MIN_ACCEPTANCE; the bound only
    // catches parameters that skipped it.
    for _ in 0..1_000_000 {
        let x = rng.gamma(shape, scale);
        if x <= limit {
            return x;
        }
    }
    panic!("Gamma({shape}, {scale}) never fell below {limit}: parameters not validated?");
}

/// The arrival process of one job kind: virtual gaps consumed at the daily
/// cycle's rate.
#[derive(Clone, Debug)]
pub struct ArrivalClock {
    params: KindParams,
    rng: Rng,
    clock: DayClock,
}

impl ArrivalClock {
    pub fn new(params: &KindParams, rng: Rng) -> ArrivalClock {
        ArrivalClock { params: params.clone(), rng, clock: DayClock::new(params.day_weights()) }
    }

    /// Current time, seconds since time 0.
    pub fn now_s(&self) -> f64 {
        self.clock.now_s()
    }

    /// Advance by one gap and return the arrival time.
    pub fn next_arrival_s(&mut self) -> f64 {
        let gap = self.params.draw_virtual_gap(&mut self.rng);
        self.clock.advance(gap)
    }
}

/// Time under a daily cycle: virtual time passes at the current half-hour
/// bucket's weight, so a virtual gap spans less real time where the weight
/// (the arrival rate) is high. Time 0 is the start of bucket 0.
#[derive(Clone, Debug)]
pub struct DayClock {
    weights: [f64; BUCKETS_PER_DAY],
    /// Half-hour buckets since time 0.
    bucket: u64,
    /// Seconds into the current bucket, in [0, BUCKET_S).
    into_bucket: f64,
}

impl DayClock {
    /// A clock at time 0 whose buckets weigh `weights` (mean 1, so that over
    /// whole days virtual and real time agree).
    pub fn new(weights: [f64; BUCKETS_PER_DAY]) -> DayClock {
        assert!(weights.iter().any(|&w| w > 0.0), "a daily cycle needs a bucket of positive weight");
        DayClock { weights, bucket: 0, into_bucket: 0.0 }
    }

    /// Current time, seconds since time 0.
    pub fn now_s(&self) -> f64 {
        self.bucket as f64 * BUCKET_S + self.into_bucket
    }

    /// Let `virtual_gap_s` of virtual time pass; the real time it ends at.
    pub fn advance(&mut self, virtual_gap_s: f64) -> f64 {
        let mut gap = virtual_gap_s;
        // Whole buckets are stepped with integer arithmetic so the loop
        // always progresses, whatever the rounding of large times.
        loop {
            let w = self.weights[(self.bucket % BUCKETS_PER_DAY as u64) as usize];
            let room = BUCKET_S - self.into_bucket;
            if w > 0.0 && gap < room * w {
                self.into_bucket += gap / w;
                if self.into_bucket >= BUCKET_S {
                    self.bucket += 1;
                    self.into_bucket = 0.0;
                }
                break;
            }
            gap -= room * w;
            self.bucket += 1;
            self.into_bucket = 0.0;
        }
        self.now_s()
    }
}

/// The virtual time at real time `t_s` (not negative) of a clock started at
/// 0 whose buckets weigh `weights` (mean 1): the inverse of
/// [`DayClock::advance`].
pub fn virtual_time_s(weights: &[f64; BUCKETS_PER_DAY], t_s: f64) -> f64 {
    const DAY_S: f64 = BUCKET_S * BUCKETS_PER_DAY as f64;
    let days = (t_s / DAY_S).floor();
    let into_day = t_s - days * DAY_S;
    let bucket = ((into_day / BUCKET_S) as usize).min(BUCKETS_PER_DAY - 1);
    let before: f64 = weights[..bucket].iter().map(|w| w * BUCKET_S).sum();
    days * DAY_S + before + (into_day - bucket as f64 * BUCKET_S) * weights[bucket]
}

/// The model: kinds merged into one stream, on a machine of `max_procs` CPUs.
#[derive(Clone, Debug)]
pub struct LublinParams {
    pub kinds: Vec<(JobKind, KindParams)>,
    pub max_procs: u32,
}

impl LublinParams {
    /// Batch and interactive streams merged (the default), sized to a machine
    /// of `procs` CPUs: UHI = log2(procs), UMED = UHI - 2.5, no size above
    /// procs.
    pub fn sized_to(procs: u32) -> LublinParams {
        LublinParams {
            kinds: vec![
                (JobKind::Batch, KindParams::batch().sized_to(procs)),
                (JobKind::Interactive, KindParams::interactive().sized_to(procs)),
            ],
            max_procs: procs,
        }
    }

    /// The single-kind model, sized to `procs` CPUs.
    pub fn typeless_sized_to(procs: u32) -> LublinParams {
        LublinParams { kinds: vec![(JobKind::Typeless, KindParams::typeless().sized_to(procs))], max_procs: procs }
    }

    /// One kind alone, sized to `procs` CPUs.
    pub fn single_kind(kind: JobKind, procs: u32) -> LublinParams {
        LublinParams { kinds: vec![(kind, KindParams::published(kind).sized_to(procs))], max_procs: procs }
    }

    pub fn validate(&self) -> Result<(), String> {
        if self.max_procs == 0 {
            return Err("max_procs must be at least 1".to_string());
        }
        if self.kinds.is_empty() {
            return Err("no job kinds".to_string());
        }
        for (kind, p) in &self.kinds {
            p.validate().map_err(|e| format!("{}: {e}", kind.name()))?;
        }
        Ok(())
    }
}

struct KindStream {
    kind: JobKind,
    params: KindParams,
    size_rng: Rng,
    runtime_rng: Rng,
    clock: ArrivalClock,
    next_arrival_s: f64,
}

/// `job_count` jobs, sorted by submit time, job numbers 1..=job_count, first
/// submit at 0 (shift), queue field 0 for interactive and 1 for batch (-1
/// typeless).
///
/// # Panics
/// If `params.validate()` fails.
pub fn generate(params: &LublinParams, job_count: usize, seed: StreamSeed) -> Vec<TraceJob> {
    generate_with_sizes(params, job_count, seed, None)
}

/// [`generate`], but each job's size is drawn uniformly from `sizes` (with
/// its kind's size stream) when given, and its run time drawn for that size:
/// the sizes of a real trace with the model's arrivals and run times.
///
/// # Panics
/// If `params.validate()` fails or `sizes` is empty.
pub fn generate_with_sizes(
    params: &LublinParams,
    job_count: usize,
    seed: StreamSeed,
    sizes: Option<&[u32]>,
) -> Vec<TraceJob> {
    assert!(sizes.is_none_or(|sizes| !sizes.is_empty()), "no sizes to draw from");
    if let Err(e) = params.validate() {
        panic!("invalid Lublin-Feitelson parameters: {e}");
    }
    let mut streams: Vec<KindStream> = params
        .kinds
        .iter()
        .enumerate()
        .map(|(i, (kind, p))| {
            // A kind listed twice gets its own streams (substream index).
            let occurrence = params.kinds[..i].iter().filter(|(k, _)| k == kind).count() as u64;
            let stream = |what: &str| seed.substream(&format!("lublin.{}.{what}", kind.name()), occurrence);
            let mut clock = ArrivalClock::new(p, stream("arrival"));
            let next_arrival_s = clock.next_arrival_s();
            KindStream {
                kind: *kind,
                params: p.clone(),
                size_rng: stream("size"),
                runtime_rng: stream("runtime"),
                clock,
                next_arrival_s,
            }
        })
        .collect();

    let mut jobs = Vec::with_capacity(job_count);
    for number in 1..=job_count as u64 {
        let s = streams
            .iter_mut()
            .reduce(|best, s| if s.next_arrival_s < best.next_arrival_s { s } else { best })
            .expect("at least one kind");
        let nodes = match sizes {
            None => s.params.draw_size(&mut s.size_rng, params.max_procs),
            Some(sizes) => sizes[s.size_rng.below(sizes.len() as u32) as usize],
        };
        let run_s = s.params.draw_runtime_s(&mut s.runtime_rng, nodes);
        jobs.push(TraceJob::new(number, s.next_arrival_s.round(), run_s, nodes, s.kind.queue()));
        s.next_arrival_s = s.clock.next_arrival_s();
    }
    crate::load::shift_to_zero(&mut jobs);
    jobs
}

/// [`generate`] wrapped in a workload whose header records the model, the
/// seed and the machine size.
pub fn generate_workload(params: &LublinParams, job_count: usize, seed: StreamSeed) -> Workload {
    let kinds: Vec<&str> = params.kinds.iter().map(|(k, _)| k.name()).collect();
    Workload {
        header: vec![
            "Computer: synthetic (Lublin-Feitelson 2003 model)".to_string(),
            format!(
                "Note: generated by cosched-workload, kinds {}, seed {}, sized to {} CPUs",
                kinds.join("+"),
                seed.0,
                params.max_procs
            ),
            format!("MaxNodes: {}", params.max_procs),
            format!("MaxProcs: {}", params.max_procs),
        ],
        jobs: generate(params, job_count, seed),
        ..Workload::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cosched_core::special::ln_gamma;

    const KINDS: [JobKind; 3] = [JobKind::Batch, JobKind::Interactive, JobKind::Typeless];

    fn mean_and_sd(xs: impl Iterator<Item = f64>) -> (f64, f64, usize) {
        let xs: Vec<f64> = xs.collect();
        let n = xs.len() as f64;
        let mean = xs.iter().sum::<f64>() / n;
        let var = xs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1.0);
        (mean, var.sqrt(), xs.len())
    }

    #[test]
    fn sizes_never_exceed_the_machine() {
        for &procs in &[1u32, 2, 3, 5, 6, 24, 100, 128, 1000, 1024] {
            for params in [LublinParams::sized_to(procs), LublinParams::typeless_sized_to(procs)] {
                let jobs = generate(&params, 4_000, StreamSeed(procs as u64));
                assert!(jobs.iter().all(|j| (1..=procs).contains(&j.procs)), "procs {procs}");
                if procs >= 24 {
                    // The largest sizes are reached, not just avoided.
                    let max = jobs.iter().map(|j| j.procs).max().unwrap();
                    assert!(max as f64 > procs as f64 / 2.0, "procs {procs}: max {max}");
                }
            }
        }
        // On a 100-CPU machine, rounding to 128 falls back to 64.
        let jobs = generate(&LublinParams::sized_to(100), 20_000, StreamSeed(5));
        assert!(jobs.iter().any(|j| j.procs == 64));
    }

    /// Probability that round(2^x) is a power of two above 1, x from the
    /// two-stage uniform.
    fn continuous_pow2_prob(p: &KindParams) -> f64 {
        let overlap = |a: f64, b: f64, lo: f64, hi: f64| (b.min(hi) - a.max(lo)).max(0.0);
        let mut q = 0.0;
        for k in 1..=30 {
            let c = 2f64.powi(k);
            let (a, b) = ((c - 0.5).log2(), (c + 0.5).log2());
            q += p.uprob * overlap(a, b, p.ulow, p.umed) / (p.umed - p.ulow)
                + (1.0 - p.uprob) * overlap(a, b, p.umed, p.uhi) / (p.uhi - p.umed);
        }
        q
    }

    #[test]
    fn serial_and_power_of_two_shares_match_parameters() {
        for kind in KINDS {
            let params = LublinParams::single_kind(kind, 128);
            let p = &params.kinds[0].1;
            let jobs = generate(&params, 100_000, StreamSeed(21));
            let n = jobs.len() as f64;
            let serial = jobs.iter().filter(|j| j.procs == 1).count() as f64 / n;
            let parallel: Vec<u32> = jobs.iter().map(|j| j.procs).filter(|&s| s > 1).collect();
            let pow2 = parallel.iter().filter(|s| s.is_power_of_two()).count() as f64 / parallel.len() as f64;
            let want_pow2 = p.pow2_prob + (1.0 - p.pow2_prob) * continuous_pow2_prob(p);
            assert!((serial - p.serial_prob).abs() < 0.006, "{kind:?}: serial {serial} vs {}", p.serial_prob);
            assert!((pow2 - want_pow2).abs() < 0.01, "{kind:?}: pow2 {pow2} vs {want_pow2}");
        }
    }

    /// E[ln(round(e^G))] for G ~ Gamma(shape, scale) truncated at 12: exact
    /// for run times up to K seconds, and ln(round(e^g)) ~ g beyond (error
    /// below 1/(2K)).
    fn mean_ln_rounded_runtime(shape: f64, scale: f64) -> f64 {
        const K: u32 = 2_000;
        let cdf = |g: f64| gamma_cdf(shape, scale, g.min(LN_RUNTIME_LIMIT));
        let mut total = 0.0;
        for k in 2..=K {
            let k = k as f64;
            total += k.ln() * (cdf((k + 0.5).ln()) - cdf((k - 0.5).ln()));
        }
        let lo = (K as f64 + 0.5).ln();
        total += shape * scale * (gamma_cdf(shape + 1.0, scale, LN_RUNTIME_LIMIT) - gamma_cdf(shape + 1.0, scale, lo));
        total / cdf(LN_RUNTIME_LIMIT)
    }

    #[test]
    fn mean_ln_runtime_matches_the_mixture_for_the_drawn_sizes() {
        for kind in KINDS {
            let params = LublinParams::single_kind(kind, 128);
            let p = &params.kinds[0].1;
            let jobs = generate(&params, 100_000, StreamSeed(33));
            let (m1, m2) = (mean_ln_rounded_runtime(p.a1, p.b1), mean_ln_rounded_runtime(p.a2, p.b2));
            let want = jobs
                .iter()
                .map(|j| {
                    let q = p.first_runtime_branch_prob(j.procs);
                    q * m1 + (1.0 - q) * m2
                })
                .sum::<f64>()
                / jobs.len() as f64;
            let (mean, sd, n) = mean_and_sd(jobs.iter().map(|j| j.run_s.ln()));
            let tol = 5.0 * sd / (n as f64).sqrt();
            assert!((mean - want).abs() < tol, "{kind:?}: mean ln run {mean} vs {want} (tol {tol})");
            assert!(jobs.iter().all(|j| j.run_s >= 1.0 && j.run_s.fract() == 0.0));
            assert!(jobs.iter().all(|j| j.run_s <= LN_RUNTIME_LIMIT.exp().round()));
        }
    }

    /// Mean and standard deviation of exp(G), G ~ Gamma(shape, scale)
    /// truncated at 13, by Simpson's rule.
    fn truncated_exp_gamma_moments(shape: f64, scale: f64) -> (f64, f64) {
        let ln_pdf = |g: f64| (shape - 1.0) * g.ln() - g / scale - ln_gamma(shape) - shape * scale.ln();
        let steps = 20_000;
        let h = LN_GAP_LIMIT / steps as f64;
        let (mut s1, mut s2) = (0.0, 0.0);
        for i in 1..=steps {
            let g = i as f64 * h;
            let w = if i == steps {
                1.0
            } else if i % 2 == 1 {
                4.0
            } else {
                2.0
            };
            s1 += w * (ln_pdf(g) + g).exp();
            s2 += w * (ln_pdf(g) + 2.0 * g).exp();
        }
        let z = gamma_cdf(shape, scale, LN_GAP_LIMIT);
        let (m1, m2) = (s1 * h / 3.0 / z, s2 * h / 3.0 / z);
        (m1, (m2 - m1 * m1).sqrt())
    }

    #[test]
    fn mean_interarrival_is_the_truncated_exp_gamma_mean() {
        let n = 1_000_000;
        for kind in KINDS {
            let p = KindParams::published(kind);
            let (want, sd) = truncated_exp_gamma_moments(p.aarr * p.arar, p.barr);
            let mut clock = ArrivalClock::new(&p, StreamSeed(8).stream("gaps"));
            let mut per_bucket = [0u64; BUCKETS_PER_DAY];
            for _ in 0..n {
                let t = clock.next_arrival_s();
                per_bucket[((t % 86_400.0) / BUCKET_S) as usize] += 1;
            }
            let mean = clock.now_s() / n as f64;
            let tol = 5.0 * sd / (n as f64).sqrt();
            assert!((mean - want).abs() < tol, "{kind:?}: mean gap {mean} vs {want} (tol {tol})");

            // The daily cycle: arrivals per bucket follow the weights.
            let weights = p.day_weights();
            for (b, &count) in per_bucket.iter().enumerate() {
                let share = count as f64 / n as f64;
                let want_share = weights[b] / BUCKETS_PER_DAY as f64;
                assert!(
                    (share - want_share).abs() < 0.06 * want_share + 0.0005,
                    "{kind:?} bucket {b}: share {share} vs {want_share}"
                );
            }
        }
    }

    #[test]
    fn day_weights_peak_after_the_day_start() {
        let w = KindParams::batch().day_weights();
        assert!((w.iter().sum::<f64>() - BUCKETS_PER_DAY as f64).abs() < 1e-9);
        // Just after the day start almost nothing arrives; just before it,
        // the evening tail is still there.
        assert!(w[DAY_START_BUCKET] < 1e-3, "{}", w[DAY_START_BUCKET]);
        assert!(w[DAY_START_BUCKET - 1] > 100.0 * w[DAY_START_BUCKET]);
        let peak = (0..BUCKETS_PER_DAY).max_by(|&a, &b| w[a].total_cmp(&w[b])).unwrap();
        // Mode of Gamma(6.1271, 5.274) is (a - 1) b = 27 half-hours after 05:30.
        assert_eq!((peak + BUCKETS_PER_DAY - DAY_START_BUCKET) % BUCKETS_PER_DAY, 27);
    }

    #[test]
    fn generated_mean_gap_matches_the_model() {
        let params = LublinParams::typeless_sized_to(128);
        let p = &params.kinds[0].1;
        let (want, sd) = truncated_exp_gamma_moments(p.aarr * p.arar, p.barr);
        let n = 200_000;
        let jobs = generate(&params, n, StreamSeed(99));
        let mean = jobs.last().unwrap().submit_s / (n - 1) as f64;
        // Rounding and the shift move the span by at most a day plus 1 s.
        let tol = 5.0 * sd / (n as f64).sqrt() + 86_401.0 / n as f64;
        assert!((mean - want).abs() < tol, "mean gap {mean} vs {want} (tol {tol})");
    }

    #[test]
    fn output_shape() {
        let jobs = generate(&LublinParams::sized_to(64), 3_000, StreamSeed(1));
        assert_eq!(jobs.len(), 3_000);
        assert_eq!(jobs[0].submit_s, 0.0);
        assert!(jobs.windows(2).all(|w| w[0].submit_s <= w[1].submit_s));
        assert!(jobs.iter().enumerate().all(|(i, j)| j.job_number == i as u64 + 1));
        assert!(jobs.iter().all(|j| j.submit_s.fract() == 0.0 && j.source_line == 0));
        assert!(jobs.iter().all(|j| j.queue == 0 || j.queue == 1));
        assert!(jobs.iter().any(|j| j.queue == 0) && jobs.iter().any(|j| j.queue == 1));
        assert!(jobs.iter().all(|j| j.fields == j.synced_fields()));
        let typeless = generate(&LublinParams::typeless_sized_to(64), 100, StreamSeed(1));
        assert!(typeless.iter().all(|j| j.queue == -1));
        assert!(generate(&LublinParams::sized_to(64), 0, StreamSeed(1)).is_empty());
    }

    #[test]
    fn same_seed_same_jobs_different_seed_different_jobs() {
        let params = LublinParams::sized_to(128);
        let a = generate(&params, 2_000, StreamSeed(7));
        let b = generate(&params, 2_000, StreamSeed(7));
        let c = generate(&params, 2_000, StreamSeed(8));
        assert_eq!(a, b);
        assert_ne!(a, c);
        let differing = a.iter().zip(&c).filter(|(x, y)| x.run_s != y.run_s).count();
        assert!(differing > 1_000, "only {differing} run times differ");
    }

    #[test]
    fn kinds_draw_from_independent_streams() {
        // Changing the interactive arrival law must not change the sizes and
        // run times the batch jobs get, in order.
        let base = LublinParams::sized_to(128);
        let mut changed = base.clone();
        changed.kinds[1].1.aarr *= 0.8;
        let batch = |params: &LublinParams| -> Vec<(u32, f64)> {
            generate(params, 20_000, StreamSeed(3))
                .into_iter()
                .filter(|j| j.queue == JobKind::Batch.queue())
                .map(|j| (j.procs, j.run_s))
                .take(1_000)
                .collect()
        };
        let (x, y) = (batch(&base), batch(&changed));
        assert_eq!(x.len(), 1_000);
        assert_eq!(x, y);
    }

    #[test]
    fn validation_rejects_bad_parameters() {
        assert!(LublinParams::sized_to(128).validate().is_ok());
        let mut p = LublinParams::sized_to(128);
        p.kinds[0].1.serial_prob = 1.5;
        assert!(p.validate().unwrap_err().contains("SERIAL_PROB"));
        let mut p = LublinParams::sized_to(128);
        p.kinds[1].1.a2 = 10_000.0; // ln(run) ~ 156: never below 12
        assert!(p.validate().unwrap_err().starts_with("interactive:"));
        let mut p = LublinParams::sized_to(128);
        p.kinds.clear();
        assert!(p.validate().is_err());
    }

    #[test]
    fn sizing_small_machines_keeps_stages_ordered() {
        for procs in [1, 2, 3, 4, 8] {
            for kind in KINDS {
                let p = KindParams::published(kind).sized_to(procs);
                assert!(p.ulow <= p.umed && p.umed <= p.uhi, "{kind:?} on {procs}: {p:?}");
                assert_eq!(p.uhi, (procs as f64).log2());
            }
        }
        let p = KindParams::batch().sized_to(128);
        assert_eq!((p.ulow, p.umed, p.uhi), (1.2, 4.5, 7.0));
    }
}
