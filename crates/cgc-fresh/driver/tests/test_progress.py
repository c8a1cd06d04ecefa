"""Unit tests of the worker's progress lines (`progress.py`): the time is
a fake clock, the line goes to a list.

Run: `python3 -m unittest discover -s crates/cgc-fresh/driver/tests`."""

import json
import unittest

from driver_module import companion

progress_module = companion("progress")
protocol = companion("protocol")


class FakeClock:
    def __init__(self):
        self.now = 100.0

    def __call__(self):
        return self.now


class Lines:
    """The lines a reporter wrote, as (prefix and JSON text, parsed object)."""

    def __init__(self):
        self.raw = []

    def __call__(self, data):
        self.raw.append(data)

    def objects(self):
        out = []
        for data in self.raw:
            text = data.decode("utf-8")
            assert text.startswith(protocol.PROGRESS_PREFIX) and text.endswith("\n"), text
            out.append(json.loads(text[len(protocol.PROGRESS_PREFIX):]))
        return out

    def counts(self):
        return [(o["phase"], o.get("done"), o.get("total")) for o in self.objects()]


def reporter(serial=7, every_s=0.25):
    lines, clock = Lines(), FakeClock()
    return progress_module.ProgressReporter(lines, clock, serial, every_s=every_s), lines, clock


class ProgressReporterTest(unittest.TestCase):
    def test_the_line_is_the_prefix_and_sorted_json_with_done_and_total(self):
        progress, lines, _clock = reporter(serial=7)
        progress.phase("parsing", total=2000)
        self.assertEqual(lines.raw, [
            b'CGC_FRESH_PROGRESS {"done": 0, "phase": "parsing", "serial": 7, "total": 2000}\n'])

    def test_a_phase_without_a_total_has_neither_done_nor_total(self):
        progress, lines, clock = reporter(serial=None)
        progress.phase("reading")
        clock.now += 10
        progress.advance()
        progress.end()
        self.assertEqual(lines.raw, [b'CGC_FRESH_PROGRESS {"phase": "reading", "serial": null}\n'])

    def test_counts_are_written_at_most_once_per_interval(self):
        progress, lines, clock = reporter()
        progress.phase("parsing", total=1000)
        for _ in range(1000):
            clock.now += 0.001  # a file a millisecond: one line per 250 files
            progress.advance()
        counts = [done for (_phase, done, _total) in lines.counts()]
        self.assertEqual(counts, [0, 250, 500, 750, 1000])
        progress.end()
        self.assertEqual(len(lines.raw), 5, "the last count was written already")

    def test_a_file_every_100_ms_makes_a_line_every_250_ms(self):
        progress, lines, clock = reporter()
        progress.phase("writing", total=10)
        for _ in range(10):
            clock.now += 0.1
            progress.advance()
        # At 0.3 s (3 files), 0.6 s (6), 0.9 s (9); the tenth at the end.
        self.assertEqual([done for (_p, done, _t) in lines.counts()], [0, 3, 6, 9])
        progress.end()
        self.assertEqual([done for (_p, done, _t) in lines.counts()], [0, 3, 6, 9, 10])

    def test_a_new_phase_always_writes_and_first_the_ends_last_count(self):
        progress, lines, clock = reporter()
        progress.phase("parsing", total=3)
        progress.advance(3)  # within the interval: not written yet
        self.assertEqual(lines.counts(), [("parsing", 0, 3)])
        progress.phase("reading")
        progress.phase("comparing", total=2)
        progress.phase("writing", total=0)
        progress.phase("linking")
        progress.phase("checking")
        self.assertEqual(lines.counts(), [
            ("parsing", 0, 3), ("parsing", 3, 3), ("reading", None, None), ("comparing", 0, 2),
            ("writing", 0, 0), ("linking", None, None), ("checking", None, None),
        ])
        self.assertEqual(clock.now, 100.0, "no time passed: phase lines are not throttled")

    def test_end_writes_the_last_count_once_and_nothing_after(self):
        progress, lines, _clock = reporter()
        progress.phase("parsing", total=5)
        progress.advance(2)
        progress.end()
        progress.end()
        progress.advance()
        self.assertEqual(lines.counts(), [("parsing", 0, 5), ("parsing", 2, 5)])

    def test_only_the_documented_phases_are_accepted(self):
        progress, lines, _clock = reporter()
        with self.assertRaises(ValueError):
            progress.phase("resolving")
        self.assertEqual(lines.raw, [])
        self.assertEqual(progress_module.PHASES,
                         ("parsing", "reading", "comparing", "writing", "linking", "checking"))

    def test_a_line_that_cannot_be_written_does_not_fail_the_sync(self):
        for error in (BrokenPipeError(32, "Broken pipe"), OSError(9, "Bad file descriptor")):
            tried = []

            def write(data, error=error, tried=tried):
                tried.append(data)
                raise error

            progress = progress_module.ProgressReporter(write, FakeClock(), 1)
            progress.phase("parsing", total=2)
            progress.advance(2)
            progress.end()
            self.assertEqual(len(tried), 2, "the end's count was tried too")

    def test_the_default_clock_is_monotonic(self):
        lines = Lines()
        progress = progress_module.ProgressReporter(lines, serial=3)
        progress.phase("parsing", total=10)
        for _ in range(10):
            progress.advance()
        progress.end()
        self.assertEqual(lines.counts()[-1], ("parsing", 10, 10))
        self.assertLessEqual(len(lines.raw), 3)


class NoProgressTest(unittest.TestCase):
    def test_it_writes_nothing_and_has_the_same_interface(self):
        quiet = progress_module.NoProgress()
        quiet.phase("parsing", total=3)
        quiet.advance()
        quiet.advance(2)
        quiet.phase("checking")
        quiet.end()
        for name in ("phase", "advance", "end"):
            self.assertTrue(callable(getattr(progress_module.ProgressReporter, name)))
        with self.assertRaises(ValueError):
            quiet.phase("resolving")

    def test_the_module_keeps_no_state_between_reporters(self):
        first, first_lines, _ = reporter(serial=1)
        first.phase("parsing", total=4)
        first.advance(2)
        second, second_lines, _ = reporter(serial=2)
        second.phase("writing", total=1)
        first.end()
        self.assertEqual([o["serial"] for o in first_lines.objects()], [1, 1])
        self.assertEqual(second_lines.counts(), [("writing", 0, 1)])


if __name__ == "__main__":
    unittest.main()
