#!/usr/bin/env python3
"""The rows pass over the naive corpus's row-wise families: each rewritten at several
(lanes, rows) points and verified on the CPU runtime against the original, at the spec's
check sizes (the bench size left out), with the tolerance the pass derives.

One line per (family, point): the verdict, each size's summary (the largest difference
seen, and at each size the derived bound evaluated there) and the comparison the pass asked for (`relative bound`: Higham's bound over the row length,
`exact`: bit-exact). Exit 1 if any
verification failed or could not tell.

    .venv/bin/python tools/rows_corpus.py [--only NAME] [--points 8x16,32x8,128x1]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from kxform.api import rewrite  # noqa: E402
from kxform.frontend.source import validate_bytes  # noqa: E402
from kxform.harness.spec import load_spec  # noqa: E402
from kxform.runtime.cpu import CpuOptions, CpuRuntime  # noqa: E402
from kxform.verify.differential import verify_pair  # noqa: E402

FAMILIES = ("layernorm", "rmsnorm", "softmax", "residual_layernorm", "embedding", "bias_grad", "cross_entropy",
            "matvec")
NAIVE = ROOT / "corpora" / "naive"


def run(family: str, lanes: int, rows: int, runtime: CpuRuntime) -> tuple[bool, str]:
    path = NAIVE / family / "naive.cu"
    spec = load_spec(NAIVE / family / "kxform.toml").kernel(f"{family}_naive")
    original = validate_bytes(str(path), path.read_bytes())
    result = rewrite(original.data, f"rows{{lanes={lanes},rows={rows}}}", path=str(path))
    if not result.changed:
        return False, "not rewritten: " + "; ".join(r.format() for r in result.remarks)
    policy = result.results[0].policy
    sizes = tuple(s.name for s in spec.check_sizes)
    report = verify_pair(original, validate_bytes(str(path), result.new_data), spec, runtime, sizes=sizes,
                         policy=policy)
    verdicts = ", ".join(s.summary() for s in report.sizes)
    return report.ok, f"{verdicts}; compare {policy.compare.describe()}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", action="append", default=[])
    parser.add_argument("--points", default="8x16,32x8,256x1")
    args = parser.parse_args()
    points = [tuple(int(v) for v in p.split("x")) for p in args.points.split(",")]
    runtime = CpuRuntime(CpuOptions(workers=2))
    failed = 0
    for family in args.only or FAMILIES:
        for lanes, rows in points:
            start = time.perf_counter()
            ok, detail = run(family, lanes, rows, runtime)
            failed += not ok
            print(f"{family:20s} lanes={lanes:<4d} rows={rows:<3d} {'ok  ' if ok else 'FAIL'} "
                  f"{time.perf_counter() - start:5.1f}s  {detail}", flush=True)
    print(f"{failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
