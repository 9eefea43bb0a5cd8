//! Fast mode: it skips, it repeats byte for byte, its books balance, and
//! under gang scheduling (where a job's rate is set by the rows) it lands
//! within a few per cent of the exact engine.

mod common;

use common::{config, job, ns, MS};
use cosched_sim::engine::fast::FastSettings;
use cosched_sim::metrics::Breakdown;
use cosched_sim::run::{run, RunOptions, RunResult};
use cosched_sim::{Scheme, SimConfig, SimJob};

/// Long jobs (thousands of iterations) arriving over a minute on 8 nodes.
fn long_jobs() -> Vec<SimJob> {
    let spec = [(0, 4, 300), (2_000, 2, 500), (5_000, 8, 200), (9_000, 1, 900), (20_000, 3, 400), (41_000, 2, 600)];
    spec.iter()
        .enumerate()
        .map(|(i, &(arrival_ms, tasks, compute_us))| {
            let mut j = job(i as u64 + 1, arrival_ms * MS, tasks, compute_us * 1_000, 100_000, 8_000);
            j.label = "long".into();
            j
        })
        .collect()
}

fn simulate(cfg: &SimConfig, fast: Option<FastSettings>) -> RunResult {
    let options = RunOptions { fast, ..RunOptions::default() };
    run(cfg, long_jobs(), &options, |_| {}).expect("valid scenario")
}

fn scheme(name: &str) -> Scheme {
    name.parse().unwrap()
}

#[test]
fn fast_mode_skips_most_of_a_long_run_and_its_cpu_time_adds_up() {
    for name in ["GS", "GS-cosched", "Local", "PB-SB"] {
        let cfg = SimConfig { skew: 0.2, ..config(scheme(name), 8, 3) };
        let result = simulate(&cfg, Some(FastSettings::default()));
        assert_eq!(result.summary.jobs_completed, 6, "{name}: every job finishes");
        let report = result.summary.fast_mode.expect("a fast run says so");
        assert!(report.jumps > 0, "{name}: fast mode jumped");
        let span_ns = ns(result.summary.span_s);
        assert!(report.skipped_ns > span_ns / 2, "{name}: skipped {} of {span_ns} ns", report.skipped_ns);
        if !name.starts_with("GS") {
            // Windows keep their length (gang windows are whole cycles of the rows).
            let window_ns = FastSettings::default().for_run(&cfg).window_ns;
            assert_eq!(report.window_ns, report.windows * window_ns, "{name}: a window grew");
        }
        for (cpu, time) in result.per_cpu_time.iter().enumerate() {
            assert_eq!(time.total_ns(), span_ns, "{name}: CPU {cpu}'s time adds up to the span");
        }
        for record in &result.jobs {
            assert!(record.start_s >= record.arrival_s && record.finish_s > record.start_s, "{name}: {record:?}");
        }
    }
}

#[test]
fn fast_mode_repeats_byte_for_byte() {
    let cfg = SimConfig { skew: 0.2, ..config(scheme("SB"), 8, 3) };
    let first = simulate(&cfg, Some(FastSettings::default()));
    let second = simulate(&cfg, Some(FastSettings::default()));
    assert_eq!(serde_json::to_string(&first.summary).unwrap(), serde_json::to_string(&second.summary).unwrap());
    assert_eq!(format!("{:?}", first.jobs), format!("{:?}", second.jobs));
}

#[test]
fn an_exact_run_says_nothing_of_fast_mode() {
    let result = simulate(&config(scheme("GS"), 8, 3), None);
    assert!(result.summary.fast_mode.is_none());
    assert!(!serde_json::to_string(&result.summary).unwrap().contains("fast_mode"));
}

#[test]
fn under_gang_scheduling_fast_mode_is_within_a_few_per_cent_of_exact() {
    // GS measures per row (engine/fast/gang_rows.rs); without a gang switch
    // every quantum, and under GS-cosched, a CPU's measure is kept whole.
    let gs = SimConfig { skew: 0.2, ..config(scheme("GS"), 8, 3) };
    let mut gs_no_lone_switch = gs.clone();
    gs_no_lone_switch.costs.gang_switch_every_quantum = false;
    let gs_cosched = SimConfig { skew: 0.2, ..config(scheme("GS-cosched"), 8, 3) };
    for (name, cfg) in [("GS", gs), ("GS, no lone switch", gs_no_lone_switch), ("GS-cosched", gs_cosched)] {
        assert_fast_near_exact(name, &simulate(&cfg, None), &simulate(&cfg, Some(FastSettings::default())));
    }
}

fn assert_fast_near_exact(name: &str, exact: &RunResult, fast: &RunResult) {
    for (e, f) in exact.jobs.iter().zip(&fast.jobs) {
        assert_eq!(e.job_number, f.job_number);
        let error = f.response_s / e.response_s - 1.0;
        assert!(error.abs() < 0.05, "{name}, job {}: exact {} s, fast {} s", e.job_number, e.response_s, f.response_s);
    }
    let utilization_error = fast.summary.delivered_utilization / exact.summary.delivered_utilization - 1.0;
    assert!(utilization_error.abs() < 0.05, "{name}: delivered utilization off by {utilization_error}");
    // The CPUs' time over the jumps, from their measured shares.
    let share = |r: &RunResult, part: fn(&Breakdown) -> u64| {
        r.per_cpu_time.iter().map(part).sum::<u64>() as f64
            / r.per_cpu_time.iter().map(Breakdown::total_ns).sum::<u64>() as f64
    };
    for (part_name, part) in
        [("useful", (|t| t.useful_ns) as fn(&Breakdown) -> u64), ("spin", |t| t.spin_ns), ("idle", |t| t.idle_ns)]
    {
        let (e, f) = (share(exact, part), share(fast, part));
        assert!((f - e).abs() < 0.01, "{name}: {part_name} share: exact {e:.4}, fast {f:.4}");
    }
}

