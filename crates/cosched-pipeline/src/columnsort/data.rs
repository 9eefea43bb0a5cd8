//! Files of fixed-size records: generating them, and checking a sort.
//! A record's key is its first 8 bytes, read big-endian.

use std::fs::File;
use std::io::{BufReader, BufWriter, Read, Write};
use std::path::Path;

pub const KEY_BYTES: usize = 8;
const IO_CHUNK_BYTES: usize = 1 << 20;

pub fn key(record: &[u8]) -> u64 {
    u64::from_be_bytes(record[..KEY_BYTES].try_into().expect("records hold a key"))
}

fn splitmix64(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

/// An order-independent digest of a multiset of records: equal digests of
/// input and output mean (with overwhelming probability) a permutation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Digest {
    pub records: u64,
    sum: u64,
    xor: u64,
}

impl Digest {
    fn add(&mut self, record: &[u8]) {
        let mut h = 0xcbf2_9ce4_8422_2325u64;
        for &b in record {
            h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
        }
        let h = splitmix64(h);
        self.records += 1;
        self.sum = self.sum.wrapping_add(h);
        self.xor ^= h.rotate_left(17);
    }
}

/// The record count of a file, or why it is not a file of whole records.
pub fn record_count(path: &Path, record_bytes: usize) -> Result<u64, String> {
    if record_bytes < KEY_BYTES {
        return Err(format!("records of {record_bytes} bytes cannot hold an {KEY_BYTES}-byte key"));
    }
    let bytes = std::fs::metadata(path).map_err(|e| format!("{}: {e}", path.display()))?.len();
    let rec = record_bytes as u64;
    if bytes % rec != 0 {
        return Err(format!(
            "{}: {bytes} bytes is not a whole number of {record_bytes}-byte records ({} records and {} bytes over)",
            path.display(),
            bytes / rec,
            bytes % rec
        ));
    }
    Ok(bytes / rec)
}

/// Writes `records` records with pseudo-random keys from `seed`; the rest of
/// each record holds its index, so that equal keys stay distinguishable.
pub fn generate(path: &Path, records: u64, record_bytes: usize, seed: u64) -> Result<Digest, String> {
    if record_bytes < KEY_BYTES {
        return Err(format!("records of {record_bytes} bytes cannot hold an {KEY_BYTES}-byte key"));
    }
    let file = File::create(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut out = BufWriter::with_capacity(IO_CHUNK_BYTES, file);
    let mut record = vec![0u8; record_bytes];
    let mut digest = Digest::default();
    for i in 0..records {
        record[..KEY_BYTES].copy_from_slice(&splitmix64(seed ^ splitmix64(i)).to_be_bytes());
        for (j, byte) in record[KEY_BYTES..].iter_mut().enumerate() {
            *byte = (i >> (8 * (j % 8))) as u8;
        }
        digest.add(&record);
        out.write_all(&record).map_err(|e| format!("{}: {e}", path.display()))?;
    }
    out.flush().map_err(|e| format!("{}: {e}", path.display()))?;
    Ok(digest)
}

/// Reads a whole file of records, calling `each(index, record)`.
fn scan(
    path: &Path,
    record_bytes: usize,
    mut each: impl FnMut(u64, &[u8]) -> Result<(), String>,
) -> Result<u64, String> {
    let records = record_count(path, record_bytes)?;
    let file = File::open(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut input = BufReader::with_capacity(IO_CHUNK_BYTES, file);
    let mut record = vec![0u8; record_bytes];
    for i in 0..records {
        input.read_exact(&mut record).map_err(|e| format!("{}: record {i}: {e}", path.display()))?;
        each(i, &record)?;
    }
    Ok(records)
}

/// The digest of a file's records.
pub fn digest(path: &Path, record_bytes: usize) -> Result<Digest, String> {
    let mut digest = Digest::default();
    scan(path, record_bytes, |_, r| {
        digest.add(r);
        Ok(())
    })?;
    Ok(digest)
}

/// Checks over the whole file that keys never decrease and that the records
/// are a permutation of those `expected` describes.
pub fn verify(path: &Path, record_bytes: usize, expected: &Digest) -> Result<(), String> {
    let mut digest = Digest::default();
    let mut previous = 0u64;
    scan(path, record_bytes, |i, record| {
        let k = key(record);
        if i > 0 && k < previous {
            return Err(format!("{}: not sorted: record {i} has key {k:#018x} after {previous:#018x}", path.display()));
        }
        previous = k;
        digest.add(record);
        Ok(())
    })?;
    if digest.records != expected.records {
        return Err(format!("{}: {} records, expected {}", path.display(), digest.records, expected.records));
    }
    if digest != *expected {
        return Err(format!("{}: sorted, but not a permutation of the input (digests differ)", path.display()));
    }
    Ok(())
}
