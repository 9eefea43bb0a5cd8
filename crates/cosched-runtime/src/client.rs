//! The client side of the protocol, for the command line, the measuring harness and the agents: connect, make
//! sure the other end is the controller, prove who we are over TCP, then send requests and read replies.

use crate::auth::Credentials;
use crate::conn::{read_line_within, LineBounds, Shared, Stream, WRITE_TIMEOUT};
use crate::protocol::{
    write_message, AuthReply, ClassReply, ControllerProof, ExecReply, ExecRequest, JobStateReply, KillReply, LogsReply,
    MonitorTokenReply, NodeLoadReply, PidReply, RegisterRequest, Reply, Request, ResourcesReply, SignalReply,
    SlurmBeginRequest, SlurmEndRequest, StatusReply, SubmitReply, SubmitRequest, UsageReply, MAX_TRUSTED_LINE_BYTES,
};
use serde::de::DeserializeOwned;
use std::io::BufReader;
use std::path::PathBuf;
use std::sync::Arc;
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
const REPLY_TIMEOUT: Duration = Duration::from_secs(30);

/// What challenging the controller over TCP gave.
pub struct Challenged {
    /// The controller's nonce, for our own proof.
    pub nonce: String,
    /// Ours, which the controller's proof is over.
    ours: String,
    /// Did the answer already prove the controller (the agents' key)?
    proven: bool,
}

/// An open connection to the controller.
pub struct Connection {
    pub address: Address,
    stream: Arc<Stream>,
    reader: BufReader<Shared>,
}

impl Connection {
    pub fn open(address: &Address) -> Result<Connection, String> {
        let stream = match address {
            Address::Unix(path) => std::os::unix::net::UnixStream::connect(path).map(Stream::Unix),
            Address::Tcp(host_port) => std::net::TcpStream::connect(host_port).and_then(|s| {
                s.set_nodelay(true)?;
                Ok(Stream::Tcp(s))
            }),
        }
        .map_err(|e| format!("cannot reach the controller at {address}: {e}"))?;
        stream.set_write_timeout(Some(WRITE_TIMEOUT)).map_err(|e| e.to_string())?;
        let stream = Arc::new(stream);
        let reader = BufReader::new(Shared(stream.clone()));
        Ok(Connection { address: address.clone(), stream, reader })
    }

    /// Open, and over TCP prove who we are with a MUNGE credential, then check the controller's proof.
    pub fn open_as_user(address: &Address, credentials: &Credentials) -> Result<Connection, String> {
        let mut connection = Connection::open(address)?;
        if let Some(challenged) = connection.challenge(credentials)? {
            let credential = credentials.user_credential(&challenged.nonce)?;
            let reply: Reply<AuthReply> = connection.call(&Request::Auth { credential })?;
            if !reply.ok {
                return Err(reply.error.unwrap_or_else(|| "authentication failed".into()));
            }
            let auth = reply.into_result()?;
            connection.check_late_proof(credentials, &challenged, auth.controller_munge)?;
        }
        Ok(connection)
    }

    /// Make sure the other end is the controller, or start to. On a Unix socket its owner must be root (`None`).
    /// Over TCP, challenge it with a nonce of ours: with the agents' key it proves itself in its answer; with
    /// MUNGE only once we have proved who we are, with the nonce it gave (`check_late_proof`).
    pub fn challenge(&mut self, credentials: &Credentials) -> Result<Option<Challenged>, String> {
        if let Stream::Unix(socket) = &*self.stream {
            let peer = nix::sys::socket::getsockopt(socket, nix::sys::socket::sockopt::PeerCredentials)
                .map_err(|e| format!("{}: peer credentials: {e}", self.address))?;
            if peer.uid() != 0 && peer.uid() != nix::unistd::geteuid().as_raw() {
                return Err(format!("{} is served by uid {}, not by root", self.address, peer.uid()));
            }
            return Ok(None);
        }
        let ours = crate::auth::fresh_nonce()?;
        let reply: Reply<ControllerProof> = self.call(&Request::Challenge { nonce: Some(ours.clone()) })?;
        if !reply.ok {
            return Err(reply.error.unwrap_or_else(|| "the controller refused the challenge".into()));
        }
        let proof = reply.into_result()?;
        let proven = credentials.proved_by_challenge();
        if proven {
            credentials.check_controller(&proof, &ours).map_err(|e| format!("{}: {e}", self.address))?;
        }
        Ok(Some(Challenged { nonce: proof.nonce, ours, proven }))
    }

    /// Check the controller's MUNGE proof over our challenge, which it gives once we have proved who we are
    /// (nothing to do when the challenge's answer proved it already).
    pub fn check_late_proof(
        &self,
        credentials: &Credentials,
        challenged: &Challenged,
        munge: Option<String>,
    ) -> Result<(), String> {
        if challenged.proven {
            return Ok(());
        }
        let proof = ControllerProof { munge, ..ControllerProof::default() };
        credentials.check_controller(&proof, &challenged.ours).map_err(|e| format!("{}: {e}", self.address))
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

    pub fn send(&mut self, message: &impl serde::Serialize) -> Result<(), String> {
        write_message(&mut &*self.stream, message).map_err(|e| format!("writing to the controller: {e}"))
    }

    /// One line from the controller, waiting at most `idle` for it to begin (`None`: for ever).
    pub fn read_line(&mut self, idle: Option<Duration>) -> Result<Option<String>, String> {
        let bounds = LineBounds { max_bytes: MAX_TRUSTED_LINE_BYTES, idle, complete_within: REPLY_TIMEOUT };
        read_line_within(&mut self.reader, bounds).map_err(|e| format!("reading from the controller: {e}"))
    }

    /// Send one request and return the data of its reply, or why there is none.
    pub fn ask<T: DeserializeOwned>(&mut self, request: &Request) -> Result<T, CallError> {
        self.call(request).map_err(CallError::Link)?.into_result().map_err(CallError::Refused)
    }

    /// A writer on the same connection (for the agent's reports, sent from other threads).
    pub fn writer(&self) -> Shared {
        Shared(self.stream.clone())
    }
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
