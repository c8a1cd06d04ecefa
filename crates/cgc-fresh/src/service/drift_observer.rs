//! `DriftObserverActor`: the one mailbox through which every harness frame
//! reaches the workspace, and the owner of what was observed.
//!
//! Owns the core's `DriftObserver` sub-machine (sessions and their
//! lifetimes, edit epochs, pending paths, probes, the record — of which it
//! is the only writer), the record's store, the manifest and the walks that
//! record and compare it, and the owner-process watches. It translates
//! frames into inputs and the sub-machine's decisions into actions (start a
//! sync once its snapshot is taken, compare the tree, stop a lifetime's
//! children, persist and push the state); what the sub-machine tells the
//! scheduler and the notices goes to the `SyncSchedulerActor` and the
//! `NoticesActor`. Replies go back through the requesting connection's
//! outlet, in arrival order.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;

use actix::prelude::*;
use cgc_fresh_core::config::Settings;
use cgc_fresh_core::freshness::{
    DriftObserver, Effect, Envelope as CoreEnvelope, FlightId, FreshnessPolicy, FreshnessRecord,
    Input, ProbeId, SyncOutcome, SyncScheduler, ToNotices, ToObserver, ToScheduler, TreeChanges,
    WatcherDecline, MAX_LIVE_SESSIONS,
};
use cgc_fresh_core::manifest_diff::changed_paths;
use cgc_fresh_core::read_your_writes::{edits_pending, read_your_writes, ReadDecision};
use cgc_fresh_core::watcher::backend::BackendAnswer;
use cgc_fresh_proto::{
    ClientFrame, ConfigFrame, Envelope, ErrorCode, ErrorFrame, RequestId, ServerFrame, StateFrame,
    SyncProgress, Welcome, PROTOCOL_VERSION,
};

use super::backend_detector::{BackendDetector, DetectorSettings, ForgetBackend};
use super::mcp_route::{McpAsk, McpRequest};
use super::messages::{
    ConfigChanged, ConnId, ConnectionClosed, ConnectionOpened, Drain, FromClient, NoticesMail,
    ObserverMail, Outlet, SchedulerMail, Shutdown, ShutdownReason,
};
use super::notices::{CarriersOf, NoticesActor, PushState, Subscribe, TakeHeld, Unsubscribe};
use super::owner_watch::{self, OwnerGone};
use super::store::{FreshnessStore, Restored};
use super::sync_runner::{
    CancelRun, ForgetSession, PrepareSync, RunSync, SyncEvent, SyncReport, SyncRunner, UseSettings,
};
use super::sync_scheduler::{
    CarryOut, ObserverLink, SchedulerPolicy, SchedulerQueued, SyncNoted, SyncSchedulerActor,
};
use super::watcher_supervisor::{
    RestartWatcher, SessionBegan, SessionGone, StopWatcher, WatcherEvent, WatcherReport,
    WatcherSettings, WatcherSupervisor,
};
use crate::config_load::LoadedConfig;
use crate::manifest::{self, IndexRules, Manifest, MANIFEST_FILE, MAX_MANIFEST_FILES};
use crate::paths::ServicePaths;
use crate::process::executable::locate;
use crate::real_path;
use crate::supervisor::{LiveChildren, RootSupervisor, StopSession};

/// The actor's name in every log line.
const COMPONENT: &str = "drift_observer";

/// The most messages one batch to the scheduler or the notices holds; a
/// fuller one is sent at once. A flood of edits fills a batch per edit
/// with a few messages; left to grow for a whole turn, the batches were
/// reallocated again and again into blocks large enough that the
/// allocator's slow path cost more than handling the messages did
/// (`docs/BENCHMARKS.md`, intake instruction counts).
const MAIL_BATCH: usize = 8;

pub struct DriftObserverActor {
    workspace: PathBuf,
    config: Arc<LoadedConfig>,
    supervisor: Addr<RootSupervisor>,
    scheduler: Option<Addr<SyncSchedulerActor>>,
    notices: Option<Addr<NoticesActor>>,
    /// Whether the scheduler has a sync queued (the state's `detail`).
    scheduler_queued: bool,
    /// What the sub-machine told the scheduler and the notices this turn
    /// of the event loop, sent at its end (`flush_mail`) — or before any
    /// other message to those actors, so that the order is kept.
    scheduler_mail: Vec<ToScheduler>,
    notices_mail: Vec<ToNotices>,
    mail_flush_scheduled: bool,
    runner: Option<Addr<SyncRunner>>,
    watcher: Option<Addr<WatcherSupervisor>>,
    detector: Option<Addr<BackendDetector>>,
    /// The last backend answer, shown in the state frame.
    backend: Option<BackendAnswer>,
    machine: DriftObserver,
    store: FreshnessStore,
    /// The `instance` each connection introduced itself with.
    instances: HashMap<ConnId, String>,
    /// Fault injection for the panic-path tests (debug builds only).
    panic_on_status: bool,
    /// The record changed since the last push; a flush is queued.
    state_dirty: bool,
    flush_scheduled: bool,
    /// What the last `transition` log event said (per-edit pushes that
    /// change only the counter are logged at debug level).
    last_transition: Option<StateSummary>,
    /// Open client connections, and the idle-exit timer armed while none.
    clients: usize,
    /// Why the configured `cgc` cannot be run, while that is so: shown in
    /// every state frame so a person learns it before the first edit.
    cgc_missing: Option<String>,
    /// Which sync strategy the last sync ran, and why when it fell back
    /// (from the runner; shown in the state's `detail`).
    sync_note: Option<String>,
    /// What the running sync last reported of its progress (from the
    /// runner, which decides when: `cgc_fresh_core::sync_progress`).
    sync_progress: Option<(FlightId, SyncProgress)>,
    /// One watch per process that owns a live lifetime (`owner_pid`).
    owner_watches: HashMap<u32, tokio::task::JoinHandle<()>>,
    /// Owners of lifetimes opened by the last input, watched after it.
    owners_to_watch: Vec<u32>,
    idle_timer: Option<SpawnHandle>,
    lifecycle: Recipient<Shutdown>,
    /// The manifest of the last successful sync (`manifest.rs`), and where
    /// it is kept.
    manifest: Option<Arc<Manifest>>,
    manifest_file: PathBuf,
    /// The snapshot of the sync decided last, committed if it succeeds.
    snapshot: Option<Snapshot>,
    /// The sync waiting for its snapshot before the runner is told.
    pending_run: Option<PendingRun>,
    /// Syncs decided by the last input, with their walks' start times.
    snapshots_to_take: Vec<(FlightId, i64)>,
    /// CGC's indexing rules, to drop edited paths CGC does not index;
    /// loaded again after an edit of an ignore file, a comparison that
    /// found changes, and at every sync decided.
    index_rules: Option<IndexRules>,
    /// What shell commands called while a watcher runs are compared with.
    watch_reference: Option<WatchReference>,
    /// Probes waiting for a comparison, and whether one runs.
    probes_waiting: Vec<ProbeId>,
    /// MCP tool calls waiting for the graph to cover the edits seen
    /// (read-your-writes, `cgc_fresh_core::read_your_writes`), and the
    /// clock their times are read on.
    mcp_waiting: Vec<WaitingMcpCall>,
    /// The last sync that succeeded: the one a waiting MCP call caught up
    /// with, named in its log line.
    last_synced: Option<FlightId>,
    mcp_clock: std::time::Instant,
    comparing: bool,
    home: PathBuf,
}

