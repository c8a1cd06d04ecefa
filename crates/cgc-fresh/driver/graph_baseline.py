"""cgc-fresh graph baseline: which files of the tree the graph does not hold
as a from-scratch index would, found by comparing the graph with the parse.

When nothing proves what the graph holds — no manifest (the first sync
after the person's own `cgc index .`), a manifest that does not match, a
shell command whose changes are not known file by file — the worker asks
the graph instead of re-indexing the repository: for every file it
compares what CGC's writer would write for the file's parse result now
with what the graph stores for that path, and the sync then applies the
ordinary incremental path to exactly the files that differ (added,
deleted, changed). The link edges of every file are compared already by
the incremental path itself (its stored-edge signatures); this module
covers what the per-file write makes.

**What is compared, per file** (CodeGraphContext 0.6.13's
`GraphWriter.add_file_to_graph`, read from its source):

- the `File` node's properties;
- every node of a position-keyed label (`name`, `path`, `line_number`,
  `occurrence_index`: Function, Class, Variable, …) with the file's
  path, all of its properties;
- the file's `IMPORTS` edges (module name and the edge's properties).

What the writer would write is not modelled: the writer itself runs, for
the file, against a recording driver that executes nothing
(`RecordingDriver`), and the rows of its statements are what the graph
must hold. The statements it recognises are listed in `STATEMENTS`; a
statement of any other shape (a newer CGC, a language whose writes this
module does not compare, such as a name-keyed `Module` item or an
`INCLUDES` edge) makes that file count as differing — so the comparison
can only cost a file's rewrite, never hide a difference. Edges the writer
derives from compared properties (a File's or a Class's `CONTAINS`,
`HAS_PARAMETER` from a Function's `args`, Directory nodes from the path)
are not read back.

**Kùzu's writes**, as CGC 0.6.13's embedded session makes them: a `SET n
+= row` sets the row's keys that are columns of the label's table (its
`SCHEMA_MAP`), and the node's `uid` is a key derived from the merge keys.
So, on Kùzu's dialect, a stored node is compared over the columns its
label's nodes come back with (`uid` aside); elsewhere (FalkorDB) over the
union of both sides' keys. A value that is None counts as absent.

**Not the baseline's to decide** (the request answers "unsupported",
nothing is written, and CGC's reconcile runs): another repository indexed
inside this one (`NESTED_REPOSITORIES_QUERY`), and a stored file that is
still on disk but not a file a from-scratch index of the tree writes now
(`kept_on_disk`: ignored since the graph was built, or indexed some other
way) — deleting either is not this sync's call.

Loaded by the incremental driver from the file next to it (the service
writes it there as `incremental-graph-baseline.py`). Pure but for
`expected_content`, which runs CGC's writer (given) on a parse result.
"""

import json
import re

# Embedded backends with Kùzu's query language (as `self_check.py`).
KUZU_DIALECT = ("kuzudb", "ladybugdb")
# Backends on which one JS/TS import statement that names several symbols
# on one line leaves an `IMPORTS` edge holding a name that is not a
# function of the file: CGC's rows `MERGE (f)-[r:IMPORTS {line_number}]`
# collapse into one edge, and which row's `imported_name` and `alias` it
# keeps depends on whether the `Module` node existed before the statement
# (measured on FalkorDB's server: created by it, the (n-3)th of n >= 5
# rows; existing, the 2nd) — on the order the files were written. Such an
# edge matches when it holds any one of its rows' names.
COLLAPSED_IMPORT_BACKENDS = ("falkordb", "falkordb-remote")

# The labels `add_file_to_graph` keys by position (CGC 0.6.13: its
# `item_mappings` less `_NAME_ONLY_MERGE_LABELS`), and File.
POSITION_KEYED_LABELS = (
    "Function", "Class", "Trait", "Variable", "Interface", "Macro", "Struct", "Enum", "Union",
    "Record", "Property", "Mixin", "Extension", "Object", "EnumMember",
)
NODE_LABELS = ("File",) + POSITION_KEYED_LABELS

