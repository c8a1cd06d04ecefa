//! Stopping a child's process group, escalating until it is gone.
//!
//! SIGINT first (CGC stops gracefully on it: `cgc watch` prints `✓ Watcher
//! stopped.` and releases its database lock), then SIGTERM, then SIGKILL,
//! each followed by up to one grace period waiting for the leader to be
//! reaped. Signals go to the whole group (`killpg`), so helpers that stayed
//! in the group are included.
//!
//! A descendant can escape the group (FalkorDB Lite's `redis-server`
//! daemonizes into its own session). Every descendant inherits the child's
//! **per-child** owner token (`<service-token>.<child-id>`, see
//! `spawn::child_owner_token`), so after the leader is gone a `/proc` scan
//! for exactly that token finds and SIGKILLs the escapees of this child
//! without touching any other child's processes.

use std::process::ExitStatus;
use std::time::Duration;

use tokio::time::Instant;

use super::kill;
use super::reap::ExitReceiver;
use super::signal::Signal;

/// The actor whose work this is, named in every log line.
const COMPONENT: &str = "root_supervisor";

/// How long to wait after each signal.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StopPlan {
    /// Wait after SIGINT, after SIGTERM, and (for the reaper to report the
    /// leader) after SIGKILL.
    pub grace: Duration,
}

/// One step of the escalation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StopSignal {
    Interrupt,
    Terminate,
    Kill,
}

impl StopSignal {
    pub fn signal(self) -> Signal {
        match self {
            StopSignal::Interrupt => Signal::INT,
            StopSignal::Terminate => Signal::TERM,
            StopSignal::Kill => Signal::KILL,
        }
    }

    pub fn number(self) -> libc::c_int {
        self.signal().number()
    }

    pub fn name(self) -> &'static str {
        self.signal().name()
    }
}

/// The child to stop.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StopTarget {
    /// The group leader (the process we spawned).
    pub pid: i32,
    pub pgid: i32,
    /// The child's own owner token (not the service prefix).
    pub owner_token: String,
}

/// What a stop did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StopReport {
    /// The last signal sent to the group; `None` if the leader had already
    /// exited (or the group could not be signalled safely).
    pub last_signal: Option<StopSignal>,
    /// How the leader ended; `None` if the reaper never reported it, even
    /// after SIGKILL and a grace period (it is stuck in the kernel, or the
    /// exit channel is gone).
    pub status: Option<ExitStatus>,
    /// Processes carrying the owner token that were SIGKILLed afterwards.
    pub stragglers_killed: Vec<i32>,
}

/// Stops `target` by escalation and then kills its stragglers.
///
/// `exited` must come from the `ExitWatchers` fed by the SIGCHLD reaper
/// (`reap.rs`); the reaper has to keep running while this future does.
/// `reason` is logged with every signal ("session_shutdown", "one-shot
/// reconcile done", ...).
pub async fn stop_child(
    target: &StopTarget,
    plan: StopPlan,
    exited: &mut ExitReceiver,
    reason: &str,
) -> StopReport {
    let mut last_signal = None;
    if kill::group_is_signallable(target.pgid) {
        for step in [
            StopSignal::Interrupt,
            StopSignal::Terminate,
            StopSignal::Kill,
        ] {
            if exit_status(exited).is_some() {
                break;
            }
            signal_group(target.pgid, step, reason);
            last_signal = Some(step);
            if wait_for_exit(exited, plan.grace).await {
                break;
            }
        }
        if exit_status(exited).is_some() {
            sweep_group(target.pgid, reason);
        }
    } else {
        tracing::error!(
            component = COMPONENT,
            event = "signal_refused",
            pgid = target.pgid,
            reason,
            "refusing to signal a process group that is not a child's own"
        );
    }
    let stragglers_killed = kill_owner_stragglers(&target.owner_token, reason);
    StopReport {
        last_signal,
        status: exit_status(exited),
        stragglers_killed,
    }
}

