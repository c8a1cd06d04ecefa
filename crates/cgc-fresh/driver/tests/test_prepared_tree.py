"""Unit tests of the tree prepared ahead of a request (`prepared_tree.py`)
and its use by the worker's next request (`Worker.take_prepared`).

Run: `python3 -m unittest discover -s crates/cgc-fresh/driver/tests`."""

import os
import tempfile
import time
import unittest

from driver_module import companion
from stand_ins import config_manager, stand_in_modules

prepared_tree = companion("prepared_tree")
worker_module = companion("worker")
# The prepared tree's rule with Python read alone and every other suffix
# possibly reading other files.
PY_ALONE = (".py",)


class PreparedTreeTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.addCleanup(self.dir.cleanup)
        self.files = [self.write("a.py", "a = 1\n"), self.write("notes.txt", "n\n")]
        modules, _reads = config_manager({"A": "1"})
        context = stand_in_modules(**modules)
        self.modules = context.__enter__()
        self.addCleanup(context.__exit__, None, None, None)

    def write(self, name, text):
        path = os.path.join(self.dir.name, name)
        with open(path, "w") as f:
            f.write(text)
        return path

    def prepared(self, files=None, started_ns=None):
        files = self.files if files is None else files
        listing = prepared_tree.PreparedTree.identities(files)
        started_ns = time.time_ns() if started_ns is None else started_ns
        return prepared_tree.PreparedTree("/repo", prepared_tree.cgc_settings(), listing, started_ns,
                                prepared_tree.PreparedTree.racy_contents(listing, started_ns), tree="the tree")

    def test_the_same_tree_holds(self):
        self.assertTrue(self.prepared().still_holds("/repo", self.files, {".py", ".js"}, PY_ALONE))

    def test_another_repository_or_other_settings_do_not(self):
        prepared = self.prepared()
        self.assertFalse(prepared.still_holds("/other", self.files, {".py"}, PY_ALONE))
        self.modules["codegraphcontext.cli.config_manager"].load_config = lambda: {"A": "2"}
        self.assertFalse(prepared.still_holds("/repo", self.files, {".py"}, PY_ALONE))

    def test_a_file_added_removed_or_changed_does_not(self):
        prepared = self.prepared()
        self.assertFalse(prepared.still_holds("/repo", self.files + [self.write("b.py", "")], {".py"}, PY_ALONE))
        self.assertFalse(prepared.still_holds("/repo", self.files[:1], {".py"}, PY_ALONE))
        self.write("a.py", "a = 22\n")
        self.assertFalse(prepared.still_holds("/repo", self.files, {".py"}, PY_ALONE))

    def test_a_file_whose_parse_may_read_other_files_does_not(self):
        files = self.files + [self.write("c.js", "x\n")]
        self.assertFalse(self.prepared(files).still_holds("/repo", files, {".py", ".js"}, PY_ALONE))
        # Without a parser for it the file is a bare File node: it holds.
        self.assertTrue(self.prepared(files).still_holds("/repo", files, {".py"}, PY_ALONE))
        files = self.files + [self.write("t.d.ts", "x\n")]
        self.assertFalse(self.prepared(files).still_holds("/repo", files, {".py"}, PY_ALONE))

    def test_a_file_of_a_suffix_read_alone_holds(self):
        files = self.files + [self.write("c.js", "x\n"), self.write("t.d.ts", "x\n")]
        alone = (".py", ".js", ".ts")
        self.assertTrue(self.prepared(files).still_holds("/repo", files, {".py", ".js", ".ts"}, alone))

    def test_just_changed_files_are_compared_by_their_bytes(self):
        prepared = self.prepared()
        self.assertEqual(set(prepared.racy), set(self.files), "both files were just written")
        prepared.racy = dict(prepared.racy, **{self.files[0]: "another digest"})
        self.assertFalse(prepared.still_holds("/repo", self.files, {".py"}, PY_ALONE))
        # Files older than the racy window are not read at all.
        old = self.prepared(started_ns=time.time_ns() + 2 * prepared_tree.PREPARED_RACY_NS)
        self.assertEqual(old.racy, {})
        self.assertIsNone(prepared_tree.PreparedTree.racy_contents({"/nowhere": None}, time.time_ns()))

    def test_a_prepared_tree_is_spent_by_the_next_request_whether_it_holds_or_not(self):
        worker = worker_module.Worker({}, lambda _data: None, serving=True)
        for repo, used in (("/repo", 1), ("/other", 0)):
            prepared = self.prepared()
            prepared.cache_timings = {"parse_cache_hits": 2}
            prepared.step1_s = 0.5
            worker.keep_prepared(prepared)
            timings = {}
            tree = worker.take_prepared(repo, self.files, {".py"}, PY_ALONE, timings)
            self.assertEqual(tree, "the tree" if used else None)
            self.assertIsNone(worker.prepared)
            self.assertEqual(timings["prepared_used"], used)
            self.assertEqual("parse_cache_hits" in timings, bool(used))
        self.assertIsNone(worker.take_prepared("/repo", self.files, {".py"}, PY_ALONE, {}))

    def test_verify_names_the_part_that_differs(self):
        parts = {"parsed": {"a": ("a.py", {"functions": [1, 2]})}, "links": {}, "expected": {}, "targets": [],
                 "csharp_paths": [], "module_first": {}, "module_defined": {}, "imports_map": {"m": ["x", "y"]}}
        tree_state = prepared_tree.TreeState
        prepared = tree_state(**parts)
        prepared_tree.PreparedTree.verify(prepared, tree_state(**dict(parts, imports_map={"m": ["y", "x"]})))
        with self.assertRaisesRegex(RuntimeError, "imports_map"):
            prepared_tree.PreparedTree.verify(prepared, tree_state(**dict(parts, imports_map={"m": ["x"]})))


    def test_unordered_compares_lists_as_multisets(self):
        unordered = prepared_tree.unordered
        self.assertEqual(unordered({"a": [3, 1, (2, 1)], "b": {2, 1}}), unordered({"b": [1, 2], "a": [[1, 2], 1, 3]}))
        self.assertNotEqual(unordered([1, 1, 2]), unordered([1, 2, 2]))
        self.assertNotEqual(unordered({"a": [1]}), unordered({"a": [1], "b": []}))


if __name__ == "__main__":
    unittest.main()
