"""CGC's MCP tools, answered by the incremental driver's worker.

`cgc-fresh mcp` offers the agent CGC's own MCP tools (names, input
schemas, result shapes) while no process holds the embedded database
between requests: the service hands each tool call to the workspace's
worker (`serve.py`'s `serve`), which opens the database for the
call alone (or, when the person chose `mcp.holdDatabaseMs`, for a burst
of calls), runs CGC's own handler, closes it, and answers with what
`cgc mcp start` would have put in its JSON-RPC response.

Requests (one stdin line of the worker each, dispatched by `serve`):
- `{"serial": N, "tools": "list"}`: the tools `cgc mcp start` lists here
  and its `initialize` result;
- `{"serial": N, "tool": {"name": NAME, "arguments": {...}}, "hold_ms": H}`:
  one call; with `hold_ms` > 0 the database stays open for the next call
  until `H` ms pass without a request (`CallDatabase`);
- `{"serial": N, "tools": "release"}`: close a held database (the service
  asks before anything else needs it), answered `{"released": true}`.

The answer is `{"serial": N, "mcp": {"result": ...}}` or
`{"serial": N, "mcp": {"error": {...}}}`: the `result` or `error` member
of `cgc mcp start`'s response to the same request. It is printed as
numbered chunk lines (`CHUNK_PREFIX`), each a JSON string holding a piece
of the answer's ASCII JSON text: at most twice `CHUNK_CHARS` once
escaped, far below the service's 8 KiB line capture limit.

Every use of CGC's internals is in the seam below (`Cgc0613`).
"""

import asyncio
import json
import os

CHUNK_PREFIX = "CGC_FRESH_MCP "
# Characters of the answer's JSON text per chunk line.
CHUNK_CHARS = 2048

# Tools that change the graph, the watcher set or the context: refused in
# this slice, each with what to use instead (README, "cgc-fresh mcp").
REFUSED = {
    "add_code_to_graph": "cgc-fresh keeps this workspace's graph in sync itself; to index another "
                         "directory, run `cgc index <path>` in a terminal",
    "add_package_to_graph": "run `cgc add-package <name> <language>` in a terminal",
    "delete_repository": "run `cgc delete <path>` in a terminal",
    "watch_directory": "cgc-fresh already keeps this workspace's graph fresh; "
                       "to watch another directory run `cgc watch <path>` in a terminal",
    "unwatch_directory": "cgc-fresh keeps this workspace's graph fresh; stop the workspace's "
                         "`cgc-fresh serve` if you do not want that",
    "load_bundle": "run `cgc load <bundle>` in a terminal",
    "switch_context": "run `cgc-fresh mcp --workspace <dir>` for the other workspace instead",
}


class Cgc0613:
    """The seam: everything taken from CodeGraphContext 0.6.13's MCP server
    (`codegraphcontext/server.py`, `tool_definitions.py`). A CGC upgrade is
    checked here first."""

    def __init__(self):
        from codegraphcontext import server

        self.server = server

    def shell(self, cwd, db_manager=None, code_finder=None, graph_builder=None):
        """An `MCPServer` without its `__init__` (which opens the database
        and keeps it): the attributes its tool methods read, with the
        database the worker opened for this call."""
        from pathlib import Path

        srv = self.server.MCPServer.__new__(self.server.MCPServer)
        srv.cwd = Path(cwd).resolve()
        srv.discovered_child_contexts = []
        srv._context_note_pending = False
        srv.disabled_tools = set()
        srv.db_manager = db_manager
        srv.code_finder = code_finder
        srv.graph_builder = graph_builder
        srv.loop = None
        srv.job_manager = None
        srv.code_watcher = None
        srv._init_tools()  # TOOLS minus `<cwd>/mcp.json`'s disabledTools
        return srv

    def tools(self, srv):
        return list(srv.tools.values())

    def initialize_result(self, srv):
        """`_run_loop`'s answer to `initialize`."""
        from codegraphcontext.prompts import LLM_SYSTEM_PROMPT, build_system_prompt

        return {
            "protocolVersion": "2025-03-26",
            "serverInfo": {
                "name": "CodeGraphContext",
                "version": srv._get_version(),
                "systemPrompt": build_system_prompt(),
                "instructionsAvailable": True,
            },
            "capabilities": {"tools": {"listTools": True}},
            "instructions": LLM_SYSTEM_PROMPT,
        }

    def call(self, srv, name, arguments):
        """`_run_loop`'s `tools/call` branch: the JSON-RPC `result` or
        `error` member."""
        result = asyncio.run(srv.handle_tool_call(name, arguments))
        result = self.server._strip_workspace_prefix(result)
        if "error" in result:
            return {"error": {"code": -32000, "message": "Tool execution error", "data": result}}
        text = self.server.encode_response(result)
        text = self.server._apply_response_token_limit(name, text)
        return {"result": {"content": [{"type": "text", "text": text}]}}


