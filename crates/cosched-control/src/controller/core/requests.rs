//! Users' requests: the rules of who may do what, admission of a job, and the changes a request makes (written
//! before its reply).

use super::*;

impl Rules {
    pub(super) fn handle(&self, state: &mut State, who: &Identity, request: Request, job_token: String) -> Outcome {
        match request {
            Request::Submit(r) => self.submit(state, who, r, job_token),
            Request::Register(r) => self.register(state, who, r, job_token),
            Request::SetClass { job, class } => self.set_class(state, who, job, &class),
            Request::SetResources { job, cpus_per_node, mem_bytes } => {
                self.set_resources(state, who, job, cpus_per_node, mem_bytes)
            }
            Request::Usage { job } => self.usage(state, who, job),
            Request::NodeLoad { node } => node_load(state, node.as_deref()),
            Request::Status {} => Ok(self.status_for(state, who).into()),
            Request::Suspend { job } => self.suspend_resume(state, who, job, true),
            Request::Resume { job } => self.suspend_resume(state, who, job, false),
            Request::Kill { job } => self.kill(state, who, job),
            Request::Signal { job, signal } => self.signal(state, who, job, &signal),
            Request::History(r) => Ok(self.history(state, who, &r).into()),
            Request::SlurmBegin(r) => self.slurm_begin(state, who, r, job_token),
            Request::MonitorToken {}
            | Request::AddPid { .. }
            | Request::SlurmAttach { .. }
            | Request::SlurmEnd(_)
            | Request::RemovePid { .. }
            | Request::Logs { .. }
            | Request::Exec(_)
            | Request::Auth { .. }
            | Request::Challenge { .. }
            | Request::AgentAuth { .. }
            | Request::AgentHello(_) => Err("this request is not valid here".into()),
        }
    }

    pub(super) fn submit(&self, state: &mut State, who: &Identity, r: SubmitRequest, token: String) -> Outcome {
        let class = parse_class(&r.class)?;
        if !class.submit_allowed(who.admin) {
            return Err("permission denied: only administrators may submit express jobs".into());
        }
        if r.tasks == 0 {
            return Err("a job needs at least one task (-n)".into());
        }
        let cpus: u32 = state.nodes.iter().map(|n| n.cpus).sum();
        if r.tasks > cpus.max(1) {
            return Err(format!("-n {} is more tasks than the {cpus} CPUs of all nodes together", r.tasks));
        }
        if r.nodes.is_some_and(|n| n as usize > state.nodes.len()) {
            return Err(format!("--nodes {} is more than the {} nodes known", r.nodes.unwrap_or(0), state.nodes.len()));
        }
        if r.nodes == Some(0) || r.nodes.is_some_and(|n| n > r.tasks) {
            return Err(format!("--nodes must be between 1 and the number of tasks ({})", r.tasks));
        }
        if r.argv.is_empty() || r.argv[0].is_empty() {
            return Err("no command given".into());
        }
        let mut job = self.new_job(state, who, class, r.local, r.tasks, token);
        job.nodes = r.nodes;
        job.mem_bytes = r.mem_bytes;
        job.slice_opt_out = r.slice_opt_out;
        job.argv = r.argv;
        job.cwd = r.cwd;
        job.env = r.env;
        job.mpi = r.mpi;
        job.name = r.name;
        job.time_limit_s = r.time_limit_s;
        job.output_files = r.output_files;
        job.umask = r.umask;
        self.check_fits_ever(state, &job)?;
        self.insert_job(state, job).map(ReplyData::from)
    }

