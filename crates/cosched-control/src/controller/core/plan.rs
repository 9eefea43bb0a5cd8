//! The plan: recomputed after every change, its placements turned into started jobs, and each node's schedule.

use super::periodic::awaits_first_process;
use super::*;

impl Rules {
    pub(super) fn shape(&self, state: &State) -> ClusterShape {
        ClusterShape {
            cpus_per_node: state.nodes.iter().map(|n| n.cpus).collect(),
            mem_bytes_per_node: state.nodes.iter().map(|n| n.mem_bytes).collect(),
            accepting: state.nodes.iter().map(|n| n.connected).collect(),
        }
    }

    /// Recompute the plan, start jobs that got room, and send every agent its schedule.
    pub(super) fn replan(&self, state: &mut State) {
        self.recompute_plan(state);
        let names: Vec<String> = state.nodes.iter().map(|n| n.name.clone()).collect();
        let started: Vec<(u64, Vec<NodePlacement>)> = full_plan(state)
            .jobs
            .iter()
            .filter_map(|jp| match &jp.status {
                JobStatus::Placed { cpus, .. } if state.jobs[&jp.id.0].placement.is_empty() => {
                    Some((jp.id.0, with_ranks(cpus, &names)))
                }
                _ => None,
            })
            .collect();
        let any_started = !started.is_empty();
        for (id, placement) in started {
            self.start_job(state, id, placement);
        }
        if any_started {
            // The placements just fixed are no longer choices of the plan.
            self.recompute_plan(state);
        }
        self.send_schedules(state);
    }

    pub(super) fn start_job(&self, state: &mut State, id: u64, placement: Vec<NodePlacement>) {
        let mut job = state.jobs[&id].clone();
        job.placement = placement;
        job.state = if job.state == JobState::Suspended { JobState::Suspended } else { JobState::Running };
        job.started_unix_ms = Some(state.now.unix_ms);
        if let Some(error) = missing_agent_features(state, &job) {
            job.error = Some(error);
            let nodes: Vec<String> = job.placement.iter().map(|p| p.node.clone()).collect();
            state.records.save_job_or_hold(&job);
            state.jobs.insert(id, job);
            for node in nodes {
                self.node_ended(state, id, &node, Some(127));
            }
            return;
        }
        let messages: Vec<(String, ToAgent)> =
            job.placement.iter().map(|p| (p.node.clone(), ToAgent::Start(start_message(&job, p)))).collect();
        state.records.save_job_or_hold(&job);
        state.jobs.insert(id, job);
        state.live.entry(id).or_default().progress_at_ns = Some(state.now.mono_ns);
        for (node, message) in messages {
            if let Err(e) = send_to(state, &node, message) {
                log(state, format!("cosched controller: starting job {id} on {node}: {e}"));
            }
        }
    }

    pub(super) fn recompute_plan(&self, state: &mut State) {
        // The time out of their slots under the plan that held until now.
        let now_ns = state.now.mono_ns;
        slurm_time::accrue(state, now_ns);
        #[cfg(test)]
        let charge = !planted::is(Bug::TimeLimitNotCharged);
        #[cfg(not(test))]
        let charge = true;
        if charge {
            time_limit::accrue(state, now_ns);
        }
        state.status_changes += 1;
        let shape = self.shape(state);
        let plan_jobs = plan_jobs(state, |name: &str| node_index(state, name).map(|i| i as u32));
        state.cosched.sync(shape, plan_jobs);
        state.plan_index = full_plan(state).jobs.iter().enumerate().map(|(i, j)| (j.id.0, i)).collect();
        keep_rows_held(state);
    }

    /// Admission for a registered job: CPUs on `nodes` now, from the plan with every other job in it, or a
    /// refusal. Its processes exist already, so it cannot wait in the queue; it never takes a row a started job
    /// holds.
    pub(super) fn admit_registered(
        &self,
        state: &State,
        job: &JobRecord,
        nodes: &[usize],
    ) -> Result<Vec<NodePlacement>, String> {
        let names: Vec<String> = state.nodes.iter().map(|n| n.name.clone()).collect();
        let mut shape = self.shape(state);
        shape.accepting = (0..names.len()).map(|i| nodes.contains(&i) && shape.accepting[i]).collect();
        match state.cosched.probe(shape, plan_job(job, None, false)) {
            JobStatus::Placed { cpus, .. } => Ok(with_ranks(&cpus, &names)),
            _ => {
                let wanted: Vec<&str> = nodes.iter().map(|&i| names[i].as_str()).collect();
                Err(format!(
                    "no room on {} for {} CPUs now (matrix rows, memory or local slots are taken); \
                     a registered job must fit at once",
                    wanted.join(","),
                    job.tasks
                ))
            }
        }
    }

