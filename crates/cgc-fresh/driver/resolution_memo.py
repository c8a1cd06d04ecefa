"""cgc-fresh resolution memo: CodeGraphContext's call resolution re-run, in a
long-lived worker, only for the files whose answer can have changed since
the worker's previous request.

Loaded by the incremental driver from the file next to it (the service
writes it there as `incremental-resolution-memo.py`).

CGC's `build_function_call_groups` first builds maps over the whole tree
(functions and classes by name, methods by owner, class bases, variable and
return types, callback arguments, imports by language...), then resolves
each file's calls in a loop that only reads those maps and the file's own
parse result, appending the file's edges to one list. The loop is most of
the function's time (about 0.9 s of 1.25 s at 2 000 files); one file's
answer depends only on the map entries it looked at. So:

- The function is compiled once per process from CGC's own source, with
  three hooks around that loop (found by its shape; any other shape and the
  memo is off, the function runs as shipped): before it, every container
  the function bound so far is replaced by a copy that notes each key read
  (`TrackedDict` and friends; iterating, `len` or any read of a list notes
  the whole container) and is fingerprinted key by key; the loop runs only
  over the files that must be resolved again, each file's reads collected;
  after it, the edges of the other files are put back from the previous
  request, in file order, before the function's own grouping runs.
- A file is resolved again when it is new, its parse result changed, or a
  map entry it read changed (added, removed or another value); every file
  when any value that is no container changed (a setting, a flag) or a
  container appeared or went.
- The loop must not write to the maps (then a file's answer would depend on
  the files before it): a write is noticed, the request's answer is CGC's
  own function run whole, and the memo is off for the process.

Fingerprints are hashes of `marshal.dumps` (a value marshal cannot write
counts as changed every time), so two requests compare equal only for
values of the same types and content; a doubt costs a re-resolution, never
a stale answer. With `CGC_FRESH_VERIFY_RESOLUTION=1` every answer is
compared with the function run whole and a difference fails the request
(the tests run so).

No library does this: it is memoisation keyed by the reads of a function we
do not own, which needs those reads observed from inside it.
"""

import ast
import collections
import marshal
import os
import sys
import time

VERIFY_ENV = "CGC_FRESH_VERIFY_RESOLUTION"
FUNCTION = "build_function_call_groups"
# Bound before the loop but not state the loop reads as input: the output
# list, the files themselves (each file's own data is compared whole), the
# diagnostics sink, and the per-language memo, which is replaced by tracked
# views (`_get_lang_imports`).
NOT_TRACKED = ("resolved_calls", "all_file_data", "diagnostics", "_lang_imports_cache")
LANG_VIEWS = "_get_lang_imports"
ALL = ("\u0000all",)
# Whether a container is empty (`x or {}`, `if x:`): a read of its own, so
# that a file which only tests a map for emptiness does not depend on every
# entry.
EMPTY = ("\u0000empty",)


class Mismatch(Exception):
    """The memo's answer differs from the function run whole (verify mode)."""


class _Reads:
    active = None  # the set the current file's reads go to
    written = []  # names of containers written while the loop ran


def _note(name, key):
    reads = _Reads.active
    if reads is not None:
        reads.add((name, key))


def _wrote(name):
    if _Reads.active is not None:
        _Reads.written.append(name)


