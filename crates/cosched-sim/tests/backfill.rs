//! EASY and conservative backfilling driven by the engine: the same queue under the gang matrix and under the MPL admission of
//! the dynamic schemes, the requested time a job carries, and what the configuration refuses.

mod common;

use common::*;
use cosched_sim::config::Backfill;
use cosched_sim::{Scheme, SimConfig, SimJob};

/// Four CPUs: a job of three, a second of four that must wait for it (about 1 s), then two of one that fit beside
/// the first: one of 0.2 s at 2 ms, which ends before the first, and one of 3 s at 300 ms, which would not.
fn blocked_queue() -> Vec<SimJob> {
    vec![
        job(1, 0, 3, 10 * MS, 0, 100),
        job(2, MS, 4, 10 * MS, 0, 100),
        job(3, 2 * MS, 1, 10 * MS, 0, 20),
        job(4, 300 * MS, 1, 10 * MS, 0, 300),
    ]
}

fn starts(cfg: &SimConfig, jobs: Vec<SimJob>) -> Vec<f64> {
    let result = simulate(cfg, jobs);
    let mut records = result.jobs.clone();
    records.sort_by_key(|r| r.job_number);
    records.iter().map(|r| r.start_s).collect()
}

#[test]
fn under_gang_scheduling_a_short_job_fills_the_hole_and_a_long_one_waits_for_the_first() {
    let schemes = [(Scheme::GANG, 1), (Scheme::LOCAL, 1), ("PB-SB".parse().expect("a scheme"), 1)];
    for ((scheme, mpl), rule) in schemes.into_iter().flat_map(|s| [(s, Backfill::Easy), (s, Backfill::Conservative)]) {
        let fcfs = SimConfig { backfill: Backfill::None, ..config(scheme, 4, mpl) };
        let backfilled = SimConfig { backfill: rule, ..fcfs.clone() };
        let (before, after) = (starts(&fcfs, blocked_queue()), starts(&backfilled, blocked_queue()));
        let name = rule.name();
        assert!(before[2] >= before[1] && before[3] >= before[1], "{scheme}: FCFS keeps order: {before:?}");
        assert_eq!(after[2], 0.002, "{scheme} {name}: job 3 ends before job 1 would and starts at once: {after:?}");
        assert!(after[3] >= after[1], "{scheme} {name}: job 4 would hold job 2's CPU past its reservation: {after:?}");
        assert_eq!(after[1], before[1], "{scheme} {name}: job 2 is not delayed");
    }
}

#[test]
fn a_requested_time_longer_than_the_reservation_keeps_a_job_waiting() {
    let mut jobs = blocked_queue();
    // Job 3 asks for ten times its run time: it no longer ends by job 2's reservation by what it asked.
    jobs[2].requested_ns = Some(2_000 * MS);
    for rule in [Backfill::Easy, Backfill::Conservative] {
        let cfg = SimConfig { backfill: rule, ..config(Scheme::GANG, 4, 1) };
        let after = starts(&cfg, jobs.clone());
        assert!(after[2] >= after[1], "{}: job 3 waits: {after:?}", rule.name());
    }
}

#[test]
fn the_same_seed_gives_the_same_backfilled_run() {
    for rule in [Backfill::Easy, Backfill::Conservative] {
        let cfg = SimConfig { backfill: rule, skew: 0.2, seed: 7, ..config(Scheme::GANG, 4, 2) };
        let records = |cfg: &SimConfig| format!("{:?}", simulate(cfg, blocked_queue()).jobs);
        assert_eq!(records(&cfg), records(&cfg));
    }
}

#[test]
fn the_controllers_schemes_refuse_backfilling_and_say_why() {
    let cfg = SimConfig { backfill: Backfill::Easy, ..config(Scheme::COSCHED_GANG, 4, 2) };
    let error = cfg.validate().expect_err("GS-cosched runs cosched's own queue");
    assert!(error.0.contains("--backfill easy") && error.0.contains("GS-cosched"), "{error}");
}
