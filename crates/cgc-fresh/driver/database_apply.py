"""Steps 2 to 4 of a request, on the open database (`DatabaseApply`): read
what the graph stores for the repository, choose the files to re-link,
delete and write the changed files' nodes (many files in a few
statements where that is proven the same: `batched_writes.py`), write
the selected files' link rows, reset shared Modules' metadata, purge, and
check the work (`self_check.py`).
"""

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

        # The files a from-scratch index writes (as the outcome rule below:
        # a file without a parser gets nothing), and whether each parsed.
        present = {p: "error" not in fd for p, (_f, fd) in parsed.items()
                   if "error" not in fd or not fd.get("unsupported")}
        # Whose files are whose is not the baseline's to decide where another
        # repository was indexed inside this one, or where a stored file is
        # still on disk but no longer indexed here (ignored since the graph
        # was built?): CGC's reconcile decides (nothing was written yet).
        nested = sorted(r["p"] for r in read(baseline.NESTED_REPOSITORIES_QUERY, ["p"], prefix=prefix)
                        if isinstance(r.get("p"), str) and r["p"].rstrip("/") != repo_posix.rstrip("/"))
        if nested:
            raise protocol.Unsupported(f"another repository is indexed inside this one ({nested[0]}): "
                              "CGC's reconcile decides which files are whose")
        kept = baseline.kept_on_disk(present, set(stored_files), os.path.lexists)
        if kept:
            raise protocol.Unsupported(f"{len(kept)} file(s) in the graph are on disk but not indexed here now "
                              f"(ignored since the index?), e.g. {kept[0]}: CGC's reconcile decides")
        progress.phase("comparing", total=len(present))
        found = baseline.differing_files(present, set(stored_files), stored, expected_for, compared=progress.advance)
        timings["baseline_compare_s"] = round(time.monotonic() - t, 3)
        timings["baseline_files"] = len(present)
        timings["baseline_differing"] = len(found)
        return found

    def plan_batched_writes(self, gb, backend, written, rewritten):
        """A `BatchedWrites` for this request's `written` files (`rewritten`:
        those the graph held), or None where they are written file by file:
        too few, a backend the batched forms were not proven on, or a plan
        `batched_writes.py` refuses (`batched_refused` in the timings, the
        reason on stderr). Nothing is written here."""
        parsed, imports_map = self.tree.parsed, self.tree.imports_map
        repo_name, repo_posix, timings = self.repo.name, self.repo_posix, self.timings
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

        chunks = []
        stats = {}
        try:
            for i in range(0, len(ok), module.MAX_FILES):
                files = []
                for path in ok[i:i + module.MAX_FILES]:
                    fd = parsed[path][1]

                    def write_file(driver, fd=fd):
                        writer_class(driver, driver).add_file_to_graph(fd, repo_name, imports_map,
                                                                       repo_path_str=repo_posix)

                    files.append((path, module.record(write_file, baseline, backend)))
                chunks.append((len(files), module.plan(files, baseline, cgc_seam, skip=skip, stats=stats)))
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
        writer.write_inheritance_links(inheritance_rows, csharp_rows, imports_map)
        writer.write_implements_links(pick("implements"))
        writer.write_embeds_links(pick("embeds"))
        writer.write_companion_of_links(pick("companion_of"))
        writer.write_partial_of_links(pick("partial_of"))
        writer.write_part_of_links(pick("part_of"))
        writer.write_metaclass_links(pick("metaclass"))
        writer.write_decorated_by_links(pick("decorated_by"))
        writer.write_binds_links(pick("binds"))
        writer.write_previews_links(pick("previews"))
        call_groups = [
            [row for row in group if isinstance(row, dict) and row.get("caller_file_path") in relink]
            for group in links["calls"]
        ]
        writer.write_function_call_groups(*call_groups)
        if any(p.endswith((".cpp", ".h", ".hpp", ".hh")) for p in changed_abs):
            writer.write_cpp_class_function_links(repo_posix)

    def run(self, gb):
        """Steps 2 to 4 through CGC's graph builder `gb` (its database
        open): the request's per-path outcomes and counts."""
        from pathlib import Path

        repo, repo_posix, prefix = self.repo, self.repo_posix, self.prefix
        tree = self.tree
        parsed, links, imports_map = tree.parsed, tree.links, tree.imports_map
        expected, writer_nodes = tree.expected, tree.writer_nodes
        targets, csharp_paths = tree.targets, tree.csharp_paths
        module_first, module_defined = tree.module_first, tree.module_defined
        changed, timings, baseline, progress = self.changed, self.timings, self.baseline, self.progress
        changed_abs = {a for (_r, a) in changed}

        t = time.monotonic()
        timings["container_queries_skipped"] = 0
        writer = gb._writer
        driver = gb.driver
        backend = gb.db_manager.get_backend_type()
        metadata_row = module_metadata_row(backend)
        for src, sigs in signatures.parameter_signatures(links, writer_nodes, backend).items():
            expected[src] = expected.get(src, set()) | sigs

        def read(query, keys, **params):
            with driver.session() as session:
                result = session.run(query, **params)
                return [kuzu_reader.record_dict(rec, keys) for rec in result]

        def write(query, **params):
            with driver.session() as session:
                session.run(query, **params)

        if backend not in cgc_setup.PROVEN_BACKENDS:
            raise protocol.Unsupported(f"the graph is on {backend!r}, where the incremental sync is not proven "
                                       f"exact (proven: {', '.join(cgc_setup.PROVEN_BACKENDS)})")
        repo_rows = read("MATCH (r:Repository) WHERE r.path = $path RETURN r.path AS p", ["p"], path=repo_posix)
        if not repo_rows:
            raise protocol.Unsupported(f"{repo_posix} is not indexed (no Repository node): a full sync is needed")
        # Before any write: CGC's writes match nodes through an index FalkorDB
        # gets wrong (see `falkordb_index.py`).
        repaired = companion("falkordb_index").repair(driver, backend)
        timings["falkordb_index_repaired"] = len(repaired)

        memo = self.worker.stored_edge_memo()
        place = memo.place(backend, getattr(gb.db_manager, "db_path", None), prefix) if memo else None
        remembered = memo.recall(place) if memo else None
        if remembered is None or memo.verify:
            stored, stored_files = self.read_stored(gb, backend, read)
            if memo:
                memo.check(remembered, (stored, stored_files))
        else:
            stored, stored_files = remembered
        timings["stored_edges_remembered"] = 0 if remembered is None else 1
        timings["stored_edges_by_content"] = 1 if remembered is not None and memo.by_content else 0
        if baseline:
            # Nothing proves what the graph holds: the files it does not hold
            # as a from-scratch index would are the changed ones
            # (`graph_baseline.py`).
            found = self.baseline_differences(gb, backend, read, stored_files)
            for abs_path in sorted(found - changed_abs):
                changed.append((abs_path[len(prefix):], abs_path))
            changed_abs |= found
        # Edges into the changed files from outside the repository prefix are
        # not ours to re-link; edges from inside are in `stored`.
        dependants = {
            src for src, sigs in stored.items()
            if src not in changed_abs and any(sig[4] in changed_abs for sig in sigs)
        }

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

        written = set(to_write)
        present_ok = {p for p, (_f, fd) in parsed.items() if "error" not in fd}
        relink = set(p for p in written if p in present_ok)
        relink |= {p for p in dependants if p in present_ok}
        relink |= {src for (src, dst) in targets if dst in written and src in present_ok}
        differing = set()
        for path in present_ok:
            if expected.get(path, set()) != stored.get(path, set()):
                differing.add(path)
        relink |= differing
        relink |= {p for p in csharp_paths if p in present_ok}
        timings["read_s"] = round(time.monotonic() - t, 3)
        t = time.monotonic()

        # Old imports of the changed files (their Modules may need new metadata).
        touched_modules = set()
        for rec in read(
            "MATCH (f:File)-[:IMPORTS]->(m:Module) WHERE f.path IN $paths RETURN DISTINCT m.name AS n",
            ["n"],
            paths=sorted(changed_abs),
        ):
            touched_modules.add(rec["n"])

        # ---- 3. Writes.
        unlink = sorted(relink | changed_abs)
        changed_list = sorted(changed_abs)
        rewritten = {p for p in written if p in stored_files}
        deletes = sorted(set(to_delete) | rewritten)
        repo_name = repo.name
        batch = self.plan_batched_writes(gb, backend, written, rewritten)
        progress.phase("writing", total=len(deletes) + len(written))
        delete_link_edges(write, unlink, changed_list)
        break_delete = os.environ.get(BREAK_DELETE_FOR_TESTS_ENV) == "1"
        with session_patches.PurgeDeferred(writer), session_patches.ParentDirectoriesKept(rewritten) as directories:
            if batch is not None:
                # The files written again, at once (`batched_writes.py`); the
                # files only deleted keep CGC's delete, directories and all.
                batch.delete(driver, sorted(p for p in rewritten if not break_delete))
                progress.advance(len(rewritten))
                # As `ParentDirectoriesKept` counts them: the deletes that left
                # out the listing of the file's directories.
                directories.kept += 0 if break_delete else len(rewritten)
            for abs_path in deletes:
                if batch is not None and abs_path in rewritten:
                    continue
                progress.advance()
                if break_delete and abs_path in rewritten:
                    continue
                gb.delete_file_from_graph(abs_path)
        timings["directory_queries_kept"] = directories.kept
        timings["deletes_s"] = round(time.monotonic() - t, 3)
        for abs_path in sorted(written):
            fd = parsed[abs_path][1]
            if "error" not in fd:
                for imp in fd.get("imports", []) or []:
                    name = imp.get("source") if fd.get("lang") == "python" and imp.get("source") else (
                        imp.get("name") or imp.get("source") or imp.get("full_import_name"))
                    if name:
                        touched_modules.add(name)
        if batch is not None:
            batch.write(driver, progress)
            for abs_path in sorted(written):
                fd = parsed[abs_path][1]
                if "error" in fd:
                    gb.add_minimal_file_node(Path(fd["path"]), repo, False)
                    progress.advance()
        else:
            with session_patches.ParameterRowsBatched() as parameters:
                for abs_path in sorted(written):
                    f, fd = parsed[abs_path]
                    if "error" not in fd:
                        if abs_path in stored_files:
                            with session_patches.AbsentContainerQueriesSkipped(fd) as absent:
                                gb.add_file_to_graph(fd, repo_name, imports_map, repo_path_str=repo_posix)
                            timings["container_queries_skipped"] += absent.skipped
                        else:
                            gb.add_file_to_graph(fd, repo_name, imports_map, repo_path_str=repo_posix)
                    else:
                        gb.add_minimal_file_node(Path(fd["path"]), repo, False)
                    progress.advance()
            timings["parameter_batches"] = parameters.batched
        timings["nodes_s"] = round(time.monotonic() - t, 3)
        t = time.monotonic()
        progress.phase("linking")
        self.write_links(writer, relink, changed_abs)
        timings["links_s"] = round(time.monotonic() - t, 3)
        t = time.monotonic()

        metadata = []
        for name in sorted(n for n in touched_modules if n and n not in module_defined):
            if name in module_first:
                fin, lang = module_first[name][metadata_row]
                metadata.append({"name": name, "fin": fin, "lang": lang})
        if batch is not None:
            batch.module_metadata(driver, metadata)
        else:
            for row in metadata:
                write(
                    "MATCH (m:Module {name: $name}) SET m.full_import_name = $fin, m.lang = $lang",
                    **row,
                )
        writer._purge_dangling_pathless_nodes()
        timings["post_s"] = round(time.monotonic() - t, 3)
        t = time.monotonic()
        # ---- 4. The graph holds what was written, under the same lock.
        progress.phase("checking")
        timings["self_checked"] = companion("self_check").check(
            read, backend, {p: parsed[p][1] for p in written}, [p for p in to_delete if p not in written])
        timings["self_check_s"] = round(time.monotonic() - t, 3)
        if memo:
            memo.remember(
                place, stored, stored_files, unlink=set(unlink), changed=changed_abs, relinked=relink,
                expected=expected, deleted=to_delete, written=written,
            )
        return {
            "paths": outcome,
            "written": len(written),
            "deleted": len(to_delete),
            "relinked": len(relink),
            "dependants": len(dependants),
            "signature_changed": len(differing - written),
            "files": len(parsed),
        }
