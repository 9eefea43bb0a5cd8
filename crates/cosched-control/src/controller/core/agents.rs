//! What agents say: a hello (checked whole before anything of it is used), reports, ends and answers, each only
//! for the agent's own node.

use super::periodic::awaiting_first_process;
use super::*;

impl Rules {
    /// An agent said hello: accept it for its node and return the node's index. Nothing it claims counts before
    /// the whole hello is accepted (`check_hello`).
    pub(super) fn agent_connected(&self, state: &mut State, hello: &AgentHello) -> Result<u32, String> {
        let index = match check_hello(state, &self.settings.nodes, hello)? {
            Some(index) => index,
            None => {
                state.nodes.push(Node::new(hello.node.clone(), hello.cpus, hello.mem_bytes));
                state.node_by_name.insert(hello.node.clone(), state.nodes.len() - 1);
                state.nodes.len() - 1
            }
        };
        // Kept even when storage fails: refusing the agent would leave its jobs unscheduled.
        let row = NodeRow { name: hello.node.clone(), cpus: hello.cpus, mem_bytes: hello.mem_bytes };
        state.records.save_node_or_hold(&row);
        let node = &mut state.nodes[index];
        node.cpus = hello.cpus;
        node.mem_bytes = hello.mem_bytes;
        node.connected = true;
        node.freezer = hello.freezer.clone();
        node.features = hello.features.clone();
        node.last_schedule = None;
        node.ignored_events = 0;
        let _ = send_to(state, &hello.node, ToAgent::Welcome { node_index: index as u32 });
        self.reconcile_adopted(state, hello);
        self.replan(state);
        Ok(index as u32)
    }

    /// Cgroups of jobs whose records do not place them on this node. They end there: no slot of this node runs
    /// them, and a new start of the job there would adopt the old processes on their old CPUs. A job the records
    /// have not started at all (its start was not written before the controller was lost, or the records were
    /// restored from before it) fails with that reason, before anything of the hello is planned, and only on a
    /// claim that names the record's owner and token; a job placed elsewhere (started again since) runs on there.
    fn end_unplaced(&self, state: &mut State, hello: &AgentHello) {
        let not_here = |j: &JobRecord| !j.state.is_over() && j.on_node(&hello.node).is_none();
        let stale: Vec<&crate::wire::protocol::AdoptedJob> =
            hello.adopted.iter().filter(|a| state.jobs.get(&a.job).is_some_and(not_here)).collect();
        let never_started: Vec<u64> = stale
            .iter()
            .filter(|a| state.jobs.get(&a.job).is_some_and(|j| j.placement.is_empty() && claims_own(j, a)))
            .map(|a| a.job)
            .collect();
        let forget: Vec<u64> = stale.iter().map(|a| a.job).collect();
        let now_ms = state.now.unix_ms;
        // All of them first, with no plan in between: a plan made while one is still queued could start it on this
        // very node.
        for id in never_started {
            let reason = format!(
                "node {} ran it, but its record has it queued (its start was not written before the controller \
                 stopped, or the records were restored from before it): ended",
                hello.node
            );
            log(state, format!("cosched controller: job {id}: {reason}"));
            if let Some(job) = state.jobs.get_mut(&id) {
                job.error.get_or_insert(reason);
                job.end(JobState::Failed, now_ms);
                state.records.save_job_or_hold(job);
            }
        }
        for id in forget {
            let _ = send_to(state, &hello.node, ToAgent::Forget { job: id, ack: None });
        }
    }

