//! A real `cgc-fresh serve` child process in an isolated sandbox, and the
//! clean-up that guarantees nothing a benchmark started outlives it.
//!
//! Every process a benchmark starts — the service, the `cgc` it runs, the
//! daemons those leave behind, the real CLI the benchmark runs itself —
//! carries the sandbox's `HOME` in its environment. Dropping the sandbox
//! kills whatever still carries it, so a failed run leaves nothing behind.

use std::fs::{self, File};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::thread::sleep;
use std::time::{Duration, Instant};

use anyhow::{bail, Context as _, Result};
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use serde_json::Value;

use crate::procfs;

/// An isolated set of directories: workspace, HOME, runtime and state.
pub struct Sandbox {
    root: tempfile::TempDir,
}

impl Sandbox {
    pub fn new(scratch: &Path) -> Result<Sandbox> {
        let root = tempfile::Builder::new()
            .prefix("cgc-fresh-bench-")
            .tempdir_in(scratch)
            .with_context(|| format!("creating a sandbox in {}", scratch.display()))?;
        for dir in ["ws", "home", "runtime", "state"] {
            fs::create_dir_all(root.path().join(dir))?;
        }
        Ok(Sandbox { root })
    }

    pub fn root(&self) -> &Path {
        self.root.path()
    }
    pub fn workspace(&self) -> PathBuf {
        self.root.path().join("ws")
    }
    pub fn home(&self) -> PathBuf {
        self.root.path().join("home")
    }
    pub fn socket(&self) -> PathBuf {
        self.root.path().join("runtime").join("service.sock")
    }

    /// Marks the workspace indexed the way CGC's per-repo mode does, so the
    /// service syncs it without asking `cgc list`.
    pub fn mark_indexed(&self) -> Result<()> {
        fs::create_dir_all(self.workspace().join(".codegraphcontext"))?;
        Ok(())
    }

    /// The environment every process started for this sandbox gets.
    pub fn base_env(&self) -> Vec<(String, String)> {
        vec![
            ("PATH".into(), std::env::var("PATH").unwrap_or_default()),
            ("HOME".into(), self.home().display().to_string()),
            (
                "XDG_RUNTIME_DIR".into(),
                self.root.path().join("runtime").display().to_string(),
            ),
            (
                "XDG_STATE_HOME".into(),
                self.root.path().join("state").display().to_string(),
            ),
        ]
    }

    /// Kills every live process carrying this sandbox's HOME and waits
    /// (bounded) until they are gone. Returns how many there were.
    pub fn sweep(&self) -> usize {
        let entry = format!("HOME={}", self.home().display());
        let pids = procfs::processes_with_env_entry(&entry);
        for pid in &pids {
            let _ = kill(Pid::from_raw(*pid), Signal::SIGKILL);
        }
        let deadline = Instant::now() + Duration::from_secs(5);
        while pids.iter().any(|p| procfs::is_alive(*p)) && Instant::now() < deadline {
            sleep(Duration::from_millis(10));
        }
        pids.len()
    }
}

impl Drop for Sandbox {
    fn drop(&mut self) {
        let left = self.sweep();
        if left > 0 {
            eprintln!(
                "cgc-fresh-bench: killed {left} leftover process(es) of {}",
                self.root.path().display()
            );
        }
    }
}

/// Where the service's log (JSON lines on stderr) goes.
pub enum Log {
    File(PathBuf),
    /// Discarded (`/dev/null`): the service still formats every line.
    Discard,
}

/// A running `cgc-fresh serve`.
pub struct Service {
    child: Child,
    pub socket: PathBuf,
    pub spawned_at: Instant,
    log: Option<PathBuf>,
    exited: bool,
}

impl Service {
    /// Spawns `serve` for the sandbox's workspace; does not wait for it.
    pub fn spawn(
        bin: &Path,
        sandbox: &Sandbox,
        env: &[(String, String)],
        log: Log,
    ) -> Result<Service> {
        let socket = sandbox.socket();
        let (stderr, log) = match log {
            Log::File(path) => (
                Stdio::from(
                    File::create(&path).with_context(|| format!("creating {}", path.display()))?,
                ),
                Some(path),
            ),
            Log::Discard => (Stdio::null(), None),
        };
        let mut cmd = Command::new(bin);
        cmd.env_clear()
            .envs(sandbox.base_env())
            .envs(env.iter().map(|(k, v)| (k, v)))
            .arg("serve")
            .arg("--workspace")
            .arg(sandbox.workspace())
            .arg("--socket")
            .arg(&socket)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(stderr);
        let spawned_at = Instant::now();
        let child = cmd
            .spawn()
            .with_context(|| format!("spawning {}", bin.display()))?;
        Ok(Service {
            child,
            socket,
            spawned_at,
            log,
            exited: false,
        })
    }

