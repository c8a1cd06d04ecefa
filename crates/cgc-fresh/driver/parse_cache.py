"""cgc-fresh parse cache: CodeGraphContext's per-file parse results (and
per-file import pre-scan results) kept between incremental syncs, so that a
sync re-parses only the files that changed since the last one.

Loaded by the incremental driver from the file next to it (the service
writes it there as `incremental-parse-cache.py`); the cache itself is one
file in the workspace's private state directory, named by the driver's
`--parse-cache PATH`.

An entry is used only when the file's identity — path, size, mtime (ns),
ctime (ns), inode, device — is what it was when the entry was made, and the
whole cache only when it was made by the same CodeGraphContext, tree-sitter
and Python versions, this format, for the same repository, under the same
parse-relevant settings. On any doubt (unreadable, not a regular file of
ours, too large, a checksum or a line that does not match) the cache is
ignored and every file parsed, exactly as without it.

A file changed a moment before it is looked at is "racy" (as git calls
it): file times come from a coarse clock, so a second write in the same
tick with the same size would leave its identity unchanged. So:

- a file changed at least `RACY_NS` (2 s) before it was looked at is
  trusted by its identity alone (2 s: room for a file system whose times
  have whole seconds, or whose clock lags ours);
- a file changed at least `FINE_RACY_NS` (100 ms) before, on a file system
  whose times carry sub-second parts (the file's ctime has them), gets an
  entry that also holds the SHA-256 of its bytes, and the entry is used
  only while the bytes still have it. The kernel's timestamps tick at most
  every 10 ms, so a write after the look changes the identity; the digest
  answers for a clock that is not ours (a network file system's);
- a file changed more recently is parsed but not stored — except that a
  file changed before the run began waits out its window before it is
  looked at (the run waits at most 100 ms in all), so that a sync right
  after an edit stores the edited file and the next sync parses only what
  that one changed.

A file's ctime cannot be set from user space, so a tool that restores an
mtime still changes the identity. The clock and the sleep are inputs
(`ParseCache(clock=, sleep=)`), for the tests.

File format (UTF-8 lines):

    {"format": 3, "key": {...}, "count": N, "sha256": "<of the body>"}
    [path, size, mtime_ns, ctime_ns, ino, dev]<TAB>{"parse": ..., "prescan": ...}
    [path, size, mtime_ns, ctime_ns, ino, dev, "<sha256 of the file>"]<TAB>{...}
    ...

JSON never writes a raw tab or newline inside a value, so each line splits
at its first tab; payloads are decoded only when used. Tuples (CGC's parse
results hold some, and its resolution compares them) are stored as
`{"\\u0000tuple": [...]}`; a value JSON cannot carry exactly is not stored.

A long-lived worker also keeps a `Resident` between its requests, so that a
warm request decodes no JSON and parses no file twice:

- every payload it decoded, as `marshal` bytes keyed by the payload's raw
  bytes in the file (the same bytes always decode to the same value, so
  this needs no other check); `marshal` gives back tuples as tuples and
  fresh objects each time, so a request that changes a parse result in
  place cannot change the next one's;
- the entries it made that the file does not hold yet (see `GAIN_SHARE`),
  used under the same identity rule as the file's and written with the
  next rewrite.

The file is still read and checked on every request; only its decoding is
saved. A file ignored (any doubt above) drops the worker's entries too.
"""

import functools
import hashlib
import json
import marshal
import math
import os
import secrets
import sys
import time

# 2: a Go file's entry is its parse with the query captures in document
# order (`session_patches.GoCapturesInOrder`); a format-1 cache could hold
# a Go parse made without. 3: an entry may hold the file's digest (a file
# changed within `RACY_NS` of its parse).
FORMAT = 3
# Bounds: a larger cache is not written, and not read.
MAX_CACHE_BYTES = 256 * 1024 * 1024
MAX_ENTRIES = 200_000
# Entries of files changed this recently (ns) before they were looked at
# are not trusted by their identity alone; those of files changed more
# recently than `FINE_RACY_NS` are not stored (the module doc).
RACY_NS = 2_000_000_000
FINE_RACY_NS = 100_000_000
# The length of a hex SHA-256, the digest an entry may hold.
DIGEST_LEN = 64
TUPLE_TAG = "\u0000tuple"
# Stale entries (files changed or gone) are harmless, but the file is
# rewritten when they are this share of it, so it does not grow.
STALE_SHARE = 0.1
# New entries are written once they are this share of the cache (at least
# one): rewriting a large cache for the one file an edit changed costs more
# than parsing that file again at the next sync.
GAIN_SHARE = 0.01

