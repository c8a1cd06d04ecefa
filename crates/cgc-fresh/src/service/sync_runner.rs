//! `SyncRunner`: carries out the freshness machine's `StartSync` decisions
//! against the real world — probe the database lock, check consent (is the
//! workspace indexed?), spawn the strategy's `cgc` through the supervisor,
//! watch its output, bound its time, and report what happened.
//!
//! It decides nothing about freshness: it reports facts (`busy`, `declined`,
//! `spawned`, and the classified outcome) and the machine judges them.
//!
//! The `incremental` strategy runs the driver shipped in this binary
//! (`driver/incremental.py`, written to the private state directory before
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
use cgc_fresh_core::config::{Settings, SyncStrategy};
use cgc_fresh_core::freshness::{FlightId, SessionKey, SyncAllowance, SyncCost, SyncOutcome};
use cgc_fresh_core::sync_plan::{
    classify_baseline_exit, classify_driver_exit, classify_sync_exit, driver_argv,
    interpreter_from_shebang, is_index_skip_line, list_argv, listing_mentions_workspace,
    parse_driver_result, plan_sync, probe_answer, reconcile_argv, sync_argv,
    unanswered_worker_exit, worker_argv, worker_prepare, worker_request, DriverOptions,
    DriverResult, DriverVerdict, SyncRun, SyncRunFacts, UnansweredWorkerExit,
    DRIVER_EXIT_UNSUPPORTED,
};
use cgc_fresh_proto::SyncProgress;

mod mcp_calls;
mod progress;
mod warm_worker;

pub use warm_worker::WarmUp;

use self::mcp_calls::{ActiveMcp, PumpMcp};
use super::mcp_route::{McpRequest, MCP_TOOLS_MODULE, MCP_TOOLS_MODULE_FILE};
use crate::process::busy::find_lock_holder;
use crate::process::cgc_markers::{
    is_watch_ready_line, is_watch_stopping_line, output_has_backend_fallback, output_has_lock_error,
};
use crate::process::spawn::ChildKind;
use crate::supervisor::{
    ChildEvent, InterruptChild, RootSupervisor, SendInput, SpawnChild, StopChild,
};

/// The actor whose work this is, named in every log line.
const COMPONENT: &str = "sync_runner";

/// How a fallback reason begins when the installed CGC cannot run the
/// incremental driver (its API probe failed, no interpreter).
const DRIVER_UNAVAILABLE: &str = "the incremental driver is unavailable";

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

/// The driver, shipped inside the binary.
pub const INCREMENTAL_DRIVER: &str = include_str!("../../driver/incremental.py");
/// Its file name in the state directory.
pub const DRIVER_FILE: &str = "incremental-driver.py";
/// The driver's parse cache module, shipped inside the binary and written
/// next to the driver, which loads it by this name.
pub const PARSE_CACHE_MODULE: &str = include_str!("../../driver/parse_cache.py");
pub const PARSE_CACHE_MODULE_FILE: &str = "incremental-parse-cache.py";
/// The resolution memo the driver's worker keeps between requests
/// (`driver/resolution_memo.py`), installed next to the driver.
pub const RESOLUTION_MEMO_MODULE: &str = include_str!("../../driver/resolution_memo.py");
pub const RESOLUTION_MEMO_MODULE_FILE: &str = "incremental-resolution-memo.py";
/// The stored-edge memo the driver's worker keeps between requests
/// (`driver/stored_edges.py`), installed next to the driver.
pub const STORED_EDGES_MODULE: &str = include_str!("../../driver/stored_edges.py");
pub const STORED_EDGES_MODULE_FILE: &str = "incremental-stored-edges.py";
/// The repair of FalkorDB's range index that CGC's writes depend on
/// (`driver/falkordb_index.py`), installed next to the driver.
pub const FALKORDB_INDEX_MODULE: &str = include_str!("../../driver/falkordb_index.py");
pub const FALKORDB_INDEX_MODULE_FILE: &str = "incremental-falkordb-index.py";
/// The check that the graph holds what a request wrote
/// (`driver/self_check.py`), installed next to the driver.
pub const SELF_CHECK_MODULE: &str = include_str!("../../driver/self_check.py");
pub const SELF_CHECK_MODULE_FILE: &str = "incremental-self-check.py";
/// What the worker does when no request comes (the digest, the collection,
/// a held database's close), installed next to the driver.
pub const WORKER_PAUSES_MODULE: &str = include_str!("../../driver/worker_pauses.py");
pub const WORKER_PAUSES_MODULE_FILE: &str = "incremental-worker-pauses.py";
/// The driver's seam with CGC (`driver/cgc_seam.py`): the CGC versions it
/// was proven against, and the gate that patches nothing on any other
/// unless `cgc.allowUnprovenVersion` is set; installed next to the driver.
pub const CGC_SEAM_MODULE: &str = include_str!("../../driver/cgc_seam.py");
pub const CGC_SEAM_MODULE_FILE: &str = "incremental-cgc-seam.py";
/// The backend pin (`driver/backend_pin.py`): CGC's configured backend,
/// FalkorDB Lite's start-up patience, and the refusal to write to another
/// backend CGC fell back to; installed next to the driver.
pub const BACKEND_PIN_MODULE: &str = include_str!("../../driver/backend_pin.py");
pub const BACKEND_PIN_MODULE_FILE: &str = "incremental-backend-pin.py";
/// The comparison of the graph with the tree (`driver/graph_baseline.py`)
/// that finds the changed files when nothing else names them; installed
/// next to the driver.
pub const GRAPH_BASELINE_MODULE: &str = include_str!("../../driver/graph_baseline.py");
pub const GRAPH_BASELINE_MODULE_FILE: &str = "incremental-graph-baseline.py";
/// The driver's progress lines (`driver/progress.py`), written next to it.
pub const PROGRESS_MODULE: &str = include_str!("../../driver/progress.py");
pub const PROGRESS_MODULE_FILE: &str = "incremental-progress.py";
/// Every file of the driver, written next to each other before it starts:
/// (file name, text).
const DRIVER_MODULES: [(&str, &str); 12] = [
    (DRIVER_FILE, INCREMENTAL_DRIVER),
    (PARSE_CACHE_MODULE_FILE, PARSE_CACHE_MODULE),
    (RESOLUTION_MEMO_MODULE_FILE, RESOLUTION_MEMO_MODULE),
    (STORED_EDGES_MODULE_FILE, STORED_EDGES_MODULE),
    (FALKORDB_INDEX_MODULE_FILE, FALKORDB_INDEX_MODULE),
    (SELF_CHECK_MODULE_FILE, SELF_CHECK_MODULE),
    (BACKEND_PIN_MODULE_FILE, BACKEND_PIN_MODULE),
    (MCP_TOOLS_MODULE_FILE, MCP_TOOLS_MODULE),
    (WORKER_PAUSES_MODULE_FILE, WORKER_PAUSES_MODULE),
    (CGC_SEAM_MODULE_FILE, CGC_SEAM_MODULE),
    (GRAPH_BASELINE_MODULE_FILE, GRAPH_BASELINE_MODULE),
    (PROGRESS_MODULE_FILE, PROGRESS_MODULE),
];
/// The parse cache itself (CGC's per-file parse results between syncs),
/// in the same private state directory; the driver writes it.
pub const PARSE_CACHE_FILE: &str = "incremental-parse-cache.json";
/// How long the driver's worker waits for the next sync before it ends by
/// itself (its memory — CGC imported, the parse cache — is then freed; the
/// next sync starts a new one).
pub const WORKER_IDLE_EXIT: Duration = Duration::from_secs(600);
/// How long a reconcile's SIGINT may go without `cgc watch` saying it is
/// stopping before it is sent again, and how many are sent at most (see
/// `SyncRunner::interrupt_not_taken`).
const INTERRUPT_RETRY: Duration = Duration::from_secs(5);
const INTERRUPT_ATTEMPTS: u32 = 4;

