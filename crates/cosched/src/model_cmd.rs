//! `cosched model`: the optimistic model's predicted slowdowns, fed by the
//! microbenchmarks or by given costs, beside measured ones with the error
//! split into its causes.

use crate::output::read_bounded;
use clap::Args;
use cosched_bench::model::{self, CostParams, ErrorSplit, JobShape, Measured};
use cosched_bench::slowdown::{Point, SlowdownReport};
use serde::Serialize;
use serde_json::Value;
use std::path::PathBuf;

#[derive(Args, Debug)]
pub struct ModelArgs {
    /// Result files of `cosched bench ctxswitch --out` and `cosched bench pingpong --out` (repeatable).
    #[arg(long)]
    pub micro: Vec<PathBuf>,
    /// The ping-pong transport whose costs to use (jobs on one node talk over shared memory).
    #[arg(long, default_value = "shm")]
    pub transport: String,
    /// Context-switch cost α_c in µs (overrides --micro).
    #[arg(long)]
    pub alpha_c_us: Option<f64>,
    /// Message latency α in µs (overrides --micro).
    #[arg(long)]
    pub alpha_us: Option<f64>,
    /// Message time per double β in ns (overrides --micro).
    #[arg(long)]
    pub beta_ns: Option<f64>,
    /// CPU time per message α_CPU in µs (overrides --micro).
    #[arg(long)]
    pub alpha_cpu_us: Option<f64>,
    /// CPU time per double β_CPU in ns (overrides --micro).
    #[arg(long)]
    pub beta_cpu_ns: Option<f64>,
    /// The matrix multiply's shape: N,PxQ (e.g. 1024,2x1); needs --gamma3-ns or --mflops.
    #[arg(long)]
    pub mm: Option<String>,
    /// Panel width k of the matrix multiply.
    #[arg(long, default_value_t = 128)]
    pub k: u64,
    /// Time per flop of the level-3 BLAS kernel γ₃, in ns.
    #[arg(long)]
    pub gamma3_ns: Option<f64>,
    /// Or the kernel's speed per process in MFLOPS (γ₃ = 1 / speed).
    #[arg(long)]
    pub mflops: Option<f64>,
    /// Any job: seconds of computation per rank...
    #[arg(long)]
    pub compute_s: Option<f64>,
    /// ...messages each rank sends...
    #[arg(long, default_value_t = 0.0)]
    pub messages: f64,
    /// ...and doubles each rank sends.
    #[arg(long, default_value_t = 0.0)]
    pub doubles: f64,
    /// Ranks (processes) of one job (default: P·Q with --mm, else --cpus).
    #[arg(long)]
    pub ranks: Option<u32>,
    /// CPUs the jobs share (default: from --measured, else this machine's).
    #[arg(long)]
    pub cpus: Option<u32>,
    /// Values of j to predict.
    #[arg(long, value_delimiter = ',', default_value = "1,2,4")]
    pub jobs: Vec<u32>,
    /// A `cosched bench slowdown` result (its folder or report.json): compare with it. Without --mm or
    /// --compute-s the job's shape comes from what the program reported (compute_s, messages_per_rank,
    /// doubles_per_rank, p), as the reference programs in apps/ do.
    #[arg(long)]
    pub measured: Option<PathBuf>,
    /// Print JSON instead of tables.
    #[arg(long)]
    pub json: bool,
}

#[derive(Serialize)]
struct PolicyComparison {
    policy: String,
    shape: JobShape,
    t1_model_s: f64,
    t1_measured_s: f64,
    rows: Vec<ErrorSplit>,
}

#[derive(Serialize)]
struct Prediction {
    jobs: u32,
    t_s: f64,
    slowdown: f64,
}

