//! The wire protocol between `cgc-fresh` and its clients: a harness extension
//! (e.g. the Pi bridge) that reports agent tool activity, and the
//! `cgc-fresh` CLI that asks for status or a manual sync.
//!
//! This crate holds types and framing only; what the service *does* with a
//! frame is decided elsewhere.
//!
//! # Transport
//!
//! JSON lines over a Unix socket: every frame is one compact JSON object on
//! one line, terminated by `\n` (a `\r` before it is tolerated, empty lines
//! are ignored). Every frame has a string field `type`. Any frame may carry
//! an `id` — a non-negative integer or a string — and the reply to a request
//! carries the request's `id` unchanged. Fields a receiver does not know are
//! ignored, so either side may add fields without a protocol bump. Optional
//! fields are omitted rather than sent as `null`.
//!
//! ```text
//! → {"id":1,"type":"hello","client":"pi-bridge","instance":"pi-4821","protocol":1}
//! ← {"id":1,"type":"welcome","protocol":1,"service_version":"0.1.0","pid":4711,"workspace":"/home/ann/proj"}
//! → {"type":"tool_call","session":"s1","tool":"edit","paths":["src/main.rs"]}
//! → {"id":"q","type":"status"}
//! ← {"id":"q","type":"state","workspace":"/home/ann/proj","status":"possibly_stale","stale_since":1718000000000,"edit_epoch":3,"syncing":false}
//! ```
//!
//! The protocol version is [`PROTOCOL_VERSION`] (`1`), sent in `hello` and
//! `welcome`.
//!
//! # Client → service ([`ClientFrame`])
//!
//! | `type` | fields | answer |
//! |---|---|---|
//! | `hello` | `client`: string (`pi-bridge`, `cgc-fresh-cli`), `instance`: string (one harness extension instance), `protocol`: integer | `welcome`, always |
//! | `session_start` | `session`: string, `reason`: `startup` \| `new` \| `resume` \| `fork` \| `reload` (others read as `other`), `owner_pid`?: integer (the process that owns the session: it then lives until `session_shutdown` or that process's exit, not until a connection closes) | `ack` with an `id`; `error` `unavailable`, even without an `id`, when the live-session bound is reached |
//! | `tool_call` | `session`, `tool`: string, `paths`: array of strings, absolute or workspace-relative (default `[]`) | `ack` with an `id`; `error` `unknown_session` instead when the session is not live (the edit still counts) |
//! | `tool_result` | `session`, `tool`: string, `ok`: boolean | `ack` with an `id`; `error` `unknown_session` instead when the session is not live |
//! | `session_shutdown` | `session`: string, `reason`: string (optional) | `ack` with an `id` |
//! | `status` | — | `state`, always |
//! | `sync` | — (a person's manual sync request) | `ack` with an `id`; then `state`/`notice` to subscribers |
//! | `subscribe` | — | `ack` with an `id`, then a `state` at once; then every later `state` and `notice` is pushed |
//! | `config` | — | `config`, always |
//! | `take_notices` | `session`: string | `notices`, always: the notices offered to the session that no connection of it received, which count as shown from then on (for hooks that run as short processes); `error` `unknown_session` when the session is not live |
//! | `mcp_tools` | — (`cgc-fresh mcp`) | `mcp`, always: `result` `{tools, initialize}` as CGC's MCP server lists them here |
//! | `mcp_call` | `name`: string, `arguments`: object (default `{}`, at most [`MAX_MCP_ARGUMENTS_BYTES`]) | `mcp`, always: CGC's answer to that `tools/call`, once the graph covers the edits seen so far or `mcp.readYourWritesMs` passed |
//!
//! Requests (`hello`, `status`, `config`, `take_notices`) are always answered. Events (the
//! other frames) are answered only when they carry an `id`, so a harness can
//! pipeline them without reading acknowledgements; an event that carries an
//! `id` gets exactly one reply (`ack` or `error`) with that `id`. A line that
//! cannot be decoded is always answered (see *Errors*).
//!
//! The harness sends tool names and paths, never file contents.
//!
//! # Service → client ([`ServerFrame`])
//!
//! | `type` | fields |
//! |---|---|
//! | `welcome` | `protocol`, `service_version`: string, `pid`: integer, `workspace`: string |
//! | `state` | `workspace`, `status` ([`FreshnessStatus`]), `last_synced_at`?, `stale_since`? (unix ms), `last_error`?, `edit_epoch`: integer, `syncing`: boolean, `watcher`? `{mode, state, pid?, since?}`, `backend`? `{kind, source}`, `detail`? (a hint such as `restored from disk`), `warnings`? (array of strings: setup problems such as `cgc` not found) |
//! | `notice` | `session`?, `condition` ([`NoticeCondition`]), `level` (`info` \| `warning` \| `error`), `text`, `audience`: always `user` |
//! | `ack` | — |
//! | `error` | `code` ([`ErrorCode`]), `message`: string, `field`? (e.g. `session`, `paths[1]`) |
//! | `config` | `values`: the effective configuration object, `warnings`: array of strings |
//! | `notices` | `session`: string, `notices`: array of objects with the fields of a `notice` |
//! | `mcp` | `result`? or `error`?: the member of CGC's own JSON-RPC response to the same MCP request |
//!
//! `?` marks a field that is omitted when unknown. A `notice` is for the
//! person at the harness and must never be put into an agent prompt; its
//! `audience` field says so on the wire.
//!
//! # Errors
//!
//! A line that cannot be served is answered with an `error` frame carrying
//! the request's `id` when it could be read; the connection stays usable,
//! except after `too_large`.
//!
//! | `code` | when |
//! |---|---|
//! | `bad_json` | the line is not UTF-8 or not JSON |
//! | `bad_request` | not an object (no `field`); `id` or `type` missing or of the wrong kind; a frame field missing or of the wrong kind (`field` names it) |
//! | `unknown_type` | `type` names no frame |
//! | `unsupported_protocol` | `hello` with a `protocol` other than [`PROTOCOL_VERSION`] |
//! | `too_large` | the line exceeds the limit; the service closes the connection |
//! | `forbidden` | the request is not allowed |
//! | `internal` | the service failed while handling a valid request |
//! | `unavailable` | the service cannot answer now (e.g. shutting down, a session past the live bound), or it is disconnecting a client that does not read (see Limits); then it is the last frame on the connection |
//! | `unknown_session` | an event names a session that is not live (never started here, or ended); it was still taken into account |
//!
//! # Limits
//!
//! A line may hold at most [`DEFAULT_MAX_LINE_BYTES`] (64 KiB) before its
//! `\n`, unless configured otherwise ([`FrameCodec::with_max_line_bytes`]).
//! The reader never buffers more than the limit plus one byte of an
//! unfinished line.
//!
//! The service bounds what it queues for one connection (1 MiB by
//! default). A client over the bound is not read until it reads (its
//! `send` blocks); pushed `state` frames are coalesced to the latest. A
//! subscriber that stays over the bound for 5 s is sent
//! `error{code:"unavailable"}` saying why, after any notices already queued
//! for it, and is disconnected; unsent replies and states are dropped. It
//! may reconnect and `subscribe` again, which pushes the current `state`.
//!
//! # Use
//!
//! ```
//! use cgc_fresh_proto::{decode_client_frame, encode, ClientFrame, Envelope, ServerFrame};
//!
//! let request = decode_client_frame(br#"{"id":7,"type":"status"}"#).unwrap();
//! assert_eq!(request.frame, ClientFrame::Status);
//! let reply = Envelope::with_id(request.id, ServerFrame::Ack);
//! assert_eq!(encode(&reply), b"{\"id\":7,\"type\":\"ack\"}\n");
//!
//! let refused = decode_client_frame(br#"{"id":8,"type":"tool_call","tool":"edit"}"#).unwrap_err();
//! assert_eq!(refused.field(), Some("session"));
//! assert_eq!(
//!     encode(&refused.to_reply()),
//!     b"{\"id\":8,\"type\":\"error\",\"code\":\"bad_request\",\"message\":\"missing field `session`\",\"field\":\"session\"}\n",
//! );
//! ```

