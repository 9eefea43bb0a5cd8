#![allow(clippy::disallowed_methods)] // tests of the real runtime read the real clock
//! Attacks by a node that holds the agents' key (a compromised node, or a stolen key): claims in its hello that
//! would move the controller's job ids, events about jobs placed on other nodes, answers to requests never sent to
//! it, node names the configuration does not list; and a controller link that starts a job over another job's
//! cgroup. See `mod.rs`.

use super::{ATTACKER, OTHER_USER};
use crate::harness::*;
use cosched_runtime::job_tag::JobTag;
use cosched_runtime::wire::auth::{AgentKey, Credentials, Nonces};
use cosched_runtime::wire::client::{Address, Connection};
use cosched_runtime::wire::protocol::{
    AdoptedJob, AgentHello, ChallengeReply, FromAgent, JobUsage, Reply, Request, StartJob, StuckJob, ToAgent,
};
use cosched_runtime::wire::seal::{seal_both_ways, End, Opener, Sealer};
use std::io::{BufRead, Write};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The name the forging node is configured under: it holds the key and is a node of the cluster.
const EVIL: &str = "evil";

fn key_credentials(key: &Path) -> Credentials {
    Credentials { munge: None, agent_key: Some(Arc::new(AgentKey::load(key).unwrap())) }
}

/// A node that holds the agents' key and says whatever the test wants, over the real protocol.
struct FakeAgent {
    connection: Connection,
}

impl FakeAgent {
    /// Prove to be the agent of `node` and say hello with these cgroups "found"; returns the link and the
    /// controller's first answer to the hello.
    fn hello(address: &str, key: &Path, node: &str, adopted: Vec<AdoptedJob>) -> (FakeAgent, ToAgent) {
        let credentials = key_credentials(key);
        let mut connection = Connection::open_as_agent(&Address::Tcp(address.to_string()), &credentials, node).unwrap();
        let hello = AgentHello {
            node: node.to_string(),
            cpus: 1,
            mem_bytes: 1 << 30,
            adopted,
            freezer: "v2".into(),
            features: vec![],
        };
        connection.send(&Request::AgentHello(hello)).unwrap();
        let mut agent = FakeAgent { connection };
        let first = agent.next_message().expect("an answer to the hello");
        (agent, first)
    }

    fn next_message(&mut self) -> Option<ToAgent> {
        let line = self.connection.read_line(Some(Duration::from_secs(20))).ok()??;
        Some(serde_json::from_str(&line).unwrap_or_else(|e| panic!("{e}: {line}")))
    }

    fn say(&mut self, event: &FromAgent) {
        let _ = self.connection.send(event);
    }
}

/// `cosched up` that also takes agents over TCP with the agents' key, and lists `nodes` besides its own.
struct KeyedDaemon {
    daemon: Daemon,
    address: String,
    key: PathBuf,
    args: Vec<String>,
}

impl KeyedDaemon {
    fn up(nodes: &[&str]) -> KeyedDaemon {
        let dir = fresh_dir("cosched-forgery");
        let key = dir.join("key");
        write_agents_key(&key);
        let address = format!("127.0.0.1:{}", free_port());
        let mut args: Vec<String> = ["--slice-ms", "50", "--tcp", &address, "--key-file", key.to_str().unwrap()]
            .iter()
            .map(|s| s.to_string())
            .collect();
        if !nodes.is_empty() {
            args.extend(["--nodes".to_string(), nodes.join(",")]);
        }
        let daemon = Daemon::up(&args.iter().map(String::as_str).collect::<Vec<_>>());
        KeyedDaemon { daemon, address, key, args }
    }

    fn restart(&mut self) {
        let args: Vec<&str> = self.args.iter().map(String::as_str).collect();
        self.daemon.restart(&args);
    }

    fn fake_agent(&self, node: &str, adopted: Vec<AdoptedJob>) -> (FakeAgent, ToAgent) {
        FakeAgent::hello(&self.address, &self.key, node, adopted)
    }
}

