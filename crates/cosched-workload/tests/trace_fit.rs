//! `workload fit` reproduces its trace: the model fitted to the NASA iPSC/860
//! log (a real trace, test-data/swf/README.md), generated again with the
//! trace's job count, keeps the trace's sizes, burstiness and load.

use cosched_core::StreamSeed;
use cosched_workload::hyper_erlang::HyperErlangModel;
use cosched_workload::inspect::summarize;
use cosched_workload::swf::{self, TraceJob};
use cosched_workload::trace_model::TraceModel;
use cosched_workload::{ReadOptions, Workload};

const MACHINE_CPUS: u32 = 128;

fn nasa_trace() -> Workload {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../test-data/swf/NASA-iPSC-1993-3.1-cln.swf.gz");
    swf::read_path(std::path::Path::new(path), ReadOptions::default()).expect("the NASA iPSC/860 trace loads")
}

/// What the fit must keep, measured the same way on the trace and on a generated workload.
#[derive(Debug)]
struct Statistics {
    pow2_share: f64,
    /// Share of jobs in each size class 1, 2, 3-4, ..., 65-128.
    class_shares: Vec<f64>,
    offered_load: f64,
    gap_mean_s: f64,
    gap_cv: f64,
    /// Quartiles and 90th percentile of the gaps between consecutive submits, seconds.
    gap_quantiles_s: [f64; 4],
    /// Share of the arrivals in each hour of the day (from the workload's time 0).
    hourly_shares: [f64; 24],
}

fn statistics(jobs: &[TraceJob]) -> Statistics {
    let workload = Workload { jobs: jobs.to_vec(), ..Workload::default() };
    let summary = summarize(&workload, MACHINE_CPUS);
    let n = jobs.len() as f64;
    let mut submits: Vec<f64> = jobs.iter().map(|j| j.submit_s).collect();
    submits.sort_by(f64::total_cmp);
    let mut gaps: Vec<f64> = submits.windows(2).map(|w| w[1] - w[0]).collect();
    gaps.sort_by(f64::total_cmp);
    let quantile = |q: f64| gaps[(q * (gaps.len() - 1) as f64).round() as usize];
    let mut hourly_shares = [0.0; 24];
    for t in &submits {
        hourly_shares[((t % 86_400.0) / 3600.0) as usize] += 1.0 / n;
    }
    Statistics {
        pow2_share: summary.share_pow2,
        class_shares: summary.size_classes.iter().map(|c| c.count as f64 / n).collect(),
        offered_load: summary.offered_load.unwrap(),
        gap_mean_s: summary.interarrival_mean.unwrap(),
        gap_cv: summary.interarrival_cv.unwrap(),
        gap_quantiles_s: [quantile(0.25), quantile(0.5), quantile(0.75), quantile(0.9)],
        hourly_shares,
    }
}

/// Total variation distance between two daily profiles, at the best of the 24
/// circular shifts: a generated workload's time 0 is its first arrival, not
/// the trace's midnight, so the cycle's phase is not compared, its shape is.
fn cycle_distance(a: &[f64; 24], b: &[f64; 24]) -> f64 {
    (0..24)
        .map(|shift| (0..24).map(|h| (a[h] - b[(h + shift) % 24]).abs()).sum::<f64>() / 2.0)
        .fold(f64::INFINITY, f64::min)
}

/// Seeds the regenerated workloads are drawn with; statistics that a few
/// long gaps or long jobs dominate are judged over all of them.
const SEEDS: [u64; 5] = [1, 2, 3, 4, 5];

fn median(mut xs: Vec<f64>) -> f64 {
    xs.sort_by(f64::total_cmp);
    xs[xs.len() / 2]
}

