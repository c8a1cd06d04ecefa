//! Turning one received line into a typed frame, or into an error precise
//! enough to answer with: which code, which field, and the request's `id`.
//!
//! The steps, each with its own failure:
//! 1. UTF-8 and JSON syntax → `bad_json`;
//! 2. the value is an object → `bad_request` (no field);
//! 3. `id`, when present and not `null`, is a `u64` or a string →
//!    `bad_request` naming `id`;
//! 4. `type` is present and a string → `bad_request` naming `type`;
//! 5. `type` is known → `unknown_type`;
//! 6. `hello`/`welcome` speak [`PROTOCOL_VERSION`] → `unsupported_protocol`;
//! 7. the remaining fields fit the frame → `bad_request` naming the field.
//!
//! Fields a frame does not know are ignored, so newer peers can add fields.

use serde::de::DeserializeOwned;
use serde_json::{Map, Value};

use crate::client::ClientFrame;
use crate::envelope::{Envelope, RequestId};
use crate::error::{shorten, FrameError, FrameErrorKind};
use crate::hot_path::decode_hot_client_frame;
use crate::server::ServerFrame;
use crate::PROTOCOL_VERSION;

/// Decodes one line (without its `\n`) sent by a harness or the CLI.
///
/// Plain `tool_call` and `tool_result` lines are read in one pass; every
/// other line, and every error, goes through the general decoder
/// ([`decode_client_frame_general`]), with the same result.
pub fn decode_client_frame(line: &[u8]) -> Result<Envelope<ClientFrame>, FrameError> {
    if let Some(envelope) = std::str::from_utf8(line)
        .ok()
        .and_then(decode_hot_client_frame)
    {
        return Ok(envelope);
    }
    decode_client_frame_general(line)
}

/// [`decode_client_frame`] without its one-pass reading of the frequent
/// frames: every frame through the steps above. Public so that tests and
/// fuzzers can check that the two agree.
pub fn decode_client_frame_general(line: &[u8]) -> Result<Envelope<ClientFrame>, FrameError> {
    decode_line(line, client_frame_from_payload)
}

/// Decodes one line (without its `\n`) sent by the service.
pub fn decode_server_frame(line: &[u8]) -> Result<Envelope<ServerFrame>, FrameError> {
    decode_line(line, server_frame_from_payload)
}

/// Builds a frame from its `type` and the object holding its other fields.
type FromPayload<F> = fn(&str, Map<String, Value>) -> Result<F, FrameErrorKind>;

fn decode_line<F>(line: &[u8], from_payload: FromPayload<F>) -> Result<Envelope<F>, FrameError> {
    let without_id = |kind| FrameError { id: None, kind };

    let text = std::str::from_utf8(line).map_err(|error| {
        without_id(FrameErrorKind::BadJson {
            detail: format!("line is not valid UTF-8 (at byte {})", error.valid_up_to()),
        })
    })?;
    let value: Value = serde_json::from_str(text).map_err(|error| {
        without_id(FrameErrorKind::BadJson {
            detail: error.to_string(),
        })
    })?;
    let Value::Object(mut object) = value else {
        return Err(without_id(bad_request(
            None,
            format!("a frame must be a JSON object, not {}", describe(&value)),
        )));
    };

    let id = take_id(&mut object).map_err(without_id)?;
    let with_id = |kind| FrameError {
        id: id.clone(),
        kind,
    };
    let type_name = match object.remove("type") {
        Some(Value::String(type_name)) => type_name,
        Some(other) => {
            return Err(with_id(bad_request(
                Some("type"),
                format!("field `type` must be a string, not {}", describe(&other)),
            )))
        }
        None => {
            return Err(with_id(bad_request(
                Some("type"),
                "missing field `type`".to_owned(),
            )))
        }
    };
    let frame = from_payload(&type_name, object).map_err(with_id)?;
    Ok(Envelope { id, frame })
}

fn client_frame_from_payload(
    type_name: &str,
    payload: Map<String, Value>,
) -> Result<ClientFrame, FrameErrorKind> {
    Ok(match type_name {
        "hello" => {
            check_protocol(&payload)?;
            ClientFrame::Hello(fields(payload)?)
        }
        "session_start" => ClientFrame::SessionStart(fields(payload)?),
        "tool_call" => ClientFrame::ToolCall(fields(payload)?),
        "tool_result" => ClientFrame::ToolResult(fields(payload)?),
        "session_shutdown" => ClientFrame::SessionShutdown(fields(payload)?),
        "status" => ClientFrame::Status,
        "sync" => ClientFrame::Sync,
        "subscribe" => ClientFrame::Subscribe,
        "config" => ClientFrame::Config,
        "take_notices" => ClientFrame::TakeNotices(fields(payload)?),
        "mcp_tools" => ClientFrame::McpTools,
        "mcp_call" => {
            let call: crate::client::McpCall = fields(payload)?;
            if !call.arguments.is_object() {
                return Err(bad_request(
                    Some("arguments"),
                    format!(
                        "field `arguments` must be an object, not {}",
                        describe(&call.arguments)
                    ),
                ));
            }
            if serde_json::to_vec(&call.arguments).map_or(usize::MAX, |bytes| bytes.len())
                > crate::client::MAX_MCP_ARGUMENTS_BYTES
            {
                return Err(bad_request(
                    Some("arguments"),
                    format!(
                        "field `arguments` exceeds {} bytes",
                        crate::client::MAX_MCP_ARGUMENTS_BYTES
                    ),
                ));
            }
            ClientFrame::McpCall(call)
        }
        unknown => {
            return Err(FrameErrorKind::UnknownType {
                name: unknown.to_owned(),
            })
        }
    })
}

