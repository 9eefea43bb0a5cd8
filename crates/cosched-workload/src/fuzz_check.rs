//! What the SWF fuzz target checks on every input (what the CLI does with a trace: `sim`'s shaping, `workload
//! inspect` and `workload fit`), here so that the replay of its corpus in the normal test
//! suite runs the very same code.

use crate::hyper_erlang::HyperErlangModel;
use crate::swf::{self, printable, MAX_TIME_S};
use crate::{inspect, load, ReadOptions, SwfError, Workload};

/// The shapings `check_trace_bytes` tries: the CLI's defaults, the natural load, and extremes the CLI lets
/// through (it checks only that the numbers are positive and finite), and a scale that lengthens every duration.
const FUZZ_SHAPINGS: [load::Shaping; 5] = [
    load::Shaping {
        max_jobs: None,
        machine_cpus: 32,
        drop_oversized: false,
        runtime_scale: 0.002,
        target_load: Some(0.4),
    },
    load::Shaping { max_jobs: None, machine_cpus: 32, drop_oversized: true, runtime_scale: 0.002, target_load: None },
    load::Shaping {
        max_jobs: Some(3),
        machine_cpus: 1,
        drop_oversized: true,
        runtime_scale: 1.0,
        target_load: Some(1e-300),
    },
    load::Shaping {
        max_jobs: None,
        machine_cpus: u32::MAX,
        drop_oversized: false,
        runtime_scale: 1e300,
        target_load: None,
    },
    load::Shaping { max_jobs: None, machine_cpus: 32, drop_oversized: true, runtime_scale: 1e3, target_load: None },
];

/// Read `bytes` as a trace and shape it as the simulator's CLI does, and panic where a promise breaks: a message
/// with a raw control character, a trace that does not read back the same once written, a shaped time beyond
/// [`MAX_TIME_S`], an offered load that is not finite, a shaped trace (`sim`'s workload.swf) that does not read. The body of the fuzz target `fuzz/fuzz_targets/swf.rs` and
/// of the replay of its corpus (`tests/fuzz_corpus.rs`).
#[doc(hidden)]
pub fn check_trace_bytes(bytes: &[u8]) {
    let assert_printable = |message: &str| assert_eq!(printable(message), message, "a raw control character");
    for skip_bad_lines in [false, true] {
        let workload = match swf::read_any(bytes, "fuzz.swf", ReadOptions { skip_bad_lines }) {
            Ok(workload) => workload,
            Err(e) => {
                // Skipping bad lines leaves only what is no line's fault: the file unread, or no text at all.
                assert!(!skip_bad_lines || matches!(e, SwfError::Io { .. } | SwfError::NotText { .. }), "{e}");
                assert_printable(&e.to_string());
                continue;
            }
        };
        workload.unusable.iter().for_each(|(_, reason)| assert_printable(reason));
        let mut written = Vec::new();
        swf::write_to(&mut written, &workload).expect("writing to memory");
        let back = swf::read_from(&written[..], "written.swf", ReadOptions::default()).expect("what we wrote reads");
        assert_eq!(back.jobs, workload.jobs);
        // `cosched workload inspect` and `fit`, on the machine their CLI takes.
        let procs = workload.max_procs().or_else(|| workload.jobs.iter().map(|j| j.procs).max()).unwrap_or(1);
        let _ = inspect::summarize(&workload, procs);
        let _ = HyperErlangModel::fit(&workload.jobs, procs);
        for how in &FUZZ_SHAPINGS {
            let mut jobs = workload.jobs.clone();
            match load::shape(&mut jobs, how) {
                Ok(shaped) => {
                    let within = |t: f64| (0.0..=MAX_TIME_S).contains(&t);
                    assert!(jobs.iter().all(|j| within(j.submit_s) && within(j.run_s)), "{how:?}");
                    assert!(shaped.offered_load.is_none_or(f64::is_finite), "{how:?}: {shaped:?}");
                    // What `sim` writes as workload.swf reads back.
                    let shaped_workload = Workload { header: workload.header.clone(), jobs, ..Workload::default() };
                    let mut written = Vec::new();
                    swf::write_to(&mut written, &shaped_workload).expect("writing to memory");
                    let back = swf::read_from(&written[..], "workload.swf", ReadOptions::default());
                    assert!(back.is_ok(), "{how:?}: {}", back.err().map_or(String::new(), |e| e.to_string()));
                }
                Err(message) => assert_printable(&message),
            }
        }
    }
}
