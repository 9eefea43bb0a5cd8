//! `cosched pipeline`: out-of-core columnsort on the pipeline framework, the
//! priority study over it, and the framework's per-buffer overhead against
//! oneTBB.

use crate::output::{csv_field, num, push_row, OutputDir};
use crate::plot::{indexed_style, svg_to_png, GroupedBarChart, LineChart, Series};
use crate::trusted_source::check_nobody_else_could_change;
use clap::{Args, Subcommand, ValueEnum};
use cosched_bench::pipeline::{self as study, OverheadConfig, OverheadRow, StudyConfig, StudyResult};
use cosched_pipeline::columnsort::{self, data, SortConfig, StagePolicy};
use std::path::{Path, PathBuf};

#[derive(Subcommand, Debug)]
pub enum PipelineCommand {
    /// Sort a file of fixed-size records with out-of-core columnsort (3 passes of
    /// read → sort → exchange → permute → write). Without --input, generates
    /// --records random records first; checks the whole output afterwards.
    Columnsort(ColumnsortArgs),
    /// The priority study: columnsort under each scheduling policy, many runs
    /// interleaved, each its own process; user/sys/wall/%CPU as mean ± standard
    /// error, Welch's t-test against the first policy, and the regression of
    /// wall time on user and system time. Writes CSV, JSON and plots.
    Bench(PipelineBenchArgs),
    /// The framework's per-buffer cost with empty stages, against oneTBB's
    /// parallel_pipeline (bench/tbb) in the same run.
    Overhead(OverheadArgs),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Variant {
    /// 16-byte records, comparison sort of whole records on two sort threads, data in the page cache.
    Compute,
    /// 128-byte records, radix sort of the keys, fdatasync after every write
    /// and the page cache dropped after every pass.
    Io,
}

impl Variant {
    fn config(self) -> SortConfig {
        match self {
            Variant::Compute => SortConfig::compute_bound(),
            Variant::Io => SortConfig::io_bound(),
        }
    }
    fn name(self) -> &'static str {
        match self {
            Variant::Compute => "compute",
            Variant::Io => "io",
        }
    }
}

#[derive(Args, Debug, Clone)]
pub struct SortOptions {
    /// The compute-bound or the I/O-bound configuration.
    #[arg(long, value_enum, default_value_t = Variant::Compute)]
    pub config: Variant,
    /// Bytes per record (the key is the first 8, big-endian); default 16 for compute, 128 for io.
    #[arg(long)]
    pub record_bytes: Option<usize>,
    /// Records per column (r); default: the valid shape with the most columns.
    /// Columnsort needs s = N/r to divide r and r >= 2(s-1)^2.
    #[arg(long)]
    pub rows: Option<u64>,
    /// Buffers in the pool (each holds one and a half columns, twice).
    #[arg(long, default_value_t = 4)]
    pub pool: usize,
    /// Copies of the sort stage (fork/join, rejoined in order); default 2 for compute, 1 for io.
    #[arg(long)]
    pub sort_copies: Option<usize>,
}

impl SortOptions {
    fn sort_config(&self, policy: StagePolicy) -> SortConfig {
        let base = self.config.config();
        SortConfig {
            record_bytes: self.record_bytes.unwrap_or(base.record_bytes),
            rows: self.rows,
            pool: self.pool,
            sort_copies: self.sort_copies.unwrap_or(base.sort_copies),
            policy,
            ..base
        }
    }
}

#[derive(Args, Debug)]
pub struct ColumnsortArgs {
    #[command(flatten)]
    pub sort: SortOptions,
    /// The scheduling policy of the stages' threads: default | io-nice:N |
    /// compute-nice:N | io-slice:MSms | compute-batch | adjust-once | adjust-reversible.
    #[arg(long, default_value = "default")]
    pub policy: StagePolicy,
    /// Sort this file instead of generating one.
    #[arg(long)]
    pub input: Option<PathBuf>,
    /// Where the sorted file goes (default: beside the input, with .sorted).
    #[arg(long)]
    pub output: Option<PathBuf>,
    /// Records to generate when there is no --input.
    #[arg(long, default_value_t = 1 << 20)]
    pub records: u64,
    /// Seed of the generated keys.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Folder for the generated input and the output (default: a temporary folder, removed afterwards).
    #[arg(long)]
    pub dir: Option<PathBuf>,
    /// Do not check the output (the check reads input and output once more).
    #[arg(long)]
    pub no_verify: bool,
    /// Print nothing but errors and refused controls.
    #[arg(long)]
    pub quiet: bool,
}

