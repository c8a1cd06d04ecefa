//! Starting a child (`cgc index`, `cgc watch`, `cgc doctor`) so that it can
//! never outlive this service and starts from a clean, predictable state.
//!
//! Every child:
//! - leads its own process group (`setpgid(0, 0)`), so one `killpg` reaches
//!   it and everything it forks without leaving the group;
//! - gets `PR_SET_PDEATHSIG(SIGKILL)`, then re-checks `getppid()` so a parent
//!   that died during the fork is not missed;
//! - starts with an empty signal mask and every signal at `SIG_DFL` (a
//!   child inheriting an ignored SIGINT would ignore our graceful stop);
//! - gets stdin from `/dev/null` (or a pipe, for a worker fed requests) and
//!   piped stdout/stderr;
//! - carries `CGC_FRESH_OWNER=<token>`, inherited by all its descendants, so
//!   a daemonized grandchild in another session can still be found.

// Setting up a child between fork and exec (`CommandExt::pre_exec`,
// `_exit`, the raw `rt_sigaction` the C library refuses for its reserved
// signals) has no safe interface.
#![allow(unsafe_code)]

use std::ffi::OsString;
use std::io;
use std::os::fd::OwnedFd;
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Command, Stdio};

use super::proc_info::{read_proc_stat, OWNER_TOKEN_VAR};

/// The actor whose work this is, named in every log line.
const COMPONENT: &str = "root_supervisor";

/// Inherited variables a child must never see: they belong to this service's
/// own supervisor (systemd notify socket, socket activation, watchdog) and a
/// child acting on them would confuse it.
pub const SYSTEMD_VARIABLES: [&str; 6] = [
    "NOTIFY_SOCKET",
    "LISTEN_FDS",
    "LISTEN_PID",
    "LISTEN_FDNAMES",
    "WATCHDOG_USEC",
    "WATCHDOG_PID",
];

/// CGC's Rich consoles wrap at 80 columns when not on a TTY; a wide console
/// keeps every message on one line so it can be matched.
pub const CHILD_COLUMNS: &str = "1000";

/// What a child is for (used in logs and records).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ChildKind {
    /// A one-shot sync (`cgc index`, or a `cgc watch --sync-on-start` stopped
    /// after its ready line).
    Sync,
    /// A long-running `cgc watch`.
    Watcher,
    /// A short diagnostic run such as `cgc doctor`.
    Probe,
    /// The incremental driver serving syncs one request at a time (read on
    /// its piped stdin); it holds the database only while it applies one.
    Worker,
}

/// Everything needed to start one child.
#[derive(Debug, Clone)]
pub struct SpawnSpec {
    /// A path, or a bare name looked up in `PATH`.
    pub program: PathBuf,
    pub args: Vec<String>,
    /// Working directory (the workspace root for CGC children).
    pub cwd: PathBuf,
    /// Variables to set, applied after `COLUMNS=1000` (so they may override
    /// it) and before the owner token (which always wins). Callers add
    /// `ENABLE_AUTO_WATCH=false` for syncs here.
    pub env_set: Vec<(String, String)>,
    /// Variables to remove in addition to [`SYSTEMD_VARIABLES`].
    pub env_remove: Vec<String>,
    pub kind: ChildKind,
    /// Per-child token, see [`child_owner_token`].
    pub owner_token: String,
    /// Give the child a pipe as stdin (the write end is returned in
    /// [`SpawnedChild::stdin`]) instead of `/dev/null`.
    pub piped_stdin: bool,
}

/// The owner token for one child: `<service-token>.<child-id>`.
///
/// Per-child tokens let a stop kill exactly one child's stray descendants;
/// the shared `<service-token>.` prefix lets a start-up sweep find every
/// leftover of a previous instance.
pub fn child_owner_token(service_token: &str, child_id: u64) -> String {
    format!("{service_token}.{child_id}")
}

/// A started child. The service is responsible for reaping it (see
/// `reap.rs`); dropping this value neither kills nor waits.
#[derive(Debug)]
pub struct SpawnedChild {
    pub pid: i32,
    /// Equal to `pid`: the child leads its own group.
    pub pgid: i32,
    /// `/proc/<pid>/stat` field 22 (clock ticks after boot); with the pid it
    /// identifies this process across pid reuse.
    pub start_time: u64,
    /// Read ends of the child's stdout and stderr pipes (close-on-exec).
    pub stdout: OwnedFd,
    pub stderr: OwnedFd,
    /// Write end of its stdin pipe, when [`SpawnSpec::piped_stdin`] asked
    /// for one (close-on-exec; closing it is the child's end of input).
    pub stdin: Option<OwnedFd>,
}

