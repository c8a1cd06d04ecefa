//! The managed watcher as the freshness machine sees it.
//!
//! Design §5: at most one watcher per workspace; it belongs to the session
//! lifetime that started it and dies with it. Between its spawn and its
//! verification it owns nothing; once verified it owns the workspace's
//! freshness until it exits or is stopped.

use crate::config::WatchMode;

use super::session::Lifetime;
use super::time::Millis;

/// A watcher process that exists.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct RunningWatcher {
    /// The session lifetime that started it.
    pub(crate) owner: Lifetime,
    pub(crate) mode: WatchMode,
    pub(crate) pid: u32,
    /// Restarts in a row that have not yet caught up (reset when it is
    /// verified with nothing left that needs one).
    pub(crate) restarts: u32,
    /// While restarting: the next process was spawned (`pid` is its).
    pub(crate) respawned: bool,
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
    /// A verified watcher being restarted, so that a new start-up
    /// reconcile reads what its observer cannot report (edits made while
    /// it started up, an edit naming no path, a changed ignore file). It
    /// keeps owning freshness (no lazy sync could take the embedded
    /// database from it) but claims `fresh` only at the new ready line.
    /// `pid` is the old process until the new one is reported.
    Restarting(RunningWatcher),
    /// Being stopped because restarting did not catch up (edits kept
    /// arriving during its start-up): it owns nothing any more, lazy mode
    /// has taken over, and an automatic sync waits until it has exited
    /// (it may still hold the embedded database).
    Retiring(RunningWatcher),
}

/// The state words of the record's watcher facts.
pub(crate) mod state {
    pub(crate) const VERIFYING: &str = "verifying";
    pub(crate) const VERIFIED: &str = "verified";
    pub(crate) const RESTARTING: &str = "restarting";
    pub(crate) const STOPPING: &str = "stopping";
    pub(crate) const NOT_VERIFIED: &str = "not_verified";
    pub(crate) const DIED: &str = "died";
    pub(crate) const SKIPPED_BUSY: &str = "skipped_busy";
    pub(crate) const DECLINED_BACKEND: &str = "declined_backend";
    pub(crate) const DECLINED_UNINDEXED: &str = "declined_unindexed";
}

/// How many times in a row a verified watcher is restarted to catch up
/// with what its observer cannot report; when edits keep arriving during
/// each new start-up, it is stopped and lazy mode takes over.
pub const MAX_WATCHER_RESTARTS: u32 = 2;

impl WatcherSlot {
    /// The watcher process, whichever its phase.
    pub(crate) fn running(&self) -> Option<&RunningWatcher> {
        match self {
            WatcherSlot::Absent => None,
            WatcherSlot::Verifying(watcher)
            | WatcherSlot::Verified(watcher)
            | WatcherSlot::Restarting(watcher)
            | WatcherSlot::Retiring(watcher) => Some(watcher),
        }
    }

    pub(crate) fn is_verifying(&self) -> bool {
        matches!(self, WatcherSlot::Verifying(_))
    }

    /// Whether a verified watcher owns freshness: verified, or being
    /// restarted after it was (the restart is its own catching up).
    pub(crate) fn is_verified(&self) -> bool {
        matches!(self, WatcherSlot::Verified(_) | WatcherSlot::Restarting(_))
    }

    pub(crate) fn is_restarting(&self) -> bool {
        matches!(self, WatcherSlot::Restarting(_))
    }

    /// Whether it is being stopped: no sync may start until it has exited
    /// (it may still hold the embedded database).
    pub(crate) fn is_retiring(&self) -> bool {
        matches!(self, WatcherSlot::Retiring(_))
    }

    /// Whether edits wait for this watcher's word (it is not retiring).
    pub(crate) fn takes_edits(&self) -> bool {
        matches!(
            self,
            WatcherSlot::Verifying(_) | WatcherSlot::Verified(_) | WatcherSlot::Restarting(_)
        )
    }
}

/// File suffixes the watcher updates the graph for when a file is created
/// or modified: CGC's parser suffixes ([`crate::cgc_seam::PARSER_SUFFIXES`]).
/// An edit of any other file leaves the graph as it is, so nothing waits
/// for the watcher's word about it.
pub const WATCHED_SUFFIXES: [&str; 38] = crate::cgc_seam::PARSER_SUFFIXES;

