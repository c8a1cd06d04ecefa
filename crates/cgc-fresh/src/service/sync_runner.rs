//! `SyncRunner`: carries out the freshness machine's `StartSync` decisions
//! against the real world — probe the database lock, check consent (is the
//! workspace indexed?), spawn the strategy's `cgc` through the supervisor,
//! watch its output, bound its time, and report what happened.
//!
//! It decides nothing about freshness: it reports facts (`busy`, `declined`,
//! `spawned`, and the classified outcome) and the machine judges them.
//!
//! The `incremental` strategy runs the driver shipped in this binary
//! (`driver/incremental.py` and its modules, written to the private state directory before
//! it starts) with the interpreter of the configured `cgc`, as a worker
//! kept between syncs (`Worker`): each sync is one request on its stdin
//! naming the flight's changed paths, answered by one result line; it
//! holds the database only while it applies one. Its API probe runs once per configuration; a failed probe,
//! a whole-workspace flight, an unproven CGC version, or a driver that says it cannot
//! apply the change runs `reconcile` instead, and says so (the `Strategy`
//! report). After a driver run that may have left the graph partial
//! (failed, out of time, stopped) the next sync reconciles.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::time::Duration;

use actix::prelude::*;

use crate::service::messages::ConfigChanged;
use cgc_fresh_core::config::{Settings, SyncStrategy};
use cgc_fresh_core::freshness::{FlightId, SessionKey, SyncAllowance, SyncCost, SyncOutcome};
use cgc_fresh_core::sync_plan::{
    driver_argv, interpreter_from_shebang, list_argv, plan_sync, reconcile_argv, sync_argv,
    worker_argv, worker_prepare, worker_request, DriverOptions,
};
use cgc_fresh_core::sync_run::{
    consent, ChildBudget, Consent, ConsentFacts, DriverRequest, EndRequest, ProbeAnswer, RunPhase,
    RunWork, StartStep, SyncRunState,
};
use cgc_fresh_proto::SyncProgress;

mod child_exit;
mod driver_files;
mod ending;
mod mcp_calls;
mod output;
mod progress;
mod start;
mod warm_worker;
mod worker;

use cgc_fresh_core::worker_life::{AfterAnswer, AfterSettingsChange, WorkerExit, WorkerLife};
pub use driver_files::*;
use ending::send_end;

pub use warm_worker::WarmUp;

use self::mcp_calls::{ActiveMcp, PumpMcp};
use super::mcp_route::{McpRequest, MCP_TOOLS_MODULE, MCP_TOOLS_MODULE_FILE};
use crate::process::busy::find_lock_holder;
use crate::process::spawn::ChildKind;
use crate::supervisor::{
    ChildEvent, InterruptChild, RootSupervisor, SendInput, SpawnChild, StopChild,
};

/// The actor whose work this is, named in every log line.
const COMPONENT: &str = "sync_runner";

/// Start the sync the machine decided on.
#[derive(Message, Debug)]
#[rtype(result = "()")]
pub struct RunSync {
    pub flight: FlightId,
    pub session: Option<SessionKey>,
    /// The workspace-relative paths the flight covers; `None` for the whole
    /// workspace. A plain list: whoever knows of more changed files (a
    /// manifest diff) may add them.
    pub paths: Option<Vec<String>>,
    /// The classes of work it may spawn (the payer's slots left): work of
    /// another class ends the run with `OverBudget`, nothing spawned.
    pub allowance: SyncAllowance,
}

/// How long the driver's worker waits for the next sync before it ends by
/// itself (its memory — CGC imported, the parse cache — is then freed; the
/// next sync starts a new one).
pub const WORKER_IDLE_EXIT: Duration = Duration::from_secs(600);
/// How long a reconcile's SIGINT may go without `cgc watch` saying it is
/// stopping before it is sent again (see `SyncRunner::interrupt_not_taken`;
/// how many times: `sync_run::INTERRUPT_ATTEMPTS`).
const INTERRUPT_RETRY: Duration = Duration::from_secs(5);

/// Stop a running sync (its session ended); it reports `Cancelled`.
#[derive(Message, Debug)]
#[rtype(result = "()")]
pub struct CancelRun {
    pub flight: FlightId,
}

/// Every edit has settled and a sync waits for its batching window: an
/// idle worker parses and resolves the tree as it is now (`prepare`), so the
/// sync's request finds that done (the worker checks that the tree is still
/// what it prepared). Nothing is started for it: without a live worker that
/// is idle, it is dropped.
#[derive(Message, Debug)]
#[rtype(result = "()")]
pub struct PrepareSync;

