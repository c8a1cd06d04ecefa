//! Every backend CodeGraphContext offers, with the real CLI: renames of one
//! module after another — the first synced by the reconcile (no manifest
//! yet), the later ones incrementally, one file written twice — leave a
//! graph equal to a from-scratch index on Kùzu, LadybugDB, FalkorDB Lite
//! (CGC's own choice on Python 3.12, no backend named) and a FalkorDB
//! server; and the worker's self-check fails a sync whose delete was
//! broken on purpose (a test-only switch), so that it is never `fresh`.

use serde_json::json;

use crate::graph_backend::{python_of, GraphBackend};
use crate::incremental::{
    agent_batch, assert_same_as_from_scratch, replace_in, service, wait_synced_fresh, write,
};
use crate::support::{open_session, strategies_run, Sandbox, Service};

/// Ten modules as in the report of the false `fresh` on FalkorDB Lite: a
/// helper and a compute calling it.
fn write_ten_modules(ws: &std::path::Path) {
    for i in 0..10 {
        write(
            ws,
            &format!("mod{i}.py"),
            &format!(
                "def helper_{i}(x):\n    return x + 1\n\n\n\
                 def compute_{i}(x):\n    return helper_{i}(x) * 2\n"
            ),
        );
    }
}

fn function_names(cli: &crate::graph_backend::GraphCli, module: &str) -> Vec<String> {
    let mut names: Vec<String> = cli
        .query(&format!(
            "MATCH (f:Function) WHERE f.path ENDS WITH '/{module}' RETURN f.name AS name"
        ))
        .iter()
        .filter_map(|row| row["name"].as_str().map(str::to_string))
        .collect();
    names.sort();
    names
}

/// The renames of the report (`compute_1` → `lite_compute_1`, then
/// `compute_2` → `lite_compute_2`), then mod2 written again: after each
/// `fresh` the graph names the new function once and the old one not at
/// all, and at the end it equals a from-scratch index of the same tree.
fn renames_equal_from_scratch(backend: &GraphBackend) {
    let Some(cgc) = backend.real_cgc() else {
        return;
    };
    let sandbox = Sandbox::new();
    let ws = sandbox.workspace();
    write_ten_modules(&ws);
    let cli = backend.cli(&cgc, &ws, &sandbox.home(), "renames");
    cli.index();
    let service = service(&sandbox, &cli, &cgc);
    let mut conn = open_session(&service, "s1");

    let renames = [
        ("mod1.py", "compute_1", "lite_compute_1"),
        ("mod2.py", "compute_2", "lite_compute_2"),
        ("mod2.py", "helper_2", "lite_helper_2"),
    ];
    for (module, from, to) in renames {
        agent_batch(&mut conn, &[module], || replace_in(&ws, module, from, to));
        wait_synced_fresh(&mut conn);
    }
    assert_eq!(
        strategies_run(&service),
        ["baseline", "incremental", "incremental"],
        "the first sync has no manifest (a baseline); the later ones are incremental"
    );
    assert_eq!(
        function_names(&cli, "mod1.py"),
        ["<module>", "helper_1", "lite_compute_1"]
    );
    assert_eq!(
        function_names(&cli, "mod2.py"),
        ["<module>", "lite_compute_2", "lite_helper_2"],
        "mod2.py, written twice, holds its functions once"
    );
    for applied in crate::incremental::applied_after_the_baseline(&service) {
        let timings = applied["timings"].as_str().unwrap_or_default();
        assert!(
            timings.contains("\"self_checked\": 1.0"),
            "the worker checked the file it wrote: {applied}"
        );
    }
    drop(conn);
    drop(service);
    let synced = cli.dump();
    assert_same_as_from_scratch(
        &cgc,
        backend,
        &sandbox,
        &synced,
        "renames",
        "after the renames",
    );
}

