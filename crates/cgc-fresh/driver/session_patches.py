"""The patch framework: CGC's functions and methods replaced for the length
of one request (`patch`, `Patching`), and every such patch the driver
makes — the request's memos (`RequestMemos`, `RealpathMemo`), the
collector paused (`CollectorPaused`), the Go parser's query captures in
document order (`GoCapturesInOrder`), the schema statements left out of
an open (`SchemaDeferred`), the statements of CGC's embedded session
left out, batched or staged (`SessionStatements` and its kinds) and the purge
deferred to the request's end (`PurgeDeferred`).

Each leaves CGC as it found it when the request ends, an exception
included. Nothing here is kept between requests but what the worker
hands in (`RequestMemos`' `ignore_memo`).
"""

import os
import re

# An attribute an owner did not hold itself (`patch`).
_ABSENT = object()


def patch(undo, owner, name, value):
    """Sets `owner.name` to `value` for the length of a request and notes in
    `undo` how to put back what `owner` itself held (an attribute it only
    inherited is removed again)."""
    held = owner.__dict__.get(name, _ABSENT)
    setattr(owner, name, value)

    def put_back():
        if held is _ABSENT:
            delattr(owner, name)
        else:
            setattr(owner, name, held)

    undo.append(put_back)



class Patching:
    """A context manager whose `__enter__` sets attributes with `patch`;
    leaving puts them all back, last first."""

    def __init__(self):
        self._undo = []

    def __exit__(self, *_exc):
        while self._undo:
            self._undo.pop()()
        return False


# The most `.cgcignore` answers a worker keeps for one rule set (see
# `RequestMemos._memoize_ignore_matches`).
IGNORE_MEMO_MAX = 500_000


class RequestMemos(Patching):
    """What stays the same for the length of one request, read once.

    CodeGraphContext re-reads its settings on every `get_config_value`:
    the global `.env`, the context YAML and a walk for a project `.env`,
    about 300 times per request at 2 000 files (once per database query,
    through its debug log), and every resolution pass resolves each file's
    path again (`Path.resolve`, a `lstat` per path component: about
    16 000 calls per request). A request reads them once instead:

    - `load_config` answers from one read made at the request's start (a
      copy each time, as a caller may change its dict);
    - `os.path.realpath` answers from a memo while the tree is parsed and
      resolved, before the database opens, and is the library's own
      again for the database phase;
    - `.cgcignore` matching answers from a memo the worker keeps (see
      `_memoize_ignore_matches`).

    A settings change or a moved file during a request is a race either
    way (CGC reads each at some moment of its run); the worker is let go
    on a `cgc` settings change, and the next request reads afresh.

    `ignore_memo`: the worker's `.cgcignore` answers, {compiled rules:
    {relative path: ignored}} (`Worker.ignore_memo`), at most
    `max_entries` per rule set."""

    def __init__(self, ignore_memo, max_entries=IGNORE_MEMO_MAX):
        super().__init__()
        self.ignore_memo = ignore_memo
        self.max_entries = max_entries

    def __enter__(self):
        self._read_settings_once()
        self._memoize_ignore_matches()
        return self

    def _read_settings_once(self):
        try:
            from codegraphcontext.cli import config_manager
        except ImportError:
            return
        original = config_manager.load_config
        read = []

        def load_config():
            if not read:
                read.append(original())
            return dict(read[0])

        patch(self._undo, config_manager, "load_config", load_config)

    def _memoize_ignore_matches(self):
        """`.cgcignore` matching answered from the worker's memo: a file's
        answer is a function of the matcher's compiled rules and the
        relative path alone (`CGCIgnoreMatcher.match_file` on a string), and
        discovery asks it for every file and directory of the tree twice a
        sync (the prepare's and the request's; about 0.04 s each at 2 000
        modules). The memo is kept per rule set and emptied when it grows
        past `max_entries`; a path given as anything but a string is
        matched as shipped."""
        try:
            from codegraphcontext.core.cgcignore import CGCIgnoreMatcher
        except ImportError:
            return
        original = CGCIgnoreMatcher.__dict__.get("match_file")
        if original is None:
            return
        memo, max_entries = self.ignore_memo, self.max_entries

        def match_file(matcher, file_path):
            if type(file_path) is not str:
                return original(matcher, file_path)
            # The rules are compiled once, when the matcher is made; their
            # signature is kept on it with the list it was taken from.
            cached = matcher.__dict__.get("_cgc_fresh_rules")
            if cached is not None and cached[0] is matcher.rules:
                rules = cached[1]
            else:
                try:
                    rules = tuple((bool(neg), rule.pattern, rule.flags) for neg, rule in matcher.rules)
                except (AttributeError, TypeError, ValueError):
                    return original(matcher, file_path)
                matcher._cgc_fresh_rules = (matcher.rules, rules)
            answers = memo.get(rules)
            if answers is None:
                memo.clear()
                answers = memo[rules] = {}
            known = answers.get(file_path)
            if known is None:
                if len(answers) >= max_entries:
                    answers.clear()
                known = answers[file_path] = bool(original(matcher, file_path))
            return known

        patch(self._undo, CGCIgnoreMatcher, "match_file", match_file)


