//! The `cosched` command. Glue only: parse and validate arguments into
//! settings, call the library crates, present the results.

use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};
use cosched::{
    bench, calibrate_cmd, history_cmd, manual, model_cmd, pipeline_cmd, predict_cmd, runtime_cmd, sim_cmd, simtest_cmd,
    slurm_cmd, status_view, study, workload_cmd,
};
use cosched_runtime::wire::protocol::{
    ClassReply, JobStateReply, KillReply, KillState, PidReply, RegisterRequest, Request, SignalReply, SubmitReply,
};
use std::process::ExitCode;

#[derive(Parser)]
#[command(
    name = "cosched",
    version,
    about = "Time-sharing of parallel jobs on clusters: simulate, measure and run gang, local and dynamic coscheduling",
    long_about = None
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Simulate time-sharing schemes on a workload (default: WL7 on 32 nodes, Local vs GS).
    Sim(Box<sim_cmd::SimArgs>),
    /// Reproduce the reference study's experiments E1-E5 (tables, figures, manifest).
    ///
    /// Each experiment runs whole here, or in shards run anywhere and merged into the same files:
    ///   cosched study e1 --shard 1/3 --out shards/1   (2/3 and 3/3 likewise, e.g. a Slurm job array)
    ///   cosched study merge shards/1 shards/2 shards/3 --out study-e1
    #[command(subcommand, verbatim_doc_comment)]
    Study(study::StudyCommand),
    /// Generate, inspect and convert workloads (SWF traces, the Lublin-Feitelson model).
    #[command(subcommand)]
    Workload(workload_cmd::WorkloadCommand),
    /// Benchmarks of cosched itself.
    #[command(subcommand)]
    Bench(bench::BenchCommand),
    /// The optimistic model of j jobs sharing CPUs: predicted slowdowns, and the error against measured ones
    /// split into its causes (the job's CPU cost, A2 cache pollution, A1 no ready process).
    ///
    /// t_j = max(t_1, j·(p/c)·t_1(α_c + α_CPU, β_CPU)), with t_1(α, β) = compute + messages·α + doubles·β per rank.
    /// Example: cosched model --micro ctx.json --micro pingpong.json --measured slowdown-results
    Model(model_cmd::ModelArgs),
    /// Measure this machine for the simulator: context switch and wake-up, messages over shared memory and TCP,
    /// the gang switch and its skew (needs root). Writes machine.json for `sim --machine` and `predict`.
    Calibrate(calibrate_cmd::CalibrateArgs),
    /// The simulator's prediction beside measured slowdowns: each `bench slowdown` result of a reference program
    /// run again in the simulator on a calibrated machine (local on the EEVDF model, gang at its slice), with the
    /// analytic model as a third column.
    ///
    /// Example: cosched predict --machine machine --measured docs/reproduction-real/mm-p2-spin
    Predict(predict_cmd::PredictArgs),
    /// Pipelines with stage priorities: out-of-core columnsort, the priority study, the overhead benchmark.
    #[command(subcommand)]
    Pipeline(pipeline_cmd::PipelineCommand),
    /// Start the coscheduler on this machine: controller and local agent in one process.
    Up {
        #[command(flatten)]
        controller: runtime_cmd::ControllerArgs,
        #[command(flatten)]
        agent: runtime_cmd::AgentArgs,
    },
    /// Start a controller alone (agents connect to it).
    Controller(runtime_cmd::ControllerArgs),
    /// Start a node agent that connects to a controller.
    Agent(runtime_cmd::RemoteAgentArgs),
    /// Submit a job: cosched submit -n 4 -- ./program args.
    Submit {
        #[command(flatten)]
        client: runtime_cmd::ClientArgs,
        #[command(flatten)]
        args: runtime_cmd::SubmitArgs,
    },
    /// Nodes, and jobs as squeue lists them: cosched status -u alice -t running,queued -w node1.
    Status {
        #[command(flatten)]
        client: runtime_cmd::ClientArgs,
        #[command(flatten)]
        filter: status_view::StatusFilter,
        /// Print the jobs' lines alone: no node table and no header (as squeue --noheader); to read fields in a
        /// script, use --json (commands and reasons hold spaces).
        #[arg(long)]
        noheader: bool,
        /// The jobs' columns alone (no node table), as squeue -o prints them.
        #[arg(short = 'o', long, long_help = status_view::Format::help())]
        format: Option<status_view::Format>,
    },
    /// Jobs as sacct lists them, ended ones included: cosched history -S now-7days -u alice -s failed.
    History {
        #[command(flatten)]
        client: runtime_cmd::ClientArgs,
        #[command(flatten)]
        args: history_cmd::HistoryArgs,
    },
    /// Stop a job on all its nodes until resumed.
    Suspend {
        job: u64,
        #[command(flatten)]
        client: runtime_cmd::ClientArgs,
    },
    /// Let a suspended job run again.
    Resume {
        job: u64,
        #[command(flatten)]
        client: runtime_cmd::ClientArgs,
    },
    /// End jobs, by id or as scancel picks them (-u, -t, -n, -w): SIGTERM to all their processes, SIGKILL after the
    /// controller's --kill-wait-s. Each is killed (or signalled) in turn; one refused does not stop the others.
    Kill {
        #[command(flatten)]
        filter: status_view::StatusFilter,
        /// Only send this signal (e.g. USR1, HUP, INT) to every process of the job.
        #[arg(long, short = 's')]
        signal: Option<String>,
        #[command(flatten)]
        client: runtime_cmd::ClientArgs,
    },
    /// Change a job's class (users may only lower it).
    Class {
        job: u64,
        class: String,
        #[command(flatten)]
        client: runtime_cmd::ClientArgs,
    },
    /// The output of a job's tasks.
    Logs {
        job: u64,
        #[command(flatten)]
        client: runtime_cmd::ClientArgs,
    },
    /// Print the web monitor's URL, with a token that acts as you.
    Monitor {
        #[command(flatten)]
        client: runtime_cmd::ClientArgs,
    },
    /// Register already-running processes as a job (add them with add-pid).
    Register {
        /// CPUs the job uses on its node.
        #[arg(long, default_value_t = 1)]
        cpus: u32,
        #[arg(long, default_value = "batch")]
        class: String,
        #[arg(long, value_parser = runtime_cmd::parse_size)]
        mem: Option<u64>,
        #[arg(long)]
        node: Option<String>,
        #[command(flatten)]
        client: runtime_cmd::ClientArgs,
    },
    /// Add a running process to a registered job.
    AddPid {
        job: u64,
        pid: i32,
        #[command(flatten)]
        client: runtime_cmd::ClientArgs,
    },
    /// Take a process out of a job.
    RemovePid {
        job: u64,
        pid: i32,
        #[command(flatten)]
        client: runtime_cmd::ClientArgs,
    },
    /// The remote shell of an MPI job's launcher (cosched sets it): run a command in the job on one of its nodes.
    Rsh {
        #[command(flatten)]
        client: runtime_cmd::ClientArgs,
        #[command(flatten)]
        args: runtime_cmd::RshArgs,
    },
    /// Slurm jobs gang scheduled by cosched: what the SPANK plugin runs, and a check of the set-up.
    #[command(subcommand)]
    Slurm(slurm_cmd::SlurmCommand),
    /// Test the controller's decisions under simulated agents, users, network and faults: from each seed, the real
    /// controller core with N agents, users submitting, killing and suspending, links that drop, partitions,
    /// crashes of the controller and of agents, failing writes and clock steps, its invariants checked after every
    /// step. A failure prints its seed and the inputs before it; --seed replays it exactly.
    ///
    /// Example: cosched simtest --seeds 1000 --agents 64
    Simtest(simtest_cmd::SimtestArgs),
    /// Write man pages for cosched and each of its commands: cosched man --out /usr/local/share/man/man1
    Man(manual::ManArgs),
    /// Print a shell completion script: cosched completions bash > /etc/bash_completion.d/cosched
    Completions(manual::CompletionsArgs),
    #[command(name = "__launch", hide = true)]
    Launch,
    #[command(name = "__supervise", hide = true)]
    Supervise,
    #[command(name = "__pump", hide = true)]
    Pump { bounds: Vec<String> },
    #[command(name = "__watchdog", hide = true)]
    Watchdog {
        agent: String,
        /// The cgroup below the mount point that holds the agent's job cgroups (absent: the hierarchy's top).
        #[arg(long)]
        cgroup_parent: Option<String>,
    },
    #[command(name = "__spin", hide = true)]
    Spin { file: std::path::PathBuf },
    #[command(name = "__bench-agent", hide = true)]
    BenchAgent { spec: String },
    #[command(name = "__node-proc", hide = true)]
    NodeProc { spec: String },
}

