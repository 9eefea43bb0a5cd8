//! Gang scheduling's node side: a CPU runs only the process of the current
//! row's cell on it (set by the gang quantum), with no scheduler of its own.

use super::NodeScheduler;
use crate::engine::parts::Parts;
use crate::engine::{Engine, ProcState};
use cosched_core::SimTime;
use cosched_policy::Mode;

pub(crate) struct GangCell;

impl NodeScheduler for GangCell {
    const MODE: Mode = Mode::Gang;
    const CHARGES_DISPATCH_SWITCH: bool = false;

    fn on_visit<P: Parts>(_: &mut Engine<'_, P>, _: u32, _: SimTime) {}

    fn on_visit_due_at<P: Parts>(_: &Engine<'_, P>, _: u32, _: SimTime) -> SimTime {
        SimTime::MAX
    }

    fn acts_at<P: Parts>(_: &Engine<'_, P>, _: u32, _: SimTime) -> SimTime {
        SimTime::MAX
    }

    fn tick<P: Parts>(_: &mut Engine<'_, P>, _: u32, _: SimTime) {}

    fn tick_passed<P: Parts>(_: &mut Engine<'_, P>, _: u32, _: SimTime) {}

    fn has_ready<P: Parts>(engine: &Engine<'_, P>, c: u32) -> bool {
        ready_cell(engine, c).is_some()
    }

    fn pick_next<P: Parts>(engine: &mut Engine<'_, P>, c: u32) -> Option<u32> {
        ready_cell(engine, c)
    }

    fn make_ready<P: Parts>(_: &mut Engine<'_, P>, _: u32) {}

    fn favour<P: Parts>(_: &mut Engine<'_, P>, _: u32) {}

    /// The cell's process is the running one: a wake matters only when
    /// something else makes the engine look (the gang quantum).
    fn wake_noticed_at<P: Parts>(_: &Engine<'_, P>, _: u32, _: SimTime) -> SimTime {
        SimTime::MAX
    }

    fn idle_while_blocked<P: Parts>(_: &Engine<'_, P>, _: u32) -> bool {
        true
    }

    fn preempts_at<P: Parts>(_: &Engine<'_, P>, _: u32, _: u32, _: SimTime, _: SimTime) -> SimTime {
        SimTime::MAX
    }
}

/// The current row's process on CPU `c`, if it is ready to run.
fn ready_cell<P: Parts>(engine: &Engine<'_, P>, c: u32) -> Option<u32> {
    engine.cpus[c as usize].gang_cell.filter(|&p| engine.procs[p as usize].state == ProcState::Ready)
}