/// The walk recorded for a sync, from its decision until it ends.
struct Snapshot {
    flight: FlightId,
    state: SnapshotState,
}

/// A sync decided but not yet handed to the runner: it waits for its
/// snapshot, which says what else changed.
struct PendingRun {
    run: RunSync,
    cancelled: bool,
}

/// The tree as it was when the first shell command still open was called
/// while a watcher ran. Such a command's changes are found against it, not
/// against the manifest of the last sync: the watcher has applied what
/// changed since that sync, and would never report those files again.
/// Dropped once no shell command is open.
enum WatchReference {
    Taking,
    Ready(Arc<Manifest>),
    Failed,
}

enum SnapshotState {
    /// The walk runs; `commit`: the sync already succeeded.
    Taking {
        commit: bool,
    },
    Ready(Arc<Manifest>),
}

type StateSummary = (
    cgc_fresh_proto::FreshnessStatus,
    Option<u64>,
    Option<u64>,
    Option<String>,
    bool,
);

use super::clock::now;

fn policy(settings: &Settings, workspace: &std::path::Path) -> FreshnessPolicy {
    FreshnessPolicy {
        auto_sync: settings.freshness.auto_sync,
        max_syncs_per_session: settings.freshness.max_syncs_per_session,
        max_incremental_syncs_per_session: settings.freshness.max_incremental_syncs_per_session,
        incremental_strategy: matches!(
            settings.cgc.sync_strategy,
            cgc_fresh_core::config::SyncStrategy::Incremental
        ),
        batch_ms: settings.freshness.batch_ms,
        settle_ms: settings.freshness.settle_ms,
        min_sync_gap_ms: settings.freshness.min_sync_gap_ms,
        watcher_apply_ms: settings.freshness.watcher_apply_ms,
        modifying_tools: settings.freshness.modifying_tools.clone(),
        shell_tools: settings.freshness.shell_tools.clone(),
        workspace_root: workspace.display().to_string(),
    }
}

impl DriftObserverActor {
    pub fn new(
        paths: &ServicePaths,
        config: Arc<LoadedConfig>,
        supervisor: Addr<RootSupervisor>,
        lifecycle: Recipient<Shutdown>,
    ) -> Self {
        let store = FreshnessStore::new(paths.state_dir.clone(), paths.state_file.clone());
        let restored = match store.load() {
            Restored::Found(record) => {
                tracing::info!(component = COMPONENT, event = "state_restored", path = %paths.state_file.display(), status = ?record.status);
                Some(record)
            }
            Restored::Missing => None,
            Restored::Unreadable(problem) => {
                tracing::warn!(component = COMPONENT, event = "state_unreadable", path = %paths.state_file.display(), problem = %problem);
                None
            }
        };
        let machine =
            DriftObserver::new(policy(&config.settings, &paths.workspace), restored, now());
        let manifest_file = paths.state_dir.join(MANIFEST_FILE);
        let manifest = manifest::load(&manifest_file).map(Arc::new);
        DriftObserverActor {
            workspace: paths.workspace.clone(),
            config,
            supervisor,
            scheduler: None,
            notices: None,
            scheduler_queued: false,
            scheduler_mail: Vec::new(),
            notices_mail: Vec::new(),
            mail_flush_scheduled: false,
            runner: None,
            watcher: None,
            detector: None,
            backend: None,
            machine,
            store,
            instances: HashMap::new(),
            panic_on_status: cfg!(debug_assertions)
                && std::env::var_os("CGC_FRESH_FAULT_PANIC_ON_STATUS").is_some(),
            state_dirty: false,
            flush_scheduled: false,
            last_transition: None,
            clients: 0,
            cgc_missing: None,
            sync_note: None,
            sync_progress: None,
            owner_watches: HashMap::new(),
            owners_to_watch: Vec::new(),
            idle_timer: None,
            lifecycle,
            manifest,
            manifest_file,
            snapshot: None,
            pending_run: None,
            snapshots_to_take: Vec::new(),
            index_rules: None,
            watch_reference: None,
            probes_waiting: Vec::new(),
            mcp_waiting: Vec::new(),
            last_synced: None,
            mcp_clock: std::time::Instant::now(),
            comparing: false,
            home: crate::paths::home_dir(),
        }
    }

    fn state_frame(&self) -> StateFrame {
        let mut frame = self.machine.state_frame(self.scheduler_queued);
        if let Some(note) = &self.sync_note {
            frame.detail = Some(match frame.detail.take() {
                Some(detail) => format!("{detail}; {note}"),
                None => note.clone(),
            });
        }
        frame.backend = self.backend.as_ref().map(BackendAnswer::facts);
        if let Some(failure) = self.store.failure() {
            if frame.last_error.is_none() {
                frame.last_error = Some(failure.to_string());
            }
        }
        frame.warnings.extend(self.cgc_missing.iter().cloned());
        // Only the running sync's progress, and only while it runs.
        frame.progress = self
            .sync_progress
            .as_ref()
            .filter(|(flight, _)| frame.syncing && self.machine.current_flight() == Some(*flight))
            .map(|(_, progress)| progress.clone());
        frame
    }

    /// Watches `pid`, the owner of a live lifetime, unless it is watched.
    fn watch_owner(&mut self, pid: u32, ctx: &mut Context<Self>) {
        if self.owner_watches.contains_key(&pid) {
            return;
        }
        match owner_watch::watch(pid, ctx.address().recipient()) {
            Ok(task) => {
                tracing::info!(
                    component = COMPONENT,
                    event = "owner_watched",
                    owner_pid = pid
                );
                self.owner_watches.insert(pid, task);
            }
            // Gone between the check and the watch: it ended already.
            Err(error) => {
                tracing::info!(component = COMPONENT, event = "owner_gone", owner_pid = pid, error = %error);
                ctx.address().do_send(OwnerGone { pid });
            }
        }
    }

    /// Drops the watches of processes that own no live lifetime any more.
    fn unwatch_unowned(&mut self) {
        let machine = &self.machine;
        self.owner_watches.retain(|pid, task| {
            let keep = machine.owns_any(*pid);
            if !keep {
                task.abort();
            }
            keep
        });
    }

    /// Looks for the configured `cgc` the way a spawn will; logs when that
    /// changes. Run at start, on a configuration change and on `status`.
    fn check_cgc_executable(&mut self) {
        let executable = &self.config.settings.cgc.executable;
        let search_path = std::env::var_os("PATH");
        let missing = locate(executable, search_path.as_deref(), &self.workspace).err();
        if missing != self.cgc_missing {
            match &missing {
                Some(problem) => {
                    tracing::warn!(component = COMPONENT, event = "cgc_not_found", executable = %executable, problem = %problem)
                }
                None => {
                    tracing::info!(component = COMPONENT, event = "cgc_found", executable = %executable)
                }
            }
            self.cgc_missing = missing;
        }
    }

    fn config_frame(&self) -> ConfigFrame {
        ConfigFrame {
            values: self.config.render_json(),
            warnings: self.config.warning_texts(),
        }
    }

    /// Feeds one input to the sub-machine and carries out what it decides.
    fn apply(&mut self, input: Input, ctx: &mut Context<Self>) {
        self.deliver(ToObserver::Input(input), ctx);
    }

