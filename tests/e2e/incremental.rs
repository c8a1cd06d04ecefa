//! The `incremental` sync strategy: against the real CLI (0.6.13, Kùzu, an
//! isolated HOME per test) `fresh` is reported only once a query shows the
//! new graph, and the synced graph equals a from-scratch index of the same
//! tree; against the fake, a failed API probe falls back to `reconcile` and
//! says so.
//!
//! Real-CLI tests need `CGC_FRESH_REAL_CGC` (see `real_cgc.rs`).

use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde_json::{json, Value};

use crate::support::{
    args_of, fast_env, indexed_with_fake, open_session, real_cgc, Sandbox, Service,
};

/// The interpreter of the real `cgc` (its `#!` line).
pub(crate) fn cgc_python(cgc: &Path) -> PathBuf {
    let text = fs::read_to_string(cgc).unwrap();
    let first = text.lines().next().unwrap();
    PathBuf::from(first.trim_start_matches("#!").trim())
}

fn cgc_cmd(cgc: &Path, ws: &Path, home: &Path, args: &[&str]) -> Command {
    let mut cmd = Command::new(cgc);
    cmd.current_dir(ws)
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("HOME", home)
        .env("COLUMNS", "1000")
        .args(["--db", "kuzudb"])
        .args(args)
        .stdin(Stdio::null());
    cmd
}

pub(crate) fn index(cgc: &Path, ws: &Path, home: &Path) {
    let out = cgc_cmd(cgc, ws, home, &["index", "."]).output().unwrap();
    assert!(
        out.status.success(),
        "cgc index failed: {}",
        String::from_utf8_lossy(&out.stdout)
    );
}

/// Rows of a Cypher query, as JSON objects.
fn query(cgc: &Path, ws: &Path, home: &Path, cypher: &str) -> Vec<Value> {
    let out = cgc_cmd(cgc, ws, home, &["query", cypher]).output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "cgc query failed: {stdout}");
    let start = stdout
        .find('[')
        .unwrap_or_else(|| panic!("no JSON in query output: {stdout}"));
    serde_json::from_str::<Vec<Value>>(stdout[start..].trim())
        .unwrap_or_else(|e| panic!("{e}: {stdout}"))
}

fn names(rows: &[Value], column: &str) -> BTreeSet<String> {
    rows.iter()
        .filter_map(|row| row[column].as_str().map(str::to_string))
        .collect()
}

pub(crate) fn functions(cgc: &Path, ws: &Path, home: &Path, name: &str) -> usize {
    query(
        cgc,
        ws,
        home,
        &format!("MATCH (f:Function) WHERE f.name = '{name}' RETURN f.name AS name"),
    )
    .len()
}

fn callers_of(cgc: &Path, ws: &Path, home: &Path, callee: &str) -> BTreeSet<String> {
    let rows = query(
        cgc,
        ws,
        home,
        &format!(
            "MATCH (a:Function)-[:CALLS]->(b:Function) WHERE b.name = '{callee}' \
             RETURN a.name AS caller"
        ),
    );
    names(&rows, "caller")
}

fn parents_of(cgc: &Path, ws: &Path, home: &Path, class: &str) -> BTreeSet<String> {
    let rows = query(
        cgc,
        ws,
        home,
        &format!(
            "MATCH (c:Class)-[:INHERITS]->(p) WHERE c.name = '{class}' RETURN p.name AS parent"
        ),
    );
    names(&rows, "parent")
}

pub(crate) fn write(ws: &Path, rel: &str, text: &str) {
    let path = ws.join(rel);
    fs::create_dir_all(path.parent().unwrap()).unwrap();
    fs::write(path, text).unwrap();
}

pub(crate) fn service(sandbox: &Sandbox, cgc: &Path) -> Service {
    let cgc = cgc.display().to_string();
    Service::start(
        sandbox,
        &[],
        &[
            ("CGC_EXECUTABLE", cgc.as_str()),
            ("CGC_GLOBAL_ARGS", "--db kuzudb"),
            ("CGC_SYNC_STRATEGY", "incremental"),
            ("CGC_FRESHNESS_BATCH_MS", "100"),
            ("CGC_FRESHNESS_SETTLE_MS", "5000"),
            ("CGC_FRESHNESS_MIN_SYNC_GAP_MS", "0"),
            ("CGC_FRESHNESS_MAX_SYNCS_PER_SESSION", "10"),
        ],
    )
}

/// One agent tool call touching `paths`, its writes, its result.
pub(crate) fn agent_batch(conn: &mut crate::support::Conn, paths: &[&str], write: impl FnOnce()) {
    conn.send(json!({"type": "tool_call", "session": "s1", "tool": "edit", "paths": paths}));
    write();
    conn.send(json!({"type": "tool_result", "session": "s1", "tool": "edit", "ok": true}));
}

