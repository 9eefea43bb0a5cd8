//! The slowdown experiment: `j` copies of a job started at the same moment on
//! the same CPUs under each policy, repeated, interleaved across policies.

use crate::cluster::ClusterInstance;
use crate::copies::{first_copy_stdout, run_copies, CopySpec};
use crate::policy::Policy;
use crate::runtime::RuntimeInstance;
use crate::slurm::{SlurmInstance, SlurmSetup};
pub use cosched_bench_report::slowdown::{summarize, Point, Sample, SlowdownReport};
use cosched_runtime::trusted_source::{check_file_nobody_else_could_change, CheckedCommand};
use cosched_runtime::wire::protocol::StatusJob;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

pub struct SlowdownConfig {
    /// What each copy runs, checked for root to run where root runs it (`CheckedCommand`).
    pub command: CheckedCommand,
    /// The folder the copies run in, which the command was checked in.
    pub cwd: PathBuf,
    /// Numbers of simultaneous copies; must include 1 (the baseline `t_1`).
    pub jobs: Vec<u32>,
    pub repeat: u32,
    /// Runs of one copy under the first policy before anything is measured, thrown away: the first run after a
    /// build or a quiet spell loads the program, its libraries and its data from cold caches.
    pub warmup: u32,
    pub policies: Vec<Policy>,
    /// CPUs each copy asks the scheduler for (cosched and Slurm).
    pub cpus_per_job: u32,
    /// 1: the copies run on this host as it is. More: on a cluster of this many namespace nodes of one CPU each
    /// (`crate::cluster`), each copy an MPI job with one rank per node.
    pub nodes: u32,
    /// The `cosched` program, started as a private runtime for local and gang.
    pub cosched_exe: PathBuf,
    /// `scripts/slurm`, for the Slurm policies.
    pub slurm_script: PathBuf,
    /// The cosched SPANK plugin (`clients/slurm`), for slurm+cosched.
    pub spank_plugin: PathBuf,
    /// Where each run's output and the runtimes' state go.
    pub work_dir: PathBuf,
    pub timeout: Duration,
    /// Set (by Ctrl-C) to stop: the copies running are killed, and the private runtimes and Slurm stopped.
    pub stop: Arc<AtomicBool>,
}

impl SlowdownConfig {
    pub fn validate(&self) -> Result<(), String> {
        if self.command.argv().is_empty() {
            return Err("no command to run (give it after --)".into());
        }
        if !self.jobs.contains(&1) {
            return Err("--jobs must include 1: t_1, one job alone, is what slowdowns are relative to".into());
        }
        if self.jobs.contains(&0) {
            return Err("--jobs: 0 copies is not an experiment".into());
        }
        if self.repeat == 0 || self.policies.is_empty() {
            return Err("--repeat and --policy need at least one value".into());
        }
        if self.policies.iter().any(Policy::uses_runtime) && !nix::unistd::geteuid().is_root() {
            return Err("the local, gang and slurm+cosched policies start a private cosched runtime, which \
                        needs root (cgroups); use --policy none as an ordinary user"
                .into());
        }
        if self.nodes == 0 {
            return Err("--nodes: a cluster has at least one node".into());
        }
        if self.nodes > 1 {
            if let Some(p) = self.policies.iter().find(|p| p.cosched_mode().is_none()) {
                return Err(format!(
                    "--nodes {}: {p} runs on this host only; local and gang run across nodes",
                    self.nodes
                ));
            }
            let cpus = crate::cluster::allowed_cpus().len();
            if self.nodes as usize > cpus {
                return Err(format!(
                    "--nodes {}: each namespace node is a CPU of its own, and this process may use {cpus}",
                    self.nodes
                ));
            }
            if self.cpus_per_job != self.nodes {
                return Err(format!("--nodes {}: each copy has one rank per node, {} CPUs", self.nodes, self.nodes));
            }
        }
        if self.policies.iter().any(Policy::uses_slurm) && !self.slurm_script.exists() {
            return Err(format!(
                "the Slurm policies need {} (run from the cosched checkout, or give --slurm-script)",
                self.slurm_script.display()
            ));
        }
        if self.policies.iter().any(|p| matches!(p, Policy::SlurmCosched { .. })) {
            if !self.spank_plugin.exists() {
                return Err(format!(
                    "slurm+cosched needs the SPANK plugin {} (make -C clients/slurm, or give --spank-plugin)",
                    self.spank_plugin.display()
                ));
            }
            for path in [&self.spank_plugin, &self.cosched_exe, &self.work_dir] {
                if path.to_string_lossy().contains(char::is_whitespace) {
                    return Err(format!("{}: a plugstack.conf line cannot hold a path with spaces", path.display()));
                }
            }
        }
        if nix::unistd::geteuid().is_root() {
            // Root runs the script and Slurm's daemons load the plugin as root: the one rule of CheckedCommand.
            if self.policies.iter().any(Policy::uses_slurm) {
                check_file_nobody_else_could_change(&self.slurm_script, "--slurm-script")?;
            }
            if self.policies.iter().any(|p| matches!(p, Policy::SlurmCosched { .. })) {
                check_file_nobody_else_could_change(&self.spank_plugin, "--spank-plugin")?;
            }
        }
        Ok(())
    }

