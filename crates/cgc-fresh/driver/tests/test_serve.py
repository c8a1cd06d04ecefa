"""Unit tests of the driver's requests and the worker's loop (`serve.py`):
a request's checks before anything runs, and the loop reading request
lines from a pipe on stdin.

Run: `python3 -m unittest discover -s crates/cgc-fresh/driver/tests`."""

import json
import os
import types
import unittest
from unittest import mock

from driver_module import companion, install_finder

protocol = companion("protocol")
serve = companion("serve")
cgc_setup = companion("cgc_setup")
apply = companion("apply")
worker_module = companion("worker")
entry = install_finder()


def run_request(opts, paths, probe=False):
    """`serve.run_request` by a one-shot worker of `opts`."""
    return serve.run_request(worker_module.Worker(opts, lambda _data: None), paths, probe=probe)


class RunRequestTest(unittest.TestCase):
    def test_a_path_outside_the_workspace_is_refused_before_anything_runs(self):
        with mock.patch.object(cgc_setup, "probe_api", return_value=([], {})), \
                mock.patch.object(cgc_setup, "cgc_version", return_value="0.6.13"), \
                mock.patch.object(apply, "run_apply", side_effect=AssertionError("applied")):
            for path in ("/etc/passwd", "../x.py", "..", "a/../../x.py", "a/.."):
                result, code = run_request({}, [path])
                self.assertEqual(code, protocol.EXIT_UNSUPPORTED, path)
                self.assertIn("not a workspace-relative path", result["error"])
                self.assertTrue(result["unsupported"])
                self.assertNotIn("_t0", result["timings"])

    def test_a_path_inside_the_workspace_is_workspace_relative(self):
        for path in ("a.py", "pkg/a.py", "pkg/..a.py", "a..b/c.py"):
            self.assertTrue(serve.is_workspace_relative(path), path)
        for path in ("/a.py", "..", "a/../../b.py", "a/../b.py", 3):
            self.assertFalse(serve.is_workspace_relative(path), path)

    def test_without_paths_or_probe_there_is_nothing_to_do(self):
        result, code = run_request({}, None)
        self.assertEqual((code, result["ok"]), (protocol.EXIT_USAGE, False))

    def test_an_unproven_cgc_version_applies_nothing_without_the_opt_in(self):
        # The worker's own check (`cgc_seam.py`): the probe passed for the
        # CGC of its time, the worker imported another.
        with mock.patch.object(cgc_setup, "probe_api", return_value=([], {})), \
                mock.patch.object(cgc_setup, "cgc_version", return_value="0.7.0"), \
                mock.patch.object(apply, "run_apply", side_effect=AssertionError("applied")):
            result, code = run_request({}, ["a.py"])
        self.assertEqual(code, protocol.EXIT_UNSUPPORTED)
        self.assertTrue(result["unsupported"])
        self.assertIn("CodeGraphContext 0.7.0 is not a version", result["error"])

    def test_with_the_opt_in_an_unproven_cgc_version_applies(self):
        with mock.patch.object(cgc_setup, "probe_api", return_value=([], {})), \
                mock.patch.object(cgc_setup, "cgc_version", return_value="0.7.0"), \
                mock.patch.object(apply, "run_apply", return_value={"paths": {"a.py": "written"}}) as applied:
            result, code = run_request({"allow_unproven": True}, ["a.py"])
        self.assertEqual(code, protocol.EXIT_OK, result)
        applied.assert_called_once()

    def test_the_probe_refuses_an_unproven_version_and_names_the_opt_in_when_allowed(self):
        with mock.patch.object(cgc_setup, "probe_api", return_value=([], {})), \
                mock.patch.object(cgc_setup, "cgc_version", return_value="0.7.0"), \
                mock.patch.object(cgc_setup, "probe_backend", return_value=("kuzudb", None)):
            refused, code = run_request({}, None, probe=True)
            self.assertEqual((code, refused["ok"]), (protocol.EXIT_UNSUPPORTED, False))
            self.assertIn("cgc.allowUnprovenVersion = true", refused["error"])
            allowed, code = run_request({"allow_unproven": True}, None, probe=True)
        self.assertEqual((code, allowed["ok"]), (protocol.EXIT_OK, True), allowed)
        self.assertIn("0.7.0", allowed["unproven"])

    def test_the_opt_in_is_a_root_option(self):
        opts = entry.parse_argv(["--db", "kuzudb", "--allow-unproven-cgc", "--probe"])
        self.assertTrue(opts["allow_unproven"])
        self.assertFalse(entry.parse_argv(["--probe"])["allow_unproven"])

    def test_a_cgc_lacking_the_recipes_functions_is_unsupported(self):
        with mock.patch.object(cgc_setup, "probe_api", return_value=(["GraphWriter.x"], {})):
            result, code = run_request({}, ["a.py"])
        self.assertEqual(code, protocol.EXIT_UNSUPPORTED)
        self.assertIn("GraphWriter.x", result["error"])