/// The one line that answers a suspend or resume.
fn job_state_line(r: &JobStateReply) -> String {
    format!("job {}, state {}", r.job, r.state.name())
}

fn pid_line(r: &PidReply) -> String {
    format!("job {}, pid {}, node {}", r.job, r.pid, r.node)
}

/// What a shell shows for a program killed by SIGPIPE (128 + 13).
const READER_GONE_STATUS: i32 = 141;

/// A reader that goes away (`cosched status | head`) ends the command quietly, with the status of a program killed
/// by SIGPIPE, as `ls` or `cat` end. Rust ignores SIGPIPE, so a print to a closed pipe panics instead (`println!`,
/// and libraries that write to stdout and panic on errors, as clap's completions); this catches that panic, and only
/// it: a write failed with a broken pipe and stdout's reader is gone.
fn end_quietly_when_stdout_is_closed() {
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let payload = info.payload();
        let message = payload
            .downcast_ref::<String>()
            .map(String::as_str)
            .or_else(|| payload.downcast_ref::<&str>().copied())
            .unwrap_or("");
        let broken_pipe = message.contains("Broken pipe") || message.contains("BrokenPipe");
        if broken_pipe && stdout_reader_gone() {
            std::process::exit(READER_GONE_STATUS);
        }
        default(info);
    }));
}

