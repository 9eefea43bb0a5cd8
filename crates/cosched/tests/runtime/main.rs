//! The real coscheduler, end to end: `cosched up` on real cgroups, real jobs,
//! checked through /proc. Needs root (we are root here; elsewhere these
//! tests print SKIPPED).

mod harness;

use harness::*;
use std::time::Duration;

/// The longest test, about two minutes of Slurm's time that no CPU can shorten, started first: libtest starts
/// tests in the order of their names, and in `slurm::` it would start last and hold the suite up at its end.
#[test]
fn a_slurm_job_sliced_three_ways_keeps_its_time_limit() {
    slurm::a_slurm_job_sliced_three_ways_keeps_its_time_limit();
}

const SPIN_ARGS: [&str; 5] = ["timeout", "120", "sh", "-c", "while :; do :; done"];

fn spin_job(daemon: &Daemon, tasks: &str, extra: &[&str]) -> u64 {
    let mut args = vec!["-n", tasks];
    args.extend(extra);
    args.push("--");
    args.extend(SPIN_ARGS);
    daemon.submit(&args)
}

/// `kill` takes several jobs and tries each (an unknown one is named, the others still go); `status JOBID…
/// --noheader` lists those jobs alone, a line each, and a killed job says "killed" once.
#[test]
fn several_jobs_are_killed_at_once_and_listed_by_id() {
    if skip_unless_root("several_jobs_are_killed_at_once_and_listed_by_id") {
        return;
    }
    let daemon = Daemon::up(&[]);
    let ids: Vec<String> = (0..3).map(|_| daemon.submit(&["--", "sleep", "300"]).to_string()).collect();
    let listed = daemon.client(&["status", "--noheader", &ids[0], &ids[2]]);
    let text = String::from_utf8_lossy(&listed.stdout).to_string();
    let first_words: Vec<&str> = text.lines().filter_map(|l| l.split_whitespace().next()).collect();
    assert_eq!(first_words, [ids[0].as_str(), ids[2].as_str()], "{text}");
    let unknown = daemon.client(&["status", "999999"]);
    assert!(!unknown.status.success() && String::from_utf8_lossy(&unknown.stderr).contains("no job 999999"));

    let killed = daemon.client(&["kill", &ids[0], "999999", &ids[1]]);
    assert!(!killed.status.success(), "an unknown job must fail the command");
    assert!(String::from_utf8_lossy(&killed.stderr).contains("job 999999"), "{killed:?}");
    for id in &ids[..2] {
        let id: u64 = id.parse().unwrap();
        wait_for("the job to be killed", Duration::from_secs(10), || {
            daemon.job(id).is_some_and(|j| j.state == JobState::Killed)
        });
    }
    assert_eq!(daemon.job(ids[2].parse().unwrap()).map(|j| j.state), Some(JobState::Running));
    let line = String::from_utf8_lossy(&daemon.client(&["status", "--noheader", &ids[0]]).stdout).to_string();
    assert_eq!(line.matches("killed").count(), 1, "the state said once: {line}");
    assert!(daemon.client(&["kill", &ids[2]]).status.success());
}

/// Ended jobs stay in `history` after they leave `status`, with their exit status and CPU time, and after the daemon
/// restarts; `--format` chooses the columns and `-s` the states.
#[test]
fn history_lists_ended_jobs_after_they_leave_status_and_after_a_restart() {
    if skip_unless_root("history_lists_ended_jobs_after_they_leave_status_and_after_a_restart") {
        return;
    }
    let flags = ["--keep-finished-s", "0"];
    let mut daemon = Daemon::up(&flags);
    let finishing =
        daemon.client(&["submit", "--wait", "--", "sh", "-c", "i=0; while [ $i -lt 20000 ]; do i=$((i+1)); done"]);
    assert_eq!(finishing.status.code(), Some(0), "{finishing:?}");
    assert_eq!(daemon.client(&["submit", "--wait", "--", "sh", "-c", "exit 3"]).status.code(), Some(3));
    let lines = |daemon: &Daemon| {
        let out = daemon.client(&["history", "--noheader", "--format", "state,exitcode,command"]);
        assert!(out.status.success(), "{out:?}");
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(|l| l.split_whitespace().take(2).collect::<Vec<_>>().join(" "))
            .collect::<Vec<_>>()
    };
    assert_eq!(lines(&daemon), ["finished 0", "failed 3"]);
    let json = daemon.client(&["history", "--json", "-s", "finished"]);
    let reply: cosched_runtime::wire::protocol::HistoryReply = serde_json::from_slice(&json.stdout).unwrap();
    assert_eq!(reply.jobs.len(), 1, "{reply:?}");
    assert!(reply.jobs[0].cpu_ns > 0, "the CPU time of the loop is kept: {reply:?}");
    daemon.restart(&flags);
    assert_eq!(lines(&daemon), ["finished 0", "failed 3"], "after a restart");
    let refused = daemon.client(&["history", "-S", "last tuesday"]);
    assert!(String::from_utf8_lossy(&refused.stderr).contains("--starttime 'last tuesday'"), "{refused:?}");
}

