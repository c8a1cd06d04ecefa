//! The `incremental` sync strategy: against the real CLI (0.6.13, an
//! isolated HOME per test), on Kùzu and on a FalkorDB server, `fresh` is
//! reported only once a query shows the new graph, and the synced graph
//! equals a from-scratch index of the same tree; against the fake, a failed
//! API probe falls back to `reconcile` and says so.
//!
//! Each real-CLI test body takes the backend (`graph_backend.rs`) and runs
//! once per backend. Real-CLI tests need `CGC_FRESH_REAL_CGC`, the FalkorDB
//! ones `CGC_FRESH_FALKORDB_SERVER_SCRIPT` too (see `scripts/test.sh`).

use std::collections::BTreeSet;
use std::fs;
use std::path::Path;

use serde_json::{json, Value};

use crate::graph_backend::{GraphBackend, GraphCli, GraphDump};
use crate::support::{
    args_of, fast_env, indexed_with_fake, open_session, real_cgc, strategies_run, Sandbox, Service,
};

/// The two tests of one real-CLI check: on Kùzu, and on a FalkorDB server
/// (which returns at once where no FalkorDB is installed).
macro_rules! on_both_backends {
    ($check:ident, $on_kuzu:ident, $on_falkordb:ident) => {
        #[test]
        fn $on_kuzu() {
            $check(&GraphBackend::Kuzu);
        }

        #[test]
        fn $on_falkordb() {
            let Some(backend) = GraphBackend::falkordb_with_real_cgc() else {
                return;
            };
            $check(&backend);
        }
    };
}

/// The four tests of one real-CLI exactness check: on Kùzu, LadybugDB,
/// FalkorDB Lite (the Python 3.12 `cgc`, no backend named) and a FalkorDB
/// server (each returns at once where its backend is not installed).
macro_rules! on_every_backend {
    ($check:ident, $on_kuzu:ident, $on_ladybug:ident, $on_lite:ident, $on_falkordb:ident) => {
        on_both_backends!($check, $on_kuzu, $on_falkordb);

        #[test]
        fn $on_ladybug() {
            $check(&GraphBackend::Ladybug);
        }

        #[test]
        fn $on_lite() {
            $check(&GraphBackend::FalkorLite);
        }
    };
}

fn names(rows: &[Value], column: &str) -> BTreeSet<String> {
    rows.iter()
        .filter_map(|row| row[column].as_str().map(str::to_string))
        .collect()
}

pub(crate) fn functions(cli: &GraphCli, name: &str) -> usize {
    cli.query(&format!(
        "MATCH (f:Function) WHERE f.name = '{name}' RETURN f.name AS name"
    ))
    .len()
}

fn callers_of(cli: &GraphCli, callee: &str) -> BTreeSet<String> {
    let rows = cli.query(&format!(
        "MATCH (a:Function)-[:CALLS]->(b:Function) WHERE b.name = '{callee}' \
         RETURN a.name AS caller"
    ));
    names(&rows, "caller")
}

fn parents_of(cli: &GraphCli, class: &str) -> BTreeSet<String> {
    let rows = cli.query(&format!(
        "MATCH (c:Class)-[:INHERITS]->(p) WHERE c.name = '{class}' RETURN p.name AS parent"
    ));
    names(&rows, "parent")
}

pub(crate) fn write(ws: &Path, rel: &str, text: &str) {
    let path = ws.join(rel);
    fs::create_dir_all(path.parent().unwrap()).unwrap();
    fs::write(path, text).unwrap();
}

pub(crate) fn replace_in(ws: &Path, rel: &str, from: &str, to: &str) {
    let text = fs::read_to_string(ws.join(rel)).unwrap();
    assert!(text.contains(from), "{rel} has no {from:?}");
    fs::write(ws.join(rel), text.replace(from, to)).unwrap();
}

/// The service, syncing with `incremental` into the graph `cli` names.
pub(crate) fn service(sandbox: &Sandbox, cli: &GraphCli, cgc: &Path) -> Service {
    service_with(sandbox, cli, cgc, &[])
}