    /// Hands `message` to the sub-machine; sends what it tells the
    /// scheduler and the notices to their actors, and carries out its
    /// decisions for the shell.
    fn deliver(&mut self, message: ToObserver, ctx: &mut Context<Self>) {
        // The input first, then what it made the machine tell the observer
        // (last first); `next` spares a frame's intake an allocation for the
        // usual case of no follow-up.
        let mut next = Some(message);
        let mut queue = Vec::new();
        loop {
            while let Some(message) = next.take().or_else(|| queue.pop()) {
                tracing::debug!(component = COMPONENT, event = "freshness_input", input = ?message);
                // A start may add a carrier to its name's lifetime; the
                // notices actor drops closed connections and ended
                // lifetimes itself.
                let started = match &message {
                    ToObserver::Input(Input::SessionStarted { session, .. }) => {
                        Some(session.clone())
                    }
                    _ => None,
                };
                let before = self.machine.record().clone();
                let sent = self.machine.handle(now(), message);
                self.machine.refresh_pending();
                if *self.machine.record() != before {
                    self.state_dirty = true;
                }
                // Before the offers that follow from it: a notice counts
                // on the connections that carry its lifetime now.
                if let Some(name) = started {
                    self.send_carriers(&name);
                }
                for envelope in sent {
                    match envelope {
                        CoreEnvelope::Shell(effect) => self.carry_out(effect),
                        CoreEnvelope::Scheduler(message) => self.scheduler_mail.push(message),
                        CoreEnvelope::Notices(message) => self.notices_mail.push(message),
                        CoreEnvelope::Observer(message) => queue.push(message),
                    }
                }
                if self.scheduler_mail.len() >= MAIL_BATCH || self.notices_mail.len() >= MAIL_BATCH
                {
                    self.send_mail();
                }
            }
            for (flight, taken_at) in std::mem::take(&mut self.snapshots_to_take) {
                self.take_snapshot(flight, taken_at, ctx);
            }
            queue.extend(self.compare_probes(ctx).into_iter().map(ToObserver::Input));
            if queue.is_empty() {
                break;
            }
        }
        for pid in std::mem::take(&mut self.owners_to_watch) {
            self.watch_owner(pid, ctx);
        }
        self.schedule_mail_flush(ctx);
        self.schedule_state_flush(ctx);
    }

    fn schedule_mail_flush(&mut self, ctx: &mut Context<Self>) {
        if self.mail_flush_scheduled
            || (self.scheduler_mail.is_empty() && self.notices_mail.is_empty())
        {
            return;
        }
        self.mail_flush_scheduled = true;
        ctx.spawn(actix::fut::ready(()).map(|_, act: &mut Self, _| act.flush_mail()));
    }

    /// Sends what the scheduler and the notices were told since the last
    /// flush, one message each.
    fn flush_mail(&mut self) {
        self.mail_flush_scheduled = false;
        self.send_mail();
    }

    /// Sends both batches, the scheduler's first, as a flush does (a flush
    /// still scheduled sends whatever follows). Each new batch is made
    /// room for [`MAIL_BATCH`] messages at once.
    fn send_mail(&mut self) {
        if !self.scheduler_mail.is_empty() {
            let mail = std::mem::replace(&mut self.scheduler_mail, Vec::with_capacity(MAIL_BATCH));
            if let Some(scheduler) = &self.scheduler {
                scheduler.do_send(SchedulerMail(mail));
            }
        }
        if !self.notices_mail.is_empty() {
            let mail = std::mem::replace(&mut self.notices_mail, Vec::with_capacity(MAIL_BATCH));
            if let Some(notices) = &self.notices {
                notices.do_send(NoticesMail(mail));
            }
        }
    }

    /// Tells the notices actor which connections carry the live lifetime
    /// of session `name`.
    fn send_carriers(&mut self, name: &str) {
        let Some(session) = self.machine.current_lifetime(name) else {
            return;
        };
        let carriers = self.machine.carriers(&session);
        self.flush_mail();
        if let Some(notices) = &self.notices {
            notices.do_send(CarriersOf { session, carriers });
        }
    }

    fn carry_out(&mut self, effect: Effect) {
        match effect {
            Effect::StartSync {
                flight,
                session,
                manual,
                allowance,
            } => {
                tracing::info!(
                    component = COMPONENT,
                    // The scheduler logged the decision; this is its start.
                    event = "sync_starting",
                    flight = flight.0,
                    session = session.as_ref().map(tracing::field::display),
                    manual,
                    may_spawn = ?allowance
                );
                // What CGC indexes may have changed unseen: read anew.
                self.index_rules = None;
                // The snapshot's clock starts now, before the runner can
                // spawn anything (`manifest.rs`, "Snapshot rule").
                self.snapshots_to_take
                    .push((flight, manifest::walk_start_ns()));
                // The runner is told once the snapshot is taken: the files
                // a sync applies are the reported ones and whatever else the
                // tree says changed since the last successful sync.
                self.pending_run = Some(PendingRun {
                    run: RunSync {
                        flight,
                        session,
                        paths: self.machine.flight_paths(flight),
                        allowance,
                    },
                    cancelled: false,
                });
            }
            Effect::WarmWorker => {
                tracing::debug!(
                    component = COMPONENT,
                    event = "decision",
                    decision = "warm_worker",
                    manifest = self.manifest.is_some()
                );
                if let Some(runner) = &self.runner {
                    runner.do_send(super::sync_runner::WarmUp);
                }
            }
            Effect::PrepareSync => {
                tracing::debug!(
                    component = COMPONENT,
                    event = "decision",
                    decision = "prepare_sync"
                );
                if let Some(runner) = &self.runner {
                    runner.do_send(PrepareSync);
                }
            }
            Effect::ProbeWorkspace { probe } => {
                tracing::debug!(
                    component = COMPONENT,
                    event = "decision",
                    decision = "probe_workspace",
                    probe = probe.get()
                );
                self.probes_waiting.push(probe);
            }
            Effect::CancelSync { flight } => {
                tracing::info!(
                    component = COMPONENT,
                    event = "sync_cancelling",
                    flight = flight.0
                );
                match self.pending_run.as_mut() {
                    // Not yet told to run: it is told to run and to stop,
                    // so that it answers with the flight's one terminal
                    // report, as every started flight must.
                    Some(pending) if pending.run.flight == flight => pending.cancelled = true,
                    _ => {
                        if let Some(runner) = &self.runner {
                            runner.do_send(CancelRun { flight });
                        }
                    }
                }
            }
            // Offered, pushed and counted by the notices actor.
            Effect::Notice { .. } => {
                tracing::warn!(component = COMPONENT, event = "unrouted", effect = ?effect)
            }
            Effect::SessionOpened {
                session,
                reattached,
            } => {
                let event = if reattached {
                    "session_reattached"
                } else {
                    "session_opened"
                };
                tracing::info!(component = COMPONENT, event, session = %session);
                if let Some(pid) = self.machine.owner(&session) {
                    self.owners_to_watch.push(pid);
                }
                if self.machine.watcher_attempt_allowed(&session) {
                    if let Some(watcher) = &self.watcher {
                        watcher.do_send(SessionBegan { session });
                    }
                }
            }
            Effect::SessionClosed { session, detached } => {
                let event = if detached {
                    "session_detached"
                } else {
                    "session_closed"
                };
                tracing::info!(component = COMPONENT, event, session = %session);
                self.unwatch_unowned();
                // The same cleanup on every path: children, consent,
                // watcher and backend answers of this lifetime.
                self.supervisor.do_send(StopSession {
                    session: session.clone(),
                });
                if let Some(runner) = &self.runner {
                    runner.do_send(ForgetSession(session.clone()));
                }
                if let Some(detector) = &self.detector {
                    detector.do_send(ForgetBackend(session.clone()));
                }
                if let Some(watcher) = &self.watcher {
                    watcher.do_send(SessionGone { session });
                }
            }
            Effect::RestartWatcher { session, pid } => {
                tracing::info!(component = COMPONENT, event = "decision", decision = "restart_watcher", session = %session, pid);
                if let Some(watcher) = &self.watcher {
                    watcher.do_send(RestartWatcher { session, pid });
                }
            }
            Effect::StopWatcher { session, pid } => {
                tracing::info!(component = COMPONENT, event = "decision", decision = "stop_watcher", session = %session, pid);
                if let Some(watcher) = &self.watcher {
                    watcher.do_send(StopWatcher { session, pid });
                }
            }
            Effect::RecordChanged => self.state_dirty = true,
        }
    }

