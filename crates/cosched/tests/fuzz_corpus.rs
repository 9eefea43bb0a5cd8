//! Every input of the fuzzers' corpora (`fuzz/corpus/<target>`) through the code the fuzz targets run, so that a
//! crash the fuzzers found stays fixed. How the corpora are made: docs/security.md, "Fuzzing".

/// Run `check` on every file of the target's corpus; fail naming the files it panicked on.
fn replay(target: &str, check: fn(&[u8])) {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/corpus").join(target);
    let files: Vec<_> = std::fs::read_dir(&dir).expect("the corpus is there").map(|e| e.unwrap().path()).collect();
    assert!(files.len() >= 20, "{}: {} files, the corpus is missing", dir.display(), files.len());
    let panicked: Vec<_> = files
        .iter()
        .filter(|path| {
            let bytes = std::fs::read(path).unwrap();
            std::panic::catch_unwind(|| check(&bytes)).is_err()
        })
        .collect();
    assert!(panicked.is_empty(), "panicked on {panicked:?}");
}

#[test]
fn every_request_of_the_corpus_parses_and_reads_back_the_same() {
    replay("request", cosched_runtime::wire::protocol::check_client_bytes);
}

/// Also checks that messages hold no raw control character and that shaped times stay within the limits.
#[test]
fn every_trace_of_the_corpus_reads_and_shapes_without_panic() {
    replay("swf", cosched_workload::fuzz_check::check_trace_bytes);
}
