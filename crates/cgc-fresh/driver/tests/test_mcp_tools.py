"""Unit tests of the MCP tools' pure parts (`mcp_tools.py`): which worker
lines are tool requests, the chunk lines an answer is printed as, and the
answers given without CodeGraphContext (a release, a refused tool, a
malformed call, a failing handler). The database is a stand-in.

Run: `python3 -m unittest discover -s crates/cgc-fresh/driver/tests`."""

import json
import unittest

from driver_module import load

tools = load("mcp_tools.py", "cgc_fresh_mcp_tools")


class StandInDatabase:
    """A `CallDatabase` that counts what it was asked; `release` may fail."""

    def __init__(self, release_raises=None):
        self.opened = 0
        self.released = 0
        self.release_raises = release_raises

    def open(self, repo, hold=False):
        self.opened += 1
        raise AssertionError("the database was opened")

    def release(self):
        self.released += 1
        if self.release_raises is not None:
            raise self.release_raises


def lines_of(writes):
    """The chunk lines written, each decoded from its prefix."""
    out = []
    for data in writes:
        text = data.decode("ascii")
        assert text.endswith("\n") and text.count("\n") == 1, text
        assert text.startswith(tools.CHUNK_PREFIX), text
        out.append(json.loads(text[len(tools.CHUNK_PREFIX):]))
    return out


def reassemble(lines):
    parts = sorted(lines, key=lambda line: line["part"])
    return json.loads("".join(line["data"] for line in parts))


class IsRequestTest(unittest.TestCase):
    def test_tool_lists_calls_and_releases_are_tool_requests(self):
        for request in ({"serial": 1, "tools": "list"}, {"serial": 2, "tool": {"name": "x"}},
                        {"tools": "release"}):
            self.assertTrue(tools.is_request(request), request)

    def test_syncs_prepares_and_non_objects_are_not(self):
        for request in ({"serial": 1, "paths": ["a.py"]}, {"prepare": True}, {}, ["tool"], "tool", None, 3):
            self.assertFalse(tools.is_request(request), request)


class EmitChunksTest(unittest.TestCase):
    def emit(self, serial, member):
        writes = []
        tools.emit_chunks(writes.append, serial, member)
        return lines_of(writes)

    def test_a_small_answer_is_one_chunk(self):
        lines = self.emit(7, {"result": {"released": True}})
        self.assertEqual(len(lines), 1)
        self.assertEqual((lines[0]["serial"], lines[0]["part"], lines[0]["parts"]), (7, 0, 1))
        self.assertEqual(reassemble(lines), {"serial": 7, "mcp": {"result": {"released": True}}})

    def test_a_large_answer_is_cut_into_numbered_chunks_that_reassemble(self):
        # Non-ASCII text: escaped in the answer's JSON, so chunks stay ASCII.
        text = "ü→" * 3000 + "x" * 5000
        member = {"result": {"content": [{"type": "text", "text": text}]}}
        lines = self.emit(3, member)
        self.assertGreater(len(lines), 2)
        self.assertEqual([line["part"] for line in lines], list(range(len(lines))))
        self.assertTrue(all(line["parts"] == len(lines) and line["serial"] == 3 for line in lines))
        self.assertTrue(all(len(line["data"]) <= tools.CHUNK_CHARS for line in lines))
        # Each piece is of the answer's ASCII text, so a line is at most
        # twice a chunk however the text is escaped again.
        self.assertTrue(all(line["data"].isascii() for line in lines))
        # Every chunk but the last is full: no empty or short piece between.
        self.assertTrue(all(len(line["data"]) == tools.CHUNK_CHARS for line in lines[:-1]))
        self.assertEqual(reassemble(lines), {"serial": 3, "mcp": member})

    def test_each_line_stays_within_twice_the_chunk_size_once_escaped(self):
        # Quotes and backslashes double when the chunk is encoded again.
        member = {"result": {"text": '"\\' * 4000}}
        writes = []
        tools.emit_chunks(writes.append, 1, member)
        overhead = len(tools.CHUNK_PREFIX) + 100
        self.assertTrue(all(len(data) <= 2 * tools.CHUNK_CHARS + overhead for data in writes))
        self.assertEqual(reassemble(lines_of(writes))["mcp"], member)

    def test_an_answer_of_exactly_one_chunk_has_no_empty_second_part(self):
        base = json.dumps({"serial": 1, "mcp": {"t": ""}}, ensure_ascii=True)
        member = {"t": "a" * (tools.CHUNK_CHARS - len(base))}
        lines = self.emit(1, member)
        self.assertEqual(len(lines), 1)
        self.assertEqual(len(lines[0]["data"]), tools.CHUNK_CHARS)


