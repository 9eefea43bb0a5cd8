//! `cosched slurm`: what the SPANK plugin (`clients/slurm`) runs from Slurm's prolog, slurmstepd and epilog, and
//! the check of a site's Slurm configuration. See `docs/slurm.md`.

use crate::runtime_cmd::{self, ClientArgs};
use clap::{Args, Subcommand};
use cosched_runtime::wire::protocol::{
    JobStateReply, PidReply, Request, SlurmBeginRequest, SlurmEndRequest, SubmitReply,
};
use std::process::Command;

#[derive(Subcommand)]
pub enum SlurmCommand {
    /// (The plugin, in Slurm's prolog; root.) Tell the controller of a Slurm job's allocation.
    Begin {
        #[command(flatten)]
        client: ClientArgs,
        #[command(flatten)]
        job: BeginArgs,
    },
    /// (The plugin, in slurmstepd before the tasks run; root.) Move a job step's tasks on this node into the job.
    Attach {
        #[command(flatten)]
        client: ClientArgs,
        #[command(flatten)]
        at: SlurmJobOnNode,
        /// The tasks' pids.
        #[arg(required = true)]
        pids: Vec<i32>,
    },
    /// (The plugin, in Slurm's epilog; root.) The Slurm job is over: thaw and forget it everywhere.
    End {
        #[command(flatten)]
        client: ClientArgs,
        #[command(flatten)]
        at: SlurmJobOnNode,
        /// Slurm's `SLURM_JOB_EXIT_CODE2` (`exit:signal`).
        #[arg(long, value_parser = parse_exit_signal)]
        exit: Option<(i32, i32)>,
    },
    /// Check that Slurm and cosched are set up to work together (Slurm's gang scheduling off, the plugin
    /// configured, an agent on every Slurm node, no more jobs per CPU than cosched has rows). Needs scontrol and
    /// sinfo.
    Check {
        #[command(flatten)]
        client: ClientArgs,
    },
}

/// A Slurm job on one node (what `attach` and `end` act on).
#[derive(Args)]
pub struct SlurmJobOnNode {
    #[arg(long)]
    slurm_job: u32,
    /// The node, as Slurm and the cosched agent name it.
    #[arg(long)]
    node: String,
}

#[derive(Args)]
pub struct BeginArgs {
    #[arg(long)]
    slurm_job: u32,
    #[arg(long)]
    uid: u32,
    #[arg(long)]
    gid: u32,
    /// Slurm's hostlist of the job's nodes (`SLURM_NODELIST`).
    #[arg(long)]
    nodelist: String,
    /// `SLURM_JOB_CPUS_PER_NODE`, e.g. `2(x3),1`.
    #[arg(long)]
    cpus_per_node: String,
    /// This node (`SLURMD_NODENAME`).
    #[arg(long)]
    node: String,
}

pub fn run(command: &SlurmCommand) -> Result<(), String> {
    match command {
        SlurmCommand::Begin { client, job } => {
            let request = SlurmBeginRequest {
                slurm_job: job.slurm_job,
                uid: job.uid,
                gid: job.gid,
                nodelist: job.nodelist.clone(),
                cpus_per_node: job.cpus_per_node.clone(),
                node: job.node.clone(),
            };
            runtime_cmd::run_client(client, Request::SlurmBegin(request), |r: &SubmitReply| {
                format!("Slurm job {} is cosched job {}", job.slurm_job, r.job)
            })
        }
        SlurmCommand::Attach { client, at, pids } => attach(client, at.slurm_job, &at.node, pids),
        SlurmCommand::End { client, at: SlurmJobOnNode { slurm_job, node }, exit } => {
            let (slurm_state, recorded_exit) = slurm_job_end(*slurm_job);
            let exit = recorded_exit.or(*exit);
            let (exit_code, signal) = exit.map_or((None, None), |(code, signal)| (Some(code), Some(signal)));
            let request = SlurmEndRequest { slurm_job: *slurm_job, node: node.clone(), exit_code, signal, slurm_state };
            runtime_cmd::run_client(client, Request::SlurmEnd(request), |r: &JobStateReply| {
                format!("Slurm job {slurm_job}: cosched job {} {}", r.job, r.state.name())
            })
        }
        SlurmCommand::Check { client } => check(client),
    }
}

