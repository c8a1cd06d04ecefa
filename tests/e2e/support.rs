//! Test support: a real `cgc-fresh serve` process in an isolated sandbox
//! (its own HOME, runtime and state directories), and a line-oriented
//! socket client that speaks raw JSON so tests can send anything.

use std::fs;
use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

pub const BIN: &str = env!("CARGO_BIN_EXE_cgc-fresh");

/// An isolated set of directories for one service.
pub struct Sandbox {
    pub root: tempfile::TempDir,
}

impl Sandbox {
    pub fn new() -> Sandbox {
        let root = tempfile::tempdir().expect("tempdir");
        for dir in ["ws", "home", "runtime", "state"] {
            fs::create_dir_all(root.path().join(dir)).expect("mkdir");
        }
        Sandbox { root }
    }
    pub fn workspace(&self) -> PathBuf {
        self.root.path().join("ws")
    }
    pub fn home(&self) -> PathBuf {
        self.root.path().join("home")
    }
    pub fn runtime_dir(&self) -> PathBuf {
        self.root.path().join("runtime")
    }
    pub fn state_home(&self) -> PathBuf {
        self.root.path().join("state")
    }
    /// The command for the binary with this sandbox's environment only.
    pub fn command(&self) -> Command {
        let mut cmd = Command::new(BIN);
        cmd.env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("HOME", self.home())
            .env("XDG_RUNTIME_DIR", self.runtime_dir())
            .env("XDG_STATE_HOME", self.state_home())
            .env("CGC_FRESH_LOG", "debug")
            .arg("--workspace")
            .arg(self.workspace());
        cmd
    }
    /// The workspace's state directory (`$XDG_STATE_HOME/cgc-fresh/<id>`):
    /// `state.json`, the instance lock, the child registry.
    pub fn state_dir(&self) -> PathBuf {
        let canonical = fs::canonicalize(self.workspace()).expect("canonical");
        self.state_home()
            .join("cgc-fresh")
            .join(workspace_id(&canonical))
    }
    /// The workspace's freshness record.
    pub fn state_file(&self) -> PathBuf {
        self.state_dir().join("state.json")
    }
    /// Where the default socket for this sandbox's workspace is.
    pub fn default_socket(&self) -> PathBuf {
        let canonical = fs::canonicalize(self.workspace()).expect("canonical");
        let id = workspace_id(&canonical);
        self.runtime_dir()
            .join("cgc-fresh")
            .join(format!("{id}.sock"))
    }
}

/// SHA-256 of the canonical path, first 16 hex digits (the documented rule).
pub fn workspace_id(path: &Path) -> String {
    let out = Command::new("sha256sum")
        .arg("-")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .and_then(|mut child| {
            child
                .stdin
                .take()
                .expect("stdin")
                .write_all(path.as_os_str().as_encoded_bytes())?;
            child.wait_with_output()
        });
    let out = out.expect("sha256sum");
    String::from_utf8_lossy(&out.stdout)[..16].to_string()
}

/// A running `cgc-fresh serve`.
pub struct Service {
    pub child: Child,
    pub socket: PathBuf,
    pub log: PathBuf,
    /// Whether its log level lets it log `serving` (info).
    pub says_serving: bool,
}

impl Service {
    /// Starts `serve` with extra args/env and waits until it accepts.
    pub fn start(sandbox: &Sandbox, extra: &[&str], env: &[(&str, &str)]) -> Service {
        let socket = sandbox.default_socket();
        Service::start_at(sandbox, socket, extra, env)
    }

    pub fn start_at(
        sandbox: &Sandbox,
        socket: PathBuf,
        extra: &[&str],
        env: &[(&str, &str)],
    ) -> Service {
        let mut service = Service::spawn_at(sandbox, socket, extra, env);
        service.wait_ready();
        service
    }

