"""cgc-fresh incremental driver: apply CodeGraphContext's own incremental
update to exactly the given changed files, so that the graph equals a
from-scratch index of the same tree.

Run with the interpreter of the configured `cgc` (the service finds it from
`cgc`'s shebang), with cwd = the workspace root:

    python incremental.py [ROOT OPTIONS] --probe
    python incremental.py [ROOT OPTIONS] [--baseline] apply -- REL_PATH...
    python incremental.py [ROOT OPTIONS] [--idle-exit SECONDS] serve
    python incremental.py [ROOT OPTIONS] reconcile -- CGC CGC_ARGS...

`serve` is the same apply as a long-lived worker: one request per stdin
line, CodeGraphContext imported once, the database open only while a
request is applied (see `serve`). `reconcile` readies the backend for
CodeGraphContext's own writes (`falkordb_index.py`: FalkorDB's range index
is repaired) and then becomes `CGC CGC_ARGS...` (exec, same process), so
the service's reconcile, `update` or `index` run is CodeGraphContext's
exactly as before — but for FalkorDB Lite's start-up patience and a
fallback to another backend said on stderr (`backend_pin.py`).

ROOT OPTIONS are CGC's root options (`--db/--database NAME`,
`--db-path/--path PATH`), taken as `cgc` takes them, `--allow-unproven-cgc`
(the person's opt-in to run on a CGC version the driver was not proven
against: `cgc_seam.py`), and `--parse-cache PATH`: where CGC's per-file parse results are kept between syncs (see
`parse_cache.py`, installed next to this file as `incremental-parse-cache.py`;
without the option, or without that file, every file is parsed). Every REL_PATH is a
changed path relative to the workspace (added, modified or deleted: the disk
and the graph say which). With `--baseline` the changed paths are those and
every file whose nodes and imports in the graph are not what a
from-scratch index of the tree writes now (`graph_baseline.py`): the sync
when nothing proves what the graph holds.

The recipe (CodeGraphContext's per-file watcher path, applied path by path,
is not exact; this is):

1. Without the database: discover the tree as `cgc index` does, pre-scan
   imports, parse every file (sorted by path) and resolve calls and
   inheritance over the whole tree.
2. Open the database the way the CLI does. Read the link edges stored for
   the repository. The files to re-link are the changed files, the files
   with a stored link edge into a changed file, the files whose new rows
   point at a changed file, and the files whose new rows differ from their
   stored edges (a call or base resolved elsewhere now).
3. Delete the link edges of those files and of the changed files
   explicitly (Kùzu can leave a phantom edge behind `DETACH DELETE`), delete
   the changed files' nodes, write the changed files' nodes in path order
   (many files' in a few statements where that is provably the same:
   `batched_writes.py`),
   write the selected files' link rows (inheritance-type edges first, then
   calls), reset shared Module metadata from the first importer in path
   order (which of its rows wins depends on the backend:
   `module_metadata_row`), purge dangling pathless nodes.

4. Check the work (`self_check.py`): each changed file's nodes in the
   graph are the ones written, contained by their File; a difference
   fails the request.

Backends: whatever CGC's own database manager opens; proven equal to a
from-scratch index end to end on Kùzu, LadybugDB, FalkorDB Lite
(`falkordb`) and a FalkorDB server (`falkordb-remote`). On FalkorDB the
request first repairs the range index CGC's writes depend on
(`falkordb_index.py`). A backend outside `PROVEN_BACKENDS` is not
written: the request answers "unsupported" and the service reconciles.
A manager CGC opened on another backend than the configured one (its
fallback when FalkorDB Lite does not start in time) is not written
either: the request fails (`backend_pin.py`).

Output: one line `CGC_FRESH_RESULT {json}` on stdout, last; `serve`
writes progress lines before it (see there and `progress.py`).
Exit codes: 0 applied everything; 1 failed (the graph may be partial);
3 cannot apply incrementally, nothing was written (the caller runs a full
reconcile instead); 130/143 interrupted by SIGINT/SIGTERM. The prefixes
and the codes are `protocol.py`'s.

The driver is a package of modules by concern, written next to this file
by the service as `incremental-<name>.py` (this file as
`incremental-driver.py`), and imported as `cgc_fresh_<name>` through
`CompanionFinder` (from the source tree, `<name>.py`):

- `protocol.py`: the contract with the service (prefixes, exit codes);
- `cgc_seam.py`: what the driver depends on in CGC (versions, API, shapes);
- `cgc_setup.py`: CGC's API probe, configuration, backend and database;
- `worker.py`: the `Worker`, the state a process keeps between requests;
- `serve.py`: a request, a prepare, and the worker's loop;
- `apply.py`: step 1 and the request's recipe (`run_apply`);
- `database_apply.py`: steps 2 to 4 on the open database;
- `signatures.py`, `kuzu_reader.py`: the comparison of rows with edges;
- `session_patches.py`: the patches of CGC for the length of a request;
- `prepared_tree.py`: step 1 done ahead of a request;
- and the memos, caches and checks named above.
"""

