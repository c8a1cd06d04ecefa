//! `hold_lock`: a real fcntl write lock, seen by another process.

// Tests of the fake at the system level (signal dispositions, fcntl locks).
#![allow(unsafe_code)]

use std::os::fd::AsRawFd;

use fake_cgc::texts::{lock_error_line, LOCK_ERROR_HINT};
use nix::sys::signal::Signal;
use serde_json::json;

use crate::support::{write_lock_holder, Running, Sandbox};

#[test]
fn hold_lock_is_visible_to_f_getlk_with_the_fakes_pid() {
    let sandbox = Sandbox::new("hold-lock");
    sandbox.write_scenario(json!({"watch": {
        "steps": [{"hold_lock": ".codegraphcontext/db/kuzudb"}, {"stdout": "locked"}, {"hang": true}]
    }}));
    let db_file = sandbox.workspace().join(".codegraphcontext/db/kuzudb");
    let fake = Running::spawn(sandbox.command(&["watch", "."]));
    fake.read_until("locked");
    assert!(
        db_file.is_file(),
        "the lock step creates the file and its parents"
    );
    assert_eq!(write_lock_holder(&db_file), Some(fake.pid()));

    fake.signal(Signal::SIGINT);
    let finished = fake.finish();
    assert_eq!(finished.status.code(), Some(0));
    assert_eq!(write_lock_holder(&db_file), None, "released at exit");
}

#[test]
fn a_busy_lock_gives_the_real_lock_error_and_exit_1() {
    let sandbox = Sandbox::new("busy-lock");
    let db_file = sandbox.workspace().join("db");
    // This test process plays the other CGC process holding the database.
    let holder = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(&db_file)
        .unwrap();
    let mut request: libc::flock = unsafe { std::mem::zeroed() };
    request.l_type = libc::F_WRLCK as libc::c_short;
    request.l_whence = libc::SEEK_SET as libc::c_short;
    assert_eq!(
        unsafe { libc::fcntl(holder.as_raw_fd(), libc::F_SETLK, &request) },
        0
    );

    sandbox.write_scenario(json!({
        "index": {"steps": [{"hold_lock": "db"}, {"stdout": "got it"}]},
        "watch": {"steps": [{"hold_lock": {"path": "db", "busy_timeout_ms": 250}}, {"stdout": "got it"}]}
    }));
    let expected = [
        lock_error_line(&db_file.to_string_lossy()),
        LOCK_ERROR_HINT.to_owned(),
    ];
    for subcommand in ["index", "watch"] {
        let finished = sandbox.run(&[subcommand]);
        assert_eq!(finished.status.code(), Some(1), "{subcommand}");
        assert_eq!(finished.stdout, expected, "{subcommand}");
    }
    drop(holder);
}
