//! The value types of the configuration that are more than a number, a
//! flag or a string. The [`Settings`] struct itself is declared, key by key,
//! in `schema.rs`.

use std::fmt;
use std::time::Duration;

pub use super::schema::{
    CgcSettings, FreshnessSettings, LifecycleSettings, ServiceSettings, Settings,
    SupervisorSettings,
};

/// `freshness.watch`: whether a managed `cgc watch` child runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum WatchMode {
    /// Never spawn a watcher; edits are synced lazily.
    #[default]
    Off,
    /// Spawn the watcher at session start on every backend.
    On,
    /// Spawn only for a server backend on an already indexed workspace.
    Auto,
}

impl WatchMode {
    /// The configuration spelling: `off`, `on` or `auto`.
    pub fn as_str(self) -> &'static str {
        match self {
            WatchMode::Off => "off",
            WatchMode::On => "on",
            WatchMode::Auto => "auto",
        }
    }
}

impl fmt::Display for WatchMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// `cgc.syncStrategy`: what one sync runs (see `config/default.toml`).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub enum SyncStrategy {
    /// CGC's own incremental update applied to exactly the changed files by
    /// the service's driver, run with `cgc`'s interpreter; a whole-workspace
    /// sync, too many files, or a CGC without the internal API it needs runs
    /// `Reconcile` instead.
    #[default]
    Incremental,
    /// `cgc watch --sync-on-start .`, stopped once it is watching.
    Reconcile,
    /// `cgc update . --quiet`.
    Update,
    /// `cgc index .`.
    Index,
    /// These arguments after the executable and `cgc.globalArgs`; never empty.
    Custom(Vec<String>),
}

impl SyncStrategy {
    /// The configuration spelling of a named strategy; `None` for `Custom`.
    pub fn name(&self) -> Option<&'static str> {
        match self {
            SyncStrategy::Incremental => Some("incremental"),
            SyncStrategy::Reconcile => Some("reconcile"),
            SyncStrategy::Update => Some("update"),
            SyncStrategy::Index => Some("index"),
            SyncStrategy::Custom(_) => None,
        }
    }
}

impl fmt::Display for SyncStrategy {
    /// Named strategies print their name; a custom one prints in the
    /// `custom: arg arg` form accepted by the environment layer.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SyncStrategy::Custom(args) => write!(f, "custom: {}", args.join(" ")),
            named => f.write_str(named.name().unwrap_or_default()),
        }
    }
}

impl ServiceSettings {
    /// The idle linger before exit, or `None` when the service never exits
    /// for idleness (`idleExitMs = 0`).
    pub fn idle_exit(&self) -> Option<Duration> {
        (self.idle_exit_ms > 0).then(|| Duration::from_millis(self.idle_exit_ms))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sync_strategy_displays_in_its_configuration_spelling() {
        assert_eq!(SyncStrategy::Reconcile.to_string(), "reconcile");
        assert_eq!(SyncStrategy::Incremental.to_string(), "incremental");
        assert_eq!(SyncStrategy::Update.to_string(), "update");
        assert_eq!(SyncStrategy::Index.to_string(), "index");
        let custom = SyncStrategy::Custom(vec!["index".into(), ".".into(), "--force".into()]);
        assert_eq!(custom.to_string(), "custom: index . --force");
    }

    #[test]
    fn zero_idle_exit_means_never() {
        let mut service = Settings::default().service;
        assert_eq!(service.idle_exit(), None);
        service.idle_exit_ms = 1500;
        assert_eq!(service.idle_exit(), Some(Duration::from_millis(1500)));
    }
}
