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

/// File suffixes the watcher of CGC 0.6.13 updates the graph for when a
/// file is created or modified (`GraphBuilder.parsers`; its
/// `on_created`/`on_modified` skip every other file). An edit of any other
/// file leaves the graph as it is, so nothing waits for the watcher's word
/// about it.
pub const WATCHED_SUFFIXES: [&str; 38] = [
    "py", "ipynb", "js", "jsx", "mjs", "cjs", "go", "ts", "mts", "cts", "tsx", "cpp", "h", "hpp",
    "hh", "rs", "c", "java", "rb", "cs", "php", "kt", "scala", "sc", "swift", "hs", "dart", "pl",
    "pm", "lua", "ex", "exs", "el", "sol", "html", "css", "svelte", "vue",
];

/// Whether the watcher applies an edit of `path` to the graph (and says so
/// when it has): its last suffix is one CGC parses.
pub fn watcher_applies_to(path: &str) -> bool {
    let name = path.rsplit('/').next().unwrap_or(path);
    match name.rsplit_once('.') {
        Some((stem, suffix)) if !stem.is_empty() => WATCHED_SUFFIXES.contains(&suffix),
        _ => false,
    }
}

/// Edits the running watcher has not yet reported applied to the graph.
///
/// Filled while a watcher runs (verifying or verified) with the
/// workspace-relative paths of observed edits of files it parses; a path
/// leaves when the watcher reports it applied (CGC's
/// `Graph refresh for <path> complete` line). An edit that named no path
/// may have touched anything: nothing the watcher reports can show it was
/// applied, so it stays pending as long as this watcher runs.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct AwaitingWatcher {
    paths: std::collections::BTreeSet<String>,
    unknown: bool,
}

impl AwaitingWatcher {
    pub(crate) fn insert(&mut self, path: String) {
        if watcher_applies_to(&path) {
            self.paths.insert(path);
        }
    }

    pub(crate) fn mark_unknown(&mut self) {
        self.unknown = true;
    }

    /// The watcher reported `path` applied; whether it was awaited.
    pub(crate) fn applied(&mut self, path: &str) -> bool {
        self.paths.remove(path)
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.paths.is_empty() && !self.unknown
    }

    /// How many paths wait (an unknown edit counts as one).
    pub(crate) fn len(&self) -> usize {
        self.paths.len() + usize::from(self.unknown)
    }
}
