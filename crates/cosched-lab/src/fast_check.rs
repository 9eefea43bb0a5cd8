//! Fast mode against the exact engine: the same workloads run both ways, and
//! per scheme and offered load the paired differences of the figures users
//! read (mean response, mean wait, delivered utilization, the saturation
//! verdict), each the mean over seeds with a 95 % confidence interval; over
//! several loads, each scheme's saturation point both ways.

use crate::batch::{run_all, BatchWatch};
use crate::csv::{csv_field, flag, float, int, num, text, to_csv, Column};
use crate::jitter::{jittered_answers, largest_known, saturated_draws, Answer, AnswerSpread, ArrivalJitter};
use crate::workload::{bounded_slowdown_threshold_s, load_workload, WorkloadSpec};
use cosched_core::stats::Estimate;
use cosched_sim::cost::estimate;
use cosched_sim::engine::fast::FastSettings;
use cosched_sim::input::{sim_jobs, JobRequest, WorkloadPlan};
use cosched_sim::metrics::JobRecord;
use cosched_sim::run::{RunOptions, RunResult};
use cosched_sim::{Mix, Scheme, SimConfig, SimJob, Summary};
use serde::Serialize;

/// The validation set: every scheme on every seed's workload at every offered load, exact and fast.
#[derive(Clone, Debug)]
pub struct FastCheckSettings {
    pub schemes: Vec<Scheme>,
    /// Offered loads, each a workload per seed.
    pub loads: Vec<f64>,
    pub seeds: Vec<u64>,
    /// The machine (its scheme and seed are set per run).
    pub machine: SimConfig,
    /// The workload (its seed and target load are set per run).
    pub workload: WorkloadSpec,
    pub mix: Mix,
    pub fast: FastSettings,
    /// The exact engine run again on each pair's workload with its arrivals moved a little, if asked.
    pub jitter: Option<ArrivalJitter>,
}

/// One scheme on one seed's workload at one load, both ways.
#[derive(Clone, Debug, Serialize)]
pub struct PairedRun {
    pub scheme: String,
    pub load: f64,
    pub seed: u64,
    pub exact: Summary,
    pub fast: Summary,
    /// Each job's response, fast / exact - 1 (jobs finished both ways).
    #[serde(skip)]
    pub job_errors: Vec<f64>,
    /// Where the fast run placed jobs on other CPUs than the exact run did.
    pub parting: Parting,
    /// The process iterations `cost::estimate` gives before the run, exact (every one) and in fast mode (those of
    /// its exact stretches): what decides whether a run needs --allow-long-run.
    pub estimated_iterations: Estimated,
    /// The exact engine's answers with the arrivals jittered ([`ArrivalJitter`]), one per draw (none unless asked).
    pub jittered_exact: Vec<Answer>,
}

/// A run's work as estimated before it starts, both ways.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct Estimated {
    pub exact: u64,
    pub fast: u64,
}

impl Estimated {
    /// The fast run's events over those its estimate gives at the exact run's events per estimated iteration.
    fn ratio(&self, exact_events: u64, fast_events: u64) -> f64 {
        let events_per_iteration = exact_events as f64 / self.exact.max(1) as f64;
        fast_events as f64 / (events_per_iteration * self.fast.max(1) as f64)
    }
}

/// Where two runs of one workload part: a job placed on other CPUs changes who shares CPUs with whom from then on,
/// so what follows is another schedule, not the same one measured less exactly.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct Parting {
    /// Jobs finished both ways whose CPUs differ.
    pub placed_otherwise: usize,
    /// The first of them by its start in the exact run: its number and that start.
    pub first_job: Option<u64>,
    pub first_start_s: Option<f64>,
}

impl Parting {
    /// Compare the placements of the jobs both runs finished: their CPU sets (a gang job on the same CPUs in
    /// another row counts as placed alike). Each run's records sorted by job number, as `RunResult::jobs` are.
    pub fn of(exact: &[JobRecord], fast: &[JobRecord]) -> Parting {
        debug_assert_sorted_by_job(fast);
        let otherwise: Vec<&JobRecord> =
            exact.iter().filter(|e| same_job(fast, e).is_some_and(|f| f.cpus != e.cpus)).collect();
        let first =
            otherwise.iter().min_by(|a, b| a.start_s.total_cmp(&b.start_s).then(a.job_number.cmp(&b.job_number)));
        Parting {
            placed_otherwise: otherwise.len(),
            first_job: first.map(|j| j.job_number),
            first_start_s: first.map(|j| j.start_s),
        }
    }

