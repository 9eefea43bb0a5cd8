//! The node agent: starts and adopts the processes of jobs on its node,
//! switches gangs at wall-clock-aligned slice boundaries, and reports CPU use.
//!
//! Slice `n` covers `[n·slice, (n+1)·slice)` of CLOCK_REALTIME, so agents on
//! NTP-synchronised hosts switch together without a message per slice, and
//! keep switching on the last schedule while the controller is away.

pub mod ender;
pub mod freezer;
pub mod launch;
pub mod log_pump;
pub mod logs;
pub mod mpi;
pub mod pid_guard;
pub mod supervisor;
pub mod switcher;
pub mod watchdog;

use crate::agent::ender::Ender;
use crate::agent::freezer::{monotonic_now, CgroupParent, FreezerKind, JobGroups};
use crate::agent::launch::LaunchSpec;
use crate::agent::pid_guard::PidGuard;
use crate::agent::supervisor::{spawn_supervisor, SupervisedTask};
use crate::agent::switcher::{ConfirmWait, SwitchStats, Switcher};
use crate::job_tag::JobTag;
use crate::wire::auth::Credentials;
pub use crate::wire::client::Address;
use crate::wire::client::Connection;
use crate::wire::protocol::{
    write_message, AdoptedJob, AgentHello, FromAgent, JobUsage, LogTail, Request, StartJob, ToAgent, LOGS_REPLY_BYTES,
    LOG_TAIL_BYTES,
};
use std::collections::BTreeMap;
use std::io::Write;
use std::path::PathBuf;
use std::process::Child;
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

#[derive(Clone)]
pub struct AgentSettings {
    pub node: String,
    pub controller: Address,
    /// How the agent proves it is one over TCP, and checks that its controller is the real one.
    pub credentials: Credentials,
    pub log_dir: PathBuf,
    pub freezer: Option<FreezerKind>,
    /// Job cgroups inside the cgroup the daemon starts in (a systemd unit with `Delegate=yes`), the daemon itself
    /// in its leaf `daemon`; else at the top of each hierarchy (`freezer::enter_delegated_cgroup`).
    pub job_cgroups_in_service: bool,
    pub cpus: u32,
    pub mem_bytes: u64,
    /// Put the switching thread in SCHED_FIFO when allowed.
    pub realtime: bool,
    /// How long a switch waits for the outgoing gang's confirmed stop before starting the incoming one.
    pub confirm_wait: ConfirmWait,
    /// Switching threads, each on a CPU of its own; the first awake at a boundary switches.
    pub switching_threads: usize,
    /// The program that runs `__launch` and `__watchdog` (normally this executable).
    pub helper_program: PathBuf,
    /// The socket of this host's munged for users' commands, when not MUNGE's default (an MPI launcher's
    /// `cosched rsh` proves its user with it).
    pub users_munge_socket: Option<PathBuf>,
    /// How much of the state file system the jobs' logs may take, and for how long (`crate::agent::logs`).
    pub logs: crate::agent::logs::LogBounds,
}

/// A job's processes on this node, as the agent tracks them.
struct LocalJob {
    /// The supervisors of the tasks this agent started (adopted jobs have none).
    children: Vec<Child>,
    exit_code: Option<i32>,
    /// Started here or adopted: its cgroup may hold processes.
    had_processes: bool,
    /// Its end has reached the controller (not only been found: a link that is down loses what is sent).
    end_reported: bool,
    /// Told to end (`Terminate`): from this instant on, whatever is in its cgroup is killed, also a task that
    /// joined it after the kill began (a kill right after the start can come before the tasks are in).
    kill_from: Option<std::time::Instant>,
}

impl LocalJob {
    fn new(had_processes: bool) -> LocalJob {
        LocalJob { children: vec![], exit_code: None, had_processes, end_reported: false, kill_from: None }
    }
}

struct Shared {
    jobs: BTreeMap<u64, LocalJob>,
    writer: Option<Box<dyn std::io::Write + Send>>,
    /// Commands started for `Exec`, by its acknowledgement number, until they end.
    execs: BTreeMap<u64, ExecRun>,
    /// The copies of ended commands' output, each with when its command ended: it takes what the command wrote
    /// before it ended, then is ended itself (`PUMP_DRAIN`).
    draining_pumps: Vec<(Pump, std::time::Instant)>,
}

/// A root copy of a remote command's output into its log.
struct Pump {
    child: Child,
    /// The command's acknowledgement number: its logs are written while any copy of its output runs.
    ack: u64,
    log: crate::agent::logs::MadeLog,
}

impl Pump {
    /// Whether the copy still runs. Once it has ended, its log may go if nothing was written to it; only then, for
    /// a command ends before its copy has taken what it wrote, so an empty log at the command's end may yet fill.
    fn still_runs(&mut self) -> bool {
        self.child.try_wait().is_ok_and(|status| status.is_none())
    }
}

/// How long the copy of an ended command's output goes on: what the command wrote before it ended is in the pipe
/// already; a process it left behind, or one it passed the pipe to, no longer keeps a root process copying (nor
/// alive) once this is up.
const PUMP_DRAIN: Duration = Duration::from_secs(2);

