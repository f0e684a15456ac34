#!/usr/bin/env python3
"""The rows pass over the naive corpus's row-wise families: each rewritten at several
(lanes, rows) points through `kxform apply --check --verify cpu` (tools/corpus_apply.py) and
verified on the CPU runtime against the original, at the spec's
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


from corpus_apply import ROOT, apply_config  # noqa: E402

FAMILIES = (
    "layernorm",
    "rmsnorm",
    "softmax",
    "residual_layernorm",
    "embedding",
    "bias_grad",
    "cross_entropy",
    "matvec",
)
NAIVE = ROOT / "corpora" / "naive"


def run(family: str, lanes: int, rows: int) -> tuple[bool, str]:
    """Whether `rows{lanes,rows}` of the family's naive kernel verified, and the evidence
    (the verify record's sizes and policy, else why it stopped)."""
    applied = apply_config(NAIVE / family / "naive.cu", f"rows{{lanes={lanes},rows={rows}}}", f"{family}_naive", "h100")
    if applied.verify is not None:
        return applied.verified, applied.verify.detail
    return False, f"{applied.label}: {applied.reason}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", action="append", default=[])
    parser.add_argument("--points", default="8x16,32x8,256x1")
    args = parser.parse_args()
    points = [tuple(int(v) for v in p.split("x")) for p in args.points.split(",")]
    failed = 0
    for family in args.only or FAMILIES:
        for lanes, rows in points:
            start = time.perf_counter()
            ok, detail = run(family, lanes, rows)
            failed += not ok
            print(
                f"{family:20s} lanes={lanes:<4d} rows={rows:<3d} {'ok  ' if ok else 'FAIL'} "
                f"{time.perf_counter() - start:5.1f}s  {detail}",
                flush=True,
            )
    print(f"{failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
