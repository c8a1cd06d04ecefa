//! `decode_client_frame` reads plain `tool_call`/`tool_result` lines in one
//! pass and everything else through the general decoder; the two must give
//! the same answer — the same envelope, or the same error — for any line.
//! Lines are built from the fields those frames have (and a few they do
//! not), in any order, repeated, with values of every JSON kind, escapes
//! and odd spacing, so that both the accepting and the refusing sides of
//! the one-pass reader are exercised.

use cgc_fresh_proto::{decode_client_frame, decode_client_frame_general};
use proptest::collection::vec;
use proptest::prelude::*;
use proptest::sample::select;

const KEYS: [&str; 10] = [
    "id",
    "type",
    "session",
    "tool",
    "paths",
    "ok",
    "reason",
    "extra",
    "typ\\u0065",
    "",
];

const VALUES: [&str; 26] = [
    r#""tool_call""#,
    r#""tool_result""#,
    r#""tool\u005fcall""#,
    r#""status""#,
    r#""s1""#,
    r#""edit""#,
    r#""é\n\"x""#,
    r#""""#,
    "null",
    "true",
    "false",
    "0",
    "7",
    "-1",
    "1.5",
    "1e2",
    "18446744073709551615",
    "18446744073709551616",
    "[]",
    r#"["src/a.rs","/abs/b.rs"]"#,
    r#"["a",1]"#,
    "[null]",
    r#"{"k":[1,{"m":null}]}"#,
    "{}",
    r#""\ud800""#,
    r#"[1,"\udc00x"]"#,
];

const SPACES: [&str; 4] = ["", " ", "\t", "\r\n "];

/// One JSON-ish object: fields picked from the pools, in the order drawn.
fn line() -> impl Strategy<Value = String> {
    (
        vec((select(&KEYS[..]), select(&VALUES[..])), 0..8),
        select(&SPACES[..]),
        prop::bool::weighted(0.95),
    )
        .prop_map(|(fields, space, closed)| {
            let body: Vec<String> = fields
                .iter()
                .map(|(key, value)| format!("{space}\"{key}\"{space}:{space}{value}"))
                .collect();
            let close = if closed { "}" } else { "" };
            format!("{space}{{{}{space}{close}{space}", body.join(","))
        })
}

/// The fields of a line shaped like a real harness frame, so that most
/// cases are accepted by the one-pass reader.
fn tool_fields() -> impl Strategy<Value = Vec<(String, String)>> {
    (
        prop::option::of(select(&["7", r#""r-1""#, "null"][..])),
        prop::bool::ANY,
        select(&VALUES[4..8]),
        select(&VALUES[4..8]),
        prop::option::of(select(&["[]", r#"["a.rs","../b.rs"]"#][..])),
        prop::bool::ANY,
    )
        .prop_map(|(id, call, session, tool, paths, ok)| {
            let mut fields = Vec::new();
            if let Some(id) = id {
                fields.push(("id", id.to_string()));
            }
            let kind = if call { "tool_call" } else { "tool_result" };
            fields.push(("type", format!("\"{kind}\"")));
            fields.push(("session", session.to_string()));
            fields.push(("tool", tool.to_string()));
            if call {
                if let Some(paths) = paths {
                    fields.push(("paths", paths.to_string()));
                }
            } else {
                fields.push(("ok", ok.to_string()));
            }
            fields
                .into_iter()
                .map(|(key, value)| (key.to_string(), value))
                .collect()
        })
}

fn render(fields: &[(String, String)]) -> String {
    let body: Vec<String> = fields
        .iter()
        .map(|(key, value)| format!("\"{key}\":{value}"))
        .collect();
    format!("{{{}}}", body.join(","))
}

/// A harness-shaped line with up to three small changes: a value replaced,
/// a field added (perhaps a second time), a field removed, the order turned.
fn mutated_tool_line() -> impl Strategy<Value = String> {
    (
        tool_fields(),
        vec((0..4u8, select(&KEYS[..]), select(&VALUES[..])), 1..4),
    )
        .prop_map(|(mut fields, mutations)| {
            for (op, key, value) in mutations {
                match op {
                    0 => match fields.iter_mut().find(|(k, _)| k == key) {
                        Some(field) => field.1 = value.to_string(),
                        None => fields.push((key.to_string(), value.to_string())),
                    },
                    1 => fields.push((key.to_string(), value.to_string())),
                    2 => fields.retain(|(k, _)| k != key),
                    _ => {
                        let by = 1.min(fields.len());
                        fields.rotate_left(by);
                    }
                }
            }
            render(&fields)
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(4_000))]

    #[test]
    fn the_one_pass_reader_agrees_with_the_general_decoder(text in line()) {
        prop_assert_eq!(
            decode_client_frame(text.as_bytes()),
            decode_client_frame_general(text.as_bytes()),
            "{}", text
        );
    }

    #[test]
    fn harness_shaped_lines_decode_the_same_either_way(fields in tool_fields()) {
        let text = render(&fields);
        let fast = decode_client_frame(text.as_bytes());
        prop_assert!(fast.is_ok(), "{}: {:?}", text, fast);
        prop_assert_eq!(fast, decode_client_frame_general(text.as_bytes()), "{}", text);
    }

    #[test]
    fn slightly_changed_harness_lines_decode_the_same_either_way(text in mutated_tool_line()) {
        prop_assert_eq!(
            decode_client_frame(text.as_bytes()),
            decode_client_frame_general(text.as_bytes()),
            "{}", text
        );
    }
}
