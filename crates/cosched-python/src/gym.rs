//! The gym interface's native half: one simulation on a thread of its own whose admission waits for Python.
//! At each instant a waiting job could start, the engine's chooser sends the view to Python and blocks until
//! Python answers; a choice the view refuses goes back as a message and the chooser waits for another, so a
//! bad action changes nothing. The run is the CLI's `cosched sim` of one scheme, its flags parsed as the CLI's.

use crate::{refused, SimTexts};
use cosched_core::JobId;
use cosched_sim::run::{Choice, Chooser, QueueView, SharedChooser};
use cosched_sim_commands::sim_cmd::{simulate_chosen, SimArgs};
use pyo3::prelude::*;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{channel, sync_channel, Receiver, RecvTimeoutError, Sender, SyncSender};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

/// Waiting jobs a view shows at most: each one shown costs a placement trial per matrix row.
const MAX_WINDOW: usize = 4096;

enum FromEngine {
    Decide(Box<QueueView>),
    Refused(String),
    Done(Box<Result<SimTexts, String>>),
}

/// The engine's side: sends each view to Python and waits for a choice the view allows.
struct PythonChooser {
    to_python: SyncSender<FromEngine>,
    from_python: Receiver<Choice>,
    /// Python closed the run: nothing more is sent (a send could block on a full channel nobody reads).
    gone: bool,
}

impl Chooser for PythonChooser {
    fn choose(&mut self, view: &QueueView) -> Choice {
        if !self.gone {
            match self.ask(view) {
                Some(choice) => return choice,
                None => self.gone = true,
            }
        }
        python_gone(view)
    }
}

impl PythonChooser {
    /// Python's choice on `view`, asked again while the view refuses it; `None` once Python has closed the run.
    fn ask(&mut self, view: &QueueView) -> Option<Choice> {
        self.to_python.send(FromEngine::Decide(Box::new(view.clone()))).ok()?;
        loop {
            let choice = self.from_python.recv().ok()?;
            match view.check(choice) {
                Ok(()) => return Some(choice),
                Err(why) => self.to_python.send(FromEngine::Refused(why)).ok()?,
            }
        }
    }
}

/// Python closed the run (its stop flag is set): end it quickly with choices the view allows.
fn python_gone(view: &QueueView) -> Choice {
    match view.waiting.iter().find(|w| w.fits) {
        Some(w) if view.running_jobs == 0 => Choice::Start { job: w.id, row: None },
        _ => Choice::Wait,
    }
}

/// The machine at a decision, as Python reads it.
#[pyclass(frozen, get_all, module = "cosched._native")]
struct GymView {
    now_s: f64,
    /// Per shown waiting job: (job index in the workload, tasks, requested s (0: unknown), waited s, fits now,
    /// fits per row).
    waiting: Vec<(u64, u32, f64, f64, bool, Vec<bool>)>,
    waiting_count: usize,
    running_jobs: usize,
    /// Per matrix row, per CPU: the job index holding the cell, -1 when free.
    matrix: Vec<Vec<i64>>,
    processes_per_cpu: Vec<u32>,
    waited_s_total: f64,
}

impl GymView {
    fn of(view: &QueueView) -> GymView {
        let seconds = |ns: u64| ns as f64 / 1e9;
        let waiting = view.waiting.iter().map(|w| {
            let requested_s = w.requested_ns.map_or(0.0, seconds);
            (w.id.0, w.tasks, requested_s, seconds(w.waited_ns), w.fits, w.fits_in_row.clone())
        });
        let cell = |c: &Option<JobId>| c.map_or(-1, |j| j.0 as i64);
        GymView {
            now_s: seconds(view.now_ns),
            waiting: waiting.collect(),
            waiting_count: view.waiting_count,
            running_jobs: view.running_jobs,
            matrix: view.matrix.iter().map(|row| row.iter().map(cell).collect()).collect(),
            processes_per_cpu: view.processes_per_cpu.clone(),
            waited_s_total: view.waited_ns_total as f64 / 1e9,
        }
    }
}

/// One simulation whose admission Python decides: `next()` gives the first decision, `choose` answers it and
/// gives the next; either gives the run's texts when it ends.
#[pyclass(module = "cosched._native")]
struct GymRun {
    stage: Mutex<Stage>,
    stop: Arc<AtomicBool>,
    to_engine: Mutex<Option<Sender<Choice>>>,
    from_engine: Mutex<Receiver<FromEngine>>,
    engine: Mutex<Option<JoinHandle<()>>>,
}

