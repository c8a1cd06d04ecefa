"""Unit tests of the incremental driver's parts that need neither
CodeGraphContext nor a database (`incremental.py`): argument and request
parsing, the signatures compared with stored edges, the patch framework
and the request's memos, the session patches' statement rules, the
prepared tree's validity rules and the worker's request loop. Where the
driver imports a CodeGraphContext module, a stand-in module is put in
`sys.modules` for the test.

Run: `python3 -m unittest discover -s crates/cgc-fresh/driver/tests`."""

import contextlib
import gc
import json
import os
import sys
import tempfile
import time
import types
import unittest
from unittest import mock

from driver_module import load

HERE = os.path.dirname(os.path.abspath(__file__))


inc = load("incremental.py", "cgc_fresh_incremental")
PROGRESS_PREFIX = "CGC_FRESH_PROGRESS "
# The prepared tree's rule with Python read alone and every other suffix
# possibly reading other files.
PY_ALONE = (".py",)


@contextlib.contextmanager
def stand_in_modules(**attributes_by_module):
    """Stand-in modules (`"a.b.c": {attribute: value}`) in `sys.modules`,
    with their parent packages, for the length of the block."""
    names = set()
    for dotted in attributes_by_module:
        parts = dotted.split(".")
        names.update(".".join(parts[:i]) for i in range(1, len(parts) + 1))
    saved = {name: sys.modules.get(name) for name in names}
    modules = {name: types.ModuleType(name) for name in names}
    for name, module in modules.items():
        if "." in name:
            parent, child = name.rsplit(".", 1)
            setattr(modules[parent], child, module)
    for dotted, attributes in attributes_by_module.items():
        for key, value in attributes.items():
            setattr(modules[dotted], key, value)
    sys.modules.update(modules)
    try:
        yield modules
    finally:
        for name, module in saved.items():
            if module is None:
                sys.modules.pop(name, None)
            else:
                sys.modules[name] = module


def config_manager(settings):
    """A stand-in `codegraphcontext.cli.config_manager` whose `load_config`
    counts its reads."""
    reads = []

    def load_config():
        reads.append(1)
        return dict(settings)

    return {"codegraphcontext.cli.config_manager": {"load_config": load_config}}, reads


class ParseArgvTest(unittest.TestCase):
    def test_cgcs_root_options_in_every_spelling(self):
        for argv, db, db_path in (
            (["--db", "kuzudb", "--db-path", "/d"], "kuzudb", "/d"),
            (["--database", "falkordb", "--path", "/p"], "falkordb", "/p"),
            (["-db", "neo4j"], "neo4j", None),
            (["--db=ladybugdb", "--db-path=/x=y"], "ladybugdb", "/x=y"),
            (["--database=kuzudb", "--path=/q"], "kuzudb", "/q"),
        ):
            opts = inc.parse_argv(argv + ["--probe"])
            self.assertEqual((opts["db"], opts["db_path"], opts["probe"]), (db, db_path, True), argv)

    def test_apply_takes_every_path_after_its_separator(self):
        opts = inc.parse_argv(["--parse-cache", "/s/cache", "apply", "--", "a.py", "--db", "b c.py"])
        self.assertEqual(opts["paths"], ["a.py", "--db", "b c.py"])
        self.assertEqual(opts["parse_cache"], "/s/cache")
        self.assertIsNone(opts["db"])
        self.assertEqual(inc.parse_argv(["apply", "x.py"])["paths"], ["x.py"])
        self.assertEqual(inc.parse_argv(["apply"])["paths"], [])

    def test_serve_and_its_idle_bound(self):
        opts = inc.parse_argv(["--idle-exit", "30", "serve", "anything"])
        self.assertEqual((opts["serve"], opts["idle_exit"], opts["paths"]), (True, 30.0, None))
        self.assertEqual(inc.parse_argv(["--idle-exit", "0.01", "serve"])["idle_exit"], 1.0)
        self.assertEqual(inc.parse_argv(["serve"])["idle_exit"], inc.DEFAULT_IDLE_EXIT_S)

    def test_anything_else_is_unsupported(self):
        for argv in (["--idle-exit", "soon", "serve"], ["--verbose"], ["--db"], ["index", "."]):
            with self.assertRaises(inc.Unsupported, msg=argv):
                inc.parse_argv(argv)