/// `service` with more environment for it (and so for its children).
pub(crate) fn service_with(
    sandbox: &Sandbox,
    cli: &GraphCli,
    cgc: &Path,
    extra: &[(&str, &str)],
) -> Service {
    let cgc = cgc.display().to_string();
    let global = cli.global.join(" ");
    let mut env = vec![
        ("CGC_EXECUTABLE", cgc.as_str()),
        ("CGC_GLOBAL_ARGS", global.as_str()),
        ("CGC_SYNC_STRATEGY", "incremental"),
        ("CGC_FRESHNESS_WATCH", "off"),
        ("CGC_FRESHNESS_BATCH_MS", "100"),
        ("CGC_FRESHNESS_SETTLE_MS", "5000"),
        ("CGC_FRESHNESS_MIN_SYNC_GAP_MS", "0"),
        ("CGC_FRESHNESS_MAX_SYNCS_PER_SESSION", "10"),
        // Every answer of the worker's resolution memo is checked against
        // CGC's own resolution run whole; a difference fails the sync.
        ("CGC_FRESH_VERIFY_RESOLUTION", "1"),
        // Likewise every answer of its stored-edge memo (Kùzu), against a
        // fresh read of the database.
        ("CGC_FRESH_VERIFY_STORED_EDGES", "1"),
        // And a tree the worker prepared ahead of a sync, against the
        // tree parsed and resolved again.
        ("CGC_FRESH_VERIFY_PREPARED", "1"),
    ];
    env.extend(cli.env.iter().map(|(k, v)| (k.as_str(), v.as_str())));
    env.extend(extra.iter().copied());
    Service::start(sandbox, &[], &env)
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
/// the graph was built: the driver finds out by comparing the graph with
/// the tree (a baseline), and the sync records a manifest. A person's
/// `sync` makes that first sync before the edits under test.
pub(crate) fn baseline_sync(conn: &mut crate::support::Conn, service: &Service) {
    conn.request(json!({"type": "sync"}), 77);
    wait_synced_fresh(conn);
    assert_eq!(strategies_run(service), ["baseline"], "no manifest yet");
}

/// The `incremental_applied` events of the syncs that were not a baseline
/// (the session's first sync, with no manifest, is one).
pub(crate) fn applied_after_the_baseline(service: &Service) -> Vec<Value> {
    service
        .log_events("incremental_applied")
        .into_iter()
        .filter(|e| e["baseline"] == false)
        .collect()
}

/// The strategy `status --json` names for the last sync.
fn status_detail(sandbox: &Sandbox) -> String {
    let out = sandbox
        .command()
        .args(["status", "--json"])
        .output()
        .unwrap();
    let status: Value = serde_json::from_slice(&out.stdout).unwrap();
    status["detail"].as_str().unwrap_or_default().to_string()
}

// ---- Each kind of edit reaches the graph before `fresh` ----------------------

/// A rename of a called function, a deletion, an added module calling into
/// an existing one and a changed base class, each its own sync: `fresh`
/// comes only with a graph that shows it, and every one of those syncs ran
/// `incremental` (no silent fallback).
fn edits_reach_the_graph_before_fresh(backend: &GraphBackend) {
    let Some(cgc) = backend.real_cgc() else {
        return;
    };
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
    let cli = backend.cli(&cgc, &ws, &home, "codegraph");
    cli.index();
    assert_eq!(
        callers_of(&cli, "old_name"),
        ["beta_main".to_string()].into()
    );
    assert_eq!(parents_of(&cli, "Child"), ["Base".to_string()].into());

    let service = service(&sandbox, &cli, &cgc);
    let mut conn = open_session(&service, "s1");
    baseline_sync(&mut conn, &service);

    // A rename of a called function, in its module and at its call site.
    agent_batch(&mut conn, &["pkg/alpha.py", "pkg/beta.py"], || {
        replace_in(&ws, "pkg/alpha.py", "old_name", "new_name");
        replace_in(&ws, "pkg/beta.py", "old_name", "new_name");
    });
    let fresh = wait_synced_fresh(&mut conn);
    assert!(
        fresh["detail"]
            .as_str()
            .unwrap_or("")
            .contains("incremental"),
        "{fresh}"
    );
    assert_eq!(functions(&cli, "old_name"), 0);
    assert_eq!(functions(&cli, "new_name"), 1);
    assert_eq!(
        callers_of(&cli, "new_name"),
        ["beta_main".to_string()].into()
    );

    // A deletion.
    agent_batch(&mut conn, &["pkg/beta.py"], || {
        fs::remove_file(ws.join("pkg/beta.py")).unwrap()
    });
    wait_synced_fresh(&mut conn);
    assert_eq!(functions(&cli, "beta_main"), 0);
    assert!(callers_of(&cli, "new_name").is_empty());

    // An added module calling into an existing one.
    agent_batch(&mut conn, &["pkg/gamma.py"], || {
        write(
            &ws,
            "pkg/gamma.py",
            "from pkg.alpha import helper\n\n\ndef gamma_added():\n    return helper(7)\n",
        )
    });
    wait_synced_fresh(&mut conn);
    assert_eq!(functions(&cli, "gamma_added"), 1);
    assert!(
        callers_of(&cli, "helper").contains("gamma_added"),
        "the new module's call is linked"
    );

    // A changed base class.
    agent_batch(&mut conn, &["pkg/child.py"], || {
        replace_in(
            &ws,
            "pkg/child.py",
            "class Child(Base)",
            "class Child(Other)",
        )
    });
    wait_synced_fresh(&mut conn);
    assert_eq!(parents_of(&cli, "Child"), ["Other".to_string()].into());

    let ran = strategies_run(&service);
    assert_eq!(
        ran,
        [
            "baseline",
            "incremental",
            "incremental",
            "incremental",
            "incremental"
        ],
        "every sync after the baseline ran incremental: {ran:?}"
    );
    let detail = status_detail(&sandbox);
    assert!(
        detail.contains("incremental") && !detail.contains("instead of"),
        "status --json names the strategy that ran: {detail}"
    );
}

on_every_backend!(
    edits_reach_the_graph_before_fresh,
    renames_deletions_additions_and_base_changes_reach_the_graph_before_fresh_on_kuzu,
    renames_deletions_additions_and_base_changes_reach_the_graph_before_fresh_on_ladybugdb,
    renames_deletions_additions_and_base_changes_reach_the_graph_before_fresh_on_falkordb_lite,
    renames_deletions_additions_and_base_changes_reach_the_graph_before_fresh_on_a_falkordb_server
);

// ---- The synced graph equals a from-scratch index ----------------------------

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

/// One half of the equality batch: the paths it touches (as the harness
/// reports them) and its writes.
struct Half {
    paths: &'static [&'static str],
    apply: fn(&Path),
}

/// Renames a called function (its callers in mod_006 stay unresolved) and
/// deletes an imported module (mod_021 imports it).
const RENAME_AND_DELETE: Half = Half {
    paths: &["pkg/mod_005.py", "pkg/mod_020.py"],
    apply: |ws| {
        replace_in(ws, "pkg/mod_005.py", "m005_export", "m005_exported");
        fs::remove_file(ws.join("pkg/mod_020.py")).unwrap();
    },
};

/// Adds a module that calls into existing ones — among them the function
/// the other half renames, by its new name, and one of the module it
/// deletes — moves one module into a new package and changes a base class.
/// Against the other half its links depend on which sync comes first.
const ADD_MOVE_AND_REBASE: Half = Half {
    paths: &[
        "pkg/mod_new.py",
        "pkg/mod_025.py",
        "pkg/sub/__init__.py",
        "pkg/sub/mod_025.py",
        "pkg/mod_012.py",
    ],
    apply: |ws| {
        write(
            ws,
            "pkg/mod_new.py",
            "from pkg.mod_003 import m003_export\n\
             from pkg.mod_005 import m005_exported\n\
             from pkg.mod_020 import m020_export\n\n\n\
             def brand_new(x):\n    return m003_export(x) + m005_exported(x) + m020_export(x)\n",
        );
        write(ws, "pkg/sub/__init__.py", "");
        fs::rename(ws.join("pkg/mod_025.py"), ws.join("pkg/sub/mod_025.py")).unwrap();
        replace_in(
            ws,
            "pkg/mod_012.py",
            "class Widget012(Widget011)",
            "class Widget012(Widget003)",
        );
        replace_in(
            ws,
            "pkg/mod_012.py",
            "import m011_export, Widget011\n",
            "import m011_export, Widget011\nfrom pkg.mod_003 import Widget003\n",
        );
    },
};

