//! A baseline taken from the graph itself (issue 24, "a baseline from the
//! graph"): when nothing proves what the graph holds — here the first sync
//! after the person's own `cgc index .`, with edits made while no service
//! ran — the driver compares the graph with the tree and applies exactly
//! the files that differ, and the graph equals a from-scratch index. Real
//! CLI, on every backend the driver is proven on.

use std::fs;

use serde_json::json;

use crate::graph_backend::GraphBackend;
use crate::incremental::{
    agent_batch, assert_same_as_from_scratch, functions, replace_in, service, timing,
    wait_synced_fresh, write, write_modules,
};
use crate::support::{open_session, strategies_run, Sandbox};

/// The files the offline edits change in the graph's eyes: a rename (its
/// module and its caller's), a deleted module, a new module.
const OFFLINE_CHANGED: usize = 4;

fn offline_edits_are_found_by_the_baseline(backend: &GraphBackend) {
    let Some(cgc) = backend.real_cgc() else {
        return;
    };
    let sandbox = Sandbox::new();
    let ws = sandbox.workspace();
    write_modules(&ws, 30);
    let graph = "baseline";
    let cli = backend.cli(&cgc, &ws, &sandbox.home(), graph);
    cli.index();

    // While no service runs: a rename of a called function in its module
    // and at its caller, a deleted module, a new one.
    replace_in(&ws, "pkg/mod_005.py", "m005_export", "m005_offline");
    replace_in(&ws, "pkg/mod_006.py", "m005_export", "m005_offline");
    fs::remove_file(ws.join("pkg/mod_020.py")).unwrap();
    write(
        &ws,
        "pkg/offline_new.py",
        "from pkg.mod_003 import m003_export\n\n\ndef made_offline(x):\n    return m003_export(x)\n",
    );

    let service = service(&sandbox, &cli, &cgc);
    let mut conn = open_session(&service, "s1");
    // The agent's first edit: with no manifest, what changed since the
    // graph was built is not known file by file.
    agent_batch(&mut conn, &["pkg/mod_010.py"], || {
        replace_in(&ws, "pkg/mod_010.py", "m010_helper", "m010_assist")
    });
    let fresh = wait_synced_fresh(&mut conn);
    assert_eq!(strategies_run(&service), ["baseline"]);
    let detail = fresh["detail"].as_str().unwrap_or_default();
    assert!(
        detail.contains("baseline") && !detail.contains("instead of"),
        "{fresh}"
    );
    // Exactly the files that differ were written: the offline edits and
    // the agent's, not the repository.
    let applied = service.log_events("incremental_applied");
    let timings = applied
        .last()
        .and_then(|e| e["timings"].as_str())
        .unwrap_or_default()
        .to_string();
    assert_eq!(
        timing(&timings, "baseline_differing"),
        Some((OFFLINE_CHANGED + 1) as f64),
        "{timings}"
    );
    assert_eq!(timing(&timings, "baseline_files"), Some(31.0), "{timings}");
    assert_eq!(functions(&cli, "m005_offline"), 1);
    assert_eq!(functions(&cli, "m005_export"), 0);
    assert_eq!(functions(&cli, "m020_export"), 0);
    assert_eq!(functions(&cli, "made_offline"), 1);
    assert_eq!(functions(&cli, "m010_assist"), 1);

    // The baseline recorded a manifest: the next edit is incremental.
    agent_batch(&mut conn, &["pkg/mod_011.py"], || {
        replace_in(&ws, "pkg/mod_011.py", "m011_helper", "m011_assist")
    });
    wait_synced_fresh(&mut conn);
    assert_eq!(strategies_run(&service), ["baseline", "incremental"]);
    drop(conn);
    // Kùzu lets one process at a time open the database.
    drop(service);
    let synced = cli.dump();
    assert_same_as_from_scratch(
        &cgc,
        backend,
        &sandbox,
        &synced,
        graph,
        "the first sync after `cgc index .` with offline edits",
    );
}

on_every_backend!(
    offline_edits_are_found_by_the_baseline,
    the_first_sync_after_an_index_applies_only_the_files_that_differ_and_equals_a_from_scratch_index_on_kuzu,
    the_first_sync_after_an_index_applies_only_the_files_that_differ_and_equals_a_from_scratch_index_on_ladybugdb,
    the_first_sync_after_an_index_applies_only_the_files_that_differ_and_equals_a_from_scratch_index_on_falkordb_lite,
    the_first_sync_after_an_index_applies_only_the_files_that_differ_and_equals_a_from_scratch_index_on_a_falkordb_server
);

/// A service's `sync` with nothing changed since the index: the baseline
/// finds no file to write.
#[test]
fn a_baseline_of_an_unchanged_index_writes_nothing() {
    let backend = GraphBackend::Kuzu;
    let Some(cgc) = backend.real_cgc() else {
        return;
    };
    let sandbox = Sandbox::new();
    let ws = sandbox.workspace();
    write_modules(&ws, 12);
    let cli = backend.cli(&cgc, &ws, &sandbox.home(), "unchanged");
    cli.index();
    let service = service(&sandbox, &cli, &cgc);
    let mut conn = open_session(&service, "s1");
    conn.request(json!({"type": "sync"}), 7);
    wait_synced_fresh(&mut conn);
    assert_eq!(strategies_run(&service), ["baseline"]);
    let applied = service.log_events("incremental_applied");
    let timings = applied
        .last()
        .and_then(|e| e["timings"].as_str())
        .unwrap_or_default()
        .to_string();
    assert_eq!(
        timing(&timings, "baseline_differing"),
        Some(0.0),
        "{timings}"
    );
    assert_eq!(timing(&timings, "baseline_files"), Some(13.0), "{timings}");
}
