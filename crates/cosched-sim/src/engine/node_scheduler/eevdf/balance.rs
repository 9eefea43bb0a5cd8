//! EEVDF on a node of several CPUs: the CPU a waking process runs on
//! (`select_idle_sibling`), the process a CPU about to idle takes
//! (`sched_balance_newidle`), and the periodic balance at a busy CPU's
//! ticks (`nohz_balancer_kick`, `sched_balance_rq`), each simplified as
//! docs/model.md says. On a node of one CPU none of this acts.

use super::{avg_vruntime, check_preempt_wakeup, place, update_running, EevdfCpu, EevdfProc, Placement};
use crate::engine::view::Host;
use super::background::background_move_due;
use super::pelt::{affine_to_waker, idle_scan_cpus};
use cosched_core::SimTime;

/// `imbalance_pct` of the CPUs sharing a cache (`sd_init`, SD_SHARE_LLC):
/// a CPU running more than one process itself takes load only from one
/// more than 17 % busier (`find_busiest_group`).
const IMBALANCE_PCT: u64 = 117;

/// `busy_factor`: a busy CPU balances this many times less often.
const BUSY_FACTOR: u64 = 16;

/// The balance interval of a busy CPU (`get_sd_balance_interval`):
/// `busy_factor` × the domain's CPU count in milliseconds (`sd_init`'s
/// `balance_interval`), in ticks rounded up, less one tick.
fn busy_balance_interval_ns(cpus_per_node: u32, tick_ns: u64) -> u64 {
    let interval_ns = BUSY_FACTOR * cpus_per_node as u64 * 1_000_000;
    let ticks = interval_ns.div_ceil(tick_ns).saturating_sub(1).max(1);
    ticks * tick_ns
}

/// The other CPUs of `c`'s node, from the one after it round to the one before.
fn siblings<H: Host>(engine: &H, c: u32) -> impl Iterator<Item = u32> {
    let per_node = engine.cfg().cpus_per_node;
    let first = c / per_node * per_node;
    (1..per_node).map(move |i| first + (c - first + i) % per_node)
}

/// Nothing running, nothing queued (`available_idle_cpu`).
fn is_idle<H: Host<NodeCpu = EevdfCpu>>(engine: &H, c: u32) -> bool {
    let cpu = engine.cpu(c);
    cpu.running.is_none() && cpu.sched.queue.is_empty()
}

/// `select_idle_sibling`, the waker's CPU left out (a NIC's or a disk's
/// interrupt wakes here): the process's own CPU if idle, else the first
/// idle CPU of its node after it, else its own. A delayed process is still
/// queued where it was and wakes there; a frozen one stays until its thaw.
pub(super) fn wake_cpu<H: Host<NodeCpu = EevdfCpu, NodeProc = EevdfProc>>(engine: &H, p: u32) -> u32 {
    let own = engine.proc(p).cpu;
    let sched = &engine.proc(p).sched;
    if engine.cfg().cpus_per_node == 1 || sched.delayed || sched.frozen || is_idle(engine, own) {
        return own;
    }
    siblings(engine, own).find(|&d| is_idle(engine, d)).unwrap_or(own)
}

/// The CPU a thaw wakes `p` on: `select_task_rq_fair` for a wake by a task (the agent's thread that thaws, on
/// `waker`, busy until its switch is done) rather than by an interrupt. Unless `p` was last on the waker's CPU,
/// `wake_affine` chooses between the two: its own CPU if idle, else the waker's if `wake_affine_weight` says so on
/// the decayed loads. Then `select_idle_sibling`: that target if idle, its own CPU if idle, the CPU of its last
/// thaw if idle, the idle CPUs after the target only as far as SIS_UTIL's scan reaches (none on a busy node), else
/// the target. So a thaw keeps the ranks where they were, or stacks them on the waker's CPU, while a sibling idles.
/// A delayed process is still queued and wakes where it is (`ttwu_runnable`).
pub(super) fn thaw_cpu<H: Host<NodeCpu = EevdfCpu, NodeProc = EevdfProc>>(
    engine: &H,
    p: u32,
    waker: u32,
    now: SimTime,
) -> u32 {
    let prev = engine.proc(p).cpu;
    if engine.cfg().cpus_per_node == 1 || engine.proc(p).sched.delayed {
        return prev;
    }
    // Frozen processes left queued delayed are gone by the thaw: the CPU picked them after the freeze.
    let idle = |c: u32| c != waker && engine.cpu(c).running.is_none() && ready(engine, c).next().is_none();
    let target = if prev == waker || idle(prev) {
        prev
    } else {
        let (waker_load, prev_load) = (cpu_decayed_load(engine, waker, now.0), cpu_decayed_load(engine, prev, now.0));
        match affine_to_waker(waker_load, prev_load, decayed_load(engine, p, now.0)) {
            true => waker,
            false => prev,
        }
    };
    if idle(target) {
        return target;
    }
    if idle(prev) {
        return prev;
    }
    if let Some(recent) = engine.proc(p).sched.recent_used_cpu.filter(|&r| r != prev && r != target && idle(r)) {
        return recent;
    }
    let scan = idle_scan_cpus(engine.cfg().cpus_per_node, node_utilization(engine, target, now.0));
    siblings(engine, target).take(scan as usize).find(|&c| idle(c)).unwrap_or(target)
}

