//! Slurm's time limit of the jobs cosched slices. Slurm counts a job's time limit in wall-clock time from its
//! start, less the time Slurm itself kept it suspended, and kills it at the first check (every 30 s) after its end
//! time. To Slurm a job cosched slices runs all the time, while it runs only in its slots: at four jobs per CPU
//! its limit would run out four times as fast as its share of the CPU warrants. Slurm's own gang scheduler credits
//! a job the time it kept it suspended; the controller credits a Slurm job the time it spent out of its slots, the
//! same way, through Slurm's own commands: a periodic pass reads the jobs' times with `squeue` and moves each end
//! time by what the job is owed with `scontrol update`. See docs/slurm.md.
//!
//! Here: the settings, the credit already granted (kept in the job's record, so that a restarted controller never
//! grants it twice), the arithmetic of a pass (pure), squeue's lines, and the two commands run as root within
//! bounds. The controller's side is `controller/slurm_time.rs`.

pub use cosched_control::slurm_time::*;

use std::collections::BTreeMap;
use std::io::Read;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Job ids per squeue call.
const JOBS_PER_QUERY: usize = 500;

/// What Slurm shows of these jobs (a job Slurm no longer lists is absent).
pub fn read_jobs(settings: &SlurmTimeSettings, ids: &[u32]) -> Result<BTreeMap<u32, SlurmJobView>, String> {
    let mut views = BTreeMap::new();
    for chunk in ids.chunks(JOBS_PER_QUERY) {
        let list = chunk.iter().map(u32::to_string).collect::<Vec<_>>().join(",");
        let args = ["--noheader", "--states=all", "--jobs", &list, "--format", SQUEUE_FORMAT];
        match run_slurm_command(settings, "squeue", &args) {
            Ok(text) => views.extend(parse_squeue(&text)?),
            // squeue fails when it knows none of the jobs asked for.
            Err(e) if e.contains("Invalid job id") => {}
            Err(e) => return Err(e),
        }
    }
    Ok(views)
}

/// Set a running job's time limit and end time.
pub fn update_limit(settings: &SlurmTimeSettings, slurm_job: u32, update: LimitUpdate) -> Result<(), String> {
    let args = [
        "update".to_string(),
        format!("JobId={slurm_job}"),
        format!("TimeLimit={}", update.limit_min),
        format!("EndTime=uts{}", update.end_s),
    ];
    run_slurm_command(settings, "scontrol", &args).map(|_| ())
}

/// The most a Slurm command may print that is read.
const MAX_OUTPUT_BYTES: u64 = 1 << 20;

/// Run `program` of the settings' `bin_dir` as root: only a program and a configuration that root alone can
/// change, with an environment of its own (none of the caller's variables, which could choose Slurm's output
/// format or configuration), within the timeout (the command and anything it started are killed then) and the
/// output bound. Returns its standard output; a failure names the command and says what it printed.
pub fn run_slurm_command(
    settings: &SlurmTimeSettings,
    program: &str,
    args: &[impl AsRef<str>],
) -> Result<String, String> {
    let path = settings.bin_dir.join(program);
    check_root_only(&path)?;
    if let Some(conf) = &settings.slurm_conf {
        check_root_only(conf)?;
    }
    let mut command = Command::new(&path);
    command.args(args.iter().map(AsRef::as_ref)).env_clear();
    command.env("PATH", "/usr/sbin:/usr/bin:/sbin:/bin").env("LC_ALL", "C").env("SLURM_TIME_FORMAT", "%s");
    if let Some(conf) = &settings.slurm_conf {
        command.env("SLURM_CONF", conf);
    }
    command.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped()).process_group(0);
    let shown = format!("{} {}", path.display(), args.iter().map(AsRef::as_ref).collect::<Vec<_>>().join(" "));
    let mut child = command.spawn().map_err(|e| format!("{shown}: {e}"))?;
    let stdout = read_bounded(child.stdout.take());
    let stderr = read_bounded(child.stderr.take());
    let deadline = Instant::now() + settings.command_timeout;
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(10)),
            _ => {
                let group = nix::unistd::Pid::from_raw(child.id() as i32);
                let _ = nix::sys::signal::killpg(group, nix::sys::signal::Signal::SIGKILL);
                let _ = child.wait();
                return Err(format!("{shown}: no answer within {} s", settings.command_timeout.as_secs_f64()));
            }
        }
    };
    let (stdout, stderr) = (stdout.join().unwrap_or_default(), stderr.join().unwrap_or_default());
    if !status.success() {
        return Err(format!("{shown}: {status}: {}", stderr.trim()));
    }
    Ok(stdout)
}

