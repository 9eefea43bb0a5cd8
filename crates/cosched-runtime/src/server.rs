//! The controller's listeners: a Unix socket (identity from the peer's credentials) and, when asked, TCP (identity
//! from MUNGE credentials; agents may also prove themselves with the agents' key, see `auth`). Every connection
//! passes the `gate` first and reads its requests within bounds of size and time (`conn`).

use crate::auth::Credentials;
use crate::conn::{read_line_within, LineBounds, Shared, Stream, WRITE_TIMEOUT};
use crate::controller::Controller;
use crate::gate::{Gate, Pass, FAILURE_PAUSE};
use crate::jobs::Identity;
use crate::protocol::{
    parse_request, write_message, AgentHello, AuthReply, FromAgent, Reply, Request, ToAgent, MAX_LINE_BYTES,
    MAX_TRUSTED_LINE_BYTES,
};
use std::io::BufReader;
use std::net::SocketAddr;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// An agent that sends nothing for this long is gone (agents report every 100 ms).
const AGENT_SILENCE_LIMIT: Duration = Duration::from_secs(10);
/// Stack of a connection's thread: they parse one line and call the controller, so little is needed.
pub(crate) const CONNECTION_STACK_BYTES: usize = 256 * 1024;

/// What every listener shares.
#[derive(Clone)]
pub struct Listening {
    pub controller: Arc<Controller>,
    pub gate: Arc<Gate>,
    pub credentials: Credentials,
}

pub fn listen_unix(listening: Listening, path: &Path) -> std::io::Result<()> {
    if path.exists() {
        if UnixStream::connect(path).is_ok() {
            return Err(std::io::Error::other(format!("{} is in use by a running controller", path.display())));
        }
        std::fs::remove_file(path)?;
    }
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let listener =
        UnixListener::bind(path).map_err(|e| std::io::Error::other(format!("listening on {}: {e}", path.display())))?;
    // Every user may connect; what they may do is decided per request.
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o666))?;
    std::thread::Builder::new().name("unix-listener".into()).spawn(move || {
        accept_forever("unix socket", || listener.accept().map(|(s, _)| s), |stream| admit_local(&listening, stream))
    })?;
    Ok(())
}

pub fn listen_tcp(listening: Listening, address: &str) -> std::io::Result<SocketAddr> {
    let listener = std::net::TcpListener::bind(address)
        .map_err(|e| std::io::Error::other(format!("listening on {address}: {e}")))?;
    let bound = listener.local_addr()?;
    std::thread::Builder::new().name("tcp-listener".into()).spawn(move || {
        accept_forever("tcp", || listener.accept(), |(stream, peer)| admit_remote(&listening, stream, peer))
    })?;
    Ok(bound)
}

