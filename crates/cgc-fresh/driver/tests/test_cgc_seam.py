"""Unit tests of the driver's version gate (`cgc_seam.py`): which CGC
versions the driver patches, and what it tells the person otherwise.

Run: `python3 -m unittest discover -s crates/cgc-fresh/driver/tests`."""

import os
import unittest

from driver_module import load

HERE = os.path.dirname(os.path.abspath(__file__))


seam = load("cgc_seam.py", "cgc_fresh_cgc_seam")


class VersionGateTest(unittest.TestCase):
    def test_the_pinned_version_is_proven(self):
        # The versions the test suite pins (`scripts/install-cgc.sh`
        # installs these requirements) are the ones every real-CLI
        # exactness test runs on: each must be a proven one.
        support = os.path.join(HERE, "..", "..", "..", "..", "tests", "support", "python")
        for name in ("requirements-cgc.txt", "requirements-cgc-lite.txt"):
            with open(os.path.join(support, name)) as pins:
                pinned = [line.split("==", 1)[1].strip() for line in pins
                          if line.startswith("codegraphcontext==")]
            self.assertEqual(len(pinned), 1, name)
            self.assertIn(pinned[0], seam.PROVEN_CGC_VERSIONS, name)

    def test_a_proven_version_runs_without_a_note(self):
        for allow in (False, True):
            gate = seam.version_gate("0.6.13", allow)
            self.assertTrue(gate.allowed)
            self.assertIsNone(gate.note)

    def test_another_version_is_refused_and_the_note_says_how_to_opt_in(self):
        for version in ("0.6.14", "0.7.0", "0.6.12", "0.6.13.post1", "0.6.13rc1"):
            gate = seam.version_gate(version, False)
            self.assertFalse(gate.allowed, version)
            self.assertIn(f"CodeGraphContext {version} ", gate.note)
            self.assertIn("0.6.13", gate.note)
            self.assertIn(f"{seam.ALLOW_UNPROVEN_KEY} = true", gate.note)

    def test_an_unreadable_version_is_not_proven(self):
        gate = seam.version_gate(None, False)
        self.assertFalse(gate.allowed)
        self.assertIn("cannot be read", gate.note)

    def test_the_opt_in_runs_another_version_and_says_so(self):
        for version in ("0.7.0", None):
            gate = seam.version_gate(version, True)
            self.assertTrue(gate.allowed)
            self.assertIn("not proven exact", gate.note)
            self.assertIn(seam.ALLOW_UNPROVEN_KEY, gate.note)

    def test_the_proven_list_is_an_input(self):
        self.assertTrue(seam.version_gate("1.0.0", False, proven=("1.0.0",)).allowed)
        self.assertFalse(seam.version_gate("0.6.13", False, proven=("1.0.0",)).allowed)


if __name__ == "__main__":
    unittest.main()
