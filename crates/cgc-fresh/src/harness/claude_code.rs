//! `cgc-fresh hook claude-code`: one Claude Code hook payload (JSON on
//! standard input) becomes frames for the workspace's service.
//!
//! | hook event | frames |
//! |---|---|
//! | `SessionStart{source}` | `session_start{session, reason, owner_pid: $CLAUDE_PID}` |
//! | `PreToolUse` of `Write`, `Edit`, `MultiEdit`, `NotebookEdit` | `tool_call{tool: write \| edit, paths: [file_path \| notebook_path]}` |
//! | `PreToolUse` of `Bash` | `tool_call{tool: bash, paths: []}` |
//! | `PostToolUse` / `PostToolUseFailure` of those tools | `tool_result{tool, ok: true / false}` |
//! | `PostToolUse` (any tool), `Stop` | `take_notices`; the notices are printed as one `{"systemMessage": …}` |
//! | `SessionEnd{reason}` | `session_shutdown{reason}` |
//! | anything else | nothing |
//!
//! Other tools (Read, Grep, MCP tools, …) send nothing: the service counts
//! only modifying tools, so a frame for them would cost a round trip per
//! tool and change nothing.
//!
//! The hook never blocks Claude Code: every socket operation shares one
//! small budget, a service that is down means a silent exit (after
//! starting one, detached, unless `CGC_FRESH_NO_AUTOSTART=1`), and the exit
//! code is 0 — an exit code 2 would feed standard error to the model. Only
//! a hook command written wrong (arguments `hook` cannot read) exits 1,
//! with one line on standard error, which Claude Code shows the person
//! (`main.rs`). Standard output carries at most the one `systemMessage` object,
//! which Claude Code shows to the person and never puts into a model
//! request; `SessionStart` and `UserPromptSubmit` never print anything
//! (their standard output would reach the model). What went wrong goes to
//! the hook log (`hook_log`), never to standard output.
//!
//! A session the service does not know (it was started after Claude Code's
//! `SessionStart`, or restarted) is taken up again: on `unknown_session`
//! the hook replays `session_start{reason: resume, owner_pid}` once and
//! sends its frames again.

use std::io::{BufRead, BufReader, ErrorKind, Write};
use std::os::unix::net::UnixStream;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use cgc_fresh_proto::{
    decode_server_frame, ClientFrame, Envelope, ErrorCode, Hello, Notice, RequestId, ServerFrame,
    SessionShutdown, SessionStart, SessionStartReason, TakeNotices, ToolCall, ToolResult,
    PROTOCOL_VERSION,
};
use serde_json::{json, Value};

use super::hook_log::HookLog;

/// What the hook reads from its environment.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HookEnv {
    /// `CLAUDE_PID`: the Claude Code process, owner of the session.
    pub claude_pid: Option<String>,
    /// `CLAUDE_PROJECT_DIR`: the workspace (else the payload's `cwd`).
    pub project_dir: Option<String>,
}

impl HookEnv {
    pub fn from_process() -> HookEnv {
        let var = |name: &str| std::env::var(name).ok().filter(|v| !v.is_empty());
        HookEnv {
            claude_pid: var("CLAUDE_PID"),
            project_dir: var("CLAUDE_PROJECT_DIR"),
        }
    }
}

/// Why a payload was not used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PayloadError {
    #[error("the payload is not JSON: {0}")]
    NotJson(String),
    #[error("the payload is not a JSON object")]
    NotObject,
    #[error("`{0}` is missing, empty or not a string")]
    Missing(&'static str),
}

/// What one hook run does: frames to send (in order), whether to take the
/// session's notices, and notes for the log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HookPlan {
    /// `hook_event_name`.
    pub event: String,
    /// `session_id`.
    pub session: String,
    /// `CLAUDE_PROJECT_DIR`, else the payload's `cwd`.
    pub workspace: PathBuf,
    /// `CLAUDE_PID`, when it names a process id.
    pub owner_pid: Option<u32>,
    /// The events to send, in order.
    pub frames: Vec<ClientFrame>,
    /// Whether to take (and print) the session's pending notices.
    pub take_notices: bool,
    /// Things worth a log line (e.g. no `CLAUDE_PID`).
    pub notes: Vec<String>,
}

