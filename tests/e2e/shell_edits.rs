//! Edits the harness does not describe: a shell tool's changes found by
//! comparing the tree with the manifest of the last successful sync, paths
//! named through a symlink, and drift a session left behind when it ended
//! before its sync started. Against the fake `cgc`.

use std::fs;
use std::path::Path;
use std::time::Duration;

use serde_json::{json, Value};

use crate::support::{agent_edit, fast_env, indexed_with_fake, open_session, Conn, Service};

fn bash_call(conn: &mut Conn, session: &str) {
    conn.send(json!({"type": "tool_call", "session": session, "tool": "bash", "paths": []}));
}

fn bash_result(conn: &mut Conn, session: &str) {
    conn.send(json!({"type": "tool_result", "session": session, "tool": "bash", "ok": true}));
}

/// What `sed -i` does: the new content in a temp file renamed over the old.
fn sed_in_place(path: &Path, text: &str) {
    let temp = path.with_extension("sed-tmp");
    fs::write(&temp, text).expect("write");
    fs::rename(&temp, path).expect("rename");
}

fn write(root: &Path, path: &str, text: &str) {
    let path = root.join(path);
    fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
    fs::write(path, text).expect("write");
}

/// Waits for the service to log the `n`th comparison; returns it.
fn nth_comparison(service: &Service, n: usize) -> Value {
    crate::support::wait_until("a shell comparison", Duration::from_secs(20), || {
        service.log_events("shell_compared").len() >= n
    });
    service.log_events("shell_compared")[n - 1].clone()
}

/// A sandbox with a few source files whose first sync succeeded, so a
/// manifest exists.
fn synced_once(
    env: &[(&str, &str)],
) -> (
    crate::support::Sandbox,
    crate::support::FakeCgc,
    Service,
    Conn,
) {
    let (sandbox, fake, service) = indexed_with_fake(json!({}), &fast_env(env));
    let ws = sandbox.workspace();
    write(&ws, "src/a.py", "def a():\n    return 1\n");
    write(&ws, "src/b.py", "def b():\n    return 2\n");
    write(&ws, "README.md", "# proj\n");
    std::thread::sleep(Duration::from_millis(100));
    let mut conn = open_session(&service, "s1");
    agent_edit(&mut conn, "s1", "src/a.py");
    conn.wait_status("fresh");
    crate::support::wait_until("the manifest", Duration::from_secs(20), || {
        !service.log_events("manifest_written").is_empty()
    });
    assert_eq!(fake.invocations().len(), 1);
    (sandbox, fake, service, conn)
}

#[test]
fn a_bash_command_that_changed_a_file_makes_the_graph_possibly_stale_and_syncs_it() {
    let (sandbox, fake, service, _first) = synced_once(&[]);
    let ws = sandbox.workspace();
    // A second session, whose one-time staleness notice is still due.
    let mut conn = open_session(&service, "s2");
    bash_call(&mut conn, "s2");
    sed_in_place(&ws.join("src/b.py"), "def b_renamed():\n    return 2\n");
    bash_result(&mut conn, "s2");
    let (stale, _) = conn.wait_status("possibly_stale");
    assert!(stale["stale_since"].as_u64().is_some(), "{stale}");
    let notice = conn.wait_seen("a staleness notice", |f| {
        f["type"] == "notice" && f["condition"] == "possibly_stale"
    });
    assert!(
        notice["text"].as_str().unwrap().contains("`bash`"),
        "{notice}"
    );
    let compared = nth_comparison(&service, 1);
    assert_eq!(compared["changed"], 1, "{compared}");
    conn.wait_status("fresh");
    assert_eq!(fake.invocations().len(), 2, "one sync for the shell edit");
}

