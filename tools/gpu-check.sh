#!/usr/bin/env bash
# Run kxform's GPU tests (pytest -m gpu) on a CUDA machine that has no internet.
#
# Run from the repository root with .device-cache/wheels filled by
# tools/fetch-gpu-deps.sh (on a machine with internet) and carried along. It:
#   1. makes a venv with --system-site-packages (reusing the machine's numpy/torch stack),
#   2. installs setuptools, wheel, pycuda's and kxform's dependencies offline from the wheels,
#   3. builds pycuda from its sdist against this machine's CUDA (cached: about 70 s once),
#   4. installs kxform (editable, offline) and runs `python -m pytest -m gpu -v "$@"`,
#      in parallel (`-n $KXFORM_GPU_JOBS`) when pytest-xdist is among the wheels,
#   5. runs `python tools/bench_verify.py --runtime gpu` (verification overhead figures);
#      its result is printed but does not change the test verdict.
# Writes junit.xml, pytest.log, bench_verify.txt and summary.txt to $OUT when it is set,
# and always ends with one line `gpu-check: PASSED|FAILED: N passed, N failed, ...`.
#
# Environment: PYTHON (default python3), CUDA_ROOT (default /usr/local/cuda),
# KXFORM_WHEELS (default .device-cache/wheels), KXFORM_GPU_CACHE (venv and built wheels,
# default build/gpu-check: git-ignored, kept between runs on the same machine),
# KXFORM_GPU_JOBS (pytest-xdist workers, default 8; 0 runs the tests in one process;
# ignored when the arguments already contain -n), KXFORM_GPU_BENCH (0 skips the
# benchmark), KXFORM_BENCH_TIMEOUT (seconds, default 300), KXFORM_GPU_SETUP_ONLY (1: stop once
# pycuda and kxform are installed in the venv, run no test; tools/gpu-bench.sh uses it).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
WHEELS="$(cd "${KXFORM_WHEELS:-.device-cache/wheels}" 2>/dev/null && pwd || true)"
WORK="${KXFORM_GPU_CACHE:-$ROOT/build/gpu-check}"
PYTHON="${PYTHON:-python3}"
export CUDA_ROOT="${CUDA_ROOT:-/usr/local/cuda}"
REPORT_DIR="${OUT:-$WORK/report}"
DEPS=(pytest hypothesis "tree-sitter>=0.25" "tree-sitter-cuda>=0.21" "libclang>=18.1" "networkx>=3.0" "numpy>=1.24"
      "z3-solver>=4.12" "pathspec>=0.12" "tqdm>=4.66" pytools platformdirs mako siphash24)
# Installed when among the wheels (or taken from the machine's own site-packages): the
# lockfile's writer and file lock, and scipy (the search's model strategy).
OPTIONAL_DEPS=("tomli-w>=1.0" "filelock>=3.12" "scipy>=1.10")
XDIST=(pytest-xdist execnet)  # optional: older wheel folders lack them

mkdir -p "$WORK" "$REPORT_DIR"
SUMMARY="$REPORT_DIR/summary.txt"

say() { echo "gpu-check: $*"; }
finish() {  # finish STATUS MESSAGE EXIT_CODE
    echo "gpu-check: $1: $2" | tee "$SUMMARY"
    exit "$3"
}
die() { echo "gpu-check: error: $*" >&2; finish FAILED "$*" 1; }

