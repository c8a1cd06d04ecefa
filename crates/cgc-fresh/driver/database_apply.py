"""Steps 2 to 4 of a request, on the open database (`DatabaseApply`): read
what the graph stores for the repository, choose the files to re-link,
delete and write the changed files' nodes (many files in a few
statements where that is proven the same: `batched_writes.py`), write
the selected files' link rows, reset shared Modules' metadata, purge, and
check the work (`self_check.py`).

What step 3 writes is decided before its first write, from what was read,
by functions that need no database (`plan_writes`, `imported_module_names`,
`module_metadata_rows`): the unit tests pin the choice down without CGC.
"""

import dataclasses
import os
import sys
import time

import cgc_fresh_cgc_seam as cgc_seam
import cgc_fresh_cgc_setup as cgc_setup
import cgc_fresh_kuzu_reader as kuzu_reader
import cgc_fresh_protocol as protocol
import cgc_fresh_session_patches as session_patches
import cgc_fresh_signatures as signatures
from cgc_fresh_worker import companion

# Test-only: leaves out the delete of a re-written file's nodes, so that the
# tests can prove the self-check fails such a sync. Never set in use.
BREAK_DELETE_FOR_TESTS_ENV = "CGC_FRESH_BREAK_DELETE_FOR_TESTS"

# Fewer written files than this are written file by file (nothing to
# batch).
BATCHED_MIN_FILES = 2


# Backends whose query reads the graph as it was before the query: in
# `UNWIND $rows AS row MERGE (m ...) SET m.x = coalesce(m.x, row.x)` every
# row sees `m.x` unset, so the last row wins (FalkorDB, measured on its
# server; FalkorDB Lite embeds the same engine). Kùzu applies each row's SET
# before the next row reads: the first row wins.
LAST_ROW_WINS_BACKENDS = ("falkordb", "falkordb-remote")


def module_metadata_row(backend):
    """Which of the first importer's rows sets a shared Module's metadata."""
    return "last_row" if backend in LAST_ROW_WINS_BACKENDS else "first_row"


def delete_link_edges(write, sources, changed):
    """Deletes every link edge out of `sources` or into `changed`: one
    query over all link types (at 2 000 modules on Kùzu, 0.02 s against
    0.08-0.13 s for one query per type, each a scan of every node table);
    where that query fails — a backend without type alternation, a link
    type without a table — one query per type, skipping a type without a
    table. Each query is one statement, applied whole or not at all, and
    deleting twice deletes nothing more."""
    query = "MATCH (a)-[r:{}]->(b) WHERE a.path IN $paths OR b.path IN $changed DELETE r"
    try:
        write(query.format("|".join(cgc_seam.LINK_TYPES)), paths=sources, changed=changed)
        return
    except Exception:  # noqa: BLE001 - the per-type queries below say what fails
        pass
    for rel in cgc_seam.LINK_TYPES:
        try:
            write(query.format(rel), paths=sources, changed=changed)
        except Exception as exc:  # noqa: BLE001
            if kuzu_reader.is_binder_error(exc):
                continue
            raise


class BatchedWrites:
    """The changed files' deletes and writes as a few statements for many
    files (`batched_writes.py`): `steps` per chunk of files, planned before
    anything is written."""

    def __init__(self, module, seam, chunks):
        self.module = module
        self.seam = seam
        self.chunks = chunks

    def _run(self, driver, steps):
        with driver.session() as session:
            self.module.execute(steps, session, kuzu_reader.is_cgc_binder_error)
        return len(steps)

    def delete(self, driver, paths):
        if paths:
            self._run(driver, self.module.delete_steps(paths, self.seam))

    def write(self, driver, progress):
        for files, steps in self.chunks:
            self._run(driver, steps)
            progress.advance(files)

    def module_metadata(self, driver, rows):
        if rows:
            self._run(driver, self.module.module_metadata_steps(rows))


class PhaseClock:
    """The request's phase timings: `lap(key)` records in `timings` the
    seconds since the clock started or last lapped, and starts again;
    `mark(key)` records them and does not, as where a later phase's time
    includes an earlier one's (`nodes_s` includes `deletes_s`)."""

    def __init__(self, timings):
        self.timings = timings
        self.start = time.monotonic()

    def mark(self, key):
        self.timings[key] = round(time.monotonic() - self.start, 3)

    def lap(self, key):
        self.mark(key)
        self.start = time.monotonic()


