//! What an adversarial trial found around the record and the protocol's
//! edges: a state file that outlived a `fresh` claim, an offline status
//! that printed one, an orderly shutdown recorded as an error, frames whose
//! replies the documentation promised, a scripted session that could not
//! outlive one `send`, and a missing `cgc` nobody was told about.

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::{json, Value};

use crate::support::{
    agent_edit, fast_env, indexed_with_fake, open_session_as, wait_until, FakeCgc, Sandbox, Service,
};

/// `cgc-fresh status --json` for the sandbox: exit code and parsed stdout.
fn status_json(sandbox: &Sandbox) -> (Option<i32>, Value) {
    let out = sandbox
        .command()
        .args(["status", "--json"])
        .output()
        .expect("status");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let value = serde_json::from_str(stdout.trim())
        .unwrap_or_else(|e| panic!("status --json printed no JSON ({e}): {stdout:?}"));
    (out.status.code(), value)
}

/// A small tmpfs mounted over a directory for the life of the guard, so a
/// test can fill a real file system and see real `ENOSPC`s.
struct SmallFileSystem {
    at: PathBuf,
}

impl SmallFileSystem {
    /// `None` (and a note on stderr) when this user may not mount.
    fn mount(at: &Path, size: &str) -> Option<SmallFileSystem> {
        let status = Command::new("mount")
            .args([
                "-t",
                "tmpfs",
                "-o",
                &format!("size={size},mode=0700"),
                "tmpfs",
            ])
            .arg(at)
            .status()
            .expect("mount(8)");
        if !status.success() {
            assert_ne!(
                nix::unistd::geteuid().as_raw(),
                0,
                "root could not mount a tmpfs at {}",
                at.display()
            );
            eprintln!("skipped: mounting a tmpfs needs root");
            return None;
        }
        Some(SmallFileSystem {
            at: at.to_path_buf(),
        })
    }

    /// Writes a filler file until the file system is full.
    fn fill(&self) {
        let mut filler = fs::File::create(self.at.join("filler")).expect("filler");
        let chunk = [0u8; 4096];
        while filler.write_all(&chunk).is_ok() {}
        let _ = filler.sync_all();
    }
}

impl Drop for SmallFileSystem {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.at).status();
    }
}

#[test]
fn a_failed_state_write_withdraws_a_fresh_record_and_offline_status_never_says_fresh() {
    let sandbox = Sandbox::new();
    sandbox.mark_indexed();
    let Some(disk) = SmallFileSystem::mount(&sandbox.state_home(), "256k") else {
        return;
    };
    let fake = FakeCgc::new(&sandbox, json!({}));
    let mut service = Service::start_with_fake(&sandbox, &fake, &fast_env(&[]));
    let mut conn = open_session_as(&service, "pi", "s1");
    agent_edit(&mut conn, "s1", "a.py");
    conn.wait_status("fresh");
    let path = sandbox.state_file();
    wait_until("fresh on disk", Duration::from_secs(10), || {
        fs::read_to_string(&path).is_ok_and(|text| text.contains("\"fresh\""))
    });
    // The disk fills up; the next change cannot be written.
    disk.fill();
    agent_edit(&mut conn, "s1", "b.py");
    conn.wait_status("possibly_stale");
    wait_until(
        "the failed write to be logged",
        Duration::from_secs(10),
        || !service.log_events("state_write_failed").is_empty(),
    );
    let on_disk = fs::read_to_string(&path).unwrap_or_default();
    assert!(
        !on_disk.contains("\"fresh\""),
        "a failed write left a fresh record: {on_disk}"
    );
    assert_eq!(service.log_events("state_file_withdrawn").len(), 1);
    // Whatever is on disk, a status without a service never says fresh,
    // and has the live frame's shape.
    service.signal(libc::SIGKILL);
    service.wait_exit(Duration::from_secs(10));
    let (code, offline) = status_json(&sandbox);
    assert_eq!(code, Some(3), "{offline}");
    assert_eq!(offline["type"], "state", "{offline}");
    assert_eq!(offline["observed"], false, "{offline}");
    assert_ne!(offline["status"], "fresh", "{offline}");
    assert_eq!(offline["syncing"], false, "{offline}");
    drop(disk);
}

