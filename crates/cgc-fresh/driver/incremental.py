"""cgc-fresh incremental driver: apply CodeGraphContext's own incremental
update to exactly the given changed files, so that the graph equals a
from-scratch index of the same tree.

Run with the interpreter of the configured `cgc` (the service finds it from
`cgc`'s shebang), with cwd = the workspace root:

    python incremental.py [ROOT OPTIONS] --probe
    python incremental.py [ROOT OPTIONS] [--baseline] apply -- REL_PATH...
    python incremental.py [ROOT OPTIONS] [--idle-exit SECONDS] serve
    python incremental.py [ROOT OPTIONS] reconcile -- CGC CGC_ARGS...

`serve` is the same apply as a long-lived worker: one request per stdin
line, CodeGraphContext imported once, the database open only while a
request is applied (see `serve`). `reconcile` readies the backend for
CodeGraphContext's own writes (`falkordb_index.py`: FalkorDB's range index
is repaired) and then becomes `CGC CGC_ARGS...` (exec, same process), so
the service's reconcile, `update` or `index` run is CodeGraphContext's
exactly as before — but for FalkorDB Lite's start-up patience and a
fallback to another backend said on stderr (`backend_pin.py`).

ROOT OPTIONS are CGC's root options (`--db/--database NAME`,
`--db-path/--path PATH`), taken as `cgc` takes them, `--allow-unproven-cgc`
(the person's opt-in to run on a CGC version the driver was not proven
against: `cgc_seam.py`), and `--parse-cache PATH`: where CGC's per-file parse results are kept between syncs (see
`parse_cache.py`, installed next to this file as `incremental-parse-cache.py`;
without the option, or without that file, every file is parsed). Every REL_PATH is a
changed path relative to the workspace (added, modified or deleted: the disk
and the graph say which). With `--baseline` the changed paths are those and
every file whose nodes and imports in the graph are not what a
from-scratch index of the tree writes now (`graph_baseline.py`): the sync
when nothing proves what the graph holds.

The recipe (CodeGraphContext's per-file watcher path, applied path by path,
is not exact; this is):

1. Without the database: discover the tree as `cgc index` does, pre-scan
   imports, parse every file (sorted by path) and resolve calls and
   inheritance over the whole tree.
2. Open the database the way the CLI does. Read the link edges stored for
   the repository. The files to re-link are the changed files, the files
   with a stored link edge into a changed file, the files whose new rows
   point at a changed file, and the files whose new rows differ from their
   stored edges (a call or base resolved elsewhere now).
3. Delete the link edges of those files and of the changed files
   explicitly (Kùzu can leave a phantom edge behind `DETACH DELETE`), delete
   the changed files' nodes, write the changed files' nodes in path order
   (many files' in a few statements where that is provably the same:
   `batched_writes.py`),
   write the selected files' link rows (inheritance-type edges first, then
   calls), reset shared Module metadata from the first importer in path
   order (which of its rows wins depends on the backend:
   `module_metadata_row`), purge dangling pathless nodes.

4. Check the work (`self_check.py`): each changed file's nodes in the
   graph are the ones written, contained by their File; a difference
   fails the request.

Backends: whatever CGC's own database manager opens; proven equal to a
from-scratch index end to end on Kùzu, LadybugDB, FalkorDB Lite
(`falkordb`) and a FalkorDB server (`falkordb-remote`). On FalkorDB the
request first repairs the range index CGC's writes depend on
(`falkordb_index.py`). A backend outside `PROVEN_BACKENDS` is not
written: the request answers "unsupported" and the service reconciles.
A manager CGC opened on another backend than the configured one (its
fallback when FalkorDB Lite does not start in time) is not written
either: the request fails (`backend_pin.py`).

Output: one line `CGC_FRESH_RESULT {json}` on stdout, last; `serve`
writes progress lines before it (see there and `progress.py`).
Exit codes: 0 applied everything; 1 failed (the graph may be partial);
3 cannot apply incrementally, nothing was written (the caller runs a full
reconcile instead); 130/143 interrupted by SIGINT/SIGTERM.
"""

import json
import os
import re
import signal
import sys
import time

RESULT_PREFIX = "CGC_FRESH_RESULT "
EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_UNSUPPORTED = 3
PROTOCOL = 1

# Link relationships: created by the post-pass over all parsed files, never
# by the per-file node write. A changed file's nodes take these with them.
LINK_TYPES = (
    "CALLS",
    "HEURISTIC_CALLS",
    "INHERITS",
    "IMPLEMENTS",
    "EMBEDS",
    "COMPANION_OF",
    "PARTIAL_OF",
    "PART_OF",
    "METACLASS",
    "DECORATED_BY",
    "BINDS",
    "PREVIEWS",
)

# What the recipe needs from CodeGraphContext (private API, 0.6.x).
REQUIRED_API = (
    ("codegraphcontext.cli.main", ("_load_credentials",)),
    ("codegraphcontext.cli.cli_helpers", ("_initialize_services",)),
    ("codegraphcontext.cli.config_manager", ("resolve_context", "get_config_value")),
    (
        "codegraphcontext.tools.graph_builder",
        ("GraphBuilder",),
    ),
    ("codegraphcontext.tools.indexing.discovery", ("discover_files_to_index",)),
    (
        "codegraphcontext.tools.indexing.resolution.calls",
        ("build_function_call_groups",),
    ),
    (
        "codegraphcontext.tools.indexing.resolution.inheritance",
        (
            "build_inheritance_and_csharp_files",
            "build_go_implements_links",
            "build_haskell_implements_links",
            "build_elixir_implements_links",
            "build_embeds_links",
            "build_companion_of_links",
            "build_partial_of_links",
            "build_part_of_links",
            "build_metaclass_links",
            "build_decorated_by_links",
            "build_binds_links",
            "build_previews_links",
        ),
    ),
    (
        "codegraphcontext.tools.indexing.persistence.writer",
        ("GraphWriter", "sort_import_rows_for_metadata"),
    ),
)

GRAPH_BUILDER_METHODS = (
    "parse_file",
    "pre_scan_imports",
    "get_parser",
    "create_schema",
    "delete_file_from_graph",
    "add_file_to_graph",
    "add_minimal_file_node",
    "get_repo_file_paths",
)
WRITER_METHODS = (
    "write_inheritance_links",
    "write_implements_links",
    "write_embeds_links",
    "write_companion_of_links",
    "write_partial_of_links",
    "write_part_of_links",
    "write_metaclass_links",
    "write_decorated_by_links",
    "write_binds_links",
    "write_previews_links",
    "write_function_call_groups",
    "write_cpp_class_function_links",
    "_purge_dangling_pathless_nodes",
)

# Settings under which `cgc index` runs passes this driver does not replay.
UNSUPPORTED_SETTINGS = ("SCIP_INDEXER", "ENABLE_VECTOR_RESOLVE", "ENABLE_INHERIT_RESOLVE")
# Changed files whose effect lives in whole-repository passes of `cgc index`
# (Spring, ORM, MyBatis, Maven, Gradle) that this driver does not replay.
UNSUPPORTED_SUFFIXES = (".java", ".xml", ".gradle", ".kts")


# Serve mode ends after this long without a request (seconds).
DEFAULT_IDLE_EXIT_S = 600.0

# The backends (`get_backend_type()` of CGC 0.6.13's managers) on which the
# end-to-end tests prove the graph equal to a from-scratch index. Neo4j and
# Nornic are not: a request there writes nothing and says so.
PROVEN_BACKENDS = ("kuzudb", "ladybugdb", "falkordb", "falkordb-remote")

# Test-only: leaves out the delete of a re-written file's nodes, so that the
# tests can prove the self-check fails such a sync. Never set in use.
BREAK_DELETE_FOR_TESTS_ENV = "CGC_FRESH_BREAK_DELETE_FOR_TESTS"


class Interrupted(Exception):
    def __init__(self, signum):
        super().__init__(f"interrupted by signal {signum}")
        self.signum = signum


class Unsupported(Exception):
    """Cannot apply incrementally; nothing was written."""


def _on_signal(signum, _frame):
    raise Interrupted(signum)


REAL_STDOUT = None


# A result line lists each path's outcome for at most this many paths; a
# larger batch's line carries `paths_digest` instead, so the line stays
# far below the service's 8 KiB cut (`sync_plan::DRIVER_PATHS_LISTED`).
DRIVER_PATHS_LISTED = 100


def paths_digest(sorted_paths):
    """SHA-256 (hex) of the paths joined by newlines: the service checks
    it against the paths it asked for (`sync_plan::paths_digest`)."""
    import hashlib

    return hashlib.sha256("\n".join(sorted_paths).encode("utf-8")).hexdigest()


def bounded_paths(applied):
    """`applied` with its per-path outcomes replaced by their digest, count
    and tally when there are more than `DRIVER_PATHS_LISTED`."""
    paths = applied.get("paths")
    if not isinstance(paths, dict) or len(paths) <= DRIVER_PATHS_LISTED:
        return applied
    bounded = {k: v for k, v in applied.items() if k != "paths"}
    tally = {}
    for outcome in paths.values():
        tally[outcome] = tally.get(outcome, 0) + 1
    bounded.update(paths_digest=paths_digest(sorted(paths)), paths_accounted=len(paths), paths_outcomes=tally)
    return bounded


def emit(result):
    line = RESULT_PREFIX + json.dumps(result, sort_keys=True) + "\n"
    os.write(REAL_STDOUT, line.encode("utf-8"))


def parse_argv(argv):
    """CGC's root options, then `--probe` or `[--baseline] apply -- PATH...`."""
    opts = {"db": None, "db_path": None, "parse_cache": None, "probe": False, "paths": None,
            "serve": False, "idle_exit": DEFAULT_IDLE_EXIT_S, "allow_unproven": False, "baseline": False}
    i = 0
    while i < len(argv):
        arg = argv[i]
        if arg in ("--db", "--database", "-db") and i + 1 < len(argv):
            opts["db"] = argv[i + 1]
            i += 2
        elif arg.startswith("--db=") or arg.startswith("--database="):
            opts["db"] = arg.split("=", 1)[1]
            i += 1
        elif arg in ("--db-path", "--path") and i + 1 < len(argv):
            opts["db_path"] = argv[i + 1]
            i += 2
        elif arg.startswith("--db-path=") or arg.startswith("--path="):
            opts["db_path"] = arg.split("=", 1)[1]
            i += 1
        elif arg == "--allow-unproven-cgc":
            opts["allow_unproven"] = True
            i += 1
        elif arg == "--parse-cache" and i + 1 < len(argv):
            opts["parse_cache"] = argv[i + 1]
            i += 2
        elif arg == "--idle-exit" and i + 1 < len(argv):
            try:
                opts["idle_exit"] = max(1.0, float(argv[i + 1]))
            except ValueError:
                raise Unsupported(f"--idle-exit wants seconds, not {argv[i + 1]!r}") from None
            i += 2
        elif arg == "serve":
            opts["serve"] = True
            return opts
        elif arg == "--probe":
            opts["probe"] = True
            i += 1
        elif arg == "--baseline":
            opts["baseline"] = True
            i += 1
        elif arg == "apply":
            rest = argv[i + 1 :]
            if rest[:1] == ["--"]:
                rest = rest[1:]
            opts["paths"] = list(rest)
            return opts
        else:
            raise Unsupported(f"unsupported argument for the incremental driver: {arg!r}")
    return opts


