//! `mcp`: the agent's reads through `cgc-fresh mcp` against `cgc mcp
//! start`, with the real CLI on Kùzu, on one indexed workspace of
//! generated modules.
//!
//! (a) The same mix of tool calls (`find_code`, `execute_cypher_query`,
//! `analyze_code_relationships`) through both servers, one after the
//! other (never at once: `cgc mcp start` holds the database for its whole
//! life), with no edit pending; latency as the harness sees it (request
//! line written → response line read). Ours is broken down with its own
//! logs: the front (`cgc-fresh mcp`) and the worker's part (the sync
//! runner's `mcp_answered`: the database opened, CGC's handler, closed).
//!
//! (b) Read-your-writes: an edit is reported (`tool_call`, the file
//! rewritten with a function renamed, `tool_result`), and at its ack a
//! tool call asks for the renamed function; timed from the ack to the
//! answer, which must hold the new name and not the old one. Each such
//! sample is paired with a plain edit timed from its ack until the sync
//! settles (the warm incremental sync the call waits for).
//!
//! Order: `cgc index`; a no-op sync records the manifest the incremental
//! service needs (see `record_manifest`); the incremental service starts;
//! (a) ours, (a) `cgc mcp start`; an untimed first edit (the cold sync:
//! no parse cache, no worker state); (b).

use std::fs;
use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{bail, Context as _, Result};
use serde_json::{json, Value};

use super::codebase::{self, Codebase, EditTarget, Indexed};
use super::edit_to_fresh::{
    driver_timings, indexed_targets, real_service_env, record_manifest, stored_edges_path,
    timing_cell,
};
use super::generated::Language;
use super::strategies::{await_settled_sync, yes_no};
use super::Tools;
use crate::conn::Conn;
use crate::machine::load_average;
use crate::mcp_client::{tool_result_json, McpServer};
use crate::real_cgc::RealCgc;
use crate::report::{self, Table};
use crate::service::{log_events, log_field, Log, Sandbox, Service};
use crate::stats::{fmt_count, fmt_duration, Summary};

/// The tools of the mix, in the order the calls cycle through them.
const TOOLS: [&str; 3] = [
    "find_code",
    "execute_cypher_query",
    "analyze_code_relationships",
];
/// Untimed calls before the timed ones, per server: the first of each tool
/// (our worker's start, CGC's imports; `cgc mcp start`'s first queries).
const WARMUP_CALLS: usize = 3;
/// The longest one tool call may take before the bench gives up.
const CALL_WAIT: Duration = Duration::from_secs(600);
/// The longest a sync may take to settle (the cold one parses every file).
const SETTLE_WAIT: Duration = Duration::from_secs(30 * 60);
/// The target: ours within this factor of `cgc mcp start`.
const RATIO_TARGET: f64 = 1.5;
/// The target: the read-your-writes answer within this of the warm sync.
const RYW_MARGIN: Duration = Duration::from_millis(200);

/// What `mcp` runs on and how often.
pub struct McpOptions {
    /// Generated Python modules.
    pub modules: usize,
    /// Timed tool calls per server in (a).
    pub queries: usize,
    /// Read-your-writes samples in (b), each paired with a plain edit.
    pub edits: usize,
    /// `mcp.holdDatabaseMs` for the service.
    pub hold_ms: u64,
}

/// One tool call of the mix.
#[derive(Debug, Clone, PartialEq)]
struct ToolCall {
    tool: &'static str,
    arguments: Value,
}

/// The calls of the mix: the tools in turn, each about a function of a
/// module spread over the tree (a stride coprime with most sizes, so the
/// modules differ from call to call).
fn query_mix(modules: usize, count: usize, offset: usize) -> Vec<ToolCall> {
    (0..count)
        .map(|i| {
            let m = ((i + offset) * 7919 + 13) % modules.max(1);
            let tool = TOOLS[i % TOOLS.len()];
            let arguments = match tool {
                "find_code" => json!({"query": format!("m{m:03}_compute")}),
                "execute_cypher_query" => json!({"cypher_query": format!(
                    "MATCH (f:Function) WHERE f.name = 'm{m:03}_export' \
                     RETURN f.name AS name, f.path AS path, f.line_number AS line"
                )}),
                _ => json!({"query_type": "find_callers", "target": format!("m{m:03}_helper")}),
            };
            ToolCall { tool, arguments }
        })
        .collect()
}

