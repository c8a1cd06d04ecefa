#!/usr/bin/env bash
# Installs the real code the seeded exactness trial of the end-to-end tests
# edits (tests/e2e/language_trial.rs): published packages, each pinned by
# version and by the SHA-256 of what the registry serves, unpacked into one
# directory this script owns, one tree per language:
#
#   typescript/  immer 11.2.10 (npm): its shipped `src/`, the .ts files
#   javascript/  semver 7.7.2 (npm): every .js file of the package
#   go/          gojsonnet 0.22.0 (PyPI sdist, which ships the Go sources
#                of go-jsonnet): go.mod and the non-test .go files of
#                ast/, formatter/, toolutils/, internal/errors/,
#                internal/pass/ and internal/formatter/
#   rust/        tempfile 3.27.0 (crates.io, the version this workspace's
#                Cargo.lock pins, from cargo's own download cache):
#                Cargo.toml and src/
#   python/      pluggy 1.6.0 (PyPI wheel): pluggy/*.py
#
# Safe to run before every test run: when the directory's stamp matches the
# pins it returns at once without network.
#
# Usage: scripts/install-trial-code.sh
#
# Environment:
#   CGC_FRESH_TRIAL_CODE_DIR  the directory (default <repo>/.cache/trial-code)
#   CGC_FRESH_TRIAL_PYTHON    interpreter whose pip downloads the PyPI
#                             packages (default python3)
#
# Output: progress and the clients' output on stderr; the last (and only)
# line on stdout is the absolute path of the directory (the tests read it
# from CGC_FRESH_TRIAL_CODE).
set -euo pipefail

readonly STAMP_FORMAT="cgc-fresh trial code install stamp v1"

script_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo_root="$(cd "${script_dir}/.." && pwd)"
readonly script_dir repo_root

dir="${CGC_FRESH_TRIAL_CODE_DIR:-${repo_root}/.cache/trial-code}"
python="${CGC_FRESH_TRIAL_PYTHON:-python3}"
readonly dir python

# The pins: name, version and the SHA-256 of the file the registry serves.
readonly IMMER_VERSION="11.2.10"
readonly IMMER_SHA256="f8184e2750790534d2faf01137b39133586ef2c14fa504ee82409568dbb0b32d"
readonly SEMVER_VERSION="7.7.2"
readonly SEMVER_SHA256="290a29b26644b16ad172c21797c5523788b537a7784ffd175607c4812653504e"
readonly GOJSONNET_VERSION="0.22.0"
readonly GOJSONNET_SHA256="b00f09e019d403fc5fb0e691e043115dd84548e055c018638e22b6b7e9829d09"
readonly TEMPFILE_VERSION="3.27.0"
# The checksum Cargo.lock records for it (the .crate's SHA-256).
readonly TEMPFILE_SHA256="32497e9a4c7b38532efcdebeef879707aa9f794296a4f0244f6f69e9bc8574bd"
readonly PLUGGY_VERSION="1.6.0"
readonly PLUGGY_SHA256="e920276dd6813095e9377c0bc5566d94c932c33b27a3e3945d8389c374dd4746"
# The go-jsonnet packages taken (whole directories, tests left out).
readonly GO_DIRS=(ast formatter toolutils internal/errors internal/pass internal/formatter)

log() {
    printf 'install-trial-code.sh: %s\n' "$*" >&2
}

die() {
    log "ERROR: $*"
    exit 1
}

mkdir -p "${dir}"
dir_abs="$(cd "${dir}" && pwd)"
readonly dir_abs
stamp_file="${dir_abs}/.cgc-fresh-install-stamp"
expected="$(printf '%s\n' "${STAMP_FORMAT}" \
    "immer@${IMMER_VERSION} sha256:${IMMER_SHA256}" \
    "semver@${SEMVER_VERSION} sha256:${SEMVER_SHA256}" \
    "gojsonnet==${GOJSONNET_VERSION} sha256:${GOJSONNET_SHA256} ${GO_DIRS[*]}" \
    "tempfile ${TEMPFILE_VERSION} sha256:${TEMPFILE_SHA256}" \
    "pluggy==${PLUGGY_VERSION} sha256:${PLUGGY_SHA256}")"
