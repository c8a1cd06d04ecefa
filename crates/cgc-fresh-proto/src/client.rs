//! Frames a harness extension or the `cgc-fresh` CLI sends to the service.
//!
//! The harness reports tool *names and paths*, never file contents.

use serde::{Deserialize, Serialize};

use crate::vocab::SessionStartReason;

/// A frame sent by a client (harness extension or CLI) to the service.
///
/// On the wire each variant is an object whose `type` is the variant's
/// snake_case name and whose other fields are the payload's fields.
/// Decode incoming lines with [`crate::decode_client_frame`], which names
/// the offending field on error; the enum deliberately has no `Deserialize`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ClientFrame {
    /// Introduces the client; answered by `welcome`.
    Hello(Hello),
    /// A harness session started (or was replaced).
    SessionStart(SessionStart),
    /// An agent tool is about to run on some paths.
    ToolCall(ToolCall),
    /// An agent tool finished.
    ToolResult(ToolResult),
    /// A harness session ended.
    SessionShutdown(SessionShutdown),
    /// Asks for the current `state`.
    Status,
    /// A person asks for a sync now.
    Sync,
    /// Makes this connection receive every later `state` and `notice`.
    Subscribe,
    /// Asks for the effective configuration (answered by `config`).
    Config,
    /// Takes the notices a session's connections have not received
    /// (answered by `notices`); they count as shown from then on.
    TakeNotices(TakeNotices),
    /// Asks for CGC's MCP tools and its `initialize` result (answered by
    /// `mcp`); `cgc-fresh mcp` sends it.
    McpTools,
    /// Calls one of CGC's MCP tools on the workspace's graph (answered by
    /// `mcp`, once the graph covers the workspace's edits or the
    /// read-your-writes bound passed).
    McpCall(McpCall),
}

impl ClientFrame {
    /// Every `type` a client frame may have, in declaration order.
    pub const TYPE_NAMES: [&'static str; 12] = [
        "hello",
        "session_start",
        "tool_call",
        "tool_result",
        "session_shutdown",
        "status",
        "sync",
        "subscribe",
        "config",
        "take_notices",
        "mcp_tools",
        "mcp_call",
    ];

    /// The frame's `type` on the wire.
    pub fn type_name(&self) -> &'static str {
        match self {
            ClientFrame::Hello(_) => "hello",
            ClientFrame::SessionStart(_) => "session_start",
            ClientFrame::ToolCall(_) => "tool_call",
            ClientFrame::ToolResult(_) => "tool_result",
            ClientFrame::SessionShutdown(_) => "session_shutdown",
            ClientFrame::Status => "status",
            ClientFrame::Sync => "sync",
            ClientFrame::Subscribe => "subscribe",
            ClientFrame::Config => "config",
            ClientFrame::TakeNotices(_) => "take_notices",
            ClientFrame::McpTools => "mcp_tools",
            ClientFrame::McpCall(_) => "mcp_call",
        }
    }
}

/// `hello{client, instance, protocol}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Hello {
    /// What is talking, e.g. `pi-bridge` or `cgc-fresh-cli`.
    pub client: String,
    /// Identifies one harness extension instance. Registering the same
    /// instance twice is idempotent; a new instance rebinds a replaced session.
    pub instance: String,
    /// Must be [`crate::PROTOCOL_VERSION`].
    pub protocol: u32,
}

/// `session_start{session, reason, owner_pid?}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SessionStart {
    /// The harness's session identifier.
    pub session: String,
    /// Why the session started; unknown reasons decode as `other`.
    pub reason: SessionStartReason,
    /// The process that owns the session (e.g. the Claude Code process its
    /// hooks run under): the session then lives until `session_shutdown` or
    /// until that process exits, whatever connection reported it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner_pid: Option<u32>,
}

/// `take_notices{session}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TakeNotices {
    /// The session whose notices are taken.
    pub session: String,
}

/// `tool_call{session, tool, paths}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolCall {
    /// The session the tool runs in.
    pub session: String,
    /// The tool's name, e.g. `edit` or `bash`.
    pub tool: String,
    /// Paths the tool touches, absolute or relative to the workspace root.
    /// Absent means none.
    #[serde(default)]
    pub paths: Vec<String>,
}

/// `tool_result{session, tool, ok}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolResult {
    /// The session the tool ran in.
    pub session: String,
    /// The tool's name.
    pub tool: String,
    /// Whether the tool reported success.
    pub ok: bool,
}

/// `session_shutdown{session, reason}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SessionShutdown {
    /// The session that ended.
    pub session: String,
    /// The harness's reason, free text, if it gave one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// The most bytes an `mcp_call`'s `arguments` may take as compact JSON
/// (the line itself is bounded by the codec's limit as well).
pub const MAX_MCP_ARGUMENTS_BYTES: usize = 48 * 1024;

/// `mcp_call{name, arguments}`: MCP's `tools/call` params.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct McpCall {
    /// The tool's name, as CGC's MCP server lists it.
    pub name: String,
    /// The tool's arguments (an object; absent means `{}`).
    #[serde(default = "empty_object")]
    pub arguments: serde_json::Value,
}

fn empty_object() -> serde_json::Value {
    serde_json::Value::Object(serde_json::Map::new())
}
