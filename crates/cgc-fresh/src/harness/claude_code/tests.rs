//! The payload → frames mapping, and what a run prints and logs.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixListener;

use cgc_fresh_proto::{Audience, NoticeCondition, NoticeLevel};
use serde_json::json;

use super::*;

fn env() -> HookEnv {
    HookEnv {
        claude_pid: Some("4242".into()),
        project_dir: Some("/proj".into()),
    }
}

fn payload(event: &str, extra: Value) -> Vec<u8> {
    let mut value = json!({
        "session_id": "s-1",
        "transcript_path": "/t.jsonl",
        "cwd": "/proj/sub",
        "hook_event_name": event,
    });
    if let (Some(object), Value::Object(extra)) = (value.as_object_mut(), extra) {
        object.extend(extra);
    }
    serde_json::to_vec(&value).unwrap()
}

fn planned(event: &str, extra: Value) -> HookPlan {
    plan(&payload(event, extra), &env()).unwrap()
}

#[test]
fn session_start_maps_every_source_to_a_protocol_reason_with_the_owner() {
    for (source, reason) in [
        ("startup", SessionStartReason::Startup),
        ("resume", SessionStartReason::Resume),
        ("fork", SessionStartReason::Fork),
        ("clear", SessionStartReason::New),
        ("compact", SessionStartReason::Reload),
        ("something-new", SessionStartReason::Other),
    ] {
        let plan = planned("SessionStart", json!({ "source": source }));
        assert_eq!(
            plan.frames,
            vec![ClientFrame::SessionStart(SessionStart {
                session: "s-1".into(),
                reason,
                owner_pid: Some(4242),
            })],
            "{source}"
        );
        assert!(!plan.take_notices);
    }
    let plan = planned("SessionStart", json!({}));
    assert!(matches!(
        &plan.frames[0],
        ClientFrame::SessionStart(SessionStart {
            reason: SessionStartReason::Other,
            ..
        })
    ));
}

#[test]
fn file_tools_become_tool_calls_on_their_path_under_the_services_names() {
    for (tool, input, service, path) in [
        (
            "Write",
            json!({"file_path": "/proj/a.py", "content": "x"}),
            "write",
            "/proj/a.py",
        ),
        (
            "Edit",
            json!({"file_path": "/proj/b.py", "old_string": "a", "new_string": "b"}),
            "edit",
            "/proj/b.py",
        ),
        (
            "MultiEdit",
            json!({"file_path": "c.py", "edits": []}),
            "edit",
            "c.py",
        ),
        (
            "NotebookEdit",
            json!({"notebook_path": "/proj/n.ipynb", "new_source": ""}),
            "edit",
            "/proj/n.ipynb",
        ),
    ] {
        let plan = planned(
            "PreToolUse",
            json!({"tool_name": tool, "tool_input": input}),
        );
        assert_eq!(
            plan.frames,
            vec![ClientFrame::ToolCall(ToolCall {
                session: "s-1".into(),
                tool: service.into(),
                paths: vec![path.into()],
            })],
            "{tool}"
        );
        assert!(!plan.take_notices, "{tool}");
    }
}

#[test]
fn bash_is_a_tool_call_without_paths() {
    let plan = planned(
        "PreToolUse",
        json!({"tool_name": "Bash", "tool_input": {"command": "sed -i s/a/b/ x.py"}}),
    );
    assert_eq!(
        plan.frames,
        vec![ClientFrame::ToolCall(ToolCall {
            session: "s-1".into(),
            tool: "bash".into(),
            paths: vec![],
        })]
    );
}

#[test]
fn results_carry_ok_and_post_tool_use_takes_the_notices() {
    let ok = planned(
        "PostToolUse",
        json!({"tool_name": "Edit", "tool_input": {"file_path": "a"}, "tool_response": {"filePath": "a"}}),
    );
    assert_eq!(
        ok.frames,
        vec![ClientFrame::ToolResult(ToolResult {
            session: "s-1".into(),
            tool: "edit".into(),
            ok: true,
        })]
    );
    assert!(ok.take_notices);
    let failed = planned(
        "PostToolUseFailure",
        json!({"tool_name": "Bash", "tool_input": {"command": "false"}, "error": "exit 1"}),
    );
    assert_eq!(
        failed.frames,
        vec![ClientFrame::ToolResult(ToolResult {
            session: "s-1".into(),
            tool: "bash".into(),
            ok: false,
        })]
    );
    assert!(!failed.take_notices);
    let unsuccessful = planned(
        "PostToolUse",
        json!({"tool_name": "Write", "tool_response": {"success": false}}),
    );
    assert!(matches!(
        &unsuccessful.frames[0],
        ClientFrame::ToolResult(ToolResult { ok: false, .. })
    ));
}

