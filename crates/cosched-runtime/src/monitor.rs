//! The live web monitor served by the controller: one page and a small JSON
//! API. Every request carries a token (`cosched monitor` prints a URL with
//! one) that stands for the user who asked for it, so the buttons go through
//! the same permission checks as the command line.

use crate::controller::Controller;
use crate::protocol::{Reply, Request};
use std::sync::Arc;
use tiny_http::{Header, Method, Response, Server};

const PAGE: &str = include_str!("../../../web/monitor.html");

/// Serve on `address` (e.g. `127.0.0.1:8180`); returns the bound address.
pub fn serve(controller: Arc<Controller>, address: &str) -> std::io::Result<std::net::SocketAddr> {
    let server = Server::http(address).map_err(|e| std::io::Error::other(format!("monitor on {address}: {e}")))?;
    let bound =
        server.server_addr().to_ip().ok_or_else(|| std::io::Error::other("the monitor is not on an IP address"))?;
    std::thread::Builder::new().name("monitor".into()).spawn(move || {
        for request in server.incoming_requests() {
            let controller = controller.clone();
            let _ =
                std::thread::Builder::new().name("monitor-request".into()).spawn(move || answer(&controller, request));
        }
    })?;
    Ok(bound)
}

fn answer(controller: &Controller, mut request: tiny_http::Request) {
    let path = request.url().split('?').next().unwrap_or("").to_string();
    if request.method() == &Method::Get && (path == "/" || path == "/index.html") {
        let html = Header::from_bytes("Content-Type", "text/html; charset=utf-8").expect("static header");
        let _ = request.respond(Response::from_string(PAGE).with_header(html));
        return;
    }
    let token = request
        .headers()
        .iter()
        .find(|h| h.field.equiv("X-Cosched-Token"))
        .map(|h| h.value.as_str().to_string())
        .unwrap_or_default();
    let mut body = String::new();
    let _ = std::io::Read::read_to_string(&mut request.as_reader().take(64 * 1024), &mut body);
    let reply = match controller.monitor_identity(&token) {
        None => (403, Reply::error("no valid monitor token: open the URL that `cosched monitor` prints")),
        Some(who) => match route(request.method(), &path, &body) {
            Ok(req) => (200, controller.handle(&who, req)),
            Err(message) => (400, Reply::error(message)),
        },
    };
    let json = Header::from_bytes("Content-Type", "application/json").expect("static header");
    let text = serde_json::to_string(&reply.1).unwrap_or_default();
    let _ = request.respond(Response::from_string(text).with_status_code(reply.0).with_header(json));
}

use std::io::Read as _;

/// The request a monitor URL stands for.
fn route(method: &Method, path: &str, body: &str) -> Result<Request, String> {
    let parts: Vec<&str> = path.trim_matches('/').split('/').collect();
    match (method, parts.as_slice()) {
        (Method::Get, ["api", "status"]) => Ok(Request::Status),
        (Method::Post, ["api", "jobs", id, action]) => {
            let job: u64 = id.parse().map_err(|_| format!("bad job id {id:?}"))?;
            match *action {
                "suspend" => Ok(Request::Suspend { job }),
                "resume" => Ok(Request::Resume { job }),
                "kill" => Ok(Request::Kill { job }),
                "class" => {
                    let value: serde_json::Value = serde_json::from_str(body).map_err(|e| format!("bad body: {e}"))?;
                    let class = value["class"].as_str().ok_or("the body needs {\"class\": ...}")?;
                    Ok(Request::SetClass { job, class: class.to_string() })
                }
                other => Err(format!("unknown action {other:?}")),
            }
        }
        _ => Err(format!("no such endpoint: {method} {path}")),
    }
}