/// Syncs the batch as `syncs` (each an agent call applying its halves, then
/// a sync) into the graph `name` of a fresh workspace, and returns the
/// synced graph's dump and a from-scratch index's of the final tree.
fn synced_and_from_scratch(
    cgc: &Path,
    backend: &GraphBackend,
    name: &str,
    syncs: &[&[Half]],
) -> (GraphDump, GraphDump) {
    let sandbox = Sandbox::new();
    let ws = sandbox.workspace();
    write_modules(&ws, 30);
    let synced = backend.cli(cgc, &ws, &sandbox.home(), name);
    synced.index();

    let service = service(&sandbox, &synced, cgc);
    let mut conn = open_session(&service, "s1");
    baseline_sync(&mut conn, &service);
    for halves in syncs {
        let paths: Vec<&str> = halves
            .iter()
            .flat_map(|h| h.paths.iter().copied())
            .collect();
        agent_batch(&mut conn, &paths, || {
            for half in halves.iter() {
                (half.apply)(&ws)
            }
        });
        wait_synced_fresh(&mut conn);
    }
    let mut expected = vec!["baseline"];
    expected.extend(syncs.iter().map(|_| "incremental"));
    assert_eq!(strategies_run(&service), expected, "{name}");
    if syncs.len() > 1 {
        // The worker's later syncs took most files' resolved calls from
        // its memo, checked against CGC's whole resolution.
        let applied = service.log_events("incremental_applied");
        let last = applied.last().expect("an incremental sync");
        let timings = last["timings"].as_str().unwrap_or_default();
        assert!(
            timing(timings, "resolution_reused").is_some_and(|n| n > 0.0)
                && timing(timings, "resolution_verified") == Some(1.0),
            "{name}: {last}"
        );
        // On Kùzu it also took the stored edges from its memo (checked
        // against a fresh read); a server's graph is always read.
        let remembered = if backend.is_kuzu() { 1.0 } else { 0.0 };
        assert_eq!(
            timing(timings, "stored_edges_remembered"),
            Some(remembered),
            "{name}: {last}"
        );
        // Kùzu's edges are read straight through its connection; a
        // server's through CGC's session.
        assert_eq!(
            timing(timings, "stored_edges_read_direct"),
            Some(remembered),
            "{name}: {last}"
        );
        // On the embedded Kùzu session (Kùzu's and LadybugDB's), a file
        // written again kept its directories through its delete, and its
        // Parameter rows were merged in one batch; FalkorDB's session is
        // left as CGC ships it.
        for key in ["directory_queries_kept", "parameter_batches"] {
            let used = timing(timings, key).unwrap_or(0.0);
            assert!(
                (used > 0.0) == backend.has_embedded_session(),
                "{name}: {key}: {last}"
            );
        }
        // The worker, idle when the edits settled, had parsed and resolved
        // the tree before the sync asked (checked against doing it again).
        assert!(
            timing(timings, "prepared_used") == Some(1.0)
                && timing(timings, "prepared_verified") == Some(1.0),
            "{name}: {last}"
        );
        // The worker the session's start warmed prepared then, and for
        // every edit.
        assert_eq!(
            service.log_events("driver_worker_prepare").len(),
            syncs.len() + 1,
            "{name}"
        );
    }
    drop(conn);
    // Kùzu lets one process at a time open the database.
    drop(service);
    let synced = synced.dump();
    assert!(
        synced.relationships.iter().any(|r| r.contains("brand_new")),
        "{name}: the added module is linked"
    );

    let scratch_home = sandbox.root.path().join("scratch-home");
    fs::create_dir_all(&scratch_home).unwrap();
    let scratch = backend.cli(cgc, &ws, &scratch_home, &format!("{name}-scratch"));
    scratch.index();
    (synced, scratch.dump())
}

/// A number from the driver's timings as the service logs them (the debug
/// form of a map: `"name": 1.0`).
pub(crate) fn timing(timings: &str, name: &str) -> Option<f64> {
    let rest = &timings[timings.find(&format!("\"{name}\": "))? + name.len() + 4..];
    let end = rest.find([',', '}']).unwrap_or(rest.len());
    rest[..end].trim().parse().ok()
}

/// Indexes the sandbox's workspace from scratch into a graph of its own
/// (another HOME; `graph`-scratch on a server) and asserts that `synced`
/// equals it.
pub(crate) fn assert_same_as_from_scratch(
    cgc: &Path,
    backend: &GraphBackend,
    sandbox: &Sandbox,
    synced: &GraphDump,
    graph: &str,
    what: &str,
) {
    assert_same_as_scratch_named(cgc, backend, sandbox, synced, graph, "scratch", what);
}

/// `assert_same_as_from_scratch` into the scratch graph `scratch` names
/// (HOME `scratch`-home; `graph`-`scratch` on a server): `cgc index .`
/// wants a graph that does not hold the workspace yet, so a test that
/// compares more than once names a new one each time.
pub(crate) fn assert_same_as_scratch_named(
    cgc: &Path,
    backend: &GraphBackend,
    sandbox: &Sandbox,
    synced: &GraphDump,
    graph: &str,
    scratch: &str,
    what: &str,
) {
    let scratch_home = sandbox.root.path().join(format!("{scratch}-home"));
    fs::create_dir_all(&scratch_home).unwrap();
    let scratch = backend.cli(
        cgc,
        &sandbox.workspace(),
        &scratch_home,
        &format!("{graph}-{scratch}"),
    );
    scratch.index();
    assert_same_graph(synced, &scratch.dump(), what);
}

