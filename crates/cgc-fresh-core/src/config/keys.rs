//! The closed set of configuration keys: their dotted file names and the
//! environment variables that override them.

use std::fmt;

/// One configuration key. The set is closed: a key that is not listed here is
/// unknown and only produces a warning.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Key {
    FreshnessWatch,
    FreshnessWatcherLivenessMs,
    FreshnessAutoSync,
    FreshnessMaxSyncsPerSession,
    FreshnessBatchMs,
    FreshnessSettleMs,
    FreshnessModifyingTools,
    CgcExecutable,
    CgcTimeoutMs,
    CgcMaintenanceTimeoutMs,
    CgcSyncStrategy,
    CgcGlobalArgs,
    LifecycleAutoCreate,
    ServiceIdleExitMs,
    ServiceMaxLineBytes,
    SupervisorStopGraceMs,
}

impl Key {
    /// Every key, in the order they are documented and rendered.
    pub const ALL: [Key; 16] = [
        Key::FreshnessWatch,
        Key::FreshnessWatcherLivenessMs,
        Key::FreshnessAutoSync,
        Key::FreshnessMaxSyncsPerSession,
        Key::FreshnessBatchMs,
        Key::FreshnessSettleMs,
        Key::FreshnessModifyingTools,
        Key::CgcExecutable,
        Key::CgcTimeoutMs,
        Key::CgcMaintenanceTimeoutMs,
        Key::CgcSyncStrategy,
        Key::CgcGlobalArgs,
        Key::LifecycleAutoCreate,
        Key::ServiceIdleExitMs,
        Key::ServiceMaxLineBytes,
        Key::SupervisorStopGraceMs,
    ];

    /// The dotted name used in files, e.g. `freshness.watcherLivenessMs`.
    pub fn name(self) -> &'static str {
        match self {
            Key::FreshnessWatch => "freshness.watch",
            Key::FreshnessWatcherLivenessMs => "freshness.watcherLivenessMs",
            Key::FreshnessAutoSync => "freshness.autoSync",
            Key::FreshnessMaxSyncsPerSession => "freshness.maxSyncsPerSession",
            Key::FreshnessBatchMs => "freshness.batchMs",
            Key::FreshnessSettleMs => "freshness.settleMs",
            Key::FreshnessModifyingTools => "freshness.modifyingTools",
            Key::CgcExecutable => "cgc.executable",
            Key::CgcTimeoutMs => "cgc.timeoutMs",
            Key::CgcMaintenanceTimeoutMs => "cgc.maintenanceTimeoutMs",
            Key::CgcSyncStrategy => "cgc.syncStrategy",
            Key::CgcGlobalArgs => "cgc.globalArgs",
            Key::LifecycleAutoCreate => "lifecycle.autoCreate",
            Key::ServiceIdleExitMs => "service.idleExitMs",
            Key::ServiceMaxLineBytes => "service.maxLineBytes",
            Key::SupervisorStopGraceMs => "supervisor.stopGraceMs",
        }
    }

    /// The environment variable that sets this key: `CGC_` + section + key in
    /// SCREAMING_SNAKE, the `cgc.` section not repeated. The names of the
    /// keys the Pi extension already had are kept exactly.
    pub fn env_var(self) -> &'static str {
        match self {
            Key::FreshnessWatch => "CGC_FRESHNESS_WATCH",
            Key::FreshnessWatcherLivenessMs => "CGC_FRESHNESS_WATCHER_LIVENESS_MS",
            Key::FreshnessAutoSync => "CGC_FRESHNESS_AUTO_SYNC",
            Key::FreshnessMaxSyncsPerSession => "CGC_FRESHNESS_MAX_SYNCS_PER_SESSION",
            Key::FreshnessBatchMs => "CGC_FRESHNESS_BATCH_MS",
            Key::FreshnessSettleMs => "CGC_FRESHNESS_SETTLE_MS",
            Key::FreshnessModifyingTools => "CGC_FRESHNESS_MODIFYING_TOOLS",
            Key::CgcExecutable => "CGC_EXECUTABLE",
            Key::CgcTimeoutMs => "CGC_TIMEOUT_MS",
            Key::CgcMaintenanceTimeoutMs => "CGC_MAINTENANCE_TIMEOUT_MS",
            Key::CgcSyncStrategy => "CGC_SYNC_STRATEGY",
            Key::CgcGlobalArgs => "CGC_GLOBAL_ARGS",
            Key::LifecycleAutoCreate => "CGC_LIFECYCLE_AUTO_CREATE",
            Key::ServiceIdleExitMs => "CGC_SERVICE_IDLE_EXIT_MS",
            Key::ServiceMaxLineBytes => "CGC_SERVICE_MAX_LINE_BYTES",
            Key::SupervisorStopGraceMs => "CGC_SUPERVISOR_STOP_GRACE_MS",
        }
    }

    /// The key with this exact dotted name (names are case-sensitive, as in
    /// the Pi extension's files).
    pub fn from_name(name: &str) -> Option<Key> {
        Key::ALL.into_iter().find(|key| key.name() == name)
    }

    /// The key with this exact environment variable name.
    pub fn from_env_var(var: &str) -> Option<Key> {
        Key::ALL.into_iter().find(|key| key.env_var() == var)
    }

    /// A key whose name differs from `name` only in letter case; used to
    /// suggest the intended key in an unknown-key warning.
    pub fn case_insensitive_match(name: &str) -> Option<Key> {
        Key::ALL
            .into_iter()
            .find(|key| key.name().eq_ignore_ascii_case(name))
    }

    /// True when `prefix` names a section (or other strict prefix) of some
    /// key, so a nested object under it is walked rather than rejected.
    pub(crate) fn is_section_path(prefix: &str) -> bool {
        Key::ALL.into_iter().any(|key| {
            key.name()
                .strip_prefix(prefix)
                .is_some_and(|rest| rest.starts_with('.'))
        })
    }
}

impl fmt::Display for Key {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_env_vars_round_trip_and_are_unique() {
        for key in Key::ALL {
            assert_eq!(Key::from_name(key.name()), Some(key));
            assert_eq!(Key::from_env_var(key.env_var()), Some(key));
        }
        let mut names: Vec<_> = Key::ALL.iter().map(|k| k.name()).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), Key::ALL.len());
    }

    /// `LayeredConfig` indexes its origins by `key as usize`.
    #[test]
    fn all_lists_keys_in_declaration_order() {
        for (index, key) in Key::ALL.into_iter().enumerate() {
            assert_eq!(key as usize, index, "{key}");
        }
    }

    #[test]
    fn sections_are_the_prefixes_of_keys() {
        for section in ["freshness", "cgc", "lifecycle", "service", "supervisor"] {
            assert!(Key::is_section_path(section), "{section}");
        }
        assert!(!Key::is_section_path("fresh"));
        assert!(!Key::is_section_path("freshness.watch"));
    }

    #[test]
    fn case_insensitive_match_suggests_the_real_key() {
        assert_eq!(
            Key::case_insensitive_match("freshness.watcherlivenessms"),
            Some(Key::FreshnessWatcherLivenessMs)
        );
        assert_eq!(Key::from_name("freshness.watcherlivenessms"), None);
    }
}
