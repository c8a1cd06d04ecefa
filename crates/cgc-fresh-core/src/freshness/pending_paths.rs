//! The bounded batch of edited paths not yet covered by a sync.
//!
//! Design reference (background sync efficiency, seed 002): "Each pending or
//! in-flight batch retains at most 8,192 unique paths and 2 MiB of
//! path-string bytes. At most one batch is in flight while one more
//! accumulates. Exceeding either batch limit replaces its individual paths
//! with one explicit full-sync marker ... so overflow bounds memory without
//! losing ... changes."
//!
//! The sync this service runs always covers the whole workspace, so the
//! batch is informational (how much is pending, shown in the state) — but it
//! obeys the same bounds so that a runaway agent cannot grow the service.

use std::collections::BTreeSet;

use super::record::PendingSummary;

/// At most this many unique paths are kept before the batch collapses.
pub const MAX_PENDING_PATHS: usize = 8_192;
/// At most this many bytes of path text are kept before the batch collapses.
pub const MAX_PENDING_PATH_BYTES: usize = 2 * 1024 * 1024;

/// Workspace-relative paths edited since the last covering sync, or the
/// "whole workspace" marker once the bounds were passed or an edit's target
/// was unknown.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PendingPaths {
    paths: BTreeSet<String>,
    bytes: usize,
    whole_workspace: bool,
}

impl PendingPaths {
    /// An empty batch.
    pub fn new() -> Self {
        PendingPaths::default()
    }

    /// A batch holding only the "whole workspace" marker.
    pub fn whole_workspace() -> Self {
        PendingPaths {
            whole_workspace: true,
            ..PendingPaths::default()
        }
    }

    /// Adds one workspace-relative path; collapses the batch into the
    /// whole-workspace marker when a bound would be passed.
    pub fn insert(&mut self, path: String) {
        if self.whole_workspace || self.paths.contains(&path) {
            return;
        }
        let bytes = self.bytes.saturating_add(path.len());
        if self.paths.len() + 1 > MAX_PENDING_PATHS || bytes > MAX_PENDING_PATH_BYTES {
            self.mark_whole_workspace();
            return;
        }
        self.bytes = bytes;
        self.paths.insert(path);
    }

    /// Replaces the individual paths by the whole-workspace marker.
    pub fn mark_whole_workspace(&mut self) {
        self.paths.clear();
        self.bytes = 0;
        self.whole_workspace = true;
    }

    /// Moves every path of `other` into this batch (bounds still apply).
    pub fn merge(&mut self, other: PendingPaths) {
        if other.whole_workspace {
            self.mark_whole_workspace();
            return;
        }
        for path in other.paths {
            self.insert(path);
        }
    }

    /// Empties this batch and returns what it held (the batch a sync takes
    /// in flight).
    pub fn take(&mut self) -> PendingPaths {
        std::mem::take(self)
    }

    /// Whether nothing is pending.
    pub fn is_empty(&self) -> bool {
        !self.whole_workspace && self.paths.is_empty()
    }

    /// Whether the batch collapsed into the whole-workspace marker.
    pub fn is_whole_workspace(&self) -> bool {
        self.whole_workspace
    }

    /// How many individual paths are kept (0 once collapsed).
    pub fn len(&self) -> usize {
        self.paths.len()
    }

    /// Bytes of path text kept.
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// The individual paths, sorted.
    pub fn paths(&self) -> impl Iterator<Item = &str> {
        self.paths.iter().map(String::as_str)
    }

    /// Whether `path` is kept individually.
    pub fn contains(&self, path: &str) -> bool {
        self.paths.contains(path)
    }

    /// The summary of this batch and `other` together, without merging them.
    pub fn union_summary(&self, other: &PendingPaths) -> PendingSummary {
        if self.whole_workspace || other.whole_workspace {
            return PendingSummary {
                paths: 0,
                whole_workspace: true,
            };
        }
        let only_here = self.paths().filter(|path| !other.contains(path)).count();
        let together = only_here + other.len();
        if together > MAX_PENDING_PATHS {
            return PendingSummary {
                paths: 0,
                whole_workspace: true,
            };
        }
        PendingSummary {
            paths: u32::try_from(together).unwrap_or(u32::MAX),
            whole_workspace: false,
        }
    }

    /// What the persisted record says about this batch.
    pub fn summary(&self) -> PendingSummary {
        PendingSummary {
            paths: u32::try_from(self.paths.len()).unwrap_or(u32::MAX),
            whole_workspace: self.whole_workspace,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn duplicate_paths_count_once() {
        let mut batch = PendingPaths::new();
        batch.insert("a.rs".into());
        batch.insert("a.rs".into());
        batch.insert("b.rs".into());
        assert_eq!(batch.len(), 2);
        assert_eq!(batch.bytes(), 8);
        assert_eq!(batch.paths().collect::<Vec<_>>(), ["a.rs", "b.rs"]);
    }

    #[test]
    fn the_8193rd_unique_path_collapses_the_batch() {
        let mut batch = PendingPaths::new();
        for n in 0..MAX_PENDING_PATHS {
            batch.insert(format!("f{n}"));
        }
        assert_eq!(batch.len(), MAX_PENDING_PATHS);
        assert!(!batch.is_whole_workspace());
        batch.insert("one-more".into());
        assert!(batch.is_whole_workspace());
        assert_eq!(batch.len(), 0);
        assert!(
            !batch.is_empty(),
            "nothing is lost: the marker stays pending"
        );
        batch.insert("later".into());
        assert_eq!(batch.len(), 0, "a collapsed batch takes no more paths");
    }

    #[test]
    fn passing_two_mib_of_path_text_collapses_the_batch() {
        let mut batch = PendingPaths::new();
        let long = "x".repeat(1024 * 1024);
        batch.insert(format!("a/{long}"));
        assert!(!batch.is_whole_workspace());
        batch.insert(format!("b/{long}"));
        assert!(batch.is_whole_workspace());
        assert_eq!(batch.bytes(), 0);
    }

    #[test]
    fn take_leaves_an_empty_batch_and_merge_restores_it() {
        let mut batch = PendingPaths::new();
        batch.insert("a.rs".into());
        let in_flight = batch.take();
        assert!(batch.is_empty());
        batch.insert("b.rs".into());
        batch.merge(in_flight);
        assert_eq!(batch.paths().collect::<Vec<_>>(), ["a.rs", "b.rs"]);
        batch.merge(PendingPaths::whole_workspace());
        assert!(batch.is_whole_workspace());
        assert_eq!(
            batch.summary(),
            PendingSummary {
                paths: 0,
                whole_workspace: true
            }
        );
    }
}
