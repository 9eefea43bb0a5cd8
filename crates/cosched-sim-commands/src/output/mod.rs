//! Writing result files: output folders all-or-nothing (`folder`), single files all-or-nothing, bounded reads.

mod folder;

pub use folder::{CheckedOut, OutputDir};

use cosched_files::LastLink;
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
/// perhaps another user's); never a device, FIFO or kernel file a link leads to (`cosched_files`).
pub fn read_bounded(path: &Path, max_bytes: u64) -> Result<String, String> {
    read_bounded_with(path, max_bytes, LastLink::Follow)
}

/// As [`read_bounded`], but never through a link at the last step (a file in a folder others may change).
pub fn read_bounded_no_link(path: &Path, max_bytes: u64) -> Result<String, String> {
    read_bounded_with(path, max_bytes, LastLink::Refuse)
}

fn read_bounded_with(path: &Path, max_bytes: u64, last_link: LastLink) -> Result<String, String> {
    let said = |e: std::io::Error| cosched_files::said(path, &e, last_link);
    let (file, _) = cosched_files::open_regular(path, last_link).map_err(said)?;
    cosched_files::read_text_bounded(file, max_bytes).map_err(said)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What `cosched_files` refuses is said with the path (its own tests hold the refusals).
    #[test]
    fn a_refused_read_names_the_path_and_why() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("file");
        fs::write(&file, "{}").unwrap();
        let link = dir.path().join("link");
        std::os::unix::fs::symlink(&file, &link).unwrap();
        assert_eq!(read_bounded(&link, 16).unwrap(), "{}");
        let said = read_bounded_no_link(&link, 16).unwrap_err();
        assert!(said.starts_with(&format!("{} is a symbolic link", link.display())), "{said}");
        assert_eq!(read_bounded(&file, 1).unwrap_err(), format!("{} is larger than 1 bytes", file.display()));
        assert_eq!(read_bounded(dir.path(), 1).unwrap_err(), format!("{} is not a regular file", dir.path().display()));
        fs::write(&file, [0xff, 0xfe]).unwrap();
        assert!(read_bounded(&file, 16).unwrap_err().contains("not UTF-8"));
    }
}
