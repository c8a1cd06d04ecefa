//! What goes into the freshness machine and what comes out.
//!
//! Inputs are observations with no decisions attached: harness session and
//! tool events, a person's sync request, the shell's reports about the syncs
//! it was told to start, and the passing of the deadline the shell armed.
//! Effects are decisions the shell carries out. The watcher supervisor will
//! feed its own observations (`WatcherVerified`, `WatcherDied`, …) as further
//! variants of [`Input`]; nothing here assumes there are none.

use cgc_fresh_proto::{NoticeCondition, NoticeLevel, SessionStartReason};

use super::flight::FlightId;

/// One observation handed to [`super::Freshness::handle`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Input {
    /// `session_start`: harness extension `instance` serves `session`.
    SessionStarted {
        session: String,
        instance: String,
        reason: SessionStartReason,
    },
    /// `session_shutdown`, or the connection that owned the session closed.
    SessionEnded { session: String },
    /// `tool_call`: `paths` absolute or relative to the workspace root.
    ToolCall {
        session: String,
        tool: String,
        paths: Vec<String>,
    },
    /// `tool_result`: the oldest pending call of `tool` finished.
    ToolResult {
        session: String,
        tool: String,
        ok: bool,
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
    /// The sync process exists now.
    SyncSpawned { flight: FlightId, pid: u32 },
    /// The sync process is gone; `outcome` says how it ended.
    SyncFinished {
        flight: FlightId,
        outcome: SyncOutcome,
    },
    /// A subscriber received the notice for (`session`, `condition`).
    NoticeDelivered {
        session: String,
        condition: NoticeCondition,
    },
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
    /// answered by exactly one terminal report (`SyncBusy`, `SyncDeclined`
    /// or `SyncFinished`), also after a `CancelSync`.
    StartSync {
        flight: FlightId,
        /// The paying session (automatic) or the requesting one (manual).
        session: Option<String>,
        manual: bool,
    },
    /// Stop the sync's process group: the session it belonged to ended.
    CancelSync { flight: FlightId },
    /// Show `text` to the person at `session`. Human-facing only: never to
    /// be placed into an agent's context or prompt.
    Notice {
        session: String,
        condition: NoticeCondition,
        level: NoticeLevel,
        text: String,
    },
    /// The record changed: persist [`super::Freshness::record`] and push a
    /// state frame. Emitted at most once per `handle`, as the last effect.
    RecordChanged,
}
