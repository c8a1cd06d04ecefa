"""The tree prepared ahead of a request: step 1 (parse and resolve, no
database) done while the service's batching window is open, kept by the
worker (`Worker.keep_prepared`) and used by the next request only if the
tree is still what was prepared (`PreparedTree.still_holds`;
`Worker.take_prepared` spends it either way).
"""

import json
import os


class TreeState:
    """Step 1's outcome: what the database phase needs of the tree."""

    def __init__(self, **parts):
        self.__dict__.update(parts)


# Set by the real-CLI tests: a request that uses a prepared tree computes
# step 1 again and fails on any difference (`PreparedTree.verify`).
VERIFY_PREPARED_ENV = "CGC_FRESH_VERIFY_PREPARED"
# Files changed this recently (ns) before a prepare began are compared by
# content, not by identity (see `PreparedTree`).
PREPARED_RACY_NS = 2_000_000_000


def cgc_settings():
    """CGC's settings as the request reads them (`RequestMemos`)."""
    try:
        from codegraphcontext.cli import config_manager

        return config_manager.load_config()
    except Exception:  # noqa: BLE001 - unknown settings match nothing
        return object()


class PreparedTree:
    """Step 1 done ahead of the request it is for.

    Between an edit's result and the end of the batching window the
    service asks an idle worker to `prepare`: it parses and resolves the
    tree as it is then, and keeps the outcome. The next request uses it
    instead of doing step 1 again only if the tree is still what was
    prepared:

    - the same repository and the same CGC settings;
    - the same files, discovered as `cgc index` does (an added, removed or
      newly ignored file: not used), each of a suffix whose parse reads the
      file alone (`cgc_seam.FILE_ALONE_SUFFIXES`) or of one CGC has no parser for
      (such a file is a bare File node, whatever it holds: `pip` has a few
      `.txt` files);
    - each file's identity (size, mtime, ctime, inode, device), taken before
      the prepare parsed anything, unchanged;
    - and the files changed within `PREPARED_RACY_NS` before the prepare
      began — the files just edited, whose identity a second write in the
      same clock tick could leave as it was — byte for byte what they were
      before and after the prepare parsed them.

    A parse is a function of the file's bytes, its path and the settings;
    resolution a function of the parse results; so the prepared outcome is
    what step 1 would compute now. `CGC_FRESH_VERIFY_PREPARED=1` (set by the
    real-CLI tests) computes step 1 again anyway and fails the request on
    any difference."""

    def __init__(self, repo_posix, settings, listing, started_ns, racy, tree):
        self.repo_posix = repo_posix
        self.settings = settings
        self.listing = listing
        self.started_ns = started_ns
        self.racy = racy
        self.tree = tree
        self.cache_timings = {}
        # How long step 1 took in the prepare (reported by the request
        # that uses it: its own step 1 is only the check).
        self.step1_s = None

    @staticmethod
    def identities(files):
        out = {}
        for f in files:
            path = str(f)
            try:
                st = os.stat(path)
                out[path] = (st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino, st.st_dev)
            except OSError:
                out[path] = None
        return out

    @staticmethod
    def racy_contents(listing, started_ns):
        """{path: sha256 of its bytes} of the files changed within
        `PREPARED_RACY_NS` before `started_ns`; None when one cannot be read."""
        import hashlib

        out = {}
        for path, ident in listing.items():
            if ident is None:
                return None
            if max(ident[1], ident[2]) < started_ns - PREPARED_RACY_NS:
                continue
            try:
                digest = hashlib.sha256()
                with open(path, "rb") as f:
                    # In pieces: a workspace file may be of any size.
                    for chunk in iter(lambda: f.read(1 << 20), b""):
                        digest.update(chunk)
                out[path] = digest.hexdigest()
            except OSError:
                return None
        return out

    def still_holds(self, repo_posix, files, parsed_suffixes, file_alone_suffixes):
        """Whether `files` (discovered now) are the prepared tree's;
        `parsed_suffixes`: the suffixes CGC has a parser for (a file of
        another suffix is a bare File node, whatever it holds);
        `file_alone_suffixes`: those whose parse reads the file alone."""
        if repo_posix != self.repo_posix or cgc_settings() != self.settings:
            return False
        listing = self.identities(files)
        if listing != self.listing:
            return False
        for path in listing:
            suffix = os.path.splitext(path)[1]
            if not path.endswith(file_alone_suffixes) and (suffix in parsed_suffixes or path.endswith(".d.ts")):
                return False
        return self.racy_contents(listing, self.started_ns) == self.racy

    @staticmethod
    def verify(prepared, fresh):
        """Verify mode: the prepared outcome must equal step 1 run now. A
        file parsed twice can list its items in another order (tree-sitter
        capture order; CGC's own from-scratch runs differ the same way), so
        lists compare as multisets."""
        for part in ("parsed", "links", "expected", "targets", "csharp_paths", "module_first",
                     "module_defined", "imports_map"):
            a, b = getattr(prepared, part), getattr(fresh, part)
            if part == "parsed":
                a = {k: v[1] for k, v in a.items()}
                b = {k: v[1] for k, v in b.items()}
            if unordered(a) != unordered(b):
                raise RuntimeError(f"the prepared tree's {part} differs from step 1 run now")


def unordered(value):
    """`value` as JSON text in which every list, tuple and set is sorted."""

    def canon(v):
        if isinstance(v, dict):
            return {str(k): canon(x) for k, x in v.items()}
        if isinstance(v, (list, tuple, set, frozenset)):
            return sorted((canon(x) for x in v), key=lambda x: json.dumps(x, sort_keys=True, default=repr))
        return v

    return json.dumps(canon(value), sort_keys=True, default=repr)
