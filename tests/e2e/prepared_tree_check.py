"""The rules by which a worker's request uses the tree it prepared
(`PreparedTree` in `driver/prepared_tree.py`), without CodeGraphContext:
the files are real files in a temporary directory, CGC's settings a
stand-in, the suffixes whose parse reads the file alone the driver's own
(`cgc_seam.FILE_ALONE_SUFFIXES`, from `cgc_seam.py` beside it).

    python prepared_tree_check.py PREPARED_TREE_PY

Prints one JSON line per case: whether the prepared tree still holds, and
how many files it compared by content. The Rust test (`prepared_tree.rs`)
judges them.
"""

import importlib.util
import json
import os
import sys
import tempfile
import time
from pathlib import Path


def load(path, module_name):
    spec = importlib.util.spec_from_file_location(module_name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def main():
    prepared_tree = load(sys.argv[1], "cgc_fresh_prepared_tree")
    seam = load(os.path.join(os.path.dirname(sys.argv[1]), "cgc_seam.py"), "cgc_fresh_cgc_seam")
    settings = {"INDEX_VARIABLES": "true"}
    prepared_tree.cgc_settings = lambda: dict(settings)

    with tempfile.TemporaryDirectory(prefix="prepared-tree-") as tmp:
        run_cases(prepared_tree, seam.FILE_ALONE_SUFFIXES, settings, Path(tmp))


def run_cases(prepared_tree, file_alone_suffixes, settings, root):
    PreparedTree = prepared_tree.PreparedTree
    repo = root.as_posix()
    for name in ("a.py", "b.py", "c.py"):
        (root / name).write_text(f"def {name[0]}():\n    return 1\n")

    def files():
        return sorted(p for p in root.iterdir() if p.is_file())

    def prepare(started_ns):
        listing = PreparedTree.identities(files())
        racy = PreparedTree.racy_contents(listing, started_ns)
        return PreparedTree(repo, prepared_tree.cgc_settings(), listing, started_ns, racy, tree=None)

    # The suffixes CodeGraphContext has a parser for (a part of them).
    parsed = {".py", ".js", ".ts", ".lua"}

    def report(case, prepared, repo_posix=repo):
        holds = prepared.still_holds(repo_posix, files(), parsed, file_alone_suffixes)
        print(json.dumps({"case": case, "holds": holds, "racy": len(prepared.racy or {})}), flush=True)

    # Files older than 2 s before the prepare are compared by identity
    # alone; a prepare "10 s from now" sees the new files as old.
    later = time.time_ns() + 10_000_000_000
    report("unchanged", prepare(later))
    # Files changed just before the prepare are compared by content too.
    report("unchanged, just edited", prepare(time.time_ns()))

    # A just-edited file whose bytes differ while its identity did not
    # change (a second write in the same clock tick, same size): the
    # recorded digest is another file's.
    tampered = prepare(time.time_ns())
    tampered.racy[str(root / "a.py")] = tampered.racy[str(root / "b.py")]
    report("same identity, other bytes", tampered)

    # Each change below comes after a pause longer than a tick of the
    # file-time clock, so that the identities differ.
    prepared = prepare(later)
    time.sleep(0.05)
    (root / "b.py").write_text("def b():\n    return 2\n")
    report("a file rewritten", prepared)

    prepared = prepare(later)
    time.sleep(0.05)
    (root / "d.py").write_text("def d():\n    return 3\n")
    report("a file added", prepared)

    prepared = prepare(later)
    os.remove(root / "d.py")
    report("a file removed", prepared)

    prepared = prepare(later)
    settings["INDEX_VARIABLES"] = "false"
    report("other settings", prepared)

    report("another repository", prepare(later), repo_posix=repo + "-other")

    # A file CodeGraphContext has no parser for is a bare File node.
    (root / "notes.txt").write_text("not code\n")
    report("a file no parser reads", prepare(later))

    # Lua's parse may read other files (its module search): not one of
    # `FILE_ALONE_SUFFIXES`.
    (root / "e.lua").write_text("local function e() return 4 end\n")
    report("a file whose parse may read other files", prepare(later))


if __name__ == "__main__":
    main()
