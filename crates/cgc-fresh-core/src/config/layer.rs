//! Where a configuration value came from.

use std::fmt;
use std::path::{Path, PathBuf};

use super::keys::Key;

/// One configuration layer, in precedence order: each later variant
/// overrides the earlier ones.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub enum Layer {
    /// The built-in defaults (`config/default.toml`).
    #[default]
    Defaults,
    /// The user's file (`~/.pi/agent/cgc.json`, or under `PI_CODING_AGENT_DIR`).
    User { path: PathBuf },
    /// The workspace's file (`<workspace>/.pi/cgc.json`).
    Workspace { path: PathBuf },
    /// The file named by `--config FILE`.
    File { path: PathBuf },
    /// The `CGC_*` environment variables.
    Env,
}

impl Layer {
    /// A stable one-word name for structured logs.
    pub fn kind(&self) -> &'static str {
        match self {
            Layer::Defaults => "defaults",
            Layer::User { .. } => "user",
            Layer::Workspace { .. } => "workspace",
            Layer::File { .. } => "file",
            Layer::Env => "env",
        }
    }

    /// The file this layer was read from, if it is a file layer.
    pub fn path(&self) -> Option<&Path> {
        match self {
            Layer::User { path } | Layer::Workspace { path } | Layer::File { path } => Some(path),
            Layer::Defaults | Layer::Env => None,
        }
    }

    /// The layer as a human reads it when it set `key`: the environment layer
    /// names the variable, file layers name the file.
    pub fn describe_for(&self, key: Key) -> String {
        match self {
            Layer::Env => format!("environment ({})", key.env_var()),
            other => other.to_string(),
        }
    }
}

impl fmt::Display for Layer {
    /// `defaults`, `user (PATH)`, `workspace (PATH)`, `--config (PATH)`,
    /// `environment`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Layer::Defaults => f.write_str("defaults"),
            Layer::User { path } => write!(f, "user ({})", path.display()),
            Layer::Workspace { path } => write!(f, "workspace ({})", path.display()),
            Layer::File { path } => write!(f, "--config ({})", path.display()),
            Layer::Env => f.write_str("environment"),
        }
    }
}