    pub(super) fn register(&self, state: &mut State, who: &Identity, r: RegisterRequest, token: String) -> Outcome {
        let class = parse_class(&r.class)?;
        if !class.submit_allowed(who.admin) {
            return Err("permission denied: only administrators may register express jobs".into());
        }
        let node = match &r.node {
            Some(name) => name.clone(),
            None => state.nodes.first().map(|n| n.name.clone()).ok_or("no node agent is known yet")?,
        };
        let index = node_index(state, &node).ok_or_else(|| format!("unknown node {node:?}"))?;
        let cpus = r.cpus_per_node.max(r.min_cpus).max(1);
        if cpus > state.nodes[index].cpus {
            return Err(format!("node {node} has {} CPUs, the job asks for {cpus}", state.nodes[index].cpus));
        }
        let mut job = self.new_job(state, who, class, r.local, cpus, token);
        job.nodes = Some(1);
        job.mem_bytes = r.mem_bytes;
        job.registered = true;
        let placement = self.admit_registered(state, &job, &[index])?;
        let reply = self.insert_job(state, job)?;
        self.start_job(state, reply.job, placement);
        self.recompute_plan(state);
        self.send_schedules(state);
        Ok(reply.into())
    }

    /// A queued job under the next id, submitted now, with its secret token.
    pub(super) fn new_job(
        &self,
        state: &State,
        who: &Identity,
        class: cosched_policy::cluster::JobClass,
        local: bool,
        tasks: u32,
        token: String,
    ) -> JobRecord {
        let mut job = JobRecord::new(state.next_job, who, class, local, tasks);
        job.submitted_unix_ms = state.now.unix_ms;
        job.token = token;
        job
    }

    /// Record a new job under the next id. Ids come from the controller alone: the job must carry `next_job`, which
    /// must not be used up, and no record may have it; the job must fit within the limits of jobs not over.
    pub(super) fn insert_job(&self, state: &mut State, job: JobRecord) -> Result<SubmitReply, String> {
        let id = job.id;
        if job.token.is_empty() {
            return Err("a new job needs a token (its cgroup's tag): nothing was changed".into());
        }
        if id > MAX_JOB_ID {
            return Err(format!(
                "no new job can be recorded: every job id up to {MAX_JOB_ID} has been given out; nothing was changed"
            ));
        }
        if id != state.next_job || state.jobs.contains_key(&id) {
            return Err(format!("job id {id} is not the next free one: nothing was changed"));
        }
        self.check_job_limits(state, job.uid)?;
        state.records.insert_job(&job)?;
        state.next_job = id + 1; // id <= MAX_JOB_ID < u64::MAX
        state.jobs.insert(id, job);
        self.replan(state);
        Ok(SubmitReply { job: id, state: state.jobs[&id].state })
    }

    /// Refuse a new job of `uid` beyond the bounds on jobs not over (each user's, and all users' together).
    pub(super) fn check_job_limits(&self, state: &State, uid: u32) -> Result<(), String> {
        let limits = self.settings.job_limits;
        let live = || state.jobs.values().filter(|j| !j.state.is_over());
        let total = live().count();
        if total >= limits.total {
            return Err(format!(
                "job limit: {total} jobs are not over, the most all users may have (--max-jobs {})",
                limits.total
            ));
        }
        let theirs = live().filter(|j| j.uid == uid).count();
        if theirs >= limits.per_user {
            return Err(format!(
                "job limit: uid {uid} has {theirs} jobs not over, the most one user may have (--max-jobs-per-user {})",
                limits.per_user
            ));
        }
        Ok(())
    }

    /// Refuse a job that could not start even on an empty machine.
    pub(super) fn check_fits_ever(&self, state: &State, job: &JobRecord) -> Result<(), String> {
        if state.nodes.is_empty() {
            return Err("no node agent has connected yet".into());
        }
        let mut shape = self.shape(state);
        shape.accepting = vec![true; shape.accepting.len()];
        match state.cosched.probe_alone(shape.clone(), plan_job(job, None, false)) {
            JobStatus::Queued => Err(format!(
                "the job can never run here: {} tasks{} with {} bytes per node on {} nodes of {:?} CPUs",
                job.tasks,
                job.nodes.map(|n| format!(" on {n} nodes")).unwrap_or_default(),
                job.mem_bytes,
                shape.cpus_per_node.len(),
                shape.cpus_per_node
            )),
            JobStatus::Placed { .. } => Ok(()),
        }
    }

