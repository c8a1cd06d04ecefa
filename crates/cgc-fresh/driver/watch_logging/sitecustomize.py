"""Put first on the PYTHONPATH of the `cgc watch` that cgc-fresh manages.

CGC logs, at INFO, the line `[INCREMENTAL] Done. Graph refresh for <path>
complete!` once its watcher has written a file's change to the graph; its
CLI leaves logging at WARNING, so the line is dropped. This raises CGC's app
logger to INFO (ENABLE_APP_LOGS=INFO is set too), so that cgc-fresh learns
which edits are in the graph. Then it runs the `sitecustomize` this module
shadows, if there is one.
"""

import logging

logging.getLogger("codegraphcontext.utils.debug_log").setLevel(logging.INFO)


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
