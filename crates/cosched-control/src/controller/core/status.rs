//! What users see: status, history, the matrix, node loads and the figures of `/metrics`.

use super::*;

impl Rules {
    /// The status as `who` may see it: with `private_data`, other users' commands, names and pids are hidden from
    /// non-admins.
    pub(super) fn status_for(&self, state: &State, who: &Identity) -> StatusReply {
        let mut status = self.status_of(state);
        self.hide_others_private_data(who, &mut status.jobs);
        if self.settings.private_data && !who.admin {
            // Processes a kill could not end are listed under their node too: only the job's owner sees which.
            let mine = |job: u64| state.jobs.get(&job).is_some_and(|j| j.uid == who.uid);
            let stuck = status.nodes.iter_mut().flat_map(|n| n.stuck_jobs.iter_mut());
            stuck.filter(|s| !mine(s.job)).for_each(|s| s.pids.clear());
        }
        status
    }

    /// With `private_data`, other users' commands, names and pids are hidden from non-admins (pids would undo
    /// `hidepid` on `/proc`, and tell what another user runs).
    pub(super) fn hide_others_private_data(&self, who: &Identity, jobs: &mut [StatusJob]) {
        if self.settings.private_data && !who.admin {
            #[cfg(test)]
            let shown_bug = planted::is(Bug::OthersShown);
            #[cfg(not(test))]
            let shown_bug = false;
            for job in jobs.iter_mut().filter(|job| job.uid != who.uid && (!shown_bug || job.state.is_over())) {
                job.command = HIDDEN.into();
                // Named or not: an empty name left as it is would tell which jobs have one.
                job.name = HIDDEN.into();
                job.pids.clear();
                // It names the pids a kill could not end.
                if job.left_behind.is_some() {
                    job.left_behind = Some(HIDDEN.into());
                }
            }
        }
    }

    /// The history as `who` may see it (as `status` shows jobs): the newest `limit` jobs that match, oldest first.
    pub(super) fn history(&self, state: &State, who: &Identity, r: &HistoryRequest) -> HistoryReply {
        let limit = r.limit.unwrap_or(DEFAULT_HISTORY_JOBS).min(MAX_HISTORY_JOBS) as usize;
        // Sorted, so that each job costs a search of the names, not a pass over them.
        let (mut ids, mut uids) = (r.jobs.clone(), r.users.clone());
        ids.sort_unstable();
        uids.sort_unstable();
        let matches = |j: &&JobRecord| {
            (ids.is_empty() || ids.binary_search(&j.id).is_ok())
                && (uids.is_empty() || uids.binary_search(&j.uid).is_ok())
                && (r.states.is_empty() || r.states.contains(&j.state))
                && r.since_unix_ms.is_none_or(|since| j.ended_unix_ms.is_none_or(|end| end >= since))
                && r.until_unix_ms.is_none_or(|until| j.submitted_unix_ms < until)
        };
        let (mut jobs, mut bytes, mut more) = (Vec::new(), 0, false);
        for record in state.jobs.values().rev().filter(matches) {
            let mut job = self.status_job(state, record);
            // Whole commands are for `status`: the history lists each as an ended job's record keeps it.
            job.command = crate::wire::jobs::cut_to_json_bytes(&job.command, crate::wire::jobs::ENDED_COMMAND_BYTES);
            self.hide_others_private_data(who, std::slice::from_mut(&mut job));
            bytes += serde_json::to_vec(&job).map_or(0, |json| json.len());
            if jobs.len() == limit || bytes > MAX_HISTORY_REPLY_BYTES {
                more = true;
                break;
            }
            jobs.push(job);
        }
        jobs.reverse();
        HistoryReply { jobs, more, keep_history_s: self.settings.keep_history.as_secs() }
    }