pub fn run(args: &ModelArgs) -> Result<(), String> {
    let costs = cost_params(args)?;
    let measured = args.measured.as_ref().map(|p| read_report(p)).transpose()?;
    let cpus = args
        .cpus
        .or_else(|| measured.as_ref().map(|m| m.cpus_per_job))
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get() as u32));
    let mut out = format!(
        "costs: α_c {:.2} µs, α {:.2} µs, β {:.3} ns/double, α_CPU {:.2} µs, β_CPU {:.3} ns/double\n",
        costs.alpha_c_s * 1e6,
        costs.alpha_s * 1e6,
        costs.beta_s_per_double * 1e9,
        costs.alpha_cpu_s * 1e6,
        costs.beta_cpu_s_per_double * 1e9
    );
    let Some(report) = measured else {
        let shape = given_shape(args, cpus)?.ok_or("describe the job: --mm N,PxQ, --compute-s, or --measured")?;
        let t1_s = model::single_job_s(&shape, &costs);
        let rows: Vec<Prediction> = args
            .jobs
            .iter()
            .map(|&j| {
                let t_s = model::shared_time_s(j, t1_s, &shape, &costs);
                Prediction { jobs: j, t_s, slowdown: t_s / t1_s }
            })
            .collect();
        if args.json {
            println!(
                "{}",
                serde_json::to_string_pretty(&serde_json::json!({"costs": costs, "shape": shape, "predictions": rows}))
                    .unwrap_or_default()
            );
            return Ok(());
        }
        out += &shape_line(&shape);
        out += "  j     t_j (s)    s_j\n";
        for r in &rows {
            out += &format!("{:>3}  {:>10.3}  {:>5.2}\n", r.jobs, r.t_s, r.slowdown);
        }
        println!("{}", out.trim_end());
        return Ok(());
    };
    let comparisons = compare(args, &report, &costs, cpus)?;
    if args.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&serde_json::json!({"costs": costs, "policies": comparisons}))
                .unwrap_or_default()
        );
        return Ok(());
    }
    out += "s_j: model | measured | implied by one job's %CPU | implied by the j jobs' CPU time; \
            error = measured − model = cost + A2 + A1\n";
    for c in &comparisons {
        out += &format!("\n{}: t_1 model {:.3} s, measured {:.3} s; ", c.policy, c.t1_model_s, c.t1_measured_s);
        out += &shape_line(&c.shape);
        out += "  j   model  measured  %CPU-alone  CPU-shared    cost      A2      A1\n";
        for r in &c.rows {
            out += &format!(
                "{:>3}  {:>6.2}  {:>8.2}  {:>10.2}  {:>10.2}  {:>+6.2}  {:>+6.2}  {:>+6.2}\n",
                r.jobs, r.model, r.measured, r.from_cpu_alone, r.from_cpu_shared, r.cost_error, r.a2_error, r.a1_error
            );
        }
    }
    println!("{}", out.trim_end());
    Ok(())
}

fn shape_line(shape: &JobShape) -> String {
    format!(
        "job: {:.3} s compute, {:.0} messages and {:.0} doubles per rank, {} ranks on {} CPUs\n",
        shape.compute_s, shape.messages, shape.doubles, shape.ranks, shape.cpus
    )
}

/// The most a microbenchmark's result file may hold (as `predict`'s bound on slowdown reports).
const MAX_RESULT_BYTES: u64 = 16 << 20;

/// Microbenchmark results, overridden by any cost given on the command line.
fn cost_params(args: &ModelArgs) -> Result<CostParams, String> {
    let mut alpha_c = None;
    let mut link: Option<Value> = None;
    for path in &args.micro {
        let text = read_bounded(path, MAX_RESULT_BYTES).map_err(|e| format!("--micro {e}"))?;
        let value: Value =
            serde_json::from_str(&text).map_err(|e| format!("--micro {}: not JSON: {e}", path.display()))?;
        if let Some(a) = mean_of(&value["alpha_c_s"]) {
            alpha_c = Some(a);
        }
        if let Some(found) = find_transport(&value, &args.transport) {
            link = Some(found);
        }
    }
    let from_link = |key: &str| link.as_ref().and_then(|l| mean_of(&l[key]));
    let pick = |given: Option<f64>, scale: f64, measured: Option<f64>, what: &str| {
        given.map(|v| v * scale).or(measured).ok_or_else(|| {
            format!("no {what}: give --micro files from `cosched bench ctxswitch/pingpong --out` or the value itself")
        })
    };
    Ok(CostParams {
        alpha_c_s: pick(args.alpha_c_us, 1e-6, alpha_c, "α_c (--alpha-c-us)")?,
        alpha_s: pick(args.alpha_us, 1e-6, from_link("alpha_s"), "α (--alpha-us)")?,
        beta_s_per_double: pick(args.beta_ns, 1e-9, from_link("beta_s_per_double"), "β (--beta-ns)")?,
        alpha_cpu_s: pick(args.alpha_cpu_us, 1e-6, from_link("alpha_cpu_s"), "α_CPU (--alpha-cpu-us)")?,
        beta_cpu_s_per_double: pick(
            args.beta_cpu_ns,
            1e-9,
            from_link("beta_cpu_s_per_double"),
            "β_CPU (--beta-cpu-ns)",
        )?,
    })
}

