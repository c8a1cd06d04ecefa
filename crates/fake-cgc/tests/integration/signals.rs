//! Signal behaviour of the built-in watch and of scripts.

// Tests of the fake at the system level (signal dispositions, fcntl locks).
#![allow(unsafe_code)]

use std::os::unix::process::{CommandExt, ExitStatusExt};

use fake_cgc::texts::{
    WATCH_ALREADY_INDEXED, WATCH_ALREADY_INDEXED_SYNCING, WATCH_READY, WATCH_STOPPED,
    WATCH_STOPPING,
};
use fake_cgc::{Event, SignalName};
use nix::sys::signal::Signal;
use serde_json::json;

use crate::support::{Running, Sandbox};

#[test]
fn default_watch_prints_ready_twice_and_stops_gracefully_on_sigint() {
    let sandbox = Sandbox::new("watch-sigint");
    let fake = Running::spawn(sandbox.command(&["watch", "."]));
    let first = fake.read_until(WATCH_READY);
    assert_eq!(first, [WATCH_ALREADY_INDEXED, WATCH_READY]);
    assert_eq!(fake.read_until(WATCH_READY), [WATCH_READY]);
    fake.signal(Signal::SIGINT);
    let finished = fake.finish();
    assert_eq!(finished.status.code(), Some(0));
    assert_eq!(finished.stdout, [WATCH_STOPPING, WATCH_STOPPED]);
}

#[test]
fn sync_on_start_watch_announces_the_synchronisation() {
    let sandbox = Sandbox::new("watch-sync");
    let fake = Running::spawn(sandbox.command(&["watch", "--sync-on-start", "."]));
    assert_eq!(
        fake.read_until(WATCH_READY),
        [WATCH_ALREADY_INDEXED_SYNCING, WATCH_READY]
    );
}

#[test]
fn second_sigint_during_the_stop_exits_130_before_stopped() {
    // The built-in stop pauses only briefly between its lines; a script with
    // a long pause gives the second SIGINT a wide window on a busy machine.
    let sandbox = Sandbox::new("watch-double-sigint");
    sandbox.write_scenario(json!({"watch": {
        "steps": [{"stdout": {"cgc": "ready"}}, {"hang": true}],
        "on_sigint": {"stdout": {"cgc": "stopping"},
                      "steps": [{"sleep_ms": 10000}, {"stdout": {"cgc": "stopped"}}]}
    }}));
    let fake = Running::spawn(sandbox.command(&["watch", "."]));
    fake.read_until(WATCH_READY);
    fake.signal(Signal::SIGINT);
    fake.read_until(WATCH_STOPPING);
    fake.signal(Signal::SIGINT);
    let finished = fake.finish();
    assert_eq!(finished.status.code(), Some(130));
    assert!(finished.stdout.is_empty(), "{:?}", finished.stdout);
    let end = sandbox.record(Event::End, finished.pid);
    assert_eq!(end.signals_received.get("INT"), Some(&2));
}

#[test]
fn sigterm_kills_the_watch_by_the_signal() {
    let sandbox = Sandbox::new("watch-sigterm");
    let fake = Running::spawn(sandbox.command(&["watch", "."]));
    fake.read_until(WATCH_READY);
    fake.signal(Signal::SIGTERM);
    let finished = fake.finish();
    assert_eq!(finished.status.signal(), Some(libc::SIGTERM));
    assert!(!finished.stdout.iter().any(|line| line == WATCH_STOPPING));
    let end = sandbox.record(Event::End, finished.pid);
    assert_eq!(end.how.unwrap().signal, Some(SignalName::TERM));
}

#[test]
fn sigint_interrupts_other_subcommands_with_130() {
    let sandbox = Sandbox::new("index-sigint");
    sandbox
        .write_scenario(json!({"index": {"steps": [{"stdout": "indexing"}, {"sleep_ms": 60000}]}}));
    let fake = Running::spawn(sandbox.command(&["index", "."]));
    fake.read_until("indexing");
    fake.signal(Signal::SIGINT);
    assert_eq!(fake.finish().status.code(), Some(130));
}

