//! A cluster of namespace nodes on this host, for `bench slowdown --nodes N`:
//! a controller and `N` agents, each agent in a network namespace of its own
//! (a veth on one bridge, as the nodes of a cluster hang off one switch) and
//! pinned to a CPU of its own. A node is then one CPU, and an MPI job's ranks
//! on different nodes talk over TCP, as on a cluster.

use crate::runtime::tail;
use cosched_munge::testing::PrivateMunged;
use cosched_runtime::trusted_source::CheckedCommand;
use cosched_runtime::wire::client::{CallError, Client};
use cosched_runtime::wire::protocol::{HistoryRequest, LogFile, StatusJob, SubmitRequest};
use std::ffi::OsStr;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Network namespaces `cosched-<tag>-<i>`, one per node, on one network: each has a veth link whose host end is
/// a port of the bridge `csb<tag>`. The bridge (the controller's host) is 10.<net>.0.1/24 and namespace `i` is
/// 10.<net>.0.<i + 2>/24, so the nodes reach the controller and each other (MPI ranks talk directly) with no
/// routing. Deleted on drop, the veth pairs with them.
///
/// The bridge is on the host ([`NamespaceNodes::create`], as the multi-node tests have it), or in a hub
/// namespace of its own ([`NamespaceNodes::create_isolated`]), where nothing of the host reaches the nodes:
/// no local user can talk to the controller's port or to the MPI processes root runs in them.
pub struct NamespaceNodes {
    names: Vec<String>,
    bridge: String,
    net: u32,
    hub: Option<String>,
}