on_every_backend!(
    renames_equal_from_scratch,
    renames_of_one_module_after_another_leave_a_from_scratch_graph_on_kuzu,
    renames_of_one_module_after_another_leave_a_from_scratch_graph_on_ladybugdb,
    renames_of_one_module_after_another_leave_a_from_scratch_graph_on_falkordb_lite,
    renames_of_one_module_after_another_leave_a_from_scratch_graph_on_a_falkordb_server
);

/// With the worker's delete of a re-written file's nodes left out (the
/// test-only `CGC_FRESH_BREAK_DELETE_FOR_TESTS=1`), the self-check finds
/// the old nodes beside the new: the sync fails, the state is not `fresh`,
/// the error names the file, and the person is told.
fn broken_delete_fails_the_self_check(backend: &GraphBackend) {
    let Some(cgc) = backend.real_cgc() else {
        return;
    };
    let sandbox = Sandbox::new();
    let ws = sandbox.workspace();
    write_ten_modules(&ws);
    let cli = backend.cli(&cgc, &ws, &sandbox.home(), "broken-delete");
    cli.index();
    let service = broken_delete_service(&sandbox, &cli, &cgc);
    let mut conn = open_session(&service, "s1");
    // The first sync (no manifest) is a baseline: it writes mod1.py with
    // the same broken delete, fails its self-check, and the reconcile that
    // follows at once (the graph may be partial) makes it `fresh` with
    // CGC's own writes.
    agent_batch(&mut conn, &["mod1.py"], || {
        replace_in(&ws, "mod1.py", "compute_1", "first_compute_1")
    });
    wait_synced_fresh(&mut conn);

    agent_batch(&mut conn, &["mod3.py"], || {
        replace_in(&ws, "mod3.py", "compute_3", "renamed_compute_3")
    });
    // The state the failure left (a follow-up reconcile may start at once).
    let (state, _) = conn.recv_until_within(
        "the failed sync's state",
        std::time::Duration::from_secs(120),
        |f| {
            f["type"] == "state"
                && f["last_error"]
                    .as_str()
                    .is_some_and(|e| e.contains("SelfCheckFailed"))
        },
    );
    assert_ne!(state["status"], "fresh", "{state}");
    let error = state["last_error"].as_str().unwrap_or_default();
    assert!(
        error.contains("mod3.py") && error.contains("Function node(s) in the graph"),
        "the error names the file and the counts: {state}"
    );
    let notice = conn.wait_seen("sync_failed", |f| f["condition"] == "sync_failed");
    assert!(
        notice["text"].as_str().is_some_and(|t| !t.is_empty()),
        "the person is told: {notice}"
    );
    // No sync of the worker was reported applied: each one's delete was
    // broken and each one's self-check said so.
    let applied = service.log_events("incremental_applied");
    assert!(
        applied.is_empty(),
        "nothing the broken worker wrote was reported applied: {applied:?}"
    );
    let failed_checks = service
        .log_events("sync_report")
        .into_iter()
        .filter(|e| {
            e["report"]
                .as_str()
                .is_some_and(|r| r.contains("Finished(Failed") && r.contains("SelfCheckFailed"))
        })
        .count();
    assert!(
        failed_checks >= 2,
        "the baseline's and the edit's self-checks both failed: {failed_checks}"
    );
}

/// The incremental service of `incremental::service`, with the worker's
/// delete broken on purpose.
fn broken_delete_service(
    sandbox: &Sandbox,
    cli: &crate::graph_backend::GraphCli,
    cgc: &std::path::Path,
) -> Service {
    crate::incremental::service_with(
        sandbox,
        cli,
        cgc,
        &[("CGC_FRESH_BREAK_DELETE_FOR_TESTS", "1")],
    )
}

#[test]
fn a_broken_delete_fails_the_self_check_and_the_sync_is_not_fresh_on_kuzu() {
    broken_delete_fails_the_self_check(&GraphBackend::Kuzu);
}

#[test]
fn a_broken_delete_fails_the_self_check_and_the_sync_is_not_fresh_on_falkordb_lite() {
    broken_delete_fails_the_self_check(&GraphBackend::FalkorLite);
}

