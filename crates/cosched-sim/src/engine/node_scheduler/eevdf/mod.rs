//! Linux's fair class since 6.6: earliest eligible virtual deadline first
//! (EEVDF), as kernel/sched/fair.c of 6.18 has it with its default features
//! (PLACE_LAG, PLACE_DEADLINE_INITIAL, RUN_TO_PARITY, DELAY_DEQUEUE,
//! DELAY_ZERO). Each rule, the kernel function it follows and every
//! simplification are in docs/model.md ("The EEVDF node scheduler").
//!
//! Virtual times are integer nanoseconds of a nice-0 task. The running
//! process is not in its CPU's queue (as the kernel keeps `cfs_rq->curr` out
//! of its tree) but counts in the queue's weighted average; a process that
//! blocks while not eligible stays queued ("delayed") until it is picked or
//! wakes.

mod background;
mod balance;
mod gang;
mod pelt;

pub(crate) use gang::GangEevdf;

use super::{first_tick_after, tick_at_or_after, NodeScheduler};
use crate::config::SimConfig;
use crate::metrics::SwitchCause;
use crate::engine::records::{Phase, ProcState};
use crate::engine::view::Host;
use crate::trace::TraceKind;
use cosched_core::SimTime;
use cosched_policy::Mode;

pub(crate) struct Eevdf;

/// The weight of each nice value, -20 first (`sched_prio_to_weight`,
/// kernel/sched/core.c): each step is about 10 % of CPU time.
const WEIGHT_BY_NICE: [u32; 40] = [
    88761, 71755, 56483, 46273, 36291, 29154, 23254, 18705, 14949, 11916, 9548, 7620, 6100, 4904, 3906, 3121, 2501,
    1991, 1586, 1277, 1024, 820, 655, 526, 423, 335, 272, 215, 172, 137, 110, 87, 70, 56, 45, 36, 29, 23, 18, 15,
];
const NICE_0_WEIGHT: u64 = 1024;

/// `normalized_sysctl_sched_base_slice`: 0.70 ms since Linux 6.15 (commit
/// 2ae891b82695, "sched: Reduce the default slice to avoid tasks getting an
/// extra tick"; 0.75 ms before), scaled by 1 + log2 of the CPU count (at
/// most 8) as `update_sysctl` does at boot: 1.4 ms on this machine's two
/// CPUs, as its /sys/kernel/debug/sched/debug says.
const NORMALIZED_BASE_SLICE_NS: u64 = 700_000;

/// The base slice on a node of `cpus` CPUs (`get_update_sysctl_factor`,
/// SCHED_TUNABLESCALING_LOG).
pub(crate) fn base_slice_ns(cpus: u32) -> u64 {
    let factor = 1 + cpus.clamp(1, 8).ilog2() as u64;
    NORMALIZED_BASE_SLICE_NS * factor
}

/// `calc_delta_fair`: `delta_ns` of CPU time in virtual time of weight `weight`.
fn virtual_ns(delta_ns: u64, weight: u32) -> i64 {
    (delta_ns as u128 * NICE_0_WEIGHT as u128 / weight as u128) as i64
}

/// The CPU time weight `weight` takes to cover `virtual_delta` (rounded up).
fn real_ns(virtual_delta: i64, weight: u32) -> u64 {
    (virtual_delta.max(0) as u128 * weight as u128).div_ceil(NICE_0_WEIGHT as u128) as u64
}

/// A CPU's run queue.
#[derive(Default)]
pub(crate) struct EevdfCpu {
    /// Queued processes other than the running one, in the order they
    /// joined (ties of deadline go to the earlier, as in the kernel's tree).
    queue: Vec<u32>,
    /// The queue's virtual time while it is empty (the kernel's
    /// `min_vruntime`): where a process joining an idle CPU starts.
    idle_vruntime: i64,
    /// A wake, a yield or a boost asked the running process to be
    /// rescheduled at the next visit.
    resched: bool,
    /// The process picked next if eligible (the kernel's next buddy, set
    /// by `yield_to`; how a coscheduler favours a process here, our choice).
    next_buddy: Option<u32>,
    /// The first tick the scheduler has not acted on (each tick acts once).
    first_unacted_tick: SimTime,
    /// The tick length, noted at the first placement (charges see no configuration).
    tick_ns: u64,
    /// Its running process has just left (blocked or exited): if nothing
    /// is left to run, the CPU looks for work on its node once.
    newly_idle: bool,
    /// The first instant of its next busy balance (`rq->next_balance`).
    next_busy_balance: SimTime,
    /// The CPU's housekeeping wakes (a measured machine's).
    housekeeping: background::HousekeepingWakes,
}