/// `kill` picks jobs as scancel does (`-u`, `-t`, `-n`, states by Slurm's codes), and `status -o` prints the jobs'
/// columns alone, as squeue does.
#[test]
fn kill_and_status_pick_jobs_as_scancel_and_squeue_do() {
    if skip_unless_root("kill_and_status_pick_jobs_as_scancel_and_squeue_do") {
        return;
    }
    let daemon = Daemon::up(&["--slice-ms", "50", "--rows", "1", "--cpus", "1"]);
    let nobody = 65534;
    let sleep = |uid: Option<u32>, name: &str| daemon.submit_as(uid, &["-J", name, "--", "sleep", "300"]);
    let (running, queued, other_name, roots) =
        (sleep(Some(nobody), "sweep"), sleep(Some(nobody), "sweep"), sleep(Some(nobody), "plot"), sleep(None, "sweep"));
    wait_for("the first job to run", Duration::from_secs(20), || {
        daemon.job(running).is_some_and(|j| j.state == JobState::Running)
    });
    let table = daemon.client(&["status", "-t", "R,PD", "-o", "jobid,st,name"]);
    let text = String::from_utf8_lossy(&table.stdout).into_owned();
    assert!(text.starts_with("job") && !text.contains("connected"), "no node table with -o:\n{text}");
    assert!(text.contains(&format!("{running} R ")) || text.contains(&format!("{running}  R")), "{text}");
    let nothing = daemon.client(&["kill"]);
    assert!(String::from_utf8_lossy(&nothing.stderr).contains("-u USER"), "{nothing:?}");
    let killed = daemon.client_as(nobody, &["kill", "-u", "nobody", "-n", "sweep", "-t", "PD,R"]);
    assert!(killed.status.success(), "{killed:?}");
    wait_for("the user's two sweeps to end", Duration::from_secs(20), || {
        [running, queued].iter().all(|&id| daemon.job(id).is_some_and(|j| j.state.is_over()))
    });
    for id in [other_name, roots] {
        assert!(!daemon.job(id).unwrap().state.is_over(), "job {id} was killed: not theirs, or not named so");
    }
    // Another user's jobs picked by a filter are refused one by one, and stay.
    let refused = daemon.client_as(nobody, &["kill", "-u", "root"]);
    assert!(!refused.status.success() && !daemon.job(roots).unwrap().state.is_over(), "{refused:?}");
}

/// `submit -t` ends a job once it has run its limit in its slots, as Slurm ends a job at its time limit, and `-J`
/// names it in the history.
#[test]
fn a_job_is_ended_at_its_time_limit_and_keeps_its_name() {
    if skip_unless_root("a_job_is_ended_at_its_time_limit_and_keeps_its_name") {
        return;
    }
    let daemon = Daemon::up(&["--kill-wait-s", "1"]);
    let limited = daemon.client(&["submit", "--wait", "-J", "nightly", "-t", "0:02", "--", "sleep", "60"]);
    assert_ne!(limited.status.code(), Some(0), "{limited:?}");
    let out = daemon.client(&["history", "--json"]);
    let reply: cosched_runtime::wire::protocol::HistoryReply = serde_json::from_slice(&out.stdout).unwrap();
    let job = &reply.jobs[0];
    assert_eq!((job.name.as_str(), job.state, job.time_limit_s), ("nightly", JobState::TimedOut, Some(2)), "{job:?}");
    assert!(job.error.as_deref().unwrap_or("").contains("time limit: 2 s"), "{job:?}");
    assert!(job.in_slot_ms >= 2_000, "{job:?}");
    let ran_ms = job.ended_unix_ms.unwrap() - job.started_unix_ms.unwrap();
    assert!((2_000..55_000).contains(&ran_ms), "ended by its limit, not by its end: {ran_ms} ms");
    let bad = daemon.client(&["submit", "-t", "soon", "--", "true"]);
    assert!(String::from_utf8_lossy(&bad.stderr).contains("'soon' is not a time limit"), "{bad:?}");
    let table = daemon.client(&["history", "-o", "jobid,name,timelimit,slottime", "--noheader"]);
    let line = String::from_utf8_lossy(&table.stdout).to_string();
    assert!(line.contains(" nightly ") && line.contains(" 0:02 "), "{line}");
}

