//! The controller's listeners: a Unix socket (identity from the peer's
//! credentials) and, when asked, TCP (identity from the shared key).

use crate::controller::Controller;
use crate::jobs::Identity;
use crate::protocol::{
    parse_request, read_line, read_line_limited, write_message, FromAgent, Reply, Request, ToAgent,
    MAX_TRUSTED_LINE_BYTES,
};
use std::io::{BufReader, Read, Write};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::Path;
use std::sync::{Arc, Mutex};

pub fn listen_unix(controller: Arc<Controller>, path: &Path) -> std::io::Result<()> {
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
        for stream in listener.incoming().flatten() {
            let controller = controller.clone();
            let _ = std::thread::Builder::new().name("unix-client".into()).spawn(move || {
                let peer = nix::sys::socket::getsockopt(&stream, nix::sys::socket::sockopt::PeerCredentials)
                    .map(|c| controller.identity_for(c.uid(), c.gid()));
                let Ok(reader) = stream.try_clone() else { return };
                match peer {
                    Ok(who) => serve(&controller, Box::new(reader), Box::new(stream), Some(who), true),
                    Err(e) => eprintln!("cosched controller: peer credentials: {e}"),
                }
            });
        }
    })?;
    Ok(())
}

pub fn listen_tcp(controller: Arc<Controller>, address: &str) -> std::io::Result<std::net::SocketAddr> {
    if controller.settings.token.is_none() {
        return Err(std::io::Error::other("TCP needs a shared key: give --key-file"));
    }
    let listener = std::net::TcpListener::bind(address)
        .map_err(|e| std::io::Error::other(format!("listening on {address}: {e}")))?;
    let bound = listener.local_addr()?;
    std::thread::Builder::new().name("tcp-listener".into()).spawn(move || {
        for stream in listener.incoming().flatten() {
            let controller = controller.clone();
            let _ = stream.set_nodelay(true);
            let _ = std::thread::Builder::new().name("tcp-client".into()).spawn(move || {
                let Ok(reader) = stream.try_clone() else { return };
                serve(&controller, Box::new(reader), Box::new(stream), None, false);
            });
        }
    })?;
    Ok(bound)
}

/// Answer requests until the peer hangs up. A connection that says
/// `agent_hello` becomes that agent's link.
fn serve(
    controller: &Arc<Controller>,
    reader: Box<dyn Read + Send>,
    mut writer: Box<dyn Write + Send>,
    mut who: Option<Identity>,
    local: bool,
) {
    let mut reader = BufReader::new(reader);
    loop {
        let line = match read_line(&mut reader) {
            Ok(Some(line)) => line,
            Ok(None) => return,
            Err(e) => {
                let _ = write_message(&mut writer, &Reply::error(format!("bad request: {e}")));
                return;
            }
        };
        if line.trim().is_empty() {
            continue;
        }
        let request = match parse_request(&line) {
            Ok(r) => r,
            Err(message) => {
                if write_message(&mut writer, &Reply::error(message)).is_err() {
                    return;
                }
                continue;
            }
        };
        let reply = match request {
            Request::AgentHello(hello) => {
                let allowed = if local { who.is_some_and(|w| w.uid == 0) } else { token_ok(controller, &hello.token) };
                if !allowed {
                    let reason = "agents must run as root (Unix socket) or present the shared key (TCP)";
                    let _ = write_message(&mut writer, &ToAgent::Refused { reason: reason.into() });
                    return;
                }
                return agent_link(controller, reader, writer, hello);
            }
            Request::Auth { token, uid, gid } if !local => {
                if controller.token_matches(&token) {
                    who = Some(controller.identity_for(uid, gid));
                    Reply::ok(serde_json::json!({ "uid": uid }))
                } else {
                    Reply::error("authentication failed: wrong key")
                }
            }
            request => match &who {
                Some(identity) => controller.handle(identity, request),
                None => Reply::error("authenticate first (auth with the shared key)"),
            },
        };
        if write_message(&mut writer, &reply).is_err() {
            return;
        }
    }
}

fn token_ok(controller: &Controller, token: &Option<String>) -> bool {
    token.as_deref().is_some_and(|t| controller.token_matches(t))
}

fn agent_link(
    controller: &Arc<Controller>,
    mut reader: BufReader<Box<dyn Read + Send>>,
    writer: Box<dyn Write + Send>,
    hello: crate::protocol::AgentHello,
) {
    let node = hello.node.clone();
    let link = Arc::new(Mutex::new(writer));
    if let Err(reason) = controller.agent_connected(&hello, link.clone()) {
        let _ = write_message(&mut *link.lock().unwrap(), &ToAgent::Refused { reason });
        return;
    }
    eprintln!("cosched controller: agent {node} connected ({} CPUs, freezer {})", hello.cpus, hello.freezer);
    while let Ok(Some(line)) = read_line_limited(&mut reader, MAX_TRUSTED_LINE_BYTES) {
        match serde_json::from_str::<FromAgent>(&line) {
            Ok(event) => controller.agent_event(&node, event),
            Err(e) => eprintln!("cosched controller: bad message from agent {node}: {e}"),
        }
    }
    eprintln!("cosched controller: agent {node} disconnected");
    controller.agent_disconnected(&node);
}