/// A process's scheduling entity.
pub(crate) struct EevdfProc {
    vruntime: i64,
    deadline: i64,
    /// Its lag, kept from its block to its wake (`se->vlag`).
    vlag: i64,
    /// Until this virtual time the running process keeps its CPU against
    /// wakers (`se->vprot`, RUN_TO_PARITY: the deadline at its pick).
    vprot: i64,
    /// Its slice in virtual time (`calc_delta_fair(se->slice, se)`).
    vslice: i64,
    /// The largest lag it keeps: `calc_delta_fair(max(2 slices, a tick))`.
    lag_limit: i64,
    weight: u32,
    /// Blocked while not eligible: still queued, competing, until picked
    /// (DELAY_DEQUEUE).
    delayed: bool,
    /// It reads its own CPU clock while it computes (`Program::reads_cpu_clock`): the kernel's `update_curr`
    /// runs at every read, so its deadline renews and it is rescheduled the moment its slice is used up, as at
    /// a tick.
    reads_cpu_clock: bool,
    /// Its job is frozen (gang slots over EEVDF, `gang.rs`): it is in no queue but as a delayed one, and a wake
    /// leaves it out of them.
    frozen: bool,
    /// Frozen, it would be runnable: it was when frozen, or woke since. Its thaw wakes it.
    runnable_when_thawed: bool,
    /// Its decayed runnable average, kept by the gang gate (frozen or thawed: `gang.rs`).
    runnable_average: pelt::RunnableAverage,
    /// While its thaw wakes it: the CPU of the thread that thaws it (the waker, for the wake placement).
    thawed_from: Option<u32>,
    /// The CPU it was on at its last thaw's wake (`p->recent_used_cpu`).
    recent_used_cpu: Option<u32>,
}

impl EevdfProc {
    /// `update_deadline`: a slice used up gets the next one. Whether it renewed.
    fn renew_deadline_if_due(&mut self) -> bool {
        if self.vruntime < self.deadline {
            return false;
        }
        self.deadline = self.vruntime + self.vslice;
        true
    }
}

impl NodeScheduler for Eevdf {
    type Cpu = EevdfCpu;
    type Proc = EevdfProc;
    type Machine = ();
    const MODE: Mode = Mode::Local;
    const CHARGES_DISPATCH_SWITCH: bool = true;

    fn new_proc(cfg: &SimConfig, nice: i8, reads_cpu_clock: bool) -> EevdfProc {
        let weight = WEIGHT_BY_NICE[(nice.clamp(-20, 19) + 20) as usize];
        let slice_cpus = match cfg.scheduler.base_slice_cpus {
            0 => cfg.cpus_per_node,
            cpus => cpus,
        };
        let slice_ns = base_slice_ns(slice_cpus);
        EevdfProc {
            vruntime: 0,
            deadline: 0,
            vlag: 0,
            vprot: 0,
            vslice: virtual_ns(slice_ns, weight),
            lag_limit: virtual_ns((2 * slice_ns).max(cfg.scheduler.tick_ns), weight),
            weight,
            delayed: false,
            reads_cpu_clock,
            frozen: false,
            runnable_when_thawed: false,
            runnable_average: pelt::RunnableAverage::default(),
            thawed_from: None,
            recent_used_cpu: None,
        }
    }

    /// A new task joins at the queue's average with half a slice to its
    /// deadline (`place_entity` with ENQUEUE_INITIAL), and may preempt.
    fn admit<H: Host<NodeCpu = Self::Cpu, NodeProc = Self::Proc>>(engine: &mut H, c: u32, p: u32) {
        update_running(engine, c);
        place(engine, c, p, Placement::New);
        engine.cpu_mut(c).sched.queue.push(p);
        check_preempt_wakeup(engine, c, p);
    }

