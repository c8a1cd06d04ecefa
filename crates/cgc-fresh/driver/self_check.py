"""cgc-fresh self-check: after a request has written, the graph holds for
each changed file exactly the nodes the request wrote for it — and each of
them hangs off its File — or, for a deleted file, none.

Loaded by the incremental driver from the file next to it (the service
writes it there as `incremental-self-check.py`).

One query per request, under the same lock as the writes, over the
changed files only: every node with such a `path` of the checked labels,
with whether its File `CONTAINS` it. What the request wrote, read from the
parse results it wrote them from (CodeGraphContext 0.6.13's
`GraphWriter.add_file_to_graph` makes one node per item of the parsed
lists below, disambiguated by `occurrence_index`, and a `CONTAINS` edge
from the File to each):

- `File`: one per written file, none for a deleted one;
- `Function`, `Class`: one per parsed item, each contained by its File.

Labels whose items CodeGraphContext merges (Variable: same name and line),
shares by name (Module) or makes elsewhere (Parameter, Directory) are not
counted: a count could not say what the writer meant. A difference is not
repaired: the request fails (the service then says the graph is stale,
with the error) and the difference is named, file by file.
"""

CHECKED_LABELS = (("functions", "Function"), ("classes", "Class"))
# Embedded backends with Kùzu's query language: a node pattern with
# several labels is their union, and `label(n)` names a node's table.
KUZU_DIALECT = ("kuzudb", "ladybugdb")


class SelfCheckFailed(Exception):
    """The graph does not hold what the request wrote."""


def expected_counts(written, deleted):
    """{path: {label: (nodes, contained)}}: what the graph must hold for
    the changed files. `written`: {path: parse result}; `deleted`: paths."""
    out = {}
    for path, fd in written.items():
        counts = {"File": (1, None)}
        if "error" not in fd:
            for key, label in CHECKED_LABELS:
                items = fd.get(key)
                n = len(items) if isinstance(items, list) else 0
                counts[label] = (n, n)
        else:
            for _key, label in CHECKED_LABELS:
                counts[label] = (0, 0)
        out[path] = counts
    for path in deleted:
        if path not in out:
            out[path] = {"File": (0, None), **{label: (0, 0) for _k, label in CHECKED_LABELS}}
    return out


def query(backend):
    """The one statement of the check, in the backend's dialect: one row
    per node of a checked label whose `path` is a changed file, with how
    many Files of that path contain it."""
    labels = ["File"] + [label for _k, label in CHECKED_LABELS]
    if backend in KUZU_DIALECT:
        match, label = f"MATCH (n:{':'.join(labels)}) WHERE n.path IN $paths", "label(n)"
    else:
        alternatives = " OR ".join(f"n:{label}" for label in labels)
        match, label = f"MATCH (n) WHERE n.path IN $paths AND ({alternatives})", "labels(n)"
    return (
        f"{match} OPTIONAL MATCH (f:File)-[:CONTAINS]->(n) WHERE f.path = n.path "
        f"WITH n, count(f) AS c RETURN n.path AS p, {label} AS l, c AS c"
    )


def observed_counts(rows):
    """{path: {label: (nodes, contained)}} from the query's rows (one per
    node: its path, its label or labels, how many Files contain it)."""
    out = {}
    for row in rows:
        path, label, contained = row.get("p"), row.get("l"), row.get("c")
        if isinstance(label, (list, tuple)):
            label = next((x for x in label if x in ("File", "Function", "Class")), None)
        if not isinstance(path, str) or not isinstance(label, str):
            continue
        nodes, held = out.setdefault(path, {}).get(label, (0, 0))
        out[path][label] = (nodes + 1, held + (1 if contained else 0))
    return out


def differences(expected, observed):
    """Human-readable differences, one per (file, label); [] when none."""
    problems = []
    for path in sorted(expected):
        for label, (nodes, contained) in sorted(expected[path].items()):
            seen_nodes, seen_contained = observed.get(path, {}).get(label, (0, 0))
            if seen_nodes != nodes:
                problems.append(f"{path}: {seen_nodes} {label} node(s) in the graph, {nodes} written")
            elif contained is not None and seen_contained != contained:
                problems.append(
                    f"{path}: {seen_contained} of {seen_nodes} {label} node(s) contained by the file, "
                    f"{contained} written"
                )
    return problems


def check(read, backend, written, deleted):
    """Runs the check through `read(query, keys, **params)`; raises
    `SelfCheckFailed` naming every difference. Returns how many files it
    checked."""
    expected = expected_counts(written, deleted)
    if not expected:
        return 0
    rows = read(query(backend), ["p", "l", "c"], paths=sorted(expected))
    problems = differences(expected, observed_counts(rows))
    if problems:
        raise SelfCheckFailed("the graph does not hold what this sync wrote: " + "; ".join(problems))
    return len(expected)
