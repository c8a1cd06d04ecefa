"""Progress lines from the incremental driver's worker.

A sync can take long: a baseline parses a tree of thousands of files, a
branch switch writes hundreds. The service shows the person how far the
worker got, so the worker writes, on the stdout that carries its result
line and before it, lines of the form (`protocol.PROGRESS_PREFIX`)

    CGC_FRESH_PROGRESS {"done": 120, "phase": "parsing", "serial": 7, "total": 2000}

(`json.dumps(..., sort_keys=True)`, one object per line): `serial` is the
request's (null for a `{"prepare": true}`, whose parse the next sync may
be waiting on), `phase` one of `PHASES`, and `done`/`total` the files of a
phase that counts them — left out of a phase that does not.

A phase's first line is written at once; its counts at most once per
`every_s` (0.25 s: never more than a few lines a second, never one per
file), and the last count, if it was not written, when the next phase
starts or the request ends (`end`). A line that cannot be written (the
service gone: a broken pipe) is dropped: the result line is what the
sync is judged by, and writing it will say the same.

Nothing here is kept between requests: the worker makes a reporter per
request (`worker.py`, `Worker.progress_reporter`), and a run nobody watches
gets `NoProgress`.
"""

import json
import time

import cgc_fresh_protocol as protocol

EVERY_S = 0.25

# The phases, in the order a request goes through them:
# - `parsing`: step 1, every file of the tree (total: the files to parse);
# - `reading`: the database opened and what it stores for the repository read;
# - `comparing`: a baseline's comparison of the graph with the tree
#   (`graph_baseline.py`; total: the files compared);
# - `writing`: the changed files deleted and written (total: deletes + writes);
# - `linking`: the link edges written, shared Modules' metadata, the purge;
# - `checking`: the self-check (`self_check.py`).
PHASES = ("parsing", "reading", "comparing", "writing", "linking", "checking")


class ProgressReporter:
    """One request's progress lines: `write(bytes)` writes one line (the
    worker: `os.write` on its real stdout), `clock()` says the time in
    seconds (`time.monotonic`; a test's fake clock), `serial` is the
    request's."""

    def __init__(self, write, clock=time.monotonic, serial=None, every_s=EVERY_S):
        self._write = write
        self._clock = clock
        self._serial = serial
        self._every_s = every_s
        self._phase = None
        self._total = None
        self._done = 0
        self._written_at = None
        # The count has moved since the last line (a phase without a
        # total has no count to show).
        self._unwritten = False

    def phase(self, name, total=None):
        """Starts phase `name` (of `total` files, or None: not counted),
        after writing the last count of the phase it ends."""
        if name not in PHASES:
            raise ValueError(f"not a progress phase: {name!r}")
        self._flush()
        self._phase = name
        self._total = None if total is None else int(total)
        self._done = 0
        self._line()

    def advance(self, n=1):
        """`n` more files of the phase done; a line only if the last one
        is `every_s` old."""
        if self._phase is None or self._total is None:
            return
        self._done += n
        self._unwritten = True
        if self._clock() - self._written_at >= self._every_s:
            self._line()

    def end(self):
        """The request is done: its last count, if not written yet."""
        self._flush()
        self._phase = None

    def _flush(self):
        if self._unwritten:
            self._line()

    def _line(self):
        obj = {"serial": self._serial, "phase": self._phase}
        if self._total is not None:
            obj.update(done=self._done, total=self._total)
        data = (protocol.PROGRESS_PREFIX + json.dumps(obj, sort_keys=True) + "\n").encode("utf-8")
        self._written_at = self._clock()
        self._unwritten = False
        try:
            self._write(data)
        except OSError:
            # The service stopped reading (a broken pipe, a closed
            # descriptor): the sync goes on; its result line fares the same.
            pass


class NoProgress:
    """A reporter that writes nothing, for a run nobody watches (the
    one-shot `apply`, whose stdout promises the result line alone)."""

    def phase(self, name, total=None):
        if name not in PHASES:
            raise ValueError(f"not a progress phase: {name!r}")

    def advance(self, n=1):
        pass

    def end(self):
        pass