class CollectorPaused:
    """Python's cyclic garbage collector paused for one request.

    A request builds hundreds of thousands of long-lived objects (every
    file's parse result, CGC's maps, the resolved rows) and frees almost
    all of them by reference count; the collector, triggered by allocation
    counts alone, kept walking that live heap to find little garbage
    (measured at 2 000 modules: about 0.7 s of a 3.3 s warm request). The
    few cycles a request leaves are collected when it has answered
    (`serve.release_memory`), so they are bounded by one request. A collector
    someone else paused stays paused: a worker (`serve.serve`) keeps it paused
    for its whole life and collects between requests, so that no
    collection runs after a request's work and before its answer."""

    def __enter__(self):
        import gc

        self._was_enabled = gc.isenabled()
        gc.disable()
        return self

    def __exit__(self, *_exc):
        import gc

        if self._was_enabled:
            gc.enable()
        return False


class RealpathMemo:
    """`os.path.realpath`, and `Path.resolve` on top of it, answered from a
    memo while it is in force (see `RequestMemos`): the same path resolved
    again gives the same (immutable) `Path`, without the walk or the
    parsing of its result."""

    def __enter__(self):
        import pathlib
        import posixpath

        self._originals = (posixpath.realpath, pathlib.Path.resolve)
        realpath_original, resolve_original = self._originals
        realpaths = {}
        resolved = {}

        def realpath(path, *args, **kwargs):
            key = (os.fspath(path), args, tuple(sorted(kwargs.items())))
            if key not in realpaths:
                realpaths[key] = realpath_original(path, *args, **kwargs)
            return realpaths[key]

        def resolve(self, strict=False):
            key = (type(self), str(self), strict)
            if key not in resolved:
                resolved[key] = resolve_original(self, strict=strict)
            return resolved[key]

        posixpath.realpath = realpath
        pathlib.Path.resolve = resolve
        return self

    def __exit__(self, *_exc):
        import pathlib
        import posixpath

        posixpath.realpath, pathlib.Path.resolve = self._originals
        return False