#[test]
fn scripted_sigterm_reaction_and_custom_sigint_lines() {
    let sandbox = Sandbox::new("custom-reactions");
    sandbox.write_scenario(json!({"watch": {
        "steps": [{"stdout": "up"}, {"hang": true}],
        "on_sigint": {"stdout": ["bye", {"cgc": "stopped"}], "stderr": "err-bye", "exit": 4},
        "on_sigterm": {"stdout": "term-bye", "exit": 5}
    }}));
    let fake = Running::spawn(sandbox.command(&["watch"]));
    fake.read_until("up");
    fake.signal(Signal::SIGINT);
    let finished = fake.finish();
    assert_eq!(finished.status.code(), Some(4));
    assert_eq!(finished.stdout, ["bye", WATCH_STOPPED]);
    assert_eq!(finished.stderr, ["err-bye"]);

    let fake = Running::spawn(sandbox.command(&["watch"]));
    fake.read_until("up");
    fake.signal(Signal::SIGTERM);
    let finished = fake.finish();
    assert_eq!(finished.status.code(), Some(5));
    assert_eq!(finished.stdout, ["term-bye"]);
    let end = sandbox.record(Event::End, finished.pid);
    assert_eq!(end.how.unwrap().exit, Some(5));
    assert_eq!(end.handled_signal, Some(SignalName::TERM));
}

#[test]
fn ignore_sigint_models_a_stuck_child() {
    let sandbox = Sandbox::new("ignore-sigint");
    sandbox.write_scenario(json!({"watch": {
        "steps": [{"stdout": "up"}, {"hang": true}], "ignore_sigint": true
    }}));
    let mut fake = Running::spawn(sandbox.command(&["watch"]));
    fake.read_until("up");
    fake.signal(Signal::SIGINT);
    // A real process must get the chance to (not) react.
    std::thread::sleep(std::time::Duration::from_millis(300));
    assert!(fake.is_running(), "SIGINT should be ignored");
    fake.signal(Signal::SIGTERM);
    assert_eq!(fake.finish().status.signal(), Some(libc::SIGTERM));
}

#[test]
fn inherited_ignored_sigint_and_mask_are_reported_and_kept() {
    let sandbox = Sandbox::new("inherited-signals");
    let mut command = sandbox.command(&["watch", "."]);
    // SAFETY: only async-signal-safe calls between fork and exec.
    unsafe {
        command.pre_exec(|| {
            libc::signal(libc::SIGINT, libc::SIG_IGN);
            let mut mask: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut mask);
            libc::sigaddset(&mut mask, libc::SIGUSR1);
            libc::pthread_sigmask(libc::SIG_BLOCK, &mask, std::ptr::null_mut());
            Ok(())
        });
    }
    let mut fake = Running::spawn(command);
    fake.read_until(WATCH_READY);
    let start = sandbox.record(Event::Start, fake.pid());
    assert!(start.sigint_ignored);
    assert!(start.ignored_signals.contains(&SignalName::INT));
    assert!(start
        .blocked_signals
        .contains(&"USR1".parse::<SignalName>().unwrap()));

    fake.signal(Signal::SIGINT);
    std::thread::sleep(std::time::Duration::from_millis(300));
    assert!(fake.is_running(), "an inherited SIG_IGN must stay in force");
    fake.signal(Signal::SIGTERM);
    assert_eq!(fake.finish().status.signal(), Some(libc::SIGTERM));
}

#[test]
fn clean_start_reports_nothing_ignored_or_blocked() {
    let sandbox = Sandbox::new("clean-signals");
    let finished = sandbox.run(&["doctor"]);
    let start = sandbox.record(Event::Start, finished.pid);
    assert!(!start.sigint_ignored, "{start:?}");
    assert!(start.blocked_signals.is_empty(), "{start:?}");
}
