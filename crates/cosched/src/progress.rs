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
        let elapsed_s = self.started.elapsed().as_secs_f64();
        eprintln!(
            "[{}] {:>6.1} s wall: simulated {:.1} s, {}/{} jobs done, {} queued, {:.1} M events, {} \
             (Ctrl-C: stop and keep the finished jobs)",
            self.label,
            elapsed_s,
            p.now.as_secs_f64(),
            p.jobs_completed,
            p.jobs_total,
            p.queued,
            p.events as f64 / 1e6,
            eta(elapsed_s, p.jobs_completed, p.jobs_total)
        );
    }

    pub fn elapsed_s(&self) -> f64 {
        self.started.elapsed().as_secs_f64()
    }
}

/// The wall time left if the remaining jobs go as fast as the finished ones did: rough (jobs differ, and a
/// saturated scheme slows down as its queue grows), so said as such.
fn eta(elapsed_s: f64, done: usize, total: usize) -> String {
    if done == 0 {
        return "no job done yet, no ETA".into();
    }
    let left_s = elapsed_s * (total.saturating_sub(done)) as f64 / done as f64;
    match left_s {
        s if s < 120.0 => format!("about {s:.0} s left"),
        s if s < 7200.0 => format!("about {:.0} min left", s / 60.0),
        s => format!("about {:.1} h left", s / 3600.0),
    }
}

#[cfg(test)]
mod tests {
    use super::eta;

    #[test]
    fn eta_scales_the_time_so_far_by_the_jobs_left() {
        assert_eq!(eta(10.0, 0, 100), "no job done yet, no ETA");
        assert_eq!(eta(10.0, 50, 100), "about 10 s left");
        assert_eq!(eta(60.0, 10, 100), "about 9 min left");
        assert_eq!(eta(3600.0, 1, 3), "about 2.0 h left");
    }
}
