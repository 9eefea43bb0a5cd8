//! Starting real daemons and reading real process states for the runtime tests.

#![allow(dead_code, clippy::disallowed_methods)]

pub use cosched_policy::cluster::JobClass;
pub use cosched_runtime::wire::auth::Nonces;
pub use cosched_runtime::wire::jobs::JobState;
pub use cosched_runtime::wire::protocol::{StatusJob, StatusReply, StorageState, StorageStatus, SubmitReply};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

pub const COSCHED: &str = env!("CARGO_BIN_EXE_cosched");

/// Root is needed for cgroups; without it the test says so loudly and passes nothing.
pub fn skip_unless_root(test: &str) -> bool {
    if nix::unistd::geteuid().is_root() {
        return false;
    }
    cosched_runtime::testing::say_skipped(test, "needs root for cgroups and for starting jobs as other users");
    true
}

pub fn unique(prefix: &str) -> String {
    use std::sync::atomic::{AtomicU32, Ordering};
    static NEXT: AtomicU32 = AtomicU32::new(0);
    format!("{prefix}-{}-{}", std::process::id(), NEXT.fetch_add(1, Ordering::Relaxed))
}

/// A new directory under the temporary directory, root's, mode 0755 (users reach the sockets and files inside),
/// with a name nobody could guess or make first (mkdtemp). Kept until the caller removes it: a failed test leaves
/// it, with its logs, for a look.
pub fn fresh_dir(prefix: &str) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::Builder::new()
        .prefix(&format!("{prefix}-"))
        .permissions(std::fs::Permissions::from_mode(0o755))
        .tempdir()
        .unwrap_or_else(|e| panic!("a fresh directory in {}: {e}", std::env::temp_dir().display()));
    dir.keep()
}

/// A running daemon (`cosched up`, `controller` or `agent`), killed on drop.
pub struct Daemon {
    pub child: Child,
    pub dir: PathBuf,
    pub socket: PathBuf,
    pub node: String,
    /// The agent when it runs as a process of its own (`split`); with `up` the agent is `child`.
    pub agent: Option<Child>,
}

impl Daemon {
    /// `cosched up` with its own state directory, socket and node name.
    pub fn up(extra: &[&str]) -> Daemon {
        Daemon::up_with_env(extra, &[])
    }

    /// `cosched up` with these variables added to its environment.
    pub fn up_with_env(extra: &[&str], env: &[(&str, &str)]) -> Daemon {
        Daemon::up_under(&[], extra, env)
    }

    /// `cosched up` started through `wrapper` (e.g. `prlimit --nofile=300:300 --`).
    pub fn up_under(wrapper: &[&str], extra: &[&str], env: &[(&str, &str)]) -> Daemon {
        Daemon::up_in_under(fresh_dir("cosched-test"), wrapper, extra, env)
    }

    /// `cosched up` with `dir` (root's, 0755) as its state folder.
    pub fn up_in(dir: PathBuf, extra: &[&str]) -> Daemon {
        Daemon::up_in_under(dir, &[], extra, &[])
    }

    fn up_in_under(dir: PathBuf, wrapper: &[&str], extra: &[&str], env: &[(&str, &str)]) -> Daemon {
        let node = unique("t");
        let socket = dir.join("sock");
        let mut args = vec!["up", "--node", &node];
        // No monitor unless the test asks for one.
        if !extra.contains(&"--monitor") {
            args.extend(["--monitor", "off"]);
        }
        let (state, sock) = (dir.to_str().unwrap().to_string(), socket.to_str().unwrap().to_string());
        args.extend(["--state-dir", &state, "--socket", &sock]);
        args.extend(extra);
        let log = std::fs::File::create(dir.join("up.log")).unwrap();
        let mut command = match wrapper.split_first() {
            Some((program, wrapper_args)) => {
                let mut command = Command::new(program);
                command.args(wrapper_args).arg(COSCHED);
                command
            }
            None => Command::new(COSCHED),
        };
        let child = command
            .env("COSCHED_CONFIG", "none") // the test's settings, never the host's
            .args(&args)
            .envs(env.iter().copied())
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .unwrap();
        let daemon = Daemon { child, dir, socket, node, agent: None };
        daemon.wait_ready();
        daemon
    }

    /// `cosched controller` and a `cosched agent` as two processes, on the controller's Unix socket.
    pub fn split(extra: &[&str]) -> Daemon {
        Daemon::split_with(extra, &[])
    }

    /// `split`, with `agent_extra` added to the agent's arguments.
    pub fn split_with(extra: &[&str], agent_extra: &[&str]) -> Daemon {
        let node = unique("t");
        let dir = fresh_dir("cosched-test");
        let socket = dir.join("sock");
        let mut args = vec!["--nodes", &node];
        args.extend(extra);
        let child = spawn_controller(&dir, &socket, &args, "up.log");
        let mut daemon = Daemon { child, dir, socket, node, agent: None };
        wait_for("the controller to answer status", Duration::from_secs(10), || {
            daemon.client(&["status"]).status.success()
        });
        daemon.start_agent_with(agent_extra);
        daemon.wait_ready();
        daemon
    }

