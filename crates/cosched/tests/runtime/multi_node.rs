#![allow(clippy::disallowed_methods)] // tests of the real runtime read the real clock
//! A controller and three agents as separate processes over TCP, each agent in
//! a network namespace of its own linked to the host by a veth pair (on
//! loopback, with a loud note, where namespaces cannot be made). One host: the
//! agents' slices are aligned to the same clock.

use crate::harness::*;
use cosched_bench::cluster::NamespaceNodes;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

struct Cluster {
    /// The realm's munged (every emulated host shares it: its socket is a file, outside the network namespaces).
    _munge: cosched_munge::testing::PrivateMunged,
    controller: Child,
    agents: Vec<Child>,
    dir: PathBuf,
    socket: PathBuf,
    nodes: Vec<String>,
    /// Declared last: the namespaces go once the processes in them are gone.
    namespaces: Option<NamespaceNodes>,
}

impl Drop for Cluster {
    fn drop(&mut self) {
        for pid in status_of(&self.socket).into_iter().flat_map(|s| s.jobs).flat_map(|j| j.pids) {
            let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), nix::sys::signal::Signal::SIGKILL);
        }
        for child in self.agents.iter_mut().chain([&mut self.controller]) {
            let _ = child.kill();
            let _ = child.wait();
        }
        for node in &self.nodes {
            remove_agent_cgroups(node);
        }
    }
}

/// The cluster's slice: long enough that a switch delayed by a loaded machine still ends well inside it.
const SLICE_MS: u64 = 100;