/// A session lifetime's work stopped: forget its consent answer.
#[derive(Message, Debug)]
#[rtype(result = "()")]
pub struct ForgetSession(pub SessionKey);

/// What happened to a flight, for the sync scheduler actor (which passes it
/// on to the drift observer).
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
    /// A sync process exists now, of this class of cost (reported once
    /// per class: a driver run that falls back to a reconcile reports
    /// both).
    Spawned { pid: u32, cost: SyncCost },
    /// The sync needs work of a class its run does not allow: nothing (more)
    /// is spawned.
    OverBudget { cost: SyncCost },
    /// What the sync runs, and why when it is not the configured strategy
    /// (sent before `Finished`, for the status `detail`).
    /// `driver_unavailable`: the fallback is because the installed CGC
    /// cannot run the incremental driver (the person is told once).
    Strategy {
        note: String,
        fallback: bool,
        driver_unavailable: bool,
    },
    /// It ended (or could not start) with this outcome.
    Finished(SyncOutcome),
    /// What a long sync is doing now (`progress.rs`), for the state frames.
    Progress(SyncProgress),
}

impl SyncEvent {
    /// Whether the flight is over with this report (nothing more comes).
    pub fn ends_the_run(&self) -> bool {
        matches!(
            self,
            SyncEvent::Busy { .. }
                | SyncEvent::Declined { .. }
                | SyncEvent::OverBudget { .. }
                | SyncEvent::Finished(_)
        )
    }
}

/// One run: its state (the core's rules) and what the actor holds for it.
struct Run {
    state: SyncRunState,
    timer: Option<SpawnHandle>,
    /// What the run has shown of its progress (`progress.rs`).
    progress: progress::RunProgress,
}

impl Run {
    fn flight(&self) -> FlightId {
        self.state.flight()
    }
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
    /// The driver's API probe answer for the current settings.
    probe: Option<ProbeAnswer>,
    /// Set after a driver run that may have left the graph partial: the
    /// next sync reconciles.
    must_reconcile: Option<String>,
    /// Where the driver is written before use.
    driver_path: PathBuf,
    /// The driver serving syncs (`serve`), kept between them, and the
    /// workers let go whose exit is still to come (not a run's news).
    workers: WorkerLife,
    next_serial: u64,
    /// MCP requests (`cgc-fresh mcp`) waiting for the worker: answered
    /// between syncs, one at a time, each behind at most the running sync.
    mcp_queue: std::collections::VecDeque<McpRequest>,
    /// The MCP request the worker is answering.
    mcp_active: Option<ActiveMcp>,
    /// A sync the machine decided while an MCP request was being answered:
    /// it starts once the answer is out (the worker is the database's one
    /// owner; a sync started meanwhile would find it holding the lock).
    deferred_sync: Option<RunSync>,
    /// The worker's warm-up at a session's start (`warm_worker.rs`).
    warming: Option<warm_worker::Warming>,
    /// The worker that may keep the database open after an MCP call
    /// (`mcp.holdDatabaseMs`): released before any sync (`mcp_calls.rs`).
    database_held_by: Option<u64>,
    me: Option<Addr<SyncRunner>>,
}

