"""The driver's requests: one probe or apply (`run_request`), one prepare
(`run_prepare`), and the long-lived worker that answers them one per
stdin line (`serve`, `serve_lines`), collecting between requests
(`release_memory`, `collect_young`). The state kept between requests is
the `Worker`'s.
"""

import json
import os
import sys
import time

import cgc_fresh_apply as apply
import cgc_fresh_cgc_setup as cgc_setup
import cgc_fresh_protocol as protocol
import cgc_fresh_session_patches as session_patches
from cgc_fresh_worker import companion


def is_workspace_relative(rel):
    """Whether `rel` names a path inside the workspace: relative, and no
    `..` component anywhere (`a/../../x.py` leaves it as surely as
    `../x.py`). The service sends normalised paths; anything else is not
    the service's and is refused before anything runs."""
    return isinstance(rel, str) and not os.path.isabs(rel) and ".." not in rel.split("/")


def run_request(worker, paths, probe=False, baseline=False, progress=None):
    """One probe or one apply of `paths` — with `baseline`, of `paths` and
    of every file the graph does not hold as a from-scratch index would
    (`graph_baseline.py`): (the result line's object, the exit code it
    stands for). An apply reports its phases to `progress` (None: nobody
    watches; see `progress.py`)."""
    started = time.monotonic()
    result = {"protocol": protocol.PROTOCOL, "ok": False}
    timings = {"_t0": started}
    try:
        if probe:
            missing, _ = cgc_setup.probe_api()
            result.update(mode="probe", cgc_version=cgc_setup.cgc_version(), missing=missing, ok=not missing)
            if missing:
                return result, protocol.EXIT_UNSUPPORTED
            gate = worker.gate()
            if not gate.allowed:
                result.update(ok=False, error=gate.note)
                return result, protocol.EXIT_UNSUPPORTED
            if gate.note:
                result.update(unproven=gate.note)
            backend, why = cgc_setup.probe_backend(worker.backend_pin())
            result.update(backend=backend)
            if why:
                result.update(ok=False, error=why)
                return result, protocol.EXIT_UNSUPPORTED
            return result, protocol.EXIT_OK
        if paths is None:
            result.update(error="nothing to do: give --probe, apply -- PATH... or serve")
            return result, protocol.EXIT_USAGE
        missing, _ = cgc_setup.probe_api()
        if missing:
            raise protocol.Unsupported("CodeGraphContext lacks what the recipe needs: " + ", ".join(missing))
        gate = worker.gate()
        if not gate.allowed:
            raise protocol.Unsupported(gate.note)
        rel_paths = sorted(set(p for p in paths if p))
        for rel in rel_paths:
            if not is_workspace_relative(rel):
                raise protocol.Unsupported(f"not a workspace-relative path: {rel!r}")
        with session_patches.RequestMemos(worker.ignore_memo), session_patches.CollectorPaused():
            applied = apply.run_apply(worker, rel_paths, timings, baseline=baseline, progress=progress)
        timings["total_s"] = round(time.monotonic() - started, 3)
        result.update(mode="apply", ok=True, requested=len(rel_paths), timings=timings,
                      **protocol.bounded_paths(applied))
        if baseline:
            result.update(baseline=True)
        return result, protocol.EXIT_OK
    except protocol.Unsupported as exc:
        result.update(error=str(exc), unsupported=True, timings=protocol.clean_timings(timings))
        return result, protocol.EXIT_UNSUPPORTED
    except protocol.Interrupted as exc:
        result.update(error=str(exc), interrupted=True, timings=protocol.clean_timings(timings))
        return result, 128 + exc.signum
    except SystemExit as exc:  # CGC's typer.Exit on a database error
        result.update(error=f"CodeGraphContext exited with {exc.code}", timings=protocol.clean_timings(timings))
        return result, protocol.EXIT_FAILED
    except Exception as exc:  # noqa: BLE001 - reported, never silent
        result.update(error=f"{type(exc).__name__}: {exc}", timings=protocol.clean_timings(timings))
        return result, protocol.EXIT_FAILED


