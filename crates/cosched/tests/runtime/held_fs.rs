//! A process nobody can kill, for as long as a test wants: a FUSE file system (spoken to through `/dev/fuse`, no
//! library) that leaves every lookup unanswered until it is released. A process that looks a name up there waits
//! in the kernel for the answer; once it is sent SIGKILL, the kernel (`request_wait_answer` in fs/fuse/dev.c) waits
//! for the answer of a request the file system has already read *uninterruptibly*: state D, unkillable by anyone,
//! root and `cgroup.kill` included, exactly like a process stuck on a dead NFS server. Releasing answers the lookups
//! ("no such file"), and the process then dies of its pending SIGKILL.
//!
//! Users can mount FUSE file systems of their own (`fusermount` is set-uid root), so this is also what an attacker
//! would do to keep a process alive past its job.

use crate::harness::unique;
use std::fs::File;
use std::io::{Read, Write};
use std::os::fd::AsRawFd;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

const FUSE_LOOKUP: u32 = 1;
const FUSE_FORGET: u32 = 2;
const FUSE_GETATTR: u32 = 3;
const FUSE_INIT: u32 = 26;
const FUSE_INTERRUPT: u32 = 36;
const FUSE_BATCH_FORGET: u32 = 42;
const IN_HEADER_BYTES: usize = 40;
const ROOT_NODE: u64 = 1;
const NO_SUCH_FILE: i32 = -(nix::errno::Errno::ENOENT as i32);
const NOT_IMPLEMENTED: i32 = -(nix::errno::Errno::ENOSYS as i32);

/// Lookups held unanswered (their request numbers), until `released`.
#[derive(Default)]
struct Held {
    released: bool,
    lookups: Vec<u64>,
}

/// A mounted file system that never answers a lookup until released; unmounted on drop (after releasing).
pub struct HeldLookups {
    mount_point: PathBuf,
    device: Arc<File>,
    held: Arc<Mutex<Held>>,
    server: Option<JoinHandle<()>>,
}

impl HeldLookups {
    /// Mount it on a fresh directory that every user may look into (`allow_other`).
    pub fn mount() -> HeldLookups {
        use nix::mount::{mount, MsFlags};
        use std::os::unix::fs::PermissionsExt;
        let mount_point = std::env::temp_dir().join(unique("cosched-held-fs"));
        std::fs::create_dir(&mount_point).unwrap();
        std::fs::set_permissions(&mount_point, std::fs::Permissions::from_mode(0o755)).unwrap();
        let device = Arc::new(File::options().read(true).write(true).open("/dev/fuse").expect("/dev/fuse"));
        let options = format!("fd={},rootmode=40000,user_id=0,group_id=0,allow_other", device.as_raw_fd());
        let flags = MsFlags::MS_NOSUID | MsFlags::MS_NODEV;
        mount(Some("cosched-held"), &mount_point, Some("fuse"), flags, Some(options.as_str()))
            .unwrap_or_else(|e| panic!("mounting a FUSE file system on {}: {e}", mount_point.display()));
        let held = Arc::new(Mutex::new(Held::default()));
        let (device_for_server, held_for_server) = (device.clone(), held.clone());
        let server = std::thread::spawn(move || serve(&device_for_server, &held_for_server));
        HeldLookups { mount_point, device, held, server: Some(server) }
    }

    /// A name under the mount point: looking it up blocks.
    pub fn path(&self, name: &str) -> PathBuf {
        self.mount_point.join(name)
    }

    /// How many lookups wait for an answer.
    pub fn waiting(&self) -> usize {
        self.held.lock().unwrap().lookups.len()
    }

    /// Answer every held lookup, and every later one at once: "no such file".
    pub fn release(&self) {
        let mut held = self.held.lock().unwrap();
        held.released = true;
        for unique in std::mem::take(&mut held.lookups) {
            reply(&self.device, unique, NO_SUCH_FILE, &[]);
        }
    }
}

