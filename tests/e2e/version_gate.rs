//! The driver's version gate (`driver/cgc_seam.py`): on a CodeGraphContext
//! version the driver was not proven against, it patches nothing and every
//! sync is CGC's own reconcile, with the fallback notice saying why; with
//! `cgc.allowUnprovenVersion` the driver runs and the sync's note says so.
//!
//! The "other version" is the real, pinned CGC whose distribution metadata
//! names another version: a `codegraphcontext-99.0.0.dist-info` first on
//! the driver interpreter's path. The code is the proven one (so the
//! opt-in's syncs are exact and can be checked), the version it reports
//! is not.

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use serde_json::{json, Value};

use crate::graph_backend::{GraphBackend, GraphCli};
use crate::incremental::{
    agent_batch, functions, replace_in, service_with, wait_synced_fresh, write,
};
use crate::support::{open_session, real_cgc, strategies_run, Conn, Sandbox, Service};

/// The version the stand-in metadata reports.
const UNPROVEN: &str = "99.0.0";

/// An interpreter for the driver (`CGC_FRESH_DRIVER_PYTHON`): the real
/// CGC's Python with metadata that says CGC is `UNPROVEN`.
fn unproven_python(dir: &Path, cgc: &Path) -> String {
    let shebang = fs::read_to_string(cgc).unwrap();
    let python = shebang
        .lines()
        .next()
        .and_then(|line| line.strip_prefix("#!"))
        .map(str::trim)
        .unwrap_or_else(|| panic!("{} has no #! line", cgc.display()))
        .to_string();
    let meta = dir.join("meta");
    let info = meta.join(format!("codegraphcontext-{UNPROVEN}.dist-info"));
    fs::create_dir_all(&info).unwrap();
    fs::write(
        info.join("METADATA"),
        format!("Metadata-Version: 2.1\nName: codegraphcontext\nVersion: {UNPROVEN}\n"),
    )
    .unwrap();
    let wrapper = dir.join("python");
    fs::write(
        &wrapper,
        format!(
            "#!/bin/sh\nPYTHONPATH='{}'${{PYTHONPATH:+:$PYTHONPATH}} exec '{python}' \"$@\"\n",
            meta.display()
        ),
    )
    .unwrap();
    fs::set_permissions(&wrapper, fs::Permissions::from_mode(0o755)).unwrap();
    wrapper.display().to_string()
}

/// The probe's logged answers.
fn probe_results(service: &Service) -> Vec<Value> {
    service.log_events("driver_probe_result")
}

/// A renamed function synced on the unproven CGC, and what it left.
struct Renamed {
    _stub: tempfile::TempDir,
    _sandbox: Sandbox,
    cli: GraphCli,
    service: Service,
    conn: Conn,
    /// The `fresh` state after the rename's sync.
    fresh: Value,
}

/// A Kùzu graph `graph` indexed by the real CLI, a service whose driver
/// runs on the unproven CGC (with the person's opt-in if `opt_in`), its
/// baseline sync, then one renamed function reported and synced.
fn rename_on_unproven_cgc(graph: &str, opt_in: bool) -> Option<Renamed> {
    let cgc = real_cgc()?;
    let stub = tempfile::tempdir().unwrap();
    let python = unproven_python(stub.path(), &cgc);
    let sandbox = Sandbox::new();
    let (ws, home) = (sandbox.workspace(), sandbox.home());
    write(&ws, "pkg/__init__.py", "");
    write(&ws, "pkg/a.py", "def first(x):\n    return x\n");
    let cli = GraphBackend::Kuzu.cli(&cgc, &ws, &home, graph);
    cli.index();
    let mut env = vec![("CGC_FRESH_DRIVER_PYTHON", python.as_str())];
    if opt_in {
        env.push(("CGC_ALLOW_UNPROVEN_VERSION", "true"));
    }
    let service = service_with(&sandbox, &cli, &cgc, &env);
    let mut conn = open_session(&service, "s1");
    // The first sync, with no manifest: a baseline with the driver, or the
    // reconcile where the driver may not run (the tests say which).
    conn.request(json!({"type": "sync"}), 77);
    wait_synced_fresh(&mut conn);
    agent_batch(&mut conn, &["pkg/a.py"], || {
        replace_in(&ws, "pkg/a.py", "def first(", "def first_renamed(")
    });
    let fresh = wait_synced_fresh(&mut conn);
    Some(Renamed {
        _stub: stub,
        _sandbox: sandbox,
        cli,
        service,
        conn,
        fresh,
    })
}

