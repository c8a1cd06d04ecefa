"""cgc-fresh stored-edge memo: what a long-lived worker's last request left
in an embedded Kùzu database — every source file's stored link edges (as
the driver's signatures) and the stored File paths — kept for its next
request, so that the request does not read them all again while it holds
the database's lock (what the read costs: docs/BENCHMARKS.md, "Figures
behind design choices").

Loaded by the incremental driver from the file next to it (the service
writes it there as `incremental-stored-edges.py`).

**When the memo is used.** Only for Kùzu, and only when the database file,
after this request opened it, holds what this worker's last request left
when it closed. Measured on the Kùzu CodeGraphContext 0.6.13 ships:
opening the database as the CLI does, and reading it, leave the file as
it is; every close of a database opened for writing — even one that wrote
nothing, as the person's own `cgc query` — rewrites the file's first page
(a new mtime; two bytes of the header change) and nothing else; a
write changes pages after the first one, and a write not yet
checkpointed leaves `<db>.wal`. So the memo holds when either

- the file's identity (device, inode, size, mtime and ctime in ns) is the
  one it had right after that close, or
- its contents after the first page (`HEADER_BYTES`) are byte for byte
  those it had then (compared by SHA-256, read through `O_NOFOLLOW` and
  bracketed by two identical looks at the identity; files up to
  `DIGEST_MAX_BYTES`), with no write-ahead log or shadow file beside it:
  only header-only closes, as the person's queries make, came between.

The digest of what the close left is taken once the request's answer is
out (`settle`), and the comparison when a request or a prepare first asks
(`left_as_it_was`) — before the database is opened, so neither is part of
the lock. Once the lock is held the identity is looked at again: the
file must be the one that was compared. Anything else — a reconcile, a
writer that crashed, another program's write — makes the memo a miss,
and the edges are read. Any doubt — another database path, another
repository, a request that failed, a close that failed, a
whole-repository link pass (C++ and C# files) — drops the memo.

What the content rule does not see: a header-only difference that
points the database at other pages than ours, each byte of which the
file already held — another writer putting back exactly a state the file
was in before, page for page. No checkpoint that writes new content
does that; the verify mode below would catch it in the tests.

**The schema.** The same check tells a request that the database's
schema (node and relationship tables, constraints, indexes, CGC's column
migrations — all idempotent `CREATE … IF NOT EXISTS` statements) is as
the last request left it, so
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

import hashlib
import os
import stat as stat_mod

VERIFY_ENV = "CGC_FRESH_VERIFY_STORED_EDGES"
# Backends whose database is one file this memo can watch.
WATCHED_BACKENDS = ("kuzudb",)
# Suffixes of files whose link pass runs over the whole repository
# (`write_cpp_class_function_links`, C#'s partial classes): their edges are
# not only the re-linked files'.
WHOLE_REPOSITORY_SUFFIXES = (".cpp", ".h", ".hpp", ".hh", ".cs")
# Kùzu's database header: the file's first page. A close that wrote
# nothing rewrites it alone.
HEADER_BYTES = 4096
# Files Kùzu leaves beside the database while a write is not checkpointed.
SIDE_FILES = (".wal", ".shadow")
# Larger database files are not compared by contents (the identity rule
# alone holds): SHA-256 reads about 1.5 GB/s here, and a request must not
# wait seconds for a comparison. The 2 000-module benchmark's file is
# about 0.1 GB.
DIGEST_MAX_BYTES = 512 * 1024 * 1024


class StoredEdgeMismatch(Exception):
    """A remembered answer that a fresh read contradicts (verify mode)."""


def _identity(path):
    """The database file's identity, None when it cannot be trusted (not a
    regular file, or a write-ahead log or shadow file beside it)."""
    try:
        st = os.stat(path, follow_symlinks=False)
    except OSError:
        return None
    if not stat_mod.S_ISREG(st.st_mode) or any(os.path.lexists(path + side) for side in SIDE_FILES):
        return None
    return _stat_identity(st)


def _stat_identity(st):
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


def _content_digest(path):
    """(identity, SHA-256 of everything after the header page) of the file
    at `path`, or None when it cannot be read as one unchanged regular
    file: the identity is the same before the read, of the opened file
    (`O_NOFOLLOW`) and after the read."""
    before = _identity(path)
    if before is None or before[2] > DIGEST_MAX_BYTES:
        return None
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        if _stat_identity(os.fstat(fd)) != before:
            return None
        digest = hashlib.sha256()
        os.lseek(fd, HEADER_BYTES, os.SEEK_SET)
        while True:
            chunk = os.read(fd, 1 << 20)
            if not chunk:
                break
            digest.update(chunk)
    except OSError:
        return None
    finally:
        os.close(fd)
    if _identity(path) != before:
        return None
    return before, digest.digest()


class StoredEdgeMemo:
    """One worker's memo; `recall` at a request's start (with the database
    open), `remember` once it wrote, `closed` once it closed."""

    def __init__(self):
        self._kept = None  # (place, identity, stored, stored_files)
        self._pending = None  # (place, stored, stored_files), until the close
        # SHA-256 of the kept file after its header page (`settle`).
        self._digest = None
        # An identity whose contents were found to be the kept ones.
        self._accepted = None
        # (path, identity) the worker's last clean close left, its schema
        # known in place (`schema_in_place`).
        self._schema_kept = None
        # Whether the last `recall` answered through the contents.
        self.by_content = False
        self.verify = os.environ.get(VERIFY_ENV) == "1"

    @staticmethod
    def place(backend, db_path, prefix):
        if backend not in WATCHED_BACKENDS or not isinstance(db_path, str) or not db_path:
            return None
        return (backend, os.path.abspath(db_path), prefix)

    def recall(self, place):
        """(stored, stored_files) as the last request left them, or None.
        The memo is spent either way: `remember` makes the next one."""
        kept = self._kept
        self.by_content = False
        answer = None
        if place is not None and kept is not None and kept[0] == place:
            # Under the lock: the file must be the one compared before.
            by = self._still_ours(kept, compare=False)
            if by:
                self.by_content = by == "contents"
                answer = (kept[2], kept[3])
        self._kept, self._pending, self._digest, self._accepted = None, None, None, None
        return answer

    def left_as_it_was(self, db_path=None, *, compare=True):
        """Whether the database this memo kept (at `db_path`, when given)
        still holds what the last request left when it closed (see the
        module doc). Does not spend the memo. Asked before the database
        opens (is its schema known to be in place?) and after a prepare,
        where the contents may be compared; and once the database is open
        (see `SchemaDeferred` in the driver) with `compare=False`: under
        the lock only the identity is looked at, which must be the one
        found before."""
        kept = self._kept
        if kept is None:
            return False
        if db_path is not None and (not isinstance(db_path, str) or os.path.abspath(db_path) != kept[0][1]):
            return False
        return bool(self._still_ours(kept, compare=compare))

    def _still_ours(self, kept, compare):
        """How the kept file is known to be still as the last request left
        it — by its "identity" or by its "contents" (compared now only if
        `compare`) — or None."""
        identity = _identity(kept[0][1])
        if identity is None:
            return None
        if identity == kept[1]:
            return "identity"
        if identity == self._accepted:
            return "contents"
        if self._digest is None or not compare:
            return None
        looked = _content_digest(kept[0][1])
        if looked is None or looked[0] != identity or looked[1] != self._digest:
            return None
        self._accepted = identity
        return "contents"

    def settle(self):
        """Once the request's answer is out: the digest of the file the
        close left, if the file is still the one the close left."""
        kept = self._kept
        if kept is None or self._digest is not None:
            return
        looked = _content_digest(kept[0][1])
        if looked is not None and looked[0] == kept[1]:
            self._digest = looked[1]

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

    def schema_in_place(self, db_path=None, *, compare=True):
        """Whether the open may leave out CGC's schema statements: the memo
        holds (`left_as_it_was`), or the file is, by its identity, the one
        the worker's last clean close left — an open of the worker's ran
        the statements or knew them in place, and nobody opened the file
        since. The second rule serves the MCP calls a worker answers before
        its first sync, which leaves no memo."""
        if self.left_as_it_was(db_path, compare=compare):
            return True
        schema = self._schema_kept
        if schema is None:
            return False
        if db_path is not None and (not isinstance(db_path, str) or os.path.abspath(db_path) != schema[0]):
            return False
        return _identity(schema[0]) == schema[1]

    def read_only_closed(self, backend, db_path, *, memo_held):
        """A use of the database that only read it (an MCP tool call,
        `mcp_tools.py`) closed it cleanly. Such a close rewrites the header
        page alone (see the module doc). If the open found this memo
        holding (`memo_held`: it looked at the identity under the lock, as
        `left_as_it_was` with `compare=False`), the file still holds what
        the last request left and its new identity is kept (the digest, of
        the pages after the header, stays true); either way the schema is
        known in place for the identity the close left
        (`schema_in_place`). Without it, each call would make the next
        open compare the whole file's contents or run CGC's schema
        statements again."""
        if backend not in WATCHED_BACKENDS or not isinstance(db_path, str) or not db_path:
            return
        path = os.path.abspath(db_path)
        identity = _identity(path)
        if identity is None:
            self._schema_kept = None
            return
        self._schema_kept = (path, identity)
        kept = self._kept
        if memo_held and kept is not None and kept[0][1] == path:
            self._kept = (kept[0], identity, kept[2], kept[3])
            self._accepted = None

    def closed(self, cleanly):
        """The request's database is closed: keep what it left, with the
        file's identity now, if the close went through."""
        pending, self._pending = self._pending, None
        if not cleanly or pending is None:
            return
        identity = _identity(pending[0][1])
        if identity is not None:
            self._kept = (pending[0], identity, pending[1], pending[2])
            self._digest, self._accepted = None, None
            self._schema_kept = (pending[0][1], identity)