/// Accept until the process ends. When accepting fails (no descriptors left, no memory), wait before trying
/// again, longer each time up to a second, and say so once per episode: never spin.
pub(crate) fn accept_forever<T>(what: &str, mut accept: impl FnMut() -> std::io::Result<T>, mut admit: impl FnMut(T)) {
    let mut pause = Duration::ZERO;
    loop {
        match accept() {
            Ok(connection) => {
                if !pause.is_zero() {
                    eprintln!("cosched controller: accepting on the {what} again");
                }
                pause = Duration::ZERO;
                admit(connection);
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => {
                if pause.is_zero() {
                    eprintln!("cosched controller: accepting on the {what}: {e}; backing off");
                }
                pause = (pause * 2).clamp(Duration::from_millis(10), Duration::from_secs(1));
                std::thread::sleep(pause);
            }
        }
    }
}

fn admit_local(listening: &Listening, stream: UnixStream) {
    let peer = nix::sys::socket::getsockopt(&stream, nix::sys::socket::sockopt::PeerCredentials);
    let Ok(peer) = peer else { return };
    let stream = Stream::Unix(stream);
    let who = listening.controller.identity_for(peer.uid(), peer.gid());
    let pass = match listening.gate.admit_user(who.uid, who.admin) {
        Ok(pass) => pass,
        Err(reason) => return refuse(&stream, &reason),
    };
    let session = Session::new(listening.clone(), stream, pass, Peer::Local(who));
    spawn_session("unix-client", session);
}

fn admit_remote(listening: &Listening, stream: std::net::TcpStream, peer: SocketAddr) {
    let _ = stream.set_nodelay(true);
    let stream = Stream::Tcp(stream);
    let pass = match listening.gate.admit_unauthenticated(peer.ip()) {
        Ok(pass) => pass,
        Err(reason) => return refuse(&stream, &reason),
    };
    let session = Session::new(listening.clone(), stream, pass, Peer::Remote(peer));
    spawn_session("tcp-client", session);
}

/// Tell a connection why it is refused, without waiting on it, and close it.
fn refuse(stream: &Stream, reason: &str) {
    let _ = stream.set_write_timeout(Some(Duration::from_millis(100)));
    let _ = write_message(&mut &*stream, &Reply::error(reason));
    stream.shutdown();
}

fn spawn_session(name: &str, session: Session) {
    let spawned =
        std::thread::Builder::new().name(name.into()).stack_size(CONNECTION_STACK_BYTES).spawn(move || session.serve());
    if let Err(e) = spawned {
        eprintln!("cosched controller: no thread for a connection: {e}");
    }
}

enum Peer {
    /// Unix socket: the kernel said who it is.
    Local(Identity),
    /// TCP: nobody until it proves who it is.
    Remote(SocketAddr),
}

struct Session {
    listening: Listening,
    stream: Arc<Stream>,
    reader: BufReader<Shared>,
    pass: Pass,
    peer: Peer,
    who: Option<Identity>,
    /// The nonce of the last `Challenge`, used by the next `Auth` or `AgentHello` (once).
    nonce: Option<String>,
    /// The peer's own nonce of that `Challenge`: the controller's MUNGE proof is over it, once the peer has proved
    /// who it is.
    their_nonce: Option<String>,
    opened: Instant,
}

impl Session {
    fn new(listening: Listening, stream: Stream, pass: Pass, peer: Peer) -> Session {
        let _ = stream.set_write_timeout(Some(WRITE_TIMEOUT));
        let stream = Arc::new(stream);
        let who = match &peer {
            Peer::Local(identity) => Some(*identity),
            Peer::Remote(_) => None,
        };
        let reader = BufReader::new(Shared(stream.clone()));
        Session { listening, stream, reader, pass, peer, who, nonce: None, their_nonce: None, opened: Instant::now() }
    }

    /// Answer requests until the peer hangs up, falls silent, or fails to authenticate.
    fn serve(mut self) {
        loop {
            let bounds = self.line_bounds();
            let line = match read_line_within(&mut self.reader, bounds) {
                Ok(Some(line)) => line,
                Ok(None) => return,
                Err(e) => return self.reply_and_close(&Reply::error(format!("bad request: {e}"))),
            };
            if line.trim().is_empty() {
                continue;
            }
            let request = match parse_request(&line) {
                Ok(request) => request,
                Err(message) => {
                    if self.reply(&Reply::error(message)).is_err() {
                        return;
                    }
                    continue;
                }
            };
            let reply = match request {
                Request::AgentHello(hello) => return self.agent_hello(hello),
                Request::Challenge { nonce } => self.challenge(nonce.as_deref()),
                Request::Auth { credential } => match self.authenticate(&credential) {
                    Ok(reply) => reply,
                    Err(reason) => {
                        let refusal = Reply::error(format!("authentication failed: {reason}"));
                        return self.authentication_failed(&reason, &refusal);
                    }
                },
                request => match &self.who {
                    Some(identity) => self.listening.controller.handle(identity, request),
                    None => Reply::error("authenticate first: challenge, then auth with a MUNGE credential"),
                },
            };
            if self.reply(&reply).is_err() {
                return;
            }
        }
    }

    /// An authenticated peer may idle; one that has not must authenticate within the request time.
    fn line_bounds(&self) -> LineBounds {
        let limits = self.listening.gate.limits();
        let idle = match self.who {
            Some(_) => limits.idle_timeout,
            None => limits.request_timeout.saturating_sub(self.opened.elapsed()).max(Duration::from_millis(1)),
        };
        LineBounds { max_bytes: MAX_LINE_BYTES, idle: Some(idle), complete_within: limits.request_timeout }
    }

    fn reply(&mut self, reply: &Reply) -> std::io::Result<()> {
        write_message(&mut &*self.stream, reply)
    }

    fn reply_and_close(&mut self, reply: &Reply) {
        let _ = self.reply(reply);
        self.stream.shutdown();
    }

    fn challenge(&mut self, theirs: Option<&str>) -> Reply {
        let proof =
            crate::auth::fresh_nonce().and_then(|ours| self.listening.credentials.prove_controller(ours, theirs));
        match proof {
            Ok(proof) => {
                self.nonce = Some(proof.nonce.clone());
                self.their_nonce = theirs.map(str::to_string);
                Reply::ok(proof)
            }
            Err(e) => Reply::error(format!("challenge: {e}")),
        }
    }

    fn authenticate(&mut self, credential: &str) -> Result<Reply, String> {
        if matches!(self.peer, Peer::Local(_)) {
            return Ok(Reply::error("auth is for TCP: on this socket your identity comes from the kernel"));
        }
        let nonce = self.nonce.take().ok_or("ask for a challenge first")?;
        let credentials = &self.listening.credentials;
        let (uid, gid) = credentials.check_user(credential, &nonce)?;
        let who = self.listening.controller.identity_for(uid, gid);
        self.pass.authenticated(uid, who.admin)?;
        let proof = credentials.munge_proof_for(self.their_nonce.take().as_deref(), uid)?;
        self.who = Some(who);
        Ok(Reply::ok(AuthReply { uid, gid, admin: who.admin, controller_munge: proof }))
    }

    /// Log, pause (so guessing is slow), count the failure against the address, then answer `refusal` and close.
    fn authentication_failed(self, reason: &str, refusal: &impl serde::Serialize) {
        if let Peer::Remote(address) = self.peer {
            eprintln!("cosched controller: authentication failed from {address}: {reason}");
            std::thread::sleep(FAILURE_PAUSE);
            if self.listening.gate.authentication_failed(address.ip()) {
                eprintln!("cosched controller: {} failed too often: barred for a while", address.ip());
            }
        }
        let _ = write_message(&mut &*self.stream, refusal);
        self.stream.shutdown();
    }

    fn agent_hello(mut self, hello: AgentHello) {
        let proved = match (&self.peer, &hello.proof) {
            (Peer::Local(who), _) if who.uid == 0 => Ok(()),
            (Peer::Local(_), _) => Err("agents run as root".to_string()),
            (Peer::Remote(_), None) => Err("an agent over TCP must prove it is one (MUNGE or the agents' key)".into()),
            (Peer::Remote(_), Some(proof)) => match self.nonce.take() {
                Some(nonce) => self.listening.credentials.check_agent(&hello.node, proof, &nonce),
                None => Err("ask for a challenge first".into()),
            },
        };
        if let Err(reason) = proved {
            let refusal = ToAgent::Refused { reason: format!("not an agent: {reason}") };
            return self.authentication_failed(&reason, &refusal);
        }
        // Over TCP with MUNGE, an agent obeys nothing before this proof; made for root, as agents run as root (one
        // that proved itself with the agents' key has checked the controller already and passes over it).
        match self.listening.credentials.munge_proof_for(self.their_nonce.as_deref(), crate::auth::AGENT_UID) {
            Ok(Some(munge)) if matches!(self.peer, Peer::Remote(_)) => {
                if write_message(&mut &*self.stream, &ToAgent::ControllerCredential { munge }).is_err() {
                    return;
                }
            }
            Ok(_) => {}
            Err(e) => return self.reply_and_close(&Reply::error(format!("the controller's proof: {e}"))),
        }
        self.pass.agent();
        agent_link(&self.listening.controller, self.reader, self.stream, hello);
    }
}

fn agent_link(controller: &Arc<Controller>, mut reader: BufReader<Shared>, stream: Arc<Stream>, hello: AgentHello) {
    let node = hello.node.clone();
    let link: crate::controller::AgentWriter = Arc::new(Mutex::new(Box::new(Shared(stream.clone()))));
    if let Err(reason) = controller.agent_connected(&hello, link.clone()) {
        let _ = write_message(&mut *link.lock().unwrap(), &ToAgent::Refused { reason });
        return;
    }
    eprintln!("cosched controller: agent {node} connected ({} CPUs, freezer {})", hello.cpus, hello.freezer);
    let bounds = LineBounds {
        max_bytes: MAX_TRUSTED_LINE_BYTES,
        idle: Some(AGENT_SILENCE_LIMIT),
        complete_within: AGENT_SILENCE_LIMIT,
    };
    loop {
        match read_line_within(&mut reader, bounds) {
            Ok(Some(line)) => match serde_json::from_str::<FromAgent>(&line) {
                Ok(event) => controller.agent_event(&node, event),
                Err(e) => eprintln!("cosched controller: bad message from agent {node}: {e}"),
            },
            Ok(None) => break,
            Err(e) => {
                eprintln!("cosched controller: agent {node}: {e}");
                break;
            }
        }
    }
    stream.shutdown();
    eprintln!("cosched controller: agent {node} disconnected");
    controller.agent_disconnected(&node);
}