/// The tolerances are the model's own sampling noise at the trace's job
/// count (measured over ten seeds: offered load 0.42-0.53, mean gap 404-485 s,
/// gap CV 3.9-13.1, cycle distance 0.019-0.054), not a fit to one draw. For
/// contrast, the per-class model of Jann et al. fitted to this trace gives 48-52 %
/// powers of two, offered load 0.32-0.37, gap CV 1.09-1.10, gap quartiles about
/// three times the trace's, and a cycle distance of 0.35-0.36: it fails every
/// check below but the mean gap.
#[test]
fn the_model_fitted_to_the_nasa_trace_regenerates_its_sizes_burstiness_and_load() {
    let trace = nasa_trace();
    let want = statistics(&trace.jobs);
    assert_eq!(trace.jobs.len(), 18_066, "the cleaned log's usable jobs");
    let model = TraceModel::fit(&trace.jobs, MACHINE_CPUS).expect("the trace fits");
    let runs: Vec<Statistics> =
        SEEDS.iter().map(|&seed| statistics(&model.generate(trace.jobs.len(), StreamSeed(seed)))).collect();
    for (seed, got) in SEEDS.iter().zip(&runs) {
        // Sizes, per draw: binomial noise on 18,066 jobs is at most 0.004 (one sd).
        assert!((got.pow2_share - want.pow2_share).abs() <= 0.01, "seed {seed}: pow2 {got:?}");
        assert_eq!(got.class_shares.len(), want.class_shares.len(), "seed {seed}: {got:?}");
        for (g, w) in got.class_shares.iter().zip(&want.class_shares) {
            assert!(
                (g - w).abs() <= 0.01,
                "seed {seed}: class shares {:?} vs {:?}",
                got.class_shares,
                want.class_shares
            );
        }
        // The shape of the gaps: quartiles and 90th percentile within 25 %.
        for (g, w) in got.gap_quantiles_s.iter().zip(&want.gap_quantiles_s) {
            assert!(
                (g / w - 1.0).abs() <= 0.25,
                "seed {seed}: gap quantiles {:?} vs {:?}",
                got.gap_quantiles_s,
                want.gap_quantiles_s
            );
        }
    }
    let mean_over_seeds = |f: &dyn Fn(&Statistics) -> f64| runs.iter().map(f).sum::<f64>() / runs.len() as f64;
    let load = mean_over_seeds(&|s| s.offered_load);
    assert!((load / want.offered_load - 1.0).abs() <= 0.10, "offered load {load:.3} vs {:.3}", want.offered_load);
    let gap = mean_over_seeds(&|s| s.gap_mean_s);
    assert!((gap / want.gap_mean_s - 1.0).abs() <= 0.10, "mean gap {gap:.1} s vs {:.1} s", want.gap_mean_s);
    // Burstiness: the trace's CV (9.46) is mostly one 6-day gap, so a draw's CV scatters widely.
    let cv = median(runs.iter().map(|s| s.gap_cv).collect());
    assert!(cv >= want.gap_cv / 2.0 && cv <= want.gap_cv * 2.0, "median gap CV {cv:.2} vs {:.2}", want.gap_cv);
    let cycle = mean_over_seeds(&|s| cycle_distance(&s.hourly_shares, &want.hourly_shares));
    assert!(cycle <= 0.05, "daily cycle: mean distance {cycle:.3}");
}

/// The same fit and seed give the same workload; another seed another one.
#[test]
fn fit_and_generation_are_deterministic() {
    let trace = nasa_trace();
    let first = TraceModel::fit(&trace.jobs, MACHINE_CPUS).unwrap();
    let again = TraceModel::fit(&trace.jobs, MACHINE_CPUS).unwrap();
    assert_eq!(first, again);
    assert_eq!(TraceModel::from_text(&first.to_text()).unwrap(), first, "the saved model reads back equal");
    assert_eq!(first.generate(500, StreamSeed(7)), again.generate(500, StreamSeed(7)));
    assert_ne!(first.generate(500, StreamSeed(7)), first.generate(500, StreamSeed(8)));
}

/// The per-class model stays available (`workload fit --arrivals per-class`)
/// and still fits this trace.
#[test]
fn the_per_class_model_still_fits_the_trace() {
    let trace = nasa_trace();
    let model = HyperErlangModel::fit(&trace.jobs, MACHINE_CPUS).unwrap();
    assert_eq!(model.classes.len(), 8, "{model}");
}
