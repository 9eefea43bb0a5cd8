//! Studies: an experiment's design run in-process, as `cosched study eN` runs it.

use crate::{parse_flags, refused, run_interruptible};
use cosched::study::StudyArgs;
use cosched_lab::batch::Unwatched;
use cosched_lab::study::{points_csv, run_study, runs_csv, Experiment};
use pyo3::prelude::*;
use std::sync::atomic::AtomicBool;

pub(crate) fn experiment_named(name: &str) -> PyResult<Experiment> {
    const ALL: [Experiment; 5] = [Experiment::E1, Experiment::E2, Experiment::E3, Experiment::E4, Experiment::E5];
    ALL.into_iter()
        .find(|e| e.name().eq_ignore_ascii_case(name))
        .ok_or_else(|| refused(format!("unknown experiment '{name}': e1, e2, e3, e4 or e5")))
}

/// What a study gives back: the CLI's runs.csv and points.csv.
#[pyclass(frozen, get_all, module = "cosched._native")]
struct StudyTexts {
    runs_csv: String,
    points_csv: String,
}

/// Run an experiment as `cosched study EXPERIMENT FLAGS…` does, writing nothing.
#[pyfunction]
fn study(py: Python<'_>, experiment: &str, flags: Vec<String>) -> PyResult<StudyTexts> {
    let experiment = experiment_named(experiment)?;
    let args: StudyArgs = parse_flags(&format!("cosched study {}", experiment.name()), flags)?;
    let settings = args.checked_settings().map_err(refused)?;
    let rows = run_interruptible(py, &AtomicBool::new(false), || run_study(experiment, &settings, &Unwatched))?
        .map_err(refused)?;
    Ok(StudyTexts { runs_csv: runs_csv(&rows), points_csv: points_csv(&rows) })
}

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<StudyTexts>()?;
    m.add_function(wrap_pyfunction!(study, m)?)?;
    Ok(())
}