class GoCapturesInOrder(Patching):
    """CGC's Go parser (`tools/languages/go.py`) given each query's captures
    in document order while it is in force, so that a Go file's parse is a
    function of its bytes.

    CGC 0.6.13's `execute_query` (`utils/tree_sitter_manager.py`, lines
    338-426; the dict at 390-394) flattens what tree-sitter's
    `QueryCursor.captures` gives, a dict of each capture name's nodes, and
    py-tree-sitter 0.25 collects those nodes in a set (its `captures` in
    `query_cursor.c`) whose order follows `Node.__hash__`, made of the
    tree's and the node's memory addresses. The order changes from one
    parse to the next, in one process as in two. For most of what the
    parsers read it is only the order of a list; but the Go parser's
    `_find_calls` (`tools/languages/go.py`, lines 554-598) keeps only the
    first call it meets of each name on a line, so on a line with two calls
    of one name — go-jsonnet's `ast/location.go` line 108,
    `lr.Begin.String()` and `lr.End.String()` — which call was kept, and
    its `full_name`, changed from parse to parse. That name reaches the
    graph: resolution takes the call's receiver from it
    (`tools/indexing/resolution/calls.py`, `full_call`, lines 131-164) and
    the CALLS relationship carries it (`full_call_name`, in the `MERGE` of
    `tools/indexing/persistence/writer.py`, lines 1059 and 1071), so two
    parses of an unchanged file could write two graphs, and a tree
    prepared ahead could differ from step 1 run again
    (`CGC_FRESH_VERIFY_PREPARED`). In document order the first call of the
    line is kept, every time.

    Each capture name's nodes take the places that name held in the list,
    so the names come in the order CGC's function gave them (the Go parser
    reads its groups in that order: an interface's node before its name);
    only the order among one name's nodes changes, which the set left
    arbitrary. A `cgc index` of the same tree keeps either call; this is
    one of its outcomes, the same on every parse. Not done for the other
    parsers: theirs keep no first-met item (Python keeps an import's lowest
    line), and their parse of an unchanged file was seen equal at every
    parse."""

    def __enter__(self):
        try:
            from codegraphcontext.tools.languages import go
        except ImportError:
            return self
        original = go.__dict__.get("execute_query")
        if original is None:
            return self

        def execute_query(language, query_string, node):
            return in_document_order(original(language, query_string, node))

        patch(self._undo, go, "execute_query", execute_query)
        return self


def in_document_order(captures):
    """`captures` (`(node, capture name)` pairs) with each name's nodes in
    document order — by start, the enclosing node first — in the places
    that name held (see `GoCapturesInOrder`)."""
    captures = list(captures)
    by_name = {}
    for node, name in captures:
        by_name.setdefault(name, []).append(node)
    ordered = {name: iter(_document_order(nodes)) for name, nodes in by_name.items()}
    return [(next(ordered[name]), name) for _node, name in captures]


def _document_order(nodes):
    if len({node.start_byte for node in nodes}) == len(nodes):
        return sorted(nodes, key=lambda node: node.start_byte)

    # Nodes that start together: the enclosing one first, and of a node
    # and its only child (the same bytes) the parent, as a walk of the
    # tree meets them.
    def depth(node):
        count = 0
        while node.parent is not None:
            node = node.parent
            count += 1
        return count

    return sorted(nodes, key=lambda node: (node.start_byte, -node.end_byte, depth(node)))


class SchemaDeferred(Patching):
    """CGC's schema statements left out of one database open, when the
    stored-edge memo says the database is exactly as the worker's last
    request left it (and so is its schema, which that request's open
    made sure of): the embedded manager's table creation and migrations
    (`_initialize_schema`) and the graph builder's constraints and indexes
    (`create_schema`). All are idempotent `CREATE … IF NOT EXISTS`
    statements; together about 0.05 s of the lock at 2 000 modules.

    `cgc_setup.open_database` asks again once the database is open, and holds its
    lock: if the file changed between the two looks, it closes and opens
    it again with the schema statements. Where the manager or builder
    lacks the method, nothing is left out."""

    def __init__(self, active):
        super().__init__()
        self.active = active
        self.skipped = False

    def __enter__(self):
        if not self.active:
            return self
        try:
            from codegraphcontext.core.database_embedded_kuzu import EmbeddedGraphManager
            from codegraphcontext.tools.graph_builder import GraphBuilder
        except ImportError:
            return self
        targets = ((EmbeddedGraphManager, "_initialize_schema"), (GraphBuilder, "create_schema"))
        if not all(callable(getattr(cls, name, None)) for cls, name in targets):
            return self
        def left_out(*_args, **_kwargs):
            self.skipped = True

        for cls, name in targets:
            patch(self._undo, cls, name, left_out)
        return self


