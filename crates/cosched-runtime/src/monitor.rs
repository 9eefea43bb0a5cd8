//! The live web monitor served by the controller: one page and a small JSON
//! API. Every request carries a token (`cosched monitor` prints a URL with
//! one) that stands for the user who asked for it, so the buttons go through
//! the same permission checks as the command line.

use crate::controller::Controller;
use crate::jobs::Identity;
use crate::protocol::{Reply, Request};
use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tiny_http::{Header, Method, Response, Server};

const PAGE: &str = include_str!("../../../web/monitor.html");

/// How long a monitor token stands for its user.
pub const MONITOR_TOKEN_LIFETIME: Duration = Duration::from_secs(12 * 3600);
/// Tokens one user holds at once; minting one more drops that user's oldest.
pub const MONITOR_TOKENS_PER_USER: usize = 16;
/// Tokens held in all; minting one more drops the oldest of anyone's.
pub const MONITOR_TOKENS_TOTAL: usize = 4096;

/// The monitor's tokens, each standing for the user who asked for it until it expires. Bounded per user and in
/// all, so minting tokens in a loop costs the daemon nothing but the newest few.
#[derive(Default)]
pub struct MonitorTokens {
    by_token: BTreeMap<String, (Identity, Instant)>,
    /// Tokens in the order they were minted (oldest first).
    minted: VecDeque<String>,
}

impl MonitorTokens {
    /// Remember `token` for `who`, minted at `now`, dropping expired tokens and the oldest beyond the bounds.
    pub fn insert(&mut self, token: String, who: Identity, now: Instant) {
        self.drop_expired(now);
        let held_by_user = self.by_token.values().filter(|(id, _)| id.uid == who.uid).count();
        if held_by_user >= MONITOR_TOKENS_PER_USER {
            if let Some(oldest) =
                self.minted.iter().find(|t| self.by_token.get(*t).is_some_and(|(id, _)| id.uid == who.uid))
            {
                let oldest = oldest.clone();
                self.remove(&oldest);
            }
        }
        if self.by_token.len() >= MONITOR_TOKENS_TOTAL {
            if let Some(oldest) = self.minted.front().cloned() {
                self.remove(&oldest);
            }
        }
        self.minted.push_back(token.clone());
        self.by_token.insert(token, (who, now));
    }

    /// The user `token` stands for, if it is known and younger than [`MONITOR_TOKEN_LIFETIME`] at `now`.
    pub fn identity(&self, token: &str, now: Instant) -> Option<Identity> {
        let (who, minted) = self.by_token.get(token)?;
        (now.saturating_duration_since(*minted) < MONITOR_TOKEN_LIFETIME).then_some(*who)
    }

    pub fn len(&self) -> usize {
        self.by_token.len()
    }

    pub fn is_empty(&self) -> bool {
        self.by_token.is_empty()
    }

    fn remove(&mut self, token: &str) {
        self.by_token.remove(token);
        self.minted.retain(|t| t != token);
    }

    fn drop_expired(&mut self, now: Instant) {
        while let Some(oldest) = self.minted.front() {
            match self.by_token.get(oldest) {
                Some((_, minted)) if now.saturating_duration_since(*minted) < MONITOR_TOKEN_LIFETIME => break,
                _ => {
                    let oldest = oldest.clone();
                    self.by_token.remove(&oldest);
                    self.minted.pop_front();
                }
            }
        }
    }
}

/// Headers on every answer: never framed (clickjacking of the buttons), never sniffed, never cached (replies hold
/// other users' jobs and the token's rights), no token leaked in a Referer.
fn security_headers(content_security_policy: &str) -> Vec<Header> {
    [
        ("X-Frame-Options", "DENY"),
        ("X-Content-Type-Options", "nosniff"),
        ("Cache-Control", "no-store"),
        ("Referrer-Policy", "no-referrer"),
        ("Content-Security-Policy", content_security_policy),
    ]
    .iter()
    .map(|(field, value)| Header::from_bytes(*field, *value).expect("static header"))
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
        let (page, policy) = page_with_policy();
        let mut response = Response::from_string(page).with_header(html);
        for header in security_headers(&policy) {
            response.add_header(header);
        }
        let _ = request.respond(response);
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
    let mut response = Response::from_string(text).with_status_code(reply.0).with_header(json);
    for header in security_headers(API_POLICY) {
        response.add_header(header);
    }
    let _ = request.respond(response);
}

use std::io::Read as _;

/// The request a monitor URL stands for.
fn route(method: &Method, path: &str, body: &str) -> Result<Request, String> {
    let parts: Vec<&str> = path.trim_matches('/').split('/').collect();
    match (method, parts.as_slice()) {
        (Method::Get, ["api", "status"]) => Ok(Request::Status {}),
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

#[cfg(test)]
mod tests {
    use super::*;

    fn user(uid: u32) -> Identity {
        Identity { uid, gid: uid, admin: false }
    }

    #[test]
    fn a_token_expires_after_its_lifetime() {
        let mut tokens = MonitorTokens::default();
        let minted = Instant::now();
        tokens.insert("a".into(), user(1), minted);
        assert_eq!(tokens.identity("a", minted + MONITOR_TOKEN_LIFETIME / 2), Some(user(1)));
        assert_eq!(tokens.identity("a", minted + MONITOR_TOKEN_LIFETIME), None);
        tokens.insert("b".into(), user(1), minted + MONITOR_TOKEN_LIFETIME);
        assert_eq!(tokens.len(), 1, "the expired token is dropped at the next mint");
    }

    #[test]
    fn one_user_holds_at_most_a_few_tokens_and_loses_the_oldest() {
        let mut tokens = MonitorTokens::default();
        let now = Instant::now();
        tokens.insert("other".into(), user(2), now);
        for i in 0..200_000 {
            tokens.insert(format!("t{i}"), user(1), now);
        }
        assert_eq!(tokens.len(), MONITOR_TOKENS_PER_USER + 1);
        assert_eq!(tokens.identity("t0", now), None);
        assert_eq!(tokens.identity("t199999", now), Some(user(1)));
        assert_eq!(tokens.identity("other", now), Some(user(2)), "another user's token survives the flood");
    }

    #[test]
    fn all_users_together_hold_a_bounded_number_of_tokens() {
        let mut tokens = MonitorTokens::default();
        let now = Instant::now();
        for uid in 0..(MONITOR_TOKENS_TOTAL as u32 + 100) {
            tokens.insert(format!("u{uid}"), user(uid), now);
        }
        assert_eq!(tokens.len(), MONITOR_TOKENS_TOTAL);
        assert_eq!(tokens.identity("u0", now), None);
    }

    #[test]
    fn every_answer_forbids_framing_sniffing_and_caching() {
        let headers: Vec<String> =
            security_headers(API_POLICY).iter().map(|h| format!("{}: {}", h.field, h.value)).collect();
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