class StandInPauses:
    def __init__(self):
        self.told = []

    def next(self, _now):
        return "exit", 5.0

    def __getattr__(self, name):
        def told(*_args):
            self.told.append(name)
            return False

        return told


class StandInTools:
    def __init__(self):
        self.served = []

    @staticmethod
    def is_request(request):
        return isinstance(request, dict) and "tools" in request

    def serve_request(self, request, _database, _write, _passthrough):
        self.served.append(request)

    @staticmethod
    def hold_seconds(_request):
        return 0.0


class ServeLinesTest(unittest.TestCase):
    """The worker's loop reading request lines from a pipe on stdin. Its
    result lines are returned; its progress lines, which the stand-in
    requests make through `report(progress)`, are kept in `self.progress`
    (in order, with the serial of each result line that followed them)."""

    def serve(self, data, codes=None, report=lambda _progress: None):
        codes = list(codes or [])
        runs = []

        def run_request(_worker, paths, probe=False, baseline=False, progress=None):
            runs.append(("baseline", paths) if baseline else paths)
            if progress is not None:
                report(progress)
            code = codes.pop(0) if codes else protocol.EXIT_OK
            return {"protocol": protocol.PROTOCOL, "ok": code == 0}, code

        def run_prepare(_worker, progress=None):
            runs.append("prepare")
            report(progress)

        released = []
        database = types.SimpleNamespace(release=lambda: released.append(len(runs)), holding=False)
        tools, pauses = StandInTools(), StandInPauses()
        read_in, write_in = os.pipe()
        read_out, write_out = os.pipe()
        stdin = os.dup(0)
        try:
            os.write(write_in, data)
            os.close(write_in)
            os.dup2(read_in, 0)
            worker = worker_module.Worker({}, lambda data: os.write(write_out, data), serving=True)
            with mock.patch.object(serve, "run_request", run_request), \
                    mock.patch.object(serve, "run_prepare", run_prepare):
                code = serve.serve_lines(worker, tools, pauses, database)
        finally:
            os.dup2(stdin, 0)
            os.close(stdin)
            os.close(read_in)
            os.close(write_out)
        with os.fdopen(read_out, "rb") as out:
            written = out.read().decode("utf-8").splitlines()
        lines, self.progress = [], []
        for line in written:
            if line.startswith(protocol.PROGRESS_PREFIX):
                self.progress.append(("progress", json.loads(line[len(protocol.PROGRESS_PREFIX):])))
            else:
                self.assertTrue(line.startswith(protocol.RESULT_PREFIX), line)
                lines.append(json.loads(line[len(protocol.RESULT_PREFIX):]))
                self.progress.append(("result", lines[-1].get("serial")))
        return code, lines, runs, tools.served, pauses.told, released

    def test_an_applys_progress_lines_carry_its_serial_and_come_before_its_result(self):
        def report(progress):
            progress.phase("parsing", total=3)
            progress.advance(3)
            progress.phase("reading")

        code, lines, _runs, _served, _told, _released = self.serve(
            b'{"serial": 1, "paths": ["a.py"]}\n{"serial": 2, "paths": ["b.py"]}\n', report=report)
        self.assertEqual(code, protocol.EXIT_OK)
        self.assertEqual(len(lines), 2)
        request = [
            ("progress", {"phase": "parsing", "done": 0, "total": 3}),
            ("progress", {"phase": "parsing", "done": 3, "total": 3}),
            ("progress", {"phase": "reading"}),
        ]
        expected = [(kind, dict(obj, serial=serial)) for serial in (1, 2) for (kind, obj) in request]
        expected.insert(3, ("result", 1))
        expected.append(("result", 2))
        self.assertEqual(self.progress, expected)

    def test_a_prepares_parse_is_reported_without_a_serial_and_a_probe_reports_nothing(self):
        def report(progress):
            progress.phase("parsing", total=2)
            progress.advance()

        self.serve(b'{"serial": 4, "probe": true}\n{"prepare": true}\n', report=report)
        self.assertEqual(self.progress, [
            ("result", 4),
            ("progress", {"serial": None, "phase": "parsing", "done": 0, "total": 2}),
            ("progress", {"serial": None, "phase": "parsing", "done": 1, "total": 2}),
        ])

    def test_each_sync_line_is_answered_with_its_serial_and_exit(self):
        code, lines, runs, _served, told, released = self.serve(
            b'{"serial": 1, "paths": ["a.py"]}\n{"serial": 2, "paths": []}\n')
        self.assertEqual(code, protocol.EXIT_OK)
        self.assertEqual(runs, [["a.py"], []])
        self.assertEqual([(line["serial"], line["exit"]) for line in lines], [(1, 0), (2, 0)])
        self.assertEqual(told, ["after_sync", "after_sync"])
        self.assertEqual(released, [0, 1], "a held database is released before each sync")

    def test_a_baseline_line_asks_for_the_baseline_and_a_bad_flag_is_no_request(self):
        code, lines, runs, _served, _told, _released = self.serve(
            b'{"serial": 1, "paths": [], "baseline": true}\n{"serial": 2, "paths": [], "baseline": "yes"}\n'
            b'{"serial": 3, "paths": ["a.py"], "baseline": false}\n')
        self.assertEqual(code, protocol.EXIT_OK)
        self.assertEqual(runs, [("baseline", []), ["a.py"]])
        self.assertEqual([(line["serial"], line["exit"]) for line in lines], [(1, 0), (2, 2), (3, 0)])
        self.assertIn("baseline is not true or false", lines[1]["error"])

    def test_lines_that_are_no_request_are_answered_and_the_worker_goes_on(self):
        code, lines, runs, _served, _told, _released = self.serve(
            b'not json\n{"serial": 5, "paths": "a.py"}\n{"serial": 6}\n[1]\n{"serial": 7, "paths": ["b.py"]}\n')
        self.assertEqual(code, protocol.EXIT_OK)
        self.assertEqual(runs, [["b.py"]])
        errors = [(line.get("serial"), line["exit"], line["error"]) for line in lines[:4]]
        self.assertEqual([e[:2] for e in errors], [(None, 2), (5, 2), (6, 2), (None, 2)])
        self.assertTrue(all(e[2].startswith("not a request: ") for e in errors))
        self.assertIn("paths is not a list", errors[1][2])
        self.assertEqual(lines[4]["serial"], 7)

    def test_a_probe_line_is_answered_like_the_one_shot_probe_with_its_serial(self):
        # The service's warm-up: the probe (no paths), then a sync.
        code, lines, runs, _served, told, released = self.serve(
            b'{"serial": 4, "probe": true}\n{"serial": 5, "paths": ["a.py"]}\n')
        self.assertEqual(code, protocol.EXIT_OK)
        self.assertEqual(runs, [None, ["a.py"]])
        self.assertEqual([(line["serial"], line["exit"]) for line in lines], [(4, 0), (5, 0)])
        self.assertEqual(told, ["after_sync"], "a probe leaves no work for a pause")
        self.assertEqual(released, [1], "a probe opens no database to release")

    def test_tool_requests_and_prepares_are_not_answered_as_syncs(self):
        _code, lines, runs, served, told, _released = self.serve(
            b'{"serial": 1, "tools": "list"}\n{"prepare": true}\n{"prepare": 1, "serial": 3, "paths": []}\n')
        self.assertEqual(served, [{"serial": 1, "tools": "list"}])
        self.assertEqual(runs, ["prepare", []], "only `true` asks for a prepare")
        self.assertEqual([line["serial"] for line in lines], [3])
        self.assertEqual(told, ["after_call", "after_prepare", "after_sync"])

    def test_a_failed_sync_ends_the_worker_with_its_code(self):
        code, lines, runs, _served, _told, _released = self.serve(
            b'{"serial": 1, "paths": ["a.py"]}\n{"serial": 2, "paths": ["b.py"]}\n', codes=[protocol.EXIT_FAILED])
        self.assertEqual(code, protocol.EXIT_FAILED)
        self.assertEqual(runs, [["a.py"]])
        self.assertEqual(lines[0]["exit"], protocol.EXIT_FAILED)

    def test_an_unsupported_sync_does_not_end_it(self):
        code, _lines, runs, _served, _told, _released = self.serve(
            b'{"serial": 1, "paths": ["a.py"]}\n{"serial": 2, "paths": ["b.py"]}\n', codes=[protocol.EXIT_UNSUPPORTED])
        self.assertEqual((code, len(runs)), (protocol.EXIT_OK, 2))

    def test_a_request_longer_than_the_bound_ends_the_worker(self):
        with mock.patch.object(protocol, "MAX_REQUEST_BYTES", 64):
            code, lines, runs, _served, _told, _released = self.serve(b"x" * 100)
        self.assertEqual((code, runs), (protocol.EXIT_USAGE, []))
        self.assertIn("longer than 64 bytes", lines[0]["error"])


if __name__ == "__main__":
    unittest.main()
