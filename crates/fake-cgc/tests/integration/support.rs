//! Test harness: a private directory per test (workspace, scenario, log),
//! a running fake whose output is read line by line with timeouts, and
//! guards that kill every process a test starts, even when it fails.

// Tests of the fake at the system level (signal dispositions, fcntl locks).
#![allow(unsafe_code)]

use std::io::{BufRead, BufReader};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::thread;
use std::time::{Duration, Instant};

use fake_cgc::InvocationRecord;
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;

/// Upper bound for anything a test waits for; generous for a busy machine.
pub const PATIENCE: Duration = Duration::from_secs(15);

pub const FAKE: &str = env!("CARGO_BIN_EXE_fake-cgc");

/// A directory of its own per test, removed at the end.
pub struct Sandbox {
    root: PathBuf,
}

impl Sandbox {
    pub fn new(name: &str) -> Sandbox {
        static NEXT: AtomicU32 = AtomicU32::new(0);
        let root = std::env::temp_dir().join(format!(
            "fake-cgc-test-{}-{}-{name}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::SeqCst)
        ));
        let _ = std::fs::remove_dir_all(&root);
        std::fs::create_dir_all(root.join("ws")).unwrap();
        Sandbox { root }
    }

    /// The working directory the fake runs in.
    pub fn workspace(&self) -> PathBuf {
        self.root.join("ws")
    }

    pub fn scenario_path(&self) -> PathBuf {
        self.root.join("scenario.json")
    }

    pub fn log_path(&self) -> PathBuf {
        self.root.join("invocations.jsonl")
    }

    pub fn write_scenario(&self, scenario: serde_json::Value) {
        std::fs::write(self.scenario_path(), scenario.to_string()).unwrap();
    }

    /// The fake with the scenario (if written) and the log set, in the
    /// workspace, stdout and stderr piped, a clean signal state.
    pub fn command(&self, args: &[&str]) -> Command {
        let mut command = Command::new(FAKE);
        // Whatever state the test runner was started in (a background job
        // ignores SIGINT), the fake starts clean; std already empties the
        // mask. A later pre_exec may deliberately undo this.
        // SAFETY: only async-signal-safe calls between fork and exec.
        unsafe {
            command.pre_exec(|| {
                for signal in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP, libc::SIGQUIT] {
                    libc::signal(signal, libc::SIG_DFL);
                }
                Ok(())
            });
        }
        command
            .args(args)
            .current_dir(self.workspace())
            .env("FAKE_CGC_LOG", self.log_path())
            .env_remove("FAKE_CGC_SCENARIO")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        if self.scenario_path().exists() {
            command.env("FAKE_CGC_SCENARIO", self.scenario_path());
        }
        command
    }

    pub fn records(&self) -> Vec<InvocationRecord> {
        fake_cgc::read_records(&self.log_path()).unwrap()
    }

    /// The record of `event` written by `pid`.
    pub fn record(&self, event: fake_cgc::Event, pid: i32) -> InvocationRecord {
        self.records()
            .into_iter()
            .find(|record| record.event == event && record.pid == pid)
            .unwrap_or_else(|| panic!("no {event:?} record of pid {pid} in {:?}", self.records()))
    }

    /// Runs the fake to completion.
    pub fn run(&self, args: &[&str]) -> Finished {
        Running::spawn(self.command(args)).finish()
    }
}

impl Drop for Sandbox {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.root);
    }
}

/// A completed invocation.
#[derive(Debug)]
pub struct Finished {
    pub pid: i32,
    pub status: ExitStatus,
    pub stdout: Vec<String>,
    pub stderr: Vec<String>,
}

/// A running fake; killed (SIGKILL) and reaped on drop if still running.
pub struct Running {
    child: Child,
    stdout: Receiver<String>,
    stderr: Receiver<String>,
    exited: Option<ExitStatus>,
}

fn line_reader(stream: impl std::io::Read + Send + 'static) -> Receiver<String> {
    let (sender, receiver) = mpsc::channel();
    thread::spawn(move || {
        for line in BufReader::new(stream).lines() {
            let Ok(line) = line else { break };
            if sender.send(line).is_err() {
                break;
            }
        }
    });
    receiver
}

