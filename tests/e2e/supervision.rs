//! No child process ever outlives the service: every shutdown path, with a
//! fake `cgc` whose sync hangs and leaves a daemonized grandchild in its own
//! session (as FalkorDB Lite's redis-server does).
//!
//! "Gone" is checked three ways: every pid in the fake's invocation log
//! (children and daemons) is dead or a zombie-free absence, and no live
//! process carries an owner token of this workspace.

use std::time::Duration;

use serde_json::{json, Value};

use std::os::unix::fs::PermissionsExt;

use crate::support::{
    assert_gone_with_no_token_holders, indexed_with_fake, is_alive, wait_until, workspace_id, Conn,
    FakeCgc, Sandbox, Service,
};

/// A sync that daemonizes a grandchild, then hangs without ever being ready.
fn hanging_sync_with_daemon() -> Value {
    json!({"watch": {"steps": [{"spawn_daemon": {"sleep_ms": 600000}}, {"hang": true}]}})
}

const ENV: [(&str, &str); 3] = [
    ("CGC_FRESHNESS_BATCH_MS", "20"),
    ("CGC_FRESHNESS_SETTLE_MS", "2000"),
    ("CGC_SUPERVISOR_STOP_GRACE_MS", "500"),
];

/// Starts a session whose edit triggers the hanging sync; returns once the
/// sync and its daemon exist.
fn start_busy_session(service: &Service, fake: &FakeCgc, session: &str) -> Conn {
    let mut conn = service.connect();
    conn.hello();
    conn.subscribe();
    conn.send(json!({"type": "session_start", "session": session, "reason": "startup"}));
    conn.send(json!({"type": "tool_call", "session": session, "tool": "write", "paths": ["a.py"]}));
    conn.send(json!({"type": "tool_result", "session": session, "tool": "write", "ok": true}));
    wait_until("the sync and its daemon", Duration::from_secs(10), || {
        fake.records().iter().any(|r| r["event"] == "daemon")
    });
    conn
}

/// Every process the fake ever reported, and every token holder, is gone.
fn assert_nothing_left(sandbox: &Sandbox, fake: &FakeCgc) {
    let pids = fake.all_pids();
    assert!(
        pids.len() >= 2,
        "expected a child and a daemon: {:?}",
        fake.records()
    );
    assert_gone_with_no_token_holders(sandbox, &pids);
}

fn daemon_pid(fake: &FakeCgc) -> i32 {
    fake.records()
        .iter()
        .find(|r| r["event"] == "daemon")
        .and_then(|r| r["pid"].as_i64())
        .unwrap() as i32
}

fn shutdown_by_signal(signal: i32) {
    let (sandbox, fake, mut service) = indexed_with_fake(hanging_sync_with_daemon(), &ENV);
    let _conn = start_busy_session(&service, &fake, "s1");
    let daemon = daemon_pid(&fake);
    assert!(is_alive(daemon));
    service.signal(signal);
    let status = service.wait_exit(Duration::from_secs(15));
    assert!(status.success(), "graceful shutdown exits 0: {status}");
    assert_nothing_left(&sandbox, &fake);
    // Two-phase: children were stopped before the system stopped.
    let log = service.log_text();
    let children_stopped = log
        .find("\"children_stopped\"")
        .expect("children_stopped event");
    let stopped = log.find("\"event\":\"stopped\"").expect("stopped event");
    assert!(children_stopped < stopped);
}

#[test]
fn sigterm_stops_every_child_and_the_daemonized_grandchild() {
    shutdown_by_signal(libc::SIGTERM);
}

#[test]
fn sigint_stops_every_child_and_the_daemonized_grandchild() {
    shutdown_by_signal(libc::SIGINT);
}

