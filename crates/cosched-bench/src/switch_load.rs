//! Switching under control-plane load (`cosched bench switch --clients N`): a whole `cosched up` in this process,
//! two CPU-bound gangs rotating, and `N` clients submitting short jobs over the daemon's own socket. Requests must
//! never delay a switch: the agent's own record of every switch (slice boundary to the incoming gang thawed, and
//! to the switching thread awake) is read per slice, for a quiet window and for the window of the load, in the same
//! run.
#![allow(clippy::disallowed_methods)] // a benchmark measures wall-clock time

use cosched_runtime::agent::logs::LogBounds;
use cosched_runtime::agent::switcher::{realtime_ns, slice_ns_from_ms, ConfirmWait, SwitchStats};
use cosched_runtime::agent::{Address, Agent, AgentSettings};
use cosched_runtime::controller::skew::{summarize, Summary};
use cosched_runtime::controller::ControllerSettings;
use cosched_runtime::daemon::ControllerListen;
use cosched_runtime::gate::Limits;
use cosched_runtime::wire::auth::Credentials;
use cosched_runtime::wire::client::Client;
use cosched_runtime::wire::protocol::SubmitRequest;
use serde::Serialize;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The gangs' processes: CPU-bound until the daemon's test ends (a crashed bench leaves nothing running for long).
const SPIN: [&str; 5] = ["timeout", "600", "sh", "-c", "while :; do :; done"];
/// How long the daemon and the gangs may take to come up, and the load to be served.
const READY_TIMEOUT: Duration = Duration::from_secs(20);
const LOAD_TIMEOUT: Duration = Duration::from_secs(600);

#[derive(Clone, Debug)]
pub struct LoadBenchSettings {
    /// Clients submitting at once.
    pub clients: usize,
    /// Jobs submitted in all (each `true`, one task).
    pub jobs: usize,
    pub slice_ms: f64,
    /// The quiet window before the load.
    pub quiet: Duration,
    pub realtime: bool,
    pub confirm_wait: ConfirmWait,
    pub switching_threads: usize,
    /// The program that runs the daemon's helpers (`__launch`, `__supervise`, `__watchdog`): this binary.
    pub helper_program: PathBuf,
}

/// Switch latency (boundary to the incoming gang thawed) and lateness (boundary to the switching thread awake), ns.
#[derive(Clone, Debug, Default, Serialize)]
pub struct SwitchTiming {
    pub latency: Summary,
    pub lateness: Summary,
    /// Boundary to every outgoing gang asked to stop, and to the end of the wait for the kernel's confirmation: where
    /// a slow switch spent its time.
    pub requested: Summary,
    pub confirmed: Summary,
}

#[derive(Clone, Debug, Serialize)]
pub struct LoadReport {
    pub clients: usize,
    pub jobs: usize,
    pub slice_ms: f64,
    pub quiet: SwitchTiming,
    pub loaded: SwitchTiming,
    /// From the first submission to every submitted job over.
    pub load_s: f64,
    /// Requests the clients made (submissions and status polls), and those refused.
    pub requests: usize,
    pub refused: usize,
}

/// Run the measurement: the daemon (its state in `dir`, which must outlive this process's daemon threads: keep it
/// until the process ends), the gangs, a quiet window, then the load.
pub fn run(settings: &LoadBenchSettings, dir: &std::path::Path) -> Result<LoadReport, String> {
    let slice_ns = slice_ns_from_ms(settings.slice_ms)?;
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get() as u32);
    let (client, agent) = start_daemon(settings, slice_ns, cpus, dir)?;
    let cpus = cpus.to_string();
    let gangs: Vec<u64> = (0..2).map(|_| submit(&client, &cpus, &SPIN)).collect::<Result<_, _>>()?;
    wait_until("the two gangs to run", || {
        let status = client.status().ok();
        gangs.iter().all(|id| status.as_ref().is_some_and(|s| s.jobs.iter().any(|j| j.id == *id && !j.pids.is_empty())))
    })?;
    std::thread::sleep(Duration::from_secs(1));
    let quiet_from = realtime_ns() / slice_ns + 1;
    std::thread::sleep(settings.quiet);
    let load_from = realtime_ns() / slice_ns + 1;
    let started = Instant::now();
    let (requests, refused) = load(&client, settings)?;
    let load_s = started.elapsed().as_secs_f64();
    let load_to = realtime_ns() / slice_ns;
    let stats = agent.switch_stats();
    end_jobs(&client, &gangs)?;
    agent.stop_switching_and_thaw();
    let _ = agent.groups().remove_agent_dirs();
    Ok(LoadReport {
        clients: settings.clients,
        jobs: settings.jobs,
        slice_ms: settings.slice_ms,
        quiet: timing_between(&stats, quiet_from, load_from),
        loaded: timing_between(&stats, load_from, load_to),
        load_s,
        requests,
        refused,
    })
}

