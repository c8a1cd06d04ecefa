"""Unit tests of the parse cache (`parse_cache.py`): what a value must be
to be stored, when an entry is used (the file's identity), when the file
is ignored, what is not stored (racy entries) and what a worker's
`Resident` keeps between requests. CodeGraphContext's builder and
pre-scan registry are stand-ins; the repository is a temporary directory.

Run: `python3 -m unittest discover -s crates/cgc-fresh/driver/tests`."""

import contextlib
import hashlib
import io
import itertools
import json
import math
import os
import sys
import tempfile
import types
import unittest
from pathlib import Path
from unittest import mock

from driver_module import load

pc = load("parse_cache.py", "cgc_fresh_parse_cache")
KEY = {"format": pc.FORMAT, "repo": "/repo", "versions": [["codegraphcontext", "0.6.13"]]}


def round_trip(value):
    return json.loads(json.dumps(pc._encode(value)), object_hook=pc._detuple)


class EncodeTest(unittest.TestCase):
    def test_tuples_come_back_as_tuples_wherever_they_are(self):
        value = {"calls": [("f", 3, ("a", None)), ["g", 1.5]], "flag": True, "n": None, "t": ()}
        back = round_trip(value)
        self.assertEqual(back, value)
        self.assertIs(type(back["calls"][0]), tuple)
        self.assertIs(type(back["calls"][0][2]), tuple)
        self.assertIs(type(back["calls"][1]), list)
        self.assertIs(type(back["t"]), tuple)

    def test_a_value_json_cannot_carry_exactly_is_refused(self):
        for value in (math.nan, math.inf, {1: "x"}, {pc.TUPLE_TAG: []}, {"s": {1, 2}}, b"x", [object()]):
            with self.assertRaises(pc.Uncacheable, msg=repr(value)):
                pc._encode(value)

    def test_a_malformed_tuple_is_refused_on_reading(self):
        with self.assertRaises(ValueError):
            json.loads(json.dumps({pc.TUPLE_TAG: "ab"}), object_hook=pc._detuple)
        # A dict with the tag and another key is a dict.
        self.assertEqual(pc._detuple({pc.TUPLE_TAG: [1], "x": 2}), {pc.TUPLE_TAG: [1], "x": 2})


class StandInBuilder:
    """`GraphBuilder.parse_file`, `pre_scan_imports`, `parsers` and
    `get_parser`, counting parses."""

    parsers = {".py": None, ".js": None}

    def __init__(self):
        self.parsed = []

    def parse_file(self, repo, path, _is_dependency):
        self.parsed.append(path.name)
        text = path.read_text()
        return {"path": str(path), "functions": [{"name": "f", "args": ("x", "y")}], "size": len(text)}

    def pre_scan_imports(self, files):
        raise AssertionError("the stand-in registry is in sys.modules")

    def get_parser(self, ext):
        return ext


def scanner(files, _get_parser):
    """A pre-scan: every file's stem and a name all files share."""
    found = {}
    for file in files:
        found.setdefault(file.stem, []).append(str(file))
        found.setdefault("shared", []).append(str(file))
    return found


class StandInRegistry:
    NAMES = ("codegraphcontext", "codegraphcontext.tools", "codegraphcontext.tools.indexing",
             "codegraphcontext.tools.indexing.pre_scan")

    def __enter__(self):
        self.saved = {name: sys.modules.get(name) for name in self.NAMES}
        modules = [types.ModuleType(name) for name in self.NAMES]
        for parent, child in itertools.pairwise(modules):
            setattr(parent, child.__name__.rsplit(".", 1)[1], child)
        modules[-1]._get_registry = lambda: {".py": scanner, ".js": scanner}
        sys.modules.update(zip(self.NAMES, modules, strict=True))
        return self

    def __exit__(self, *_exc):
        for name, module in self.saved.items():
            if module is None:
                sys.modules.pop(name, None)
            else:
                sys.modules[name] = module


class Clock:
    """The cache's clock and sleep: time moves `step_ns` at each reading
    and with a sleep (unless `moves` is false), which is recorded."""

    def __init__(self, now_ns, moves=True, step_ns=0):
        self.now_ns = now_ns
        self.moves = moves
        self.step_ns = step_ns
        self.sleeps = []

    def __call__(self):
        now = self.now_ns
        self.now_ns += self.step_ns
        return now

    def sleep(self, seconds):
        self.sleeps.append(seconds)
        if self.moves:
            self.now_ns += math.ceil(seconds * 1e9)


