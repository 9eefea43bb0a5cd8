//! Opening a file that root (or any process reading for another user) reads, when the path may lead anywhere a
//! user chose: through their links, to a device, a FIFO, or a "regular" file of the kernel's own file systems.
//!
//! Every check is made on the file itself, through a handle that opens nothing (`O_PATH`): opening a device a link
//! points to can act before any check (a watchdog arms, a tape rewinds), and a FIFO would block. Only a regular
//! file, outside the kernel's file systems, is then opened for reading, through that same handle, so nothing can be
//! swapped in between; never waiting, never as the controlling terminal. The caller checks owner and mode on the
//! metadata returned, which are the opened file's.

use std::fs::{File, Metadata, OpenOptions};
use std::io::{self, Read};
use std::os::fd::AsRawFd;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::Path;

/// Whether a link may stand at the path's last step.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LastLink {
    /// Followed, as the caller named it (a user's own file, read on their behalf).
    Follow,
    /// Refused with `ELOOP` (a file in a folder others may change, or whose folder is checked and not the link's
    /// target's).
    Refuse,
}

/// The regular file at `path`, opened for reading, and its metadata. A path that leads to anything else is refused
/// with [`io::ErrorKind::InvalidInput`] and a message saying what it is; a missing one gives `NotFound`; a link at
/// the last step where `last_link` refuses it gives the raw `ELOOP`.
pub fn open_regular(path: &Path, last_link: LastLink) -> io::Result<(File, Metadata)> {
    let handle = path_handle(path, last_link)?;
    // Found, so never NotFound from here on (a caller may take that for "no such file"), whatever a file system's
    // server answers to a stat.
    let meta = handle.metadata().map_err(|e| match e.kind() {
        io::ErrorKind::NotFound => io::Error::other(format!("found, then its metadata could not be read: {e}")),
        _ => e,
    })?;
    // With O_NOFOLLOW, O_PATH opens the link itself rather than failing.
    if meta.file_type().is_symlink() {
        return Err(io::Error::from_raw_os_error(nix::libc::ELOOP));
    }
    if !meta.is_file() {
        return Err(io::Error::new(io::ErrorKind::InvalidInput, "not a regular file"));
    }
    // A file no folder names (deleted, a memfd) is reachable only through another process's descriptor.
    if meta.nlink() == 0 {
        return Err(io::Error::new(io::ErrorKind::InvalidInput, "a file no folder names (deleted, or a memfd)"));
    }
    // The kernel's own file systems hold "regular" files whose reading acts or lies: /proc/kmsg drains the kernel
    // log, tracefs's trace_pipe consumes events, /proc/<pid>/environ of a process made undumpable shows as root's
    // with mode 0400 while its owner chose every byte.
    if let FileSystem::Kernel(kind) = file_system(&handle)? {
        let why = format!("on the kernel's {kind} file system, not a file to read");
        return Err(io::Error::new(io::ErrorKind::InvalidInput, why));
    }
    let flags = nix::fcntl::OFlag::O_NONBLOCK | nix::fcntl::OFlag::O_NOCTTY;
    // The thread's own table: /proc/self is the thread group leader's.
    let reopened = format!("/proc/thread-self/fd/{}", handle.as_raw_fd());
    // Never NotFound: a caller may take that for "no such file" (a configuration absent) when /proc is missing.
    let file = OpenOptions::new()
        .read(true)
        .custom_flags(flags.bits())
        .open(&reopened)
        .map_err(|e| io::Error::other(format!("reopening it through {reopened} (is /proc mounted?): {e}")))?;
    Ok((file, meta))
}

/// A handle that opens nothing (`O_PATH`) to what `path` names, never through one of /proc's links to another
/// process's open files (`/proc/<pid>/fd/N`, `/proc/<pid>/root`): through those, a user's link would reach files
/// only root's processes hold, deleted, never named, or in another mount namespace. Where `openat2` itself is
/// refused (kernels before 5.6; sandboxes whose system-call filter answers `EPERM` or `ENOSYS`, container profiles
/// older than the call), a walk a name at a time resolves it instead ([`walk_without_openat2`]). A filter answering
/// any other error refuses every read.
fn path_handle(path: &Path, last_link: LastLink) -> io::Result<File> {
    let flags = o_path_flags(last_link);
    path_handle_with(path, last_link, |path| openat2_path(path, flags))
}

/// [`path_handle`] with `openat2` given, so that a test can make it fail where a file system's server would.
fn path_handle_with(path: &Path, last_link: LastLink, openat2: impl Fn(&Path) -> Resolved) -> io::Result<File> {
    match openat2(path) {
        Ok(handle) => Ok(File::from(handle)),
        Err(errno) if openat2_refused(errno, || openat2(Path::new("/")).err()) => walk_without_openat2(path, last_link),
        Err(errno) => Err(io::Error::from(errno)),
    }
}

/// A handle that opens nothing (`O_PATH`), closed on exec, through a link at the last step or not.
fn o_path_flags(last_link: LastLink) -> rustix::fs::OFlags {
    let flags = rustix::fs::OFlags::PATH | rustix::fs::OFlags::CLOEXEC;
    match last_link {
        LastLink::Follow => flags,
        LastLink::Refuse => flags | rustix::fs::OFlags::NOFOLLOW,
    }
}

type Resolved = rustix::io::Result<std::os::fd::OwnedFd>;

fn openat2_path(path: &Path, flags: rustix::fs::OFlags) -> Resolved {
    let (cwd, no_magic) = (rustix::fs::CWD, rustix::fs::ResolveFlags::NO_MAGICLINKS);
    rustix::fs::openat2(cwd, path, flags, rustix::fs::Mode::empty(), no_magic)
}

