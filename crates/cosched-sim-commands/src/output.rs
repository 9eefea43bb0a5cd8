//! Writing result files all-or-nothing: everything goes to a scratch folder
//! beside the destination, which replaces the destination only when complete.
//! A failed run therefore leaves no partial output behind (an interrupted
//! study writes its finished runs' files on purpose, marked partial).
//!
//! The destination's folder may be shared (a project folder, /tmp) or belong to someone else, who could rename
//! and link names in it while a run goes on. So the destination's folder is opened once, and every later step —
//! the scratch folder, the files in it, the swap, the removal of the old output — goes relative to that open
//! folder and never follows a link. The scratch folder is made 0700 (nobody else may add or change a name in it)
//! and given the usual mode only at the swap; what is removed is first checked to be the cosched output that was
//! checked, by its inode.

use std::ffi::{OsStr, OsString};
use std::fs;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};

use rustix::fs::{fstat, mkdirat, openat, renameat, renameat_with, statat, unlinkat, AtFlags, FileType};
use rustix::fs::{Mode, OFlags, RenameFlags, Stat, CWD};
use rustix::io::Errno;

/// Marker naming a folder as cosched output, so it may be replaced.
const MARKER: &str = ".cosched-output";

/// Folders nested deeper than this in an old output folder are not removed (cosched writes two levels).
const MAX_REMOVE_DEPTH: usize = 32;

/// What [`OutputDir::check`] found at the destination, looked for again at the swap: the output replaces only
/// what was checked (a destination absent then must still be absent; a folder must be the same folder, by inode).
#[derive(Clone, Debug)]
pub struct CheckedOut {
    path: PathBuf,
    found: Option<Identity>,
}

impl std::ops::Deref for CheckedOut {
    type Target = Path;
    fn deref(&self) -> &Path {
        &self.path
    }
}

/// A file's device and inode.
type Identity = (u64, u64);

fn identity(stat: &Stat) -> Identity {
    (stat.st_dev, stat.st_ino)
}

pub struct OutputDir {
    final_path: PathBuf,
    final_name: OsString,
    /// What the destination was when checked.
    found: Option<Identity>,
    /// The destination's folder, opened once.
    parent: OwnedFd,
    scratch_name: OsString,
    scratch: OwnedFd,
    committed: bool,
}

impl OutputDir {
    /// Check that `path` can be (re)written, before any work is done: absent, or a folder of this user's (not a
    /// link, not a mount point) that is empty or holds cosched's output. What was found is looked for again at
    /// the swap.
    pub fn check(path: &Path) -> Result<CheckedOut, String> {
        let refuse = |why: &str| Err(format!("--out {}: {why}", path.display()));
        let Some(name) = destination_name(path) else {
            return refuse("name a folder to write, not `.`, `..` or `/`");
        };
        let parent = match open_parent(&parent_of(path)) {
            Ok(parent) => parent,
            Err(Errno::NOENT) => return Ok(CheckedOut { path: path.to_path_buf(), found: None }),
            Err(e) => return refuse(&format!("its folder: {e}")),
        };
        match destination_state(parent.as_fd(), &name) {
            Ok(found) => Ok(CheckedOut { path: path.to_path_buf(), found }),
            Err(why) => refuse(&why),
        }
    }

    /// Make the scratch folder beside the destination `checked` names. The destination itself is checked
    /// again only at the swap, which keeps the results if it changed.
    pub fn begin(checked: &CheckedOut) -> Result<OutputDir, String> {
        let path = &checked.path;
        let final_name =
            destination_name(path).ok_or_else(|| format!("--out {}: not a folder name", path.display()))?;
        let parent_path = parent_of(path);
        fs::create_dir_all(&parent_path).map_err(|e| format!("cannot create {}: {e}", parent_path.display()))?;
        let parent = open_parent(&parent_path).map_err(|e| format!("cannot open {}: {e}", parent_path.display()))?;
        let mut prefix = OsString::from(".");
        prefix.push(&final_name);
        prefix.push(".partial-");
        let (scratch_name, scratch) = make_private_dir(parent.as_fd(), &prefix)
            .map_err(|e| format!("cannot create a scratch folder in {}: {e}", parent_path.display()))?;
        let dir = OutputDir {
            final_path: path.to_path_buf(),
            final_name,
            found: checked.found,
            parent,
            scratch_name,
            scratch,
            committed: false,
        };
        dir.write(MARKER, "written by cosched\n")?;
        Ok(dir)
    }