def probe_api():
    """Imports what the recipe uses and checks every function is there.
    Returns (missing, modules)."""
    import importlib

    missing = []
    modules = {}
    for module_name, names in REQUIRED_API:
        try:
            module = importlib.import_module(module_name)
        except Exception as exc:  # noqa: BLE001 - any import failure is "missing"
            missing.append(f"{module_name} ({type(exc).__name__}: {exc})")
            continue
        modules[module_name] = module
        for name in names:
            if not callable(getattr(module, name, None)):
                missing.append(f"{module_name}.{name}")
    gb_module = modules.get("codegraphcontext.tools.graph_builder")
    if gb_module is not None and hasattr(gb_module, "GraphBuilder"):
        for name in GRAPH_BUILDER_METHODS:
            if not callable(getattr(gb_module.GraphBuilder, name, None)):
                missing.append(f"GraphBuilder.{name}")
    writer_module = modules.get("codegraphcontext.tools.indexing.persistence.writer")
    if writer_module is not None and hasattr(writer_module, "GraphWriter"):
        for name in WRITER_METHODS:
            if not callable(getattr(writer_module.GraphWriter, name, None)):
                missing.append(f"GraphWriter.{name}")
    return missing, modules


def cgc_seam(opts):
    """The seam with CGC (`cgc_seam.py`), loaded once per process."""
    if "seam" not in opts:
        opts["seam"] = load_companion(CGC_SEAM_MODULE, "cgc_fresh_cgc_seam")
    return opts["seam"]


def cgc_gate(opts):
    """The version gate (`cgc_seam.py`) for the installed CGC, read once
    per process: a worker runs the CGC it imported at its start."""
    if "gate" not in opts:
        opts["gate"] = cgc_seam(opts).version_gate(cgc_version(), opts.get("allow_unproven", False))
    return opts["gate"]


def cgc_version():
    try:
        from importlib.metadata import version

        return version("codegraphcontext")
    except Exception:  # noqa: BLE001
        return None


# ---------------------------------------------------------------- signatures


def _norm_float(value):
    try:
        return round(float(value), 6)
    except (TypeError, ValueError):
        return 0.0


def _norm_int(value, default=0):
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, int):
        return value
    try:
        return int(value or default)
    except (TypeError, ValueError):
        return default


def call_signature(row, caller_is_file, base):
    """What the writer stores for one CALLS row, as a comparable tuple
    (mirrors `GraphWriter.write_function_call_groups`' sanitisation)."""
    tier = row.get("resolution_tier")
    tier = -1 if tier is None else tier
    try:
        tier_int = int(tier)
    except (TypeError, ValueError):
        tier_int = -1
    rel = "HEURISTIC_CALLS" if tier_int >= 8 else "CALLS"
    raw_args = row.get("args") or []
    args_key = json.dumps(raw_args, sort_keys=False) if isinstance(raw_args, list) else str(raw_args)
    caller_path = row.get("caller_file_path")
    return (
        rel,
        None if caller_is_file else row.get("caller_name"),
        None if caller_is_file else _norm_int(row.get("caller_line_number")),
        row.get("called_name"),
        row.get("called_file_path"),
        _norm_int(row.get("line_number")),
        row.get("full_call_name"),
        args_key,
        _norm_float(row.get("confidence") if row.get("confidence") is not None else 0.0),
        _norm_int(tier, -1),
        row.get("confidence_label") if row.get("confidence_label") is not None else "EXTRACTED",
    ), caller_path


def generic_signature(rel, src_path, src_name, dst_name, dst_path, extra=None):
    return (rel, src_name, None, dst_name, dst_path, extra, None, None, None, None, None), src_path


# The parsed-file lists CGC's writer turns into named nodes carrying the
# file's path (`GraphWriter.add_file_to_graph`'s item mappings, 0.6.x), and
# the label each gets.
NODE_ITEM_LABELS = (
    ("functions", "Function"), ("classes", "Class"), ("traits", "Trait"), ("variables", "Variable"),
    ("interfaces", "Interface"), ("macros", "Macro"), ("structs", "Struct"), ("enums", "Enum"),
    ("unions", "Union"), ("records", "Record"), ("properties", "Property"), ("mixins", "Mixin"),
    ("extensions", "Extension"), ("modules", "Module"), ("objects", "Object"),
    ("enum_members", "EnumMember"),
)

# The node properties CGC's writer compares a call's `called_context` with
# (`_called_context_clause` for the Function label, 0.6.x).
CONTEXT_PROPERTIES = ("context", "class_context", "module_context")

# Target label of each call group, in `build_function_call_groups` order
# (`GraphWriter.write_function_call_groups`' `queries`, 0.6.x).
CALL_GROUP_TARGETS = (
    "Function", "Class", "Interface", "Object",  # from a Function
    "Function", "Class", "Interface", "Object",  # from a File
    "Parameter", "File",  # from a Function
)


def _posix(path):
    from pathlib import Path

    try:
        return Path(path).resolve().as_posix()
    except (OSError, RuntimeError, ValueError):
        return str(path)


def _stored_forms(value):
    """Every value a node property may hold once CGC's writer has coerced
    `value` (a str as is; a tuple or list as JSON, or its first element
    when a parser flattens it). More forms only make a match likelier."""
    if value is None:
        return ()
    if isinstance(value, str):
        return (value,)
    forms = set()
    if isinstance(value, (list, tuple)):
        try:
            forms.add(json.dumps(list(value)))
            forms.add(json.dumps(list(value), default=str))
        except (TypeError, ValueError):
            pass
        if value and isinstance(value[0], str):
            forms.add(value[0])
    forms.add(str(value))
    return tuple(forms)


def _writer_int(value):
    """`called_line_number` as the writer coerces it."""
    if isinstance(value, int):
        return value
    try:
        return int(value or 0)
    except (TypeError, ValueError):
        return 0


class WriterNodes:
    """The nodes CGC's writer creates for the tree's parsed files, as its
    link writers MATCH them: per label, (name, path) -> [(line, contexts)].

    CGC's writer stores a link edge only when both endpoints MATCH (label,
    name, path, and for calls the target's line and context), so a resolved
    row whose endpoint does not is never stored; the comparison of resolved
    rows with stored edges must leave such rows out, or their source file
    looks changed on every sync. Every test here errs towards "matches": a
    row kept that the writer drops only costs a needless re-link; a row
    dropped that the writer stores could miss one, so none is dropped on a
    guess (an unknown value type, a label this index does not model)."""

    MODELLED = ("Function", "Class", "Interface", "Object", "File", "Parameter")

    def __init__(self, parsed_files):
        from pathlib import PurePosixPath

        self.nodes = {label: {} for label in self.MODELLED}
        for fd in parsed_files:
            raw_path = fd.get("path")
            if not raw_path:
                continue
            paths = {str(raw_path), _posix(raw_path)}
            for path in paths:
                self.nodes["File"].setdefault((PurePosixPath(path).name, path), []).append((None, ()))
            if "error" in fd:
                continue
            for key, label in NODE_ITEM_LABELS:
                if label not in self.nodes:
                    continue
                items = fd.get(key)
                if not isinstance(items, list):
                    continue
                for item in items:
                    if not isinstance(item, dict) or not isinstance(item.get("name"), str):
                        continue
                    contexts = set()
                    for prop in CONTEXT_PROPERTIES:
                        contexts.update(_stored_forms(item.get(prop)))
                    entry = (item.get("line_number"), frozenset(contexts))
                    for path in paths:
                        self.nodes[label].setdefault((item["name"], path), []).append(entry)
                    if label == "Function" and isinstance(item.get("args"), list):
                        for arg in item["args"]:
                            for path in paths:
                                self.nodes["Parameter"].setdefault((arg, path), []).append((None, ()))

    def matches(self, label, name, path, line=None, context=None):
        """Whether a MATCH (n:label {name, path}) with the writer's line
        (`line` > 0 must equal) and context (for a Function, one of its
        context properties must equal a non-empty `context`) finds a node."""
        if label not in self.nodes:
            return True
        candidates = self.nodes[label].get((name, path))
        if not candidates:
            return False
        for node_line, contexts in candidates:
            if line is not None and line > 0 and isinstance(node_line, int) and node_line != line:
                continue
            if context is not None and context != "" and label == "Function":
                if isinstance(context, str) and context not in contexts:
                    continue
            return True
        return False

    def caller(self, row):
        """Whether a call row's calling Function MATCHes: name, path and
        `line_number: row.caller_line_number` (an exact property match)."""
        line = row.get("caller_line_number")
        if not isinstance(line, int) or isinstance(line, bool):
            return True
        candidates = self.nodes["Function"].get((row.get("caller_name"), row.get("caller_file_path")))
        return any(node_line == line for (node_line, _c) in candidates or ())

    def decorated(self, name, path, line, context):
        """Whether a DECORATED_BY row's decorated end MATCHes: a Function
        (with its context, when the row names one) or a Class, by name,
        path and `line_number: $decorated_line` (without an int line: kept)."""
        for label in ("Function", "Class"):
            for node_line, contexts in self.nodes[label].get((name, path)) or ():
                if line is not None and isinstance(node_line, int) and node_line != line:
                    continue
                if label == "Function" and isinstance(context, str) and context and context not in contexts:
                    continue
                return True
        return False


def sanitized_call_rows(links):
    """(group index, row) of every call row CGC's writer does not drop
    before it even queries (`write_function_call_groups`' sanitisation)."""
    for index, group in enumerate(links["calls"]):
        for row in group:
            if not isinstance(row, dict) or not row.get("caller_file_path") or not row.get("called_name"):
                continue
            if row.get("called_line_number") is False or row.get("called_context") is False:
                continue
            yield index, row


def row_signatures(links, nodes=None):
    """{source path: set of signatures} for all link rows of the tree.
    With `nodes` (a `WriterNodes`), CALLS, HEURISTIC_CALLS, METACLASS and
    DECORATED_BY rows whose endpoints CGC's writer would not MATCH are left
    out, as the writer leaves them out of the graph."""
    out = {}

    def matches(label, name, path, line=None, context=None):
        return nodes is None or nodes.matches(label, name, path, line, context)

    def add(sig_and_src):
        sig, src = sig_and_src
        if src:
            out.setdefault(src, set()).add(sig)

    for index, row in sanitized_call_rows(links):
        caller_is_file = 4 <= index <= 7
        if nodes is not None:
            target = CALL_GROUP_TARGETS[index] if index < len(CALL_GROUP_TARGETS) else None
            if target == "Parameter":
                continue  # see `parameter_signatures`
            line = None if target == "File" else _writer_int(row.get("called_line_number"))
            context = row.get("called_context")
            if target and not matches(target, row.get("called_name"), row.get("called_file_path"), line,
                                      "" if context is None else context):
                continue
            if not caller_is_file and not nodes.caller(row):
                continue
        add(call_signature(row, caller_is_file, None))
    for row in links["inheritance"]:
        parent_path = row.get("resolved_parent_file_path")
        if parent_path == "__external__":
            add(generic_signature("INHERITS", row.get("path"), row.get("child_name"), row.get("parent_name"), None,
                                  row.get("confidence_label") or "INFERRED"))
        else:
            add(generic_signature("INHERITS", row.get("path"), row.get("child_name"), row.get("parent_name"),
                                  parent_path, row.get("confidence_label") or "EXTRACTED"))
    for rel, key in (("IMPLEMENTS", "implements"), ("PARTIAL_OF", "partial_of")):
        for row in links[key]:
            add(generic_signature(rel, row.get("path"), row.get("child_name"), row.get("parent_name"),
                                  row.get("resolved_parent_file_path"), row.get("confidence_label", "INFERRED")))
    for row in links["metaclass"]:
        if not matches("Class", row.get("parent_name"), row.get("resolved_parent_file_path")):
            continue
        if not matches("Class", row.get("child_name"), row.get("path")):
            continue
        add(generic_signature("METACLASS", row.get("path"), row.get("child_name"), row.get("parent_name"),
                              row.get("resolved_parent_file_path"),
                              (row.get("line_number", 0), row.get("confidence_label", "EXTRACTED"))))
    for row in links["embeds"]:
        add(generic_signature("EMBEDS", row.get("path"), row.get("child_name"), row.get("parent_name"),
                              row.get("resolved_parent_file_path"), row.get("line_number", 0)))
    for row in links["part_of"]:
        child, parent = row.get("child_path"), row.get("parent_path")
        add(generic_signature("PART_OF", child, os.path.basename(child or ""), os.path.basename(parent or ""),
                              parent))
    for row in links["decorated_by"]:
        if not matches("Function", row.get("decorator_name"), row.get("decorator_path")):
            continue
        decorated = (row.get("decorated_name"), row.get("decorated_path"))
        decorated_line = row.get("decorated_line")
        line = decorated_line if isinstance(decorated_line, int) and not isinstance(decorated_line, bool) else None
        if nodes is not None and not nodes.decorated(*decorated, line, row.get("decorated_context", "")):
            continue
        add(generic_signature("DECORATED_BY", row.get("decorated_path"), row.get("decorated_name"),
                              row.get("decorator_name"), row.get("decorator_path"),
                              row.get("line_number", row.get("decorated_line"))))
    for row in links["previews"]:
        add(generic_signature("PREVIEWS", row.get("preview_path"), row.get("preview_name"),
                              row.get("composable_name"), row.get("composable_path"),
                              row.get("line_number", row.get("preview_line"))))
    for row in links["binds"]:
        add(generic_signature("BINDS", row.get("source_path"), row.get("source_name"), row.get("target_name"),
                              row.get("target_path"),
                              (row.get("line_number"), row.get("provider"),
                               row.get("confidence_label") or "EXTRACTED")))
    for row in links["companion_of"]:
        add(generic_signature("COMPANION_OF", row.get("companion_path"), row.get("companion_name"),
                              row.get("owner_name"), row.get("owner_path")))
    return out