class _TrackedMapping:
    """Reads of a key note that key; anything that sees every key notes the
    whole mapping; writes are noted as writes."""

    def __getitem__(self, key):
        _note(self._memo_name, key)
        if not dict.__contains__(self, key) and getattr(self, "default_factory", None) is not None:
            _wrote(self._memo_name)
        return super().__getitem__(key)

    def get(self, key, default=None):
        _note(self._memo_name, key)
        return super().get(key, default)

    def __contains__(self, key):
        _note(self._memo_name, key)
        return super().__contains__(key)

    def setdefault(self, key, default=None):
        _note(self._memo_name, key)
        if not dict.__contains__(self, key):
            _wrote(self._memo_name)
        return super().setdefault(key, default)

    def _all(self):
        _note(self._memo_name, ALL)

    def __bool__(self):
        _note(self._memo_name, EMPTY)
        return dict.__len__(self) > 0

    def __iter__(self):
        self._all()
        return super().__iter__()

    def __len__(self):
        self._all()
        return super().__len__()

    def __reversed__(self):
        self._all()
        return super().__reversed__()

    def keys(self):
        self._all()
        return super().keys()

    def values(self):
        self._all()
        return super().values()

    def items(self):
        self._all()
        return super().items()

    def copy(self):
        self._all()
        return dict(super().items())

    def __eq__(self, other):
        self._all()
        return super().__eq__(other)

    def __ne__(self, other):
        self._all()
        return super().__ne__(other)

    def __or__(self, other):
        self._all()
        return dict(super().items()) | other

    def __ror__(self, other):
        self._all()
        return other | dict(super().items())

    __hash__ = None

    def _write(self, method, *args, **kwargs):
        _wrote(self._memo_name)
        return getattr(super(), method)(*args, **kwargs)

    def __setitem__(self, key, value):
        return self._write("__setitem__", key, value)

    def __delitem__(self, key):
        return self._write("__delitem__", key)

    def pop(self, *args):
        return self._write("pop", *args)

    def popitem(self):
        return self._write("popitem")

    def clear(self):
        return self._write("clear")

    def update(self, *args, **kwargs):
        return self._write("update", *args, **kwargs)

    def __ior__(self, other):
        return self._write("__ior__", other)


class TrackedDict(_TrackedMapping, dict):
    def __init__(self, name, data):
        dict.__init__(self, data)
        self._memo_name = name


class TrackedDefaultDict(_TrackedMapping, collections.defaultdict):
    def __init__(self, name, data):
        collections.defaultdict.__init__(self, data.default_factory, data)
        self._memo_name = name


class TrackedSet(set):
    """`in` notes the element; anything else that reads notes the set."""

    def __init__(self, name, data):
        set.__init__(self, data)
        self._memo_name = name

    def __contains__(self, key):
        _note(self._memo_name, key)
        return set.__contains__(self, key)

    def __bool__(self):
        _note(self._memo_name, EMPTY)
        return set.__len__(self) > 0

    __hash__ = None


def _read_whole(method):
    def wrapper(self, *args, **kwargs):
        _note(self._memo_name, ALL)
        return getattr(self._memo_base, method)(self, *args, **kwargs)

    wrapper.__name__ = method
    return wrapper


def _write_whole(method):
    def wrapper(self, *args, **kwargs):
        _wrote(self._memo_name)
        return getattr(self._memo_base, method)(self, *args, **kwargs)

    wrapper.__name__ = method
    return wrapper


for _method in ("__iter__", "__len__", "__eq__", "__ne__", "__le__", "__lt__", "__ge__", "__gt__",
                "__and__", "__or__", "__sub__", "__xor__", "__rand__", "__ror__", "__rsub__", "__rxor__",
                "copy", "difference", "intersection", "isdisjoint", "issubset", "issuperset",
                "symmetric_difference", "union", "__reduce__"):
    setattr(TrackedSet, _method, _read_whole(_method))
for _method in ("add", "discard", "remove", "pop", "clear", "update", "difference_update",
                "intersection_update", "symmetric_difference_update", "__iand__", "__ior__",
                "__isub__", "__ixor__"):
    setattr(TrackedSet, _method, _write_whole(_method))
TrackedSet._memo_base = set


class TrackedList(list):
    """Any read but a test for emptiness notes the whole list."""

    def __init__(self, name, data):
        list.__init__(self, data)
        self._memo_name = name

    def __bool__(self):
        _note(self._memo_name, EMPTY)
        return list.__len__(self) > 0

    __hash__ = None


for _method in ("__getitem__", "__iter__", "__len__", "__contains__", "__reversed__", "__eq__", "__ne__",
                "__lt__", "__le__", "__gt__", "__ge__", "__add__", "__mul__", "__rmul__", "copy", "count",
                "index", "__reduce__"):
    setattr(TrackedList, _method, _read_whole(_method))
for _method in ("__setitem__", "__delitem__", "append", "extend", "insert", "pop", "remove", "sort",
                "reverse", "clear", "__iadd__", "__imul__"):
    setattr(TrackedList, _method, _write_whole(_method))
