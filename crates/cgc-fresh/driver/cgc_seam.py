"""The incremental driver's seam with CodeGraphContext: which versions of
CGC the driver was proven against, and what it does with any other.

The driver patches CGC's private functions and recognises the Cypher CGC
writes (`session_patches.py`). `cgc_setup.probe_api` only checks that
the names it uses exist; a release that keeps the names but changes what they do would pass
it and could write a wrong graph — a graph the service would then call
fresh. So the driver patches nothing on a CGC it was not proven against
(an exactness trial equal to a from-scratch index, end to end, on every
proven backend) unless the person opts in (`cgc.allowUnprovenVersion`,
passed to the driver as `ALLOW_UNPROVEN_FLAG`): without the opt-in the
probe, every apply and every prepare answer "unsupported", and the
service takes CGC's own reconcile, with a notice that says why.

Proven against (each added by a trial of the driver's own test suite, the
real-CLI exactness tests on Kùzu, FalkorDB Lite and a FalkorDB server):
- 0.6.13 (the version the test suite pins: `tests/support/python/requirements-cgc*.txt`).

Pure: the installed version is an input (`cgc_setup.cgc_version`).

Also here, below the gate: which files' parse results may be kept
between syncs (`FILE_ALONE_SUFFIXES`), and the text of CGC 0.6.13's
per-file writes batched across files, which `batched_writes.py` runs
(CGC-specific, like the versions above); and what the recipe needs of
CGC and reads of its graph: the private API it calls (`REQUIRED_API`),
the link relationships, the settings and files it does not replay, the
shapes of the writer's nodes and call groups, and the queries of the
stored link edges. Each was read from CGC 0.6.13.
"""

PROVEN_CGC_VERSIONS = ("0.6.13",)

# The driver's root option that carries the person's opt-in.
ALLOW_UNPROVEN_FLAG = "--allow-unproven-cgc"

# The configuration key the person sets to opt in (named in the notices).
ALLOW_UNPROVEN_KEY = "cgc.allowUnprovenVersion"


class VersionGate:
    """What the driver may do with the installed CGC.

    `allowed`: whether it may patch and write; `note`: what to tell the
    person (why not, or that it runs on an unproven version at their
    request), None on a proven version."""

    def __init__(self, allowed, note):
        self.allowed = allowed
        self.note = note

    def __repr__(self):
        return f"VersionGate(allowed={self.allowed!r}, note={self.note!r})"


def version_gate(installed, allow_unproven, proven=PROVEN_CGC_VERSIONS):
    """The gate for CGC version `installed` (a string, or None when it
    cannot be read) with the person's opt-in `allow_unproven`."""
    if installed is not None and installed in proven:
        return VersionGate(True, None)
    named = f"CodeGraphContext {installed}" if installed else "a CodeGraphContext whose version cannot be read"
    proven_list = ", ".join(proven)
    if allow_unproven:
        return VersionGate(True, (
            f"the incremental sync runs on {named}, which it was not proven exact against "
            f"(proven: {proven_list}), because {ALLOW_UNPROVEN_KEY} is set"))
    return VersionGate(False, (
        f"{named} is not a version the incremental sync was proven exact against "
        f"(proven: {proven_list}), so it patches nothing and CGC's own reconcile runs instead; "
        f"set {ALLOW_UNPROVEN_KEY} = true to run the incremental sync anyway"))


