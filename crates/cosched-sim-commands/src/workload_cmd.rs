//! `cosched workload generate|inspect|fit|import`.

use clap::{Args, Subcommand};
use cosched_lab::workload::{load_workload, JobSizes, LoadedWorkload, WorkloadSpec};
use cosched_workload::hyper_erlang::HyperErlangModel;
use cosched_workload::trace_model::{FittedModel, TraceModel};
use cosched_workload::{alibaba_gpu, inspect, swf, ReadOptions, Workload};
use std::path::PathBuf;

#[derive(Subcommand, Debug)]
pub enum WorkloadCommand {
    /// Generate a workload from the Lublin-Feitelson model and write it as SWF.
    Generate(GenerateArgs),
    /// Summarise an SWF trace: sizes, run times, arrivals, offered load.
    Inspect(InspectArgs),
    /// Fit a model to a trace and save it: shared arrivals with the trace's daily cycle and
    /// sizes and run times per size class (default), or Jann et al.'s per-class model.
    Fit(FitArgs),
    /// Convert a public cluster trace of another format to SWF. alibaba-gpu-2023: the pod lists
    /// (openb_pod_list_*.csv) of Alibaba's GPU cluster trace of 2023 (github.com/alibaba/clusterdata,
    /// for research or study use); a pod becomes a job of its GPUs (or CPUs), submitted at creation,
    /// started when scheduled, ended when deleted (docs/workloads.md).
    Import(ImportArgs),
}

#[derive(Args, Debug)]
pub struct ImportArgs {
    /// The trace's format.
    #[arg(value_parser = ["alibaba-gpu-2023"])]
    pub format: String,
    /// The trace file (plain or gzip).
    pub input: PathBuf,
    /// What a job's processors are: gpu (the pod's GPUs; CPU-only pods are left out) or cpu (its CPUs,
    /// rounded up).
    #[arg(long, default_value = "gpu", value_parser = ["gpu", "cpu"])]
    pub resource: String,
    /// Output file; gzip-compressed if it ends in .gz.
    #[arg(long, short, value_name = "FILE.swf")]
    pub out: PathBuf,
}

#[derive(Args, Debug)]
pub struct FitArgs {
    /// The trace (plain or gzip).
    pub trace: PathBuf,
    /// CPUs of the machine: size classes {1}, {2}, {3-4}, ... up to it (default: MaxProcs, else the widest job).
    #[arg(long)]
    pub procs: Option<u32>,
    /// Skip malformed lines (counted) instead of stopping at the first.
    #[arg(long)]
    pub skip_bad_lines: bool,
    /// Where to save the parameters (read back by `generate --model hyper-erlang --params`).
    #[arg(long, short, default_value = "hyper-erlang.txt")]
    pub out: PathBuf,
    /// shared: one arrival stream with the trace's daily cycle and gap shape, a size class drawn
    /// per job (keeps the trace's burstiness, sizes and load); per-class: an independent
    /// hyper-Erlang arrival stream per size class, Jann et al. 1997 as published.
    #[arg(long, default_value = "shared", value_parser = ["shared", "per-class"])]
    pub arrivals: String,
}

#[derive(Args, Debug)]
pub struct GenerateArgs {
    #[command(flatten)]
    pub spec: GenerateSpec,
    /// Output file; gzip-compressed if it ends in .gz.
    #[arg(long, short, value_name = "FILE.swf")]
    pub out: PathBuf,
}

/// What to generate (the Python package's `workload.generate` takes the same flags).
#[derive(Args, Debug)]
pub struct GenerateSpec {
    /// Workload model: lublin (Lublin-Feitelson 2003) or hyper-erlang (needs --params from `workload fit`).
    #[arg(long, default_value = "lublin", value_parser = ["lublin", "hyper-erlang"])]
    pub model: String,
    /// Fitted model file (from `cosched workload fit`, either kind of arrivals).
    #[arg(long)]
    pub params: Option<PathBuf>,
    /// Size the model to a machine of this many CPUs (no job is wider; default 32, or the
    /// Hyper-Erlang model's own machine).
    #[arg(long)]
    pub procs: Option<u32>,
    /// Number of jobs.
    #[arg(long, default_value_t = 1000)]
    pub jobs: usize,
    /// Sizes of the generated jobs: machine (the Lublin-Feitelson model sized to the machine, the
    /// default), lublin:N (the model sized to N CPUs, only the jobs that fit the machine kept: the
    /// study's words) or trace:FILE (sizes drawn from an SWF trace's jobs that fit the machine).
    #[arg(long, default_value = "machine")]
    pub job_sizes: JobSizes,
    /// Multiply run times by this.
    #[arg(long, default_value_t = 1.0)]
    pub runtime_scale: f64,
    /// Scale inter-arrival times to reach this offered load on --procs CPUs.
    #[arg(long)]
    pub load: Option<f64>,
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
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
        WorkloadCommand::Fit(args) => fit_trace(args),
        WorkloadCommand::Import(args) => import_trace(args),
    }
}

