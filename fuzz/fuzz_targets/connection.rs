//! A client's conversation with the service, as far as it is pure: lines
//! built from a structured description (well-formed frames, frames with one
//! thing wrong, foreign JSON, raw bytes, blank and over-long lines), sent as
//! one byte stream cut into arbitrary reads, decoded, and answered by the
//! rule in [`cgc_fresh_fuzz::replies`].
//!
//! Because each line is built knowing what is wrong with it, the decoder's
//! verdict is checked against an oracle that does not share its code:
//! - a well-formed frame decodes to exactly the frame it was built from
//!   (unknown extra fields ignored, `null` id read as absent, unknown
//!   session reasons read as `other`) and survives the round trip;
//! - one wrong thing gives the code and `field` that the decoding steps in
//!   the protocol crate's docs promise, in their order: not JSON →
//!   `bad_json`; not an object → `bad_request` without a field; a bad `id`
//!   → `bad_request` naming `id` (and no id echoed); `type` missing or not
//!   a string → `bad_request` naming `type`; an unknown `type` →
//!   `unknown_type`; a `hello` of another protocol → `unsupported_protocol`
//!   (before any other field is looked at); a missing or mistyped field →
//!   `bad_request` naming it (`paths[2]` for a list element);
//! - every line, raw bytes included: the reply echoes the line's `id`
//!   exactly when the line is a JSON object with a usable one (read here
//!   with plain `serde_json`), and `bad_json` comes exactly when the line is
//!   not JSON;
//! - the codec yields exactly the non-blank lines, in order, until the
//!   first over-long one, which is answered by one `too_large` error
//!   without an id and ends the conversation;
//! - every reply is one line that decodes back to itself; an error reply
//!   has a decode code and a bounded message; a request with an id gets
//!   exactly one reply carrying it, one without gets none that carries one.

#![no_main]

use arbitrary::Arbitrary;
use bytes::Bytes;
use cgc_fresh_fuzz::{framing, replies, round_trip};
use cgc_fresh_proto::{
    decode_client_frame, ClientFrame, Envelope, ErrorCode, FrameError, Hello, RequestId,
    ServerFrame, SessionShutdown, SessionStart, SessionStartReason, ToolCall, ToolResult,
    DEFAULT_MAX_LINE_BYTES, PROTOCOL_VERSION,
};
use libfuzzer_sys::fuzz_target;
use serde_json::{json, Map, Value};

#[derive(Arbitrary, Debug)]
struct Conversation {
    /// Picks the line limit: a multiple of 4 keeps the default, anything
    /// else gives 8..520 bytes, so over-long lines are common.
    limit: u16,
    chunk_seed: u8,
    /// Whether the last line ends with a newline (the codec must yield an
    /// unterminated last line at end of input too).
    final_newline: bool,
    lines: Vec<LineSpec>,
}

#[derive(Arbitrary, Debug)]
struct LineSpec {
    id: IdSpec,
    body: Body,
    crlf: bool,
    /// Surround the JSON with spaces (JSON allows them).
    spaces: bool,
    /// A field no frame knows, which must be ignored.
    extra: Option<(String, Wrong)>,
}

#[derive(Arbitrary, Debug)]
enum IdSpec {
    Absent,
    Null,
    Number(u64),
    Text(String),
    Bad(Wrong),
}

/// A JSON value of some kind, used where a field expects another kind.
#[derive(Arbitrary, Debug, Clone)]
enum Wrong {
    Negative(u32),
    Fraction(i16),
    Integer(u64),
    Bool(bool),
    Text(String),
    Numbers(Vec<u8>),
    Object(String),
    Null,
}

impl Wrong {
    fn value(&self) -> Value {
        match self {
            Wrong::Negative(n) => json!(-1 - i64::from(*n)),
            // `n.0` and `n.5`: both are floats on the wire, neither an integer.
            Wrong::Fraction(n) => json!(f64::from(*n) / 2.0),
            Wrong::Integer(n) => json!(n),
            Wrong::Bool(b) => json!(b),
            Wrong::Text(text) => json!(text),
            Wrong::Numbers(numbers) => json!(numbers),
            Wrong::Object(text) => json!({ "key": text }),
            Wrong::Null => Value::Null,
        }
    }
}

