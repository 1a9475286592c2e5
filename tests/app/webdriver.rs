//! The WebDriver harness of the app's end-to-end tests: the app started under Xvfb behind
//! tauri-driver (WebKitWebDriver), a session on its window, and what a test does through it
//! (click, type, read, wait, run a script, screenshot, call a command as the page does), with
//! the checks of what a person would see cut off.

use std::io::Write;
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use base64::Engine as _;
use serde_json::{json, Value};

/// One app at a time: the tests share the display and the WebDriver ports.
pub static ONE_APP: Mutex<()> = Mutex::new(());

pub const ELEMENT: &str = "element-6066-11e4-a52e-4f735466cecf";

/// A child process started in its own process group; dropping it ends the whole group
/// (tauri-driver leaves WebKitWebDriver and the app behind otherwise).
pub struct Killed(pub Child);

impl Killed {
    pub fn spawn(command: &mut Command) -> std::io::Result<Killed> {
        use std::os::unix::process::CommandExt;
        command.process_group(0).spawn().map(Killed)
    }
}

impl Drop for Killed {
    fn drop(&mut self) {
        let group = format!("-{}", self.0.id());
        let _ = Command::new("kill").args(["-TERM", "--", &group]).status();
        std::thread::sleep(Duration::from_millis(300));
        let _ = Command::new("kill").args(["-KILL", "--", &group]).status();
        let _ = self.0.wait();
    }
}

pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