/// FalkorDB Lite that cannot start — its port taken by another program,
/// as a slow start on a loaded machine makes CodeGraphContext give up on
/// it after 5 s — makes CGC go on with an empty Kùzu database. The
/// worker refuses to write there and a reconcile run on Kùzu is not taken
/// for a sync: from the edit on the state is never `fresh`, each error
/// says why, and the person's graph keeps what it had (nothing was
/// claimed for it).
#[test]
fn a_falkordb_lite_that_does_not_start_is_never_taken_for_the_graph() {
    let backend = GraphBackend::FalkorLite;
    let Some(cgc) = backend.real_cgc() else {
        return;
    };
    let sandbox = Sandbox::new();
    let ws = sandbox.workspace();
    write_ten_modules(&ws);
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .unwrap()
        .port();
    let mut cli = backend.cli(&cgc, &ws, &sandbox.home(), "fell-back");
    cli.env
        .push(("FALKORDB_PORT".to_string(), port.to_string()));
    cli.index();
    let service = service(&sandbox, &cli, &cgc);
    let mut conn = open_session(&service, "s1");
    agent_batch(&mut conn, &["mod1.py"], || {
        replace_in(&ws, "mod1.py", "compute_1", "first_compute_1")
    });
    wait_synced_fresh(&mut conn);

    // Another program takes FalkorDB Lite's port: its server cannot start.
    // The server the last sync tore down may still be exiting (seen once
    // on a loaded machine: "Address already in use"), so the port is
    // taken as soon as it is free.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    let taken = loop {
        match std::net::TcpListener::bind(("127.0.0.1", port)) {
            Ok(listener) => break listener,
            Err(error) if std::time::Instant::now() < deadline => {
                eprintln!("port {port} not free yet: {error}");
                std::thread::sleep(std::time::Duration::from_millis(200));
            }
            Err(error) => panic!("port {port} stayed in use for 60 s: {error}"),
        }
    };
    agent_batch(&mut conn, &["mod3.py"], || {
        replace_in(&ws, "mod3.py", "compute_3", "renamed_compute_3")
    });
    let quiet = std::time::Duration::from_secs(240);
    let (worker_failed, seen) = conn.recv_until_within("the worker's refusal", quiet, |f| {
        f["type"] == "state"
            && f["last_error"]
                .as_str()
                .is_some_and(|e| e.contains("not the graph's backend 'falkordb'"))
    });
    assert_ne!(worker_failed["status"], "fresh", "{worker_failed}");
    assert!(
        worker_failed["last_error"]
            .as_str()
            .is_some_and(|e| e.contains("'kuzudb'") && e.contains("nothing was written")),
        "{worker_failed}"
    );
    // The failure's one retry is the reconcile (the last incremental sync
    // failed): CGC's `watch` goes on with Kùzu too, and that is no sync
    // either.
    let (reconcile_failed, more) = conn.recv_until_within("the reconcile's failure", quiet, |f| {
        f["type"] == "state"
            && f["last_error"]
                .as_str()
                .is_some_and(|e| e.contains("another database backend"))
    });
    assert_ne!(reconcile_failed["status"], "fresh", "{reconcile_failed}");
    for frame in seen.iter().chain(&more) {
        assert!(
            frame["type"] != "state" || frame["status"] != "fresh",
            "never fresh while CGC works on another backend: {frame}"
        );
    }
    let ran = strategies_run(&service);
    assert_eq!(
        ran[..3],
        ["baseline", "incremental", "reconcile"],
        "{ran:?}"
    );
    // Only the first sync (the baseline, before the port was taken) was
    // reported applied.
    let applied = service.log_events("incremental_applied");
    assert!(
        applied.len() == 1 && applied[0]["baseline"] == true,
        "nothing after the baseline was reported applied: {applied:?}"
    );
    drop(conn);
    drop(service);
    drop(taken);
    assert_eq!(
        function_names(&cli, "mod3.py"),
        ["<module>", "compute_3", "helper_3"],
        "the person's graph was not written, and was not called fresh"
    );
}

