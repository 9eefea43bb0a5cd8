//! The switching thread of an agent: at every wall-clock slice boundary it
//! stops the outgoing gang (waiting until the kernel confirms it is stopped)
//! and only then starts the incoming one.

use crate::freezer::JobGroups;
use crate::protocol::Schedule;
use nix::time::{clock_gettime, clock_nanosleep, ClockId, ClockNanosleepFlags};
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

/// Keep this many recent samples of each measurement (a ring: constant memory and constant cost per switch in an
/// agent that runs for months).
const SAMPLES_KEPT: usize = 100_000;
/// Slice starts waiting for the next report to the controller (reports come every 100 ms; the bound only matters
/// while the controller is away).
const STARTS_UNREPORTED_MAX: usize = 4_096;

#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct SwitchStats {
    pub switches: u64,
    /// Slice boundary to the incoming gang thawed, per switch (ns).
    pub latency_ns: VecDeque<u64>,
    /// Slice boundary to the moment the switch began (the switching thread woke), per switch (ns).
    pub start_offset_ns: VecDeque<u64>,
    /// Slice boundary to every outgoing gang asked to stop, per switch (ns).
    pub requested_ns: VecDeque<u64>,
    /// Slice boundary to the end of the wait for the kernel's confirmation, per switch (ns).
    pub confirmed_ns: VecDeque<u64>,
    /// Slice number of each switch (to pair the samples of several agents).
    pub slice_numbers: VecDeque<u64>,
    /// Switches whose incoming gang started before the kernel confirmed that the outgoing one had stopped (it runs
    /// no user code once asked; the wait for its confirmation is bounded, see `ConfirmWait`).
    pub late: u64,
    pub errors: u64,
}

/// When, after its slice boundary, each phase of one switch ended (ns).
#[derive(Clone, Copy, Debug)]
struct SwitchTimes {
    woke: u64,
    requested: u64,
    confirmed: u64,
    thawed: u64,
}

impl SwitchStats {
    fn record(&mut self, slice: u64, times: SwitchTimes) {
        self.switches += 1;
        if self.latency_ns.len() >= SAMPLES_KEPT {
            for samples in
                [&mut self.latency_ns, &mut self.start_offset_ns, &mut self.requested_ns, &mut self.confirmed_ns]
            {
                samples.pop_front();
            }
            self.slice_numbers.pop_front();
        }
        self.start_offset_ns.push_back(times.woke);
        self.requested_ns.push_back(times.requested);
        self.confirmed_ns.push_back(times.confirmed);
        self.latency_ns.push_back(times.thawed);
        self.slice_numbers.push_back(slice);
    }
}

/// How long a switch waits for the kernel to confirm that the outgoing gang stopped before it starts the incoming
/// one. The outgoing gang runs no user code once asked to stop (`JobGroups::request_freeze`); the confirmation only
/// says that every task has reached the kernel's trap, and a task needs a CPU for that — one on a virtual CPU the
/// hypervisor took away waits for it. Waiting for the slowest task idles every other CPU meanwhile, so the wait is
/// bounded by default.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ConfirmWait {
    /// At most a twentieth of the slice and at most 1 ms: a switch's cost on a CPU stays a small share of the
    /// slice whatever the slowest task does.
    Bounded,
    /// Until every task is confirmed stopped (at most the freeze timeout, 2 s): the incoming gang never becomes
    /// runnable beside a task still on its way to the trap.
    Strict,
}

impl ConfirmWait {
    pub fn longest(self, slice_ns: u64) -> std::time::Duration {
        match self {
            ConfirmWait::Bounded => std::time::Duration::from_nanos((slice_ns / 20).min(1_000_000)),
            ConfirmWait::Strict => crate::freezer::FREEZE_TIMEOUT,
        }
    }
}

struct SwitchState {
    schedule: Schedule,
    /// Jobs the agent manages, and whether each runs now.
    running: BTreeMap<u64, bool>,
    /// Jobs started here that the controller's schedule does not list yet: kept stopped.
    pending: BTreeSet<u64>,
    stats: SwitchStats,
    /// (slice number, boundary to switch start in ns) of switches not yet reported.
    unreported_starts: Vec<(u64, u64)>,
    /// The last slice switched to: every switching thread wakes at each boundary, the first switches.
    switched_slice: Option<u64>,
}