impl Drop for HeldLookups {
    fn drop(&mut self) {
        use nix::mount::{umount2, MntFlags};
        self.release();
        let _ = umount2(&self.mount_point, MntFlags::MNT_DETACH);
        // Unmounted, the device answers reads with ENODEV: the server's loop ends.
        if let Some(server) = self.server.take() {
            let _ = server.join();
        }
        let _ = std::fs::remove_dir(&self.mount_point);
    }
}

fn serve(device: &File, held: &Mutex<Held>) {
    let mut buffer = vec![0u8; 1 << 17];
    loop {
        let length = match (&*device).read(&mut buffer) {
            Ok(length) => length,
            Err(e) if e.raw_os_error() == Some(nix::errno::Errno::EINTR as i32) => continue,
            Err(_) => return, // unmounted
        };
        if length < IN_HEADER_BYTES {
            continue;
        }
        let word = |at: usize| u32::from_ne_bytes(buffer[at..at + 4].try_into().unwrap());
        let (opcode, unique) = (word(4), u64::from_ne_bytes(buffer[8..16].try_into().unwrap()));
        let node = u64::from_ne_bytes(buffer[16..24].try_into().unwrap());
        match opcode {
            FUSE_INIT => reply(device, unique, 0, &init_out()),
            FUSE_GETATTR if node == ROOT_NODE => reply(device, unique, 0, &root_attr_out()),
            FUSE_LOOKUP => {
                let mut held = held.lock().unwrap();
                if held.released {
                    reply(device, unique, NO_SUCH_FILE, &[]);
                } else {
                    held.lookups.push(unique);
                }
            }
            // No answer is expected to these; an interrupt is ignored, so the lookup stays unanswered.
            FUSE_FORGET | FUSE_BATCH_FORGET | FUSE_INTERRUPT => {}
            _ => reply(device, unique, NOT_IMPLEMENTED, &[]),
        }
    }
}

/// One answer: `fuse_out_header` (length, error, request number), then `payload`, in one write.
fn reply(device: &File, unique: u64, error: i32, payload: &[u8]) {
    let mut message = Vec::with_capacity(16 + payload.len());
    message.extend(((16 + payload.len()) as u32).to_ne_bytes());
    message.extend(error.to_ne_bytes());
    message.extend(unique.to_ne_bytes());
    message.extend(payload);
    // A request whose process was killed meanwhile may be answered in vain (ENOENT): nothing to do then.
    let _ = (&*device).write_all(&message);
}

/// `fuse_init_out` of protocol 7.31: version, no read-ahead, no flags, 4 KiB writes.
fn init_out() -> Vec<u8> {
    let mut out = Vec::new();
    for word in [7u32, 31, 0, 0] {
        out.extend(word.to_ne_bytes());
    }
    out.extend([0u8; 4]); // max_background, congestion_threshold
    out.extend(4096u32.to_ne_bytes()); // max_write
    out.extend(0u32.to_ne_bytes()); // time_gran
    out.extend([0u8; 4]); // max_pages, map_alignment
    out.extend([0u8; 8]); // flags2, max_stack_depth
    out.extend([0u8; 24]); // unused
    out
}

/// `fuse_attr_out` of the root: a directory, mode 0755, owned by root, valid for 1 s.
fn root_attr_out() -> Vec<u8> {
    let mut out = Vec::new();
    out.extend(1u64.to_ne_bytes()); // attr_valid
    out.extend([0u8; 8]); // attr_valid_nsec, dummy
    for value in [ROOT_NODE, 0, 0, 0, 0, 0] {
        out.extend(value.to_ne_bytes()); // ino, size, blocks, atime, mtime, ctime
    }
    for value in [0u32, 0, 0, 0o040755, 2, 0, 0, 0, 4096, 0] {
        out.extend(value.to_ne_bytes()); // *timensec, mode, nlink, uid, gid, rdev, blksize, flags
    }
    out
}