/// `cosched up` in this process, with its own state directory, socket and node, and the agent it runs.
fn start_daemon(
    settings: &LoadBenchSettings,
    slice_ns: u64,
    cpus: u32,
    dir: &std::path::Path,
) -> Result<(Client, Arc<Agent>), String> {
    let socket = dir.join("sock");
    let node = format!("bench-load-{}", std::process::id());
    let controller = ControllerSettings {
        state_dir: dir.to_path_buf(),
        slice_ns,
        nodes: vec![node.clone()],
        ..ControllerSettings::default()
    };
    let listen = ControllerListen {
        socket: socket.clone(),
        tcp: None,
        monitor: None,
        monitor_names: vec![],
        credentials: Credentials::default(),
        limits: Limits::default(),
    };
    let agent = AgentSettings {
        node,
        controller: Address::Unix(socket.clone()),
        credentials: Credentials::default(),
        log_dir: dir.join("logs"),
        freezer: None,
        job_cgroups_in_service: false,
        cpus,
        mem_bytes: 0,
        realtime: settings.realtime,
        confirm_wait: settings.confirm_wait,
        switching_threads: settings.switching_threads.clamp(1, cpus as usize),
        helper_program: settings.helper_program.clone(),
        users_munge_socket: None,
        logs: LogBounds::default(),
    };
    let (_controller, agent) = cosched_runtime::daemon::start_up(controller, listen, agent)
        .map_err(|e| format!("starting the daemon: {e}"))?;
    let client = Client::local(&socket);
    wait_until("the agent to connect", || client.status().is_ok_and(|s| s.nodes.iter().any(|n| n.connected)))?;
    Ok((client, agent))
}

fn submit(client: &Client, tasks: &str, argv: &[&str]) -> Result<u64, String> {
    let request = SubmitRequest {
        tasks: tasks.parse().map_err(|_| format!("bad task count {tasks}"))?,
        ..SubmitRequest::new(argv.iter().map(|a| a.to_string()).collect(), "/".into())
    };
    client.submit(request).map(|reply| reply.job).map_err(|e| format!("submitting: {e}"))
}

/// `settings.clients` threads submit `settings.jobs` short jobs in all, polling `status` after each submission, then
/// wait until every job they submitted is over. Returns the requests made and those refused.
fn load(client: &Client, settings: &LoadBenchSettings) -> Result<(usize, usize), String> {
    let next = Arc::new(AtomicUsize::new(0));
    let (requests, refused) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let submitted = std::sync::Mutex::new(Vec::new());
    std::thread::scope(|scope| {
        for _ in 0..settings.clients.max(1) {
            scope.spawn(|| {
                while next.fetch_add(1, Ordering::Relaxed) < settings.jobs {
                    requests.fetch_add(2, Ordering::Relaxed);
                    match submit(client, "1", &["true"]) {
                        Ok(id) => submitted.lock().unwrap().push(id),
                        Err(_) => _ = refused.fetch_add(1, Ordering::Relaxed),
                    }
                    if client.status().is_err() {
                        refused.fetch_add(1, Ordering::Relaxed);
                    }
                }
            });
        }
    });
    let submitted = submitted.into_inner().unwrap_or_default();
    let deadline = Instant::now() + LOAD_TIMEOUT;
    loop {
        let status = client.status().map_err(|e| format!("status: {e}"))?;
        let open = |id: &u64| status.jobs.iter().any(|j| j.id == *id && !j.state.is_over());
        if !submitted.iter().any(open) {
            break;
        }
        if Instant::now() > deadline {
            return Err(format!("the {} jobs were not over within {} s", submitted.len(), LOAD_TIMEOUT.as_secs()));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    Ok((requests.load(Ordering::Relaxed), refused.load(Ordering::Relaxed)))
}

/// Kill the jobs and wait until the agent has removed their cgroups.
fn end_jobs(client: &Client, jobs: &[u64]) -> Result<(), String> {
    for &id in jobs {
        let _ = client.kill(id);
    }
    wait_until("the gangs to end", || {
        client.status().is_ok_and(|s| s.jobs.iter().filter(|j| jobs.contains(&j.id)).all(|j| j.state.is_over()))
    })
}

/// The switches of slices `from..to`.
fn timing_between(stats: &SwitchStats, from: u64, to: u64) -> SwitchTiming {
    let within = |samples: &std::collections::VecDeque<u64>| -> Vec<u64> {
        stats.slice_numbers.iter().zip(samples).filter(|(s, _)| (from..to).contains(*s)).map(|(_, &v)| v).collect()
    };
    SwitchTiming {
        latency: summarize(&within(&stats.latency_ns)),
        lateness: summarize(&within(&stats.start_offset_ns)),
        requested: summarize(&within(&stats.requested_ns)),
        confirmed: summarize(&within(&stats.confirmed_ns)),
    }
}

fn wait_until(what: &str, mut done: impl FnMut() -> bool) -> Result<(), String> {
    let deadline = Instant::now() + READY_TIMEOUT;
    while !done() {
        if Instant::now() > deadline {
            return Err(format!("timed out waiting for {what}"));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    Ok(())
}
