//! `SyncRunner`: carries out the freshness machine's `StartSync` decisions
//! against the real world — probe the database lock, check consent (is the
//! workspace indexed?), spawn the strategy's `cgc` through the supervisor,
//! watch its output, bound its time, and report what happened.
//!
//! It decides nothing about freshness: it reports facts (`busy`, `declined`,
//! `spawned`, and the classified outcome) and the machine judges them.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::time::Duration;

use actix::prelude::*;
use cgc_fresh_core::config::Settings;
use cgc_fresh_core::freshness::{FlightId, SessionKey, SyncOutcome};
use cgc_fresh_core::sync_plan::{
    classify_sync_exit, is_index_skip_line, list_argv, listing_mentions_workspace, sync_argv,
    SyncRunFacts,
};

use crate::process::busy::find_lock_holder;
use crate::process::cgc_markers::{is_watch_ready_line, output_has_lock_error};
use crate::process::spawn::ChildKind;
use crate::supervisor::{ChildEvent, InterruptChild, RootSupervisor, SpawnChild, StopChild};

/// Start the sync the machine decided on.
#[derive(Message, Debug)]
#[rtype(result = "()")]
pub struct RunSync {
    pub flight: FlightId,
    pub session: Option<SessionKey>,
}

/// Stop a running sync (its session ended); it reports `Cancelled`.
#[derive(Message, Debug)]
#[rtype(result = "()")]
pub struct CancelRun {
    pub flight: FlightId,
}

/// New settings (SIGHUP reload); applies to the next run.
#[derive(Message, Debug)]
#[rtype(result = "()")]
pub struct UseSettings(pub Settings);

/// A session lifetime's work stopped: forget its consent answer.
#[derive(Message, Debug)]
#[rtype(result = "()")]
pub struct ForgetSession(pub SessionKey);

/// What happened to a flight, for the workspace actor.
#[derive(Message, Debug, Clone)]
#[rtype(result = "()")]
pub struct SyncReport {
    pub flight: FlightId,
    pub event: SyncEvent,
}

#[derive(Debug, Clone)]
pub enum SyncEvent {
    /// Another process holds the database: nothing was spawned.
    Busy { holder: String },
    /// Not allowed to run (not indexed and `autoCreate` is off).
    Declined { reason: String },
    /// The sync process exists now.
    Spawned { pid: u32 },
    /// It ended (or could not start) with this outcome.
    Finished(SyncOutcome),
}

enum Phase {
    /// `cgc list` is running to decide whether the workspace is indexed.
    Listing {
        child: Option<u64>,
        lines: Vec<String>,
    },
    /// The sync itself is running.
    Syncing { child: Option<u64> },
}

/// How the runner asked its child to end before it exited by itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum EndRequest {
    /// Reconciled (the ready line was seen): one SIGINT, after which the
    /// child finishes cleanly; the time budget still bounds it. Escalating
    /// after the short stop grace turned slow clean exits on a loaded
    /// machine into kills, and so into failed syncs.
    Interrupt,
    /// Cancelled or out of time: the supervisor's full stop.
    Stop(&'static str),
}

struct Run {
    flight: FlightId,
    session: Option<SessionKey>,
    phase: Phase,
    facts: SyncRunFacts,
    /// What was asked of the child so far (sent once its id is known).
    end_requested: Option<EndRequest>,
    /// `Spawned` went to the machine (a very fast child may exit before
    /// the spawn reply is processed; the report must still come first).
    spawned_reported: bool,
    timer: Option<SpawnHandle>,
}

pub struct SyncRunner {
    workspace: PathBuf,
    home: PathBuf,
    settings: Settings,
    supervisor: Addr<RootSupervisor>,
    report_to: Recipient<SyncReport>,
    run: Option<Run>,
    /// Sessions for which a listing showed the workspace is not indexed
    /// (asked at most once per session, as the consent rule says).
    known_unindexed: BTreeSet<Option<SessionKey>>,
    known_indexed: bool,
}

impl SyncRunner {
    pub fn new(
        workspace: PathBuf,
        settings: Settings,
        supervisor: Addr<RootSupervisor>,
        report_to: Recipient<SyncReport>,
    ) -> Self {
        let home = crate::paths::home_dir();
        SyncRunner {
            workspace,
            home,
            settings,
            supervisor,
            report_to,
            run: None,
            known_unindexed: BTreeSet::new(),
            known_indexed: false,
        }
    }

