//! Sealed lines: after a TCP handshake, every line in either direction carries a MAC under the connection's
//! session key, over its direction, its place in the stream (an implicit sequence number) and its bytes.
//!
//! The session key comes out of the handshake (`auth`) and is one a third party cannot compute: an HMAC under the
//! agents' key, or under a secret the peer put in its MUNGE credential, which only root can decode. So a relay
//! between two honest parties — a user who bound the address an agent dials — can pass the handshake on, but
//! cannot add, change, drop, reorder, replay or reflect a single line after it: the honest end finds the seal
//! wrong, acts on nothing and closes the connection. Unix-socket peers are identified by the kernel and seal
//! nothing.
//!
//! On the wire a sealed line is `<64 hex digits of HMAC-SHA256> <payload>`: a line without a seal cannot be taken
//! for one (JSON begins with `{`).

use hmac::{Hmac, Mac};
use sha2::Sha256;
use std::io::{self, Write};
use std::sync::{Arc, Mutex};

/// The bytes a seal adds to a line: 64 hex digits and a space.
pub const SEAL_BYTES: usize = 65;

/// A connection's session key (256 bits), from the handshake.
#[derive(Clone)]
pub struct SessionKey([u8; 32]);

impl SessionKey {
    /// The HMAC-SHA256 of `text` under `secret`: the key of one connection, given what its handshake bound.
    pub fn derive(secret: &[u8], text: &[u8]) -> SessionKey {
        let mut mac = Hmac::<Sha256>::new_from_slice(secret).expect("HMAC takes keys of any length");
        mac.update(text);
        SessionKey(mac.finalize().into_bytes().into())
    }
}

impl std::fmt::Debug for SessionKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SessionKey(..)") // never in a log
    }
}

/// Which end of the connection we are: each seals with its own direction and opens with the other's.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum End {
    Controller,
    /// An agent or a remote user.
    Peer,
}

/// The direction a line travels, in what its MAC covers: a line sent one way never opens the other way.
fn direction_label(from: End) -> &'static [u8] {
    match from {
        End::Controller => b"cosched-line:controller-to-peer",
        End::Peer => b"cosched-line:peer-to-controller",
    }
}

/// One direction of a connection: its key, its label and the number of the next line.
struct Direction {
    key: SessionKey,
    label: &'static [u8],
    next: u64,
}

impl Direction {
    fn mac(&self, payload: &[u8]) -> Hmac<Sha256> {
        let mut mac = Hmac::<Sha256>::new_from_slice(&self.key.0).expect("HMAC takes keys of any length");
        mac.update(self.label);
        mac.update(&[0]);
        mac.update(&self.next.to_be_bytes());
        mac.update(payload);
        mac
    }

    fn advance(&mut self) -> Result<(), String> {
        self.next = self.next.checked_add(1).ok_or("this connection has sealed all the lines it may")?;
        Ok(())
    }
}

/// Seals the lines we send.
pub struct Sealer(Direction);

/// Opens the lines we receive, in order, each once.
pub struct Opener(Direction);

/// The sealer and the opener of `end` of a connection whose session key is `key`.
pub fn seal_both_ways(key: SessionKey, end: End) -> (Sealer, Opener) {
    let other = match end {
        End::Controller => End::Peer,
        End::Peer => End::Controller,
    };
    let sealer = Sealer(Direction { key: key.clone(), label: direction_label(end), next: 0 });
    let opener = Opener(Direction { key, label: direction_label(other), next: 0 });
    (sealer, opener)
}

impl Sealer {
    /// `payload` (one line, without its line feed) as a sealed line, line feed included.
    pub fn seal(&mut self, payload: &[u8]) -> Result<Vec<u8>, String> {
        let tag = self.0.mac(payload).finalize().into_bytes();
        self.0.advance()?;
        let mut line = Vec::with_capacity(SEAL_BYTES + payload.len() + 1);
        line.extend(tag.iter().flat_map(|b| [hex_digit(b >> 4), hex_digit(b & 15)]));
        line.push(b' ');
        line.extend_from_slice(payload);
        line.push(b'\n');
        Ok(line)
    }
}

fn hex_digit(nibble: u8) -> u8 {
    b"0123456789abcdef"[usize::from(nibble)]
}

impl Opener {
    /// The payload of the next line received (without its line feed), if its seal is right (checked in constant
    /// time). A wrong seal is an error, and so is every line after it: the connection must be closed.
    pub fn open(&mut self, line: &str) -> Result<String, String> {
        let (seal, payload) = line.split_once(' ').ok_or("a line without a seal")?;
        let tag = decode_seal(seal).ok_or("a line without a seal")?;
        self.0.mac(payload.as_bytes()).verify_slice(&tag).map_err(|_| {
            self.0.next = u64::MAX; // nothing opens after a wrong seal
            "a line whose seal is wrong (changed, injected, replayed or reflected)".to_string()
        })?;
        self.0.advance()?;
        Ok(payload.to_string())
    }
}

fn decode_seal(hex: &str) -> Option<[u8; 32]> {
    if hex.len() != 64 {
        return None;
    }
    let mut tag = [0u8; 32];
    for (i, byte) in tag.iter_mut().enumerate() {
        *byte = u8::from_str_radix(hex.get(2 * i..2 * i + 2)?, 16).ok()?;
    }
    Some(tag)
}