#[derive(Args, Debug)]
pub struct PipelineBenchArgs {
    #[command(flatten)]
    pub sort: SortOptions,
    /// Policies to compare, comma-separated; the first is the baseline of the t-tests. Names: default,
    /// io-nice:N, compute-nice:N, io-slice:MSms, compute-batch, adjust-once, adjust-reversible (see
    /// `cosched pipeline columnsort --help`). Controls the kernel refuses (negative nice without
    /// privilege) are listed under the table.
    #[arg(long, value_delimiter = ',', default_value = "default,io-nice:+5,io-nice:-5,adjust-once,adjust-reversible")]
    pub policies: Vec<StagePolicy>,
    /// Runs of each policy, interleaved.
    #[arg(long, default_value_t = 20)]
    pub repeats: usize,
    /// Records to sort (default 4 Mi for compute, 2 Mi of the larger records for io).
    #[arg(long)]
    pub records: Option<u64>,
    /// Where a fresh folder for the data files is made, and removed after (default: the system's temporary folder).
    #[arg(long)]
    pub data_dir: Option<PathBuf>,
    /// Folder for the results (summary.csv, samples.csv, report.json, runs.png, means.png, table.txt).
    #[arg(long, default_value = "pipeline-bench")]
    pub out: PathBuf,
}

#[derive(Args, Debug)]
pub struct OverheadArgs {
    /// Stage counts (each at least 2: a source and a sink).
    #[arg(long, value_delimiter = ',', default_value = "3,5")]
    pub stages: Vec<usize>,
    /// Buffers in the pool (oneTBB: live tokens).
    #[arg(long, default_value_t = 8)]
    pub pool: usize,
    /// Buffers per timed run.
    #[arg(long, default_value_t = 1_000_000)]
    pub items: u64,
    /// Timed runs of each, interleaved.
    #[arg(long, default_value_t = 10)]
    pub repeats: usize,
    /// oneTBB's worker threads, and the threads our stages share in the matched mapping (default: the CPUs).
    #[arg(long)]
    pub threads: Option<usize>,
    /// The oneTBB program (built by `make -C bench/tbb`).
    #[arg(long, default_value = "bench/tbb/build/tbb_pipeline_overhead")]
    pub tbb: PathBuf,
    /// Also write the table and overhead.csv/json into this folder.
    #[arg(long)]
    pub out: Option<PathBuf>,
}

pub fn run(command: &PipelineCommand) -> Result<(), String> {
    match command {
        PipelineCommand::Columnsort(args) => columnsort_cmd(args),
        PipelineCommand::Bench(args) => bench_cmd(args),
        PipelineCommand::Overhead(args) => overhead_cmd(args),
    }
}

fn columnsort_cmd(args: &ColumnsortArgs) -> Result<(), String> {
    let config = args.sort.sort_config(args.policy.clone());
    let temp = match (&args.input, &args.dir) {
        (None, None) => Some(tempfile::tempdir().map_err(|e| format!("temporary folder: {e}"))?),
        _ => None,
    };
    let dir = args.dir.clone().or_else(|| temp.as_ref().map(|t| t.path().to_path_buf()));
    if let Some(dir) = &dir {
        std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    }
    let input = match &args.input {
        Some(input) => input.clone(),
        None => {
            let input = dir.as_ref().expect("a folder when generating").join("columnsort.in");
            say(
                args.quiet,
                &format!("generating {} records of {} bytes in {}", args.records, config.record_bytes, input.display()),
            );
            data::generate(&input, args.records, config.record_bytes, args.seed)?;
            input
        }
    };
    let output = args.output.clone().unwrap_or_else(|| with_suffix(&input, ".sorted"));
    let expected = if args.no_verify { None } else { Some(data::digest(&input, config.record_bytes)?) };
    let report = columnsort::sort_file(&input, &output, &config)?;
    for refused in report.refused() {
        eprintln!("warning: refused control: {refused}");
    }
    let wall: f64 = report.passes.iter().map(|p| p.wall.as_secs_f64()).sum();
    let mib = (report.shape.records() * config.record_bytes as u64) as f64 / (1 << 20) as f64;
    let passes: Vec<String> = report.passes.iter().map(|p| format!("{:.3}", p.wall.as_secs_f64())).collect();
    say(
        args.quiet,
        &format!(
            "sorted {mib:.1} MiB ({}) under {} in {wall:.3} s (passes {} s)",
            report.shape,
            args.policy,
            passes.join(" + ")
        ),
    );
    let adjustments: usize = report.passes.iter().map(|p| p.adjustments.len()).sum();
    if adjustments > 0 {
        say(args.quiet, &format!("{adjustments} priority adjustments while running"));
    }
    if let Some(expected) = expected {
        data::verify(&output, config.record_bytes, &expected)?;
        say(args.quiet, &format!("verified: {} records in order, the same records as the input", expected.records));
    }
    if temp.is_none() && args.input.is_none() {
        say(args.quiet, &format!("kept {} and {}", input.display(), output.display()));
    }
    Ok(())
}