    /// The warm-up runs, `(repeat, jobs, policy)` as in [`Self::schedule`]: one copy under the first policy,
    /// numbered after the measured repeats so that their logs (`runs/`) stay apart.
    pub fn warmups(&self) -> Vec<(u32, u32, Policy)> {
        let first = self.policies.first().copied();
        first.map_or(vec![], |policy| (0..self.warmup).map(|r| (self.repeat.saturating_add(r), 1, policy)).collect())
    }

    /// Runs in the order they are made: repeats outermost, then the policies, rotated each repeat so no policy
    /// always runs first, then `j`. A policy's runs of one repeat come together, so a private Slurm is set up
    /// again at most once per policy and repeat.
    pub fn schedule(&self) -> Vec<(u32, u32, Policy)> {
        let mut runs = Vec::new();
        for repeat in 0..self.repeat {
            for k in 0..self.policies.len() {
                let policy = self.policies[(k + repeat as usize) % self.policies.len()];
                for &jobs in &self.jobs {
                    runs.push((repeat, jobs, policy));
                }
            }
        }
        runs
    }
}

/// What a run of the experiment is: a warm-up (its sample thrown away), or the `done`-th of `total` measured.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Step {
    Warmup { done: usize, total: usize },
    Measured { done: usize, total: usize },
}

/// Run the whole experiment; `progress` sees each sample as it is measured
/// (with the number done and the total), so a caller can save it at once, and each warm-up's.
pub fn run(config: &SlowdownConfig, mut progress: impl FnMut(&Sample, Step)) -> Result<SlowdownReport, String> {
    config.validate()?;
    std::fs::create_dir_all(&config.work_dir).map_err(|e| format!("creating {}: {e}", config.work_dir.display()))?;
    let max_jobs = config.jobs.iter().copied().max().unwrap_or(1);
    let mut runtimes: BTreeMap<String, RuntimeInstance> = BTreeMap::new();
    let mut clusters: BTreeMap<String, ClusterInstance> = BTreeMap::new();
    // Declared after the runtimes, so it stops first: no Slurm job outlives the cosched that holds it.
    let mut slurm: Option<SlurmInstance> = None;
    let (warmups, schedule) = (config.warmups(), config.schedule());
    let mut samples = Vec::new();
    let mut record = |sample: Sample, done: usize| {
        if done < warmups.len() {
            progress(&sample, Step::Warmup { done: done + 1, total: warmups.len() });
        } else {
            progress(&sample, Step::Measured { done: done + 1 - warmups.len(), total: schedule.len() });
            samples.push(sample);
        }
    };
    for (done, &(repeat, jobs, policy)) in warmups.iter().chain(&schedule).enumerate() {
        let what = |label: &str| {
            if done < warmups.len() {
                format!("{label}, warm-up {}", done + 1)
            } else {
                format!("{label}, j = {jobs}, repeat {}", repeat + 1)
            }
        };
        if config.stop.load(Ordering::Relaxed) {
            return Err(INTERRUPTED.into());
        }
        let label = policy.to_string();
        if config.nodes > 1 {
            if !clusters.contains_key(&label) {
                clusters.insert(label.clone(), start_cluster(config, policy, max_jobs)?);
            }
            let sample = run_on_cluster(config, policy, jobs, repeat, &clusters[&label])
                .map_err(|e| format!("{}: {e}", what(&label)))?;
            record(sample, done);
            continue;
        }
        if policy.uses_runtime() && !runtimes.contains_key(&label) {
            let slice_ms = policy.gang_slice_ms().unwrap_or(crate::policy::DEFAULT_GANG_SLICE_MS);
            let dir = private_runtime_dir(&label)?;
            runtimes.insert(label.clone(), RuntimeInstance::start(&config.cosched_exe, &dir, slice_ms, max_jobs)?);
        }
        let runtime = runtimes.get(&label);
        if let Some(runtime) = runtime {
            runtime.wait_idle(PREVIOUS_RUN_END_TIMEOUT)?;
        }
        if policy.uses_slurm() {
            let setup = slurm_setup(config, policy, runtime);
            if slurm.as_ref().is_none_or(|s| s.setup != setup) {
                drop(slurm.take()); // stopped before the next one takes its place
                let dir = private_slurm_dir()?;
                let started = SlurmInstance::start(&config.slurm_script, &dir, setup);
                if started.is_err() {
                    let _ = std::fs::remove_dir_all(&dir);
                }
                slurm = Some(started?);
            }
        }
        let sample = run_one(config, policy, jobs, repeat, runtime, slurm.as_ref())
            .map_err(|e| format!("{}: {e}", what(&label)))?;
        record(sample, done);
    }
    drop(slurm);
    Ok(SlowdownReport {
        command: config.command.argv().to_vec(),
        cpus_per_job: config.cpus_per_job,
        nodes: config.nodes,
        repeat: config.repeat,
        points: summarize(&config.policies, &config.jobs, &samples),
        samples,
    })
}

