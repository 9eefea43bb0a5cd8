//! The web monitor in a real browser: `cosched up` runs a job, headless Chromium opens the URL that
//! `cosched monitor` prints, sees the job in the matrix, and suspends it with the job's button; the
//! controller must then say the job is suspended. Chromium is driven over WebDriver (chromedriver).
//!
//! Needs root (job cgroups) and Debian's `chromium` and `chromium-driver` (`scripts/setup` installs them).
//! `COSCHED_SAVE_SCREENSHOT=1` also writes the page as `docs/monitor.png`.

#![allow(clippy::disallowed_methods)] // waiting for a real daemon and browser reads the wall clock

use serde_json::{json, Value};
use std::net::TcpListener;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

const CHROMIUM: &str = "/usr/bin/chromium";
const CHROMEDRIVER: &str = "/usr/bin/chromedriver";
const WAIT: Duration = Duration::from_secs(10);

/// Call `f` until it gives a value; panic after `timeout` with `f`'s last error.
fn poll<T>(what: &str, timeout: Duration, mut f: impl FnMut() -> Result<T, String>) -> T {
    let start = Instant::now();
    loop {
        match f() {
            Ok(value) => return value,
            Err(e) if start.elapsed() > timeout => panic!("timed out after {timeout:?} waiting for {what}: {e}"),
            Err(_) => std::thread::sleep(Duration::from_millis(100)),
        }
    }
}

/// `cosched up` in a scratch directory; dropping it kills the job and the daemon and removes the directory.
struct Daemon {
    child: Child,
    dir: PathBuf,
    socket: PathBuf,
    node: String,
    job: Option<u64>,
}

impl Daemon {
    /// `dir`: a fresh folder, its state directory.
    fn start(dir: &Path) -> Daemon {
        let socket = dir.join("sock");
        let log = std::fs::File::create(dir.join("up.log")).unwrap();
        let node = format!("mon-{}", std::process::id());
        let child = Command::new(env!("CARGO_BIN_EXE_cosched"))
            .args(["up", "--state-dir", dir.to_str().unwrap(), "--socket", socket.to_str().unwrap()])
            .args(["--monitor", "127.0.0.1:0", "--node", &node, "--slice-ms", "100"])
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .expect("cosched up starts");
        let daemon = Daemon { child, dir: dir.to_path_buf(), socket, node, job: None };
        poll("the controller to answer `cosched status`", WAIT, || daemon.client(&["status"]).map(drop));
        // The local agent connects on its own time (late on a busy machine); a job submitted before is refused.
        poll("the local agent to connect", WAIT, || daemon.node_connected());
        daemon
    }

    fn node_connected(&self) -> Result<(), String> {
        let status: Value = serde_json::from_str(&self.client(&["status", "--json"])?).map_err(|e| e.to_string())?;
        let nodes = status["nodes"].as_array().cloned().unwrap_or_default();
        match nodes.iter().any(|n| n["connected"] == true) {
            true => Ok(()),
            false => Err(format!("no node connected: {status}")),
        }
    }

    /// A client command against this daemon; its stdout, or an error with its stderr.
    fn client(&self, args: &[&str]) -> Result<String, String> {
        self.client_as(None, args)
    }

    /// `client` as user `uid` (root when `None`).
    fn client_as(&self, uid: Option<u32>, args: &[&str]) -> Result<String, String> {
        use std::os::unix::process::CommandExt;
        let (command, rest) = args.split_first().unwrap();
        let mut client = Command::new(env!("CARGO_BIN_EXE_cosched"));
        client.args([command, "--socket", self.socket.to_str().unwrap()]).args(rest).current_dir("/tmp");
        if let Some(uid) = uid {
            client.uid(uid).gid(uid);
        }
        let o: Output = client.output().map_err(|e| e.to_string())?;
        match o.status.success() {
            true => Ok(String::from_utf8_lossy(&o.stdout).into_owned()),
            false => Err(format!("cosched {}: {}", args.join(" "), String::from_utf8_lossy(&o.stderr).trim())),
        }
    }

