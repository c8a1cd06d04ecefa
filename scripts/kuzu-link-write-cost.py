#!/usr/bin/env python3
"""What a `CALLS` edge costs Kùzu, written the ways a sync could write it.

The link phase of a large sync (a branch switch of hundreds of files)
writes tens of thousands of `CALLS` edges with CodeGraphContext's own
statement: an `UNWIND` of 1 000 rows, each row two `MATCH`es by name, path
(and line) and a `MERGE` of the edge by its properties, then `SET`s. This
measures, on a throw-away Kùzu database of generated `Function` nodes,
that statement against its variants: `CREATE` instead of `MERGE`, the
nodes matched by primary key, every property set in the `CREATE`, each
`MATCH` behind a `WITH` that names the row's keys (which Kùzu plans as a
hash join rather than as a cross product of the rows with the node
table), the caller's `MATCH` alone, the `UNWIND` of the rows alone; and
against Kùzu's bulk path, `COPY CALLS(...) FROM ... (from='Function',
to='Function')` (the ends given by primary key, `uid`), and `LOAD FROM` a
source with a `MATCH` by `uid` and a `CREATE`, the rows coming from:

- an `UNWIND` of the Python list passed as a parameter (`COPY` only:
  `LOAD FROM` a subquery is refused), 1 000 rows a statement, all rows in
  one statement, and 1 000 a statement inside one `BEGIN TRANSACTION` ...
  `COMMIT`;
- a temporary CSV file: `COPY` straight from it (every property but
  `args`, which Kùzu's CSV list syntax cannot carry faithfully), `COPY`
  from a `LOAD` of it that decodes `args`, and `LOAD FROM` it;
- a temporary JSON-lines file, `COPY` and `LOAD FROM`;
- where the interpreter can import them, a pandas DataFrame and a pyarrow
  table passed as a parameter, `COPY` and `LOAD FROM`.

Each variant writes ROWS new edges (the timing includes building its
source: the CSV or JSON file, the DataFrame) into the same database, so
every variant after the first finds the `CALLS` table non-empty; the order
alternates so that a warming cache favours none. A `CHECKPOINT` before
each variant (not timed) and one after it (timed, and shown apart) keep
one variant's deferred work from landing on the next: a `COPY` writes
its data at once, `CREATE` and `MERGE` leave much of it to the checkpoint.
After each variant, out of the timing, it counts the edges the variant
stored and those whose `args` and `full_call_name` came back intact (the
generated `args` hold a comma, quotes and a newline), and shows the
process's peak resident memory so far. The buffer pool is capped as
CodeGraphContext caps it. Read the times with the `CALLS` size each line
shows: some writes (a `COPY`, or the checkpoint after a `CREATE` or a
`MERGE`) took 5-25 s more when `CALLS` grew past certain sizes, the same
sizes whatever the variant that crossed them (with 30 000 nodes: about
280 000, 360 000, 460 000, 580 000 and 740 000 edges), so compare a
variant across runs or rounds, not one line alone.

`CALLS` is created as CodeGraphContext 0.6.13 creates it on Kùzu: `CREATE
REL TABLE GROUP` with its 53 FROM/TO pairs and its 10 properties, which
Kùzu 0.11.3 makes one multi-pair rel table; the other node tables those
pairs name are created empty, with only their key.

    scripts/kuzu-link-write-cost.py PYTHON_WITH_KUZU [ROWS] [NODES]

It runs itself again under the given interpreter (one that has CGC's
`kuzu` installed, e.g. the real CLI's virtualenv's python).
"""

import contextlib
import csv
import json
import os
import random
import resource
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
# The same matches, each behind a `WITH` that names the row's keys: Kùzu
# 0.11.3 plans `MATCH (n:Function {uid: row.cu})` straight after the
# `UNWIND` as a cross product of the rows with the node table and a
# filter, and the `WITH`-separated form as hash joins (`EXPLAIN` shows it).
STAGED_BY_NAME = """UNWIND $batch AS row
WITH row, row.cn AS cn, row.cp AS cp, row.cl AS cl
MATCH (caller:Function {name: cn, path: cp, line_number: cl})
WITH caller, row, row.dn AS dn, row.dp AS dp, row.dl AS dl
MATCH (called:Function {name: dn, path: dp})
WHERE (dl <= 0 OR called.line_number = dl)
"""
STAGED_BY_KEY = """UNWIND $batch AS row
WITH row, row.cu AS cu
MATCH (caller:Function {uid: cu})
WITH caller, row, row.du AS du
MATCH (called:Function {uid: du})
"""
EDGE = "(caller)-[call:CALLS {line_number: row.ln, full_call_name: row.fc, args_key: row.ak}]->(called)"
EDGE_WHOLE = (
    "(caller)-[call:CALLS {line_number: row.ln, full_call_name: row.fc, args_key: row.ak, "
    "args: row.args, confidence: row.conf}]->(called)"
)
SETS = "\nSET call.args = row.args\nSET call.confidence = row.conf"