    pub fn parted(&self) -> bool {
        self.placed_otherwise > 0
    }
}

impl PairedRun {
    /// Fast over exact, minus one.
    pub fn response_error(&self) -> f64 {
        self.moved().0
    }
    /// The wait's difference as a share of the exact mean response (waits are often near 0).
    pub fn wait_error(&self) -> f64 {
        (self.fast.mean_wait_s - self.exact.mean_wait_s) / self.exact.mean_response_s
    }
    pub fn utilization_error(&self) -> f64 {
        self.moved().1
    }
    /// Fast mode's answer against the exact one, figure by figure: (mean response, delivered utilization).
    fn moved(&self) -> (f64, f64) {
        Answer::of(&self.fast).moved_from(&Answer::of(&self.exact))
    }
    /// The larger of this pair's |response error| and |utilization error|: the two figures the bounds hold.
    pub fn largest_error(&self) -> f64 {
        Answer::of(&self.fast).error_to(&Answer::of(&self.exact))
    }
    pub fn saturation_agrees(&self) -> bool {
        self.fast.saturation.saturated == self.exact.saturation.saturated
    }
    pub fn verdicts(&self) -> SaturationVerdicts<'_> {
        SaturationVerdicts {
            scheme: &self.scheme,
            load: self.load,
            seed: self.seed,
            exact: self.exact.saturation.saturated,
            fast: self.fast.saturation.saturated,
        }
    }
    /// Fast mode's work, measured over estimated: its events over what the estimated iterations give at the exact
    /// run's events per iteration (the exact estimate counts every iteration, so that rate is measured).
    pub fn estimate_ratio(&self) -> f64 {
        self.estimated_iterations.ratio(self.exact.events, self.fast.events)
    }

    /// The exact engine's own spread under arrival jitter; `None` without jittered runs.
    pub fn exact_spread(&self) -> Option<AnswerSpread> {
        AnswerSpread::of(Answer::of(&self.exact), &self.jittered_exact)
    }

    /// Fast mode's answer lies within the exact engine's own spread under arrival jitter (`None` without it).
    pub fn fast_within_exact_spread(&self) -> Option<bool> {
        Some(self.exact_spread()?.holds(self.response_error(), self.utilization_error()))
    }

    /// Fast mode's error against the nearest of the exact answers (the one on the workload as given and the
    /// jittered ones): the larger of |fast / exact - 1| of mean response and delivered utilization, least over the
    /// answers. Where the exact engine flips between regimes and fast mode lands in one of them, this is small
    /// though the error against the given answer is large. `None` without jittered runs or any known answer.
    pub fn fast_error_to_nearest_exact(&self) -> Option<f64> {
        if self.jittered_exact.is_empty() {
            return None;
        }
        let answers = std::iter::once(Answer::of(&self.exact)).chain(self.jittered_exact.iter().copied());
        Answer::of(&self.fast).error_to_nearest(answers)
    }

    /// Share of the run's simulated time fast mode skipped.
    pub fn skipped_share(&self) -> f64 {
        let skipped_ns = self.fast.fast_mode.map_or(0, |f| f.skipped_ns);
        skipped_ns as f64 / 1e9 / self.fast.span_s.max(f64::MIN_POSITIVE)
    }
}

/// A scheme's errors at one load, over the seeds.
#[derive(Clone, Debug, Serialize)]
pub struct SchemeCheck {
    pub scheme: String,
    pub load: f64,
    pub response: Estimate,
    pub wait: Estimate,
    pub utilization: Estimate,
    pub saturation_agreements: usize,
    pub runs: usize,
    pub skipped_share: Estimate,
    /// Fast mode's events over those its estimate gives ([`PairedRun::estimate_ratio`]).
    pub estimate_ratio: Estimate,
    /// Single jobs' response errors, pooled over seeds: the median and the 90th percentile of |fast / exact - 1|.
    pub job_error_p50: f64,
    pub job_error_p90: f64,
    /// Runs in which the fast run placed some job on other CPUs than the exact one ([`Parting`]).
    pub parted_runs: usize,
    /// With jittered exact runs: the largest move of the exact engine's own answer over the seeds
    /// ([`AnswerSpread::largest`]), fast mode's largest error beside it, and the runs whose fast answer lies within
    /// the exact answers' spread.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub under_jitter: Option<JitterCheck>,
}