/// Is stdout a pipe or socket whose other end is closed?
fn stdout_reader_gone() -> bool {
    use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
    use std::os::fd::AsFd;
    let stdout = std::io::stdout();
    let mut fds = [PollFd::new(stdout.as_fd(), PollFlags::empty())];
    let closed = PollFlags::POLLERR | PollFlags::POLLHUP;
    poll(&mut fds, PollTimeout::ZERO).is_ok() && fds[0].revents().is_some_and(|r| r.intersects(closed))
}

/// The command line, where a value may be a negative number (`--load -0.5` is then refused by the option's own
/// check, naming the load, instead of read as an unknown flag `-0`).
fn command_line() -> clap::Command {
    fn allowing_negative_numbers(command: clap::Command) -> clap::Command {
        command.allow_negative_numbers(true).mut_subcommands(allowing_negative_numbers)
    }
    allowing_negative_numbers(Cli::command())
}

fn main() -> ExitCode {
    end_quietly_when_stdout_is_closed();
    let argv = match cosched::config_file::with_file_settings(std::env::args_os().collect(), &Cli::command()) {
        Ok(argv) => argv,
        Err(message) => {
            eprintln!("error: {message}");
            return ExitCode::from(1);
        }
    };
    let matches = command_line().get_matches_from(argv);
    let cli = Cli::from_arg_matches(&matches).unwrap_or_else(|e| e.exit());
    let outcome = match cli.command {
        Command::Sim(args) => sim_cmd::run(&args),
        Command::Study(cmd) => study::run(&cmd),
        Command::Model(args) => model_cmd::run(&args),
        Command::Calibrate(args) => calibrate_cmd::run(&args),
        Command::Predict(args) => predict_cmd::run(&args),
        Command::Workload(cmd) => workload_cmd::run(&cmd),
        Command::Bench(cmd) => bench::run(&cmd),
        Command::Pipeline(cmd) => pipeline_cmd::run(&cmd),
        Command::Up { controller, agent } => runtime_cmd::up(&controller, &agent),
        Command::Controller(args) => runtime_cmd::controller(&args),
        Command::Agent(args) => runtime_cmd::agent(&args),
        Command::Submit { client, args } => {
            return match runtime_cmd::submit(&client, &args) {
                Ok(status) => ExitCode::from(status),
                Err(message) => {
                    eprintln!("error: {message}");
                    ExitCode::from(1)
                }
            };
        }
        Command::Status { client, filter, noheader, format } => {
            runtime_cmd::status(&client, &filter, format.as_ref(), noheader)
        }
        Command::History { client, args } => history_cmd::history(&client, &args),
        Command::Suspend { job, client } => runtime_cmd::run_client(&client, Request::Suspend { job }, job_state_line),
        Command::Resume { job, client } => runtime_cmd::run_client(&client, Request::Resume { job }, job_state_line),
        Command::Kill { filter, signal: None, client } => {
            runtime_cmd::jobs_to_kill(&client, &filter).and_then(|jobs| {
                runtime_cmd::each_job(&jobs, |job| {
                    runtime_cmd::run_client(&client, Request::Kill { job }, |r: &KillReply| {
                        let state = match r.state {
                            KillState::Killed => "killed",
                            KillState::Killing => "killing",
                        };
                        format!("job {}, state {state}", r.job)
                    })
                })
            })
        }
        Command::Kill { filter, signal: Some(signal), client } => {
            cosched_runtime::wire::protocol::checks::parse_signal(&signal).and_then(|_| {
                let jobs = runtime_cmd::jobs_to_kill(&client, &filter)?;
                runtime_cmd::each_job(&jobs, |job| {
                    runtime_cmd::run_client(
                        &client,
                        Request::Signal { job, signal: signal.clone() },
                        |r: &SignalReply| format!("job {}, signal {}", r.job, r.signal),
                    )
                })
            })
        }
        Command::Class { job, class, client } => {
            runtime_cmd::run_client(&client, Request::SetClass { job, class }, |r: &ClassReply| {
                format!("job {}, class {}", r.job, r.class.name())
            })
        }
        Command::Logs { job, client } => {
            runtime_cmd::run_client(&client, Request::Logs { job }, runtime_cmd::log_tails)
        }
        Command::Monitor { client } => runtime_cmd::monitor_url(&client),
        Command::Register { cpus, class, mem, node, client } => {
            let request = Request::Register(RegisterRequest {
                class,
                cpus_per_node: cpus,
                min_cpus: 0,
                mem_bytes: mem.unwrap_or(0),
                node,
                local: false,
            });
            runtime_cmd::run_client(&client, request, |r: &SubmitReply| format!("job {}", r.job))
        }
        Command::AddPid { job, pid, client } => {
            runtime_cmd::run_client(&client, Request::AddPid { job, pid, node: None }, pid_line)
        }
        Command::RemovePid { job, pid, client } => {
            runtime_cmd::run_client(&client, Request::RemovePid { job, pid, node: None }, pid_line)
        }
        Command::Rsh { client, args } => {
            return match runtime_cmd::rsh(&client, &args) {
                Ok(code) => ExitCode::from(u8::try_from(code).unwrap_or(255)),
                Err(message) => {
                    // As ssh, 255 for a failure of the remote shell itself.
                    match runtime_cmd::launcher_to_end_after_failed_rsh() {
                        Some(launcher) => runtime_cmd::end_launcher_after_failed_rsh(launcher, &message),
                        None => eprintln!("cosched rsh: {message}"),
                    }
                    ExitCode::from(255)
                }
            };
        }
        Command::Slurm(command) => slurm_cmd::run(&command),
        Command::Simtest(args) => simtest_cmd::run_command(&args),
        Command::Man(args) => manual::write_man_pages(Cli::command(), &args),
        Command::Completions(args) => manual::print_completions(Cli::command(), &args),
        Command::Launch => {
            let error = cosched_runtime::agent::launch::run_shim_from_stdin();
            eprintln!("cosched: {error}");
            return ExitCode::from(127);
        }
        Command::Supervise => {
            let code = cosched_runtime::agent::supervisor::run_supervisor_from_stdin();
            return ExitCode::from(u8::try_from(code).unwrap_or(127));
        }
        Command::Pump { bounds } => {
            return ExitCode::from(cosched_runtime::agent::log_pump::run_pump(&bounds) as u8);
        }
        Command::Watchdog { agent, cgroup_parent } => {
            use cosched_runtime::agent::freezer::CgroupParent;
            let parent = cgroup_parent.as_deref().map_or(Ok(CgroupParent::top()), CgroupParent::below_mount);
            parent.and_then(|p| cosched_runtime::agent::watchdog::run_watchdog(&agent, &p)).map_err(|e| e.to_string())
        }
        Command::Spin { file } => cosched_bench::switch::spin(&file),
        Command::BenchAgent { spec } => cosched_bench::switch::agent_main(&spec),
        Command::NodeProc { spec } => cosched_bench::node::process::process_main(&spec),
    };
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("error: {message}");
            cosched::interrupt::end_by_caught_signal();
            ExitCode::from(cosched::interrupt::interrupted_status().unwrap_or(1))
        }
    }
}
