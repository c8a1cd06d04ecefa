"""A request's recipe (steps 1 to 4 of `incremental.py`'s text), as one
function: `run_apply` checks what the driver does not replay, discovers
and parses the tree and resolves its links (step 1, or the worker's
prepared tree: `prepared_tree.py`), opens the database, hands steps 2 to
4 to `database_apply.DatabaseApply` and closes the database whatever
happens.
"""

import os
import time

import cgc_fresh_cgc_seam as cgc_seam
import cgc_fresh_cgc_setup as cgc_setup
import cgc_fresh_database_apply as database_apply
import cgc_fresh_prepared_tree as prepared_tree
import cgc_fresh_protocol as protocol
import cgc_fresh_session_patches as session_patches
import cgc_fresh_signatures as signatures


def run_apply(worker, rel_paths, timings, prepare_only=False, baseline=False, progress=None):
    """Steps 1 to 4 for `rel_paths` (with `prepare_only`, step 1 alone,
    kept for the next request: `PreparedTree`); `progress` reports the
    phases to the person (None: nobody watches, see `progress.py`)."""
    from pathlib import Path

    from codegraphcontext.cli import main as cgc_main
    from codegraphcontext.cli.config_manager import get_config_value, resolve_context
    from codegraphcontext.tools.graph_builder import GraphBuilder
    from codegraphcontext.tools.indexing.discovery import discover_files_to_index

    timings["imports_s"] = round(time.monotonic() - timings.pop("_t0"), 3)
    t = time.monotonic()
    if progress is None:
        progress = worker.progress_reporter(None, quiet=True)

    repo = Path.cwd().resolve()
    repo_posix = repo.as_posix()
    cgc_main._load_credentials()

    for key in cgc_seam.UNSUPPORTED_SETTINGS:
        if (get_config_value(key) or "false").lower() == "true":
            raise protocol.Unsupported(f"{key}=true: `cgc index` runs a pass the incremental driver does not replay")
    for rel in rel_paths:
        if rel.endswith(cgc_seam.UNSUPPORTED_SUFFIXES):
            raise protocol.Unsupported(f"{rel}: a whole-repository pass of `cgc index` depends on it")

    ctx = resolve_context(None, cwd=repo)

    # ---- 1. Parse and resolve the whole tree, before the database is open.
    class OfflineBuilder(GraphBuilder):
        def create_schema(self, graph_name=None):
            return None

    class NoDatabase:
        def get_driver(self, graph_name=None):
            return None

        def get_backend_type(self):
            return "none"

    with session_patches.RealpathMemo(), session_patches.GoCapturesInOrder():
        offline = OfflineBuilder(NoDatabase(), None, None)
        parsers = offline.parsers
        files, _ = discover_files_to_index(repo, ctx.cgcignore_path, supported_extensions=set(parsers.keys()))
        files = [f for f in files if f.is_file()]
        if prepare_only:
            worker.keep_prepared(None)
            started_ns = time.time_ns()
            listing = prepared_tree.PreparedTree.identities(files)
            racy = prepared_tree.PreparedTree.racy_contents(listing, started_ns)
            step1 = time.monotonic()
            tree = build_tree(worker, offline, repo, files, timings, progress)
            step1 = time.monotonic() - step1
            prepared = None
            if racy is not None and prepared_tree.PreparedTree.racy_contents(listing, started_ns) == racy:
                prepared = prepared_tree.PreparedTree(repo_posix, prepared_tree.cgc_settings(), listing, started_ns,
                                                      racy, tree)
                prepared.step1_s = round(step1, 3)
                worker.keep_prepared(prepared)
            if tree.cache:
                tree.cache.save()
                if prepared is not None:
                    # The parse work of the sync that uses it was done here.
                    prepared.cache_timings = tree.cache.timings()
            return {}
        tree = worker.take_prepared(repo_posix, files, set(parsers.keys()), cgc_seam.FILE_ALONE_SUFFIXES, timings)
        if tree is None:
            tree = build_tree(worker, offline, repo, files, timings, progress)
        elif os.environ.get(prepared_tree.VERIFY_PREPARED_ENV) == "1":
            prepared_tree.PreparedTree.verify(tree, build_tree(worker, offline, repo, files, timings, progress))
            timings["prepared_verified"] = 1

    changed = []
    for rel in rel_paths:
        p = (repo / rel)
        changed.append((rel, Path(os.path.abspath(p)).as_posix()))

    if tree.cache and not timings.get("prepared_used"):
        tree.cache.save()
        timings.update(tree.cache.timings())

    # ---- 2. Open the database the way the CLI does.
    progress.phase("reading")
    t = lock_t0 = time.monotonic()
    db_manager, graph_builder, _finder, _ctx = cgc_setup.open_database(worker, repo, timings)
    timings["db_open_s"] = round(time.monotonic() - t, 3)
    applied = None
    try:
        applied = database_apply.DatabaseApply(
            worker, repo, tree, changed, timings, baseline=baseline, progress=progress,
        ).run(graph_builder)
        return applied
    finally:
        t = time.monotonic()
        closed = cgc_setup.close_database(db_manager)
        memo = worker.stored_edge_memo()
        if memo:
            # What the request wrote is remembered only if all of it was
            # written and the database closed.
            memo.closed(closed and applied is not None)
        timings["db_close_s"] = round(time.monotonic() - t, 3)
        # From opening the database until it is closed: how long the
        # person's own `cgc` is locked out.
        timings["db_held_s"] = round(time.monotonic() - lock_t0, 3)