pub struct Switcher {
    groups: Arc<JobGroups>,
    confirm_wait: ConfirmWait,
    state: Mutex<SwitchState>,
    /// Set by `stop`: `run` returns at its next wake-up.
    stopped: AtomicBool,
}

pub fn realtime_ns() -> u64 {
    clock_gettime(ClockId::CLOCK_REALTIME).map(|t| t.tv_sec() as u64 * 1_000_000_000 + t.tv_nsec() as u64).unwrap_or(0)
}

fn sleep_until_realtime(ns: u64) {
    let at = nix::sys::time::TimeSpec::new((ns / 1_000_000_000) as i64, (ns % 1_000_000_000) as i64);
    let _ = clock_nanosleep(ClockId::CLOCK_REALTIME, ClockNanosleepFlags::TIMER_ABSTIME, &at);
}

impl Switcher {
    pub fn new(groups: Arc<JobGroups>, confirm_wait: ConfirmWait) -> Switcher {
        let state = SwitchState {
            schedule: Schedule::default(),
            running: BTreeMap::new(),
            pending: BTreeSet::new(),
            stats: SwitchStats::default(),
            unreported_starts: Vec::new(),
            switched_slice: None,
        };
        Switcher { groups, confirm_wait, state: Mutex::new(state), stopped: AtomicBool::new(false) }
    }

    pub fn stats(&self) -> SwitchStats {
        self.state.lock().unwrap().stats.clone()
    }

    pub fn switches(&self) -> u64 {
        self.state.lock().unwrap().stats.switches
    }

    /// Slices in which a gang could not be stopped or started (each is logged as it happens).
    pub fn errors(&self) -> u64 {
        self.state.lock().unwrap().stats.errors
    }

    /// Switches that started the incoming gang before the outgoing one was confirmed stopped.
    pub fn late(&self) -> u64 {
        self.state.lock().unwrap().stats.late
    }

    /// The (slice number, start offset in ns) of every switch since the last call, for the controller's view of
    /// the skew between nodes.
    pub fn take_slice_starts(&self) -> Vec<(u64, u64)> {
        std::mem::take(&mut self.state.lock().unwrap().unreported_starts)
    }

    pub fn is_frozen(&self, job: u64) -> bool {
        self.state.lock().unwrap().running.get(&job).is_some_and(|r| !r)
    }

    /// A new schedule applies at once (a job whose slot is on starts now,
    /// not at the next boundary).
    pub fn set_schedule(&self, schedule: Schedule) {
        let mut state = self.state.lock().unwrap();
        for &job in &schedule.jobs {
            state.pending.remove(&job);
            if let std::collections::btree_map::Entry::Vacant(entry) = state.running.entry(job) {
                entry.insert(!self.groups.is_frozen(job).unwrap_or(false));
            }
        }
        state.schedule = schedule;
        let slice = current_slice(&state.schedule, realtime_ns());
        self.apply(&mut state, slice);
    }

    /// Stop a new job's (still empty) cgroup unless its slot is on: its
    /// processes then start stopped and run when the schedule says.
    pub fn prepare_new_job(&self, job: u64) -> std::io::Result<()> {
        let mut state = self.state.lock().unwrap();
        if state.schedule.jobs.contains(&job) {
            return Ok(());
        }
        self.groups.freeze(job)?;
        state.running.insert(job, false);
        state.pending.insert(job);
        Ok(())
    }

    /// The processes of a new job exist: stop them too if the freezer is
    /// signals (a signal cannot stop a process that did not exist yet).
    pub fn job_started(&self, job: u64) {
        let mut state = self.state.lock().unwrap();
        if state.running.get(&job) == Some(&false) {
            let _ = self.groups.freeze(job);
        }
        let slice = current_slice(&state.schedule, realtime_ns());
        self.apply(&mut state, slice);
    }

    pub fn forget(&self, job: u64) {
        let mut state = self.state.lock().unwrap();
        state.running.remove(&job);
        state.pending.remove(&job);
    }