/// A copy's `TMPDIR` on the cluster's nodes (one host): made with a random name that must not exist yet, 0700.
fn copy_scratch(index: u32) -> Result<tempfile::TempDir, String> {
    tempfile::Builder::new()
        .prefix(&format!("cosched-copy-{index}-"))
        .tempdir()
        .map_err(|e| format!("creating copy {index}'s TMPDIR in {}: {e}", std::env::temp_dir().display()))
}

/// A new folder for a private `cosched up` (state, socket, log), made with a random name that must not exist
/// yet: the daemon runs as root and refuses a folder another user could change, as `--out` may be. Short, for
/// the socket; `RuntimeInstance` removes it when it stops.
fn private_runtime_dir(label: &str) -> Result<PathBuf, String> {
    let dir = tempfile::Builder::new()
        .prefix(&format!("cosched-{}-", safe_name(label)))
        .tempdir()
        .map_err(|e| format!("making the private cosched's folder: {e}"))?;
    Ok(dir.keep())
}

/// A new folder for the private Slurm, made with a random name that must not exist yet (mkdtemp: nobody can
/// have made it first or plant a link where it will be), and short, since Slurm's sockets live in it and a
/// socket path has at most 108 bytes. `scripts/slurm start` makes it 0755; `SlurmInstance` removes it when it
/// stops.
fn private_slurm_dir() -> Result<PathBuf, String> {
    let dir = tempfile::Builder::new()
        .prefix("cosched-slurm-")
        .tempdir()
        .map_err(|e| format!("making the private Slurm's folder: {e}"))?;
    Ok(dir.keep())
}

/// The private Slurm a Slurm policy runs its copies under.
fn slurm_setup(config: &SlowdownConfig, policy: Policy, runtime: Option<&RuntimeInstance>) -> SlurmSetup {
    match (policy, runtime) {
        (Policy::SlurmCosched { .. }, Some(runtime)) => SlurmSetup::Cosched {
            // strict: a job cosched cannot take fails instead of running unsliced and spoiling the figures.
            plugin: format!(
                "required {} cosched={} socket={} strict",
                config.spank_plugin.display(),
                config.cosched_exe.display(),
                runtime.socket.display()
            ),
            node: runtime.node.clone(),
        },
        _ => SlurmSetup::Gang,
    }
}