class SignatureTest(unittest.TestCase):
    ROW = {"caller_file_path": "/r/a.py", "caller_name": "run", "caller_line_number": 3, "called_name": "helper",
           "called_file_path": "/r/b.py", "line_number": 5, "full_call_name": "b.helper", "args": ["x", 1],
           "confidence": 0.9, "resolution_tier": 2, "confidence_label": "EXTRACTED"}
    # What the database returns for the edge the writer stored from ROW.
    RECORD = {"src": "/r/a.py", "sn": "run", "sl": 3, "dn": "helper", "dp": "/r/b.py", "ln": 5, "fcn": "b.helper",
              "ak": json.dumps(["x", 1]), "conf": 0.9000000001, "tier": 2, "cl": "EXTRACTED"}

    def test_a_stored_call_edge_has_the_signature_of_the_row_it_was_written_from(self):
        sig, src = inc.call_signature(self.ROW, False, None)
        self.assertEqual(src, "/r/a.py")
        self.assertEqual(sig, inc.stored_signature("CALLS", "fn", self.RECORD))
        file_sig, _src = inc.call_signature(self.ROW, True, None)
        self.assertEqual(file_sig, inc.stored_signature("CALLS", "file", dict(self.RECORD, sn=None, sl=None)))
        self.assertEqual(file_sig[1:3], (None, None))

    def test_missing_line_numbers_match_as_the_writer_stores_them(self):
        row = {k: v for k, v in self.ROW.items() if k not in ("line_number", "caller_line_number")}
        record = dict(self.RECORD, ln=None, sl=None)
        self.assertEqual(inc.call_signature(row, False, None)[0], inc.stored_signature("CALLS", "fn", record))

    def test_a_row_differing_in_anything_stored_has_another_signature(self):
        sig, _src = inc.call_signature(self.ROW, False, None)
        for key, value in (("line_number", 6), ("args", ["y"]), ("confidence", 0.5), ("called_file_path", "/r/c.py"),
                           ("caller_line_number", 4), ("confidence_label", "INFERRED")):
            self.assertNotEqual(inc.call_signature(dict(self.ROW, **{key: value}), False, None)[0], sig, key)

    def test_a_tier_of_8_or_more_is_a_heuristic_call_and_missing_values_take_the_writers_defaults(self):
        self.assertEqual(inc.call_signature(dict(self.ROW, resolution_tier=8), False, None)[0][0], "HEURISTIC_CALLS")
        self.assertEqual(inc.call_signature(dict(self.ROW, resolution_tier="x"), False, None)[0][0], "CALLS")
        bare = {"caller_file_path": "/r/a.py", "called_name": "f"}
        sig, _src = inc.call_signature(bare, False, None)
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
        sigs = inc.row_signatures(links)["/r/a.py"]
        stored = {
            inc.stored_signature("INHERITS", "generic", {"sn": "A", "dn": "B", "dp": "/r/b.py", "x": "EXTRACTED"}),
            inc.stored_signature("BINDS", "generic",
                                 {"sn": "A", "dn": "T", "dp": "/r/t.py", "x": 9, "y": "p", "z": "EXTRACTED"}),
            inc.stored_signature("METACLASS", "generic", {"sn": "A", "dn": "M", "dp": "/r/m.py", "x": 2,
                                                          "y": "EXTRACTED"}),
        }
        self.assertEqual(sigs, stored)

    def test_with_the_writers_nodes_a_call_to_a_node_it_would_not_match_is_left_out(self):
        parsed = [{"path": "/r/a.py", "functions": [{"name": "run", "line_number": 3}]},
                  {"path": "/r/b.py", "functions": [{"name": "helper", "line_number": 7, "context": None}]}]
        nodes = inc.WriterNodes(parsed)
        good = dict(self.ROW, called_line_number=7)
        links = {key: [] for key in ("inheritance", "implements", "partial_of", "metaclass", "embeds", "part_of",
                                     "decorated_by", "previews", "binds", "companion_of")}
        links["calls"] = [[good, dict(good, called_line_number=8), dict(good, called_name="absent")]]
        # Without nodes every row counts (the target's line is in no signature).
        self.assertEqual(len(inc.row_signatures(links)["/r/a.py"]), 2)
        with_nodes = inc.row_signatures(links, nodes)
        self.assertEqual(with_nodes, {"/r/a.py": {inc.call_signature(good, False, None)[0]}})
        # A caller that is not there: the row is left out too.
        links["calls"] = [[dict(good, caller_line_number=99)]]
        self.assertEqual(inc.row_signatures(links, nodes), {})

    def test_norms(self):
        self.assertEqual(inc._norm_int(True), 1)
        self.assertEqual(inc._norm_int("7"), 7)
        self.assertEqual(inc._norm_int("x", 5), 5)
        self.assertEqual(inc._norm_int(None, -1), -1)
        self.assertEqual(inc._norm_float("0.12345678"), 0.123457)
        self.assertEqual(inc._norm_float(None), 0.0)


