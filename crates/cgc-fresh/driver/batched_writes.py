"""cgc-fresh batched writes: the changed files' nodes written with few
statements for many files, instead of CGC's dozen statements per file.

CodeGraphContext's `add_file_to_graph` writes one file with about a dozen
statements and `delete_file_from_graph` deletes one with three; on Kùzu
each statement costs milliseconds whatever its size, so a branch switch of
300 files held the database about 25 s for its nodes alone. Here the
writer still decides what is written: it runs for each file against a
recording driver that executes nothing (`graph_baseline.RecordingDriver`,
the seam the graph baseline compares through), and its statements are
grouped across files — the statements of one shape (the same text once
the file's path is a row field) become one `UNWIND $batch AS row …`
statement whose rows are every file's rows, each row carrying its file's
path. The combined text is CGC's own with the file's path read from the
row; the forms that are not a plain substitution are in `cgc_seam.py`
(file, containment, imports), and the combined containment and method
statements have their `MATCH`es on the row's fields staged behind a
`WITH` (`stage_row_matches`). The statements then run through CGC's own
session, which translates them for its backend as it does CGC's.

**Only where provably the same graph** (otherwise `plan` raises `Refused`
and the driver writes file by file as CGC does):

- every file is of a language the batched forms were proven with
  (`cgc_seam.BATCHED_WRITE_LANGUAGES`: Python), every statement of every
  file of a shape this module knows (`graph_baseline.classify`), and a
  node statement's label keyed by position (name, path, line,
  occurrence: only this file makes such a node, and its row names the
  file's path);
- the order: a file's statements run in CGC's order, so the shapes must
  have one order consistent with every file's sequence (a topological
  order of "comes before in some file"); a cycle, or a shape twice in one
  file (but directories), is refused. Statements of different files
  commute: each touches its own file's nodes, but for the shared nodes
  below;
- shared nodes: a Directory statement is run once per distinct statement
  (its MERGE of path and name, and its CONTAINS edge, give the same graph
  a second time; nothing else writes Directories), in first-appearance
  order (a parent before its child); a Module merged by an import is
  merged once per name, with the first non-null `lang` and
  `full_import_name` in write order — what the per-row `coalesce(m.x,
  row.x)` leaves where each row sees the rows before it (Kùzu) — and the
  IMPORTS edges once per edge key, the last row's values (the last SET
  wins);
- the rows of one combined statement have the same keys and the same
  value types per key as each file had alone (files are grouped by that
  signature), so CGC's translation (`SET n += row` expanded from the
  keys, a `None` line made -1) and Kùzu's typing of the batch are those of
  each file's own statement;
- Parameter rows go as one batch only where no Parameter key (argument
  name, file, line) repeats (the Kùzu mis-binding CGC's per-row path
  guards against needs a repeated key: `ParameterRowsBatched`); a file
  with a repeated key goes through CGC's per-row path;
- a container statement that fails to bind on a label is skipped for
  all, as CGC skips it per file.

Deleting many files whose directories are kept (they are written again)
is two statements over `$paths` (`delete_steps`): a file's delete removes
only its own File, the nodes it contains and their Parameters, after its
CONTAINS edges to shared Modules.

The driver's own reset of the shared Modules' metadata after the writes
is one statement too (`module_metadata_steps`: one row per Module).

Which backends: `cgc_seam.BATCHED_WRITE_BACKENDS` (where the end-to-end
tests proved it). Rows are chunked (`MAX_ROWS` per statement, `MAX_FILES`
files per plan) so no statement grows without bound.

Loaded by the incremental driver from the file next to it (the service
writes it there as `incremental-batched-writes.py`). Pure but for
`record` (runs CGC's writer, given) and `execute` (a session, given).
"""

import re

# At most this many rows per statement, and files per plan.
MAX_ROWS = 2000
MAX_FILES = 500

_PARAM = re.compile(r"\$(\w+)")


class Step:
    """One statement to run: `query` with `params`; `skip_fallback` runs an
    UNWIND that merges nodes as one batch (its keys are distinct);
    `binder_ok` skips it where the label does not bind (as CGC does)."""

    def __init__(self, query, params, skip_fallback=False, binder_ok=False):
        self.query = query
        self.params = params
        self.skip_fallback = skip_fallback
        self.binder_ok = binder_ok

    def __repr__(self):
        return (f"Step({' '.join(self.query.split())[:60]!r}, rows={len(self.params.get('batch') or [])}, "
                f"skip_fallback={self.skip_fallback}, binder_ok={self.binder_ok})")