/// `p`'s decayed load: its weight times its runnable average.
fn decayed_load<H: Host<NodeCpu = EevdfCpu, NodeProc = EevdfProc>>(engine: &H, p: u32, now_ns: u64) -> f64 {
    let sched = &engine.proc(p).sched;
    sched.weight as f64 * sched.runnable_average.at(now_ns)
}

/// `cpu_load`: the decayed loads of the processes placed on `c`, blocked and frozen ones included.
fn cpu_decayed_load<H: Host<NodeCpu = EevdfCpu, NodeProc = EevdfProc>>(engine: &H, c: u32, now_ns: u64) -> f64 {
    engine.cpu(c).residents.iter().map(|&q| decayed_load(engine, q, now_ns)).sum()
}

/// The mean utilization of `c`'s node in [0, 1]: each CPU's summed runnable averages, at most 1 (the utilization a
/// CPU's runnable processes give it, as `cpu_util_cfs` bounds it by the capacity).
fn node_utilization<H: Host<NodeCpu = EevdfCpu, NodeProc = EevdfProc>>(engine: &H, c: u32, now_ns: u64) -> f64 {
    let per_node = engine.cfg().cpus_per_node;
    let busy_of = |d: u32| -> f64 {
        engine.cpu(d).residents.iter().map(|&q| engine.proc(q).sched.runnable_average.at(now_ns)).sum::<f64>().min(1.0)
    };
    (std::iter::once(c).chain(siblings(engine, c)).map(busy_of).sum::<f64>()) / per_node as f64
}

/// The queued processes of a CPU that runs one that may move, in the
/// order they joined the queue (the kernel takes the least recently
/// queued or picked first). A free CPU's queued process is about to run
/// there.
fn movable<H: Host<NodeCpu = EevdfCpu, NodeProc = EevdfProc>>(engine: &H, c: u32) -> impl Iterator<Item = u32> + '_ {
    let cpu = engine.cpu(c);
    let queue = if cpu.running.is_some() { &cpu.sched.queue[..] } else { &[] };
    queue.iter().copied().filter(|&q| !engine.proc(q).sched.delayed)
}

/// The ready processes of a CPU (running and queued, not delayed).
fn ready<H: Host<NodeCpu = EevdfCpu, NodeProc = EevdfProc>>(engine: &H, c: u32) -> impl Iterator<Item = u32> + '_ {
    let cpu = engine.cpu(c);
    cpu.sched.queue.iter().copied().filter(|&q| !engine.proc(q).sched.delayed).chain(cpu.running)
}

/// The runnable processes of a CPU (running and queued, not delayed) and
/// their total weight: the kernel's load, taken at the instant rather
/// than averaged (PELT).
fn runnable_and_load<H: Host<NodeCpu = EevdfCpu, NodeProc = EevdfProc>>(engine: &H, c: u32) -> (u32, u64) {
    ready(engine, c).fold((0, 0), |(n, load), q| (n + 1, load + engine.proc(q).sched.weight as u64))
}

/// Move the queued `p` from CPU `from` to `to` at `now`: it leaves with its
/// lag and the distance to its deadline (`dequeue_entity`, not a sleep:
/// PLACE_REL_DEADLINE), joins `to` with both (`place_entity`) and may
/// preempt there (`wakeup_preempt`).
fn move_queued<H: Host<NodeCpu = EevdfCpu, NodeProc = EevdfProc>>(engine: &mut H, p: u32, from: u32, to: u32, now: SimTime) {
    engine.account(from, now);
    engine.account(to, now);
    update_running(engine, from);
    let average = avg_vruntime(engine, from);
    let proc = &mut engine.proc_mut(p).sched;
    proc.vlag = (average - proc.vruntime).clamp(-proc.lag_limit, proc.lag_limit);
    let to_deadline = proc.deadline - proc.vruntime;
    let source = engine.cpu_mut(from);
    source.sched.queue.retain(|&q| q != p);
    if source.sched.next_buddy == Some(p) {
        source.sched.next_buddy = None;
    }
    if source.sched.queue.is_empty() && source.running.is_none() {
        source.sched.idle_vruntime = average;
    }
    engine.migrate(p, to, now);
    update_running(engine, to);
    place(engine, to, p, Placement::Wake);
    let proc = &mut engine.proc_mut(p).sched;
    proc.deadline = proc.vruntime + to_deadline;
    engine.cpu_mut(to).sched.queue.push(p);
    check_preempt_wakeup(engine, to, p);
}

