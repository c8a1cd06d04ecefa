//! Frames the service sends to a harness extension or the CLI.

use serde::{Deserialize, Serialize};

use crate::error_code::ErrorCode;
use crate::vocab::{FreshnessStatus, NoticeCondition, NoticeLevel, SyncPhase};

/// A frame sent by the service.
///
/// On the wire each variant is an object whose `type` is the variant's
/// snake_case name and whose other fields are the payload's fields.
/// Decode incoming lines with [`crate::decode_server_frame`].
// `State` is the largest variant and also the most frequent frame (every
// change is pushed to subscribers): boxing it would add an allocation to the
// common case to save a few hundred bytes in frames that live for one write.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ServerFrame {
    /// Answers `hello`.
    Welcome(Welcome),
    /// The workspace's freshness; answers `status`, and is pushed to
    /// subscribers on every change.
    State(StateFrame),
    /// A human-facing message; pushed to subscribers.
    Notice(Notice),
    /// A request was accepted and needs no other answer.
    Ack,
    /// A request was refused.
    Error(ErrorFrame),
    /// Answers the client's `config`.
    Config(ConfigFrame),
    /// Answers `take_notices`.
    Notices(NoticesFrame),
    /// Answers `mcp_tools` and `mcp_call`.
    Mcp(McpAnswer),
}

impl ServerFrame {
    /// Every `type` a server frame may have, in declaration order.
    pub const TYPE_NAMES: [&'static str; 8] = [
        "welcome", "state", "notice", "ack", "error", "config", "notices", "mcp",
    ];

    /// The frame's `type` on the wire.
    pub fn type_name(&self) -> &'static str {
        match self {
            ServerFrame::Welcome(_) => "welcome",
            ServerFrame::State(_) => "state",
            ServerFrame::Notice(_) => "notice",
            ServerFrame::Ack => "ack",
            ServerFrame::Error(_) => "error",
            ServerFrame::Config(_) => "config",
            ServerFrame::Notices(_) => "notices",
            ServerFrame::Mcp(_) => "mcp",
        }
    }
}

/// `welcome{protocol, service_version, pid, workspace}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Welcome {
    /// Always [`crate::PROTOCOL_VERSION`].
    pub protocol: u32,
    /// The service's crate version, e.g. `0.1.0`.
    pub service_version: String,
    /// The service's process id.
    pub pid: u32,
    /// The canonical workspace root the service keeps fresh.
    pub workspace: String,
}

/// `state{…}`: everything a person needs to judge the graph's freshness.
/// Times are unix milliseconds. Absent facts are omitted, not `null`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StateFrame {
    /// The canonical workspace root.
    pub workspace: String,
    /// The freshness status.
    pub status: FreshnessStatus,
    /// When the last sync completed successfully.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_synced_at: Option<u64>,
    /// When the first edit not covered by a completed sync was observed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stale_since: Option<u64>,
    /// The last sync or watcher error, for people.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_error: Option<String>,
    /// Counts observed edits; a sync covers the epoch it started at.
    pub edit_epoch: u64,
    /// Whether a sync is running now.
    pub syncing: bool,
    /// The watcher, when watch mode is configured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub watcher: Option<WatcherFacts>,
    /// The graph backend, once detected.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backend: Option<BackendFacts>,
    /// A human hint, e.g. `restored from disk`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
    /// Problems of the service's setup a person should fix, e.g. `cgc` not
    /// found; omitted when there are none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
    /// What a sync that has run for a while is doing; omitted while no
    /// sync runs and during a sync's first seconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub progress: Option<SyncProgress>,
}

/// `state.progress`: the phase of a long sync and, where the phase counts
/// files, how many of how many are done.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SyncProgress {
    /// What the sync is doing.
    pub phase: SyncPhase,
    /// Files done in this phase; present with `total` or not at all.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub done: Option<u64>,
    /// Files this phase has to do.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub total: Option<u64>,
    /// When the sync started (unix ms).
    pub since: u64,
}

/// What the service knows about its watcher child.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WatcherFacts {
    /// The configured watch mode.
    pub mode: String,
    /// The supervisor's state, e.g. `running` or `backoff`.
    pub state: String,
    /// The watcher's process id while one runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pid: Option<u32>,
    /// When the watcher entered `state` (unix ms).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub since: Option<u64>,
}

/// Which graph backend serves the workspace and how that was decided.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BackendFacts {
    /// The backend, e.g. `kuzudb` or `neo4j`.
    pub kind: String,
    /// How it was determined, e.g. `config` or `detected`.
    pub source: String,
}

/// Who a notice is for. The only value is the person: a notice must never be
/// fed into an agent prompt.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Audience {
    /// The person at the harness.
    #[default]
    User,
}

/// `notice{session, condition, level, text, audience}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Notice {
    /// The session the notice concerns; absent for workspace-wide notices.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session: Option<String>,
    /// What happened.
    pub condition: NoticeCondition,
    /// How loud it is.
    pub level: NoticeLevel,
    /// The message, written for a person.
    pub text: String,
    /// Always `user`; absent on the wire decodes as `user`.
    #[serde(default)]
    pub audience: Audience,
}

/// `notices{session, notices}`: the notices taken for a session, oldest
/// condition first; empty when there were none.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NoticesFrame {
    /// The session they were taken for.
    pub session: String,
    /// The notices, each as a `notice` frame would carry it.
    pub notices: Vec<Notice>,
}

/// `error{code, message, field}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ErrorFrame {
    /// What kind of refusal this is.
    pub code: ErrorCode,
    /// A human explanation.
    pub message: String,
    /// The request field at fault, when one is (e.g. `session`, `paths[2]`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub field: Option<String>,
}

impl ErrorFrame {
    /// An error frame that names no field.
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        ErrorFrame {
            code,
            message: message.into(),
            field: None,
        }
    }

    /// The reply to a line longer than `limit` bytes.
    pub fn too_large(limit: usize) -> Self {
        ErrorFrame::new(
            ErrorCode::TooLarge,
            format!("line exceeds the limit of {limit} bytes; closing the connection"),
        )
    }
}

/// `config{values, warnings}`: the effective configuration.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ConfigFrame {
    /// The effective configuration as a JSON object.
    pub values: serde_json::Value,
    /// Problems found while loading it (unknown keys, clamped values…).
    #[serde(default)]
    pub warnings: Vec<String>,
}

/// `mcp{result?, error?}`: the `result` or the `error` member of the
/// JSON-RPC response CGC's own MCP server (`cgc mcp start`) gives to the
/// same request. For `mcp_tools` the result is `{tools, initialize}`.
/// Exactly one of the two is present.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct McpAnswer {
    /// The JSON-RPC `result` member.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<serde_json::Value>,
    /// The JSON-RPC `error` member (`code`, `message`, `data`?).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<serde_json::Value>,
}