    /// Persists and pushes the state once per turn of the event loop, not
    /// once per input: a burst of edits (one `edit_epoch` step each) costs
    /// one encoded frame per subscriber, and a `status` request always
    /// reads the current state anyway.
    fn schedule_state_flush(&mut self, ctx: &mut Context<Self>) {
        if self.state_dirty && !self.flush_scheduled {
            self.flush_scheduled = true;
            ctx.spawn(actix::fut::ready(()).map(|_, act: &mut Self, ctx| {
                act.flush_state();
                act.release_mcp_calls(ctx);
            }));
        }
    }

    fn flush_state(&mut self) {
        self.flush_scheduled = false;
        if !std::mem::take(&mut self.state_dirty) {
            return;
        }
        self.store.save(self.machine.record());
        let state = self.state_frame();
        let summary = (
            state.status,
            state.stale_since,
            state.last_synced_at,
            state.last_error.clone(),
            state.syncing,
        );
        if self.last_transition.as_ref() != Some(&summary) {
            tracing::info!(
                component = COMPONENT,
                event = "transition",
                status = state.status.as_str(),
                stale_since = state.stale_since,
                last_synced_at = state.last_synced_at,
                edit_epoch = state.edit_epoch,
                syncing = state.syncing,
                last_error = state.last_error.as_deref(),
            );
            self.last_transition = Some(summary);
        } else {
            tracing::debug!(
                component = COMPONENT,
                event = "state_pushed",
                edit_epoch = state.edit_epoch
            );
        }
        self.flush_mail();
        if let Some(notices) = &self.notices {
            notices.do_send(PushState(Envelope::new(ServerFrame::State(state))));
        }
    }

    /// Walks the tree for sync `flight` on the blocking pool; the result is
    /// kept for the sync's success (`SyncReport`).
    fn take_snapshot(&mut self, flight: FlightId, taken_at: i64, ctx: &mut Context<Self>) {
        self.snapshot = Some(Snapshot {
            flight,
            state: SnapshotState::Taking { commit: false },
        });
        let root = self.workspace.clone();
        let walk = tokio::task::spawn_blocking(move || {
            manifest::timed(|| manifest::snapshot(&root, taken_at, MAX_MANIFEST_FILES))
        });
        ctx.spawn(
            actix::fut::wrap_future::<_, Self>(walk).map(move |joined, act, _| {
                let taken_manifest = match &joined {
                    Ok((Ok(taken), _)) => Some(taken.clone()),
                    _ => None,
                };
                act.dispatch_run(flight, taken_manifest.as_ref());
                let Some(snapshot) = act.snapshot.as_mut().filter(|s| s.flight == flight) else {
                    return;
                };
                match joined {
                    Ok((Ok(taken), ms)) => {
                        let files = match &taken {
                            Manifest::Recorded(recorded) => Some(recorded.files.len()),
                            Manifest::TooLarge { .. } => None,
                        };
                        tracing::info!(component = COMPONENT, event = "manifest_snapshot", flight = flight.0, files, too_large = files.is_none(), ms = ms as u64);
                        let taken = Arc::new(taken);
                        match snapshot.state {
                            SnapshotState::Taking { commit: true } => {
                                act.snapshot = None;
                                act.commit_manifest(taken);
                            }
                            _ => snapshot.state = SnapshotState::Ready(taken),
                        }
                    }
                    Ok((Err(error), _)) => {
                        tracing::warn!(component = COMPONENT, event = "manifest_snapshot_failed", flight = flight.0, error = %error);
                        act.snapshot = None;
                    }
                    Err(error) => {
                        tracing::warn!(component = COMPONENT, event = "manifest_snapshot_failed", flight = flight.0, error = %error);
                        act.snapshot = None;
                    }
                }
            }),
        );
    }

    /// Hands sync `flight` to the runner once its snapshot is `taken`
    /// (`None`: the walk failed). Its files: the reported paths and what
    /// changed between the manifest and the snapshot; the whole workspace
    /// when either is unknown (no manifest yet, a tree too large, a failed
    /// walk, a path-less edit).
    fn dispatch_run(&mut self, flight: FlightId, taken: Option<&Manifest>) {
        let Some(pending) = self.pending_run.take_if(|p| p.run.flight == flight) else {
            return;
        };
        let PendingRun { mut run, cancelled } = pending;
        let unreported = match (self.manifest.as_deref(), taken) {
            (Some(Manifest::Recorded(before)), Some(Manifest::Recorded(now))) => {
                Some(changed_paths(before, &now.files))
            }
            _ => None,
        };
        run.paths = match (run.paths.take(), unreported) {
            (Some(mut reported), Some(unreported)) => {
                tracing::info!(
                    component = COMPONENT,
                    event = "sync_files",
                    flight = flight.0,
                    reported = reported.len(),
                    unreported = unreported.len()
                );
                reported.extend(unreported);
                reported.sort();
                reported.dedup();
                Some(reported)
            }
            _ => None,
        };
        if let Some(runner) = &self.runner {
            runner.do_send(run);
            if cancelled {
                runner.do_send(CancelRun { flight });
            }
        }
    }

    /// A sync ended: its snapshot becomes the manifest if it succeeded
    /// (now, or when the walk is done), else it is dropped.
    fn sync_ended(&mut self, flight: FlightId, succeeded: bool) {
        if succeeded {
            self.last_synced = Some(flight);
        }
        let Some(snapshot) = self.snapshot.as_mut().filter(|s| s.flight == flight) else {
            return;
        };
        if !succeeded {
            self.snapshot = None;
            return;
        }
        match &snapshot.state {
            SnapshotState::Taking { .. } => {
                snapshot.state = SnapshotState::Taking { commit: true };
            }
            SnapshotState::Ready(taken) => {
                let taken = taken.clone();
                self.snapshot = None;
                self.commit_manifest(taken);
            }
        }
    }

    /// `taken` describes the graph from now on; written to disk off the
    /// actor's thread.
    fn commit_manifest(&mut self, taken: Arc<Manifest>) {
        self.manifest = Some(taken.clone());
        let file = self.manifest_file.clone();
        tokio::task::spawn_blocking(move || match manifest::save(&file, &taken) {
            Ok(()) => {
                tracing::info!(component = COMPONENT, event = "manifest_written", path = %file.display())
            }
            Err(error) => {
                tracing::warn!(component = COMPONENT, event = "manifest_write_failed", error = %error)
            }
        });
    }

