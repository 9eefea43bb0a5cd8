//! How far a simulation's answer moves when nothing but the arrivals' last digits change: the same workload run
//! again with every arrival moved a little. Near a flip between regimes (a job starved or not, placed here or there)
//! one answer is not the answer; this measures where that happens. `cosched sim --jitter-draws` reports it for every
//! scheme, and `cosched bench fast --jitter-draws` judges fast mode against the exact engine's own spread.

use crate::batch::{run_all, BatchWatch};
use crate::csv::{csv_field, flag, float, int, kinds, num, text, to_csv, Column, ColumnKinds};
use cosched_core::SimTime;
use cosched_sim::run::RunOptions;
use cosched_sim::{SimConfig, SimJob, Summary};
use serde::Serialize;

/// A run again, `draws` times, with every arrival moved by a uniform draw within ±`jitter_s`: how far the model's
/// own answer moves when nothing but the arrivals' last digits change (a schedule that flips between regimes moves
/// far).
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct ArrivalJitter {
    pub draws: u32,
    pub jitter_s: f64,
}

impl ArrivalJitter {
    pub const MOST_DRAWS: u32 = 32;
    /// The most an arrival may move: an hour, far beyond what "a little" means for any workload.
    pub const MOST_JITTER_S: f64 = 3600.0;

    pub fn check(&self) -> Result<(), String> {
        if !(1..=Self::MOST_DRAWS).contains(&self.draws) {
            return Err(format!("--jitter-draws {}: give 1 to {}", self.draws, Self::MOST_DRAWS));
        }
        if !(self.jitter_s.is_finite() && self.jitter_s > 0.0 && self.jitter_s <= Self::MOST_JITTER_S) {
            return Err(format!(
                "--jitter-s {}: give a positive number of seconds up to {}",
                self.jitter_s,
                Self::MOST_JITTER_S
            ));
        }
        Ok(())
    }
}

/// `jobs` (sorted by arrival) with every arrival moved by a uniform draw within ±`jitter_s` from the stream of
/// `seed` for `draw`, whole nanoseconds, but never before the job before it nor before time zero: the jobs keep
/// their order, and with it every random stream the engine keys by a job's place in the list (its tasks' skews), and
/// each keeps its number, type and program, so that only the arrivals differ from the run it is compared with.
pub fn jitter_arrivals(jobs: &[SimJob], jitter_s: f64, seed: u64, draw: u32) -> Vec<SimJob> {
    // Sorted, the clamp keeps every move within ±jitter_s.
    debug_assert!(jobs.is_sorted_by_key(|j| j.arrival), "jobs sorted by arrival");
    let mut moves = cosched_core::StreamSeed(seed).stream(&format!("arrival-jitter-{draw}"));
    let mut earliest_ns = 0u64;
    jobs.iter()
        .map(|job| {
            let shift_ns = (moves.uniform_range(-jitter_s, jitter_s) * 1e9).round() as i64;
            let arrival_ns = job.arrival.ns().saturating_add_signed(shift_ns).max(earliest_ns);
            earliest_ns = arrival_ns;
            SimJob { arrival: SimTime(arrival_ns), ..job.clone() }
        })
        .collect()
}

/// The two figures a run is judged by (and fast mode's bounds hold), from one run, and its regime's verdict.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Answer {
    pub mean_response_s: f64,
    pub delivered_utilization: f64,
    /// Judged saturated (jobs queue without bound): a jittered run may change regime.
    pub saturated: bool,
}

impl Answer {
    pub fn of(summary: &Summary) -> Answer {
        Answer {
            mean_response_s: summary.mean_response_s,
            delivered_utilization: summary.delivered_utilization,
            saturated: summary.saturation.saturated,
        }
    }

    /// The larger of this answer's |self / other - 1| over the two figures, least over `others` (those that give a
    /// number); `None` if none does.
    pub fn error_to_nearest(&self, others: impl IntoIterator<Item = Answer>) -> Option<f64> {
        others.into_iter().map(|other| self.error_to(&other)).filter(|e| e.is_finite()).min_by(f64::total_cmp)
    }