/// Sends one SIGINT to a child's process group, unless it has exited — and
/// nothing more. For a child that finishes its work on SIGINT (a reconciling
/// `cgc watch` after its ready line): how long it may then take to exit is
/// bounded by its caller's own time budget, not by the stop grace, so that a
/// slow but clean exit on a loaded machine is not turned into a kill.
/// Returns whether the signal was sent.
pub fn interrupt_child(target: &StopTarget, exited: &ExitReceiver, reason: &str) -> bool {
    if exit_status(exited).is_some() {
        return false;
    }
    if !kill::group_is_signallable(target.pgid) {
        tracing::error!(
            component = COMPONENT,
            event = "signal_refused",
            pgid = target.pgid,
            reason,
            "refusing to signal a process group that is not a child's own"
        );
        return false;
    }
    signal_group(target.pgid, StopSignal::Interrupt, reason);
    true
}

/// SIGKILLs a child's process group at once, for the second-signal and panic
/// paths. No allocation, no locks, no async: safe to call from a panic hook.
/// Returns whether the signal was delivered. Refuses pgids 0 and 1 and this
/// process's own group (signalling those would hit us or the whole system).
pub fn kill_now(pgid: i32) -> bool {
    kill::signal_group(pgid, Signal::KILL).is_ok()
}

fn exit_status(exited: &ExitReceiver) -> Option<ExitStatus> {
    *exited.borrow()
}

/// Waits up to `grace` for the leader to be reaped.
async fn wait_for_exit(exited: &mut ExitReceiver, grace: Duration) -> bool {
    let deadline = Instant::now() + grace;
    match tokio::time::timeout_at(deadline, exited.wait_for(Option::is_some)).await {
        Ok(Ok(_)) => true,
        Ok(Err(_closed)) => {
            // Nobody will tell us any more: still give the child its grace.
            tokio::time::sleep_until(deadline).await;
            false
        }
        Err(_elapsed) => false,
    }
}

fn signal_group(pgid: i32, step: StopSignal, reason: &str) {
    let error = kill::signal_group(pgid, Signal::from_raw(step.number())).err();
    let sent = error.is_none();
    match step {
        StopSignal::Interrupt => tracing::info!(
            component = COMPONENT,
            event = "signal_sent",
            pgid,
            signal = step.name(),
            reason,
            delivered = sent,
            error = ?error,
            "stopping child process group"
        ),
        StopSignal::Terminate | StopSignal::Kill => tracing::warn!(
            component = COMPONENT,
            event = "signal_sent",
            pgid,
            signal = step.name(),
            reason,
            delivered = sent,
            error = ?error,
            "child process group did not stop in time; escalating"
        ),
    }
}

/// After the leader is gone, kills whatever is left in its group (helpers
/// that ignored the earlier signals). The group id cannot have been reused
/// while members remain; if none remain this is a harmless ESRCH.
fn sweep_group(pgid: i32, reason: &str) {
    if kill::signal_group(pgid, Signal::KILL).is_ok() {
        tracing::warn!(
            component = COMPONENT,
            event = "signal_sent",
            pgid,
            signal = Signal::KILL.name(),
            reason,
            "killed process group members left after the leader exited"
        );
    }
}

