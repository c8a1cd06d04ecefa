"""Checks the driver's FalkorDB index repair (`driver/falkordb_index.py`),
self-check (`driver/self_check.py`) and backend pin
(`driver/backend_pin.py`) on stand-ins: a session that
records the statements it is given, and rows as the backends return them.
Prints one JSON line per case; exits non-zero on the first failed check.

    python3 backend_modules_check.py DRIVER_DIR
"""

import importlib.util
import json
import os
import sys


def load(directory, name):
    spec = importlib.util.spec_from_file_location(name, os.path.join(directory, f"{name}.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class RecordingSession:
    """A CGC session stand-in: answers `CALL db.indexes()` with `indexes`
    and records every statement."""

    def __init__(self, indexes):
        self.indexes = indexes
        self.statements = []

    def __enter__(self):
        return self

    def __exit__(self, *_exc):
        return False

    def run(self, query, **_params):
        self.statements.append(query)
        rows = self.indexes if query.startswith("CALL db.indexes()") else []

        class Result:
            def data(self):
                return rows

        return Result()


class Driver:
    def __init__(self, session):
        self._session = session

    def session(self):
        return self._session


def index_repair(index):
    rows = [
        {"label": "Function", "properties": ["name", "path", "line_number", "lang", "occurrence_index"],
         "entitytype": "NODE"},
        {"label": "Class", "properties": ["name", "path", "line_number", "occurrence_index"], "entitytype": "NODE"},
        {"label": "Object", "properties": ["name", "path", "line_number"], "entitytype": "NODE"},
        {"label": "CALLS", "properties": ["occurrence_index"], "entitytype": "RELATIONSHIP"},
        ["Trait", ["name", "occurrence_index"], "NODE"],  # a row as a list
        {"label": "Odd", "properties": "occurrence_index"},  # not a list: not ours
    ]
    session = RecordingSession(rows)
    repaired = index.repair(Driver(session), "falkordb")
    assert repaired == ["Class", "Function", "Trait"], repaired
    assert session.statements[1:] == [
        "DROP INDEX FOR (n:`Class`) ON (n.occurrence_index)",
        "DROP INDEX FOR (n:`Function`) ON (n.occurrence_index)",
        "DROP INDEX FOR (n:`Trait`) ON (n.occurrence_index)",
    ], session.statements
    # Nothing at all on another backend; nothing to drop once repaired.
    untouched = RecordingSession(rows)
    assert index.repair(Driver(untouched), "kuzudb") == [] and untouched.statements == []
    assert index.repair(Driver(RecordingSession(rows[2:3])), "falkordb-remote") == []
    try:
        index.drop_statement("Bad`Label")
        raise AssertionError("a backtick in a label was quoted")
    except ValueError:
        pass
    return {"case": "index_repair", "repaired": repaired, "statements": session.statements}


def self_check(check):
    written = {
        "/ws/a.py": {"functions": [{"name": "f"}, {"name": "g"}], "classes": [{"name": "C"}]},
        "/ws/broken.py": {"error": "parse failed"},
    }
    deleted = ["/ws/gone.py"]
    expected = check.expected_counts(written, deleted)
    assert expected["/ws/a.py"] == {"File": (1, None), "Function": (2, 2), "Class": (1, 1)}, expected
    assert expected["/ws/broken.py"]["File"] == (1, None) and expected["/ws/broken.py"]["Function"] == (0, 0)
    assert expected["/ws/gone.py"] == {"File": (0, None), "Function": (0, 0), "Class": (0, 0)}

    def rows(extra=()):
        # Kùzu names a node's table; FalkorDB lists its labels.
        return [
            {"p": "/ws/a.py", "l": "File", "c": 0},
            {"p": "/ws/a.py", "l": "Function", "c": 1},
            {"p": "/ws/a.py", "l": ["Function"], "c": 1},
            {"p": "/ws/a.py", "l": "Class", "c": 1},
            {"p": "/ws/broken.py", "l": "File", "c": 0},
            *extra,
        ]

    asked = []

    def read_with(answer):
        def read(query, keys, **params):
            asked.append((query, keys, params))
            return answer
        return read

    assert check.check(read_with(rows()), "falkordb", written, deleted) == 3
    query, keys, params = asked[-1]
    assert keys == ["p", "l", "c"] and params == {"paths": ["/ws/a.py", "/ws/broken.py", "/ws/gone.py"]}
    assert "labels(n)" in query and "n:File OR n:Function OR n:Class" in query, query
    check.check(read_with(rows()), "kuzudb", written, deleted)
    assert "MATCH (n:File:Function:Class)" in asked[-1][0] and "label(n)" in asked[-1][0], asked[-1][0]

    failures = {}
    for name, answer in {
        # An old function left beside the new ones (the false `fresh`).
        "left_behind": rows([{"p": "/ws/a.py", "l": "Function", "c": 1}]),
        # The nodes are there but their File does not contain one.
        "not_contained": [dict(r, c=0) if r["l"] == "Class" else r for r in rows()],
        # A deleted file's File node is still there.
        "not_deleted": rows([{"p": "/ws/gone.py", "l": "File", "c": 0}]),
        # The written file's File node is missing.
        "no_file": [r for r in rows() if not (r["p"] == "/ws/a.py" and r["l"] == "File")],
    }.items():
        try:
            check.check(read_with(answer), "falkordb", written, deleted)
            raise AssertionError(f"{name}: the check passed")
        except check.SelfCheckFailed as exc:
            failures[name] = str(exc)
    assert "/ws/a.py: 3 Function node(s) in the graph, 2 written" in failures["left_behind"], failures
    assert "/ws/a.py: 0 of 1 Class node(s) contained by the file, 1 written" in failures["not_contained"], failures
    assert "/ws/gone.py: 1 File node(s) in the graph, 0 written" in failures["not_deleted"], failures
    assert "/ws/a.py: 0 File node(s) in the graph, 1 written" in failures["no_file"], failures
    assert check.check(read_with([]), "falkordb", {}, []) == 0
    return {"case": "self_check", "failures": failures}


class Manager:
    def __init__(self, backend):
        self.backend = backend

    def get_backend_type(self):
        return self.backend


def backend_pin(pin, scratch):
    everything = {b: True for b in pin.IMPLICIT_ORDER}
    nothing = {b: False for b in pin.IMPLICIT_ORDER}
    choices = {
        # Named: as named, lower-cased; a named backend that is not
        # installed falls back statically, in CGC's order.
        "named": pin.choose("FalkorDB", everything),
        "named_lite_missing": pin.choose("falkordb", dict(everything, falkordb=False)),
        "named_kuzu_missing": pin.choose("kuzudb", dict(nothing, ladybugdb=True)),
        "named_server": pin.choose("neo4j", nothing),
        # Not named: CGC's implicit order.
        "implicit_remote": pin.choose(None, everything),
        "implicit_lite": pin.choose("", dict(everything, **{"falkordb-remote": False})),
        "implicit_python_3_11": pin.choose(None, dict(nothing, kuzudb=True, ladybugdb=True)),
        "implicit_none": pin.choose(None, nothing),
    }
    assert choices == {
        "named": "falkordb",
        "named_lite_missing": "kuzudb",
        "named_kuzu_missing": "ladybugdb",
        "named_server": "neo4j",
        "implicit_remote": "falkordb-remote",
        "implicit_lite": "falkordb",
        "implicit_python_3_11": "kuzudb",
        "implicit_none": None,
    }, choices
    assert pin.check(Manager("falkordb"), "falkordb") == "falkordb"
    assert pin.check(Manager("kuzudb"), None) == "kuzudb"
    try:
        pin.check(Manager("kuzudb"), "falkordb")
        raise AssertionError("a fallback was let through")
    except pin.BackendFellBack as exc:
        refused = str(exc)
    assert "'kuzudb'" in refused and "'falkordb'" in refused and "nothing was written" in refused, refused

    # A `cgc` script is run by its own interpreter with the patience set,
    # only when its `#!` names the driver's interpreter.
    script = os.path.join(scratch, "cgc")
    with open(script, "w") as out:
        out.write(f"#!{sys.executable}\nimport sys\nprint('ran', sys.argv[1:])\n")
    command = pin.patient_command([script, "watch", "."], sys.executable)
    assert command[:2] == [sys.executable, "-c"] and command[3:] == [script, "watch", "."], command
    other = pin.patient_command([script, "watch"], "/elsewhere/python3")
    assert other == [script, "watch"], other
    assert pin.patient_command(["/no/such/cgc"], sys.executable) == ["/no/such/cgc"]
    import subprocess

    ran = subprocess.run(command, capture_output=True, text=True, check=True).stdout
    assert ran.strip() == "ran ['watch', '.']", ran
    return {"case": "backend_pin", "choices": choices}


def main(argv):
    import tempfile

    directory = argv[0]
    with tempfile.TemporaryDirectory() as scratch:
        for case in (
            index_repair(load(directory, "falkordb_index")),
            self_check(load(directory, "self_check")),
            backend_pin(load(directory, "backend_pin"), scratch),
        ):
            print(json.dumps(case, sort_keys=True))


if __name__ == "__main__":
    main(sys.argv[1:])
