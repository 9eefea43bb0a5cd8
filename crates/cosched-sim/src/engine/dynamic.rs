//! The mechanisms of the dynamic coscheduling schemes: spin-block's block
//! and interrupt, spin-yield's yield, demand-based coscheduling's interrupt
//! and reschedule, and periodic boost. Every cost is CPU time in the kernel
//! (`Engine::charge_kernel`), counted as overhead.

use super::{Engine, Phase, ProcState};
use crate::config::TOP_LEVEL;
use crate::scheme::ArrivalReaction;
use crate::trace::TraceKind;
use cosched_core::SimTime;
use cosched_policy::{periodic_boost_choice, BoostCandidate};

/// What the NIC believes its CPU runs: the process running at the last tick.
/// Kept lazily: only the value at the tick before the latest change is stored.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct NicView {
    changed_at: SimTime,
    view: Option<u32>,
}

fn tick_at_or_before(at: SimTime, tick_ns: u64) -> SimTime {
    SimTime(at.ns() / tick_ns * tick_ns)
}

impl NicView {
    /// `running` is about to change at `at` (changes come in time order).
    pub(super) fn before_change(&mut self, at: SimTime, tick_ns: u64, old: Option<u32>) {
        debug_assert!(at >= self.changed_at, "running changes out of order");
        if self.changed_at <= tick_at_or_before(at, tick_ns) {
            self.view = old;
        }
        self.changed_at = at;
    }

    /// The NIC's belief at `now`, given what runs now. A change at a tick's
    /// very instant is already seen at that tick.
    pub(super) fn seen(&self, now: SimTime, tick_ns: u64, current: Option<u32>) -> Option<u32> {
        if self.changed_at <= tick_at_or_before(now, tick_ns) {
            current
        } else {
            self.view
        }
    }
}

