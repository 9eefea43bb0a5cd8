#![allow(clippy::disallowed_methods)] // tests of the real runtime read the real clock
//! Attacks on the daemon's resources: connection floods from one user and from many, past the open-file limit,
//! idle and slow clients, unauthenticated TCP peers. See `mod.rs`.

use super::{ATTACKER, OTHER_USER};
use crate::harness::*;
use std::io::{Read, Write};
use std::os::unix::process::CommandExt;
use std::time::{Duration, Instant};

/// Two gangs of spinning tasks that take turns on all CPUs, and their processes.
fn two_gangs(daemon: &Daemon) -> Vec<Vec<i32>> {
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get()).to_string();
    let args = ["-n", &cpus, "--", "timeout", "120", "sh", "-c", "while :; do :; done"];
    let jobs = [daemon.submit(&args), daemon.submit(&args)];
    // Two processes a task: `timeout` and its shell.
    let count = 2 * cpus.parse::<usize>().unwrap();
    jobs.iter().map(|&job| daemon.pids(job, count)).collect()
}

/// Switching went on without a single failed switch while the attack lasted, and both gangs got their turns.
fn switching_goes_on(daemon: &Daemon, gangs: &[Vec<i32>]) {
    let (before, _) = switch_counters(daemon);
    assert_every_gang_runs(gangs, "during the attack");
    let (after, errors) = switch_counters(daemon);
    assert!(after > before, "no switch during the attack ({before} then {after})");
    assert_eq!(errors, 0, "switches failed during the attack; daemon log:\n{}", daemon.log());
    assert!(!daemon.log().contains("Too many open files"), "{}", daemon.log());
}

#[test]
fn a_flood_of_connections_from_one_user_is_capped_and_leaves_other_users_and_switching_alone() {
    if skip_unless_root("a_flood_of_connections_from_one_user") {
        return;
    }
    let _machine = whole_machine();
    let daemon = Daemon::up(&["--max-connections-per-user", "16", "--slice-ms", "20"]);
    let gangs = two_gangs(&daemon);
    let flood = Hoarder::start(ATTACKER, HoardTarget::Unix(&daemon.socket), 200);
    assert_eq!((flood.held, flood.refused), (16, 184), "one user holds at most 16 connections");
    let other = daemon.client_as(OTHER_USER, &["status"]);
    assert!(other.status.success(), "another user is shut out: {other:?}");
    let refused = daemon.client_as(ATTACKER, &["status"]);
    assert!(String::from_utf8_lossy(&refused.stderr).contains("limit"), "{refused:?}");
    switching_goes_on(&daemon, &gangs);
    drop(flood);
    wait_for("the flood's connections to be given back", Duration::from_secs(10), || {
        daemon.client_as(ATTACKER, &["status"]).status.success()
    });
}

#[test]
fn more_connections_than_the_open_file_limit_never_starve_switching() {
    if skip_unless_root("more_connections_than_the_open_file_limit") {
        return;
    }
    let _machine = whole_machine();
    // 300 descriptors: 256 are kept for the daemon's own work, 44 go to clients (and 16 more to administrators).
    let daemon = Daemon::up_under(&["prlimit", "--nofile=300:300", "--"], &["--slice-ms", "20"], &[]);
    let gangs = two_gangs(&daemon);
    let floods: Vec<Hoarder> = [ATTACKER, OTHER_USER, OTHER_USER + 1, OTHER_USER + 2]
        .iter()
        .map(|&uid| Hoarder::start(uid, HoardTarget::Unix(&daemon.socket), 150))
        .collect();
    let held: u64 = floods.iter().map(|f| f.held).sum();
    assert!(held <= 44, "clients hold {held} connections past the limit kept for switching");
    assert!(daemon.client(&["status"]).status.success(), "root is shut out of a full daemon");
    switching_goes_on(&daemon, &gangs);
}