    /// `update_curr`: virtual time advances by the weighted CPU time. The
    /// ticks inside the charged time renew the deadline as they would have
    /// (the engine visits a CPU only when something may change).
    fn charge(cpu: &mut EevdfCpu, proc: &mut EevdfProc, ran_ns: u64, until: SimTime, computing: bool) {
        let from = SimTime(until.0 - ran_ns);
        let vruntime_from = proc.vruntime;
        let vruntime_at = |t: SimTime| vruntime_from + virtual_ns(t.0 - from.0, proc.weight);
        if proc.reads_cpu_clock && computing {
            // Renewed at the read that finds the slice used up: a slice after the last deadline.
            let vruntime_until = vruntime_at(until);
            while proc.deadline <= vruntime_until {
                proc.deadline += proc.vslice;
            }
        } else if cpu.tick_ns > 0 {
            loop {
                let reaches_deadline = from.0 + real_ns(proc.deadline - vruntime_from, proc.weight);
                let tick = reaches_deadline.div_ceil(cpu.tick_ns) * cpu.tick_ns;
                if tick >= until.0 {
                    break;
                }
                proc.deadline = vruntime_at(SimTime(tick)) + proc.vslice;
            }
        }
        proc.vruntime = vruntime_at(until);
    }

    /// `set_next_entity`: protected against wakers until its deadline.
    fn dispatched<H: Host<NodeCpu = Self::Cpu, NodeProc = Self::Proc>>(engine: &mut H, c: u32, p: u32) {
        let proc = &mut engine.proc_mut(p).sched;
        proc.vprot = proc.deadline;
        let cpu = &mut engine.cpu_mut(c).sched;
        cpu.resched = false;
        cpu.newly_idle = false;
        if cpu.next_buddy == Some(p) {
            cpu.next_buddy = None;
        }
    }

    fn preempt_for(cpu: &mut EevdfCpu, p: u32) {
        cpu.next_buddy = Some(p);
        cpu.resched = true;
    }

    /// `yield_task_fair`: the deadline moves a slice later, then a pick.
    fn yield_below_others<H: Host<NodeCpu = Self::Cpu, NodeProc = Self::Proc>>(
        engine: &mut H,
        c: u32,
        p: u32,
    ) -> Option<u8> {
        if engine.cpu(c).sched.queue.is_empty() {
            return None;
        }
        update_running(engine, c);
        let proc = &mut engine.proc_mut(p).sched;
        proc.deadline += proc.vslice;
        engine.cpu_mut(c).sched.resched = true;
        Some(0)
    }

    /// `dequeue_entity` on a sleep: a process not eligible stays queued
    /// (DELAY_DEQUEUE); one that is leaves with its lag.
    fn blocked<H: Host<NodeCpu = Self::Cpu, NodeProc = Self::Proc>>(engine: &mut H, c: u32, p: u32) {
        engine.cpu_mut(c).sched.newly_idle = true;
        update_running(engine, c);
        if !eligible(engine, c, p) {
            engine.proc_mut(p).sched.delayed = true;
            engine.cpu_mut(c).sched.queue.push(p);
            return;
        }
        let average = avg_vruntime(engine, c);
        let proc = &mut engine.proc_mut(p).sched;
        proc.vlag = (average - proc.vruntime).clamp(-proc.lag_limit, proc.lag_limit);
        if engine.cpu(c).sched.queue.is_empty() {
            engine.cpu_mut(c).sched.idle_vruntime = average;
        }
    }

    fn exited(cpu: &mut EevdfCpu, p: u32) {
        cpu.newly_idle = true;
        cpu.queue.retain(|&q| q != p);
        if cpu.next_buddy == Some(p) {
            cpu.next_buddy = None;
        }
    }

    /// A housekeeping wake due now (a measured machine's), outside kernel work: the running process is
    /// rescheduled if past its protection (`housekeeping_wake`).
    fn on_visit<H: Host<NodeCpu = Self::Cpu, NodeProc = Self::Proc>>(engine: &mut H, c: u32, now: SimTime) {
        if background::take_housekeeping_wake(engine, c, now) && engine.cpu(c).switch_until <= now {
            housekeeping_wake(engine, c);
        }
    }

    /// With a process queued, its next housekeeping wake (none without a measured machine's rate).
    fn on_visit_due_at<H: Host<NodeCpu = Self::Cpu, NodeProc = Self::Proc>>(engine: &H, c: u32, now: SimTime) -> SimTime {
        if engine.cpu(c).sched.queue.is_empty() {
            return SimTime::MAX;
        }
        engine.cpu(c).sched.housekeeping.due_at_or_after(engine.cfg(), now)
    }