def _embedded_session():
    """CGC's embedded (Kùzu) session class and its result wrapper, or None
    where this CGC has none: the patches below touch only that session."""
    try:
        from codegraphcontext.core.database_embedded_kuzu import EmbeddedResultWrapper, EmbeddedSessionWrapper
    except ImportError:
        return None
    if not callable(EmbeddedSessionWrapper.__dict__.get("run")):
        return None
    return EmbeddedSessionWrapper, EmbeddedResultWrapper


def _one_line(query):
    return " ".join(query.split()) if isinstance(query, str) else None


class SessionStatements(Patching):
    """A `Patching` of CGC's embedded (Kùzu) session's `run` for the length
    of a request: every statement goes through `statement(run, session,
    query, parameters)`, `run` being the method as shipped. Nothing is
    patched where this CGC has no embedded session or `wanted()` is false."""

    _result_class = None

    def wanted(self):
        return True

    def statement(self, run, session, query, parameters):
        return run(session, query, **parameters)

    def nothing(self):
        """The answer of a statement left out: no rows."""
        return self._result_class(None)

    def __enter__(self):
        embedded = _embedded_session()
        if embedded is None or not self.wanted():
            return self
        session_class, self._result_class = embedded
        shipped = session_class.__dict__["run"]

        def run(session, query, **parameters):
            return self.statement(shipped, session, query, parameters)

        patch(self._undo, session_class, "run", run)
        return self


class AbsentContainerQueriesSkipped(SessionStatements):
    """While CGC's writer adds one file the driver has just deleted from
    the graph (`delete_file_from_graph`), its statements that attach the
    file's methods to their container — one per container label, each
    `MATCH (c:<label> {name: row.class_name, path: $file_path})` — are
    left out for the labels the file has no items of, where that label's
    nodes are keyed by position (so only `add_file_to_graph` of this path
    makes them, each with a CONTAINS edge from this file, and the delete
    removed them all): such a statement matches nothing. A Python file
    with a class ran six of them, about 0.03 s of the lock per file at
    2 000 modules. Only the embedded (Kùzu) session is touched, and only
    statements of exactly that shape; anything else runs as shipped."""

    # Container label -> the parse result's key of its items.
    POSITION_KEYED = {
        "Interface": "interfaces", "Struct": "structs", "Record": "records",
        "Trait": "traits", "Object": "objects", "Mixin": "mixins",
    }
    QUERY = re.compile(
        r"\s*UNWIND \$batch AS row\s+MATCH \(c:(\w+) \{name: row\.class_name, path: \$file_path\}\)"
        r"\s+MATCH \(fn:Function \{name: row\.func_name, path: \$file_path, line_number: row\.func_line\}\)"
        r"\s+WHERE row\.class_line < 0 OR c\.line_number = row\.class_line"
        r"\s+MERGE \(c\)-\[:CONTAINS\]->\(fn\)\s*$"
    )

    def __init__(self, file_data):
        self.absent = {
            label for label, key in self.POSITION_KEYED.items() if not file_data.get(key)
        }
        super().__init__()
        self.skipped = 0

    def statement(self, run, session, query, parameters):
        match = self.QUERY.fullmatch(query) if isinstance(query, str) else None
        if match and match.group(1) in self.absent:
            self.skipped += 1
            return self.nothing()
        return run(session, query, **parameters)


