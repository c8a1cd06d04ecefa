//! Every frame variant survives encode → decode unchanged, with and without
//! a request id, and encodes as exactly one line.

use cgc_fresh_proto::{
    decode_client_frame, decode_server_frame, encode, Audience, BackendFacts, ClientFrame,
    ConfigFrame, Envelope, ErrorCode, ErrorFrame, FreshnessStatus, Hello, McpAnswer, McpCall,
    Notice, NoticeCondition, NoticeLevel, NoticesFrame, RequestId, ServerFrame, SessionShutdown,
    SessionStart, SessionStartReason, StateFrame, SyncPhase, SyncProgress, TakeNotices, ToolCall,
    ToolResult, WatcherFacts, Welcome, PROTOCOL_VERSION,
};
use proptest::collection::{btree_map, vec};
use proptest::prelude::*;
use proptest::sample::select;
use serde_json::Value;

fn request_id() -> impl Strategy<Value = RequestId> {
    prop_oneof![
        any::<u64>().prop_map(RequestId::Number),
        any::<String>().prop_map(RequestId::Text),
    ]
}

fn text() -> impl Strategy<Value = String> {
    any::<String>()
}

fn hello() -> impl Strategy<Value = ClientFrame> {
    (text(), text()).prop_map(|(client, instance)| {
        ClientFrame::Hello(Hello {
            client,
            instance,
            protocol: PROTOCOL_VERSION,
        })
    })
}

fn session_start() -> impl Strategy<Value = ClientFrame> {
    (
        text(),
        select(SessionStartReason::ALL.to_vec()),
        proptest::option::of(any::<u32>()),
    )
        .prop_map(|(session, reason, owner_pid)| {
            ClientFrame::SessionStart(SessionStart {
                session,
                reason,
                owner_pid,
            })
        })
}

fn take_notices() -> impl Strategy<Value = ClientFrame> {
    text().prop_map(|session| ClientFrame::TakeNotices(TakeNotices { session }))
}

fn tool_call() -> impl Strategy<Value = ClientFrame> {
    (text(), text(), vec(text(), 0..5)).prop_map(|(session, tool, paths)| {
        ClientFrame::ToolCall(ToolCall {
            session,
            tool,
            paths,
        })
    })
}

fn tool_result() -> impl Strategy<Value = ClientFrame> {
    (text(), text(), any::<bool>())
        .prop_map(|(session, tool, ok)| ClientFrame::ToolResult(ToolResult { session, tool, ok }))
}

fn session_shutdown() -> impl Strategy<Value = ClientFrame> {
    (text(), proptest::option::of(text())).prop_map(|(session, reason)| {
        ClientFrame::SessionShutdown(SessionShutdown { session, reason })
    })
}

fn welcome() -> impl Strategy<Value = ServerFrame> {
    (text(), any::<u32>(), text()).prop_map(|(service_version, pid, workspace)| {
        ServerFrame::Welcome(Welcome {
            protocol: PROTOCOL_VERSION,
            service_version,
            pid,
            workspace,
        })
    })
}

fn watcher_facts() -> impl Strategy<Value = WatcherFacts> {
    (
        text(),
        text(),
        proptest::option::of(any::<u32>()),
        proptest::option::of(any::<u64>()),
    )
        .prop_map(|(mode, state, pid, since)| WatcherFacts {
            mode,
            state,
            pid,
            since,
        })
}

fn backend_facts() -> impl Strategy<Value = BackendFacts> {
    (text(), text()).prop_map(|(kind, source)| BackendFacts { kind, source })
}

fn sync_progress() -> impl Strategy<Value = SyncProgress> {
    (
        select(SyncPhase::ALL.to_vec()),
        proptest::option::of((any::<u64>(), any::<u64>())),
        any::<u64>(),
    )
        .prop_map(|(phase, counts, since)| SyncProgress {
            phase,
            done: counts.map(|(done, _)| done),
            total: counts.map(|(_, total)| total),
            since,
        })
}

fn state() -> impl Strategy<Value = ServerFrame> {
    use proptest::option::of;
    (
        (text(), select(FreshnessStatus::ALL.to_vec())),
        (of(any::<u64>()), of(any::<u64>()), of(text())),
        (any::<u64>(), any::<bool>()),
        (of(watcher_facts()), of(backend_facts()), of(text())),
        (proptest::collection::vec(text(), 0..3), of(sync_progress())),
    )
        .prop_map(
            |(
                (workspace, status),
                (last_synced_at, stale_since, last_error),
                (edit_epoch, syncing),
                (watcher, backend, detail),
                (warnings, progress),
            )| {
                ServerFrame::State(StateFrame {
                    workspace,
                    status,
                    last_synced_at,
                    stale_since,
                    last_error,
                    edit_epoch,
                    syncing,
                    watcher,
                    backend,
                    detail,
                    warnings,
                    progress,
                })
            },
        )
}