/// What one server answered the timed calls, and how long each took.
struct Timed {
    latencies: Vec<Duration>,
    responses: Vec<Value>,
}

/// Initializes `server`, makes the warm-up calls, then times `calls`, one
/// at a time; the server is closed before this returns.
fn time_calls(mut server: McpServer, warmup: &[ToolCall], calls: &[ToolCall]) -> Result<Timed> {
    server.initialize(CALL_WAIT)?;
    for call in warmup {
        server.call(call.tool, &call.arguments, CALL_WAIT)?;
    }
    let mut timed = Timed {
        latencies: Vec::with_capacity(calls.len()),
        responses: Vec::with_capacity(calls.len()),
    };
    for call in calls {
        let started = Instant::now();
        let response = server.call(call.tool, &call.arguments, CALL_WAIT)?;
        timed.latencies.push(started.elapsed());
        timed.responses.push(response);
    }
    server.close(Duration::from_secs(30))?;
    Ok(timed)
}

/// One edit of (b).
struct EditSample {
    /// `read-your-writes` (a tool call at the ack) or `plain` (none).
    kind: &'static str,
    file: String,
    /// Ack of the `tool_result` → the MCP answer (`read-your-writes`) or
    /// the settled sync (`plain`).
    latency: Duration,
    /// The answer held the new name once and the old one nowhere.
    answer_right: Option<bool>,
    /// What the answer held, for the table.
    answer: String,
    /// How long the service held the call for the edits (its log).
    held_ms: Option<u64>,
    /// Whether the graph covered the edits when it let the call go.
    caught_up: Option<bool>,
    /// The worker's part of the answer: open, CGC's handler, close.
    worker_ms: Option<u64>,
    /// What the service reported when the sync settled.
    reported: String,
    /// The driver's timings of this edit's sync.
    timings: Option<Value>,
}

