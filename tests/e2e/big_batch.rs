//! A batch of any size goes to the incremental driver (issue 24, "batches
//! of any size"): a branch switch made by a shell command — hundreds of
//! files changed, some deleted, some added — is one incremental sync, and
//! the graph equals a from-scratch index. Real CLI, Kùzu.

use std::fs;

use serde_json::json;

use crate::graph_backend::GraphBackend;
use crate::incremental::{
    functions, replace_in, service_with, stop_and_compare_kuzu_with_scratch, wait_synced_fresh,
    write, write_modules,
};
use crate::support::{open_session, real_cgc, strategies_run, Sandbox};

/// Modules in the tree, and how many of them the branch switch rewrites
/// (more than the 256 the service once reconciled above).
const MODULES: usize = 300;
const REWRITTEN: usize = 290;

#[test]
fn a_branch_switch_of_hundreds_of_files_is_one_incremental_sync_equal_to_a_from_scratch_index() {
    let Some(cgc) = real_cgc() else { return };
    let sandbox = Sandbox::new();
    let (ws, home) = (sandbox.workspace(), sandbox.home());
    write_modules(&ws, MODULES);
    let cli = GraphBackend::Kuzu.cli(&cgc, &ws, &home, "branch");
    cli.index();
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

    let service = service_with(&sandbox, &cli, &cgc, &[]);
    let mut conn = open_session(&service, "s1");
    // `git checkout other-branch`, as the agent's shell runs it: every
    // module's export renamed (its definition and its caller downstream),
    // two modules deleted, two added.
    conn.send(json!({"type": "tool_call", "session": "s1", "tool": "bash", "paths": []}));
    for i in 0..REWRITTEN {
        let rel = format!("pkg/mod_{i:03}.py");
        replace_in(
            &ws,
            &rel,
            &format!("m{i:03}_export"),
            &format!("m{i:03}_exported"),
        );
        if i > 0 {
            let p = i - 1;
            replace_in(
                &ws,
                &rel,
                &format!("m{p:03}_export,"),
                &format!("m{p:03}_exported,"),
            );
            replace_in(
                &ws,
                &rel,
                &format!("m{p:03}_export(x)"),
                &format!("m{p:03}_exported(x)"),
            );
        }
    }
    // mod_290 still calls mod_289's old name: an unresolved call, as after
    // a real branch switch that left a caller behind.
    for gone in ["pkg/mod_295.py", "pkg/mod_296.py"] {
        fs::remove_file(ws.join(gone)).unwrap();
    }
    write(
        &ws,
        "pkg/branch_a.py",
        "from pkg.mod_010 import m010_exported\n\n\ndef on_branch(x):\n    return m010_exported(x)\n",
    );
    write(
        &ws,
        "pkg/branch_b.py",
        "from pkg.branch_a import on_branch\n\n\nclass Feature:\n    def go(self, x):\n        return on_branch(x)\n",
    );
    conn.send(json!({"type": "tool_result", "session": "s1", "tool": "bash", "ok": true}));
    wait_synced_fresh(&mut conn);
    assert_eq!(
        strategies_run(&service),
        ["incremental"],
        "one sync, incremental"
    );
    let files = service.log_events("sync_strategy");
    let files = files.last().and_then(|e| e["files"].as_u64()).unwrap_or(0);
    assert_eq!(
        files as usize,
        REWRITTEN + 4,
        "every changed path in the one sync"
    );
    assert_eq!(functions(&cli, "m100_exported"), 1);
    assert_eq!(functions(&cli, "m100_export"), 0);
    assert_eq!(functions(&cli, "on_branch"), 1);
    drop(conn);
    stop_and_compare_kuzu_with_scratch(
        service,
        &cgc,
        &sandbox,
        &cli,
        "branch",
        "the branch switch in one sync",
    );
}