class SmallRulesTest(unittest.TestCase):
    def test_clean_leaves_out_private_timings(self):
        self.assertEqual(inc._clean({"_t0": 1.0, "parse_s": 0.2, "total_s": 1.5}), {"parse_s": 0.2, "total_s": 1.5})

    def test_the_metadata_row_is_the_last_on_falkordb_the_first_elsewhere(self):
        self.assertEqual(inc.module_metadata_row("falkordb"), "last_row")
        self.assertEqual(inc.module_metadata_row("falkordb-remote"), "last_row")
        self.assertEqual(inc.module_metadata_row("kuzudb"), "first_row")

    def test_binder_errors_are_told_from_others(self):
        for text in ("Binder exception: Cannot find property x", "Cannot find a valid label", "Table X does not exist"):
            self.assertTrue(inc._is_binder_error(RuntimeError(text)), text)
        self.assertFalse(inc._is_binder_error(RuntimeError("Connection refused")))

    def test_unordered_compares_lists_as_multisets(self):
        self.assertEqual(inc._unordered({"a": [3, 1, (2, 1)], "b": {2, 1}}),
                         inc._unordered({"b": [1, 2], "a": [[1, 2], 1, 3]}))
        self.assertNotEqual(inc._unordered([1, 1, 2]), inc._unordered([1, 2, 2]))
        self.assertNotEqual(inc._unordered({"a": [1]}), inc._unordered({"a": [1], "b": []}))

    def test_a_companion_loads_from_its_source_where_it_is_not_installed(self):
        module = inc.load_companion(inc.SELF_CHECK_MODULE, "cgc_fresh_self_check")
        self.assertTrue(callable(module.check))
        self.assertEqual(module.__name__, "cgc_fresh_self_check")


class PatchingTest(unittest.TestCase):
    def test_every_patch_is_put_back_last_first_and_an_inherited_attribute_removed(self):
        class Base:
            inherited = "base"

        class Owner(Base):
            own = "own"

        class Patches(inc.Patching):
            def __enter__(self):
                inc.patch(self._undo, Owner, "own", "first")
                inc.patch(self._undo, Owner, "own", "second")
                inc.patch(self._undo, Owner, "inherited", "patched")
                inc.patch(self._undo, Owner, "new", "added")
                return self

        with Patches():
            self.assertEqual((Owner.own, Owner.inherited, Owner.new), ("second", "patched", "added"))
        self.assertEqual(Owner.own, "own")
        self.assertNotIn("inherited", Owner.__dict__)
        self.assertEqual(Owner.inherited, "base")
        self.assertFalse(hasattr(Owner, "new"))

    def test_an_exception_in_the_block_still_puts_everything_back(self):
        class Owner:
            value = 1

        class Patches(inc.Patching):
            def __enter__(self):
                inc.patch(self._undo, Owner, "value", 2)
                return self

        with self.assertRaises(KeyError), Patches():
            raise KeyError("x")
        self.assertEqual(Owner.value, 1)

    def test_the_purge_is_left_out_while_deferred_and_the_writers_own_again_after(self):
        class Writer:
            def __init__(self):
                self.purged = 0

            def _purge_dangling_pathless_nodes(self):
                self.purged += 1

        writer = Writer()
        with inc.PurgeDeferred(writer):
            writer._purge_dangling_pathless_nodes()
        self.assertEqual(writer.purged, 0)
        writer._purge_dangling_pathless_nodes()
        self.assertEqual(writer.purged, 1)

    def test_the_collector_is_paused_for_a_request_and_one_paused_before_stays_paused(self):
        self.assertTrue(gc.isenabled())
        with inc.CollectorPaused():
            self.assertFalse(gc.isenabled())
        self.assertTrue(gc.isenabled())
        gc.disable()
        try:
            with inc.CollectorPaused():
                pass
            self.assertFalse(gc.isenabled())
        finally:
            gc.enable()


