//! The real coscheduler's commands: daemons (`up`, `controller`, `agent`)
//! and the client commands that talk to a controller over its socket.

use crate::status_view::{status_table, Format, StatusFilter};
use clap::Args;
use cosched_munge::Munge;
use cosched_policy::cluster::{Backfill, PlanRules, PlanSettings};
use cosched_runtime::agent::freezer::FreezerKind;
use cosched_runtime::agent::logs::LogBounds;
use cosched_runtime::agent::mpi::{remote_environment, remote_shell_argv};
use cosched_runtime::agent::switcher::ConfirmWait;
use cosched_runtime::agent::{Address, AgentSettings};
use cosched_runtime::controller::metrics::MetricsAccess;
use cosched_runtime::controller::{ControllerSettings, JobLimits};
use cosched_runtime::daemon::ControllerListen;
use cosched_runtime::gate::Limits;
use cosched_runtime::slurm_time::SlurmTimeSettings;
use cosched_runtime::wire::auth::{AgentKey, Credentials};
use cosched_runtime::wire::client::{CallError, Client};
use cosched_runtime::wire::protocol::{
    ExecRequest, HistoryRequest, LogFile, LogsReply, Request, StatusReply, SubmitRequest,
};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

const DEFAULT_SOCKET: &str = "/run/cosched/cosched.sock";
/// The longest time any of the daemon's durations may be set to: a year.
const MAX_SETTING_S: f64 = 365.0 * 86_400.0;

#[derive(Args, Clone, Debug)]
pub struct ControllerArgs {
    /// Directory of the database (cosched.db), status document and job logs.
    #[arg(long, default_value_os_t = ControllerSettings::default().state_dir)]
    pub state_dir: PathBuf,
    /// Unix socket for users and local agents.
    #[arg(long, env = "COSCHED_SOCKET", default_value = DEFAULT_SOCKET)]
    pub socket: PathBuf,
    /// Also listen on TCP (host:port) for agents and users of other hosts. They prove who they are with MUNGE
    /// credentials (agents may use --key-file instead); use a port below 1024 so no user can take it.
    #[arg(long)]
    pub tcp: Option<String>,
    /// The agents' shared key (a file of root's, mode 0600, in folders only root can change, one line of at least
    /// 64 hex digits: `openssl rand -hex 32`): agents may prove themselves with it instead of MUNGE. It never crosses the network. Users over TCP always need MUNGE.
    #[arg(long)]
    pub key_file: Option<PathBuf>,
    #[command(flatten)]
    pub munge: DaemonMungeArgs,
    #[command(flatten)]
    pub limits: LimitArgs,
    /// Serve the web monitor here ("off" to disable).
    #[arg(long, default_value = "127.0.0.1:8180")]
    pub monitor: String,
    /// Another name the monitor answers to (its requests' Host), e.g. this host's name for Prometheus or for
    /// browsers of other hosts; repeat for several. Its address and localhost are always served; a request for any
    /// other name is refused, so a page whose name an attacker points at this address (DNS rebinding) gets nothing.
    #[arg(long = "monitor-host", value_parser = parse_host_name)]
    pub monitor_hosts: Vec<String>,
    /// Serve OpenMetrics figures at the monitor's /metrics: "public" (anyone who reaches the monitor's address, no
    /// token; job ids, users, classes, CPU use, as `status` shows every user; never commands or environments) or
    /// "off".
    #[arg(long, default_value = "public", value_parser = MetricsAccess::parse)]
    pub metrics: MetricsAccess,
    /// Time slice in milliseconds (fractions allowed, from 1 to 60,000); slices start at multiples of it since the
    /// epoch.
    #[arg(long, default_value_t = ControllerSettings::default().slice_ns as f64 / 1e6)]
    pub slice_ms: f64,
    /// Rows of the Ousterhout matrix (gang multiprogramming level).
    #[arg(long, default_value_t = ControllerSettings::default().plan.rows)]
    pub rows: u32,
    /// Processes per CPU admitted for local-class jobs.
    #[arg(long, default_value_t = ControllerSettings::default().plan.local_mpl)]
    pub local_mpl: u32,
    /// Share of each node's CPUs gang jobs may use (the rest stays for the system and local jobs).
    #[arg(long, default_value_t = ControllerSettings::default().plan.gang_cpu_share)]
    pub gang_cpu_share: f64,
    /// Extra cells per task for auxiliary threads (0.25 = one more CPU per four tasks).
    #[arg(long, default_value_t = ControllerSettings::default().plan.over_allocation)]
    pub over_allocation: f64,
    /// Seconds without CPU use after which a gang job reverts to local scheduling.
    #[arg(long, default_value_t = ControllerSettings::default().idle_revert.as_secs_f64())]
    pub idle_revert_s: f64,
    /// Seconds without CPU use after which a job leaves the gang database for good.
    #[arg(long, default_value_t = ControllerSettings::default().idle_forget.as_secs_f64())]
    pub idle_forget_s: f64,
    /// Seconds between SIGTERM and SIGKILL when a job is killed (Slurm's KillWait).
    #[arg(long, default_value_t = ControllerSettings::default().kill_wait.as_secs_f64())]
    pub kill_wait_s: f64,
    /// Seconds a finished job stays in `status` (its record stays, for `cosched history`).
    #[arg(long, default_value_t = ControllerSettings::default().keep_finished.as_secs_f64())]
    pub keep_finished_s: f64,
    /// Days a finished job stays in `cosched history` and the database; then its record is removed (fractions
    /// allowed; at least an hour and at least --keep-finished-s). Memory and the database hold every record kept.
    #[arg(long, default_value_t = ControllerSettings::default().keep_history.as_secs_f64() / 86_400.0)]
    pub keep_history_days: f64,
    /// Show every user the command lines of other users' jobs (default: hidden from all but administrators).
    #[arg(long)]
    pub public_data: bool,
    /// Users (uids) with administrator rights besides root.
    #[arg(long = "admin-uid")]
    pub admin_uids: Vec<u32>,
    /// The cluster's nodes, as Slurm hostlists (node[01-16],login; repeatable): an agent naming any other node is
    /// refused. `cosched up` adds its own node; a controller without any accepts no agent.
    #[arg(long = "nodes", value_name = "HOSTLIST")]
    pub nodes: Vec<String>,
    /// Jobs not over (queued, running, suspended) one user may have; more are refused (Slurm's MaxSubmitJobs).
    #[arg(long, default_value_t = JobLimits::default().per_user)]
    pub max_jobs_per_user: usize,
    /// Jobs not over of all users together (Slurm's MaxJobCount).
    #[arg(long, default_value_t = JobLimits::default().total)]
    pub max_jobs: usize,
    /// Seconds after its registration when a registered job that no process joined ends (Slurm jobs end at their
    /// epilog instead).
    #[arg(long, default_value_t = ControllerSettings::default().empty_job_grace.as_secs_f64())]
    pub empty_job_grace_s: f64,
    #[command(flatten)]
    pub slurm_time: SlurmTimeArgs,
}

