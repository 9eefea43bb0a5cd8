//! What a command builds or runs from the file system (a Makefile, the
//! sources it builds, a program) must come from places no other user could
//! change. Run as root in another user's checkout, or from a shared folder,
//! a command would otherwise run that user's code as root.

use std::os::unix::fs::MetadataExt;
use std::path::Path;

/// Entries of a folder checked at most (a benchmark's sources hold a dozen).
const MAX_CHECKED_ENTRIES: usize = 10_000;

/// `path` and every folder above it root's or this user's and writable by
/// nobody else (links checked where they lie), and, for a folder,
/// everything in it the same and no link. `flag` names where the path came
/// from, in the error.
pub fn check_nobody_else_could_change(path: &Path, flag: &str) -> Result<(), String> {
    let meta = std::fs::symlink_metadata(path).map_err(|e| format!("{flag} {}: {e}", path.display()))?;
    let folder = if meta.is_dir() {
        path
    } else {
        path.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."))
    };
    cosched_runtime::private_dir::ensure(folder, flag).map_err(|e| e.to_string())?;
    let mut pending = vec![path.to_path_buf()];
    let mut checked = 0;
    while let Some(next) = pending.pop() {
        checked += 1;
        if checked > MAX_CHECKED_ENTRIES {
            return Err(format!("{flag} {}: more than {MAX_CHECKED_ENTRIES} entries", path.display()));
        }
        let meta = std::fs::symlink_metadata(&next).map_err(|e| format!("{}: {e}", next.display()))?;
        let ours = meta.uid() == 0 || meta.uid() == nix::unistd::geteuid().as_raw();
        if meta.file_type().is_symlink() || !ours || meta.mode() & 0o022 != 0 {
            return Err(format!(
                "{flag}: {} is a link, or another user's (uid {}), or writable by others (mode {:o}): root would run \
                 what they put there",
                next.display(),
                meta.uid(),
                meta.mode() & 0o7777
            ));
        }
        if meta.is_dir() {
            for entry in std::fs::read_dir(&next).map_err(|e| format!("{}: {e}", next.display()))? {
                pending.push(entry.map_err(|e| format!("{}: {e}", next.display()))?.path());
            }
        }
    }
    Ok(())
}