_CREDENTIAL_WORDS = ("PASSWORD", "SECRET", "TOKEN", "KEY", "USER", "URI", "URL")


class Uncacheable(Exception):
    """A value JSON cannot carry exactly."""


def _encode(value):
    kind = type(value)
    if value is None or kind in (str, bool, int):
        return value
    if kind is float:
        if not math.isfinite(value):
            raise Uncacheable("non-finite float")
        return value
    if kind is tuple:
        return {TUPLE_TAG: [_encode(v) for v in value]}
    if kind is list:
        return [_encode(v) for v in value]
    if kind is dict:
        out = {}
        for k, v in value.items():
            if type(k) is not str or k == TUPLE_TAG:
                raise Uncacheable("a key JSON cannot carry")
            out[k] = _encode(v)
        return out
    raise Uncacheable(f"a {kind.__name__}")


def _detuple(obj):
    if len(obj) == 1 and TUPLE_TAG in obj:
        items = obj[TUPLE_TAG]
        if type(items) is not list:
            raise ValueError("a malformed tuple")
        return tuple(items)
    return obj


def _identity(st):
    return (st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino, st.st_dev)


def _fine_times(ident):
    """Whether the file system gives this file sub-second times (its
    ctime, which only the kernel sets, has a sub-second part)."""
    return ident[2] % 1_000_000_000 != 0


def stamp_kind(ident, seen_ns):
    """How an entry of a file of identity `ident`, looked at at `seen_ns`,
    may be stored: "identity" (trusted by it alone), "digest" (with the
    digest of the file's bytes) or None (not stored). See the module doc."""
    changed = max(ident[1], ident[2])
    if changed < seen_ns - RACY_NS:
        return "identity"
    if _fine_times(ident) and changed < seen_ns - FINE_RACY_NS:
        return "digest"
    return None


def racy_wait_ns(ident, seen_ns):
    """How long to wait before parsing a file of identity `ident` looked
    at at `seen_ns` so that its parse can be stored: 0 when it can be now
    or never will be by waiting at most `FINE_RACY_NS` (whole-second times,
    a time in the future)."""
    if not _fine_times(ident):
        return 0
    # To the first nanosecond `stamp_kind` takes ("digest": strictly older).
    wait = max(ident[1], ident[2]) + FINE_RACY_NS + 1 - seen_ns
    return wait if 0 < wait <= FINE_RACY_NS + 1 else 0


def _stamp_fields(stamp):
    """A stamp as its line writes it: the identity, then the digest if any."""
    return list(stamp[:5]) + ([stamp[5]] if stamp[5] else [])


def _read_upto(fd, size):
    """The chunks of `fd` from where it is, at most `size` + 1 bytes: one
    more than the size it had, so a file that grew shows it."""
    left = size + 1
    while left > 0:
        chunk = os.read(fd, min(left, 1 << 20))
        if not chunk:
            return
        yield chunk
        left -= len(chunk)


def file_digest(path, ident):
    """The SHA-256 (hex) of the file's bytes if it is still the regular
    file of identity `ident` before and after the read, else None. Opened
    non-blocking, so a FIFO planted in the workspace cannot hang the sync."""
    import stat as stat_mod

    flags = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags)
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if not stat_mod.S_ISREG(st.st_mode) or _identity(st) != ident:
            return None
        digest = hashlib.sha256()
        read = 0
        for chunk in _read_upto(fd, st.st_size):
            digest.update(chunk)
            read += len(chunk)
        # Exactly the size it had: one byte more or fewer, it changed.
        if read != st.st_size or _identity(os.fstat(fd)) != ident:
            return None
        return digest.hexdigest()
    except OSError:
        return None
    finally:
        os.close(fd)