    /// The jobs `status` lists: those not over, and ended ones for `keep_finished`.
    pub(super) fn listed_jobs<'a>(&self, state: &'a State) -> impl Iterator<Item = &'a JobRecord> {
        let shown_since_ms = state.now.unix_ms.saturating_sub(self.settings.keep_finished.as_millis() as u64);
        state.jobs.values().filter(move |j| j.ended_unix_ms.is_none_or(|ended| ended >= shown_since_ms))
    }

    pub(super) fn status_of(&self, state: &State) -> StatusReply {
        let jobs = self.listed_jobs(state).map(|j| self.status_job(state, j)).collect();
        StatusReply {
            slice_ns: self.settings.slice_ns,
            rows: self.settings.plan.rows,
            nodes: state.nodes.iter().map(status_node).collect(),
            jobs,
            matrix: matrix_cells(state),
            slice_start_skew: state.slice_starts.summary(),
            storage: state.records.status(),
        }
    }

    pub(super) fn status_job(&self, state: &State, j: &JobRecord) -> StatusJob {
        let live = state.live.get(&j.id);
        StatusJob {
            id: j.id,
            uid: j.uid,
            class: j.class,
            mode: j.mode,
            state: j.state,
            tasks: j.tasks,
            mem_bytes: j.mem_bytes,
            idle: j.idle,
            registered: j.registered,
            command: j.argv.join(" "),
            placement: j.placement.clone(),
            cpu_ns: live.map_or(0, JobLive::total_cpu_ns).max(j.cpu_ns),
            // A job over with nothing live was restored from the database: its record is all there is.
            cpu_final: j.state.is_over()
                && live.is_none_or(|l| j.placement.iter().all(|p| l.cpu_final_on.contains(&p.node))),
            pids: live.map(|l| l.usage.values().flat_map(|u| u.pids.clone()).collect()).unwrap_or_default(),
            frozen: live.is_some_and(|l| !l.usage.is_empty() && l.usage.values().all(|u| u.frozen)),
            slice_share: if j.state.is_over() { j.slice_share } else { self.slice_share(state, j.id) },
            exit_code: j.exit_code,
            error: j.error.clone(),
            submitted_unix_ms: j.submitted_unix_ms,
            started_unix_ms: j.started_unix_ms,
            ended_unix_ms: j.ended_unix_ms,
            left_behind: j.left_behind.clone(),
            slurm_time: j.slurm_job.map(|_| slurm_time::status(j, live)),
            name: j.name.clone(),
            time_limit_s: j.time_limit_s,
            in_slot_ms: j.in_slot_ms,
        }
    }
}

impl Rules {
    /// The figures of `/metrics`: the jobs `status` lists (per-job figures for at most [`MAX_JOB_SERIES`] of them,
    /// those not over first) and every node.
    pub(super) fn metrics(&self, state: &State) -> MetricsSnapshot {
        let mut listed: Vec<&JobRecord> = self.listed_jobs(state).collect();
        let jobs_by_state =
            JobState::ALL.iter().map(|&s| (s, listed.iter().filter(|j| j.state == s).count() as u64)).collect();
        // Stable: id order within the jobs not over and within the ended ones.
        listed.sort_by_key(|j| j.state.is_over());
        let now = state.now;
        MetricsSnapshot {
            slice_ns: self.settings.slice_ns,
            slice_start_skew: state.slice_starts.spreads_seen().clone(),
            storage_ok: state.records.status().state == crate::wire::protocol::StorageState::Ok,
            nodes: state.nodes.iter().map(|n| node_figures(state, n)).collect(),
            jobs_by_state,
            jobs: listed.iter().take(MAX_JOB_SERIES).map(|j| self.job_figures(state, j, now)).collect(),
            jobs_omitted: listed.len().saturating_sub(MAX_JOB_SERIES) as u64,
        }
    }

