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
