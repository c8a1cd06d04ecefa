//! The last resort: a service whose event loop is wedged still stops on a
//! repeated SIGTERM, and takes every child with it; a service whose loop
//! runs never takes that path.
//!
//! The wedge is a debug-only fault: with `CGC_FRESH_FAULT_WEDGE_ON_STATUS`
//! set, a `status` request makes the workspace actor sleep forever on the
//! event loop's thread, so no signal stream is polled any more.

use std::time::Duration;

use serde_json::{json, Value};

use crate::support::{
    assert_gone_with_no_token_holders, is_alive, wait_until, Conn, FakeCgc, Sandbox, Service,
};

/// The exit code of the last resort (`EX_SOFTWARE`).
const EXIT_WEDGED: i32 = 70;

/// A sync that daemonizes a grandchild, then hangs without ever being ready.
fn hanging_sync_with_daemon() -> Value {
    json!({"watch": {"steps": [{"spawn_daemon": {"sleep_ms": 600000}}, {"hang": true}]}})
}

fn env(stop_grace_ms: &'static str) -> Vec<(&'static str, &'static str)> {
    vec![
        ("CGC_FRESHNESS_BATCH_MS", "20"),
        ("CGC_FRESHNESS_SETTLE_MS", "2000"),
        ("CGC_SUPERVISOR_STOP_GRACE_MS", stop_grace_ms),
    ]
}

/// A session whose edit started the hanging sync; returns once the sync and
/// its daemon exist.
fn start_busy_session(service: &Service, fake: &FakeCgc) -> Conn {
    let mut conn = service.connect();
    conn.hello();
    conn.subscribe();
    conn.send(json!({"type": "session_start", "session": "s1", "reason": "startup"}));
    conn.send(json!({"type": "tool_call", "session": "s1", "tool": "write", "paths": ["a.py"]}));
    conn.send(json!({"type": "tool_result", "session": "s1", "tool": "write", "ok": true}));
    wait_until("the sync and its daemon", Duration::from_secs(10), || {
        fake.records().iter().any(|r| r["event"] == "daemon")
    });
    conn
}

/// The fake's child and daemon, both alive.
fn running_pids(fake: &FakeCgc) -> Vec<i32> {
    let pids = fake.all_pids();
    assert!(
        pids.len() >= 2,
        "expected a child and a daemon: {:?}",
        fake.records()
    );
    assert!(pids.iter().all(|pid| is_alive(*pid)), "{pids:?}");
    pids
}

#[test]
fn a_wedged_event_loop_still_stops_on_a_second_sigterm_and_kills_every_child() {
    let sandbox = Sandbox::new();
    sandbox.mark_indexed();
    let fake = FakeCgc::new(&sandbox, hanging_sync_with_daemon());
    let mut env = env("500");
    env.push(("CGC_FRESH_FAULT_WEDGE_ON_STATUS", "1"));
    let mut service = Service::start_with_fake(&sandbox, &fake, &env);
    let mut conn = start_busy_session(&service, &fake);
    let pids = running_pids(&fake);

    conn.send(json!({"type": "status"}));
    std::thread::sleep(Duration::from_millis(300));
    service.signal(libc::SIGTERM);
    // The first signal is the event loop's, and the loop is wedged.
    std::thread::sleep(Duration::from_secs(1));
    assert!(
        is_alive(service.pid()),
        "a wedged loop cannot stop by itself"
    );
    assert!(pids.iter().all(|pid| is_alive(*pid)));

    service.signal(libc::SIGTERM);
    let status = service.wait_exit(Duration::from_secs(10));
    assert_eq!(
        status.code(),
        Some(EXIT_WEDGED),
        "{status}; log:\n{}",
        service.log_text()
    );
    assert_gone_with_no_token_holders(&sandbox, &pids);
    let fired = service.log_events("last_resort");
    assert_eq!(fired.len(), 1, "{}", service.log_text());
    assert_eq!(fired[0]["signal"], "SIGTERM");
}

#[test]
fn the_last_resort_never_fires_while_the_event_loop_runs() {
    let sandbox = Sandbox::new();
    sandbox.mark_indexed();
    let fake = FakeCgc::new(&sandbox, hanging_sync_with_daemon());
    // A long grace: the graceful stop is still under way at the second
    // signal, which the loop escalates by itself.
    let mut service = Service::start_with_fake(&sandbox, &fake, &env("30000"));
    let _conn = start_busy_session(&service, &fake);
    let pids = running_pids(&fake);
    service.signal(libc::SIGTERM);
    wait_until("the graceful stop to begin", Duration::from_secs(5), || {
        service.log_text().contains("\"stop_all\"")
    });
    service.signal(libc::SIGTERM);
    let status = service.wait_exit(Duration::from_secs(10));
    assert!(status.success(), "{status}; log:\n{}", service.log_text());
    assert_gone_with_no_token_holders(&sandbox, &pids);
    assert!(
        service.log_events("last_resort").is_empty(),
        "{}",
        service.log_text()
    );
    assert_eq!(service.log_events("kill_all_now").len(), 1);
}