    pub(super) fn job_figures(&self, state: &State, j: &JobRecord, now: Now) -> JobFigures {
        let live = state.live.get(&j.id);
        let usage = live.map(|l| l.usage.values().collect::<Vec<_>>()).unwrap_or_default();
        let frozen_since_ns = live.and_then(|l| l.frozen_since_ns).filter(|_| j.state == JobState::Running);
        JobFigures {
            id: j.id,
            uid: j.uid,
            class: j.class,
            mode: j.mode,
            state: j.state,
            // An ended job keeps its placement on record but holds no CPU.
            cpus: if j.state.is_over() { 0 } else { j.placement.iter().map(|p| p.cpus.len() as u32).sum() },
            cpu_ns: live.map_or(0, JobLive::total_cpu_ns).max(j.cpu_ns),
            processes: usage.iter().map(|u| u.pids.len() as u64).sum(),
            slice_share: self.slice_share(state, j.id),
            elapsed_ms: j.started_unix_ms.map(|started| j.ended_unix_ms.unwrap_or(now.unix_ms).saturating_sub(started)),
            frozen_ms: frozen_since_ns.map(|since| ns_since(now, since) / 1_000_000),
        }
    }
}

pub(super) fn node_figures(state: &State, n: &Node) -> NodeFigures {
    NodeFigures {
        name: n.name.clone(),
        cpus: n.cpus,
        mem_bytes: n.mem_bytes,
        connected: n.connected,
        load_avg: n.load_avg,
        switches: n.switches,
        switch_errors: n.switch_errors,
        jobs: jobs_on(state, &n.name),
        stuck_jobs: n.stuck_jobs.len() as u64,
        stuck_processes: n.stuck_jobs.iter().map(|s| s.processes).sum(),
        switch_lateness: n.switch_lateness.clone(),
        switch_latency: n.switch_latency.clone(),
    }
}

/// Jobs not over that hold CPUs of node `name`.
pub(super) fn jobs_on(state: &State, name: &str) -> u64 {
    state.jobs.values().filter(|j| !j.state.is_over() && j.on_node(name).is_some()).count() as u64
}

pub(super) fn status_node(n: &Node) -> StatusNode {
    StatusNode {
        name: n.name.clone(),
        cpus: n.cpus,
        mem_bytes: n.mem_bytes,
        connected: n.connected,
        freezer: n.freezer.clone(),
        load_avg: n.load_avg,
        switches: n.switches,
        switch_errors: n.switch_errors,
        stuck_jobs: n.stuck_jobs.clone(),
    }
}

/// Slots × (node, CPU): the job in each cell, for the monitor.
pub(super) fn matrix_cells(state: &State) -> Vec<Vec<MatrixCell>> {
    let index: BTreeMap<&str, usize> = state.nodes.iter().enumerate().map(|(i, n)| (n.name.as_str(), i)).collect();
    let plan = full_plan(state);
    let empty = || -> Vec<MatrixCell> {
        state.nodes.iter().map(|n| MatrixCell { node: n.name.clone(), cpus: vec![None; n.cpus as usize] }).collect()
    };
    plan.rows
        .iter()
        .map(|row| {
            let mut cells = empty();
            // The row's jobs first: a CPU shows the first job of the slot that holds it.
            for id in row.iter().chain(&plan.always).rev() {
                let Some(job) = state.jobs.get(&id.0) else { continue };
                for p in &job.placement {
                    let Some(&i) = index.get(p.node.as_str()) else { continue };
                    for &cpu in &p.cpus {
                        if let Some(cell) = cells[i].cpus.get_mut(cpu as usize) {
                            *cell = Some(id.0);
                        }
                    }
                }
            }
            cells
        })
        .collect()
}

pub(super) fn node_load(state: &State, node: Option<&str>) -> Outcome {
    let nodes: Vec<NodeLoad> = state
        .nodes
        .iter()
        .filter(|n| node.is_none_or(|want| want == n.name))
        .map(|n| NodeLoad { node: n.name.clone(), cpus: n.cpus, load_avg: n.load_avg, jobs: jobs_on(state, &n.name) })
        .collect();
    if nodes.is_empty() {
        return Err(format!("unknown node {:?}", node.unwrap_or("")));
    }
    Ok(NodeLoadReply { nodes }.into())
}