#[derive(Arbitrary, Debug)]
enum Body {
    Valid(FrameSpec),
    /// Drops the n-th required field (a frame without one stays valid).
    Missing(FrameSpec, u8),
    /// Gives the n-th field a value of the wrong kind (left alone when
    /// the value happens to be accepted).
    Mistyped(FrameSpec, u8, Wrong),
    NoType,
    TypeNotText(Wrong),
    UnknownType(String),
    /// A `hello` for protocol `n` (never 1); `complete` keeps its other
    /// fields, otherwise they are missing too.
    OtherProtocol(u64, bool),
    /// A JSON value that is not an object.
    NotObject(Wrong),
    /// Raw bytes (newlines removed).
    Garbage(Vec<u8>),
    Blank,
    /// A line this many bytes over the limit.
    Oversized(u8),
}

#[derive(Arbitrary, Debug, Clone)]
enum FrameSpec {
    Hello {
        client: String,
        instance: String,
    },
    SessionStart {
        session: String,
        reason: Reason,
    },
    ToolCall {
        session: String,
        tool: String,
        paths: Option<Vec<String>>,
    },
    ToolResult {
        session: String,
        tool: String,
        ok: bool,
    },
    SessionShutdown {
        session: String,
        reason: Option<Option<String>>,
    },
    Status,
    Sync,
    Subscribe,
    Config,
}

#[derive(Arbitrary, Debug, Clone)]
enum Reason {
    Known(u8),
    Text(String),
}

/// The kind of value a frame field accepts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Accepts {
    Text,
    OptionalText,
    Boolean,
    TextList,
    StartReason,
    Protocol,
}

/// What the decoder makes of one field value.
#[derive(Debug, PartialEq, Eq)]
enum Judged {
    Accepted,
    Refused { field: String },
    OtherProtocol,
}

/// Serde's reading of a JSON value for a field of kind `accepts`, restated.
fn judge(field: &str, accepts: Accepts, value: &Value) -> Judged {
    let refused = |field: String| Judged::Refused { field };
    let ok = match (accepts, value) {
        (Accepts::Text, Value::String(_)) => true,
        (Accepts::OptionalText, Value::String(_) | Value::Null) => true,
        (Accepts::Boolean, Value::Bool(_)) => true,
        (Accepts::StartReason, Value::String(_)) => true,
        // serde also reads an enum from a one-key object `{"variant":
        // content}`: a unit variant wants `null` content, and a wrong
        // content is reported at `reason.variant`.
        (Accepts::StartReason, Value::Object(map)) if map.len() == 1 => {
            return match map.iter().next() {
                Some((_, Value::Null)) | None => Judged::Accepted,
                Some((variant, _)) => refused(format!("{field}.{variant}")),
            }
        }
        (Accepts::Protocol, value) => match value.as_u64() {
            Some(version) if version == u64::from(PROTOCOL_VERSION) => true,
            Some(_) => return Judged::OtherProtocol,
            None => false,
        },
        (Accepts::TextList, Value::Array(items)) => {
            return match items.iter().position(|item| !item.is_string()) {
                Some(index) => refused(format!("{field}[{index}]")),
                None => Judged::Accepted,
            }
        }
        _ => false,
    };
    if ok {
        Judged::Accepted
    } else {
        refused(field.to_owned())
    }
}

const REASONS: [(&str, SessionStartReason); 5] = [
    ("startup", SessionStartReason::Startup),
    ("new", SessionStartReason::New),
    ("resume", SessionStartReason::Resume),
    ("fork", SessionStartReason::Fork),
    ("reload", SessionStartReason::Reload),
];

/// One field of a frame as built: name, value, kind, and whether it is
/// required.
struct Field {
    name: &'static str,
    value: Value,
    accepts: Accepts,
    required: bool,
}

fn field(name: &'static str, value: Value, accepts: Accepts, required: bool) -> Field {
    Field {
        name,
        value,
        accepts,
        required,
    }
}

