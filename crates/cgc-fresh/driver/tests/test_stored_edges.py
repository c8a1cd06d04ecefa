"""Unit tests of the stored-edge memo's file rules (`stored_edges.py`):
plain files stand in for Kùzu's database file, no CGC needed.

Run: `python3 -m unittest discover -s crates/cgc-fresh/driver/tests`."""

import importlib.util
import os
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
# One stored link edge's signature (its fifth member is the target's path).
EDGE = ("CALLS", "/repo/a.py", "run", "helper", "/repo/b.py")


def load_memo_module():
    spec = importlib.util.spec_from_file_location(
        "cgc_fresh_stored_edges", os.path.join(HERE, "..", "stored_edges.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def rewrite_header(path):
    """What a close that wrote nothing does: the first page rewritten."""
    with open(path, "r+b") as f:
        f.write(b"H" * 16)
    os.utime(path, ns=(os.stat(path).st_atime_ns, os.stat(path).st_mtime_ns + 1_000_000))


def write_page(path, memo):
    """Another writer: a page after the header changes."""
    with open(path, "r+b") as f:
        f.seek(memo.HEADER_BYTES + 10)
        f.write(b"written")
    os.utime(path, ns=(os.stat(path).st_atime_ns, os.stat(path).st_mtime_ns + 1_000_000))


class MemoCase(unittest.TestCase):
    def setUp(self):
        self.stored_edges = load_memo_module()
        self.dir = tempfile.TemporaryDirectory()
        self.path = os.path.join(self.dir.name, "kuzudb")
        with open(self.path, "wb") as f:
            f.write(b"\0" * (self.stored_edges.HEADER_BYTES * 3))
        self.memo = self.stored_edges.StoredEdgeMemo()

    def tearDown(self):
        self.dir.cleanup()

    def sync_closed(self):
        """A sync's request remembered its edges and closed cleanly."""
        place = self.memo.place("kuzudb", self.path, "/repo")
        self.memo.remember(place, {"/repo/a.py": {EDGE}}, {"/repo/a.py"}, unlink=set(), changed=set(),
                           relinked=set(), expected={}, deleted=set(), written=set())
        self.memo.closed(True)
        return place


class SchemaInPlace(MemoCase):
    def test_nothing_known_before_any_close(self):
        self.assertFalse(self.memo.schema_in_place())

    def test_a_read_only_close_makes_the_schema_known_for_the_file_it_left(self):
        rewrite_header(self.path)
        self.memo.read_only_closed("kuzudb", self.path, memo_held=False)
        self.assertTrue(self.memo.schema_in_place())
        self.assertTrue(self.memo.schema_in_place(self.path, compare=False))
        # Another database path is not this one.
        self.assertFalse(self.memo.schema_in_place(self.path + "-other", compare=False))

    def test_anyone_elses_close_or_write_makes_it_unknown(self):
        self.memo.read_only_closed("kuzudb", self.path, memo_held=False)
        rewrite_header(self.path)
        self.assertFalse(self.memo.schema_in_place())

    def test_only_a_one_file_backend_is_remembered(self):
        self.memo.read_only_closed("falkordb", self.path, memo_held=False)
        self.assertFalse(self.memo.schema_in_place())
        self.memo.read_only_closed("kuzudb", None, memo_held=False)
        self.assertFalse(self.memo.schema_in_place())

    def test_a_syncs_clean_close_makes_it_known(self):
        self.sync_closed()
        self.assertTrue(self.memo.schema_in_place())


class ReadOnlyClose(MemoCase):
    def test_a_held_memo_takes_the_identity_the_read_only_close_left(self):
        place = self.sync_closed()
        self.assertTrue(self.memo.left_as_it_was(self.path, compare=False))
        rewrite_header(self.path)
        self.memo.read_only_closed("kuzudb", self.path, memo_held=True)
        self.assertTrue(self.memo.left_as_it_was(self.path, compare=False))
        self.assertEqual(self.memo.recall(place), ({"/repo/a.py": {EDGE}}, {"/repo/a.py"}))

    def test_a_memo_that_did_not_hold_at_the_open_is_not_revived(self):
        # Someone else wrote between the sync and the call; the call's
        # open found the memo not holding.
        place = self.sync_closed()
        write_page(self.path, self.stored_edges)
        self.memo.read_only_closed("kuzudb", self.path, memo_held=False)
        self.assertFalse(self.memo.left_as_it_was(self.path))
        self.assertIsNone(self.memo.recall(place))
        # The schema is still known for the file the call left.
        self.assertTrue(self.memo.schema_in_place(self.path, compare=False))

    def test_the_digest_still_accepts_a_later_header_only_close(self):
        self.sync_closed()
        self.memo.settle()
        rewrite_header(self.path)
        self.memo.read_only_closed("kuzudb", self.path, memo_held=True)
        # The person's own read-only query: header only.
        rewrite_header(self.path)
        self.assertFalse(self.memo.left_as_it_was(self.path, compare=False))
        self.assertTrue(self.memo.left_as_it_was(self.path))


if __name__ == "__main__":
    unittest.main()