/// Overrides the interpreter the driver runs with (otherwise `cgc`'s own,
/// read from its `#!` line).
pub const DRIVER_PYTHON_ENV: &str = "CGC_FRESH_DRIVER_PYTHON";

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

/// New settings (SIGHUP reload); applies to the next run.
#[derive(Message, Debug)]
#[rtype(result = "()")]
pub struct UseSettings(pub Settings);

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

enum Phase {
    /// `cgc list` is running to decide whether the workspace is indexed.
    Listing {
        child: Option<u64>,
        lines: Vec<String>,
    },
    /// The incremental driver's API probe is running.
    Probing {
        child: Option<u64>,
        /// Boxed, as in `Active::Driver`.
        result: Option<Box<DriverResult>>,
    },
    /// The sync itself is running.
    Syncing { child: Option<u64> },
}

impl Phase {
    fn child(&self) -> Option<u64> {
        match self {
            Phase::Listing { child, .. }
            | Phase::Probing { child, .. }
            | Phase::Syncing { child } => *child,
        }
    }

    fn set_child(&mut self, id: u64) {
        match self {
            Phase::Listing { child, .. }
            | Phase::Probing { child, .. }
            | Phase::Syncing { child } => *child = Some(id),
        }
    }
}

/// What the `Syncing` phase runs.
#[derive(Debug, Clone)]
enum Active {
    Driver {
        paths: Vec<String>,
        /// A baseline request (`SyncRun::Baseline`): the driver finds the
        /// changed files by comparing the graph with the tree.
        baseline: bool,
        /// Boxed: a result is large, and most runs' `Active` holds none.
        result: Option<Box<DriverResult>>,
        /// The worker request this run waits for the answer to.
        serial: u64,
        /// A new worker took this request after the first one ended
        /// without reading it (`unanswered_worker_exit`).
        retried: bool,
    },
    Command {
        strategy: SyncStrategy,
    },
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
    /// The changed paths (`None`: the whole workspace).
    paths: Option<Vec<String>>,
    /// What the sync phase runs (set when it starts).
    active: Option<Active>,
    phase: Phase,
    facts: SyncRunFacts,
    /// What was asked of the child so far (sent once its id is known).
    end_requested: Option<EndRequest>,
    /// The classes whose `Spawned` went to the machine (a very fast child
    /// may exit before the spawn reply is processed; the report must still
    /// come first).
    spawned_reported: BTreeSet<SyncCost>,
    allowance: SyncAllowance,
    timer: Option<SpawnHandle>,
    /// What the run has shown of its progress (`progress.rs`).
    progress: progress::RunProgress,
}

impl Run {
    /// The class of cost of what the sync phase runs.
    fn cost(&self) -> SyncCost {
        match self.active {
            // A baseline parses the whole tree and reads the whole graph:
            // it pays from the whole-repository allowance.
            Some(Active::Driver { baseline: true, .. }) => SyncCost::WholeRepository,
            Some(Active::Driver { .. }) => SyncCost::ChangedFiles,
            _ => SyncCost::WholeRepository,
        }
    }

