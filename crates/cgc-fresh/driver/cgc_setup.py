"""CodeGraphContext itself, as the driver meets it: its private API checked
(`probe_api`), its version (`cgc_version`), its configuration loaded the
way the CLI loads it (`configure_cgc`), the backend it is configured for
(`probe_backend`, `ready_backend`), and its database opened and closed
the way a request needs (`open_database`, `close_database`).

The backend pin (`backend_pin.py`) and the stored-edge memo are the
worker's (`Worker`), handed in.
"""

import os

import cgc_fresh_cgc_seam as cgc_seam
import cgc_fresh_session_patches as session_patches
from cgc_fresh_worker import companion

# The backends (`get_backend_type()` of CGC 0.6.13's managers) on which the
# end-to-end tests prove the graph equal to a from-scratch index. Neo4j and
# Nornic are not: a request there writes nothing and says so.
PROVEN_BACKENDS = ("kuzudb", "ladybugdb", "falkordb", "falkordb-remote")


def probe_api():
    """Imports what the recipe uses and checks every function is there.
    Returns (missing, modules)."""
    import importlib

    missing = []
    modules = {}
    for module_name, names in cgc_seam.REQUIRED_API:
        try:
            module = importlib.import_module(module_name)
        except Exception as exc:  # noqa: BLE001 - any import failure is "missing"
            missing.append(f"{module_name} ({type(exc).__name__}: {exc})")
            continue
        modules[module_name] = module
        for name in names:
            if not callable(getattr(module, name, None)):
                missing.append(f"{module_name}.{name}")
    gb_module = modules.get("codegraphcontext.tools.graph_builder")
    if gb_module is not None and hasattr(gb_module, "GraphBuilder"):
        for name in cgc_seam.GRAPH_BUILDER_METHODS:
            if not callable(getattr(gb_module.GraphBuilder, name, None)):
                missing.append(f"GraphBuilder.{name}")
    writer_module = modules.get("codegraphcontext.tools.indexing.persistence.writer")
    if writer_module is not None and hasattr(writer_module, "GraphWriter"):
        for name in cgc_seam.WRITER_METHODS:
            if not callable(getattr(writer_module.GraphWriter, name, None)):
                missing.append(f"GraphWriter.{name}")
    return missing, modules


def cgc_version():
    try:
        from importlib.metadata import version

        return version("codegraphcontext")
    except Exception:  # noqa: BLE001
        return None


def configure_cgc():
    """Loads CGC's credentials and this workspace's context into the
    environment the way the CLI does (`_initialize_services`, CGC
    0.6.13); returns the context."""
    import codegraphcontext.core as cgc_core
    from codegraphcontext.cli import main as cgc_main
    from codegraphcontext.cli.config_manager import resolve_context

    # With no backend named, CGC 0.6.13's `_load_credentials` asks the
    # factory which backend it would use, and the factory *starts*
    # FalkorDB Lite's server for that (5 s, then a silent fall-back to
    # KùzuDB). Two processes doing it at once (a worker's probe beside a
    # `cgc list`) both fell back, and the listing, on an empty Kùzu, said
    # the workspace was not indexed. Loading the configuration opens
    # nothing: the factory is refused for its duration, and CGC prints its
    # best guess instead (its own `except` path).
    factory = cgc_core.get_database_manager

    def no_database(*_args, **_kwargs):
        raise RuntimeError("cgc-fresh: no database is opened while the configuration is loaded")

    cgc_core.get_database_manager = no_database
    try:
        cgc_main._load_credentials()
    finally:
        cgc_core.get_database_manager = factory
    ctx = resolve_context(None, cwd=os.getcwd())
    if ctx.database and not os.getenv("CGC_RUNTIME_DB_TYPE") and not os.getenv("DEFAULT_DATABASE"):
        os.environ["DEFAULT_DATABASE"] = ctx.database
    return ctx


