"""The driver's patches of CodeGraphContext's embedded session for the
files it writes again (`ParentDirectoriesKept` and `ParameterRowsBatched`
in `driver/session_patches.py`) on a stand-in session: which statements they
touch, what the stand-in then runs, and what is put back afterwards.

    python session_patches_check.py SESSION_PATCHES_PY

Prints one JSON line per case; the Rust test (`session_patches.rs`)
judges them.
"""

import json
import sys

import stand_in_cgc

PARENTS = """
                MATCH (f:File {path: $path})<-[:CONTAINS*]-(d:Directory)
                RETURN d.path as path ORDER BY d.path DESC
            """
PARAMETERS = """
                    UNWIND $batch AS row
                    MATCH (fn:Function {name: row.func_name, path: $file_path, line_number: row.line_number, occurrence_index: row.occurrence_index})
                    MERGE (p:Parameter {name: row.arg_name, path: $file_path, function_line_number: row.line_number})
                    SET p.name = row.arg_name, p.path = $file_path, p.function_line_number = row.line_number
                    MERGE (fn)-[:HAS_PARAMETER]->(p)
                """  # noqa: E501 - CGC's statement, kept as CGC writes it


class EmbeddedResultWrapper:
    def __init__(self, result):
        self.result = result

    def __iter__(self):
        return iter(self.result or [])


class EmbeddedSessionWrapper:
    """Answers every statement with one row and notes how it ran: the
    per-row fallback flag CGC's own `run` reads."""

    def __init__(self):
        self.ran = []

    def run(self, query, **parameters):
        self.ran.append({
            "query": " ".join(query.split())[:40],
            "batched": bool(getattr(self, "_skip_unwind_fallback", False)),
        })
        return EmbeddedResultWrapper([{"path": "/repo/pkg"}])


def load_patches(path):
    return stand_in_cgc.load_module(path, "cgc_fresh_session_patches", database_embedded_kuzu={
        "EmbeddedResultWrapper": EmbeddedResultWrapper,
        "EmbeddedSessionWrapper": EmbeddedSessionWrapper,
    })


def rows(*keys):
    return [{"func_name": f"f{i}", "line_number": line, "occurrence_index": 0, "arg_name": arg}
            for i, (arg, line) in enumerate(keys)]


def main():
    patches = load_patches(sys.argv[1])
    original_run = EmbeddedSessionWrapper.__dict__["run"]

    session = EmbeddedSessionWrapper()
    with patches.ParentDirectoriesKept({"/repo/pkg/a.py"}) as kept:
        rewritten = [r["path"] for r in session.run(PARENTS, path="/repo/pkg/a.py")]
        deleted = [r["path"] for r in session.run(PARENTS, path="/repo/pkg/b.py")]
        other = [r["path"] for r in session.run("MATCH (d:Directory) RETURN d.path AS path", path="/repo/pkg/a.py")]
    print(json.dumps({"case": "parent directories", "rewritten": rewritten, "deleted": deleted,
                      "other": other, "kept": kept.kept, "ran": len(session.ran),
                      "put_back": EmbeddedSessionWrapper.__dict__["run"] is original_run}))

    batches = [
        ("distinct keys", PARAMETERS, rows(("self", 5), ("x", 5), ("x", 9))),
        # Two functions on one line with the same argument: a repeated key.
        ("a repeated key", PARAMETERS, rows(("x", 5), ("y", 7), ("x", 5))),
        ("one row", PARAMETERS, rows(("x", 5))),
        ("another statement", PARAMETERS.replace("HAS_PARAMETER", "HAS_ARG"), rows(("x", 5), ("y", 7))),
    ]
    for name, query, batch in batches:
        session = EmbeddedSessionWrapper()
        with patches.ParameterRowsBatched() as batched:
            session.run(query, batch=batch, file_path="/repo/pkg/a.py")
            after = getattr(session, "_skip_unwind_fallback", None)
        print(json.dumps({"case": name, "batched": [r["batched"] for r in session.ran],
                          "counted": batched.batched, "flag_after": after,
                          "put_back": EmbeddedSessionWrapper.__dict__["run"] is original_run}))


if __name__ == "__main__":
    main()