impl Running {
    pub fn spawn(mut command: Command) -> Running {
        let mut child = command.spawn().unwrap();
        let stdout = line_reader(child.stdout.take().unwrap());
        let stderr = line_reader(child.stderr.take().unwrap());
        Running {
            child,
            stdout,
            stderr,
            exited: None,
        }
    }

    pub fn pid(&self) -> i32 {
        self.child.id() as i32
    }

    pub fn signal(&self, signal: Signal) {
        kill(Pid::from_raw(self.pid()), signal).unwrap();
    }

    /// Reads stdout until a line equal to `wanted`; returns the lines read,
    /// `wanted` included.
    pub fn read_until(&self, wanted: &str) -> Vec<String> {
        let deadline = Instant::now() + PATIENCE;
        let mut seen = Vec::new();
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.stdout.recv_timeout(left) {
                Ok(line) => {
                    let done = line == wanted;
                    seen.push(line);
                    if done {
                        return seen;
                    }
                }
                Err(error) => panic!("no line {wanted:?} ({error:?}); saw {seen:?}"),
            }
        }
    }

    /// Waits for the exit (bounded).
    pub fn wait(&mut self) -> ExitStatus {
        if let Some(status) = self.exited {
            return status;
        }
        let deadline = Instant::now() + PATIENCE;
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                self.exited = Some(status);
                return status;
            }
            assert!(
                Instant::now() < deadline,
                "fake {} did not exit",
                self.pid()
            );
            thread::sleep(Duration::from_millis(10));
        }
    }

    /// True while the process has not exited.
    pub fn is_running(&mut self) -> bool {
        self.exited.is_none() && self.child.try_wait().unwrap().is_none()
    }

    /// Waits for the exit and collects the rest of both streams (to EOF).
    pub fn finish(mut self) -> Finished {
        let status = self.wait();
        Finished {
            pid: self.pid(),
            status,
            stdout: drain(&self.stdout),
            stderr: drain(&self.stderr),
        }
    }
}

/// Every remaining line until EOF; panics if EOF does not come (something
/// still holds the pipe open).
pub fn drain(lines: &Receiver<String>) -> Vec<String> {
    let deadline = Instant::now() + PATIENCE;
    let mut rest = Vec::new();
    loop {
        match lines.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
            Ok(line) => rest.push(line),
            Err(RecvTimeoutError::Disconnected) => return rest,
            Err(RecvTimeoutError::Timeout) => panic!("no EOF; read {rest:?}"),
        }
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        if self.is_running() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// Kills a process that is not our child (a daemon) on drop.
pub struct KillOnDrop(pub i32);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = kill(Pid::from_raw(self.0), Signal::SIGKILL);
    }
}

/// True while `/proc/<pid>` exists and is not a zombie.
pub fn process_alive(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        // The state follows the parenthesised command name.
        Ok(stat) => stat
            .rsplit_once(") ")
            .is_some_and(|(_, rest)| !rest.starts_with('Z')),
        Err(_) => false,
    }
}

/// Who holds a conflicting POSIX lock on `path`: `Some(pid)` for a write
/// lock, `None` when unlocked. Uses `F_GETLK`, which takes nothing.
pub fn write_lock_holder(path: &Path) -> Option<i32> {
    use std::os::fd::AsRawFd;
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(path)
        .unwrap();
    let mut probe: libc::flock = unsafe { std::mem::zeroed() };
    probe.l_type = libc::F_WRLCK as libc::c_short;
    probe.l_whence = libc::SEEK_SET as libc::c_short;
    let status = unsafe { libc::fcntl(file.as_raw_fd(), libc::F_GETLK, &mut probe) };
    assert_eq!(status, 0, "F_GETLK: {}", std::io::Error::last_os_error());
    match i32::from(probe.l_type) {
        libc::F_UNLCK => None,
        libc::F_WRLCK => Some(probe.l_pid),
        other => panic!("unexpected lock type {other}"),
    }
}
