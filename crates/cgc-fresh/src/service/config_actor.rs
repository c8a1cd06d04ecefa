//! `ConfigActor`: owns how the configuration is loaded, and reloads it on
//! SIGHUP without restarting the service. Each load logs its warnings as
//! events; the new configuration goes to whoever subscribed.

use std::path::PathBuf;
use std::sync::Arc;

use actix::prelude::*;

use super::messages::{ConfigChanged, ReloadConfig};
use cgc_fresh_core::config::ConfigWarning;

use crate::config_load::{self, LoadedConfig};

/// The actor whose work this is, named in every log line.
const COMPONENT: &str = "config_actor";

pub struct ConfigActor {
    workspace: PathBuf,
    explicit_file: Option<PathBuf>,
    listeners: Vec<Recipient<ConfigChanged>>,
    /// The configuration in force.
    current: Arc<LoadedConfig>,
}

impl ConfigActor {
    pub fn new(
        workspace: PathBuf,
        explicit_file: Option<PathBuf>,
        listeners: Vec<Recipient<ConfigChanged>>,
        current: Arc<LoadedConfig>,
    ) -> Self {
        ConfigActor {
            workspace,
            explicit_file,
            listeners,
            current,
        }
    }

    /// Loads the layers now (from the process environment) and logs the result.
    pub fn load(
        workspace: &std::path::Path,
        explicit_file: Option<&std::path::Path>,
    ) -> LoadedConfig {
        let env = |name: &str| std::env::var(name).ok();
        let loaded = config_load::load(workspace, explicit_file, &env);
        for warning in loaded.warning_texts() {
            tracing::warn!(component = COMPONENT, event = "config_warning", warning = %warning);
        }
        tracing::info!(component = COMPONENT, event = "config_loaded", files = ?loaded.files_read(), warnings = loaded.warning_texts().len());
        loaded
    }
}

impl Actor for ConfigActor {
    type Context = Context<Self>;
}

impl Handler<ReloadConfig> for ConfigActor {
    type Result = ();
    fn handle(&mut self, _: ReloadConfig, _: &mut Self::Context) {
        let loaded = ConfigActor::load(&self.workspace, self.explicit_file.as_deref());
        // A file that applied before and cannot be read now (mid-edit, or
        // broken): its values must not silently fall back to the layers
        // below. The reload is refused as a whole and the configuration in
        // force stands; the next SIGHUP after the file is fixed applies.
        let lost: Vec<String> = loaded
            .warnings()
            .iter()
            .filter_map(|warning| match warning {
                ConfigWarning::LayerSkipped { layer, .. } => layer.path(),
                _ => None,
            })
            .filter(|path| self.current.files_read().iter().any(|read| read == path))
            .map(|path| path.display().to_string())
            .collect();
        let loaded = if lost.is_empty() {
            Arc::new(loaded)
        } else {
            tracing::warn!(
                component = COMPONENT,
                event = "config_reload_refused",
                unreadable = ?lost,
                action = "keeping the configuration in force",
            );
            Arc::new(self.current.kept_after(&loaded))
        };
        self.current = loaded.clone();
        for listener in &self.listeners {
            listener.do_send(ConfigChanged(loaded.clone()));
        }
    }
}