def is_request(request):
    """Whether a worker request line is one of this module's."""
    return isinstance(request, dict) and ("tool" in request or "tools" in request)


class CallDatabase:
    """The database for the worker's tool calls: opened the way the
    worker's syncs open it, and by default closed before the answer is
    out (the person's own `cgc` works as soon as the agent has its
    answer).

    A call may ask for the database to be *held* (`hold=True`, the
    service's `mcp.holdDatabaseMs` > 0): it stays open after the answer
    and the next call uses it as it is, without Kùzu's open and
    checkpoint (most of a call's time). Whoever owns the worker's loop
    releases it — after the hold's pause without a request, before any
    other request (a sync, a prepare), on `{"tools": "release"}`, and
    before the worker exits — with `release()`.

    `open_database(repo, timings)` → (db_manager, graph_builder, finder,
    context) and `close_database(db_manager)` → whether it closed cleanly
    are the driver's; `memo()` gives the worker's stored-edge memo, or
    None. The tools offered here only read (`execute_cypher_query` refuses
    writes in CGC itself, the writing tools are in `REFUSED`), so a clean
    close leaves the file as the open found it but for its header page,
    and the memo is told (`StoredEdgeMemo.read_only_closed`): whether it
    held once the database was open (the file's identity looked at under
    the lock) and where the file is. The next call or sync opens without
    comparing the file or running the schema statements again."""

    def __init__(self, open_database, close_database, memo):
        self._open = open_database
        self._close = close_database
        self._memo = memo
        # (repo, db_manager, graph_builder, finder, memo held at the open)
        self._held = None

    @property
    def holding(self):
        return self._held is not None

    def open(self, repo, hold=False):
        """(db_manager, graph_builder, finder, done): `done(failed)` ends
        the call — the database is closed unless the call holds it and
        did not fail (a handler that failed may have left it in doubt)."""
        if self._held is not None and self._held[0] != repo:
            self.release()
        if self._held is None:
            db_manager, graph_builder, finder, _ctx = self._open(repo, {})
            db_path = getattr(db_manager, "db_path", None)
            memo = self._memo()
            # Under the lock: is the file the one the memo kept (by
            # identity, or by contents compared before the open)?
            memo_held = memo is not None and memo.left_as_it_was(db_path, compare=False)
            self._held = (repo, db_manager, graph_builder, finder, memo_held)
        _repo, db_manager, graph_builder, finder, _memo_held = self._held

        def done(failed=False):
            if failed or not hold:
                self.release()

        return db_manager, graph_builder, finder, done

    def release(self):
        """Closes the database if it is open; nothing otherwise."""
        if self._held is None:
            return
        _repo, db_manager, _builder, _finder, memo_held = self._held
        self._held = None
        db_path = getattr(db_manager, "db_path", None)
        try:
            backend = db_manager.get_backend_type()
        except Exception:  # noqa: BLE001 - an unknown backend is not remembered
            backend = None
        cleanly = self._close(db_manager)
        memo = self._memo()
        if memo is not None and cleanly:
            memo.read_only_closed(backend, db_path, memo_held=memo_held)


