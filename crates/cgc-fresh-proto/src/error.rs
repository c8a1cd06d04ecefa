//! What can be wrong with an incoming line, and the `error` frame that says so.

use serde::{Deserialize, Serialize};

use crate::envelope::{Envelope, RequestId};
use crate::server::{ErrorFrame, ServerFrame};
use crate::PROTOCOL_VERSION;

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

/// Why a line could not be decoded into a frame, plus the request `id` when
/// the line was a JSON object with a usable `id`, so the `error` reply can
/// echo it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{kind}")]
pub struct FrameError {
    /// The id of the offending request, if it could be read.
    pub id: Option<RequestId>,
    /// What was wrong.
    pub kind: FrameErrorKind,
}

/// What was wrong with a line.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FrameErrorKind {
    /// Not UTF-8, or not JSON.
    #[error("malformed JSON: {detail}")]
    BadJson {
        /// The parser's description, with line and column.
        detail: String,
    },
    /// Well-formed JSON that is not a valid frame.
    #[error("{message}")]
    BadRequest {
        /// The offending field's path (`session`, `paths[1]`, `watcher.mode`),
        /// or `None` when the line as a whole is wrong.
        field: Option<String>,
        /// What is wrong, for people.
        message: String,
    },
    /// A `type` this protocol does not have.
    #[error("unknown frame type `{}`", shorten(name, 64))]
    UnknownType {
        /// The `type` as received.
        name: String,
    },
    /// A `hello` (or `welcome`) for a protocol version other than ours.
    #[error("unsupported protocol version {got}; this side speaks {PROTOCOL_VERSION}")]
    UnsupportedProtocol {
        /// The version the peer asked for.
        got: u64,
    },
}

impl FrameError {
    /// The `error` frame code for this failure.
    pub fn code(&self) -> ErrorCode {
        match self.kind {
            FrameErrorKind::BadJson { .. } => ErrorCode::BadJson,
            FrameErrorKind::BadRequest { .. } => ErrorCode::BadRequest,
            FrameErrorKind::UnknownType { .. } => ErrorCode::UnknownType,
            FrameErrorKind::UnsupportedProtocol { .. } => ErrorCode::UnsupportedProtocol,
        }
    }

    /// The offending field, for `bad_request` errors that have one.
    pub fn field(&self) -> Option<&str> {
        match &self.kind {
            FrameErrorKind::BadRequest { field, .. } => field.as_deref(),
            _ => None,
        }
    }

    /// A human explanation (the same text as `Display`).
    pub fn message(&self) -> String {
        self.kind.to_string()
    }

    /// The `error` frame describing this failure.
    pub fn to_error_frame(&self) -> ErrorFrame {
        ErrorFrame {
            code: self.code(),
            message: self.message(),
            field: self.field().map(str::to_owned),
        }
    }

    /// The complete reply: the `error` frame carrying the request's id.
    pub fn to_reply(&self) -> Envelope<ServerFrame> {
        Envelope::with_id(self.id.clone(), ServerFrame::Error(self.to_error_frame()))
    }
}

/// Bounds a peer-chosen string before it goes into a message, so the error
/// reply to a huge line is not itself huge.
pub(crate) fn shorten(text: &str, kept_chars: usize) -> String {
    match text.char_indices().nth(kept_chars) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn as_str_matches_the_serialized_name() {
        for code in ErrorCode::ALL {
            let json = serde_json::to_string(&code).unwrap();
            assert_eq!(json, format!("\"{}\"", code.as_str()));
        }
    }

    #[test]
    fn unknown_type_message_is_bounded() {
        let error = FrameError {
            id: None,
            kind: FrameErrorKind::UnknownType {
                name: "x".repeat(10_000),
            },
        };
        assert!(error.message().len() < 120, "{}", error.message());
        assert!(error.message().ends_with("…`"));
    }

    #[test]
    fn reply_echoes_the_id_and_names_the_field() {
        let error = FrameError {
            id: Some(RequestId::Number(9)),
            kind: FrameErrorKind::BadRequest {
                field: Some("session".into()),
                message: "missing field `session`".into(),
            },
        };
        let reply = error.to_reply();
        assert_eq!(reply.id, Some(RequestId::Number(9)));
        assert_eq!(
            reply.frame,
            ServerFrame::Error(ErrorFrame {
                code: ErrorCode::BadRequest,
                message: "missing field `session`".into(),
                field: Some("session".into()),
            })
        );
    }
}
