//! Non-fatal configuration problems. Loading never fails: each problem is
//! recorded as a warning and the value from the previous layer stands.

use std::fmt;

use super::keys::Key;
use super::layer::Layer;

/// One problem found while applying a layer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ConfigWarning {
    /// A known key with a value it does not accept; the value was skipped.
    InvalidValue {
        key: Key,
        /// The value as the layer wrote it, JSON-quoted (and shortened).
        value: String,
        layer: Layer,
        reason: String,
    },
    /// A name that is not a configuration key; it was ignored.
    UnknownKey {
        key: String,
        value: String,
        layer: Layer,
        /// The key it probably meant (same letters, different case).
        suggestion: Option<Key>,
    },
    /// The same key written twice in one file (e.g. nested and dotted); the
    /// first one was applied and this one skipped.
    DuplicateKey {
        key: Key,
        value: String,
        layer: Layer,
    },
    /// The whole layer was skipped: unreadable file, corrupt JSON/TOML, or a
    /// top level that is not an object.
    LayerSkipped { layer: Layer, reason: String },
}

impl ConfigWarning {
    /// The layer the problem is in.
    pub fn layer(&self) -> &Layer {
        match self {
            ConfigWarning::InvalidValue { layer, .. }
            | ConfigWarning::UnknownKey { layer, .. }
            | ConfigWarning::DuplicateKey { layer, .. }
            | ConfigWarning::LayerSkipped { layer, .. } => layer,
        }
    }

    /// The key the problem is about (`None` when a whole layer was skipped).
    pub fn key_name(&self) -> Option<&str> {
        match self {
            ConfigWarning::InvalidValue { key, .. } | ConfigWarning::DuplicateKey { key, .. } => {
                Some(key.name())
            }
            ConfigWarning::UnknownKey { key, .. } => Some(key),
            ConfigWarning::LayerSkipped { .. } => None,
        }
    }

    /// The offending value, JSON-quoted (`None` when a whole layer was skipped).
    pub fn value(&self) -> Option<&str> {
        match self {
            ConfigWarning::InvalidValue { value, .. }
            | ConfigWarning::UnknownKey { value, .. }
            | ConfigWarning::DuplicateKey { value, .. } => Some(value),
            ConfigWarning::LayerSkipped { .. } => None,
        }
    }
}

impl fmt::Display for ConfigWarning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ConfigWarning::InvalidValue {
                key,
                value,
                layer,
                reason,
            } => write!(
                f,
                "invalid value for {key} in {}: {value} ({reason}); the previous value stands",
                layer.describe_for(*key)
            ),
            ConfigWarning::UnknownKey {
                key,
                value,
                layer,
                suggestion,
            } => {
                write!(
                    f,
                    "unknown configuration key {key} in {layer} (value {value}); ignored"
                )?;
                match suggestion {
                    Some(known) => write!(f, "; did you mean {known}?"),
                    None => Ok(()),
                }
            }
            ConfigWarning::DuplicateKey { key, value, layer } => write!(
                f,
                "{key} is set more than once in {layer}; the extra value {value} is ignored"
            ),
            ConfigWarning::LayerSkipped { layer, reason } => {
                write!(f, "configuration layer {layer} skipped: {reason}")
            }
        }
    }
}