# The `COPY` forms: the columns they write, in the order the source gives
# them after the two keys (the other five properties are left null, as the
# statements above leave them).
COPY_COLUMNS = "line_number, full_call_name, args_key, args, confidence"
COPY_PAIR = "(from='Function', to='Function')"
COPY_UNWIND = (
    f"COPY CALLS({COPY_COLUMNS}) FROM "
    "(UNWIND $batch AS row RETURN row.cu, row.du, row.ln, row.fc, row.ak, row.args, row.conf) " + COPY_PAIR
)
# Kùzu's CSV reader: a quoted field may hold the delimiter and doubled
# quotes (Python's csv module writes that), but a quoted newline needs
# `parallel=false`; an empty field, quoted or not, is read as null unless
# `null_strings` names another marker. A `STRING[]` cell is Kùzu's list
# syntax, whose quotes stay in the element and which an unbalanced bracket
# breaks, so `args` goes as one string: each element behind a `#`, joined
# by the unit separator, taken apart again by the `LOAD` below with a
# regular expression (`string_split` drops empty elements, and
# `list_transform` in such a `LOAD ... CREATE` of 2 000 rows aborted the
# process with a heap corruption in Kùzu 0.11.3). No `WITH` stands between
# the `LOAD` and the `MATCH`es: with one, Kùzu plans the two node scans as a
# cross product, which fills the buffer pool.
CSV_NULL = "\\N"
CSV_OPTIONS = "header=true, parallel=false, null_strings=['" + CSV_NULL.replace("\\", "\\\\") + "']"
ARG_SEPARATOR = "\x1f"
ARG_PATTERN = "#([^\x1f]*)"
CSV_HEADER = ["from", "to", "line_number", "full_call_name", "args_key", "args", "confidence"]
CSV_LOAD = (
    "LOAD WITH HEADERS (cu STRING, du STRING, ln INT64, fc STRING, ak STRING, args STRING, conf DOUBLE) "
    "FROM {path} (" + CSV_OPTIONS + ")\n"
)
CSV_ARGS = "regexp_extract_all(args, $pattern, 1)"
COPY_CSV_STRAIGHT = (
    "COPY CALLS(line_number, full_call_name, args_key, confidence) FROM {path} "
    "(from='Function', to='Function', " + CSV_OPTIONS + ")"
)
COPY_CSV_LOADED = (
    f"COPY CALLS({COPY_COLUMNS}) FROM ({CSV_LOAD}RETURN cu, du, ln, fc, ak, {CSV_ARGS}, conf) {COPY_PAIR}"
)
CREATE_BY_KEY = (
    "MATCH (caller:Function {uid: cu})\nMATCH (called:Function {uid: du})\n"
    "CREATE (caller)-[:CALLS {line_number: ln, full_call_name: fc, args_key: ak, args: args, confidence: conf}]"
    "->(called)"
)
LOAD_CSV_CREATE = CSV_LOAD + CREATE_BY_KEY.replace("args: args", "args: " + CSV_ARGS)
# A JSON file (Kùzu 0.11.3 has its JSON extension linked in): one object a
# line, whose lists, nulls, empty strings and newlines need no care.
JSON_KEYS = ["from", "to", "line_number", "full_call_name", "args_key", "args", "confidence"]
COPY_JSON = f"COPY CALLS({COPY_COLUMNS}) FROM {{path}} {COPY_PAIR}"
LOAD_JSON_CREATE = (
    "LOAD FROM {path}\nMATCH (caller:Function {uid: `from`})\nMATCH (called:Function {uid: `to`})\n"
    "CREATE (caller)-[:CALLS {line_number: line_number, full_call_name: full_call_name, args_key: args_key, "
    "args: args, confidence: confidence}]->(called)"
)
COPY_FRAME = f"COPY CALLS({COPY_COLUMNS}) FROM $frame {COPY_PAIR}"
LOAD_FRAME_CREATE = "LOAD FROM $frame\n" + CREATE_BY_KEY
FRAME_COLUMNS = ["cu", "du", "ln", "fc", "ak", "args", "conf"]

