//! What can be wrong with an incoming line, and the `error` frame that says so.

use crate::envelope::{Envelope, RequestId};
use crate::error_code::ErrorCode;
use crate::server::{ErrorFrame, ServerFrame};
use crate::PROTOCOL_VERSION;

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