class ParentDirectoriesKept(SessionStatements):
    """While CGC deletes a file the driver writes again in the same request,
    the delete leaves the file's directories alone: its first statement,
    which lists them (`MATCH (f:File {path: $path})<-[:CONTAINS*]-(d:Directory)
    … RETURN d.path`), answers none, so none of its per-directory "delete
    if now empty" statements runs. The file is written again under the
    same path, and `add_file_to_graph` merges the same directories (path
    and name, nothing else) and their CONTAINS edges, so the graph it
    leaves is the one deleting and merging them again leaves — without a
    Directory deleted and made again for the close to write out. A file
    that is only deleted keeps CGC's clean-up. About 0.02 s of the lock per
    re-added file at 2 000 modules; only the embedded (Kùzu) session, only
    that exact statement."""

    QUERY = ("MATCH (f:File {path: $path})<-[:CONTAINS*]-(d:Directory) "
             "RETURN d.path as path ORDER BY d.path DESC")

    def __init__(self, rewritten_paths):
        super().__init__()
        self.rewritten = set(rewritten_paths)
        self.kept = 0

    def wanted(self):
        return bool(self.rewritten)

    def statement(self, run, session, query, parameters):
        if parameters.get("path") in self.rewritten and _one_line(query) == self.QUERY:
            self.kept += 1
            return self.nothing()
        return run(session, query, **parameters)


class ParameterRowsBatched(SessionStatements):
    """While CGC's writer adds a file, its statement that merges the
    functions' Parameter nodes and HAS_PARAMETER edges runs as one batch
    when no two of its rows name the same Parameter, instead of one
    statement per row. CGC sends every `UNWIND` that merges a node through
    its per-row path because Kùzu 0.11.3 binds a row to the wrong node
    when a merged node's key repeats non-adjacently in the batch (its
    issue 1605); with every key (argument name, function line — the file
    is fixed) distinct, no key repeats. Five rows per generated module,
    about 0.03 s of the lock per written file at 2 000 modules. Only the
    embedded (Kùzu) session, only that exact statement; should Kùzu fail
    it, CGC's own per-row recovery runs as it would have."""

    QUERY = (
        "UNWIND $batch AS row MATCH (fn:Function {name: row.func_name, path: $file_path, "
        "line_number: row.line_number, occurrence_index: row.occurrence_index}) "
        "MERGE (p:Parameter {name: row.arg_name, path: $file_path, function_line_number: row.line_number}) "
        "SET p.name = row.arg_name, p.path = $file_path, p.function_line_number = row.line_number "
        "MERGE (fn)-[:HAS_PARAMETER]->(p)"
    )

    def __init__(self):
        super().__init__()
        self.batched = 0

    @staticmethod
    def distinct_keys(rows):
        if not isinstance(rows, list) or len(rows) < 2:
            return False
        keys = set()
        for row in rows:
            if not isinstance(row, dict):
                return False
            key = (repr(row.get("arg_name")), repr(row.get("line_number")))
            if key in keys:
                return False
            keys.add(key)
        return True

    def statement(self, run, session, query, parameters):
        if not (self.distinct_keys(parameters.get("batch")) and _one_line(query) == self.QUERY):
            return run(session, query, **parameters)
        held = session.__dict__.get("_skip_unwind_fallback", _ABSENT)
        session._skip_unwind_fallback = True
        try:
            result = run(session, query, **parameters)
        finally:
            if held is _ABSENT:
                session.__dict__.pop("_skip_unwind_fallback", None)
            else:
                session._skip_unwind_fallback = held
        self.batched += 1
        return result