impl HookPlan {
    /// Nothing to send and nothing to ask: the service is not contacted.
    pub fn is_empty(&self) -> bool {
        self.frames.is_empty() && !self.take_notices
    }
}

/// The service's name for a Claude Code tool that the service should hear
/// about, or `None`.
pub fn service_tool(tool_name: &str) -> Option<&'static str> {
    match tool_name {
        "Write" => Some("write"),
        "Edit" | "MultiEdit" | "NotebookEdit" => Some("edit"),
        "Bash" => Some("bash"),
        _ => None,
    }
}

/// The path a mapped tool touches, from its `tool_input`; `Ok(None)` for
/// `Bash` (the service finds what a shell changed itself).
fn tool_path(tool_name: &str, input: Option<&Value>) -> Result<Option<String>, PayloadError> {
    let field = match tool_name {
        "Write" | "Edit" | "MultiEdit" => ("file_path", "tool_input.file_path"),
        "NotebookEdit" => ("notebook_path", "tool_input.notebook_path"),
        _ => return Ok(None),
    };
    input
        .and_then(|input| input.get(field.0))
        .and_then(Value::as_str)
        .filter(|path| !path.is_empty())
        .map(|path| Some(path.to_string()))
        .ok_or(PayloadError::Missing(field.1))
}

/// Claude Code's `SessionStart.source` in the protocol's words: a `clear`
/// starts a new session, a `compact` reloads the same one; anything else
/// is `other`.
pub fn start_reason(source: Option<&str>) -> SessionStartReason {
    match source {
        Some("startup") => SessionStartReason::Startup,
        Some("resume") => SessionStartReason::Resume,
        Some("fork") => SessionStartReason::Fork,
        Some("clear") => SessionStartReason::New,
        Some("compact") => SessionStartReason::Reload,
        _ => SessionStartReason::Other,
    }
}

fn non_empty_str<'a>(object: &'a Value, field: &str) -> Option<&'a str> {
    object
        .get(field)
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
}

/// Maps one payload to a [`HookPlan`]. Pure: the environment is passed in.
pub fn plan(payload: &[u8], env: &HookEnv) -> Result<HookPlan, PayloadError> {
    let value: Value =
        serde_json::from_slice(payload).map_err(|e| PayloadError::NotJson(e.to_string()))?;
    if !value.is_object() {
        return Err(PayloadError::NotObject);
    }
    let event = non_empty_str(&value, "hook_event_name")
        .ok_or(PayloadError::Missing("hook_event_name"))?
        .to_string();
    let session = non_empty_str(&value, "session_id")
        .ok_or(PayloadError::Missing("session_id"))?
        .to_string();
    let workspace = env
        .project_dir
        .as_deref()
        .filter(|dir| !dir.is_empty())
        .or_else(|| non_empty_str(&value, "cwd"))
        .map(PathBuf::from)
        .ok_or(PayloadError::Missing("cwd"))?;
    let mut notes = Vec::new();
    let owner_pid = match env.claude_pid.as_deref() {
        None => {
            notes.push("CLAUDE_PID is not set: the session is not owned by a process".into());
            None
        }
        Some(raw) => match raw.trim().parse::<u32>() {
            Ok(pid) if pid > 0 => Some(pid),
            _ => {
                notes.push(format!("CLAUDE_PID {raw:?} is not a process id"));
                None
            }
        },
    };
    let mut plan = HookPlan {
        event,
        session,
        workspace,
        owner_pid,
        frames: Vec::new(),
        take_notices: false,
        notes,
    };
    let tool_name = || non_empty_str(&value, "tool_name").ok_or(PayloadError::Missing("tool_name"));
    match plan.event.as_str() {
        "SessionStart" => {
            plan.frames.push(ClientFrame::SessionStart(SessionStart {
                session: plan.session.clone(),
                reason: start_reason(non_empty_str(&value, "source")),
                owner_pid: plan.owner_pid,
            }));
        }
        "PreToolUse" => {
            let name = tool_name()?;
            if let Some(tool) = service_tool(name) {
                let paths = tool_path(name, value.get("tool_input"))?
                    .into_iter()
                    .collect();
                plan.frames.push(ClientFrame::ToolCall(ToolCall {
                    session: plan.session.clone(),
                    tool: tool.into(),
                    paths,
                }));
            }
        }
        "PostToolUse" | "PostToolUseFailure" => {
            let name = tool_name()?;
            let failed = plan.event == "PostToolUseFailure"
                || value
                    .get("tool_response")
                    .and_then(|r| r.get("success"))
                    .and_then(Value::as_bool)
                    == Some(false);
            if let Some(tool) = service_tool(name) {
                plan.frames.push(ClientFrame::ToolResult(ToolResult {
                    session: plan.session.clone(),
                    tool: tool.into(),
                    ok: !failed,
                }));
            }
            plan.take_notices = plan.event == "PostToolUse";
        }
        "Stop" => plan.take_notices = true,
        "SessionEnd" => {
            plan.frames
                .push(ClientFrame::SessionShutdown(SessionShutdown {
                    session: plan.session.clone(),
                    reason: non_empty_str(&value, "reason").map(str::to_string),
                }));
        }
        _ => {}
    }
    Ok(plan)
}