    fn job_state(&self, job: u64) -> Result<String, String> {
        let status: Value = serde_json::from_str(&self.client(&["status", "--json"])?).map_err(|e| e.to_string())?;
        let found = status["jobs"].as_array().into_iter().flatten().find(|j| j["id"] == job);
        found.and_then(|j| j["state"].as_str()).map(str::to_string).ok_or(format!("no job {job} in {status}"))
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        if let Some(job) = self.job {
            // Kill the job through the controller; the watchdog thaws whatever is left when `up` dies.
            let _ = self.client(&["kill", &job.to_string()]);
            let start = Instant::now();
            while start.elapsed() < Duration::from_secs(5)
                && self.job_state(job).is_ok_and(|s| !["killed", "finished", "failed"].contains(&s.as_str()))
            {
                std::thread::sleep(Duration::from_millis(100));
            }
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
        // The agent's own cgroups (`<hierarchy>/cosched/<node>`) outlive it; they are empty once the job is gone.
        let hierarchies = std::fs::read_dir("/sys/fs/cgroup").into_iter().flatten().flatten().map(|e| e.path());
        for agent in hierarchies.chain([PathBuf::from("/sys/fs/cgroup")]).map(|h| h.join("cosched").join(&self.node)) {
            let _ = std::fs::remove_dir(agent);
        }
        if std::thread::panicking() {
            let log = std::fs::read_to_string(self.dir.join("up.log")).unwrap_or_default();
            eprintln!("---- cosched up's output ----\n{log}");
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A chromedriver with one headless Chromium session, spoken to in W3C WebDriver over HTTP.
/// Dropping it ends the session and stops chromedriver.
struct WebDriver {
    chromedriver: Child,
    http: ureq::Agent,
    session: String,
}

impl WebDriver {
    fn start(profile: &Path, log: &Path) -> WebDriver {
        let port = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let chromedriver = Command::new(CHROMEDRIVER)
            .arg(format!("--port={port}"))
            .stdin(Stdio::null())
            .stdout(std::fs::File::create(log).unwrap())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("chromedriver starts");
        let http = ureq::AgentBuilder::new().timeout(Duration::from_secs(60)).build();
        let mut driver = WebDriver { chromedriver, http, session: format!("http://127.0.0.1:{port}") };
        poll("chromedriver to be ready", WAIT, || match driver.get("/status")?["ready"].as_bool() {
            Some(true) => Ok(()),
            _ => Err("not ready".into()),
        });
        let args = [
            "--headless=new",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-dev-shm-usage",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            &format!("--user-data-dir={}", profile.display()),
        ];
        let capabilities = json!({"capabilities": {"alwaysMatch": {
            "browserName": "chrome",
            "goog:chromeOptions": {"binary": CHROMIUM, "args": args},
        }}});
        let created = driver.post("/session", capabilities).expect("a Chromium session");
        let id = created["sessionId"].as_str().expect("a session id");
        driver.session = format!("{}/session/{id}", driver.session);
        driver
    }

    /// One WebDriver command (`path` relative to the session); its `value`, or the WebDriver error.
    fn call(&self, method: &str, path: &str, body: Option<Value>) -> Result<Value, String> {
        let request = self.http.request(method, &format!("{}{path}", self.session));
        let reply = match body {
            Some(body) => request.send_json(body),
            None => request.call(),
        };
        let response = match reply {
            Ok(r) | Err(ureq::Error::Status(_, r)) => r,
            Err(e) => return Err(format!("{method} {path}: {e}")),
        };
        let status = response.status();
        let reply: Value = response.into_json().map_err(|e| format!("{method} {path}: {e}"))?;
        match status {
            200 => Ok(reply["value"].clone()),
            _ => Err(format!("{method} {path}: {} {}", reply["value"]["error"], reply["value"]["message"])),
        }
    }

    fn get(&self, path: &str) -> Result<Value, String> {
        self.call("GET", path, None)
    }

    fn post(&self, path: &str, body: Value) -> Result<Value, String> {
        self.call("POST", path, Some(body))
    }

    /// The id of the first element matching a CSS selector.
    fn find(&self, css: &str) -> Result<String, String> {
        let found = self.post("/element", json!({"using": "css selector", "value": css}))?;
        // The W3C name of the key that holds an element reference.
        let id = found["element-6066-11e4-a52e-4f735466cecf"].as_str();
        id.map(str::to_string).ok_or(format!("no element reference in {found}"))
    }

    fn click(&self, css: &str) -> Result<(), String> {
        self.post(&format!("/element/{}/click", self.find(css)?), json!({})).map(drop)
    }

    fn text(&self, css: &str) -> Result<String, String> {
        let text = self.get(&format!("/element/{}/text", self.find(css)?))?;
        text.as_str().map(str::to_string).ok_or(format!("no text in {text}"))
    }
}

impl Drop for WebDriver {
    fn drop(&mut self) {
        let _ = self.call("DELETE", "", None);
        let _ = self.chromedriver.kill();
        let _ = self.chromedriver.wait();
    }
}

/// Decode standard base64 (the screenshot); `None` on a character outside the alphabet.
fn base64_decode(text: &str) -> Option<Vec<u8>> {
    const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let (mut bits, mut count, mut out) = (0u32, 0, Vec::new());
    for c in text.bytes().filter(|&c| c != b'=' && !c.is_ascii_whitespace()) {
        bits = bits << 6 | ALPHABET.iter().position(|&a| a == c)? as u32;
        count += 6;
        if count >= 8 {
            count -= 8;
            out.push((bits >> count) as u8);
        }
    }
    Some(out)
}

#[test]
fn suspend_button_suspends_the_job() {
    if std::fs::metadata("/proc/self").map_or(true, |m| m.uid() != 0) {
        cosched_runtime::testing::say_skipped("suspend_button_suspends_the_job", "needs root for cgroups");
        return;
    }
    for program in [CHROMIUM, CHROMEDRIVER] {
        assert!(Path::new(program).exists(), "{program} is missing: run scripts/setup (as root) to install it");
    }
    // Others may pass through it, to the socket: a second viewer is another user.
    let dir = tempfile::Builder::new()
        .prefix("cosched-monitor-")
        .permissions(std::os::unix::fs::PermissionsExt::from_mode(0o755))
        .tempdir()
        .unwrap()
        .keep();
    let mut daemon = Daemon::start(&dir);
    let submitted: Value = serde_json::from_str(
        &daemon.client(&["submit", "--json", "-n", "1", "--", "sleep", "300"]).expect("the job is accepted"),
    )
    .unwrap();
    let job = submitted["job"].as_u64().expect("a job id");
    daemon.job = Some(job);
    let url = daemon.client(&["monitor"]).expect("a monitor URL").trim().to_string();
    assert!(url.starts_with("http://127.0.0.1:") && url.contains("?token="), "{url}");

    let driver = WebDriver::start(&dir.join("chrome-profile"), &dir.join("chromedriver.log"));
    driver.post("/window/rect", json!({"width": 1200, "height": 800})).expect("a window size for the screenshot");
    driver.post("/url", json!({ "url": url })).expect("the page loads");
    let cell = format!("#matrix td.cell[data-job=\"{job}\"]");
    let shown = poll("the job in the matrix", WAIT, || driver.text(&cell));
    assert_eq!(shown, format!("J{job}"));
    // Its user by name, as `cosched status` shows it (the job is root's).
    let user = poll("the job's row", WAIT, || driver.text(&format!("tr#job-{job} td:nth-child(3)")));
    assert_eq!(user, "root");
    // The token left the URL at its first use; the browser holds a session cookie no script of the page can read.
    let address_bar = driver.get("/url").expect("the page's URL");
    let bare = url.split('?').next().unwrap().to_string();
    assert_eq!(address_bar.as_str(), Some(bare.as_str()), "the token stayed in the URL");
    let cookies = driver.post("/execute/sync", json!({"script": "return document.cookie", "args": []}));
    assert_eq!(cookies.expect("a script runs").as_str(), Some(""), "the page's scripts can read the session");

    // The table is redrawn every 500 ms, so a button found may be gone by the click: try again.
    let suspend = format!("button[data-action=\"suspend\"][data-job=\"{job}\"]");
    poll("a click on the suspend button", WAIT, || driver.click(&suspend));
    let state = format!("tr#job-{job} td.state");
    poll("the page to show the job suspended", WAIT, || match driver.text(&state)? {
        s if s == "suspended" => Ok(()),
        s => Err(format!("the page shows {s:?}")),
    });
    poll("the controller to report the job suspended", WAIT, || match daemon.job_state(job)? {
        s if s == "suspended" => Ok(()),
        s => Err(format!("the controller says {s:?}")),
    });
    let resume = format!("button[data-action=\"resume\"][data-job=\"{job}\"]");
    poll("the resume button", WAIT, || driver.find(&resume));
    // A page of another name that resolves to the monitor's address (DNS rebinding; Chromium resolves every
    // `*.localhost` to loopback) gets a refusal, not the figures.
    let rebound = bare.replacen("127.0.0.1", "rebind.localhost", 1) + "metrics";
    driver.post("/url", json!({ "url": rebound })).expect("the rebound page loads");
    let refusal = poll("the refusal in the page", WAIT, || driver.text("body"));
    assert!(refusal.contains("not served as") && !refusal.contains("cosched_"), "{refusal}");
    // The spent URL again: this browser has its session, so it gets the page, not the token's refusal.
    driver.post("/url", json!({ "url": url })).expect("the page loads again");
    poll("the page to show the job again", WAIT, || match driver.text(&state)? {
        s if s == "suspended" => Ok(()),
        s => Err(format!("the page shows {s:?}")),
    });

    // Another user sees root's job with no button (the server would refuse them all), and their own with kill.
    let nobody = 65534;
    let theirs: Value = serde_json::from_str(
        &daemon.client_as(Some(nobody), &["submit", "--json", "-J", "theirs", "--", "sleep", "300"]).expect("accepted"),
    )
    .unwrap();
    let theirs = theirs["job"].as_u64().expect("a job id");
    let their_url = daemon.client_as(Some(nobody), &["monitor"]).expect("a monitor URL").trim().to_string();
    driver.post("/url", json!({ "url": their_url })).expect("their page loads");
    let their_kill = format!("button[data-action=\"kill\"][data-job=\"{theirs}\"]");
    poll("their own job's kill button", WAIT, || driver.find(&their_kill));
    let name = poll("their job's name", WAIT, || driver.text(&format!("tr#job-{theirs} td:nth-child(2)")));
    assert_eq!(name, "theirs");
    poll("root's job in their page", WAIT, || driver.find(&format!("tr#job-{job}")));
    let roots_buttons = format!("button[data-job=\"{job}\"]");
    assert!(driver.find(&roots_buttons).is_err(), "another user is offered actions on root's job");
    let _ = daemon.client(&["kill", &theirs.to_string()]);

    let screenshot = driver.get("/screenshot").expect("a screenshot");
    let png = base64_decode(screenshot.as_str().expect("base64 text")).expect("valid base64");
    assert!(png.starts_with(b"\x89PNG\r\n\x1a\n"), "the screenshot is not a PNG");
    if std::env::var_os("COSCHED_SAVE_SCREENSHOT").is_some() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/monitor.png");
        std::fs::write(&path, &png).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        eprintln!("wrote {}", path.display());
    }
    drop(driver);
    drop(daemon);
}
