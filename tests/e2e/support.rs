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
        let log = sandbox.root.path().join(format!("serve-{}.log", unique()));
        let mut cmd = sandbox.command();
        cmd.arg("serve").args(extra).arg("--socket").arg(&socket);
        for (k, v) in env {
            cmd.env(k, v);
        }
        let child = cmd
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(fs::File::create(&log).expect("log file"))
            .spawn()
            .expect("spawn serve");
        let mut service = Service { child, socket, log };
        service.wait_ready();
        service
    }

    fn wait_ready(&mut self) {
        let deadline = Instant::now() + Duration::from_secs(20);
        while Instant::now() < deadline {
            if let Some(status) = self.child.try_wait().expect("try_wait") {
                panic!("serve exited early ({status}); log:\n{}", self.log_text());
            }
            if UnixStream::connect(&self.socket).is_ok() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        panic!(
            "serve did not accept within 20 s; log:\n{}",
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
        // SAFETY: plain kill(2) on our child's pid.
        unsafe { libc::kill(self.pid(), signal) };
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
}

impl Conn {
    pub fn connect(socket: &Path) -> Conn {
        let stream = UnixStream::connect(socket).expect("connect");
        stream
            .set_read_timeout(Some(Duration::from_secs(10)))
            .expect("timeout");
        let reader = BufReader::new(stream.try_clone().expect("clone"));
        Conn { stream, reader }
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
            Ok(_) => Some(
                serde_json::from_str(&line).unwrap_or_else(|e| panic!("bad frame {line:?}: {e}")),
            ),
            Err(e) => panic!("read failed: {e}"),
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
