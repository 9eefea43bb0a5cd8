//! `cosched bench slowdown`: `j` simultaneous copies of a command under each
//! policy; table, CSV, JSON and a plot of `s_j` against `j`.

use crate::output::{csv_field, num, push_row, OutputDir};
use crate::plot::{indexed_style, svg_to_png, LineChart, Marker, Series, Style};
use clap::Args;
use cosched_bench::policy::Policy;
use cosched_bench::slowdown::{self, Point, Sample, SlowdownConfig, SlowdownReport};
use cosched_runtime::trusted_source::CheckedCommand;
use std::io::Write;
use std::path::PathBuf;
use std::time::Duration;

#[derive(Args, Debug)]
pub struct BenchSlowdownArgs {
    /// Numbers of simultaneous copies (must include 1: the baseline t_1).
    #[arg(long, value_delimiter = ',', default_value = "1,2,4")]
    pub jobs: Vec<u32>,
    /// Runs of each (policy, j), interleaved across policies.
    #[arg(long, default_value_t = 5)]
    pub repeat: u32,
    /// Runs of one copy under the first policy before measuring, thrown away: the first run after a build or a
    /// quiet spell reads the program, its libraries and its data from cold caches (0 to 10).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(0..=10))]
    pub warmup: u32,
    /// Policies, comma-separated: none (started directly), local (cosched
    /// local class), gang[:SLICE] (cosched gang scheduling, e.g. gang:10ms,
    /// gang:100ms; default slice 10 ms), slurm (each copy a Slurm job, gang
    /// scheduled by Slurm at 5 s slices), slurm+cosched[:SLICE] (each copy a
    /// Slurm job on shared CPUs, gang scheduled by cosched through its SPANK
    /// plugin). The Slurm policies start a private Slurm with scripts/slurm.
    #[arg(long, value_delimiter = ',', default_value = "local,gang:10ms")]
    pub policy: Vec<Policy>,
    /// CPUs each copy asks the scheduler for (default: all of this machine's; with --nodes, one per node).
    #[arg(long)]
    pub cpus: Option<u32>,
    /// Run the copies across a private cluster of this many nodes on this host instead: a controller and an
    /// agent per node, each node a network namespace pinned to a CPU of its own (so at most this machine's
    /// CPUs). Each copy is submitted as an MPI job with one rank per node, whose ranks talk over TCP; the
    /// command is its launcher (for example mpirun --bind-to none -np N ...). Local and gang policies only.
    #[arg(long, default_value_t = 1)]
    pub nodes: u32,
    /// Folder for the results (table.txt, points.csv, samples.csv, report.json,
    /// slowdown.svg/png) and each run's output (runs/).
    #[arg(long, default_value = "slowdown-results")]
    pub out: PathBuf,
    /// Give up on a run after this many seconds (its copies are killed).
    #[arg(long, default_value_t = 3600.0)]
    pub timeout_s: f64,
    /// The Slurm helper script, for the Slurm policies.
    #[arg(long, default_value = "scripts/slurm")]
    pub slurm_script: PathBuf,
    /// The cosched SPANK plugin, for slurm+cosched (built by `make -C clients/slurm`).
    #[arg(long, default_value = "clients/slurm/build/cosched_spank.so")]
    pub spank_plugin: PathBuf,
    /// A machine file of `cosched calibrate`: when done, run the same experiments in the simulator on it
    /// and print the prediction beside the measurement (as `cosched predict`; also written to
    /// prediction.md). The command must run one of the reference programs of apps/.
    #[arg(long, value_name = "MACHINE")]
    pub predict_with: Option<PathBuf>,
    /// Print the report as JSON instead of the table.
    #[arg(long)]
    pub json: bool,
    /// The command each copy runs, after `--`.
    #[arg(last = true, required = true)]
    pub command: Vec<String>,
}

