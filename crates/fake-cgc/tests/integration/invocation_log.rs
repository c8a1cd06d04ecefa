//! The invocation log: start and end records with identity, environment
//! selection, timing and how the run ended.

use std::os::unix::process::CommandExt;

use fake_cgc::texts::WATCH_READY;
use fake_cgc::{Ending, Event, SignalName};
use nix::sys::signal::Signal;

use crate::support::{Running, Sandbox};

#[test]
fn start_and_end_records_carry_the_documented_fields() {
    let sandbox = Sandbox::new("log-fields");
    let mut command = sandbox.command(&["--db", "kuzudb", "watch", ".", "--sync-on-start"]);
    command
        .env("COLUMNS", "1000")
        .env("ENABLE_AUTO_WATCH", "false")
        .env("CGC_FRESH_OWNER", "owner-1")
        .env("HOME", sandbox.workspace())
        .env("NOT_LOGGED", "secret")
        .env_remove("NOTIFY_SOCKET")
        .process_group(0);
    let fake = Running::spawn(command);
    fake.read_until(WATCH_READY);
    let pid = fake.pid();
    let start = sandbox.record(Event::Start, pid);
    fake.signal(Signal::SIGINT);
    let finished = fake.finish();
    assert_eq!(finished.status.code(), Some(0));
    let end = sandbox.record(Event::End, pid);

    for record in [&start, &end] {
        assert_eq!(
            record.argv,
            ["--db", "kuzudb", "watch", ".", "--sync-on-start"]
        );
        assert_eq!(record.program, crate::support::FAKE);
        assert_eq!(record.command.as_deref(), Some("watch"));
        assert_eq!(record.cwd, sandbox.workspace().to_string_lossy());
        assert_eq!(record.ppid, std::process::id() as i32);
        assert_eq!(record.pgid, pid, "own process group");
        assert_eq!(record.sid, nix::unistd::getsid(None).unwrap().as_raw());
        assert_eq!(record.env.get("COLUMNS").map(String::as_str), Some("1000"));
        assert_eq!(
            record.env.get("ENABLE_AUTO_WATCH").map(String::as_str),
            Some("false")
        );
        assert_eq!(
            record.env.get("CGC_FRESH_OWNER").map(String::as_str),
            Some("owner-1")
        );
        assert!(record.env.contains_key("HOME"));
        assert!(!record.env.contains_key("NOT_LOGGED"));
        assert!(!record.env.contains_key("NOTIFY_SOCKET"));
        assert_eq!(record.start_ms, start.start_ms);
    }
    assert_eq!(start.how, None);
    assert_eq!(start.end_ms, None);
    assert!(end.end_ms.unwrap() >= end.start_ms);
    assert_eq!(
        end.how,
        Some(Ending {
            exit: Some(0),
            signal: None
        })
    );
    assert_eq!(end.handled_signal, Some(SignalName::INT));
    // The raw JSON shape other test suites compare against.
    let raw: Vec<serde_json::Value> = std::fs::read_to_string(sandbox.log_path())
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    let raw_end = raw
        .iter()
        .find(|record| record["event"] == "end" && record["pid"] == pid)
        .unwrap();
    assert_eq!(raw_end["how"], serde_json::json!({"exit": 0}));
    assert_eq!(raw_end["handled_signal"], "INT");
    assert_eq!(end.signals_received.get("INT"), Some(&1));
    assert_eq!(end.behaviour.as_deref(), Some("builtin"));
}

#[test]
fn a_sigkilled_run_leaves_its_start_record() {
    let sandbox = Sandbox::new("log-sigkill");
    let fake = Running::spawn(sandbox.command(&["watch"]));
    fake.read_until(WATCH_READY);
    fake.signal(Signal::SIGKILL);
    let finished = fake.finish();
    let records: Vec<Event> = sandbox
        .records()
        .into_iter()
        .filter(|record| record.pid == finished.pid)
        .map(|record| record.event)
        .collect();
    assert_eq!(records, [Event::Start]);
}
