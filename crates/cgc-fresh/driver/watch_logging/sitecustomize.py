"""Put first on the PYTHONPATH of the `cgc watch` that cgc-fresh manages.

CGC logs, at INFO, the line `[INCREMENTAL] Done. Graph refresh for <path>
complete!` once its watcher has written a file's change to the graph; its
CLI leaves logging at WARNING, so the line is dropped. This raises CGC's app
logger to INFO (ENABLE_APP_LOGS=INFO is set too), so that cgc-fresh learns
which edits are in the graph. With CGC's logger at INFO its fallback from
one database backend to another is printed too (`Database backend
fallback: …`), which the service takes as a failed watcher.

It also gives FalkorDB Lite `LITE_STARTUP_PATIENCE_S` to start, as the
driver does (`backend_pin.py`): CGC 0.6.13 waits
`FalkorDBManager._STARTUP_TIMEOUT_SEC` (5 s) and then goes on with KùzuDB.
The wait is raised when CGC's module is first imported (an import hook:
nothing of CGC is imported here, so every other Python that inherits this
path starts as before).

Then it runs the `sitecustomize` this module shadows, if there is one.
"""

import logging
import sys

logging.getLogger("codegraphcontext.utils.debug_log").setLevel(logging.INFO)

# Read from CodeGraphContext 0.6.13 (the driver's `backend_pin.py`).
LITE_MODULE = "codegraphcontext.core.database_falkordb"
LITE_STARTUP_ATTRIBUTE = "_STARTUP_TIMEOUT_SEC"
LITE_STARTUP_PATIENCE_S = 120.0


class LitePatience:
    """A meta-path finder that loads `LITE_MODULE` as usual and then raises
    its manager's start-up wait to `LITE_STARTUP_PATIENCE_S`."""

    def find_spec(self, name, path, target=None):
        if name != LITE_MODULE:
            return None
        import importlib.machinery

        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        load = spec.loader.exec_module

        def exec_module(module):
            load(module)
            manager = getattr(module, "FalkorDBManager", None)
            wait = getattr(manager, LITE_STARTUP_ATTRIBUTE, None)
            if isinstance(wait, (int, float)) and wait < LITE_STARTUP_PATIENCE_S:
                setattr(manager, LITE_STARTUP_ATTRIBUTE, LITE_STARTUP_PATIENCE_S)

        spec.loader.exec_module = exec_module
        return spec


sys.meta_path.insert(0, LitePatience())


def _chain():
    import importlib.machinery
    import importlib.util
    import os
    import sys

    here = os.path.dirname(os.path.abspath(__file__))
    rest = [p for p in sys.path if os.path.abspath(p or ".") != here]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", rest)
    if spec is not None and spec.loader is not None:
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)


try:
    _chain()
except Exception:  # noqa: BLE001 - a shadowed sitecustomize must not stop cgc
    pass
