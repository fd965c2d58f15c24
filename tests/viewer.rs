//! What a person sees: the reports in a run directory, `fencer serve` over a store (its refusal
//! to serve anything outside it or, unless allowed, to the network; idle connections that
//! cannot lock a reader out; a policy that runs only the timeline's own script), and the
//! timeline in a real headless Chromium.

mod cli_support;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use fencer::{Plan, Settings, Validity, check, simulate};
use fencer_harness::PackedHistory;
use fencer_nemesis::FaultKind;
use fencer_results::report::report_files;
use fencer_results::save::{FinishedRun, save_run};
use fencer_run::demo;
use fencer_run::settings::StoreBackend;
use fencer_workloads::RenewFailurePolicy;

use cli_support::on_path;

const HOSTILE: &str = "<script>alert(1)</script>";

/// A failing mutant: unfenced store, pauses, workers that keep writing.
fn failing_mutant_plan() -> Plan {
    Plan::generate(&Settings {
        seed: 1,
        ops_per_worker: 20,
        store: StoreBackend::SqliteUnfenced.into(),
        nemesis: [FaultKind::Pause].into_iter().collect(),
        on_renew_failure: RenewFailurePolicy::Continue,
        ..Settings::default()
    })
}

/// Simulates, checks and saves `plan` as `root/<name>`, returning the run directory.
fn save(plan: &Plan, root: &Path, name: &str) -> (PathBuf, fencer::Verdict) {
    let history = simulate(plan).unwrap();
    let verdict = check(&history);
    let dir = root.join("fenced-register").join(name);
    let run = FinishedRun {
        command: "run",
        plan,
        history: &PackedHistory::pack(&history),
        verdict: &verdict,
        cycle_starts_ns: &[],
        interrupted_at_ns: None,
    };
    save_run(&run, &dir, Some(root)).unwrap();
    (dir, verdict)
}

fn assert_evidence_marked(timeline: &str, verdict: &fencer::Verdict) {
    assert!(!verdict.anomalies.is_empty());
    for (k, anomaly) in verdict.anomalies.iter().enumerate() {
        let class = if anomaly.severity.is_failure() {
            "anomaly"
        } else {
            "anomaly warning"
        };
        assert!(
            timeline.contains(&format!("<li class=\"{class}\" id=\"anomaly-{k}\">")),
            "anomaly {k} not listed"
        );
        for index in &anomaly.events {
            let marker = format!("data-event=\"{index}\" data-anomalies=\"");
            let at = timeline
                .find(&marker)
                .unwrap_or_else(|| panic!("evidence event #{index} of anomaly {k} not marked"));
            let anomalies_attr = &timeline[at + marker.len()..];
            let list = &anomalies_attr[..anomalies_attr.find('"').unwrap()];
            assert!(
                list.split(' ').any(|n| n == k.to_string()),
                "event #{index} marked for anomalies {list:?}, not {k}"
            );
        }
    }
}

#[test]
fn demo_and_failing_mutant_reports_mark_every_evidence_event() {
    let root = tempfile::tempdir().unwrap();
    let (demo_dir, demo_verdict) = save(
        &demo::plan(StoreBackend::SqliteUnfenced),
        root.path(),
        "demo",
    );
    let (mutant_dir, mutant_verdict) = save(&failing_mutant_plan(), root.path(), "mutant");
    assert_eq!(mutant_verdict.validity, Validity::Invalid);
    for (dir, verdict) in [(&demo_dir, &demo_verdict), (&mutant_dir, &mutant_verdict)] {
        let timeline = std::fs::read_to_string(dir.join("timeline.html")).unwrap();
        assert_evidence_marked(&timeline, verdict);
        assert!(timeline.contains("class=\"verdict v-invalid\""));
        assert!(!timeline.contains("http://") || !timeline.contains("src=\"http"));
        for plot in fencer_results::report::PLOT_FILES {
            let svg = std::fs::read_to_string(dir.join(plot)).unwrap();
            assert!(
                svg.starts_with("<svg xmlns=\"http://www.w3.org/2000/svg\""),
                "{plot}"
            );
            assert!(svg.trim_end().ends_with("</svg>"), "{plot}");
            assert!(
                svg.contains("class=\"fault\""),
                "{plot}: nemesis periods not shaded"
            );
        }
    }
    // The fenced demo has no anomaly, and says so.
    let history = simulate(&demo::plan(StoreBackend::Sqlite)).unwrap();
    let verdict = check(&history);
    let files = report_files(
        &PackedHistory::pack(&history),
        &serde_json::json!({}),
        &verdict,
    );
    let timeline = String::from_utf8(files[0].1.clone()).unwrap();
    assert!(timeline.contains("No anomaly was found."));
    assert!(!timeline.contains("class=\"t ev\""));
}