impl Engine<'_> {
    /// Set what CPU `c` runs from `at` on, keeping the NIC's view.
    pub(super) fn set_running(&mut self, c: u32, at: SimTime, process: Option<u32>) {
        // Only demand-based coscheduling looks at the NIC's view.
        if self.deposit_events {
            self.nic_views[c as usize].before_change(at, self.cfg.scheduler.tick_ns, self.cpus[c as usize].running);
        }
        self.cpus[c as usize].running = process;
    }

    /// Kernel work of `ns` on CPU `c` (accounted up to `now`): it runs after
    /// any kernel work already under way and delays the running process.
    pub(super) fn charge_kernel(&mut self, c: u32, now: SimTime, ns: u64) {
        if ns == 0 {
            return;
        }
        let cpu = &mut self.cpus[c as usize];
        debug_assert_eq!(cpu.accounted_until, now, "charge kernel time on an accounted CPU");
        cpu.add_kernel_work(now, ns);
        cpu.overhead_pending_ns += ns;
    }

    /// Spin-block: the spin time ran out; block with a system call until an
    /// awaited message arrives (the NIC then interrupts).
    pub(super) fn block_in_recv(&mut self, p: u32, now: SimTime) {
        let cpu = self.procs[p as usize].cpu;
        self.procs[p as usize].state = ProcState::Blocked;
        self.set_running(cpu, now, None);
        self.charge_kernel(cpu, now, self.cfg.costs.syscall_ns);
        self.record(now, cpu, TraceKind::Block { process: p });
    }

    /// Spin-yield: the spin time ran out; drop below every other process of
    /// the CPU (not below 0), boost one other as periodic boost would choose,
    /// and spin on.
    pub(super) fn spin_yield(&mut self, p: u32, now: SimTime) {
        let cpu = self.procs[p as usize].cpu;
        let lowest_other =
            self.cpus[cpu as usize].residents.iter().filter(|&&r| r != p).map(|&r| self.procs[r as usize].level).min();
        let costs = &self.cfg.costs;
        let mut cost = costs.syscall_ns;
        if let Some(lowest) = lowest_other {
            // (Never upwards: our reading of "drops".)
            let level = lowest.saturating_sub(1).min(self.procs[p as usize].level);
            self.procs[p as usize].level = level;
            cost += costs.queue_move_ns;
            self.record(now, cpu, TraceKind::Yield { process: p, level });
        }
        self.procs[p as usize].yielded = true;
        let (walk_cost, _) = self.boost_by_choice(cpu, Some(p), now);
        self.charge_kernel(cpu, now, cost + walk_cost);
    }

    /// Periodic boost's 1 ms kernel activity on CPU `c`: the boosted process
    /// preempts the running one when the scheduler next acts.
    pub(super) fn periodic_boost(&mut self, c: u32, now: SimTime) {
        let cpu = &self.cpus[c as usize];
        let start_with = cpu.running.or(cpu.last_process);
        let (cost, boosted) = self.boost_by_choice(c, start_with, now);
        if boosted.is_some() {
            self.cpus[c as usize].boosted = boosted;
        }
        self.charge_kernel(c, now, cost);
    }

    /// Whether periodic boost's walk can cost or change anything on CPU `c`:
    /// it checks the endpoints of processes inside a receive, and, starting
    /// with the running process, finds that one first unless it is in a receive.
    pub(super) fn periodic_boost_active(&self, c: u32) -> bool {
        if !self.periodic_boost {
            return false;
        }
        let cpu = &self.cpus[c as usize];
        (cpu.running.is_none() && !cpu.ready.is_empty())
            || cpu.residents.iter().any(|&r| self.procs[r as usize].phase == Phase::Recv)
    }

    /// Walk the CPU's processes starting with `start_with` and boost the
    /// chosen one, unless it is `start_with` itself, to the head of the top
    /// level. Returns the kernel time it took and whom it boosted.
    fn boost_by_choice(&mut self, c: u32, start_with: Option<u32>, now: SimTime) -> (u64, Option<u32>) {
        let mut residents = self.cpus[c as usize].residents.clone();
        residents.sort_unstable();
        let candidates: Vec<BoostCandidate> = residents
            .iter()
            .map(|&r| {
                let proc = &self.procs[r as usize];
                BoostCandidate {
                    id: r,
                    runnable: matches!(proc.state, ProcState::Ready | ProcState::Running),
                    in_receive: proc.phase == Phase::Recv,
                    message_ready: proc.phase == Phase::Recv && self.has_all_messages(r, now),
                }
            })
            .collect();
        let choice = periodic_boost_choice(&candidates, start_with);
        let costs = &self.cfg.costs;
        let mut cost = choice.endpoints_checked as u64 * costs.endpoint_check_ns;
        let boosted = choice.chosen.filter(|&q| self.procs[q as usize].state == ProcState::Ready);
        if let Some(q) = boosted {
            cost += costs.queue_move_ns;
            self.move_to_top(q);
            self.record(now, c, TraceKind::Boost { process: q });
        }
        (cost, boosted)
    }

    /// A ready process to the head of the top level, with a fresh quantum
    /// (or, with `boost_keeps_quantum`, what was left of its own).
    fn move_to_top(&mut self, q: u32) {
        let top_quantum = self.cfg.scheduler.quantum_ns(TOP_LEVEL);
        let keep = self.cfg.costs.boost_keeps_quantum;
        let proc = &mut self.procs[q as usize];
        debug_assert_eq!(proc.state, ProcState::Ready);
        proc.level = TOP_LEVEL;
        if !keep {
            proc.quantum_left_ns = top_quantum;
        }
        let ready = &mut self.cpus[proc.cpu as usize].ready;
        ready.remove(q);
        ready.push_head(q, TOP_LEVEL);
    }

    /// A message has landed in `dest`'s endpoint: the NIC's reaction.
    pub(super) fn on_deposit(&mut self, dest: u32, now: SimTime) {
        let cpu = self.procs[dest as usize].cpu;
        // Phase ends and I/O completions the CPU has not been visited for happen first.
        self.account(cpu, now);
        self.complete_io(cpu, now);
        let proc = &self.procs[dest as usize];
        let blocked_in_recv = proc.phase == Phase::Recv && proc.state == ProcState::Blocked;
        let costs = &self.cfg.costs;
        let cost = if blocked_in_recv {
            // Spin-block: interrupt, and the kernel unblocks the receiver.
            costs.interrupt_ns
        } else if self.cfg.scheme.on_arrival() == ArrivalReaction::InterruptAndReschedule
            && proc.state != ProcState::Exited
            && self.nic_views[cpu as usize].seen(now, self.cfg.scheduler.tick_ns, self.cpus[cpu as usize].running)
                != Some(dest)
        {
            // Demand-based coscheduling: interrupt, and move it to the top.
            costs.interrupt_ns + if proc.state == ProcState::Ready { costs.queue_move_ns } else { 0 }
        } else {
            return;
        };
        self.charge_kernel(cpu, now, cost);
        self.record(now, cpu, TraceKind::Interrupt { process: dest });
        if blocked_in_recv {
            self.procs[dest as usize].spin_left_ns = self.spin_ns;
            self.wake(dest, now);
        } else if self.procs[dest as usize].state == ProcState::Ready && !self.cfg.scheme.is_gang() {
            self.move_to_top(dest);
        }
        self.update_cpu(cpu, now);
    }
}
