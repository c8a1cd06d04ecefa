"""Loads one of the driver's modules for the unit tests here. No
CodeGraphContext is needed to load one.

- `companion(name)`: the module `cgc_fresh_<name>` as the driver imports
  it (once per process, from `<name>.py` beside this folder, through the
  entry point's `CompanionFinder`); the modules of the driver's split
  (`worker.py`, `serve.py`, …) import each other so, and a test patches
  the instance they share.
- `load(file_name, module_name)`: a module loaded afresh from its source
  file, under the name the driver gives it (`cgc_fresh_<name>`).

(Not a test file: `unittest discover` imports only `test_*.py`, and puts
this folder on the path, so the tests import it by name.)"""

import importlib
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


def companion(name):
    """The driver's module `name` as the driver imports it (see above)."""
    install_finder()
    return importlib.import_module("cgc_fresh_" + name)


_ENTRY = []


def install_finder():
    """Loads the entry point once, which puts its `CompanionFinder` of the
    driver's source folder on the import path."""
    if not _ENTRY:
        _ENTRY.append(load("incremental.py", "cgc_fresh_incremental_entry"))
    return _ENTRY[0]
