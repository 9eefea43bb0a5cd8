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
    let reading = |e: std::io::Error| format!("reading {}: {e}", path.display());
    // First a handle that opens nothing (O_PATH): opening a device a link points to can act (a watchdog arms, a
    // tape rewinds) before any check, and a FIFO would block. Only a regular file is then opened for reading,
    // through that same handle, so nothing can be swapped in between; never as the controlling terminal.
    let handle = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(nix::fcntl::OFlag::O_PATH.bits() | extra_flags)
        .open(path)
        .map_err(reading)?;
    if !handle.metadata().is_ok_and(|m| m.is_file()) {
        return Err(format!("{} is not a regular file", path.display()));
    }
    // The kernel's own file systems hold "regular" files whose reading acts: /proc/kmsg drains the kernel log,
    // tracefs's trace_pipe consumes events. No file these readers want lives there.
    if let Some(kind) = kernel_file_system(&handle) {
        return Err(format!("{} is on the kernel's {kind} file system, not a file to read", path.display()));
    }
    let flags = nix::fcntl::OFlag::O_NONBLOCK | nix::fcntl::OFlag::O_NOCTTY;
    // The thread's own table: /proc/self is the thread group leader's.
    let reopened = format!("/proc/thread-self/fd/{}", std::os::fd::AsRawFd::as_raw_fd(&handle));
    let file =
        std::fs::OpenOptions::new().read(true).custom_flags(flags.bits()).open(&reopened).map_err(|e| {
            format!("reading {}: reopening it through {reopened} (is /proc mounted?): {e}", path.display())
        })?;
    let mut text = String::new();
    file.take(max_bytes + 1).read_to_string(&mut text).map_err(reading)?;
    if text.len() as u64 > max_bytes {
        return Err(format!("{} is larger than {max_bytes} bytes", path.display()));
    }
    Ok(text)
}

/// The name of the kernel's pseudo file system `file` lies on (proc, sysfs, tracefs…), or `None` for any other.
fn kernel_file_system(file: &std::fs::File) -> Option<&'static str> {
    use nix::sys::statfs::{self as fs, FsType};
    // Not in nix's list (include/uapi/linux/magic.h): efivarfs, pstore, configfs, binfmt_misc, fusectl.
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
    ];
    let on = fs::fstatfs(file).ok()?.filesystem_type();
    known.iter().find(|(kind, _)| *kind == on).map(|(_, name)| *name)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::OpenOptionsExt;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;

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
                let opened = fs::OpenOptions::new().write(true).open(&fifo);
                released.store(true, Ordering::SeqCst);
                opened
            })
        };
        for read in [read_bounded, read_bounded_no_link] {
            let refused = read(&link, 1024).unwrap_err();
            assert!(refused.contains("is not a regular file"), "{refused}");
        }
        // Give a wrongly released writer time to say so; a right one can never be released, however long this takes.
        std::thread::sleep(std::time::Duration::from_millis(200));
        assert!(!released.load(Ordering::SeqCst), "the FIFO was opened for reading");
        // Release the writer: open the FIFO for reading here.
        let nonblocking = nix::fcntl::OFlag::O_NONBLOCK.bits();
        let _reader = fs::OpenOptions::new().read(true).custom_flags(nonblocking).open(&fifo).unwrap();
        writer.join().unwrap().unwrap();
    }

    /// A "regular" file of the kernel's own file systems is never read: reading /proc/kmsg drains the kernel log.
    #[test]
    fn a_link_into_the_kernels_file_systems_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        for (target, kind) in [("/proc/self/status", "proc"), ("/sys/kernel/uevent_seqnum", "sysfs")] {
            if !Path::new(target).is_file() {
                eprintln!("SKIPPED: {target} is not here");
                continue;
            }
            let link = dir.path().join(kind);
            std::os::unix::fs::symlink(target, &link).unwrap();
            let refused = read_bounded(&link, 1 << 16).unwrap_err();
            assert!(refused.contains(&format!("on the kernel's {kind} file system")), "{refused}");
        }
    }

    /// A link to a regular file is followed (it is the path the caller gave), but not at the last step where asked.
    #[test]
    fn a_link_to_a_regular_file_is_read_unless_links_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("file");
        fs::write(&file, "{}").unwrap();
        let link = dir.path().join("link");
        std::os::unix::fs::symlink(&file, &link).unwrap();
        assert_eq!(read_bounded(&link, 16).unwrap(), "{}");
        assert!(read_bounded_no_link(&link, 16).unwrap_err().contains("is not a regular file"));
        assert!(read_bounded(&file, 1).unwrap_err().contains("larger than 1 bytes"));
    }
}
