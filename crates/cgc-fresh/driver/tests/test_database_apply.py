"""Unit tests of the rules of the database phase that need no database
(`database_apply.py`, `kuzu_reader.py`): what step 3 writes, deletes and
re-links given the tree and what the graph stores (`plan_writes`), which
Modules get their metadata set again, and how the phases are timed. The
tree is a stand-in holding only what those rules read.

Run: `python3 -m unittest discover -s crates/cgc-fresh/driver/tests`."""

import types
import unittest
from unittest import mock

from driver_module import companion

database_apply = companion("database_apply")
kuzu_reader = companion("kuzu_reader")


class SmallRulesTest(unittest.TestCase):
    def test_the_metadata_row_is_the_last_on_falkordb_the_first_elsewhere(self):
        self.assertEqual(database_apply.module_metadata_row("falkordb"), "last_row")
        self.assertEqual(database_apply.module_metadata_row("falkordb-remote"), "last_row")
        self.assertEqual(database_apply.module_metadata_row("kuzudb"), "first_row")

    def test_binder_errors_are_told_from_others(self):
        for text in ("Binder exception: Cannot find property x", "Cannot find a valid label", "Table X does not exist"):
            self.assertTrue(kuzu_reader.is_binder_error(RuntimeError(text)), text)
        self.assertFalse(kuzu_reader.is_binder_error(RuntimeError("Connection refused")))
        self.assertTrue(kuzu_reader.is_cgc_binder_error(RuntimeError("Cannot find a valid label")))
        self.assertFalse(kuzu_reader.is_cgc_binder_error(RuntimeError("Table X does not exist")))


REPO = "/r"


def path(rel):
    return f"{REPO}/{rel}"


def changed(*rels):
    return [(rel, path(rel)) for rel in rels]


def stand_in_tree(parsed, expected=None, targets=(), csharp_paths=()):
    """Step 1's outcome as `plan_writes` reads it; `parsed`: each file's
    parse result but its path, by relative path."""
    return types.SimpleNamespace(
        parsed={path(rel): ("file", {"path": path(rel), **fd}) for rel, fd in parsed.items()},
        expected=expected or {},
        targets=list(targets),
        csharp_paths=list(csharp_paths),
    )


def calls_into(dst, caller="caller"):
    """A stored CALLS signature (`signatures.stored_signature`) into `dst`."""
    return ("CALLS", caller, 1, "callee", dst, 3, None, None, 1.0, -1, None)


class PlanWritesTest(unittest.TestCase):
    def test_each_changed_file_gets_the_outcome_a_from_scratch_index_gives(self):
        tree = stand_in_tree({
            "new.py": {}, "edited.py": {},
            # Unparsable: a bare File node, as `cgc index` writes it.
            "broken.py": {"error": "syntax"},
            # No parser: no node at all.
            "tool.xyz": {"error": "no parser", "unsupported": True},
            "other.xyz": {"error": "no parser", "unsupported": True},
        })
        stored_files = {path(p) for p in ("edited.py", "broken.py", "tool.xyz", "gone.py")}
        plan = database_apply.plan_writes(
            tree, changed("new.py", "gone.py", "edited.py", "never.py", "tool.xyz", "broken.py", "other.xyz"),
            {}, stored_files)
        self.assertEqual(plan.outcome, {
            "new.py": "added", "gone.py": "deleted", "edited.py": "modified", "never.py": "not_indexed",
            "tool.xyz": "deleted", "broken.py": "modified", "other.xyz": "not_indexed",
        })
        self.assertEqual(plan.written, {path("new.py"), path("edited.py"), path("broken.py")})
        self.assertEqual(plan.to_delete, [path("gone.py"), path("tool.xyz")])
        # A file the graph held is deleted before it is written again.
        self.assertEqual(plan.rewritten, {path("edited.py"), path("broken.py")})
        self.assertEqual(plan.deletes, [path(p) for p in ("broken.py", "edited.py", "gone.py", "tool.xyz")])

    def test_the_files_relinked_are_the_written_their_dependants_and_any_whose_edges_differ(self):
        same = calls_into(path("lib.py"))
        tree = stand_in_tree(
            {"a.py": {}, "user.py": {}, "caller.py": {}, "drifted.py": {}, "still.py": {}, "lib.py": {},
             "Form.cs": {}, "err.py": {"error": "syntax"}},
            expected={path("a.py"): {same}, path("user.py"): {calls_into(path("a.py"))},
                      path("still.py"): {same}},
            # caller.py's link rows point into a.py (step 1's resolution).
            targets=[(path("caller.py"), path("a.py")), (path("still.py"), path("lib.py"))],
            csharp_paths=[path("Form.cs")],
        )
        stored_edges = {
            path("user.py"): {calls_into(path("a.py"))},
            path("err.py"): {calls_into(path("a.py"))},
            path("drifted.py"): {calls_into(path("lib.py"))},
            path("still.py"): {same},
        }
        plan = database_apply.plan_writes(tree, changed("a.py"), stored_edges, {path("a.py")})
        self.assertEqual(plan.dependants, {path("user.py"), path("err.py")})
        self.assertEqual(plan.differing, {path("a.py"), path("drifted.py")})
        # err.py did not parse: it has no link rows to write.
        relinked = {path(p) for p in ("a.py", "user.py", "caller.py", "drifted.py", "Form.cs")}
        self.assertEqual(plan.relink, relinked)
        self.assertEqual(plan.unlink, sorted(relinked))
        counts = plan.counts(files=8)
        # a.py differs but is written anyway: not a signature change.
        self.assertEqual((counts["relinked"], counts["dependants"], counts["signature_changed"]), (5, 2, 1))
        self.assertEqual((counts["written"], counts["deleted"], counts["files"]), (1, 0, 8))

    def test_a_changed_file_is_nobodys_dependant(self):
        stored_edges = {
            path("a.py"): {calls_into(path("b.py"))},
            path("c.py"): {calls_into(path("b.py")), calls_into(path("c.py"))},
            path("d.py"): {calls_into(path("d.py"))},
        }
        self.assertEqual(database_apply.dependants_of(stored_edges, {path("a.py"), path("b.py")}), {path("c.py")})