# Backends with a typed schema: a query naming a property a label's table
# lacks fails to bind, and CGC's writer skips that whole batch.
TYPED_SCHEMA_BACKENDS = ("kuzudb", "ladybugdb")


def parameter_signatures(links, nodes, backend):
    """{source path: signatures} of the call rows into a Parameter (the
    `fn_to_param` group), which `row_signatures` leaves out when given
    `nodes`: the writer's MATCH names `called.line_number`, which a typed
    schema's Parameter table lacks, so there the whole group is never
    stored; elsewhere a missing property compares as null, so only rows
    with no line (`called_line_number` <= 0) whose Parameter exists are."""
    out = {}
    if backend in TYPED_SCHEMA_BACKENDS:
        return out
    parameter = CALL_GROUP_TARGETS.index("Parameter")
    for index, row in sanitized_call_rows(links):
        if index != parameter or _writer_int(row.get("called_line_number")) > 0:
            continue
        if not nodes.matches("Parameter", row.get("called_name"), row.get("called_file_path")):
            continue
        if not nodes.caller(row):
            continue
        sig, src = call_signature(row, False, None)
        out.setdefault(src, set()).add(sig)
    return out


def row_targets(links):
    """(source path, target path) pairs of all link rows."""
    pairs = set()
    for group in links["calls"]:
        for row in group:
            if isinstance(row, dict):
                pairs.add((row.get("caller_file_path"), row.get("called_file_path")))
    for key in ("inheritance", "implements", "partial_of", "metaclass", "embeds"):
        for row in links[key]:
            pairs.add((row.get("path"), row.get("resolved_parent_file_path")))
    for row in links["part_of"]:
        pairs.add((row.get("child_path"), row.get("parent_path")))
    for row in links["decorated_by"]:
        pairs.add((row.get("decorated_path"), row.get("decorator_path")))
    for row in links["previews"]:
        pairs.add((row.get("preview_path"), row.get("composable_path")))
    for row in links["binds"]:
        pairs.add((row.get("source_path"), row.get("target_path")))
    for row in links["companion_of"]:
        pairs.add((row.get("companion_path"), row.get("owner_path")))
    return pairs


def row_source(key, row):
    if key == "part_of":
        return row.get("child_path")
    if key == "decorated_by":
        return row.get("decorated_path")
    if key == "previews":
        return row.get("preview_path")
    if key == "binds":
        return row.get("source_path")
    if key == "companion_of":
        return row.get("companion_path")
    return row.get("path")


# Per stored relationship type: the query returning comparable tuples.
def stored_edge_queries():
    calls_props = (
        "r.line_number AS ln, r.full_call_name AS fcn, r.args_key AS ak, "
        "r.confidence AS conf, r.resolution_tier AS tier, r.confidence_label AS cl"
    )
    queries = []
    for rel in ("CALLS", "HEURISTIC_CALLS"):
        queries.append(
            (
                rel,
                "fn",
                f"MATCH (a:Function)-[r:{rel}]->(b) WHERE a.path STARTS WITH $prefix "
                f"RETURN a.path AS src, a.name AS sn, a.line_number AS sl, b.name AS dn, b.path AS dp, {calls_props}",
            )
        )
        queries.append(
            (
                rel,
                "file",
                f"MATCH (a:File)-[r:{rel}]->(b) WHERE a.path STARTS WITH $prefix "
                f"RETURN a.path AS src, b.name AS dn, b.path AS dp, {calls_props}",
            )
        )
    simple = {
        "INHERITS": "r.confidence_label AS x",
        "IMPLEMENTS": "r.confidence_label AS x",
        "PARTIAL_OF": "r.confidence_label AS x",
        "METACLASS": "r.line_number AS x, r.confidence_label AS y",
        "EMBEDS": "r.line_number AS x",
        "PART_OF": None,
        "DECORATED_BY": "r.line_number AS x",
        "PREVIEWS": "r.line_number AS x",
        "BINDS": "r.line_number AS x, r.provider AS y, r.confidence_label AS z",
        "COMPANION_OF": None,
    }
    for rel, extra in simple.items():
        returns = "a.path AS src, a.name AS sn, b.name AS dn, b.path AS dp"
        if extra:
            returns += ", " + extra
        queries.append((rel, "generic", f"MATCH (a)-[r:{rel}]->(b) WHERE a.path STARTS WITH $prefix RETURN {returns}"))
    return queries


def stored_signature(rel, shape, rec):
    if shape in ("fn", "file"):
        return (
            rel,
            rec.get("sn") if shape == "fn" else None,
            _norm_int(rec.get("sl")) if shape == "fn" else None,
            rec.get("dn"),
            rec.get("dp"),
            _norm_int(rec.get("ln")),
            rec.get("fcn"),
            rec.get("ak"),
            _norm_float(rec.get("conf")),
            _norm_int(rec.get("tier"), -1),
            rec.get("cl"),
        )
    if rel in ("METACLASS",):
        extra = (rec.get("x"), rec.get("y"))
    elif rel == "BINDS":
        extra = (rec.get("x"), rec.get("y"), rec.get("z"))
    elif rel in ("PART_OF", "COMPANION_OF"):
        extra = None
    else:
        extra = rec.get("x")
    return (rel, rec.get("sn"), None, rec.get("dn"), rec.get("dp"), extra, None, None, None, None, None)


def _record_dict(record, keys):
    data = getattr(record, "data", None)
    if callable(data):
        try:
            values = data()
        except Exception:  # noqa: BLE001 - read key by key below
            values = None
        if isinstance(values, dict):
            return {key: values.get(key) for key in keys}
    out = {}
    for key in keys:
        try:
            out[key] = record[key]
        except Exception:  # noqa: BLE001 - a missing column is None
            out[key] = None
    return out


class KuzuReader:
    """Read-only queries of the database phase straight through a Kùzu
    connection of CGC's own open database, all rows fetched at once.

    The stored-edge read (about 8 000 rows at 2 000 modules, every request
    the memo cannot answer) went through CGC's session wrapper — a query
    rewrite, a record object and a dict per row — for about 0.25 s of the
    lock; fetched directly it is about 0.15 s. Only plain `MATCH … RETURN`
    queries go here (the wrapper rewrites nothing in them); writes stay on
    CGC's path. `open` gives None where the database is not Kùzu's
    (FalkorDB, another manager) and the caller reads through CGC."""

    def __init__(self, connection):
        self._connection = connection

    @classmethod
    def open(cls, db_manager, backend):
        if backend != "kuzudb":
            return None
        try:
            import kuzu
        except ImportError:
            return None
        database = getattr(db_manager, "_db", None)
        if not isinstance(database, kuzu.Database):
            return None
        try:
            return cls(kuzu.Connection(database))
        except Exception:  # noqa: BLE001 - read through CGC instead
            return None

    def read(self, query, keys, **params):
        result = self._connection.execute(query, params)
        try:
            columns = result.get_column_names()
            rows = result.get_all()
        finally:
            close = getattr(result, "close", None)
            if callable(close):
                close()
        at = {name: i for i, name in enumerate(columns)}
        picks = [(key, at.get(key)) for key in keys]
        return [{key: (None if i is None else row[i]) for key, i in picks} for row in rows]

    def close(self):
        connection, self._connection = self._connection, None
        if connection is not None:
            try:
                connection.close()
            except Exception:  # noqa: BLE001 - CGC's close closes the database
                pass


def _is_binder_error(exc):
    text = str(exc).lower()
    return "binder" in text or "cannot find a valid label" in text or "does not exist" in text


# -------------------------------------------------------------------- recipe

# Backends whose query reads the graph as it was before the query: in
# `UNWIND $rows AS row MERGE (m ...) SET m.x = coalesce(m.x, row.x)` every
# row sees `m.x` unset, so the last row wins (FalkorDB, measured on its
# server; FalkorDB Lite embeds the same engine). Kùzu applies each row's SET
# before the next row reads: the first row wins.
LAST_ROW_WINS_BACKENDS = ("falkordb", "falkordb-remote")


def module_metadata_row(backend):
    """Which of the first importer's rows sets a shared Module's metadata."""
    return "last_row" if backend in LAST_ROW_WINS_BACKENDS else "first_row"


PARSE_CACHE_MODULE = "incremental-parse-cache.py"
RESOLUTION_MEMO_MODULE = "incremental-resolution-memo.py"
STORED_EDGES_MODULE = "incremental-stored-edges.py"
FALKORDB_INDEX_MODULE = "incremental-falkordb-index.py"
SELF_CHECK_MODULE = "incremental-self-check.py"
WORKER_PAUSES_MODULE = "incremental-worker-pauses.py"
BACKEND_PIN_MODULE = "incremental-backend-pin.py"
MCP_TOOLS_MODULE = "incremental-mcp-tools.py"
CGC_SEAM_MODULE = "incremental-cgc-seam.py"
GRAPH_BASELINE_MODULE = "incremental-graph-baseline.py"
PROGRESS_MODULE = "incremental-progress.py"
BATCHED_WRITES_MODULE = "incremental-batched-writes.py"


