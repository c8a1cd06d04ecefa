"""Unit tests of the patch framework and the patches of CGC a request makes
(`session_patches.py`), on stand-in CodeGraphContext modules.

Run: `python3 -m unittest discover -s crates/cgc-fresh/driver/tests`."""

import gc
import os
import sys
import tempfile
import types
import unittest
from unittest import mock

import cgc_writer_statements
from driver_module import companion
from stand_ins import config_manager, stand_in_modules

session_patches = companion("session_patches")


class PatchingTest(unittest.TestCase):
    def test_every_patch_is_put_back_last_first_and_an_inherited_attribute_removed(self):
        class Base:
            inherited = "base"

        class Owner(Base):
            own = "own"

        class Patches(session_patches.Patching):
            def __enter__(self):
                session_patches.patch(self._undo, Owner, "own", "first")
                session_patches.patch(self._undo, Owner, "own", "second")
                session_patches.patch(self._undo, Owner, "inherited", "patched")
                session_patches.patch(self._undo, Owner, "new", "added")
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

        class Patches(session_patches.Patching):
            def __enter__(self):
                session_patches.patch(self._undo, Owner, "value", 2)
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
        with session_patches.PurgeDeferred(writer):
            writer._purge_dangling_pathless_nodes()
        self.assertEqual(writer.purged, 0)
        writer._purge_dangling_pathless_nodes()
        self.assertEqual(writer.purged, 1)

    def test_the_collector_is_paused_for_a_request_and_one_paused_before_stays_paused(self):
        self.assertTrue(gc.isenabled())
        with session_patches.CollectorPaused():
            self.assertFalse(gc.isenabled())
        self.assertTrue(gc.isenabled())
        gc.disable()
        try:
            with session_patches.CollectorPaused():
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
            with session_patches.RequestMemos({}):
                first = manager.load_config()
                first["A"] = "changed"
                self.assertEqual(manager.load_config(), {"A": "1"})
                self.assertEqual(len(reads), 1)
            self.assertIs(manager.load_config, original)
            with session_patches.RequestMemos({}):
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
        memo = {}
        with stand_in_modules(**{"codegraphcontext.core.cgcignore": {"CGCIgnoreMatcher": matcher_class}}):
            with session_patches.RequestMemos(memo):
                m = matcher_class("build/")
                self.assertTrue(m.match_file("build/x.py"))
                self.assertFalse(m.match_file("src/x.py"))
                self.assertTrue(matcher_class("build/").match_file("build/x.py"))
                self.assertEqual(asked, ["build/x.py", "src/x.py"], "the same rules answer from the memo")
            with session_patches.RequestMemos(memo):
                self.assertTrue(m.match_file("build/x.py"))
                self.assertEqual(len(asked), 2, "the worker keeps the memo between requests")
                m.rules = m.rules + [(False, rule("src/"))]
                self.assertTrue(m.match_file("src/x.py"), "new rules, a new answer")
                self.assertEqual(len(asked), 3)
                self.assertEqual(len(memo), 1, "one rule set kept")
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
        memo = {}
        with stand_in_modules(**{"codegraphcontext.core.cgcignore": {"CGCIgnoreMatcher": matcher_class}}):
            with session_patches.RequestMemos(memo, max_entries=3):
                m = matcher_class("b/")
                for n in range(5):
                    m.match_file(f"f{n}")
            (answers,) = memo.values()
            self.assertLessEqual(len(answers), 3)

    def test_realpath_answers_from_its_memo_only_while_in_force(self):
        with tempfile.TemporaryDirectory() as d:
            os.mkdir(os.path.join(d, "one"))
            os.mkdir(os.path.join(d, "two"))
            link = os.path.join(d, "link")
            os.symlink(os.path.join(d, "one"), link)
            with session_patches.RealpathMemo():
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
        kept = session_patches.ParentDirectoriesKept(["/r/a.py"])
        answer, ran = self.run_statement(kept, self.PARENTS, path="/r/a.py")
        self.assertIsInstance(answer, StandInResult)
        self.assertIsNone(answer.rows)
        self.assertEqual((ran, kept.kept), ([], 1))
        # A file only deleted, or another statement: as shipped.
        self.assertEqual(self.run_statement(kept, self.PARENTS, path="/r/gone.py")[0], "ran")
        self.assertEqual(self.run_statement(kept, self.PARENTS + " LIMIT 1", path="/r/a.py")[0], "ran")
        self.assertFalse(session_patches.ParentDirectoriesKept([]).wanted())

    def test_container_statements_are_left_out_only_for_labels_the_file_has_none_of(self):
        query = ("UNWIND $batch AS row MATCH (c:{label} {{name: row.class_name, path: $file_path}}) "
                 "MATCH (fn:Function {{name: row.func_name, path: $file_path, line_number: row.func_line}}) "
                 "WHERE row.class_line < 0 OR c.line_number = row.class_line MERGE (c)-[:CONTAINS]->(fn)")
        skipped = session_patches.AbsentContainerQueriesSkipped({"traits": [{"name": "T"}], "interfaces": []})
        self.assertIsInstance(self.run_statement(skipped, query.format(label="Interface"))[0], StandInResult)
        self.assertEqual(self.run_statement(skipped, query.format(label="Trait"))[0], "ran")
        # Class nodes are not keyed by position: never left out.
        self.assertEqual(self.run_statement(skipped, query.format(label="Class"))[0], "ran")
        self.assertEqual(skipped.skipped, 1)

    def test_parameter_rows_are_batched_only_when_no_key_repeats(self):
        distinct = session_patches.ParameterRowsBatched.distinct_keys
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
        batched = session_patches.ParameterRowsBatched()
        session = types.SimpleNamespace()
        seen = []

        def run(s, q, **params):
            seen.append(s.__dict__.get("_skip_unwind_fallback"))
            return "ran"

        rows = [{"arg_name": "x", "line_number": 5}, {"arg_name": "y", "line_number": 5}]
        query = session_patches.ParameterRowsBatched.QUERY
        self.assertEqual(batched.statement(run, session, query, {"batch": rows}), "ran")
        self.assertEqual((seen, batched.batched), ([True], 1))
        self.assertNotIn("_skip_unwind_fallback", session.__dict__)
        session._skip_unwind_fallback = "held"
        batched.statement(run, session, query, {"batch": rows})
        self.assertEqual(session._skip_unwind_fallback, "held")
        batched.statement(run, session, "MATCH (n) RETURN n", {"batch": rows})
        self.assertEqual(seen[-1], "held", "another statement runs as it is")
        self.assertEqual(batched.batched, 2)

    @staticmethod
    def call_statements():
        """Every call statement CGC's writer can send: each caller and
        called label shape, each `WHERE` it builds, both relations."""
        where_clauses = [
            "WHERE " + cgc_writer_statements.CALL_WHERE_JOIN.join(predicates)
            for predicates in ([cgc_writer_statements.CALL_WHERE_LINE, cgc_writer_statements.CALL_WHERE_CONTEXT],
                               [cgc_writer_statements.CALL_WHERE_LINE], [cgc_writer_statements.CALL_WHERE_CONTEXT])
        ] + [""]
        for relation in ("CALLS", "HEURISTIC_CALLS"):
            for called in ("Function", "Class", "Variable", "File"):
                for where in where_clauses:
                    for caller in ("Function", "Class", "File"):
                        template = (cgc_writer_statements.CALL_FROM_FILE_STATEMENT if caller == "File"
                                    else cgc_writer_statements.CALL_BY_POSITION_STATEMENT)
                        yield template.format(caller_label=caller, called_label=called, where_clause=where,
                                              relation_label=relation)

    @staticmethod
    def unstaged(staged):
        """A staged statement with its `WITH`s taken out and the names put
        back as the row's fields: the statement it was made from."""
        lines = [line for line in staged.split("\n") if not line.startswith("WITH ")]
        text = "\n".join(lines)
        for name, field in (("caller_name", "caller_name"), ("caller_path", "caller_file_path"),
                            ("caller_line", "caller_line_number"), ("called_name", "called_name"),
                            ("called_path", "called_file_path")):
            text = text.replace(f": {name}", f": row.{field}")
        return text

    def test_cgcs_call_statements_are_staged_with_every_other_word_kept(self):
        stage = session_patches.CallLinksStaged.stage
        count = 0
        for query in self.call_statements():
            staged = stage(query)
            self.assertIsNotNone(staged, query)
            # Each MATCH reads names a WITH gave, not the row.
            self.assertEqual(staged.count("\nWITH "), 2, staged)
            for line in staged.split("\n"):
                if line.startswith("MATCH "):
                    self.assertNotIn("row.", line, staged)
            # The rest is the statement as CGC wrote it, word for word.
            self.assertEqual(session_patches._one_line(self.unstaged(staged)), session_patches._one_line(query))
            self.assertEqual(staged[staged.index("MERGE"):], query[query.index("MERGE"):])
            count += 1
        self.assertEqual(count, 2 * 4 * 4 * 3)

    def test_other_statements_are_not_staged(self):
        stage = session_patches.CallLinksStaged.stage
        query = next(self.call_statements())
        self.assertIsNone(stage(query.replace("SET call.confidence_label = row.confidence_label", "")))
        self.assertIsNone(stage(query.replace("MERGE (caller)", "CREATE (caller)")))
        self.assertIsNone(stage(query.replace("[call:CALLS", "[call:INHERITS")))
        self.assertIsNone(stage(query + " RETURN count(*)"))
        # A File caller is matched by path alone, anything else by position.
        self.assertIsNone(stage(query.replace("(caller:Function", "(caller:File")))
        from_file = cgc_writer_statements.CALL_FROM_FILE_STATEMENT.format(
            called_label="Function", where_clause="", relation_label="CALLS")
        self.assertIsNone(stage(from_file.replace("(caller:File", "(caller:Function")))
        self.assertIsNone(stage(self.PARENTS))
        self.assertIsNone(stage(None))

    def test_call_statements_are_staged_on_kuzu_alone(self):
        query = next(self.call_statements())
        for backend, expected in (("kuzudb", session_patches.CallLinksStaged.stage(query)),
                                  ("ladybugdb", query), (None, query)):
            staged = session_patches.CallLinksStaged()
            session = types.SimpleNamespace(_backend_id=backend)
            ran = []

            def run(_s, q, ran=ran, **params):
                ran.append((q, params))
                return "ran"

            self.assertEqual(staged.statement(run, session, query, {"batch": [{"x": 1}]}), "ran")
            self.assertEqual(ran, [(expected, {"batch": [{"x": 1}]})], backend)
            self.assertEqual(staged.staged, 1 if backend == "kuzudb" else 0)

    def test_the_embedded_sessions_run_is_patched_for_the_request_and_put_back(self):
        class EmbeddedSessionWrapper:
            def run(self, query, **parameters):
                return ("shipped", query)

        modules = {"codegraphcontext.core.database_embedded_kuzu": {
            "EmbeddedSessionWrapper": EmbeddedSessionWrapper, "EmbeddedResultWrapper": StandInResult}}
        shipped = EmbeddedSessionWrapper.__dict__["run"]
        with stand_in_modules(**modules):
            with session_patches.ParentDirectoriesKept(["/r/a.py"]):
                self.assertIsInstance(EmbeddedSessionWrapper().run(self.PARENTS, path="/r/a.py"), StandInResult)
                self.assertEqual(EmbeddedSessionWrapper().run("RETURN 1"), ("shipped", "RETURN 1"))
            self.assertIs(EmbeddedSessionWrapper.__dict__["run"], shipped)
        # Without CGC's embedded session nothing is patched.
        with mock.patch.dict(sys.modules, {"codegraphcontext.core.database_embedded_kuzu": None}), \
                session_patches.ParentDirectoriesKept(["/r/a.py"]) as kept:
            self.assertEqual(kept._undo, [])


if __name__ == "__main__":
    unittest.main()