# CodeGraphContext 0.6.13's `CALLS` (core/database_embedded_kuzu.py), word
# for word; the node tables it names besides `Function`, keyed as there.
CALLS_PAIRS = """
    FROM Function TO Function, FROM Function TO Class, FROM Function TO Interface, FROM Function TO Trait,
    FROM Function TO Struct, FROM Function TO Enum, FROM Function TO Record, FROM Function TO `Union`,
    FROM Function TO Mixin, FROM Function TO Extension, FROM Function TO Object, FROM Function TO Parameter,
    FROM Class TO Function, FROM Class TO Class, FROM Class TO Interface, FROM Class TO Trait,
    FROM Class TO Struct, FROM Class TO Enum, FROM Class TO Record, FROM Class TO `Union`,
    FROM Interface TO Function, FROM Interface TO Class, FROM Interface TO Interface,
    FROM Trait TO Function, FROM Trait TO Class, FROM Trait TO Interface,
    FROM Mixin TO Function, FROM Mixin TO Class, FROM Mixin TO Interface,
    FROM Extension TO Function, FROM Extension TO Class, FROM Extension TO Interface,
    FROM Object TO Function, FROM Object TO Class, FROM Object TO Interface,
    FROM `Union` TO Function, FROM `Union` TO Class, FROM `Union` TO Interface,
    FROM `Macro` TO Function, FROM `Macro` TO Class, FROM `Macro` TO Interface,
    FROM File TO Function, FROM File TO Class, FROM File TO Interface, FROM File TO Trait,
    FROM File TO Struct, FROM File TO Enum, FROM File TO Record, FROM File TO `Union`,
    FROM Function TO File,
    FROM Variable TO Function, FROM Variable TO Class, FROM Variable TO Interface,
    line_number INT64, args STRING[], full_call_name STRING, args_key STRING, confidence DOUBLE, resolution_tier INT64,
    confidence_label STRING, source STRING, resolution_method STRING, called_name STRING
"""
OTHER_NODE_TABLES = [
    "Class", "Interface", "Trait", "Struct", "Enum", "Record", "Union", "Mixin", "Extension", "Object",
    "Parameter", "Macro", "Variable",
]

# CodeGraphContext caps Kùzu's buffer pool at 4 GiB (less where half the
# available memory is less); Kùzu's own default is 80 % of the memory,
# which a cross-product plan filled here (once until the kernel killed
# the process for want of memory).
BUFFER_POOL_BYTES = 4 << 30

ARGS = ["a, \"b\"", "c\nd"]
FULL_CALL_NAME = "x.y"


def statements(query):
    """A writer running `query` over the batch, 1 000 rows a statement."""
    def write(conn, batch, _scratch):
        for i in range(0, len(batch), 1000):
            conn.execute(query, {"batch": batch[i:i + 1000]})
    return write


def copy_unwind_whole(conn, batch, _scratch):
    conn.execute(COPY_UNWIND, {"batch": batch})


def copy_unwind_in_transaction(conn, batch, _scratch):
    conn.execute("BEGIN TRANSACTION")
    try:
        for i in range(0, len(batch), 1000):
            conn.execute(COPY_UNWIND, {"batch": batch[i:i + 1000]})
    except RuntimeError:
        # A statement that fails inside the transaction has rolled it back.
        with contextlib.suppress(RuntimeError):
            conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")


def csv_cell(value):
    return CSV_NULL if value is None else value