#[test]
fn other_tools_send_nothing_but_still_take_notices_after_use() {
    for tool in [
        "Read",
        "Grep",
        "Glob",
        "WebFetch",
        "Task",
        "mcp__cgc__find_code",
        "write",
    ] {
        let pre = planned("PreToolUse", json!({"tool_name": tool, "tool_input": {}}));
        assert!(pre.is_empty(), "{tool}: {pre:?}");
        let post = planned("PostToolUse", json!({"tool_name": tool, "tool_input": {}}));
        assert!(post.frames.is_empty(), "{tool}");
        assert!(post.take_notices, "{tool}");
        let failed = planned("PostToolUseFailure", json!({"tool_name": tool}));
        assert!(failed.is_empty(), "{tool}");
    }
}

#[test]
fn stop_takes_notices_and_session_end_shuts_the_session_down() {
    let stop = planned("Stop", json!({"stop_hook_active": false}));
    assert!(stop.frames.is_empty());
    assert!(stop.take_notices);
    let end = planned("SessionEnd", json!({"reason": "prompt_input_exit"}));
    assert_eq!(
        end.frames,
        vec![ClientFrame::SessionShutdown(SessionShutdown {
            session: "s-1".into(),
            reason: Some("prompt_input_exit".into()),
        })]
    );
    assert!(!end.take_notices);
    let no_reason = planned("SessionEnd", json!({}));
    assert_eq!(
        no_reason.frames,
        vec![ClientFrame::SessionShutdown(SessionShutdown {
            session: "s-1".into(),
            reason: None,
        })]
    );
}

#[test]
fn events_without_a_mapping_do_nothing() {
    for event in [
        "UserPromptSubmit",
        "Notification",
        "PreCompact",
        "SubagentStop",
        "Future",
    ] {
        assert!(
            planned(event, json!({"prompt": "hi"})).is_empty(),
            "{event}"
        );
    }
}

#[test]
fn the_workspace_is_the_project_dir_else_the_cwd() {
    assert_eq!(planned("Stop", json!({})).workspace, PathBuf::from("/proj"));
    let without = HookEnv {
        project_dir: None,
        ..env()
    };
    let plan = plan(&payload("Stop", json!({})), &without).unwrap();
    assert_eq!(plan.workspace, PathBuf::from("/proj/sub"));
}

