//! Every backend CodeGraphContext offers, with the real CLI: renames of one
//! module after another — the first synced by the reconcile (no manifest
//! yet), the later ones incrementally, one file written twice — leave a
//! graph equal to a from-scratch index on Kùzu, LadybugDB, FalkorDB Lite
//! (CGC's own choice on Python 3.12, no backend named) and a FalkorDB
//! server; and the worker's self-check fails a sync whose delete was
//! broken on purpose (a test-only switch), so that it is never `fresh`.

use crate::graph_backend::GraphBackend;
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
        ["reconcile", "incremental", "incremental"],
        "the first sync has no manifest; the later ones are incremental"
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
    for applied in service.log_events("incremental_applied") {
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
    // The first sync reconciles (no manifest): CGC's own writes.
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
    assert!(
        service.log_events("incremental_applied").is_empty(),
        "nothing was reported applied"
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