def load_companion(file_name, module_name):
    """A module the service installs next to this file (`file_name`), or,
    where this file runs from the source tree, its source
    (`module_name` without `cgc_fresh_`, `.py`)."""
    import importlib.util

    here = os.path.dirname(os.path.abspath(__file__))
    path = os.path.join(here, file_name)
    if not os.path.exists(path):
        path = os.path.join(here, module_name.removeprefix("cgc_fresh_") + ".py")
    spec = importlib.util.spec_from_file_location(module_name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def progress_reporter(serial, quiet=False):
    """A request's progress reporter (`progress.py`): its lines go to the
    real stdout, before the result line, with `serial` (None for a
    prepare); with `quiet` it writes nothing (a run nobody watches). Where
    the module does not load (an install without it), one that writes
    nothing either: the lines are for the person, and a sync never fails
    for want of them."""
    try:
        module = load_companion(PROGRESS_MODULE, "cgc_fresh_progress")
    except Exception as exc:  # noqa: BLE001 - no progress lines, the sync goes on
        import types

        print(f"cgc-fresh: no progress lines: {type(exc).__name__}: {exc}", file=sys.stderr)
        return types.SimpleNamespace(phase=lambda _name, total=None: None, advance=lambda n=1: None,
                                     end=lambda: None)
    if quiet:
        return module.NoProgress()
    return module.ProgressReporter(lambda data: os.write(REAL_STDOUT, data), time.monotonic, serial)


# A worker's parse cache module and its `Resident`, loaded at its first
# request and kept (a one-shot run loads the module afresh and keeps
# nothing).
_PARSE_CACHE = []


def open_parse_cache(path, repo_posix, cached_suffixes):
    """The parse cache at `path` (None: parse every file), keeping the
    files of `cached_suffixes` (`cgc_seam.FILE_ALONE_SUFFIXES`). Its code
    is the module installed next to this file; any failure to load it
    means no cache, never a failed sync."""
    if not path:
        return None
    try:
        if not SERVING:
            module = load_companion(PARSE_CACHE_MODULE, "cgc_fresh_parse_cache")
            return module.open_cache(path, repo_posix, cached_suffixes=cached_suffixes)
        if not _PARSE_CACHE:
            module = load_companion(PARSE_CACHE_MODULE, "cgc_fresh_parse_cache")
            _PARSE_CACHE.append((module, module.Resident()))
        module, resident = _PARSE_CACHE[0]
        return module.open_cache(path, repo_posix, resident, cached_suffixes)
    except Exception as exc:  # noqa: BLE001 - no cache, every file parsed
        print(f"cgc-fresh: no parse cache: {type(exc).__name__}: {exc}", file=sys.stderr)
        return None


# The worker's stored-edge memo (see `stored_edges.py`), made at its first
# request; None when its module does not load (then edges are read).
_STORED_EDGE_MEMO = []


def stored_edge_memo():
    if not SERVING:
        return None
    if not _STORED_EDGE_MEMO:
        memo = None
        try:
            memo = load_companion(STORED_EDGES_MODULE, "cgc_fresh_stored_edges").StoredEdgeMemo()
        except Exception as exc:  # noqa: BLE001 - no memo, the edges read
            print(f"cgc-fresh: no stored-edge memo: {type(exc).__name__}: {exc}", file=sys.stderr)
        _STORED_EDGE_MEMO.append(memo)
    return _STORED_EDGE_MEMO[0]


# The worker's resolution memo (see `resolution_memo.py`), made at its
# first request. A one-shot run has no later request to use it for.
_RESOLUTION_MEMO = []
SERVING = []


def resolve_calls(all_ok, imports_map, timings):
    """CGC's `build_function_call_groups` over the whole tree, through the
    resolution memo when its module (installed next to this file) loads;
    any failure to load it means the function as shipped."""
    from codegraphcontext.tools.indexing.resolution import calls

    if not SERVING:
        return calls.build_function_call_groups(all_ok, imports_map, None, diagnostics=[])
    if not _RESOLUTION_MEMO:
        memo = None
        try:
            memo = load_companion(RESOLUTION_MEMO_MODULE, "cgc_fresh_resolution_memo").ResolutionMemo(calls)
            if memo.off:
                print(f"cgc-fresh: resolution {memo.off}", file=sys.stderr)
        except Exception as exc:  # noqa: BLE001 - no memo, the whole resolution
            print(f"cgc-fresh: no resolution memo: {type(exc).__name__}: {exc}", file=sys.stderr)
        _RESOLUTION_MEMO.append(memo)
    memo = _RESOLUTION_MEMO[0]
    if memo is None:
        return calls.build_function_call_groups(all_ok, imports_map, None, diagnostics=[])
    return memo.resolve(all_ok, imports_map, timings)


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


_ABSENT = object()


class Patching:
    """A context manager whose `__enter__` sets attributes with `patch`;
    leaving puts them all back, last first."""

    def __init__(self):
        self._undo = []

    def __exit__(self, *_exc):
        while self._undo:
            self._undo.pop()()
        return False


# A worker's `.cgcignore` answers: {compiled rules: {relative path: ignored}}
# (see `RequestMemos._memoize_ignore_matches`).
_IGNORE_MEMO = {}
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
    on a `cgc` settings change, and the next request reads afresh."""

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
        past `IGNORE_MEMO_MAX`; a path given as anything but a string is
        matched as shipped."""
        try:
            from codegraphcontext.core.cgcignore import CGCIgnoreMatcher
        except ImportError:
            return
        original = CGCIgnoreMatcher.__dict__.get("match_file")
        if original is None:
            return

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
            answers = _IGNORE_MEMO.get(rules)
            if answers is None:
                _IGNORE_MEMO.clear()
                answers = _IGNORE_MEMO[rules] = {}
            known = answers.get(file_path)
            if known is None:
                if len(answers) >= IGNORE_MEMO_MAX:
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
    (`release_memory`), so they are bounded by one request. A collector
    someone else paused stays paused: a worker (`serve`) keeps it paused
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


class SchemaDeferred(Patching):
    """CGC's schema statements left out of one database open, when the
    stored-edge memo says the database is exactly as the worker's last
    request left it (and so is its schema, which that request's open
    made sure of): the embedded manager's table creation and migrations
    (`_initialize_schema`) and the graph builder's constraints and indexes
    (`create_schema`). All are idempotent `CREATE … IF NOT EXISTS`
    statements; together about 0.05 s of the lock at 2 000 modules.

    `open_database` asks again once the database is open, and holds its
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
    `module_first` — either way), and the link passes (an external class
    is merged by name, no property). A node still without references at
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


def open_database(repo, timings):
    """Opens the database the way the CLI does (`_initialize_services`),
    leaving out the schema statements when the database is known to be as
    the worker's last request or tool call left it (see `SchemaDeferred`
    and `StoredEdgeMemo.schema_in_place`)."""
    from codegraphcontext.cli.cli_helpers import _initialize_services

    pin = backend_pin()
    pin.be_patient()
    memo = stored_edge_memo()
    with SchemaDeferred(bool(memo) and memo.schema_in_place()) as deferred:
        db_manager, graph_builder, finder, ctx = _initialize_services(None, cwd=repo)
    if deferred.skipped and not memo.schema_in_place(getattr(db_manager, "db_path", None), compare=False):
        # Someone opened the database between the look and the open.
        close_database(db_manager)
        db_manager, graph_builder, finder, ctx = _initialize_services(None, cwd=repo)
        deferred.skipped = False
    timings["schema_skipped"] = 1 if deferred.skipped else 0
    try:
        # CGC falls back to another backend when the graph's does not start
        # in time (see `backend_pin.py`): nothing is written there.
        pin.check(db_manager, pin.intended_backend())
    except BaseException:
        close_database(db_manager)
        raise
    return db_manager, graph_builder, finder, ctx


def backend_pin():
    """The backend pin (`backend_pin.py`), loaded once per process."""
    if not _BACKEND_PIN:
        _BACKEND_PIN.append(load_companion(BACKEND_PIN_MODULE, "cgc_fresh_backend_pin"))
    return _BACKEND_PIN[0]


_BACKEND_PIN = []


class TreeState:
    """Step 1's outcome: what the database phase needs of the tree."""

    def __init__(self, **parts):
        self.__dict__.update(parts)


# A worker's tree prepared ahead of its next request (`serve`'s `prepare`),
# at most one; taken (and so spent) by the next request.
_PREPARED = []
VERIFY_PREPARED_ENV = "CGC_FRESH_VERIFY_PREPARED"
# Files changed this recently (ns) before a prepare began are compared by
# content, not by identity (see `PreparedTree`).
PREPARED_RACY_NS = 2_000_000_000


def _settings():
    """CGC's settings as the request reads them (`RequestMemos`)."""
    try:
        from codegraphcontext.cli import config_manager

        return config_manager.load_config()
    except Exception:  # noqa: BLE001 - unknown settings match nothing
        return object()


class PreparedTree:
    """Step 1 done ahead of the request it is for.

    Between an edit's result and the end of the batching window the
    service asks an idle worker to `prepare`: it parses and resolves the
    tree as it is then, and keeps the outcome. The next request uses it
    instead of doing step 1 again only if the tree is still what was
    prepared:

    - the same repository and the same CGC settings;
    - the same files, discovered as `cgc index` does (an added, removed or
      newly ignored file: not used), each of a suffix whose parse reads the
      file alone (`cgc_seam.FILE_ALONE_SUFFIXES`) or of one CGC has no parser for
      (such a file is a bare File node, whatever it holds: `pip` has a few
      `.txt` files);
    - each file's identity (size, mtime, ctime, inode, device), taken before
      the prepare parsed anything, unchanged;
    - and the files changed within `PREPARED_RACY_NS` before the prepare
      began — the files just edited, whose identity a second write in the
      same clock tick could leave as it was — byte for byte what they were
      before and after the prepare parsed them.

    A parse is a function of the file's bytes, its path and the settings;
    resolution a function of the parse results; so the prepared outcome is
    what step 1 would compute now. `CGC_FRESH_VERIFY_PREPARED=1` (set by the
    real-CLI tests) computes step 1 again anyway and fails the request on
    any difference."""

    def __init__(self, repo_posix, settings, listing, started_ns, racy, tree):
        self.repo_posix = repo_posix
        self.settings = settings
        self.listing = listing
        self.started_ns = started_ns
        self.racy = racy
        self.tree = tree
        self.cache_timings = {}
        # How long step 1 took in the prepare (reported by the request
        # that uses it: its own step 1 is only the check).
        self.step1_s = None

    @staticmethod
    def identities(files):
        out = {}
        for f in files:
            path = str(f)
            try:
                st = os.stat(path)
                out[path] = (st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino, st.st_dev)
            except OSError:
                out[path] = None
        return out

    @staticmethod
    def racy_contents(listing, started_ns):
        """{path: sha256 of its bytes} of the files changed within
        `PREPARED_RACY_NS` before `started_ns`; None when one cannot be read."""
        import hashlib

        out = {}
        for path, ident in listing.items():
            if ident is None:
                return None
            if max(ident[1], ident[2]) < started_ns - PREPARED_RACY_NS:
                continue
            try:
                digest = hashlib.sha256()
                with open(path, "rb") as f:
                    # In pieces: a workspace file may be of any size.
                    for chunk in iter(lambda: f.read(1 << 20), b""):
                        digest.update(chunk)
                out[path] = digest.hexdigest()
            except OSError:
                return None
        return out

    def still_holds(self, repo_posix, files, parsed_suffixes, file_alone_suffixes):
        """Whether `files` (discovered now) are the prepared tree's;
        `parsed_suffixes`: the suffixes CGC has a parser for (a file of
        another suffix is a bare File node, whatever it holds);
        `file_alone_suffixes`: those whose parse reads the file alone."""
        if repo_posix != self.repo_posix or _settings() != self.settings:
            return False
        listing = self.identities(files)
        if listing != self.listing:
            return False
        for path in listing:
            suffix = os.path.splitext(path)[1]
            if not path.endswith(file_alone_suffixes) and (suffix in parsed_suffixes or path.endswith(".d.ts")):
                return False
        return self.racy_contents(listing, self.started_ns) == self.racy

    @staticmethod
    def verify(prepared, fresh):
        """Verify mode: the prepared outcome must equal step 1 run now. A
        file parsed twice can list its items in another order (tree-sitter
        capture order; CGC's own from-scratch runs differ the same way), so
        lists compare as multisets."""
        for part in ("parsed", "links", "expected", "targets", "csharp_paths", "module_first",
                     "module_defined", "imports_map"):
            a, b = getattr(prepared, part), getattr(fresh, part)
            if part == "parsed":
                a = {k: v[1] for k, v in a.items()}
                b = {k: v[1] for k, v in b.items()}
            if _unordered(a) != _unordered(b):
                raise RuntimeError(f"the prepared tree's {part} differs from step 1 run now")


def _unordered(value):
    """`value` as JSON text in which every list, tuple and set is sorted."""

    def canon(v):
        if isinstance(v, dict):
            return {str(k): canon(x) for k, x in v.items()}
        if isinstance(v, (list, tuple, set, frozenset)):
            return sorted((canon(x) for x in v), key=lambda x: json.dumps(x, sort_keys=True, default=repr))
        return v

    return json.dumps(canon(value), sort_keys=True, default=repr)


