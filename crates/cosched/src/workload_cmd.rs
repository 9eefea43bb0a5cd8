//! `cosched workload generate|inspect`.

use crate::workload_source::{load_workload, WorkloadSpec};
use clap::{Args, Subcommand};
use cosched_workload::{inspect, swf, ReadOptions};
use std::path::PathBuf;

#[derive(Subcommand, Debug)]
pub enum WorkloadCommand {
    /// Generate a workload from the Lublin-Feitelson model and write it as SWF.
    Generate(GenerateArgs),
    /// Summarise an SWF trace: sizes, run times, arrivals, offered load.
    Inspect(InspectArgs),
}

#[derive(Args, Debug)]
pub struct GenerateArgs {
    /// Workload model (only the Lublin-Feitelson model for now).
    #[arg(long, default_value = "lublin", value_parser = ["lublin"])]
    pub model: String,
    /// Size the model to a machine of this many CPUs (no job is wider).
    #[arg(long, default_value_t = 32)]
    pub procs: u32,
    /// Number of jobs.
    #[arg(long, default_value_t = 1000)]
    pub jobs: usize,
    /// Multiply run times by this.
    #[arg(long, default_value_t = 1.0)]
    pub runtime_scale: f64,
    /// Scale inter-arrival times to reach this offered load on --procs CPUs.
    #[arg(long)]
    pub load: Option<f64>,
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Output file; gzip-compressed if it ends in .gz.
    #[arg(long, short, value_name = "FILE.swf")]
    pub out: PathBuf,
}

#[derive(Args, Debug)]
pub struct InspectArgs {
    /// The trace (plain or gzip).
    pub trace: PathBuf,
    /// CPUs of the machine the offered load refers to (default: the trace's MaxProcs, else its widest job).
    #[arg(long)]
    pub procs: Option<u32>,
    /// Skip malformed lines (counted) instead of stopping at the first.
    #[arg(long)]
    pub skip_bad_lines: bool,
}

pub fn run(cmd: &WorkloadCommand) -> Result<(), String> {
    match cmd {
        WorkloadCommand::Generate(args) => generate(args),
        WorkloadCommand::Inspect(args) => inspect_trace(args),
    }
}

fn generate(args: &GenerateArgs) -> Result<(), String> {
    if args.procs == 0 || args.jobs == 0 {
        return Err("--procs and --jobs must be at least 1".into());
    }
    if !(args.runtime_scale.is_finite() && args.runtime_scale > 0.0) {
        return Err(format!("--runtime-scale must be positive, got {}", args.runtime_scale));
    }
    let spec = WorkloadSpec {
        trace: None,
        skip_bad_lines: false,
        drop_oversized: false,
        jobs: Some(args.jobs),
        model_procs: args.procs,
        runtime_scale: args.runtime_scale,
        target_load: args.load,
        seed: args.seed,
    };
    let mut loaded = load_workload(&spec, args.procs)?;
    loaded.workload.set_header_value("Note", &loaded.report.describe());
    // Write beside the destination and rename, so a failure leaves no partial file.
    // (The scratch name keeps the destination's ending, which decides gzip.)
    let name = args.out.file_name().map(|n| n.to_string_lossy().to_string()).unwrap_or_default();
    let partial = args.out.with_file_name(format!(".partial-{}-{name}", std::process::id()));
    let written = swf::write_path(&partial, &loaded.workload).and_then(|()| std::fs::rename(&partial, &args.out));
    if let Err(e) = written {
        let _ = std::fs::remove_file(&partial);
        return Err(format!("cannot write {}: {e}", args.out.display()));
    }
    eprintln!("{} -> {}", loaded.report.describe(), args.out.display());
    Ok(())
}

fn inspect_trace(args: &InspectArgs) -> Result<(), String> {
    let workload =
        swf::read_path(&args.trace, ReadOptions { skip_bad_lines: args.skip_bad_lines }).map_err(|e| e.to_string())?;
    let procs = match args.procs {
        Some(0) => return Err("--procs must be at least 1".into()),
        Some(p) => p,
        None => workload
            .header_value("MaxProcs")
            .and_then(|v| v.parse::<u32>().ok())
            .filter(|&p| p > 0)
            .or_else(|| workload.jobs.iter().map(|j| j.procs).max())
            .unwrap_or(1),
    };
    println!("{}", inspect::summarize(&workload, procs).to_string().trim_end());
    Ok(())
}
