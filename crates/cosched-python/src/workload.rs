//! Workloads: SWF traces read, written, generated, summarised and fitted, as
//! the `cosched workload` commands do. A trace crosses to Python as its
//! header lines and one row of the 18 SWF fields per job.

use crate::{parse_flags, refused};
use cosched_sim_commands::workload_cmd::{fitted, generated, summary_text, write_atomically, GenerateSpec};
use cosched_workload::swf::{self, FIELD_COUNT};
use cosched_workload::{ReadOptions, Workload};
use pyo3::prelude::*;
use std::path::PathBuf;

type Row = [f64; FIELD_COUNT];

/// A trace as Python sees it.
#[pyclass(frozen, get_all, module = "cosched._native")]
struct Trace {
    /// The ';' comment lines, without the ';'.
    header: Vec<String>,
    /// The 18 SWF fields of every usable job, in file order.
    rows: Vec<Row>,
    /// Lines skipped as malformed (only when asked to skip them).
    skipped_bad_lines: Vec<u64>,
    /// (job number, reason) of well-formed jobs that cannot be simulated.
    unusable: Vec<(u64, String)>,
    /// How it was made or what it holds, in one line.
    description: String,
}

fn trace_of(workload: &Workload, description: String) -> Trace {
    Trace {
        header: workload.header.clone(),
        rows: workload.jobs.iter().map(|j| j.synced_fields()).collect(),
        skipped_bad_lines: workload.skipped_bad_lines.clone(),
        unusable: workload.unusable.clone(),
        description,
    }
}

/// Rows from Python, checked by the SWF reader itself: a bad value gets the
/// reader's message, with the row's number (from 1) for a line number.
fn workload_of(header: Vec<String>, rows: &[Row]) -> PyResult<Workload> {
    let mut text = String::new();
    for row in rows {
        let fields: Vec<String> = row.iter().map(|f| f.to_string()).collect();
        text.push_str(&fields.join(" "));
        text.push('\n');
    }
    let mut workload = swf::read_from(text.as_bytes(), "row", ReadOptions::default())
        .map_err(|e| refused(e.to_string().replace(" (use --skip-bad-lines to skip malformed lines)", "")))?;
    workload.header = header;
    Ok(workload)
}

/// Generate as `cosched workload generate FLAGS…` does (without `--out`).
#[pyfunction]
fn workload_generate(py: Python<'_>, flags: Vec<String>) -> PyResult<Trace> {
    let spec: GenerateSpec = parse_flags("cosched workload generate", flags)?;
    let loaded = py.detach(|| generated(&spec)).map_err(refused)?;
    Ok(trace_of(&loaded.workload, loaded.report.describe()))
}

/// Read an SWF trace (plain or gzip).
#[pyfunction]
fn workload_read(py: Python<'_>, path: PathBuf, skip_bad_lines: bool) -> PyResult<Trace> {
    let workload =
        py.detach(|| swf::read_path(&path, ReadOptions { skip_bad_lines })).map_err(|e| refused(e.to_string()))?;
    let description = format!("{} jobs from {}", workload.jobs.len(), path.display());
    Ok(trace_of(&workload, description))
}

/// Write rows as an SWF trace (gzip if the name ends in .gz); all or nothing.
#[pyfunction]
fn workload_write(path: PathBuf, header: Vec<String>, rows: Vec<Row>) -> PyResult<()> {
    write_atomically(&path, &workload_of(header, &rows)?).map_err(refused)
}

/// What `cosched workload inspect` prints for these rows.
#[pyfunction]
#[pyo3(signature = (header, rows, procs=None))]
fn workload_summary(header: Vec<String>, rows: Vec<Row>, procs: Option<u32>) -> PyResult<String> {
    summary_text(&workload_of(header, &rows)?, procs).map_err(refused)
}

/// The model `workload fit` fits by default to these rows: (the parameter file's text, a readable summary).
#[pyfunction]
#[pyo3(signature = (header, rows, procs=None))]
fn workload_fit(py: Python<'_>, header: Vec<String>, rows: Vec<Row>, procs: Option<u32>) -> PyResult<(String, String)> {
    let workload = workload_of(header, &rows)?;
    let model = py.detach(|| fitted(&workload, procs, "the workload")).map_err(refused)?;
    Ok((model.to_text(), model.to_string()))
}

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<Trace>()?;
    m.add_function(wrap_pyfunction!(workload_generate, m)?)?;
    m.add_function(wrap_pyfunction!(workload_read, m)?)?;
    m.add_function(wrap_pyfunction!(workload_write, m)?)?;
    m.add_function(wrap_pyfunction!(workload_summary, m)?)?;
    m.add_function(wrap_pyfunction!(workload_fit, m)?)?;
    Ok(())
}