/// Slurm's time limits of the Slurm jobs cosched slices (docs/slurm.md, "Time limits").
#[derive(Args, Clone, Debug)]
pub struct SlurmTimeArgs {
    /// Seconds between the passes that add to each sliced Slurm job's end time the time it spent out of its slots
    /// (through squeue and scontrol, as root); 0: never.
    #[arg(long, default_value_t = SlurmTimeSettings::default().period.as_secs_f64())]
    pub slurm_time_period_s: f64,
    /// The directory of Slurm's squeue and scontrol: it and they must be root's and writable by root alone.
    #[arg(long, default_value_os_t = SlurmTimeSettings::default().bin_dir)]
    pub slurm_bin_dir: PathBuf,
    /// The slurm.conf they read (default: Slurm's own choice); root's and writable by root alone.
    #[arg(long)]
    pub slurm_conf: Option<PathBuf>,
}

/// The daemons' munged: whatever answers there says who every remote user and agent is, so it is named on the
/// command line alone, never by `COSCHED_MUNGE_SOCKET`, which a shell that carried a user's environment to root
/// (`sudo -E`, `su` without `-`) would pass on.
#[derive(Args, Clone, Debug)]
pub struct DaemonMungeArgs {
    /// The socket of this host's munged (default: MUNGE's own, /run/munge/munge.socket.2).
    #[arg(long)]
    pub munge_socket: Option<PathBuf>,
}

#[derive(Args, Clone, Debug)]
pub struct MungeArgs {
    /// The socket of this host's munged (default: MUNGE's own, /run/munge/munge.socket.2).
    #[arg(long, env = "COSCHED_MUNGE_SOCKET", global = true)]
    pub munge_socket: Option<PathBuf>,
}

/// Bounds on the controller's connections (see docs/security.md, "Sizes and connections").
#[derive(Args, Clone, Debug)]
pub struct LimitArgs {
    /// Connections held at once, all clients together (kept inside the open-file limit).
    #[arg(long, default_value_t = Limits::default().connections)]
    pub max_connections: usize,
    /// Connections one user holds at once.
    #[arg(long, default_value_t = Limits::default().per_user)]
    pub max_connections_per_user: usize,
    /// TCP connections not yet authenticated, in all (a quarter of it per address, at least 1).
    #[arg(long, default_value_t = Limits::default().unauthenticated)]
    pub max_unauthenticated: usize,
    /// Seconds a request may take once it has begun (and a TCP peer to authenticate).
    #[arg(long, default_value_t = Limits::default().request_timeout.as_secs_f64())]
    pub request_timeout_s: f64,
    /// Seconds after which a silent connection is closed.
    #[arg(long, default_value_t = Limits::default().idle_timeout.as_secs_f64())]
    pub idle_timeout_s: f64,
}

#[derive(Args, Clone, Debug)]
pub struct AgentArgs {
    /// This node's name (default: the host name).
    #[arg(long)]
    pub node: Option<String>,
    /// Freezer to use (default: detected; v2, v1 or signals).
    #[arg(long, value_parser = parse_freezer)]
    pub freezer: Option<FreezerKind>,
    /// Where the job cgroups go: `top` of each hierarchy (`/sys/fs/cgroup/cosched/NODE/job-N`), or inside the
    /// `service` whose cgroup the daemon starts in, delegated to it (a systemd unit with Delegate=yes; the daemon
    /// moves itself to the leaf `daemon` and puts jobs in `cosched/NODE/job-N` beside it; cgroup v2 only).
    #[arg(long, value_name = "WHERE", default_value = "top", value_parser = ["top", "service"])]
    pub job_cgroups: String,
    /// CPUs offered (default: all).
    #[arg(long)]
    pub cpus: Option<u32>,
    /// Do not put the switching thread in the real-time class.
    #[arg(long)]
    pub no_realtime: bool,
    /// Start the incoming gang only once the kernel confirms that every task of the outgoing one stopped, however
    /// long that takes (default: wait at most a twentieth of the slice, at most 1 ms; the outgoing gang runs no user
    /// code once asked to stop, see docs/runtime.md).
    #[arg(long)]
    pub strict_switch: bool,
    /// Switching threads, each on a CPU of its own: the first awake at a slice boundary switches, so a CPU held
    /// back by the hypervisor delays a switch only if every switching thread's CPU is (1 on a one-CPU node).
    #[arg(long, default_value_t = 2)]
    pub switching_threads: usize,
    /// The most one log of a job may take on this node's disk (e.g. 64M): beyond it its head is freed and its tail
    /// (what `cosched logs` shows) kept.
    #[arg(long, default_value_t = ByteSize(LogBounds::default().file_bytes))]
    pub max_log_bytes: ByteSize,
    /// The most all logs of one user may take on this node's disk together.
    #[arg(long, default_value_t = ByteSize(LogBounds::default().user_bytes))]
    pub max_user_log_bytes: ByteSize,
    /// Seconds the logs of a job stay on this node after it ended there (after their last write).
    #[arg(long, default_value_t = LogBounds::default().retention.as_secs_f64())]
    pub log_retention_s: f64,
    /// What the file system of the logs (and of the database, on the controller's node) keeps free of jobs' output:
    /// output that would go below it is dropped, with a line in the log saying so.
    #[arg(long, default_value_t = ByteSize(LogBounds::default().reserve_bytes))]
    pub log_reserve_bytes: ByteSize,
}

#[derive(Args, Clone, Debug)]
pub struct RemoteAgentArgs {
    /// The controller: a Unix socket path or host:port.
    #[arg(long)]
    pub controller: String,
    /// The agents' shared key (a file of root's, mode 0600): over TCP, prove with it instead of MUNGE.
    #[arg(long)]
    pub key_file: Option<PathBuf>,
    #[command(flatten)]
    pub munge: DaemonMungeArgs,
    /// Directory for job logs.
    #[arg(long, default_value = "/var/lib/cosched")]
    pub state_dir: PathBuf,
    #[command(flatten)]
    pub agent: AgentArgs,
}

fn parse_freezer(text: &str) -> Result<FreezerKind, String> {
    match text.to_ascii_lowercase().as_str() {
        "v2" => Ok(FreezerKind::V2),
        "v1" => Ok(FreezerKind::V1),
        "signals" => Ok(FreezerKind::Signals),
        other => Err(format!("unknown freezer {other:?} (v2, v1 or signals)")),
    }
}

