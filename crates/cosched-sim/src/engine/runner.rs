//! One run of the engine: its inputs, and the engine built with the parts
//! its scheme names.

use super::arrival::MessageArrival;
use super::fast::FastSettings;
use super::node_scheduler::eevdf::GangEevdf;
use super::node_scheduler::os::{os_schedulers, OsScheduler};
use super::node_scheduler::{self, GangCell, NodeScheduler};
use super::parts::Parts;
use super::receive::ReceiveWait;
use super::{Engine, EngineOutcome, Progress, SimJob};
use crate::config::SimConfig;
use crate::scheme::NodeKind;
use cosched_policy::coscheduler::external::SharedChooser;
use cosched_policy::Mode;
use std::sync::atomic::AtomicBool;

/// Everything one run of the engine needs besides its parts.
pub(crate) struct EngineRun<'a, 'p> {
    pub cfg: &'a SimConfig,
    pub jobs: Vec<SimJob>,
    pub bounded_slowdown_threshold_s: f64,
    pub record_trace: bool,
    pub visit_every_tick: bool,
    pub progress_every_events: u64,
    pub stop: Option<&'a AtomicBool>,
    pub fast: Option<FastSettings>,
    pub record_fast_windows: bool,
    pub plan_model_only: bool,
    pub event_log_from_ns: Option<u64>,
    pub chooser: Option<SharedChooser>,
    pub progress: &'p mut dyn FnMut(&Progress),
}

impl EngineRun<'_, '_> {
    /// Build the engine with the parts `P` and run it.
    pub(crate) fn with_parts<P: Parts>(self) -> EngineOutcome {
        let mut engine = Engine::<P>::new(self.cfg, self.jobs, self.bounded_slowdown_threshold_s, self.record_trace);
        if self.visit_every_tick {
            engine = engine.with_visits_every_tick();
        }
        if self.plan_model_only {
            engine = engine.with_plan_model_only();
        }
        if let Some(from_ns) = self.event_log_from_ns {
            engine = engine.with_event_log(from_ns);
        }
        if let Some(chooser) = self.chooser {
            engine = engine.with_chooser(chooser);
        }
        if let Some(settings) = self.fast {
            engine = engine.with_fast_mode(settings, self.record_fast_windows);
        }
        engine.run(self.progress_every_events, self.stop, self.progress)
    }
}

/// What a scheme names as its nodes' scheduler: the gang cell, or [`Os`].
pub(crate) trait NodeChoice: 'static {
    const MODE: Mode;
    const NODE: NodeKind;
    /// Build the engine with this node scheduler and the other parts, and run it.
    fn run<W: ReceiveWait, A: MessageArrival>(run: EngineRun<'_, '_>) -> EngineOutcome;
    /// Copy into `to` the values of the machine model, among those only some schemes read
    /// ([`crate::config::SimConfig::scheme_specific_values_at_default`]), that this part reads.
    fn copy_what_it_reads(from: &SimConfig, to: &mut SimConfig);
}

/// The node's own OS scheduler, the one the run names (`SimConfig::node_scheduler`).
pub(crate) struct Os;

/// The engine built with each OS scheduler `os.rs` lists.
macro_rules! os_scheduler_runs {
    ($($file:ident :: $ty:ident = $name:literal,)*) => {
        impl NodeChoice for Os {
            const MODE: Mode = Mode::Local;
            const NODE: NodeKind = NodeKind::OsScheduler;
            fn run<W: ReceiveWait, A: MessageArrival>(run: EngineRun<'_, '_>) -> EngineOutcome {
                match run.cfg.node_scheduler {
                    $(OsScheduler::$ty => run.with_parts::<(node_scheduler::$file::$ty, W, A)>(),)*
                }
            }
            /// A short I/O keeping its CPU, and what the run's OS scheduler reads.
            fn copy_what_it_reads(from: &SimConfig, to: &mut SimConfig) {
                to.costs.io_keeps_cpu_below_ns = from.costs.io_keeps_cpu_below_ns;
                match from.node_scheduler {
                    $(OsScheduler::$ty => copy_node_reads::<node_scheduler::$file::$ty>(from, to),)*
                }
            }
        }
    };
}

os_schedulers!(os_scheduler_runs);

impl NodeChoice for GangCell {
    const MODE: Mode = <GangCell as NodeScheduler>::MODE;
    const NODE: NodeKind = NodeKind::GangCell;
    fn run<W: ReceiveWait, A: MessageArrival>(run: EngineRun<'_, '_>) -> EngineOutcome {
        run.with_parts::<(GangCell, W, A)>()
    }
    fn copy_what_it_reads(from: &SimConfig, to: &mut SimConfig) {
        copy_gang_costs(from, to);
        copy_node_reads::<GangCell>(from, to);
    }
}

/// What node scheduler `S` reads: the context switch where it charges one, and its own values.
fn copy_node_reads<S: NodeScheduler>(from: &SimConfig, to: &mut SimConfig) {
    if S::CHARGES_DISPATCH_SWITCH {
        to.costs.context_switch_ns = from.costs.context_switch_ns;
    }
    S::copy_what_it_reads(from, to);
}

/// The gang matrix's quantum and switch, and when a job placed in the running row starts.
fn copy_gang_costs(from: &SimConfig, to: &mut SimConfig) {
    to.costs.gang_quantum_ns = from.costs.gang_quantum_ns;
    to.costs.gang_switch_ns = from.costs.gang_switch_ns;
    to.costs.gang_switch_every_quantum = from.costs.gang_switch_every_quantum;
    to.costs.gang_start_waits_for_quantum = from.costs.gang_start_waits_for_quantum;
}

/// Gang slots over the kernel's EEVDF (`eevdf::GangEevdf`): the run must name `--node-scheduler eevdf`
/// (`SimConfig::validate`).
pub(crate) struct GangSlotsOverEevdf;

impl NodeChoice for GangSlotsOverEevdf {
    const MODE: Mode = <GangEevdf as NodeScheduler>::MODE;
    const NODE: NodeKind = NodeKind::GangSlotsOverEevdf;
    fn run<W: ReceiveWait, A: MessageArrival>(run: EngineRun<'_, '_>) -> EngineOutcome {
        run.with_parts::<(GangEevdf, W, A)>()
    }
    fn copy_what_it_reads(from: &SimConfig, to: &mut SimConfig) {
        copy_gang_costs(from, to);
        copy_node_reads::<GangEevdf>(from, to);
    }
}