def take_prepared(repo_posix, files, parsed_suffixes, file_alone_suffixes, timings):
    """The prepared tree, if the tree is still what it was prepared from
    (see `PreparedTree`); the prepared tree is spent either way."""
    timings["prepared_used"] = 0
    if not _PREPARED:
        return None
    t = time.monotonic()
    prepared = _PREPARED.pop()
    holds = prepared.still_holds(repo_posix, files, parsed_suffixes, file_alone_suffixes)
    timings["prepared_check_s"] = round(time.monotonic() - t, 3)
    timings["prepared_used"] = 1 if holds else 0
    if not holds:
        return None
    timings.update(prepared.cache_timings)
    timings["prepared_step1_s"] = prepared.step1_s
    return prepared.tree


def run_apply(opts, rel_paths, timings, prepare_only=False, baseline=False, progress=None):
    """Steps 1 to 4 for `rel_paths` (with `prepare_only`, step 1 alone,
    kept for the next request: `PreparedTree`); `progress` reports the
    phases to the person (None: nobody watches, see `progress.py`)."""
    from pathlib import Path

    from codegraphcontext.cli import main as cgc_main
    from codegraphcontext.cli.config_manager import get_config_value, resolve_context
    from codegraphcontext.tools.graph_builder import GraphBuilder
    from codegraphcontext.tools.indexing.discovery import discover_files_to_index
    from codegraphcontext.tools.indexing.persistence.writer import sort_import_rows_for_metadata
    from codegraphcontext.tools.indexing.resolution import inheritance as inh

    timings["imports_s"] = round(time.monotonic() - timings.pop("_t0"), 3)
    t = time.monotonic()
    if progress is None:
        progress = progress_reporter(None, quiet=True)

    repo = Path.cwd().resolve()
    repo_posix = repo.as_posix()
    prefix = repo_posix.rstrip("/") + "/"
    cgc_main._load_credentials()

    for key in UNSUPPORTED_SETTINGS:
        if (get_config_value(key) or "false").lower() == "true":
            raise Unsupported(f"{key}=true: `cgc index` runs a pass the incremental driver does not replay")
    for rel in rel_paths:
        if rel.endswith(UNSUPPORTED_SUFFIXES):
            raise Unsupported(f"{rel}: a whole-repository pass of `cgc index` depends on it")

    ctx = resolve_context(None, cwd=repo)

    # ---- 1. Parse and resolve the whole tree, before the database is open.
    class OfflineBuilder(GraphBuilder):
        def create_schema(self, graph_name=None):
            return None

    class NoDatabase:
        def get_driver(self, graph_name=None):
            return None

        def get_backend_type(self):
            return "none"

    def build_tree(files):
        """Step 1 over `files`: the tree's parse results, resolved link
        rows and what the comparison with the stored edges needs."""
        t = time.monotonic()
        progress.phase("parsing", total=len(files))
        cache = open_parse_cache(opts["parse_cache"], repo_posix, cgc_seam(opts).FILE_ALONE_SUFFIXES)
        imports_map = cache.pre_scan(offline, files) if cache else offline.pre_scan_imports(files)
        timings["pre_scan_s"] = round(time.monotonic() - t, 3)
        t = time.monotonic()
        parsed = {}
        for f in sorted(files, key=lambda p: str(p)):
            fd = cache.parse(offline, repo, f) if cache else offline.parse_file(repo, f, False)
            parsed[Path(fd.get("path") or f).resolve().as_posix()] = (f, fd)
            progress.advance()
        all_ok = sorted((fd for (_f, fd) in parsed.values() if "error" not in fd),
                        key=lambda d: str(d.get("path") or ""))
        timings["parse_s"] = round(time.monotonic() - t, 3)
        t = time.monotonic()

        inheritance_batch, csharp_files = inh.build_inheritance_and_csharp_files(all_ok, imports_map)
        implements_batch = inh.build_go_implements_links(all_ok)
        implements_batch.extend(inh.build_haskell_implements_links(all_ok))
        implements_batch.extend(inh.build_elixir_implements_links(all_ok))
        links = {
            "inheritance": inheritance_batch,
            "implements": implements_batch,
            "embeds": inh.build_embeds_links(all_ok),
            "companion_of": inh.build_companion_of_links(all_ok),
            "partial_of": inh.build_partial_of_links(all_ok),
            "part_of": inh.build_part_of_links(all_ok),
            "metaclass": inh.build_metaclass_links(all_ok, imports_map),
            "decorated_by": inh.build_decorated_by_links(all_ok, imports_map),
            "binds": inh.build_binds_links(all_ok, imports_map),
            "previews": inh.build_previews_links(all_ok, imports_map),
        }
        links["calls"] = tuple(resolve_calls(all_ok, imports_map, timings))
        writer_nodes = WriterNodes(fd for (_f, fd) in parsed.values())
        expected = row_signatures(links, writer_nodes)
        targets = row_targets(links)
        csharp_paths = {Path(fd["path"]).resolve().as_posix() for fd in csharp_files}
        timings["resolve_s"] = round(time.monotonic() - t, 3)

        # What a from-scratch index leaves in a shared Module's
        # full_import_name / lang: the first importer in path order writes them
        # (`coalesce(m.x, row.x)` over that file's rows in metadata order), and
        # which of its rows wins depends on the backend (see
        # `module_metadata_row`). Both candidates are kept until the database
        # says which backend it is.
        module_first = {}
        module_defined = set()
        for fd in all_ok:
            for item in fd.get("modules", []) or []:
                module_defined.add(item.get("name"))
            lang = fd.get("lang")
            if lang in {"javascript", "typescript", "tsx"}:
                continue
            rows = []
            for imp in fd.get("imports", []) or []:
                if lang == "python" and imp.get("source"):
                    module_name = imp.get("source")
                else:
                    module_name = imp.get("name") or imp.get("source") or imp.get("full_import_name")
                if not module_name:
                    continue
                rows.append(
                    {
                        "name": module_name,
                        "full_import_name": imp.get("full_import_name") or imp.get("source") or module_name,
                        "imported_name": imp.get("imported_name") or imp.get("name") or module_name,
                        "alias": imp.get("alias"),
                        "line_number": imp.get("line_number") or 0,
                        "lang": imp.get("lang") or lang,
                    }
                )
            first_importer = {}
            for row in sort_import_rows_for_metadata(rows):
                if row["name"] in module_first:
                    continue
                values = (row["full_import_name"], row["lang"])
                first_importer.setdefault(row["name"], {"first_row": values})["last_row"] = values
            module_first.update(first_importer)
        return TreeState(
            parsed=parsed, links=links, expected=expected, writer_nodes=writer_nodes, targets=targets,
            csharp_paths=csharp_paths, module_first=module_first, module_defined=module_defined,
            imports_map=imports_map, cache=cache,
        )

    with RealpathMemo():
        offline = OfflineBuilder(NoDatabase(), None, None)
        parsers = offline.parsers
        files, _ = discover_files_to_index(repo, ctx.cgcignore_path, supported_extensions=set(parsers.keys()))
        files = [f for f in files if f.is_file()]
        if prepare_only:
            _PREPARED.clear()
            started_ns = time.time_ns()
            listing = PreparedTree.identities(files)
            racy = PreparedTree.racy_contents(listing, started_ns)
            step1 = time.monotonic()
            tree = build_tree(files)
            step1 = time.monotonic() - step1
            prepared = None
            if racy is not None and PreparedTree.racy_contents(listing, started_ns) == racy:
                prepared = PreparedTree(repo_posix, _settings(), listing, started_ns, racy, tree)
                prepared.step1_s = round(step1, 3)
                _PREPARED.append(prepared)
            if tree.cache:
                tree.cache.save()
                if prepared is not None:
                    # The parse work of the sync that uses it was done here.
                    prepared.cache_timings = tree.cache.timings()
            return {}
        tree = take_prepared(repo_posix, files, set(parsers.keys()), cgc_seam(opts).FILE_ALONE_SUFFIXES, timings)
        if tree is None:
            tree = build_tree(files)
        elif os.environ.get(VERIFY_PREPARED_ENV) == "1":
            PreparedTree.verify(tree, build_tree(files))
            timings["prepared_verified"] = 1

    changed = []
    for rel in rel_paths:
        p = (repo / rel)
        changed.append((rel, Path(os.path.abspath(p)).as_posix()))
    changed_abs = {a for (_r, a) in changed}

    if tree.cache and not timings.get("prepared_used"):
        tree.cache.save()
        timings.update(tree.cache.timings())

    # ---- 2. Open the database the way the CLI does.
    progress.phase("reading")
    t = lock_t0 = time.monotonic()
    db_manager, graph_builder, _finder, _ctx = open_database(repo, timings)
    timings["db_open_s"] = round(time.monotonic() - t, 3)
    applied = None
    try:
        applied = apply_with_database(
            repo, repo_posix, prefix, graph_builder, tree.parsed, tree.links, (tree.expected, tree.writer_nodes),
            tree.targets, tree.csharp_paths, tree.module_first, tree.module_defined, tree.imports_map, changed,
            changed_abs, timings, baseline=baseline, progress=progress,
        )
        return applied
    finally:
        t = time.monotonic()
        closed = close_database(db_manager)
        memo = stored_edge_memo()
        if memo:
            # What the request wrote is remembered only if all of it was
            # written and the database closed.
            memo.closed(closed and applied is not None)
        timings["db_close_s"] = round(time.monotonic() - t, 3)
        # From opening the database until it is closed: how long the
        # person's own `cgc` is locked out.
        timings["db_held_s"] = round(time.monotonic() - lock_t0, 3)


def close_database(db_manager):
    """Closes the database so that nothing of it stays open: a worker lives
    on after a request, and the person's own `cgc` must find the database
    free. FalkorDB Lite keeps its server process unless told to tear it
    down; other managers take no such argument.

    CGC's `close_driver` ends with a full `gc.collect()`, which walks every
    object the request made (at 2 000 files, about 0.2 s of the request's
    wall time). Those objects are frozen for the close, so that collection
    walks only what the close itself left; `release_memory` collects them
    once the result is out."""
    import gc
    import inspect

    try:
        teardown = "teardown" in inspect.signature(db_manager.close_driver).parameters
    except (TypeError, ValueError):
        teardown = False
    gc.freeze()
    try:
        if teardown:
            db_manager.close_driver(teardown=True)
        else:
            db_manager.close_driver()
    except Exception:  # noqa: BLE001 - closing must not hide the result
        return False
    finally:
        gc.unfreeze()
    return True


def delete_link_edges(write, sources, changed):
    """Deletes every link edge out of `sources` or into `changed`: one
    query over all link types (at 2 000 modules on Kùzu, 0.02 s against
    0.08-0.13 s for one query per type, each a scan of every node table);
    where that query fails — a backend without type alternation, a link
    type without a table — one query per type, skipping a type without a
    table. Each query is one statement, applied whole or not at all, and
    deleting twice deletes nothing more."""
    query = "MATCH (a)-[r:{}]->(b) WHERE a.path IN $paths OR b.path IN $changed DELETE r"
    try:
        write(query.format("|".join(LINK_TYPES)), paths=sources, changed=changed)
        return
    except Exception:  # noqa: BLE001 - the per-type queries below say what fails
        pass
    for rel in LINK_TYPES:
        try:
            write(query.format(rel), paths=sources, changed=changed)
        except Exception as exc:  # noqa: BLE001
            if _is_binder_error(exc):
                continue
            raise