    /// Create (or truncate) the file `name`, a path inside the folder; its subfolders are made as needed.
    pub fn create(&self, name: &str) -> Result<fs::File, String> {
        let failed = |e: Errno| format!("cannot write {name}: {e}");
        let parts = relative_parts(name).ok_or_else(|| format!("cannot write {name}: not a plain relative path"))?;
        let (file_name, folders) = parts.split_last().ok_or_else(|| format!("cannot write {name}: no file name"))?;
        let mut folder: Option<OwnedFd> = None;
        for part in folders {
            let at = folder.as_ref().map_or(self.scratch.as_fd(), |f| f.as_fd());
            match mkdirat(at, *part, Mode::from_bits_truncate(0o777)) {
                Ok(()) | Err(Errno::EXIST) => {}
                Err(e) => return Err(failed(e)),
            }
            folder = Some(open_dir(at, part).map_err(failed)?);
        }
        let at = folder.as_ref().map_or(self.scratch.as_fd(), |f| f.as_fd());
        let flags = OFlags::WRONLY | OFlags::CREATE | OFlags::TRUNC | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        Ok(fs::File::from(openat(at, *file_name, flags, Mode::from_bits_truncate(0o666)).map_err(failed)?))
    }

    /// Write `name`, a path inside the folder (its subfolders are made as needed).
    pub fn write(&self, name: &str, contents: &str) -> Result<(), String> {
        self.write_bytes(name, contents.as_bytes())
    }

    pub fn write_bytes(&self, name: &str, contents: &[u8]) -> Result<(), String> {
        use std::io::Write;
        self.create(name)?.write_all(contents).map_err(|e| format!("cannot write {name}: {e}"))
    }

    /// Put the finished folder in place of the destination. The two are swapped in one step where the file
    /// system can (the destination is never absent); elsewhere the old one is first moved aside whole. Either
    /// way a kill half-way leaves the destination whole, old or new, or absent, never half-deleted. The old
    /// folder is then removed, once found to be the cosched output that was checked; a failure there only warns.
    pub fn commit(mut self) -> Result<PathBuf, String> {
        let old = match self.put_in_place() {
            Ok(old) => old,
            Err(e) => {
                // Kept, not removed: a long run's results must not be lost to a folder that changed meanwhile.
                self.committed = true;
                return Err(format!(
                    "cannot replace {}: {}; the results are kept in {}",
                    self.final_path.display(),
                    describe(e),
                    self.scratch_whereabouts()
                ));
            }
        };
        self.committed = true;
        if !self.scratch_is_named(&self.final_name) {
            eprintln!(
                "warning: someone else renamed names in {} during the swap: {} may not hold these results",
                parent_of(&self.final_path).display(),
                self.final_path.display()
            );
        }
        if let Some(name) = old {
            if let Err(e) = remove_checked(self.parent.as_fd(), &name, self.found) {
                eprintln!(
                    "warning: the results are in {}, but the old folder moved aside as {} was not removed: {}",
                    self.final_path.display(),
                    parent_of(&self.final_path).join(&name).display(),
                    describe(e)
                );
            }
        }
        Ok(self.final_path.clone())
    }

    /// Swap the scratch folder in; returns where the old output now lies, if there was one.
    fn put_in_place(&self) -> Result<Option<OsString>, Errno> {
        // The name must still be the scratch folder's: someone who may rename in the destination's folder could
        // have put a link or their own folder there, which would then take the destination's name.
        if !self.scratch_is_named(&self.scratch_name) {
            return Err(Errno::STALE);
        }
        let ours = fstat(&self.scratch)?;
        let setgid = ours.st_mode & 0o2000;
        rustix::fs::fchmod(&self.scratch, Mode::from_bits_truncate((0o777 & !process_umask()) | setgid))?;
        let parent = &self.parent;
        match self.found {
            None => match renameat_with(parent, &self.scratch_name, parent, &self.final_name, RenameFlags::NOREPLACE) {
                Ok(()) => Ok(None),
                Err(Errno::EXIST) => Err(Errno::EXIST),
                Err(Errno::INVAL | Errno::NOSYS) => self.rename_onto_absent().map(|()| None),
                Err(e) => Err(e),
            },
            Some(_) => {
                self.check_destination_again()?;
                match renameat_with(parent, &self.scratch_name, parent, &self.final_name, RenameFlags::EXCHANGE) {
                    Ok(()) => Ok(Some(self.scratch_name.clone())),
                    Err(Errno::INVAL | Errno::NOSYS) => self.move_aside_then_rename().map(Some),
                    Err(e) => Err(e),
                }
            }
        }
    }