pub fn run(tools: &Tools, opts: &McpOptions) -> Result<()> {
    if opts.queries == 0 || opts.edits == 0 {
        bail!("--queries and --edits must be at least 1");
    }
    report::section(
        &format!(
            "mcp: tool calls through `cgc-fresh mcp` vs `cgc mcp start`, and read-your-writes \
             ({} generated modules)",
            opts.modules
        ),
        &tools.command_line,
    );
    let sandbox = Sandbox::new(&tools.scratch)?;
    let cgc = RealCgc::new(&tools.real_cgc, &sandbox)?;
    let version = cgc.version()?;
    let codebase = Codebase::Generated {
        modules: opts.modules,
        language: Language::Python,
    };
    let ws = sandbox.workspace();
    let Indexed {
        described,
        index_time,
        files,
        load_before,
    } = codebase::install_and_index(&codebase, &cgc, &ws, "mcp")?;
    // One untimed first edit, then a read-your-writes and a plain edit
    // per sample, each of another file.
    let edit_count = 1 + 2 * opts.edits;
    let candidates = codebase::edit_targets(&codebase, &ws, edit_count)?;
    let targets = indexed_targets(&cgc, candidates, edit_count)?;

    let state_home = sandbox.root().join("state-shared");
    eprintln!("cgc-fresh-bench: mcp: recording the manifest");
    record_manifest(tools, &sandbox, &cgc, &state_home)?;

    let log = sandbox.root().join("serve-incremental.log");
    let mut env = real_service_env(&cgc, "incremental", &state_home);
    env.push((
        "CGC_MCP_HOLD_DATABASE_MS".to_string(),
        opts.hold_ms.to_string(),
    ));
    let mut service = Service::start(&tools.service_bin, &sandbox, &env, Log::File(log.clone()))?;

    let warmup = query_mix(opts.modules, WARMUP_CALLS, opts.queries);
    let calls = query_mix(opts.modules, opts.queries, 0);
    eprintln!(
        "cgc-fresh-bench: mcp: {} calls through cgc-fresh mcp",
        calls.len()
    );
    let front_log = sandbox.root().join("mcp-front.log");
    let ours = time_calls(
        McpServer::spawn(
            "cgc-fresh mcp",
            front_command(tools, &sandbox, &service),
            &front_log,
        )?,
        &warmup,
        &calls,
    )?;
    eprintln!(
        "cgc-fresh-bench: mcp: {} calls through cgc mcp start",
        calls.len()
    );
    let theirs = time_calls(
        McpServer::spawn(
            "cgc mcp start",
            cgc.command(&["mcp", "start"]),
            &sandbox.root().join("cgc-mcp.log"),
        )?,
        &warmup,
        &calls,
    )?;
    // Our two logs, the timed calls only (after each server's warm-up).
    let front_ms = logged_ms(&front_log, "mcp_answered", |e| {
        log_field(e, "method").as_str() == Some("tools/call")
    });
    let worker_ms = logged_ms(&log, "mcp_answered", |e| {
        !log_field(e, "serial").is_null() && log_field(e, "tool").as_str() != Some("tools/list")
    });
    let front_ms: Vec<u64> = front_ms.into_iter().skip(WARMUP_CALLS).collect();
    let worker_ms: Vec<u64> = worker_ms.into_iter().skip(WARMUP_CALLS).collect();

    eprintln!("cgc-fresh-bench: mcp: read-your-writes × {}", opts.edits);
    let edits = measure_edits(
        tools,
        &sandbox,
        &service,
        &log,
        &targets,
        &sandbox.root().join("mcp-front-edits.log"),
    )?;
    service.stop(Duration::from_secs(30))?;
    let load_after = load_average();

    print_calls(&calls, &ours, &theirs, &front_ms, &worker_ms);
    print_edits(&edits);
    report::note(&format!(
        "Real CLI: {version}, Kùzu. Workspace: {described}; `cgc --db kuzudb index .` took {} \
         and found {} files. Load average (1/5/15 min) before indexing: {load_before}; after \
         the last sample: {load_after}. The manifest the first incremental sync needs was \
         recorded by a no-op sync (`CGC_SYNC_STRATEGY='custom: --version'`) right after the \
         index, instead of a reconcile: the graph is what `cgc index .` built from that very \
         tree. The service: `CGC_SYNC_STRATEGY=incremental`, `CGC_GLOBAL_ARGS=--db kuzudb`, \
         mcp.holdDatabaseMs = {hold} ms, other settings default (batchMs = 500 ms, \
         mcp.readYourWritesMs = 3 000 ms). \
         (a): {WARMUP_CALLS} untimed calls per server first; `cgc-fresh mcp` ran (and exited) \
         before `cgc mcp start` started, while the service idled (no edit pending, its worker \
         alive between requests). Latency: request line written to the server's stdin → \
         response line read from its stdout. \"Answers equal\": the same JSON-RPC `result` (or \
         `error`) from both servers. (b): an untimed first edit (the cold sync: every file \
         parsed), then in turn a read-your-writes edit (`tool_call` edit → the file rewritten \
         with `mNNN_helper` renamed → `tool_result`; at its ack, `execute_cypher_query` for \
         the old and the new name; timed ack → answer; right = the new name once, the old \
         nowhere) and a plain edit (timed ack → the pushed state with `syncing: false`). \
         Held: the service held the call for the pending edits (its `mcp_read_your_writes`); \
         worker: the runner's `mcp_answered` (the worker opened the database, ran CGC's \
         handler, closed it); sync: the driver's own total.",
        fmt_duration(index_time),
        fmt_count(files),
        hold = opts.hold_ms,
    ));
    Ok(())
}

