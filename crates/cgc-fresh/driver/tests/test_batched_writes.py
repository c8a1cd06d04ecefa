"""Unit tests of the batched writes (`batched_writes.py`): CGC's per-file
statements, recorded, grouped across files into few statements — in an
order every file's own order allows, shared Directories and Modules
written as file by file would leave them, rows of one statement of one
signature — and refused where that is not provably so. CGC's writer is a
stand-in issuing statements of the shapes CGC 0.6.13's `add_file_to_graph`
issues; the session is a stand-in that records.

Run: `python3 -m unittest discover -s crates/cgc-fresh/driver/tests`."""

import re
import unittest

from cgc_writer_statements import (
    CONTAINED_STATEMENT,
    DIRECTORY_STATEMENT,
    FILE_CONTAINED_STATEMENT,
    FILE_STATEMENT,
    METHODS_STATEMENT,
    NAME_ONLY_STATEMENT,
    NODES_STATEMENT,
    PARAMETERS_STATEMENT,
    PY_IMPORTS_STATEMENT,
)
from driver_module import load

baseline = load("graph_baseline.py", "cgc_fresh_graph_baseline")
seam = load("cgc_seam.py", "cgc_fresh_cgc_seam")
batched = load("batched_writes.py", "cgc_fresh_batched_writes")

REPO = "/r"


def function_row(path, name, line, **extra):
    row = {"name": name, "line_number": line, "occurrence_index": 0, "path": path, "lang": "python"}
    row.update(extra)
    return row


def import_row(name, line, lang="python", full=None, alias=None):
    return {"name": name, "full_import_name": full, "imported_name": name, "alias": alias,
            "line_number": line, "lang": lang}


def stand_in_writer(path, functions=(), params=(), methods=(), imports=(), dirs=("pkg",), extra=()):
    """`write_file(driver)` as CGC's writer would run it for one file."""

    def write_file(driver):
        with driver.session() as session:
            session.run(FILE_STATEMENT, path=path, name=path.rsplit("/", 1)[1],
                        relative_path=path[len(REPO) + 1:], is_dependency=False, language="python")
            parent, label = REPO, "Repository"
            for part in dirs:
                current = f"{parent}/{part}"
                session.run(DIRECTORY_STATEMENT.format(label=label), parent_path=parent, current_path=current,
                            part=part)
                parent, label = current, "Directory"
            session.run(FILE_CONTAINED_STATEMENT.format(label=label), parent_path=parent, path=path)
            if functions:
                session.run(NODES_STATEMENT.format(label="Function"), batch=list(functions), file_path=path)
                session.run(CONTAINED_STATEMENT.format(label="Function"), batch=list(functions), file_path=path)
            if params:
                session.run(PARAMETERS_STATEMENT, batch=list(params), file_path=path)
            if methods:
                for label in ("Class", "Interface"):
                    session.run(METHODS_STATEMENT.format(label=label), batch=list(methods), file_path=path)
            if imports:
                session.run(PY_IMPORTS_STATEMENT, batch=list(imports), file_path=path)
            for query in extra:
                session.run(query, batch=[], file_path=path)

    return write_file


def recorded(*writers):
    return [(path, batched.record(write, baseline, "kuzudb")) for path, write in writers]


def one_line(query):
    return " ".join(query.split())


class StageRowMatchesTest(unittest.TestCase):
    @staticmethod
    def unstaged(staged):
        """A staged statement with its `WITH`s taken out and each name put
        back as the row's field it read: the statement it was made from."""
        fields = {name: field for field, name in re.findall(r"row\.(\w+) AS (\w+)", staged)}
        text = "\n".join(line for line in staged.split("\n") if not line.startswith("WITH "))
        return re.sub(r": (\w+)", lambda m: f": row.{fields[m.group(1)]}" if m.group(1) in fields else m.group(0),
                      text)

    def test_the_containment_and_method_statements_are_staged_with_every_other_word_kept(self):
        statements = [
            CONTAINED_STATEMENT.format(label="Function").replace("$file_path", "row.path"),
            CONTAINED_STATEMENT.format(label="Variable").replace("$file_path", "row.path"),
            METHODS_STATEMENT.format(label="Class").replace("$file_path", "row.file_path"),
        ]
        for query in statements:
            staged = batched.stage_row_matches(query)
            self.assertEqual(staged.count("\nWITH "), 2, staged)
            for line in staged.split("\n"):
                if line.startswith("MATCH "):
                    self.assertNotIn("row.", line, staged)
            self.assertEqual(one_line(self.unstaged(staged)), one_line(query))
            self.assertEqual(staged[staged.index("MERGE"):], query[query.index("MERGE"):])

    def test_a_statement_of_another_shape_is_left_as_it_is(self):
        stage = batched.stage_row_matches
        # A property not read from the row, no UNWIND, no MATCH after it.
        for query in (CONTAINED_STATEMENT.format(label="Function"),
                      "MATCH (f:File {path: row.path}) RETURN f",
                      "UNWIND $batch AS row MERGE (n:Module {name: row.name})"):
            self.assertEqual(stage(query), query)


