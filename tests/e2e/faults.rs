//! The fault matrix and the security boundary, against the real binary.
//!
//! Every fault test ends with the same four checks: the service still
//! serves a new connection; nothing claimed `fresh` that was not; the state
//! file on disk parses and says what the service last pushed; and once the
//! service is stopped, no process it (or the fake `cgc`) started is left —
//! neither a pid from the fake's log nor anything carrying this workspace's
//! owner token. Faults already covered elsewhere are listed, with their
//! tests, in `docs/RELIABILITY.md`.

use std::fs;
use std::io::Write;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{json, Value};

use crate::support::{
    agent_edit, assert_gone_with_no_token_holders, assert_second_serve_is_refused, fake_cgc_path,
    fast_env, indexed_with_fake, is_alive, open_session_as, processes_with_owner_prefix,
    socket_activated_service, vitals, wait_until, Conn, FakeCgc, KilledOnDrop, Sandbox, Service,
};

/// A new connection is welcomed and answered.
fn assert_serves_a_new_connection(service: &Service) {
    let mut other = service.connect();
    let welcome = other.hello();
    assert_eq!(welcome["pid"], service.pid());
    let state = other.request(json!({"type": "status"}), 99);
    assert_eq!(state["type"], "state", "{state}");
}

/// The state file parses and says what the service says now; `fresh` is on
/// disk only when the service itself says `fresh`.
fn assert_state_file_agrees(sandbox: &Sandbox, conn: &mut Conn) {
    let path = sandbox.state_file();
    let mut last = (Value::Null, Value::Null);
    for attempt in 0..50 {
        let said = conn.request(json!({"type": "status"}), 7000 + attempt);
        let text = fs::read_to_string(&path)
            .unwrap_or_else(|e| panic!("state file {}: {e}", path.display()));
        let on_disk: Value = serde_json::from_str(&text)
            .unwrap_or_else(|e| panic!("state file does not parse ({e}): {text}"));
        if said["status"] != "fresh" {
            assert_ne!(
                on_disk["status"], "fresh",
                "disk says fresh, service says {said}"
            );
        }
        if on_disk["status"] == said["status"] {
            return;
        }
        // A transition may land between the two reads; ask again.
        last = (said, on_disk);
        std::thread::sleep(Duration::from_millis(20));
    }
    panic!("the state file never agreed with the service: {last:?}");
}

/// No frame this connection received said `fresh`.
fn assert_never_fresh(conn: &Conn) {
    let fresh: Vec<&Value> = conn
        .history
        .iter()
        .filter(|f| f["status"] == "fresh")
        .collect();
    assert!(fresh.is_empty(), "a false fresh: {fresh:?}");
}

/// Stops the service (SIGTERM, a clean exit) and checks that nothing it or
/// the fake started is left.
fn stop_and_assert_nothing_left(sandbox: &Sandbox, mut service: Service, fake: Option<&FakeCgc>) {
    service.signal(libc::SIGTERM);
    let status = service.wait_exit(Duration::from_secs(15));
    assert!(status.success(), "{status}; log:\n{}", service.log_text());
    let pids = fake.map(FakeCgc::all_pids).unwrap_or_default();
    assert_gone_with_no_token_holders(sandbox, &pids);
}

// ---- cgc that cannot be executed -------------------------------------

/// `cgc.executable` names something that exists but cannot be executed:
/// the sync fails with a recorded reason, nothing runs, never fresh.
fn cgc_that_cannot_be_executed(make: impl FnOnce(&Path)) {
    let sandbox = Sandbox::new();
    sandbox.mark_indexed();
    let cgc = sandbox.root.path().join("bin").join("cgc");
    fs::create_dir_all(cgc.parent().unwrap()).unwrap();
    make(&cgc);
    let cgc_text = cgc.display().to_string();
    let service = Service::start(
        &sandbox,
        &[],
        &fast_env(&[("CGC_EXECUTABLE", cgc_text.as_str())]),
    );
    let mut conn = open_session_as(&service, "pi", "s1");
    agent_edit(&mut conn, "s1", "a.py");
    let notice = conn.wait_seen("sync_failed", |f| f["condition"] == "sync_failed");
    assert!(
        notice["text"].as_str().unwrap().contains(&cgc_text),
        "the notice names the executable: {notice}"
    );
    let state = conn.request(json!({"type": "status"}), 60);
    let error = state["last_error"].as_str().unwrap_or_default();
    assert!(error.contains(&cgc_text), "{state}");
    assert_ne!(state["status"], "fresh", "{state}");
    // The failure is not retried forever: more edits, at most one retry.
    agent_edit(&mut conn, "s1", "b.py");
    agent_edit(&mut conn, "s1", "c.py");
    std::thread::sleep(Duration::from_millis(300));
    let failures = service
        .log_events("decision")
        .into_iter()
        .filter(|e| e["decision"] == "start_sync")
        .count();
    assert!(failures <= 2, "retried at most once: {failures}");
    assert!(
        !sandbox.root.path().join("ran").exists(),
        "the file was executed anyway"
    );
    assert_never_fresh(&conn);
    assert_serves_a_new_connection(&service);
    assert_state_file_agrees(&sandbox, &mut conn);
    stop_and_assert_nothing_left(&sandbox, service, None);
}