pub fn wait_for_port(port: u16, what: &str) {
    let until = Instant::now() + Duration::from_secs(30);
    while TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(Instant::now() < until, "{what} did not start listening on port {port}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

pub fn tauri_driver() -> PathBuf {
    let in_cargo = dirs_home().join(".cargo/bin/tauri-driver");
    if in_cargo.is_file() {
        return in_cargo;
    }
    PathBuf::from("tauri-driver")
}

pub fn dirs_home() -> PathBuf {
    PathBuf::from(std::env::var_os("HOME").expect("HOME is set"))
}

pub fn screenshots_dir() -> PathBuf {
    let dir = Path::new(env!("CARGO_BIN_EXE_quire-app")).parent().unwrap().join("screenshots");
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// A running app: its display, its driver and a WebDriver session on its main window.
pub struct App {
    pub session: String,
    pub base: String,
    _driver: Killed,
    _display: Option<Killed>,
    pub home: tempfile::TempDir,
}

impl App {
    /// Starts the app with a fresh QUIRE_HOME holding `settings`, and the installed models.
    pub fn start(settings: Value) -> App {
        App::start_with_models(settings, &quire_models::models_dir().unwrap(), &[])
    }

    pub fn start_with_models(settings: Value, models: &Path, env: &[(&str, &str)]) -> App {
        App::start_traced(settings, models, env, None)
    }

    /// Starts the app; with `trace`, tauri-driver and everything it starts (WebKitWebDriver, the
    /// app, WebKit's processes) run under strace, their network calls written to that file.
    pub fn start_traced(settings: Value, models: &Path, env: &[(&str, &str)], trace: Option<&Path>) -> App {
        let home = tempfile::tempdir().unwrap();
        std::fs::write(home.path().join("settings.json"), settings.to_string()).unwrap();
        let mut display_proc = None;
        let display = match std::env::var("DISPLAY") {
            Ok(d) if !d.is_empty() => d,
            _ => {
                // Xvfb picks a free display itself and writes its number to stdout.
                let mut child = Killed::spawn(
                    Command::new("Xvfb")
                        .args(["-displayfd", "1", "-screen", "0", "1920x1200x24", "-nolisten", "tcp"])
                        .stdout(Stdio::piped())
                        .stderr(Stdio::null()),
                )
                .expect("Xvfb not found: install the xvfb package (scripts/setup.sh does)");
                let mut line = String::new();
                std::io::BufRead::read_line(&mut std::io::BufReader::new(child.0.stdout.take().unwrap()), &mut line)
                    .unwrap();
                let n: u32 =
                    line.trim().parse().unwrap_or_else(|_| panic!("Xvfb did not report its display: {line:?}"));
                display_proc = Some(child);
                format!(":{n}")
            }
        };
        let (port, native) = (free_port(), free_port());
        let mut driver = match trace {
            Some(file) => {
                let mut c = Command::new("strace");
                c.args(["-f", "-qq", "--seccomp-bpf", "-e", "trace=connect,sendto,sendmsg,sendmmsg", "-o"])
                    .arg(file)
                    .arg(tauri_driver());
                c
            }
            None => Command::new(tauri_driver()),
        };
        let driver = Killed::spawn(
            driver
                .args(["--port", &port.to_string(), "--native-port", &native.to_string()])
                .env("DISPLAY", &display)
                .env("QUIRE_HOME", home.path())
                .env("QUIRE_MODELS", models)
                // Software rendering: Xvfb has no GPU, and WebKit's compositor would stall without it.
                .env("WEBKIT_DISABLE_COMPOSITING_MODE", "1")
                .env("LIBGL_ALWAYS_SOFTWARE", "1")
                .envs(env.iter().copied()),
        )
        .expect("tauri-driver not found: `cargo install tauri-driver --locked` (scripts/setup.sh does)");
        wait_for_port(port, "tauri-driver");
        let base = format!("http://127.0.0.1:{port}");
        let session = new_session(&base);
        App { session, base, _driver: driver, _display: display_proc, home }
    }

    /// Quits the app and starts it again on the same QUIRE_HOME, as a person restarting it.
    pub fn restart(&mut self) {
        ureq::delete(&format!("{}/session/{}", self.base, self.session)).call().expect("the app did not quit");
        self.session = new_session(&self.base);
    }

    pub fn cmd(&self, method: &str, path: &str, body: Option<Value>) -> Value {
        self.try_cmd(method, path, body).unwrap_or_else(|e| panic!("{e}"))
    }

    pub fn try_cmd(&self, method: &str, path: &str, body: Option<Value>) -> Result<Value, String> {
        let url = format!("{}/session/{}{}", self.base, self.session, path);
        let req = ureq::request(method, &url).timeout(Duration::from_secs(120));
        let res = match body {
            Some(b) => req.set("Content-Type", "application/json").send_string(&b.to_string()),
            None => req.call(),
        };
        let text = match res {
            Ok(r) => r.into_string().unwrap(),
            Err(ureq::Error::Status(code, r)) => {
                return Err(format!("{method} {path}: {code} {}", r.into_string().unwrap_or_default()))
            }
            Err(e) => return Err(format!("{method} {path}: {e}")),
        };
        Ok(serde_json::from_str::<Value>(&text).unwrap()["value"].clone())
    }

    pub fn js(&self, script: &str, args: Value) -> Value {
        self.cmd("POST", "/execute/sync", Some(json!({"script": script, "args": args})))
    }

    pub fn find(&self, css: &str) -> String {
        let v = self.cmd("POST", "/element", Some(json!({"using": "css selector", "value": css})));
        v[ELEMENT].as_str().unwrap_or_else(|| panic!("no element {css}: {v}")).to_string()
    }

    /// Adds the folder `path` in the Library box and waits until `at_least` documents are listed.
    pub fn add_documents(&self, path: &Path, at_least: u64, timeout: Duration) {
        self.type_into("#add-path-input", path.to_str().unwrap());
        self.click("#add-path-button");
        self.wait_until("the documents listed", timeout, |a| a.documents_listed().filter(|&n| n >= at_least));
    }

    /// How many documents the library says it holds ("(12)" beside its title); the list itself
    /// draws only the rows in view.
    pub fn documents_listed(&self) -> Option<u64> {
        self.text("#doc-count").trim_matches(|c| c == '(' || c == ')').replace(',', "").parse().ok()
    }

    /// Clicks the element once it is there and can take a click: a dialog still opening or a
    /// list re-rendered under the pointer is waited for (up to 20 s), as a person would wait,
    /// and an element another covers is scrolled to the middle of its box, as a person would.
    pub fn click(&self, css: &str) {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let clicked = self
                .try_cmd("POST", "/element", Some(json!({"using": "css selector", "value": css})))
                .and_then(|v| v[ELEMENT].as_str().map(str::to_string).ok_or_else(|| format!("no element {css}: {v}")))
                .and_then(|id| self.try_cmd("POST", &format!("/element/{id}/click"), Some(json!({}))));
            match clicked {
                Ok(_) => return,
                Err(e) if Instant::now() >= deadline => panic!("clicking {css}: {e}"),
                Err(e) => {
                    if e.contains("intercepted") {
                        let centre = "document.querySelector(arguments[0])?.scrollIntoView({block: 'center'});";
                        let _ = self.try_cmd("POST", "/execute/sync", Some(json!({"script": centre, "args": [css]})));
                    }
                    std::thread::sleep(Duration::from_millis(250))
                }
            }
        }
    }

    /// Fills a password field. WebKitWebDriver refuses to type into or click password fields
    /// ("element not interactable", while the same field as type=text takes keys), so the value
    /// is set as the page's own input event would leave it.
    pub fn fill_password(&self, css: &str, text: &str) {
        self.js(
            "const e = document.querySelector(arguments[0]); e.focus(); e.value = arguments[1]; e.dispatchEvent(new Event('input', {bubbles: true}));",
            json!([css, text]),
        );
    }

    pub fn type_into(&self, css: &str, text: &str) {
        let id = self.find(css);
        self.cmd("POST", &format!("/element/{id}/value"), Some(json!({"text": text})));
    }

    /// Text of the first element matching `css` ("" when there is none).
    pub fn text(&self, css: &str) -> String {
        self.js("const e = document.querySelector(arguments[0]); return e ? e.textContent : '';", json!([css]))
            .as_str()
            .unwrap_or("")
            .to_string()
    }

    pub fn attr(&self, css: &str, name: &str) -> Option<String> {
        self.js(
            "const e = document.querySelector(arguments[0]); return e ? e.getAttribute(arguments[1]) : null;",
            json!([css, name]),
        )
        .as_str()
        .map(str::to_string)
    }

    pub fn wait_until<T>(&self, what: &str, timeout: Duration, mut f: impl FnMut(&App) -> Option<T>) -> T {
        let until = Instant::now() + timeout;
        loop {
            if let Some(v) = f(self) {
                return v;
            }
            if Instant::now() >= until {
                // What the window showed when the wait gave up: its words in the log, and a
                // screenshot, so a failure on CI says what the app was doing.
                let shown = self.try_cmd(
                    "POST",
                    "/execute/sync",
                    Some(json!({"script": "return document.body.innerText;", "args": []})),
                );
                let shown = match shown {
                    Ok(text) => text.as_str().unwrap_or_default().to_string(),
                    Err(e) => e,
                };
                eprintln!("the window, when the wait for {what} gave up:\n{shown}");
                if let Ok(png) = self.try_cmd("GET", "/screenshot", None) {
                    self.save_png("timed-out.png", png.as_str().unwrap_or_default());
                }
                panic!("timed out after {timeout:?} waiting for {what}");
            }
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    pub fn screenshot(&self, name: &str) -> PathBuf {
        let png = self.cmd("GET", "/screenshot", None);
        self.save_png(name, png.as_str().unwrap())
    }

    pub fn element_screenshot(&self, css: &str, name: &str) -> PathBuf {
        let id = self.find(css);
        let png = self.cmd("GET", &format!("/element/{id}/screenshot"), None);
        self.save_png(name, png.as_str().unwrap())
    }

    pub fn save_png(&self, name: &str, b64: &str) -> PathBuf {
        let path = screenshots_dir().join(name);
        let bytes = base64::engine::general_purpose::STANDARD.decode(b64).unwrap();
        assert!(bytes.starts_with(b"\x89PNG"), "screenshot is a PNG");
        std::fs::File::create(&path).unwrap().write_all(&bytes).unwrap();
        eprintln!("screenshot: {}", path.display());
        path
    }

    pub fn set_size(&self, width: u32, height: u32) {
        self.cmd("POST", "/window/rect", Some(json!({"width": width, "height": height})));
        std::thread::sleep(Duration::from_millis(600));
    }

    pub fn wait_ready(&self) {
        self.wait_until("the collection to open and the model to load", Duration::from_secs(240), |app| {
            (app.attr("#model-status", "data-state").as_deref() == Some("ready")).then_some(())
        });
    }

    /// The app's own process (not WebKit's), found by its executable and this app's home.
    pub fn app_pid(&self) -> u32 {
        let exe = std::fs::canonicalize(env!("CARGO_BIN_EXE_quire-app")).unwrap();
        let home = format!("QUIRE_HOME={}", self.home.path().display());
        std::fs::read_dir("/proc")
            .unwrap()
            .flatten()
            .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
            .find(|pid| {
                std::fs::read_link(format!("/proc/{pid}/exe")).is_ok_and(|p| p == exe)
                    && std::fs::read(format!("/proc/{pid}/environ"))
                        .is_ok_and(|env| env.split(|&b| b == 0).any(|v| v == home.as_bytes()))
            })
            .expect("the app's process")
    }

    pub fn bytes(&self, css: &str) -> u64 {
        self.attr(css, "data-bytes").and_then(|v| v.parse().ok()).unwrap_or(0)
    }

    /// Asks in the current window and returns every distinct text the answer showed on its way,
    /// sampled every 20 ms, until the answer is complete; and the most retrieved passages the
    /// sources pane listed while the answer had no text yet.
    pub fn ask(&self, question: &str, timeout: Duration) -> (Vec<String>, u64) {
        let before = self.js("return document.querySelectorAll('.exchange').length;", json!([])).as_u64().unwrap();
        self.type_into("#question", question);
        self.click("#ask-button");
        let mut seen: Vec<String> = Vec::new();
        let mut sources_before_text = 0;
        let until = Instant::now() + timeout;
        loop {
            let v = self.js(
                "const x = document.querySelectorAll('.exchange'); if (x.length <= arguments[0]) return null; \
                 const e = x[x.length - 1]; const list = document.getElementById('source-list'); \
                 return [e.dataset.state, e.querySelector('.answer-text').textContent, e.querySelector('.answer-meta').textContent, \
                         list.dataset.state === 'retrieved' ? list.querySelectorAll('.source').length : 0];",
                json!([before]),
            );
            if let Some(a) = v.as_array() {
                let (state, text) = (a[0].as_str().unwrap_or(""), a[1].as_str().unwrap_or("").to_string());
                if text.is_empty() && state == "streaming" {
                    sources_before_text = sources_before_text.max(a[3].as_u64().unwrap_or(0));
                }
                if !text.is_empty() && seen.last() != Some(&text) {
                    seen.push(text);
                }
                match state {
                    "done" => return (seen, sources_before_text),
                    "error" | "cancelled" => panic!("the answer failed: {}", a[2]),
                    _ => {}
                }
            }
            assert!(Instant::now() < until, "no complete answer to {question:?} within {timeout:?}; seen {seen:?}");
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for App {
    fn drop(&mut self) {
        let _ = ureq::delete(&format!("{}/session/{}", self.base, self.session)).call();
        eprintln!("app home was {}", self.home.path().display());
    }
}

/// A WebDriver session: tauri-driver starts the app for it.
pub fn new_session(base: &str) -> String {
    let caps = json!({"capabilities": {"alwaysMatch": {
        "browserName": "wry",
        "tauri:options": {"application": env!("CARGO_BIN_EXE_quire-app")}
    }}});
    let reply = post(base, "/session", &caps);
    reply["value"]["sessionId"].as_str().unwrap_or_else(|| panic!("no session: {reply}")).to_string()
}

/// Inputs and text areas on show whose placeholder is wider than their text box (by the
/// placeholder's font): what a person would see cut off.
pub const CUT_PLACEHOLDERS: &str = "const ctx = document.createElement('canvas').getContext('2d'); \
    return [...document.querySelectorAll('input[placeholder], textarea[placeholder]')] \
      .filter(e => e.offsetParent !== null && !e.value) \
      .filter(e => { const s = getComputedStyle(e); ctx.font = s.font; \
        const room = e.clientWidth - parseFloat(s.paddingLeft) - parseFloat(s.paddingRight); \
        return ctx.measureText(e.placeholder).width > room; }) \
      .map(e => e.id + ': ' + e.placeholder);";

/// What the sources pane lists: each passage's document and page, and whether it is cited.
pub fn pane(app: &App) -> Vec<String> {
    app.js(
        "return [...document.querySelectorAll('#source-list .source')].map(e => \
         e.querySelector('.source-doc').textContent + ' cited=' + e.dataset.cited);",
        json!([]),
    )
    .as_array()
    .unwrap()
    .iter()
    .map(|v| v.as_str().unwrap().to_string())
    .collect()
}

pub fn post(base: &str, path: &str, body: &Value) -> Value {
    let until = Instant::now() + Duration::from_secs(30);
    loop {
        match ureq::post(&format!("{base}{path}"))
            .set("Content-Type", "application/json")
            .send_string(&body.to_string())
        {
            Ok(r) => return serde_json::from_str(&r.into_string().unwrap()).unwrap(),
            Err(e) if Instant::now() < until => {
                eprintln!("retrying {path}: {e}");
                std::thread::sleep(Duration::from_millis(500));
            }
            Err(ureq::Error::Status(code, r)) => panic!("POST {path}: {code} {}", r.into_string().unwrap_or_default()),
            Err(e) => panic!("POST {path}: {e}"),
        }
    }
}

impl App {
    /// Calls a command the way the UI does (Tauri's IPC from the page); `Ok(reply)` or
    /// `Err(the error text)`.
    pub fn invoke(&self, command: &str, args: Value) -> Result<Value, String> {
        let v = self.js(
            "return window.__TAURI_INTERNALS__.invoke(arguments[0], arguments[1]).then(v => ({ok: v === undefined ? null : v}), e => ({err: String(e)}));",
            json!([command, args]),
        );
        match v.get("err") {
            Some(e) => Err(e.as_str().unwrap_or_default().to_string()),
            None => Ok(v["ok"].clone()),
        }
    }
}

/// The app's words that a person would see cut off: each word of the catalogue on show (and
/// every button and label) whose box runs past the window's edge, is clipped inside itself, or
/// is clipped by a box around it that does not scroll. Words only screen readers read
/// (`.visually-hidden`) are not on show.
pub const CUT_WORDS: &str = "const out = []; const vw = document.documentElement.clientWidth; \
    for (const e of document.querySelectorAll('[data-i18n], button, label, legend, summary')) { \
      if (!e.getClientRects().length || e.closest('.visually-hidden')) continue; \
      const s = getComputedStyle(e); if (s.visibility === 'hidden') continue; \
      const r = e.getBoundingClientRect(); if (r.width === 0 || r.height === 0) continue; \
      let cut = r.right > vw + 1 || r.left < -1 || (s.overflowX !== 'visible' && e.scrollWidth > e.clientWidth + 1); \
      for (let a = e.parentElement; a && !cut; a = a.parentElement) { \
        const as = getComputedStyle(a); \
        if (as.overflowX === 'auto' || as.overflowX === 'scroll') break; \
        if (as.overflowX === 'visible') continue; \
        const ar = a.getBoundingClientRect(); \
        cut = r.right > ar.right + 1 || r.left < ar.left - 1; \
      } \
      if (cut) out.push((e.id || e.dataset.i18n || e.tagName) + ': ' + e.textContent.trim().slice(0, 60)); \
    } \
    return out;";

/// Labels that must stay on one line (the window's buttons, its status, the pane tabs) broken
/// over two or more: a word split ("設\n定") or a label taller than its row.
pub const WRAPPED_LABELS: &str = "return [...document.querySelectorAll('.topbar button, .pill, .pane-tab')] \
      .filter(e => e.getClientRects().length) \
      .filter(e => { const s = getComputedStyle(e); \
        const inner = e.getBoundingClientRect().height - parseFloat(s.paddingTop) - parseFloat(s.paddingBottom); \
        return Math.round(inner / (parseFloat(s.fontSize) * 1.25)) >= 2; }) \
      .map(e => e.id + ': ' + e.textContent.trim());";
