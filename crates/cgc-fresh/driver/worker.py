"""The driver's worker: everything one driver process keeps between the
requests it answers, in one object.

A one-shot run (`--probe`, `apply`) makes a `Worker` that does not serve:
it answers one request and keeps nothing for a next one (no parse cache
held in memory, no stored-edge memo, no resolution memo; the parse cache
on disk is still read and written). `serve` makes one that serves: its
first request loads the memos, and each later request uses them. What a
worker keeps:

- `out_fd`: the real stdout, where the result and progress lines go
  (CGC's own stdout is sent to stderr: `incremental.main`);
- the version gate (`cgc_seam.version_gate`), read once: a worker runs the
  CGC it imported at its start;
- the backend pin (`backend_pin.py`), loaded once;
- the parse cache's resident part (`parse_cache.Resident`);
- the stored-edge memo (`stored_edges.StoredEdgeMemo`);
- the resolution memo (`resolution_memo.ResolutionMemo`);
- the `.cgcignore` answers (`session_patches.RequestMemos`);
- at most one tree prepared ahead of the next request
  (`prepared_tree.PreparedTree`), spent by that request.

Every optional part (the memos, the parse cache, the progress lines) that
does not load leaves the worker without it, said on stderr; a sync never
fails for want of one.
"""

import importlib
import sys
import time

import cgc_fresh_cgc_seam as cgc_seam
import cgc_fresh_protocol as protocol

# A memo not made yet (None: made, and its module did not load).
_NOT_MADE = object()


def companion(name):
    """The driver's module `name` (`cgc_fresh_<name>`, installed next to
    the driver: `incremental.CompanionFinder`)."""
    return importlib.import_module("cgc_fresh_" + name)