fn parse_host_name(text: &str) -> Result<String, String> {
    let valid = !text.is_empty()
        && text.len() <= 253
        && text.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '.');
    valid.then(|| text.to_string()).ok_or_else(|| format!("{text:?} is not a host name (letters, digits, '-', '.')"))
}

fn read_key(path: &Option<PathBuf>) -> Result<Option<Arc<AgentKey>>, String> {
    path.as_deref().map(|p| AgentKey::load(p).map(Arc::new)).transpose()
}

/// MUNGE through this host's munged, checked with one credential (so a missing munged is said at start).
fn open_munge(socket: Option<&Path>) -> Result<Arc<Munge>, String> {
    let munge = Munge::open(socket).map_err(|e| e.to_string())?;
    munge.check().map_err(|e| format!("{e} (is munged running? see --munge-socket)"))?;
    Ok(Arc::new(munge))
}

/// What the controller proves itself and checks its TCP peers with: MUNGE if it works here, and the agents' key
/// if given. TCP without either is refused.
fn controller_credentials(args: &ControllerArgs) -> Result<Credentials, String> {
    let agent_key = read_key(&args.key_file)?;
    if args.tcp.is_none() {
        return Ok(Credentials { munge: None, agent_key });
    }
    let munge = match (open_munge(args.munge.munge_socket.as_deref()), &agent_key) {
        (Ok(munge), _) => Some(munge),
        (Err(e), Some(_)) => {
            cosched_runtime::log_line!(
                "cosched controller: WARNING: {e}: users of other hosts cannot authenticate; agents use the key"
            );
            None
        }
        (Err(e), None) => return Err(format!("--tcp needs MUNGE or --key-file: {e}")),
    };
    Ok(Credentials { munge, agent_key })
}

fn limits(args: &LimitArgs) -> Result<Limits, String> {
    let seconds = |flag: &str, value: f64| {
        if value.is_finite() && (0.1..=MAX_SETTING_S).contains(&value) {
            Ok(Duration::from_secs_f64(value))
        } else {
            Err(format!("{flag} {value} must be between 0.1 and {MAX_SETTING_S} seconds"))
        }
    };
    if args.max_connections == 0 || args.max_connections_per_user == 0 || args.max_unauthenticated == 0 {
        return Err("connection limits must be at least 1".into());
    }
    Ok(Limits {
        connections: args.max_connections,
        per_user: args.max_connections_per_user,
        unauthenticated: args.max_unauthenticated,
        unauthenticated_per_address: (args.max_unauthenticated / 4).max(1),
        request_timeout: seconds("--request-timeout-s", args.request_timeout_s)?,
        idle_timeout: seconds("--idle-timeout-s", args.idle_timeout_s)?,
        ..Limits::default()
    })
}

fn controller_settings(args: &ControllerArgs) -> Result<(ControllerSettings, ControllerListen), String> {
    let slice_ns = cosched_runtime::agent::switcher::slice_ns_from_ms(args.slice_ms)
        .map_err(|e| format!("--slice-ms {}: {e}", args.slice_ms))?;
    if args.rows == 0 || args.local_mpl == 0 {
        return Err("--rows and --local-mpl must be at least 1".into());
    }
    if !(args.gang_cpu_share > 0.0 && args.gang_cpu_share <= 1.0) {
        return Err("--gang-cpu-share must be in (0, 1]".into());
    }
    let seconds = |flag: &str, value: f64| {
        if value.is_finite() && (0.0..=MAX_SETTING_S).contains(&value) {
            Ok(Duration::from_secs_f64(value))
        } else {
            Err(format!("{flag} {value} must be between 0 and {MAX_SETTING_S} seconds"))
        }
    };
    let kill_wait = seconds("--kill-wait-s", args.kill_wait_s)?;
    let keep_finished = seconds("--keep-finished-s", args.keep_finished_s)?;
    let empty_job_grace = seconds("--empty-job-grace-s", args.empty_job_grace_s)?;
    let keep_history = seconds("--keep-history-days", args.keep_history_days * 86_400.0)
        .ok()
        .filter(|kept| *kept >= MIN_KEEP_HISTORY.max(keep_finished))
        .ok_or_else(|| {
            format!(
                "--keep-history-days {} must be between 1/24 (an hour: submit --wait reads its job's end there) and \
                 365, and no shorter than --keep-finished-s",
                args.keep_history_days
            )
        })?;
    if args.max_jobs_per_user == 0 || args.max_jobs == 0 {
        return Err("--max-jobs-per-user and --max-jobs must be at least 1".into());
    }
    let job_limits = JobLimits {
        per_user: args.max_jobs_per_user,
        total: args.max_jobs,
        // Each waiting `cosched rsh` holds a connection of its user: a quarter of them stays for other requests.
        waiting_execs_per_user: (args.limits.max_connections_per_user * 3 / 4).max(1),
    };
    let settings = ControllerSettings {
        state_dir: args.state_dir.clone(),
        slice_ns,
        plan: PlanSettings {
            rules: PlanRules::COSCHED,
            rows: args.rows,
            local_mpl: args.local_mpl,
            gang_cpu_share: args.gang_cpu_share,
            over_allocation: args.over_allocation.max(0.0),
            backfill: Backfill::None,
        },
        idle_revert: Duration::from_secs_f64(args.idle_revert_s.max(0.0)),
        idle_forget: Duration::from_secs_f64(args.idle_forget_s.max(0.0)),
        admin_uids: args.admin_uids.clone(),
        kill_wait,
        keep_finished,
        keep_history,
        private_data: !args.public_data,
        metrics: args.metrics,
        nodes: node_names(&args.nodes)?,
        job_limits,
        empty_job_grace,
        slurm_time: slurm_time_settings(&args.slurm_time)?,
    };
    let listen = ControllerListen {
        socket: args.socket.clone(),
        tcp: args.tcp.clone(),
        monitor: (args.monitor != "off").then(|| args.monitor.clone()),
        monitor_names: args.monitor_hosts.clone(),
        credentials: controller_credentials(args)?,
        limits: limits(&args.limits)?,
    };
    Ok((settings, listen))
}

