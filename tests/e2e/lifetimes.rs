//! Sessions are lifetimes everywhere past the connection: a reconnect
//! carries a session on, a replacement ends exactly the old lifetime (and
//! its watcher), a resumed id gets its own watcher, a notice is spent only
//! on its own session, and syncs start at least `minSyncGapMs` apart.

use std::time::Duration;

use serde_json::{json, Value};

use crate::support::{
    agent_edit, fast_env, indexed_with_fake, is_alive, wait_until, Conn, FakeCgc, Service,
};

/// hello as extension `instance`, subscribe, `session_start` of `session`.
fn harness(service: &Service, instance: &str, session: &str) -> Conn {
    let mut conn = service.connect();
    let welcome = conn.request(
        json!({"type": "hello", "client": "e2e", "instance": instance, "protocol": 1}),
        1,
    );
    assert_eq!(welcome["type"], "welcome");
    conn.subscribe();
    let ack = conn.request(
        json!({"type": "session_start", "session": session, "reason": "startup"}),
        2,
    );
    assert_eq!(ack["type"], "ack", "{ack}");
    conn
}

fn watch_pids(fake: &FakeCgc) -> Vec<i32> {
    fake.watch_invocations()
        .into_iter()
        .filter_map(|r| r["pid"].as_i64().map(|pid| pid as i32))
        .collect()
}

fn sync_starts(fake: &FakeCgc) -> usize {
    fake.invocations().len()
}

#[test]
fn a_reconnect_that_replays_session_start_keeps_auto_sync_and_notices() {
    let (_sandbox, fake, service) = indexed_with_fake(json!({}), &fast_env(&[]));
    let first = harness(&service, "pi-1", "s1");
    // The connection drops before anything was edited.
    drop(first);
    wait_until("the session to detach", Duration::from_secs(10), || {
        !service.log_events("session_detached").is_empty()
    });
    // The bridge reconnects and replays its session_start.
    let mut again = harness(&service, "pi-1", "s1");
    wait_until("the re-attach", Duration::from_secs(10), || {
        !service.log_events("session_reattached").is_empty()
    });
    agent_edit(&mut again, "s1", "a.py");
    again.wait_seen("the staleness notice", |f| {
        f["type"] == "notice" && f["condition"] == "possibly_stale"
    });
    again.wait_status("fresh");
    again.wait_seen("the completion notice", |f| {
        f["type"] == "notice" && f["condition"] == "sync_completed"
    });
    assert_eq!(sync_starts(&fake), 1, "{:?}", fake.invocations());
    assert!(service.log_events("session_closed").is_empty());
}

#[test]
fn a_replacement_under_the_same_id_survives_the_old_connection_closing_later() {
    let (_sandbox, fake, service) = indexed_with_fake(json!({}), &fast_env(&[]));
    let old = harness(&service, "pi-old", "s1");
    let mut new = harness(&service, "pi-new", "s1");
    wait_until("the old lifetime to close", Duration::from_secs(10), || {
        service.log_events("session_closed").len() == 1
    });
    drop(old);
    // The old connection carried only the ended lifetime: nothing of the
    // new one is detached or stopped.
    std::thread::sleep(Duration::from_millis(200));
    assert!(service.log_events("session_detached").is_empty());
    agent_edit(&mut new, "s1", "a.py");
    new.wait_status("fresh");
    assert_eq!(sync_starts(&fake), 1, "the new lifetime's auto-sync ran");
}

#[test]
fn a_replacement_with_watch_on_stops_the_old_watcher_and_starts_one_for_the_new_lifetime() {
    let (_sandbox, fake, service) =
        indexed_with_fake(json!({}), &fast_env(&[("CGC_FRESHNESS_WATCH", "on")]));
    let mut old = harness(&service, "pi-old", "s1");
    old.wait_status("fresh");
    let first = watch_pids(&fake);
    assert_eq!(first.len(), 1, "{:?}", fake.invocations());
    let mut new = harness(&service, "pi-new", "s1");
    wait_until(
        "the old watcher to be gone",
        Duration::from_secs(10),
        || !is_alive(first[0]),
    );
    wait_until(
        "a watcher for the new lifetime",
        Duration::from_secs(10),
        || watch_pids(&fake).len() == 2,
    );
    let second = watch_pids(&fake)[1];
    assert!(is_alive(second));
    new.wait_seen("the new watcher verified", |f| {
        f["type"] == "state" && f["watcher"]["state"] == "verified" && f["watcher"]["pid"] == second
    });
    drop(old);
    std::thread::sleep(Duration::from_millis(200));
    assert!(is_alive(second), "the old connection's close left it alone");
}

