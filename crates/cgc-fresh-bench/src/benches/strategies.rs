//! `strategies`: each sync strategy against the real CLI on a generated
//! Python workspace — how long from the agent's edit until the sync has
//! settled, what the service reported, and whether the graph was right.

use std::fs;
use std::time::{Duration, Instant};

use anyhow::Result;
use serde_json::{json, Value};

use super::codebase::write_generated;
use super::{var, Tools};
use crate::conn::Conn;
use crate::real_cgc::RealCgc;
use crate::report::{self, Table};
use crate::service::{Log, Sandbox, Service};
use crate::stats::{fmt_count, fmt_duration};

const STRATEGIES: [&str; 4] = ["incremental", "reconcile", "update", "index"];

pub fn run(tools: &Tools, modules: usize) -> Result<()> {
    run_strategies(
        tools,
        modules,
        &STRATEGIES,
        "strategies: edit → settled sync with the real CLI",
    )
}

fn run_strategies(tools: &Tools, modules: usize, strategies: &[&str], title: &str) -> Result<()> {
    report::section(title, &tools.command_line);
    let sandbox = Sandbox::new(&tools.scratch)?;
    let cgc = RealCgc::new(&tools.real_cgc, &sandbox)?;
    write_generated(&sandbox.workspace(), modules)?;
    eprintln!("cgc-fresh-bench: strategies: indexing {modules} modules");
    let started = Instant::now();
    cgc.index()?;
    let index_time = started.elapsed();
    let functions = cgc.query("MATCH (f:Function) RETURN count(f) AS n")?;
    let function_count = functions
        .first()
        .and_then(|row| row["n"].as_u64())
        .unwrap_or(0);

    let mut table = Table::new(&[
        "strategy",
        "edit → sync settled",
        "service reported",
        "new name in graph",
        "old name gone",
        "graph right",
    ]);
    for (i, strategy) in strategies.iter().enumerate() {
        // A different module per strategy, so each starts from a graph
        // where its function still has the old name.
        let module = (i + 1) * modules / (strategies.len() + 1);
        eprintln!("cgc-fresh-bench: strategies: {strategy}");
        table.row(measure_strategy(tools, &sandbox, &cgc, strategy, module)?);
    }
    report::print_table(&table);
    report::note(&format!(
        "Workspace: {} generated modules (`pkg/mod_NNN.py`, 3 functions and a class each, calling \
         into the previous module) + `pkg/__init__.py`; the initial `cgc --db kuzudb index .` took \
         {} and found {} functions. Per strategy: a fresh service (`CGC_SYNC_STRATEGY=<s>`, \
         `CGC_GLOBAL_ARGS=--db kuzudb`, other settings default, so batchMs = 500 ms), a harness \
         session, `tool_call` edit → the file rewritten with `mNNN_helper` renamed → `tool_result`; \
         timed from the `tool_call` until a pushed state with `syncing: false` after one with \
         `syncing: true`. The graph was then asked with `cgc --db kuzudb query` after the service \
         had stopped.",
        fmt_count(modules as u64),
        fmt_duration(index_time),
        fmt_count(function_count)
    ));
    Ok(())
}

fn measure_strategy(
    tools: &Tools,
    sandbox: &Sandbox,
    cgc: &RealCgc,
    strategy: &str,
    module: usize,
) -> Result<Vec<String>> {
    let old = format!("m{module:03}_helper");
    let new = format!("renamed_by_{strategy}");
    let rel = format!("pkg/mod_{module:03}.py");
    let path = sandbox.workspace().join(&rel);

    let state_home = sandbox.root().join(format!("state-{strategy}"));
    let env = vec![
        var("CGC_EXECUTABLE", cgc.program().display()),
        var("CGC_GLOBAL_ARGS", "--db kuzudb"),
        var("CGC_SYNC_STRATEGY", strategy),
        var("XDG_STATE_HOME", state_home.display()),
        var("CGC_FRESHNESS_MIN_SYNC_GAP_MS", "0"),
    ];
    let log = sandbox.root().join(format!("serve-{strategy}.log"));
    let mut service = Service::start(&tools.service_bin, sandbox, &env, Log::File(log))?;
    let mut harness = Conn::harness(&service.socket, "s1")?;

    // A service's first sync has no manifest of the tree the graph was
    // built from, so it reconciles and records one; the timed edit comes
    // after it, as every edit but a service's first does.
    harness.send(&json!({"type": "sync", "id": "baseline"}))?;
    harness.recv_until_seen(
        Duration::from_secs(60),
        |f| f["type"] == "state" && f["syncing"] == true,
        |_: &Value| {},
    )?;
    harness.recv_until_seen(
        Duration::from_secs(20 * 60),
        |f| f["type"] == "state" && f["syncing"] == false,
        |_: &Value| {},
    )?;

    let started = Instant::now();
    harness.send(&json!({"type": "tool_call", "session": "s1", "tool": "edit", "paths": [rel]}))?;
    let text = fs::read_to_string(&path)?.replace(&old, &new);
    fs::write(&path, text)?;
    harness.send(&json!({"type": "tool_result", "session": "s1", "tool": "edit", "ok": true}))?;

    let (outcome, reported) = await_settled_sync(&mut harness, Duration::from_secs(20 * 60));
    let settled_after = started.elapsed();
    service.stop(Duration::from_secs(30))?;
    let new_count = cgc.functions_named(&new)?;
    let old_count = cgc.functions_named(&old)?;
    let right = new_count == 1 && old_count == 0;
    Ok(vec![
        format!("`{strategy}`"),
        if outcome.is_ok() {
            fmt_duration(settled_after)
        } else {
            "—".into()
        },
        reported,
        format!("{} ({new_count})", yes_no(new_count > 0)),
        format!("{} ({old_count} left)", yes_no(old_count == 0)),
        yes_no(right).into(),
    ])
}

/// Waits for the sync an edit started (within a minute) to settle (within
/// `settle_within`), and says what the service reported: the status, its
/// last error and the notices that came meanwhile.
pub(super) fn await_settled_sync(
    harness: &mut Conn,
    settle_within: Duration,
) -> (Result<Value>, String) {
    let mut notices: Vec<String> = Vec::new();
    let mut note = |f: &Value| {
        if f["type"] == "notice" {
            notices.push(f["condition"].as_str().unwrap_or("?").to_string());
        }
    };
    let outcome = harness
        .recv_until_seen(
            Duration::from_secs(60),
            |f| f["type"] == "state" && f["syncing"] == true,
            &mut note,
        )
        .and_then(|_| {
            harness.recv_until_seen(
                settle_within,
                |f| f["type"] == "state" && f["syncing"] == false,
                &mut note,
            )
        });
    let reported = match &outcome {
        Ok(state) => {
            let mut said = format!("`{}`", state["status"].as_str().unwrap_or("?"));
            if let Some(error) = state["last_error"].as_str() {
                said.push_str(&format!(", last error: {error}"));
            }
            if !notices.is_empty() {
                said.push_str(&format!("; notices: {}", notices.join(", ")));
            }
            said
        }
        Err(error) => format!("no settled sync: {error}"),
    };
    (outcome, reported)
}

pub(super) fn yes_no(b: bool) -> &'static str {
    if b {
        "yes"
    } else {
        "no"
    }
}
