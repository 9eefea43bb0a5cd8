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

/// Write a page for the command and each visible subcommand into `args.out`, with the sections `--help` has no
/// place for (examples, files, environment, exit status, see also) added to the pages they concern.
pub fn write_man_pages(command: Command, args: &ManArgs) -> Result<(), String> {
    std::fs::create_dir_all(&args.out).map_err(|e| format!("{}: {e}", args.out.display()))?;
    clap_mangen::generate_to(command, &args.out)
        .map_err(|e| format!("writing man pages to {}: {e}", args.out.display()))?;
    for (page, sections) in EXTRA_SECTIONS {
        let path = args.out.join(format!("{page}.1"));
        let mut text = std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
        for (title, body) in *sections {
            text += &roff_section(title, body);
        }
        std::fs::write(&path, text).map_err(|e| format!("{}: {e}", path.display()))?;
    }
    add_common_exit_status(&args.out)?;
    eprintln!("man pages written to {} (read one with: man -l {}/cosched.1)", args.out.display(), args.out.display());
    Ok(())
}

/// Every page that says nothing of its exit status gets the one every command shares.
fn add_common_exit_status(dir: &std::path::Path) -> Result<(), String> {
    let pages = std::fs::read_dir(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    for page in pages.flatten().map(|e| e.path()).filter(|p| p.extension().is_some_and(|x| x == "1")) {
        let mut text = std::fs::read_to_string(&page).map_err(|e| format!("{}: {e}", page.display()))?;
        if !text.contains(".SH EXIT STATUS") {
            text += &roff_section("EXIT STATUS", COMMON_EXIT_STATUS);
            std::fs::write(&page, text).map_err(|e| format!("{}: {e}", page.display()))?;
        }
    }
    Ok(())
}

const COMMON_EXIT_STATUS: &str = "0 when the command did what was asked; 1 when it failed, with the reason on \
    standard error; 2 for a usage error (an unknown flag, a value out of range). Interrupted by SIGINT or SIGTERM, \
    it cleans up and ends by that signal (130 or 143 in a shell).";

/// A section: paragraphs separated by blank lines; a paragraph whose lines all begin with `$ ` is an example, shown
/// as typed (without the `$ `).
fn roff_section(title: &str, body: &str) -> String {
    let mut out = format!(".SH {title}\n");
    for paragraph in body.split("\n\n") {
        let lines: Vec<&str> = paragraph.lines().collect();
        if lines.iter().all(|l| l.starts_with("$ ")) {
            out += ".PP\n.nf\n.RS 4\n";
            for line in lines {
                out += &roff_text(&line[2..]);
                out += "\n";
            }
            out += ".RE\n.fi\n";
        } else {
            out += ".PP\n";
            out += &roff_text(&lines.join(" "));
            out += "\n";
        }
    }
    out
}

/// Text as roff prints it literally: backslashes escaped, hyphens as minus signs (so `--flag` can be searched and
/// copied), and a leading dot or quote kept from reading as a request.
fn roff_text(text: &str) -> String {
    let escaped = text.replace('\\', "\\e").replace('-', "\\-");
    match escaped.starts_with(['.', '\'']) {
        true => format!("\\&{escaped}"),
        false => escaped,
    }
}

const SEE_ALSO_RUNTIME: &str = "cosched(1), cosched-submit(1), cosched-status(1), \
    cosched-history(1), cosched-up(1), squeue(1), sacct(1), systemd.service(5). The user guide: \
    docs/runtime.md; the threat model: docs/security.md.";

/// The sections added to each page (by the page's name), as `roff_section` reads them.
const EXTRA_SECTIONS: &[(&str, &[(&str, &str)])] = &[
    (
        "cosched",
        &[
            (
                "EXIT STATUS",
                "0 when the command did what was asked; 1 when it failed (the reason is on standard error); 2 for \
                 a usage error. cosched submit --wait exits with its job's status instead (cosched-submit(1)). \
                 A command interrupted by SIGINT or SIGTERM cleans up, then ends by that signal (a shell shows 130 \
                 or 143).",
            ),
            (
                "ENVIRONMENT",
                "COSCHED_SOCKET: the controller's Unix socket (as --socket; default /run/cosched/cosched.sock).\n\n\
                 COSCHED_CONTROLLER: a controller on another host, host:port (as --controller), reached with a MUNGE \
                 credential.\n\nCOSCHED_MUNGE_SOCKET: the socket of this host's munged (as --munge-socket).\n\n\
                 COSCHED_JOB_ID: set in every job's processes; cosched rsh reads it.",
            ),
            (
                "FILES",
                "/run/cosched/cosched.sock: the controller's socket, for every local user.\n\n/var/lib/cosched: the \
                 controller's state (root's alone): cosched.db (jobs and their history, SQLite), backup/cosched.db, \
                 status.json, logs/ (the jobs' standard output and error, per node).",
            ),
            ("SEE ALSO", SEE_ALSO_RUNTIME),
        ],
    ),
    (
        "cosched-submit",
        &[
            (
                "EXAMPLES",
                "$ cosched submit -n 8 -- ./solver input.dat\n$ cosched submit -n 4 --local -- ./other\n\
                 $ cosched submit -J nightly -t 2:00:00 --wait -n 16 --nodes 4 --mpi -- mpirun ./app\n\n\
                 The first is a gang job of 8 tasks; the second is left to Linux; the third is an MPI job named \
                 nightly that may run two hours in its slots, and the command waits for its end.",
            ),
            (
                "EXIT STATUS",
                "Without --wait: 0 once the job is queued, 1 when it is refused. With --wait, as sbatch --wait: 0 \
                 when the job finished, its exit code when it failed with one, 1 otherwise (killed, timed out by \
                 --time, failed without a code).",
            ),
            ("SEE ALSO", SEE_ALSO_RUNTIME),
        ],
    ),
    (
        "cosched-status",
        &[
            (
                "EXAMPLES",
                "$ cosched status\n$ cosched status -u alice -t running,queued -w node1\n\
                 $ cosched status 41 42 --noheader -o jobid,state,reason\n$ cosched status --json",
            ),
            ("SEE ALSO", SEE_ALSO_RUNTIME),
        ],
    ),
    (
        "cosched-kill",
        &[
            (
                "EXAMPLES",
                "$ cosched kill 41 42\n$ cosched kill -u alice -t PD -n sweep\n$ cosched kill 41 --signal USR1\n\n\
                 The second kills, as scancel would, alice's queued jobs named sweep; the third only sends SIGUSR1 \
                 to every process of job 41.",
            ),
            (
                "EXIT STATUS",
                "0 when every job named or picked was killed (or signalled); 1 when any was refused (each refusal \
                 on standard error; the others are killed all the same) or when nothing names a job.",
            ),
            ("SEE ALSO", SEE_ALSO_RUNTIME),
        ],
    ),
    (
        "cosched-logs",
        &[(
            "EXAMPLES",
            "$ cosched logs 41\n$ cosched logs 41 | less -R\n\nThe end (64 KiB) of each task's standard output \
             and error, gathered from every node of the job; whole files are root's, under the state folder.",
        )],
    ),
    (
        "cosched-suspend",
        &[("EXAMPLES", "$ cosched suspend 41\n$ cosched resume 41\n\nA job an administrator suspended stays so until an administrator resumes it.")],
    ),
    (
        "cosched-class",
        &[("EXAMPLES", "$ cosched class 41 standby\n\nUsers may only lower a class (express, interactive, batch, standby); administrators set any.")],
    ),
    (
        "cosched-sim",
        &[(
            "EXAMPLES",
            "$ cosched sim\n$ cosched sim --schemes GS,SB,PB-SB --nodes 64 --jobs 400 --load 0.8 --out runs/a\n\
             $ cosched sim --trace site.swf.gz --schemes GS,Local --out runs/site\n\nThe first runs every scheme \
             on the embedded defaults; the others choose schemes, machine and load, or replay a site's SWF trace.",
        )],
    ),
    (
        "cosched-study-e1",
        &[(
            "EXAMPLES",
            "$ cosched study e1 --out runs/e1\n$ cosched study e1 --schemes GS,SB --replications 3 --out runs/e1-gs-sb",
        )],
    ),
    (
        "cosched-bench-slowdown",
        &[(
            "EXAMPLES",
            "$ cosched bench slowdown --jobs 2 --policy local -- ./prog\n\
             $ sudo cosched bench slowdown --nodes 2 --cpus 2 --policy gang -- ./prog\n\nAs root, the program, \
             its folder and every file it names must be root's all the way up (docs/security.md).",
        )],
    ),
    (
        "cosched-workload-generate",
        &[("EXAMPLES", "$ cosched workload generate --procs 128 --jobs 1000 --load 0.7 --out wl.swf\n$ cosched workload inspect wl.swf")],
    ),
    (
        "cosched-history",
        &[
            (
                "EXAMPLES",
                "$ cosched history\n$ cosched history -S now-7days -u alice -s failed -o jobid,exitcode,end,reason\n\
                 $ cosched history -S 2026-11-01 -E 2026-11-08 --json\n\nTimes are UTC. Ended jobs stay for the \
                 controller's --keep-history-days (30 by default).",
            ),
            ("SEE ALSO", SEE_ALSO_RUNTIME),
        ],
    ),
    (
        "cosched-up",
        &[
            (
                "ENVIRONMENT",
                "NOTIFY_SOCKET: set by systemd for a Type=notify unit; the daemon sends READY=1 there once it \
                 answers requests.\n\nCOSCHED_CONFIG: the configuration file, in place of \
                 /etc/cosched/cosched.toml.",
            ),
            (
                "FILES",
                "/etc/cosched/cosched.toml: settings read before the flags (a flag's long name = its value; flags \
                 given win), also by cosched controller and cosched agent.\n\n\
                 /var/lib/cosched (--state-dir): the database, its backup, status.json, the jobs' logs. It and the \
                 socket's folder must be root's alone all the way up. /etc/systemd/system or \
                 /usr/local/lib/systemd/system: cosched.service.",
            ),
            ("EXAMPLES", "$ sudo cosched up --slice-ms 10 --rows 4\n$ sudo systemctl enable --now cosched.service"),
            ("SEE ALSO", SEE_ALSO_RUNTIME),
        ],
    ),
];

/// Print the completion script for `args.shell` on stdout: a value that is not a path completes to nothing rather
/// than to file names, and in bash the job ids of commands that take them are offered (from `cosched status`).
pub fn print_completions(command: Command, args: &CompletionsArgs) -> Result<(), String> {
    let mut command = no_file_names_for_values(command);
    let name = command.get_name().to_string();
    let mut script = Vec::new();
    clap_complete::generate(args.shell, &mut command, name, &mut script);
    let mut script = String::from_utf8(script).map_err(|e| format!("the completion script: {e}"))?;
    if args.shell == Shell::Bash {
        script = with_value_lists(&with_job_ids(&script));
    }
    print!("{script}");
    Ok(())
}

/// Every value but a path's gets the hint "other", for which the shells offer no file names; the values of a known
/// vocabulary (`offered_values`) are offered. (This command only writes the script: parsing is unchanged.)
fn no_file_names_for_values(command: Command) -> Command {
    command
        .mut_args(|arg| {
            if let Some(values) = arg.get_long().and_then(offered_values) {
                return arg.value_parser(clap::builder::PossibleValuesParser::new(values));
            }
            let path = arg.get_value_parser().type_id() == std::any::TypeId::of::<PathBuf>();
            match arg.get_action().takes_values() && !path && arg.get_value_hint() == clap::ValueHint::Unknown {
                true => arg.value_hint(clap::ValueHint::Other),
                false => arg,
            }
        })
        .mut_subcommands(no_file_names_for_values)
}

/// The words a flag (by its long name) takes, to offer in completion: job states, schemes, classes.
fn offered_values(long: &str) -> Option<Vec<&'static str>> {
    use cosched_runtime::wire::jobs::JobState;
    match long {
        "state" => {
            let names = JobState::ALL.iter().flat_map(|s| [s.name(), s.slurm_names().1]);
            Some(names.chain(["active", "ended"]).collect())
        }
        "schemes" => Some(cosched_sim::Scheme::all_names()),
        "class" => Some(cosched_policy::cluster::JobClass::ALL.iter().map(|c| c.name()).collect()),
        _ => None,
    }
}

