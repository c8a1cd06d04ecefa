//! The incremental driver's parse cache, against the real CLI (0.6.13,
//! on each of the four backends): a sync that takes most parses from a warm cache leaves the graph a
//! from-scratch index of the same tree builds; a corrupt cache, or one
//! made by another CodeGraphContext version, or replaced by a symlink, is
//! ignored (a symlink never followed), every file is parsed again, and the
//! sync is as exact.
//!
//! Real-CLI tests need `CGC_FRESH_REAL_CGC` (see `real_cgc.rs`).

use std::fs;

use serde_json::Value;

use crate::graph_backend::GraphBackend;
use crate::incremental::{
    agent_batch, assert_same_as_from_scratch, baseline_sync, replace_in, service,
    wait_synced_fresh, write, write_modules,
};
use crate::support::{open_session, strategies_run, Sandbox, Service};

/// The cache file in the workspace's state directory.
const CACHE_FILE: &str = "incremental-parse-cache.json";

/// The driver's timings of every applied incremental sync, in order.
pub(crate) fn driver_timings(service: &Service) -> Vec<Value> {
    service
        .log_events("incremental_applied")
        .iter()
        .filter_map(|e| {
            let raw = e["timings"].as_str()?;
            let inner = raw.strip_prefix("Some(")?.strip_suffix(')')?;
            serde_json::from_str(inner).ok()
        })
        .collect()
}

pub(crate) fn figure(timings: &Value, key: &str) -> u64 {
    timings[key]
        .as_f64()
        .unwrap_or_else(|| panic!("no {key} in {timings}")) as u64
}

on_every_backend!(
    warm_and_bad_parse_caches_are_exact,
    a_warm_parse_cache_leaves_the_graph_a_from_scratch_index_would_build_and_a_bad_one_is_ignored_on_kuzu,
    a_warm_parse_cache_leaves_the_graph_a_from_scratch_index_would_build_and_a_bad_one_is_ignored_on_ladybugdb,
    a_warm_parse_cache_leaves_the_graph_a_from_scratch_index_would_build_and_a_bad_one_is_ignored_on_falkordb_lite,
    a_warm_parse_cache_leaves_the_graph_a_from_scratch_index_would_build_and_a_bad_one_is_ignored_on_a_falkordb_server
);