TrackedList._memo_base = list


def _fingerprint(value):
    """A hash of the value's exact content, or a fresh object (equal to
    nothing) when marshal cannot write it."""
    try:
        # Version 2 writes no back-references, so equal content gives equal
        # bytes whatever objects it shares.
        return hash(marshal.dumps(value, 2))
    except (ValueError, TypeError):
        return object()


def _with_cells(function, **values):
    """`function` with the named variables it closes over bound to other
    values, or None when it does not close over exactly those."""
    import types

    code = function.__code__
    if not set(values) <= set(code.co_freevars) or function.__closure__ is None:
        return None
    cells = tuple(
        types.CellType(values[name]) if name in values else cell
        for name, cell in zip(code.co_freevars, function.__closure__, strict=True)
    )
    return types.FunctionType(code, function.__globals__, function.__name__, function.__defaults__, cells)


def _entries(mapping):
    """A mapping's fingerprints by key, and whether it is empty."""
    entries = {k: _fingerprint(v) for k, v in dict.items(mapping)}
    entries[EMPTY] = bool(entries)
    return entries


def _file_key(fd):
    return str(fd.get("path"))


# ---------------------------------------------------------------- compiling


def _bound_names(statements):
    """Names a run of statements binds in the function's own scope."""
    names = set()
    scopes = (ast.Lambda, ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)

    def targets(node):
        for sub in ast.walk(node):
            if isinstance(sub, ast.Name):
                names.add(sub.id)

    def visit(node):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
            return
        if isinstance(node, scopes):
            # A comprehension's own variables stay in it; an assignment
            # expression in it binds in the function.
            stack = [] if isinstance(node, ast.Lambda) else [node]
            while stack:
                inner = stack.pop()
                if isinstance(inner, ast.NamedExpr):
                    targets(inner.target)
                stack.extend(child for child in ast.iter_child_nodes(inner)
                             if not isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda,
                                                       ast.ClassDef)))
            return
        if isinstance(node, ast.Assign):
            for target in node.targets:
                targets(target)
        elif isinstance(node, (ast.AnnAssign, ast.AugAssign, ast.NamedExpr)):
            targets(node.target)
        elif isinstance(node, (ast.For, ast.AsyncFor)):
            targets(node.target)
        elif isinstance(node, ast.withitem) and node.optional_vars is not None:
            targets(node.optional_vars)
        elif isinstance(node, ast.ExceptHandler) and node.name:
            names.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            for alias in node.names:
                names.add((alias.asname or alias.name).split(".")[0])
        for child in ast.iter_child_nodes(node):
            visit(child)

    for statement in statements:
        visit(statement)
    return names


def _loads(statements):
    """Names the statements read in their own scope: not inside nested
    functions (what those read of this scope is in its cell variables), and
    not a comprehension's own variables."""
    loads = set()
    comprehensions = (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)

    def visit(node, local):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            return
        if isinstance(node, comprehensions):
            local = local | {n.id for g in node.generators for n in ast.walk(g.target) if isinstance(n, ast.Name)}
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load) and node.id not in local:
            loads.add(node.id)
        for child in ast.iter_child_nodes(node):
            visit(child, local)

    for statement in statements:
        visit(statement, frozenset())
    return loads


def _is_file_loop(statement):
    return (
        isinstance(statement, ast.For)
        and isinstance(statement.target, ast.Tuple)
        and [getattr(e, "id", None) for e in statement.target.elts] == ["idx", "file_data"]
        and isinstance(statement.iter, ast.Call)
        and getattr(statement.iter.func, "id", None) == "enumerate"
        and len(statement.iter.args) == 1
        and getattr(statement.iter.args[0], "id", None) == "all_file_data"
        and not statement.orelse
    )