#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct JitterCheck {
    pub exact_largest_move: f64,
    pub fast_largest_error: f64,
    /// The largest over the runs of [`PairedRun::fast_error_to_nearest_exact`] (NaN if a run has none).
    pub fast_largest_error_to_nearest: f64,
    pub fast_within_exact_spread_runs: usize,
}

impl JitterCheck {
    fn of(runs: &[&PairedRun]) -> Option<JitterCheck> {
        let spreads: Vec<AnswerSpread> = runs.iter().map(|p| p.exact_spread()).collect::<Option<_>>()?;
        Some(JitterCheck {
            exact_largest_move: spreads.iter().map(AnswerSpread::largest).fold(0.0, largest_known),
            fast_largest_error: runs.iter().map(|p| p.largest_error()).fold(0.0, largest_known),
            fast_largest_error_to_nearest: runs
                .iter()
                .map(|p| p.fast_error_to_nearest_exact().unwrap_or(f64::NAN))
                .fold(0.0, largest_known),
            fast_within_exact_spread_runs: runs.iter().filter(|p| p.fast_within_exact_spread() == Some(true)).count(),
        })
    }
}

impl SchemeCheck {
    /// The acceptance bound: both 95 % intervals of mean response and
    /// delivered utilization lie within ±`bound`.
    pub fn within(&self, bound: f64) -> bool {
        [&self.response, &self.utilization].iter().all(|e| e.mean.abs() + e.ci95_half_width() <= bound)
    }
}

/// One run of the validation set: which workload it takes and how it is named.
struct GridRun {
    config: SimConfig,
    label: String,
    load: f64,
    workload: usize,
}

/// Every (scheme, load, seed), in that order; each run's `workload` indexes
/// what [`workloads`] returns (seeds within loads).
fn grid(settings: &FastCheckSettings) -> Result<Vec<GridRun>, String> {
    let mut runs = Vec::new();
    for scheme in &settings.schemes {
        for (l, &load) in settings.loads.iter().enumerate() {
            for (s, &seed) in settings.seeds.iter().enumerate() {
                let config = SimConfig { scheme: *scheme, seed, ..settings.machine.clone() };
                config.validate().map_err(|e| e.to_string())?;
                let label = format!("{}-load{load}-seed{seed}", scheme.name());
                runs.push(GridRun { config, label, load, workload: l * settings.seeds.len() + s });
            }
        }
    }
    Ok(runs)
}

/// Each load's workloads, one per seed.
fn workloads(settings: &FastCheckSettings) -> Result<Vec<Vec<JobRequest>>, String> {
    let mut all = Vec::new();
    for &load in &settings.loads {
        for &seed in &settings.seeds {
            let spec = WorkloadSpec { seed, target_load: Some(load), ..settings.workload.clone() };
            all.push(load_workload(&spec, settings.machine.cpu_count())?.requests());
        }
    }
    Ok(all)
}

/// The loads and seeds, checked before anything runs or is written.
pub fn check_settings(settings: &FastCheckSettings) -> Result<(), String> {
    check_loads(&settings.loads)?;
    check_seeds(&settings.seeds)?;
    settings.jitter.as_ref().map_or(Ok(()), ArrivalJitter::check)
}

/// Each seed once: a repeated seed would count its workload twice.
fn check_seeds(seeds: &[u64]) -> Result<(), String> {
    if let Some((i, seed)) = seeds.iter().enumerate().find(|(i, s)| seeds[..*i].contains(s)) {
        return Err(format!("seed {seed} is given twice (position {})", i + 1));
    }
    Ok(())
}

/// Positive, finite and each once: a repeated load would count its seeds twice.
fn check_loads(loads: &[f64]) -> Result<(), String> {
    if loads.is_empty() {
        return Err("the validation set needs at least one load".into());
    }
    if let Some(bad) = loads.iter().find(|l| !(l.is_finite() && **l > 0.0)) {
        return Err(format!("offered load {bad} is not a positive number"));
    }
    if let Some((i, load)) = loads.iter().enumerate().find(|(i, l)| loads[..*i].contains(l)) {
        return Err(format!("offered load {load} is given twice (position {})", i + 1));
    }
    Ok(())
}

