//! The controller's settings, and its parts that hold no I/O: the core (every decision), the figures it keeps,
//! and the simulation tester that drives the core from a seed.

pub mod core;
pub mod metrics;
pub mod simulation;
pub mod skew;

use crate::controller::metrics::MetricsAccess;
use cosched_policy::cluster::{Backfill, PlanSettings};
use std::path::PathBuf;
use std::time::Duration;

#[derive(Clone, Debug)]
pub struct ControllerSettings {
    pub state_dir: PathBuf,
    pub slice_ns: u64,
    pub plan: PlanSettings,
    /// A gang job that used no CPU for this long runs outside the matrix.
    pub idle_revert: Duration,
    /// ... and after this long it leaves the gang database for good (becomes local).
    pub idle_forget: Duration,
    pub admin_uids: Vec<u32>,
    /// Between SIGTERM and SIGKILL when a job is killed (Slurm's KillWait).
    pub kill_wait: Duration,
    /// Jobs that ended longer ago than this leave `status` (their records stay, for `history`).
    pub keep_finished: Duration,
    /// Jobs that ended longer ago than this leave the history and the database (sacct's purge).
    pub keep_history: Duration,
    /// Hide other users' command lines from users who are not administrators (Slurm's PrivateData=jobs).
    pub private_data: bool,
    /// Whether the monitor serves `/metrics` (without a token).
    pub metrics: MetricsAccess,
    /// The cluster's nodes (`--nodes`, and `cosched up`'s own): an agent naming any other node is refused.
    pub nodes: Vec<String>,
    /// Bounds on jobs not over and on remote commands waiting (Slurm's MaxSubmitJobs and MaxJobCount).
    pub job_limits: JobLimits,
    /// A registered job no process has joined ends this long after its registration (a Slurm job waits for its
    /// epilog instead).
    pub empty_job_grace: Duration,
    /// Where Slurm is, to add to each Slurm job's end time the time it spends out of its slots (`None`: never).
    pub slurm_time: Option<crate::slurm_time::SlurmTimeSettings>,
}

/// How many jobs and waiting remote commands the controller holds: the volume one user (or all together) may put
/// on it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct JobLimits {
    /// Jobs not over of one user (Slurm's `MaxSubmitJobs`).
    pub per_user: usize,
    /// Jobs not over of all users (Slurm's `MaxJobCount`).
    pub total: usize,
    /// `exec` requests (`cosched rsh`) of one user waiting for their commands to end. Each holds one of that
    /// user's connections, so this stays below the per-user connection bound and leaves room for other requests.
    pub waiting_execs_per_user: usize,
}

impl Default for JobLimits {
    fn default() -> JobLimits {
        JobLimits { per_user: 1_000, total: 10_000, waiting_execs_per_user: 96 }
    }
}

/// The largest job id: the database's keys are signed 64-bit integers. A controller that has given it out refuses
/// new jobs rather than wrap around to ids in use.
pub const MAX_JOB_ID: u64 = i64::MAX as u64;

/// The most CPUs an agent may offer (Linux's largest `NR_CPUS`): the plan holds a cell per CPU and row.
pub const MAX_CPUS_PER_NODE: u32 = 8192;

/// What `cosched controller` and `cosched up` run with when no flag says otherwise (the flags take their defaults
/// from here).
impl Default for ControllerSettings {
    fn default() -> ControllerSettings {
        ControllerSettings {
            state_dir: PathBuf::from("/var/lib/cosched"),
            slice_ns: cosched_policy::slice::DEFAULT_SLICE_NS,
            plan: PlanSettings {
                rules: cosched_policy::cluster::PlanRules::COSCHED,
                rows: 4,
                local_mpl: 4,
                gang_cpu_share: 1.0,
                over_allocation: 0.0,
                backfill: Backfill::None,
            },
            // The LLNL gang scheduler's: 10 minutes without CPU use reverts, 2 hours forgets.
            idle_revert: Duration::from_secs(600),
            idle_forget: Duration::from_secs(7_200),
            admin_uids: vec![],
            // Flux's grace; Slurm's KillWait is 30 s.
            kill_wait: Duration::from_secs(5),
            // Slurm's MinJobAge.
            keep_finished: Duration::from_secs(300),
            // Slurm keeps job records for ever unless told to purge; a month bounds the memory history takes.
            keep_history: Duration::from_secs(30 * 86_400),
            private_data: true,
            metrics: MetricsAccess::Public,
            nodes: vec![],
            job_limits: JobLimits::default(),
            empty_job_grace: Duration::from_secs(60),
            slurm_time: Some(crate::slurm_time::SlurmTimeSettings::default()),
        }
    }
}

impl ControllerSettings {
    /// How often the controller does its periodic work (`ControllerCore::tick`): every slice, but not more often
    /// than every 50 ms.
    pub fn tick_period(&self) -> Duration {
        Duration::from_nanos(self.slice_ns.max(50_000_000))
    }

    pub fn status_path(&self) -> PathBuf {
        self.state_dir.join("status.json")
    }
}