/// Whether `path_error`, from `openat2` on a path, means the call itself is refused here, not that path: the same
/// call on "/" (`probe`) fails the same way. A file system's server (FUSE, NFS) chooses the errors of its own
/// lookups, and answering `EPERM` or `ENOSYS` must not buy it a resolution without the protection.
fn openat2_refused(path_error: rustix::io::Errno, probe: impl FnOnce() -> Option<rustix::io::Errno>) -> bool {
    use rustix::io::Errno;
    matches!(path_error, Errno::NOSYS | Errno::PERM) && probe() == Some(path_error)
}

/// The kernel's limit on links followed in one lookup (`MAXSYMLINKS`).
const MAX_LINKS: usize = 40;

/// `path` resolved one name at a time, each opened without following it, where `openat2` is refused. `open` never
/// runs on the path: it would cross /proc's links to other processes' open files and folders (what `openat2`'s
/// `RESOLVE_NO_MAGICLINKS` refuses) before anything could refuse them, into another mount namespace's mounts, a
/// stalled one included. Nor does the walk follow every link `open` would: only one the kernel's own rules could not
/// refuse, whatever their settings ([`why_not_follow`]); any other is refused with [`io::ErrorKind::InvalidInput`],
/// naming it. Like `open`, it refuses a path of `PATH_MAX` bytes or more, follows
/// at most 40 links, and opens a folder on the way as a folder (which mounts an automounted one). NotFound comes
/// only from a name's lookup, never from a file found.
fn walk_without_openat2(path: &Path, last_link: LastLink) -> io::Result<File> {
    use rustix::fs::{FileType, Mode};
    let bytes = path.as_os_str().as_encoded_bytes();
    if bytes.is_empty() {
        return Err(io::Error::from_raw_os_error(nix::libc::ENOENT));
    }
    if bytes.len() >= PATH_MAX_BYTES {
        return Err(io::Error::from_raw_os_error(nix::libc::ENAMETOOLONG));
    }
    let step = o_path_flags(LastLink::Refuse);
    let mut at = rustix::fs::openat(rustix::fs::CWD, if bytes[0] == b'/' { "/" } else { "." }, step, Mode::empty())?;
    let mut names_left = names_reversed(bytes);
    let mut links_followed = 0;
    while let Some(name) = names_left.pop() {
        let last = names_left.is_empty();
        let next = open_name(&at, &name, !last)?;
        let link = rustix::fs::fstat(&next).map_err(found)?;
        if FileType::from_raw_mode(link.st_mode) != FileType::Symlink || (last && last_link == LastLink::Refuse) {
            at = next;
            continue;
        }
        let folder = rustix::fs::fstat(&at).map_err(found)?;
        let target = rustix::fs::readlinkat(&next, "", Vec::new()).map_err(found)?;
        if let Some(why) = why_not_follow(&next, &folder, &link, nix::unistd::geteuid().as_raw())? {
            let (name, target) = (String::from_utf8_lossy(&name), target.to_string_lossy());
            let why = format!(
                "reached through the link {name} -> {target}, {why}: not followed where openat2 is refused (an older \
                 kernel, or a sandbox's filter); name the file itself"
            );
            return Err(io::Error::new(io::ErrorKind::InvalidInput, why));
        }
        links_followed += 1;
        if links_followed > MAX_LINKS {
            return Err(io::Error::from_raw_os_error(nix::libc::ELOOP));
        }
        if target.as_bytes().first() == Some(&b'/') {
            at = rustix::fs::openat(rustix::fs::CWD, "/", step, Mode::empty())?;
        }
        names_left.extend(names_reversed(target.as_bytes()));
    }
    Ok(File::from(at))
}

/// An error of a call on a file already found: never NotFound (a caller may take that for "no such file"), whatever
/// a file system's server answers.
fn found(errno: rustix::io::Errno) -> io::Error {
    match errno {
        rustix::io::Errno::NOENT => io::Error::other(format!("found, then it could not be inspected: {errno}")),
        _ => io::Error::from(errno),
    }
}

/// Why the walk does not follow the link `link` (opened as `handle`) in `folder` for `follower_uid`, if it does not:
/// it is on /proc (to open files or not), on a mount that refuses links (`nosymfollow`), or in a sticky folder others
/// may write where the rule of `fs.protected_symlinks` refuses it ([`refused_in_a_sticky_folder`], taken as set, at
/// every step). So the walk follows no link the kernel would refuse, but for a security module's checks, which are
/// not consulted. Other links are followed as `openat2` follows them: a link says no more than its text, which the
/// walk resolves a name at a time.
fn why_not_follow(
    handle: &std::os::fd::OwnedFd,
    folder: &rustix::fs::Stat,
    link: &rustix::fs::Stat,
    follower_uid: u32,
) -> io::Result<Option<String>> {
    const ST_NOSYMFOLLOW: u64 = 0x2000;
    if rustix::fs::fstatfs(handle).map_err(found)?.f_type == rustix::fs::PROC_SUPER_MAGIC {
        return Ok(Some("on /proc".to_string()));
    }
    if rustix::fs::fstatvfs(handle).map_err(found)?.f_flag.bits() & ST_NOSYMFOLLOW != 0 {
        return Ok(Some("on a mount that refuses links (nosymfollow)".to_string()));
    }
    let in_a_sticky_folder = refused_in_a_sticky_folder(follower_uid, folder, link);
    Ok(in_a_sticky_folder.then(|| format!("uid {}'s in a sticky folder others may write", link.st_uid)))
}

