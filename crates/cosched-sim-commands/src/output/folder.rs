//! Output folders written all-or-nothing: everything goes to a scratch folder beside the destination, which
//! replaces the destination only when complete. A failed run removes its scratch folder (one killed leaves it,
//! named `.NAME.partial-*`, private); an interrupted study writes its finished runs' files on purpose, marked
//! partial.
//!
//! The destination's folder may be shared (a project folder, /tmp) or belong to someone else, who could rename
//! and link names in it while a run goes on. So:
//!
//! - the check before the run makes and opens the destination's folder, and opens the destination if there is
//!   one (keeping it open pins its inode, so the same number cannot come back on another folder);
//! - every later step (the scratch folder, the files in it, the swap, the removal of the old output) goes
//!   relative to that open folder and never follows a link;
//! - the scratch folder is made 0700 without ACLs, so nobody else adds or changes a name in it; the folders and
//!   files of an output are never writable by group or others (umask applied on top), so nobody else can move
//!   anything into one later;
//! - the swap replaces only what the check found (nothing, or that same folder, still this user's output);
//! - the old output loses only what this user owns in folders nobody else can write: anything else stays.

use std::ffi::{OsStr, OsString};
use std::fs;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};

use rustix::fs::{fstat, mkdirat, openat, renameat, renameat_with, statat, unlinkat, AtFlags, FileType};
use rustix::fs::{Mode, OFlags, RenameFlags, Stat, CWD};
use rustix::io::Errno;

/// Marker naming a folder as cosched output, so it may be replaced.
const MARKER: &str = ".cosched-output";

/// Folders nested deeper than this in an old output folder are not removed (cosched writes two levels).
const MAX_REMOVE_DEPTH: usize = 32;

/// The widest modes of an output's folders and files: never writable by group or others (the umask narrows
/// them further).
const FOLDER_MODE: u32 = 0o755;
const FILE_MODE: u32 = 0o644;

/// What [`OutputDir::check`] found, kept open until the swap: the destination's folder (made if missing), and
/// the destination itself if it exists, which the output may then replace only if it is still that folder.
#[derive(Debug)]
pub struct CheckedOut {
    path: PathBuf,
    parent: OwnedFd,
    found: Option<Pinned>,
}

/// An open folder and its identity: while it is open, its inode number cannot be given to another.
#[derive(Debug)]
struct Pinned {
    _open: OwnedFd,
    identity: Identity,
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
    /// The destination's folder, opened at the check.
    parent: OwnedFd,
    /// What the destination was at the check (pinned).
    found: Option<Pinned>,
    scratch_name: OsString,
    scratch: OwnedFd,
    committed: bool,
}

/// Why the swap did not happen.
#[derive(Debug)]
enum Refusal {
    /// Someone changed a name meanwhile; what, in words.
    Changed(&'static str),
    Io(Errno),
}

impl From<Errno> for Refusal {
    fn from(e: Errno) -> Self {
        Refusal::Io(e)
    }
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Refusal::Changed(what) => f.write_str(what),
            Refusal::Io(e) => write!(f, "{e}"),
        }
    }
}

impl OutputDir {
    /// Check that `path` can be (re)written, before any work is done: absent, or a folder of this user's (not a
    /// link, not a mount point) that is empty or holds cosched's output. Its folder is made if missing and kept
    /// open with what was found, for [`OutputDir::begin`].
    pub fn check(path: &Path) -> Result<CheckedOut, String> {
        let refuse = |why: &str| format!("--out {}: {why}", path.display());
        let name = destination_name(path).ok_or_else(|| refuse("name a folder to write, not `.`, `..` or `/`"))?;
        let parent_path = parent_of(path);
        fs::create_dir_all(&parent_path).map_err(|e| refuse(&format!("cannot create its folder: {e}")))?;
        let parent = open_parent(&parent_path).map_err(|e| refuse(&format!("its folder: {e}")))?;
        let found = destination_state(parent.as_fd(), &name).map_err(|why| refuse(&why))?;
        // A scratch folder made and removed now: a folder where none can be made fails before the run, not after.
        let (trial, made) = make_private_dir(parent.as_fd(), OsStr::new(".cosched-trial-"))
            .map_err(|e| refuse(&format!("cannot make a scratch folder beside it: {}", scratch_failure(e))))?;
        let _ = remove_checked(parent.as_fd(), &trial, identity(&fstat(&made).map_err(|e| refuse(&e.to_string()))?));
        Ok(CheckedOut { path: path.to_path_buf(), parent, found })
    }

