//! `cgc-fresh mcp`: an MCP server on stdio that a harness configures
//! instead of `cgc mcp start`. It offers CGC's own tools (names, input
//! schemas, result shapes), and answers each request through the
//! workspace's service, whose driver worker runs CGC's own handler with
//! the database open for that request alone (see
//! `service/mcp_route.rs` and `driver/mcp_tools.py`). So no process
//! holds the embedded database between requests, syncs are never skipped
//! as busy, and a query waits (bounded) for the sync that covers the
//! edits seen before it.
//!
//! This module is the dispatch; the transport is `jsonrpc.rs`.

mod jsonrpc;

use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use cgc_fresh_proto::{ClientFrame, McpAnswer, McpCall, ServerFrame};
use serde_json::{json, Value};

use crate::client::{Client, ClientError};
use jsonrpc::{Incoming, Line};

/// The actor whose work this is, named in every log line.
const COMPONENT: &str = "mcp_front";

/// How long a service started by this command has to accept connections.
const AUTOSTART_WAIT: Duration = Duration::from_secs(15);
/// How long one answer of the service may take (the service bounds the
/// work itself by `cgc.maintenanceTimeoutMs`).
const ANSWER_WAIT: Duration = Duration::from_secs(3600);

/// Where the workspace's service is, and how to start one.
pub struct Target {
    pub workspace: PathBuf,
    pub socket: PathBuf,
    pub socket_override: Option<PathBuf>,
    /// This binary, to start the service when none runs (`None`: never).
    pub autostart: Option<PathBuf>,
}

/// Why the service could not be reached.
#[derive(Debug, thiserror::Error)]
pub enum FrontError {
    #[error("cannot reach the cgc-fresh service of {workspace}: {reason}")]
    Unreachable { workspace: String, reason: String },
    #[error(transparent)]
    Client(#[from] ClientError),
}

struct Front {
    target: Target,
    client: Option<Client>,
    /// The `tools/list` answer (`{tools, initialize}`), asked once.
    tools: Option<Value>,
}

/// Serves stdin until it closes; exit code 0.
pub fn run(target: Target) -> anyhow::Result<u8> {
    let stdin = io::stdin();
    let mut input = stdin.lock();
    let mut output = io::stdout().lock();
    let mut front = Front {
        target,
        client: None,
        tools: None,
    };
    tracing::info!(component = COMPONENT, event = "mcp_started", workspace = %front.target.workspace.display());
    loop {
        let line = match jsonrpc::read_line(&mut input, jsonrpc::MAX_LINE_BYTES)? {
            None => break,
            Some(Line::TooLong(bytes)) => {
                tracing::warn!(
                    component = COMPONENT,
                    event = "mcp_line_too_long",
                    bytes,
                    limit = jsonrpc::MAX_LINE_BYTES
                );
                let response = jsonrpc::error_response(
                    Value::Null,
                    jsonrpc::PARSE_ERROR,
                    format!(
                        "Parse error: a request line of {bytes} bytes exceeds the limit of {} bytes",
                        jsonrpc::MAX_LINE_BYTES
                    ),
                    None,
                );
                write_response(&mut output, &response)?;
                continue;
            }
            Some(Line::Text(text)) => text,
        };
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        let response = match jsonrpc::parse(&line) {
            Err(response) => {
                tracing::warn!(component = COMPONENT, event = "mcp_bad_request", bytes = line.len(), code = %response["error"]["code"]);
                Some(response)
            }
            Ok(incoming) => front.dispatch(incoming),
        };
        if let Some(response) = response {
            write_response(&mut output, &response)?;
        }
    }
    tracing::info!(
        component = COMPONENT,
        event = "mcp_stopped",
        reason = "stdin closed"
    );
    Ok(crate::cli::EXIT_OK)
}

fn write_response(output: &mut impl Write, response: &Value) -> io::Result<()> {
    let mut line = serde_json::to_vec(response).map_err(io::Error::other)?;
    line.push(b'\n');
    output.write_all(&line)?;
    output.flush()
}

impl Front {
    /// The response to one message (`None` for a notification).
    fn dispatch(&mut self, incoming: Incoming) -> Option<Value> {
        let Incoming { id, method, params } = incoming;
        let started = Instant::now();
        let Some(id) = id else {
            tracing::info!(component = COMPONENT, event = "mcp_notification", method = %method);
            return None;
        };
        let response = match method.as_str() {
            "initialize" => self
                .tools()
                .map(|tools| jsonrpc::result_response(id.clone(), tools["initialize"].clone())),
            "tools/list" => self.tools().map(|tools| {
                jsonrpc::result_response(id.clone(), json!({ "tools": tools["tools"].clone() }))
            }),
            "ping" => Ok(jsonrpc::result_response(id.clone(), json!({}))),
            "tools/call" => match call_of(&params) {
                Ok(call) => {
                    let tool = call.name.clone();
                    tracing::info!(component = COMPONENT, event = "mcp_tool_call", tool = %tool);
                    self.ask(ClientFrame::McpCall(call))
                        .map(|answer| answer_response(id.clone(), answer))
                }
                Err(message) => Ok(jsonrpc::error_response(
                    id.clone(),
                    jsonrpc::INVALID_PARAMS,
                    message,
                    None,
                )),
            },
            _ => {
                tracing::info!(component = COMPONENT, event = "mcp_method_not_found", method = %method);
                Ok(jsonrpc::error_response(
                    id.clone(),
                    jsonrpc::METHOD_NOT_FOUND,
                    format!("Method not found: {method}"),
                    None,
                ))
            }
        };
        let response = response.unwrap_or_else(|error| {
            tracing::warn!(component = COMPONENT, event = "mcp_service_unreachable", method = %method, error = %error);
            jsonrpc::error_response(
                id,
                jsonrpc::INTERNAL_ERROR,
                format!("Internal error: {error}"),
                None,
            )
        });
        tracing::info!(
            component = COMPONENT,
            event = "mcp_answered",
            method = %method,
            error = response.get("error").is_some(),
            elapsed_ms = started.elapsed().as_millis() as u64
        );
        Some(response)
    }

