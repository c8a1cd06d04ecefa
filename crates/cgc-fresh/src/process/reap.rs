//! Observing child exits without blocking the runtime.
//!
//! The service is a child subreaper ([`set_child_subreaper`]): descendants
//! whose parent dies (CGC's FalkorDB worker, a daemonized `redis-server`) are
//! re-parented to it instead of to init. So exits are collected with
//! `waitpid(-1, WNOHANG)` whenever SIGCHLD arrives, which reaps *every*
//! child: the ones we spawned and re-parented orphans alike. The caller maps
//! pids it knows ([`ExitWatchers`]) and logs the rest as reaped orphans.
//!
//! Consequence: nothing else in the process may wait for a specific child
//! (`std::process::Child::wait`, `Command::output`, tokio's `process`): the
//! reaper would steal its status. Every child goes through `spawn.rs`.

use std::collections::{HashMap, VecDeque};
use std::io;
use std::os::unix::process::ExitStatusExt;
use std::process::ExitStatus;

use futures_util::{Stream, StreamExt};
use nix::errno::Errno;
use nix::sys::wait::{waitpid, WaitPidFlag, WaitStatus};
use signal_hook::consts::signal::SIGCHLD;
use signal_hook_tokio::Signals;
use tokio::sync::watch;

/// A process this service reaped, and how it ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReapedProcess {
    pub pid: i32,
    pub status: ExitStatus,
}

/// Makes this process a child subreaper (`PR_SET_CHILD_SUBREAPER`), so
/// orphaned descendants become our children and can be reaped and counted.
/// Process-wide; call once at start-up.
pub fn set_child_subreaper() -> io::Result<()> {
    nix::sys::prctl::set_child_subreaper(true).map_err(io::Error::from)
}

/// Reaps every child that has already exited, without blocking.
pub fn reap_ready() -> Vec<ReapedProcess> {
    let mut reaped = Vec::new();
    loop {
        match waitpid(None, Some(WaitPidFlag::WNOHANG)) {
            Ok(WaitStatus::Exited(pid, code)) => reaped.push(ReapedProcess {
                pid: pid.as_raw(),
                status: ExitStatus::from_raw((code & 0xff) << 8),
            }),
            Ok(WaitStatus::Signaled(pid, signal, core_dumped)) => reaped.push(ReapedProcess {
                pid: pid.as_raw(),
                status: ExitStatus::from_raw(signal as i32 | if core_dumped { 0x80 } else { 0 }),
            }),
            // Stopped or continued children are not exits; keep draining.
            Ok(WaitStatus::Stopped(..) | WaitStatus::Continued(..)) => continue,
            Err(Errno::EINTR) => continue,
            // StillAlive: children exist but none has exited; ECHILD: none.
            Ok(_) | Err(_) => return reaped,
        }
    }
}

/// A stream of reaped processes driven by SIGCHLD.
///
/// Create it (inside the runtime) **before** spawning the first child; a
/// SIGCHLD that arrives earlier is still covered because every wake-up reaps
/// until nothing is left. There is deliberately no periodic reap:
/// `signal-hook` never loses a signal that arrives after the handler is
/// installed (several coalesce into one wake-up, and each wake-up drains
/// every exit), and an idle service must not wake up on a timer.
pub struct Reaper {
    sigchld: Signals,
    pending: VecDeque<ReapedProcess>,
}

impl Reaper {
    /// Installs the SIGCHLD handler (synchronously, before this returns).
    /// Needs a tokio runtime with IO enabled.
    pub fn new() -> io::Result<Self> {
        Ok(Reaper {
            sigchld: Signals::new([SIGCHLD])?,
            pending: VecDeque::new(),
        })
    }

    /// The next reaped process. `None` only when the signal stream was
    /// closed.
    pub async fn next(&mut self) -> Option<ReapedProcess> {
        loop {
            if let Some(reaped) = self.pending.pop_front() {
                return Some(reaped);
            }
            self.pending.extend(reap_ready());
            if !self.pending.is_empty() {
                continue;
            }
            self.sigchld.next().await?;
        }
    }

    /// The reaper as a `Stream`, e.g. for `ctx.add_stream` in an actor.
    pub fn into_stream(self) -> impl Stream<Item = ReapedProcess> {
        futures_util::stream::unfold(self, |mut reaper| async move {
            let reaped = reaper.next().await?;
            Some((reaped, reaper))
        })
    }
}

/// The exit status of one watched child: `None` while it runs.
pub type ExitReceiver = watch::Receiver<Option<ExitStatus>>;