    /// Make `run` return at its next slice boundary (within one slice), without switching there.
    pub fn stop(&self) {
        self.stopped.store(true, Ordering::Relaxed);
    }

    /// Start `count` switching threads, each on a CPU of its own (as far as the process may use that many), and
    /// return their handles. Each wakes at every slice boundary and the first to take the state switches: a CPU
    /// the hypervisor holds back (its timer then fires late, see `cosched bench switch --trace`) delays the switch
    /// only when every switching thread's CPU is held back.
    pub fn start_threads(self: &Arc<Self>, count: usize, realtime: bool) -> std::io::Result<Vec<JoinHandle<()>>> {
        let cpus = allowed_cpus();
        (0..count.max(1))
            .map(|i| {
                let switcher = self.clone();
                let cpu = (count > 1).then(|| cpus.get(i % cpus.len().max(1)).copied()).flatten();
                std::thread::Builder::new().name("switch".into()).spawn(move || switcher.run(cpu, realtime))
            })
            .collect()
    }

    /// Run until `stop`, switching at every slice boundary (unless another switching thread did first).
    pub fn run(&self, cpu: Option<usize>, realtime: bool) {
        if let Some(cpu) = cpu {
            if let Err(e) = pin_to(cpu) {
                eprintln!("cosched agent: switching thread not kept on CPU {cpu}: {e}");
            }
        }
        if realtime {
            if let Err(e) = enter_realtime_class() {
                eprintln!("cosched agent: switching thread stays in the normal class: {e}");
            }
        }
        loop {
            let slice_ns = self.state.lock().unwrap().schedule.slice_ns.max(1_000_000);
            let now = realtime_ns();
            let next = (now / slice_ns + 1) * slice_ns;
            sleep_until_realtime(next);
            let woke = realtime_ns();
            if self.stopped.load(Ordering::Relaxed) {
                return;
            }
            let mut state = self.state.lock().unwrap();
            if state.schedule.slice_ns != slice_ns || state.schedule.rows.len() < 2 {
                continue; // nothing rotates (or the slice changed): no switch
            }
            let slice = next / slice_ns;
            if state.switched_slice.is_some_and(|done| done >= slice) {
                continue; // another switching thread was first
            }
            state.switched_slice = Some(slice);
            let Some(done) = self.apply(&mut state, Some(slice)) else { continue };
            let since_boundary = |at: u64| at.saturating_sub(next);
            let times = SwitchTimes {
                woke: since_boundary(woke),
                requested: since_boundary(done.requested),
                confirmed: since_boundary(done.confirmed),
                thawed: since_boundary(done.thawed),
            };
            state.stats.record(slice, times);
            if state.unreported_starts.len() < STARTS_UNREPORTED_MAX {
                state.unreported_starts.push((slice, times.woke));
            }
        }
    }

    /// Stop every job not in the slot of `slice`, wait (within `confirm_wait`) for the kernel to confirm, then
    /// start the slot's jobs; returns when (CLOCK_REALTIME) each phase ended, `None` when switching is over.
    fn apply(&self, state: &mut SwitchState, slice: Option<u64>) -> Option<Phases> {
        if self.stopped.load(Ordering::Relaxed) {
            return None; // switching is over: nothing may be frozen any more
        }
        let target = target_jobs(&state.schedule, slice);
        let (asked, refused) = self.ask_outgoing_to_stop(state, &target);
        let requested = realtime_ns();
        let wait = self.confirm_wait.longest(state.schedule.slice_ns);
        let deadline = crate::freezer::monotonic_now() + wait;
        let unconfirmed = asked.iter().filter(|&&job| !matches!(self.groups.confirm_frozen(job, deadline), Ok(true)));
        if unconfirmed.count() > 0 {
            state.stats.late += 1;
        }
        let confirmed = realtime_ns();
        if refused {
            // A gang that could not be asked to stop still runs: starting the incoming one would put two gangs on
            // the CPUs. This slot stays with the old gang; the next boundary tries again.
            state.stats.errors += 1;
            return Some(Phases { requested, confirmed, thawed: confirmed });
        }
        self.start_incoming(state, &target);
        Some(Phases { requested, confirmed, thawed: realtime_ns() })
    }

