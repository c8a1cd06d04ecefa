//! What each subcommand does. The binary's edge: errors become messages and
//! exit codes here.

use std::io::Write;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::Context as _;
use cgc_fresh_proto::{ClientFrame, Envelope, ServerFrame, StateFrame};

use crate::cli::{
    Cli, Command, Harness, HookHarness, Target, EXIT_ERROR, EXIT_NOT_RUNNING, EXIT_OK,
    EXIT_SERVICE_ERROR,
};
use crate::client::{Client, ClientError};
use crate::paths::{canonical_workspace, ProcessEnv, ServicePaths};
use crate::service::{self, ServeOptions};

pub fn run(cli: Cli) -> anyhow::Result<u8> {
    match &cli.command {
        Command::Hook { harness } => return Ok(hook(*harness, &cli.target)),
        Command::Status { line: true, .. } => return Ok(status_line(&cli.target)),
        Command::Install {
            dry_run,
            harness: Some(harness),
            scope,
        } => return harness_install(*harness, *scope, &cli.target, *dry_run, true),
        Command::Uninstall {
            dry_run,
            harness: Some(harness),
            scope,
        } => return harness_install(*harness, *scope, &cli.target, *dry_run, false),
        Command::Install {
            scope: Some(_),
            harness: None,
            ..
        }
        | Command::Uninstall {
            scope: Some(_),
            harness: None,
            ..
        } => anyhow::bail!("--scope needs --harness (e.g. --harness claude-code)"),
        _ => {}
    }
    if let Command::Uninstall { dry_run, .. } = cli.command {
        // The workspace may be gone already; its absolute path still names
        // the instance.
        let workspace = canonical_workspace(&cli.target.workspace)
            .or_else(|_| std::path::absolute(&cli.target.workspace))?;
        crate::systemd::install::run_uninstall(&workspace, dry_run, &mut std::io::stdout())?;
        return Ok(EXIT_OK);
    }
    let paths = resolve(&cli.target)?;
    match cli.command {
        Command::Install { dry_run, .. } => {
            crate::systemd::install::run_install(
                &paths.workspace,
                dry_run,
                &mut std::io::stdout(),
            )?;
            Ok(EXIT_OK)
        }
        Command::Uninstall { .. } => Ok(EXIT_OK),
        Command::Serve { config } => {
            service::serve(ServeOptions {
                paths,
                config_file: config,
            })?;
            Ok(EXIT_OK)
        }
        Command::Hook { .. } => Ok(EXIT_OK),
        Command::Status { json, .. } => {
            let code = with_client(&paths, |client| status(client, json))?;
            if code == EXIT_NOT_RUNNING {
                report_recorded_state(&paths, json);
            }
            Ok(code)
        }
        Command::Sync => with_client(&paths, sync),
        Command::Mcp => {
            let socket = crate::instance_lock::client_socket(&paths);
            crate::mcp::run(crate::mcp::target(
                &paths.workspace,
                socket,
                cli.target.socket.clone(),
            ))
        }
        Command::Events => with_client(&paths, events),
        Command::Send { frames } => with_client(&paths, |client| send(client, frames)),
        Command::Config { json, config } => {
            let env = |name: &str| std::env::var(name).ok();
            let loaded = crate::config_load::load(&paths.workspace, config.as_deref(), &env);
            let mut out = std::io::stdout().lock();
            if json {
                let doc = serde_json::json!({
                    "values": loaded.render_json(),
                    "warnings": loaded.warning_texts(),
                    "files": loaded.files_read(),
                });
                writeln!(out, "{}", serde_json::to_string_pretty(&doc)?)?;
            } else {
                write!(out, "{}", loaded.render_text())?;
            }
            Ok(EXIT_OK)
        }
    }
}

