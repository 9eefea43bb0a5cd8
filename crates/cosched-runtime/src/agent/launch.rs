//! Starting a job task inside its cgroup(s) under the submitting user's identity.
//!
//! The agent runs as root and must start a user's command so that it is a member of the job's cgroups *before*
//! it executes any user code (otherwise a fast fork could escape freezing and accounting). Without `pre_exec`
//! (the workspace forbids `unsafe`), a re-exec shim does it: the agent spawns `<program> __launch` and writes the
//! spec (JSON) into the shim's stdin — never on its command line, which every user can read in `/proc` and which
//! the kernel limits to 128 KiB per argument. The shim reads the spec, puts `/dev/null` on its stdin, writes its
//! own pid into each `cgroup.procs`, drops to the user's groups, gid and uid (in that order: after `setuid` it
//! could no longer change groups), changes directory and `exec`s the command with a clean environment: the
//! user's variables only, never the daemon's. The shim's pid therefore is the task's pid.
//!
//! Before anything else the shim starts a session of its own (`setsid`). The kernel sends SIGHUP and SIGCONT to
//! every process of a process group that becomes orphaned while one of its members is stopped, when the last
//! parent outside the group but inside its session exits. A task in the agent's or its supervisor's session was
//! therefore killed whenever the daemon stopped while the task was stopped (by the signals freezer, or by its own
//! user): a session leader whose parent is in another session is never in such a group.

use std::convert::Infallible;
use std::ffi::CString;
use std::io::{self, Read, Write};
use std::net::Shutdown;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::os::unix::net::UnixStream;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use nix::unistd::{getgid, getuid, initgroups, setgid, setgroups, setuid, Gid, Uid, User};

/// The subcommand of the agent's binary that runs [`run_shim`].
pub const LAUNCH_SUBCOMMAND: &str = "__launch";

/// Everything the shim needs, written to its stdin as JSON.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct LaunchSpec {
    /// `cgroup.procs` files to join (from `JobGroups::procs_files`), before anything else happens.
    pub procs_files: Vec<PathBuf>,
    pub uid: u32,
    pub gid: u32,
    pub cwd: PathBuf,
    /// The command's whole environment (nothing is inherited from the agent); `PATH` and `HOME` get defaults
    /// when absent.
    pub env: Vec<(String, String)>,
    /// Program and arguments; the program is looked up in `PATH` when it has no `/`.
    pub argv: Vec<String>,
    /// The soft limit on open files the daemon started with (it raises its own): the task gets it back.
    #[serde(default)]
    pub open_files_soft_limit: Option<u64>,
    /// Files to put on the command's stdout and stderr (`submit -o`/`-e`), opened by the shim as the user once in
    /// `cwd`; `None`: the ones the shim was started with.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub files: Option<crate::wire::output_files::TaskFiles>,
    /// The submitter's file mode creation mask, for the command and its files; `None`: the daemon's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub umask: Option<u32>,
}

/// The largest spec the shim reads (a request is at most 1 MiB; the rest is room for its escaping).
const MAX_SPEC_BYTES: u64 = 16 << 20;
/// `PATH` for a command whose user gave none.
const DEFAULT_PATH: &str = "/usr/local/bin:/usr/bin:/bin";

/// A shim started for a command: the process, and the parent's end of the socket its spec went through, on which
/// the shim says why the command could not start. Nobody else can write there: the shim's end is closed when the
/// command starts (close-on-exec), and the shim, while it holds it, is root or, once it took the user's identity,
/// a process the user may not trace (the kernel makes it undumpable).
pub struct Shim {
    pub child: Child,
    start_report: UnixStream,
}

impl Shim {
    /// Why the command never started, once the shim has exited (`None`: it started, or the report is garbage).
    pub fn launch_failure(&mut self) -> Option<LaunchFailure> {
        let mut report = String::new();
        self.start_report.set_nonblocking(true).ok()?;
        (&self.start_report).take(MAX_REPORT_BYTES).read_to_string(&mut report).ok()?;
        LaunchFailure::decode(report.trim_end())
    }
}

