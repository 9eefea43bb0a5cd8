//! One run of the engine: its inputs, and the engine built with the parts
//! its scheme names.

use super::fast::FastSettings;
use super::parts::Parts;
use super::{Engine, EngineOutcome, Progress, SimJob};
use crate::config::SimConfig;
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
    pub progress: &'p mut dyn FnMut(&Progress),
}

impl EngineRun<'_, '_> {
    /// Build the engine with the parts of `cfg.scheme` and run it.
    pub(crate) fn run(self) -> EngineOutcome {
        self.cfg.scheme.run(self)
    }

    /// Build the engine with the parts `P` and run it.
    pub(crate) fn with_parts<P: Parts>(self) -> EngineOutcome {
        let mut engine = Engine::<P>::new(self.cfg, self.jobs, self.bounded_slowdown_threshold_s, self.record_trace);
        if self.visit_every_tick {
            engine = engine.with_visits_every_tick();
        }
        if let Some(settings) = self.fast {
            engine = engine.with_fast_mode(settings);
        }
        engine.run(self.progress_every_events, self.stop, self.progress)
    }
}
