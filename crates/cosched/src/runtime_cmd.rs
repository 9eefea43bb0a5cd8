//! The real coscheduler's commands: daemons (`up`, `controller`, `agent`)
//! and the client commands that talk to a controller over its socket.

use clap::Args;
use cosched_policy::cluster::PlanSettings;
use cosched_runtime::agent::{Address, AgentSettings};
use cosched_runtime::controller::ControllerSettings;
use cosched_runtime::daemon::ControllerListen;
use cosched_runtime::freezer::FreezerKind;
use cosched_runtime::protocol::{read_line, write_message, Reply, Request, SubmitRequest};
use std::io::BufReader;
use std::path::PathBuf;
use std::time::Duration;

const DEFAULT_SOCKET: &str = "/run/cosched/cosched.sock";

#[derive(Args, Clone, Debug)]
pub struct ControllerArgs {
    /// Directory of the database (cosched.db), status document and job logs.
    #[arg(long, default_value = "/var/lib/cosched")]
    pub state_dir: PathBuf,
    /// Unix socket for users and local agents.
    #[arg(long, env = "COSCHED_SOCKET", default_value = DEFAULT_SOCKET)]
    pub socket: PathBuf,
    /// Also listen on TCP (host:port) for agents and users of other hosts (needs --key-file).
    #[arg(long)]
    pub tcp: Option<String>,
    /// File holding the shared key that TCP peers must present.
    #[arg(long)]
    pub key_file: Option<PathBuf>,
    /// Serve the web monitor here ("off" to disable).
    #[arg(long, default_value = "127.0.0.1:8180")]
    pub monitor: String,
    /// Time slice in milliseconds (fractions allowed); slices start at multiples of it since the epoch.
    #[arg(long, default_value_t = 10.0)]
    pub slice_ms: f64,
    /// Rows of the Ousterhout matrix (gang multiprogramming level).
    #[arg(long, default_value_t = 4)]
    pub rows: u32,
    /// Processes per CPU admitted for local-class jobs.
    #[arg(long, default_value_t = 4)]
    pub local_mpl: u32,
    /// Share of each node's CPUs gang jobs may use (the rest stays for the system and local jobs).
    #[arg(long, default_value_t = 1.0)]
    pub gang_cpu_share: f64,
    /// Extra cells per task for auxiliary threads (0.25 = one more CPU per four tasks).
    #[arg(long, default_value_t = 0.0)]
    pub over_allocation: f64,
    /// Seconds without CPU use after which a gang job reverts to local scheduling.
    #[arg(long, default_value_t = 600.0)]
    pub idle_revert_s: f64,
    /// Seconds without CPU use after which a job leaves the gang database for good.
    #[arg(long, default_value_t = 7200.0)]
    pub idle_forget_s: f64,
    /// Users (uids) with administrator rights besides root.
    #[arg(long = "admin-uid")]
    pub admin_uids: Vec<u32>,
}

#[derive(Args, Clone, Debug)]
pub struct AgentArgs {
    /// This node's name (default: the host name).
    #[arg(long)]
    pub node: Option<String>,
    /// Freezer to use (default: detected; v2, v1 or signals).
    #[arg(long, value_parser = parse_freezer)]
    pub freezer: Option<FreezerKind>,
    /// CPUs offered (default: all).
    #[arg(long)]
    pub cpus: Option<u32>,
    /// Do not put the switching thread in the real-time class.
    #[arg(long)]
    pub no_realtime: bool,
}