/// Waits for the next `fresh` after a `syncing` state (frames received
/// from now on only).
pub(crate) fn wait_synced_fresh(conn: &mut crate::support::Conn) -> Value {
    // The real CLI's reconcile prints nothing for as long as it runs.
    let quiet = std::time::Duration::from_secs(300);
    conn.recv_until_within("a sync", quiet, |f| {
        f["type"] == "state" && f["syncing"] == true
    });
    conn.recv_until_within("fresh after the sync", quiet, |f| {
        f["type"] == "state" && f["status"] == "fresh" && f["syncing"] == false
    })
    .0
}

/// The first sync of a service has no manifest to tell what changed since
/// the graph was built: it reconciles the whole workspace and records one.
/// A person's `sync` makes that first sync before the edits under test.
pub(crate) fn baseline_sync(conn: &mut crate::support::Conn, service: &Service) {
    conn.request(json!({"type": "sync"}), 77);
    wait_synced_fresh(conn);
    assert_eq!(strategies_run(service), ["reconcile"], "no manifest yet");
}

/// The strategy each sync ran, in order (as configured, or as a fallback).
pub(crate) fn strategies_run(service: &Service) -> Vec<String> {
    service
        .log_text()
        .lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .filter(|e| e["event"] == "sync_strategy" || e["event"] == "sync_strategy_fallback")
        .filter_map(|e| e["strategy"].as_str().map(str::to_string))
        .collect()
}

#[test]
fn renames_deletions_additions_and_base_changes_reach_the_graph_before_fresh() {
    let Some(cgc) = real_cgc() else { return };
    let sandbox = Sandbox::new();
    let (ws, home) = (sandbox.workspace(), sandbox.home());
    write(&ws, "pkg/__init__.py", "");
    write(
        &ws,
        "pkg/alpha.py",
        "def old_name(x):\n    return helper(x) + 1\n\n\ndef helper(x):\n    return x * 2\n",
    );
    write(
        &ws,
        "pkg/beta.py",
        "from pkg.alpha import old_name\n\n\ndef beta_main():\n    return old_name(3)\n",
    );
    write(
        &ws,
        "pkg/shapes.py",
        "class Base:\n    pass\n\n\nclass Other:\n    pass\n",
    );
    write(
        &ws,
        "pkg/child.py",
        "from pkg.shapes import Base, Other\n\n\nclass Child(Base):\n    pass\n",
    );
    index(&cgc, &ws, &home);
    assert_eq!(
        callers_of(&cgc, &ws, &home, "old_name"),
        ["beta_main".to_string()].into()
    );
    assert_eq!(
        parents_of(&cgc, &ws, &home, "Child"),
        ["Base".to_string()].into()
    );

    let service = service(&sandbox, &cgc);
    let mut conn = open_session(&service, "s1");
    baseline_sync(&mut conn, &service);

    // A rename of a called function, in its module and at its call site.
    agent_batch(&mut conn, &["pkg/alpha.py", "pkg/beta.py"], || {
        for rel in ["pkg/alpha.py", "pkg/beta.py"] {
            let text = fs::read_to_string(ws.join(rel)).unwrap();
            fs::write(ws.join(rel), text.replace("old_name", "new_name")).unwrap();
        }
    });
    let fresh = wait_synced_fresh(&mut conn);
    assert!(
        fresh["detail"]
            .as_str()
            .unwrap_or("")
            .contains("incremental"),
        "{fresh}"
    );
    assert_eq!(functions(&cgc, &ws, &home, "old_name"), 0);
    assert_eq!(functions(&cgc, &ws, &home, "new_name"), 1);
    assert_eq!(
        callers_of(&cgc, &ws, &home, "new_name"),
        ["beta_main".to_string()].into()
    );

    // A deletion.
    agent_batch(&mut conn, &["pkg/beta.py"], || {
        fs::remove_file(ws.join("pkg/beta.py")).unwrap()
    });
    wait_synced_fresh(&mut conn);
    assert_eq!(functions(&cgc, &ws, &home, "beta_main"), 0);
    assert!(callers_of(&cgc, &ws, &home, "new_name").is_empty());

    // An added module calling into an existing one.
    agent_batch(&mut conn, &["pkg/gamma.py"], || {
        write(
            &ws,
            "pkg/gamma.py",
            "from pkg.alpha import helper\n\n\ndef gamma_added():\n    return helper(7)\n",
        )
    });
    wait_synced_fresh(&mut conn);
    assert_eq!(functions(&cgc, &ws, &home, "gamma_added"), 1);
    assert!(
        callers_of(&cgc, &ws, &home, "helper").contains("gamma_added"),
        "the new module's call is linked"
    );

    // A changed base class.
    agent_batch(&mut conn, &["pkg/child.py"], || {
        let text = fs::read_to_string(ws.join("pkg/child.py")).unwrap();
        fs::write(
            ws.join("pkg/child.py"),
            text.replace("class Child(Base)", "class Child(Other)"),
        )
        .unwrap();
    });
    wait_synced_fresh(&mut conn);
    assert_eq!(
        parents_of(&cgc, &ws, &home, "Child"),
        ["Other".to_string()].into()
    );

    let ran = strategies_run(&service);
    assert_eq!(
        ran,
        [
            "reconcile",
            "incremental",
            "incremental",
            "incremental",
            "incremental"
        ],
        "every sync after the baseline ran incremental: {ran:?}"
    );
}

