"""cgc-fresh backend pin: the backend CodeGraphContext is configured for,
patience while FalkorDB Lite starts, and the refusal to write to any other
backend.

Loaded by the incremental driver from the file next to it (the service
writes it there as `incremental-backend-pin.py`).

**What was measured** (CodeGraphContext 0.6.13 on Python 3.12 with
`falkordblite` 0.9.0): CGC's factory (`core.get_database_manager`) and
its service start (`cli.cli_helpers._initialize_services`) start FalkorDB
Lite's server and wait `FalkorDBManager._STARTUP_TIMEOUT_SEC` (5 s) for
it; when it has not answered by then, they *fall back to KùzuDB* and go
on. With no backend named the switch is logged at INFO only, which CGC
drops: the process works on an empty Kùzu database beside the person's
FalkorDB graph and says nothing. On a loaded two-core machine the server
did not answer within 5 s (a worker request then found no Repository
node; a `cgc watch --sync-on-start` would have indexed the workspace into
Kùzu and printed its ready line — a sync that leaves the person's graph as
it was, which the service must never call `fresh`). Forced by hand with a
0.01 s start-up time: `_initialize_services` returned a `KuzuDBManager`
on `~/.codegraphcontext/global/db/kuzudb`, silently.

**What this module does about it**

- `be_patient()` gives FalkorDB Lite `LITE_STARTUP_PATIENCE_S` to start
  in the driver's process (the class attribute above; nothing else).
- `intended_backend()` names the backend CGC chooses when nothing fails at
  run time: its explicit setting, or its implicit order, each with the
  static fallbacks CGC takes when a backend is not installed (those are
  the same in every process, so they are no switch).
- `check(manager, intended)` refuses a manager of any other backend
  (`BackendFellBack`): the request writes nothing and fails, and the
  person is told why.
- `patient_command(command)` is how the driver runs `cgc` for a command
  sync: the same script, run by its own interpreter after the same
  patience is set, and with a fallback said on stderr (`FELL_BACK_LINE`,
  which the service takes as a failed sync; see `PATIENT_BOOTSTRAP`).
  CGC 0.6.13's own WARNING about it is never printed by the CLI
  (measured: `cgc watch` with FalkorDB Lite's port taken said only
  `Not indexed yet. Performing initial scan...` and indexed into Kùzu).

Everything named here is CGC's, read from version `CGC_VERSION_READ`.
"""

CGC_VERSION_READ = "0.6.13"
# How long FalkorDB Lite may take to start in a process of the driver's
# (CGC 0.6.13 waits 5 s, then falls back to KùzuDB).
LITE_STARTUP_PATIENCE_S = 120.0
# The attribute CGC 0.6.13 reads as that wait (seconds).
LITE_STARTUP_ATTRIBUTE = "_STARTUP_TIMEOUT_SEC"
# CGC's implicit order when no backend is named (0.6.13's
# `get_database_manager`), after a remote FalkorDB and FalkorDB Lite.
IMPLICIT_ORDER = ("falkordb-remote", "falkordb", "kuzudb", "ladybugdb", "neo4j", "nornic")
# Where an explicitly named backend that is not installed falls back to,
# in CGC 0.6.13's order (the same in every process: no run-time switch).
STATIC_FALLBACKS = {
    "kuzudb": ("ladybugdb", "neo4j", "nornic"),
    "falkordb": ("kuzudb", "ladybugdb", "neo4j", "nornic"),
}


class BackendFellBack(Exception):
    """CodeGraphContext opened another backend than the graph's."""


def choose(db_type, available):
    """The backend CGC 0.6.13's factory returns when nothing fails at run
    time. `db_type`: `CGC_RUNTIME_DB_TYPE` or else `DEFAULT_DATABASE` (None
    or empty: not named); `available`: backend name -> installed (or, for
    the servers, configured). None when CGC would find no backend."""
    if db_type:
        named = db_type.lower()
        if named in STATIC_FALLBACKS and not available.get(named, False):
            return next((b for b in STATIC_FALLBACKS[named] if available.get(b, False)), named)
        return named
    return next((b for b in IMPLICIT_ORDER if available.get(b, False)), None)