#[test]
fn under_gs_only_a_job_that_starts_is_measured() {
    // Measures are kept per matrix row: an end, or a change in the number of
    // rows, leaves every other job's measure standing.
    let cfg = SimConfig { skew: 0.2, ..config(scheme("GS"), 8, 3) };
    let fast = simulate(&cfg, Some(FastSettings::default()));
    let report = fast.summary.fast_mode.expect("a fast run says so");
    assert!(report.windows <= 6, "{} windows for 6 jobs", report.windows);
}

/// Jobs of two kinds, twelve each, arriving one every 2 s on 8 nodes: each runs 4-10 s of its own quanta.
fn jobs_of_two_kinds() -> Vec<SimJob> {
    (0..24u64)
        .map(|i| match i % 2 {
            0 => job(i + 1, i * 2_000 * MS, 2, 300_000, 100_000, 10_000 + 400 * i as u32),
            _ => job(i + 1, i * 2_000 * MS, 4, 500_000, 100_000, 8_000 + 300 * i as u32),
        })
        .collect()
}

#[test]
fn under_gs_a_job_may_take_its_kinds_rate_and_lands_near_exact() {
    let reuse = FastSettings { reuse_kind_rates: true, ..FastSettings::default() };
    let run_with = |cfg: &SimConfig, fast| {
        let options = RunOptions { fast, ..RunOptions::default() };
        run(cfg, jobs_of_two_kinds(), &options, |_| {}).expect("valid scenario")
    };
    let cfg = SimConfig { skew: 0.2, ..config(scheme("GS"), 8, 3) };
    let (exact, plain, reused) =
        (run_with(&cfg, None), run_with(&cfg, Some(FastSettings::default())), run_with(&cfg, Some(reuse)));
    let report = reused.summary.fast_mode.expect("a fast run says so");
    // Eight of each kind measured, then the other four of each take their kind's measure (the 16th start of a kind
    // would be measured again).
    assert_eq!(report.reused_kind_rates, 8, "{report:?}");
    assert!(report.skipped_ns > ns(reused.summary.span_s) / 2, "skipped {} ns", report.skipped_ns);
    let plain_windows = plain.summary.fast_mode.expect("a fast run").windows;
    assert!(report.windows < plain_windows, "{} windows against {plain_windows}", report.windows);
    assert_fast_near_exact("GS, rates reused by kind", &exact, &reused);
    let again = run_with(&cfg, Some(reuse));
    assert_eq!(serde_json::to_string(&reused.summary).unwrap(), serde_json::to_string(&again.summary).unwrap());
    assert_eq!(format!("{:?}", reused.jobs), format!("{:?}", again.jobs));
    // Where a job shares its CPUs with other jobs' processes, or a node's CPUs with its own, no kind is reused.
    let two_cpus = SimConfig { nodes: 4, cpus_per_node: 2, ..cfg.clone() };
    let sb = SimConfig { skew: 0.2, ..config(scheme("SB"), 8, 3) };
    for other in [two_cpus, sb] {
        let report = run_with(&other, Some(reuse)).summary.fast_mode.expect("a fast run says so");
        assert_eq!(report.reused_kind_rates, 0, "{}", other.scheme.name());
    }
}

#[test]
fn a_jump_never_passes_the_horizon() {
    let cfg = SimConfig { horizon_ns: Some(30_000 * MS), ..config(scheme("GS"), 8, 3) };
    let result = simulate(&cfg, Some(FastSettings::default()));
    assert!(result.summary.span_s <= 30.0 + 1e-9, "span {}", result.summary.span_s);
    assert!(result.jobs.iter().all(|r| r.finish_s <= 30.0));
}

/// On EEVDF nodes fast mode runs with the bounds measured there (a saturated run reports no tighter a bound), at an
/// MPL and skew the bounds were measured at.
#[test]
fn on_eevdf_fast_mode_reports_the_bounds_measured_there() {
    let on_eevdf = |name: &str| SimConfig {
        node_scheduler: cosched_sim::OsScheduler::Eevdf,
        skew: SimConfig::default().skew,
        ..config(scheme(name), 8, 2)
    };
    // (scheme, stable bound, saturated bound as reported: the larger of the two)
    for (name, stable, saturated) in [("PB-SB", 0.377, 0.377), ("IB", 0.144, 0.144)] {
        let result = simulate(&on_eevdf(name), Some(FastSettings::default()));
        let report = result.summary.fast_mode.expect("a fast run says so");
        let bound = if result.summary.saturation.saturated { saturated } else { stable };
        assert_eq!(report.validated_error, Some(bound), "{name}'s bound on EEVDF");
    }
}