/// Why a child could not be started.
#[derive(Debug, thiserror::Error)]
pub enum SpawnError {
    #[error("cannot run `{program}`: program not found")]
    ProgramNotFound { program: String },
    #[error("cannot run `{program}`: permission denied (not executable, or a directory)")]
    ProgramNotExecutable { program: String },
    #[error("cannot run `{program}` in `{cwd}`: working directory unusable: {source}")]
    WorkingDirectory {
        program: String,
        cwd: String,
        source: io::Error,
    },
    #[error("cannot run `{program}`: {source}")]
    Io { program: String, source: io::Error },
    #[error(
        "started `{program}` as pid {pid} but could not read its /proc entry ({source}); killed it"
    )]
    Unrecordable {
        program: String,
        pid: i32,
        source: io::Error,
    },
}

/// Starts a child as described in the module docs.
///
/// **Call only from the main (arbiter) thread.** `PR_SET_PDEATHSIG` fires
/// when the *thread* that forked exits, not the process: a child spawned from
/// a short-lived worker thread would be SIGKILLed when that thread ends.
///
/// Blocks briefly: `std` waits until the child has exec'd (or failed to), so
/// a missing program is reported here, and the process group exists when
/// this returns.
pub fn spawn_child(spec: &SpawnSpec) -> Result<SpawnedChild, SpawnError> {
    let program_name = spec.program.display().to_string();
    if let Err(source) = check_directory(&spec.cwd) {
        return Err(SpawnError::WorkingDirectory {
            program: program_name,
            cwd: spec.cwd.display().to_string(),
            source,
        });
    }

    let mut command = Command::new(&spec.program);
    command
        .args(&spec.args)
        .current_dir(&spec.cwd)
        .stdin(if spec.piped_stdin {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    apply_environment(&mut command, spec);

    let parent_pid = std::process::id() as libc::pid_t;
    // SAFETY: the closure runs between fork and exec and only makes
    // async-signal-safe system calls on values copied before the fork.
    unsafe {
        command.pre_exec(move || prepare_child_after_fork(parent_pid));
    }

    let mut child = command
        .spawn()
        .map_err(|source| classify_spawn_error(&program_name, source))?;
    let pid = child.id() as i32;
    let (Some(stdout), Some(stderr)) = (child.stdout.take(), child.stderr.take()) else {
        // Unreachable with `Stdio::piped()`; handled so no input can panic.
        kill_group(pid);
        return Err(SpawnError::Io {
            program: program_name,
            source: io::Error::other("child pipes missing"),
        });
    };
    let stdin = child.stdin.take().map(OwnedFd::from);
    // `child` is dropped without waiting: the SIGCHLD reaper collects it.
    drop(child);

    let start_time = match read_proc_stat(pid) {
        Ok(stat) => stat.start_time,
        Err(source) => {
            kill_group(pid);
            return Err(SpawnError::Unrecordable {
                program: program_name,
                pid,
                source,
            });
        }
    };
    tracing::debug!(
        component = COMPONENT,
        event = "child_spawned",
        pid,
        pgid = pid,
        kind = ?spec.kind,
        program = %program_name,
        args = ?spec.args,
        owner_token = %spec.owner_token,
        "spawned child"
    );
    Ok(SpawnedChild {
        pid,
        pgid: pid,
        start_time,
        stdout: OwnedFd::from(stdout),
        stderr: OwnedFd::from(stderr),
        stdin,
    })
}

fn check_directory(path: &std::path::Path) -> io::Result<()> {
    let metadata = std::fs::metadata(path)?;
    if metadata.is_dir() {
        Ok(())
    } else {
        Err(io::Error::from_raw_os_error(libc::ENOTDIR))
    }
}

fn apply_environment(command: &mut Command, spec: &SpawnSpec) {
    command.env("COLUMNS", CHILD_COLUMNS);
    for (key, value) in &spec.env_set {
        command.env(key, value);
    }
    for key in &spec.env_remove {
        command.env_remove(key);
    }
    // Applied last so neither the caller nor the inherited environment can
    // reintroduce them.
    for key in SYSTEMD_VARIABLES {
        command.env_remove(key);
    }
    command.env(OWNER_TOKEN_VAR, OsString::from(&spec.owner_token));
}

fn classify_spawn_error(program: &str, source: io::Error) -> SpawnError {
    match source.raw_os_error() {
        Some(libc::ENOENT) => SpawnError::ProgramNotFound {
            program: program.to_string(),
        },
        Some(libc::EACCES) => SpawnError::ProgramNotExecutable {
            program: program.to_string(),
        },
        _ => SpawnError::Io {
            program: program.to_string(),
            source,
        },
    }
}

/// The kernel's signal-set size (`_NSIG / 8`) on the architectures this
/// service targets (x86_64, aarch64, riscv64, arm).
const KERNEL_SIGSET_BYTES: libc::c_long = 8;

/// Runs in the child between fork and exec. Only async-signal-safe calls:
/// the parent may have had other threads holding locks at fork time.
fn prepare_child_after_fork(parent_pid: libc::pid_t) -> io::Result<()> {
    use nix::sys::signal::{sigprocmask, SigSet, SigmaskHow, Signal as NixSignal};
    nix::unistd::setpgid(nix::unistd::Pid::from_raw(0), nix::unistd::Pid::from_raw(0))?;
    nix::sys::prctl::set_pdeathsig(NixSignal::SIGKILL)?;
    // The parent may have died before PR_SET_PDEATHSIG took effect; then
    // we were re-parented and no signal will ever come.
    if nix::unistd::getppid().as_raw() != parent_pid {
        // SAFETY: `_exit` ends the forked child at once, running nothing
        // of the parent's (no destructors, no atexit handlers).
        unsafe { libc::_exit(1) };
    }

    // Exec keeps ignored dispositions; reset them all (handlers cannot
    // survive exec anyway). The raw system call is used because the C
    // library (and so `nix`) refuses its reserved real-time signals (32,
    // 33), which an inherited SIG_IGN can still cover. SIGKILL and SIGSTOP
    // refuse with EINVAL, which is fine to ignore. A zeroed kernel
    // `sigaction` is SIG_DFL with no flags and an empty mask; the buffer is
    // larger than any architecture's struct.
    let default_action = [0u64; 8];
    let every_signal: std::ops::RangeInclusive<libc::c_long> = 1..=64;
    for signal in every_signal {
        // SAFETY: rt_sigaction reads `default_action` (valid for the
        // kernel's struct size) and writes nothing (null old action).
        unsafe {
            libc::syscall(
                libc::SYS_rt_sigaction,
                signal,
                default_action.as_ptr(),
                std::ptr::null_mut::<u64>(),
                KERNEL_SIGSET_BYTES,
            );
        }
    }
    sigprocmask(SigmaskHow::SIG_SETMASK, Some(&SigSet::empty()), None)?;
    Ok(())
}

/// Best-effort SIGKILL of a group this module just created.
fn kill_group(pgid: i32) {
    let _ = super::kill::signal_group(pgid, super::signal::Signal::KILL);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::process::proc_info::{environ_value, owner_token_of};
    use crate::process::test_support::{isolated_test, kill_and_reap, sleeper_spec};
    use std::os::unix::fs::PermissionsExt;

    fn status_field(pid: i32, field: &str) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
        let line = status
            .lines()
            .find_map(|line| line.strip_prefix(&format!("{field}:")))
            .unwrap();
        u64::from_str_radix(line.trim(), 16).unwrap()
    }

    #[test]
    fn child_leads_its_own_process_group() {
        let dir = tempfile::tempdir().unwrap();
        let child = spawn_child(&sleeper_spec(dir.path(), "spawn-test.pgid")).unwrap();
        let stat = read_proc_stat(child.pid).unwrap();
        assert_eq!(child.pgid, child.pid);
        assert_eq!(stat.pgrp, child.pid);
        assert_eq!(stat.ppid, std::process::id() as i32);
        assert_eq!(stat.start_time, child.start_time);
        // SAFETY: getpgrp has no preconditions.
        assert_ne!(stat.pgrp, nix::unistd::getpgrp().as_raw());
        kill_and_reap(child.pid);
    }

    #[test]
    fn child_has_parent_death_signal_sigkill() {
        // The kernel exposes no pdeathsig in /proc; check the observable
        // effect: a child whose spawning thread ends is SIGKILLed.
        let dir = tempfile::tempdir().unwrap();
        let spec = sleeper_spec(dir.path(), "spawn-test.pdeathsig");
        let pid = std::thread::spawn(move || spawn_child(&spec).unwrap().pid)
            .join()
            .unwrap();
        assert_eq!(
            nix::sys::wait::waitpid(nix::unistd::Pid::from_raw(pid), None),
            Ok(nix::sys::wait::WaitStatus::Signaled(
                nix::unistd::Pid::from_raw(pid),
                nix::sys::signal::Signal::SIGKILL,
                false
            ))
        );
    }

    #[test]
    fn spawn_resets_inherited_signal_state() {
        isolated_test(
            module_path!(),
            "spawn_resets_inherited_signal_state",
            || {
                // Process-wide: SIGINT (as in a shell's background job) and a
                // real-time signal ignored; thread-local: SIGTERM and SIGUSR1
                // blocked.
                // SAFETY: plain signal calls in an isolated test process.
                unsafe {
                    libc::signal(libc::SIGINT, libc::SIG_IGN);
                    libc::signal(libc::SIGRTMIN() + 1, libc::SIG_IGN);
                    let mut blocked: libc::sigset_t = std::mem::zeroed();
                    libc::sigemptyset(&mut blocked);
                    libc::sigaddset(&mut blocked, libc::SIGTERM);
                    libc::sigaddset(&mut blocked, libc::SIGUSR1);
                    libc::pthread_sigmask(libc::SIG_BLOCK, &blocked, std::ptr::null_mut());
                }
                let own_pid = std::process::id() as i32;
                assert_ne!(
                    status_field(own_pid, "SigIgn") & (1 << (libc::SIGINT - 1)),
                    0
                );

                let dir = tempfile::tempdir().unwrap();
                let child = spawn_child(&sleeper_spec(dir.path(), "spawn-test.signals")).unwrap();
                assert_eq!(status_field(child.pid, "SigIgn"), 0, "no signal ignored");
                assert_eq!(status_field(child.pid, "SigBlk"), 0, "no signal blocked");
                kill_and_reap(child.pid);
            },
        );
    }

    #[test]
    fn environment_is_cleaned_and_tagged() {
        isolated_test(module_path!(), "environment_is_cleaned_and_tagged", || {
            // Isolated: changing the environment of a multi-threaded test
            // process would race with other tests.
            std::env::set_var("NOTIFY_SOCKET", "/run/systemd/notify");
            std::env::set_var("LISTEN_FDS", "3");
            std::env::set_var("WATCHDOG_USEC", "1000000");
            std::env::set_var("CGC_FRESH_TEST_DROP_ME", "x");
            std::env::set_var("CGC_FRESH_TEST_KEEP_ME", "kept");

            let dir = tempfile::tempdir().unwrap();
            let mut spec = sleeper_spec(dir.path(), "svc.7");
            spec.env_set = vec![
                ("ENABLE_AUTO_WATCH".into(), "false".into()),
                ("WATCHDOG_PID".into(), "1".into()),
                ("CGC_FRESH_OWNER".into(), "spoofed".into()),
            ];
            spec.env_remove = vec!["CGC_FRESH_TEST_DROP_ME".into()];
            let child = spawn_child(&spec).unwrap();
            let value = |key: &str| environ_value(child.pid, key).unwrap();
            for key in SYSTEMD_VARIABLES {
                assert_eq!(value(key), None, "{key} must be removed");
            }
            assert_eq!(value("COLUMNS").as_deref(), Some("1000"));
            assert_eq!(value("ENABLE_AUTO_WATCH").as_deref(), Some("false"));
            assert_eq!(value("CGC_FRESH_TEST_DROP_ME"), None);
            assert_eq!(value("CGC_FRESH_TEST_KEEP_ME").as_deref(), Some("kept"));
            assert_eq!(owner_token_of(child.pid).as_deref(), Some("svc.7"));
            kill_and_reap(child.pid);
        });
    }

    #[test]
    fn missing_program_is_a_typed_error() {
        let dir = tempfile::tempdir().unwrap();
        let mut spec = sleeper_spec(dir.path(), "spawn-test.missing");
        spec.program = dir.path().join("no-such-cgc");
        let error = spawn_child(&spec).unwrap_err();
        assert!(
            matches!(&error, SpawnError::ProgramNotFound { program } if program.ends_with("no-such-cgc")),
            "{error:?}"
        );
        spec.program = PathBuf::from("cgc-fresh-no-such-program-on-path");
        assert!(matches!(
            spawn_child(&spec).unwrap_err(),
            SpawnError::ProgramNotFound { .. }
        ));
    }

    #[test]
    fn non_executable_program_is_a_typed_error() {
        let dir = tempfile::tempdir().unwrap();
        let script = dir.path().join("not-executable");
        std::fs::write(&script, "#!/bin/sh\nexit 0\n").unwrap();
        std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o644)).unwrap();
        let mut spec = sleeper_spec(dir.path(), "spawn-test.noexec");
        spec.program = script;
        let error = spawn_child(&spec).unwrap_err();
        assert!(
            matches!(error, SpawnError::ProgramNotExecutable { .. }),
            "{error:?}"
        );
        assert!(error.to_string().contains("not-executable"));
    }

    #[test]
    fn missing_working_directory_is_reported_as_such() {
        let dir = tempfile::tempdir().unwrap();
        let mut spec = sleeper_spec(dir.path(), "spawn-test.cwd");
        spec.cwd = dir.path().join("gone");
        let error = spawn_child(&spec).unwrap_err();
        assert!(
            matches!(error, SpawnError::WorkingDirectory { .. }),
            "{error:?}"
        );
    }

    #[test]
    fn child_owner_token_has_service_prefix() {
        assert_eq!(child_owner_token("svc", 12), "svc.12");
    }
}
