//! The words both sides of the socket share: freshness statuses, notice
//! conditions, session reasons. The core decides in these terms; the wire
//! carries them as snake_case strings.

use serde::{Deserialize, Serialize};

/// The freshness status of one workspace's graph.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FreshnessStatus {
    /// A sync completed after every observed edit was settled, or a verified
    /// watcher owns freshness.
    Fresh,
    /// An edit was observed that no completed sync covers.
    PossiblyStale,
    /// A sync is running; edits it may not cover are tracked by epoch.
    Syncing,
    /// The embedded database was held by another process; nothing ran.
    SkippedBusy,
    /// A watcher was started but failed its liveness verification.
    NotVerified,
    /// Nothing is known since the service started (never `fresh` after a restart).
    Unknown,
}

impl FreshnessStatus {
    /// Every status, in a fixed order (for property tests and docs).
    pub const ALL: [FreshnessStatus; 6] = [
        FreshnessStatus::Fresh,
        FreshnessStatus::PossiblyStale,
        FreshnessStatus::Syncing,
        FreshnessStatus::SkippedBusy,
        FreshnessStatus::NotVerified,
        FreshnessStatus::Unknown,
    ];

    /// The wire name, e.g. `possibly_stale`.
    pub fn as_str(self) -> &'static str {
        match self {
            FreshnessStatus::Fresh => "fresh",
            FreshnessStatus::PossiblyStale => "possibly_stale",
            FreshnessStatus::Syncing => "syncing",
            FreshnessStatus::SkippedBusy => "skipped_busy",
            FreshnessStatus::NotVerified => "not_verified",
            FreshnessStatus::Unknown => "unknown",
        }
    }
}

/// A condition a human-facing notice reports. Each is shown at most once per
/// (session, condition).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum NoticeCondition {
    /// An observed edit made the graph possibly stale.
    PossiblyStale,
    /// A sync completed after every observed edit: the graph is fresh.
    SyncCompleted,
    /// A sync was skipped: another process holds the database.
    SyncSkippedBusy,
    /// A sync failed (its output says why).
    SyncFailed,
    /// A sync ran but applied nothing (e.g. `cgc index` skipped the repository).
    SyncNotApplied,
    /// No sync: the workspace has no index and creating one is not allowed.
    SyncDeclinedUnindexed,
    /// The session's automatic syncs are used up.
    BudgetExhausted,
    /// The managed watcher was verified and keeps the graph current.
    WatcherStarted,
    /// `auto` mode declined a watcher: the backend is embedded or unknown.
    WatcherDeclinedBackend,
    /// `auto` mode declined a watcher: the workspace has no index.
    WatcherDeclinedUnindexed,
    /// The watcher failed before it was verified.
    WatcherNotVerified,
    /// The verified watcher exited; the graph is possibly stale again.
    WatcherDied,
    /// The watcher was not started: another process holds the database.
    WatcherSkippedBusy,
    /// The freshness record could not be written.
    StateWriteFailed,
    /// The configured sync strategy could not run; a full reconcile ran
    /// instead (exact, slower).
    SyncStrategyFellBack,
}

impl NoticeCondition {
    /// Every condition, in a fixed order (for property tests and docs).
    pub const ALL: [NoticeCondition; 15] = [
        NoticeCondition::PossiblyStale,
        NoticeCondition::SyncCompleted,
        NoticeCondition::SyncSkippedBusy,
        NoticeCondition::SyncFailed,
        NoticeCondition::SyncNotApplied,
        NoticeCondition::SyncDeclinedUnindexed,
        NoticeCondition::BudgetExhausted,
        NoticeCondition::WatcherStarted,
        NoticeCondition::WatcherDeclinedBackend,
        NoticeCondition::WatcherDeclinedUnindexed,
        NoticeCondition::WatcherNotVerified,
        NoticeCondition::WatcherDied,
        NoticeCondition::WatcherSkippedBusy,
        NoticeCondition::StateWriteFailed,
        NoticeCondition::SyncStrategyFellBack,
    ];
}

/// How loud a notice is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum NoticeLevel {
    /// For information (a sync completed).
    Info,
    /// Something needs attention (the graph may be stale).
    Warning,
    /// Something failed.
    Error,
}

impl NoticeLevel {
    /// Every level, quietest first.
    pub const ALL: [NoticeLevel; 3] = [NoticeLevel::Info, NoticeLevel::Warning, NoticeLevel::Error];
}

/// Why a session started (Pi's `session_start` reasons).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SessionStartReason {
    /// The harness started.
    Startup,
    /// A new session in a running harness (`/new`).
    New,
    /// An earlier session was resumed (`/resume`).
    Resume,
    /// A session was forked from another.
    Fork,
    /// The extension was reloaded.
    Reload,
    /// Any reason this version does not know; treated like a new session.
    #[serde(other)]
    Other,
}

impl SessionStartReason {
    /// Every reason, in a fixed order (for property tests and docs).
    pub const ALL: [SessionStartReason; 6] = [
        SessionStartReason::Startup,
        SessionStartReason::New,
        SessionStartReason::Resume,
        SessionStartReason::Fork,
        SessionStartReason::Reload,
        SessionStartReason::Other,
    ];
}

/// What a long sync is doing now (`state.progress.phase`). The driver's
/// phases come first, in the order a sync passes them; CGC's own reconcile
/// reports only `reconciling`, `indexing` and `stopping` (it prints no
/// file counts when its output is not a terminal).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SyncPhase {
    /// Spawned; nothing reported yet (CGC's import, the listing).
    Starting,
    /// Parsing the tree's files.
    Parsing,
    /// Reading what the graph stores.
    Reading,
    /// Comparing the graph with the tree (a baseline).
    Comparing,
    /// Writing the changed files' nodes.
    Writing,
    /// Re-linking calls, imports and inheritance.
    Linking,
    /// Reading back what was written (the self-check).
    Checking,
    /// CGC's reconcile re-parses and re-writes every file.
    Reconciling,
    /// CGC indexes a workspace it found not indexed.
    Indexing,
    /// The reconcile is done and its process is stopping.
    Stopping,
}

impl SyncPhase {
    /// Every phase, in a fixed order (for property tests and docs).
    pub const ALL: [SyncPhase; 10] = [
        SyncPhase::Starting,
        SyncPhase::Parsing,
        SyncPhase::Reading,
        SyncPhase::Comparing,
        SyncPhase::Writing,
        SyncPhase::Linking,
        SyncPhase::Checking,
        SyncPhase::Reconciling,
        SyncPhase::Indexing,
        SyncPhase::Stopping,
    ];

    /// The wire name, e.g. `parsing`.
    pub fn as_str(self) -> &'static str {
        match self {
            SyncPhase::Starting => "starting",
            SyncPhase::Parsing => "parsing",
            SyncPhase::Reading => "reading",
            SyncPhase::Comparing => "comparing",
            SyncPhase::Writing => "writing",
            SyncPhase::Linking => "linking",
            SyncPhase::Checking => "checking",
            SyncPhase::Reconciling => "reconciling",
            SyncPhase::Indexing => "indexing",
            SyncPhase::Stopping => "stopping",
        }
    }

    /// The phase named `name` on the wire, if it is one.
    pub fn from_wire(name: &str) -> Option<SyncPhase> {
        SyncPhase::ALL.into_iter().find(|p| p.as_str() == name)
    }
}
