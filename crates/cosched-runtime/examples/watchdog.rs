//! Test stand-in for the agent's watchdog wiring.
//!
//! `watchdog __watchdog <agent>` is the watchdog itself (as `cosched __watchdog` will be); `watchdog agent <agent>`
//! plays an agent: it starts the watchdog, prints `ready <watchdog pid>` and sleeps until it is killed.

use std::io::Write;
use std::process::ExitCode;
use std::time::Duration;

use cosched_runtime::agent::freezer::CgroupParent;
use cosched_runtime::agent::watchdog::{run_watchdog, start_watchdog, WATCHDOG_SUBCOMMAND};

fn play_agent(agent_name: &str) -> std::io::Result<()> {
    let watchdog = start_watchdog(&std::env::current_exe()?, agent_name, &CgroupParent::top())?;
    let mut out = std::io::stdout();
    writeln!(out, "ready {}", watchdog.pid())?;
    out.flush()?;
    loop {
        std::thread::sleep(Duration::from_secs(3600));
    }
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().collect();
    let result = match (args.get(1).map(String::as_str), args.get(2)) {
        (Some(WATCHDOG_SUBCOMMAND), Some(name)) if args.len() == 3 => run_watchdog(name, &CgroupParent::top()),
        (Some("agent"), Some(name)) if args.len() == 3 => play_agent(name),
        _ => {
            let _ = writeln!(std::io::stderr(), "usage: watchdog (__watchdog|agent) <agent name>");
            return ExitCode::from(2);
        }
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            let _ = writeln!(std::io::stderr(), "watchdog example: {e}");
            ExitCode::FAILURE
        }
    }
}