#[test]
fn a_second_signal_during_shutdown_escalates_to_sigkill_at_once() {
    let sandbox = Sandbox::new();
    sandbox.mark_indexed();
    // A child that ignores SIGINT and SIGTERM: the graceful path would wait
    // two long graces before SIGKILL.
    let fake = FakeCgc::new(
        &sandbox,
        json!({"watch": {"steps": [{"spawn_daemon": {}}, {"hang": true}], "ignore_sigint": true, "on_sigterm": "ignore"}}),
    );
    let mut env = ENV.to_vec();
    env[2] = ("CGC_SUPERVISOR_STOP_GRACE_MS", "30000");
    let mut service = Service::start_with_fake(&sandbox, &fake, &env);
    let _conn = start_busy_session(&service, &fake, "s1");
    service.signal(libc::SIGTERM);
    wait_until("the graceful stop to begin", Duration::from_secs(5), || {
        service.log_text().contains("\"stop_all\"")
    });
    service.signal(libc::SIGTERM);
    // Well before the 30 s grace: the escalation killed everything.
    service.wait_exit(Duration::from_secs(10));
    assert_nothing_left(&sandbox, &fake);
    assert_eq!(
        service.log_events("kill_all_now").len(),
        1,
        "{}",
        service.log_text()
    );
}

#[test]
fn a_panic_in_an_actor_kills_every_child_and_exits_non_zero() {
    let sandbox = Sandbox::new();
    sandbox.mark_indexed();
    let fake = FakeCgc::new(&sandbox, hanging_sync_with_daemon());
    let mut env = ENV.to_vec();
    env.push(("CGC_FRESH_FAULT_PANIC_ON_STATUS", "1"));
    let mut service = Service::start_with_fake(&sandbox, &fake, &env);
    let mut conn = start_busy_session(&service, &fake, "s1");
    conn.send(json!({"type": "status"}));
    let status = service.wait_exit(Duration::from_secs(10));
    assert_eq!(status.code(), Some(101), "{status}");
    assert_nothing_left(&sandbox, &fake);
    assert_eq!(service.log_events("panic").len(), 1);
}

#[test]
fn session_shutdown_stops_that_sessions_sync_and_the_session_exits_normally() {
    let (sandbox, fake, service) = indexed_with_fake(hanging_sync_with_daemon(), &ENV);
    let mut conn = start_busy_session(&service, &fake, "s1");
    let reply = conn.request(
        json!({"type": "session_shutdown", "session": "s1", "reason": "quit"}),
        7,
    );
    assert_eq!(
        reply["type"], "ack",
        "the harness is answered at once: {reply}"
    );
    assert_nothing_left(&sandbox, &fake);
    // No fresh claim came out of the killed sync, and the service serves on.
    let state = conn.request(json!({"type": "status"}), 8);
    assert_ne!(state["status"], "fresh", "{state}");
    assert_eq!(conn.count_seen(|f| f["status"] == "fresh"), 0);
}

#[test]
fn a_harness_connection_closing_without_shutdown_stops_its_sessions_work() {
    let (sandbox, fake, service) = indexed_with_fake(hanging_sync_with_daemon(), &ENV);
    let conn = start_busy_session(&service, &fake, "s1");
    drop(conn);
    assert_nothing_left(&sandbox, &fake);
    // Detached, not ended: a replayed session_start may take it up again.
    assert!(service.log_text().contains("\"session_detached\""));
}

#[test]
fn session_shutdown_leaves_a_persons_manual_sync_running() {
    let (_sandbox, fake, service) =
        indexed_with_fake(json!({"watch": {"steps": [{"hang": true}]}}), &ENV);
    let mut person = service.connect();
    person.request(json!({"type": "sync"}), 1);
    wait_until("the manual sync", Duration::from_secs(5), || {
        !fake.invocations().is_empty()
    });
    let mut harness = service.connect();
    harness.send(json!({"type": "session_start", "session": "other", "reason": "startup"}));
    harness.request(json!({"type": "session_shutdown", "session": "other"}), 2);
    std::thread::sleep(Duration::from_millis(300));
    let pid = fake.invocations()[0]["pid"].as_i64().unwrap() as i32;
    assert!(
        is_alive(pid),
        "a session's end must not stop work that is not its own"
    );
}