/// Run the validation set both ways, exact first, then the jittered exact runs if asked (with `exact_watch`);
/// `batch_done` is called as each of the exact and the fast batch ends, for timing. Pairs in (scheme, load, seed)
/// order.
pub fn run_pairs<W: BatchWatch>(
    settings: &FastCheckSettings,
    exact_watch: &W,
    fast_watch: &W,
    mut batch_done: impl FnMut(),
) -> Result<Vec<PairedRun>, String> {
    check_settings(settings)?;
    let runs = grid(settings)?;
    let configs: Vec<SimConfig> = runs.iter().map(|r| r.config.clone()).collect();
    let labels: Vec<String> = runs.iter().map(|r| r.label.clone()).collect();
    let workloads = workloads(settings)?;
    let plan = WorkloadPlan { mix: settings.mix, runtime_scale: 1.0 };
    let jobs_for = |i: usize| -> Vec<SimJob> { sim_jobs(&workloads[runs[i].workload], &plan, &configs[i]) };
    let exact_options = RunOptions {
        bounded_slowdown_threshold_s: bounded_slowdown_threshold_s(settings.workload.runtime_scale),
        progress_every_events: 1 << 18,
        ..RunOptions::default()
    };
    // Validation runs fast mode wherever it is not validated yet.
    let fast_options = RunOptions { fast: Some(settings.fast), fast_unvalidated: true, ..exact_options.clone() };
    let exact = run_all(&configs, &labels, jobs_for, &exact_options, exact_watch)?;
    batch_done();
    let fast = run_all(&configs, &labels, jobs_for, &fast_options, fast_watch)?;
    batch_done();
    // After the fast batch, so that the two batches' wall times compare like with like.
    let mut jittered = match settings.jitter {
        Some(jitter) => jittered_answers(jitter, &configs, &labels, &jobs_for, &exact_options, exact_watch)?,
        None => vec![Vec::new(); runs.len()],
    };
    Ok(runs
        .iter()
        .enumerate()
        .zip(exact.into_iter().zip(fast))
        .map(|((i, run), (exact, fast)): ((usize, &GridRun), (RunResult, RunResult))| PairedRun {
            jittered_exact: std::mem::take(&mut jittered[i]),
            estimated_iterations: {
                let jobs = jobs_for(i);
                Estimated {
                    exact: estimate(&run.config, &jobs, None).process_iterations,
                    fast: estimate(&run.config, &jobs, Some(&settings.fast)).process_iterations,
                }
            },
            scheme: run.config.scheme.name().to_string(),
            load: run.load,
            seed: run.config.seed,
            job_errors: job_errors(&exact, &fast),
            parting: Parting::of(&exact.jobs, &fast.jobs),
            exact: exact.summary,
            fast: fast.summary,
        })
        .collect())
}

/// Each job's response error, for the jobs both runs finished (records are sorted by job number).
fn job_errors(exact: &RunResult, fast: &RunResult) -> Vec<f64> {
    debug_assert_sorted_by_job(&fast.jobs);
    let error = |e: &JobRecord| same_job(&fast.jobs, e).map(|f| f.response_s / e.response_s - 1.0);
    exact.jobs.iter().filter_map(error).collect()
}

/// `same_job` looks records up by binary search; checked once per run, not per lookup.
fn debug_assert_sorted_by_job(records: &[JobRecord]) {
    debug_assert!(records.is_sorted_by_key(|r| r.job_number), "records sorted by job number");
}

/// The record in `records` (a run's, sorted by job number) of the same job as `job`.
fn same_job<'a>(records: &'a [JobRecord], job: &JobRecord) -> Option<&'a JobRecord> {
    records.binary_search_by_key(&job.job_number, |r| r.job_number).ok().map(|i| &records[i])
}

/// The distinct items, in the order first seen.
fn first_seen<T: PartialEq>(items: impl IntoIterator<Item = T>) -> Vec<T> {
    let mut distinct = Vec::new();
    for item in items {
        if !distinct.contains(&item) {
            distinct.push(item);
        }
    }
    distinct
}

/// The error bound `scheme` carries in stable runs on this validation set's machine and window (its nodes'
/// scheduler's table): what a check on fresh workloads puts to the test. `None`: fast mode has no bound for it
/// there.
pub fn validated_bound(settings: &FastCheckSettings, scheme: &str) -> Option<f64> {
    let scheme: Scheme = scheme.parse().ok()?;
    let config = SimConfig { scheme, ..settings.machine.clone() };
    // The model as the scheme reads it, as a run's bound is judged.
    let as_read = cosched_sim::scheme::model_as_read(&config);
    cosched_sim::engine::fast::validation_with(&as_read, false, &settings.fast.for_run(&config)).ok()
}

