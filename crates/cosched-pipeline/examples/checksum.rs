//! The worked example of docs/pipeline.md: checksum a file in 1 MiB blocks,
//! reading on one thread (niced down) and hashing on two, in order.
//!
//!     cargo run --release -p cosched-pipeline --example checksum -- FILE

use cosched_pipeline::{Buffer, Context, FnStage, Pipeline, Priority, StageError};
use std::os::unix::fs::FileExt;

const BLOCK: usize = 1 << 20;

/// A block's bytes, how many are valid, and their hash.
type Block = (Vec<u8>, usize, u64);

fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3))
}

fn checksum(file: &std::fs::File) -> Result<u64, Box<dyn std::error::Error>> {
    let blocks = file.metadata()?.len().div_ceil(BLOCK as u64);
    let mut total = 0u64;
    let report = Pipeline::new(4, |_| (vec![0u8; BLOCK], 0, 0))
        .rounds(blocks)
        .stage_fn("read", |buf: &mut Buffer<Block>, _: &Context<'_, Block>| {
            let offset = buf.seq() * BLOCK as u64;
            let (bytes, len, _) = &mut buf.data;
            *len = file.read_at(bytes, offset)?;
            Ok::<(), StageError>(())
        })
        .priority(Priority::default().nice(5))
        .replicated("hash", 2, |_| {
            FnStage::new(|buf: &mut Buffer<Block>, _: &Context<'_, Block>| {
                let (bytes, len, hash) = &mut buf.data;
                *hash = fnv1a(&bytes[..*len]);
                Ok(())
            })
        })
        .stage_fn("sum", |buf, _| {
            // Order-dependent on purpose: the join restores the file's order.
            total = total.rotate_left(5) ^ buf.data.2;
            Ok(())
        })
        .run()?;
    for refused in report.refused() {
        eprintln!("warning: {}: {}: {:?}", refused.thread, refused.control, refused.result);
    }
    Ok(total)
}

fn main() {
    let Some(path) = std::env::args().nth(1) else {
        eprintln!("usage: checksum FILE");
        std::process::exit(2);
    };
    match std::fs::File::open(&path).map_err(|e| e.into()).and_then(|f| checksum(&f)) {
        Ok(sum) => println!("{sum:016x}  {path}"),
        Err(e) => {
            eprintln!("checksum: {path}: {e}");
            std::process::exit(1);
        }
    }
}