/// The one line printed for `notices`: `{"systemMessage": "…"}`, or `None`
/// when there are none.
pub fn system_message(notices: &[Notice]) -> Option<String> {
    if notices.is_empty() {
        return None;
    }
    let text = notices
        .iter()
        .map(|notice| format!("cgc-fresh: {}", notice.text))
        .collect::<Vec<_>>()
        .join("\n");
    Some(json!({ "systemMessage": text }).to_string())
}

/// How a run talks to the world, so tests can point it anywhere.
#[derive(Debug, Clone)]
pub struct HookIo {
    /// The socket of the workspace's service (resolved by the caller from
    /// the plan's workspace).
    pub socket: PathBuf,
    /// All socket work shares this budget.
    pub budget: Duration,
    /// `Some(binary)`: start `binary serve --workspace <ws>` when the
    /// service is down; `None`: never.
    pub autostart: Option<PathBuf>,
    /// `--socket` to pass to an autostarted service, if one was given.
    pub socket_override: Option<PathBuf>,
}

/// What a run produced: the line for standard output (if any) and the log.
#[derive(Debug, Default)]
pub struct HookOutcome {
    pub stdout: Option<String>,
    pub log: HookLog,
}

/// The default budget for one hook's socket work.
pub const DEFAULT_BUDGET: Duration = Duration::from_millis(80);

/// Runs one hook: `payload` is standard input, `resolve` turns the plan's
/// workspace into the socket to use (and fails when the workspace cannot
/// be used). Never panics on bad input; the exit code is the caller's 0.
pub fn run(
    payload: &[u8],
    env: &HookEnv,
    resolve: impl FnOnce(&Path) -> Result<HookIo, String>,
) -> HookOutcome {
    let mut outcome = HookOutcome::default();
    let plan = match plan(payload, env) {
        Ok(plan) => plan,
        Err(error) => {
            outcome.log.event(
                "warn",
                "hook_payload_rejected",
                json!({ "error": error.to_string(), "bytes": payload.len() }),
            );
            return outcome;
        }
    };
    for note in &plan.notes {
        outcome.log.event(
            "info",
            "hook_note",
            json!({ "hook_event": plan.event, "note": note }),
        );
    }
    if plan.is_empty() {
        outcome.log.event(
            "debug",
            "hook_ignored",
            json!({ "hook_event": plan.event, "session": plan.session }),
        );
        return outcome;
    }
    let io = match resolve(&plan.workspace) {
        Ok(io) => io,
        Err(error) => {
            outcome.log.event(
                "warn",
                "hook_workspace_unusable",
                json!({ "workspace": plan.workspace.display().to_string(), "error": error }),
            );
            return outcome;
        }
    };
    let started = Instant::now();
    match exchange(&plan, &io, &mut outcome.log) {
        Ok(notices) => {
            outcome.stdout = system_message(&notices);
            outcome.log.event(
                "info",
                "hook_done",
                json!({
                    "hook_event": plan.event,
                    "session": plan.session,
                    "frames": plan.frames.iter().map(ClientFrame::type_name).collect::<Vec<_>>(),
                    "notices": notices.len(),
                    "elapsed_us": started.elapsed().as_micros() as u64,
                }),
            );
        }
        Err(Failure::Down(reason)) => {
            outcome.log.event(
                "info",
                "service_down",
                json!({ "socket": io.socket.display().to_string(), "reason": reason }),
            );
            if let Some(binary) = &io.autostart {
                match autostart(binary, &plan.workspace, io.socket_override.as_deref()) {
                    Ok(pid) => outcome.log.event(
                        "info",
                        "autostart",
                        json!({ "pid": pid, "workspace": plan.workspace.display().to_string() }),
                    ),
                    Err(error) => outcome.log.event(
                        "warn",
                        "autostart_failed",
                        json!({ "error": error.to_string() }),
                    ),
                }
            }
        }
        Err(Failure::Other(reason)) => outcome.log.event(
            "warn",
            "hook_exchange_failed",
            json!({ "hook_event": plan.event, "session": plan.session, "reason": reason,
                    "elapsed_us": started.elapsed().as_micros() as u64 }),
        ),
    }
    outcome
}