/// `name` in the folder `at`, not followed (`O_PATH`, `O_NOFOLLOW`). A folder `on_the_way` is opened as one, so that
/// an automount point mounts (opened plainly, it stays empty); a link there is opened plainly, to be followed.
fn open_name(at: &std::os::fd::OwnedFd, name: &[u8], on_the_way: bool) -> rustix::io::Result<std::os::fd::OwnedFd> {
    use rustix::fs::{Mode, OFlags};
    let step = o_path_flags(LastLink::Refuse);
    match on_the_way {
        true => match rustix::fs::openat(at, name, step | OFlags::DIRECTORY, Mode::empty()) {
            Err(rustix::io::Errno::NOTDIR) => rustix::fs::openat(at, name, step, Mode::empty()),
            opened => opened,
        },
        false => rustix::fs::openat(at, name, step, Mode::empty()),
    }
}

/// The kernel's limit on a path's length, its final NUL included (`PATH_MAX`).
const PATH_MAX_BYTES: usize = 4096;

/// The kernel's rule for following a link with `fs.protected_symlinks` set (`may_follow_link`), which binds root
/// too: a link in a sticky folder that others may write (/tmp) is followed only by its owner, or where the folder's
/// owner owns it too.
fn refused_in_a_sticky_folder(follower_uid: u32, folder: &rustix::fs::Stat, link: &rustix::fs::Stat) -> bool {
    let sticky_and_open = nix::libc::S_ISVTX | nix::libc::S_IWOTH;
    // In a user namespace an owner it does not map shows as the overflow uid: that owner is nobody in particular, and
    // matches no one (the kernel compares the real owners).
    let same = |a: u32, b: u32| a == b && a != OVERFLOW_UID;
    !same(link.st_uid, follower_uid)
        && folder.st_mode & sticky_and_open == sticky_and_open
        && !same(folder.st_uid, link.st_uid)
}

/// The uid an owner a user namespace does not map shows as (`/proc/sys/kernel/overflowuid`, which no system
/// changes in practice).
const OVERFLOW_UID: u32 = 65534;

/// The names of a path, last first (a stack), and a final "." where it ends in "/": as for `open`, what it names
/// must then be a folder, reached through a link at its end if there is one.
fn names_reversed(path: &[u8]) -> Vec<Vec<u8>> {
    let mut names: Vec<Vec<u8>> = path.split(|&b| b == b'/').filter(|n| !n.is_empty()).map(<[u8]>::to_vec).collect();
    if path.len() > 1 && path.ends_with(b"/") {
        names.push(b".".to_vec());
    }
    names.reverse();
    names
}

/// All of `file`, refused with [`io::ErrorKind::InvalidData`] if it holds more than `max_bytes` (read no further).
pub fn read_bounded(file: File, max_bytes: u64) -> io::Result<Vec<u8>> {
    let mut bytes = Vec::new();
    file.take(max_bytes + 1).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > max_bytes {
        return Err(io::Error::new(io::ErrorKind::InvalidData, format!("larger than {max_bytes} bytes")));
    }
    Ok(bytes)
}

/// All of `file` as UTF-8 text, refused as [`read_bounded`] does, and with [`io::ErrorKind::InvalidData`] if it is
/// not text.
pub fn read_text_bounded(file: File, max_bytes: u64) -> io::Result<String> {
    String::from_utf8(read_bounded(file, max_bytes)?)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidData, "not UTF-8 text"))
}

/// A refusal or failure of [`open_regular`] or the reads above, said with the path: `{path} is …` for what the file
/// is (not regular, too large, a link where links are refused…), `reading {path}: …` for the rest.
pub fn said(path: &Path, e: &io::Error, last_link: LastLink) -> String {
    let path = path.display();
    match e.kind() {
        // Only this reader's own words say what the file is; the kernel's EINVAL is an error of the read.
        io::ErrorKind::InvalidInput | io::ErrorKind::InvalidData if e.raw_os_error().is_none() => {
            format!("{path} is {e}")
        }
        _ if e.raw_os_error() == Some(nix::libc::ELOOP) && last_link == LastLink::Refuse => format!(
            "{path} is a symbolic link, not followed here (or it leads through /proc's links to open files); name the \
             file itself"
        ),
        _ if e.raw_os_error() == Some(nix::libc::ELOOP) => format!(
            "{path} leads through too many links, or through one of /proc's links to open files, which are not followed"
        ),
        _ => format!("reading {path}: {e}"),
    }
}

/// Whether the file system `file` lies on reports the owners and modes its own server chose (FUSE: any user may run
/// one, and with `allow_other` root sees it): a file there is nobody's in particular, whatever its owner says. Files
/// trusted for their owner (a key, a configuration) are refused there.
pub fn owner_is_the_servers_word(file: &File) -> io::Result<bool> {
    const FUSE_SUPER_MAGIC: i64 = 0x6573_5546;
    Ok(matches!(file_system(file)?, FileSystem::Other(FUSE_SUPER_MAGIC)))
}