    /// CGC's tool list and `initialize` result, asked of the service once.
    fn tools(&mut self) -> Result<Value, FrontError> {
        if let Some(tools) = &self.tools {
            return Ok(tools.clone());
        }
        let answer = self.ask(ClientFrame::McpTools)?;
        match answer.result {
            Some(result) if result["tools"].is_array() => {
                self.tools = Some(result.clone());
                Ok(result)
            }
            _ => Err(FrontError::Unreachable {
                workspace: self.target.workspace.display().to_string(),
                reason: format!(
                    "the service could not list CodeGraphContext's tools: {}",
                    answer.error.unwrap_or(Value::Null)
                ),
            }),
        }
    }

    /// Sends `frame` and returns the service's `mcp` answer; reconnects
    /// (starting the service if needed) once when the connection is gone.
    fn ask(&mut self, frame: ClientFrame) -> Result<McpAnswer, FrontError> {
        for attempt in 0..2 {
            let client = match self.client.as_mut() {
                Some(client) => client,
                None => {
                    let client = self.connect()?;
                    self.client.insert(client)
                }
            };
            match client.request(frame.clone()) {
                Ok(reply) => match reply.frame {
                    ServerFrame::Mcp(answer) => return Ok(answer),
                    ServerFrame::Error(error) => {
                        return Err(FrontError::Unreachable {
                            workspace: self.target.workspace.display().to_string(),
                            reason: format!("the service refused the request: {}", error.message),
                        })
                    }
                    other => {
                        return Err(FrontError::Client(ClientError::BadFrame(format!(
                            "expected mcp, got {}",
                            other.type_name()
                        ))))
                    }
                },
                Err(error) => {
                    self.client = None;
                    tracing::warn!(component = COMPONENT, event = "mcp_connection_lost", attempt, error = %error);
                    if attempt == 1 {
                        return Err(error.into());
                    }
                }
            }
        }
        Err(FrontError::Client(ClientError::Closed))
    }