    /// The larger of |self / other - 1| over mean response and delivered utilization (the two figures fast mode's
    /// bounds hold). NaN if either is unknown (`f64::max` would let one figure pass as the other's error).
    pub fn error_to(&self, other: &Answer) -> f64 {
        let (response, utilization) = self.moved_from(other);
        largest_known(response.abs(), utilization.abs())
    }

    /// Each figure's self / other - 1: (mean response, delivered utilization).
    pub fn moved_from(&self, other: &Answer) -> (f64, f64) {
        (
            self.mean_response_s / other.mean_response_s - 1.0,
            self.delivered_utilization / other.delivered_utilization - 1.0,
        )
    }
}

/// How many of the jittered runs were judged saturated; `None` without any.
pub fn saturated_draws(jittered: &[Answer]) -> Option<usize> {
    (!jittered.is_empty()).then(|| jittered.iter().filter(|a| a.saturated).count())
}

/// Where a run's answers lie under arrival jitter, as errors against its answer on the workload as given
/// (each figure's lowest and highest over the draws and that answer itself, so each range holds 0).
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct AnswerSpread {
    pub response_low: f64,
    pub response_high: f64,
    pub utilization_low: f64,
    pub utilization_high: f64,
}

impl AnswerSpread {
    /// The jittered answers against the answer on the workload as given; `None` without any.
    pub fn of(given: Answer, jittered: &[Answer]) -> Option<AnswerSpread> {
        if jittered.is_empty() {
            return None;
        }
        // A run with no answer (no job finished: a NaN mean, or no utilization) leaves the spread unknown: NaN,
        // which `largest` passes on and `holds` never admits, rather than a range that leaves the run out.
        let errors = |figure: fn((f64, f64)) -> f64| {
            let moved = jittered.iter().map(|a| figure(a.moved_from(&given)));
            // Once unknown, it stays so (`f64::min` would drop the NaN at the next answer).
            moved.fold((0.0f64, 0.0f64), |(low, high), e| match e.is_finite() && !low.is_nan() {
                true => (low.min(e), high.max(e)),
                false => (f64::NAN, f64::NAN),
            })
        };
        let (response_low, response_high) = errors(|(response, _)| response);
        let (utilization_low, utilization_high) = errors(|(_, utilization)| utilization);
        Some(AnswerSpread { response_low, response_high, utilization_low, utilization_high })
    }

    /// The largest move of either figure (NaN where a run gave no answer).
    pub fn largest(&self) -> f64 {
        [self.response_low, self.response_high, self.utilization_low, self.utilization_high]
            .into_iter()
            .fold(0.0, |most, e| largest_known(most, e.abs()))
    }

    /// Both errors (against the answer given) lie within the ranges.
    pub fn holds(&self, response_error: f64, utilization_error: f64) -> bool {
        (self.response_low..=self.response_high).contains(&response_error)
            && (self.utilization_low..=self.utilization_high).contains(&utilization_error)
    }
}

/// The larger of two, NaN if either is: an unknown stays unknown (`f64::max` would drop it).
pub(crate) fn largest_known(a: f64, b: f64) -> f64 {
    if a.is_nan() || b.is_nan() {
        f64::NAN
    } else {
        a.max(b)
    }
}

/// Per configuration, its answers with the arrivals jittered, one per draw: every draw of every configuration as
/// one batch (configuration `i` runs on `jobs_for(i)`, moved from the stream of its seed).
pub fn jittered_answers<W: BatchWatch>(
    jitter: ArrivalJitter,
    configs: &[SimConfig],
    labels: &[String],
    jobs_for: &(impl Fn(usize) -> Vec<SimJob> + Sync),
    options: &RunOptions,
    watch: &W,
) -> Result<Vec<Vec<Answer>>, String> {
    let runs = configs.len();
    // Run j is draw j / runs of configuration j % runs.
    let draw_of = |j: usize| ((j / runs) as u32, j % runs);
    let count = runs * jitter.draws as usize;
    let jittered_configs: Vec<SimConfig> = (0..count).map(|j| configs[draw_of(j).1].clone()).collect();
    let jittered_labels: Vec<String> = (0..count)
        .map(|j| {
            let (draw, i) = draw_of(j);
            format!("{}-jitter{draw}", labels[i])
        })
        .collect();
    let jobs_of = |j: usize| {
        let (draw, i) = draw_of(j);
        jitter_arrivals(&jobs_for(i), jitter.jitter_s, configs[i].seed, draw)
    };
    let results = run_all(&jittered_configs, &jittered_labels, jobs_of, options, watch)?;
    let mut answers = vec![Vec::with_capacity(jitter.draws as usize); runs];
    for (j, result) in results.iter().enumerate() {
        answers[draw_of(j).1].push(Answer::of(&result.summary));
    }
    Ok(answers)
}