/// `cgc-fresh mcp` for the sandbox's workspace at `service`'s socket,
/// never starting a service of its own.
fn front_command(tools: &Tools, sandbox: &Sandbox, service: &Service) -> std::process::Command {
    let mut cmd = std::process::Command::new(&tools.service_bin);
    cmd.env_clear()
        .envs(sandbox.base_env())
        // The bench's service is the one measured; a front that found it
        // gone must fail, not start another.
        .env("CGC_FRESH_NO_AUTOSTART", "1")
        .arg("--workspace")
        .arg(sandbox.workspace())
        .arg("--socket")
        .arg(&service.socket)
        .arg("mcp");
    cmd
}

/// The `elapsed_ms` of the events named `event` that `keep` selects.
fn logged_ms(log: &Path, event: &str, keep: impl Fn(&Value) -> bool) -> Vec<u64> {
    log_events(log, &[event])
        .iter()
        .filter(|e| keep(e))
        .filter_map(|e| log_field(e, "elapsed_ms").as_u64())
        .collect()
}

/// The untimed first edit, then `(targets.len() - 1) / 2` pairs of a
/// read-your-writes edit and a plain one, through one harness session and
/// one `cgc-fresh mcp`.
fn measure_edits(
    tools: &Tools,
    sandbox: &Sandbox,
    service: &Service,
    log: &Path,
    targets: &[EditTarget],
    front_log: &Path,
) -> Result<Vec<EditSample>> {
    let mut harness = Conn::harness(&service.socket, "s1")?;
    let mut front = McpServer::spawn(
        "cgc-fresh mcp",
        front_command(tools, sandbox, service),
        front_log,
    )?;
    front.initialize(CALL_WAIT)?;
    let (first, rest) = targets
        .split_first()
        .context("no file to edit in the workspace")?;
    let mut samples = vec![edit_once(
        &mut harness,
        None,
        sandbox,
        log,
        first,
        "first (cold)",
    )?];
    for (i, target) in rest.iter().enumerate() {
        let ryw = i % 2 == 0;
        eprintln!(
            "cgc-fresh-bench: mcp: edit {} of {} ({}, {})",
            i + 1,
            rest.len(),
            if ryw { "read-your-writes" } else { "plain" },
            target.rel
        );
        let (mcp, kind) = if ryw {
            (Some(&mut front), "read-your-writes")
        } else {
            (None, "plain")
        };
        samples.push(edit_once(&mut harness, mcp, sandbox, log, target, kind)?);
    }
    front.close(Duration::from_secs(30))?;
    Ok(samples)
}

