//! A private cosched runtime (`cosched up`) for the copies of an experiment,
//! and the calls that register a copy with it.

use cosched_policy::Mode;
use cosched_runtime::wire::client::{CallError, Client};
use cosched_runtime::wire::protocol::RegisterRequest;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const READY_TIMEOUT: Duration = Duration::from_secs(15);

/// A `cosched up` started for this experiment, with its own state directory,
/// socket and node name; stopped (and its cgroups removed) on drop.
pub struct RuntimeInstance {
    child: Child,
    pub socket: PathBuf,
    dir: PathBuf,
    /// The agent's node name (a Slurm node of that name hands its jobs to it).
    pub node: String,
}

impl RuntimeInstance {
    /// Start `cosched up` with this slice and room for `max_jobs` jobs at once
    /// (gang rows and local multiprogramming level).
    pub fn start(cosched: &Path, dir: &Path, slice_ms: f64, max_jobs: u32) -> Result<RuntimeInstance, String> {
        std::fs::create_dir_all(dir).map_err(|e| format!("creating {}: {e}", dir.display()))?;
        // Short: Slurm puts the node name in socket paths, which are limited to 108 bytes.
        static INSTANCES: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let instance = INSTANCES.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let node = format!("bench-{}-{instance}", std::process::id());
        let socket = dir.join("sock");
        let log_path = dir.join("cosched-up.log");
        let log = std::fs::File::create(&log_path).map_err(|e| format!("creating {}: {e}", log_path.display()))?;
        let rows = max_jobs.max(1).to_string();
        let child = Command::new(cosched)
            .env("COSCHED_CONFIG", "none") // a measurement's own settings, never the site's
            .args(["up", "--monitor", "off", "--node", &node, "--slice-ms", &slice_ms.to_string()])
            .args(["--rows", &rows, "--local-mpl", &rows])
            .arg("--state-dir")
            .arg(dir)
            .arg("--socket")
            .arg(&socket)
            .stdin(Stdio::null())
            .stdout(log.try_clone().map_err(|e| e.to_string())?)
            .stderr(log)
            .spawn()
            .map_err(|e| format!("starting {} up: {e}", cosched.display()))?;
        let mut instance = RuntimeInstance { child, socket, dir: dir.to_path_buf(), node };
        instance.wait_ready(&log_path)?;
        Ok(instance)
    }

    fn wait_ready(&mut self, log_path: &Path) -> Result<(), String> {
        let start = Instant::now();
        loop {
            if let Ok(status) = Client::local(&self.socket).status() {
                if status.nodes.iter().any(|n| n.connected) {
                    return Ok(());
                }
            }
            if let Ok(Some(status)) = self.child.try_wait() {
                let log = std::fs::read_to_string(log_path).unwrap_or_default();
                return Err(format!("cosched up exited ({status}) before it was ready:\n{}", tail(&log, 2000)));
            }
            if start.elapsed() > READY_TIMEOUT {
                return Err(format!("cosched up not ready after {READY_TIMEOUT:?}; see {}", log_path.display()));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Wait until every job of this runtime has ended. A job's end reaches the controller shortly after its last
    /// process exits (the agent's next report), and the next run's jobs need its room free.
    pub fn wait_idle(&self, timeout: Duration) -> Result<(), String> {
        let start = Instant::now();
        loop {
            let status = Client::local(&self.socket).status().map_err(refused)?;
            let running: Vec<u64> = status.jobs.iter().filter(|j| !j.state.is_over()).map(|j| j.id).collect();
            if running.is_empty() {
                return Ok(());
            }
            if start.elapsed() > timeout {
                return Err(format!("the jobs {running:?} of the previous run had not ended after {timeout:?}"));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Register a job of `cpus` CPUs on this node and move `pid` (and so its
    /// future children) into it; returns the job id once the agent has moved it.
    pub fn register_process(&self, pid: u32, cpus: u32, mode: Mode) -> Result<u64, String> {
        let register = RegisterRequest {
            class: "batch".into(),
            cpus_per_node: cpus,
            min_cpus: 0,
            mem_bytes: 0,
            node: Some(self.node.clone()),
            local: mode == Mode::Local,
        };
        let client = Client::local(&self.socket);
        let job = client.register(register).map_err(refused)?.job;
        client.add_pid(job, pid as i32, Some(self.node.clone())).map_err(refused)?;
        Ok(job)
    }
}

impl Drop for RuntimeInstance {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        remove_node_cgroups(&self.node);
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Remove a stopped agent's cgroups: its jobs' (their processes killed; a killed process leaves its cgroup
/// a moment later, so tried for up to 5 s) and its own.
pub fn remove_node_cgroups(node: &str) {
    let Ok(groups) = cosched_runtime::agent::freezer::JobGroups::open(node, None) else { return };
    let start = Instant::now();
    loop {
        let jobs = groups.existing_jobs().unwrap_or_default();
        for &job in &jobs {
            let _ = groups.signal(job, nix::sys::signal::Signal::SIGKILL);
            let _ = groups.remove(job);
        }
        if jobs.is_empty() || start.elapsed() > Duration::from_secs(5) {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = groups.remove_agent_dirs();
}

fn refused(error: CallError) -> String {
    match error {
        CallError::Refused(reason) => format!("the controller refused: {reason}"),
        CallError::Link(e) => e,
    }
}

/// The last `max_bytes` of a text, cut at a character boundary.
pub fn tail(text: &str, max_bytes: usize) -> &str {
    let mut start = text.len().saturating_sub(max_bytes);
    while !text.is_char_boundary(start) {
        start += 1;
    }
    &text[start..]
}
