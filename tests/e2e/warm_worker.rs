//! The worker warmed at a session's start (`Effect::WarmWorker`,
//! `cgc_fresh_core::warm_worker`, the runner's `warm_worker.rs`): on an
//! indexed workspace whose manifest tells the next sync what changed, the
//! worker starts in the background, answers the driver's probe and
//! prepares the tree, without the database, and asks whether the workspace
//! is indexed where the first sync would have to; the first edit's sync is
//! then applied by that worker, with no probe or listing of its own. Real
//! CLI, on Kùzu and on a FalkorDB server; the runner's decisions with the
//! stand-in driver interpreter.

use std::time::Duration;

use serde_json::json;

use crate::graph_backend::GraphBackend;
use crate::incremental::{
    agent_batch, assert_same_as_from_scratch, baseline_sync, functions, replace_in, service,
    stand_in_worker_python, wait_synced_fresh, worker_pids, write,
};
use crate::support::{
    fast_env, indexed_with_fake, open_session, strategies_run, wait_until, Sandbox,
};

fn the_first_edit_after_a_restart_is_applied_by_the_warmed_worker(backend: &GraphBackend) {
    let Some(cgc) = backend.real_cgc() else {
        return;
    };
    let sandbox = Sandbox::new();
    let (ws, home) = (sandbox.workspace(), sandbox.home());
    write(&ws, "pkg/__init__.py", "");
    write(&ws, "pkg/a.py", "def first(x):\n    return x\n");
    write(
        &ws,
        "pkg/b.py",
        "from pkg.a import first\n\ndef second(x):\n    return first(x)\n",
    );
    let graph = "warm";
    let cli = backend.cli(&cgc, &ws, &home, graph);
    cli.index();
    {
        // The first service records the manifest (its baseline ran on the
        // worker its session warmed).
        let first = service(&sandbox, &cli, &cgc);
        let mut conn = open_session(&first, "s1");
        baseline_sync(&mut conn, &first);
        assert_eq!(first.log_events("worker_warm_up_started").len(), 1);
        // The manifest is written after the sync settles: stopped before
        // that, the next service would have none and take a baseline.
        wait_until("the manifest", Duration::from_secs(60), || {
            !first.log_events("manifest_written").is_empty()
        });
    }

    let service = service(&sandbox, &cli, &cgc);
    let mut conn = open_session(&service, "s1");
    wait_until(
        "the warm-up to prepare the tree and end",
        Duration::from_secs(120),
        || {
            !service.log_events("driver_worker_prepare").is_empty()
                && !service.log_events("worker_warm_up_ended").is_empty()
        },
    );
    let started = service.log_events("driver_worker_started");
    assert_eq!(started.len(), 1, "{started:?}");
    assert_eq!(started[0]["for_request"], "warm-up", "{started:?}");
    let probes = service.log_events("driver_probe_result");
    assert_eq!(probes.len(), 1, "{probes:?}");
    assert_eq!(probes[0]["ok"], true, "{probes:?}");
    assert_eq!(probes[0]["by"], "worker", "{probes:?}");
    // The warm worker holds no lock: the person's own query runs.
    assert_eq!(functions(&cli, "first"), 1);

    agent_batch(&mut conn, &["pkg/a.py", "pkg/b.py"], || {
        replace_in(&ws, "pkg/a.py", "def first(", "def first_renamed(");
        replace_in(&ws, "pkg/b.py", "first", "first_renamed");
    });
    wait_synced_fresh(&mut conn);
    assert_eq!(strategies_run(&service), ["incremental"]);
    // Whether the workspace is indexed (consent) was asked by the warm-up,
    // not by the sync: one listing in all.
    let listings = service.log_events("consent_listing");
    assert_eq!(listings.len(), 1, "{listings:?}");
    assert_eq!(listings[0]["by"], "warm-up", "{listings:?}");
    assert_eq!(listings[0]["indexed"], true, "{listings:?}");
    assert_eq!(
        worker_pids(&service).len(),
        1,
        "the sync was applied by the warmed worker"
    );
    assert!(
        service.log_events("driver_probe").is_empty(),
        "no one-shot probe: the worker had answered it"
    );
    assert_eq!(functions(&cli, "first_renamed"), 1);
    assert_eq!(functions(&cli, "first"), 0);
    drop(conn);
    // Kùzu lets one process at a time open the database.
    drop(service);
    assert_same_as_from_scratch(
        &cgc,
        backend,
        &sandbox,
        &cli.dump(),
        graph,
        "the warmed worker's sync",
    );
}

on_both_backends!(
    the_first_edit_after_a_restart_is_applied_by_the_warmed_worker,
    a_session_after_a_restart_warms_the_worker_and_the_first_edit_is_applied_by_it_on_kuzu,
    a_session_after_a_restart_warms_the_worker_and_the_first_edit_is_applied_by_it_on_a_falkordb_server
);

/// Waits for the runner's word that it warmed nothing, for `reason`.
fn wait_skipped(service: &crate::support::Service, reason: &str) {
    wait_until(
        &format!("a warm-up skipped: {reason}"),
        Duration::from_secs(30),
        || {
            service
                .log_events("worker_warm_up_skipped")
                .iter()
                .any(|e| e["reason"] == reason)
        },
    );
}

/// With the stand-in driver interpreter and the fake `cgc`: a session
/// start warms the worker only where it would serve the next sync — with
/// no manifest too (the next sync is a baseline, which the worker runs),
/// never with automatic syncs off.
#[test]
fn a_worker_is_warmed_without_a_manifest_but_not_with_automatic_syncs_off() {
    let stub = tempfile::tempdir().unwrap();
    let python = stand_in_worker_python(stub.path(), usize::MAX);
    for auto_sync in ["false", "true"] {
        let (_sandbox, _fake, service) = indexed_with_fake(
            json!({}),
            &fast_env(&[
                ("CGC_SYNC_STRATEGY", "incremental"),
                ("CGC_FRESH_DRIVER_PYTHON", python.as_str()),
                ("CGC_FRESHNESS_AUTO_SYNC", auto_sync),
            ]),
        );
        let mut conn = open_session(&service, "s1");
        if auto_sync == "true" {
            // No manifest yet: the next sync is a baseline, which the
            // warmed worker serves.
            wait_until("the warm-up", Duration::from_secs(30), || {
                !service.log_events("worker_warm_up_ended").is_empty()
            });
        }
        conn.request(json!({"type": "sync"}), 77);
        conn.wait_status("fresh");
        // The warmed worker took the baseline and runs on: a new session
        // warms nothing more — and with automatic syncs off, nothing at all.
        let second = open_session(&service, "s2");
        if auto_sync == "true" {
            wait_skipped(&service, "a worker runs already");
            let started = service.log_events("driver_worker_started");
            assert_eq!(started.len(), 1, "{started:?}");
            assert_eq!(started[0]["for_request"], "warm-up", "{started:?}");
            assert_eq!(strategies_run(&service), ["baseline"]);
        } else {
            // The observer handles a connection's frames in order: once it
            // answered this status it had handled the session's start, and
            // with automatic syncs off it decided nothing.
            let mut second = second;
            second.request(json!({"type": "status"}), 9);
            let decided = service.log_events("decision");
            assert!(
                !decided.iter().any(|e| e["decision"] == "warm_worker"),
                "autoSync off: {decided:?}"
            );
            assert!(service.log_events("worker_warm_up_started").is_empty());
        }
    }
}
