//! Sessions across connections, replacement and a service restart, with
//! the state file on disk checked at each step.

use std::fs;
use std::time::Duration;

use serde_json::{json, Value};

use crate::support::{indexed_with_fake, wait_until, Conn, FakeCgc, Sandbox, Service};

const ENV: [(&str, &str); 3] = [
    ("CGC_FRESHNESS_BATCH_MS", "30"),
    ("CGC_FRESHNESS_SETTLE_MS", "2000"),
    ("CGC_FRESHNESS_MAX_SYNCS_PER_SESSION", "1"),
];

fn state_file(sandbox: &Sandbox) -> Value {
    let dir = sandbox.state_home().join("cgc-fresh");
    let entry = fs::read_dir(&dir).unwrap().next().unwrap().unwrap();
    serde_json::from_str(&fs::read_to_string(entry.path().join("state.json")).unwrap()).unwrap()
}

fn harness(service: &Service, instance: &str, session: &str, reason: &str) -> Conn {
    let mut conn = service.connect();
    conn.request(
        json!({"type": "hello", "client": "e2e", "instance": instance, "protocol": 1}),
        0,
    );
    conn.subscribe();
    conn.send(json!({"type": "session_start", "session": session, "reason": reason}));
    conn
}

fn edit(conn: &mut Conn, session: &str, path: &str) {
    conn.send(json!({"type": "tool_call", "session": session, "tool": "write", "paths": [path]}));
    conn.send(json!({"type": "tool_result", "session": session, "tool": "write", "ok": true}));
}

#[test]
fn two_sessions_a_replacement_and_a_restart_keep_one_honest_record() {
    let (sandbox, fake, mut service) = indexed_with_fake(json!({}), &ENV);

    // Two harnesses, two sessions, one workspace record.
    let mut a = harness(&service, "pi-a", "sA", "startup");
    let mut b = harness(&service, "pi-b", "sB", "startup");
    edit(&mut a, "sA", "a.py");
    a.wait_status("fresh");
    b.wait_status("fresh");
    assert_eq!(state_file(&sandbox)["status"], "fresh");
    // Each session got its own one-time stale notice? Only the editing one.
    assert_eq!(
        a.count_seen(|f| f["condition"] == "possibly_stale" && f["session"] == "sA"),
        1
    );

    // sA's budget (1) is spent: its next drift is not synced.
    edit(&mut a, "sA", "b.py");
    a.wait_seen("budget notice", |f| {
        f["condition"] == "budget_exhausted" && f["session"] == "sA"
    });
    assert_eq!(fake.invocations().len(), 1);
    assert_eq!(state_file(&sandbox)["status"], "possibly_stale");

    // Pi replaces session sA (/resume) with a new extension instance on a new
    // connection: drift in the new session is observed and its budget re-arms.
    let mut resumed = harness(&service, "pi-a2", "sA2", "resume");
    // The same instance registering again is harmless.
    resumed.send(json!({"type": "session_start", "session": "sA2", "reason": "resume"}));
    edit(&mut resumed, "sA2", "c.py");
    resumed.wait_status("fresh");
    assert_eq!(
        fake.invocations().len(),
        2,
        "the new session's budget paid for one more sync"
    );
    assert_eq!(
        state_file(&sandbox)["status"],
        "fresh",
        "the record persisted across the rebind"
    );
    let synced_at = state_file(&sandbox)["last_synced_at"].clone();

    // Restart: the record comes back as unknown, never fresh, times kept.
    drop((a, b, resumed));
    service.signal(libc::SIGTERM);
    service.wait_exit(Duration::from_secs(10));
    let service = Service::start_with_fake(&sandbox, &fake, &ENV);
    let mut c = service.connect();
    let state = c.request(json!({"type": "status"}), 1);
    assert_eq!(state["status"], "unknown", "{state}");
    assert_eq!(
        state["last_synced_at"], synced_at,
        "persisted times are kept"
    );
    wait_until(
        "the state file to say unknown",
        Duration::from_secs(5),
        || state_file(&sandbox)["status"] == "unknown",
    );
}

#[test]
fn off_mode_spawns_nothing_at_session_start_and_lazy_sync_still_runs() {
    let sandbox = Sandbox::new();
    sandbox.mark_indexed();
    let fake = FakeCgc::new(&sandbox, json!({}));
    // freshness.watch is off by default; say it explicitly too.
    let mut env = ENV.to_vec();
    env.push(("CGC_FRESHNESS_WATCH", "false"));
    let service = Service::start_with_fake(&sandbox, &fake, &env);
    let mut conn = harness(&service, "pi", "s1", "startup");
    std::thread::sleep(Duration::from_millis(300));
    assert!(
        fake.invocations().is_empty(),
        "no watcher and no detection: {:?}",
        fake.invocations()
    );
    edit(&mut conn, "s1", "a.py");
    conn.wait_status("fresh");
    let calls = fake.invocations();
    assert_eq!(calls.len(), 1);
    assert_eq!(
        calls[0]["argv"],
        json!(["watch", "--sync-on-start", "."]),
        "the one spawn is the lazy sync"
    );
}

#[test]
fn a_state_file_that_cannot_be_written_is_recorded_and_the_service_goes_on() {
    let sandbox = Sandbox::new();
    sandbox.mark_indexed();
    let fake = FakeCgc::new(&sandbox, json!({}));
    // A directory where the state file goes: it can never be replaced.
    // (The state directory itself must be usable: the instance lock is in it.)
    let canonical = fs::canonicalize(sandbox.workspace()).unwrap();
    let state_file = sandbox
        .state_home()
        .join("cgc-fresh")
        .join(crate::support::workspace_id(&canonical))
        .join("state.json");
    fs::create_dir_all(state_file.join("blocker")).unwrap();
    fs::set_permissions(
        state_file.parent().unwrap(),
        std::os::unix::fs::PermissionsExt::from_mode(0o700),
    )
    .unwrap();
    let service = Service::start_with_fake(&sandbox, &fake, &ENV);
    let mut conn = harness(&service, "pi", "s1", "startup");
    edit(&mut conn, "s1", "a.py");
    let (fresh, _) = conn.wait_status("fresh");
    assert!(
        fresh["last_error"]
            .as_str()
            .unwrap_or_default()
            .contains("not written"),
        "{fresh}"
    );
    assert_eq!(
        service.log_events("state_write_failed").len(),
        1,
        "logged once, not per write"
    );
}