    /// A file system without rename flags (NFS, for one), the destination absent when checked: it must still be.
    fn rename_onto_absent(&self) -> Result<(), Errno> {
        match statat(&self.parent, &self.final_name, AtFlags::SYMLINK_NOFOLLOW) {
            // A plain rename replaces at most an empty folder made meanwhile.
            Err(Errno::NOENT) => renameat(&self.parent, &self.scratch_name, &self.parent, &self.final_name),
            Ok(_) => Err(Errno::EXIST),
            Err(e) => Err(e),
        }
    }

    /// Move the old output onto a fresh empty folder (a folder may be renamed over an empty one), then the
    /// scratch folder into its place; on failure the old one goes back.
    fn move_aside_then_rename(&self) -> Result<OsString, Errno> {
        let mut prefix = OsString::from(".");
        prefix.push(&self.final_name);
        prefix.push(".replaced-");
        let (aside, _) = make_private_dir(self.parent.as_fd(), &prefix)?;
        let parent = &self.parent;
        if let Err(e) = renameat(parent, &self.final_name, parent, &aside) {
            let _ = unlinkat(parent, &aside, AtFlags::REMOVEDIR);
            return Err(e);
        }
        if let Err(e) = renameat(parent, &self.scratch_name, parent, &self.final_name) {
            let _ = renameat(parent, &aside, parent, &self.final_name);
            return Err(e);
        }
        Ok(aside)
    }

    /// The destination as it is now must be the folder checked before the run, still fit to replace.
    fn check_destination_again(&self) -> Result<(), Errno> {
        let dir = open_dir(&self.parent, &self.final_name)?;
        let stat = fstat(&dir)?;
        if Some(identity(&stat)) != self.found {
            return Err(Errno::STALE);
        }
        if stat.st_uid != rustix::process::geteuid().as_raw() || !replaceable(dir.as_fd())? {
            return Err(Errno::NOTEMPTY);
        }
        Ok(())
    }

    /// Whether `name` in the destination's folder is the scratch folder.
    fn scratch_is_named(&self, name: &OsStr) -> bool {
        let (Ok(ours), Ok(named)) = (fstat(&self.scratch), statat(&self.parent, name, AtFlags::SYMLINK_NOFOLLOW))
        else {
            return false;
        };
        identity(&ours) == identity(&named)
    }

    /// Where the scratch folder is now, for a message: looked up by inode, as someone may have renamed it.
    fn scratch_whereabouts(&self) -> String {
        let folder = parent_of(&self.final_path);
        let ours = fstat(&self.scratch).map(|s| identity(&s));
        let names = entries(self.parent.as_fd()).unwrap_or_default();
        let found = names
            .into_iter()
            .find(|name| statat(&self.parent, name, AtFlags::SYMLINK_NOFOLLOW).is_ok_and(|s| Ok(identity(&s)) == ours));
        match found {
            Some(name) => folder.join(name).display().to_string(),
            None => format!("a folder renamed away from {} by someone else", folder.display()),
        }
    }
}

impl Drop for OutputDir {
    fn drop(&mut self) {
        // Not committed (an error on the way): leave nothing behind.
        if !self.committed {
            if let Ok(made) = fstat(&self.scratch) {
                let _ = remove_checked(self.parent.as_fd(), &self.scratch_name, Some(identity(&made)));
            }
        }
    }
}

/// Why a commit failed, in words: the checks' own errors say what someone changed.
fn describe(e: Errno) -> String {
    match e {
        Errno::STALE => "someone else renamed the scratch folder or the destination meanwhile".into(),
        Errno::EXIST => "someone made it meanwhile".into(),
        Errno::NOTEMPTY => "it is not this user's, or now holds files that cosched did not write".into(),
        Errno::LOOP | Errno::NOTDIR => "it is now a link or not a folder".into(),
        e => e.to_string(),
    }
}