/// Slurm's state and exit code of the job, when squeue answers: in the epilog, a cancelled job's
/// `SLURM_JOB_EXIT_CODE2` is 0:0, while Slurm's record already holds the signal (0:15).
///
/// Only fields Slurm writes itself are read, each in a column of its own: `scontrol show job` prints the job's name
/// (the owner's words, spaces and all) before `JobState` and `ExitCode`, so a job named
/// `x JobState=COMPLETED ExitCode=0:0` chose how cosched recorded its end.
fn slurm_job_end(slurm_job: u32) -> (Option<String>, Option<(i32, i32)>) {
    let job = slurm_job.to_string();
    let args = ["--noheader", "--states=all", "--jobs", &job, "--Format", SQUEUE_END_FORMAT];
    slurm_tool("squeue", &args).map_or((None, None), |text| parse_squeue_end(&text))
}

/// squeue's `--Format` for `slurm_job_end`: the state and the wait status, which never hold a space.
const SQUEUE_END_FORMAT: &str = "State:24,exit_code:16";

/// squeue's one line for the job (`SQUEUE_END_FORMAT`): its state and `(exit, signal)`; nothing from anything else.
fn parse_squeue_end(text: &str) -> (Option<String>, Option<(i32, i32)>) {
    let lines: Vec<&str> = text.lines().filter(|line| !line.trim().is_empty()).collect();
    let [line] = lines[..] else { return (None, None) };
    let [state, status] = line.split_whitespace().collect::<Vec<_>>()[..] else { return (None, None) };
    let state =
        (state.len() <= 32 && state.bytes().all(|b| b.is_ascii_uppercase() || b == b'_')).then(|| state.to_string());
    // A wait status (`wait(2)`), as Slurm keeps it: the exit code in the second byte, a signal in the low bits.
    let exit =
        status.parse::<u32>().ok().filter(|&s| s <= 0xffff).map(|s| (((s >> 8) & 0xff) as i32, (s & 0x7f) as i32));
    (state, exit)
}

/// All the step's tasks on one connection: slurmstepd holds them until this returns.
fn attach(client: &ClientArgs, slurm_job: u32, node: &str, pids: &[i32]) -> Result<(), String> {
    let mut connection = runtime_cmd::client_for(client)?.connect()?;
    for &pid in pids {
        let request = Request::SlurmAttach { slurm_job, pid, node: node.to_string() };
        let reply: PidReply =
            ask_while_becoming_the_owner(&mut connection, &request).map_err(|e| format!("pid {pid}: {e}"))?;
        println!("Slurm job {slurm_job}: pid {pid} in cosched job {} on {}", reply.job, reply.node);
    }
    Ok(())
}

/// How long a task may take to become its owner's.
const OWNER_CHANGE_WAIT: std::time::Duration = std::time::Duration::from_secs(3);