/// A pipe read to its end on a thread of its own, keeping at most `MAX_OUTPUT_BYTES`.
fn read_bounded(pipe: Option<impl Read + Send + 'static>) -> std::thread::JoinHandle<String> {
    std::thread::spawn(move || {
        let mut bytes = Vec::new();
        if let Some(pipe) = pipe {
            let _ = pipe.take(MAX_OUTPUT_BYTES).read_to_end(&mut bytes);
        }
        String::from_utf8_lossy(&bytes).into_owned()
    })
}

/// Root runs this program or reads this file only if nobody else can change it: the path as given and as it
/// resolves, and every directory above both, must be root's and writable by nobody else. A sticky directory (such
/// as /tmp) may be writable by all, since nobody but root may replace root's entries in it.
pub fn check_root_only(path: &Path) -> Result<(), String> {
    if !path.is_absolute() {
        return Err(format!("{}: not an absolute path", path.display()));
    }
    let real = path.canonicalize().map_err(|e| format!("{}: {e}", path.display()))?;
    for (i, p) in path.ancestors().enumerate() {
        check_one(path, p, std::fs::symlink_metadata(p), i == 0)?;
    }
    for (i, p) in real.ancestors().enumerate() {
        check_one(path, p, std::fs::metadata(p), i == 0)?;
    }
    Ok(())
}

fn check_one(named: &Path, p: &Path, meta: std::io::Result<std::fs::Metadata>, is_target: bool) -> Result<(), String> {
    let meta = meta.map_err(|e| format!("{}: {e}", p.display()))?;
    let refuse =
        |why: String| Err(format!("{}: {why}: root runs and reads only what root alone can change", named.display()));
    if meta.uid() != 0 {
        return refuse(format!("{} belongs to uid {}", p.display(), meta.uid()));
    }
    let mode = meta.permissions().mode();
    let sticky_dir = meta.is_dir() && mode & 0o1000 != 0 && !is_target;
    if !meta.file_type().is_symlink() && mode & 0o022 != 0 && !sticky_dir {
        return refuse(format!("{} is writable by others (mode {:o})", p.display(), mode & 0o7777));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn root_runs_only_what_root_alone_can_change() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("scontrol");
        std::fs::write(&file, "").unwrap();
        if !nix::unistd::geteuid().is_root() {
            // Owned by this user: refused for not being root's.
            assert!(check_root_only(&file).unwrap_err().contains("belongs to uid"));
            return;
        }
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o755)).unwrap();
        check_root_only(&file).unwrap();
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o757)).unwrap();
        assert!(check_root_only(&file).unwrap_err().contains("writable by others"));
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o755)).unwrap();
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
        assert!(check_root_only(&file).unwrap_err().contains("writable by others"));
        std::os::unix::fs::chown(&file, Some(65534), None).unwrap();
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        assert!(check_root_only(&file).unwrap_err().contains("belongs to uid 65534"));
        assert!(check_root_only(Path::new("relative/scontrol")).is_err());
    }

    #[test]
    fn a_command_that_does_not_answer_is_killed_at_its_timeout() {
        if !nix::unistd::geteuid().is_root() {
            crate::testing::say_skipped("a_command_that_does_not_answer_is_killed_at_its_timeout", "needs root");
            return;
        }
        let settings = SlurmTimeSettings {
            bin_dir: std::path::PathBuf::from("/bin"),
            command_timeout: Duration::from_millis(300),
            ..SlurmTimeSettings::default()
        };
        let started = Instant::now();
        let error = run_slurm_command(&settings, "sleep", &["30"]).unwrap_err();
        assert!(error.contains("no answer within 0.3 s"), "{error}");
        assert!(started.elapsed() < Duration::from_secs(10));
        // Nothing of the caller's environment reaches it: only what it is given.
        let env =
            run_slurm_command(&SlurmTimeSettings { bin_dir: "/usr/bin".into(), ..settings }, "env", &[] as &[&str]);
        let mut names: Vec<String> = env.unwrap().lines().filter_map(|l| Some(l.split_once('=')?.0.into())).collect();
        names.sort();
        assert_eq!(names, ["LC_ALL", "PATH", "SLURM_TIME_FORMAT"]);
    }
}