/// SIGKILLs every live process carrying exactly `owner_token`. No grace:
/// the child they belong to is already gone, and what is left (a daemonized
/// server) holds nothing worth a graceful stop.
fn kill_owner_stragglers(owner_token: &str, reason: &str) -> Vec<i32> {
    let killed = kill::kill_token_holders(kill::Tokens::Exactly(owner_token), |_, _| false);
    for straggler in &killed {
        tracing::warn!(
            component = COMPONENT,
            event = "signal_sent",
            pid = straggler.pid,
            signal = Signal::KILL.name(),
            reason,
            owner_token,
            process = %straggler.process,
            "killed a straggler that escaped the child's process group"
        );
    }
    killed.into_iter().map(|straggler| straggler.pid).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::process::capture::{capture_output, CaptureLimits, OutputCapture};
    use crate::process::proc_info::processes_with_owner_token;
    use crate::process::proc_info::read_proc_stat;
    use crate::process::reap::{ExitWatchers, ReapedProcess, Reaper};
    use crate::process::spawn::{spawn_child, SpawnedChild};
    use crate::process::test_support::{isolated_async_test, shell_spec};
    use std::os::unix::process::ExitStatusExt;
    use std::sync::{Arc, Mutex};

    const GRACE: Duration = Duration::from_millis(500);
    const BOUND: Duration = Duration::from_secs(10);

    /// The service's wiring in miniature: a reaper task feeding watchers.
    struct Supervision {
        watchers: Arc<Mutex<ExitWatchers>>,
        orphans: Arc<Mutex<Vec<ReapedProcess>>>,
    }

    impl Supervision {
        fn start() -> Self {
            let watchers = Arc::new(Mutex::new(ExitWatchers::new()));
            let orphans = Arc::new(Mutex::new(Vec::new()));
            let mut reaper = Reaper::new().unwrap();
            let (task_watchers, task_orphans) = (watchers.clone(), orphans.clone());
            tokio::spawn(async move {
                while let Some(reaped) = reaper.next().await {
                    if !task_watchers.lock().unwrap().dispatch(&reaped) {
                        task_orphans.lock().unwrap().push(reaped);
                    }
                }
            });
            Supervision { watchers, orphans }
        }

        /// Spawns `script`, watches its exit and waits for its `ready` line.
        async fn spawn_ready(&self, token: &str, script: &str) -> (StopTarget, ExitReceiver) {
            let dir = tempfile::tempdir().unwrap();
            let SpawnedChild {
                pid,
                pgid,
                stdout,
                stderr,
                ..
            } = spawn_child(&shell_spec(dir.path(), token, script)).unwrap();
            let owner_token = token.to_string();
            let exited = self.watchers.lock().unwrap().watch(pid);
            let (ready_tx, ready_rx) = tokio::sync::oneshot::channel();
            let mut ready_tx = Some(ready_tx);
            let capture = OutputCapture::new(CaptureLimits::default());
            tokio::spawn(capture_output(pid, stdout, stderr, capture, move |line| {
                if line.text == "ready" {
                    if let Some(sender) = ready_tx.take() {
                        let _ = sender.send(());
                    }
                }
            }));
            tokio::time::timeout(BOUND, ready_rx)
                .await
                .unwrap()
                .unwrap();
            let target = StopTarget {
                pid,
                pgid,
                owner_token,
            };
            (target, exited)
        }
    }

    /// Spawns `script` (which prints `ready`) under `token`, stops it with
    /// the usual plan, and returns what the stop did.
    async fn stop_script(token: &str, script: &str) -> StopReport {
        let supervision = Supervision::start();
        let (target, mut exited) = supervision.spawn_ready(token, script).await;
        stop_child(&target, StopPlan { grace: GRACE }, &mut exited, "test").await
    }

    #[test]
    fn sigint_stops_a_cooperative_child() {
        isolated_async_test(
            module_path!(),
            "sigint_stops_a_cooperative_child",
            || async {
                let report = stop_script("stop-test.int", "echo ready; exec sleep 1000").await;
                assert_eq!(report.last_signal, Some(StopSignal::Interrupt));
                assert_eq!(report.status.and_then(|s| s.signal()), Some(libc::SIGINT));
                assert!(report.stragglers_killed.is_empty());
            },
        );
    }

    #[test]
    fn child_ignoring_sigint_is_stopped_by_sigterm() {
        isolated_async_test(
            module_path!(),
            "child_ignoring_sigint_is_stopped_by_sigterm",
            || async {
                let report =
                    stop_script("stop-test.term", "trap '' INT; echo ready; exec sleep 1000").await;
                assert_eq!(report.last_signal, Some(StopSignal::Terminate));
                assert_eq!(report.status.and_then(|s| s.signal()), Some(libc::SIGTERM));
            },
        );
    }

    #[test]
    fn child_ignoring_sigint_and_sigterm_is_killed() {
        isolated_async_test(
            module_path!(),
            "child_ignoring_sigint_and_sigterm_is_killed",
            || async {
                let report = stop_script(
                    "stop-test.kill",
                    "trap '' INT TERM; echo ready; exec sleep 1000",
                )
                .await;
                assert_eq!(report.last_signal, Some(StopSignal::Kill));
                assert_eq!(report.status.and_then(|s| s.signal()), Some(libc::SIGKILL));
            },
        );
    }

    #[test]
    fn already_exited_child_gets_no_signal() {
        isolated_async_test(
            module_path!(),
            "already_exited_child_gets_no_signal",
            || async {
                let supervision = Supervision::start();
                let (target, mut exited) = supervision
                    .spawn_ready("stop-test.gone", "echo ready; exit 4")
                    .await;
                tokio::time::timeout(BOUND, exited.wait_for(Option::is_some))
                    .await
                    .unwrap()
                    .unwrap();
                let report =
                    stop_child(&target, StopPlan { grace: GRACE }, &mut exited, "test").await;
                assert_eq!(report.last_signal, None);
                assert_eq!(report.status.and_then(|s| s.code()), Some(4));
            },
        );
    }

    #[test]
    fn daemonized_grandchild_is_found_by_owner_token_and_killed() {
        isolated_async_test(
            module_path!(),
            "daemonized_grandchild_is_found_by_owner_token_and_killed",
            || async {
                crate::process::reap::set_child_subreaper().unwrap();
                let supervision = Supervision::start();
                let token_one = format!("stop-test-{}.1", std::process::id());
                let token_two = format!("stop-test-{}.2", std::process::id());
                // A bystander with another child's token must survive.
                let (bystander, mut bystander_exited) = supervision
                    .spawn_ready(&token_two, "echo ready; exec sleep 1000")
                    .await;
                let (target, mut exited) = supervision
                    .spawn_ready(
                        &token_one,
                        "setsid sleep 1000 >/dev/null 2>&1 </dev/null & echo ready; wait",
                    )
                    .await;

                // Wait until the grandchild has really left the session.
                let deadline = Instant::now() + BOUND;
                let grandchild = loop {
                    let escaped = processes_with_owner_token(&token_one)
                        .into_iter()
                        .find(|&pid| {
                            read_proc_stat(pid).is_ok_and(|stat| {
                                stat.comm == "sleep" && stat.session == pid && stat.pgrp == pid
                            })
                        });
                    if let Some(pid) = escaped {
                        break pid;
                    }
                    assert!(
                        Instant::now() < deadline,
                        "grandchild never left the session"
                    );
                    tokio::time::sleep(Duration::from_millis(20)).await;
                };
                assert_ne!(read_proc_stat(grandchild).unwrap().pgrp, target.pgid);

                let report =
                    stop_child(&target, StopPlan { grace: GRACE }, &mut exited, "test").await;
                assert_eq!(report.last_signal, Some(StopSignal::Interrupt));
                assert!(report.status.is_some());
                assert_eq!(report.stragglers_killed, vec![grandchild]);

                // As subreaper we inherit the grandchild and reap it.
                let deadline = Instant::now() + BOUND;
                while !supervision
                    .orphans
                    .lock()
                    .unwrap()
                    .iter()
                    .any(|reaped| reaped.pid == grandchild)
                {
                    assert!(Instant::now() < deadline, "grandchild was never reaped");
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
                assert!(processes_with_owner_token(&token_one).is_empty());

                assert_eq!(processes_with_owner_token(&token_two), vec![bystander.pid]);
                let report = stop_child(
                    &bystander,
                    StopPlan { grace: GRACE },
                    &mut bystander_exited,
                    "test cleanup",
                )
                .await;
                assert!(report.status.is_some());
            },
        );
    }

    #[test]
    fn kill_now_kills_the_group_and_refuses_dangerous_pgids() {
        let dir = tempfile::tempdir().unwrap();
        let child =
            spawn_child(&shell_spec(dir.path(), "stop-test.now", "exec sleep 1000")).unwrap();
        assert!(kill_now(child.pgid));
        assert_eq!(
            nix::sys::wait::waitpid(nix::unistd::Pid::from_raw(child.pid), None),
            Ok(nix::sys::wait::WaitStatus::Signaled(
                nix::unistd::Pid::from_raw(child.pid),
                nix::sys::signal::Signal::SIGKILL,
                false
            ))
        );

        assert!(!kill_now(0));
        assert!(!kill_now(1));
        assert!(!kill_now(-5));
        // SAFETY: getpgrp has no preconditions.
        assert!(!kill_now(nix::unistd::getpgrp().as_raw()));
    }
}