# Properties a store derives from others (Kùzu's primary key).
DERIVED_PROPERTIES = ("uid",)

_WS = re.compile(r"\s+")


def _shape(query):
    return _WS.sub(" ", query).strip() if isinstance(query, str) else ""


# The statements of `add_file_to_graph` (CGC 0.6.13), whitespace folded:
# (name, pattern). "file", "nodes", "py_imports" and "js_imports" carry
# what is compared; the others write what compared properties derive.
STATEMENTS = (
    ("file", re.compile(
        r"MERGE \(f:File \{path: \$path\}\) SET f\.name = \$name, f\.relative_path = \$relative_path, "
        r"f\.is_dependency = \$is_dependency, f\.language = \$language")),
    ("directory", re.compile(
        r"MATCH \(p:`(Repository|Directory)` \{path: \$parent_path\}\) MERGE \(d:Directory \{path: \$current_path\}\) "
        r"SET d\.name = \$part MERGE \(p\)-\[:CONTAINS\]->\(d\)")),
    ("file_contained", re.compile(
        r"MATCH \(p:`(Repository|Directory)` \{path: \$parent_path\}\) MATCH \(f:File \{path: \$path\}\) "
        r"MERGE \(p\)-\[:CONTAINS\]->\(f\)")),
    ("nodes", re.compile(
        r"UNWIND \$batch AS row MERGE \(n:(\w+) \{name: row\.name, path: \$file_path, "
        r"line_number: row\.line_number, occurrence_index: row\.occurrence_index\}\) SET n \+= row")),
    ("nodes_contained", re.compile(
        r"UNWIND \$batch AS row MATCH \(f:File \{path: \$file_path\}\) MATCH \(n:(\w+) \{name: row\.name, "
        r"path: \$file_path, line_number: row\.line_number, occurrence_index: row\.occurrence_index\}\) "
        r"MERGE \(f\)-\[:CONTAINS\]->\(n\)")),
    ("parameters", re.compile(
        r"UNWIND \$batch AS row MATCH \(fn:Function \{name: row\.func_name, path: \$file_path, "
        r"line_number: row\.line_number, occurrence_index: row\.occurrence_index\}\) MERGE \(p:Parameter .*")),
    ("enum_members", re.compile(
        r"UNWIND \$batch AS row MATCH \(c:(Class|Enum) \{name: row\.class_name, path: \$file_path\}\) "
        r"MATCH \(m:EnumMember \{name: row\.member_name, path: \$file_path\}\) .*MERGE \(c\)-\[:CONTAINS\]->\(m\)")),
    ("methods", re.compile(
        r"UNWIND \$batch AS row MATCH \(c:(\w+) \{name: row\.class_name, path: \$file_path\}\) "
        r"MATCH \(fn:Function \{name: row\.func_name, path: \$file_path, line_number: row\.func_line\}\) "
        r".*MERGE \(c\)-\[:CONTAINS\]->\(fn\)")),
    ("nested", re.compile(
        r"UNWIND \$batch AS row MATCH \(outer:Function \{name: row\.outer, path: \$file_path\}\) "
        r".*MERGE \(outer\)-\[:CONTAINS\]->\(inner\)")),
    ("js_imports", re.compile(
        r"UNWIND \$batch AS row MATCH \(f:File \{path: \$file_path\}\) MERGE \(m:Module \{name: row\.module_name\}\) "
        r"MERGE \(f\)-\[r:IMPORTS \{line_number: row\.line_number\}\]->\(m\) "
        r"SET r\.imported_name = row\.imported_name, r\.alias = row\.alias, r\.lang = row\.lang")),
    ("py_imports", re.compile(
        r"UNWIND \$batch AS row MATCH \(f:File \{path: \$file_path\}\) MERGE \(m:Module \{name: row\.name\}\) "
        r"SET m\.lang = coalesce\(m\.lang, row\.lang\), m\.full_import_name = coalesce\(m\.full_import_name, "
        r"row\.full_import_name\) MERGE \(f\)-\[r:IMPORTS \{line_number: row\.line_number, "
        r"imported_name: row\.imported_name\}\]->\(m\) SET r\.alias = coalesce\(row\.alias, \"\"\), "
        r"r\.full_import_name = row\.full_import_name, r\.lang = row\.lang")),
)


