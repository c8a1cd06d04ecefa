//! Layered configuration: validation and precedence, with no I/O.
//!
//! The effective configuration is built from layers applied in order, each
//! overriding the previous one key by key:
//!
//! 1. built-in defaults (`config/default.toml`, which also documents every key),
//! 2. the user file, 3. the workspace file, 4. the `--config FILE` file,
//! 5. the `CGC_*` environment variables.
//!
//! Every key is declared once, in `schema.rs` (name, type, default, kind of
//! value, environment variable, documentation); the key lists, [`Settings`],
//! the binding of values into it, the rendering and the text of
//! `config/default.toml` all derive from that table.
//!
//! The binary reads the files and the environment (through config-rs) and
//! hands each layer's values to [`LayeredConfig`] as plain JSON; everything
//! here is pure. Loading never
//! fails: an invalid value, an unknown key or an unusable layer becomes a
//! [`ConfigWarning`] naming the key, the value and the layer, and the value
//! from the previous layer stands. For every key the layer that set its
//! effective value is kept ([`LayeredConfig::origin`]) so `status` output can
//! say where a surprising value came from.
//!
//! ```
//! use cgc_fresh_core::config::{Key, Layer, LayeredConfig, WatchMode};
//! use serde_json::json;
//!
//! let mut config = LayeredConfig::new();
//! let workspace = Layer::Workspace { path: ".pi/cgc.json".into() };
//! config.apply_tree(workspace.clone(), &json!({"freshness": {"watch": true}}));
//! config.apply_env([("CGC_FRESHNESS_WATCH".to_owned(), "sometimes".to_owned())]);
//!
//! assert_eq!(config.settings().freshness.watch, WatchMode::On);
//! assert_eq!(config.origin(Key::FreshnessWatch), &workspace);
//! assert_eq!(config.warnings().len(), 1); // "sometimes" was skipped
//! ```

mod keys;
mod layer;
mod layered;
mod render;
mod schema;
mod settings;
mod value;
mod warning;

#[cfg(test)]
mod tests;

pub use keys::Key;
pub use layer::Layer;
pub use layered::LayeredConfig;
pub use schema::defaults_file;
pub use settings::{
    CgcSettings, FreshnessSettings, LifecycleSettings, ServiceSettings, Settings,
    SupervisorSettings, SyncStrategy, WatchMode,
};
pub use value::{MAX_LINE_BYTES, MAX_MILLIS, MIN_LINE_BYTES};
pub use warning::ConfigWarning;