readonly trees=(typescript javascript go rust python)

# One installer at a time (the test suite may run this concurrently).
exec 9>"${dir_abs}.install-lock"
flock 9

up_to_date() {
    [[ -f "${stamp_file}" && "$(cat "${stamp_file}")" == "${expected}" ]] || return 1
    local tree
    for tree in "${trees[@]}"; do
        [[ -d "${dir_abs}/${tree}" ]] || return 1
    done
}

if up_to_date; then
    log "up to date: ${dir_abs}"
    printf '%s\n' "${dir_abs}"
    exit 0
fi

rm -f "${stamp_file}"
work="$(mktemp -d "${dir_abs}.work.XXXXXX")"
trap 'rm -rf "${work}"' EXIT
mkdir -p "${work}/downloads"

# Fails unless FILE's SHA-256 is SHA.
check_sha256() {
    local file=$1 sha=$2 got
    got="$(sha256sum "${file}" | cut -d' ' -f1)"
    [[ "${got}" == "${sha}" ]] || die "${file##*/}: SHA-256 ${got}, pinned ${sha}"
}

# npm_package NAME VERSION SHA256: the package's tarball, unpacked into
# ${work}/NAME (its files under package/).
npm_package() {
    local name=$1 version=$2 sha=$3 tarball
    command -v npm >/dev/null 2>&1 || die "npm is not on PATH"
    log "downloading ${name}@${version} (npm)"
    tarball="$(cd "${work}/downloads" && npm pack --silent "${name}@${version}" | tail -n 1)"
    [[ -f "${work}/downloads/${tarball}" ]] || die "npm pack ${name}@${version} left no tarball"
    check_sha256 "${work}/downloads/${tarball}" "${sha}"
    mkdir -p "${work}/${name}"
    tar -xzf "${work}/downloads/${tarball}" -C "${work}/${name}"
}

# pypi_file NAME VERSION SHA256 KIND: the sdist (KIND sdist) or the wheel
# (KIND wheel) pip downloads, without dependencies; prints its path.
pypi_file() {
    local name=$1 version=$2 sha=$3 kind=$4 only file
    command -v "${python}" >/dev/null 2>&1 || die "interpreter '${python}' not found"
    if [[ "${kind}" == sdist ]]; then only=(--no-binary :all:); else only=(--only-binary :all:); fi
    log "downloading ${name}==${version} (PyPI, ${kind})"
    mkdir -p "${work}/downloads/${name}"
    "${python}" -m pip --disable-pip-version-check --no-input download --progress-bar off \
        --no-deps "${only[@]}" -d "${work}/downloads/${name}" "${name}==${version}" >&2 ||
        die "pip download ${name}==${version} failed (see pip's output above)"
    file="$(find "${work}/downloads/${name}" -maxdepth 1 -type f | head -n 1)"
    [[ -n "${file}" ]] || die "pip downloaded nothing for ${name}==${version}"
    check_sha256 "${file}" "${sha}"
    printf '%s\n' "${file}"
}

# copy_matching FROM TO FIND-ARGS...: the files under FROM that `find`
# selects, copied to TO with their relative paths.
copy_matching() {
    local from=$1 to=$2 rel
    shift 2
    while IFS= read -r -d '' rel; do
        mkdir -p "${to}/$(dirname "${rel}")"
        cp "${from}/${rel}" "${to}/${rel}"
    done < <(cd "${from}" && find . -type f "$@" -print0)
}

out="${work}/out"
mkdir -p "${out}"

# TypeScript: immer ships its sources.
npm_package immer "${IMMER_VERSION}" "${IMMER_SHA256}"
copy_matching "${work}/immer/package" "${out}/typescript" -path './src/*' -name '*.ts'

