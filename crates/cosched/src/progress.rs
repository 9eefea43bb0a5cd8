//! Progress lines on standard error for long runs, at most one every few
//! seconds per run. The simulator itself never reads the clock: it calls back
//! every so many events, and only this glue looks at wall time.
#![allow(clippy::disallowed_methods)] // wall-clock time is what progress is about

use cosched_sim::Progress;
use std::time::{Duration, Instant};

pub struct ProgressLine {
    label: String,
    started: Instant,
    last_print: Instant,
    every: Duration,
    enabled: bool,
}

impl ProgressLine {
    pub fn new(label: &str, enabled: bool) -> ProgressLine {
        let now = Instant::now();
        ProgressLine { label: label.to_string(), started: now, last_print: now, every: Duration::from_secs(3), enabled }
    }

    pub fn update(&mut self, p: &Progress) {
        if !self.enabled || self.last_print.elapsed() < self.every {
            return;
        }
        self.last_print = Instant::now();
        eprintln!(
            "[{}] {:>6.1} s wall: simulated {:.1} s, {}/{} jobs done, {} queued, {:.1} M events",
            self.label,
            self.started.elapsed().as_secs_f64(),
            p.now.as_secs_f64(),
            p.jobs_completed,
            p.jobs_total,
            p.queued,
            p.events as f64 / 1e6
        );
    }

    pub fn elapsed_s(&self) -> f64 {
        self.started.elapsed().as_secs_f64()
    }
}
