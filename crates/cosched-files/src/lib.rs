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
    let meta = handle.metadata()?;
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
/// older than the call), the path resolves as `open`, without that protection; the refusal of files without a name
/// ([`open_regular`]) still holds there. A filter answering any other error refuses every read.
fn path_handle(path: &Path, last_link: LastLink) -> io::Result<File> {
    let mut flags = rustix::fs::OFlags::PATH | rustix::fs::OFlags::CLOEXEC;
    if last_link == LastLink::Refuse {
        flags |= rustix::fs::OFlags::NOFOLLOW;
    }
    path_handle_with(path, flags, |path| openat2_path(path, flags))
}

/// [`path_handle`] with `openat2` given, so that a test can make it fail where a file system's server would.
fn path_handle_with(path: &Path, flags: rustix::fs::OFlags, openat2: impl Fn(&Path) -> Resolved) -> io::Result<File> {
    match openat2(path) {
        Ok(handle) => Ok(File::from(handle)),
        Err(errno) if openat2_refused(errno, || openat2(Path::new("/")).err()) => {
            OpenOptions::new().read(true).custom_flags(flags.bits() as i32).open(path)
        }
        Err(errno) => Err(io::Error::from(errno)),
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
        io::ErrorKind::InvalidInput | io::ErrorKind::InvalidData => format!("{path} is {e}"),
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
        let fifo = dir.path().join("fifo");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
        let link = dir.path().join("machine.json");
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
        // a folder mounted over): only openat2 refuses that, so this needs the call.
        if openat2_path(Path::new("/"), rustix::fs::OFlags::PATH).is_err() {
            eprintln!("SKIPPED: a named file behind /proc's links: openat2 is refused here");
            return;
        }
        let folder = File::open(dir.path()).unwrap();
        let behind = dir.path().join("behind");
        let named = format!("/proc/{}/fd/{}/held-too", std::process::id(), folder.as_raw_fd());
        std::fs::write(dir.path().join("held-too"), "secret").unwrap();
        std::os::unix::fs::symlink(&named, &behind).unwrap();
        let refused = open_regular(&behind, LastLink::Follow).map(|_| ()).unwrap_err();
        assert_eq!(refused.raw_os_error(), Some(nix::libc::ELOOP), "{refused}");
    }

    /// Where a sandbox's system-call filter refuses `openat2` with EPERM (container profiles older than the call do),
    /// files are still read, resolved as `open` would, and what `open_regular` refuses itself is still refused; the
    /// filter holds on this test's thread alone.
    #[test]
    fn a_sandbox_that_refuses_openat2_still_reads_and_refuses() {
        use seccompiler::{SeccompAction, SeccompFilter};
        let dir = tempfile::tempdir().unwrap();
        let (file, link) = file_and_link_to_it(dir.path());
        let fifo = dir.path().join("fifo");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
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
            assert!(refusal(&fifo, LastLink::Follow).contains("not a regular file"));
            assert!(refusal(Path::new("/proc/self/status"), LastLink::Follow).contains("kernel's proc file system"));
            let deleted = dir.path().join("deleted");
            std::fs::write(&deleted, "secret").unwrap();
            let held = File::open(&deleted).unwrap();
            std::fs::remove_file(&deleted).unwrap();
            let through_proc = format!("/proc/thread-self/fd/{}", held.as_raw_fd());
            assert!(refusal(Path::new(&through_proc), LastLink::Follow).contains("a file no folder names"));
            let (opened, _) = open_regular(&link, LastLink::Follow).unwrap();
            read_bounded(opened, 16).unwrap()
        });
        assert_eq!(sandboxed.join().unwrap(), b"{}".to_vec());
    }

    /// The fallback is decided on the call's answer for "/", not the path's: a server's EPERM or ENOSYS on the
    /// path's own lookup comes back as the error; a call refused everywhere resolves as `open`.
    #[test]
    fn the_path_resolves_as_open_only_when_the_call_fails_on_root_too() {
        use rustix::io::Errno;
        let dir = tempfile::tempdir().unwrap();
        let (file, _) = file_and_link_to_it(dir.path());
        let flags = rustix::fs::OFlags::PATH | rustix::fs::OFlags::CLOEXEC;
        for errno in [Errno::PERM, Errno::NOSYS] {
            let servers_answer =
                |path: &Path| if path == Path::new("/") { openat2_path(path, flags) } else { Err(errno) };
            let kept = path_handle_with(&file, flags, servers_answer).map(|_| ()).unwrap_err();
            assert_eq!(kept.raw_os_error(), Some(errno.raw_os_error()), "{errno:?} on the path alone");
            let refused_everywhere = |_: &Path| Err(errno);
            assert!(path_handle_with(&file, flags, refused_everywhere).is_ok(), "{errno:?} everywhere");
        }
    }

    /// Only a refusal of the call itself resolves as `open`: a path whose lookup fails with EPERM or ENOSYS (a FUSE
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
    }
}