def graph_baseline_differences(gb, backend, read, repo, repo_posix, prefix, parsed, imports_map, stored_files,
                               timings, progress):
    """The absolute paths of the files whose nodes and imports in the graph
    are not what a from-scratch index of the tree writes now, or that are
    in the graph and not in the tree (`graph_baseline.py`)."""
    t = time.monotonic()
    baseline = load_companion(GRAPH_BASELINE_MODULE, "cgc_fresh_graph_baseline")
    reader = KuzuReader.open(gb.db_manager, backend)
    try:
        stored, columns = baseline.stored_contents(reader.read if reader else read, backend, prefix,
                                                   _is_binder_error)
    finally:
        if reader:
            reader.close()
    timings["baseline_read_s"] = round(time.monotonic() - t, 3)
    t = time.monotonic()
    writer_class = type(gb._writer)
    repo_name = repo.name

    def expected_for(path):
        fd = parsed[path][1]

        def write_file(driver):
            writer_class(driver, driver).add_file_to_graph(fd, repo_name, imports_map, repo_path_str=repo_posix)

        return baseline.expected_content(write_file, backend, columns)

    # The files a from-scratch index writes (as the outcome rule below:
    # a file without a parser gets nothing), and whether each parsed.
    present = {p: "error" not in fd for p, (_f, fd) in parsed.items()
               if "error" not in fd or not fd.get("unsupported")}
    # Whose files are whose is not the baseline's to decide where another
    # repository was indexed inside this one, or where a stored file is
    # still on disk but no longer indexed here (ignored since the graph
    # was built?): CGC's reconcile decides (nothing was written yet).
    nested = sorted(r["p"] for r in read(baseline.NESTED_REPOSITORIES_QUERY, ["p"], prefix=prefix)
                    if isinstance(r.get("p"), str) and r["p"].rstrip("/") != repo_posix.rstrip("/"))
    if nested:
        raise Unsupported(f"another repository is indexed inside this one ({nested[0]}): "
                          "CGC's reconcile decides which files are whose")
    kept = baseline.kept_on_disk(present, set(stored_files), os.path.lexists)
    if kept:
        raise Unsupported(f"{len(kept)} file(s) in the graph are on disk but not indexed here now "
                          f"(ignored since the index?), e.g. {kept[0]}: CGC's reconcile decides")
    progress.phase("comparing", total=len(present))
    found = baseline.differing_files(present, set(stored_files), stored, expected_for, compared=progress.advance)
    timings["baseline_compare_s"] = round(time.monotonic() - t, 3)
    timings["baseline_files"] = len(present)
    timings["baseline_differing"] = len(found)
    return found


class BatchedWrites:
    """The changed files' deletes and writes as a few statements for many
    files (`batched_writes.py`): `steps` per chunk of files, planned before
    anything is written."""

    def __init__(self, module, seam, chunks):
        self.module = module
        self.seam = seam
        self.chunks = chunks

    def _run(self, driver, steps):
        with driver.session() as session:
            self.module.execute(steps, session, _is_cgc_binder_error)
        return len(steps)

    def delete(self, driver, paths):
        if paths:
            self._run(driver, self.module.delete_steps(paths, self.seam))

    def write(self, driver, progress):
        for files, steps in self.chunks:
            self._run(driver, steps)
            progress.advance(files)

    def module_metadata(self, driver, rows):
        if rows:
            self._run(driver, self.module.module_metadata_steps(rows))


def _is_cgc_binder_error(exc):
    """CGC's writer's own test (`_is_binder_exception`) for a label that
    does not bind."""
    text = str(exc).lower()
    return "binder" in text or "cannot find a valid label" in text


# Fewer written files than this are written file by file (nothing to
# batch).
BATCHED_MIN_FILES = 2


def plan_batched_writes(gb, backend, parsed, written, rewritten, imports_map, repo_name, repo_posix, timings):
    """A `BatchedWrites` for this request's files, or None where they are
    written file by file: too few, a backend the batched forms were not
    proven on, or a plan `batched_writes.py` refuses (`batched_refused`
    in the timings, the reason on stderr). Nothing is written here."""
    t = time.monotonic()
    timings["batched_files"] = 0
    if len(written) < BATCHED_MIN_FILES:
        # Nothing to batch: not even the modules are loaded (a one-file
        # sync's lock is CGC's per-file path and nothing more).
        return None
    seam = load_companion(CGC_SEAM_MODULE, "cgc_fresh_cgc_seam")
    if backend not in seam.BATCHED_WRITE_BACKENDS:
        return None
    module = load_companion(BATCHED_WRITES_MODULE, "cgc_fresh_batched_writes")
    ok = sorted(p for p in written if "error" not in parsed[p][1])
    baseline = load_companion(GRAPH_BASELINE_MODULE, "cgc_fresh_graph_baseline")
    writer_class = type(gb._writer)
    absent = {p: AbsentContainerQueriesSkipped(parsed[p][1]).absent for p in ok if p in rewritten}
    skipped = [0]

    def skip(path, query):
        labels = absent.get(path)
        match = AbsentContainerQueriesSkipped.QUERY.fullmatch(query) if labels else None
        if match and match.group(1) in labels:
            skipped[0] += 1
            return True
        return False

    chunks = []
    stats = {}
    try:
        for i in range(0, len(ok), module.MAX_FILES):
            files = []
            for path in ok[i:i + module.MAX_FILES]:
                fd = parsed[path][1]

                def write_file(driver, fd=fd):
                    writer_class(driver, driver).add_file_to_graph(fd, repo_name, imports_map,
                                                                   repo_path_str=repo_posix)

                files.append((path, module.record(write_file, baseline, backend)))
            chunks.append((len(files), module.plan(files, baseline, seam, skip=skip, stats=stats)))
    except Exception as exc:  # noqa: BLE001 - then file by file, as CGC writes
        # Timings are numbers (the service reads them so); the reason goes
        # to stderr, which the service logs.
        timings["batched_refused"] = 1
        timings["batched_plan_s"] = round(time.monotonic() - t, 3)
        print(f"cgc-fresh: batched writes refused, file by file: {type(exc).__name__}: {exc}"[:300],
              file=sys.stderr, flush=True)
        return None
    timings["container_queries_skipped"] += skipped[0]
    # As the per-file path counts them (`ParameterRowsBatched`).
    timings["parameter_batches"] = stats.get("parameter_batches", 0)
    timings["batched_files"] = len(ok)
    timings["batched_statements"] = sum(len(steps) for _n, steps in chunks)
    timings["batched_plan_s"] = round(time.monotonic() - t, 3)
    return BatchedWrites(module, seam, chunks)


