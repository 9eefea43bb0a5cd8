//! The switching threads of an agent: at every wall-clock slice boundary one of them stops the outgoing gang
//! (waiting, within a bound, until the kernel confirms it is stopped) and only then starts the incoming one.
//!
//! A switch never waits for anything a thread of the normal class holds. Under load such a thread can be kept off
//! its CPU for milliseconds while it holds a lock: 64 clients submitting 200 jobs made switches 10–25 ms late when
//! the agent's link applied schedules under the switching lock. So the switching state is locked by the switching
//! threads alone, all of one class; every other thread posts its change into a small inbox, rings a doorbell (an
//! eventfd the switching threads poll while they wait for the next boundary) and goes on, and reads the figures the
//! switching threads publish, which they copy out only when nobody holds them (`try_lock`).

use crate::agent::freezer::JobGroups;
use crate::wire::protocol::Schedule;
use nix::poll::{ppoll, PollFd, PollFlags};
use nix::sys::eventfd::{EfdFlags, EventFd};
use nix::time::{clock_gettime, ClockId};
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::os::fd::AsFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::thread::JoinHandle;

/// The gang slice's bounds are the policy's, shared with the simulator and the bench.
pub use cosched_policy::slice::{check_slice_ns, slice_ns_from_ms, DEFAULT_SLICE_NS, MAX_SLICE_NS, MIN_SLICE_NS};

/// With fewer than two rows the switching threads sleep until a change is posted, and look again this often: one
/// doorbell wakes whichever thread reads it first, and the others join the rotation by this bound.
const IDLE_RECHECK_NS: u64 = 100_000_000;
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
            ConfirmWait::Strict => crate::agent::freezer::FREEZE_TIMEOUT,
        }
    }
}

/// What the switching threads alone lock.
struct SwitchState {
    schedule: Schedule,
    /// Jobs the agent manages, and whether each runs now.
    running: BTreeMap<u64, bool>,
    /// Jobs started here that the controller's schedule does not list yet: kept stopped.
    pending: BTreeSet<u64>,
    /// The last slice switched to: every switching thread wakes at each boundary, the first switches.
    switched_slice: Option<u64>,
    counts: SwitchCounts,
    /// Switches not yet copied to `Published` (a reader held it when last tried).
    unpublished: Vec<(u64, SwitchTimes)>,
}

#[derive(Clone, Copy, Debug, Default)]
struct SwitchCounts {
    switches: u64,
    late: u64,
    errors: u64,
}

/// A change another thread asks for; the switching threads make it at once (woken by the doorbell).
enum Change {
    Schedule(Schedule),
    /// A new job's cgroup exists and is stopped (`prepare_new_job`).
    NewJob(u64),
    /// Its processes exist: stop them too if the job is out of its slot (a signal cannot stop a process before it
    /// exists).
    Started(u64),
    /// Drop the job; `done` hears once no switch will touch it again.
    Forget {
        job: u64,
        done: mpsc::Sender<()>,
    },
}

/// What other threads read: copied out by the switching threads whenever nobody holds it, never waited for.
#[derive(Default)]
struct Published {
    stats: SwitchStats,
    /// (slice, woke, thawed) of each switch not yet reported.
    unreported_starts: Vec<(u64, u64, u64)>,
    frozen: BTreeSet<u64>,
    /// Jobs that ran at some publication since `take_ran` was last called.
    ran: BTreeSet<u64>,
}

pub struct Switcher {
    groups: Arc<JobGroups>,
    confirm_wait: ConfirmWait,
    /// Locked by the switching threads alone.
    state: Mutex<SwitchState>,
    /// Held only to push or take changes; the switching threads never wait for it.
    inbox: Mutex<Vec<Change>>,
    doorbell: EventFd,
    published: Mutex<Published>,
    /// Set by `stop`: `run` returns at its next wake-up.
    stopped: AtomicBool,
}

pub fn realtime_ns() -> u64 {
    clock_gettime(ClockId::CLOCK_REALTIME).map(|t| t.tv_sec() as u64 * 1_000_000_000 + t.tv_nsec() as u64).unwrap_or(0)
}

/// How long a caller of `forget` waits for the switching threads (they answer within a switch).
const FORGET_WAIT: std::time::Duration = std::time::Duration::from_secs(2);

