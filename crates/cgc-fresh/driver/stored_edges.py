"""cgc-fresh stored-edge memo: what a long-lived worker's last request left
in an embedded Kùzu database — every source file's stored link edges (as
the driver's signatures) and the stored File paths — kept for its next
request, so that the request does not read them all again while it holds
the database's lock (at 2 000 modules the read is about 0.25 s of a lock
held about 1.2 s).

Loaded by the incremental driver from the file next to it (the service
writes it there as `incremental-stored-edges.py`).

**When the memo is used.** Only for Kùzu, and only when the database file,
after this request opened it, is exactly as this worker's last request
left it when it closed: same device, inode, size, mtime and ctime (ns), and
no write-ahead log beside it. Measured on the Kùzu CodeGraphContext 0.6.13
ships: opening the database as the CLI does, and reading it, leave the
file as it is; every close of a database opened for writing — even one
that wrote nothing — rewrites the file (a new mtime); a write not yet
checkpointed leaves `<db>.wal`. So any other process that opened the
database since (the person's own `cgc`, a reconcile, a writer that
crashed) makes the memo a miss, and the edges are read. The check is made
while this request holds the database, so nobody can write between the
check and the use. Any doubt — another database path, another
repository, a request that failed, a close that failed, a whole-repository
link pass (C++ and C# files) — drops the memo.

**The schema.** The same check tells a request that the database's
schema (node and relationship tables, constraints, indexes, CGC's column
migrations — all idempotent `CREATE … IF NOT EXISTS` statements, about
0.05 s of the lock at 2 000 modules) is as the last request left it, so
the open skips them (`left_as_it_was`).

**What it holds after a request.** The stored edges as they were read (or
remembered), with the request's writes applied the way the driver makes
them: every edge out of a re-linked or changed file deleted, every edge
into a changed file deleted, and each re-linked file's edges replaced by
the rows the request wrote — the signatures the driver's comparison
predicts CGC's writer stores, the same prediction a fresh read is compared
with. With `CGC_FRESH_VERIFY_STORED_EDGES=1` (set by the real-CLI tests)
every remembered answer is checked against a fresh read, and a mismatch
fails the request.
"""

import os

VERIFY_ENV = "CGC_FRESH_VERIFY_STORED_EDGES"
# Backends whose database is one file this memo can watch.
WATCHED_BACKENDS = ("kuzudb",)
# Suffixes of files whose link pass runs over the whole repository
# (`write_cpp_class_function_links`, C#'s partial classes): their edges are
# not only the re-linked files'.
WHOLE_REPOSITORY_SUFFIXES = (".cpp", ".h", ".hpp", ".hh", ".cs")


class StoredEdgeMismatch(Exception):
    """A remembered answer that a fresh read contradicts (verify mode)."""


def _identity(path):
    """The database file's identity, None when it cannot be trusted (not a
    regular file, or a write-ahead log beside it)."""
    try:
        st = os.stat(path, follow_symlinks=False)
    except OSError:
        return None
    import stat as stat_mod

    if not stat_mod.S_ISREG(st.st_mode) or os.path.lexists(path + ".wal"):
        return None
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


class StoredEdgeMemo:
    """One worker's memo; `recall` at a request's start (with the database
    open), `remember` once it wrote, `closed` once it closed."""

    def __init__(self):
        self._kept = None  # (place, identity, stored, stored_files)
        self._pending = None  # (place, stored, stored_files), until the close
        self.verify = os.environ.get(VERIFY_ENV) == "1"

    @staticmethod
    def place(backend, db_path, prefix):
        if backend not in WATCHED_BACKENDS or not isinstance(db_path, str) or not db_path:
            return None
        return (backend, os.path.abspath(db_path), prefix)

    def recall(self, place):
        """(stored, stored_files) as the last request left them, or None.
        The memo is spent either way: `remember` makes the next one."""
        kept, self._kept, self._pending = self._kept, None, None
        if place is None or kept is None or kept[0] != place:
            return None
        identity = _identity(place[1])
        if identity is None or identity != kept[1]:
            return None
        return kept[2], kept[3]

    def left_as_it_was(self, db_path=None):
        """Whether the database this memo kept (at `db_path`, when given)
        is still exactly as the last request left it when it closed. Does
        not spend the memo. Asked before the database opens (is its schema
        known to be in place?) and again once it is open (see
        `SchemaDeferred` in the driver)."""
        kept = self._kept
        if kept is None:
            return False
        path = kept[0][1]
        if db_path is not None and (not isinstance(db_path, str) or os.path.abspath(db_path) != path):
            return False
        identity = _identity(path)
        return identity is not None and identity == kept[1]

    def check(self, remembered, read):
        """Verify mode: the remembered answer must equal a fresh read."""
        if remembered is None or not self.verify:
            return
        if remembered[0] != read[0] or remembered[1] != read[1]:
            stored, files = remembered
            fresh_stored, fresh_files = read
            sources = sorted(
                src for src in set(stored) | set(fresh_stored) if stored.get(src) != fresh_stored.get(src)
            )
            raise StoredEdgeMismatch(
                f"stored-edge memo differs from the database: sources {sources[:5]}, "
                f"files {sorted(files ^ fresh_files)[:5]}"
            )

    def remember(self, place, stored, stored_files, *, unlink, changed, relinked, expected, deleted, written):
        """The stored edges and files once this request's writes are made
        (see the module doc); kept only if the database then closes."""
        if place is None or any(p.endswith(WHOLE_REPOSITORY_SUFFIXES) for p in set(relinked) | set(changed)):
            self._pending = None
            return
        after = {}
        for src, sigs in stored.items():
            if src in unlink:
                continue
            kept = {sig for sig in sigs if sig[4] not in changed}
            if kept:
                after[src] = kept
        for src in relinked:
            sigs = expected.get(src)
            if sigs:
                after[src] = set(sigs)
        files = (set(stored_files) - set(deleted)) | set(written)
        self._pending = (place, after, files)

    def closed(self, cleanly):
        """The request's database is closed: keep what it left, with the
        file's identity now, if the close went through."""
        pending, self._pending = self._pending, None
        if not cleanly or pending is None:
            return
        identity = _identity(pending[0][1])
        if identity is not None:
            self._kept = (pending[0], identity, pending[1], pending[2])