/// Where the controller finds Slurm, or `None` when it is never to extend Slurm's end times.
fn slurm_time_settings(args: &SlurmTimeArgs) -> Result<Option<SlurmTimeSettings>, String> {
    let period_s = args.slurm_time_period_s;
    if !(period_s.is_finite() && (period_s == 0.0 || (1.0..=3_600.0).contains(&period_s))) {
        return Err(format!("--slurm-time-period-s {period_s} must be 0 (never) or from 1 to 3600 seconds"));
    }
    if period_s == 0.0 {
        return Ok(None);
    }
    let absolute = |flag: &str, path: &std::path::Path| {
        if path.is_absolute() {
            Ok(())
        } else {
            Err(format!("{flag} {}: must be an absolute path", path.display()))
        }
    };
    absolute("--slurm-bin-dir", &args.slurm_bin_dir)?;
    if let Some(conf) = &args.slurm_conf {
        absolute("--slurm-conf", conf)?;
    }
    Ok(Some(SlurmTimeSettings {
        bin_dir: args.slurm_bin_dir.clone(),
        slurm_conf: args.slurm_conf.clone(),
        period: Duration::from_secs_f64(period_s),
        ..SlurmTimeSettings::default()
    }))
}

/// The node names of `--nodes` hostlists, in order, each once.
fn node_names(hostlists: &[String]) -> Result<Vec<String>, String> {
    let mut names: Vec<String> = Vec::new();
    for hostlist in hostlists {
        for name in cosched_runtime::slurm::expand_hostlist(hostlist).map_err(|e| format!("--nodes: {e}"))? {
            cosched_runtime::wire::protocol::checks::validate_node_name(&name).map_err(|e| format!("--nodes: {e}"))?;
            if !names.contains(&name) {
                names.push(name);
            }
        }
    }
    Ok(names)
}

fn log_bounds(args: &AgentArgs) -> Result<LogBounds, String> {
    if !(args.log_retention_s.is_finite() && (0.0..=MAX_SETTING_S).contains(&args.log_retention_s)) {
        return Err(format!(
            "--log-retention-s {} must be between 0 and {MAX_SETTING_S} seconds",
            args.log_retention_s
        ));
    }
    if args.max_log_bytes.0 == 0 || args.max_user_log_bytes.0 == 0 {
        return Err("--max-log-bytes and --max-user-log-bytes must be above 0".into());
    }
    Ok(LogBounds {
        file_bytes: args.max_log_bytes.0,
        user_bytes: args.max_user_log_bytes.0,
        retention: Duration::from_secs_f64(args.log_retention_s),
        reserve_bytes: args.log_reserve_bytes.0,
    })
}

fn agent_settings(
    args: &AgentArgs,
    controller: Address,
    credentials: Credentials,
    state_dir: &std::path::Path,
) -> Result<AgentSettings, String> {
    let node = match &args.node {
        Some(n) => n.clone(),
        None => {
            std::fs::read_to_string("/proc/sys/kernel/hostname").map(|s| s.trim().to_string()).unwrap_or("node".into())
        }
    };
    cosched_runtime::wire::protocol::checks::validate_node_name(&node)?;
    let all_cpus = std::thread::available_parallelism().map(|n| n.get() as u32).unwrap_or(1);
    Ok(AgentSettings {
        node,
        controller,
        credentials,
        log_dir: state_dir.join("logs"),
        freezer: args.freezer,
        job_cgroups_in_service: args.job_cgroups == "service",
        cpus: args.cpus.unwrap_or(all_cpus).clamp(1, all_cpus),
        mem_bytes: mem_total_bytes(),
        realtime: !args.no_realtime,
        confirm_wait: if args.strict_switch { ConfirmWait::Strict } else { ConfirmWait::Bounded },
        switching_threads: args.switching_threads.clamp(1, all_cpus as usize),
        helper_program: std::env::current_exe().map_err(|e| format!("finding this program: {e}"))?,
        users_munge_socket: None,
        logs: log_bounds(args)?,
    })
}

fn mem_total_bytes() -> u64 {
    let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
    meminfo
        .lines()
        .find(|l| l.starts_with("MemTotal:"))
        .and_then(|l| l.split_whitespace().nth(1)?.parse::<u64>().ok())
        .map_or(0, |kib| kib * 1024)
}

pub fn up(controller: &ControllerArgs, agent: &AgentArgs) -> Result<(), String> {
    let (mut settings, listen) = controller_settings(controller)?;
    let local = Address::Unix(listen.socket.clone());
    let agent = agent_settings(agent, local, Credentials::default(), &settings.state_dir)?;
    // Its own node first: the default node of `register`.
    settings.nodes.retain(|name| *name != agent.node);
    settings.nodes.insert(0, agent.node.clone());
    cosched_runtime::daemon::run_up(settings, listen, agent).map_err(|e| e.to_string())
}

pub fn controller(args: &ControllerArgs) -> Result<(), String> {
    let (settings, listen) = controller_settings(args)?;
    if settings.nodes.is_empty() {
        cosched_runtime::log_line!("cosched controller: WARNING: no --nodes given: no agent will be accepted");
    }
    cosched_runtime::daemon::run_controller(settings, &listen).map_err(|e| e.to_string())
}

pub fn agent(args: &RemoteAgentArgs) -> Result<(), String> {
    let address = Address::parse(&args.controller);
    let agent_key = read_key(&args.key_file)?;
    let munge = match (&address, &agent_key) {
        (Address::Tcp(_), None) => Some(
            open_munge(args.munge.munge_socket.as_deref())
                .map_err(|e| format!("an agent over TCP proves itself with MUNGE or --key-file: {e}"))?,
        ),
        _ => None,
    };
    let mut settings = agent_settings(&args.agent, address, Credentials { munge, agent_key }, &args.state_dir)?;
    settings.users_munge_socket = args.munge.munge_socket.clone();
    cosched_runtime::daemon::run_agent(settings).map_err(|e| e.to_string())
}

// ---- client commands ----

#[derive(Args, Clone, Debug)]
pub struct ClientArgs {
    /// The controller's Unix socket.
    #[arg(long, env = "COSCHED_SOCKET", default_value = DEFAULT_SOCKET, global = true)]
    pub socket: PathBuf,
    /// A controller on another host (host:port): you prove who you are with a MUNGE credential.
    #[arg(long, env = "COSCHED_CONTROLLER", global = true)]
    pub controller: Option<String>,
    #[command(flatten)]
    pub munge: MungeArgs,
    /// Print the controller's reply as JSON.
    #[arg(long, global = true)]
    pub json: bool,
}