#[test]
fn a_cgc_file_without_the_execute_bit_is_a_recorded_failure_never_fresh() {
    cgc_that_cannot_be_executed(|cgc| {
        let marker = cgc.parent().unwrap().parent().unwrap().join("ran");
        fs::write(cgc, format!("#!/bin/sh\ntouch '{}'\n", marker.display())).unwrap();
        fs::set_permissions(cgc, fs::Permissions::from_mode(0o644)).unwrap();
    });
}

#[test]
fn a_cgc_path_that_is_a_directory_is_a_recorded_failure_never_fresh() {
    cgc_that_cannot_be_executed(|cgc| fs::create_dir(cgc).unwrap());
}

// ---- corrupt configuration -------------------------------------------

fn config_value(conn: &mut Conn, key: &str, id: u64) -> (Value, Value) {
    let config = conn.request(json!({"type": "config"}), id);
    assert_eq!(config["type"], "config", "{config}");
    (config["values"][key].clone(), config["warnings"].clone())
}

fn warnings_name(warnings: &Value, file: &Path) -> bool {
    let file = file.display().to_string();
    warnings
        .as_array()
        .is_some_and(|all| all.iter().any(|w| w.as_str().unwrap_or("").contains(&file)))
}

#[test]
fn a_corrupt_workspace_config_at_start_warns_and_the_other_layers_stand() {
    let sandbox = Sandbox::new();
    let pi = sandbox.workspace().join(".pi");
    fs::create_dir_all(&pi).unwrap();
    let file = pi.join("cgc.json");
    fs::write(
        &file,
        b"{ \"freshness\": { \"watcherLivenessMs\": 1111 ,,, \x00garbage",
    )
    .unwrap();
    let service = Service::start(&sandbox, &[], &[("CGC_FRESHNESS_BATCH_MS", "77")]);
    let mut conn = service.connect();
    conn.hello();
    let canonical_file = fs::canonicalize(&file).unwrap();
    let (liveness, warnings) = config_value(&mut conn, "freshness.watcherLivenessMs", 1);
    assert!(
        warnings_name(&warnings, &canonical_file) || warnings_name(&warnings, &file),
        "the warning names the file: {warnings}"
    );
    assert_ne!(liveness["value"], 1111, "{liveness}");
    assert!(
        liveness["layer"].as_str().unwrap_or("").contains("default"),
        "the built-in default stands: {liveness}"
    );
    let (batch, _) = config_value(&mut conn, "freshness.batchMs", 2);
    assert_eq!(batch["value"], 77, "the environment layer still applies");
    assert!(
        !service.log_events("config_warning").is_empty(),
        "{}",
        service.log_text()
    );
    assert_serves_a_new_connection(&service);
    stop_and_assert_nothing_left(&sandbox, service, None);
}

