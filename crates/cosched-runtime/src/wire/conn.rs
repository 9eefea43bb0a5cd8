//! One connection, Unix or TCP, shared by the thread that reads it and whoever writes to it (one descriptor per
//! connection, no duplicate), and reading a line within bounds of size and time.

use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::os::unix::net::UnixStream;
use std::sync::Arc;
use std::time::{Duration, Instant};

pub enum Stream {
    Unix(UnixStream),
    Tcp(TcpStream),
}

/// How long a write may block (a peer that stops reading cannot hold a thread, or the controller's state).
pub const WRITE_TIMEOUT: Duration = Duration::from_secs(10);

impl Stream {
    pub fn set_read_timeout(&self, timeout: Option<Duration>) -> io::Result<()> {
        match self {
            Stream::Unix(s) => s.set_read_timeout(timeout),
            Stream::Tcp(s) => s.set_read_timeout(timeout),
        }
    }

    pub fn set_write_timeout(&self, timeout: Option<Duration>) -> io::Result<()> {
        match self {
            Stream::Unix(s) => s.set_write_timeout(timeout),
            Stream::Tcp(s) => s.set_write_timeout(timeout),
        }
    }

    /// Has the peer sent bytes not read yet, or closed its side (without waiting)? The gate reads it to tell a
    /// silent connection from one that spoke.
    pub fn has_pending_bytes(&self) -> bool {
        use nix::sys::socket::{recv, MsgFlags};
        use std::os::fd::AsRawFd;
        let fd = match self {
            Stream::Unix(s) => s.as_raw_fd(),
            Stream::Tcp(s) => s.as_raw_fd(),
        };
        let mut byte = [0u8; 1];
        recv(fd, &mut byte, MsgFlags::MSG_PEEK | MsgFlags::MSG_DONTWAIT).is_ok()
    }

    pub fn shutdown(&self) {
        let _ = match self {
            Stream::Unix(s) => s.shutdown(std::net::Shutdown::Both),
            Stream::Tcp(s) => s.shutdown(std::net::Shutdown::Both),
        };
    }
}

impl Read for &Stream {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match *self {
            Stream::Unix(s) => (&*s).read(buf),
            Stream::Tcp(s) => (&*s).read(buf),
        }
    }
}

impl Write for &Stream {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match *self {
            Stream::Unix(s) => (&*s).write(buf),
            Stream::Tcp(s) => (&*s).write(buf),
        }
    }
    fn flush(&mut self) -> io::Result<()> {
        match *self {
            Stream::Unix(s) => (&*s).flush(),
            Stream::Tcp(s) => (&*s).flush(),
        }
    }
}

/// The lowest and highest source ports tried for a root client's connection (as `rresvport` does): ports below
/// 1024 only root may bind, which puts root's unauthenticated connections (agents, administrators) in a pool of
/// the controller's that no user can fill (see `gate`).
const PRIVILEGED_PORTS: std::ops::RangeInclusive<u16> = 512..=1023;
/// How many privileged source ports a connection tries before it takes an ordinary one.
const PRIVILEGED_PORT_TRIES: usize = 32;

/// Connect to `host:port`; as root, from a privileged source port when one is free (else from any port: the
/// connection then waits with everyone's in the unprivileged pool, and still authenticates the same way).
pub fn connect_tcp(host_port: &str) -> io::Result<TcpStream> {
    use std::net::ToSocketAddrs;
    let mut stream = None;
    if nix::unistd::geteuid().is_root() {
        let mut last_error = None;
        for target in host_port.to_socket_addrs()? {
            match connect_from_privileged_port(target) {
                Ok(found) => {
                    stream = found;
                    break;
                }
                Err(e) => last_error = Some(e),
            }
        }
        if let (None, Some(e)) = (&stream, last_error) {
            return Err(e);
        }
    }
    let stream = match stream {
        Some(stream) => stream,
        None => TcpStream::connect(host_port)?,
    };
    stream.set_nodelay(true)?;
    Ok(stream)
}

/// A connection to `target` from a free port below 1024; `None` when every port tried was taken. An error that is
/// not about the port (refused, unreachable) is returned at once.
fn connect_from_privileged_port(target: std::net::SocketAddr) -> io::Result<Option<TcpStream>> {
    use nix::errno::Errno;
    let span = PRIVILEGED_PORTS.end() - PRIVILEGED_PORTS.start() + 1;
    let start = crate::job_tag::random_hex(2).ok().and_then(|h| u16::from_str_radix(&h, 16).ok()).unwrap_or(0) % span;
    for i in 0..PRIVILEGED_PORT_TRIES as u16 {
        let port = PRIVILEGED_PORTS.start() + (start + i) % span;
        match connect_from(target, port) {
            Ok(stream) => return Ok(Some(stream)),
            // Taken here, or its last connection to this very peer still waits out TIME_WAIT: the next port.
            Err(Errno::EADDRINUSE | Errno::EADDRNOTAVAIL) => {}
            Err(e) => return Err(e.into()),
        }
    }
    Ok(None)
}

