"""The signatures the driver compares: what CGC's writer stores for each
link row the tree resolves to (`row_signatures`), and what a stored link
edge read back from the graph is (`stored_signature`), as comparable
tuples. A file whose resolved rows' signatures differ from its stored
edges' is re-linked (`database_apply.py`).

`WriterNodes` models which rows CGC's writer would store at all (both
endpoints must MATCH). The CGC-specific shapes (the item labels, the
context properties, the call groups' targets, the stored-edge queries)
are in `cgc_seam.py`, read from CGC 0.6.13.

Pure: no CodeGraphContext, no database, no state.
"""

import json
import os

import cgc_fresh_cgc_seam as cgc_seam


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
            for key, label in cgc_seam.NODE_ITEM_LABELS:
                if label not in self.nodes:
                    continue
                items = fd.get(key)
                if not isinstance(items, list):
                    continue
                for item in items:
                    if not isinstance(item, dict) or not isinstance(item.get("name"), str):
                        continue
                    contexts = set()
                    for prop in cgc_seam.CONTEXT_PROPERTIES:
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
            target = cgc_seam.CALL_GROUP_TARGETS[index] if index < len(cgc_seam.CALL_GROUP_TARGETS) else None
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
    parameter = cgc_seam.CALL_GROUP_TARGETS.index("Parameter")
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