enum Failure {
    /// Nothing listens on the socket.
    Down(String),
    /// The service is there but the exchange failed or ran out of time.
    Other(String),
}

/// One connection with a deadline.
struct Link {
    writer: UnixStream,
    reader: BufReader<UnixStream>,
    deadline: Instant,
}

impl Link {
    fn open(socket: &Path, budget: Duration) -> Result<Link, Failure> {
        let deadline = Instant::now() + budget;
        let stream = UnixStream::connect(socket).map_err(|e| match e.kind() {
            ErrorKind::NotFound | ErrorKind::ConnectionRefused => Failure::Down(e.to_string()),
            _ => Failure::Other(format!("connect: {e}")),
        })?;
        let reader = stream
            .try_clone()
            .map_err(|e| Failure::Other(e.to_string()))?;
        Ok(Link {
            writer: stream,
            reader: BufReader::new(reader),
            deadline,
        })
    }

    fn remaining(&self) -> Result<Duration, Failure> {
        let left = self.deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            Err(Failure::Other("out of time".into()))
        } else {
            Ok(left)
        }
    }

    fn send(&mut self, frames: &[Envelope<ClientFrame>]) -> Result<(), Failure> {
        let mut bytes = Vec::new();
        for frame in frames {
            bytes.extend(cgc_fresh_proto::encode_client_frame(frame));
        }
        let left = self.remaining()?;
        self.writer
            .set_write_timeout(Some(left))
            .and_then(|_| self.writer.write_all(&bytes))
            .map_err(|e| Failure::Other(format!("write: {e}")))
    }

    /// Reads replies until every id in `awaited` was answered.
    fn replies(&mut self, awaited: &[RequestId]) -> Result<Vec<(RequestId, ServerFrame)>, Failure> {
        let mut got: Vec<(RequestId, ServerFrame)> = Vec::new();
        while awaited.iter().any(|id| got.iter().all(|(g, _)| g != id)) {
            let left = self.remaining()?;
            self.reader
                .get_ref()
                .set_read_timeout(Some(left))
                .map_err(|e| Failure::Other(e.to_string()))?;
            let mut line = String::new();
            match self.reader.read_line(&mut line) {
                Ok(0) => return Err(Failure::Other("the service closed the connection".into())),
                Ok(_) => {}
                Err(e) => return Err(Failure::Other(format!("read: {e}"))),
            }
            let Ok(Envelope { id, frame }) = decode_server_frame(line.trim_end().as_bytes()) else {
                continue;
            };
            match id {
                Some(id) => got.push((id, frame)),
                // An error without an id answers nothing we asked; a
                // pushed frame is not for us.
                None => continue,
            }
        }
        Ok(got)
    }
}

fn id(text: String) -> RequestId {
    RequestId::Text(text)
}