/// The driver's probe with the real CGC, in a workspace of its own, with
/// `env` (and root options `global`): its exit code and result line.
fn probe(cgc: &std::path::Path, global: &[&str], env: &[(&str, &str)]) -> (i32, serde_json::Value) {
    let sandbox = Sandbox::new();
    let out = std::process::Command::new(python_of(cgc))
        .arg(crate::support::driver_source("incremental.py"))
        .args(global)
        .arg("--probe")
        .current_dir(sandbox.workspace())
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("HOME", sandbox.home())
        .envs(env.iter().copied())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let line = stdout
        .lines()
        .find_map(|l| l.strip_prefix("CGC_FRESH_RESULT "))
        .unwrap_or_else(|| panic!("no result line: {stdout}"));
    (
        out.status.code().unwrap_or(-1),
        serde_json::from_str(line).unwrap(),
    )
}

/// The probe names the backend CGC would use and refuses one the driver
/// is not proven exact on (Neo4j here: nothing is opened, so no server is
/// needed) with exit 3 and the reason — which the service turns into the
/// reconcile and the person's fallback notice
/// (`incremental::a_failed_api_probe_falls_back_to_reconcile_and_says_so`).
#[test]
fn the_drivers_probe_accepts_the_proven_backends_and_refuses_another_naming_it() {
    let Some(cgc) = crate::support::real_cgc() else {
        return;
    };
    for (global, backend) in [
        (["--db", "kuzudb"], "kuzudb"),
        (["--db", "ladybugdb"], "ladybugdb"),
    ] {
        let (code, result) = probe(&cgc, &global, &[]);
        assert_eq!((code, &result["ok"]), (0, &json!(true)), "{result}");
        assert_eq!(result["backend"], backend, "{result}");
    }
    let (code, result) = probe(
        &cgc,
        &[],
        &[
            ("DEFAULT_DATABASE", "neo4j"),
            ("NEO4J_URI", "bolt://127.0.0.1:9"),
            ("NEO4J_USERNAME", "nobody"),
            ("NEO4J_PASSWORD", "nothing"),
        ],
    );
    assert_eq!(code, 3, "{result}");
    assert_eq!(result["ok"], false, "{result}");
    let error = result["error"].as_str().unwrap_or_default();
    assert!(
        error.contains("'neo4j'") && error.contains("not proven"),
        "{result}"
    );
    if let Some(lite) = crate::support::real_cgc_lite() {
        let (code, result) = probe(&lite, &[], &[]);
        assert_eq!(
            (code, &result["backend"]),
            (0, &json!("falkordb")),
            "{result}"
        );
    }
}

/// The index repair and the self-check on stand-ins
/// (`backend_modules_check.py`): the repair drops `occurrence_index` from
/// exactly the node indexes that hold it, on FalkorDB only, and refuses a
/// label it would have to quote; the self-check asks one query in each
/// dialect and fails, naming the file and the counts, on an old node left
/// beside the new ones, a node its File does not contain, a deleted file
/// still there, and a written file missing.
#[test]
fn the_index_repair_the_self_check_and_the_backend_pin_do_what_they_say_on_stand_ins() {
    let driver_dir = crate::support::driver_source("");
    let cases = crate::support::python_check("backend_modules_check.py", &[&driver_dir]);
    assert_eq!(cases.len(), 3, "{cases:?}");
    assert_eq!(
        cases[0]["repaired"],
        json!(["Class", "Function", "Trait"]),
        "{}",
        cases[0]
    );
    let failures = cases[1]["failures"].as_object().expect("failures");
    assert_eq!(failures.len(), 4, "{failures:?}");
    assert_eq!(
        cases[2]["choices"]["implicit_lite"], "falkordb",
        "{}",
        cases[2]
    );
}
