"""Unit tests of the self-check (`self_check.py`): what the graph must
hold for each changed file, how the query's rows are counted, and the
differences named. The database is a stand-in `read`.

Run: `python3 -m unittest discover -s crates/cgc-fresh/driver/tests`."""

import os
import unittest

from driver_module import load

HERE = os.path.dirname(os.path.abspath(__file__))


check = load("self_check.py", "cgc_fresh_self_check")
WRITTEN = {"/r/a.py": {"functions": [{"name": "f"}, {"name": "g"}], "classes": [{"name": "C"}]}}


def rows_for(path, functions, classes, contained=True, file_label="File"):
    rows = [{"p": path, "l": file_label, "c": 0}]
    rows += [{"p": path, "l": "Function", "c": 1 if contained else 0} for _ in range(functions)]
    rows += [{"p": path, "l": "Class", "c": 1} for _ in range(classes)]
    return rows


class ExpectedTest(unittest.TestCase):
    def test_a_written_file_its_items_each_contained_a_deleted_file_nothing(self):
        expected = check.expected_counts(
            dict(WRITTEN, **{"/r/broken.py": {"error": "syntax", "functions": [{"name": "x"}]}}),
            ["/r/gone.py", "/r/a.py"])
        self.assertEqual(expected["/r/a.py"], {"File": (1, None), "Function": (2, 2), "Class": (1, 1)})
        # A file that did not parse is a bare File node.
        self.assertEqual(expected["/r/broken.py"], {"File": (1, None), "Function": (0, 0), "Class": (0, 0)})
        self.assertEqual(expected["/r/gone.py"], {"File": (0, None), "Function": (0, 0), "Class": (0, 0)})

    def test_a_list_that_is_no_list_counts_none(self):
        self.assertEqual(check.expected_counts({"/r/a.py": {"functions": None}}, [])["/r/a.py"]["Function"], (0, 0))


class QueryTest(unittest.TestCase):
    def test_kuzus_dialect_takes_a_union_of_labels_others_a_where(self):
        for backend in check.KUZU_DIALECT:
            self.assertIn("MATCH (n:File:Function:Class) WHERE n.path IN $paths", check.query(backend))
            self.assertIn("label(n) AS l", check.query(backend))
        for backend in ("falkordb", "falkordb-remote", "neo4j"):
            q = check.query(backend)
            self.assertIn("(n:File OR n:Function OR n:Class)", q)
            self.assertIn("labels(n) AS l", q)


class CheckTest(unittest.TestCase):
    def run_check(self, rows, written=WRITTEN, deleted=()):
        asked = []

        def read(query, keys, **params):
            asked.append((query, keys, params))
            return rows

        checked = check.check(read, "kuzudb", written, deleted)
        return checked, asked

    def test_the_graph_as_written_passes_in_one_query(self):
        checked, asked = self.run_check(rows_for("/r/a.py", 2, 1))
        self.assertEqual(checked, 1)
        self.assertEqual(len(asked), 1)
        self.assertEqual(asked[0][1:], (["p", "l", "c"], {"paths": ["/r/a.py"]}))

    def test_a_node_too_many_fails_naming_file_and_label(self):
        with self.assertRaises(check.SelfCheckFailed) as caught:
            self.run_check(rows_for("/r/a.py", 3, 1))
        self.assertIn("/r/a.py: 3 Function node(s) in the graph, 2 written", str(caught.exception))

    def test_a_node_its_file_does_not_contain_fails(self):
        with self.assertRaises(check.SelfCheckFailed) as caught:
            self.run_check(rows_for("/r/a.py", 2, 1, contained=False))
        self.assertIn("0 of 2 Function node(s) contained by the file, 2 written", str(caught.exception))

    def test_a_deleted_file_left_in_the_graph_fails(self):
        with self.assertRaises(check.SelfCheckFailed) as caught:
            self.run_check(rows_for("/r/gone.py", 0, 0), written={}, deleted=["/r/gone.py"])
        self.assertIn("/r/gone.py: 1 File node(s) in the graph, 0 written", str(caught.exception))

    def test_labels_given_as_a_list_count_under_the_checked_one(self):
        rows = rows_for("/r/a.py", 0, 1, file_label=["Node", "File"])
        rows += [{"p": "/r/a.py", "l": ["Function", "Extra"], "c": 1}] * 2
        self.assertEqual(self.run_check(rows)[0], 1)

    def test_nothing_changed_asks_nothing(self):
        self.assertEqual(self.run_check([], written={}), (0, []))


if __name__ == "__main__":
    unittest.main()