/// A command started for `Exec`: its shim and the copies of its output.
struct ExecRun {
    shim: crate::agent::launch::Shim,
    pumps: Vec<Pump>,
}

pub struct Agent {
    settings: AgentSettings,
    guard: PidGuard,
    groups: Arc<JobGroups>,
    switcher: Arc<Switcher>,
    /// Ends what is left of jobs that are over or killed, and keeps what it cannot end.
    ender: Ender,
    shared: Mutex<Shared>,
    connected: (Mutex<bool>, Condvar),
}

impl Agent {
    /// `protected`: other processes of the daemon on this node (the watchdog), never to be moved into a job.
    /// `parent`: where its job cgroups are (`freezer::CgroupParent`).
    pub fn new(settings: AgentSettings, parent: &CgroupParent, protected: &[i32]) -> std::io::Result<Arc<Agent>> {
        // Others may pass through the log directory but not list it; each log is its owner's alone. Root makes
        // the logs there: nobody else may have made it, or be able to change it or a directory above it.
        crate::private_dir::ensure(&settings.log_dir, "log directory")?;
        {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&settings.log_dir, std::fs::Permissions::from_mode(0o711))
                .map_err(|e| std::io::Error::other(format!("log directory {}: {e}", settings.log_dir.display())))?;
        }
        // A watchdog that died with the previous agent thawed nothing: let every job run now, before the controller
        // is reached (it may be away); the first schedule stops whichever jobs it must.
        if let Err(e) = crate::agent::freezer::thaw_unsuspended_under(&settings.node, parent) {
            crate::log_line!("cosched agent {}: thawing the jobs found at start: {e}", settings.node);
        }
        let groups = Arc::new(JobGroups::open_in(&settings.node, settings.freezer, parent)?);
        let switcher = Arc::new(Switcher::new(groups.clone(), settings.confirm_wait));
        let ender = Ender::new(groups.clone(), &settings.node);
        let mut jobs = BTreeMap::new();
        for id in groups.existing_jobs()? {
            if let Err(e) = groups.mark_how_stopped(id) {
                crate::log_line!("cosched agent {}: job {id}: {e}", settings.node);
            }
            jobs.insert(id, LocalJob::new(true));
        }
        let shared = Mutex::new(Shared { jobs, writer: None, execs: BTreeMap::new(), draining_pumps: Vec::new() });
        let guard = PidGuard::new(protected.iter().copied());
        Ok(Arc::new(Agent {
            settings,
            guard,
            groups,
            switcher,
            ender,
            shared,
            connected: (Mutex::new(false), Condvar::new()),
        }))
    }

    pub fn groups(&self) -> &JobGroups {
        &self.groups
    }

    /// Stop switching for good and let every job run (the agent can no longer promise to thaw them).
    pub fn stop_switching_and_thaw(&self) {
        self.switcher.stop();
        if let Err(e) = self.groups.thaw_all() {
            crate::log_line!("cosched agent {}: thawing every job: {e}", self.settings.node);
        }
    }

    pub fn switch_stats(&self) -> SwitchStats {
        self.switcher.stats()
    }

    /// Run forever: the switching thread, the reporter, and the controller link
    /// (reconnecting every second while the controller is away).
    pub fn run(self: &Arc<Self>) -> std::io::Result<()> {
        self.switcher.start_threads(self.settings.switching_threads, self.settings.realtime)?;
        let reporter = self.clone();
        std::thread::Builder::new().name("report".into()).spawn(move || reporter.report_loop())?;
        let keeper = self.clone();
        std::thread::Builder::new().name("logs".into()).spawn(move || keeper.log_loop())?;
        let agent = self.clone();
        std::thread::Builder::new().name("end-jobs".into()).spawn(move || {
            agent.ender.run(|end| {
                agent.send(&FromAgent::Forgotten { ack: end.ack, stuck: end.stuck });
            })
        })?;
        loop {
            if let Err(e) = self.serve_link() {
                crate::log_line!("cosched agent {}: controller link: {e}; retrying", self.settings.node);
            }
            self.shared.lock().unwrap().writer = None;
            std::thread::sleep(Duration::from_secs(1));
        }
    }

    /// Connect, prove we are an agent (over TCP), make sure the other end is our controller, then say hello and
    /// obey it. Over TCP every line is sealed: a line whose seal is wrong ends the link before it is acted on.
    fn serve_link(&self) -> std::io::Result<()> {
        let settings = &self.settings;
        let mut connection = Connection::open_as_agent(&settings.controller, &settings.credentials, &settings.node)
            .map_err(std::io::Error::other)?;
        connection.send(&Request::AgentHello(self.hello()?)).map_err(std::io::Error::other)?;
        self.shared.lock().unwrap().writer = Some(connection.writer());
        *self.connected.0.lock().unwrap() = true;
        self.connected.1.notify_all();
        while let Some(line) = connection.read_line(None).map_err(std::io::Error::other)? {
            match serde_json::from_str::<ToAgent>(&line) {
                Ok(message) => self.obey(message),
                Err(e) => crate::log_line!("cosched agent: bad message from the controller: {e}: {line}"),
            }
        }
        Err(std::io::Error::other("the controller closed the connection"))
    }

    fn hello(&self) -> std::io::Result<AgentHello> {
        let jobs: Vec<u64> = self.shared.lock().unwrap().jobs.keys().copied().collect();
        let adopted = jobs
            .iter()
            .map(|&job| {
                let tag = self.job_dir(job).and_then(|dir| JobTag::read(&dir));
                AdoptedJob {
                    job,
                    pids: self.groups.pids(job).unwrap_or_default(),
                    owner: tag.as_ref().map(|t| t.uid),
                    token: tag.map(|t| t.token),
                }
            })
            .collect();
        Ok(AgentHello {
            node: self.settings.node.clone(),
            cpus: self.settings.cpus,
            mem_bytes: self.settings.mem_bytes,
            adopted,
            freezer: format!("{:?}", self.groups.kind()).to_lowercase(),
            features: crate::wire::protocol::AGENT_FEATURES.iter().map(|f| f.to_string()).collect(),
        })
    }

    fn obey(&self, message: ToAgent) {
        let result = match message {
            // The proof was checked before anything else was read (`Connection::open_as_agent`).
            ToAgent::Welcome { .. } | ToAgent::ControllerProof(_) => Ok(()),
            ToAgent::Refused { reason } => Err(std::io::Error::other(format!("refused by the controller: {reason}"))),
            ToAgent::Schedule(schedule) => self.follow(schedule),
            ToAgent::Start(start) => self.start(start),
            ToAgent::Signal { job, signal } => self.signal(job, signal),
            ToAgent::Terminate { job, grace_ms } => self.terminate(job, Duration::from_millis(grace_ms)),
            ToAgent::AddPid { job, pid, ack, owner } => self.answer_pid_move(ack, self.add_pid(job, pid, owner)),
            ToAgent::RemovePid { job, pid, ack, owner } => self.answer_pid_move(ack, self.remove_pid(job, pid, owner)),
            ToAgent::Exec { job, ack, uid, gid, argv, cwd, env, umask } => {
                let spec = LaunchSpec {
                    procs_files: self.groups.procs_files(job),
                    uid,
                    gid,
                    cwd: PathBuf::from(cwd),
                    env,
                    argv,
                    open_files_soft_limit: crate::gate::starting_descriptor_limit(),
                    files: None,
                    umask,
                };
                self.exec(job, ack, spec)
            }
            ToAgent::ReadLogs { job, ranks, ack, owner } => {
                self.send(&FromAgent::Logs { ack, files: self.log_tails(job, &ranks, owner) });
                Ok(())
            }
            ToAgent::Forget { job, ack } => {
                let end_unreported = self.shared.lock().unwrap().jobs.remove(&job).is_some_and(|j| !j.end_reported);
                if end_unreported {
                    // An MPI job's other node is forgotten when its launcher ends, often before this node's survey
                    // finds its end: its CPU time since the last report would be lost with the cgroup.
                    let cpu_ns = self.groups.cpu_usage_ns(job).ok();
                    self.send(&FromAgent::Ended { job, exit_code: None, error: None, cpu_ns });
                }
                self.switcher.forget(job);
                // Everything the job started ends with it: what is left (a daemon of a task, a command of
                // `cosched rsh`, whatever Slurm did not end) is killed, then the cgroup goes.
                self.ender.end(job, monotonic_now(), true, ack);
                Ok(())
            }
        };
        if let Err(e) = result {
            crate::log_line!("cosched agent {}: {e}", self.settings.node);
        }
    }

    /// Mark the suspended jobs (before any is stopped, so that a crash in between cannot lose a suspension), then
    /// switch by the schedule; one whose slice the switcher cannot honour changes nothing.
    fn follow(&self, schedule: crate::wire::protocol::Schedule) -> std::io::Result<()> {
        crate::agent::switcher::check_slice_ns(schedule.slice_ns)
            .map_err(|e| std::io::Error::other(format!("schedule refused: {e}")))?;
        let marked = self.mark_suspended(&schedule);
        self.switcher.set_schedule(schedule).map_err(std::io::Error::other)?;
        marked
    }

    /// Tell the controller how pid change `ack` went; the result also goes to the agent's own log.
    fn answer_pid_move(&self, ack: u64, moved: std::io::Result<()>) -> std::io::Result<()> {
        self.send(&FromAgent::PidMoved { ack, error: moved.as_ref().err().map(|e| e.to_string()) });
        moved
    }

    /// Record on each job's cgroups whether it is suspended, for the watchdog (see `job_tag::mark_suspended`).
    fn mark_suspended(&self, schedule: &crate::wire::protocol::Schedule) -> std::io::Result<()> {
        for &job in &schedule.jobs {
            let suspended = schedule.suspended.contains(&job);
            for file in self.groups.procs_files(job) {
                if let Some(dir) = file.parent().filter(|d| d.exists()) {
                    crate::job_tag::mark_suspended(dir, suspended)?;
                }
            }
        }
        Ok(())
    }

    /// The job's cgroup directory in the primary hierarchy (the one that holds its tag).
    fn job_dir(&self, job: u64) -> Option<PathBuf> {
        self.groups.procs_files(job).first().and_then(|f| f.parent()).map(PathBuf::from)
    }

    fn log_path(&self, job: u64, uid: u32, task: &str, stream: &str) -> PathBuf {
        self.settings.log_dir.join(crate::agent::logs::log_name(job, uid, task, stream))
    }

    /// The tails of the job's logs: the files of its owner's name, which only root writes.
    fn log_tails(&self, job: u64, ranks: &[u32], owner: Option<u32>) -> Vec<LogTail> {
        let mut files = Vec::new();
        let per_file = LOG_TAIL_BYTES.min(LOGS_REPLY_BYTES / (2 * ranks.len().max(1) as u64));
        for &rank in ranks {
            for stream in ["out", "err"] {
                let path = owner.map(|uid| self.log_path(job, uid, &rank.to_string(), stream));
                let text = path.as_deref().map_or_else(String::new, |path| read_tail(path, per_file));
                let path = path.map_or_else(String::new, |path| path.display().to_string());
                files.push(LogTail { rank, stream: stream.into(), path, text });
            }
        }
        files
    }

    /// Move a process into a job this agent runs, if the guard allows it; confirm afterwards that the pid still
    /// names the process that was checked (a pid reused in between is moved back out and refused).
    fn add_pid(&self, job: u64, pid: i32, owner: Option<u32>) -> std::io::Result<()> {
        if !self.shared.lock().unwrap().jobs.contains_key(&job) {
            return Err(std::io::Error::other(format!("job {job} does not run on node {}", self.settings.node)));
        }
        let checked = self.guard.check(pid, owner).map_err(std::io::Error::other)?;
        if let Some((agent, other)) = crate::agent::pid_guard::job_of_process(checked.tgid) {
            // Moving it would take it out of that job: a process leaves its job only by ending, or by an
            // administrator's remove-pid.
            return Err(std::io::Error::other(format!(
                "process {pid} is in job {other} (agent {agent}): it leaves that job only by ending or by an \
                 administrator's remove-pid"
            )));
        }
        let places = self.groups.places_of(checked.tgid)?;
        self.groups.add_pid(job, checked.tgid)?;
        if crate::agent::pid_guard::ProcessFacts::read(checked.tgid).ok().as_ref() != Some(&checked) {
            let _ = self.groups.put_back(checked.tgid, &places);
            return Err(std::io::Error::other(format!("process {pid} changed while it was being moved")));
        }
        self.mark_has_processes(job);
        Ok(())
    }

    /// Move a member of the job (and nothing else) back to the agent's own cgroup.
    fn remove_pid(&self, job: u64, pid: i32, owner: Option<u32>) -> std::io::Result<()> {
        let checked = self.guard.check(pid, owner).map_err(std::io::Error::other)?;
        if !self.groups.pids(job)?.contains(&checked.tgid) {
            return Err(std::io::Error::other(format!("process {pid} is not a member of job {job}")));
        }
        self.groups.remove_pid(job, checked.tgid)
    }

    /// The job has processes (again): it may end, and be reported ended, once they are gone.
    fn mark_has_processes(&self, job: u64) {
        if let Some(j) = self.shared.lock().unwrap().jobs.get_mut(&job) {
            j.had_processes = true;
            j.end_reported = false;
        }
    }

    fn signal(&self, job: u64, signal: i32) -> std::io::Result<()> {
        let signal = nix::sys::signal::Signal::try_from(signal).map_err(std::io::Error::other)?;
        if matches!(signal, nix::sys::signal::Signal::SIGKILL | nix::sys::signal::Signal::SIGTERM) {
            // A job told to end that has no process (registered, none added yet) ends now.
            self.mark_has_processes(job);
        }
        self.groups.signal(job, signal)
    }

    /// SIGTERM every process of the job now, and kill whatever is left after `grace` (until none is, or what is
    /// left is reported stuck). A job with no process ends at once.
    fn terminate(&self, job: u64, grace: Duration) -> std::io::Result<()> {
        let termed = self.signal(job, nix::sys::signal::Signal::SIGTERM as i32);
        let kill_at = monotonic_now() + grace;
        if let Some(local) = self.shared.lock().unwrap().jobs.get_mut(&job) {
            local.kill_from = Some(kill_at);
        }
        self.ender.end(job, kill_at, false, None);
        termed
    }

    /// Create the job's cgroup (frozen unless its slot is on now), then start
    /// one process per rank inside it.
    fn start(&self, start: StartJob) -> std::io::Result<()> {
        let known = self.shared.lock().unwrap().jobs.contains_key(&start.job);
        if known || self.job_dir(start.job).is_some_and(|dir| dir.exists()) {
            return self.adopt(&start, known);
        }
        self.groups.create(start.job)?;
        crate::agent::logs::remove_job_files(&self.settings.log_dir, start.job);
        if let Some(dir) = self.job_dir(start.job) {
            JobTag { uid: start.uid, token: start.token.clone() }.write(&dir)?;
            if !start.register_only {
                crate::job_tag::write_expected_ranks(&dir, &start.ranks)?;
            }
        }
        self.switcher.prepare_new_job(start.job)?;
        let mut local = LocalJob::new(!start.register_only);
        if !start.register_only {
            for (local_rank, &rank) in start.ranks.iter().enumerate() {
                match self.launch(&start, rank, local_rank as u32) {
                    Ok(child) => local.children.push(child),
                    Err(e) => {
                        let _ = self.groups.signal(start.job, nix::sys::signal::Signal::SIGKILL);
                        self.send(&FromAgent::Failed { job: start.job, error: e.to_string() });
                        return Err(e);
                    }
                }
            }
        }
        self.shared.lock().unwrap().jobs.insert(start.job, local);
        self.switcher.job_started(start.job);
        Ok(())
    }

    /// A start for a job whose cgroup exists (found at the agent's start, or left over): the cgroup is this job's
    /// only if its tag names the same owner and token (records from before tags: untagged, no token). Another job's
    /// cgroup is refused and reported, never adopted, and left alone.
    fn adopt(&self, start: &StartJob, known: bool) -> std::io::Result<()> {
        let tag = self.job_dir(start.job).and_then(|dir| JobTag::read(&dir));
        let ours = match &tag {
            Some(tag) => !start.token.is_empty() && tag.token == start.token && tag.uid == start.uid,
            None => start.token.is_empty(),
        };
        if !ours {
            let owner = tag.map_or("untagged".to_string(), |t| format!("uid {}", t.uid));
            let error = format!(
                "the cgroup of job {} on node {} belongs to another job ({owner}): not started, and that job is left \
                 alone",
                start.job, self.settings.node
            );
            self.send(&FromAgent::Failed { job: start.job, error: error.clone() });
            return Err(std::io::Error::other(error));
        }
        if !known {
            let local = LocalJob::new(true);
            self.shared.lock().unwrap().jobs.insert(start.job, local);
        }
        Ok(()) // adopted after a restart: its processes run already
    }

    /// Start a command of the job (an MPI daemon) inside its cgroup; `report_loop` says when it ends.
    fn exec(&self, job: u64, ack: u64, mut spec: LaunchSpec) -> std::io::Result<()> {
        let started = self.start_exec(job, ack, &mut spec);
        if let Err(e) = &started {
            self.send(&FromAgent::ExecEnded { ack, exit_code: None, error: Some(e.to_string()) });
        }
        started
    }

    fn start_exec(&self, job: u64, ack: u64, spec: &mut LaunchSpec) -> std::io::Result<()> {
        if !self.shared.lock().unwrap().jobs.contains_key(&job) {
            return Err(std::io::Error::other(format!("job {job} does not run on node {}", self.settings.node)));
        }
        spec.env.extend([
            ("COSCHED_JOB_ID".to_string(), job.to_string()),
            ("COSCHED_NODE".to_string(), self.settings.node.clone()),
        ]);
        let pump = |stream: &str| {
            let path = self.exec_log_path(job, spec.uid, ack, stream);
            let file =
                root_log_file(&path).map_err(|e| std::io::Error::other(format!("log file {}: {e}", path.display())))?;
            let log = crate::agent::logs::MadeLog::of(path, &file)?;
            let child =
                crate::agent::log_pump::spawn_pump(&self.settings.helper_program, file, self.settings.logs.pump())?;
            Ok::<_, std::io::Error>(Pump { child, ack, log })
        };
        if self.shared.lock().unwrap().execs.contains_key(&ack) {
            // (The controller numbers commands anew when it starts again; the older command still runs.)
            return Err(std::io::Error::other(format!(
                "a command numbered {ack} still runs on {}",
                self.settings.node
            )));
        }
        let mut pumps = vec![pump("out")?];
        match pump("err") {
            Ok(err) => pumps.push(err),
            Err(e) => {
                let now = std::time::Instant::now();
                self.shared.lock().unwrap().draining_pumps.extend(pumps.into_iter().map(|pump| (pump, now)));
                return Err(e);
            }
        }
        let (out, err) = (pumps[0].child.stdin.take(), pumps[1].child.stdin.take());
        let (Some(out), Some(err)) = (out, err) else { unreachable!("a pump is spawned with a pipe") };
        let shim = crate::agent::launch::spawn_shim(&self.settings.helper_program, spec, |command| {
            command.stdout(out).stderr(err);
        });
        let shim = match shim {
            Ok(shim) => shim,
            Err(e) => {
                let now = std::time::Instant::now();
                self.shared.lock().unwrap().draining_pumps.extend(pumps.into_iter().map(|pump| (pump, now)));
                return Err(std::io::Error::other(format!("starting a command of job {job}: {e}")));
            }
        };
        self.shared.lock().unwrap().execs.insert(ack, ExecRun { shim, pumps });
        self.mark_has_processes(job);
        Ok(())
    }

    fn exec_log_path(&self, job: u64, uid: u32, ack: u64, stream: &str) -> PathBuf {
        self.log_path(job, uid, &format!("exec-{ack}"), stream)
    }

    /// The `Exec` commands that have ended: their exit codes, or why they never started. Their logs go with their
    /// copies if empty (each command left two files for ever, most of them empty).
    fn ended_execs(&self) -> Vec<(u64, Result<i32, String>)> {
        let mut shared = self.shared.lock().unwrap();
        let done: Vec<(u64, i32)> = shared
            .execs
            .iter_mut()
            .filter_map(|(&ack, run)| {
                Some((ack, crate::agent::supervisor::exit_code(run.shim.child.try_wait().ok()??)))
            })
            .collect();
        let mut ended = Vec::new();
        let now = std::time::Instant::now();
        let mut copied = Vec::new();
        shared.draining_pumps.retain_mut(|(pump, ended)| {
            if now.duration_since(*ended) >= PUMP_DRAIN {
                let _ = pump.child.kill();
            }
            let runs = pump.still_runs();
            if !runs {
                copied.push(pump.log.clone());
            }
            runs
        });
        for (ack, code) in done {
            let Some(mut run) = shared.execs.remove(&ack) else { continue };
            shared.draining_pumps.extend(run.pumps.drain(..).map(|pump| (pump, now)));
            let outcome = match run.shim.launch_failure() {
                Some(failure) => {
                    Err(format!("the command could not start on {}: {}", self.settings.node, failure.reason()))
                }
                None => Ok(code),
            };
            ended.push((ack, outcome));
        }
        drop(shared);
        // (Outside the lock: the link to the controller waits on it, and a file system may be slow.)
        for log in copied {
            log.remove_if_empty();
        }
        ended
    }

    /// Every second: keep the logs within their bounds (`crate::agent::logs`); the jobs this agent runs and its
    /// remote commands whose output is still copied keep theirs.
    fn log_loop(&self) {
        loop {
            std::thread::sleep(crate::agent::logs::KEEPING_PERIOD);
            let writers = {
                let shared = self.shared.lock().unwrap();
                crate::agent::logs::Writers {
                    jobs: shared.jobs.keys().copied().collect(),
                    execs: shared
                        .execs
                        .keys()
                        .copied()
                        .chain(shared.draining_pumps.iter().map(|(p, _)| p.ack))
                        .collect(),
                }
            };
            crate::agent::logs::keep_within_bounds(&self.settings.log_dir, &self.settings.logs, &writers);
        }
    }

    fn launch(&self, start: &StartJob, rank: u32, local_rank: u32) -> std::io::Result<Child> {
        let mut env = start.env.clone();
        env.extend([
            ("COSCHED_JOB_ID".to_string(), start.job.to_string()),
            ("COSCHED_RANK".to_string(), rank.to_string()),
            ("COSCHED_SIZE".to_string(), start.size.to_string()),
            ("COSCHED_LOCAL_RANK".to_string(), local_rank.to_string()),
            ("COSCHED_LOCAL_SIZE".to_string(), start.ranks.len().to_string()),
            ("COSCHED_NODE".to_string(), self.settings.node.clone()),
            ("COSCHED_CPUS".to_string(), start.cpus.iter().map(|c| c.to_string()).collect::<Vec<_>>().join(",")),
        ]);
        if !start.mpi_hosts.is_empty() {
            env.extend(self.mpi_launcher_environment(start)?);
        }
        let spec = LaunchSpec {
            procs_files: self.groups.procs_files(start.job),
            uid: start.uid,
            gid: start.gid,
            cwd: PathBuf::from(&start.cwd),
            env,
            argv: start.argv.clone(),
            open_files_soft_limit: crate::gate::starting_descriptor_limit(),
            files: self.task_files(start, rank),
            umask: start.umask,
        };
        let log = |stream: &str| {
            let path = self.log_path(start.job, start.uid, &rank.to_string(), stream);
            root_log_file(&path).map_err(|e| std::io::Error::other(format!("log file {}: {e}", path.display())))
        };
        let (out, err) = (log("out")?, log("err")?);
        let task = SupervisedTask { rank, launch: spec, logs: self.settings.logs.pump() };
        spawn_supervisor(&self.settings.helper_program, &task, |command| {
            command.stdout(out).stderr(err);
        })
        .map_err(|e| std::io::Error::other(format!("starting job {} rank {rank}: {e}", start.job)))
    }

    /// The user's files for task `rank` (`submit -o`/`-e`), their patterns expanded here. Only the shim opens
    /// them, as the user. An MPI job's launcher is its one task.
    /// The user's name is looked up only for a pattern with `%u` (with a slow directory service the lookup would
    /// hold every message to this agent).
    fn task_files(&self, start: &StartJob, rank: u32) -> Option<crate::wire::output_files::TaskFiles> {
        if start.output_files.is_empty() {
            return None;
        }
        let user = if start.output_files.names_the_user() {
            let entry = nix::unistd::User::from_uid(nix::unistd::Uid::from_raw(start.uid)).ok().flatten();
            entry.map_or_else(|| start.uid.to_string(), |u| u.name)
        } else {
            String::new()
        };
        let names = crate::wire::output_files::TaskNames {
            job: start.job,
            rank,
            node: &self.settings.node,
            user: &user,
            job_name: &start.name,
        };
        let tasks = if start.mpi_hosts.is_empty() { start.size } else { 1 };
        start.output_files.for_task(&names, tasks)
    }

    /// An MPI launcher's environment (`crate::agent::mpi`), with Hydra's host file written beside the job's logs: the
    /// log folder is root's, so only the agent makes files there. The file is root's and readable by all (the
    /// launcher runs as the job's owner): it names the job's nodes, which `status` shows everyone.
    fn mpi_launcher_environment(&self, start: &StartJob) -> std::io::Result<Vec<(String, String)>> {
        let host_file = self.settings.log_dir.join(format!("job-{}.hosts", start.job));
        new_root_file(&host_file, 0o644)
            .and_then(|mut file| file.write_all(crate::agent::mpi::hydra_host_file(&start.mpi_hosts).as_bytes()))
            .map_err(|e| std::io::Error::other(format!("MPI host file {}: {e}", host_file.display())))?;
        let interface = crate::agent::mpi::launcher_interface(&start.env, &self.settings.controller);
        let node = crate::agent::mpi::LauncherNode {
            program: &self.settings.helper_program,
            controller: &self.settings.controller,
            munge_socket: self.settings.users_munge_socket.as_deref(),
            hydra_host_file: &host_file,
            interface: interface.as_deref(),
        };
        Ok(crate::agent::mpi::launcher_environment(&start.mpi_hosts, &node))
    }

    /// Send an event to the controller; false when there is no link or the write failed (then the link is gone).
    fn send(&self, event: &FromAgent) -> bool {
        let mut shared = self.shared.lock().unwrap();
        let Some(writer) = shared.writer.as_mut() else { return false };
        let sent = write_message(writer, event).is_ok();
        if !sent {
            shared.writer = None;
        }
        sent
    }

    fn mark_end_reported(&self, job: u64) {
        if let Some(j) = self.shared.lock().unwrap().jobs.get_mut(&job) {
            j.end_reported = true;
        }
    }

    /// Every 100 ms: CPU use of each job, and jobs with no process left.
    fn report_loop(&self) {
        loop {
            std::thread::sleep(crate::wire::protocol::REPORT_PERIOD);
            let (usage, ended) = self.survey();
            for (job, exit_code, error) in ended {
                let cpu_ns = self.groups.cpu_usage_ns(job).ok();
                // Found again at the next survey when the link is down: the controller learns it once back.
                if self.send(&FromAgent::Ended { job, exit_code, error, cpu_ns }) {
                    self.mark_end_reported(job);
                }
            }
            for (ack, outcome) in self.ended_execs() {
                let (exit_code, error) = match outcome {
                    Ok(code) => (Some(code), None),
                    Err(reason) => (None, Some(reason)),
                };
                self.send(&FromAgent::ExecEnded { ack, exit_code, error });
            }
            let load_avg = std::fs::read_to_string("/proc/loadavg")
                .ok()
                .and_then(|s| s.split_whitespace().next().and_then(|v| v.parse().ok()))
                .unwrap_or(0.0);
            let (switches, switch_errors) = (self.switcher.switches(), self.switcher.errors());
            let (slice_starts, switch_latencies_ns) = self.switcher.take_slice_starts();
            let stuck_jobs = self.ender.stuck();
            let report = FromAgent::Report {
                jobs: usage,
                load_avg,
                switches,
                switch_errors,
                slice_starts,
                switch_latencies_ns,
                stuck_jobs,
            };
            self.send(&report);
        }
    }

    /// The usage of each running job, and the jobs that have ended here.
    fn survey(&self) -> (Vec<JobUsage>, Vec<EndedHere>) {
        let ran = self.switcher.take_ran();
        let mut shared = self.shared.lock().unwrap();
        let mut usage = Vec::new();
        let mut ended = Vec::new();
        for (&job, local) in shared.jobs.iter_mut() {
            if local.end_reported {
                continue;
            }
            reap(local);
            let pids = self.groups.pids(job).unwrap_or_default();
            if local.kill_from.is_some_and(|at| at <= monotonic_now()) && !pids.is_empty() {
                // A task that joined after the kill had found the cgroup empty: killed too.
                self.ender.end(job, monotonic_now(), false, None);
            }
            match self.job_end(job, local, &pids) {
                JobEnd::Running => {
                    let cpu_ns = self.groups.cpu_usage_ns(job).unwrap_or(0);
                    // Frozen the whole time since the last report, not only at this instant.
                    let frozen = self.switcher.is_frozen(job) && !ran.contains(&job);
                    usage.push(JobUsage { job, cpu_ns, pids, frozen });
                }
                JobEnd::StatusesPending => {}
                JobEnd::Over(exit_code, failure) => ended.push((job, exit_code, failure)),
            }
        }
        (usage, ended)
    }

    /// Is the job over on this node? A job with tasks (started here, each with its supervisor) is over once its
    /// tasks have ended: whatever they left in its cgroup (a daemon, a command of `cosched rsh`, a process added to
    /// it) is killed first, and the job is over once that is gone too, or found stuck (reported, still retried).
    /// A job without tasks (registered, Slurm's, an MPI job's other nodes) is over when its cgroup is empty.
    fn job_end(&self, job: u64, local: &mut LocalJob, pids: &[i32]) -> JobEnd {
        let live_children = local.children.iter_mut().any(|c| matches!(c.try_wait(), Ok(None)));
        if !local.had_processes || live_children {
            return JobEnd::Running;
        }
        // The tasks' supervisors, started by this agent or an earlier one, recorded how they ended.
        let dir = self.job_dir(job);
        let statuses = dir.as_deref().map(crate::job_tag::task_statuses).unwrap_or_default();
        let expected = dir.as_deref().and_then(crate::job_tag::expected_ranks);
        let tasks_ended = !statuses.iter().any(|(_, status)| status.pending());
        let over = || {
            let end = crate::job_tag::tasks_end(expected.as_deref(), &statuses);
            JobEnd::Over(end.exit_code.or(local.exit_code), end.failure_reason())
        };
        if pids.is_empty() {
            return if tasks_ended { over() } else { JobEnd::StatusesPending };
        }
        let has_tasks = !local.children.is_empty() || !statuses.is_empty() || expected.is_some();
        if !(has_tasks && tasks_ended) {
            return JobEnd::Running;
        }
        self.ender.end(job, monotonic_now(), false, None);
        if self.ender.is_stuck(job) {
            over()
        } else {
            JobEnd::Running
        }
    }
}

