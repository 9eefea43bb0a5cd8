//! An ideal machine whose context switch costs nothing (`cosched sim --cs-us
//! 0`) runs a generated workload to the end, the same way every time.

use cosched_lab::batch::Unwatched;
use cosched_lab::sim::{jobs_csv, prepare, summary_csv, SimSettings};
use cosched_lab::workload::WorkloadSpec;
use cosched_sim::run::RunOptions;
use cosched_sim::SimConfig;

/// `cosched sim --cs-us 0 --jobs 50` with the schemes whose node scheduler
/// charges a switch at dispatch (one per way of waiting): every one of them
/// panicked before the fix.
fn free_switch_sim() -> SimSettings {
    let schemes = ["Local", "SB", "SY", "DCS", "PB-SB", "IB"].iter().map(|n| n.parse().unwrap()).collect();
    let mut machine = SimConfig::default();
    machine.costs.context_switch_ns = 0;
    let workload = WorkloadSpec { jobs: Some(50), model_procs: machine.cpu_count(), ..WorkloadSpec::default() };
    SimSettings { schemes, machine, workload, ..SimSettings::default() }
}

fn outputs(settings: &SimSettings) -> (String, String) {
    let results = prepare(settings).expect("valid settings").run(&RunOptions::default(), &Unwatched).expect("runs");
    for r in &results {
        assert_eq!(r.jobs.len(), 50, "{}: every job completes", r.summary.scheme);
        assert_eq!(r.summary.cpu_time.switch_ns, 0, "{}: no switch costs anything", r.summary.scheme);
    }
    (summary_csv(&results), jobs_csv(&results))
}

#[test]
fn a_run_with_free_context_switches_completes_and_repeats_byte_for_byte() {
    let settings = free_switch_sim();
    assert_eq!(outputs(&settings), outputs(&settings));
}
