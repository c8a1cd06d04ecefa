//! Claude Code: the real `cgc-fresh hook claude-code` binary run the way
//! Claude Code runs a command hook (one JSON payload on standard input,
//! `CLAUDE_PID` and `CLAUDE_PROJECT_DIR` in the environment, awaited, its
//! standard output read), `status --line`, and `install --harness
//! claude-code` on a settings file that holds the person's own hooks and
//! a `.mcp.json` that holds the person's own MCP servers.
//!
//! The last tests drive the real, pinned Claude Code CLI
//! (`scripts/install-claude-code.sh`, `$CGC_FRESH_CLAUDE_CODE`) offline
//! against a scripted fake Messages API on loopback
//! (`tests/support/fake_anthropic.py`), with the real pinned `cgc`
//! (`$CGC_FRESH_REAL_CGC`). Without those variables they say so and return —
//! unless `CGC_FRESH_REQUIRE_CLAUDE_CODE` / `CGC_FRESH_REQUIRE_REAL_CGC` is
//! set (the test script sets both), in which case that is a failure. The
//! project is installed as a person installs it, so those sessions also
//! run the `cgc-fresh mcp` server of the project's `.mcp.json`; in `-p`
//! mode the pinned Claude Code uses a project's servers without asking.

use std::fs;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::support::{
    fast_env, indexed_with_fake, is_alive, wait_until, Conn, FakeCgc, KilledOnDrop, Sandbox,
    Service, BIN,
};

/// A stand-in for the Claude Code process: the owner of the session.
fn owner_process() -> KilledOnDrop {
    KilledOnDrop(
        Command::new("sleep")
            .arg("600")
            .stdin(Stdio::null())
            .spawn()
            .expect("sleep"),
    )
}

/// One hook run's result.
struct HookRun {
    output: Output,
    took: Duration,
}

impl HookRun {
    /// The `systemMessage` printed, if any — after checking that standard
    /// output is empty or exactly one JSON object with only that key.
    fn system_message(&self) -> Option<String> {
        let stdout = String::from_utf8_lossy(&self.output.stdout);
        if stdout.is_empty() {
            return None;
        }
        assert!(stdout.ends_with('\n'), "{stdout:?}");
        assert_eq!(stdout.lines().count(), 1, "one line: {stdout:?}");
        let value: Value = serde_json::from_str(stdout.trim())
            .unwrap_or_else(|e| panic!("not JSON ({e}): {stdout:?}"));
        let object = value.as_object().expect("an object");
        assert_eq!(object.len(), 1, "only systemMessage: {value}");
        Some(
            object["systemMessage"]
                .as_str()
                .expect("a string")
                .to_string(),
        )
    }
}

/// Runs `cgc-fresh hook claude-code` as Claude Code does.
fn run_hook(sandbox: &Sandbox, payload: &Value, env: &[(&str, String)]) -> HookRun {
    run_hook_bytes(
        sandbox,
        serde_json::to_vec(payload).expect("json").as_slice(),
        env,
        &[],
    )
}

fn run_hook_bytes(
    sandbox: &Sandbox,
    payload: &[u8],
    env: &[(&str, String)],
    extra_args: &[&str],
) -> HookRun {
    let mut cmd = sandbox.command();
    cmd.args(["hook", "claude-code"]).args(extra_args);
    cmd.env("CGC_FRESH_NO_AUTOSTART", "1")
        .env("CGC_FRESH_HOOK_BUDGET_MS", "3000")
        .env("CGC_FRESH_HOOK_LOG", hook_log(sandbox))
        .env("CLAUDE_PROJECT_DIR", sandbox.workspace());
    for (k, v) in env {
        cmd.env(k, v);
    }
    let started = Instant::now();
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn hook");
    // A hook that exits without reading (bad arguments) closes the pipe.
    let _ = child.stdin.take().expect("stdin").write_all(payload);
    let output = child.wait_with_output().expect("hook output");
    let took = started.elapsed();
    assert_eq!(
        output.status.code(),
        Some(0),
        "a hook always exits 0: {output:?}"
    );
    assert!(
        output.stderr.is_empty(),
        "a hook writes nothing to standard error: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    HookRun { output, took }
}

fn hook_log(sandbox: &Sandbox) -> PathBuf {
    sandbox.root.path().join("hook.log")
}

fn hook_log_events(sandbox: &Sandbox) -> Vec<Value> {
    fs::read_to_string(hook_log(sandbox))
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).expect("hook log lines are JSON"))
        .collect()
}

fn payload(session: &str, event: &str, extra: Value) -> Value {
    let mut value = json!({
        "session_id": session,
        "transcript_path": "/nonexistent/transcript.jsonl",
        "cwd": "/nonexistent",
        "hook_event_name": event,
    });
    if let (Some(object), Value::Object(extra)) = (value.as_object_mut(), extra) {
        object.extend(extra);
    }
    value
}

fn owner_env(owner: &KilledOnDrop) -> Vec<(&'static str, String)> {
    vec![("CLAUDE_PID", owner.id().to_string())]
}

/// A subscribed observer connection (not a session of its own).
fn observer(service: &Service) -> Conn {
    let mut conn = service.connect();
    conn.hello();
    conn.subscribe();
    conn
}

fn events_for<'a>(events: &'a [Value], session: &str) -> Vec<&'a Value> {
    events.iter().filter(|e| e["session"] == session).collect()
}

/// Whether a lifetime of `session` was closed (the service logs it as
/// `<session>#<lifetime>`).
fn lifetime_closed(service: &Service, session: &str) -> bool {
    let prefix = format!("{session}#");
    service.log_events("session_closed").iter().any(|e| {
        e["session"]
            .as_str()
            .is_some_and(|s| s.starts_with(&prefix))
    })
}

