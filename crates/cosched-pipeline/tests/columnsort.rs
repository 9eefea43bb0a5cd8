//! Columnsort sorts files of every valid shape, checked over the whole output.

use std::path::Path;

use cosched_pipeline::columnsort::{data, shape::valid_shapes, sort_file, Shape, SortAlgorithm, SortConfig};

fn sort_and_verify(dir: &Path, records: u64, config: &SortConfig, seed: u64) {
    let input = dir.join(format!("in-{records}-{seed}"));
    let output = dir.join(format!("out-{records}-{seed}"));
    let expected = data::generate(&input, records, config.record_bytes, seed).unwrap();
    let report = sort_file(&input, &output, config).unwrap_or_else(|e| panic!("{records} records, {config:?}: {e}"));
    data::verify(&output, config.record_bytes, &expected)
        .unwrap_or_else(|e| panic!("{} ({records} records): {e}", report.shape));
    assert_eq!(report.passes.len(), 3);
    let left: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|name| name.ends_with(".tmp"))
        .collect();
    assert!(left.is_empty(), "temporary files were left: {left:?}");
}

#[test]
fn every_valid_shape_up_to_150_records_sorts() {
    let dir = tempfile::tempdir().unwrap();
    for records in 1..=150u64 {
        for shape in valid_shapes(records) {
            let config = SortConfig { rows: Some(shape.rows), ..SortConfig::compute_bound() };
            sort_and_verify(dir.path(), records, &config, records * 31 + shape.columns);
        }
    }
}

#[test]
fn smallest_and_non_power_of_two_shapes_sort() {
    let dir = tempfile::tempdir().unwrap();
    // The smallest matrix with more than one column, and 3 columns of 9 (odd r).
    for (rows, columns) in [(2, 2), (9, 3), (35, 5), (104, 8)] {
        assert!(Shape::new(rows, columns).is_ok());
        for algorithm in [SortAlgorithm::Compare, SortAlgorithm::Radix] {
            let config = SortConfig { rows: Some(rows), algorithm, ..SortConfig::compute_bound() };
            sort_and_verify(dir.path(), rows * columns, &config, 7);
        }
    }
}

#[test]
fn larger_files_sort_with_every_variant() {
    let dir = tempfile::tempdir().unwrap();
    let variants = [
        SortConfig::compute_bound(),
        SortConfig::io_bound(),
        SortConfig { sort_copies: 3, pool: 6, ..SortConfig::compute_bound() },
        SortConfig { record_bytes: 100, rows: Some(6000), ..SortConfig::io_bound() },
    ];
    for (i, config) in variants.iter().enumerate() {
        sort_and_verify(dir.path(), 60_000, config, i as u64);
    }
}

/// Writes records whose keys come from `key(i)`.
fn write_keys(path: &Path, records: u64, key: impl Fn(u64) -> u64) {
    let bytes: Vec<u8> = (0..records).flat_map(|i| [key(i).to_be_bytes(), i.to_le_bytes()].concat()).collect();
    std::fs::write(path, bytes).unwrap();
}

#[test]
fn sorted_reversed_and_equal_keys_sort() {
    let dir = tempfile::tempdir().unwrap();
    let (input, output) = (dir.path().join("in"), dir.path().join("out"));
    let records = 104 * 8; // r = 104 rows, s = 8 columns
    type Pattern = (&'static str, fn(u64) -> u64);
    let patterns: [Pattern; 4] =
        [("sorted", |i| i), ("reversed", |i| u64::MAX - i), ("equal", |_| 42), ("two values", |i| i % 2)];
    for (name, key) in patterns {
        write_keys(&input, records, key);
        let expected = data::digest(&input, 16).unwrap();
        let config = SortConfig { rows: Some(104), ..SortConfig::compute_bound() };
        sort_file(&input, &output, &config).unwrap();
        data::verify(&output, 16, &expected).unwrap_or_else(|e| panic!("{name}: {e}"));
    }
}

#[test]
fn a_partial_record_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in");
    std::fs::write(&input, vec![0u8; 16 * 10 + 5]).unwrap();
    let err = sort_file(&input, &dir.path().join("out"), &SortConfig::compute_bound()).unwrap_err();
    assert!(err.contains("165 bytes is not a whole number of 16-byte records (10 records and 5 bytes over)"), "{err}");
}

#[test]
fn shapes_that_break_the_columnsort_condition_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in");
    write_keys(&input, 32, |i| i);
    let out = dir.path().join("out");
    let err =
        |rows| sort_file(&input, &out, &SortConfig { rows: Some(rows), ..SortConfig::compute_bound() }).unwrap_err();
    let e = err(8); // s = 4 divides r = 8, but 8 < 2 * 3^2
    assert!(
        e.contains("r >= 2(s-1)^2") && e.contains("need r >= 18") && e.contains("valid --rows for 32 records: 16, 32"),
        "{e}"
    );
    let e = err(4); // s = 8 does not divide r = 4
    assert!(e.contains("s = 8 does not divide r = 4"), "{e}");
    let e = err(5); // 32 is not a multiple of 5
    assert!(e.contains("32 records do not fill whole columns of 5 rows"), "{e}");
    assert!(!out.exists() || std::fs::metadata(&out).unwrap().len() == 0);
}

#[test]
fn records_too_small_for_a_key_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in");
    std::fs::write(&input, vec![0u8; 40]).unwrap();
    let err =
        sort_file(&input, &dir.path().join("out"), &SortConfig { record_bytes: 4, ..SortConfig::compute_bound() })
            .unwrap_err();
    assert!(err.contains("cannot hold an 8-byte key"), "{err}");
}