# The installed CodeGraphContext and tree-sitter versions, read once per
# process: the code that parses is the code this process imported, which a
# later upgrade on disk does not change, and scanning every installed
# distribution on every request costs time (docs/BENCHMARKS.md, "Figures
# behind design choices").
@functools.cache
def _parser_versions():
    from importlib import metadata

    versions = {}
    for dist in metadata.distributions():
        name = (dist.metadata.get("Name") or "").lower().replace("_", "-")
        if name == "codegraphcontext" or name.startswith("tree-sitter"):
            versions[name] = dist.version
    return versions


def cache_key(repo_posix):
    """What must be equal for any entry to be trusted."""
    try:
        versions = _parser_versions()
    except Exception:  # noqa: BLE001 - no versions, no cache
        return None
    if "codegraphcontext" not in versions:
        return None
    try:
        from codegraphcontext.cli import config_manager

        config = config_manager.load_config()
        defaults = getattr(config_manager, "DEFAULT_CONFIG", {})
        credentials = set(getattr(config_manager, "DATABASE_CREDENTIAL_KEYS", ()))
        settings = sorted(
            (k, str(v))
            for k, v in config.items()
            if k in defaults and k not in credentials and not any(w in k.upper() for w in _CREDENTIAL_WORDS)
        )
    except Exception:  # noqa: BLE001 - settings unknown, no cache
        return None
    # As JSON gives it back (lists, not tuples), so that it compares equal.
    return _as_json({
        "format": FORMAT,
        "python": sys.version,
        "versions": sorted(versions.items()),
        "repo": repo_posix,
        "settings": hashlib.sha256(json.dumps(settings).encode("utf-8")).hexdigest(),
    })


def _as_json(value):
    return json.loads(json.dumps(value))


class Resident:
    """What a long-lived worker keeps of the cache between requests (see
    the module doc). Bounded by the cache itself: it holds the payloads
    the last request used and the entries it made."""

    def __init__(self):
        self.key = None
        # raw payload bytes -> marshal bytes of its decoded value
        self.decoded = {}
        # path -> (identity, {part: encoded}, {part: marshal bytes})
        self.made = {}