fn warm_and_bad_parse_caches_are_exact(backend: &GraphBackend) {
    let Some(cgc) = backend.real_cgc() else {
        return;
    };
    let sandbox = Sandbox::new();
    let ws = sandbox.workspace();
    write_modules(&ws, 30);
    let synced = backend.cli(&cgc, &ws, &sandbox.home(), "parse-cache");
    synced.index();
    let files = 31; // pkg/__init__.py and 30 modules

    let service = service(&sandbox, &synced, &cgc);
    let mut conn = open_session(&service, "s1");
    baseline_sync(&mut conn, &service);
    let cache = sandbox.state_dir().join(CACHE_FILE);

    // 1. No cache yet: the baseline (the first sync, no manifest) parses
    // every file, and the cache is written; the next sync is warm.
    let t = driver_timings(&service);
    assert_eq!(t.len(), 1, "{t:?}");
    assert_eq!(figure(&t[0], "parse_cache_warm"), 0, "{}", t[0]);
    assert_eq!(figure(&t[0], "parse_cache_hits"), 0, "{}", t[0]);
    assert_eq!(figure(&t[0], "parse_cache_misses"), files, "{}", t[0]);
    let meta = fs::symlink_metadata(&cache).expect("the cache was written");
    assert!(meta.is_file());
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(meta.permissions().mode() & 0o077, 0, "a private file");
    agent_batch(&mut conn, &["pkg/mod_005.py"], || {
        replace_in(&ws, "pkg/mod_005.py", "m005_export", "m005_exported")
    });
    wait_synced_fresh(&mut conn);
    let t = driver_timings(&service);
    assert_eq!(t.len(), 2, "{t:?}");
    assert_eq!(figure(&t[1], "parse_cache_warm"), 1, "{}", t[1]);

    // 2. Warm: a new module calling into an existing one, and a changed
    // base class; only the changed files are parsed (the one edited just
    // before the last sync was stored then, with its digest).
    agent_batch(&mut conn, &["pkg/mod_new.py", "pkg/mod_012.py"], || {
        write(
            &ws,
            "pkg/mod_new.py",
            "from pkg.mod_003 import m003_export\n\n\ndef brand_new(x):\n    return m003_export(x) + 2\n",
        );
        replace_in(
            &ws,
            "pkg/mod_012.py",
            "class Widget012(Widget011)",
            "class Widget012(Widget003)",
        );
        replace_in(
            &ws,
            "pkg/mod_012.py",
            "import m011_export, Widget011\n",
            "import m011_export, Widget011\nfrom pkg.mod_003 import Widget003\n",
        );
    });
    wait_synced_fresh(&mut conn);
    let t = driver_timings(&service);
    assert_eq!(figure(&t[2], "parse_cache_warm"), 1, "{}", t[2]);
    let (hits, misses) = (
        figure(&t[2], "parse_cache_hits"),
        figure(&t[2], "parse_cache_misses"),
    );
    assert_eq!(hits + misses, files + 1, "{}", t[2]);
    assert_eq!(misses, 2, "only the changed files parsed: {}", t[2]);

    // 3. A corrupt cache (one byte changed in the middle) is ignored.
    let mut bytes = fs::read(&cache).unwrap();
    let middle = bytes.len() / 2;
    bytes[middle] = if bytes[middle] == b'0' { b'1' } else { b'0' };
    fs::write(&cache, &bytes).unwrap();
    agent_batch(&mut conn, &["pkg/mod_020.py"], || {
        fs::remove_file(ws.join("pkg/mod_020.py")).unwrap()
    });
    wait_synced_fresh(&mut conn);
    let t = driver_timings(&service);
    assert_eq!(figure(&t[3], "parse_cache_ignored"), 1, "{}", t[3]);
    assert_eq!(figure(&t[3], "parse_cache_hits"), 0, "{}", t[3]);

    // 4. A cache made by another CodeGraphContext version (its header
    // says so; the body and its checksum are intact) is ignored too.
    let text = fs::read_to_string(&cache).unwrap();
    let (header, body) = text.split_once('\n').unwrap();
    assert!(header.contains(r#"["codegraphcontext","#), "{header}");
    let header = header.replacen(
        r#"["codegraphcontext",""#,
        r#"["codegraphcontext","0.0.0-"#,
        1,
    );
    fs::write(&cache, format!("{header}\n{body}")).unwrap();
    agent_batch(&mut conn, &["pkg/mod_009.py"], || {
        replace_in(&ws, "pkg/mod_009.py", "m009_compute", "m009_computed")
    });
    wait_synced_fresh(&mut conn);
    let t = driver_timings(&service);
    assert_eq!(figure(&t[4], "parse_cache_ignored"), 1, "{}", t[4]);
    assert_eq!(figure(&t[4], "parse_cache_hits"), 0, "{}", t[4]);

    // 5. A symlink planted at the cache's name is neither read nor written
    // through: the cache is rewritten beside it, the target untouched.
    let elsewhere = sandbox.root.path().join("elsewhere.json");
    fs::write(&elsewhere, "not the driver's\n").unwrap();
    fs::remove_file(&cache).unwrap();
    std::os::unix::fs::symlink(&elsewhere, &cache).unwrap();
    agent_batch(&mut conn, &["pkg/mod_025.py", "pkg/sub/mod_025.py"], || {
        write(&ws, "pkg/sub/__init__.py", "");
        fs::rename(ws.join("pkg/mod_025.py"), ws.join("pkg/sub/mod_025.py")).unwrap();
    });
    wait_synced_fresh(&mut conn);
    let t = driver_timings(&service);
    assert_eq!(figure(&t[5], "parse_cache_ignored"), 1, "{}", t[5]);
    assert_eq!(
        fs::read_to_string(&elsewhere).unwrap(),
        "not the driver's\n"
    );
    assert!(fs::symlink_metadata(&cache).unwrap().is_file());

    // 6. Warm again.
    agent_batch(&mut conn, &["pkg/mod_007.py"], || {
        replace_in(&ws, "pkg/mod_007.py", "m007_helper", "m007_assist")
    });
    wait_synced_fresh(&mut conn);
    let t = driver_timings(&service);
    assert_eq!(figure(&t[6], "parse_cache_warm"), 1, "{}", t[6]);
    assert!(figure(&t[6], "parse_cache_hits") > 0, "{}", t[6]);
    assert_eq!(
        strategies_run(&service),
        [
            "baseline",
            "incremental",
            "incremental",
            "incremental",
            "incremental",
            "incremental",
            "incremental"
        ]
    );
    drop(conn);
    drop(service);

    let synced = synced.dump();
    assert!(synced.relationships.iter().any(|r| r.contains("brand_new")));
    assert!(synced.nodes.iter().any(|n| n.contains("m007_assist")));
    assert_same_as_from_scratch(
        &cgc,
        backend,
        &sandbox,
        &synced,
        "parse-cache",
        "a warm parse cache",
    );
}
