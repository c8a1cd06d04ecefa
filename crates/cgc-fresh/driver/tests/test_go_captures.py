"""Unit tests of the Go parser's query captures in document order
(`session_patches.GoCapturesInOrder`): py-tree-sitter 0.25 gives a capture
name's nodes in the order of a set hashed by memory address, and CGC
0.6.13's Go parser keeps the first call of a name on a line, so which call
a parse kept changed from one parse to the next.

On stand-in modules; the last test parses with the real CGC where it
imports (the driver's virtual environment) and is skipped elsewhere.

Run: `python3 -m unittest discover -s crates/cgc-fresh/driver/tests`."""

import importlib.util
import sys
import tempfile
import unittest
from unittest import mock

from driver_module import companion
from stand_ins import stand_in_modules

session_patches = companion("session_patches")

GO = "codegraphcontext.tools.languages.go"


class Node:
    """A stand-in tree-sitter node: its bytes, its parent and its text."""

    def __init__(self, start, end, parent=None, text=""):
        self.start_byte = start
        self.end_byte = end
        self.parent = parent
        self.text = text

    def __repr__(self):
        return f"Node({self.start_byte}, {self.end_byte}, {self.text!r})"


def first_call_per_name_and_line(captures, line_of):
    """What the Go parser's calls pass keeps: the first call it meets of
    each name on a line."""
    kept = {}
    for node, _name in captures:
        kept.setdefault((node.text, line_of(node)), node)
    return list(kept.values())


class GoCapturesInOrderTest(unittest.TestCase):
    def test_each_names_nodes_come_in_document_order_in_the_places_the_name_held(self):
        decl_a, decl_b = Node(0, 40), Node(50, 90)
        name_a, name_b = Node(5, 8, decl_a, "a"), Node(55, 58, decl_b, "b")
        params_a, params_b = Node(8, 10, decl_a), Node(58, 60, decl_b)
        # As CGC's `execute_query` hands them on: grouped by name, each
        # name's nodes in a set's order.
        shipped = [(decl_b, "function_node"), (decl_a, "function_node"), (name_b, "name"), (name_a, "name"),
                   (params_a, "params"), (params_b, "params")]
        self.assertEqual(session_patches.in_document_order(shipped), [
            (decl_a, "function_node"), (decl_b, "function_node"), (name_a, "name"), (name_b, "name"),
            (params_a, "params"), (params_b, "params")])
        # Names interleaved (an older tree-sitter's list) keep their places.
        self.assertEqual(session_patches.in_document_order([(name_b, "x"), (decl_a, "y"), (name_a, "x")]),
                         [(name_a, "x"), (decl_a, "y"), (name_b, "x")])
        self.assertEqual(session_patches.in_document_order(iter([])), [])

    def test_nodes_that_start_together_come_the_enclosing_first_and_a_parent_before_its_only_child(self):
        root = Node(0, 100)
        outer = Node(10, 50, root)
        inner = Node(10, 20, outer)
        only_child = Node(10, 50, outer)
        for shipped in ([inner, only_child, outer], [only_child, outer, inner], [outer, inner, only_child]):
            captures = [(node, "n") for node in shipped]
            self.assertEqual([node for node, _ in session_patches.in_document_order(captures)],
                             [outer, only_child, inner])

    def test_the_go_parser_keeps_the_first_call_of_a_line_at_every_parse_while_in_force(self):
        # go-jsonnet's `ast/location.go` line 108:
        # `... lr.Begin.String(), lr.End.String())`; the set gave the two
        # `String` captures in either order, one parse to the next.
        begin = Node(56, 62, text="String")
        end = Node(73, 79, text="String")
        sprintf = Node(12, 19, text="Sprintf")
        orders = [[end, sprintf, begin], [sprintf, begin, end], [end, begin, sprintf]]
        parses = iter(orders * 2)

        def execute_query(language, query_string, node):
            return [(n, "name") for n in next(parses)]

        def line_of(_node):
            return 108

        with stand_in_modules(**{GO: {"execute_query": execute_query}}) as modules:
            go = modules[GO]
            with session_patches.GoCapturesInOrder():
                kept = [first_call_per_name_and_line(go.execute_query(None, "calls", None), line_of)
                        for _ in orders]
            self.assertEqual(kept, [[sprintf, begin]] * len(orders))
            self.assertIs(go.execute_query, execute_query, "CGC's own function again after")
            shipped = [first_call_per_name_and_line(go.execute_query(None, "calls", None), line_of)
                       for _ in orders]
            self.assertIn([end, sprintf], shipped, "the stand-in is as arbitrary as the set was")

    def test_without_cgcs_go_parser_nothing_is_patched(self):
        with mock.patch.dict(sys.modules, {GO: None}), session_patches.GoCapturesInOrder() as patched:
            self.assertEqual(patched._undo, [])


def real_cgc():
    try:
        return importlib.util.find_spec("codegraphcontext") is not None and \
            importlib.util.find_spec("tree_sitter") is not None
    except (ImportError, ValueError):
        return False


REAL_SOURCE = """package main

import "fmt"

type Left struct{}

func (l Left) Name() string { return "l" }

func describe(l Left, m Left) string {
\treturn fmt.Sprintf("%s %s", l.Name(), m.Name())
}
"""


@unittest.skipUnless(real_cgc(), "CodeGraphContext and tree-sitter are not installed here")
class RealGoParserTest(unittest.TestCase):
    def test_a_go_file_parses_the_same_every_time_keeping_the_first_call_of_a_line(self):
        from pathlib import Path

        from codegraphcontext.tools.graph_builder import GraphBuilder

        class NoDatabase:
            def get_driver(self, graph_name=None):
                return None

            def get_backend_type(self):
                return "none"

        class OfflineBuilder(GraphBuilder):
            def create_schema(self, graph_name=None):
                return None

        with tempfile.TemporaryDirectory() as d:
            path = Path(d) / "main.go"
            path.write_text(REAL_SOURCE)
            builder = OfflineBuilder(NoDatabase(), None, None)
            with session_patches.GoCapturesInOrder():
                calls = []
                for _ in range(8):
                    parsed = builder.parse_file(Path(d), path, False)
                    calls.append(sorted(c["full_name"] for c in parsed["function_calls"] if c["line_number"] == 10))
        self.assertEqual(calls, [["fmt.Sprintf", "l.Name"]] * 8)


if __name__ == "__main__":
    unittest.main()