    /// Starts one comparison for every waiting probe, unless one runs. The
    /// reference is the running sync's snapshot once taken (what changed
    /// after its start), else the manifest. Without a usable reference the
    /// answer is "whole workspace" at once: those inputs are returned.
    fn compare_probes(&mut self, ctx: &mut Context<Self>) -> Vec<Input> {
        if self.comparing || self.probes_waiting.is_empty() {
            return Vec::new();
        }
        let running = self.machine.current_flight();
        let reference = match (&self.watch_reference, &self.snapshot) {
            // Its walk ends by calling this again.
            (Some(WatchReference::Taking), _) => return Vec::new(),
            (Some(WatchReference::Ready(taken)), _) => Some(taken.clone()),
            (Some(WatchReference::Failed), _) => None,
            (
                None,
                Some(Snapshot {
                    flight,
                    state: SnapshotState::Ready(taken),
                }),
            ) if Some(*flight) == running => Some(taken.clone()),
            (None, _) => self.manifest.clone(),
        };
        let batch = std::mem::take(&mut self.probes_waiting);
        if matches!(self.watch_reference, Some(WatchReference::Failed)) {
            // Answered below; the next command under the watcher tries anew.
            self.watch_reference = None;
        }
        let Some(reference) = reference.filter(|m| matches!(**m, Manifest::Recorded(_))) else {
            tracing::info!(
                component = COMPONENT,
                event = "shell_compared",
                probes = batch.len(),
                whole_workspace = true,
                reason = "no manifest"
            );
            return answers(batch, TreeChanges::WholeWorkspace);
        };
        self.comparing = true;
        let root = self.workspace.clone();
        let walk = tokio::task::spawn_blocking(move || {
            manifest::timed(|| manifest::compare(&root, &reference, MAX_MANIFEST_FILES))
        });
        ctx.spawn(
            actix::fut::wrap_future::<_, Self>(walk).map(move |joined, act, ctx| {
                act.comparing = false;
                // A shell command may have changed an ignore file.
                act.index_rules = None;
                let changes = match joined {
                    Ok((Some(paths), ms)) => {
                        tracing::info!(component = COMPONENT, event = "shell_compared", probes = batch.len(), changed = paths.len(), ms = ms as u64, paths = ?paths.iter().take(8).collect::<Vec<_>>());
                        if paths.is_empty() {
                            TreeChanges::Unchanged
                        } else {
                            TreeChanges::Paths(paths)
                        }
                    }
                    Ok((None, ms)) => {
                        tracing::info!(component = COMPONENT, event = "shell_compared", probes = batch.len(), whole_workspace = true, ms = ms as u64);
                        TreeChanges::WholeWorkspace
                    }
                    Err(error) => {
                        tracing::warn!(component = COMPONENT, event = "shell_compare_failed", error = %error);
                        TreeChanges::WholeWorkspace
                    }
                };
                let mut inputs = answers(batch, changes).into_iter();
                if let Some(first) = inputs.next() {
                    act.apply(first, ctx);
                }
                for input in inputs {
                    act.apply(input, ctx);
                }
                if !act.machine.shell_commands_open() {
                    act.watch_reference = None;
                }
            }),
        );
        Vec::new()
    }

    /// A shell command is called: while a watcher runs, the tree as it is
    /// now is what the command's changes are found against (unless an
    /// open command's reference is kept already). Walked on the blocking
    /// pool; comparisons waiting for it start when it is in.
    fn take_watch_reference(&mut self, ctx: &mut Context<Self>) {
        if self.watch_reference.is_some() || !self.machine.watcher_takes_edits() {
            return;
        }
        self.watch_reference = Some(WatchReference::Taking);
        let root = self.workspace.clone();
        let taken_at = manifest::walk_start_ns();
        let walk = tokio::task::spawn_blocking(move || {
            manifest::timed(|| manifest::snapshot(&root, taken_at, MAX_MANIFEST_FILES))
        });
        ctx.spawn(
            actix::fut::wrap_future::<_, Self>(walk).map(move |joined, act, ctx| {
                if !matches!(act.watch_reference, Some(WatchReference::Taking)) {
                    return;
                }
                act.watch_reference = Some(match joined {
                    Ok((Ok(taken @ Manifest::Recorded(_)), ms)) => {
                        tracing::info!(component = COMPONENT, event = "watch_reference_taken", ms = ms as u64);
                        WatchReference::Ready(Arc::new(taken))
                    }
                    Ok((Ok(Manifest::TooLarge { .. }), _)) => WatchReference::Failed,
                    Ok((Err(error), _)) => {
                        tracing::warn!(component = COMPONENT, event = "watch_reference_failed", error = %error);
                        WatchReference::Failed
                    }
                    Err(error) => {
                        tracing::warn!(component = COMPONENT, event = "watch_reference_failed", error = %error);
                        WatchReference::Failed
                    }
                });
                for input in act.compare_probes(ctx) {
                    act.apply(input, ctx);
                }
                act.schedule_state_flush(ctx);
            }),
        );
    }

    /// `session_shutdown`: the lifetime ends; its cleanup follows from the
    /// machine's `SessionClosed`.
    fn end_session(&mut self, session: String, ctx: &mut Context<Self>) {
        self.apply(Input::SessionEnded { session }, ctx);
    }
}

/// The answers for `probes`: the first carries `changes` (one comparison,
/// one edit), the others "unchanged" — their commands are covered by it.
fn answers(probes: Vec<ProbeId>, changes: TreeChanges) -> Vec<Input> {
    probes
        .into_iter()
        .enumerate()
        .map(|(n, probe)| Input::ProbeAnswered {
            probe,
            changes: if n == 0 {
                changes.clone()
            } else {
                TreeChanges::Unchanged
            },
        })
        .collect()
}

/// Replies go through the connection's outlet, which counts their bytes
/// against its bound (`outbox.rs`); the connection stops reading requests
/// while it is over, so replies cannot pile up.
fn reply(to: &Outlet, id: Option<RequestId>, frame: ServerFrame) {
    to.reply(&Envelope::with_id(id, frame));
}

/// Events answer only when the client asked (gave an `id`), so a harness can
/// pipeline them without reading acknowledgements.
fn ack_if_asked(to: &Outlet, id: Option<RequestId>) {
    if id.is_some() {
        reply(to, id, ServerFrame::Ack);
    }
}

impl Actor for DriftObserverActor {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Self::Context) {
        let notices = NoticesActor::new(&self.machine.policy().workspace_root).start();
        let record: &FreshnessRecord = self.machine.record();
        let scheduler = SyncScheduler::new(
            self.machine.policy().clone(),
            record.sync_generation,
            record.edit_epoch,
            // Work pending in a restored record: the next lifetime pays.
            !record.pending.is_empty(),
            now(),
        );
        let me = ctx.address();
        let link = ObserverLink {
            mail: me.clone().recipient(),
            carry_out: me.clone().recipient(),
            queued: me.clone().recipient(),
            noted: me.recipient(),
        };
        let scheduler = SyncSchedulerActor::new(scheduler, link, notices.clone()).start();
        let runner = SyncRunner::new(
            self.workspace.clone(),
            self.config.settings.clone(),
            self.supervisor.clone(),
            scheduler.clone().recipient(),
        )
        .start();
        self.notices = Some(notices);
        self.scheduler = Some(scheduler);
        self.runner = Some(runner);
        let detector =
            BackendDetector::new(self.config.settings.clone(), self.supervisor.clone()).start();
        let watcher = WatcherSupervisor::new(
            self.workspace.clone(),
            self.config.settings.clone(),
            self.supervisor.clone(),
            detector.clone(),
            ctx.address().recipient(),
        )
        .start();
        self.detector = Some(detector);
        self.watcher = Some(watcher);
        self.check_cgc_executable();
        // The restored record (now `unknown`) is what the disk should say.
        self.store.save(self.machine.record());
    }
}