class Refused(Exception):
    """Why a batch is not provably the same as writing file by file."""


def record(write_file, baseline, backend):
    """The statements CGC's writer issues for one file: `write_file(driver)`
    runs it on a `baseline.RecordingDriver`."""
    driver = baseline.RecordingDriver(backend)
    write_file(driver)
    return list(driver.statements)


def _type_name(value):
    if isinstance(value, (list, tuple)):
        return "list[" + ",".join(sorted({_type_name(v) for v in value})) + "]"
    if isinstance(value, dict):
        return "dict[" + ",".join(sorted(f"{k}:{_type_name(v)}" for k, v in value.items())) + "]"
    return type(value).__name__


def rows_signature(rows):
    """The keys of `rows` and each key's value types (a missing key counts
    as its own type): rows of equal signatures batch as each did alone."""
    keys = set()
    for row in rows:
        keys.update(row)
    return tuple(sorted((k, tuple(sorted({_type_name(row[k]) if k in row else "<absent>" for row in rows})))
                        for k in keys))


def _only_batch(query):
    return set(_PARAM.findall(query)) == {"batch"}


def _rows(params, file_path):
    batch = params.get("batch")
    if not isinstance(batch, list) or not all(isinstance(r, dict) for r in batch):
        raise Refused("a batch that is not a list of rows")
    if params.get("file_path") != file_path or set(params) != {"batch", "file_path"}:
        raise Refused("a statement with other parameters than its batch and file")
    return batch


def _with_path(rows, seam, file_path):
    out = []
    for row in rows:
        if seam.FILE_PATH_KEY in row:
            raise Refused(f"a row with a key {seam.FILE_PATH_KEY!r} already")
        out.append({**row, seam.FILE_PATH_KEY: file_path})
    return out


_ROW_MATCH = re.compile(r"MATCH \((\w+):(`?\w+`?) \{([^{}]*)\}\)")
_ROW_FIELD = re.compile(r"row\.(\w+)")


def stage_row_matches(query):
    """`query` (`UNWIND $batch AS row` and node `MATCH`es on the row's
    fields, then the rest) with each of those `MATCH`es behind a `WITH`
    that names the fields it reads — the same statement otherwise, word
    for word. Kùzu 0.11.3 plans a `MATCH` on `row.x` straight after the
    `UNWIND` as a cross product of the batch with the node table, and one
    on a `WITH`'s names as a hash join (`scripts/kuzu-link-write-cost.py`;
    a combined containment statement of 2 000 rows over 8 000 functions:
    about 0.45 s against 0.05). `query` itself where it is not of that
    shape (a property not read from the row, no such `MATCH`)."""
    head = re.match(r"(\s*UNWIND \$batch AS row)\s+", query)
    if head is None:
        return query
    out = [head.group(1)]
    bound = []
    pos = head.end()
    while (match := _ROW_MATCH.match(query, pos)) is not None:
        var, label, props = match.groups()
        reads, keys = [], []
        for pair in props.split(","):
            key, _colon, value = (part.strip() for part in pair.partition(":"))
            field = _ROW_FIELD.fullmatch(value)
            if not key or field is None:
                return query
            reads.append(f"row.{field.group(1)} AS {var}_{key}")
            keys.append(f"{key}: {var}_{key}")
        out.append("WITH " + ", ".join([*bound, "row", *reads]))
        out.append(f"MATCH ({var}:{label} {{{', '.join(keys)}}})")
        bound.append(var)
        pos = match.end()
        pos += len(query[pos:]) - len(query[pos:].lstrip())
    if not bound:
        return query
    return "\n".join(out) + "\n" + query[pos:]


# Slot kinds, and how a file's rows of each become combined rows.
_ROW_PATH_KINDS = ("nodes", "nodes_contained")
_KEYED_KINDS = ("parameters", "enum_members", "methods", "nested")
_BINDER_OK = ("enum_members", "methods")