#[test]
fn slow_and_silent_clients_are_disconnected() {
    if skip_unless_root("slow_and_silent_clients_are_disconnected") {
        return;
    }
    let munge = private_munged();
    let (daemon, address) = tcp_daemon(&munge, &["--request-timeout-s", "1", "--idle-timeout-s", "2"]);
    let mut slow = std::os::unix::net::UnixStream::connect(&daemon.socket).unwrap();
    slow.write_all(br#"{"op":"sta"#).unwrap();
    slow.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    let mut answer = String::new();
    slow.read_to_string(&mut answer).unwrap();
    assert!(answer.contains("did not arrive in time"), "{answer:?}");
    let mut silent = std::os::unix::net::UnixStream::connect(&daemon.socket).unwrap();
    silent.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    let mut answer = String::new();
    silent.read_to_string(&mut answer).unwrap();
    assert!(answer.contains("no request"), "a silent connection is closed after the idle time: {answer:?}");
    // A TCP peer that never authenticates has the request time to do so.
    let mut stranger = RawPeer::connect(&address);
    assert!(stranger.closed_within(Duration::from_secs(20)), "an unauthenticated peer stayed connected");
}

#[test]
fn unauthenticated_tcp_peers_are_capped_per_address_and_cannot_shut_out_others() {
    if skip_unless_root("unauthenticated_tcp_peers_are_capped") {
        return;
    }
    let munge = private_munged();
    let (daemon, address) = tcp_daemon(&munge, &["--max-unauthenticated", "8"]);
    // From one address at most a quarter of the unauthenticated places: each newcomer displaces the address's
    // oldest silent connection (and silence costs a connection its place after 2 s anyway).
    let flood = Hoarder::start(ATTACKER, HoardTarget::Tcp { to: &address, from: "127.0.0.2" }, 100);
    assert!(flood.held <= 2 && flood.held + flood.refused == 100, "{} held, {} closed", flood.held, flood.refused);
    let out = remote_client_as(OTHER_USER, &address, &munge, &["status"]);
    assert!(out.status.success(), "a user of another address is shut out: {}", String::from_utf8_lossy(&out.stderr));
    drop(daemon);
}

/// `count` failed authentications from 127.0.0.1 as [`ATTACKER`], `at_once` at a time: a challenge, then a MUNGE
/// credential that is not one. Returns, once all have been answered, how many were refused as failed.
fn fail_authentications(address: &str, count: usize, at_once: usize) -> u64 {
    const FAILING: &str = r#"
import json, socket, sys, threading
host, port = sys.argv[1].rsplit(":", 1)
count, at_once = int(sys.argv[2]), int(sys.argv[3])
answers = []
def fail(i):
    s = socket.create_connection((host, int(port)), timeout=30)
    f = s.makefile("rwb")
    f.write(json.dumps({"op": "challenge", "nonce": "%032x" % i}).encode() + b"\n"); f.flush()
    f.readline()
    f.write(json.dumps({"op": "auth", "credential": "MUNGE:guess%d:" % i}).encode() + b"\n"); f.flush()
    answers.append(f.readline())
    s.close()
for first in range(0, count, at_once):
    threads = [threading.Thread(target=fail, args=(i,)) for i in range(first, min(count, first + at_once))]
    for t in threads: t.start()
    for t in threads: t.join()
print(json.dumps({"refused": sum(b"authentication failed" in a for a in answers)}), flush=True)
"#;
    let out = std::process::Command::new("python3")
        .args(["-c", FAILING, address, &count.to_string(), &at_once.to_string()])
        .uid(ATTACKER)
        .gid(ATTACKER)
        .output()
        .expect("python3");
    let said: serde_json::Value =
        serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stderr)));
    said["refused"].as_u64().unwrap()
}