    pub(super) fn send_schedules(&self, state: &mut State) {
        for (i, schedule) in self.schedules(state).into_iter().enumerate() {
            if state.nodes[i].last_schedule.as_ref() == Some(&schedule) || !state.nodes[i].connected {
                continue;
            }
            let name = state.nodes[i].name.clone();
            if send_to(state, &name, ToAgent::Schedule(schedule.clone())).is_ok() {
                state.nodes[i].last_schedule = Some(schedule);
            }
        }
    }

    /// Every node's schedule, in the order of `state.nodes`, from one pass over the jobs and the plan.
    pub(super) fn schedules(&self, state: &State) -> Vec<Schedule> {
        let index = &state.node_by_name;
        let plan = full_plan(state);
        let mut schedules: Vec<Schedule> = state
            .nodes
            .iter()
            .map(|_| Schedule {
                slice_ns: self.settings.slice_ns,
                rows: vec![Vec::new(); plan.rows.len()],
                always: Vec::new(),
                suspended: Vec::new(),
                jobs: Vec::new(),
            })
            .collect();
        let nodes_of = |id: u64| -> Vec<usize> {
            let placement = state.jobs.get(&id).map(|j| j.placement.as_slice()).unwrap_or_default();
            placement.iter().filter_map(|p| index.get(p.node.as_str()).copied()).collect()
        };
        for job in state.jobs.values().filter(|j| !j.state.is_over()) {
            for p in job.placement.iter().filter(|p| !job.ended_on.contains(&p.node)) {
                if let Some(&i) = index.get(p.node.as_str()) {
                    schedules[i].jobs.push(job.id);
                    if kept_stopped(state, job.id) {
                        schedules[i].suspended.push(job.id);
                    }
                }
            }
        }
        for (slot, row) in plan.rows.iter().enumerate() {
            for id in row {
                for i in nodes_of(id.0) {
                    schedules[i].rows[slot].push(id.0);
                }
            }
        }
        for id in &plan.always {
            for i in nodes_of(id.0) {
                schedules[i].always.push(id.0);
            }
        }
        #[cfg(test)]
        if planted::is(Bug::CpuTwice) {
            for schedule in schedules.iter_mut().filter(|s| s.rows.len() > 1) {
                let next: Vec<Vec<u64>> =
                    schedule.rows.iter().cycle().skip(1).take(schedule.rows.len()).cloned().collect();
                schedule.rows.iter_mut().zip(next).for_each(|(row, next)| row.extend(next));
            }
        }
        schedules
    }

    pub(super) fn node_schedule(&self, state: &State, node: &str) -> Option<Schedule> {
        let i = node_index(state, node)?;
        self.schedules(state).into_iter().nth(i)
    }

    /// Keep in the record of a job about to end what its history shows of its use: its CPU time so far and its
    /// share of the slices.
    pub(super) fn keep_usage(&self, state: &State, job: &mut JobRecord) {
        job.cpu_ns = state.live.get(&job.id).map_or(0, JobLive::total_cpu_ns).max(job.cpu_ns);
        job.slice_share = self.slice_share(state, job.id);
    }

    pub(super) fn slice_share(&self, state: &State, id: u64) -> f64 {
        planned_share(state, id).unwrap_or(0.0)
    }
}

/// Write the row each started job owns where it changed: a restarted controller plans every running job into the
/// row it had (a packing from scratch may find none for some, which would then never run).
pub(super) fn keep_rows_held(state: &mut State) {
    let changed: Vec<(u64, Option<u32>)> = full_plan(state)
        .jobs
        .iter()
        .filter_map(|p| {
            let job = state.jobs.get(&p.id.0).filter(|j| !j.placement.is_empty() && !j.state.is_over())?;
            (job.row_held != p.own_row).then_some((job.id, p.own_row))
        })
        .collect();
    for (id, row) in changed {
        if let Some(job) = state.jobs.get_mut(&id) {
            job.row_held = row;
            state.records.save_job_or_hold(job);
        }
    }
}

/// The share of the cycle's slots the plan gives job `id` (`None`: not in the plan).
pub(super) fn planned_share(state: &State, id: u64) -> Option<f64> {
    share_in(full_plan(state), &state.plan_index, id)
}

/// Job `id`'s share of `plan`'s slots, found through `index` (the plan's `jobs` by id).
pub(super) fn share_in(plan: &cosched_policy::cluster::Plan, index: &BTreeMap<u64, usize>, id: u64) -> Option<f64> {
    let job = plan.jobs.get(*index.get(&id)?).filter(|j| j.id.0 == id)?;
    Some(job.slice_share(plan.rows.len()))
}

