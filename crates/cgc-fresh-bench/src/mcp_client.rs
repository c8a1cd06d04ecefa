//! A client of an MCP server on stdio — newline-delimited JSON-RPC 2.0 —
//! the way a harness drives `cgc-fresh mcp` or `cgc mcp start`.

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::thread::sleep;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context as _, Result};
use serde_json::{json, Value};

/// An MCP server child process on pipes; killed when dropped.
pub struct McpServer {
    child: Child,
    stdin: Option<ChildStdin>,
    /// The server's JSON-RPC messages, read off its stdout by a thread, so
    /// that every wait for an answer is bounded.
    messages: Receiver<Value>,
    next_id: u64,
    /// `cgc-fresh mcp` or `cgc mcp start`, for error messages.
    name: &'static str,
}

impl McpServer {
    /// Spawns `cmd` with its stdin and stdout piped and its stderr in `log`.
    pub fn spawn(name: &'static str, mut cmd: Command, log: &Path) -> Result<McpServer> {
        let stderr =
            std::fs::File::create(log).with_context(|| format!("creating {}", log.display()))?;
        let mut child = cmd
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(stderr)
            .spawn()
            .with_context(|| format!("spawning {name}"))?;
        let stdin = child.stdin.take();
        let stdout = child.stdout.take().context("no stdout pipe")?;
        let (sender, messages) = mpsc::channel();
        // Ends when the server closes its stdout (it exited, or was killed).
        std::thread::spawn(move || {
            let mut reader = BufReader::new(stdout);
            let mut line = String::new();
            while matches!(reader.read_line(&mut line), Ok(n) if n > 0) {
                // Anything else a server prints on stdout is not ours to read.
                if let Ok(message) = serde_json::from_str::<Value>(line.trim()) {
                    if message.get("jsonrpc").is_some() && sender.send(message).is_err() {
                        break;
                    }
                }
                line.clear();
            }
        });
        Ok(McpServer {
            child,
            stdin,
            messages,
            next_id: 1,
            name,
        })
    }

    fn send(&mut self, message: &Value) -> Result<()> {
        let stdin = self.stdin.as_mut().context("stdin already closed")?;
        let mut line = message.to_string();
        line.push('\n');
        stdin
            .write_all(line.as_bytes())
            .and_then(|()| stdin.flush())
            .with_context(|| format!("writing to {}", self.name))
    }

    /// Sends a request and returns the response with its id (messages
    /// without it, such as the server's notifications, are skipped).
    pub fn request(&mut self, method: &str, params: Value, within: Duration) -> Result<Value> {
        let id = self.next_id;
        self.next_id += 1;
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))?;
        let deadline = Instant::now() + within;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.messages.recv_timeout(left) {
                Ok(message) if message["id"] == id => return Ok(message),
                Ok(_) => {}
                Err(RecvTimeoutError::Timeout) => {
                    bail!("{} did not answer {method} within {within:?}", self.name)
                }
                Err(RecvTimeoutError::Disconnected) => {
                    bail!("{} closed its stdout before answering {method}", self.name)
                }
            }
        }
    }

    /// `initialize`, then the `notifications/initialized` a client sends.
    pub fn initialize(&mut self, within: Duration) -> Result<Value> {
        let reply = self.request(
            "initialize",
            json!({"protocolVersion": "2025-03-26", "capabilities": {},
                   "clientInfo": {"name": "cgc-fresh-bench", "version": "0"}}),
            within,
        )?;
        if reply.get("result").is_none() {
            bail!("{} answered initialize with {reply}", self.name);
        }
        self.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))?;
        Ok(reply)
    }

    /// `tools/call` of `tool`; the whole response (a `result` or an `error`).
    pub fn call(&mut self, tool: &str, arguments: &Value, within: Duration) -> Result<Value> {
        self.request(
            "tools/call",
            json!({"name": tool, "arguments": arguments}),
            within,
        )
    }

    /// Closes stdin (an MCP server's way to end) and waits up to `grace`
    /// for the exit; kills it after that.
    pub fn close(mut self, grace: Duration) -> Result<()> {
        drop(self.stdin.take());
        let deadline = Instant::now() + grace;
        while Instant::now() < deadline {
            if self.child.try_wait()?.is_some() {
                return Ok(());
            }
            sleep(Duration::from_millis(10));
        }
        // Drop kills it.
        Err(anyhow!(
            "{} did not exit within {grace:?} of its stdin closing",
            self.name
        ))
    }
}

impl Drop for McpServer {
    fn drop(&mut self) {
        if matches!(self.child.try_wait(), Ok(None)) {
            let _ = self.child.kill();
        }
        let _ = self.child.wait();
    }
}

/// The text CGC answers a tool call with, parsed (it is JSON), or `None`
/// for an error or a result of another shape.
pub fn tool_result_json(response: &Value) -> Option<Value> {
    let text = response["result"]["content"][0]["text"].as_str()?;
    serde_json::from_str(text).ok()
}
