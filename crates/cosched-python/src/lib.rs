//! `cosched._native`: the Python package's native half. Each function takes
//! the command line's own flags (the Python layer turns keyword arguments into
//! them), parses them with the very parser of the `cosched` binary and calls
//! the same library code, so settings, defaults and error messages are the
//! CLI's. Results cross as the CLI's own CSV and JSON text, which the Python
//! layer turns into DataFrames: a DataFrame holds exactly what the CLI's file
//! holds. Simulations run with the GIL released; Ctrl-C stops them.

mod gym;
mod study;
mod workload;

use clap::{Args, CommandFactory, Parser};
use cosched_lab::batsim::batsim_jobs_csv;
use cosched_lab::jitter::{jitter_csv, jitter_kinds};
use cosched_lab::sim::{jobs_csv, jobs_kinds, summary_csv, summary_kinds};
use cosched_sim_commands::sim_cmd::{simulate as simulate_flags, summary_json, SimArgs, SimOutcome};
use pyo3::create_exception;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{channel, RecvTimeoutError};
use std::sync::{Arc, Mutex};
use std::time::Duration;

create_exception!(
    _native,
    CoschedError,
    PyValueError,
    "A setting, input file or request cosched refuses; the message is the command line's."
);

/// An error of cosched's as a Python exception, with the CLI's message.
pub(crate) fn refused(message: impl Into<String>) -> PyErr {
    CoschedError::new_err(message.into())
}

/// A command's flags alone, to parse them as the binary does.
#[derive(Parser)]
#[command(disable_help_flag = true)]
struct Flags<A: Args> {
    #[command(flatten)]
    args: A,
}

/// A subcommand's flags parsed as the binary parses them (`program` names it in messages).
pub(crate) fn parse_flags<A: Args>(program: &str, flags: Vec<String>) -> PyResult<A> {
    let argv = std::iter::once(program.to_string()).chain(flags);
    Flags::<A>::try_parse_from(argv).map(|f| f.args).map_err(|e| refused(e.render().to_string().trim_end()))
}

/// Run `work` on a thread of its own with the GIL released; every 100 ms, look
/// for a pending signal (Ctrl-C): then set `stop`, wait for `work` to end and
/// raise the signal's exception.
pub(crate) fn run_interruptible<T: Send>(
    py: Python<'_>,
    stop: &AtomicBool,
    work: impl FnOnce() -> T + Send,
) -> PyResult<T> {
    std::thread::scope(|scope| {
        let (done, finished) = channel();
        // (detach wants what it borrows to be Sync; only this thread receives.)
        let finished = Mutex::new(finished);
        let worker = scope.spawn(move || {
            let outcome = work();
            let _ = done.send(());
            outcome
        });
        loop {
            match py.detach(|| finished.lock().expect("never poisoned").recv_timeout(Duration::from_millis(100))) {
                Ok(()) | Err(RecvTimeoutError::Disconnected) => break,
                Err(RecvTimeoutError::Timeout) => {}
            }
            if let Err(signal) = py.check_signals() {
                stop.store(true, Ordering::Relaxed);
                py.detach(|| worker.join()).ok();
                return Err(signal);
            }
        }
        py.detach(|| worker.join())
            .map_err(|_| pyo3::exceptions::PyRuntimeError::new_err("cosched: the simulation panicked (a bug)"))
    })
}

/// What one simulation gives back: the CLI's summary.csv, jobs.csv, summary.json, batsim/*_jobs.csv and jitter.csv.
#[pyclass(frozen, get_all, module = "cosched._native")]
struct SimTexts {
    summary_csv: String,
    jobs_csv: String,
    /// Each column's (header, kind): "int", "float", "text" or "flag" (`cosched_lab::csv::Kind`).
    summary_kinds: Vec<(String, String)>,
    jobs_kinds: Vec<(String, String)>,
    summary_json: String,
    /// (scheme, its jobs in Batsim's jobs.csv format), in the order of the schemes.
    batsim_jobs_csv: Vec<(String, String)>,
    /// jitter.csv (empty without --jitter-draws) and its columns' kinds.
    jitter_csv: String,
    jitter_kinds: Vec<(String, String)>,
}

/// Simulate as `cosched sim FLAGS…` does, writing nothing.
#[pyfunction]
fn simulate(py: Python<'_>, flags: Vec<String>) -> PyResult<SimTexts> {
    let args: SimArgs = parse_flags("cosched sim", flags.clone())?;
    let stop = Arc::new(AtomicBool::new(false));
    let outcome = run_interruptible(py, &stop, || simulate_flags(&args, stop.clone(), !args.quiet))?;
    sim_texts(&args, flags, outcome.map_err(refused)?).map_err(refused)
}

/// The texts of a simulation's outcome, as `cosched sim FLAGS…` would write them.
pub(crate) fn sim_texts(args: &SimArgs, flags: Vec<String>, outcome: SimOutcome) -> Result<SimTexts, String> {
    let SimOutcome { prepared, results, jitter, .. } = outcome;
    let command = std::iter::once("cosched sim".to_string()).chain(flags).collect::<Vec<_>>().join(" ");
    Ok(SimTexts {
        summary_csv: summary_csv(&results),
        jobs_csv: jobs_csv(&results),
        summary_kinds: summary_kinds(&results),
        jobs_kinds: jobs_kinds(),
        summary_json: summary_json(
            args,
            &command,
            &prepared.configs,
            &prepared.loaded.report,
            &results,
            jitter.as_ref(),
        )?,
        batsim_jobs_csv: results.iter().map(|r| (r.summary.scheme.clone(), batsim_jobs_csv(r))).collect(),
        jitter_csv: jitter.as_ref().map(jitter_csv).unwrap_or_default(),
        jitter_kinds: jitter_kinds(),
    })
}

/// One flag of a command, for the Python layer's docstrings: (name, help, default, takes a value).
type FlagRow = (String, String, Option<String>, bool);

fn flag_rows<A: Args>() -> Vec<FlagRow> {
    Flags::<A>::command()
        .get_arguments()
        .filter(|a| !a.is_hide_set())
        .filter_map(|a| {
            let name = a.get_long()?.to_string();
            let help = a.get_help().map(|h| h.to_string()).unwrap_or_default();
            let default = a.get_default_values().iter().map(|v| v.to_string_lossy().into_owned()).collect::<Vec<_>>();
            let takes_value = a.get_action().takes_values();
            Some((name, help, (!default.is_empty()).then(|| default.join(",")), takes_value))
        })
        .collect()
}

/// The flags of `cosched sim`, `cosched study eN` or `cosched workload generate`.
#[pyfunction]
fn flag_table(command: &str) -> PyResult<Vec<FlagRow>> {
    match command {
        "sim" => Ok(flag_rows::<SimArgs>()),
        "study" => Ok(flag_rows::<cosched_sim_commands::study::StudyArgs>()),
        "workload generate" => Ok(flag_rows::<cosched_sim_commands::workload_cmd::GenerateSpec>()),
        other => Err(refused(format!("no flag table for '{other}'"))),
    }
}

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("CoschedError", m.py().get_type::<CoschedError>())?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add_class::<SimTexts>()?;
    m.add_function(wrap_pyfunction!(simulate, m)?)?;
    m.add_function(wrap_pyfunction!(flag_table, m)?)?;
    workload::register(m)?;
    gym::register(m)?;
    study::register(m)?;
    Ok(())
}
