//! Out-of-core columnsort (Leighton; out-of-core after Cormen and Chaudhry)
//! on a file of fixed-size records, as three passes of the pipeline
//! read → sort → exchange → permute → write, one column per buffer:
//!
//! - pass 1 (steps 1-2): sort each column, deal it round-robin to the columns;
//! - pass 2 (steps 3-4): sort each column, send its i-th r/s block to column i;
//! - pass 3 (steps 5-8): sort each column; the exchange stage hands each
//!   column's bottom half to the next one, and the permute stage merges it
//!   with that column's top half, which is the output from r/2 on.
//!
//! Within a column, order only matters after pass 3, so passes 1 and 2 write
//! whole r/s-record chunks and the next pass's sort does the rest.

mod column;
pub mod data;
mod policy;
pub mod shape;

use std::fs::{File, OpenOptions};
use std::os::fd::AsRawFd;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::time::Duration;

pub use column::{Chunk, Column, SortAlgorithm};
pub use policy::{StagePolicy, POLICY_HELP};
pub use shape::Shape;

use crate::{AdjustEvent, Buffer, Context, ControlOutcome, Pipeline, Stage, StageError};

/// A columnsort run's settings.
#[derive(Debug, Clone)]
pub struct SortConfig {
    pub record_bytes: usize,
    /// r; by default the valid shape with the most columns.
    pub rows: Option<u64>,
    pub algorithm: SortAlgorithm,
    /// Buffers in the pool (each holds 1.5 columns, twice).
    pub pool: usize,
    /// Copies of the sort stage (fork/join).
    pub sort_copies: usize,
    /// `fdatasync` after every write and drop the files from the page cache
    /// after every pass, so that reads and writes go to the disk.
    pub sync_io: bool,
    pub policy: StagePolicy,
}

impl SortConfig {
    /// Small records, a comparison sort of whole records, data in the page
    /// cache, and two sort threads, so that computing can fill two CPUs.
    pub fn compute_bound() -> SortConfig {
        SortConfig {
            record_bytes: 16,
            rows: None,
            algorithm: SortAlgorithm::Compare,
            pool: 4,
            sort_copies: 2,
            sync_io: false,
            policy: StagePolicy::Default,
        }
    }

    /// Larger records, a radix sort of the keys, every byte through the disk.
    pub fn io_bound() -> SortConfig {
        SortConfig {
            record_bytes: 128,
            algorithm: SortAlgorithm::Radix,
            sync_io: true,
            sort_copies: 1,
            ..SortConfig::compute_bound()
        }
    }
}

/// What one pass did.
#[derive(Debug, Clone)]
pub struct PassReport {
    pub pass: u8,
    pub wall: Duration,
    pub controls: Vec<ControlOutcome>,
    pub adjustments: Vec<AdjustEvent>,
}

#[derive(Debug, Clone)]
pub struct SortReport {
    pub shape: Shape,
    pub passes: Vec<PassReport>,
}

impl SortReport {
    /// Controls refused in any pass, each described once.
    pub fn refused(&self) -> Vec<String> {
        let mut seen: Vec<String> = Vec::new();
        for c in self.passes.iter().flat_map(|p| &p.controls) {
            if let Err(why) = &c.result {
                let line = format!("{}: {}: {why}", c.thread, c.control);
                if !seen.contains(&line) {
                    seen.push(line);
                }
            }
        }
        seen
    }
}

/// The shape `config` gives a file of `records` records.
pub fn shape_for(records: u64, config: &SortConfig) -> Result<Shape, String> {
    match config.rows {
        Some(rows) => Shape::with_rows(records, rows),
        None => Shape::smallest_columns(records),
    }
}

/// Sorts `input` into `output`, with two temporary files beside `output`.
pub fn sort_file(input: &Path, output: &Path, config: &SortConfig) -> Result<SortReport, String> {
    let records = data::record_count(input, config.record_bytes)?;
    let shape = shape_for(records, config)?;
    if config.pool == 0 || config.sort_copies == 0 {
        return Err("the pool and the sort copies must be at least 1".into());
    }
    let bytes = shape.records() * config.record_bytes as u64;
    let temps = [temp_file(output, 1, bytes)?, temp_file(output, 2, bytes)?];
    run_passes(input, output, temps, shape, config).map(|passes| SortReport { shape, passes })
}

