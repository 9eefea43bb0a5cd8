//! Spin-block: spin for the spin time, then block with a system call; the
//! NIC interrupts when a message lands and the kernel wakes the receiver,
//! which spins again for the spin time.

use super::ReceiveWait;
use crate::engine::parts::Parts;
use crate::engine::{Engine, Phase, ProcState};
use crate::trace::TraceKind;
use cosched_core::SimTime;

pub(crate) struct SpinBlock;

impl ReceiveWait for SpinBlock {
    const REACTS_TO_DEPOSITS: bool = true;

    fn spin_deadline<P: Parts>(engine: &Engine<'_, P>, p: u32, spinning_from: SimTime) -> Option<SimTime> {
        Some(spinning_from + engine.procs[p as usize].spin_left_ns)
    }

    fn wait<P: Parts>(engine: &mut Engine<'_, P>, p: u32, now: SimTime) {
        if engine.procs[p as usize].spin_left_ns == 0 {
            engine.block_in_recv(p, now);
        }
    }

    /// Only a receiver blocked in its receive, which no charge changes (a
    /// blocked process does not run, and a running one blocks in its
    /// receive only at a visit).
    fn may_react<P: Parts>(engine: &Engine<'_, P>, dest: u32) -> bool {
        let proc = &engine.procs[dest as usize];
        matches!(proc.phase, Phase::Recv) && proc.state == ProcState::Blocked
    }

    /// A receiver blocks only once it has spun what is left of its spin
    /// (the whole spin time, for one not in its receive yet): no sooner than
    /// that from its CPU's last charge if it runs, from now if it waits.
    fn may_react_at<P: Parts>(engine: &Engine<'_, P>, dest: u32, at: SimTime, now: SimTime) -> bool {
        let proc = &engine.procs[dest as usize];
        let earliest_block = match (proc.phase, proc.state) {
            (Phase::Recv, ProcState::Blocked) => return true,
            (Phase::Recv, ProcState::Running) => engine.cpus[proc.cpu as usize].accounted_until + proc.spin_left_ns,
            (Phase::Recv, _) => now + proc.spin_left_ns,
            _ => now + engine.spin_ns,
        };
        at >= earliest_block
    }

    /// A receiver blocked in its receive: interrupt, and the kernel unblocks it.
    fn on_deposit<P: Parts>(engine: &mut Engine<'_, P>, dest: u32, now: SimTime) -> bool {
        if !Self::may_react(engine, dest) {
            return false;
        }
        let cpu = engine.procs[dest as usize].cpu;
        engine.charge_kernel(cpu, now, engine.cfg.costs.interrupt_ns);
        engine.record(now, cpu, TraceKind::Interrupt { process: dest });
        engine.procs[dest as usize].spin_left_ns = engine.spin_ns;
        engine.wake(dest, now);
        true
    }
}