def write_csv(batch, scratch, with_args):
    """The batch as a CSV file in `scratch`; its path as a Cypher string
    literal (Kùzu takes a file to scan only as a literal, not a parameter)."""
    path = os.path.join(scratch, "calls.csv")
    with open(path, "w", newline="", encoding="utf-8") as out:
        writer = csv.writer(out, lineterminator="\n")
        writer.writerow(CSV_HEADER if with_args else [c for c in CSV_HEADER if c != "args"])
        for row in batch:
            cells = [row["cu"], row["du"], row["ln"], csv_cell(row["fc"]), csv_cell(row["ak"])]
            if with_args:
                if any(ARG_SEPARATOR in arg for arg in row["args"]):
                    raise ValueError("an argument holds the separator")
                cells.append(ARG_SEPARATOR.join("#" + arg for arg in row["args"]))
            writer.writerow([*cells, csv_cell(row["conf"])])
    return cypher_literal(path)


def cypher_literal(path):
    return "'" + path.replace("\\", "\\\\").replace("'", "\\'") + "'"


def write_json(batch, scratch):
    """The batch as a JSON-lines file in `scratch`; its path as a literal."""
    path = os.path.join(scratch, "calls.json")
    with open(path, "w", encoding="utf-8") as out:
        for row in batch:
            values = [row["cu"], row["du"], row["ln"], row["fc"], row["ak"], row["args"], row["conf"]]
            out.write(json.dumps(dict(zip(JSON_KEYS, values, strict=True))) + "\n")
    return cypher_literal(path)


def json_writer(query):
    def write(conn, batch, scratch):
        conn.execute(query.replace("{path}", write_json(batch, scratch)))
    return write


def csv_writer(query, with_args=True):
    def write(conn, batch, scratch):
        statement = query.replace("{path}", write_csv(batch, scratch, with_args))
        conn.execute(statement, {"pattern": ARG_PATTERN} if with_args else {})
    return write


def frame_writer(kind, query):
    def write(conn, batch, _scratch):
        columns = {name: [row[name] for row in batch] for name in FRAME_COLUMNS}
        if kind == "pandas":
            import pandas

            # Kùzu 0.11.3 cannot scan pandas 3's own string dtype: the
            # string columns go as objects.
            frame = pandas.DataFrame(columns).astype({"cu": object, "du": object, "fc": object, "ak": object})
        else:
            import pyarrow

            frame = pyarrow.table(columns)
        conn.execute(query, {"frame": frame})
    return write


def importable(name):
    try:
        __import__(name)
    except ImportError:
        return False
    return True


VARIANTS = {
    "CGC's statement (match by name, MERGE, SET)": statements(MATCH_BY_NAME + "MERGE " + EDGE + SETS),
    "CREATE instead of MERGE": statements(MATCH_BY_NAME + "CREATE " + EDGE + SETS),
    "CREATE with every property": statements(MATCH_BY_NAME + "CREATE " + EDGE_WHOLE),
    "match by primary key, MERGE, SET": statements(MATCH_BY_KEY + "MERGE " + EDGE + SETS),
    "match by primary key, CREATE with every property": statements(MATCH_BY_KEY + "CREATE " + EDGE_WHOLE),
    "CGC's statement, each MATCH behind a WITH": statements(STAGED_BY_NAME + "MERGE " + EDGE + SETS),
    "match by primary key behind a WITH, MERGE, SET": statements(STAGED_BY_KEY + "MERGE " + EDGE + SETS),
    "match by primary key behind a WITH, CREATE with every property": statements(
        STAGED_BY_KEY + "CREATE " + EDGE_WHOLE
    ),
    "the caller's MATCH alone (no write)": statements(MATCH_BY_NAME.split("MATCH (called")[0] + "RETURN count(*)"),
    "the UNWIND of the list alone (no MATCH, no write)": statements("UNWIND $batch AS row RETURN count(*)"),
    "COPY from an UNWIND of the list, 1 000 rows a statement": statements(COPY_UNWIND),
    "COPY from an UNWIND of the list, all rows in one statement": copy_unwind_whole,
    "COPY from an UNWIND of the list, 1 000 a statement, one transaction": copy_unwind_in_transaction,
    "COPY from a temporary CSV file, straight (no args)": csv_writer(COPY_CSV_STRAIGHT, with_args=False),
    "COPY from a LOAD of a temporary CSV file (args decoded)": csv_writer(COPY_CSV_LOADED),
    "LOAD FROM a temporary CSV file, match by primary key, CREATE": csv_writer(LOAD_CSV_CREATE),
    "COPY from a temporary JSON-lines file": json_writer(COPY_JSON),
    "LOAD FROM a temporary JSON-lines file, match by primary key, CREATE": json_writer(LOAD_JSON_CREATE),
}
for module in ("pandas", "pyarrow"):
    what = "a pandas DataFrame" if module == "pandas" else "a pyarrow table"
    VARIANTS[f"COPY from {what} (a parameter)"] = frame_writer(module, COPY_FRAME)
    VARIANTS[f"LOAD FROM {what}, match by primary key, CREATE"] = frame_writer(module, LOAD_FRAME_CREATE)


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
            "ln": offset + j, "fc": FULL_CALL_NAME, "ak": "k", "args": ARGS, "conf": 0.9,
        })
    return out


