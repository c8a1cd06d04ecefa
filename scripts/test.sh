#!/usr/bin/env bash
# The whole test suite, from a fresh clone: lints, every crate's tests, and
# the end-to-end tests that run the real binary. Installs what the tests
# need on the way (cached between runs).
set -euo pipefail
cd "$(dirname "$0")/.."

echo "== format and lints"
cargo fmt --all -- --check
cargo clippy --workspace --all-targets --locked -- -D warnings

echo "== build (the e2e tests run these binaries)"
cargo build --workspace --bins --locked

echo "== tests"
cargo test --workspace --locked -- --test-threads="${CGC_FRESH_TEST_THREADS:-4}"
