//! One service per workspace, whatever socket it is given, and nothing
//! outside what it owns is touched: the instance lock and the child
//! registry live in the workspace's state directory, directories are never
//! chmod-ed, files are never written through symlinks, and the start-up
//! sweep kills only leftovers of a dead instance of this workspace.

use std::fs;
use std::os::unix::fs::{FileTypeExt, MetadataExt, PermissionsExt};
use std::os::unix::net::UnixListener;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::support::{
    indexed_with_fake, is_alive, wait_until, Conn, FakeCgc, KilledOnDrop, Sandbox, Service,
};

const ENV: [(&str, &str); 3] = [
    ("CGC_FRESHNESS_BATCH_MS", "20"),
    ("CGC_FRESHNESS_SETTLE_MS", "2000"),
    ("CGC_SUPERVISOR_STOP_GRACE_MS", "500"),
];

/// A sync that daemonizes a grandchild (own session), then hangs.
fn hanging_sync_with_daemon() -> Value {
    json!({"watch": {"steps": [{"spawn_daemon": {"sleep_ms": 600000}}, {"hang": true}]}})
}

fn lock_path(sandbox: &Sandbox) -> PathBuf {
    sandbox.state_dir().join("instance.lock")
}

fn registry_path(sandbox: &Sandbox) -> PathBuf {
    sandbox.state_dir().join("children.json")
}

