//! `--jitter-draws`: every run again with its arrivals moved a little, and how far each answer moves
//! (docs/model.md, "How far to believe one answer").

use clap::Args;
use cosched_lab::jitter::{ArrivalJitter, JitterReport, RunJitter};
use cosched_sim::engine::fast::ACCEPTED_ERROR;

/// The jittered runs' settings, shared by `cosched sim` and `cosched bench fast`.
#[derive(Args, Debug, Clone)]
pub struct JitterFlags {
    /// Run every simulation this many more times (1 to 32) on the same jobs with each arrival moved within
    /// ±--jitter-s, and report how far the answers move: near a flip between regimes (a job starved or not, placed
    /// on these CPUs or on those) one answer is not the answer. `bench fast` reruns the exact engine so, and judges
    /// fast mode against its spread.
    #[arg(long, value_name = "N", help_heading = "Arrival jitter")]
    pub jitter_draws: Option<u32>,
    /// How far each arrival may move in the jittered runs, in seconds either way (a uniform draw per job; the jobs
    /// keep their order).
    #[arg(
        long,
        value_name = "SECONDS",
        default_value_t = 0.05,
        requires = "jitter_draws",
        help_heading = "Arrival jitter"
    )]
    pub jitter_s: f64,
}

impl JitterFlags {
    /// The jitter asked for, checked; `None` without `--jitter-draws`.
    pub fn jitter(&self) -> Result<Option<ArrivalJitter>, String> {
        let Some(draws) = self.jitter_draws else { return Ok(None) };
        let jitter = ArrivalJitter { draws, jitter_s: self.jitter_s };
        jitter.check()?;
        Ok(Some(jitter))
    }
}

/// A move beyond this is read as a flip between regimes, and warned of: the error fast mode is held to, so that a
/// run whose own answer moves further than fast mode may err says so (our choice).
pub const SENSITIVE_MOVE: f64 = ACCEPTED_ERROR;

/// Each run's moves under the jitter, and a warning for each run whose answer moves beyond [`SENSITIVE_MOVE`].
pub fn print_jitter(report: &JitterReport, mode: &str) {
    let jitter = report.jitter;
    println!(
        "under arrival jitter: each {mode}run {} more times with every arrival moved within ±{} s (jitter.csv):",
        jitter.draws, jitter.jitter_s
    );
    let name_width = report.runs.iter().map(|r| r.scheme.len()).max().unwrap_or(0).max(8);
    println!("{:<name_width$} {:>21} {:>21} {:>9}", "scheme", "mean response", "delivered util.", "largest");
    for run in &report.runs {
        let range = |low: f64, high: f64| format!("{} .. {}", percent(low), percent(high));
        let (response, utilization) = match run.spread {
            Some(s) => (range(s.response_low, s.response_high), range(s.utilization_low, s.utilization_high)),
            None => (String::new(), String::new()),
        };
        println!(
            "{:<name_width$} {response:>21} {utilization:>21} {:>9}",
            run.scheme,
            unsigned_percent(run.largest_move)
        );
    }
    println!("(each figure's lowest and highest move against the run on the jobs as given)");
    for run in report.runs.iter().filter(|r| r.moves_beyond(SENSITIVE_MOVE)) {
        eprintln!("warning: {}", sensitive_run(run, jitter));
    }
}

/// Why one answer of `run` is not to be read alone.
fn sensitive_run(run: &RunJitter, jitter: ArrivalJitter) -> String {
    let moved = match run.largest_move.is_nan() {
        true => "cannot be compared (a run, given or jittered, finished no job)".to_string(),
        false => format!("moves by {}", unsigned_percent(run.largest_move)),
    };
    format!(
        "{}'s answer {moved} when the arrivals move by at most {} s: its schedule turns on the arrivals' last \
         digits, so read its figures as the range above, not as one value (docs/model.md, \"How far to believe one \
         answer\")",
        run.scheme, jitter.jitter_s
    )
}

fn percent(share: f64) -> String {
    match share.is_nan() {
        true => "unknown".to_string(),
        false => format!("{:+.1} %", 100.0 * share),
    }
}

fn unsigned_percent(share: f64) -> String {
    match share.is_nan() {
        true => "unknown".to_string(),
        false => format!("{:.1} %", 100.0 * share),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cosched_lab::jitter::Answer;

    #[test]
    fn a_run_that_moves_beyond_the_threshold_or_gives_no_answer_is_warned_of() {
        let answer = |mean_response_s, delivered_utilization| Answer {
            mean_response_s,
            delivered_utilization,
            saturated: false,
        };
        let jitter = ArrivalJitter { draws: 2, jitter_s: 0.05 };
        let steady = RunJitter::of("GS", answer(100.0, 0.5), vec![answer(101.0, 0.5), answer(99.5, 0.5)]);
        assert!(!steady.moves_beyond(SENSITIVE_MOVE), "{steady:?}");
        let flips = RunJitter::of("Local", answer(100.0, 0.5), vec![answer(308.4, 0.45), answer(100.0, 0.5)]);
        assert!(flips.moves_beyond(SENSITIVE_MOVE));
        assert!(sensitive_run(&flips, jitter).contains("moves by 208.4 %"), "{}", sensitive_run(&flips, jitter));
        let none = RunJitter::of("DCS", answer(100.0, 0.5), vec![answer(f64::NAN, 0.5)]);
        assert!(none.moves_beyond(SENSITIVE_MOVE), "an unknown move is not a small one");
        assert!(sensitive_run(&none, jitter).contains("cannot be compared"));
    }

    #[test]
    fn the_flags_are_checked_and_name_themselves() {
        let flags = |draws, jitter_s| JitterFlags { jitter_draws: draws, jitter_s };
        assert_eq!(flags(None, 0.05).jitter(), Ok(None));
        assert_eq!(flags(Some(3), 0.5).jitter(), Ok(Some(ArrivalJitter { draws: 3, jitter_s: 0.5 })));
        assert!(flags(Some(0), 0.05).jitter().unwrap_err().contains("--jitter-draws 0"));
        assert!(flags(Some(2), -1.0).jitter().unwrap_err().contains("--jitter-s -1"));
    }
}
