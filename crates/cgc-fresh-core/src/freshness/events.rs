//! What goes into the freshness machine and what comes out.
//!
//! Inputs are observations with no decisions attached: harness session and
//! tool events, a person's sync request, the shell's reports about the syncs
//! it was told to start, the watcher supervisor's reports about the managed
//! watcher, and the passing of the deadline the shell armed. Effects are
//! decisions the shell carries out.
//!
//! The watcher is started by the shell (after [`crate::watcher::gate()`] and
//! the lock probe), not by an effect: its attempt is reported with exactly
//! one opening input — `WatcherStarted`, `WatcherSpawnFailed`,
//! `WatcherBusy` or `WatcherDeclined` — and a started watcher with exactly
//! one of `WatcherVerified` (then later an ending), `WatcherFailed`,
//! `WatcherDied` or `WatcherStopped`. A verified watcher the machine asks
//! to restart ([`Effect::RestartWatcher`]) is reported as
//! `WatcherRestarted` (its successor's pid) and then verified or ended
//! like a first start — or as `WatcherFailed` naming the old pid when no
//! successor could be spawned. One it asks to stop
//! ([`Effect::StopWatcher`]) ends with `WatcherStopped`. Reports about a
//! started watcher name its `pid`, so a late report about an earlier
//! watcher is recognised as stale.

use cgc_fresh_proto::{NoticeCondition, NoticeLevel, SessionStartReason};

use crate::config::WatchMode;

use super::budget::{SyncAllowance, SyncCost};
use super::flight::FlightId;
use super::probe::ProbeId;
use super::session::{ConnectionId, OwnerPid, SessionKey};

