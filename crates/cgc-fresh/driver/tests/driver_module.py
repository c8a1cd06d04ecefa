"""Loads one of the driver's modules from its source file beside this
folder, under the name the driver itself gives it (`cgc_fresh_<name>`),
for the unit tests here. No CodeGraphContext is needed to load one.

(Not a test file: `unittest discover` imports only `test_*.py`, and puts
this folder on the path, so the tests import it by name.)"""

import importlib.util
import os

DRIVER_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")


def load(file_name, module_name):
    """The driver module `file_name` (e.g. `worker_pauses.py`), loaded
    afresh as `module_name`."""
    return load_path(os.path.join(DRIVER_DIR, file_name), module_name)


def load_path(path, module_name):
    """The Python file at `path`, loaded afresh as `module_name`."""
    spec = importlib.util.spec_from_file_location(module_name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