/// A temporary file beside `output`, `bytes` long, removed when dropped. Made new with a random name: a fixed
/// one could be another user's link when `output` is in a folder others may write.
fn temp_file(output: &Path, pass: u8, bytes: u64) -> Result<tempfile::NamedTempFile, String> {
    let folder = match output.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => parent,
        _ => Path::new("."),
    };
    let name = output.file_name().unwrap_or_default().to_string_lossy();
    let file = tempfile::Builder::new()
        .prefix(&format!("{name}.pass{pass}."))
        .suffix(".tmp")
        .tempfile_in(folder)
        .map_err(|e| format!("a temporary file in {}: {e}", folder.display()))?;
    file.as_file().set_len(bytes).map_err(|e| format!("{}: {e}", file.path().display()))?;
    Ok(file)
}

fn open_for_writing(path: &Path, bytes: u64) -> Result<File, String> {
    let file = OpenOptions::new()
        .create(true)
        .truncate(true)
        .read(true)
        .write(true)
        .open(path)
        .map_err(|e| format!("{}: {e}", path.display()))?;
    file.set_len(bytes).map_err(|e| format!("{}: {e}", path.display()))?;
    Ok(file)
}

fn run_passes(
    input: &Path,
    output: &Path,
    temps: [tempfile::NamedTempFile; 2],
    shape: Shape,
    config: &SortConfig,
) -> Result<Vec<PassReport>, String> {
    let bytes = shape.records() * config.record_bytes as u64;
    let files = [
        File::open(input).map_err(|e| format!("{}: {e}", input.display()))?,
        temps[0].reopen().map_err(|e| format!("{}: {e}", temps[0].path().display()))?,
        temps[1].reopen().map_err(|e| format!("{}: {e}", temps[1].path().display()))?,
        open_for_writing(output, bytes)?,
    ];
    if config.sync_io {
        drop_cache(&files[0]);
    }
    let (rows, columns) = (shape.rows as usize, shape.columns as usize);
    let mut pool: Vec<Column> = (0..config.pool).map(|_| Column::new(rows, columns, config.record_bytes)).collect();
    let mut reports = Vec::new();
    for pass in 1..=3u8 {
        let (from, to) = (&files[pass as usize - 1], &files[pass as usize]);
        #[allow(clippy::disallowed_methods)] // the wall time of a pass is reported
        let start = std::time::Instant::now();
        let report = pass_pipeline(pass, from, to, shape, config, pool)
            .run()
            .map_err(|e| format!("columnsort pass {pass}: {e}"))?;
        if config.sync_io {
            drop_cache(from);
            drop_cache(to);
        }
        reports.push(PassReport {
            pass,
            wall: start.elapsed(),
            controls: report.controls,
            adjustments: report.adjustments,
        });
        pool = report.buffers;
    }
    Ok(reports)
}

/// Asks the kernel to forget a file's cached pages (advice only: best effort).
fn drop_cache(file: &File) {
    let _ = nix::fcntl::posix_fadvise(file.as_raw_fd(), 0, 0, nix::fcntl::PosixFadviseAdvice::POSIX_FADV_DONTNEED);
}