def configured_manager(pin):
    """CGC's database manager for this workspace, chosen the way the CLI
    chooses it, with FalkorDB Lite given time to start (the factory starts
    it: see `backend_pin.py`)."""
    from codegraphcontext.core import get_database_manager

    ctx = configure_cgc()
    pin.be_patient()
    return get_database_manager(db_path=os.getenv("CGC_RUNTIME_DB_PATH") or ctx.db_path)


def probe_backend(pin):
    """(backend, why not): the backend CGC is configured for here, and a
    reason the driver refuses it (None when it is one of
    `PROVEN_BACKENDS`). Nothing is started or opened."""
    try:
        configure_cgc()
        backend = pin.intended_backend()
    except (Exception, SystemExit) as exc:  # noqa: BLE001 - then it is not proven
        return None, f"cannot tell which backend CGC would use: {type(exc).__name__}: {exc}"
    if backend is None:
        return None, "CodeGraphContext finds no database backend here"
    if backend not in PROVEN_BACKENDS:
        return backend, (f"the graph is on {backend!r}, where the incremental sync is not proven exact "
                         f"(proven: {', '.join(PROVEN_BACKENDS)})")
    return backend, None


def ready_backend(pin):
    """Opens the database only where its engine is FalkorDB's and repairs
    its index; returns the labels repaired and the backend CGC is
    configured for (`backend_pin.py`)."""
    configure_cgc()
    intended = pin.intended_backend()
    index = companion("falkordb_index")
    if intended not in index.FALKORDB_BACKENDS:
        return [], intended
    manager = configured_manager(pin)
    try:
        backend = pin.check(manager, intended)
        return index.repair(manager.get_driver(), backend), intended
    finally:
        close_database(manager)


def open_database(worker, repo, timings):
    """Opens the database the way the CLI does (`_initialize_services`),
    leaving out the schema statements when the database is known to be as
    the worker's last request or tool call left it (see `SchemaDeferred`
    and `StoredEdgeMemo.schema_in_place`)."""
    from codegraphcontext.cli.cli_helpers import _initialize_services

    pin = worker.backend_pin()
    pin.be_patient()
    memo = worker.stored_edge_memo()
    with session_patches.SchemaDeferred(bool(memo) and memo.schema_in_place()) as deferred:
        db_manager, graph_builder, finder, ctx = _initialize_services(None, cwd=repo)
    if deferred.skipped and not memo.schema_in_place(getattr(db_manager, "db_path", None), compare=False):
        # Someone opened the database between the look and the open.
        close_database(db_manager)
        db_manager, graph_builder, finder, ctx = _initialize_services(None, cwd=repo)
        deferred.skipped = False
    timings["schema_skipped"] = 1 if deferred.skipped else 0
    try:
        # CGC falls back to another backend when the graph's does not start
        # in time (see `backend_pin.py`): nothing is written there.
        pin.check(db_manager, pin.intended_backend())
    except BaseException:
        close_database(db_manager)
        raise
    return db_manager, graph_builder, finder, ctx



def close_database(db_manager):
    """Closes the database so that nothing of it stays open: a worker lives
    on after a request, and the person's own `cgc` must find the database
    free. FalkorDB Lite keeps its server process unless told to tear it
    down; other managers take no such argument.

    CGC's `close_driver` ends with a full `gc.collect()`, which walks every
    object the request made (at 2 000 files, about 0.2 s of the request's
    wall time). Those objects are frozen for the close, so that collection
    walks only what the close itself left; `release_memory` collects them
    once the result is out."""
    import gc
    import inspect

    try:
        teardown = "teardown" in inspect.signature(db_manager.close_driver).parameters
    except (TypeError, ValueError):
        teardown = False
    gc.freeze()
    try:
        if teardown:
            db_manager.close_driver(teardown=True)
        else:
            db_manager.close_driver()
    except Exception:  # noqa: BLE001 - closing must not hide the result
        return False
    finally:
        gc.unfreeze()
    return True