    /// Jobs the database runs on this node but the agent does not have are over there.
    pub(super) fn reconcile_adopted(&self, state: &mut State, hello: &AgentHello) {
        self.end_unplaced(state, hello);
        let gone: Vec<u64> = state
            .jobs
            .values()
            .filter(|j| !j.state.is_over() && j.on_node(&hello.node).is_some() && !j.ended_on.contains(&hello.node))
            .filter(|j| !hello.adopted.iter().any(|a| a.job == j.id))
            .filter(|j| !j.registered)
            .map(|j| j.id)
            .collect();
        for id in gone {
            self.node_ended(state, id, &hello.node, None);
        }
        // Cgroups of jobs over there (their processes could not be ended before, or the end never reached the
        // agent): whatever they hold ends now.
        let over: Vec<u64> = hello
            .adopted
            .iter()
            .filter(|a| state.jobs.get(&a.job).is_some_and(|j| j.state.is_over() || j.ended_on.contains(&hello.node)))
            .map(|a| a.job)
            .collect();
        for job in over {
            let _ = send_to(state, &hello.node, ToAgent::Forget { job, ack: None });
        }
        let killing: Vec<JobRecord> = state
            .jobs
            .values()
            .filter(|j| !j.state.is_over() && j.on_node(&hello.node).is_some())
            .filter(|j| j.error.as_deref() == Some(KILLED) || time_limit::timed_out(j))
            .cloned()
            .collect();
        for job in killing {
            self.send_terminate(state, &job);
        }
    }

    pub(super) fn agent_disconnected(&self, state: &mut State, node: &str) {
        if let Some(i) = node_index(state, node) {
            state.nodes[i].connected = false;
            state.nodes[i].last_schedule = None;
        }
        state.status_changes += 1;
        // Nobody else may answer what was asked of this agent.
        let lost: Vec<u64> =
            state.pending_answers.iter().filter(|(_, p)| p.node == node).map(|(&ack, _)| ack).collect();
        for ack in lost {
            if state.pending_answers.remove(&ack).is_some() {
                let lost = Err("its agent went away; the answer (or the command's end) is unknown".into());
                state.out.answers.push((ack, lost));
            }
        }
    }

    /// What an agent says. It speaks only for its own node: about jobs placed there and not ended there, and in
    /// answer to requests sent to it; anything else is ignored (and logged).
    pub(super) fn agent_event(&self, state: &mut State, node: &str, event: FromAgent) {
        let heard = match event {
            FromAgent::Report {
                jobs,
                load_avg,
                switches,
                switch_errors,
                slice_starts,
                switch_latencies_ns,
                stuck_jobs,
            } => {
                let slice_starts = bounded_slice_starts(slice_starts);
                let latencies_ns = &switch_latencies_ns[..switch_latencies_ns.len().min(SWITCHES_PER_REPORT)];
                note_switch_times(state, node, &slice_starts, latencies_ns);
                let usage_heard =
                    self.node_report(state, node, (load_avg, switches, switch_errors), slice_starts, jobs);
                self.note_stuck_jobs(state, node, stuck_jobs) && usage_heard
            }
            FromAgent::Ended { job, cpu_ns: Some(cpu_ns), .. } if !runs_on(state, job, node) => {
                final_cpu_time(state, job, node, cpu_ns)
            }
            FromAgent::Ended { job, exit_code, error, cpu_ns } if runs_on(state, job, node) => {
                if let Some(cpu_ns) = cpu_ns {
                    final_cpu_time(state, job, node, cpu_ns);
                }
                if let Some(error) = error {
                    self.update_job_or_hold(state, job, |j| {
                        j.error.get_or_insert_with(|| format!("{node}: {error}"));
                    });
                }
                self.node_ended(state, job, node, exit_code);
                true
            }
            FromAgent::Failed { job, error } if runs_on(state, job, node) => {
                self.update_job_or_hold(state, job, |j| j.error = Some(format!("{node}: {error}")));
                self.node_ended(state, job, node, Some(127));
                true
            }
            FromAgent::Ended { .. } | FromAgent::Failed { .. } => false,
            FromAgent::PidMoved { ack, error } => {
                let joined = state.pending_answers.get(&ack).and_then(|p| p.joins).filter(|_| error.is_none());
                let heard =
                    answer(state, node, ack, AnswerKind::PidMoved, error.map_or(Ok(AgentAnswerData::PidMoved), Err));
                if let Some(job) = joined.filter(|_| heard) {
                    self.process_joined(state, job);
                }
                heard
            }
            FromAgent::Logs { ack, files } => {
                answer(state, node, ack, AnswerKind::Logs, Ok(AgentAnswerData::Logs(files)))
            }
            FromAgent::ExecEnded { ack, exit_code, error } => {
                let ended = match error {
                    Some(e) => Err(e),
                    None => Ok(AgentAnswerData::ExecEnded(exit_code.unwrap_or(-1))),
                };
                answer(state, node, ack, AnswerKind::ExecEnded, ended)
            }
            FromAgent::Forgotten { ack, stuck } => {
                // What is stuck is noted before the request waiting for it (an epilog) returns, not at the node's
                // next report; and only in answer to a request sent to that node.
                let asked =
                    state.pending_answers.get(&ack).is_some_and(|p| p.node == node && p.kind == AnswerKind::Forgotten);
                let noted = !asked || stuck.as_ref().is_none_or(|s| self.note_stuck_job(state, node, s));
                answer(state, node, ack, AnswerKind::Forgotten, Ok(AgentAnswerData::Forgotten(stuck))) && noted
            }
        };
        if !heard {
            ignored_event(state, node);
        }
    }

