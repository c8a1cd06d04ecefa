//! The incremental worker's stored-edge memo, against the real CLI (0.6.13,
//! Kùzu): a request takes the repository's stored link edges from what the
//! worker's last request left only while no other process has written the
//! database since: the person's own `cgc query` (which rewrites only the
//! file's header page) keeps it, by a comparison of the file's contents;
//! after another program's write the edges are read again, and a change
//! made behind the worker's back is repaired by the next sync. The same check lets the open leave out CGC's
//! schema statements. Every remembered answer is also checked
//! against a fresh read (`CGC_FRESH_VERIFY_STORED_EDGES`, set by
//! `incremental::service`).
//!
//! Real-CLI tests need `CGC_FRESH_REAL_CGC` (see `real_cgc.rs`).

use crate::graph_backend::GraphBackend;
use crate::incremental::{
    agent_batch, assert_same_as_from_scratch, baseline_sync, replace_in, service,
    wait_synced_fresh, write_modules,
};
use crate::parse_cache::{driver_timings, figure};
use crate::support::{open_session, real_cgc, Sandbox};

#[test]
fn the_stored_edge_memo_is_used_only_while_no_other_process_wrote_the_database() {
    let Some(cgc) = real_cgc() else { return };
    let sandbox = Sandbox::new();
    let ws = sandbox.workspace();
    write_modules(&ws, 12);
    let cli = GraphBackend::Kuzu.cli(&cgc, &ws, &sandbox.home(), "stored-edges");
    cli.index();

    let service = service(&sandbox, &cli, &cgc);
    let mut conn = open_session(&service, "s1");
    baseline_sync(&mut conn, &service);
    let mut rename = |module: usize| {
        let path = format!("pkg/mod_{module:03}.py");
        agent_batch(&mut conn, &[path.as_str()], || {
            replace_in(
                &ws,
                &path,
                &format!("m{module:03}_helper"),
                &format!("m{module:03}_assist"),
            )
        });
        wait_synced_fresh(&mut conn);
    };

    // 1. The worker's first request (the baseline, the session's first
    // sync) read the edges; 2. its next ones remember them.
    rename(1);
    rename(5);
    // 3. The person's own (read-only) query opened the database and
    // rewrote its header page: remembered, by the file's contents.
    let rows = cli.query("MATCH (f:Function) WHERE f.name = 'm005_assist' RETURN f.name AS n");
    assert_eq!(rows.len(), 1, "{rows:?}");
    rename(7);
    // 4. Nobody else since: remembered.
    rename(8);
    // 5. Another program deleted a stored call edge of a file no edit
    // touches: the edges are read, that file is re-linked.
    cli.write_kuzu(
        "MATCH (a:Function {name: 'm003_compute'})-[r:CALLS]->(b:Function {name: 'm002_export'}) DELETE r",
    );
    rename(10);

    let timings = driver_timings(&service);
    let remembered: Vec<u64> = timings
        .iter()
        .map(|t| figure(t, "stored_edges_remembered"))
        .collect();
    assert_eq!(remembered, [0, 1, 1, 1, 1, 0], "{timings:?}");
    let by_content: Vec<u64> = timings
        .iter()
        .map(|t| figure(t, "stored_edges_by_content"))
        .collect();
    assert_eq!(by_content, [0, 0, 0, 1, 0, 0], "{timings:?}");
    // Each read went straight through a Kùzu connection (`KuzuReader`);
    // the verify mode read again that way after every remembered answer.
    assert!(
        timings
            .iter()
            .all(|t| figure(t, "stored_edges_read_direct") == 1),
        "{timings:?}"
    );
    // The open left out CGC's schema statements exactly when the database
    // was as the worker's last request left it.
    let schema: Vec<u64> = timings
        .iter()
        .map(|t| figure(t, "schema_skipped"))
        .collect();
    assert_eq!(schema, remembered, "{timings:?}");
    // Each renamed module was deleted and written again; of its class's
    // eight container statements, the six for position-keyed labels it has
    // no items of (Interface, Struct, Record, Trait, Object, Mixin) were
    // left out.
    // (The baseline, timings[0], found nothing to write.)
    let containers: Vec<u64> = timings[1..]
        .iter()
        .map(|t| figure(t, "container_queries_skipped"))
        .collect();
    assert_eq!(containers, [6, 6, 6, 6, 6], "{timings:?}");
    // Its delete kept its directory (`pkg`), which it is written into
    // again, and its five Parameter rows, all distinct, went in one batch.
    for key in ["directory_queries_kept", "parameter_batches"] {
        let used: Vec<u64> = timings[1..].iter().map(|t| figure(t, key)).collect();
        assert_eq!(used, [1, 1, 1, 1, 1], "{key}: {timings:?}");
    }
    drop(conn);
    drop(service);

    let synced = cli.dump();
    assert!(
        synced
            .relationships
            .iter()
            .any(|r| r.contains("m003_compute") && r.contains("m002_export")),
        "the edge deleted behind the worker's back is back"
    );
    assert_same_as_from_scratch(
        &cgc,
        &GraphBackend::Kuzu,
        &sandbox,
        &synced,
        "stored-edges",
        "after the stored-edge memo's syncs",
    );
}