/// Spawn the shim for `spec`: `<shim_program> __launch`, with the spec written to its stdin. `setup` sets the
/// command's stdout and stderr (stdin is the spec's socket).
pub fn spawn_shim(shim_program: &Path, spec: &LaunchSpec, setup: impl FnOnce(&mut Command)) -> io::Result<Shim> {
    let (child, start_report) = spawn_with_spec(shim_program, LAUNCH_SUBCOMMAND, spec, setup)?;
    Ok(Shim { child, start_report })
}

/// Spawn `<program> <subcommand>` and write `spec` (JSON) to its stdin, a socket whose other end is returned.
pub(crate) fn spawn_with_spec(
    program: &Path,
    subcommand: &str,
    spec: &impl serde::Serialize,
    setup: impl FnOnce(&mut Command),
) -> io::Result<(Child, UnixStream)> {
    let json = serde_json::to_vec(spec).map_err(|e| {
        io::Error::new(io::ErrorKind::InvalidInput, format!("cannot encode the spec for {subcommand}: {e}"))
    })?;
    let (mut ours, theirs) = UnixStream::pair()?;
    let mut command = Command::new(program);
    command.arg(subcommand);
    setup(&mut command);
    let mut child = command.stdin(Stdio::from(OwnedFd::from(theirs))).spawn()?;
    if let Err(e) = ours.write_all(&json).and_then(|()| ours.shutdown(Shutdown::Write)) {
        let _ = child.kill();
        let _ = child.wait();
        return Err(io::Error::new(e.kind(), format!("handing the spec to {subcommand}: {e}")));
    }
    Ok((child, ours))
}

/// Read a spec written by `spawn_with_spec` (at most `MAX_SPEC_BYTES`), then put `/dev/null` on stdin. Returns the
/// spec and the socket it came through, as a descriptor closed on `exec`.
pub(crate) fn read_spec_from_stdin() -> io::Result<(String, std::fs::File)> {
    let mut json = String::new();
    io::stdin()
        .lock()
        .take(MAX_SPEC_BYTES)
        .read_to_string(&mut json)
        .map_err(|e| io::Error::new(e.kind(), format!("reading the spec: {e}")))?;
    let channel = io::stdin().as_fd().try_clone_to_owned()?; // F_DUPFD_CLOEXEC
    let null =
        std::fs::File::open("/dev/null").map_err(|e| io::Error::new(e.kind(), format!("opening /dev/null: {e}")))?;
    nix::unistd::dup2(null.as_raw_fd(), 0).map_err(|e| io::Error::other(format!("putting /dev/null on stdin: {e}")))?;
    Ok((json, std::fs::File::from(channel)))
}

/// The `__launch` subcommand: read the spec from stdin, then run the shim with `/dev/null` as stdin. On failure,
/// tell the parent why the command could not start and return the error (the binary prints it).
pub fn run_shim_from_stdin() -> io::Error {
    let (json, mut start_report) = match read_spec_from_stdin() {
        Ok(read) => read,
        Err(e) => return e,
    };
    match shim(&json) {
        Ok(never) => match never {},
        Err(failure) => {
            let _ = writeln!(start_report, "{}", failure.encode());
            failure.error
        }
    }
}

/// The shim's body, for the binary's `__launch` subcommand. Never returns on success (the process becomes the
/// command); on failure returns the error, which the binary prints before exiting with status 127.
pub fn run_shim(spec_json: &str) -> io::Error {
    match shim(spec_json) {
        Ok(never) => match never {},
        Err(failure) => failure.error,
    }
}