class PlanTest(unittest.TestCase):
    def test_two_files_become_one_statement_per_shape_in_the_writers_order(self):
        a, b = f"{REPO}/pkg/a.py", f"{REPO}/pkg/b.py"
        steps = batched.plan(recorded(
            (a, stand_in_writer(a, functions=[function_row(a, "f", 1)])),
            (b, stand_in_writer(b, functions=[function_row(b, "g", 2)])),
        ), baseline, seam)
        shapes = [one_line(s.query)[:40] for s in steps]
        self.assertEqual(shapes, [
            "UNWIND $batch AS row MERGE (f:File {path",
            "MATCH (p:`Repository` {path: $parent_pat",
            "UNWIND $batch AS row MATCH (p:`Directory",
            "UNWIND $batch AS row MERGE (n:Function {",
            # The containment's MATCHes staged (`stage_row_matches`).
            "UNWIND $batch AS row WITH row, row.path ",
        ])
        # One File row per file, in write order.
        self.assertEqual([r["path"] for r in steps[0].params["batch"]], [a, b])
        # The shared directory once.
        self.assertEqual(steps[1].params, {"parent_path": REPO, "current_path": f"{REPO}/pkg", "part": "pkg"})
        # The nodes read their file's path from the row, which carries it.
        self.assertIn("path: row.path", steps[3].query)
        self.assertIn("row.path AS n_path", steps[4].query)
        self.assertNotIn("$file_path", steps[3].query + steps[4].query)
        self.assertEqual([r["name"] for r in steps[3].params["batch"]], ["f", "g"])
        for step in steps[2:]:
            self.assertEqual(set(step.params), {"batch"})

    def test_directories_repeat_in_one_file_and_run_once_each_parent_first(self):
        a, b = f"{REPO}/x/y/a.py", f"{REPO}/x/z/b.py"
        steps = batched.plan(recorded(
            (a, stand_in_writer(a, dirs=("x", "y"))),
            (b, stand_in_writer(b, dirs=("x", "z"))),
        ), baseline, seam)
        made = [s.params["current_path"] for s in steps if "current_path" in s.params]
        self.assertEqual(made, [f"{REPO}/x", f"{REPO}/x/y", f"{REPO}/x/z"])

    def test_keyed_rows_carry_their_files_path(self):
        a, b = f"{REPO}/pkg/a.py", f"{REPO}/pkg/b.py"
        methods = [{"class_name": "C", "class_line": 3, "func_name": "run", "func_line": 4}]
        steps = batched.plan(recorded(
            (a, stand_in_writer(a, methods=methods)),
            (b, stand_in_writer(b, methods=methods)),
        ), baseline, seam)
        containers = [s for s in steps if "row.class_name" in s.query]
        self.assertEqual(len(containers), 2)
        for step in containers:
            self.assertTrue(step.binder_ok)
            self.assertIn("row.file_path AS c_path", step.query)
            self.assertEqual([r["file_path"] for r in step.params["batch"]], [a, b])

    def test_a_skipped_statement_is_left_out(self):
        a, b = f"{REPO}/pkg/a.py", f"{REPO}/pkg/b.py"
        methods = [{"class_name": "C", "class_line": 3, "func_name": "run", "func_line": 4}]

        def skip(_path, query):
            return "c:Interface" in query

        steps = batched.plan(recorded(
            (a, stand_in_writer(a, methods=methods)),
            (b, stand_in_writer(b, methods=methods)),
        ), baseline, seam, skip=skip)
        self.assertFalse(any("c:Interface" in s.query for s in steps))
        self.assertTrue(any("c:Class" in s.query for s in steps))

    def test_parameters_batch_only_without_a_repeated_key(self):
        a, b = f"{REPO}/pkg/a.py", f"{REPO}/pkg/b.py"

        def param(name, line, arg):
            return {"func_name": name, "line_number": line, "occurrence_index": 0, "arg_name": arg}

        steps = batched.plan(recorded(
            (a, stand_in_writer(a, functions=[function_row(a, "f", 1)], params=[param("f", 1, "x")])),
            (b, stand_in_writer(b, functions=[function_row(b, "g", 1), function_row(b, "g", 1, occurrence_index=1)],
                                params=[param("g", 1, "x"), {**param("g", 1, "x"), "occurrence_index": 1}])),
        ), baseline, seam)
        params = [s for s in steps if "HAS_PARAMETER" in s.query]
        self.assertEqual([(s.skip_fallback, len(s.params["batch"])) for s in params], [(True, 1), (False, 2)])
        self.assertIn("path: row.file_path", params[0].query)

    def test_rows_of_other_signatures_go_in_other_statements(self):
        a, b, c = (f"{REPO}/pkg/{n}.py" for n in "abc")
        steps = batched.plan(recorded(
            (a, stand_in_writer(a, functions=[function_row(a, "f", 1, docstring="d")])),
            (b, stand_in_writer(b, functions=[function_row(b, "g", 1)])),
            (c, stand_in_writer(c, functions=[function_row(c, "h", 1, docstring="e")])),
        ), baseline, seam)
        nodes = [s for s in steps if "MERGE (n:Function" in s.query]
        self.assertEqual([[r["name"] for r in s.params["batch"]] for s in nodes], [["f", "h"], ["g"]])

    def test_imports_merge_each_module_once_with_its_first_metadata_and_each_edge_once(self):
        a, b = f"{REPO}/pkg/a.py", f"{REPO}/pkg/b.py"
        steps = batched.plan(recorded(
            (a, stand_in_writer(a, imports=[import_row("os", 1, full=None), import_row("sys", 2, full="sys"),
                                            import_row("os", 1, full="os", alias="o")])),
            (b, stand_in_writer(b, imports=[import_row("os", 1, full="os.path")])),
        ), baseline, seam)
        modules = [r for s in steps if one_line(s.query) == one_line(seam.PY_IMPORT_MODULES_BATCHED)
                   for r in s.params["batch"]]
        self.assertEqual(sorted((m["name"], m["full_import_name"]) for m in modules),
                         [("os", "os"), ("sys", "sys")])
        edge_steps = [i for i, s in enumerate(steps) if one_line(s.query) == one_line(seam.PY_IMPORT_EDGES_BATCHED)]
        module_steps = [i for i, s in enumerate(steps)
                        if one_line(s.query) == one_line(seam.PY_IMPORT_MODULES_BATCHED)]
        self.assertLess(max(module_steps), min(edge_steps))
        edges = [r for i in edge_steps for r in steps[i].params["batch"]]
        self.assertEqual(sorted((e["file_path"], e["name"], e["alias"]) for e in edges),
                         [(a, "os", "o"), (a, "sys", None), (b, "os", None)])

    def test_a_shape_it_does_not_know_or_a_name_keyed_node_is_refused(self):
        a, b = f"{REPO}/pkg/a.py", f"{REPO}/pkg/b.py"
        with self.assertRaises(batched.Refused):
            batched.plan(recorded(
                (a, stand_in_writer(a, extra=[NAME_ONLY_STATEMENT])), (b, stand_in_writer(b))), baseline, seam)
        with self.assertRaises(batched.Refused):
            batched.plan(recorded(
                (a, stand_in_writer(a, extra=["MATCH (n) SET n.x = $batch"])), (b, stand_in_writer(b))),
                baseline, seam)

    def test_a_file_of_another_language_is_refused(self):
        a, b = f"{REPO}/pkg/a.py", f"{REPO}/web/b.js"

        def js(driver):
            with driver.session() as session:
                session.run(FILE_STATEMENT, path=b, name="b.js", relative_path="web/b.js", is_dependency=False,
                            language="javascript")

        with self.assertRaises(batched.Refused):
            batched.plan(recorded((a, stand_in_writer(a)), (b, js)), baseline, seam)

    def test_files_whose_shapes_have_no_one_order_are_refused(self):
        a, b = f"{REPO}/pkg/a.py", f"{REPO}/pkg/b.py"
        nodes = NODES_STATEMENT.format(label="Function")
        contained = CONTAINED_STATEMENT.format(label="Function")

        def writer(path, first, second):
            def write_file(driver):
                with driver.session() as session:
                    session.run(first, batch=[function_row(path, "f", 1)], file_path=path)
                    session.run(second, batch=[function_row(path, "f", 1)], file_path=path)
            return write_file

        with self.assertRaises(batched.Refused):
            batched.plan(recorded((a, writer(a, nodes, contained)), (b, writer(b, contained, nodes))),
                         baseline, seam)

    def test_a_node_row_of_another_path_is_refused(self):
        a, b = f"{REPO}/pkg/a.py", f"{REPO}/pkg/b.py"
        with self.assertRaises(batched.Refused):
            batched.plan(recorded(
                (a, stand_in_writer(a, functions=[function_row(b, "f", 1)])), (b, stand_in_writer(b))),
                baseline, seam)

    def test_rows_are_chunked(self):
        paths = [f"{REPO}/pkg/m{i}.py" for i in range(5)]
        old = batched.MAX_ROWS
        batched.MAX_ROWS = 2
        try:
            steps = batched.plan(recorded(*[(p, stand_in_writer(p)) for p in paths]), baseline, seam)
        finally:
            batched.MAX_ROWS = old
        files = [s for s in steps if "MERGE (f:File" in s.query]
        self.assertEqual([len(s.params["batch"]) for s in files], [2, 2, 1])