#[test]
fn a_hostile_value_renders_as_text() {
    let mut plan = demo::plan(StoreBackend::SqliteUnfenced);
    plan.workers[0].cycles[0].value = Some(HOSTILE.into());
    let history = simulate(&plan).unwrap();
    let verdict = check(&history);
    let files = report_files(
        &PackedHistory::pack(&history),
        &serde_json::json!({"store": HOSTILE}),
        &verdict,
    );
    for (name, bytes) in files {
        let text = String::from_utf8(bytes).unwrap();
        assert!(!text.contains(HOSTILE), "{name} holds the raw value");
    }
    let timeline = String::from_utf8(
        report_files(
            &PackedHistory::pack(&history),
            &serde_json::json!({}),
            &verdict,
        )[0]
        .1
        .clone(),
    )
    .unwrap();
    assert!(timeline.contains("&lt;script&gt;alert(1)&lt;/script&gt;"));
}

/// A running `fencer serve`, killed when dropped.
struct Serve {
    child: Child,
    addr: String,
}

impl Serve {
    fn start(store: &Path) -> Serve {
        let mut child = Command::new(env!("CARGO_BIN_EXE_fencer"))
            .arg("serve")
            .arg(store)
            .args(["--listen", "127.0.0.1:0"])
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("fencer serve starts");
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let addr = line
            .split("http://")
            .nth(1)
            .and_then(|rest| rest.split('/').next())
            .unwrap_or_else(|| panic!("no URL in {line:?}"))
            .to_string();
        assert!(addr.starts_with("127.0.0.1:"), "{addr}");
        Serve { child, addr }
    }

    /// Sends `target` raw (no normalisation) and returns (status, body).
    fn get(&self, target: &str) -> (u16, String) {
        let (status, _, body) = self.exchange(target);
        (status, body)
    }