/// `hook <harness>`: always exit 0; the log goes to `CGC_FRESH_HOOK_LOG`
/// or nowhere.
fn hook(harness: HookHarness, target: &Target) -> u8 {
    use crate::harness::claude_code;
    let log_file = std::env::var_os("CGC_FRESH_HOOK_LOG").filter(|v| !v.is_empty());
    let outcome = std::panic::catch_unwind(|| {
        let HookHarness::ClaudeCode = harness;
        let payload = match crate::harness::read_stdin_bounded(HOOK_MAX_PAYLOAD, HOOK_STDIN_WAIT) {
            Some(Ok(payload)) => payload,
            Some(Err(error)) => {
                let mut outcome = claude_code::HookOutcome::default();
                outcome.log.event(
                    "warn",
                    "hook_stdin_unreadable",
                    serde_json::json!({ "error": error }),
                );
                return outcome;
            }
            None => {
                let mut outcome = claude_code::HookOutcome::default();
                outcome.log.event(
                    "warn",
                    "hook_stdin_timeout",
                    serde_json::json!({ "waited_ms": HOOK_STDIN_WAIT.as_millis() as u64 }),
                );
                return outcome;
            }
        };
        let env = claude_code::HookEnv::from_process();
        claude_code::run(&payload, &env, |workspace| {
            let canonical = canonical_workspace(workspace).map_err(|e| e.to_string())?;
            let paths = ServicePaths::resolve(&canonical, target.socket.as_deref(), &ProcessEnv);
            let autostart = match std::env::var("CGC_FRESH_NO_AUTOSTART").as_deref() {
                Ok("1") => None,
                _ => std::env::current_exe().ok(),
            };
            Ok(claude_code::HookIo {
                socket: crate::instance_lock::client_socket(&paths),
                budget: hook_budget(),
                autostart,
                socket_override: target.socket.clone(),
            })
        })
    });
    match outcome {
        Ok(outcome) => {
            if let Some(line) = &outcome.stdout {
                let mut out = std::io::stdout().lock();
                let _ = writeln!(out, "{line}").and_then(|_| out.flush());
            }
            if let Some(path) = &log_file {
                outcome.log.append_to(std::path::Path::new(path));
            }
        }
        Err(_) => {
            if let Some(path) = &log_file {
                let mut log = crate::harness::hook_log::HookLog::default();
                log.event("error", "hook_panicked", serde_json::Value::Null);
                log.append_to(std::path::Path::new(path));
            }
        }
    }
    EXIT_OK
}

/// A hook payload larger than this is not read (Claude Code's `Write`
/// payload carries the file's content).
const HOOK_MAX_PAYLOAD: u64 = 64 * 1024 * 1024;
/// How long the hook waits for its standard input to end.
const HOOK_STDIN_WAIT: Duration = Duration::from_secs(2);

/// The hook's socket budget: `CGC_FRESH_HOOK_BUDGET_MS`, else the default.
fn hook_budget() -> Duration {
    std::env::var("CGC_FRESH_HOOK_BUDGET_MS")
        .ok()
        .and_then(|v| v.trim().parse::<u64>().ok())
        .filter(|ms| (1..=10_000).contains(ms))
        .map(Duration::from_millis)
        .unwrap_or(crate::harness::claude_code::DEFAULT_BUDGET)
}

/// `status --line`: one line, or nothing; always exit 0.
fn status_line(target: &Target) -> u8 {
    use crate::harness::status_line;
    use std::io::IsTerminal as _;
    let stdin = if std::io::stdin().is_terminal() {
        None
    } else {
        crate::harness::read_stdin_bounded(1024 * 1024, Duration::from_millis(100))
            .and_then(Result::ok)
    };
    let project_dir = std::env::var("CLAUDE_PROJECT_DIR").ok();
    let workspace =
        status_line::workspace_from(stdin.as_deref(), project_dir.as_deref(), &target.workspace);
    let Ok(canonical) = canonical_workspace(&workspace) else {
        return EXIT_OK;
    };
    let paths = ServicePaths::resolve(&canonical, target.socket.as_deref(), &ProcessEnv);
    let socket = crate::instance_lock::client_socket(&paths);
    if let Some(state) = status_line::fetch_state(&socket, status_line::BUDGET) {
        let mut out = std::io::stdout().lock();
        let _ = writeln!(out, "{}", status_line::line_text(&state, now_ms()));
    }
    EXIT_OK
}