enum FileSystem {
    /// One of the kernel's pseudo file systems, by name.
    Kernel(&'static str),
    /// Any other, by its magic number.
    Other(i64),
}

/// The file system `file` lies on; an error where the kernel cannot say (refused, not guessed).
fn file_system(file: &File) -> io::Result<FileSystem> {
    use nix::sys::statfs::{self as fs, FsType};
    // Not in nix's list (include/uapi/linux/magic.h and the kernel's sources): from efivarfs on.
    let known = [
        (fs::PROC_SUPER_MAGIC, "proc"),
        (fs::SYSFS_MAGIC, "sysfs"),
        (fs::DEBUGFS_MAGIC, "debugfs"),
        (fs::TRACEFS_MAGIC, "tracefs"),
        (fs::SECURITYFS_MAGIC, "securityfs"),
        (fs::SELINUX_MAGIC, "selinuxfs"),
        (fs::SMACK_MAGIC, "smackfs"),
        (fs::CGROUP_SUPER_MAGIC, "cgroup"),
        (fs::CGROUP2_SUPER_MAGIC, "cgroup2"),
        (fs::BPF_FS_MAGIC, "bpf"),
        (fs::DEVPTS_SUPER_MAGIC, "devpts"),
        (fs::RDTGROUP_SUPER_MAGIC, "resctrl"),
        (fs::USBDEVICE_SUPER_MAGIC, "usbdevfs"),
        (fs::XENFS_SUPER_MAGIC, "xenfs"),
        (fs::NSFS_MAGIC, "nsfs"),
        (fs::OPENPROM_SUPER_MAGIC, "openpromfs"),
        (FsType(0xde5e_81e4), "efivarfs"),
        (FsType(0x6165_676c), "pstore"),
        (FsType(0x6265_6570), "configfs"),
        (FsType(0x4249_4e4d), "binfmt_misc"),
        (FsType(0x6573_5543), "fusectl"),
        (FsType(0x0904_1934), "anon_inodefs"),
        (FsType(0x5049_4446), "pidfs"),
        (FsType(0x5345_434d), "secretmem"),
        (FsType(0x444d_4142), "dmabuf"),
        (FsType(0x454d_444d), "devmem"),
        (FsType(0x474d_454d), "guest_memfd"),
        (FsType(0x0a64_7361), "functionfs"),
        (FsType(0x1980_0202), "mqueue"),
        (FsType(0x6c6f_6f70), "binderfs"),
    ];
    let on = fs::fstatfs(file)
        .map_err(|e| io::Error::other(format!("cannot tell which file system it lies on: {e}")))?
        .filesystem_type();
    Ok(match known.iter().find(|(kind, _)| *kind == on) {
        Some((_, name)) => FileSystem::Kernel(name),
        None => FileSystem::Other(on.0 as i64),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;

    fn refusal(path: &Path, last_link: LastLink) -> String {
        open_regular(path, last_link).map(|_| ()).unwrap_err().to_string()
    }

    /// A file holding `{}` in `dir`, and a link to it.
    fn file_and_link_to_it(dir: &Path) -> (std::path::PathBuf, std::path::PathBuf) {
        let file = dir.join("file");
        std::fs::write(&file, "{}").unwrap();
        let link = dir.join("link");
        std::os::unix::fs::symlink(&file, &link).unwrap();
        (file, link)
    }

    /// A link to something other than a regular file is refused without opening it: a FIFO's writer, blocked until a
    /// reader opens it, stays blocked. (Opened for reading, it would have been released at once.)
    #[test]
    fn a_link_to_a_fifo_is_refused_without_opening_it() {
        let dir = tempfile::tempdir().unwrap();
        a_fifo_is_refused_without_being_opened(dir.path());
    }

    fn a_fifo_is_refused_without_being_opened(dir: &Path) {
        let fifo = dir.join("fifo");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
        let link = dir.join("machine.json");
        std::os::unix::fs::symlink(&fifo, &link).unwrap();
        let released = Arc::new(AtomicBool::new(false));
        let writer = {
            let (fifo, released) = (fifo.clone(), released.clone());
            std::thread::spawn(move || {
                let opened = OpenOptions::new().write(true).open(&fifo);
                released.store(true, Ordering::SeqCst);
                opened
            })
        };
        assert!(refusal(&link, LastLink::Follow).contains("not a regular file"));
        assert!(refusal(&fifo, LastLink::Refuse).contains("not a regular file"));
        // Give a wrongly released writer time to say so; a right one can never be released, however long this takes.
        std::thread::sleep(std::time::Duration::from_millis(200));
        assert!(!released.load(Ordering::SeqCst), "the FIFO was opened for reading");
        // Release the writer: open the FIFO for reading here.
        let nonblocking = nix::fcntl::OFlag::O_NONBLOCK.bits();
        let _reader = OpenOptions::new().read(true).custom_flags(nonblocking).open(&fifo).unwrap();
        writer.join().unwrap().unwrap();
    }

    /// A "regular" file of the kernel's own file systems is never read: reading /proc/kmsg drains the kernel log,
    /// and a process's environ can pass for root's file with the content its owner chose.
    #[test]
    fn a_link_into_the_kernels_file_systems_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let targets =
            [("/proc/self/status", "proc"), ("/proc/self/environ", "proc"), ("/sys/kernel/uevent_seqnum", "sysfs")];
        for (target, kind) in targets {
            if !Path::new(target).is_file() {
                eprintln!("SKIPPED: {target} is not here");
                continue;
            }
            let link = dir.path().join(kind);
            let _ = std::fs::remove_file(&link);
            std::os::unix::fs::symlink(target, &link).unwrap();
            let refused = refusal(&link, LastLink::Follow);
            assert!(refused.contains(&format!("on the kernel's {kind} file system")), "{target}: {refused}");
        }
    }

    /// A link through /proc's links to open files is never followed: it would reach files only another process
    /// holds (a file it deleted, a memfd).
    #[test]
    fn a_link_to_another_processs_open_file_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let held = dir.path().join("held");
        std::fs::write(&held, "secret").unwrap();
        let open = File::open(&held).unwrap();
        std::fs::remove_file(&held).unwrap();
        let link = dir.path().join("link");
        std::os::unix::fs::symlink(format!("/proc/{}/fd/{}", std::process::id(), open.as_raw_fd()), &link).unwrap();
        let refused = open_regular(&link, LastLink::Follow).map(|_| ()).unwrap_err();
        // openat2 refuses the link (ELOOP); without it (kernels before 5.6) the file's lack of a name refuses it.
        let nameless = refused.to_string().contains("a file no folder names");
        assert!(refused.raw_os_error() == Some(nix::libc::ELOOP) || nameless, "{refused}");
        // A named file in a folder reached only through a process's open descriptor of it (another mount namespace,
        // a folder mounted over): refused by openat2 (ELOOP) or, where the call is refused, by the walk.
        let folder = File::open(dir.path()).unwrap();
        let behind = dir.path().join("behind");
        let named = format!("/proc/{}/fd/{}/held-too", std::process::id(), folder.as_raw_fd());
        std::fs::write(dir.path().join("held-too"), "secret").unwrap();
        std::os::unix::fs::symlink(&named, &behind).unwrap();
        let refused = open_regular(&behind, LastLink::Follow).map(|_| ()).unwrap_err();
        let walked_and_refused = refused.to_string().contains(PROC_LINK_REFUSED);
        assert!(refused.raw_os_error() == Some(nix::libc::ELOOP) || walked_and_refused, "{refused}");
        for path in [behind, named.into()] {
            let refused = walk_without_openat2(&path, LastLink::Follow).map(|_| ()).unwrap_err();
            assert!(refused.to_string().contains(PROC_LINK_REFUSED), "{}: {refused}", path.display());
        }
    }

    const PROC_LINK_REFUSED: &str = ", on /proc: not followed";

    /// Where `openat2` is refused, the walk keeps the kernel's own refusals: a path of `PATH_MAX` bytes or more
    /// (which the walk could resolve), a link the rule of `fs.protected_symlinks` refuses (at every step, whatever
    /// the setting), and a link on a `nosymfollow` mount.
    #[test]
    fn without_openat2_the_walk_keeps_the_kernels_refusals() {
        use rustix::io::Errno;
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("file"), "x").unwrap();
        let long = format!("{}{}/file", dir.path().display(), "/.".repeat(2100));
        let refused_everywhere = |_: &Path| Err(Errno::PERM);
        let too_long =
            path_handle_with(Path::new(&long), LastLink::Follow, refused_everywhere).map(|_| ()).unwrap_err();
        let kernels = rustix::fs::open(long.as_str(), o_path_flags(LastLink::Follow), rustix::fs::Mode::empty());
        assert_eq!(kernels.map(|_| ()), Err(Errno::NAMETOOLONG));
        assert_eq!(too_long.raw_os_error(), Some(nix::libc::ENAMETOOLONG), "{too_long}");
        let just_short_enough = format!("{}/file", dir.path().display());
        let padded = format!("{}{}", "/".repeat(PATH_MAX_BYTES - 1 - just_short_enough.len()), just_short_enough);
        assert!(walk_without_openat2(Path::new(&padded), LastLink::Follow).is_ok(), "PATH_MAX - 1 bytes");
        let at_the_limit = format!("/{padded}");
        let refused = walk_without_openat2(Path::new(&at_the_limit), LastLink::Follow).map(|_| ()).unwrap_err();
        assert_eq!(refused.raw_os_error(), Some(nix::libc::ENAMETOOLONG), "PATH_MAX bytes");

        let any_stat = rustix::fs::fstat(tempfile::tempfile().unwrap()).unwrap();
        let stat = |uid: u32, mode: u32| {
            let mut stat = any_stat;
            (stat.st_uid, stat.st_mode) = (uid, mode);
            stat
        };
        let (tmp, plain, group_sticky) = (stat(0, 0o41777), stat(0, 0o40755), stat(0, 0o41775));
        let users_link = stat(1000, 0o120777);
        assert!(refused_in_a_sticky_folder(0, &tmp, &users_link), "root, another user's link in /tmp");
        assert!(!refused_in_a_sticky_folder(1000, &tmp, &users_link), "the link's owner");
        assert!(!refused_in_a_sticky_folder(0, &plain, &users_link), "a folder not sticky");
        assert!(!refused_in_a_sticky_folder(0, &group_sticky, &users_link), "sticky, others may not write");
        assert!(!refused_in_a_sticky_folder(0, &stat(1000, 0o41777), &users_link), "the folder's owner's link");

        // Real links: a user's link in a sticky folder others may write is not followed by root (last, on the way, or
        // reached through root's own link), root's is; elsewhere a user's link is followed; a user reading follows
        // their own there, and root's there only if the folder is root's. An owner shown as the overflow uid
        // matches no one.
        use std::os::unix::fs::{lchown, symlink, PermissionsExt};
        let sticky = dir.path().join("sticky");
        std::fs::create_dir(&sticky).unwrap();
        std::fs::set_permissions(&sticky, std::fs::Permissions::from_mode(0o1777)).unwrap();
        let owned_link = |target: &Path, link: &Path, owner: u32| {
            symlink(target, link).unwrap();
            lchown(link, Some(owner), Some(owner)).unwrap();
        };
        owned_link(&dir.path().join("file"), &sticky.join("roots"), 0);
        owned_link(&dir.path().join("file"), &sticky.join("users"), 1000);
        owned_link(dir.path(), &sticky.join("users-folder"), 1000);
        owned_link(&sticky.join("users"), &dir.path().join("roots-to-users"), 0);
        owned_link(&dir.path().join("file"), &dir.path().join("users-elsewhere"), 1000);
        for followed in [sticky.join("roots"), dir.path().join("users-elsewhere")] {
            assert!(walk_without_openat2(&followed, LastLink::Follow).is_ok(), "{}", followed.display());
        }
        for path in [sticky.join("users"), sticky.join("users-folder/file"), dir.path().join("roots-to-users")] {
            let refused = walk_without_openat2(&path, LastLink::Follow).map(|_| ()).unwrap_err().to_string();
            assert!(refused.contains("uid 1000's in a sticky folder"), "{}: {refused}", path.display());
            assert!(refused.contains(&format!("-> {}", dir.path().display())), "names the link's target: {refused}");
        }
        let handle_of = |name: &str| File::from(open_name(&handle_of_folder(&sticky), name.as_bytes(), false).unwrap());
        let (users, roots) = (handle_of("users"), handle_of("roots"));
        let (folder, users_stat, roots_stat) =
            (stat_of(&sticky), stat_of(&sticky.join("users")), stat_of(&sticky.join("roots")));
        assert_eq!(why_not_follow(&users.into(), &folder, &users_stat, 1000).unwrap(), None, "a user's own link");
        let users_sticky = stat(1000, 0o41777);
        let refused = why_not_follow(&roots.into(), &users_sticky, &roots_stat, 1000).unwrap();
        assert_eq!(refused.as_deref(), Some("uid 0's in a sticky folder others may write"), "in a user's folder");
        let unmapped_link = stat(OVERFLOW_UID, 0o120777);
        assert!(refused_in_a_sticky_folder(OVERFLOW_UID, &tmp, &unmapped_link), "unmapped owners are no one");
        assert!(refused_in_a_sticky_folder(0, &stat(OVERFLOW_UID, 0o41777), &unmapped_link), "nor the folder's");
        a_link_on_a_nosymfollow_mount_is_refused(dir.path());
        let found_then_lost = found(Errno::NOENT);
        assert!(found_then_lost.kind() != io::ErrorKind::NotFound, "{found_then_lost}: a file found is never missing");
    }