def classify(query):
    """(statement name, the pattern's match) of one of the writer's
    statements, or (None, None) for a shape this module does not know."""
    shape = _shape(query)
    for name, pattern in STATEMENTS:
        match = pattern.fullmatch(shape)
        if match:
            return name, match
    return None, None


def canonical(value):
    """A value as a comparable, hashable string: tuples as lists, an
    integral float as an int, None as absent (the caller drops it)."""
    def norm(v):
        if isinstance(v, (list, tuple)):
            return [norm(x) for x in v]
        if isinstance(v, dict):
            return {str(k): norm(x) for k, x in v.items()}
        if isinstance(v, float) and v.is_integer():
            return int(v)
        return v
    return json.dumps(norm(value), sort_keys=True, default=str)


class FileContent:
    """What the graph holds (or must hold) for one file: its nodes as
    (label, canonical properties) and its IMPORTS edges, each a sorted
    tuple; `unknown` names why it cannot be compared (then it differs)."""

    def __init__(self, nodes=(), imports=(), unknown=None, either=None):
        self.nodes = tuple(sorted(nodes))
        self.imports = tuple(sorted(imports))
        self.unknown = unknown
        # {(module, line_number): {(imported_name, alias), ...}}: the
        # collapsed import edges (`COLLAPSED_IMPORT_BACKENDS`) whose entry
        # in `imports` holds neither, and which may hold any of these.
        self.either = either or {}

    def same_as(self, other):
        return (self.unknown is None and other.unknown is None
                and self.nodes == other.nodes and self.imports == self._loosened(other.imports))

    def _loosened(self, imports):
        """`imports` (another content's) with each collapsed edge's name
        and alias left out when they are one of its rows'."""
        if not self.either:
            return imports
        out = []
        for entry in imports:
            values = json.loads(entry)
            rows = self.either.get((values[0], values[1]))
            if rows is not None and (values[2], values[3]) in rows:
                entry = nameless_import_entry(values)
            out.append(entry)
        return tuple(sorted(out))

    def __repr__(self):
        return f"FileContent(nodes={self.nodes!r}, imports={self.imports!r}, unknown={self.unknown!r})"


def _present(props):
    return {k: v for k, v in props.items() if v is not None and k not in DERIVED_PROPERTIES
            and not str(k).startswith("_")}


def node_entry(label, props, columns=None):
    """One node as compared: on Kùzu's dialect over `columns` (the
    stored table's, known from the stored side), elsewhere its non-None
    properties."""
    present = _present(props)
    if columns is not None:
        present = {k: v for k, v in present.items() if k in columns}
    return (label, canonical(present))


def import_entry(module, line_number, imported_name, alias, full_import_name, lang):
    return canonical([module, line_number, imported_name, alias, full_import_name, lang])


class RecordingSession:
    """A session that records `run(query, **parameters)` and executes
    nothing (every answer is empty)."""

    def __init__(self, statements):
        self._statements = statements

    def __enter__(self):
        return self

    def __exit__(self, *_exc):
        return False

    def run(self, query, **parameters):
        self._statements.append((query, parameters))
        return RecordedResult()


class RecordedResult:
    def __iter__(self):
        return iter(())

    def single(self):
        return None

    def consume(self):
        return None

    def data(self):
        return []


class RecordingDriver:
    """What CGC's writer is given in place of a database driver: sessions
    that record (see `expected_content`)."""

    def __init__(self, backend):
        self.backend = backend
        self.statements = []

    def session(self, **_kwargs):
        return RecordingSession(self.statements)

    def get_backend_type(self):
        return self.backend