class AnswerTest(unittest.TestCase):
    def test_a_release_closes_the_database_and_says_so(self):
        database = StandInDatabase()
        self.assertEqual(tools.answer({"serial": 1, "tools": "release"}, database, "/repo"),
                         {"result": {"released": True}})
        self.assertEqual(database.released, 1)

    def test_every_refused_tool_is_answered_with_what_to_use_instead_and_opens_nothing(self):
        database = StandInDatabase()
        self.assertIn("add_code_to_graph", tools.REFUSED)
        for name, instead in tools.REFUSED.items():
            member = tools.answer({"serial": 1, "tool": {"name": name, "arguments": {"path": "."}},
                                   "hold_ms": 500}, database, "/repo")
            self.assertEqual(member["error"]["code"], -32000, name)
            self.assertEqual(member["error"]["message"], "Tool execution error")
            error = member["error"]["data"]["error"]
            self.assertIn(f"Tool '{name}' is not offered through cgc-fresh mcp", error)
            self.assertTrue(error.endswith(f"Instead, {instead}."), error)
        self.assertEqual((database.opened, database.released), (0, 0))

    def test_a_call_without_a_tool_name_is_invalid_params(self):
        database = StandInDatabase()
        for call in (None, "find_code", {}, {"name": 3}, {"arguments": {}}):
            member = tools.answer({"serial": 1, "tool": call}, database, "/repo")
            self.assertEqual(member["error"]["code"], -32602, call)
            self.assertIn("needs a tool name", member["error"]["message"])
        self.assertEqual(database.opened, 0)

    def test_arguments_that_are_not_an_object_are_invalid_params_even_for_a_refused_tool(self):
        database = StandInDatabase()
        for arguments in ([1], "x", 3):
            member = tools.answer({"tool": {"name": "delete_repository", "arguments": arguments}}, database, "/r")
            self.assertEqual(member["error"], {"code": -32602,
                                               "message": "Invalid params: arguments must be an object"})


class ServeRequestTest(unittest.TestCase):
    class Stop(Exception):
        pass

    def serve(self, request, database):
        writes = []
        tools.serve_request(request, database, writes.append, self.Stop)
        return reassemble(lines_of(writes))

    def test_an_answer_is_printed_with_the_requests_serial(self):
        answer = self.serve({"serial": 41, "tools": "release"}, StandInDatabase())
        self.assertEqual(answer, {"serial": 41, "mcp": {"result": {"released": True}}})

    def test_a_failing_handler_is_an_internal_error_never_silent(self):
        answer = self.serve({"serial": 2, "tools": "release"}, StandInDatabase(RuntimeError("disk gone")))
        self.assertEqual(answer["mcp"], {"error": {"code": -32603, "message": "Internal error: disk gone"}})

    def test_cgcs_exit_is_an_internal_error_naming_its_code(self):
        answer = self.serve({"serial": 3, "tools": "release"}, StandInDatabase(SystemExit(4)))
        self.assertEqual(answer["mcp"]["error"],
                         {"code": -32603, "message": "Internal error: CodeGraphContext exited with 4"})

    def test_the_passthrough_exception_is_not_answered(self):
        writes = []
        with self.assertRaises(self.Stop):
            tools.serve_request({"serial": 4, "tools": "release"}, StandInDatabase(self.Stop()), writes.append,
                                self.Stop)
        self.assertEqual(writes, [])


if __name__ == "__main__":
    unittest.main()
