//! One pass for the two frames a harness sends by the thousand: `tool_call`
//! and `tool_result`.
//!
//! The general decoder (`decode.rs`) reads a line into a JSON tree and then
//! reads the tree again, tracking the path, so that every failure names its
//! code and field. That precision costs about a third of the service's
//! intake time. This module reads those two frames straight from the text
//! into their types, and gives up — returning `None`, so that the general
//! decoder runs — on anything it is not sure of: an unknown or duplicated
//! field, an escaped `type`, a `null` where a value belongs, a field of the
//! other frame, a wrongly typed `id`. Whatever it accepts, the general
//! decoder accepts too and decodes to the same envelope (checked by the
//! crate's `hot_path` property tests and the `frame_decode` fuzz target);
//! every error still comes from the general decoder.

use serde::{Deserialize, Deserializer};

use crate::client::{ClientFrame, ToolCall, ToolResult};
use crate::envelope::{Envelope, RequestId};

/// The fields of both frames; which of `paths` and `ok` is present says
/// which frame it is. Unknown fields send the line to the general decoder
/// (serde would skip their values less strictly than a JSON tree is read).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct HotLine<'a> {
    /// `null` is the same as absent, as in the general decoder.
    #[serde(default)]
    id: Option<RequestId>,
    #[serde(rename = "type", borrow)]
    kind: &'a str,
    session: String,
    tool: String,
    #[serde(default, deserialize_with = "present")]
    paths: Option<Vec<String>>,
    #[serde(default, deserialize_with = "present")]
    ok: Option<bool>,
}

/// A field that, when present, holds a value: unlike `Option`'s own
/// reading, `null` is an error here (the general decoder rejects a `null`
/// `paths` or `ok`).
fn present<'de, D, T>(deserializer: D) -> Result<Option<T>, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de>,
{
    T::deserialize(deserializer).map(Some)
}

/// Decodes `text` if it is a plain `tool_call` or `tool_result`; `None`
/// means "ask the general decoder", never "invalid".
pub(crate) fn decode_hot_client_frame(text: &str) -> Option<Envelope<ClientFrame>> {
    let line: HotLine = serde_json::from_str(text).ok()?;
    let frame = match (line.kind, line.paths, line.ok) {
        ("tool_call", paths, None) => ClientFrame::ToolCall(ToolCall {
            session: line.session,
            tool: line.tool,
            paths: paths.unwrap_or_default(),
        }),
        ("tool_result", None, Some(ok)) => ClientFrame::ToolResult(ToolResult {
            session: line.session,
            tool: line.tool,
            ok,
        }),
        _ => return None,
    };
    Some(Envelope { id: line.id, frame })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::decode::decode_client_frame_general;

    /// Asserts the hot path's verdict on `text`: `Some` and equal to the
    /// general decoder's, or `None`.
    fn check(text: &str, expect_hot: bool) {
        let hot = decode_hot_client_frame(text);
        assert_eq!(hot.is_some(), expect_hot, "{text}");
        if let Some(hot) = hot {
            assert_eq!(
                decode_client_frame_general(text.as_bytes()).as_ref(),
                Ok(&hot),
                "{text}"
            );
        }
    }

    #[test]
    fn plain_tool_frames_take_the_hot_path() {
        check(
            r#"{"type":"tool_call","session":"s","tool":"edit","paths":["a"]}"#,
            true,
        );
        check(r#"{"type":"tool_call","session":"s","tool":"edit"}"#, true);
        check(
            r#"{"id":7,"type":"tool_result","session":"s","tool":"edit","ok":false}"#,
            true,
        );
        check(
            r#" {"paths":[],"tool":"w","session":"s\u00e9","type":"tool_call","id":"r-1"} "#,
            true,
        );
        check(
            r#"{"id":null,"type":"tool_result","session":"s","tool":"edit","ok":true}"#,
            true,
        );
    }

    #[test]
    fn anything_unusual_goes_to_the_general_decoder() {
        for text in [
            // an extra field (accepted there, ignored)
            r#"{"type":"tool_call","session":"s","tool":"edit","paths":[],"x":1}"#,
            // a field of the other frame
            r#"{"type":"tool_call","session":"s","tool":"edit","ok":true}"#,
            r#"{"type":"tool_result","session":"s","tool":"edit","ok":true,"paths":[]}"#,
            // null where a value belongs
            r#"{"type":"tool_call","session":"s","tool":"edit","paths":null}"#,
            r#"{"type":"tool_result","session":"s","tool":"edit","ok":null}"#,
            // a duplicated field (the general decoder keeps the last)
            r#"{"type":"tool_call","session":"s","session":"t","tool":"edit"}"#,
            // an escaped type name
            r#"{"type":"tool\u005fcall","session":"s","tool":"edit"}"#,
            // an id the general decoder rejects
            r#"{"id":-1,"type":"tool_call","session":"s","tool":"edit"}"#,
            r#"{"id":1.5,"type":"tool_call","session":"s","tool":"edit"}"#,
            // other frames, missing fields, not JSON
            r#"{"type":"status"}"#,
            r#"{"type":"tool_result","session":"s","tool":"edit"}"#,
            r#"{"type":"tool_call","tool":"edit"}"#,
            "[1]",
            "{",
        ] {
            check(text, false);
        }
    }
}
