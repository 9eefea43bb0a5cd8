#![allow(clippy::disallowed_methods)] // tests of the real runtime read the real clock
//! Attacks by a relay: an unprivileged user who binds the address:port an agent (or a remote user) dials passes
//! the honest peer's handshake to the real controller and back, then tampers with the connection. The handshake
//! succeeds through such a relay (it is a wire), but every line after it is sealed with a key the relay cannot
//! compute: whatever it injects is refused, and the honest end drops the link having acted on nothing. See
//! `mod.rs`.

use super::{ATTACKER, OTHER_USER};
use crate::harness::*;
use serde_json::json;
use std::io::{BufRead, Write};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The relay, as the attacker runs it. Arguments: where it listens, the controller, the mode, the side it injects
/// into ("client": the honest peer; "controller"), the number of lines of the handshake, and the line to inject.
///
/// - `cut`: forward the first `handshake` lines each way, nothing after; then inject the lines as they are.
/// - `faithful`: forward everything both ways; once the client has closed its side, or after 3 s, inject the
///   lines, sealed as the last line forwarded to that side was (its first word copied before each payload).
///
/// It reports `{"event": ...}` lines: `listening`, `accepted`, `injected`, `closed` (with the side that closed).
const RELAY: &str = r#"
import json, re, socket, sys, threading, time
listen, target, mode, into, handshake, line = sys.argv[1:7]
handshake = int(handshake)
def address(text):
    host, port = text.rsplit(":", 1)
    return (host, int(port))
said = threading.Lock()
def say(**event):
    with said:  # one whole line at a time: print() from two threads can interleave a line and its line feed
        sys.stdout.write(json.dumps(event) + "\n")
        sys.stdout.flush()
server = socket.socket()
server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
server.bind(address(listen))
server.listen(1)
say(event="listening")
client, _ = server.accept()
server.close()
controller = socket.create_connection(address(target))
say(event="accepted")
ends = {"client": client, "controller": controller}
other = {"client": "controller", "controller": "client"}
lock = threading.Lock()
forwarded = {"client": 0, "controller": 0}
last_to = {"client": b"", "controller": b""}
closed = set()
def pump(source):
    reader = ends[source].makefile("rb")
    try:
        for data in reader:
            with lock:
                if mode == "cut" and forwarded[source] >= handshake:
                    continue
                try:
                    ends[other[source]].sendall(data)
                except OSError:
                    pass
                forwarded[source] += 1
                last_to[other[source]] = data
    except OSError:
        pass  # reset: a socket closed with bytes unread is reset, not ended
    with lock:
        closed.add(source)
    say(event="closed", side=source)
for source in ends:
    threading.Thread(target=pump, args=(source,), daemon=True).start()
started = time.monotonic()
while True:
    time.sleep(0.01)
    with lock:
        if mode == "cut" and min(forwarded.values()) >= handshake:
            break
        if mode == "faithful" and ("client" in closed or time.monotonic() - started > 3.0):
            break
    if time.monotonic() - started > 60:
        say(event="gave up", forwarded=forwarded)
        sys.exit(1)
with lock:
    seal = last_to[into].split(b" ", 1)[0]
    sent = b""
    for payload in line.encode().split(b"\n"):
        if mode == "faithful" and re.fullmatch(rb"[0-9a-f]{64}", seal):
            payload = seal + b" " + payload
        sent += payload + b"\n"
    # All at once: the honest end may close the connection at the first line.
    try:
        ends[into].sendall(sent)
        say(event="injected", line=sent.decode())
    except OSError as e:
        say(event="inject failed", error=str(e))
if mode == "cut":
    try:
        ends[other[into]].shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
time.sleep(120)
"#;

/// The relay running as [`ATTACKER`], and what it reports.
struct Relay {
    child: Child,
    events: std::sync::mpsc::Receiver<serde_json::Value>,
    seen: Vec<serde_json::Value>,
    address: String,
}