/// Per scheme and load, in the order first seen.
pub fn by_scheme_and_load(pairs: &[PairedRun]) -> Vec<SchemeCheck> {
    first_seen(pairs.iter().map(|p| (p.scheme.as_str(), p.load)))
        .into_iter()
        .map(|(name, load)| {
            let runs: Vec<&PairedRun> = pairs.iter().filter(|p| p.scheme == name && p.load == load).collect();
            let estimate = |f: fn(&PairedRun) -> f64| {
                Estimate::of(&runs.iter().map(|p| f(p)).collect::<Vec<_>>()).expect("a scheme has runs")
            };
            let job_errors: Vec<f64> = runs.iter().flat_map(|p| p.job_errors.iter().map(|e| e.abs())).collect();
            let quantile = |q: f64| cosched_sim::metrics::percentile(&job_errors, q);
            SchemeCheck {
                job_error_p50: quantile(0.5),
                job_error_p90: quantile(0.9),
                scheme: name.to_string(),
                load,
                response: estimate(PairedRun::response_error),
                wait: estimate(PairedRun::wait_error),
                utilization: estimate(PairedRun::utilization_error),
                saturation_agreements: runs.iter().filter(|p| p.saturation_agrees()).count(),
                runs: runs.len(),
                skipped_share: estimate(PairedRun::skipped_share),
                parted_runs: runs.iter().filter(|p| p.parting.parted()).count(),
                estimate_ratio: estimate(PairedRun::estimate_ratio),
                under_jitter: JitterCheck::of(&runs),
            }
        })
        .collect()
}

// ---- placements that part ------------------------------------------------------------

/// A scheme's pairs split by whether their placements parted, with each side's largest single-pair error.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct PartingSplit {
    pub scheme: String,
    pub runs: usize,
    pub parted_runs: usize,
    /// Over the runs whose placements all agree: the largest [`PairedRun::largest_error`], and its load and seed.
    pub largest_agreeing: Option<PairError>,
    /// The same over the runs in which some job was placed otherwise.
    pub largest_parted: Option<PairError>,
}

#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct PairError {
    pub error: f64,
    pub load: f64,
    pub seed: u64,
}

/// Per scheme, in the order first seen, over all its loads.
pub fn parting_splits(pairs: &[PairedRun]) -> Vec<PartingSplit> {
    per_scheme(pairs, |scheme, runs| {
        let parted = |p: &PairedRun| p.parting.parted();
        PartingSplit {
            scheme: scheme.to_string(),
            runs: runs.len(),
            parted_runs: runs.iter().filter(|p| parted(p)).count(),
            largest_agreeing: largest_error_where(runs, |p| !parted(p)),
            largest_parted: largest_error_where(runs, parted),
        }
    })
}

/// A scheme's pairs split by whether fast mode judged the run's rates unsteady (`FastReport::rates_unsteady`), with
/// each side's largest single-pair error: how far that judgement goes with the error.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct UnsteadySplit {
    pub scheme: String,
    pub runs: usize,
    /// Runs with some window whose halves were compared (none under the gang schemes).
    pub judged_runs: usize,
    pub unsteady_runs: usize,
    pub largest_steady: Option<PairError>,
    pub largest_unsteady: Option<PairError>,
}

/// Per scheme, in the order first seen, over all its loads.
pub fn unsteady_splits(pairs: &[PairedRun]) -> Vec<UnsteadySplit> {
    per_scheme(pairs, |scheme, runs| {
        let judged = |p: &PairedRun| p.fast.fast_mode.is_some_and(|f| f.unsteady_share().is_some());
        let unsteady = |p: &PairedRun| p.fast.fast_mode.is_some_and(|f| f.rates_unsteady());
        UnsteadySplit {
            scheme: scheme.to_string(),
            runs: runs.len(),
            judged_runs: runs.iter().filter(|p| judged(p)).count(),
            unsteady_runs: runs.iter().filter(|p| unsteady(p)).count(),
            largest_steady: largest_error_where(runs, |p| judged(p) && !unsteady(p)),
            largest_unsteady: largest_error_where(runs, unsteady),
        }
    })
}

/// `split` of each scheme's pairs, schemes in the order first seen.
fn per_scheme<T>(pairs: &[PairedRun], split: impl Fn(&str, &[&PairedRun]) -> T) -> Vec<T> {
    first_seen(pairs.iter().map(|p| p.scheme.as_str()))
        .into_iter()
        .map(|scheme| split(scheme, &pairs.iter().filter(|p| p.scheme == scheme).collect::<Vec<_>>()))
        .collect()
}