#[derive(Args, Clone, Debug)]
pub struct SubmitArgs {
    /// Number of tasks (processes), one CPU each.
    #[arg(short = 'n', long, default_value_t = 1)]
    pub tasks: u32,
    /// Spread the tasks over this many nodes (default: as few as fit).
    #[arg(long)]
    pub nodes: Option<u32>,
    /// express (administrators only), interactive, batch or standby.
    #[arg(long, default_value = "batch")]
    pub class: String,
    /// Memory per node, e.g. 512M or 2G (admission: never more than fits).
    #[arg(long, value_parser = parse_size)]
    pub mem: Option<u64>,
    /// Never stop this job for time slices (it runs like a local job).
    #[arg(long)]
    pub slice_opt_out: bool,
    /// Leave the job to the local (Linux) scheduler instead of gang scheduling.
    #[arg(long)]
    pub local: bool,
    /// The command is an MPI launcher (mpirun, mpiexec): run it once, on the job's first node, with the job's
    /// CPUs as its hosts and `cosched rsh` as its remote shell, so that every rank starts inside the job on its
    /// node. Example: cosched submit --mpi -n 8 --nodes 4 -- mpirun ./prog
    #[arg(long)]
    pub mpi: bool,
    /// Wait until the job ends, then exit with its exit status (as sbatch --wait): 0 when it finished, its
    /// code when it failed with one, 1 otherwise (killed, or failed without a code).
    #[arg(long)]
    pub wait: bool,
    /// A name for the job, shown by status and history (`-o name`): at most 256 bytes, no white space.
    #[arg(short = 'J', long = "job-name")]
    pub name: Option<String>,
    /// The longest the job may run in its slots, as Slurm writes limits: MINUTES, MM:SS, HH:MM:SS, D-HH,
    /// D-HH:MM, D-HH:MM:SS. Time out of its slots (other gangs' turns) and time suspended do not count: a job
    /// sharing its CPUs with a second gang may take twice its limit in wall time. Reached, the job is killed
    /// (SIGTERM, SIGKILL after --kill-wait-s) and fails with the reason "time limit".
    #[arg(short = 't', long)]
    pub time: Option<TimeLimit>,
    /// Write the tasks' standard output (and their standard error, unless -e is given) to this file instead of
    /// the job's log, as sbatch does. Relative to the current folder; opened by each task as you, so only where
    /// you may write. Escapes: %j job id, %t task rank, %N node, %u user, %x job name, %% a percent sign (%4t:
    /// rank as 4 digits). Without %t all tasks share the file. Example: -o 'run-%j.%t.out'
    #[arg(short = 'o', long, value_name = "PATTERN", value_hint = clap::ValueHint::FilePath)]
    pub output: Option<String>,
    /// Write the tasks' standard error to this file (the escapes of -o).
    #[arg(short = 'e', long, value_name = "PATTERN", value_hint = clap::ValueHint::FilePath)]
    pub error: Option<String>,
    /// Empty the -o/-e files when the job starts (truncate), or add to them (append). Only a job of one task has
    /// its files emptied: in a job of several, a task emptying a file could wipe what others wrote already.
    #[arg(long, value_enum, default_value = "truncate")]
    pub open_mode: OpenMode,
    /// The command and its arguments.
    #[arg(last = true, required = true)]
    pub command: Vec<String>,
}

/// `--open-mode`: sbatch's.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum OpenMode {
    Truncate,
    Append,
}

/// This process's file mode creation mask, which the job's tasks get (reading it means setting it: it is set back).
fn current_umask() -> u32 {
    use nix::sys::stat::{umask, Mode};
    let mask = umask(Mode::from_bits_truncate(0o077));
    umask(mask);
    mask.bits()
}

/// A time limit as `sbatch --time` takes it, in seconds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TimeLimit(pub u64);

impl std::str::FromStr for TimeLimit {
    type Err = String;
    fn from_str(text: &str) -> Result<TimeLimit, String> {
        time_limit_s(text).map(TimeLimit).ok_or_else(|| {
            format!("'{text}' is not a time limit: MINUTES, MM:SS, HH:MM:SS, D-HH, D-HH:MM or D-HH:MM:SS")
        })
    }
}

/// sbatch's forms: a lone number is minutes; with days, the first field after the dash is hours.
fn time_limit_s(text: &str) -> Option<u64> {
    let number = |t: &str| t.parse::<u64>().ok().filter(|_| (1..=9).contains(&t.len()));
    let (days, clock) = match text.trim().split_once('-') {
        Some((days, clock)) => (Some(number(days)?), clock),
        None => (None, text.trim()),
    };
    let fields: Vec<u64> = clock.split(':').map(number).collect::<Option<_>>()?;
    let (hours, minutes, seconds) = match (days.is_some(), &fields[..]) {
        (false, &[m]) => (0, m, 0),
        (false, &[m, s]) => (0, m, s),
        (false, &[h, m, s]) | (true, &[h, m, s]) => (h, m, s),
        (true, &[h]) => (h, 0, 0),
        (true, &[h, m]) => (h, m, 0),
        _ => return None,
    };
    let total_s = ((days.unwrap_or(0) * 24 + hours) * 60 + minutes) * 60 + seconds;
    (total_s > 0).then_some(total_s)
}

/// `cosched rsh NODE WORDS...`: what an MPI job's launcher calls instead of ssh (cosched sets it up).
#[derive(Args, Clone, Debug)]
pub struct RshArgs {
    /// A node of the job (as cosched names it).
    pub node: String,
    /// The remote command's words, joined by spaces and run by /bin/sh on the node, as ssh does.
    #[arg(trailing_var_arg = true, allow_hyphen_values = true, required = true)]
    pub words: Vec<String>,
}

/// Run a command in this job (`COSCHED_JOB_ID`) on `args.node`, inside the job's cgroup there, and return its
/// exit code once it ends.
pub fn rsh(client: &ClientArgs, args: &RshArgs) -> Result<i32, String> {
    let job = std::env::var("COSCHED_JOB_ID")
        .map_err(|_| "cosched rsh runs inside a cosched job: COSCHED_JOB_ID is not set".to_string())?;
    let job: u64 = job.parse().map_err(|_| format!("COSCHED_JOB_ID {job:?} is not a job id"))?;
    let cwd = std::env::current_dir().map_err(|e| format!("current directory: {e}"))?;
    let request = ExecRequest {
        job,
        node: args.node.clone(),
        argv: remote_shell_argv(&args.words),
        cwd: cwd.to_string_lossy().into_owned(),
        env: remote_environment(std::env::vars()),
    };
    let reply = client_for(client)?.exec(request).map_err(explain)?;
    Ok(reply.exit_code)
}

