//! What a session's automatic syncs may cost (`freshness.maxSyncsPerSession`
//! for whole-repository syncs, `freshness.maxIncrementalSyncsPerSession`
//! for incremental ones; `cgc_fresh_core::freshness` `budget.rs`), on the
//! real service with the fake `cgc` and a stand-in driver interpreter.

use std::fs;
use std::path::Path;

use serde_json::{json, Value};

use crate::incremental::stand_in_worker_python;
use crate::support::{
    agent_edit, fast_env, indexed_with_fake, open_session, strategies_run, wait_until, Conn,
};

/// Edits of the long session (the figure: an hour's session has
/// dozens).
const EDITS: u64 = 40;

/// The agent's `epoch`-th edit of `path`, and the `fresh` that follows.
fn edit_until_fresh(conn: &mut Conn, path: &str, epoch: u64) -> Value {
    agent_edit(conn, "s1", path);
    conn.recv_until("fresh after the edit", |f| {
        f["type"] == "state" && f["status"] == "fresh" && f["edit_epoch"] == epoch
    })
    .0
}

/// A long session on the default budget (two whole-repository syncs): forty
/// edits, each applied by the incremental worker, each burst ending in
/// `fresh` and no budget notice. The edits come as soon as the last one is
/// fresh, with `minSyncGapMs` at 300 ms instead of 5 s (the issue's "every
/// 6 s" scaled to the gap, so that the test takes seconds, not minutes).
#[test]
fn forty_edits_on_the_default_budget_each_end_in_fresh() {
    let stub = tempfile::tempdir().unwrap();
    let python = stand_in_worker_python(stub.path(), usize::MAX);
    let (_sandbox, fake, service) = indexed_with_fake(
        json!({}),
        &fast_env(&[
            ("CGC_SYNC_STRATEGY", "incremental"),
            ("CGC_FRESH_DRIVER_PYTHON", python.as_str()),
            ("CGC_FRESHNESS_MIN_SYNC_GAP_MS", "300"),
        ]),
    );
    let mut conn = open_session(&service, "s1");
    for epoch in 1..=EDITS {
        let fresh = edit_until_fresh(&mut conn, &format!("src/m{epoch}.py"), epoch);
        assert!(fresh["stale_since"].is_null(), "edit {epoch}: {fresh}");
    }
    let mut expected = vec!["incremental".to_string(); EDITS as usize];
    // The first sync has no manifest to compare with: the driver compares
    // the graph with the tree (a baseline), no reconcile.
    expected[0] = "baseline".to_string();
    assert_eq!(strategies_run(&service), expected);
    assert!(fake.invocations().is_empty(), "no reconcile");
    assert_eq!(
        conn.count_seen(|f| f["type"] == "notice" && f["condition"] == "budget_exhausted"),
        0,
        "{:?}",
        conn.history
    );
    let state = conn.request(json!({"type": "status"}), 9);
    assert_eq!(state["status"], "fresh", "{state}");
}

/// A stand-in driver interpreter whose API probe finds CGC lacking what the
/// driver needs: every sync falls back to the reconcile.
fn probe_failing_python(dir: &Path) -> String {
    let stub = dir.join("python");
    fs::write(
        &stub,
        "#!/usr/bin/env python3\nimport json, sys\n\
         if '--probe' in sys.argv[1:]:\n\
         \x20   print('CGC_FRESH_RESULT ' + json.dumps({'ok': False, 'mode': 'probe', 'missing': ['apply']}))\n\
         \x20   sys.exit(3)\n\
         sys.exit(2)\n",
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    fs::set_permissions(&stub, fs::Permissions::from_mode(0o755)).unwrap();
    stub.display().to_string()
}

/// With the reconcile forced (the incremental strategy, but a CGC the
/// driver cannot run), every sync costs the whole repository: the spec's
/// budget stops them after `maxSyncsPerSession` (the default, two), with
/// its one notice naming the key; the incremental allowance pays for no
/// reconcile.
#[test]
fn with_the_reconcile_forced_the_budget_stops_after_max_syncs_with_one_notice() {
    let stub = tempfile::tempdir().unwrap();
    let python = probe_failing_python(stub.path());
    let (_sandbox, fake, service) = indexed_with_fake(
        json!({}),
        &fast_env(&[
            ("CGC_SYNC_STRATEGY", "incremental"),
            ("CGC_FRESH_DRIVER_PYTHON", python.as_str()),
        ]),
    );
    let mut conn = open_session(&service, "s1");
    edit_until_fresh(&mut conn, "src/a.py", 1);
    edit_until_fresh(&mut conn, "src/b.py", 2);
    assert_eq!(fake.invocations().len(), 2, "two reconciles, the budget");
    for (n, file) in ["src/c.py", "src/d.py", "src/e.py"].iter().enumerate() {
        agent_edit(&mut conn, "s1", file);
        // The sync it starts needs a reconcile and has no slot for one:
        // refused before anything is spawned.
        wait_until(
            "the refused sync",
            std::time::Duration::from_secs(20),
            || service.log_events("sync_over_budget").len() > n,
        );
    }
    let state = conn.request(json!({"type": "status"}), 9);
    assert_eq!(state["status"], "possibly_stale", "{state}");
    assert_eq!(fake.invocations().len(), 2, "no reconcile past the budget");
    let notices: Vec<&Value> = conn
        .history
        .iter()
        .filter(|f| f["type"] == "notice" && f["condition"] == "budget_exhausted")
        .collect();
    assert_eq!(
        notices.len(),
        1,
        "{:?}\n{}",
        conn.history,
        service.log_text()
    );
    let text = notices[0]["text"].as_str().unwrap_or_default();
    assert!(text.contains("`freshness.maxSyncsPerSession`"), "{text}");
    assert!(text.contains("cgc-fresh sync"), "{text}");
    assert_eq!(
        service.log_events("sync_over_budget").len(),
        3,
        "{}",
        service.log_text()
    );
}