class ParseCache:
    """One sync's view of the cache: what was loaded, what this run adds."""

    def __init__(self, path, key, resident=None, cached_suffixes=(), clock=time.time_ns, sleep=time.sleep):
        self.path = path
        self.clock = clock
        self.sleep = sleep
        # Racy files' windows are waited out up to this time: those of the
        # files changed before the run began (`_look`).
        self.wait_until_ns = clock() + FINE_RACY_NS + 1
        # path -> (identity, stamp): the stamp an entry made this run gets
        # (`_stamp`), the same for the parse and the pre-scan of a file
        self.stamps = {}
        # path -> (identity, digest or None), each file read once a run
        self.digests = {}
        self.key = key
        self.resident = resident
        # The suffixes whose parse reads nothing but the file itself and
        # whose pre-scan is a plain accumulation over files (the driver
        # passes `cgc_seam.FILE_ALONE_SUFFIXES`); a file of any other is
        # parsed and pre-scanned every time.
        self.cached_suffixes = tuple(cached_suffixes)
        carried = resident is not None and resident.key == key
        # What the worker's last request left (empty for a first request,
        # another key, or no worker).
        self.carried_decoded = resident.decoded if carried else {}
        self.carried_made = resident.made if carried else {}
        # The same, for the next request: what this one used or made.
        self.next_decoded = {}
        # path -> {part: marshal bytes} of what this run made
        self.made_marshal = {}
        # path -> decoded payload, this request's, and its identity
        self.decoded = {}
        self.decoded_ident = {}
        # Entries are keyed by a stamp: the file's identity and the digest
        # of its bytes ("" when the identity alone is trusted).
        # path -> (stamp, raw payload line, None); decoded payloads are in
        # `decoded` (this request's) and the `Resident` (the worker's)
        self.loaded = {}
        # path -> (stamp, {"parse": encoded, "prescan": encoded}) made this run
        self.made = {}
        # path -> identity at this run's parse
        self.current = {}
        self.hits = 0
        self.misses = 0
        # Files of a suffix the cache does not keep: handed to CGC every
        # time (a bare File node's "parse" reads nothing), neither a hit
        # nor a miss.
        self.uncached = 0
        self.state = "cold"
        self.load_s = 0.0
        self.save_s = 0.0
        self.saved = False

    # ---------------------------------------------------------- reading

    def load(self):
        t = time.monotonic()
        try:
            self.loaded = self._read()
            self.state = "warm"
        except FileNotFoundError:
            self.state = "cold"
        except Exception as exc:  # noqa: BLE001 - any doubt: ignored
            self.loaded = {}
            self.state = "ignored"
            # The worker's own entries too: a file in doubt means every
            # file is parsed again.
            self.carried_decoded = {}
            self.carried_made = {}
            print(f"cgc-fresh: parse cache ignored: {exc}", file=sys.stderr)
        self.load_s = time.monotonic() - t

    def _read(self):
        flags = os.O_RDONLY | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
        fd = os.open(self.path, flags)
        try:
            st = os.fstat(fd)
            import stat as stat_mod

            if not stat_mod.S_ISREG(st.st_mode):
                raise ValueError("not a regular file")
            if st.st_uid != os.getuid() or st.st_mode & 0o022:
                raise ValueError("not a private file of this user")
            if st.st_size > MAX_CACHE_BYTES:
                raise ValueError(f"larger than {MAX_CACHE_BYTES} bytes")
            data = b"".join(_read_upto(fd, st.st_size))
        finally:
            os.close(fd)
        if len(data) > MAX_CACHE_BYTES:
            raise ValueError("grew while read")
        head, sep, body = data.partition(b"\n")
        header = json.loads(head)
        if type(header) is not dict or header.get("format") != FORMAT:
            raise ValueError("another format")
        if header.get("key") != self.key:
            raise ValueError("made by other versions, settings or repository")
        if header.get("sha256") != hashlib.sha256(body).hexdigest():
            raise ValueError("checksum mismatch")
        lines = body.split(b"\n") if body else []
        if header.get("count") != len(lines) or len(lines) > MAX_ENTRIES:
            raise ValueError("entry count mismatch")
        entries = {}
        for line in lines:
            ident_raw, tab, payload = line.partition(b"\t")
            ident = json.loads(ident_raw)
            if (
                not tab
                or type(ident) is not list
                or len(ident) not in (6, 7)
                or type(ident[0]) is not str
                or not all(type(n) is int for n in ident[1:6])
                or (len(ident) == 7 and (type(ident[6]) is not str or len(ident[6]) != DIGEST_LEN))
            ):
                raise ValueError("a malformed entry")
            digest = ident[6] if len(ident) == 7 else ""
            entries[ident[0]] = ((*ident[1:6], digest), payload, None)
        return entries

    def _payload(self, path, ident):
        """The payload for `path` if its identity still holds: loaded from
        the file, or made by the worker's last request and not written yet."""
        decoded = self.decoded.get(path)
        if decoded is not None:
            return decoded if self.decoded_ident[path] == ident else None
        entry = self.loaded.get(path)
        if entry is not None and self._holds(entry[0], path, ident):
            decoded = self._decode(path, entry[1])
        else:
            carried = self.carried_made.get(path)
            if carried is None or not self._holds(carried[0], path, ident):
                return None
            decoded = {part: marshal.loads(raw) for part, raw in carried[2].items()}
            self.made[path] = (carried[0], dict(carried[1]))
            self.made_marshal[path] = dict(carried[2])
        if decoded is not None:
            self.decoded[path] = decoded
            self.decoded_ident[path] = ident
        return decoded

    def _decode(self, path, raw):
        known = self.carried_decoded.get(raw)
        if known is not None:
            self.next_decoded[raw] = known
            return marshal.loads(known)
        try:
            decoded = json.loads(raw, object_hook=_detuple)
        except Exception:  # noqa: BLE001 - an entry in doubt is a miss
            self.loaded.pop(path, None)
            return None
        if type(decoded) is not dict:
            self.loaded.pop(path, None)
            return None
        if self.resident is not None:
            self.next_decoded[raw] = marshal.dumps(decoded)
        return decoded

    # ---------------------------------------------------------- using

    def _stat(self, path):
        try:
            return _identity(os.stat(path))
        except OSError:
            return None

    def _look(self, path):
        """The file's identity and the clock's time just before it was
        taken — after waiting out the file's racy window (`racy_wait_ns`)
        if it ends by `wait_until_ns`."""
        seen = self.clock()
        ident = self._stat(path)
        if ident is not None:
            wait = racy_wait_ns(ident, seen)
            if wait and seen + wait <= self.wait_until_ns:
                self.sleep(wait / 1e9)
                seen = self.clock()
                ident = self._stat(path)
        return ident, seen

    def _digest(self, path, ident):
        known = self.digests.get(path)
        if known is not None and known[0] == ident:
            return known[1]
        digest = file_digest(path, ident)
        self.digests[path] = (ident, digest)
        return digest

    def _holds(self, stamp, path, ident):
        """Whether an entry's `stamp` holds for the file `path` of identity
        `ident` now: the same identity, and the same bytes where the entry
        holds their digest."""
        if ident is None or tuple(stamp[:5]) != ident:
            return False
        return not stamp[5] or self._digest(path, ident) == stamp[5]

    def _stamp(self, path, ident, seen):
        """The stamp an entry of `path` parsed at identity `ident`, looked
        at at `seen`, is stored under; None: not stored (`stamp_kind`)."""
        known = self.stamps.get(path)
        if known is not None and known[0] == ident:
            return known[1]
        kind = stamp_kind(ident, seen)
        stamp = None
        if kind == "identity":
            stamp = (*ident, "")
        elif kind == "digest":
            digest = self._digest(path, ident)
            stamp = (*ident, digest) if digest else None
        self.stamps[path] = (ident, stamp)
        return stamp

    def _remember(self, key, stamp, part, value):
        if stamp is None:
            return
        try:
            encoded = _encode(value)
            frozen = marshal.dumps(value) if self.resident is not None else None
        except (Uncacheable, ValueError):
            return
        made = self.made.get(key)
        if made is None or made[0] != stamp:
            made = (stamp, {})
            self.made[key] = made
            self.made_marshal[key] = {}
        made[1][part] = encoded
        if frozen is not None:
            self.made_marshal[key][part] = frozen

    def parse(self, builder, repo, path):
        """`builder.parse_file(repo, path, False)`, from the cache when the
        file is unchanged."""
        if not path.name.endswith(self.cached_suffixes):
            self.uncached += 1
            return builder.parse_file(repo, path, False)
        key = str(path)
        ident, seen = self._look(path)
        self.current[key] = ident
        payload = self._payload(key, ident) if ident is not None else None
        if payload is not None and "parse" in payload:
            self.hits += 1
            return payload["parse"]
        self.misses += 1
        result = builder.parse_file(repo, path, False)
        if ident is not None and "error" not in result and self._stat(path) == ident:
            self._remember(key, self._stamp(key, ident, seen), "parse", result)
        return result

    def pre_scan(self, builder, files):
        """`builder.pre_scan_imports(files)`: CGC's `pre_scan_for_imports`,
        with the per-file scan of `cached_suffixes` cached and
        merged in the order CGC merges them."""
        try:
            from codegraphcontext.tools.indexing import pre_scan as ps

            registry = ps._get_registry()
        except Exception:  # noqa: BLE001 - CGC without that shape: uncached
            return builder.pre_scan_imports(files)
        parsers_keys = builder.parsers
        get_parser = builder.get_parser
        imports_map = {}
        files_by_ext = {}
        for file in files:
            ext = file.suffix
            if file.name.endswith(".d.ts"):
                ext = ".d.ts"
            if ext in parsers_keys:
                files_by_ext.setdefault(ext, []).append(file)
        for ext, file_list in files_by_ext.items():
            scanner = registry.get(ext)
            if not scanner:
                continue
            if ext in self.cached_suffixes:
                found = {}
                for file in file_list:
                    for name, paths in self._pre_scan_one(scanner, file, get_parser).items():
                        found.setdefault(name, []).extend(paths)
            else:
                found = scanner(file_list, get_parser)
            for name, paths in found.items():
                if not paths:
                    imports_map.setdefault(name, [])
                    continue
                bucket = imports_map.setdefault(name, [])
                seen = set(bucket)
                bucket.extend(p for p in paths if not (p in seen or seen.add(p)))
        return imports_map

    def _pre_scan_one(self, scanner, file, get_parser):
        key = str(file)
        ident, seen = self._look(file)
        payload = self._payload(key, ident) if ident is not None else None
        if payload is not None and type(payload.get("prescan")) is dict:
            return payload["prescan"]
        found = scanner([file], get_parser)
        if ident is not None and self._stat(file) == ident:
            self._remember(key, self._stamp(key, ident, seen), "prescan", found)
        return found

    # ---------------------------------------------------------- writing

    def save(self):
        """Writes the cache for the files seen this run, when it gained
        enough entries or carries too many stale ones; never through a
        symlink."""
        t = time.monotonic()
        try:
            self._save()
        except Exception as exc:  # noqa: BLE001 - a cache not written is a cold start
            print(f"cgc-fresh: parse cache not written: {exc}", file=sys.stderr)
        self._leave_resident()
        self.save_s = time.monotonic() - t

    def _leave_resident(self):
        """Hands the worker's `Resident` what this request used and made
        (complete entries of files as they are now); the rest goes."""
        if self.resident is None:
            return
        made = {}
        if not self.saved:
            for path, (stamp, parts) in self.made.items():
                frozen = self.made_marshal.get(path, {})
                if self._holds(stamp, path, self.current.get(path)) and set(parts) == set(frozen) == {
                        "parse", "prescan"}:
                    made[path] = (stamp, parts, frozen)
        self.resident.key = self.key
        self.resident.decoded = self.next_decoded
        self.resident.made = made

    def _save(self):
        lines = {}
        for path, (stamp, raw, _decoded) in self.loaded.items():
            if self._holds(stamp, path, self.current.get(path)):
                lines[path] = (stamp, raw)
        stale = len(self.loaded) - len(lines)
        gained = 0
        for path, (stamp, parts) in self.made.items():
            if "parse" not in parts or not self._holds(stamp, path, self.current.get(path)):
                continue
            old = lines.get(path)
            if old is not None and old[0] == stamp:
                continue
            if "prescan" not in parts:
                continue
            lines[path] = (stamp, json.dumps(parts, separators=(",", ":")).encode("utf-8"))
            gained += 1
        if gained < max(1, GAIN_SHARE * len(lines)) and stale <= STALE_SHARE * max(len(lines), 1):
            return
        if len(lines) > MAX_ENTRIES:
            raise ValueError(f"more than {MAX_ENTRIES} files")
        body = b"\n".join(
            json.dumps([path, *_stamp_fields(stamp)], separators=(",", ":")).encode("utf-8") + b"\t" + raw
            for path, (stamp, raw) in sorted(lines.items())
        )
        header = {
            "format": FORMAT,
            "key": self.key,
            "count": len(lines),
            "sha256": hashlib.sha256(body).hexdigest(),
        }
        data = json.dumps(header, separators=(",", ":")).encode("utf-8") + b"\n" + body
        if len(data) > MAX_CACHE_BYTES:
            raise ValueError(f"larger than {MAX_CACHE_BYTES} bytes")
        directory = os.path.dirname(os.path.abspath(self.path))
        tmp = os.path.join(
            directory, f".{os.path.basename(self.path)}.{os.getpid()}.{secrets.token_hex(4)}.tmp"
        )
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
        fd = os.open(tmp, flags, 0o600)
        try:
            view = memoryview(data)
            while view:
                written = os.write(fd, view)
                view = view[written:]
            # No fsync: a cache lost or torn by a crash fails its checksum
            # and is ignored; the sync does not wait for the disk.
        except BaseException:
            os.close(fd)
            os.unlink(tmp)
            raise
        os.close(fd)
        try:
            # rename(2) replaces a symlink at the target, never follows it.
            os.replace(tmp, self.path)
        except BaseException:
            os.unlink(tmp)
            raise
        self.saved = True

    def timings(self):
        return {
            "parse_cache_hits": self.hits,
            "parse_cache_misses": self.misses,
            "parse_uncached": self.uncached,
            "parse_cache_load_s": round(self.load_s, 3),
            "parse_cache_save_s": round(self.save_s, 3),
            "parse_cache_warm": 1 if self.state == "warm" else 0,
            "parse_cache_ignored": 1 if self.state == "ignored" else 0,
        }


def open_cache(path, repo_posix, resident=None, cached_suffixes=()):
    """The cache at `path` for this repository, loaded; None when no key
    can be made (then nothing is cached). A long-lived worker passes its
    `Resident`, the same one for every request; `cached_suffixes`: see
    `ParseCache` (none: every file parsed)."""
    key = cache_key(repo_posix)
    if key is None:
        return None
    cache = ParseCache(path, key, resident, cached_suffixes)
    cache.load()
    return cache