#![warn(missing_docs)]
// Every dependency is used (dev-dependencies serve only the test targets).
#![cfg_attr(not(test), warn(unused_crate_dependencies))]

mod client;
mod codec;
mod decode;
mod envelope;
mod error;
mod error_code;
mod hot_path;
mod server;
pub mod vocab;

pub use client::{
    ClientFrame, Hello, McpCall, SessionShutdown, SessionStart, TakeNotices, ToolCall, ToolResult,
    MAX_MCP_ARGUMENTS_BYTES,
};
pub use codec::{CodecError, FrameCodec, DEFAULT_MAX_LINE_BYTES};
pub use decode::{decode_client_frame, decode_client_frame_general, decode_server_frame};
pub use envelope::{encode, encode_client_frame, encode_server_frame, Envelope, Frame, RequestId};
pub use error::{FrameError, FrameErrorKind};
pub use error_code::ErrorCode;
pub use server::{
    Audience, BackendFacts, ConfigFrame, ErrorFrame, McpAnswer, Notice, NoticesFrame, ServerFrame,
    StateFrame, SyncProgress, WatcherFacts, Welcome,
};
pub use vocab::{FreshnessStatus, NoticeCondition, NoticeLevel, SessionStartReason, SyncPhase};

/// The protocol version this crate speaks, sent in `hello` and `welcome`.
pub const PROTOCOL_VERSION: u32 = 1;
