//! Slurm jobs gang scheduled by cosched: the private Slurm of `scripts/slurm`, with Slurm's own gang scheduling
//! off and the cosched SPANK plugin (`clients/slurm`) in its plugstack, beside `cosched up` at 10 ms slices. The
//! jobs are submitted with sbatch as an ordinary user and checked through /proc, the cgroups and Slurm's record.

use crate::harness::*;
use cosched_runtime::wire::protocol::StatusJob;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;

const NOBODY: u32 = 65534;
const REPO: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../..");

/// The plugin, built once from `clients/slurm` (scripts/setup installs Slurm's headers).
fn spank_plugin() -> PathBuf {
    static BUILD: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    BUILD
        .get_or_init(|| {
            // Fresh: slurmd loads the plugin as root, so nobody else may have made or be able to write its folder.
            let build = fresh_dir("cosched-spank");
            let out = Command::new("make")
                .args(["-s", "-C", &format!("{REPO}/clients/slurm"), &format!("BUILD={}", build.display())])
                .output()
                .expect("make runs");
            assert!(out.status.success(), "building clients/slurm: {}", String::from_utf8_lossy(&out.stderr));
            build.join("cosched_spank.so")
        })
        .clone()
}

/// A private Slurm whose one node has the name of `node` (a cosched agent's), stopped on drop.
pub(crate) struct PrivateSlurm {
    pub(crate) dir: PathBuf,
    pub(crate) conf: String,
}

impl PrivateSlurm {
    pub(crate) fn start(node: &str, gang: &str, plugin_args: &str) -> PrivateSlurm {
        PrivateSlurm::start_in(fresh_dir("cosched-slurm"), node, gang, plugin_args)
    }

    /// A port P with P and P + 1 free on every address (slurmctld and slurmd), below the kernel's range of
    /// ephemeral ports, where any process's outgoing connection could take P + 1 before slurmd binds it.
    fn two_free_ports() -> u16 {
        use std::hash::BuildHasher;
        let random = std::collections::hash_map::RandomState::new();
        for attempt in 0u32.. {
            let port = 20_000 + (random.hash_one(attempt) % 12_000) as u16;
            let free = |p: u16| std::net::TcpListener::bind(("0.0.0.0", p)).is_ok();
            if free(port) && free(port + 1) {
                return port;
            }
        }
        unreachable!("the attempts never end")
    }

    fn start_in(dir: PathBuf, node: &str, gang: &str, plugin_args: &str) -> PrivateSlurm {
        let plugin = format!("required {} cosched={COSCHED} {plugin_args}", spank_plugin().display());
        for _ in 0..5 {
            let port = Self::two_free_ports().to_string();
            let out = Command::new(format!("{REPO}/scripts/slurm"))
                .args(["start", "--dir", dir.to_str().unwrap(), "--port", &port, "--node-name", node])
                .args(["--gang", gang, "--plugin", &plugin])
                .output()
                .expect("scripts/slurm runs");
            let stdout = String::from_utf8_lossy(&out.stdout);
            if let Some(conf) = stdout.trim().strip_prefix("export SLURM_CONF=") {
                return PrivateSlurm { dir, conf: conf.to_string() };
            }
            let stderr = String::from_utf8_lossy(&out.stderr);
            // Taken before scripts/slurm looked, or between its look and slurmd's bind.
            let taken = stderr.contains("is in use") || stderr.contains("Address already in use");
            assert!(taken, "scripts/slurm start failed:\n{stderr}");
        }
        panic!("no two free ports for the private Slurm in 5 tries");
    }

    pub(crate) fn command(&self, program: &str, args: &[&str], uid: Option<u32>) -> Output {
        let mut command = Command::new(program);
        command.args(args).env("SLURM_CONF", &self.conf).current_dir(&self.dir);
        if let Some(uid) = uid {
            use std::os::unix::process::CommandExt;
            command.uid(uid).gid(uid);
        }
        command.output().unwrap_or_else(|e| panic!("{program}: {e}"))
    }