    /// Make the scratch folder beside the destination `checked` names. The destination itself is checked
    /// again only at the swap, which keeps the results if it changed.
    pub fn begin(checked: &CheckedOut) -> Result<OutputDir, String> {
        let path = &checked.path;
        let failed =
            |e: Errno| format!("cannot create a scratch folder beside {}: {}", path.display(), scratch_failure(e));
        let final_name =
            destination_name(path).ok_or_else(|| format!("--out {}: not a folder name", path.display()))?;
        let parent = checked.parent.try_clone().map_err(|e| failed(io_errno(&e)))?;
        let found = match &checked.found {
            Some(pinned) => {
                Some(Pinned { _open: pinned._open.try_clone().map_err(|e| failed(io_errno(&e)))?, ..*pinned })
            }
            None => None,
        };
        let (scratch_name, scratch) =
            make_private_dir(parent.as_fd(), &side_prefix(&final_name, "partial")).map_err(failed)?;
        let dir = OutputDir {
            final_path: path.to_path_buf(),
            final_name,
            parent,
            found,
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
            match mkdirat(at, *part, Mode::from_bits_truncate(FOLDER_MODE)) {
                Ok(()) | Err(Errno::EXIST) => {}
                Err(e) => return Err(failed(e)),
            }
            folder = Some(open_dir(at, part).map_err(failed)?);
        }
        let at = folder.as_ref().map_or(self.scratch.as_fd(), |f| f.as_fd());
        let flags = OFlags::WRONLY | OFlags::CREATE | OFlags::TRUNC | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        Ok(fs::File::from(openat(at, *file_name, flags, Mode::from_bits_truncate(FILE_MODE)).map_err(failed)?))
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
    /// folder is then removed as far as it is this user's; a failure there only warns. If anything changed
    /// meanwhile, the results stay in the scratch folder (private), and the error says where.
    pub fn commit(mut self) -> Result<PathBuf, String> {
        // Kept whatever happens now: a long run's results must not be lost to a folder that changed meanwhile.
        self.committed = true;
        let old = self.put_in_place().map_err(|why| {
            format!(
                "cannot replace {}: {why}; the results are kept in {}",
                self.final_path.display(),
                self.scratch_whereabouts()
            )
        })?;
        if !self.scratch_is_named(&self.final_name) {
            return Err(format!(
                "someone else renamed names in {} during the swap: {} does not hold these results, which are in {}",
                parent_of(&self.final_path).display(),
                self.final_path.display(),
                self.scratch_whereabouts()
            ));
        }
        let setgid = fstat(&self.scratch).map_or(0, |s| s.st_mode & 0o2000);
        let mode = Mode::from_bits_truncate((FOLDER_MODE & !process_umask()) | setgid);
        if let Err(e) = rustix::fs::fchmod(&self.scratch, mode) {
            eprintln!("warning: {} stays readable by its owner only: {e}", self.final_path.display());
        }
        if let (Some(name), Some(found)) = (old, &self.found) {
            let aside = parent_of(&self.final_path).join(&name);
            if let Err(e) = remove_checked(self.parent.as_fd(), &name, found.identity) {
                eprintln!(
                    "warning: the results are in {}; the folder they replaced, now {}, was not removed whole: {e}",
                    self.final_path.display(),
                    aside.display()
                );
            }
        }
        Ok(self.final_path.clone())
    }

    /// Swap the scratch folder in; returns the name the old output now has, if there was one.
    fn put_in_place(&self) -> Result<Option<OsString>, Refusal> {
        // The name must still be the scratch folder's: someone who may rename in the destination's folder could
        // have put a link or their own folder there, which would then take the destination's name.
        if !self.scratch_is_named(&self.scratch_name) {
            return Err(Refusal::Changed("someone else renamed the scratch folder meanwhile"));
        }
        let parent = &self.parent;
        if self.found.is_none() {
            return match renameat_with(parent, &self.scratch_name, parent, &self.final_name, RenameFlags::NOREPLACE) {
                Ok(()) => Ok(None),
                Err(Errno::EXIST) => Err(Refusal::Changed("someone made it meanwhile")),
                Err(Errno::INVAL | Errno::NOSYS) => self.rename_onto_absent().map(|()| None),
                Err(e) => Err(e.into()),
            };
        }
        self.check_destination_again()?;
        match renameat_with(parent, &self.scratch_name, parent, &self.final_name, RenameFlags::EXCHANGE) {
            Ok(()) => Ok(Some(self.scratch_name.clone())),
            Err(Errno::INVAL | Errno::NOSYS) => self.move_aside_then_rename().map(Some),
            Err(e) => Err(e.into()),
        }
    }

    /// A file system without rename flags (NFS, for one), the destination absent when checked: it must still be.
    /// (A plain rename could still replace an empty folder made between the two steps.)
    fn rename_onto_absent(&self) -> Result<(), Refusal> {
        match statat(&self.parent, &self.final_name, AtFlags::SYMLINK_NOFOLLOW) {
            Err(Errno::NOENT) => Ok(renameat(&self.parent, &self.scratch_name, &self.parent, &self.final_name)?),
            Ok(_) => Err(Refusal::Changed("someone made it meanwhile")),
            Err(e) => Err(e.into()),
        }
    }

    /// Move the old output onto a fresh empty folder (a folder may be renamed over an empty one), then the
    /// scratch folder into its place; on failure the old one goes back.
    fn move_aside_then_rename(&self) -> Result<OsString, Refusal> {
        let (aside, _) = make_private_dir(self.parent.as_fd(), &side_prefix(&self.final_name, "replaced"))?;
        let parent = &self.parent;
        if let Err(e) = renameat(parent, &self.final_name, parent, &aside) {
            let _ = unlinkat(parent, &aside, AtFlags::REMOVEDIR);
            return Err(e.into());
        }
        if let Err(e) = renameat(parent, &self.scratch_name, parent, &self.final_name) {
            if renameat(parent, &aside, parent, &self.final_name).is_err() {
                eprintln!("warning: the old output is now {}", parent_of(&self.final_path).join(&aside).display());
            }
            return Err(e.into());
        }
        Ok(aside)
    }

    /// The destination as it is now must be the folder checked before the run (its inode pinned since), still
    /// this user's and fit to replace.
    fn check_destination_again(&self) -> Result<(), Refusal> {
        let changed = Refusal::Changed("someone else replaced it meanwhile");
        let dir = match open_dir(&self.parent, &self.final_name) {
            Ok(dir) => dir,
            Err(Errno::NOENT | Errno::LOOP | Errno::NOTDIR) => return Err(changed),
            Err(e) => return Err(e.into()),
        };
        let stat = fstat(&dir)?;
        if self.found.as_ref().map(|f| f.identity) != Some(identity(&stat)) {
            return Err(changed);
        }
        if stat.st_uid != my_uid() || !replaceable(dir.as_fd())? {
            return Err(Refusal::Changed("it now holds files that cosched did not write"));
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

    /// Where the scratch folder is now, for a message (someone may have renamed it): the kernel's name for it.
    fn scratch_whereabouts(&self) -> String {
        match fs::read_link(format!("/proc/self/fd/{}", self.scratch.as_raw_fd())) {
            Ok(path) => path.display().to_string(),
            Err(_) => format!("a folder beside {} (its name unknown)", self.final_path.display()),
        }
    }
}

impl Drop for OutputDir {
    fn drop(&mut self) {
        // Not committed (an error on the way): leave nothing behind.
        if !self.committed {
            if let Ok(made) = fstat(&self.scratch) {
                let _ = remove_checked(self.parent.as_fd(), &self.scratch_name, identity(&made));
            }
        }
    }
}

fn my_uid() -> u32 {
    rustix::process::geteuid().as_raw()
}

fn io_errno(e: &std::io::Error) -> Errno {
    Errno::from_io_error(e).unwrap_or(Errno::IO)
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

/// The destination's folder; links on the way to it are followed (they are the path the user gave).
fn open_parent(path: &Path) -> Result<OwnedFd, Errno> {
    openat(CWD, path, OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC, Mode::empty())
}

/// The destination `name` in its opened folder: absent (`None`), or a folder fit to replace (open, pinned), or
/// why not.
fn destination_state(parent: BorrowedFd, name: &OsStr) -> Result<Option<Pinned>, String> {
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
    if stat.st_uid != my_uid() {
        return Err("belongs to another user; cosched replaces only a folder of its own user's".into());
    }
    let dir = open_dir(parent, name).map_err(|e| e.to_string())?;
    let opened = fstat(&dir).map_err(|e| e.to_string())?;
    if identity(&opened) != identity(&stat) {
        return Err("changed while it was checked; try again".into());
    }
    match replaceable(dir.as_fd()) {
        Ok(true) => Ok(Some(Pinned { _open: dir, identity: identity(&opened) })),
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

/// The hidden name prefix `.NAME.KIND-` of a folder kept beside the destination `NAME` (its scratch folder, an
/// old output moved aside).
fn side_prefix(final_name: &OsStr, kind: &str) -> OsString {
    let mut prefix = OsString::from(".");
    prefix.push(final_name);
    prefix.push(format!(".{kind}-"));
    prefix
}

/// Make a new folder, mode 0700 and without ACLs, with `prefix` and a random suffix in `parent`; returns its
/// name and the open folder, checked to be the one made (this user's, 0700, empty), else another name is tried.
fn make_private_dir(parent: BorrowedFd, prefix: &OsStr) -> Result<(OsString, OwnedFd), Errno> {
    use std::hash::{BuildHasher, Hasher};
    let mut last = Errno::EXIST;
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
        // Taken or changed between the two steps: another name (what is there now is not ours to remove).
        let Ok(dir) = open_dir(parent, &name) else {
            last = Errno::STALE;
            continue;
        };
        if !entries(dir.as_fd())?.is_empty() {
            last = Errno::STALE;
            continue;
        }
        // Some file systems give a new folder a mode or an owner of their own (CIFS, vfat, NFS squashing).
        let mut stat = fstat(&dir)?;
        if stat.st_mode & 0o777 != 0o700 {
            let _ = rustix::fs::fchmod(&dir, Mode::from_bits_truncate(0o700));
            stat = fstat(&dir)?;
        }
        if stat.st_uid != my_uid() || stat.st_mode & 0o777 != 0o700 {
            let _ = remove_checked(parent, &name, identity(&stat));
            return Err(Errno::NOTSUP);
        }
        drop_acls(dir.as_fd());
        return Ok((name, dir));
    }
    Err(last)
}

/// Why a scratch folder could not be made, in words.
fn scratch_failure(e: Errno) -> String {
    match e {
        Errno::NOTSUP => "this file system does not keep the owner and mode (0700) a new folder is made with, which \
                          keeps the results private until they are complete; choose a folder on another file system"
            .into(),
        e => e.to_string(),
    }
}

/// Remove the folder's ACLs: a default ACL inherited from the destination's folder (perhaps another user's)
/// would give them access to the output whatever its mode.
fn drop_acls(dir: BorrowedFd) {
    for name in ["system.posix_acl_default", "system.posix_acl_access"] {
        let _ = rustix::fs::fremovexattr(dir, name);
    }
}

/// Whether the open folder is empty or holds the marker (a regular file of this user's, not a link).
fn replaceable(dir: BorrowedFd) -> Result<bool, Errno> {
    match statat(dir, MARKER, AtFlags::SYMLINK_NOFOLLOW) {
        Ok(stat) => {
            return Ok(FileType::from_raw_mode(stat.st_mode) == FileType::RegularFile && stat.st_uid == my_uid())
        }
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

/// Remove the folder `name` in `parent` with what it holds, if it is still the folder `expected`. Only what
/// could be cosched's goes: this user's entries, in folders on the same device that nobody else may write (as
/// cosched makes them); links are removed, never followed. Anything else stays, and so do its folders.
fn remove_checked(parent: BorrowedFd, name: &OsStr, expected: Identity) -> Result<(), Errno> {
    let dir = open_dir(parent, name)?;
    let found = fstat(&dir)?;
    if identity(&found) != expected {
        return Err(Errno::STALE);
    }
    if !only_ours(&found) {
        return Err(Errno::ACCESS);
    }
    remove_own_contents(dir.as_fd(), found.st_dev, 0)?;
    unlinkat(parent, name, AtFlags::REMOVEDIR)
}

/// This user's, and writable by nobody else: nobody else can have put anything in it.
fn only_ours(stat: &Stat) -> bool {
    stat.st_uid == my_uid() && stat.st_mode & 0o022 == 0
}

fn remove_own_contents(dir: BorrowedFd, device: u64, depth: usize) -> Result<(), Errno> {
    if depth > MAX_REMOVE_DEPTH {
        return Err(Errno::LOOP);
    }
    for name in entries(dir)? {
        let stat = statat(dir, &name, AtFlags::SYMLINK_NOFOLLOW)?;
        if stat.st_uid != my_uid() {
            continue;
        }
        if FileType::from_raw_mode(stat.st_mode) != FileType::Directory {
            unlinkat(dir, &name, AtFlags::empty())?;
            continue;
        }
        let Ok(sub) = open_dir(dir, &name) else { continue };
        let opened = fstat(&sub)?;
        if identity(&opened) != identity(&stat) || opened.st_dev != device || !only_ours(&opened) {
            continue;
        }
        remove_own_contents(sub.as_fd(), device, depth + 1)?;
        // Not empty: it holds what stays, and so does the folder above.
        match unlinkat(dir, &name, AtFlags::REMOVEDIR) {
            Ok(()) | Err(Errno::NOTEMPTY) => {}
            Err(e) => return Err(e),
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

#[cfg(test)]
#[path = "folder_tests.rs"]
mod tests;
