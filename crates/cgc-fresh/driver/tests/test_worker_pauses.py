"""Unit tests of what the worker does when no request comes
(`worker_pauses.py`) and of the database an MCP call holds
(`mcp_tools.CallDatabase`): the time is an input, the database a stand-in.

Run: `python3 -m unittest discover -s crates/cgc-fresh/driver/tests`."""

import unittest

from driver_module import load

pauses_module = load("worker_pauses.py", "cgc_fresh_worker_pauses")
tools_module = load("mcp_tools.py", "cgc_fresh_mcp_tools")
IDLE = 600.0


class WorkerPausesTest(unittest.TestCase):
    def test_an_idle_worker_only_waits_for_its_idle_exit(self):
        pauses = pauses_module.WorkerPauses(IDLE)
        self.assertEqual(pauses.next(0.0), ("exit", IDLE))

    def test_after_a_sync_the_digest_comes_first_then_the_collection(self):
        pauses = pauses_module.WorkerPauses(IDLE)
        pauses.after_sync()
        self.assertEqual(pauses.next(0.0), ("settle", pauses_module.SETTLE_PAUSE_S))
        pauses.settled()
        self.assertEqual(pauses.next(0.1), ("collect", pauses_module.COLLECT_PAUSE_S))
        pauses.collected()
        self.assertEqual(pauses.next(0.4), ("exit", IDLE))

    def test_a_held_database_is_released_when_its_hold_has_passed(self):
        pauses = pauses_module.WorkerPauses(IDLE)
        pauses.after_call(10.0, 0.5, holding=True)
        # The collection (0.2 s) comes before the release (0.5 s) …
        self.assertEqual(pauses.next(10.0), ("collect", pauses_module.COLLECT_PAUSE_S))
        pauses.collected()
        # … and the release waits what is left of the hold, not a new one.
        action, wait = pauses.next(10.3)
        self.assertEqual(action, "release")
        self.assertAlmostEqual(wait, 0.2)
        self.assertEqual(pauses.next(10.6), ("release", 0.0))
        pauses.released()
        self.assertEqual(pauses.next(10.6), ("exit", IDLE))

    def test_a_hold_shorter_than_the_collection_pause_releases_first(self):
        pauses = pauses_module.WorkerPauses(IDLE)
        pauses.after_call(0.0, 0.05, holding=True)
        action, wait = pauses.next(0.0)
        self.assertEqual(action, "release")
        self.assertAlmostEqual(wait, 0.05)

    def test_a_call_that_holds_nothing_schedules_no_release(self):
        pauses = pauses_module.WorkerPauses(IDLE)
        pauses.after_call(0.0, 0.5, holding=False)
        self.assertEqual(pauses.next(0.0), ("collect", pauses_module.COLLECT_PAUSE_S))
        pauses.collected()
        self.assertEqual(pauses.next(1.0), ("exit", IDLE))

    def test_a_sync_or_prepare_forgets_the_hold_the_worker_released_before_it(self):
        for after in ("after_sync", "after_prepare"):
            pauses = pauses_module.WorkerPauses(IDLE)
            pauses.after_call(0.0, 5.0, holding=True)
            getattr(pauses, after)()
            pauses.settled()
            pauses.collected()
            self.assertEqual(pauses.next(1.0), ("exit", IDLE), after)

    def test_a_long_burst_collects_its_young_garbage_every_so_many_calls(self):
        pauses = pauses_module.WorkerPauses(IDLE)
        collected_at = [(n, kind) for n in range(1, 70)
                        if (kind := pauses.after_call(float(n), 0.0, holding=False))]
        every = pauses_module.MCP_CALLS_PER_COLLECTION
        self.assertEqual(collected_at, [(every, "young"), (2 * every, "young")])
        # The full collection is still owed to the next pause.
        self.assertEqual(pauses.next(70.0), ("collect", pauses_module.COLLECT_PAUSE_S))

    def test_a_burst_that_never_pauses_still_collects_in_full_now_and_then(self):
        pauses = pauses_module.WorkerPauses(IDLE)
        full = pauses_module.MCP_CALLS_PER_FULL_COLLECTION
        kinds = [pauses.after_call(float(n), 0.0, holding=False) for n in range(1, 2 * full + 1)]
        self.assertEqual([n + 1 for n, kind in enumerate(kinds) if kind == "full"], [full, 2 * full])
        self.assertEqual(kinds.count("young"), 2 * (full // pauses_module.MCP_CALLS_PER_COLLECTION - 1))

    def test_a_pause_s_full_collection_starts_the_burst_count_again(self):
        pauses = pauses_module.WorkerPauses(IDLE)
        full = pauses_module.MCP_CALLS_PER_FULL_COLLECTION
        for n in range(full - 1):
            pauses.after_call(float(n), 0.0, holding=False)
        pauses.collected()
        self.assertIsNone(pauses.after_call(float(full), 0.0, holding=False))


class StandInDatabase:
    """`open_database` and `close_database` of the driver, counted."""

    def __init__(self):
        self.opened = 0
        self.closed = 0
        self.open_now = False

    def open(self, repo, _timings):
        assert not self.open_now, "opened twice without a close"
        self.opened += 1
        self.open_now = True
        manager = type("Manager", (), {"db_path": f"{repo}/db", "get_backend_type": lambda self: "kuzudb"})()
        return manager, "builder", "finder", None

    def close(self, _manager):
        assert self.open_now, "closed what was not open"
        self.closed += 1
        self.open_now = False
        return True


class StandInMemo:
    def __init__(self):
        self.closes = []

    def left_as_it_was(self, db_path, compare=True):
        return True

    def read_only_closed(self, backend, db_path, memo_held):
        self.closes.append((backend, db_path, memo_held))


class CallDatabaseTest(unittest.TestCase):
    def setUp(self):
        self.db = StandInDatabase()
        self.memo = StandInMemo()
        self.calls = tools_module.CallDatabase(self.db.open, self.db.close, lambda: self.memo)

    def test_without_a_hold_every_call_opens_and_closes(self):
        for _ in range(3):
            *_parts, done = self.calls.open("/repo", hold=False)
            done()
        self.assertEqual((self.db.opened, self.db.closed), (3, 3))
        self.assertFalse(self.calls.holding)
        self.assertEqual(len(self.memo.closes), 3)

    def test_held_calls_share_one_open_until_released(self):
        for _ in range(3):
            *_parts, done = self.calls.open("/repo", hold=True)
            done()
        self.assertEqual((self.db.opened, self.db.closed), (1, 0))
        self.assertTrue(self.calls.holding)
        self.calls.release()
        self.assertEqual((self.db.opened, self.db.closed), (1, 1))
        self.assertEqual(self.memo.closes, [("kuzudb", "/repo/db", True)])
        self.calls.release()
        self.assertEqual(self.db.closed, 1, "a second release closes nothing")

    def test_a_failed_call_closes_a_held_database(self):
        *_parts, done = self.calls.open("/repo", hold=True)
        done(failed=True)
        self.assertFalse(self.calls.holding)
        self.assertEqual(self.db.closed, 1)

    def test_a_call_without_a_hold_closes_what_an_earlier_call_held(self):
        *_parts, done = self.calls.open("/repo", hold=True)
        done()
        *_parts, done = self.calls.open("/repo", hold=False)
        done()
        self.assertEqual((self.db.opened, self.db.closed), (1, 1))

    def test_the_release_request_closes_and_says_so(self):
        *_parts, done = self.calls.open("/repo", hold=True)
        done()
        member = tools_module.answer({"serial": 1, "tools": "release"}, self.calls, "/repo")
        self.assertEqual(member, {"result": {"released": True}})
        self.assertEqual(self.db.closed, 1)

    def test_hold_seconds_reads_only_a_positive_integer_of_a_call(self):
        hold = tools_module.hold_seconds
        self.assertEqual(hold({"tool": {"name": "x"}, "hold_ms": 250}), 0.25)
        for request in ({"tool": {}, "hold_ms": 0}, {"tool": {}, "hold_ms": -5}, {"tool": {}, "hold_ms": True},
                        {"tool": {}, "hold_ms": "9"}, {"tool": {}}, {"tools": "list", "hold_ms": 250}, None):
            self.assertEqual(hold(request), 0.0, request)


if __name__ == "__main__":
    unittest.main()