    pub(super) fn owned_job<'a>(state: &'a State, who: &Identity, id: u64) -> Result<&'a JobRecord, String> {
        let job = state.jobs.get(&id).ok_or_else(|| format!("no job {id}"))?;
        who.may_act_on(job)?;
        Ok(job)
    }

    /// Send `node`'s agent a request numbered with a fresh acknowledgement, which only that agent may answer, with
    /// an answer of `kind`. A remote command is refused when its requester has too many waiting already.
    pub(super) fn ask(
        &self,
        state: &mut State,
        node: &str,
        kind: AnswerKind,
        requester: u32,
        message: impl FnOnce(u64) -> ToAgent,
    ) -> Result<u64, String> {
        match kind {
            AnswerKind::ExecEnded => self.check_waiting_execs(state, requester)?,
            AnswerKind::PidMoved => check_waiting_moves(state, requester)?,
            _ => {}
        }
        let ack = state.next_ack;
        let message = message(ack);
        let joins = match &message {
            ToAgent::AddPid { job, .. } => Some(*job),
            _ => None,
        };
        send_to(state, node, message)?;
        state.next_ack += 1;
        state.pending_answers.insert(ack, Pending { node: node.to_string(), kind, requester, joins });
        Ok(ack)
    }

    /// Each waiting remote command holds a connection of its user: beyond the bound, the user would have none left
    /// for anything else (not even to kill the job).
    pub(super) fn check_waiting_execs(&self, state: &State, requester: u32) -> Result<(), String> {
        let limit = self.settings.job_limits.waiting_execs_per_user;
        let waiting = state
            .pending_answers
            .values()
            .filter(|p| p.kind == AnswerKind::ExecEnded && p.requester == requester)
            .count();
        if waiting >= limit {
            return Err(format!(
                "uid {requester} has {waiting} remote commands waiting, the most one user may (a connection each; \
                 the rest stay for other requests)"
            ));
        }
        Ok(())
    }

    /// Check a remote command (an MPI launcher's remote daemon) in the caller's job: the job's owner, group and
    /// umask it runs with.
    pub(super) fn check_exec(
        state: &State,
        who: &Identity,
        r: &ExecRequest,
    ) -> Result<(u32, u32, Option<u32>), String> {
        let job = Self::owned_job(state, who, r.job)?;
        if job.state != JobState::Running && job.state != JobState::Suspended {
            return Err(format!("job {} is {}: commands run only in a running job", r.job, job.state.name()));
        }
        if job.on_node(&r.node).is_none() {
            return Err(format!("job {} has no CPUs on node {}", r.job, r.node));
        }
        if r.argv.first().is_none_or(|program| program.is_empty()) {
            return Err("no command given".into());
        }
        Ok((job.uid, job.gid, job.umask))
    }

    /// Check a pid change and name the node it goes to.
    pub(super) fn pid_change_node(
        state: &State,
        who: &Identity,
        id: u64,
        pid: i32,
        node: Option<String>,
    ) -> Result<String, String> {
        let job = Self::owned_job(state, who, id)?;
        if pid <= 0 {
            return Err(format!("invalid pid {pid}"));
        }
        if job.state.is_over() {
            return Err(format!("job {id} is {}", job.state.name()));
        }
        let node = match node {
            Some(n) => n,
            None => job.placement.first().map(|p| p.node.clone()).ok_or("the job has no node yet")?,
        };
        if job.on_node(&node).is_none() {
            return Err(format!("job {id} has no CPUs on node {node}"));
        }
        Ok(node)
    }

    pub(super) fn set_class(&self, state: &mut State, who: &Identity, id: u64, class: &str) -> Outcome {
        let to = parse_class(class)?;
        let job = Self::owned_job(state, who, id)?;
        if !job.class.change_allowed(to, who.admin) {
            return Err(format!(
                "permission denied: only administrators may raise a job's class ({} to {})",
                job.class.name(),
                to.name()
            ));
        }
        self.update_job(state, id, |j| j.class = to)?;
        Ok(ClassReply { job: id, class: to }.into())
    }

    pub(super) fn set_resources(
        &self,
        state: &mut State,
        who: &Identity,
        id: u64,
        cpus: Option<u32>,
        mem: Option<u64>,
    ) -> Outcome {
        let job = Self::owned_job(state, who, id)?;
        if job.state != JobState::Queued && cpus.is_some_and(|c| c != job.tasks) {
            return Err(format!("job {id} has started: its CPU count cannot change now"));
        }
        // A started job was admitted with its memory: more now is admitted again, against what the other jobs on
        // its nodes hold (a reviewer raised two running jobs to 70 GB on a 25 GB node and kept others queued).
        if let Some(more) = mem.filter(|&m| job.state != JobState::Queued && m > job.mem_bytes) {
            memory_free_for(state, job, more)?;
        }
        if cpus == Some(0) {
            return Err("a job needs at least one CPU".into());
        }
        if let (Some(c), Some(n)) = (cpus, job.nodes) {
            if n > c {
                return Err(format!("job {id} asks for {n} nodes: it needs at least {n} CPUs"));
            }
        }
        let mut changed = job.clone();
        if let Some(c) = cpus {
            changed.tasks = c;
        }
        if let Some(m) = mem {
            changed.mem_bytes = m;
        }
        self.check_fits_ever(state, &changed)?;
        self.update_job(state, id, |j| *j = changed)?;
        Ok(ResourcesReply { job: id }.into())
    }

    pub(super) fn usage(&self, state: &State, who: &Identity, id: u64) -> Outcome {
        let job = Self::owned_job(state, who, id)?;
        let live = state.live.get(&id);
        let pids: Vec<i32> = live.map(|l| l.usage.values().flat_map(|u| u.pids.clone()).collect()).unwrap_or_default();
        Ok(UsageReply {
            job: id,
            state: job.state,
            cpu_ns: live.map_or(0, |l| l.cpu_ns),
            pids,
            slice_share: self.slice_share(state, id),
        }
        .into())
    }

    pub(super) fn suspend_resume(&self, state: &mut State, who: &Identity, id: u64, suspend: bool) -> Outcome {
        let job = Self::owned_job(state, who, id)?;
        let (from, to) =
            if suspend { (JobState::Running, JobState::Suspended) } else { (JobState::Suspended, JobState::Running) };
        if job.state != from {
            return Err(format!("job {id} is {}, not {}", job.state.name(), from.name()));
        }
        if !suspend && job.held_by_admin && !who.admin {
            return Err(format!(
                "permission denied: an administrator suspended job {id}; only an administrator may resume it"
            ));
        }
        self.update_job(state, id, |j| {
            j.state = to;
            j.held_by_admin = suspend && who.admin;
        })?;
        Ok(JobStateReply { job: id, state: to }.into())
    }

    pub(super) fn kill(&self, state: &mut State, who: &Identity, id: u64) -> Outcome {
        let job = Self::owned_job(state, who, id)?.clone();
        if job.state.is_over() {
            return Err(format!("job {id} is already {}", job.state.name()));
        }
        if job.state == JobState::Queued {
            let now_ms = state.now.unix_ms;
            self.update_job(state, id, |j| j.end(JobState::Killed, now_ms))?;
            return Ok(KillReply { job: id, state: KillState::Killed }.into());
        }
        self.update_job(state, id, |j| j.error = Some(KILLED.into()))?;
        self.send_terminate(state, &job);
        Ok(KillReply { job: id, state: KillState::Killing }.into())
    }

    /// Tell every node of the job to end it; a node whose agent is away is told when it comes back.
    pub(super) fn send_terminate(&self, state: &mut State, job: &JobRecord) {
        let grace_ms = self.settings.kill_wait.as_millis() as u64;
        for p in job.placement.iter().filter(|p| !job.ended_on.contains(&p.node)) {
            let _ = send_to(state, &p.node, ToAgent::Terminate { job: job.id, grace_ms });
        }
    }

    pub(super) fn signal(&self, state: &mut State, who: &Identity, id: u64, name: &str) -> Outcome {
        let job = Self::owned_job(state, who, id)?;
        let signal = parse_signal(name)?;
        if job.state != JobState::Running && job.state != JobState::Suspended {
            return Err(format!("job {id} is {}: no process to signal", job.state.name()));
        }
        let nodes: Vec<String> = job.placement.iter().map(|p| p.node.clone()).collect();
        for node in nodes {
            send_to(state, &node, ToAgent::Signal { job: id, signal: signal as i32 })?;
        }
        Ok(SignalReply { job: id, signal: signal.as_str().to_string() }.into())
    }

    /// For a request: change a job, persist it, and replan; a change that cannot be persisted is not made.
    pub(super) fn update_job(
        &self,
        state: &mut State,
        id: u64,
        change: impl FnOnce(&mut JobRecord),
    ) -> Result<(), String> {
        let mut job = state.jobs[&id].clone();
        change(&mut job);
        #[cfg(test)]
        let skip = planted::is(Bug::ReplyBeforeSave);
        #[cfg(not(test))]
        let skip = false;
        if !skip {
            state.records.save_job(&job)?;
        }
        state.jobs.insert(id, job);
        self.replan(state);
        Ok(())
    }

    /// For an event (what an agent saw happen): change a job and replan; it is persisted now or once storage
    /// works again.
    pub(super) fn update_job_or_hold(&self, state: &mut State, id: u64, change: impl FnOnce(&mut JobRecord)) {
        let Some(job) = state.jobs.get(&id) else { return };
        let mut job = job.clone();
        change(&mut job);
        state.records.save_job_or_hold(&job);
        state.jobs.insert(id, job);
        self.replan(state);
    }
}

