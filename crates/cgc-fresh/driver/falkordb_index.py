"""cgc-fresh FalkorDB index repair: FalkorDB's range index, once it is
built over nodes that already exist, finds no node whose indexed number
is 0 — and CodeGraphContext keys every positional node by a number that
is almost always 0.

Loaded by the incremental driver from the file next to it (the service
writes it there as `incremental-falkordb-index.py`).

**What was measured** (FalkorDB as `falkordblite` 0.9.0 and 0.11.0 ship
it, the embedded FalkorDB Lite and the server alike; CodeGraphContext
0.6.13): an index `CREATE INDEX FOR (f:F) ON (f.name, f.occ)` made on an
empty graph, nodes `{occ: 0}` merged after it, answers `MATCH (f:F {occ:
0})` — until the graph is saved and loaded again (FalkorDB Lite does so
at every process's first open: each `cgc` run starts the embedded server
from the saved file and saves it when it ends). From then on `{occ: 0}`,
`occ = 0`, `occ >= 0` and `occ IN [0]` find nothing through the index,
nodes created after the load included, while `{occ: 3}` and
`toInteger(occ) = 0` (no index) are right. Dropping the attribute and
creating it again over the existing nodes gives the same wrong index.

CodeGraphContext's schema (`create_schema`, 0.6.13) indexes `(name, path,
line_number, occurrence_index)` for every positional label; its writer
MERGEs a file's nodes on that key and then MATCHes them on it again to
attach them to their File (`CONTAINS`) and their Parameters
(`HAS_PARAMETER`). With the broken index each such MATCH finds nothing:
the file's nodes are written without their `CONTAINS` edges, so the next
delete of the file (which follows them) leaves the nodes behind, and the
next write adds them again beside the old ones. CodeGraphContext's own
`cgc watch`, reconcile and per-file index do the same on such a graph.

**The repair.** The `occurrence_index` attribute is dropped from every
node label's range index that holds it. Lookups then go through the
label's other indexed attributes (name, path, line_number) and filter the
ordinal without the index, which is right. CodeGraphContext never puts it
back: its schema statement names all four attributes at once, FalkorDB
refuses it whole ("Attribute 'name' is already indexed") and CGC takes
that answer as "exists already". Only a graph built from nothing (a
first `cgc index`) gets the attribute again, so every request looks
(`CALL db.indexes()`, one statement) and repairs what it finds.

What it changes in the person's database: one attribute of an index
CodeGraphContext made; no node, edge or property. On every other backend
nothing is done.
"""

# Backends that run FalkorDB's engine (`get_backend_type()` of CGC's
# managers, 0.6.13).
FALKORDB_BACKENDS = ("falkordb", "falkordb-remote")
# The attribute whose index lookups FalkorDB gets wrong (CGC 0.6.13's
# positional node key ends with it; its value is 0 but for a name that
# occurs twice on one line).
BROKEN_ATTRIBUTE = "occurrence_index"


def _rows(session, query):
    result = session.run(query)
    data = getattr(result, "data", None)
    return data() if callable(data) else list(result)


def _field(row, key, position):
    try:
        return row[key]
    except (KeyError, IndexError, TypeError):
        try:
            return row[position]
        except (KeyError, IndexError, TypeError):
            return None


def labels_to_repair(index_rows):
    """The node labels whose range index holds `BROKEN_ATTRIBUTE`, from the
    rows of `CALL db.indexes() YIELD label, properties, entitytype`."""
    labels = set()
    for row in index_rows:
        label = _field(row, "label", 0)
        properties = _field(row, "properties", 1)
        entity = _field(row, "entitytype", 2)
        if not isinstance(label, str) or not isinstance(properties, (list, tuple)):
            continue
        if entity not in (None, "NODE"):
            continue
        if BROKEN_ATTRIBUTE in properties:
            labels.add(label)
    return sorted(labels)


def drop_statement(label):
    """The statement that drops `BROKEN_ATTRIBUTE` from `label`'s index
    (a label name with a backtick is refused, never quoted)."""
    if "`" in label:
        raise ValueError(f"unexpected label name {label!r}")
    return f"DROP INDEX FOR (n:`{label}`) ON (n.{BROKEN_ATTRIBUTE})"


def repair(driver, backend):
    """Drops `BROKEN_ATTRIBUTE` from the range indexes of a FalkorDB graph
    (see the module doc); returns the labels repaired ([] elsewhere)."""
    if backend not in FALKORDB_BACKENDS:
        return []
    with driver.session() as session:
        rows = _rows(session, "CALL db.indexes() YIELD label, properties, entitytype "
                              "RETURN label, properties, entitytype")
        labels = labels_to_repair(rows)
        for label in labels:
            session.run(drop_statement(label))
    return labels
