#!/usr/bin/env bash
# Installs the Python linter `ruff` (pinned, from PyPI) into a virtualenv this
# script owns, for the lints step of scripts/test.sh. Safe to run before every
# test run: when the venv's stamp matches the pin it returns at once without
# network.
#
# Usage: scripts/install-ruff.sh
#
# Environment:
#   CGC_FRESH_RUFF_VENV     the venv (default <repo>/.cache/ruff-venv)
#   CGC_FRESH_RUFF_PYTHON   interpreter for it (default python3)
#   CGC_FRESH_RUFF_VERSION  the pin (default 0.8.4)
#
# Output: progress and pip's output on stderr; the last (and only) line on
# stdout is the absolute path of the installed `ruff` executable.
set -euo pipefail

readonly STAMP_FORMAT="cgc-fresh ruff install stamp v1"

script_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo_root="$(cd "${script_dir}/.." && pwd)"
readonly script_dir repo_root

version="${CGC_FRESH_RUFF_VERSION:-0.8.4}"
venv="${CGC_FRESH_RUFF_VENV:-${repo_root}/.cache/ruff-venv}"
python="${CGC_FRESH_RUFF_PYTHON:-python3}"
readonly version venv python

log() {
    printf 'install-ruff.sh: %s\n' "$*" >&2
}

die() {
    log "ERROR: $*"
    exit 1
}

mkdir -p "$(dirname "${venv}")"
venv_abs="$(cd "$(dirname "${venv}")" && pwd)/$(basename "${venv}")"
readonly venv_abs
stamp_file="${venv_abs}/.cgc-fresh-install-stamp"
expected="$(printf '%s\n%s\n' "${STAMP_FORMAT}" "ruff==${version}")"
bin="${venv_abs}/bin/ruff"

# One installer at a time (the test suite may run this concurrently).
exec 9>"${venv_abs}.install-lock"
flock 9

if [[ -f "${stamp_file}" && "$(cat "${stamp_file}")" == "${expected}" && -x "${bin}" ]]; then
    log "up to date: ruff ${version} in ${venv_abs}"
    printf '%s\n' "${bin}"
    exit 0
fi

if [[ ! -x "${venv_abs}/bin/python" ]]; then
    command -v "${python}" >/dev/null 2>&1 || die "interpreter '${python}' not found"
    log "creating venv ${venv_abs} with $("${python}" --version 2>&1)"
    "${python}" -m venv "${venv_abs}" || die "'${python} -m venv ${venv_abs}' failed"
fi
log "installing ruff==${version} into ${venv_abs}"
rm -f "${stamp_file}"
status=0
"${venv_abs}/bin/python" -m pip --disable-pip-version-check --no-input \
    install --progress-bar off "ruff==${version}" >&2 || status=$?
((status == 0)) || die "pip install failed with exit ${status} (see pip's output above)"
[[ -x "${bin}" ]] || die "pip installed no executable at ${bin}"
reported="$("${bin}" --version 2>/dev/null || true)"
[[ "${reported}" == "ruff ${version}" ]] || die "${bin} --version says '${reported}', expected ruff ${version}"

printf '%s\n' "${expected}" >"${stamp_file}.tmp"
mv -f "${stamp_file}.tmp" "${stamp_file}"
log "installed: ${reported}"
printf '%s\n' "${bin}"
