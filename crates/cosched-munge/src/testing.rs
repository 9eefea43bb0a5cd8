//! A private munged for tests and trials: its own key, socket and files in a fresh directory, so it never meets
//! a site's MUNGE realm. Two private munged are two realms: neither accepts the other's credentials.

use crate::{Munge, MungeError};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// How long [`PrivateMunged::start`] waits for munged to answer.
const READY_WITHIN: Duration = Duration::from_secs(20);

/// A running munged, stopped and removed on drop.
pub struct PrivateMunged {
    child: Child,
    dir: PathBuf,
}

impl PrivateMunged {
    /// Make a key and start munged in the foreground; return once it answers.
    pub fn start() -> Result<PrivateMunged, String> {
        let dir = fresh_dir()?;
        let child = match spawn_munged(&dir) {
            Ok(child) => child,
            Err(e) => {
                let _ = std::fs::remove_dir_all(&dir); // the key with it
                return Err(e);
            }
        };
        let daemon = PrivateMunged { child, dir };
        daemon.wait_ready()?;
        Ok(daemon)
    }

    /// The socket clients of this munged use.
    pub fn socket(&self) -> PathBuf {
        self.dir.join("munge.socket")
    }

    /// A [`Munge`] that talks to this munged.
    pub fn client(&self) -> Result<Munge, MungeError> {
        Munge::open(Some(&self.socket()))
    }

    fn wait_ready(&self) -> Result<(), String> {
        let started = Instant::now();
        let mut last = String::new();
        while started.elapsed() < READY_WITHIN {
            match self.client().and_then(|m| m.check()) {
                Ok(()) => return Ok(()),
                Err(e) => last = e.message,
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let stderr = std::fs::read_to_string(self.dir.join("munged.stderr")).unwrap_or_default();
        Err(format!("munged did not answer within {READY_WITHIN:?}: {last}; its stderr: {}", stderr.trim()))
    }
}

impl Drop for PrivateMunged {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A key in `dir`, then munged on it with every file of its own there.
fn spawn_munged(dir: &Path) -> Result<Child, String> {
    let key = dir.join("munge.key");
    make_key(&key)?;
    let path = |name: &str| dir.join(name).display().to_string();
    Command::new("munged")
        .arg("--foreground")
        .arg(format!("--socket={}", path("munge.socket")))
        .arg(format!("--key-file={}", key.display()))
        .arg(format!("--pid-file={}", path("munged.pid")))
        .arg(format!("--log-file={}", path("munged.log")))
        .arg(format!("--seed-file={}", path("munged.seed")))
        .arg("--num-threads=2")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(dir.join("munged.stderr")).map_err(|e| e.to_string())?)
        .spawn()
        .map_err(|e| format!("cannot start munged (scripts/setup installs the munge package): {e}"))
}

/// A new directory that only its owner may write (munged refuses a socket directory others can write), with a
/// random name: nobody can make it first to keep munged from starting.
fn fresh_dir() -> Result<PathBuf, String> {
    use std::io::Read;
    use std::os::unix::fs::PermissionsExt;
    let mut random = [0u8; 8];
    std::fs::File::open("/dev/urandom").and_then(|mut f| f.read_exact(&mut random)).map_err(|e| e.to_string())?;
    let hex: String = random.iter().map(|b| format!("{b:02x}")).collect();
    let name = format!("cosched-munge-{}-{hex}", std::process::id());
    let dir = std::env::temp_dir().join(name);
    std::fs::create_dir(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).map_err(|e| e.to_string())?;
    Ok(dir)
}

/// 1 KiB from the kernel's generator, readable by its owner alone (what `mungekey` makes).
fn make_key(path: &Path) -> Result<(), String> {
    use std::io::{Read, Write};
    use std::os::unix::fs::OpenOptionsExt;
    let mut key = [0u8; 1024];
    std::fs::File::open("/dev/urandom").and_then(|mut f| f.read_exact(&mut key)).map_err(|e| e.to_string())?;
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
        .and_then(|mut f| f.write_all(&key))
        .map_err(|e| format!("{}: {e}", path.display()))
}
