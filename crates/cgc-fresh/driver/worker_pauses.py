"""What the incremental driver's worker does when no request comes.

The worker (`serve.py`'s `serve`) answers requests first and leaves
some work for a pause without a request: the MCP call that waited for a
sync (read-your-writes) comes just after the sync's answer, and an agent's
calls come back to back. `WorkerPauses` decides, with the time as an
input, how long the worker may wait for its next line and what it does
when none came:

- `settle`: the stored-edge memo's digest of what a sync's close left
  (`StoredEdgeMemo.settle`), after `SETTLE_PAUSE_S` — well inside the time
  a person's `cgc` takes to import before it opens the database (whose
  close would make the digest impossible; docs/BENCHMARKS.md, "Figures
  behind design choices");
- `collect`: the cyclic collector and `malloc_trim` (`release_memory`),
  after `COLLECT_PAUSE_S`;
- in a burst of MCP calls without such a pause, a collection of the young
  generations after every `MCP_CALLS_PER_COLLECTION` calls (the calls'
  own garbage: it costs what the burst allocated, not what the worker
  holds), and the full one only after `MCP_CALLS_PER_FULL_COLLECTION`, so
  a burst that never pauses stays bounded. A full collection walks every
  object the worker keeps (CGC, the parse cache, a held database: tens of
  milliseconds at 2 000 modules), and the next call of the burst waits
  for it;
- `release`: close a database an MCP call held (`mcp.holdDatabaseMs`), once
  the hold has passed since that call's answer;
- `exit`: no request for the worker's idle bound.

Nothing here reads a clock or touches the database: the loop asks, does
what it is told, and reports what it did.
"""

SETTLE_PAUSE_S = 0.05
COLLECT_PAUSE_S = 0.2
MCP_CALLS_PER_COLLECTION = 32
MCP_CALLS_PER_FULL_COLLECTION = 1024


class WorkerPauses:
    """The work waiting for a pause, and when the held database goes."""

    def __init__(self, idle_exit_s):
        self._idle_exit_s = idle_exit_s
        self._settle_due = False
        self._collect_due = False
        self._calls_since_collection = 0
        self._calls_since_full_collection = 0
        self._release_at = None

    def after_sync(self):
        """A sync was answered: its digest and its garbage wait. The worker
        released any held database before it."""
        self._settle_due = self._collect_due = True
        self._release_at = None

    def after_prepare(self):
        """A prepare ran (the worker released any held database first)."""
        self._collect_due = True
        self._release_at = None

    def after_call(self, now, hold_s, holding):
        """An MCP call was answered at `now`; the database stays open for
        `hold_s` more if `holding`. Returns what to collect at once:
        None, "young" (a burst reached `MCP_CALLS_PER_COLLECTION` calls)
        or "full" (it reached `MCP_CALLS_PER_FULL_COLLECTION`)."""
        self._release_at = now + hold_s if holding else None
        self._calls_since_collection += 1
        self._calls_since_full_collection += 1
        self._collect_due = True
        if self._calls_since_full_collection >= MCP_CALLS_PER_FULL_COLLECTION:
            self.collected()
            return "full"
        if self._calls_since_collection >= MCP_CALLS_PER_COLLECTION:
            # The full collection stays due for the next pause.
            self._calls_since_collection = 0
            return "young"
        return None

    def released(self):
        """The held database was closed (by its pause or on request)."""
        self._release_at = None

    def collected(self):
        """A full collection ran."""
        self._collect_due = False
        self._calls_since_collection = 0
        self._calls_since_full_collection = 0

    def settled(self):
        self._settle_due = False

    def next(self, now):
        """(action, seconds): wait at most `seconds` for a line, then do
        `action` — "settle", "collect", "release" or "exit". The digest
        goes first (its window is short), the collection next; a release
        comes when its hold has passed, whatever waited before it."""
        if self._settle_due:
            return "settle", SETTLE_PAUSE_S
        if self._release_at is not None and now >= self._release_at:
            return "release", 0.0
        if self._collect_due:
            wait = COLLECT_PAUSE_S
            if self._release_at is not None:
                wait = min(wait, self._release_at - now)
                if wait < COLLECT_PAUSE_S:
                    return "release", max(0.0, wait)
            return "collect", wait
        if self._release_at is not None:
            return "release", max(0.0, self._release_at - now)
        return "exit", self._idle_exit_s