impl Relay {
    fn start(controller: &str, mode: &str, into: &str, handshake: usize, line: &str) -> Relay {
        let address = format!("127.0.0.1:{}", free_port());
        let mut child = Command::new("python3")
            .args(["-c", RELAY, &address, controller, mode, into, &handshake.to_string(), line])
            .uid(ATTACKER)
            .gid(ATTACKER)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .spawn()
            .expect("python3 (the attacker's tool here)");
        let stdout = child.stdout.take().unwrap();
        let (sender, events) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in std::io::BufReader::new(stdout).lines().map_while(Result::ok) {
                let Ok(event) = serde_json::from_str(&line) else { continue };
                if sender.send(event).is_err() {
                    return;
                }
            }
        });
        let mut relay = Relay { child, events, seen: vec![], address };
        assert!(relay.wait_for_event(|e| e["event"] == "listening", Duration::from_secs(20)), "the relay listens");
        relay
    }

    /// Wait until the relay reports an event that `wanted` accepts (true), or `within` passes (false).
    fn wait_for_event(&mut self, wanted: impl Fn(&serde_json::Value) -> bool, within: Duration) -> bool {
        let started = Instant::now();
        loop {
            if self.seen.iter().any(&wanted) {
                return true;
            }
            let left = within.saturating_sub(started.elapsed());
            match self.events.recv_timeout(left.min(Duration::from_millis(100))) {
                Ok(event) => self.seen.push(event),
                Err(_) if started.elapsed() >= within => return false,
                Err(_) => {}
            }
        }
    }

    fn closed(&mut self, side: &str, within: Duration) -> bool {
        self.wait_for_event(|e| e["event"] == "closed" && e["side"] == side, within)
    }

    fn injected(&mut self, within: Duration) -> bool {
        self.wait_for_event(|e| e["event"] == "injected", within)
    }
}

