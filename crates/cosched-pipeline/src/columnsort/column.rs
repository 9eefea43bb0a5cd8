//! One column in memory and the computations on it: sorting by key, the
//! pass-1 permutation and the pass-3 merge.

use super::data::key;

/// How a column is sorted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SortAlgorithm {
    /// Comparison sort of record indices, comparing whole records: the slow,
    /// compute-bound variant.
    Compare,
    /// LSD radix sort of the 8-byte keys: the optimised, I/O-bound variant.
    Radix,
}

/// A contiguous piece of a buffer that goes to one place in the output file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Chunk {
    /// First record within the buffer.
    pub from: usize,
    pub records: usize,
    /// Record index in the output file.
    pub to: u64,
}

/// A buffer of the columnsort pipeline, allocated once for the whole sort.
#[derive(Debug)]
pub struct Column {
    pub record_bytes: usize,
    /// Records valid in `records`.
    pub len: usize,
    pub records: Vec<u8>,
    scratch: Vec<u8>,
    keys: Vec<(u64, u32)>,
    keys_scratch: Vec<(u64, u32)>,
    /// For pass 3: where the previous column's bottom half ends in `records`.
    pub merge_split: usize,
    /// Records to merge in pass 3 (the rest is the already sorted tail).
    pub merge_len: usize,
    /// Where the write stage puts the buffer.
    pub chunks: Vec<Chunk>,
}

impl Column {
    /// Room for 1.5 columns (pass 3 carries half a column) of `rows` records.
    pub fn new(rows: usize, columns: usize, record_bytes: usize) -> Column {
        let capacity = rows + rows.div_ceil(2);
        Column {
            record_bytes,
            len: 0,
            records: vec![0; capacity * record_bytes],
            scratch: vec![0; capacity * record_bytes],
            keys: Vec::with_capacity(rows),
            keys_scratch: Vec::with_capacity(rows),
            merge_split: 0,
            merge_len: 0,
            chunks: Vec::with_capacity(columns),
        }
    }

    pub fn record(&self, i: usize) -> &[u8] {
        &self.records[i * self.record_bytes..(i + 1) * self.record_bytes]
    }

    /// Sorts the first `len` records by key.
    pub fn sort(&mut self, algorithm: SortAlgorithm) {
        let rec = self.record_bytes;
        self.keys.clear();
        self.keys.extend((0..self.len).map(|i| (key(&self.records[i * rec..]), i as u32)));
        match algorithm {
            SortAlgorithm::Compare => {
                let records = &self.records;
                let whole = |i: u32| &records[i as usize * rec..(i as usize + 1) * rec];
                self.keys.sort_unstable_by(|a, b| whole(a.1).cmp(whole(b.1)));
            }
            SortAlgorithm::Radix => radix_sort(&mut self.keys, &mut self.keys_scratch),
        }
        for (to, &(_, from)) in self.keys.iter().enumerate() {
            let from = from as usize;
            self.scratch[to * rec..(to + 1) * rec].copy_from_slice(&self.records[from * rec..(from + 1) * rec]);
        }
        std::mem::swap(&mut self.records, &mut self.scratch);
    }

    /// Pass 1's permutation (Leighton's "transpose"): record i of the sorted
    /// column goes to column i mod s; the records bound for one column are
    /// gathered into one contiguous chunk.
    pub fn deal_round_robin(&mut self, columns: usize) {
        let rec = self.record_bytes;
        let per_column = self.len / columns;
        for i in 0..self.len {
            let to = (i % columns) * per_column + i / columns;
            self.scratch[to * rec..(to + 1) * rec].copy_from_slice(&self.records[i * rec..(i + 1) * rec]);
        }
        std::mem::swap(&mut self.records, &mut self.scratch);
    }

    /// Pass 3: merges the two sorted runs `[0, merge_split)` and
    /// `[merge_split, merge_len)`, leaving the tail after them as it is.
    pub fn merge_halves(&mut self) {
        let rec = self.record_bytes;
        let (mut a, mut b, end) = (0, self.merge_split, self.merge_len);
        for to in 0..end {
            let take_a =
                b >= end || (a < self.merge_split && key(&self.records[a * rec..]) <= key(&self.records[b * rec..]));
            let from = if take_a { a } else { b };
            self.scratch[to * rec..(to + 1) * rec].copy_from_slice(&self.records[from * rec..(from + 1) * rec]);
            if take_a {
                a += 1;
            } else {
                b += 1;
            }
        }
        self.records[..end * rec].copy_from_slice(&self.scratch[..end * rec]);
    }
}

/// LSD radix sort on the keys, a byte at a time, skipping bytes that are the
/// same in every key.
fn radix_sort(keys: &mut Vec<(u64, u32)>, scratch: &mut Vec<(u64, u32)>) {
    scratch.clear();
    scratch.resize(keys.len(), (0, 0));
    for shift in (0..64).step_by(8) {
        let mut counts = [0usize; 256];
        for &(k, _) in keys.iter() {
            counts[((k >> shift) & 0xff) as usize] += 1;
        }
        if counts.contains(&keys.len()) {
            continue;
        }
        let mut start = 0;
        for count in counts.iter_mut() {
            let c = *count;
            *count = start;
            start += c;
        }
        for &(k, i) in keys.iter() {
            let digit = ((k >> shift) & 0xff) as usize;
            scratch[counts[digit]] = (k, i);
            counts[digit] += 1;
        }
        std::mem::swap(keys, scratch);
    }
}