fn notice() -> impl Strategy<Value = ServerFrame> {
    (
        proptest::option::of(text()),
        select(NoticeCondition::ALL.to_vec()),
        select(NoticeLevel::ALL.to_vec()),
        text(),
    )
        .prop_map(|(session, condition, level, text)| {
            ServerFrame::Notice(Notice {
                session,
                condition,
                level,
                text,
                audience: Audience::User,
            })
        })
}

fn notices() -> impl Strategy<Value = ServerFrame> {
    (text(), vec(notice(), 0..3)).prop_map(|(session, frames)| {
        let notices = frames
            .into_iter()
            .filter_map(|frame| match frame {
                ServerFrame::Notice(notice) => Some(notice),
                _ => None,
            })
            .collect();
        ServerFrame::Notices(NoticesFrame { session, notices })
    })
}

fn error() -> impl Strategy<Value = ServerFrame> {
    (
        select(ErrorCode::ALL.to_vec()),
        text(),
        proptest::option::of(text()),
    )
        .prop_map(|(code, message, field)| {
            ServerFrame::Error(ErrorFrame {
                code,
                message,
                field,
            })
        })
}

/// Any JSON value whose numbers survive a text round trip exactly.
fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        // Eighths are exact in binary and print in few digits.
        (-4000i32..4000).prop_map(|eighths| Value::from(f64::from(eighths) / 8.0)),
        text().prop_map(Value::String),
    ];
    leaf.prop_recursive(3, 32, 4, |inner| {
        prop_oneof![
            vec(inner.clone(), 0..4).prop_map(Value::Array),
            btree_map(text(), inner, 0..4).prop_map(|map| Value::Object(map.into_iter().collect())),
        ]
    })
}

fn config() -> impl Strategy<Value = ServerFrame> {
    (json_value(), vec(text(), 0..4))
        .prop_map(|(values, warnings)| ServerFrame::Config(ConfigFrame { values, warnings }))
}

/// Checks the line's shape: one `\n`, at the end; `id` present iff given.
fn check_line(line: &[u8], id: &Option<RequestId>) -> Result<(), TestCaseError> {
    prop_assert_eq!(line.last(), Some(&b'\n'));
    prop_assert_eq!(line.iter().filter(|byte| **byte == b'\n').count(), 1);
    let object: Value =
        serde_json::from_slice(line).map_err(|e| TestCaseError::fail(e.to_string()))?;
    prop_assert_eq!(object.get("id").is_some(), id.is_some());
    Ok(())
}

fn assert_client_round_trip(frame: ClientFrame, id: RequestId) -> Result<(), TestCaseError> {
    for id in [None, Some(id)] {
        let envelope = Envelope::with_id(id.clone(), frame.clone());
        let line = encode(&envelope);
        check_line(&line, &id)?;
        let decoded = decode_client_frame(&line[..line.len() - 1]).map_err(|e| {
            TestCaseError::fail(format!("{e} in {}", String::from_utf8_lossy(&line)))
        })?;
        prop_assert_eq!(decoded, envelope);
    }
    Ok(())
}

fn assert_server_round_trip(frame: ServerFrame, id: RequestId) -> Result<(), TestCaseError> {
    for id in [None, Some(id)] {
        let envelope = Envelope::with_id(id.clone(), frame.clone());
        let line = encode(&envelope);
        check_line(&line, &id)?;
        let decoded = decode_server_frame(&line[..line.len() - 1]).map_err(|e| {
            TestCaseError::fail(format!("{e} in {}", String::from_utf8_lossy(&line)))
        })?;
        prop_assert_eq!(decoded, envelope);
    }
    Ok(())
}

