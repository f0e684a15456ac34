#!/usr/bin/env bash
# Run the GPU benchmarks of issue 15 on a CUDA machine with no internet, all with --quick:
#   tools/bench_swizzle_select.py  every 2-D corpus kernel: swizzle sweep vs the default proposer
#   tools/bench_l2_ncu.py          the L2/DRAM model against ncu (hit rate, DRAM bytes, Spearman)
#   tools/bench_integrity.py       the timer's carveout cap, output re-check, cheating kernels
# and, when BENCHES names it (BENCHES=pipeline), tools/bench_pipeline.py: every naive kernel
# of corpora/naive against kxform tune and its expert version (PIPELINE_EVALS=40 evaluations
# per kernel, PIPELINE_KERNELS=a,b to select pairs).
#
# Run from the repository root with .device-cache/wheels carried along (as for
# tools/gpu-check.sh). The environment is gpu-check.sh's: this script runs it with
# KXFORM_GPU_SETUP_ONLY=1 (venv, pycuda built offline, kxform installed; no tests), then the
# three benchmarks in that venv, one after the other, each under a time budget (it starts
# no new kernel after it) and a hard limit (timeout). Every line is printed; with $OUT set,
# each benchmark's JSON (NAME.json), its printed table (NAME.txt), ncu's raw CSV logs
# (ncu-raw/) and summary.txt land there (else in build/gpu-check/bench). Ends with one line
# per benchmark and `gpu-bench: done`; the exit status is the worst of the three
# (0 ran clean, 1 something did not verify/measure/profile, 2 no GPU or a usage error,
# 124 a hard limit hit).
#
# Environment: as gpu-check.sh (PYTHON, CUDA_ROOT, KXFORM_WHEELS, KXFORM_GPU_CACHE), plus
# KXFORM_BENCH_PYTHON (an interpreter that already has pycuda and kxform: no setup),
# KXFORM_BENCH_ARGS (extra arguments for every benchmark, e.g. "--hw h100-sxm"),
# BENCHES (which to run, default "select ncu integrity"), SELECT_KERNELS and NCU_KERNELS
# (comma-separated manifest names, or "all" for every 2-D corpus kernel; default: all for
# the sweep, the four quick kernels for ncu), and per benchmark a budget and a hard limit
# in seconds:
#   SELECT_BUDGET=170 SELECT_LIMIT=240  NCU_BUDGET=60 NCU_LIMIT=110  INTEGRITY_LIMIT=60
#   PIPELINE_BUDGET=420 PIPELINE_LIMIT=540
set -uo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
WORK="${KXFORM_GPU_CACHE:-$ROOT/build/gpu-check}"
REPORT_DIR="${OUT:-$WORK/bench}"
mkdir -p "$REPORT_DIR"
SUMMARY="$REPORT_DIR/summary.txt"
: > "$SUMMARY"
say() { echo "gpu-bench: $*" | tee -a "$SUMMARY"; }

started=$SECONDS
if [[ -n "${KXFORM_BENCH_PYTHON:-}" ]]; then
    PY="$KXFORM_BENCH_PYTHON"
    say "using $PY as it is (KXFORM_BENCH_PYTHON): no setup"
else
    say "setting up through tools/gpu-check.sh (KXFORM_GPU_SETUP_ONLY=1)"
    if ! KXFORM_GPU_SETUP_ONLY=1 OUT="$REPORT_DIR/setup" bash "$ROOT/tools/gpu-check.sh"; then
        say "FAILED: tools/gpu-check.sh could not set up pycuda and kxform (see above)"
        exit 2
    fi
    PY="$WORK/venv/bin/python"
fi
[[ -x "$PY" ]] || { say "FAILED: no venv python at $PY"; exit 2; }
export CUDA_ROOT="${CUDA_ROOT:-/usr/local/cuda}"
command -v nvcc >/dev/null 2>&1 || export PATH="$CUDA_ROOT/bin:$PATH"
export PYTHONUNBUFFERED=1
say "setup took $((SECONDS - started)) s; python $PY"
command -v nvidia-smi >/dev/null 2>&1 && say "device: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -1)"

read -r -a EXTRA <<<"${KXFORM_BENCH_ARGS:-}"
worst=0
results=()

bench() {  # bench NAME LIMIT ARGS...
    local name="$1" limit="$2"
    shift 2
    local t0=$SECONDS
    say "running: python tools/$name.py --quick $* (limit ${limit} s)"
    timeout --kill-after=10 "$limit" "$PY" "tools/$name.py" --quick --out "$REPORT_DIR/$name.json" "$@" \
        ${EXTRA[@]+"${EXTRA[@]}"} 2>&1 | tee "$REPORT_DIR/$name.txt"
    local status=${PIPESTATUS[0]}
    local last
    last="$(grep -v '^[[:space:]]*$' "$REPORT_DIR/$name.txt" | tail -1)"
    results+=("$name: exit $status in $((SECONDS - t0)) s: $last")
    (( status > worst )) && worst=$status
}

kernels_arg() {  # kernels_arg VALUE: --kernels VALUE unless empty; "all" lists every 2-D kernel
    case "$1" in
        "") ;;
        all) echo "--kernels=$("$PY" -c 'from kxform.bench.gpu import corpus_2d; print(",".join(k.name for k in corpus_2d()))')" ;;
        *) echo "--kernels=$1" ;;
    esac
}
BENCHES="${BENCHES:-select ncu integrity}"
for name in $BENCHES; do
    case "$name" in
        select) bench bench_swizzle_select "${SELECT_LIMIT:-240}" --budget-s "${SELECT_BUDGET:-170}" \
                    $(kernels_arg "${SELECT_KERNELS:-}") ;;
        ncu) bench bench_l2_ncu "${NCU_LIMIT:-110}" --budget-s "${NCU_BUDGET:-60}" --raw "$REPORT_DIR/ncu-raw" \
                 $(kernels_arg "${NCU_KERNELS:-}") ;;
        integrity) bench bench_integrity "${INTEGRITY_LIMIT:-60}" ;;
        pipeline) bench bench_pipeline "${PIPELINE_LIMIT:-540}" --budget-s "${PIPELINE_BUDGET:-420}" \
                      --budget "${PIPELINE_EVALS:-40}" ${PIPELINE_KERNELS:+--kernels="$PIPELINE_KERNELS"} ;;
        *) say "unknown benchmark '$name' in BENCHES (select, ncu, integrity, pipeline)"; worst=2 ;;
    esac
done

for line in "${results[@]}"; do say "$line"; done
say "done in $((SECONDS - started)) s (exit $worst)"
exit "$worst"