/// The stored record of job `id` as JSON (read from the backup once it holds every change).
fn stored_record(daemon: &Daemon, id: u64) -> serde_json::Value {
    let rows = daemon.stored_rows();
    let (_, _, record) = rows.iter().find(|(row, _, _)| *row == id as i64).unwrap_or_else(|| panic!("no row {id}"));
    serde_json::from_str(record).unwrap()
}

fn submit_json_as(daemon: &Daemon, uid: u32, args: &[&str]) -> Result<u64, String> {
    let mut all = vec!["submit", "--json"];
    all.extend(args);
    let out = daemon.client_as(uid, &all);
    if !out.status.success() {
        return Err(String::from_utf8_lossy(&out.stderr).into_owned());
    }
    Ok(serde_json::from_slice::<SubmitReply>(&out.stdout).unwrap().job)
}

#[test]
fn a_hello_claiming_job_id_u64_max_moves_no_counter_and_no_new_job_takes_over_old_processes() {
    if skip_unless_root("a_hello_claiming_job_id_u64_max") {
        return;
    }
    let mut keyed = KeyedDaemon::up(&[EVIL]);
    let victim = keyed.daemon.submit_as(Some(OTHER_USER), &["--", "sleep", "300"]);
    let victim_pid = keyed.daemon.pids(victim, 1)[0];
    let before = stored_record(&keyed.daemon, victim);
    // The claim: this node holds a cgroup of job u64::MAX (and of the victim's id, as another owner's).
    let claims = vec![
        AdoptedJob { job: u64::MAX, pids: vec![], owner: Some(ATTACKER), token: Some("00".repeat(16)) },
        AdoptedJob { job: victim, pids: vec![], owner: Some(ATTACKER), token: Some("11".repeat(16)) },
    ];
    let (_evil, answer) = keyed.fake_agent(EVIL, claims);
    assert!(matches!(answer, ToAgent::Refused { .. }), "a hello over unknown cgroups was accepted: {answer:?}");

    // Honest users go on: each new job gets the next id, and processes of its own.
    let daemon = &keyed.daemon;
    let ids: Vec<u64> = (0..3)
        .map(|_| submit_json_as(daemon, ATTACKER, &["--", "sleep", "300"]))
        .collect::<Result<_, _>>()
        .unwrap_or_else(|e| panic!("a submit after the forged hello: {e}"));
    assert_eq!(ids, [victim + 1, victim + 2, victim + 3], "the forged hello moved the job-id counter");
    for &id in &ids {
        let pids = daemon.pids(id, 1);
        assert!(!pids.contains(&victim_pid), "job {id} took over the victim's process {victim_pid}");
    }
    let after = stored_record(daemon, victim);
    assert_eq!((&after["uid"], &after["token"]), (&before["uid"], &before["token"]), "the victim's record changed");
    // The attacker ends its own jobs: the victim's process lives on in its own job, and is not left frozen.
    for &id in &ids {
        assert!(daemon.client_as(ATTACKER, &["kill", &id.to_string()]).status.success());
    }
    wait_for("the attacker's jobs to end", Duration::from_secs(20), || {
        ids.iter().all(|&id| daemon.job(id).is_some_and(|j| j.state.is_over()))
    });
    assert!(is_alive(victim_pid), "the victim's process was killed");
    assert!(cgroup_of(victim_pid).ends_with(&format!("job-{victim}")), "{}", cgroup_of(victim_pid));
    assert_eq!(daemon.job(victim).map(|j| (j.uid, j.state)), Some((OTHER_USER, JobState::Running)));

    // After a restart the honest agent is accepted, adopts the victim's job, and scheduling goes on.
    keyed.restart();
    let daemon = &keyed.daemon;
    assert_eq!(daemon.pids(victim, 1), [victim_pid], "the honest agent was not accepted after the restart");
    let next = submit_json_as(daemon, ATTACKER, &["--", "sleep", "300"]).unwrap();
    assert_eq!(next, victim + 4);
    daemon.pids(next, 1);
}