def _slot(name, match, query, params, file_path, baseline, seam):
    """(slot key, kind, rows or the statement itself) of one statement."""
    if name == "file":
        if set(params) != set(seam.FILE_ROW_KEYS) or params.get("path") != file_path:
            raise Refused("a File statement of other parameters")
        if params.get("language") not in seam.BATCHED_WRITE_LANGUAGES:
            raise Refused(f"a file in {params.get('language')!r}, not a language the batched writes were proven on")
        return ("file",), "file", [{k: params[k] for k in seam.FILE_ROW_KEYS}]
    if name == "directory":
        return ("directory",), "directory", (query, params)
    if name == "file_contained":
        if set(params) != {"parent_path", "path"} or params.get("path") != file_path:
            raise Refused("a containment statement of other parameters")
        label = match.group(1)
        return ("file_contained", label), "file_contained", [dict(params)]
    if name in _ROW_PATH_KINDS:
        label = match.group(1)
        if label not in baseline.POSITION_KEYED_LABELS:
            raise Refused(f"nodes of label {label}, not keyed by position")
        rows = _rows(params, file_path)
        if any(row.get("path") != file_path for row in rows):
            raise Refused("a node row of another path than its file")
        combined = query.replace("$file_path", "row.path")
        if not _only_batch(combined):
            raise Refused("a node statement of other parameters")
        if name == "nodes_contained":
            combined = stage_row_matches(combined)
        return (name, combined), name, rows
    if name in _KEYED_KINDS:
        rows = _rows(params, file_path)
        combined = query.replace("$file_path", f"row.{seam.FILE_PATH_KEY}")
        if not _only_batch(combined):
            raise Refused(f"a {name} statement of other parameters")
        if name == "methods":
            combined = stage_row_matches(combined)
        return (name, combined), name, _with_path(rows, seam, file_path)
    if name == "py_imports":
        rows = _rows(params, file_path)
        return (name,), name, _with_path(rows, seam, file_path)
    raise Refused(f"a statement of shape {name}")


def _order(sequences):
    """One order of the slots consistent with every sequence (each a
    file's slots in its order), ties broken by first appearance; None on
    a cycle."""
    first = {}
    after = {}
    for seq in sequences:
        for i, slot in enumerate(seq):
            first.setdefault(slot, len(first))
            after.setdefault(slot, set())
            if i:
                after[seq[i - 1]].add(slot)
    indegree = {slot: 0 for slot in first}
    for nexts in after.values():
        for n in nexts:
            indegree[n] += 1
    ready = sorted((s for s, d in indegree.items() if d == 0), key=first.get)
    out = []
    while ready:
        slot = ready.pop(0)
        out.append(slot)
        for n in after[slot]:
            indegree[n] -= 1
            if indegree[n] == 0:
                ready.append(n)
        ready.sort(key=first.get)
    return out if len(out) == len(first) else None


def _chunks(rows, size=None):
    size = size or MAX_ROWS
    return [rows[i:i + size] for i in range(0, len(rows), size)] or []


def _param_key_distinct(rows, seam):
    keys = set()
    for row in rows:
        key = (repr(row.get("arg_name")), repr(row.get(seam.FILE_PATH_KEY)), repr(row.get("line_number")))
        if key in keys:
            return False
        keys.add(key)
    return True


def _import_steps(rows, seam):
    """A slot of Python import rows (every file's, in write order) as the
    Module statement and the edge statement."""
    name_key, edge_keys = "name", ("name", "line_number", "imported_name")
    metadata = ("lang", "full_import_name")
    modules = {}
    edges = {}
    for row in rows:
        name = row.get(name_key)
        module = modules.setdefault(name, {name_key: name, **{k: None for k in metadata}})
        for k in metadata:
            if module[k] is None and row.get(k) is not None:
                module[k] = row[k]
        key = (row[seam.FILE_PATH_KEY],) + tuple(repr(row.get(k)) for k in edge_keys)
        edges.pop(key, None)
        edges[key] = row
    steps = []
    for group in _by_row_signature(list(modules.values())):
        steps += [Step(seam.PY_IMPORT_MODULES_BATCHED, {"batch": chunk}) for chunk in _chunks(group)]
    for group in _by_row_signature(list(edges.values())):
        steps += [Step(seam.PY_IMPORT_EDGES_BATCHED, {"batch": chunk}) for chunk in _chunks(group)]
    return steps


def _by_row_signature(rows):
    groups = {}
    for row in rows:
        groups.setdefault(rows_signature([row]), []).append(row)
    return list(groups.values())