class RequestMemosTest(unittest.TestCase):
    def test_settings_are_read_once_per_request_and_each_caller_gets_a_copy(self):
        modules, reads = config_manager({"A": "1"})
        with stand_in_modules(**modules) as stand_ins:
            manager = stand_ins["codegraphcontext.cli.config_manager"]
            original = manager.load_config
            with inc.RequestMemos():
                first = manager.load_config()
                first["A"] = "changed"
                self.assertEqual(manager.load_config(), {"A": "1"})
                self.assertEqual(len(reads), 1)
            self.assertIs(manager.load_config, original)
            with inc.RequestMemos():
                manager.load_config()
            self.assertEqual(len(reads), 2, "the next request reads again")

    def matcher_class(self, asked):
        class Rule:
            def __init__(self, pattern):
                self.pattern, self.flags = pattern, 0

        class CGCIgnoreMatcher:
            def __init__(self, *patterns):
                self.rules = [(False, Rule(p)) for p in patterns]

            def match_file(self, file_path):
                asked.append(str(file_path))
                return any(str(file_path).startswith(rule.pattern) for _neg, rule in self.rules)

        return CGCIgnoreMatcher, Rule

    def test_ignore_answers_are_kept_per_rule_set_and_forgotten_when_the_rules_change(self):
        asked = []
        matcher_class, rule = self.matcher_class(asked)
        with stand_in_modules(**{"codegraphcontext.core.cgcignore": {"CGCIgnoreMatcher": matcher_class}}):
            inc._IGNORE_MEMO.clear()
            with inc.RequestMemos():
                m = matcher_class("build/")
                self.assertTrue(m.match_file("build/x.py"))
                self.assertFalse(m.match_file("src/x.py"))
                self.assertTrue(matcher_class("build/").match_file("build/x.py"))
                self.assertEqual(asked, ["build/x.py", "src/x.py"], "the same rules answer from the memo")
            with inc.RequestMemos():
                self.assertTrue(m.match_file("build/x.py"))
                self.assertEqual(len(asked), 2, "the worker keeps the memo between requests")
                m.rules = m.rules + [(False, rule("src/"))]
                self.assertTrue(m.match_file("src/x.py"), "new rules, a new answer")
                self.assertEqual(len(asked), 3)
                self.assertEqual(len(inc._IGNORE_MEMO), 1, "one rule set kept")
                from pathlib import Path

                m.match_file(Path("src/y.py"))
                m.match_file(Path("src/y.py"))
                self.assertEqual(asked[-2:], ["src/y.py", "src/y.py"], "a path that is no str is matched as shipped")
            self.assertIn("match_file", matcher_class.__dict__)
            m.match_file("build/x.py")
            self.assertEqual(asked[-1], "build/x.py", "after the request: the method as shipped")

    def test_the_ignore_memo_is_bounded(self):
        asked = []
        matcher_class, _rule = self.matcher_class(asked)
        with stand_in_modules(**{"codegraphcontext.core.cgcignore": {"CGCIgnoreMatcher": matcher_class}}), \
                mock.patch.object(inc, "IGNORE_MEMO_MAX", 3):
            inc._IGNORE_MEMO.clear()
            with inc.RequestMemos():
                m = matcher_class("b/")
                for n in range(5):
                    m.match_file(f"f{n}")
            (answers,) = inc._IGNORE_MEMO.values()
            self.assertLessEqual(len(answers), 3)

    def test_realpath_answers_from_its_memo_only_while_in_force(self):
        with tempfile.TemporaryDirectory() as d:
            os.mkdir(os.path.join(d, "one"))
            os.mkdir(os.path.join(d, "two"))
            link = os.path.join(d, "link")
            os.symlink(os.path.join(d, "one"), link)
            with inc.RealpathMemo():
                first = os.path.realpath(link)
                os.unlink(link)
                os.symlink(os.path.join(d, "two"), link)
                self.assertEqual(os.path.realpath(link), first)
            self.assertEqual(os.path.realpath(link), os.path.realpath(os.path.join(d, "two")))


