//! `hook`: the wall time of one `cgc-fresh hook claude-code` process, as
//! Claude Code runs it (spawn, JSON payload on standard input, wait for
//! exit), with the service up (PreToolUse `Write`, PostToolUse `Write` with
//! `take_notices`, `Stop`) and with no service (`CGC_FRESH_NO_AUTOSTART=1`:
//! the silent exit path).

use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result};
use serde_json::{json, Value};

use super::Tools;
use crate::fake::FakeCgc;
use crate::report::{self, verdict, Table};
use crate::service::{Log, Sandbox, Service};
use crate::stats::{fmt_duration, Summary};

/// The hook should cost Claude Code a few tens of milliseconds at most.
const TARGET_P99: Duration = Duration::from_millis(50);

fn payload(session: &str, event: &str, workspace: &Path, extra: Value) -> Vec<u8> {
    let mut value = json!({
        "session_id": session,
        "transcript_path": "/dev/null",
        "cwd": workspace,
        "hook_event_name": event,
    });
    if let (Some(object), Value::Object(extra)) = (value.as_object_mut(), extra) {
        object.extend(extra);
    }
    value.to_string().into_bytes()
}

/// Runs one hook process to its end; returns its wall time.
fn hook_once(
    tools: &Tools,
    sandbox: &Sandbox,
    socket: &Path,
    payload: &[u8],
    extra_env: &[(&str, &str)],
) -> Result<Duration> {
    let started = Instant::now();
    let mut child = Command::new(&tools.service_bin)
        .env_clear()
        .envs(sandbox.base_env())
        .env("CLAUDE_PID", std::process::id().to_string())
        .env("CLAUDE_PROJECT_DIR", sandbox.workspace())
        .envs(extra_env.iter().copied())
        .arg("--socket")
        .arg(socket)
        .args(["hook", "claude-code"])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .context("spawning the hook")?;
    if let Some(mut stdin) = child.stdin.take() {
        let _ = stdin.write_all(payload);
    }
    let status = child.wait()?;
    let took = started.elapsed();
    anyhow::ensure!(status.success(), "the hook exited with {status}");
    Ok(took)
}

pub fn run(tools: &Tools, invocations: usize) -> Result<()> {
    report::section(
        "hook: one `cgc-fresh hook claude-code` process, spawn to exit",
        &tools.command_line,
    );
    let sandbox = Sandbox::new(&tools.scratch)?;
    sandbox.mark_indexed()?;
    let fake = FakeCgc::new(&tools.fake_cgc, &sandbox, None)?;
    let mut service = Service::start(
        &tools.service_bin,
        &sandbox,
        &fake.env(),
        Log::File(sandbox.root().join("serve.log")),
    )?;
    let ws = sandbox.workspace();
    let socket = service.socket.clone();
    let session = "bench-session";
    let start = payload(session, "SessionStart", &ws, json!({"source": "startup"}));
    hook_once(tools, &sandbox, &socket, &start, &[])?;
    let file = ws.join("a.py");
    let write =
        json!({"tool_name": "Write", "tool_input": {"file_path": file, "content": "x = 1\n"}});
    let pre = payload(session, "PreToolUse", &ws, write.clone());
    let post = payload(session, "PostToolUse", &ws, write);
    let stop = payload(session, "Stop", &ws, json!({}));
    let (mut pre_t, mut post_t, mut stop_t) = (Vec::new(), Vec::new(), Vec::new());
    for n in 0..invocations {
        pre_t.push(hook_once(tools, &sandbox, &socket, &pre, &[])?);
        std::fs::write(&file, format!("x = {n}\n"))?;
        post_t.push(hook_once(tools, &sandbox, &socket, &post, &[])?);
        stop_t.push(hook_once(tools, &sandbox, &socket, &stop, &[])?);
    }
    service.stop(Duration::from_secs(10))?;

    let down_socket = sandbox.root().join("runtime").join("nobody.sock");
    let mut down_t = Vec::new();
    for _ in 0..invocations {
        down_t.push(hook_once(
            tools,
            &sandbox,
            &down_socket,
            &post,
            &[("CGC_FRESH_NO_AUTOSTART", "1")],
        )?);
    }

    let mut table = Table::new(&[
        "hook", "service", "runs", "min", "p50", "p99", "max", "target", "verdict",
    ]);
    for (what, up, samples) in [
        ("PreToolUse Write → tool_call", "up", &pre_t),
        (
            "PostToolUse Write → tool_result + take_notices",
            "up",
            &post_t,
        ),
        ("Stop → take_notices", "up", &stop_t),
        ("PostToolUse Write (silent exit)", "down", &down_t),
    ] {
        if let Some(s) = Summary::of(samples) {
            table.row(vec![
                what.into(),
                up.into(),
                s.count.to_string(),
                fmt_duration(s.min),
                fmt_duration(s.p50),
                fmt_duration(s.p99),
                fmt_duration(s.max),
                "p99 ≤ 50 ms".into(),
                verdict(s.p99 <= TARGET_P99),
            ]);
        }
    }
    report::print_table(&table);
    report::note(
        "Wall time from spawning the hook process to its exit, as Claude Code waits for it \
         (process start, payload on stdin, socket exchange, exit); fake `cgc`, built-in \
         defaults, the service's sync running in the background meanwhile. With the \
         service down the hook finds no socket and exits at once (autostart off here).",
    );
    Ok(())
}
