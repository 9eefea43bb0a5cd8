//! Ping-pong over TCP on loopback between this process and a peer process.
//!
//! Protocol, all integers little-endian u64: the pinger sends a header
//! (doubles, chunks, round trips per chunk); the peer echoes that many
//! messages of `8 * doubles` bytes, reading its CPU clock after each chunk,
//! and then sends its CPU time of each chunk in nanoseconds. The header and
//! the reply are outside the timed round trips. End of stream ends the peer.

use super::{add_echo_cpu, echo_cpu_per_chunk, time_chunks, Chunk, Link, Plan};
use crate::os;
use serde::{Deserialize, Serialize};
use std::io::{ErrorKind, Read, Write};
use std::net::{Ipv4Addr, Shutdown, TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// How long the peer process may take to connect.
const CONNECT_TIMEOUT_NS: u64 = 10_000_000_000;
const DOUBLE_BYTES: usize = 8;

/// What the peer process is told, as JSON on its command line.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PeerSpec {
    /// Loopback port to connect to.
    pub port: u16,
    /// CPU to pin to.
    pub cpu: usize,
}

pub(super) struct TcpLink {
    stream: TcpStream,
    peer: Child,
    buffer: Vec<u8>,
}

impl TcpLink {
    /// Start the peer pinned to `peer_cpu` and accept its connection.
    pub(super) fn start(make_command: &dyn Fn() -> Command, peer_cpu: usize) -> Result<TcpLink, String> {
        let listener =
            TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).map_err(|e| format!("listening on loopback: {e}"))?;
        let port = listener.local_addr().map_err(|e| e.to_string())?.port();
        let spec = serde_json::to_string(&PeerSpec { port, cpu: peer_cpu }).map_err(|e| e.to_string())?;
        let mut command = make_command();
        command.arg(spec).stdin(Stdio::null()).stdout(Stdio::null()).stderr(Stdio::inherit());
        let mut peer = command.spawn().map_err(|e| format!("starting the ping-pong peer: {e}"))?;
        match accept_peer(&listener, &mut peer) {
            Ok(stream) => Ok(TcpLink { stream, peer, buffer: Vec::new() }),
            Err(e) => {
                let _ = peer.kill();
                let _ = peer.wait();
                Err(e)
            }
        }
    }
}

/// Accept the peer's connection, giving up if it exits or takes too long.
fn accept_peer(listener: &TcpListener, peer: &mut Child) -> Result<TcpStream, String> {
    listener.set_nonblocking(true).map_err(|e| e.to_string())?;
    let deadline_ns = os::monotonic_ns() + CONNECT_TIMEOUT_NS;
    loop {
        match listener.accept() {
            Ok((stream, _)) => return configure(stream),
            Err(e) if e.kind() == ErrorKind::WouldBlock => {}
            Err(e) => return Err(format!("accepting the peer: {e}")),
        }
        if let Ok(Some(status)) = peer.try_wait() {
            return Err(format!("the ping-pong peer exited ({status}) before connecting"));
        }
        if os::monotonic_ns() > deadline_ns {
            return Err("the ping-pong peer did not connect within 10 s".to_string());
        }
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// Blocking (a waiting receiver sleeps) and no Nagle delay on small messages.
fn configure(stream: TcpStream) -> Result<TcpStream, String> {
    stream.set_nonblocking(false).map_err(|e| e.to_string())?;
    stream.set_nodelay(true).map_err(|e| e.to_string())?;
    Ok(stream)
}

fn io_error(what: &str) -> impl Fn(std::io::Error) -> String + '_ {
    move |e| format!("ping-pong {what}: {e}")
}

const HEADER_BYTES: usize = 24;

fn encode_header(plan: Plan) -> [u8; HEADER_BYTES] {
    let mut header = [0u8; HEADER_BYTES];
    header[..8].copy_from_slice(&(plan.doubles as u64).to_le_bytes());
    header[8..16].copy_from_slice(&plan.chunks.to_le_bytes());
    header[16..].copy_from_slice(&plan.round_trips_per_chunk.to_le_bytes());
    header
}

fn decode_header(header: &[u8; HEADER_BYTES]) -> Plan {
    let word = |i: usize| u64::from_le_bytes(header[8 * i..8 * i + 8].try_into().expect("8 bytes"));
    Plan { doubles: word(0) as usize, chunks: word(1), round_trips_per_chunk: word(2) }
}

impl Link for TcpLink {
    fn batch(&mut self, plan: Plan) -> Result<Vec<Chunk>, String> {
        self.buffer.resize(plan.doubles * DOUBLE_BYTES, 0x5a);
        self.stream.write_all(&encode_header(plan)).map_err(io_error("header"))?;
        let (stream, buffer) = (&mut self.stream, &mut self.buffer);
        let mut chunks = time_chunks(plan, || {
            stream.write_all(buffer).map_err(io_error("send"))?;
            stream.read_exact(buffer).map_err(io_error("receive"))
        })?;
        let mut reply = vec![0u8; chunks.len() * 8];
        self.stream.read_exact(&mut reply).map_err(io_error("peer CPU time"))?;
        let echo_cpu_ns: Vec<u64> =
            reply.chunks_exact(8).map(|b| u64::from_le_bytes(b.try_into().expect("8 bytes"))).collect();
        add_echo_cpu(&mut chunks, &echo_cpu_ns);
        Ok(chunks)
    }
}

impl Drop for TcpLink {
    fn drop(&mut self) {
        // End of stream tells the peer to exit.
        let _ = self.stream.shutdown(Shutdown::Both);
        let _ = self.peer.wait();
    }
}

/// The peer process: connect, pin, and echo batches until end of stream.
pub fn peer_main(spec_json: &str) -> Result<(), String> {
    let spec: PeerSpec = serde_json::from_str(spec_json).map_err(|e| format!("peer spec: {e}"))?;
    os::pin_current_thread(spec.cpu)?;
    let mut stream = configure(TcpStream::connect((Ipv4Addr::LOCALHOST, spec.port)).map_err(io_error("connect"))?)?;
    let mut buffer = Vec::new();
    loop {
        let mut header = [0u8; HEADER_BYTES];
        match stream.read_exact(&mut header) {
            Ok(()) => {}
            Err(e) if e.kind() == ErrorKind::UnexpectedEof => return Ok(()),
            Err(e) => return Err(io_error("header")(e)),
        }
        let plan = decode_header(&header);
        buffer.resize(plan.doubles * DOUBLE_BYTES, 0);
        let cpu_ns = echo_cpu_per_chunk(plan, || {
            stream.read_exact(&mut buffer).map_err(io_error("receive"))?;
            stream.write_all(&buffer).map_err(io_error("send"))
        })?;
        let reply: Vec<u8> = cpu_ns.iter().flat_map(|ns| ns.to_le_bytes()).collect();
        stream.write_all(&reply).map_err(io_error("reply"))?;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_round_trip() {
        let plan = Plan { doubles: 262_144, chunks: 83, round_trips_per_chunk: 1 };
        assert_eq!(decode_header(&encode_header(plan)), plan);
    }
}
