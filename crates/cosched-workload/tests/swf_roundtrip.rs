//! SWF files written and read back, plain and gzip, through the file system.

use std::io::Write;
use std::path::PathBuf;

use cosched_core::StreamSeed;
use cosched_workload::lublin::{self, LublinParams};
use cosched_workload::swf::{self, read_from, read_path, write_path, write_to};
use cosched_workload::{load, ReadOptions, SwfError, TraceJob, Workload};
use proptest::prelude::*;

/// A fresh directory under the system temp dir (mkdtemp: nobody else can have made it first), removed on drop.
struct TempDir(tempfile::TempDir);

impl TempDir {
    fn new(tag: &str) -> TempDir {
        TempDir(tempfile::Builder::new().prefix(&format!("cosched-workload-{tag}-")).tempdir().unwrap())
    }
    fn path(&self, name: &str) -> PathBuf {
        self.0.path().join(name)
    }
}

/// A generated workload with the awkward cases added: decimal fields, a job
/// whose size comes from the requested-processors field, scaled times.
fn sample_workload() -> Workload {
    let mut w = lublin::generate_workload(&LublinParams::sized_to(128), 500, StreamSeed(4));
    load::scale_interarrivals(&mut w.jobs, 0.731);
    load::scale_runtimes(&mut w.jobs, 1.0 / 3.0);
    let mut odd = TraceJob::new(501, w.jobs.last().unwrap().submit_s + 0.25, 12.5, 16, 1);
    odd.fields = [
        501.0,
        odd.submit_s,
        3.0,
        12.5,
        -1.0,
        11.75,
        2048.0,
        16.0,
        60.0,
        -1.0,
        1.0,
        7.0,
        2.0,
        5.0,
        1.0,
        1.0,
        -1.0,
        -1.0,
    ];
    odd.wait_s = 3.0;
    assert!(odd.procs_from_requested());
    w.jobs.push(odd);
    w.header.push("Installation: test bench".to_string());
    w
}

#[test]
fn round_trip_plain_and_gzip_files() {
    let dir = TempDir::new("roundtrip");
    let w = sample_workload();
    for name in ["trace.swf", "trace.swf.gz"] {
        let path = dir.path(name);
        write_path(&path, &w).unwrap();
        let bytes = std::fs::read(&path).unwrap();
        assert_eq!(bytes.starts_with(&[0x1f, 0x8b]), name.ends_with(".gz"), "{name}: compression");
        let back = read_path(&path, ReadOptions::default()).unwrap();
        assert_eq!(back.jobs, w.jobs, "{name}");
        assert!(back.unusable.is_empty() && back.skipped_bad_lines.is_empty());
        assert_eq!(back.header_value("Version"), Some("2.2"));
        assert_eq!(back.header_value("MaxProcs"), Some("128"));
        assert_eq!(back.header_value("MaxJobs"), Some("501"));
        assert_eq!(back.header_value("Installation"), Some("test bench"));
        assert!(back.header_value("Computer").unwrap().contains("Lublin"));
        // Line numbers point into the written file: the header comes first.
        let header_lines = back.header.len() as u64;
        assert_eq!(back.jobs[0].source_line, header_lines + 1);
        assert_eq!(back.jobs[500].source_line, header_lines + 501);
    }
}

#[test]
fn gzip_is_detected_by_content_not_name() {
    let dir = TempDir::new("magic");
    let w = sample_workload();
    // Compressed data under a plain name...
    let gz_named_plain = dir.path("looks-plain.swf");
    let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    write_to(&mut enc, &w).unwrap();
    std::fs::write(&gz_named_plain, enc.finish().unwrap()).unwrap();
    assert_eq!(read_path(&gz_named_plain, ReadOptions::default()).unwrap().jobs, w.jobs);
    // ...and plain text under a .gz name.
    let plain_named_gz = dir.path("looks-compressed.swf.gz");
    let mut text = Vec::new();
    write_to(&mut text, &w).unwrap();
    std::fs::write(&plain_named_gz, &text).unwrap();
    assert_eq!(read_path(&plain_named_gz, ReadOptions::default()).unwrap().jobs, w.jobs);
}

#[test]
fn malformed_line_in_a_gzip_file_reports_path_and_line() {
    let dir = TempDir::new("badgz");
    let path = dir.path("bad.swf.gz");
    let file = std::fs::File::create(&path).unwrap();
    let mut enc = flate2::write::GzEncoder::new(file, flate2::Compression::fast());
    writeln!(enc, "; Version: 2.2").unwrap();
    writeln!(enc, "1 0 -1 10 4 -1 -1 -1 -1 -1 1 -1 -1 -1 1 -1 -1 -1").unwrap();
    writeln!(enc, "2 5 -1 10 4 -1 -1 -1").unwrap();
    enc.finish().unwrap();
    let err = read_path(&path, ReadOptions::default()).unwrap_err();
    let msg = err.to_string();
    assert!(matches!(err, SwfError::Malformed { line: 3, .. }), "{msg}");
    assert_eq!(
        msg,
        format!("{}:3: expected 18 fields, found 8 (use --skip-bad-lines to skip malformed lines)", path.display())
    );
    let skipped = read_path(&path, ReadOptions { skip_bad_lines: true }).unwrap();
    assert_eq!((skipped.jobs.len(), skipped.skipped_bad_lines.clone()), (1, vec![3]));
}