/// Whether the watcher applies an edit of `path` to the graph (and says so
/// when it has): its last suffix is one CGC parses.
pub fn watcher_applies_to(path: &str) -> bool {
    let name = path.rsplit('/').next().unwrap_or(path);
    match name.rsplit_once('.') {
        Some((stem, suffix)) if !stem.is_empty() => WATCHED_SUFFIXES.contains(&suffix),
        _ => false,
    }
}

/// The file names whose change alters what CGC indexes: its watcher reads
/// its ignore rules once, at start, so only a new start-up applies them.
pub const IGNORE_FILE_NAMES: [&str; 2] = crate::cgc_seam::IGNORE_FILE_NAMES;

/// Edits the running watcher has not yet reported applied to the graph.
///
/// Filled while a watcher runs (verifying, verified or restarting) with
/// the workspace-relative paths of observed edits of files it parses; a
/// path leaves when the watcher reports it applied (CGC's
/// `Graph refresh for <path> complete` line).
///
/// Some edits its observer may never report: one made while it was still
/// starting up (CGC schedules its observer only after the start-up
/// reconcile, which may have read the file before the edit), one that
/// named no path, and a change of an ignore file (read once, at start).
/// These are *unobserved*; only a start-up reconcile that begins after
/// them covers them, so they call for a restart
/// ([`AwaitingWatcher::needs_restart`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct AwaitingWatcher {
    /// Each waiting path, with when it began to wait (a path edited again
    /// keeps its first time: the graph has lagged since then).
    observed: std::collections::BTreeMap<String, Millis>,
    unobserved: std::collections::BTreeMap<String, Millis>,
    /// When an edit that named no path began to wait.
    unknown: Option<Millis>,
}

impl AwaitingWatcher {
    /// An edit of `path` at `at`; `observable`: the watcher's observer was
    /// scheduled when it was made (the watcher is verified).
    pub(crate) fn insert(&mut self, path: String, observable: bool, at: Millis) {
        let name = path.rsplit('/').next().unwrap_or(&path);
        if IGNORE_FILE_NAMES.contains(&name) {
            self.unobserved.entry(path).or_insert(at);
        } else if watcher_applies_to(&path) {
            if observable {
                self.observed.entry(path).or_insert(at);
            } else {
                self.unobserved.entry(path).or_insert(at);
            }
        }
    }

    /// An edit at `at` that named no path.
    pub(crate) fn mark_unknown(&mut self, at: Millis) {
        self.unknown.get_or_insert(at);
    }

    /// The watcher reported `path` applied; whether it was awaited. (An
    /// unobserved edit's file may have changed again since: then the
    /// observer saw it after all.)
    pub(crate) fn applied(&mut self, path: &str) -> bool {
        let observed = self.observed.remove(path).is_some();
        let unobserved = self.unobserved.remove(path).is_some();
        observed || unobserved
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.observed.is_empty() && self.unobserved.is_empty() && self.unknown.is_none()
    }

    /// Whether something waits that only a new start-up reconcile covers.
    pub(crate) fn needs_restart(&self) -> bool {
        !self.unobserved.is_empty() || self.unknown.is_some()
    }

    /// How many paths wait (an unknown edit counts as one).
    pub(crate) fn len(&self) -> usize {
        self.observed
            .keys()
            .chain(
                self.unobserved
                    .keys()
                    .filter(|path| !self.observed.contains_key(*path)),
            )
            .count()
            + usize::from(self.unknown.is_some())
    }

    /// When the longest wait began: the edit the graph has lagged behind
    /// the longest.
    pub(crate) fn oldest(&self) -> Option<Millis> {
        self.observed
            .values()
            .chain(self.unobserved.values())
            .chain(self.unknown.iter())
            .min()
            .copied()
    }

    /// What waits, for the lazy path when the watcher is given up: the
    /// paths, or `None` when an edit named none.
    pub(crate) fn paths(&self) -> Option<Vec<&String>> {
        if self.unknown.is_some() {
            return None;
        }
        let mut paths: Vec<&String> = self.observed.keys().chain(self.unobserved.keys()).collect();
        paths.sort();
        paths.dedup();
        Some(paths)
    }
}