/// Flood the controller with answers to every acknowledgement number a request could be waiting on.
fn forge_answers(evil: &mut FakeAgent, exit_code: i32) {
    for ack in 1..=300 {
        evil.say(&FromAgent::ExecEnded { ack, exit_code: Some(exit_code), error: None });
        evil.say(&FromAgent::PidMoved { ack, error: None });
        evil.say(&FromAgent::Forgotten { ack, stuck: None });
    }
}

#[test]
fn a_node_speaks_only_for_its_own_jobs_and_answers_only_what_it_was_asked() {
    if skip_unless_root("a_node_speaks_only_for_its_own_jobs") {
        return;
    }
    let keyed = KeyedDaemon::up(&[EVIL]);
    let daemon = &keyed.daemon;
    let job = daemon.submit_as(Some(OTHER_USER), &["--", "sleep", "300"]);
    let pid = daemon.pids(job, 1)[0];
    let (mut evil, welcome) = keyed.fake_agent(EVIL, vec![]);
    assert!(matches!(welcome, ToAgent::Welcome { .. }), "the configured node was refused: {welcome:?}");
    // The job is placed on the honest node; the forging node claims its pids, CPU time, failure and end, and that
    // it left processes behind.
    let usage = JobUsage { job, cpu_ns: 1 << 40, pids: vec![1], frozen: true };
    let stuck = StuckJob { job, processes: 1, pids: vec![1], since_unix_ms: 0 };
    evil.say(&FromAgent::Report {
        jobs: vec![usage],
        load_avg: 0.0,
        switches: 0,
        switch_errors: 0,
        slice_starts: vec![],
        switch_latencies_ns: vec![],
        stuck_jobs: vec![stuck],
    });
    evil.say(&FromAgent::Failed { job, error: "forged".into() });
    evil.say(&FromAgent::Ended { job, exit_code: Some(3), error: None, cpu_ns: Some(1 << 60) });
    // A `cosched rsh` of the owner waits for its command on the honest node; the forging node answers every
    // request number with exit code 42.
    let mut rsh = Command::new(COSCHED);
    rsh.args(["rsh", &daemon.node, "sleep 2; exit 5"])
        .env("COSCHED_SOCKET", &daemon.socket)
        .env("COSCHED_JOB_ID", job.to_string())
        .current_dir("/tmp")
        .uid(OTHER_USER)
        .gid(OTHER_USER)
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    let rsh = rsh.spawn().unwrap();
    let started = Instant::now();
    while started.elapsed() < Duration::from_millis(1500) {
        forge_answers(&mut evil, 42);
        std::thread::sleep(Duration::from_millis(100));
    }
    let out = rsh.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(5), "the command's exit code was forged: {out:?}");
    // Nothing the forging node said about the job counts.
    std::thread::sleep(Duration::from_millis(300));
    let record = daemon.job(job).unwrap();
    assert_eq!(record.state, JobState::Running, "{record:?}");
    assert_eq!((record.error.as_deref(), record.exit_code), (None, None), "{record:?}");
    assert_eq!(record.pids, [pid], "forged pids are shown: {record:?}");
    assert!(!record.frozen && record.cpu_ns < 1 << 40, "forged usage is shown: {record:?}");
    assert_eq!(record.left_behind, None, "a forged stuck report is in the job's record");
    let nodes = daemon.status().unwrap().nodes;
    assert!(nodes.iter().all(|n| n.stuck_jobs.is_empty()), "a forged stuck report is shown: {nodes:?}");
}