import importlib
import importlib.abc
import importlib.util
import os
import signal
import sys

# Serve mode ends after this long without a request (seconds).
DEFAULT_IDLE_EXIT_S = 600.0


class CompanionFinder(importlib.abc.MetaPathFinder):
    """Finds the driver's modules: `import cgc_fresh_<name>` loads
    `incremental-<name>.py` (underscores as hyphens) from `directory`,
    where the service writes them next to this file
    (`driver_files.rs`, `DRIVER_MODULES`), or, where the driver runs from
    the source tree, `<name>.py`. Each is loaded once per process, as any
    import is."""

    PREFIX = "cgc_fresh_"

    def __init__(self, directory):
        self.directory = directory

    @staticmethod
    def installed_name(name):
        """The file name the service installs module `name` under."""
        return "incremental-" + name.replace("_", "-") + ".py"

    def path(self, fullname):
        """The file of module `fullname`, or None when it is not one of
        the driver's."""
        if not fullname.startswith(self.PREFIX):
            return None
        name = fullname[len(self.PREFIX):]
        for file_name in (self.installed_name(name), name + ".py"):
            path = os.path.join(self.directory, file_name)
            if os.path.isfile(path):
                return path
        return None

    def find_spec(self, fullname, path=None, target=None):
        found = self.path(fullname) if path is None else None
        return importlib.util.spec_from_file_location(fullname, found) if found else None


def install_companions(directory=None):
    """Puts a `CompanionFinder` of `directory` (this file's own by default)
    on the import path, once."""
    directory = os.path.abspath(directory or os.path.dirname(__file__))
    for finder in sys.meta_path:
        if getattr(finder, "PREFIX", None) == CompanionFinder.PREFIX and finder.directory == directory:
            return
    sys.meta_path.append(CompanionFinder(directory))


install_companions()
protocol = importlib.import_module("cgc_fresh_protocol")
cgc_setup = importlib.import_module("cgc_fresh_cgc_setup")
serve = importlib.import_module("cgc_fresh_serve")
worker_module = importlib.import_module("cgc_fresh_worker")
Worker = worker_module.Worker
companion = worker_module.companion


def _on_signal(signum, _frame):
    raise protocol.Interrupted(signum)


def parse_argv(argv):
    """CGC's root options, then `--probe` or `[--baseline] apply -- PATH...`."""
    opts = {"db": None, "db_path": None, "parse_cache": None, "probe": False, "paths": None,
            "serve": False, "idle_exit": DEFAULT_IDLE_EXIT_S, "allow_unproven": False, "baseline": False}
    i = 0
    while i < len(argv):
        arg = argv[i]
        if arg in ("--db", "--database", "-db") and i + 1 < len(argv):
            opts["db"] = argv[i + 1]
            i += 2
        elif arg.startswith("--db=") or arg.startswith("--database="):
            opts["db"] = arg.split("=", 1)[1]
            i += 1
        elif arg in ("--db-path", "--path") and i + 1 < len(argv):
            opts["db_path"] = argv[i + 1]
            i += 2
        elif arg.startswith("--db-path=") or arg.startswith("--path="):
            opts["db_path"] = arg.split("=", 1)[1]
            i += 1
        elif arg == "--allow-unproven-cgc":
            opts["allow_unproven"] = True
            i += 1
        elif arg == "--parse-cache" and i + 1 < len(argv):
            opts["parse_cache"] = argv[i + 1]
            i += 2
        elif arg == "--idle-exit" and i + 1 < len(argv):
            try:
                opts["idle_exit"] = max(1.0, float(argv[i + 1]))
            except ValueError:
                raise protocol.Unsupported(f"--idle-exit wants seconds, not {argv[i + 1]!r}") from None
            i += 2
        elif arg == "serve":
            opts["serve"] = True
            return opts
        elif arg == "--probe":
            opts["probe"] = True
            i += 1
        elif arg == "--baseline":
            opts["baseline"] = True
            i += 1
        elif arg == "apply":
            rest = argv[i + 1 :]
            if rest[:1] == ["--"]:
                rest = rest[1:]
            opts["paths"] = list(rest)
            return opts
        else:
            raise protocol.Unsupported(f"unsupported argument for the incremental driver: {arg!r}")
    return opts