def apply_with_database(repo, repo_posix, prefix, gb, parsed, links, expected, targets, csharp_paths,
                        module_first, module_defined, imports_map, changed, changed_abs, timings,
                        baseline=False, progress=None):
    """Steps 2 to 4 on the open database (`gb`); `progress` reports the
    phases after `reading`, which the caller started before the open
    (None: nobody watches)."""
    from pathlib import Path

    t = time.monotonic()
    if progress is None:
        progress = progress_reporter(None, quiet=True)
    timings["container_queries_skipped"] = 0
    writer = gb._writer
    driver = gb.driver
    backend = gb.db_manager.get_backend_type()
    metadata_row = module_metadata_row(backend)
    expected, writer_nodes = expected
    for src, sigs in parameter_signatures(links, writer_nodes, backend).items():
        expected[src] = expected.get(src, set()) | sigs

    def read(query, keys, **params):
        with driver.session() as session:
            result = session.run(query, **params)
            return [_record_dict(rec, keys) for rec in result]

    def write(query, **params):
        with driver.session() as session:
            session.run(query, **params)

    if backend not in PROVEN_BACKENDS:
        raise Unsupported(f"the graph is on {backend!r}, where the incremental sync is not proven "
                          f"exact (proven: {', '.join(PROVEN_BACKENDS)})")
    repo_rows = read("MATCH (r:Repository) WHERE r.path = $path RETURN r.path AS p", ["p"], path=repo_posix)
    if not repo_rows:
        raise Unsupported(f"{repo_posix} is not indexed (no Repository node): a full sync is needed")
    # Before any write: CGC's writes match nodes through an index FalkorDB
    # gets wrong (see `falkordb_index.py`).
    repaired = load_companion(FALKORDB_INDEX_MODULE, "cgc_fresh_falkordb_index").repair(driver, backend)
    timings["falkordb_index_repaired"] = len(repaired)

    def read_stored():
        """The repository's stored File paths, and its stored link edges as
        signatures per source file."""
        files = {p.replace("\\", "/") for p in gb.get_repo_file_paths(repo)}
        edges = {}
        reader = KuzuReader.open(gb.db_manager, backend)
        timings["stored_edges_read_direct"] = 1 if reader else 0
        keys = ["src", "sn", "sl", "dn", "dp", "ln", "fcn", "ak", "conf", "tier", "cl", "x", "y", "z"]
        try:
            for rel, shape, query in stored_edge_queries():
                try:
                    records = (reader.read if reader else read)(query, keys, prefix=prefix)
                except Exception as exc:  # noqa: BLE001
                    if _is_binder_error(exc):
                        continue
                    raise
                for rec in records:
                    edges.setdefault(rec.get("src"), set()).add(stored_signature(rel, shape, rec))
        finally:
            if reader:
                reader.close()
        return edges, files

    memo = stored_edge_memo()
    place = memo.place(backend, getattr(gb.db_manager, "db_path", None), prefix) if memo else None
    remembered = memo.recall(place) if memo else None
    if remembered is None or memo.verify:
        stored, stored_files = read_stored()
        if memo:
            memo.check(remembered, (stored, stored_files))
    else:
        stored, stored_files = remembered
    timings["stored_edges_remembered"] = 0 if remembered is None else 1
    timings["stored_edges_by_content"] = 1 if remembered is not None and memo.by_content else 0
    if baseline:
        # Nothing proves what the graph holds: the files it does not hold
        # as a from-scratch index would are the changed ones
        # (`graph_baseline.py`).
        found = graph_baseline_differences(gb, backend, read, repo, repo_posix, prefix, parsed, imports_map,
                                           stored_files, timings, progress)
        for abs_path in sorted(found - changed_abs):
            changed.append((abs_path[len(prefix):], abs_path))
        changed_abs |= found
    # Edges into the changed files from outside the repository prefix are
    # not ours to re-link; edges from inside are in `stored`.
    dependants = {
        src for src, sigs in stored.items()
        if src not in changed_abs and any(sig[4] in changed_abs for sig in sigs)
    }

    outcome = {}
    to_write = []
    to_delete = []
    for rel, abs_path in changed:
        entry = parsed.get(abs_path)
        in_graph = abs_path in stored_files
        if entry is not None:
            fd = entry[1]
            # As `cgc index` does: a parsed file gets its nodes, a generic
            # or unparsable one a bare File node, one without a parser none.
            if "error" not in fd or not fd.get("unsupported"):
                to_write.append(abs_path)
                outcome[rel] = "modified" if in_graph else "added"
                continue
            outcome[rel] = "deleted" if in_graph else "not_indexed"
            if in_graph:
                to_delete.append(abs_path)
            continue
        if in_graph:
            to_delete.append(abs_path)
            outcome[rel] = "deleted"
        else:
            outcome[rel] = "not_indexed"

    written = set(to_write)
    present_ok = {p for p, (_f, fd) in parsed.items() if "error" not in fd}
    relink = set(p for p in written if p in present_ok)
    relink |= {p for p in dependants if p in present_ok}
    relink |= {src for (src, dst) in targets if dst in written and src in present_ok}
    differing = set()
    for path in present_ok:
        if expected.get(path, set()) != stored.get(path, set()):
            differing.add(path)
    relink |= differing
    relink |= {p for p in csharp_paths if p in present_ok}
    timings["read_s"] = round(time.monotonic() - t, 3)
    t = time.monotonic()

    # Old imports of the changed files (their Modules may need new metadata).
    touched_modules = set()
    for rec in read(
        "MATCH (f:File)-[:IMPORTS]->(m:Module) WHERE f.path IN $paths RETURN DISTINCT m.name AS n",
        ["n"],
        paths=sorted(changed_abs),
    ):
        touched_modules.add(rec["n"])

    # ---- 3. Writes.
    unlink = sorted(relink | changed_abs)
    changed_list = sorted(changed_abs)
    rewritten = {p for p in written if p in stored_files}
    deletes = sorted(set(to_delete) | rewritten)
    repo_name = repo.name
    batch = plan_batched_writes(gb, backend, parsed, written, rewritten, imports_map, repo_name, repo_posix,
                                timings)
    progress.phase("writing", total=len(deletes) + len(written))
    delete_link_edges(write, unlink, changed_list)
    break_delete = os.environ.get(BREAK_DELETE_FOR_TESTS_ENV) == "1"
    with PurgeDeferred(writer), ParentDirectoriesKept(rewritten) as directories:
        if batch is not None:
            # The files written again, at once (`batched_writes.py`); the
            # files only deleted keep CGC's delete, directories and all.
            batch.delete(driver, sorted(p for p in rewritten if not break_delete))
            progress.advance(len(rewritten))
            # As `ParentDirectoriesKept` counts them: the deletes that left
            # out the listing of the file's directories.
            directories.kept += 0 if break_delete else len(rewritten)
        for abs_path in deletes:
            if batch is not None and abs_path in rewritten:
                continue
            progress.advance()
            if break_delete and abs_path in rewritten:
                continue
            gb.delete_file_from_graph(abs_path)
    timings["directory_queries_kept"] = directories.kept
    timings["deletes_s"] = round(time.monotonic() - t, 3)
    for abs_path in sorted(written):
        fd = parsed[abs_path][1]
        if "error" not in fd:
            for imp in fd.get("imports", []) or []:
                name = imp.get("source") if fd.get("lang") == "python" and imp.get("source") else (
                    imp.get("name") or imp.get("source") or imp.get("full_import_name"))
                if name:
                    touched_modules.add(name)
    if batch is not None:
        batch.write(driver, progress)
        for abs_path in sorted(written):
            fd = parsed[abs_path][1]
            if "error" in fd:
                gb.add_minimal_file_node(Path(fd["path"]), repo, False)
                progress.advance()
    else:
        with ParameterRowsBatched() as parameters:
            for abs_path in sorted(written):
                f, fd = parsed[abs_path]
                if "error" not in fd:
                    if abs_path in stored_files:
                        with AbsentContainerQueriesSkipped(fd) as absent:
                            gb.add_file_to_graph(fd, repo_name, imports_map, repo_path_str=repo_posix)
                        timings["container_queries_skipped"] += absent.skipped
                    else:
                        gb.add_file_to_graph(fd, repo_name, imports_map, repo_path_str=repo_posix)
                else:
                    gb.add_minimal_file_node(Path(fd["path"]), repo, False)
                progress.advance()
        timings["parameter_batches"] = parameters.batched
    timings["nodes_s"] = round(time.monotonic() - t, 3)
    t = time.monotonic()
    progress.phase("linking")

    def pick(key):
        return [row for row in links[key] if row_source(key, row) in relink]

    inheritance_rows = [row for row in links["inheritance"] if row.get("path") in relink]
    csharp_rows = [fd for (p, (_f, fd)) in parsed.items() if p in csharp_paths and p in relink and "error" not in fd]
    writer.write_inheritance_links(inheritance_rows, csharp_rows, imports_map)
    writer.write_implements_links(pick("implements"))
    writer.write_embeds_links(pick("embeds"))
    writer.write_companion_of_links(pick("companion_of"))
    writer.write_partial_of_links(pick("partial_of"))
    writer.write_part_of_links(pick("part_of"))
    writer.write_metaclass_links(pick("metaclass"))
    writer.write_decorated_by_links(pick("decorated_by"))
    writer.write_binds_links(pick("binds"))
    writer.write_previews_links(pick("previews"))
    call_groups = [
        [row for row in group if isinstance(row, dict) and row.get("caller_file_path") in relink]
        for group in links["calls"]
    ]
    writer.write_function_call_groups(*call_groups)
    if any(p.endswith((".cpp", ".h", ".hpp", ".hh")) for p in changed_abs):
        writer.write_cpp_class_function_links(repo_posix)
    timings["links_s"] = round(time.monotonic() - t, 3)
    t = time.monotonic()

    metadata = []
    for name in sorted(n for n in touched_modules if n and n not in module_defined):
        if name in module_first:
            fin, lang = module_first[name][metadata_row]
            metadata.append({"name": name, "fin": fin, "lang": lang})
    if batch is not None:
        batch.module_metadata(driver, metadata)
    else:
        for row in metadata:
            write(
                "MATCH (m:Module {name: $name}) SET m.full_import_name = $fin, m.lang = $lang",
                **row,
            )
    writer._purge_dangling_pathless_nodes()
    timings["post_s"] = round(time.monotonic() - t, 3)
    t = time.monotonic()
    # ---- 4. The graph holds what was written, under the same lock.
    progress.phase("checking")
    timings["self_checked"] = load_companion(SELF_CHECK_MODULE, "cgc_fresh_self_check").check(
        read, backend, {p: parsed[p][1] for p in written}, [p for p in to_delete if p not in written])
    timings["self_check_s"] = round(time.monotonic() - t, 3)
    if memo:
        memo.remember(
            place, stored, stored_files, unlink=set(unlink), changed=changed_abs, relinked=relink,
            expected=expected, deleted=to_delete, written=written,
        )
    return {
        "paths": outcome,
        "written": len(written),
        "deleted": len(to_delete),
        "relinked": len(relink),
        "dependants": len(dependants),
        "signature_changed": len(differing - written),
        "files": len(parsed),
    }


def main(argv):
    global REAL_STDOUT
    # CGC prints banners on stdout; the result line must be the only thing
    # on the real stdout that this driver promises, so CGC's stdout goes to
    # stderr.
    REAL_STDOUT = os.dup(1)
    os.dup2(2, 1)
    signal.signal(signal.SIGINT, _on_signal)
    signal.signal(signal.SIGTERM, _on_signal)
    if "reconcile" in argv:
        at = argv.index("reconcile")
        command = argv[at + 1 :]
        if command[:1] == ["--"]:
            command = command[1:]
        try:
            opts = parse_argv(argv[:at])
        except Unsupported as exc:
            print(f"cgc-fresh: backend not readied: {exc}", file=sys.stderr)
            opts = None
        os.dup2(REAL_STDOUT, 1)
        return reconcile(opts, command)
    try:
        opts = parse_argv(argv)
    except Unsupported as exc:
        emit({"protocol": PROTOCOL, "ok": False, "error": str(exc), "unsupported": True})
        return EXIT_USAGE
    if opts["db_path"]:
        os.environ["CGC_RUNTIME_DB_PATH"] = opts["db_path"]
    if opts["db"]:
        os.environ["CGC_RUNTIME_DB_TYPE"] = opts["db"]
    os.environ.setdefault("ENABLE_AUTO_WATCH", "false")
    if opts["serve"]:
        return serve(opts)
    result, code = run_request(opts, opts["paths"], baseline=opts["baseline"])
    emit(result)
    return code


def reconcile(opts, command):
    """`reconcile -- CGC ARGS...`: readies the backend for CGC's own writes
    (on FalkorDB, repairs its range index: `falkordb_index.py`; nothing on
    any other backend, whose database is not even opened), then becomes
    `CGC ARGS...` with the environment this process was given. Whatever
    goes wrong before the exec (root options it does not know, included)
    is said on stderr and CGC runs anyway: the repair is an addition to
    the reconcile, never a condition of it."""
    if not command:
        print("cgc-fresh: reconcile wants the cgc command to run after `--`", file=sys.stderr)
        return EXIT_USAGE
    environment = dict(os.environ)
    saved_stdout = os.dup(1)
    os.dup2(2, 1)  # CGC's banners must not reach the reconcile's stdout
    try:
        if opts is None:
            raise Unsupported("its root options")
        if opts["db_path"]:
            os.environ["CGC_RUNTIME_DB_PATH"] = opts["db_path"]
        if opts["db"]:
            os.environ["CGC_RUNTIME_DB_TYPE"] = opts["db"]
        labels, intended = ready_backend()
        if labels:
            print(f"cgc-fresh: repaired FalkorDB's index of {', '.join(labels)}", file=sys.stderr)
        if intended and not environment.get("CGC_RUNTIME_DB_TYPE") and not environment.get("DEFAULT_DATABASE"):
            # The backend CGC would choose anyway, named: a run-time fall
            # back from a named backend is said on stderr (at WARNING),
            # where the service looks for it; an implicit one is not.
            environment["DEFAULT_DATABASE"] = intended
    except Interrupted as exc:  # the sync was stopped: nothing to run
        return 128 + exc.signum
    except (Exception, SystemExit) as exc:  # noqa: BLE001 - said, and CGC runs anyway
        print(f"cgc-fresh: backend not readied: {type(exc).__name__}: {exc}", file=sys.stderr)
    try:
        # FalkorDB Lite given time to start in `cgc` too (`backend_pin.py`).
        command = backend_pin().patient_command(command, sys.executable)
    except Exception as exc:  # noqa: BLE001 - said, and CGC runs as it is
        print(f"cgc-fresh: cgc runs without the start-up patience: {type(exc).__name__}: {exc}", file=sys.stderr)
    sys.stderr.flush()
    os.dup2(saved_stdout, 1)
    os.close(saved_stdout)
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    try:
        os.execve(command[0], command, environment)
    except OSError as exc:
        print(f"cgc-fresh: cannot run {command[0]}: {exc}", file=sys.stderr)
        return 127


def configure_cgc():
    """Loads CGC's credentials and this workspace's context into the
    environment the way the CLI does (`_initialize_services`, CGC
    0.6.13); returns the context."""
    import codegraphcontext.core as cgc_core
    from codegraphcontext.cli import main as cgc_main
    from codegraphcontext.cli.config_manager import resolve_context

    # With no backend named, CGC 0.6.13's `_load_credentials` asks the
    # factory which backend it would use, and the factory *starts*
    # FalkorDB Lite's server for that (5 s, then a silent fall-back to
    # KùzuDB). Two processes doing it at once (a worker's probe beside a
    # `cgc list`) both fell back, and the listing, on an empty Kùzu, said
    # the workspace was not indexed. Loading the configuration opens
    # nothing: the factory is refused for its duration, and CGC prints its
    # best guess instead (its own `except` path).
    factory = cgc_core.get_database_manager

    def no_database(*_args, **_kwargs):
        raise RuntimeError("cgc-fresh: no database is opened while the configuration is loaded")

    cgc_core.get_database_manager = no_database
    try:
        cgc_main._load_credentials()
    finally:
        cgc_core.get_database_manager = factory
    ctx = resolve_context(None, cwd=os.getcwd())
    if ctx.database and not os.getenv("CGC_RUNTIME_DB_TYPE") and not os.getenv("DEFAULT_DATABASE"):
        os.environ["DEFAULT_DATABASE"] = ctx.database
    return ctx


def configured_manager():
    """CGC's database manager for this workspace, chosen the way the CLI
    chooses it, with FalkorDB Lite given time to start (the factory starts
    it: see `backend_pin.py`)."""
    from codegraphcontext.core import get_database_manager

    ctx = configure_cgc()
    backend_pin().be_patient()
    return get_database_manager(db_path=os.getenv("CGC_RUNTIME_DB_PATH") or ctx.db_path)


def probe_backend():
    """(backend, why not): the backend CGC is configured for here, and a
    reason the driver refuses it (None when it is one of
    `PROVEN_BACKENDS`). Nothing is started or opened."""
    try:
        configure_cgc()
        backend = backend_pin().intended_backend()
    except (Exception, SystemExit) as exc:  # noqa: BLE001 - then it is not proven
        return None, f"cannot tell which backend CGC would use: {type(exc).__name__}: {exc}"
    if backend is None:
        return None, "CodeGraphContext finds no database backend here"
    if backend not in PROVEN_BACKENDS:
        return backend, (f"the graph is on {backend!r}, where the incremental sync is not proven exact "
                         f"(proven: {', '.join(PROVEN_BACKENDS)})")
    return backend, None


