//! `cgc-fresh mcp`: CGC's own MCP tools on stdio, answered through the
//! workspace's service. Against the real CLI (0.6.13) on Kùzu: the tool
//! list and the answers equal `cgc mcp start`'s on the same graph; with
//! it connected, an edit is read back at once, no sync is skipped as
//! busy, and the person's own `cgc` works between requests; bad input is
//! answered and serving goes on.

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::Duration;

use serde_json::{json, Value};

use crate::graph_backend::{GraphBackend, GraphCli};
use crate::incremental::{replace_in, service, wait_synced_fresh, write};
use crate::support::{open_session, real_cgc, Sandbox, Service};

/// An MCP server process on pipes (ours or CGC's).
struct Mcp {
    child: Child,
    stdin: Option<ChildStdin>,
    stdout: BufReader<ChildStdout>,
    next_id: u64,
}

impl Mcp {
    fn spawn(mut cmd: Command, log: &Path) -> Mcp {
        let mut child = cmd
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(log).unwrap())
            .spawn()
            .expect("spawn the MCP server");
        let stdin = child.stdin.take();
        let stdout = BufReader::new(child.stdout.take().unwrap());
        Mcp {
            child,
            stdin,
            stdout,
            next_id: 1,
        }
    }

    /// `cgc-fresh mcp` for the sandbox's workspace, at the service's socket.
    fn ours(sandbox: &Sandbox, service: &Service) -> Mcp {
        let mut cmd = sandbox.command();
        cmd.arg("--socket").arg(&service.socket).arg("mcp");
        Mcp::spawn(cmd, &sandbox.root.path().join("mcp.log"))
    }

    /// `cgc mcp start` on the same graph.
    fn cgc(sandbox: &Sandbox, cli: &GraphCli) -> Mcp {
        let cmd = cli.command(&["mcp", "start"]);
        Mcp::spawn(cmd, &sandbox.root.path().join("cgc-mcp.log"))
    }

    fn send_raw(&mut self, bytes: &[u8]) {
        let stdin = self.stdin.as_mut().unwrap();
        stdin.write_all(bytes).unwrap();
        stdin.flush().unwrap();
    }

    /// The next JSON-RPC message on stdout (other lines skipped).
    fn recv(&mut self) -> Value {
        loop {
            let mut line = String::new();
            let n = self.stdout.read_line(&mut line).unwrap();
            assert!(n > 0, "the MCP server closed its stdout");
            if let Ok(value) = serde_json::from_str::<Value>(line.trim()) {
                if value.get("jsonrpc").is_some() {
                    return value;
                }
            }
        }
    }

    fn request(&mut self, method: &str, params: Value) -> Value {
        let id = self.next_id;
        self.next_id += 1;
        let line = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        self.send_raw(format!("{line}\n").as_bytes());
        let reply = self.recv();
        assert_eq!(reply["id"], id, "{reply}");
        reply
    }

    fn call(&mut self, tool: &str, arguments: Value) -> Value {
        self.request("tools/call", json!({"name": tool, "arguments": arguments}))
    }

    /// Closes stdin and waits for the exit code.
    fn close(mut self) -> Option<i32> {
        drop(self.stdin.take());
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status.code();
            }
            assert!(std::time::Instant::now() < deadline, "did not exit");
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Mcp {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The text of a tool call's result (CGC's JSON, indented).
fn text(reply: &Value) -> Value {
    let text = reply["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_else(|| panic!("no text result: {reply}"));
    serde_json::from_str(text).unwrap()
}

fn indexed_workspace(sandbox: &Sandbox, cgc: &Path) -> GraphCli {
    let ws = sandbox.workspace();
    write(&ws, "pkg/__init__.py", "");
    write(
        &ws,
        "pkg/a.py",
        "def first(x):\n    return helper(x)\n\n\ndef helper(x):\n    return x\n",
    );
    write(
        &ws,
        "pkg/b.py",
        "from pkg.a import helper\n\n\ndef second(y):\n    return helper(y)\n",
    );
    let cli = GraphBackend::Kuzu.cli(cgc, &ws, &sandbox.home(), "mcp");
    cli.index();
    cli
}

/// The requests both servers are asked, in order.
fn queries() -> Vec<(&'static str, Value)> {
    vec![
        ("find_code", json!({"query": "helper"})),
        (
            "execute_cypher_query",
            json!({"cypher_query": "MATCH (f:Function) RETURN f.name AS name, f.path AS path ORDER BY name, path"}),
        ),
        (
            "analyze_code_relationships",
            json!({"query_type": "find_callers", "target": "helper"}),
        ),
    ]
}

fn function_names(mcp: &mut Mcp) -> Vec<String> {
    let reply = mcp.call(
        "execute_cypher_query",
        json!({"cypher_query": "MATCH (f:Function) WHERE f.name <> '<module>' RETURN f.name AS name ORDER BY name"}),
    );
    text(&reply)["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|row| row["name"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn tools_and_answers_equal_cgc_mcp_start_on_the_same_graph() {
    let Some(cgc) = real_cgc() else { return };
    let sandbox = Sandbox::new();
    let cli = indexed_workspace(&sandbox, &cgc);
    let mut service = service(&sandbox, &cli, &cgc);

    let mut ours = Mcp::ours(&sandbox, &service);
    let init = ours.request(
        "initialize",
        json!({"protocolVersion": "2025-03-26", "capabilities": {}}),
    );
    ours.send_raw(b"{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}\n");
    let tools = ours.request("tools/list", json!({}));
    let answers: Vec<Value> = queries()
        .into_iter()
        .map(|(tool, arguments)| ours.call(tool, arguments))
        .collect();
    assert_eq!(ours.close(), Some(0), "stdin closed: exit 0");
    // The service's stop takes its worker down: nothing of ours is left
    // to hold the database.
    service.signal(libc::SIGTERM);
    service.wait_exit(Duration::from_secs(30));

    let mut theirs = Mcp::cgc(&sandbox, &cli);
    let their_init = theirs.request(
        "initialize",
        json!({"protocolVersion": "2025-03-26", "capabilities": {}}),
    );
    let their_tools = theirs.request("tools/list", json!({}));
    let their_answers: Vec<Value> = queries()
        .into_iter()
        .map(|(tool, arguments)| theirs.call(tool, arguments))
        .collect();
    drop(theirs);

    assert_eq!(init["result"], their_init["result"], "initialize");
    let names = |reply: &Value| -> Vec<(String, Value)> {
        reply["result"]["tools"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| {
                (
                    t["name"].as_str().unwrap().to_string(),
                    t["inputSchema"].clone(),
                )
            })
            .collect()
    };
    assert!(names(&tools).len() >= 20, "{tools}");
    assert_eq!(
        names(&tools),
        names(&their_tools),
        "tool names and input schemas"
    );
    assert_eq!(
        tools["result"], their_tools["result"],
        "the whole tool list"
    );
    for ((ours, theirs), (tool, _)) in answers.iter().zip(&their_answers).zip(queries()) {
        assert!(ours.get("error").is_none(), "{tool}: {ours}");
        assert_eq!(ours, theirs, "{tool}");
    }
    // Not vacuous: the answers found what the workspace holds.
    assert!(answers[1].to_string().contains("second"), "{}", answers[1]);
    assert!(
        text(&answers[2]).to_string().contains("first"),
        "{}",
        answers[2]
    );
}

#[test]
fn with_mcp_connected_an_edit_is_read_back_at_once_and_no_sync_is_skipped_busy() {
    let Some(cgc) = real_cgc() else { return };
    let sandbox = Sandbox::new();
    let ws = sandbox.workspace();
    let cli = indexed_workspace(&sandbox, &cgc);
    let service = service(&sandbox, &cli, &cgc);
    let mut conn = open_session(&service, "s1");
    // The first sync has no manifest and reconciles the whole workspace.
    conn.request(json!({"type": "sync"}), 77);
    wait_synced_fresh(&mut conn);

    let mut mcp = Mcp::ours(&sandbox, &service);
    mcp.request("initialize", json!({}));
    assert!(function_names(&mut mcp).contains(&"first".to_string()));

    for (round, (from, to)) in [("first", "first_renamed"), ("second", "second_renamed")]
        .into_iter()
        .enumerate()
    {
        let rel = if round == 0 { "pkg/a.py" } else { "pkg/b.py" };
        conn.send(json!({"type": "tool_call", "session": "s1", "tool": "edit", "paths": [rel]}));
        replace_in(&ws, rel, &format!("def {from}("), &format!("def {to}("));
        let ack = conn.request(
            json!({"type": "tool_result", "session": "s1", "tool": "edit", "ok": true}),
            100 + round as u64,
        );
        assert_eq!(ack["type"], "ack", "{ack}");
        // At once: the query waits for the sync that covers the edit.
        let names = function_names(&mut mcp);
        assert!(names.contains(&to.to_string()), "round {round}: {names:?}");
        assert!(
            !names.contains(&from.to_string()),
            "round {round}: {names:?}"
        );
        // Between requests the person's own `cgc` works.
        let rows = cli.query(&format!(
            "MATCH (f:Function) WHERE f.name = '{to}' RETURN f.name AS name"
        ));
        assert_eq!(rows.len(), 1, "the person's cgc query: {rows:?}");
        let out = cli.command(&["find", "name", to]).output().unwrap();
        assert!(
            out.status.success(),
            "cgc find: {}",
            String::from_utf8_lossy(&out.stdout)
        );
    }

    let waits = service.log_events("mcp_read_your_writes");
    assert!(
        waits
            .iter()
            .any(|e| e["caught_up"] == true && e["waited_ms"].as_u64() > Some(0)),
        "a query waited for the sync: {waits:?}"
    );
    let log = service.log_text();
    assert!(!log.contains("skipped_busy"), "a sync was skipped as busy");
    assert!(
        !service
            .log_events("sync_report")
            .iter()
            .any(|e| e["report"].as_str().is_some_and(|r| r.contains("Busy"))),
        "a sync found the database busy"
    );
    assert_eq!(mcp.close(), Some(0));
}

#[test]
fn bad_input_is_answered_and_serving_goes_on() {
    let Some(cgc) = real_cgc() else { return };
    let sandbox = Sandbox::new();
    let cli = indexed_workspace(&sandbox, &cgc);
    let service = service(&sandbox, &cli, &cgc);
    let mut mcp = Mcp::ours(&sandbox, &service);

    mcp.send_raw(b"{this is not json\n");
    let reply = mcp.recv();
    assert_eq!(reply["error"]["code"], -32700, "{reply}");
    assert_eq!(reply["id"], Value::Null);

    let long = format!("{}\n", "x".repeat(2 * 1024 * 1024));
    mcp.send_raw(long.as_bytes());
    let reply = mcp.recv();
    assert_eq!(reply["error"]["code"], -32700, "{reply}");

    let reply = mcp.request("no/such/method", json!({}));
    assert_eq!(reply["error"]["code"], -32601, "{reply}");

    let reply = mcp.request("tools/call", json!({"arguments": {}}));
    assert_eq!(reply["error"]["code"], -32602, "{reply}");

    let reply = mcp.call("no_such_tool", json!({}));
    assert_eq!(
        reply["error"]["data"]["error"], "Unknown tool: no_such_tool",
        "{reply}"
    );

    let reply = mcp.call(
        "execute_cypher_query",
        json!({"cypher_query": "MATCH (f:Nope RETURN f"}),
    );
    assert_eq!(reply["error"]["code"], -32000, "{reply}");
    assert_eq!(
        reply["error"]["data"]["error"], "Cypher syntax error.",
        "{reply}"
    );

    let reply = mcp.call("add_code_to_graph", json!({"path": "."}));
    assert_eq!(reply["error"]["code"], -32000, "{reply}");
    let message = reply["error"]["data"]["error"].as_str().unwrap();
    assert!(
        message.contains("not offered through cgc-fresh mcp"),
        "{message}"
    );
    assert!(message.contains("cgc index"), "{message}");
    assert!(!service.log_events("mcp_answered").is_empty());

    // And a good request still works after all that.
    assert!(function_names(&mut mcp).contains(&"helper".to_string()));
    assert_eq!(mcp.close(), Some(0), "stdin closed: exit 0");
}
