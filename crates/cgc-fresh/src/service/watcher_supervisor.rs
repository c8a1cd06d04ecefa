//! `WatcherSupervisor`: the managed `cgc watch .` child — its gate at
//! session start, its liveness verification, and its end.
//!
//! The decisions are pure (`cgc_fresh_core::watcher::gate` whether to
//! spawn, `cgc_fresh_core::watcher::run` what each observation of a running
//! watcher means and what to report, and the freshness machine what each
//! report means for the record); this actor detects the backend, probes
//! the lock, spawns through the supervisor, keeps the timers, reads the
//! child's lines, and carries out what the run decides.
//!
//! Rules it keeps:
//! - one attempt per session (a declined or failed attempt is not retried
//!   until the next session);
//! - one managed watcher per workspace: a second session while one runs
//!   does not start another (two watchers would fight over an embedded lock);
//! - it runs `cgc watch --sync-on-start .`: a plain watch applies only
//!   changes made after it started, so its "fresh" would not be true;
//! - verified by CGC's ready line **and** the stabilization probe after it
//!   (`cgc_fresh_core::watcher::liveness`: the child must stay alive for
//!   up to 2 s after the line, ending within `freshness.watcherLivenessMs`
//!   of the spawn when the line comes early). CGC prints that line after
//!   its start-up reconcile (`--sync-on-start`) and after it scheduled its
//!   file observer; before it, the graph is being rewritten and edits are
//!   not yet observed. Surviving `freshness.watcherLivenessMs` without the
//!   line verifies nothing (a reconcile of a large repository outlasts it;
//!   it is only logged); an exit before the probe ended fails the attempt
//!   (never `fresh`), and no ready line within `cgc.maintenanceTimeoutMs`
//!   stops the child and fails it;
//! - CGC logs each file its observer applied to the graph only at INFO,
//!   which its CLI never configures: the child runs with `ENABLE_APP_LOGS=INFO`
//!   and a `sitecustomize` on `PYTHONPATH` (written to the state directory)
//!   that raises CGC's app logger to INFO; each
//!   `[INCREMENTAL] Done. Graph refresh for <path> complete!` line (and the
//!   old path of a move) is reported as `Applied`, and the drift observer claims
//!   `fresh` only when no observed edit waits for one;
//! - restarted when the drift observer asks (`Effect::RestartWatcher`: edits its
//!   observer cannot report wait, `freshness/drift_observer/watcher.rs`): the
//!   child is stopped (SIGINT first), and once it exited the lock is
//!   probed and `cgc watch --sync-on-start .` spawned again for the same
//!   session, reported as `Restarted`; its ready line verifies it as for a
//!   first start. A restart that cannot spawn (busy, spawn error) is a
//!   `Failed` naming the old process. Stopped when the drift observer gives up
//!   on it (`Effect::StopWatcher`), its exit then reported as `Stopped`;
//! - a watcher that says CGC went on with another database backend than
//!   the graph's (`cgc_markers::BACKEND_FALLBACK_MARKERS`: CGC 0.6.13 falls
//!   back to KùzuDB when FalkorDB Lite has not started in 5 s; its
//!   `sitecustomize` gives FalkorDB Lite 120 s and makes the warning
//!   print) is stopped and never verified: its exit is a failure;
//! - the watcher belongs to the session that started it: it is spawned with
//!   that session, so the supervisor stops it (SIGINT first) when the
//!   session ends, and its exit is then reported as `Stopped`, not a failure.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::time::Duration;

use actix::prelude::*;

use crate::service::messages::ConfigChanged;
use cgc_fresh_core::config::{Settings, WatchMode};
use cgc_fresh_core::freshness::SessionKey;
use cgc_fresh_core::watcher::backend::BackendAnswer;
use cgc_fresh_core::watcher::gate::{gate, GateDecision};
pub use cgc_fresh_core::watcher::run::WatcherEvent;
use cgc_fresh_core::watcher::run::{
    held_by, spawn_failed, AfterExit, StopPurpose, WatcherExit, WatcherRun,
};

