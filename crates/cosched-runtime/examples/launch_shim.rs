//! Test stand-in for the `cosched __launch` subcommand: runs the launch shim on the spec from stdin.

use std::io::Write;
use std::process::ExitCode;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().collect();
    if args.len() != 2 || args[1] != cosched_runtime::agent::launch::LAUNCH_SUBCOMMAND {
        let _ = writeln!(std::io::stderr(), "usage: launch_shim __launch < spec.json");
        return ExitCode::from(2);
    }
    let error = cosched_runtime::agent::launch::run_shim_from_stdin();
    let _ = writeln!(std::io::stderr(), "cosched __launch: {error}");
    ExitCode::from(127)
}
