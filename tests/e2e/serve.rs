//! `cgc-fresh serve` as a process: one per workspace, its socket and
//! directory modes, the peer check, signals and reload.

use std::fs;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::process::Command;
use std::time::Duration;

use serde_json::json;

use crate::support::{assert_second_serve_is_refused, Sandbox, Service};

#[test]
fn second_serve_for_the_same_workspace_is_refused_and_names_the_pid() {
    let sandbox = Sandbox::new();
    let first = Service::start(&sandbox, &[], &[]);
    assert_second_serve_is_refused(&sandbox, &first);
    // The first one still owns and serves its socket.
    let mut conn = first.connect();
    assert_eq!(conn.hello()["pid"], first.pid());
}

#[test]
fn a_stale_socket_file_is_replaced() {
    let sandbox = Sandbox::new();
    let socket = sandbox.default_socket();
    fs::create_dir_all(socket.parent().unwrap()).unwrap();
    // A socket file nobody listens on, as a killed service leaves behind.
    drop(std::os::unix::net::UnixListener::bind(&socket).unwrap());
    assert!(socket.exists());
    let service = Service::start(&sandbox, &[], &[]);
    assert_eq!(service.connect().hello()["pid"], service.pid());
    assert!(
        service.log_events("stale_socket_removed").len() == 1,
        "{}",
        service.log_text()
    );
}

#[test]
fn a_killed_service_is_replaced_by_the_next_one() {
    let sandbox = Sandbox::new();
    let mut first = Service::start(&sandbox, &[], &[]);
    first.signal(libc::SIGKILL);
    first.wait_exit(Duration::from_secs(5));
    let second = Service::start(&sandbox, &[], &[]);
    assert_eq!(second.connect().hello()["pid"], second.pid());
}

#[test]
fn socket_is_0600_in_a_0700_directory() {
    let sandbox = Sandbox::new();
    let service = Service::start(&sandbox, &[], &[]);
    let sock_mode = fs::metadata(&service.socket).unwrap().mode() & 0o777;
    let dir_mode = fs::metadata(service.socket.parent().unwrap())
        .unwrap()
        .mode()
        & 0o777;
    assert_eq!(sock_mode, 0o600);
    assert_eq!(dir_mode, 0o700);
}

#[test]
fn sigterm_stops_the_service_and_removes_its_socket() {
    let sandbox = Sandbox::new();
    let mut service = Service::start(&sandbox, &[], &[]);
    service.signal(libc::SIGTERM);
    let status = service.wait_exit(Duration::from_secs(10));
    assert!(status.success(), "{status}");
    assert!(!service.socket.exists());
    assert_eq!(service.log_events("shutdown").len(), 1);
}

/// The socket file appears only once the signal handlers are installed: a
/// SIGTERM sent the instant it exists (a client could connect) is a graceful
/// stop, never a kill by the default disposition that leaves the socket behind.
#[test]
fn sigterm_the_instant_the_socket_appears_is_still_a_graceful_stop() {
    for _ in 0..5 {
        let sandbox = Sandbox::new();
        let socket = sandbox.default_socket();
        let mut service = Service::spawn_at(&sandbox, socket.clone(), &[], &[]);
        let deadline = std::time::Instant::now() + Duration::from_secs(20);
        while !socket.exists() {
            assert!(std::time::Instant::now() < deadline, "no socket");
            std::thread::yield_now();
        }
        service.signal(libc::SIGTERM);
        let status = service.wait_exit(Duration::from_secs(10));
        assert!(status.success(), "{status}; log:\n{}", service.log_text());
        assert!(!socket.exists());
    }
}

/// Runs a tiny client as uid/gid 65534 that connects and prints what it reads.
fn connect_as_nobody(socket: &std::path::Path) -> std::process::Output {
    let script = "import socket,sys\n\
s=socket.socket(socket.AF_UNIX)\n\
try:\n  s.connect(sys.argv[1])\nexcept OSError as e:\n  print('connect-failed', e.errno); sys.exit(0)\n\
s.sendall(b'{\"type\":\"status\",\"id\":1}\\n')\n\
print(s.makefile().read())\n";
    Command::new("setpriv")
        .args([
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
            "/usr/bin/python3",
            "-c",
            script,
        ])
        .arg(socket)
        .output()
        .expect("setpriv")
}

#[test]
fn another_user_cannot_reach_the_socket_through_its_directory() {
    let sandbox = Sandbox::new();
    // Let uid 65534 traverse down to the runtime dir; the service's own
    // 0700 directory must still stop it.
    for dir in [sandbox.root.path().to_path_buf(), sandbox.runtime_dir()] {
        fs::set_permissions(&dir, fs::Permissions::from_mode(0o755)).unwrap();
    }
    let service = Service::start(&sandbox, &[], &[]);
    let out = connect_as_nobody(&service.socket);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("connect-failed 13"),
        "EACCES expected: {stdout} {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn a_peer_with_another_uid_is_refused_with_forbidden() {
    let sandbox = Sandbox::new();
    let open_dir = sandbox.root.path().join("open");
    fs::create_dir(&open_dir).unwrap();
    for dir in [sandbox.root.path().to_path_buf(), open_dir.clone()] {
        fs::set_permissions(&dir, fs::Permissions::from_mode(0o755)).unwrap();
    }
    let socket = open_dir.join("svc.sock");
    let service = Service::start_at(&sandbox, socket.clone(), &[], &[]);
    // Deliberately loosen what the service set up, so only SO_PEERCRED stands.
    fs::set_permissions(&open_dir, fs::Permissions::from_mode(0o755)).unwrap();
    fs::set_permissions(&socket, fs::Permissions::from_mode(0o666)).unwrap();
    let out = connect_as_nobody(&socket);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("\"code\":\"forbidden\""),
        "{stdout} {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        !stdout.contains("\"type\":\"state\""),
        "a refused peer got an answer: {stdout}"
    );
    assert_eq!(service.log_events("peer_refused").len(), 1);
    // Our own user is still served.
    assert_eq!(
        service.connect().request(json!({"type":"status"}), 1)["type"],
        "state"
    );
}

