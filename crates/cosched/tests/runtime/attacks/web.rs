//! Attacks on the web monitor through a browser: a page of another site whose name the attacker points at the
//! monitor's address (DNS rebinding), a token left in the URL (history, screens, `ps`), requests forged by another
//! site or by a page of another local user's port. See `mod.rs`.

use super::OTHER_USER;
use crate::harness::*;
use std::time::Duration;

/// `cosched up` with a monitor on loopback and `extra`; its monitor's address.
fn daemon_with_monitor(extra: &[&str]) -> (Daemon, String) {
    let mut args = vec!["--monitor", "127.0.0.1:0"];
    args.extend(extra);
    let daemon = Daemon::up(&args);
    let address = monitor_address(&daemon);
    (daemon, address)
}

#[test]
fn a_page_of_a_foreign_host_name_gets_nothing_from_the_monitor() {
    if skip_unless_root("a_page_of_a_foreign_host_name_gets_nothing") {
        return;
    }
    let (daemon, address) = daemon_with_monitor(&[]);
    let port = address.rsplit(':').next().unwrap();
    let url = String::from_utf8(daemon.client_as(OTHER_USER, &["monitor"]).stdout).unwrap();
    let token = url.trim().rsplit("token=").next().unwrap().to_string();
    let token_target = format!("/?token={token}");
    // A rebinding page's requests name its own host: refused on every path, the token's and /metrics included.
    for host in [format!("rebind.example:{port}"), format!("rebind.localhost:{port}"), "127.0.0.1:1".to_string()] {
        for target in ["/", "/index.html", "/metrics", "/api/status", &token_target] {
            let (status, head, body) = http_exchange(&address, "GET", target, &[("Host", &host)]);
            assert_eq!(status, 421, "GET {target} with Host {host}: {head}\n{body}");
            assert!(!body.contains("cosched_") && !body.contains("<script"), "{body}");
        }
    }
    let (status, _, _) = http_exchange(&address, "GET", "/metrics", &[]);
    assert_eq!(status, 400, "a request without a Host is refused too");
    // The names it is served as: its address and localhost.
    for host in [address.clone(), format!("localhost:{port}")] {
        let (status, head, _) = http_exchange(&address, "GET", "/metrics", &[("Host", &host)]);
        assert_eq!(status, 200, "Host {host}: {head}");
    }
}

#[test]
fn the_monitor_answers_to_the_names_an_administrator_adds() {
    if skip_unless_root("the_monitor_answers_to_the_names_an_administrator_adds") {
        return;
    }
    let (_daemon, address) = daemon_with_monitor(&["--monitor-host", "cosched.example"]);
    let port = address.rsplit(':').next().unwrap();
    for (host, expected) in [(format!("cosched.example:{port}"), 200), (format!("other.example:{port}"), 421)] {
        let (status, head, _) = http_exchange(&address, "GET", "/metrics", &[("Host", &host)]);
        assert_eq!(status, expected, "Host {host}: {head}");
    }
}

/// The cookie of a `Set-Cookie` header of `head` (`name=value`), and its attributes.
fn set_cookie(head: &str) -> (String, String) {
    let line = head.lines().find_map(|l| l.strip_prefix("Set-Cookie: ")).unwrap_or_else(|| panic!("no cookie: {head}"));
    let (cookie, attributes) = line.split_once(';').unwrap_or((line, ""));
    (cookie.trim().to_string(), attributes.to_string())
}

#[test]
fn the_monitor_token_leaves_the_url_at_first_use_and_forged_requests_are_refused() {
    if skip_unless_root("the_monitor_token_leaves_the_url_at_first_use") {
        return;
    }
    let (daemon, address) = daemon_with_monitor(&[]);
    let job = daemon.submit_as(Some(OTHER_USER), &["--", "sleep", "300"]);
    let url = String::from_utf8(daemon.client_as(OTHER_USER, &["monitor"]).stdout).unwrap();
    let token = url.trim().rsplit("token=").next().unwrap().to_string();
    let host = [("Host", address.as_str())];
    // First use: a cookie for the browser (not the URL's token), and the bare URL.
    let (status, head, _) = http_exchange(&address, "GET", &format!("/?token={token}"), &host);
    assert_eq!(status, 303, "{head}");
    assert!(head.lines().any(|l| l == "Location: /"), "{head}");
    let (cookie, attributes) = set_cookie(&head);
    for attribute in ["HttpOnly", "SameSite=Strict", "Path=/"] {
        assert!(attributes.contains(attribute), "{attribute} missing: {attributes}");
    }
    assert!(!cookie.contains(&token), "the URL's token became the cookie: {cookie}");
    // The URL's token is spent: seen in a history, on a screen or in `ps`, it opens nothing any more.
    let (status, _, _) = http_exchange(&address, "GET", &format!("/?token={token}"), &host);
    assert_eq!(status, 403, "a spent token was taken again");
    let (status, _, _) = http_exchange(&address, "GET", "/api/status", &[host[0], ("X-Cosched-Token", &token)]);
    assert_eq!(status, 403, "a spent token still opens the API");
    // The page's own requests: the cookie, and the header no other site's form or page can add without asking.
    let page = [host[0], ("Cookie", cookie.as_str()), ("X-Cosched-Monitor", "1")];
    let (status, _, body) = http_exchange(&address, "GET", "/api/status", &page);
    assert_eq!(status, 200, "{body}");
    assert!(body.contains(&format!("\"id\":{job}")), "{body}");
    // A form of another site, or of another local user's port, carries the cookie but not the header; a script
    // of another origin says where it comes from.
    let kill = format!("/api/jobs/{job}/kill");
    let form = [host[0], ("Cookie", cookie.as_str())];
    assert_eq!(http_exchange(&address, "POST", &kill, &form).0, 403, "a forged form was obeyed");
    let other_origin =
        [host[0], ("Cookie", cookie.as_str()), ("X-Cosched-Monitor", "1"), ("Origin", "http://127.0.0.1:9")];
    assert_eq!(http_exchange(&address, "POST", &kill, &other_origin).0, 403, "another origin's request was obeyed");
    assert_eq!(daemon.job(job).map(|j| j.state), Some(JobState::Running), "the job was touched");
    let own_origin = format!("http://{address}");
    let suspend = [host[0], ("Cookie", cookie.as_str()), ("X-Cosched-Monitor", "1"), ("Origin", own_origin.as_str())];
    let (status, _, body) = http_exchange(&address, "POST", &format!("/api/jobs/{job}/suspend"), &suspend);
    assert_eq!(status, 200, "{body}");
    wait_for("the job to be suspended", Duration::from_secs(10), || {
        daemon.job(job).is_some_and(|j| j.state == JobState::Suspended)
    });
}