class StandInResult:
    def __init__(self, rows):
        self.rows = rows


class SessionStatementsTest(unittest.TestCase):
    PARENTS = ("MATCH (f:File {path: $path})<-[:CONTAINS*]-(d:Directory)\n"
               "                RETURN d.path as path ORDER BY d.path DESC")

    def run_statement(self, patch_object, query, **parameters):
        patch_object._result_class = StandInResult
        ran = []

        def run(session, q, **params):
            ran.append((q, params))
            return "ran"

        return patch_object.statement(run, object(), query, parameters), ran

    def test_the_parent_directory_listing_of_a_rewritten_file_answers_no_rows(self):
        kept = inc.ParentDirectoriesKept(["/r/a.py"])
        answer, ran = self.run_statement(kept, self.PARENTS, path="/r/a.py")
        self.assertIsInstance(answer, StandInResult)
        self.assertIsNone(answer.rows)
        self.assertEqual((ran, kept.kept), ([], 1))
        # A file only deleted, or another statement: as shipped.
        self.assertEqual(self.run_statement(kept, self.PARENTS, path="/r/gone.py")[0], "ran")
        self.assertEqual(self.run_statement(kept, self.PARENTS + " LIMIT 1", path="/r/a.py")[0], "ran")
        self.assertFalse(inc.ParentDirectoriesKept([]).wanted())

    def test_container_statements_are_left_out_only_for_labels_the_file_has_none_of(self):
        query = ("UNWIND $batch AS row MATCH (c:{label} {{name: row.class_name, path: $file_path}}) "
                 "MATCH (fn:Function {{name: row.func_name, path: $file_path, line_number: row.func_line}}) "
                 "WHERE row.class_line < 0 OR c.line_number = row.class_line MERGE (c)-[:CONTAINS]->(fn)")
        skipped = inc.AbsentContainerQueriesSkipped({"traits": [{"name": "T"}], "interfaces": []})
        self.assertIsInstance(self.run_statement(skipped, query.format(label="Interface"))[0], StandInResult)
        self.assertEqual(self.run_statement(skipped, query.format(label="Trait"))[0], "ran")
        # Class nodes are not keyed by position: never left out.
        self.assertEqual(self.run_statement(skipped, query.format(label="Class"))[0], "ran")
        self.assertEqual(skipped.skipped, 1)

    def test_parameter_rows_are_batched_only_when_no_key_repeats(self):
        distinct = inc.ParameterRowsBatched.distinct_keys
        rows = [{"arg_name": "x", "line_number": 5}, {"arg_name": "y", "line_number": 5},
                {"arg_name": "x", "line_number": 9}]
        self.assertTrue(distinct(rows))
        self.assertFalse(distinct(rows + [{"arg_name": "x", "line_number": 5}]))
        self.assertFalse(distinct(rows[:1]), "one row gains nothing")
        self.assertFalse(distinct(rows + ["not a row"]))
        self.assertFalse(distinct(None))
        # 5 and "5" are different keys to Kùzu, and to the check.
        self.assertTrue(distinct([{"arg_name": "x", "line_number": 5}, {"arg_name": "x", "line_number": "5"}]))

    def test_a_batched_statement_sets_the_sessions_flag_for_its_run_alone(self):
        batched = inc.ParameterRowsBatched()
        session = types.SimpleNamespace()
        seen = []

        def run(s, q, **params):
            seen.append(s.__dict__.get("_skip_unwind_fallback"))
            return "ran"

        rows = [{"arg_name": "x", "line_number": 5}, {"arg_name": "y", "line_number": 5}]
        self.assertEqual(batched.statement(run, session, inc.ParameterRowsBatched.QUERY, {"batch": rows}), "ran")
        self.assertEqual((seen, batched.batched), ([True], 1))
        self.assertNotIn("_skip_unwind_fallback", session.__dict__)
        session._skip_unwind_fallback = "held"
        batched.statement(run, session, inc.ParameterRowsBatched.QUERY, {"batch": rows})
        self.assertEqual(session._skip_unwind_fallback, "held")
        batched.statement(run, session, "MATCH (n) RETURN n", {"batch": rows})
        self.assertEqual(seen[-1], "held", "another statement runs as it is")
        self.assertEqual(batched.batched, 2)

    def test_the_embedded_sessions_run_is_patched_for_the_request_and_put_back(self):
        class EmbeddedSessionWrapper:
            def run(self, query, **parameters):
                return ("shipped", query)

        modules = {"codegraphcontext.core.database_embedded_kuzu": {
            "EmbeddedSessionWrapper": EmbeddedSessionWrapper, "EmbeddedResultWrapper": StandInResult}}
        shipped = EmbeddedSessionWrapper.__dict__["run"]
        with stand_in_modules(**modules):
            with inc.ParentDirectoriesKept(["/r/a.py"]):
                self.assertIsInstance(EmbeddedSessionWrapper().run(self.PARENTS, path="/r/a.py"), StandInResult)
                self.assertEqual(EmbeddedSessionWrapper().run("RETURN 1"), ("shipped", "RETURN 1"))
            self.assertIs(EmbeddedSessionWrapper.__dict__["run"], shipped)
        # Without CGC's embedded session nothing is patched.
        with mock.patch.dict(sys.modules, {"codegraphcontext.core.database_embedded_kuzu": None}), \
                inc.ParentDirectoriesKept(["/r/a.py"]) as kept:
            self.assertEqual(kept._undo, [])


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
        listing = inc.PreparedTree.identities(files)
        started_ns = time.time_ns() if started_ns is None else started_ns
        return inc.PreparedTree("/repo", inc._settings(), listing, started_ns,
                                inc.PreparedTree.racy_contents(listing, started_ns), tree="the tree")

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
        old = self.prepared(started_ns=time.time_ns() + 2 * inc.PREPARED_RACY_NS)
        self.assertEqual(old.racy, {})
        self.assertIsNone(inc.PreparedTree.racy_contents({"/nowhere": None}, time.time_ns()))

    def test_a_prepared_tree_is_spent_by_the_next_request_whether_it_holds_or_not(self):
        for repo, used in (("/repo", 1), ("/other", 0)):
            prepared = self.prepared()
            prepared.cache_timings = {"parse_cache_hits": 2}
            prepared.step1_s = 0.5
            inc._PREPARED[:] = [prepared]
            timings = {}
            tree = inc.take_prepared(repo, self.files, {".py"}, PY_ALONE, timings)
            self.assertEqual(tree, "the tree" if used else None)
            self.assertEqual(inc._PREPARED, [])
            self.assertEqual(timings["prepared_used"], used)
            self.assertEqual("parse_cache_hits" in timings, bool(used))
        self.assertIsNone(inc.take_prepared("/repo", self.files, {".py"}, PY_ALONE, {}))

    def test_verify_names_the_part_that_differs(self):
        parts = {"parsed": {"a": ("a.py", {"functions": [1, 2]})}, "links": {}, "expected": {}, "targets": [],
                 "csharp_paths": [], "module_first": {}, "module_defined": {}, "imports_map": {"m": ["x", "y"]}}
        prepared = inc.TreeState(**parts)
        inc.PreparedTree.verify(prepared, inc.TreeState(**dict(parts, imports_map={"m": ["y", "x"]})))
        with self.assertRaisesRegex(RuntimeError, "imports_map"):
            inc.PreparedTree.verify(prepared, inc.TreeState(**dict(parts, imports_map={"m": ["x"]})))