#[test]
fn offline_status_json_has_the_live_shape_and_never_repeats_a_recorded_fresh() {
    let (sandbox, _fake, mut service) = indexed_with_fake(json!({}), &fast_env(&[]));
    let mut conn = open_session_as(&service, "pi", "s1");
    agent_edit(&mut conn, "s1", "a.py");
    conn.wait_status("fresh");
    let (code, live) = status_json(&sandbox);
    assert_eq!(code, Some(0));
    assert_eq!(live["observed"], true, "{live}");
    assert_eq!(live["status"], "fresh", "{live}");
    let path = sandbox.state_file();
    wait_until("fresh on disk", Duration::from_secs(10), || {
        fs::read_to_string(&path).is_ok_and(|text| text.contains("\"fresh\""))
    });
    // Killed: nothing observes the workspace any more, whatever the file says.
    service.signal(libc::SIGKILL);
    service.wait_exit(Duration::from_secs(10));
    assert!(fs::read_to_string(&path).unwrap().contains("\"fresh\""));
    let (code, offline) = status_json(&sandbox);
    assert_eq!(code, Some(3));
    assert_eq!(offline["observed"], false, "{offline}");
    assert_eq!(offline["status"], "unknown", "{offline}");
    assert_eq!(
        offline["detail"],
        "not observed (no service running); last recorded status fresh"
    );
    assert_eq!(offline["last_synced_at"], live["last_synced_at"]);
    // Every key of the offline frame is one the live frame can carry.
    let live_keys = [
        "type",
        "workspace",
        "status",
        "last_synced_at",
        "stale_since",
        "last_error",
        "edit_epoch",
        "syncing",
        "watcher",
        "backend",
        "detail",
        "warnings",
        "observed",
    ];
    for key in offline.as_object().unwrap().keys() {
        assert!(live_keys.contains(&key.as_str()), "unexpected key {key}");
    }
    for key in ["type", "workspace", "status", "edit_epoch", "syncing"] {
        assert!(offline.get(key).is_some(), "{key} missing: {offline}");
    }
}

#[test]
fn a_sync_stopped_by_an_orderly_shutdown_is_not_recorded_as_an_error() {
    // Not indexed: the consent listing (`cgc list`) runs first and hangs,
    // as the trial's did when the service was stopped.
    let sandbox = Sandbox::new();
    let fake = FakeCgc::new(&sandbox, json!({"list": {"steps": [{"hang": true}]}}));
    let mut service = Service::start_with_fake(&sandbox, &fake, &fast_env(&[]));
    let mut conn = open_session_as(&service, "pi", "s1");
    agent_edit(&mut conn, "s1", "a.py");
    conn.wait_status("syncing");
    wait_until("the listing to run", Duration::from_secs(10), || {
        !fake.invocations().is_empty()
    });
    service.signal(libc::SIGTERM);
    let status = service.wait_exit(Duration::from_secs(15));
    assert!(status.success(), "{status}");
    let record: Value =
        serde_json::from_str(&fs::read_to_string(sandbox.state_file()).unwrap()).unwrap();
    assert!(
        record.get("last_error").is_none(),
        "an orderly stop was recorded as an error: {record}"
    );
    // Nor is one shown after a restart.
    let service = Service::start_with_fake(&sandbox, &fake, &fast_env(&[]));
    let state = service.connect().request(json!({"type": "status"}), 1);
    assert!(state.get("last_error").is_none(), "{state}");
}