#[derive(Args, Clone, Debug)]
pub struct RemoteAgentArgs {
    /// The controller: a Unix socket path or host:port.
    #[arg(long)]
    pub controller: String,
    /// Shared key file (needed over TCP).
    #[arg(long)]
    pub key_file: Option<PathBuf>,
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

fn read_key(path: &Option<PathBuf>) -> Result<Option<String>, String> {
    let Some(path) = path else { return Ok(None) };
    let key = std::fs::read_to_string(path).map_err(|e| format!("key file {}: {e}", path.display()))?;
    let key = key.trim().to_string();
    if key.len() < 16 {
        return Err(format!("key file {}: the key must have at least 16 characters", path.display()));
    }
    Ok(Some(key))
}

fn controller_settings(args: &ControllerArgs) -> Result<(ControllerSettings, ControllerListen), String> {
    if args.slice_ms.is_nan() || args.slice_ms < 0.1 {
        return Err(format!("--slice-ms {} is below the 0.1 ms minimum", args.slice_ms));
    }
    if args.rows == 0 || args.local_mpl == 0 {
        return Err("--rows and --local-mpl must be at least 1".into());
    }
    if !(args.gang_cpu_share > 0.0 && args.gang_cpu_share <= 1.0) {
        return Err("--gang-cpu-share must be in (0, 1]".into());
    }
    let token = read_key(&args.key_file)?;
    let settings = ControllerSettings {
        state_dir: args.state_dir.clone(),
        slice_ns: (args.slice_ms * 1e6).round() as u64,
        plan: PlanSettings {
            rows: args.rows,
            local_mpl: args.local_mpl,
            gang_cpu_share: args.gang_cpu_share,
            over_allocation: args.over_allocation.max(0.0),
        },
        idle_revert: Duration::from_secs_f64(args.idle_revert_s.max(0.0)),
        idle_forget: Duration::from_secs_f64(args.idle_forget_s.max(0.0)),
        admin_uids: args.admin_uids.clone(),
        token,
    };
    let listen = ControllerListen {
        socket: args.socket.clone(),
        tcp: args.tcp.clone(),
        monitor: (args.monitor != "off").then(|| args.monitor.clone()),
    };
    Ok((settings, listen))
}

fn agent_settings(
    args: &AgentArgs,
    controller: Address,
    token: Option<String>,
    state_dir: &std::path::Path,
) -> Result<AgentSettings, String> {
    let node = match &args.node {
        Some(n) => n.clone(),
        None => {
            std::fs::read_to_string("/proc/sys/kernel/hostname").map(|s| s.trim().to_string()).unwrap_or("node".into())
        }
    };
    cosched_runtime::controller::validate_node_name(&node)?;
    let all_cpus = std::thread::available_parallelism().map(|n| n.get() as u32).unwrap_or(1);
    Ok(AgentSettings {
        node,
        controller,
        token,
        log_dir: state_dir.join("logs"),
        freezer: args.freezer,
        cpus: args.cpus.unwrap_or(all_cpus).clamp(1, all_cpus),
        mem_bytes: mem_total_bytes(),
        realtime: !args.no_realtime,
        helper_program: std::env::current_exe().map_err(|e| format!("finding this program: {e}"))?,
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
    let (settings, listen) = controller_settings(controller)?;
    let agent = agent_settings(agent, Address::Unix(listen.socket.clone()), None, &settings.state_dir)?;
    cosched_runtime::daemon::run_up(settings, listen, agent).map_err(|e| e.to_string())
}

pub fn controller(args: &ControllerArgs) -> Result<(), String> {
    let (settings, listen) = controller_settings(args)?;
    cosched_runtime::daemon::start_controller(settings, &listen).map_err(|e| e.to_string())?;
    loop {
        std::thread::park();
    }
}

pub fn agent(args: &RemoteAgentArgs) -> Result<(), String> {
    let token = read_key(&args.key_file)?;
    let address = Address::parse(&args.controller);
    if matches!(address, Address::Tcp(_)) && token.is_none() {
        return Err("an agent reaching its controller over TCP needs --key-file".into());
    }
    let settings = agent_settings(&args.agent, address, token, &args.state_dir)?;
    cosched_runtime::daemon::run_agent(settings).map_err(|e| e.to_string())
}

// ---- client commands ----

#[derive(Args, Clone, Debug)]
pub struct ClientArgs {
    /// The controller's Unix socket.
    #[arg(long, env = "COSCHED_SOCKET", default_value = DEFAULT_SOCKET, global = true)]
    pub socket: PathBuf,
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
    /// The command and its arguments.
    #[arg(last = true, required = true)]
    pub command: Vec<String>,
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

pub fn call(client: &ClientArgs, request: &Request) -> Result<Reply, String> {
    let stream = std::os::unix::net::UnixStream::connect(&client.socket).map_err(|e| {
        format!(
            "cannot reach the controller at {}: {e} (is `cosched up` running? see --socket)",
            client.socket.display()
        )
    })?;
    let mut writer = stream.try_clone().map_err(|e| e.to_string())?;
    write_message(&mut writer, request).map_err(|e| e.to_string())?;
    let mut reader = BufReader::new(stream);
    let line = read_line(&mut reader).map_err(|e| e.to_string())?.ok_or("the controller closed the connection")?;
    serde_json::from_str(&line).map_err(|e| format!("bad reply from the controller: {e}"))
}

/// Send a request, print the reply (JSON or a line of text), fail on an error reply.
pub fn run_client(
    client: &ClientArgs,
    request: Request,
    text: impl Fn(&serde_json::Value) -> String,
) -> Result<(), String> {
    let reply = call(client, &request)?;
    if !reply.ok {
        return Err(reply.error.unwrap_or_else(|| "the controller refused".into()));
    }
    if client.json {
        println!("{}", serde_json::to_string_pretty(&reply.data).unwrap_or_default());
    } else {
        println!("{}", text(&reply.data));
    }
    Ok(())
}

pub fn submit(client: &ClientArgs, args: &SubmitArgs) -> Result<(), String> {
    let cwd = std::env::current_dir().map_err(|e| format!("current directory: {e}"))?;
    let request = Request::Submit(SubmitRequest {
        tasks: args.tasks,
        nodes: args.nodes,
        class: args.class.clone(),
        mem_bytes: args.mem.unwrap_or(0),
        slice_opt_out: args.slice_opt_out,
        local: args.local,
        argv: args.command.clone(),
        cwd: cwd.to_string_lossy().into_owned(),
        env: std::env::vars().filter(|(k, _)| !k.starts_with("COSCHED_")).collect(),
    });
    run_client(client, request, |d| format!("job {} {}", d["job"], d["state"].as_str().unwrap_or("")))
}

pub fn status_text(data: &serde_json::Value) -> String {
    let mut out = format!(
        "slice {} ms, {} slot(s) in the cycle\n",
        data["slice_ns"].as_u64().unwrap_or(0) as f64 / 1e6,
        data["matrix"].as_array().map_or(0, |m| m.len())
    );
    let skew = &data["slice_start_skew"];
    if skew["count"].as_u64().unwrap_or(0) > 0 {
        let us = |key: &str| skew[key].as_u64().unwrap_or(0) as f64 / 1e3;
        out += &format!(
            "switch start skew between nodes: p50 {:.0} µs, p99 {:.0} µs, max {:.0} µs over the last {} slices\n",
            us("p50_ns"),
            us("p99_ns"),
            us("max_ns"),
            skew["count"]
        );
    }
    out += "node        cpus  connected  freezer  load\n";
    for n in data["nodes"].as_array().into_iter().flatten() {
        out += &format!(
            "{:<10} {:>5}  {:<9}  {:<7}  {:.2}\n",
            n["name"].as_str().unwrap_or(""),
            n["cpus"],
            if n["connected"].as_bool() == Some(true) { "yes" } else { "no" },
            n["freezer"].as_str().unwrap_or(""),
            n["load_avg"].as_f64().unwrap_or(0.0)
        );
    }
    out += "job    uid  class        mode   state      tasks   cpu s  share  command\n";
    for j in data["jobs"].as_array().into_iter().flatten() {
        out += &format!(
            "{:<5} {:>5}  {:<11}  {:<5}  {:<9}  {:>5}  {:>6.1}  {:>4.0}%  {}\n",
            j["id"],
            j["uid"],
            j["class"].as_str().unwrap_or(""),
            j["mode"].as_str().unwrap_or(""),
            j["state"].as_str().unwrap_or(""),
            j["tasks"],
            j["cpu_ns"].as_u64().unwrap_or(0) as f64 / 1e9,
            j["slice_share"].as_f64().unwrap_or(0.0) * 100.0,
            j["command"].as_str().unwrap_or("")
        );
    }
    out.trim_end().to_string()
}

pub fn monitor_url(client: &ClientArgs) -> Result<(), String> {
    let reply = call(client, &Request::MonitorToken)?;
    if !reply.ok {
        return Err(reply.error.unwrap_or_default());
    }
    let address = reply.data["address"].as_str().unwrap_or("");
    if address.is_empty() {
        return Err("the controller serves no monitor (started with --monitor off)".into());
    }
    println!("http://{address}/?token={}", reply.data["token"].as_str().unwrap_or(""));
    Ok(())
}

pub fn logs_text(data: &serde_json::Value) -> String {
    let mut out = String::new();
    for f in data["files"].as_array().into_iter().flatten() {
        if let Some(error) = f["error"].as_str() {
            out += &format!("==> node {}: logs unavailable: {error} <==\n", f["node"]);
            continue;
        }
        let text = f["text"].as_str().unwrap_or("");
        if text.is_empty() {
            continue;
        }
        out +=
            &format!("==> rank {} std{} ({}) <==\n{}", f["rank"], f["stream"].as_str().unwrap_or(""), f["node"], text);
        if !text.ends_with('\n') {
            out.push('\n');
        }
    }
    out.trim_end().to_string()
}