pub(crate) fn assert_same_graph(synced: &GraphDump, scratch: &GraphDump, what: &str) {
    let diff = |a: &BTreeSet<String>, b: &BTreeSet<String>| {
        a.difference(b).take(10).cloned().collect::<Vec<_>>()
    };
    assert_eq!(
        (synced.nodes.len(), synced.relationships.len()),
        (scratch.nodes.len(), scratch.relationships.len()),
        "{what}: only synced: {:?} / {:?}; only from scratch: {:?} / {:?}",
        diff(&synced.nodes, &scratch.nodes),
        diff(&synced.relationships, &scratch.relationships),
        diff(&scratch.nodes, &synced.nodes),
        diff(&scratch.relationships, &synced.relationships),
    );
    assert_eq!(synced.nodes, scratch.nodes, "{what}: nodes differ");
    assert_eq!(
        synced.relationships, scratch.relationships,
        "{what}: relationships differ"
    );
}

/// The whole batch (rename a called function, delete an imported module,
/// add one, move one, change a base class) in one sync.
fn one_sync_equals_from_scratch(backend: &GraphBackend) {
    let Some(cgc) = backend.real_cgc() else {
        return;
    };
    let (synced, scratch) = synced_and_from_scratch(
        &cgc,
        backend,
        "one-sync",
        &[&[RENAME_AND_DELETE, ADD_MOVE_AND_REBASE]],
    );
    assert_same_graph(&synced, &scratch, "the batch in one sync");
}

/// "Applied in both orders": within one sync the driver applies the paths
/// sorted, whatever order they were reported in, so the order that can
/// change the result is the order of the syncs. The batch is split into two
/// halves whose links depend on each other (see `ADD_MOVE_AND_REBASE`) and
/// synced as two syncs, A then B in one workspace and B then A in another;
/// each graph equals a from-scratch index of the same final tree.
fn both_orders_equal_from_scratch(backend: &GraphBackend) {
    let Some(cgc) = backend.real_cgc() else {
        return;
    };
    for (name, syncs) in [
        ("a-then-b", [RENAME_AND_DELETE, ADD_MOVE_AND_REBASE]),
        ("b-then-a", [ADD_MOVE_AND_REBASE, RENAME_AND_DELETE]),
    ] {
        let [first, second] = syncs;
        let (synced, scratch) =
            synced_and_from_scratch(&cgc, backend, name, &[&[first], &[second]]);
        assert_same_graph(&synced, &scratch, name);
    }
}

on_every_backend!(
    one_sync_equals_from_scratch,
    an_incremental_sync_leaves_the_graph_a_from_scratch_index_would_build_on_kuzu,
    an_incremental_sync_leaves_the_graph_a_from_scratch_index_would_build_on_ladybugdb,
    an_incremental_sync_leaves_the_graph_a_from_scratch_index_would_build_on_falkordb_lite,
    an_incremental_sync_leaves_the_graph_a_from_scratch_index_would_build_on_a_falkordb_server
);

on_every_backend!(
    both_orders_equal_from_scratch,
    two_syncs_in_either_order_leave_the_graph_a_from_scratch_index_would_build_on_kuzu,
    two_syncs_in_either_order_leave_the_graph_a_from_scratch_index_would_build_on_ladybugdb,
    two_syncs_in_either_order_leave_the_graph_a_from_scratch_index_would_build_on_falkordb_lite,
    two_syncs_in_either_order_leave_the_graph_a_from_scratch_index_would_build_on_a_falkordb_server
);

// ---- The worker's resolution memo -------------------------------------------

/// Edits whose effect on call resolution reaches files that did not
/// change: a class rebased onto one with other methods (its users' method
/// calls), a called function renamed and replaced by another arity (its
/// callers), and a new module defining a second function of a called name
/// (the callers' candidates). Each is its own sync through one worker,
/// whose memo must re-resolve exactly the affected files: every answer is
/// checked against CGC's whole resolution (`CGC_FRESH_VERIFY_RESOLUTION`),
/// the later syncs must have reused files, and the final graph equals a
/// from-scratch index.
fn memo_follows_edits_into_unchanged_files(backend: &GraphBackend) {
    let Some(cgc) = backend.real_cgc() else {
        return;
    };
    let sandbox = Sandbox::new();
    let (ws, home) = (sandbox.workspace(), sandbox.home());
    write(&ws, "pkg/__init__.py", "");
    write(
        &ws,
        "pkg/base.py",
        "class Base:\n    def greet(self):\n        return 1\n",
    );
    write(
        &ws,
        "pkg/other.py",
        "class Other:\n    def greet(self):\n        return 2\n\n    def extra(self):\n        return 3\n",
    );
    write(
        &ws,
        "pkg/child.py",
        "from pkg.base import Base\nfrom pkg.other import Other\n\n\nclass Child(Base):\n    pass\n",
    );
    write(
        &ws,
        "pkg/user.py",
        "from pkg.child import Child\n\n\ndef use():\n    c = Child()\n    return c.greet() + c.extra()\n",
    );
    write(&ws, "pkg/helpers.py", "def helper(x):\n    return x\n");
    write(
        &ws,
        "pkg/caller.py",
        "from pkg.helpers import helper\n\n\ndef call():\n    return helper(1)\n\n\ndef call_two():\n    return helper(1, 2)\n",
    );
    let cli = backend.cli(&cgc, &ws, &home, "memo");
    cli.index();
    let service = service(&sandbox, &cli, &cgc);
    let mut conn = open_session(&service, "s1");
    baseline_sync(&mut conn, &service);

    let edits = [
        Half {
            paths: &["pkg/child.py"],
            apply: |ws| {
                replace_in(
                    ws,
                    "pkg/child.py",
                    "class Child(Base)",
                    "class Child(Other)",
                )
            },
        },
        Half {
            paths: &["pkg/helpers.py"],
            apply: |ws| {
                write(
                    ws,
                    "pkg/helpers.py",
                    "def helper_one(x):\n    return x\n\n\ndef helper(x, y):\n    return x + y\n",
                )
            },
        },
        Half {
            paths: &["pkg/late.py"],
            apply: |ws| write(ws, "pkg/late.py", "def helper(x):\n    return -x\n"),
        },
    ];
    for edit in edits {
        agent_batch(&mut conn, edit.paths, || (edit.apply)(&ws));
        wait_synced_fresh(&mut conn);
    }
    let applied = applied_after_the_baseline(&service);
    assert_eq!(applied.len(), 3, "{applied:?}");
    let remembered = if backend.is_kuzu() { 1.0 } else { 0.0 };
    for later in &applied[1..] {
        let timings = later["timings"].as_str().unwrap_or_default();
        assert_eq!(timing(timings, "resolution_verified"), Some(1.0), "{later}");
        assert_eq!(
            timing(timings, "stored_edges_remembered"),
            Some(remembered),
            "{later}"
        );
        assert!(
            timing(timings, "resolution_reused").is_some_and(|n| n > 0.0),
            "the memo answered for the files no edit reached: {later}"
        );
    }
    drop(conn);
    drop(service);
    let synced = cli.dump();
    assert!(
        synced
            .relationships
            .iter()
            .any(|r| r.contains("CALLS") && r.contains("extra")),
        "user.py's call of extra() now resolves through Other: {:?}",
        synced.relationships
    );
    assert_same_as_from_scratch(
        &cgc,
        backend,
        &sandbox,
        &synced,
        "memo",
        "after the memo's syncs",
    );
}