/// Generated modules: each has a helper, a compute calling it and the
/// previous module's export, an export, and a class deriving from the
/// previous module's class.
pub(crate) fn write_modules(ws: &Path, count: usize) {
    write(ws, "pkg/__init__.py", "");
    for i in 0..count {
        let (import, upstream, base) = match i.checked_sub(1) {
            Some(p) => (
                format!("from pkg.mod_{p:03} import m{p:03}_export, Widget{p:03}\n\n\n"),
                format!("m{p:03}_export(x)"),
                format!("Widget{p:03}"),
            ),
            None => (String::new(), "0".to_string(), "object".to_string()),
        };
        write(
            ws,
            &format!("pkg/mod_{i:03}.py"),
            &format!(
                "\"\"\"Generated module {i}.\"\"\"\n{import}\
                 def m{i:03}_helper(x):\n    return x * {i} + 1\n\n\n\
                 def m{i:03}_compute(x):\n    return m{i:03}_helper(x) + {upstream}\n\n\n\
                 def m{i:03}_export(x):\n    return m{i:03}_compute(x) - 1\n\n\n\
                 class Widget{i:03}({base}):\n    def run(self, x):\n        return m{i:03}_export(x)\n"
            ),
        );
    }
}

/// The canonical dump of the Kùzu graph under `home` (see `graph_dump.py`).
pub(crate) fn dump(python: &Path, home: &Path) -> (BTreeSet<String>, BTreeSet<String>) {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/../../tests/e2e/graph_dump.py");
    let db = home.join(".codegraphcontext/global/db/kuzudb");
    let out = Command::new(python).arg(script).arg(&db).output().unwrap();
    assert!(
        out.status.success(),
        "graph dump failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let value: Value = serde_json::from_slice(&out.stdout).unwrap();
    let set = |key: &str| {
        value[key]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_str().unwrap().to_string())
            .collect::<BTreeSet<String>>()
    };
    (set("nodes"), set("relationships"))
}

#[test]
fn an_incremental_sync_leaves_the_graph_a_from_scratch_index_would_build() {
    let Some(cgc) = real_cgc() else { return };
    let python = cgc_python(&cgc);
    let sandbox = Sandbox::new();
    let (ws, home) = (sandbox.workspace(), sandbox.home());
    write_modules(&ws, 30);
    index(&cgc, &ws, &home);

    let service = service(&sandbox, &cgc);
    let mut conn = open_session(&service, "s1");
    baseline_sync(&mut conn, &service);
    let touched = [
        "pkg/mod_005.py",
        "pkg/mod_020.py",
        "pkg/mod_new.py",
        "pkg/mod_025.py",
        "pkg/sub/__init__.py",
        "pkg/sub/mod_025.py",
        "pkg/mod_012.py",
    ];
    agent_batch(&mut conn, &touched, || {
        // Rename a called function (its callers in mod_006 stay unresolved).
        let text = fs::read_to_string(ws.join("pkg/mod_005.py")).unwrap();
        fs::write(
            ws.join("pkg/mod_005.py"),
            text.replace("m005_export", "m005_exported"),
        )
        .unwrap();
        // Delete an imported module.
        fs::remove_file(ws.join("pkg/mod_020.py")).unwrap();
        // Add one that calls into an existing one.
        write(
            &ws,
            "pkg/mod_new.py",
            "from pkg.mod_003 import m003_export\n\n\ndef brand_new(x):\n    return m003_export(x) + 2\n",
        );
        // Move one.
        write(&ws, "pkg/sub/__init__.py", "");
        fs::rename(ws.join("pkg/mod_025.py"), ws.join("pkg/sub/mod_025.py")).unwrap();
        // Change a base class.
        let text = fs::read_to_string(ws.join("pkg/mod_012.py")).unwrap();
        fs::write(
            ws.join("pkg/mod_012.py"),
            text.replace("class Widget012(Widget011)", "class Widget012(Widget003)")
                .replace(
                    "import m011_export, Widget011\n",
                    "import m011_export, Widget011\nfrom pkg.mod_003 import Widget003\n",
                ),
        )
        .unwrap();
    });
    wait_synced_fresh(&mut conn);
    assert_eq!(strategies_run(&service), ["reconcile", "incremental"]);
    drop(conn);
    drop(service);

    let (synced_nodes, synced_rels) = dump(&python, &home);
    let scratch_home = sandbox.root.path().join("scratch-home");
    fs::create_dir_all(&scratch_home).unwrap();
    index(&cgc, &ws, &scratch_home);
    let (scratch_nodes, scratch_rels) = dump(&python, &scratch_home);
    assert!(synced_rels.iter().any(|r| r.contains("brand_new")));
    let diff = |a: &BTreeSet<String>, b: &BTreeSet<String>| {
        a.difference(b).take(10).cloned().collect::<Vec<_>>()
    };
    assert_eq!(
        (synced_nodes.len(), synced_rels.len()),
        (scratch_nodes.len(), scratch_rels.len()),
        "only synced: {:?} / {:?}; only from scratch: {:?} / {:?}",
        diff(&synced_nodes, &scratch_nodes),
        diff(&synced_rels, &scratch_rels),
        diff(&scratch_nodes, &synced_nodes),
        diff(&scratch_rels, &synced_rels),
    );
    assert_eq!(synced_nodes, scratch_nodes, "nodes differ");
    assert_eq!(synced_rels, scratch_rels, "relationships differ");
}