#[test]
fn every_frame_with_an_id_gets_exactly_one_reply_and_events_without_one_get_none() {
    let (_sandbox, _fake, service) = indexed_with_fake(json!({}), &fast_env(&[]));
    let mut conn = service.connect();
    let frames = [
        json!({"type": "hello", "client": "e2e", "instance": "i1", "protocol": 1}),
        json!({"type": "session_start", "session": "s1", "reason": "startup"}),
        json!({"type": "tool_call", "session": "s1", "tool": "read", "paths": []}),
        json!({"type": "tool_result", "session": "s1", "tool": "read", "ok": true}),
        json!({"type": "status"}),
        json!({"type": "config"}),
        json!({"type": "subscribe"}),
        json!({"type": "session_shutdown", "session": "s1"}),
        json!({"type": "sync"}),
    ];
    for (n, frame) in frames.iter().enumerate() {
        let mut frame = frame.clone();
        frame["id"] = json!(n + 1);
        conn.send(frame);
    }
    // A final request: everything before it has been answered by then.
    let last = conn.request(json!({"type": "status"}), 100);
    assert_eq!(last["type"], "state");
    for n in 1..=frames.len() {
        let replies: Vec<&Value> = conn.history.iter().filter(|f| f["id"] == n).collect();
        assert_eq!(replies.len(), 1, "frame {n}: {replies:?}");
        assert_ne!(replies[0]["type"], "error", "frame {n}: {}", replies[0]);
    }
    // Events without an id are not answered (a harness pipelines them).
    let mut quiet = service.connect();
    quiet.hello();
    quiet.send(json!({"type": "session_start", "session": "s2", "reason": "startup"}));
    quiet.send(json!({"type": "tool_call", "session": "s2", "tool": "read", "paths": []}));
    quiet.send(json!({"type": "tool_result", "session": "s2", "tool": "read", "ok": true}));
    let reply = quiet.request(json!({"type": "status"}), 7);
    assert_eq!(reply["type"], "state");
    assert_eq!(quiet.history.len(), 2, "{:?}", quiet.history);
    // An id no integer type holds is named as such.
    quiet.send_raw(b"{\"id\":18446744073709551616,\"type\":\"status\"}\n");
    let error = quiet.recv();
    assert_eq!(error["code"], "bad_request", "{error}");
    assert!(
        error["message"]
            .as_str()
            .unwrap()
            .contains("integer too large"),
        "{error}"
    );
}

#[test]
fn an_event_for_a_session_that_is_not_live_is_answered_unknown_session_and_an_edit_still_counts() {
    let (_sandbox, _fake, service) = indexed_with_fake(json!({}), &fast_env(&[]));
    let mut conn = service.connect();
    conn.hello();
    let result = conn.request(
        json!({"type": "tool_result", "session": "ghost", "tool": "edit", "ok": true}),
        1,
    );
    assert_eq!(result["type"], "error", "{result}");
    assert_eq!(result["code"], "unknown_session", "{result}");
    let call = conn.request(
        json!({"type": "tool_call", "session": "ghost", "tool": "edit", "paths": ["a.py"]}),
        2,
    );
    assert_eq!(call["code"], "unknown_session", "{call}");
    assert!(
        call["message"].as_str().unwrap().contains("possibly stale"),
        "{call}"
    );
    let state = conn.request(json!({"type": "status"}), 3);
    assert_eq!(state["status"], "possibly_stale", "{state}");
    // An ended session is not live either.
    conn.request(
        json!({"type": "session_start", "session": "s1", "reason": "startup"}),
        4,
    );
    conn.request(json!({"type": "session_shutdown", "session": "s1"}), 5);
    let late = conn.request(
        json!({"type": "tool_result", "session": "s1", "tool": "edit", "ok": true}),
        6,
    );
    assert_eq!(late["code"], "unknown_session", "{late}");
}

/// Runs `cgc-fresh send` with `args` (and `stdin`), returning the exit code
/// and the printed lines as frames.
fn send(
    sandbox: &Sandbox,
    service: &Service,
    args: &[&str],
    stdin: &str,
) -> (Option<i32>, Vec<Value>) {
    let mut child = sandbox
        .command()
        .arg("--socket")
        .arg(&service.socket)
        .arg("send")
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("send");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(stdin.as_bytes())
        .expect("write stdin");
    let out = child.wait_with_output().expect("wait");
    let frames = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|line| serde_json::from_str(line).unwrap_or_else(|e| panic!("{line:?}: {e}")))
        .collect();
    (out.status.code(), frames)
}