    fn acts_at<H: Host<NodeCpu = Self::Cpu, NodeProc = Self::Proc>>(engine: &H, c: u32, from: SimTime) -> SimTime {
        tick_at_or_after(engine, c, from, engine.cpu(c).sched.first_unacted_tick)
    }

    /// `task_tick_fair` → `update_curr`: with another process queued, a
    /// running process no longer protected (past the deadline it was picked
    /// with) is rescheduled at every tick. A tick deferred to the end of
    /// kernel work renews a used-up slice only when it may reschedule
    /// (another process queued); alone, the process renews it at the next
    /// tick instead, as `charge` does (docs/model.md).
    fn tick<H: Host<NodeCpu = Self::Cpu, NodeProc = Self::Proc>>(engine: &mut H, c: u32, now: SimTime) {
        Self::tick_passed(engine, c, now);
        balance::balance_at_tick(engine, c, now);
        if let Some(p) = engine.cpu(c).running {
            let queued = !engine.cpu(c).sched.queue.is_empty();
            if queued || now.0.is_multiple_of(engine.clock().tick.ns()) {
                update_running(engine, c);
            }
            let proc = &engine.proc(p).sched;
            if proc.vruntime >= proc.vprot && queued {
                engine.cpu_mut(c).sched.resched = true;
            }
        }
        Self::between_ticks(engine, c, now);
    }

    fn between_ticks<H: Host<NodeCpu = Self::Cpu, NodeProc = Self::Proc>>(engine: &mut H, c: u32, now: SimTime) {
        if engine.cpu(c).running.is_some_and(|p| reading_cpu_clock(engine, p)) {
            resched_if_unprotected(engine, c);
        }
        if std::mem::take(&mut engine.cpu_mut(c).sched.resched) {
            reschedule(engine, c, now);
        }
    }

    fn tick_passed<H: Host<NodeCpu = Self::Cpu, NodeProc = Self::Proc>>(engine: &mut H, c: u32, now: SimTime) {
        engine.cpu_mut(c).sched.first_unacted_tick = first_tick_after(engine, now);
    }

    fn has_ready<H: Host<NodeCpu = Self::Cpu, NodeProc = Self::Proc>>(engine: &H, c: u32) -> bool {
        engine.cpu(c).sched.queue.iter().any(|&q| !engine.proc(q).sched.delayed)
    }

    fn pulls_when_free<H: Host<NodeCpu = Self::Cpu, NodeProc = Self::Proc>>(engine: &H, c: u32) -> bool {
        engine.cpu(c).sched.newly_idle && engine.cfg().cpus_per_node > 1
    }

    /// `pick_next_entity` on a free CPU: a delayed process picked leaves
    /// the queue then (its lag, if positive, zeroed: DELAY_ZERO), and the
    /// pick goes on.
    fn pick_next<H: Host<NodeCpu = Self::Cpu, NodeProc = Self::Proc>>(engine: &mut H, c: u32) -> Option<u32> {
        loop {
            let picked = pick_eevdf(engine, c, None)?;
            if engine.proc(picked).sched.delayed {
                finish_delayed_dequeue(engine, c, picked);
                continue;
            }
            engine.cpu_mut(c).sched.queue.retain(|&q| q != picked);
            return Some(picked);
        }
    }

    /// `enqueue_entity` on a wake: placed with its lag kept (PLACE_LAG); a
    /// delayed one is requeued where it is, at zero lag if it had come to
    /// more (DELAY_ZERO). Then `check_preempt_wakeup_fair`. A frozen process
    /// stays out until its thaw.
    fn make_ready<H: Host<NodeCpu = Self::Cpu, NodeProc = Self::Proc>>(engine: &mut H, p: u32) {
        if engine.proc(p).sched.frozen {
            engine.proc_mut(p).sched.runnable_when_thawed = true; // the thaw wakes it
            return;
        }
        let c = engine.proc(p).cpu;
        update_running(engine, c);
        if engine.proc(p).sched.delayed {
            engine.proc_mut(p).sched.delayed = false;
            if avg_vruntime(engine, c) > engine.proc(p).sched.vruntime {
                engine.cpu_mut(c).sched.queue.retain(|&q| q != p);
                engine.proc_mut(p).sched.vlag = 0;
                place(engine, c, p, Placement::Wake);
                engine.cpu_mut(c).sched.queue.push(p);
            }
        } else {
            place(engine, c, p, Placement::Wake);
            engine.cpu_mut(c).sched.queue.push(p);
        }
        check_preempt_wakeup(engine, c, p);
    }