pub fn run(args: &BenchSlowdownArgs) -> Result<(), String> {
    let machine = args.predict_with.as_deref().map(crate::sim_cmd::read_machine).transpose()?;
    if let Some(machine) = &machine {
        // Refused before anything is measured: what the simulator could not take after it.
        use cosched_lab::slowdown_prediction::{predictable_program, scheme_for_tasks, Layout};
        let layout = Layout::new(args.nodes, machine);
        let program = predictable_program(&args.command).map_err(|e| format!("--predict-with: {e}"))?;
        let tasks = program.structure().map_err(|e| format!("--predict-with: {e}"))?.tasks;
        for policy in &args.policy {
            scheme_for_tasks(&policy.to_string(), tasks, layout).map_err(|e| format!("--predict-with: {e}"))?;
        }
    }
    let config = config_from(args)?;
    config.validate()?;
    if nix::unistd::geteuid().is_root() {
        // Root writes its files by name in --out: nobody else may have made it, or be able to change it or a
        // folder above it, or they could put a link where root writes. Checked first: the output check makes
        // missing folders.
        cosched_runtime::private_dir::ensure(&args.out, "--out").map_err(|e| e.to_string())?;
    }
    OutputDir::check(&args.out)?;
    std::fs::create_dir_all(&args.out).map_err(|e| format!("creating {}: {e}", args.out.display()))?;
    std::fs::write(args.out.join(".cosched-output"), "written by cosched\n").map_err(|e| e.to_string())?;
    let samples_path = args.out.join("samples.csv");
    let mut samples_csv =
        std::fs::File::create(&samples_path).map_err(|e| format!("{}: {e}", samples_path.display()))?;
    let _ = samples_csv.write_all(SAMPLE_HEADER.as_bytes());
    let report = slowdown::run(&config, |sample, step| {
        let (done, total) = match step {
            slowdown::Step::Warmup { done, total } => {
                eprintln!("[warm-up {done}/{total}] {} j=1: {:.3} s, not measured", sample.policy, sample.elapsed_s);
                return;
            }
            slowdown::Step::Measured { done, total } => (done, total),
        };
        // Saved as measured, so a failure later loses nothing already measured.
        let _ = samples_csv.write_all(sample_row(sample).as_bytes());
        eprintln!(
            "[{done}/{total}] {} j={} repeat {}: {:.3} s{}{}{}",
            sample.policy,
            sample.jobs,
            sample.repeat,
            sample.elapsed_s,
            sample.cpu_s.map_or(String::new(), |c| format!(", {c:.2} CPU-s")),
            sample.overlap.map_or(String::new(), |o| format!(", {:.1} % overlap", 100.0 * o)),
            sample.machine_cpu.map_or(String::new(), |m| format!(
                "; the machine's CPUs: {:.2} CPU-s busy, {:.2} stolen",
                m.busy_s, m.steal_s
            ))
        );
    })?;
    write_results(args, &report)?;
    match machine {
        Some(machine) => crate::predict_cmd::print_and_write(&machine, &report, &args.out),
        None => Ok(()),
    }
}

fn config_from(args: &BenchSlowdownArgs) -> Result<SlowdownConfig, String> {
    let all_cpus = std::thread::available_parallelism().map_or(1, |n| n.get() as u32);
    let cpus_per_job = args.cpus.unwrap_or(if args.nodes > 1 { args.nodes } else { all_cpus });
    // A cluster's nodes are checked against the CPUs by the experiment (a node is one CPU).
    if args.nodes <= 1 && (cpus_per_job == 0 || cpus_per_job > all_cpus) {
        return Err(format!("--cpus {cpus_per_job}: this machine has {all_cpus} CPUs"));
    }
    if args.timeout_s.is_nan() || args.timeout_s <= 0.0 {
        return Err("--timeout-s must be positive".into());
    }
    let mut policies = Vec::new();
    for p in &args.policy {
        if !policies.contains(p) {
            policies.push(*p);
        }
    }
    let cwd = std::env::current_dir().map_err(|e| format!("this process's folder: {e}"))?;
    Ok(SlowdownConfig {
        command: CheckedCommand::check(&args.command, &cwd, "the command")?,
        cwd,
        jobs: args.jobs.clone(),
        repeat: args.repeat,
        warmup: args.warmup,
        policies,
        cpus_per_job,
        nodes: args.nodes,
        cosched_exe: std::env::current_exe().map_err(|e| format!("finding this program: {e}"))?,
        slurm_script: absolute(&args.slurm_script)?,
        spank_plugin: absolute(&args.spank_plugin)?,
        work_dir: absolute(&args.out)?.join("runs"),
        timeout: Duration::from_secs_f64(args.timeout_s),
        stop: crate::interrupt::stop_on_interrupt()?,
    })
}

