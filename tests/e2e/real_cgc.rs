//! End-to-end against the real CodeGraphContext CLI (0.6.13, Kùzu backend,
//! an isolated HOME per test): "fresh" must be true of the graph itself.
//!
//! The CLI comes from `scripts/install-cgc.sh` via `CGC_FRESH_REAL_CGC`. When
//! it is not set these tests say so and return — unless
//! `CGC_FRESH_REQUIRE_REAL_CGC` is set (the test script sets it), in which
//! case its absence is a failure.

// A watcher's SIGINT disposition is reset between fork and exec (`pre_exec`).
#![allow(unsafe_code)]

use std::fs;
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::{json, Value};

use crate::graph_backend::FalkorServer;
use crate::support::{real_cgc, strategies_run, wait_until, Conn, Sandbox, Service};

/// A small Python project, indexed by the real CLI in the sandbox's HOME.
struct Project {
    sandbox: Sandbox,
    cgc: PathBuf,
    /// Extra environment for every cgc call (e.g. a FalkorDB server).
    env: Vec<(String, String)>,
    /// Root options for every cgc call.
    global: Vec<String>,
}

impl Project {
    fn new(cgc: PathBuf) -> Project {
        Project::with(cgc, Vec::new(), vec!["--db".into(), "kuzudb".into()])
    }

    fn with(cgc: PathBuf, env: Vec<(String, String)>, global: Vec<String>) -> Project {
        let sandbox = Sandbox::new();
        let ws = sandbox.workspace();
        fs::create_dir_all(ws.join("pkg")).unwrap();
        fs::write(ws.join("pkg/__init__.py"), "").unwrap();
        fs::write(
            ws.join("pkg/alpha.py"),
            "def old_name(x):\n    return helper(x) + 1\n\n\ndef helper(x):\n    return x * 2\n",
        )
        .unwrap();
        fs::write(
            ws.join("pkg/beta.py"),
            "from pkg.alpha import old_name\n\n\ndef beta_main():\n    return old_name(3)\n",
        )
        .unwrap();
        let project = Project {
            sandbox,
            cgc,
            env,
            global,
        };
        let out = project.cgc_cmd(&["index", "."]).output().unwrap();
        assert!(
            out.status.success(),
            "cgc index failed: {}",
            String::from_utf8_lossy(&out.stdout)
        );
        project.assert_graph(&["old_name"], &[], "indexed");
        project
    }