def newest_change(files):
    return max(max(os.stat(f).st_mtime_ns, os.stat(f).st_ctime_ns) for f in files)


def cache_lines(path):
    """The cache file's entries: {file name: its identity list}."""
    with open(path, "rb") as f:
        body = f.read().split(b"\n", 1)[1]
    return {Path(ident[0]).name: ident for ident in
            (json.loads(line.split(b"\t", 1)[0]) for line in body.split(b"\n"))}


class CacheCase(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.repo = Path(self.dir.name) / "repo"
        self.repo.mkdir()
        self.cache_path = os.path.join(self.dir.name, "parse-cache")
        self.registry = StandInRegistry()
        self.registry.__enter__()
        self.addCleanup(self.registry.__exit__)
        self.files = [self.write(name, f"def {name}(): pass\n") for name in ("a.py", "b.py")]

    def tearDown(self):
        self.dir.cleanup()

    def write(self, name, text):
        path = self.repo / name
        path.write_text(text)
        return path

    def request(self, files=None, resident=None, key=KEY, settled=True, cached_suffixes=(".py",), clock=None):
        """One sync's use of the cache: parse and pre-scan every file, then
        save. `settled`: the files count as changed long enough ago (else
        the clock is the files' newest change, and does not move); `clock`:
        a `Clock` instead."""
        files = self.files if files is None else files
        if clock is None:
            clock = Clock(newest_change(files) + (2 * pc.RACY_NS + 1 if settled else 0), moves=settled)
        self.clock = clock
        cache = pc.ParseCache(self.cache_path, key, resident, cached_suffixes=cached_suffixes,
                              clock=clock, sleep=clock.sleep)
        cache.load()
        builder = StandInBuilder()
        parsed = [cache.parse(builder, str(self.repo), f) for f in files]
        imports = cache.pre_scan(builder, files)
        cache.save()
        return cache, builder, parsed, imports


class ParseCacheTest(CacheCase):
    def test_a_cold_sync_parses_and_writes_a_private_file_the_next_one_uses(self):
        cold, builder, parsed, imports = self.request()
        self.assertEqual((cold.state, cold.hits, cold.misses), ("cold", 0, 2))
        self.assertEqual(builder.parsed, ["a.py", "b.py"])
        self.assertTrue(cold.saved)
        self.assertEqual(os.stat(self.cache_path).st_mode & 0o777, 0o600)
        warm, builder, parsed_again, imports_again = self.request()
        self.assertEqual((warm.state, warm.hits, warm.misses), ("warm", 2, 0))
        self.assertEqual(builder.parsed, [])
        self.assertEqual(parsed_again, parsed)
        self.assertIs(type(parsed_again[0]["functions"][0]["args"]), tuple)
        self.assertEqual(imports_again, imports)
        self.assertEqual(warm.timings()["parse_cache_warm"], 1)

    def test_a_changed_file_is_parsed_again_the_others_not(self):
        self.request()
        self.write("b.py", "def b(): return 1\n")
        cache, builder, parsed, _imports = self.request()
        self.assertEqual(builder.parsed, ["b.py"])
        self.assertEqual((cache.hits, cache.misses), (1, 1))
        self.assertEqual(parsed[1]["size"], len("def b(): return 1\n"))

    def test_a_file_changed_just_now_is_parsed_but_not_stored(self):
        cache, _builder, _parsed, _imports = self.request(settled=False)
        self.assertFalse(cache.saved)
        self.assertFalse(os.path.exists(self.cache_path))

    def test_a_file_changed_a_moment_ago_waits_out_its_window_once_and_is_stored_with_its_digest(self):
        changed = newest_change(self.files)
        clock = Clock(changed + 10_000_000)
        cache, builder, _parsed, _imports = self.request(clock=clock)
        self.assertEqual(builder.parsed, ["a.py", "b.py"])
        # Waited to the first nanosecond past the newest change's window,
        # no longer than the window in all.
        self.assertEqual(clock.now_ns, changed + pc.FINE_RACY_NS + 1)
        self.assertLessEqual(sum(clock.sleeps), (pc.FINE_RACY_NS + 1) / 1e9)
        self.assertTrue(cache.saved)
        lines = cache_lines(self.cache_path)
        for name in ("a.py", "b.py"):
            self.assertEqual(len(lines[name]), 7, name)
            self.assertEqual(lines[name][6], hashlib.sha256((self.repo / name).read_bytes()).hexdigest())
        # The next sync parses none of them: their bytes are as stored.
        warm, builder, _parsed, _imports = self.request(clock=Clock(changed + 3 * pc.RACY_NS))
        self.assertEqual((builder.parsed, warm.hits, warm.misses), ([], 2, 0))

    def test_an_entry_with_a_digest_is_not_used_once_the_bytes_differ_under_the_same_identity(self):
        self.request(clock=Clock(newest_change(self.files) + pc.FINE_RACY_NS + 1))
        self.assertEqual(len(cache_lines(self.cache_path)["b.py"]), 7)
        # A write in the same clock tick with the same size: the identity
        # would not change. Made so by writing the new identity into the
        # entry, which keeps the digest of the old bytes.
        self.write("b.py", "def c(): pass\n")
        new_ident = list(pc._identity(os.stat(self.repo / "b.py")))
        with open(self.cache_path, "rb") as f:
            head, body = f.read().split(b"\n", 1)
        lines = []
        for line in body.split(b"\n"):
            ident_raw, _tab, payload = line.partition(b"\t")
            ident = json.loads(ident_raw)
            if ident[0].endswith("b.py"):
                ident[1:6] = new_ident
            lines.append(json.dumps(ident).encode() + b"\t" + payload)
        body = b"\n".join(lines)
        header = json.loads(head)
        header["sha256"] = hashlib.sha256(body).hexdigest()
        with open(self.cache_path, "wb") as f:
            f.write(json.dumps(header).encode() + b"\n" + body)
        cache, builder, parsed, _imports = self.request()
        self.assertEqual(cache.state, "warm")
        self.assertEqual(builder.parsed, ["b.py"])
        self.assertEqual((cache.hits, cache.misses), (1, 1))

    def test_a_file_changed_after_the_run_began_is_neither_waited_for_nor_stored(self):
        # The run began before the files' last change, and looks at them
        # 20 ms and 50 ms after it: each would be stored after a wait
        # shorter than the window, but not one that ends in the window of
        # the run's beginning.
        clock = Clock(newest_change(self.files) - 10_000_000, step_ns=30_000_000)
        cache, builder, _parsed, _imports = self.request(clock=clock)
        self.assertEqual(clock.sleeps, [])
        self.assertEqual(builder.parsed, ["a.py", "b.py"])
        self.assertFalse(cache.saved)

    def test_a_wait_that_does_not_end_the_window_stores_nothing(self):
        clock = Clock(newest_change(self.files) + 10_000_000, moves=False)
        cache, builder, _parsed, _imports = self.request(clock=clock)
        self.assertTrue(clock.sleeps)
        self.assertEqual(builder.parsed, ["a.py", "b.py"])
        self.assertFalse(cache.saved)

    def test_other_suffixes_are_parsed_every_time(self):
        files = [self.write("c.js", "x = 1\n")]
        self.request(files)
        cache, builder, _parsed, _imports = self.request(files)
        self.assertEqual(builder.parsed, ["c.js"])
        self.assertEqual((cache.hits, cache.misses, cache.uncached), (0, 0, 1))
        self.assertEqual(cache.timings()["parse_uncached"], 1)

    def test_every_suffix_the_driver_names_is_cached(self):
        files = [self.write("c.js", "x = 1\n"), *self.files]
        alone = (".py", ".js")
        self.request(files, cached_suffixes=alone)
        cache, builder, _parsed, imports = self.request(files, cached_suffixes=alone)
        self.assertEqual(builder.parsed, [])
        self.assertEqual((cache.hits, cache.misses), (3, 0))
        # The cached pre-scans merge as CGC merges: by suffix, in the order
        # the suffixes are first seen.
        c, a, b = (str(f) for f in files)
        self.assertEqual(imports, {"c": [c], "a": [a], "b": [b], "shared": [c, a, b]})

    def test_the_pre_scans_merge_in_file_order_without_repeats(self):
        _cache, _builder, _parsed, imports = self.request()
        a, b = (str(f) for f in self.files)
        self.assertEqual(imports, {"a": [a], "b": [b], "shared": [a, b]})

    def assert_ignored(self, reason, **request):
        said = io.StringIO()
        with contextlib.redirect_stderr(said):
            cache, builder, _parsed, _imports = self.request(**request)
        self.assertIn(reason, said.getvalue())
        self.assertEqual(cache.state, "ignored")
        self.assertEqual(builder.parsed, ["a.py", "b.py"])
        self.assertEqual(cache.timings()["parse_cache_ignored"], 1)

    def test_a_file_whose_body_does_not_match_its_checksum_is_ignored(self):
        self.request()
        with open(self.cache_path, "rb") as f:
            data = f.read()
        with open(self.cache_path, "wb") as f:
            f.write(data.replace(b'"name":"f"', b'"name":"g"'))
        self.assert_ignored("checksum mismatch")

    def test_a_file_made_under_another_key_is_ignored(self):
        self.request()
        self.assert_ignored("made by other versions, settings or repository", key=dict(KEY, repo="/elsewhere"))

    def test_a_file_others_may_write_is_ignored(self):
        self.request()
        os.chmod(self.cache_path, 0o620)
        self.assert_ignored("not a private file of this user")

    def test_a_symlink_is_never_followed(self):
        self.request()
        os.rename(self.cache_path, self.cache_path + ".real")
        os.symlink(self.cache_path + ".real", self.cache_path)
        self.assert_ignored("Too many levels of symbolic links")

    def test_an_entry_line_of_another_shape_makes_the_file_ignored(self):
        self.request()
        with open(self.cache_path, "rb") as f:
            head, body = f.read().split(b"\n", 1)
        body = body.replace(b"\t", b" ", 1)
        header = json.loads(head)
        header["sha256"] = hashlib.sha256(body).hexdigest()
        with open(self.cache_path, "wb") as f:
            f.write(json.dumps(header).encode() + b"\n" + body)
        self.assert_ignored("parse cache ignored")


class ResidentTest(CacheCase):
    def test_a_request_that_changes_a_result_in_place_does_not_change_the_next_ones(self):
        resident = pc.Resident()
        self.request(resident=resident)
        _cache, _builder, parsed, _imports = self.request(resident=resident)
        parsed[0]["functions"].append("changed in place")
        parsed[0]["size"] = -1
        cache, builder, parsed_again, _imports = self.request(resident=resident)
        self.assertEqual(builder.parsed, [])
        self.assertEqual(cache.hits, 2)
        self.assertEqual(len(parsed_again[0]["functions"]), 1)
        self.assertNotEqual(parsed_again[0]["size"], -1)

    def test_entries_too_few_to_rewrite_the_file_are_kept_by_the_worker(self):
        self.files += [self.write(f"m{n}.py", f"x = {n}\n") for n in range(150)]
        resident = pc.Resident()
        self.request(resident=resident)
        self.write("b.py", "def b(): return 2\n")
        before = os.stat(self.cache_path).st_mtime_ns
        cache, builder, _parsed, _imports = self.request(resident=resident)
        self.assertEqual(builder.parsed, ["b.py"])
        # One new entry in 152 is below GAIN_SHARE: the file is not rewritten …
        self.assertFalse(cache.saved)
        self.assertEqual(os.stat(self.cache_path).st_mtime_ns, before)
        # … but the worker's next request uses it.
        cache, builder, _parsed, _imports = self.request(resident=resident)
        self.assertEqual(builder.parsed, [])
        # Without the worker's memory the file's old entry does not hold.
        cache, builder, _parsed, _imports = self.request()
        self.assertEqual(builder.parsed, ["b.py"])

    def test_a_file_in_doubt_drops_the_workers_entries_too(self):
        self.files += [self.write(f"m{n}.py", f"x = {n}\n") for n in range(150)]
        resident = pc.Resident()
        self.request(resident=resident)
        self.write("b.py", "def b(): return 2\n")
        # b.py's new entry is the worker's alone (too few to rewrite the file).
        self.assertFalse(self.request(resident=resident)[0].saved)
        with open(self.cache_path, "ab") as f:
            f.write(b"x")
        with contextlib.redirect_stderr(io.StringIO()):
            cache, builder, _parsed, _imports = self.request(resident=resident)
        self.assertEqual(cache.state, "ignored")
        self.assertEqual(len(builder.parsed), len(self.files))
        self.assertIn("b.py", builder.parsed)


class RacyRuleTest(unittest.TestCase):
    """`stamp_kind`, `racy_wait_ns` and `file_digest` on their own."""

    SECOND = 1_000_000_000

    def ident(self, changed_ns, ctime_ns=None):
        return (10, changed_ns, changed_ns if ctime_ns is None else ctime_ns, 1, 1)

    def test_how_an_entry_is_stored_follows_the_files_age_and_its_times_granularity(self):
        fine = 1_700_000_000 * self.SECOND + 123_456_789
        whole = 1_700_000_000 * self.SECOND
        cases = [
            (fine, fine + 50_000_000, None),
            (fine, fine + pc.FINE_RACY_NS, None),
            (fine, fine + pc.FINE_RACY_NS + 1, "digest"),
            (fine, fine + pc.RACY_NS, "digest"),
            (fine, fine + pc.RACY_NS + 1, "identity"),
            # Whole-second times: the file system's tick may be a second.
            (whole, whole + pc.FINE_RACY_NS + 1, None),
            (whole, whole + pc.RACY_NS, None),
            (whole, whole + pc.RACY_NS + 1, "identity"),
        ]
        for changed, seen, kind in cases:
            self.assertEqual(pc.stamp_kind(self.ident(changed), seen), kind, (changed % self.SECOND, seen - changed))
        # An mtime set by a tool (whole seconds) does not make a file's
        # times coarse: the ctime says.
        self.assertEqual(pc.stamp_kind(self.ident(whole, fine), fine + pc.FINE_RACY_NS + 1), "digest")
        # A time in the future: never stored.
        self.assertIsNone(pc.stamp_kind(self.ident(fine + self.SECOND), fine))

    def test_the_wait_reaches_the_window_and_is_never_longer_than_it(self):
        fine = 1_700_000_000 * self.SECOND + 123_456_789
        for seen in (fine, fine + 1, fine + 40_000_000, fine + pc.FINE_RACY_NS):
            wait = pc.racy_wait_ns(self.ident(fine), seen)
            self.assertEqual(pc.stamp_kind(self.ident(fine), seen + wait), "digest", seen - fine)
            self.assertLessEqual(wait, pc.FINE_RACY_NS + 1)
        self.assertEqual(pc.racy_wait_ns(self.ident(fine), fine + pc.FINE_RACY_NS + 1), 0)
        self.assertEqual(pc.racy_wait_ns(self.ident(1_700_000_000 * self.SECOND), 1_700_000_000 * self.SECOND), 0)
        self.assertEqual(pc.racy_wait_ns(self.ident(fine + self.SECOND), fine), 0)

    def test_a_digest_is_of_the_file_of_that_identity_and_of_nothing_else(self):
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "f.py")
            with open(path, "wb") as f:
                f.write(b"x = 1\n")
            ident = pc._identity(os.stat(path))
            self.assertEqual(pc.file_digest(path, ident), hashlib.sha256(b"x = 1\n").hexdigest())
            changed = (ident[0] + 1, *ident[1:])
            self.assertIsNone(pc.file_digest(path, changed))
            self.assertIsNone(pc.file_digest(os.path.join(d, "gone.py"), ident))
            fifo = os.path.join(d, "planted.py")
            os.mkfifo(fifo)
            # Opened without blocking, and not a regular file: no digest.
            self.assertIsNone(pc.file_digest(fifo, pc._identity(os.stat(fifo))))


class CacheKeyTest(unittest.TestCase):
    def test_no_key_without_codegraphcontext(self):
        with mock.patch.object(pc, "_parser_versions", return_value={"tree-sitter": "0.25.0"}):
            self.assertIsNone(pc.cache_key("/repo"))
            self.assertIsNone(pc.open_cache("/nowhere/cache", "/repo"))


if __name__ == "__main__":
    unittest.main()