impl Handler<FromClient> for DriftObserverActor {
    type Result = ();

    fn handle(&mut self, msg: FromClient, ctx: &mut Self::Context) {
        let FromClient {
            conn,
            peer,
            id,
            frame,
            reply_to,
            // Counted against the connection's in-flight limit until the
            // end of this handler (after its reply is counted).
            in_flight: _in_flight,
        } = msg;
        match frame {
            ClientFrame::Hello(hello) => {
                tracing::info!(component = COMPONENT, event = "hello", conn, peer_pid = peer.pid, client = %hello.client, instance = %hello.instance);
                self.instances.insert(conn, hello.instance);
                reply(
                    &reply_to,
                    id,
                    ServerFrame::Welcome(Welcome {
                        protocol: PROTOCOL_VERSION,
                        service_version: env!("CARGO_PKG_VERSION").to_string(),
                        pid: std::process::id(),
                        workspace: self.workspace.display().to_string(),
                    }),
                );
            }
            ClientFrame::Status => {
                if self.panic_on_status {
                    panic!("fault injection: CGC_FRESH_FAULT_PANIC_ON_STATUS");
                }
                // Fault injection (debug builds only): wedge the event loop,
                // for the last-resort stop (`last_resort.rs`) to be tested.
                if cfg!(debug_assertions)
                    && std::env::var_os("CGC_FRESH_FAULT_WEDGE_ON_STATUS").is_some()
                {
                    loop {
                        std::thread::sleep(std::time::Duration::from_secs(3600));
                    }
                }
                self.check_cgc_executable();
                reply(&reply_to, id, ServerFrame::State(self.state_frame()))
            }
            ClientFrame::Config => reply(&reply_to, id, ServerFrame::Config(self.config_frame())),
            ClientFrame::McpTools => {
                tracing::info!(component = COMPONENT, event = "mcp_tools_requested", conn);
                self.forward_mcp(McpAsk::Tools, reply_to, id);
            }
            ClientFrame::McpCall(call) => {
                let arrived_ms = self.mcp_now_ms();
                tracing::info!(component = COMPONENT, event = "mcp_call_received", conn, tool = %call.name);
                if self.mcp_waiting.len() >= super::mcp_route::MAX_WAITING_MCP_REQUESTS {
                    // Bounded memory whatever a client sends: answered at
                    // once, nothing kept.
                    tracing::warn!(
                        component = COMPONENT,
                        event = "mcp_call_refused",
                        conn,
                        reason = "too many waiting"
                    );
                    reply(
                        &reply_to,
                        id,
                        ServerFrame::Mcp(super::mcp_route::internal_error(format!(
                            "{} requests already wait for the graph; try again",
                            super::mcp_route::MAX_WAITING_MCP_REQUESTS
                        ))),
                    );
                    return;
                }
                self.mcp_waiting.push(WaitingMcpCall {
                    ask: McpAsk::Call {
                        name: call.name,
                        arguments: call.arguments,
                    },
                    reply_to,
                    id,
                    arrived_ms,
                    deadline_set: false,
                });
                self.release_mcp_calls(ctx);
            }
            ClientFrame::Subscribe => {
                self.flush_mail();
                if let Some(notices) = &self.notices {
                    notices.do_send(Subscribe(reply_to.clone()));
                }
                ack_if_asked(&reply_to, id);
                // A new subscriber sees where things stand right away.
                reply(&reply_to, None, ServerFrame::State(self.state_frame()));
            }
            ClientFrame::Sync => {
                ack_if_asked(&reply_to, id);
                tracing::info!(
                    component = COMPONENT,
                    event = "sync_requested",
                    conn,
                    peer_pid = peer.pid
                );
                self.apply(Input::SyncRequested { session: None }, ctx);
            }
            ClientFrame::SessionStart(start) => {
                let instance = self
                    .instances
                    .get(&conn)
                    .cloned()
                    .unwrap_or_else(|| format!("conn-{conn}"));
                if !self.machine.admits_session(&start.session, &instance) {
                    // Said even without an `id`: the harness must learn
                    // that this session is not observed as its own.
                    tracing::warn!(component = COMPONENT, event = "session_refused", conn, session = %start.session, live = MAX_LIVE_SESSIONS);
                    reply(
                        &reply_to,
                        id,
                        ServerFrame::Error(ErrorFrame::new(
                            ErrorCode::Unavailable,
                            format!(
                                "{MAX_LIVE_SESSIONS} sessions are live in this workspace; \
                                 end one (session_shutdown) before starting another. \
                                 Edits reported under this session still mark the graph \
                                 possibly stale."
                            ),
                        )),
                    );
                    return;
                }
                if let Some(pid) = start.owner_pid {
                    if !owner_watch::exists(pid) {
                        tracing::warn!(component = COMPONENT, event = "owner_refused", conn, session = %start.session, owner_pid = pid);
                        reply(
                            &reply_to,
                            id,
                            ServerFrame::Error(ErrorFrame {
                                field: Some("owner_pid".into()),
                                ..ErrorFrame::new(
                                    ErrorCode::BadRequest,
                                    format!("owner_pid {pid} is not a running process"),
                                )
                            }),
                        );
                        return;
                    }
                }
                ack_if_asked(&reply_to, id);
                tracing::info!(component = COMPONENT, event = "session_start", conn, session = %start.session, instance = %instance, reason = ?start.reason);
                // A watcher attempt follows from the machine's
                // `SessionOpened`, for a new or a re-attached lifetime.
                self.apply(
                    Input::SessionStarted {
                        session: start.session,
                        instance,
                        reason: start.reason,
                        connection: Some(conn),
                        owner: start.owner_pid,
                    },
                    ctx,
                );
            }
            ClientFrame::ToolCall(call) => {
                if self.machine.policy().is_shell(&call.tool) {
                    self.take_watch_reference(ctx);
                }
                self.ack_session_event(
                    &reply_to,
                    id,
                    &call.session,
                    "the edit still marks the graph possibly stale, but no sync follows for it",
                );
                tracing::debug!(component = COMPONENT, event = "tool_call", session = %call.session, tool = %call.tool, paths = call.paths.len());
                // Paths as the file system names them: a symlinked or
                // `~`-relative path inside the workspace counts.
                let (paths, not_indexed) = if self.machine.policy().is_modifying(&call.tool) {
                    let resolved = real_path::resolve_all(call.paths, &self.workspace, &self.home);
                    self.drop_not_indexed(resolved)
                } else {
                    (call.paths, 0)
                };
                self.apply(
                    Input::ToolCall {
                        session: call.session,
                        tool: call.tool,
                        paths,
                        not_indexed,
                    },
                    ctx,
                );
            }
            ClientFrame::ToolResult(result) => {
                self.ack_session_event(&reply_to, id, &result.session, "the result is ignored");
                self.apply(
                    Input::ToolResult {
                        session: result.session,
                        tool: result.tool,
                        ok: result.ok,
                    },
                    ctx,
                );
            }
            ClientFrame::SessionShutdown(shutdown) => {
                ack_if_asked(&reply_to, id);
                tracing::info!(component = COMPONENT, event = "session_shutdown", conn, session = %shutdown.session, reason = shutdown.reason.as_deref());
                self.end_session(shutdown.session, ctx);
            }
            ClientFrame::TakeNotices(take) => {
                // What this session was offered before comes first.
                self.flush_mail();
                match (self.machine.current_lifetime(&take.session), &self.notices) {
                    (Some(session), Some(notices)) => notices.do_send(TakeHeld {
                        session,
                        id,
                        reply_to,
                        in_flight: _in_flight,
                    }),
                    _ => reply(
                        &reply_to,
                        id,
                        ServerFrame::Error(ErrorFrame::new(
                            ErrorCode::UnknownSession,
                            format!("session {:?} is not live here", take.session),
                        )),
                    ),
                }
            }
        }
    }
}