fn mode(path: &Path) -> u32 {
    fs::symlink_metadata(path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .mode()
        & 0o7777
}

/// The pids of the fake `cgc` processes a test left running (a daemon
/// sleeps ten minutes): killed when the test ends, whatever became of the
/// service that started them.
struct Leftovers(Vec<i32>);

impl std::ops::Deref for Leftovers {
    type Target = [i32];
    fn deref(&self) -> &[i32] {
        &self.0
    }
}

impl Drop for Leftovers {
    fn drop(&mut self) {
        for &pid in &self.0 {
            // Only while the pid still names a fake `cgc` of ours.
            let ours = fs::read(format!("/proc/{pid}/cmdline"))
                .is_ok_and(|cmdline| String::from_utf8_lossy(&cmdline).contains("fake-cgc"));
            if ours {
                crate::support::send_signal(pid, libc::SIGKILL);
            }
        }
    }
}

/// A first service whose session runs a hung sync that left a daemon;
/// returns it with the pids of its children (sync and daemon).
fn first_with_children() -> (Sandbox, FakeCgc, Service, Conn, Leftovers) {
    let (sandbox, fake, service) = indexed_with_fake(hanging_sync_with_daemon(), &ENV);
    let mut conn = service.connect();
    conn.hello();
    conn.subscribe();
    conn.send(json!({"type": "session_start", "session": "s1", "reason": "startup"}));
    conn.send(json!({"type": "tool_call", "session": "s1", "tool": "write", "paths": ["a.py"]}));
    conn.send(json!({"type": "tool_result", "session": "s1", "tool": "write", "ok": true}));
    wait_until("the sync and its daemon", Duration::from_secs(10), || {
        fake.records().iter().any(|r| r["event"] == "daemon")
    });
    let pids = Leftovers(fake.all_pids());
    assert!(pids.len() >= 2, "{:?}", fake.records());
    (sandbox, fake, service, conn, pids)
}

/// How a `serve` started by a test ended up.
#[derive(Debug)]
enum Outcome {
    /// It exited by itself (status, its stderr).
    Exited(ExitStatus, String),
    /// It started serving (and was killed by the test).
    Served(String),
}

/// Runs `cmd` (a `serve`) until it exits or says it is serving (bounded).
fn serve_outcome(sandbox: &Sandbox, mut cmd: Command) -> Outcome {
    let log = sandbox
        .root
        .path()
        .join(format!("outcome-{}.log", rand_suffix()));
    let mut child = KilledOnDrop(
        cmd.stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(fs::File::create(&log).expect("log"))
            .spawn()
            .expect("spawn serve"),
    );
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let text = fs::read_to_string(&log).unwrap_or_default();
        if let Some(status) = child.try_wait().expect("try_wait") {
            return Outcome::Exited(status, fs::read_to_string(&log).unwrap_or_default());
        }
        if text.contains("\"event\":\"serving\"") {
            return Outcome::Served(text);
        }
        assert!(
            Instant::now() < deadline,
            "serve neither exited nor served:\n{text}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn rand_suffix() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    N.fetch_add(1, Ordering::Relaxed)
}

/// `outcome` is a refusal (non-zero exit) whose message contains every one of `needles`.
fn assert_refused(outcome: &Outcome, needles: &[&str]) -> String {
    match outcome {
        Outcome::Exited(status, stderr) => {
            assert!(!status.success(), "{status}: {stderr}");
            for needle in needles {
                assert!(stderr.contains(needle), "{needle:?} not in:\n{stderr}");
            }
            stderr.clone()
        }
        Outcome::Served(log) => panic!("serve started instead of refusing:\n{log}"),
    }
}

/// A second serve was refused naming the first (pid and socket), and the
/// first's children are all alive, and the first still serves.
fn assert_second_refused_and_first_intact(
    sandbox: &Sandbox,
    first: &Service,
    children: &[i32],
    outcome: &Outcome,
) {
    let workspace = fs::canonicalize(sandbox.workspace()).unwrap();
    assert_refused(
        outcome,
        &[
            &format!(
                "already running (pid {}, socket {})",
                first.pid(),
                first.socket.display()
            ),
            &format!("for {}", workspace.display()),
        ],
    );
    for &pid in children {
        assert!(is_alive(pid), "the first service's child {pid} was killed");
    }
    let mut conn = first.connect();
    assert_eq!(conn.hello()["pid"], first.pid());
    assert!(
        first.log_events("shutdown").is_empty(),
        "{}",
        first.log_text()
    );
}

#[test]
fn a_second_serve_with_another_socket_is_refused_and_kills_nothing() {
    let (sandbox, _fake, first, _conn, children) = first_with_children();
    let other = sandbox.root.path().join("other");
    fs::create_dir(&other).unwrap();
    fs::set_permissions(&other, fs::Permissions::from_mode(0o700)).unwrap();
    let mut cmd = sandbox.command();
    cmd.arg("serve").arg("--socket").arg(other.join("b.sock"));
    let outcome = serve_outcome(&sandbox, cmd);
    assert_second_refused_and_first_intact(&sandbox, &first, &children, &outcome);
    assert!(!other.join("b.sock").exists());
}

#[test]
fn a_second_serve_with_another_socket_from_the_environment_is_refused() {
    let (sandbox, _fake, first, _conn, children) = first_with_children();
    let other = sandbox.root.path().join("env-run");
    fs::create_dir(&other).unwrap();
    fs::set_permissions(&other, fs::Permissions::from_mode(0o700)).unwrap();
    let mut cmd = sandbox.command();
    cmd.arg("serve")
        .env("CGC_FRESH_SOCKET", other.join("c.sock"));
    let outcome = serve_outcome(&sandbox, cmd);
    assert_second_refused_and_first_intact(&sandbox, &first, &children, &outcome);
}

#[test]
fn a_second_serve_without_xdg_runtime_dir_is_refused() {
    let (sandbox, _fake, first, _conn, children) = first_with_children();
    let tmp = sandbox.root.path().join("tmp");
    fs::create_dir(&tmp).unwrap();
    let mut cmd = sandbox.command();
    cmd.arg("serve")
        .env_remove("XDG_RUNTIME_DIR")
        .env("TMPDIR", &tmp);
    let outcome = serve_outcome(&sandbox, cmd);
    assert_second_refused_and_first_intact(&sandbox, &first, &children, &outcome);
}

#[test]
fn a_client_without_xdg_runtime_dir_finds_the_service_through_the_lock_record() {
    let (sandbox, _fake, first, _conn, _children) = first_with_children();
    let tmp = sandbox.root.path().join("tmp");
    fs::create_dir(&tmp).unwrap();
    // Its default socket would be under TMPDIR, where nothing listens; the
    // lock file names the live service's socket and pid.
    let out = sandbox
        .command()
        .env_remove("XDG_RUNTIME_DIR")
        .env("TMPDIR", &tmp)
        .args(["status", "--json"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let state: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(state["observed"], true, "{state}");
    // An explicit socket is taken as given: nothing answers there.
    let out = sandbox
        .command()
        .arg("--socket")
        .arg(tmp.join("nowhere.sock"))
        .arg("status")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(3), "{out:?}");
    drop(first);
}

#[test]
fn a_socket_in_a_sticky_shared_directory_is_refused_and_the_directory_is_unchanged() {
    let sandbox = Sandbox::new();
    let shared = sandbox.root.path().join("shared");
    fs::create_dir(&shared).unwrap();
    fs::set_permissions(&shared, fs::Permissions::from_mode(0o1777)).unwrap();
    let mut cmd = sandbox.command();
    cmd.arg("serve").arg("--socket").arg(shared.join("x.sock"));
    let outcome = serve_outcome(&sandbox, cmd);
    let stderr = assert_refused(
        &outcome,
        &[&shared.display().to_string(), "writable by others"],
    );
    assert!(stderr.contains("\"socket_dir_refused\""), "{stderr}");
    assert_eq!(mode(&shared), 0o1777);
    assert_eq!(fs::read_dir(&shared).unwrap().count(), 0, "nothing created");
    assert!(!lock_path(&sandbox).exists());
}

/// Starts a service with its socket at `<workspace>/<name>` in a 0755
/// workspace; returns it with what the workspace held before.
fn served_from_the_workspace(sandbox: &Sandbox, name: &str) -> (Service, Vec<String>) {
    let ws = sandbox.workspace();
    fs::set_permissions(&ws, fs::Permissions::from_mode(0o755)).unwrap();
    let before = listing(&ws);
    let service = Service::start_at(sandbox, ws.join(name), &[], &[]);
    assert_eq!(service.connect().hello()["pid"], service.pid());
    (service, before)
}

fn listing(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

#[test]
fn a_socket_in_the_workspace_leaves_its_mode_and_puts_only_the_socket_there() {
    let sandbox = Sandbox::new();
    let (mut service, before) = served_from_the_workspace(&sandbox, "x.sock");
    let ws = sandbox.workspace();
    assert_eq!(mode(&ws), 0o755);
    let mut with_socket = before.clone();
    with_socket.push("x.sock".into());
    with_socket.sort();
    assert_eq!(listing(&ws), with_socket, "only the socket was added");
    assert!(lock_path(&sandbox).exists());
    service.signal(libc::SIGTERM);
    assert!(service.wait_exit(Duration::from_secs(10)).success());
    assert_eq!(listing(&ws), before, "{}", service.log_text());
    assert_eq!(mode(&ws), 0o755);
}

#[test]
fn a_socket_named_like_cargo_leaves_cargo_lock_byte_identical() {
    let sandbox = Sandbox::new();
    let cargo_lock = sandbox.workspace().join("Cargo.lock");
    let content = b"# This file is automatically @generated by Cargo.\nversion = 3\n";
    fs::write(&cargo_lock, content).unwrap();
    let (mut service, before) = served_from_the_workspace(&sandbox, "Cargo.sock");
    assert_eq!(fs::read(&cargo_lock).unwrap(), content);
    service.signal(libc::SIGTERM);
    assert!(service.wait_exit(Duration::from_secs(10)).success());
    assert_eq!(fs::read(&cargo_lock).unwrap(), content);
    assert_eq!(listing(&sandbox.workspace()), before);
}

#[test]
fn a_symlink_planted_at_the_lock_path_is_not_followed() {
    let sandbox = Sandbox::new();
    let victim = sandbox.root.path().join("victim");
    fs::write(&victim, "precious\n").unwrap();
    let dir = sandbox.state_dir();
    fs::create_dir_all(&dir).unwrap();
    fs::set_permissions(&dir, fs::Permissions::from_mode(0o700)).unwrap();
    std::os::unix::fs::symlink(&victim, lock_path(&sandbox)).unwrap();
    let mut cmd = sandbox.command();
    cmd.arg("serve");
    let outcome = serve_outcome(&sandbox, cmd);
    assert_refused(&outcome, &["instance.lock", "symlink"]);
    assert_eq!(fs::read_to_string(&victim).unwrap(), "precious\n");
    assert!(fs::symlink_metadata(lock_path(&sandbox))
        .unwrap()
        .file_type()
        .is_symlink());
    assert!(!sandbox.default_socket().exists());
}

#[test]
fn a_file_or_symlink_at_the_socket_path_is_not_removed() {
    let sandbox = Sandbox::new();
    let socket = sandbox.default_socket();
    let dir = socket.parent().unwrap();
    fs::create_dir_all(dir).unwrap();
    fs::set_permissions(dir, fs::Permissions::from_mode(0o700)).unwrap();
    // A regular file.
    fs::write(&socket, "not a socket\n").unwrap();
    let mut cmd = sandbox.command();
    cmd.arg("serve");
    assert_refused(&serve_outcome(&sandbox, cmd), &["not a socket"]);
    assert_eq!(fs::read_to_string(&socket).unwrap(), "not a socket\n");
    // A symlink (to a file that must stay, too).
    fs::remove_file(&socket).unwrap();
    let target = sandbox.root.path().join("target");
    fs::write(&target, "kept\n").unwrap();
    std::os::unix::fs::symlink(&target, &socket).unwrap();
    let mut cmd = sandbox.command();
    cmd.arg("serve");
    assert_refused(&serve_outcome(&sandbox, cmd), &["symlink"]);
    assert!(fs::symlink_metadata(&socket)
        .unwrap()
        .file_type()
        .is_symlink());
    assert_eq!(fs::read_to_string(&target).unwrap(), "kept\n");
    // The refused starts left no lock behind either.
    assert!(!lock_path(&sandbox).exists());
}

/// `/proc/<pid>/stat` fields 5 (pgrp) and 22 (start time).
fn pgrp_and_start_time(pid: i32) -> (i32, u64) {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let (_, rest) = stat.rsplit_once(')').unwrap();
    let fields: Vec<&str> = rest.split_whitespace().collect();
    (fields[2].parse().unwrap(), fields[19].parse().unwrap())
}

/// `setsid sleep 60`, once it is `sleep` leading its own group.
fn unrelated_session_leader() -> KilledOnDrop {
    let child = KilledOnDrop(
        Command::new("setsid")
            .args(["sleep", "60"])
            .spawn()
            .expect("setsid"),
    );
    let pid = child.id() as i32;
    wait_until("sleep to lead its group", Duration::from_secs(5), || {
        fs::read_to_string(format!("/proc/{pid}/comm")).is_ok_and(|c| c.trim() == "sleep")
            && pgrp_and_start_time(pid).0 == pid
    });
    child
}

#[test]
fn a_forged_registry_entry_naming_an_unrelated_process_is_not_killed() {
    let sandbox = Sandbox::new();
    let sleeper = unrelated_session_leader();
    let pid = sleeper.id() as i32;
    let (pgid, start_time) = pgrp_and_start_time(pid);
    let prefix = Service::owner_prefix(&sandbox);
    let registry = registry_path(&sandbox);
    fs::create_dir_all(registry.parent().unwrap()).unwrap();
    fs::set_permissions(
        registry.parent().unwrap(),
        fs::Permissions::from_mode(0o700),
    )
    .unwrap();
    let forged = json!({
        "version": 1,
        "service_pid": 1,
        "service_token": format!("{prefix}1-1"),
        "children": [{
            "id": 1, "kind": "sync", "session": null,
            "pid": pid, "pgid": pgid, "start_time": start_time,
            "owner_token": format!("{prefix}1-1.1"), "generation": 1
        }]
    });
    fs::write(&registry, serde_json::to_vec(&forged).unwrap()).unwrap();
    let service = Service::start(&sandbox, &[], &[]);
    let sweep = service.log_events("startup_sweep");
    assert_eq!(sweep.len(), 1, "{}", service.log_text());
    std::thread::sleep(Duration::from_millis(200));
    assert!(is_alive(pid), "the unrelated process was killed: {sweep:?}");
    assert_eq!(sweep[0]["stale_entries"], 1, "{sweep:?}");
    assert!(
        !sweep[0]["groups_killed"]
            .as_str()
            .unwrap_or_default()
            .contains(&pid.to_string()),
        "{sweep:?}"
    );
}

#[test]
fn a_token_holder_whose_instance_is_alive_is_not_swept() {
    let sandbox = Sandbox::new();
    // A process carrying this workspace's token that names a live instance
    // (this test process, with its real start time).
    let me = std::process::id() as i32;
    let (_, my_start) = pgrp_and_start_time(me);
    let token = format!("{}{me}-{my_start}.1", Service::owner_prefix(&sandbox));
    let holder = KilledOnDrop(
        Command::new("sleep")
            .arg("60")
            .env("CGC_FRESH_OWNER", &token)
            .spawn()
            .expect("sleep"),
    );
    let service = Service::start(&sandbox, &[], &[]);
    let sweep = service.log_events("startup_sweep");
    assert_eq!(sweep.len(), 1, "{}", service.log_text());
    std::thread::sleep(Duration::from_millis(200));
    assert!(is_alive(holder.id() as i32), "swept: {sweep:?}");
}

#[test]
fn a_clean_stop_leaves_no_lock_or_registry_and_removes_only_its_own_socket() {
    let (sandbox, fake, mut service, _conn, children) = first_with_children();
    assert!(lock_path(&sandbox).exists());
    wait_until("the registry file", Duration::from_secs(5), || {
        registry_path(&sandbox).exists()
    });
    // First stop: the socket is ours and goes with everything else.
    service.signal(libc::SIGTERM);
    assert!(service.wait_exit(Duration::from_secs(15)).success());
    for pid in children.iter() {
        wait_until("a child to be gone", Duration::from_secs(5), || {
            !is_alive(*pid)
        });
    }
    assert!(!service.socket.exists(), "{}", service.log_text());
    assert_eq!(
        listing(&sandbox.state_dir()),
        vec!["state.json".to_string()]
    );
    // Second service: another socket file takes the path; it is not ours
    // and stays after the stop.
    let mut second = Service::start_with_fake(&sandbox, &fake, &ENV);
    let replacement = sandbox.root.path().join("replacement.sock");
    let _other = UnixListener::bind(&replacement).unwrap();
    fs::rename(&replacement, &second.socket).unwrap();
    wait_until("the taken path to be seen", Duration::from_secs(5), || {
        !second.log_events("socket_path_taken").is_empty()
    });
    second.signal(libc::SIGTERM);
    assert!(second.wait_exit(Duration::from_secs(15)).success());
    assert!(
        fs::symlink_metadata(&second.socket)
            .unwrap()
            .file_type()
            .is_socket(),
        "another's socket was removed: {}",
        second.log_text()
    );
    assert_eq!(
        listing(&sandbox.state_dir()),
        vec!["state.json".to_string()]
    );
}

#[test]
fn a_removed_state_directory_is_rebuilt_the_lock_taken_again_and_a_second_serve_refused() {
    let (sandbox, _fake, first, _conn, children) = first_with_children();
    let dir = sandbox.state_dir();
    // The lock file alone first, then the whole directory.
    fs::remove_file(lock_path(&sandbox)).unwrap();
    wait_until(
        "the lock to be taken again",
        Duration::from_secs(10),
        || first.log_events("instance_relocked").len() == 1,
    );
    let moved = sandbox.root.path().join("state-moved");
    fs::rename(&dir, &moved).unwrap();
    fs::remove_dir_all(&moved).unwrap();
    wait_until(
        "the lock to be taken again",
        Duration::from_secs(10),
        || first.log_events("instance_relocked").len() == 2,
    );
    assert!(lock_path(&sandbox).exists());
    assert_eq!(mode(&dir), 0o700);
    let mut cmd = sandbox.command();
    cmd.arg("serve")
        .arg("--socket")
        .arg(sandbox.root.path().join("b.sock"));
    let outcome = serve_outcome(&sandbox, cmd);
    assert_second_refused_and_first_intact(&sandbox, &first, &children, &outcome);
}

#[test]
fn a_live_socket_at_the_path_is_not_taken_over() {
    // Another workspace's service given the same socket path (simulated by
    // a listener of the test's own).
    let sandbox = Sandbox::new();
    let socket = sandbox.default_socket();
    let dir = socket.parent().unwrap();
    fs::create_dir_all(dir).unwrap();
    fs::set_permissions(dir, fs::Permissions::from_mode(0o700)).unwrap();
    let listener = UnixListener::bind(&socket).unwrap();
    let mut cmd = sandbox.command();
    cmd.arg("serve");
    let stderr = assert_refused(
        &serve_outcome(&sandbox, cmd),
        &["a live service answers on this socket"],
    );
    assert!(stderr.contains("\"socket_path_refused\""), "{stderr}");
    // Still the test's listener, reachable.
    drop(std::os::unix::net::UnixStream::connect(&socket).expect("still listening"));
    drop(listener);
    // The refused start released and removed nothing of its own either.
    assert!(!lock_path(&sandbox).exists(), "the lock file was left");
}