/// The destination's own name: its last component, when that is a plain name.
fn destination_name(path: &Path) -> Option<OsString> {
    match path.components().next_back()? {
        Component::Normal(name) => Some(name.to_os_string()),
        _ => None,
    }
}

fn parent_of(path: &Path) -> PathBuf {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    }
}

/// The destination's folder, opened once; links on its way are followed (they are the path the user gave).
fn open_parent(path: &Path) -> Result<OwnedFd, Errno> {
    openat(CWD, path, OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC, Mode::empty())
}

/// The destination `name` in its opened folder: absent (`None`), or a folder fit to replace (its identity), or
/// why not.
fn destination_state(parent: BorrowedFd, name: &OsStr) -> Result<Option<Identity>, String> {
    let stat = match statat(parent, name, AtFlags::SYMLINK_NOFOLLOW) {
        Ok(stat) => stat,
        Err(Errno::NOENT) => return Ok(None),
        Err(e) => return Err(e.to_string()),
    };
    match FileType::from_raw_mode(stat.st_mode) {
        FileType::Symlink => {
            return Err("is a symbolic link; cosched replaces the folder itself, so give the folder it points to".into())
        }
        FileType::Directory => {}
        _ => return Err("exists and is not a folder".into()),
    }
    if stat.st_dev != fstat(parent).map_err(|e| e.to_string())?.st_dev {
        return Err("is a mount point; cosched replaces the folder whole, so choose a folder inside it".into());
    }
    if stat.st_uid != rustix::process::geteuid().as_raw() {
        return Err("belongs to another user; cosched replaces only a folder of its own user's".into());
    }
    let dir = open_dir(parent, name).map_err(|e| e.to_string())?;
    match replaceable(dir.as_fd()) {
        Ok(true) => Ok(Some(identity(&stat))),
        Ok(false) => Err("the folder holds files that cosched did not write; choose another folder".into()),
        Err(e) => Err(e.to_string()),
    }
}

/// The plain names of a relative path inside the output (no `..`, no root, no `.`).
fn relative_parts(name: &str) -> Option<Vec<&OsStr>> {
    Path::new(name)
        .components()
        .map(|c| match c {
            Component::Normal(part) => Some(part),
            _ => None,
        })
        .collect()
}

/// Open the folder `name` (relative to `at`), never through a link at its last step.
fn open_dir(at: impl AsFd, name: &OsStr) -> Result<OwnedFd, Errno> {
    openat(at, name, OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC, Mode::empty())
}

/// Make a new folder, mode 0700, with `prefix` and a random suffix in `parent`; returns its name and the open
/// folder, which is checked to be the one made (ours, not a name swapped in meanwhile).
fn make_private_dir(parent: BorrowedFd, prefix: &OsStr) -> Result<(OsString, OwnedFd), Errno> {
    use std::hash::{BuildHasher, Hasher};
    for attempt in 0u64..100 {
        let mut hasher = std::hash::RandomState::new().build_hasher();
        hasher.write_u64(attempt ^ u64::from(std::process::id()));
        let mut name = prefix.to_os_string();
        name.push(format!("{:016x}", hasher.finish()));
        match mkdirat(parent, &name, Mode::from_bits_truncate(0o700)) {
            Ok(()) => {}
            Err(Errno::EXIST) => continue,
            Err(e) => return Err(e),
        }
        let dir = open_dir(parent, &name)?;
        // The folder just made: ours, private, empty (not one of ours swapped in under its name meanwhile).
        let stat = fstat(&dir)?;
        let fresh = stat.st_uid == rustix::process::geteuid().as_raw() && stat.st_mode & 0o777 == 0o700;
        if !fresh || stat.st_nlink != 2 || !entries(dir.as_fd())?.is_empty() {
            return Err(Errno::STALE);
        }
        return Ok((name, dir));
    }
    Err(Errno::EXIST)
}

/// Whether the open folder is empty or holds the marker (a regular file, not a link).
fn replaceable(dir: BorrowedFd) -> Result<bool, Errno> {
    match statat(dir, MARKER, AtFlags::SYMLINK_NOFOLLOW) {
        Ok(stat) => return Ok(FileType::from_raw_mode(stat.st_mode) == FileType::RegularFile),
        Err(Errno::NOENT) => {}
        Err(e) => return Err(e),
    }
    Ok(entries(dir)?.is_empty())
}