def main(argv):
    # CGC prints banners on stdout; the result line must be the only thing
    # on the real stdout that this driver promises, so CGC's stdout goes to
    # stderr.
    real_stdout = os.dup(1)
    os.dup2(2, 1)
    signal.signal(signal.SIGINT, _on_signal)
    signal.signal(signal.SIGTERM, _on_signal)
    if "reconcile" in argv:
        at = argv.index("reconcile")
        command = argv[at + 1 :]
        if command[:1] == ["--"]:
            command = command[1:]
        try:
            opts = parse_argv(argv[:at])
        except protocol.Unsupported as exc:
            print(f"cgc-fresh: backend not readied: {exc}", file=sys.stderr)
            opts = None
        os.dup2(real_stdout, 1)
        return reconcile(opts, command)
    try:
        opts = parse_argv(argv)
    except protocol.Unsupported as exc:
        os.write(real_stdout, protocol.result_line(
            {"protocol": protocol.PROTOCOL, "ok": False, "error": str(exc), "unsupported": True}))
        return protocol.EXIT_USAGE
    if opts["db_path"]:
        os.environ["CGC_RUNTIME_DB_PATH"] = opts["db_path"]
    if opts["db"]:
        os.environ["CGC_RUNTIME_DB_TYPE"] = opts["db"]
    os.environ.setdefault("ENABLE_AUTO_WATCH", "false")
    worker = Worker(opts, lambda data: os.write(real_stdout, data), serving=opts["serve"])
    if opts["serve"]:
        return serve.serve(worker)
    result, code = serve.run_request(worker, opts["paths"], probe=opts["probe"], baseline=opts["baseline"])
    worker.emit(result)
    return code


def reconcile(opts, command):
    """`reconcile -- CGC ARGS...`: readies the backend for CGC's own writes
    (on FalkorDB, repairs its range index: `falkordb_index.py`; nothing on
    any other backend, whose database is not even opened), then becomes
    `CGC ARGS...` with the environment this process was given. Whatever
    goes wrong before the exec (root options it does not know, included)
    is said on stderr and CGC runs anyway: the repair is an addition to
    the reconcile, never a condition of it."""
    if not command:
        print("cgc-fresh: reconcile wants the cgc command to run after `--`", file=sys.stderr)
        return protocol.EXIT_USAGE
    environment = dict(os.environ)
    pin = companion("backend_pin")
    saved_stdout = os.dup(1)
    os.dup2(2, 1)  # CGC's banners must not reach the reconcile's stdout
    try:
        if opts is None:
            raise protocol.Unsupported("its root options")
        if opts["db_path"]:
            os.environ["CGC_RUNTIME_DB_PATH"] = opts["db_path"]
        if opts["db"]:
            os.environ["CGC_RUNTIME_DB_TYPE"] = opts["db"]
        labels, intended = cgc_setup.ready_backend(pin)
        if labels:
            print(f"cgc-fresh: repaired FalkorDB's index of {', '.join(labels)}", file=sys.stderr)
        if intended and not environment.get("CGC_RUNTIME_DB_TYPE") and not environment.get("DEFAULT_DATABASE"):
            # The backend CGC would choose anyway, named: a run-time fall
            # back from a named backend is said on stderr (at WARNING),
            # where the service looks for it; an implicit one is not.
            environment["DEFAULT_DATABASE"] = intended
    except protocol.Interrupted as exc:  # the sync was stopped: nothing to run
        return 128 + exc.signum
    except (Exception, SystemExit) as exc:  # noqa: BLE001 - said, and CGC runs anyway
        print(f"cgc-fresh: backend not readied: {type(exc).__name__}: {exc}", file=sys.stderr)
    try:
        # FalkorDB Lite given time to start in `cgc` too (`backend_pin.py`).
        command = pin.patient_command(command, sys.executable)
    except Exception as exc:  # noqa: BLE001 - said, and CGC runs as it is
        print(f"cgc-fresh: cgc runs without the start-up patience: {type(exc).__name__}: {exc}", file=sys.stderr)
    sys.stderr.flush()
    os.dup2(saved_stdout, 1)
    os.close(saved_stdout)
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    try:
        os.execve(command[0], command, environment)
    except OSError as exc:
        print(f"cgc-fresh: cannot run {command[0]}: {exc}", file=sys.stderr)
        return 127


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
