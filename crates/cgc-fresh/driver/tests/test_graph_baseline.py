"""Unit tests of the graph baseline (`graph_baseline.py`): the writer's
statements recognised, what a file's write must leave in the graph, what
the graph's rows say it holds, and which files differ. CGC's writer is a
stand-in that issues statements of the shapes CGC 0.6.13's
`add_file_to_graph` issues; the database is a stand-in `read`.

Run: `python3 -m unittest discover -s crates/cgc-fresh/driver/tests`."""

import unittest

from cgc_writer_statements import (
    CONTAINED_STATEMENT,
    FILE_STATEMENT,
    JS_IMPORTS_STATEMENT,
    NAME_ONLY_STATEMENT,
    NODES_STATEMENT,
    PY_IMPORTS_STATEMENT,
)
from driver_module import load

baseline = load("graph_baseline.py", "cgc_fresh_graph_baseline")

PATH = "/r/pkg/a.py"


def function_row(name, line, **extra):
    row = {"name": name, "line_number": line, "occurrence_index": 0, "path": PATH, "lang": "python"}
    row.update(extra)
    return row


def stand_in_writer(functions, imports=(), extra_statements=()):
    """`write_file(driver)` as CGC's writer would run it for one file."""

    def write_file(driver):
        with driver.session() as session:
            session.run(FILE_STATEMENT, path=PATH, name="a.py", relative_path="pkg/a.py",
                        is_dependency=False, language="python")
            if functions:
                session.run(NODES_STATEMENT.format(label="Function"), batch=list(functions), file_path=PATH)
                session.run(CONTAINED_STATEMENT.format(label="Function"), batch=list(functions), file_path=PATH)
            if imports:
                session.run(PY_IMPORTS_STATEMENT, batch=list(imports), file_path=PATH)
            for query in extra_statements:
                session.run(query, batch=[], file_path=PATH)

    return write_file


def stored_file_node(**extra):
    node = {"path": PATH, "name": "a.py", "relative_path": "pkg/a.py", "is_dependency": False,
            "language": "python", "_id": {"table": 0, "offset": 1}, "_label": "File"}
    node.update(extra)
    return node


def stored_read(nodes_by_label, imports):
    """A stand-in `read`: nodes by label for the node queries, rows for
    the IMPORTS query; a label given as None has no table."""

    def read(query, keys, **params):
        if "IMPORTS" in query:
            return [dict(row) for row in imports]
        for label, rows in nodes_by_label.items():
            if f"(n:`{label}`)" in query:
                if rows is None:
                    raise RuntimeError(f"Binder exception: Table {label} does not exist.")
                return [{"n": dict(row)} for row in rows]
        return []

    return read


def missing(exc):
    return "Binder" in str(exc)


class StatementsTest(unittest.TestCase):
    def test_the_writers_statements_are_recognised_and_a_new_shape_is_not(self):
        self.assertEqual(baseline.classify(FILE_STATEMENT)[0], "file")
        name, match = baseline.classify(NODES_STATEMENT.format(label="Class"))
        self.assertEqual((name, match.group(1)), ("nodes", "Class"))
        self.assertEqual(baseline.classify(CONTAINED_STATEMENT.format(label="Function"))[0], "nodes_contained")
        self.assertEqual(baseline.classify(PY_IMPORTS_STATEMENT)[0], "py_imports")
        self.assertEqual(baseline.classify("MATCH (n) SET n.x = 1"), (None, None))
        self.assertEqual(baseline.classify(NAME_ONLY_STATEMENT), (None, None))


class ExpectedContentTest(unittest.TestCase):
    def test_a_statement_it_does_not_know_makes_the_file_unknown(self):
        content = baseline.expected_content(
            stand_in_writer([function_row("f", 1)], extra_statements=[NAME_ONLY_STATEMENT]), "kuzudb", {})
        self.assertIsNotNone(content.unknown)
        self.assertFalse(content.same_as(content))

    def test_a_writer_that_fails_makes_the_file_unknown(self):
        def failing(_driver):
            raise KeyError("name")

        self.assertIn("KeyError", baseline.expected_content(failing, "falkordb", None).unknown)

    def test_imports_merge_on_their_key_and_the_last_row_wins(self):
        rows = [
            {"name": "os", "line_number": 1, "imported_name": "os", "alias": None, "full_import_name": "os",
             "lang": "python"},
            {"name": "os", "line_number": 1, "imported_name": "os", "alias": "o", "full_import_name": "os",
             "lang": "python"},
        ]
        content = baseline.expected_content(stand_in_writer([], imports=rows), "falkordb", None)
        self.assertEqual(content.imports, (baseline.import_entry("os", 1, "os", "o", "os", "python"),))