#[test]
fn a_resumed_session_id_with_watch_on_gets_a_watcher() {
    let (_sandbox, fake, service) =
        indexed_with_fake(json!({}), &fast_env(&[("CGC_FRESHNESS_WATCH", "on")]));
    let mut first = harness(&service, "pi-1", "s1");
    first.wait_status("fresh");
    let pids = watch_pids(&fake);
    first.request(json!({"type": "session_shutdown", "session": "s1"}), 3);
    wait_until("the watcher to stop", Duration::from_secs(10), || {
        !is_alive(pids[0])
    });
    // `/resume` of the same id by a new extension instance.
    let mut resumed = harness(&service, "pi-2", "s1");
    wait_until(
        "a watcher for the resumed lifetime",
        Duration::from_secs(10),
        || watch_pids(&fake).len() == 2,
    );
    resumed.wait_seen("it is verified", |f| {
        f["type"] == "state" && f["watcher"]["state"] == "verified"
    });
}

#[test]
fn an_events_subscriber_does_not_spend_a_sessions_notice() {
    let (_sandbox, _fake, service) = indexed_with_fake(
        json!({}),
        &fast_env(&[("CGC_FRESHNESS_AUTO_SYNC", "false")]),
    );
    // A person's `cgc-fresh events`: subscribed, no session.
    let mut events = service.connect();
    events.hello();
    events.subscribe();
    // The harness has not subscribed yet.
    let mut harness = service.connect();
    harness.request(
        json!({"type": "hello", "client": "e2e", "instance": "pi-1", "protocol": 1}),
        1,
    );
    harness.request(
        json!({"type": "session_start", "session": "s1", "reason": "startup"}),
        2,
    );
    agent_edit(&mut harness, "s1", "a.py");
    // The events subscriber sees a copy…
    events.wait_seen("a copy of the notice", |f| {
        f["type"] == "notice" && f["condition"] == "possibly_stale"
    });
    // …but the notice is still the session's to receive: once the episode
    // is over (a person's sync), the next drift offers it again, and now
    // the session's own connection reads it.
    harness.subscribe();
    events.request(json!({"type": "sync"}), 5);
    harness.wait_status("fresh");
    agent_edit(&mut harness, "s1", "b.py");
    let notice: Value = harness.wait_seen("the session's notice", |f| {
        f["type"] == "notice" && f["condition"] == "possibly_stale"
    });
    assert_eq!(notice["session"], "s1");
    // Now it is spent: a third edit raises none.
    agent_edit(&mut harness, "s1", "c.py");
    let last = harness.request(json!({"type": "status"}), 9);
    assert_eq!(last["status"], "possibly_stale");
    assert_eq!(
        harness.count_seen(|f| f["type"] == "notice" && f["condition"] == "possibly_stale"),
        1
    );
}

#[test]
fn two_sync_starts_are_at_least_five_seconds_apart() {
    // Each sync takes 300 ms; an edit during the first asks for a follow-up.
    let (_sandbox, fake, service) = indexed_with_fake(
        json!({"watch": {"steps": [{"sleep_ms": 300}, {"stdout": [{"cgc": "ready"}]}, {"hang": true}], "on_sigint": {"exit": 0}}}),
        &[
            ("CGC_FRESHNESS_BATCH_MS", "50"),
            ("CGC_FRESHNESS_SETTLE_MS", "2000"),
        ],
    );
    let mut conn = harness(&service, "pi-1", "s1");
    agent_edit(&mut conn, "s1", "a.py");
    conn.wait_status("syncing");
    agent_edit(&mut conn, "s1", "b.py");
    wait_until("the follow-up", Duration::from_secs(20), || {
        sync_starts(&fake) == 2
    });
    // The machine decides with its own clock; the log line of each decision
    // carries a timestamp taken right after it (the fake's own start times
    // add spawn latency, which differs between the two runs).
    let decided: Vec<i64> = service
        .log_events("decision")
        .into_iter()
        .filter(|e| e["decision"] == "start_sync")
        .map(|e| log_time_ms(&e))
        .collect();
    assert_eq!(decided.len(), 2, "{decided:?}");
    assert!(
        (decided[1] - decided[0]).rem_euclid(86_400_000) >= 4_990,
        "syncs started {} ms apart",
        decided[1] - decided[0]
    );
    conn.wait_status("fresh");
}

/// A log line's timestamp (RFC 3339, UTC) in milliseconds since midnight —
/// enough to subtract two times of one test.
fn log_time_ms(event: &Value) -> i64 {
    let stamp = event["timestamp"].as_str().expect("timestamp");
    let time = stamp.split('T').nth(1).expect("a time part");
    let mut parts = time.trim_end_matches('Z').split(':');
    let hours: i64 = parts.next().and_then(|h| h.parse().ok()).expect("hours");
    let minutes: i64 = parts.next().and_then(|m| m.parse().ok()).expect("minutes");
    let seconds: f64 = parts.next().and_then(|s| s.parse().ok()).expect("seconds");
    (hours * 3_600 + minutes * 60) * 1_000 + (seconds * 1_000.0) as i64
}

/// A one-frame connection, as a hook process makes: hello, the frame, the
/// reply, close.
fn one_shot(service: &Service, frame: Value) -> Value {
    let mut conn = service.connect();
    conn.request(
        json!({"type": "hello", "client": "hook", "instance": "cc-hooks", "protocol": 1}),
        1,
    );
    conn.request(frame, 2)
}