    fn report(&self, flight: FlightId, event: SyncEvent) {
        tracing::info!(event = "sync_report", flight = flight.0, report = ?event);
        self.report_to.do_send(SyncReport { flight, event });
    }

    /// The process holding CGC's database, if any (see `process::busy`).
    fn lock_holder(&self) -> Option<String> {
        find_lock_holder(&self.workspace, &self.home, &self.settings.cgc.global_args)
    }

    fn indexed_by_marker(&self) -> bool {
        self.workspace.join(".codegraphcontext").is_dir()
    }

    fn spawn(&mut self, argv: Vec<String>, kind: ChildKind, ctx: &mut Context<Self>) {
        let Some(run) = self.run.as_ref() else { return };
        let flight = run.flight;
        let mut env_set = vec![];
        if kind == ChildKind::Sync {
            // A user's ENABLE_AUTO_WATCH would make `cgc index` fork a watcher.
            env_set.push(("ENABLE_AUTO_WATCH".to_string(), "false".to_string()));
        }
        let request = self.supervisor.send(SpawnChild {
            program: PathBuf::from(&self.settings.cgc.executable),
            args: argv,
            env_set,
            kind,
            session: run.session.clone(),
            requester: ctx.address().recipient(),
        });
        ctx.spawn(request.into_actor(self).map(move |result, act, ctx| {
            let Some(run) = act.run.as_mut().filter(|r| r.flight == flight) else {
                return;
            };
            match result {
                Ok(Ok(started)) => {
                    match &mut run.phase {
                        Phase::Listing { child, .. } | Phase::Syncing { child } => {
                            *child = Some(started.id)
                        }
                    }
                    if let Some(request) = run.end_requested {
                        // Asked to end (ready line seen, cancelled, out
                        // of time) before we knew the child's id.
                        send_end(&act.supervisor, started.id, request);
                    }
                    if matches!(run.phase, Phase::Syncing { .. }) {
                        let timeout =
                            Duration::from_millis(act.settings.cgc.maintenance_timeout_ms);
                        run.timer =
                            Some(ctx.run_later(timeout, move |act, _| act.timed_out(flight)));
                        if !run.spawned_reported {
                            run.spawned_reported = true;
                            act.report(
                                flight,
                                SyncEvent::Spawned {
                                    pid: started.pid as u32,
                                },
                            );
                        }
                    } else {
                        let timeout = Duration::from_millis(act.settings.cgc.timeout_ms);
                        run.timer =
                            Some(ctx.run_later(timeout, move |act, _| act.timed_out(flight)));
                    }
                }
                Ok(Err(error)) => {
                    act.run = None;
                    act.report(
                        flight,
                        SyncEvent::Finished(SyncOutcome::Failed {
                            error: error.to_string(),
                        }),
                    );
                }
                Err(mailbox) => {
                    act.run = None;
                    act.report(
                        flight,
                        SyncEvent::Finished(SyncOutcome::Failed {
                            error: mailbox.to_string(),
                        }),
                    );
                }
            }
        }));
    }

    fn start_sync(&mut self, ctx: &mut Context<Self>) {
        let argv = sync_argv(
            &self.settings.cgc.sync_strategy,
            &self.settings.cgc.global_args,
        );
        if let Some(run) = self.run.as_mut() {
            run.phase = Phase::Syncing { child: None };
        }
        self.spawn(argv, ChildKind::Sync, ctx);
    }

    fn timed_out(&mut self, flight: FlightId) {
        let Some(run) = self.run.as_mut().filter(|r| r.flight == flight) else {
            return;
        };
        run.timer = None;
        let child = match &run.phase {
            Phase::Listing { child, .. } | Phase::Syncing { child } => *child,
        };
        tracing::warn!(event = "sync_timeout", flight = flight.0, child);
        run.facts.timed_out = true;
        self.request_end(EndRequest::Stop("time budget exhausted"));
    }

    /// Asks the running child to end, unless it was already asked as much
    /// or more (a stop is never downgraded to an interrupt, nor repeated).
    fn request_end(&mut self, request: EndRequest) {
        let Some(run) = self.run.as_mut() else {
            return;
        };
        match (run.end_requested, request) {
            (Some(EndRequest::Stop(_)), _)
            | (Some(EndRequest::Interrupt), EndRequest::Interrupt) => return,
            _ => {}
        }
        run.end_requested = Some(request);
        let child = match &run.phase {
            Phase::Listing { child, .. } | Phase::Syncing { child } => *child,
        };
        if let Some(id) = child {
            send_end(&self.supervisor, id, request);
        }
    }