    /// A node's periodic report: its own figures, and the usage of the jobs that run there (usage of any other job
    /// is ignored). False when some of it was.
    pub(super) fn node_report(
        &self,
        state: &mut State,
        node: &str,
        (load_avg, switches, switch_errors): (f64, u64, u64),
        slice_starts: Vec<(u64, u64)>,
        jobs: Vec<JobUsage>,
    ) -> bool {
        let Some(i) = node_index(state, node) else { return false };
        let figures = (load_avg, switches, switch_errors);
        let n = &mut state.nodes[i];
        let mut changed = (n.load_avg, n.switches, n.switch_errors) != figures || !slice_starts.is_empty();
        (n.load_avg, n.switches, n.switch_errors) = figures;
        for (slice, offset_ns) in slice_starts {
            state.slice_starts.add(slice, offset_ns);
        }
        let count = jobs.len();
        let now_ns = state.now.mono_ns;
        let ours: Vec<JobUsage> = jobs.into_iter().filter(|u| runs_on(state, u.job, node)).collect();
        // Each job once, and only this node's: a report naming a job many times must not cost many replans.
        let reported: Vec<u64> = ours.iter().map(|u| u.job).collect::<BTreeSet<u64>>().into_iter().collect();
        let all_ours = ours.len() == count;
        let awaited_before = awaiting_first_process(state, &reported);
        for usage in ours {
            let running = state.jobs.get(&usage.job).is_some_and(|j| j.state == JobState::Running);
            let live = state.live.entry(usage.job).or_default();
            live.had_process |= !usage.pids.is_empty();
            // Running there again (a Slurm job's next step, another launch on an MPI helper node): not final.
            live.cpu_final_on.remove(node);
            changed |= live.usage.get(node) != Some(&usage);
            live.usage.insert(node.to_string(), usage);
            let all_frozen = running && live.usage.values().all(|u| u.frozen);
            live.frozen_since_ns = if all_frozen { live.frozen_since_ns.or(Some(now_ns)) } else { None };
        }
        if changed {
            state.status_changes += 1;
        }
        self.track_idle(state, Some(&reported));
        if awaiting_first_process(state, &reported) != awaited_before {
            self.replan(state);
        }
        all_ours
    }

    /// A process was moved into job `id`: a registration that waited for its first one runs in its row from now on,
    /// without waiting for the node's next report.
    pub(super) fn process_joined(&self, state: &mut State, id: u64) {
        let awaited = awaiting_first_process(state, &[id]);
        state.live.entry(id).or_default().had_process = true;
        if awaiting_first_process(state, &[id]) != awaited {
            self.replan(state);
        }
    }

    /// What a node says of the cgroups it could not empty, for jobs placed there (others are ignored): kept with
    /// the node for `status` and `/metrics` while the node reports them, and said once in the job's record and the
    /// controller's log. False when some of it was ignored.
    pub(super) fn note_stuck_jobs(&self, state: &mut State, node: &str, stuck_jobs: Vec<StuckJob>) -> bool {
        let Some(i) = node_index(state, node) else { return false };
        let count = stuck_jobs.len();
        let ours: Vec<StuckJob> =
            stuck_jobs.into_iter().filter(|s| placed_on(state, s.job, node)).take(STUCK_JOBS_KEPT).collect();
        for stuck in &ours {
            note_left_behind(state, node, stuck);
        }
        let all_ours = ours.len() == count;
        if state.nodes[i].stuck_jobs != ours {
            state.nodes[i].stuck_jobs = ours;
            state.status_changes += 1;
        }
        all_ours
    }

