"""Dumps a CodeGraphContext Kùzu graph as canonical JSON (for the
graph-equality test): every node and every relationship as a sorted list,
with the noise of from-scratch indexing removed.

    python graph_dump.py DB_PATH > dump.json

Canonical form:
- a node is (label, its properties); the Repository's `indexed_at` and
  `commit_hash` are dropped (a timestamp, and absent outside git);
- a relationship is (type, key of its source, key of its target, its
  properties), a node's key being its label, path, name, line number,
  occurrence index and (for Parameter) function line;
- CGC's run-to-run noise: tree-sitter captures are not sorted, so a call
  to a function whose name occurs more than once in one file may resolve to
  either of them — the target's line and occurrence are dropped for such
  CALLS edges; METACLASS line numbers are dropped.
"""

import json
import sys

import kuzu

NOISY_NODE_PROPS = {"Repository": {"indexed_at", "commit_hash"}}


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


def main(db_path):
    db = kuzu.Database(db_path, read_only=True)
    conn = kuzu.Connection(db)
    nodes = []
    by_id = {}
    result = conn.execute("MATCH (n) RETURN n")
    while result.has_next():
        (node,) = result.get_next()
        by_id[(node["_id"]["table"], node["_id"]["offset"])] = node
        nodes.append([node["_label"], node_props(node)])
    # Names defined more than once in one file (Function only).
    counts = {}
    for node in by_id.values():
        if node["_label"] == "Function":
            key = (node.get("path"), node.get("name"))
            counts[key] = counts.get(key, 0) + 1
    rels = []
    result = conn.execute("MATCH (a)-[r]->(b) RETURN a, r, b")
    while result.has_next():
        a, r, b = result.get_next()
        rel = r["_label"]
        props = {k: clean(v) for k, v in r.items() if not k.startswith("_") and v is not None}
        src, dst = node_key(a), node_key(b)
        if rel in ("CALLS", "HEURISTIC_CALLS") and b["_label"] == "Function":
            if counts.get((b.get("path"), b.get("name")), 0) > 1:
                dst[3] = None
                dst[4] = None
        if rel == "METACLASS":
            props.pop("line_number", None)
        rels.append([rel, src, dst, props])
    canon = lambda x: json.dumps(x, sort_keys=True)
    out = {
        "nodes": sorted(canon(n) for n in nodes),
        "relationships": sorted(canon(r) for r in rels),
    }
    json.dump(out, sys.stdout)


if __name__ == "__main__":
    main(sys.argv[1])