#[test]
fn sighup_reloads_a_changed_workspace_file_value() {
    let sandbox = Sandbox::new();
    let pi = sandbox.workspace().join(".pi");
    fs::create_dir_all(&pi).unwrap();
    fs::write(
        pi.join("cgc.json"),
        r#"{"freshness": {"watcherLivenessMs": 1111}}"#,
    )
    .unwrap();
    let service = Service::start(&sandbox, &[], &[]);
    let mut conn = service.connect();
    let config = conn.request(json!({"type": "config"}), 1);
    assert_eq!(
        config["values"]["freshness.watcherLivenessMs"]["value"], 1111,
        "{config}"
    );
    fs::write(
        pi.join("cgc.json"),
        r#"{"freshness": {"watcherLivenessMs": 2222}}"#,
    )
    .unwrap();
    service.signal(libc::SIGHUP);
    // The reload is asynchronous; ask until it shows (bounded).
    let mut seen = None;
    for attempt in 0..200 {
        let config = conn.request(json!({"type": "config"}), 10 + attempt);
        seen = Some(config["values"]["freshness.watcherLivenessMs"]["value"].clone());
        if seen == Some(json!(2222)) {
            break;
        }
        std::thread::sleep(Duration::from_millis(25));
    }
    assert_eq!(seen, Some(json!(2222)));
    // SIGHUP is not a shutdown: same process, still serving.
    assert_eq!(
        conn.request(json!({"type": "status"}), 999)["type"],
        "state"
    );
    assert!(service.log_events("shutdown").is_empty());
}

#[test]
fn client_commands_without_a_service_say_so_and_exit_3() {
    let sandbox = Sandbox::new();
    for args in [
        vec!["status"],
        vec!["sync"],
        vec!["events"],
        vec!["send", r#"{"type":"status"}"#],
    ] {
        let out = sandbox.command().args(&args).output().unwrap();
        assert_eq!(out.status.code(), Some(3), "{args:?}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            stderr.contains("no cgc-fresh service is running"),
            "{args:?}: {stderr}"
        );
    }
}

#[test]
fn status_and_send_talk_to_the_running_service() {
    let sandbox = Sandbox::new();
    let service = Service::start(&sandbox, &[], &[]);
    let sock = service.socket.to_str().unwrap().to_string();
    let out = sandbox
        .command()
        .args(["--socket", &sock, "status", "--json"])
        .output()
        .unwrap();
    assert!(out.status.success());
    let state: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(state["type"], "state");
    let out = sandbox
        .command()
        .args(["--socket", &sock, "status"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("unknown"), "{text}");
    let out = sandbox
        .command()
        .args(["--socket", &sock, "send", r#"{"type":"nope"}"#])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(4));
    assert!(String::from_utf8_lossy(&out.stdout).contains("unknown_type"));
}

#[test]
fn status_without_a_service_shows_the_recorded_state_and_says_it_is_not_observed() {
    let sandbox = Sandbox::new();
    let mut service = Service::start(&sandbox, &[], &[]);
    // Once the workspace actor has answered, it has written the record.
    assert_eq!(
        service.connect().request(json!({"type": "status"}), 1)["type"],
        "state"
    );
    service.signal(libc::SIGTERM);
    service.wait_exit(Duration::from_secs(10));
    let out = sandbox.command().args(["status"]).output().unwrap();
    assert_eq!(out.status.code(), Some(3));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("not observed (no service running)"),
        "{stdout}"
    );
    assert!(stdout.contains("last recorded status unknown"), "{stdout}");
}

/// At debug level the log holds other crates' records too (`globset`'s and
/// `ignore`'s, through `log`): every line is one JSON object that names its
/// component, theirs included.
#[test]
fn a_debug_level_log_names_the_component_on_every_line() {
    let (sandbox, _fake, service) = crate::support::indexed_with_fake(
        json!({}),
        &crate::support::fast_env(&[("CGC_FRESH_LOG", "debug")]),
    );
    let ws = sandbox.workspace();
    fs::write(ws.join(".gitignore"), "build/\n*.tmp\n").unwrap();
    fs::write(ws.join("a.py"), "def a():\n    return 1\n").unwrap();
    let mut conn = crate::support::open_session(&service, "s1");
    crate::support::agent_edit(&mut conn, "s1", "a.py");
    conn.wait_status("fresh");
    let text = service.log_text();
    let mut others = 0;
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let event: serde_json::Value =
            serde_json::from_str(line).unwrap_or_else(|e| panic!("not JSON ({e}): {line}"));
        let component = event["component"].as_str().unwrap_or_default();
        assert!(!component.is_empty(), "no component: {line}");
        if event.get("log.target").is_some() {
            others += 1;
        }
    }
    assert!(others > 0, "another crate's record was logged: {text}");
}
