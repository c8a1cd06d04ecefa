//! A batch of any size goes to the incremental driver (issue 24, "batches
//! of any size"): a branch switch made by a shell command — hundreds of
//! files changed, some deleted, some added — is one incremental sync, and
//! the graph equals a from-scratch index; so is the switch back, made by a
//! service started again on the same state. Real CLI, on Kùzu and on a
//! FalkorDB server (the driver's batched writes are Kùzu's; on the server
//! it writes the files one by one, as CGC does).

use std::collections::BTreeMap;
use std::fs;
use std::path::Path;

use serde_json::json;

use crate::graph_backend::GraphBackend;
use crate::incremental::{
    assert_same_as_scratch_named, functions, replace_in, service_with, wait_synced_fresh, write,
    write_modules,
};
use crate::support::{open_session, strategies_run, Conn, Sandbox, Service};

/// Modules in the tree, and how many of them the branch switch rewrites
/// (more than the 256 the service once reconciled above).
const MODULES: usize = 300;
const REWRITTEN: usize = 290;

/// The modules the switch deletes, and the ones it adds (with their text).
const DELETED: [&str; 2] = ["pkg/mod_295.py", "pkg/mod_296.py"];
const ADDED: [(&str, &str); 2] = [
    (
        "pkg/branch_a.py",
        "from pkg.mod_010 import m010_exported\n\n\ndef on_branch(x):\n    return m010_exported(x)\n",
    ),
    (
        "pkg/branch_b.py",
        "from pkg.branch_a import on_branch\n\n\nclass Feature:\n    def go(self, x):\n        return on_branch(x)\n",
    ),
];

/// Every file of the workspace's package, by name, with its text.
fn package(ws: &Path) -> BTreeMap<String, String> {
    fs::read_dir(ws.join("pkg"))
        .unwrap()
        .map(|entry| {
            let path = entry.unwrap().path();
            let name = path.file_name().unwrap().to_string_lossy().to_string();
            (name, fs::read_to_string(&path).unwrap())
        })
        .collect()
}

/// Renames the export of each of the first `REWRITTEN` modules from
/// `m<i>_<from>` to `m<i>_<to>`, in its definition and at its caller
/// downstream (the next module's import and call).
fn rename_exports(ws: &Path, from: &str, to: &str) {
    for i in 0..REWRITTEN {
        let rel = format!("pkg/mod_{i:03}.py");
        replace_in(
            ws,
            &rel,
            &format!("m{i:03}_{from}"),
            &format!("m{i:03}_{to}"),
        );
        if i > 0 {
            let p = i - 1;
            replace_in(
                ws,
                &rel,
                &format!("m{p:03}_{from},"),
                &format!("m{p:03}_{to},"),
            );
            replace_in(
                ws,
                &rel,
                &format!("m{p:03}_{from}(x)"),
                &format!("m{p:03}_{to}(x)"),
            );
        }
    }
}

/// One shell command of the agent's (`git checkout …`): its call, the
/// writes it makes, its result; then the sync it caused, which must be one
/// incremental sync of every changed path. Returns the session's
/// connection, still open.
fn shell_switch(service: &Service, write: impl FnOnce()) -> Conn {
    let mut conn = open_session(service, "s1");
    conn.send(json!({"type": "tool_call", "session": "s1", "tool": "bash", "paths": []}));
    write();
    conn.send(json!({"type": "tool_result", "session": "s1", "tool": "bash", "ok": true}));
    wait_synced_fresh(&mut conn);
    assert_eq!(
        strategies_run(service),
        ["incremental"],
        "one sync, incremental"
    );
    let files = service.log_events("sync_strategy");
    let files = files.last().and_then(|e| e["files"].as_u64()).unwrap_or(0);
    assert_eq!(
        files as usize,
        REWRITTEN + DELETED.len() + ADDED.len(),
        "every changed path in the one sync"
    );
    // The manifest is written after the sync settles: a service stopped
    // before that leaves the next one the manifest before the switch.
    crate::support::wait_until("the manifest", std::time::Duration::from_secs(60), || {
        !service.log_events("manifest_written").is_empty()
    });
    conn
}