    /// One stuck cgroup a node answered a `Forget` with: noted as a report's would be, until its next report.
    pub(super) fn note_stuck_job(&self, state: &mut State, node: &str, stuck: &StuckJob) -> bool {
        let Some(i) = node_index(state, node).filter(|_| placed_on(state, stuck.job, node)) else { return false };
        note_left_behind(state, node, stuck);
        let listed = &mut state.nodes[i].stuck_jobs;
        if !listed.iter().any(|s| s.job == stuck.job) && listed.len() < STUCK_JOBS_KEPT {
            listed.push(stuck.clone());
            state.status_changes += 1;
        }
        true
    }

    pub(super) fn node_ended(&self, state: &mut State, id: u64, node: &str, exit_code: Option<i32>) {
        let Some(job) = state.jobs.get(&id) else { return };
        if job.state.is_over() || job.ended_on.iter().any(|n| n == node) {
            return;
        }
        if job.slurm_job.is_some() {
            return; // its nodes empty between job steps; Slurm's epilog ends it (`slurm_end`)
        }
        let mut job = job.clone();
        match job.launcher_node() {
            // An MPI job's other nodes empty whenever its daemons end: the job goes on while its launcher runs.
            Some(launcher) if launcher != node => return,
            Some(_) => self.end_mpi_helpers(state, &mut job),
            None => {}
        }
        job.ended_on.push(node.to_string());
        if exit_code.is_some_and(|c| c != 0) || job.exit_code.is_none() {
            job.exit_code = exit_code.or(job.exit_code);
        }
        if job.placement.iter().all(|p| job.ended_on.contains(&p.node)) {
            let ended = match (&job.error, job.exit_code) {
                (Some(e), _) if e == KILLED => JobState::Killed,
                (Some(_), _) if super::time_limit::ended_at_its_limit(&job) => JobState::TimedOut,
                (Some(_), _) => JobState::Failed,
                (None, Some(code)) if code != 0 => {
                    job.error = Some(exit_reason(code));
                    JobState::Failed
                }
                _ => JobState::Finished,
            };
            self.keep_usage(state, &mut job);
            job.end(ended, state.now.unix_ms);
        }
        let _ = send_to(state, node, ToAgent::Forget { job: id, ack: None });
        state.records.save_job_or_hold(&job);
        state.jobs.insert(id, job);
        self.replan(state);
    }

    /// An MPI job's launcher has ended: whatever it started on the other nodes ends too, and those nodes are done.
    pub(super) fn end_mpi_helpers(&self, state: &mut State, job: &mut JobRecord) {
        let grace_ms = self.settings.kill_wait.as_millis() as u64;
        let launcher = job.launcher_node().map(str::to_string);
        for p in job.placement.iter().filter(|p| Some(&p.node) != launcher.as_ref()) {
            let _ = send_to(state, &p.node, ToAgent::Terminate { job: job.id, grace_ms });
            let _ = send_to(state, &p.node, ToAgent::Forget { job: job.id, ack: None });
            job.ended_on.push(p.node.clone());
        }
    }
}

/// A node's switches as its report gives them: when each began after its slice boundary and when its incoming
/// gang was thawed, into the node's histograms.
pub(super) fn note_switch_times(state: &mut State, node: &str, slice_starts: &[(u64, u64)], latencies_ns: &[u64]) {
    let Some(i) = node_index(state, node) else { return };
    let n = &mut state.nodes[i];
    for &(_, offset_ns) in slice_starts {
        n.switch_lateness.observe(offset_ns);
    }
    for &latency_ns in latencies_ns {
        n.switch_latency.observe(latency_ns);
    }
}

/// The switches of one report the controller takes, as many as an agent keeps between reports
/// (`switcher::STARTS_UNREPORTED_MAX`): a longer list (only a forging agent sends one) is cut, so that one line
/// cannot hold the controller's lock for long.
pub(super) const SWITCHES_PER_REPORT: usize = 4_096;

