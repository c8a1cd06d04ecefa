"""The contract between the service (Rust) and the incremental driver: the
lines the driver writes on its real stdout, the exit codes, and the bounds
both sides keep. Defined here once; every module of the driver uses these.

- `RESULT_PREFIX`: the one result line of a request, last, `{json}` after
  the prefix (`sync_plan` reads it);
- `PROGRESS_PREFIX`: a progress line of a worker's request, before its
  result line (`progress.py`);
- the exit codes: 0 applied everything; 1 failed (the graph may be
  partial); 2 a usage error (an unknown argument, a line that is no
  request); 3 cannot apply incrementally, nothing was written (the caller
  runs a full reconcile instead); 128+n interrupted by signal n.

Pure: no CodeGraphContext, no state.
"""

import json

RESULT_PREFIX = "CGC_FRESH_RESULT "
PROGRESS_PREFIX = "CGC_FRESH_PROGRESS "
PROTOCOL = 1

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_UNSUPPORTED = 3

# Serve mode: one request per stdin line, at most this long.
MAX_REQUEST_BYTES = 8 * 1024 * 1024

# A result line lists each path's outcome for at most this many paths; a
# larger batch's line carries `paths_digest` instead, so the line stays
# far below the service's 8 KiB cut (`sync_plan::DRIVER_PATHS_LISTED`).
DRIVER_PATHS_LISTED = 100


class Interrupted(Exception):
    def __init__(self, signum):
        super().__init__(f"interrupted by signal {signum}")
        self.signum = signum


class Unsupported(Exception):
    """Cannot apply incrementally; nothing was written."""


def result_line(result):
    """The result line of `result` (a dict), as bytes."""
    return (RESULT_PREFIX + json.dumps(result, sort_keys=True) + "\n").encode("utf-8")


def paths_digest(sorted_paths):
    """SHA-256 (hex) of the paths joined by newlines: the service checks
    it against the paths it asked for (`sync_plan::paths_digest`)."""
    import hashlib

    return hashlib.sha256("\n".join(sorted_paths).encode("utf-8")).hexdigest()


def bounded_paths(applied):
    """`applied` with its per-path outcomes replaced by their digest, count
    and tally when there are more than `DRIVER_PATHS_LISTED`."""
    paths = applied.get("paths")
    if not isinstance(paths, dict) or len(paths) <= DRIVER_PATHS_LISTED:
        return applied
    bounded = {k: v for k, v in applied.items() if k != "paths"}
    tally = {}
    for outcome in paths.values():
        tally[outcome] = tally.get(outcome, 0) + 1
    bounded.update(paths_digest=paths_digest(sorted(paths)), paths_accounted=len(paths), paths_outcomes=tally)
    return bounded


def clean_timings(timings):
    """`timings` without its private entries (`_t0`, the request's start)."""
    return {k: v for k, v in timings.items() if not k.startswith("_")}
