//! The client side of the protocol, for the command line, the measuring harness and the agents: connect, make
//! sure the other end is the controller, prove who we are over TCP, then send requests and read replies (sealed
//! over TCP, see `seal`).

use crate::wire::auth::{Credentials, Nonces};
use crate::wire::conn::{read_line_within, LineBounds, Shared, Stream, WRITE_TIMEOUT};
use crate::wire::protocol::{
    write_message, AuthReply, ChallengeReply, ClassReply, ExecReply, ExecRequest, HistoryReply, HistoryRequest,
    JobStateReply, KillReply, LogsReply, MonitorTokenReply, NodeLoadReply, PidReply, RegisterRequest, Reply, Request,
    ResourcesReply, SignalReply, SlurmBeginRequest, SlurmEndRequest, StatusReply, SubmitReply, SubmitRequest, ToAgent,
    UsageReply, MAX_TRUSTED_LINE_BYTES,
};
use crate::wire::seal::{seal_both_ways, End, LineWriter, Opener, Sealer, SessionKey, SEAL_BYTES};
use serde::de::DeserializeOwned;
use std::io::BufReader;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Where the controller listens.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Address {
    Unix(PathBuf),
    Tcp(String),
}

impl Address {
    /// `host:port` is TCP; anything with a `/` (or without a `:`) is a socket path.
    pub fn parse(text: &str) -> Address {
        if text.contains('/') || !text.contains(':') {
            Address::Unix(PathBuf::from(text))
        } else {
            Address::Tcp(text.to_string())
        }
    }
}

impl std::fmt::Display for Address {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Address::Unix(path) => write!(f, "{}", path.display()),
            Address::Tcp(address) => f.write_str(address),
        }
    }
}

/// How long a reply may take: the controller answers at once, or within its 5 s wait for an agent.
pub(crate) const REPLY_TIMEOUT: Duration = Duration::from_secs(30);

/// An open connection to the controller.
pub struct Connection {
    pub address: Address,
    stream: Arc<Stream>,
    reader: BufReader<Shared>,
    /// After a TCP handshake: the seal of every line we send (shared with `writer`s) and of every line we read.
    sealer: Option<Arc<Mutex<Sealer>>>,
    opener: Option<Opener>,
}

impl Connection {
    /// Connect, over TCP from a privileged port when we are root (see `conn::connect_tcp`). Nothing is proved yet.
    pub fn open(address: &Address) -> Result<Connection, String> {
        let stream = match address {
            Address::Unix(path) => std::os::unix::net::UnixStream::connect(path).map(Stream::Unix),
            Address::Tcp(host_port) => crate::wire::conn::connect_tcp(host_port).map(Stream::Tcp),
        }
        .map_err(|e| format!("cannot reach the controller at {address}: {e}"))?;
        stream.set_write_timeout(Some(WRITE_TIMEOUT)).map_err(|e| e.to_string())?;
        let stream = Arc::new(stream);
        let reader = BufReader::new(Shared(stream.clone()));
        Ok(Connection { address: address.clone(), stream, reader, sealer: None, opener: None })
    }

    /// Open, and make sure the other end is the controller: on a Unix socket, served by root; over TCP, prove who
    /// we are with a MUNGE credential and check the controller's proof, after which every line is sealed.
    pub fn open_as_user(address: &Address, credentials: &Credentials) -> Result<Connection, String> {
        let mut connection = Connection::open(address)?;
        if connection.check_unix_server()? {
            return Ok(connection);
        }
        let nonces = connection.exchange_nonces()?;
        let (credential, session) = credentials.prove_user(&nonces)?;
        connection.send(&Request::Auth { credential })?;
        let reply = connection.first_sealed_line(session)?;
        let auth = serde_json::from_str::<Reply<AuthReply>>(&reply)
            .map_err(|e| format!("bad reply from the controller: {e}"))?
            .into_result()?;
        credentials
            .check_controller_to_user(auth.uid, &nonces, &auth.controller)
            .map_err(|e| format!("{}: {e}", connection.address))?;
        Ok(connection)
    }

