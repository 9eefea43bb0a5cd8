//! The live web monitor served by the controller: one page, a small JSON
//! API, and the OpenMetrics figures at `/metrics`. Every API request stands for
//! a user, so the buttons go through the same permission checks as the command
//! line: `cosched monitor` prints a URL with a token, which the first request
//! spends for a session cookie (HttpOnly, SameSite=Strict) and a redirect to the
//! bare URL, so the token leaves the URL — and the history, the screen, `ps` —
//! at once. `/metrics` needs no token: it shows only figures every user sees in
//! `cosched status` (`metrics.rs`), and `--metrics off` turns it off.
//!
//! Every request must name the monitor as it is served (the `Host` header: its
//! address, `localhost`, or a name an administrator added), so a page whose name
//! an attacker points at this address (DNS rebinding) gets nothing, `/metrics`
//! included. A request that acts through the session cookie must carry a header
//! no other site's form or page can add without the monitor's consent
//! (`X-Cosched-Monitor`), and come from the monitor's own origin when it says
//! where it comes from.

use crate::controller::metrics::MetricsAccess;
use crate::controller::server::{accept_forever, Listening, CONNECTION_STACK_BYTES};
use crate::controller::Controller;
use crate::gate::{Pass, FIRST_WORDS_WITHIN};
use crate::wire::auth::monitor_tokens::MONITOR_TOKEN_LIFETIME;
use crate::wire::conn::{Shared, Stream, WRITE_TIMEOUT};
use crate::wire::http::{read_body, read_head, write_response, HttpRequest, HttpResponse};
use crate::wire::jobs::Identity;
use crate::wire::protocol::{Reply, Request};
use std::io::BufReader;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Instant;

const PAGE: &str = include_str!("../../../../web/monitor.html");

/// Headers on every answer: never framed (clickjacking of the buttons), never sniffed, never cached (replies hold
/// other users' jobs and the token's rights), no token leaked in a Referer.
fn security_headers(content_security_policy: &str) -> Vec<(String, String)> {
    [
        ("X-Frame-Options", "DENY"),
        ("X-Content-Type-Options", "nosniff"),
        ("Cache-Control", "no-store"),
        ("Referrer-Policy", "no-referrer"),
        ("Content-Security-Policy", content_security_policy),
    ]
    .iter()
    .map(|(field, value)| (field.to_string(), value.to_string()))
    .collect()
}

/// The page with a fresh nonce on its one inline script and style, and the policy that allows only those.
fn page_with_policy() -> (String, String) {
    // Without randomness the nonce is empty and the policy then allows no inline script: the page fails closed.
    let nonce = crate::job_tag::random_hex(16).unwrap_or_default();
    let page = PAGE.replacen("<script>", &format!("<script nonce=\"{nonce}\">"), 1).replacen(
        "<style>",
        &format!("<style nonce=\"{nonce}\">"),
        1,
    );
    let policy = format!(
        "default-src 'self'; script-src 'nonce-{nonce}'; style-src 'nonce-{nonce}'; \
         frame-ancestors 'none'; base-uri 'none'; form-action 'none'"
    );
    (page, policy)
}

/// The API's policy: nothing may be loaded or framed from a JSON reply.
const API_POLICY: &str = "default-src 'none'; frame-ancestors 'none'";

/// The names the monitor is served as, which a request's `Host` header must give: its address, `localhost`, and
/// the names an administrator added (`--monitor-host`), with its port. A monitor bound to every address (`0.0.0.0`)
/// also answers to any IP address literal: a literal cannot be a name an attacker points elsewhere.
#[derive(Clone, Debug)]
pub struct MonitorNames {
    bound: SocketAddr,
    names: Vec<String>,
}

impl MonitorNames {
    pub fn new(bound: SocketAddr, extra: &[String]) -> MonitorNames {
        let mut names = vec!["localhost".to_string()];
        names.extend(extra.iter().map(|n| n.trim_end_matches('.').to_ascii_lowercase()));
        MonitorNames { bound, names }
    }

    /// Is `host` (a `Host` header: a name or literal, and a port unless it is 80) this monitor?
    pub fn serves(&self, host: &str) -> bool {
        let Some((name, port)) = split_host(host) else { return false };
        if port != self.bound.port() {
            return false;
        }
        let literal = name.strip_prefix('[').and_then(|n| n.strip_suffix(']')).unwrap_or(name);
        match literal.parse::<IpAddr>() {
            Ok(ip) => ip == self.bound.ip() || self.bound.ip().is_unspecified(),
            Err(_) => self.names.iter().any(|n| *n == name.trim_end_matches('.').to_ascii_lowercase()),
        }
    }