def js_import_writer(rows):
    """`write_file(driver)` for a TypeScript file with these import rows."""

    def write_file(driver):
        with driver.session() as session:
            session.run(FILE_STATEMENT, path=PATH, name="a.py", relative_path="pkg/a.py",
                        is_dependency=False, language="python")
            session.run(JS_IMPORTS_STATEMENT, batch=list(rows), file_path=PATH)

    return write_file


def js_row(name, line=1, module="./internal"):
    return {"module_name": module, "line_number": line, "imported_name": name, "alias": "", "lang": "typescript"}


def stored_js_import(name, line=1, module="./internal"):
    return {"p": PATH, "m": module, "ln": line, "inm": name, "al": "", "fin": None, "lg": "typescript"}


class CollapsedImportsTest(unittest.TestCase):
    """One import naming several symbols on one line: on FalkorDB its edge
    keeps a name that depends on the order files were written, so any of
    its rows' names matches; on Kùzu the last row's, and only it."""

    def differing(self, rows, stored_imports, backend):
        read = stored_read({"File": [stored_file_node()]}, stored_imports)
        stored, columns = baseline.stored_contents(read, backend, "/r/", missing)
        return baseline.differing_files(
            {PATH: True}, {PATH}, stored, lambda _p: baseline.expected_content(js_import_writer(rows), backend,
                                                                                columns))

    def test_on_falkordb_any_of_the_rows_names_matches_and_no_other(self):
        rows = [js_row("IProduce"), js_row("Immer"), js_row("Draft")]
        for backend in ("falkordb", "falkordb-remote"):
            for kept in ("IProduce", "Immer", "Draft"):
                self.assertEqual(self.differing(rows, [stored_js_import(kept)], backend), set(), (backend, kept))
            self.assertEqual(self.differing(rows, [stored_js_import("Other")], backend), {PATH}, backend)
            # The edge itself must be there, on its line.
            self.assertEqual(self.differing(rows, [], backend), {PATH}, backend)
            self.assertEqual(self.differing(rows, [stored_js_import("Immer", line=2)], backend), {PATH}, backend)

    def test_a_single_row_import_matches_its_own_name_only(self):
        rows = [js_row("Immer"), js_row("Draft", line=2)]
        self.assertEqual(self.differing(rows, [stored_js_import("Immer"), stored_js_import("Draft", line=2)],
                                        "falkordb"), set())
        self.assertEqual(self.differing(rows, [stored_js_import("Draft"), stored_js_import("Immer", line=2)],
                                        "falkordb"), {PATH})

    def test_on_kuzu_the_last_row_wins_and_only_it_matches(self):
        rows = [js_row("IProduce"), js_row("Immer"), js_row("Draft")]
        self.assertEqual(self.differing(rows, [stored_js_import("Draft")], "kuzudb"), set())
        self.assertEqual(self.differing(rows, [stored_js_import("Immer")], "kuzudb"), {PATH})