@dataclasses.dataclass
class Plan:
    """What step 3 writes, decided from what was read before any write
    (`plan_writes`). Paths are absolute posix paths but in `outcome`,
    which is by the request's relative paths."""

    changed_abs: set
    outcome: dict
    written: set
    to_delete: list
    dependants: set
    relink: set
    differing: set
    rewritten: set
    deletes: list
    unlink: list

    def counts(self, files):
        """The request's result: outcomes and counts (`files`: parsed)."""
        return {
            "paths": self.outcome,
            "written": len(self.written),
            "deleted": len(self.to_delete),
            "relinked": len(self.relink),
            "dependants": len(self.dependants),
            "signature_changed": len(self.differing - self.written),
            "files": files,
        }


def classify_changed(changed, parsed, stored_files):
    """Each changed file's outcome by its relative path, the files whose
    nodes are written and those only deleted, both in request order."""
    outcome = {}
    to_write = []
    to_delete = []
    for rel, abs_path in changed:
        entry = parsed.get(abs_path)
        in_graph = abs_path in stored_files
        if entry is not None:
            fd = entry[1]
            # As `cgc index` does: a parsed file gets its nodes, a generic
            # or unparsable one a bare File node, one without a parser none.
            if "error" not in fd or not fd.get("unsupported"):
                to_write.append(abs_path)
                outcome[rel] = "modified" if in_graph else "added"
                continue
            outcome[rel] = "deleted" if in_graph else "not_indexed"
            if in_graph:
                to_delete.append(abs_path)
            continue
        if in_graph:
            to_delete.append(abs_path)
            outcome[rel] = "deleted"
        else:
            outcome[rel] = "not_indexed"
    return outcome, to_write, to_delete


def dependants_of(stored_edges, changed_abs):
    """The unchanged files with a stored link edge into a changed one.
    Edges into the changed files from outside the repository prefix are
    not ours to re-link; edges from inside are in `stored_edges`."""
    return {
        src for src, sigs in stored_edges.items()
        if src not in changed_abs and any(sig[4] in changed_abs for sig in sigs)
    }


def files_to_relink(tree, written, dependants, stored_edges):
    """The parsed files whose link rows are written again, and among
    them those whose expected edges differ from the stored ones. C#
    files are always re-linked."""
    parsed, expected = tree.parsed, tree.expected
    present_ok = {p for p, (_f, fd) in parsed.items() if "error" not in fd}
    relink = set(p for p in written if p in present_ok)
    relink |= {p for p in dependants if p in present_ok}
    relink |= {src for (src, dst) in tree.targets if dst in written and src in present_ok}
    differing = set()
    for path in present_ok:
        if expected.get(path, set()) != stored_edges.get(path, set()):
            differing.add(path)
    relink |= differing
    relink |= {p for p in tree.csharp_paths if p in present_ok}
    return relink, differing


def plan_writes(tree, changed, stored_edges, stored_files):
    """The `Plan` of step 3 for the `changed` files ((relative, absolute)
    paths, a baseline's additions included) over step 1's `tree` and what
    the graph stores."""
    changed_abs = {a for (_r, a) in changed}
    outcome, to_write, to_delete = classify_changed(changed, tree.parsed, stored_files)
    dependants = dependants_of(stored_edges, changed_abs)
    written = set(to_write)
    relink, differing = files_to_relink(tree, written, dependants, stored_edges)
    rewritten = {p for p in written if p in stored_files}
    return Plan(
        changed_abs=changed_abs, outcome=outcome, written=written, to_delete=to_delete,
        dependants=dependants, relink=relink, differing=differing, rewritten=rewritten,
        deletes=sorted(set(to_delete) | rewritten), unlink=sorted(relink | changed_abs),
    )


def imported_module_names(parsed, written):
    """The Module names the written files' imports give, as CGC's writer
    names them: a Python import by its source where it has one."""
    names = set()
    for abs_path in sorted(written):
        fd = parsed[abs_path][1]
        if "error" not in fd:
            for imp in fd.get("imports", []) or []:
                name = imp.get("source") if fd.get("lang") == "python" and imp.get("source") else (
                    imp.get("name") or imp.get("source") or imp.get("full_import_name"))
                if name:
                    names.add(name)
    return names