/// The largest [`PairedRun::largest_error`] of the `runs` that `keep`, with its load and seed.
fn largest_error_where(runs: &[&PairedRun], keep: impl Fn(&PairedRun) -> bool) -> Option<PairError> {
    runs.iter()
        .filter(|p| keep(p))
        .map(|p| PairError { error: p.largest_error(), load: p.load, seed: p.seed })
        .max_by(|a, b| a.error.total_cmp(&b.error))
}

// ---- the saturation point ---------------------------------------------------------

/// One run's saturation verdicts, exact and fast.
#[derive(Clone, Copy, Debug)]
pub struct SaturationVerdicts<'a> {
    pub scheme: &'a str,
    pub load: f64,
    pub seed: u64,
    pub exact: bool,
    pub fast: bool,
}

/// A scheme's saturation point on one seed: the lowest load whose run was
/// judged saturated, each way (`None`: no load saturated).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SeedSaturationPoint {
    pub seed: u64,
    pub exact: Option<f64>,
    pub fast: Option<f64>,
}

/// A scheme's saturation points over the seeds.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SaturationPointCheck {
    pub scheme: String,
    pub seeds: Vec<SeedSaturationPoint>,
    /// Seeds whose two points are the same load, or both none.
    pub agreements: usize,
    /// Seeds where both ways saturate at some load.
    pub both_saturated: usize,
    /// Fast − exact in load units, the mean over the seeds where both saturate.
    pub mean_difference: Option<f64>,
}

/// Per scheme (in the order first seen), each seed's saturation point both
/// ways. The lowest saturated load counts even if a higher one was not judged
/// saturated: that is where a load sweep would stop.
pub fn saturation_points(verdicts: &[SaturationVerdicts]) -> Vec<SaturationPointCheck> {
    first_seen(verdicts.iter().map(|v| v.scheme))
        .into_iter()
        .map(|scheme| {
            let runs: Vec<&SaturationVerdicts> = verdicts.iter().filter(|v| v.scheme == scheme).collect();
            let seeds: Vec<SeedSaturationPoint> =
                first_seen(runs.iter().map(|v| v.seed)).into_iter().map(|seed| seed_point(&runs, seed)).collect();
            let differences: Vec<f64> = seeds.iter().filter_map(|s| Some(s.fast? - s.exact?)).collect();
            SaturationPointCheck {
                scheme: scheme.to_string(),
                agreements: seeds.iter().filter(|s| s.exact == s.fast).count(),
                both_saturated: differences.len(),
                mean_difference: Estimate::of(&differences).map(|e| e.mean),
                seeds,
            }
        })
        .collect()
}

fn seed_point(runs: &[&SaturationVerdicts], seed: u64) -> SeedSaturationPoint {
    let lowest = |saturated: fn(&SaturationVerdicts) -> bool| {
        runs.iter().filter(|v| v.seed == seed && saturated(v)).map(|v| v.load).min_by(f64::total_cmp)
    };
    SeedSaturationPoint { seed, exact: lowest(|v| v.exact), fast: lowest(|v| v.fast) }
}