#[test]
fn a_session_start_an_edit_and_its_sync_with_notices_printed_once_then_session_end() {
    let (sandbox, _fake, service) = indexed_with_fake(json!({}), &fast_env(&[]));
    let owner = owner_process();
    let env = owner_env(&owner);
    let mut watch = observer(&service);
    let start = run_hook(
        &sandbox,
        &payload("cc-1", "SessionStart", json!({"source": "startup"})),
        &env,
    );
    assert_eq!(start.system_message(), None, "SessionStart never prints");
    let starts = service.log_events("session_start");
    let starts = events_for(&starts, "cc-1");
    assert_eq!(starts.len(), 1, "{starts:?}");
    assert_eq!(starts[0]["reason"], "Startup");
    assert_eq!(starts[0]["instance"], format!("claude-code-{}", owner.id()));
    assert!(!service.log_events("owner_watched").is_empty());

    let file = sandbox.workspace().join("a.py");
    let write_input = json!({"file_path": file, "content": "def f():\n    return 1\n"});
    let pre = run_hook(
        &sandbox,
        &payload(
            "cc-1",
            "PreToolUse",
            json!({"tool_name": "Write", "tool_input": write_input}),
        ),
        &env,
    );
    assert_eq!(pre.system_message(), None);
    fs::write(&file, "def f():\n    return 1\n").expect("write");
    let calls = service.log_events("tool_call");
    assert_eq!(calls.len(), 1, "{calls:?}");
    assert_eq!(calls[0]["tool"], "write");
    assert_eq!(calls[0]["paths"], 1);

    let post = run_hook(
        &sandbox,
        &payload(
            "cc-1",
            "PostToolUse",
            json!({"tool_name": "Write", "tool_input": write_input,
                   "tool_response": {"type": "create", "filePath": file}}),
        ),
        &env,
    );
    watch.wait_status("fresh");
    let stop = run_hook(
        &sandbox,
        &payload("cc-1", "Stop", json!({"stop_hook_active": false})),
        &env,
    );
    let printed: Vec<String> = [post.system_message(), stop.system_message()]
        .into_iter()
        .flatten()
        .collect();
    let all = printed.join("\n");
    assert!(all.contains("may be stale"), "{printed:?}");
    assert!(all.contains("is up to date"), "{printed:?}");
    for message in &printed {
        assert!(
            message.lines().all(|l| l.starts_with("cgc-fresh: ")),
            "{message}"
        );
    }
    // Taken once, spent: the next Stop prints nothing.
    let again = run_hook(&sandbox, &payload("cc-1", "Stop", json!({})), &env);
    assert_eq!(again.system_message(), None);

    let end = run_hook(
        &sandbox,
        &payload("cc-1", "SessionEnd", json!({"reason": "prompt_input_exit"})),
        &env,
    );
    assert_eq!(end.system_message(), None);
    let shutdowns = service.log_events("session_shutdown");
    assert_eq!(shutdowns.len(), 1, "{shutdowns:?}");
    assert_eq!(shutdowns[0]["session"], "cc-1");
    assert_eq!(shutdowns[0]["reason"], "prompt_input_exit");
    wait_until("the session to close", Duration::from_secs(10), || {
        lifetime_closed(&service, "cc-1")
    });
    assert!(is_alive(owner.id() as i32), "the owner lives on");
}

#[test]
fn bash_is_a_tool_call_without_paths_and_other_tools_send_nothing() {
    let (sandbox, _fake, service) = indexed_with_fake(json!({}), &fast_env(&[]));
    let owner = owner_process();
    let env = owner_env(&owner);
    run_hook(
        &sandbox,
        &payload("cc-b", "SessionStart", json!({"source": "startup"})),
        &env,
    );
    for tool in ["Read", "Grep", "Glob"] {
        run_hook(
            &sandbox,
            &payload(
                "cc-b",
                "PreToolUse",
                json!({"tool_name": tool, "tool_input": {"file_path": "x"}}),
            ),
            &env,
        );
    }
    assert!(service.log_events("tool_call").is_empty());
    run_hook(
        &sandbox,
        &payload(
            "cc-b",
            "PreToolUse",
            json!({"tool_name": "Bash", "tool_input": {"command": "sed -i s/a/b/ a.py"}}),
        ),
        &env,
    );
    run_hook(
        &sandbox,
        &payload(
            "cc-b",
            "PostToolUseFailure",
            json!({"tool_name": "Bash", "tool_input": {"command": "false"}, "error": "exit 1"}),
        ),
        &env,
    );
    let calls = service.log_events("tool_call");
    assert_eq!(calls.len(), 1, "{calls:?}");
    assert_eq!(calls[0]["tool"], "bash");
    assert_eq!(calls[0]["paths"], 0);
    let log = hook_log_events(&sandbox);
    let done: Vec<&Value> = log.iter().filter(|l| l["event"] == "hook_done").collect();
    assert_eq!(
        done.last().expect("a hook_done")["frames"],
        json!(["tool_result"])
    );
}

#[test]
fn killing_the_claude_process_ends_the_session_and_stops_its_children() {
    let (sandbox, fake, service) =
        indexed_with_fake(json!({}), &fast_env(&[("CGC_FRESHNESS_WATCH", "on")]));
    let mut owner = owner_process();
    let env = owner_env(&owner);
    run_hook(
        &sandbox,
        &payload("cc-k", "SessionStart", json!({"source": "startup"})),
        &env,
    );
    let mut watcher = None;
    wait_until("the session's watcher", Duration::from_secs(10), || {
        watcher = fake
            .invocations()
            .into_iter()
            .find(|r| {
                r["argv"]
                    .as_array()
                    .is_some_and(|a| a.iter().any(|v| v == "watch"))
            })
            .and_then(|r| r["pid"].as_i64());
        watcher.is_some()
    });
    let watcher = watcher.unwrap_or_default() as i32;
    assert!(is_alive(watcher));
    // SIGKILL: Claude Code runs no SessionEnd hook.
    owner.kill().expect("kill");
    owner.wait().expect("reap");
    wait_until("the session to end", Duration::from_secs(10), || {
        lifetime_closed(&service, "cc-k")
    });
    assert!(!service.log_events("owner_exited").is_empty());
    wait_until("the watcher to stop", Duration::from_secs(10), || {
        !is_alive(watcher)
    });
    assert!(service.log_events("session_shutdown").is_empty());
}

#[test]
fn a_tool_call_for_a_session_the_service_never_saw_takes_the_session_up() {
    let (sandbox, _fake, service) = indexed_with_fake(json!({}), &fast_env(&[]));
    let owner = owner_process();
    let env = owner_env(&owner);
    let mut watch = observer(&service);
    // No SessionStart reached this service (it started later).
    let file = sandbox.workspace().join("late.py");
    run_hook(
        &sandbox,
        &payload(
            "cc-late",
            "PreToolUse",
            json!({"tool_name": "Edit", "tool_input": {"file_path": file}}),
        ),
        &env,
    );
    fs::write(&file, "x = 1\n").expect("write");
    run_hook(
        &sandbox,
        &payload("cc-late", "PostToolUse", json!({"tool_name": "Edit"})),
        &env,
    );
    let starts = service.log_events("session_start");
    let starts = events_for(&starts, "cc-late");
    assert_eq!(starts.len(), 1, "{starts:?}");
    assert_eq!(starts[0]["reason"], "Resume");
    watch.wait_status("fresh");
    assert!(hook_log_events(&sandbox)
        .iter()
        .any(|l| l["event"] == "session_replayed"));
}