    fn handle_of_folder(folder: &Path) -> std::os::fd::OwnedFd {
        rustix::fs::open(folder, o_path_flags(LastLink::Follow), rustix::fs::Mode::empty()).unwrap()
    }

    fn stat_of(path: &Path) -> rustix::fs::Stat {
        rustix::fs::lstat(path).unwrap()
    }

    /// Root's own link on a mount that refuses links: refused, as `open` refuses it. Needs a tmpfs mounted here.
    fn a_link_on_a_nosymfollow_mount_is_refused(dir: &Path) {
        let mount_point = dir.join("nosymfollow");
        std::fs::create_dir(&mount_point).unwrap();
        let mounted = std::process::Command::new("mount")
            .args(["-t", "tmpfs", "-o", "nosymfollow,size=64k", "cosched-test", mount_point.to_str().unwrap()])
            .status();
        if !mounted.is_ok_and(|status| status.success()) {
            eprintln!("SKIPPED: a link on a nosymfollow mount: cannot mount a tmpfs with nosymfollow here");
            return;
        }
        let _unmounted_even_on_a_panic = Unmount(mount_point.clone());
        let link = mount_point.join("link");
        std::os::unix::fs::symlink(dir.join("file"), &link).unwrap();
        let walked = walk_without_openat2(&link, LastLink::Follow).map(|_| ()).map_err(|e| e.to_string());
        let kernels = rustix::fs::open(&link, rustix::fs::OFlags::PATH, rustix::fs::Mode::empty()).map(|_| ());
        assert_eq!(kernels, Err(rustix::io::Errno::LOOP), "the kernel refuses it");
        assert!(walked.as_ref().is_err_and(|why| why.contains("nosymfollow")), "{walked:?}");
    }