impl Drop for Relay {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The job a relay has the agent start.
const RELAYED_JOB: u64 = 990001;

/// What a relay would have an agent do: a schedule that runs its job all the time, then a `start` of that job as
/// uid 0 whose command leaves `marker` behind.
fn start_as_root(marker: &Path) -> String {
    let schedule = json!({ "cmd": "schedule", "slice_ns": 10_000_000, "rows": [], "always": [RELAYED_JOB],
                           "jobs": [RELAYED_JOB], "suspended": [] });
    let start = json!({ "cmd": "start", "job": RELAYED_JOB, "uid": 0, "gid": 0,
            "argv": ["sh", "-c", format!("id -u > {}", marker.display())], "cwd": "/", "env": [],
            "ranks": [0], "size": 1, "cpus": [0], "register_only": false, "token": "00" });
    format!("{schedule}\n{start}")
}

/// Has the agent of `node` made a cgroup for the relay's job?
fn relayed_job_exists(node: &str) -> bool {
    let groups = cosched_runtime::agent::freezer::JobGroups::open(node, None);
    groups.is_ok_and(|groups| groups.existing_jobs().unwrap_or_default().contains(&RELAYED_JOB))
}

/// How the agent proves itself: with the agents' key, or with MUNGE.
#[derive(Clone, Copy, Debug)]
enum AgentProves {
    Key,
    Munge,
}

/// The controller (`cosched up` on TCP, with MUNGE and the agents' key) and, in `dir`, the key.
fn controller_on_tcp(munge: &cosched_munge::testing::PrivateMunged, dir: &Path) -> (Daemon, String) {
    let key = dir.join("key");
    write_agents_key(&key);
    tcp_daemon(munge, &["--key-file", key.to_str().unwrap()])
}

/// A `cosched agent` of a node of its own that dials `address`, proving itself as `proves` says.
fn agent_dialing(
    address: &str,
    proves: AgentProves,
    munge: &cosched_munge::testing::PrivateMunged,
    dir: &Path,
    node: &str,
) -> Child {
    let key = dir.join("key");
    let socket = munge.socket();
    let mut args = vec!["agent", "--controller", address, "--node", node, "--cpus", "1"];
    let state = dir.to_str().unwrap();
    args.extend(["--state-dir", state]);
    match proves {
        AgentProves::Key => args.extend(["--key-file", key.to_str().unwrap()]),
        AgentProves::Munge => args.extend(["--munge-socket", socket.to_str().unwrap()]),
    }
    let log = std::fs::OpenOptions::new().create(true).append(true).open(dir.join("agent.log")).unwrap();
    Command::new(COSCHED).args(&args).stdin(Stdio::null()).stdout(log.try_clone().unwrap()).stderr(log).spawn().unwrap()
}

/// An agent dials a relay; the relay tampers (`mode`, see [`RELAY`]) with a `start` of a job as uid 0. The agent must
/// start nothing and drop the link.
fn agent_behind_a_relay_starts_nothing(mode: &str, proves: AgentProves) {
    let munge = private_munged();
    let dir = fresh_dir("cosched-relay");
    let (_daemon, controller) = controller_on_tcp(&munge, &dir);
    let marker = dir.join("ran-as-root");
    // Challenge and proof one way, the challenge's answer and the controller's proof the other.
    let mut relay = Relay::start(&controller, mode, "client", 2, &start_as_root(&marker));
    let node = unique("relayed");
    let mut agent = agent_dialing(&relay.address, proves, &munge, &dir, &node);
    let injected = relay.injected(Duration::from_secs(30));
    let agent_log = || std::fs::read_to_string(dir.join("agent.log")).unwrap_or_default();
    assert!(injected, "{mode}, {proves:?}: the relay never got to inject: {:?}\n{}", relay.seen, agent_log());
    // The agent acts on the line at once or never: a started job leaves the marker within a few seconds.
    let dropped = relay.closed("client", Duration::from_secs(10));
    let logged = (0..500).any(|_| {
        std::thread::sleep(Duration::from_millis(20));
        agent_log().contains("controller link")
    });
    let started = Instant::now();
    while !marker.exists() && started.elapsed() < Duration::from_secs(3) {
        std::thread::sleep(Duration::from_millis(50));
    }
    let ran = std::fs::read_to_string(&marker).ok();
    let created = relayed_job_exists(&node);
    let _ = agent.kill();
    let _ = agent.wait();
    remove_agent_cgroups(&node);
    assert_eq!(ran, None, "{mode}, {proves:?}: the agent ran the relay's command as root; agent log:\n{}", agent_log());
    assert!(!created, "{mode}, {proves:?}: the agent made the relay's job; agent log:\n{}", agent_log());
    assert!(dropped, "{mode}, {proves:?}: the agent kept the link after an injected line: {:?}", relay.seen);
    assert!(logged && agent_log().contains("seal"), "{mode}, {proves:?}: the agent did not say why: {}", agent_log());
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_relay_on_the_port_a_key_agent_dials_cannot_command_it_after_the_handshake() {
    if skip_unless_root("a_relay_on_the_port_a_key_agent_dials") {
        return;
    }
    agent_behind_a_relay_starts_nothing("cut", AgentProves::Key);
}

#[test]
fn a_relay_on_the_port_a_munge_agent_dials_cannot_command_it_after_the_handshake() {
    if skip_unless_root("a_relay_on_the_port_a_munge_agent_dials") {
        return;
    }
    agent_behind_a_relay_starts_nothing("cut", AgentProves::Munge);
}

#[test]
fn a_relay_that_forwards_an_agents_link_faithfully_cannot_inject_one_line() {
    if skip_unless_root("a_relay_that_forwards_an_agents_link_faithfully") {
        return;
    }
    agent_behind_a_relay_starts_nothing("faithful", AgentProves::Key);
}

/// A remote user (`OTHER_USER`) runs `cosched status` through a relay, which tampers (`mode`) with a `kill` of that
/// user's job sent to the controller. The job must keep running and the controller drop the relay's connection.
fn user_behind_a_relay_loses_nothing(mode: &str) {
    let munge = private_munged();
    let (daemon, controller) = tcp_daemon(&munge, &[]);
    let job = daemon.submit_as(Some(OTHER_USER), &["--", "sleep", "300"]);
    wait_for("the user's job to run", Duration::from_secs(10), || {
        daemon.job(job).is_some_and(|j| j.state == JobState::Running)
    });
    let kill = json!({ "op": "kill", "job": job }).to_string();
    // Challenge and auth one way, the challenge's answer and the auth reply the other.
    let mut relay = Relay::start(&controller, mode, "controller", 2, &kill);
    let address = relay.address.clone();
    let user = std::thread::spawn(move || {
        let socket = munge.socket().to_str().unwrap().to_string();
        let out = Command::new(COSCHED)
            .args(["status", "--controller", &address, "--munge-socket", &socket])
            .env_remove("COSCHED_SOCKET")
            .current_dir("/tmp")
            .uid(OTHER_USER)
            .gid(OTHER_USER)
            .output()
            .unwrap();
        drop(munge);
        out
    });
    let injected = relay.injected(Duration::from_secs(30));
    assert!(injected, "{mode}: the relay never got to inject: {:?}\n{}", relay.seen, daemon.log());
    let dropped = relay.closed("controller", Duration::from_secs(10));
    let state = daemon.job(job).map(|j| j.state);
    let out = user.join().unwrap();
    assert_eq!(state, Some(JobState::Running), "{mode}: the relay's kill was obeyed as the user's");
    assert!(
        dropped,
        "{mode}: the controller kept the relay's connection after an injected line: {:?}\n{}\nuser: {}",
        relay.seen,
        daemon.log(),
        String::from_utf8_lossy(&out.stderr)
    );
    if mode == "faithful" {
        // A relay that only forwards is a wire: the user's own request went through it.
        assert!(out.status.success(), "through a faithful relay: {}", String::from_utf8_lossy(&out.stderr));
    }
    assert!(daemon.log().contains("seal"), "the controller did not say why: {}", daemon.log());
}

#[test]
fn a_relay_between_a_remote_user_and_the_controller_cannot_act_as_the_user() {
    if skip_unless_root("a_relay_between_a_remote_user_and_the_controller") {
        return;
    }
    user_behind_a_relay_loses_nothing("cut");
}

#[test]
fn a_relay_that_forwards_a_users_connection_faithfully_cannot_inject_one_line() {
    if skip_unless_root("a_relay_that_forwards_a_users_connection_faithfully") {
        return;
    }
    user_behind_a_relay_loses_nothing("faithful");
}

#[test]
fn a_line_the_relay_copies_back_to_its_sender_is_refused() {
    if skip_unless_root("a_line_the_relay_copies_back_to_its_sender") {
        return;
    }
    // A sealed line is bound to its direction and its place: the relay cannot reflect the agent's own report back
    // to it, nor replay the controller's first line later.
    let munge = private_munged();
    let dir = fresh_dir("cosched-reflect");
    let (_daemon, controller) = controller_on_tcp(&munge, &dir);
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let address = listener.local_addr().unwrap().to_string();
    let node = unique("reflected");
    let mut agent = agent_dialing(&address, AgentProves::Key, &munge, &dir, &node);
    let (to_agent, _) = listener.accept().unwrap();
    let to_controller = std::net::TcpStream::connect(&controller).unwrap();
    for s in [&to_agent, &to_controller] {
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    }
    let mut from_agent = std::io::BufReader::new(to_agent.try_clone().unwrap());
    let mut from_controller = std::io::BufReader::new(to_controller.try_clone().unwrap());
    let pass = |from: &mut std::io::BufReader<std::net::TcpStream>, mut to: &std::net::TcpStream| {
        let mut line = String::new();
        from.read_line(&mut line).unwrap();
        to.write_all(line.as_bytes()).unwrap();
        line
    };
    pass(&mut from_agent, &to_controller); // challenge
    pass(&mut from_controller, &to_agent); // its answer
    pass(&mut from_agent, &to_controller); // the agent's proof
    let first = pass(&mut from_controller, &to_agent); // the controller's proof, sealed
    let hello = pass(&mut from_agent, &to_controller); // the agent's hello, sealed
                                                       // Reflect the agent's own sealed hello back to it, then replay the controller's first line.
    (&to_agent).write_all(hello.as_bytes()).unwrap();
    (&to_agent).write_all(first.as_bytes()).unwrap();
    // A trusting agent would go on reporting: read what comes for 10 s at most.
    let started = Instant::now();
    let mut closed = false;
    while !closed && started.elapsed() < Duration::from_secs(10) {
        let mut chunk = [0u8; 4096];
        match std::io::Read::read(&mut from_agent, &mut chunk) {
            Ok(0) => closed = true,
            Ok(_) => {}
            Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => break,
            Err(_) => closed = true, // reset
        }
    }
    // The agent closes the connection, then logs why.
    let log = || std::fs::read_to_string(dir.join("agent.log")).unwrap_or_default();
    let logged = (0..500).any(|_| {
        std::thread::sleep(Duration::from_millis(20));
        log().contains("controller link")
    });
    let log = log();
    let _ = agent.kill();
    let _ = agent.wait();
    remove_agent_cgroups(&node);
    assert!(closed && logged, "the agent kept a link whose line came back reflected; log:\n{log}");
    assert!(log.contains("seal"), "{log}");
    let _ = std::fs::remove_dir_all(&dir);
}