/// Ask, and ask again while the agent refuses the task for not being its owner's yet: slurmstepd's child drops
/// root in steps (real uid still root, effective uid the owner's) while the plugin runs, and the agent takes only
/// a process whose uids are all the owner's (found on a busy machine: one task of a step refused, its job left
/// unfrozen). Any other refusal, or the same one after `OWNER_CHANGE_WAIT`, stands.
fn ask_while_becoming_the_owner(
    connection: &mut cosched_runtime::wire::client::Connection,
    request: &Request,
) -> Result<PidReply, String> {
    #[allow(clippy::disallowed_methods)] // how long the task takes, in wall time
    let started = std::time::Instant::now();
    loop {
        match connection.ask::<PidReply>(request) {
            Err(e) if e.to_string().contains("does not belong to uid") && started.elapsed() < OWNER_CHANGE_WAIT => {
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
            other => return other.map_err(|e| e.to_string()),
        }
    }
}

fn parse_exit_signal(text: &str) -> Result<(i32, i32), String> {
    let bad = || format!("{text:?} is not exit:signal (as in SLURM_JOB_EXIT_CODE2, e.g. 0:0 or 0:9)");
    let (code, signal) = text.split_once(':').ok_or_else(bad)?;
    Ok((code.trim().parse().map_err(|_| bad())?, signal.trim().parse().map_err(|_| bad())?))
}

/// What a site's set-up gets wrong, as errors (cosched cannot work) and warnings.
#[derive(Default)]
struct Findings {
    errors: Vec<String>,
    warnings: Vec<String>,
}

fn check(client: &ClientArgs) -> Result<(), String> {
    let config = slurm_tool("scontrol", &["show", "config"])?;
    let mut findings = Findings::default();
    check_config(&config, &mut findings);
    match runtime_cmd::client_for(client)?.status() {
        Ok(status) => {
            let slurm_nodes = slurm_tool("sinfo", &["-h", "-N", "-o", "%N"])?;
            let agents: Vec<&str> = status.nodes.iter().map(|n| n.name.as_str()).collect();
            check_nodes(&slurm_nodes, &agents, &mut findings);
            check_oversubscribe(&slurm_tool("scontrol", &["show", "partition"])?, status.rows, &mut findings);
        }
        Err(e) => findings.errors.push(format!("the cosched controller does not answer: {e}")),
    }
    for warning in &findings.warnings {
        println!("warning: {warning}");
    }
    for error in &findings.errors {
        println!("error: {error}");
    }
    if !findings.errors.is_empty() {
        return Err(format!("{} errors: Slurm jobs would not be gang scheduled by cosched", findings.errors.len()));
    }
    println!("Slurm and cosched: {} warnings, no errors", findings.warnings.len());
    Ok(())
}

/// What a Slurm command prints (scontrol, sinfo: from the `SLURM_CONF` in the environment).
fn slurm_tool(program: &str, args: &[&str]) -> Result<String, String> {
    let output = Command::new(program).args(args).output().map_err(|e| format!("{program}: {e}"))?;
    if !output.status.success() {
        let stderr = String::from_utf8_lossy(&output.stderr);
        return Err(format!("{program} {}: {}", args.join(" "), stderr.trim()));
    }
    Ok(String::from_utf8_lossy(&output.stdout).into_owned())
}

/// The value of `key` in `scontrol show config` (lines `Key = value`).
fn config_value<'a>(config: &'a str, key: &str) -> Option<&'a str> {
    config.lines().find_map(|line| {
        let (k, v) = line.split_once('=')?;
        (k.trim() == key).then(|| v.trim())
    })
}

fn check_config(config: &str, findings: &mut Findings) {
    let preempt = config_value(config, "PreemptMode").unwrap_or("OFF");
    if preempt.to_ascii_uppercase().contains("GANG") {
        findings.errors.push(format!(
            "Slurm's own gang scheduling is on (PreemptMode = {preempt}): it would suspend jobs by signals every \
             SchedulerTimeSlice while cosched slices them; set PreemptMode=OFF"
        ));
    }
    let plugstack = config_value(config, "PlugStackConfig").unwrap_or("/etc/slurm/plugstack.conf");
    match std::fs::read_to_string(plugstack) {
        Ok(text) if text.lines().any(|l| !l.trim_start().starts_with('#') && l.contains("cosched_spank.so")) => {}
        Ok(_) => findings.errors.push(format!("{plugstack} does not load cosched_spank.so")),
        Err(e) => findings.warnings.push(format!("cannot read {plugstack} ({e}); is cosched_spank.so in it?")),
    }
    let proctrack = config_value(config, "ProctrackType").unwrap_or("");
    if proctrack.contains("cgroup") && unified_cgroups_only() {
        findings.warnings.push(format!(
            "ProctrackType = {proctrack} on a cgroup v2 host: cosched moves each task into its own cgroup, out of \
             Slurm's (limits and tracking there no longer hold); see docs/slurm.md"
        ));
    }
}