def expected_rows(statements):
    """From the recorded statements of one file's write: ({label: [rows]},
    the File statement's parameters, [import edge entries], why not
    comparable or None)."""
    nodes, file_params, imports = {}, None, {}
    for query, params in statements:
        name, match = classify(query)
        if name is None:
            return nodes, file_params, [], f"a statement this comparison does not know: {_shape(query)[:120]}"
        if name == "file":
            file_params = params
        elif name == "nodes":
            label = match.group(1)
            if label not in POSITION_KEYED_LABELS:
                return nodes, file_params, [], f"nodes of label {label}"
            nodes.setdefault(label, []).append(list(params.get("batch") or []))
        elif name == "py_imports":
            for row in params.get("batch") or []:
                # MERGE on (module, line_number, imported_name): the last
                # row's SET wins.
                key = (row.get("name"), row.get("line_number"), row.get("imported_name"))
                alias = row.get("alias")
                imports[key] = (row.get("name"), row.get("line_number"), row.get("imported_name"),
                                "" if alias is None else alias, row.get("full_import_name"), row.get("lang"))
        elif name == "js_imports":
            for row in params.get("batch") or []:
                key = (row.get("module_name"), row.get("line_number"), "js")
                imports[key] = (row.get("module_name"), row.get("line_number"), row.get("imported_name"),
                                row.get("alias"), None, row.get("lang"))
    entries = [import_entry(*values) for values in imports.values()]
    return nodes, file_params, entries, None


def collapsed_imports(statements):
    """{(module, line_number): {(imported_name, alias), ...}} of the JS/TS
    import rows in `statements` that share their edge with another row."""
    rows = {}
    for query, params in statements:
        name, _match = classify(query)
        if name != "js_imports":
            continue
        for row in params.get("batch") or []:
            key = (row.get("module_name"), canonical_number(row.get("line_number")))
            rows.setdefault(key, set()).add((row.get("imported_name"), row.get("alias")))
    return {key: names for key, names in rows.items() if len(names) > 1}


def nameless_import_entry(values):
    """An import entry's decoded `values` as an entry without its
    `imported_name` and `alias` (a collapsed edge's, whose kept name is
    not a function of the file: `COLLAPSED_IMPORT_BACKENDS`)."""
    return import_entry(values[0], values[1], None, None, values[4], values[5])


def canonical_number(value):
    """A line number as the canonical form compares it."""
    return int(value) if isinstance(value, float) and value.is_integer() else value


def expected_content(write_file, backend, columns):
    """The content the graph must hold for one file: `write_file(driver)`
    runs CGC's writer for it on `driver` (a `RecordingDriver`);
    `columns` is {label: set of stored columns} on Kùzu's dialect (None
    elsewhere)."""
    driver = RecordingDriver(backend)
    try:
        write_file(driver)
    except Exception as exc:  # noqa: BLE001 - then it differs, and is rewritten
        return FileContent(unknown=f"the writer failed on a recording driver: {type(exc).__name__}: {exc}")
    batches, file_params, imports, unknown = expected_rows(driver.statements)
    if unknown:
        return FileContent(unknown=unknown)
    either = collapsed_imports(driver.statements) if backend in COLLAPSED_IMPORT_BACKENDS else {}
    if either:
        loose = []
        for entry in imports:
            values = json.loads(entry)
            if (values[0], values[1]) in either:
                entry = nameless_import_entry(values)
            loose.append(entry)
        imports = loose
    if file_params is None:
        return FileContent(unknown="no File statement")
    kuzu = backend in KUZU_DIALECT
    entries = []
    file_props = {k: v for k, v in file_params.items()}
    entries.append(node_entry("File", file_props, _columns(columns, "File") if kuzu else None))
    for label, label_batches in batches.items():
        for batch in label_batches:
            for row in batch:
                entries.append(node_entry(label, row, _columns(columns, label) if kuzu else None))
    return FileContent(nodes=entries, imports=imports, either=either)