def serve(worker):
    """The long-lived worker: CGC stays imported between syncs, and the
    database is open only while a request is applied (or, for MCP calls
    that ask for it, until their hold passes: `mcp_tools.CallDatabase`).
    One request per stdin line, `{"serial": N, "paths": [REL_PATH, ...]}`
    (with `"baseline": true`, `--baseline`'s request: `graph_baseline.py`);
    one result line per request, as `apply` prints it plus `serial` and
    `exit` (the exit code `apply` would have ended with). A line
    `{"prepare": true}` asks for step 1 ahead of the next request and is
    not answered (see `PreparedTree`); `{"serial": N, "probe": true}` is
    the one-shot `--probe`, answered like a request (the service's warm-up
    at a session's start). Python's cyclic collector runs only
    between requests (`release_memory`). Ends at end of input, after
    `--idle-exit` seconds without a request, on SIGINT/SIGTERM (128+n),
    and after any request that did not end with 0 or 3 (its state, or the
    graph's, is in doubt: the next sync starts a fresh process).

    While it applies a request (or a prepare), and before its result line,
    the worker writes progress lines on the same stdout (`progress.py`):

        CGC_FRESH_PROGRESS {"done": D, "phase": P, "serial": N, "total": T}

    (`json.dumps(..., sort_keys=True)`): `serial` the request's, null for a
    prepare (the sync queued behind it waits on its parse); `phase` one of
    `parsing` (total: the files parsed), `reading`, `comparing` (a
    baseline's; total: the files compared), `writing` (total: the files
    deleted plus the files written), `linking`, `checking`; `done`/`total`
    only where the phase counts files (a request that uses the prepared
    tree starts at `reading`). A phase's first line is written at once,
    its counts at most every 0.25 s, and its last count before the next
    phase or the result. A probe, an MCP call or a line that is no
    request writes none, nor does the one-shot `apply`. A progress line
    that cannot be written is dropped; the sync goes on.

    The work a request leaves for later waits for a pause without a
    request (`worker_pauses.py`: the memo's digest, the collection, the
    held database's close); a held database is closed before any other
    request and before the worker ends."""
    import gc

    # The collector runs only between requests (`release_memory`): paused
    # for a request alone (`CollectorPaused`), it collected as soon as the
    # request ended — before its answer was out.
    gc.disable()
    tools = companion("mcp_tools")
    pauses = companion("worker_pauses").WorkerPauses(worker.opts["idle_exit"])

    def open_database(repo, timings):
        return cgc_setup.open_database(worker, repo, timings)

    database = tools.CallDatabase(open_database, cgc_setup.close_database, worker.stored_edge_memo)
    try:
        return serve_lines(worker, tools, pauses, database)
    except protocol.Interrupted as exc:
        return 128 + exc.signum
    finally:
        try:
            database.release()
        except (Exception, SystemExit, protocol.Interrupted) as exc:  # noqa: BLE001 - the worker ends either way
            print(f"cgc-fresh: the held database did not close: {type(exc).__name__}: {exc}", file=sys.stderr)