class ResultLineTest(unittest.TestCase):
    def test_the_paths_digest_is_the_services(self):
        # The value `sync_plan::paths_digest` gives (its Rust test holds it).
        self.assertEqual(inc.paths_digest(["a.py", "pkg/\u00e9.py"]),
                         "f56a82439211a8dd6f32d7203fc806b3b65963b465cfd388a6701212021f2505")

    def test_a_small_batch_lists_each_outcome(self):
        applied = {"paths": {f"m{i}.py": "modified" for i in range(inc.DRIVER_PATHS_LISTED)}, "relinked": 3}
        self.assertIs(inc.bounded_paths(applied), applied)

    def test_a_large_batch_carries_its_digest_in_a_short_line(self):
        paths = {f"pkg/m{i}.py": ("deleted" if i % 10 == 0 else "modified") for i in range(5000)}
        bounded = inc.bounded_paths({"paths": paths, "relinked": 7})
        self.assertNotIn("paths", bounded)
        self.assertEqual(bounded["relinked"], 7)
        self.assertEqual(bounded["paths_accounted"], 5000)
        self.assertEqual(bounded["paths_digest"], inc.paths_digest(sorted(paths)))
        self.assertEqual(bounded["paths_outcomes"], {"deleted": 500, "modified": 4500})
        line = inc.RESULT_PREFIX + json.dumps(dict(bounded, timings={"total_s": 1.0}))
        self.assertLess(len(line), 8 * 1024, "under the service's cut")