/// Starts with a valid workspace file, replaces it with garbage, sends
/// SIGHUP; returns the service, a connection and the file.
fn corrupt_before_sighup(sandbox: &Sandbox) -> (Service, Conn, PathBuf) {
    let pi = sandbox.workspace().join(".pi");
    fs::create_dir_all(&pi).unwrap();
    let file = pi.join("cgc.json");
    fs::write(&file, r#"{"freshness": {"watcherLivenessMs": 1111}}"#).unwrap();
    let service = Service::start(sandbox, &[], &[]);
    let mut conn = service.connect();
    conn.hello();
    let (before, warnings) = config_value(&mut conn, "freshness.watcherLivenessMs", 1);
    assert_eq!(before["value"], 1111, "{before}");
    assert_eq!(warnings, json!([]));
    // Replaced by garbage (as an editor crash or a bad merge would leave it).
    fs::write(&file, b"\xff\xfe{{{ not json").unwrap();
    service.signal(libc::SIGHUP);
    wait_until("the reload", Duration::from_secs(10), || {
        service.log_events("config_loaded").len() >= 2
    });
    (service, conn, fs::canonicalize(&file).unwrap())
}

#[test]
fn a_workspace_config_corrupted_before_sighup_warns_and_the_service_goes_on() {
    let sandbox = Sandbox::new();
    let (service, mut conn, file) = corrupt_before_sighup(&sandbox);
    let (_, warnings) = config_value(&mut conn, "freshness.watcherLivenessMs", 2);
    assert!(
        warnings_name(&warnings, &file),
        "the warning names the file: {warnings}"
    );
    assert!(service.log_events("shutdown").is_empty());
    assert_eq!(conn.request(json!({"type": "status"}), 3)["type"], "state");
    assert_serves_a_new_connection(&service);
    stop_and_assert_nothing_left(&sandbox, service, None);
}

#[test]
fn a_workspace_config_corrupted_before_sighup_keeps_the_previous_values() {
    let sandbox = Sandbox::new();
    let (service, mut conn, _) = corrupt_before_sighup(&sandbox);
    let (after, _) = config_value(&mut conn, "freshness.watcherLivenessMs", 2);
    assert_eq!(
        after["value"], 1111,
        "the value from before the corrupt reload stands: {after}"
    );
    stop_and_assert_nothing_left(&sandbox, service, None);
}

// ---- the socket file deleted under the running service --------------

#[test]
fn a_deleted_socket_is_bound_again_and_existing_connections_keep_working() {
    let (sandbox, fake, service) = indexed_with_fake(json!({}), &fast_env(&[]));
    let mut existing = open_session_as(&service, "pi", "s1");
    fs::remove_file(&service.socket).unwrap();
    // A new client reaches the same service at the same path (bounded).
    wait_until(
        "the socket to be bound again",
        Duration::from_secs(10),
        || UnixStream::connect(&service.socket).is_ok(),
    );
    let mut newcomer = service.connect();
    assert_eq!(newcomer.hello()["pid"], service.pid());
    let mode = fs::metadata(&service.socket).unwrap().mode() & 0o777;
    assert_eq!(mode, 0o600);
    let rebound = service.log_events("socket_rebound");
    assert_eq!(rebound.len(), 1, "{}", service.log_text());
    assert_eq!(
        rebound[0]["socket"],
        service.socket.display().to_string(),
        "{rebound:?}"
    );
    assert_eq!(rebound[0]["cause"], "deleted", "{rebound:?}");
    // The connection from before the deletion still works, end to end.
    agent_edit(&mut existing, "s1", "a.py");
    existing.wait_status("fresh");
    assert_eq!(
        existing.request(json!({"type": "status"}), 5)["status"],
        "fresh"
    );
    // Moved away instead of deleted: bound again too.
    let elsewhere = sandbox.root.path().join("moved.sock");
    fs::rename(&service.socket, &elsewhere).unwrap();
    wait_until("the second rebind", Duration::from_secs(10), || {
        service.log_events("socket_rebound").len() == 2
    });
    assert_serves_a_new_connection(&service);
    assert_state_file_agrees(&sandbox, &mut existing);
    // Stopping removes the socket, and the guard does not bring it back.
    let (socket, log) = (service.socket.clone(), service.log.clone());
    stop_and_assert_nothing_left(&sandbox, service, Some(&fake));
    assert!(!socket.exists(), "a socket was left behind");
    let rebinds = fs::read_to_string(log)
        .unwrap()
        .matches("\"socket_rebound\"")
        .count();
    assert_eq!(rebinds, 2);
}

#[test]
fn a_removed_runtime_directory_is_rebuilt_and_a_second_serve_is_still_refused() {
    let (sandbox, fake, service) = indexed_with_fake(json!({}), &fast_env(&[]));
    let mut existing = open_session_as(&service, "pi", "s1");
    let dir = service.socket.parent().unwrap().to_path_buf();
    // Moved away, then deleted: a clean-up of the whole runtime directory
    // (an `rm -rf` races with the guard re-creating it, and may fail).
    let moved = sandbox.root.path().join("runtime-moved");
    fs::rename(&dir, &moved).unwrap();
    fs::remove_dir_all(&moved).unwrap();
    wait_until(
        "the socket to be bound again",
        Duration::from_secs(10),
        || UnixStream::connect(&service.socket).is_ok(),
    );
    let rebound = service.log_events("socket_rebound");
    assert_eq!(rebound.len(), 1, "{rebound:?}");
    assert_eq!(rebound[0]["cause"], "directory_removed", "{rebound:?}");
    assert_eq!(fs::metadata(&dir).unwrap().mode() & 0o777, 0o700);
    // The lock lives in the state directory and was never touched.
    assert!(
        service.log_events("instance_relocked").is_empty(),
        "{}",
        service.log_text()
    );
    // The workspace is still this service's: a second serve is refused and
    // names it, and so sweeps none of its children.
    assert_second_serve_is_refused(&sandbox, &service);
    agent_edit(&mut existing, "s1", "a.py");
    existing.wait_status("fresh");
    assert_serves_a_new_connection(&service);
    stop_and_assert_nothing_left(&sandbox, service, Some(&fake));
}

#[test]
fn a_lock_file_replaced_by_one_another_process_holds_stops_the_service_gracefully() {
    let (sandbox, fake, mut service) = indexed_with_fake(json!({}), &fast_env(&[]));
    let lock = sandbox.state_file().with_file_name("instance.lock");
    assert!(lock.exists(), "{}", lock.display());
    // Another holder of a file that then takes the lock's name (as if a
    // second service had started after the old file was deleted).
    let other = sandbox.root.path().join("other.lock");
    fs::write(&other, "4242\n").unwrap();
    // Blocking, so that a probe below holding it for an instant only delays it.
    let holder = KilledOnDrop(
        std::process::Command::new("flock")
            .arg(&other)
            .args(["sleep", "60"])
            .spawn()
            .expect("flock(1) is required (util-linux)"),
    );
    wait_until("the other holder's lock", Duration::from_secs(10), || {
        std::process::Command::new("flock")
            .args(["--nonblock", "--shared"])
            .arg(&other)
            .arg("true")
            .status()
            .is_ok_and(|status| !status.success())
    });
    fs::rename(&other, &lock).unwrap();
    let status = service.wait_exit(Duration::from_secs(15));
    drop(holder);
    assert!(status.success(), "{status}; log:\n{}", service.log_text());
    let lost = service.log_events("instance_lost");
    assert_eq!(lost.len(), 1, "{}", service.log_text());
    assert_eq!(lost[0]["holder_pid"], 4242, "{lost:?}");
    assert_eq!(service.log_events("shutdown").len(), 1);
    for pid in fake.all_pids() {
        assert!(!is_alive(pid), "pid {pid} outlived the service");
    }
    assert!(processes_with_owner_prefix(&Service::owner_prefix(&sandbox)).is_empty());
}

#[test]
fn a_deleted_systemd_socket_is_not_replaced_and_the_loss_is_logged() {
    let sandbox = Sandbox::new();
    let socket = sandbox.root.path().join("activated.sock");
    let log_path = sandbox.root.path().join("activated.log");
    let mut activator = socket_activated_service(
        &sandbox,
        &socket,
        &log_path,
        &["CGC_FRESH_LOG=debug".to_string()],
    );
    let mut conn = Conn::connect_when_listening(&socket);
    conn.hello();
    wait_until("the service to be serving", Duration::from_secs(10), || {
        fs::read_to_string(&log_path)
            .unwrap_or_default()
            .contains("\"serving\"")
    });
    fs::remove_file(&socket).unwrap();
    wait_until("the loss to be logged", Duration::from_secs(10), || {
        fs::read_to_string(&log_path)
            .unwrap_or_default()
            .contains("\"socket_lost\"")
    });
    assert!(
        !socket.exists(),
        "the unit's path must not be re-bound by us"
    );
    // The connection it already had keeps working.
    assert_eq!(conn.request(json!({"type": "status"}), 2)["type"], "state");
    crate::support::send_signal(activator.id() as i32, libc::SIGTERM);
    assert!(activator.wait().unwrap().success());
    let log = fs::read_to_string(&log_path).unwrap();
    assert!(!log.contains("\"socket_rebound\""), "{log}");
}

/// Context switches of every thread of `pid` so far.
fn context_switches(pid: i32) -> u64 {
    let mut total = 0;
    for task in fs::read_dir(format!("/proc/{pid}/task")).unwrap().flatten() {
        let status = fs::read_to_string(task.path().join("status")).unwrap_or_default();
        for line in status.lines() {
            if let Some(rest) = line
                .strip_prefix("voluntary_ctxt_switches:")
                .or_else(|| line.strip_prefix("nonvoluntary_ctxt_switches:"))
            {
                total += rest.trim().parse::<u64>().unwrap_or(0);
            }
        }
    }
    total
}

#[test]
fn the_socket_guard_does_not_wake_an_idle_service() {
    let sandbox = Sandbox::new();
    let service = Service::start(&sandbox, &[], &[]);
    let mut conn = service.connect();
    conn.hello();
    conn.subscribe();
    // Lose the socket once, so the re-armed watch is the one being idle.
    fs::remove_file(&service.socket).unwrap();
    wait_until("the rebind", Duration::from_secs(10), || {
        service.log_events("socket_rebound").len() == 1
    });
    std::thread::sleep(Duration::from_millis(300));
    let before = context_switches(service.pid());
    // The service must sleep through this: no timer, no polling.
    std::thread::sleep(Duration::from_millis(1500));
    let after = context_switches(service.pid());
    assert_eq!(after, before, "the idle service woke up");
    assert_eq!(conn.request(json!({"type": "status"}), 2)["type"], "state");
}

// ---- many connections -------------------------------------------------

#[test]
fn ten_thousand_connections_opened_and_dropped_leave_no_descriptor_behind() {
    let sandbox = Sandbox::new();
    // Connection logs at info only: 10 000 of them at debug are just noise.
    let service = Service::start(&sandbox, &[], &[("CGC_FRESH_LOG", "info")]);
    assert_serves_a_new_connection(&service);
    std::thread::sleep(Duration::from_millis(100));
    let fds_at_start = vitals(service.pid()).fds;
    // 5 000 one after the other, alternating what they do before dropping.
    for n in 0..5_000u32 {
        let mut stream = UnixStream::connect(&service.socket).expect("connect");
        match n % 4 {
            0 => {}
            1 => {
                let _ = stream.write_all(
                    b"{\"type\":\"hello\",\"client\":\"x\",\"instance\":\"i\",\"protocol\":1}\n",
                );
            }
            2 => {
                let _ = stream.write_all(b"{\"type\":\"sta");
            }
            _ => {
                let _ = stream.write_all(b"{\"type\":\"status\",\"id\":1}\n");
            }
        }
    }
    // 5 000 more in bursts of 100 open at the same time.
    for _ in 0..50 {
        let burst: Vec<UnixStream> = (0..100)
            .map(|_| UnixStream::connect(&service.socket).expect("connect"))
            .collect();
        for (n, mut stream) in burst.into_iter().enumerate() {
            if n % 2 == 0 {
                let _ = stream.write_all(b"{\"type\":\"status\"}\n");
            }
        }
    }
    // Every one was accepted (one more: the first check's), every one closed...
    let expected = 10_001;
    wait_until(
        "every connection to be accepted",
        Duration::from_secs(60),
        || service.log_events("connection_opened").len() >= expected,
    );
    wait_until(
        "every connection to be closed",
        Duration::from_secs(60),
        || service.log_events("connection_closed").len() >= expected,
    );
    // ...and the descriptors went with them.
    wait_until(
        "the service's descriptors to come back",
        Duration::from_secs(30),
        || vitals(service.pid()).fds <= fds_at_start + 4,
    );
    assert_serves_a_new_connection(&service);
    stop_and_assert_nothing_left(&sandbox, service, None);
}

// ---- conflicting harness connections ----------------------------------

/// A burst of `write` tool calls for `session` on a connection of its own
/// (which never announced the session), written from another thread.
fn tool_call_burst(socket: PathBuf, session: &'static str) -> std::thread::JoinHandle<UnixStream> {
    std::thread::spawn(move || {
        let mut stream = UnixStream::connect(&socket).expect("connect");
        let mut burst = Vec::new();
        for n in 0..500 {
            burst.extend_from_slice(
                format!(
                    "{{\"type\":\"tool_call\",\"session\":\"{session}\",\"tool\":\"write\",\"paths\":[\"f{n}.py\"]}}\n\
                     {{\"type\":\"tool_result\",\"session\":\"{session}\",\"tool\":\"write\",\"ok\":true}}\n"
                )
                .as_bytes(),
            );
        }
        stream.write_all(&burst).expect("burst");
        stream
    })
}

/// Sends a status request on a raw stream and waits for its answer.
fn drain(stream: &UnixStream) {
    let mut writer = stream.try_clone().expect("clone");
    writer
        .write_all(b"{\"type\":\"status\",\"id\":\"drain\"}\n")
        .expect("write");
    let mut reader = std::io::BufReader::new(stream.try_clone().expect("clone"));
    stream
        .set_read_timeout(Some(Duration::from_secs(20)))
        .expect("timeout");
    loop {
        let mut line = String::new();
        let read = std::io::BufRead::read_line(&mut reader, &mut line).expect("read");
        assert!(read > 0, "closed before the drain answer");
        if line.contains("\"drain\"") {
            return;
        }
    }
}

#[test]
fn two_connections_claiming_one_session_keep_one_consistent_record() {
    let (sandbox, fake, service) = indexed_with_fake(
        json!({}),
        &fast_env(&[("CGC_FRESHNESS_MAX_SYNCS_PER_SESSION", "100")]),
    );
    // Both claim "s" with different instances: the second replaces the first.
    let mut a = open_session_as(&service, "pi-a", "s");
    let mut b = open_session_as(&service, "pi-b", "s");
    agent_edit(&mut a, "s", "a.py");
    agent_edit(&mut b, "s", "b.py");
    b.wait_status("fresh");
    // A shuts "s" down while B, and a third connection, go on sending tool
    // calls for it, all at once.
    let writer = tool_call_burst(service.socket.clone(), "s");
    a.send(json!({"type": "session_shutdown", "session": "s", "reason": "quit"}));
    for n in 0..50 {
        agent_edit(&mut b, "s", &format!("g{n}.py"));
    }
    b.send(json!({"type": "session_start", "session": "s", "reason": "resume"}));
    a.send(json!({"type": "session_start", "session": "s", "reason": "resume"}));
    agent_edit(&mut a, "s", "h.py");
    a.send(json!({"type": "session_shutdown", "session": "s"}));
    b.send(json!({"type": "session_shutdown", "session": "s"}));
    let burst_stream = writer.join().unwrap();
    // Each connection's frames are handled in order, so once every
    // connection's own status request is answered, nothing is in flight.
    drain(&burst_stream);
    b.request(json!({"type": "status"}), 40);
    a.request(json!({"type": "status"}), 41);
    // Both see one record: the same epoch, the same status.
    let said_a = a.request(json!({"type": "status"}), 4);
    let said_b = b.request(json!({"type": "status"}), 5);
    assert_eq!(said_a["edit_epoch"], said_b["edit_epoch"], "one record");
    assert_eq!(said_a["status"], said_b["status"], "one record");
    // Every edit that was counted is covered before anything says fresh
    // again: whatever the last state is, a fresh claim came from a sync
    // that started after the last counted edit.
    let settled = if said_b["syncing"] == true {
        b.recv_until("no sync running", |f| {
            f["type"] == "state" && f["syncing"] == false
        })
        .0
    } else {
        said_b.clone()
    };
    if settled["status"] == "fresh" {
        assert!(
            settled["last_synced_at"].as_u64() >= said_b["stale_since"].as_u64(),
            "{settled}"
        );
    }
    drop(burst_stream);
    assert!(
        service.log_events("panic").is_empty(),
        "{}",
        service.log_text()
    );
    assert!(is_alive(service.pid()));
    assert_serves_a_new_connection(&service);
    assert_state_file_agrees(&sandbox, &mut b);
    drop((a, b));
    stop_and_assert_nothing_left(&sandbox, service, Some(&fake));
}

#[test]
fn edits_under_a_session_id_another_connection_shut_down_are_not_lost() {
    let (sandbox, fake, service) = indexed_with_fake(json!({}), &fast_env(&[]));
    let mut a = open_session_as(&service, "pi-a", "s");
    let mut b = open_session_as(&service, "pi-b", "s");
    agent_edit(&mut b, "s", "b.py");
    b.wait_status("fresh");
    a.request(json!({"type": "session_shutdown", "session": "s"}), 3);
    // B's agent goes on editing: the graph no longer has these edits.
    agent_edit(&mut b, "s", "c.py");
    let state = b.request(json!({"type": "status"}), 4);
    assert_ne!(state["status"], "fresh", "a false fresh: {state}");
    stop_and_assert_nothing_left(&sandbox, service, Some(&fake));
}

#[test]
fn sessions_past_the_live_bound_are_refused_with_an_error_and_their_edits_still_count() {
    let (sandbox, fake, service) = indexed_with_fake(json!({}), &fast_env(&[]));
    let mut conn = open_session_as(&service, "pi-a", "s0");
    for n in 1..1024 {
        conn.send(
            json!({"type": "session_start", "session": format!("s{n}"), "reason": "startup"}),
        );
    }
    let refused = conn.request(
        json!({"type": "session_start", "session": "one-too-many", "reason": "startup"}),
        5,
    );
    assert_eq!(refused["type"], "error", "{refused}");
    assert_eq!(refused["code"], "unavailable", "{refused}");
    assert!(
        refused["message"]
            .as_str()
            .unwrap()
            .contains("1024 sessions"),
        "{refused}"
    );
    assert_eq!(service.log_events("session_refused").len(), 1);
    agent_edit(&mut conn, "s0", "a.py");
    conn.wait_status("fresh");
    // An edit under a new name past the bound starts no session, but the
    // file changed: `fresh` must not stand.
    agent_edit(&mut conn, "unannounced", "b.py");
    conn.wait_status("possibly_stale");
    assert_state_file_agrees(&sandbox, &mut conn);
    // The connection's sessions end with it, which makes room again.
    drop(conn);
    wait_until("room for a new session", Duration::from_secs(10), || {
        let mut other = open_session_as(&service, "pi-b", "later");
        let answer = other.request(json!({"type": "status"}), 6);
        !other.history.iter().any(|f| f["type"] == "error") && answer["type"] == "state"
    });
    assert_serves_a_new_connection(&service);
    stop_and_assert_nothing_left(&sandbox, service, Some(&fake));
}

// ---- security: frames never reach a shell ----------------------------

#[test]
fn paths_from_frames_are_never_executed_nor_passed_to_cgc() {
    let (sandbox, fake, service) = indexed_with_fake(
        json!({}),
        &fast_env(&[("CGC_FRESHNESS_MAX_SYNCS_PER_SESSION", "100")]),
    );
    let root = sandbox.root.path();
    let victim = sandbox.workspace().join("x");
    fs::write(&victim, "keep me").unwrap();
    let pwned: Vec<PathBuf> = (0..4).map(|n| root.join(format!("pwned{n}"))).collect();
    let hostile = [
        format!("$(touch {})", pwned[0].display()),
        format!("`touch {}`", pwned[1].display()),
        format!("a.py; touch {}", pwned[2].display()),
        format!("a.py && touch {} #", pwned[3].display()),
        ";rm -rf x".to_string(),
        "|rm -rf x".to_string(),
        "--db=evil".to_string(),
        "-rf".to_string(),
        "../../etc/passwd".to_string(),
        "/etc/passwd".to_string(),
        root.join("outside.py").display().to_string(),
        "src/with\nnewline.py".to_string(),
    ];
    let mut conn = open_session_as(
        &service,
        "$(touch pwned-instance)",
        "$(touch pwned-session)",
    );
    for path in &hostile {
        conn.send(json!({"type": "tool_call", "session": "$(touch pwned-session)", "tool": "edit", "paths": [path]}));
        conn.send(json!({"type": "tool_result", "session": "$(touch pwned-session)", "tool": "edit", "ok": true}));
    }
    // Frames that try to choose what runs: unknown fields are no lever.
    conn.send(json!({"type": "sync", "executable": "/bin/sh", "argv": ["-c", "touch pwned-sync"]}));
    conn.send(json!({"type": "hello", "client": "$(id)", "instance": "`id`", "protocol": 1}));
    conn.wait_status("fresh");
    std::thread::sleep(Duration::from_millis(300));
    for file in &pwned {
        assert!(!file.exists(), "{} was created", file.display());
    }
    for name in ["pwned-instance", "pwned-session", "pwned-sync"] {
        assert!(!sandbox.workspace().join(name).exists(), "{name}");
        assert!(!root.join(name).exists(), "{name}");
    }
    assert_eq!(fs::read_to_string(&victim).unwrap(), "keep me");
    let calls = fake.invocations();
    assert!(!calls.is_empty());
    let fake_program = fake_cgc_path().display().to_string();
    for call in &calls {
        assert_eq!(call["program"], fake_program, "{call}");
        assert_eq!(
            call["argv"],
            json!(["watch", "--sync-on-start", "."]),
            "only the configured strategy runs: {call}"
        );
        let argv = call["argv"].to_string();
        for path in &hostile {
            assert!(!argv.contains(path.as_str()), "{path} reached argv: {call}");
        }
    }
    assert_serves_a_new_connection(&service);
    assert_state_file_agrees(&sandbox, &mut conn);
    stop_and_assert_nothing_left(&sandbox, service, Some(&fake));
}

#[test]
fn edits_only_outside_the_workspace_are_ignored_and_spawn_nothing() {
    let (sandbox, fake, service) = indexed_with_fake(json!({}), &fast_env(&[]));
    let mut conn = open_session_as(&service, "pi", "s1");
    let outside = sandbox.root.path().join("outside.py").display().to_string();
    for path in [
        "../../etc/passwd",
        "/etc/passwd",
        "../sibling/file.py",
        "/",
        outside.as_str(),
    ] {
        agent_edit(&mut conn, "s1", path);
    }
    // Well past the batching window: a sync would have been spawned by now.
    std::thread::sleep(Duration::from_millis(500));
    let state = conn.request(json!({"type": "status"}), 9);
    assert_eq!(state["status"], "unknown", "{state}");
    assert_eq!(state["edit_epoch"], 0, "{state}");
    assert!(fake.invocations().is_empty(), "{:?}", fake.invocations());
    // A path inside (even spelled with ..) does count.
    agent_edit(&mut conn, "s1", "src/../a.py");
    conn.wait_status("fresh");
    assert_eq!(fake.invocations().len(), 1);
    assert_state_file_agrees(&sandbox, &mut conn);
    stop_and_assert_nothing_left(&sandbox, service, Some(&fake));
}

#[test]
fn a_frame_cannot_make_the_service_run_anything_but_the_configured_command() {
    let sandbox = Sandbox::new();
    let fake = FakeCgc::new(&sandbox, json!({}));
    // Configured: global args and the update strategy; not indexed, with
    // autoCreate off, so the consent listing (`list`) runs too.
    let service = Service::start_with_fake(
        &sandbox,
        &fake,
        &fast_env(&[
            ("CGC_GLOBAL_ARGS", "--db kuzudb"),
            ("CGC_SYNC_STRATEGY", "update"),
            ("CGC_FRESHNESS_MAX_SYNCS_PER_SESSION", "100"),
        ]),
    );
    let mut conn = open_session_as(&service, "pi", "s1");
    agent_edit(&mut conn, "s1", "a.py");
    conn.wait_seen("the declined sync", |f| {
        f["condition"] == "sync_declined_unindexed"
    });
    sandbox.mark_indexed();
    for frame in [
        json!({"type": "sync", "strategy": "index", "args": ["--force"]}),
        json!({"type": "tool_call", "session": "s1", "tool": "bash", "paths": ["a.py"], "command": "rm -rf /"}),
        json!({"type": "tool_result", "session": "s1", "tool": "bash", "ok": true}),
        json!({"type": "session_start", "session": "s2", "reason": "startup", "watch": "on"}),
    ] {
        conn.send(frame);
    }
    conn.request(json!({"type": "sync"}), 10);
    wait_until("the update to run", Duration::from_secs(10), || {
        fake.invocations().iter().any(|c| c["argv"][2] == "update")
    });
    std::thread::sleep(Duration::from_millis(300));
    let fake_program = fake_cgc_path().display().to_string();
    let allowed = [
        json!(["--db", "kuzudb", "list"]),
        json!(["--db", "kuzudb", "update", ".", "--quiet"]),
    ];
    let calls = fake.invocations();
    for call in &calls {
        assert_eq!(call["program"], fake_program, "{call}");
        assert!(allowed.contains(&call["argv"]), "not configured: {call}");
    }
    for expected in &allowed {
        assert!(
            calls.iter().any(|c| &c["argv"] == expected),
            "{expected} ran: {calls:?}"
        );
    }
    assert_serves_a_new_connection(&service);
    assert_state_file_agrees(&sandbox, &mut conn);
    stop_and_assert_nothing_left(&sandbox, service, Some(&fake));
}

// ---- security: files are the user's only -----------------------------

fn mode(path: &Path) -> u32 {
    fs::metadata(path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .mode()
        & 0o777
}

#[test]
fn state_registry_lock_and_socket_are_created_user_only() {
    let sandbox = Sandbox::new();
    sandbox.mark_indexed();
    // The service runs with the test's umask (022: group and others could
    // read); it must restrict what it creates on its own.
    let fake = FakeCgc::new(&sandbox, json!({"watch": {"steps": [{"hang": true}]}}));
    let service = Service::start_with_fake(&sandbox, &fake, &fast_env(&[]));
    let mut conn = open_session_as(&service, "pi", "s1");
    agent_edit(&mut conn, "s1", "a.py");
    // A running sync: the registry lists it.
    conn.wait_status("syncing");
    let runtime = service.socket.parent().unwrap().to_path_buf();
    let state = sandbox.state_file();
    let registry = state.with_file_name("children.json");
    let lock = state.with_file_name("instance.lock");
    wait_until("the registry file", Duration::from_secs(5), || {
        registry.exists()
    });
    assert_eq!(mode(&runtime), 0o700, "runtime directory");
    assert_eq!(mode(&service.socket), 0o600, "socket");
    assert_eq!(mode(&lock), 0o600, "instance lock");
    assert_eq!(mode(&registry), 0o600, "registry");
    assert_eq!(mode(state.parent().unwrap()), 0o700, "state directory");
    assert_eq!(mode(&state), 0o600, "state file");
    // What `cgc` itself creates (the graph database) is user-only too: the
    // running sync inherited the service's umask.
    wait_until("the sync's start record", Duration::from_secs(5), || {
        !fake.invocations().is_empty()
    });
    let sync_pid = fake.invocations()[0]["pid"].as_i64().unwrap();
    let status = fs::read_to_string(format!("/proc/{sync_pid}/status")).unwrap();
    assert!(
        status.lines().any(|l| l == "Umask:\t0077"),
        "the sync's umask: {status}"
    );
    for file in [&service.socket, &lock, &registry, &state] {
        let meta = fs::metadata(file).unwrap();
        assert_eq!(
            meta.uid(),
            nix::unistd::geteuid().as_raw(),
            "{}",
            file.display()
        );
    }
    stop_and_assert_nothing_left(&sandbox, service, Some(&fake));
}
