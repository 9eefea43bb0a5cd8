//! Gang scheduling's node side: a CPU runs only the process of the current
//! row's cell on it (set by the gang quantum), with no scheduler of its own.

use super::NodeScheduler;
use crate::config::SimConfig;
use crate::engine::records::ProcState;
use crate::engine::view::Host;
use cosched_core::SimTime;
use cosched_policy::Mode;

pub(crate) struct GangCell;

/// A CPU under gang scheduling.
#[derive(Default)]
pub(crate) struct GangCpu {
    /// The process of the current row's cell on this CPU.
    cell: Option<u32>,
}

impl NodeScheduler for GangCell {
    type Cpu = GangCpu;
    type Proc = ();
    const MODE: Mode = Mode::Gang;
    const CHARGES_DISPATCH_SWITCH: bool = false;

    fn new_proc(_: &SimConfig) {}

    fn admit<H: Host<NodeCpu = Self::Cpu, NodeProc = Self::Proc>>(_: &mut H, _: u32, _: u32) {}

    fn charge(_: &mut GangCpu, _: &mut (), _: u64) {}

    /// The cell stays the process's: the CPU idles until it wakes.
    fn blocked(_: &mut GangCpu, _: &mut (), _: u32) {}

    fn dispatched(_: &mut GangCpu, _: u32) {}

    fn preempt_for(_: &mut GangCpu, _: u32) {}

    fn yield_below_others<H: Host<NodeCpu = Self::Cpu, NodeProc = Self::Proc>>(
        _: &mut H,
        _: u32,
        _: u32,
    ) -> Option<u8> {
        unreachable!("spin-yield runs under the MLFQ only")
    }

    fn cell(cpu: &GangCpu) -> Option<u32> {
        cpu.cell
    }

    fn set_cell(cpu: &mut GangCpu, cell: Option<u32>) {
        cpu.cell = cell;
    }

    fn exited(cpu: &mut GangCpu, p: u32) {
        if cpu.cell == Some(p) {
            cpu.cell = None;
        }
    }

    fn on_visit<H: Host<NodeCpu = Self::Cpu, NodeProc = Self::Proc>>(_: &mut H, _: u32, _: SimTime) {}

    fn on_visit_due_at<H: Host<NodeCpu = Self::Cpu, NodeProc = Self::Proc>>(_: &H, _: u32, _: SimTime) -> SimTime {
        SimTime::MAX
    }

    fn acts_at<H: Host<NodeCpu = Self::Cpu, NodeProc = Self::Proc>>(_: &H, _: u32, _: SimTime) -> SimTime {
        SimTime::MAX
    }

    fn tick<H: Host<NodeCpu = Self::Cpu, NodeProc = Self::Proc>>(_: &mut H, _: u32, _: SimTime) {}

    fn tick_passed<H: Host<NodeCpu = Self::Cpu, NodeProc = Self::Proc>>(_: &mut H, _: u32, _: SimTime) {}

    fn has_ready<H: Host<NodeCpu = Self::Cpu, NodeProc = Self::Proc>>(engine: &H, c: u32) -> bool {
        ready_cell(engine, c).is_some()
    }

    fn pick_next<H: Host<NodeCpu = Self::Cpu, NodeProc = Self::Proc>>(engine: &mut H, c: u32) -> Option<u32> {
        ready_cell(engine, c)
    }

    fn make_ready<H: Host<NodeCpu = Self::Cpu, NodeProc = Self::Proc>>(_: &mut H, _: u32) {}

    fn favour<H: Host<NodeCpu = Self::Cpu, NodeProc = Self::Proc>>(_: &mut H, _: u32) {}

    /// The cell's process is the running one: a wake matters only when
    /// something else makes the engine look (the gang quantum).
    fn wake_noticed_at<H: Host<NodeCpu = Self::Cpu, NodeProc = Self::Proc>>(_: &H, _: u32, _: SimTime) -> SimTime {
        SimTime::MAX
    }

    fn idle_while_blocked<H: Host<NodeCpu = Self::Cpu, NodeProc = Self::Proc>>(_: &H, _: u32) -> bool {
        true
    }

    fn preempts_at<H: Host<NodeCpu = Self::Cpu, NodeProc = Self::Proc>>(
        _: &H,
        _: u32,
        _: u32,
        _: SimTime,
        _: SimTime,
    ) -> SimTime {
        SimTime::MAX
    }
}

/// The current row's process on CPU `c`, if it is ready to run.
fn ready_cell<H: Host<NodeCpu = GangCpu>>(engine: &H, c: u32) -> Option<u32> {
    engine.cpu(c).sched.cell.filter(|&p| engine.proc(p).state == ProcState::Ready)
}