/// Sends the plan's frames and `take_notices` (pipelined, one write) and
/// returns the notices taken.
fn exchange(plan: &HookPlan, io: &HookIo, log: &mut HookLog) -> Result<Vec<Notice>, Failure> {
    let mut link = Link::open(&io.socket, io.budget)?;
    let instance = match plan.owner_pid {
        Some(pid) => format!("claude-code-{pid}"),
        None => format!("claude-code-{}", plan.session),
    };
    let hello = Envelope::with_id(
        Some(id("hello".into())),
        ClientFrame::Hello(Hello {
            client: "claude-code-hook".into(),
            instance,
            protocol: PROTOCOL_VERSION,
        }),
    );
    let (batch, awaited) = batch(plan);
    let mut first = vec![hello];
    first.extend(batch.iter().cloned());
    let mut all_awaited = vec![id("hello".into())];
    all_awaited.extend(awaited.iter().cloned());
    link.send(&first)?;
    let replies = link.replies(&all_awaited)?;
    let unknown = replies.iter().any(
        |(_, frame)| matches!(frame, ServerFrame::Error(e) if e.code == ErrorCode::UnknownSession),
    );
    let replies = if unknown && !is_shutdown(plan) {
        // The service does not know the session (it started after Claude
        // Code's SessionStart, or restarted): take it up, then repeat.
        log.event(
            "info",
            "session_replayed",
            json!({ "session": plan.session, "hook_event": plan.event }),
        );
        let replay = Envelope::with_id(
            Some(id("replay".into())),
            ClientFrame::SessionStart(SessionStart {
                session: plan.session.clone(),
                reason: SessionStartReason::Resume,
                owner_pid: plan.owner_pid,
            }),
        );
        let (again, awaited_again) = batch_with_prefix(plan, "again");
        let mut frames = vec![replay];
        frames.extend(again);
        let mut awaited = vec![id("replay".into())];
        awaited.extend(awaited_again);
        link.send(&frames)?;
        link.replies(&awaited)?
    } else {
        replies
    };
    let mut notices = Vec::new();
    for (reply_id, frame) in replies {
        match frame {
            ServerFrame::Notices(taken) => notices.extend(taken.notices),
            ServerFrame::Error(error) => log.event(
                "info",
                "service_error",
                json!({ "id": reply_id, "code": error.code.as_str(), "message": error.message }),
            ),
            _ => {}
        }
    }
    // Only notices meant for the person are printed.
    notices.retain(|n| n.audience == cgc_fresh_proto::Audience::User);
    Ok(notices)
}

fn is_shutdown(plan: &HookPlan) -> bool {
    plan.frames
        .iter()
        .any(|f| matches!(f, ClientFrame::SessionShutdown(_)))
}

fn batch(plan: &HookPlan) -> (Vec<Envelope<ClientFrame>>, Vec<RequestId>) {
    batch_with_prefix(plan, "event")
}

/// The plan's events and `take_notices`, each with an id so that each is
/// answered (an `unknown_session` is then visible).
fn batch_with_prefix(
    plan: &HookPlan,
    prefix: &str,
) -> (Vec<Envelope<ClientFrame>>, Vec<RequestId>) {
    let mut frames = Vec::new();
    let mut awaited = Vec::new();
    for (n, frame) in plan.frames.iter().enumerate() {
        let frame_id = id(format!("{prefix}-{n}"));
        frames.push(Envelope::with_id(Some(frame_id.clone()), frame.clone()));
        awaited.push(frame_id);
    }
    if plan.take_notices {
        let frame_id = id(format!("{prefix}-notices"));
        frames.push(Envelope::with_id(
            Some(frame_id.clone()),
            ClientFrame::TakeNotices(TakeNotices {
                session: plan.session.clone(),
            }),
        ));
        awaited.push(frame_id);
    }
    (frames, awaited)
}

/// Starts `binary serve --workspace <workspace>` the way the Pi bridge
/// does: in its own process group, standard streams on /dev/null, not
/// waited for.
/// A second service for the workspace refuses to start, so a race between
/// two hooks is harmless.
pub(crate) fn autostart(
    binary: &Path,
    workspace: &Path,
    socket: Option<&Path>,
) -> std::io::Result<u32> {
    let mut cmd = Command::new(binary);
    cmd.arg("serve")
        .arg("--workspace")
        .arg(workspace)
        .current_dir(workspace)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    if let Some(socket) = socket {
        cmd.arg("--socket").arg(socket);
    }
    // Its own process group: signals aimed at Claude Code's group (a
    // Ctrl-C, a group kill when it exits) never reach the service, and it
    // is never the terminal's foreground group.
    cmd.process_group(0);
    let child = cmd.spawn()?;
    // Not waited for: the hook exits now and the service is re-parented.
    Ok(child.id())
}

#[cfg(test)]
mod tests;
