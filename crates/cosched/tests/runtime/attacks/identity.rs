#![allow(clippy::disallowed_methods)] // tests of the real runtime read the real clock
//! Attacks on identity: claiming a uid over TCP, credentials taken to another connection or purpose, users posing
//! as agents, a program on the controller's port, keys others can read, guessing keys. See `mod.rs`.

use super::{ATTACKER, OTHER_USER};
use crate::harness::*;
use serde_json::json;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn auth_line(credential: &str) -> String {
    json!({ "op": "auth", "credential": credential }).to_string()
}

fn hello_line(node: &str) -> String {
    json!({ "op": "agent_hello", "node": node, "cpus": 64, "mem_bytes": 1u64 << 40, "adopted": [], "freezer": "v2" })
        .to_string()
}

fn agent_auth_line(node: &str, proof: serde_json::Value) -> String {
    json!({ "op": "agent_auth", "node": node, "proof": proof }).to_string()
}

fn error_of(reply: &serde_json::Value) -> String {
    reply["error"].as_str().or(reply["reason"].as_str()).unwrap_or_default().to_string()
}

#[test]
fn a_tcp_peer_cannot_claim_a_uid_and_a_remote_user_acts_as_the_uid_munge_vouches_for() {
    if skip_unless_root("a_tcp_peer_cannot_claim_a_uid") {
        return;
    }
    let munge = private_munged();
    let (daemon, address) = tcp_daemon(&munge, &[]);
    // Saying who you are (the old shared-key way) is refused, and nothing else works before authenticating.
    let mut peer = RawPeer::connect(&address);
    let claimed = peer.ask(r#"{"op":"auth","token":"guess","uid":0,"gid":0}"#);
    assert!(error_of(&claimed).contains("unknown field"), "{claimed}");
    let status = peer.ask(r#"{"op":"status"}"#);
    assert!(error_of(&status).contains("authenticate first"), "{status}");
    // A user of another host acts as the uid munged put in the credential, with a local user's rights.
    let out = remote_client_as(ATTACKER, &address, &munge, &["submit", "--json", "--", "sleep", "30"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let theirs = serde_json::from_slice::<SubmitReply>(&out.stdout).unwrap().job;
    assert_eq!(daemon.job(theirs).map(|j| j.uid), Some(ATTACKER));
    let roots = daemon.submit(&["--", "sleep", "30"]);
    let out = remote_client_as(ATTACKER, &address, &munge, &["kill", &roots.to_string()]);
    assert!(String::from_utf8_lossy(&out.stderr).contains("permission denied"), "{out:?}");
    assert_eq!(daemon.job(roots).map(|j| j.state), Some(JobState::Running));
    // Root of a host of the realm is an administrator, as with Slurm.
    let out = remote_client_as(0, &address, &munge, &["kill", &theirs.to_string()]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
}

#[test]
fn a_credential_is_good_for_its_own_connection_and_purpose_only() {
    if skip_unless_root("a_credential_is_good_for_its_own_connection") {
        return;
    }
    let munge = private_munged();
    let (_daemon, address) = tcp_daemon(&munge, &[]);
    // Made for one connection, presented on another: refused (and, decoded once, it is spent).
    let mut first = RawPeer::connect(&address);
    let nonces = first.challenge();
    let credential = credential_of(ATTACKER, &munge, &user_statement(&nonces));
    let mut second = RawPeer::connect(&address);
    second.challenge();
    let moved = second.ask(&auth_line(&credential));
    assert!(error_of(&moved).contains("another connection"), "{moved}");
    let replayed = first.ask(&auth_line(&credential));
    assert!(error_of(&replayed).contains("eplayed"), "a credential decodes once: {replayed}");
    // An agent's credential does not make a user, nor does a credential of another realm, nor one without a
    // challenge.
    let mut third = RawPeer::connect(&address);
    let nonces = third.challenge();
    let agents = credential_of(ATTACKER, &munge, &agent_statement("n", &nonces));
    assert_eq!(third.ask(&auth_line(&agents))["ok"], false);
    let foreign_realm = private_munged();
    let mut fourth = RawPeer::connect(&address);
    let nonces = fourth.challenge();
    let foreign = credential_of(0, &foreign_realm, &user_statement(&nonces));
    assert_eq!(fourth.ask(&auth_line(&foreign))["ok"], false);
    // Both nonces swapped: the statement of another connection.
    let mut swapped = RawPeer::connect(&address);
    let nonces = swapped.challenge();
    let turned = Nonces { peer: nonces.controller.clone(), controller: nonces.peer.clone() };
    let turned = credential_of(OTHER_USER, &munge, &user_statement(&turned));
    assert!(error_of(&swapped.ask(&auth_line(&turned))).contains("another connection"));
    // (Made before connecting: a peer must say its first line within 2 s.)
    let unbound = credential_of(OTHER_USER, &munge, &user_statement(&nonces));
    let mut fifth = RawPeer::connect(&address);
    assert!(error_of(&fifth.ask(&auth_line(&unbound))).contains("challenge first"));
}

/// A controller that answered every challenge with a credential of root would hand anyone who connects a root
/// credential of the realm, good with any service that trusts a credential's uid without reading its payload.
#[test]
fn the_controller_hands_no_root_credential_to_a_peer_that_has_not_proved_who_it_is() {
    if skip_unless_root("the_controller_hands_no_root_credential") {
        return;
    }
    let munge = private_munged();
    let (_daemon, address) = tcp_daemon(&munge, &[]);
    let mut peer = RawPeer::connect(&address);
    let answer = peer.ask(r#"{"op":"challenge","nonce":"ab"}"#);
    assert_eq!(answer["ok"], true, "{answer}");
    assert_eq!(answer["data"].as_object().map(|o| o.len()), Some(1), "more than a nonce before a proof: {answer}");
    let nonces = Nonces { peer: "ab".into(), controller: answer["data"]["nonce"].as_str().unwrap().to_string() };
    // Once the peer proved it is ATTACKER, the controller proves itself with a credential only ATTACKER decodes.
    let authenticated = peer.ask(&auth_line(&credential_of(ATTACKER, &munge, &user_statement(&nonces))));
    assert_eq!(authenticated["ok"], true, "{authenticated}");
    let proof = authenticated["data"]["controller"]["munge"].as_str().expect("the controller's proof").to_string();
    let refused = decode_as(OTHER_USER, &munge, &proof).expect_err("another uid decoded the controller's proof");
    assert!(refused.contains("Unauthorized"), "{refused}");
    let said = format!("cosched-to-peer:user {ATTACKER}:ab:{}", nonces.controller);
    assert_eq!(decode_as(ATTACKER, &munge, &proof), Ok((0, said)));
}

#[test]
fn a_user_cannot_pose_as_an_agent() {
    if skip_unless_root("a_user_cannot_pose_as_an_agent") {
        return;
    }
    let munge = private_munged();
    let (daemon, address) = tcp_daemon(&munge, &[]);
    let mut peer = RawPeer::connect(&address);
    let nonces = peer.challenge();
    let credential = credential_of(ATTACKER, &munge, &agent_statement("evil", &nonces));
    let refused = peer.ask(&agent_auth_line("evil", json!({ "munge": credential })));
    assert_eq!(refused["cmd"], "refused", "{refused}");
    assert!(error_of(&refused).contains("root"), "{refused}");
    // A hello over TCP without a proof first, and a user's credential as an agent's.
    let mut bare = RawPeer::connect(&address);
    let refused = bare.ask(&hello_line("evil"));
    assert_eq!(refused["cmd"], "refused", "{refused}");
    assert!(error_of(&refused).contains("proves itself first"), "{refused}");
    let mut user = RawPeer::connect(&address);
    let nonces = user.challenge();
    let users = credential_of(0, &munge, &user_statement(&nonces));
    let refused = user.ask(&agent_auth_line("evil", json!({ "munge": users })));
    assert!(error_of(&refused).contains("another connection, node or purpose"), "{refused}");
    let nodes = daemon.status().unwrap().nodes;
    assert!(nodes.iter().all(|n| n.name != "evil"), "{nodes:?}");
}

/// Start `cosched <args>` and return its exit status and stderr, failing if it is still running after 10 s
/// (a daemon that should have refused to start).
fn refused_at_start(args: &[&str]) -> String {
    let mut child = Command::new(COSCHED).args(args).stdout(Stdio::null()).stderr(Stdio::piped()).spawn().unwrap();
    let started = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if started.elapsed() > Duration::from_secs(10) {
            let _ = child.kill();
            panic!("cosched {args:?} started instead of refusing");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let output = child.wait_with_output().unwrap();
    assert!(!output.status.success());
    String::from_utf8_lossy(&output.stderr).into_owned()
}

#[test]
fn an_agents_key_that_others_can_read_or_that_is_not_roots_is_refused() {
    if skip_unless_root("an_agents_key_that_others_can_read") {
        return;
    }
    use std::os::unix::fs::PermissionsExt;
    let dir = fresh_dir("cosched-key");
    let (key, state, socket) = (dir.join("key"), dir.join("state"), dir.join("sock"));
    write_agents_key(&key);
    let key_path = key.to_str().unwrap();
    let controller = [
        "controller",
        "--tcp",
        "127.0.0.1:0",
        "--key-file",
        key_path,
        "--monitor",
        "off",
        "--state-dir",
        state.to_str().unwrap(),
        "--socket",
        socket.to_str().unwrap(),
    ];
    // A node of its own: an agent that started after all would otherwise thaw the jobs of this machine's node.
    let node = unique("key");
    let agent = [
        "agent",
        "--controller",
        "127.0.0.1:1",
        "--node",
        &node,
        "--key-file",
        key_path,
        "--state-dir",
        state.to_str().unwrap(),
    ];
    std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o644)).unwrap();
    assert!(refused_at_start(&controller).contains("chmod 600"));
    assert!(refused_at_start(&agent).contains("chmod 600"));
    std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o600)).unwrap();
    nix::unistd::chown(&key, Some(nix::unistd::Uid::from_raw(ATTACKER)), None).unwrap();
    assert!(refused_at_start(&controller).contains("chown root"));
    std::fs::remove_file(&key).unwrap();
    std::fs::write(&key, "short").unwrap();
    std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o600)).unwrap();
    assert!(refused_at_start(&controller).contains("at least 64 hex digits"));
    // A passphrase as long as a key is far weaker than one: hex digits only.
    std::fs::write(&key, "correct horse battery staple ".repeat(3)).unwrap();
    assert!(refused_at_start(&agent).contains("not all hex digits"));
    // A link at the key's name (its target's folder would go unchecked), though it leads to a good key.
    let good = dir.join("good-key");
    write_agents_key(&good);
    std::fs::remove_file(&key).unwrap();
    std::os::unix::fs::symlink(&good, &key).unwrap();
    assert!(refused_at_start(&controller).contains("is a symbolic link"));
    assert!(refused_at_start(&agent).contains("is a symbolic link"));
    // A good key in a folder the attacker owns: they could swap the file for one of theirs between starts.
    std::fs::remove_file(&key).unwrap();
    std::fs::rename(&good, &key).unwrap();
    nix::unistd::chown(&dir, Some(nix::unistd::Uid::from_raw(ATTACKER)), None).unwrap();
    let theirs = refused_at_start(&controller);
    nix::unistd::chown(&dir, Some(nix::unistd::Uid::from_raw(0)), None).unwrap();
    assert!(theirs.contains("the key file's folder") && theirs.contains("not root"), "{theirs}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// What a peer sends until it closes the connection, or for `within` at most (a trusting agent would send reports
/// for ever).
fn read_until_closed(reader: &mut impl std::io::Read, within: Duration) -> Vec<u8> {
    let started = Instant::now();
    let mut sent = Vec::new();
    let mut chunk = [0u8; 4096];
    while started.elapsed() < within {
        match reader.read(&mut chunk) {
            Ok(0) => break,
            Ok(n) => sent.extend_from_slice(&chunk[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock || e.kind() == std::io::ErrorKind::TimedOut => {}
            Err(_) => break,
        }
    }
    sent
}

/// The agent's connection, or a failure that says why it never came (the agent exited, or nothing within `within`).
fn accept_within(
    listener: &std::net::TcpListener,
    within: Duration,
    agent: &mut std::process::Child,
    log: &std::path::Path,
) -> std::net::TcpStream {
    listener.set_nonblocking(true).unwrap();
    let started = Instant::now();
    loop {
        match listener.accept() {
            Ok((stream, _)) => {
                stream.set_nonblocking(false).unwrap();
                return stream;
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
            Err(e) => panic!("accept: {e}"),
        }
        let gone = agent.try_wait().unwrap();
        if gone.is_some() || started.elapsed() > within {
            let _ = agent.kill();
            panic!("the agent never connected ({gone:?}): {}", std::fs::read_to_string(log).unwrap_or_default());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A program on the controller's port (it was down, or the address was spoofed) answers the agent's challenge
/// (`answer` of the agent's nonce) but cannot prove it is the controller; once the agent has proved itself,
/// `after_proof` of the nonce is its first message. Run an agent against it and return what the agent sent.
fn agent_against_an_impostor(
    answer: impl FnOnce(&str) -> serde_json::Value,
    after_proof: impl FnOnce(&str) -> serde_json::Value,
    agent_args: &[&str],
) -> (String, String) {
    use std::io::{BufRead, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let address = listener.local_addr().unwrap().to_string();
    let dir = fresh_dir("cosched-impostor");
    let node = unique("imp");
    let log = dir.join("agent.log");
    let mut args = vec!["agent", "--controller", &address, "--node", &node, "--cpus", "1"];
    let state = dir.to_str().unwrap().to_string();
    args.extend(["--state-dir", &state]);
    args.extend(agent_args);
    let mut agent = spawn_logged(&args, &log);
    let stream = accept_within(&listener, Duration::from_secs(20), &mut agent, &log);
    stream.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut reader = std::io::BufReader::new(stream.try_clone().unwrap());
    let mut challenge = String::new();
    reader.read_line(&mut challenge).unwrap();
    stream.set_read_timeout(Some(Duration::from_millis(500))).unwrap();
    let theirs: serde_json::Value = serde_json::from_str(&challenge).unwrap();
    let nonce = theirs["nonce"].as_str().unwrap().to_string();
    let answer = json!({ "ok": true, "data": answer(&nonce) });
    (&stream).write_all(format!("{answer}\n").as_bytes()).unwrap();
    let mut proof = String::new();
    let _ = reader.read_line(&mut proof);
    if proof.contains("agent_auth") {
        (&stream).write_all(format!("{}\n", after_proof(&nonce)).as_bytes()).unwrap();
    }
    let rest = proof + &String::from_utf8_lossy(&read_until_closed(&mut reader, Duration::from_secs(5)));
    // The agent closes the connection, then logs why.
    let logged_why = || std::fs::read_to_string(&log).unwrap_or_default().contains("controller link");
    let started = Instant::now();
    while !logged_why() && started.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = agent.kill();
    let _ = agent.wait();
    remove_agent_cgroups(&node);
    let sent = challenge + &rest;
    let logged = std::fs::read_to_string(&log).unwrap_or_default();
    let _ = std::fs::remove_dir_all(&dir);
    (sent, logged)
}

#[test]
fn an_agent_obeys_nothing_from_a_program_that_cannot_prove_it_is_the_controller() {
    if skip_unless_root("an_agent_obeys_nothing_from_an_impostor") {
        return;
    }
    // Key mode: the impostor does not hold the key, and the key is never sent; the agent says no hello and obeys
    // nothing (its first line is not even sealed).
    let dir = fresh_dir("cosched-impostor-key");
    let key = dir.join("key");
    write_agents_key(&key);
    let key_text = std::fs::read_to_string(&key).unwrap();
    let (sent, logged) = agent_against_an_impostor(
        |_| json!({ "nonce": "00" }),
        |_| json!({ "cmd": "controller_proof", "hmac": "00".repeat(32) }),
        &["--key-file", key.to_str().unwrap()],
    );
    assert!(!sent.contains("agent_hello") && !sent.contains(&key_text), "the agent sent: {sent}");
    assert!(logged.contains("not our controller"), "agent log: {logged}");
    // MUNGE mode: the agent proves itself first (as Slurm's daemons do), with a credential only root can decode;
    // the impostor is a user, and its credential is its own, not root's: the agent obeys and reports nothing.
    let munge = private_munged();
    let (sent, logged) = agent_against_an_impostor(
        |_| json!({ "nonce": "00" }),
        |nonce| {
            let forged = credential_of(ATTACKER, &munge, &format!("cosched-to-peer:agent x:{nonce}:00"));
            json!({ "cmd": "controller_proof", "munge": forged })
        },
        &["--munge-socket", munge.socket().to_str().unwrap()],
    );
    let lines: Vec<&str> = sent.lines().collect();
    assert!(lines.len() == 2 && lines[1].contains("agent_auth"), "the agent sent more than its proof: {sent}");
    let proof: serde_json::Value = serde_json::from_str(lines[1]).unwrap();
    let agents_credential = proof["proof"]["munge"].as_str().expect("a MUNGE proof");
    let refused = decode_as(ATTACKER, &munge, agents_credential).expect_err("the impostor decoded root's credential");
    assert!(refused.contains("Unauthorized"), "{refused}");
    assert!(logged.contains("not our controller"), "agent log: {logged}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn wrong_keys_are_answered_slowly_and_logged_and_bar_no_address() {
    if skip_unless_root("wrong_keys_are_answered_slowly") {
        return;
    }
    let dir = fresh_dir("cosched-guess");
    let key = dir.join("key");
    write_agents_key(&key);
    let address = format!("127.0.0.1:{}", free_port());
    let daemon = Daemon::up(&["--tcp", &address, "--key-file", key.to_str().unwrap()]);
    let guess = |i: usize| {
        let mut peer = RawPeer::connect(&address);
        peer.challenge();
        peer.ask(&agent_auth_line(&format!("guess{i}"), json!({ "hmac": format!("{i:064x}") })))
    };
    let started = Instant::now();
    let answers: Vec<serde_json::Value> = std::thread::scope(|s| {
        let guesses: Vec<_> = (0..12).map(|i| s.spawn(move || guess(i))).collect();
        guesses.into_iter().map(|g| g.join().unwrap()).collect()
    });
    assert!(started.elapsed() >= cosched_runtime::gate::FAILURE_PAUSE, "wrong keys were answered at once");
    assert!(answers.iter().all(|a| a["cmd"] == "refused" && error_of(a).contains("wrong key")), "{answers:?}");
    // Guessing a 256-bit key a second per connection is hopeless; barring the address would only shut out the
    // node's own agent and every user of that host.
    let after = RawPeer::connect(&address).ask(r#"{"op":"challenge","nonce":"ab"}"#);
    assert_eq!(after["ok"], true, "{after}");
    let log = daemon.log();
    assert!(log.matches("authentication failed from 127.0.0.1").count() >= 12, "{log}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// Root's daemon trusts whatever answers at its munged's socket to say who every remote user and agent is. That
/// socket came from `COSCHED_MUNGE_SOCKET` when the flag was not given, so a daemon started from a shell that
/// carried a user's environment (`sudo -E`, `su` without `-`) asked the user's own program, which could vouch for
/// uid 0. The daemons take their settings from their command line alone; clients still read the variable.
#[test]
fn a_munge_socket_named_in_the_daemons_environment_is_never_asked() {
    if skip_unless_root("a_munge_socket_named_in_the_daemons_environment_is_never_asked") {
        return;
    }
    let dir = fresh_dir("users-munged");
    std::os::unix::fs::chown(&dir, Some(ATTACKER), Some(ATTACKER)).unwrap();
    let socket = dir.join("munge.socket");
    // The user's stand-in for munged: it counts who asks and hangs up.
    let listener = std::os::unix::net::UnixListener::bind(&socket).unwrap();
    let asked = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counter = asked.clone();
    std::thread::spawn(move || {
        for connection in listener.incoming() {
            counter.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            drop(connection);
        }
    });
    // The key in a folder of root's: one in the user's folder is refused.
    let keys = fresh_dir("munged-key");
    let key = keys.join("agents.key");
    write_agents_key(&key);
    let address = format!("127.0.0.1:{}", free_port());
    let args = ["--tcp", &address, "--key-file", key.to_str().unwrap(), "--slice-ms", "50"];
    let daemon = Daemon::up_with_env(&args, &[("COSCHED_MUNGE_SOCKET", socket.to_str().unwrap())]);
    let job = daemon.submit(&["--", "true"]);
    wait_for("a job to run and end", Duration::from_secs(10), || daemon.job(job).is_some_and(|j| j.state.is_over()));
    let asked = asked.load(std::sync::atomic::Ordering::SeqCst);
    assert_eq!(asked, 0, "the daemon asked the user's socket {} times:\n{}", asked, daemon.log());
    drop(daemon);
    let _ = std::fs::remove_dir_all(&dir);
    let _ = std::fs::remove_dir_all(&keys);
}