fn server_frame_from_payload(
    type_name: &str,
    payload: Map<String, Value>,
) -> Result<ServerFrame, FrameErrorKind> {
    Ok(match type_name {
        "welcome" => {
            check_protocol(&payload)?;
            ServerFrame::Welcome(fields(payload)?)
        }
        "state" => ServerFrame::State(fields(payload)?),
        "notice" => ServerFrame::Notice(fields(payload)?),
        "ack" => ServerFrame::Ack,
        "error" => ServerFrame::Error(fields(payload)?),
        "config" => ServerFrame::Config(fields(payload)?),
        "notices" => ServerFrame::Notices(fields(payload)?),
        "mcp" => ServerFrame::Mcp(fields(payload)?),
        unknown => {
            return Err(FrameErrorKind::UnknownType {
                name: unknown.to_owned(),
            })
        }
    })
}

/// Rejects another protocol version before looking at any other field: a
/// peer speaking a different version may well lack fields this one needs,
/// and "unsupported protocol" is the useful answer then. A `protocol` that
/// is not a non-negative integer is left to the field check.
fn check_protocol(payload: &Map<String, Value>) -> Result<(), FrameErrorKind> {
    match payload.get("protocol").and_then(Value::as_u64) {
        Some(got) if got != u64::from(PROTOCOL_VERSION) => {
            Err(FrameErrorKind::UnsupportedProtocol { got })
        }
        _ => Ok(()),
    }
}

/// Reads a frame's fields, naming the offending field on failure.
fn fields<T: DeserializeOwned>(payload: Map<String, Value>) -> Result<T, FrameErrorKind> {
    serde_path_to_error::deserialize(Value::Object(payload)).map_err(|error| {
        let path = (error.path().iter().next().is_some()).then(|| error.path().to_string());
        field_error(path, error.into_inner().to_string())
    })
}

/// Turns serde's message and the path where it arose into a `bad_request`.
///
/// serde reports a missing field at the path of the struct that lacks it,
/// with the field's name only in the message (`missing field `x``), so the
/// name is moved from the message into the path. Other messages may quote
/// the offending value, so they are cut short.
fn field_error(path: Option<String>, message: String) -> FrameErrorKind {
    const KEPT_MESSAGE_CHARS: usize = 200;
    let missing = message
        .strip_prefix("missing field `")
        .and_then(|rest| rest.strip_suffix('`'));
    match (missing, path) {
        (Some(name), path) => {
            let field = match path {
                Some(parent) => format!("{parent}.{name}"),
                None => name.to_owned(),
            };
            bad_request(Some(&field), format!("missing field `{field}`"))
        }
        (None, Some(field)) => {
            let message = format!("field `{field}`: {}", shorten(&message, KEPT_MESSAGE_CHARS));
            bad_request(Some(&field), message)
        }
        (None, None) => bad_request(None, shorten(&message, KEPT_MESSAGE_CHARS)),
    }
}

/// Takes `id` out of the frame object. `null` counts as absent.
fn take_id(object: &mut Map<String, Value>) -> Result<Option<RequestId>, FrameErrorKind> {
    match object.remove("id") {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(text)) => Ok(Some(RequestId::Text(text))),
        Some(Value::Number(number)) if number.is_u64() => {
            Ok(number.as_u64().map(RequestId::Number))
        }
        Some(other) => Err(bad_request(
            Some("id"),
            format!(
                "field `id` must be a non-negative integer or a string, not {}",
                describe(&other)
            ),
        )),
    }
}

fn bad_request(field: Option<&str>, message: String) -> FrameErrorKind {
    FrameErrorKind::BadRequest {
        field: field.map(str::to_owned),
        message,
    }
}

/// A whole number that `u64` cannot hold (JSON reads it as a float).
fn is_whole_beyond_u64(number: &serde_json::Number) -> bool {
    number
        .as_f64()
        .is_some_and(|f| f.fract() == 0.0 && f >= 18_446_744_073_709_551_616.0)
}

/// Names a JSON value's kind for messages, without echoing its content.
fn describe(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(number) if number.is_u64() => "an integer",
        Value::Number(number) if number.is_i64() => "a negative integer",
        Value::Number(number) if is_whole_beyond_u64(number) => {
            "an integer too large (at most 18446744073709551615)"
        }
        Value::Number(number) if number.as_f64().is_some_and(|f| f.fract() == 0.0) => {
            "a negative integer"
        }
        Value::Number(_) => "a fractional number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every listed `type` reaches a frame of that type (or a field error),
    /// never `unknown_type`.
    fn assert_dispatched<F>(
        names: &[&str],
        from_payload: FromPayload<F>,
        type_name: impl Fn(&F) -> &'static str,
    ) {
        for &name in names {
            let result = from_payload(name, Map::new());
            assert!(
                !matches!(result, Err(FrameErrorKind::UnknownType { .. })),
                "{name} is listed but not decoded"
            );
            if let Ok(frame) = result {
                assert_eq!(type_name(&frame), name);
            }
        }
    }

    #[test]
    fn every_client_type_name_is_dispatched() {
        assert_dispatched(
            &ClientFrame::TYPE_NAMES,
            client_frame_from_payload,
            ClientFrame::type_name,
        );
    }

    #[test]
    fn every_server_type_name_is_dispatched() {
        assert_dispatched(
            &ServerFrame::TYPE_NAMES,
            server_frame_from_payload,
            ServerFrame::type_name,
        );
    }

    #[test]
    fn missing_nested_field_names_the_full_path() {
        let kind = field_error(Some("watcher".into()), "missing field `mode`".into());
        assert_eq!(
            kind,
            FrameErrorKind::BadRequest {
                field: Some("watcher.mode".into()),
                message: "missing field `watcher.mode`".into(),
            }
        );
    }
}
