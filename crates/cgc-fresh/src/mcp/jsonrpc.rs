//! MCP's stdio transport as `cgc mcp start` speaks it: newline-delimited
//! JSON-RPC 2.0. Reading lines with a bound, telling requests from
//! notifications, and the responses; nothing here knows what a method does.

use std::io::{self, BufRead};

use serde_json::{json, Value};

/// The longest request line read (bytes, without its newline). A longer
/// one is answered with a parse error and skipped; serving goes on.
pub const MAX_LINE_BYTES: usize = 1024 * 1024;

pub const PARSE_ERROR: i64 = -32700;
pub const INVALID_REQUEST: i64 = -32600;
pub const METHOD_NOT_FOUND: i64 = -32601;
pub const INVALID_PARAMS: i64 = -32602;
pub const INTERNAL_ERROR: i64 = -32603;

/// One line of input.
#[derive(Debug, PartialEq)]
pub enum Line {
    /// A line (without its terminator).
    Text(Vec<u8>),
    /// A line longer than the bound, of this many bytes; it was skipped.
    TooLong(usize),
}

/// Reads the next line, at most `limit` bytes of it kept; `None` at end of
/// input. A last line without a newline counts.
pub fn read_line(input: &mut impl BufRead, limit: usize) -> io::Result<Option<Line>> {
    let mut kept = Vec::new();
    let mut total = 0usize;
    let mut any = false;
    loop {
        let buffer = match input.fill_buf() {
            Ok(buffer) => buffer,
            Err(error) if error.kind() == io::ErrorKind::Interrupted => continue,
            Err(error) => return Err(error),
        };
        if buffer.is_empty() {
            break;
        }
        any = true;
        let (piece, done) = match buffer.iter().position(|&b| b == b'\n') {
            Some(at) => (&buffer[..at], Some(at + 1)),
            None => (buffer, None),
        };
        total += piece.len();
        if total <= limit {
            kept.extend_from_slice(piece);
        }
        let used = done.unwrap_or(piece.len());
        input.consume(used);
        if done.is_some() {
            break;
        }
    }
    if !any {
        return Ok(None);
    }
    if total > limit {
        return Ok(Some(Line::TooLong(total)));
    }
    if kept.last() == Some(&b'\r') {
        kept.pop();
    }
    Ok(Some(Line::Text(kept)))
}

/// A request or notification, read from a line.
#[derive(Debug, PartialEq)]
pub struct Incoming {
    /// `None` for a notification (no `id` member): never answered.
    pub id: Option<Value>,
    pub method: String,
    pub params: Value,
}

/// What a line is: a message to dispatch, or the error response it gets.
pub fn parse(line: &[u8]) -> Result<Incoming, Value> {
    let value: Value = serde_json::from_slice(line)
        .map_err(|e| error_response(Value::Null, PARSE_ERROR, format!("Parse error: {e}"), None))?;
    let Value::Object(mut object) = value else {
        return Err(error_response(
            Value::Null,
            INVALID_REQUEST,
            "Invalid Request: not a JSON object".into(),
            None,
        ));
    };
    let id = object.remove("id");
    let answer_id = id.clone().unwrap_or(Value::Null);
    if id
        .as_ref()
        .is_some_and(|v| !(v.is_string() || v.is_number() || v.is_null()))
    {
        return Err(error_response(
            Value::Null,
            INVALID_REQUEST,
            "Invalid Request: id must be a string or a number".into(),
            None,
        ));
    }
    let method = match object.remove("method") {
        Some(Value::String(method)) => method,
        _ => {
            return Err(error_response(
                answer_id,
                INVALID_REQUEST,
                "Invalid Request: method must be a string".into(),
                None,
            ))
        }
    };
    let params = object.remove("params").unwrap_or_else(|| json!({}));
    Ok(Incoming { id, method, params })
}

/// `{"jsonrpc":"2.0","id":…,"result":…}`.
pub fn result_response(id: Value, result: Value) -> Value {
    json!({ "jsonrpc": "2.0", "id": id, "result": result })
}

/// `{"jsonrpc":"2.0","id":…,"error":{code, message, data?}}`.
pub fn error_response(id: Value, code: i64, message: String, data: Option<Value>) -> Value {
    let mut error = json!({ "code": code, "message": message });
    if let Some(data) = data {
        error["data"] = data;
    }
    json!({ "jsonrpc": "2.0", "id": id, "error": error })
}

/// A response with an `error` member as given (CGC's own).
pub fn raw_error_response(id: Value, error: Value) -> Value {
    json!({ "jsonrpc": "2.0", "id": id, "error": error })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(input: &[u8], limit: usize) -> Vec<Line> {
        let mut reader = io::BufReader::with_capacity(4, input);
        let mut out = Vec::new();
        while let Some(line) = read_line(&mut reader, limit).unwrap() {
            out.push(line);
        }
        out
    }

    #[test]
    fn lines_are_read_with_a_bound_and_a_long_one_is_skipped_whole() {
        assert_eq!(
            lines(b"ab\r\n0123456789\ncd", 5),
            [
                Line::Text(b"ab".to_vec()),
                Line::TooLong(10),
                Line::Text(b"cd".to_vec())
            ]
        );
        assert_eq!(lines(b"", 5), []);
        assert_eq!(lines(b"\n", 5), [Line::Text(Vec::new())]);
    }

    #[test]
    fn requests_notifications_and_bad_lines() {
        let request = parse(br#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#).unwrap();
        assert_eq!(request.id, Some(json!(1)));
        assert_eq!(request.params, json!({}));
        let note = parse(br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#).unwrap();
        assert_eq!(note.id, None);
        let error = parse(b"{not json").unwrap_err();
        assert_eq!(error["error"]["code"], PARSE_ERROR);
        assert_eq!(error["id"], Value::Null);
        assert_eq!(parse(b"[1]").unwrap_err()["error"]["code"], INVALID_REQUEST);
        let no_method = parse(br#"{"id":"x"}"#).unwrap_err();
        assert_eq!(no_method["error"]["code"], INVALID_REQUEST);
        assert_eq!(no_method["id"], "x");
        assert_eq!(
            parse(br#"{"id":{},"method":"a"}"#).unwrap_err()["error"]["code"],
            INVALID_REQUEST
        );
    }
}
