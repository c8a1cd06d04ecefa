"""The resolution memo's rules on stand-in resolution functions of known
shape (`driver/resolution_memo.py`), without CodeGraphContext.

    python resolution_memo_check.py MEMO_MODULE CASE

Prints one JSON line per request: what the memo answered, what the
function run whole answers, and the memo's counts. The Rust test
(`resolution_memo.rs`) judges them.
"""

import importlib.util
import json
import os
import sys
import tempfile

# The map built over every file, and the loop over each file's calls.
INDEX_AND_LOOP = '''
def build_function_call_groups(all_file_data, imports_map, file_class_lookup=None, diagnostics=None):
    index = {}
    for fd in all_file_data:
        for name in fd.get("functions", []):
            index.setdefault(name, []).append(fd["path"])
    resolved_calls = []
    for idx, file_data in enumerate(all_file_data):
        for call in file_data.get("calls", []):
'''

STAND_INS = {
    # A loop that only reads the map.
    "reads": INDEX_AND_LOOP + '''
            targets = index.get(call)
            if targets:
                resolved_calls.append({"caller": file_data["path"], "callee": call, "to": targets[0]})
    return (resolved_calls,)
''',
    # The loop adds to the map: a file's answer depends on the files
    # before it.
    "writes": INDEX_AND_LOOP + '''
            targets = index.setdefault(call, [file_data["path"]])
            resolved_calls.append({"caller": file_data["path"], "callee": call, "to": targets[0]})
    return (resolved_calls,)
''',
    # The loop reads what the previous file's iteration left.
    "carries": '''
def build_function_call_groups(all_file_data, imports_map, file_class_lookup=None, diagnostics=None):
    resolved_calls = []
    previous = None
    for idx, file_data in enumerate(all_file_data):
        if idx:
            resolved_calls.append({"caller": file_data["path"], "after": last})
        last = file_data["path"]
    return (resolved_calls,)
''',
    # No per-file loop of the shape the memo hooks into.
    "other_shape": '''
def build_function_call_groups(all_file_data, imports_map, file_class_lookup=None, diagnostics=None):
    return ([{"caller": fd["path"]} for fd in all_file_data],)
''',
}

# Requests: each the whole tree as parse results, in path order.
TREES = [
    {"a.py": {"functions": ["f"], "calls": []}, "b.py": {"functions": [], "calls": ["f"]},
     "c.py": {"functions": ["g"], "calls": ["g"]}},
    # f renamed to h in a.py: b.py's call now resolves to nothing.
    {"a.py": {"functions": ["h"], "calls": []}, "b.py": {"functions": [], "calls": ["f"]},
     "c.py": {"functions": ["g"], "calls": ["g"]}},
    # A new d.py defines f: b.py's call resolves again, to d.py.
    {"a.py": {"functions": ["h"], "calls": []}, "b.py": {"functions": [], "calls": ["f"]},
     "c.py": {"functions": ["g"], "calls": ["g"]}, "d.py": {"functions": ["f"], "calls": []}},
]


def load(path, name):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def main(memo_path, case):
    memo_module = load(memo_path, "memo")
    with tempfile.TemporaryDirectory() as scratch:
        source = os.path.join(scratch, "stand_in_calls.py")
        with open(source, "w", encoding="utf-8") as out:
            out.write(STAND_INS[case])
        calls = load(source, "stand_in_calls")
        memo = memo_module.ResolutionMemo(calls)
        for tree in TREES:
            files = [dict(data, path=path) for path, data in sorted(tree.items())]
            timings = {}
            answer = memo.resolve(files, {}, timings)
            whole = calls.build_function_call_groups(files, {}, None, diagnostics=[])
            print(json.dumps({
                "equal": tuple(answer) == tuple(whole),
                "answer": answer,
                "off": memo.off,
                "reused": timings.get("resolution_reused"),
                "resolved": timings.get("resolution_resolved"),
            }), flush=True)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