on_every_backend!(
    memo_follows_edits_into_unchanged_files,
    the_resolution_memo_follows_edits_into_files_that_did_not_change_on_kuzu,
    the_resolution_memo_follows_edits_into_files_that_did_not_change_on_ladybugdb,
    the_resolution_memo_follows_edits_into_files_that_did_not_change_on_falkordb_lite,
    the_resolution_memo_follows_edits_into_files_that_did_not_change_on_a_falkordb_server
);

// ---- Only what changed is re-linked ----------------------------------------

/// Calls CGC resolves to something its writer never stores an edge to: a
/// function of the same name that is not there (`os.path.dirname` resolved
/// to this file), a parameter called (`cls(...)`, `fn(...)`: no edge on a
/// typed schema, one only when the call has no line elsewhere), a method
/// matched by context, decorators.
const UNSTORED_TARGETS: &str = "import os\nfrom functools import wraps\n\n\n\
def deco(fn):\n    @wraps(fn)\n    def inner(*args):\n        return fn(*args)\n    return inner\n\n\n\
class Maker:\n    @classmethod\n    def make(cls, value):\n        return cls(value)\n\n    \
@staticmethod\n    @deco\n    def helper(path):\n        return os.path.dirname(path)\n\n    \
def run(self, path):\n        return self.helper(path)\n\n\n\
@deco\ndef decorated(value):\n    return Maker.make(value).run(os.path.join(value, \"a\"))\n";

/// One edit of a module nothing calls: the sync re-links that module alone.
/// Files whose resolved calls include rows CGC's writer drops (see
/// `UNSTORED_TARGETS`) must not look changed on every sync — on a real code
/// base (`pip`) that was a third of the files re-linked for any edit.
fn an_edit_relinks_only_what_changed(backend: &GraphBackend) {
    let Some(cgc) = backend.real_cgc() else {
        return;
    };
    let sandbox = Sandbox::new();
    let (ws, home) = (sandbox.workspace(), sandbox.home());
    write(&ws, "pkg/__init__.py", "");
    write(&ws, "pkg/tricky.py", UNSTORED_TARGETS);
    write(
        &ws,
        "pkg/user.py",
        "from pkg.tricky import decorated, Maker\n\n\n\
         def use(value):\n    return decorated(value) or Maker.make(value)\n",
    );
    write(&ws, "pkg/leaf.py", "def leaf(x):\n    return x + 1\n");
    let cli = backend.cli(&cgc, &ws, &home, "relink");
    cli.index();

    let service = service(&sandbox, &cli, &cgc);
    let mut conn = open_session(&service, "s1");
    baseline_sync(&mut conn, &service);
    agent_batch(&mut conn, &["pkg/leaf.py"], || {
        replace_in(&ws, "pkg/leaf.py", "x + 1", "x + 2")
    });
    wait_synced_fresh(&mut conn);
    let applied = applied_after_the_baseline(&service);
    assert_eq!(applied.len(), 1, "one incremental sync: {applied:?}");
    assert_eq!(
        applied[0]["relinked"], 1,
        "only the edited module is re-linked: {}",
        applied[0]
    );
}

on_every_backend!(
    an_edit_relinks_only_what_changed,
    an_edit_relinks_only_what_changed_when_some_calls_resolve_to_nothing_stored_on_kuzu,
    an_edit_relinks_only_what_changed_when_some_calls_resolve_to_nothing_stored_on_ladybugdb,
    an_edit_relinks_only_what_changed_when_some_calls_resolve_to_nothing_stored_on_falkordb_lite,
    an_edit_relinks_only_what_changed_when_some_calls_resolve_to_nothing_stored_on_a_falkordb_server
);

// ---- The driver's worker ---------------------------------------------------

pub(crate) fn worker_pids(service: &Service) -> Vec<i64> {
    service
        .log_events("driver_worker_started")
        .iter()
        .filter_map(|e| e["pid"].as_i64())
        .collect()
}

