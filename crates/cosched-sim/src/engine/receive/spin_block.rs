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

    /// A receiver blocked in its receive: interrupt, and the kernel unblocks it.
    fn on_deposit<P: Parts>(engine: &mut Engine<'_, P>, dest: u32, now: SimTime) -> bool {
        let proc = &engine.procs[dest as usize];
        if proc.phase != Phase::Recv || proc.state != ProcState::Blocked {
            return false;
        }
        let cpu = proc.cpu;
        engine.charge_kernel(cpu, now, engine.cfg.costs.interrupt_ns);
        engine.record(now, cpu, TraceKind::Interrupt { process: dest });
        engine.procs[dest as usize].spin_left_ns = engine.spin_ns;
        engine.wake(dest, now);
        true
    }
}