/// The bash script with each vocabulary's words also offered after a comma (`-t R,<TAB>` offers `R,PD` ...), as
/// the flags that take them take comma-separated lists.
fn with_value_lists(script: &str) -> String {
    const LIST: &str = "_cosched_list() {\n    if [[ \"$2\" == *,* ]]; then\n        \
                        compgen -W \"$1\" -P \"${2%,*},\" -- \"${2##*,}\"\n    else\n        \
                        compgen -W \"$1\" -- \"$2\"\n    fi\n}\n\n";
    let mut out = String::from(LIST);
    for line in script.lines() {
        let words = line.trim_start().strip_prefix("COMPREPLY=($(compgen -W \"").and_then(|rest| {
            let words = rest.strip_suffix("\" -- \"${cur}\"))")?;
            (!words.contains('$')).then_some(words)
        });
        match words {
            Some(words) => {
                let indent = &line[..line.len() - line.trim_start().len()];
                out += &format!("{indent}COMPREPLY=($(_cosched_list \"{words}\" \"${{cur}}\"))");
            }
            None => out += line,
        }
        out.push('\n');
    }
    out
}

/// The commands whose arguments are job ids.
const JOB_ID_COMMANDS: [&str; 7] = ["kill", "status", "suspend", "resume", "logs", "class", "history"];

