//! The tick's work: the idle rule, storage's upkeep, the history's retention, empty registrations.

use super::*;

impl Rules {
    /// Gang jobs that used no CPU while they had slices for `idle_revert` run
    /// outside the matrix; after `idle_forget` they become local for good.
    /// A report looks at the jobs it gives (`only`); the tick at every job (a report per node and second looking
    /// at every job would cost the controller nodes × jobs a second).
    pub(super) fn track_idle(&self, state: &mut State, only: Option<&[u64]>) {
        let now_ns = state.now.mono_ns;
        let mut changes: Vec<(u64, bool, bool)> = Vec::new();
        let ids: Vec<u64> = only.map_or_else(|| state.jobs.keys().copied().collect(), <[u64]>::to_vec);
        let running_gang = |j: &&JobRecord| j.state == JobState::Running && j.mode == Mode::Gang;
        // A job with a node away is not judged: nothing says what it does there.
        let (nodes, node_by_name) = (&state.nodes, &state.node_by_name);
        let connected = |name: &str| node_by_name.get(name).is_some_and(|&i| nodes[i].connected);
        let all_heard = |j: &&JobRecord| j.placement.iter().all(|p| connected(&p.node));
        for job in ids.iter().filter_map(|id| state.jobs.get(id).filter(running_gang).filter(all_heard)) {
            let live = state.live.entry(job.id).or_default();
            let cpu_ns = live.total_cpu_ns();
            // "No CPU" means under 1 % of one CPU since the last progress: a
            // sleeping process still spends a few µs at every freeze and thaw.
            let since_ns = live.progress_at_ns.map_or(0, |at| now_ns.saturating_sub(at));
            if cpu_ns.saturating_sub(live.cpu_ns) > since_ns / IDLE_CPU_SHARE_DIVISOR || live.progress_at_ns.is_none() {
                live.cpu_ns = cpu_ns;
                live.progress_at_ns = Some(now_ns);
                if job.idle {
                    changes.push((job.id, false, false));
                }
                continue;
            }
            let quiet = Duration::from_nanos(since_ns);
            if quiet >= self.settings.idle_forget {
                changes.push((job.id, true, true));
            } else if quiet >= self.settings.idle_revert && !job.idle {
                changes.push((job.id, true, false));
            }
        }
        for (id, idle, forget) in changes {
            self.update_job_or_hold(state, id, |j| {
                j.idle = idle;
                if forget {
                    j.mode = Mode::Local;
                    j.idle = false;
                }
            });
        }
    }

    /// Periodic work: storage checks, repairs and backups; history retention; time limits; empty registrations
    /// past their grace. Returns the status document when something in it changed since it was last written
    /// (`status_written`).
    pub(super) fn tick(&self, state: &mut State) -> Option<(StatusReply, StatusFingerprint)> {
        maintain_storage(state);
        self.track_idle(state, None);
        self.prune_history(state);
        self.keep_time_limits(state);
        self.end_empty_registrations(state);
        let fingerprint = (state.status_changes, self.listed_jobs(state).count(), state.records.status());
        if state.status_written.as_ref() == Some(&fingerprint) {
            return None;
        }
        Some((self.status_of(state), fingerprint))
    }

    /// A registered job (not Slurm's) that no process has joined within `empty_job_grace` of its start ends, as if
    /// killed: an empty registration must not hold a matrix row for ever. Its nodes must all have reported it empty.
    pub(super) fn end_empty_registrations(&self, state: &mut State) {
        let grace_ms = self.settings.empty_job_grace.as_millis() as u64;
        let now_ms = state.now.unix_ms;
        let empty: Vec<JobRecord> = state
            .jobs
            .values()
            .filter(|j| j.error.is_none() && awaits_first_process(state, j))
            .filter(|j| j.started_unix_ms.is_some_and(|started| now_ms.saturating_sub(started) >= grace_ms))
            .cloned()
            .collect();
        let reason = format!(
            "no process joined the job within {} s of its registration (--empty-job-grace-s)",
            self.settings.empty_job_grace.as_secs()
        );
        for job in empty {
            self.update_job_or_hold(state, job.id, |j| j.error = Some(reason.clone()));
            self.send_terminate(state, &job);
        }
    }

    /// Jobs that ended more than `keep_history` ago leave memory and the database (looked for once a second).
    pub(super) fn prune_history(&self, state: &mut State) {
        let now = state.now;
        if state.history_pruned_at_ns.is_some_and(|at| ns_since(now, at) < HISTORY_PRUNE_PERIOD.as_nanos() as u64) {
            return;
        }
        state.history_pruned_at_ns = Some(now.mono_ns);
        let kept_since_ms = now.unix_ms.saturating_sub(self.settings.keep_history.as_millis() as u64);
        // A job whose cgroup may still be on a node stays: a node that reports it stuck, or whose agent is away
        // (it may come back with the cgroup, which only a known job's record lets it keep).
        let may_have_cgroup = |j: &JobRecord| {
            j.placement.iter().any(|p| {
                let node = node_index(state, &p.node).map(|i| &state.nodes[i]);
                node.is_none_or(|n| !n.connected || n.stuck_jobs.iter().any(|s| s.job == j.id))
            })
        };
        let old: Vec<u64> = state
            .jobs
            .values()
            .filter(|j| j.ended_unix_ms.is_some_and(|end| end < kept_since_ms) && !may_have_cgroup(j))
            .map(|j| j.id)
            .collect();
        if old.is_empty() {
            return;
        }
        for id in &old {
            state.jobs.remove(id);
            state.live.remove(id);
        }
        let next_job = state.next_job;
        state.records.delete_jobs(&old, next_job);
    }
}

/// Give storage everything the controller holds, for repairs.
pub(super) fn maintain_storage(state: &mut State) {
    let nodes: Vec<NodeRow> =
        state.nodes.iter().map(|n| NodeRow { name: n.name.clone(), cpus: n.cpus, mem_bytes: n.mem_bytes }).collect();
    state.records.maintain(&state.jobs, &nodes);
}

/// A registration (not Slurm's, whose steps come and go) that every node has reported without a process, and that
/// never had one. It keeps its row, so admission still counts it, but runs in no slot: an empty registration takes
/// no time from the jobs beside it, and ends after `empty_job_grace`.
pub(super) fn awaits_first_process(state: &State, job: &JobRecord) -> bool {
    job.registered && job.slurm_job.is_none() && !job.state.is_over() && never_joined(state, job)
}

/// Which of jobs `ids` await their first process (`awaits_first_process`).
pub(super) fn awaiting_first_process(state: &State, ids: &[u64]) -> Vec<bool> {
    ids.iter().map(|id| state.jobs.get(id).is_some_and(|j| awaits_first_process(state, j))).collect()
}

/// Has no process of this registered job ever shown, while every node of it reported the job?
pub(super) fn never_joined(state: &State, job: &JobRecord) -> bool {
    let Some(live) = state.live.get(&job.id) else { return false };
    let reported = job.placement.iter().all(|p| {
        node_index(state, &p.node).is_some_and(|i| state.nodes[i].connected)
            && live.usage.get(&p.node).is_some_and(|u| u.pids.is_empty())
    });
    reported && !live.had_process
}