/// A number, or an estimate's mean.
fn mean_of(value: &Value) -> Option<f64> {
    value.as_f64().or_else(|| value["mean"].as_f64())
}

/// The ping-pong result for `transport`, wherever it sits in the file.
fn find_transport(value: &Value, transport: &str) -> Option<Value> {
    match value {
        Value::Object(map) if map.get("transport").and_then(Value::as_str) == Some(transport) => Some(value.clone()),
        Value::Object(map) => map.values().find_map(|v| find_transport(v, transport)),
        Value::Array(items) => items.iter().find_map(|v| find_transport(v, transport)),
        _ => None,
    }
}

fn given_shape(args: &ModelArgs, cpus: u32) -> Result<Option<JobShape>, String> {
    if let Some(mm) = &args.mm {
        let (n, p_rows, q_cols) = parse_mm(mm)?;
        let gamma3_s = match (args.gamma3_ns, args.mflops) {
            (Some(g), _) => g * 1e-9,
            (None, Some(m)) if m > 0.0 => 1.0 / (m * 1e6),
            _ => return Err("--mm needs the kernel's speed: --gamma3-ns or --mflops".into()),
        };
        return Ok(Some(JobShape::matrix_multiply(n, p_rows, q_cols, args.k, gamma3_s, cpus)));
    }
    Ok(args.compute_s.map(|compute_s| JobShape {
        compute_s,
        messages: args.messages,
        doubles: args.doubles,
        ranks: args.ranks.unwrap_or(cpus),
        cpus,
    }))
}

fn parse_mm(text: &str) -> Result<(u64, u32, u32), String> {
    let bad = || format!("--mm {text:?}: expected N,PxQ such as 1024,2x1");
    let (n, grid) = text.split_once(',').ok_or_else(bad)?;
    let (p, q) = grid.split_once(['x', 'X']).ok_or_else(bad)?;
    let n: u64 = n.trim().parse().map_err(|_| bad())?;
    let (p, q): (u32, u32) = (p.trim().parse().map_err(|_| bad())?, q.trim().parse().map_err(|_| bad())?);
    if n == 0 || p == 0 || q == 0 {
        return Err(bad());
    }
    Ok((n, p, q))
}

fn read_report(path: &std::path::Path) -> Result<SlowdownReport, String> {
    crate::predict_cmd::read_report(path).map_err(|e| format!("--measured {e}"))
}

fn compare(
    args: &ModelArgs,
    report: &SlowdownReport,
    costs: &CostParams,
    cpus: u32,
) -> Result<Vec<PolicyComparison>, String> {
    if report.points.is_empty() {
        return Err("--measured: the report has no points".into());
    }
    let mut out = Vec::new();
    for policy in report.policies() {
        let of_policy = || report.points.iter().filter(move |p| p.policy == policy);
        let one =
            of_policy().find(|p| p.jobs == 1).ok_or_else(|| format!("--measured: {policy} has no j = 1 point"))?;
        let t1_s = one.elapsed_s.mean;
        let Some(cpu1_s) = one.cpu_s.map(|e| e.mean) else {
            continue; // Slurm: CPU time not measured, nothing to split.
        };
        let shape = match given_shape(args, cpus)? {
            Some(shape) => shape,
            None => reported_shape(report, policy, cpus)?,
        };
        let measured = |p: &Point| Measured {
            jobs: p.jobs,
            t1_s,
            tj_s: p.elapsed_s.mean,
            cpu1_s,
            cpuj_s: p.cpu_s.map_or(0.0, |e| e.mean),
            cpus,
        };
        let rows = of_policy()
            .map(|p| model::split_error(model::shared_time_s(p.jobs, t1_s, &shape, costs) / t1_s, &measured(p)))
            .collect();
        out.push(PolicyComparison {
            policy: policy.to_string(),
            t1_model_s: model::single_job_s(&shape, costs),
            t1_measured_s: t1_s,
            shape,
            rows,
        });
    }
    Ok(out)
}