/// A remote shell that cannot start its command leaves an MPI launcher waiting for daemons that will never call
/// back: MPICH's Hydra waits for ever (Open MPI gives up by itself). So in an MPI job (the agent marks the
/// launcher's environment, `mpi::RSH_ENDS_LAUNCHER`) a `cosched rsh` that failed ends its caller, the launcher,
/// with SIGTERM, and the job ends failed at once. Only a caller in the same job on this node (the same cgroups)
/// is ended: this returns it.
pub fn launcher_to_end_after_failed_rsh() -> Option<nix::unistd::Pid> {
    std::env::var_os(cosched_runtime::agent::mpi::RSH_ENDS_LAUNCHER)?;
    let caller = nix::unistd::getppid();
    let cgroups = |pid: &str| std::fs::read_to_string(format!("/proc/{pid}/cgroup")).ok();
    let same_job = caller.as_raw() > 1 && cgroups("self").is_some() && cgroups("self") == cgroups(&caller.to_string());
    same_job.then_some(caller)
}

/// What of a failed `cosched rsh`'s message goes to the launcher, leaving room for the rest of the lines.
const MOST_OF_PIPE_BUF_BYTES: usize = 3 << 10;

/// Says why on the launcher's own standard error, then ends it. The launcher's standard error is the user's `-e`
/// file, or a pipe of root's to the job's log that the user cannot reopen; ours is a pipe the launcher relays. A
/// launcher ending on the signal never relays what is still in that pipe (MPICH's Hydra, failing to pass the
/// signal on, printed its own errors and exited without it), so the signal waits until the launcher has read it.
pub fn end_launcher_after_failed_rsh(launcher: nix::unistd::Pid, message: &str) {
    // One write into a pipe goes in whole (PIPE_BUF is 4 KiB), whatever the daemon's error said.
    let message = cut_at_char_boundary(message, MOST_OF_PIPE_BUF_BYTES);
    let why = format!(
        "cosched rsh: {message}\ncosched rsh: ending the MPI launcher (pid {launcher}), which would wait for ever\n"
    );
    if append_to_launchers_log(launcher, why.as_bytes()).is_err() && write_to_stderr_without_waiting(&why) {
        wait_until_stderr_is_read();
    }
    signal_parent(launcher, rustix::process::Signal::TERM);
}

/// Signals `parent` if it is still our parent. A pidfd holds the very process: opened first, and the parent still
/// `parent` after, it cannot name another process that took the number since (a parent that ends before the open
/// leaves us another parent). Where pidfds are missing (Linux before 5.3, a seccomp filter) it signals by number
/// right after the check, as before: a launcher left running would wait for ever.
fn signal_parent(parent: nix::unistd::Pid, signal: rustix::process::Signal) {
    use rustix::process::{pidfd_open, pidfd_send_signal, Pid, PidfdFlags};
    let Some(pid) = Pid::from_raw(parent.as_raw()) else { return };
    let still_parent = || nix::unistd::getppid() == parent;
    match pidfd_open(pid, PidfdFlags::empty()) {
        Ok(pidfd) if still_parent() => {
            let _ = pidfd_send_signal(&pidfd, signal);
        }
        Ok(_) | Err(rustix::io::Errno::SRCH) => {}
        Err(_) if still_parent() => {
            let _ = rustix::process::kill_process(pid, signal);
        }
        Err(_) => {}
    }
}

/// The longest start of `text` of at most `bytes` bytes that ends between characters.
fn cut_at_char_boundary(text: &str, bytes: usize) -> &str {
    let end = (0..=text.len().min(bytes)).rev().find(|&end| text.is_char_boundary(end)).unwrap_or(0);
    &text[..end]
}

/// Writes `text` on our standard error without ever blocking on a pipe nobody reads (the launcher must end either
/// way), and puts the descriptor's flags back: it may be shared with the launcher, which must not find its own
/// standard error non-blocking, or no longer appending. Whether it was all written.
fn write_to_stderr_without_waiting(text: &str) -> bool {
    use nix::fcntl::{fcntl, FcntlArg, OFlag};
    use std::io::Write;
    let Ok(flags) = fcntl(2, FcntlArg::F_GETFL).map(OFlag::from_bits_truncate) else { return false };
    if fcntl(2, FcntlArg::F_SETFL(flags | OFlag::O_NONBLOCK)).is_err() {
        return false;
    }
    let written = std::io::stderr().write_all(text.as_bytes()).is_ok();
    let _ = fcntl(2, FcntlArg::F_SETFL(flags));
    written
}

/// Until our standard error, if a pipe, holds nothing unread: 500 looks 10 ms apart at the most (about five
/// seconds while the job runs; longer while it is frozen, when the launcher cannot read either), and a launcher that
/// never reads it is ended all the same. Only a pipe: for a file, a terminal or a socket, FIONREAD counts something
/// else. A pipe other writers share (the launcher's own standard error) may hold their bytes too, which costs only
/// the wait.
fn wait_until_stderr_is_read() {
    use nix::sys::stat::{fstat, SFlag};
    const POLL: std::time::Duration = std::time::Duration::from_millis(10);
    let kind = |mode| SFlag::from_bits_truncate(mode) & SFlag::S_IFMT;
    if !fstat(2).is_ok_and(|stat| kind(stat.st_mode) == SFlag::S_IFIFO) {
        return;
    }
    for _ in 0..500 {
        if !rustix::io::ioctl_fionread(std::io::stderr()).is_ok_and(|unread| unread > 0) {
            return;
        }
        std::thread::sleep(POLL);
    }
}

/// Appends to the launcher's standard error if it is a regular file (the user's `-e` file), reopened as this
/// process may: never as root (a reopen can write where the launcher could only read), never a pipe, FIFO or
/// device (an open or a write that may wait, or act), and never waiting.
fn append_to_launchers_log(launcher: nix::unistd::Pid, text: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let not_a_log = || std::io::Error::other("the launcher's standard error is not a log file");
    let path = format!("/proc/{launcher}/fd/2");
    if nix::unistd::geteuid().is_root() || !std::fs::metadata(&path)?.file_type().is_file() {
        return Err(not_a_log());
    }
    let flags = nix::fcntl::OFlag::O_NONBLOCK | nix::fcntl::OFlag::O_NOCTTY;
    let mut log = std::fs::OpenOptions::new().append(true).custom_flags(flags.bits()).open(&path)?;
    if !log.metadata()?.file_type().is_file() {
        return Err(not_a_log()); // swapped between the look and the open
    }
    log.write_all(text)
}

/// A size in bytes as the flags take and show it (512M, 2G).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ByteSize(pub u64);

impl std::fmt::Display for ByteSize {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let unit = [("T", 40), ("G", 30), ("M", 20), ("K", 10)]
            .into_iter()
            .find(|&(_, shift)| self.0 >= 1 << shift && self.0.is_multiple_of(1 << shift));
        match unit {
            Some((name, shift)) => write!(f, "{}{name}", self.0 >> shift),
            None => write!(f, "{}", self.0),
        }
    }
}

