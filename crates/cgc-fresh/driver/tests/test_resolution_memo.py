"""Unit tests of the resolution memo (`resolution_memo.py`): which reads
the tracked containers note, the fingerprints, the compiler's name
analysis, and the memo's re-resolution rules on a stand-in
`build_function_call_groups` (a temporary module of the shape CGC's has).

Run: `python3 -m unittest discover -s crates/cgc-fresh/driver/tests`."""

import collections
import contextlib
import io
import os
import tempfile
import unittest

from driver_module import load, load_path

memo_module = load("resolution_memo.py", "cgc_fresh_resolution_memo")
ALL, EMPTY = memo_module.ALL, memo_module.EMPTY


@contextlib.contextmanager
def reading():
    """A file's iteration: the reads it notes, and the writes."""
    reads = set()
    memo_module._Reads.active = reads
    memo_module._Reads.written = []
    try:
        yield reads
    finally:
        memo_module._Reads.active = None


class TrackedContainersTest(unittest.TestCase):
    def test_a_maps_key_reads_note_those_keys_alone(self):
        d = memo_module.TrackedDict("m", {"a": 1, "b": 2})
        with reading() as reads:
            self.assertEqual(d["a"], 1)
            self.assertIsNone(d.get("z"))
            self.assertNotIn("c", d)
            self.assertTrue(d)
        self.assertEqual(reads, {("m", "a"), ("m", "z"), ("m", "c"), ("m", EMPTY)})
        self.assertEqual(memo_module._Reads.written, [])

    def test_anything_that_sees_every_key_notes_the_whole_map(self):
        d = memo_module.TrackedDict("m", {"a": 1})
        for see_all in (list, len, lambda m: m.keys(), lambda m: m.values(), lambda m: m.items(),
                        lambda m: m.copy(), lambda m: m == {}, lambda m: m | {}, lambda m: {} | m):
            with reading() as reads:
                see_all(d)
            self.assertEqual(reads, {("m", ALL)}, see_all)

    def test_writes_are_noted_as_writes(self):
        for write in (lambda m: m.__setitem__("x", 1), lambda m: m.pop("a"), lambda m: m.update(y=2),
                      lambda m: m.clear(), lambda m: m.setdefault("new", 0), lambda m: m.popitem()):
            d = memo_module.TrackedDict("m", {"a": 1})
            with reading():
                write(d)
            self.assertEqual(memo_module._Reads.written, ["m"], write)
        # A setdefault of a key that is there writes nothing.
        d = memo_module.TrackedDict("m", {"a": 1})
        with reading():
            d.setdefault("a", 0)
        self.assertEqual(memo_module._Reads.written, [])

    def test_a_default_dicts_missing_key_is_a_write(self):
        d = memo_module.TrackedDefaultDict("dd", collections.defaultdict(list, {"a": [1]}))
        with reading() as reads:
            self.assertEqual(d["a"], [1])
            self.assertEqual(memo_module._Reads.written, [])
            self.assertEqual(d["missing"], [])
        self.assertEqual(set(memo_module._Reads.written), {"dd"})
        self.assertIn(("dd", "missing"), reads)

    def test_a_set_notes_its_elements_for_in_and_itself_for_the_rest(self):
        s = memo_module.TrackedSet("s", {"x", "y"})
        with reading() as reads:
            self.assertIn("x", s)
        self.assertEqual(reads, {("s", "x")})
        with reading() as reads:
            sorted(s)
            s.union({"z"})
        self.assertEqual(reads, {("s", ALL)})
        with reading():
            s.add("w")
        self.assertEqual(memo_module._Reads.written, ["s"])

    def test_any_read_of_a_list_but_its_emptiness_notes_the_whole_list(self):
        lst = memo_module.TrackedList("l", [1, 2])
        with reading() as reads:
            self.assertTrue(lst)
        self.assertEqual(reads, {("l", EMPTY)})
        for read in (lambda x: x[0], list, len, lambda x: 2 in x, lambda x: x.index(2)):
            with reading() as reads:
                read(lst)
            self.assertEqual(reads, {("l", ALL)}, read)
        with reading():
            lst.append(3)
        self.assertEqual(memo_module._Reads.written, ["l"])

    def test_outside_a_files_iteration_nothing_is_noted(self):
        memo_module._Reads.active = None
        memo_module._Reads.written = []
        d = memo_module.TrackedDict("m", {"a": 1})
        d["b"] = d["a"]
        self.assertEqual(memo_module._Reads.written, [])


