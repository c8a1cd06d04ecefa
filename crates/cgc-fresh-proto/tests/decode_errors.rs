//! Every way a line can fail to be a frame yields the documented code, names
//! the documented field, and keeps the request id whenever it was readable.

use cgc_fresh_proto::{
    decode_client_frame, decode_server_frame, Audience, ClientFrame, ErrorCode, FrameError,
    FrameErrorKind, Hello, RequestId, ServerFrame, SessionShutdown, SessionStart,
    SessionStartReason, ToolCall,
};

fn client_error(line: &[u8]) -> FrameError {
    match decode_client_frame(line) {
        Ok(envelope) => panic!("{} decoded as {envelope:?}", String::from_utf8_lossy(line)),
        Err(error) => error,
    }
}

fn server_error(line: &[u8]) -> FrameError {
    match decode_server_frame(line) {
        Ok(envelope) => panic!("{} decoded as {envelope:?}", String::from_utf8_lossy(line)),
        Err(error) => error,
    }
}

/// Asserts code, field and id, and that the error frame says the same.
fn assert_error(error: &FrameError, code: ErrorCode, field: Option<&str>, id: Option<RequestId>) {
    assert_eq!(error.code(), code, "{error:?}");
    assert_eq!(error.field(), field, "{error:?}");
    assert_eq!(error.id, id, "{error:?}");
    let reply = error.to_reply();
    assert_eq!(reply.id, id);
    match reply.frame {
        ServerFrame::Error(frame) => {
            assert_eq!(frame.code, code);
            assert_eq!(frame.field.as_deref(), field);
            assert_eq!(frame.message, error.to_string());
            assert!(!frame.message.is_empty());
        }
        other => panic!("reply is not an error frame: {other:?}"),
    }
}

// --- bad_json -------------------------------------------------------------

#[test]
fn invalid_utf8_is_bad_json() {
    let error = client_error(b"{\"id\":1,\"type\":\"st\xffatus\"}");
    assert_error(&error, ErrorCode::BadJson, None, None);
    assert!(error.message().contains("UTF-8"), "{}", error.message());
}