def module_metadata_rows(touched_modules, module_defined, module_first, metadata_row):
    """The metadata to set again on the touched Modules no file defines:
    that of their first importer's `metadata_row` (`module_metadata_row`),
    by name."""
    rows = []
    for name in sorted(n for n in touched_modules if n and n not in module_defined):
        if name in module_first:
            fin, lang = module_first[name][metadata_row]
            rows.append({"name": name, "fin": fin, "lang": lang})
    return rows


class DatabaseApply:
    """Steps 2 to 4 of one request on the open database: `run(gb)`.

    `worker`: the `Worker` (its stored-edge memo); `repo`: the workspace
    (a resolved `Path`); `tree`: step 1's outcome (`prepared_tree.TreeState`;
    its `expected` is completed here with the Parameter rows the backend
    stores); `changed`: (relative path, absolute posix path) of each
    changed file, in request order (a baseline adds the files it finds);
    `timings`: the request's, filled in; `baseline`: whether the files the
    graph does not hold as a from-scratch index would are changed too
    (`graph_baseline.py`); `progress`: reports the phases after `reading`,
    which the caller started before the open (None: nobody watches)."""

    def __init__(self, worker, repo, tree, changed, timings, baseline=False, progress=None):
        self.worker = worker
        self.repo = repo
        self.repo_posix = repo.as_posix()
        self.prefix = self.repo_posix.rstrip("/") + "/"
        self.tree = tree
        self.changed = changed
        self.timings = timings
        self.baseline = baseline
        self.progress = progress if progress is not None else worker.progress_reporter(None, quiet=True)

    def run(self, gb):
        """Steps 2 to 4 through CGC's graph builder `gb` (its database
        open): the request's per-path outcomes and counts."""
        # ---- 2. What the graph holds, and what to write.
        self.clock = PhaseClock(self.timings)
        self.timings["container_queries_skipped"] = 0
        self.attach(gb)
        self.require_indexed()
        self.repair_falkordb_index()
        self.recall_or_read_stored()
        if self.baseline:
            self.add_baseline_differences()
        plan = plan_writes(self.tree, self.changed, self.stored_edges, self.stored_files)
        self.clock.lap("read_s")
        # Read before the deletes: the old imports' Modules may need new
        # metadata.
        touched_modules = self.modules_imported_before(plan)
        # ---- 3. Writes.
        batch = self.plan_batched_writes(gb, self.backend, plan.written, plan.rewritten)
        self.progress.phase("writing", total=len(plan.deletes) + len(plan.written))
        self.delete(plan, batch)
        touched_modules |= imported_module_names(self.tree.parsed, plan.written)
        self.write_nodes(plan, batch)
        self.clock.lap("nodes_s")
        self.progress.phase("linking")
        self.write_links(self.writer, plan.relink, plan.changed_abs)
        self.clock.lap("links_s")
        self.write_module_metadata(touched_modules, batch)
        self.writer._purge_dangling_pathless_nodes()
        self.clock.lap("post_s")
        # ---- 4. The graph holds what was written, under the same lock.
        self.self_check(plan)
        self.clock.lap("self_check_s")
        self.remember(plan)
        return plan.counts(len(self.tree.parsed))

    def attach(self, gb):
        """Takes CGC's handles on the open database, and completes the
        tree's expected edges with the Parameter rows its backend stores."""
        self.gb = gb
        self.writer = gb._writer
        self.driver = gb.driver
        self.backend = gb.db_manager.get_backend_type()
        self.metadata_row = module_metadata_row(self.backend)
        expected = self.tree.expected
        for src, sigs in signatures.parameter_signatures(self.tree.links, self.tree.writer_nodes, self.backend).items():
            expected[src] = expected.get(src, set()) | sigs

    def read(self, query, keys, **params):
        """The rows of `query` through CGC's session, as dicts of `keys`."""
        with self.driver.session() as session:
            result = session.run(query, **params)
            return [kuzu_reader.record_dict(rec, keys) for rec in result]

    def write(self, query, **params):
        """Runs `query` through CGC's session."""
        with self.driver.session() as session:
            session.run(query, **params)

    def require_indexed(self):
        """Refuses a backend the sync is not proven exact on, and a
        repository the graph does not hold (a full sync is needed)."""
        backend, repo_posix = self.backend, self.repo_posix
        if backend not in cgc_setup.PROVEN_BACKENDS:
            raise protocol.Unsupported(f"the graph is on {backend!r}, where the incremental sync is not proven "
                                       f"exact (proven: {', '.join(cgc_setup.PROVEN_BACKENDS)})")
        repo_rows = self.read("MATCH (r:Repository) WHERE r.path = $path RETURN r.path AS p", ["p"], path=repo_posix)
        if not repo_rows:
            raise protocol.Unsupported(f"{repo_posix} is not indexed (no Repository node): a full sync is needed")

    def repair_falkordb_index(self):
        """Before any write: CGC's writes match nodes through an index
        FalkorDB gets wrong (see `falkordb_index.py`)."""
        repaired = companion("falkordb_index").repair(self.driver, self.backend)
        self.timings["falkordb_index_repaired"] = len(repaired)

    def recall_or_read_stored(self):
        """The repository's stored link edges and File paths (`read_stored`),
        as the worker's memo remembers them from its last request where it
        can (and read anyway where the memo verifies itself)."""
        memo = self.worker.stored_edge_memo()
        place = memo.place(self.backend, getattr(self.gb.db_manager, "db_path", None), self.prefix) if memo else None
        remembered = memo.recall(place) if memo else None
        if remembered is None or memo.verify:
            stored, stored_files = self.read_stored(self.gb, self.backend, self.read)
            if memo:
                memo.check(remembered, (stored, stored_files))
        else:
            stored, stored_files = remembered
        self.timings["stored_edges_remembered"] = 0 if remembered is None else 1
        self.timings["stored_edges_by_content"] = 1 if remembered is not None and memo.by_content else 0
        self.memo, self.place = memo, place
        self.stored_edges, self.stored_files = stored, stored_files

    def read_stored(self, gb, backend, read):
        """The repository's stored link edges as signatures per source file,
        and its stored File paths; straight through Kùzu where it can
        (`KuzuReader`), else through `read` (CGC's session)."""
        repo, prefix, timings = self.repo, self.prefix, self.timings
        files = {p.replace("\\", "/") for p in gb.get_repo_file_paths(repo)}
        edges = {}
        reader = kuzu_reader.KuzuReader.open(gb.db_manager, backend)
        timings["stored_edges_read_direct"] = 1 if reader else 0
        keys = ["src", "sn", "sl", "dn", "dp", "ln", "fcn", "ak", "conf", "tier", "cl", "x", "y", "z"]
        try:
            for rel, shape, query in cgc_seam.stored_edge_queries():
                try:
                    records = (reader.read if reader else read)(query, keys, prefix=prefix)
                except Exception as exc:  # noqa: BLE001
                    if kuzu_reader.is_binder_error(exc):
                        continue
                    raise
                for rec in records:
                    edges.setdefault(rec.get("src"), set()).add(signatures.stored_signature(rel, shape, rec))
        finally:
            if reader:
                reader.close()
        return edges, files

    def add_baseline_differences(self):
        """Nothing proves what the graph holds: the files it does not hold
        as a from-scratch index would are the changed ones
        (`graph_baseline.py`), after the request's own."""
        changed_abs = {a for (_r, a) in self.changed}
        found = self.baseline_differences(self.gb, self.backend, self.read, self.stored_files)
        for abs_path in sorted(found - changed_abs):
            self.changed.append((abs_path[len(self.prefix):], abs_path))

    def baseline_differences(self, gb, backend, read, stored_files):
        """The absolute paths of the files whose nodes and imports in the graph
        are not what a from-scratch index of the tree writes now, or that are
        in the graph and not in the tree (`graph_baseline.py`); `read`: the
        request's reads through CGC's session."""
        repo, repo_posix, prefix = self.repo, self.repo_posix, self.prefix
        parsed, imports_map = self.tree.parsed, self.tree.imports_map
        timings, progress = self.timings, self.progress
        t = time.monotonic()
        baseline = companion("graph_baseline")
        reader = kuzu_reader.KuzuReader.open(gb.db_manager, backend)
        try:
            stored, columns = baseline.stored_contents(reader.read if reader else read, backend, prefix,
                                                       kuzu_reader.is_binder_error)
        finally:
            if reader:
                reader.close()
        timings["baseline_read_s"] = round(time.monotonic() - t, 3)
        t = time.monotonic()
        writer_class = type(gb._writer)
        repo_name = repo.name

        def expected_for(path):
            fd = parsed[path][1]

            def write_file(driver):
                writer_class(driver, driver).add_file_to_graph(fd, repo_name, imports_map, repo_path_str=repo_posix)

            return baseline.expected_content(write_file, backend, columns)

        # The files a from-scratch index writes (as `classify_changed`: a
        # file without a parser gets nothing), and whether each parsed.
        present = {p: "error" not in fd for p, (_f, fd) in parsed.items()
                   if "error" not in fd or not fd.get("unsupported")}
        self.refuse_what_reconcile_decides(baseline, read, present, stored_files)
        progress.phase("comparing", total=len(present))
        found = baseline.differing_files(present, set(stored_files), stored, expected_for, compared=progress.advance)
        timings["baseline_compare_s"] = round(time.monotonic() - t, 3)
        timings["baseline_files"] = len(present)
        timings["baseline_differing"] = len(found)
        return found

    def refuse_what_reconcile_decides(self, baseline, read, present, stored_files):
        """Whose files are whose is not the baseline's to decide where another
        repository was indexed inside this one, or where a stored file is
        still on disk but no longer indexed here (ignored since the graph
        was built?): CGC's reconcile decides (nothing was written yet)."""
        repo_posix = self.repo_posix
        nested = sorted(r["p"] for r in read(baseline.NESTED_REPOSITORIES_QUERY, ["p"], prefix=self.prefix)
                        if isinstance(r.get("p"), str) and r["p"].rstrip("/") != repo_posix.rstrip("/"))
        if nested:
            raise protocol.Unsupported(f"another repository is indexed inside this one ({nested[0]}): "
                              "CGC's reconcile decides which files are whose")
        kept = baseline.kept_on_disk(present, set(stored_files), os.path.lexists)
        if kept:
            raise protocol.Unsupported(f"{len(kept)} file(s) in the graph are on disk but not indexed here now "
                              f"(ignored since the index?), e.g. {kept[0]}: CGC's reconcile decides")

    def modules_imported_before(self, plan):
        """The Modules the changed files import in the graph."""
        return {
            rec["n"] for rec in self.read(
                "MATCH (f:File)-[:IMPORTS]->(m:Module) WHERE f.path IN $paths RETURN DISTINCT m.name AS n",
                ["n"],
                paths=sorted(plan.changed_abs),
            )
        }

    def plan_batched_writes(self, gb, backend, written, rewritten):
        """A `BatchedWrites` for this request's `written` files (`rewritten`:
        those the graph held), or None where they are written file by file:
        too few, a backend the batched forms were not proven on, or a plan
        `batched_writes.py` refuses (`batched_refused` in the timings, the
        reason on stderr). Nothing is written here."""
        parsed, timings = self.tree.parsed, self.timings
        t = time.monotonic()
        timings["batched_files"] = 0
        if len(written) < BATCHED_MIN_FILES:
            # Nothing to batch: not even the modules are loaded (a one-file
            # sync's lock is CGC's per-file path and nothing more).
            return None
        if backend not in cgc_seam.BATCHED_WRITE_BACKENDS:
            return None
        module = companion("batched_writes")
        ok = sorted(p for p in written if "error" not in parsed[p][1])
        baseline = companion("graph_baseline")
        writer_class = type(gb._writer)
        absent = {p: session_patches.AbsentContainerQueriesSkipped(parsed[p][1]).absent for p in ok if p in rewritten}
        skipped = [0]

        def skip(path, query):
            labels = absent.get(path)
            match = session_patches.AbsentContainerQueriesSkipped.QUERY.fullmatch(query) if labels else None
            if match and match.group(1) in labels:
                skipped[0] += 1
                return True
            return False

        stats = {}
        try:
            chunks = self.plan_chunks(module, baseline, writer_class, backend, ok, skip, stats)
        except Exception as exc:  # noqa: BLE001 - then file by file, as CGC writes
            # Timings are numbers (the service reads them so); the reason goes
            # to stderr, which the service logs.
            timings["batched_refused"] = 1
            timings["batched_plan_s"] = round(time.monotonic() - t, 3)
            print(f"cgc-fresh: batched writes refused, file by file: {type(exc).__name__}: {exc}"[:300],
                  file=sys.stderr, flush=True)
            return None
        timings["container_queries_skipped"] += skipped[0]
        # As the per-file path counts them (`ParameterRowsBatched`).
        timings["parameter_batches"] = stats.get("parameter_batches", 0)
        timings["batched_files"] = len(ok)
        timings["batched_statements"] = sum(len(steps) for _n, steps in chunks)
        timings["batched_plan_s"] = round(time.monotonic() - t, 3)
        return BatchedWrites(module, cgc_seam, chunks)

    def plan_chunks(self, module, baseline, writer_class, backend, ok, skip, stats):
        """(file count, steps) per chunk of at most `module.MAX_FILES` of
        the files `ok`: each file's write recorded from CGC's writer
        (`writer_class`), then the chunk planned (`batched_writes.py`)."""
        parsed, imports_map = self.tree.parsed, self.tree.imports_map
        repo_name, repo_posix = self.repo.name, self.repo_posix
        chunks = []
        for i in range(0, len(ok), module.MAX_FILES):
            files = []
            for path in ok[i:i + module.MAX_FILES]:
                fd = parsed[path][1]

                def write_file(driver, fd=fd):
                    writer_class(driver, driver).add_file_to_graph(fd, repo_name, imports_map,
                                                                   repo_path_str=repo_posix)

                files.append((path, module.record(write_file, baseline, backend)))
            chunks.append((len(files), module.plan(files, baseline, cgc_seam, skip=skip, stats=stats)))
        return chunks

    def delete(self, plan, batch):
        """Deletes the link edges of the files to re-link and into the
        changed ones, then the nodes of the files deleted or written
        again: the latter batched where `batch` is planned."""
        delete_link_edges(self.write, plan.unlink, sorted(plan.changed_abs))
        rewritten, progress, writer = plan.rewritten, self.progress, self.writer
        break_delete = os.environ.get(BREAK_DELETE_FOR_TESTS_ENV) == "1"
        with session_patches.PurgeDeferred(writer), session_patches.ParentDirectoriesKept(rewritten) as directories:
            if batch is not None:
                # The files written again, at once (`batched_writes.py`); the
                # files only deleted keep CGC's delete, directories and all.
                batch.delete(self.driver, sorted(p for p in rewritten if not break_delete))
                progress.advance(len(rewritten))
                # As `ParentDirectoriesKept` counts them: the deletes that left
                # out the listing of the file's directories.
                directories.kept += 0 if break_delete else len(rewritten)
            for abs_path in plan.deletes:
                if batch is not None and abs_path in rewritten:
                    continue
                progress.advance()
                if break_delete and abs_path in rewritten:
                    continue
                self.gb.delete_file_from_graph(abs_path)
        self.timings["directory_queries_kept"] = directories.kept
        self.clock.mark("deletes_s")

    def write_nodes(self, plan, batch):
        """Writes the nodes of the written files: batched where `batch` is
        planned, else file by file with CGC's writer."""
        if batch is not None:
            batch.write(self.driver, self.progress)
            for abs_path in sorted(plan.written):
                fd = self.tree.parsed[abs_path][1]
                if "error" in fd:
                    self.write_bare_file(fd)
                    self.progress.advance()
        else:
            self.write_nodes_per_file(plan.written)

    def write_nodes_per_file(self, written):
        """CGC's per-file writes, each file's Parameter rows in one
        statement (`ParameterRowsBatched`), and a file the graph held
        without the container queries its nodes cannot need."""
        gb, parsed, timings = self.gb, self.tree.parsed, self.timings
        repo_name, imports_map, repo_posix = self.repo.name, self.tree.imports_map, self.repo_posix
        with session_patches.ParameterRowsBatched() as parameters:
            for abs_path in sorted(written):
                _f, fd = parsed[abs_path]
                if "error" not in fd:
                    if abs_path in self.stored_files:
                        with session_patches.AbsentContainerQueriesSkipped(fd) as absent:
                            gb.add_file_to_graph(fd, repo_name, imports_map, repo_path_str=repo_posix)
                        timings["container_queries_skipped"] += absent.skipped
                    else:
                        gb.add_file_to_graph(fd, repo_name, imports_map, repo_path_str=repo_posix)
                else:
                    self.write_bare_file(fd)
                self.progress.advance()
        timings["parameter_batches"] = parameters.batched

    def write_bare_file(self, fd):
        """As `cgc index` writes a generic or unparsable file: a File node."""
        from pathlib import Path

        self.gb.add_minimal_file_node(Path(fd["path"]), self.repo, False)

    def write_links(self, writer, relink, changed_abs):
        """Writes the link rows of the files in `relink` with CGC's writer:
        inheritance-type edges first, then calls (and C++'s class-function
        links where a changed file is C++)."""
        parsed, links, imports_map = self.tree.parsed, self.tree.links, self.tree.imports_map
        csharp_paths, repo_posix = self.tree.csharp_paths, self.repo_posix

        def pick(key):
            return [row for row in links[key] if signatures.row_source(key, row) in relink]

        inheritance_rows = [row for row in links["inheritance"] if row.get("path") in relink]
        csharp_rows = [fd for (p, (_f, fd)) in parsed.items()
                       if p in csharp_paths and p in relink and "error" not in fd]

        def timed(kind, write, *rows):
            # Each kind's share of the link phase, and its rows.
            started = time.monotonic()
            write(*rows)
            self.timings[f"links_{kind}_s"] = round(time.monotonic() - started, 3)
            self.timings[f"link_{kind}_rows"] = len(rows[0])

        timed("inheritance", writer.write_inheritance_links, inheritance_rows, csharp_rows, imports_map)
        for kind in ("implements", "embeds", "companion_of", "partial_of", "part_of", "metaclass",
                     "decorated_by", "binds", "previews"):
            timed(kind, getattr(writer, f"write_{kind}_links"), pick(kind))
        call_groups = [
            [row for row in group if isinstance(row, dict) and row.get("caller_file_path") in relink]
            for group in links["calls"]
        ]
        # On Kùzu, CGC's call statements with their matches staged
        # (`session_patches.CallLinksStaged`): the same edges, hash joins.
        started = time.monotonic()
        with session_patches.CallLinksStaged() as staged:
            writer.write_function_call_groups(*call_groups)
        # What the link phase spent on calls, and how many rows it sent.
        self.timings["links_calls_s"] = round(time.monotonic() - started, 3)
        self.timings["link_call_rows"] = sum(len(group) for group in call_groups)
        self.timings["call_statements_staged"] = staged.staged
        if any(p.endswith((".cpp", ".h", ".hpp", ".hh")) for p in changed_abs):
            writer.write_cpp_class_function_links(repo_posix)

    def write_module_metadata(self, touched_modules, batch):
        """Sets the metadata of the touched Modules no file defines again,
        as a from-scratch index leaves it."""
        rows = module_metadata_rows(touched_modules, self.tree.module_defined, self.tree.module_first,
                                    self.metadata_row)
        if batch is not None:
            batch.module_metadata(self.driver, rows)
        else:
            for row in rows:
                self.write(
                    "MATCH (m:Module {name: $name}) SET m.full_import_name = $fin, m.lang = $lang",
                    **row,
                )

    def self_check(self, plan):
        """Checks that the graph holds what was written and not what was
        deleted (`self_check.py`)."""
        parsed = self.tree.parsed
        self.progress.phase("checking")
        self.timings["self_checked"] = companion("self_check").check(
            self.read, self.backend, {p: parsed[p][1] for p in plan.written},
            [p for p in plan.to_delete if p not in plan.written])

    def remember(self, plan):
        """Tells the worker's memo what this request read and wrote, for
        the next request's `recall_or_read_stored`."""
        if self.memo:
            self.memo.remember(
                self.place, self.stored_edges, self.stored_files, unlink=set(plan.unlink),
                changed=plan.changed_abs, relinked=plan.relink, expected=self.tree.expected,
                deleted=plan.to_delete, written=plan.written,
            )
