"""Unit tests of the contract with the service (`protocol.py`): the result
line, its bound, and the timings it carries.

Run: `python3 -m unittest discover -s crates/cgc-fresh/driver/tests`."""

import json
import unittest

from driver_module import companion

protocol = companion("protocol")
progress = companion("progress")


class ResultLineTest(unittest.TestCase):
    def test_the_paths_digest_is_the_services(self):
        # The value `sync_plan::paths_digest` gives (its Rust test holds it).
        self.assertEqual(protocol.paths_digest(["a.py", "pkg/\u00e9.py"]),
                         "f56a82439211a8dd6f32d7203fc806b3b65963b465cfd388a6701212021f2505")

    def test_a_small_batch_lists_each_outcome(self):
        applied = {"paths": {f"m{i}.py": "modified" for i in range(protocol.DRIVER_PATHS_LISTED)}, "relinked": 3}
        self.assertIs(protocol.bounded_paths(applied), applied)

    def test_a_large_batch_carries_its_digest_in_a_short_line(self):
        paths = {f"pkg/m{i}.py": ("deleted" if i % 10 == 0 else "modified") for i in range(5000)}
        bounded = protocol.bounded_paths({"paths": paths, "relinked": 7})
        self.assertNotIn("paths", bounded)
        self.assertEqual(bounded["relinked"], 7)
        self.assertEqual(bounded["paths_accounted"], 5000)
        self.assertEqual(bounded["paths_digest"], protocol.paths_digest(sorted(paths)))
        self.assertEqual(bounded["paths_outcomes"], {"deleted": 500, "modified": 4500})
        line = protocol.RESULT_PREFIX + json.dumps(dict(bounded, timings={"total_s": 1.0}))
        self.assertLess(len(line), 8 * 1024, "under the service's cut")


    def test_clean_leaves_out_private_timings(self):
        self.assertEqual(protocol.clean_timings({"_t0": 1.0, "parse_s": 0.2, "total_s": 1.5}),
                         {"parse_s": 0.2, "total_s": 1.5})

    def test_the_progress_lines_use_the_protocols_prefix(self):
        written = []
        reporter = progress.ProgressReporter(written.append, lambda: 0.0, 7)
        reporter.phase("reading")
        self.assertEqual(written, [protocol.PROGRESS_PREFIX.encode() + b'{"phase": "reading", "serial": 7}\n'])
        self.assertEqual(protocol.PROGRESS_PREFIX, "CGC_FRESH_PROGRESS ")
        self.assertEqual(protocol.RESULT_PREFIX, "CGC_FRESH_RESULT ")


if __name__ == "__main__":
    unittest.main()