/// An MCP tool call held for read-your-writes.
struct WaitingMcpCall {
    ask: McpAsk,
    reply_to: Outlet,
    id: Option<RequestId>,
    arrived_ms: u64,
    /// A wake-up at its deadline is scheduled.
    deadline_set: bool,
}

impl DriftObserverActor {
    fn mcp_now_ms(&self) -> u64 {
        self.mcp_clock.elapsed().as_millis() as u64
    }

    /// Hands an MCP request to the runner, which owns the worker that
    /// answers it; without one, an error answers it.
    fn forward_mcp(&self, ask: McpAsk, reply_to: Outlet, id: Option<RequestId>) {
        match &self.runner {
            Some(runner) => runner.do_send(McpRequest { ask, reply_to, id }),
            None => reply(
                &reply_to,
                id,
                ServerFrame::Mcp(super::mcp_route::internal_error(
                    "the service is not ready to answer MCP requests",
                )),
            ),
        }
    }

    /// Passes on every waiting MCP call the read-your-writes rule lets go
    /// now (the graph covers the edits seen, or its bound passed), logging
    /// each wait; the others are asked again at their deadline or at the
    /// next change of the state.
    fn release_mcp_calls(&mut self, ctx: &mut Context<Self>) {
        if self.mcp_waiting.is_empty() {
            return;
        }
        let frame = self.state_frame();
        let edits_pending = edits_pending(frame.status, frame.stale_since);
        let bound_ms = self.config.settings.mcp.read_your_writes_ms;
        let now_ms = self.mcp_now_ms();
        let mut keep = Vec::new();
        for mut call in std::mem::take(&mut self.mcp_waiting) {
            if !call.reply_to.is_open() {
                tracing::info!(
                    component = COMPONENT,
                    event = "mcp_call_dropped",
                    conn = call.reply_to.conn,
                    tool = call.ask.tool(),
                    reason = "its connection closed"
                );
                continue;
            }
            match read_your_writes(edits_pending, call.arrived_ms, now_ms, bound_ms) {
                ReadDecision::Answer {
                    waited_ms,
                    caught_up,
                } => {
                    tracing::info!(
                        component = COMPONENT,
                        event = "mcp_read_your_writes",
                        conn = call.reply_to.conn,
                        tool = call.ask.tool(),
                        waited_ms,
                        caught_up,
                        bound_ms,
                        // The sync the answer reflects (the last one that
                        // succeeded when the call was released).
                        sync = self.last_synced.map(|f| f.0)
                    );
                    self.forward_mcp(call.ask, call.reply_to, call.id);
                }
                ReadDecision::Wait { until_ms } => {
                    if !call.deadline_set {
                        call.deadline_set = true;
                        tracing::info!(
                            component = COMPONENT,
                            event = "mcp_call_waits",
                            conn = call.reply_to.conn,
                            tool = call.ask.tool(),
                            bound_ms,
                            reason = "edits the graph does not cover yet"
                        );
                        let after =
                            std::time::Duration::from_millis(until_ms.saturating_sub(now_ms));
                        ctx.run_later(after, |act, ctx| act.release_mcp_calls(ctx));
                    }
                    keep.push(call);
                }
            }
        }
        self.mcp_waiting = keep;
    }

    /// Drops the paths inside the workspace that CGC does not index (by
    /// the manifest's rules, `manifest::IndexRules`): an edit of such a
    /// file leaves the graph as it is, in lazy and watcher mode alike.
    /// Returns the rest and how many were dropped. Rules that cannot be
    /// read drop nothing.
    fn drop_not_indexed(&mut self, paths: Vec<String>) -> (Vec<String>, usize) {
        if self.index_rules.is_none() {
            match IndexRules::load(&self.workspace) {
                Ok(rules) => self.index_rules = Some(rules),
                Err(error) => {
                    tracing::warn!(component = COMPONENT, event = "index_rules_unreadable", error = %error);
                    return (paths, 0);
                }
            }
        }
        let Some(rules) = self.index_rules.as_mut() else {
            return (paths, 0);
        };
        let mut kept = Vec::with_capacity(paths.len());
        let mut dropped = 0;
        let mut ignore_file_edited = false;
        for path in paths {
            let given = std::path::Path::new(&path);
            ignore_file_edited |= manifest::is_ignore_file(given);
            let relative = if given.is_absolute() {
                given.strip_prefix(&self.workspace).ok()
            } else {
                Some(given)
            };
            match relative {
                Some(relative) if !rules.indexes(relative) => dropped += 1,
                _ => kept.push(path),
            }
        }
        if dropped > 0 {
            tracing::debug!(
                component = COMPONENT,
                event = "paths_not_indexed",
                dropped,
                kept = kept.len()
            );
        }
        if ignore_file_edited {
            self.index_rules = None;
        }
        (kept, dropped)
    }

    /// Acknowledges an event about `session` when asked (an `id`); when the
    /// session is not live, the reply is an `unknown_session` error saying
    /// what became of the event (`consequence`) instead of a bare `ack`.
    fn ack_session_event(
        &self,
        reply_to: &Outlet,
        id: Option<RequestId>,
        session: &str,
        consequence: &str,
    ) {
        if id.is_none() {
            return;
        }
        if self.machine.is_live(session) {
            return reply(reply_to, id, ServerFrame::Ack);
        }
        tracing::info!(component = COMPONENT, event = "unknown_session", session = %session);
        reply(
            reply_to,
            id,
            ServerFrame::Error(ErrorFrame::new(
                ErrorCode::UnknownSession,
                format!(
                    "session {session:?} is not live here (never started, or ended): \
                     {consequence}; send session_start first, on a connection that stays open"
                ),
            )),
        );
    }

    /// Idle exit (`service.idleExitMs` > 0): a one-shot timer armed when the
    /// last client leaves, never a periodic tick. When it fires with still
    /// no client, no sync and no child, the service stops; the record is on
    /// disk and socket activation starts it again on the next connection.
    fn arm_idle_exit(&mut self, ctx: &mut Context<Self>) {
        let Some(idle) = self.config.settings.service.idle_exit() else {
            return;
        };
        if self.clients > 0 || self.idle_timer.is_some() {
            return;
        }
        self.idle_timer = Some(ctx.run_later(idle, |act, ctx| {
            act.idle_timer = None;
            if act.clients > 0 || act.machine.current_flight().is_some() {
                return;
            }
            let lifecycle = act.lifecycle.clone();
            ctx.spawn(act.supervisor.send(LiveChildren).into_actor(act).map(
                move |live, act, ctx| {
                    if live.unwrap_or(1) == 0 && act.clients == 0 {
                        tracing::info!(
                            component = COMPONENT,
                            event = "idle_exit",
                            idle_ms = act.config.settings.service.idle_exit_ms
                        );
                        lifecycle.do_send(Shutdown {
                            reason: ShutdownReason::IdleExit,
                        });
                    } else {
                        act.arm_idle_exit(ctx);
                    }
                },
            ));
        }));
    }
}

