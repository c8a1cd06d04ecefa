"""The worker's `.cgcignore` memo (`RequestMemos._memoize_ignore_matches`
in `driver/session_patches.py`) on a stand-in for CodeGraphContext's matcher
(the same rule walk as `CGCIgnoreMatcher.match_file` in 0.6.13: the last
rule that matches decides, a negated one un-ignores).

    python ignore_memo_check.py SESSION_PATCHES_PY

Prints one JSON line per case: the memo's answers, the matcher's own
answers, and how many paths the matcher itself was asked. The Rust test
(`ignore_memo.rs`) judges them.
"""

import json
import re
import sys

import stand_in_cgc

PATHS = ["pkg/a.py", "build/x.py", "build/keep.py", "docs/conf.py", "pkg/build/y.py", "z.py"]


class CGCIgnoreMatcher:
    asked = 0

    def __init__(self, root_dir, patterns):
        self.root_dir = root_dir
        self.rules = []
        for raw in patterns:
            negated = raw.startswith("!")
            pattern = raw[1:] if negated else raw
            self.rules.append((negated, re.compile(pattern, re.DOTALL)))

    def match_file(self, file_path):
        CGCIgnoreMatcher.asked += 1
        rel_path = str(file_path).replace("\\", "/").lstrip("/")
        ignored = False
        for is_neg, rule in self.rules:
            if rule.search(rel_path):
                ignored = not is_neg
        return ignored


def load_patches(path):
    return stand_in_cgc.load_module(path, "cgc_fresh_session_patches",
                                    cgcignore={"CGCIgnoreMatcher": CGCIgnoreMatcher})


def answers(patches, memo, patterns, paths=PATHS, max_entries=None):
    """(memo's answers, matcher's own answers, paths the matcher was asked
    through the memo) for a matcher made of `patterns`, with the worker's
    memo `memo` (kept from one request to the next)."""
    matcher = CGCIgnoreMatcher("/repo", patterns)
    CGCIgnoreMatcher.asked = 0
    bound = {} if max_entries is None else {"max_entries": max_entries}
    with patches.RequestMemos(memo, **bound):
        through_memo = [matcher.match_file(p) for p in paths]
        # A path object is matched as shipped, never from the memo.
        from pathlib import PurePosixPath

        through_memo.append(matcher.match_file(PurePosixPath(paths[0])))
    asked = CGCIgnoreMatcher.asked
    own = [matcher.match_file(p) for p in paths] + [matcher.match_file(paths[0])]
    return through_memo, own, asked


def main():
    patches = load_patches(sys.argv[1])
    memo = {}
    build = [r"(^|/)build(/.*)?\Z"]
    cases = [
        ("first matcher", build),
        # Another matcher with the same rules (the next request's): the
        # memo answers, the matcher is asked only for the path object.
        ("same rules again", build),
        # The person's .cgcignore gained a negation: other rules, their own
        # answers.
        ("other rules", build + [r"!(^|/)build/keep\.py\Z"]),
        ("the first rules once more", build),
    ]
    for name, patterns in cases:
        through_memo, own, asked = answers(patches, memo, patterns)
        print(json.dumps({"case": name, "memo": through_memo, "own": own, "asked": asked}))
    # The memo stays bounded: past its limit it starts again.
    through_memo, own, asked = answers(patches, memo, build, [f"build/n{i}.py" for i in range(4)] + ["m.py"] * 2,
                                       max_entries=3)
    kept = sum(len(v) for v in memo.values())
    print(json.dumps({"case": "bounded", "memo": through_memo, "own": own, "asked": asked, "kept": kept}))


if __name__ == "__main__":
    main()