/// The frame's `type`, its fields, and the frame they must decode to.
fn build(spec: &FrameSpec) -> (&'static str, Vec<Field>, ClientFrame) {
    use Accepts::*;
    match spec.clone() {
        FrameSpec::Hello { client, instance } => (
            "hello",
            vec![
                field("client", json!(client), Text, true),
                field("instance", json!(instance), Text, true),
                field("protocol", json!(PROTOCOL_VERSION), Protocol, true),
            ],
            ClientFrame::Hello(Hello {
                client,
                instance,
                protocol: PROTOCOL_VERSION,
            }),
        ),
        FrameSpec::SessionStart { session, reason } => {
            let (text, decoded) = match reason {
                Reason::Known(index) => {
                    let (text, reason) = REASONS[usize::from(index) % REASONS.len()];
                    (text.to_owned(), reason)
                }
                Reason::Text(text) => {
                    let decoded = REASONS
                        .iter()
                        .find(|(known, _)| *known == text)
                        .map_or(SessionStartReason::Other, |(_, reason)| *reason);
                    (text, decoded)
                }
            };
            (
                "session_start",
                vec![
                    field("session", json!(session), Text, true),
                    field("reason", json!(text), StartReason, true),
                ],
                ClientFrame::SessionStart(SessionStart {
                    session,
                    reason: decoded,
                    owner_pid: None,
                }),
            )
        }
        FrameSpec::ToolCall {
            session,
            tool,
            paths,
        } => {
            let mut fields = vec![
                field("session", json!(session), Text, true),
                field("tool", json!(tool), Text, true),
            ];
            if let Some(paths) = &paths {
                fields.push(field("paths", json!(paths), TextList, false));
            }
            (
                "tool_call",
                fields,
                ClientFrame::ToolCall(ToolCall {
                    session,
                    tool,
                    paths: paths.unwrap_or_default(),
                }),
            )
        }
        FrameSpec::ToolResult { session, tool, ok } => (
            "tool_result",
            vec![
                field("session", json!(session), Text, true),
                field("tool", json!(tool), Text, true),
                field("ok", json!(ok), Boolean, true),
            ],
            ClientFrame::ToolResult(ToolResult { session, tool, ok }),
        ),
        FrameSpec::SessionShutdown { session, reason } => {
            let mut fields = vec![field("session", json!(session), Text, true)];
            if let Some(reason) = &reason {
                fields.push(field("reason", json!(reason), OptionalText, false));
            }
            (
                "session_shutdown",
                fields,
                ClientFrame::SessionShutdown(SessionShutdown {
                    session,
                    reason: reason.flatten(),
                }),
            )
        }
        FrameSpec::Status => ("status", Vec::new(), ClientFrame::Status),
        FrameSpec::Sync => ("sync", Vec::new(), ClientFrame::Sync),
        FrameSpec::Subscribe => ("subscribe", Vec::new(), ClientFrame::Subscribe),
        FrameSpec::Config => ("config", Vec::new(), ClientFrame::Config),
    }
}

/// What must become of one line.
#[derive(Debug)]
enum Expected {
    /// Decodes to exactly this.
    Frame(Envelope<ClientFrame>),
    /// Is refused with this code, field and echoed id.
    Refused {
        code: ErrorCode,
        field: Option<String>,
        id: Option<RequestId>,
    },
    /// Raw bytes: only the rules every line obeys apply.
    Anything,
}

fn refused(code: ErrorCode, field: Option<&str>, id: Option<RequestId>) -> Expected {
    Expected::Refused {
        code,
        field: field.map(str::to_owned),
        id,
    }
}

/// Every field name a client frame has, plus the envelope's: an extra
/// field must not be one of them.
const KNOWN_NAMES: [&str; 10] = [
    "id", "type", "client", "instance", "protocol", "session", "reason", "tool", "paths", "ok",
];

/// One thing made wrong in a well-formed frame.
enum Mutation {
    Drop(u8),
    Retype(u8, Value),
}

/// The object of a frame built from `spec` with at most one `mutation`,
/// and what must become of it.
fn frame_object(
    spec: &FrameSpec,
    mutation: Option<Mutation>,
    id: Option<RequestId>,
) -> (Map<String, Value>, Expected) {
    let (type_name, mut fields, frame) = build(spec);
    let mut expected = Expected::Frame(Envelope::with_id(id.clone(), frame));
    match mutation {
        None => {}
        Some(Mutation::Drop(which)) => {
            let required: Vec<usize> = (0..fields.len()).filter(|i| fields[*i].required).collect();
            if !required.is_empty() {
                let dropped = fields.remove(required[usize::from(which) % required.len()]);
                expected = refused(ErrorCode::BadRequest, Some(dropped.name), id);
            }
        }
        Some(Mutation::Retype(which, value)) if !fields.is_empty() => {
            let count = fields.len();
            let target = &mut fields[usize::from(which) % count];
            match judge(target.name, target.accepts, &value) {
                Judged::Accepted => {}
                Judged::Refused { field } => {
                    target.value = value;
                    expected = refused(ErrorCode::BadRequest, Some(&field), id);
                }
                Judged::OtherProtocol => {
                    target.value = value;
                    expected = refused(ErrorCode::UnsupportedProtocol, None, id);
                }
            }
        }
        // A frame without fields has nothing to mistype.
        Some(Mutation::Retype(..)) => {}
    }
    let mut object = Map::new();
    object.insert("type".into(), json!(type_name));
    for field in fields {
        object.insert(field.name.into(), field.value);
    }
    (object, expected)
}

