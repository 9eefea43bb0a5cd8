//! One run's finished jobs in the format of Batsim's `jobs.csv`, the file
//! evalys (`JobSet.from_csv`) and other Batsim-based tools read.
//!
//! Batsim's columns, in its order, filled from a [`JobRecord`]; times in
//! seconds printed as Batsim prints them (C++ `to_string`, six decimals):
//! - `job_id`: the job number; `workload_name`: [`BATSIM_WORKLOAD_NAME`];
//!   `profile`: the job type (J1–J6, or the trace's label);
//! - `submission_time`, `starting_time`, `finish_time`: arrival, start and
//!   finish, rounded to the microsecond; `waiting_time`, `execution_time`,
//!   `turnaround_time` are differences of those rounded times, so they add up
//!   exactly as evalys recomputes them;
//! - `requested_number_of_resources`: the tasks (one process each);
//! - `requested_time`: the dedicated run time (alone on the machine, no skew).
//!   Batsim's is a walltime that kills the job; cosched kills none, so time-sharing
//!   jobs run past it with success 1, and turnaround_time / requested_time is
//!   cosched's slowdown;
//! - `success` 1 and `final_state` COMPLETED_SUCCESSFULLY: only finished jobs
//!   have records (Batsim also writes a job once it has completed); jobs still
//!   running or queued at a horizon or an interrupt are absent;
//! - `stretch`: Batsim's, turnaround_time / execution_time. It counts waiting
//!   only: a job slowed by sharing its CPUs has a longer execution_time and
//!   no larger stretch;
//! - `allocated_resources`: the CPUs of [`JobRecord::cpus`] as an interval set
//!   (`0-3 8`). Under time-sharing these overlap in time with other jobs';
//! - `consumed_energy`: -1, Batsim's value without energy; `metadata`: empty.

use crate::csv::{csv_field, float, int, text, to_csv, Column};
use cosched_sim::run::RunResult;
use cosched_sim::JobRecord;

/// The one workload of a cosched run, named as Batsim names its first.
pub const BATSIM_WORKLOAD_NAME: &str = "w0";

/// Batsim's final state of a job that ran to its end.
const COMPLETED_SUCCESSFULLY: &str = "COMPLETED_SUCCESSFULLY";

/// Batsim's energy figure when energy is not simulated.
const NO_ENERGY_J: f64 = -1.0;

/// A time in seconds rounded to whole microseconds, Batsim's printed precision.
#[derive(Clone, Copy)]
struct Micros(u64);

impl Micros {
    fn of_s(seconds: f64) -> Micros {
        Micros((seconds * 1e6).round() as u64)
    }

    fn since(self, earlier: Micros) -> Micros {
        Micros(self.0 - earlier.0)
    }

    /// Printed as C++'s `std::to_string(double)`: six decimals.
    fn text(self) -> String {
        format!("{}.{:06}", self.0 / 1_000_000, self.0 % 1_000_000)
    }
}

/// A ratio or other value printed with Batsim's six decimals.
fn batsim_num(value: f64) -> String {
    format!("{value:.6}")
}

/// A job's three instants, rounded once, from which every duration is taken.
struct Instants {
    submission: Micros,
    starting: Micros,
    finish: Micros,
}

impl Instants {
    fn of(job: &JobRecord) -> Instants {
        Instants {
            submission: Micros::of_s(job.arrival_s),
            starting: Micros::of_s(job.start_s),
            finish: Micros::of_s(job.finish_s),
        }
    }

    fn waiting(&self) -> Micros {
        self.starting.since(self.submission)
    }

    fn execution(&self) -> Micros {
        self.finish.since(self.starting)
    }

    fn turnaround(&self) -> Micros {
        self.finish.since(self.submission)
    }

    fn stretch(&self) -> f64 {
        self.turnaround().0 as f64 / self.execution().0 as f64
    }
}

fn batsim_columns() -> Vec<Column<JobRecord>> {
    vec![
        int("job_id", |j| j.job_number.to_string()),
        text("workload_name", |_| BATSIM_WORKLOAD_NAME.to_string()),
        text("profile", |j| csv_field(&j.job_type)),
        float("submission_time", |j| Instants::of(j).submission.text()),
        int("requested_number_of_resources", |j| j.tasks.to_string()),
        float("requested_time", |j| Micros::of_s(j.dedicated_s).text()),
        int("success", |_| "1".to_string()),
        text("final_state", |_| COMPLETED_SUCCESSFULLY.to_string()),
        float("starting_time", |j| Instants::of(j).starting.text()),
        float("execution_time", |j| Instants::of(j).execution().text()),
        float("finish_time", |j| Instants::of(j).finish.text()),
        float("waiting_time", |j| Instants::of(j).waiting().text()),
        float("turnaround_time", |j| Instants::of(j).turnaround().text()),
        float("stretch", |j| batsim_num(Instants::of(j).stretch())),
        text("allocated_resources", |j| j.cpus.to_string()),
        float("consumed_energy", |_| batsim_num(NO_ENERGY_J)),
        text("metadata", |_| String::new()),
    ]
}

/// Batsim's `jobs.csv` of one run: its finished jobs in the order they finished.
pub fn batsim_jobs_csv(result: &RunResult) -> String {
    to_csv(&batsim_columns(), &result.jobs)
}

#[cfg(test)]
mod tests {
    use super::*;
    use cosched_sim::CpuSet;

    fn job() -> JobRecord {
        JobRecord {
            job_number: 7,
            job_type: "J3".into(),
            tasks: 6,
            iterations: 10,
            arrival_s: 1.25,
            start_s: 2.0000004,
            finish_s: 12.5,
            wait_s: 0.7500004,
            execution_s: 10.4999996,
            response_s: 11.25,
            dedicated_s: 4.5,
            slowdown: 2.5,
            bounded_slowdown: 2.5,
            cpus: CpuSet::from_cpus([9, 0, 1, 2, 3, 8]),
        }
    }

    #[test]
    fn a_job_is_written_as_batsim_writes_it() {
        let text = to_csv(&batsim_columns(), &[job()]);
        assert_eq!(
            text,
            "job_id,workload_name,profile,submission_time,requested_number_of_resources,requested_time,success,\
             final_state,starting_time,execution_time,finish_time,waiting_time,turnaround_time,stretch,\
             allocated_resources,consumed_energy,metadata\n\
             7,w0,J3,1.250000,6,4.500000,1,COMPLETED_SUCCESSFULLY,2.000000,10.500000,12.500000,0.750000,11.250000,\
             1.071429,0-3 8-9,-1.000000,\n"
        );
    }
}