/// `install --harness` / `uninstall --harness`.
fn harness_install(
    harness: Harness,
    scope: Option<crate::harness::claude_settings::Scope>,
    target: &Target,
    dry_run: bool,
    install: bool,
) -> anyhow::Result<u8> {
    use crate::harness::claude_mcp_config;
    use crate::harness::claude_settings::{self, Scope};
    let Harness::ClaudeCode = harness;
    let scope = scope.unwrap_or(Scope::Project);
    let workspace = match scope {
        Scope::Project => canonical_workspace(&target.workspace)
            .or_else(|_| std::path::absolute(&target.workspace))
            .context("cannot use the workspace")?,
        Scope::User => target.workspace.clone(),
    };
    let config_dir = std::env::var("CLAUDE_CONFIG_DIR").ok();
    let path = claude_settings::settings_path(
        scope,
        &workspace,
        config_dir.as_deref(),
        &crate::paths::home_dir(),
    );
    // Read only, for notes: Claude Code's own file of user- and local-scope
    // MCP servers (see `claude_mcp_config`).
    let claude_json =
        claude_mcp_config::claude_json_path(config_dir.as_deref(), &crate::paths::home_dir());
    let mut out = std::io::stdout();
    if install {
        let bin = std::env::current_exe().context("cannot tell where this binary is")?;
        claude_settings::install(&path, &bin, dry_run, &mut out)?;
        match scope {
            Scope::Project => claude_mcp_config::install(
                &claude_mcp_config::mcp_json_path(&workspace),
                &bin,
                &workspace,
                &claude_json,
                dry_run,
                &mut out,
            )?,
            Scope::User => {
                // Local-scope entries are keyed by the project's real path.
                let project = canonical_workspace(&target.workspace).unwrap_or(workspace);
                claude_mcp_config::install_user_scope(&claude_json, &bin, &project, &mut out)?
            }
        }
    } else {
        claude_settings::uninstall(&path, dry_run, &mut out)?;
        match scope {
            Scope::Project => claude_mcp_config::uninstall(
                &claude_mcp_config::mcp_json_path(&workspace),
                dry_run,
                &mut out,
            )?,
            Scope::User => claude_mcp_config::uninstall_user_scope(&claude_json, &mut out)?,
        }
    }
    Ok(EXIT_OK)
}

fn resolve(target: &Target) -> anyhow::Result<ServicePaths> {
    let workspace = canonical_workspace(&target.workspace).context("cannot use the workspace")?;
    Ok(ServicePaths::resolve(
        &workspace,
        target.socket.as_deref(),
        &ProcessEnv,
    ))
}

fn with_client(
    paths: &ServicePaths,
    body: impl FnOnce(&mut Client) -> Result<u8, ClientError>,
) -> anyhow::Result<u8> {
    let instance = format!("cli-{}", std::process::id());
    let socket = crate::instance_lock::client_socket(paths);
    let outcome = Client::connect_hello(&socket, &instance).and_then(|mut c| body(&mut c));
    match outcome {
        Ok(code) => Ok(code),
        Err(error @ ClientError::NotRunning { .. }) => {
            eprintln!("cgc-fresh: {error}");
            eprintln!(
                "cgc-fresh: start it with: cgc-fresh serve --workspace {}",
                paths.workspace.display()
            );
            Ok(EXIT_NOT_RUNNING)
        }
        Err(error) => {
            eprintln!("cgc-fresh: {error}");
            Ok(EXIT_ERROR)
        }
    }
}

fn status(client: &mut Client, json: bool) -> Result<u8, ClientError> {
    let reply = client.request(ClientFrame::Status)?;
    match reply.frame {
        ServerFrame::State(state) => {
            if json {
                println!("{}", state_json(state, true));
            } else {
                println!("{}", describe_state(&state, now_ms()));
            }
            Ok(EXIT_OK)
        }
        other => unexpected(other),
    }
}

/// `status --json`: the `state` frame as the service sends it, plus
/// `observed` — whether a running service answered (`true`) or the frame was
/// made from the record on disk (`false`; its status is then never `fresh`).
fn state_json(state: StateFrame, observed: bool) -> String {
    let frame = Envelope::new(ServerFrame::State(state));
    let mut value = serde_json::to_value(&frame).unwrap_or(serde_json::Value::Null);
    if let Some(object) = value.as_object_mut() {
        object.insert("observed".into(), serde_json::Value::Bool(observed));
    }
    value.to_string()
}