/// The job's shape from what its first copy reported at j = 1 (mean over repeats). The program's report is its
/// own JSON line, so its fields are looked up by name.
fn reported_shape(report: &SlowdownReport, policy: &str, cpus: u32) -> Result<JobShape, String> {
    let reports: Vec<&Value> = report
        .samples
        .iter()
        .filter(|s| s.policy == policy && s.jobs == 1)
        .filter_map(|s| s.app_report.as_ref().filter(|r| r.is_object()))
        .collect();
    if reports.is_empty() {
        return Err(format!(
            "--measured: the {policy} runs carry no program report; describe the job with --mm or --compute-s"
        ));
    }
    let mean = |key: &str| reports.iter().filter_map(|r| r[key].as_f64()).sum::<f64>() / reports.len() as f64;
    Ok(JobShape {
        compute_s: mean("compute_s"),
        messages: mean("messages_per_rank"),
        doubles: mean("doubles_per_rank"),
        ranks: reports[0]["p"].as_u64().or_else(|| reports[0]["threads"].as_u64()).unwrap_or(cpus as u64) as u32,
        cpus,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mm_shapes_parse_or_say_why_not() {
        assert_eq!(parse_mm("1024,2x1").unwrap(), (1024, 2, 1));
        assert!(parse_mm("1024").unwrap_err().contains("expected N,PxQ"));
        assert!(parse_mm("0,2x2").is_err());
    }

    #[test]
    fn transports_are_found_anywhere_in_a_file() {
        let file = serde_json::json!({"results": [{"transport": "tcp", "alpha_s": {"mean": 2e-5}},
                                                   {"transport": "shm", "alpha_s": {"mean": 1e-6}}]});
        let shm = find_transport(&file, "shm").unwrap();
        assert_eq!(mean_of(&shm["alpha_s"]), Some(1e-6));
        assert!(find_transport(&file, "ib").is_none());
    }

    fn point(policy: &str, jobs: u32, elapsed_s: f64, cpu_s: Option<f64>) -> Point {
        let estimate = |mean: f64| cosched_bench::stats::Estimate { mean, std_error: 0.0, min: mean, max: mean, n: 1 };
        Point {
            policy: policy.into(),
            jobs,
            elapsed_s: estimate(elapsed_s),
            slowdown: cosched_bench::stats::Ratio { value: elapsed_s, std_error: 0.0 },
            copy_elapsed_s: estimate(elapsed_s),
            fairness_ratio: 1.0,
            cpu_s: cpu_s.map(estimate),
            cpu_percent: None,
            peak_rss_bytes: None,
            overlap: None,
            colocated: None,
        }
    }

    #[test]
    fn a_slowdown_report_is_read_back_typed_and_compared_per_policy() {
        let report = SlowdownReport {
            command: vec!["./job".into()],
            cpus_per_job: 2,
            nodes: 1,
            repeat: 1,
            points: vec![
                point("cosched", 1, 1.0, Some(2.0)),
                point("cosched", 2, 2.2, Some(4.1)),
                point("slurm", 1, 1.0, None),
            ],
            samples: Vec::new(),
        };
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("report.json"), serde_json::to_string(&report).unwrap()).unwrap();
        let read = read_report(dir.path()).unwrap();
        assert_eq!(read.cpus_per_job, 2);
        #[derive(clap::Parser)]
        struct Model {
            #[command(flatten)]
            args: ModelArgs,
        }
        let args = <Model as clap::Parser>::try_parse_from(["model", "--compute-s", "1"]).unwrap().args;
        let costs = CostParams {
            alpha_c_s: 1e-6,
            alpha_s: 1e-6,
            beta_s_per_double: 1e-9,
            alpha_cpu_s: 1e-6,
            beta_cpu_s_per_double: 1e-9,
        };
        let comparisons = compare(&args, &read, &costs, read.cpus_per_job).unwrap();
        // Slurm measured no CPU time: nothing to split.
        assert_eq!(comparisons.len(), 1);
        assert_eq!(comparisons[0].policy, "cosched");
        assert_eq!(comparisons[0].rows.iter().map(|r| r.jobs).collect::<Vec<_>>(), [1, 2]);
        assert!((comparisons[0].rows[1].measured - 2.2).abs() < 1e-12);
        std::fs::write(dir.path().join("report.json"), "{\"points\": 3}").unwrap();
        assert!(read_report(dir.path()).unwrap_err().contains("not a slowdown report"));
    }
}
