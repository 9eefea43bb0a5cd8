//! Starting a job task inside its cgroup(s) under the submitting user's identity.
//!
//! The agent runs as root and must start a user's command so that it is a member of the job's cgroups *before*
//! it executes any user code (otherwise a fast fork could escape freezing and accounting). Without `pre_exec`
//! (the workspace forbids `unsafe`), a re-exec shim does it: the agent spawns `<program> __launch <spec JSON>`,
//! and the shim writes its own pid into each `cgroup.procs`, drops to the user's groups, gid and uid (in that
//! order: after `setuid` it could no longer change groups), changes directory and `exec`s the command. The
//! shim's pid therefore is the task's pid.

use std::convert::Infallible;
use std::ffi::CString;
use std::io;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use nix::unistd::{getgid, getuid, initgroups, setgid, setgroups, setuid, Gid, Uid, User};

/// The subcommand of the agent's binary that runs [`run_shim`].
pub const LAUNCH_SUBCOMMAND: &str = "__launch";

/// Everything the shim needs, passed to it as one JSON argument.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct LaunchSpec {
    /// `cgroup.procs` files to join (from `JobGroups::procs_files`), before anything else happens.
    pub procs_files: Vec<PathBuf>,
    pub uid: u32,
    pub gid: u32,
    pub cwd: PathBuf,
    /// Added to (and overriding) the environment inherited from the agent.
    pub env: Vec<(String, String)>,
    /// Program and arguments; the program is looked up in `PATH` when it has no `/`.
    pub argv: Vec<String>,
}

/// Build the command that runs the shim for `spec`: `<shim_program> __launch <spec as JSON>`. The caller sets stdio
/// and spawns it. Fails only if the spec cannot be written as JSON (a path that is not UTF-8).
pub fn shim_command(shim_program: &Path, spec: &LaunchSpec) -> io::Result<Command> {
    let json = serde_json::to_string(spec).map_err(|e| {
        io::Error::new(io::ErrorKind::InvalidInput, format!("cannot encode launch spec for {:?}: {e}", spec.argv))
    })?;
    let mut command = Command::new(shim_program);
    command.arg(LAUNCH_SUBCOMMAND).arg(json);
    Ok(command)
}

/// The shim's body, for the binary's `__launch` subcommand. Never returns on success (the process becomes the
/// command); on failure returns the error, which the binary prints before exiting with status 127.
pub fn run_shim(spec_json: &str) -> io::Error {
    match shim(spec_json) {
        Ok(never) => match never {},
        Err(e) => e,
    }
}

fn shim(spec_json: &str) -> io::Result<Infallible> {
    let spec: LaunchSpec = serde_json::from_str(spec_json)
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, format!("bad launch spec: {e}")))?;
    let Some((program, args)) = spec.argv.split_first() else {
        return Err(io::Error::new(io::ErrorKind::InvalidInput, "launch spec has an empty argv"));
    };
    join_cgroups(&spec.procs_files)?;
    switch_identity(spec.uid, spec.gid)?;
    std::env::set_current_dir(&spec.cwd).map_err(|e| {
        io::Error::new(e.kind(), format!("cannot change to directory {} as uid {}: {e}", spec.cwd.display(), spec.uid))
    })?;
    let error = Command::new(program).args(args).envs(spec.env.iter().map(|(k, v)| (k, v))).exec();
    Err(io::Error::new(error.kind(), format!("cannot execute {program:?} as uid {}: {error}", spec.uid)))
}

/// Write our own pid into every `cgroup.procs` file, so the command and all its descendants start in the job.
fn join_cgroups(procs_files: &[PathBuf]) -> io::Result<()> {
    let pid = std::process::id().to_string();
    for file in procs_files {
        std::fs::write(file, &pid)
            .map_err(|e| io::Error::new(e.kind(), format!("cannot join cgroup {}: {e}", file.display())))?;
    }
    Ok(())
}

/// Become `uid`/`gid` with the user's supplementary groups (or only `gid` for a uid without a passwd entry).
/// A shim that is not root can only run the command as itself.
fn switch_identity(uid: u32, gid: u32) -> io::Result<()> {
    let context = |what: &str, e: nix::errno::Errno| {
        let e = io::Error::from(e);
        io::Error::new(e.kind(), format!("cannot {what} for uid {uid} gid {gid}: {e}"))
    };
    if !nix::unistd::geteuid().is_root() {
        if getuid().as_raw() == uid && getgid().as_raw() == gid {
            return Ok(());
        }
        let msg = format!("cannot run as uid {uid} gid {gid}: the launcher is not root (uid {})", getuid());
        return Err(io::Error::new(io::ErrorKind::PermissionDenied, msg));
    }
    let user = User::from_uid(Uid::from_raw(uid)).ok().flatten();
    match user.and_then(|u| CString::new(u.name).ok()) {
        Some(name) => initgroups(&name, Gid::from_raw(gid)).map_err(|e| context("initgroups", e))?,
        None => setgroups(&[Gid::from_raw(gid)]).map_err(|e| context("setgroups", e))?,
    }
    setgid(Gid::from_raw(gid)).map_err(|e| context("setgid", e))?;
    setuid(Uid::from_raw(uid)).map_err(|e| context("setuid", e))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec() -> LaunchSpec {
        LaunchSpec {
            procs_files: vec![PathBuf::from("/sys/fs/cgroup/cosched/a/job-1/cgroup.procs")],
            uid: 65534,
            gid: 65534,
            cwd: PathBuf::from("/"),
            env: vec![("A".into(), "b c".into())],
            argv: vec!["sh".into(), "-c".into(), "echo 'x y'".into()],
        }
    }

    #[test]
    fn shim_command_carries_the_spec_as_one_argument() {
        let command = shim_command(Path::new("/usr/bin/cosched"), &spec()).unwrap();
        let args: Vec<&std::ffi::OsStr> = command.get_args().collect();
        assert_eq!(args[0], LAUNCH_SUBCOMMAND);
        assert_eq!(serde_json::from_str::<LaunchSpec>(args[1].to_str().unwrap()).unwrap(), spec());
    }

    #[test]
    fn bad_specs_fail_before_touching_anything() {
        assert!(run_shim("not json").to_string().contains("bad launch spec"));
        let mut empty = spec();
        empty.argv.clear();
        assert!(run_shim(&serde_json::to_string(&empty).unwrap()).to_string().contains("empty argv"));
    }
}