# JavaScript: semver, CommonJS.
npm_package semver "${SEMVER_VERSION}" "${SEMVER_SHA256}"
copy_matching "${work}/semver/package" "${out}/javascript" -name '*.js'

# Go: the gojsonnet sdist carries go-jsonnet's Go sources.
sdist="$(pypi_file gojsonnet "${GOJSONNET_VERSION}" "${GOJSONNET_SHA256}" sdist)"
mkdir -p "${work}/gojsonnet"
tar -xzf "${sdist}" -C "${work}/gojsonnet"
go_root="${work}/gojsonnet/gojsonnet-${GOJSONNET_VERSION}"
[[ -f "${go_root}/go.mod" ]] || die "the gojsonnet sdist has no go.mod"
mkdir -p "${out}/go"
cp "${go_root}/go.mod" "${out}/go/go.mod"
for sub in "${GO_DIRS[@]}"; do
    [[ -d "${go_root}/${sub}" ]] || die "the gojsonnet sdist has no ${sub}/"
    copy_matching "${go_root}" "${out}/go" -path "./${sub}/*" -name '*.go' ! -name '*_test.go' \
        ! -path "./${sub}/*/*"
done

# Rust: tempfile, as cargo downloaded it for this workspace (Cargo.lock
# pins the version and the checksum).
grep -A 3 '^name = "tempfile"$' "${repo_root}/Cargo.lock" | grep -q "^version = \"${TEMPFILE_VERSION}\"$" ||
    die "Cargo.lock does not pin tempfile ${TEMPFILE_VERSION}"
grep -A 3 '^name = "tempfile"$' "${repo_root}/Cargo.lock" | grep -q "^checksum = \"${TEMPFILE_SHA256}\"$" ||
    die "Cargo.lock's tempfile checksum is not ${TEMPFILE_SHA256}"
crate_glob="${CARGO_HOME:-${HOME}/.cargo}/registry/cache/*/tempfile-${TEMPFILE_VERSION}.crate"
crate="$(compgen -G "${crate_glob}" | head -n 1 || true)"
if [[ -z "${crate}" ]]; then
    log "tempfile ${TEMPFILE_VERSION} is not in cargo's cache: cargo fetch"
    (cd "${repo_root}" && cargo fetch --locked >&2) || die "cargo fetch failed"
    crate="$(compgen -G "${crate_glob}" | head -n 1 || true)"
    [[ -n "${crate}" ]] || die "cargo fetch left no tempfile-${TEMPFILE_VERSION}.crate"
fi
check_sha256 "${crate}" "${TEMPFILE_SHA256}"
mkdir -p "${work}/tempfile"
tar -xzf "${crate}" -C "${work}/tempfile"
crate_root="${work}/tempfile/tempfile-${TEMPFILE_VERSION}"
mkdir -p "${out}/rust"
cp "${crate_root}/Cargo.toml" "${out}/rust/Cargo.toml"
copy_matching "${crate_root}" "${out}/rust" -path './src/*' -name '*.rs'

# Python: pluggy's wheel.
wheel="$(pypi_file pluggy "${PLUGGY_VERSION}" "${PLUGGY_SHA256}" wheel)"
mkdir -p "${work}/pluggy"
"${python}" -m zipfile -e "${wheel}" "${work}/pluggy"
copy_matching "${work}/pluggy" "${out}/python" -path './pluggy/*' -name '*.py'

for tree in "${trees[@]}"; do
    count="$(find "${out}/${tree}" -type f | wc -l)"
    ((count > 0)) || die "no files for ${tree}"
    log "${tree}: ${count} files"
    rm -rf "${dir_abs:?}/${tree}"
    mv "${out}/${tree}" "${dir_abs}/${tree}"
done
printf '%s\n' "${expected}" >"${stamp_file}.tmp"
mv -f "${stamp_file}.tmp" "${stamp_file}"
log "installed: ${dir_abs}"
printf '%s\n' "${dir_abs}"