/// The names in an open folder, but `.` and `..`.
fn entries(dir: BorrowedFd) -> Result<Vec<OsString>, Errno> {
    let mut names = Vec::new();
    for entry in rustix::fs::Dir::read_from(dir)? {
        let entry = entry?;
        let name = entry.file_name().to_bytes();
        if name != b"." && name != b".." {
            names.push(OsStr::from_bytes(name).to_os_string());
        }
    }
    Ok(names)
}

/// Remove the folder `name` in `parent` with what it holds, if it is still the folder `expected` (same device
/// and inode). Links in it are removed, never followed; only this user's entries are removed, and only this
/// user's folders on the same device entered, so nothing another user moved in is lost (the folder then stays).
fn remove_checked(parent: BorrowedFd, name: &OsStr, expected: Option<Identity>) -> Result<(), Errno> {
    let dir = open_dir(parent, name)?;
    let found = fstat(&dir)?;
    if Some(identity(&found)) != expected {
        return Err(Errno::STALE);
    }
    remove_own_contents(dir.as_fd(), found.st_dev, 0)?;
    unlinkat(parent, name, AtFlags::REMOVEDIR)
}

fn remove_own_contents(dir: BorrowedFd, device: u64, depth: usize) -> Result<(), Errno> {
    if depth > MAX_REMOVE_DEPTH {
        return Err(Errno::LOOP);
    }
    let me = rustix::process::geteuid().as_raw();
    for name in entries(dir)? {
        let stat = statat(dir, &name, AtFlags::SYMLINK_NOFOLLOW)?;
        if stat.st_uid != me {
            continue;
        }
        if FileType::from_raw_mode(stat.st_mode) == FileType::Directory {
            if stat.st_dev != device {
                continue;
            }
            remove_own_contents(open_dir(dir, &name)?.as_fd(), device, depth + 1)?;
            // Not empty: it holds another user's entries, which stay (and so does the folder above).
            match unlinkat(dir, &name, AtFlags::REMOVEDIR) {
                Ok(()) | Err(Errno::NOTEMPTY) => {}
                Err(e) => return Err(e),
            }
        } else {
            unlinkat(dir, &name, AtFlags::empty())?;
        }
    }
    Ok(())
}

/// The process's umask, read without changing it (setting it to read it would race with other threads).
fn process_umask() -> u32 {
    fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|status| {
            status
                .lines()
                .find_map(|line| line.strip_prefix("Umask:").and_then(|v| u32::from_str_radix(v.trim(), 8).ok()))
        })
        // Unknown: the narrowest.
        .unwrap_or(0o077)
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

#[cfg(test)]
mod tests {
    //! The output folder against someone who may rename and link names in the destination's folder between the
    //! run's start and its commit (the test plays them).
    use super::*;
    use std::os::unix::fs::{symlink, PermissionsExt};

    fn begin(path: &Path) -> OutputDir {
        OutputDir::begin(&OutputDir::check(path).unwrap()).unwrap()
    }

    fn names_in(folder: &Path) -> Vec<String> {
        let mut names: Vec<String> =
            fs::read_dir(folder).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
        names.sort();
        names
    }

    fn scratch_path(folder: &Path) -> PathBuf {
        let name = names_in(folder).into_iter().find(|n| n.contains(".partial-")).expect("a scratch folder");
        folder.join(name)
    }

    fn victim(folder: &Path) -> PathBuf {
        let victim = folder.join("victim");
        fs::create_dir(&victim).unwrap();
        fs::write(victim.join("precious"), "precious\n").unwrap();
        victim
    }