    /// Sends `target` raw and returns (status, head, body).
    fn exchange(&self, target: &str) -> (u16, String, String) {
        let mut stream = TcpStream::connect(&self.addr).unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(30)))
            .unwrap();
        write!(
            stream,
            "GET {target} HTTP/1.1\r\nHost: {}\r\n\r\n",
            self.addr
        )
        .unwrap();
        let mut response = Vec::new();
        stream.read_to_end(&mut response).unwrap();
        let response = String::from_utf8_lossy(&response).into_owned();
        let status = response[9..12].parse().unwrap();
        let (head, body) = response
            .split_once("\r\n\r\n")
            .unwrap_or((response.as_str(), ""));
        (status, head.to_string(), body.to_string())
    }
}

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn serve_lists_runs_and_refuses_paths_outside_the_store() {
    let outer = tempfile::tempdir().unwrap();
    let store = outer.path().join("store");
    std::fs::write(outer.path().join("secret.txt"), b"top secret").unwrap();
    save(
        &demo::plan(StoreBackend::SqliteUnfenced),
        &store,
        "0-unfenced",
    );
    save(&demo::plan(StoreBackend::Sqlite), &store, "0-fenced");
    #[cfg(unix)]
    std::os::unix::fs::symlink(outer.path().join("secret.txt"), store.join("leak")).unwrap();
    let serve = Serve::start(&store);

    let (status, index) = serve.get("/");
    assert_eq!(status, 200);
    assert_eq!(index.matches("<tr class=\"run\"").count(), 2, "{index}");
    let (_, invalid) = serve.get("/?verdict=invalid");
    assert_eq!(invalid.matches("<tr class=\"run\"").count(), 1, "{invalid}");
    assert!(invalid.contains("/fenced-register/0-unfenced/timeline.html"));
    let (status, timeline) = serve.get("/fenced-register/0-unfenced/timeline.html");
    assert_eq!(status, 200);
    assert!(timeline.contains("id=\"anomalies\""));
    assert_eq!(serve.get("/latest/verdict.json").0, 200);

    for attack in [
        "/../secret.txt",
        "/fenced-register/../../secret.txt",
        "/%2e%2e/secret.txt",
        "/%2E%2E%2Fsecret.txt",
        "/fenced-register/..%2f..%2fsecret.txt",
        "/..%5csecret.txt",
        "/leak",
        "/etc/passwd",
        "//etc/passwd",
        "http://127.0.0.1/../secret.txt",
        &format!("{}", outer.path().join("secret.txt").display()),
    ] {
        let (status, body) = serve.get(attack);
        assert_eq!(status, 404, "{attack}: {body}");
        assert!(!body.contains("top secret"), "{attack}");
    }
}

