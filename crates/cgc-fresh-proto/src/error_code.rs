//! The codes an `error` frame carries (the server's frames and the decoder's
//! errors both name them).

use serde::{Deserialize, Serialize};

/// The `code` of an `error` frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorCode {
    /// The line is not valid UTF-8 JSON.
    BadJson,
    /// The `type` names no frame of this protocol.
    UnknownType,
    /// The JSON is well formed but not a valid frame (not an object, missing
    /// or wrongly typed field); `field` names the culprit when there is one.
    BadRequest,
    /// The line exceeds the maximum line length; the connection is closed.
    TooLarge,
    /// `hello` asked for a protocol version this side does not speak.
    UnsupportedProtocol,
    /// The request is not allowed (e.g. wrong peer, or a frame out of order).
    Forbidden,
    /// The service failed while handling a valid request.
    Internal,
    /// The service cannot answer right now (e.g. shutting down), or it is
    /// disconnecting a client that stayed over its outgoing bound without
    /// reading (the last frame on that connection).
    Unavailable,
    /// The frame names a session that is not live: never started on this
    /// service, or already ended. The frame was still taken into account
    /// (an edit still marks the graph possibly stale).
    UnknownSession,
}

impl ErrorCode {
    /// Every code, in a fixed order (for property tests and docs).
    pub const ALL: [ErrorCode; 9] = [
        ErrorCode::BadJson,
        ErrorCode::UnknownType,
        ErrorCode::BadRequest,
        ErrorCode::TooLarge,
        ErrorCode::UnsupportedProtocol,
        ErrorCode::Forbidden,
        ErrorCode::Internal,
        ErrorCode::Unavailable,
        ErrorCode::UnknownSession,
    ];

    /// The wire name, e.g. `bad_request`.
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorCode::BadJson => "bad_json",
            ErrorCode::UnknownType => "unknown_type",
            ErrorCode::BadRequest => "bad_request",
            ErrorCode::TooLarge => "too_large",
            ErrorCode::UnsupportedProtocol => "unsupported_protocol",
            ErrorCode::Forbidden => "forbidden",
            ErrorCode::Internal => "internal",
            ErrorCode::Unavailable => "unavailable",
            ErrorCode::UnknownSession => "unknown_session",
        }
    }
}