/// With no service running, the last record on disk is still worth
/// showing — clearly labelled as such (a stopped service observes nothing,
/// so it can never say `fresh`).
fn report_recorded_state(paths: &ServicePaths, json: bool) {
    let text = match std::fs::read_to_string(&paths.state_file) {
        Ok(text) => text,
        Err(_) => {
            eprintln!(
                "cgc-fresh: no freshness record for this workspace yet ({})",
                paths.state_file.display()
            );
            if json {
                let mut frame = cgc_fresh_core::freshness::FreshnessRecord::unknown()
                    .unobserved_state_frame(&paths.workspace.display().to_string());
                frame.detail = Some("not observed (no service running); no record yet".into());
                println!("{}", state_json(frame, false));
            }
            return;
        }
    };
    match cgc_fresh_core::freshness::FreshnessRecord::from_json(&text) {
        Ok(record) => {
            let frame = record.unobserved_state_frame(&paths.workspace.display().to_string());
            if json {
                println!("{}", state_json(frame, false));
                return;
            }
            let mut line = format!(
                "{}: {}",
                paths.workspace.display(),
                frame.detail.as_deref().unwrap_or("not observed")
            );
            let now = now_ms();
            if let Some(at) = record.last_synced_at {
                line.push_str(&format!("; last sync {}", ago(now, at.get())));
            }
            if let Some(error) = &record.last_error {
                line.push_str(&format!("; last error: {error}"));
            }
            println!("{line}");
        }
        Err(error) => eprintln!(
            "cgc-fresh: the record {} is unreadable: {error}",
            paths.state_file.display()
        ),
    }
}

fn sync(client: &mut Client) -> Result<u8, ClientError> {
    match client.request(ClientFrame::Sync)?.frame {
        ServerFrame::Ack => {
            println!(
                "sync requested; `cgc-fresh status` or `cgc-fresh events` shows when it is done"
            );
            Ok(EXIT_OK)
        }
        other => unexpected(other),
    }
}

fn events(client: &mut Client) -> Result<u8, ClientError> {
    client.set_timeout(None)?;
    match client.request(ClientFrame::Subscribe)?.frame {
        ServerFrame::Ack => {}
        other => return unexpected(other),
    }
    let mut out = std::io::stdout();
    loop {
        let line = match client.read_line() {
            Ok(line) => line,
            Err(ClientError::Closed) => return Ok(EXIT_OK),
            Err(e) => return Err(e),
        };
        if writeln!(out, "{line}").and_then(|_| out.flush()).is_err() {
            return Ok(EXIT_OK); // stdout closed (e.g. piped into head)
        }
    }
}

/// Sends each frame on this one connection (so a session started by one
/// frame is still live for the next) and prints everything read until the
/// frame's reply. Exit code 4 when any reply was an `error`.
fn send(client: &mut Client, frames: Vec<String>) -> Result<u8, ClientError> {
    let lines: Box<dyn Iterator<Item = std::io::Result<String>>> = if frames.is_empty() {
        Box::new(std::io::stdin().lines())
    } else {
        Box::new(frames.into_iter().map(Ok))
    };
    let mut code = EXIT_OK;
    let mut sent = 0u64;
    for line in lines {
        let line = line?;
        if line.trim().is_empty() {
            continue;
        }
        sent += 1;
        let (bytes, awaited) = frame_with_reply_id(line.trim(), sent);
        client.send_raw(&bytes)?;
        loop {
            let reply = client.read_line()?;
            println!("{reply}");
            let decoded = cgc_fresh_proto::decode_server_frame(reply.as_bytes()).ok();
            let Some(Envelope { id, frame }) = decoded else {
                continue;
            };
            let is_error = matches!(frame, ServerFrame::Error(_));
            let answers = match &awaited {
                Some(awaited) => id.as_ref() == Some(awaited),
                None => is_error && id.is_none(),
            };
            if answers {
                if is_error {
                    code = EXIT_SERVICE_ERROR;
                }
                break;
            }
        }
    }
    Ok(code)
}

/// The line to send for `frame` and the reply id to wait for. A JSON object
/// without an `id` gets `"send-<n>"`; a line the service cannot read as a
/// frame with an id is answered by an `error` without one (`None`).
fn frame_with_reply_id(frame: &str, n: u64) -> (Vec<u8>, Option<cgc_fresh_proto::RequestId>) {
    use cgc_fresh_proto::RequestId;
    use serde_json::Value;
    let mut out = frame.as_bytes().to_vec();
    let mut awaited = None;
    if let Ok(Value::Object(mut object)) = serde_json::from_str::<Value>(frame) {
        match object.get("id") {
            None | Some(Value::Null) => {
                let id = format!("send-{n}");
                object.insert("id".into(), Value::String(id.clone()));
                awaited = Some(RequestId::Text(id));
                if let Ok(bytes) = serde_json::to_vec(&Value::Object(object)) {
                    out = bytes;
                }
            }
            Some(Value::String(text)) => awaited = Some(RequestId::Text(text.clone())),
            Some(Value::Number(number)) => awaited = number.as_u64().map(RequestId::Number),
            Some(_) => {}
        }
    }
    out.push(b'\n');
    (out, awaited)
}