/// One run's answers under arrival jitter: on the jobs as given and in each draw.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct RunJitter {
    /// The scheme (or what else names the run).
    pub scheme: String,
    pub given: Answer,
    pub draws: Vec<Answer>,
    /// Where the draws lie against the answer given (`None` without draws).
    pub spread: Option<AnswerSpread>,
    /// The largest move of either figure ([`AnswerSpread::largest`]; NaN where a draw gave no answer).
    pub largest_move: f64,
}

impl RunJitter {
    pub fn of(scheme: &str, given: Answer, draws: Vec<Answer>) -> RunJitter {
        let spread = AnswerSpread::of(given, &draws);
        let largest_move = spread.map_or(0.0, |s| s.largest());
        RunJitter { scheme: scheme.to_string(), given, draws, spread, largest_move }
    }

    /// A move beyond `accepted`, or unknown: a single answer of this run is not to be trusted as the answer.
    pub fn moves_beyond(&self, accepted: f64) -> bool {
        self.largest_move.is_nan() || self.largest_move > accepted
    }
}

/// Every run's answers under one jitter (`summary.json`'s `arrival_jitter`).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct JitterReport {
    pub jitter: ArrivalJitter,
    pub runs: Vec<RunJitter>,
}

/// One draw of one run: a row of `jitter.csv`.
struct DrawRow<'a> {
    run: &'a RunJitter,
    draw: usize,
    jitter_s: f64,
}

impl DrawRow<'_> {
    fn answer(&self) -> &Answer {
        &self.run.draws[self.draw]
    }
}

fn draw_columns<'a>() -> Vec<Column<DrawRow<'a>>> {
    vec![
        text("scheme", |r| csv_field(&r.run.scheme)),
        int("draw", |r| r.draw.to_string()),
        float("jitter_s", |r| num(r.jitter_s)),
        float("mean_response_s", |r| num(r.answer().mean_response_s)),
        float("delivered_utilization", |r| num(r.answer().delivered_utilization)),
        flag("saturated", |r| r.answer().saturated.to_string()),
        float("given_mean_response_s", |r| num(r.run.given.mean_response_s)),
        float("given_delivered_utilization", |r| num(r.run.given.delivered_utilization)),
        flag("given_saturated", |r| r.run.given.saturated.to_string()),
        float("response_move", |r| num(r.answer().moved_from(&r.run.given).0)),
        float("utilization_move", |r| num(r.answer().moved_from(&r.run.given).1)),
    ]
}

/// `jitter.csv`'s columns and what each holds.
pub fn jitter_kinds() -> ColumnKinds {
    kinds(&draw_columns())
}