fn shim(spec_json: &str) -> Result<Infallible, ShimError> {
    let setup = |error| ShimError::new(LaunchStage::Setup, error);
    let spec: LaunchSpec = serde_json::from_str(spec_json)
        .map_err(|e| setup(io::Error::new(io::ErrorKind::InvalidInput, format!("bad launch spec: {e}"))))?;
    let Some((program, args)) = spec.argv.split_first() else {
        return Err(setup(io::Error::new(io::ErrorKind::InvalidInput, "launch spec has an empty argv")));
    };
    nix::unistd::setsid()
        .map_err(|e| setup(io::Error::other(format!("cannot start a session of the task's own: {e}"))))?;
    join_cgroups(&spec.procs_files).map_err(setup)?;
    shed_daemon_settings(spec.open_files_soft_limit).map_err(setup)?;
    switch_identity(spec.uid, spec.gid).map_err(setup)?;
    std::env::set_current_dir(&spec.cwd).map_err(|e| {
        let message = format!("cannot change to directory {} as uid {}: {e}", spec.cwd.display(), spec.uid);
        ShimError::with_errno(LaunchStage::Directory, &e, message)
    })?;
    if let Some(mask) = spec.umask {
        nix::sys::stat::umask(nix::sys::stat::Mode::from_bits_truncate(mask & 0o777));
    }
    if let Some(files) = &spec.files {
        redirect_standard_streams(files).map_err(|(e, message)| {
            ShimError::with_errno(LaunchStage::Output, &e, format!("{message} as uid {}", spec.uid))
        })?;
    }
    close_beyond_standard_descriptors_on_exec().map_err(setup)?;
    let error = Command::new(program).args(args).env_clear().envs(job_environment(&spec)).exec();
    let message = format!("cannot execute {program:?} as uid {}: {error}", spec.uid);
    Err(ShimError::with_errno(LaunchStage::Exec, &error, message))
}

/// Open the user's files (`submit -o`/`-e`) and put them on stdout and stderr. Runs as the user, in the job's
/// directory: the kernel checks the paths as it would for the user's own shell. Both streams naming one file share
/// one open file, so that their lines interleave instead of overwriting each other.
fn redirect_standard_streams(files: &crate::wire::output_files::TaskFiles) -> Result<(), (io::Error, String)> {
    let open = |file: &crate::wire::output_files::TaskFile| {
        let opened = open_output(&file.path, file.truncate, true).or_else(|e| {
            // A lease on the file (its owner's, or an NFS or SMB client's): the kernel breaks it within
            // fs.lease-break-time, so wait as a shell would.
            if e.kind() == io::ErrorKind::WouldBlock {
                open_output(&file.path, file.truncate, false)
            } else {
                Err(e)
            }
        });
        let opened = opened.map_err(|e| {
            let message = format!("cannot open output file {:?}: {e}", file.path);
            (e, message)
        })?;
        blocking(&opened).map_err(|e| {
            let message = format!("cannot make output file {:?} blocking again: {e}", file.path);
            (e, message)
        })?;
        Ok(opened)
    };
    let stdout = files.stdout.as_ref().map(open).transpose()?;
    let stderr = match (&files.stderr, &files.stdout, &stdout) {
        (Some(err), Some(out), Some(file)) if err.path == out.path => {
            Some(file.try_clone().map_err(|e| (e, "sharing the output file with standard error".into()))?)
        }
        (Some(err), _, _) => Some(open(err)?),
        (None, _, _) => None,
    };
    for (file, fd) in [(stdout, 1), (stderr, 2)] {
        if let Some(file) = file {
            nix::unistd::dup2(file.as_raw_fd(), fd).map_err(|e| {
                let message = format!("putting an output file on descriptor {fd}: {e}");
                (io::Error::from(e), message)
            })?;
        }
    }
    Ok(())
}

/// An output file opened to append (created with mode 0666 less the umask), with no controlling terminal and
/// emptied first when asked. `without_waiting`: a FIFO with no reader fails at once (ENXIO) instead of holding the
/// task before it starts; a shell would wait for a reader.
fn open_output(path: &str, truncate: bool, without_waiting: bool) -> io::Result<std::fs::File> {
    use nix::fcntl::OFlag;
    use std::os::unix::fs::OpenOptionsExt;
    let mut flags = OFlag::O_NOCTTY;
    flags.set(OFlag::O_TRUNC, truncate);
    flags.set(OFlag::O_NONBLOCK, without_waiting);
    std::fs::OpenOptions::new().append(true).create(true).mode(0o666).custom_flags(flags.bits()).open(path)
}