    fn child_exited(
        &mut self,
        pid: i32,
        code: Option<i32>,
        signal: Option<i32>,
        tail: String,
        ctx: &mut Context<Self>,
    ) {
        let Some(mut run) = self.run.take() else {
            return;
        };
        if let Some(timer) = run.timer.take() {
            ctx.cancel_future(timer);
        }
        match run.phase {
            Phase::Listing { lines, .. } => {
                if run.facts.cancelled {
                    self.report(run.flight, SyncEvent::Finished(SyncOutcome::Cancelled));
                    return;
                }
                let workspace = self.workspace.display().to_string();
                let conclusive = code == Some(0) && !run.facts.timed_out;
                let indexed = conclusive
                    && listing_mentions_workspace(lines.iter().map(String::as_str), &workspace);
                tracing::info!(
                    event = "consent_listing",
                    indexed,
                    conclusive,
                    code,
                    signal,
                    timed_out = run.facts.timed_out
                );
                if !conclusive {
                    // Not knowing is not "not indexed": nothing is created
                    // (consent), nothing is remembered, and the failure is
                    // said as what it is. The machine's retry rule applies.
                    let how = if run.facts.timed_out {
                        format!("timed out after {} ms", self.settings.cgc.timeout_ms)
                    } else {
                        match (code, signal) {
                            (Some(code), _) => format!("exited with code {code}"),
                            (None, Some(signal)) => format!("was killed by signal {signal}"),
                            (None, None) => "ended without a status".to_string(),
                        }
                    };
                    let mut error =
                        format!("could not tell whether {workspace} is indexed: `cgc list` {how}");
                    let tail = tail.trim();
                    if !tail.is_empty() {
                        error.push_str("; output ends: ");
                        error.push_str(tail);
                    }
                    self.report(
                        run.flight,
                        SyncEvent::Finished(SyncOutcome::Failed { error }),
                    );
                    return;
                }
                if indexed {
                    self.known_indexed = true;
                    run.phase = Phase::Syncing { child: None };
                    run.facts = SyncRunFacts::default();
                    run.end_requested = None;
                    run.spawned_reported = false;
                    self.run = Some(run);
                    self.start_sync(ctx);
                } else {
                    self.known_unindexed.insert(run.session.clone());
                    self.report(
                        run.flight,
                        SyncEvent::Declined {
                            reason: declined_reason(&self.workspace),
                        },
                    );
                }
            }
            Phase::Syncing { .. } => {
                if !run.spawned_reported {
                    self.report(run.flight, SyncEvent::Spawned { pid: pid as u32 });
                }
                run.facts.exit_code = code;
                run.facts.signal = signal;
                run.facts.timeout_ms = self.settings.cgc.maintenance_timeout_ms;
                if output_has_lock_error(&tail) {
                    run.facts.lock_error = true;
                }
                if run.facts.lock_error {
                    run.facts.lock_holder = self.lock_holder();
                }
                run.facts.output_tail = tail;
                let outcome = classify_sync_exit(&self.settings.cgc.sync_strategy, &run.facts);
                self.report(run.flight, SyncEvent::Finished(outcome));
            }
        }
    }
}

fn declined_reason(workspace: &Path) -> String {
    format!(
        "{} is not indexed by CodeGraphContext and lifecycle.autoCreate is off; \
         index it yourself (cgc index .) or set lifecycle.autoCreate",
        workspace.display()
    )
}

impl Actor for SyncRunner {
    type Context = Context<Self>;
}