#[test]
fn a_sigkilled_service_leaves_only_what_the_next_start_sweeps() {
    let (sandbox, fake, mut service) = indexed_with_fake(hanging_sync_with_daemon(), &ENV);
    let _conn = start_busy_session(&service, &fake, "s1");
    let child = fake.invocations()[0]["pid"].as_i64().unwrap() as i32;
    let daemon = daemon_pid(&fake);
    service.signal(libc::SIGKILL);
    service.wait_exit(Duration::from_secs(5));
    // The direct child dies by its parent-death signal.
    wait_until(
        "the child to die with its parent",
        Duration::from_secs(5),
        || !is_alive(child),
    );
    // The daemon escaped the group and session; it is still there...
    assert!(
        is_alive(daemon),
        "the daemon should survive until the sweep"
    );
    // ...until the next instance's start-up sweep finds it by its token.
    let next = Service::start_with_fake(&sandbox, &fake, &ENV);
    wait_until(
        "the sweep to kill the daemon",
        Duration::from_secs(5),
        || !is_alive(daemon),
    );
    let sweep = next.log_events("startup_sweep");
    assert_eq!(sweep.len(), 1);
    assert!(
        sweep[0]["token_holders_killed"]
            .as_str()
            .unwrap_or_default()
            .contains(&daemon.to_string()),
        "{sweep:?}"
    );
    // And the restarted service claims nothing.
    let state = next.connect().request(json!({"type": "status"}), 1);
    assert_eq!(state["status"], "unknown", "{state}");
}

#[test]
fn a_corrupt_registry_file_is_survived_with_a_warning() {
    let sandbox = Sandbox::new();
    let canonical = std::fs::canonicalize(sandbox.workspace()).unwrap();
    let state_dir = sandbox
        .state_home()
        .join("cgc-fresh")
        .join(workspace_id(&canonical));
    std::fs::create_dir_all(&state_dir).unwrap();
    std::fs::set_permissions(&state_dir, std::fs::Permissions::from_mode(0o700)).unwrap();
    let registry = state_dir.join("children.json");
    std::fs::write(&registry, b"{ not json").unwrap();
    let service = Service::start(&sandbox, &[], &[]);
    assert_eq!(
        service.connect().request(json!({"type": "status"}), 1)["type"],
        "state"
    );
    assert_eq!(
        service.log_events("registry_unreadable").len(),
        1,
        "{}",
        service.log_text()
    );
    // It was replaced by a well-formed one.
    let text = std::fs::read_to_string(&registry).unwrap();
    let parsed: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(parsed["children"], json!([]));
}

#[test]
fn sigterm_with_a_live_watcher_a_running_sync_and_a_daemon_leaves_nothing() {
    let sandbox = Sandbox::new();
    sandbox.mark_indexed();
    // First `watch` = the managed watcher (never ready, so still verifying);
    // second = the person's sync, which daemonizes a grandchild and hangs.
    let fake = FakeCgc::new(
        &sandbox,
        json!({"watch": [
            {"steps": [{"hang": true}]},
            {"steps": [{"spawn_daemon": {}}, {"hang": true}]}
        ]}),
    );
    let mut env = ENV.to_vec();
    env.push(("CGC_FRESHNESS_WATCH", "on"));
    env.push(("CGC_FRESHNESS_WATCHER_LIVENESS_MS", "60000"));
    let mut service = Service::start_with_fake(&sandbox, &fake, &env);
    let mut conn = service.connect();
    conn.hello();
    conn.send(json!({"type": "session_start", "session": "s1", "reason": "startup"}));
    wait_until("the watcher", Duration::from_secs(5), || {
        fake.invocations().len() == 1
    });
    conn.request(json!({"type": "sync"}), 2);
    wait_until("the sync and its daemon", Duration::from_secs(5), || {
        fake.records().iter().any(|r| r["event"] == "daemon")
    });
    assert_eq!(fake.invocations().len(), 2, "watcher and sync both running");
    service.signal(libc::SIGTERM);
    assert!(service.wait_exit(Duration::from_secs(15)).success());
    assert_nothing_left(&sandbox, &fake);
}