    /// Submit a batch script as `nobody`; its output goes to `job-<id>.out` in the instance's folder.
    fn sbatch(&self, tasks: &str, script: &str) -> u32 {
        self.sbatch_with(&[], tasks, script)
    }

    /// `sbatch` with more of sbatch's options.
    pub(crate) fn sbatch_with(&self, options: &[&str], tasks: &str, script: &str) -> u32 {
        self.sbatch_as(NOBODY, options, tasks, script)
    }

    /// `sbatch_with` as user `uid` (with the group of the same number).
    pub(crate) fn sbatch_as(&self, uid: u32, options: &[&str], tasks: &str, script: &str) -> u32 {
        let out_file = format!("{}/jobs/job-%j.out", self.dir.display());
        let mut args = vec!["--parsable", "-n", tasks, "-o", &out_file, "--chdir", "/tmp"];
        args.extend(options);
        args.extend(["--wrap", script]);
        let out = self.command("sbatch", &args, Some(uid));
        assert!(out.status.success(), "sbatch: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8_lossy(&out.stdout).trim().split(';').next().unwrap().parse().unwrap()
    }

    fn output_of(&self, job: u32) -> String {
        std::fs::read_to_string(self.dir.join(format!("jobs/job-{job}.out"))).unwrap_or_default()
    }

    /// A field of `scontrol show job` (`JobState`, `ExitCode`, ...).
    pub(crate) fn field(&self, job: u32, name: &str) -> String {
        let out = self.command("scontrol", &["show", "job", "-o", &job.to_string()], None);
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        let prefix = format!("{name}=");
        text.split_whitespace().find_map(|w| w.strip_prefix(&prefix)).unwrap_or("").to_string()
    }

    pub(crate) fn wait_state(&self, job: u32, state: &str, timeout: Duration) {
        wait_for_explained(
            &format!("Slurm job {job} to be {state}"),
            timeout,
            || self.field(job, "JobState") == state,
            || format!("(it is {}, reason {})", self.field(job, "JobState"), self.field(job, "Reason")),
        );
    }

    /// Slurm's completion record of the job (jobcomp/filetxt).
    fn record(&self, job: u32) -> String {
        let text = std::fs::read_to_string(self.dir.join("log/jobcomp.txt")).unwrap_or_default();
        text.lines().rfind(|l| l.starts_with(&format!("JobId={job} "))).unwrap_or("").to_string()
    }
}

impl Drop for PrivateSlurm {
    fn drop(&mut self) {
        let _ =
            Command::new(format!("{REPO}/scripts/slurm")).args(["stop", "--dir", self.dir.to_str().unwrap()]).output();
        if !std::thread::panicking() {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

/// The cosched job of a Slurm job, once it runs.
pub(crate) fn cosched_job(daemon: &Daemon, slurm_job: u32) -> Option<StatusJob> {
    let name = format!("slurm:{slurm_job}");
    daemon.status()?.jobs.into_iter().rfind(|j| j.command == name)
}

/// Where a Slurm job stands for Slurm and for cosched, for a failure's message.
fn slurm_and_cosched_state(slurm: &PrivateSlurm, daemon: &Daemon, job: u32) -> String {
    let cosched = cosched_job(daemon, job).map_or("no cosched job".into(), |c| {
        format!("cosched job {} {:?}: pids {:?}, share {}, error {:?}", c.id, c.state, c.pids, c.slice_share, c.error)
    });
    let (state, reason) = (slurm.field(job, "JobState"), slurm.field(job, "Reason"));
    format!("(Slurm job {job} {state}, reason {reason}; {cosched})")
}

fn cgroup_members(node: &str, job: u64) -> Vec<i32> {
    cosched_runtime::agent::freezer::JobGroups::open(node, None).unwrap().pids(job).unwrap_or_default()
}

/// A cosched job's processes as `pid:name`, for a failure's message.
fn describe_members(node: &str, job: u64) -> String {
    cgroup_members(node, job).iter().map(|&p| format!("{p}:{}", comm(p))).collect::<Vec<_>>().join(" ")
}

fn named(pids: &[i32], name: &str) -> Vec<i32> {
    pids.iter().copied().filter(|&p| comm(p) == name).collect()
}

/// Stopped by a signal (state T in /proc).
fn stopped(pid: i32) -> bool {
    process_state(pid) == Some('T')
}

fn gone(pids: &[i32]) -> bool {
    pids.iter().all(|p| !Path::new(&format!("/proc/{p}")).exists())
}

#[test]
fn slurm_jobs_on_shared_cpus_take_turns_at_cosched_slices() {
    if skip_unless_root("slurm_jobs_on_shared_cpus_take_turns_at_cosched_slices") {
        return;
    }
    let _machine = whole_machine();
    let daemon = Daemon::up(&["--slice-ms", "10"]);
    let slurm = PrivateSlurm::start(&daemon.node, "off", &format!("socket={}", daemon.socket.display()));
    let mm = crate::multi_node::Mpi::OpenMpi.programs().join("mpi_mm");
    // The MPI program as a Slurm user runs it, unmodified; a second job's step (srun) on the same two CPUs.
    // The spinning job first, so that the MPI job, long enough to be sampled, runs beside it from its start.
    let spin = slurm.sbatch("2", "srun -n 2 timeout 300 sh -c 'while :; do :; done'");
    slurm.wait_state(spin, "RUNNING", Duration::from_secs(180));
    let program = format!("OPENBLAS_NUM_THREADS=1 mpirun --bind-to none {} --n 512 --repeat 600", mm.display());
    let mpi = slurm.sbatch("2", &program);

    // Each Slurm job is a cosched job whose cgroup holds its processes: the ranks, the step's tasks.
    let (mut ranks, mut spinners) = (vec![], vec![]);
    let explain = || {
        let jobs = [(mpi, cosched_job(&daemon, mpi)), (spin, cosched_job(&daemon, spin))];
        let seen: Vec<String> = jobs
            .iter()
            .map(|(j, c)| {
                let members = c.as_ref().map_or("no cosched job".into(), |c| describe_members(&daemon.node, c.id));
                format!("Slurm job {j} {}: {members}; output {:?}", slurm.field(*j, "JobState"), slurm.output_of(*j))
            })
            .collect();
        format!("({})", seen.join("; "))
    };
    // A bound for a loaded machine (Slurm starts the MPI job's step and mpirun its ranks), not a measure.
    let both_in_their_jobs = || {
        let (Some(a), Some(b)) = (cosched_job(&daemon, mpi), cosched_job(&daemon, spin)) else { return false };
        ranks = named(&cgroup_members(&daemon.node, a.id), "mpi_mm");
        spinners = named(&cgroup_members(&daemon.node, b.id), "sh");
        ranks.len() == 2 && spinners.len() == 2
    };
    wait_for_explained(
        "both jobs' processes in their cosched jobs",
        Duration::from_secs(180),
        both_in_their_jobs,
        explain,
    );
    let (a, b) = (cosched_job(&daemon, mpi).unwrap(), cosched_job(&daemon, spin).unwrap());
    assert_eq!((a.uid, b.uid, a.registered), (NOBODY, NOBODY, true), "{a:?}");
    // Slurm sees both running (its own gang scheduling is off); cosched gives them turns: never both at once,
    // and each gets the CPUs.
    assert_eq!((slurm.field(mpi, "JobState"), slurm.field(spin, "JobState")), ("RUNNING".into(), "RUNNING".into()));
    let s = sample_gangs(&[ranks.clone(), spinners.clone()], Duration::from_millis(700));
    assert_eq!(s.overlap, 0, "the two Slurm jobs ran at once in {} of {} samples", s.overlap, s.consistent);
    let used = gang_cpu_ticks_until_each_ran(&[ranks.clone(), spinners.clone()], Duration::from_secs(20));
    assert!(used.iter().all(|&t| t > 0), "a job got no CPU: ticks {used:?}");

    // Suspended by Slurm (SIGSTOP to its processes) and resumed: cosched never resumes it, Slurm does.
    let out = slurm.command("scontrol", &["suspend", &spin.to_string()], None);
    assert!(out.status.success(), "scontrol suspend: {out:?}");
    // Its SIGSTOP takes effect in the job's next slot.
    wait_for("Slurm's SIGSTOP to stop the job", Duration::from_secs(10), || spinners.iter().all(|&p| stopped(p)));
    let used = gang_cpu_ticks(&[spinners.clone()], Duration::from_millis(500));
    assert_eq!(used, [0], "a job Slurm suspended ran");
    assert!(slurm.command("scontrol", &["resume", &spin.to_string()], None).status.success());
    wait_for("the resumed job to run again", Duration::from_secs(30), || {
        gang_cpu_ticks(&[spinners.clone()], Duration::from_millis(300))[0] > 0
    });

    // Cancelled by Slurm: cosched's job ends with it, and nothing is left behind frozen.
    assert!(slurm.command("scancel", &[&spin.to_string()], None).status.success());
    slurm.wait_state(spin, "CANCELLED", Duration::from_secs(30));
    wait_for("the cancelled job's processes to be gone", Duration::from_secs(30), || gone(&spinners));
    wait_for("cosched to end the cancelled job", Duration::from_secs(10), || {
        daemon.job(b.id).is_some_and(|j| j.state.is_over())
    });
    assert_eq!(daemon.job(b.id).unwrap().state.name(), "killed");

    // The MPI job completes as Slurm records it, with the program's own check passed.
    slurm.wait_state(mpi, "COMPLETED", Duration::from_secs(240));
    assert_eq!(slurm.field(mpi, "ExitCode"), "0:0");
    assert!(slurm.record(mpi).contains("JobState=COMPLETED"), "Slurm's record: {}", slurm.record(mpi));
    let output = slurm.output_of(mpi);
    assert!(output.contains("\"p\":2") && output.contains("\"passed\":true"), "mpi_mm's output:\n{output}");
    wait_for("cosched to end the MPI job", Duration::from_secs(10), || {
        daemon.job(a.id).is_some_and(|j| j.state.is_over())
    });
    assert_eq!(daemon.job(a.id).unwrap().state.name(), "finished");
}

#[test]
fn a_slurm_job_cosched_cannot_take_runs_unfrozen_and_says_why() {
    if skip_unless_root("a_slurm_job_cosched_cannot_take_runs_unfrozen_and_says_why") {
        return;
    }
    let _machine = whole_machine();
    let daemon = Daemon::up(&["--slice-ms", "10"]);
    let socket = format!("socket={}", daemon.socket.display());
    let quick = "timeout 60 sh -c 'i=0; while [ $i -lt 200000 ]; do i=$((i+1)); done; echo done'";
    let runs_alone = |slurm: &PrivateSlurm, why: &str| {
        let job = slurm.sbatch("1", quick);
        slurm.wait_state(job, "COMPLETED", Duration::from_secs(120));
        let output = slurm.output_of(job);
        assert!(output.contains("done") && output.contains(why), "job output, expecting {why:?}:\n{output}");
        assert!(cosched_job(&daemon, job).is_none(), "cosched took the job");
    };

    // A Slurm node with no cosched agent of its name.
    let slurm = PrivateSlurm::start(&unique("noagent"), "off", &socket);
    runs_alone(&slurm, "has no cosched agent");
    drop(slurm);

    // Slurm's own gang scheduling left on: the job is left to it, and `cosched slurm check` says so.
    let slurm = PrivateSlurm::start(&daemon.node, "on", &socket);
    runs_alone(&slurm, "Slurm's own gang scheduling is on");
    let check = slurm.command(COSCHED, &["slurm", "check", "--socket", daemon.socket.to_str().unwrap()], None);
    let text = String::from_utf8_lossy(&check.stdout);
    assert!(!check.status.success() && text.contains("PreemptMode = GANG"), "cosched slurm check:\n{text}");
    drop(slurm);

    // No controller at all.
    let slurm = PrivateSlurm::start(&daemon.node, "off", "socket=/nonexistent/cosched.sock");
    runs_alone(&slurm, "cosched: Slurm job");
    drop(slurm);
    // With everything right, the check passes.
    let slurm_ok = PrivateSlurm::start(&daemon.node, "off", &socket);
    let check = slurm_ok.command(COSCHED, &["slurm", "check", "--socket", daemon.socket.to_str().unwrap()], None);
    assert!(check.status.success(), "cosched slurm check:\n{}", String::from_utf8_lossy(&check.stdout));
}

/// A Slurm job's script starts a long command through `cosched rsh` (as an MPI launcher does) and exits. Slurm ends
/// what it started itself, the script and the `cosched rsh` client; the command was started by the cosched agent
/// inside the job's cgroup, so cosched ends it. Once Slurm records the job COMPLETED (its epilog is over), nothing
/// of the job runs, its cosched job is over and the agent has no cgroup left.
#[test]
fn a_command_started_with_cosched_rsh_ends_with_its_slurm_job() {
    if skip_unless_root("a_command_started_with_cosched_rsh_ends_with_its_slurm_job") {
        return;
    }
    let _machine = whole_machine();
    let daemon = Daemon::up(&["--slice-ms", "10"]);
    let slurm = PrivateSlurm::start(&daemon.node, "off", &format!("socket={}", daemon.socket.display()));
    // The job finds its cosched job in `cosched status` (its command reads slurm:<id>), as a launcher would.
    let script = format!(
        "export COSCHED_SOCKET={socket}; \
         export COSCHED_JOB_ID=$({COSCHED} status | awk -v c=slurm:$SLURM_JOB_ID '$NF == c {{print $1}}'); \
         {COSCHED} rsh {node} 'sleep 86440' & \
         for i in $(seq 300); do pgrep -f '^sleep 86440$' >/dev/null && echo remote-started && break; sleep 0.1; done",
        socket = daemon.socket.display(),
        node = daemon.node,
    );
    let job = slurm.sbatch("1", &script);
    slurm.wait_state(job, "COMPLETED", Duration::from_secs(120));
    assert!(slurm.output_of(job).contains("remote-started"), "no remote command ran:\n{}", slurm.output_of(job));
    assert_eq!(sleeps_of(86440), Vec::<i32>::new(), "the remote command outlived its Slurm job");
    let record = cosched_job(&daemon, job).expect("the Slurm job's cosched job");
    assert!(record.state.is_over(), "{record:?}");
    assert_eq!(job_cgroups(&daemon.node), Vec::<u64>::new(), "cgroups left on the node");
}

/// The same with a remote command nobody can kill (it waits in the kernel on a file system that does not answer):
/// the epilog waits only the kill's bound, Slurm completes the job, and the processes left are reported (slurmd's
/// log, the cosched job's record, the node in `status`) and ended once they can be.
#[test]
fn a_slurm_job_whose_remote_command_cannot_be_killed_completes_and_is_reported() {
    if skip_unless_root("a_slurm_job_whose_remote_command_cannot_be_killed_completes_and_is_reported") {
        return;
    }
    let _machine = whole_machine();
    let daemon = Daemon::up(&["--slice-ms", "10"]);
    let slurm = PrivateSlurm::start(&daemon.node, "off", &format!("socket={}", daemon.socket.display()));
    let held = crate::held_fs::HeldLookups::mount();
    let target = held.path("x");
    let script = format!(
        "export COSCHED_SOCKET={socket}; \
         export COSCHED_JOB_ID=$({COSCHED} status | awk -v c=slurm:$SLURM_JOB_ID '$NF == c {{print $1}}'); \
         {COSCHED} rsh {node} 'stat {target}' & \
         for i in $(seq 300); do pgrep -f '^stat {target}$' >/dev/null && echo remote-started && break; sleep 0.1; done",
        socket = daemon.socket.display(),
        node = daemon.node,
        target = target.display(),
    );
    let job = slurm.sbatch("1", &script);
    slurm.wait_state(job, "COMPLETED", Duration::from_secs(120));
    assert!(slurm.output_of(job).contains("remote-started"), "no remote command ran:\n{}", slurm.output_of(job));
    let record = cosched_job(&daemon, job).expect("the Slurm job's cosched job");
    assert!(record.state.is_over() && record.left_behind.is_some(), "{record:?}");
    let stuck: Vec<_> = daemon.status().unwrap().nodes.into_iter().flat_map(|n| n.stuck_jobs).collect();
    assert!(stuck.len() == 1 && stuck[0].job == record.id && stuck[0].processes == 1, "{stuck:?}");
    let slurmd_log = std::fs::read_to_string(slurm.dir.join("log/slurmd.log")).unwrap_or_default();
    assert!(slurmd_log.contains("could not be killed"), "slurmd's log says nothing of it:\n{slurmd_log}");

    held.release();
    wait_for("the left process to end and its cgroup to go", Duration::from_secs(30), || {
        job_cgroups(&daemon.node).is_empty()
    });
    wait_for("the report to go", Duration::from_secs(30), || {
        daemon.status().is_some_and(|s| s.nodes.iter().all(|n| n.stuck_jobs.is_empty()))
    });
}

/// What Slurm's `TimeLimit` or `RunTime` says (`M:SS`, `H:MM:SS`, `D-HH:MM:SS`), in seconds.
fn slurm_duration_s(text: &str) -> u64 {
    let (days, clock) = text.split_once('-').unwrap_or(("0", text));
    let seconds = clock.split(':').fold(0, |total, part| total * 60 + part.parse::<u64>().unwrap());
    days.parse::<u64>().unwrap() * 86_400 + seconds
}

/// A Slurm job with a time limit of one minute that needs 35 s of CPU, sliced three ways by cosched: to Slurm it
/// runs all the time, some 105 s, so without cosched crediting it the time out of its slots Slurm kills it
/// (TIMEOUT) at its first check past the minute (Slurm checks every 30 s, so by 90 s) with some 20 to 30 s of its
/// work done. cosched adds that time to its Slurm end time, and the job completes. The suite's longest test:
/// `main.rs` starts it first.
pub fn a_slurm_job_sliced_three_ways_keeps_its_time_limit() {
    if skip_unless_root("a_slurm_job_sliced_three_ways_keeps_its_time_limit") {
        return;
    }
    let _machine = whole_machine();
    let dir = fresh_dir("cosched-slurm");
    let conf = dir.join("slurm.conf");
    // One CPU for cosched: the three one-CPU Slurm jobs take a slot each, a third of the time.
    let period = ["--slurm-time-period-s", "1", "--slurm-conf", conf.to_str().unwrap()];
    let daemon = Daemon::up(&[&["--slice-ms", "20", "--cpus", "1"][..], &period].concat());
    let slurm = PrivateSlurm::start_in(dir, &daemon.node, "off", &format!("socket={}", daemon.socket.display()));
    // 35 s of CPU whatever the machine's speed, counted by the job itself.
    let work = "python3 -c 'import time\nwhile time.process_time() < 35: pass\nprint(\"done\", time.process_time())'";
    // Three users: only another user's job earns a job time (`slurm_time`), as with Slurm's own gang scheduler.
    let jobs: Vec<u32> = OTHER_USERS.iter().map(|&uid| slurm.sbatch_as(uid, &["--time=1"], "1", work)).collect();
    // A bound for a loaded machine (Slurm schedules and starts three jobs), not a measure.
    wait_for_explained(
        "the three Slurm jobs to share cosched's CPU",
        Duration::from_secs(180),
        || jobs.iter().all(|&j| cosched_job(&daemon, j).is_some_and(|c| (c.slice_share - 1.0 / 3.0).abs() < 1e-9)),
        || jobs.iter().map(|&j| slurm_and_cosched_state(&slurm, &daemon, j)).collect::<Vec<_>>().join(" "),
    );
    // Slurm's limit counts wall time, and this machine runs other work a Slurm node would not: in its slots a job
    // got under half a CPU beside other sessions' builds and tests. The workers are put first (SCHED_RR) so that
    // their slots are theirs, as on a Slurm node; cosched's switching threads still come before them.
    let ids: Vec<u64> = jobs.iter().map(|&j| cosched_job(&daemon, j).unwrap().id).collect();
    // Generous: on a loaded machine a third of one shared CPU starts three Pythons slowly.
    let explain = || {
        let members: Vec<String> = ids.iter().map(|&id| describe_members(&daemon.node, id)).collect();
        let states: Vec<String> = jobs.iter().map(|&j| slurm.field(j, "JobState")).collect();
        format!("(members {members:?}, Slurm states {states:?})")
    };
    let find_workers =
        || -> Vec<i32> { ids.iter().flat_map(|&id| named(&cgroup_members(&daemon.node, id), "python3")).collect() };
    wait_for_explained(
        "the three workers to run in their cosched jobs",
        Duration::from_secs(180),
        || find_workers().len() == 3,
        explain,
    );
    let workers = find_workers();
    for pid in &workers {
        let out = Command::new("chrt").args(["--rr", "--pid", "1", &pid.to_string()]).output().unwrap();
        assert!(out.status.success(), "chrt: {}", String::from_utf8_lossy(&out.stderr));
    }

    // Three times their limit later at the most, they have all completed (Slurm checks limits every 30 s).
    for &job in &jobs {
        wait_for(&format!("Slurm job {job} to end"), Duration::from_secs(400), || {
            !matches!(slurm.field(job, "JobState").as_str(), "RUNNING" | "PENDING" | "COMPLETING" | "")
        });
    }
    for &job in &jobs {
        let (state, output) = (slurm.field(job, "JobState"), slurm.output_of(job));
        assert_eq!(state, "COMPLETED", "Slurm job {job} ({}); output:\n{output}", slurm.record(job));
        assert!(output.starts_with("done 35."), "Slurm job {job}'s output:\n{output}");
        // It ran past its minute: what cosched added is the time out of its slots, never more than two thirds of
        // its run, and Slurm's time limit holds it to within 30 s.
        let run_s = slurm_duration_s(&slurm.field(job, "RunTime"));
        let limit_s = slurm_duration_s(&slurm.field(job, "TimeLimit"));
        let extended_s = cosched_job(&daemon, job).unwrap().slurm_time.unwrap().extended_s;
        let summary = format!("Slurm job {job}: ran {run_s} s, limit {limit_s} s, {extended_s} s added");
        assert!(run_s > 90 && extended_s > 0 && extended_s * 3 <= run_s * 2 + 3, "{summary}");
        assert!((limit_s as i64 - 60 - extended_s as i64).abs() <= 30, "{summary}");
    }
}

/// Users with a passwd entry, for Slurm jobs of distinct owners: `nobody`, `daemon` and `bin`.
const OTHER_USERS: [u32; 3] = [NOBODY, 1, 2];

/// A Slurm job's owner cannot stretch its time limit with gangs of their own: three idle jobs of the same user
/// beside it cut its share to a quarter, and its end time is not moved; the same three jobs of another user are
/// time another job took, and its end time moves out.
#[test]
fn a_slurm_jobs_owner_earns_no_time_with_gangs_of_their_own() {
    if skip_unless_root("a_slurm_jobs_owner_earns_no_time_with_gangs_of_their_own") {
        return;
    }
    let _machine = whole_machine();
    let dir = fresh_dir("cosched-slurm-own");
    let conf = dir.join("slurm.conf");
    let period = ["--slurm-time-period-s", "1", "--slurm-conf", conf.to_str().unwrap()];
    let daemon = Daemon::up(&[&["--slice-ms", "20", "--cpus", "1"][..], &period].concat());
    let slurm = PrivateSlurm::start_in(dir, &daemon.node, "off", &format!("socket={}", daemon.socket.display()));
    let job = slurm.sbatch_as(NOBODY, &["--time=5"], "1", "sleep 120");
    // A bound for a loaded machine (Slurm schedules and starts the job), not a measure.
    wait_for_explained(
        "the Slurm job to run in cosched",
        Duration::from_secs(180),
        || cosched_job(&daemon, job).is_some_and(|c| !c.pids.is_empty()),
        || slurm_and_cosched_state(&slurm, &daemon, job),
    );
    let gangs_of =
        |uid: u32| -> Vec<u64> { (0..3).map(|_| daemon.submit_as(Some(uid), &["--", "sleep", "120"])).collect() };
    let share_is_a_quarter = || cosched_job(&daemon, job).is_some_and(|c| (c.slice_share - 0.25).abs() < 1e-9);
    let extended_s = || cosched_job(&daemon, job).and_then(|c| c.slurm_time).map_or(0, |t| t.extended_s);

    let own = gangs_of(NOBODY);
    wait_for("three gangs of the owner beside the Slurm job", Duration::from_secs(30), share_is_a_quarter);
    // Six seconds at a quarter share: four and a half out of its slots, all to its owner's own gangs.
    std::thread::sleep(Duration::from_secs(6));
    assert_eq!(extended_s(), 0, "the owner's own gangs stretched the Slurm job's end time");
    for id in own {
        assert!(daemon.client(&["kill", &id.to_string()]).status.success());
    }

    let others = gangs_of(OTHER_USERS[1]);
    wait_for("three gangs of another user beside the Slurm job", Duration::from_secs(30), share_is_a_quarter);
    wait_for("another user's gangs to earn the Slurm job time", Duration::from_secs(30), || extended_s() > 0);
    for id in others {
        let _ = daemon.client(&["kill", &id.to_string()]);
    }
}

/// Root reads only a Slurm configuration that root alone can change: pointed at one a user owns (which could name
/// any slurmctld, plugin or socket), the controller runs nothing, extends nothing, and says why in the job's status
/// and its log.
#[test]
fn a_slurm_configuration_a_user_could_change_is_never_used() {
    if skip_unless_root("a_slurm_configuration_a_user_could_change_is_never_used") {
        return;
    }
    let _machine = whole_machine();
    let forged_dir = fresh_dir("users-slurm");
    let forged = forged_dir.join("slurm.conf");
    let period = ["--slurm-time-period-s", "1", "--slurm-conf", forged.to_str().unwrap()];
    let daemon = Daemon::up(&[&["--slice-ms", "20", "--cpus", "1"][..], &period].concat());
    let slurm = PrivateSlurm::start(&daemon.node, "off", &format!("socket={}", daemon.socket.display()));
    // The private Slurm's own configuration, in a file the user nobody owns.
    std::fs::copy(&slurm.conf, &forged).unwrap();
    std::os::unix::fs::chown(&forged, Some(NOBODY), Some(NOBODY)).unwrap();
    // Two users' jobs: only time another user's job took is owed, and only time owed sends the pass to Slurm.
    let spin = "timeout 60 sh -c 'while :; do :; done'";
    let jobs: Vec<u32> = OTHER_USERS[..2].iter().map(|&uid| slurm.sbatch_as(uid, &["--time=1"], "1", spin)).collect();
    let mut why = String::new();
    wait_for("the job's status to say why its end time is not extended", Duration::from_secs(180), || {
        let time = cosched_job(&daemon, jobs[0]).and_then(|j| j.slurm_time);
        why = time.and_then(|t| t.error).unwrap_or_default();
        !why.is_empty()
    });
    assert!(why.contains("belongs to uid 65534") && why.contains("root runs and reads only"), "{why}");
    assert_eq!(cosched_job(&daemon, jobs[0]).unwrap().slurm_time.unwrap().extended_s, 0);
    assert_eq!(slurm.field(jobs[0], "TimeLimit"), "00:01:00");
    assert!(daemon.log().contains(&format!("Slurm job {}: end time not extended", jobs[0])), "{}", daemon.log());
    let _ = std::fs::remove_dir_all(&forged_dir);
}