/// One observation handed to [`super::Freshness::handle`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Input {
    /// `session_start`: harness extension `instance` serves `session`; it
    /// came over `connection` (which then carries the lifetime), or from no
    /// connection (`None`: a lifetime nothing carries never detaches).
    /// `owner`: the process whose exit ends the lifetime (`owner_pid`); no
    /// connection's close detaches an owned lifetime.
    SessionStarted {
        session: String,
        instance: String,
        reason: SessionStartReason,
        connection: Option<ConnectionId>,
        owner: Option<OwnerPid>,
    },
    /// The owner process `pid` of one or more lifetimes exited: they end.
    OwnerExited { pid: OwnerPid },
    /// `session_shutdown`: the session's lifetime (live or detached) ends.
    SessionEnded { session: String },
    /// A client connection closed. Lifetimes it was the last carrier of are
    /// detached: their work stops, and a replayed `session_start` from the
    /// same instance re-attaches them.
    ConnectionClosed { connection: ConnectionId },
    /// `tool_call`: `paths` absolute or relative to the workspace root.
    /// `not_indexed`: how many further paths inside the workspace the call
    /// named that CGC does not index (an ignored directory or pattern, a
    /// suffix it does not read — decided by the shell with the manifest's
    /// rules): the graph holds nothing of them, so they are no drift and
    /// nothing waits for the watcher to apply them. A call that named only
    /// such paths edited nothing the graph holds; one that named no path at
    /// all may have edited anything.
    ToolCall {
        session: String,
        tool: String,
        paths: Vec<String>,
        not_indexed: usize,
    },
    /// `tool_result`: the oldest pending call of `tool` finished.
    ToolResult {
        session: String,
        tool: String,
        ok: bool,
    },
    /// The shell compared the tree with the manifest for `probe`, as an
    /// [`Effect::ProbeWorkspace`] asked. Changes are an observed edit of the
    /// shell command's session (settled: the command ended); no change
    /// closes the probe and nothing else happens.
    ProbeAnswered {
        probe: ProbeId,
        changes: TreeChanges,
    },
    /// The deadline from [`super::Freshness::next_deadline`] passed.
    Wake,
    /// A person asked for a sync (CLI `sync`, or `/cgc-fresh sync` from a
    /// harness session). Not budgeted; still single-flight.
    SyncRequested { session: Option<String> },
    /// The lock probe found another process holding the database: nothing
    /// was spawned. `holder` names it, e.g. `pid 4242: cgc watch .`.
    SyncBusy { flight: FlightId, holder: String },
    /// The sync was not started, e.g. the workspace has no index and
    /// `lifecycle.autoCreate` is off. Nothing was spawned.
    SyncDeclined { flight: FlightId, reason: String },
    /// The sync of `flight` could not use the configured strategy and runs
    /// a full reconcile instead; `reason` says why (shown to the person,
    /// once per session lifetime). The flight goes on and reports as usual.
    SyncStrategyFellBack { flight: FlightId, reason: String },
    /// The sync process exists now; `cost` says what its work grows with
    /// (the payer's slot of that class is consumed).
    SyncSpawned {
        flight: FlightId,
        pid: u32,
        cost: SyncCost,
    },
    /// The sync needs work of a class (`cost`) its `StartSync` did not
    /// allow: the payer has no slot of it left. Nothing was spawned (for
    /// this class; a sync that fell back from the other class may have run
    /// one process already). A terminal report.
    SyncOverBudget { flight: FlightId, cost: SyncCost },
    /// The sync process is gone; `outcome` says how it ended.
    SyncFinished {
        flight: FlightId,
        outcome: SyncOutcome,
    },
    /// A subscriber received the notice for (`session`, `condition`).
    NoticeDelivered {
        session: SessionKey,
        condition: NoticeCondition,
    },
    /// The shell spawned `session`'s managed watcher (`cgc watch`, in
    /// `mode` `on` or `auto`): process `pid` exists, not yet verified.
    WatcherStarted {
        session: SessionKey,
        mode: WatchMode,
        pid: u32,
    },
    /// Spawning `session`'s watcher failed (no process ran), e.g. the
    /// executable is missing.
    WatcherSpawnFailed {
        session: SessionKey,
        mode: WatchMode,
        error: String,
    },
    /// `session`'s watcher `pid` is verified: it printed its ready line
    /// (which CGC prints only after its start-up reconcile, with its file
    /// observer scheduled) and was still alive, and alive for at least
    /// `freshness.watcherLivenessMs`.
    WatcherVerified { session: SessionKey, pid: u32 },
    /// `session`'s watcher `pid` exited or failed before it was verified.
    /// `error`: its exit status and a tail of its output.
    WatcherFailed {
        session: SessionKey,
        pid: u32,
        error: String,
    },
    /// `session`'s watcher `pid` exited after it was verified. `error`:
    /// its exit status and a tail of its output. (The machine goes by its
    /// own record of verification: a `WatcherDied` for a watcher it has not
    /// verified counts as `WatcherFailed`, and the other way round.)
    WatcherDied {
        session: SessionKey,
        pid: u32,
        error: String,
    },
    /// The lock probe found the database held when `session`'s watcher
    /// would start: nothing was spawned. `holder` names the holder, e.g.
    /// `pid 4242: cgc mcp start`.
    WatcherBusy {
        session: SessionKey,
        mode: WatchMode,
        holder: String,
    },
    /// `auto` mode declined `session`'s watcher; nothing was spawned.
    WatcherDeclined {
        session: SessionKey,
        reason: WatcherDecline,
    },
    /// The shell stopped `session`'s watcher `pid` on purpose while the
    /// session is live (e.g. a reload turned `freshness.watch` off). Not a
    /// failure and no notice. When the session itself ends, the
    /// `SessionEnded` already ended its watcher here, and a later
    /// `WatcherStopped` changes nothing.
    WatcherStopped { session: SessionKey, pid: u32 },
    /// `session`'s watcher `previous`, restarted as an
    /// [`Effect::RestartWatcher`] asked, exited and its successor `pid` was
    /// spawned (not yet verified: its ready line follows with
    /// `WatcherVerified`). A restart that could not spawn is reported as
    /// `WatcherFailed` naming `previous`.
    WatcherRestarted {
        session: SessionKey,
        previous: u32,
        pid: u32,
    },
    /// `session`'s watcher `pid` reported that it applied the file at
    /// `path` (workspace-relative, or absolute) to the graph: CGC printed
    /// its `Graph refresh for <path> complete` line, after its writes.
    WatcherApplied {
        session: SessionKey,
        pid: u32,
        path: String,
    },
}

/// What a comparison of the tree with the manifest found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TreeChanges {
    /// Every source file is as the last successful sync saw it.
    Unchanged,
    /// These paths (workspace-relative, or absolute) were added, deleted or
    /// modified. An empty list means `Unchanged`.
    Paths(Vec<String>),
    /// Anything may have changed: no manifest yet, a tree too large for
    /// one, or the walk failed.
    WholeWorkspace,
}

