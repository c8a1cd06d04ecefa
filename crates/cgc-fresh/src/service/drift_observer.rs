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
    Input, ProbeId, SyncOutcome, ToNotices, ToObserver, ToScheduler, TreeChanges, WatcherDecline,
    MAX_LIVE_SESSIONS,
};
use cgc_fresh_core::manifest_diff::changed_paths;
use cgc_fresh_core::read_your_writes::{edits_pending, read_your_writes, ReadDecision};
use cgc_fresh_core::watcher::backend::BackendAnswer;
use cgc_fresh_proto::{
    ClientFrame, ConfigFrame, Envelope, ErrorCode, ErrorFrame, RequestId, ServerFrame, StateFrame,
    SyncProgress, Welcome, PROTOCOL_VERSION,
};

use super::backend_detector::{BackendDetector, ForgetBackend};
use super::mcp_route::{McpAsk, McpRequest};
use super::messages::{
    ConfigChanged, ConnId, ConnectionClosed, ConnectionOpened, Drain, FromClient, NoticesMail,
    ObserverMail, Outlet, SchedulerMail, Shutdown, ShutdownReason,
};
use super::notices::{CarriersOf, NoticesActor, PushState, Subscribe, TakeHeld, Unsubscribe};
use super::owner_watch::{self, OwnerGone};
use super::store::{FreshnessStore, Restored};
use super::sync_runner::{
    CancelRun, ForgetSession, PrepareSync, RunSync, SyncEvent, SyncReport, SyncRunner,
};
use super::sync_scheduler::{
    CarryOut, SchedulerPolicy, SchedulerQueued, SyncNoted, SyncSchedulerActor,
};
use super::watcher_supervisor::{
    RestartWatcher, SessionBegan, SessionGone, StopWatcher, WatcherEvent, WatcherReport,
    WatcherSupervisor,
};
use crate::config_load::LoadedConfig;
use crate::manifest::{self, IndexRules, Manifest, MANIFEST_FILE, MAX_MANIFEST_FILES};
use crate::paths::ServicePaths;
use crate::process::executable::locate;
use crate::real_path;
use crate::supervisor::{LiveChildren, RootSupervisor, StopSession};

mod effects;
mod lifecycle;
mod mcp_reads;
mod protocol;
mod reports;
mod shell_probes;
mod snapshots;

use mcp_reads::WaitingMcpCall;
use protocol::reply;

/// The actor's name in every log line.
const COMPONENT: &str = "drift_observer";

/// The most messages one batch to the scheduler or the notices holds; a
/// fuller one is sent at once. A flood of edits fills a batch per edit
/// with a few messages; left to grow for a whole turn, the batches were
/// reallocated again and again into blocks large enough that the
/// allocator's slow path cost more than handling the messages did
/// (`docs/BENCHMARKS.md`, intake instruction counts).
const MAIL_BATCH: usize = 8;

/// The actors the observer sends to, started with it.
pub struct ObserverPeers {
    pub notices: Addr<NoticesActor>,
    pub scheduler: Addr<SyncSchedulerActor>,
    pub runner: Addr<SyncRunner>,
    pub watcher: Addr<WatcherSupervisor>,
    pub detector: Addr<BackendDetector>,
}

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

    /// The actors it talks to, started beside it
    /// (`workspace_actors::start`).
    pub fn wire(&mut self, peers: ObserverPeers) {
        self.notices = Some(peers.notices);
        self.scheduler = Some(peers.scheduler);
        self.runner = Some(peers.runner);
        self.watcher = Some(peers.watcher);
        self.detector = Some(peers.detector);
    }

    /// The freshness policy in force.
    pub fn policy(&self) -> &FreshnessPolicy {
        self.machine.policy()
    }

    /// The record as restored or observed so far.
    pub fn record(&self) -> &FreshnessRecord {
        self.machine.record()
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

    /// `session_shutdown`: the lifetime ends; its cleanup follows from the
    /// machine's `SessionClosed`.
    fn end_session(&mut self, session: String, ctx: &mut Context<Self>) {
        self.apply(Input::SessionEnded { session }, ctx);
    }
}

impl Actor for DriftObserverActor {
    type Context = Context<Self>;

    fn started(&mut self, _: &mut Self::Context) {
        self.check_cgc_executable();
        // The restored record (now `unknown`) is what the disk should say.
        self.store.save(self.machine.record());
    }
}

impl Handler<Drain> for DriftObserverActor {
    type Result = ();
    fn handle(&mut self, _: Drain, _: &mut Self::Context) {}
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
