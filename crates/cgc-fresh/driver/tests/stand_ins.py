"""Stand-in CodeGraphContext modules for the driver's unit tests.

(Not a test file: `unittest discover` imports only `test_*.py`, and puts
this folder on the path, so the tests import it by name.)"""

import contextlib
import sys
import types


@contextlib.contextmanager
def stand_in_modules(**attributes_by_module):
    """Stand-in modules (`"a.b.c": {attribute: value}`) in `sys.modules`,
    with their parent packages, for the length of the block."""
    names = set()
    for dotted in attributes_by_module:
        parts = dotted.split(".")
        names.update(".".join(parts[:i]) for i in range(1, len(parts) + 1))
    saved = {name: sys.modules.get(name) for name in names}
    modules = {name: types.ModuleType(name) for name in names}
    for name, module in modules.items():
        if "." in name:
            parent, child = name.rsplit(".", 1)
            setattr(modules[parent], child, module)
    for dotted, attributes in attributes_by_module.items():
        for key, value in attributes.items():
            setattr(modules[dotted], key, value)
    sys.modules.update(modules)
    try:
        yield modules
    finally:
        for name, module in saved.items():
            if module is None:
                sys.modules.pop(name, None)
            else:
                sys.modules[name] = module


def config_manager(settings):
    """A stand-in `codegraphcontext.cli.config_manager` whose `load_config`
    counts its reads."""
    reads = []

    def load_config():
        reads.append(1)
        return dict(settings)

    return {"codegraphcontext.cli.config_manager": {"load_config": load_config}}, reads