class FingerprintTest(unittest.TestCase):
    def test_equal_content_of_the_same_types_is_equal(self):
        fp = memo_module._fingerprint
        self.assertEqual(fp({"a": [1, (2, "x")]}), fp({"a": [1, (2, "x")]}))
        shared = ["s"]
        self.assertEqual(fp([shared, shared]), fp([["s"], ["s"]]))

    def test_another_type_or_content_differs(self):
        fp = memo_module._fingerprint
        self.assertNotEqual(fp([1]), fp((1,)))
        self.assertNotEqual(fp(1), fp(1.0))
        self.assertNotEqual(fp(1), fp(True))
        self.assertNotEqual(fp({"a": 1}), fp({"a": 2}))

    def test_a_value_marshal_cannot_write_equals_nothing_not_even_itself(self):
        value = [object()]
        self.assertNotEqual(memo_module._fingerprint(value), memo_module._fingerprint(value))

    def test_entries_fingerprint_each_key_and_the_emptiness(self):
        entries = memo_module._entries({"a": 1})
        self.assertEqual(set(entries), {"a", EMPTY})
        self.assertIs(entries[EMPTY], True)
        self.assertIs(memo_module._entries({})[EMPTY], False)


class CompilerTest(unittest.TestCase):
    def parse(self, source):
        import ast

        return ast.parse(source).body

    def test_bound_names_are_the_functions_own_not_a_comprehensions(self):
        names = memo_module._bound_names(self.parse(
            "a = 1\nb, (c, d) = x\nfor e in y: pass\nwith z as f: pass\nimport g.h\nfrom i import j as k\n"
            "def l(): m = 1\nclass N: o = 1\nq = [p for p in r]\ns = [(t := u) for u in v]\n"
            "try:\n    pass\nexcept E as w:\n    pass\nx2 += 1\n"))
        self.assertEqual(names, {"a", "b", "c", "d", "e", "f", "g", "k", "l", "N", "q", "s", "t", "w", "x2"})

    def test_loads_leave_out_nested_functions_and_comprehension_variables(self):
        loads = memo_module._loads(self.parse(
            "y = a + b\ndef f(): return c\nz = [d for d in e if d in g]\nh = lambda: i\n"))
        self.assertEqual(loads, {"a", "b", "e", "g"})

    def test_with_cells_rebinds_only_what_the_function_closes_over(self):
        def make(table):
            return lambda key: table.get(key)

        original = make({"k": 1})
        rebound = memo_module._with_cells(original, table={"k": 2})
        self.assertEqual((original("k"), rebound("k")), (1, 2))
        self.assertIsNone(memo_module._with_cells(original, other={}))
        def plain(key):
            return key

        self.assertIsNone(memo_module._with_cells(plain, table={}))


# A stand-in of CGC's `build_function_call_groups`: maps built over every
# file, then one loop over the files; `strict` is no container.
STAND_IN = '''
def build_function_call_groups(all_file_data, imports_map, file_class_lookup=None, diagnostics=None):
    index = {}
    for fd in all_file_data:
        for name in fd.get("functions", []):
            index.setdefault(name, []).append(fd["path"])
    strict = bool(imports_map.get("strict"))
    resolved_calls = []
    for idx, file_data in enumerate(all_file_data):
        for call in file_data.get("calls", []):
            targets = index.get(call)
            if targets or not strict:
                resolved_calls.append({"caller": file_data["path"], "callee": call,
                                       "to": targets[0] if targets else None})
    return (resolved_calls,)
'''

