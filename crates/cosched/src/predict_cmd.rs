//! `cosched predict`: for `cosched bench slowdown` results, the same
//! experiments in the simulator on a calibrated machine (`cosched
//! calibrate`), beside what was measured and the analytic model.

use crate::output::read_bounded;
use crate::plot::{indexed_style, svg_to_png, LineChart, Marker, Series, Style};
use crate::sim_cmd::read_machine;
use clap::Args;
use cosched_bench::slowdown::SlowdownReport;
use cosched_lab::slowdown_prediction::{error_summary, predict, table, SlowdownPrediction};
use cosched_sim::machine::{printable, MachineModel};
use std::path::{Path, PathBuf};

/// Largest report.json read: a run of the reference experiments writes tens of kilobytes.
const MAX_REPORT_BYTES: u64 = 16 << 20;

#[derive(Args, Debug)]
pub struct PredictArgs {
    /// The machine file of `cosched calibrate` (its folder or machine.json).
    #[arg(long)]
    pub machine: PathBuf,
    /// Results of `cosched bench slowdown` of a reference program of apps/ (folders or report.json files).
    #[arg(long = "measured", required = true, num_args = 1..)]
    pub measured: Vec<PathBuf>,
    /// Also write the tables, as Markdown, to this file.
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Print JSON instead of tables.
    #[arg(long)]
    pub json: bool,
}

/// A `cosched bench slowdown` result (its folder or report.json), bounded; `predict` and `model` read it alike.
pub(crate) fn read_report(path: &Path) -> Result<SlowdownReport, String> {
    let file = if path.is_dir() { path.join("report.json") } else { path.to_path_buf() };
    let text = read_bounded(&file, MAX_REPORT_BYTES)?;
    serde_json::from_str(&text).map_err(|e| format!("{}: not a slowdown report: {e}", file.display()))
}

/// A result's name: its folder's name (reference-real's experiment names).
fn name_of(path: &Path) -> String {
    let folder = if path.is_dir() { path } else { path.parent().unwrap_or(path) };
    folder.file_name().map_or_else(|| path.display().to_string(), |n| n.to_string_lossy().into_owned())
}

pub fn run(args: &PredictArgs) -> Result<(), String> {
    let machine = read_machine(&args.machine)?;
    let mut predictions: Vec<(String, SlowdownPrediction)> = Vec::new();
    let mut refused = Vec::new();
    for path in &args.measured {
        let report = read_report(path)?;
        eprintln!("simulating {}...", name_of(path));
        match predict(&report, &machine) {
            Ok(prediction) => predictions.push((name_of(path), prediction)),
            Err(why) => refused.push((name_of(path), why)),
        }
    }
    if args.json {
        let value = serde_json::json!({
            "machine": machine,
            "predictions": predictions.iter().map(|(n, p)| serde_json::json!({"name": n, "prediction": p})).collect::<Vec<_>>(),
            "not_predicted": refused,
        });
        println!("{}", serde_json::to_string_pretty(&value).map_err(|e| e.to_string())?);
    }
    let text = document(&machine, &predictions, &refused);
    if !args.json {
        print!("{text}");
    }
    if let Some(out) = &args.out {
        crate::output::write_file_atomically(out, |mut file| std::io::Write::write_all(&mut file, text.as_bytes()))?;
        for (name, prediction) in &predictions {
            write_chart(out, name, prediction)?;
        }
    }
    Ok(())
}

/// `s_j` against `j`, measured (solid, the runs' range) and simulated (dashed, the seeds' range), per policy: beside `out` as
/// `<out's stem>-<name>.svg` and `.png`.
fn write_chart(out: &Path, name: &str, prediction: &SlowdownPrediction) -> Result<(), String> {
    let safe: String = name.chars().map(|c| if c.is_ascii_alphanumeric() || c == '-' { c } else { '_' }).collect();
    let stem = out.file_stem().map_or("prediction".into(), |s| s.to_string_lossy().into_owned());
    let svg = chart(name, prediction).to_svg();
    let write = |extension: &str, bytes: &[u8]| {
        let path = out.with_file_name(format!("{stem}-{safe}.{extension}"));
        crate::output::write_file_atomically(&path, |mut file| std::io::Write::write_all(&mut file, bytes))
    };
    write("svg", svg.as_bytes())?;
    write("png", &svg_to_png(&svg)?)
}