/// The daemons read their settings from a configuration file (`COSCHED_CONFIG`, else /etc/cosched/cosched.toml):
/// flags given win over it; a key no daemon knows, or a file others may write, stops the daemon before it starts.
#[test]
fn a_configuration_file_sets_the_daemons_flags_and_flags_win() {
    if skip_unless_root("a_configuration_file_sets_the_daemons_flags_and_flags_win") {
        return;
    }
    use std::os::unix::fs::PermissionsExt;
    let dir = fresh_dir("cosched-config");
    let config = dir.join("cosched.toml");
    std::fs::write(&config, "keep-history-days = 2\ncontroller = \"ignored-here:780\"\n").unwrap();
    let path = config.to_str().unwrap();
    let kept_s = |daemon: &Daemon| {
        let out = daemon.client(&["history", "--json"]);
        serde_json::from_slice::<cosched_runtime::wire::protocol::HistoryReply>(&out.stdout).unwrap().keep_history_s
    };
    let from_file = Daemon::up_with_env(&[], &[("COSCHED_CONFIG", path)]);
    assert_eq!(kept_s(&from_file), 2 * 86_400, "the file's setting (and the agent's key left to agents)");
    drop(from_file);
    let flag_wins = Daemon::up_with_env(&["--keep-history-days", "3"], &[("COSCHED_CONFIG", path)]);
    assert_eq!(kept_s(&flag_wins), 3 * 86_400);
    drop(flag_wins);
    let refused = |text: &str, mode: u32| {
        std::fs::write(&config, text).unwrap();
        std::fs::set_permissions(&config, std::fs::Permissions::from_mode(mode)).unwrap();
        let out = std::process::Command::new(COSCHED)
            .args(["up", "--state-dir", dir.join("never").to_str().unwrap()])
            .env("COSCHED_CONFIG", path)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(1), "{out:?}");
        assert!(!dir.join("never").exists(), "refused before anything was made");
        String::from_utf8_lossy(&out.stderr).to_string()
    };
    let unknown = refused("slice-ms = 10\nslices = 3\n", 0o644);
    assert!(unknown.contains(path) && unknown.contains("unknown setting 'slices'"), "{unknown}");
    let writable = refused("slice-ms = 10\n", 0o666);
    assert!(writable.contains("nobody else may write"), "{writable}");
    // Named otherwise: a link, a FIFO (never waited on), a relative name, a missing file are refused; "none" is none.
    std::fs::set_permissions(&config, std::fs::Permissions::from_mode(0o644)).unwrap();
    let link = dir.join("link.toml");
    std::os::unix::fs::symlink(&config, &link).unwrap();
    let fifo = dir.join("fifo.toml");
    nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o644)).unwrap();
    let start = |named: &str| {
        let out = std::process::Command::new("timeout")
            .args(["20", COSCHED, "up", "--state-dir", dir.join("never").to_str().unwrap()])
            .env("COSCHED_CONFIG", named)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(1), "{named}: {out:?}");
        String::from_utf8_lossy(&out.stderr).to_string()
    };
    assert!(start(link.to_str().unwrap()).contains("a symbolic link"));
    assert!(start(fifo.to_str().unwrap()).contains("regular file"));
    assert!(start("cosched.toml").contains("absolute path"));
    assert!(start(dir.join("missing.toml").to_str().unwrap()).contains("names no file"));
    // Without /proc the reader cannot reopen the file it checked: that stops the daemon, never counts as no file
    // (which would start it on its defaults), whether COSCHED_CONFIG names the file or it is at the default path
    // (there a missing file does mean defaults). In a mount namespace: /etc a fresh tmpfs holding only the file.
    let never = dir.join("never");
    let without_proc = r#"umount -l /proc || exit 77; exec "$0" "$@""#;
    let fresh_etc = "mount -t tmpfs -o mode=755 cosched-etc /etc && mkdir -m 755 /etc/cosched";
    let default = cosched::config_file::DEFAULT_PATH;
    let at_default = format!("{fresh_etc} && cp '{path}' {default} || exit 77; {without_proc}");
    for (script, named) in [(without_proc.to_string(), Some(path)), (at_default, None)] {
        let mut unshare = std::process::Command::new("unshare");
        unshare.args(["--mount", "--propagation", "private", "sh", "-c", &script]);
        unshare.args(["timeout", "20", COSCHED, "up", "--state-dir", never.to_str().unwrap()]);
        match named {
            Some(path) => unshare.env("COSCHED_CONFIG", path),
            None => unshare.env_remove("COSCHED_CONFIG"),
        };
        let out = unshare.output().unwrap();
        if out.status.code() == Some(77) {
            eprintln!(
                "SKIPPED: the configuration read without /proc: cannot remount /proc or /etc in a mount namespace"
            );
            return;
        }
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{named:?}: {out:?}");
        assert!(stderr.contains("is /proc mounted?") && !never.exists(), "{named:?}: {stderr}");
    }
}

/// Two gangs taking turns in a cycle as long as the agents' report period: each report finds the same gang in its
/// slot, yet neither is "frozen" (the figure behind `cosched_job_frozen_seconds`): a job counts as frozen only when
/// it did not run at all since the last report.
#[test]
fn gangs_taking_turns_are_not_reported_frozen() {
    if skip_unless_root("gangs_taking_turns_are_not_reported_frozen") {
        return;
    }
    let _machine = whole_machine();
    let daemon = Daemon::up(&["--slice-ms", "50", "--rows", "2"]);
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get()).to_string();
    let gangs = [spin_job(&daemon, &cpus, &[]), spin_job(&daemon, &cpus, &[])];
    for gang in gangs {
        daemon.spinners(gang, cpus.parse().unwrap());
    }
    let mut frozen = [0; 2];
    let samples = 40;
    for _ in 0..samples {
        std::thread::sleep(Duration::from_millis(100));
        for (count, gang) in frozen.iter_mut().zip(gangs) {
            *count += usize::from(daemon.job(gang).is_some_and(|j| j.frozen));
        }
    }
    // Sampled at an instant, one of the two is frozen at every sample (about half each): here hardly ever.
    assert!(frozen.iter().all(|&n| n <= samples / 4), "frozen in {frozen:?} of {samples} samples");
}