/// A TCP agent of a node of its own with the agents' key; its log in `dir`.
fn tcp_agent(address: &str, key: &std::path::Path, dir: &std::path::Path, node: &str) -> std::process::Child {
    let log = std::fs::OpenOptions::new().create(true).append(true).open(dir.join("agent.log")).unwrap();
    std::process::Command::new(COSCHED)
        .args(["agent", "--controller", address, "--node", node, "--cpus", "1", "--key-file", key.to_str().unwrap()])
        .args(["--state-dir", dir.to_str().unwrap()])
        .stdin(std::process::Stdio::null())
        .stdout(log.try_clone().unwrap())
        .stderr(log)
        .spawn()
        .unwrap()
}

fn node_connected(daemon: &Daemon, node: &str) -> bool {
    daemon.status().is_some_and(|s| s.nodes.iter().any(|n| n.name == node && n.connected))
}

#[test]
fn failed_authentications_from_an_address_never_lock_out_its_agent_or_its_users() {
    if skip_unless_root("failed_authentications_from_an_address_never_lock_out") {
        return;
    }
    let munge = private_munged();
    let dir = fresh_dir("cosched-lockout");
    let key = dir.join("key");
    write_agents_key(&key);
    let node = unique("lockout");
    let (daemon, address) = tcp_daemon(&munge, &["--key-file", key.to_str().unwrap(), "--nodes", &node]);
    let failed = fail_authentications(&address, 50, 10);
    // Right after, from the same address: a remote user and the node's agent get in at once.
    let out = remote_client_as(OTHER_USER, &address, &munge, &["status"]);
    assert!(out.status.success(), "a user locked out by another's failures: {}", String::from_utf8_lossy(&out.stderr));
    let mut agent = tcp_agent(&address, &key, &dir, &node);
    let connected = (0..500).any(|_| {
        std::thread::sleep(Duration::from_millis(20));
        node_connected(&daemon, &node)
    });
    let _ = agent.kill();
    let _ = agent.wait();
    remove_agent_cgroups(&node);
    let log = std::fs::read_to_string(dir.join("agent.log")).unwrap_or_default();
    assert!(connected, "the agent was locked out by another's failures: {log}");
    assert_eq!(failed, 50, "every guess is answered as a failed authentication");
    assert!(daemon.log().matches("authentication failed from 127.0.0.1").count() >= 50, "failures are logged");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn silent_connections_hoarded_from_four_addresses_never_keep_a_restarting_agent_out() {
    if skip_unless_root("silent_connections_hoarded_from_four_addresses") {
        return;
    }
    let munge = private_munged();
    let dir = fresh_dir("cosched-hoard");
    let key = dir.join("key");
    write_agents_key(&key);
    let node = unique("hoarded");
    let (daemon, address) = tcp_daemon(&munge, &["--key-file", key.to_str().unwrap(), "--nodes", &node]);
    let mut agent = tcp_agent(&address, &key, &dir, &node);
    wait_for("the agent to connect", Duration::from_secs(10), || node_connected(&daemon, &node));
    // 64 silent connections, 16 from each of four addresses (the default bounds), reopened as they are closed.
    let sources = ["127.0.0.2", "127.0.0.3", "127.0.0.4", "127.0.0.5"];
    let mut hoard = PersistentHoarder::start(ATTACKER, &address, &sources, 16);
    let before = hoard.wait_holding(64);
    let _ = agent.kill();
    let _ = agent.wait();
    wait_for("the controller to see the agent gone", Duration::from_secs(10), || !node_connected(&daemon, &node));
    let mut agent = tcp_agent(&address, &key, &dir, &node);
    let restarted = Instant::now();
    let back = (0..500).any(|_| {
        std::thread::sleep(Duration::from_millis(20));
        node_connected(&daemon, &node)
    });
    let took = restarted.elapsed();
    // A remote user, from an address of its own, gets in too: a newcomer displaces a silent connection.
    let user = remote_client_as(OTHER_USER, &address, &munge, &["status"]);
    let during = hoard.counts();
    let _ = agent.kill();
    let _ = agent.wait();
    remove_agent_cgroups(&node);
    let log = std::fs::read_to_string(dir.join("agent.log")).unwrap_or_default();
    assert!(back, "the restarting agent stayed out for {took:?} while the hoard lasted; agent log:\n{log}");
    println!("the restarting agent was back after {:.0} ms", took.as_secs_f64() * 1e3);
    assert!(user.status.success(), "a remote user was kept out: {}", String::from_utf8_lossy(&user.stderr));
    assert!(during.held >= 56, "the hoard did not last: {before:?} then {during:?}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn idle_monitor_connections_never_keep_a_scrape_of_metrics_out() {
    if skip_unless_root("idle_monitor_connections_never_keep_a_scrape_out") {
        return;
    }
    let daemon = Daemon::up(&["--monitor", "127.0.0.1:0"]);
    let address = monitor_address(&daemon);
    // More idle connections than the monitor's 64 places, reopened whenever one is closed.
    let mut hoard = PersistentHoarder::start(ATTACKER, &address, &["127.0.0.1"], 80);
    let before = hoard.wait_holding(64);
    let statuses: Vec<u16> =
        (0..20).map(|_| http_exchange(&address, "GET", "/metrics", &[("Host", address.as_str())]).0).collect();
    let during = hoard.counts();
    assert_eq!(statuses, vec![200; 20], "scrapes of /metrics during the hoard");
    assert!(during.held >= 32, "the hoard did not last: {before:?} {during:?}");
    // The scrapes displaced idle connections, which the hoarder sees closed and opens again; on a busy machine
    // it may see them a while after the scrapes.
    let mut after = during;
    let reopened = (0..500).any(|_| {
        std::thread::sleep(Duration::from_millis(20));
        after = hoard.counts();
        after.opened > before.opened
    });
    assert!(reopened, "the scrapes displaced no idle connection: {before:?} {during:?} {after:?}");
}

/// Seconds until the server closes `stream` while it is sent a blank line every 200 ms (at most `limit`).
fn kept_open_by_blank_lines(stream: &mut std::os::unix::net::UnixStream, limit: Duration) -> Option<Duration> {
    stream.set_read_timeout(Some(Duration::from_millis(200))).unwrap();
    let start = std::time::Instant::now();
    let mut buf = [0u8; 4096];
    while start.elapsed() < limit {
        if stream.write_all(b"\n").is_err() {
            return Some(start.elapsed());
        }
        match stream.read(&mut buf) {
            Ok(0) => return Some(start.elapsed()),
            Ok(_) => {} // the server's last word before it closes
            Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => {}
            Err(_) => return Some(start.elapsed()),
        }
    }
    None
}

/// Blank lines are no request: a connection that sends nothing else is closed as a silent one is, and after a
/// request they do not keep it past the idle time. Before, each blank line held the connection for another idle
/// time (600 s by default), and over TCP a blank line counted as the peer's first words, which keep a connection
/// from being displaced before the silent ones.
#[test]
fn blank_lines_keep_no_connection_open() {
    if skip_unless_root("blank_lines_keep_no_connection_open") {
        return;
    }
    let daemon = Daemon::up(&["--slice-ms", "50", "--idle-timeout-s", "3"]);
    let limit = Duration::from_secs(30);
    let mut blank_only = std::os::unix::net::UnixStream::connect(&daemon.socket).unwrap();
    let closed = kept_open_by_blank_lines(&mut blank_only, limit);
    assert!(closed.is_some(), "a connection sending only blank lines was still open after {limit:?}");
    let mut after_request = std::os::unix::net::UnixStream::connect(&daemon.socket).unwrap();
    after_request.write_all(b"{\"op\":\"status\"}\n").unwrap();
    let mut reply = String::new();
    std::io::BufRead::read_line(&mut std::io::BufReader::new(&after_request), &mut reply).unwrap();
    assert!(reply.contains("\"ok\":true"), "{reply}");
    let closed = kept_open_by_blank_lines(&mut after_request, limit);
    assert!(closed.is_some(), "blank lines after a request kept the connection open past the idle time (3 s)");
}