impl SyncRunner {
    pub fn new(
        workspace: PathBuf,
        settings: Settings,
        supervisor: Addr<RootSupervisor>,
        report_to: Recipient<SyncReport>,
    ) -> Self {
        let home = crate::paths::home_dir();
        let state_dir = crate::paths::state_root(&crate::paths::ProcessEnv)
            .join(crate::paths::workspace_id(&workspace));
        SyncRunner {
            driver_path: state_dir.join(DRIVER_FILE),
            workers: WorkerLife::default(),
            next_serial: 0,
            mcp_queue: std::collections::VecDeque::new(),
            mcp_active: None,
            deferred_sync: None,
            warming: None,
            database_held_by: None,
            me: None,
            probe: None,
            must_reconcile: None,
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
        tracing::info!(component = COMPONENT, event = "sync_report", flight = flight.0, report = ?event);
        let ended = event.ends_the_run();
        self.report_to.do_send(SyncReport { flight, event });
        if ended {
            if let Some(me) = &self.me {
                me.do_send(PumpMcp);
            }
        }
    }

    /// The process holding CGC's database, if any (see `process::busy`).
    fn lock_holder(&self) -> Option<String> {
        find_lock_holder(
            &self.workspace,
            &self.home,
            &self.settings.cgc.global_args,
            COMPONENT,
        )
    }

    fn indexed_by_marker(&self) -> bool {
        self.workspace.join(".codegraphcontext").is_dir()
    }

    /// What is known about the consent to sync; `session_known_unindexed`:
    /// a listing already said "not indexed" to the session asking.
    fn consent_facts(&self, session_known_unindexed: bool) -> ConsentFacts {
        ConsentFacts {
            auto_create: self.settings.lifecycle.auto_create,
            known_indexed: self.known_indexed,
            marker_present: self.indexed_by_marker(),
            session_known_unindexed,
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

    fn started(&mut self, ctx: &mut Self::Context) {
        self.me = Some(ctx.address());
    }
}

impl Handler<RunSync> for SyncRunner {
    type Result = ();
    fn handle(&mut self, msg: RunSync, ctx: &mut Self::Context) {
        let answering = self.mcp_active.is_some();
        let warming = self.warming();
        if (answering || warming || self.database_held())
            && self.deferred_sync.is_none()
            && self.run.is_none()
        {
            tracing::info!(
                component = COMPONENT,
                event = "sync_deferred_behind_mcp",
                flight = msg.flight.0,
                behind = if answering {
                    "an answer"
                } else if warming {
                    "the worker's warm-up"
                } else {
                    "the database the worker holds"
                }
            );
            self.deferred_sync = Some(msg);
            self.pump_mcp(ctx);
            return;
        }
        self.run_sync(msg, ctx);
    }
}

impl SyncRunner {
    fn run_sync(&mut self, msg: RunSync, ctx: &mut Context<Self>) {
        if let Some(current) = &self.run {
            // The machine keeps one flight at a time; a second is a bug there.
            tracing::error!(
                component = COMPONENT,
                event = "sync_overlap_refused",
                running = current.flight().0,
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
        let consent_facts = self.consent_facts(self.known_unindexed.contains(&msg.session));
        let state = SyncRunState::new(msg.flight, msg.session, msg.paths, msg.allowance);
        let consent = consent(consent_facts);
        if consent == Consent::Declined {
            self.report(
                msg.flight,
                SyncEvent::Declined {
                    reason: declined_reason(&self.workspace),
                },
            );
            return;
        }
        self.run = Some(Run {
            state,
            timer: None,
            progress: progress::RunProgress::start(),
        });
        self.arm_progress_wake(ctx);
        if consent == Consent::Granted {
            self.start_sync(ctx);
        } else {
            if let Some(run) = self.run.as_mut() {
                run.state.begin_listing();
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
        let Some(run) = self.run.as_mut().filter(|r| r.flight() == msg.flight) else {
            return;
        };
        if let Some((id, request)) = run.state.cancel() {
            send_end(&self.supervisor, id, request);
        }
    }
}

impl Handler<PrepareSync> for SyncRunner {
    type Result = ();
    fn handle(&mut self, _: PrepareSync, ctx: &mut Self::Context) {
        let Some(worker) = self.workers.usable() else {
            return;
        };
        if self.run.is_some() {
            return;
        }
        tracing::info!(
            component = COMPONENT,
            event = "driver_worker_prepare",
            id = worker.id,
            pid = worker.pid
        );
        // Not cleared here: the worker closes a held database when it
        // reads this line, which may be after the next sync's lock probe;
        // that sync asks for a release and waits for it.
        self.write_to_worker(worker.id, worker_prepare(), ctx);
    }
}

impl Handler<ConfigChanged> for SyncRunner {
    type Result = ();
    /// A reloaded configuration (SIGHUP); applies to the next run.
    fn handle(&mut self, msg: ConfigChanged, _: &mut Self::Context) {
        let settings = msg.0.settings.clone();
        if settings.cgc != self.settings.cgc {
            // Another `cgc` (or other root options): probe its API again,
            // and let the worker started for the old ones go.
            self.probe = None;
            let applying = self
                .workers
                .current()
                .is_some_and(|w| self.applying_with(w.id));
            if let AfterSettingsChange::LetGo(worker) = self.workers.settings_changed(applying) {
                self.stop_worker(worker, "the cgc settings changed");
            }
        }
        self.settings = settings;
    }
}

impl Handler<ForgetSession> for SyncRunner {
    type Result = ();
    fn handle(&mut self, msg: ForgetSession, _: &mut Self::Context) {
        self.known_unindexed.remove(&Some(msg.0));
    }
}