class Worker:
    """One driver process's state between requests (see the module's
    text). `opts`: the parsed root options (`incremental.parse_argv`);
    `write(bytes)`: writes to the real stdout; `serving`: whether requests
    follow one another (`serve`)."""

    def __init__(self, opts, write, serving=False):
        self.opts = opts
        self.write = write
        self.serving = serving
        # `.cgcignore` answers: {compiled rules: {relative path: ignored}}
        # (`session_patches.RequestMemos`).
        self.ignore_memo = {}
        self.prepared = None
        self._gate = None
        self._backend_pin = None
        self._parse_cache = None
        self._stored_edge_memo = _NOT_MADE
        self._resolution_memo = _NOT_MADE

    # ------------------------------------------------------------ output

    def emit(self, result):
        """Writes the result line of `result` (`protocol.result_line`)."""
        self.write(protocol.result_line(result))

    def progress_reporter(self, serial, quiet=False):
        """A request's progress reporter (`progress.py`): its lines go to the
        real stdout, before the result line, with `serial` (None for a
        prepare); with `quiet` it writes nothing (a run nobody watches).
        Where the module does not load (an install without it), one that
        writes nothing either: the lines are for the person, and a sync
        never fails for want of them."""
        try:
            module = companion("progress")
        except Exception as exc:  # noqa: BLE001 - no progress lines, the sync goes on
            import types

            print(f"cgc-fresh: no progress lines: {type(exc).__name__}: {exc}", file=sys.stderr)
            return types.SimpleNamespace(phase=lambda _name, total=None: None, advance=lambda n=1: None,
                                         end=lambda: None)
        if quiet:
            return module.NoProgress()
        return module.ProgressReporter(self.write, time.monotonic, serial)

    # ------------------------------------------------------- CGC and backend

    def gate(self):
        """The version gate (`cgc_seam.py`) for the installed CGC, read once
        per process: a worker runs the CGC it imported at its start."""
        if self._gate is None:
            version = companion("cgc_setup").cgc_version()
            self._gate = cgc_seam.version_gate(version, self.opts.get("allow_unproven", False))
        return self._gate

    def backend_pin(self):
        """The backend pin (`backend_pin.py`), loaded once per process."""
        if self._backend_pin is None:
            self._backend_pin = companion("backend_pin")
        return self._backend_pin

    # -------------------------------------------------------------- memos

    def open_parse_cache(self, path, repo_posix, cached_suffixes):
        """The parse cache at `path` (None: parse every file), keeping the
        files of `cached_suffixes` (`cgc_seam.FILE_ALONE_SUFFIXES`). A
        serving worker keeps its resident part between requests; a one-shot
        run keeps nothing. Any failure to load it means no cache, never a
        failed sync."""
        if not path:
            return None
        try:
            module = companion("parse_cache")
            if not self.serving:
                return module.open_cache(path, repo_posix, cached_suffixes=cached_suffixes)
            if self._parse_cache is None:
                self._parse_cache = module.Resident()
            return module.open_cache(path, repo_posix, self._parse_cache, cached_suffixes)
        except Exception as exc:  # noqa: BLE001 - no cache, every file parsed
            print(f"cgc-fresh: no parse cache: {type(exc).__name__}: {exc}", file=sys.stderr)
            return None

    def stored_edge_memo(self):
        """A serving worker's stored-edge memo (`stored_edges.py`), made at
        its first request; None in a one-shot run or when its module does
        not load (then the edges are read)."""
        if not self.serving:
            return None
        if self._stored_edge_memo is _NOT_MADE:
            memo = None
            try:
                memo = companion("stored_edges").StoredEdgeMemo()
            except Exception as exc:  # noqa: BLE001 - no memo, the edges read
                print(f"cgc-fresh: no stored-edge memo: {type(exc).__name__}: {exc}", file=sys.stderr)
            self._stored_edge_memo = memo
        return self._stored_edge_memo

    def resolve_calls(self, all_ok, imports_map, timings):
        """CGC's `build_function_call_groups` over the whole tree, through a
        serving worker's resolution memo (`resolution_memo.py`) when its
        module loads; any failure to load it, or a one-shot run (no later
        request to use it for), means the function as shipped."""
        from codegraphcontext.tools.indexing.resolution import calls

        if not self.serving:
            return calls.build_function_call_groups(all_ok, imports_map, None, diagnostics=[])
        if self._resolution_memo is _NOT_MADE:
            memo = None
            try:
                memo = companion("resolution_memo").ResolutionMemo(calls)
                if memo.off:
                    print(f"cgc-fresh: resolution {memo.off}", file=sys.stderr)
            except Exception as exc:  # noqa: BLE001 - no memo, the whole resolution
                print(f"cgc-fresh: no resolution memo: {type(exc).__name__}: {exc}", file=sys.stderr)
            self._resolution_memo = memo
        memo = self._resolution_memo
        if memo is None:
            return calls.build_function_call_groups(all_ok, imports_map, None, diagnostics=[])
        return memo.resolve(all_ok, imports_map, timings)

    def settle_memo(self):
        """Off the answer's path: what the last close left, for the next
        request's comparison (see `stored_edges.py`)."""
        memo = self.stored_edge_memo()
        if memo:
            memo.settle()

    # -------------------------------------------------------- prepared tree

    def keep_prepared(self, prepared):
        """Keeps `prepared` (a `PreparedTree`, or None) for the next request,
        in place of any tree prepared before."""
        self.prepared = prepared

    def take_prepared(self, repo_posix, files, parsed_suffixes, file_alone_suffixes, timings):
        """The prepared tree's step 1, if the tree is still what it was
        prepared from (see `PreparedTree`); the prepared tree is spent
        either way."""
        timings["prepared_used"] = 0
        prepared, self.prepared = self.prepared, None
        if prepared is None:
            return None
        t = time.monotonic()
        holds = prepared.still_holds(repo_posix, files, parsed_suffixes, file_alone_suffixes)
        timings["prepared_check_s"] = round(time.monotonic() - t, 3)
        timings["prepared_used"] = 1 if holds else 0
        if not holds:
            return None
        timings.update(prepared.cache_timings)
        timings["prepared_step1_s"] = prepared.step1_s
        return prepared.tree
