//! `WatcherSupervisor`: the managed `cgc watch .` child — its gate at
//! session start, its liveness verification, and its end.
//!
//! The decisions are pure (`cgc_fresh_core::watcher::gate`, and the
//! freshness machine for what each event means for the record); this actor
//! detects the backend, probes the lock, spawns through the supervisor,
//! watches for the ready line and the liveness budget, and reports facts.
//!
//! Rules it keeps:
//! - one attempt per session (a declined or failed attempt is not retried
//!   until the next session);
//! - one managed watcher per workspace: a second session while one runs
//!   does not start another (two watchers would fight over an embedded lock);
//! - it runs `cgc watch --sync-on-start .`: a plain watch applies only
//!   changes made after it started, so its "fresh" would not be true;
//! - verified when the child is alive at the end of
//!   `freshness.watcherLivenessMs`, or earlier when it printed CGC's ready
//!   line and is still alive (the line is printed only once CGC has opened
//!   its database and reconciled, which is what the failure modes in front
//!   of it — missing server, refused port, bad path — never reach);
//! - the watcher belongs to the session that started it: it is spawned with
//!   that session, so the supervisor stops it (SIGINT first) when the
//!   session ends, and its exit is then reported as `Stopped`, not a failure.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::time::Duration;

use actix::prelude::*;
use cgc_fresh_core::config::{Settings, WatchMode};
use cgc_fresh_core::freshness::SessionKey;
use cgc_fresh_core::watcher::backend::BackendAnswer;
use cgc_fresh_core::watcher::gate::{gate, GateDecision};

use super::backend_detector::{BackendDetected, BackendDetector, DetectBackend};
use crate::process::busy::find_lock_holder;
use crate::process::cgc_markers::is_watch_ready_line;
use crate::process::spawn::ChildKind;
use crate::supervisor::{ChildEvent, RootSupervisor, SpawnChild};

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

/// New settings (reload); the next attempt uses them.
#[derive(Message)]
#[rtype(result = "()")]
pub struct WatcherSettings(pub Settings);

/// What happened, for the workspace actor (and from there the machine).
#[derive(Message, Debug, Clone)]
#[rtype(result = "()")]
pub struct WatcherReport {
    pub session: SessionKey,
    pub event: WatcherEvent,
    pub backend: Option<BackendAnswer>,
}

#[derive(Debug, Clone)]
pub enum WatcherEvent {
    Started { pid: u32 },
    SpawnFailed { error: String },
    Verified { pid: u32 },
    Failed { pid: u32, error: String },
    Died { pid: u32, error: String },
    Busy { holder: String },
    DeclinedBackend { answer: String },
    DeclinedUnindexed,
    Stopped { pid: u32 },
}

struct Running {
    session: SessionKey,
    child: Option<u64>,
    pid: Option<u32>,
    verified: bool,
    saw_ready: bool,
    session_ended: bool,
    timer: Option<SpawnHandle>,
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
        WatcherSupervisor {
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
        tracing::info!(event = "watcher_report", session = %session, report = ?event);
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
        tracing::info!(event = "decision", decision = "watcher_gate", session = %session, mode = %self.settings.freshness.watch, gate = ?decision);
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
        if let Some(running) = &self.running {
            if running.session_ended {
                // The ended lifetime's watcher is still being stopped (it
                // may hold the embedded database until it exits): this one
                // starts once it is gone.
                tracing::info!(event = "watcher_deferred", session = %session, until_gone = %running.session);
                self.deferred = Some(session);
            } else {
                tracing::info!(event = "watcher_already_running", session = %session);
            }
            return;
        }
        if let Some(holder) =
            find_lock_holder(&self.workspace, &self.home, &self.settings.cgc.global_args)
        {
            self.report(&session, WatcherEvent::Busy { holder });
            return;
        }
        self.running = Some(Running {
            session: session.clone(),
            child: None,
            pid: None,
            verified: false,
            saw_ready: false,
            session_ended: false,
            timer: None,
        });
        let mut args = self.settings.cgc.global_args.clone();
        // --sync-on-start: the fresh claim at verification is only true if
        // the watcher first reconciles edits made before it started.
        args.extend(["watch", "--sync-on-start", "."].map(String::from));
        let spawn = self.supervisor.send(SpawnChild {
            program: PathBuf::from(&self.settings.cgc.executable),
            args,
            env_set: Vec::new(),
            kind: ChildKind::Watcher,
            session: Some(session.clone()),
            requester: ctx.address().recipient(),
        });
        let liveness = Duration::from_millis(self.settings.freshness.watcher_liveness_ms);
        ctx.spawn(spawn.into_actor(self).map(move |result, act, ctx| {
            let Some(running) = act.running.as_mut().filter(|r| r.session == session) else {
                return;
            };
            match result {
                Ok(Ok(started)) => {
                    running.child = Some(started.id);
                    let first_report = running.pid.is_none();
                    running.pid = Some(started.pid as u32);
                    let saw_ready = running.saw_ready;
                    running.timer = Some(ctx.run_later(liveness, |act, ctx| {
                        act.verify("survived the liveness budget", ctx)
                    }));
                    if first_report {
                        act.report(
                            &session,
                            WatcherEvent::Started {
                                pid: started.pid as u32,
                            },
                        );
                    }
                    if saw_ready {
                        act.verify("printed the ready line and is alive", ctx);
                    }
                }
                Ok(Err(error)) => {
                    act.running = None;
                    act.report(
                        &session,
                        WatcherEvent::SpawnFailed {
                            error: error.to_string(),
                        },
                    );
                }
                Err(error) => {
                    act.running = None;
                    act.report(
                        &session,
                        WatcherEvent::SpawnFailed {
                            error: error.to_string(),
                        },
                    );
                }
            }
        }));
    }