#[test]
fn malformed_payloads_are_refused_with_the_field_named() {
    let cases: Vec<(Vec<u8>, PayloadError)> = vec![
        (b"not json".to_vec(), PayloadError::NotJson(String::new())),
        (b"[1,2]".to_vec(), PayloadError::NotObject),
        (
            br#"{"session_id":"s"}"#.to_vec(),
            PayloadError::Missing("hook_event_name"),
        ),
        (
            br#"{"hook_event_name":"Stop","cwd":"/x"}"#.to_vec(),
            PayloadError::Missing("session_id"),
        ),
        (
            br#"{"hook_event_name":"Stop","session_id":""}"#.to_vec(),
            PayloadError::Missing("session_id"),
        ),
        (
            payload("PreToolUse", json!({})),
            PayloadError::Missing("tool_name"),
        ),
        (
            payload(
                "PreToolUse",
                json!({"tool_name": "Write", "tool_input": {}}),
            ),
            PayloadError::Missing("tool_input.file_path"),
        ),
        (
            payload("PreToolUse", json!({"tool_name": "Edit"})),
            PayloadError::Missing("tool_input.file_path"),
        ),
        (
            payload(
                "PreToolUse",
                json!({"tool_name": "NotebookEdit", "tool_input": {"file_path": "x"}}),
            ),
            PayloadError::Missing("tool_input.notebook_path"),
        ),
    ];
    for (bytes, expected) in cases {
        let got = plan(&bytes, &env()).unwrap_err();
        match (&got, &expected) {
            (PayloadError::NotJson(_), PayloadError::NotJson(_)) => {}
            _ => assert_eq!(got, expected, "{}", String::from_utf8_lossy(&bytes)),
        }
    }
    let no_cwd = HookEnv {
        project_dir: None,
        ..env()
    };
    assert_eq!(
        plan(br#"{"hook_event_name":"Stop","session_id":"s"}"#, &no_cwd).unwrap_err(),
        PayloadError::Missing("cwd")
    );
}

#[test]
fn a_missing_or_odd_claude_pid_leaves_the_session_unowned_and_is_noted() {
    for raw in [None, Some("abc"), Some("0"), Some("-3")] {
        let env = HookEnv {
            claude_pid: raw.map(str::to_string),
            ..env()
        };
        let plan = plan(&payload("SessionStart", json!({"source": "startup"})), &env).unwrap();
        assert_eq!(plan.owner_pid, None, "{raw:?}");
        assert_eq!(plan.notes.len(), 1, "{raw:?}");
    }
}

fn notice(text: &str) -> Notice {
    Notice {
        session: Some("s-1".into()),
        condition: NoticeCondition::PossiblyStale,
        level: NoticeLevel::Info,
        text: text.into(),
        audience: Audience::User,
    }
}

#[test]
fn notices_are_one_system_message_object() {
    assert_eq!(system_message(&[]), None);
    let line = system_message(&[notice("one"), notice("two \"quoted\"")]).unwrap();
    assert!(!line.contains('\n'), "one line: {line}");
    let value: Value = serde_json::from_str(&line).unwrap();
    assert_eq!(
        value,
        json!({"systemMessage": "cgc-fresh: one\ncgc-fresh: two \"quoted\""})
    );
}

fn io_at(socket: PathBuf) -> HookIo {
    HookIo {
        socket,
        budget: Duration::from_millis(500),
        autostart: None,
        socket_override: None,
    }
}

#[test]
fn a_malformed_payload_prints_nothing_and_logs_one_line() {
    let outcome = run(b"{oops", &env(), |_| -> Result<HookIo, String> {
        panic!("the service must not be contacted")
    });
    assert_eq!(outcome.stdout, None);
    assert_eq!(outcome.log.events(), vec!["hook_payload_rejected"]);
    let missing = run(
        br#"{"hook_event_name":"PreToolUse","session_id":"s","cwd":"/"}"#,
        &env(),
        |_| Err("unused".into()),
    );
    assert_eq!(missing.stdout, None);
    assert_eq!(missing.log.events(), vec!["hook_payload_rejected"]);
    assert!(missing.log.lines()[0]["error"]
        .as_str()
        .unwrap()
        .contains("tool_name"));
}

#[test]
fn a_service_that_is_down_means_no_output_and_a_log_line() {
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("none.sock");
    let started = Instant::now();
    let outcome = run(&payload("Stop", json!({})), &env(), |_| Ok(io_at(socket)));
    assert!(started.elapsed() < Duration::from_millis(200));
    assert_eq!(outcome.stdout, None);
    assert_eq!(outcome.log.events(), vec!["service_down"]);
}

#[test]
fn an_unusable_workspace_means_no_output_and_a_log_line() {
    let outcome = run(&payload("Stop", json!({})), &env(), |_| Err("gone".into()));
    assert_eq!(outcome.stdout, None);
    assert_eq!(outcome.log.events(), vec!["hook_workspace_unusable"]);
}

/// A scripted service: answers each line by `answer`, records the lines.
fn scripted_service(
    answer: impl Fn(&Value) -> Vec<Value> + Send + 'static,
) -> (
    tempfile::TempDir,
    PathBuf,
    std::thread::JoinHandle<Vec<Value>>,
) {
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("svc.sock");
    let listener = UnixListener::bind(&socket).unwrap();
    let handle = std::thread::spawn(move || {
        let (stream, _) = listener.accept().unwrap();
        let mut writer = stream.try_clone().unwrap();
        let mut seen = Vec::new();
        for line in BufReader::new(stream).lines() {
            let Ok(line) = line else { break };
            let frame: Value = serde_json::from_str(&line).unwrap();
            for reply in answer(&frame) {
                writeln!(writer, "{reply}").unwrap();
            }
            seen.push(frame);
        }
        seen
    });
    (dir, socket, handle)
}

#[test]
fn post_tool_use_sends_the_result_then_prints_the_taken_notices() {
    let (_dir, socket, service) = scripted_service(|frame| {
        let id = frame["id"].clone();
        match frame["type"].as_str() {
            Some("hello") => vec![json!({"id": id, "type": "welcome", "protocol": 1,
                "service_version": "t", "pid": 1, "workspace": "/proj"})],
            Some("take_notices") => vec![
                // A pushed frame in between is skipped.
                json!({"type": "state", "workspace": "/proj", "status": "fresh", "edit_epoch": 1, "syncing": false}),
                json!({"id": id, "type": "notices", "session": "s-1", "notices": [
                    {"session": "s-1", "condition": "sync_completed", "level": "info",
                     "text": "The code graph is up to date.", "audience": "user"}
                ]}),
            ],
            _ => vec![json!({"id": id, "type": "ack"})],
        }
    });
    let outcome = run(
        &payload(
            "PostToolUse",
            json!({"tool_name": "Write", "tool_input": {"file_path": "/proj/a.py"}}),
        ),
        &env(),
        |_| Ok(io_at(socket)),
    );
    assert_eq!(
        outcome.stdout.as_deref(),
        Some(r#"{"systemMessage":"cgc-fresh: The code graph is up to date."}"#)
    );
    let seen = service.join().unwrap();
    let types: Vec<&str> = seen.iter().filter_map(|f| f["type"].as_str()).collect();
    assert_eq!(types, vec!["hello", "tool_result", "take_notices"]);
    assert_eq!(seen[0]["instance"], "claude-code-4242");
    assert_eq!(seen[1]["tool"], "write");
    assert_eq!(seen[1]["ok"], true);
    assert_eq!(seen[2]["session"], "s-1");
}

#[test]
fn an_unknown_session_is_taken_up_again_with_its_owner_and_the_frames_repeated() {
    let (_dir, socket, service) = scripted_service(|frame| {
        let id = frame["id"].clone();
        let first_round = id.as_str().is_some_and(|id| id.starts_with("event-"));
        match frame["type"].as_str() {
            Some("hello") => vec![json!({"id": id, "type": "welcome", "protocol": 1,
                "service_version": "t", "pid": 1, "workspace": "/proj"})],
            Some("tool_call") | Some("take_notices") if first_round => {
                vec![
                    json!({"id": id, "type": "error", "code": "unknown_session", "message": "not live"}),
                ]
            }
            Some("take_notices") => {
                vec![json!({"id": id, "type": "notices", "session": "s-1", "notices": []})]
            }
            _ => vec![json!({"id": id, "type": "ack"})],
        }
    });
    let outcome = run(
        &payload(
            "PreToolUse",
            json!({"tool_name": "Edit", "tool_input": {"file_path": "/proj/a.py"}}),
        ),
        &env(),
        |_| Ok(io_at(socket)),
    );
    assert_eq!(outcome.stdout, None);
    assert!(outcome
        .log
        .events()
        .contains(&"session_replayed".to_string()));
    let seen = service.join().unwrap();
    let types: Vec<&str> = seen.iter().filter_map(|f| f["type"].as_str()).collect();
    assert_eq!(
        types,
        vec!["hello", "tool_call", "session_start", "tool_call"]
    );
    assert_eq!(seen[2]["owner_pid"], 4242);
    assert_eq!(seen[2]["reason"], "resume");
}

#[test]
fn a_service_that_does_not_answer_costs_at_most_the_budget() {
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("mute.sock");
    let listener = UnixListener::bind(&socket).unwrap();
    let held = std::thread::spawn(move || listener.accept().map(|(s, _)| s));
    let started = Instant::now();
    let outcome = run(&payload("Stop", json!({})), &env(), |_| {
        Ok(HookIo {
            budget: Duration::from_millis(60),
            ..io_at(socket)
        })
    });
    let took = started.elapsed();
    assert!(took >= Duration::from_millis(60), "{took:?}");
    assert!(took < Duration::from_millis(500), "{took:?}");
    assert_eq!(outcome.stdout, None);
    assert_eq!(outcome.log.events(), vec!["hook_exchange_failed"]);
    drop(held.join());
}