/// Has every node of started job `job` `mem_bytes` free beside the memory the other jobs placed there hold?
fn memory_free_for(state: &State, job: &JobRecord, mem_bytes: u64) -> Result<(), String> {
    for p in &job.placement {
        let Some(node) = node_index(state, &p.node).map(|i| &state.nodes[i]) else { continue };
        let others =
            state.jobs.values().filter(|j| j.id != job.id && !j.state.is_over() && j.on_node(&p.node).is_some());
        let held: u64 = others.map(|j| j.mem_bytes).sum();
        if held.saturating_add(mem_bytes) > node.mem_bytes {
            return Err(format!(
                "job {} has started: node {} has {} bytes, other jobs hold {held}, so {mem_bytes} do not fit; nothing \
                 was changed",
                job.id, p.node, node.mem_bytes
            ));
        }
    }
    Ok(())
}

/// Moves of processes one user may have waiting on the agents: each costs the agent a look at every thread of the
/// process on its message loop, so a user's many requests at once must not hold every user's starts and kills back.
/// Root's (Slurm's attach of every task of a step at once) are not bounded.
const WAITING_MOVES_PER_USER: usize = 8;

fn check_waiting_moves(state: &State, requester: u32) -> Result<(), String> {
    if requester == 0 {
        return Ok(());
    }
    let waiting =
        state.pending_answers.values().filter(|p| p.kind == AnswerKind::PidMoved && p.requester == requester).count();
    if waiting >= WAITING_MOVES_PER_USER {
        return Err(format!(
            "uid {requester} has {waiting} process moves waiting for their node, the most one user may: ask again \
             when one is answered"
        ));
    }
    Ok(())
}