    /// The session cookie's name: one per monitor port (cookies do not tell ports apart).
    fn cookie(&self) -> String {
        format!("cosched_session_{}", self.bound.port())
    }
}

/// A `Host` header's name and port (80 when it has none).
fn split_host(host: &str) -> Option<(&str, u16)> {
    let host = host.trim();
    let port_at = match host.rfind(':') {
        Some(at) if !host[at..].contains(']') => Some(at),
        _ => None,
    };
    match port_at {
        Some(at) => Some((&host[..at], host[at + 1..].parse().ok()?)),
        None => Some((host, 80)),
    }
}

/// Serve on `address` (e.g. `127.0.0.1:8180`) under the listeners' connection gate, answering to its address,
/// `localhost` and `extra_names`; returns the bound address.
pub fn serve(listening: Listening, address: &str, extra_names: &[String]) -> std::io::Result<SocketAddr> {
    let listener = std::net::TcpListener::bind(address)
        .map_err(|e| std::io::Error::other(format!("monitor on {address}: {e}")))?;
    let bound = listener.local_addr()?;
    let names = Arc::new(MonitorNames::new(bound, extra_names));
    std::thread::Builder::new().name("monitor".into()).spawn(move || {
        accept_forever("monitor", || listener.accept(), |(stream, peer)| admit(&listening, &names, stream, peer))
    })?;
    Ok(bound)
}

fn admit(listening: &Listening, names: &Arc<MonitorNames>, stream: std::net::TcpStream, peer: SocketAddr) {
    let accepted = Instant::now();
    let stream = Arc::new(Stream::Tcp(stream));
    let _ = stream.set_write_timeout(Some(WRITE_TIMEOUT));
    let pass = match listening.gate.admit_monitor(peer, stream.clone()) {
        Ok(pass) => pass,
        Err(reason) => return respond(&stream, json_response(503, &Reply::error(reason))),
    };
    let (listening, names) = (listening.clone(), names.clone());
    let spawned = std::thread::Builder::new().name("monitor-request".into()).stack_size(CONNECTION_STACK_BYTES).spawn(
        move || {
            if let Some(response) = read_and_answer(&listening, &names, &stream, pass, accepted) {
                respond(&stream, response);
            }
        },
    );
    if let Err(e) = spawned {
        crate::log_line!("cosched controller: no thread for a monitor connection: {e}");
    }
}

/// Read one request — its head within a short time of the connection, its body within the request time — and
/// answer it; `None` when the connection gave its place to a newer one meanwhile (it is closed already).
fn read_and_answer(
    listening: &Listening,
    names: &MonitorNames,
    stream: &Arc<Stream>,
    mut pass: Pass,
    accepted: Instant,
) -> Option<HttpResponse> {
    let mut reader = BufReader::new(Shared(stream.clone()));
    let mut request = match read_head(&mut reader, accepted + FIRST_WORDS_WITHIN) {
        Ok(request) => request,
        Err(e) => return Some(json_response(400, &Reply::error(format!("bad request: {e}")))),
    };
    pass.head_received().ok()?;
    if let Err(e) = read_body(&mut reader, &mut request, listening.gate.limits().request_timeout) {
        return Some(json_response(400, &Reply::error(format!("bad request: {e}"))));
    }
    Some(answer(&listening.controller, names, &request))
}

fn respond(stream: &Stream, response: HttpResponse) {
    let _ = write_response(stream, &response);
    stream.shutdown();
}

/// The answer to one monitor request: the page, the figures, or an API call made as the user the request's
/// session (or token) stands for — for a request that names this monitor as its `Host`.
fn answer(controller: &Controller, names: &MonitorNames, request: &HttpRequest) -> HttpResponse {
    match request.header("Host") {
        None => return json_response(400, &Reply::error("a request names the Host it is for")),
        Some(host) if !names.serves(host) => {
            let message = format!(
                "this monitor is not served as {host:?}: open it by its address or localhost (an administrator adds \
                 names with --monitor-host)"
            );
            return json_response(421, &Reply::error(message));
        }
        Some(_) => {}
    }
    let path = request.path();
    if request.method == "GET" && (path == "/" || path == "/index.html") {
        return match request.query("token") {
            Some(token) => sign_in(controller, names, request, token),
            None => page(),
        };
    }
    if path == "/metrics" {
        return metrics_response(controller, request);
    }
    let body = String::from_utf8_lossy(&request.body);
    let (status, reply) = match api_identity(controller, names, request) {
        Err(message) => (403, Reply::error(message)),
        Ok(who) => match route(&request.method, path, &body) {
            Ok(Request::Status {}) => return with_user_names(controller.handle(&who, Request::Status {}), &who),
            Ok(req) => (200, controller.handle(&who, req)),
            Err(message) => (400, Reply::error(message)),
        },
    };
    json_response(status, &reply)
}

