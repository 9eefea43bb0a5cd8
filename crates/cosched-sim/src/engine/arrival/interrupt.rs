//! Demand-based coscheduling: when a message lands for a process the NIC
//! does not believe runs, the NIC interrupts and the node scheduler favours
//! the receiver (to the head of the top level).

use super::MessageArrival;
use crate::config::SimConfig;
use crate::engine::records::ProcState;
use crate::engine::view::Host;
use crate::trace::TraceKind;
use cosched_core::{Period, SimTime};

pub(crate) struct Interrupt;

impl MessageArrival for Interrupt {
    type Cpu = NicView;

    fn new(_: &SimConfig) -> Interrupt {
        Interrupt
    }

    /// The interrupt and the queue move of the process it favours.
    fn copy_what_it_reads(from: &SimConfig, to: &mut SimConfig) {
        to.costs.interrupt_ns = from.costs.interrupt_ns;
        to.costs.queue_move_ns = from.costs.queue_move_ns;
    }

    const REACTS_TO_DEPOSITS: bool = true;

    fn before_running_changes<H: Host<ArrivalCpu = Self::Cpu, Arrival = Self>>(engine: &mut H, c: u32, at: SimTime) {
        let tick = engine.clock().tick;
        let cpu = engine.cpu_mut(c);
        cpu.arrival.before_change(at, tick, cpu.running);
    }

    fn on_deposit<H: Host<ArrivalCpu = Self::Cpu, Arrival = Self>>(engine: &mut H, dest: u32, now: SimTime) -> bool {
        let proc = &engine.proc(dest);
        let cpu = proc.cpu;
        let cpu_record = &engine.cpu(cpu);
        let seen_running = cpu_record.arrival.seen(now, engine.clock().tick, cpu_record.running);
        if proc.state == ProcState::Exited || seen_running == Some(dest) {
            return false;
        }
        let costs = &engine.cfg().costs;
        let ready = proc.state == ProcState::Ready;
        let cost_ns = costs.interrupt_ns + if ready { costs.queue_move_ns } else { 0 };
        engine.charge_kernel(cpu, now, cost_ns);
        engine.record(now, cpu, TraceKind::Interrupt { process: dest });
        if ready {
            engine.favour(dest);
        }
        true
    }

    fn before_tick<H: Host<ArrivalCpu = Self::Cpu, Arrival = Self>>(_: &mut H, _: u32, _: SimTime) {}

    fn after_tick<H: Host<ArrivalCpu = Self::Cpu, Arrival = Self>>(_: &mut H, _: u32, _: SimTime) {}

    fn acts_at<H: Host<ArrivalCpu = Self::Cpu, Arrival = Self>>(_: &H, _: u32, _: SimTime) -> SimTime {
        SimTime::MAX
    }
}

/// What the NIC believes its CPU runs: the process running at the last tick.
/// Kept lazily: only the value at the tick before the latest change is stored.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct NicView {
    changed_at: SimTime,
    view: Option<u32>,
}

impl NicView {
    /// `running` is about to change at `at` (changes come in time order).
    fn before_change(&mut self, at: SimTime, tick: Period, old: Option<u32>) {
        debug_assert!(at >= self.changed_at, "running changes out of order");
        if self.changed_at <= tick.floor(at) {
            self.view = old;
        }
        self.changed_at = at;
    }

    /// The NIC's belief at `now`, given what runs now. A change at a tick's
    /// very instant is already seen at that tick.
    fn seen(&self, now: SimTime, tick: Period, current: Option<u32>) -> Option<u32> {
        if self.changed_at <= tick.floor(now) {
            current
        } else {
            self.view
        }
    }
}