    /// Ask every running job that is not in `target` to stop; returns those asked, and whether any refused.
    fn ask_outgoing_to_stop(&self, state: &mut SwitchState, target: &BTreeSet<u64>) -> (Vec<u64>, bool) {
        let mut asked = Vec::new();
        let mut refused = false;
        let jobs: Vec<u64> = state.running.keys().copied().collect();
        for job in jobs {
            let known = state.schedule.jobs.contains(&job) || state.pending.contains(&job);
            if !(known && state.running[&job] && !target.contains(&job)) {
                continue;
            }
            match self.groups.request_freeze(job) {
                Ok(()) => {
                    state.running.insert(job, false);
                    asked.push(job);
                }
                Err(e) => {
                    eprintln!("cosched agent: {e}");
                    refused = true;
                }
            }
        }
        (asked, refused)
    }

    fn start_incoming(&self, state: &mut SwitchState, target: &BTreeSet<u64>) {
        let jobs: Vec<u64> = state.running.keys().copied().collect();
        let mut failed = false;
        for job in jobs {
            let known = state.schedule.jobs.contains(&job);
            let wanted = target.contains(&job) || !known && !state.pending.contains(&job);
            if !state.running[&job] && wanted {
                failed |= self.groups.thaw(job).map_err(|e| eprintln!("cosched agent: {e}")).is_err();
                state.running.insert(job, true);
            }
        }
        if failed {
            state.stats.errors += 1;
        }
    }
}

/// When (CLOCK_REALTIME ns) the phases of one application of a schedule ended.
struct Phases {
    requested: u64,
    confirmed: u64,
    thawed: u64,
}

fn current_slice(schedule: &Schedule, now_ns: u64) -> Option<u64> {
    (schedule.slice_ns > 0).then(|| now_ns / schedule.slice_ns)
}

/// The jobs that run during `slice`: its slot's and the always-running ones,
/// never a suspended one.
pub fn target_jobs(schedule: &Schedule, slice: Option<u64>) -> BTreeSet<u64> {
    let mut target: BTreeSet<u64> = schedule.always.iter().copied().collect();
    if !schedule.rows.is_empty() {
        let slot = slice.map_or(0, |s| cosched_policy::cluster::slot_for_slice(s, schedule.rows.len()));
        target.extend(schedule.rows[slot].iter().copied());
    }
    for job in &schedule.suspended {
        target.remove(job);
    }
    target
}

/// The CPUs this process may run on.
fn allowed_cpus() -> Vec<usize> {
    use nix::sched::{sched_getaffinity, CpuSet};
    let Ok(set) = sched_getaffinity(nix::unistd::Pid::from_raw(0)) else { return vec![0] };
    (0..CpuSet::count()).filter(|&cpu| set.is_set(cpu).unwrap_or(false)).collect()
}

/// Keep the calling thread on `cpu`.
fn pin_to(cpu: usize) -> nix::Result<()> {
    let mut set = nix::sched::CpuSet::new();
    set.set(cpu)?;
    nix::sched::sched_setaffinity(nix::unistd::Pid::from_raw(0), &set)
}

fn enter_realtime_class() -> Result<(), String> {
    use thread_priority::{
        set_thread_priority_and_policy, thread_native_id, RealtimeThreadSchedulePolicy, ThreadPriority,
        ThreadSchedulePolicy,
    };
    let priority = ThreadPriority::from_posix(thread_priority::ScheduleParams { sched_priority: 50 });
    set_thread_priority_and_policy(
        thread_native_id(),
        priority,
        ThreadSchedulePolicy::Realtime(RealtimeThreadSchedulePolicy::Fifo),
    )
    .map_err(|e| format!("{e:?}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn target_rotates_through_slots_and_keeps_always_and_suspended_rules() {
        let schedule = Schedule {
            slice_ns: 10,
            rows: vec![vec![1], vec![2, 3]],
            always: vec![4],
            jobs: vec![1, 2, 3, 4],
            suspended: vec![3],
        };
        assert_eq!(target_jobs(&schedule, Some(0)), [1, 4].into());
        assert_eq!(target_jobs(&schedule, Some(1)), [2, 4].into());
        assert_eq!(target_jobs(&schedule, Some(2)), [1, 4].into());
    }
}