impl Switcher {
    pub fn new(groups: Arc<JobGroups>, confirm_wait: ConfirmWait) -> Switcher {
        let state = SwitchState {
            schedule: Schedule::default(),
            running: BTreeMap::new(),
            pending: BTreeSet::new(),
            switched_slice: None,
            counts: SwitchCounts::default(),
            unpublished: Vec::new(),
        };
        let doorbell = EventFd::from_value_and_flags(0, EfdFlags::EFD_CLOEXEC | EfdFlags::EFD_NONBLOCK)
            .expect("an eventfd (Linux has had them since 2.6.27)");
        Switcher {
            groups,
            confirm_wait,
            state: Mutex::new(state),
            inbox: Mutex::new(Vec::new()),
            doorbell,
            published: Mutex::new(Published::default()),
            stopped: AtomicBool::new(false),
        }
    }

    /// Every switch's figures so far (the switching threads publish them after each switch).
    pub fn stats(&self) -> SwitchStats {
        self.published.lock().unwrap().stats.clone()
    }

    pub fn switches(&self) -> u64 {
        self.published.lock().unwrap().stats.switches
    }

    /// Slices in which a gang could not be stopped or started (each is logged as it happens).
    pub fn errors(&self) -> u64 {
        self.published.lock().unwrap().stats.errors
    }

    /// Switches that started the incoming gang before the outgoing one was confirmed stopped.
    pub fn late(&self) -> u64 {
        self.published.lock().unwrap().stats.late
    }

    /// The (slice number, start offset in ns) of every switch since the last call, for the controller's view of
    /// the skew between nodes, and each one's latency (slice boundary to the incoming gang thawed, ns).
    pub fn take_slice_starts(&self) -> (Vec<(u64, u64)>, Vec<u64>) {
        let taken = std::mem::take(&mut self.published.lock().unwrap().unreported_starts);
        taken.into_iter().map(|(slice, woke, thawed)| ((slice, woke), thawed)).unzip()
    }

    /// Whether the switcher holds the job stopped (as of its last switch or change).
    pub fn is_frozen(&self, job: u64) -> bool {
        self.published.lock().unwrap().frozen.contains(&job)
    }

    /// The jobs that ran at some moment since the last call: a job frozen now that is not among them has been
    /// frozen all that time (a report's sample of `is_frozen` alone may always fall outside the job's slot).
    pub fn take_ran(&self) -> BTreeSet<u64> {
        std::mem::take(&mut self.published.lock().unwrap().ran)
    }

    /// A new schedule applies at once (a job whose slot is on starts now, not at the next boundary). A schedule
    /// whose slice the switcher cannot honour is refused and the last one kept.
    pub fn set_schedule(&self, schedule: Schedule) -> Result<(), String> {
        check_slice_ns(schedule.slice_ns).map_err(|e| format!("schedule refused: {e}"))?;
        self.post(Change::Schedule(schedule));
        Ok(())
    }

    /// Stop a new job's (still empty) cgroup: its processes then start stopped, and the switching threads let them
    /// run at once if its slot is on. Once switching is over (`stop`) nothing may be frozen, so nothing is.
    pub fn prepare_new_job(&self, job: u64) -> std::io::Result<()> {
        if self.stopped.load(Ordering::SeqCst) {
            return Ok(());
        }
        self.groups.freeze(job)?;
        if self.stopped.load(Ordering::SeqCst) {
            return self.groups.thaw(job); // `stop` came in between, and everything was thawed before this freeze
        }
        self.post(Change::NewJob(job));
        Ok(())
    }

    /// The processes of a new job exist: stop them too if the freezer is signals (a signal cannot stop a process
    /// that did not exist yet). A cgroup freezer stopped them as they joined the job's stopped cgroup; asking again
    /// would have the switching thread wait for a new task to reach the kernel's trap, which a busy CPU can delay
    /// by milliseconds.
    pub fn job_started(&self, job: u64) {
        if self.groups.kind() == crate::agent::freezer::FreezerKind::Signals {
            self.post(Change::Started(job));
        }
    }

    /// Drop a job; returns once no switch will stop or start it again (so that its cgroup can be thawed and
    /// removed), or at once when switching is over.
    pub fn forget(&self, job: u64) {
        let (done, forgotten) = mpsc::channel();
        self.post(Change::Forget { job, done });
        if !self.stopped.load(Ordering::SeqCst) {
            let _ = forgotten.recv_timeout(FORGET_WAIT);
        }
    }

    fn post(&self, change: Change) {
        self.inbox.lock().unwrap().push(change);
        let _ = self.doorbell.write(1);
    }

