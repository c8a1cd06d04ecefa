//! Applying layers in order onto the effective settings, remembering which
//! layer set each key and every problem met on the way.

use std::collections::BTreeSet;

use serde_json::{Map, Value};

use super::keys::Key;
use super::layer::Layer;
use super::settings::Settings;
use super::value::{shorten, RawValue};
use super::warning::ConfigWarning;

/// The effective configuration under construction. Start with
/// [`LayeredConfig::new`] (the built-in defaults) and apply each layer in
/// precedence order; a later layer overrides an earlier one key by key.
/// Nothing here fails: invalid input becomes a [`ConfigWarning`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LayeredConfig {
    settings: Settings,
    /// Indexed by `Key as usize`, which is the key's position in `Key::ALL`.
    origins: [Layer; Key::ALL.len()],
    warnings: Vec<ConfigWarning>,
}

impl Default for LayeredConfig {
    fn default() -> Self {
        LayeredConfig::new()
    }
}

impl LayeredConfig {
    /// The built-in defaults, every key originating from [`Layer::Defaults`].
    pub fn new() -> Self {
        LayeredConfig {
            settings: Settings::default(),
            origins: std::array::from_fn(|_| Layer::Defaults),
            warnings: Vec::new(),
        }
    }

    /// Applies one layer as the loader collected it. Keys may be nested
    /// (`{"freshness": {"watch": "auto"}}`) or dotted
    /// (`{"freshness.watch": "auto"}`); unknown keys and invalid values are
    /// skipped with a warning; `null` leaves a key unset in this layer. For
    /// [`Layer::Env`] the values are the variables' text, keyed by the
    /// key's dotted name (see [`LayeredConfig::apply_env`]).
    pub fn apply_tree(&mut self, layer: Layer, tree: &Value) {
        match tree {
            Value::Object(entries) => {
                let mut seen = BTreeSet::new();
                self.apply_entries(&layer, "", entries, &mut seen);
            }
            other => {
                let reason = format!(
                    "the top level must be an object, found {}",
                    json_kind(other)
                );
                self.skip_layer(layer, reason);
            }
        }
    }

    /// Applies the environment layer. Only the exact variable names of
    /// [`Key::env_var`] are read; every other variable is ignored. An empty
    /// variable leaves its key unset.
    pub fn apply_env<I>(&mut self, vars: I)
    where
        I: IntoIterator<Item = (String, String)>,
    {
        for (name, text) in vars {
            if let Some(key) = Key::from_env_var(&name) {
                self.apply_value(key, RawValue::Env(&text), &Layer::Env);
            }
        }
    }

    /// Records that a whole layer could not be used (missing `--config` file,
    /// unreadable or corrupt file). The settings are unchanged.
    pub fn skip_layer(&mut self, layer: Layer, reason: impl Into<String>) {
        self.warnings.push(ConfigWarning::LayerSkipped {
            layer,
            reason: reason.into(),
        });
    }

    /// The effective settings.
    pub fn settings(&self) -> &Settings {
        &self.settings
    }

    /// The layer that set the effective value of `key`.
    pub fn origin(&self, key: Key) -> &Layer {
        &self.origins[key as usize]
    }

    /// Every problem met so far, in the order met.
    pub fn warnings(&self) -> &[ConfigWarning] {
        &self.warnings
    }

    /// The effective settings, dropping origins and warnings.
    pub fn into_settings(self) -> Settings {
        self.settings
    }

    fn apply_entries(
        &mut self,
        layer: &Layer,
        prefix: &str,
        entries: &Map<String, Value>,
        seen: &mut BTreeSet<Key>,
    ) {
        for (name, value) in entries {
            let path = if prefix.is_empty() {
                name.clone()
            } else {
                format!("{prefix}.{name}")
            };
            if let Some(key) = Key::from_name(&path) {
                if !seen.insert(key) {
                    self.warnings.push(ConfigWarning::DuplicateKey {
                        key,
                        value: RawValue::Tree(value).quoted(),
                        layer: layer.clone(),
                    });
                    continue;
                }
                let raw = match (layer, value) {
                    // The environment layer's values are variables' text.
                    (Layer::Env, Value::String(text)) => RawValue::Env(text),
                    _ => RawValue::Tree(value),
                };
                self.apply_value(key, raw, layer);
            } else if let (Value::Object(inner), true) = (value, Key::is_section_path(&path)) {
                self.apply_entries(layer, &path, inner, seen);
            } else {
                self.warnings.push(ConfigWarning::UnknownKey {
                    suggestion: Key::case_insensitive_match(&path),
                    key: shorten(path),
                    value: RawValue::Tree(value).quoted(),
                    layer: layer.clone(),
                });
            }
        }
    }

    fn apply_value(&mut self, key: Key, raw: RawValue<'_>, layer: &Layer) {
        if raw.is_unset() {
            return;
        }
        match self.settings.assign(key, raw) {
            Ok(()) => self.origins[key as usize] = layer.clone(),
            Err(reason) => self.warnings.push(ConfigWarning::InvalidValue {
                key,
                value: raw.quoted(),
                layer: layer.clone(),
                reason,
            }),
        }
    }
}

fn json_kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}