/// True when the host has cgroup v2 alone (no v1 hierarchies beside it).
fn unified_cgroups_only() -> bool {
    std::fs::read_to_string("/proc/self/mounts")
        .map(|m| m.lines().any(|l| l.split_whitespace().nth(1) == Some("/sys/fs/cgroup") && l.contains(" cgroup2 ")))
        .unwrap_or(false)
}

fn check_nodes(slurm_nodes: &str, agents: &[&str], findings: &mut Findings) {
    let missing: Vec<&str> = slurm_nodes.split_whitespace().filter(|n| !agents.contains(n)).collect();
    if !missing.is_empty() {
        findings.errors.push(format!(
            "Slurm nodes without a cosched agent (agents must be named as Slurm names the nodes): {}",
            missing.join(", ")
        ));
    }
}

/// A partition may put more jobs on a CPU than cosched has matrix rows: the extra ones would not be coscheduled.
fn check_oversubscribe(partitions: &str, rows: u32, findings: &mut Findings) {
    for word in partitions.split_whitespace() {
        let Some(value) = word.strip_prefix("OverSubscribe=") else { continue };
        match value.split_once(':').map(|(_, n)| n.parse::<u32>()) {
            Some(Ok(jobs)) if jobs > rows => findings.warnings.push(format!(
                "OverSubscribe={value} lets {jobs} jobs share a CPU but cosched has {rows} rows: a job beyond \
                 them runs without gang scheduling"
            )),
            _ if value == "NO" || value == "EXCLUSIVE" => {
                findings.warnings.push(format!("OverSubscribe={value}: jobs never share nodes there"))
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slurms_gang_scheduling_left_on_is_an_error() {
        let mut findings = Findings::default();
        check_config("PreemptMode             = GANG,SUSPEND\nPlugStackConfig = /nonexistent\n", &mut findings);
        assert!(findings.errors[0].contains("PreemptMode = GANG,SUSPEND"), "{:?}", findings.errors);
        let mut findings = Findings::default();
        check_config("PreemptMode = OFF\nPlugStackConfig = /nonexistent\n", &mut findings);
        assert!(findings.errors.is_empty() && findings.warnings[0].contains("/nonexistent"));
    }

    #[test]
    fn nodes_without_agents_and_too_many_jobs_per_cpu_are_named() {
        let mut findings = Findings::default();
        check_nodes("n1\nn2\nn3\n", &["n1", "n3"], &mut findings);
        assert!(findings.errors[0].ends_with(": n2"), "{:?}", findings.errors);
        check_oversubscribe("PartitionName=gang OverSubscribe=FORCE:8 State=UP", 4, &mut findings);
        assert!(findings.warnings[0].contains("8 jobs share a CPU but cosched has 4 rows"));
    }

    #[test]
    fn the_end_is_read_from_squeues_own_columns_and_nothing_else() {
        assert_eq!(parse_squeue_end("FAILED                  768\n"), (Some("FAILED".into()), Some((3, 0))));
        assert_eq!(parse_squeue_end("COMPLETING 15\n"), (Some("COMPLETING".into()), Some((0, 15))));
        // Anything but one line of exactly the two columns is nobody's word.
        for bad in ["", "FAILED\n", "FAILED 768 x\n", "FAILED 768\nCOMPLETED 0\n", "x JobState=COMPLETED 0\n"] {
            assert_eq!(parse_squeue_end(bad), (None, None), "{bad:?} was read");
        }
        assert_eq!(parse_squeue_end("Failed 4294967294\n"), (None, None));
    }

    #[test]
    fn the_exit_is_read_as_slurm_writes_it() {
        assert_eq!(parse_exit_signal("0:9"), Ok((0, 9)));
        assert!(parse_exit_signal("9").is_err());
    }
}