def instrument(module):
    """CGC's function compiled with the memo's hooks, sharing the module's
    globals; raises `ValueError` when its source has another shape."""
    path = getattr(module, "__file__", None)
    if not path or not path.endswith(".py"):
        raise ValueError("the resolution module's source is not available")
    with open(path, encoding="utf-8") as source:
        tree = ast.parse(source.read(), filename=path)
    functions = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == FUNCTION]
    if len(functions) != 1:
        raise ValueError(f"no single {FUNCTION} in {path}")
    function = functions[0]
    loops = [i for i, statement in enumerate(function.body) if _is_file_loop(statement)]
    if len(loops) != 1:
        raise ValueError("its per-file loop has another shape")
    at = loops[0]
    loop = function.body[at]
    params = {a.arg for a in function.args.args + function.args.kwonlyargs}
    before_loop = _bound_names(function.body[:at]) | params
    # Names the loop binds itself are the loop's own: each iteration must
    # bind them before it reads them, or it would read the previous file's
    # (or the map-building loops' last) value. They are unbound at the top
    # of every iteration, and once more after the loop, so that such a read
    # raises instead of making one file's answer depend on another's.
    in_loop = _bound_names(loop.body) | {"idx", "file_data"}
    # What the loop can read of them: the names it loads itself, and the
    # function's variables its nested functions capture (which the loop may
    # call). The rest (the map-building loops' leftovers) cannot change a
    # file's answer.
    compiled = compile(ast.Module(body=[function], type_ignores=[]), path, "exec")
    captured = set()
    for const in compiled.co_consts:
        if getattr(const, "co_name", None) == FUNCTION:
            captured = set(const.co_cellvars)
    loaded = _loads(loop.body) | captured
    names = sorted((before_loop - in_loop - set(NOT_TRACKED)) & loaded)
    unbind = "".join(f"try:\n    del {name}\nexcept NameError:\n    pass\n" for name in sorted(in_loop))
    hooks_before = ["__memo_values = {}"]
    for name in names:
        hooks_before.append(f"try:\n    __memo_values[{name!r}] = {name}\nexcept NameError:\n    pass")
    hooks_before.append("__memo_values = __memo_run.begin(__memo_values, all_file_data)")
    for name in names:
        hooks_before.append(f"if {name!r} in __memo_values:\n    {name} = __memo_values[{name!r}]")
    before = [s for code in hooks_before for s in ast.parse(code).body]
    loop.iter = ast.parse("__memo_run.files(enumerate(all_file_data), resolved_calls)", mode="eval").body
    loop.body = ast.parse(unbind.replace("try:\n    del idx\nexcept NameError:\n    pass\n", "").replace(
        "try:\n    del file_data\nexcept NameError:\n    pass\n", "")).body + loop.body
    after = ast.parse(unbind + "__memo_run.end(all_file_data, resolved_calls)").body
    function.body[at:at + 1] = before + [loop] + after
    ast.fix_missing_locations(function)
    namespace = dict(vars(module))
    namespace["__memo_run"] = None
    exec(compile(ast.Module(body=[function], type_ignores=[]), path, "exec"), namespace)
    return namespace, namespace[FUNCTION]


# ---------------------------------------------------------------- running


class _State:
    """What one request leaves for the next."""

    def __init__(self):
        self.kinds = {}  # container name -> "map" | "set" | "list"
        self.fingerprints = {}  # name -> {key: fp} (a list: {ALL: fp})
        self.scalars = None
        # file key -> (fd fingerprint, its reads, the names it read,
        # marshalled edges)
        self.files = {}
        self.lang_views = {}  # language -> CGC's view of `imports_map` for it


