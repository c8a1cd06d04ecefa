//! Harnesses without an extension API, driven through what they do offer:
//! Claude Code's command hooks and status line.
//!
//! - `claude_code`: `cgc-fresh hook claude-code` — one hook payload in,
//!   frames to the service out, the person's notices back as one
//!   `systemMessage`;
//! - `status_line`: `cgc-fresh status --line` — the one-line status text;
//! - `claude_settings`: `cgc-fresh install --harness claude-code` — merging
//!   the hooks and the status line into Claude Code's `settings.json`;
//! - `claude_mcp_config`: the same install's MCP server entry for
//!   `cgc-fresh mcp` in the project's `.mcp.json`;
//! - `hook_log`: the hook's own JSON-lines log (a file, or nowhere).

pub mod claude_code;
pub mod claude_mcp_config;
pub mod claude_settings;
pub mod hook_log;
pub mod status_line;

use std::io::Read;
use std::time::Duration;

/// Reads standard input to its end in a helper thread, for at most `wait`
/// and at most `limit` bytes; `None` when nothing complete arrived in time
/// (a caller must never hang on a pipe nobody closes).
pub fn read_stdin_bounded(limit: u64, wait: Duration) -> Option<Result<Vec<u8>, String>> {
    let (tx, rx) = std::sync::mpsc::channel();
    let spawned = std::thread::Builder::new()
        .name("stdin".into())
        .spawn(move || {
            let mut bytes = Vec::new();
            let outcome = std::io::stdin()
                .lock()
                .take(limit + 1)
                .read_to_end(&mut bytes)
                .map_err(|e| e.to_string())
                .and_then(|_| {
                    if bytes.len() as u64 > limit {
                        Err(format!("standard input is larger than {limit} bytes"))
                    } else {
                        Ok(bytes)
                    }
                });
            let _ = tx.send(outcome);
        });
    if spawned.is_err() {
        return None;
    }
    rx.recv_timeout(wait).ok()
}