/// A kill that reaches the node before the job's task has joined its cgroup (a kill sent the moment the job is
/// accepted) still ends the task: it is killed once it is in, after the grace.
#[test]
fn a_job_killed_the_moment_it_is_accepted_ends() {
    if skip_unless_root("a_job_killed_the_moment_it_is_accepted_ends") {
        return;
    }
    use std::io::{BufRead, BufReader, Write};
    let daemon = Daemon::up(&["--kill-wait-s", "1"]);
    let ask = |line: String| {
        let mut stream = std::os::unix::net::UnixStream::connect(&daemon.socket).unwrap();
        stream.write_all(format!("{line}\n").as_bytes()).unwrap();
        let mut reply = String::new();
        BufReader::new(stream).read_line(&mut reply).unwrap();
        serde_json::from_str::<serde_json::Value>(&reply).unwrap()
    };
    let mut jobs = vec![];
    for _ in 0..3 {
        let submitted = ask(r#"{"op":"submit","tasks":1,"argv":["sleep","300"],"cwd":"/"}"#.to_string());
        let job = submitted["data"]["job"].as_u64().unwrap_or_else(|| panic!("{submitted}"));
        assert_eq!(ask(format!(r#"{{"op":"kill","job":{job}}}"#))["ok"], true);
        jobs.push(job);
    }
    for job in jobs {
        wait_for("the killed job to end", Duration::from_secs(30), || {
            daemon.job(job).is_some_and(|j| j.state == JobState::Killed)
        });
    }
}

/// Bash completes a job id where a command takes one, from the controller's `status`.
#[test]
fn bash_offers_the_controllers_job_ids() {
    if skip_unless_root("bash_offers_the_controllers_job_ids") {
        return;
    }
    let daemon = Daemon::up(&[]);
    let job = daemon.submit(&["--", "sleep", "300"]);
    let script = std::process::Command::new(COSCHED).args(["completions", "bash"]).output().unwrap();
    let file = daemon.dir.join("cosched.bash");
    std::fs::write(&file, &script.stdout).unwrap();
    let driver = format!(
        "source {}; COMP_WORDS=(cosched kill ''); COMP_CWORD=2; _cosched cosched '' kill; printf '%s\\n' \"${{COMPREPLY[@]}}\"",
        file.display()
    );
    let bin = std::path::Path::new(COSCHED).parent().unwrap().display().to_string();
    let out = std::process::Command::new("bash")
        .args(["--norc", "-c", &driver])
        .env("PATH", format!("{bin}:{}", std::env::var("PATH").unwrap_or_default()))
        .env("COSCHED_SOCKET", &daemon.socket)
        .output()
        .unwrap();
    let offered = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(offered.lines().any(|l| l == job.to_string()), "job {job} not offered: {offered}");
}

/// Under `Type=notify` systemd counts a unit started when its daemon sends READY=1: `cosched up` sends it once it
/// answers requests (a request right after it succeeds at once), and `cosched controller` the same.
#[test]
fn the_daemons_tell_systemd_they_are_ready_once_they_answer() {
    if skip_unless_root("the_daemons_tell_systemd_they_are_ready_once_they_answer") {
        return;
    }
    for command in ["up", "controller"] {
        let dir = fresh_dir("cosched-notify");
        let notify = dir.join("notify");
        let systemd = std::os::unix::net::UnixDatagram::bind(&notify).unwrap();
        systemd.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
        let (state, socket) = (dir.join("state"), dir.join("sock"));
        let (state, socket) = (state.to_str().unwrap(), socket.to_str().unwrap());
        let node = unique("n");
        let mut args = vec![command, "--monitor", "off", "--state-dir", state, "--socket", socket];
        if command == "up" {
            args.extend(["--node", &node]);
        }
        let mut child = std::process::Command::new(COSCHED)
            .args(&args)
            .env("NOTIFY_SOCKET", &notify)
            .env("COSCHED_CONFIG", "none")
            .stdout(std::process::Stdio::null())
            .stderr(std::fs::File::create(dir.join("log")).unwrap())
            .spawn()
            .unwrap();
        let mut said = [0u8; 64];
        let received = systemd.recv(&mut said);
        let answered = client_as(std::path::Path::new(socket), &["status"], None);
        let _ = child.kill();
        let _ = child.wait();
        remove_agent_cgroups(&node);
        let length = received.unwrap_or_else(|e| panic!("{command}: no READY within 60 s: {e}"));
        assert_eq!(&said[..length], b"READY=1", "{command}");
        assert!(answered.status.success(), "{command}: ready but not answering: {answered:?}");
    }
}

/// `submit --wait` returns when the job ends, with its exit status, as sbatch --wait does.
#[test]
fn submit_wait_returns_the_jobs_exit_status() {
    if skip_unless_root("submit_wait_returns_the_jobs_exit_status") {
        return;
    }
    let daemon = Daemon::up(&[]);
    let finished = daemon.client(&["submit", "--wait", "--", "sh", "-c", "sleep 0.3"]);
    assert_eq!(finished.status.code(), Some(0), "{finished:?}");
    assert!(String::from_utf8_lossy(&finished.stdout).contains("finished"), "{finished:?}");
    let failed = daemon.client(&["submit", "--wait", "--", "sh", "-c", "exit 7"]);
    assert_eq!(failed.status.code(), Some(7), "{failed:?}");
    assert!(String::from_utf8_lossy(&failed.stdout).contains("failed: exited with status 7"), "{failed:?}");
}

/// A job's CPU time is its cgroup's at its end, sent by the agent with the end, not its last report (up to a
/// report period, 100 ms, earlier): a short busy loop is charged at least what its shell counted (`times`, in
/// clock ticks of 10 ms).
#[test]
fn a_jobs_cpu_time_counts_to_its_end() {
    if skip_unless_root("a_jobs_cpu_time_counts_to_its_end") {
        return;
    }
    let daemon = Daemon::up(&[]);
    let job = daemon.submit(&["--", "sh", "-c", "i=0; while [ $i -lt 300000 ]; do i=$((i+1)); done; times"]);
    wait_for("the job to end", Duration::from_secs(60), || daemon.job(job).is_some_and(|j| j.state.is_over()));
    let record = daemon.job(job).unwrap();
    let logs = String::from_utf8_lossy(&daemon.client(&["logs", &job.to_string()]).stdout).to_string();
    // `times` prints the shell's user and system time first ("0m0.230000s 0m0.010000s").
    let seconds = |field: &str| -> Option<f64> {
        let (minutes, rest) = field.split_once('m')?;
        Some(minutes.parse::<f64>().ok()? * 60.0 + rest.strip_suffix('s')?.parse::<f64>().ok()?)
    };
    let shell_s: f64 = logs
        .lines()
        .find_map(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            Some(seconds(fields.first()?)? + seconds(fields.get(1)?)?)
        })
        .unwrap_or_else(|| panic!("no `times` line in the job's output:\n{logs}"));
    let tick_s = 0.01;
    assert!(
        record.cpu_ns as f64 / 1e9 >= shell_s - tick_s,
        "the job is charged {} s of CPU, its shell counted {shell_s} s",
        record.cpu_ns as f64 / 1e9
    );
}

#[test]
fn gangs_alternate_one_at_a_time_and_obey_controls() {
    if skip_unless_root("gangs_alternate_one_at_a_time_and_obey_controls") {
        return;
    }
    let _machine = whole_machine();
    let daemon = Daemon::up(&["--slice-ms", "50"]);
    let a = spin_job(&daemon, "2", &[]);
    let b = spin_job(&daemon, "2", &[]);
    let (pa, pb) = (daemon.pids(a, 4), daemon.pids(b, 4));
    let s = sample_gangs(&[pa.clone(), pb.clone()], Duration::from_secs(2));
    assert!(s.consistent > 200, "too few samples: {}", s.consistent);
    assert_eq!(s.overlap, 0, "two gangs ran at once in {} of {} samples", s.overlap, s.consistent);
    for (job, running) in [(a, s.running[0]), (b, s.running[1])] {
        let share = running as f64 / s.consistent as f64;
        assert!((0.25..0.75).contains(&share), "job {job} ran in {share:.2} of the samples: slices do not rotate");
    }

    // Suspend stops every process of A; B then has the CPUs to itself.
    assert!(daemon.client(&["suspend", &a.to_string()]).status.success());
    wait_for("A to stop and B to have the machine", Duration::from_secs(10), || {
        daemon.job(b).is_some_and(|j| j.slice_share == 1.0) && pa.iter().all(|&p| frozen(p) == Some(true))
    });
    let s = sample_gangs(&[pa.clone(), pb.clone()], Duration::from_millis(600));
    assert_eq!(s.running[0], 0, "a suspended job ran");
    assert!(s.running[1] as f64 > 0.9 * s.consistent as f64, "B did not get A's slices");
    assert_eq!(daemon.job(a).map(|j| j.state), Some(JobState::Suspended));
    assert!(daemon.client(&["resume", &a.to_string()]).status.success());
    wait_for("A to run again", Duration::from_secs(10), || any_running(&pa));

    // Class: the owner (root, an administrator) may raise; others may not touch it.
    assert!(daemon.client(&["class", &a.to_string(), "interactive"]).status.success());
    assert_eq!(daemon.job(a).map(|j| j.class), Some(JobClass::Interactive));

    // Kill ends every process of the job.
    assert!(daemon.client(&["kill", &a.to_string()]).status.success());
    wait_for("A's processes to end", Duration::from_secs(5), || pa.iter().all(|&p| cpu_ticks(p).is_none()));
    wait_for("A to be recorded as killed", Duration::from_secs(5), || {
        daemon.job(a).is_some_and(|j| j.state == JobState::Killed)
    });
    wait_for("B to have the machine", Duration::from_secs(10), || daemon.job(b).is_some_and(|j| j.slice_share == 1.0));
}

#[test]
fn an_idle_gang_job_reverts_to_local_scheduling() {
    if skip_unless_root("an_idle_gang_job_reverts_to_local_scheduling") {
        return;
    }
    let _machine = whole_machine();
    let daemon = Daemon::up(&["--slice-ms", "50", "--idle-revert-s", "1"]);
    let sleeper = daemon.submit(&["-n", "1", "--", "sleep", "120"]);
    let busy = spin_job(&daemon, "2", &[]);
    daemon.pids(busy, 4);
    assert_eq!(daemon.job(sleeper).map(|j| j.idle), Some(false));
    wait_for("the sleeping job to be judged idle", Duration::from_secs(5), || {
        daemon.job(sleeper).is_some_and(|j| j.idle)
    });
    let job = daemon.job(sleeper);
    assert_eq!(job.as_ref().map(|j| j.slice_share), Some(1.0), "an idle job runs outside the matrix: {job:?}");
    assert_eq!(daemon.job(busy).map(|j| j.slice_share), Some(1.0), "the busy job has the matrix to itself");
}

#[test]
fn killing_the_daemon_mid_slice_leaves_no_process_stopped_and_a_restart_adopts_the_jobs() {
    if skip_unless_root("killing_the_daemon_mid_slice_leaves_no_process_stopped") {
        return;
    }
    let _machine = whole_machine();
    let mut daemon = Daemon::up(&["--slice-ms", "100"]);
    let a = spin_job(&daemon, "2", &[]);
    let b = spin_job(&daemon, "2", &[]);
    let (pa, pb) = (daemon.pids(a, 4), daemon.pids(b, 4));
    std::thread::sleep(Duration::from_millis(230)); // mid-slice, one gang frozen
    assert!(!frozen_jobs(&daemon.node).is_empty(), "no gang was frozen when the daemon died: the test proves nothing");
    daemon.kill_hard();
    let all: Vec<i32> = pa.iter().chain(&pb).copied().collect();
    let spinners: Vec<i32> = all.iter().copied().filter(|&p| is_shell(p)).collect();
    assert_eq!(spinners.len(), 4);
    wait_all_thawed(&daemon.node, &spinners, "the watchdog to thaw every job");

    daemon.restart(&["--slice-ms", "100"]);
    assert_eq!(daemon.job(a).map(|j| j.state), Some(JobState::Running), "the database keeps the jobs");
    assert_eq!(daemon.pids(a, 4), pa, "the agent adopts the job's cgroup");
    wait_switching(&daemon);
    let s = sample_gangs(&[pa.clone(), pb.clone()], Duration::from_secs(1));
    assert_eq!(s.overlap, 0, "gang scheduling resumes after the restart");
    assert_every_gang_runs(&[pa, pb], "after the restart");
}

#[test]
fn a_dead_watchdog_is_replaced_so_a_later_crash_leaves_nothing_frozen() {
    if skip_unless_root("a_dead_watchdog_is_replaced") {
        return;
    }
    let _machine = whole_machine();
    let mut daemon = Daemon::up(&["--slice-ms", "100"]);
    let a = spin_job(&daemon, "2", &[]);
    let b = spin_job(&daemon, "2", &[]);
    let spinners = [daemon.spinners(a, 2), daemon.spinners(b, 2)].concat();
    let first = watchdogs_of(&daemon.node);
    assert_eq!(first.len(), 1, "one watchdog: {first:?}");
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(first[0]), nix::sys::signal::Signal::SIGKILL).unwrap();
    wait_for("a new watchdog", Duration::from_secs(5), || {
        let now = watchdogs_of(&daemon.node);
        now.len() == 1 && now != first
    });
    std::thread::sleep(Duration::from_millis(230)); // mid-slice, one gang frozen
    assert!(!frozen_jobs(&daemon.node).is_empty(), "no gang was frozen when the daemon died: the test proves nothing");
    daemon.kill_hard();
    wait_all_thawed(&daemon.node, &spinners, "the watchdog to thaw every job");
}

#[test]
fn other_users_cannot_touch_a_job_and_only_administrators_set_express() {
    if skip_unless_root("other_users_cannot_touch_a_job") {
        return;
    }
    let daemon = Daemon::up(&["--slice-ms", "50"]);
    let job = daemon.submit(&["-n", "1", "--", "sleep", "120"]);
    let id = job.to_string();
    for args in [vec!["suspend", &id], vec!["kill", &id], vec!["class", &id, "standby"], vec!["logs", &id]] {
        let out = daemon.client_as(65534, &args);
        assert!(!out.status.success(), "nobody could run {args:?}");
        assert!(String::from_utf8_lossy(&out.stderr).contains("permission denied"), "{:?}", out);
    }
    let out = daemon.client_as(65534, &["submit", "--class", "express", "--", "true"]);
    assert!(String::from_utf8_lossy(&out.stderr).contains("only administrators"), "{out:?}");
    // A user's own job: may lower its class, may not raise it.
    let out = daemon.client_as(65534, &["submit", "--json", "--class", "batch", "--", "sleep", "120"]);
    let own: SubmitReply = serde_json::from_slice(&out.stdout).unwrap();
    let own = own.job.to_string();
    assert!(daemon.client_as(65534, &["class", &own, "standby"]).status.success());
    let out = daemon.client_as(65534, &["class", &own, "interactive"]);
    assert!(String::from_utf8_lossy(&out.stderr).contains("only administrators may raise"), "{out:?}");
    assert_eq!(daemon.job(job).map(|j| j.state), Some(JobState::Running));
    assert!(daemon.client_as(65534, &["kill", &own]).status.success());
}

#[test]
fn malformed_requests_get_errors_and_leave_the_database_unchanged() {
    if skip_unless_root("malformed_requests_get_errors") {
        return;
    }
    use std::io::{BufRead, BufReader, Write};
    let daemon = Daemon::up(&["--slice-ms", "50"]);
    let job = daemon.submit(&["-n", "1", "--", "sleep", "120"]);
    let before = daemon.stored_rows();
    let stream = std::os::unix::net::UnixStream::connect(&daemon.socket).unwrap();
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    let mut writer = stream;
    let bad = [
        "this is not json",
        r#"{"op":"reboot"}"#,
        r#"{"op":"kill","job":"one"}"#,
        r#"{"op":"kill","job":999}"#,
        r#"{"op":"submit","tasks":0,"argv":["true"],"cwd":"/"}"#,
        r#"{"op":"submit","tasks":1,"argv":[],"cwd":"/"}"#,
        r#"{"op":"submit","tasks":64,"argv":["true"],"cwd":"/"}"#,
        r#"{"op":"submit","tasks":1,"class":"urgent","argv":["true"],"cwd":"/"}"#,
        r#"{"op":"set_class","job":1,"class":"urgent"}"#,
        r#"{"op":"resume","job":1}"#,
        r#"{"op":"submit","tasks":1,"argv":["true"],"cwd":"/","extra":1}"#,
    ];
    for line in bad {
        writeln!(writer, "{line}").unwrap();
        let mut reply = String::new();
        reader.read_line(&mut reply).unwrap();
        let reply: serde_json::Value = serde_json::from_str(&reply).unwrap();
        assert_eq!(reply["ok"], false, "{line} was accepted");
        assert!(reply["error"].as_str().is_some_and(|e| e.len() > 5), "{line}: unclear error {reply}");
    }
    assert_eq!(daemon.stored_rows(), before, "a bad request changed the database");
    assert_eq!(daemon.job(job).map(|j| j.state), Some(JobState::Running));
}

#[test]
fn kill_asks_with_sigterm_and_ends_with_sigkill_after_the_grace() {
    if skip_unless_root("kill_asks_with_sigterm") {
        return;
    }
    let daemon = Daemon::up(&["--slice-ms", "50", "--kill-wait-s", "2"]);
    let polite = daemon.submit(&["--", "sh", "-c", "trap 'echo got-term; exit 0' TERM; while :; do sleep 0.1; done"]);
    let stubborn = daemon.submit(&["--", "sh", "-c", "trap '' TERM; while :; do sleep 0.1; done"]);
    let stubborn_sh = daemon.pids(stubborn, 2).into_iter().find(|&p| is_shell(p)).unwrap();
    daemon.pids(polite, 2);
    for job in [polite, stubborn] {
        assert!(daemon.client(&["kill", &job.to_string()]).status.success());
    }
    #[allow(clippy::disallowed_methods)] // a real daemon's grace is wall-clock time
    let asked = std::time::Instant::now();
    wait_for("the polite job to end", Duration::from_secs(20), || {
        daemon.job(polite).is_some_and(|j| j.state == JobState::Killed)
    });
    let logs = daemon.client(&["logs", &polite.to_string()]);
    assert!(String::from_utf8_lossy(&logs.stdout).contains("got-term"), "{logs:?}");
    wait_for("the stubborn job to be killed", Duration::from_secs(30), || cpu_ticks(stubborn_sh).is_none());
    // A load can only make this longer: SIGKILL never comes before the grace.
    assert!(asked.elapsed() >= Duration::from_millis(1500), "SIGKILL came before the grace");
    wait_for("the stubborn job to be recorded", Duration::from_secs(10), || {
        daemon.job(stubborn).is_some_and(|j| j.state == JobState::Killed)
    });
}

#[test]
fn kill_with_a_signal_sends_only_that_signal() {
    if skip_unless_root("kill_with_a_signal_sends_only_that_signal") {
        return;
    }
    let daemon = Daemon::up(&["--slice-ms", "50"]);
    let job = daemon.submit(&["--", "sh", "-c", "trap 'echo got-usr1' USR1; while :; do sleep 0.1; done"]);
    daemon.pids(job, 2);
    let id = job.to_string();
    assert!(daemon.client(&["kill", &id, "--signal", "USR1"]).status.success());
    wait_for("the job to log the signal", Duration::from_secs(10), || {
        String::from_utf8_lossy(&daemon.client(&["logs", &id]).stdout).contains("got-usr1")
    });
    assert_eq!(daemon.job(job).map(|j| j.state), Some(JobState::Running));
    for bad in ["STOP", "CONT", "NOSUCH"] {
        let out = daemon.client(&["kill", &id, "--signal", bad]);
        assert!(!out.status.success(), "{bad} was sent");
    }
    assert!(daemon
        .client_as(65534, &["kill", &id, "--signal", "USR1"])
        .stderr
        .starts_with(b"error: permission denied"));
}

#[test]
fn a_job_that_cannot_start_or_exits_non_zero_is_failed_with_its_reason() {
    if skip_unless_root("a_job_that_cannot_start_is_failed") {
        return;
    }
    let daemon = Daemon::up(&["--slice-ms", "50"]);
    let missing = daemon.submit(&["--", "/nonexistent/program"]);
    let three = daemon.submit(&["--", "sh", "-c", "exit 3"]);
    let fine = daemon.submit(&["--", "true"]);
    // A command that ran and exited 127 is not one that never started.
    let ran_127 = daemon.submit(&["--", "sh", "-c", "exit 127"]);
    let cases = [
        (missing, "failed", "task 0 could not start: the command was not found (ENOENT"),
        (three, "failed", "status 3"),
        (fine, "finished", ""),
        (ran_127, "failed", "exited with status 127"),
    ];
    for (job, state, reason) in cases {
        wait_for(&format!("job {job} to end"), Duration::from_secs(20), || {
            daemon.job(job).is_some_and(|j| j.ended_unix_ms.is_some())
        });
        let record = daemon.job(job).unwrap();
        assert_eq!(record.state.name(), state, "{record:?}");
        assert!(record.error.as_deref().unwrap_or("").contains(reason), "{record:?}");
    }
    let text = String::from_utf8_lossy(&daemon.client(&["status"]).stdout).into_owned();
    let line = text.lines().find(|l| l.contains("exited with status 3")).unwrap_or_else(|| panic!("{text}"));
    assert!(
        line.contains(" failed ") && line.contains(" exited with status 3 "),
        "the reason is its own column: {text}"
    );
    // Filtered as squeue filters: by state and user; a state that does not exist is named.
    let failed = String::from_utf8_lossy(&daemon.client(&["status", "-t", "failed", "-u", "root"]).stdout).into_owned();
    let listed = |job: u64| failed.lines().any(|l| l.split_whitespace().next() == Some(job.to_string().as_str()));
    assert!(listed(missing) && listed(three) && !listed(fine), "{failed}");
    let bad = daemon.client(&["status", "--state", "sleeping"]);
    let said = String::from_utf8_lossy(&bad.stderr).into_owned();
    assert!(!bad.status.success() && said.contains("unknown job state 'sleeping'"), "{said}");
}

mod attacks;
mod c_client;
mod delegated;
mod faults;
mod held_fs;
mod metrics;
mod multi_node;
mod slurm;

/// `cosched status | head`: a reader that goes away must not make a command panic. Run with a pipe whose reading
/// end is closed before the command writes, so every write fails with EPIPE.
#[test]
fn printing_commands_end_quietly_when_their_reader_is_gone() {
    if skip_unless_root("printing_commands_end_quietly_when_their_reader_is_gone") {
        return;
    }
    let daemon = Daemon::up(&["--slice-ms", "50"]);
    let job = daemon.submit(&["--", "sh", "-c", "echo hello; sleep 300"]).to_string();
    for args in [vec!["status"], vec!["status", "--json"], vec!["logs", &job], vec!["completions", "bash"]] {
        let (reader, writer) = nix::unistd::pipe().unwrap();
        drop(reader);
        let out = std::process::Command::new(COSCHED)
            .args(&args)
            .env("COSCHED_SOCKET", &daemon.socket)
            .stdout(std::process::Stdio::from(writer))
            .output()
            .unwrap();
        let said = String::from_utf8_lossy(&out.stderr);
        assert!(
            !said.contains("panicked") && matches!(out.status.code(), Some(0) | Some(141)),
            "cosched {args:?} on a closed pipe: {:?}: {said}",
            out.status
        );
    }
}

/// `submit -o`/`-e` put the tasks' output in the user's files as sbatch does: escapes expanded, standard error with
/// standard output unless `-e`, created with the submitter's umask, emptied unless `--open-mode append`. The files
/// are opened as the user: a file of root's, also through a link, fails the job with its reason and stays as it was.
#[test]
fn output_files_are_the_users_and_opened_as_the_user() {
    if skip_unless_root("output_files_are_the_users_and_opened_as_the_user") {
        return;
    }
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    const USER: u32 = 65534;
    let daemon = Daemon::up(&[]);
    let work = daemon.dir.join("work");
    std::fs::create_dir(&work).unwrap();
    std::os::unix::fs::chown(&work, Some(USER), Some(USER)).unwrap();
    let submit = |args: &str| {
        let line = format!("umask 027; exec {COSCHED} submit --wait {args}");
        let out = std::process::Command::new("sh")
            .args(["-c", &line])
            .env("COSCHED_SOCKET", &daemon.socket)
            .current_dir(&work)
            .uid(USER)
            .gid(USER)
            .output()
            .unwrap();
        (out.status.code(), String::from_utf8_lossy(&out.stdout).into_owned())
    };
    use std::os::unix::process::CommandExt;
    let (code, said) =
        submit("-n 2 -J demo -o 'out-%x-%j.%t' -e err-%j -- sh -c 'echo out $COSCHED_RANK; echo err >&2'");
    assert_eq!(code, Some(0), "{said}");
    let job: u64 = said.split_whitespace().nth(1).unwrap().parse().unwrap();
    for rank in 0..2 {
        let path = work.join(format!("out-demo-{job}.{rank}"));
        assert_eq!(std::fs::read_to_string(&path).unwrap(), format!("out {rank}\n"));
        let meta = std::fs::metadata(&path).unwrap();
        assert_eq!((meta.uid(), meta.permissions().mode() & 0o777), (USER, 0o640), "{path:?}");
    }
    assert_eq!(std::fs::read_to_string(work.join(format!("err-{job}"))).unwrap(), "err\nerr\n");

    let shared = work.join("shared.out");
    for (mode, lines) in [("append", 1), ("append", 2), ("truncate", 1)] {
        assert_eq!(submit(&format!("--open-mode {mode} -o shared.out -- echo line")).0, Some(0));
        assert_eq!(std::fs::read_to_string(&shared).unwrap().lines().count(), lines, "--open-mode {mode}");
    }

    let victim = daemon.dir.join("roots-file");
    std::fs::write(&victim, "root's\n").unwrap();
    std::os::unix::fs::symlink(&victim, work.join("link.out")).unwrap();
    for target in [victim.to_str().unwrap(), "link.out"] {
        let (code, said) = submit(&format!("-o {target} -- echo overwritten"));
        assert_ne!(code, Some(0), "{said}");
        assert!(said.contains("cannot open its output file") && said.contains("EACCES"), "{said}");
    }
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "root's\n");
    // A FIFO nobody reads fails the job at once instead of holding its start for ever (the limit ends the job
    // should that regress).
    let fifo = work.join("fifo.out");
    nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
    std::os::unix::fs::chown(&fifo, Some(USER), Some(USER)).unwrap();
    let (code, said) = submit("-t 1 -o fifo.out -- echo waiting");
    assert_ne!(code, Some(0), "{said}");
    assert!(said.contains("a FIFO no program has open to read") && said.contains("ENXIO"), "{said}");
    // With a reader that is slow to read, the task's writes wait for it: its output is blocking again, so 256 KiB
    // (four times a pipe's buffer) arrive whole and the task ends well.
    let reader = {
        use std::os::unix::fs::OpenOptionsExt;
        let fifo_read = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(nix::fcntl::OFlag::O_NONBLOCK.bits())
            .open(&fifo)
            .unwrap();
        std::thread::spawn(move || {
            let mut fifo_read = fifo_read;
            std::thread::sleep(Duration::from_secs(1));
            let mut bytes = Vec::new();
            // Non-blocking: poll until the writer has closed (EOF) after its last byte.
            loop {
                match std::io::Read::read_to_end(&mut fifo_read, &mut bytes) {
                    Ok(_) if !bytes.is_empty() => return bytes.len(),
                    Ok(_) => {}
                    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                    Err(e) => panic!("reading the FIFO: {e}"),
                }
                std::thread::sleep(Duration::from_millis(10));
            }
        })
    };
    let (code, said) = submit("-t 1 -o fifo.out -- head -c 262144 /dev/zero");
    assert_eq!(code, Some(0), "{said}");
    assert_eq!(reader.join().unwrap(), 262_144);
    let (code, said) = submit("-o 'x%A' -- true");
    assert_eq!(code, Some(1), "{said}");
}

/// Every line of the daemon's log starts with the time it was written, in UTC to the millisecond, as Slurm's
/// daemons stamp theirs (`[2026-11-28T08:30:00.123Z] cosched controller: ...`).
#[test]
fn every_daemon_log_line_is_stamped_with_the_time() {
    if skip_unless_root("every_daemon_log_line_is_stamped_with_the_time") {
        return;
    }
    let daemon = Daemon::up(&["--slice-ms", "50"]);
    let job = daemon.submit(&["-n", "1", "--", "true"]);
    wait_for("the job to end", Duration::from_secs(20), || daemon.job(job).is_some_and(|j| j.state.is_over()));
    let log = daemon.log();
    let stamped = |line: &str| {
        let bytes = line.as_bytes();
        line.len() > 27
            && line.starts_with('[')
            && &line[25..27] == "] "
            && bytes[5] == b'-'
            && bytes[11] == b'T'
            && bytes[20] == b'.'
            && bytes[24] == b'Z'
            && line[1..5].chars().all(|c| c.is_ascii_digit())
    };
    let lines: Vec<&str> = log.lines().filter(|l| !l.trim().is_empty()).collect();
    assert!(lines.len() >= 2, "{log}");
    assert!(lines.iter().all(|l| stamped(l)), "a line without its time:\n{log}");
}