class CallLinksStaged(SessionStatements):
    """While the driver writes link edges on Kùzu, CGC's call statements
    (`GraphWriter.write_function_call_groups`: `UNWIND $batch AS row`, a
    `MATCH` of the caller and one of the called by the row's name, path
    and line, a `WHERE`, a `MERGE` of the `CALLS` or `HEURISTIC_CALLS`
    edge and four `SET`s) run with each `MATCH` behind a `WITH` that names
    the row's keys. The statement means the same — the same rows, the same
    nodes matched, the same `WHERE`, `MERGE` and `SET`s, word for word —
    but Kùzu 0.11.3 plans a `MATCH` on `row.x` straight after the `UNWIND`
    as a cross product of the batch with the whole node table and a
    filter, and one on a `WITH`'s names as a hash join: about 1.7 against
    0.15–0.35 ms an edge at 30 000 `Function` nodes
    (`scripts/kuzu-link-write-cost.py`), the link phase of a branch
    switch. Only the embedded session of Kùzu (`kuzudb`: LadybugDB's
    planner is another), only these exact shapes (`stage`); anything else
    runs as shipped."""

    HEAD = re.compile(
        r"(?P<unwind>\s*UNWIND \$batch AS row)\s+"
        r"MATCH \(caller:(?P<caller>\w+) \{(?P<keys>name: row\.caller_name, path: row\.caller_file_path, "
        r"line_number: row\.caller_line_number|path: row\.caller_file_path)\}\)\s+"
        r"MATCH \(called:(?P<called>\w+) \{name: row\.called_name, path: row\.called_file_path\}\)"
        r"(?P<rest>\s+(?:WHERE [^\n]*(?:\n\s*AND [^\n]*)*\s+)?"
        r"MERGE \(caller\)-\[call:(?:CALLS|HEURISTIC_CALLS) \{line_number: row\.line_number, "
        r"full_call_name: row\.full_call_name, args_key: row\.args_key\}\]->\(called\)\s+"
        r"SET call\.args = row\.args\s+SET call\.confidence = row\.confidence\s+"
        r"SET call\.resolution_tier = row\.resolution_tier\s+"
        r"SET call\.confidence_label = row\.confidence_label\s*)"
    )

    def __init__(self):
        super().__init__()
        self.staged = 0

    @classmethod
    def stage(cls, query):
        """CGC's call statement `query` with its matches staged, or None
        when it is not of that shape."""
        match = cls.HEAD.fullmatch(query) if isinstance(query, str) else None
        if match is None:
            return None
        by_position = match["keys"].startswith("name:")
        if by_position == (match["caller"] == "File"):
            return None
        if by_position:
            caller = ("WITH row, row.caller_name AS caller_name, row.caller_file_path AS caller_path, "
                      "row.caller_line_number AS caller_line\n"
                      f"MATCH (caller:{match['caller']} {{name: caller_name, path: caller_path, "
                      "line_number: caller_line})")
        else:
            caller = ("WITH row, row.caller_file_path AS caller_path\n"
                      "MATCH (caller:File {path: caller_path})")
        called = ("WITH caller, row, row.called_name AS called_name, row.called_file_path AS called_path\n"
                  f"MATCH (called:{match['called']} {{name: called_name, path: called_path}})")
        return f"{match['unwind']}\n{caller}\n{called}{match['rest']}"

    def statement(self, run, session, query, parameters):
        staged = self.stage(query) if getattr(session, "_backend_id", None) == "kuzudb" else None
        if staged is None:
            return run(session, query, **parameters)
        self.staged += 1
        return run(session, staged, **parameters)


class PurgeDeferred:
    """CGC's `delete_file_from_graph` ends with a purge of shared nodes left
    without references (Modules nobody imports, external classes and
    functions, Parameters); the driver purges once more after all its
    writes (`post`), so the purge after each delete is left out while the
    driver deletes (about 0.02 s of the lock per changed file at 2 000
    modules).

    The graph it leaves is the same. Between the delete and the end of the
    request the only writes are the driver's own: re-adding files (a
    Module merged by name is then found instead of made again, and its
    `full_import_name`/`lang` are set afterwards from the tree — see
    `module_first` in `apply.py` — either way), and the link passes (an
    external class is merged by name, no property). A node still without references at
    the end is purged then. (Where a Module that another file defines is
    imported only by the deleted file, the purge after the delete removed
    it with that file's CONTAINS edge, which a from-scratch index keeps;
    deferring it keeps the node.)"""

    def __init__(self, writer):
        self.writer = writer

    def __enter__(self):
        if callable(getattr(self.writer, "_purge_dangling_pathless_nodes", None)):
            self.writer._purge_dangling_pathless_nodes = lambda: None
        return self

    def __exit__(self, *_exc):
        self.writer.__dict__.pop("_purge_dangling_pathless_nodes", None)
        return False