/// The incremental driver runs as one long-lived worker: the syncs of a
/// service share it (CGC imported once), it holds the database only while
/// it applies a sync — the person's own `cgc` works between syncs while it
/// lives — a worker that died is replaced by the next sync, and the
/// service's stop takes it down.
#[test]
fn one_worker_applies_successive_syncs_holds_no_lock_between_them_and_stops_with_the_service() {
    let Some(cgc) = real_cgc() else { return };
    let sandbox = Sandbox::new();
    let (ws, home) = (sandbox.workspace(), sandbox.home());
    write(&ws, "pkg/__init__.py", "");
    write(&ws, "pkg/a.py", "def first(x):\n    return x\n");
    write(&ws, "pkg/b.py", "def second(x):\n    return x\n");
    let cli = GraphBackend::Kuzu.cli(&cgc, &ws, &home, "worker");
    cli.index();
    let mut service = service(&sandbox, &cli, &cgc);
    let mut conn = open_session(&service, "s1");
    baseline_sync(&mut conn, &service);

    agent_batch(&mut conn, &["pkg/a.py"], || {
        replace_in(&ws, "pkg/a.py", "def first(", "def first_renamed(")
    });
    wait_synced_fresh(&mut conn);
    let pids = worker_pids(&service);
    assert_eq!(pids.len(), 1, "one worker started: {pids:?}");
    let worker = pids[0] as i32;
    assert!(
        crate::support::is_alive(worker),
        "it waits for the next sync"
    );
    // Between syncs the database is free: the person's own query runs.
    assert_eq!(functions(&cli, "first_renamed"), 1);
    assert_eq!(functions(&cli, "first"), 0);

    agent_batch(&mut conn, &["pkg/b.py"], || {
        replace_in(&ws, "pkg/b.py", "def second(", "def second_renamed(")
    });
    wait_synced_fresh(&mut conn);
    assert_eq!(
        worker_pids(&service),
        pids,
        "the second sync used the same worker"
    );
    assert_eq!(functions(&cli, "second_renamed"), 1);

    // A worker that died between syncs is replaced by the next one (once
    // the runner has heard of its death: see the note at `Worker`).
    crate::support::send_signal(worker, libc::SIGKILL);
    wait_worker_exits(&service, 1);
    agent_batch(&mut conn, &["pkg/a.py"], || {
        replace_in(&ws, "pkg/a.py", "def first_renamed(", "def first_again(")
    });
    wait_synced_fresh(&mut conn);
    assert_eq!(functions(&cli, "first_again"), 1);
    let pids = worker_pids(&service);
    assert_eq!(pids.len(), 2, "a second worker: {pids:?}");
    assert_eq!(
        strategies_run(&service),
        ["baseline", "incremental", "incremental", "incremental"]
    );

    // The service's stop takes the worker down with it.
    let second = pids[1] as i32;
    assert!(crate::support::is_alive(second));
    drop(conn);
    service.signal(libc::SIGTERM);
    service.wait_exit(std::time::Duration::from_secs(30));
    assert!(
        !crate::support::is_alive(second),
        "the worker outlived the service"
    );
}

// ---- The fallback ------------------------------------------------------------

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
    // The first sync has no manifest: it would take a baseline with the
    // driver, whose probe fails, so it reconciles — and says so.
    conn.request(json!({"type": "sync"}), 77);
    conn.wait_status("fresh");
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
    assert_eq!(
        calls.len(),
        2,
        "the baseline's fallback and the edit's: {calls:?}"
    );
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