#[test]
fn serve_refuses_a_network_address_unless_allowed_and_then_warns() {
    let store = tempfile::tempdir().unwrap();
    for listen in ["0.0.0.0:0", "[::]:0"] {
        let mut refused = Command::new(env!("CARGO_BIN_EXE_fencer"))
            .arg("serve")
            .arg(store.path())
            .args(["--listen", listen])
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let deadline = Instant::now() + Duration::from_secs(20);
        let status = loop {
            if let Some(status) = refused.try_wait().unwrap() {
                break status;
            }
            if Instant::now() > deadline {
                let _ = refused.kill();
                panic!("{listen}: served the archive to the network");
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        let mut said = String::new();
        refused
            .stderr
            .take()
            .unwrap()
            .read_to_string(&mut said)
            .unwrap();
        assert_eq!(status.code(), Some(254), "{listen}: {said}");
        assert!(said.contains("is not a loopback address"), "{said}");
        assert!(said.contains("--allow-remote"), "{said}");
    }
    let mut child = Command::new(env!("CARGO_BIN_EXE_fencer"))
        .arg("serve")
        .arg(store.path())
        .args(["--listen", "0.0.0.0:0", "--allow-remote"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let _ = child.kill();
    let _ = child.wait();
    let mut warning = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut warning)
        .unwrap();
    assert!(line.contains("http://0.0.0.0:"), "{line}");
    assert!(
        warning.contains("warning: serving the run archive to the network"),
        "{warning}"
    );
}

#[test]
fn idle_connections_do_not_lock_a_reader_out() {
    let store = tempfile::tempdir().unwrap();
    let serve = Serve::start(store.path());
    // Far more connections than the server holds, none sending a byte.
    let idle: Vec<TcpStream> = (0..200)
        .map(|_| TcpStream::connect(&serve.addr).unwrap())
        .collect();
    std::thread::sleep(Duration::from_millis(300));
    let started = Instant::now();
    let (status, index) = serve.get("/");
    assert_eq!(status, 200, "{index}");
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "answered after {:?}",
        started.elapsed()
    );
    drop(idle);
}

/// The SHA-256 of `text`, to compare with a CSP hash source decoded.
fn script_sha256(text: &str) -> Vec<u8> {
    use sha2::Digest;
    sha2::Sha256::digest(text.as_bytes()).to_vec()
}

#[test]
fn served_pages_may_run_the_timeline_script_and_no_other() {
    let outer = tempfile::tempdir().unwrap();
    let store = outer.path().join("store");
    save(&demo::plan(StoreBackend::SqliteUnfenced), &store, "0-demo");
    let serve = Serve::start(&store);
    let (status, head, page) = serve.exchange("/fenced-register/0-demo/timeline.html");
    assert_eq!(status, 200);
    let policy = head
        .lines()
        .find_map(|line| line.strip_prefix("Content-Security-Policy: "))
        .unwrap_or_else(|| panic!("no policy in {head}"));
    let scripts = policy
        .split("; ")
        .find_map(|directive| directive.strip_prefix("script-src "))
        .unwrap_or_else(|| panic!("no script-src in {policy}"));
    assert!(!scripts.contains("unsafe-inline"), "{policy}");
    let hash = scripts
        .strip_prefix("'sha256-")
        .and_then(|rest| rest.strip_suffix('\''))
        .unwrap_or_else(|| panic!("expected one sha256 source, found {scripts}"));
    let inline =
        &page[page.find("<script>").unwrap() + "<script>".len()..page.find("</script>").unwrap()];
    assert_eq!(base64_decode(hash), script_sha256(inline));
}

// ---- headless Chromium over WebDriver ----

/// One WebDriver call: `method path` with a JSON body; returns the response's `value`.
fn webdriver(port: u16, method: &str, path: &str, body: &serde_json::Value) -> serde_json::Value {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(60)))
        .unwrap();
    let body = if body.is_null() {
        String::new()
    } else {
        body.to_string()
    };
    write!(
        stream,
        "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    // chromedriver keeps the connection open: read the head, then exactly Content-Length.
    let mut reader = BufReader::new(stream);
    let mut length = 0;
    loop {
        let mut line = String::new();
        reader.read_line(&mut line).unwrap();
        let lower = line.to_ascii_lowercase();
        if let Some(value) = lower.strip_prefix("content-length:") {
            length = value.trim().parse().unwrap();
        }
        if line == "\r\n" || line.is_empty() {
            break;
        }
    }
    let mut body = vec![0; length];
    reader.read_exact(&mut body).unwrap();
    let response = String::from_utf8_lossy(&body);
    let json = &*response;
    let parsed: serde_json::Value = serde_json::from_str(json)
        .unwrap_or_else(|error| panic!("{method} {path}: {error}: {response}"));
    let value = parsed["value"].clone();
    if value.get("error").is_some() {
        panic!("{method} {path}: {value}");
    }
    value
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Standard base64 → bytes (for the screenshot).
fn base64_decode(text: &str) -> Vec<u8> {
    let value = |c: u8| match c {
        b'A'..=b'Z' => c - b'A',
        b'a'..=b'z' => c - b'a' + 26,
        b'0'..=b'9' => c - b'0' + 52,
        b'+' => 62,
        b'/' => 63,
        _ => panic!("not base64: {c}"),
    };
    let clean: Vec<u8> = text
        .bytes()
        .filter(|c| !c.is_ascii_whitespace() && *c != b'=')
        .collect();
    let mut out = Vec::with_capacity(clean.len() * 3 / 4);
    for chunk in clean.chunks(4) {
        let mut acc = 0u32;
        for (i, &c) in chunk.iter().enumerate() {
            acc |= u32::from(value(c)) << (18 - 6 * i);
        }
        out.extend_from_slice(&acc.to_be_bytes()[1..chunk.len()]);
    }
    out
}

/// A browser session driven through chromedriver; both end when dropped.
struct Browser {
    driver: Child,
    port: u16,
    session: String,
    _profile: tempfile::TempDir,
}

impl Browser {
    fn start(chromium: &Path, chromedriver: &Path) -> Browser {
        let port = free_port();
        let driver = Command::new(chromedriver)
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("chromedriver starts");
        let deadline = Instant::now() + Duration::from_secs(20);
        while TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(Instant::now() < deadline, "chromedriver did not listen");
            std::thread::sleep(Duration::from_millis(100));
        }
        let profile = tempfile::tempdir().unwrap();
        let args = [
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--disable-dev-shm-usage",
            "--window-size=1600,1000",
            &format!("--user-data-dir={}", profile.path().display()),
        ];
        let mut browser = Browser {
            driver,
            port,
            session: String::new(),
            _profile: profile,
        };
        let session = webdriver(
            port,
            "POST",
            "/session",
            &serde_json::json!({"capabilities": {"alwaysMatch": {
                "browserName": "chrome",
                "goog:chromeOptions": {"binary": chromium, "args": args},
                "goog:loggingPrefs": {"browser": "ALL"}
            }}}),
        );
        browser.session = session["sessionId"].as_str().unwrap().to_string();
        browser
    }

    fn call(&self, method: &str, path: &str, body: serde_json::Value) -> serde_json::Value {
        webdriver(
            self.port,
            method,
            &format!("/session/{}{path}", self.session),
            &body,
        )
    }

    fn script(&self, script: &str) -> serde_json::Value {
        self.call(
            "POST",
            "/execute/sync",
            serde_json::json!({"script": script, "args": []}),
        )
    }

    /// Console messages of level SEVERE (errors, failed loads, CSP violations).
    fn console_errors(&self) -> Vec<String> {
        let log = self.call("POST", "/se/log", serde_json::json!({"type": "browser"}));
        log.as_array()
            .unwrap()
            .iter()
            .filter(|entry| entry["level"] == "SEVERE")
            .map(|entry| entry["message"].to_string())
            .collect()
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        if !self.session.is_empty() {
            let _ = std::panic::catch_unwind(|| {
                webdriver(
                    self.port,
                    "DELETE",
                    &format!("/session/{}", self.session),
                    &serde_json::json!({}),
                )
            });
        }
        let _ = self.driver.kill();
        let _ = self.driver.wait();
    }
}

#[test]
fn timeline_loads_in_headless_chromium_without_errors() {
    let (Some(chromium), Some(chromedriver)) = (on_path("chromium"), on_path("chromedriver"))
    else {
        assert!(
            std::env::var("FENCER_REQUIRE_BACKENDS").as_deref() != Ok("1"),
            "chromium and chromedriver are required (FENCER_REQUIRE_BACKENDS=1): \
             apt-get install chromium chromium-driver"
        );
        println!("FENCER-SKIPPED-BACKEND chromium: apt-get install chromium chromium-driver");
        return;
    };
    let outer = tempfile::tempdir().unwrap();
    let store = outer.path().join("store");
    let (mutant, verdict) = save(&failing_mutant_plan(), &store, "1-mutant");
    let mut hostile_plan = demo::plan(StoreBackend::SqliteUnfenced);
    hostile_plan.workers[0].cycles[0].value = Some(HOSTILE.into());
    save(&hostile_plan, &store, "0-hostile");
    let serve = Serve::start(&store);
    let browser = Browser::start(&chromium, &chromedriver);
    let url = |run: &str| format!("http://{}/fenced-register/{run}/timeline.html", serve.addr);

    browser.call("POST", "/url", serde_json::json!({"url": url("1-mutant")}));
    let listed = browser.script("return document.querySelectorAll('#anomalies li.anomaly').length");
    assert_eq!(listed, verdict.anomalies.len());
    let marked = browser.script("return document.querySelectorAll('circle.ev').length");
    assert!(marked.as_u64().unwrap() > 0);
    // Clicking the first anomaly zooms onto its evidence and focuses its markers.
    let range = browser.script(
        "document.querySelector('button.goto').click();\
         return new Promise(r => requestAnimationFrame(() => requestAnimationFrame(() => \
         r([document.getElementById('range').textContent, document.querySelectorAll('.ev.focus').length]))));",
    );
    let shown = range[0].as_str().unwrap().to_string();
    assert!(!shown.starts_with("0.000s"), "not zoomed: {shown}");
    assert_eq!(range[1], verdict.anomalies[0].events.len(), "{range}");
    // Wheel zooms in around the cursor; a drag pans; neither throws.
    let zoomed = browser.script(
        "const svg = document.getElementById('timeline');\
         const before = document.getElementById('range').textContent;\
         svg.dispatchEvent(new WheelEvent('wheel', {deltaY: -100, clientX: 600, clientY: 300, bubbles: true, cancelable: true}));\
         svg.dispatchEvent(new MouseEvent('mousedown', {clientX: 600, clientY: 300, bubbles: true}));\
         window.dispatchEvent(new MouseEvent('mousemove', {clientX: 500, clientY: 300}));\
         window.dispatchEvent(new MouseEvent('mouseup', {}));\
         return new Promise(r => requestAnimationFrame(() => requestAnimationFrame(() => \
         r([before, document.getElementById('range').textContent]))));",
    );
    assert_ne!(zoomed[0], zoomed[1], "wheel and drag did not move the view");
    let errors = browser.console_errors();
    assert!(errors.is_empty(), "console errors: {errors:?}");
    // Back onto the first anomaly for the screenshot.
    browser.script("document.querySelector('button.goto').click(); return null;");
    let screenshot = browser.call("GET", "/screenshot", serde_json::json!(null));
    let png = base64_decode(screenshot.as_str().unwrap());
    assert!(png.starts_with(b"\x89PNG"), "screenshot is not a PNG");
    let artifacts = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/test-artifacts");
    std::fs::create_dir_all(&artifacts).unwrap();
    std::fs::write(artifacts.join("timeline-failing-run.png"), &png).unwrap();
    assert!(mutant.join("timeline.html").is_file());

    // A hostile value is shown as text and never runs: no alert is open (a WebDriver call
    // would fail with "unexpected alert open"), and the page holds only fencer's own script.
    browser.call("POST", "/url", serde_json::json!({"url": url("0-hostile")}));
    let scripts = browser.script("return document.querySelectorAll('script').length");
    assert_eq!(scripts, 1);
    let as_text = browser.script(&format!(
        "return Array.from(document.querySelectorAll('title')).some(t => t.textContent.includes({HOSTILE:?}))"
    ));
    assert_eq!(as_text, true);
    let errors = browser.console_errors();
    assert!(errors.is_empty(), "console errors: {errors:?}");

    // A script in a served file that is not the timeline's own is blocked.
    std::fs::write(
        store.join("injected.html"),
        "<!DOCTYPE html><title>static</title><script>document.title = 'ran'</script>",
    )
    .unwrap();
    browser.call(
        "POST",
        "/url",
        serde_json::json!({"url": format!("http://{}/injected.html", serve.addr)}),
    );
    assert_eq!(browser.script("return document.title"), "static");
    let errors = browser.console_errors();
    assert!(
        errors
            .iter()
            .any(|error| error.contains("Content Security Policy")),
        "no policy violation reported: {errors:?}"
    );
}

#[test]
fn explain_tells_the_story_and_exits_with_the_verdict() {
    let root = tempfile::tempdir().unwrap();
    let (dir, _) = save(
        &demo::plan(StoreBackend::SqliteUnfenced),
        root.path(),
        "demo",
    );
    let output = Command::new(env!("CARGO_BIN_EXE_fencer"))
        .arg("explain")
        .arg(&dir)
        .output()
        .unwrap();
    let story = String::from_utf8_lossy(&output.stdout);
    assert_eq!(output.status.code(), Some(1), "{story}");
    assert!(
        story.contains("Anomaly 1 of 1: stale-write-accepted"),
        "{story}"
    );
    assert!(story.contains("  1. "), "{story}");
    assert!(story.contains("Defence that failed: fencing"), "{story}");
    let missing = Command::new(env!("CARGO_BIN_EXE_fencer"))
        .args(["explain", "no/such/run"])
        .output()
        .unwrap();
    assert_eq!(missing.status.code(), Some(254));
    assert!(String::from_utf8_lossy(&missing.stderr).contains("no/such/run: not a run directory"));
}
