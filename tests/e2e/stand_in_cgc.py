"""Loads one of the incremental driver's modules (e.g.
`driver/session_patches.py`) against stand-in CodeGraphContext modules,
for the check scripts beside this file that test one of its patches or
memos on a stand-in (`*_check.py`)."""

import importlib.util
import sys
import types


def load_module(path, module_name, **stand_ins):
    """The driver's module at `path`, loaded as `module_name` (the name the
    driver gives it, `cgc_fresh_<name>`), with each
    `codegraphcontext.core.<name>` given as `name=module_attributes` (a
    dict) standing in for CGC's own."""
    package = types.ModuleType("codegraphcontext")
    core = types.ModuleType("codegraphcontext.core")
    package.core = core
    modules = {"codegraphcontext": package, "codegraphcontext.core": core}
    for name, attributes in stand_ins.items():
        module = types.ModuleType(f"codegraphcontext.core.{name}")
        for attribute, value in attributes.items():
            setattr(module, attribute, value)
        setattr(core, name, module)
        modules[module.__name__] = module
    sys.modules.update(modules)
    spec = importlib.util.spec_from_file_location(module_name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
