//! Admission chosen outside the engine (`RunOptions::chooser`, the gym interface's hook), on runs drawn at
//! random: a chooser answering first come, first served decides every run exactly as the engine's own queue,
//! and any chooser's choices are what the engine starts, when it starts them.

mod common;

use common::*;
use cosched_sim::run::{run, Choice, Chooser, QueueView, RunOptions, RunResult, SharedChooser};
use cosched_sim::{SimConfig, SimJob};
use proptest::prelude::*;
use std::sync::{Arc, Mutex};

/// The study's queue, answered from outside: the head if it fits, else wait.
struct Fcfs;

impl Chooser for Fcfs {
    fn choose(&mut self, view: &QueueView) -> Choice {
        match &view.waiting[0] {
            head if head.fits => Choice::Start { job: head.id, row: None },
            _ => Choice::Wait,
        }
    }
}

/// Passes over the queue: the last shown job that fits, in the highest row it fits in; notes each start.
#[derive(Default)]
struct LastFitting {
    started: Vec<(u64, u64)>,
}

impl Chooser for LastFitting {
    fn choose(&mut self, view: &QueueView) -> Choice {
        let job = view.waiting.iter().rev().find(|w| w.fits).expect("asked only when a shown job fits");
        let row = job.fits_in_row.iter().rposition(|&fits| fits).map(|r| r as u32);
        let choice = Choice::Start { job: job.id, row };
        assert_eq!(view.check(choice), Ok(()));
        self.started.push((job.id.0, view.now_ns));
        choice
    }
}

fn chosen_run(cfg: &SimConfig, jobs: Vec<SimJob>, chooser: Arc<Mutex<dyn Chooser>>, window: usize) -> RunResult {
    let options = RunOptions { chooser: Some(SharedChooser { chooser, window }), ..RunOptions::default() };
    run(cfg, jobs, &options, |_| {}).expect("a run the chooser may decide")
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn first_come_first_served_from_outside_is_the_engines_own_queue((cfg, jobs) in small_runs()) {
        prop_assume!(!cfg.scheme.runs_the_controller());
        let own = run(&cfg, jobs.clone(), &RunOptions::default(), |_| {}).expect("a valid run");
        let chosen = chosen_run(&cfg, jobs, Arc::new(Mutex::new(Fcfs)), 3);
        prop_assert_eq!(format!("{:?}", own.jobs), format!("{:?}", chosen.jobs));
        prop_assert_eq!(format!("{:?}", own.summary), format!("{:?}", chosen.summary));
    }

    #[test]
    fn the_engine_starts_what_the_chooser_chose_when_it_chose((cfg, jobs) in small_runs(), window in 1usize..6) {
        prop_assume!(!cfg.scheme.runs_the_controller());
        let submitted = jobs.len();
        // The coscheduler's job id is the job's position in arrival order.
        let numbers: Vec<u64> = jobs.iter().map(|j| j.job_number).collect();
        let chooser = Arc::new(Mutex::new(LastFitting::default()));
        let result = chosen_run(&cfg, jobs, chooser.clone(), window);
        prop_assert_eq!(result.jobs.len(), submitted, "every job ran to its end");
        let started = &chooser.lock().expect("not poisoned").started;
        prop_assert_eq!(started.len(), submitted, "each job started once, by a choice");
        for record in &result.jobs {
            let chosen = started.iter().find(|(id, _)| numbers[*id as usize] == record.job_number);
            let &(_, chosen_ns) = chosen.expect("each job was chosen");
            prop_assert!((record.start_s - chosen_ns as f64 / 1e9).abs() < 1e-9, "job {} started when chosen", record.job_number);
        }
    }
}

#[test]
fn the_controllers_schemes_backfilling_and_fast_mode_refuse_a_chooser() {
    let refusal = |cfg: &SimConfig, fast: bool| cosched_sim::run::check_chooser_allowed(cfg, fast).unwrap_err().0;
    let gs = config(cosched_sim::Scheme::GANG, 4, 2);
    assert!(refusal(&config(cosched_sim::Scheme::COSCHED_GANG, 4, 2), false).contains("GS-cosched"));
    let easy = SimConfig { backfill: cosched_sim::config::Backfill::Easy, ..gs.clone() };
    assert!(refusal(&easy, false).contains("--backfill"));
    assert!(refusal(&gs, true).contains("fast mode"));
    assert!(cosched_sim::run::check_chooser_allowed(&gs, false).is_ok());
}