/// Samples of whether each node's process of one gang runs, taken only while the wall clock is between 20 % and
/// 80 % of a slice (checked before and after reading `/proc`): (samples where all nodes agree, samples where not).
fn sample_mid_slice(per_node: &[Vec<i32>], slice: Duration, duration: Duration) -> (usize, usize) {
    let slice_ns = slice.as_nanos() as u64;
    let inside = || {
        let into = cosched_runtime::agent::switcher::realtime_ns() % slice_ns;
        (slice_ns / 5..slice_ns * 4 / 5).contains(&into)
    };
    let (mut agree, mut disagree) = (0, 0);
    let start = std::time::Instant::now();
    while start.elapsed() < duration {
        std::thread::sleep(Duration::from_millis(1));
        if !inside() {
            continue;
        }
        let states: Vec<bool> = per_node.iter().map(|p| any_running(p)).collect();
        if !inside() {
            continue;
        }
        if states.iter().all(|&r| r == states[0]) {
            agree += 1;
        } else {
            disagree += 1;
        }
    }
    (agree, disagree)
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

fn start_cluster(agents: usize) -> Cluster {
    let dir = fresh_dir("cosched-cluster");
    let key = dir.join("key");
    write_agents_key(&key);
    let munge = private_munged();
    let munge_socket = munge.socket().to_str().unwrap().to_string();
    let socket = dir.join("sock");
    let namespaces = NamespaceNodes::create(agents)
        .map_err(|e| eprintln!("NOTE: no network namespaces ({e}): the agents connect over loopback instead"))
        .ok();
    let port = free_port();
    // The cluster's node names, which the controller's configuration lists.
    let nodes: Vec<String> = (0..agents).map(|i| unique(&format!("a{i}"))).collect();
    let (listen, controller_address): (String, Vec<String>) = match &namespaces {
        Some(ns) => (format!("0.0.0.0:{port}"), vec![format!("{}:{port}", ns.host_address()); agents]),
        None => (format!("127.0.0.1:{port}"), vec![format!("127.0.0.1:{port}"); agents]),
    };
    let s = |p: &PathBuf| p.to_str().unwrap().to_string();
    let controller = spawn_logged(
        &[
            "controller",
            "--state-dir",
            &s(&dir),
            "--socket",
            &s(&socket),
            "--tcp",
            &listen,
            "--key-file",
            &s(&key),
            "--munge-socket",
            &munge_socket,
            "--monitor",
            "off",
            "--slice-ms",
            &SLICE_MS.to_string(),
            "--nodes",
            &nodes.join(","),
        ],
        &dir.join("controller.log"),
    );
    wait_for("the controller", Duration::from_secs(10), || client_as(&socket, &["status"], None).status.success());
    let mut children = vec![];
    for (i, (address, node)) in controller_address.iter().zip(&nodes).enumerate() {
        let state = dir.join(node);
        let log = std::fs::File::create(dir.join(format!("agent{i}.log"))).unwrap();
        let mut agent = match &namespaces {
            Some(ns) => ns.command(i, node, COSCHED, None),
            None => Command::new(COSCHED),
        };
        agent.stdin(Stdio::null()).stdout(log.try_clone().unwrap()).stderr(log);
        agent.args(["agent", "--controller", address, "--node", node, "--cpus", "1", "--state-dir", &s(&state)]);
        // The last agent proves itself with the agents' key, the others with MUNGE; users of every node prove
        // themselves with MUNGE (an MPI launcher's `cosched rsh`).
        agent.args(["--munge-socket", &munge_socket]);
        if i + 1 == agents {
            agent.args(["--key-file", &s(&key)]);
        }
        children.push(agent.spawn().unwrap());
    }
    let cluster = Cluster { _munge: munge, controller, agents: children, dir, socket, nodes, namespaces };
    wait_for("the agents to connect", Duration::from_secs(10), || {
        status_of(&cluster.socket).is_some_and(|s| s.nodes.iter().filter(|n| n.connected).count() == agents)
    });
    cluster
}

fn submit(cluster: &Cluster, tasks: &str, nodes: &str) -> u64 {
    let out = client_as(
        &cluster.socket,
        &["submit", "--json", "-n", tasks, "--nodes", nodes, "--", "timeout", "120", "sh", "-c", "while :; do :; done"],
        None,
    );
    assert!(out.status.success(), "{out:?}");
    serde_json::from_slice::<SubmitReply>(&out.stdout).unwrap().job
}

/// What `cosched status --json` prints for the controller at `socket` (`None`: no answer).
fn status_of(socket: &std::path::Path) -> Option<StatusReply> {
    let out = client_as(socket, &["status", "--json"], None);
    serde_json::from_slice(&out.stdout).ok()
}

/// The spinning `sh` processes of a job, grouped by node.
fn spinners_by_node(cluster: &Cluster, job: u64, nodes: usize) -> Vec<Vec<i32>> {
    let mut by_node = vec![];
    wait_for("the job's processes on every node", Duration::from_secs(10), || {
        let status = status_of(&cluster.socket);
        let Some(j) = status.and_then(|s| s.jobs.into_iter().find(|j| j.id == job)) else {
            return false;
        };
        let spinners: Vec<i32> = j.pids.into_iter().filter(|&p| is_shell(p)).collect();
        by_node = spinners.iter().map(|&p| vec![p]).collect();
        by_node.len() == nodes
    });
    by_node
}

#[test]
fn three_agents_switch_together_and_survive_the_loss_of_one() {
    if skip_unless_root("three_agents_switch_together") {
        return;
    }
    let _machine = whole_machine();
    let mut cluster = start_cluster(3);
    if cluster.namespaces.is_some() {
        let own = std::fs::read_link("/proc/self/ns/net").unwrap();
        for agent in &cluster.agents {
            let theirs = std::fs::read_link(format!("/proc/{}/ns/net", agent.id())).unwrap();
            assert_ne!(theirs, own, "an agent runs in the test's own network namespace");
        }
    }
    let a = submit(&cluster, "3", "3");
    let b = submit(&cluster, "3", "3");
    let pa = spinners_by_node(&cluster, a, 3);
    let pb = spinners_by_node(&cluster, b, 3);
    // Per node, the strict switch order: A and B never run at once.
    for node in 0..3 {
        let s = sample_gangs(&[pa[node].clone(), pb[node].clone()], Duration::from_millis(700));
        assert_eq!(
            s.overlap, 0,
            "node {node}: A {:?} and B {:?} ran at once in {} of {} samples",
            pa[node], pb[node], s.overlap, s.consistent
        );
        let used = gang_cpu_ticks_until_each_ran(&[pa[node].clone(), pb[node].clone()], Duration::from_secs(20));
        assert!(used.iter().all(|&t| t > 0), "node {node}: no rotation (CPU ticks of A and B: {used:?})");
    }
    // Across nodes, the slots line up: A's processes agree in every sample taken well inside a slice. Samples
    // near a boundary are skipped (a node may finish its switch a few ms after another on a loaded machine: that
    // spread is `cosched bench switch`'s to measure, not a test's); slots out of line would disagree in about
    // half of the samples or more.
    let (agree, disagree) = sample_mid_slice(&pa, Duration::from_millis(SLICE_MS), Duration::from_secs(2));
    assert!(agree >= 20, "too few samples inside slices ({agree}): the sampler did not run");
    assert!(disagree * 10 < agree, "nodes out of step in {disagree} of {} mid-slice samples", agree + disagree);
    // The agents' own record of where each switch began pairs slices across all three nodes (the skew itself is
    // printed for the reader; `cosched bench switch` gives its distribution).
    let skew = status_of(&cluster.socket).unwrap().slice_start_skew;
    eprintln!("slice-start skew between the 3 agents: {skew:?}");
    assert!(skew.count >= 10, "the agents' slice starts do not pair up: {skew:?}");

    // Logs live with each agent; `cosched logs` gathers them from all nodes.
    let out = client_as(
        &cluster.socket,
        &["submit", "--json", "-n", "3", "--nodes", "3", "--", "sh", "-c", "echo rank $COSCHED_RANK on $COSCHED_NODE"],
        None,
    );
    let echo = serde_json::from_slice::<SubmitReply>(&out.stdout).unwrap().job.to_string();
    let logs = || {
        let out = client_as(&cluster.socket, &["logs", &echo], None);
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr)
    };
    wait_for("every rank's output in cosched logs", Duration::from_secs(10), || {
        let text = logs();
        (0..3).all(|r| text.contains(&format!("rank {r} on "))) && cluster.nodes.iter().all(|n| text.contains(n))
    });

    // Stop one agent: its watchdog lets its processes run; the others keep switching.
    let lost = cluster.agents.remove(2);
    let mut lost = lost;
    let _ = lost.kill();
    let _ = lost.wait();
    wait_for("the lost node's processes to run freely", Duration::from_secs(10), || {
        all_progress(&[pa[2][0], pb[2][0]], Duration::from_millis(200))
    });
    for node in 0..2 {
        let s = sample_gangs(&[pa[node].clone(), pb[node].clone()], Duration::from_millis(700));
        assert_eq!(s.overlap, 0, "node {node} stopped switching in order after the loss of another agent");
        assert!(s.running[0] > 0 && s.running[1] > 0, "node {node} stopped a gang for good");
    }
    let text = logs();
    // The two surviving nodes' ranks are there (which ranks depends on the order the agents connected), and the
    // lost node is listed as unavailable.
    let ranks_shown = (0..3).filter(|r| text.contains(&format!("rank {r} on "))).count();
    assert!(ranks_shown >= 2 && text.contains("logs unavailable"), "logs without the lost node:\n{text}");
    let _ = &cluster.dir;
}