/// The bash script with the ids `cosched status` lists offered wherever a command of `JOB_ID_COMMANDS` completes
/// its words (quietly nothing when no controller answers).
fn with_job_ids(script: &str) -> String {
    let mut out =
        String::from("_cosched_job_ids() {\n    command cosched status --noheader -o jobid 2>/dev/null\n}\n\n");
    let mut in_job_command = false;
    for line in script.lines() {
        let trimmed = line.trim_start();
        if trimmed.starts_with("cosched__subcmd__") && trimmed.ends_with(')') {
            let name = trimmed.trim_start_matches("cosched__subcmd__").trim_end_matches(')');
            in_job_command = JOB_ID_COMMANDS.contains(&name);
        }
        match in_job_command {
            true => out += &line.replace("compgen -W \"${opts}\"", "compgen -W \"${opts} $(_cosched_job_ids)\""),
            false => out += line,
        }
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roff_text_is_printed_as_written() {
        assert_eq!(roff_text(".hidden"), "\\&.hidden", "a leading dot is no request");
        assert_eq!(roff_text("'x"), "\\&'x");
        assert_eq!(roff_text("a\\b --wait"), "a\\eb \\-\\-wait");
        let section = roff_section("EXAMPLES", "$ cosched up\n$ cosched status\n\nThen look.");
        assert_eq!(section, ".SH EXAMPLES\n.PP\n.nf\n.RS 4\ncosched up\ncosched status\n.RE\n.fi\n.PP\nThen look.\n");
    }
}