    /// Make `run` return at its next wake-up, without switching there.
    pub fn stop(&self) {
        self.stopped.store(true, Ordering::SeqCst);
        let _ = self.doorbell.write(1);
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

    /// Run until `stop`: make every posted change at once, and switch at every slice boundary (unless another
    /// switching thread did first).
    pub fn run(&self, cpu: Option<usize>, realtime: bool) {
        if let Some(cpu) = cpu {
            if let Err(e) = pin_to(cpu) {
                crate::log_line!("cosched agent: switching thread not kept on CPU {cpu}: {e}");
            }
        }
        if realtime {
            if let Err(e) = enter_realtime_class() {
                crate::log_line!("cosched agent: switching thread stays in the normal class: {e}");
            }
        }
        loop {
            // Every schedule it switches by passed `check_slice_ns` (the first, before any schedule, has no rows).
            let (slice_ns, rotates) = {
                let state = self.state.lock().unwrap();
                (state.schedule.slice_ns.max(MIN_SLICE_NS), state.schedule.rows.len() >= 2)
            };
            let boundary = (realtime_ns() / slice_ns + 1) * slice_ns;
            // With nothing to rotate a boundary has nothing to do: a change rings the doorbell. A wake at every
            // boundary would end the turns of the node's processes between ticks for nothing.
            let wake_at = if rotates { boundary } else { realtime_ns() + IDLE_RECHECK_NS };
            self.wait_for_boundary_or_doorbell(wake_at);
            let woke = realtime_ns();
            let mut state = self.state.lock().unwrap();
            if self.stopped.load(Ordering::SeqCst) {
                self.publish(&mut state, true);
                return;
            }
            self.make_posted_changes(&mut state);
            // (A thread that slept idle has no boundary of its own to switch at: the schedule it woke to was
            // applied with the posted changes.)
            if rotates && woke >= boundary && state.schedule.slice_ns == slice_ns {
                self.switch_at(&mut state, boundary, woke);
            }
            self.publish(&mut state, false);
        }
    }

    /// Sleep until `boundary_ns` (CLOCK_REALTIME), or until a change is posted.
    fn wait_for_boundary_or_doorbell(&self, boundary_ns: u64) {
        let now = realtime_ns();
        if now >= boundary_ns {
            return;
        }
        let left = nix::sys::time::TimeSpec::from_duration(std::time::Duration::from_nanos(boundary_ns - now));
        let mut doorbell = [PollFd::new(self.doorbell.as_fd(), PollFlags::POLLIN)];
        if matches!(ppoll(&mut doorbell, Some(left), None), Ok(rang) if rang > 0) {
            let _ = self.doorbell.read(); // non-blocking: another switching thread may have taken it first
        }
    }

    /// Switch to the slot of the slice that starts at `boundary` (once, whichever thread is first), and count it.
    fn switch_at(&self, state: &mut SwitchState, boundary: u64, woke: u64) {
        if state.schedule.rows.len() < 2 {
            return; // nothing rotates
        }
        let slice = boundary / state.schedule.slice_ns;
        if already_switched(state.switched_slice, slice, woke / state.schedule.slice_ns) {
            return; // another switching thread was first
        }
        state.switched_slice = Some(slice);
        let Some(done) = self.apply(state, Some(slice)) else { return };
        let since_boundary = |at: u64| at.saturating_sub(boundary);
        let times = SwitchTimes {
            woke: since_boundary(woke),
            requested: since_boundary(done.requested),
            confirmed: since_boundary(done.confirmed),
            thawed: since_boundary(done.thawed),
        };
        state.counts.switches += 1;
        state.unpublished.push((slice, times));
    }

    /// Make the changes other threads posted, then apply the schedule to the current slice if there were any. The
    /// inbox is never waited for: a thread that holds it is pushing, and rings the doorbell once done.
    fn make_posted_changes(&self, state: &mut SwitchState) {
        let changes = match self.inbox.try_lock() {
            Ok(mut inbox) => std::mem::take(&mut *inbox),
            Err(_) => return,
        };
        if changes.is_empty() {
            return;
        }
        for change in changes {
            self.make_change(state, change);
        }
        let slice = current_slice(&state.schedule, realtime_ns());
        self.apply(state, slice);
    }

    fn make_change(&self, state: &mut SwitchState, change: Change) {
        match change {
            Change::Schedule(schedule) => {
                for &job in &schedule.jobs {
                    state.pending.remove(&job);
                    if let std::collections::btree_map::Entry::Vacant(entry) = state.running.entry(job) {
                        entry.insert(!self.groups.is_frozen(job).unwrap_or(false));
                    }
                }
                state.schedule = schedule;
            }
            Change::NewJob(job) => {
                state.running.insert(job, false);
                if !state.schedule.jobs.contains(&job) {
                    state.pending.insert(job);
                }
            }
            Change::Started(job) => {
                if state.running.get(&job) == Some(&false) {
                    let _ = self.groups.freeze(job);
                }
            }
            Change::Forget { job, done } => {
                state.running.remove(&job);
                state.pending.remove(&job);
                let _ = done.send(());
            }
        }
    }

    /// Copy out the figures other threads read, unless one of them holds the copy now (then next time; `last`:
    /// the thread is ending, and waits for it).
    fn publish(&self, state: &mut SwitchState, last: bool) {
        let held = if last { self.published.lock().ok() } else { self.published.try_lock().ok() };
        let Some(mut published) = held else { return };
        for (slice, times) in state.unpublished.drain(..) {
            published.stats.record(slice, times);
            if published.unreported_starts.len() < STARTS_UNREPORTED_MAX {
                published.unreported_starts.push((slice, times.woke, times.thawed));
            }
        }
        let SwitchCounts { switches, late, errors } = state.counts;
        (published.stats.switches, published.stats.late, published.stats.errors) = (switches, late, errors);
        published.frozen = state.running.iter().filter(|(_, &running)| !running).map(|(&job, _)| job).collect();
        published.ran.extend(state.running.iter().filter(|(_, &running)| running).map(|(&job, _)| job));
    }

    /// Stop every job not in the slot of `slice`, wait (within `confirm_wait`) for the kernel to confirm, then
    /// start the slot's jobs; returns when (CLOCK_REALTIME) each phase ended, `None` when switching is over.
    fn apply(&self, state: &mut SwitchState, slice: Option<u64>) -> Option<Phases> {
        if self.stopped.load(Ordering::SeqCst) {
            return None; // switching is over: nothing may be frozen any more
        }
        let target = target_jobs(&state.schedule, slice);
        let (asked, refused) = self.ask_outgoing_to_stop(state, &target);
        let requested = realtime_ns();
        let wait = self.confirm_wait.longest(state.schedule.slice_ns);
        let deadline = crate::agent::freezer::monotonic_now() + wait;
        let unconfirmed = asked.iter().filter(|&&job| !matches!(self.groups.confirm_frozen(job, deadline), Ok(true)));
        if unconfirmed.count() > 0 {
            state.counts.late += 1;
        }
        let confirmed = realtime_ns();
        if refused {
            // A gang that could not be asked to stop still runs: starting the incoming one would put two gangs on
            // the CPUs. This slot stays with the old gang; the next boundary tries again.
            state.counts.errors += 1;
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
                    crate::log_line!("cosched agent: {e}");
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
                failed |= self.groups.thaw(job).map_err(|e| crate::log_line!("cosched agent: {e}")).is_err();
                state.running.insert(job, true);
            }
        }
        if failed {
            state.counts.errors += 1;
        }
    }
}