def _columns(columns, label):
    return (columns or {}).get(label, set())


def node_queries():
    """(label, query) per label: every node of the label under `$prefix`."""
    return [(label, f"MATCH (n:`{label}`) WHERE n.path STARTS WITH $prefix RETURN n AS n") for label in NODE_LABELS]


IMPORTS_QUERY = (
    "MATCH (f:File)-[r:IMPORTS]->(m:Module) WHERE f.path STARTS WITH $prefix "
    "RETURN f.path AS p, m.name AS m, r.line_number AS ln, r.imported_name AS inm, "
    "r.alias AS al, r.full_import_name AS fin, r.lang AS lg"
)
IMPORTS_KEYS = ["p", "m", "ln", "inm", "al", "fin", "lg"]


def node_properties(value):
    """A stored node's properties, whatever the backend's client gives."""
    if isinstance(value, dict):
        return dict(value)
    props = getattr(value, "properties", None)
    if isinstance(props, dict):
        return dict(props)
    return None


def stored_contents(read, backend, prefix, is_missing_label):
    """({path: FileContent}, {label: columns}) of what the graph stores
    under `prefix`. `read(query, keys, **params)` runs a read;
    `is_missing_label(exc)` says an error means the label has no table."""
    kuzu = backend in KUZU_DIALECT
    nodes, columns = {}, {}
    for label, query in node_queries():
        try:
            rows = read(query, ["n"], prefix=prefix)
        except Exception as exc:  # noqa: BLE001
            if is_missing_label(exc):
                continue
            raise
        for row in rows:
            props = node_properties(row.get("n"))
            if props is None or not isinstance(props.get("path"), str):
                continue
            if kuzu:
                columns.setdefault(label, set()).update(
                    k for k in props if not str(k).startswith("_") and k not in DERIVED_PROPERTIES)
            nodes.setdefault(props["path"], []).append((label, props))
    imports = {}
    for row in read(IMPORTS_QUERY, IMPORTS_KEYS, prefix=prefix):
        if isinstance(row.get("p"), str):
            imports.setdefault(row["p"], []).append(
                import_entry(row.get("m"), row.get("ln"), row.get("inm"), row.get("al"), row.get("fin"), row.get("lg")))
    out = {}
    for path in set(nodes) | set(imports):
        entries = [node_entry(label, props, _columns(columns, label) if kuzu else None)
                   for label, props in nodes.get(path, [])]
        out[path] = FileContent(nodes=entries, imports=imports.get(path, []))
    return out, (columns if kuzu else None)


NESTED_REPOSITORIES_QUERY = (
    "MATCH (r:Repository) WHERE r.path STARTS WITH $prefix RETURN r.path AS p"
)


def kept_on_disk(present, stored_files, exists):
    """The stored files that are not files a from-scratch index of the
    tree writes but are still on disk (`exists(path)`): ignored since the
    graph was built, or indexed some other way. Deleting them is not the
    baseline's to decide (CGC's reconcile does)."""
    return sorted(p for p in stored_files if p not in present and exists(p))


def differing_files(present, stored_files, stored, expected_for, compared=None):
    """The absolute paths whose graph content is not what a from-scratch
    index writes: `present` {path: whether the parse succeeded} (the
    files a from-scratch index would write), `stored_files` the File
    paths in the graph, `stored` {path: FileContent},
    `expected_for(path)` the expected FileContent. A file that did not
    parse (CGC writes a bare File node) always counts. `compared()` is
    called once per file of `present` (the worker's progress lines)."""
    out = set(p for p in stored_files if p not in present)
    for path, parsed_ok in present.items():
        if compared is not None:
            compared()
        if path not in stored_files or not parsed_ok:
            out.add(path)
            continue
        if not expected_for(path).same_as(stored.get(path, FileContent())):
            out.add(path)
    return out