fn say(quiet: bool, line: &str) {
    if !quiet {
        println!("{line}");
    }
}

fn with_suffix(path: &Path, suffix: &str) -> PathBuf {
    let mut name = path.as_os_str().to_os_string();
    name.push(suffix);
    PathBuf::from(name)
}

fn bench_cmd(args: &PipelineBenchArgs) -> Result<(), String> {
    if args.repeats < 2 || args.policies.is_empty() {
        return Err("--repeats must be at least 2 (for the standard errors) and --policies not empty".into());
    }
    let config = args.sort.sort_config(StagePolicy::Default);
    let records = args.records.unwrap_or(match args.sort.config {
        Variant::Compute => 4 << 20,
        Variant::Io => 2 << 20,
    });
    columnsort::shape_for(records, &config)?;
    let checked_out = OutputDir::check(&args.out)?;
    let mut extra_args =
        vec!["--pool".to_string(), args.sort.pool.to_string(), "--sort-copies".into(), config.sort_copies.to_string()];
    if let Some(rows) = args.sort.rows {
        extra_args.extend(["--rows".to_string(), rows.to_string()]);
    }
    // Made new (mkdtemp) in the folder given: a fixed name in a folder others may write could be theirs.
    let data_base = args.data_dir.clone().unwrap_or_else(std::env::temp_dir);
    let data_dir = tempfile::Builder::new()
        .prefix("cosched-pipeline-bench-")
        .tempdir_in(&data_base)
        .map_err(|e| format!("a folder for the data in {}: {e}", data_base.display()))?;
    let study_config = StudyConfig {
        cosched: std::env::current_exe().map_err(|e| format!("finding the cosched binary: {e}"))?,
        data_dir: data_dir.path().to_path_buf(),
        variant: args.sort.config.name().to_string(),
        records,
        record_bytes: config.record_bytes,
        policies: args.policies.iter().map(|p| p.to_string()).collect(),
        repeats: args.repeats,
        extra_args,
    };
    eprintln!(
        "columnsort {} ({records} records of {} bytes): {} policies x {} runs",
        study_config.variant,
        config.record_bytes,
        args.policies.len(),
        args.repeats
    );
    let result = study::run_study(&study_config, |s, done, total| {
        eprintln!(
            "[{done}/{total}] {:<18} wall {:.3} s  user {:.3} s  sys {:.3} s  {:.0}% CPU",
            s.policy, s.wall_s, s.user_s, s.sys_s, s.cpu_percent
        );
    });
    drop(data_dir); // removed with the data
    let result = result?;
    let table = study_table(&study_config, &result);
    print!("{table}");
    write_study(&checked_out, &table, &result)
}

fn pm(e: &cosched_bench::stats::Estimate, digits: usize) -> String {
    format!("{:.*} ± {:.*}", digits, e.mean, digits, e.std_error)
}