    /// A test's mount, unmounted when the test ends, however it ends.
    struct Unmount(std::path::PathBuf);

    impl Drop for Unmount {
        fn drop(&mut self) {
            let _ = std::process::Command::new("umount").arg("-l").arg(&self.0).status();
        }
    }

    /// The walk judges a link as the reader it runs as: root follows its own link in a user's sticky folder, and a
    /// user (here a test thread that gave up root) does not, as the kernel's rule has it.
    #[test]
    fn the_walk_judges_links_as_the_reader_it_runs_as() {
        use std::os::unix::fs::{chown, symlink, PermissionsExt};
        let dir = tempfile::tempdir().unwrap();
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        let (file, _) = file_and_link_to_it(dir.path());
        let sticky = dir.path().join("sticky");
        std::fs::create_dir(&sticky).unwrap();
        std::fs::set_permissions(&sticky, std::fs::Permissions::from_mode(0o1777)).unwrap();
        chown(&sticky, Some(1001), Some(1001)).unwrap();
        let roots = sticky.join("roots");
        symlink(&file, &roots).unwrap();
        assert!(walk_without_openat2(&roots, LastLink::Follow).is_ok(), "root's own link");
        let as_a_user = std::thread::spawn(move || {
            let user = rustix::thread::Uid::from_raw(1000);
            rustix::thread::set_thread_res_uid(user, user, user).unwrap();
            walk_without_openat2(&roots, LastLink::Follow).map(|_| ()).map_err(|e| e.to_string())
        });
        let refused = as_a_user.join().unwrap();
        assert!(refused.as_ref().is_err_and(|why| why.contains("uid 0's in a sticky folder")), "{refused:?}");
    }

