"""Unit tests of the stored-edge memo's file rules (`stored_edges.py`):
plain files stand in for Kùzu's database file, no CGC needed.

Run: `python3 -m unittest discover -s crates/cgc-fresh/driver/tests`."""

import os
import tempfile
import unittest

from driver_module import load

# One stored link edge's signature (its fifth member is the target's path).
EDGE = ("CALLS", "/repo/a.py", "run", "helper", "/repo/b.py")


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
        self.stored_edges = load("stored_edges.py", "cgc_fresh_stored_edges")
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


class Remember(MemoCase):
    """What the memo holds after a request's writes (the module doc's
    "What it holds after a request")."""

    def remember_and_close(self, stored, stored_files, **writes):
        place = self.memo.place("kuzudb", self.path, "/repo")
        rules = {"unlink": set(), "changed": set(), "relinked": set(), "expected": {}, "deleted": set(),
                 "written": set()}
        rules.update(writes)
        self.memo.remember(place, stored, stored_files, **rules)
        self.memo.closed(True)
        return self.memo.recall(place)

    def test_the_requests_writes_are_applied_to_the_stored_edges(self):
        into_b = ("CALLS", "/repo/a.py", "run", "helper", "/repo/b.py")
        into_c = ("CALLS", "/repo/a.py", "run", "other", "/repo/c.py")
        from_d = ("CALLS", "/repo/d.py", "go", "other", "/repo/c.py")
        from_e = ("INHERITS", "/repo/e.py", "E", "B", "/repo/b.py")
        new_e = ("INHERITS", "/repo/e.py", "E", "C", "/repo/c.py")
        stored = {"/repo/a.py": {into_b, into_c}, "/repo/d.py": {from_d}, "/repo/e.py": {from_e}}
        recalled = self.remember_and_close(
            stored, {"/repo/a.py", "/repo/b.py", "/repo/d.py", "/repo/e.py"},
            # b.py changed (edges into it go), d.py unlinked (its edges go),
            # e.py re-linked with new rows; x.py deleted, n.py written.
            changed={"/repo/b.py"}, unlink={"/repo/d.py"}, relinked={"/repo/e.py"},
            expected={"/repo/e.py": {new_e}}, deleted={"/repo/d.py"}, written={"/repo/n.py"})
        edges, files = recalled
        self.assertEqual(edges, {"/repo/a.py": {into_c}, "/repo/e.py": {new_e}})
        self.assertEqual(files, {"/repo/a.py", "/repo/b.py", "/repo/e.py", "/repo/n.py"})

    def test_a_source_left_without_edges_is_not_kept(self):
        edges, _files = self.remember_and_close({"/repo/a.py": {EDGE}}, {"/repo/a.py"}, changed={"/repo/b.py"})
        self.assertEqual(edges, {})

    def test_a_whole_repository_link_pass_drops_the_memo(self):
        for suffix in self.stored_edges.WHOLE_REPOSITORY_SUFFIXES:
            self.memo = self.stored_edges.StoredEdgeMemo()
            self.assertIsNone(self.remember_and_close({"/repo/a.py": {EDGE}}, {"/repo/a.py"},
                                                      changed={"/repo/x" + suffix}), suffix)

    def test_a_failed_close_keeps_nothing(self):
        place = self.memo.place("kuzudb", self.path, "/repo")
        self.memo.remember(place, {"/repo/a.py": {EDGE}}, {"/repo/a.py"}, unlink=set(), changed=set(),
                           relinked=set(), expected={}, deleted=set(), written=set())
        self.memo.closed(False)
        self.assertIsNone(self.memo.recall(place))
        self.assertFalse(self.memo.schema_in_place())

    def test_a_recall_spends_the_memo_and_another_place_gets_nothing(self):
        place = self.sync_closed()
        other = self.memo.place("kuzudb", self.path, "/other-repo")
        self.assertIsNone(self.memo.recall(other))
        self.assertIsNone(self.memo.recall(place), "spent by the first recall")

    def test_only_a_one_file_backend_has_a_place(self):
        self.assertIsNone(self.memo.place("falkordb", self.path, "/repo"))
        self.assertIsNone(self.memo.place("kuzudb", "", "/repo"))
        self.assertIsNone(self.memo.place("kuzudb", None, "/repo"))


class Identity(MemoCase):
    def test_a_write_ahead_log_beside_the_file_means_the_memo_does_not_hold(self):
        place = self.sync_closed()
        for side in self.stored_edges.SIDE_FILES:
            with open(self.path + side, "wb"):
                pass
            self.assertFalse(self.memo.left_as_it_was(self.path), side)
            os.unlink(self.path + side)
        self.assertTrue(self.memo.left_as_it_was(self.path))
        self.assertIsNotNone(self.memo.recall(place))

    def test_a_header_only_close_holds_by_contents_a_page_written_does_not(self):
        place = self.sync_closed()
        self.memo.settle()
        rewrite_header(self.path)
        self.assertTrue(self.memo.left_as_it_was(self.path))
        self.assertEqual(self.memo.recall(place), ({"/repo/a.py": {EDGE}}, {"/repo/a.py"}))
        self.assertTrue(self.memo.by_content)
        place = self.sync_closed()
        self.memo.settle()
        write_page(self.path, self.stored_edges)
        self.assertFalse(self.memo.left_as_it_was(self.path))
        self.assertIsNone(self.memo.recall(place))

    def test_without_a_digest_a_changed_identity_is_a_miss(self):
        place = self.sync_closed()
        rewrite_header(self.path)
        self.assertFalse(self.memo.left_as_it_was(self.path))
        self.assertIsNone(self.memo.recall(place))

    def test_verify_mode_names_the_sources_that_differ(self):
        self.memo.verify = True
        other = ("CALLS", "/repo/a.py", "run", "other", "/repo/c.py")
        self.memo.check(({"/repo/a.py": {EDGE}}, {"/repo/a.py"}), ({"/repo/a.py": {EDGE}}, {"/repo/a.py"}))
        with self.assertRaises(self.stored_edges.StoredEdgeMismatch) as caught:
            self.memo.check(({"/repo/a.py": {EDGE}}, {"/repo/a.py"}), ({"/repo/a.py": {other}}, {"/repo/a.py"}))
        self.assertIn("/repo/a.py", str(caught.exception))
        self.memo.verify = False
        self.memo.check(({"/repo/a.py": {EDGE}}, set()), ({}, set()))


if __name__ == "__main__":
    unittest.main()