    /// On an idle CPU of the node if its own is busy (`select_idle_sibling`); a thaw's wake as the kernel places a
    /// task's wake of another (`balance::thaw_cpu`).
    fn wake_cpu<H: Host<NodeCpu = Self::Cpu, NodeProc = Self::Proc>>(engine: &H, p: u32, now: SimTime) -> u32 {
        match engine.proc(p).sched.thawed_from {
            Some(waker) => balance::thaw_cpu(engine, p, waker, now),
            None => balance::wake_cpu(engine, p),
        }
    }

    fn wakes_may_move<H: Host<NodeCpu = Self::Cpu, NodeProc = Self::Proc>>(engine: &H) -> bool {
        engine.cfg().cpus_per_node > 1
    }

    fn pull_when_idle<H: Host<NodeCpu = Self::Cpu, NodeProc = Self::Proc>>(engine: &mut H, c: u32, now: SimTime) -> bool {
        balance::pull_when_idle(engine, c, now)
    }

    /// On a node of several CPUs a CPU is never known to stay idle: a
    /// sibling's process may move to it.
    fn idle_while_blocked<H: Host<NodeCpu = Self::Cpu, NodeProc = Self::Proc>>(engine: &H, c: u32) -> bool {
        engine.cfg().cpus_per_node == 1 && engine.cpu(c).residents.len() == 1
    }

    /// Picked next if eligible, at once (the next buddy, our choice).
    fn favour<H: Host<NodeCpu = Self::Cpu, NodeProc = Self::Proc>>(engine: &mut H, p: u32) {
        let c = engine.proc(p).cpu;
        Self::preempt_for(&mut engine.cpu_mut(c).sched, p);
    }

    /// The next buddy, picked if eligible at the CPU's next pick, without a reschedule now.
    fn favour_without_preempting<H: Host<NodeCpu = Self::Cpu, NodeProc = Self::Proc>>(engine: &mut H, p: u32) {
        let c = engine.proc(p).cpu;
        engine.cpu_mut(c).sched.next_buddy = Some(p);
    }

    /// Wake-up preemption acts at the wake.
    fn wake_noticed_at<H: Host<NodeCpu = Self::Cpu, NodeProc = Self::Proc>>(_: &H, _: u32, wake_at: SimTime) -> SimTime {
        wake_at
    }

    /// At once when a reschedule is asked; else, with another process
    /// queued, at the first tick once its virtual time passes its protection
    /// (the deadline it was picked with; a later deadline is never earlier).
    /// On a node of several CPUs, every tick while a process is ready here
    /// (the tick balances).
    fn preempts_at<H: Host<NodeCpu = Self::Cpu, NodeProc = Self::Proc>>(
        engine: &H,
        c: u32,
        p: u32,
        start: SimTime,
        now: SimTime,
    ) -> SimTime {
        let cpu = &engine.cpu(c).sched;
        if cpu.resched {
            return start;
        }
        // (A delayed process counts: the tick's pick then dequeues it.)
        if cpu.queue.is_empty() {
            return SimTime::MAX;
        }
        let proc = &engine.proc(p).sched;
        let unprotected_at = (start + real_ns(proc.vprot - proc.vruntime, proc.weight)).max(now);
        let reader_pick_at = match reading_cpu_clock(engine, p) {
            true => reader_pick_at(proc, start, now),
            false => SimTime::MAX,
        };
        if engine.cfg().cpus_per_node > 1 && Self::has_ready(engine, c) {
            return Self::acts_at(engine, c, now).min(reader_pick_at);
        }
        Self::acts_at(engine, c, unprotected_at).min(reader_pick_at)
    }
}

/// Whether `p` reads its CPU clock now: a process that reads it while it computes, computing (while it spins in
/// a receive only the tick's `update_curr` runs).
fn reading_cpu_clock<H: Host<NodeCpu = EevdfCpu, NodeProc = EevdfProc>>(engine: &H, p: u32) -> bool {
    let proc = engine.proc(p);
    proc.sched.reads_cpu_clock && matches!(proc.phase, Phase::Compute { .. })
}