/// `jitter.csv`: one row per run and draw, each answer beside the one on the jobs as given.
pub fn jitter_csv(report: &JitterReport) -> String {
    let rows: Vec<DrawRow> = report
        .runs
        .iter()
        .flat_map(|run| (0..run.draws.len()).map(move |draw| DrawRow { run, draw, jitter_s: report.jitter.jitter_s }))
        .collect();
    to_csv(&draw_columns(), rows.iter())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::batch::Unwatched;
    use cosched_sim::input::{sim_jobs, JobRequest, WorkloadPlan};
    use cosched_sim::Mix;

    fn workload_of(arrivals_s: &[f64]) -> Vec<SimJob> {
        let requests: Vec<JobRequest> = arrivals_s
            .iter()
            .enumerate()
            .map(|(i, &submit_s)| JobRequest {
                job_number: i as u64 + 1,
                submit_s,
                run_s: 10.0,
                procs: 2,
                requested_s: None,
            })
            .collect();
        let config = SimConfig { nodes: 4, ..SimConfig::default() };
        sim_jobs(&requests, &WorkloadPlan { mix: Mix { number: 7 }, runtime_scale: 1.0 }, &config)
    }

    #[test]
    fn jittered_arrivals_move_within_the_amplitude_and_keep_the_jobs_order() {
        // Twenty arrivals 1 ms apart, which ±50 ms would all but surely reorder, then a few far apart.
        let mut arrivals_s: Vec<f64> = (0..20).map(|i| f64::from(i) * 0.001).collect();
        arrivals_s.extend([5.0, 5.03, 9.0, 100.0]);
        let jobs = workload_of(&arrivals_s);
        let moved = jitter_arrivals(&jobs, 0.05, 7, 0);
        let numbers = |jobs: &[SimJob]| jobs.iter().map(|j| j.job_number).collect::<Vec<_>>();
        // Each job keeps its place, with its type and program.
        assert_eq!(numbers(&moved), numbers(&jobs), "the order is kept");
        assert!(moved.is_sorted_by_key(|j| j.arrival), "sorted by arrival, as the engine takes jobs");
        for (before, after) in jobs.iter().zip(&moved) {
            let shift_ns = after.arrival.ns() as i64 - before.arrival.ns() as i64;
            assert!(shift_ns.abs() <= 50_000_000, "job {} moved {shift_ns} ns", before.job_number);
            assert_eq!((&after.label, after.tasks), (&before.label, before.tasks));
        }
        let arrivals = |jobs: &[SimJob]| jobs.iter().map(|j| j.arrival).collect::<Vec<_>>();
        assert_ne!(arrivals(&moved), arrivals(&jobs), "arrivals moved");
        assert_eq!(arrivals(&moved), arrivals(&jitter_arrivals(&jobs, 0.05, 7, 0)), "the same draw again");
        assert_ne!(arrivals(&moved), arrivals(&jitter_arrivals(&jobs, 0.05, 7, 1)), "another draw");
        assert_ne!(arrivals(&moved), arrivals(&jitter_arrivals(&jobs, 0.05, 8, 0)), "another seed");
        // Under half a nanosecond, nothing moves at all.
        assert_eq!(arrivals(&jitter_arrivals(&jobs, 4e-10, 7, 0)), arrivals(&jobs));
    }

    /// Every configuration of a batch runs each draw on the same jittered jobs, moved from the run's seed: two runs
    /// alike but for their place and name in the batch give the same answers draw by draw (`sim --jitter-draws`
    /// compares its schemes on the same moved jobs so).
    #[test]
    fn every_run_of_a_batch_gets_the_same_jittered_jobs_in_a_draw() {
        let arrivals_s: Vec<f64> = (0..12).map(|i| f64::from(i) * 0.7).collect();
        let jobs = workload_of(&arrivals_s);
        let short = |seed| SimConfig { nodes: 4, seed, ..SimConfig::default() };
        let configs = [short(3), short(3), short(4)];
        let labels: Vec<String> = ["Local", "Local again", "Local, seed 4"].map(String::from).to_vec();
        let jobs_for = |_: usize| jobs.clone();
        let jitter = ArrivalJitter { draws: 3, jitter_s: 0.5 };
        let answers = jittered_answers(jitter, &configs, &labels, &jobs_for, &RunOptions::default(), &Unwatched)
            .expect("the runs run");
        assert_eq!(answers[0], answers[1], "the same jobs in every draw, whatever the run's place in the batch");
        assert_ne!(answers[0], answers[2], "another seed, another run");
        assert!(answers[0].windows(2).any(|w| w[0] != w[1]), "the draws differ: {:?}", answers[0]);
    }

    #[test]
    fn jitter_settings_are_bounded() {
        assert!(ArrivalJitter { draws: 4, jitter_s: 0.05 }.check().is_ok());
        assert!(ArrivalJitter { draws: 0, jitter_s: 0.05 }.check().unwrap_err().contains("give 1 to 32"));
        assert!(ArrivalJitter { draws: 33, jitter_s: 0.05 }.check().is_err());
        for jitter_s in [0.0, -1.0, f64::NAN, f64::INFINITY, 3601.0] {
            assert!(ArrivalJitter { draws: 1, jitter_s }.check().is_err(), "{jitter_s}");
        }
    }

    #[test]
    fn the_exact_spread_holds_zero_and_judges_fast_mode_by_both_figures() {
        let spread =
            AnswerSpread { response_low: -0.1, response_high: 0.0, utilization_low: 0.0, utilization_high: 0.02 };
        assert!(spread.holds(-0.05, 0.01));
        assert!(!spread.holds(0.01, 0.01), "response above every exact answer");
        assert!(!spread.holds(-0.05, -0.001), "utilization below every exact answer");
        assert_eq!(spread.largest(), 0.1);
        let unknown = AnswerSpread { utilization_high: f64::NAN, ..spread };
        assert!(unknown.largest().is_nan(), "a run with no answer is not left out");
        assert!(!unknown.holds(-0.05, 0.01));
    }

    #[test]
    fn a_jittered_run_with_no_answer_leaves_the_spread_unknown_whatever_follows() {
        let answer = |mean_response_s, delivered_utilization| Answer {
            mean_response_s,
            delivered_utilization,
            saturated: false,
        };
        let given = answer(100.0, 0.5);
        let known = AnswerSpread::of(given, &[answer(120.0, 0.5), answer(90.0, 0.55)]).unwrap();
        assert!((known.response_low - -0.1).abs() < 1e-12 && (known.response_high - 0.2).abs() < 1e-12);
        assert!((known.utilization_high - 0.1).abs() < 1e-12 && known.utilization_low == 0.0, "{known:?}");
        assert!(known.holds(0.1, 0.05) && !known.holds(0.1, -0.01));
        // No job finished in the first draw (a NaN mean, no utilization), then answers: unknown, never "within".
        for first in [answer(f64::NAN, 0.5), answer(100.0, f64::NAN), answer(f64::INFINITY, 0.5)] {
            let unknown = AnswerSpread::of(given, &[first, answer(120.0, 0.5)]).unwrap();
            assert!(unknown.largest().is_nan(), "{first:?}: {unknown:?}");
            assert!(!unknown.holds(0.1, 0.0), "{first:?}");
        }
        assert_eq!(AnswerSpread::of(given, &[]), None);
    }

    #[test]
    fn each_draw_carries_its_own_verdict_beside_the_given_runs() {
        let answer = |mean_response_s, saturated| Answer { mean_response_s, delivered_utilization: 0.5, saturated };
        let run = RunJitter::of("SB", answer(100.0, false), vec![answer(300.0, true), answer(101.0, false)]);
        let report = JitterReport { jitter: ArrivalJitter { draws: 2, jitter_s: 0.05 }, runs: vec![run.clone()] };
        let table = jitter_csv(&report);
        let header: Vec<&str> = table.lines().next().unwrap().split(',').collect();
        let column = |name: &str| header.iter().position(|h| *h == name).unwrap();
        let verdicts: Vec<(String, String)> = table
            .lines()
            .skip(1)
            .map(|l| l.split(',').map(str::to_string).collect::<Vec<_>>())
            .map(|row| (row[column("saturated")].clone(), row[column("given_saturated")].clone()))
            .collect();
        let (yes, no) = ("true".to_string(), "false".to_string());
        assert_eq!(verdicts, [(yes, no.clone()), (no.clone(), no)], "{table}");
        assert_eq!(saturated_draws(&run.draws), Some(1));
        assert_eq!(saturated_draws(&[]), None, "no jittered run: nothing to count");
    }

    #[test]
    fn fast_mode_is_judged_against_the_nearest_exact_answer_too() {
        let answer = |mean_response_s, delivered_utilization| Answer {
            mean_response_s,
            delivered_utilization,
            saturated: false,
        };
        // Fast lands in the other regime (60 s, 0.66) that one jittered exact run found: 1 % off it, 40 % off the
        // answer on the workload as given.
        let fast = answer(60.6, 0.66);
        let exact = [answer(100.0, 0.5), answer(99.0, 0.5), answer(60.0, 0.66), answer(f64::NAN, 0.5)];
        let nearest = fast.error_to_nearest(exact).unwrap();
        assert!((nearest - 0.01).abs() < 1e-12, "{nearest}");
        assert!((fast.error_to_nearest([exact[0]]).unwrap() - 0.394).abs() < 1e-12);
        assert_eq!(fast.error_to_nearest([answer(f64::NAN, 0.5)]), None);
    }
}