    /// Spawns `serve` and waits until its socket accepts.
    pub fn start(
        bin: &Path,
        sandbox: &Sandbox,
        env: &[(String, String)],
        log: Log,
    ) -> Result<Service> {
        let mut service = Service::spawn(bin, sandbox, env, log)?;
        service.wait_accepting(Duration::from_secs(20), Duration::from_millis(5))?;
        Ok(service)
    }

    /// Polls `connect` every `poll` until it succeeds; returns the time
    /// from spawn to the first accepted connection.
    pub fn wait_accepting(&mut self, within: Duration, poll: Duration) -> Result<Duration> {
        let deadline = self.spawned_at + within;
        loop {
            if UnixStream::connect(&self.socket).is_ok() {
                return Ok(self.spawned_at.elapsed());
            }
            if let Some(status) = self.child.try_wait()? {
                self.exited = true;
                bail!("serve exited early ({status}); log:\n{}", self.log_tail());
            }
            if Instant::now() > deadline {
                bail!(
                    "serve did not accept within {within:?}; log:\n{}",
                    self.log_tail()
                );
            }
            sleep(poll);
        }
    }

    pub fn pid(&self) -> i32 {
        self.child.id() as i32
    }

    pub fn signal(&self, signal: Signal) -> Result<()> {
        kill(Pid::from_raw(self.pid()), signal).context("signalling the service")?;
        Ok(())
    }

    /// Whether the service has exited (and is reaped).
    pub fn has_exited(&mut self) -> Result<bool> {
        if !self.exited && self.child.try_wait()?.is_some() {
            self.exited = true;
        }
        Ok(self.exited)
    }

    /// SIGTERM, then SIGKILL if it is still there after `grace`.
    pub fn stop(&mut self, grace: Duration) -> Result<()> {
        if self.has_exited()? {
            return Ok(());
        }
        self.signal(Signal::SIGTERM)?;
        let deadline = Instant::now() + grace;
        while Instant::now() < deadline {
            if self.has_exited()? {
                return Ok(());
            }
            sleep(Duration::from_millis(5));
        }
        let _ = self.child.kill();
        self.child.wait()?;
        self.exited = true;
        bail!("the service ignored SIGTERM for {grace:?} and was killed")
    }

    /// The last lines of the log, for error messages.
    pub fn log_tail(&self) -> String {
        let Some(path) = &self.log else {
            return "(log discarded)".into();
        };
        let text = fs::read_to_string(path).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(20)..].join("\n")
    }
}

impl Drop for Service {
    fn drop(&mut self) {
        if let Err(error) = self.stop(Duration::from_secs(5)) {
            eprintln!("cgc-fresh-bench: stopping the service: {error}");
        }
    }
}

/// The events named one of `events` in a log of JSON lines (a service's,
/// or a `cgc-fresh mcp`'s), in order; lines that are not JSON are skipped.
pub fn log_events(log: &Path, events: &[&str]) -> Vec<Value> {
    let Ok(text) = fs::read_to_string(log) else {
        return Vec::new();
    };
    text.lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .filter(|line| {
            log_field(line, "event")
                .as_str()
                .is_some_and(|name| events.contains(&name))
        })
        .collect()
}

/// A field of a log event: at the top level, as the service writes its
/// events (flattened), or under `fields`.
pub fn log_field<'a>(event: &'a Value, name: &str) -> &'a Value {
    match &event[name] {
        Value::Null => &event["fields"][name],
        value => value,
    }
}

/// Waits (bounded) until `check` holds, polling every `poll`.
pub fn wait_for(
    what: &str,
    within: Duration,
    poll: Duration,
    mut check: impl FnMut() -> bool,
) -> Result<()> {
    let deadline = Instant::now() + within;
    while Instant::now() < deadline {
        if check() {
            return Ok(());
        }
        sleep(poll);
    }
    bail!("timed out after {within:?} waiting for {what}")
}