def build_tree(worker, offline, repo, files, timings, progress):
    """Step 1 over `files` of the workspace `repo` (a resolved `Path`),
    with `offline` (CGC's graph builder without a database): the tree's
    parse results, resolved link rows and what the comparison with the
    stored edges needs (a `prepared_tree.TreeState`)."""
    from pathlib import Path

    from codegraphcontext.tools.indexing.persistence.writer import sort_import_rows_for_metadata
    from codegraphcontext.tools.indexing.resolution import inheritance as inh

    repo_posix = repo.as_posix()
    t = time.monotonic()
    progress.phase("parsing", total=len(files))
    cache = worker.open_parse_cache(worker.opts["parse_cache"], repo_posix, cgc_seam.FILE_ALONE_SUFFIXES)
    imports_map = cache.pre_scan(offline, files) if cache else offline.pre_scan_imports(files)
    timings["pre_scan_s"] = round(time.monotonic() - t, 3)
    t = time.monotonic()
    parsed = {}
    for f in sorted(files, key=lambda p: str(p)):
        fd = cache.parse(offline, repo, f) if cache else offline.parse_file(repo, f, False)
        parsed[Path(fd.get("path") or f).resolve().as_posix()] = (f, fd)
        progress.advance()
    all_ok = sorted((fd for (_f, fd) in parsed.values() if "error" not in fd),
                    key=lambda d: str(d.get("path") or ""))
    timings["parse_s"] = round(time.monotonic() - t, 3)
    t = time.monotonic()

    inheritance_batch, csharp_files = inh.build_inheritance_and_csharp_files(all_ok, imports_map)
    implements_batch = inh.build_go_implements_links(all_ok)
    implements_batch.extend(inh.build_haskell_implements_links(all_ok))
    implements_batch.extend(inh.build_elixir_implements_links(all_ok))
    links = {
        "inheritance": inheritance_batch,
        "implements": implements_batch,
        "embeds": inh.build_embeds_links(all_ok),
        "companion_of": inh.build_companion_of_links(all_ok),
        "partial_of": inh.build_partial_of_links(all_ok),
        "part_of": inh.build_part_of_links(all_ok),
        "metaclass": inh.build_metaclass_links(all_ok, imports_map),
        "decorated_by": inh.build_decorated_by_links(all_ok, imports_map),
        "binds": inh.build_binds_links(all_ok, imports_map),
        "previews": inh.build_previews_links(all_ok, imports_map),
    }
    links["calls"] = tuple(worker.resolve_calls(all_ok, imports_map, timings))
    writer_nodes = signatures.WriterNodes(fd for (_f, fd) in parsed.values())
    expected = signatures.row_signatures(links, writer_nodes)
    targets = signatures.row_targets(links)
    csharp_paths = {Path(fd["path"]).resolve().as_posix() for fd in csharp_files}
    timings["resolve_s"] = round(time.monotonic() - t, 3)

    # What a from-scratch index leaves in a shared Module's
    # full_import_name / lang: the first importer in path order writes them
    # (`coalesce(m.x, row.x)` over that file's rows in metadata order), and
    # which of its rows wins depends on the backend (see
    # `module_metadata_row`). Both candidates are kept until the database
    # says which backend it is.
    module_first = {}
    module_defined = set()
    for fd in all_ok:
        for item in fd.get("modules", []) or []:
            module_defined.add(item.get("name"))
        lang = fd.get("lang")
        if lang in {"javascript", "typescript", "tsx"}:
            continue
        rows = []
        for imp in fd.get("imports", []) or []:
            if lang == "python" and imp.get("source"):
                module_name = imp.get("source")
            else:
                module_name = imp.get("name") or imp.get("source") or imp.get("full_import_name")
            if not module_name:
                continue
            rows.append(
                {
                    "name": module_name,
                    "full_import_name": imp.get("full_import_name") or imp.get("source") or module_name,
                    "imported_name": imp.get("imported_name") or imp.get("name") or module_name,
                    "alias": imp.get("alias"),
                    "line_number": imp.get("line_number") or 0,
                    "lang": imp.get("lang") or lang,
                }
            )
        first_importer = {}
        for row in sort_import_rows_for_metadata(rows):
            if row["name"] in module_first:
                continue
            values = (row["full_import_name"], row["lang"])
            first_importer.setdefault(row["name"], {"first_row": values})["last_row"] = values
        module_first.update(first_importer)
    return prepared_tree.TreeState(
        parsed=parsed, links=links, expected=expected, writer_nodes=writer_nodes, targets=targets,
        csharp_paths=csharp_paths, module_first=module_first, module_defined=module_defined,
        imports_map=imports_map, cache=cache,
    )