    /// A connection to the service; one is started the way the Claude Code
    /// hook starts it when none answers.
    fn connect(&mut self) -> Result<Client, FrontError> {
        let instance = format!("mcp-{}", std::process::id());
        let unreachable = |reason: String| FrontError::Unreachable {
            workspace: self.target.workspace.display().to_string(),
            reason,
        };
        match Client::connect_hello(&self.target.socket, &instance) {
            Ok(client) => return ready(client),
            Err(ClientError::NotRunning { reason, .. }) => {
                let Some(binary) = &self.target.autostart else {
                    return Err(unreachable(reason));
                };
                match crate::harness::claude_code::autostart(
                    binary,
                    &self.target.workspace,
                    self.target.socket_override.as_deref(),
                ) {
                    Ok(pid) => {
                        tracing::info!(component = COMPONENT, event = "autostart", pid, workspace = %self.target.workspace.display())
                    }
                    Err(error) => return Err(unreachable(format!("cannot start it: {error}"))),
                }
            }
            Err(error) => return Err(error.into()),
        }
        let deadline = Instant::now() + AUTOSTART_WAIT;
        loop {
            match Client::connect_hello(&self.target.socket, &instance) {
                Ok(client) => return ready(client),
                Err(ClientError::NotRunning { reason, .. }) if Instant::now() >= deadline => {
                    return Err(unreachable(format!(
                        "it did not start within {} s: {reason}",
                        AUTOSTART_WAIT.as_secs()
                    )))
                }
                Err(ClientError::NotRunning { .. }) => {
                    std::thread::sleep(Duration::from_millis(50))
                }
                Err(error) => return Err(error.into()),
            }
        }
    }
}

fn ready(client: Client) -> Result<Client, FrontError> {
    client
        .set_timeout(Some(ANSWER_WAIT))
        .map_err(ClientError::from)?;
    Ok(client)
}

/// `tools/call`'s params as the service's `mcp_call`.
fn call_of(params: &Value) -> Result<McpCall, String> {
    let Some(name) = params.get("name").and_then(Value::as_str) else {
        return Err("Invalid params: tools/call needs a tool name (params.name)".into());
    };
    let arguments = match params.get("arguments") {
        None | Some(Value::Null) => json!({}),
        Some(arguments @ Value::Object(_)) => arguments.clone(),
        Some(_) => return Err("Invalid params: params.arguments must be an object".into()),
    };
    let bytes = serde_json::to_vec(&arguments).map_or(usize::MAX, |b| b.len());
    if bytes > cgc_fresh_proto::MAX_MCP_ARGUMENTS_BYTES {
        return Err(format!(
            "Invalid params: arguments of {bytes} bytes exceed the limit of {} bytes",
            cgc_fresh_proto::MAX_MCP_ARGUMENTS_BYTES
        ));
    }
    Ok(McpCall {
        name: name.to_string(),
        arguments,
    })
}

/// The JSON-RPC response carrying CGC's answer member.
fn answer_response(id: Value, answer: McpAnswer) -> Value {
    match (answer.result, answer.error) {
        (_, Some(error)) => jsonrpc::raw_error_response(id, error),
        (Some(result), None) => jsonrpc::result_response(id, result),
        (None, None) => jsonrpc::error_response(
            id,
            jsonrpc::INTERNAL_ERROR,
            "Internal error: an empty answer".into(),
            None,
        ),
    }
}

/// The socket and autostart settings for `workspace` (resolved by the caller).
pub fn target(workspace: &Path, socket: PathBuf, socket_override: Option<PathBuf>) -> Target {
    let autostart = match std::env::var("CGC_FRESH_NO_AUTOSTART").as_deref() {
        Ok("1") => None,
        _ => std::env::current_exe().ok(),
    };
    Target {
        workspace: workspace.to_path_buf(),
        socket,
        socket_override,
        autostart,
    }
}