#[test]
fn a_session_owned_by_a_process_outlives_its_connections_and_ends_with_the_process() {
    // A batching window long enough to take the staleness notice before the
    // sync (a notice left untaken when its episode ends is dropped).
    let (_sandbox, fake, service) =
        indexed_with_fake(json!({}), &fast_env(&[("CGC_FRESHNESS_BATCH_MS", "2000")]));
    let mut owner = std::process::Command::new("sleep")
        .arg("60")
        .spawn()
        .expect("sleep");
    let owner_pid = owner.id();
    let mut watcher = service.connect();
    watcher.hello();
    watcher.subscribe();
    // Every frame comes over its own short connection, like hooks.
    let ack = one_shot(
        &service,
        json!({"type": "session_start", "session": "cc-1", "reason": "startup", "owner_pid": owner_pid}),
    );
    assert_eq!(ack["type"], "ack", "{ack}");
    let ack = one_shot(
        &service,
        json!({"type": "tool_call", "session": "cc-1", "tool": "edit", "paths": ["a.py"]}),
    );
    assert_eq!(
        ack["type"], "ack",
        "the session outlived its connection: {ack}"
    );
    one_shot(
        &service,
        json!({"type": "tool_result", "session": "cc-1", "tool": "edit", "ok": true}),
    );
    // The notices no connection of the session received are taken once.
    let conditions = |taken: &Value| -> Vec<String> {
        taken["notices"]
            .as_array()
            .unwrap_or_else(|| panic!("{taken}"))
            .iter()
            .map(|n| n["condition"].as_str().unwrap().to_owned())
            .collect()
    };
    let taken = one_shot(&service, json!({"type": "take_notices", "session": "cc-1"}));
    assert_eq!(taken["type"], "notices", "{taken}");
    assert_eq!(conditions(&taken), ["possibly_stale"]);
    assert_eq!(taken["notices"][0]["audience"], "user");
    let again = one_shot(&service, json!({"type": "take_notices", "session": "cc-1"}));
    assert_eq!(conditions(&again), Vec::<String>::new());
    watcher.wait_status("fresh");
    assert!(service.log_events("session_detached").is_empty());
    let done = one_shot(&service, json!({"type": "take_notices", "session": "cc-1"}));
    assert_eq!(conditions(&done), ["sync_completed"]);
    // The owner goes (as a SIGKILLed Claude Code would): the session ends.
    owner.kill().unwrap();
    owner.wait().unwrap();
    wait_until(
        "the session to end with its owner",
        Duration::from_secs(10),
        || {
            !service.log_events("owner_exited").is_empty()
                && !service.log_events("session_closed").is_empty()
        },
    );
    let late = one_shot(
        &service,
        json!({"type": "tool_result", "session": "cc-1", "tool": "edit", "ok": true}),
    );
    assert_eq!(late["code"], "unknown_session", "{late}");
    assert_eq!(sync_starts(&fake), 1);
}

#[test]
fn an_owner_pid_that_is_not_a_process_is_refused_naming_the_field() {
    let (_sandbox, _fake, service) = indexed_with_fake(json!({}), &fast_env(&[]));
    let refused = one_shot(
        &service,
        json!({"type": "session_start", "session": "x", "reason": "startup", "owner_pid": 4_000_000_000u32}),
    );
    assert_eq!(refused["code"], "bad_request", "{refused}");
    assert_eq!(refused["field"], "owner_pid", "{refused}");
    let unknown = one_shot(&service, json!({"type": "take_notices", "session": "x"}));
    assert_eq!(unknown["code"], "unknown_session", "{unknown}");
}

#[test]
fn an_owned_sessions_children_stop_when_its_owner_is_killed() {
    let (sandbox, fake, service) = indexed_with_fake(
        json!({"watch": {"steps": [{"hang": true}]}}),
        &fast_env(&[]),
    );
    let mut owner = std::process::Command::new("sleep")
        .arg("60")
        .spawn()
        .expect("sleep");
    one_shot(
        &service,
        json!({"type": "session_start", "session": "cc-2", "reason": "startup", "owner_pid": owner.id()}),
    );
    one_shot(
        &service,
        json!({"type": "tool_call", "session": "cc-2", "tool": "write", "paths": ["b.py"]}),
    );
    one_shot(
        &service,
        json!({"type": "tool_result", "session": "cc-2", "tool": "write", "ok": true}),
    );
    wait_until("the sync to run", Duration::from_secs(10), || {
        sync_starts(&fake) == 1
    });
    let pid = fake.invocations()[0]["pid"].as_i64().unwrap() as i32;
    owner.kill().unwrap();
    owner.wait().unwrap();
    wait_until(
        "the session's sync to be stopped",
        Duration::from_secs(10),
        || !is_alive(pid),
    );
    drop(sandbox);
}
