#!/usr/bin/env bash
# The whole test suite, from a fresh clone: lints, every crate's tests, the
# end-to-end tests that run the real binary (against the fake `cgc` and the
# real, pinned `cgc`; the real, pinned Claude Code offline against a fake
# Messages API), the Pi bridge's tests and a short fuzzing run.
# Installs what the tests
# need on the way; the installs are cached between runs outside the tree.
set -euo pipefail
cd "$(dirname "$0")/.."
repo="$(pwd)"

cache="${XDG_CACHE_HOME:-$HOME/.cache}/cgc-fresh"
export CGC_FRESH_VENV="${CGC_FRESH_VENV:-$cache/cgc-venv}"
export CGC_FRESH_FALKORDB_VENV="${CGC_FRESH_FALKORDB_VENV:-$cache/falkordb-venv}"

echo "== format and lints"
cargo fmt --all -- --check
cargo clippy --workspace --all-targets --locked -- -D warnings
# The repository's Python (the driver and the test helpers): ruff, pinned, in a
# virtualenv this suite owns; its rules are in ruff.toml.
ruff="$(CGC_FRESH_RUFF_VENV="${CGC_FRESH_RUFF_VENV:-$cache/ruff-venv}" scripts/install-ruff.sh | tail -n 1)"
"$ruff" check --no-cache

echo "== the driver's unit tests (Python; plain files, no CGC needed)"
PYTHONDONTWRITEBYTECODE=1 python3 -m unittest discover -s crates/cgc-fresh/driver/tests

echo "== build (the end-to-end tests run these binaries)"
cargo build --workspace --bins --locked

echo "== the real cgc (pinned, in a virtualenv this suite owns)"
export CGC_FRESH_LITE_VENV="${CGC_FRESH_LITE_VENV:-$cache/cgc-lite-venv}"
lite_path_file="$(mktemp)"
CGC_FRESH_REAL_CGC="$(CGC_FRESH_LITE_PATH_FILE="$lite_path_file" scripts/install-cgc.sh --with-falkordb | tail -n 1)"
export CGC_FRESH_REAL_CGC
# The same pinned CodeGraphContext on Python 3.12, whose default backend is
# FalkorDB Lite (the real-CLI exactness tests run on it too).
CGC_FRESH_REAL_CGC_LITE="$(cat "$lite_path_file")"
rm -f "$lite_path_file"
export CGC_FRESH_REAL_CGC_LITE
export CGC_FRESH_FALKORDB_SERVER_SCRIPT="$repo/scripts/falkordb-server.sh"
# Real-CLI tests fail (not skip) when this is set and the CLI is missing.
export CGC_FRESH_REQUIRE_REAL_CGC=1

echo "== the real Claude Code (pinned, npm, in a directory this suite owns)"
CGC_FRESH_CLAUDE_CODE="$(CGC_FRESH_CLAUDE_CODE_DIR="${CGC_FRESH_CLAUDE_CODE_DIR:-$cache/claude-code}" \
    scripts/install-claude-code.sh | tail -n 1)"
export CGC_FRESH_CLAUDE_CODE
# The Claude Code end-to-end test fails (not skips) without it.
export CGC_FRESH_REQUIRE_CLAUDE_CODE=1

echo "== the real code of the seeded exactness trial (pinned packages, in a directory this suite owns)"
CGC_FRESH_TRIAL_CODE="$(CGC_FRESH_TRIAL_CODE_DIR="${CGC_FRESH_TRIAL_CODE_DIR:-$cache/trial-code}" \
    scripts/install-trial-code.sh | tail -n 1)"
# Read by tests/e2e/language_trial.rs (a failure there without it, since
# CGC_FRESH_REQUIRE_REAL_CGC is set).
export CGC_FRESH_TRIAL_CODE

echo "== Rust tests"
cargo test --workspace --locked -- --test-threads="${CGC_FRESH_TEST_THREADS:-4}"

echo "== Pi bridge tests"
(
    cd deploy/pi
    npm ci --no-audit --no-fund
    CGC_FRESH_BIN="$repo/target/debug/cgc-fresh" npm test
)

echo "== fuzzing smoke run (coverage-guided, ${CGC_FRESH_FUZZ_SECONDS:-60} s per target; see docs/FUZZING.md)"
scripts/fuzz-smoke.sh "${CGC_FRESH_FUZZ_SECONDS:-60}"