/// A driver that answers its probe in another line protocol than the
/// service's (an old driver file, a mismatched build) is not run: nothing
/// it says can be trusted. The sync reconciles, and the person is told
/// why, once.
#[test]
fn a_driver_of_another_protocol_is_not_run_and_the_sync_reconciles() {
    let stub = tempfile::tempdir().unwrap();
    let python = stub.path().join("python");
    fs::write(
        &python,
        "#!/usr/bin/env python3\nimport json, sys\n\
         answer = {'protocol': 2, 'ok': True, 'mode': 'probe', 'missing': []}\n\
         if '--probe' in sys.argv[1:]:\n    print('CGC_FRESH_RESULT ' + json.dumps(answer))\n    sys.exit(0)\n\
         for line in sys.stdin:\n\
         \x20   request = json.loads(line)\n\
         \x20   if request.get('probe'):\n\
         \x20       print('CGC_FRESH_RESULT ' + json.dumps(dict(answer, serial=request['serial'], exit=0)), flush=True)\n\
         \x20   elif not request.get('prepare'):\n\
         \x20       print('applied by a driver of another protocol', file=sys.stderr, flush=True)\n\
         sys.exit(0)\n",
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    fs::set_permissions(&python, fs::Permissions::from_mode(0o755)).unwrap();
    let python = python.display().to_string();
    let (_sandbox, fake, service) = indexed_with_fake(
        json!({}),
        &fast_env(&[
            ("CGC_SYNC_STRATEGY", "incremental"),
            ("CGC_FRESH_DRIVER_PYTHON", python.as_str()),
        ]),
    );
    let mut conn = crate::support::open_session(&service, "s1");
    crate::support::agent_edit(&mut conn, "s1", "src/a.py");
    conn.wait_status("fresh");
    let notice = conn.wait_seen("the fallback notice", |f| {
        f["type"] == "notice" && f["condition"] == "sync_strategy_fell_back"
    });
    assert!(
        notice["text"]
            .as_str()
            .unwrap_or_default()
            .contains("protocol 2, this service speaks 1"),
        "{notice}"
    );
    let calls = fake.invocations();
    assert!(
        calls
            .iter()
            .any(|c| args_of(c) == json!(["watch", "--sync-on-start", "."])),
        "the sync reconciled: {calls:?}"
    );
    assert!(
        !service
            .log_text()
            .contains("applied by a driver of another protocol"),
        "the driver was never asked to apply"
    );
}

// ---- The worker's supervision, with a stand-in driver -------------------------

/// A stand-in for the driver's interpreter (`CGC_FRESH_DRIVER_PYTHON`): its
/// API probe passes; as a worker it answers a baseline request (the first
/// sync, with no manifest) as one that found nothing changed, takes the
/// next request and then never answers, as a driver stuck in a long apply
/// would.
fn stuck_worker_python(dir: &Path) -> String {
    let stub = dir.join("python");
    fs::write(
        &stub,
        "#!/bin/sh\ncase \" $* \" in\n\
         *\" --probe \"*) echo 'CGC_FRESH_RESULT {\"protocol\": 1, \"ok\": true, \"mode\": \"probe\", \"missing\": []}'; exit 0 ;;\n\
         *\" serve \"*) while read request; do case \"$request\" in\n\
         *'\"prepare\":true'*) ;;\n\
         *'\"probe\":true'*) serial=$(echo \"$request\" | sed 's/.*\"serial\":\\([0-9]*\\).*/\\1/');\n\
         echo \"CGC_FRESH_RESULT {\\\"protocol\\\": 1, \\\"ok\\\": true, \\\"mode\\\": \\\"probe\\\", \\\"missing\\\": [], \\\"serial\\\": $serial, \\\"exit\\\": 0}\" ;;\n\
         *'\"baseline\":true'*) serial=$(echo \"$request\" | sed 's/.*\"serial\":\\([0-9]*\\).*/\\1/');\n\
         echo \"CGC_FRESH_RESULT {\\\"ok\\\": true, \\\"mode\\\": \\\"apply\\\", \\\"baseline\\\": true, \\\"paths\\\": {}, \\\"serial\\\": $serial, \\\"exit\\\": 0}\" ;;\n\
         *) echo \"worker got $request\" >&2; exec sleep 600 ;;\n\
         esac; done ;;\n\
         esac\nexit 2\n",
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    fs::set_permissions(&stub, fs::Permissions::from_mode(0o755)).unwrap();
    stub.display().to_string()
}

/// A service whose sync is stuck in the stand-in worker.
struct StuckWorker {
    _stub: tempfile::TempDir,
    _sandbox: Sandbox,
    fake: crate::support::FakeCgc,
    service: Service,
    conn: crate::support::Conn,
    pid: i32,
}

/// Baseline (answered by the stand-in worker, which also answers the
/// warm-up's probe and takes a prepare silently), then an edit whose sync
/// goes to the stuck worker, which has the request when this returns.
fn sync_stuck_in_the_worker(extra: &[(&str, &str)]) -> StuckWorker {
    let stub = tempfile::tempdir().unwrap();
    let python = stuck_worker_python(stub.path());
    let mut env = vec![
        ("CGC_SYNC_STRATEGY", "incremental"),
        ("CGC_FRESH_DRIVER_PYTHON", python.as_str()),
    ];
    env.extend_from_slice(extra);
    let (sandbox, fake, service) = indexed_with_fake(json!({}), &fast_env(&env));
    let mut conn = open_session(&service, "s1");
    conn.request(json!({"type": "sync"}), 77);
    conn.wait_status("fresh");
    crate::support::agent_edit(&mut conn, "s1", "src/a.py");
    crate::support::wait_until(
        "the worker has the request",
        std::time::Duration::from_secs(20),
        || service.log_text().contains("worker got"),
    );
    let pid = worker_pids(&service)[0] as i32;
    StuckWorker {
        _stub: stub,
        _sandbox: sandbox,
        fake,
        service,
        conn,
        pid,
    }
}

fn wait_worker_exits(service: &Service, count: usize) {
    crate::support::wait_until(
        "the runner heard of the worker's exit",
        std::time::Duration::from_secs(10),
        || service.log_events("driver_worker_exited").len() >= count,
    );
}

fn wait_gone(pid: i32) {
    crate::support::wait_until(
        "the worker stopped",
        std::time::Duration::from_secs(10),
        || !crate::support::is_alive(pid),
    );
}

/// A session that ends while the worker applies its sync stops the worker
/// (the run is cancelled; nothing claims `fresh`).
#[test]
fn a_session_ending_while_the_worker_applies_its_sync_stops_the_worker() {
    // Bound whole: the sandbox (and its log) must live to the end.
    let mut stuck = sync_stuck_in_the_worker(&[]);
    let (service, conn, pid) = (&stuck.service, &mut stuck.conn, stuck.pid);
    let reply = conn.request(
        json!({"type": "session_shutdown", "session": "s1", "reason": "quit"}),
        7,
    );
    assert_eq!(reply["type"], "ack", "{reply}");
    wait_gone(pid);
    // Its exit reaches the runner once the supervisor has reaped it and
    // drained its output.
    wait_worker_exits(service, 1);
    let exits = service.log_events("driver_worker_exited");
    assert_eq!(exits.len(), 1, "{exits:?}");
    assert_eq!(exits[0]["applying"], true, "{}", exits[0]);
    let state = conn.request(json!({"type": "status"}), 8);
    assert_ne!(state["status"], "fresh", "{state}");
}

/// A worker out of its time budget is stopped, and the next sync (here the
/// failed sync's retry) reconciles, since the graph may be partial, instead
/// of asking a worker again.
#[test]
fn a_worker_out_of_time_is_stopped_and_the_next_sync_reconciles() {
    let mut stuck = sync_stuck_in_the_worker(&[("CGC_MAINTENANCE_TIMEOUT_MS", "1500")]);
    let (fake, service, conn, pid) = (&stuck.fake, &stuck.service, &mut stuck.conn, stuck.pid);
    let before = fake.invocations().len();
    wait_gone(pid);
    let (fresh, _) = conn.recv_until("fresh after a reconcile", |f| {
        f["type"] == "state" && f["status"] == "fresh" && f["syncing"] == false
    });
    assert!(
        fresh["detail"]
            .as_str()
            .unwrap_or_default()
            .contains("did not finish"),
        "{fresh}"
    );
    assert!(service.log_text().contains("\"sync_timeout\""));
    let calls = fake.invocations();
    assert_eq!(calls.len(), before + 1, "one reconcile: {calls:?}");
    assert_eq!(
        args_of(&calls[before]),
        json!(["watch", "--sync-on-start", "."])
    );
    assert_eq!(worker_pids(service).len(), 1, "no worker was asked again");
}

/// A stand-in driver interpreter whose every worker answers its first
/// `answered` requests at once, as applied, and then, given the next one,
/// ends with 0 without answering: as a worker whose idle time-out strikes
/// just as the request is written does. A baseline request (the session's
/// first sync: no manifest yet) is always answered, as a baseline that
/// found nothing changed, and not counted.
pub(crate) fn stand_in_worker_python(dir: &Path, answered: usize) -> String {
    let stub = dir.join("python");
    fs::write(
        &stub,
        format!(
            "#!/usr/bin/env python3\nimport json, sys\nargs = sys.argv[1:]\n\
             if '--probe' in args:\n    print('CGC_FRESH_RESULT ' + json.dumps({{'protocol': 1, 'ok': True, 'mode': 'probe', 'missing': []}}))\n    sys.exit(0)\n\
             if args and args[-1] == 'serve':\n    count = 0\n    for line in sys.stdin:\n\
             \x20       request = json.loads(line)\n\
             \x20       if request.get('prepare'):\n            continue\n\
             \x20       if request.get('probe'):\n\
             \x20           probed = {{'protocol': 1, 'ok': True, 'mode': 'probe', 'missing': [], 'serial': request['serial'], 'exit': 0}}\n\
             \x20           print('CGC_FRESH_RESULT ' + json.dumps(probed), flush=True)\n            continue\n\
             \x20       if request.get('baseline'):\n\
             \x20           found = {{'ok': True, 'mode': 'apply', 'serial': request['serial'], 'exit': 0, 'baseline': True, 'paths': {{}}}}\n\
             \x20           print('CGC_FRESH_RESULT ' + json.dumps(found), flush=True)\n            continue\n\
             \x20       if count >= {answered}:\n            sys.exit(0)\n\
             \x20       count += 1\n\
             \x20       answer = {{'ok': True, 'mode': 'apply', 'serial': request['serial'], 'exit': 0,\n\
             \x20                 'paths': {{path: 'modified' for path in request['paths']}}}}\n\
             \x20       print('CGC_FRESH_RESULT ' + json.dumps(answer), flush=True)\n    sys.exit(0)\nsys.exit(2)\n"
        ),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    fs::set_permissions(&stub, fs::Permissions::from_mode(0o755)).unwrap();
    stub.display().to_string()
}

/// A service on the fake `cgc` whose incremental syncs go to the stand-in
/// worker (`stand_in_worker_python`), its session's baseline taken.
struct StandInWorker {
    _stub: tempfile::TempDir,
    sandbox: Sandbox,
    fake: crate::support::FakeCgc,
    service: Service,
    conn: crate::support::Conn,
}

fn service_with_stand_in_worker(answered: usize) -> StandInWorker {
    let stub = tempfile::tempdir().unwrap();
    let python = stand_in_worker_python(stub.path(), answered);
    let (sandbox, fake, service) = indexed_with_fake(
        json!({}),
        &fast_env(&[
            ("CGC_SYNC_STRATEGY", "incremental"),
            ("CGC_FRESH_DRIVER_PYTHON", python.as_str()),
            ("CGC_FRESHNESS_MAX_SYNCS_PER_SESSION", "10"),
        ]),
    );
    let mut conn = open_session(&service, "s1");
    conn.request(json!({"type": "sync"}), 77);
    conn.wait_status("fresh");
    StandInWorker {
        _stub: stub,
        sandbox,
        fake,
        service,
        conn,
    }
}

/// The agent edits `path` (its `epoch`-th edit); returns the `fresh` state
/// that follows.
fn edit_until_fresh(conn: &mut crate::support::Conn, path: &str, epoch: u64) -> Value {
    crate::support::agent_edit(conn, "s1", path);
    conn.recv_until("fresh after the edit", |f| {
        f["type"] == "state" && f["status"] == "fresh" && f["edit_epoch"] == epoch
    })
    .0
}

/// A worker that ends by itself (exit 0) as a request reaches it has read
/// nothing and written nothing: a new worker takes the same request, and
/// the edit reaches `fresh` without the full reconcile a failed sync would
/// cost.
#[test]
fn a_worker_that_ends_as_its_request_arrives_is_replaced_and_the_sync_applies() {
    let mut run = service_with_stand_in_worker(1);
    let (fake, service, conn) = (&run.fake, &run.service, &mut run.conn);
    let reconciles = fake.invocations().len();
    edit_until_fresh(conn, "src/a.py", 1);
    // The first worker answered once; given the second request it ends.
    let fresh = edit_until_fresh(conn, "src/b.py", 2);
    let detail = fresh["detail"].as_str().unwrap_or_default();
    assert!(!detail.contains("did not finish"), "{fresh}");
    let replaced = service.log_events("driver_worker_replaced");
    assert_eq!(replaced.len(), 1, "{}", service.log_text());
    assert_eq!(worker_pids(service).len(), 2, "a second worker");
    assert_eq!(
        strategies_run(service),
        ["baseline", "incremental", "incremental"]
    );
    assert_eq!(fake.invocations().len(), reconciles, "no reconcile ran");
}

/// Once only: when the new worker too ends without answering, the sync
/// fails as an unfinished one does (the next sync reconciles).
#[test]
fn a_request_no_worker_answers_fails_the_sync_after_one_replacement() {
    let mut run = service_with_stand_in_worker(0);
    let (service, conn) = (&run.service, &mut run.conn);
    crate::support::agent_edit(conn, "s1", "src/a.py");
    crate::support::wait_until(
        "the sync to fail",
        std::time::Duration::from_secs(20),
        || {
            service.log_events("sync_report").iter().any(|e| {
                let report = e["report"].as_str().unwrap_or_default();
                report.contains("Failed") && report.contains("without its result line")
            })
        },
    );
    assert_eq!(service.log_events("driver_worker_replaced").len(), 1);
    assert_eq!(worker_pids(service).len(), 2, "{}", service.log_text());
    let state = conn.request(json!({"type": "status"}), 8);
    assert_ne!(state["status"], "fresh", "{state}");
}

/// A change of the `cgc` settings (SIGHUP) lets the idle worker go — it
/// was started for the old ones — and the next sync starts another.
#[test]
fn a_change_of_the_cgc_settings_lets_the_idle_worker_go() {
    let mut run = service_with_stand_in_worker(usize::MAX);
    let (sandbox, service, conn) = (&run.sandbox, &run.service, &mut run.conn);
    edit_until_fresh(conn, "src/a.py", 1);
    let first = worker_pids(service);
    assert_eq!(first.len(), 1, "{first:?}");
    let first = first[0] as i32;
    assert!(crate::support::is_alive(first), "idle, waiting");

    let pi = sandbox.workspace().join(".pi");
    fs::create_dir_all(&pi).unwrap();
    fs::write(pi.join("cgc.json"), r#"{"cgc": {"timeoutMs": 12345}}"#).unwrap();
    service.signal(libc::SIGHUP);
    wait_gone(first);
    assert_eq!(service.log_events("driver_worker_dropped").len(), 1);

    edit_until_fresh(conn, "src/b.py", 2);
    assert_eq!(
        worker_pids(service).len(),
        2,
        "a new worker for the new settings"
    );
    assert_eq!(
        strategies_run(service),
        ["baseline", "incremental", "incremental"]
    );
}