/// How far right of its `j` a simulated point is drawn.
const SIMULATED_OFFSET_J: f64 = 0.06;

fn chart(name: &str, prediction: &SlowdownPrediction) -> LineChart {
    let mut series = Vec::new();
    let (mut max_j, mut top) = (2.0f64, 2.0f64);
    for (i, policy) in prediction.policies.iter().enumerate() {
        let style = indexed_style(i);
        let points = &policy.points;
        max_j = points.iter().map(|p| p.jobs as f64).fold(max_j, f64::max);
        top = points.iter().map(|p| p.measured_max.max(p.simulated_max)).fold(top, f64::max);
        series.push(Series {
            name: format!("{} measured", printable(&policy.policy)),
            style,
            points: points.iter().map(|p| (p.jobs as f64, p.measured)).collect(),
            clipped_from: None,
            y_errors: vec![],
            x_errors: vec![],
            y_intervals: points.iter().map(|p| (p.measured_min, p.measured_max)).collect(),
        });
        series.push(Series {
            name: format!("{} simulated", printable(&policy.policy)),
            style: Style { dash: "5,3", marker: Marker::HollowCircle, ..style },
            // Beside the measured point, not on it: both carry a range bar.
            points: points.iter().map(|p| (p.jobs as f64 + SIMULATED_OFFSET_J, p.simulated)).collect(),
            clipped_from: None,
            y_errors: vec![],
            x_errors: vec![],
            y_intervals: points.iter().map(|p| (p.simulated_min, p.simulated_max)).collect(),
        });
    }
    LineChart {
        title: format!("{}: measured and simulated slowdown", printable(name)),
        x_label: "j, copies started together".into(),
        y_label: "slowdown s_j = t_j / t_1".into(),
        // Room right of the last j, so that its points and bars stay off the frame.
        x_range: (0.0, max_j + 0.5),
        y_range: (0.8, top * 1.2),
        log_y: true,
        series,
        legend_notes: vec!["bars: the runs' range,".into(), "and the simulator's seeds'".into()],
        max_markers: None,
    }
}

/// After a measurement (`bench slowdown --predict-with`): the prediction printed and written to
/// `out/prediction.md`.
pub fn print_and_write(machine: &MachineModel, report: &SlowdownReport, out: &Path) -> Result<(), String> {
    let name = name_of(out);
    let (predictions, refused) = match predict(report, machine) {
        Ok(prediction) => (vec![(name, prediction)], vec![]),
        Err(why) => (vec![], vec![(name, why)]),
    };
    let text = document(machine, &predictions, &refused);
    print!("\n{text}");
    crate::output::write_file_atomically(&out.join("prediction.md"), |mut file| {
        std::io::Write::write_all(&mut file, text.as_bytes())
    })
}

fn document(
    machine: &MachineModel,
    predictions: &[(String, SlowdownPrediction)],
    refused: &[(String, String)],
) -> String {
    let mut text = format!(
        "Machine: {} (Linux {}, {} CPUs, HZ {}), calibrated {}: switch {:.2} µs, shared memory {:.3} µs + {:.4} \
         ns/byte, TCP {:.1} µs + {:.4} ns/byte, gang switch {:.1} µs.\n\n",
        printable(&machine.host),
        printable(&machine.kernel),
        machine.cpus_per_node,
        machine.hz,
        machine.measured_at,
        machine.context_switch_ns as f64 / 1e3,
        machine.shm.latency_base_ns / 1e3,
        machine.shm.latency_ns_per_byte,
        machine.tcp.latency_base_ns / 1e3,
        machine.tcp.latency_ns_per_byte,
        machine.gang_switch_ns as f64 / 1e3
    );
    for (name, prediction) in predictions {
        text += &table(name, prediction);
        text += "\n";
    }
    for (name, why) in refused {
        text += &format!("Not predicted: {}: {}.\n\n", printable(name), printable(why));
    }
    let all = predictions.iter().flat_map(|(_, p)| p.policies.iter().flat_map(|policy| &policy.points));
    if let Some((mean, worst, count)) = error_summary(all) {
        text += &format!(
            "Simulated against measured s_j over {count} points with j > 1: mean |error| {:.1} %, worst {:.1} % \
             (the goal on a random draw, docs/reproduction-real.md: at most 7 % and 20 %).\n",
            mean * 100.0,
            worst * 100.0
        );
    }
    text
}