/// `sched_balance_newidle`: CPU `c`, just left with nothing to run, takes
/// the first movable process of the sibling with the most runnable ones.
/// Only at the instant it becomes free, not at later visits while idle.
pub(super) fn pull_when_idle<H: Host<NodeCpu = EevdfCpu, NodeProc = EevdfProc>>(engine: &mut H, c: u32, now: SimTime) -> bool {
    if !std::mem::take(&mut engine.cpu_mut(c).sched.newly_idle) || engine.cfg().cpus_per_node == 1 {
        return false;
    }
    let busiest = siblings(engine, c)
        .filter(|&s| movable(engine, s).next().is_some())
        .max_by_key(|&s| (runnable_and_load(engine, s), std::cmp::Reverse(s)));
    let Some(busiest) = busiest else { return false };
    let p = movable(engine, busiest).next().expect("a movable process");
    move_queued(engine, p, busiest, c, now);
    engine.rebook(busiest, now);
    true
}

/// At a tick of CPU `c` with processes queued: an idle sibling takes the
/// first of them (the kernel's idle balance, kicked from a busy CPU's
/// tick); at the first tick once a busy balance interval has passed since
/// the last, the least loaded sibling takes load from `c`
/// (`sched_balance_rq` with `migrate_load`).
pub(super) fn balance_at_tick<H: Host<NodeCpu = EevdfCpu, NodeProc = EevdfProc>>(engine: &mut H, c: u32, now: SimTime) {
    let per_node = engine.cfg().cpus_per_node;
    let Some(first) = (per_node > 1).then(|| movable(engine, c).next()).flatten() else { return };
    if let Some(idle) = siblings(engine, c).find(|&d| is_idle(engine, d)) {
        move_queued(engine, first, c, idle, now);
        engine.visit(idle, now);
        return;
    }
    if background_move_due(engine, c, now, ready(engine, c).count() as u32) {
        let (target, _) = least_loaded_sibling(engine, c);
        move_queued(engine, first, c, target, now);
        engine.rebook(target, now);
        return;
    }
    if now < engine.cpu(c).sched.next_busy_balance {
        return;
    }
    let interval_ns = busy_balance_interval_ns(per_node, engine.clock().tick.ns());
    engine.cpu_mut(c).sched.next_busy_balance = now + interval_ns;
    let (target, (target_runnable, target_load)) = least_loaded_sibling(engine, c);
    let (_, own_load) = runnable_and_load(engine, c);
    // A sibling running more than one process balances only against a CPU
    // `imbalance_pct` busier (`find_busiest_group`).
    if own_load <= target_load || (target_runnable > 1 && 100 * own_load <= IMBALANCE_PCT * target_load) {
        return;
    }
    let node_load: u64 = siblings(engine, c).map(|s| runnable_and_load(engine, s).1).sum();
    let average = (own_load + node_load) / per_node as u64;
    let mut imbalance = own_load.saturating_sub(average).min(average.saturating_sub(target_load));
    let candidates: Vec<u32> = movable(engine, c).collect();
    let mut moved = false;
    for p in candidates {
        let weight = engine.proc(p).sched.weight as u64;
        if imbalance == 0 {
            break;
        }
        if weight <= imbalance {
            move_queued(engine, p, c, target, now);
            imbalance -= weight;
            moved = true;
        }
    }
    if moved {
        engine.rebook(target, now);
    }
}

/// The sibling of `c` with the least load (the lowest-numbered among equals), with its runnable count and load.
fn least_loaded_sibling<H: Host<NodeCpu = EevdfCpu, NodeProc = EevdfProc>>(engine: &H, c: u32) -> (u32, (u32, u64)) {
    siblings(engine, c)
        .map(|s| (s, runnable_and_load(engine, s)))
        .min_by_key(|&(s, (_, load))| (load, s))
        .expect("a node of several CPUs")
}