fn connect_from(target: std::net::SocketAddr, port: u16) -> nix::Result<TcpStream> {
    use nix::sys::socket::{bind, connect, setsockopt, socket, sockopt, AddressFamily, SockFlag, SockType};
    use nix::sys::socket::{SockaddrIn, SockaddrIn6};
    use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6};
    use std::os::fd::AsRawFd;
    let family = if target.is_ipv4() { AddressFamily::Inet } else { AddressFamily::Inet6 };
    let fd = socket(family, SockType::Stream, SockFlag::SOCK_CLOEXEC, None)?;
    // A port whose earlier connection waits out TIME_WAIT may still serve another destination.
    setsockopt(&fd, sockopt::ReuseAddr, &true)?;
    match target {
        SocketAddr::V4(v4) => {
            bind(fd.as_raw_fd(), &SockaddrIn::from(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, port)))?;
            connect(fd.as_raw_fd(), &SockaddrIn::from(v4))?;
        }
        SocketAddr::V6(v6) => {
            bind(fd.as_raw_fd(), &SockaddrIn6::from(SocketAddrV6::new(Ipv6Addr::UNSPECIFIED, port, 0, 0)))?;
            connect(fd.as_raw_fd(), &SockaddrIn6::from(v6))?;
        }
    }
    Ok(TcpStream::from(fd))
}

/// A shared connection as an owned reader or writer.
#[derive(Clone)]
pub struct Shared(pub Arc<Stream>);

impl Read for Shared {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        (&*self.0).read(buf)
    }
}

impl Write for Shared {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        (&*self.0).write(buf)
    }
    fn flush(&mut self) -> io::Result<()> {
        (&*self.0).flush()
    }
}

/// Bounds on reading one line.
#[derive(Clone, Copy, Debug)]
pub struct LineBounds {
    pub max_bytes: usize,
    /// How long to wait for a line to begin (`None`: for ever).
    pub idle: Option<Duration>,
    /// Once it has begun, how long the rest may take.
    pub complete_within: Duration,
}

/// Read one line of `shared` within `bounds`; `Ok(None)` at end of stream. A line that does not begin within the
/// idle time, or does not end within its time, is a `TimedOut` error; a longer one an error too.
pub fn read_line_within(reader: &mut BufReader<Shared>, bounds: LineBounds) -> io::Result<Option<String>> {
    let stream = reader.get_ref().0.clone();
    read_line_timed(reader, bounds, |timeout| stream.set_read_timeout(timeout))
}

/// `read_line_within` over any buffered reader, with `set_timeout` to bound each wait (for bytes already in
/// memory, as the fuzzer gives them, it does nothing).
pub fn read_line_timed<R: BufRead>(
    reader: &mut R,
    bounds: LineBounds,
    mut set_timeout: impl FnMut(Option<Duration>) -> io::Result<()>,
) -> io::Result<Option<String>> {
    let idle_deadline = bounds.idle.map(|idle| Instant::now() + idle);
    wait_for_bytes(reader, idle_deadline, &mut set_timeout, "no request")?;
    if reader.fill_buf()?.is_empty() {
        return Ok(None);
    }
    let deadline = Instant::now() + bounds.complete_within;
    let mut line = Vec::new();
    loop {
        wait_for_bytes(reader, Some(deadline), &mut set_timeout, "the request did not arrive in time")?;
        let available = reader.fill_buf()?; // what the wait buffered: no second wait
                                            // The end of the stream ends the last line too (a client may close its side after its request).
        let (taken, ended) = match available.iter().position(|&b| b == b'\n') {
            Some(end) => (end + 1, true),
            None => (available.len(), available.is_empty()),
        };
        line.extend_from_slice(&available[..taken]);
        reader.consume(taken);
        if line.len() > bounds.max_bytes {
            return Err(io::Error::other(format!("line longer than {} bytes", bounds.max_bytes)));
        }
        if ended {
            return String::from_utf8(line)
                .map(|s| Some(s.trim_end().to_string()))
                .map_err(|_| io::Error::other("request is not UTF-8"));
        }
    }
}

