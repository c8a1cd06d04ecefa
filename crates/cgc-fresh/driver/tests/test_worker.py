"""Unit tests of the `Worker` (`worker.py`): what a driver process keeps
between requests, and that a one-shot run keeps nothing. The optional
modules it loads are stand-ins here.

Run: `python3 -m unittest discover -s crates/cgc-fresh/driver/tests`."""

import json
import types
import unittest
from unittest import mock

from driver_module import companion
from stand_ins import stand_in_modules

protocol = companion("protocol")
worker_module = companion("worker")

CALLS = "codegraphcontext.tools.indexing.resolution.calls"


class StandInCompanions:
    """`worker.companion` with stand-in memo and cache modules, counting
    what each makes."""

    def __init__(self):
        self.made = []
        made = self.made

        class StoredEdgeMemo:
            def __init__(self):
                made.append("stored_edges")

        class ResolutionMemo:
            off = None

            def __init__(self, calls):
                made.append("resolution_memo")

            def resolve(self, all_ok, imports_map, timings):
                return ("memo", all_ok)

        class Resident:
            def __init__(self):
                made.append("resident")

        def open_cache(path, repo_posix, resident=None, cached_suffixes=()):
            return ("cache", path, resident, cached_suffixes)

        self.modules = {
            "stored_edges": types.SimpleNamespace(StoredEdgeMemo=StoredEdgeMemo),
            "resolution_memo": types.SimpleNamespace(ResolutionMemo=ResolutionMemo),
            "parse_cache": types.SimpleNamespace(Resident=Resident, open_cache=open_cache),
        }

    def __call__(self, name):
        return self.modules[name]


class WorkerStateTest(unittest.TestCase):
    def setUp(self):
        self.companions = StandInCompanions()
        patched = mock.patch.object(worker_module, "companion", self.companions)
        patched.start()
        self.addCleanup(patched.stop)
        calls = {CALLS: {"build_function_call_groups": lambda all_ok, imports_map, _x, diagnostics: ("shipped",)}}
        context = stand_in_modules(**calls)
        context.__enter__()
        self.addCleanup(context.__exit__, None, None, None)

    def test_a_one_shot_worker_keeps_nothing_for_a_next_request(self):
        worker = worker_module.Worker({}, lambda _data: None)
        self.assertIsNone(worker.stored_edge_memo())
        self.assertEqual(worker.resolve_calls([], {}, {}), ("shipped",))
        cache = worker.open_parse_cache("/state/cache.json", "/repo", (".py",))
        self.assertEqual(cache, ("cache", "/state/cache.json", None, (".py",)), "no resident part")
        self.assertEqual(self.companions.made, [], "no memo made")
        self.assertIsNone(worker.prepared)
        self.assertIsNone(worker.open_parse_cache(None, "/repo", (".py",)), "no path: no cache")

    def test_a_serving_worker_makes_its_memos_once_and_keeps_them(self):
        worker = worker_module.Worker({}, lambda _data: None, serving=True)
        memo = worker.stored_edge_memo()
        self.assertIsNotNone(memo)
        self.assertIs(worker.stored_edge_memo(), memo)
        self.assertEqual(worker.resolve_calls(["a"], {}, {}), ("memo", ["a"]))
        worker.resolve_calls(["b"], {}, {})
        first = worker.open_parse_cache("/state/cache.json", "/repo", (".py",))
        second = worker.open_parse_cache("/state/cache.json", "/repo", (".py",))
        self.assertIsNotNone(first[2])
        self.assertIs(first[2], second[2], "the same resident part for every request")
        self.assertEqual(sorted(self.companions.made), ["resident", "resolution_memo", "stored_edges"])

    def test_two_workers_share_nothing(self):
        one = worker_module.Worker({}, lambda _data: None, serving=True)
        other = worker_module.Worker({}, lambda _data: None, serving=True)
        self.assertIsNot(one.stored_edge_memo(), other.stored_edge_memo())
        self.assertIsNot(one.ignore_memo, other.ignore_memo)
        one.ignore_memo["rules"] = {"a.py": True}
        self.assertEqual(other.ignore_memo, {})

    def test_a_memo_whose_module_does_not_load_is_none_and_is_not_tried_again(self):
        def missing(name):
            self.companions.made.append(f"tried {name}")
            raise ImportError(name)

        with mock.patch.object(worker_module, "companion", missing), \
                mock.patch("sys.stderr"):
            worker = worker_module.Worker({}, lambda _data: None, serving=True)
            self.assertIsNone(worker.stored_edge_memo())
            self.assertIsNone(worker.stored_edge_memo())
            self.assertEqual(worker.resolve_calls([], {}, {}), ("shipped",))
            self.assertEqual(worker.resolve_calls([], {}, {}), ("shipped",))
            self.assertIsNone(worker.open_parse_cache("/state/cache.json", "/repo", (".py",)))
        self.assertEqual(self.companions.made, ["tried stored_edges", "tried resolution_memo", "tried parse_cache"])

    def test_a_prepared_tree_is_spent_by_the_next_request(self):
        class Prepared:
            tree = "the tree"
            cache_timings = {}
            step1_s = 0.1

            def still_holds(self, *_args):
                return True

        worker = worker_module.Worker({}, lambda _data: None, serving=True)
        worker.keep_prepared(Prepared())
        self.assertEqual(worker.take_prepared("/repo", [], set(), (), {}), "the tree")
        self.assertIsNone(worker.prepared)
        timings = {}
        self.assertIsNone(worker.take_prepared("/repo", [], set(), (), timings))
        self.assertEqual(timings, {"prepared_used": 0})
        # A newer prepare replaces an older one; a failed one leaves none.
        worker.keep_prepared(Prepared())
        worker.keep_prepared(None)
        self.assertIsNone(worker.take_prepared("/repo", [], set(), (), {}))


class WorkerOutputTest(unittest.TestCase):
    def test_the_result_line_goes_to_the_workers_stdout(self):
        written = []
        worker_module.Worker({}, written.append).emit({"ok": True, "protocol": protocol.PROTOCOL})
        (line,) = written
        text = line.decode("utf-8")
        self.assertTrue(text.startswith(protocol.RESULT_PREFIX) and text.endswith("\n"), text)
        self.assertEqual(json.loads(text[len(protocol.RESULT_PREFIX):]), {"ok": True, "protocol": 1})

    def test_progress_lines_go_there_too_and_a_quiet_reporter_writes_nothing(self):
        written = []
        worker = worker_module.Worker({}, written.append, serving=True)
        worker.progress_reporter(None, quiet=True).phase("reading")
        self.assertEqual(written, [])
        worker.progress_reporter(3).phase("reading")
        self.assertEqual(written, [protocol.PROGRESS_PREFIX.encode() + b'{"phase": "reading", "serial": 3}\n'])

    def test_the_version_gate_is_read_once_per_worker(self):
        cgc_setup = companion("cgc_setup")
        with mock.patch.object(cgc_setup, "cgc_version", return_value="0.7.0") as version:
            worker = worker_module.Worker({"allow_unproven": True}, lambda _data: None, serving=True)
            gate = worker.gate()
            self.assertIs(worker.gate(), gate)
            self.assertTrue(gate.allowed)
            self.assertEqual(version.call_count, 1)
            self.assertFalse(worker_module.Worker({}, lambda _data: None).gate().allowed)


if __name__ == "__main__":
    unittest.main()
