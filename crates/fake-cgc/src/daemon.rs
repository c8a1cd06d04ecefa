//! `spawn_daemon`: a grandchild that escapes the process group and the
//! session, the way FalkorDB Lite's `redis-server` daemonizes: fork, `setsid`
//! in the child, fork again, the child exits. The grandchild is then
//! reparented (to init, or to the nearest child subreaper), keeps the
//! environment (so an owner token set by a supervisor stays visible in
//! `/proc/<pid>/environ`), logs a `daemon` record and sleeps.
//!
//! The fake is single-threaded, so running ordinary Rust code after `fork`
//! is sound. The caller waits until the daemon has logged (or 2 s), so that
//! a test reading the log after the next output line finds the record.

// The fake reproduces what the real CLI does at the system level (raw
// signal dispositions, fork/setsid daemons, fcntl locks), which takes
// system calls without safe wrappers here; every block says why it is sound.
#![allow(unsafe_code)]

use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::time::{Duration, Instant};

use nix::sys::wait::waitpid;
use nix::unistd::{fork, ForkResult};

use crate::invocation_log::{Event, InvocationLog, InvocationRecord};
use crate::process_info::ProcessInfo;
use crate::scenario::{DaemonSpec, DEFAULT_DAEMON_SLEEP_MS};
use crate::signal_name::SignalName;
use crate::signals::{self, InheritedSignals};

/// How long the fake waits for the daemon to report that it has logged.
const DAEMON_READY_TIMEOUT: Duration = Duration::from_secs(2);

/// What the daemon needs to write its record.
pub struct DaemonContext<'a> {
    pub log: Option<&'a InvocationLog>,
    pub program: &'a str,
    pub argv: &'a [String],
    pub command: Option<&'a str>,
}

/// Spawns the daemon and returns once it has logged its record.
pub fn spawn(spec: &DaemonSpec, context: &DaemonContext<'_>) -> io::Result<()> {
    let (ready_read, ready_write) = nix::unistd::pipe()?;
    let spawner = std::process::id() as i32;
    // SAFETY: the process is single-threaded (see module docs).
    match unsafe { fork() }? {
        ForkResult::Parent { child } => {
            drop(ready_write);
            // The intermediate child exits right after its own fork.
            let _ = waitpid(child, None);
            wait_for_eof(&ready_read, DAEMON_READY_TIMEOUT);
            Ok(())
        }
        ForkResult::Child => {
            drop(ready_read);
            intermediate(spec, context, ready_write, spawner)
        }
    }
}

/// The first child: a new session, then the daemon, then gone.
fn intermediate(
    spec: &DaemonSpec,
    context: &DaemonContext<'_>,
    ready_write: OwnedFd,
    spawner: i32,
) -> ! {
    if nix::unistd::setsid().is_err() {
        exit_now(1);
    }
    // SAFETY: still single-threaded.
    match unsafe { fork() } {
        Ok(ForkResult::Child) => daemon_main(spec, context, ready_write, spawner),
        Ok(ForkResult::Parent { .. }) => exit_now(0),
        Err(_) => exit_now(1),
    }
}

fn daemon_main(
    spec: &DaemonSpec,
    context: &DaemonContext<'_>,
    ready_write: OwnedFd,
    spawner: i32,
) -> ! {
    // Killable like a fresh process, whatever the fake inherited or set.
    signals::reset_for_daemon(&[SignalName::INT, SignalName::TERM, SignalName::HUP]);
    // Do not keep the caller's pipes open: a reader waiting for EOF on the
    // fake's stdout must not wait for the daemon.
    detach_stdio();
    if let Some(log) = context.log {
        let info = ProcessInfo::current();
        let inherited = InheritedSignals::inspect();
        log.append_or_warn(&InvocationRecord {
            event: Event::Daemon,
            argv: context.argv.to_vec(),
            program: context.program.to_owned(),
            command: context.command.map(str::to_owned),
            cwd: info.cwd,
            env: crate::invocation_log::logged_env(),
            pid: info.pid,
            ppid: info.ppid,
            pgid: info.pgid,
            sid: info.sid,
            start_ms: crate::invocation_log::unix_ms(),
            sigint_ignored: inherited.is_ignored(SignalName::INT),
            ignored_signals: inherited.ignored,
            blocked_signals: inherited.blocked,
            invocation: None,
            behaviour: None,
            end_ms: None,
            how: None,
            handled_signal: None,
            signals_received: Default::default(),
            error: None,
            spawned_by: Some(spawner),
        });
    }
    drop(ready_write);
    let deadline =
        Instant::now() + Duration::from_millis(spec.sleep_ms.unwrap_or(DEFAULT_DAEMON_SLEEP_MS));
    while let Some(left) = deadline.checked_duration_since(Instant::now()) {
        if left.is_zero() {
            break;
        }
        std::thread::sleep(left);
    }
    exit_now(0)
}

fn detach_stdio() {
    if let Ok(null) = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/null")
    {
        for target in 0..=2 {
            // SAFETY: dup2 onto the standard descriptors.
            unsafe { libc::dup2(null.as_raw_fd(), target) };
        }
    }
}

/// Waits until every write end of the pipe is closed, or `timeout`.
fn wait_for_eof(read_end: &OwnedFd, timeout: Duration) {
    let deadline = Instant::now() + timeout;
    let mut buffer = [0u8; 16];
    while let Some(left) = deadline.checked_duration_since(Instant::now()) {
        let mut poll_fd = libc::pollfd {
            fd: read_end.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        let left_ms = libc::c_int::try_from(left.as_millis().max(1)).unwrap_or(libc::c_int::MAX);
        // SAFETY: one valid pollfd.
        if unsafe { libc::poll(&mut poll_fd, 1, left_ms) } <= 0 {
            continue; // EINTR or timeout; the loop condition decides
        }
        // SAFETY: reading into a local buffer.
        let read = unsafe {
            libc::read(
                read_end.as_raw_fd(),
                buffer.as_mut_ptr().cast(),
                buffer.len(),
            )
        };
        if read == 0 {
            return;
        }
    }
}

/// Ends a forked process without running the parent's exit handlers or
/// flushing buffers it shares with the parent.
fn exit_now(code: i32) -> ! {
    // SAFETY: _exit(2) is always safe to call.
    unsafe { libc::_exit(code) }
}
