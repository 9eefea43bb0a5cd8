//! Man pages and shell completions, generated from the command line itself so
//! that they can never disagree with `--help`.

use clap::{Args, Command};
use clap_complete::Shell;
use std::path::PathBuf;

#[derive(Args, Clone, Debug)]
pub struct ManArgs {
    /// Folder for the pages: cosched.1 and one cosched-<command>.1 per command (e.g. /usr/local/share/man/man1).
    #[arg(long, default_value = "man")]
    pub out: PathBuf,
}

#[derive(Args, Clone, Debug)]
pub struct CompletionsArgs {
    /// bash, zsh, fish, elvish or powershell. Example: cosched completions bash > /etc/bash_completion.d/cosched
    pub shell: Shell,
}

/// Write a page for the command and each visible subcommand into `args.out`.
pub fn write_man_pages(command: Command, args: &ManArgs) -> Result<(), String> {
    std::fs::create_dir_all(&args.out).map_err(|e| format!("{}: {e}", args.out.display()))?;
    clap_mangen::generate_to(command, &args.out)
        .map_err(|e| format!("writing man pages to {}: {e}", args.out.display()))?;
    eprintln!("man pages written to {} (read one with: man -l {}/cosched.1)", args.out.display(), args.out.display());
    Ok(())
}

/// Print the completion script for `args.shell` on stdout.
pub fn print_completions(mut command: Command, args: &CompletionsArgs) -> Result<(), String> {
    let name = command.get_name().to_string();
    clap_complete::generate(args.shell, &mut command, name, &mut std::io::stdout());
    Ok(())
}
