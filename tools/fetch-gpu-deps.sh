#!/usr/bin/env bash
# Download everything tools/gpu-check.sh installs on a GPU machine that has no internet.
#
# Run from anywhere on a machine WITH internet (PyPI). Fills .device-cache/wheels with:
#   - the pycuda source distribution (pycuda ships no Linux wheels; gpu-check.sh builds it
#     against the GPU machine's own CUDA, which is the point: no CUDA version mismatch),
#   - wheels for CPython 3.12 / manylinux x86_64 (the GPU machines' Python) of pycuda's
#     dependencies, kxform's runtime and test dependencies (pytest-xdist and execnet
#     included, for `pytest -n`), and setuptools + wheel so the offline builds of pycuda
#     and kxform need no network.
# The folder is git-ignored; it is replaced as a whole so old versions never pile up
# (two versions of one package make an offline install ambiguous).
#
# Environment: PYTHON (default python3) runs pip; KXFORM_WHEELS overrides the folder;
# PYCUDA_VERSION pins pycuda (default below, known to build with CUDA 13);
# TARGET_PY (default 3.12) is the GPU machine's Python version; MAX_MB (default 60) caps the
# folder's size.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
DEST="${KXFORM_WHEELS:-$ROOT/.device-cache/wheels}"
PYTHON="${PYTHON:-python3}"
PYCUDA_VERSION="${PYCUDA_VERSION:-2026.1}"
TARGET_PY="${TARGET_PY:-3.12}"
MAX_MB="${MAX_MB:-60}"

# pycuda's own runtime dependencies (pytools pulls platformdirs, siphash24 and
# typing-extensions; mako pulls markupsafe). siphash24 has a compiled core: it must be
# a cp312 manylinux wheel, which is why everything below is fetched for that platform.
PYCUDA_DEPS=(pytools platformdirs mako markupsafe siphash24 typing-extensions)
# kxform's runtime dependencies (pyproject.toml; tomli is not needed on 3.11+).
# numpy is not fetched (about 16 MB: GPU images have it, and pycuda builds against theirs;
# WITH_NUMPY=1 fetches it); z3-solver (the remap proofs; about 29 MB) is.
# The GPU image already holds networkx, pathspec, tqdm, filelock and the test runner (pytest,
# pytest-xdist, execnet, hypothesis, iniconfig, pluggy, packaging, sortedcontainers, attrs),
# (the device tool's KINDS.md lists the image's packages): gpu-check.sh
# builds its venv with --system-site-packages, so they are not carried. z3-solver is pinned to
# 4.15.4 (29 MB; 5.x is 39 MB, and the remap proofs decide on both: docs/trust.md).
RUNTIME_DEPS=("tree-sitter>=0.25" "tree-sitter-cuda>=0.21" "libclang>=18.1" "z3-solver==4.15.4.0" "tomli-w>=1.0")
[[ "${WITH_NUMPY:-0}" == 1 ]] && RUNTIME_DEPS+=("numpy>=1.24")
# scipy (the search's model strategy; about 35 MB) is fetched only with WITH_SCIPY=1: GPU
# images usually have it, and the carried folder has a size limit.
[[ "${WITH_SCIPY:-0}" == 1 ]] && RUNTIME_DEPS+=("scipy>=1.10")
# Test runner (pytest-xdist and its execnet: parallel GPU suite) and the build backend
# for offline builds.
TEST_DEPS=()
BUILD_DEPS=("setuptools>=77" wheel)  # kxform's build backend needs 77+, whatever the image has

die() { echo "fetch-gpu-deps: error: $*" >&2; exit 1; }

"$PYTHON" -m pip --version >/dev/null 2>&1 || die "'$PYTHON -m pip' does not work; set PYTHON"

STAGE="$(mktemp -d "${TMPDIR:-/tmp}/kxform-wheels.XXXXXX")"
trap 'rm -rf "$STAGE"' EXIT

echo "fetch-gpu-deps: pycuda==$PYCUDA_VERSION (source distribution)"
# --no-binary names pycuda alone: its build backend (setuptools, wheel, numpy) still comes
# as wheels while pip reads the sdist's metadata.
"$PYTHON" -m pip download --quiet --no-deps --no-binary pycuda -d "$STAGE" "pycuda==$PYCUDA_VERSION" \
    || die "could not download the pycuda $PYCUDA_VERSION sdist"

echo "fetch-gpu-deps: wheels for CPython $TARGET_PY, manylinux x86_64"
"$PYTHON" -m pip download --quiet --only-binary :all: \
    --implementation cp --python-version "$TARGET_PY" \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 \
    --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
    --platform manylinux1_x86_64 --platform any \
    -d "$STAGE" \
    "${PYCUDA_DEPS[@]}" "${RUNTIME_DEPS[@]}" "${TEST_DEPS[@]}" "${BUILD_DEPS[@]}" \
    || die "could not download the wheels (see pip's message above)"

# One version per package, or the offline install cannot choose.
dupes="$(cd "$STAGE" && ls | sed -E 's/-[0-9].*$//' | tr 'A-Z_' 'a-z-' | sort | uniq -d)"
[[ -z "$dupes" ]] || die "several versions downloaded of: $dupes"

size_mb=$(( $(du -sk "$STAGE" | cut -f1) / 1024 ))
(( size_mb < MAX_MB )) || die "downloads take ${size_mb} MB, over the ${MAX_MB} MB budget"

mkdir -p "$(dirname "$DEST")"
rm -rf "$DEST"
mv "$STAGE" "$DEST"
trap - EXIT
chmod 755 "$DEST"

count=$(ls "$DEST" | wc -l)
echo "fetch-gpu-deps: $count files, ${size_mb} MB in $DEST"
ls -1 "$DEST" | sed 's/^/  /'