    /// Spawns `serve` and returns at once, before it accepts.
    pub fn spawn_at(
        sandbox: &Sandbox,
        socket: PathBuf,
        extra: &[&str],
        env: &[(&str, &str)],
    ) -> Service {
        let log = sandbox.root.path().join(format!("serve-{}.log", unique()));
        let mut cmd = sandbox.command();
        cmd.arg("serve").args(extra).arg("--socket").arg(&socket);
        // The tests written about syncs are about `reconcile` (the fake
        // `cgc` is no Python script, so `incremental` would fall back to it
        // anyway): they name it, and a test about another strategy sets its
        // own (`incremental.rs`), which wins.
        cmd.env("CGC_SYNC_STRATEGY", "reconcile");
        for (k, v) in env {
            cmd.env(k, v);
        }
        let child = cmd
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(fs::File::create(&log).expect("log file"))
            .spawn()
            .expect("spawn serve");
        let quiet = |level: &str| ["warn", "error", "off"].iter().any(|q| level.contains(q));
        let says_serving = !env
            .iter()
            .any(|(k, v)| matches!(*k, "CGC_FRESH_LOG" | "RUST_LOG") && quiet(v));
        Service {
            child,
            socket,
            log,
            says_serving,
        }
    }

    fn wait_ready(&mut self) {
        let deadline = Instant::now() + Duration::from_secs(20);
        while Instant::now() < deadline {
            if let Some(status) = self.child.try_wait().expect("try_wait") {
                panic!("serve exited early ({status}); log:\n{}", self.log_text());
            }
            // Accepting alone is not ready: the socket takes connections
            // from its bind on, before the guard watches its path. The
            // service says `serving` once everything is in place (unless
            // its log level hides it: then accepting is all there is).
            if UnixStream::connect(&self.socket).is_ok()
                && (!self.says_serving || !self.log_events("serving").is_empty())
            {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        panic!(
            "serve did not accept and say it serves within 20 s; log:\n{}",
            self.log_text()
        );
    }

    pub fn pid(&self) -> i32 {
        self.child.id() as i32
    }

    pub fn connect(&self) -> Conn {
        Conn::connect(&self.socket)
    }

    pub fn log_text(&self) -> String {
        fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Parsed JSON log events with `event == name`.
    pub fn log_events(&self, name: &str) -> Vec<Value> {
        self.log_text()
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .filter(|v| v["event"] == name)
            .collect()
    }

    pub fn signal(&self, signal: i32) {
        send_signal(self.pid(), signal);
    }

    /// Waits for the process to exit (bounded).
    pub fn wait_exit(&mut self, within: Duration) -> ExitStatus {
        let deadline = Instant::now() + within;
        loop {
            if let Some(status) = self.child.try_wait().expect("try_wait") {
                return status;
            }
            if Instant::now() > deadline {
                panic!(
                    "serve did not exit within {within:?}; log:\n{}",
                    self.log_text()
                );
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

impl Drop for Service {
    fn drop(&mut self) {
        // A failing test's service log, kept for reading when asked:
        // `CGC_FRESH_E2E_KEEP_LOGS=<dir>` (one file per failing service).
        if std::thread::panicking() {
            if let Some(dir) = std::env::var_os("CGC_FRESH_E2E_KEEP_LOGS") {
                let name = format!("service-{}-{}.log", std::process::id(), unique());
                let _ = fs::copy(&self.log, Path::new(&dir).join(name));
            }
        }
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

fn unique() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    N.fetch_add(1, Ordering::Relaxed)
}

/// A raw JSON-lines connection.
pub struct Conn {
    pub stream: UnixStream,
    reader: BufReader<UnixStream>,
    /// Every frame received so far, in order.
    pub history: Vec<Value>,
}

impl Conn {
    pub fn connect(socket: &Path) -> Conn {
        Conn::from_stream(UnixStream::connect(socket).expect("connect"))
    }

    /// Connects once something listens on `socket` (within 10 s). A socket
    /// file exists from `bind(2)` on, before `listen(2)`: until then a
    /// connect is refused, which is no failure of the listener.
    pub fn connect_when_listening(socket: &Path) -> Conn {
        let mut stream = None;
        wait_until("a listener on the socket", Duration::from_secs(10), || {
            stream = UnixStream::connect(socket).ok();
            stream.is_some()
        });
        Conn::from_stream(stream.expect("connected"))
    }

    fn from_stream(stream: UnixStream) -> Conn {
        stream
            .set_read_timeout(Some(Duration::from_secs(10)))
            .expect("timeout");
        let reader = BufReader::new(stream.try_clone().expect("clone"));
        Conn {
            stream,
            reader,
            history: Vec::new(),
        }
    }

    pub fn send_raw(&mut self, bytes: &[u8]) {
        self.stream.write_all(bytes).expect("write");
    }

    pub fn send(&mut self, frame: Value) {
        let mut line = serde_json::to_vec(&frame).expect("json");
        line.push(b'\n');
        self.send_raw(&line);
    }

    /// The next frame, or None at EOF.
    pub fn recv_opt(&mut self) -> Option<Value> {
        let mut line = String::new();
        match self.reader.read_line(&mut line) {
            Ok(0) => None,
            Ok(_) => {
                let frame: Value = serde_json::from_str(&line)
                    .unwrap_or_else(|e| panic!("bad frame {line:?}: {e}"));
                self.history.push(frame.clone());
                Some(frame)
            }
            Err(e) => panic!("read failed: {e}; frames so far: {:?}", self.history),
        }
    }

    pub fn recv(&mut self) -> Value {
        self.recv_opt()
            .expect("connection closed while a frame was expected")
    }

    /// Sends and returns the reply with the same id (skipping pushes).
    pub fn request(&mut self, mut frame: Value, id: u64) -> Value {
        frame["id"] = Value::from(id);
        self.send(frame);
        loop {
            let reply = self.recv();
            if reply["id"] == id {
                return reply;
            }
        }
    }

    pub fn hello(&mut self) -> Value {
        let reply = self.request(
            serde_json::json!({"type": "hello", "client": "e2e", "instance": "e2e-1", "protocol": 1}),
            0,
        );
        assert_eq!(reply["type"], "welcome", "{reply}");
        reply
    }

    /// True when the service closed the connection (EOF) — reading past
    /// whatever it still had queued.
    pub fn is_closed_by_peer(&mut self) -> bool {
        let mut rest = Vec::new();
        match self.reader.read_to_end(&mut rest) {
            Ok(_) => true,
            Err(e) => e.kind() == std::io::ErrorKind::ConnectionReset,
        }
    }
}

/// The built fake `cgc` (built by `cargo build --workspace --bins`).
pub fn fake_cgc_path() -> PathBuf {
    let path = Path::new(BIN).with_file_name("fake-cgc");
    assert!(
        path.exists(),
        "{} is missing: run `cargo build --workspace --bins` first",
        path.display()
    );
    path
}

/// A fake `cgc` set-up in a sandbox: its scenario and invocation log.
pub struct FakeCgc {
    pub scenario: PathBuf,
    pub log: PathBuf,
}

impl FakeCgc {
    pub fn new(sandbox: &Sandbox, scenario: Value) -> FakeCgc {
        let scenario_path = sandbox.root.path().join("scenario.json");
        fs::write(&scenario_path, serde_json::to_vec(&scenario).expect("json")).expect("scenario");
        FakeCgc {
            scenario: scenario_path,
            log: sandbox.root.path().join("fake-cgc.log"),
        }
    }

    /// Environment for `serve` that makes it run this fake.
    pub fn env(&self) -> Vec<(String, String)> {
        vec![
            (
                "CGC_EXECUTABLE".into(),
                fake_cgc_path().display().to_string(),
            ),
            (
                "FAKE_CGC_SCENARIO".into(),
                self.scenario.display().to_string(),
            ),
            ("FAKE_CGC_LOG".into(), self.log.display().to_string()),
        ]
    }

    /// Every record of the invocation log.
    pub fn records(&self) -> Vec<Value> {
        fs::read_to_string(&self.log)
            .unwrap_or_default()
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect()
    }

    /// `start` records: one per invocation.
    pub fn invocations(&self) -> Vec<Value> {
        self.records()
            .into_iter()
            .filter(|r| r["event"] == "start")
            .collect()
    }

    /// The first `end` record (how an invocation ended), once written.
    pub fn wait_end_record(&self) -> Value {
        let mut end = None;
        wait_until("the fake's end record", Duration::from_secs(10), || {
            end = self.records().into_iter().find(|r| r["event"] == "end");
            end.is_some()
        });
        end.unwrap_or_default()
    }

    /// Every pid the log names (invocations and daemons).
    pub fn all_pids(&self) -> Vec<i32> {
        let mut pids: Vec<i32> = self
            .records()
            .iter()
            .filter_map(|r| r["pid"].as_i64())
            .map(|p| p as i32)
            .collect();
        pids.sort();
        pids.dedup();
        pids
    }
}

/// `systemd-socket-activate` listening on `socket` for a `serve` of the
/// sandbox's workspace (started on the first connection, with the socket
/// passed in), its stderr into `log`, `extra_env` as `NAME=value` pairs.
pub fn socket_activated_service(
    sandbox: &Sandbox,
    socket: &Path,
    log: &Path,
    extra_env: &[String],
) -> KilledOnDrop {
    let mut cmd = Command::new("systemd-socket-activate");
    cmd.arg("-l").arg(socket);
    for var in [
        format!("XDG_RUNTIME_DIR={}", sandbox.runtime_dir().display()),
        format!("XDG_STATE_HOME={}", sandbox.state_home().display()),
        format!("HOME={}", sandbox.home().display()),
    ]
    .iter()
    .chain(extra_env)
    {
        cmd.arg(format!("-E{var}"));
    }
    cmd.arg(BIN)
        .arg("serve")
        .arg("--workspace")
        .arg(sandbox.workspace())
        .arg("--socket")
        .arg(socket)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(fs::File::create(log).expect("log file"))
        .spawn()
        .map(KilledOnDrop)
        .expect("systemd-socket-activate is required (Debian's systemd package)")
}

/// A child process that is killed (and reaped) when dropped, so that a
/// failing test leaves nothing running.
pub struct KilledOnDrop(pub Child);

impl std::ops::Deref for KilledOnDrop {
    type Target = Child;
    fn deref(&self) -> &Child {
        &self.0
    }
}

impl std::ops::DerefMut for KilledOnDrop {
    fn deref_mut(&mut self) -> &mut Child {
        &mut self.0
    }
}

impl Drop for KilledOnDrop {
    fn drop(&mut self) {
        if let Ok(None) = self.0.try_wait() {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
}

/// A second `serve` for the sandbox's workspace fails and names `first`.
pub fn assert_second_serve_is_refused(sandbox: &Sandbox, first: &Service) {
    let out = sandbox
        .command()
        .arg("serve")
        .output()
        .expect("second serve");
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(&format!(
            "already running (pid {}, socket {})",
            first.pid(),
            first.socket.display()
        )),
        "{stderr}"
    );
}

/// Each of `pids` is gone (within 5 s each), and no process carries this
/// sandbox's owner token.
pub fn assert_gone_with_no_token_holders(sandbox: &Sandbox, pids: &[i32]) {
    for &pid in pids {
        wait_until(
            &format!("pid {pid} to be gone"),
            Duration::from_secs(5),
            || !is_alive(pid),
        );
    }
    let holders = processes_with_owner_prefix(&Service::owner_prefix(sandbox));
    assert!(
        holders.is_empty(),
        "processes with our owner token remain: {holders:?}"
    );
}

/// Whether `pid` is a live (non-zombie) process. A zombie still answers
/// kill(pid, 0), so read its state from /proc.
pub fn is_alive(pid: i32) -> bool {
    match fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => {
            let state = stat
                .rsplit_once(')')
                .map(|(_, rest)| rest.trim_start().chars().next());
            !matches!(state, Some(Some('Z')) | Some(Some('X')))
        }
        Err(_) => false,
    }
}

/// Pids of live processes whose environment carries `CGC_FRESH_OWNER`
/// starting with `prefix`.
pub fn processes_with_owner_prefix(prefix: &str) -> Vec<i32> {
    let mut found = Vec::new();
    for entry in fs::read_dir("/proc").expect("/proc").flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<i32>().ok())
        else {
            continue;
        };
        let Ok(environ) = fs::read(format!("/proc/{pid}/environ")) else {
            continue;
        };
        let tagged = environ.split(|b| *b == 0).any(|var| {
            var.strip_prefix(b"CGC_FRESH_OWNER=")
                .is_some_and(|v| v.starts_with(prefix.as_bytes()))
        });
        if tagged && is_alive(pid) {
            found.push(pid);
        }
    }
    found
}

/// Waits (bounded) until `check` holds.
pub fn wait_until(what: &str, within: Duration, mut check: impl FnMut() -> bool) {
    let deadline = Instant::now() + within;
    while Instant::now() < deadline {
        if check() {
            return;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    panic!("timed out after {within:?} waiting for {what}");
}

impl Conn {
    /// Subscribes (frames pushed from now on) and returns the first state.
    pub fn subscribe(&mut self) -> Value {
        let ack = self.request(serde_json::json!({"type": "subscribe"}), 1000);
        assert_eq!(ack["type"], "ack");
        let state = self.recv();
        assert_eq!(state["type"], "state", "{state}");
        state
    }

    /// Reads pushed frames until one satisfies `pred`; returns it and every
    /// frame seen before it.
    pub fn recv_until(
        &mut self,
        what: &str,
        pred: impl FnMut(&Value) -> bool,
    ) -> (Value, Vec<Value>) {
        self.recv_until_within(what, Duration::from_secs(30), pred)
    }

    /// [`Conn::recv_until`], allowing `quiet` between two frames (a real
    /// `cgc` reconcile on a loaded machine can be silent for minutes).
    pub fn recv_until_within(
        &mut self,
        what: &str,
        quiet: Duration,
        mut pred: impl FnMut(&Value) -> bool,
    ) -> (Value, Vec<Value>) {
        self.stream.set_read_timeout(Some(quiet)).expect("timeout");
        let mut seen = Vec::new();
        loop {
            let frame = self
                .recv_opt()
                .unwrap_or_else(|| panic!("closed while waiting for {what}; saw {seen:?}"));
            if pred(&frame) {
                return (frame, seen);
            }
            seen.push(frame);
        }
    }

    /// Waits until some frame received on this connection, earlier or
    /// later, satisfies `pred`.
    pub fn wait_seen(&mut self, what: &str, mut pred: impl FnMut(&Value) -> bool) -> Value {
        if let Some(found) = self.history.iter().find(|f| pred(f)) {
            return found.clone();
        }
        self.recv_until(what, pred).0
    }

    /// How many received frames satisfy `pred`.
    pub fn count_seen(&self, mut pred: impl FnMut(&Value) -> bool) -> usize {
        self.history.iter().filter(|f| pred(f)).count()
    }

    /// Waits for a state frame with `status`. A real `cgc` sync prints
    /// nothing while it runs, and on a loaded machine FalkorDB Lite's
    /// reconcile (two CGC starts and two embedded servers) was seen silent
    /// for over 30 s: up to 5 minutes between frames are allowed.
    pub fn wait_status(&mut self, status: &str) -> (Value, Vec<Value>) {
        self.recv_until_within(&format!("status {status}"), Duration::from_secs(300), |f| {
            f["type"] == "state" && f["status"] == status
        })
    }
}

impl Service {
    /// Starts `serve` with a fake `cgc` and extra env (owned strings).
    pub fn start_with_fake(sandbox: &Sandbox, fake: &FakeCgc, env: &[(&str, &str)]) -> Service {
        let mut all: Vec<(String, String)> = fake.env();
        all.extend(env.iter().map(|(k, v)| (k.to_string(), v.to_string())));
        let refs: Vec<(&str, &str)> = all.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        Service::start(sandbox, &[], &refs)
    }

    /// The owner-token prefix of every child of every instance of the
    /// service for this sandbox's workspace.
    pub fn owner_prefix(sandbox: &Sandbox) -> String {
        let canonical = fs::canonicalize(sandbox.workspace()).expect("canonical");
        format!("cgc-fresh:{}:", workspace_id(&canonical))
    }
}

impl Sandbox {
    /// Marks the workspace as indexed the way CGC's per-repo mode does.
    pub fn mark_indexed(&self) {
        fs::create_dir_all(self.workspace().join(".codegraphcontext")).expect("marker");
    }
}

/// The arguments of an invocation record (the log keeps the program apart).
pub fn args_of(record: &Value) -> Value {
    record["argv"].clone()
}

/// A process's resource use, from /proc: resident memory, open
/// descriptors, threads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Vitals {
    pub rss_kib: u64,
    pub fds: usize,
    pub threads: usize,
}

/// Reads `pid`'s [`Vitals`] (VmRSS and Threads from /proc/<pid>/status, the
/// entries of /proc/<pid>/fd).
pub fn vitals(pid: i32) -> Vitals {
    let status = fs::read_to_string(format!("/proc/{pid}/status")).expect("/proc status");
    let field = |name: &str| -> u64 {
        status
            .lines()
            .find_map(|line| line.strip_prefix(name))
            .and_then(|rest| rest.split_whitespace().next())
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("{name} missing in /proc/{pid}/status"))
    };
    let fds = fs::read_dir(format!("/proc/{pid}/fd"))
        .expect("/proc fd")
        .count();
    Vitals {
        rss_kib: field("VmRSS:"),
        fds,
        threads: field("Threads:") as usize,
    }
}

/// Timing knobs that keep the fake-`cgc` tests quick, plus `extra`.
pub fn fast_env<'a>(extra: &[(&'a str, &'a str)]) -> Vec<(&'a str, &'a str)> {
    let mut env = vec![
        ("CGC_FRESHNESS_BATCH_MS", "50"),
        ("CGC_FRESHNESS_SETTLE_MS", "2000"),
        ("CGC_SUPERVISOR_STOP_GRACE_MS", "500"),
        // Follow-ups and retries at once; the gap has a test of its own.
        ("CGC_FRESHNESS_MIN_SYNC_GAP_MS", "0"),
    ];
    env.extend_from_slice(extra);
    env
}

/// A harness connection: hello + subscribe + `session_start`.
pub fn open_session(service: &Service, session: &str) -> Conn {
    open_session_as(service, "e2e-1", session)
}

/// [`open_session`] with the given extension `instance` in the hello.
pub fn open_session_as(service: &Service, instance: &str, session: &str) -> Conn {
    let mut conn = service.connect();
    let welcome = conn.request(
        serde_json::json!({"type": "hello", "client": "e2e", "instance": instance, "protocol": 1}),
        0,
    );
    assert_eq!(welcome["type"], "welcome", "{welcome}");
    conn.subscribe();
    conn.send(
        serde_json::json!({"type": "session_start", "session": session, "reason": "startup"}),
    );
    conn
}

/// An agent's `edit` of `path` as the harness reports it: call, then result.
pub fn agent_edit(conn: &mut Conn, session: &str, path: &str) {
    conn.send(serde_json::json!({"type": "tool_call", "session": session, "tool": "edit", "paths": [path]}));
    conn.send(
        serde_json::json!({"type": "tool_result", "session": session, "tool": "edit", "ok": true}),
    );
}

/// Another process holding a POSIX write lock on a database file, as Kùzu
/// does for a CGC MCP server or watcher. Killed when dropped.
pub struct ForeignLock {
    child: Child,
}

impl ForeignLock {
    /// Creates `path` (and its parents) and holds its lock once this returns.
    pub fn hold(path: &Path) -> ForeignLock {
        fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
        let mut child = Command::new("/usr/bin/python3")
            .args([
                "-c",
                "import fcntl,sys,time; f=open(sys.argv[1],'w'); fcntl.lockf(f, fcntl.LOCK_EX); \
                 print('locked', flush=True); time.sleep(120)",
            ])
            .arg(path)
            .stdout(Stdio::piped())
            .spawn()
            .expect("python3");
        let mut line = String::new();
        BufReader::new(child.stdout.take().expect("stdout"))
            .read_line(&mut line)
            .expect("read");
        assert_eq!(line.trim(), "locked");
        ForeignLock { child }
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Releases the lock (the holder exits).
    pub fn release(mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for ForeignLock {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The usual start of a fake-`cgc` test: a sandbox whose workspace is
/// indexed, the fake with `scenario`, and a service running it with `env`.
/// (Dropped in reverse: the service stops before the sandbox is removed.)
pub fn indexed_with_fake(scenario: Value, env: &[(&str, &str)]) -> (Sandbox, FakeCgc, Service) {
    let sandbox = Sandbox::new();
    sandbox.mark_indexed();
    let fake = FakeCgc::new(&sandbox, scenario);
    let service = Service::start_with_fake(&sandbox, &fake, env);
    (sandbox, fake, service)
}

/// Sends signal number `signal` to `pid` (a process a test started).
pub fn send_signal(pid: i32, signal: i32) {
    if let Ok(signal) = nix::sys::signal::Signal::try_from(signal) {
        let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), signal);
    }
}

impl FakeCgc {
    /// The invocations that ran `watch` (the managed watcher, or a
    /// reconcile sync).
    pub fn watch_invocations(&self) -> Vec<Value> {
        self.invocations()
            .into_iter()
            .filter(|r| {
                r["argv"]
                    .as_array()
                    .is_some_and(|a| a.iter().any(|v| v == "watch"))
            })
            .collect()
    }
}

/// The strategy each sync of `service` ran, in order (as configured, or as
/// a fallback), from its log.
pub fn strategies_run(service: &Service) -> Vec<String> {
    service
        .log_text()
        .lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .filter(|e| e["event"] == "sync_strategy" || e["event"] == "sync_strategy_fallback")
        .filter_map(|e| e["strategy"].as_str().map(str::to_string))
        .collect()
}

/// The real, pinned `cgc` (`CGC_FRESH_REAL_CGC`), or `None` (and a note)
/// when it is not installed; a missing CLI fails the test instead when
/// `CGC_FRESH_REQUIRE_REAL_CGC` is set (the test command sets it).
pub fn real_cgc() -> Option<PathBuf> {
    match std::env::var_os("CGC_FRESH_REAL_CGC") {
        Some(path) if !path.is_empty() => Some(PathBuf::from(path)),
        _ if std::env::var_os("CGC_FRESH_REQUIRE_REAL_CGC").is_some() => {
            panic!("CGC_FRESH_REAL_CGC is not set; run scripts/install-cgc.sh")
        }
        _ => {
            eprintln!("real cgc not installed (CGC_FRESH_REAL_CGC unset): skipping");
            None
        }
    }
}

/// The pinned `cgc` on Python 3.12 whose default backend is FalkorDB Lite
/// (`CGC_FRESH_REAL_CGC_LITE`, installed by `scripts/install-cgc.sh
/// --with-falkordb`), or `None` (and a note); a failure instead when
/// `CGC_FRESH_REQUIRE_REAL_CGC` is set.
pub fn real_cgc_lite() -> Option<PathBuf> {
    match std::env::var_os("CGC_FRESH_REAL_CGC_LITE") {
        Some(path) if !path.is_empty() => Some(PathBuf::from(path)),
        _ if std::env::var_os("CGC_FRESH_REQUIRE_REAL_CGC").is_some() => {
            panic!("CGC_FRESH_REAL_CGC_LITE is not set; run scripts/install-cgc.sh --with-falkordb")
        }
        _ => {
            eprintln!("FalkorDB Lite cgc not installed (CGC_FRESH_REAL_CGC_LITE unset): skipping");
            None
        }
    }
}

/// The driver's file in the source tree (`crates/cgc-fresh/driver/<name>`).
pub fn driver_source(name: &str) -> String {
    format!("{}/driver/{name}", env!("CARGO_MANIFEST_DIR"))
}

/// Runs one of the Python check scripts next to these tests
/// (`tests/e2e/<script>`) with the system `python3` on `args`; it must
/// exit 0. Its JSON lines, one value each.
pub fn python_check(script: &str, args: &[&str]) -> Vec<Value> {
    let path = format!("{}/../../tests/e2e/{script}", env!("CARGO_MANIFEST_DIR"));
    // `-B`: the scripts import their shared helper (`stand_in_cgc.py`);
    // nothing is written into the source tree.
    let out = Command::new("python3")
        .arg("-B")
        .arg(&path)
        .args(args)
        .output()
        .expect("python3");
    assert!(
        out.status.success(),
        "{script} {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|line| serde_json::from_str(line).expect("a JSON line"))
        .collect()
}