def ready_backend():
    """Opens the database only where its engine is FalkorDB's and repairs
    its index; returns the labels repaired and the backend CGC is
    configured for (`backend_pin.py`)."""
    pin = backend_pin()
    configure_cgc()
    intended = pin.intended_backend()
    index = load_companion(FALKORDB_INDEX_MODULE, "cgc_fresh_falkordb_index")
    if intended not in index.FALKORDB_BACKENDS:
        return [], intended
    manager = configured_manager()
    try:
        backend = pin.check(manager, intended)
        return index.repair(manager.get_driver(), backend), intended
    finally:
        close_database(manager)


def run_request(opts, paths, baseline=False, progress=None):
    """One probe or one apply of `paths` — with `baseline`, of `paths` and
    of every file the graph does not hold as a from-scratch index would
    (`graph_baseline.py`): (the result line's object, the exit code it
    stands for). An apply reports its phases to `progress` (None: nobody
    watches; see `progress.py`)."""
    started = time.monotonic()
    result = {"protocol": PROTOCOL, "ok": False}
    timings = {"_t0": started}
    try:
        if opts["probe"]:
            missing, _ = probe_api()
            result.update(mode="probe", cgc_version=cgc_version(), missing=missing, ok=not missing)
            if missing:
                return result, EXIT_UNSUPPORTED
            gate = cgc_gate(opts)
            if not gate.allowed:
                result.update(ok=False, error=gate.note)
                return result, EXIT_UNSUPPORTED
            if gate.note:
                result.update(unproven=gate.note)
            backend, why = probe_backend()
            result.update(backend=backend)
            if why:
                result.update(ok=False, error=why)
                return result, EXIT_UNSUPPORTED
            return result, EXIT_OK
        if paths is None:
            result.update(error="nothing to do: give --probe, apply -- PATH... or serve")
            return result, EXIT_USAGE
        missing, _ = probe_api()
        if missing:
            raise Unsupported("CodeGraphContext lacks what the recipe needs: " + ", ".join(missing))
        gate = cgc_gate(opts)
        if not gate.allowed:
            raise Unsupported(gate.note)
        rel_paths = sorted(set(p for p in paths if p))
        for rel in rel_paths:
            if not isinstance(rel, str) or os.path.isabs(rel) or rel.split("/")[0] == "..":
                raise Unsupported(f"not a workspace-relative path: {rel!r}")
        with RequestMemos(), CollectorPaused():
            applied = run_apply(opts, rel_paths, timings, baseline=baseline, progress=progress)
        timings["total_s"] = round(time.monotonic() - started, 3)
        result.update(mode="apply", ok=True, requested=len(rel_paths), timings=timings, **bounded_paths(applied))
        if baseline:
            result.update(baseline=True)
        return result, EXIT_OK
    except Unsupported as exc:
        result.update(error=str(exc), unsupported=True, timings=_clean(timings))
        return result, EXIT_UNSUPPORTED
    except Interrupted as exc:
        result.update(error=str(exc), interrupted=True, timings=_clean(timings))
        return result, 128 + exc.signum
    except SystemExit as exc:  # CGC's typer.Exit on a database error
        result.update(error=f"CodeGraphContext exited with {exc.code}", timings=_clean(timings))
        return result, EXIT_FAILED
    except Exception as exc:  # noqa: BLE001 - reported, never silent
        result.update(error=f"{type(exc).__name__}: {exc}", timings=_clean(timings))
        return result, EXIT_FAILED


# Serve mode: one request per stdin line, at most this long.
MAX_REQUEST_BYTES = 8 * 1024 * 1024


def serve(opts):
    """The long-lived worker: CGC stays imported between syncs, and the
    database is open only while a request is applied (or, for MCP calls
    that ask for it, until their hold passes: `mcp_tools.CallDatabase`).
    One request per stdin line, `{"serial": N, "paths": [REL_PATH, ...]}`
    (with `"baseline": true`, `--baseline`'s request: `graph_baseline.py`);
    one result line per request, as `apply` prints it plus `serial` and
    `exit` (the exit code `apply` would have ended with). A line
    `{"prepare": true}` asks for step 1 ahead of the next request and is
    not answered (see `PreparedTree`); `{"serial": N, "probe": true}` is
    the one-shot `--probe`, answered like a request (the service's warm-up
    at a session's start). Python's cyclic collector runs only
    between requests (`release_memory`). Ends at end of input, after
    `--idle-exit` seconds without a request, on SIGINT/SIGTERM (128+n),
    and after any request that did not end with 0 or 3 (its state, or the
    graph's, is in doubt: the next sync starts a fresh process).

    While it applies a request (or a prepare), and before its result line,
    the worker writes progress lines on the same stdout (`progress.py`):

        CGC_FRESH_PROGRESS {"done": D, "phase": P, "serial": N, "total": T}

    (`json.dumps(..., sort_keys=True)`): `serial` the request's, null for a
    prepare (the sync queued behind it waits on its parse); `phase` one of
    `parsing` (total: the files parsed), `reading`, `comparing` (a
    baseline's; total: the files compared), `writing` (total: the files
    deleted plus the files written), `linking`, `checking`; `done`/`total`
    only where the phase counts files (a request that uses the prepared
    tree starts at `reading`). A phase's first line is written at once,
    its counts at most every 0.25 s, and its last count before the next
    phase or the result. A probe, an MCP call or a line that is no
    request writes none, nor does the one-shot `apply`. A progress line
    that cannot be written is dropped; the sync goes on.

    The work a request leaves for later waits for a pause without a
    request (`worker_pauses.py`: the memo's digest, the collection, the
    held database's close); a held database is closed before any other
    request and before the worker ends."""
    import gc

    SERVING.append(True)
    # The collector runs only between requests (`release_memory`): paused
    # for a request alone (`CollectorPaused`), it collected as soon as the
    # request ended — before its answer was out.
    gc.disable()
    tools = load_companion(MCP_TOOLS_MODULE, "cgc_fresh_mcp_tools")
    pauses = load_companion(WORKER_PAUSES_MODULE, "cgc_fresh_worker_pauses").WorkerPauses(opts["idle_exit"])
    database = tools.CallDatabase(open_database, close_database, stored_edge_memo)
    try:
        return serve_lines(opts, tools, pauses, database)
    except Interrupted as exc:
        return 128 + exc.signum
    finally:
        try:
            database.release()
        except (Exception, SystemExit, Interrupted) as exc:  # noqa: BLE001 - the worker ends either way
            print(f"cgc-fresh: the held database did not close: {type(exc).__name__}: {exc}", file=sys.stderr)


def serve_lines(opts, tools, pauses, database):
    """`serve`'s loop (see there); `Interrupted` passes through."""
    import select

    pending = b""
    while True:
        while b"\n" not in pending:
            action, pause = pauses.next(time.monotonic())
            ready, _w, _x = select.select([0], [], [], pause)
            if ready:
                chunk = os.read(0, 65536)
                if not chunk:
                    return EXIT_OK
                pending += chunk
                if len(pending) > MAX_REQUEST_BYTES:
                    emit({"protocol": PROTOCOL, "ok": False, "exit": EXIT_USAGE,
                          "error": f"a request longer than {MAX_REQUEST_BYTES} bytes"})
                    return EXIT_USAGE
            elif action == "settle":
                settle_memo()
                pauses.settled()
            elif action == "collect":
                release_memory()
                pauses.collected()
            elif action == "release":
                database.release()
                pauses.released()
            else:
                return EXIT_OK
        line, pending = pending.split(b"\n", 1)
        serial = None
        try:
            request = json.loads(line)
            if tools.is_request(request):
                # An MCP tool list, call or release (`mcp_tools.py`),
                # answered between syncs.
                tools.serve_request(request, database, lambda data: os.write(REAL_STDOUT, data), Interrupted)
                collect = pauses.after_call(time.monotonic(), tools.hold_seconds(request), database.holding)
                if collect == "full":
                    release_memory()
                elif collect == "young":
                    collect_young()
                continue
            if isinstance(request, dict) and request.get("probe") is True:
                # The service's warm-up at a session's start: the one-shot
                # `--probe`, answered with the request's serial (no
                # database is opened).
                cgc_gate(opts)
                result, code = run_request(dict(opts, probe=True), None)
                result.update(serial=request.get("serial"), exit=code)
                emit(result)
                continue
            if isinstance(request, dict) and request.get("prepare") is True:
                database.release()
                # No request has a serial yet, but the sync queued behind
                # the prepare waits on its parse.
                progress = progress_reporter(None)
                run_prepare(opts, progress=progress)
                progress.end()
                # The request it was for is usually waiting already: it
                # goes first, and the collection follows in a pause.
                pauses.after_prepare()
                continue
            serial = request.get("serial")
            paths = request["paths"]
            if not isinstance(paths, list):
                raise ValueError("paths is not a list")
            baseline = request.get("baseline", False)
            if not isinstance(baseline, bool):
                raise ValueError("baseline is not true or false")
        except (ValueError, KeyError, AttributeError, TypeError) as exc:
            emit({"protocol": PROTOCOL, "ok": False, "exit": EXIT_USAGE, "serial": serial,
                  "error": f"not a request: {exc}"})
            continue
        database.release()
        progress = progress_reporter(serial)
        result, code = run_request(opts, paths, baseline=baseline, progress=progress)
        progress.end()
        result.update(serial=serial, exit=code)
        emit(result)
        if code not in (EXIT_OK, EXIT_UNSUPPORTED):
            return code
        pauses.after_sync()


def settle_memo():
    """Off the answer's path: what the last close left, for the next
    request's comparison (see `stored_edges.py`)."""
    memo = stored_edge_memo()
    if memo:
        memo.settle()


def run_prepare(opts, progress=None):
    """`serve`'s `{"prepare": true}`: step 1 for the tree as it is now,
    kept for the next request (see `PreparedTree`). No answer line: a
    prepare that fails only leaves nothing prepared, and the next request
    does step 1 itself. Its `parsing` goes to `progress` (the sync it is
    for usually waits on it)."""
    started = time.monotonic()
    timings = {"_t0": started}
    try:
        missing, _ = probe_api()
        if missing or not cgc_gate(opts).allowed:
            return
        with RequestMemos(), CollectorPaused():
            run_apply(opts, [], timings, prepare_only=True, progress=progress)
        memo = stored_edge_memo()
        if memo:
            # The comparison of the database's contents, when another
            # process rewrote its header, is made now rather than by the
            # request it prepares for.
            memo.left_as_it_was()
        print(f"cgc-fresh: prepared in {time.monotonic() - started:.3f} s: {json.dumps(_clean(timings))}",
              file=sys.stderr)
    except Interrupted:
        _PREPARED.clear()
        raise
    except (Exception, SystemExit) as exc:  # noqa: BLE001 - nothing prepared, said why
        _PREPARED.clear()
        print(f"cgc-fresh: nothing prepared: {type(exc).__name__}: {exc}", file=sys.stderr)


def release_memory():
    """Between requests the worker keeps only what is imported: a request's
    parse results are garbage once it answered, but the C heap keeps their
    pages (measured at 2 000 modules: 462 MB resident while idle, 206 MB
    after a collection and `malloc_trim`)."""
    import gc

    gc.collect()
    try:
        import ctypes

        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        pass  # not glibc: the pages stay until reused


def collect_young():
    """In a burst of MCP calls: the garbage of the calls since the last
    collection (the young generations), without walking what the worker
    keeps (see `worker_pauses.py`)."""
    import gc

    gc.collect(1)


def _clean(timings):
    return {k: v for k, v in timings.items() if not k.startswith("_")}


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