def answer(request, database, repo):
    """The `mcp` member answering `request` (see the module's text), with
    the database opened through `database` (a `CallDatabase`) for a call
    alone."""
    if request.get("tools") == "release":
        database.release()
        return {"result": {"released": True}}
    if request.get("tools") == "list":
        cgc = Cgc0613()
        srv = cgc.shell(repo)
        return {"result": {"tools": cgc.tools(srv), "initialize": cgc.initialize_result(srv)}}
    call = request.get("tool")
    if not isinstance(call, dict) or not isinstance(call.get("name"), str):
        return {"error": {"code": -32602, "message": "Invalid params: tools/call needs a tool name"}}
    name = call["name"]
    arguments = call.get("arguments")
    if arguments is None:
        arguments = {}
    if not isinstance(arguments, dict):
        return {"error": {"code": -32602, "message": "Invalid params: arguments must be an object"}}
    if name in REFUSED:
        return {"error": {"code": -32000, "message": "Tool execution error", "data": {
            "error": f"Tool '{name}' is not offered through cgc-fresh mcp: it would change the graph "
                     f"or what keeps it fresh. Instead, {REFUSED[name]}."}}}
    cgc = Cgc0613()
    srv = cgc.shell(repo)
    if name not in srv.tools and name not in srv.disabled_tools:
        # What CGC's own routing answers, without opening the database.
        return {"error": {"code": -32000, "message": "Tool execution error",
                          "data": {"error": f"Unknown tool: {name}"}}}
    hold = hold_seconds(request) > 0
    db_manager, graph_builder, finder, done = database.open(repo, hold=hold)
    failed = True
    try:
        srv = cgc.shell(repo, db_manager=db_manager, code_finder=finder, graph_builder=graph_builder)
        member = cgc.call(srv, name, arguments)
        failed = False
        return member
    finally:
        done(failed)


def hold_seconds(request):
    """How long after answering `request` the worker keeps the database
    open for the next call (0: not at all)."""
    hold_ms = request.get("hold_ms") if isinstance(request, dict) and "tool" in request else None
    if isinstance(hold_ms, bool) or not isinstance(hold_ms, int) or hold_ms <= 0:
        return 0.0
    return hold_ms / 1000.0


def emit_chunks(write, serial, member):
    """Prints `{"serial", "mcp": member}` as chunk lines through `write`
    (bytes → None)."""
    data = json.dumps({"serial": serial, "mcp": member}, ensure_ascii=True)
    parts = max(1, (len(data) + CHUNK_CHARS - 1) // CHUNK_CHARS)
    for index in range(parts):
        piece = data[index * CHUNK_CHARS:(index + 1) * CHUNK_CHARS]
        line = {"serial": serial, "part": index, "parts": parts, "data": piece}
        write((CHUNK_PREFIX + json.dumps(line) + "\n").encode("ascii"))


def serve_request(request, database, write, passthrough):
    """One request of `serve`: answered, whatever happens (a failure of
    CGC's handler is a JSON-RPC internal error, as `cgc mcp start` makes
    it), except the `passthrough` exception (the worker was told to
    stop). Returns nothing; the worker goes on serving."""
    serial = request.get("serial")
    repo = os.getcwd()
    try:
        member = answer(request, database, repo)
    except passthrough:
        raise
    except SystemExit as exc:  # CGC's typer.Exit on a database error
        member = {"error": {"code": -32603, "message": f"Internal error: CodeGraphContext exited with {exc.code}"}}
    except Exception as exc:  # noqa: BLE001 - answered, never silent
        member = {"error": {"code": -32603, "message": f"Internal error: {exc}"}}
    emit_chunks(write, serial, member)