# ------------------------------------------------------------------ preconditions
[[ -n "$WHEELS" && -d "$WHEELS" ]] || die "no wheels folder (${KXFORM_WHEELS:-.device-cache/wheels}): run tools/fetch-gpu-deps.sh where there is internet and carry .device-cache along"
shopt -s nullglob
sdists=("$WHEELS"/pycuda-*.tar.gz)
shopt -u nullglob
(( ${#sdists[@]} == 1 )) || die "expected exactly one pycuda-*.tar.gz in $WHEELS, found ${#sdists[@]}"
PYCUDA_SDIST="${sdists[0]}"
PYCUDA_VERSION="$(basename "$PYCUDA_SDIST" .tar.gz)"; PYCUDA_VERSION="${PYCUDA_VERSION#pycuda-}"

if ! command -v nvcc >/dev/null 2>&1; then
    [[ -x "$CUDA_ROOT/bin/nvcc" ]] || die "nvcc not found on PATH or in $CUDA_ROOT/bin (set CUDA_ROOT)"
    export PATH="$CUDA_ROOT/bin:$PATH"
fi
command -v "$PYTHON" >/dev/null 2>&1 || die "python not found: $PYTHON (set PYTHON)"
if command -v nvidia-smi >/dev/null 2>&1; then
    say "device: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -1 || echo unknown)"
fi
say "nvcc: $(nvcc --version | grep -o 'release [0-9.]*' | head -1), python: $("$PYTHON" -c 'import sys; print(sys.version.split()[0])')"

# ------------------------------------------------------------------------- venv
VENV="$WORK/venv"
PY="$VENV/bin/python"
if [[ ! -x "$PY" ]]; then
    say "creating $VENV"
    if ! "$PYTHON" -m venv --system-site-packages "$VENV" >"$WORK/venv.log" 2>&1; then
        # A base Python without ensurepip: take pip from the parent's site-packages below.
        rm -rf "$VENV"
        "$PYTHON" -m venv --system-site-packages --without-pip "$VENV" >>"$WORK/venv.log" 2>&1 \
            || die "cannot create a venv with $PYTHON (see $WORK/venv.log)"
    fi
    # --system-site-packages exposes the *base* interpreter's packages. When $PYTHON is a
    # venv itself (the GPU image's python3 is), its packages (numpy, pytest, pip) live
    # elsewhere: list them in a .pth file, after the new venv's own site-packages.
    site_dir="$("$PY" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
    "$PYTHON" -c 'import site; print("\n".join(site.getsitepackages()))' > "$site_dir/_kxform_parent_site.pth"
fi
"$PY" -m pip --version >/dev/null 2>&1 || die "pip is not available in $VENV"
PIP=("$PY" -m pip --disable-pip-version-check --no-input)
OFFLINE=(--no-index --find-links "$WHEELS")

say "installing build tools and dependencies offline"
"${PIP[@]}" install --quiet "${OFFLINE[@]}" "setuptools>=68" wheel >"$WORK/pip.log" 2>&1 \
    || { tail -20 "$WORK/pip.log"; die "offline install of setuptools/wheel failed (see $WORK/pip.log)"; }
"${PIP[@]}" install --quiet "${OFFLINE[@]}" "${DEPS[@]}" >>"$WORK/pip.log" 2>&1 \
    || { tail -20 "$WORK/pip.log"; die "offline install of dependencies failed (see $WORK/pip.log)"; }
for dep in "${OPTIONAL_DEPS[@]}"; do
    "${PIP[@]}" install --quiet "${OFFLINE[@]}" "$dep" >>"$WORK/pip.log" 2>&1 \
        || say "note: $dep is neither among the wheels nor installed: what needs it is skipped"
done
"${PIP[@]}" install --quiet "${OFFLINE[@]}" "${XDIST[@]}" >>"$WORK/pip.log" 2>&1 \
    || say "pytest-xdist is not among the wheels (re-run tools/fetch-gpu-deps.sh): tests run in one process"

# ----------------------------------------------------------------------- pycuda
BUILT="$WORK/wheels"
mkdir -p "$BUILT"
shopt -s nullglob
built=("$BUILT"/pycuda-"$PYCUDA_VERSION"-*.whl)
shopt -u nullglob
if (( ${#built[@]} == 0 )); then
    say "building pycuda $PYCUDA_VERSION against $CUDA_ROOT (about 70 s, once per machine)"
    started=$SECONDS
    # configure.py writes siteconf.py, so the CUDA root is $CUDA_ROOT whatever nvcc is
    # first on PATH; CURAND (unused by kxform) is left out where its headers are missing.
    SRC="$WORK/pycuda-src"
    rm -rf "$SRC" && mkdir -p "$SRC"
    tar xzf "$PYCUDA_SDIST" -C "$SRC" --strip-components=1 || die "cannot unpack $PYCUDA_SDIST"
    configure=(--cuda-root="$CUDA_ROOT")
    [[ -f "$CUDA_ROOT/include/curand.h" ]] || configure+=(--no-cuda-enable-curand)
    (cd "$SRC" && "$PY" configure.py "${configure[@]}") >"$WORK/pycuda-build.log" 2>&1 \
        || die "pycuda's configure.py failed (log: $WORK/pycuda-build.log)"
    if ! "${PIP[@]}" wheel "${OFFLINE[@]}" --no-build-isolation --no-deps -w "$BUILT" "$SRC" \
            >>"$WORK/pycuda-build.log" 2>&1; then
        tail -30 "$WORK/pycuda-build.log"
        cp "$WORK/pycuda-build.log" "$REPORT_DIR/" 2>/dev/null || true
        die "pycuda $PYCUDA_VERSION did not build (log: $WORK/pycuda-build.log)"
    fi
    say "pycuda built in $((SECONDS - started)) s"
else
    say "reusing ${built[0]}"
fi
"${PIP[@]}" install --quiet --no-index --find-links "$BUILT" --find-links "$WHEELS" --no-deps --force-reinstall \
    "pycuda==$PYCUDA_VERSION" >>"$WORK/pip.log" 2>&1 || die "installing the built pycuda wheel failed (see $WORK/pip.log)"
"$PY" -c 'import pycuda.driver as d; d.init(); print("gpu-check: pycuda sees", d.Device.count(), "device(s)")' \
    || die "pycuda is installed but cannot initialise CUDA"

# ----------------------------------------------------------------------- kxform
if "${PIP[@]}" install --quiet --no-index --no-deps --no-build-isolation -e . >>"$WORK/pip.log" 2>&1; then
    say "kxform installed (editable)"
else
    say "warning: editable install failed (see $WORK/pip.log); testing the tree through PYTHONPATH"
    export PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}"
fi

if [[ "${KXFORM_GPU_SETUP_ONLY:-0}" == 1 ]]; then
    say "setup only: $PY is ready (pycuda and kxform installed)"
    exit 0
fi

# ------------------------------------------------------------------------ tests
PARALLEL=()
if "$PY" -c 'import xdist' >/dev/null 2>&1; then
    PARALLEL=(-n "${KXFORM_GPU_JOBS:-8}")
    for arg in "$@"; do
        case "$arg" in -n|-n[0-9]*|--numprocesses|--numprocesses=*) PARALLEL=() ;; esac
    done
fi
say "running: python -m pytest -m gpu -v ${PARALLEL[*]+${PARALLEL[*]} }$*"
set +e
PYTHONUNBUFFERED=1 "$PY" -m pytest -m gpu -v -rs --junitxml="$REPORT_DIR/junit.xml" ${PARALLEL[@]+"${PARALLEL[@]}"} "$@" 2>&1 \
    | tee "$REPORT_DIR/pytest.log"
status=${PIPESTATUS[0]}
set -e

# -------------------------------------------------------------------- benchmark
bench_line=""
if [[ "${KXFORM_GPU_BENCH:-1}" != 0 ]]; then
    say "running: python tools/bench_verify.py --runtime gpu"
    limit=()
    command -v timeout >/dev/null 2>&1 && limit=(timeout "${KXFORM_BENCH_TIMEOUT:-300}")
    set +e
    PYTHONUNBUFFERED=1 ${limit[@]+"${limit[@]}"} "$PY" tools/bench_verify.py --runtime gpu 2>&1 | tee "$REPORT_DIR/bench_verify.txt"
    bench_status=${PIPESTATUS[0]}
    set -e
    last="$(grep -v '^[[:space:]]*$' "$REPORT_DIR/bench_verify.txt" | tail -1 || true)"
    if (( bench_status == 0 )); then
        bench_line="bench_verify: ok: $last"
    else
        bench_line="bench_verify: FAILED (exit $bench_status): $last"
    fi
    say "$bench_line"
fi

counts="$("$PY" - "$REPORT_DIR/junit.xml" <<'PYEOF'
import sys
import xml.etree.ElementTree as ET

try:
    root = ET.parse(sys.argv[1]).getroot()
except (OSError, ET.ParseError):
    print("0 0 0 0")
    raise SystemExit
suites = [root] if root.tag == "testsuite" else list(root.iter("testsuite"))
total = sum(int(s.get("tests", 0)) for s in suites)
failed = sum(int(s.get("failures", 0)) for s in suites)
errors = sum(int(s.get("errors", 0)) for s in suites)
skipped = sum(int(s.get("skipped", 0)) for s in suites)
print(total - failed - errors - skipped, failed, errors, skipped)
PYEOF
)"
read -r passed failed errors skipped <<<"$counts"
line="$passed passed, $failed failed, $errors errors, $skipped skipped (pytest exit $status)"
if (( status != 0 )); then
    finish FAILED "$line" "$status"
elif (( passed == 0 )); then
    finish FAILED "$line: no GPU test passed (all skipped? see the skip reasons above)" 1
fi
finish PASSED "$line" 0