    fn cgc_cmd(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new(&self.cgc);
        cmd.current_dir(self.sandbox.workspace())
            .env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("HOME", self.sandbox.home())
            .env("COLUMNS", "1000")
            .envs(self.env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
            .args(&self.global)
            .args(args)
            .stdin(Stdio::null());
        cmd
    }

    /// Asks the graph which functions have this exact name.
    fn functions_named(&self, name: &str) -> Vec<Value> {
        let cypher = format!(
            "MATCH (f:Function) WHERE f.name = '{name}' RETURN f.name AS name, f.path AS path"
        );
        crate::graph_backend::query_rows(&self.cgc_cmd(&["query", &cypher]).output().unwrap())
    }

    /// Asserts that the graph has exactly one function named each of
    /// `present` and none named any of `absent`.
    fn assert_graph(&self, present: &[&str], absent: &[&str], why: &str) {
        for name in present {
            let found = self.functions_named(name);
            assert_eq!(found.len(), 1, "{why}: `{name}` in the graph: {found:?}");
        }
        for name in absent {
            let found = self.functions_named(name);
            assert!(
                found.is_empty(),
                "{why}: `{name}` still in the graph: {found:?}"
            );
        }
    }

    fn service(&self, extra: &[(&str, &str)]) -> Service {
        let cgc = self.cgc.display().to_string();
        let global = self.global.join(" ");
        let mut env = vec![
            ("CGC_EXECUTABLE", cgc.as_str()),
            ("CGC_GLOBAL_ARGS", global.as_str()),
            ("CGC_FRESHNESS_BATCH_MS", "100"),
            ("CGC_FRESHNESS_SETTLE_MS", "5000"),
        ];
        env.extend_from_slice(extra);
        env.extend(self.env.iter().map(|(k, v)| (k.as_str(), v.as_str())));
        Service::start(&self.sandbox, &[], &env)
    }

    /// Another process's `cgc watch .` on this project (holding Kùzu's
    /// lock), returned once it printed its ready line.
    fn start_watcher(&self) -> ForeignWatcher {
        let mut cmd = self.cgc_cmd(&["watch", "."]);
        // A test run started in the background by a non-interactive shell
        // inherits SIGINT ignored, and Python then installs no handler for
        // it: restore the default so the SIGINT below stops the watcher.
        // SAFETY: only async-signal-safe calls between fork and exec.
        unsafe {
            cmd.pre_exec(|| {
                libc::signal(libc::SIGINT, libc::SIG_DFL);
                Ok(())
            });
        }
        let mut child = cmd
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut reader = std::io::BufReader::new(child.stdout.take().unwrap());
        let mut line = String::new();
        while !line.contains("Monitoring for file changes") {
            line.clear();
            let read = std::io::BufRead::read_line(&mut reader, &mut line).unwrap();
            assert!(read > 0, "watch ended early");
        }
        // Keep reading: a closed pipe would kill the watcher on its next line.
        std::thread::spawn(move || std::io::copy(&mut reader, &mut std::io::sink()));
        ForeignWatcher { child }
    }

    fn path(&self, rel: &str) -> PathBuf {
        self.sandbox.workspace().join(rel)
    }
}

fn harness(service: &Service) -> Conn {
    let mut conn = service.connect();
    conn.hello();
    conn.subscribe();
    conn.send(json!({"type": "session_start", "session": "s1", "reason": "startup"}));
    conn
}

/// An agent edit as the harness reports it: the call, the write, the result.
fn agent_edit(conn: &mut Conn, tool: &str, path: &str, write: impl FnOnce()) {
    conn.send(json!({"type": "tool_call", "session": "s1", "tool": tool, "paths": [path]}));
    write();
    conn.send(json!({"type": "tool_result", "session": "s1", "tool": tool, "ok": true}));
}

/// The agent renames function `from` to `to` in `pkg/alpha.py`, reported as
/// an `edit` the way the harness does.
fn agent_renames(conn: &mut Conn, project: &Project, from: &str, to: &str) {
    let alpha = project.path("pkg/alpha.py");
    agent_edit(conn, "edit", "pkg/alpha.py", || rename_in(&alpha, from, to));
}

fn sync_spawns(service: &Service) -> usize {
    service
        .log_events("spawn")
        .iter()
        .filter(|e| e["kind"] == "Sync")
        .count()
}

#[test]
fn a_renamed_function_reaches_the_graph_before_fresh_is_reported() {
    let Some(cgc) = real_cgc() else { return };
    let project = Project::new(cgc);
    let service = project.service(&[]);
    let mut conn = harness(&service);
    agent_renames(&mut conn, &project, "old_name", "new_name");
    conn.wait_status("possibly_stale");
    let (fresh, _) = conn.wait_status("fresh");
    assert!(fresh["last_synced_at"].is_u64());
    project.assert_graph(&["new_name"], &["old_name"], "the rename reached the graph");
}

#[test]
fn a_deleted_file_and_an_added_file_reach_the_graph_before_fresh() {
    let Some(cgc) = real_cgc() else { return };
    let project = Project::new(cgc);
    let service = project.service(&[]);
    let mut conn = harness(&service);
    let beta = project.path("pkg/beta.py");
    agent_edit(&mut conn, "remove_file", "pkg/beta.py", || {
        fs::remove_file(&beta).unwrap()
    });
    let gamma = project.path("pkg/gamma.py");
    agent_edit(&mut conn, "write", "pkg/gamma.py", || {
        fs::write(&gamma, "def gamma_added():\n    return 7\n").unwrap()
    });
    conn.wait_status("fresh");
    project.assert_graph(
        &["gamma_added"],
        &["beta_main"],
        "the deletion and the addition reached the graph",
    );
}

#[test]
fn a_real_watcher_holding_the_database_makes_the_sync_skip_as_busy_naming_it() {
    let Some(cgc) = real_cgc() else { return };
    let project = Project::new(cgc);
    let watcher = project.start_watcher();
    let service = project.service(&[]);
    let mut conn = harness(&service);
    agent_edit(&mut conn, "edit", "pkg/alpha.py", || {});
    conn.wait_status("skipped_busy");
    let notice = conn.wait_seen("busy notice", |f| f["condition"] == "sync_skipped_busy");
    let text = notice["text"].as_str().unwrap();
    assert!(
        text.contains(&format!("pid {}", watcher.id())),
        "the notice names the watcher: {text}"
    );
    assert!(text.contains("watch"), "{text}");
    assert_eq!(sync_spawns(&service), 0, "no cgc was spawned to find out");
}

#[test]
fn cgcs_own_mcp_server_holding_the_database_gets_a_busy_notice_that_says_what_to_use_instead() {
    let Some(cgc) = real_cgc() else { return };
    let project = Project::new(cgc);
    // `cgc mcp start` as an agent runs it: stdin kept open, one answered
    // query so the database is open (and locked) before the edit.
    let mut server = crate::support::KilledOnDrop(
        project
            .cgc_cmd(&["mcp", "start"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let mut stdin = server.stdin.take().unwrap();
    let mut stdout = std::io::BufReader::new(server.stdout.take().unwrap());
    let query = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
        "name": "execute_cypher_query",
        "arguments": {"cypher_query": "MATCH (f:Function) RETURN count(f) AS n"}}});
    std::io::Write::write_all(&mut stdin, format!("{query}\n").as_bytes()).unwrap();
    let mut line = String::new();
    while !line.contains("\"id\":1") && !line.contains("\"id\": 1") {
        line.clear();
        let read = std::io::BufRead::read_line(&mut stdout, &mut line).unwrap();
        assert!(read > 0, "cgc mcp start ended early");
    }
    assert!(line.contains("result"), "{line}");

    let service = project.service(&[]);
    let mut conn = harness(&service);
    agent_edit(&mut conn, "edit", "pkg/alpha.py", || {});
    conn.wait_status("skipped_busy");
    let notice = conn.wait_seen("busy notice", |f| f["condition"] == "sync_skipped_busy");
    let text = notice["text"].as_str().unwrap();
    assert!(
        text.contains(&format!("pid {}", server.id())),
        "the notice names CGC's MCP server: {text}"
    );
    assert!(text.contains("mcp start"), "{text}");
    assert!(
        text.contains("configure `cgc-fresh mcp` in its place"),
        "the notice says what to use instead: {text}"
    );
    drop(stdin);
}

#[test]
fn the_index_strategy_is_reported_not_applied_never_fresh() {
    let Some(cgc) = real_cgc() else { return };
    let project = Project::new(cgc);
    let service = project.service(&[("CGC_SYNC_STRATEGY", "index")]);
    let mut conn = harness(&service);
    agent_renames(&mut conn, &project, "old_name", "new_name");
    conn.wait_seen("not applied", |f| f["condition"] == "sync_not_applied");
    let state = conn.request(json!({"type": "status"}), 9);
    assert_eq!(state["status"], "possibly_stale", "{state}");
    assert_eq!(conn.count_seen(|f| f["status"] == "fresh"), 0);
    // And indeed the graph did not change: this is the false fresh made visible.
    project.assert_graph(
        &["old_name"],
        &["new_name"],
        "the index strategy applied nothing",
    );
}

#[test]
fn an_edit_during_a_real_sync_stays_stale_and_causes_exactly_one_follow_up() {
    let Some(cgc) = real_cgc() else { return };
    let project = Project::new(cgc);
    let service = project.service(&[]);
    let mut conn = harness(&service);
    agent_renames(&mut conn, &project, "old_name", "mid_name");
    conn.wait_status("syncing");
    agent_renames(&mut conn, &project, "mid_name", "final_name");
    conn.wait_status("fresh");
    // The first completion recorded its time but claimed nothing: the
    // follow-up was already running (syncing, with a last sync time) before
    // the one and only fresh claim.
    let states: Vec<&Value> = conn
        .history
        .iter()
        .filter(|f| f["type"] == "state")
        .collect();
    let first_fresh = states.iter().position(|f| f["status"] == "fresh").unwrap();
    let follow_up = states
        .iter()
        .position(|f| f["syncing"] == true && f["last_synced_at"].is_u64())
        .unwrap_or_else(|| panic!("no follow-up after an uncovering completion: {states:?}"));
    assert!(
        follow_up < first_fresh,
        "fresh was claimed before the follow-up: {states:?}"
    );
    wait_until(
        "the follow-up to be counted",
        Duration::from_secs(5),
        || sync_spawns(&service) >= 2,
    );
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(
        sync_spawns(&service),
        2,
        "one sync plus exactly one follow-up"
    );
    project.assert_graph(
        &["final_name"],
        &["mid_name"],
        "the follow-up applied the last edit",
    );
}

/// Spec, "Verified watcher owns freshness": among the `frames` that came
/// while the verified watcher applied an edit, none said
/// `possibly_stale`, carried a `stale_since`, or was a staleness notice.
fn assert_no_stale_episode(frames: &[Value]) {
    assert!(
        frames.iter().all(|f| f["status"] != "possibly_stale"
            && f["stale_since"].is_null()
            && f["condition"] != "possibly_stale"),
        "a stale episode under the verified watcher: {frames:?}"
    );
}

/// The watcher's line that it applied `path` reached the service (and
/// `fresh`, which waits for it, came after).
fn assert_applied_reported(service: &Service, path: &str) {
    let reports = service.log_events("watcher_report");
    assert!(
        reports
            .iter()
            .any(|e| e["report"].as_str().is_some_and(|r| r.contains(path))),
        "fresh without the watcher's applied line for {path}: {reports:?}"
    );
}

fn rename_in(path: &std::path::Path, from: &str, to: &str) {
    let text = fs::read_to_string(path).unwrap().replace(from, to);
    fs::write(path, text).unwrap();
}

#[test]
fn on_mode_verifies_a_real_watcher_and_an_edit_reaches_the_graph_through_it() {
    let Some(cgc) = real_cgc() else { return };
    let project = Project::new(cgc);
    let service = project.service(&[("CGC_FRESHNESS_WATCH", "on")]);
    let mut conn = harness(&service);
    let (fresh, _) = conn.wait_status("fresh");
    assert_eq!(fresh["watcher"]["state"], "verified", "{fresh}");
    agent_renames(&mut conn, &project, "old_name", "watched_name");
    // CGC's watcher debounces for 2 s: the edit is not in the graph yet,
    // and the status must not say so — but the watcher is applying it, so
    // it opens no stale episode (spec, "Verified watcher owns freshness").
    let state = conn.request(json!({"type": "status"}), 3);
    assert_eq!(state["status"], "syncing", "{state}");
    assert!(state["stale_since"].is_null(), "{state}");
    assert_eq!(state["watcher"]["state"], "verified", "{state}");
    // Fresh again once the watcher logged the file applied.
    let (fresh, between) = conn.wait_status("fresh");
    assert_eq!(fresh["watcher"]["state"], "verified", "{fresh}");
    assert_no_stale_episode(&between);
    assert_applied_reported(&service, "pkg/alpha.py");
    // Kùzu allows one process at a time: end the session (the watcher
    // stops with SIGINT and frees the database), then ask the graph.
    conn.request(json!({"type": "session_shutdown", "session": "s1"}), 4);
    wait_until("the watcher to stop", Duration::from_secs(10), || {
        service
            .log_events("child_exited")
            .iter()
            .any(|e| e["kind"] == "Watcher")
    });
    assert_eq!(
        sync_spawns(&service),
        0,
        "the watcher, not a sync, applied the edit"
    );
    project.assert_graph(
        &["watched_name"],
        &["old_name"],
        "the edit reached the graph",
    );
}

#[test]
fn an_edit_during_a_real_kuzu_watchers_start_up_restarts_it_and_reaches_the_graph() {
    let Some(cgc) = real_cgc() else { return };
    let project = Project::new(cgc);
    let service = project.service(&[("CGC_FRESHNESS_WATCH", "on")]);
    let mut conn = harness(&service);
    conn.recv_until("the watcher verifying", |f| {
        f["type"] == "state" && f["watcher"]["state"] == "verifying"
    });
    // While it imports and reconciles: its observer is not scheduled yet.
    agent_renames(&mut conn, &project, "old_name", "startup_name");
    let (fresh, before) = conn.wait_status("fresh");
    assert!(before.iter().all(|f| f["status"] != "fresh"));
    assert!(
        before.iter().any(|f| f["watcher"]["state"] == "restarting"),
        "{before:?}"
    );
    // The new process took Kùzu's lock after the old one let it go.
    let watchers: Vec<_> = service
        .log_events("spawn")
        .into_iter()
        .filter(|e| e["kind"] == "Watcher")
        .collect();
    assert_eq!(watchers.len(), 2, "{watchers:?}");
    assert_eq!(fresh["watcher"]["state"], "verified", "{fresh}");
    conn.request(json!({"type": "session_shutdown", "session": "s1"}), 4);
    wait_until("the watcher to stop", Duration::from_secs(10), || {
        service
            .log_events("child_exited")
            .iter()
            .filter(|e| e["kind"] == "Watcher")
            .count()
            == 2
    });
    assert_eq!(
        sync_spawns(&service),
        0,
        "the restart applied it, not a sync"
    );
    project.assert_graph(&["startup_name"], &["old_name"], "the restart applied it");
}

#[test]
fn a_real_watcher_still_reconciling_past_the_liveness_window_is_not_verified() {
    let Some(cgc) = real_cgc() else { return };
    let project = Project::new(cgc);
    // The start-up reconcile (imports, database, every file) takes well
    // over a second; the liveness window is 200 ms.
    let service = project.service(&[
        ("CGC_FRESHNESS_WATCH", "on"),
        ("CGC_FRESHNESS_WATCHER_LIVENESS_MS", "200"),
    ]);
    let mut conn = harness(&service);
    std::thread::sleep(Duration::from_millis(700));
    let state = conn.request(json!({"type": "status"}), 2);
    assert_ne!(state["status"], "fresh", "{state}");
    assert_eq!(state["watcher"]["state"], "verifying", "{state}");
    let (fresh, before) = conn.wait_status("fresh");
    assert!(before.iter().all(|f| f["status"] != "fresh"));
    assert_eq!(fresh["watcher"]["state"], "verified", "{fresh}");
    let verified = service.log_events("watcher_verified");
    assert_eq!(verified.len(), 1, "{verified:?}");
    assert_eq!(
        verified[0]["why"],
        "printed the ready line and stayed alive through the stabilization probe",
        "{verified:?}"
    );
}

#[test]
fn auto_mode_declines_an_embedded_backend_on_the_real_cli() {
    let Some(cgc) = real_cgc() else { return };
    let project = Project::new(cgc);
    project.sandbox.mark_indexed();
    let service = project.service(&[
        ("CGC_FRESHNESS_WATCH", "auto"),
        ("DEFAULT_DATABASE", "kuzudb"),
    ]);
    let mut conn = harness(&service);
    conn.wait_seen("declined", |f| f["condition"] == "watcher_declined_backend");
    assert!(service
        .log_events("spawn")
        .iter()
        .all(|e| e["kind"] != "Watcher"));
}

#[test]
fn auto_mode_with_neo4j_and_no_server_reaches_the_honest_not_verified_state() {
    let Some(cgc) = real_cgc() else { return };
    let project = Project::new(cgc);
    project.sandbox.mark_indexed();
    // No `--db` this time: CGC must pick neo4j from the environment.
    let service = project.service(&[
        ("CGC_FRESHNESS_WATCH", "auto"),
        ("DEFAULT_DATABASE", "neo4j"),
        ("CGC_GLOBAL_ARGS", ""),
    ]);
    let mut conn = harness(&service);
    let (state, _) = conn.wait_status("not_verified");
    assert!(
        state["last_error"].as_str().unwrap().contains("code 1"),
        "{state}"
    );
    conn.wait_seen("not verified notice", |f| {
        f["condition"] == "watcher_not_verified"
    });
    assert_eq!(conn.count_seen(|f| f["status"] == "fresh"), 0);
}

/// A managed watcher on FalkorDB Lite whose server cannot start (its port
/// taken by another program, as a slow start on a loaded machine makes
/// CodeGraphContext give up on it after 5 s): CGC goes on with an empty
/// KùzuDB database and says so at WARNING, which the watcher's logging
/// prints. The watcher is stopped and never verified: `not_verified`, the
/// error names the other backend, one notice, never `fresh`.
#[test]
fn a_falkordb_lite_watcher_that_went_on_with_another_backend_is_never_verified() {
    let Some(cgc) = crate::support::real_cgc_lite() else {
        return;
    };
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .unwrap()
        .port();
    let project = Project::with(
        cgc,
        vec![("FALKORDB_PORT".to_string(), port.to_string())],
        Vec::new(),
    );
    let _taken = std::net::TcpListener::bind(("127.0.0.1", port)).unwrap();
    let service = project.service(&[("CGC_FRESHNESS_WATCH", "on")]);
    let mut conn = harness(&service);
    let (state, _) = conn.wait_status("not_verified");
    assert!(
        state["last_error"]
            .as_str()
            .is_some_and(|e| e.contains("another database backend")),
        "{state}"
    );
    conn.wait_seen("not verified notice", |f| {
        f["condition"] == "watcher_not_verified"
    });
    assert_eq!(conn.count_seen(|f| f["status"] == "fresh"), 0);
    assert_eq!(
        conn.count_seen(|f| f["condition"] == "watcher_not_verified"),
        1
    );
}

#[test]
fn on_mode_while_another_real_watcher_holds_the_database_is_busy_naming_it() {
    let Some(cgc) = real_cgc() else { return };
    let project = Project::new(cgc);
    let watcher = project.start_watcher();
    let service = project.service(&[("CGC_FRESHNESS_WATCH", "on")]);
    let mut conn = harness(&service);
    let notice = conn.wait_seen("busy", |f| f["condition"] == "watcher_skipped_busy");
    assert!(
        notice["text"]
            .as_str()
            .unwrap()
            .contains(&format!("pid {}", watcher.id())),
        "{notice}"
    );
    assert!(
        service
            .log_events("spawn")
            .iter()
            .all(|e| e["kind"] != "Watcher"),
        "no watcher spawned"
    );
}

/// Another process's real `cgc watch`, stopped when dropped: SIGINT (the
/// real CLI then exits cleanly and releases its lock), SIGKILL if it has not
/// exited within 30 s, so a failing test never leaves it behind.
struct ForeignWatcher {
    child: std::process::Child,
}

impl ForeignWatcher {
    fn id(&self) -> u32 {
        self.child.id()
    }
}

impl Drop for ForeignWatcher {
    fn drop(&mut self) {
        crate::support::send_signal(self.child.id() as i32, libc::SIGINT);
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        while std::time::Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn auto_mode_with_a_real_falkordb_server_verifies_and_an_edit_reaches_the_graph() {
    let Some(cgc) = real_cgc() else { return };
    let Some(server) = FalkorServer::start() else {
        return;
    };
    let project = Project::with(cgc, server.env(), Vec::new());
    project.sandbox.mark_indexed();
    let service = project.service(&[("CGC_FRESHNESS_WATCH", "auto")]);
    let mut conn = harness(&service);
    let (fresh, _) = conn.wait_status("fresh");
    assert_eq!(fresh["watcher"]["state"], "verified", "{fresh}");
    assert_eq!(fresh["backend"]["kind"], "falkordb-remote", "{fresh}");
    agent_renames(&mut conn, &project, "old_name", "served_name");
    // Not fresh while the watcher has not applied it (it debounces 2 s),
    // and no stale episode either: the watcher is applying it.
    let state = conn.request(json!({"type": "status"}), 8);
    assert_eq!(state["status"], "syncing", "{state}");
    assert!(state["stale_since"].is_null(), "{state}");
    // A server backend has no lock: the moment it says fresh, the graph
    // must have the edit.
    let (_, between) = conn.wait_status("fresh");
    assert_no_stale_episode(&between);
    assert_applied_reported(&service, "pkg/alpha.py");
    project.assert_graph(
        &["served_name"],
        &["old_name"],
        "the watcher applied the edit",
    );
    assert_eq!(
        sync_spawns(&service),
        0,
        "the watcher applied it, not a sync"
    );
    assert_eq!(
        conn.request(json!({"type": "status"}), 9)["status"],
        "fresh"
    );
}

/// The case, on a server backend (no lock: the graph can be asked
/// while the watcher runs): `watch=on`, a 4 s liveness window, a 6-module
/// workspace; one edit while CGC's start-up reconcile runs (its observer is
/// not scheduled yet, so CGC alone never applies it) and one right after
/// the status first says `fresh`, then a `sed -i` through `bash`. Each time
/// the status says `fresh`, a query through the real CLI finds the edits.
#[test]
fn on_mode_with_a_4s_liveness_window_says_fresh_only_when_a_query_finds_each_edit() {
    let Some(cgc) = real_cgc() else { return };
    let Some(server) = FalkorServer::start() else {
        return;
    };
    let env = vec![
        (
            "DEFAULT_DATABASE".to_string(),
            "falkordb-remote".to_string(),
        ),
        ("FALKORDB_HOST".to_string(), "127.0.0.1".to_string()),
        ("FALKORDB_PORT".to_string(), server.port.to_string()),
    ];
    let project = Project::with(cgc, env, Vec::new());
    for (module, function) in [
        ("gamma", "gamma_main"),
        ("delta", "delta_main"),
        ("eps", "eps_main"),
    ] {
        fs::write(
            project.path(&format!("pkg/{module}.py")),
            format!("from pkg.alpha import helper\n\n\ndef {function}():\n    return helper(1)\n"),
        )
        .unwrap();
    }
    let service = project.service(&[
        ("CGC_FRESHNESS_WATCH", "on"),
        ("CGC_FRESHNESS_WATCHER_LIVENESS_MS", "4000"),
    ]);
    let mut conn = harness(&service);
    conn.recv_until("the watcher verifying", |f| {
        f["type"] == "state" && f["watcher"]["state"] == "verifying"
    });
    // During its start-up (Python imports, then the reconcile).
    agent_renames(&mut conn, &project, "old_name", "startup_name");
    let (fresh, before) = conn.wait_status("fresh");
    assert!(
        before.iter().all(|f| f["status"] != "fresh"),
        "fresh before the start-up edit was applied: {before:?}"
    );
    assert_eq!(fresh["watcher"]["state"], "verified", "{fresh}");
    project.assert_graph(
        &["startup_name", "gamma_main", "eps_main"],
        &["old_name"],
        "at the first fresh",
    );
    assert!(
        service
            .log_events("decision")
            .iter()
            .any(|e| e["decision"] == "restart_watcher"),
        "the watcher was restarted for the start-up edit"
    );
    // Right after the first `fresh`.
    let alpha = project.path("pkg/alpha.py");
    agent_edit(&mut conn, "edit", "pkg/alpha.py", || {
        rename_in(&alpha, "def helper(", "def after_fresh_helper(")
    });
    let state = conn.request(json!({"type": "status"}), 8);
    assert_eq!(state["status"], "syncing", "{state}");
    let (fresh, before) = conn.wait_status("fresh");
    assert!(before.iter().all(|f| f["status"] != "fresh"));
    assert_no_stale_episode(&before);
    assert_eq!(fresh["watcher"]["state"], "verified", "{fresh}");
    project.assert_graph(
        &["after_fresh_helper", "startup_name"],
        &["helper", "old_name"],
        "at the second fresh",
    );
    // A `sed -i` through `bash` (a temporary file renamed over the
    // module): compared with the tree at the command's call, it waits for
    // the watcher like any edit.
    agent_runs_bash(
        &mut conn,
        &project,
        "sed -i 's/def beta_main(/def sed_main(/' pkg/beta.py",
    );
    let (applying, _) = conn.wait_status("syncing");
    assert_eq!(applying["watcher"]["state"], "verified", "{applying}");
    let (fresh, before) = conn.wait_status("fresh");
    assert!(before.iter().all(|f| f["status"] != "fresh"));
    assert_no_stale_episode(&before);
    assert_eq!(fresh["watcher"]["state"], "verified", "{fresh}");
    project.assert_graph(&["sed_main"], &["beta_main"], "at the third fresh");
    assert_eq!(
        sync_spawns(&service),
        0,
        "the watcher applied them all, not a sync"
    );
}

// ---- Edits the harness does not describe -------------------------------------

/// A shell command as the harness reports it: the call, the command, the
/// result.
fn agent_runs_bash(conn: &mut Conn, project: &Project, script: &str) {
    conn.send(json!({"type": "tool_call", "session": "s1", "tool": "bash", "paths": []}));
    let status = Command::new("sh")
        .arg("-c")
        .arg(script)
        .current_dir(project.sandbox.workspace())
        .status()
        .unwrap();
    assert!(status.success(), "{script}");
    conn.send(json!({"type": "tool_result", "session": "s1", "tool": "bash", "ok": true}));
}

/// The service with the default strategy, `incremental` (the tests about
/// syncs in this file name `reconcile`, see `Service::spawn_at`).
fn incremental_service(project: &Project) -> Service {
    project.service(&[("CGC_SYNC_STRATEGY", "incremental")])
}

/// The first sync has no manifest and takes a baseline; every later one
/// must have run `incremental` (no silent fallback).
fn assert_incremental_after_the_first(service: &Service) {
    let ran = strategies_run(service);
    assert!(
        ran.len() >= 2 && ran[0] == "baseline" && ran[1..].iter().all(|s| s == "incremental"),
        "{ran:?}; fallbacks: {:?}; reports: {:?}",
        service.log_events("sync_strategy_fallback"),
        service.log_events("sync_report"),
    );
}

/// A first edit synced to `fresh`, so that the manifest exists.
fn synced_once(project: &Project, service: &Service, conn: &mut Conn) {
    agent_renames(conn, project, "old_name", "first_name");
    conn.wait_status("fresh");
    wait_until("the manifest", Duration::from_secs(30), || {
        !service.log_events("manifest_written").is_empty()
    });
}

/// The same project on a FalkorDB server of its own (returned with it; the
/// server stops when dropped), or `None` when there is no real CLI or no
/// server script (see `FalkorServer::start`).
fn falkordb_project() -> Option<(FalkorServer, Project)> {
    let cgc = real_cgc()?;
    let server = FalkorServer::start()?;
    let project = Project::with(cgc, server.env(), Vec::new());
    Some((server, project))
}

/// The same project on LadybugDB (`--db ladybugdb`), or `None` without the
/// real CLI.
fn ladybug_project() -> Option<Project> {
    let cgc = real_cgc()?;
    Some(Project::with(
        cgc,
        Vec::new(),
        vec!["--db".into(), "ladybugdb".into()],
    ))
}

/// The same project on FalkorDB Lite: the Python 3.12 `cgc`, no backend
/// named (CGC picks FalkorDB Lite itself), or `None` without it.
fn falkordb_lite_project() -> Option<Project> {
    let cgc = crate::support::real_cgc_lite()?;
    Some(Project::with(cgc, Vec::new(), Vec::new()))
}

#[test]
fn a_file_renamed_by_mv_through_bash_reaches_the_graph_before_fresh() {
    let Some(cgc) = real_cgc() else { return };
    mv_through_bash_reaches_the_graph(&Project::new(cgc));
}

#[test]
fn a_file_renamed_by_mv_through_bash_reaches_the_graph_before_fresh_on_a_falkordb_server() {
    let Some((_server, project)) = falkordb_project() else {
        return;
    };
    mv_through_bash_reaches_the_graph(&project);
}

#[test]
fn a_file_renamed_by_mv_through_bash_reaches_the_graph_before_fresh_on_ladybugdb() {
    let Some(project) = ladybug_project() else {
        return;
    };
    mv_through_bash_reaches_the_graph(&project);
}

#[test]
fn a_file_renamed_by_mv_through_bash_reaches_the_graph_before_fresh_on_falkordb_lite() {
    let Some(project) = falkordb_lite_project() else {
        return;
    };
    mv_through_bash_reaches_the_graph(&project);
}

fn mv_through_bash_reaches_the_graph(project: &Project) {
    let service = incremental_service(project);
    let mut conn = harness(&service);
    synced_once(project, &service, &mut conn);
    agent_runs_bash(&mut conn, project, "mv pkg/beta.py pkg/gamma.py");
    conn.wait_status("possibly_stale");
    conn.wait_status("fresh");
    let compared = &service.log_events("shell_compared")[0];
    assert_eq!(compared["changed"], 2, "{compared}");
    let found = project.functions_named("beta_main");
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(
        found[0]["path"].as_str().unwrap().ends_with("pkg/gamma.py"),
        "the moved file's function lives in its new path: {found:?}"
    );
    assert_incremental_after_the_first(&service);
}

#[test]
fn a_sed_in_place_through_bash_reaches_the_graph_before_fresh() {
    let Some(cgc) = real_cgc() else { return };
    sed_through_bash_reaches_the_graph(&Project::new(cgc));
}

#[test]
fn a_sed_in_place_through_bash_reaches_the_graph_before_fresh_on_a_falkordb_server() {
    let Some((_server, project)) = falkordb_project() else {
        return;
    };
    sed_through_bash_reaches_the_graph(&project);
}

#[test]
fn a_sed_in_place_through_bash_reaches_the_graph_before_fresh_on_ladybugdb() {
    let Some(project) = ladybug_project() else {
        return;
    };
    sed_through_bash_reaches_the_graph(&project);
}

#[test]
fn a_sed_in_place_through_bash_reaches_the_graph_before_fresh_on_falkordb_lite() {
    let Some(project) = falkordb_lite_project() else {
        return;
    };
    sed_through_bash_reaches_the_graph(&project);
}

fn sed_through_bash_reaches_the_graph(project: &Project) {
    let service = incremental_service(project);
    let mut conn = harness(&service);
    synced_once(project, &service, &mut conn);
    agent_runs_bash(
        &mut conn,
        project,
        "sed -i 's/def helper(/def sed_helper(/' pkg/alpha.py",
    );
    conn.wait_status("possibly_stale");
    conn.wait_status("fresh");
    project.assert_graph(&["sed_helper"], &["helper"], "sed -i reached the graph");
    assert_incremental_after_the_first(&service);
    // A read-only command afterwards changes nothing and syncs nothing.
    let spawns = sync_spawns(&service);
    agent_runs_bash(&mut conn, project, "grep -r sed_helper pkg > /dev/null");
    wait_until("the second comparison", Duration::from_secs(30), || {
        service.log_events("shell_compared").len() >= 2
    });
    assert_eq!(service.log_events("shell_compared")[1]["changed"], 0);
    let state = conn.request(json!({"type": "status"}), 9);
    assert_eq!(state["status"], "fresh", "{state}");
    assert_eq!(sync_spawns(&service), spawns);
}

#[test]
fn an_edit_through_a_symlinked_workspace_path_reaches_the_graph_before_fresh() {
    let Some(cgc) = real_cgc() else { return };
    symlinked_edit_reaches_the_graph(&Project::new(cgc));
}

#[test]
fn an_edit_through_a_symlinked_workspace_path_reaches_the_graph_before_fresh_on_a_falkordb_server()
{
    let Some((_server, project)) = falkordb_project() else {
        return;
    };
    symlinked_edit_reaches_the_graph(&project);
}

#[test]
fn an_edit_through_a_symlinked_workspace_path_reaches_the_graph_before_fresh_on_ladybugdb() {
    let Some(project) = ladybug_project() else {
        return;
    };
    symlinked_edit_reaches_the_graph(&project);
}

#[test]
fn an_edit_through_a_symlinked_workspace_path_reaches_the_graph_before_fresh_on_falkordb_lite() {
    let Some(project) = falkordb_lite_project() else {
        return;
    };
    symlinked_edit_reaches_the_graph(&project);
}

fn symlinked_edit_reaches_the_graph(project: &Project) {
    let real = fs::canonicalize(project.sandbox.workspace()).unwrap();
    let link = fs::canonicalize(project.sandbox.root.path())
        .unwrap()
        .join("proj-link");
    std::os::unix::fs::symlink(&real, &link).unwrap();
    let service = incremental_service(project);
    let mut conn = harness(&service);
    // The first sync reconciles (no manifest yet); the edit under test is
    // the second, incremental one.
    synced_once(project, &service, &mut conn);
    let through_link = link.join("pkg/alpha.py");
    let shown = through_link.display().to_string();
    agent_edit(&mut conn, "edit", &shown, || {
        rename_in(&through_link, "first_name", "linked_name")
    });
    conn.wait_status("possibly_stale");
    conn.wait_status("fresh");
    project.assert_graph(
        &["linked_name"],
        &["first_name"],
        "the edit through the link reached the graph",
    );
    assert_incremental_after_the_first(&service);
}
