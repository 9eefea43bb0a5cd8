//! The shell's side of Slurm time limits: the periodic pass runs squeue and scontrol (which may take seconds)
//! without the controller's lock; what to send and what its outcome means are the core's (`core::slurm_time`).

use super::Controller;
use crate::slurm_time::{read_jobs, update_limit, SlurmTimeSettings};

impl Controller {
    /// One pass (every `SlurmTimeSettings::period`): read what Slurm shows of the running Slurm jobs that are owed
    /// time or were granted some (for a resume by Slurm), and add to each end time the time out of its slots.
    /// One squeue for all jobs and one scontrol per job extended; a failure is shown in the job's status and
    /// logged, and the time stays owed.
    pub fn keep_slurm_time_limits(&self) {
        let Some(settings) = &self.settings.slurm_time else { return };
        let jobs = self.with_core(|core, now| core.slurm_jobs_to_extend(now));
        if jobs.is_empty() {
            return;
        }
        // Read before squeue runs: Slurm's suspended time computed from it is never more than the truth.
        let now_s = (crate::wire::jobs::unix_ms_now() / 1000) as i64;
        let ids: Vec<u32> = jobs.iter().map(|j| j.slurm_job).collect();
        match read_jobs(settings, &ids) {
            Ok(views) => {
                for job in &jobs {
                    self.extend_one(settings, job, views.get(&job.slurm_job), now_s);
                }
            }
            Err(e) => self.with_core(|core, now| core.slurm_read_failed(now, &jobs, &e)),
        }
    }

    fn extend_one(
        &self,
        settings: &SlurmTimeSettings,
        job: &super::core::slurm_time::Candidate,
        view: Option<&crate::slurm_time::SlurmJobView>,
        now_s: i64,
    ) {
        let Some(prepared) = self.with_core(|core, now| core.slurm_prepare(now, job, view, now_s)) else { return };
        let result = update_limit(settings, job.slurm_job, prepared.update);
        self.with_core(|core, now| core.slurm_updated(now, job, &prepared, result));
    }
}
