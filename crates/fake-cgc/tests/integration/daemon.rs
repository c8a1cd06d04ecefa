//! `spawn_daemon`: a grandchild in its own session that keeps the
//! environment and outlives the fake.

use fake_cgc::Event;
use nix::sys::signal::Signal;
use serde_json::json;

use std::time::{Duration, Instant};

use crate::support::{process_alive, KillOnDrop, Running, Sandbox, PATIENCE};

#[test]
fn spawned_daemon_escapes_the_session_and_keeps_the_environment() {
    let sandbox = Sandbox::new("daemon");
    sandbox.write_scenario(json!({"watch": {
        "steps": [{"spawn_daemon": {"sleep_ms": 60000}}, {"stdout": "spawned"}, {"hang": true}]
    }}));
    let mut command = sandbox.command(&["watch", "."]);
    command.env("CGC_FRESH_OWNER", "owner-token-1234");
    let fake = Running::spawn(command);
    fake.read_until("spawned");

    let records = sandbox.records();
    let daemon = records
        .iter()
        .find(|record| record.event == Event::Daemon)
        .unwrap_or_else(|| panic!("no daemon record in {records:?}"))
        .clone();
    let _cleanup = KillOnDrop(daemon.pid);
    let parent = sandbox.record(Event::Start, fake.pid());
    assert_eq!(daemon.spawned_by, Some(fake.pid()));
    assert_ne!(daemon.sid, parent.sid, "own session");
    assert_ne!(daemon.pgid, parent.pgid, "own process group");
    assert_ne!(daemon.pid, daemon.sid, "double fork: not a session leader");
    assert_eq!(
        daemon.env.get("CGC_FRESH_OWNER").map(String::as_str),
        Some("owner-token-1234")
    );
    let environ = std::fs::read(format!("/proc/{}/environ", daemon.pid)).unwrap();
    assert!(environ
        .split(|byte| *byte == 0)
        .any(|entry| entry == b"CGC_FRESH_OWNER=owner-token-1234"));

    // The fake ends; its stdout reaches EOF (the daemon does not hold it),
    // and the daemon lives on.
    fake.signal(Signal::SIGINT);
    let finished = fake.finish();
    assert_eq!(finished.status.code(), Some(0));
    assert!(process_alive(daemon.pid), "the daemon outlives the fake");

    // Default dispositions: SIGTERM ends it.
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(daemon.pid), Signal::SIGTERM).unwrap();
    let deadline = Instant::now() + PATIENCE;
    while process_alive(daemon.pid) {
        assert!(Instant::now() < deadline, "daemon survived SIGTERM");
        std::thread::sleep(Duration::from_millis(20));
    }
}