fn study_table(config: &StudyConfig, result: &StudyResult) -> String {
    let mut t = format!(
        "columnsort {}: {} records of {} bytes, {} runs per policy (interleaved)\n\n",
        config.variant, config.records, config.record_bytes, config.repeats
    );
    t += &format!(
        "{:<18} {:>16} {:>16} {:>16} {:>12} {:>8} {:>9} {:>10}\n",
        "policy", "user s", "sys s", "wall s", "% CPU", "wall Δ", "t", "p"
    );
    let base = result.summaries.first().map(|s| s.wall_s.mean).unwrap_or(f64::NAN);
    for s in &result.summaries {
        let (t_stat, p) =
            s.wall_vs_first.map_or(("".into(), "".into()), |w| (format!("{:.2}", w.t), format!("{:.2e}", w.p)));
        t += &format!(
            "{:<18} {:>16} {:>16} {:>16} {:>12} {:>7.1}% {:>9} {:>10}\n",
            s.policy,
            pm(&s.user_s, 3),
            pm(&s.sys_s, 3),
            pm(&s.wall_s, 3),
            pm(&s.cpu_percent, 1),
            100.0 * (s.wall_s.mean / base - 1.0),
            t_stat,
            p
        );
    }
    for line in &result.refused {
        t += &format!("REFUSED (this policy did not run as named): {line}\n");
    }
    if let Some(r) = &result.regression {
        t += &format!(
            "\nwall = {:.3} + {:.3}·user + {:.3}·sys   (t = {:.1}, {:.1}, {:.1}; R² = {:.3}; n = {})\n",
            r.intercept.value,
            r.slopes[0].value,
            r.slopes[1].value,
            r.intercept.t,
            r.slopes[0].t,
            r.slopes[1].t,
            r.r_squared,
            r.n
        );
    }
    t
}

fn write_study(out: &crate::output::CheckedOut, table: &str, result: &StudyResult) -> Result<(), String> {
    let dir = OutputDir::begin(out)?;
    dir.write("table.txt", table)?;
    let mut samples = "policy,repeat,user_s,sys_s,wall_s,cpu_percent\n".to_string();
    for s in &result.samples {
        push_row(
            &mut samples,
            &[
                csv_field(&s.policy),
                s.repeat.to_string(),
                num(s.user_s),
                num(s.sys_s),
                num(s.wall_s),
                num(s.cpu_percent),
            ],
        );
    }
    dir.write("samples.csv", &samples)?;
    let mut summary =
        "policy,n,user_s,user_se,sys_s,sys_se,wall_s,wall_se,cpu_percent,cpu_se,t_vs_first,df,p\n".to_string();
    for s in &result.summaries {
        let test = s.wall_vs_first.map_or(vec![String::new(); 3], |w| vec![num(w.t), num(w.df), num(w.p)]);
        let mut row = vec![csv_field(&s.policy), s.wall_s.n.to_string()];
        for e in [&s.user_s, &s.sys_s, &s.wall_s, &s.cpu_percent] {
            row.extend([num(e.mean), num(e.std_error)]);
        }
        row.extend(test);
        push_row(&mut summary, &row);
    }
    dir.write("summary.csv", &summary)?;
    dir.write("report.json", &serde_json::to_string_pretty(result).map_err(|e| e.to_string())?)?;
    write_png(&dir, "runs", &runs_chart(result).to_svg())?;
    write_png(&dir, "means", &means_chart(result).to_svg())?;
    let path = dir.commit()?;
    eprintln!("results in {}", path.display());
    Ok(())
}

fn write_png(dir: &OutputDir, name: &str, svg: &str) -> Result<(), String> {
    dir.write(&format!("{name}.svg"), svg)?;
    dir.write_bytes(&format!("{name}.png"), &svg_to_png(svg)?)
}

fn y_range(values: impl Iterator<Item = f64> + Clone) -> (f64, f64) {
    let lo = values.clone().fold(f64::INFINITY, f64::min);
    let hi = values.fold(f64::NEG_INFINITY, f64::max);
    let pad = ((hi - lo) * 0.1).max(hi * 0.01);
    ((lo - pad).max(0.0), hi + pad)
}

/// Every run's wall time in the order the runs were made.
fn runs_chart(result: &StudyResult) -> LineChart {
    let series = result
        .summaries
        .iter()
        .enumerate()
        .map(|(i, p)| Series {
            name: p.policy.clone(),
            style: indexed_style(i),
            points: result
                .samples
                .iter()
                .enumerate()
                .filter(|(_, s)| s.policy == p.policy)
                .map(|(i, s)| (i as f64 + 1.0, s.wall_s))
                .collect(),
            clipped_from: None,
            y_errors: Vec::new(),
            x_errors: Vec::new(),
            y_intervals: Vec::new(),
        })
        .collect();
    LineChart {
        title: "Columnsort wall time of every run, in the order run".into(),
        x_label: "run".into(),
        y_label: "wall time (s)".into(),
        x_range: (0.0, result.samples.len() as f64 + 1.0),
        y_range: y_range(result.samples.iter().map(|s| s.wall_s)),
        log_y: false,
        series,
        legend_notes: Vec::new(),
        max_markers: None,
    }
}