def availability():
    """What CGC 0.6.13 itself answers about each backend (its private
    helpers in `codegraphcontext.core`), read from the environment as it
    is now (after CGC loaded its credentials)."""
    import os

    from codegraphcontext import core

    return {
        "falkordb-remote": bool(os.getenv("FALKORDB_HOST")),
        "falkordb": core.is_falkordb_usable(),
        "kuzudb": core._is_kuzudb_available(),
        "ladybugdb": core._is_ladybugdb_available(),
        "neo4j": core._is_neo4j_configured(),
        "nornic": core._is_nornic_configured(),
    }


def intended_backend():
    """The backend CGC is configured for here (see `choose`). Call it once
    CGC's credentials and context are loaded into the environment."""
    import os

    db_type = os.getenv("CGC_RUNTIME_DB_TYPE") or os.getenv("DEFAULT_DATABASE")
    return choose(db_type, availability())


def be_patient(patience=LITE_STARTUP_PATIENCE_S):
    """Gives FalkorDB Lite `patience` seconds to start in this process;
    returns the wait it had (None where there is no FalkorDB Lite)."""
    try:
        from codegraphcontext.core.database_falkordb import FalkorDBManager
    except ImportError:
        return None
    before = getattr(FalkorDBManager, LITE_STARTUP_ATTRIBUTE, None)
    if isinstance(before, (int, float)) and before < patience:
        setattr(FalkorDBManager, LITE_STARTUP_ATTRIBUTE, patience)
    return before


def check(manager, intended):
    """Raises `BackendFellBack` when `manager` is not of the `intended`
    backend (nothing is checked when no backend was intended)."""
    actual = manager.get_backend_type()
    if intended and actual != intended:
        raise BackendFellBack(
            f"CodeGraphContext opened {actual!r}, not the graph's backend {intended!r} (it falls back "
            f"when {intended!r} does not start in time); nothing was written"
        )
    return actual


# What a command sync's `cgc` prints on stderr when CGC went on with
# another backend (the service looks for it: `cgc_markers.rs`). CGC 0.6.13
# says nothing itself: its WARNING is not printed by the CLI.
FELL_BACK_LINE = "cgc-fresh: CodeGraphContext fell back to another database backend: "

# Run with `python -c PATIENT_BOOTSTRAP SCRIPT ARGS...`: sets the same
# patience, makes CGC's fallback between backends (`core.
# _try_fallback_backends`, 0.6.13: every fallback from a named backend
# goes through it) say `FELL_BACK_LINE`, then runs SCRIPT as `__main__`
# with `sys.argv` = [SCRIPT, ARGS...] — the process, its output and its
# signals are the script's.
PATIENT_BOOTSTRAP = f"""
import runpy, sys
sys.argv = sys.argv[1:]
try:
    from codegraphcontext.core.database_falkordb import FalkorDBManager as _M
    if getattr(_M, {LITE_STARTUP_ATTRIBUTE!r}, {LITE_STARTUP_PATIENCE_S!r}) < {LITE_STARTUP_PATIENCE_S!r}:
        setattr(_M, {LITE_STARTUP_ATTRIBUTE!r}, {LITE_STARTUP_PATIENCE_S!r})
except Exception:
    pass
try:
    import codegraphcontext.core as _core
    _fallback = _core._try_fallback_backends
    def _said(db_path, candidates, *, reason):
        manager = _fallback(db_path, candidates, reason=reason)
        if manager is not None:
            print({FELL_BACK_LINE!r} + str(reason), file=sys.stderr, flush=True)
        return manager
    _core._try_fallback_backends = _said
except Exception:
    pass
runpy.run_path(sys.argv[0], run_name="__main__")
"""


def patient_command(command, interpreter):
    """`command` (a `cgc` script and its arguments) run by its own
    interpreter with the patience set first, when the script's `#!` line
    names `interpreter` (the driver's: CGC importable, the same
    environment); otherwise `command` as it is."""
    import os

    if not command:
        return command
    try:
        with open(command[0], "rb") as script:
            first = script.readline(4096).decode("utf-8", "replace").strip()
    except OSError:
        return command
    if not first.startswith("#!"):
        return command
    named = first[2:].strip().split()
    if len(named) != 1 or os.path.realpath(named[0]) != os.path.realpath(interpreter):
        return command
    # The `#!` path itself, not its real path: a virtualenv's interpreter
    # is a link, and the environment is found through the link.
    return [named[0], "-c", PATIENT_BOOTSTRAP, *command]
