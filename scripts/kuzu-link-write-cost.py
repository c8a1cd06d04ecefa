#!/usr/bin/env python3
"""What a `CALLS` edge costs Kùzu, written the ways a sync could write it.

The link phase of a large sync (a branch switch of hundreds of files)
writes tens of thousands of `CALLS` edges with CodeGraphContext's own
statement: an `UNWIND` of 1 000 rows, each row two `MATCH`es by name, path
(and line) and a `MERGE` of the edge by its properties, then `SET`s. This
measures, on a throw-away Kùzu database of generated `Function` nodes,
that statement against its variants: `CREATE` instead of `MERGE`, the
nodes matched by primary key, every property set in the `CREATE`, and the
`MATCH` alone. Each variant writes ROWS new edges, 1 000 rows a statement,
and is timed; the order alternates so that a warming cache favours none.

    scripts/kuzu-link-write-cost.py PYTHON_WITH_KUZU [ROWS] [NODES]

It runs itself again under the given interpreter (one that has CGC's
`kuzu` installed, e.g. the real CLI's virtualenv's python).
"""

import os
import random
import shutil
import subprocess
import sys
import tempfile
import time

MATCH_BY_NAME = """UNWIND $batch AS row
MATCH (caller:Function {name: row.cn, path: row.cp, line_number: row.cl})
MATCH (called:Function {name: row.dn, path: row.dp})
WHERE (row.dl <= 0 OR called.line_number = row.dl)
"""
MATCH_BY_KEY = """UNWIND $batch AS row
MATCH (caller:Function {uid: row.cu})
MATCH (called:Function {uid: row.du})
"""
EDGE = "(caller)-[call:CALLS {line_number: row.ln, full_call_name: row.fc, args_key: row.ak}]->(called)"
EDGE_WHOLE = (
    "(caller)-[call:CALLS {line_number: row.ln, full_call_name: row.fc, args_key: row.ak, "
    "args: row.args, confidence: row.conf}]->(called)"
)
SETS = "\nSET call.args = row.args\nSET call.confidence = row.conf"

VARIANTS = {
    "CGC's statement (match by name, MERGE, SET)": MATCH_BY_NAME + "MERGE " + EDGE + SETS,
    "CREATE instead of MERGE": MATCH_BY_NAME + "CREATE " + EDGE + SETS,
    "CREATE with every property": MATCH_BY_NAME + "CREATE " + EDGE_WHOLE,
    "match by primary key, MERGE, SET": MATCH_BY_KEY + "MERGE " + EDGE + SETS,
    "match by primary key, CREATE with every property": MATCH_BY_KEY + "CREATE " + EDGE_WHOLE,
    "the caller's MATCH alone (no write)": MATCH_BY_NAME.split("MATCH (called")[0] + "RETURN count(*)",
}


def nodes(count):
    return [
        {"uid": f"u{i}", "name": f"f{i % 3000}", "path": f"/p/m{i % 400}.py", "line_number": i}
        for i in range(count)
    ]


def rows(rng, functions, count, offset):
    out = []
    for j in range(count):
        a, b = rng.choice(functions), rng.choice(functions)
        out.append({
            "cn": a["name"], "cp": a["path"], "cl": a["line_number"], "cu": a["uid"],
            "dn": b["name"], "dp": b["path"], "dl": b["line_number"], "du": b["uid"],
            "ln": offset + j, "fc": "x.y", "ak": "k", "args": ["a"], "conf": 0.9,
        })
    return out


def measure(row_count, node_count):
    import kuzu

    scratch = tempfile.mkdtemp(prefix="kuzu-link-write-cost-")
    try:
        db = kuzu.Database(os.path.join(scratch, "db"))
        conn = kuzu.Connection(db)
        conn.execute(
            "CREATE NODE TABLE Function(uid STRING, name STRING, path STRING, line_number INT64, PRIMARY KEY(uid))"
        )
        conn.execute(
            "CREATE REL TABLE CALLS(FROM Function TO Function, line_number INT64, full_call_name STRING, "
            "args_key STRING, args STRING[], confidence DOUBLE)"
        )
        functions = nodes(node_count)
        for i in range(0, node_count, 1000):
            conn.execute(
                "UNWIND $b AS r "
                "CREATE (:Function {uid: r.uid, name: r.name, path: r.path, line_number: r.line_number})",
                {"b": functions[i:i + 1000]},
            )
        rng = random.Random(1)
        print(f"Kùzu {kuzu.__version__}: {node_count} Function nodes, {row_count} rows a variant, 1 000 a statement")
        for round_no in (1, 2):
            names = list(VARIANTS) if round_no == 1 else list(reversed(VARIANTS))
            for name in names:
                batch = rows(rng, functions, row_count, rng.randrange(10**9))
                started = time.monotonic()
                for i in range(0, row_count, 1000):
                    conn.execute(VARIANTS[name], {"batch": batch[i:i + 1000]})
                elapsed = time.monotonic() - started
                print(f"round {round_no}: {name}: {elapsed:.2f} s ({elapsed / row_count * 1000:.2f} ms a row)")
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def main(argv):
    if len(argv) >= 2 and argv[1] == "--measure":
        measure(int(argv[2]), int(argv[3]))
        return 0
    if len(argv) < 2:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    row_count = argv[2] if len(argv) > 2 else "5000"
    node_count = argv[3] if len(argv) > 3 else "12000"
    return subprocess.call([argv[1], os.path.abspath(__file__), "--measure", row_count, node_count])


if __name__ == "__main__":
    sys.exit(main(sys.argv))