/// When (CLOCK_REALTIME ns) the phases of one application of a schedule ended.
struct Phases {
    requested: u64,
    confirmed: u64,
    thawed: u64,
}

/// Has a switching thread switched the boundary of `slice` already? The slices switched only grow, so one at or
/// below the last is done, unless the clock went back: a thread that wakes in a slice (`woke_slice`) below the
/// last one switched can only have seen the clock step back (an NTP step, a resumed virtual machine, `date -s`;
/// a late thread wakes at or after the last boundary switched), and then counting starts again from it, or the
/// gang that ran would keep its CPUs for as long as the step.
fn already_switched(last_switched: Option<u64>, slice: u64, woke_slice: u64) -> bool {
    last_switched.is_some_and(|done| done >= slice && woke_slice >= done)
}

fn current_slice(schedule: &Schedule, now_ns: u64) -> Option<u64> {
    (schedule.slice_ns > 0).then(|| now_ns / schedule.slice_ns)
}

/// The jobs that run during a slice: the rule is shared with the simulator's nodes.
pub use cosched_control::schedule::target_jobs;

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

    #[test]
    fn a_boundary_is_switched_once_whatever_the_threads_but_again_after_the_clock_went_back() {
        // The other thread switched slice 100; this one woke for the same boundary, or late, in slice 100 or 101.
        assert!(already_switched(Some(100), 100, 100));
        assert!(already_switched(Some(100), 99, 101));
        assert!(!already_switched(Some(100), 101, 101));
        assert!(!already_switched(None, 5, 5));
        // The clock stepped back a minute at 10 ms slices: the next boundary is slice 94,001 after 100,000.
        assert!(!already_switched(Some(100_000), 94_001, 94_001));
    }
}