/// A report's slice starts cut to `SWITCHES_PER_REPORT`, each slice once: an agent reports a slice once, and one
/// that named it again would count as another node in the skew between nodes.
pub(super) fn bounded_slice_starts(mut slice_starts: Vec<(u64, u64)>) -> Vec<(u64, u64)> {
    slice_starts.truncate(SWITCHES_PER_REPORT);
    let mut seen = BTreeSet::new();
    slice_starts.retain(|(slice, _)| seen.insert(*slice));
    slice_starts
}

/// Hand `node`'s answer to the request waiting for it, if that request was sent to `node` and asked for an answer of
/// this kind; false when it answers nothing (a request that timed out, or one it was never sent).
pub(super) fn answer(state: &mut State, node: &str, ack: u64, kind: AnswerKind, result: AgentAnswer) -> bool {
    let asked = state.pending_answers.get(&ack).is_some_and(|p| p.node == node && p.kind == kind);
    if asked {
        state.pending_answers.remove(&ack);
        state.out.answers.push((ack, result));
    }
    asked
}

/// Was job `job` placed on `node` (whether over or not)? Only then may `node`'s agent say it left processes there.
pub(super) fn placed_on(state: &State, job: u64, node: &str) -> bool {
    state.jobs.get(&job).is_some_and(|j| j.on_node(node).is_some())
}

/// Say once, in the job's record and the controller's log, that `node` could not kill processes of the job.
pub(super) fn note_left_behind(state: &mut State, node: &str, stuck: &StuckJob) {
    let said = format!("node {node}:");
    let Some(record) = state.jobs.get(&stuck.job) else { return };
    if record.left_behind.as_deref().is_some_and(|note| note.contains(&said)) {
        return;
    }
    let note = format!("{said} {}; the agent keeps their cgroup and retries", stuck.describe());
    let line = format!("cosched controller: job {}: {note}", stuck.job);
    let mut job = record.clone();
    job.left_behind = Some(job.left_behind.map_or(note.clone(), |earlier| format!("{earlier}; {note}")));
    state.records.save_job_or_hold(&job);
    state.jobs.insert(job.id, job);
    log(state, line);
}

/// A node's CPU time of a job at its end, in place of its last report: never below it (a cgroup's CPU time
/// only grows). Taken only from a node the job was placed on, also after the job ended there (an MPI job's
/// other nodes are told to end when its launcher's node does, and their ends come after), and once a node
/// after the job is over. A job over whose figures were not kept (restored after a restart) keeps its record.
/// Whether the figure was taken.
pub(super) fn final_cpu_time(state: &mut State, job: u64, node: &str, cpu_ns: u64) -> bool {
    let Some(record) = state.jobs.get(&job).filter(|j| j.on_node(node).is_some()) else { return false };
    let over = record.state.is_over();
    let given = state.live.get(&job).map(|l| l.cpu_final_on.contains(node));
    if over && given.is_none_or(|given| given) {
        return false;
    }
    let live = state.live.entry(job).or_default();
    let usage = live.usage.entry(node.to_string()).or_insert(JobUsage { job, cpu_ns: 0, pids: vec![], frozen: false });
    usage.cpu_ns = usage.cpu_ns.max(cpu_ns);
    live.cpu_final_on.insert(node.to_string());
    let total_ns = live.total_cpu_ns();
    // A late end (another node of an ended job): its record, which the history reads, grows too.
    if let Some(record) = state.jobs.get_mut(&job).filter(|j| j.state.is_over() && j.cpu_ns < total_ns) {
        record.cpu_ns = total_ns;
        state.records.save_job_or_hold(record);
    }
    true
}

/// Does job `job` run on `node` (placed there, not over, not ended there)? Only then may `node`'s agent speak of it.
pub(super) fn runs_on(state: &State, job: u64, node: &str) -> bool {
    state
        .jobs
        .get(&job)
        .is_some_and(|j| !j.state.is_over() && j.on_node(node).is_some() && !j.ended_on.iter().any(|n| n == node))
}