fn a_branch_switch_and_back_each_equal_a_from_scratch_index(backend: &GraphBackend) {
    let Some(cgc) = backend.real_cgc() else {
        return;
    };
    let sandbox = Sandbox::new();
    let (ws, home) = (sandbox.workspace(), sandbox.home());
    write_modules(&ws, MODULES);
    let graph = "branch";
    let cli = backend.cli(&cgc, &ws, &home, graph);
    cli.index();
    let main_branch = package(&ws);
    {
        // The manifest of the tree just indexed, without a reconcile: a
        // sync whose command changes nothing records the tree as it is.
        let recorder = service_with(
            &sandbox,
            &cli,
            &cgc,
            &[("CGC_SYNC_STRATEGY", "custom: --version")],
        );
        let mut conn = open_session(&recorder, "s0");
        conn.request(json!({"type": "sync"}), 77);
        wait_synced_fresh(&mut conn);
        crate::support::wait_until("the manifest", std::time::Duration::from_secs(60), || {
            !recorder.log_events("manifest_written").is_empty()
        });
    }

    // `git checkout other-branch`, as the agent's shell runs it: every
    // module's export renamed (its definition and its caller downstream),
    // two modules deleted, two added.
    let service = service_with(&sandbox, &cli, &cgc, &[]);
    let conn = shell_switch(&service, || {
        rename_exports(&ws, "export", "exported");
        // mod_290 still calls mod_289's old name: an unresolved call, as
        // after a real branch switch that left a caller behind.
        for gone in DELETED {
            fs::remove_file(ws.join(gone)).unwrap();
        }
        for (rel, text) in ADDED {
            write(&ws, rel, text);
        }
    });
    assert_eq!(functions(&cli, "m100_exported"), 1);
    assert_eq!(functions(&cli, "m100_export"), 0);
    assert_eq!(functions(&cli, "m295_export"), 0);
    assert_eq!(functions(&cli, "on_branch"), 1);
    drop(conn);
    // Kùzu lets one process at a time open the database.
    drop(service);
    assert_same_as_scratch_named(
        &cgc,
        backend,
        &sandbox,
        &cli.dump(),
        graph,
        "scratch-there",
        "the branch switch in one sync",
    );

    // `git checkout main`, in a service started again on the same state
    // (its manifest is the switched tree's): every rename reverted, the
    // deleted modules back with their text, the added ones deleted.
    let service = service_with(&sandbox, &cli, &cgc, &[]);
    let conn = shell_switch(&service, || {
        rename_exports(&ws, "exported", "export");
        for gone in DELETED {
            let name = gone.trim_start_matches("pkg/");
            write(&ws, gone, &main_branch[name]);
        }
        for (rel, _) in ADDED {
            fs::remove_file(ws.join(rel)).unwrap();
        }
    });
    assert_eq!(package(&ws), main_branch, "the tree is the first branch's");
    assert_eq!(functions(&cli, "m100_export"), 1);
    assert_eq!(functions(&cli, "m100_exported"), 0);
    assert_eq!(functions(&cli, "m295_export"), 1);
    assert_eq!(functions(&cli, "on_branch"), 0);
    drop(conn);
    drop(service);
    assert_same_as_scratch_named(
        &cgc,
        backend,
        &sandbox,
        &cli.dump(),
        graph,
        "scratch-back",
        "the switch back in one sync",
    );
}

on_both_backends!(
    a_branch_switch_and_back_each_equal_a_from_scratch_index,
    a_branch_switch_of_hundreds_of_files_and_back_is_one_incremental_sync_each_way_equal_to_a_from_scratch_index_on_kuzu,
    a_branch_switch_of_hundreds_of_files_and_back_is_one_incremental_sync_each_way_equal_to_a_from_scratch_index_on_a_falkordb_server
);