#[test]
fn a_bash_command_that_changed_nothing_leaves_the_graph_fresh_and_syncs_nothing() {
    let (_sandbox, fake, service, mut conn) = synced_once(&[]);
    let before = conn.history.len();
    bash_call(&mut conn, "s1");
    bash_result(&mut conn, "s1");
    let compared = nth_comparison(&service, 1);
    assert_eq!(compared["changed"], 0, "{compared}");
    std::thread::sleep(Duration::from_millis(300));
    // Every push made before this reply has been read by now.
    let state = conn.request(json!({"type": "status"}), 7);
    assert_eq!(state["status"], "fresh", "{state}");
    let other: Vec<&Value> = conn.history[before..]
        .iter()
        .filter(|f| f["type"] == "state" && f["status"] != "fresh")
        .collect();
    assert!(other.is_empty(), "no other status was pushed: {other:?}");
    assert_eq!(fake.invocations().len(), 1, "no sync");
}

#[test]
fn without_a_manifest_a_bash_command_counts_as_an_edit_of_the_whole_workspace() {
    let (sandbox, fake, service) = indexed_with_fake(json!({}), &fast_env(&[]));
    write(&sandbox.workspace(), "src/a.py", "x = 1\n");
    let mut conn = open_session(&service, "s1");
    bash_call(&mut conn, "s1");
    bash_result(&mut conn, "s1");
    conn.wait_status("possibly_stale");
    let compared = nth_comparison(&service, 1);
    assert_eq!(compared["whole_workspace"], true, "{compared}");
    conn.wait_status("fresh");
    assert_eq!(fake.invocations().len(), 1);
    // That sync recorded the manifest: the next command is compared.
    crate::support::wait_until("the manifest", Duration::from_secs(20), || {
        !service.log_events("manifest_written").is_empty()
    });
    bash_call(&mut conn, "s1");
    bash_result(&mut conn, "s1");
    let compared = nth_comparison(&service, 2);
    assert_eq!(compared["changed"], 0, "{compared}");
}

#[test]
fn an_edit_reported_through_a_symlinked_workspace_path_counts() {
    let (sandbox, fake, service) = indexed_with_fake(json!({}), &fast_env(&[]));
    let real = fs::canonicalize(sandbox.workspace()).expect("canonical");
    write(&real, "src/a.py", "x = 1\n");
    let link = fs::canonicalize(sandbox.root.path())
        .expect("root")
        .join("proj-link");
    std::os::unix::fs::symlink(&real, &link).expect("symlink");
    let mut conn = open_session(&service, "s1");
    let through_link = link.join("src/a.py").display().to_string();
    agent_edit(&mut conn, "s1", &through_link);
    conn.wait_status("possibly_stale");
    conn.wait_status("fresh");
    assert_eq!(fake.invocations().len(), 1);
    // A file that does not exist yet, through the link and a `..`.
    let new_file = link.join("src/new/../gen.py").display().to_string();
    agent_edit(&mut conn, "s1", &new_file);
    conn.wait_status("possibly_stale");
    conn.wait_status("fresh");
    assert_eq!(fake.invocations().len(), 2);
}

#[test]
fn a_session_that_ended_right_after_its_edit_leaves_the_sync_to_the_next_session() {
    let (_sandbox, fake, service) =
        indexed_with_fake(json!({}), &fast_env(&[("CGC_FRESHNESS_BATCH_MS", "400")]));
    let mut conn = open_session(&service, "s1");
    agent_edit(&mut conn, "s1", "src/a.py");
    // Pi's `/new`, 70 ms after the edit: before the sync's batching window.
    std::thread::sleep(Duration::from_millis(70));
    conn.send(json!({"type": "session_shutdown", "session": "s1", "reason": "new"}));
    conn.wait_status("possibly_stale");
    std::thread::sleep(Duration::from_millis(800));
    assert!(fake.invocations().is_empty(), "nobody paid for a sync");

    let mut next = open_session(&service, "s2");
    next.wait_status("fresh");
    assert_eq!(fake.invocations().len(), 1, "the new session's first drift");
}