impl std::str::FromStr for ByteSize {
    type Err = String;
    fn from_str(text: &str) -> Result<ByteSize, String> {
        parse_size(text).map(ByteSize)
    }
}

pub fn parse_size(text: &str) -> Result<u64, String> {
    let t = text.trim();
    let (digits, unit) = t.split_at(t.find(|c: char| !c.is_ascii_digit() && c != '.').unwrap_or(t.len()));
    let value: f64 = digits.parse().map_err(|_| format!("bad size {text:?} (e.g. 512M, 2G)"))?;
    let factor = match unit.to_ascii_uppercase().trim_end_matches("IB").trim_end_matches('B') {
        "" => 1u64,
        "K" => 1 << 10,
        "M" => 1 << 20,
        "G" => 1 << 30,
        "T" => 1 << 40,
        _ => return Err(format!("bad size unit in {text:?} (K, M, G or T)")),
    };
    Ok((value * factor as f64) as u64)
}

/// The protocol client for the controller these arguments name.
pub fn client_for(client: &ClientArgs) -> Result<Client, String> {
    match &client.controller {
        Some(host_port) => {
            let munge = open_munge(client.munge.munge_socket.as_deref())?;
            let credentials = Credentials { munge: Some(munge), agent_key: None };
            Ok(Client::new(Address::Tcp(host_port.clone()), credentials))
        }
        None => Ok(Client::local(client.socket.clone())),
    }
}

/// The error of a call, with a hint when the controller cannot be reached.
fn explain(error: CallError) -> String {
    match error {
        CallError::Link(e) if e.starts_with("cannot reach") => {
            format!("{e} (is `cosched up` running? see --socket and --controller)")
        }
        other => other.to_string(),
    }
}

/// Send a request and return its reply's data as a `T`.
pub fn ask<T: serde::de::DeserializeOwned>(client: &ClientArgs, request: &Request) -> Result<T, String> {
    client_for(client)?.ask(request).map_err(explain)
}

/// `act` on each job in turn, every one tried; the errors, each naming its job, together at the end (one job's
/// error as it is, as before several could be given).
pub fn each_job(jobs: &[u64], act: impl Fn(u64) -> Result<(), String>) -> Result<(), String> {
    if let [job] = jobs {
        return act(*job);
    }
    let errors: Vec<String> =
        jobs.iter().filter_map(|&job| act(job).err().map(|e| format!("job {job}: {e}"))).collect();
    match errors.is_empty() {
        true => Ok(()),
        false => Err(errors.join("\n")),
    }
}

/// Send a request, print the reply's data (JSON, or the text `text` makes of it), fail on an error reply.
pub fn run_client<T: serde::Serialize + serde::de::DeserializeOwned>(
    client: &ClientArgs,
    request: Request,
    text: impl Fn(&T) -> String,
) -> Result<(), String> {
    let data: T = ask(client, &request)?;
    if client.json {
        println!("{}", serde_json::to_string_pretty(&data).unwrap_or_default());
    } else {
        println!("{}", text(&data));
    }
    Ok(())
}

/// Submit a job; with `--wait`, wait for its end. The status to exit with.
pub fn submit(client: &ClientArgs, args: &SubmitArgs) -> Result<u8, String> {
    let cwd = std::env::current_dir().map_err(|e| format!("current directory: {e}"))?;
    let request = SubmitRequest {
        tasks: args.tasks,
        nodes: args.nodes,
        class: args.class.clone(),
        mem_bytes: args.mem.unwrap_or(0),
        slice_opt_out: args.slice_opt_out,
        local: args.local,
        mpi: args.mpi,
        argv: args.command.clone(),
        cwd: cwd.to_string_lossy().into_owned(),
        env: std::env::vars().filter(|(k, _)| !k.starts_with("COSCHED_")).collect(),
        name: args.name.clone().unwrap_or_default(),
        time_limit_s: args.time.map(|t| t.0),
        output_files: cosched_runtime::wire::output_files::OutputFiles {
            output: args.output.clone(),
            error: args.error.clone(),
            append: args.open_mode == OpenMode::Append,
        },
        umask: Some(current_umask()),
    };
    let link = client_for(client)?;
    let reply = match link.submit(request.clone()) {
        // A controller older than the mask: the job runs with the agent's, as it did.
        Err(CallError::Refused(message))
            if message.contains("unknown field `umask`") && request.output_files.is_empty() =>
        {
            link.submit(SubmitRequest { umask: None, ..request })
        }
        Err(CallError::Refused(message)) if message.contains("unknown field") => Err(CallError::Refused(format!(
            "{message} (the controller is older than this client: -o, -e and --open-mode need a newer one)"
        ))),
        sent => sent,
    }
    .map_err(explain)?;
    if client.json {
        println!("{}", serde_json::to_string_pretty(&reply).unwrap_or_default());
    } else {
        println!("job {} {}", reply.job, reply.state.name());
    }
    if !args.wait {
        return Ok(0);
    }
    let ended = wait_for_end(client, reply.job)?;
    if !client.json {
        let why = crate::status_view::reason(&ended).map(|e| format!(": {e}")).unwrap_or_default();
        println!("job {} {}{why}", ended.id, ended.state.name());
    }
    Ok(match (ended.state, ended.exit_code) {
        (cosched_runtime::wire::jobs::JobState::Finished, _) => 0,
        (cosched_runtime::wire::jobs::JobState::Failed, Some(code)) => {
            u8::try_from(code).ok().filter(|&c| c != 0).unwrap_or(1)
        }
        _ => 1,
    })
}

/// Poll the job's record until it is over: every 250 ms at first, then less often, up to every 10 s (each poll asks
/// the history for this one job). The controller unreachable (restarted, say) is retried for up to
/// [`WAIT_LINK_RETRY`]; the job lives on meanwhile.
fn wait_for_end(client: &ClientArgs, job: u64) -> Result<cosched_runtime::wire::protocol::StatusJob, String> {
    use std::time::{Duration, Instant};
    let mut pause = Duration::from_millis(250);
    let mut unreachable_since: Option<Instant> = None;
    let this_job = HistoryRequest { jobs: vec![job], limit: Some(1), ..HistoryRequest::default() };
    loop {
        #[allow(clippy::disallowed_methods)] // how long the controller has been away: wall time, not simulated
        let now = Instant::now();
        match client_for(client)?.history(this_job.clone()).or_else(|e| status_if_history_unknown(client, job, e)) {
            Ok(history) => {
                unreachable_since = None;
                match history.jobs.into_iter().next() {
                    Some(record) if record.state.is_over() => return Ok(record),
                    Some(_) => {}
                    None => return Err(format!("job {job} is no longer in the history (--keep-history-days)")),
                }
            }
            Err(CallError::Link(e)) => {
                let since = *unreachable_since.get_or_insert_with(|| {
                    eprintln!("cosched submit --wait: {e}; trying again (the job goes on)");
                    now
                });
                if now.duration_since(since) > WAIT_LINK_RETRY {
                    return Err(format!("the controller has been unreachable for {WAIT_LINK_RETRY:?}: {e}"));
                }
            }
            Err(refused) => return Err(explain(refused)),
        }
        std::thread::sleep(pause);
        pause = (pause * 3 / 2).min(Duration::from_secs(10));
    }
}