fn pair_columns() -> Vec<Column<PairedRun>> {
    vec![
        text("scheme", |p| csv_field(&p.scheme)),
        float("load", |p| num(p.load)),
        int("seed", |p| p.seed.to_string()),
        float("exact_mean_response_s", |p| num(p.exact.mean_response_s)),
        float("fast_mean_response_s", |p| num(p.fast.mean_response_s)),
        float("exact_mean_wait_s", |p| num(p.exact.mean_wait_s)),
        float("fast_mean_wait_s", |p| num(p.fast.mean_wait_s)),
        float("exact_delivered_utilization", |p| num(p.exact.delivered_utilization)),
        float("fast_delivered_utilization", |p| num(p.fast.delivered_utilization)),
        flag("exact_saturated", |p| p.exact.saturation.saturated.to_string()),
        flag("fast_saturated", |p| p.fast.saturation.saturated.to_string()),
        float("skipped_share", |p| num(p.skipped_share())),
        // The window the fast run took: a scheme may take another by default (`FastSettings::for_run`).
        int("fast_window_ns", |p| {
            p.fast.fast_mode.and_then(|f| f.settings).map_or(String::new(), |s| s.window_ns.to_string())
        }),
        // Empty where no window was compared in halves (the gang schemes, or too few iterations).
        float("fast_unsteady_share", |p| p.fast.fast_mode.and_then(|f| f.unsteady_share()).map_or(String::new(), num)),
        int("exact_events", |p| p.exact.events.to_string()),
        int("fast_events", |p| p.fast.events.to_string()),
        int("estimated_exact_iterations", |p| p.estimated_iterations.exact.to_string()),
        int("estimated_fast_iterations", |p| p.estimated_iterations.fast.to_string()),
        float("fast_estimate_ratio", |p| num(p.estimate_ratio())),
        int("placed_otherwise", |p| p.parting.placed_otherwise.to_string()),
        int("first_job_placed_otherwise", |p| p.parting.first_job.map_or(String::new(), |j| j.to_string())),
        float("first_placed_otherwise_start_s", |p| p.parting.first_start_s.map_or(String::new(), num)),
        float("exact_jitter_response_low", |p| p.exact_spread().map_or(String::new(), |s| num(s.response_low))),
        float("exact_jitter_response_high", |p| p.exact_spread().map_or(String::new(), |s| num(s.response_high))),
        float("exact_jitter_utilization_low", |p| p.exact_spread().map_or(String::new(), |s| num(s.utilization_low))),
        float("exact_jitter_utilization_high", |p| p.exact_spread().map_or(String::new(), |s| num(s.utilization_high))),
        // How many of the jittered exact runs were judged saturated: a regime the given run's verdict may not tell.
        int("jittered_exact_saturated", |p| {
            saturated_draws(&p.jittered_exact).map_or(String::new(), |n| n.to_string())
        }),
        float("fast_error_to_nearest_exact", |p| p.fast_error_to_nearest_exact().map_or(String::new(), num)),
        // Empty without jittered runs, which a flag column does not admit.
        text("fast_within_exact_spread", |p| p.fast_within_exact_spread().map_or(String::new(), |w| w.to_string())),
        // Jobs that took their kind's rate instead of a window (`--fast-reuse-kind-rates`), and the windows.
        int("fast_reused_kind_rates", |p| p.fast.fast_mode.map_or(0, |f| f.reused_kind_rates).to_string()),
        int("fast_windows", |p| p.fast.fast_mode.map_or(0, |f| f.windows).to_string()),
    ]
}

