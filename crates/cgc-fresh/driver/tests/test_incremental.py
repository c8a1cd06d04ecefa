"""Unit tests of the driver's entry point (`incremental.py`): its argument
parsing and the finder that loads its modules.

Run: `python3 -m unittest discover -s crates/cgc-fresh/driver/tests`."""

import os
import sys
import tempfile
import unittest

from driver_module import companion, load

inc = load("incremental.py", "cgc_fresh_incremental")
protocol = companion("protocol")


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
            with self.assertRaises(protocol.Unsupported, msg=argv):
                inc.parse_argv(argv)


class CompanionFinderTest(unittest.TestCase):
    def test_a_companion_loads_from_its_source_where_it_is_not_installed(self):
        module = companion("self_check")
        self.assertTrue(callable(module.check))
        self.assertEqual(module.__name__, "cgc_fresh_self_check")
        self.assertEqual(os.path.basename(module.__file__), "self_check.py")

    def test_the_installed_file_is_found_first_and_each_module_loads_once(self):
        with tempfile.TemporaryDirectory() as d:
            for file_name, text in (("incremental-stand-in-module.py", "WHICH = 'installed'\n"),
                                    ("stand_in_module.py", "WHICH = 'source'\n"),
                                    ("other_module.py", "WHICH = 'source'\n")):
                with open(os.path.join(d, file_name), "w") as f:
                    f.write(text)
            finder = inc.CompanionFinder(d)
            self.assertEqual(inc.CompanionFinder.installed_name("stand_in_module"), "incremental-stand-in-module.py")
            self.assertEqual(os.path.basename(finder.path("cgc_fresh_stand_in_module")),
                             "incremental-stand-in-module.py")
            self.assertEqual(os.path.basename(finder.path("cgc_fresh_other_module")), "other_module.py")
            self.assertIsNone(finder.path("cgc_fresh_absent"))
            self.assertIsNone(finder.path("stand_in_module"), "only the driver's names")
            self.assertIsNone(finder.find_spec("cgc_fresh_other_module", path=["a package"]))
            sys.meta_path.append(finder)
            try:
                import cgc_fresh_stand_in_module as again
                import cgc_fresh_stand_in_module as first
            finally:
                sys.meta_path.remove(finder)
                sys.modules.pop("cgc_fresh_stand_in_module", None)
            self.assertEqual(first.WHICH, "installed")
            self.assertIs(first, again)

    def test_the_finder_is_installed_once_per_directory(self):
        before = list(sys.meta_path)
        inc.install_companions()
        inc.install_companions(os.path.dirname(inc.__file__))
        self.assertEqual(sys.meta_path, before)


if __name__ == "__main__":
    unittest.main()