impl Handler<Drain> for DriftObserverActor {
    type Result = ();
    fn handle(&mut self, _: Drain, _: &mut Self::Context) {}
}

impl Handler<ConnectionOpened> for DriftObserverActor {
    type Result = ();
    fn handle(&mut self, msg: ConnectionOpened, ctx: &mut Self::Context) {
        self.clients += 1;
        tracing::debug!(
            component = COMPONENT,
            event = "client_count",
            conn = msg.conn,
            clients = self.clients
        );
        if let Some(timer) = self.idle_timer.take() {
            ctx.cancel_future(timer);
        }
    }
}

impl Handler<ConnectionClosed> for DriftObserverActor {
    type Result = ();
    fn handle(&mut self, msg: ConnectionClosed, ctx: &mut Self::Context) {
        self.clients = self.clients.saturating_sub(1);
        self.arm_idle_exit(ctx);
        self.flush_mail();
        if let Some(notices) = &self.notices {
            notices.do_send(Unsubscribe(msg.conn));
        }
        self.instances.remove(&msg.conn);
        // Sessions this connection was the last carrier of are detached
        // (their work stops) until a replayed session_start takes them up.
        self.apply(
            Input::ConnectionClosed {
                connection: msg.conn,
            },
            ctx,
        );
    }
}

impl Handler<SyncNoted> for DriftObserverActor {
    type Result = ();
    fn handle(&mut self, msg: SyncNoted, ctx: &mut Self::Context) {
        let SyncReport { flight, event } = msg.0;
        let ended = matches!(
            event,
            SyncEvent::Finished(_)
                | SyncEvent::Busy { .. }
                | SyncEvent::Declined { .. }
                | SyncEvent::OverBudget { .. }
        );
        if ended
            && self
                .sync_progress
                .as_ref()
                .is_some_and(|(f, _)| *f == flight)
        {
            self.sync_progress = None;
        }
        match event {
            SyncEvent::Progress(progress) => {
                self.sync_progress = Some((flight, progress));
                self.state_dirty = true;
                self.schedule_state_flush(ctx);
            }
            SyncEvent::Finished(outcome) => {
                self.sync_ended(flight, matches!(outcome, SyncOutcome::Succeeded))
            }
            SyncEvent::Busy { .. } | SyncEvent::Declined { .. } | SyncEvent::OverBudget { .. } => {
                self.sync_ended(flight, false)
            }
            SyncEvent::Spawned { .. } => {}
            SyncEvent::Strategy { note, fallback, .. } => {
                // Which strategy runs, and why when it is a fallback: shown
                // in the state's `detail` until the next sync says otherwise.
                if fallback {
                    tracing::info!(component = COMPONENT, event = "sync_fallback", flight = flight.0, detail = %note);
                }
                self.sync_note = Some(note);
                self.state_dirty = true;
                self.schedule_state_flush(ctx);
            }
        }
    }
}

/// A message of the observer sub-machine from the scheduler (a sync
/// started, spawned, settled, was cancelled or freed the workspace), or
/// the scheduler's wake-up.
impl Handler<ObserverMail> for DriftObserverActor {
    type Result = ();
    fn handle(&mut self, msg: ObserverMail, ctx: &mut Self::Context) {
        self.deliver(msg.0, ctx);
    }
}

impl Handler<CarryOut> for DriftObserverActor {
    type Result = ();
    fn handle(&mut self, msg: CarryOut, ctx: &mut Self::Context) {
        self.carry_out(msg.0);
        self.schedule_state_flush(ctx);
    }
}

impl Handler<SchedulerQueued> for DriftObserverActor {
    type Result = ();
    fn handle(&mut self, msg: SchedulerQueued, ctx: &mut Self::Context) {
        self.scheduler_queued = msg.0;
        self.state_dirty = true;
        self.schedule_state_flush(ctx);
    }
}

impl Handler<WatcherReport> for DriftObserverActor {
    type Result = ();
    fn handle(&mut self, msg: WatcherReport, ctx: &mut Self::Context) {
        if msg.backend.is_some() {
            self.backend = msg.backend;
        }
        let session = msg.session;
        let mode = self.config.settings.freshness.watch;
        let input = match msg.event {
            WatcherEvent::Started { pid } => Input::WatcherStarted { session, mode, pid },
            WatcherEvent::SpawnFailed { error } => Input::WatcherSpawnFailed {
                session,
                mode,
                error,
            },
            WatcherEvent::Verified { pid } => Input::WatcherVerified { session, pid },
            WatcherEvent::Failed { pid, error } => Input::WatcherFailed {
                session,
                pid,
                error,
            },
            WatcherEvent::Died { pid, error } => Input::WatcherDied {
                session,
                pid,
                error,
            },
            WatcherEvent::Busy { holder } => Input::WatcherBusy {
                session,
                mode,
                holder,
            },
            WatcherEvent::DeclinedBackend { answer } => Input::WatcherDeclined {
                session,
                reason: WatcherDecline::Backend(answer),
            },
            WatcherEvent::DeclinedUnindexed => Input::WatcherDeclined {
                session,
                reason: WatcherDecline::Unindexed,
            },
            WatcherEvent::Stopped { pid } => Input::WatcherStopped { session, pid },
            WatcherEvent::Restarted { previous, pid } => Input::WatcherRestarted {
                session,
                previous,
                pid,
            },
            WatcherEvent::Applied { pid, path } => Input::WatcherApplied { session, pid, path },
        };
        self.apply(input, ctx);
    }
}

impl Handler<OwnerGone> for DriftObserverActor {
    type Result = ();
    fn handle(&mut self, msg: OwnerGone, ctx: &mut Self::Context) {
        tracing::info!(
            component = COMPONENT,
            event = "owner_exited",
            owner_pid = msg.pid
        );
        self.owner_watches.remove(&msg.pid);
        self.apply(Input::OwnerExited { pid: msg.pid }, ctx);
    }
}

impl Handler<ConfigChanged> for DriftObserverActor {
    type Result = ();
    fn handle(&mut self, msg: ConfigChanged, ctx: &mut Self::Context) {
        self.config = msg.0;
        let policy = policy(&self.config.settings, &self.workspace);
        self.machine.set_policy(policy.clone());
        self.flush_mail();
        if let Some(scheduler) = &self.scheduler {
            scheduler.do_send(SchedulerPolicy(policy));
        }
        if let Some(runner) = &self.runner {
            runner.do_send(UseSettings(self.config.settings.clone()));
        }
        if let Some(watcher) = &self.watcher {
            watcher.do_send(WatcherSettings(self.config.settings.clone()));
        }
        if let Some(detector) = &self.detector {
            detector.do_send(DetectorSettings(self.config.settings.clone()));
        }
        self.check_cgc_executable();
        self.schedule_state_flush(ctx);
    }
}