/// The user MPI jobs run as here: an ordinary one, as at a site.
const NOBODY: u32 = 65534;

/// The two families of MPI: each with its build of `apps/` and its launcher, as a user types it.
#[derive(Clone, Copy)]
pub(crate) enum Mpi {
    OpenMpi,
    Mpich,
}

impl Mpi {
    /// `apps/` built once with this MPI's compiler (`make openmpi`, `make mpich`; scripts/setup installs both)
    /// into a folder every user can read: the folder holding `mpi_mm`.
    pub(crate) fn programs(self) -> PathBuf {
        static OPEN_MPI: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
        static MPICH: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
        let (built, target) = match self {
            Mpi::OpenMpi => (&OPEN_MPI, "openmpi"),
            Mpi::Mpich => (&MPICH, "mpich"),
        };
        let build = built.get_or_init(|| {
            let build = fresh_dir("cosched-mpi-apps");
            let apps = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../apps");
            let mut make = Command::new("make");
            make.arg("-s").arg("-C").arg(&apps).arg(format!("BUILD={}", build.display())).arg(target);
            let out = make.output().expect("make runs (scripts/setup installs it)");
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert!(out.status.success(), "make {target} in apps/ (scripts/setup installs both MPIs): {stderr}");
            build
        });
        match self {
            Mpi::OpenMpi => build.clone(),
            Mpi::Mpich => build.join("mpich"),
        }
    }