    /// Open as the agent of `node`: over TCP, prove it (MUNGE or the agents' key) and check the controller's proof,
    /// after which every line is sealed; on a Unix socket, check that root serves it. Nothing else is sent or
    /// obeyed before.
    pub fn open_as_agent(address: &Address, credentials: &Credentials, node: &str) -> Result<Connection, String> {
        let mut connection = Connection::open(address)?;
        if connection.check_unix_server()? {
            return Ok(connection);
        }
        let nonces = connection.exchange_nonces()?;
        let (proof, session) = credentials.prove_agent(node, &nonces)?;
        connection.send(&Request::AgentAuth { node: node.to_string(), proof })?;
        let first = connection.first_sealed_line(session)?;
        let proof = match serde_json::from_str::<ToAgent>(&first) {
            Ok(ToAgent::ControllerProof(proof)) => proof,
            _ => return Err(format!("{}: no proof from the controller: not our controller", connection.address)),
        };
        credentials
            .check_controller_to_agent(node, &nonces, &proof)
            .map_err(|e| format!("{}: {e}", connection.address))?;
        Ok(connection)
    }

    /// On a Unix socket (true), check that root (or we ourselves) serves it; over TCP (false) there is nothing to
    /// check yet.
    fn check_unix_server(&self) -> Result<bool, String> {
        let Stream::Unix(socket) = &*self.stream else { return Ok(false) };
        let peer = nix::sys::socket::getsockopt(socket, nix::sys::socket::sockopt::PeerCredentials)
            .map_err(|e| format!("{}: peer credentials: {e}", self.address))?;
        if peer.uid() != 0 && peer.uid() != nix::unistd::geteuid().as_raw() {
            return Err(format!("{} is served by uid {}, not by root", self.address, peer.uid()));
        }
        Ok(true)
    }

    /// Send our nonce, read the controller's: the nonces every proof of this connection binds.
    fn exchange_nonces(&mut self) -> Result<Nonces, String> {
        let ours = crate::wire::auth::fresh_nonce()?;
        let reply: Reply<ChallengeReply> = self.call(&Request::Challenge { nonce: Some(ours.clone()) })?;
        let theirs = reply.into_result()?.nonce;
        crate::wire::auth::check_peer_nonce(&theirs).map_err(|e| format!("the controller's nonce: {e}"))?;
        Ok(Nonces { peer: ours, controller: theirs })
    }

    /// Seal every line from now on with `session`, and read the controller's first sealed line. A line that is
    /// not sealed is a refusal (its reason said, though anyone could have sent it) or not our controller.
    fn first_sealed_line(&mut self, session: SessionKey) -> Result<String, String> {
        let (sealer, opener) = seal_both_ways(session, End::Peer);
        let line = self.read_line(Some(REPLY_TIMEOUT))?;
        let line = line.ok_or_else(|| format!("the controller at {} closed the connection", self.address))?;
        self.sealer = Some(Arc::new(Mutex::new(sealer)));
        self.opener = Some(opener);
        match self.opener.as_mut().map(|opener| opener.open(&line)) {
            Some(Ok(payload)) => Ok(payload),
            _ => Err(match refusal_in(&line) {
                Some(reason) => format!("refused by the controller at {}: {reason}", self.address),
                None => {
                    format!("{}: its first line after our proof has no good seal: not our controller", self.address)
                }
            }),
        }
    }

    /// Send one request and read its reply, whose data (if any) must be a `T`.
    pub fn call<T: DeserializeOwned>(&mut self, request: &Request) -> Result<Reply<T>, String> {
        self.call_waiting(request, Some(REPLY_TIMEOUT))
    }