fn pass_pipeline<'a>(
    pass: u8,
    from: &'a File,
    to: &'a File,
    shape: Shape,
    config: &'a SortConfig,
    pool: Vec<Column>,
) -> Pipeline<'a, Column> {
    let rows = shape.rows as usize;
    let rec = config.record_bytes;
    let (algorithm, sync) = (config.algorithm, config.sync_io);
    let read = move |buf: &mut Buffer<Column>, _: &Context<'_, Column>| -> Result<(), StageError> {
        let offset = buf.seq() * (rows * rec) as u64;
        buf.data.len = rows;
        from.read_exact_at(&mut buf.data.records[..rows * rec], offset)?;
        Ok(())
    };
    let sort = move |_copy: usize| {
        crate::FnStage::new(move |buf: &mut Buffer<Column>, _: &Context<'_, Column>| {
            buf.data.sort(algorithm);
            Ok(())
        })
    };
    let permute = move |buf: &mut Buffer<Column>, _: &Context<'_, Column>| -> Result<(), StageError> {
        plan_writes(pass, buf.seq(), &mut buf.data, shape);
        Ok(())
    };
    let write = move |buf: &mut Buffer<Column>, _: &Context<'_, Column>| -> Result<(), StageError> {
        let column = &buf.data;
        for chunk in &column.chunks {
            let bytes = &column.records[chunk.from * rec..(chunk.from + chunk.records) * rec];
            to.write_all_at(bytes, chunk.to * rec as u64)?;
        }
        if sync {
            to.sync_data()?;
        }
        Ok(())
    };
    let policy = &config.policy;
    let mut pipeline = Pipeline::with_buffers(pool).rounds(shape.columns).stage_fn("read", read);
    pipeline = policy.apply(pipeline, "read");
    pipeline = if config.sort_copies > 1 {
        pipeline.replicated("sort", config.sort_copies, sort)
    } else {
        pipeline.stage("sort", sort(0))
    };
    pipeline = policy.apply(pipeline, "sort");
    pipeline = pipeline.stage(
        "exchange",
        Exchange {
            pass,
            rows,
            carry: Vec::with_capacity(rows.div_ceil(2) * rec),
            spare: Vec::with_capacity(rows.div_ceil(2) * rec),
        },
    );
    pipeline = policy.apply(pipeline, "exchange");
    pipeline = policy.apply(pipeline.stage_fn("permute", permute), "permute");
    policy.apply(pipeline.stage_fn("write", write), "write")
}

/// The communication stage. In pass 3 it passes each column's bottom half on
/// to the next column, in order; in passes 1 and 2 on one node there is
/// nothing to send (the permute stage lays the data out for the writes).
struct Exchange {
    pass: u8,
    rows: usize,
    carry: Vec<u8>,
    spare: Vec<u8>,
}

impl Stage<Column> for Exchange {
    fn process(&mut self, buf: &mut Buffer<Column>, _: &Context<'_, Column>) -> Result<(), StageError> {
        if self.pass != 3 {
            return Ok(());
        }
        let last = buf.is_last();
        let column = &mut buf.data;
        let rec = column.record_bytes;
        let top = self.rows / 2;
        let carried = self.carry.len() / rec;
        // Keep this column's bottom half for the next column.
        self.spare.clear();
        self.spare.extend_from_slice(&column.records[top * rec..self.rows * rec]);
        // Lay out [previous bottom][this top][this bottom if last].
        column.records.copy_within(0..top * rec, carried * rec);
        column.records[..carried * rec].copy_from_slice(&self.carry);
        column.merge_split = carried;
        column.merge_len = carried + top;
        column.len = carried + top;
        if last {
            let bottom = self.spare.len();
            column.records[column.len * rec..column.len * rec + bottom].copy_from_slice(&self.spare);
            column.len += bottom / rec;
        }
        std::mem::swap(&mut self.carry, &mut self.spare);
        Ok(())
    }
}

/// The permute stage: lays the sorted column out for the writes.
fn plan_writes(pass: u8, seq: u64, column: &mut Column, shape: Shape) {
    let (rows, columns) = (shape.rows, shape.columns);
    let per_column = (rows / columns) as usize;
    column.chunks.clear();
    match pass {
        1 | 2 => {
            if pass == 1 {
                column.deal_round_robin(columns as usize);
            }
            for target in 0..columns as usize {
                let to = target as u64 * rows + seq * per_column as u64;
                column.chunks.push(Chunk { from: target * per_column, records: per_column, to });
            }
        }
        _ => {
            if column.merge_split > 0 {
                column.merge_halves();
            }
            let to = if seq == 0 { 0 } else { (seq - 1) * rows + rows / 2 };
            column.chunks.push(Chunk { from: 0, records: column.len, to });
        }
    }
}