def plan(files, baseline, seam, skip=None, stats=None):
    """The steps that write `files` — [(path, the writer's statements for
    it)], in write order — as writing them one by one in that order
    would. `skip(path, query)` leaves a statement out (one that matches
    nothing). Raises `Refused` where that is not provably so. `stats`
    (a dict) counts in "parameter_batches" the files of two Parameter rows
    or more that go in a batch (as `ParameterRowsBatched` counts them)."""
    if len(files) > MAX_FILES:
        raise Refused(f"more than {MAX_FILES} files in one plan")
    per_file = []
    for path, statements in files:
        slots = []
        seen = set()
        for query, params in statements:
            if skip is not None and skip(path, query):
                continue
            name, match = baseline.classify(query)
            if name is None:
                raise Refused(f"a statement of unknown shape: {' '.join(str(query).split())[:80]}")
            slot, kind, payload = _slot(name, match, query, params, path, baseline, seam)
            if slots and slots[-1][0] == slot and kind == "directory":
                slots[-1][2].append(payload)
                continue
            if slot in seen:
                raise Refused(f"shape {slot[0]} twice in one file")
            seen.add(slot)
            slots.append((slot, kind, [payload] if kind == "directory" else payload))
        per_file.append(slots)
    order = _order([[slot for (slot, _k, _p) in slots] for slots in per_file])
    if order is None:
        raise Refused("the files' statements have no one order")
    steps = []
    for slot in order:
        entries = [(kind, payload) for slots in per_file for (s, kind, payload) in slots if s == slot]
        kind = entries[0][0]
        if kind == "directory":
            done = set()
            for _kind, statements in entries:
                for query, params in statements:
                    key = (query, baseline.canonical(params))
                    if key not in done:
                        done.add(key)
                        steps.append(Step(query, dict(params)))
            continue
        if kind == "py_imports":
            steps += _import_steps([row for (_k, rows) in entries for row in rows], seam)
            continue
        if kind == "file":
            query = seam.FILE_BATCHED
        elif kind == "file_contained":
            query = seam.FILE_CONTAINED_BATCHED.format(label=slot[1])
        else:
            query = slot[1]
        groups = {}
        for _kind, rows in entries:
            distinct = _param_key_distinct(rows, seam) if kind == "parameters" else False
            if distinct and len(rows) >= 2 and stats is not None:
                stats["parameter_batches"] = stats.get("parameter_batches", 0) + 1
            groups.setdefault((rows_signature(rows), distinct), []).extend(rows)
        for (_sig, distinct), rows in groups.items():
            for chunk in _chunks(rows):
                steps.append(Step(query, {"batch": chunk}, skip_fallback=distinct,
                                  binder_ok=kind in _BINDER_OK))
    return steps


def delete_steps(paths, seam):
    """The statements that delete `paths` whose directories are kept and
    whose purge is deferred (see the module doc)."""
    steps = []
    for chunk in _chunks(sorted(paths), MAX_FILES):
        steps.append(Step(seam.DELETE_MODULE_CONTAINS_BATCHED, {"paths": chunk}))
        steps.append(Step(seam.DELETE_FILES_BATCHED, {"paths": chunk}))
    return steps


# The driver's reset of shared Modules' metadata (`module_first` in
# `apply.py`), one row per Module: each row matches its own node
# (names are distinct), so one statement sets what one per Module sets.
MODULE_METADATA_BATCHED = (
    "UNWIND $batch AS row MATCH (m:Module {name: row.name}) "
    "SET m.full_import_name = row.fin, m.lang = row.lang"
)


def module_metadata_steps(rows):
    """The statements that set each Module's metadata: `rows` are
    {name, fin, lang}, one per distinct name (else `Refused`)."""
    if len({repr(row.get("name")) for row in rows}) != len(rows):
        raise Refused("a Module's metadata twice")
    steps = []
    for group in _by_row_signature(rows):
        steps += [Step(MODULE_METADATA_BATCHED, {"batch": chunk}) for chunk in _chunks(group)]
    return steps


_ABSENT = object()


def execute(steps, session, is_binder_error):
    """Runs `steps` in order on one of CGC's sessions."""
    for step in steps:
        held = session.__dict__.get("_skip_unwind_fallback", _ABSENT) if step.skip_fallback else None
        if step.skip_fallback:
            session._skip_unwind_fallback = True
        try:
            session.run(step.query, **step.params)
        except Exception as exc:  # noqa: BLE001 - as CGC's writer skips a label that does not bind
            if not (step.binder_ok and is_binder_error(exc)):
                raise
        finally:
            if step.skip_fallback:
                if held is _ABSENT:
                    session.__dict__.pop("_skip_unwind_fallback", None)
                else:
                    session._skip_unwind_fallback = held