    /// `call`, waiting at most `idle` for the reply to begin (`None`: for as long as the request takes).
    fn call_waiting<T: DeserializeOwned>(
        &mut self,
        request: &Request,
        idle: Option<Duration>,
    ) -> Result<Reply<T>, String> {
        if let Err(e) = self.send(request) {
            // A refused connection is answered and closed at once: give its reason, not the broken pipe.
            let refusal = self.read_line(Some(Duration::from_secs(1))).ok().flatten();
            return refusal.and_then(|line| serde_json::from_str(&line).ok()).ok_or(e);
        }
        let line =
            self.read_line(idle)?.ok_or_else(|| format!("the controller at {} closed the connection", self.address))?;
        serde_json::from_str(&line).map_err(|e| format!("bad reply from the controller: {e}"))
    }

    /// Send one message (sealed after a TCP handshake).
    pub fn send(&mut self, message: &impl serde::Serialize) -> Result<(), String> {
        let mut writer = LineWriter::new(&*self.stream, self.sealer.clone());
        write_message(&mut writer, message).map_err(|e| format!("writing to the controller: {e}"))
    }

    /// One line from the controller (its payload, once its seal is checked), waiting at most `idle` for it to
    /// begin (`None`: for ever). A line whose seal is wrong is an error: drop the connection.
    pub fn read_line(&mut self, idle: Option<Duration>) -> Result<Option<String>, String> {
        let bounds =
            LineBounds { max_bytes: MAX_TRUSTED_LINE_BYTES + SEAL_BYTES, idle, complete_within: REPLY_TIMEOUT };
        let line =
            read_line_within(&mut self.reader, bounds).map_err(|e| format!("reading from the controller: {e}"))?;
        match (line, &mut self.opener) {
            (Some(line), Some(opener)) => {
                opener.open(&line).map(Some).map_err(|e| format!("from the controller at {}: {e}", self.address))
            }
            (line, _) => Ok(line),
        }
    }

    /// Send one request and return the data of its reply, or why there is none.
    pub fn ask<T: DeserializeOwned>(&mut self, request: &Request) -> Result<T, CallError> {
        self.call(request).map_err(CallError::Link)?.into_result().map_err(CallError::Refused)
    }

    /// A writer on the same connection, sealing as `send` does (for the agent's reports, sent from other threads).
    pub fn writer(&self) -> Box<dyn std::io::Write + Send> {
        Box::new(LineWriter::new(Shared(self.stream.clone()), self.sealer.clone()))
    }
}

impl Drop for Connection {
    /// The connection ends with its owner: writers handed out with `writer` stop working too.
    fn drop(&mut self) {
        self.stream.shutdown();
    }
}

/// The reason of a plain refusal line (`Reply` or `ToAgent::Refused`).
fn refusal_in(line: &str) -> Option<String> {
    let value: serde_json::Value = serde_json::from_str(line).ok()?;
    value["error"].as_str().or(value["reason"].as_str()).map(str::to_string)
}

/// Why a call brought no data.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CallError {
    /// The controller could not be reached, did not prove itself, or answered something unreadable.
    Link(String),
    /// The controller refused the request, for this reason.
    Refused(String),
}

impl std::fmt::Display for CallError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CallError::Link(message) | CallError::Refused(message) => f.write_str(message),
        }
    }
}

impl From<CallError> for String {
    fn from(error: CallError) -> String {
        error.to_string()
    }
}

/// The protocol's client for users (the command line, the measuring harness, tests): each call opens a connection,
/// proves who we are over TCP, sends one request and reads its reply as the request's reply struct.
#[derive(Clone)]
pub struct Client {
    pub address: Address,
    credentials: Credentials,
}

impl Client {
    pub fn new(address: Address, credentials: Credentials) -> Client {
        Client { address, credentials }
    }

    /// A client of the controller on this host's socket `path` (identity from the kernel).
    pub fn local(path: impl Into<PathBuf>) -> Client {
        Client::new(Address::Unix(path.into()), Credentials::default())
    }

    /// Send `request` on a fresh connection and return the data of its reply as a `T`.
    pub fn ask<T: DeserializeOwned>(&self, request: &Request) -> Result<T, CallError> {
        self.connect().map_err(CallError::Link)?.ask(request)
    }