use super::backend_detector::{BackendDetected, BackendDetector, DetectBackend};
use super::clock::now;
use crate::process::busy::find_lock_holder;
use crate::process::cgc_markers::{
    is_watch_ready_line, output_has_backend_fallback, watch_applied_path,
};
use crate::process::spawn::ChildKind;
use crate::supervisor::{ChildEvent, RootSupervisor, SpawnChild, StopChild};

mod child_events;
mod spawn;

/// The actor whose work this is, named in every log line.
const COMPONENT: &str = "watcher_supervisor";

/// The `sitecustomize` that makes CGC's watcher print, at INFO, the line it
/// logs after it applied a file (its CLI leaves the logger at WARNING). It
/// then runs any other `sitecustomize` on the path, which it shadows.
pub const WATCH_LOGGING_SHIM: &str = include_str!("../../driver/watch_logging/sitecustomize.py");
/// The directory under the state directory that holds it (put first on the
/// watcher's `PYTHONPATH`).
pub const WATCH_LOGGING_DIR: &str = "watch-logging";

/// A session started: decide (once) whether it gets a watcher.
#[derive(Message, Debug)]
#[rtype(result = "()")]
pub struct SessionBegan {
    pub session: SessionKey,
}

/// A session lifetime's work stopped (it ended or was detached); its
/// watcher is being stopped by the supervisor, and what is kept for the
/// lifetime here is dropped.
#[derive(Message, Debug)]
#[rtype(result = "()")]
pub struct SessionGone {
    pub session: SessionKey,
}

/// Restart `session`'s watcher `pid` (the drift observer's `RestartWatcher`).
#[derive(Message, Debug)]
#[rtype(result = "()")]
pub struct RestartWatcher {
    pub session: SessionKey,
    pub pid: u32,
}

/// Stop `session`'s watcher `pid` for good (the drift observer's `StopWatcher`).
#[derive(Message, Debug)]
#[rtype(result = "()")]
pub struct StopWatcher {
    pub session: SessionKey,
    pub pid: u32,
}

/// What happened, for the drift observer actor (and from there its sub-machine).
#[derive(Message, Debug, Clone)]
#[rtype(result = "()")]
pub struct WatcherReport {
    pub session: SessionKey,
    pub event: WatcherEvent,
    pub backend: Option<BackendAnswer>,
}

/// The running watcher: its run (`cgc_fresh_core::watcher::run`, what
/// each observation means) and the timers armed for it.
struct Running {
    run: WatcherRun,
    /// The liveness timer (it only logs), then the ready-line deadline.
    timer: Option<SpawnHandle>,
    deadline: Option<SpawnHandle>,
    /// The end of the stabilization probe (it verifies, if still alive).
    probe: Option<SpawnHandle>,
}

impl Running {
    fn cancel_timers(&mut self, ctx: &mut Context<WatcherSupervisor>, probe_too: bool) {
        let probe = if probe_too { self.probe.take() } else { None };
        for timer in [self.timer.take(), self.deadline.take(), probe]
            .into_iter()
            .flatten()
        {
            ctx.cancel_future(timer);
        }
    }
}

pub struct WatcherSupervisor {
    workspace: PathBuf,
    home: PathBuf,
    settings: Settings,
    supervisor: Addr<RootSupervisor>,
    detector: Addr<BackendDetector>,
    report_to: Recipient<WatcherReport>,
    /// Lifetimes whose attempt was made here, until their work stops
    /// (bounded by the live lifetimes; which lifetime may attempt at all is
    /// the core's decision).
    attempted: BTreeSet<SessionKey>,
    /// A lifetime whose watcher waits for an ended lifetime's watcher to
    /// exit.
    deferred: Option<SessionKey>,
    backend: Option<BackendAnswer>,
    running: Option<Running>,
    /// Where the logging shim is written.
    shim_dir: PathBuf,
}