fn import_trace(args: &ImportArgs) -> Result<(), String> {
    let resource = alibaba_gpu::Resource::parse(&args.resource).ok_or("--resource must be gpu or cpu")?;
    let imported = alibaba_gpu::read_pod_list_path(&args.input, resource)?;
    if imported.workload.jobs.is_empty() {
        return Err(format!("{}: no job to write ({})", args.input.display(), imported.describe()));
    }
    write_atomically(&args.out, &imported.workload)?;
    eprintln!("{} -> {}", imported.describe(), args.out.display());
    Ok(())
}

/// The workload the flags describe, its header noting how it was made.
pub fn generated(spec: &GenerateSpec) -> Result<LoadedWorkload, String> {
    let hyper_erlang_params = match (spec.model.as_str(), &spec.params) {
        ("hyper-erlang", None) => {
            return Err("--model hyper-erlang needs --params FILE (from `cosched workload fit`)".into())
        }
        ("hyper-erlang", Some(path)) => Some(path.clone()),
        (_, Some(_)) => return Err("--params goes with --model hyper-erlang".into()),
        _ => None,
    };
    let procs = match (&hyper_erlang_params, spec.procs) {
        (_, Some(p)) => p,
        (Some(path), None) => {
            let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
            FittedModel::from_text(&text).map_err(|e| format!("{}: {e}", path.display()))?.procs()
        }
        (None, None) => 32,
    };
    if procs == 0 || spec.jobs == 0 {
        return Err("--procs and --jobs must be at least 1".into());
    }
    if !(spec.runtime_scale.is_finite() && spec.runtime_scale > 0.0) {
        return Err(format!("--runtime-scale must be positive, got {}", spec.runtime_scale));
    }
    let workload_spec = WorkloadSpec {
        trace: None,
        skip_bad_lines: false,
        drop_oversized: false,
        drop_statuses: Vec::new(),
        jobs: Some(spec.jobs),
        model_procs: procs,
        runtime_scale: spec.runtime_scale,
        target_load: spec.load,
        seed: spec.seed,
        hyper_erlang_params,
        job_sizes: spec.job_sizes.clone(),
    };
    let mut loaded = load_workload(&workload_spec, procs)?;
    loaded.workload.set_header_value("Note", &loaded.report.describe());
    Ok(loaded)
}

fn generate(args: &GenerateArgs) -> Result<(), String> {
    let loaded = generated(&args.spec)?;
    write_atomically(&args.out, &loaded.workload)?;
    eprintln!("{} -> {}", loaded.report.describe(), args.out.display());
    Ok(())
}

/// Write a trace beside its destination and rename it there, so a failure leaves no partial file.
pub fn write_atomically(path: &std::path::Path, workload: &Workload) -> Result<(), String> {
    let gz = swf::is_gzip_path(path);
    crate::output::write_file_atomically(path, |file| swf::write_file(file, gz, workload))
}

fn machine_procs(workload: &cosched_workload::Workload, procs: Option<u32>) -> Result<u32, String> {
    Ok(match procs {
        Some(0) => return Err("--procs must be at least 1".into()),
        Some(p) => p,
        None => workload.max_procs().or_else(|| workload.jobs.iter().map(|j| j.procs).max()).unwrap_or(1),
    })
}

fn inspect_trace(args: &InspectArgs) -> Result<(), String> {
    let workload =
        swf::read_path(&args.trace, ReadOptions { skip_bad_lines: args.skip_bad_lines }).map_err(|e| e.to_string())?;
    println!("{}", summary_text(&workload, args.procs)?);
    Ok(())
}

/// The model `workload fit` fits by default (shared arrivals), on a machine of `procs` CPUs
/// (default: its MaxProcs).
pub fn fitted(workload: &Workload, procs: Option<u32>, source: &str) -> Result<FittedModel, String> {
    fitted_with_arrivals(workload, procs, "shared", source)
}

/// [`fitted`] with the arrivals `workload fit --arrivals` names: shared or per-class.
pub fn fitted_with_arrivals(
    workload: &Workload,
    procs: Option<u32>,
    arrivals: &str,
    source: &str,
) -> Result<FittedModel, String> {
    let procs = machine_procs(workload, procs)?;
    let model = match arrivals {
        "shared" => TraceModel::fit(&workload.jobs, procs).map(|m| FittedModel::Shared(Box::new(m))),
        "per-class" => HyperErlangModel::fit(&workload.jobs, procs).map(FittedModel::PerClass),
        other => return Err(format!("--arrivals must be shared or per-class, not {other}")),
    };
    model.map_err(|e| format!("{source}: {e}"))
}

/// The summary `workload inspect` prints.
pub fn summary_text(workload: &Workload, procs: Option<u32>) -> Result<String, String> {
    let procs = machine_procs(workload, procs)?;
    Ok(inspect::summarize(workload, procs).to_string().trim_end().to_string())
}

fn fit_trace(args: &FitArgs) -> Result<(), String> {
    let workload =
        swf::read_path(&args.trace, ReadOptions { skip_bad_lines: args.skip_bad_lines }).map_err(|e| e.to_string())?;
    let model = fitted_with_arrivals(&workload, args.procs, &args.arrivals, &args.trace.display().to_string())?;
    println!("{}", model.to_string().trim_end());
    std::fs::write(&args.out, model.to_text()).map_err(|e| format!("cannot write {}: {e}", args.out.display()))?;
    eprintln!("parameters saved to {}", args.out.display());
    Ok(())
}