/// Mean wall time per policy with its standard error.
fn means_chart(result: &StudyResult) -> GroupedBarChart {
    GroupedBarChart {
        title: "Columnsort mean wall time by policy".into(),
        unit: "wall time (s)".into(),
        categories: result.summaries.iter().map(|p| p.policy.clone()).collect(),
        series_names: vec!["mean wall time".into()],
        values: result.summaries.iter().map(|p| vec![(p.wall_s.mean, p.wall_s.std_error)]).collect(),
        reference: None,
        note: Some("whiskers: ± one standard error".into()),
    }
}

fn overhead_cmd(args: &OverheadArgs) -> Result<(), String> {
    if args.stages.iter().any(|&s| s < 2) || args.pool == 0 || args.items == 0 || args.repeats == 0 {
        return Err("--stages must each be at least 2, and --pool, --items and --repeats at least 1".into());
    }
    let checked_out = args.out.as_deref().map(OutputDir::check).transpose()?;
    let tbb = ensure_tbb(&args.tbb)?;
    let threads = args.threads.unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
    let config = OverheadConfig {
        stages: args.stages.clone(),
        pool: args.pool,
        items: args.items,
        repeats: args.repeats,
        threads,
        tbb,
    };
    let rows = study::run_overhead(&config, |done, total| eprintln!("[{done}/{total}] rounds measured"))?;
    let table = overhead_table(&config, &rows);
    print!("{table}");
    if let Some(out) = &checked_out {
        let dir = OutputDir::begin(out)?;
        dir.write("table.txt", &table)?;
        let mut csv = "stages,framework,threads,ns_per_buffer,se,min,max,n\n".to_string();
        for r in &rows {
            let e = &r.ns_per_buffer;
            push_row(
                &mut csv,
                &[
                    r.stages.to_string(),
                    csv_field(&r.framework),
                    r.threads.to_string(),
                    num(e.mean),
                    num(e.std_error),
                    num(e.min),
                    num(e.max),
                    e.n.to_string(),
                ],
            );
        }
        dir.write("overhead.csv", &csv)?;
        dir.write("overhead.json", &serde_json::to_string_pretty(&rows).map_err(|e| e.to_string())?)?;
        dir.commit()?;
    }
    Ok(())
}

/// The oneTBB program, built with make when its source is at hand; both
/// only from places no other user could change (this command runs them).
fn ensure_tbb(path: &Path) -> Result<PathBuf, String> {
    if path.exists() {
        check_nobody_else_could_change(path, "--tbb")?;
        return Ok(path.to_path_buf());
    }
    let source = Path::new("bench/tbb");
    if path == Path::new("bench/tbb/build/tbb_pipeline_overhead") && source.join("Makefile").exists() {
        check_nobody_else_could_change(source, "bench/tbb")?;
        eprintln!("building the oneTBB baseline: make -C bench/tbb");
        let status = std::process::Command::new("make")
            .args(["-s", "-C", "bench/tbb"])
            .status()
            .map_err(|e| format!("make: {e}"))?;
        if status.success() && path.exists() {
            return Ok(path.to_path_buf());
        }
    }
    Err(format!(
        "{}: not found; build it with `make -C bench/tbb` (scripts/setup installs g++ and libtbb-dev), or give --tbb",
        path.display()
    ))
}

fn overhead_table(config: &OverheadConfig, rows: &[OverheadRow]) -> String {
    let mut t = format!(
        "per-buffer overhead, empty stages, pool of {}, {} buffers per run, {} runs each (interleaved)\n\n",
        config.pool, config.items, config.repeats
    );
    t += &format!(
        "{:>6}  {:<36} {:>7} {:>18} {:>9} {:>10}\n",
        "stages", "framework", "threads", "ns/buffer", "min", "vs oneTBB"
    );
    for r in rows {
        let tbb =
            rows.iter().find(|o| o.stages == r.stages && o.framework.starts_with("oneTBB")).map(|o| o.ns_per_buffer);
        let ratio = tbb.map_or(String::new(), |b| {
            let q = r.ns_per_buffer.ratio(&b);
            format!("{:.2} ± {:.2}", q.value, q.std_error)
        });
        t += &format!(
            "{:>6}  {:<36} {:>7} {:>18} {:>9.1} {:>10}\n",
            r.stages,
            r.framework,
            r.threads,
            pm(&r.ns_per_buffer, 1),
            r.ns_per_buffer.min,
            ratio
        );
    }
    t
}