class RunRequestTest(unittest.TestCase):
    def test_a_path_outside_the_workspace_is_refused_before_anything_runs(self):
        with mock.patch.object(inc, "probe_api", return_value=([], {})), \
                mock.patch.object(inc, "cgc_version", return_value="0.6.13"), \
                mock.patch.object(inc, "run_apply", side_effect=AssertionError("applied")):
            for path in ("/etc/passwd", "../x.py", ".."):
                result, code = inc.run_request({"probe": False}, [path])
                self.assertEqual(code, inc.EXIT_UNSUPPORTED, path)
                self.assertIn("not a workspace-relative path", result["error"])
                self.assertTrue(result["unsupported"])
                self.assertNotIn("_t0", result["timings"])

    def test_without_paths_or_probe_there_is_nothing_to_do(self):
        result, code = inc.run_request({"probe": False}, None)
        self.assertEqual((code, result["ok"]), (inc.EXIT_USAGE, False))

    def test_an_unproven_cgc_version_applies_nothing_without_the_opt_in(self):
        # The worker's own check (`cgc_seam.py`): the probe passed for the
        # CGC of its time, the worker imported another.
        with mock.patch.object(inc, "probe_api", return_value=([], {})), \
                mock.patch.object(inc, "cgc_version", return_value="0.7.0"), \
                mock.patch.object(inc, "run_apply", side_effect=AssertionError("applied")):
            result, code = inc.run_request({"probe": False}, ["a.py"])
        self.assertEqual(code, inc.EXIT_UNSUPPORTED)
        self.assertTrue(result["unsupported"])
        self.assertIn("CodeGraphContext 0.7.0 is not a version", result["error"])

    def test_with_the_opt_in_an_unproven_cgc_version_applies(self):
        with mock.patch.object(inc, "probe_api", return_value=([], {})), \
                mock.patch.object(inc, "cgc_version", return_value="0.7.0"), \
                mock.patch.object(inc, "run_apply", return_value={"paths": {"a.py": "written"}}) as apply:
            result, code = inc.run_request({"probe": False, "allow_unproven": True}, ["a.py"])
        self.assertEqual(code, inc.EXIT_OK, result)
        apply.assert_called_once()

    def test_the_probe_refuses_an_unproven_version_and_names_the_opt_in_when_allowed(self):
        with mock.patch.object(inc, "probe_api", return_value=([], {})), \
                mock.patch.object(inc, "cgc_version", return_value="0.7.0"), \
                mock.patch.object(inc, "probe_backend", return_value=("kuzudb", None)):
            refused, code = inc.run_request({"probe": True}, None)
            self.assertEqual((code, refused["ok"]), (inc.EXIT_UNSUPPORTED, False))
            self.assertIn("cgc.allowUnprovenVersion = true", refused["error"])
            allowed, code = inc.run_request({"probe": True, "allow_unproven": True}, None)
        self.assertEqual((code, allowed["ok"]), (inc.EXIT_OK, True), allowed)
        self.assertIn("0.7.0", allowed["unproven"])

    def test_the_opt_in_is_a_root_option(self):
        opts = inc.parse_argv(["--db", "kuzudb", "--allow-unproven-cgc", "--probe"])
        self.assertTrue(opts["allow_unproven"])
        self.assertFalse(inc.parse_argv(["--probe"])["allow_unproven"])

    def test_a_cgc_lacking_the_recipes_functions_is_unsupported(self):
        with mock.patch.object(inc, "probe_api", return_value=(["GraphWriter.x"], {})):
            result, code = inc.run_request({"probe": False}, ["a.py"])
        self.assertEqual(code, inc.EXIT_UNSUPPORTED)
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

        def run_request(opts, paths, baseline=False, progress=None):
            runs.append(("baseline", paths) if baseline else paths)
            if progress is not None:
                report(progress)
            code = codes.pop(0) if codes else inc.EXIT_OK
            return {"protocol": inc.PROTOCOL, "ok": code == 0}, code

        def run_prepare(opts, progress=None):
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
            with mock.patch.object(inc, "run_request", run_request), \
                    mock.patch.object(inc, "run_prepare", run_prepare), \
                    mock.patch.object(inc, "REAL_STDOUT", write_out):
                code = inc.serve_lines({}, tools, pauses, database)
        finally:
            os.dup2(stdin, 0)
            os.close(stdin)
            os.close(read_in)
            os.close(write_out)
        with os.fdopen(read_out, "rb") as out:
            written = out.read().decode("utf-8").splitlines()
        lines, self.progress = [], []
        for line in written:
            if line.startswith(PROGRESS_PREFIX):
                self.progress.append(("progress", json.loads(line[len(PROGRESS_PREFIX):])))
            else:
                self.assertTrue(line.startswith(inc.RESULT_PREFIX), line)
                lines.append(json.loads(line[len(inc.RESULT_PREFIX):]))
                self.progress.append(("result", lines[-1].get("serial")))
        return code, lines, runs, tools.served, pauses.told, released

    def test_an_applys_progress_lines_carry_its_serial_and_come_before_its_result(self):
        def report(progress):
            progress.phase("parsing", total=3)
            progress.advance(3)
            progress.phase("reading")

        code, lines, _runs, _served, _told, _released = self.serve(
            b'{"serial": 1, "paths": ["a.py"]}\n{"serial": 2, "paths": ["b.py"]}\n', report=report)
        self.assertEqual(code, inc.EXIT_OK)
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
        self.assertEqual(code, inc.EXIT_OK)
        self.assertEqual(runs, [["a.py"], []])
        self.assertEqual([(line["serial"], line["exit"]) for line in lines], [(1, 0), (2, 0)])
        self.assertEqual(told, ["after_sync", "after_sync"])
        self.assertEqual(released, [0, 1], "a held database is released before each sync")

    def test_a_baseline_line_asks_for_the_baseline_and_a_bad_flag_is_no_request(self):
        code, lines, runs, _served, _told, _released = self.serve(
            b'{"serial": 1, "paths": [], "baseline": true}\n{"serial": 2, "paths": [], "baseline": "yes"}\n'
            b'{"serial": 3, "paths": ["a.py"], "baseline": false}\n')
        self.assertEqual(code, inc.EXIT_OK)
        self.assertEqual(runs, [("baseline", []), ["a.py"]])
        self.assertEqual([(line["serial"], line["exit"]) for line in lines], [(1, 0), (2, 2), (3, 0)])
        self.assertIn("baseline is not true or false", lines[1]["error"])

    def test_lines_that_are_no_request_are_answered_and_the_worker_goes_on(self):
        code, lines, runs, _served, _told, _released = self.serve(
            b'not json\n{"serial": 5, "paths": "a.py"}\n{"serial": 6}\n[1]\n{"serial": 7, "paths": ["b.py"]}\n')
        self.assertEqual(code, inc.EXIT_OK)
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
        self.assertEqual(code, inc.EXIT_OK)
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
            b'{"serial": 1, "paths": ["a.py"]}\n{"serial": 2, "paths": ["b.py"]}\n', codes=[inc.EXIT_FAILED])
        self.assertEqual(code, inc.EXIT_FAILED)
        self.assertEqual(runs, [["a.py"]])
        self.assertEqual(lines[0]["exit"], inc.EXIT_FAILED)

    def test_an_unsupported_sync_does_not_end_it(self):
        code, _lines, runs, _served, _told, _released = self.serve(
            b'{"serial": 1, "paths": ["a.py"]}\n{"serial": 2, "paths": ["b.py"]}\n', codes=[inc.EXIT_UNSUPPORTED])
        self.assertEqual((code, len(runs)), (inc.EXIT_OK, 2))

    def test_a_request_longer_than_the_bound_ends_the_worker(self):
        with mock.patch.object(inc, "MAX_REQUEST_BYTES", 64):
            code, lines, runs, _served, _told, _released = self.serve(b"x" * 100)
        self.assertEqual((code, runs), (inc.EXIT_USAGE, []))
        self.assertIn("longer than 64 bytes", lines[0]["error"])


if __name__ == "__main__":
    unittest.main()