#[test]
fn a_failed_api_probe_falls_back_to_reconcile_and_says_so() {
    let sandbox_probe = tempfile::tempdir().unwrap();
    let stub = sandbox_probe.path().join("python");
    fs::write(
        &stub,
        "#!/bin/sh\necho 'CGC_FRESH_RESULT {\"ok\": false, \"mode\": \"probe\", \"missing\": [\"codegraphcontext.core.watcher.RepositoryEventHandler\"]}'\nexit 3\n",
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    fs::set_permissions(&stub, fs::Permissions::from_mode(0o755)).unwrap();
    let stub_path = stub.display().to_string();
    let (sandbox, fake, service) = indexed_with_fake(
        json!({}),
        &fast_env(&[
            ("CGC_SYNC_STRATEGY", "incremental"),
            ("CGC_FRESH_DRIVER_PYTHON", stub_path.as_str()),
        ]),
    );
    let mut conn = open_session(&service, "s1");
    // The first sync has no manifest: a reconcile, which is no fallback
    // the person needs to hear about.
    conn.request(json!({"type": "sync"}), 77);
    conn.wait_status("fresh");
    assert_eq!(
        conn.count_seen(|f| f["condition"] == "sync_strategy_fell_back"),
        0
    );
    crate::support::agent_edit(&mut conn, "s1", "src/a.py");
    let (fresh, _) = conn.recv_until("fresh after the edit", |f| {
        f["type"] == "state" && f["status"] == "fresh" && f["edit_epoch"] == 1
    });
    let detail = fresh["detail"].as_str().unwrap_or_default().to_string();
    assert!(
        detail.contains("reconcile") && detail.contains("instead of incremental"),
        "{fresh}"
    );
    assert!(detail.contains("RepositoryEventHandler"), "{fresh}");
    let calls = fake.invocations();
    assert_eq!(calls.len(), 2, "the baseline and the fallback: {calls:?}");
    assert_eq!(args_of(&calls[1]), json!(["watch", "--sync-on-start", "."]));
    let out = sandbox
        .command()
        .args(["status", "--json"])
        .output()
        .unwrap();
    let status: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(
        status["detail"]
            .as_str()
            .unwrap_or_default()
            .contains("instead of incremental"),
        "{status}"
    );
    assert!(!service.log_events("sync_fallback").is_empty());
    // The person is told once, as a notice.
    let notice = conn.wait_seen("the fallback notice", |f| {
        f["type"] == "notice" && f["condition"] == "sync_strategy_fell_back"
    });
    assert_eq!(notice["audience"], "user", "{notice}");
    assert!(
        notice["text"]
            .as_str()
            .unwrap_or_default()
            .contains("RepositoryEventHandler"),
        "{notice}"
    );
    crate::support::agent_edit(&mut conn, "s1", "src/b.py");
    conn.recv_until("a second sync", |f| {
        f["type"] == "state" && f["status"] == "fresh" && f["edit_epoch"] == 2
    });
    assert_eq!(
        conn.count_seen(|f| f["condition"] == "sync_strategy_fell_back"),
        1,
        "once per session"
    );
}