/// A job its node keeps stopped: suspended by a user.
pub(super) fn kept_stopped(state: &State, id: u64) -> bool {
    #[cfg(test)]
    if planted::is(Bug::ThawForgotten) && state.restored.contains(&id) {
        return true;
    }
    state.jobs[&id].state == JobState::Suspended
}

/// The plan the agents get (the controller's coscheduler always plans in full).
pub(super) fn full_plan(state: &State) -> &cosched_policy::cluster::Plan {
    state.cosched.plan().expect("a replanning coscheduler")
}

/// The jobs the plan places: all that are not over, except registered jobs not yet admitted.
/// A job placed on a node no longer configured keeps its record but is not planned (it cannot be placed anew).
pub(super) fn plan_jobs(state: &State, node_index: impl Fn(&str) -> Option<u32>) -> Vec<PlanJob> {
    state
        .jobs
        .values()
        .filter(|j| !(j.state.is_over() || j.registered && j.placement.is_empty()))
        .filter_map(|j| {
            let placed = j.placement_for_plan(&node_index);
            (j.placement.is_empty() || placed.is_some()).then(|| plan_job(j, placed, awaits_first_process(state, j)))
        })
        .collect()
}

/// A job as the coscheduler sees it; the row it holds is the coscheduler's to remember. A registration that
/// awaits its first process holds its row as a suspended job does, and runs in no slot.
pub(super) fn plan_job(
    job: &JobRecord,
    placed: Option<Vec<cosched_policy::cluster::NodeCpus>>,
    awaits_process: bool,
) -> PlanJob {
    PlanJob {
        id: JobId(job.id),
        class: job.class,
        mode: job.planned_mode(),
        tasks: job.tasks,
        nodes: job.nodes,
        mem_bytes_per_node: job.mem_bytes,
        row_held: placed.as_ref().and(job.row_held),
        placed,
        suspended: job.state == JobState::Suspended || awaits_process,
        idle: job.idle && job.planned_mode() == Mode::Gang,
        // The daemon's queue does not backfill, so it needs no estimate.
        requested_ns: None,
    }
}

/// Number the tasks node by node.
pub(super) fn with_ranks(cpus: &[cosched_policy::cluster::NodeCpus], names: &[String]) -> Vec<NodePlacement> {
    let mut next = 0;
    cpus.iter()
        .map(|nc| {
            let ranks: Vec<u32> = (next..next + nc.cpus.len() as u32).collect();
            next += nc.cpus.len() as u32;
            NodePlacement { node: names[nc.node as usize].clone(), cpus: nc.cpus.clone(), ranks }
        })
        .collect()
}

/// Why the job cannot start on its nodes: an agent older than what the job needs would ignore it (`-o`/`-e`).
pub(super) fn missing_agent_features(state: &State, job: &JobRecord) -> Option<String> {
    if job.output_files.is_empty() {
        return None;
    }
    let feature = crate::wire::protocol::FEATURE_OUTPUT_FILES;
    let lacking: Vec<&str> = job
        .placement
        .iter()
        .filter(|p| {
            // An agent away is judged when it is back and the job starts there again (`reconcile_adopted`).
            state.nodes.iter().any(|n| n.name == p.node && n.connected && !n.features.iter().any(|f| f == feature))
        })
        .map(|p| p.node.as_str())
        .collect();
    (!lacking.is_empty()).then(|| {
        format!(
            "the agent of {} is older than submit -o/-e and would ignore them: upgrade it (the controller first, \
             then the agents)",
            lacking.join(", ")
        )
    })
}

pub(super) fn start_message(job: &JobRecord, p: &NodePlacement) -> StartJob {
    let mut start = plain_start_message(job, p);
    match job.launcher_node() {
        // An MPI job: its launcher, once, on the first node, with the job's hosts; only a cgroup elsewhere.
        Some(launcher) if launcher == p.node => {
            start.ranks.truncate(1);
            start.mpi_hosts = job.placement.iter().map(|q| (q.node.clone(), q.cpus.len() as u32)).collect();
        }
        Some(_) => start.register_only = true,
        None => {}
    }
    start
}

pub(super) fn plain_start_message(job: &JobRecord, p: &NodePlacement) -> StartJob {
    StartJob {
        job: job.id,
        uid: job.uid,
        gid: job.gid,
        argv: job.argv.clone(),
        cwd: job.cwd.clone(),
        env: job.env.clone(),
        ranks: p.ranks.clone(),
        size: job.tasks,
        cpus: p.cpus.clone(),
        register_only: job.registered,
        token: job.token.clone(),
        mpi_hosts: vec![],
        name: job.name.clone(),
        output_files: job.output_files.clone(),
        umask: job.umask,
    }
}