class DifferingFilesTest(unittest.TestCase):
    def stored(self, functions, imports=(), backend="kuzudb", file_node=None):
        read = stored_read({"File": [file_node or stored_file_node()], "Function": functions, "Macro": None},
                           imports)
        return baseline.stored_contents(read, backend, "/r/", missing)

    def differing(self, write_file, stored_functions, imports=(), backend="kuzudb", present=None, stored_files=None,
                  file_node=None):
        stored, columns = self.stored(stored_functions, imports, backend, file_node)
        present = {PATH: True} if present is None else present
        stored_files = {PATH} if stored_files is None else stored_files
        return baseline.differing_files(
            present, stored_files, stored, lambda _p: baseline.expected_content(write_file, backend, columns))

    def test_a_file_whose_nodes_are_as_written_does_not_differ(self):
        # Kùzu gives every column of the table, None where unset, its uid.
        stored = [dict(function_row("f", 1, source="def f(): pass"), uid="u1", docstring=None,
                       _label="Function")]
        write = stand_in_writer([function_row("f", 1, source="def f(): pass")])
        self.assertEqual(self.differing(write, stored), set())

    def test_a_changed_property_an_extra_or_a_missing_node_differs(self):
        write = stand_in_writer([function_row("f", 1, source="def f(): return 2")])
        stored = [dict(function_row("f", 1, source="def f(): return 1"), uid="u1")]
        self.assertEqual(self.differing(write, stored), {PATH})
        extra = [dict(function_row("f", 1, source="def f(): return 2"), uid="u1"),
                 dict(function_row("g", 5), uid="u2")]
        self.assertEqual(self.differing(write, extra), {PATH})
        self.assertEqual(self.differing(write, []), {PATH})

    def test_a_row_key_the_table_has_no_column_for_is_not_compared_on_kuzu_but_is_elsewhere(self):
        write = stand_in_writer([function_row("f", 1, not_a_column="x")])
        stored = [dict(function_row("f", 1), uid="u1")]
        self.assertEqual(self.differing(write, stored, backend="kuzudb"), set())
        self.assertEqual(self.differing(write, stored, backend="falkordb"), {PATH})

    def test_a_changed_import_alone_differs(self):
        row = {"name": "os", "line_number": 1, "imported_name": "os", "alias": None, "full_import_name": "os",
               "lang": "python"}
        write = stand_in_writer([function_row("f", 3)], imports=[row])
        stored = [dict(function_row("f", 3), uid="u1")]
        same = [{"p": PATH, "m": "os", "ln": 1, "inm": "os", "al": "", "fin": "os", "lg": "python"}]
        self.assertEqual(self.differing(write, stored, imports=same), set())
        other = [dict(same[0], m="sys", inm="sys", fin="sys")]
        self.assertEqual(self.differing(write, stored, imports=other), {PATH})

    def test_a_changed_file_node_differs(self):
        write = stand_in_writer([])
        self.assertEqual(self.differing(write, [], file_node=stored_file_node(language="javascript")), {PATH})

    def test_files_only_in_the_tree_only_in_the_graph_or_unparsed_differ(self):
        write = stand_in_writer([])
        self.assertEqual(self.differing(write, [], present={PATH: True, "/r/new.py": True}), {"/r/new.py"})
        self.assertEqual(self.differing(write, [], stored_files={PATH, "/r/gone.py"}), {"/r/gone.py"})
        self.assertEqual(self.differing(write, [], present={PATH: False}), {PATH})

    def test_every_file_of_the_tree_is_counted_as_compared_once(self):
        # The worker's `comparing` progress: its total is `len(present)`.
        stored, _columns = self.stored([])
        present = {PATH: True, "/r/new.py": True, "/r/broken.py": False}
        counted = []
        found = baseline.differing_files(present, {PATH, "/r/gone.py"}, stored,
                                         stored.__getitem__, compared=lambda: counted.append(1))
        self.assertEqual(len(counted), len(present))
        self.assertEqual(found, {"/r/new.py", "/r/broken.py", "/r/gone.py"})

    def test_a_stored_file_still_on_disk_but_not_indexed_now_is_kept_for_the_reconcile(self):
        on_disk = {"/r/ignored_now.py"}
        kept = baseline.kept_on_disk({PATH: True}, {PATH, "/r/ignored_now.py", "/r/gone.py"}, on_disk.__contains__)
        self.assertEqual(kept, ["/r/ignored_now.py"])

    def test_numbers_compare_by_value_whatever_their_type(self):
        self.assertEqual(baseline.canonical(3.0), baseline.canonical(3))
        self.assertEqual(baseline.canonical(("a", 1)), baseline.canonical(["a", 1]))
        self.assertNotEqual(baseline.canonical(True), baseline.canonical(1))


if __name__ == "__main__":
    unittest.main()