#[test]
fn missing_file_is_an_io_error_naming_the_path() {
    let err = read_path(std::path::Path::new("/nonexistent/cosched/trace.swf"), ReadOptions::default()).unwrap_err();
    assert!(matches!(err, SwfError::Io { .. }));
    assert!(err.to_string().starts_with("/nonexistent/cosched/trace.swf: "), "{err}");
}

#[test]
fn archive_style_trace_loads_as_it_is() {
    // Written in the layout of Parallel Workloads Archive files (aligned
    // columns, long header, multi-line notes, a cancelled job with unknown
    // run time); the values are made up.
    let text = "\
; Version: 2.2
; Computer: Example SP2, 128 nodes
; Installation: Example Center
; Information: http://example.org/workload
;              http://example.org/mirror
; Conversion: by hand
; MaxJobs: 4
; MaxRecords: 4
; Preemption: No
; UnixStartTime: 836722383
; TimeZoneString: US/Eastern
; MaxNodes: 128
; MaxProcs: 128
; Note: run times are wallclock;
;       jobs cancelled before start have run time -1
;
     1      0   1234   2110   32  2012.50   -1   32   3600   -1  1  12  3  -1  1  -1  -1  -1
     2     64      0     14    1    13.00   -1    1    600   -1  1  13  3  -1  0  -1  -1  -1
     3    100     -1     -1   -1       -1   -1   16   7200   -1  5  12  3  -1  1  -1  -1  -1
     4    130     12  18000   -1   -1.00    -1   64  18000   -1  1  14  5  -1  1  -1  -1  -1
";
    let w = read_from(text.as_bytes(), "example.swf", ReadOptions::default()).unwrap();
    assert_eq!(w.jobs.len(), 3);
    assert_eq!(w.unusable, vec![(3, "run time unknown".to_string())]);
    assert_eq!(w.jobs[2].procs, 64, "requested processors used");
    assert_eq!(w.header_value("UnixStartTime"), Some("836722383"));
    assert_eq!(w.header[4], "             http://example.org/mirror");
    let mut out = Vec::new();
    write_to(&mut out, &w).unwrap();
    let back = read_from(out.as_slice(), "rewritten.swf", ReadOptions::default()).unwrap();
    assert_eq!(back.jobs, w.jobs);
    let out = String::from_utf8(out).unwrap();
    assert!(out.contains("; Note: run times are wallclock;\n;       jobs cancelled"), "{out}");
    assert!(out.contains("; MaxJobs: 3\n"), "{out}");
    assert!(out.contains("\n2 64 0 14 1 13 -1 1 600 -1 1 13 3 -1 0 -1 -1 -1\n"), "{out}");
}

/// A value SWF field `index` (0-based) may hold: -1, or what its meaning allows (times and memory may be
/// fractional; counts, ids and the status are whole; the status is 0 to 5).
fn field_value(index: usize) -> BoxedStrategy<f64> {
    let whole = || prop_oneof![Just(-1.0), (0u64..10_000_000).prop_map(|x| x as f64)].boxed();
    match index {
        // Times (submit, wait, run, CPU, requested, think) and memory (used, requested).
        1 | 2 | 3 | 5 | 6 | 8 | 9 | 17 => prop_oneof![
            Just(-1.0),
            (0u64..10_000_000).prop_map(|x| x as f64),
            (0.0f64..1e7),
            (1u32..1_000_000).prop_map(|x| x as f64 / 64.0),
        ]
        .boxed(),
        10 => (-1i32..=5).prop_map(f64::from).boxed(),
        _ => whole(),
    }
}

fn job_strategy() -> impl Strategy<Value = TraceJob> {
    (
        0u64..1_000_000_000,
        0.0f64..1e9,
        prop_oneof![Just(-1.0), 0.0f64..1e6],
        prop_oneof![1u64..1_000_000, Just(0)].prop_map(|x| x as f64 + 0.5),
        1u32..100_000,
        -1i64..40,
        any::<bool>(),
        (0..swf::FIELD_COUNT).map(field_value).collect::<Vec<_>>(),
    )
        .prop_map(|(number, submit, wait, run, procs, queue, from_requested, mut fields)| {
            let mut job = TraceJob::new(number, submit, run, procs, queue);
            job.wait_s = wait;
            if from_requested {
                fields[4] = -1.0;
                fields[7] = procs as f64;
            }
            job.fields = fields.try_into().expect("18 fields");
            job.sync_fields();
            job
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn any_jobs_survive_a_round_trip(jobs in proptest::collection::vec(job_strategy(), 0..40).prop_map(|mut jobs| {
        // SWF lists jobs in order of submission; the reader refuses any other order.
        jobs.sort_by(|a, b| a.submit_s.total_cmp(&b.submit_s));
        jobs
    })) {
        let w = Workload { jobs, ..Default::default() };
        let mut bytes = Vec::new();
        write_to(&mut bytes, &w).unwrap();
        let back = read_from(bytes.as_slice(), "mem", ReadOptions::default()).unwrap();
        prop_assert!(back.unusable.is_empty(), "{:?}", back.unusable);
        prop_assert_eq!(back.jobs, w.jobs);
    }
}

#[test]
fn fields_constant_names_every_field() {
    assert_eq!(swf::FIELD_NAMES.len(), swf::FIELD_COUNT);
}
