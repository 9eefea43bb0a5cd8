//! Writing result files all-or-nothing: everything goes to a scratch folder
//! beside the destination, which replaces the destination only when complete.
//! A failed run therefore leaves no partial output behind (an interrupted
//! study writes its finished runs' files on purpose, marked partial).

use std::fs;
use std::path::{Path, PathBuf};

/// Marker naming a folder as cosched output, so it may be replaced.
const MARKER: &str = ".cosched-output";

pub struct OutputDir {
    final_path: PathBuf,
    scratch: PathBuf,
}

impl OutputDir {
    /// Check that `path` can be (re)written, before any work is done.
    pub fn check(path: &Path) -> Result<(), String> {
        if path.exists() {
            if !path.is_dir() {
                return Err(format!("--out {}: exists and is not a folder", path.display()));
            }
            let empty = fs::read_dir(path).map_err(|e| format!("--out {}: {e}", path.display()))?.next().is_none();
            if !empty && !path.join(MARKER).exists() {
                return Err(format!(
                    "--out {}: the folder holds files that cosched did not write; choose another folder",
                    path.display()
                ));
            }
        }
        Ok(())
    }

    pub fn begin(path: &Path) -> Result<OutputDir, String> {
        OutputDir::check(path)?;
        let parent = match path.parent() {
            Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
            _ => PathBuf::from("."),
        };
        fs::create_dir_all(&parent).map_err(|e| format!("cannot create {}: {e}", parent.display()))?;
        let name = path.file_name().map(|n| n.to_string_lossy().to_string()).unwrap_or_else(|| "out".into());
        // Made new with a random name (mkdtemp): a fixed one could be another user's, or a link, when the
        // destination is in a folder others may write.
        let scratch = tempfile::Builder::new()
            .prefix(&format!(".{name}.partial-"))
            .tempdir_in(&parent)
            .map_err(|e| format!("cannot create a scratch folder in {}: {e}", parent.display()))?
            .keep();
        fs::write(scratch.join(MARKER), "written by cosched\n").map_err(|e| e.to_string())?;
        Ok(OutputDir { final_path: path.to_path_buf(), scratch })
    }

    pub fn file(&self, name: &str) -> PathBuf {
        self.scratch.join(name)
    }

    /// Write `name`, a path inside the folder (its subfolders are made as needed).
    pub fn write(&self, name: &str, contents: &str) -> Result<(), String> {
        let path = self.file(name);
        if let Some(folder) = path.parent() {
            fs::create_dir_all(folder).map_err(|e| format!("cannot create the folder of {name}: {e}"))?;
        }
        fs::write(path, contents).map_err(|e| format!("cannot write {name}: {e}"))
    }

    /// Put the finished folder in place of the destination. The old one is first moved aside whole, then
    /// removed: a kill half-way leaves the destination whole, old or new, or absent, never half-deleted.
    pub fn commit(self) -> Result<PathBuf, String> {
        let replacing = |e: std::io::Error| format!("cannot replace {}: {e}", self.final_path.display());
        let old = if self.final_path.exists() {
            // Onto an empty folder made new with a random name (a directory may be renamed over an empty one):
            // a fixed name could be another user's.
            let parent = self.scratch.parent().unwrap_or(Path::new("."));
            let aside =
                tempfile::Builder::new().prefix(".cosched-replaced-").tempdir_in(parent).map_err(replacing)?.keep();
            fs::rename(&self.final_path, &aside).map_err(|e| {
                let _ = fs::remove_dir(&aside);
                replacing(e)
            })?;
            Some(aside)
        } else {
            None
        };
        if let Err(e) = fs::rename(&self.scratch, &self.final_path) {
            if let Some(aside) = &old {
                let _ = fs::rename(aside, &self.final_path);
            }
            return Err(format!("cannot move results to {}: {e}", self.final_path.display()));
        }
        if let Some(aside) = old {
            fs::remove_dir_all(&aside).map_err(replacing)?;
        }
        Ok(self.final_path.clone())
    }
}

impl Drop for OutputDir {
    fn drop(&mut self) {
        // Not committed (an error on the way): leave nothing behind.
        if self.scratch.exists() {
            let _ = fs::remove_dir_all(&self.scratch);
        }
    }
}

/// Write the file `path` all-or-nothing: into a new file beside it, renamed over it once complete. The new file
/// gets a random name and is made exclusively (a fixed name could be another user's link when the folder is
/// shared); it is readable by all, as a file made by `fs::write` would be (umask applied).
pub fn write_file_atomically(path: &Path, write: impl FnOnce(&fs::File) -> std::io::Result<()>) -> Result<(), String> {
    use std::os::unix::fs::PermissionsExt;
    let folder = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    let name = path.file_name().map(|n| n.to_string_lossy().to_string()).unwrap_or_default();
    let partial = tempfile::Builder::new()
        .prefix(&format!(".{name}.partial-"))
        .permissions(fs::Permissions::from_mode(0o666))
        .tempfile_in(folder)
        .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    write(partial.as_file()).map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    partial.persist(path).map_err(|e| format!("cannot write {}: {}", path.display(), e.error))?;
    Ok(())
}

pub use cosched_lab::csv::{csv_field, num, push_row};

/// A regular file of at most `max_bytes`, refused before it is read whole (a result file, a machine file,
/// perhaps another user's).
pub fn read_bounded(path: &Path, max_bytes: u64) -> Result<String, String> {
    use std::io::Read;
    use std::os::unix::fs::OpenOptionsExt;
    // Not blocking in open: a FIFO in the file's place would wait for a writer forever.
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(nix::fcntl::OFlag::O_NONBLOCK.bits())
        .open(path)
        .map_err(|e| format!("reading {}: {e}", path.display()))?;
    if !file.metadata().is_ok_and(|m| m.is_file()) {
        return Err(format!("{} is not a regular file", path.display()));
    }
    let mut text = String::new();
    file.take(max_bytes + 1).read_to_string(&mut text).map_err(|e| format!("reading {}: {e}", path.display()))?;
    if text.len() as u64 > max_bytes {
        return Err(format!("{} is larger than {max_bytes} bytes", path.display()));
    }
    Ok(text)
}