#[pymethods]
impl GymRun {
    /// Start `cosched sim FLAGS…` (one scheme) with `window` waiting jobs shown per decision.
    #[new]
    fn new(flags: Vec<String>, window: usize) -> PyResult<GymRun> {
        if window == 0 || window > MAX_WINDOW {
            return Err(refused(format!("max_queue must be 1 to {MAX_WINDOW}, not {window}")));
        }
        let args: SimArgs = crate::parse_flags("cosched sim", flags.clone())?;
        let (to_python, from_engine) = sync_channel(1);
        let (to_engine, from_python) = channel();
        let chooser = PythonChooser { to_python: to_python.clone(), from_python, gone: false };
        let shared = SharedChooser { chooser: Arc::new(Mutex::new(chooser)), window };
        let stop = Arc::new(AtomicBool::new(false));
        let engine_stop = stop.clone();
        let engine = std::thread::spawn(move || {
            let outcome = simulate_chosen(&args, engine_stop, !args.quiet, Some(shared), |_, _, _| {});
            let texts = outcome.and_then(|outcome| crate::sim_texts(&args, flags, outcome));
            // Python waits for this unless it closed the run, when a decision it never read may fill the
            // channel: then nobody wants the texts, and a blocking send would keep this thread.
            let _ = to_python.try_send(FromEngine::Done(Box::new(texts)));
        });
        Ok(GymRun {
            stage: Mutex::new(Stage::NotStarted),
            stop,
            to_engine: Mutex::new(Some(to_engine)),
            from_engine: Mutex::new(from_engine),
            engine: Mutex::new(Some(engine)),
        })
    }

    /// The first decision (a `GymView`), or the run's `SimTexts` if it ends without one. Once only: the engine
    /// then waits for `choose`.
    fn next(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        if *self.stage.lock().expect("never poisoned") != Stage::NotStarted {
            return Err(refused("next() gives the first decision only: answer it with choose()"));
        }
        self.receive(py)
    }

    /// Start job `job` (in `row`, or where the planner fits it first), or wait (`job` None): the next decision
    /// or the run's texts. A choice the last view refuses raises `CoschedError` and changes nothing.
    #[pyo3(signature = (job, row=None))]
    fn choose(&self, py: Python<'_>, job: Option<u64>, row: Option<u32>) -> PyResult<Py<PyAny>> {
        match *self.stage.lock().expect("never poisoned") {
            Stage::Deciding => {}
            Stage::NotStarted => return Err(refused("no decision yet: next() gives the first")),
            Stage::Ended => return Err(refused("this run has ended: reset() starts another")),
        }
        let choice = match job {
            Some(job) => Choice::Start { job: JobId(job), row },
            None => Choice::Wait,
        };
        let sent = self.to_engine.lock().expect("never poisoned").as_ref().map(|s| s.send(choice).is_ok());
        if sent != Some(true) {
            return Err(refused("this run has ended: reset() starts another"));
        }
        self.receive(py)
    }

    /// End the run now (its thread finishes on its own, quickly).
    fn close(&self) {
        *self.stage.lock().expect("never poisoned") = Stage::Ended;
        self.stop.store(true, Ordering::Relaxed);
        self.to_engine.lock().expect("never poisoned").take();
    }
}

impl GymRun {
    /// Wait for the engine with the GIL released, looking for Ctrl-C every 100 ms.
    fn receive(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        loop {
            let received =
                py.detach(|| self.from_engine.lock().expect("never poisoned").recv_timeout(Duration::from_millis(100)));
            match received {
                Ok(FromEngine::Decide(view)) => {
                    *self.stage.lock().expect("never poisoned") = Stage::Deciding;
                    return Ok(Py::new(py, GymView::of(&view))?.into_any());
                }
                Ok(FromEngine::Refused(why)) => return Err(refused(why)),
                Ok(FromEngine::Done(texts)) => {
                    self.close();
                    self.join(py);
                    return Ok(Py::new(py, (*texts).map_err(refused)?)?.into_any());
                }
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => {
                    self.close();
                    self.join(py);
                    return Err(pyo3::exceptions::PyRuntimeError::new_err("cosched: the simulation panicked (a bug)"));
                }
            }
            if let Err(signal) = py.check_signals() {
                self.close();
                return Err(signal);
            }
        }
    }

    fn join(&self, py: Python<'_>) {
        if let Some(engine) = self.engine.lock().expect("never poisoned").take() {
            py.detach(|| engine.join()).ok();
        }
    }
}

/// Where a run is in its exchange with Python: a second `next()` would wait for a decision the engine never
/// sends (it waits for a choice), and a choice before the first decision would answer nothing.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Stage {
    NotStarted,
    Deciding,
    Ended,
}

impl Drop for GymRun {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        self.to_engine.get_mut().expect("never poisoned").take();
    }
}

/// The matrix a run of `cosched sim FLAGS…` decides on: (rows, CPUs per node), refused as the CLI refuses.
#[pyfunction]
fn gym_shape(flags: Vec<String>) -> PyResult<(u32, Vec<u32>)> {
    let args: SimArgs = crate::parse_flags("cosched sim", flags)?;
    let configs = args.settings().and_then(|s| s.configs()).map_err(refused)?;
    let [cfg] = configs.as_slice() else {
        return Err(refused(format!("a policy of your own decides one run: name one scheme, not {}", configs.len())));
    };
    cosched_sim::run::check_chooser_allowed(cfg, args.fast).map_err(|e| refused(e.to_string()))?;
    Ok((cfg.plan_settings().rows.max(1), cfg.cluster_shape().cpus_per_node))
}

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(gym_shape, m)?)?;
    m.add_class::<GymView>()?;
    m.add_class::<GymRun>()?;
    Ok(())
}