    /// Where `openat2` is refused, the walk that stands for it resolves every path that stays off /proc and out of
    /// sticky folders as the kernel's `open` does: the same file (or link, at a last step kept), or the same error.
    /// Trees of folders, files and links (relative, absolute, dangling, looping, ending in "/") and paths through them
    /// are drawn at random; COSCHED_TEST_SEED replays a draw.
    #[test]
    fn the_walk_resolves_as_open_on_paths_drawn_at_random() {
        let seed = std::env::var("COSCHED_TEST_SEED").ok().map(|s| s.parse().unwrap()).unwrap_or_else(|| {
            let mut bytes = [0u8; 8];
            File::open("/dev/urandom").unwrap().read_exact(&mut bytes).unwrap();
            u64::from_le_bytes(bytes)
        });
        let mut draw = Draw(seed | 1);
        for _ in 0..20 {
            let dir = tempfile::tempdir().unwrap();
            let root = dir.path().to_str().unwrap().to_string();
            let names = random_tree(&root, &mut draw);
            for _ in 0..200 {
                let mut path = root.clone();
                for _ in 0..1 + draw.below(5) {
                    path = format!("{path}/{}", names[draw.below(names.len())]);
                }
                if draw.below(6) == 0 {
                    path.push('/');
                }
                for last_link in [LastLink::Follow, LastLink::Refuse] {
                    let walked = walk_without_openat2(Path::new(&path), last_link);
                    let opened = rustix::fs::open(path.as_str(), o_path_flags(last_link), rustix::fs::Mode::empty());
                    let identity = |f: &File| f.metadata().map(|m| (m.dev(), m.ino())).unwrap();
                    let walked = walked.as_ref().map(identity).map_err(|e| e.raw_os_error());
                    let opened = opened.map(File::from).as_ref().map(identity).map_err(|e| Some(e.raw_os_error()));
                    assert_eq!(walked, opened, "{path} ({last_link:?}); replay with COSCHED_TEST_SEED={seed}");
                }
            }
        }
        // The kernel follows 40 links in one lookup, and refuses the 41st.
        let chain = tempfile::tempdir().unwrap();
        std::fs::write(chain.path().join("f"), "x").unwrap();
        for link in 0..=MAX_LINKS {
            let target = if link == 0 { "f".to_string() } else { format!("l{}", link - 1) };
            std::os::unix::fs::symlink(target, chain.path().join(format!("l{link}"))).unwrap();
        }
        for (link, resolves) in [(MAX_LINKS - 1, true), (MAX_LINKS, false)] {
            let path = chain.path().join(format!("l{link}"));
            let opened = rustix::fs::open(&path, rustix::fs::OFlags::PATH, rustix::fs::Mode::empty());
            assert_eq!(opened.is_ok(), resolves, "the kernel's limit");
            let walked = walk_without_openat2(&path, LastLink::Follow).map(|_| ()).map_err(|e| e.raw_os_error());
            assert_eq!(walked, opened.map(|_| ()).map_err(|e| Some(e.raw_os_error())), "{link} links on");
        }
        let here = |f: File| f.metadata().map(|m| m.ino()).unwrap();
        let relative = walk_without_openat2(Path::new("Cargo.toml"), LastLink::Refuse).map(here).unwrap();
        assert_eq!(relative, std::fs::metadata("Cargo.toml").unwrap().ino(), "a path from the working folder");
        let empty = walk_without_openat2(Path::new(""), LastLink::Follow).map(|_| ()).unwrap_err();
        assert_eq!(empty.raw_os_error(), Some(nix::libc::ENOENT));
    }

    /// A small random source for the tests' draws (xorshift).
    struct Draw(u64);

    impl Draw {
        fn below(&mut self, n: usize) -> usize {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            (self.0 % n as u64) as usize
        }
    }

    /// Folders, files and links under `root`, and the names a path through them may take.
    fn random_tree(root: &str, draw: &mut Draw) -> Vec<String> {
        for folder in ["a", "b", "a/c"] {
            std::fs::create_dir(format!("{root}/{folder}")).unwrap();
        }
        for file in ["f", "a/g", "a/c/h"] {
            std::fs::write(format!("{root}/{file}"), "x").unwrap();
        }
        let folders = [".", "a", "b", "a/c"];
        let abs = |p: &str| format!("{root}/{p}");
        let mut targets: Vec<String> =
            ["f", "../f", "g", "c", "..", ".", "a/c/h", "missing", "a/", "f/", "l0", "l1/", "../l2", "c/h"]
                .iter()
                .map(|t| t.to_string())
                .collect();
        targets.extend([abs("a"), abs("a/c/h"), abs("l3"), abs("b/../f"), "/".to_string()]);
        for link in 0..6 {
            let at = folders[draw.below(folders.len())];
            let target = &targets[draw.below(targets.len())];
            let _ = std::os::unix::fs::symlink(target, format!("{root}/{at}/l{link}"));
        }
        ["a", "b", "c", "f", "g", "h", "l0", "l1", "l2", "l3", "l4", "l5", "..", ".", "missing"]
            .iter()
            .map(|n| n.to_string())
            .collect()
    }