/// `file` with writes that wait again, as a task expects of its standard output.
fn blocking(file: &std::fs::File) -> io::Result<()> {
    use nix::fcntl::{fcntl, FcntlArg, OFlag};
    let flags = OFlag::from_bits_truncate(fcntl(file.as_raw_fd(), FcntlArg::F_GETFL)?);
    fcntl(file.as_raw_fd(), FcntlArg::F_SETFL(flags - OFlag::O_NONBLOCK))?;
    Ok(())
}

/// Mark every descriptor but stdin, stdout and stderr close-on-exec, so that no program this process starts gets
/// one: a descriptor the daemon's own parent left open (an administrator's shell or script: a log, a lock, a pipe,
/// a file of root's), or one a library opened without the flag. The daemon calls it at start, so that its
/// supervisors and watchdog hold nothing it inherited, and the shim just before `exec`, so that a task starts with
/// its three standard descriptors alone whatever the daemon holds. Without `/proc` it fails: nothing is started.
pub fn close_beyond_standard_descriptors_on_exec() -> io::Result<()> {
    use nix::fcntl::{fcntl, FcntlArg, FdFlag};
    let listing = std::fs::read_dir("/proc/self/fd")
        .map_err(|e| io::Error::new(e.kind(), format!("listing this process's descriptors in /proc/self/fd: {e}")))?;
    let fds: Vec<i32> = listing.flatten().filter_map(|entry| entry.file_name().to_str()?.parse().ok()).collect();
    for fd in fds.into_iter().filter(|&fd| fd > 2) {
        match fcntl(fd, FcntlArg::F_SETFD(FdFlag::FD_CLOEXEC)) {
            // The listing's own descriptor, closed since.
            Ok(_) | Err(nix::errno::Errno::EBADF) => {}
            Err(e) => return Err(io::Error::other(format!("marking descriptor {fd} close-on-exec: {e}"))),
        }
    }
    Ok(())
}

/// Where a shim failed, and how: the system's error number when the step's own call failed (0 when unknown).
struct ShimError {
    stage: LaunchStage,
    errno: i32,
    error: io::Error,
}

impl ShimError {
    fn new(stage: LaunchStage, error: io::Error) -> ShimError {
        ShimError { stage, errno: error.raw_os_error().unwrap_or(0), error }
    }

    /// `cause`'s error number, with a message that says what was being done.
    fn with_errno(stage: LaunchStage, cause: &io::Error, message: String) -> ShimError {
        ShimError { stage, errno: cause.raw_os_error().unwrap_or(0), error: io::Error::new(cause.kind(), message) }
    }

    fn encode(&self) -> String {
        LaunchFailure { stage: self.stage, errno: self.errno }.encode()
    }
}

/// The step of a launch that failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LaunchStage {
    /// Reading the spec, the session, the cgroups, the limits, the identity.
    Setup,
    /// Changing to the working directory, as the user.
    Directory,
    /// Opening the user's output files (`submit -o`/`-e`), as the user.
    Output,
    /// `execve` of the command.
    Exec,
}

/// Why a command never started, as its shim reported it: the step and the system's error number (0 when the
/// error was not the system's).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LaunchFailure {
    pub stage: LaunchStage,
    pub errno: i32,
}

/// The longest start report read (one short line).
const MAX_REPORT_BYTES: u64 = 64;

impl LaunchFailure {
    pub fn encode(&self) -> String {
        let stage = match self.stage {
            LaunchStage::Setup => "setup",
            LaunchStage::Directory => "directory",
            LaunchStage::Output => "output",
            LaunchStage::Exec => "exec",
        };
        format!("{stage} {}", self.errno)
    }

    pub fn decode(text: &str) -> Option<LaunchFailure> {
        let (stage, errno) = text.split_once(' ')?;
        let stage = match stage {
            "setup" => LaunchStage::Setup,
            "directory" => LaunchStage::Directory,
            "output" => LaunchStage::Output,
            "exec" => LaunchStage::Exec,
            _ => return None,
        };
        Some(LaunchFailure { stage, errno: errno.parse().ok()? })
    }