# ---------------------------------------------------------------------------
# Files whose parse reads nothing but the file itself, and whose import
# pre-scan is a plain accumulation over files, so that a per-file result can
# be kept (`parse_cache.py`) and a tree parsed ahead reused when no file
# changed (`PreparedTree` in `prepared_tree.py`). Read in CGC 0.6.13:
# - `tools/graph_builder.py`, `GraphBuilder.parse_file`: every parser but
#   Solidity's (which reads the repository's remappings) is called with the
#   path, `is_dependency` and the `INDEX_SOURCE` setting alone (the
#   settings are in the cache's key); `.d.ts` files go to the TypeScript
#   parser;
# - `tools/languages/{python,javascript,typescript,typescriptjsx,go,rust}.py`:
#   each `parse` opens `path` and nothing else, and keeps nothing between
#   files (its `index_source` is set again by every call); each
#   `pre_scan_*` loops over its files and appends each file's names to a
#   map of lists (TypeScript's skips a path already listed for a name), so
#   the scans of one file at a time, concatenated in file order, are the
#   scan of all of them;
# - `tools/indexing/pre_scan.py`, `pre_scan_for_imports`: the scans are
#   merged by suffix in the order the suffixes are first seen (`.d.ts` its
#   own), each name's paths without repeats — `parse_cache.pre_scan` merges
#   the same way.
# Not here: notebooks (`.ipynb`, converted before parsing), and the other
# languages, whose parsers were not read (Lua's module search and
# Gradle's settings read other files).
# Go (`.go`) only with its query captures in document order
# (`session_patches.GoCapturesInOrder`, in force for every parse the driver
# makes): CGC 0.6.13's `GoTreeSitterParser._find_calls` (`go.py`, lines
# 554-598) keeps only the first call it meets of each name on a line, and
# py-tree-sitter 0.25 gives a capture's nodes in the order of a set hashed
# by memory address, so which of two such calls a parse kept — and the
# `full_name` that resolution and the CALLS relationship's `full_call_name`
# take — changed from parse to parse (go-jsonnet's `ast/location.go`,
# `lr.Begin.String()` and `lr.End.String()` on one line: the prepared tree
# and step 1 run again differed under `CGC_FRESH_VERIFY_PREPARED` in about
# one seeded trial in five).
FILE_ALONE_SUFFIXES = (
    ".py",
    ".js", ".jsx", ".mjs", ".cjs",
    ".ts", ".mts", ".cts", ".d.ts", ".tsx",
    ".go",
    ".rs",
)

# ---------------------------------------------------------------------------
# CGC 0.6.13's per-file writes, batched across files (`batched_writes.py`).
#
# `GraphWriter.add_file_to_graph` writes one file with about a dozen
# statements; `delete_file_from_graph` deletes one with three. What follows
# is the same statements' text written once for many files: each row
# carries the file's path (the statement's `$file_path`/`$path`), so one
# statement writes the rows of every file. Only the shapes named here are
# batched; the recognising of CGC's statements is `graph_baseline.py`'s
# (`STATEMENTS`, `classify`).

# The key each batched row carries its file's path under (no row of the
# writer's statements below has it).
FILE_PATH_KEY = "file_path"

# `MERGE (f:File {path: $path}) SET …`, one row per file.
FILE_BATCHED = """
                UNWIND $batch AS row
                MERGE (f:File {path: row.path})
                SET f.name = row.name, f.relative_path = row.relative_path, f.is_dependency = row.is_dependency,
                    f.language = row.language
            """
FILE_ROW_KEYS = ("path", "name", "relative_path", "is_dependency", "language")

# `MATCH (p:`<label>` {path: $parent_path}) MATCH (f:File {path: $path})
# MERGE (p)-[:CONTAINS]->(f)`, one row per file.
FILE_CONTAINED_BATCHED = """
                UNWIND $batch AS row
                MATCH (p:`{label}` {{path: row.parent_path}})
                MATCH (f:File {{path: row.path}})
                MERGE (p)-[:CONTAINS]->(f)
            """

# A file's Python import rows (`py_imports` in `graph_baseline.py`), as two
# statements: the shared Modules first, one row per name (its first
# non-null lang and full_import_name in write order: what the per-row
# `coalesce` leaves when each row sees the rows before it, as on Kùzu),
# then the IMPORTS edges, one row per edge key (the last row's SET wins).
PY_IMPORT_MODULES_BATCHED = """
                    UNWIND $batch AS row
                    MERGE (m:Module {name: row.name})
                    SET m.lang = coalesce(m.lang, row.lang),
                        m.full_import_name = coalesce(m.full_import_name, row.full_import_name)
                """