/// The line's bytes (before any `\r`), and what must become of it when it
/// fits the limit and is not blank.
fn line_of(spec: &LineSpec, limit: usize) -> (Vec<u8>, Expected) {
    let (id_value, id, bad_id) = match &spec.id {
        IdSpec::Absent => (None, None, false),
        IdSpec::Null => (Some(Value::Null), None, false),
        IdSpec::Number(n) => (Some(json!(n)), Some(RequestId::Number(*n)), false),
        IdSpec::Text(text) => (
            Some(json!(text)),
            Some(RequestId::Text(text.clone())),
            false,
        ),
        IdSpec::Bad(wrong) => {
            let value = match wrong.value() {
                // Usable ids (or none); `true` is not one.
                Value::String(_) | Value::Null => json!(true),
                value if value.is_u64() => json!(true),
                value => value,
            };
            (Some(value), None, true)
        }
    };
    let (mut object, expected) = match &spec.body {
        Body::Garbage(bytes) => {
            let line = bytes
                .iter()
                .copied()
                .filter(|byte| *byte != b'\n')
                .collect();
            return (line, Expected::Anything);
        }
        Body::Blank => return (Vec::new(), Expected::Anything),
        Body::Oversized(over) => {
            return (
                vec![b'x'; limit + 1 + usize::from(*over)],
                Expected::Anything,
            )
        }
        Body::NotObject(wrong) => {
            let value = match wrong.value() {
                Value::Object(_) => json!([]),
                value => value,
            };
            let expected = refused(ErrorCode::BadRequest, None, None);
            return (value.to_string().into_bytes(), expected);
        }
        Body::Valid(frame) => frame_object(frame, None, id.clone()),
        Body::Missing(frame, which) => {
            frame_object(frame, Some(Mutation::Drop(*which)), id.clone())
        }
        Body::Mistyped(frame, which, wrong) => frame_object(
            frame,
            Some(Mutation::Retype(*which, wrong.value())),
            id.clone(),
        ),
        Body::NoType => (
            Map::new(),
            refused(ErrorCode::BadRequest, Some("type"), id.clone()),
        ),
        Body::TypeNotText(wrong) => {
            let value = match wrong.value() {
                Value::String(_) => Value::Null,
                value => value,
            };
            let object = Map::from_iter([("type".to_owned(), value)]);
            (
                object,
                refused(ErrorCode::BadRequest, Some("type"), id.clone()),
            )
        }
        Body::UnknownType(name) => {
            let name = if ClientFrame::TYPE_NAMES.contains(&name.as_str()) {
                format!("x{name}")
            } else {
                name.clone()
            };
            let object = Map::from_iter([("type".to_owned(), json!(name))]);
            (object, refused(ErrorCode::UnknownType, None, id.clone()))
        }
        Body::OtherProtocol(version, complete) => {
            let version = if *version == u64::from(PROTOCOL_VERSION) {
                version + 1
            } else {
                *version
            };
            let mut object = Map::from_iter([
                ("type".to_owned(), json!("hello")),
                ("protocol".to_owned(), json!(version)),
            ]);
            if *complete {
                object.insert("client".into(), json!("pi-bridge"));
                object.insert("instance".into(), json!("pi-1"));
            }
            (
                object,
                refused(ErrorCode::UnsupportedProtocol, None, id.clone()),
            )
        }
    };
    if let Some((name, wrong)) = &spec.extra {
        if !KNOWN_NAMES.contains(&name.as_str()) {
            object.insert(name.clone(), wrong.value());
        }
    }
    if let Some(value) = id_value {
        object.insert("id".into(), value);
    }
    let expected = if bad_id {
        refused(ErrorCode::BadRequest, Some("id"), None)
    } else {
        expected
    };
    let text = Value::Object(object).to_string();
    let text = if spec.spaces {
        format!(" {text}  ")
    } else {
        text
    };
    (text.into_bytes(), expected)
}

/// The id a line's reply must echo, read with plain `serde_json`, after
/// checking the verdicts that need no more than that: `bad_json` exactly
/// when the line is not JSON, `bad_request` without a field for another
/// value than an object, `bad_request` naming `id` for an unusable id.
fn usable_id(
    line: &[u8],
    decoded: &Result<Envelope<ClientFrame>, FrameError>,
) -> Option<RequestId> {
    let refusal = |code: ErrorCode, field: Option<&str>| match decoded {
        Err(error) => {
            assert_eq!(error.code(), code, "{error}");
            assert_eq!(error.field(), field, "{error}");
        }
        Ok(envelope) => panic!("expected {code:?}, decoded {envelope:?}"),
    };
    match serde_json::from_slice::<Value>(line) {
        Err(_) => {
            refusal(ErrorCode::BadJson, None);
            None
        }
        Ok(Value::Object(object)) => match object.get("id") {
            None | Some(Value::Null) => None,
            Some(Value::String(text)) => Some(RequestId::Text(text.clone())),
            Some(Value::Number(number)) if number.is_u64() => {
                number.as_u64().map(RequestId::Number)
            }
            Some(_) => {
                refusal(ErrorCode::BadRequest, Some("id"));
                None
            }
        },
        Ok(_) => {
            refusal(ErrorCode::BadRequest, None);
            None
        }
    }
}

