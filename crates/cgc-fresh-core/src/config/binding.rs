//! Binds each key to its field of [`Settings`]: how a raw value is validated
//! and stored, and how the effective value reads back for rendering. Adding a
//! key means one arm in each match here, a field in `settings.rs`, a variant
//! in `keys.rs` and its documented entry in `config/default.toml`.

use serde_json::Value;

use super::keys::Key;
use super::settings::{Settings, SyncStrategy};
use super::value::{self, EnvListSyntax, RawValue, MAX_LINE_BYTES, MAX_MILLIS, MIN_LINE_BYTES};

impl Settings {
    /// Validates `raw` for `key` and stores it; on error nothing changes and
    /// the reason is returned.
    pub(crate) fn assign(&mut self, key: Key, raw: RawValue<'_>) -> Result<(), String> {
        let positive_ms = |raw| value::integer(raw, 1, MAX_MILLIS);
        let non_negative_ms = |raw| value::integer(raw, 0, MAX_MILLIS);
        let freshness = &mut self.freshness;
        let cgc = &mut self.cgc;
        match key {
            Key::FreshnessWatch => freshness.watch = value::watch_mode(raw)?,
            Key::FreshnessWatcherLivenessMs => freshness.watcher_liveness_ms = positive_ms(raw)?,
            Key::FreshnessAutoSync => freshness.auto_sync = value::boolean(raw)?,
            Key::FreshnessMaxSyncsPerSession => {
                let count = value::integer(raw, 0, u64::from(u32::MAX))?;
                freshness.max_syncs_per_session =
                    u32::try_from(count).map_err(|_| format!("must be at most {}", u32::MAX))?;
            }
            Key::FreshnessBatchMs => freshness.batch_ms = non_negative_ms(raw)?,
            Key::FreshnessSettleMs => freshness.settle_ms = positive_ms(raw)?,
            Key::FreshnessModifyingTools => {
                freshness.modifying_tools = value::string_list(raw, EnvListSyntax::CommaSeparated)?;
            }
            Key::CgcExecutable => cgc.executable = value::non_empty_string(raw)?,
            Key::CgcTimeoutMs => cgc.timeout_ms = positive_ms(raw)?,
            Key::CgcMaintenanceTimeoutMs => cgc.maintenance_timeout_ms = positive_ms(raw)?,
            Key::CgcSyncStrategy => cgc.sync_strategy = value::sync_strategy(raw)?,
            Key::CgcGlobalArgs => {
                cgc.global_args = value::string_list(raw, EnvListSyntax::WhitespaceSeparated)?;
            }
            Key::LifecycleAutoCreate => self.lifecycle.auto_create = value::boolean(raw)?,
            Key::ServiceIdleExitMs => self.service.idle_exit_ms = non_negative_ms(raw)?,
            Key::ServiceMaxLineBytes => {
                let bytes = value::integer(raw, MIN_LINE_BYTES, MAX_LINE_BYTES)?;
                self.service.max_line_bytes =
                    usize::try_from(bytes).map_err(|_| "too large for this platform".to_owned())?;
            }
            Key::SupervisorStopGraceMs => self.supervisor.stop_grace_ms = positive_ms(raw)?,
        }
        Ok(())
    }

    /// The effective value of `key` in the form a file would write it.
    pub fn value_of(&self, key: Key) -> Value {
        let freshness = &self.freshness;
        let cgc = &self.cgc;
        match key {
            Key::FreshnessWatch => Value::from(freshness.watch.as_str()),
            Key::FreshnessWatcherLivenessMs => Value::from(freshness.watcher_liveness_ms),
            Key::FreshnessAutoSync => Value::from(freshness.auto_sync),
            Key::FreshnessMaxSyncsPerSession => Value::from(freshness.max_syncs_per_session),
            Key::FreshnessBatchMs => Value::from(freshness.batch_ms),
            Key::FreshnessSettleMs => Value::from(freshness.settle_ms),
            Key::FreshnessModifyingTools => Value::from(freshness.modifying_tools.clone()),
            Key::CgcExecutable => Value::from(cgc.executable.as_str()),
            Key::CgcTimeoutMs => Value::from(cgc.timeout_ms),
            Key::CgcMaintenanceTimeoutMs => Value::from(cgc.maintenance_timeout_ms),
            Key::CgcSyncStrategy => match &cgc.sync_strategy {
                SyncStrategy::Custom(args) => Value::from(args.clone()),
                named => Value::from(named.name().unwrap_or_default()),
            },
            Key::CgcGlobalArgs => Value::from(cgc.global_args.clone()),
            Key::LifecycleAutoCreate => Value::from(self.lifecycle.auto_create),
            Key::ServiceIdleExitMs => Value::from(self.service.idle_exit_ms),
            Key::ServiceMaxLineBytes => Value::from(self.service.max_line_bytes),
            Key::SupervisorStopGraceMs => Value::from(self.supervisor.stop_grace_ms),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Writing back what `value_of` reads must reproduce the same settings:
    /// the render is a valid configuration file.
    #[test]
    fn every_value_read_back_assigns_to_itself() {
        let defaults = Settings::default();
        let mut copy = Settings::default();
        copy.cgc.sync_strategy = SyncStrategy::Update;
        for key in Key::ALL {
            let value = defaults.value_of(key);
            copy.assign(key, RawValue::Tree(&value))
                .unwrap_or_else(|reason| panic!("{key}: {reason}"));
        }
        assert_eq!(copy, defaults);
    }
}