    /// The launcher as its user types it on one node: Debian's `mpirun` is Open MPI's, MPICH's is
    /// `mpiexec.mpich` (Hydra).
    fn launcher(self) -> &'static str {
        match self {
            Mpi::OpenMpi => "mpirun",
            Mpi::Mpich => "mpiexec.mpich",
        }
    }
}

/// The processes named `name` in the job's cgroup on each node (the agents' own record of where they run).
fn processes_by_node(cluster: &Cluster, job: u64, name: &str) -> Vec<Vec<i32>> {
    let on_node = |node: &String| {
        let groups = cosched_runtime::agent::freezer::JobGroups::open(node, None).unwrap();
        groups.pids(job).unwrap_or_default().into_iter().filter(|&p| comm(p) == name).collect::<Vec<i32>>()
    };
    cluster.nodes.iter().map(on_node).collect()
}

/// Every process in the job's cgroup on each node (pid, state, command line), for a failure message.
fn job_processes_by_node(cluster: &Cluster, job: u64) -> String {
    let mut text = String::new();
    for node in &cluster.nodes {
        let groups = cosched_runtime::agent::freezer::JobGroups::open(node, None).unwrap();
        text += &format!("{node}:\n");
        for pid in groups.pids(job).unwrap_or_default() {
            let state = process_state(pid).unwrap_or('?');
            let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
            let cmdline: String = String::from_utf8_lossy(&cmdline).replace('\0', " ").chars().take(160).collect();
            text += &format!("  {pid} {state} {cmdline}\n");
        }
    }
    text + &format!("logs: {}", cluster.dir.display())
}

#[test]
fn an_unmodified_mpi_program_runs_across_three_nodes_as_one_gang() {
    if skip_unless_root("an_unmodified_mpi_program_runs_across_three_nodes") {
        return;
    }
    runs_across_three_nodes_as_one_gang(Mpi::OpenMpi);
}

#[test]
fn an_unmodified_mpich_program_runs_across_three_nodes_as_one_gang() {
    if skip_unless_root("an_unmodified_mpich_program_runs_across_three_nodes") {
        return;
    }
    runs_across_three_nodes_as_one_gang(Mpi::Mpich);
}