/// Why `auto` mode spawned no watcher.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WatcherDecline {
    /// The backend is embedded or could not be determined; the text is the
    /// detection answer, e.g. `kuzudb (environment DEFAULT_DATABASE)`.
    Backend(String),
    /// The workspace has no index (`.codegraphcontext/`).
    Unindexed,
}

/// How a spawned sync ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SyncOutcome {
    /// It ran and applied the workspace to the graph.
    Succeeded,
    /// It ran but applied nothing (e.g. `cgc index` skipped an indexed
    /// repository). Never `fresh`.
    NotApplied { detail: String },
    /// It failed (non-zero exit, spawn error, …).
    Failed { error: String },
    /// It exceeded `cgc.maintenanceTimeoutMs` and was stopped.
    TimedOut { error: String },
    /// The spawned `cgc` still hit the database lock: it did no work, and
    /// its budget slot is given back.
    Busy { holder: String },
    /// It was stopped on purpose (shutdown, or a `CancelSync`).
    Cancelled,
}

/// One decision returned by [`super::Freshness::handle`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Effect {
    /// Start a sync: probe the database lock (and consent), then spawn —
    /// or report `SyncBusy` / `SyncDeclined`. Every `StartSync` must be
    /// answered by exactly one terminal report (`SyncBusy`, `SyncDeclined`,
    /// `SyncOverBudget` or `SyncFinished`), also after a `CancelSync`.
    StartSync {
        flight: FlightId,
        /// The paying session (automatic) or the requesting one (manual).
        session: Option<SessionKey>,
        manual: bool,
        /// The classes of work it may spawn (the payer's slots left); for
        /// a class it may not, the shell reports `SyncOverBudget`.
        allowance: SyncAllowance,
    },
    /// Stop the sync's process group: the session it belonged to ended.
    CancelSync { flight: FlightId },
    /// Every observed edit has settled and an automatic sync waits for its
    /// batching window: work that needs no database (parsing the tree as it
    /// is now) may start ahead of it. A hint: it changes no state, is
    /// answered by nothing, and the sync starts when it is due either way.
    PrepareSync,
    /// A session began with automatic syncs on and no verified watcher:
    /// the incremental driver's worker may start now, in the background
    /// (CodeGraphContext's import, its API probe and the tree's parse,
    /// without the database), so that the session's first edit pays one
    /// warm sync. A hint like `PrepareSync`: it changes no state and is
    /// answered by nothing; the shell starts nothing where the worker would
    /// not serve the next sync (`sync_plan::warm_worker_plan`).
    WarmWorker,
    /// A shell command ended (or its session did): compare the tree with
    /// the manifest of the last successful sync — or with the snapshot of
    /// the sync running now, once it is taken — and answer with exactly one
    /// [`Input::ProbeAnswered`]. Until then no sync claims `fresh`.
    ProbeWorkspace { probe: ProbeId },
    /// Show `text` to the person at `session`. Human-facing only: never to
    /// be placed into an agent's context or prompt.
    Notice {
        session: SessionKey,
        condition: NoticeCondition,
        level: NoticeLevel,
        text: String,
    },
    /// A lifetime began (`reattached`: a detached one was taken up again).
    /// Its watcher may be attempted now if the machine allows it.
    SessionOpened {
        session: SessionKey,
        reattached: bool,
    },
    /// A lifetime's work must stop: every child it started (sync, watcher)
    /// is stopped and what the shell keeps for it is dropped. `detached`:
    /// the lifetime itself is kept for a replayed `session_start`;
    /// otherwise it ended (shutdown, replacement, or room for another).
    SessionClosed { session: SessionKey, detached: bool },
    /// Restart `session`'s watcher `pid`: stop it (SIGINT first) and,
    /// once it exited, spawn `cgc watch --sync-on-start .` again for the
    /// same session (lock probe first); report `WatcherRestarted`, then its
    /// verification or failure as for a first start.
    RestartWatcher { session: SessionKey, pid: u32 },
    /// Stop `session`'s watcher `pid` (SIGINT first) and report its exit as
    /// `WatcherStopped`; the session keeps its one attempt spent.
    StopWatcher { session: SessionKey, pid: u32 },
    /// The record changed: persist [`super::Freshness::record`] and push a
    /// state frame. Emitted at most once per `handle`, as the last effect.
    RecordChanged,
}