fn run_one(
    config: &SlowdownConfig,
    policy: Policy,
    jobs: u32,
    repeat: u32,
    runtime: Option<&RuntimeInstance>,
    slurm: Option<&SlurmInstance>,
) -> Result<Sample, String> {
    let log_dir = config.work_dir.join(format!("{}-j{jobs}-r{}", safe_name(&policy.to_string()), repeat + 1));
    std::fs::create_dir_all(&log_dir).map_err(|e| format!("creating {}: {e}", log_dir.display()))?;
    let command = match slurm {
        Some(slurm) if policy.uses_slurm() => {
            CheckedCommand::check(&slurm.run_argv(config.cpus_per_job, config.command.argv()), &config.cwd, "srun")?
        }
        _ => config.command.clone(),
    };
    let spec = CopySpec {
        command: &command,
        log_dir: &log_dir,
        timeout: config.timeout,
        sample_memory: jobs == 1,
        stop: &config.stop,
    };
    let machine_before = crate::os::MachineCpuTicks::read()?;
    let measured = run_copies(&spec, jobs, |pid| match (runtime, policy.cosched_mode()) {
        (Some(rt), Some(mode)) => rt.register_process(pid, config.cpus_per_job, mode).map(|_| ()),
        _ => Ok(()),
    })?;
    let machine_cpu = crate::os::MachineCpuTicks::read()?.since(&machine_before);
    Ok(Sample {
        policy: policy.to_string(),
        jobs,
        repeat: repeat + 1,
        elapsed_s: measured.elapsed_s,
        copy_elapsed_s: measured.copy_elapsed_s,
        cpu_s: (!policy.uses_slurm()).then_some(measured.cpu_s),
        peak_rss_bytes: measured.peak_rss_bytes.filter(|_| !policy.uses_slurm()),
        app_report: last_json_line(&first_copy_stdout(&log_dir)),
        overlap: measured.overlap.and_then(|o| o.fraction()),
        colocated: measured.overlap.and_then(|o| o.colocated_fraction()),
        machine_cpu: Some(machine_cpu),
    })
}

/// A private cluster of `config.nodes` namespace nodes for one policy.
fn start_cluster(config: &SlowdownConfig, policy: Policy, max_jobs: u32) -> Result<ClusterInstance, String> {
    let slice_ms = policy.gang_slice_ms().unwrap_or(crate::policy::DEFAULT_GANG_SLICE_MS);
    let dir = private_runtime_dir(&policy.to_string())?;
    let started = ClusterInstance::start(&config.cosched_exe, &dir, config.nodes, slice_ms, max_jobs);
    if started.is_err() {
        let _ = std::fs::remove_dir_all(&dir);
    }
    started
}

/// `jobs` copies submitted to the cluster at once, each an MPI job with a rank on every node. A copy's time
/// runs from its submission to its end as the controller records them; the end is learnt at an agent's next
/// report, so up to 100 ms late (`docs/bench.md`). Its CPU time is its cgroups' at its end on every node.
fn run_on_cluster(
    config: &SlowdownConfig,
    policy: Policy,
    jobs: u32,
    repeat: u32,
    cluster: &ClusterInstance,
) -> Result<Sample, String> {
    cluster.wait_idle(PREVIOUS_RUN_END_TIMEOUT)?;
    let local = policy.cosched_mode() == Some(cosched_policy::Mode::Local);
    let machine_before = crate::os::MachineCpuTicks::read()?;
    let mut ids = Vec::new();
    // Each copy's own empty TMPDIR, as on one node: root's launchers would otherwise share /tmp, where anyone
    // may make the session folder their predictable names ask for (`ompi.<node>.0`) first.
    let scratch = (0..jobs).map(copy_scratch).collect::<Result<Vec<_>, String>>()?;
    for copy_tmp in &scratch {
        match cluster.submit_mpi(&config.command, &config.cwd, copy_tmp.path(), local) {
            Ok(id) => ids.push(id),
            Err(e) => {
                cluster.kill(&ids);
                return Err(e);
            }
        }
    }
    let records = wait_for_cluster_jobs(config, cluster, &ids)?;
    // Read once every job is over, up to an agent's report (100 ms) after the last one ended.
    let machine_cpu = crate::os::MachineCpuTicks::read()?.since(&machine_before);
    let records = cluster.with_final_cpu_time(records, FINAL_CPU_TIME_TIMEOUT)?;
    for record in &records {
        if record.exit_code != Some(0) {
            let out = cluster.first_task_stdout(record.id);
            return Err(format!(
                "job {} ended {} (exit {:?}{}); its rank 0 wrote:\n{}",
                record.id,
                record.state.name(),
                record.exit_code,
                record.error.as_deref().map_or(String::new(), |e| format!(", {e}")),
                crate::runtime::tail(&out, 2000)
            ));
        }
    }
    let first_submitted_ms = records.iter().map(|r| r.submitted_unix_ms).min().unwrap_or(0);
    let ended_ms = |r: &StatusJob| r.ended_unix_ms.unwrap_or(r.submitted_unix_ms);
    let last_ended_ms = records.iter().map(ended_ms).max().unwrap_or(0);
    Ok(Sample {
        policy: policy.to_string(),
        jobs,
        repeat: repeat + 1,
        elapsed_s: last_ended_ms.saturating_sub(first_submitted_ms) as f64 / 1e3,
        copy_elapsed_s: records.iter().map(|r| ended_ms(r).saturating_sub(r.submitted_unix_ms) as f64 / 1e3).collect(),
        // Not all given: a sum of what some nodes last reported would understate it.
        cpu_s: records.iter().all(|r| r.cpu_final).then(|| records.iter().map(|r| r.cpu_ns as f64 / 1e9).sum()),
        peak_rss_bytes: None,
        app_report: last_json_line(&cluster.first_task_stdout(ids[0])),
        overlap: None,
        colocated: None,
        machine_cpu: Some(machine_cpu),
    })
}