def scalar(conn, query, parameters=None):
    return conn.execute(query, parameters or {}).get_next()[0]


def create_schema(conn):
    conn.execute(
        "CREATE NODE TABLE Function(uid STRING, name STRING, path STRING, line_number INT64, PRIMARY KEY(uid))"
    )
    for label in OTHER_NODE_TABLES:
        conn.execute(f"CREATE NODE TABLE `{label}`(uid STRING, PRIMARY KEY(uid))")
    conn.execute("CREATE NODE TABLE File(path STRING, PRIMARY KEY(path))")
    conn.execute(f"CREATE REL TABLE GROUP `CALLS`({CALLS_PAIRS})")


def measure(row_count, node_count):
    import kuzu

    scratch = tempfile.mkdtemp(prefix="kuzu-link-write-cost-")
    try:
        db = kuzu.Database(os.path.join(scratch, "db"), buffer_pool_size=BUFFER_POOL_BYTES)
        conn = kuzu.Connection(db)
        create_schema(conn)
        pairs = scalar(conn, "CALL SHOW_CONNECTION('CALLS') RETURN count(*)")
        functions = nodes(node_count)
        for i in range(0, node_count, 1000):
            conn.execute(
                "UNWIND $b AS r "
                "CREATE (:Function {uid: r.uid, name: r.name, path: r.path, line_number: r.line_number})",
                {"b": functions[i:i + 1000]},
            )
        variants = dict(VARIANTS)
        for module in ("pandas", "pyarrow"):
            if not importable(module):
                print(f"{module} is not importable here: its variants are left out")
                variants = {name: write for name, write in variants.items() if f"a {module} " not in name}
        rng = random.Random(1)
        print(
            f"Kùzu {kuzu.__version__}: {node_count} Function nodes, CALLS of {pairs} FROM/TO pairs, "
            f"{row_count} rows a variant, buffer pool {BUFFER_POOL_BYTES >> 20} MiB"
        )
        for round_no in (1, 2):
            names = list(variants) if round_no == 1 else list(reversed(variants))
            for name in names:
                offset = rng.randrange(10**9)
                batch = rows(rng, functions, row_count, offset)
                before = scalar(conn, "MATCH ()-[c:CALLS]->() RETURN count(*)")
                conn.execute("CHECKPOINT")
                started = time.monotonic()
                try:
                    variants[name](conn, batch, scratch)
                except RuntimeError as error:
                    print(f"round {round_no}: {name}: failed after {time.monotonic() - started:.2f} s: {error}")
                    continue
                elapsed = time.monotonic() - started
                started = time.monotonic()
                conn.execute("CHECKPOINT")
                checkpoint = time.monotonic() - started
                stored = scalar(conn, "MATCH ()-[c:CALLS]->() RETURN count(*)") - before
                intact = scalar(
                    conn,
                    "MATCH ()-[c:CALLS]->() WHERE c.line_number >= $lo AND c.line_number < $hi "
                    "AND c.args = $args AND c.full_call_name = $fc RETURN count(*)",
                    {"lo": offset, "hi": offset + row_count, "args": ARGS, "fc": FULL_CALL_NAME},
                )
                print(
                    f"round {round_no}: {name}: {elapsed:.2f} s + checkpoint {checkpoint:.2f} s "
                    f"({elapsed / row_count * 1000:.3f} + {checkpoint / row_count * 1000:.3f} ms a row); "
                    f"{stored} edges stored, {intact} with args and name intact, {before + stored} in CALLS, "
                    f"peak RSS so far {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss >> 10} MiB"
                )
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
