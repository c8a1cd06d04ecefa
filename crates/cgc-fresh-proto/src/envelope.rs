//! The envelope every frame travels in: the frame itself plus the optional
//! request `id` that a reply echoes. Keeping the id out of the frame enums
//! means a reply is built by pairing the request's id with any frame, and no
//! variant has to repeat an `id` field.

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::client::ClientFrame;
use crate::server::ServerFrame;

/// A request identifier chosen by the client: a JSON number (`u64`) or a
/// JSON string. The service never interprets it; it only echoes it.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(untagged)]
pub enum RequestId {
    /// `"id": 7`
    Number(u64),
    /// `"id": "req-7"`
    Text(String),
}

impl fmt::Display for RequestId {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RequestId::Number(number) => write!(formatter, "{number}"),
            RequestId::Text(text) => formatter.write_str(text),
        }
    }
}

impl From<u64> for RequestId {
    fn from(number: u64) -> Self {
        RequestId::Number(number)
    }
}

impl From<String> for RequestId {
    fn from(text: String) -> Self {
        RequestId::Text(text)
    }
}

impl From<&str> for RequestId {
    fn from(text: &str) -> Self {
        RequestId::Text(text.to_owned())
    }
}

/// One frame on the wire. Serializes as the frame's own object with `id`
/// added in front when present: `{"id":3,"type":"ack"}`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Envelope<F> {
    /// The request id, echoed by the reply to that request.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub id: Option<RequestId>,
    /// The frame.
    #[serde(flatten)]
    pub frame: F,
}

impl<F> Envelope<F> {
    /// A frame without an id (pushed frames, or requests that want no echo).
    pub fn new(frame: F) -> Self {
        Envelope { id: None, frame }
    }

    /// A frame carrying `id`. For replies, pass the request's id unchanged.
    pub fn with_id(id: Option<RequestId>, frame: F) -> Self {
        Envelope { id, frame }
    }
}

impl<F> From<F> for Envelope<F> {
    fn from(frame: F) -> Self {
        Envelope::new(frame)
    }
}

mod sealed {
    pub trait Sealed {}
    impl Sealed for super::ClientFrame {}
    impl Sealed for super::ServerFrame {}
}

/// The two frame enums of this protocol. Sealed: only [`ClientFrame`] and
/// [`ServerFrame`] are frames.
pub trait Frame: Serialize + sealed::Sealed {}

impl Frame for ClientFrame {}
impl Frame for ServerFrame {}

/// Encodes one frame as a single JSON line: compact JSON, then `\n`.
///
/// JSON escapes control characters inside strings, so the only newline in
/// the output is the terminating one.
pub fn encode<F: Frame>(envelope: &Envelope<F>) -> Vec<u8> {
    // Every frame type is a tree of structs, strings, numbers and
    // string-keyed maps, which serde_json always serializes; a failure here
    // would be a bug in this crate, not a property of any input.
    let mut line = serde_json::to_vec(envelope)
        .expect("protocol frames always serialize: every map key is a string");
    line.push(b'\n');
    line
}

/// [`encode`] for a frame the service sends.
pub fn encode_server_frame(envelope: &Envelope<ServerFrame>) -> Vec<u8> {
    encode(envelope)
}

/// [`encode`] for a frame a harness or the CLI sends.
pub fn encode_client_frame(envelope: &Envelope<ClientFrame>) -> Vec<u8> {
    encode(envelope)
}