/// A controller older than the history refuses `History` as an unknown request: its status has the job until
/// `--keep-finished-s` after its end.
fn status_if_history_unknown(
    client: &ClientArgs,
    job: u64,
    error: CallError,
) -> Result<cosched_runtime::wire::protocol::HistoryReply, CallError> {
    match &error {
        CallError::Refused(message) if message.contains("unknown variant `history`") => {
            let status = client_for(client).map_err(CallError::Link)?.status()?;
            let jobs = status.jobs.into_iter().filter(|j| j.id == job).collect();
            Ok(cosched_runtime::wire::protocol::HistoryReply { jobs, more: false, keep_history_s: 0 })
        }
        _ => Err(error),
    }
}

/// The shortest history: `submit --wait` polls at most every 10 s and must find its job's end.
const MIN_KEEP_HISTORY: Duration = Duration::from_secs(3600);

/// How long `submit --wait` goes on trying a controller it cannot reach.
const WAIT_LINK_RETRY: std::time::Duration = std::time::Duration::from_secs(600);

/// `status`: the reply filtered by `filter`, as JSON or as tables.
/// `status`: nodes and jobs; with `--format`, or `--noheader`, the jobs' lines alone (as squeue prints them).
pub fn status(
    client: &ClientArgs,
    filter: &StatusFilter,
    format: Option<&Format>,
    noheader: bool,
) -> Result<(), String> {
    let mut reply: StatusReply = ask(client, &Request::Status {})?;
    filter.apply(&mut reply)?;
    let now_unix_ms = cosched_runtime::wire::jobs::unix_ms_now();
    let default_format: Format = Format::STATUS.parse().expect("status's own columns");
    let columns = format.unwrap_or(&default_format);
    match (client.json, noheader, format.is_some()) {
        (true, _, _) => println!("{}", serde_json::to_string_pretty(&reply).unwrap_or_default()),
        (false, true, _) => print!("{}", crate::status_view::job_table(&reply.jobs, columns, now_unix_ms, false)),
        (false, false, true) => print!("{}", crate::status_view::job_table(&reply.jobs, columns, now_unix_ms, true)),
        (false, false, false) => println!("{}", status_table(&reply, columns, now_unix_ms)),
    }
    Ok(())
}

/// The jobs `kill` ends: the ids given alone, or, with a filter (`-u`, `-t`, `-n`, `-w`), the jobs not over that
/// match it, as scancel picks them.
pub fn jobs_to_kill(client: &ClientArgs, filter: &StatusFilter) -> Result<Vec<u64>, String> {
    if filter.picks_by_ids_alone() {
        return match filter.jobs.is_empty() {
            true => Err("name the jobs to kill, or pick them with -u USER, -t STATE, -n NAME or -w NODE".into()),
            false => Ok(filter.jobs.clone()),
        };
    }
    let mut reply: StatusReply = ask(client, &Request::Status {})?;
    filter.apply(&mut reply)?;
    let jobs: Vec<u64> = reply.jobs.iter().filter(|j| !j.state.is_over()).map(|j| j.id).collect();
    if jobs.is_empty() {
        eprintln!("no job to kill matches");
    }
    Ok(jobs)
}

pub fn monitor_url(client: &ClientArgs) -> Result<(), String> {
    let reply = client_for(client)?.monitor_token().map_err(explain)?;
    if reply.address.is_empty() {
        return Err("the controller serves no monitor (started with --monitor off)".into());
    }
    println!("http://{}/?token={}", reply.address, reply.token);
    Ok(())
}

/// `logs` as text: each file's tail under a header naming its rank, stream and node.
pub fn log_tails(logs: &LogsReply) -> String {
    let mut out = String::new();
    for file in &logs.files {
        match file {
            LogFile::Unavailable { node, error } => {
                out += &format!("==> node {node:?}: logs unavailable: {error} <==\n");
            }
            LogFile::Tail { node, tail } if !tail.text.is_empty() => {
                out += &format!("==> rank {} std{} ({node:?}) <==\n{}", tail.rank, tail.stream, tail.text);
                if !tail.text.ends_with('\n') {
                    out.push('\n');
                }
            }
            LogFile::Tail { .. } => {}
        }
    }
    out.trim_end().to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failed_rshs_message_is_cut_between_characters() {
        assert_eq!(cut_at_char_boundary("refused", 100), "refused");
        assert_eq!(cut_at_char_boundary("refused", 3), "ref");
        // "é" takes bytes 1 and 2: a cut at 2 falls inside it and keeps what comes before.
        assert_eq!(cut_at_char_boundary("dé", 2), "d");
        assert_eq!(cut_at_char_boundary("dé", 3), "dé");
        assert_eq!(cut_at_char_boundary("é", 1), "");
        let long = "ü".repeat(4_000);
        assert_eq!(cut_at_char_boundary(&long, MOST_OF_PIPE_BUF_BYTES).len(), MOST_OF_PIPE_BUF_BYTES);
    }

    #[test]
    fn time_limits_are_read_as_sbatch_reads_them() {
        let limit = |text: &str| text.parse::<TimeLimit>().map(|t| t.0);
        assert_eq!(limit("90"), Ok(90 * 60), "a lone number is minutes");
        assert_eq!(limit("1:30"), Ok(90));
        assert_eq!(limit("2:00:05"), Ok(2 * 3600 + 5));
        assert_eq!(limit("1-2"), Ok(26 * 3600), "days-hours");
        assert_eq!(limit("1-2:30"), Ok(26 * 3600 + 30 * 60));
        assert_eq!(limit("1-0:0:1"), Ok(86_401));
        for bad in ["", "0", "0:00", "1:2:3:4", "-5", "1-", "a:b", "1--2", "9999999999"] {
            assert!(limit(bad).unwrap_err().contains(&format!("'{bad}'")), "{bad}");
        }
    }
}