    /// What a user reads: which step failed and the kernel's reason, in words for the usual ones.
    pub fn reason(&self) -> String {
        use nix::errno::Errno;
        let errno = Errno::from_raw(self.errno);
        let kernel =
            if self.errno == 0 { "see the job's log".to_string() } else { format!("{errno:?}: {}", errno.desc()) };
        match (self.stage, errno) {
            (LaunchStage::Exec, Errno::E2BIG) => format!(
                "its command line and environment are larger than the kernel takes ({kernel}; at most 128 KiB \
                 per string, and all together at most a quarter of the stack limit)"
            ),
            (LaunchStage::Exec, Errno::ENOENT) => format!("the command was not found ({kernel})"),
            (LaunchStage::Exec, _) => format!("the command could not be executed ({kernel})"),
            (LaunchStage::Directory, _) => format!("cannot change to its working directory ({kernel})"),
            (LaunchStage::Output, Errno::ENXIO) => format!(
                "its output file (-o or -e) cannot be opened for writing: a FIFO no program has open to read, a \
                 socket, or a device that is not there ({kernel})"
            ),
            (LaunchStage::Output, _) => format!("cannot open its output file (-o or -e) as its user ({kernel})"),
            (LaunchStage::Setup, _) => format!("it could not be set up to run as its user ({kernel})"),
        }
    }
}

/// The user's variables, with `PATH` and `HOME` (from the passwd entry) added when the user gave none.
fn job_environment(spec: &LaunchSpec) -> Vec<(String, String)> {
    let mut env = spec.env.clone();
    let has = |name: &str| spec.env.iter().any(|(k, _)| k == name);
    if !has("PATH") {
        env.push(("PATH".into(), DEFAULT_PATH.into()));
    }
    if !has("HOME") {
        let home = User::from_uid(Uid::from_raw(spec.uid)).ok().flatten().map(|u| u.dir);
        env.push(("HOME".into(), home.map_or("/".into(), |h| h.display().to_string())));
    }
    env
}

/// Give back what the daemon set for itself and processes inherit: its raised limit on open files, and its
/// protection from the OOM killer (a service manager may give it one; a job must never have it).
fn shed_daemon_settings(open_files_soft_limit: Option<u64>) -> io::Result<()> {
    use nix::sys::resource::{getrlimit, setrlimit, Resource};
    if let Some(soft) = open_files_soft_limit {
        let (_, hard) = getrlimit(Resource::RLIMIT_NOFILE).map_err(io::Error::from)?;
        setrlimit(Resource::RLIMIT_NOFILE, soft.min(hard), hard)
            .map_err(|e| io::Error::new(io::Error::from(e).kind(), format!("restoring the open-file limit: {e}")))?;
    }
    let adjustment = std::fs::read_to_string("/proc/self/oom_score_adj").unwrap_or_default();
    if adjustment.trim().parse::<i32>().is_ok_and(|a| a < 0) {
        std::fs::write("/proc/self/oom_score_adj", "0")
            .map_err(|e| io::Error::new(e.kind(), format!("giving up the daemon's OOM protection: {e}")))?;
    }
    Ok(())
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
            open_files_soft_limit: None,
            files: None,
            umask: None,
        }
    }

    #[test]
    fn the_job_environment_is_the_users_with_path_and_home_by_default() {
        let mut s = spec();
        assert_eq!(
            job_environment(&s),
            vec![
                ("A".into(), "b c".into()),
                ("PATH".into(), DEFAULT_PATH.into()),
                ("HOME".into(), "/nonexistent".into())
            ]
        );
        s.env = vec![("PATH".into(), "/x".into()), ("HOME".into(), "/h".into())];
        assert_eq!(job_environment(&s), s.env);
    }

    #[test]
    fn bad_specs_fail_before_touching_anything() {
        assert!(run_shim("not json").to_string().contains("bad launch spec"));
        let mut empty = spec();
        empty.argv.clear();
        assert!(run_shim(&serde_json::to_string(&empty).unwrap()).to_string().contains("empty argv"));
    }
}
