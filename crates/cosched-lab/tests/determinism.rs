//! Same settings and seed ⇒ byte-identical outputs, without the CLI; another
//! seed ⇒ other outputs.

use cosched_lab::batch::Unwatched;
use cosched_lab::batsim::batsim_jobs_csv;
use cosched_lab::sim::{jobs_csv, prepare, summary_csv, SimSettings};
use cosched_lab::study::{points_csv, run_study, runs_csv, Experiment, StudySettings};
use cosched_lab::workload::WorkloadSpec;
use cosched_sim::run::RunOptions;
use cosched_sim::{Scheme, SimConfig};

/// A few schemes on a small machine: seconds, not minutes.
fn small_sim(seed: u64) -> SimSettings {
    let schemes = ["Local", "GS", "PB-SB"].iter().map(|n| n.parse().unwrap()).collect();
    let machine = SimConfig { nodes: 8, seed, ..SimConfig::default() };
    let workload = WorkloadSpec { jobs: Some(30), model_procs: machine.cpu_count(), seed, ..WorkloadSpec::default() };
    SimSettings { schemes, machine, workload, ..SimSettings::default() }
}

/// What `cosched sim` writes from a run: summary.csv, jobs.csv, the summaries as JSON and the last scheme's
/// Batsim file.
fn sim_outputs(settings: &SimSettings) -> [String; 4] {
    let prepared = prepare(settings).expect("valid settings");
    let options = RunOptions { bounded_slowdown_threshold_s: 0.02, ..RunOptions::default() };
    let results = prepared.run(&options, &Unwatched).expect("runs finish");
    let summaries: Vec<_> = results.iter().map(|r| &r.summary).collect();
    let batsim = batsim_jobs_csv(results.last().expect("a run per scheme"));
    [summary_csv(&results), jobs_csv(&results), serde_json::to_string(&summaries).unwrap(), batsim]
}

#[test]
fn a_sim_run_repeats_byte_for_byte_and_a_new_seed_changes_it() {
    let first = sim_outputs(&small_sim(7));
    assert_eq!(first, sim_outputs(&small_sim(7)));
    assert!(first[1].lines().count() > 30, "every scheme reports its jobs");
    let other_seed = sim_outputs(&small_sim(8));
    for (same, other) in first.iter().zip(&other_seed) {
        assert_ne!(same, other);
    }
}

fn small_study(first_seed: u64) -> StudySettings {
    StudySettings {
        jobs_per_run: 20,
        schemes: vec![Scheme::LOCAL, Scheme::GANG],
        replications: 2,
        first_seed,
        ..StudySettings::default()
    }
}

fn study_outputs(settings: &StudySettings) -> [String; 2] {
    let rows =
        run_study(Experiment::E4, settings, &Unwatched, &cosched_lab::journal::Journal::none()).expect("runs finish");
    [runs_csv(&rows), points_csv(&rows)]
}

#[test]
fn a_study_repeats_byte_for_byte_and_a_new_seed_changes_it() {
    let first = study_outputs(&small_study(3));
    assert_eq!(first, study_outputs(&small_study(3)));
    // Two skews x two schemes x two replications; a point per (skew, scheme).
    assert_eq!(first[0].lines().count(), 1 + 8);
    assert_eq!(first[1].lines().count(), 1 + 4);
    let other_seed = study_outputs(&small_study(4));
    assert_ne!(first, other_seed);
}