class _Run:
    """One call of the instrumented function."""

    def __init__(self, previous, timings):
        self.previous = previous
        self.timings = timings
        self.loop_started = time.monotonic()
        self.state = _State()
        self.changed = set()  # (name, key) read pairs whose answer changed
        self.changed_names = set()  # containers that appeared, went or changed kind
        self.everything = previous is None
        self.new = {}  # file key -> (fd fp, reads, names, marshalled edges or None, edges)
        self.open = None  # (key, fd fp, reads, start)
        self.reused = 0
        self.resolved = 0

    # -- before the loop

    def begin(self, values, all_file_data):
        started = time.monotonic()
        _Reads.active = None
        _Reads.written = []
        out = {}
        scalars = {}
        views = None
        for name, value in values.items():
            if name == LANG_VIEWS and callable(value):
                views = value  # after the maps: it is built from `imports_map`
            elif isinstance(value, dict):
                tracked = (TrackedDefaultDict if isinstance(value, collections.defaultdict)
                           else TrackedDict)(name, value)
                self._record(name, "map", _entries(value))
                out[name] = tracked
            elif isinstance(value, set):
                self._record(name, "set", dict.fromkeys(value, 0) | {EMPTY: bool(value)})
                out[name] = TrackedSet(name, value)
            elif isinstance(value, list):
                self._record(name, "list", {ALL: _fingerprint(value), EMPTY: bool(value)})
                out[name] = TrackedList(name, value)
            elif callable(value) or type(value).__name__ == "module":
                out[name] = value
            else:
                scalars[name] = value
                out[name] = value
        if views is not None:
            out[LANG_VIEWS] = self._lang_views(views, all_file_data, values.get("imports_map"))
        if self.state is not None:
            self.state.scalars = _fingerprint(sorted(scalars.items(), key=lambda item: item[0]))
        self._diff()
        self.timings["resolution_memo_begin_s"] = round(time.monotonic() - started, 3)
        self.loop_started = time.monotonic()
        return out

    def _lang_views(self, original, all_file_data, imports_map):
        """CGC's per-language views of `imports_map` as tracked maps. Each
        view filters `imports_map` entry by entry (by the paths' suffixes),
        so after the first request only the entries whose paths changed are
        filtered again — by CGC's own closure, given just those entries —
        and the others are taken from the previous request's view (its cost:
        docs/BENCHMARKS.md, "Figures behind design choices")."""
        views = {}
        previous = self.previous
        changed = None
        if previous is not None and self.state is not None and isinstance(imports_map, dict):
            before = previous.fingerprints.get("imports_map")
            now = self.state.fingerprints.get("imports_map")
            if before is not None and now is not None:
                changed = {k: imports_map[k] for k in imports_map if before.get(k, ALL) != now.get(k, ALL)}
        for lang in sorted({fd.get("lang") for fd in all_file_data if fd.get("lang")}):
            name = f"{LANG_VIEWS}:{lang}"
            kept = previous.lang_views.get(lang) if previous is not None and changed is not None else None
            filtered = _with_cells(original, imports_map=changed, _lang_imports_cache={}) if kept is not None else None
            if filtered is None:
                data = original(lang)
            else:
                again = filtered(lang)
                data = {}
                for key in imports_map:
                    if key in changed:
                        if key in again:
                            data[key] = again[key]
                    elif key in kept:
                        data[key] = kept[key]
            views[lang] = TrackedDict(name, data)
            self._record(name, "map", _entries(data))
            if self.state is not None:
                self.state.lang_views[lang] = data

        def tracked_views(lang):
            view = views.get(lang)
            if view is None:
                # Not seen in the files' languages: answered, and the run's
                # answers are not kept (a later request could not diff it).
                self.state = None
                return original(lang)
            return view

        return tracked_views

    def _record(self, name, kind, fingerprints):
        if self.state is None:
            return
        self.state.kinds[name] = kind
        self.state.fingerprints[name] = fingerprints

    def _diff(self):
        previous = self.previous
        if previous is None or self.state is None:
            self.everything = True
            return
        if previous.scalars != self.state.scalars:
            # A setting or flag of the resolution changed: every file.
            self.everything = True
            return
        for name in previous.kinds.keys() | self.state.kinds.keys():
            if previous.kinds.get(name) != self.state.kinds.get(name):
                # Bound only when a map-building loop ran (or of another
                # type): whoever read it reads something else now.
                self.changed_names.add(name)
        for name, now in self.state.fingerprints.items():
            if name in self.changed_names:
                continue
            before = previous.fingerprints[name]
            # A fingerprint marshal could not make equals nothing, itself
            # included: such an entry counts as changed every time.
            changed = [k for k in now.keys() | before.keys() if before.get(k, ALL) != now.get(k, ALL)]
            if changed:
                self.changed.add((name, ALL))
                self.changed.update((name, k) for k in changed)

    # -- the loop

    def files(self, numbered, resolved_calls):
        for idx, fd in numbered:
            key = _file_key(fd)
            fd_fp = _fingerprint(fd)
            kept = None if self.everything else self.previous.files.get(key)
            if (
                kept is not None
                and kept[0] == fd_fp
                and type(fd_fp) is not object
                and kept[1].isdisjoint(self.changed)
                and kept[2].isdisjoint(self.changed_names)
            ):
                self.reused += 1
                continue
            self.resolved += 1
            reads = set()
            self.open = (key, fd_fp, reads, len(resolved_calls))
            _Reads.active = reads
            yield idx, fd
            self._close(resolved_calls)

    def _close(self, resolved_calls):
        _Reads.active = None
        if self.open is None:
            return
        key, fd_fp, reads, start = self.open
        self.open = None
        edges = resolved_calls[start:]
        try:
            kept = marshal.dumps(edges)
        except (ValueError, TypeError):
            kept = None  # resolved again next time
        names = frozenset(name for name, _key in reads)
        self.new[key] = (fd_fp, frozenset(reads), names, kept, edges)

    # -- after the loop

    def end(self, all_file_data, resolved_calls):
        self._close(resolved_calls)
        started = time.monotonic()
        self.timings["resolution_memo_loop_s"] = round(started - self.loop_started, 3)
        if _Reads.written:
            raise _LoopWrote(sorted(set(_Reads.written)))
        if self.everything:
            assembled = None
        else:
            assembled = []
            for fd in all_file_data:
                key = _file_key(fd)
                fresh = self.new.get(key)
                if fresh is not None:
                    assembled.extend(fresh[4])
                else:
                    # A copy: the function's grouping and the writer may
                    # change the edges they are given.
                    assembled.extend(marshal.loads(self.previous.files[key][3]))
            resolved_calls[:] = assembled
        if self.state is not None:
            files = {}
            for fd in all_file_data:
                key = _file_key(fd)
                fresh = self.new.get(key)
                if fresh is not None:
                    if fresh[3] is not None:
                        files[key] = fresh[:4]
                elif not self.everything:
                    files[key] = self.previous.files[key]
            self.state.files = files
        self.timings["resolution_memo_end_s"] = round(time.monotonic() - started, 3)