#[test]
fn an_mpich_launcher_whose_remote_shell_fails_ends_the_job_at_once() {
    if skip_unless_root("an_mpich_launcher_whose_remote_shell_fails_ends_the_job_at_once") {
        return;
    }
    let cluster = start_cluster(3);
    // The launcher's `cosched rsh` cannot prove its user (no munged there): no daemon starts on the other nodes.
    let mm = Mpi::Mpich.programs().join("mpi_mm");
    let command = ["env", "COSCHED_MUNGE_SOCKET=/nonexistent/munge.socket", "mpiexec.mpich", mm.to_str().unwrap()];
    let mut args = vec!["submit", "--json", "--mpi", "-n", "3", "--nodes", "3", "--"];
    args.extend(command);
    let out = client_as(&cluster.socket, &args, Some(NOBODY));
    assert!(out.status.success(), "{out:?}");
    let job = serde_json::from_slice::<SubmitReply>(&out.stdout).unwrap().job;
    // Hydra waited for ever for its daemons (the job stayed running until killed); now the failed remote shell
    // ends it. 60 s is a bound for a loaded machine, not a measure.
    let ended = || status_of(&cluster.socket)?.jobs.into_iter().find(|j| j.id == job).filter(|j| j.state.is_over());
    let start = std::time::Instant::now();
    while ended().is_none() {
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "the MPI job still runs 60 s after its remote shell failed; what each node holds:\n{}",
            job_processes_by_node(&cluster, job)
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let record = ended().unwrap();
    let logs = client_as(&cluster.socket, &["logs", &job.to_string()], None);
    let text = String::from_utf8_lossy(&logs.stdout);
    assert_eq!(record.state.name(), "failed", "{record:?}\n{text}");
    assert!(text.contains("cosched rsh: ending the MPI launcher"), "the job's log says why:\n{text}");
}

/// `mpi_mm` of `mpi`, submitted by an ordinary user across three agents beside a spinning gang job: every rank
/// in its node's job cgroup, never running at once with the other gang, and the program's own check passed.
fn runs_across_three_nodes_as_one_gang(mpi: Mpi) {
    let _machine = whole_machine();
    let cluster = start_cluster(3);
    if cluster.namespaces.is_none() {
        // Over loopback every "node" is this host: the launcher places ranks by host name and cannot tell them apart.
        let why = "needs a network namespace per node, which could not be made";
        cosched_runtime::testing::say_skipped("an MPI job across three nodes", why);
        return;
    }
    let mm = mpi.programs().join("mpi_mm");
    // The launcher as its user types it: no host list, no remote shell, no rank count (one per CPU of the job).
    let launcher = mpi.launcher();
    let command = ["env", "OPENBLAS_NUM_THREADS=1", launcher, mm.to_str().unwrap(), "--n", "768", "--repeat", "100"];
    let mut args = vec!["submit", "--json", "--mpi", "-n", "3", "--nodes", "3", "--"];
    args.extend(command);
    let out = client_as(&cluster.socket, &args, Some(NOBODY));
    assert!(out.status.success(), "{out:?}");
    let job = serde_json::from_slice::<SubmitReply>(&out.stdout).unwrap().job;
    let spinner = submit(&cluster, "3", "3");

    // Every rank runs inside the job's cgroup on its own node: one per node, started by the launcher on its own
    // node and by the daemons it started through cosched rsh on the others.
    let mut ranks = vec![];
    let start = std::time::Instant::now();
    loop {
        ranks = processes_by_node(&cluster, job, "mpi_mm");
        if ranks.iter().all(|r| r.len() == 1) {
            break;
        }
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "{launcher}: no rank of the MPI job on every node within 30 s; what each node holds:\n{}",
            job_processes_by_node(&cluster, job)
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    // The spinning job may start after the ranks (MPICH's start within a second).
    let mut spinners = vec![];
    wait_for("one task of the spinning job in its cgroup on every node", Duration::from_secs(30), || {
        spinners = processes_by_node(&cluster, spinner, "sh");
        spinners.iter().all(|s| s.len() == 1)
    });
    // The job is stopped and started as one: on each node its rank and the other gang never run at once, and
    // both get the CPU.
    for node in 0..3 {
        let s = sample_gangs(&[ranks[node].clone(), spinners[node].clone()], Duration::from_millis(700));
        assert_eq!(s.overlap, 0, "node {node}: the MPI rank and the other gang ran at once in {} samples", s.overlap);
    }
    let every_process: Vec<Vec<i32>> = ranks.iter().chain(&spinners).cloned().collect();
    // Open MPI's ranks may still be connecting (asleep) for a while on a loaded machine: wait for each to run.
    let used = gang_cpu_ticks_until_each_ran(&every_process, Duration::from_secs(20));
    assert!(used.iter().all(|&t| t > 0), "no rotation: CPU ticks of the ranks, then the spinner's tasks: {used:?}");
    // The program's own check passed, and the job ended with its launcher.
    wait_for("the MPI job to end", Duration::from_secs(240), || {
        status_of(&cluster.socket)
            .and_then(|s| s.jobs.into_iter().find(|j| j.id == job))
            .is_some_and(|j| j.state.is_over())
    });
    let ended = status_of(&cluster.socket).unwrap().jobs.into_iter().find(|j| j.id == job).unwrap();
    let logs = client_as(&cluster.socket, &["logs", &job.to_string()], None);
    let text = String::from_utf8_lossy(&logs.stdout);
    assert_eq!(ended.state.name(), "finished", "{launcher}: {ended:?}\n{text}");
    assert!(text.contains("\"p\":3") && text.contains("\"passed\":true"), "{launcher}: mpi_mm's report:\n{text}");
}
