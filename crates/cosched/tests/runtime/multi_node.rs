#![allow(clippy::disallowed_methods)] // tests of the real runtime read the real clock
//! A controller and three agents as separate processes over TCP on loopback
//! (one host: the agents' slices are aligned to the same clock).

use crate::harness::*;
use std::path::PathBuf;
use std::process::Child;
use std::time::Duration;

struct Cluster {
    controller: Child,
    agents: Vec<Child>,
    dir: PathBuf,
    socket: PathBuf,
    nodes: Vec<String>,
}

impl Drop for Cluster {
    fn drop(&mut self) {
        let status = client_as(&self.socket, &["status", "--json"], None);
        let status: serde_json::Value = serde_json::from_slice(&status.stdout).unwrap_or_default();
        for pid in status["jobs"]
            .as_array()
            .into_iter()
            .flatten()
            .flat_map(|j| j["pids"].as_array().cloned().unwrap_or_default())
        {
            let pid = nix::unistd::Pid::from_raw(pid.as_i64().unwrap_or(0) as i32);
            let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGKILL);
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

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

fn start_cluster(agents: usize) -> Cluster {
    let dir = std::env::temp_dir().join(unique("cosched-cluster"));
    std::fs::create_dir_all(&dir).unwrap();
    let key = dir.join("key");
    std::fs::write(&key, "a-shared-key-of-enough-length\n").unwrap();
    let socket = dir.join("sock");
    let address = format!("127.0.0.1:{}", free_port());
    let s = |p: &PathBuf| p.to_str().unwrap().to_string();
    let controller = spawn_logged(
        &[
            "controller",
            "--state-dir",
            &s(&dir),
            "--socket",
            &s(&socket),
            "--tcp",
            &address,
            "--key-file",
            &s(&key),
            "--monitor",
            "off",
            "--slice-ms",
            "100",
        ],
        &dir.join("controller.log"),
    );
    wait_for("the controller", Duration::from_secs(10), || client_as(&socket, &["status"], None).status.success());
    let mut children = vec![];
    let mut nodes = vec![];
    for i in 0..agents {
        let node = unique(&format!("a{i}"));
        nodes.push(node.clone());
        let state = dir.join(&node);
        children.push(spawn_logged(
            &[
                "agent",
                "--controller",
                &address,
                "--key-file",
                &s(&key),
                "--node",
                &node,
                "--cpus",
                "1",
                "--state-dir",
                &s(&state),
            ],
            &dir.join(format!("agent{i}.log")),
        ));
    }
    let cluster = Cluster { controller, agents: children, dir, socket, nodes };
    wait_for("the agents to connect", Duration::from_secs(10), || {
        let out = client_as(&cluster.socket, &["status", "--json"], None);
        let status: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
        status["nodes"].as_array().is_some_and(|n| n.iter().filter(|n| n["connected"] == true).count() == agents)
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
    serde_json::from_slice::<serde_json::Value>(&out.stdout).unwrap()["job"].as_u64().unwrap()
}

/// The spinning `sh` processes of a job, grouped by node.
fn spinners_by_node(cluster: &Cluster, job: u64, nodes: usize) -> Vec<Vec<i32>> {
    let mut by_node = vec![];
    wait_for("the job's processes on every node", Duration::from_secs(10), || {
        let out = client_as(&cluster.socket, &["status", "--json"], None);
        let status: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
        let Some(j) = status["jobs"].as_array().and_then(|js| js.iter().find(|j| j["id"] == job).cloned()) else {
            return false;
        };
        let pids: Vec<i32> =
            j["pids"].as_array().into_iter().flatten().filter_map(|p| p.as_i64()).map(|p| p as i32).collect();
        let spinners: Vec<i32> = pids.into_iter().filter(|&p| comm(p) == "sh").collect();
        by_node = spinners.iter().map(|&p| vec![p]).collect();
        by_node.len() == nodes
    });
    by_node
}

fn comm(pid: i32) -> String {
    std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default().trim().to_string()
}

#[test]
fn three_agents_switch_together_and_survive_the_loss_of_one() {
    if skip_unless_root("three_agents_switch_together") {
        return;
    }
    let mut cluster = start_cluster(3);
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
        assert!(s.running[0] > s.consistent / 5 && s.running[1] > s.consistent / 5, "node {node}: no rotation");
    }
    // Across nodes, the slots line up: A's processes agree in nearly every sample.
    // (The three emulated nodes share this host's two CPUs, so a process being
    // frozen may wait a few ms for a CPU to reach the freezer; `cosched bench
    // switch` measures the slice-start skew itself.)
    let mut disagree = 0;
    let mut total = 0;
    let start = std::time::Instant::now();
    while start.elapsed() < Duration::from_secs(2) {
        let states: Vec<bool> = pa.iter().map(|p| any_running(p)).collect();
        total += 1;
        disagree += usize::from(states.iter().any(|&r| r != states[0]));
        std::thread::sleep(Duration::from_millis(1));
    }
    assert!((disagree as f64) < 0.10 * total as f64, "nodes out of step in {disagree} of {total} samples");

    // Stop one agent: its watchdog lets its processes run; the others keep switching.
    let lost = cluster.agents.remove(2);
    let mut lost = lost;
    let _ = lost.kill();
    let _ = lost.wait();
    wait_for("the lost node's processes to run freely", Duration::from_secs(2), || {
        all_progress(&[pa[2][0], pb[2][0]], Duration::from_millis(200))
    });
    for node in 0..2 {
        let s = sample_gangs(&[pa[node].clone(), pb[node].clone()], Duration::from_millis(700));
        assert_eq!(s.overlap, 0, "node {node} stopped switching in order after the loss of another agent");
        assert!(s.running[0] > 0 && s.running[1] > 0, "node {node} stopped a gang for good");
    }
    let _ = &cluster.dir;
}