/// A writer of whole lines (what `protocol::write_message` writes) that seals each one when the connection has a
/// session key, and passes them as they are on a Unix socket. Shared by every thread that writes to the connection,
/// so the sequence follows the order lines go out. After a failed write it fails for good: a half-written line
/// would put the peer's count out of step, and the peer closes the connection at the next line anyway.
pub struct LineWriter<W: Write> {
    inner: W,
    sealer: Option<Arc<Mutex<Sealer>>>,
    pending: Vec<u8>,
    broken: bool,
}

impl<W: Write> LineWriter<W> {
    pub fn new(inner: W, sealer: Option<Arc<Mutex<Sealer>>>) -> LineWriter<W> {
        LineWriter { inner, sealer, pending: Vec::new(), broken: false }
    }

    fn send_pending_lines(&mut self) -> io::Result<()> {
        while let Some(end) = self.pending.iter().position(|&b| b == b'\n') {
            let line: Vec<u8> = self.pending.drain(..=end).collect();
            let out = match &self.sealer {
                Some(sealer) => sealer.lock().unwrap().seal(&line[..end]).map_err(io::Error::other)?,
                None => line,
            };
            self.inner.write_all(&out)?;
        }
        Ok(())
    }
}

impl<W: Write> Write for LineWriter<W> {
    fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
        if self.broken {
            return Err(io::Error::new(io::ErrorKind::BrokenPipe, "an earlier write to this connection failed"));
        }
        self.pending.extend_from_slice(bytes);
        if let Err(e) = self.send_pending_lines() {
            self.broken = true;
            return Err(e);
        }
        Ok(bytes.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pair() -> ((Sealer, Opener), (Sealer, Opener)) {
        let key = SessionKey::derive(b"secret", b"connection 1");
        (seal_both_ways(key.clone(), End::Controller), seal_both_ways(key, End::Peer))
    }

    fn text(line: Vec<u8>) -> String {
        String::from_utf8(line).unwrap().trim_end().to_string()
    }

    #[test]
    fn lines_open_in_order_on_the_other_end() {
        let ((mut controller, _), (_, mut peer)) = pair();
        for payload in ["{\"cmd\":\"welcome\"}", "[]", "{\"cmd\":\"start\"}"] {
            let line = text(controller.seal(payload.as_bytes()).unwrap());
            assert_eq!(line.len(), SEAL_BYTES + payload.len());
            assert_eq!(peer.open(&line).unwrap(), payload);
        }
    }

    #[test]
    fn an_injected_changed_replayed_reordered_or_reflected_line_does_not_open() {
        // Every pair has the same key: a line sealed by one opens on another's other end.
        let opener = || pair().1 .1;
        let ((mut controller, _), (mut peer_sealer, _)) = pair();
        let first = text(controller.seal(b"{\"n\":1}").unwrap());
        let second = text(controller.seal(b"{\"n\":2}").unwrap());
        assert!(opener().open("{\"cmd\":\"start\"}").unwrap_err().contains("without a seal"), "injected bare");
        let made_up = format!("{} {{}}", "0".repeat(64));
        assert!(opener().open(&made_up).unwrap_err().contains("wrong"), "injected with a made-up seal");
        assert!(opener().open(&first.replace("\"n\":1", "\"n\":9")).is_err(), "changed");
        assert!(opener().open(&second).is_err(), "reordered (the first one dropped)");
        let mut replayed = opener();
        assert!(replayed.open(&first).is_ok());
        assert!(replayed.open(&first).is_err(), "replayed");
        let own = text(peer_sealer.seal(b"{\"event\":\"report\"}").unwrap());
        assert!(opener().open(&own).is_err(), "reflected to its sender");
        assert!(pair().0 .1.open(&own).is_ok(), "it opens where it was sent");
    }

    #[test]
    fn nothing_opens_after_a_wrong_seal() {
        let ((mut controller, _), (_, mut peer)) = pair();
        let good = text(controller.seal(b"{}").unwrap());
        assert!(peer.open(&format!("{} {{}}", "f".repeat(64))).is_err());
        assert!(peer.open(&good).is_err());
    }

    #[test]
    fn another_connections_key_does_not_open_a_line() {
        let (mut sealer, _) = seal_both_ways(SessionKey::derive(b"secret", b"connection 1"), End::Controller);
        let (_, mut opener) = seal_both_ways(SessionKey::derive(b"secret", b"connection 2"), End::Peer);
        assert!(opener.open(&text(sealer.seal(b"{}").unwrap())).is_err());
    }

    #[test]
    fn the_line_writer_seals_each_whole_line_and_fails_for_good_after_an_error() {
        let ((controller, _), (_, mut peer)) = pair();
        let mut out = Vec::new();
        {
            let mut writer = LineWriter::new(&mut out, Some(Arc::new(Mutex::new(controller))));
            writer.write_all(b"{\"a\":").unwrap();
            writer.write_all(b"1}\n{\"b\":2}\n").unwrap();
        }
        let lines: Vec<&str> = std::str::from_utf8(&out).unwrap().lines().collect();
        assert_eq!(peer.open(lines[0]).unwrap(), "{\"a\":1}");
        assert_eq!(peer.open(lines[1]).unwrap(), "{\"b\":2}");

        struct Failing;
        impl Write for Failing {
            fn write(&mut self, _: &[u8]) -> io::Result<usize> {
                Err(io::ErrorKind::TimedOut.into())
            }
            fn flush(&mut self) -> io::Result<()> {
                Ok(())
            }
        }
        let mut writer = LineWriter::new(Failing, None);
        assert!(writer.write_all(b"{}\n").is_err());
        assert_eq!(writer.write(b"x").unwrap_err().kind(), io::ErrorKind::BrokenPipe);
    }
}