    fn verify(&mut self, why: &'static str, ctx: &mut Context<Self>) {
        let Some(running) = self.running.as_mut() else {
            return;
        };
        if running.verified || running.session_ended || running.child.is_none() {
            return;
        }
        let Some(pid) = running.pid else { return };
        running.verified = true;
        // Verified: the liveness timer has nothing left to decide, and an
        // idle service must not wake up for it.
        if let Some(timer) = running.timer.take() {
            ctx.cancel_future(timer);
        }
        let session = running.session.clone();
        tracing::info!(event = "watcher_verified", session = %session, pid, why);
        self.report(&session, WatcherEvent::Verified { pid });
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
        if let Some(running) = self.running.as_mut().filter(|r| r.session == msg.session) {
            running.session_ended = true;
        }
    }
}

impl Handler<ChildEvent> for WatcherSupervisor {
    type Result = ();
    fn handle(&mut self, msg: ChildEvent, ctx: &mut Self::Context) {
        match msg {
            ChildEvent::Line { text, .. } => {
                if is_watch_ready_line(&text) {
                    if let Some(running) = self.running.as_mut() {
                        running.saw_ready = true;
                    }
                    self.verify("printed the ready line and is alive", ctx);
                }
            }
            ChildEvent::Exited {
                pid,
                status,
                output_tail,
                during_shutdown,
                ..
            } => {
                let Some(mut running) = self.running.take() else {
                    return;
                };
                let pid = pid as u32;
                if running.pid.is_none() {
                    // It ended before its spawn reply was processed.
                    self.report(&running.session, WatcherEvent::Started { pid });
                }
                if let Some(timer) = running.timer.take() {
                    ctx.cancel_future(timer);
                }
                let error = format!(
                    "cgc watch {}; output ends: {}",
                    describe(status),
                    output_tail.trim()
                );
                // Stopped by its session's end or by an orderly shutdown:
                // not an error to record.
                let event = if running.session_ended || during_shutdown {
                    WatcherEvent::Stopped { pid }
                } else if running.verified {
                    WatcherEvent::Died { pid, error }
                } else {
                    WatcherEvent::Failed { pid, error }
                };
                self.report(&running.session, event);
                if let Some(next) = self.deferred.take() {
                    if self.attempted.contains(&next) {
                        self.spawn(next, ctx);
                    }
                }
            }
        }
    }
}

impl Handler<WatcherSettings> for WatcherSupervisor {
    type Result = ();
    fn handle(&mut self, msg: WatcherSettings, _: &mut Self::Context) {
        self.settings = msg.0;
    }
}

fn describe(status: std::process::ExitStatus) -> String {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(code), _) => format!("exited with code {code}"),
        (None, Some(signal)) => format!("was killed by signal {signal}"),
        _ => "ended".into(),
    }
}