/// One reported edit of `target` (its helper renamed); with `mcp`, a tool
/// call asking for the renamed function at the ack.
fn edit_once(
    harness: &mut Conn,
    mcp: Option<&mut McpServer>,
    sandbox: &Sandbox,
    log: &Path,
    target: &EditTarget,
    kind: &'static str,
) -> Result<EditSample> {
    let new = format!("{}_renamed", target.function);
    let path = sandbox.workspace().join(&target.rel);
    let held_before = log_events(log, &["mcp_read_your_writes"]).len();
    let answered_before = log_events(log, &["mcp_answered"]).len();
    let synced_before = driver_timings(log).len();

    harness.send(
        &json!({"type": "tool_call", "session": "s1", "tool": "edit", "paths": [target.rel]}),
    )?;
    let text = fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?;
    let renamed = codebase::rename_definition(&text, &target.function, &new)
        .with_context(|| format!("no `def {}(` in {}", target.function, target.rel))?;
    fs::write(&path, renamed).with_context(|| format!("writing {}", path.display()))?;
    let ack = harness.request(
        json!({"type": "tool_result", "session": "s1", "tool": "edit", "ok": true}),
        "edit-result",
    )?;
    if ack["type"] != "ack" {
        bail!("tool_result answered with {ack}");
    }
    let acked = Instant::now();

    let mut sample = EditSample {
        kind,
        file: target.rel.clone(),
        latency: Duration::ZERO,
        answer_right: None,
        answer: "—".into(),
        held_ms: None,
        caught_up: None,
        worker_ms: None,
        reported: String::new(),
        timings: None,
    };
    if let Some(mcp) = mcp {
        let cypher = format!(
            "MATCH (f:Function) WHERE f.name IN ['{}', '{new}'] RETURN f.name AS name",
            target.function
        );
        let response = mcp.call(
            "execute_cypher_query",
            &json!({ "cypher_query": cypher }),
            CALL_WAIT,
        )?;
        sample.latency = acked.elapsed();
        let names: Vec<String> = tool_result_json(&response)
            .and_then(|answer| answer["results"].as_array().cloned())
            .unwrap_or_default()
            .iter()
            .filter_map(|row| row["name"].as_str().map(str::to_string))
            .collect();
        let count = |name: &str| names.iter().filter(|n| *n == name).count();
        let (new_count, old_count) = (count(&new), count(&target.function));
        sample.answer_right = Some(new_count == 1 && old_count == 0);
        sample.answer = if response.get("error").is_some() {
            format!("error: {}", response["error"])
        } else {
            format!("new name ×{new_count}, old ×{old_count}")
        };
        let held = log_events(log, &["mcp_read_your_writes"]);
        if let Some(event) = held.get(held_before) {
            sample.held_ms = log_field(event, "waited_ms").as_u64();
            sample.caught_up = log_field(event, "caught_up").as_bool();
        }
        sample.worker_ms = log_events(log, &["mcp_answered"])
            .get(answered_before)
            .and_then(|event| log_field(event, "elapsed_ms").as_u64());
    }
    // The sync's pushed states are already queued on the harness when the
    // answer came after it; they are read here either way.
    let (outcome, reported) = await_settled_sync(harness, SETTLE_WAIT);
    if sample.answer_right.is_none() {
        sample.latency = acked.elapsed();
    }
    outcome.with_context(|| format!("the sync of {} did not settle: {reported}", target.rel))?;
    sample.reported = reported;
    let timings = driver_timings(log);
    if timings.len() == synced_before + 1 {
        sample.timings = timings.last().cloned();
    }
    Ok(sample)
}