    /// Where a sandbox's system-call filter refuses `openat2` with EPERM (container profiles older than the call do),
    /// files are still read, walked a name at a time, and what `open_regular` refuses is still refused, /proc's links
    /// included; the filter holds on this test's thread alone.
    #[test]
    fn a_sandbox_that_refuses_openat2_still_reads_and_refuses() {
        use seccompiler::{SeccompAction, SeccompFilter};
        let dir = tempfile::tempdir().unwrap();
        let (file, link) = file_and_link_to_it(dir.path());
        let fifos = dir.path().join("fifos");
        std::fs::create_dir(&fifos).unwrap();
        let sandboxed = std::thread::spawn(move || {
            let refused = [(nix::libc::SYS_openat2, vec![])].into_iter().collect();
            let errno = SeccompAction::Errno(nix::libc::EPERM as u32);
            let arch = std::env::consts::ARCH.try_into().unwrap();
            let filter = SeccompFilter::new(refused, SeccompAction::Allow, errno, arch).unwrap();
            let program: seccompiler::BpfProgram = filter.try_into().unwrap();
            seccompiler::apply_filter(&program).unwrap();
            let direct = openat2_path(&file, rustix::fs::OFlags::PATH);
            assert_eq!(direct.map(|_| ()), Err(rustix::io::Errno::PERM), "the filter refuses openat2");
            assert_eq!(refusal(&link, LastLink::Refuse), io::Error::from_raw_os_error(nix::libc::ELOOP).to_string());
            a_fifo_is_refused_without_being_opened(&fifos);
            assert!(refusal(Path::new("/proc/self/status"), LastLink::Follow).contains(PROC_LINK_REFUSED));
            let deleted = dir.path().join("deleted");
            std::fs::write(&deleted, "secret").unwrap();
            let held = File::open(&deleted).unwrap();
            std::fs::remove_file(&deleted).unwrap();
            let through_proc = format!("/proc/thread-self/fd/{}", held.as_raw_fd());
            assert!(refusal(Path::new(&through_proc), LastLink::Follow).contains(PROC_LINK_REFUSED));
            let folder = File::open(dir.path()).unwrap();
            let behind = format!("/proc/thread-self/fd/{}/file", folder.as_raw_fd());
            assert!(refusal(Path::new(&behind), LastLink::Follow).contains(PROC_LINK_REFUSED));
            let (opened, _) = open_regular(&link, LastLink::Follow).unwrap();
            read_bounded(opened, 16).unwrap()
        });
        assert_eq!(sandboxed.join().unwrap(), b"{}".to_vec());
    }

    /// The fallback is decided on the call's answer for "/", not the path's: a server's EPERM or ENOSYS on the
    /// path's own lookup comes back as the error; a call refused everywhere walks the path.
    #[test]
    fn the_path_is_walked_only_when_the_call_fails_on_root_too() {
        use rustix::io::Errno;
        let dir = tempfile::tempdir().unwrap();
        let (file, _) = file_and_link_to_it(dir.path());
        let flags = rustix::fs::OFlags::PATH | rustix::fs::OFlags::CLOEXEC;
        for errno in [Errno::PERM, Errno::NOSYS] {
            let servers_answer =
                |path: &Path| if path == Path::new("/") { openat2_path(path, flags) } else { Err(errno) };
            let kept = path_handle_with(&file, LastLink::Refuse, servers_answer).map(|_| ()).unwrap_err();
            assert_eq!(kept.raw_os_error(), Some(errno.raw_os_error()), "{errno:?} on the path alone");
            let refused_everywhere = |_: &Path| Err(errno);
            assert!(path_handle_with(&file, LastLink::Refuse, refused_everywhere).is_ok(), "{errno:?} everywhere");
        }
    }

    /// Only a refusal of the call itself takes the walk: a path whose lookup fails with EPERM or ENOSYS (a FUSE
    /// or NFS server chooses its lookups' errors) while the call works elsewhere keeps its error.
    #[test]
    fn only_a_refused_call_resolves_without_the_protection() {
        use rustix::io::Errno;
        assert!(openat2_refused(Errno::PERM, || Some(Errno::PERM)), "a filter refuses every openat2");
        assert!(openat2_refused(Errno::NOSYS, || Some(Errno::NOSYS)), "a kernel without the call");
        assert!(!openat2_refused(Errno::PERM, || None), "the call works on /: the path's server said EPERM");
        assert!(!openat2_refused(Errno::NOSYS, || None), "the call works on /: the path's server said ENOSYS");
        assert!(!openat2_refused(Errno::PERM, || Some(Errno::NOSYS)), "not the same refusal");
        assert!(!openat2_refused(Errno::ACCESS, || panic!("no probe for other errors")));
        assert!(!openat2_refused(Errno::NOENT, || panic!("no probe for other errors")));
    }

    /// A link to a regular file is followed where asked, and refused with ELOOP at the last step otherwise; the
    /// metadata is the file's, and a read stops past its bound.
    #[test]
    fn a_link_to_a_regular_file_is_read_unless_links_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let (file, link) = file_and_link_to_it(dir.path());
        let (opened, meta) = open_regular(&link, LastLink::Follow).unwrap();
        assert_eq!((meta.len(), read_bounded(opened, 16).unwrap()), (2, b"{}".to_vec()));
        let looped = open_regular(&link, LastLink::Refuse).map(|_| ()).unwrap_err();
        assert_eq!(looped.raw_os_error(), Some(nix::libc::ELOOP));
        let (opened, _) = open_regular(&file, LastLink::Refuse).unwrap();
        assert!(read_bounded(opened, 1).unwrap_err().to_string().contains("larger than 1 bytes"));
        let missing = open_regular(&dir.path().join("none"), LastLink::Follow).map(|_| ()).unwrap_err();
        assert_eq!(missing.kind(), io::ErrorKind::NotFound);
        let kernels = io::Error::from_raw_os_error(nix::libc::EINVAL);
        assert!(said(&file, &kernels, LastLink::Follow).starts_with("reading "), "the kernel's EINVAL");
    }
}