#[test]
fn an_agent_naming_a_node_the_configuration_does_not_list_is_refused_and_no_stored_name_comes_back() {
    if skip_unless_root("an_agent_naming_an_unlisted_node_is_refused") {
        return;
    }
    let mut keyed = KeyedDaemon::up(&[EVIL]);
    let (_intruder, answer) = keyed.fake_agent("intruder", vec![]);
    assert!(matches!(answer, ToAgent::Refused { .. }), "an unlisted node was accepted: {answer:?}");
    let names = |daemon: &Daemon| daemon.status().unwrap().nodes.into_iter().map(|n| n.name).collect::<Vec<_>>();
    assert!(!names(&keyed.daemon).contains(&"intruder".to_string()), "{:?}", names(&keyed.daemon));
    // A node row of a name no longer configured (written while the daemon was down) is ignored.
    keyed.daemon.kill_hard();
    let db = rusqlite::Connection::open(keyed.daemon.dir.join("cosched.db")).unwrap();
    db.execute("INSERT INTO nodes (name, cpus, mem_bytes) VALUES ('ghost', 64, 0)", []).unwrap();
    drop(db);
    keyed.restart();
    let listed = names(&keyed.daemon);
    assert!(!listed.iter().any(|n| n == "intruder" || n == "ghost"), "{listed:?}");
}

/// What an agent started on `node` with the agents' key sends and does when its controller (this test, holding the
/// key) starts `start`: the agent's messages until `until` holds for one, or 20 s.
struct FakeController {
    reader: std::io::BufReader<std::net::TcpStream>,
    writer: std::net::TcpStream,
    sealer: Sealer,
    opener: Opener,
}

impl FakeController {
    /// Accept the agent's connection and go through the handshake as the controller (the key proves it); returns
    /// the agent's hello.
    fn accept(listener: &std::net::TcpListener, key: &Path) -> (FakeController, AgentHello) {
        listener.set_nonblocking(false).unwrap();
        let (stream, _) = listener.accept().unwrap();
        stream.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
        let mut reader = std::io::BufReader::new(stream.try_clone().unwrap());
        let mut writer = stream;
        let challenge: serde_json::Value = serde_json::from_str(&read_raw_line(&mut reader)).unwrap();
        let peer = challenge["nonce"].as_str().expect("the agent's nonce").to_string();
        let nonces = Nonces { peer, controller: cosched_runtime::wire::auth::fresh_nonce().unwrap() };
        let answer = Reply::ok(ChallengeReply { nonce: nonces.controller.clone() });
        writer.write_all(format!("{}\n", serde_json::to_string(&answer).unwrap()).as_bytes()).unwrap();
        let (node, proof) = match serde_json::from_str::<Request>(&read_raw_line(&mut reader)).unwrap() {
            Request::AgentAuth { node, proof } => (node, proof),
            other => panic!("not an agent's proof: {other:?}"),
        };
        let credentials = key_credentials(key);
        let (session, with) = credentials.check_agent(&node, &proof, &nonces).unwrap();
        let (sealer, opener) = seal_both_ways(session, End::Controller);
        let mut controller = FakeController { reader, writer, sealer, opener };
        controller.send(&ToAgent::ControllerProof(credentials.prove_to_agent(&node, &nonces, with).unwrap()));
        let hello = match serde_json::from_str::<Request>(&controller.line()).unwrap() {
            Request::AgentHello(hello) => hello,
            other => panic!("not a hello: {other:?}"),
        };
        (controller, hello)
    }

    /// The next line's payload, its seal checked ("" at the end).
    fn line(&mut self) -> String {
        let line = read_raw_line(&mut self.reader);
        if line.is_empty() {
            return line;
        }
        self.opener.open(line.trim_end_matches('\n')).expect("a line sealed by the agent")
    }

    fn send(&mut self, message: &impl serde::Serialize) {
        let sealed = self.sealer.seal(serde_json::to_string(message).unwrap().as_bytes()).unwrap();
        self.writer.write_all(&sealed).unwrap();
    }