proptest! {
    #[test]
    fn hello_round_trips(frame in hello(), id in request_id()) {
        assert_client_round_trip(frame, id)?;
    }

    #[test]
    fn session_start_round_trips(frame in session_start(), id in request_id()) {
        assert_client_round_trip(frame, id)?;
    }

    #[test]
    fn tool_call_round_trips(frame in tool_call(), id in request_id()) {
        assert_client_round_trip(frame, id)?;
    }

    #[test]
    fn tool_result_round_trips(frame in tool_result(), id in request_id()) {
        assert_client_round_trip(frame, id)?;
    }

    #[test]
    fn session_shutdown_round_trips(frame in session_shutdown(), id in request_id()) {
        assert_client_round_trip(frame, id)?;
    }

    #[test]
    fn take_notices_round_trips(frame in take_notices(), id in request_id()) {
        assert_client_round_trip(frame, id)?;
    }

    #[test]
    fn payloadless_client_frames_round_trip(
        frame in select(vec![ClientFrame::Status, ClientFrame::Sync, ClientFrame::Subscribe, ClientFrame::Config]),
        id in request_id(),
    ) {
        assert_client_round_trip(frame, id)?;
    }

    #[test]
    fn mcp_frames_round_trip(name in "[a-z_]{1,20}", key in "[a-z]{1,8}", n in any::<u32>(), id in request_id()) {
        assert_client_round_trip(ClientFrame::McpTools, id.clone())?;
        let arguments = serde_json::json!({ key.clone(): n });
        assert_client_round_trip(ClientFrame::McpCall(McpCall { name, arguments }), id.clone())?;
        let answer = McpAnswer { result: Some(serde_json::json!({ key: n })), error: None };
        assert_server_round_trip(ServerFrame::Mcp(answer), id)?;
    }

    #[test]
    fn welcome_round_trips(frame in welcome(), id in request_id()) {
        assert_server_round_trip(frame, id)?;
    }

    #[test]
    fn state_round_trips(frame in state(), id in request_id()) {
        assert_server_round_trip(frame, id)?;
    }

    #[test]
    fn notice_round_trips(frame in notice(), id in request_id()) {
        assert_server_round_trip(frame, id)?;
    }

    #[test]
    fn ack_round_trips(id in request_id()) {
        assert_server_round_trip(ServerFrame::Ack, id)?;
    }

    #[test]
    fn error_round_trips(frame in error(), id in request_id()) {
        assert_server_round_trip(frame, id)?;
    }

    #[test]
    fn config_round_trips(frame in config(), id in request_id()) {
        assert_server_round_trip(frame, id)?;
    }

    #[test]
    fn notices_round_trip(frame in notices(), id in request_id()) {
        assert_server_round_trip(frame, id)?;
    }
}

/// The per-variant tests above must cover every `type`; this fails when a
/// variant is added without a round-trip test.
#[test]
fn round_trip_tests_cover_every_type() {
    let tested_client = [
        "hello",
        "session_start",
        "tool_call",
        "tool_result",
        "session_shutdown",
        "status",
        "sync",
        "subscribe",
        "config",
        "take_notices",
        "mcp_tools",
        "mcp_call",
    ];
    let tested_server = [
        "welcome", "state", "notice", "ack", "error", "config", "notices", "mcp",
    ];
    assert_eq!(ClientFrame::TYPE_NAMES, tested_client);
    assert_eq!(ServerFrame::TYPE_NAMES, tested_server);
}

#[test]
fn wire_shape_is_flat_with_id_first_and_absent_options_omitted() {
    let envelope = Envelope::with_id(
        Some(RequestId::from("r1")),
        ServerFrame::State(StateFrame {
            workspace: "/w".into(),
            status: FreshnessStatus::PossiblyStale,
            last_synced_at: None,
            stale_since: Some(5),
            last_error: None,
            edit_epoch: 2,
            syncing: false,
            watcher: None,
            backend: None,
            detail: None,
            warnings: Vec::new(),
            progress: None,
        }),
    );
    assert_eq!(
        String::from_utf8(encode(&envelope)).unwrap(),
        "{\"id\":\"r1\",\"type\":\"state\",\"workspace\":\"/w\",\"status\":\"possibly_stale\",\
         \"stale_since\":5,\"edit_epoch\":2,\"syncing\":false}\n"
    );
}

#[test]
fn notice_says_it_is_for_the_user() {
    let line = encode(&Envelope::new(ServerFrame::Notice(Notice {
        session: None,
        condition: NoticeCondition::SyncFailed,
        level: NoticeLevel::Error,
        text: "sync failed".into(),
        audience: Audience::User,
    })));
    let object: Value = serde_json::from_slice(&line).unwrap();
    assert_eq!(object["audience"], "user");
    assert_eq!(object["condition"], "sync_failed");
    assert!(object.get("session").is_none());
}

#[test]
fn unit_frames_are_just_a_type() {
    assert_eq!(
        encode(&Envelope::new(ClientFrame::Sync)),
        b"{\"type\":\"sync\"}\n"
    );
    assert_eq!(
        encode(&Envelope::with_id(
            Some(RequestId::Number(0)),
            ServerFrame::Ack
        )),
        b"{\"id\":0,\"type\":\"ack\"}\n"
    );
}

/// Found by the `frame_decode` fuzz target: a config value with more
/// digits than a double holds came back as a different double, because
/// the JSON parser's fast path rounds. The decoder must read the nearest
/// double so the number survives its trip.
#[test]
fn a_long_float_in_a_config_frame_survives_its_round_trip() {
    let line = br#"{"type":"config","values":{"freshness":{"batchMs":5008888888888888888888888888888888888888888888888888888888888}},"warnings":["x"]}"#;
    let decoded = decode_server_frame(line).expect("the fuzzer's config line decodes");
    let encoded = encode(&decoded);
    let again = decode_server_frame(encoded.strip_suffix(b"\n").expect("one line"))
        .expect("the re-encoded line decodes");
    assert_eq!(again, decoded, "the number changed on its round trip");
}