    /// Start the agent of a `split` daemon (again), appending to its log.
    pub fn start_agent(&mut self) {
        self.start_agent_with(&[]);
    }

    /// `start_agent` with `extra` added to the agent's arguments.
    pub fn start_agent_with(&mut self, extra: &[&str]) {
        let log = std::fs::OpenOptions::new().create(true).append(true).open(self.dir.join("agent.log")).unwrap();
        let agent = Command::new(COSCHED)
            .env("COSCHED_CONFIG", "none")
            .args(["agent", "--controller", self.socket.to_str().unwrap(), "--node", &self.node])
            .args(["--state-dir", self.dir.to_str().unwrap()])
            .args(extra)
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .unwrap();
        self.agent = Some(agent);
    }

    /// Kill the agent and, while a controller answers, wait until it has seen the agent go: a status taken just
    /// after the kill may still show the old connection.
    pub fn kill_agent(&mut self) {
        if let Some(mut agent) = self.agent.take() {
            let _ = agent.kill();
            let _ = agent.wait();
            wait_for("the controller to see the agent gone", Duration::from_secs(10), || {
                self.status().is_none_or(|s| s.nodes.iter().all(|n| !n.connected))
            });
        }
    }

    /// Restart the controller of a `split` daemon, waiting until it answers.
    pub fn restart_split_controller(&mut self, extra: &[&str]) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let mut args = vec!["--nodes", &self.node];
        args.extend(extra);
        self.child = spawn_controller(&self.dir, &self.socket, &args, "up2.log");
        wait_for("the controller to answer status", Duration::from_secs(10), || {
            self.client(&["status"]).status.success()
        });
    }

    pub fn restart(&mut self, extra: &[&str]) {
        self.restart_controller(extra);
        self.wait_ready();
    }

    /// Kill and start again, waiting only for the controller (its agent may be refused).
    pub fn restart_controller(&mut self, extra: &[&str]) {
        self.kill_hard();
        let (state, sock) = (self.dir.to_str().unwrap().to_string(), self.socket.to_str().unwrap().to_string());
        let mut args = vec!["up", "--monitor", "off", "--node", &self.node, "--state-dir", &state, "--socket", &sock];
        args.extend(extra);
        self.child = spawn_logged(&args, &self.dir.join("up2.log"));
        wait_for("the daemon to answer status", Duration::from_secs(10), || self.client(&["status"]).status.success());
    }

    pub fn wait_ready(&self) {
        wait_for("the daemon to answer status", Duration::from_secs(10), || self.client(&["status"]).status.success());
        wait_for_explained(
            "the agent to connect",
            Duration::from_secs(10),
            || self.any_node_connected(),
            || self.last_log_lines(5),
        );
    }

    /// The end of the log the agent writes to (a split daemon's `agent.log`; an `up` daemon's `up2.log` after a
    /// restart, else `up.log`), to say why a wait failed.
    fn last_log_lines(&self, count: usize) -> String {
        let names: &[&str] = if self.agent.is_some() { &["agent.log"] } else { &["up2.log", "up.log"] };
        let Some((name, text)) =
            names.iter().find_map(|name| Some((name, std::fs::read_to_string(self.dir.join(name)).ok()?)))
        else {
            return "; no daemon log".into();
        };
        let lines: Vec<&str> = text.lines().collect();
        format!("; {name} ends:\n{}", lines[lines.len().saturating_sub(count)..].join("\n"))
    }

    pub fn client(&self, args: &[&str]) -> Output {
        client_as(&self.socket, args, None)
    }

    pub fn client_as(&self, uid: u32, args: &[&str]) -> Output {
        client_as(&self.socket, args, Some(uid))
    }

    /// What `cosched status --json` prints, read into the protocol's struct (`None`: no answer).
    pub fn status(&self) -> Option<StatusReply> {
        let out = self.client(&["status", "--json"]);
        serde_json::from_slice(&out.stdout).ok()
    }

    /// The job's entry in `status` (`None`: no answer, or no such job).
    pub fn job(&self, id: u64) -> Option<StatusJob> {
        self.status()?.jobs.into_iter().find(|j| j.id == id)
    }

    /// Has an agent connected (per `status`)?
    pub fn any_node_connected(&self) -> bool {
        self.status().is_some_and(|s| s.nodes.iter().any(|n| n.connected))
    }

    /// Submit and return the job id.
    pub fn submit(&self, args: &[&str]) -> u64 {
        self.submit_as(None, args)
    }

    /// Submit as `uid` (`None`: root) and return the job id.
    pub fn submit_as(&self, uid: Option<u32>, args: &[&str]) -> u64 {
        let mut all = vec!["submit", "--json"];
        all.extend(args);
        let out = client_as(&self.socket, &all, uid);
        assert!(out.status.success(), "submit failed: {}", String::from_utf8_lossy(&out.stderr));
        serde_json::from_slice::<SubmitReply>(&out.stdout).unwrap().job
    }

    /// Wait until the job has `count` processes and return their pids.
    pub fn pids(&self, job: u64, count: usize) -> Vec<i32> {
        let mut pids = vec![];
        wait_for(&format!("job {job} to have {count} processes"), Duration::from_secs(10), || {
            pids = self.job(job).map(|j| j.pids).unwrap_or_default();
            pids.len() == count
        });
        pids
    }

    /// The shells of a job of `tasks` tasks each running `sh` under `timeout` (as `SPIN`), once all have started.
    pub fn spinners(&self, job: u64, tasks: usize) -> Vec<i32> {
        self.pids(job, 2 * tasks).into_iter().filter(|&p| is_shell(p)).collect()
    }

    /// Wait until the job's cgroup is gone. The agent removes it once the controller has the job's end, which comes
    /// after the job's record says it is over. (It looks where job cgroups go by default, not under a service's
    /// delegated cgroup.)
    pub fn wait_cgroup_gone(&self, job: u64) {
        wait_for(&format!("job {job}'s cgroup to go"), Duration::from_secs(30), || {
            !job_cgroups(&self.node).contains(&job)
        });
    }

    pub fn kill_hard(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("up.log")).unwrap_or_default()
    }

    /// Kill the daemon and start `cosched up` again, expecting it to refuse to start: returns what it said.
    pub fn start_refused(&mut self, extra: &[&str]) -> String {
        self.kill_hard();
        let (state, sock) = (self.dir.to_str().unwrap().to_string(), self.socket.to_str().unwrap().to_string());
        let mut args = vec!["up", "--monitor", "off", "--node", &self.node, "--state-dir", &state, "--socket", &sock];
        args.extend(extra);
        refused(&args, &self.dir.join("refused.log"))
    }

    /// The jobs table as (id, state, record), read from the backup once it holds every change: the live database is
    /// locked by the daemon, and a copy of its files could be inconsistent.
    pub fn stored_rows(&self) -> Vec<(i64, String, String)> {
        wait_for("the backup to hold every change", Duration::from_secs(30), || {
            self.status().is_some_and(|s| s.storage.backup.current)
        });
        rows_of(&self.dir.join("backup").join("cosched.db"))
    }
}