    /// The `Spawned` report for process `pid`, unless its class was
    /// reported already.
    fn spawned_report(&mut self, pid: u32) -> Option<SyncEvent> {
        let cost = self.cost();
        self.spawned_reported
            .insert(cost)
            .then_some(SyncEvent::Spawned { pid, cost })
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
    probe: Option<Result<Option<String>, String>>,
    /// Set after a driver run that may have left the graph partial: the
    /// next sync reconciles.
    must_reconcile: Option<String>,
    /// Where the driver is written before use.
    driver_path: PathBuf,
    /// The driver serving syncs (`serve`), kept between them.
    worker: Option<Worker>,
    /// Workers let go whose exit is still to come (not a run's news).
    retired_workers: BTreeSet<u64>,
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

/// The incremental driver as a long-lived child: CGC stays imported and
/// the parse cache warm between syncs; it opens the database only while it
/// applies a request, so it holds no lock between syncs. Started, stopped
/// and reaped by the root supervisor like every child; a sync that is
/// cancelled or out of time stops it (the next sync starts another). One
/// that died while idle is known dead once its exit is reported (the
/// supervisor reaps it, then gives its pipes up to 500 ms to drain); a sync
/// that starts in that window asks the dead worker, fails when the exit
/// arrives, and the next sync reconciles — slower, never a false `fresh`.
#[derive(Debug, Clone, Copy)]
struct Worker {
    id: u64,
    pid: u32,
    /// Started for `cgc` settings that have changed since: let go once it
    /// answered the request it is applying.
    stale: bool,
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
            worker: None,
            retired_workers: BTreeSet::new(),
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
        let ended = matches!(
            event,
            SyncEvent::Busy { .. }
                | SyncEvent::Declined { .. }
                | SyncEvent::OverBudget { .. }
                | SyncEvent::Finished(_)
        );
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

    fn spawn(&mut self, argv: Vec<String>, kind: ChildKind, ctx: &mut Context<Self>) {
        let program = PathBuf::from(&self.settings.cgc.executable);
        self.spawn_program(program, argv, kind, ctx);
    }

    fn spawn_program(
        &mut self,
        program: PathBuf,
        argv: Vec<String>,
        kind: ChildKind,
        ctx: &mut Context<Self>,
    ) {
        let Some(run) = self.run.as_ref() else { return };
        let flight = run.flight;
        let mut env_set = vec![];
        if matches!(kind, ChildKind::Sync | ChildKind::Worker) {
            // A user's ENABLE_AUTO_WATCH would make `cgc index` fork a watcher.
            env_set.push(("ENABLE_AUTO_WATCH".to_string(), "false".to_string()));
        }
        let request = self.supervisor.send(SpawnChild {
            program,
            args: argv,
            env_set,
            kind,
            // A worker serves every session's syncs: it is the
            // workspace's, stopped with a sync it is applying.
            session: if kind == ChildKind::Worker {
                None
            } else {
                run.session.clone()
            },
            requester: ctx.address().recipient(),
            piped_stdin: kind == ChildKind::Worker,
        });
        ctx.spawn(request.into_actor(self).map(move |result, act, ctx| {
            if let (ChildKind::Worker, Ok(Ok(started))) = (kind, &result) {
                act.worker_started(started, "sync");
            }
            let Some(run) = act.run.as_mut().filter(|r| r.flight == flight) else {
                return;
            };
            match result {
                Ok(Ok(started)) => {
                    run.phase.set_child(started.id);
                    if kind == ChildKind::Worker && run.end_requested.is_none() {
                        if let Some(Active::Driver {
                            paths,
                            serial,
                            baseline,
                            ..
                        }) = &run.active
                        {
                            let (paths, serial, baseline) = (paths.clone(), *serial, *baseline);
                            act.send_request(started.id, serial, &paths, baseline, ctx);
                        }
                    }
                    let Some(run) = act.run.as_mut().filter(|r| r.flight == flight) else {
                        return;
                    };
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
                        if let Some(event) = run.spawned_report(started.pid as u32) {
                            act.report(flight, event);
                        }
                        act.progress_spawned(ctx);
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
        let Some(run) = self.run.as_ref() else { return };
        let plan = plan_sync(
            &self.settings.cgc.sync_strategy,
            run.paths.as_deref(),
            self.must_reconcile.as_deref(),
        );
        match plan {
            SyncRun::Command {
                strategy,
                fallback_reason,
            } => self.start_command(strategy, fallback_reason, ctx),
            SyncRun::Incremental { paths } => match self.probe.clone() {
                Some(Ok(_)) => self.start_driver(paths, None, ctx),
                Some(Err(reason)) => self.start_command(
                    SyncStrategy::Reconcile,
                    Some(format!("{DRIVER_UNAVAILABLE}: {reason}")),
                    ctx,
                ),
                None => self.start_probe(ctx),
            },
            SyncRun::Baseline { reason } => match self.probe.clone() {
                Some(Ok(_)) => self.start_driver(Vec::new(), Some(reason), ctx),
                Some(Err(reason)) => self.start_command(
                    SyncStrategy::Reconcile,
                    Some(format!("{DRIVER_UNAVAILABLE}: {reason}")),
                    ctx,
                ),
                None => self.start_probe(ctx),
            },
        }
    }

    /// Ends the run with `OverBudget` when its allowance has no slot for
    /// work of `cost` (the machine tells the payer; nothing is spawned).
    /// An incremental sync is never swapped for a reconcile to stay within
    /// a budget, nor the other way round: each class pays for itself.
    fn over_budget(&mut self, cost: SyncCost) -> bool {
        let Some(run) = self.run.as_ref() else {
            return false;
        };
        if run.allowance.allows(cost) {
            return false;
        }
        let flight = run.flight;
        self.run = None;
        tracing::info!(component = COMPONENT, event = "sync_over_budget", flight = flight.0, cost = ?cost);
        self.report(flight, SyncEvent::OverBudget { cost });
        true
    }

    /// Runs the strategy's `cgc` command; `fallback` says why it replaces
    /// the configured `incremental`.
    fn start_command(
        &mut self,
        strategy: SyncStrategy,
        fallback: Option<String>,
        ctx: &mut Context<Self>,
    ) {
        if self.over_budget(SyncCost::WholeRepository) {
            return;
        }
        let Some(run) = self.run.as_mut() else { return };
        let flight = run.flight;
        run.phase = Phase::Syncing { child: None };
        run.active = Some(Active::Command {
            strategy: strategy.clone(),
        });
        run.facts = SyncRunFacts::default();
        run.end_requested = None;
        let note = match &fallback {
            Some(reason) => format!("sync strategy {strategy} (instead of incremental: {reason})"),
            None => format!("sync strategy {strategy}"),
        };
        if fallback.is_some() {
            tracing::warn!(component = COMPONENT, event = "sync_strategy_fallback", flight = flight.0, strategy = %strategy, reason = fallback.as_deref());
        } else {
            tracing::info!(component = COMPONENT, event = "sync_strategy", flight = flight.0, strategy = %strategy);
        }
        self.report(
            flight,
            SyncEvent::Strategy {
                driver_unavailable: fallback
                    .as_deref()
                    .is_some_and(|reason| reason.starts_with(DRIVER_UNAVAILABLE)),
                note,
                fallback: fallback.is_some(),
            },
        );
        let argv = sync_argv(&strategy, &self.settings.cgc.global_args);
        match self.readied_command(&argv) {
            Some((program, wrapped)) => self.spawn_program(program, wrapped, ChildKind::Sync, ctx),
            None => self.spawn(argv, ChildKind::Sync, ctx),
        }
    }

    /// A command sync run through the driver (`reconcile -- CGC ARGS...`):
    /// it readies the backend for CGC's own writes — FalkorDB's range index
    /// repaired (`driver/falkordb_index.py`) — and then becomes `cgc` with
    /// `argv` (the same process, output and signals). Only with `cgc`'s
    /// own Python (its `#!` line) and an executable `cgc`, and not once
    /// the driver's probe failed: an interpreter named by
    /// `CGC_FRESH_DRIVER_PYTHON`, a `cgc` that is a shell script or no
    /// script at all, or one that cannot be executed runs the command as
    /// it is (and fails, if it does, as it always did).
    fn readied_command(&self, argv: &[String]) -> Option<(PathBuf, Vec<String>)> {
        if std::env::var_os(DRIVER_PYTHON_ENV).is_some_and(|python| !python.is_empty())
            || matches!(self.probe, Some(Err(_)))
        {
            return None;
        }
        let cgc = resolve_program(&self.settings.cgc.executable)?;
        if !is_executable_file(&cgc) {
            return None;
        }
        let (program, mut args) = match self.driver_command() {
            Ok(command) => command,
            Err(reason) => {
                tracing::info!(component = COMPONENT, event = "sync_not_readied", reason = %reason);
                return None;
            }
        };
        let python = args
            .first()
            .map(PathBuf::from)
            .unwrap_or_else(|| program.clone());
        let named_python = [&program, &python].iter().any(|path| {
            path.file_name()
                .and_then(|name| name.to_str())
                .is_some_and(|name| name.starts_with("python"))
        });
        if !named_python {
            return None;
        }
        let script = args.pop()?;
        args.extend(reconcile_argv(
            &script,
            &self.settings.cgc.global_args,
            &cgc.display().to_string(),
            argv,
        ));
        Some((program, args))
    }

    /// CGC's root options and the person's opt-in to an unproven CGC, as
    /// the driver's probe and worker take them.
    fn driver_options(&self) -> DriverOptions<'_> {
        DriverOptions {
            global_args: &self.settings.cgc.global_args,
            allow_unproven_cgc: self.settings.cgc.allow_unproven_version,
        }
    }

    /// The interpreter of the configured `cgc` (or the override), and the
    /// driver written to the private state directory.
    fn driver_command(&self) -> Result<(PathBuf, Vec<String>), String> {
        let (program, mut args) = match std::env::var(DRIVER_PYTHON_ENV) {
            Ok(python) if !python.is_empty() => (python, Vec::new()),
            _ => {
                let cgc = resolve_program(&self.settings.cgc.executable)
                    .ok_or_else(|| format!("{} not found", self.settings.cgc.executable))?;
                let first = first_line(&cgc)
                    .map_err(|error| format!("cannot read {}: {error}", cgc.display()))?;
                interpreter_from_shebang(&first).ok_or_else(|| {
                    format!(
                        "{} is not a script with a #! line naming its Python",
                        cgc.display()
                    )
                })?
            }
        };
        crate::paths::ensure_private_dir(self.driver_path.parent().unwrap_or(Path::new(".")))
            .map_err(|error| format!("state directory: {error}"))?;
        for (file, text) in DRIVER_MODULES {
            let path = self.driver_path.with_file_name(file);
            crate::atomic_file::write_atomically(&path, text.as_bytes()).map_err(|error| {
                format!("cannot write the driver to {}: {error}", path.display())
            })?;
        }
        args.push(self.driver_path.display().to_string());
        Ok((PathBuf::from(program), args))
    }

    fn start_probe(&mut self, ctx: &mut Context<Self>) {
        let (program, mut argv) = match self.driver_command() {
            Ok(command) => command,
            Err(reason) => {
                self.probe = Some(Err(reason.clone()));
                self.start_command(
                    SyncStrategy::Reconcile,
                    Some(format!("{DRIVER_UNAVAILABLE}: {reason}")),
                    ctx,
                );
                return;
            }
        };
        let Some(script) = argv.pop() else { return };
        argv.extend(driver_argv(&script, &self.driver_options(), None, None));
        if let Some(run) = self.run.as_mut() {
            run.phase = Phase::Probing {
                child: None,
                result: None,
            };
            run.facts = SyncRunFacts::default();
            run.end_requested = None;
        }
        tracing::info!(component = COMPONENT, event = "driver_probe", program = %program.display());
        self.spawn_program(program, argv, ChildKind::Probe, ctx);
    }

    /// Applies `paths` with the driver; with `baseline` (why nothing
    /// proves what the graph holds), also every file the graph does not
    /// hold as a from-scratch index would.
    fn start_driver(
        &mut self,
        paths: Vec<String>,
        baseline: Option<String>,
        ctx: &mut Context<Self>,
    ) {
        let cost = if baseline.is_some() {
            SyncCost::WholeRepository
        } else {
            SyncCost::ChangedFiles
        };
        if self.over_budget(cost) {
            return;
        }
        // A worker already running needs nothing written or spawned.
        let command = match self.worker {
            Some(_) => None,
            None => match self.driver_command() {
                Ok(command) => Some(command),
                Err(reason) => {
                    self.start_command(
                        SyncStrategy::Reconcile,
                        Some(format!("{DRIVER_UNAVAILABLE}: {reason}")),
                        ctx,
                    );
                    return;
                }
            },
        };
        let Some((flight, serial)) =
            self.new_driver_request(paths.clone(), baseline.is_some(), false)
        else {
            return;
        };
        if let Some(run) = self.run.as_mut() {
            run.facts = SyncRunFacts::default();
            run.end_requested = None;
        }
        let count = paths.len();
        tracing::info!(
            component = COMPONENT,
            event = "sync_strategy",
            flight = flight.0,
            // A baseline is named apart: its cost and its proof differ.
            strategy = if baseline.is_some() {
                "baseline"
            } else {
                "incremental"
            },
            files = count,
            reason = baseline.as_deref(),
            worker = self.worker.map(|w| w.pid)
        );
        // On a CGC the driver was not proven against (the person allowed
        // it), every sync says so.
        let unproven = match &self.probe {
            Some(Ok(Some(note))) => format!("; {note}"),
            _ => String::new(),
        };
        let note = match &baseline {
            Some(reason) => format!(
                "sync strategy incremental from a baseline: the changed files are found by \
                 comparing the graph with the tree ({reason}{unproven})"
            ),
            None => format!("sync strategy incremental ({count} changed file(s){unproven})"),
        };
        self.report(
            flight,
            SyncEvent::Strategy {
                note,
                fallback: false,
                driver_unavailable: false,
            },
        );
        match (self.worker, command) {
            (Some(worker), _) => {
                let timeout = Duration::from_millis(self.settings.cgc.maintenance_timeout_ms);
                let Some(run) = self.run.as_mut() else { return };
                run.phase.set_child(worker.id);
                run.timer = Some(ctx.run_later(timeout, move |act, _| act.timed_out(flight)));
                if let Some(event) = run.spawned_report(worker.pid) {
                    self.report(flight, event);
                }
                self.send_request(worker.id, serial, &paths, baseline.is_some(), ctx);
            }
            (None, Some((program, argv))) => self.spawn_worker(program, argv, ctx),
            (None, None) => {}
        }
    }

    /// Makes `paths` the current run's driver request under a new serial
    /// (waiting for its child); the run's flight and the serial.
    fn new_driver_request(
        &mut self,
        paths: Vec<String>,
        baseline: bool,
        retried: bool,
    ) -> Option<(FlightId, u64)> {
        self.next_serial += 1;
        let serial = self.next_serial;
        let run = self.run.as_mut()?;
        run.phase = Phase::Syncing { child: None };
        run.active = Some(Active::Driver {
            paths,
            baseline,
            result: None,
            serial,
            retried,
        });
        Some((run.flight, serial))
    }

    /// Starts a worker from the driver's command; the current run's
    /// request goes once the spawn reply names it.
    fn spawn_worker(&mut self, program: PathBuf, argv: Vec<String>, ctx: &mut Context<Self>) {
        let Some(argv) = self.worker_spawn_argv(argv) else {
            return;
        };
        self.spawn_program(program, argv, ChildKind::Worker, ctx);
    }

    /// The supervisor's order to start a worker from the driver command
    /// (outside a sync run: for an MCP request or a warm-up).
    fn worker_spawn(
        &self,
        program: PathBuf,
        argv: Vec<String>,
        ctx: &Context<Self>,
    ) -> Option<SpawnChild> {
        let argv = self.worker_spawn_argv(argv)?;
        Some(SpawnChild {
            program,
            args: argv,
            env_set: vec![("ENABLE_AUTO_WATCH".to_string(), "false".to_string())],
            kind: ChildKind::Worker,
            session: None,
            requester: ctx.address().recipient(),
            piped_stdin: true,
        })
    }

    /// The driver command's argument vector (its last word the script)
    /// turned into the worker's: the same for a sync and an MCP request.
    fn worker_spawn_argv(&self, mut argv: Vec<String>) -> Option<Vec<String>> {
        let script = argv.pop()?;
        let cache = self.driver_path.with_file_name(PARSE_CACHE_FILE);
        argv.extend(worker_argv(
            &script,
            &self.driver_options(),
            &cache.display().to_string(),
            WORKER_IDLE_EXIT,
        ));
        Some(argv)
    }

    /// The worker the current run asked exited (`code`) without answering:
    /// whether a new worker took the request (`unanswered_worker_exit`).
    /// When it did not, the run ends with that exit.
    fn replace_unanswering_worker(
        &mut self,
        id: u64,
        code: Option<i32>,
        during_shutdown: bool,
        ctx: &mut Context<Self>,
    ) -> bool {
        let Some(run) = self.run.as_ref() else {
            return false;
        };
        let Some(Active::Driver {
            paths,
            baseline,
            result: None,
            retried,
            ..
        }) = &run.active
        else {
            return false;
        };
        let cancelled = run.facts.cancelled || during_shutdown || run.end_requested.is_some();
        let verdict = unanswered_worker_exit(code, cancelled, run.facts.timed_out, *retried);
        if verdict == UnansweredWorkerExit::End {
            return false;
        }
        let (paths, baseline) = (paths.clone(), *baseline);
        let Ok((program, argv)) = self.driver_command() else {
            return false;
        };
        // The new worker gets the whole time budget: the old one read
        // nothing, so no time went into this request.
        if let Some(timer) = self.run.as_mut().and_then(|run| run.timer.take()) {
            ctx.cancel_future(timer);
        }
        let Some((flight, serial)) = self.new_driver_request(paths, baseline, true) else {
            return false;
        };
        tracing::info!(
            component = COMPONENT,
            event = "driver_worker_replaced",
            flight = flight.0,
            id,
            serial,
            reason = "it ended before it read the request"
        );
        self.spawn_worker(program, argv, ctx);
        true
    }

    /// `started` is the worker now (for a sync or an MCP request).
    fn worker_started(&mut self, started: &crate::supervisor::ChildStarted, for_request: &str) {
        self.worker = Some(Worker {
            id: started.id,
            pid: started.pid as u32,
            stale: false,
        });
        tracing::info!(
            component = COMPONENT,
            event = "driver_worker_started",
            id = started.id,
            pid = started.pid,
            for_request
        );
    }

    /// Asks the worker to apply `paths`; its answer is a result line with
    /// this `serial`. A request that cannot be written stops the worker,
    /// and the run ends with its exit.
    fn send_request(
        &mut self,
        id: u64,
        serial: u64,
        paths: &[String],
        baseline: bool,
        ctx: &mut Context<Self>,
    ) {
        tracing::info!(
            component = COMPONENT,
            event = "driver_worker_request",
            id,
            serial,
            files = paths.len(),
            baseline
        );
        // The worker closes a database it held before it applies.
        self.database_held_by = None;
        self.write_to_worker(id, worker_request(serial, paths, baseline), ctx);
    }

    /// Writes one line to worker `id`; a line that cannot be written stops
    /// it (a run applying with it ends with its exit).
    fn write_to_worker(&mut self, id: u64, line: String, ctx: &mut Context<Self>) {
        let request = self.supervisor.send(SendInput { id, line });
        ctx.spawn(request.into_actor(self).map(move |result, act, _| {
            let error = match result {
                Ok(Ok(())) => return,
                Ok(Err(error)) => error,
                Err(mailbox) => mailbox.to_string(),
            };
            tracing::warn!(component = COMPONENT, event = "driver_worker_input_failed", id, error = %error);
            act.supervisor.do_send(StopChild {
                id,
                reason: "a line could not be written to it",
            });
        }));
    }

    /// The worker answered the current run's request with the exit code a
    /// one-shot driver would have ended with: the run ends as if it had.
    fn worker_answered(&mut self, id: u64, code: i32, ctx: &mut Context<Self>) {
        let Some(worker) = self.worker.filter(|w| w.id == id) else {
            return;
        };
        if code != 0 && code != DRIVER_EXIT_UNSUPPORTED {
            // It ends by itself after such an answer (its state is in doubt).
            self.worker = None;
            self.retired_workers.insert(id);
        }
        self.child_exited(worker.pid as i32, Some(code), None, String::new(), ctx);
        if self.worker.is_some_and(|w| w.stale) {
            self.drop_worker("the cgc settings changed");
        }
    }

    /// Whether the current run is waiting on child `id` (a worker applying
    /// its request).
    fn applying_with(&self, id: u64) -> bool {
        self.run.as_ref().and_then(|run| run.phase.child()) == Some(id)
    }

    /// Lets the worker go (stopped through the supervisor). If a run is
    /// applying a request with it, that run ends with its exit.
    fn drop_worker(&mut self, reason: &'static str) {
        let Some(worker) = self.worker.take() else {
            return;
        };
        if !self.applying_with(worker.id) {
            self.retired_workers.insert(worker.id);
        }
        tracing::info!(
            component = COMPONENT,
            event = "driver_worker_dropped",
            id = worker.id,
            pid = worker.pid,
            reason
        );
        self.supervisor.do_send(StopChild {
            id: worker.id,
            reason,
        });
    }

    fn timed_out(&mut self, flight: FlightId) {
        let Some(run) = self.run.as_mut().filter(|r| r.flight == flight) else {
            return;
        };
        run.timer = None;
        let child = run.phase.child();
        tracing::warn!(
            component = COMPONENT,
            event = "sync_timeout",
            flight = flight.0,
            child
        );
        run.facts.timed_out = true;
        self.request_end(EndRequest::Stop("time budget exhausted"));
    }

    /// The reconcile's SIGINT was sent `sent` times and `cgc watch` has not
    /// said it is stopping: send it again. CGC 0.6.13 waits for it in
    /// `threading.Event().wait()`, which a SIGINT the kernel hands to one
    /// of its other threads does not wake (seen on FalkorDB Lite, whose
    /// client runs two more threads, on a loaded machine: the reconcile
    /// sat after its ready line until the session ended). Only while the
    /// stopping line is not out, so a stop under way never gets a second
    /// SIGINT (that would make it exit 130); the time budget still bounds
    /// the whole run.
    fn interrupt_not_taken(&mut self, flight: FlightId, sent: u32, ctx: &mut Context<Self>) {
        let Some(run) = self.run.as_ref() else { return };
        let waiting = run.flight == flight
            && run.facts.saw_ready
            && !run.facts.saw_stopping
            && matches!(run.end_requested, Some(EndRequest::Interrupt));
        let Some(id) = run.phase.child().filter(|_| waiting) else {
            return;
        };
        if sent >= INTERRUPT_ATTEMPTS {
            return;
        }
        tracing::warn!(
            component = COMPONENT,
            event = "interrupt_repeated",
            flight = flight.0,
            child = id,
            sent,
            waited_ms = INTERRUPT_RETRY.as_millis() as u64
        );
        send_end(&self.supervisor, id, EndRequest::Interrupt);
        ctx.run_later(INTERRUPT_RETRY, move |act, ctx| {
            act.interrupt_not_taken(flight, sent + 1, ctx)
        });
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
        if let Some(id) = run.phase.child() {
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
                    component = COMPONENT,
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
                    run.spawned_reported.clear();
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
            Phase::Probing { ref result, .. } => {
                if run.facts.cancelled {
                    self.report(run.flight, SyncEvent::Finished(SyncOutcome::Cancelled));
                    return;
                }
                let answer = match probe_answer(result.as_deref(), code) {
                    Some(answer) => answer,
                    None if run.facts.timed_out => Err(format!(
                        "its API probe gave no answer within {} ms",
                        self.settings.cgc.timeout_ms
                    )),
                    None => Err(format!(
                        "its API probe ended with {}{}",
                        match (code, signal) {
                            (Some(code), _) => format!("exit code {code}"),
                            (None, Some(signal)) => format!("signal {signal}"),
                            (None, None) => "no status".to_string(),
                        },
                        last_line(&tail)
                    )),
                };
                tracing::info!(
                    component = COMPONENT,
                    event = "driver_probe_result",
                    ok = answer.is_ok(),
                    reason = answer.as_ref().err(),
                    unproven = answer.as_ref().ok().and_then(|note| note.as_deref())
                );
                self.probe = Some(answer.clone());
                self.run = Some(run);
                match answer {
                    // Planned again, now that the probe answered.
                    Ok(_) => self.start_sync(ctx),
                    Err(reason) => self.start_command(
                        SyncStrategy::Reconcile,
                        Some(format!("{DRIVER_UNAVAILABLE}: {reason}")),
                        ctx,
                    ),
                }
            }
            Phase::Syncing { .. } => {
                if let Some(event) = run.spawned_report(pid as u32) {
                    self.report(run.flight, event);
                }
                run.facts.exit_code = code;
                run.facts.signal = signal;
                run.facts.timeout_ms = self.settings.cgc.maintenance_timeout_ms;
                if output_has_lock_error(&tail) {
                    run.facts.lock_error = true;
                }
                if output_has_backend_fallback(&tail) {
                    run.facts.backend_fell_back = true;
                }
                if run.facts.lock_error {
                    run.facts.lock_holder = self.lock_holder();
                }
                run.facts.output_tail = tail;
                match run.active.clone() {
                    Some(Active::Driver {
                        paths,
                        baseline,
                        result,
                        ..
                    }) => {
                        let verdict = if baseline {
                            classify_baseline_exit(result.as_deref(), &run.facts)
                        } else {
                            classify_driver_exit(&paths, result.as_deref(), &run.facts)
                        };
                        match verdict {
                            DriverVerdict::Fallback { reason } => {
                                self.run = Some(run);
                                self.start_command(SyncStrategy::Reconcile, Some(reason), ctx);
                            }
                            DriverVerdict::Outcome(outcome) => {
                                match &outcome {
                                    SyncOutcome::Succeeded => {
                                        self.must_reconcile = None;
                                        tracing::info!(
                                            component = COMPONENT,
                                            event = "incremental_applied",
                                            flight = run.flight.0,
                                            files = paths.len(),
                                            baseline,
                                            relinked = result.as_ref().and_then(|r| r.relinked),
                                            timings = ?result.as_ref().map(|r| &r.timings)
                                        );
                                    }
                                    SyncOutcome::Busy { .. } | SyncOutcome::NotApplied { .. } => {}
                                    SyncOutcome::Failed { error }
                                    | SyncOutcome::TimedOut { error } => {
                                        self.must_reconcile = Some(format!(
                                            "the last incremental sync did not finish ({error})"
                                        ));
                                    }
                                    SyncOutcome::Cancelled => {
                                        self.must_reconcile = Some(
                                            "the last incremental sync was stopped before it finished"
                                                .into(),
                                        );
                                    }
                                }
                                self.report(run.flight, SyncEvent::Finished(outcome));
                            }
                        }
                    }
                    Some(Active::Command { strategy }) => {
                        let outcome = classify_sync_exit(&strategy, &run.facts);
                        if outcome == SyncOutcome::Succeeded
                            && matches!(strategy, SyncStrategy::Reconcile | SyncStrategy::Update)
                        {
                            self.must_reconcile = None;
                        }
                        self.report(run.flight, SyncEvent::Finished(outcome));
                    }
                    None => {
                        let outcome =
                            classify_sync_exit(&self.settings.cgc.sync_strategy, &run.facts);
                        self.report(run.flight, SyncEvent::Finished(outcome));
                    }
                }
            }
        }
    }
}

/// ` (last output: …)` for a message, or nothing.
fn last_line(tail: &str) -> String {
    match tail.lines().rev().find(|line| !line.trim().is_empty()) {
        Some(line) => format!(" (last output: {})", line.trim()),
        None => String::new(),
    }
}

/// `name` as the spawner finds it: a path when it has a slash, else the
/// first match on `PATH`.
fn resolve_program(name: &str) -> Option<PathBuf> {
    if name.contains('/') {
        return Some(PathBuf::from(name));
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(name))
        .find(|candidate| candidate.is_file())
}

/// Whether `path` is a regular file with an execute bit.
fn is_executable_file(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path)
        .is_ok_and(|meta| meta.is_file() && meta.permissions().mode() & 0o111 != 0)
}

/// The first line of a file (at most 512 bytes of it).
fn first_line(path: &Path) -> std::io::Result<String> {
    use std::io::Read;
    let mut head = [0u8; 512];
    let mut file = std::fs::File::open(path)?;
    let n = file.read(&mut head)?;
    let text = String::from_utf8_lossy(&head[..n]);
    Ok(text.lines().next().unwrap_or_default().to_string())
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
            paths: msg.paths.clone(),
            active: None,
            phase: Phase::Syncing { child: None },
            facts: SyncRunFacts::default(),
            end_requested: None,
            spawned_reported: BTreeSet::new(),
            allowance: msg.allowance,
            timer: None,
            progress: progress::RunProgress::start(),
        };
        self.run = Some(run);
        self.arm_progress_wake(ctx);
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
                if self.mcp_line(id, &text, ctx) || self.warm_up_line(id, &text, ctx) {
                    return;
                }
                let Some(run) = self.run.as_ref() else { return };
                let current = run.phase.child();
                if current.is_some_and(|c| c != id) {
                    return;
                }
                if matches!(run.phase, Phase::Syncing { .. }) && self.progress_line(&text, ctx) {
                    return;
                }
                let Some(run) = self.run.as_mut() else { return };
                match &mut run.phase {
                    Phase::Listing { lines, .. } => {
                        if lines.len() < 10_000 {
                            lines.push(text);
                        }
                    }
                    Phase::Probing { result, .. } => {
                        if let Some(parsed) = parse_driver_result(&text) {
                            *result = Some(Box::new(parsed));
                        }
                    }
                    Phase::Syncing { .. } => {
                        if let Some(Active::Driver { result, serial, .. }) = &mut run.active {
                            if let Some(parsed) = parse_driver_result(&text) {
                                // A worker's answer ends the run; one for
                                // another request is not this run's.
                                let expected = *serial;
                                if parsed.exit.is_some() && parsed.serial != Some(expected) {
                                    tracing::warn!(
                                        component = COMPONENT,
                                        event = "driver_worker_stray_answer",
                                        id,
                                        serial = parsed.serial,
                                        expected
                                    );
                                    return;
                                }
                                let answer = parsed.exit;
                                *result = Some(Box::new(parsed));
                                if let Some(code) = answer {
                                    self.worker_answered(id, code, ctx);
                                }
                                return;
                            }
                        }
                        if output_has_lock_error(&text) {
                            run.facts.lock_error = true;
                        }
                        if output_has_backend_fallback(&text) {
                            run.facts.backend_fell_back = true;
                        }
                        if is_index_skip_line(&text) {
                            run.facts.skipped_indexed = true;
                        }
                        let reconciling = matches!(
                            &run.active,
                            Some(Active::Command {
                                strategy: SyncStrategy::Reconcile
                            }) | None
                        );
                        if reconciling && is_watch_stopping_line(&text) {
                            run.facts.saw_stopping = true;
                        }
                        if reconciling && is_watch_ready_line(&text) && !run.facts.saw_ready {
                            run.facts.saw_ready = true;
                            let flight = run.flight;
                            // Reconciled: one SIGINT stops it cleanly (a
                            // second would make it exit 130 mid-stop). If
                            // the spawn reply is not in yet, it goes then.
                            self.request_end(EndRequest::Interrupt);
                            ctx.run_later(INTERRUPT_RETRY, move |act, ctx| {
                                act.interrupt_not_taken(flight, 1, ctx)
                            });
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
                self.mcp_worker_exited(id, pid, &status, ctx);
                if self.warm_up_child_exited(id, status.code(), ctx) {
                    return;
                }
                if self.retired_workers.remove(&id) {
                    tracing::info!(component = COMPONENT, event = "driver_worker_exited", id, pid, status = %status, retired = true);
                    return;
                }
                let current = self.run.as_ref().and_then(|run| run.phase.child());
                if self.worker.is_some_and(|w| w.id == id) {
                    self.worker = None;
                    tracing::info!(component = COMPONENT, event = "driver_worker_exited", id, pid, status = %status, applying = current == Some(id));
                    if current != Some(id) {
                        // Idle (its idle exit, or it died): the next sync
                        // starts another.
                        return;
                    }
                    if self.replace_unanswering_worker(id, status.code(), during_shutdown, ctx) {
                        return;
                    }
                }
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

impl Handler<PrepareSync> for SyncRunner {
    type Result = ();
    fn handle(&mut self, _: PrepareSync, ctx: &mut Self::Context) {
        let Some(worker) = self.worker.filter(|w| !w.stale) else {
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

impl Handler<UseSettings> for SyncRunner {
    type Result = ();
    fn handle(&mut self, msg: UseSettings, _: &mut Self::Context) {
        if msg.0.cgc != self.settings.cgc {
            // Another `cgc` (or other root options): probe its API again,
            // and let the worker started for the old ones go.
            self.probe = None;
            match self.worker.map(|w| w.id) {
                Some(id) if self.applying_with(id) => {
                    if let Some(worker) = self.worker.as_mut() {
                        worker.stale = true;
                    }
                }
                _ => self.drop_worker("the cgc settings changed"),
            }
        }
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