class ModuleMetadataTest(unittest.TestCase):
    def test_the_written_files_imports_name_their_modules_as_cgcs_writer_does(self):
        parsed = {
            path("p.py"): ("file", {"lang": "python", "imports": [
                {"source": "pkg.mod", "name": "mod"}, {"name": "json"}, {"name": ""}]}),
            path("w.js"): ("file", {"lang": "javascript", "imports": [
                {"source": "./x", "name": "x"}, {"source": "react"}, {"full_import_name": "a.b"}]}),
            path("err.py"): ("file", {"error": "syntax", "imports": [{"name": "lost"}]}),
            path("none.py"): ("file", {"lang": "python", "imports": None}),
            path("unwritten.py"): ("file", {"lang": "python", "imports": [{"name": "other"}]}),
        }
        written = {path("p.py"), path("w.js"), path("err.py"), path("none.py")}
        self.assertEqual(database_apply.imported_module_names(parsed, written),
                         {"pkg.mod", "json", "x", "react", "a.b"})

    def test_only_modules_no_file_defines_get_their_first_importers_metadata(self):
        module_first = {
            "os": {"first_row": ("os", "python"), "last_row": ("os.path", "python")},
            "json": {"first_row": ("json", "python"), "last_row": ("json", "javascript")},
            "mine": {"first_row": ("mine", "python"), "last_row": ("mine", "python")},
        }
        touched = {"os", "json", "mine", "unknown", None, ""}
        self.assertEqual(
            database_apply.module_metadata_rows(touched, {"mine"}, module_first, "first_row"),
            [{"name": "json", "fin": "json", "lang": "python"}, {"name": "os", "fin": "os", "lang": "python"}])
        self.assertEqual(
            database_apply.module_metadata_rows(touched, {"mine"}, module_first, "last_row"),
            [{"name": "json", "fin": "json", "lang": "javascript"},
             {"name": "os", "fin": "os.path", "lang": "python"}])


class PhaseClockTest(unittest.TestCase):
    def test_a_lap_starts_the_next_phase_a_mark_does_not(self):
        timings = {}
        ticks = [10.0, 10.5, 11.0, 11.25, 12.0, 12.1234, 13.0]
        with mock.patch.object(database_apply.time, "monotonic", side_effect=ticks):
            clock = database_apply.PhaseClock(timings)
            clock.mark("deletes_s")
            clock.lap("nodes_s")
            clock.mark("links_s")
            clock.lap("post_s")
        self.assertEqual(timings, {"deletes_s": 0.5, "nodes_s": 1.0, "links_s": 0.75, "post_s": 0.873})


if __name__ == "__main__":
    unittest.main()