    #[test]
    fn a_new_folder_gets_the_files_the_marker_and_the_usual_mode_and_nothing_is_left_beside_it() {
        let folder = tempfile::tempdir().unwrap();
        let out = folder.path().join("out");
        let dir = begin(&out);
        let scratch = scratch_path(folder.path());
        assert_eq!(fs::metadata(&scratch).unwrap().permissions().mode() & 0o777, 0o700, "scratch not private");
        dir.write("a.csv", "x\n").unwrap();
        dir.write("batsim/jobs.csv", "y\n").unwrap();
        dir.commit().unwrap();
        assert_eq!(fs::read_to_string(out.join("a.csv")).unwrap(), "x\n");
        assert_eq!(fs::read_to_string(out.join("batsim/jobs.csv")).unwrap(), "y\n");
        assert!(out.join(MARKER).is_file());
        let mode = fs::metadata(&out).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o777 & !process_umask(), "folder mode {mode:o}");
        assert_eq!(names_in(folder.path()), ["out"]);
    }

    #[test]
    fn an_old_output_is_replaced_whole_and_nothing_is_left_beside_it() {
        let folder = tempfile::tempdir().unwrap();
        let out = folder.path().join("out");
        let first = begin(&out);
        first.write("old.csv", "old\n").unwrap();
        first.write("sub/old.csv", "old\n").unwrap();
        first.commit().unwrap();
        let second = begin(&out);
        second.write("new.csv", "new\n").unwrap();
        second.commit().unwrap();
        assert_eq!(names_in(&out), [MARKER, "new.csv"]);
        assert_eq!(names_in(folder.path()), ["out"]);
    }

    #[test]
    fn an_unfinished_run_leaves_nothing() {
        let folder = tempfile::tempdir().unwrap();
        let dir = begin(&folder.path().join("out"));
        dir.write("a.csv", "x\n").unwrap();
        drop(dir);
        assert!(names_in(folder.path()).is_empty());
    }

    #[test]
    fn check_refuses_links_files_foreign_folders_and_names_that_are_not_a_folder() {
        let folder = tempfile::tempdir().unwrap();
        let empty = folder.path().join("empty");
        fs::create_dir(&empty).unwrap();
        let link = folder.path().join("link");
        symlink(&empty, &link).unwrap();
        let file = folder.path().join("file");
        fs::write(&file, "").unwrap();
        let foreign = victim(folder.path());
        let linked_marker = folder.path().join("linked-marker");
        fs::create_dir(&linked_marker).unwrap();
        symlink(foreign.join("precious"), linked_marker.join(MARKER)).unwrap();
        for (path, why) in [
            (link.join(""), "symbolic link"),
            (link, "symbolic link"),
            (file, "not a folder"),
            (foreign, "did not write"),
            (linked_marker, "did not write"),
            (PathBuf::from("."), "name a folder"),
            (PathBuf::from(".."), "name a folder"),
            (folder.path().join(".."), "name a folder"),
            (PathBuf::from("/"), "name a folder"),
        ] {
            let err = OutputDir::check(&path).expect_err(&path.display().to_string());
            assert!(err.contains(why), "{}: {err}", path.display());
        }
        assert!(OutputDir::check(&empty).is_ok());
        assert_eq!(
            names_in(folder.path()),
            ["empty", "file", "link", "linked-marker", "victim"],
            "begin made something"
        );
    }

    #[test]
    fn names_inside_the_output_cannot_leave_it() {
        let folder = tempfile::tempdir().unwrap();
        let dir = begin(&folder.path().join("out"));
        for name in ["../escaped", "/tmp/escaped", "a/../../escaped", "", "."] {
            assert!(dir.write(name, "x").is_err(), "{name:?} was written");
        }
        assert!(!folder.path().join("escaped").exists());
    }

    #[test]
    fn a_destination_swapped_for_a_link_meanwhile_is_not_replaced_and_the_results_are_kept() {
        let folder = tempfile::tempdir().unwrap();
        let out = folder.path().join("out");
        fs::create_dir(&out).unwrap();
        let victim = victim(folder.path());
        let dir = begin(&out);
        dir.write("a.csv", "x\n").unwrap();
        fs::remove_dir(&out).unwrap();
        symlink(&victim, &out).unwrap();
        let err = dir.commit().expect_err("committed over a link");
        assert!(err.contains("a link or not a folder") && err.contains("the results are kept in"), "{err}");
        assert_eq!(fs::read_to_string(victim.join("precious")).unwrap(), "precious\n");
        assert!(fs::symlink_metadata(&out).unwrap().file_type().is_symlink());
        assert_eq!(fs::read_to_string(scratch_path(folder.path()).join("a.csv")).unwrap(), "x\n");
    }

    #[test]
    fn a_foreign_folder_swapped_in_for_the_destination_meanwhile_is_never_removed() {
        let folder = tempfile::tempdir().unwrap();
        let out = folder.path().join("out");
        begin(&out).commit().unwrap();
        let dir = begin(&out);
        fs::remove_dir_all(&out).unwrap();
        fs::rename(victim(folder.path()), &out).unwrap();
        // (Refused by its inode, or, where the file system gave the freed inode to the new folder, by its files.)
        let err = dir.commit().expect_err("replaced a foreign folder");
        assert!(err.contains("the results are kept in"), "{err}");
        assert_eq!(fs::read_to_string(out.join("precious")).unwrap(), "precious\n");
    }

    #[test]
    fn links_inside_an_old_output_are_removed_not_followed() {
        let folder = tempfile::tempdir().unwrap();
        let out = folder.path().join("out");
        begin(&out).commit().unwrap();
        let victim = victim(folder.path());
        symlink(&victim, out.join("to-folder")).unwrap();
        symlink(victim.join("precious"), out.join("to-file")).unwrap();
        begin(&out).commit().unwrap();
        assert_eq!(names_in(&out), [MARKER]);
        assert_eq!(fs::read_to_string(victim.join("precious")).unwrap(), "precious\n");
    }

    #[test]
    fn a_folder_swapped_in_for_the_scratch_of_an_unfinished_run_is_not_removed() {
        let folder = tempfile::tempdir().unwrap();
        let dir = begin(&folder.path().join("out"));
        let scratch = scratch_path(folder.path());
        fs::rename(&scratch, folder.path().join("moved")).unwrap();
        fs::rename(victim(folder.path()), &scratch).unwrap();
        drop(dir);
        assert_eq!(fs::read_to_string(scratch.join("precious")).unwrap(), "precious\n");
    }

    #[test]
    fn files_are_written_into_the_scratch_folder_even_if_its_name_is_taken_meanwhile() {
        let folder = tempfile::tempdir().unwrap();
        let dir = begin(&folder.path().join("out"));
        let scratch = scratch_path(folder.path());
        let moved = folder.path().join("moved");
        fs::rename(&scratch, &moved).unwrap();
        let victim = victim(folder.path());
        symlink(&victim, &scratch).unwrap();
        dir.write("precious", "overwritten\n").unwrap();
        assert_eq!(fs::read_to_string(victim.join("precious")).unwrap(), "precious\n");
        assert_eq!(fs::read_to_string(moved.join("precious")).unwrap(), "overwritten\n");
        let err = dir.commit().expect_err("renamed a link into place");
        assert!(err.contains("renamed the scratch folder"), "{err}");
        assert!(!folder.path().join("out").exists());
    }

    /// The path for file systems without rename flags (NFS): the old output moved aside, then removed.
    #[test]
    fn without_rename_flags_an_old_output_is_moved_aside_then_removed() {
        let folder = tempfile::tempdir().unwrap();
        let out = folder.path().join("out");
        for round in ["first", "second"] {
            let mut dir = begin(&out);
            dir.write("round", round).unwrap();
            if dir.found.is_none() {
                dir.rename_onto_absent().unwrap();
            } else {
                dir.check_destination_again().unwrap();
                let name = dir.move_aside_then_rename().unwrap();
                assert!(name.to_string_lossy().contains(".replaced-"));
                remove_checked(dir.parent.as_fd(), &name, dir.found).unwrap();
            }
            dir.committed = true;
            assert_eq!(fs::read_to_string(out.join("round")).unwrap(), round);
            assert_eq!(names_in(folder.path()), ["out"]);
        }
    }

    #[test]
    fn a_mount_point_is_refused() {
        if !rustix::process::geteuid().is_root() {
            eprintln!("SKIPPED a_mount_point_is_refused: mounting needs root");
            return;
        }
        let folder = tempfile::tempdir().unwrap();
        let mount = folder.path().join("mounted");
        fs::create_dir(&mount).unwrap();
        let status =
            std::process::Command::new("mount").args(["-t", "tmpfs", "cosched-test", mount.to_str().unwrap()]).status();
        if !status.is_ok_and(|s| s.success()) {
            panic!("cannot mount a tmpfs as root: the check of mount points is untested");
        }
        let checked = OutputDir::check(&mount);
        let _ = std::process::Command::new("umount").arg(&mount).status();
        assert!(checked.expect_err("a mount point was taken").contains("mount point"));
    }

    #[test]
    fn a_destination_made_meanwhile_is_not_replaced_even_if_it_looks_like_cosched_output() {
        let folder = tempfile::tempdir().unwrap();
        let out = folder.path().join("out");
        let dir = begin(&out);
        dir.write("new", "new\n").unwrap();
        let other = begin(&folder.path().join("elsewhere"));
        other.write("precious", "precious\n").unwrap();
        other.commit().unwrap();
        fs::rename(folder.path().join("elsewhere"), &out).unwrap();
        let err = dir.commit().expect_err("replaced a folder made meanwhile");
        assert!(err.contains("someone made it meanwhile"), "{err}");
        assert_eq!(fs::read_to_string(out.join("precious")).unwrap(), "precious\n");
    }

    /// The other user renames one of the victim's earlier outputs onto the destination's name: replaced, its
    /// files would go, though the other user could not remove them.
    #[test]
    fn another_output_renamed_onto_the_destination_meanwhile_is_not_removed() {
        let folder = tempfile::tempdir().unwrap();
        let (run1, run2) = (folder.path().join("run1"), folder.path().join("run2"));
        let first = begin(&run1);
        first.write("precious", "precious\n").unwrap();
        first.commit().unwrap();
        begin(&run2).commit().unwrap();
        let dir = begin(&run2);
        fs::remove_dir_all(&run2).unwrap();
        fs::rename(&run1, &run2).unwrap();
        assert!(dir.commit().is_err());
        assert_eq!(fs::read_to_string(run2.join("precious")).unwrap(), "precious\n");
    }

    #[test]
    fn begin_takes_a_destination_changed_since_the_check_and_the_commit_keeps_the_results() {
        let folder = tempfile::tempdir().unwrap();
        let out = folder.path().join("out");
        let checked = OutputDir::check(&out).unwrap();
        fs::create_dir(&out).unwrap();
        fs::write(out.join("theirs"), "").unwrap();
        let dir = OutputDir::begin(&checked).expect("begin refused after a long run");
        dir.write("a.csv", "x\n").unwrap();
        let err = dir.commit().expect_err("replaced a folder made meanwhile");
        let kept = scratch_path(folder.path());
        assert!(err.contains(&kept.display().to_string()), "{err}");
        assert_eq!(fs::read_to_string(kept.join("a.csv")).unwrap(), "x\n");
    }

    #[test]
    fn a_linked_folder_on_the_way_is_followed() {
        let folder = tempfile::tempdir().unwrap();
        fs::create_dir(folder.path().join("real")).unwrap();
        symlink(folder.path().join("real"), folder.path().join("link")).unwrap();
        let dir = begin(&folder.path().join("link/out"));
        dir.write("a.csv", "x\n").unwrap();
        dir.commit().unwrap();
        assert!(folder.path().join("real/out/a.csv").is_file());
    }

    #[test]
    fn the_folders_setgid_bit_is_kept() {
        let folder = tempfile::tempdir().unwrap();
        let shared = folder.path().join("shared");
        fs::create_dir(&shared).unwrap();
        fs::set_permissions(&shared, fs::Permissions::from_mode(0o2775)).unwrap();
        if fs::metadata(&shared).unwrap().permissions().mode() & 0o2000 == 0 {
            eprintln!("SKIPPED the_folders_setgid_bit_is_kept: this file system drops the setgid bit");
            return;
        }
        begin(&shared.join("out")).commit().unwrap();
        assert_ne!(fs::metadata(shared.join("out")).unwrap().permissions().mode() & 0o2000, 0);
    }

    /// Another user moves a folder of theirs into the victim's old output: replacing the output must not remove
    /// it (the victim's removal would reach what its owner's rules protect).
    #[test]
    fn another_users_entries_in_an_old_output_are_left() {
        if !rustix::process::geteuid().is_root() {
            eprintln!("SKIPPED another_users_entries_in_an_old_output_are_left: giving a file away needs root");
            return;
        }
        let folder = tempfile::tempdir().unwrap();
        let out = folder.path().join("out");
        begin(&out).commit().unwrap();
        fs::create_dir(out.join("theirs")).unwrap();
        fs::write(out.join("theirs/precious"), "precious\n").unwrap();
        let nobody = Some(rustix::process::Uid::from_raw(65534));
        for path in [out.join("theirs"), out.join("theirs/precious")] {
            rustix::fs::chown(&path, nobody, None).unwrap();
        }
        let dir = begin(&out);
        dir.write("new", "").unwrap();
        dir.commit().unwrap();
        assert_eq!(names_in(&out), [MARKER, "new"]);
        let aside = scratch_path(folder.path());
        assert_eq!(fs::read_to_string(aside.join("theirs/precious")).unwrap(), "precious\n");
    }
}