impl Handler<RunSync> for SyncRunner {
    type Result = ();
    fn handle(&mut self, msg: RunSync, ctx: &mut Self::Context) {
        if let Some(current) = &self.run {
            // The machine keeps one flight at a time; a second is a bug there.
            tracing::error!(
                event = "sync_overlap_refused",
                running = current.flight.0,
                asked = msg.flight.0
            );
            self.report(
                msg.flight,
                SyncEvent::Finished(SyncOutcome::Failed {
                    error: "a sync is already running".into(),
                }),
            );
            return;
        }
        if let Some(holder) = self.lock_holder() {
            self.report(msg.flight, SyncEvent::Busy { holder });
            return;
        }
        let run = Run {
            flight: msg.flight,
            session: msg.session.clone(),
            phase: Phase::Syncing { child: None },
            facts: SyncRunFacts::default(),
            end_requested: None,
            spawned_reported: false,
            timer: None,
        };
        self.run = Some(run);
        let consented =
            self.settings.lifecycle.auto_create || self.known_indexed || self.indexed_by_marker();
        if consented {
            self.start_sync(ctx);
        } else if self.known_unindexed.contains(&msg.session) {
            self.run = None;
            self.report(
                msg.flight,
                SyncEvent::Declined {
                    reason: declined_reason(&self.workspace),
                },
            );
        } else {
            if let Some(run) = self.run.as_mut() {
                run.phase = Phase::Listing {
                    child: None,
                    lines: Vec::new(),
                };
            }
            self.spawn(
                list_argv(&self.settings.cgc.global_args),
                ChildKind::Probe,
                ctx,
            );
        }
    }
}

impl Handler<CancelRun> for SyncRunner {
    type Result = ();
    fn handle(&mut self, msg: CancelRun, _: &mut Self::Context) {
        let Some(run) = self.run.as_mut().filter(|r| r.flight == msg.flight) else {
            return;
        };
        run.facts.cancelled = true;
        self.request_end(EndRequest::Stop("sync cancelled: its session ended"));
    }
}

impl Handler<ChildEvent> for SyncRunner {
    type Result = ();
    fn handle(&mut self, msg: ChildEvent, ctx: &mut Self::Context) {
        match msg {
            ChildEvent::Line { id, text, .. } => {
                let Some(run) = self.run.as_mut() else { return };
                let current = match &run.phase {
                    Phase::Listing { child, .. } | Phase::Syncing { child } => *child,
                };
                if current.is_some_and(|c| c != id) {
                    return;
                }
                match &mut run.phase {
                    Phase::Listing { lines, .. } => {
                        if lines.len() < 10_000 {
                            lines.push(text);
                        }
                    }
                    Phase::Syncing { .. } => {
                        if output_has_lock_error(&text) {
                            run.facts.lock_error = true;
                        }
                        if is_index_skip_line(&text) {
                            run.facts.skipped_indexed = true;
                        }
                        if is_watch_ready_line(&text) && !run.facts.saw_ready {
                            run.facts.saw_ready = true;
                            // Reconciled: one SIGINT stops it cleanly (a
                            // second would make it exit 130 mid-stop). If
                            // the spawn reply is not in yet, it goes then.
                            self.request_end(EndRequest::Interrupt);
                        }
                    }
                }
            }
            ChildEvent::Exited {
                id,
                pid,
                status,
                output_tail,
                during_shutdown,
            } => {
                let current = self.run.as_ref().and_then(|run| match &run.phase {
                    Phase::Listing { child, .. } | Phase::Syncing { child } => *child,
                });
                // Only one child of ours runs at a time; `None` means its
                // spawn reply is not processed yet, and this is its exit.
                if current.is_some_and(|c| c != id) {
                    return;
                }
                // Stopped by an orderly shutdown: a cancellation, not a
                // failure to record (and show again after a restart).
                if during_shutdown {
                    if let Some(run) = self.run.as_mut() {
                        run.facts.cancelled = true;
                    }
                }
                use std::os::unix::process::ExitStatusExt;
                self.child_exited(pid, status.code(), status.signal(), output_tail, ctx);
            }
        }
    }
}

impl Handler<UseSettings> for SyncRunner {
    type Result = ();
    fn handle(&mut self, msg: UseSettings, _: &mut Self::Context) {
        self.settings = msg.0;
    }
}

impl Handler<ForgetSession> for SyncRunner {
    type Result = ();
    fn handle(&mut self, msg: ForgetSession, _: &mut Self::Context) {
        self.known_unindexed.remove(&Some(msg.0));
    }
}

/// Sends what `request` asks for to the supervisor.
fn send_end(supervisor: &Addr<RootSupervisor>, id: u64, request: EndRequest) {
    match request {
        EndRequest::Interrupt => supervisor.do_send(InterruptChild {
            id,
            reason: "reconcile complete",
        }),
        EndRequest::Stop(reason) => supervisor.do_send(StopChild { id, reason }),
    }
}
