//! Spin-block: spin for the spin time, then block with a system call; the
//! NIC interrupts when a message lands and the kernel wakes the receiver,
//! which spins again for the spin time.

use super::{spin_ns, ReceiveWait};
use crate::config::SimConfig;
use crate::engine::records::{Phase, ProcState};
use crate::engine::view::Host;
use crate::trace::TraceKind;
use cosched_core::SimTime;

pub(crate) struct SpinBlock {
    /// The spin time before blocking.
    spin_ns: u64,
}

/// A process's spin in its receive.
#[derive(Default)]
pub(crate) struct SpinLeft {
    /// Spinning left before blocking.
    spin_left_ns: u64,
}

impl ReceiveWait for SpinBlock {
    type Proc = SpinLeft;
    const REACTS_TO_DEPOSITS: bool = true;

    fn new(cfg: &SimConfig) -> SpinBlock {
        SpinBlock { spin_ns: spin_ns(cfg) }
    }

    /// The spin, and the block and wake.
    fn copy_what_it_reads(from: &SimConfig, to: &mut SimConfig) {
        to.costs.spin_factor = from.costs.spin_factor;
        copy_block_and_wake_reads(from, to);
    }

    fn start_receive(&self, proc: &mut SpinLeft) {
        proc.spin_left_ns = self.spin_ns;
    }

    fn charge_spin(proc: &mut SpinLeft, ran_ns: u64) {
        proc.spin_left_ns = proc.spin_left_ns.saturating_sub(ran_ns);
    }

    fn spin_deadline<H: Host<WaitProc = Self::Proc, Wait = Self>>(
        engine: &H,
        p: u32,
        spinning_from: SimTime,
    ) -> Option<SimTime> {
        Some(spinning_from + engine.proc(p).wait.spin_left_ns)
    }

    fn wait<H: Host<WaitProc = Self::Proc, Wait = Self>>(engine: &mut H, p: u32, now: SimTime) {
        if engine.proc(p).wait.spin_left_ns == 0 {
            engine.block_in_recv(p, now);
        }
    }

    fn may_react<H: Host<WaitProc = Self::Proc, Wait = Self>>(engine: &H, dest: u32) -> bool {
        blocked_in_receive(engine, dest)
    }

    /// A receiver blocks only once it has spun what is left of its spin
    /// (the whole spin time, for one not in its receive yet): no sooner than
    /// that from its CPU's last charge if it runs, from now if it waits.
    fn may_react_at<H: Host<WaitProc = Self::Proc, Wait = Self>>(
        engine: &H,
        dest: u32,
        at: SimTime,
        now: SimTime,
    ) -> bool {
        let proc = &engine.proc(dest);
        let earliest_block = match (proc.phase, proc.state) {
            (Phase::Recv, ProcState::Blocked) => return true,
            (Phase::Recv, ProcState::Running) => engine.cpu(proc.cpu).accounted_until + proc.wait.spin_left_ns,
            (Phase::Recv, _) => now + proc.wait.spin_left_ns,
            _ => now + engine.wait().spin_ns,
        };
        at >= earliest_block
    }

    /// A receiver blocked in its receive: interrupt, and the kernel unblocks
    /// it to spin again.
    fn on_deposit<H: Host<WaitProc = Self::Proc, Wait = Self>>(engine: &mut H, dest: u32, now: SimTime) -> bool {
        if !blocked_in_receive(engine, dest) {
            return false;
        }
        engine.proc_mut(dest).wait.spin_left_ns = engine.wait().spin_ns;
        interrupt_and_wake(engine, dest, now);
        true
    }
}

/// Whether `dest` is blocked in its receive, which no charge changes (a
/// blocked process does not run, and a running one blocks in its receive
/// only at a visit).
pub(crate) fn blocked_in_receive<H: Host>(engine: &H, dest: u32) -> bool {
    let proc = &engine.proc(dest);
    matches!(proc.phase, Phase::Recv) && proc.state == ProcState::Blocked
}

/// What a block in a receive (`Host::block_in_recv`) and [`interrupt_and_wake`] read: the system call and the
/// interrupt.
pub(crate) fn copy_block_and_wake_reads(from: &SimConfig, to: &mut SimConfig) {
    to.costs.syscall_ns = from.costs.syscall_ns;
    to.costs.interrupt_ns = from.costs.interrupt_ns;
}

/// A message landed for `dest`, blocked in its receive: the NIC interrupts
/// and the kernel unblocks it.
pub(crate) fn interrupt_and_wake<H: Host>(engine: &mut H, dest: u32, now: SimTime) {
    let cpu = engine.proc(dest).cpu;
    engine.charge_kernel(cpu, now, engine.cfg().costs.interrupt_ns);
    engine.record(now, cpu, TraceKind::Interrupt { process: dest });
    engine.wake(dest, now);
}
