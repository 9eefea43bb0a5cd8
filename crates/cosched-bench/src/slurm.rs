//! The private Slurm of `scripts/slurm` under the two Slurm policies: with its
//! own gang scheduling (5 s slices), or sharing CPUs without slicing while the
//! cosched SPANK plugin hands each job to a private cosched.

use std::path::{Path, PathBuf};
use std::process::Command;

/// How the private Slurm is configured.
#[derive(Debug, Clone, PartialEq)]
pub enum SlurmSetup {
    /// Slurm's gang scheduling at its shortest slice, 5 s.
    Gang,
    /// Gang scheduling off; `plugin` (a plugstack.conf line) gives each job to the cosched agent `node`.
    Cosched { plugin: String, node: String },
}

/// A running private Slurm, stopped (with every job) on drop.
pub struct SlurmInstance {
    script: PathBuf,
    dir: PathBuf,
    pub setup: SlurmSetup,
}

/// Ports are chosen at random; a clash with another program is retried this many times.
const START_TRIES: usize = 5;

impl SlurmInstance {
    pub fn start(script: &Path, dir: &Path, setup: SlurmSetup) -> Result<SlurmInstance, String> {
        let mut last_error = String::new();
        for _ in 0..START_TRIES {
            let mut command = Command::new(script);
            command.arg("start").arg("--dir").arg(dir).args(["--port", &free_port_pair()?.to_string()]);
            match &setup {
                SlurmSetup::Gang => command.args(["--gang", "on", "--slice-s", "5"]),
                SlurmSetup::Cosched { plugin, node } => {
                    command.args(["--gang", "off", "--plugin", plugin, "--node-name", node])
                }
            };
            let out = command.output().map_err(|e| format!("running {} start: {e}", script.display()))?;
            if out.status.success() {
                return Ok(SlurmInstance { script: script.to_path_buf(), dir: dir.to_path_buf(), setup });
            }
            last_error = String::from_utf8_lossy(&out.stderr).into_owned();
            if !last_error.contains("is in use") {
                break;
            }
        }
        Err(format!("{} start failed:\n{}", script.display(), crate::runtime::tail(&last_error, 3000)))
    }

    /// The command that runs `command` as one batch job of `cpus` CPUs and waits for it.
    pub fn run_argv(&self, cpus: u32, command: &[String]) -> Vec<String> {
        let mut argv = vec![self.script.to_string_lossy().into_owned(), "run".into()];
        argv.extend(["--dir".into(), self.dir.to_string_lossy().into_owned(), "--cpus".into(), cpus.to_string()]);
        argv.push("--".into());
        argv.extend(command.iter().cloned());
        argv
    }
}

impl Drop for SlurmInstance {
    fn drop(&mut self) {
        let stopped = Command::new(&self.script).arg("stop").arg("--dir").arg(&self.dir).output();
        if stopped.is_ok_and(|out| out.status.success()) {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

/// A port P such that P and P + 1 (slurmctld's and slurmd's) were both free a moment ago.
fn free_port_pair() -> Result<u16, String> {
    for _ in 0..100 {
        let first = std::net::TcpListener::bind("127.0.0.1:0").map_err(|e| format!("finding a free port: {e}"))?;
        let port = first.local_addr().map_err(|e| e.to_string())?.port();
        if port < u16::MAX && std::net::TcpListener::bind(("127.0.0.1", port + 1)).is_ok() {
            return Ok(port);
        }
    }
    Err("no two free ports in a row".into())
}