fn ip(args: &[&str]) -> Result<(), String> {
    let out = Command::new("ip").args(args).output().map_err(|e| format!("ip: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!("ip {}: {}", args.join(" "), String::from_utf8_lossy(&out.stderr).trim()))
    }
}

impl NamespaceNodes {
    /// Make `count` namespaces and their network, with the bridge on the host (root). On failure, whatever was
    /// made is removed.
    pub fn create(count: usize) -> Result<NamespaceNodes, String> {
        Self::make(count, false)
    }

    /// As [`NamespaceNodes::create`], with the bridge in a hub namespace: run the controller there
    /// ([`NamespaceNodes::hub_command`]).
    pub fn create_isolated(count: usize) -> Result<NamespaceNodes, String> {
        Self::make(count, true)
    }

    fn make(count: usize, isolated: bool) -> Result<NamespaceNodes, String> {
        // Several sets may stand at once in one process: each takes its own number for its names and net.
        static SETS: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let set = SETS.fetch_add(1, std::sync::atomic::Ordering::Relaxed) % 100;
        let pid = std::process::id();
        let net = 100 + (pid * 7 + set) % 100; // 10.100–199 are rarely a host's own networks
        let tag = format!("{}{set:02}", pid % 100_000); // interface names hold 15 bytes at most
        let bridge = format!("csb{tag}");
        let hub = isolated.then(|| format!("cosched-{tag}-hub"));
        if let Some(hub) = &hub {
            ip(&["netns", "add", hub])?;
        }
        let mut made = NamespaceNodes { names: vec![], bridge: bridge.clone(), net, hub: hub.clone() };
        // `ip` in the bridge's namespace: the hub's, or the host's.
        let on_bridge = |args: &[&str]| match &hub {
            Some(hub) => ip(&[&["-n", hub.as_str()], args].concat()),
            None => ip(args),
        };
        on_bridge(&["link", "add", "name", &bridge, "type", "bridge"])?;
        on_bridge(&["addr", "add", &format!("{}/24", made.host_address()), "dev", &bridge])?;
        on_bridge(&["link", "set", &bridge, "up"])?;
        if hub.is_some() {
            on_bridge(&["link", "set", "lo", "up"])?;
        }
        for i in 0..count {
            let name = format!("cosched-{tag}-{i}");
            ip(&["netns", "add", &name])?;
            made.names.push(name.clone());
            let (host, inside) = (format!("csh{tag}{i}"), format!("csn{tag}{i}"));
            let host_side: Vec<&str> = match &hub {
                Some(hub) => vec!["link", "add", &host, "netns", hub],
                None => vec!["link", "add", &host],
            };
            ip(&[&host_side[..], &["type", "veth", "peer", "name", &inside, "netns", &name]].concat())?;
            on_bridge(&["link", "set", &host, "master", &bridge])?;
            on_bridge(&["link", "set", &host, "up"])?;
            ip(&["-n", &name, "addr", "add", &format!("10.{net}.0.{}/24", i + 2), "dev", &inside])?;
            ip(&["-n", &name, "link", "set", &inside, "up"])?;
            ip(&["-n", &name, "link", "set", "lo", "up"])?;
        }
        Ok(made)
    }

    /// The controller's address as seen from the namespaces.
    pub fn host_address(&self) -> String {
        format!("10.{}.0.1", self.net)
    }

    /// A command that runs `program` in the hub namespace (the host's network when there is none).
    pub fn hub_command(&self, program: impl AsRef<OsStr>) -> Command {
        match &self.hub {
            Some(hub) => {
                let mut command = Command::new("nsenter");
                command.arg(format!("--net=/run/netns/{hub}")).arg("--").arg(program);
                command
            }
            None => Command::new(program),
        }
    }

    /// A command that runs `program` inside namespace `i`, on a host named `hostname`, and on `cpu` alone when
    /// given (its children inherit that). Only the network and host names change (`nsenter --net`, then
    /// `unshare --uts`): an agent must still see the host's cgroup mounts, which `ip netns exec` would hide
    /// behind a fresh /sys. Each node has its own host name, as on a cluster, so an MPI launcher knows its own
    /// node among the job's hosts and starts no remote daemon there.
    pub fn command(&self, i: usize, hostname: &str, program: impl AsRef<OsStr>, cpu: Option<usize>) -> Command {
        let mut command = match cpu {
            Some(cpu) => {
                let mut taskset = Command::new("taskset");
                taskset.args(["-c", &cpu.to_string(), "nsenter"]);
                taskset
            }
            None => Command::new("nsenter"),
        };
        command.arg(format!("--net=/run/netns/{}", self.names[i])).args(["--", "unshare", "--uts", "--"]);
        command.args(["sh", "-c", "hostname \"$1\" && shift && exec \"$@\"", "sh", hostname]).arg(program);
        command
    }
}

impl Drop for NamespaceNodes {
    fn drop(&mut self) {
        for name in &self.names {
            let _ = ip(&["netns", "del", name]);
        }
        match &self.hub {
            Some(hub) => drop(ip(&["netns", "del", hub])), // the bridge goes with it
            None => drop(ip(&["link", "del", &self.bridge])),
        }
    }
}

const READY_TIMEOUT: Duration = Duration::from_secs(20);

/// A private cosched cluster on this host: a controller, one agent per namespace node, and a private MUNGE
/// realm (the agents and the MPI launcher's `cosched rsh` prove themselves with it). Stopped, its jobs killed,
/// its cgroups, namespaces and folder removed on drop.
pub struct ClusterInstance {
    controller: Child,
    agents: Vec<Child>,
    pub socket: PathBuf,
    dir: PathBuf,
    /// The nodes' names, in the order of their CPUs.
    pub nodes: Vec<String>,
    namespaces: Option<NamespaceNodes>,
    munge: Option<PrivateMunged>,
}

/// The CPUs this process may run on.
pub fn allowed_cpus() -> Vec<usize> {
    use nix::sched::{sched_getaffinity, CpuSet};
    let Ok(set) = sched_getaffinity(nix::unistd::Pid::from_raw(0)) else { return vec![] };
    (0..CpuSet::count()).filter(|&cpu| set.is_set(cpu).unwrap_or(false)).collect()
}

impl ClusterInstance {
    /// Start a cluster of `nodes` one-CPU nodes in `dir` (a new folder only root can change), with this gang
    /// slice and room for `max_jobs` jobs at once (gang rows and local multiprogramming level).
    pub fn start(cosched: &Path, dir: &Path, nodes: u32, slice_ms: f64, max_jobs: u32) -> Result<Self, String> {
        let cpus = allowed_cpus();
        if nodes as usize > cpus.len() {
            return Err(format!(
                "{nodes} nodes: each namespace node is a CPU of its own and this process may use {}",
                cpus.len()
            ));
        }
        let munge = PrivateMunged::start()?;
        let namespaces = NamespaceNodes::create_isolated(nodes as usize)?;
        static CLUSTERS: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let number = CLUSTERS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let names: Vec<String> = (0..nodes).map(|i| format!("bn{}-{number}-{i}", std::process::id())).collect();
        let mut cluster = ClusterInstance {
            controller: start_controller(cosched, dir, &namespaces, &munge, &names, slice_ms, max_jobs)?,
            agents: vec![],
            socket: dir.join("sock"),
            dir: dir.to_path_buf(),
            nodes: names,
            namespaces: Some(namespaces),
            munge: Some(munge),
        };
        cluster.start_agents(cosched, &cpus)?;
        cluster.wait_ready()?;
        Ok(cluster)
    }

    fn start_agents(&mut self, cosched: &Path, cpus: &[usize]) -> Result<(), String> {
        let (Some(namespaces), Some(munge)) = (&self.namespaces, &self.munge) else { return Ok(()) };
        let controller = format!("{}:{}", namespaces.host_address(), CONTROLLER_PORT);
        for (i, node) in self.nodes.iter().enumerate() {
            let state = self.dir.join(node);
            let log = log_file(&self.dir.join(format!("agent{i}.log")))?;
            let mut agent = namespaces.command(i, node, cosched, Some(cpus[i]));
            agent.process_group(0).stdin(Stdio::null()).stdout(log.try_clone().map_err(|e| e.to_string())?).stderr(log);
            agent.env("COSCHED_CONFIG", "none"); // the bench's own settings, never the site's
            agent.args(["agent", "--controller", &controller, "--node", node, "--cpus", "1", "--state-dir"]);
            agent.arg(&state).arg("--munge-socket").arg(munge.socket());
            self.agents.push(agent.spawn().map_err(|e| format!("starting agent {node}: {e}"))?);
        }
        Ok(())
    }

    fn wait_ready(&mut self) -> Result<(), String> {
        let start = Instant::now();
        loop {
            let connected = Client::local(&self.socket)
                .status()
                .map(|s| s.nodes.iter().filter(|n| n.connected).count())
                .unwrap_or(0);
            if connected == self.nodes.len() {
                return Ok(());
            }
            if let Ok(Some(status)) = self.controller.try_wait() {
                return Err(format!("the controller exited ({status}):\n{}", self.log_tail("controller.log")));
            }
            if start.elapsed() > READY_TIMEOUT {
                let logs: Vec<String> =
                    (0..self.nodes.len()).map(|i| self.log_tail(&format!("agent{i}.log"))).collect();
                return Err(format!(
                    "{connected} of {} agents connected after {READY_TIMEOUT:?}; their logs:\n{}",
                    self.nodes.len(),
                    logs.join("\n")
                ));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    fn log_tail(&self, name: &str) -> String {
        tail(&std::fs::read_to_string(self.dir.join(name)).unwrap_or_default(), 2000).to_string()
    }

    /// Submit `command` as an MPI job of one task on each node, run as this process's user in `cwd`, with
    /// `tmpdir` as its `TMPDIR`.
    pub fn submit_mpi(&self, command: &CheckedCommand, cwd: &Path, tmpdir: &Path, local: bool) -> Result<u64, String> {
        let utf8 = |path: &Path, what: &str| path.to_str().map(String::from).ok_or(format!("{what} is not UTF-8"));
        let cwd = utf8(cwd, "the folder the copies run in")?;
        let request = SubmitRequest {
            tasks: self.nodes.len() as u32,
            nodes: Some(self.nodes.len() as u32),
            local,
            mpi: true,
            env: mpi_environment(command, utf8(tmpdir, "a copy's TMPDIR")?),
            ..SubmitRequest::new(command.argv().to_vec(), cwd)
        };
        Ok(Client::local(&self.socket).submit(request).map_err(refused)?.job)
    }

    /// The jobs' records, once every one is over; `None` while one still runs. Asked of the history by the jobs'
    /// numbers: `status` lists an ended job only for `--keep-finished-s` after its end on the wall clock, which a
    /// step of the clock can pass at once.
    pub fn ended(&self, jobs: &[u64]) -> Result<Option<Vec<StatusJob>>, String> {
        let request =
            HistoryRequest { jobs: jobs.to_vec(), limit: Some(jobs.len() as u32), ..HistoryRequest::default() };
        let records = Client::local(&self.socket).history(request).map_err(refused)?.jobs;
        if records.len() != jobs.len() {
            return Err(format!("the controller's history no longer holds every job of {jobs:?}"));
        }
        Ok(records.iter().all(|j| j.state.is_over()).then_some(records))
    }

    /// The records of these jobs, which are over, once every node has given its CPU time at the end, or as they
    /// are after `timeout` (a node whose agent is gone never gives it).
    pub fn with_final_cpu_time(&self, jobs: Vec<StatusJob>, timeout: Duration) -> Result<Vec<StatusJob>, String> {
        let start = Instant::now();
        let mut records = jobs;
        while !records.iter().all(|j| j.cpu_final) && start.elapsed() < timeout {
            std::thread::sleep(Duration::from_millis(20));
            let ids: Vec<u64> = records.iter().map(|j| j.id).collect();
            records = self.ended(&ids)?.ok_or("a job that was over is not over")?;
        }
        Ok(records)
    }

    /// Kill these jobs (on a timeout or an interruption).
    pub fn kill(&self, jobs: &[u64]) {
        for &job in jobs {
            let _ = Client::local(&self.socket).kill(job);
        }
    }

    /// The standard output of the job's first task (rank 0), as far as `cosched logs` shows it.
    pub fn first_task_stdout(&self, job: u64) -> String {
        let Ok(reply) = Client::local(&self.socket).logs(job) else { return String::new() };
        reply
            .files
            .into_iter()
            .find_map(|file| match file {
                LogFile::Tail { tail, .. } if tail.rank == 0 && tail.stream == "out" => Some(tail.text),
                _ => None,
            })
            .unwrap_or_default()
    }

    /// Wait until every job of the cluster has ended (the next run's jobs need their room).
    pub fn wait_idle(&self, timeout: Duration) -> Result<(), String> {
        let start = Instant::now();
        loop {
            let status = Client::local(&self.socket).status().map_err(refused)?;
            if status.jobs.iter().all(|j| j.state.is_over()) {
                return Ok(());
            }
            if start.elapsed() > timeout {
                return Err(format!("the jobs of the previous run had not ended after {timeout:?}"));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

/// What an MPI launcher needs of the caller's environment: where its programs are, and the BLAS threads.
const MPI_ENVIRONMENT: &[&str] = &["PATH", "OPENBLAS_NUM_THREADS", "LD_LIBRARY_PATH"];

/// [`MPI_ENVIRONMENT`] as the checked command gives it (as root, only folders nobody else could change), and
/// the copy's `TMPDIR`.
fn mpi_environment(command: &CheckedCommand, tmpdir: String) -> Vec<(String, String)> {
    let mut environment: Vec<(String, String)> = Vec::new();
    for &name in MPI_ENVIRONMENT {
        let checked = command.environment().iter().find(|(n, _)| n == name);
        let value = match checked {
            Some((_, value)) => value.clone(),
            None => std::env::var(name).ok(),
        };
        environment.extend(value.map(|v| (name.to_string(), v)));
    }
    environment.push(("TMPDIR".into(), tmpdir));
    environment
}

/// The controller's port on the bridge, which only this cluster's namespaces reach.
const CONTROLLER_PORT: u16 = 7007;

fn start_controller(
    cosched: &Path,
    dir: &Path,
    namespaces: &NamespaceNodes,
    munge: &PrivateMunged,
    nodes: &[String],
    slice_ms: f64,
    max_jobs: u32,
) -> Result<Child, String> {
    let log = log_file(&dir.join("controller.log"))?;
    let rows = max_jobs.max(1).to_string();
    namespaces
        .hub_command(cosched)
        .process_group(0) // a Ctrl-C reaches the bench, which stops the cluster in order
        .env("COSCHED_CONFIG", "none")
        .args(["controller", "--monitor", "off", "--slice-ms", &slice_ms.to_string(), "--rows", &rows])
        .args(["--local-mpl", &rows, "--nodes", &nodes.join(",")])
        .args(["--tcp", &format!("{}:{CONTROLLER_PORT}", namespaces.host_address())])
        .arg("--munge-socket")
        .arg(munge.socket())
        .arg("--state-dir")
        .arg(dir)
        .arg("--socket")
        .arg(dir.join("sock"))
        .stdin(Stdio::null())
        .stdout(log.try_clone().map_err(|e| e.to_string())?)
        .stderr(log)
        .spawn()
        .map_err(|e| format!("starting {} controller: {e}", cosched.display()))
}

fn log_file(path: &Path) -> Result<std::fs::File, String> {
    std::fs::File::create(path).map_err(|e| format!("creating {}: {e}", path.display()))
}

fn refused(error: CallError) -> String {
    match error {
        CallError::Refused(reason) => format!("the controller refused: {reason}"),
        CallError::Link(e) => e,
    }
}

impl Drop for ClusterInstance {
    fn drop(&mut self) {
        if let Ok(status) = Client::local(&self.socket).status() {
            for pid in status.jobs.into_iter().filter(|j| !j.state.is_over()).flat_map(|j| j.pids) {
                let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), nix::sys::signal::Signal::SIGKILL);
            }
        }
        for child in self.agents.iter_mut().chain([&mut self.controller]) {
            let _ = child.kill();
            let _ = child.wait();
        }
        for node in &self.nodes {
            crate::runtime::remove_node_cgroups(node);
        }
        // The namespaces go once the processes in them are gone; munged last.
        drop(self.namespaces.take());
        drop(self.munge.take());
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