PY_IMPORT_EDGES_BATCHED = """
                    UNWIND $batch AS row
                    MATCH (f:File {path: row.file_path})
                    MATCH (m:Module {name: row.name})
                    MERGE (f)-[r:IMPORTS {line_number: row.line_number, imported_name: row.imported_name}]->(m)
                    SET r.alias = coalesce(row.alias, ""),
                        r.full_import_name = row.full_import_name,
                        r.lang = row.lang
                """
# `delete_file_from_graph` for many files whose directories are kept (the
# file is written again: `ParentDirectoriesKept`) and whose purge is
# deferred (`PurgeDeferred`): its second and third statements, over
# `$paths`.
DELETE_MODULE_CONTAINS_BATCHED = """
                MATCH (f:File)-[r:CONTAINS]->(:Module)
                WHERE f.path IN $paths
                DELETE r
                """
DELETE_FILES_BATCHED = """
                MATCH (f:File)
                WHERE f.path IN $paths
                OPTIONAL MATCH (f)-[:CONTAINS]->(element)
                OPTIONAL MATCH (element)-[:HAS_PARAMETER]->(p:Parameter)
                DETACH DELETE f, element, p
            """

# The backends whose sessions the batched forms were proven on (equal to
# a from-scratch index end to end), and the languages of the files they
# were proven with (the end-to-end fixtures are Python). Elsewhere, or
# with a file of another language among them, the files are written one
# by one, as CGC does.
BATCHED_WRITE_BACKENDS = ("kuzudb",)
BATCHED_WRITE_LANGUAGES = ("python",)


# ---------------------------------------------------------------------------
# What the recipe needs of CGC 0.6.13 and of the graph its writer leaves.

# Link relationships: created by the post-pass over all parsed files, never
# by the per-file node write. A changed file's nodes take these with them
# (`GraphWriter`'s link writers, 0.6.13).
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


# What the recipe needs from CodeGraphContext (its private API, read in
# 0.6.13: the modules and functions `cgc_setup.probe_api` checks exist).
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

# `GraphBuilder`'s methods the driver calls or patches (0.6.13).
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
# `GraphWriter`'s methods the driver calls or patches (0.6.13).
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

# Settings under which `cgc index` runs passes this driver does not replay
# (`cgc index` of 0.6.13).
UNSUPPORTED_SETTINGS = ("SCIP_INDEXER", "ENABLE_VECTOR_RESOLVE", "ENABLE_INHERIT_RESOLVE")
# Changed files whose effect lives in whole-repository passes of `cgc index`
# (Spring, ORM, MyBatis, Maven, Gradle) that this driver does not replay
# (0.6.13).
UNSUPPORTED_SUFFIXES = (".java", ".xml", ".gradle", ".kts")


# The parsed-file lists CGC's writer turns into named nodes carrying the
# file's path (`GraphWriter.add_file_to_graph`'s item mappings, 0.6.13), and
# the label each gets.
NODE_ITEM_LABELS = (
    ("functions", "Function"), ("classes", "Class"), ("traits", "Trait"), ("variables", "Variable"),
    ("interfaces", "Interface"), ("macros", "Macro"), ("structs", "Struct"), ("enums", "Enum"),
    ("unions", "Union"), ("records", "Record"), ("properties", "Property"), ("mixins", "Mixin"),
    ("extensions", "Extension"), ("modules", "Module"), ("objects", "Object"),
    ("enum_members", "EnumMember"),
)

# The node properties CGC's writer compares a call's `called_context` with
# (`_called_context_clause` for the Function label, 0.6.13).
CONTEXT_PROPERTIES = ("context", "class_context", "module_context")

# Target label of each call group, in `build_function_call_groups` order
# (`GraphWriter.write_function_call_groups`' `queries`, 0.6.13).
CALL_GROUP_TARGETS = (
    "Function", "Class", "Interface", "Object",  # from a Function
    "Function", "Class", "Interface", "Object",  # from a File
    "Parameter", "File",  # from a Function
)


# Per stored relationship type: the query returning its edges' properties as
# `signatures.stored_signature` compares them with a row's: the properties
# `GraphWriter`'s link writers set on each type (0.6.13).
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
