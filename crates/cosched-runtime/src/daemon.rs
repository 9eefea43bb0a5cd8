//! Putting the pieces together: `cosched up` (controller and a local agent in
//! one process), `cosched controller` and `cosched agent`.

use crate::agent::freezer::CgroupParent;
use crate::agent::watchdog::start_watchdog;
use crate::agent::{Agent, AgentSettings};
use crate::controller::server::Listening;
use crate::controller::{Controller, ControllerSettings};
use crate::gate::{raise_descriptor_limit, Gate, Limits};
use crate::wire::auth::Credentials;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

#[derive(Clone)]
pub struct ControllerListen {
    pub socket: PathBuf,
    pub tcp: Option<String>,
    pub monitor: Option<String>,
    /// Names the monitor answers to besides its address and `localhost` (`--monitor-host`).
    pub monitor_names: Vec<String>,
    /// How TCP peers prove who they are, and how the controller proves it is itself.
    pub credentials: Credentials,
    pub limits: Limits,
}

/// Start the controller's listeners and return it; its periodic work runs in
/// a thread of its own.
pub fn start_controller(settings: ControllerSettings, listen: &ControllerListen) -> std::io::Result<Arc<Controller>> {
    // Nothing the daemon was given passes to what it starts (Slurm's commands).
    crate::agent::launch::close_beyond_standard_descriptors_on_exec()?;
    let controller = Arc::new(Controller::open(settings)?);
    let gate = Gate::new(listen.limits.clone(), raise_descriptor_limit());
    let listening = Listening { controller: controller.clone(), gate, credentials: listen.credentials.clone() };
    crate::controller::server::listen_unix(listening.clone(), &listen.socket)?;
    crate::log_line!("cosched controller: listening on {}", listen.socket.display());
    if let Some(address) = &listen.tcp {
        let bound = crate::controller::server::listen_tcp(listening.clone(), address)?;
        crate::log_line!("cosched controller: listening on tcp {bound}");
    }
    if let Some(address) = &listen.monitor {
        let bound = crate::controller::monitor::serve(listening, address, &listen.monitor_names)?;
        crate::log_line!("cosched controller: monitor at http://{bound}/ (get a URL with a token: cosched monitor)");
        std::fs::write(controller.settings.state_dir.join("monitor.addr"), bound.to_string())?;
    }
    let ticking = controller.clone();
    let period = ticking.settings.tick_period();
    std::thread::Builder::new().name("controller-tick".into()).spawn(move || loop {
        ticking.tick();
        std::thread::sleep(period);
    })?;
    if let Some(slurm_time) = controller.settings.slurm_time.clone() {
        // Slurm's commands may take seconds: on a thread of their own, never holding the controller's lock.
        let extending = controller.clone();
        std::thread::Builder::new().name("slurm-time".into()).spawn(move || loop {
            std::thread::sleep(slurm_time.period);
            extending.keep_slurm_time_limits();
        })?;
    }
    Ok(controller)
}

/// Run an agent until the process ends, with its watchdog beside it; systemd is told it is ready once its cgroups
/// and watchdog are (it connects to its controller after that, and again whenever the link drops).
pub fn run_agent(settings: AgentSettings) -> std::io::Result<()> {
    let agent = prepare_agent(settings)?;
    crate::systemd_notify::ready("cosched agent");
    agent.run()
}

/// `cosched controller`: listen, tell systemd, and serve until the process ends.
pub fn run_controller(settings: ControllerSettings, listen: &ControllerListen) -> std::io::Result<()> {
    let _controller = start_controller(settings, listen)?;
    crate::systemd_notify::ready("cosched controller");
    loop {
        std::thread::park();
    }
}

/// An agent with its watchdog started and supervised, ready to run.
fn prepare_agent(settings: AgentSettings) -> std::io::Result<Arc<Agent>> {
    // Nothing the daemon was given passes to its watchdog or the tasks' supervisors (the shim also closes, for
    // the tasks themselves, whatever the agent holds).
    crate::agent::launch::close_beyond_standard_descriptors_on_exec()?;
    raise_descriptor_limit();
    // In a service's delegated cgroup, the daemon moves to its leaf before it starts anything.
    let parent = match settings.job_cgroups_in_service {
        true => crate::agent::freezer::enter_delegated_cgroup()?,
        false => CgroupParent::top(),
    };
    crate::agent::freezer::refuse_jobs_left_elsewhere(&settings.node, &parent)?;
    // Started first so the agent knows its pid (never movable into a job); lives as long as the agent.
    let watchdog = start_watchdog(&settings.helper_program, &settings.node, &parent)?;
    let agent = Agent::new(settings.clone(), &parent, &[watchdog.pid() as i32])?;
    crate::log_line!("cosched agent {}: {}", settings.node, agent.groups().describe());
    if let Some(hint) = agent.groups().favordynmods_hint() {
        crate::log_line!("cosched agent {}: {hint}", settings.node);
    }
    supervise_watchdog(watchdog, settings, parent, agent.clone())?;
    Ok(agent)
}

/// How often the agent checks that its watchdog lives.
const WATCHDOG_CHECK: Duration = Duration::from_millis(100);

/// Restart the watchdog whenever it dies (killed, OOM); if it cannot be restarted, stop switching and thaw every
/// job, since a crash of the agent would then leave them frozen.
fn supervise_watchdog(
    mut watchdog: crate::agent::watchdog::Watchdog,
    settings: AgentSettings,
    parent: CgroupParent,
    agent: Arc<Agent>,
) -> std::io::Result<()> {
    std::thread::Builder::new().name("watchdog-supervisor".into()).spawn(move || loop {
        std::thread::sleep(WATCHDOG_CHECK);
        if !watchdog.has_exited() {
            continue;
        }
        crate::log_line!("cosched agent {}: the watchdog died; starting another", settings.node);
        match start_watchdog(&settings.helper_program, &settings.node, &parent) {
            Ok(fresh) => watchdog = fresh,
            Err(e) => {
                crate::log_line!(
                    "cosched agent {}: no watchdog ({e}): switching stops and every job is thawed",
                    settings.node
                );
                agent.stop_switching_and_thaw();
                return;
            }
        }
    })?;
    Ok(())
}

/// `cosched up`: a controller and its local agent in one process.
pub fn run_up(settings: ControllerSettings, listen: ControllerListen, agent: AgentSettings) -> std::io::Result<()> {
    let _controller = start_controller(settings, &listen)?;
    let agent = prepare_agent(agent)?;
    crate::systemd_notify::ready("cosched up");
    agent.run()
}

/// `cosched up` on threads of this process, for measurements that read the agent's own records
/// (`cosched bench switch --clients`): returns once the controller listens and the agent runs.
pub fn start_up(
    settings: ControllerSettings,
    listen: ControllerListen,
    agent: AgentSettings,
) -> std::io::Result<(Arc<Controller>, Arc<Agent>)> {
    let controller = start_controller(settings, &listen)?;
    let agent = prepare_agent(agent)?;
    let running = agent.clone();
    std::thread::Builder::new().name("agent".into()).spawn(move || {
        if let Err(e) = running.run() {
            crate::log_line!("cosched agent: {e}");
        }
    })?;
    Ok((controller, agent))
}