class DeleteTest(unittest.TestCase):
    def test_deletes_go_in_two_statements_per_chunk(self):
        steps = batched.delete_steps([f"{REPO}/b.py", f"{REPO}/a.py"], seam)
        self.assertEqual(len(steps), 2)
        self.assertIn(":Module", steps[0].query)
        self.assertIn("DETACH DELETE", steps[1].query)
        self.assertEqual(steps[1].params, {"paths": [f"{REPO}/a.py", f"{REPO}/b.py"]})


class ModuleMetadataTest(unittest.TestCase):
    def test_each_module_in_one_row_and_rows_of_other_types_apart(self):
        steps = batched.module_metadata_steps([
            {"name": "os", "fin": "os", "lang": "python"},
            {"name": "x", "fin": None, "lang": "python"},
            {"name": "sys", "fin": "sys", "lang": "python"},
        ])
        self.assertEqual([[r["name"] for r in s.params["batch"]] for s in steps], [["os", "sys"], ["x"]])
        self.assertTrue(all("MATCH (m:Module {name: row.name})" in s.query for s in steps))

    def test_a_module_twice_is_refused(self):
        with self.assertRaises(batched.Refused):
            batched.module_metadata_steps([{"name": "os", "fin": "os", "lang": "python"}] * 2)


class Session:
    def __init__(self, fail=None):
        self.ran = []
        self.fail = fail or {}

    def run(self, query, **params):
        self.ran.append((query, params, getattr(self, "_skip_unwind_fallback", None)))
        if query in self.fail:
            raise self.fail[query]


class ExecuteTest(unittest.TestCase):
    def binder(self, exc):
        return "binder" in str(exc).lower()

    def test_steps_run_in_order_with_the_fallback_skipped_only_where_asked(self):
        session = Session()
        batched.execute([batched.Step("A", {"batch": []}, skip_fallback=True), batched.Step("B", {})], session,
                        self.binder)
        self.assertEqual([(q, skip) for q, _p, skip in session.ran], [("A", True), ("B", None)])
        self.assertFalse(hasattr(session, "_skip_unwind_fallback"))

    def test_a_label_that_does_not_bind_is_skipped_only_where_cgc_skips_it(self):
        session = Session(fail={"A": RuntimeError("Binder exception: Table X does not exist."),
                                "B": RuntimeError("Binder exception: no")})
        batched.execute([batched.Step("A", {}, binder_ok=True), batched.Step("C", {})], session, self.binder)
        self.assertEqual([q for q, _p, _s in session.ran], ["A", "C"])
        with self.assertRaises(RuntimeError):
            batched.execute([batched.Step("B", {})], session, self.binder)


if __name__ == "__main__":
    unittest.main()
