//! The managed watcher as the freshness machine sees it.
//!
//! Design §5: at most one watcher per workspace; it belongs to the session
//! lifetime that started it and dies with it. Between its spawn and its
//! verification it owns nothing; once verified it owns the workspace's
//! freshness until it exits or is stopped.

use crate::config::WatchMode;

use super::session::Lifetime;

/// A watcher process that exists.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct RunningWatcher {
    /// The session lifetime that started it.
    pub(crate) owner: Lifetime,
    pub(crate) mode: WatchMode,
    pub(crate) pid: u32,
}

/// The workspace's watcher.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) enum WatcherSlot {
    /// No watcher runs.
    #[default]
    Absent,
    /// Spawned; liveness not yet verified. Claims nothing.
    Verifying(RunningWatcher),
    /// Verified alive: it keeps the graph current and owns freshness.
    Verified(RunningWatcher),
}

/// The state words of the record's watcher facts.
pub(crate) mod state {
    pub(crate) const VERIFYING: &str = "verifying";
    pub(crate) const VERIFIED: &str = "verified";
    pub(crate) const NOT_VERIFIED: &str = "not_verified";
    pub(crate) const DIED: &str = "died";
    pub(crate) const SKIPPED_BUSY: &str = "skipped_busy";
    pub(crate) const DECLINED_BACKEND: &str = "declined_backend";
    pub(crate) const DECLINED_UNINDEXED: &str = "declined_unindexed";
}

impl WatcherSlot {
    /// The watcher process, whichever its phase.
    pub(crate) fn running(&self) -> Option<&RunningWatcher> {
        match self {
            WatcherSlot::Absent => None,
            WatcherSlot::Verifying(watcher) | WatcherSlot::Verified(watcher) => Some(watcher),
        }
    }

    pub(crate) fn is_verifying(&self) -> bool {
        matches!(self, WatcherSlot::Verifying(_))
    }

    pub(crate) fn is_verified(&self) -> bool {
        matches!(self, WatcherSlot::Verified(_))
    }
}