#[test]
fn truncated_json_is_bad_json() {
    assert_error(
        &client_error(br#"{"id":1,"type":"status""#),
        ErrorCode::BadJson,
        None,
        None,
    );
}

#[test]
fn trailing_garbage_is_bad_json() {
    assert_error(
        &client_error(br#"{"type":"status"} {"type":"sync"}"#),
        ErrorCode::BadJson,
        None,
        None,
    );
}

#[test]
fn empty_input_is_bad_json() {
    assert_error(&client_error(b""), ErrorCode::BadJson, None, None);
}

// --- bad_request: the line as a whole ---------------------------------------

#[test]
fn non_objects_are_bad_requests_without_field() {
    for line in [&b"[1,2]"[..], b"\"status\"", b"42", b"null", b"true"] {
        assert_error(&client_error(line), ErrorCode::BadRequest, None, None);
    }
}

// --- id ---------------------------------------------------------------------

#[test]
fn unusable_ids_name_the_id_field_and_are_not_echoed() {
    for id in ["-1", "1.5", "true", "[1]", "{}"] {
        let line = format!(r#"{{"id":{id},"type":"status"}}"#);
        assert_error(
            &client_error(line.as_bytes()),
            ErrorCode::BadRequest,
            Some("id"),
            None,
        );
    }
}

#[test]
fn null_id_counts_as_absent() {
    let envelope = decode_client_frame(br#"{"id":null,"type":"status"}"#).unwrap();
    assert_eq!(envelope.id, None);
    assert_eq!(envelope.frame, ClientFrame::Status);
}

#[test]
fn numeric_looking_string_id_stays_a_string() {
    let envelope = decode_client_frame(br#"{"id":"5","type":"status"}"#).unwrap();
    assert_eq!(envelope.id, Some(RequestId::Text("5".into())));
}

#[test]
fn an_id_past_the_largest_integer_is_called_too_large_not_fractional() {
    for id in ["18446744073709551616", "100000000000000000000000", "1e30"] {
        let line = format!(r#"{{"id":{id},"type":"status"}}"#);
        let error = client_error(line.as_bytes());
        assert_error(&error, ErrorCode::BadRequest, Some("id"), None);
        assert_eq!(
            error.message(),
            "field `id` must be a non-negative integer or a string, \
             not an integer too large (at most 18446744073709551615)",
            "{id}"
        );
    }
    let error = client_error(br#"{"id":1.5,"type":"status"}"#);
    assert!(
        error.message().ends_with("not a fractional number"),
        "{error:?}"
    );
    let error = client_error(br#"{"id":-1,"type":"status"}"#);
    assert!(
        error.message().ends_with("not a negative integer"),
        "{error:?}"
    );
}

#[test]
fn largest_numeric_id_is_kept_exactly() {
    let line = format!(r#"{{"id":{},"type":"sync"}}"#, u64::MAX);
    let envelope = decode_client_frame(line.as_bytes()).unwrap();
    assert_eq!(envelope.id, Some(RequestId::Number(u64::MAX)));
}

// --- type -------------------------------------------------------------------

#[test]
fn missing_type_names_type_and_keeps_id() {
    assert_error(
        &client_error(br#"{"id":3,"session":"s"}"#),
        ErrorCode::BadRequest,
        Some("type"),
        Some(RequestId::Number(3)),
    );
}

#[test]
fn non_string_type_names_type_and_keeps_id() {
    for type_value in ["5", "null", "[\"hello\"]", "{}"] {
        let line = format!(r#"{{"id":"a","type":{type_value}}}"#);
        assert_error(
            &client_error(line.as_bytes()),
            ErrorCode::BadRequest,
            Some("type"),
            Some(RequestId::Text("a".into())),
        );
    }
}

#[test]
fn unknown_type_is_reported_with_its_name_and_id() {
    let error = client_error(br#"{"id":4,"type":"teleport"}"#);
    assert_error(
        &error,
        ErrorCode::UnknownType,
        None,
        Some(RequestId::Number(4)),
    );
    assert_eq!(
        error.kind,
        FrameErrorKind::UnknownType {
            name: "teleport".into()
        }
    );
}

#[test]
fn server_types_are_unknown_to_the_client_decoder_and_vice_versa() {
    assert_error(
        &client_error(br#"{"type":"welcome"}"#),
        ErrorCode::UnknownType,
        None,
        None,
    );
    assert_error(
        &server_error(br#"{"type":"hello"}"#),
        ErrorCode::UnknownType,
        None,
        None,
    );
}

#[test]
fn type_names_are_case_sensitive() {
    assert_error(
        &client_error(br#"{"type":"Status"}"#),
        ErrorCode::UnknownType,
        None,
        None,
    );
}

// --- bad_request: fields ----------------------------------------------------

#[test]
fn missing_session_is_named() {
    let error = client_error(br#"{"id":8,"type":"session_start","reason":"new"}"#);
    assert_error(
        &error,
        ErrorCode::BadRequest,
        Some("session"),
        Some(RequestId::Number(8)),
    );
    assert_eq!(error.message(), "missing field `session`");
}

#[test]
fn wrongly_typed_session_is_named() {
    let error = client_error(br#"{"id":"x","type":"tool_call","session":5,"tool":"edit"}"#);
    assert_error(
        &error,
        ErrorCode::BadRequest,
        Some("session"),
        Some(RequestId::Text("x".into())),
    );
    assert!(
        error.message().starts_with("field `session`: invalid type"),
        "{}",
        error.message()
    );
}

#[test]
fn a_huge_wrongly_typed_value_is_not_echoed_in_full() {
    let line = format!(
        r#"{{"type":"tool_result","session":"s","tool":"t","ok":"{}"}}"#,
        "y".repeat(50_000)
    );
    let error = client_error(line.as_bytes());
    assert_error(&error, ErrorCode::BadRequest, Some("ok"), None);
    assert!(
        error.message().len() < 400,
        "{} bytes",
        error.message().len()
    );
}

#[test]
fn every_missing_required_client_field_is_named() {
    let cases: [(&str, &str); 9] = [
        (r#"{"type":"hello","instance":"i","protocol":1}"#, "client"),
        (r#"{"type":"hello","client":"c","protocol":1}"#, "instance"),
        (
            r#"{"type":"hello","client":"c","instance":"i"}"#,
            "protocol",
        ),
        (r#"{"type":"session_start","session":"s"}"#, "reason"),
        (r#"{"type":"tool_call","tool":"edit"}"#, "session"),
        (r#"{"type":"tool_call","session":"s"}"#, "tool"),
        (r#"{"type":"tool_result","session":"s","tool":"t"}"#, "ok"),
        (r#"{"type":"tool_result","session":"s","ok":true}"#, "tool"),
        (r#"{"type":"session_shutdown"}"#, "session"),
    ];
    for (line, field) in cases {
        let error = client_error(line.as_bytes());
        assert_error(&error, ErrorCode::BadRequest, Some(field), None);
        assert_eq!(error.message(), format!("missing field `{field}`"));
    }
}

#[test]
fn wrongly_typed_client_fields_are_named() {
    let cases: [(&str, &str); 8] = [
        (
            r#"{"type":"hello","client":1,"instance":"i","protocol":1}"#,
            "client",
        ),
        (
            r#"{"type":"hello","client":"c","instance":"i","protocol":"1"}"#,
            "protocol",
        ),
        (
            r#"{"type":"hello","client":"c","instance":"i","protocol":-1}"#,
            "protocol",
        ),
        (
            r#"{"type":"session_start","session":"s","reason":5}"#,
            "reason",
        ),
        (
            r#"{"type":"tool_call","session":"s","tool":"t","paths":"a"}"#,
            "paths",
        ),
        (
            r#"{"type":"tool_call","session":"s","tool":"t","paths":["a",3]}"#,
            "paths[1]",
        ),
        (
            r#"{"type":"tool_result","session":"s","tool":"t","ok":"yes"}"#,
            "ok",
        ),
        (
            r#"{"type":"session_shutdown","session":"s","reason":5}"#,
            "reason",
        ),
    ];
    for (line, field) in cases {
        assert_error(
            &client_error(line.as_bytes()),
            ErrorCode::BadRequest,
            Some(field),
            None,
        );
    }
}

// --- unsupported_protocol ---------------------------------------------------

#[test]
fn other_protocol_versions_are_unsupported_and_keep_id() {
    for version in [0u64, 2, u64::from(u32::MAX) + 1] {
        let line = format!(
            r#"{{"id":2,"type":"hello","client":"c","instance":"i","protocol":{version}}}"#
        );
        let error = client_error(line.as_bytes());
        assert_error(
            &error,
            ErrorCode::UnsupportedProtocol,
            None,
            Some(RequestId::Number(2)),
        );
        assert_eq!(
            error.kind,
            FrameErrorKind::UnsupportedProtocol { got: version }
        );
    }
}

#[test]
fn protocol_is_judged_before_other_hello_fields() {
    // A future hello may drop or retype fields; the useful answer is still
    // "unsupported protocol", not a complaint about those fields.
    assert_error(
        &client_error(br#"{"type":"hello","protocol":2}"#),
        ErrorCode::UnsupportedProtocol,
        None,
        None,
    );
}

// --- accepted variations ----------------------------------------------------

#[test]
fn unknown_fields_are_ignored() {
    let envelope = decode_client_frame(
        br#"{"type":"hello","client":"pi-bridge","instance":"i1","protocol":1,"capabilities":["x"],"id":1}"#,
    )
    .unwrap();
    assert_eq!(envelope.id, Some(RequestId::Number(1)));
    assert_eq!(
        envelope.frame,
        ClientFrame::Hello(Hello {
            client: "pi-bridge".into(),
            instance: "i1".into(),
            protocol: 1,
        })
    );
    let envelope = decode_client_frame(br#"{"type":"status","verbose":true}"#).unwrap();
    assert_eq!(envelope.frame, ClientFrame::Status);
}

#[test]
fn absent_paths_mean_none_and_absent_reason_means_none() {
    let envelope =
        decode_client_frame(br#"{"type":"tool_call","session":"s","tool":"bash"}"#).unwrap();
    assert_eq!(
        envelope.frame,
        ClientFrame::ToolCall(ToolCall {
            session: "s".into(),
            tool: "bash".into(),
            paths: vec![],
        })
    );
    for line in [
        &br#"{"type":"session_shutdown","session":"s"}"#[..],
        br#"{"type":"session_shutdown","session":"s","reason":null}"#,
    ] {
        assert_eq!(
            decode_client_frame(line).unwrap().frame,
            ClientFrame::SessionShutdown(SessionShutdown {
                session: "s".into(),
                reason: None,
            })
        );
    }
}

#[test]
fn unknown_session_start_reason_reads_as_other() {
    let envelope =
        decode_client_frame(br#"{"type":"session_start","session":"s","reason":"teleported"}"#)
            .unwrap();
    assert_eq!(
        envelope.frame,
        ClientFrame::SessionStart(SessionStart {
            session: "s".into(),
            reason: SessionStartReason::Other,
            owner_pid: None,
        })
    );
}

#[test]
fn surrounding_whitespace_is_accepted() {
    let envelope = decode_client_frame(b"  {\"type\":\"sync\"}\t").unwrap();
    assert_eq!(envelope.frame, ClientFrame::Sync);
}

// --- server frames (decoded by the CLI) ------------------------------------

#[test]
fn welcome_with_other_protocol_is_unsupported() {
    let error = server_error(
        br#"{"id":1,"type":"welcome","protocol":3,"service_version":"9","pid":1,"workspace":"/w"}"#,
    );
    assert_error(
        &error,
        ErrorCode::UnsupportedProtocol,
        None,
        Some(RequestId::Number(1)),
    );
}

#[test]
fn server_field_errors_are_named() {
    let cases: [(&str, &str); 7] = [
        (
            r#"{"type":"welcome","protocol":1,"pid":1,"workspace":"/w"}"#,
            "service_version",
        ),
        (
            r#"{"type":"state","workspace":"/w","status":"fresh","syncing":false}"#,
            "edit_epoch",
        ),
        (
            r#"{"type":"state","workspace":"/w","status":"stale","edit_epoch":0,"syncing":false}"#,
            "status",
        ),
        (
            r#"{"type":"state","workspace":"/w","status":"fresh","edit_epoch":0,"syncing":false,"watcher":{"state":"running"}}"#,
            "watcher.mode",
        ),
        (
            r#"{"type":"notice","condition":"nope","level":"info","text":"t"}"#,
            "condition",
        ),
        (r#"{"type":"error","code":"teapot","message":"m"}"#, "code"),
        (r#"{"type":"config","warnings":[]}"#, "values"),
    ];
    for (line, field) in cases {
        assert_error(
            &server_error(line.as_bytes()),
            ErrorCode::BadRequest,
            Some(field),
            None,
        );
    }
}

#[test]
fn notice_without_audience_is_for_the_user() {
    let envelope = decode_server_frame(
        br#"{"type":"notice","condition":"sync_completed","level":"info","text":"ok"}"#,
    )
    .unwrap();
    match envelope.frame {
        ServerFrame::Notice(notice) => assert_eq!(notice.audience, Audience::User),
        other => panic!("not a notice: {other:?}"),
    }
}
