"""The smem-tile pass over the naive corpus: what it tiles and refuses, and every rewrite verified.

For each entry of corpora/naive/index.toml: the pass's verdict (or
its reason for refusing), then `kxform apply --check --verify cpu` on a copy (the real
pipeline: constraints, ptxas, the barrier check, re-parse, idempotence, the differential
run against the original at its own launch on the CPU runtime) at the pass's default
configuration and at `--points` of its other candidate shapes. Then `smem-tile,swizzle`
in one pipeline on the GEMM. Prints a table; exit 1 if any verification failed.

    .venv/bin/python tools/smem_tile_corpus.py [--points 3] [--hw h100] [--only NAME]
"""

from __future__ import annotations

import argparse
import sys
import time


from corpus_apply import ROOT, apply_config, naive_pairs  # noqa: E402

from kxform.api import explain  # noqa: E402
from kxform.passes.smem_tile.smem_tile import CANDIDATES  # noqa: E402

NAME = "smem-tile"


def _spec(config: dict[str, int]) -> str:
    return f"{NAME}{{{','.join(f'{k}={v}' for k, v in config.items())}}}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--points", type=int, default=3, help="non-default configurations per kernel (default 3)")
    parser.add_argument("--hw", default="h100")
    parser.add_argument("--only", action="append", default=[], help="only these manifest entries")
    args = parser.parse_args()
    failures = 0
    started = time.perf_counter()
    for entry in naive_pairs():
        if args.only and entry["name"] not in args.only:
            continue
        path = ROOT / "corpora" / "naive" / entry["naive"]
        kernel = entry["naive_kernel"]
        info = explain(path.read_bytes(), kernel, NAME, path=str(path), hw=args.hw)
        if info["status"] != "applicable":
            print(f"{entry['name']:<14} {kernel:<14} refused   {info['reasons'][0][:140]}")
            continue
        print(f"{entry['name']:<14} {kernel:<14} tiled     {len(info['constraints'])} constraints")
        for label in ["defaults"] + [_spec(c) for c in CANDIDATES[: args.points]]:
            t0 = time.perf_counter()
            applied = apply_config(path, NAME if label == "defaults" else label, kernel, args.hw)
            failures += not applied.verified
            print(f"{'':<30}{label:<52} {applied.line()} ({time.perf_counter() - t0:.0f} s)")
    if not args.only or "gemm" in args.only:
        path = ROOT / "corpora" / "naive" / "gemm" / "naive.cu"
        applied = apply_config(path, f"{NAME},swizzle", "gemm_naive", args.hw)
        failures += not applied.verified
        print(f"{'gemm':<14} {'gemm_naive':<14} {NAME},swizzle: {applied.line()}")
    print(f"{failures} failure(s); {time.perf_counter() - started:.0f} s")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
