#!/usr/bin/env python3
"""What a restart of the managed watcher costs on the real CLI.

A watcher is restarted when edits wait that its observer cannot report
(`freshness/drift_observer/watcher.rs`): the old `cgc watch` is stopped with SIGINT
and `cgc watch --sync-on-start .` runs again until its ready line. This
measures both halves on throw-away Python workspaces of the given module
counts (each indexed first with Kùzu, in its own HOME), three times each,
and for comparison a plain `cgc watch .` to its ready line.

    scripts/watcher-start-up-cost.py CGC MODULES...
    scripts/watcher-start-up-cost.py .cache/cgc-venv/bin/cgc 6 50
"""

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

READY = "Monitoring for file changes"


def workspace(root, modules):
    pkg = os.path.join(root, "ws", "pkg")
    os.makedirs(pkg)
    open(os.path.join(pkg, "__init__.py"), "w").close()
    for i in range(modules - 1):
        with open(os.path.join(pkg, f"m{i}.py"), "w") as out:
            if i:
                out.write(f"from pkg.m{i - 1} import f{i - 1}\n\n\n")
                out.write(f"def f{i}(x):\n    return f{i - 1}(x) + x\n")
            else:
                out.write(f"def f{i}(x):\n    return x\n")
            out.write(f"\n\nclass C{i}:\n    def m(self):\n        return f{i}(1)\n")
    return os.path.dirname(pkg)


def to_ready_then_stop(cgc, ws, env, args):
    started = time.monotonic()
    child = subprocess.Popen(
        [cgc, "--db", "kuzudb", *args],
        cwd=ws,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    for line in child.stdout:
        if READY in line:
            break
    ready = time.monotonic() - started
    started = time.monotonic()
    child.send_signal(signal.SIGINT)
    child.wait()
    return ready, time.monotonic() - started


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    cgc = os.path.abspath(sys.argv[1])
    for modules in map(int, sys.argv[2:]):
        root = tempfile.mkdtemp(prefix="cgc-fresh-watch-cost-")
        try:
            home = os.path.join(root, "home")
            os.makedirs(home)
            ws = workspace(root, modules)
            env = {"PATH": os.environ.get("PATH", ""), "HOME": home, "COLUMNS": "1000"}
            started = time.monotonic()
            subprocess.run([cgc, "--db", "kuzudb", "index", "."], cwd=ws, env=env,
                           capture_output=True, check=True)
            index = time.monotonic() - started
            for label, args in (("watch --sync-on-start .", ["watch", "--sync-on-start", "."]),
                                ("watch .", ["watch", "."])):
                runs = [to_ready_then_stop(cgc, ws, env, args) for _ in range(3)]
                print(f"{modules} modules (index {index:.1f} s): `cgc {label}` to ready "
                      + ", ".join(f"{ready:.1f}" for ready, _ in runs)
                      + " s; SIGINT to exit "
                      + ", ".join(f"{stop:.2f}" for _, stop in runs) + " s", flush=True)
        finally:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