/// What `Agent::job_end` finds.
enum JobEnd {
    Running,
    /// No process left, but a task's status is still to be written.
    StatusesPending,
    /// Its exit code, and why it failed when no task's exit code says so.
    Over(Option<i32>, Option<String>),
}

/// A job that has ended on this node: its id, its exit code, and why it failed when no task's exit code says so.
type EndedHere = (u64, Option<i32>, Option<String>);

/// A new, empty log file, root's and readable by nobody else: only a root copy of the task's output writes it
/// (`crate::agent::log_pump`).
fn root_log_file(path: &std::path::Path) -> std::io::Result<std::fs::File> {
    new_root_file(path, 0o600)
}

/// A new file of root's with `mode`, opened to append: every writer of one log (a launcher, the `cosched rsh` it
/// runs) adds at the end instead of overwriting another's lines from its own offset.
fn new_root_file(path: &std::path::Path, mode: u32) -> std::io::Result<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt;
    // Never reuse a file someone else may hold open.
    let _ = std::fs::remove_file(path);
    let file = std::fs::OpenOptions::new().append(true).create_new(true).mode(0o600).open(path)?;
    // (The mode asked at creation is masked by the daemon's umask.)
    file.set_permissions(std::os::unix::fs::PermissionsExt::from_mode(mode))?;
    Ok(file)
}