/// `pairs.csv`: one row per scheme, load and seed.
pub fn pairs_csv(pairs: &[PairedRun]) -> String {
    to_csv(&pair_columns(), pairs.iter())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn verdicts<'a>(scheme: &'a str, seed: u64, runs: &[(f64, bool, bool)]) -> Vec<SaturationVerdicts<'a>> {
        runs.iter().map(|&(load, exact, fast)| SaturationVerdicts { scheme, load, seed, exact, fast }).collect()
    }

    #[test]
    fn the_saturation_point_is_the_lowest_saturated_load_each_way() {
        let mut all = verdicts("SB", 1, &[(0.8, false, false), (1.0, true, true), (1.2, true, true)]);
        all.extend(verdicts("GS", 1, &[(0.8, true, false), (1.0, true, true)]));
        all.extend(verdicts("SB", 2, &[(0.8, false, false), (1.0, false, true), (1.2, true, true)]));
        all.extend(verdicts("SB", 3, &[(0.8, false, false), (1.0, false, false), (1.2, false, false)]));
        // Given out of order, and not saturated again at 1.0.
        all.extend(verdicts("SB", 4, &[(1.2, true, false), (0.8, true, false), (1.0, false, false)]));
        let checks = saturation_points(&all);
        assert_eq!(checks.iter().map(|c| c.scheme.as_str()).collect::<Vec<_>>(), ["SB", "GS"]);
        let sb = &checks[0];
        let points: Vec<(u64, Option<f64>, Option<f64>)> = sb.seeds.iter().map(|s| (s.seed, s.exact, s.fast)).collect();
        assert_eq!(
            points,
            [(1, Some(1.0), Some(1.0)), (2, Some(1.2), Some(1.0)), (3, None, None), (4, Some(0.8), None)]
        );
        assert_eq!((sb.agreements, sb.both_saturated), (2, 2), "seeds 1 and 3 agree; 1 and 2 saturate both ways");
        assert!((sb.mean_difference.unwrap() - -0.1).abs() < 1e-12, "(0 - 0.2) / 2");
        let gs = &checks[1];
        assert_eq!((gs.agreements, gs.both_saturated), (0, 1));
        assert!((gs.mean_difference.unwrap() - 0.2).abs() < 1e-12);
    }

    #[test]
    fn no_mean_difference_without_a_seed_saturated_both_ways() {
        let all = verdicts("PB-SB", 1, &[(0.8, false, false), (1.0, true, false)]);
        let check = &saturation_points(&all)[0];
        assert_eq!((check.agreements, check.both_saturated, check.mean_difference), (0, 0, None));
    }

    #[test]
    fn the_bound_checked_is_the_one_of_the_window_the_scheme_takes() {
        let on_eevdf = SimConfig { node_scheduler: cosched_sim::OsScheduler::Eevdf, ..SimConfig::default() };
        let check_with = |fast| FastCheckSettings {
            schemes: vec![],
            loads: vec![0.4],
            seeds: vec![1],
            machine: on_eevdf.clone(),
            workload: WorkloadSpec::default(),
            mix: Mix { number: 7 },
            fast,
            jitter: None,
        };
        let given_no_window = check_with(FastSettings::default());
        assert_eq!(validated_bound(&given_no_window, "PB-SY"), Some(0.339), "1 s windows");
        assert_eq!(validated_bound(&given_no_window, "SB"), Some(0.222), "the default window");
        let given_200_ms = check_with(FastSettings { validated_window: false, ..FastSettings::default() });
        assert_eq!(validated_bound(&given_200_ms, "PB-SY"), Some(0.723));
        let given_another_guard = check_with(FastSettings { guard_ns: 5_000_000, ..FastSettings::default() });
        assert_eq!(validated_bound(&given_another_guard, "SB"), None, "bounds hold with the default guard only");
    }

    #[test]
    fn loads_are_positive_and_each_given_once() {
        assert!(check_loads(&[0.6, 0.8, 1.0]).is_ok());
        assert!(check_loads(&[]).is_err());
        assert!(check_loads(&[0.6, 0.0]).is_err());
        assert!(check_loads(&[0.6, f64::NAN]).is_err());
        assert!(check_loads(&[0.6, 0.8, 0.6]).unwrap_err().contains("twice"));
    }

    #[test]
    fn fast_work_is_weighed_at_the_exact_runs_events_per_iteration() {
        // 2 events per iteration exact; 100 iterations estimated fast give 200 events; 300 came.
        assert_eq!(Estimated { exact: 500, fast: 100 }.ratio(1_000, 300), 1.5);
        assert_eq!(Estimated { exact: 500, fast: 100 }.ratio(1_000, 200), 1.0);
    }

    #[test]
    fn seeds_are_each_given_once() {
        assert!(check_seeds(&[1, 2, 3]).is_ok());
        assert_eq!(check_seeds(&[1, 2, 1]).unwrap_err(), "seed 1 is given twice (position 3)");
    }

    fn placed(job_number: u64, start_s: f64, cpus: &[u32]) -> JobRecord {
        JobRecord {
            job_number,
            job_type: "ring".into(),
            tasks: cpus.len() as u32,
            iterations: 1,
            arrival_s: 0.0,
            start_s,
            finish_s: start_s + 1.0,
            wait_s: start_s,
            execution_s: 1.0,
            response_s: start_s + 1.0,
            dedicated_s: 1.0,
            slowdown: 1.0,
            bounded_slowdown: 1.0,
            cpus: cosched_sim::CpuSet::from_cpus(cpus.iter().copied()),
        }
    }

    #[test]
    fn a_parting_is_the_earliest_exact_start_of_a_job_placed_on_other_cpus() {
        let exact = [placed(1, 0.0, &[0, 1]), placed(2, 5.0, &[2]), placed(3, 3.0, &[3]), placed(4, 1.0, &[0])];
        // Job 2 and job 3 move; job 4 is not finished in the fast run; job 1 starts later on the same CPUs.
        let fast = [placed(1, 0.5, &[0, 1]), placed(2, 5.0, &[3]), placed(3, 3.0, &[2])];
        let parting = Parting::of(&exact, &fast);
        assert_eq!(parting, Parting { placed_otherwise: 2, first_job: Some(3), first_start_s: Some(3.0) });
        assert!(parting.parted());
        assert!(!Parting::of(&exact, &exact).parted());
        assert_eq!(Parting::of(&exact, &[]), Parting::default());
    }
}
