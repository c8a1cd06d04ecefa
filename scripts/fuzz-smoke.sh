#!/usr/bin/env bash
# Coverage-guided fuzzing of cgc-fresh with libFuzzer (cargo-fuzz), on the
# stable toolchain. See docs/FUZZING.md.
#
#   scripts/fuzz-smoke.sh [SECONDS]
#
# Installs cargo-fuzz when `cargo fuzz` is missing, builds every target in
# fuzz/, then runs them one after the other for SECONDS each (default 60),
# and prints per target the executions, the final coverage and the crashes
# found. Exits non-zero when a target crashed (or could not run); the
# crashing input is left in fuzz/artifacts/<target>/.
#
# Environment:
#   FUZZ_TARGETS    space-separated targets to run (default: all)
#   FUZZ_SANITIZER  cargo-fuzz sanitizer (default: address; `none` is faster)
#
# The corpus grows in fuzz/corpus/<target>/ and is kept between runs; the
# checked-in starting inputs in fuzz/seeds/<target>/ are only read.
set -euo pipefail

seconds="${1:-60}"
if ! [[ "$seconds" =~ ^[1-9][0-9]*$ ]]; then
    echo "usage: $0 [SECONDS]   (a positive whole number; default 60)" >&2
    exit 2
fi

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
fuzz="$repo/fuzz"
sanitizer="${FUZZ_SANITIZER:-address}"
# cargo-fuzz passes nightly-only flags (-Zsanitizer, sanitizer coverage
# options); this lets the stable compiler accept them. Harmless on nightly.
export RUSTC_BOOTSTRAP=1

if ! cargo fuzz --version >/dev/null 2>&1; then
    echo "== installing cargo-fuzz (once; it goes to ~/.cargo/bin)"
    cargo install --locked cargo-fuzz
fi
echo "== $(cargo fuzz --version), $(rustc --version)"

cd "$fuzz"
if [[ -n "${FUZZ_TARGETS:-}" ]]; then
    read -r -a targets <<<"$FUZZ_TARGETS"
else
    mapfile -t targets < <(cargo fuzz list)
fi

echo "== building ${targets[*]} (sanitizer: $sanitizer)"
for target in "${targets[@]}"; do
    cargo fuzz build --sanitizer "$sanitizer" "$target"
done

logs="$fuzz/target/fuzz-logs"
mkdir -p "$logs"
failed=()
summary=()
for target in "${targets[@]}"; do
    corpus="$fuzz/corpus/$target"
    artifacts="$fuzz/artifacts/$target"
    mkdir -p "$corpus" "$artifacts"
    inputs=("$corpus")
    [[ -d "$fuzz/seeds/$target" ]] && inputs+=("$fuzz/seeds/$target")
    options=(
        "-max_total_time=$seconds"
        -print_final_stats=1
        -timeout=10
        -rss_limit_mb=2048
    )
    [[ -f "$fuzz/dict/$target.dict" ]] && options+=("-dict=$fuzz/dict/$target.dict")
    before="$(find "$artifacts" -type f | sort)"
    log="$logs/$target.log"

    echo "== $target: ${seconds}s (log: ${log#"$repo/"})"
    status=0
    # libFuzzer stops by itself after max_total_time; the outer timeout only
    # guards against a hang outside its control.
    timeout --signal=INT --kill-after=30 "$((seconds + 120))" \
        cargo fuzz run --sanitizer "$sanitizer" "$target" "${inputs[@]}" -- "${options[@]}" \
        >"$log" 2>&1 || status=$?

    executions="$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)"
    coverage="$(grep -E '^#[0-9]+' "$log" | grep -o 'cov: [0-9]* ft: [0-9]* corp: [0-9]*' | tail -n 1 || true)"
    mapfile -t new_artifacts < <(comm -13 <(echo "$before") <(find "$artifacts" -type f | sort) | sed '/^$/d')
    crashes="${#new_artifacts[@]}"
    line="$target: executions ${executions:-?}, ${coverage:-no coverage line}, crashes $crashes"
    summary+=("$line")
    echo "   $line"
    if [[ "$status" -ne 0 || "$crashes" -ne 0 ]]; then
        failed+=("$target")
        echo "   exit status $status; new artifacts:" >&2
        [[ "$crashes" -ne 0 ]] && printf '     %s\n' "${new_artifacts[@]}" >&2
        grep -E -A 2 "panicked at|^SUMMARY" "$log" | head -n 12 >&2 || tail -n 20 "$log" >&2
        echo "   reproduce: cd fuzz && RUSTC_BOOTSTRAP=1 cargo fuzz run $target <artifact>" >&2
    fi
done

echo "== summary (${seconds}s per target)"
printf '   %s\n' "${summary[@]}"
if [[ ${#failed[@]} -ne 0 ]]; then
    echo "== FAILED: ${failed[*]}" >&2
    exit 1
fi
echo "== no crashes"