#[test]
fn with_no_service_the_hook_is_silent_quick_and_starts_one_detached() {
    let sandbox = Sandbox::new();
    sandbox.mark_indexed();
    let fake = FakeCgc::new(&sandbox, json!({}));
    let owner = owner_process();
    let mut env = owner_env(&owner);
    env.extend(fake.env().into_iter().map(|(k, v)| {
        let k: &'static str = match k.as_str() {
            "CGC_EXECUTABLE" => "CGC_EXECUTABLE",
            "FAKE_CGC_SCENARIO" => "FAKE_CGC_SCENARIO",
            _ => "FAKE_CGC_LOG",
        };
        (k, v)
    }));
    let mut without_autostart = env.clone();
    without_autostart.push(("CGC_FRESH_NO_AUTOSTART", "1".into()));
    let quiet = run_hook(
        &sandbox,
        &payload("cc-d", "SessionStart", json!({"source": "startup"})),
        &without_autostart,
    );
    assert_eq!(quiet.system_message(), None);
    assert!(quiet.took < Duration::from_secs(1), "{:?}", quiet.took);
    let socket = sandbox.default_socket();
    std::thread::sleep(Duration::from_millis(300));
    assert!(!socket.exists(), "CGC_FRESH_NO_AUTOSTART=1 starts nothing");

    env.push(("CGC_FRESH_NO_AUTOSTART", "0".into()));
    let started = run_hook(
        &sandbox,
        &payload("cc-d", "SessionStart", json!({"source": "startup"})),
        &env,
    );
    assert_eq!(started.system_message(), None);
    assert!(started.took < Duration::from_secs(1), "{:?}", started.took);
    let log = hook_log_events(&sandbox);
    let autostart = log
        .iter()
        .find(|l| l["event"] == "autostart")
        .unwrap_or_else(|| panic!("no autostart in {log:?}"));
    let pid = autostart["pid"].as_i64().expect("pid") as i32;
    let _stop = StopOnDrop(pid);
    wait_until("the autostarted service", Duration::from_secs(20), || {
        std::os::unix::net::UnixStream::connect(&socket).is_ok()
    });
    // Its own process group, not Claude Code's.
    assert_eq!(
        process_group_of(pid),
        pid,
        "the service leads its own group"
    );
    // The next hook finds it and the session is taken up.
    let mut conn = Conn::connect(&socket);
    assert_eq!(conn.hello()["pid"], pid);
    conn.subscribe();
    run_hook(
        &sandbox,
        &payload(
            "cc-d",
            "PreToolUse",
            json!({"tool_name": "Write", "tool_input": {"file_path": "b.py"}}),
        ),
        &env,
    );
    fs::write(sandbox.workspace().join("b.py"), "y = 2\n").expect("write");
    run_hook(
        &sandbox,
        &payload("cc-d", "PostToolUse", json!({"tool_name": "Write"})),
        &env,
    );
    conn.wait_status("fresh");
}

/// SIGTERM to a service this test started (not our child) when dropped.
struct StopOnDrop(i32);