/// Count (and log at powers of two) an event of `node`'s agent that was ignored.
pub(super) fn ignored_event(state: &mut State, node: &str) {
    let Some(i) = node_index(state, node) else { return };
    let count = &mut state.nodes[i].ignored_events;
    *count += 1;
    let count = *count;
    if count.is_power_of_two() {
        log(
            state,
            format!(
                "cosched controller: agent {node} spoke of a job that does not run there or answered a request \
                 never sent to it ({count} such events ignored on this link)"
            ),
        );
    }
}

/// Check an agent's hello in full before anything it says is used: its node must be one of the configuration's,
/// not connected already, of a sane size, and every cgroup it found must be owned by a record (`refuse_orphans`).
/// Returns the node's index, `None` for a configured node never seen before.
pub(super) fn check_hello(state: &State, configured: &[String], hello: &AgentHello) -> Result<Option<usize>, String> {
    validate_node_name(&hello.node)?;
    if !configured.contains(&hello.node) {
        let listed = configured_list(configured);
        return Err(format!("{} is not a node of this cluster (the controller's --nodes: {listed})", hello.node));
    }
    let index = node_index(state, &hello.node);
    if index.is_some_and(|i| state.nodes[i].connected) {
        return Err(format!("an agent for node {} is already connected", hello.node));
    }
    if hello.cpus == 0 || hello.cpus > MAX_CPUS_PER_NODE {
        return Err(format!("an agent must offer 1 to {MAX_CPUS_PER_NODE} CPUs, not {}", hello.cpus));
    }
    let mut seen = BTreeSet::new();
    if let Some(twice) = hello.adopted.iter().find(|a| !seen.insert(a.job)) {
        return Err(format!("the hello of node {} names job {} twice", hello.node, twice.job));
    }
    refuse_orphans(state, hello)?;
    Ok(index)
}

/// The configured node names for a message (the first few).
pub(super) fn configured_list(configured: &[String]) -> String {
    let names: Vec<&str> = configured.iter().take(8).map(String::as_str).collect();
    let more = configured.len().saturating_sub(names.len());
    if names.is_empty() {
        "none".into()
    } else if more > 0 {
        format!("{} and {more} more", names.join(", "))
    } else {
        names.join(", ")
    }
}

/// Refuse an agent whose node holds job cgroups that no record of this database owns (same id, owner and
/// token): after a lost or restored database, a new job must never inherit another job's running processes.
pub(super) fn refuse_orphans(state: &State, hello: &AgentHello) -> Result<(), String> {
    let orphans: Vec<String> = hello
        .adopted
        .iter()
        .filter(|a| !state.jobs.get(&a.job).is_some_and(|record| owns_cgroup(record, a)))
        .map(|a| {
            let owner = a.owner.map_or("?".into(), |u| u.to_string());
            format!("job-{} (uid {owner}, {})", a.job, crate::wire::protocol::processes(a.pids.len() as u64))
        })
        .collect();
    if orphans.is_empty() {
        return Ok(());
    }
    let reason = format!(
        "node {} has job cgroups that the database does not know: {}; restore the database it had \
         (docs/security.md, \"Recovery\"), or end those processes and remove their cgroups, then restart the agent",
        hello.node,
        orphans.join(", ")
    );
    Err(reason)
}

/// Does an agent's claim name the record's owner and token (not an untagged cgroup that matches any old record)?
fn claims_own(record: &JobRecord, cgroup: &crate::wire::protocol::AdoptedJob) -> bool {
    !record.token.is_empty()
        && cgroup.token.as_deref() == Some(record.token.as_str())
        && cgroup.owner == Some(record.uid)
}

/// Is this cgroup the record's? Records and cgroups from before tags existed match by id and owner alone.
pub(super) fn owns_cgroup(record: &JobRecord, cgroup: &crate::wire::protocol::AdoptedJob) -> bool {
    match (&cgroup.token, cgroup.owner) {
        (Some(token), Some(owner)) => !record.token.is_empty() && *token == record.token && owner == record.uid,
        _ => record.token.is_empty() && !record.state.is_over(),
    }
}
