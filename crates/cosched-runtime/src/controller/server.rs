//! The controller's listeners: a Unix socket (identity from the peer's credentials) and, when asked, TCP (identity
//! from MUNGE credentials; agents may also prove themselves with the agents' key, see `auth`). Every connection
//! passes the `gate` first and reads its requests within bounds of size and time (`conn`); after a TCP handshake
//! every line both ways is sealed (`seal`).

use crate::controller::Controller;
use crate::gate::{Gate, Pass, FAILURE_PAUSE, FIRST_WORDS_WITHIN};
use crate::wire::auth::{Credentials, Nonces};
use crate::wire::conn::{read_line_within, LineBounds, Shared, Stream, WRITE_TIMEOUT};
use crate::wire::jobs::Identity;
use crate::wire::protocol::{
    parse_request, write_message, AgentHello, AgentProof, AuthReply, ChallengeReply, FromAgent, Reply, Request,
    ToAgent, MAX_LINE_BYTES, MAX_TRUSTED_LINE_BYTES,
};
use crate::wire::seal::{seal_both_ways, End, LineWriter, Opener, Sealer, SessionKey, SEAL_BYTES};
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
    // An old socket is removed and the new one made 0666 by its path: nobody else may be able to change its
    // directory.
    let dir = path.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
    crate::private_dir::ensure(dir, "socket directory")?;
    if path.exists() {
        if UnixStream::connect(path).is_ok() {
            return Err(std::io::Error::other(format!("{} is in use by a running controller", path.display())));
        }
        std::fs::remove_file(path)?;
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
                    crate::log_line!("cosched controller: accepting on the {what} again");
                }
                pause = Duration::ZERO;
                admit(connection);
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => {
                if pause.is_zero() {
                    crate::log_line!("cosched controller: accepting on the {what}: {e}; backing off");
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
    let stream = Arc::new(Stream::Unix(stream));
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
    let stream = Arc::new(Stream::Tcp(stream));
    let pass = match listening.gate.admit_unauthenticated(peer, stream.clone()) {
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
        crate::log_line!("cosched controller: no thread for a connection: {e}");
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
    /// The nonces of the last `Challenge`, used by the next `Auth` or `AgentAuth` (once).
    nonces: Option<Nonces>,
    /// The node of a TCP peer that proved to be its agent: its sealed `AgentHello` comes next.
    proved_agent: Option<String>,
    /// After a TCP handshake: the seal of every line we send and of every line we read.
    sealer: Option<Arc<Mutex<Sealer>>>,
    opener: Option<Opener>,
    /// Lines read so far.
    /// Requests read (blank lines are none), and when the last one came (at first, when the peer connected).
    requests_read: u64,
    last_request: Instant,
    opened: Instant,
}

impl Session {
    fn new(listening: Listening, stream: Arc<Stream>, pass: Pass, peer: Peer) -> Session {
        let _ = stream.set_write_timeout(Some(WRITE_TIMEOUT));
        let who = match &peer {
            Peer::Local(identity) => Some(*identity),
            Peer::Remote(_) => None,
        };
        let reader = BufReader::new(Shared(stream.clone()));
        Session {
            listening,
            stream,
            reader,
            pass,
            peer,
            who,
            nonces: None,
            proved_agent: None,
            sealer: None,
            opener: None,
            requests_read: 0,
            last_request: Instant::now(),
            opened: Instant::now(),
        }
    }

    /// Answer requests until the peer hangs up, falls silent, fails to authenticate, or sends a line whose seal
    /// is wrong.
    fn serve(mut self) {
        loop {
            let line = match self.next_line() {
                Ok(Some(line)) => line,
                Ok(None) => return,
                Err(reply) => return self.reply_and_close(&reply),
            };
            // A blank line is no request: it neither counts as the peer's first words nor keeps it connected.
            if line.trim().is_empty() {
                continue;
            }
            self.requests_read += 1;
            self.last_request = Instant::now();
            if self.requests_read == 1 {
                self.pass.spoke();
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
                Request::AgentAuth { node, proof } => match self.authenticate_agent(&node, &proof) {
                    Ok(()) => continue,
                    Err(reason) => {
                        let refusal = ToAgent::Refused { reason: format!("not an agent: {reason}") };
                        return self.authentication_failed(&reason, &refusal);
                    }
                },
                Request::Challenge { nonce } => self.challenge(nonce.as_deref()),
                Request::Auth { credential } => match self.authenticate_user(&credential) {
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

    /// The next line's payload (its seal checked after a TCP handshake); `Ok(None)` at the end, or when the seal
    /// is wrong (said in the log, nothing acted on); `Err` with the reply that ends the connection.
    fn next_line(&mut self) -> Result<Option<String>, Reply> {
        let bounds = self.line_bounds();
        let line = match read_line_within(&mut self.reader, bounds) {
            Ok(Some(line)) => line,
            Ok(None) => return Ok(None),
            Err(e) => return Err(Reply::error(format!("bad request: {e}"))),
        };
        let Some(opener) = &mut self.opener else { return Ok(Some(line)) };
        match opener.open(&line) {
            Ok(payload) => Ok(Some(payload)),
            Err(e) => {
                crate::log_line!("cosched controller: {}: {e}: the connection is closed", self.peer_name());
                self.stream.shutdown();
                Ok(None)
            }
        }
    }

    fn peer_name(&self) -> String {
        match &self.peer {
            Peer::Local(who) => format!("uid {} on the socket", who.uid),
            Peer::Remote(address) => address.to_string(),
        }
    }

    /// An authenticated peer may idle for the idle time after it connected or made its last request; one that has
    /// not must make its first request at once and authenticate within the request time. Blank lines are no
    /// request: they move none of these clocks.
    fn line_bounds(&self) -> LineBounds {
        let limits = self.listening.gate.limits();
        let authenticated = self.who.is_some() || matches!(self.peer, Peer::Local(_));
        let left = if authenticated {
            limits.idle_timeout.saturating_sub(self.last_request.elapsed())
        } else {
            let left = limits.request_timeout.saturating_sub(self.opened.elapsed());
            let first_words_left = FIRST_WORDS_WITHIN.saturating_sub(self.opened.elapsed());
            if self.requests_read == 0 {
                left.min(first_words_left)
            } else {
                left
            }
        };
        let idle = left.max(Duration::from_millis(1));
        let seal = if self.opener.is_some() { SEAL_BYTES } else { 0 };
        LineBounds { max_bytes: MAX_LINE_BYTES + seal, idle: Some(idle), complete_within: limits.request_timeout }
    }

    fn reply(&mut self, reply: &Reply) -> std::io::Result<()> {
        write_message(&mut LineWriter::new(&*self.stream, self.sealer.clone()), reply)
    }

    fn reply_and_close(&mut self, reply: &Reply) {
        let _ = self.reply(reply);
        self.stream.shutdown();
    }

    /// The controller's nonce for this connection, and nothing else: it proves itself only once the peer has.
    fn challenge(&mut self, theirs: Option<&str>) -> Reply {
        if matches!(self.peer, Peer::Local(_)) || self.opener.is_some() {
            return Reply::error("challenge is the first line over TCP: on this socket your identity is known");
        }
        let Some(theirs) = theirs else {
            return Reply::error("a challenge carries your own nonce (hex): every proof binds both");
        };
        if let Err(e) = crate::wire::auth::check_peer_nonce(theirs) {
            return Reply::error(format!("challenge: {e}"));
        }
        match crate::wire::auth::fresh_nonce() {
            Ok(ours) => {
                self.nonces = Some(Nonces { peer: theirs.to_string(), controller: ours.clone() });
                Reply::ok(ChallengeReply { nonce: ours })
            }
            Err(e) => Reply::error(format!("challenge: {e}")),
        }
    }

    /// A remote user proves who it is; the controller proves itself back in the reply, the first sealed line.
    fn authenticate_user(&mut self, credential: &str) -> Result<Reply, String> {
        if matches!(self.peer, Peer::Local(_)) || self.opener.is_some() {
            return Ok(Reply::error("auth is for TCP, once: on this socket your identity comes from the kernel"));
        }
        let nonces = self.nonces.take().ok_or("ask for a challenge first, with your nonce")?;
        let credentials = &self.listening.credentials;
        let (uid, gid, session) = credentials.check_user(credential, &nonces)?;
        let who = self.listening.controller.identity_for(uid, gid);
        self.pass.authenticated(uid, who.admin)?;
        let controller = credentials.prove_to_user(uid, &nonces)?;
        self.seal_from_now_on(session);
        self.who = Some(who);
        Ok(Reply::ok(AuthReply { uid, gid, admin: who.admin, controller }))
    }

    /// A TCP peer proves it is the agent of `node`; the controller proves itself back, the first sealed line. The
    /// agent's hello comes next.
    fn authenticate_agent(&mut self, node: &str, proof: &AgentProof) -> Result<(), String> {
        if matches!(self.peer, Peer::Local(_)) || self.opener.is_some() {
            return Err("agent_auth is for TCP, once".into());
        }
        crate::wire::protocol::checks::validate_node_name(node)?;
        let nonces = self.nonces.take().ok_or("ask for a challenge first, with your nonce")?;
        let credentials = &self.listening.credentials;
        let (session, with) = credentials.check_agent(node, proof, &nonces)?;
        self.pass.agent()?;
        let answer = credentials.prove_to_agent(node, &nonces, with)?;
        self.seal_from_now_on(session);
        self.proved_agent = Some(node.to_string());
        let mut writer = LineWriter::new(&*self.stream, self.sealer.clone());
        write_message(&mut writer, &ToAgent::ControllerProof(answer)).map_err(|e| format!("answering: {e}"))
    }

    fn seal_from_now_on(&mut self, session: SessionKey) {
        let (sealer, opener) = seal_both_ways(session, End::Controller);
        self.sealer = Some(Arc::new(Mutex::new(sealer)));
        self.opener = Some(opener);
    }

    /// Log, pause (so guessing is slow: each guess costs its connection a second and then the connection), answer
    /// `refusal` and close. The address is not barred: its agent and its other users go on.
    fn authentication_failed(self, reason: &str, refusal: &impl serde::Serialize) {
        if let Peer::Remote(address) = self.peer {
            crate::log_line!("cosched controller: authentication failed from {address}: {reason}");
            std::thread::sleep(FAILURE_PAUSE);
        }
        let _ = write_message(&mut &*self.stream, refusal);
        self.stream.shutdown();
    }

    /// An agent's hello: from root on the Unix socket, or, sealed, from the TCP peer that proved to be this node's
    /// agent.
    fn agent_hello(mut self, hello: AgentHello) {
        let proved = match (&self.peer, &self.proved_agent) {
            (Peer::Local(who), _) if who.uid == 0 => self.pass.agent(),
            (Peer::Local(_), _) => Err("agents run as root".to_string()),
            (Peer::Remote(_), Some(node)) if *node == hello.node => Ok(()),
            (Peer::Remote(_), Some(node)) => Err(format!("proved to be the agent of {node}, not of {}", hello.node)),
            (Peer::Remote(_), None) => {
                Err("an agent over TCP proves itself first (agent_auth: MUNGE or the agents' key)".into())
            }
        };
        if let Err(reason) = proved {
            let refusal = ToAgent::Refused { reason: format!("not an agent: {reason}") };
            let writer = &mut LineWriter::new(&*self.stream, self.sealer.clone());
            if self.proved_agent.is_some() {
                let _ = write_message(writer, &refusal);
                return self.stream.shutdown();
            }
            return self.authentication_failed(&reason, &refusal);
        }
        let link = AgentLink { stream: self.stream, reader: self.reader, sealer: self.sealer, opener: self.opener };
        link.serve(&self.listening.controller, hello);
    }
}

/// An agent's connection once it said hello: the controller's orders one way, the agent's events the other,
/// sealed over TCP.
struct AgentLink {
    stream: Arc<Stream>,
    reader: BufReader<Shared>,
    sealer: Option<Arc<Mutex<Sealer>>>,
    opener: Option<Opener>,
}

impl AgentLink {
    fn serve(mut self, controller: &Arc<Controller>, hello: AgentHello) {
        let node = hello.node.clone();
        let writer = LineWriter::new(Shared(self.stream.clone()), self.sealer.clone());
        let link: crate::controller::AgentWriter = Arc::new(Mutex::new(Box::new(writer)));
        if let Err(reason) = controller.agent_connected(&hello, link.clone()) {
            let _ = write_message(&mut *link.lock().unwrap(), &ToAgent::Refused { reason });
            return;
        }
        crate::log_line!("cosched controller: agent {node} connected ({} CPUs, freezer {})", hello.cpus, hello.freezer);
        loop {
            match self.next_event() {
                Ok(Some(event)) => {
                    if !controller.agent_event(&node, &link, event) {
                        crate::log_line!("cosched controller: agent {node}: its link was closed after a failed write");
                        break;
                    }
                }
                Ok(None) => break,
                Err(e) => {
                    crate::log_line!("cosched controller: agent {node}: {e}");
                    break;
                }
            }
        }
        self.stream.shutdown();
        crate::log_line!("cosched controller: agent {node} disconnected");
        controller.agent_disconnected(&node, &link);
    }

    /// The agent's next event; an unreadable one is logged and skipped, a line whose seal is wrong ends the link.
    fn next_event(&mut self) -> Result<Option<FromAgent>, String> {
        let bounds = LineBounds {
            max_bytes: MAX_TRUSTED_LINE_BYTES + SEAL_BYTES,
            idle: Some(AGENT_SILENCE_LIMIT),
            complete_within: AGENT_SILENCE_LIMIT,
        };
        loop {
            let Some(line) = read_line_within(&mut self.reader, bounds).map_err(|e| e.to_string())? else {
                return Ok(None);
            };
            let payload = match &mut self.opener {
                Some(opener) => opener.open(&line)?,
                None => line,
            };
            match serde_json::from_str::<FromAgent>(&payload) {
                Ok(event) => return Ok(Some(event)),
                Err(e) => crate::log_line!("cosched controller: bad message from an agent: {e}"),
            }
        }
    }
}
