//! The harness protocol against a running service: every bad-input case
//! answers with its error code and leaves the service serving.

use serde_json::{json, Value};

use crate::support::{Sandbox, Service};

/// After any bad input, a fresh connection still gets answers.
fn assert_still_serving(service: &Service) {
    let mut other = service.connect();
    other.hello();
    let state = other.request(json!({"type": "status"}), 99);
    assert_eq!(state["type"], "state", "{state}");
}

fn error_for(service: &Service, line: &[u8]) -> Value {
    let mut conn = service.connect();
    conn.send_raw(line);
    let reply = conn.recv();
    assert_eq!(reply["type"], "error", "{reply}");
    // The same connection keeps working after a recoverable error.
    let state = conn.request(json!({"type": "status"}), 7);
    assert_eq!(state["type"], "state");
    reply
}

#[test]
fn hello_is_answered_with_welcome_and_status_with_state() {
    let sandbox = Sandbox::new();
    let service = Service::start(&sandbox, &[], &[]);
    let mut conn = service.connect();
    let welcome = conn.hello();
    assert_eq!(welcome["protocol"], 1);
    assert_eq!(welcome["pid"], service.pid());
    assert_eq!(welcome["id"], 0);
    let state = conn.request(json!({"type": "status"}), 1);
    assert_eq!(state["type"], "state");
    assert_eq!(
        state["status"], "unknown",
        "nothing is known before any sync: {state}"
    );
    let workspace = std::fs::canonicalize(sandbox.workspace()).unwrap();
    assert_eq!(state["workspace"], workspace.display().to_string());
}

#[test]
fn malformed_json_is_bad_json() {
    let sandbox = Sandbox::new();
    let service = Service::start(&sandbox, &[], &[]);
    let reply = error_for(&service, b"{\"type\": \"status\",\n");
    assert_eq!(reply["code"], "bad_json");
    assert_still_serving(&service);
}

#[test]
fn binary_garbage_is_bad_json() {
    let sandbox = Sandbox::new();
    let service = Service::start(&sandbox, &[], &[]);
    let reply = error_for(&service, b"\xff\xfe\x00\x01garbage\n");
    assert_eq!(reply["code"], "bad_json");
    assert_still_serving(&service);
}

#[test]
fn unknown_type_is_unknown_type() {
    let sandbox = Sandbox::new();
    let service = Service::start(&sandbox, &[], &[]);
    let reply = error_for(&service, b"{\"type\":\"teleport\",\"id\":5}\n");
    assert_eq!(reply["code"], "unknown_type");
    assert_eq!(reply["id"], 5, "the error echoes the request id");
    assert_still_serving(&service);
}

#[test]
fn missing_field_is_bad_request_naming_the_field() {
    let sandbox = Sandbox::new();
    let service = Service::start(&sandbox, &[], &[]);
    let reply = error_for(
        &service,
        b"{\"type\":\"tool_call\",\"tool\":\"edit\",\"paths\":[]}\n",
    );
    assert_eq!(reply["code"], "bad_request");
    assert_eq!(reply["field"], "session", "{reply}");
    assert_still_serving(&service);
}

#[test]
fn invalid_field_is_bad_request_naming_the_field() {
    let sandbox = Sandbox::new();
    let service = Service::start(&sandbox, &[], &[]);
    let reply = error_for(
        &service,
        b"{\"type\":\"tool_result\",\"session\":\"s\",\"tool\":\"edit\",\"ok\":\"yes\"}\n",
    );
    assert_eq!(reply["code"], "bad_request");
    assert_eq!(reply["field"], "ok", "{reply}");
    let reply = error_for(&service, b"{\"no_type\":1}\n");
    assert_eq!(reply["code"], "bad_request");
    assert_eq!(reply["field"], "type");
    assert_still_serving(&service);
}

#[test]
fn unsupported_protocol_version_is_refused() {
    let sandbox = Sandbox::new();
    let service = Service::start(&sandbox, &[], &[]);
    let reply = error_for(
        &service,
        b"{\"type\":\"hello\",\"client\":\"x\",\"instance\":\"i\",\"protocol\":99,\"id\":1}\n",
    );
    assert_eq!(reply["code"], "unsupported_protocol");
    assert_eq!(reply["id"], 1);
    assert_still_serving(&service);
}

#[test]
fn over_long_line_is_too_large_and_closes_the_connection() {
    let sandbox = Sandbox::new();
    let service = Service::start(&sandbox, &[], &[]);
    let mut conn = service.connect();
    // 1 MiB without a newline: the service must refuse it before buffering it all.
    let big = vec![b'a'; 1024 * 1024];
    let _ = std::io::Write::write_all(&mut conn.stream, &big);
    let reply = conn.recv();
    assert_eq!(reply["code"], "too_large", "{reply}");
    assert!(conn.is_closed_by_peer());
    assert_still_serving(&service);
}

#[test]
fn configured_line_limit_applies() {
    let sandbox = Sandbox::new();
    let service = Service::start(&sandbox, &[], &[("CGC_SERVICE_MAX_LINE_BYTES", "2048")]);
    let mut conn = service.connect();
    let long = format!(
        "{{\"type\":\"tool_call\",\"session\":\"s\",\"tool\":\"edit\",\"paths\":[\"{}\"]}}\n",
        "p".repeat(3000)
    );
    conn.send_raw(long.as_bytes());
    assert_eq!(conn.recv()["code"], "too_large");
    let mut ok = service.connect();
    let state = ok.request(json!({"type": "status"}), 1);
    assert_eq!(state["type"], "state");
}

#[test]
fn half_a_frame_then_disconnect_leaves_the_service_serving() {
    let sandbox = Sandbox::new();
    let service = Service::start(&sandbox, &[], &[]);
    {
        let mut conn = service.connect();
        conn.send_raw(b"{\"type\":\"sta");
    }
    assert_still_serving(&service);
}

#[test]
fn events_without_id_are_not_acknowledged_and_with_id_are() {
    let sandbox = Sandbox::new();
    let service = Service::start(&sandbox, &[], &[]);
    let mut conn = service.connect();
    conn.hello();
    conn.send(json!({"type": "session_start", "session": "s1", "reason": "startup"}));
    conn.send(json!({"type": "status", "id": 4}));
    // The id-less event produced no frame: the very next one answers id 4.
    let next = conn.recv();
    assert_eq!(
        (next["type"].as_str(), next["id"].as_u64()),
        (Some("state"), Some(4)),
        "{next}"
    );
    conn.send(json!({"type": "session_start", "session": "s1", "reason": "startup", "id": 5}));
    let ack = conn.recv();
    assert_eq!(
        (ack["type"].as_str(), ack["id"].as_u64()),
        (Some("ack"), Some(5)),
        "{ack}"
    );
}
