//! The configuration the freshness machine decides with.
//!
//! The shell builds a [`FreshnessPolicy`] from the effective configuration
//! (`freshness.autoSync`, `freshness.maxSyncsPerSession`,
//! `freshness.maxIncrementalSyncsPerSession`, `freshness.batchMs`,
//! `freshness.settleMs`, `freshness.minSyncGapMs`, `freshness.watcherApplyMs`,
//! `freshness.modifyingTools`, `freshness.shellTools`)
//! plus the canonical workspace root, and hands a new one over on every reload.

/// `freshness.maxSyncsPerSession` default: automatic syncs whose work grows
/// with the repository (see `budget.rs`).
pub const DEFAULT_MAX_SYNCS_PER_SESSION: u32 = 2;
/// `freshness.maxIncrementalSyncsPerSession` default: automatic syncs
/// whose work grows with the changed files. At the 5 s gap, 500 syncs are
/// 40 minutes of syncs back to back: a long session's every burst of edits
/// ends in `fresh`, and a runaway loop of edits still stops.
pub const DEFAULT_MAX_INCREMENTAL_SYNCS_PER_SESSION: u32 = 500;
/// `freshness.batchMs` default.
pub const DEFAULT_BATCH_MS: u64 = 500;
/// `freshness.settleMs` default.
pub const DEFAULT_SETTLE_MS: u64 = 30_000;
/// `freshness.minSyncGapMs` default: design reference 002 asks for at
/// least five seconds between the starts of two syncs, so a burst of
/// follow-ups or retries never runs `cgc` back to back.
pub const DEFAULT_MIN_SYNC_GAP_MS: u64 = 5_000;
/// `freshness.watcherApplyMs` default: how long a verified watcher may
/// take to apply an edit before a stale episode opens. CGC's watcher
/// waits 2 s after a file's last change (its debounce) and then re-parses
/// and re-links it; thirty seconds leaves room for a large file on a slow
/// machine while still telling the person within half a minute.
pub const DEFAULT_WATCHER_APPLY_MS: u64 = 30_000;
/// `freshness.shellTools` default.
pub const DEFAULT_SHELL_TOOLS: [&str; 1] = ["bash"];
/// `freshness.modifyingTools` default.
pub const DEFAULT_MODIFYING_TOOLS: [&str; 5] =
    ["write", "edit", "remove_file", "rename_file", "ctx_patch"];

/// What the freshness machine needs to know from the configuration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FreshnessPolicy {
    /// `freshness.autoSync`: run automatic syncs on drift. Off means edits
    /// only mark the graph possibly stale and a person syncs by hand.
    pub auto_sync: bool,
    /// `freshness.maxSyncsPerSession`: automatic syncs whose work grows
    /// with the repository (a reconcile) one session may spawn.
    pub max_syncs_per_session: u32,
    /// `freshness.maxIncrementalSyncsPerSession`: automatic syncs whose
    /// work grows with the changed files one session may spawn.
    pub max_incremental_syncs_per_session: u32,
    /// `cgc.syncStrategy` is `incremental`: a sync may cost only the changed
    /// files. With any other strategy every sync costs the whole repository,
    /// so none starts once that class is spent (no start that the shell
    /// would then refuse as over budget).
    pub incremental_strategy: bool,
    /// `freshness.batchMs`: the batching window from the first edit of an
    /// episode to the sync it triggers.
    pub batch_ms: u64,
    /// `freshness.settleMs`: how long after its call an edit counts as
    /// written when no `tool_result` arrives.
    pub settle_ms: u64,
    /// `freshness.minSyncGapMs`: the least time between the starts of two
    /// syncs (automatic or manual, follow-ups and retries included).
    pub min_sync_gap_ms: u64,
    /// `freshness.watcherApplyMs`: how long an edit may wait for a verified
    /// watcher to apply it before a stale episode opens.
    pub watcher_apply_ms: u64,
    /// `freshness.modifyingTools`: tool names whose calls edit files (exact,
    /// case-sensitive match, as the harness reports them).
    pub modifying_tools: Vec<String>,
    /// `freshness.shellTools`: tool names that run shell commands. A call
    /// opens a probe; its result asks the shell to compare the tree with
    /// the manifest ([`super::Effect::ProbeWorkspace`]); what changed is an
    /// observed edit ([`super::Input::ProbeAnswered`]).
    pub shell_tools: Vec<String>,
    /// The canonical absolute workspace root; tool paths are placed inside or
    /// outside it lexically.
    pub workspace_root: String,
}

impl FreshnessPolicy {
    /// The built-in defaults (the values of `config/default.toml`) for a
    /// workspace.
    pub fn with_defaults(workspace_root: impl Into<String>) -> Self {
        FreshnessPolicy {
            auto_sync: true,
            max_syncs_per_session: DEFAULT_MAX_SYNCS_PER_SESSION,
            max_incremental_syncs_per_session: DEFAULT_MAX_INCREMENTAL_SYNCS_PER_SESSION,
            incremental_strategy: true,
            batch_ms: DEFAULT_BATCH_MS,
            settle_ms: DEFAULT_SETTLE_MS,
            min_sync_gap_ms: DEFAULT_MIN_SYNC_GAP_MS,
            watcher_apply_ms: DEFAULT_WATCHER_APPLY_MS,
            modifying_tools: DEFAULT_MODIFYING_TOOLS
                .iter()
                .map(|tool| tool.to_string())
                .collect(),
            shell_tools: DEFAULT_SHELL_TOOLS
                .iter()
                .map(|tool| tool.to_string())
                .collect(),
            workspace_root: workspace_root.into(),
        }
    }

    /// One session's automatic-sync limits, per class of cost.
    pub(crate) fn sync_limits(&self) -> super::budget::SyncLimits {
        super::budget::SyncLimits {
            changed_files: if self.incremental_strategy {
                self.max_incremental_syncs_per_session
            } else {
                0
            },
            whole_repository: self.max_syncs_per_session,
        }
    }

    /// Whether calls of `tool` edit files.
    pub fn is_modifying(&self, tool: &str) -> bool {
        self.modifying_tools.iter().any(|known| known == tool)
    }

    /// Whether `tool` runs shell commands (and is not also listed as a
    /// modifying tool, which takes precedence).
    pub fn is_shell(&self, tool: &str) -> bool {
        !self.is_modifying(tool) && self.shell_tools.iter().any(|known| known == tool)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_match_the_documented_configuration() {
        let policy = FreshnessPolicy::with_defaults("/ws");
        assert!(policy.auto_sync);
        assert_eq!(policy.max_syncs_per_session, 2);
        assert_eq!(policy.max_incremental_syncs_per_session, 500);
        assert_eq!(policy.batch_ms, 500);
        assert_eq!(policy.settle_ms, 30_000);
        assert_eq!(policy.min_sync_gap_ms, 5_000);
        assert_eq!(policy.watcher_apply_ms, 30_000);
        assert!(policy.is_modifying("edit"));
        assert!(policy.is_modifying("write"));
        assert!(!policy.is_modifying("bash"));
        assert!(!policy.is_modifying("Edit"));
        assert!(policy.is_shell("bash"));
        assert!(!policy.is_shell("edit"));
    }
}
