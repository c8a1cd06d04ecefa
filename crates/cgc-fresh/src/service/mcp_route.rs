//! MCP tool requests on their way through the service (`cgc-fresh mcp`):
//! what the drift observer hands the sync runner, the line the driver's
//! worker reads (`driver/mcp_tools.py`), and the answer put back together
//! from the worker's chunk lines, bounded.

use actix::prelude::*;
use cgc_fresh_proto::{McpAnswer, RequestId};
use serde::Deserialize;
use serde_json::{json, Value};

use super::messages::Outlet;

/// How many MCP requests may wait at once, in the observer (for
/// read-your-writes) and again in the runner (for the worker); more are
/// answered with an error at once, so a client flooding the socket costs
/// no memory beyond this.
pub const MAX_WAITING_MCP_REQUESTS: usize = 64;

/// How a chunk line of the worker's answer begins (`CHUNK_PREFIX` in
/// `driver/mcp_tools.py`).
pub const CHUNK_PREFIX: &str = "CGC_FRESH_MCP ";
/// The largest answer put together (decoded bytes); a larger one is
/// answered with an error instead.
pub const MAX_ANSWER_BYTES: usize = 16 * 1024 * 1024;
/// The driver module, shipped inside the binary and installed next to the
/// driver like its other companions.
pub const MCP_TOOLS_MODULE: &str = include_str!("../../driver/mcp_tools.py");
pub const MCP_TOOLS_MODULE_FILE: &str = "incremental-mcp-tools.py";

/// What is asked of CGC's MCP tools.
#[derive(Debug, Clone, PartialEq)]
pub enum McpAsk {
    /// `tools/list` (and the `initialize` result).
    Tools,
    /// `tools/call`.
    Call { name: String, arguments: Value },
    /// Not a client's: the runner asks the worker to close a database a
    /// call held (`mcp.holdDatabaseMs`) before anything else needs it.
    Release,
}

impl McpAsk {
    /// The worker's request line for it; a call asks the worker to keep
    /// the database open `hold_ms` after its answer (0: close it).
    pub fn worker_line(&self, serial: u64, hold_ms: u64) -> String {
        let mut line = match self {
            McpAsk::Tools => json!({ "serial": serial, "tools": "list" }),
            McpAsk::Call { name, arguments } => json!({
                "serial": serial,
                "tool": { "name": name, "arguments": arguments },
                "hold_ms": hold_ms,
            }),
            McpAsk::Release => json!({ "serial": serial, "tools": "release" }),
        }
        .to_string();
        line.push('\n');
        line
    }

    /// The tool's name, for the log.
    pub fn tool(&self) -> &str {
        match self {
            McpAsk::Tools => "tools/list",
            McpAsk::Call { name, .. } => name,
            McpAsk::Release => "release",
        }
    }
}

/// One MCP request for the sync runner: answered on `reply_to` with an
/// `mcp` frame carrying `id`.
#[derive(Message)]
#[rtype(result = "()")]
pub struct McpRequest {
    pub ask: McpAsk,
    pub reply_to: Outlet,
    pub id: Option<RequestId>,
}

/// A JSON-RPC internal error as the answer (the worker could not answer).
pub fn internal_error(message: impl Into<String>) -> McpAnswer {
    McpAnswer {
        result: None,
        error: Some(
            json!({ "code": -32603, "message": format!("Internal error: {}", message.into()) }),
        ),
    }
}

#[derive(Deserialize)]
struct Chunk {
    serial: u64,
    part: usize,
    parts: usize,
    data: String,
}

/// Why chunk lines could not be put together.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ChunkError {
    #[error("a chunk line that cannot be read: {0}")]
    Unreadable(String),
    #[error("chunk {part} of {parts} came out of order")]
    OutOfOrder { part: usize, parts: usize },
    #[error("the answer exceeds {MAX_ANSWER_BYTES} bytes")]
    TooLarge,
    #[error("the answer is not the worker's MCP answer: {0}")]
    NotAnAnswer(String),
}

/// Puts one request's answer together from its chunk lines.
#[derive(Debug, Default)]
pub struct Assembler {
    bytes: Vec<u8>,
    next: usize,
}

/// What a chunk line gave.
#[derive(Debug, PartialEq)]
pub enum Assembled {
    /// A line for another request (a stale serial): ignored.
    Other,
    /// More chunks to come.
    Partial,
    /// The whole answer.
    Done(McpAnswer),
}