/// The last `max_bytes` of a file ("" if it cannot be read): never through a link, never waiting for a lease's
/// break (`crate::agent::logs`), never more than asked.
fn read_tail(path: &std::path::Path, max_bytes: u64) -> String {
    use std::io::{Read, Seek, SeekFrom};
    use std::os::unix::fs::OpenOptionsExt;
    let flags = nix::fcntl::OFlag::O_NOFOLLOW | nix::fcntl::OFlag::O_NONBLOCK;
    let Ok(mut file) = std::fs::OpenOptions::new().read(true).custom_flags(flags.bits()).open(path) else {
        return String::new();
    };
    let len = file.metadata().map(|m| m.len()).unwrap_or(0);
    let _ = file.seek(SeekFrom::Start(len.saturating_sub(max_bytes)));
    let mut bytes = Vec::new();
    let _ = Read::take(&mut file, max_bytes).read_to_end(&mut bytes);
    String::from_utf8_lossy(&bytes).into_owned()
}

/// Collect the exit codes of supervisors that are done (each exits with its task's status); the first non-zero
/// wins. What they recorded on the cgroup, which outlives this agent, takes precedence.
fn reap(local: &mut LocalJob) {
    for child in &mut local.children {
        if let Ok(Some(status)) = child.try_wait() {
            let code = crate::agent::supervisor::exit_code(status);
            if local.exit_code.is_none_or(|c| c == 0) {
                local.exit_code = Some(code);
            }
        }
    }
}

impl Agent {
    /// Wait (at most `timeout`) until the agent has said hello to its controller.
    pub fn wait_connected(&self, timeout: Duration) -> bool {
        let guard = self.connected.0.lock().unwrap();
        let (guard, _) = self.connected.1.wait_timeout_while(guard, timeout, |c| !*c).unwrap();
        *guard
    }
}
