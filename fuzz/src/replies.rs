//! How the service answers one line on a connection, restated from the
//! connection and workspace actors of the `cgc-fresh` binary (which a fuzz
//! target cannot link) with the protocol crate's public API only:
//!
//! - a line that does not decode: one `error` reply, built by
//!   [`FrameError::to_reply`], the connection stays open;
//! - `hello` → `welcome`, `status` → `state`, `config` → `config`,
//!   `take_notices` → `notices` (an `unknown_session` error in its place
//!   for a session that is not live), each carrying the request's id;
//! - `subscribe` → `ack` when the request had an id, then a `state`
//!   without one (where things stand);
//! - the events (`session_start`, `tool_call`, `tool_result`,
//!   `session_shutdown`) and `sync` → `ack` only when the request had an
//!   id, so a harness can pipeline them (for a `tool_call`/`tool_result`
//!   naming a session that is not live, an `unknown_session` error in the
//!   ack's place: one reply either way);
//! - an over-long line: one `too_large` error without an id, then the
//!   connection closes.
//!
//! The payloads of `welcome`, `state` and `config` are the service's
//! business; placeholders stand in for them.

use cgc_fresh_proto::{
    ClientFrame, ConfigFrame, Envelope, ErrorCode, ErrorFrame, FrameError, FreshnessStatus,
    RequestId, ServerFrame, StateFrame, Welcome, PROTOCOL_VERSION,
};

/// The service's answer to one decoded (or refused) line.
pub fn answer(decoded: &Result<Envelope<ClientFrame>, FrameError>) -> Vec<Envelope<ServerFrame>> {
    let envelope = match decoded {
        Ok(envelope) => envelope,
        Err(error) => return vec![error.to_reply()],
    };
    let id = envelope.id.clone();
    let ack_if_asked = |id: Option<RequestId>| {
        id.map(|id| Envelope::with_id(Some(id), ServerFrame::Ack))
            .into_iter()
            .collect::<Vec<_>>()
    };
    match &envelope.frame {
        ClientFrame::Hello(_) => vec![Envelope::with_id(id, placeholder_welcome())],
        ClientFrame::Status => vec![Envelope::with_id(id, placeholder_state())],
        ClientFrame::Config => vec![Envelope::with_id(
            id,
            ServerFrame::Config(ConfigFrame {
                values: serde_json::json!({}),
                warnings: Vec::new(),
            }),
        )],
        ClientFrame::Subscribe => {
            let mut replies = ack_if_asked(id);
            replies.push(Envelope::new(placeholder_state()));
            replies
        }
        // A session nobody started here has no notices to take.
        ClientFrame::TakeNotices(take) => vec![Envelope::with_id(
            id,
            ServerFrame::Error(ErrorFrame::new(
                ErrorCode::UnknownSession,
                format!("session {:?} is not live here", take.session),
            )),
        )],
        // Always answered with an `mcp` frame; what it holds is CGC's.
        ClientFrame::McpTools | ClientFrame::McpCall(_) => vec![Envelope::with_id(
            id,
            ServerFrame::Mcp(cgc_fresh_proto::McpAnswer {
                result: None,
                error: Some(serde_json::json!({"code": -32603, "message": "Internal error"})),
            }),
        )],
        ClientFrame::Sync
        | ClientFrame::SessionStart(_)
        | ClientFrame::ToolCall(_)
        | ClientFrame::ToolResult(_)
        | ClientFrame::SessionShutdown(_) => ack_if_asked(id),
    }
}

/// The service's answer to an over-long line; the connection closes
/// after it.
pub fn too_large_reply(limit: usize) -> Envelope<ServerFrame> {
    Envelope::new(ServerFrame::Error(ErrorFrame::too_large(limit)))
}

fn placeholder_welcome() -> ServerFrame {
    ServerFrame::Welcome(Welcome {
        protocol: PROTOCOL_VERSION,
        service_version: "0.0.0".to_owned(),
        pid: 1,
        workspace: "/ws".to_owned(),
    })
}

fn placeholder_state() -> ServerFrame {
    ServerFrame::State(StateFrame {
        workspace: "/ws".to_owned(),
        status: FreshnessStatus::Unknown,
        last_synced_at: None,
        stale_since: None,
        last_error: None,
        edit_epoch: 0,
        syncing: false,
        watcher: None,
        backend: None,
        detail: None,
        warnings: Vec::new(),
        progress: None,
    })
}