impl Assembler {
    /// Takes the text after `CHUNK_PREFIX` of a line for request `serial`.
    pub fn push(&mut self, serial: u64, text: &str) -> Result<Assembled, ChunkError> {
        let chunk: Chunk =
            serde_json::from_str(text).map_err(|e| ChunkError::Unreadable(e.to_string()))?;
        if chunk.serial != serial {
            return Ok(Assembled::Other);
        }
        if chunk.part != self.next || chunk.part >= chunk.parts {
            return Err(ChunkError::OutOfOrder {
                part: chunk.part,
                parts: chunk.parts,
            });
        }
        if self.bytes.len() + chunk.data.len() > MAX_ANSWER_BYTES {
            return Err(ChunkError::TooLarge);
        }
        self.bytes.extend_from_slice(chunk.data.as_bytes());
        self.next += 1;
        if self.next < chunk.parts {
            return Ok(Assembled::Partial);
        }
        #[derive(Deserialize)]
        struct Whole {
            serial: u64,
            mcp: McpAnswer,
        }
        let whole: Whole = serde_json::from_slice(&self.bytes)
            .map_err(|e| ChunkError::NotAnAnswer(e.to_string()))?;
        if whole.serial != serial || (whole.mcp.result.is_none() == whole.mcp.error.is_none()) {
            return Err(ChunkError::NotAnAnswer(
                "no serial of this request, or not exactly one of result and error".into(),
            ));
        }
        Ok(Assembled::Done(whole.mcp))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chunks(serial: u64, whole: &Value, size: usize) -> Vec<String> {
        let data = serde_json::to_vec(whole).unwrap();
        let parts: Vec<String> = data
            .chunks(size)
            .map(|piece| String::from_utf8(piece.to_vec()).unwrap())
            .collect();
        parts
            .iter()
            .enumerate()
            .map(|(i, piece)| {
                json!({"serial": serial, "part": i, "parts": parts.len(),
                       "data": piece})
                .to_string()
            })
            .collect()
    }

    #[test]
    fn an_answer_in_several_chunks_is_put_together() {
        let whole = json!({"serial": 7, "mcp": {"result": {"content": [{"type": "text", "text": "x".repeat(10_000)}]}}});
        let lines = chunks(7, &whole, 4096);
        assert_eq!(lines.len(), 3);
        let mut assembler = Assembler::default();
        assert_eq!(assembler.push(7, &lines[0]), Ok(Assembled::Partial));
        assert_eq!(assembler.push(6, &lines[1]), Ok(Assembled::Other));
        assert_eq!(assembler.push(7, &lines[1]), Ok(Assembled::Partial));
        let Ok(Assembled::Done(answer)) = assembler.push(7, &lines[2]) else {
            panic!("not done");
        };
        assert_eq!(answer.result, Some(whole["mcp"]["result"].clone()));
    }

    #[test]
    fn chunks_out_of_order_or_unreadable_are_errors() {
        let whole = json!({"serial": 1, "mcp": {"error": {"code": -32000}}});
        let lines = chunks(1, &whole, 8);
        let mut assembler = Assembler::default();
        assert!(matches!(
            assembler.push(1, &lines[1]),
            Err(ChunkError::OutOfOrder { .. })
        ));
        assert!(matches!(
            Assembler::default().push(1, "not json"),
            Err(ChunkError::Unreadable(_))
        ));
        let both = json!({"serial": 1, "mcp": {"error": {}, "result": {}}});
        assert!(matches!(
            Assembler::default().push(1, &chunks(1, &both, 4096)[0]),
            Err(ChunkError::NotAnAnswer(_))
        ));
    }

    #[test]
    fn the_request_line_names_the_tool_and_its_arguments() {
        let ask = McpAsk::Call {
            name: "find_code".into(),
            arguments: json!({"query": "a"}),
        };
        let line: Value = serde_json::from_str(ask.worker_line(3, 250).trim_end()).unwrap();
        assert_eq!(
            line,
            json!({"serial": 3, "tool": {"name": "find_code", "arguments": {"query": "a"}}, "hold_ms": 250})
        );
        let line: Value =
            serde_json::from_str(McpAsk::Tools.worker_line(4, 250).trim_end()).unwrap();
        assert_eq!(line, json!({"serial": 4, "tools": "list"}));
        let line: Value =
            serde_json::from_str(McpAsk::Release.worker_line(5, 0).trim_end()).unwrap();
        assert_eq!(line, json!({"serial": 5, "tools": "release"}));
    }
}