class _LoopWrote(Exception):
    def __init__(self, names):
        super().__init__(", ".join(names))


class ResolutionMemo:
    """The memo of one worker process (see the module's doc)."""

    def __init__(self, module):
        self.module = module
        self.state = None
        self.off = None
        try:
            self.namespace, self.function = instrument(module)
        except (OSError, SyntaxError, ValueError) as exc:
            self.off = f"memo off: {exc}"

    def resolve(self, all_file_data, imports_map, timings):
        original = getattr(self.module, FUNCTION)
        verify = os.environ.get(VERIFY_ENV, "") == "1"
        if self.off:
            timings["resolution_memo_off"] = 1
            return original(all_file_data, imports_map, None, diagnostics=[])
        run = _Run(self.state, timings)
        self.namespace["__memo_run"] = run
        try:
            groups = self.function(all_file_data, imports_map, None, diagnostics=[])
        except _LoopWrote as exc:
            self.off = f"memo off: the per-file loop wrote to {exc}"
        except NameError as exc:
            self.off = f"memo off: the per-file loop read a value another file's iteration left ({exc})"
        except Exception as exc:  # noqa: BLE001 - CGC's own error comes again below
            # Whatever else went wrong with the hooks, the function run whole
            # answers (and raises again if the error was CGC's own).
            self.off = f"memo off: {type(exc).__name__}: {exc}"
        finally:
            _Reads.active = None
            self.namespace["__memo_run"] = None
        if self.off:
            print(f"cgc-fresh: resolution {self.off}", file=sys.stderr)
            self.state = None
            timings["resolution_memo_off"] = 1
            return original(all_file_data, imports_map, None, diagnostics=[])
        self.state = run.state
        timings["resolution_reused"] = run.reused
        timings["resolution_resolved"] = run.resolved
        if verify:
            whole = original(all_file_data, imports_map, None, diagnostics=[])
            if tuple(whole) != tuple(groups):
                self.state = None
                raise Mismatch(
                    f"the resolution memo's answer differs from CodeGraphContext's "
                    f"({run.reused} files reused, {run.resolved} resolved)"
                )
            timings["resolution_verified"] = 1
        return groups
