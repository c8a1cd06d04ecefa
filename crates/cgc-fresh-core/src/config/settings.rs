//! The typed, effective configuration. Its `Default` is the built-in defaults
//! layer and must equal `config/default.toml` (a test in the binary crate,
//! which embeds that file, holds the two together).

use std::fmt;
use std::time::Duration;

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
    /// `cgc watch --sync-on-start .`, stopped once it is watching.
    #[default]
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

/// The `freshness.*` keys.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FreshnessSettings {
    pub watch: WatchMode,
    pub watcher_liveness_ms: u64,
    pub auto_sync: bool,
    pub max_syncs_per_session: u32,
    pub batch_ms: u64,
    pub settle_ms: u64,
    pub modifying_tools: Vec<String>,
}

/// The `cgc.*` keys.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CgcSettings {
    pub executable: String,
    pub timeout_ms: u64,
    pub maintenance_timeout_ms: u64,
    pub sync_strategy: SyncStrategy,
    pub global_args: Vec<String>,
}

/// The `lifecycle.*` keys.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LifecycleSettings {
    pub auto_create: bool,
}

/// The `service.*` keys.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServiceSettings {
    /// 0 means never exit for idleness; see [`ServiceSettings::idle_exit`].
    pub idle_exit_ms: u64,
    pub max_line_bytes: usize,
}

impl ServiceSettings {
    /// The idle linger before exit, or `None` when the service never exits
    /// for idleness (`idleExitMs = 0`).
    pub fn idle_exit(&self) -> Option<Duration> {
        (self.idle_exit_ms > 0).then(|| Duration::from_millis(self.idle_exit_ms))
    }
}

/// The `supervisor.*` keys.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SupervisorSettings {
    pub stop_grace_ms: u64,
}

/// The whole effective configuration, one field per key, grouped by section.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Settings {
    pub freshness: FreshnessSettings,
    pub cgc: CgcSettings,
    pub lifecycle: LifecycleSettings,
    pub service: ServiceSettings,
    pub supervisor: SupervisorSettings,
}

impl Default for Settings {
    /// The built-in defaults; identical to `config/default.toml`.
    fn default() -> Self {
        Settings {
            freshness: FreshnessSettings {
                watch: WatchMode::Off,
                watcher_liveness_ms: 15_000,
                auto_sync: true,
                max_syncs_per_session: 2,
                batch_ms: 500,
                settle_ms: 30_000,
                modifying_tools: ["write", "edit", "remove_file", "rename_file", "ctx_patch"]
                    .map(String::from)
                    .to_vec(),
            },
            cgc: CgcSettings {
                executable: "cgc".to_owned(),
                timeout_ms: 15_000,
                maintenance_timeout_ms: 600_000,
                sync_strategy: SyncStrategy::Reconcile,
                global_args: Vec::new(),
            },
            lifecycle: LifecycleSettings { auto_create: false },
            service: ServiceSettings {
                idle_exit_ms: 0,
                max_line_bytes: 65_536,
            },
            supervisor: SupervisorSettings {
                stop_grace_ms: 2_000,
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sync_strategy_displays_in_its_configuration_spelling() {
        assert_eq!(SyncStrategy::Reconcile.to_string(), "reconcile");
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