/// When a running process that reads its CPU clock (running from `start`) is next rescheduled off the tick: at
/// the read that finds its protection over; once past it (the pick kept it), at the read that renews its
/// deadline, after which the pick may choose another.
fn reader_pick_at(proc: &EevdfProc, start: SimTime, now: SimTime) -> SimTime {
    let until = if proc.vruntime < proc.vprot { proc.vprot } else { proc.deadline };
    (start + real_ns(until - proc.vruntime, proc.weight)).max(now)
}

/// A housekeeping task wakes on CPU `c` (`on_visit`, `background::HousekeepingWakes`): it preempts the running process if
/// that one is past its protection (`check_preempt_wakeup_fair` prefers the waker's earlier deadline), runs
/// for a moment and sleeps again; the scheduler then picks among the CPU's processes (at this visit's
/// `between_ticks`, once the running process is brought up to now), off the tick grid. The
/// moment's CPU time is not charged: it is the same with one copy of a program or several.
fn housekeeping_wake<H: Host<NodeCpu = EevdfCpu, NodeProc = EevdfProc>>(engine: &mut H, c: u32) {
    resched_if_unprotected(engine, c);
}

/// `update_curr` off the tick (a waker's, a read of the running process's CPU clock): with another process
/// queued, the running one is rescheduled once past its protection.
fn resched_if_unprotected<H: Host<NodeCpu = EevdfCpu, NodeProc = EevdfProc>>(engine: &mut H, c: u32) {
    let Some(p) = engine.cpu(c).running else { return };
    if engine.cpu(c).sched.queue.is_empty() {
        return;
    }
    update_running(engine, c);
    let proc = &engine.proc(p).sched;
    if proc.vruntime >= proc.vprot {
        engine.cpu_mut(c).sched.resched = true;
    }
}

/// Where a joining process is placed.
#[derive(Copy, Clone, PartialEq)]
enum Placement {
    /// A new task: no lag, half a slice to its deadline.
    New,
    /// A woken one: its lag kept, a whole slice.
    Wake,
}

/// `place_entity`: at the queue's average less its lag, the lag scaled so
/// that adding it leaves it whole (`lag * (W + w) / W`).
fn place<H: Host<NodeCpu = EevdfCpu, NodeProc = EevdfProc>>(engine: &mut H, c: u32, p: u32, how: Placement) {
    // (Every process that runs here was placed here first.)
    engine.cpu_mut(c).sched.tick_ns = engine.cfg().scheduler.tick_ns;
    let average = avg_vruntime(engine, c);
    let (load, _) = load_and_weighted_sum(engine, c);
    let proc = &mut engine.proc_mut(p).sched;
    // On an empty queue the lag is dropped (PLACE_LAG needs `nr_queued`).
    let lag = match how {
        Placement::Wake if load > 0 => (proc.vlag as i128 * (load + proc.weight as i128) / load) as i64,
        _ => 0,
    };
    proc.vruntime = average - lag;
    let to_deadline = if how == Placement::New { proc.vslice / 2 } else { proc.vslice };
    proc.deadline = proc.vruntime + to_deadline;
}

/// The total weight of the running process and the queue, and their
/// weighted virtual times.
fn load_and_weighted_sum<H: Host<NodeCpu = EevdfCpu, NodeProc = EevdfProc>>(engine: &H, c: u32) -> (i128, i128) {
    let cpu = engine.cpu(c);
    cpu.sched.queue.iter().chain(cpu.running.iter()).fold((0, 0), |(load, sum), &q| {
        let proc = &engine.proc(q).sched;
        (load + proc.weight as i128, sum + proc.weight as i128 * proc.vruntime as i128)
    })
}

/// `avg_vruntime`: the weighted average virtual time, rounded down.
fn avg_vruntime<H: Host<NodeCpu = EevdfCpu, NodeProc = EevdfProc>>(engine: &H, c: u32) -> i64 {
    let (load, sum) = load_and_weighted_sum(engine, c);
    if load == 0 {
        return engine.cpu(c).sched.idle_vruntime;
    }
    sum.div_euclid(load) as i64
}

/// `entity_eligible`: no later than the average, compared exactly
/// (`sum w_i (v_i - v) >= 0`).
fn eligible<H: Host<NodeCpu = EevdfCpu, NodeProc = EevdfProc>>(engine: &H, c: u32, p: u32) -> bool {
    let (load, sum) = load_and_weighted_sum(engine, c);
    sum >= load * engine.proc(p).sched.vruntime as i128
}