impl WatcherSupervisor {
    pub fn new(
        workspace: PathBuf,
        settings: Settings,
        supervisor: Addr<RootSupervisor>,
        detector: Addr<BackendDetector>,
        report_to: Recipient<WatcherReport>,
    ) -> Self {
        let home = crate::paths::home_dir();
        let shim_dir = crate::paths::state_root(&crate::paths::ProcessEnv)
            .join(crate::paths::workspace_id(&workspace))
            .join(WATCH_LOGGING_DIR);
        WatcherSupervisor {
            shim_dir,
            workspace,
            home,
            settings,
            supervisor,
            detector,
            report_to,
            attempted: BTreeSet::new(),
            deferred: None,
            backend: None,
            running: None,
        }
    }

    fn report(&self, session: &SessionKey, event: WatcherEvent) {
        tracing::info!(component = COMPONENT, event = "watcher_report", session = %session, report = ?event);
        self.report_to.do_send(WatcherReport {
            session: session.clone(),
            event,
            backend: self.backend.clone(),
        });
    }

    fn indexed(&self) -> bool {
        self.workspace.join(".codegraphcontext").is_dir()
    }

    /// Runs the gate for `session` with what is known now.
    fn decide(
        &mut self,
        session: SessionKey,
        backend: Option<BackendAnswer>,
        ctx: &mut Context<Self>,
    ) {
        if !self.attempted.contains(&session) {
            return; // its work stopped while the backend was detected
        }
        let decision = gate(
            self.settings.freshness.watch,
            backend.as_ref(),
            self.indexed(),
        );
        tracing::info!(component = COMPONENT, event = "decision", decision = "watcher_gate", session = %session, mode = %self.settings.freshness.watch, gate = ?decision);
        match decision {
            GateDecision::Skip => {}
            GateDecision::NeedBackend => self.detector.do_send(DetectBackend {
                session,
                reply_to: ctx.address().recipient(),
            }),
            GateDecision::DeclineBackend { answer } => self.report(
                &session,
                WatcherEvent::DeclinedBackend {
                    answer: answer.to_string(),
                },
            ),
            GateDecision::DeclineUnindexed => {
                self.report(&session, WatcherEvent::DeclinedUnindexed)
            }
            GateDecision::Spawn => self.spawn(session, ctx),
        }
    }

    fn spawn(&mut self, session: SessionKey, ctx: &mut Context<Self>) {
        self.spawn_watcher(session, None, ctx);
    }

    /// No ready line within the budget: the start-up reconcile is taking
    /// too long (or the child hangs). Stop it; its exit reports the failure.
    fn give_up(&mut self, budget: Duration, _: &mut Context<Self>) {
        let Some(running) = self.running.as_mut() else {
            return;
        };
        running.deadline = None;
        let Some((child, why)) = running.run.give_up(budget.as_millis() as u64) else {
            return;
        };
        tracing::warn!(component = COMPONENT, event = "watcher_gave_up", session = %running.run.session(), child, reason = %why);
        self.supervisor.do_send(StopChild {
            id: child,
            reason: "watcher ready-line deadline",
        });
    }

    /// CGC said it went on with another backend than the graph's (it
    /// falls back to KùzuDB when FalkorDB Lite does not start in time; the
    /// driver's `backend_pin.py`): what this watcher applies is not the
    /// person's graph, so it is never verified. Stop it; its exit reports
    /// the failure.
    fn fell_back(&mut self, child: u64) {
        let Some(running) = self.running.as_mut() else {
            return;
        };
        let Some((child, why)) = running.run.fell_back(child) else {
            return;
        };
        tracing::warn!(component = COMPONENT, event = "watcher_gave_up", session = %running.run.session(), child, reason = %why);
        self.supervisor.do_send(StopChild {
            id: child,
            reason: "watcher on another backend",
        });
    }

    /// Starts the stabilization probe after the ready line, once the
    /// child's id is known: if it is still this child, alive, when the
    /// probe ends, it is verified (`cgc_fresh_core::watcher::liveness`).
    fn start_probe(&mut self, ctx: &mut Context<Self>) {
        let liveness = Duration::from_millis(self.settings.freshness.watcher_liveness_ms);
        let Some(running) = self.running.as_mut() else {
            return;
        };
        let Some((child, wait)) = running.run.start_probe(now(), liveness) else {
            return;
        };
        tracing::info!(component = COMPONENT, event = "watcher_probe", session = %running.run.session(), child, wait_ms = wait.as_millis() as u64);
        running.probe = Some(ctx.run_later(wait, move |act, ctx| {
            let Some(running) = act
                .running
                .as_mut()
                .filter(|r| r.run.child() == Some(child))
            else {
                return;
            };
            running.probe = None;
            act.verify(
                child,
                "printed the ready line and stayed alive through the stabilization probe",
                ctx,
            );
        }));
    }

