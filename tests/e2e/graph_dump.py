"""Dumps a CodeGraphContext graph as canonical JSON (for the graph-equality
tests): every node and every relationship as a sorted list, with the noise
of from-scratch indexing removed.

    python graph_dump.py kuzu DB_PATH > dump.json
    python graph_dump.py ladybug DB_PATH > dump.json
    python graph_dump.py falkordb HOST PORT GRAPH > dump.json
    python graph_dump.py falkordb-lite DB_FILE GRAPH > dump.json

Run it with the interpreter of the `cgc` that built the graph: it reads the
graph through the same client library (`kuzu`, `ladybug`, `falkordb` for a
FalkorDB server, `redislite` — falkordblite — for FalkorDB Lite's saved
file, which it loads into an embedded server of its own; no other process
may have that file open).

Canonical form:
- a node is (label, its properties); the Repository's `indexed_at` and
  `commit_hash` are dropped (a timestamp, and absent outside git);
- a relationship is (type, key of its source, key of its target, its
  properties), a node's key being its label, path, name, line number,
  occurrence index and (for Parameter) function line;
- a node that occurs more than once (same label and properties) is listed
  once per occurrence, numbered (`#2`, `#3`, …), so a duplicate left
  behind is a difference (relationships are compared as a set: CGC's
  resolution noise below can merge two calls into one edge);
- CGC's run-to-run noise: tree-sitter captures are not sorted, so a call
  to a function whose name occurs more than once in one file may resolve to
  either of them — the target's line and occurrence are dropped for such
  CALLS edges; METACLASS line numbers are dropped.

Both backends are read into one shape — a node is a dict of its properties
plus `_label` and `_id`, a relationship a dict of its properties plus
`_label` — so that one canonicalisation serves both.
"""

import json
import sys

NOISY_NODE_PROPS = {"Repository": {"indexed_at", "commit_hash"}}


def kuzu_graph(db_path, module="kuzu"):
    """(nodes, relationships as (source, rel, target)) of a Kùzu database
    (or a LadybugDB one: `module="ladybug"`, the same API)."""
    import importlib

    kuzu = importlib.import_module(module)
    db = kuzu.Database(db_path, read_only=True)
    conn = kuzu.Connection(db)
    nodes = []
    result = conn.execute("MATCH (n) RETURN n")
    while result.has_next():
        (node,) = result.get_next()
        node = internal_keys_lowered(node)
        node["_id"] = (node["_id"]["table"], node["_id"]["offset"])
        nodes.append(node)
    # One relationship table at a time: a scan of every table at once
    # (`MATCH (a)-[r]->(b)`) was seen returning another edge's `args` list
    # for some CALLS edges of a large graph after deletions (Kùzu 0.11.x,
    # measured on pip's graph: 876 of 13 079), while the same edges read by
    # their table's name were right.
    tables = []
    result = conn.execute("CALL show_tables() RETURN name, type")
    while result.has_next():
        name, kind = result.get_next()
        if kind == "REL":
            tables.append(name)
    rels = []
    for table in sorted(tables):
        result = conn.execute(f"MATCH (a)-[r:`{table}`]->(b) RETURN a, r, b")
        while result.has_next():
            a, r, b = result.get_next()
            rels.append(tuple(internal_keys_lowered(x) for x in (a, r, b)))
    return nodes, rels


def internal_keys_lowered(record):
    """A Kùzu node or relationship as a dict whose internal keys are
    Kùzu's (`_id`, `_label`): LadybugDB spells them `_ID`, `_LABEL`."""
    return {(k.lower() if k.startswith("_") else k): v for k, v in dict(record).items()}


def falkordb_graph(host, port, graph_name):
    """(nodes, relationships as (source, rel, target)) of a graph on a
    FalkorDB server."""
    from falkordb import FalkorDB

    return falkordb_rows(FalkorDB(host=host, port=int(port)).select_graph(graph_name))


def falkordb_lite_graph(db_file, graph_name):
    """(nodes, relationships) of a graph in FalkorDB Lite's saved file."""
    from redislite.falkordb_client import FalkorDB

    return falkordb_rows(FalkorDB(db_file).select_graph(graph_name))


def falkordb_rows(graph):

    def as_node(node):
        return {**node.properties, "_label": ":".join(sorted(node.labels)), "_id": node.id}

    nodes = [as_node(row[0]) for row in graph.query("MATCH (n) RETURN n").result_set]
    rels = [
        (as_node(a), {**r.properties, "_label": r.relation}, as_node(b))
        for a, r, b in graph.query("MATCH (a)-[r]->(b) RETURN a, r, b").result_set
    ]
    return nodes, rels


def clean(value):
    if isinstance(value, float):
        return round(value, 6)
    if isinstance(value, list):
        return [clean(v) for v in value]
    return value


def node_props(node):
    label = node["_label"]
    drop = NOISY_NODE_PROPS.get(label, set())
    return {
        k: clean(v)
        for k, v in node.items()
        if not k.startswith("_") and k not in drop and v is not None
    }


def node_key(node):
    return [
        node["_label"],
        node.get("path"),
        node.get("name"),
        node.get("line_number"),
        node.get("occurrence_index"),
        node.get("function_line_number"),
    ]


def canonical(nodes, rels):
    # Names defined more than once in one file (Function only).
    counts = {}
    for node in nodes:
        if node["_label"] == "Function":
            key = (node.get("path"), node.get("name"))
            counts[key] = counts.get(key, 0) + 1
    out_rels = []
    for a, r, b in rels:
        rel = r["_label"]
        props = {k: clean(v) for k, v in r.items() if not k.startswith("_") and v is not None}
        src, dst = node_key(a), node_key(b)
        if rel in ("CALLS", "HEURISTIC_CALLS") and b["_label"] == "Function":
            if counts.get((b.get("path"), b.get("name")), 0) > 1:
                dst[3] = None
                dst[4] = None
        if rel == "METACLASS":
            props.pop("line_number", None)
        out_rels.append([rel, src, dst, props])

    def canon(x):
        return json.dumps(x, sort_keys=True)

    return {
        "nodes": numbered(canon([n["_label"], node_props(n)]) for n in nodes),
        "relationships": sorted(canon(r) for r in out_rels),
    }


def numbered(items):
    """`items` sorted, the k-th repeat of an item suffixed `#k` (k >= 2)."""
    out, seen = [], {}
    for item in sorted(items):
        seen[item] = seen.get(item, 0) + 1
        out.append(item if seen[item] == 1 else f"{item}#{seen[item]}")
    return out


def main(argv):
    if len(argv) == 2 and argv[0] in ("kuzu", "ladybug"):
        nodes, rels = kuzu_graph(argv[1], argv[0])
    elif len(argv) == 4 and argv[0] == "falkordb":
        nodes, rels = falkordb_graph(argv[1], argv[2], argv[3])
    elif len(argv) == 3 and argv[0] == "falkordb-lite":
        nodes, rels = falkordb_lite_graph(argv[1], argv[2])
    else:
        sys.exit("usage: graph_dump.py kuzu|ladybug DB_PATH | falkordb HOST PORT GRAPH | "
                 "falkordb-lite DB_FILE GRAPH")
    json.dump(canonical(nodes, rels), sys.stdout)


if __name__ == "__main__":
    main(sys.argv[1:])