/// The records of the cluster's jobs `ids` once all are over; they are killed on a timeout or an interruption.
fn wait_for_cluster_jobs(
    config: &SlowdownConfig,
    cluster: &ClusterInstance,
    ids: &[u64],
) -> Result<Vec<StatusJob>, String> {
    let start = std::time::Instant::now();
    loop {
        match cluster.ended(ids) {
            Ok(Some(records)) => return Ok(records),
            Ok(None) => {}
            Err(e) => {
                cluster.kill(ids);
                return Err(e);
            }
        }
        if config.stop.load(Ordering::Relaxed) {
            cluster.kill(ids);
            return Err(INTERRUPTED.into());
        }
        if start.elapsed() > config.timeout {
            cluster.kill(ids);
            return Err(format!("the copies had not ended after {:?}; killed", config.timeout));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// How long the nodes of ended jobs may take to give their CPU times (each agent reports within 100 ms).
const FINAL_CPU_TIME_TIMEOUT: Duration = Duration::from_secs(5);

/// How long the jobs of a policy's previous run may take to end in its runtime (Slurm's epilog included).
const PREVIOUS_RUN_END_TIMEOUT: Duration = Duration::from_secs(60);

const INTERRUPTED: &str = "interrupted: the copies were killed and the private runtimes and Slurm stopped";

fn last_json_line(text: &str) -> Option<serde_json::Value> {
    let line = text.lines().rev().find(|l| !l.trim().is_empty())?;
    serde_json::from_str::<serde_json::Value>(line.trim()).ok().filter(|v| v.is_object())
}

fn safe_name(label: &str) -> String {
    label.chars().map(|c| if c.is_ascii_alphanumeric() { c } else { '-' }).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schedule_interleaves_and_rotates_policies() {
        let cwd = tempfile::tempdir().unwrap();
        let config = SlowdownConfig {
            command: CheckedCommand::check(&["true".into()], cwd.path(), "test").unwrap(),
            cwd: cwd.path().into(),
            jobs: vec![1, 2],
            repeat: 2,
            warmup: 1,
            policies: vec![Policy::None, Policy::Slurm],
            cpus_per_job: 1,
            nodes: 1,
            cosched_exe: "cosched".into(),
            slurm_script: "slurm".into(),
            spank_plugin: "cosched_spank.so".into(),
            work_dir: "/tmp".into(),
            timeout: Duration::from_secs(1),
            stop: Arc::default(),
        };
        let order: Vec<String> = config.schedule().iter().map(|(r, j, p)| format!("{r}{j}{p}")).collect();
        assert_eq!(order, ["01none", "02none", "01slurm", "02slurm", "11slurm", "12slurm", "11none", "12none"]);
        // One copy under the first policy, numbered after the measured repeats.
        assert_eq!(config.warmups(), [(2, 1, Policy::None)]);
    }

    #[test]
    fn a_report_line_is_found_after_other_output() {
        let text = "starting\n{\"app\":\"mm\",\"time_s\":1.5}\n\n";
        assert_eq!(last_json_line(text).unwrap()["time_s"], 1.5);
        assert!(last_json_line("done\n").is_none());
    }
}
