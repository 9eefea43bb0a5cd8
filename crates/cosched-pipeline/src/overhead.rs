//! The per-buffer cost of the framework itself: empty stages, so that all the
//! time goes to handing buffers on. The counterpart of oneTBB's
//! `parallel_pipeline` with empty filters (bench/tbb).

use std::time::Duration;

use crate::{Pipeline, Thread, WaitPolicy};

/// How the empty stages are put on threads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mapping {
    /// The default: one thread per stage.
    ThreadPerStage,
    /// Consecutive stages shared out over this many threads.
    Threads(usize),
}

/// One timed run: `items` buffers through `stages` empty stages.
pub fn time_run(
    stages: usize,
    pool: usize,
    items: u64,
    mapping: Mapping,
    wait: WaitPolicy,
) -> Result<Duration, String> {
    if stages < 2 {
        return Err(format!("{stages} stages: need at least 2 (a source and a sink)"));
    }
    let threads = match mapping {
        Mapping::ThreadPerStage => stages,
        Mapping::Threads(n) => n.clamp(1, stages),
    };
    let mut pipeline = Pipeline::new(pool, |_| [0u64; 8]).rounds(items).wait_policy(wait);
    let mut stage = 0;
    for thread in 0..threads {
        // Spread the stages as evenly as possible, earlier threads taking the extra ones.
        let count = stages / threads + usize::from(thread < stages % threads);
        let mut group: Thread<[u64; 8]> = Thread::new(format!("t{thread}"));
        for _ in 0..count {
            let is_sink = stage + 1 == stages;
            group = group.stage_fn(format!("s{stage}"), move |buf, _| {
                if is_sink {
                    buf.data[0] += 1;
                }
                Ok(())
            });
            stage += 1;
        }
        pipeline = pipeline.thread(group);
    }
    #[allow(clippy::disallowed_methods)] // timing a benchmark run is the point
    let start = std::time::Instant::now();
    let report = pipeline.run().map_err(|e| e.to_string())?;
    let elapsed = start.elapsed();
    let counted: u64 = report.buffers.iter().map(|b| b[0]).sum();
    if counted != items {
        return Err(format!("the sink counted {counted} buffers, expected {items}"));
    }
    Ok(elapsed)
}