/// Maps pids we spawned to channels that resolve when the reaper reports
/// them. Used by the stop escalation (`stop.rs`) and by anyone who needs to
/// await a particular child.
#[derive(Debug, Default)]
pub struct ExitWatchers {
    senders: HashMap<i32, watch::Sender<Option<ExitStatus>>>,
}

impl ExitWatchers {
    pub fn new() -> Self {
        Self::default()
    }

    /// Starts (or joins) watching `pid`.
    ///
    /// Call right after `spawn_child`, in the same synchronous step on the
    /// runtime thread: once the reaper has collected a pid nobody watched, it
    /// is reported as an orphan and its status is not kept.
    pub fn watch(&mut self, pid: i32) -> ExitReceiver {
        self.senders
            .entry(pid)
            .or_insert_with(|| watch::Sender::new(None))
            .subscribe()
    }

    /// True while `pid` is watched and not yet reaped.
    #[cfg(test)]
    pub fn is_watched(&self, pid: i32) -> bool {
        self.senders.contains_key(&pid)
    }

    /// Delivers one reaped process. Returns `false` for a pid nobody watched
    /// (a re-parented orphan, or a child spawned without watching).
    pub fn dispatch(&mut self, reaped: &ReapedProcess) -> bool {
        match self.senders.remove(&reaped.pid) {
            Some(sender) => {
                // Receivers keep the value after the sender is dropped.
                sender.send_replace(Some(reaped.status));
                true
            }
            None => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::process::spawn::spawn_child;
    use crate::process::test_support::{isolated_async_test, shell_spec};
    use std::time::Duration;

    #[test]
    fn reaper_reports_exit_codes_and_orphans() {
        isolated_async_test(
            module_path!(),
            "reaper_reports_exit_codes_and_orphans",
            || async {
                set_child_subreaper().unwrap();
                let mut reaper = Reaper::new().unwrap();
                let mut watchers = ExitWatchers::new();
                let dir = tempfile::tempdir().unwrap();

                // The orphan: `sh` forks `sleep` into the background and exits;
                // as subreaper we inherit the sleep and must reap it too.
                let script = "sleep 0.3 & echo $!; exit 3";
                let child = spawn_child(&shell_spec(dir.path(), "reap-test.1", script)).unwrap();
                let mut exited = watchers.watch(child.pid);
                let mut stdout = std::fs::File::from(child.stdout);
                let mut text = String::new();
                std::io::Read::read_to_string(&mut stdout, &mut text).unwrap();
                let orphan_pid: i32 = text.trim().parse().unwrap();

                let mut orphans = Vec::new();
                while watchers.is_watched(child.pid) || orphans.is_empty() {
                    let reaped = tokio::time::timeout(Duration::from_secs(10), reaper.next())
                        .await
                        .unwrap()
                        .unwrap();
                    if !watchers.dispatch(&reaped) {
                        orphans.push(reaped);
                    }
                }
                let status = exited.wait_for(Option::is_some).await.unwrap().unwrap();
                assert_eq!(status.code(), Some(3));
                assert_eq!(orphans.len(), 1);
                assert_eq!(orphans[0].pid, orphan_pid);
                assert_eq!(orphans[0].status.code(), Some(0));
            },
        );
    }

    #[test]
    fn reaper_reports_death_by_signal() {
        isolated_async_test(module_path!(), "reaper_reports_death_by_signal", || async {
            let mut reaper = Reaper::new().unwrap();
            let dir = tempfile::tempdir().unwrap();
            let child = spawn_child(&shell_spec(dir.path(), "reap-test.2", "kill -9 $$")).unwrap();
            let reaped = tokio::time::timeout(Duration::from_secs(10), reaper.next())
                .await
                .unwrap()
                .unwrap();
            assert_eq!(reaped.pid, child.pid);
            assert_eq!(reaped.status.signal(), Some(libc::SIGKILL));
            assert_eq!(reaped.status.code(), None);
        });
    }

    #[test]
    fn exit_watchers_deliver_once_and_ignore_unknown_pids() {
        let mut watchers = ExitWatchers::new();
        let first = watchers.watch(100);
        let second = watchers.watch(100);
        let reaped = ReapedProcess {
            pid: 100,
            status: ExitStatus::from_raw(0),
        };
        assert!(watchers.dispatch(&reaped));
        assert!(!watchers.dispatch(&reaped), "a pid is delivered once");
        assert!(!watchers.dispatch(&ReapedProcess { pid: 7, ..reaped }));
        assert_eq!(*first.borrow(), Some(ExitStatus::from_raw(0)));
        assert_eq!(*second.borrow(), Some(ExitStatus::from_raw(0)));
    }
}