fn unexpected(frame: ServerFrame) -> Result<u8, ClientError> {
    match frame {
        ServerFrame::Error(error) => {
            eprintln!(
                "cgc-fresh: the service says {}: {}",
                error.code.as_str(),
                error.message
            );
            Ok(EXIT_SERVICE_ERROR)
        }
        other => Err(ClientError::BadFrame(format!(
            "unexpected {} frame",
            other.type_name()
        ))),
    }
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// The one-line human summary of a state frame.
pub fn describe_state(state: &StateFrame, now: u64) -> String {
    let mut line = format!(
        "{}: {}",
        state.workspace,
        state.status.as_str().replace('_', " ")
    );
    if let Some(since) = state.stale_since {
        line.push_str(&format!(" since {}", ago(now, since)));
    }
    match state.last_synced_at {
        Some(at) => line.push_str(&format!("; last sync {}", ago(now, at))),
        None => line.push_str("; no sync recorded"),
    }
    match state.progress.as_ref().filter(|_| state.syncing) {
        Some(progress) => {
            use crate::harness::status_line::{progress_text, short_duration};
            line.push_str("; ");
            line.push_str(&progress_text(progress, now));
            // A phase without counts says its time already.
            if progress.done.is_some() {
                let running = short_duration(now.saturating_sub(progress.since));
                line.push_str(&format!(", for {running}"));
            }
        }
        None if state.syncing => line.push_str("; a sync is running"),
        None => {}
    }
    if let Some(watcher) = &state.watcher {
        line.push_str(&format!("; watcher {} ({})", watcher.state, watcher.mode));
    }
    if let Some(error) = &state.last_error {
        line.push_str(&format!("; last error: {error}"));
    }
    if let Some(detail) = &state.detail {
        line.push_str(&format!(" ({detail})"));
    }
    for warning in &state.warnings {
        line.push_str(&format!("\nwarning: {warning}"));
    }
    line
}

/// "12s ago", "3m 4s ago", "2h 5m ago".
pub fn ago(now: u64, then: u64) -> String {
    let secs = Duration::from_millis(now.saturating_sub(then)).as_secs();
    match secs {
        0..=59 => format!("{secs}s ago"),
        60..=3599 => format!("{}m {}s ago", secs / 60, secs % 60),
        _ => format!("{}h {}m ago", secs / 3600, (secs % 3600) / 60),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cgc_fresh_proto::{FreshnessStatus, SyncPhase, SyncProgress};

    fn syncing(progress: Option<SyncProgress>) -> StateFrame {
        StateFrame {
            workspace: "/w".into(),
            status: FreshnessStatus::Syncing,
            last_synced_at: None,
            stale_since: None,
            last_error: None,
            edit_epoch: 3,
            syncing: true,
            watcher: None,
            backend: None,
            detail: None,
            warnings: Vec::new(),
            progress,
        }
    }

    #[test]
    fn status_names_a_long_syncs_progress() {
        let counted = SyncProgress {
            phase: SyncPhase::Writing,
            done: Some(340),
            total: Some(2_032),
            since: 1_000,
        };
        assert_eq!(
            describe_state(&syncing(Some(counted)), 15_000),
            "/w: syncing; no sync recorded; syncing 340/2 032 files (writing), for 14s"
        );
        let phase_only = SyncProgress {
            phase: SyncPhase::Reconciling,
            done: None,
            total: None,
            since: 1_000,
        };
        assert_eq!(
            describe_state(&syncing(Some(phase_only)), 15_000),
            "/w: syncing; no sync recorded; syncing (reconciling, 14s)"
        );
        assert_eq!(
            describe_state(&syncing(None), 15_000),
            "/w: syncing; no sync recorded; a sync is running"
        );
    }
}
