#![allow(clippy::disallowed_methods)] // tests of the real runtime read the real clock
//! Attacks through the file system: a user makes first, or links elsewhere, a directory root is about to write in.
//! The private Slurm's DIR (`scripts/slurm`) made by a user, under `--dir`, `$COSCHED_SLURM_DIR` or the default; a
//! `jobs` link swapped in while `start` runs, to turn root's `chmod 1777` on a root-only directory; a user's link
//! in `jobs/` that `stop` would write through; the daemon's state and socket directories made by a user. Root
//! refuses such a directory, naming it and its owner, and changes nothing in it. See `mod.rs`.

use super::ATTACKER;
use crate::harness::*;
use std::collections::BTreeMap;
use std::io::Write;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

const SLURM_SCRIPT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../scripts/slurm");

/// `scripts/slurm ARGS` as root, bounded in time (a start that proceeds takes a few seconds).
fn slurm_script(args: &[&str]) -> Output {
    Command::new("timeout").arg("120").arg(SLURM_SCRIPT).args(args).output().expect("scripts/slurm runs")
}

/// `sh -c SCRIPT sh ARGS...` as the attacker, in `/`; its stdout, or a panic with its stderr.
fn as_attacker(script: &str, args: &[&str]) -> String {
    let out = Command::new("sh")
        .args(["-c", script, "sh"])
        .args(args)
        .current_dir("/")
        .uid(ATTACKER)
        .gid(ATTACKER)
        .output()
        .unwrap();
    assert!(out.status.success(), "as uid {ATTACKER}: {script}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// A directory the attacker made under the temporary directory, before root came, with a file and a `jobs`
/// directory of its own in it. On drop: whatever root may have started there is stopped, then it is removed.
struct PlantedDir {
    path: PathBuf,
}

impl PlantedDir {
    fn new(prefix: &str) -> PlantedDir {
        let template = std::env::temp_dir().join(format!("{prefix}.XXXXXX"));
        let made = as_attacker(
            r#"d=$(mktemp -d "$1") && chmod 755 "$d" && mkdir "$d/jobs" && echo mine >"$d/jobs/kept" &&
               echo mine >"$d/kept" && echo "$d""#,
            &[template.to_str().unwrap()],
        );
        PlantedDir { path: PathBuf::from(made) }
    }

    fn arg(&self) -> &str {
        self.path.to_str().unwrap()
    }
}

impl Drop for PlantedDir {
    fn drop(&mut self) {
        // Only if the script accepted the directory did anything start there.
        let _ = slurm_script(&["stop", "--dir", self.arg()]);
        let _ = std::fs::remove_dir_all(&self.path);
    }
}

/// Every entry under `dir`, links not followed: its owner, mode, and what it holds or points to.
fn snapshot(dir: &Path) -> BTreeMap<PathBuf, (u32, u32, String)> {
    let mut entries = BTreeMap::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(path) = pending.pop() {
        let meta = std::fs::symlink_metadata(&path).unwrap();
        let content = if meta.file_type().is_symlink() {
            format!("-> {}", std::fs::read_link(&path).unwrap().display())
        } else if meta.is_dir() {
            pending.extend(std::fs::read_dir(&path).unwrap().map(|e| e.unwrap().path()));
            String::new()
        } else {
            std::fs::read_to_string(&path).unwrap_or_else(|_| "<not text>".into())
        };
        entries.insert(path, (meta.uid(), meta.mode(), content));
    }
    entries
}

/// A port P such that P and P + 1 (slurmctld's and slurmd's) were both free a moment ago.
fn free_port_pair() -> String {
    for _ in 0..100 {
        let port = free_port();
        if port < u16::MAX && std::net::TcpListener::bind(("127.0.0.1", port + 1)).is_ok() {
            return port.to_string();
        }
    }
    panic!("no two free ports in a row");
}

/// A fresh directory only root may enter (0700), removed on drop.
fn root_only_dir() -> tempfile::TempDir {
    let permissions = std::fs::Permissions::from_mode(0o700);
    tempfile::Builder::new().prefix("cosched-root-only-").permissions(permissions).tempdir().unwrap()
}

fn mode_of(path: &Path) -> u32 {
    std::fs::symlink_metadata(path).unwrap().mode() & 0o7777
}

#[test]
fn a_slurm_dir_another_user_made_is_refused_by_every_command_and_left_untouched() {
    if skip_unless_root("a_slurm_dir_another_user_made_is_refused_by_every_command_and_left_untouched") {
        return;
    }
    let planted = PlantedDir::new("cosched-slurm-planted");
    // Their own slurmctld pid file too: `stop` would kill that pid and remove the file.
    as_attacker(r#"mkdir "$1/run" && echo 1 >"$1/run/slurmctld.pid""#, &[planted.arg()]);
    let before = snapshot(&planted.path);
    let port = free_port_pair();
    for (command, extra) in [("start", vec!["--port", &port]), ("status", vec![]), ("stop", vec![]), ("run", vec![])] {
        let mut args = vec![command, "--dir", planted.arg()];
        args.extend(extra);
        if command == "run" {
            args.extend(["--", "true"]);
        }
        let out = slurm_script(&args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "scripts/slurm {command} used a directory uid {ATTACKER} made:\n{stderr}");
        assert!(
            stderr.contains(planted.arg()) && stderr.contains(&format!("uid {ATTACKER}")),
            "{command}: the refusal names neither the directory nor its owner:\n{stderr}"
        );
        assert_eq!(snapshot(&planted.path), before, "scripts/slurm {command} changed the attacker's directory");
    }
    // The same directory through the environment.
    let out = Command::new(SLURM_SCRIPT).arg("status").env("COSCHED_SLURM_DIR", &planted.path).output().unwrap();
    assert!(!out.status.success(), "status through $COSCHED_SLURM_DIR: {}", String::from_utf8_lossy(&out.stdout));
    assert_eq!(snapshot(&planted.path), before);
}

#[test]
fn the_default_slurm_dir_is_one_no_other_user_can_make_first() {
    if skip_unless_root("the_default_slurm_dir_is_one_no_other_user_can_make_first") {
        return;
    }
    let out = Command::new(SLURM_SCRIPT).arg("status").env_remove("COSCHED_SLURM_DIR").output().unwrap();
    let said = String::from_utf8_lossy(&out.stdout);
    let default = said.strip_prefix("private Slurm in ").and_then(|rest| rest.split(':').next());
    let default = PathBuf::from(default.unwrap_or_else(|| panic!("status named no directory: {said}")));
    let parent = default.parent().unwrap().to_str().unwrap().to_string();
    // The attacker can make no name beside it, so not it either; and whatever is there is root's.
    let made = Command::new("mktemp")
        .args(["-d", &format!("{parent}/cosched-slurm-probe.XXXXXX")])
        .uid(ATTACKER)
        .gid(ATTACKER)
        .output()
        .unwrap();
    if made.status.success() {
        let _ = std::fs::remove_dir(String::from_utf8_lossy(&made.stdout).trim());
    }
    assert!(!made.status.success(), "uid {ATTACKER} can make directories beside the default {}", default.display());
    if let Ok(meta) = std::fs::symlink_metadata(&default) {
        assert_eq!(meta.uid(), 0, "the default {} is not root's", default.display());
    }
}

/// The attacker's loop: keep `DIR/jobs` a link to TARGET, moving root's fresh `jobs` aside whenever it appears,
/// until its stdin closes.
const JOBS_SWAPPER: &str = r#"
import os, select, sys
d, target = sys.argv[1], sys.argv[2]
jobs, n = os.path.join(d, "jobs"), 0
while True:
    n += 1
    if n % 2000 == 0 and select.select([sys.stdin], [], [], 0)[0]:
        break
    try:
        if not os.path.islink(jobs):
            if os.path.isdir(jobs):
                os.rename(jobs, os.path.join(d, "aside-%d" % n))
            os.symlink(target, jobs)
    except OSError:
        pass
"#;

#[test]
fn a_jobs_link_swapped_in_while_start_runs_never_gets_roots_chmod() {
    if skip_unless_root("a_jobs_link_swapped_in_while_start_runs_never_gets_roots_chmod") {
        return;
    }
    let _machine = whole_machine();
    let victim = root_only_dir();
    std::fs::write(victim.path().join("secret"), "root's").unwrap();
    assert_eq!(mode_of(victim.path()), 0o700);
    let planted = PlantedDir::new("cosched-slurm-race");
    let mut swapper = Command::new("python3")
        .args(["-c", JOBS_SWAPPER, planted.arg(), victim.path().to_str().unwrap()])
        .uid(ATTACKER)
        .gid(ATTACKER)
        .stdin(Stdio::piped())
        .spawn()
        .expect("python3 (the attacker's tool here)");
    let jobs = planted.path.join("jobs");
    wait_for("the attacker's link", Duration::from_secs(20), || jobs.is_symlink());
    // The attack won 3 of 3 in the issue, at least 1 of 5 here; a start that is refused returns at once.
    for attempt in 1..=5 {
        let out = slurm_script(&["start", "--dir", planted.arg(), "--port", &free_port_pair()]);
        let _ = slurm_script(&["stop", "--dir", planted.arg()]);
        assert_eq!(
            mode_of(victim.path()),
            0o700,
            "start {attempt} (exit {:?}) changed the mode of a root-only directory through the attacker's link:\n{}",
            out.status.code(),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    drop(swapper.stdin.take());
    let _ = swapper.wait();
}

#[test]
fn stop_never_writes_through_a_link_a_user_put_in_jobs() {
    if skip_unless_root("stop_never_writes_through_a_link_a_user_put_in_jobs") {
        return;
    }
    // An instance's directory as `start` leaves it (root's, 0755, `jobs` 1777), not running.
    let dir = fresh_dir("cosched-slurm-stop");
    let jobs = dir.join("jobs");
    std::fs::create_dir(&jobs).unwrap();
    std::fs::set_permissions(&jobs, std::fs::Permissions::from_mode(0o1777)).unwrap();
    // Root's FIFO in a root-only directory, held open so that anything written to it stays readable.
    let secret = root_only_dir();
    let fifo = secret.path().join("fifo");
    nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
    use std::os::unix::fs::OpenOptionsExt;
    let mut held =
        std::fs::OpenOptions::new().read(true).write(true).custom_flags(nix::libc::O_NONBLOCK).open(&fifo).unwrap();
    as_attacker(
        r#"mkdir "$1/run.evil" && ln -s "$2" "$1/run.evil/done""#,
        &[jobs.to_str().unwrap(), fifo.to_str().unwrap()],
    );
    let out = slurm_script(&["stop", "--dir", dir.to_str().unwrap()]);
    assert!(out.status.success(), "stop: {}", String::from_utf8_lossy(&out.stderr));
    let mut written = [0u8; 64];
    let read = std::io::Read::read(&mut held, &mut written);
    assert!(
        read.as_ref().is_err_and(|e| e.kind() == std::io::ErrorKind::WouldBlock),
        "root's stop wrote {:?} into root's FIFO through the user's link",
        read.map(|n| String::from_utf8_lossy(&written[..n]).into_owned())
    );
    let _ = held.flush();
    let _ = std::fs::remove_dir_all(&dir);
}

/// Start `cosched ARGS`; it must refuse within 20 s. Returns its stderr; a daemon that started instead is
/// stopped, its node's cgroups removed, and the test fails.
fn refused_at_start(args: &[&str], node: &str) -> String {
    let mut child = Command::new(COSCHED).args(args).stdout(Stdio::null()).stderr(Stdio::piped()).spawn().unwrap();
    let started = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if started.elapsed() > Duration::from_secs(20) {
            let _ = child.kill();
            let _ = child.wait();
            remove_agent_cgroups(node);
            panic!("cosched {args:?} started instead of refusing");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let output = child.wait_with_output().unwrap();
    remove_agent_cgroups(node);
    assert!(!output.status.success(), "cosched {args:?} exited 0");
    String::from_utf8_lossy(&output.stderr).into_owned()
}

#[test]
fn the_daemon_refuses_state_and_socket_directories_another_user_made() {
    if skip_unless_root("the_daemon_refuses_state_and_socket_directories_another_user_made") {
        return;
    }
    let planted = PlantedDir::new("cosched-state-planted");
    let own = fresh_dir("cosched-state-own");
    let before = snapshot(&planted.path);
    let node = unique("planted");
    let in_planted = |name: &str| planted.path.join(name).to_str().unwrap().to_string();
    let in_own = |name: &str| own.join(name).to_str().unwrap().to_string();
    let cases: [(&str, Vec<String>); 4] = [
        (
            "state and socket",
            vec!["up".into(), "--state-dir".into(), planted.arg().into(), "--socket".into(), in_planted("sock")],
        ),
        (
            "state below",
            vec!["up".into(), "--state-dir".into(), in_planted("state"), "--socket".into(), in_own("sock")],
        ),
        ("socket", vec!["up".into(), "--state-dir".into(), in_own("state"), "--socket".into(), in_planted("sock")]),
        (
            "agent state",
            vec!["agent".into(), "--controller".into(), in_own("none.sock"), "--state-dir".into(), in_planted("agent")],
        ),
    ];
    for (what, args) in cases {
        let mut args: Vec<&str> = args.iter().map(String::as_str).collect();
        args.extend(["--node", &node]);
        if args[0] == "up" {
            args.extend(["--monitor", "off"]);
        }
        let stderr = refused_at_start(&args, &node);
        assert!(
            stderr.contains(planted.arg()) && stderr.contains(&format!("uid {ATTACKER}")),
            "{what}: the refusal names neither the directory nor its owner:\n{stderr}"
        );
        assert_eq!(snapshot(&planted.path), before, "{what}: the daemon changed the attacker's directory");
    }
    let _ = std::fs::remove_dir_all(&own);
}

/// A script run as root builds and runs its checkout's code: from a checkout another user could change (theirs, a
/// file of theirs in it, a file anyone may write), a script stops before doing anything, naming what fails; from a
/// root-only copy of the same scripts it runs.
#[test]
fn a_script_root_runs_refuses_a_checkout_another_user_could_change() {
    let scripts = Path::new(SLURM_SCRIPT).parent().unwrap();
    let run_help = |checkout: &Path, script: &str| {
        Command::new("timeout").arg("60").arg(checkout.join("scripts").join(script)).arg("--help").output().unwrap()
    };
    let fresh_checkout = || {
        let base = root_only_dir();
        let copied = Command::new("cp").arg("-a").arg(scripts).arg(base.path().join("scripts")).status().unwrap();
        assert!(copied.success(), "copying scripts/");
        base
    };
    let clean = fresh_checkout();
    let out = run_help(clean.path(), "slurm");
    assert!(out.status.success(), "slurm from a root-only checkout: {}", String::from_utf8_lossy(&out.stderr));
    let theirs = |checkout: &Path| {
        let planted = checkout.join("Makefile");
        std::fs::write(&planted, "all:\n").unwrap();
        std::os::unix::fs::chown(&planted, Some(ATTACKER), None).unwrap();
        planted
    };
    let anyones = |checkout: &Path| {
        let planted = checkout.join("scripts").join("lib").join("extra.sh");
        std::fs::write(&planted, "true\n").unwrap();
        std::fs::set_permissions(&planted, std::fs::Permissions::from_mode(0o666)).unwrap();
        planted
    };
    let their_checkout = |checkout: &Path| {
        std::os::unix::fs::chown(checkout, Some(ATTACKER), None).unwrap();
        checkout.to_path_buf()
    };
    type Plant<'a> = (&'a str, &'a dyn Fn(&Path) -> PathBuf);
    let plants: [Plant; 3] =
        [("a file of theirs", &theirs), ("a file anyone may write", &anyones), ("their checkout", &their_checkout)];
    for (what, plant) in plants {
        let checkout = fresh_checkout();
        let named = plant(checkout.path());
        for script in ["slurm", "bench-controller-daemon"] {
            let out = run_help(checkout.path(), script);
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert!(
                !out.status.success() && stderr.contains(named.to_str().unwrap()),
                "{script} ran as root from a checkout with {what} ({}):\n{stderr}",
                named.display()
            );
        }
    }
}
