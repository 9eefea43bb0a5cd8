//! The event log of `cosched bench partition`: recording it changes no result, and it holds every event in time
//! order with the node it acts on.

mod common;

use common::small_runs;
use cosched_sim::engine::WHOLE_MACHINE;
use cosched_sim::run::{run, RunOptions};
use proptest::prelude::*;

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn the_event_log_changes_nothing_and_holds_every_event_in_order((cfg, jobs) in small_runs()) {
        let plain = run(&cfg, jobs.clone(), &RunOptions::default(), |_| {}).expect("a valid run");
        let options = RunOptions { event_log_from_ns: Some(0), ..RunOptions::default() };
        let logged = run(&cfg, jobs.clone(), &options, |_| {}).expect("a valid run");
        prop_assert_eq!(format!("{:?}", plain.jobs), format!("{:?}", logged.jobs));
        prop_assert_eq!(format!("{:?}", plain.summary), format!("{:?}", logged.summary));
        prop_assert!(plain.event_log.is_empty());
        let log = &logged.event_log;
        prop_assert_eq!(log.len() as u64, logged.summary.events);
        prop_assert!(log.windows(2).all(|w| w[0].time_ns <= w[1].time_ns), "not in time order");
        prop_assert!(log.iter().all(|e| e.node < cfg.nodes || e.node == WHOLE_MACHINE));
        // Every arrival and every job's end acts on the whole machine.
        let whole = log.iter().filter(|e| e.node == WHOLE_MACHINE).count();
        prop_assert!(whole >= 2 * logged.jobs.len(), "{} whole-machine events for {} jobs", whole, logged.jobs.len());
    }
}