    /// A connection that proved who the caller is, for several requests in a row.
    pub fn connect(&self) -> Result<Connection, String> {
        Connection::open_as_user(&self.address, &self.credentials)
    }

    pub fn status(&self) -> Result<StatusReply, CallError> {
        self.ask(&Request::Status {})
    }

    pub fn history(&self, request: HistoryRequest) -> Result<HistoryReply, CallError> {
        self.ask(&Request::History(request))
    }

    pub fn submit(&self, request: SubmitRequest) -> Result<SubmitReply, CallError> {
        self.ask(&Request::Submit(request))
    }

    pub fn register(&self, request: RegisterRequest) -> Result<SubmitReply, CallError> {
        self.ask(&Request::Register(request))
    }

    /// Run a command in a job on one of its nodes; the reply comes when the command ends, however long it runs.
    pub fn exec(&self, request: ExecRequest) -> Result<ExecReply, CallError> {
        let mut connection = Connection::open_as_user(&self.address, &self.credentials).map_err(CallError::Link)?;
        let reply = connection.call_waiting(&Request::Exec(request), None).map_err(CallError::Link)?;
        reply.into_result().map_err(CallError::Refused)
    }

    pub fn add_pid(&self, job: u64, pid: i32, node: Option<String>) -> Result<PidReply, CallError> {
        self.ask(&Request::AddPid { job, pid, node })
    }

    /// Administrators: a Slurm job's allocation (what the SPANK plugin sends from Slurm's prolog).
    pub fn slurm_begin(&self, request: SlurmBeginRequest) -> Result<SubmitReply, CallError> {
        self.ask(&Request::SlurmBegin(request))
    }

    /// Administrators: move a Slurm job's task into its cgroup on `node`.
    pub fn slurm_attach(&self, slurm_job: u32, pid: i32, node: &str) -> Result<PidReply, CallError> {
        self.ask(&Request::SlurmAttach { slurm_job, pid, node: node.to_string() })
    }

    /// Administrators: the Slurm job is over.
    pub fn slurm_end(&self, request: SlurmEndRequest) -> Result<JobStateReply, CallError> {
        self.ask(&Request::SlurmEnd(request))
    }

    pub fn remove_pid(&self, job: u64, pid: i32, node: Option<String>) -> Result<PidReply, CallError> {
        self.ask(&Request::RemovePid { job, pid, node })
    }

    pub fn set_class(&self, job: u64, class: &str) -> Result<ClassReply, CallError> {
        self.ask(&Request::SetClass { job, class: class.to_string() })
    }

    pub fn set_resources(
        &self,
        job: u64,
        cpus_per_node: Option<u32>,
        mem_bytes: Option<u64>,
    ) -> Result<ResourcesReply, CallError> {
        self.ask(&Request::SetResources { job, cpus_per_node, mem_bytes })
    }

    pub fn usage(&self, job: u64) -> Result<UsageReply, CallError> {
        self.ask(&Request::Usage { job })
    }

    pub fn node_load(&self, node: Option<String>) -> Result<NodeLoadReply, CallError> {
        self.ask(&Request::NodeLoad { node })
    }

    pub fn suspend(&self, job: u64) -> Result<JobStateReply, CallError> {
        self.ask(&Request::Suspend { job })
    }

    pub fn resume(&self, job: u64) -> Result<JobStateReply, CallError> {
        self.ask(&Request::Resume { job })
    }

    pub fn kill(&self, job: u64) -> Result<KillReply, CallError> {
        self.ask(&Request::Kill { job })
    }

    pub fn signal(&self, job: u64, signal: &str) -> Result<SignalReply, CallError> {
        self.ask(&Request::Signal { job, signal: signal.to_string() })
    }

    pub fn logs(&self, job: u64) -> Result<LogsReply, CallError> {
        self.ask(&Request::Logs { job })
    }

    pub fn monitor_token(&self) -> Result<MonitorTokenReply, CallError> {
        self.ask(&Request::MonitorToken {})
    }
}
