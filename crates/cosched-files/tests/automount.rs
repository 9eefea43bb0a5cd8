//! A file behind an autofs mount point is read where `openat2` is refused: the walk that stands for it opens a folder
//! on the way as a folder, which mounts it; opened plainly, the mount point stays empty and the file reads as absent.
//! Needs root, autofs and a C compiler for the test's daemon (`autofs_daemon.c`, beside this file); without them the
//! test says SKIPPED.

use std::io::{BufRead, Write};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::time::Duration;

use cosched_files::{open_regular, read_text_bounded, LastLink};
use nix::mount::{mount, MsFlags};

const TEXT: &str = "read through the automount point\n";

/// How long a step may take before the test fails: only ever reached by a hang (a daemon that never answers).
const HUNG: Duration = Duration::from_secs(120);

#[test]
fn a_file_behind_an_automount_point_is_read_where_openat2_is_refused() {
    // Straight to stderr: the harness hides `eprintln!` of a passing test, and a skip must be seen.
    let skip = |why: &str| drop(writeln!(std::io::stderr().lock(), "SKIPPED: a file behind an automount point: {why}"));
    if !nix::unistd::geteuid().is_root() {
        return skip("not root");
    }
    if !std::fs::read_to_string("/proc/filesystems").is_ok_and(|known| known.contains("\tautofs\n")) {
        return skip("no autofs in /proc/filesystems");
    }
    let dir = tempfile::tempdir().unwrap();
    let daemon = dir.path().join("autofs_daemon");
    let source = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/autofs_daemon.c");
    match Command::new("cc").arg("-o").arg(&daemon).arg(source).status() {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return skip("no C compiler (cc) to build the daemon"),
        built => assert!(built.unwrap().success(), "cc could not build {source}"),
    }
    // A mount namespace of this thread's own (and of what it starts), private: no mount here reaches the host's,
    // and any the guard leaves goes with the namespace.
    if let Err(e) = nix::sched::unshare(nix::sched::CloneFlags::CLONE_NEWNS) {
        return skip(&format!("cannot make a mount namespace: {e}"));
    }
    mount(None::<&str>, "/", None::<&str>, MsFlags::MS_REC | MsFlags::MS_PRIVATE, None::<&str>).unwrap();
    let mount_point = dir.path().join("automounted");
    std::fs::create_dir(&mount_point).unwrap();
    let (mut command, piped) = (Command::new(&daemon), Stdio::piped);
    let mut daemon = command.arg(&mount_point).args(["file", TEXT]).stdin(piped()).stdout(piped()).spawn().unwrap();
    let out = std::io::BufReader::new(daemon.stdout.take().unwrap());
    let _ended_however_the_test_ends = Automount { cue: daemon.stdin.take(), daemon, dir };
    let first_line = within("the daemon's first line", move || out.lines().next());
    match first_line {
        Some(Ok(line)) if line == "ready" => {}
        Some(Ok(line)) if line.starts_with("cannot mount autofs") => return skip(&line),
        said => panic!("the daemon said {said:?} (its errors are above)"),
    }
    let path = mount_point.join("file");
    let read = within("the read through the automount point", move || {
        refuse_openat2_on_this_thread();
        let (file, _) = open_regular(&path, LastLink::Refuse).map_err(|e| e.to_string())?;
        read_text_bounded(file, 1024).map_err(|e| e.to_string())
    });
    assert_eq!(read.as_deref(), Ok(TEXT), "the file behind the automount point");
}

/// A sandbox's filter, on this thread alone: `openat2` refused with EPERM, so that `open_regular` walks the path.
fn refuse_openat2_on_this_thread() {
    use seccompiler::{SeccompAction, SeccompFilter};
    let refused = [(nix::libc::SYS_openat2, vec![])].into_iter().collect();
    let (errno, arch) = (SeccompAction::Errno(nix::libc::EPERM as u32), std::env::consts::ARCH.try_into().unwrap());
    let filter = SeccompFilter::new(refused, SeccompAction::Allow, errno, arch).unwrap();
    let program: seccompiler::BpfProgram = filter.try_into().unwrap();
    seccompiler::apply_filter(&program).unwrap();
    let (flags, mode, resolve) =
        (rustix::fs::OFlags::PATH, rustix::fs::Mode::empty(), rustix::fs::ResolveFlags::empty());
    let openat2 = rustix::fs::openat2(rustix::fs::CWD, "/", flags, mode, resolve).map(|_| ());
    assert_eq!(openat2, Err(rustix::io::Errno::PERM), "the filter refuses openat2");
}

/// `work`'s result, from a thread of its own (in this thread's namespace): a hang fails the test instead of
/// holding it.
fn within<T: Send + 'static>(what: &str, work: impl FnOnce() -> T + Send + 'static) -> T {
    let (send, receive) = std::sync::mpsc::channel();
    std::thread::spawn(move || send.send(work()));
    receive.recv_timeout(HUNG).unwrap_or_else(|e| panic!("{what}: nothing after {HUNG:?} ({e})"))
}

/// The daemon, its mounts and the test's folder, gone when the test ends, however it ends.
struct Automount {
    /// The daemon's standard input: closed, the cue to release any request still waiting, unmount and exit.
    cue: Option<ChildStdin>,
    daemon: Child,
    dir: tempfile::TempDir,
}

impl Drop for Automount {
    fn drop(&mut self) {
        drop(self.cue.take());
        let ended = self.daemon.wait();
        // Killed before its cleanup, it may have left a request waiting, and any look into the folder would wait with
        // it: its mounts go with this thread's namespace, and the folder is kept.
        if !ended.as_ref().is_ok_and(|status| status.code().is_some()) {
            self.dir.disable_cleanup(true);
            let kept = self.dir.path().display();
            let _ = writeln!(
                std::io::stderr().lock(),
                "the autofs daemon ended without its cleanup ({ended:?}): {kept} kept"
            );
        }
    }
}