/// The status with `user_names` beside its jobs (uid → name on the controller's host), so that the page shows
/// users as `cosched status` does, and the `viewer` (uid, administrator or not), so that it offers only the actions
/// the server would allow. Names are looked up after the controller's lock is released: the password database may
/// be a network service.
fn with_user_names(reply: Reply, viewer: &Identity) -> HttpResponse {
    let mut value = serde_json::to_value(&reply).unwrap_or_default();
    let uids: std::collections::BTreeSet<u64> =
        value["data"]["jobs"].as_array().into_iter().flatten().filter_map(|job| job["uid"].as_u64()).collect();
    let names: serde_json::Map<String, serde_json::Value> = uids
        .into_iter()
        .filter_map(|uid| Some((uid.to_string(), crate::wire::jobs::user_name(u32::try_from(uid).ok()?)?.into())))
        .collect();
    if let Some(data) = value.get_mut("data").and_then(|d| d.as_object_mut()) {
        data.insert("user_names".into(), names.into());
        data.insert("viewer".into(), serde_json::json!({ "uid": viewer.uid, "admin": viewer.admin }));
    }
    json_body(200, serde_json::to_vec(&value).unwrap_or_default())
}

fn page() -> HttpResponse {
    let (page, policy) = page_with_policy();
    let mut headers = vec![("Content-Type".to_string(), "text/html; charset=utf-8".to_string())];
    headers.extend(security_headers(&policy));
    HttpResponse { status: 200, headers, body: page.into_bytes() }
}

/// `/?token=…`: spend the URL's token for a session cookie and send the browser to the bare URL. A spent or unknown
/// token is refused, unless the browser already has a session (it opened the same URL again).
fn sign_in(controller: &Controller, names: &MonitorNames, request: &HttpRequest, token: &str) -> HttpResponse {
    if let Some(session) = controller.exchange_monitor_token(token) {
        let cookie = format!(
            "{}={session}; HttpOnly; SameSite=Strict; Path=/; Max-Age={}",
            names.cookie(),
            MONITOR_TOKEN_LIFETIME.as_secs()
        );
        return to_the_page(Some(cookie));
    }
    if request.cookie(&names.cookie()).and_then(|session| controller.monitor_identity(session)).is_some() {
        return to_the_page(None);
    }
    json_response(403, &Reply::error("this monitor link was used already or has expired: run `cosched monitor` again"))
}

/// A redirect to the bare URL, setting `cookie` if given.
fn to_the_page(cookie: Option<String>) -> HttpResponse {
    let mut headers = vec![("Location".to_string(), "/".to_string())];
    headers.extend(security_headers(API_POLICY));
    headers.extend(cookie.map(|cookie| ("Set-Cookie".to_string(), cookie)));
    HttpResponse { status: 303, headers, body: vec![] }
}

/// Whom an API request stands for: a token in `X-Cosched-Token` (scripts), or the browser's session cookie with
/// the header that only the page's own scripts send. A request that says it comes from another origin is refused
/// either way.
fn api_identity(controller: &Controller, names: &MonitorNames, request: &HttpRequest) -> Result<Identity, String> {
    const NO_SESSION: &str = "no monitor session: open the URL that `cosched monitor` prints";
    if let (Some(origin), Some(host)) = (request.header("Origin"), request.header("Host")) {
        if origin != format!("http://{host}") {
            return Err(format!("a request from {origin:?} is not the monitor's own"));
        }
    }
    if let Some(token) = request.header("X-Cosched-Token") {
        return controller.monitor_identity(token).ok_or_else(|| NO_SESSION.to_string());
    }
    let session = request.cookie(&names.cookie()).ok_or(NO_SESSION)?;
    if request.header("X-Cosched-Monitor").is_none() {
        return Err("the monitor's own page sends X-Cosched-Monitor: a form or page of another site does not".into());
    }
    if request.header("Sec-Fetch-Site").is_some_and(|site| site != "same-origin") {
        return Err("a request from another site".into());
    }
    controller.monitor_identity(session).ok_or_else(|| NO_SESSION.to_string())
}

