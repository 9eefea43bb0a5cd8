//! The only `unsafe` in the workspace: scheduling system calls on a thread id
//! that neither `nix` nor `std` wrap. Each function is a thin, checked wrapper.
#![allow(unsafe_code)]

use std::io;

/// Linux's `struct sched_attr` (SCHED_ATTR_SIZE_VER1, 56 bytes).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SchedAttr {
    pub size: u32,
    pub policy: u32,
    pub flags: u64,
    pub nice: i32,
    pub priority: u32,
    /// For the fair policies (6.12+): the requested slice in ns (0 = default).
    pub runtime_ns: u64,
    pub deadline_ns: u64,
    pub period_ns: u64,
    pub util_min: u32,
    pub util_max: u32,
}

const SCHED_ATTR_SIZE: u32 = std::mem::size_of::<SchedAttr>() as u32;

/// `sched_getattr(tid)`.
pub fn sched_getattr(tid: i32) -> io::Result<SchedAttr> {
    let mut attr = SchedAttr { size: SCHED_ATTR_SIZE, ..SchedAttr::default() };
    // SAFETY: `attr` is a live, writable SchedAttr and we pass its exact size,
    // so the kernel writes at most that many bytes into it.
    let rc = unsafe { libc::syscall(libc::SYS_sched_getattr, tid, &mut attr as *mut SchedAttr, SCHED_ATTR_SIZE, 0u32) };
    if rc == 0 {
        Ok(attr)
    } else {
        Err(io::Error::last_os_error())
    }
}

/// `sched_setattr(tid, attr)`.
pub fn sched_setattr(tid: i32, attr: &SchedAttr) -> io::Result<()> {
    let attr = SchedAttr { size: SCHED_ATTR_SIZE, ..*attr };
    // SAFETY: the kernel only reads `size` bytes from a valid SchedAttr.
    let rc = unsafe { libc::syscall(libc::SYS_sched_setattr, tid, &attr as *const SchedAttr, 0u32) };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// `setpriority(PRIO_PROCESS, tid, nice)`: on Linux this sets one thread's nice.
pub fn set_thread_nice(tid: i32, nice: i32) -> io::Result<()> {
    // SAFETY: plain integer arguments; no memory is shared with the kernel.
    let rc = unsafe { libc::setpriority(libc::PRIO_PROCESS, tid as libc::id_t, nice) };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}
