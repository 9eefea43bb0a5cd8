//! Writing result files: output folders all-or-nothing (`folder`), single files all-or-nothing, bounded reads.

mod folder;

pub use folder::{CheckedOut, OutputDir};

use std::fs;
use std::path::Path;

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
    read_bounded_with(path, max_bytes, 0)
}

/// As [`read_bounded`], but never through a link at the last step (a file in a folder others may change).
pub fn read_bounded_no_link(path: &Path, max_bytes: u64) -> Result<String, String> {
    read_bounded_with(path, max_bytes, nix::fcntl::OFlag::O_NOFOLLOW.bits())
}

fn read_bounded_with(path: &Path, max_bytes: u64, extra_flags: i32) -> Result<String, String> {
    use std::io::Read;
    use std::os::unix::fs::OpenOptionsExt;
    // Not blocking in open: a FIFO in the file's place would wait for a writer forever; and never taking a
    // terminal as the controlling one.
    let flags = nix::fcntl::OFlag::O_NONBLOCK | nix::fcntl::OFlag::O_NOCTTY;
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(flags.bits() | extra_flags)
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
