//! systemd's readiness protocol (`Type=notify`): once a daemon can take requests it sends `READY=1` as one datagram
//! to the socket systemd names in `NOTIFY_SOCKET` (a path, or `@name` in the abstract namespace). Without the
//! variable (started by hand, by a test, by another supervisor) nothing is sent.

use std::io;
use std::os::unix::net::UnixDatagram;

/// Tell systemd the daemon is ready; a daemon started without `NOTIFY_SOCKET` does nothing. A failure is logged,
/// never fatal: a daemon that runs must not stop because its supervisor's socket is gone.
pub fn ready(who: &str) {
    match notify("READY=1") {
        Ok(true) => crate::log_line!("{who}: ready (told systemd)"),
        Ok(false) => {}
        Err(e) => crate::log_line!("{who}: could not tell systemd it is ready: {e}"),
    }
}

/// Send `state` to systemd; `Ok(false)` when no socket is named.
fn notify(state: &str) -> io::Result<bool> {
    let Some(address) = std::env::var_os("NOTIFY_SOCKET") else { return Ok(false) };
    let bytes = std::os::unix::ffi::OsStrExt::as_bytes(address.as_os_str());
    let socket = UnixDatagram::unbound()?;
    match bytes.first() {
        Some(b'@') => {
            use std::os::linux::net::SocketAddrExt;
            let name = std::os::unix::net::SocketAddr::from_abstract_name(&bytes[1..])?;
            socket.send_to_addr(state.as_bytes(), &name)?;
        }
        Some(b'/') => {
            socket.send_to(state.as_bytes(), &address)?;
        }
        _ => return Err(io::Error::new(io::ErrorKind::InvalidInput, format!("NOTIFY_SOCKET {address:?}"))),
    }
    Ok(true)
}