/// `path` from the root: Slurm's daemons and plugins do not run in this folder.
fn absolute(path: &std::path::Path) -> Result<PathBuf, String> {
    std::path::absolute(path).map_err(|e| format!("{}: {e}", path.display()))
}

const SAMPLE_HEADER: &str =
    "policy,jobs,repeat,elapsed_s,cpu_s,peak_rss_bytes,overlap,copy_elapsed_s,machine_busy_s,machine_steal_s\n";

fn sample_row(s: &Sample) -> String {
    let copies: Vec<String> = s.copy_elapsed_s.iter().map(|t| num(*t)).collect();
    let mut row = String::new();
    push_row(
        &mut row,
        &[
            csv_field(&s.policy),
            s.jobs.to_string(),
            s.repeat.to_string(),
            num(s.elapsed_s),
            s.cpu_s.map_or(String::new(), num),
            s.peak_rss_bytes.map_or(String::new(), |b| b.to_string()),
            s.overlap.map_or(String::new(), num),
            csv_field(&copies.join(" ")),
            s.machine_cpu.map_or(String::new(), |m| num(m.busy_s)),
            s.machine_cpu.map_or(String::new(), |m| num(m.steal_s)),
        ],
    );
    row
}

fn write_results(args: &BenchSlowdownArgs, report: &SlowdownReport) -> Result<(), String> {
    let table = table_text(report);
    let json = serde_json::to_string_pretty(report).map_err(|e| e.to_string())?;
    let svg = chart(report).to_svg();
    let write = |name: &str, bytes: &[u8]| {
        std::fs::write(args.out.join(name), bytes).map_err(|e| format!("writing {name}: {e}"))
    };
    write("table.txt", table.as_bytes())?;
    write("points.csv", points_csv(&report.points).as_bytes())?;
    write("report.json", json.as_bytes())?;
    write("slowdown.svg", svg.as_bytes())?;
    write("slowdown.png", &svg_to_png(&svg)?)?;
    if args.json {
        println!("{json}");
    } else {
        println!("{table}");
        println!("results in {}/ (table.txt, points.csv, samples.csv, report.json, slowdown.png)", args.out.display());
    }
    Ok(())
}

fn table_text(report: &SlowdownReport) -> String {
    let mut out = format!(
        "{} copies of: {}\n{} CPUs per job, {} repeats; mean ± standard error\n\n",
        report.points.iter().map(|p| p.jobs).max().unwrap_or(1),
        report.command.join(" "),
        report.cpus_per_job,
        report.repeat
    );
    let width = report.points.iter().map(|p| p.policy.len()).max().unwrap_or(0).max(6);
    out += &format!(
        "{:<width$} {:>2}  {:>17}  {:>12}  {:>5}  {:>16}  {:>15}  {:>11}  {:>5}  {:>9}\n",
        "policy", "j", "t_j (s)", "s_j", "s_j/j", "per-job (s)", "slowest/fastest", "overlap %", "%CPU", "peak MiB"
    );
    for p in &report.points {
        out += &format!(
            "{:<width$} {:>2}  {:>8.3} ± {:<6.3}  {:>5.2} ± {:<4.2}  {:>5.2}  {:>7.3} ± {:<6.3}  {:>15.2}  {:>11}  {:>5}  {:>9}\n",
            p.policy,
            p.jobs,
            p.elapsed_s.mean,
            p.elapsed_s.std_error,
            p.slowdown.value,
            p.slowdown.std_error,
            p.slowdown.value / p.jobs as f64,
            p.copy_elapsed_s.mean,
            p.copy_elapsed_s.std_error,
            p.fairness_ratio,
            p.overlap.map_or("-".into(), |o| format!("{:.1} ± {:.1}", 100.0 * o.mean, 100.0 * o.std_error)),
            p.cpu_percent.map_or("-".into(), |c| format!("{c:.0}")),
            p.peak_rss_bytes.map_or("-".into(), |b| format!("{:.1}", b as f64 / (1 << 20) as f64)),
        );
    }
    out.trim_end().to_string()
}

