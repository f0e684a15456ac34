#!/usr/bin/env bash
# tools/bench_pipeline.py on every GPU of this host at once: the naive kernels are dealt
# round-robin (in the manifest's order) into one share per GPU, each share runs in its own
# process pinned to its GPU with CUDA_VISIBLE_DEVICES, and the shares' results are joined
# by `bench_pipeline.py --merge` into one table and one JSON. Each kernel is still timed
# and tuned on one GPU, against its original and expert on that same GPU.
#
#   tools/gpu-pipeline.sh OUTDIR [bench_pipeline arguments...]
#
# Writes OUTDIR/share-N.json and share-N.log per GPU, and OUTDIR/pipeline.json and
# pipeline.txt (the merged table). Exit status: bench_pipeline's worst (0 all measured,
# 1 something did not verify or measure, 2 usage or no GPU).
#
# Environment: KXFORM_BENCH_PYTHON (an interpreter with pycuda and kxform; default the venv
# tools/gpu-check.sh makes, build/gpu-check/venv/bin/python), GPUS (how many GPUs to use;
# default: every GPU nvidia-smi lists), PIPELINE_KERNELS (comma-separated pairs; default all).
set -uo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
if (( $# < 1 )); then
    echo "usage: tools/gpu-pipeline.sh OUTDIR [bench_pipeline arguments...]" >&2
    exit 2
fi
OUTDIR="$1"
shift
PY="${KXFORM_BENCH_PYTHON:-$ROOT/build/gpu-check/venv/bin/python}"
[[ -x "$PY" ]] || { echo "gpu-pipeline: no python at $PY (run tools/gpu-check.sh with KXFORM_GPU_SETUP_ONLY=1 first)" >&2; exit 2; }
GPUS="${GPUS:-$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ')}"
[[ "$GPUS" =~ ^[0-9]+$ ]] && (( GPUS >= 1 )) || { echo "gpu-pipeline: no GPU found (GPUS=$GPUS)" >&2; exit 2; }
mkdir -p "$OUTDIR"

mapfile -t SHARES < <("$PY" - "$GPUS" "${PIPELINE_KERNELS:-}" <<'EOF'
import sys
from kxform.bench.naive_pairs import load_pairs
count, chosen = int(sys.argv[1]), tuple(n for n in sys.argv[2].split(",") if n)
names = [p.name for p in load_pairs(chosen)]
for i in range(count):
    print(",".join(names[i::count]))
EOF
)
(( ${#SHARES[@]} == GPUS )) || { echo "gpu-pipeline: could not read the corpus's pairs" >&2; exit 2; }

pids=()
outputs=()
for (( i = 0; i < GPUS; i++ )); do
    [[ -n "${SHARES[$i]}" ]] || continue
    echo "gpu-pipeline: GPU $i: ${SHARES[$i]}"
    CUDA_VISIBLE_DEVICES="$i" "$PY" tools/bench_pipeline.py --kernels "${SHARES[$i]}" \
        --out "$OUTDIR/share-$i.json" "$@" >"$OUTDIR/share-$i.log" 2>&1 &
    pids+=("$!")
    outputs+=("$OUTDIR/share-$i.json")
done
worst=0
for pid in "${pids[@]}"; do
    wait "$pid"
    status=$?
    (( status > worst )) && worst=$status
done
present=()
for f in "${outputs[@]}"; do [[ -s "$f" ]] && present+=("$f"); done
(( ${#present[@]} )) || { echo "gpu-pipeline: no share wrote results (see $OUTDIR/share-*.log)" >&2; exit 2; }
"$PY" tools/bench_pipeline.py --merge "${present[@]}" --out "$OUTDIR/pipeline.json" | tee "$OUTDIR/pipeline.txt"
merged=${PIPESTATUS[0]}
(( merged > worst )) && worst=$merged
echo "gpu-pipeline: done (exit $worst)"
exit "$worst"