/// Decodes and answers one line, checking both against `expected` and the
/// rules every line obeys.
fn serve_line(line: &[u8], expected: &Expected) {
    let decoded = decode_client_frame(line);
    match (expected, &decoded) {
        (Expected::Frame(want), Ok(got)) => {
            assert_eq!(got, want, "a frame decoded to something else");
            round_trip::assert_client_round_trip(got);
        }
        (Expected::Refused { code, field, id }, Err(error)) => {
            assert_eq!(error.code(), *code, "wrong code: {error}");
            assert_eq!(error.field(), field.as_deref(), "wrong field: {error}");
            assert_eq!(&error.id, id, "wrong id: {error}");
        }
        (Expected::Anything, _) => {}
        (expected, decoded) => panic!(
            "line {:?}: expected {expected:?}, decoded {decoded:?}",
            String::from_utf8_lossy(line)
        ),
    }

    let id = usable_id(line, &decoded);
    match &decoded {
        Ok(envelope) => assert_eq!(envelope.id, id, "the decoded id differs"),
        Err(error) => {
            assert_eq!(error.id, id, "the error does not carry the line's id");
            round_trip::checked_error_reply(error);
        }
    }

    let replies = replies::answer(&decoded);
    for reply in &replies {
        round_trip::assert_server_round_trip(reply);
    }
    if decoded.is_err() {
        assert_eq!(replies.len(), 1, "a refused line gets one reply");
    }
    let carrying: Vec<&Envelope<ServerFrame>> =
        replies.iter().filter(|reply| reply.id.is_some()).collect();
    match &id {
        Some(id) => {
            assert_eq!(
                carrying.len(),
                1,
                "a request with an id gets one reply with it"
            );
            assert_eq!(carrying[0].id.as_ref(), Some(id));
            assert_eq!(
                replies[0].id.as_ref(),
                Some(id),
                "the id's reply comes first"
            );
        }
        None => assert!(carrying.is_empty(), "a reply invents an id"),
    }
}

fuzz_target!(|conversation: Conversation| {
    let limit = if conversation.limit.is_multiple_of(4) {
        DEFAULT_MAX_LINE_BYTES
    } else {
        8 + usize::from(conversation.limit) % 512
    };

    // The stream, and the lines the codec must yield from it.
    let mut stream = Vec::new();
    let mut served: Vec<(Bytes, Expected)> = Vec::new();
    let mut too_large = false;
    let count = conversation.lines.len();
    for (index, spec) in conversation.lines.iter().enumerate() {
        let (mut segment, expected) = line_of(spec, limit);
        if spec.crlf {
            segment.push(b'\r');
        }
        if !too_large {
            if segment.len() > limit {
                too_large = true;
            } else {
                let line = segment.strip_suffix(b"\r").unwrap_or(&segment);
                if !line.is_empty() {
                    served.push((Bytes::copy_from_slice(line), expected));
                }
            }
        }
        stream.extend_from_slice(&segment);
        if index + 1 < count || conversation.final_newline {
            stream.push(b'\n');
        }
    }

    let framed = framing::decode_in_chunks(
        &stream,
        limit,
        framing::chunk_lengths(conversation.chunk_seed),
    );
    let expected_lines: Vec<&Bytes> = served.iter().map(|(line, _)| line).collect();
    assert_eq!(
        framed.lines.iter().collect::<Vec<_>>(),
        expected_lines,
        "the codec's lines differ from the lines sent"
    );
    assert_eq!(
        framed.too_large, too_large,
        "TooLarge where no line was too large, or none where one was"
    );

    for (line, expected) in &served {
        serve_line(line, expected);
    }
    if too_large {
        // The last answer before the connection closes.
        let reply = replies::too_large_reply(limit);
        round_trip::assert_server_round_trip(&reply);
        let ServerFrame::Error(error) = &reply.frame else {
            panic!("the too_large reply is not an error");
        };
        assert_eq!((error.code, &reply.id), (ErrorCode::TooLarge, &None));
    }
});
