#!/usr/bin/env bash
# Installs the real Claude Code CLI (`@anthropic-ai/claude-code`, pinned) with
# npm into a directory this script owns, for the end-to-end test that drives it
# offline against a scripted fake Messages API. Safe to run before every test
# run: when the directory's stamp matches the pin it returns at once without
# network.
#
# Usage: scripts/install-claude-code.sh
#
# Environment:
#   CGC_FRESH_CLAUDE_CODE_DIR      install prefix (default <repo>/.cache/claude-code)
#   CGC_FRESH_CLAUDE_CODE_VERSION  the pin (default 2.1.328)
#
# Output: progress and npm's output on stderr; the last (and only) line on
# stdout is the absolute path of the installed `claude` executable.
set -euo pipefail

readonly STAMP_FORMAT="cgc-fresh claude-code install stamp v1"

script_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo_root="$(cd "${script_dir}/.." && pwd)"
readonly script_dir repo_root

version="${CGC_FRESH_CLAUDE_CODE_VERSION:-2.1.328}"
prefix="${CGC_FRESH_CLAUDE_CODE_DIR:-${repo_root}/.cache/claude-code}"
readonly version prefix

log() {
    printf 'install-claude-code.sh: %s\n' "$*" >&2
}

die() {
    log "ERROR: $*"
    exit 1
}

command -v npm >/dev/null 2>&1 || die "npm is not on PATH (Node.js 18 or newer is needed)"

mkdir -p "${prefix}"
prefix_abs="$(cd "${prefix}" && pwd)"
readonly prefix_abs
stamp_file="${prefix_abs}/.cgc-fresh-install-stamp"
expected="$(printf '%s\n%s\n' "${STAMP_FORMAT}" "@anthropic-ai/claude-code@${version}")"
bin="${prefix_abs}/node_modules/.bin/claude"

# One installer at a time (the test suite may run this concurrently).
exec 9>"${prefix_abs}.install-lock"
flock 9

if [[ -f "${stamp_file}" && "$(cat "${stamp_file}")" == "${expected}" && -x "${bin}" ]]; then
    log "up to date: @anthropic-ai/claude-code@${version} in ${prefix_abs}"
    printf '%s\n' "${bin}"
    exit 0
fi

log "installing @anthropic-ai/claude-code@${version} into ${prefix_abs}"
rm -f "${stamp_file}"
# The package pulls its native binary as an optional dependency of the
# platform's own package; `--include=optional` keeps npm from skipping it.
status=0
(
    cd "${prefix_abs}"
    [[ -f package.json ]] || printf '{"name":"cgc-fresh-claude-code","private":true}\n' >package.json
    npm install --no-audit --no-fund --include=optional --save-exact \
        "@anthropic-ai/claude-code@${version}" >&2
) || status=$?
((status == 0)) || die "npm install failed with exit ${status} (see npm's output above)"
[[ -x "${bin}" ]] || die "npm installed no executable at ${bin}"
# The launcher must run offline and report the pinned version.
reported="$(DISABLE_AUTOUPDATER=1 DISABLE_TELEMETRY=1 "${bin}" --version 2>/dev/null | head -n 1 || true)"
[[ "${reported}" == "${version}"* ]] || die "${bin} --version says '${reported}', expected ${version}"

printf '%s\n' "${expected}" >"${stamp_file}.tmp"
mv -f "${stamp_file}.tmp" "${stamp_file}"
log "installed: ${reported}"
printf '%s\n' "${bin}"
