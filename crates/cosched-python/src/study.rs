//! Studies: an experiment's design run in-process as `cosched study eN` runs
//! it, or cut into shards (`--shard I/N`'s documents) that run anywhere (Dask
//! tasks) and merge into the same rows.

use crate::{parse_flags, refused, run_interruptible};
use cosched_lab::journal::Journal;
use cosched_lab::shard::{merge, run_shard, Shard, ShardDocument};
use cosched_lab::study::{
    design_len, points_csv, run_study, runs_and_points_kinds, runs_csv, Experiment, RunRow, StudySettings,
};
use cosched_sim_commands::output::{CheckedOut, OutputDir};
use cosched_sim_commands::progress::BatchProgress;
use cosched_sim_commands::study::{report, write_study, StudyArgs};
use pyo3::prelude::*;
use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

/// The experiment and its checked settings from the CLI's flags.
fn study_settings(experiment: &str, flags: Vec<String>) -> PyResult<(Experiment, StudySettings)> {
    let experiment: Experiment = experiment.parse().map_err(refused)?;
    let args: StudyArgs = parse_flags(&format!("cosched study {}", experiment.name()), flags)?;
    if args.shard.is_some() || args.out.is_some() {
        return Err(refused("give out= to the Python call itself; shards are cosched.dask's to cut"));
    }
    let settings = args.settings().map_err(refused)?;
    settings.check(experiment).map_err(refused)?;
    Ok((experiment, settings))
}

/// What a study gives back: the CLI's runs.csv, points.csv and table.md.
#[pyclass(frozen, get_all, module = "cosched._native")]
struct StudyTexts {
    runs_csv: String,
    points_csv: String,
    /// Each column's (header, kind), as `SimTexts::summary_kinds`.
    runs_kinds: Vec<(String, String)>,
    points_kinds: Vec<(String, String)>,
    table_md: String,
}

fn checked_out(out: Option<PathBuf>) -> PyResult<Option<CheckedOut>> {
    out.map(|out| OutputDir::check(&out)).transpose().map_err(refused)
}

/// The texts of a study's rows; with `out`, also the folder `cosched study` writes.
fn texts(
    experiment: Experiment,
    settings: &StudySettings,
    rows: &[RunRow],
    out: Option<CheckedOut>,
) -> PyResult<StudyTexts> {
    if let Some(out) = out {
        write_study(experiment, settings, rows, &out).map_err(refused)?;
    }
    let (runs_kinds, points_kinds) = runs_and_points_kinds();
    Ok(StudyTexts {
        runs_csv: runs_csv(rows),
        points_csv: points_csv(rows),
        runs_kinds,
        points_kinds,
        table_md: report(experiment, rows).0,
    })
}

/// Run an experiment as `cosched study EXPERIMENT FLAGS…` does.
#[pyfunction]
#[pyo3(signature = (experiment, flags, progress=false, out=None))]
fn study(
    py: Python<'_>,
    experiment: &str,
    flags: Vec<String>,
    progress: bool,
    out: Option<PathBuf>,
) -> PyResult<StudyTexts> {
    let (experiment, settings) = study_settings(experiment, flags)?;
    // Checked before the runs, as the CLI does: a refused folder must not cost the study.
    let out = checked_out(out)?;
    let stop = Arc::new(AtomicBool::new(false));
    let watch = BatchProgress::announcing(settings.jobs_per_run, progress).stopped_by(stop.clone());
    let rows = run_interruptible(py, &stop, || run_study(experiment, &settings, &watch, &Journal::none()))?
        .map_err(refused)?;
    texts(experiment, &settings, &rows, out)
}

/// The number of runs in an experiment's design (E1: its whole grid of loads).
#[pyfunction]
fn study_design_size(experiment: &str, flags: Vec<String>) -> PyResult<usize> {
    let (experiment, settings) = study_settings(experiment, flags)?;
    Ok(design_len(experiment, &settings))
}

/// Shard `index` of `count` of the design, run here: the document `cosched study --shard I/N` writes.
#[pyfunction]
fn study_shard(py: Python<'_>, experiment: &str, flags: Vec<String>, index: u32, count: u32) -> PyResult<String> {
    let (experiment, settings) = study_settings(experiment, flags)?;
    let shard = Shard::new(index, count).map_err(refused)?;
    let stop = Arc::new(AtomicBool::new(false));
    let watch = BatchProgress::new(false).stopped_by(stop.clone());
    let document =
        run_interruptible(py, &stop, || run_shard(experiment, &settings, shard, &watch))?.map_err(refused)?;
    Ok(document.to_text())
}

/// Merge shard documents (every shard of one study, in any order) as `cosched study merge` does.
#[pyfunction]
#[pyo3(signature = (documents, out=None))]
fn study_merge(documents: Vec<String>, out: Option<PathBuf>) -> PyResult<StudyTexts> {
    let out = checked_out(out)?;
    let mut shards = Vec::with_capacity(documents.len());
    for (k, text) in documents.iter().enumerate() {
        let name = format!("shard document {}", k + 1);
        shards.push((name.clone(), ShardDocument::from_text(text).map_err(|e| refused(format!("{name}: {e}")))?));
    }
    let merged = merge(shards).map_err(refused)?;
    texts(merged.experiment, &merged.settings, &merged.rows, out)
}

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<StudyTexts>()?;
    m.add_function(wrap_pyfunction!(study, m)?)?;
    m.add_function(wrap_pyfunction!(study_design_size, m)?)?;
    m.add_function(wrap_pyfunction!(study_shard, m)?)?;
    m.add_function(wrap_pyfunction!(study_merge, m)?)?;
    Ok(())
}