/// `/metrics`: the exposition to a GET; 404 when turned off, 405 (with `Allow: GET`) to any other method.
/// `/metrics` in the syntax the reader asks for (`Accept`): OpenMetrics for Prometheus, its own format else.
fn metrics_response(controller: &Controller, request: &HttpRequest) -> HttpResponse {
    let method = request.method.as_str();
    if controller.settings.metrics == MetricsAccess::Off {
        return json_response(404, &Reply::error("/metrics is turned off (the controller's --metrics off)"));
    }
    if method != "GET" {
        let mut response = json_response(405, &Reply::error(format!("{method} /metrics: only GET is served")));
        response.headers.push(("Allow".into(), "GET".into()));
        if method == "HEAD" {
            // An answer to HEAD has no body, whatever its Content-Length.
            response.body.clear();
        }
        return response;
    }
    // Names are looked up outside the controller's lock: the password database may be a network service.
    let snapshot = controller.metrics();
    let syntax = crate::controller::metrics::Syntax::for_accept(request.header("accept"));
    let body = crate::controller::metrics::render(&snapshot, &crate::wire::jobs::user_names(&snapshot), syntax);
    let mut headers = vec![("Content-Type".to_string(), syntax.content_type().to_string())];
    headers.extend(security_headers(API_POLICY));
    HttpResponse { status: 200, headers, body: body.into_bytes() }
}

fn json_response(status: u16, reply: &Reply) -> HttpResponse {
    json_body(status, serde_json::to_vec(reply).unwrap_or_default())
}

fn json_body(status: u16, body: Vec<u8>) -> HttpResponse {
    let mut headers = vec![("Content-Type".to_string(), "application/json".to_string())];
    headers.extend(security_headers(API_POLICY));
    HttpResponse { status, headers, body }
}

/// The request a monitor URL stands for.
fn route(method: &str, path: &str, body: &str) -> Result<Request, String> {
    let parts: Vec<&str> = path.trim_matches('/').split('/').collect();
    match (method, parts.as_slice()) {
        ("GET", ["api", "status"]) => Ok(Request::Status {}),
        ("POST", ["api", "jobs", id, action]) => {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_monitor_answers_to_its_own_names_only() {
        let names = MonitorNames::new("127.0.0.1:8180".parse().unwrap(), &["Cosched.Example.".into()]);
        for host in ["127.0.0.1:8180", "localhost:8180", "LOCALHOST:8180", "cosched.example:8180", "localhost.:8180"] {
            assert!(names.serves(host), "{host}");
        }
        for host in [
            "evil.example:8180",
            "rebind.localhost:8180",
            "127.0.0.1:8181",
            "127.0.0.2:8180",
            "[::1]:8180",
            "localhost",
            "localhost:x",
            "",
        ] {
            assert!(!names.serves(host), "{host}");
        }
        let everywhere = MonitorNames::new("0.0.0.0:80".parse().unwrap(), &[]);
        for (host, served) in [("10.1.2.3", true), ("[::1]", true), ("10.1.2.3:80", true), ("evil.example", false)] {
            assert_eq!(everywhere.serves(host), served, "{host}");
        }
        assert_eq!(names.cookie(), "cosched_session_8180");
    }

    #[test]
    fn every_answer_forbids_framing_sniffing_and_caching() {
        let headers: Vec<String> =
            security_headers(API_POLICY).iter().map(|(field, value)| format!("{field}: {value}")).collect();
        for expected in ["X-Frame-Options: DENY", "X-Content-Type-Options: nosniff", "Cache-Control: no-store"] {
            assert!(headers.iter().any(|h| h == expected), "{expected} missing from {headers:?}");
        }
        assert!(headers
            .iter()
            .any(|h| h.starts_with("Content-Security-Policy") && h.contains("frame-ancestors 'none'")));
    }

    #[test]
    fn the_page_policy_allows_only_its_own_inline_script_and_style() {
        let (page, policy) = page_with_policy();
        let nonce = policy.split("'nonce-").nth(1).unwrap().split('\'').next().unwrap();
        assert_eq!(nonce.len(), 32);
        assert!(page.contains(&format!("<script nonce=\"{nonce}\">")));
        assert!(page.contains(&format!("<style nonce=\"{nonce}\">")));
        assert!(!page.contains("<script>") && !page.contains("<style>"));
        assert!(policy.contains("frame-ancestors 'none'") && policy.contains("default-src 'self'"));
    }
}