WRITES = STAND_IN.replace("targets = index.get(call)", "targets = index.setdefault(call, [])")
OTHER_SHAPE = '''
def build_function_call_groups(all_file_data, imports_map, file_class_lookup=None, diagnostics=None):
    return ([fd["path"] for fd in all_file_data],)
'''


def tree(**files):
    return [dict(data, path=path) for path, data in sorted(files.items())]


BASE = {"a.py": {"functions": ["f"], "calls": []}, "b.py": {"functions": [], "calls": ["f"]},
        "c.py": {"functions": ["g"], "calls": ["g"]}, "d.py": {"functions": [], "calls": ["nothing"]}}


class MemoTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.addCleanup(self.dir.cleanup)

    def memo(self, source=STAND_IN):
        path = os.path.join(self.dir.name, f"calls_{abs(hash(source))}.py")
        with open(path, "w", encoding="utf-8") as f:
            f.write(source)
        self.calls = load_path(path, "stand_in_calls")
        return memo_module.ResolutionMemo(self.calls)

    def resolve(self, memo, files, imports_map=None):
        imports_map = {} if imports_map is None else imports_map
        timings = {}
        answer = memo.resolve(files, imports_map, timings)
        whole = self.calls.build_function_call_groups(files, imports_map, None, diagnostics=[])
        self.assertEqual(answer, whole)
        return timings.get("resolution_resolved"), timings.get("resolution_reused")

    def test_the_first_request_resolves_every_file_an_unchanged_one_none(self):
        memo = self.memo()
        self.assertIsNone(memo.off)
        self.assertEqual(self.resolve(memo, tree(**BASE)), (4, 0))
        self.assertEqual(self.resolve(memo, tree(**BASE)), (0, 4))

    def test_a_changed_file_and_the_files_that_read_what_it_changed_are_resolved_again(self):
        memo = self.memo()
        self.resolve(memo, tree(**BASE))
        # a.py's f is renamed: a.py changed, b.py read index["f"].
        self.assertEqual(self.resolve(memo, tree(**dict(BASE, **{"a.py": {"functions": ["h"]}}))), (2, 2))

    def test_a_new_file_is_resolved_and_the_ones_whose_reads_it_answers(self):
        memo = self.memo()
        self.resolve(memo, tree(**BASE))
        # e.py defines `nothing`, which d.py looked up and did not find.
        self.assertEqual(self.resolve(memo, tree(**dict(BASE, **{"e.py": {"functions": ["nothing"]}}))), (2, 3))

    def test_a_value_that_is_no_container_changed_resolves_every_file(self):
        memo = self.memo()
        self.resolve(memo, tree(**BASE))
        self.assertEqual(self.resolve(memo, tree(**BASE), {"strict": True}), (4, 0))

    def test_a_loop_that_writes_to_a_map_turns_the_memo_off_and_cgcs_answer_stands(self):
        memo = self.memo(WRITES)
        with contextlib.redirect_stderr(io.StringIO()) as said:
            self.resolve(memo, tree(**BASE))
        self.assertIn("wrote to index", memo.off)
        self.assertIn("memo off", said.getvalue())
        timings = {}
        memo.resolve(tree(**BASE), {}, timings)
        self.assertEqual(timings, {"resolution_memo_off": 1})

    def test_another_shape_is_never_instrumented(self):
        memo = self.memo(OTHER_SHAPE)
        self.assertIn("per-file loop has another shape", memo.off)
        timings = {}
        self.assertEqual(memo.resolve(tree(**BASE), {}, timings), (["a.py", "b.py", "c.py", "d.py"],))
        self.assertEqual(timings, {"resolution_memo_off": 1})

    def test_verify_mode_compares_with_the_function_run_whole(self):
        memo = self.memo()
        os.environ[memo_module.VERIFY_ENV] = "1"
        self.addCleanup(os.environ.pop, memo_module.VERIFY_ENV)
        timings = {}
        memo.resolve(tree(**BASE), {}, timings)
        self.assertEqual(timings["resolution_verified"], 1)


if __name__ == "__main__":
    unittest.main()
