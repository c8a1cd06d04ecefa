"""Unit tests of the signatures the driver compares (`signatures.py`): a
resolved row's and a stored edge's, and which rows CGC's writer stores.

Run: `python3 -m unittest discover -s crates/cgc-fresh/driver/tests`."""

import json
import unittest

from driver_module import companion

sg = companion("signatures")


class SignatureTest(unittest.TestCase):
    ROW = {"caller_file_path": "/r/a.py", "caller_name": "run", "caller_line_number": 3, "called_name": "helper",
           "called_file_path": "/r/b.py", "line_number": 5, "full_call_name": "b.helper", "args": ["x", 1],
           "confidence": 0.9, "resolution_tier": 2, "confidence_label": "EXTRACTED"}
    # What the database returns for the edge the writer stored from ROW.
    RECORD = {"src": "/r/a.py", "sn": "run", "sl": 3, "dn": "helper", "dp": "/r/b.py", "ln": 5, "fcn": "b.helper",
              "ak": json.dumps(["x", 1]), "conf": 0.9000000001, "tier": 2, "cl": "EXTRACTED"}

    def test_a_stored_call_edge_has_the_signature_of_the_row_it_was_written_from(self):
        sig, src = sg.call_signature(self.ROW, False, None)
        self.assertEqual(src, "/r/a.py")
        self.assertEqual(sig, sg.stored_signature("CALLS", "fn", self.RECORD))
        file_sig, _src = sg.call_signature(self.ROW, True, None)
        self.assertEqual(file_sig, sg.stored_signature("CALLS", "file", dict(self.RECORD, sn=None, sl=None)))
        self.assertEqual(file_sig[1:3], (None, None))

    def test_missing_line_numbers_match_as_the_writer_stores_them(self):
        row = {k: v for k, v in self.ROW.items() if k not in ("line_number", "caller_line_number")}
        record = dict(self.RECORD, ln=None, sl=None)
        self.assertEqual(sg.call_signature(row, False, None)[0],
                         sg.stored_signature("CALLS", "fn", record))

    def test_a_row_differing_in_anything_stored_has_another_signature(self):
        sig, _src = sg.call_signature(self.ROW, False, None)
        for key, value in (("line_number", 6), ("args", ["y"]), ("confidence", 0.5), ("called_file_path", "/r/c.py"),
                           ("caller_line_number", 4), ("confidence_label", "INFERRED")):
            self.assertNotEqual(sg.call_signature(dict(self.ROW, **{key: value}), False, None)[0], sig, key)

    def test_a_tier_of_8_or_more_is_a_heuristic_call_and_missing_values_take_the_writers_defaults(self):
        self.assertEqual(sg.call_signature(dict(self.ROW, resolution_tier=8), False, None)[0][0], "HEURISTIC_CALLS")
        self.assertEqual(sg.call_signature(dict(self.ROW, resolution_tier="x"), False, None)[0][0], "CALLS")
        bare = {"caller_file_path": "/r/a.py", "called_name": "f"}
        sig, _src = sg.call_signature(bare, False, None)
        self.assertEqual(sig, ("CALLS", None, 0, "f", None, 0, None, "[]", 0.0, -1, "EXTRACTED"))

    def test_generic_edges_match_their_stored_form(self):
        links = {key: [] for key in ("calls", "inheritance", "implements", "partial_of", "metaclass", "embeds",
                                     "part_of", "decorated_by", "previews", "binds", "companion_of")}
        links["inheritance"] = [{"path": "/r/a.py", "child_name": "A", "parent_name": "B",
                                 "resolved_parent_file_path": "/r/b.py"}]
        links["binds"] = [{"source_path": "/r/a.py", "source_name": "A", "target_name": "T", "target_path": "/r/t.py",
                           "line_number": 9, "provider": "p"}]
        links["metaclass"] = [{"path": "/r/a.py", "child_name": "A", "parent_name": "M",
                               "resolved_parent_file_path": "/r/m.py", "line_number": 2}]
        sigs = sg.row_signatures(links)["/r/a.py"]
        stored = {
            sg.stored_signature("INHERITS", "generic", {"sn": "A", "dn": "B", "dp": "/r/b.py", "x": "EXTRACTED"}),
            sg.stored_signature("BINDS", "generic",
                                 {"sn": "A", "dn": "T", "dp": "/r/t.py", "x": 9, "y": "p", "z": "EXTRACTED"}),
            sg.stored_signature("METACLASS", "generic", {"sn": "A", "dn": "M", "dp": "/r/m.py", "x": 2,
                                                          "y": "EXTRACTED"}),
        }
        self.assertEqual(sigs, stored)

    def test_with_the_writers_nodes_a_call_to_a_node_it_would_not_match_is_left_out(self):
        parsed = [{"path": "/r/a.py", "functions": [{"name": "run", "line_number": 3}]},
                  {"path": "/r/b.py", "functions": [{"name": "helper", "line_number": 7, "context": None}]}]
        nodes = sg.WriterNodes(parsed)
        good = dict(self.ROW, called_line_number=7)
        links = {key: [] for key in ("inheritance", "implements", "partial_of", "metaclass", "embeds", "part_of",
                                     "decorated_by", "previews", "binds", "companion_of")}
        links["calls"] = [[good, dict(good, called_line_number=8), dict(good, called_name="absent")]]
        # Without nodes every row counts (the target's line is in no signature).
        self.assertEqual(len(sg.row_signatures(links)["/r/a.py"]), 2)
        with_nodes = sg.row_signatures(links, nodes)
        self.assertEqual(with_nodes, {"/r/a.py": {sg.call_signature(good, False, None)[0]}})
        # A caller that is not there: the row is left out too.
        links["calls"] = [[dict(good, caller_line_number=99)]]
        self.assertEqual(sg.row_signatures(links, nodes), {})

    def test_norms(self):
        self.assertEqual(sg._norm_int(True), 1)
        self.assertEqual(sg._norm_int("7"), 7)
        self.assertEqual(sg._norm_int("x", 5), 5)
        self.assertEqual(sg._norm_int(None, -1), -1)
        self.assertEqual(sg._norm_float("0.12345678"), 0.123457)
        self.assertEqual(sg._norm_float(None), 0.0)


if __name__ == "__main__":
    unittest.main()
