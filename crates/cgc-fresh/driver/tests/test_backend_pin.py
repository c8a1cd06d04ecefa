"""Unit tests of the backend pin's pure parts (`backend_pin.py`): the
backend CodeGraphContext would choose, the refusal of another one, the
patience given to FalkorDB Lite and how a command sync's `cgc` is run.
CodeGraphContext's modules are stand-ins.

Run: `python3 -m unittest discover -s crates/cgc-fresh/driver/tests`."""

import os
import subprocess
import sys
import tempfile
import types
import unittest

from driver_module import load

pin = load("backend_pin.py", "cgc_fresh_backend_pin")
EVERYTHING = dict.fromkeys(pin.IMPLICIT_ORDER, True)


class ChooseTest(unittest.TestCase):
    def test_without_a_named_backend_the_first_available_in_cgcs_order(self):
        self.assertEqual(pin.choose(None, EVERYTHING), "falkordb-remote")
        self.assertEqual(pin.choose("", {"falkordb": True, "kuzudb": True}), "falkordb")
        self.assertEqual(pin.choose(None, {"falkordb": False, "kuzudb": True, "neo4j": True}), "kuzudb")
        self.assertEqual(pin.choose(None, {"nornic": True}), "nornic")

    def test_nothing_available_and_nothing_named_is_no_backend(self):
        self.assertIsNone(pin.choose(None, {}))
        self.assertIsNone(pin.choose(None, dict.fromkeys(pin.IMPLICIT_ORDER, False)))

    def test_a_named_backend_is_taken_as_named_case_insensitively(self):
        self.assertEqual(pin.choose("KuzuDB", EVERYTHING), "kuzudb")
        # A backend without static fallbacks is named even when missing.
        self.assertEqual(pin.choose("neo4j", {}), "neo4j")

    def test_a_named_backend_that_is_not_installed_falls_back_in_cgcs_static_order(self):
        self.assertEqual(pin.choose("falkordb", {"falkordb": False, "kuzudb": True, "neo4j": True}), "kuzudb")
        self.assertEqual(pin.choose("falkordb", {"neo4j": True, "nornic": True}), "neo4j")
        self.assertEqual(pin.choose("kuzudb", {"falkordb": True, "ladybugdb": True}), "ladybugdb")
        # Nothing to fall back to: the named one (CGC then fails on it).
        self.assertEqual(pin.choose("kuzudb", {"falkordb": True}), "kuzudb")


class CheckTest(unittest.TestCase):
    class Manager:
        def __init__(self, backend):
            self.backend = backend

        def get_backend_type(self):
            return self.backend

    def test_the_intended_backend_passes(self):
        self.assertEqual(pin.check(self.Manager("falkordb"), "falkordb"), "falkordb")

    def test_another_backend_is_refused_naming_both(self):
        with self.assertRaises(pin.BackendFellBack) as caught:
            pin.check(self.Manager("kuzudb"), "falkordb")
        self.assertIn("'kuzudb'", str(caught.exception))
        self.assertIn("'falkordb'", str(caught.exception))
        self.assertIn("nothing was written", str(caught.exception))

    def test_nothing_is_checked_when_no_backend_was_intended(self):
        self.assertEqual(pin.check(self.Manager("kuzudb"), None), "kuzudb")


class StandInCgc:
    """`codegraphcontext.core.database_falkordb` with a `FalkorDBManager`
    in `sys.modules` while in force."""

    NAMES = ("codegraphcontext", "codegraphcontext.core", "codegraphcontext.core.database_falkordb")

    def __init__(self, wait):
        self.manager = type("FalkorDBManager", (), {})
        if wait is not None:
            setattr(self.manager, pin.LITE_STARTUP_ATTRIBUTE, wait)

    def __enter__(self):
        self.saved = {name: sys.modules.get(name) for name in self.NAMES}
        modules = [types.ModuleType(name) for name in self.NAMES]
        modules[0].core = modules[1]
        modules[1].database_falkordb = modules[2]
        modules[2].FalkorDBManager = self.manager
        sys.modules.update(zip(self.NAMES, modules, strict=True))
        return self.manager

    def __exit__(self, *_exc):
        for name, module in self.saved.items():
            if module is None:
                sys.modules.pop(name, None)
            else:
                sys.modules[name] = module


class BePatientTest(unittest.TestCase):
    def test_a_shorter_wait_is_raised_to_the_patience(self):
        with StandInCgc(5) as manager:
            self.assertEqual(pin.be_patient(), 5)
            self.assertEqual(getattr(manager, pin.LITE_STARTUP_ATTRIBUTE), pin.LITE_STARTUP_PATIENCE_S)

    def test_a_longer_wait_is_kept(self):
        with StandInCgc(500.0) as manager:
            self.assertEqual(pin.be_patient(30.0), 500.0)
            self.assertEqual(getattr(manager, pin.LITE_STARTUP_ATTRIBUTE), 500.0)

    def test_no_wait_attribute_is_left_alone(self):
        with StandInCgc(None) as manager:
            self.assertIsNone(pin.be_patient())
            self.assertFalse(hasattr(manager, pin.LITE_STARTUP_ATTRIBUTE))


class PatientCommandTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.interpreter = sys.executable

    def tearDown(self):
        self.dir.cleanup()

    def script(self, first_line):
        path = os.path.join(self.dir.name, "cgc")
        with open(path, "w", encoding="utf-8") as f:
            f.write(first_line + "\nprint('hi')\n")
        return path

    def test_a_script_of_the_drivers_interpreter_runs_with_the_bootstrap_first(self):
        script = self.script("#!" + self.interpreter)
        command = pin.patient_command([script, "watch", "."], self.interpreter)
        self.assertEqual(command, [self.interpreter, "-c", pin.PATIENT_BOOTSTRAP, script, "watch", "."])

    def test_a_link_to_the_interpreter_counts_and_the_link_itself_is_run(self):
        link = os.path.join(self.dir.name, "python")
        os.symlink(self.interpreter, link)
        script = self.script("#!" + link)
        self.assertEqual(pin.patient_command([script], self.interpreter)[0], link)

    def test_anything_else_runs_as_it_is(self):
        for first_line in ("#!/bin/sh", "#!/usr/bin/env python3", "#!" + self.interpreter + " -u", "print(1)", ""):
            script = self.script(first_line)
            self.assertEqual(pin.patient_command([script, "x"], self.interpreter), [script, "x"], first_line)
        missing = os.path.join(self.dir.name, "absent")
        self.assertEqual(pin.patient_command([missing], self.interpreter), [missing])
        self.assertEqual(pin.patient_command([], self.interpreter), [])

    def test_the_bootstrap_runs_the_script_as_main_with_its_arguments(self):
        path = os.path.join(self.dir.name, "show.py")
        with open(path, "w", encoding="utf-8") as f:
            f.write("import sys\nprint(__name__, sys.argv[1:])\n")
        out = subprocess.run([sys.executable, "-I", "-c", pin.PATIENT_BOOTSTRAP, path, "a", "b"],
                             capture_output=True, text=True, check=True)
        self.assertEqual(out.stdout, "__main__ ['a', 'b']\n")


if __name__ == "__main__":
    unittest.main()