    /// The first event the agent sends that `wanted` picks, within 20 s.
    fn event<T>(&mut self, mut wanted: impl FnMut(FromAgent) -> Option<T>) -> Option<T> {
        let started = Instant::now();
        while started.elapsed() < Duration::from_secs(20) {
            let line = self.line();
            if line.is_empty() {
                return None;
            }
            if let Some(found) = serde_json::from_str::<FromAgent>(&line).ok().and_then(&mut wanted) {
                return Some(found);
            }
        }
        None
    }
}

#[test]
fn an_agent_refuses_to_start_a_job_over_a_cgroup_tagged_for_another_job() {
    if skip_unless_root("an_agent_refuses_to_start_a_job_over_another_jobs_cgroup") {
        return;
    }
    let dir = fresh_dir("cosched-tagged");
    let key = dir.join("key");
    write_agents_key(&key);
    // Job 7's cgroup on the node: another user's job, with its process in it, found by the agent at its start.
    let node = unique("tag");
    let groups = cosched_runtime::agent::freezer::JobGroups::open(&node, None).unwrap();
    groups.create(7).unwrap();
    let cgroup = groups.procs_files(7)[0].parent().unwrap().to_path_buf();
    let tag = JobTag { uid: OTHER_USER, token: "ab".repeat(16) };
    tag.write(&cgroup).unwrap();
    let mut victim = Command::new("sleep");
    victim.arg("300").uid(OTHER_USER).gid(OTHER_USER);
    let mut victim = victim.spawn().unwrap();
    let victim_pid = victim.id() as i32;
    groups.add_pid(7, victim_pid).unwrap();

    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let address = listener.local_addr().unwrap().to_string();
    let args = ["agent", "--controller", &address, "--node", &node, "--cpus", "1", "--no-realtime"];
    let (key_arg, state) = (key.to_str().unwrap(), dir.to_str().unwrap());
    let mut all = args.to_vec();
    all.extend(["--key-file", key_arg, "--state-dir", state]);
    let mut agent = spawn_logged(&all, &dir.join("agent.log"));
    let (mut controller, hello) = FakeController::accept(&listener, &key);
    assert!(hello.adopted.iter().any(|a| a.job == 7 && a.owner == Some(OTHER_USER)), "{hello:?}");
    controller.send(&ToAgent::Welcome { node_index: 0 });
    // Its controller (compromised, or mistaken after a lost database) starts job 7 for someone else.
    let start = StartJob {
        job: 7,
        uid: ATTACKER,
        gid: ATTACKER,
        argv: vec!["sleep".into(), "300".into()],
        cwd: "/".into(),
        env: vec![],
        ranks: vec![0],
        size: 1,
        cpus: vec![0],
        register_only: false,
        token: "cd".repeat(16),
        mpi_hosts: vec![],
        name: String::new(),
        output_files: Default::default(),
        umask: None,
    };
    controller.send(&ToAgent::Start(start));
    let refusal = controller.event(|event| match event {
        FromAgent::Failed { job: 7, error } => Some(error),
        _ => None,
    });
    let log = std::fs::read_to_string(dir.join("agent.log")).unwrap_or_default();
    let members = groups.pids(7).unwrap_or_default();
    let tag_after = JobTag::read(&cgroup);
    let _ = agent.kill();
    let _ = agent.wait();
    let _ = victim.kill();
    let _ = victim.wait();
    remove_agent_cgroups(&node);
    let refusal = refusal.unwrap_or_else(|| panic!("the agent did not refuse the start; its log:\n{log}"));
    assert!(refusal.contains("another job"), "{refusal}");
    assert_eq!(members, [victim_pid], "the agent started the new job's task in the other job's cgroup");
    assert_eq!(tag_after, Some(tag), "the cgroup's tag was rewritten");
    let _ = std::fs::remove_dir_all(&dir);
}

/// One line as it came ("" at the end).
fn read_raw_line(reader: &mut impl BufRead) -> String {
    let mut line = String::new();
    reader.read_line(&mut line).unwrap();
    line
}