fn points_csv(points: &[Point]) -> String {
    let mut text = "policy,jobs,runs,t_s,t_se_s,slowdown,slowdown_se,copy_mean_s,copy_se_s,fairness_ratio,cpu_s,cpu_se_s,cpu_percent,peak_rss_bytes,overlap,overlap_se\n".to_string();
    for p in points {
        push_row(
            &mut text,
            &[
                csv_field(&p.policy),
                p.jobs.to_string(),
                p.elapsed_s.n.to_string(),
                num(p.elapsed_s.mean),
                num(p.elapsed_s.std_error),
                num(p.slowdown.value),
                num(p.slowdown.std_error),
                num(p.copy_elapsed_s.mean),
                num(p.copy_elapsed_s.std_error),
                num(p.fairness_ratio),
                p.cpu_s.map_or(String::new(), |c| num(c.mean)),
                p.cpu_s.map_or(String::new(), |c| num(c.std_error)),
                p.cpu_percent.map_or(String::new(), num),
                p.peak_rss_bytes.map_or(String::new(), |b| b.to_string()),
                p.overlap.map_or(String::new(), |o| num(o.mean)),
                p.overlap.map_or(String::new(), |o| num(o.std_error)),
            ],
        );
    }
    text
}

/// `s_j` against `j` per policy, with standard-error bars and the line `s_j = j`.
pub fn chart(report: &SlowdownReport) -> LineChart {
    let max_j = report.points.iter().map(|p| p.jobs).max().unwrap_or(1) as f64;
    let mut series: Vec<Series> = Vec::new();
    let mut top = max_j;
    for (i, policy) in report.policies().into_iter().enumerate() {
        let points: Vec<&Point> = report.points.iter().filter(|p| p.policy == policy).collect();
        top = points.iter().map(|p| p.slowdown.value + p.slowdown.std_error).fold(top, f64::max);
        series.push(Series {
            name: policy.to_string(),
            style: indexed_style(i),
            points: points.iter().map(|p| (p.jobs as f64, p.slowdown.value)).collect(),
            clipped_from: None,
            y_errors: points.iter().map(|p| p.slowdown.std_error).collect(),
            x_errors: vec![],
            y_intervals: Vec::new(),
        });
    }
    series.push(Series {
        name: "ideal s_j = j".into(),
        style: Style { colour: "#999999", marker: Marker::HollowCircle, dash: "4,3" },
        points: vec![(1.0, 1.0), (max_j, max_j)],
        clipped_from: None,
        y_errors: vec![],
        x_errors: vec![],
        y_intervals: Vec::new(),
    });
    LineChart {
        title: format!("Slowdown of j simultaneous copies: {}", shorten(&report.command.join(" "), 40)),
        x_label: "j, copies started together".into(),
        y_label: "slowdown s_j = t_j / t_1".into(),
        x_range: (0.0, max_j.max(2.0)),
        y_range: (0.0, top.ceil().max(2.0)),
        log_y: false,
        series,
        legend_notes: vec!["bars: ± one standard error".into()],
        max_markers: None,
    }
}

fn shorten(text: &str, max_chars: usize) -> String {
    if text.chars().count() <= max_chars {
        text.to_string()
    } else {
        format!("{}…", text.chars().take(max_chars).collect::<String>())
    }
}
