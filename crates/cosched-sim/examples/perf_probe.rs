//! Quick throughput probe while developing (the real benchmark is `cosched bench sim`).
use cosched_core::StreamSeed;
use cosched_sim::input::{sim_jobs, JobRequest, WorkloadPlan};
use cosched_sim::run::{run, RunOptions};
use cosched_sim::{Mix, Scheme, SimConfig};

fn main() {
    let scheme: Scheme = std::env::args()
        .nth(1)
        .unwrap_or("Local".into())
        .parse()
        .unwrap();
    let cfg = SimConfig {
        scheme,
        nodes: 1024,
        mpl: 4,
        horizon_ns: Some(10_000_000_000),
        ..SimConfig::default()
    };
    let mut rng = StreamSeed(5).stream("probe");
    let mut t = 0.0;
    let requests: Vec<JobRequest> = (0..6000)
        .map(|i| {
            t += rng.exponential(0.01);
            let procs = 1u32 << rng.below(7);
            JobRequest {
                job_number: i,
                submit_s: t,
                run_s: rng.exponential(20.0) + 1.0,
                procs,
            }
        })
        .collect();
    let jobs = sim_jobs(
        &requests,
        &WorkloadPlan {
            mix: Mix { number: 7 },
            runtime_scale: 1.0,
        },
        &cfg,
    );
    #[allow(clippy::disallowed_methods)]
    let start = std::time::Instant::now();
    let r = run(&cfg, jobs, &RunOptions::default(), |_| {}).unwrap();
    let wall = start.elapsed().as_secs_f64();
    let s = &r.summary;
    println!(
        "{}: events {} in {:.2}s = {:.2} M/s; simulated {:.2}s -> {:.0} node-s/s; completed {}; util {:.3} spin {:.3}",
        s.scheme, s.events, wall, s.events as f64 / wall / 1e6, s.span_s, 1024.0 * s.span_s / wall, s.jobs_completed,
        s.utilization, s.cpu_time.spin_ns as f64 / s.cpu_time.total_ns() as f64
    );
    for (name, n) in cosched_sim::engine::EVENT_KIND_NAMES
        .iter()
        .zip(r.event_counts)
    {
        println!("  {name:>14} {n:>12}");
    }
}