/// Wait until `reader` has bytes buffered or is at its end, by `deadline` (`None`: for ever); `what` names a
/// wait that runs out. A wait cut short by a stop is waited again: Linux ends a socket read that has a timeout
/// with EINTR when its process is stopped and resumed (signal(7)), as the freezer does to every process of a gang
/// job each slice, `cosched rsh` among them.
fn wait_for_bytes<R: BufRead>(
    reader: &mut R,
    deadline: Option<Instant>,
    set_timeout: &mut impl FnMut(Option<Duration>) -> io::Result<()>,
    what: &str,
) -> io::Result<()> {
    loop {
        let left = deadline.map(|deadline| deadline.saturating_duration_since(Instant::now()));
        if left.is_some_and(|left| left.is_zero()) {
            return Err(io::Error::new(io::ErrorKind::TimedOut, what.to_string()));
        }
        set_timeout(left)?;
        match reader.fill_buf() {
            Ok(_) => return Ok(()),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(timed_out(e, what)),
        }
    }
}

/// A read that hit its timeout comes back as `WouldBlock` on Linux: call it what it is.
fn timed_out(e: io::Error, what: &str) -> io::Error {
    match e.kind() {
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut => {
            io::Error::new(io::ErrorKind::TimedOut, what.to_string())
        }
        _ => e,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pair() -> (BufReader<Shared>, UnixStream) {
        let (ours, theirs) = UnixStream::pair().unwrap();
        (BufReader::new(Shared(Arc::new(Stream::Unix(ours)))), theirs)
    }

    const BOUNDS: LineBounds = LineBounds {
        max_bytes: 16,
        idle: Some(Duration::from_millis(200)),
        complete_within: Duration::from_millis(200),
    };

    #[test]
    fn lines_are_read_whole_and_end_of_stream_is_none() {
        let (mut reader, mut peer) = pair();
        peer.write_all(b"{\"op\":1}\nsecond\n").unwrap();
        assert_eq!(read_line_within(&mut reader, BOUNDS).unwrap().as_deref(), Some("{\"op\":1}"));
        assert_eq!(read_line_within(&mut reader, BOUNDS).unwrap().as_deref(), Some("second"));
        drop(peer);
        assert_eq!(read_line_within(&mut reader, BOUNDS).unwrap(), None);
    }

    /// Bytes whose every other wait is cut short, as a stop cuts a socket read that has a timeout short; bytes
    /// delivered and not yet consumed come again at once, as from `BufReader`'s buffer.
    struct Interrupted {
        bytes: &'static [u8],
        cut: bool,
        buffered: bool,
    }

    impl Read for Interrupted {
        fn read(&mut self, _: &mut [u8]) -> io::Result<usize> {
            unreachable!("read through fill_buf only")
        }
    }

    impl BufRead for Interrupted {
        fn fill_buf(&mut self) -> io::Result<&[u8]> {
            if !self.buffered {
                self.cut = !self.cut;
                if self.cut {
                    return Err(io::ErrorKind::Interrupted.into());
                }
                self.buffered = true;
            }
            Ok(&self.bytes[..self.bytes.len().min(3)])
        }

        fn consume(&mut self, taken: usize) {
            self.bytes = &self.bytes[taken..];
            self.buffered = false;
        }
    }

    #[test]
    fn a_wait_cut_short_by_a_stop_is_waited_again() {
        let mut reader = Interrupted { bytes: b"{\"op\":1}\nx", cut: false, buffered: false };
        let read = |reader: &mut Interrupted| read_line_timed(reader, BOUNDS, |_| Ok(()));
        assert_eq!(read(&mut reader).unwrap().as_deref(), Some("{\"op\":1}"));
        assert_eq!(read(&mut reader).unwrap().as_deref(), Some("x"));
        assert_eq!(read(&mut reader).unwrap(), None);
    }

    #[test]
    fn silence_a_slow_line_and_a_long_line_are_errors() {
        let (mut reader, _peer) = pair();
        assert_eq!(read_line_within(&mut reader, BOUNDS).unwrap_err().kind(), io::ErrorKind::TimedOut);
        let (mut reader, mut peer) = pair();
        peer.write_all(b"{\"op\"").unwrap();
        assert_eq!(read_line_within(&mut reader, BOUNDS).unwrap_err().kind(), io::ErrorKind::TimedOut);
        let (mut reader, mut peer) = pair();
        peer.write_all(&[b'x'; 40]).unwrap();
        assert!(read_line_within(&mut reader, BOUNDS).unwrap_err().to_string().contains("longer than 16"));
    }
}