/// Run `cosched ARGS`, expecting it to refuse to start: returns what it said.
pub fn refused(args: &[&str], log: &Path) -> String {
    refused_start(spawn_logged(args, log), &format!("cosched {}", args[0]), log)
}

/// What `child` (`what`, logging to `log`) wrote before it failed, as it must within 20 s.
pub fn refused_start(mut child: Child, what: &str, log: &Path) -> String {
    let mut status = None;
    wait_for(&format!("{what} to refuse to start"), Duration::from_secs(20), || {
        status = child.try_wait().unwrap();
        status.is_some()
    });
    assert!(!status.unwrap().success(), "{what} started: {}", std::fs::read_to_string(log).unwrap_or_default());
    std::fs::read_to_string(log).unwrap()
}

/// The jobs table of a database file as (id, state, record).
pub fn rows_of(db: &Path) -> Vec<(i64, String, String)> {
    let conn = rusqlite::Connection::open_with_flags(db, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY).unwrap();
    let mut stmt = conn.prepare("SELECT id, state, record FROM jobs ORDER BY id").unwrap();
    let rows = stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?))).unwrap();
    rows.map(Result::unwrap).collect()
}

impl Drop for Daemon {
    fn drop(&mut self) {
        for job in self.status().map(|s| s.jobs).unwrap_or_default() {
            for pid in job.pids {
                let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), nix::sys::signal::Signal::SIGKILL);
            }
        }
        self.kill_hard();
        self.kill_agent();
        remove_agent_cgroups(&self.node);
        // Kept after a failure: its logs and database say what happened.
        if !std::thread::panicking() {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

/// Kill what is left of an agent's jobs and remove its cgroups (as a bench's private runtime does when it stops).
pub fn remove_agent_cgroups(node: &str) {
    cosched_bench::runtime::remove_node_cgroups(node);
}

/// `cosched controller` with its state in `dir`, logging to `dir/log`.
fn spawn_controller(dir: &Path, socket: &Path, extra: &[&str], log: &str) -> Child {
    let mut args = vec!["controller", "--monitor", "off"];
    args.extend(["--state-dir", dir.to_str().unwrap(), "--socket", socket.to_str().unwrap()]);
    args.extend(extra);
    spawn_logged(&args, &dir.join(log))
}

pub fn spawn_logged(args: &[&str], log: &Path) -> Child {
    let log = std::fs::File::create(log).unwrap();
    let mut command = Command::new(COSCHED);
    command.env("COSCHED_CONFIG", "none").args(args).stdin(Stdio::null());
    command.stdout(log.try_clone().unwrap()).stderr(log).spawn().unwrap()
}

pub fn client_as(socket: &Path, args: &[&str], uid: Option<u32>) -> Output {
    let mut command = Command::new(COSCHED);
    command.args(args).env("COSCHED_SOCKET", socket).current_dir("/tmp");
    if let Some(uid) = uid {
        command.uid(uid).gid(uid);
    }
    command.output().unwrap()
}

pub fn wait_for(what: &str, timeout: Duration, done: impl FnMut() -> bool) {
    wait_for_explained(what, timeout, done, String::new);
}

/// `wait_for`, whose failure also says what `explain` finds then.
pub fn wait_for_explained(
    what: &str,
    timeout: Duration,
    mut done: impl FnMut() -> bool,
    explain: impl FnOnce() -> String,
) {
    let start = Instant::now();
    while !done() {
        if start.elapsed() >= timeout {
            panic!("timed out waiting for {what} {}", explain());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// CPU time (user + system, clock ticks) of a process, `None` once it is gone.
pub fn cpu_ticks(pid: i32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
    Some(fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?)
}

/// May the process run user code now: on a CPU or waiting for one (`R`), and its cgroup not asked to freeze?
/// The short name of a process (empty once it is gone).
pub fn comm(pid: i32) -> String {
    std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default().trim().to_string()
}

pub fn is_shell(pid: i32) -> bool {
    comm(pid) == "sh"
}

/// A task of a job asked to freeze may show `R` for a moment while it goes to the freezer's trap, but runs no user
/// code any more (the switcher starts the next gang without waiting for every such task: docs/runtime.md).
pub fn is_running(pid: i32) -> bool {
    process_state(pid) == Some('R') && !freeze_requested(pid)
}

/// The state letter of a process in /proc (`R`, `S`, `T`, ...), `None` once it is gone.
pub fn process_state(pid: i32) -> Option<char> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat.rsplit_once(')')?.1.split_whitespace().next()?.chars().next()
}

/// Has the process's (v2) cgroup been asked to freeze (`cgroup.freeze` is 1)?
pub fn freeze_requested(pid: i32) -> bool {
    cgroup_dir_of(pid)
        .and_then(|dir| std::fs::read_to_string(dir.join("cgroup.freeze")).ok())
        .is_some_and(|value| value.trim() == "1")
}

pub fn any_running(pids: &[i32]) -> bool {
    pids.iter().any(|&p| is_running(p))
}

/// Samples of which gangs run, taken every ~1 ms for `duration`. A sample
/// counts only if the first gang's state is the same before and after the
/// others are read (no switch in between), so a switch cannot fake overlap.
pub struct Samples {
    pub consistent: usize,
    pub running: Vec<usize>,
    pub overlap: usize,
}

pub fn sample_gangs(gangs: &[Vec<i32>], duration: Duration) -> Samples {
    let mut s = Samples { consistent: 0, running: vec![0; gangs.len()], overlap: 0 };
    let start = Instant::now();
    while start.elapsed() < duration {
        let first = any_running(&gangs[0]);
        let states: Vec<bool> = gangs.iter().map(|g| any_running(g)).collect();
        if first == any_running(&gangs[0]) && first == states[0] {
            s.consistent += 1;
            for (i, &r) in states.iter().enumerate() {
                s.running[i] += usize::from(r);
            }
            s.overlap += usize::from(states.iter().filter(|&&r| r).count() > 1);
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    s
}

/// Does every process use CPU over `window`? (nothing left stopped)
pub fn all_progress(pids: &[i32], window: Duration) -> bool {
    let before: Vec<Option<u64>> = pids.iter().map(|&p| cpu_ticks(p)).collect();
    std::thread::sleep(window);
    pids.iter().zip(before).all(|(&p, b)| matches!((b, cpu_ticks(p)), (Some(b), Some(a)) if a > b))
}

pub const SPIN: &str = "timeout 120 sh -c 'while :; do :; done'";

/// CPU time each gang used over `window`, in clock ticks: whether every gang gets its turn, measured in a way a
/// loaded machine can slow down but not fake (sampling states can miss a starved gang's turns).
pub fn gang_cpu_ticks(gangs: &[Vec<i32>], window: Duration) -> Vec<u64> {
    let total = |gang: &Vec<i32>| gang.iter().filter_map(|&p| cpu_ticks(p)).sum::<u64>();
    let before: Vec<u64> = gangs.iter().map(total).collect();
    std::thread::sleep(window);
    gangs.iter().zip(before).map(|(g, b)| total(g).saturating_sub(b)).collect()
}

/// CPU ticks each gang used from now until every gang has used some, or `within` passed: a loaded machine may
/// keep a gang off the CPUs, or its processes may still be starting, for a while; only none at all is a failure.
pub fn gang_cpu_ticks_until_each_ran(gangs: &[Vec<i32>], within: Duration) -> Vec<u64> {
    let total = |gang: &Vec<i32>| gang.iter().filter_map(|&p| cpu_ticks(p)).sum::<u64>();
    let before: Vec<u64> = gangs.iter().map(total).collect();
    let start = std::time::Instant::now();
    loop {
        std::thread::sleep(Duration::from_millis(500));
        let used: Vec<u64> = gangs.iter().zip(&before).map(|(g, b)| total(g).saturating_sub(*b)).collect();
        if used.iter().all(|&t| t > 0) || start.elapsed() >= within {
            return used;
        }
    }
}

/// Every gang used CPU time (within 20 s): each got its turn `when` ("after the restart", "during the attack").
pub fn assert_every_gang_runs(gangs: &[Vec<i32>], when: &str) {
    let used = gang_cpu_ticks_until_each_ran(gangs, Duration::from_secs(20));
    assert!(used.iter().all(|&t| t > 0), "{when} a gang got no CPU time: {used:?} ticks");
}

/// Held by the tests that judge how gangs share the CPUs, across every test program of the suite
/// (`cosched_runtime::testing::whole_machine`).
pub fn whole_machine() -> cosched_runtime::testing::WholeMachine {
    cosched_runtime::testing::whole_machine()
}

/// An agents' key as an administrator makes it: 32 random bytes in hex, root's, mode 0600.
pub fn write_agents_key(path: &Path) {
    use std::os::unix::fs::OpenOptionsExt;
    let key = cosched_runtime::job_tag::random_hex(32).unwrap();
    let mut file = std::fs::OpenOptions::new().write(true).create_new(true).mode(0o600).open(path).unwrap();
    std::io::Write::write_all(&mut file, key.as_bytes()).unwrap();
}

/// A free TCP port on loopback (taken again at once by whoever binds it next).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// `cosched up` listening on TCP as well, with a private MUNGE realm; returns it and its TCP address.
pub fn tcp_daemon(munge: &cosched_munge::testing::PrivateMunged, extra: &[&str]) -> (Daemon, String) {
    let address = format!("127.0.0.1:{}", free_port());
    let socket = munge.socket().to_str().unwrap().to_string();
    let mut args = vec!["--tcp", &address, "--munge-socket", &socket];
    args.extend(extra);
    (Daemon::up(&args), address)
}

/// A private munged (its own key and socket) for tests of identity between hosts.
pub fn private_munged() -> cosched_munge::testing::PrivateMunged {
    cosched_munge::testing::PrivateMunged::start().expect("a private munged (scripts/setup installs munge)")
}

/// A MUNGE credential made by `uid` (through the `munge` command run as that user) carrying `payload`.
pub fn credential_of(uid: u32, munge: &cosched_munge::testing::PrivateMunged, payload: &str) -> String {
    let out = Command::new("munge")
        .args(["-S", munge.socket().to_str().unwrap(), "-s", payload])
        .uid(uid)
        .gid(uid)
        .output()
        .unwrap();
    assert!(out.status.success(), "munge as uid {uid}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}

/// Decode `credential` as `uid` would (munged checks the decoder's uid against the credential's restriction):
/// the uid it vouches for and its payload, or munged's refusal.
pub fn decode_as(
    uid: u32,
    munge: &cosched_munge::testing::PrivateMunged,
    credential: &str,
) -> Result<(u32, String), String> {
    use std::io::Write;
    let mut child = Command::new("unmunge")
        .args(["-S", munge.socket().to_str().unwrap(), "--numeric", "--keys=UID"])
        .uid(uid)
        .gid(uid)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(credential.as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    if !out.status.success() {
        return Err(String::from_utf8_lossy(&out.stderr).trim().to_string());
    }
    // `--keys=UID`: one "UID: <n>" line, an empty line, then the payload.
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let (header, payload) = text.split_once("\n\n").unwrap_or((&text, ""));
    let decoded_uid = header.split_whitespace().last().and_then(|n| n.parse().ok()).expect("a UID line");
    Ok((decoded_uid, payload.to_string()))
}

/// What a remote user's MUNGE credential says over a connection's `nonces` (see `auth`), with a session secret.
pub fn user_statement(nonces: &Nonces) -> String {
    format!("cosched-to-controller:user:{}:{}:{}", nonces.peer, nonces.controller, "5e".repeat(32))
}

/// What the agent of `node`'s proof says over a connection's `nonces`, with a session secret for MUNGE.
pub fn agent_statement(node: &str, nonces: &Nonces) -> String {
    format!("cosched-to-controller:agent {node}:{}:{}:{}", nonces.peer, nonces.controller, "5e".repeat(32))
}

/// A raw protocol connection over TCP: one JSON line out, one back.
pub struct RawPeer {
    reader: std::io::BufReader<std::net::TcpStream>,
    writer: std::net::TcpStream,
}

impl RawPeer {
    pub fn connect(address: &str) -> RawPeer {
        let stream = std::net::TcpStream::connect(address).unwrap();
        stream.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
        RawPeer { reader: std::io::BufReader::new(stream.try_clone().unwrap()), writer: stream }
    }

    /// Send a line and read the answer (`Null` if the connection closed without one). A sealed answer is read
    /// without checking its seal: these tests look at what the controller says.
    pub fn ask(&mut self, line: &str) -> serde_json::Value {
        use std::io::{BufRead, Write};
        let _ = self.writer.write_all(format!("{line}\n").as_bytes());
        let mut answer = String::new();
        let _ = self.reader.read_line(&mut answer);
        let unsealed = match answer.split_once(' ') {
            Some((seal, payload)) if seal.len() == 64 && seal.bytes().all(|b| b.is_ascii_hexdigit()) => payload,
            _ => &answer,
        };
        serde_json::from_str(unsealed).unwrap_or(serde_json::Value::Null)
    }

    /// Challenge the controller with a fresh nonce of ours: both nonces of this connection.
    pub fn challenge(&mut self) -> Nonces {
        let peer = cosched_runtime::wire::auth::fresh_nonce().unwrap();
        let reply = self.ask(&serde_json::json!({ "op": "challenge", "nonce": peer }).to_string());
        let controller = reply["data"]["nonce"].as_str().unwrap_or_else(|| panic!("no nonce in {reply}")).to_string();
        Nonces { peer, controller }
    }

    /// Has the other end closed the connection (read gives end of stream within `within`)?
    pub fn closed_within(&mut self, within: Duration) -> bool {
        use std::io::Read;
        self.writer.set_read_timeout(Some(within)).unwrap();
        let mut rest = Vec::new();
        self.reader.read_to_end(&mut rest).is_ok()
    }
}

/// A cosched client command run as `uid` against a controller on another host (TCP and MUNGE).
pub fn remote_client_as(
    uid: u32,
    address: &str,
    munge: &cosched_munge::testing::PrivateMunged,
    args: &[&str],
) -> Output {
    let socket = munge.socket().to_str().unwrap().to_string();
    let mut all = vec![args[0], "--controller", address, "--munge-socket", &socket];
    all.extend(&args[1..]);
    let mut command = Command::new(COSCHED);
    command.args(&all).env_remove("COSCHED_SOCKET").current_dir("/tmp").uid(uid).gid(uid);
    command.output().unwrap()
}

/// Where a hoarder connects: the daemon's Unix socket, or a TCP address with the source address to use.
pub enum HoardTarget<'a> {
    Unix(&'a Path),
    Tcp { to: &'a str, from: &'a str },
}

/// An attacker holding many connections to the daemon, as `uid` (a Python program: the kernel records the uid of
/// whoever connects, so the test process cannot do it itself). Held until dropped.
pub struct Hoarder {
    child: Child,
    /// Connections the daemon kept open, and those it answered with a refusal and closed.
    pub held: u64,
    pub refused: u64,
}

const HOARDER: &str = r#"
import json, select, socket, sys, time
kind, target, source, count = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
conns = []
for _ in range(count):
    try:
        if kind == "unix":
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        else:
            host, port = target.rsplit(":", 1)
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.bind((source, 0))
        s.settimeout(5)  # a daemon that stopped accepting fills the backlog: fail, do not hang
        s.connect(target if kind == "unix" else (host, int(port)))
        conns.append(s)
    except OSError:
        pass
# The daemon answers refusals as fast as the machine lets it: count once the answers stop coming (2 s without a
# new one), within 30 s.
poller = select.poll()
for s in conns:
    poller.register(s, select.POLLIN)
answered, last_change, started = set(), time.monotonic(), time.monotonic()
while time.monotonic() - last_change < 2.0 and time.monotonic() - started < 30.0:
    now_answered = {fd for fd, _ in poller.poll(100)}
    if now_answered - answered:
        answered |= now_answered
        last_change = time.monotonic()
print(json.dumps({"held": sum(s.fileno() not in answered for s in conns), "refused": len(answered)}), flush=True)
sys.stdin.read()
"#;

impl Hoarder {
    pub fn start(uid: u32, target: HoardTarget, count: usize) -> Hoarder {
        use std::io::BufRead;
        let (kind, to, from) = match target {
            HoardTarget::Unix(path) => ("unix", path.to_str().unwrap().to_string(), String::new()),
            HoardTarget::Tcp { to, from } => ("tcp", to.to_string(), from.to_string()),
        };
        let mut child = Command::new("python3")
            .args(["-c", HOARDER, kind, &to, &from, &count.to_string()])
            .uid(uid)
            .gid(uid)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("python3 (the attacker's tool here)");
        // Its count comes within 30 s and a few seconds of connecting, or the daemon hangs: then fail, not wait.
        let stdout = child.stdout.take().unwrap();
        let (sender, receiver) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut line = String::new();
            let _ = std::io::BufReader::new(stdout).read_line(&mut line);
            let _ = sender.send(line);
        });
        let line = receiver.recv_timeout(Duration::from_secs(120)).unwrap_or_else(|_| {
            let _ = child.kill();
            panic!("the hoarder gave no count within 120 s: the daemon stopped answering connections")
        });
        let counts: serde_json::Value =
            serde_json::from_str(&line).unwrap_or_else(|e| panic!("hoarder said {line:?}: {e}"));
        Hoarder { child, held: counts["held"].as_u64().unwrap(), refused: counts["refused"].as_u64().unwrap() }
    }
}

impl Drop for Hoarder {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Wait until the node's agent has switched a few times: after a restart or a reconnection, gangs the watchdog
/// thawed run together until the first schedule arrives.
pub fn wait_switching(daemon: &Daemon) {
    let (before, _) = switch_counters(daemon);
    wait_for("the agent to switch again", Duration::from_secs(10), || switch_counters(daemon).0 >= before + 3);
}

/// The node's switch counters from `status`: (switches, switch errors).
pub fn switch_counters(daemon: &Daemon) -> (u64, u64) {
    let first_node = daemon.status().and_then(|s| s.nodes.into_iter().next());
    first_node.map_or((0, 0), |node| (node.switches, node.switch_errors))
}
/// Pids of the watchdogs of agent `node`.
pub fn watchdogs_of(node: &str) -> Vec<i32> {
    let wanted = format!("__watchdog\0{node}\0");
    let pids = std::fs::read_dir("/proc").into_iter().flatten().flatten();
    pids.filter_map(|entry| entry.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| std::fs::read(format!("/proc/{pid}/cmdline")).is_ok_and(|c| c.ends_with(wanted.as_bytes())))
        .collect()
}

/// Where the cgroup v2 hierarchy is mounted.
pub fn v2_mount() -> PathBuf {
    // Read once: samplers call it for every process they look at, and each reading costs samples under load.
    static MOUNT: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    MOUNT
        .get_or_init(|| {
            let mountinfo = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
            let line = mountinfo.lines().find(|l| l.contains(" - cgroup2 ")).expect("a cgroup v2 mount");
            PathBuf::from(line.split_whitespace().nth(4).unwrap())
        })
        .clone()
}

/// `/proc/PID/cgroup` as the kernel gives it, trimmed; empty for a process gone.
pub fn cgroup_of(pid: i32) -> String {
    std::fs::read_to_string(format!("/proc/{pid}/cgroup")).unwrap_or_default().trim().to_string()
}

/// The v2 cgroup of a process (`None` when it is gone).
pub fn cgroup_dir_of(pid: i32) -> Option<PathBuf> {
    let cgroup = std::fs::read_to_string(format!("/proc/{pid}/cgroup")).ok()?;
    Some(v2_mount().join(cgroup.lines().find_map(|l| l.strip_prefix("0::/"))?))
}

/// Whether the v2 cgroup of a process is frozen (`None`: no v2 cgroup or gone).
pub fn frozen(pid: i32) -> Option<bool> {
    let events = std::fs::read_to_string(cgroup_dir_of(pid)?.join("cgroup.events")).ok()?;
    Some(events.contains("frozen 1"))
}

/// Neither gone nor a zombie.
pub fn is_alive(pid: i32) -> bool {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    stat.rsplit_once(')').and_then(|(_, rest)| rest.split_whitespace().next()).is_some_and(|s| s != "Z" && s != "X")
}

/// The job cgroups of agent `node` that are frozen or asked to freeze (`cgroup.freeze`, `cgroup.events`).
pub fn frozen_jobs(node: &str) -> Vec<PathBuf> {
    let dirs = std::fs::read_dir(v2_mount().join("cosched").join(node)).into_iter().flatten().flatten();
    dirs.map(|d| d.path())
        .filter(|d| {
            let read = |file: &str| std::fs::read_to_string(d.join(file)).unwrap_or_default();
            read("cgroup.freeze").trim() == "1" || read("cgroup.events").contains("frozen 1")
        })
        .collect()
}

/// Nothing of the node frozen and every spinner using CPU. Says (with `--nocapture`) how long the node's jobs stayed
/// frozen from the call, right after the fault: the figure `docs/security.md` reports; a bound on it here would
/// fail on a loaded machine.
pub fn wait_all_thawed(node: &str, spinners: &[i32], what: &str) {
    let fault = std::time::Instant::now();
    let mut thawed_after = None;
    wait_for(what, Duration::from_secs(10), || {
        let nothing_frozen = frozen_jobs(node).is_empty();
        if nothing_frozen && thawed_after.is_none() {
            thawed_after = Some(fault.elapsed());
        }
        nothing_frozen && all_progress(spinners, Duration::from_millis(200))
    });
    println!("fault-to-thawed: {what}: {:.1} ms", thawed_after.unwrap_or_default().as_secs_f64() * 1e3);
}

/// Every process the daemon lists for a job is the job's owner's, by every uid, and sits in that job's cgroup.
pub fn assert_processes_are_their_jobs_owners(daemon: &Daemon) {
    for job in daemon.status().map(|s| s.jobs).unwrap_or_default() {
        for &pid in &job.pids {
            let Ok(status) = std::fs::read_to_string(format!("/proc/{pid}/status")) else { continue }; // just ended
            let uids = status.lines().find_map(|l| l.strip_prefix("Uid:")).unwrap_or_default().to_string();
            let owner = job.uid.to_string();
            assert!(uids.split_whitespace().all(|u| u == owner), "process {pid} (uids {uids}) is in job {job:?}");
            if let Some(dir) = cgroup_dir_of(pid) {
                assert!(dir.ends_with(format!("job-{}", job.id)), "process {pid} of job {} is in {dir:?}", job.id);
            }
        }
    }
}

/// An attacker who keeps `per_source` connections open from each source address, silent, and opens a new one
/// whenever the daemon closes one (as a real hoarder would), as `uid`. Held until dropped; `counts` asks it how
/// it is doing.
pub struct PersistentHoarder {
    child: Child,
    stdin: std::process::ChildStdin,
    answers: std::sync::mpsc::Receiver<String>,
}

/// What a persistent hoarder has done: connections open now, opened in all, closed by the daemon.
#[derive(Clone, Copy, Debug)]
pub struct HoardCounts {
    pub held: u64,
    pub opened: u64,
    pub closed_by_daemon: u64,
}

const PERSISTENT_HOARDER: &str = r#"
import json, select, socket, sys, time
host, port = sys.argv[1].rsplit(":", 1)
sources, per_source = sys.argv[2].split(","), int(sys.argv[3])
open_by_fd, opened, closed = {}, 0, 0
poller = select.poll()
poller.register(sys.stdin.fileno(), select.POLLIN)
def connect(source):
    global opened
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        s.bind((source, 0))
        s.settimeout(2)
        s.connect((host, int(port)))
    except OSError:
        s.close()
        return
    open_by_fd[s.fileno()] = (s, source)
    poller.register(s.fileno(), select.POLLIN)
    opened += 1
def held_from(source):
    return sum(1 for (_, src) in open_by_fd.values() if src == source)
while True:
    for source in sources:
        while held_from(source) < per_source:
            before = opened
            connect(source)
            if opened == before:
                break
    # Closes first, then questions: an answer counts every close seen in the same poll.
    events = sorted(poller.poll(20), key=lambda event: event[0] == sys.stdin.fileno())
    for fd, _ in events:
        if fd == sys.stdin.fileno():
            if not sys.stdin.readline():
                sys.exit(0)
            print(json.dumps({"held": len(open_by_fd), "opened": opened, "closed_by_daemon": closed}), flush=True)
            continue
        s, _ = open_by_fd.pop(fd)
        poller.unregister(fd)
        s.close()
        closed += 1
    time.sleep(0.005)
"#;

impl PersistentHoarder {
    pub fn start(uid: u32, to: &str, sources: &[&str], per_source: usize) -> PersistentHoarder {
        use std::io::BufRead;
        let mut child = Command::new("python3")
            .args(["-c", PERSISTENT_HOARDER, to, &sources.join(","), &per_source.to_string()])
            .uid(uid)
            .gid(uid)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("python3 (the attacker's tool here)");
        let stdin = child.stdin.take().unwrap();
        let stdout = child.stdout.take().unwrap();
        let (sender, answers) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in std::io::BufReader::new(stdout).lines().map_while(Result::ok) {
                if sender.send(line).is_err() {
                    return;
                }
            }
        });
        PersistentHoarder { child, stdin, answers }
    }

    pub fn counts(&mut self) -> HoardCounts {
        use std::io::Write;
        self.stdin.write_all(b"?\n").unwrap();
        let line = self.answers.recv_timeout(Duration::from_secs(30)).expect("the hoarder answers");
        let v: serde_json::Value = serde_json::from_str(&line).unwrap();
        let get = |k: &str| v[k].as_u64().unwrap();
        HoardCounts { held: get("held"), opened: get("opened"), closed_by_daemon: get("closed_by_daemon") }
    }

    /// Wait until it holds at least `held` connections at once.
    pub fn wait_holding(&mut self, held: u64) -> HoardCounts {
        let mut counts = self.counts();
        wait_for(&format!("the hoarder to hold {held} connections"), Duration::from_secs(20), || {
            counts = self.counts();
            counts.held >= held
        });
        counts
    }
}

impl Drop for PersistentHoarder {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The monitor's address, which the controller writes once it listens.
pub fn monitor_address(daemon: &Daemon) -> String {
    let file = daemon.dir.join("monitor.addr");
    let mut address = String::new();
    wait_for("the monitor's address", Duration::from_secs(10), || {
        address = std::fs::read_to_string(&file).unwrap_or_default().trim().to_string();
        !address.is_empty()
    });
    address
}

/// One HTTP/1.1 exchange with the monitor at `address`: the request line, then `headers` (the Host header among
/// them when wanted), no body. Returns (status, head, body).
pub fn http_exchange(address: &str, method: &str, target: &str, headers: &[(&str, &str)]) -> (u16, String, String) {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect(address).unwrap();
    stream.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    let mut request = format!("{method} {target} HTTP/1.1\r\n");
    for (name, value) in headers {
        request += &format!("{name}: {value}\r\n");
    }
    request += "\r\n";
    stream.write_all(request.as_bytes()).unwrap();
    let mut answer = Vec::new();
    if let Err(e) = stream.read_to_end(&mut answer) {
        panic!("{method} {target}: {e} after {:?}", String::from_utf8_lossy(&answer));
    }
    let answer = String::from_utf8(answer).unwrap();
    let (head, body) = answer.split_once("\r\n\r\n").unwrap_or_else(|| panic!("no head in {answer:?}"));
    let status = head.split(' ').nth(1).and_then(|s| s.parse().ok()).unwrap_or_else(|| panic!("status of {head}"));
    (status, head.to_string(), body.to_string())
}

/// Processes still alive (not zombies) whose command line is exactly `sleep <seconds>`.
pub fn sleeps_of(seconds: u32) -> Vec<i32> {
    let wanted = format!("sleep\0{seconds}\0");
    let entries = std::fs::read_dir("/proc").into_iter().flatten().flatten();
    let pids = entries.filter_map(|entry| entry.file_name().to_str()?.parse::<i32>().ok());
    pids.filter(|&pid| std::fs::read(format!("/proc/{pid}/cmdline")).is_ok_and(|c| c == wanted.as_bytes()))
        .filter(|&pid| is_alive(pid))
        .collect()
}

/// The job cgroups the node's agent has (in any hierarchy).
pub fn job_cgroups(node: &str) -> Vec<u64> {
    cosched_runtime::agent::freezer::JobGroups::open(node, None).unwrap().existing_jobs().unwrap()
}
