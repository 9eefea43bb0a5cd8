//! Fast mode under gang scheduling, on a workload where it once went wrong:
//! when the running row emptied, the rest of its quantum idled, and a window
//! opened in that idle stretch took the remaining jobs for a third as fast as
//! they were (seed 1 came out 18 % slow in mean response, seed 4 8 %). GS now
//! measures per row, in whole quanta; without a gang switch every quantum it
//! measures per CPU, as it did then, and both are checked.

use cosched_lab::batch::Unwatched;
use cosched_lab::fast_check::{run_pairs, FastCheckSettings};
use cosched_lab::workload::WorkloadSpec;
use cosched_sim::engine::fast::FastSettings;
use cosched_sim::{Mix, SimConfig};

#[test]
fn a_row_that_empties_does_not_slow_the_rates_fast_mode_measures() {
    for switch_every_quantum in [true, false] {
        let mut machine = SimConfig { nodes: 16, mpl: 2, ..SimConfig::default() };
        machine.costs.gang_switch_every_quantum = switch_every_quantum;
        let settings = FastCheckSettings {
            schemes: vec!["GS".parse().unwrap()],
            loads: vec![0.9],
            seeds: vec![1, 4],
            machine,
            workload: WorkloadSpec { jobs: Some(60), model_procs: 16, runtime_scale: 0.05, ..WorkloadSpec::default() },
            mix: Mix { number: 7 },
            fast: FastSettings::default(),
            jitter: None,
        };
        for pair in run_pairs(&settings, &Unwatched, &Unwatched, || {}).expect("the set runs") {
            let (response, utilization) = (pair.response_error(), pair.utilization_error());
            let run = format!("seed {}, a switch every quantum: {switch_every_quantum}", pair.seed);
            assert!(response.abs() < 0.02, "{run}: mean response off by {:.1} %", 100.0 * response);
            assert!(utilization.abs() < 0.02, "{run}: delivered utilization off by {:.1} %", 100.0 * utilization);
        }
    }
}