/// The rows of (a) and its breakdown.
fn print_calls(
    calls: &[ToolCall],
    ours: &Timed,
    theirs: &Timed,
    front_ms: &[u64],
    worker_ms: &[u64],
) {
    let spread = |s: &Summary| {
        format!(
            "{} / {} / {} / {}",
            fmt_duration(s.p50),
            fmt_duration(s.p99),
            fmt_duration(s.mean),
            fmt_duration(s.max)
        )
    };
    let ratio = |a: Duration, b: Duration| a.as_secs_f64() / b.as_secs_f64();
    let mut table = Table::new(&[
        "tool",
        "calls",
        "`cgc-fresh mcp` p50 / p99 / mean / max",
        "`cgc mcp start` p50 / p99 / mean / max",
        "ratio p50",
        "ratio p99",
        "answers equal",
        "errors (ours / theirs)",
    ]);
    let mut summary = Table::new(&["figure", "value", "target", "verdict"]);
    for tool in TOOLS.iter().copied().chain(std::iter::once("all")) {
        let picked: Vec<usize> = (0..calls.len())
            .filter(|&i| tool == "all" || calls[i].tool == tool)
            .collect();
        let pick = |timed: &Timed| -> Vec<Duration> {
            picked.iter().map(|&i| timed.latencies[i]).collect()
        };
        let (Some(o), Some(t)) = (Summary::of(&pick(ours)), Summary::of(&pick(theirs))) else {
            continue;
        };
        let equal = picked
            .iter()
            .filter(|&&i| answer_of(&ours.responses[i]) == answer_of(&theirs.responses[i]))
            .count();
        let errors = |timed: &Timed| {
            picked
                .iter()
                .filter(|&&i| timed.responses[i].get("error").is_some())
                .count()
        };
        let label = if tool == "all" {
            "**all**".to_string()
        } else {
            format!("`{tool}`")
        };
        table.row(vec![
            label,
            picked.len().to_string(),
            spread(&o),
            spread(&t),
            format!("{:.2}×", ratio(o.p50, t.p50)),
            format!("{:.2}×", ratio(o.p99, t.p99)),
            format!("{equal} of {}", picked.len()),
            format!("{} / {}", errors(ours), errors(theirs)),
        ]);
        if tool == "all" {
            for (what, ours_q, theirs_q) in [("p50", o.p50, t.p50), ("p99", o.p99, t.p99)] {
                let r = ratio(ours_q, theirs_q);
                summary.row(vec![
                    format!("tool call {what}, `cgc-fresh mcp` ÷ `cgc mcp start`"),
                    format!(
                        "{r:.2}× ({} / {})",
                        fmt_duration(ours_q),
                        fmt_duration(theirs_q)
                    ),
                    format!("≤ {RATIO_TARGET}×"),
                    report::verdict(r <= RATIO_TARGET),
                ]);
            }
            summary.row(vec![
                "answers equal to `cgc mcp start`'s".into(),
                format!("{equal} of {}", picked.len()),
                "all".into(),
                report::verdict(equal == picked.len()),
            ]);
        }
    }
    println!("### (a) tool calls with no edit pending\n");
    report::print_table(&table);

    // Where our time goes: the client's latency, the front's own handling
    // (its log) and the worker's part (the service's log), call by call.
    let ms = |v: u64| Duration::from_millis(v);
    let client: Vec<Duration> = ours.latencies.clone();
    let front: Vec<Duration> = front_ms.iter().copied().map(ms).collect();
    let worker: Vec<Duration> = worker_ms.iter().copied().map(ms).collect();
    let paired = client.len() == front.len() && front.len() == worker.len();
    let mut parts = Table::new(&["part of a `cgc-fresh mcp` call", "p50", "p99", "mean"]);
    let mut part = |what: &str, samples: &[Duration]| {
        if let Some(s) = Summary::of(samples) {
            parts.row(vec![
                what.to_string(),
                fmt_duration(s.p50),
                fmt_duration(s.p99),
                fmt_duration(s.mean),
            ]);
        }
    };
    part("whole call, as the harness sees it", &client);
    part("the front's handling (its `mcp_answered`)", &front);
    part(
        "the worker: open the database, CGC's handler, close (the runner's `mcp_answered`)",
        &worker,
    );
    if paired {
        let diff = |a: &[Duration], b: &[Duration]| -> Vec<Duration> {
            a.iter().zip(b).map(|(x, y)| x.saturating_sub(*y)).collect()
        };
        part(
            "front → service → worker and back (front − worker)",
            &diff(&front, &worker),
        );
        part(
            "stdio and JSON between the harness and the front (whole − front)",
            &diff(&client, &front),
        );
    }
    report::print_table(&parts);
    if !paired {
        report::note(&format!(
            "(The logs named {} front and {} worker answers for {} timed calls: not paired.)",
            front.len(),
            worker.len(),
            client.len()
        ));
    }
    report::print_table(&summary);
}

/// The member of a JSON-RPC response that carries the answer.
fn answer_of(response: &Value) -> &Value {
    match response.get("error") {
        Some(error) => error,
        None => &response["result"],
    }
}

