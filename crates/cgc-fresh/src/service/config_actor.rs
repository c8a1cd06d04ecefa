//! `ConfigActor`: owns how the configuration is loaded, and reloads it on
//! SIGHUP without restarting the service. Each load logs its warnings as
//! events; the new configuration goes to whoever subscribed.

use std::path::PathBuf;
use std::sync::Arc;

use actix::prelude::*;

use super::messages::{ConfigChanged, ReloadConfig};
use crate::config_load::{self, LoadedConfig};

pub struct ConfigActor {
    workspace: PathBuf,
    explicit_file: Option<PathBuf>,
    listeners: Vec<Recipient<ConfigChanged>>,
}

impl ConfigActor {
    pub fn new(
        workspace: PathBuf,
        explicit_file: Option<PathBuf>,
        listeners: Vec<Recipient<ConfigChanged>>,
    ) -> Self {
        ConfigActor {
            workspace,
            explicit_file,
            listeners,
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
            tracing::warn!(event = "config_warning", warning = %warning);
        }
        tracing::info!(event = "config_loaded", files = ?loaded.files_read(), warnings = loaded.warning_texts().len());
        loaded
    }
}

impl Actor for ConfigActor {
    type Context = Context<Self>;
}

impl Handler<ReloadConfig> for ConfigActor {
    type Result = ();
    fn handle(&mut self, _: ReloadConfig, _: &mut Self::Context) {
        let loaded = Arc::new(ConfigActor::load(
            &self.workspace,
            self.explicit_file.as_deref(),
        ));
        for listener in &self.listeners {
            listener.do_send(ConfigChanged(loaded.clone()));
        }
    }
}
