//! The three sources of job sizes (`--job-sizes`): the Lublin-Feitelson
//! model sized to the machine (the default), the model of a larger machine
//! truncated to the jobs that fit (the study's words), and a real trace's
//! sizes.

use cosched_lab::workload::{load_workload, JobSizes, LoadedWorkload, WorkloadSpec};
use std::path::PathBuf;

const MACHINE_CPUS: u32 = 32;
const JOBS: usize = 3000;

fn nasa_trace() -> PathBuf {
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../../test-data/swf/NASA-iPSC-1993-3.1-cln.swf.gz"))
}

fn workload(job_sizes: JobSizes, jobs: usize, seed: u64) -> LoadedWorkload {
    let spec = WorkloadSpec { jobs: Some(jobs), model_procs: MACHINE_CPUS, seed, job_sizes, ..WorkloadSpec::default() };
    load_workload(&spec, MACHINE_CPUS).expect("the workload loads")
}

fn sizes(w: &LoadedWorkload) -> Vec<u32> {
    w.workload.jobs.iter().map(|j| j.procs).collect()
}

fn pow2_share(sizes: &[u32]) -> f64 {
    sizes.iter().filter(|s| s.is_power_of_two()).count() as f64 / sizes.len() as f64
}

#[test]
fn every_source_gives_the_jobs_asked_for_and_all_fit() {
    for source in [JobSizes::Machine, JobSizes::Lublin(256), JobSizes::Trace(nasa_trace())] {
        let w = workload(source.clone(), JOBS, 1);
        assert_eq!(w.workload.jobs.len(), JOBS, "{source}");
        assert!(sizes(&w).iter().all(|&s| (1..=MACHINE_CPUS).contains(&s)), "{source}: every job fits");
        let numbers: Vec<u64> = w.workload.jobs.iter().map(|j| j.job_number).collect();
        assert_eq!(numbers, (1..=JOBS as u64).collect::<Vec<_>>(), "{source}: numbered from 1");
        assert_eq!(w.report.offered_load.map(|l| (l * 1000.0).round()), Some(400.0), "{source}: the default load");
    }
}

#[test]
fn the_sources_differ_as_their_definitions_say() {
    let machine = sizes(&workload(JobSizes::Machine, JOBS, 1));
    let truncated_load = workload(JobSizes::Lublin(256), JOBS, 1);
    let truncated = sizes(&truncated_load);
    let trace = sizes(&workload(JobSizes::Trace(nasa_trace()), JOBS, 1));
    // Both keep the model's power-of-two emphasis (about 79 % each: the rounding to a power of two
    // does not depend on the machine), but sized to 32 CPUs the model puts its mass on small jobs
    // (UMED = log2 32 - 2.5), while truncated from 256 CPUs it spreads the jobs that fit over
    // all sizes up to 32: about a third are wider than 8 CPUs, against one in seven.
    let (p_machine, p_truncated) = (pow2_share(&machine), pow2_share(&truncated));
    assert!(p_machine > 0.75 && p_truncated > 0.75, "powers of two: {p_machine:.3}, {p_truncated:.3}");
    let wider_than_8 = |s: &[u32]| s.iter().filter(|&&x| x > 8).count() as f64 / s.len() as f64;
    let (wide_machine, wide_truncated) = (wider_than_8(&machine), wider_than_8(&truncated));
    assert!(wide_machine < 0.2 && wide_truncated > 0.28, "wider than 8: {wide_machine:.3}, {wide_truncated:.3}");
    // Truncation left out the wider jobs, and says so.
    assert!(truncated_load.report.oversized_jobs_left_out > 0);
    assert!(truncated_load.report.describe().contains("jobs wider than the machine left out"));
    // The NASA iPSC/860's sizes are all powers of two (a hypercube).
    assert_eq!(pow2_share(&trace), 1.0);
    let serial = |s: &[u32]| s.iter().filter(|&&x| x == 1).count() as f64 / s.len() as f64;
    // The trace's jobs of at most 32 CPUs: 4,910 of 16,487 serial.
    assert!((serial(&trace) - 4910.0 / 16487.0).abs() < 0.03, "{}", serial(&trace));
}

#[test]
fn each_source_is_deterministic_and_drawing_more_changes_no_job() {
    for source in [JobSizes::Machine, JobSizes::Lublin(256), JobSizes::Trace(nasa_trace())] {
        let a = workload(source.clone(), 500, 4);
        let b = workload(source.clone(), 500, 4);
        assert_eq!(a.workload.jobs, b.workload.jobs, "{source}");
        assert_ne!(sizes(&a), sizes(&workload(source.clone(), 500, 5)), "{source}: another seed");
        // The first 500 jobs of 1,500 are the 500 (sizes and run times; the load scales the gaps).
        let more = workload(source.clone(), 1500, 4);
        let shape = |w: &LoadedWorkload, n: usize| -> Vec<(u32, f64)> {
            w.workload.jobs[..n].iter().map(|j| (j.procs, j.run_s)).collect()
        };
        assert_eq!(shape(&a, 500), shape(&more, 500), "{source}");
    }
}

#[test]
fn sizes_parse_and_print_back() {
    for text in ["machine", "lublin:256", "trace:some/file.swf.gz"] {
        assert_eq!(text.parse::<JobSizes>().unwrap().to_string(), text);
    }
    for bad in ["", "lublin:0", "lublin:x", "trace:", "sized"] {
        assert!(bad.parse::<JobSizes>().is_err(), "{bad}");
    }
    let spec = WorkloadSpec {
        trace: Some(nasa_trace()),
        job_sizes: JobSizes::Lublin(64),
        jobs: Some(10),
        ..WorkloadSpec::default()
    };
    assert!(load_workload(&spec, 128).err().expect("refused").contains("Lublin-Feitelson model only"));
}