#[test]
fn send_scripts_a_session_over_one_connection_from_arguments_or_standard_input() {
    let (sandbox, fake, service) = indexed_with_fake(json!({}), &fast_env(&[]));
    let mut watcher = service.connect();
    watcher.hello();
    watcher.subscribe();
    let (code, replies) = send(
        &sandbox,
        &service,
        &[
            r#"{"type":"session_start","session":"script","reason":"startup"}"#,
            r#"{"type":"tool_call","session":"script","tool":"edit","paths":["a.py"]}"#,
            r#"{"type":"tool_result","session":"script","tool":"edit","ok":true}"#,
        ],
        "",
    );
    assert_eq!(code, Some(0), "{replies:?}");
    let acks: Vec<&Value> = replies.iter().filter(|f| f["type"] == "ack").collect();
    assert_eq!(acks.len(), 3, "{replies:?}");
    for (n, ack) in acks.iter().enumerate() {
        assert_eq!(ack["id"], format!("send-{}", n + 1));
    }
    // The result was taken for a live session: the edit settled, so the
    // status is no longer held back by an unsettled call.
    watcher.wait_status("possibly_stale");
    // The same from standard input, with one frame the service refuses.
    let (code, replies) = send(
        &sandbox,
        &service,
        &[],
        "{\"type\":\"session_start\",\"session\":\"piped\",\"reason\":\"startup\"}\n\n\
         {\"id\":9,\"type\":\"status\"}\n\
         {\"type\":\"tool_result\",\"session\":\"nobody\",\"tool\":\"edit\",\"ok\":true}\n\
         not json\n",
    );
    assert_eq!(code, Some(4), "{replies:?}");
    let types: Vec<&str> = replies
        .iter()
        .filter(|f| f.get("id").is_some() || f["type"] == "error")
        .map(|f| f["type"].as_str().unwrap())
        .collect();
    assert_eq!(types, ["ack", "state", "error", "error"], "{replies:?}");
    assert!(replies.iter().any(|f| f["code"] == "unknown_session"));
    assert!(replies.iter().any(|f| f["code"] == "bad_json"));
    drop(fake);
}

#[test]
fn a_cgc_that_is_not_on_path_is_warned_at_start_and_in_every_status() {
    let sandbox = Sandbox::new();
    let service = Service::start(
        &sandbox,
        &[],
        &[("CGC_EXECUTABLE", "cgc-that-is-not-installed")],
    );
    // Said at start, before any client asked anything.
    wait_until("the start-up warning", Duration::from_secs(10), || {
        !service.log_events("cgc_not_found").is_empty()
    });
    let warned = service.log_events("cgc_not_found");
    assert_eq!(warned.len(), 1, "{}", service.log_text());
    assert_eq!(warned[0]["executable"], "cgc-that-is-not-installed");
    let (code, state) = status_json(&sandbox);
    assert_eq!(code, Some(0));
    let warnings = state["warnings"].as_array().expect("warnings");
    assert!(
        warnings[0]
            .as_str()
            .unwrap()
            .contains("cgc-that-is-not-installed"),
        "{state}"
    );
    let text = sandbox.command().arg("status").output().unwrap();
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(
        text.contains("warning: `cgc-that-is-not-installed`"),
        "{text}"
    );
    // A found executable raises no warning.
    let other = Sandbox::new();
    let fake = FakeCgc::new(&other, json!({}));
    let quiet = Service::start_with_fake(&other, &fake, &[]);
    let state = quiet.connect().request(json!({"type": "status"}), 1);
    assert!(state.get("warnings").is_none(), "{state}");
    assert!(quiet.log_events("cgc_not_found").is_empty());
}