    fn verify(&mut self, child: u64, why: &'static str, ctx: &mut Context<Self>) {
        let Some(running) = self.running.as_mut() else {
            return;
        };
        let Some(event) = running.run.probe_ended(child) else {
            return;
        };
        // Verified: the timers have nothing left to decide, and an idle
        // service must not wake up for them.
        running.cancel_timers(ctx, false);
        let session = running.run.session().clone();
        tracing::info!(component = COMPONENT, event = "watcher_verified", session = %session, pid = running.run.pid(), why);
        self.report(&session, event);
    }
}

impl Actor for WatcherSupervisor {
    type Context = Context<Self>;
}

impl Handler<SessionBegan> for WatcherSupervisor {
    type Result = ();
    fn handle(&mut self, msg: SessionBegan, ctx: &mut Self::Context) {
        if self.settings.freshness.watch == WatchMode::Off {
            return; // off: no spawn, and no detection either.
        }
        if !self.attempted.insert(msg.session.clone()) {
            return; // one attempt per session
        }
        self.decide(msg.session, self.backend.clone(), ctx);
    }
}

impl Handler<BackendDetected> for WatcherSupervisor {
    type Result = ();
    fn handle(&mut self, msg: BackendDetected, ctx: &mut Self::Context) {
        self.backend = Some(msg.answer.clone());
        self.decide(msg.session, Some(msg.answer), ctx);
    }
}

impl Handler<SessionGone> for WatcherSupervisor {
    type Result = ();
    fn handle(&mut self, msg: SessionGone, _: &mut Self::Context) {
        self.attempted.remove(&msg.session);
        if self.deferred.as_ref() == Some(&msg.session) {
            self.deferred = None;
        }
        if let Some(running) = self
            .running
            .as_mut()
            .filter(|r| *r.run.session() == msg.session)
        {
            running.run.session_gone();
        }
    }
}

impl WatcherSupervisor {
    /// Stops the running watcher `pid` of `session` for `purpose`, if it is
    /// the one running, verified, and not already being stopped.
    fn stop_for(&mut self, session: &SessionKey, pid: u32, purpose: StopPurpose) {
        let Some(running) = self.running.as_mut() else {
            return;
        };
        let Some(child) = running.run.stop_for(session, pid, purpose) else {
            tracing::info!(component = COMPONENT, event = "watcher_stop_stale", session = %session, pid, purpose = ?purpose);
            return;
        };
        tracing::info!(component = COMPONENT, event = "decision", decision = "watcher_stop", session = %session, pid, purpose = ?purpose);
        self.supervisor.do_send(StopChild {
            id: child,
            reason: match purpose {
                StopPurpose::Restart => "watcher restart",
                StopPurpose::Retire => "watcher given up",
            },
        });
    }
}

impl Handler<RestartWatcher> for WatcherSupervisor {
    type Result = ();
    fn handle(&mut self, msg: RestartWatcher, _: &mut Self::Context) {
        self.stop_for(&msg.session, msg.pid, StopPurpose::Restart);
    }
}

impl Handler<StopWatcher> for WatcherSupervisor {
    type Result = ();
    fn handle(&mut self, msg: StopWatcher, _: &mut Self::Context) {
        self.stop_for(&msg.session, msg.pid, StopPurpose::Retire);
    }
}

impl Handler<ConfigChanged> for WatcherSupervisor {
    type Result = ();
    /// A reloaded configuration; the next attempt uses it.
    fn handle(&mut self, msg: ConfigChanged, _: &mut Self::Context) {
        self.settings = msg.0.settings.clone();
    }
}