impl Drop for StopOnDrop {
    fn drop(&mut self) {
        let _ = Command::new("kill")
            .arg("-TERM")
            .arg(self.0.to_string())
            .status();
        let deadline = Instant::now() + Duration::from_secs(10);
        while is_alive(self.0) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

/// The process group of `pid` (field 5 of /proc/<pid>/stat).
fn process_group_of(pid: i32) -> i32 {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).expect("stat");
    let rest = stat.rsplit_once(')').expect("stat format").1;
    rest.split_whitespace()
        .nth(2)
        .and_then(|s| s.parse().ok())
        .expect("process group field")
}

#[test]
fn malformed_payloads_exit_0_silently_with_a_log_line() {
    let sandbox = Sandbox::new();
    let env: Vec<(&str, String)> = vec![("CLAUDE_PID", "1".into())];
    for bytes in [
        &b"not json"[..],
        b"[]",
        br#"{"hook_event_name":"PreToolUse","session_id":"s"}"#,
        br#"{"hook_event_name":"PreToolUse","session_id":"s","tool_name":"Write","tool_input":{}}"#,
        b"",
    ] {
        let before = hook_log_events(&sandbox).len();
        let run = run_hook_bytes(&sandbox, bytes, &env, &[]);
        assert_eq!(run.system_message(), None);
        let log = hook_log_events(&sandbox);
        assert_eq!(log.len(), before + 1, "{log:?}");
        assert_eq!(log[before]["event"], "hook_payload_rejected");
    }
}

/// A hook command written wrong in the settings (an extra argument, an
/// unknown flag, a harness it does not know) must not fail silently, and
/// must not exit 2 (Claude Code would block and feed standard error to
/// the model): exit 1, one line on standard error saying what is wrong,
/// nothing on standard output. The status line likewise.
#[test]
fn a_hook_or_status_line_with_bad_arguments_exits_1_with_one_line_on_stderr() {
    let sandbox = Sandbox::new();
    for args in [
        &["hook", "claude-code", "SessionStart"][..],
        &["hook", "claude-code", "--bogus"],
        &["hook", "no-such-harness"],
        &["hook"],
        &["status", "--line", "--bogus"],
    ] {
        let out = sandbox
            .command()
            .args(args)
            .env("CGC_FRESH_NO_AUTOSTART", "1")
            .stdin(Stdio::null())
            .output()
            .expect("run");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {out:?}");
        assert!(out.stdout.is_empty(), "{args:?}: {out:?}");
        assert_eq!(stderr.lines().count(), 1, "{args:?}: {stderr}");
        let expected = if args[0] == "hook" {
            "cgc-fresh hook: "
        } else {
            "cgc-fresh status --line: "
        };
        assert!(
            stderr.starts_with(expected) && stderr.contains("--help"),
            "{args:?}: {stderr}"
        );
    }
    let bogus = sandbox
        .command()
        .args(["hook", "claude-code", "--bogus"])
        .stdin(Stdio::null())
        .output()
        .expect("run");
    assert!(
        String::from_utf8_lossy(&bogus.stderr).contains("'--bogus'"),
        "the reason names the argument: {bogus:?}"
    );
    // `--help` still prints help, exit 0.
    let help = sandbox
        .command()
        .args(["hook", "claude-code", "--help"])
        .output()
        .expect("run");
    assert_eq!(help.status.code(), Some(0), "{help:?}");
}

#[test]
fn the_status_line_reads_the_service_and_is_silent_without_one() {
    let sandbox = Sandbox::new();
    let status_line = |input: Option<&str>| -> Output {
        let mut cmd = sandbox.command();
        cmd.args(["status", "--line"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = cmd.spawn().expect("status --line");
        if let Some(input) = input {
            child
                .stdin
                .take()
                .expect("stdin")
                .write_all(input.as_bytes())
                .expect("stdin");
        }
        drop(child.stdin.take());
        child.wait_with_output().expect("output")
    };
    let none = status_line(None);
    assert_eq!(none.status.code(), Some(0));
    assert!(none.stdout.is_empty() && none.stderr.is_empty(), "{none:?}");

    sandbox.mark_indexed();
    let fake = FakeCgc::new(&sandbox, json!({}));
    let service = Service::start_with_fake(&sandbox, &fake, &fast_env(&[]));
    let first = status_line(None);
    assert_eq!(String::from_utf8_lossy(&first.stdout), "graph: unknown\n");
    let mut conn = crate::support::open_session(&service, "s1");
    crate::support::agent_edit(&mut conn, "s1", "a.py");
    conn.wait_status("fresh");
    // Claude Code's status line payload names the workspace.
    let payload = json!({"workspace": {"project_dir": sandbox.workspace()}}).to_string();
    let fresh = status_line(Some(&payload));
    assert_eq!(String::from_utf8_lossy(&fresh.stdout), "graph: fresh\n");
    assert!(fresh.stderr.is_empty());
}

fn users_settings() -> Value {
    json!({
        "model": "sonnet",
        "env": {"FOO": "1"},
        "hooks": {
            "PreToolUse": [
                {"matcher": "Bash", "hooks": [{"type": "command", "command": "guard.sh"}]}
            ],
            "Stop": [
                {"hooks": [{"type": "command", "command": "notify-send done"}]}
            ]
        }
    })
}

/// The person's own `.mcp.json`: another server, and the `cgc mcp start`
/// entry `cgc mcp setup` writes.
fn users_mcp_json() -> Value {
    json!({
        "mcpServers": {
            "notes": {"command": "npx", "args": ["-y", "notes-mcp"]},
            "CodeGraphContext": {"command": "/usr/local/bin/cgc", "args": ["mcp", "start"]}
        }
    })
}

fn cli(sandbox: &Sandbox, args: &[&str], env: &[(&str, &Path)]) -> Output {
    let mut cmd = sandbox.command();
    cmd.args(args);
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().expect("cli");
    assert_eq!(out.status.code(), Some(0), "{args:?}: {out:?}");
    out
}

#[test]
fn install_and_uninstall_merge_into_and_out_of_settings_with_the_users_own_hooks() {
    let sandbox = Sandbox::new();
    let settings = sandbox.workspace().join(".claude/settings.json");
    fs::create_dir_all(settings.parent().expect("dir")).expect("mkdir");
    let original = serde_json::to_string_pretty(&users_settings()).expect("json");
    fs::write(&settings, &original).expect("settings");
    let mcp_json = sandbox.workspace().join(".mcp.json");
    let original_mcp = serde_json::to_string_pretty(&users_mcp_json()).expect("json");
    fs::write(&mcp_json, &original_mcp).expect(".mcp.json");

    let dry = cli(
        &sandbox,
        &["install", "--harness", "claude-code", "--dry-run"],
        &[],
    );
    let dry_text = String::from_utf8_lossy(&dry.stdout);
    assert!(dry_text.contains(&format!("would write {}", settings.display())));
    assert!(dry_text.contains(&format!("would write {}", mcp_json.display())));
    assert_eq!(fs::read_to_string(&settings).expect("read"), original);
    assert_eq!(fs::read_to_string(&mcp_json).expect("read"), original_mcp);

    let first = cli(&sandbox, &["install", "--harness", "claude-code"], &[]);
    let installed_text = fs::read_to_string(&settings).expect("read");
    let installed: Value = serde_json::from_str(&installed_text).expect("json");
    let bin = fs::canonicalize(BIN).expect("bin");
    // `.mcp.json`: the person's servers as they were, ours added after
    // them; the `cgc mcp start` entry stays, and install names it.
    let workspace = fs::canonicalize(sandbox.workspace()).expect("workspace");
    let mcp_installed_text = fs::read_to_string(&mcp_json).expect("read");
    let mcp_installed: Value = serde_json::from_str(&mcp_installed_text).expect("json");
    let mut expected_mcp = users_mcp_json();
    expected_mcp["mcpServers"]["cgc-fresh"] = json!({
        "type": "stdio",
        "command": bin,
        "args": ["mcp", "--workspace", workspace],
    });
    assert_eq!(mcp_installed, expected_mcp);
    let names: Vec<&String> = mcp_installed["mcpServers"]
        .as_object()
        .expect("object")
        .keys()
        .collect();
    assert_eq!(names, ["notes", "CodeGraphContext", "cgc-fresh"]);
    let said = String::from_utf8_lossy(&first.stdout);
    assert!(
        said.contains("note: `CodeGraphContext` in .mcp.json runs `cgc mcp start`")
            && said.contains("claude mcp remove --scope project CodeGraphContext"),
        "{said}"
    );
    let hook_command = format!("{} hook claude-code", bin.display());
    for event in [
        "SessionStart",
        "PreToolUse",
        "PostToolUse",
        "PostToolUseFailure",
        "Stop",
        "SessionEnd",
    ] {
        let groups = installed["hooks"][event].as_array().expect(event);
        let ours: Vec<&Value> = groups
            .iter()
            .filter(|g| g["hooks"][0]["command"] == hook_command.as_str())
            .collect();
        assert_eq!(ours.len(), 1, "{event}: {groups:?}");
    }
    assert_eq!(
        installed["hooks"]["PreToolUse"][0]["hooks"][0]["command"],
        "guard.sh"
    );
    assert_eq!(
        installed["hooks"]["Stop"][0]["hooks"][0]["command"],
        "notify-send done"
    );
    assert_eq!(installed["model"], "sonnet");
    assert_eq!(installed["env"]["FOO"], "1");
    assert_eq!(
        installed["statusLine"],
        json!({"type": "command", "command": format!("{} status --line", bin.display())})
    );
    // The person's keys keep their order.
    let keys: Vec<&String> = installed.as_object().expect("object").keys().collect();
    assert_eq!(keys, ["model", "env", "hooks", "statusLine"]);

    // Idempotent: a second install changes not one byte.
    let again = cli(&sandbox, &["install", "--harness", "claude-code"], &[]);
    assert!(String::from_utf8_lossy(&again.stdout).contains("already"));
    assert_eq!(fs::read_to_string(&settings).expect("read"), installed_text);
    assert_eq!(
        fs::read_to_string(&mcp_json).expect("read"),
        mcp_installed_text
    );

    cli(&sandbox, &["uninstall", "--harness", "claude-code"], &[]);
    let back: Value =
        serde_json::from_str(&fs::read_to_string(&settings).expect("read")).expect("json");
    assert_eq!(back, users_settings());
    let mcp_back: Value =
        serde_json::from_str(&fs::read_to_string(&mcp_json).expect("read")).expect("json");
    assert_eq!(mcp_back, users_mcp_json(), "exactly ours taken out");

    // A project without `.mcp.json`: install creates it with our entry
    // alone, and uninstall removes the file again.
    fs::remove_file(&mcp_json).expect("rm");
    cli(&sandbox, &["install", "--harness", "claude-code"], &[]);
    let created: Value =
        serde_json::from_str(&fs::read_to_string(&mcp_json).expect("read")).expect("json");
    assert_eq!(
        created,
        json!({"mcpServers": {"cgc-fresh": expected_mcp["mcpServers"]["cgc-fresh"]}})
    );
    cli(&sandbox, &["uninstall", "--harness", "claude-code"], &[]);
    assert!(!mcp_json.exists(), "the file install created is gone");

    // A `cgc-fresh` entry of the person's own is kept, and install says so.
    let own = json!({"mcpServers": {"cgc-fresh": {"command": "my-wrapper", "args": ["mcp"]}}});
    fs::write(&mcp_json, own.to_string()).expect("write");
    let kept = cli(&sandbox, &["install", "--harness", "claude-code"], &[]);
    assert!(String::from_utf8_lossy(&kept.stdout).contains("kept your own `cgc-fresh`"));
    assert_eq!(
        fs::read_to_string(&mcp_json).expect("read"),
        own.to_string()
    );
    cli(&sandbox, &["uninstall", "--harness", "claude-code"], &[]);
    assert_eq!(
        fs::read_to_string(&mcp_json).expect("read"),
        own.to_string()
    );
    fs::remove_file(&mcp_json).expect("rm");

    // User scope: $CLAUDE_CONFIG_DIR/settings.json, created when missing.
    // The MCP server is not written at user scope (Claude Code's own
    // `.claude.json` holds it): install prints the command instead.
    let config_dir = sandbox.root.path().join("claude-config");
    let user_install = cli(
        &sandbox,
        &["install", "--harness", "claude-code", "--scope", "user"],
        &[("CLAUDE_CONFIG_DIR", &config_dir)],
    );
    let said = String::from_utf8_lossy(&user_install.stdout);
    assert!(
        said.contains(&format!(
            "claude mcp add --scope user cgc-fresh -- {} mcp",
            bin.display()
        )),
        "{said}"
    );
    assert!(!config_dir.join(".claude.json").exists());
    assert!(!mcp_json.exists(), "no project file at user scope");
    let user: Value = serde_json::from_str(
        &fs::read_to_string(config_dir.join("settings.json")).expect("user settings"),
    )
    .expect("json");
    assert!(user["hooks"]["SessionEnd"].is_array());
    cli(
        &sandbox,
        &["uninstall", "--harness", "claude-code", "--scope", "user"],
        &[("CLAUDE_CONFIG_DIR", &config_dir)],
    );
    let user: Value = serde_json::from_str(
        &fs::read_to_string(config_dir.join("settings.json")).expect("user settings"),
    )
    .expect("json");
    assert_eq!(user, json!({}), "hooks we created are removed with ours");
    assert!(!config_dir.join(".claude.json").exists());

    // A symlinked settings file is refused, never written through.
    let elsewhere = sandbox.root.path().join("elsewhere.json");
    fs::write(&elsewhere, "{}").expect("write");
    fs::remove_file(&settings).expect("rm");
    std::os::unix::fs::symlink(&elsewhere, &settings).expect("symlink");
    let refused = sandbox
        .command()
        .args(["install", "--harness", "claude-code"])
        .output()
        .expect("cli");
    assert_eq!(refused.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&refused.stderr).contains("symlink"));
    assert_eq!(fs::read_to_string(&elsewhere).expect("read"), "{}");
}

// ---- the real Claude Code, offline, with the real cgc -------------------

fn required(var: &str, require: &str, what: &str) -> Option<PathBuf> {
    match std::env::var_os(var) {
        Some(path) if !path.is_empty() => Some(PathBuf::from(path)),
        _ if std::env::var_os(require).is_some() => panic!("{var} is not set; {what}"),
        _ => {
            eprintln!("{var} unset: skipping ({what})");
            None
        }
    }
}

/// The fake Messages API (`tests/support/fake_anthropic.py`).
struct FakeApi {
    _child: KilledOnDrop,
    port: u16,
    record: PathBuf,
}

impl FakeApi {
    fn start(dir: &Path, script: Value) -> FakeApi {
        let script_path = dir.join("api-script.json");
        fs::write(&script_path, script.to_string()).expect("script");
        let record = dir.join("api-requests.jsonl");
        let server =
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/support/fake_anthropic.py");
        let mut child = Command::new("python3")
            .arg(server)
            .arg("--script")
            .arg(&script_path)
            .arg("--record")
            .arg(&record)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .spawn()
            .expect("python3");
        let mut line = String::new();
        BufReader::new(child.stdout.take().expect("stdout"))
            .read_line(&mut line)
            .expect("port line");
        let port = line
            .trim()
            .strip_prefix("port ")
            .and_then(|p| p.parse().ok())
            .unwrap_or_else(|| panic!("fake API said {line:?}"));
        FakeApi {
            _child: KilledOnDrop(child),
            port,
            record,
        }
    }

    /// Every request body as text.
    fn request_bodies(&self) -> Vec<String> {
        fs::read_to_string(&self.record)
            .unwrap_or_default()
            .lines()
            .map(str::to_string)
            .collect()
    }
}

/// A real-CLI project: a small Python package indexed by the real `cgc`
/// (Kùzu, in the sandbox's HOME), a service running that `cgc`, and the
/// hooks installed in the project's `.claude/settings.json`.
struct RealProject {
    sandbox: Sandbox,
    cgc: PathBuf,
    claude: PathBuf,
}

impl RealProject {
    fn new() -> Option<RealProject> {
        let cgc = required(
            "CGC_FRESH_REAL_CGC",
            "CGC_FRESH_REQUIRE_REAL_CGC",
            "run scripts/install-cgc.sh",
        )?;
        let claude = required(
            "CGC_FRESH_CLAUDE_CODE",
            "CGC_FRESH_REQUIRE_CLAUDE_CODE",
            "run scripts/install-claude-code.sh",
        )?;
        let sandbox = Sandbox::new();
        let ws = sandbox.workspace();
        fs::create_dir_all(ws.join("pkg")).expect("mkdir");
        fs::write(ws.join("pkg/__init__.py"), "").expect("write");
        fs::write(
            ws.join("pkg/alpha.py"),
            "def alpha_main(x):\n    return x + 1\n",
        )
        .expect("write");
        fs::write(ws.join("pkg/beta.py"), "def beta_main():\n    return 3\n").expect("write");
        let project = RealProject {
            sandbox,
            cgc,
            claude,
        };
        let out = project.cgc_cmd(&["index", "."]).output().expect("cgc");
        assert!(out.status.success(), "cgc index: {out:?}");
        Some(project)
    }

    fn cgc_cmd(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new(&self.cgc);
        cmd.current_dir(self.sandbox.workspace())
            .env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("HOME", self.sandbox.home())
            .env("COLUMNS", "1000")
            .args(["--db", "kuzudb"])
            .args(args)
            .stdin(Stdio::null());
        cmd
    }

    fn functions_named(&self, name: &str) -> usize {
        let cypher = format!("MATCH (f:Function) WHERE f.name = '{name}' RETURN f.name AS name");
        let out = self.cgc_cmd(&["query", &cypher]).output().expect("cgc");
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "cgc query: {stdout}");
        let start = stdout.find('[').unwrap_or_else(|| panic!("{stdout}"));
        serde_json::from_str::<Vec<Value>>(stdout[start..].trim())
            .unwrap_or_else(|e| panic!("{e}: {stdout}"))
            .len()
    }

    fn service(&self) -> Service {
        self.service_with(&[])
    }

    /// The service, with `extra` settings after the usual ones.
    fn service_with(&self, extra: &[(&str, &str)]) -> Service {
        let cgc = self.cgc.display().to_string();
        let mut env = vec![
            ("CGC_EXECUTABLE", cgc.as_str()),
            ("CGC_GLOBAL_ARGS", "--db kuzudb"),
            ("CGC_FRESHNESS_BATCH_MS", "100"),
            ("CGC_FRESHNESS_SETTLE_MS", "5000"),
            ("CGC_FRESHNESS_MIN_SYNC_GAP_MS", "0"),
        ];
        env.extend_from_slice(extra);
        Service::start(&self.sandbox, &[], &env)
    }

    fn install_hooks(&self) {
        cli(&self.sandbox, &["install", "--harness", "claude-code"], &[]);
    }

    /// Claude Code in `-p` mode, as the person runs it, offline.
    fn claude(&self, api: &FakeApi, args: &[&str]) -> Command {
        let root = self.sandbox.root.path();
        let home = root.join("claude-home");
        let config = root.join("claude-config");
        fs::create_dir_all(&home).expect("mkdir");
        fs::create_dir_all(&config).expect("mkdir");
        let mut cmd = Command::new(&self.claude);
        cmd.current_dir(self.sandbox.workspace())
            .env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("HOME", home)
            .env("CLAUDE_CONFIG_DIR", config)
            .env(
                "ANTHROPIC_BASE_URL",
                format!("http://127.0.0.1:{}", api.port),
            )
            .env("ANTHROPIC_API_KEY", "sk-ant-fake-key-for-tests")
            .env("DISABLE_TELEMETRY", "1")
            .env("DISABLE_AUTOUPDATER", "1")
            .env("DISABLE_ERROR_REPORTING", "1")
            .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
            // What the hook needs to find the service (as in the person's
            // own environment), and no second service.
            .env("XDG_RUNTIME_DIR", self.sandbox.runtime_dir())
            .env("XDG_STATE_HOME", self.sandbox.state_home())
            .env("CGC_FRESH_NO_AUTOSTART", "1")
            .env("CGC_FRESH_HOOK_BUDGET_MS", "3000")
            .env("CGC_FRESH_HOOK_LOG", hook_log(&self.sandbox))
            .args(args)
            .args([
                "--permission-mode",
                "acceptEdits",
                "--allowedTools",
                "Write",
                "Edit",
                "Bash",
                "--output-format",
                "stream-json",
                "--verbose",
            ])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        cmd
    }

    /// Starts Claude Code; its output goes to files named after `name`.
    fn spawn_claude(&self, api: &FakeApi, args: &[&str], name: &str) -> RunningClaude {
        let stdout = self
            .sandbox
            .root
            .path()
            .join(format!("claude-{name}.jsonl"));
        let stderr = self.sandbox.root.path().join(format!("claude-{name}.err"));
        let child = self
            .claude(api, args)
            .stdout(fs::File::create(&stdout).expect("stdout file"))
            .stderr(fs::File::create(&stderr).expect("stderr file"))
            .spawn()
            .expect("the real Claude Code");
        RunningClaude {
            child: KilledOnDrop(child),
            stdout,
            stderr,
        }
    }

    /// Runs Claude Code to its end; returns its stream-json events.
    fn run_claude(&self, api: &FakeApi, args: &[&str], name: &str) -> Vec<Value> {
        self.spawn_claude(api, args, name).finish()
    }
}

/// A Claude Code process and where its output goes.
struct RunningClaude {
    child: KilledOnDrop,
    stdout: PathBuf,
    stderr: PathBuf,
}

impl RunningClaude {
    /// Waits (bounded) for the end; returns the stream-json events.
    fn finish(mut self) -> Vec<Value> {
        let deadline = Instant::now() + Duration::from_secs(180);
        let status = loop {
            if let Some(status) = self.child.try_wait().expect("try_wait") {
                break status;
            }
            assert!(Instant::now() < deadline, "claude did not finish");
            std::thread::sleep(Duration::from_millis(50));
        };
        let stdout = fs::read_to_string(&self.stdout).unwrap_or_default();
        assert!(
            status.success(),
            "claude failed ({status}): {stdout}\n{}",
            fs::read_to_string(&self.stderr).unwrap_or_default()
        );
        stdout
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect()
    }
}

fn session_id(events: &[Value]) -> String {
    events
        .iter()
        .find(|e| e["type"] == "system" && e["subtype"] == "init")
        .and_then(|e| e["session_id"].as_str())
        .unwrap_or_else(|| panic!("no init event in {events:?}"))
        .to_string()
}

/// What Claude Code showed the person from our hooks.
fn shown_notices(events: &[Value]) -> Vec<String> {
    events
        .iter()
        .filter(|e| e["type"] == "system" && e["subtype"] == "informational")
        .filter_map(|e| e["content"].as_str())
        .filter(|c| c.contains("cgc-fresh: "))
        .map(str::to_string)
        .collect()
}

fn write_tool(id: &str, path: &Path, content: &str) -> Value {
    json!({"id": id, "name": "Write", "input": {"file_path": path, "content": content}})
}

#[test]
fn real_claude_code_session_edits_resume_and_sigkill_reach_the_service_and_never_the_model() {
    let Some(project) = RealProject::new() else {
        return;
    };
    let ws = project.sandbox.workspace();
    let gamma = ws.join("pkg/gamma.py");
    let release = project.sandbox.root.path().join("release-last-turn");
    let api = FakeApi::start(
        project.sandbox.root.path(),
        json!([
            {"user_text_contains": "PHASE1",
             "tool_use": write_tool("toolu_w1", &gamma, "def written_by_claude():\n    return 1\n")},
            {"after_tool_result": "toolu_w1",
             "tool_use": {"id": "toolu_e1", "name": "Edit", "input": {
                 "file_path": gamma, "old_string": "written_by_claude", "new_string": "edited_by_claude"}}},
            {"after_tool_result": "toolu_e1",
             "tool_use": {"id": "toolu_b1", "name": "Bash", "input": {
                 "command": "sed -i s/beta_main/beta_by_sed/ pkg/beta.py", "description": "rename"}}},
            // The last reply waits until the test saw the service fresh:
            // the session stays open meanwhile, as an interactive one does
            // (a `-p` run ends its session with its last turn, and the
            // service stops the session's sync when the session ends).
            {"after_tool_result": "toolu_b1", "text": "done", "wait_for_file": release},
            {"user_text_contains": "PHASE2", "text": "resumed"},
            {"user_text_contains": "PHASE3", "hang": true}
        ]),
    );
    let service = project.service();
    let mut watch = observer(&service);
    project.install_hooks();

    // 1. A session that writes, edits, and runs a shell edit; the graph
    //    is fresh — and true — while it is still open.
    let running = project.spawn_claude(&api, &["-p", "PHASE1: write, edit, sed"], "first");
    wait_fresh(&service, Duration::from_secs(120));
    assert_eq!(project.functions_named("edited_by_claude"), 1);
    assert_eq!(project.functions_named("written_by_claude"), 0);
    fs::write(&release, "").expect("release");
    let first = running.finish();
    let session = session_id(&first);
    assert!(fs::read_to_string(&gamma)
        .expect("gamma written")
        .contains("edited_by_claude"));
    let starts = service.log_events("session_start");
    let starts = events_for(&starts, &session);
    assert_eq!(starts.len(), 1, "{starts:?}");
    assert_eq!(starts[0]["reason"], "Startup");
    let calls: Vec<(String, u64)> = service
        .log_events("tool_call")
        .iter()
        .filter(|c| c["session"] == session.as_str())
        .map(|c| {
            (
                c["tool"].as_str().unwrap_or_default().to_string(),
                c["paths"].as_u64().unwrap_or_default(),
            )
        })
        .collect();
    assert_eq!(
        calls,
        vec![("write".into(), 1), ("edit".into(), 1), ("bash".into(), 0)]
    );
    let ends = service.log_events("session_shutdown");
    let ends = events_for(&ends, &session);
    assert_eq!(ends.len(), 1, "SessionEnd of a -p run: {ends:?}");
    let shown_first = shown_notices(&first);
    assert!(
        shown_first.iter().any(|n| n.contains("may be stale")),
        "the person saw the staleness notice: {shown_first:?}"
    );

    // 2. --resume keeps the session id; pending notices show at its Stop.
    let second = project.run_claude(
        &api,
        &["-p", "PHASE2: anything new?", "--resume", &session],
        "second",
    );
    assert_eq!(session_id(&second), session);
    let starts = service.log_events("session_start");
    let reasons: Vec<&Value> = events_for(&starts, &session)
        .iter()
        .map(|e| &e["reason"])
        .collect();
    assert_eq!(reasons, vec!["Startup", "Resume"]);
    let shown_second = shown_notices(&second);
    let all_shown: Vec<&String> = shown_first.iter().chain(&shown_second).collect();
    assert!(
        all_shown.iter().any(|n| n.contains("is up to date")),
        "the completion notice was shown in one of the runs: {all_shown:?}"
    );
    assert_eq!(
        events_for(&service.log_events("session_shutdown"), &session).len(),
        2
    );

    // 3. A session whose Claude Code is SIGKILLed mid-turn: no SessionEnd
    //    runs; the service ends the session when its owner is gone.
    let mut third = project.spawn_claude(&api, &["-p", "PHASE3: hang"], "third");
    let mut owner: Option<(String, i64)> = None;
    wait_until(
        "the third session to start",
        Duration::from_secs(60),
        || {
            owner = service
                .log_events("session_start")
                .iter()
                .find(|e| e["session"] != session.as_str())
                .and_then(|e| {
                    let instance = e["instance"].as_str()?;
                    let pid = instance.strip_prefix("claude-code-")?.parse().ok()?;
                    Some((e["session"].as_str()?.to_string(), pid))
                });
            owner.is_some() && api.request_bodies().iter().any(|b| b.contains("PHASE3"))
        },
    );
    let (third_session, owner_pid) = owner.unwrap_or_default();
    assert!(is_alive(owner_pid as i32));
    let _ = Command::new("kill")
        .args(["-KILL", &owner_pid.to_string()])
        .status();
    let _ = third.child.kill();
    let _ = third.child.wait();
    wait_until(
        "the SIGKILLed session to end",
        Duration::from_secs(20),
        || lifetime_closed(&service, &third_session),
    );
    assert!(service
        .log_events("owner_exited")
        .iter()
        .any(|e| e["owner_pid"] == owner_pid));
    assert!(events_for(&service.log_events("session_shutdown"), &third_session).is_empty());
    // Nothing the service runs for sessions outlives them. The driver
    // worker is the service's, not a session's: started for the installed
    // MCP server's requests, it stays for the next one (until it idles out
    // or the service stops).
    wait_until(
        "no child of the service left",
        Duration::from_secs(30),
        || {
            crate::support::processes_with_owner_prefix(&Service::owner_prefix(&project.sandbox))
                .into_iter()
                .all(is_driver_worker)
        },
    );

    // 4. Nothing of ours ever reached a model request.
    let bodies = api.request_bodies();
    assert!(bodies.len() >= 6, "{} requests", bodies.len());
    let shown: Vec<String> = all_shown
        .iter()
        .map(|s| s.to_string())
        .chain(watch_texts(&mut watch))
        .collect();
    for body in &bodies {
        for needle in ["cgc-fresh:", "graph: ", "code graph of", "possibly stale"] {
            assert!(!body.contains(needle), "a model request carries {needle:?}");
        }
        for text in &shown {
            let core = text
                .trim_start_matches(|c| c != ':')
                .trim_start_matches(": ");
            assert!(
                !body.contains(core),
                "a model request carries a notice: {core}"
            );
        }
    }
}

/// Whether `pid` is the service's driver worker (`… --idle-exit <s>
/// serve`), which serves syncs and MCP requests between sessions.
fn is_driver_worker(pid: i32) -> bool {
    let argv: Vec<String> = fs::read(format!("/proc/{pid}/cmdline"))
        .unwrap_or_default()
        .split(|b| *b == 0)
        .filter(|a| !a.is_empty())
        .map(|a| String::from_utf8_lossy(a).into_owned())
        .collect();
    argv.last().is_some_and(|a| a == "serve") && argv.iter().any(|a| a == "--idle-exit")
}

/// Waits until the service reports `fresh`; on timeout, says what it
/// reported and what its log says about syncs.
fn wait_fresh(service: &Service, within: Duration) {
    let deadline = Instant::now() + within;
    let mut last = Value::Null;
    while Instant::now() < deadline {
        last = Conn::connect(&service.socket).request(json!({"type": "status"}), 1);
        if last["status"] == "fresh" {
            return;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let log: Vec<String> = service
        .log_text()
        .lines()
        .filter(|l| l.contains("sync") || l.contains("tool_") || l.contains("error"))
        .map(str::to_string)
        .collect();
    panic!("not fresh within {within:?}: {last}\n{}", log.join("\n"));
}

/// The notice texts an observer saw (for the model-request check).
fn watch_texts(watch: &mut Conn) -> Vec<String> {
    watch
        .history
        .iter()
        .filter(|f| f["type"] == "notice")
        .filter_map(|f| f["text"].as_str().map(str::to_string))
        .collect()
}

/// Claude's `Bash` is reported as `tool_call{tool: bash, paths: []}`; the
/// service finds what the shell changed by comparing the tree with its
/// manifest after the `bash` result (`freshness.shellTools`).
#[test]
fn real_claude_code_bash_sed_edit_reaches_the_graph_once_shell_edits_are_detected() {
    let Some(project) = RealProject::new() else {
        return;
    };
    let release = project.sandbox.root.path().join("release-last-turn");
    let api = FakeApi::start(
        project.sandbox.root.path(),
        json!([
            {"user_text_contains": "BASH",
             "tool_use": {"id": "toolu_b1", "name": "Bash", "input": {
                 "command": "sed -i s/beta_main/beta_by_sed/ pkg/beta.py", "description": "rename"}}},
            {"after_tool_result": "toolu_b1", "text": "done", "wait_for_file": release}
        ]),
    );
    let service = project.service();
    let mut watch = observer(&service);
    project.install_hooks();
    let running = project.spawn_claude(&api, &["-p", "BASH: rename with sed"], "bash");
    let beta = project.sandbox.workspace().join("pkg/beta.py");
    wait_until("Claude's sed to run", Duration::from_secs(120), || {
        fs::read_to_string(&beta).is_ok_and(|t| t.contains("beta_by_sed"))
    });
    // The shell edit is counted as an edit, and a sync covers it while
    // the session is open.
    watch.wait_seen("the edit epoch to move", |f| {
        f["type"] == "state" && f["edit_epoch"].as_u64().unwrap_or(0) > 0
    });
    wait_fresh(&service, Duration::from_secs(120));
    assert_eq!(project.functions_named("beta_by_sed"), 1);
    assert_eq!(project.functions_named("beta_main"), 0);
    fs::write(&release, "").expect("release");
    running.finish();
}

/// The text of the `tool_result` for `id` that Claude Code sent the
/// (fake) API, from the first request that carries one.
fn tool_result_text(api: &FakeApi, id: &str) -> Option<String> {
    api.request_bodies().iter().find_map(|line| {
        let request: Value = serde_json::from_str(line).ok()?;
        let messages = request["body"]["messages"].as_array()?;
        messages
            .iter()
            .filter_map(|m| m["content"].as_array())
            .flatten()
            .find(|block| block["type"] == "tool_result" && block["tool_use_id"] == id)
            .map(|block| match &block["content"] {
                Value::String(text) => text.clone(),
                Value::Array(parts) => parts
                    .iter()
                    .filter_map(|p| p["text"].as_str())
                    .collect::<Vec<_>>()
                    .join("\n"),
                other => other.to_string(),
            })
    })
}

/// The whole path, from a real Claude Code session: install puts the
/// `cgc-fresh mcp` server in the project's `.mcp.json`; the model writes a
/// new function, then asks the graph for it through that server; the
/// answer Claude Code hands back to the model holds the function just
/// written (read-your-writes: the call waits for the sync covering the
/// write), answered by CGC's own handler through the service.
#[test]
fn real_claude_code_reads_its_own_write_back_through_the_installed_mcp_server() {
    let Some(project) = RealProject::new() else {
        return;
    };
    let ws = project.sandbox.workspace();
    let delta = ws.join("pkg/delta.py");
    let cypher = "MATCH (f:Function) WHERE f.name = 'brand_new_function' \
                  RETURN f.name AS name, f.path AS path";
    let api = FakeApi::start(
        project.sandbox.root.path(),
        json!([
            {"user_text_contains": "MCP",
             "tool_use": write_tool("toolu_w1", &delta,
                 "def brand_new_function(n):\n    return n * 2\n")},
            {"after_tool_result": "toolu_w1",
             "tool_use": {"id": "toolu_m1", "name": "mcp__cgc-fresh__execute_cypher_query",
                          "input": {"cypher_query": cypher}}},
            {"after_tool_result": "toolu_m1", "text": "done"}
        ]),
    );
    // The person's default strategy; the read waits as long as a real
    // sync on a busy machine may take rather than answer from before it.
    let service = project.service_with(&[
        ("CGC_SYNC_STRATEGY", "incremental"),
        ("CGC_MCP_READ_YOUR_WRITES_MS", "120000"),
    ]);
    project.install_hooks();
    let mcp_json: Value = serde_json::from_str(
        &fs::read_to_string(ws.join(".mcp.json")).expect("install wrote .mcp.json"),
    )
    .expect("json");
    assert_eq!(mcp_json["mcpServers"]["cgc-fresh"]["args"][0], "mcp");

    let events = project.run_claude(
        &api,
        &[
            "-p",
            "MCP: write a function, then find it in the graph",
            "--allowedTools",
            "mcp__cgc-fresh__execute_cypher_query",
        ],
        "mcp",
    );
    let session = session_id(&events);
    let init = events
        .iter()
        .find(|e| e["type"] == "system" && e["subtype"] == "init")
        .expect("init");
    // Claude Code's init lists the project's server; one still connecting
    // when init is written (the first tool list waits while the session's
    // warm-up runs) shows as `pending`. That it did connect is proven by
    // the call answered below.
    let servers = init["mcp_servers"].as_array().cloned().unwrap_or_default();
    assert!(
        servers.iter().any(|s| s["name"] == "cgc-fresh"
            && (s["status"] == "connected" || s["status"] == "pending")
            && s["source"] == "project"),
        "Claude Code connected the cgc-fresh server of the project's .mcp.json: {servers:?}"
    );
    assert!(fs::read_to_string(&delta)
        .expect("delta written")
        .contains("brand_new_function"));

    let answer = tool_result_text(&api, "toolu_m1").unwrap_or_else(|| {
        panic!(
            "no tool_result for the MCP call reached the API: {:?}",
            api.request_bodies()
        )
    });
    let answer: Value =
        serde_json::from_str(&answer).unwrap_or_else(|e| panic!("not CGC's JSON ({e}): {answer}"));
    let path = fs::canonicalize(&delta).expect("canonical");
    assert_eq!(
        answer["results"],
        json!([{"name": "brand_new_function", "path": path}]),
        "{answer}"
    );
    // Answered through the service, after the sync that covered the write.
    let calls = service.log_events("mcp_read_your_writes");
    assert_eq!(calls.len(), 1, "{calls:?}");
    assert_eq!(calls[0]["tool"], "execute_cypher_query");
    assert_eq!(calls[0]["caught_up"], true, "{calls:?}");
    let writes: Vec<Value> = service
        .log_events("tool_call")
        .into_iter()
        .filter(|c| c["session"] == session.as_str())
        .collect();
    assert_eq!(writes.len(), 1, "{writes:?}");
    assert_eq!(writes[0]["tool"], "write");
}