/// The rows of (b) and its verdicts.
fn print_edits(samples: &[EditSample]) {
    let mut table = Table::new(&[
        "edit",
        "file",
        "ack → answer / settled",
        "held for the edit",
        "worker",
        "answer",
        "sync (driver total)",
        "stored edges",
        "service reported",
    ]);
    for s in samples {
        let timing = |key: &str| timing_cell(s.timings.as_ref(), key);
        table.row(vec![
            s.kind.to_string(),
            format!("`{}`", s.file),
            fmt_duration(s.latency),
            match (s.held_ms, s.caught_up) {
                (Some(ms), Some(caught_up)) => {
                    format!("{ms} ms{}", if caught_up { "" } else { ", not caught up" })
                }
                _ => "—".into(),
            },
            s.worker_ms
                .map(|ms| format!("{ms} ms"))
                .unwrap_or_else(|| "—".into()),
            match s.answer_right {
                Some(right) => format!("{} ({})", yes_no(right), s.answer),
                None => "—".into(),
            },
            timing("total_s"),
            s.timings
                .as_ref()
                .map(stored_edges_path)
                .unwrap_or("—")
                .to_string(),
            s.reported.clone(),
        ]);
    }
    println!("### (b) read-your-writes\n");
    report::print_table(&table);

    let of_kind =
        |kind: &str| -> Vec<&EditSample> { samples.iter().filter(|s| s.kind == kind).collect() };
    let ryw = of_kind("read-your-writes");
    let plain = of_kind("plain");
    let latencies = |list: &[&EditSample]| list.iter().map(|s| s.latency).collect::<Vec<_>>();
    let mut summary = Table::new(&["figure", "value", "target", "verdict"]);
    let (Some(r), Some(p)) = (
        Summary::of(&latencies(&ryw)),
        Summary::of(&latencies(&plain)),
    ) else {
        report::print_table(&summary);
        return;
    };
    let wrong = ryw.iter().filter(|s| s.answer_right != Some(true)).count();
    let held: Vec<Duration> = ryw
        .iter()
        .filter_map(|s| s.held_ms.map(Duration::from_millis))
        .collect();
    let worker: Vec<Duration> = ryw
        .iter()
        .filter_map(|s| s.worker_ms.map(Duration::from_millis))
        .collect();
    summary.row(vec![
        format!("warm sync, ack → settled, p50 / max over {}", p.count),
        format!("{} / {}", fmt_duration(p.p50), fmt_duration(p.max)),
        String::new(),
        String::new(),
    ]);
    summary.row(vec![
        format!(
            "read-your-writes, ack → answer, p50 / p99 / mean / max over {}",
            r.count
        ),
        format!(
            "{} / {} / {} / {}",
            fmt_duration(r.p50),
            fmt_duration(r.p99),
            fmt_duration(r.mean),
            fmt_duration(r.max)
        ),
        String::new(),
        String::new(),
    ]);
    if let (Some(h), Some(w)) = (Summary::of(&held), Summary::of(&worker)) {
        summary.row(vec![
            "of which: held for the edit / the worker's answer, p50".into(),
            format!("{} / {}", fmt_duration(h.p50), fmt_duration(w.p50)),
            String::new(),
            String::new(),
        ]);
    }
    let over = r.p50.as_secs_f64() - p.p50.as_secs_f64();
    summary.row(vec![
        "read-your-writes p50 − warm sync p50".into(),
        format!("{:+.2} s", over),
        format!("≤ +{:.1} s", RYW_MARGIN.as_secs_f64()),
        report::verdict(r.p50 <= p.p50 + RYW_MARGIN),
    ]);
    summary.row(vec![
        "answers without the new name (or with the old)".into(),
        format!("{wrong} of {}", ryw.len()),
        "0".into(),
        report::verdict(wrong == 0),
    ]);
    report::print_table(&summary);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_mix_cycles_through_the_tools_over_many_modules() {
        let calls = query_mix(2000, 6, 0);
        let tools: Vec<&str> = calls.iter().map(|c| c.tool).collect();
        assert_eq!(
            tools,
            [
                "find_code",
                "execute_cypher_query",
                "analyze_code_relationships",
                "find_code",
                "execute_cypher_query",
                "analyze_code_relationships"
            ]
        );
        assert_eq!(calls[0].arguments, json!({"query": "m013_compute"}));
        assert_eq!(
            calls[2].arguments,
            json!({"query_type": "find_callers", "target": "m1851_helper"})
        );
        let distinct: std::collections::BTreeSet<String> = query_mix(2000, 200, 0)
            .iter()
            .map(|c| c.arguments.to_string())
            .collect();
        assert_eq!(distinct.len(), 200);
        // The warm-up asks other calls than the timed ones.
        assert_ne!(query_mix(2000, 3, 200)[0], calls[0]);
    }

    #[test]
    fn the_answer_member_is_the_result_or_the_error() {
        let ok = json!({"jsonrpc": "2.0", "id": 1, "result": {"x": 1}});
        let err = json!({"jsonrpc": "2.0", "id": 1, "error": {"code": -32000}});
        assert_eq!(answer_of(&ok), &json!({"x": 1}));
        assert_eq!(answer_of(&err), &json!({"code": -32000}));
    }
}