#[test]
fn an_unproven_cgc_version_is_not_patched_the_sync_reconciles_and_the_person_is_told_why() {
    let Some(Renamed {
        cli,
        service,
        mut conn,
        fresh,
        // Held to the end: the sandbox and the interpreter stub.
        _stub: _kept_stub,
        _sandbox: _kept_sandbox,
    }) = rename_on_unproven_cgc("gate", false)
    else {
        return;
    };
    // The edit is in the graph all the same: CGC's own reconcile ran.
    assert_eq!(strategies_run(&service), ["reconcile", "reconcile"]);
    assert_eq!(functions(&cli, "first_renamed"), 1);
    assert_eq!(functions(&cli, "first"), 0);
    // The probe refused the version, so nothing of CGC was patched.
    let probes = probe_results(&service);
    assert_eq!(probes.len(), 1, "{probes:?}");
    assert_eq!(probes[0]["ok"], false, "{probes:?}");
    let reason = probes[0]["reason"].as_str().unwrap_or_default();
    assert!(
        reason.contains(UNPROVEN) && reason.contains("0.6.13"),
        "{reason}"
    );
    // The session's warm-up may have started the worker for its probe
    // (which imports CGC and patches nothing); no worker was ever asked to
    // apply a sync.
    assert!(
        service
            .log_events("driver_worker_started")
            .iter()
            .all(|w| w["for_request"] == "warm-up"),
        "a worker was started for a sync on an unproven CGC"
    );
    assert!(
        service.log_events("driver_worker_request").is_empty(),
        "a worker applied a sync on an unproven CGC"
    );
    let detail = fresh["detail"].as_str().unwrap_or_default();
    assert!(
        detail.contains("instead of incremental") && detail.contains(UNPROVEN),
        "{fresh}"
    );
    // The person hears it once, with the key that would change it.
    let notice = conn.wait_seen("the fallback notice", |f| {
        f["type"] == "notice" && f["condition"] == "sync_strategy_fell_back"
    });
    assert_eq!(notice["audience"], "user", "{notice}");
    let text = notice["text"].as_str().unwrap_or_default();
    assert!(
        text.contains(UNPROVEN) && text.contains("cgc.allowUnprovenVersion"),
        "{notice}"
    );
}

#[test]
fn with_the_opt_in_the_driver_runs_on_an_unproven_cgc_version_and_says_so() {
    let Some(Renamed {
        cli,
        service,
        conn,
        fresh,
        // Held to the end: the sandbox and the interpreter stub.
        _stub: _kept_stub,
        _sandbox: _kept_sandbox,
    }) = rename_on_unproven_cgc("gate-opt-in", true)
    else {
        return;
    };
    assert_eq!(strategies_run(&service), ["baseline", "incremental"]);
    assert_eq!(functions(&cli, "first_renamed"), 1);
    assert_eq!(functions(&cli, "first"), 0);
    let probes = probe_results(&service);
    assert_eq!(probes.len(), 1, "{probes:?}");
    assert_eq!(probes[0]["ok"], true, "{probes:?}");
    let unproven = probes[0]["unproven"].as_str().unwrap_or_default();
    assert!(
        unproven.contains(UNPROVEN) && unproven.contains("cgc.allowUnprovenVersion"),
        "{probes:?}"
    );
    assert_eq!(service.log_events("driver_worker_started").len(), 1);
    // The state says which strategy ran, and on what.
    let detail = fresh["detail"].as_str().unwrap_or_default();
    assert!(
        detail.contains("sync strategy incremental") && detail.contains(UNPROVEN),
        "{fresh}"
    );
    assert_eq!(
        conn.count_seen(|f| f["condition"] == "sync_strategy_fell_back"),
        0,
        "no fallback: {fresh}"
    );
}