def serve_lines(worker, tools, pauses, database):
    """`serve`'s loop (see there); `Interrupted` passes through."""
    import select

    pending = b""
    while True:
        while b"\n" not in pending:
            action, pause = pauses.next(time.monotonic())
            ready, _w, _x = select.select([0], [], [], pause)
            if ready:
                chunk = os.read(0, 65536)
                if not chunk:
                    return protocol.EXIT_OK
                pending += chunk
                if len(pending) > protocol.MAX_REQUEST_BYTES:
                    worker.emit({"protocol": protocol.PROTOCOL, "ok": False, "exit": protocol.EXIT_USAGE,
                                 "error": f"a request longer than {protocol.MAX_REQUEST_BYTES} bytes"})
                    return protocol.EXIT_USAGE
            elif action == "settle":
                worker.settle_memo()
                pauses.settled()
            elif action == "collect":
                release_memory()
                pauses.collected()
            elif action == "release":
                database.release()
                pauses.released()
            else:
                return protocol.EXIT_OK
        line, pending = pending.split(b"\n", 1)
        serial = None
        try:
            request = json.loads(line)
            if tools.is_request(request):
                # An MCP tool list, call or release (`mcp_tools.py`),
                # answered between syncs.
                tools.serve_request(request, database, worker.write, protocol.Interrupted)
                collect = pauses.after_call(time.monotonic(), tools.hold_seconds(request), database.holding)
                if collect == "full":
                    release_memory()
                elif collect == "young":
                    collect_young()
                continue
            if isinstance(request, dict) and request.get("probe") is True:
                # The service's warm-up at a session's start: the one-shot
                # `--probe`, answered with the request's serial (no
                # database is opened).
                worker.gate()
                result, code = run_request(worker, None, probe=True)
                result.update(serial=request.get("serial"), exit=code)
                worker.emit(result)
                continue
            if isinstance(request, dict) and request.get("prepare") is True:
                database.release()
                # No request has a serial yet, but the sync queued behind
                # the prepare waits on its parse.
                progress = worker.progress_reporter(None)
                run_prepare(worker, progress=progress)
                progress.end()
                # The request it was for is usually waiting already: it
                # goes first, and the collection follows in a pause.
                pauses.after_prepare()
                continue
            serial = request.get("serial")
            paths = request["paths"]
            if not isinstance(paths, list):
                raise ValueError("paths is not a list")
            baseline = request.get("baseline", False)
            if not isinstance(baseline, bool):
                raise ValueError("baseline is not true or false")
        except (ValueError, KeyError, AttributeError, TypeError) as exc:
            worker.emit({"protocol": protocol.PROTOCOL, "ok": False, "exit": protocol.EXIT_USAGE, "serial": serial,
                         "error": f"not a request: {exc}"})
            continue
        database.release()
        progress = worker.progress_reporter(serial)
        result, code = run_request(worker, paths, baseline=baseline, progress=progress)
        progress.end()
        result.update(serial=serial, exit=code)
        worker.emit(result)
        if code not in (protocol.EXIT_OK, protocol.EXIT_UNSUPPORTED):
            return code
        pauses.after_sync()


def run_prepare(worker, progress=None):
    """`serve`'s `{"prepare": true}`: step 1 for the tree as it is now,
    kept for the next request (see `PreparedTree`). No answer line: a
    prepare that fails only leaves nothing prepared, and the next request
    does step 1 itself. Its `parsing` goes to `progress` (the sync it is
    for usually waits on it)."""
    started = time.monotonic()
    timings = {"_t0": started}
    try:
        missing, _ = cgc_setup.probe_api()
        if missing or not worker.gate().allowed:
            return
        with session_patches.RequestMemos(worker.ignore_memo), session_patches.CollectorPaused():
            apply.run_apply(worker, [], timings, prepare_only=True, progress=progress)
        memo = worker.stored_edge_memo()
        if memo:
            # The comparison of the database's contents, when another
            # process rewrote its header, is made now rather than by the
            # request it prepares for.
            memo.left_as_it_was()
        print(f"cgc-fresh: prepared in {time.monotonic() - started:.3f} s: "
              f"{json.dumps(protocol.clean_timings(timings))}", file=sys.stderr)
    except protocol.Interrupted:
        worker.keep_prepared(None)
        raise
    except (Exception, SystemExit) as exc:  # noqa: BLE001 - nothing prepared, said why
        worker.keep_prepared(None)
        print(f"cgc-fresh: nothing prepared: {type(exc).__name__}: {exc}", file=sys.stderr)


def release_memory():
    """Between requests the worker keeps only what is imported: a request's
    parse results are garbage once it answered, but the C heap keeps their
    pages (measured at 2 000 modules: 462 MB resident while idle, 206 MB
    after a collection and `malloc_trim`)."""
    import gc

    gc.collect()
    try:
        import ctypes

        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        pass  # not glibc: the pages stay until reused


def collect_young():
    """In a burst of MCP calls: the garbage of the calls since the last
    collection (the young generations), without walking what the worker
    keeps (see `worker_pauses.py`)."""
    import gc

    gc.collect(1)