/// The running process's deadline, renewed if used up (the part of
/// `update_curr` after charging). Whether it renewed.
fn update_running<H: Host<NodeCpu = EevdfCpu, NodeProc = EevdfProc>>(engine: &mut H, c: u32) -> bool {
    match engine.cpu(c).running {
        Some(p) => engine.proc_mut(p).sched.renew_deadline_if_due(),
        None => false,
    }
}

/// `pick_eevdf` (after `pick_next_entity`'s next buddy): the running
/// process `running` if it is eligible and protected; else the eligible
/// process with the earliest deadline, the running one included.
fn pick_eevdf<H: Host<NodeCpu = EevdfCpu, NodeProc = EevdfProc>>(
    engine: &H,
    c: u32,
    running: Option<u32>,
) -> Option<u32> {
    let cpu = &engine.cpu(c).sched;
    let queued = cpu.queue.len() + running.is_some() as usize;
    if queued <= 1 {
        return running.or(cpu.queue.first().copied());
    }
    if let Some(buddy) = cpu.next_buddy.filter(|&b| cpu.queue.contains(&b) && eligible(engine, c, b)) {
        return Some(buddy);
    }
    let running = running.filter(|&r| eligible(engine, c, r));
    if let Some(r) = running.filter(|&r| engine.proc(r).sched.vruntime < engine.proc(r).sched.vprot) {
        return Some(r);
    }
    let deadline = |q: u32| engine.proc(q).sched.deadline;
    let best = cpu
        .queue
        .iter()
        .copied()
        .filter(|&q| eligible(engine, c, q))
        .fold(None, |best: Option<u32>, q| match best {
            Some(b) if deadline(b) <= deadline(q) => Some(b),
            _ => Some(q),
        });
    match (best, running) {
        (Some(b), Some(r)) if deadline(r) < deadline(b) => Some(r),
        (None, _) => running.or_else(|| cpu.queue.iter().copied().min_by_key(|&q| deadline(q))),
        (best, _) => best,
    }
}

/// A delayed process picked leaves the queue: its lag noted, zero if
/// positive (DELAY_ZERO).
fn finish_delayed_dequeue<H: Host<NodeCpu = EevdfCpu, NodeProc = EevdfProc>>(engine: &mut H, c: u32, p: u32) {
    let average = avg_vruntime(engine, c);
    let proc = &mut engine.proc_mut(p).sched;
    proc.vlag = (average - proc.vruntime).clamp(-proc.lag_limit, 0);
    proc.delayed = false;
    let cpu = &mut engine.cpu_mut(c).sched;
    cpu.queue.retain(|&q| q != p);
    if cpu.queue.is_empty() {
        cpu.idle_vruntime = average;
    }
}

/// `check_preempt_wakeup_fair`: the joining `p` takes the CPU when the pick
/// with the running process would choose it.
fn check_preempt_wakeup<H: Host<NodeCpu = EevdfCpu, NodeProc = EevdfProc>>(engine: &mut H, c: u32, p: u32) {
    let Some(running) = engine.cpu(c).running else { return };
    if pick_eevdf(engine, c, Some(running)) == Some(p) {
        engine.cpu_mut(c).sched.resched = true;
    }
}

/// `__schedule` on a reschedule: the pick with the running process; if it
/// is another, the running one goes back to the queue and the CPU is free
/// for the engine's dispatch (which picks the same). Delayed processes the
/// pick meets leave the queue.
fn reschedule<H: Host<NodeCpu = EevdfCpu, NodeProc = EevdfProc>>(engine: &mut H, c: u32, now: SimTime) {
    let Some(running) = engine.cpu(c).running else { return };
    let next = loop {
        match pick_eevdf(engine, c, Some(running)) {
            Some(q) if q != running && engine.proc(q).sched.delayed => finish_delayed_dequeue(engine, c, q),
            Some(q) if q != running => break q,
            _ => return,
        }
    };
    // A boost makes its process the next buddy: the pick that follows it is the boost's doing.
    let cause = if engine.cpu(c).sched.next_buddy == Some(next) { SwitchCause::Boost } else { SwitchCause::Tick };
    engine.proc_mut(running).state = ProcState::Ready;
    engine.cpu_mut(c).sched.queue.push(running);
    engine.release_cpu(c, now, cause);
    engine.record(now, c, TraceKind::Preempt { process: running });
}
