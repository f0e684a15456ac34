#!/usr/bin/env python3
"""How `kxform apply` cost grows with the number of kernels in one file.

Generates one file of N small 2-D kernels (each reads blockIdx.x/.y, a quarter of them
through a `__device__` helper, a host function launching every eighth one), runs
`kxform apply --pass swizzle --verify static --check` over it in-process (the diff, which
only printing needs, is left out), and prints the
wall time and the time per kernel at each N. Linear cost shows as a flat per-kernel
column; the ratio of the last to the first per-kernel figure is printed at the end.

    python tools/bench_apply_scaling.py                 # 200 and 800 kernels, default swizzle
    python tools/bench_apply_scaling.py --sizes 200,400,800 --pattern grouped
    python tools/bench_apply_scaling.py --profile 800   # cProfile's top 25 at one size

No target: a timed figure belongs here, not in a unit test (tests/test_apply_scaling.py
counts the calls of the parts that were quadratic).
"""

from __future__ import annotations

import argparse
import cProfile
import io
import os
import pstats
import sys
import tempfile
import time
from pathlib import Path


def kernel_file(n: int) -> str:
    parts = ["#include <cuda_runtime.h>\n"]
    for i in range(n):
        if i % 4 == 0:
            parts.append(f"__device__ int row_{i}(int t) {{ return blockIdx.y * 16 + t; }}\n")
            row = f"row_{i}(threadIdx.y)"
        else:
            row = "blockIdx.y * 16 + threadIdx.y"
        parts.append(
            f"__global__ void k{i}(float* out, const float* in, int n) {{\n"
            f"    int x = blockIdx.x * 16 + threadIdx.x;\n    int y = {row};\n"
            f"    if (x < n && y < n) out[y * n + x] = in[x * n + y] * {i % 7 + 1}.0f;\n}}\n"
        )
    parts.append("void launch_all(float* out, const float* in, int n) {\n    dim3 b(16, 16), g(n / 16, n / 16);\n")
    parts += [f"    k{i}<<<g, b>>>(out, in, n);\n" for i in range(0, n, 8)]
    parts.append("}\n")
    return "".join(parts)


def run_once(n: int, pattern: str | None, workdir: Path) -> float:
    from kxform.cli.main import main

    path = workdir / f"many_{n}.cu"
    path.write_text(kernel_file(n))
    argv = [
        "apply",
        "--pass",
        "swizzle",
        "--verify",
        "static",
        "--check",
        "-q",
        "-j",
        "1",
        "--log",
        str(workdir / f"run_{n}.jsonl"),
        str(path),
    ]
    if pattern:
        argv[3:3] = ["--pattern", pattern]
    out = sys.stdout
    sys.stdout = io.StringIO()  # the diff
    try:
        start = time.perf_counter()
        code = main(argv)
        elapsed = time.perf_counter() - start
    finally:
        sys.stdout = out
    if code not in (0, 1):
        raise SystemExit(f"apply exited {code} on {n} kernels")
    return elapsed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="200,800", help="kernel counts (default 200,800)")
    parser.add_argument("--pattern", help="force a swizzle pattern (default: the pass's default)")
    parser.add_argument("--profile", type=int, metavar="N", help="profile one run of N kernels instead")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="kxform-scaling-") as tmp:
        os.environ.setdefault("KXFORM_CACHE_DIR", str(Path(tmp) / "cache"))
        if args.profile:
            profile = cProfile.Profile()
            profile.enable()
            run_once(args.profile, args.pattern, Path(tmp))
            profile.disable()
            pstats.Stats(profile).sort_stats(os.environ.get("KXFORM_PROFILE_SORT", "cumulative")).print_stats(25)
            return 0
        sizes = [int(s) for s in args.sizes.split(",")]
        run_once(8, args.pattern, Path(tmp))  # imports, parser and caches warm
        print(f"{'kernels':>8} {'wall s':>8} {'ms/kernel':>10}")
        per = []
        for n in sizes:
            elapsed = run_once(n, args.pattern, Path(tmp))
            per.append(elapsed / n)
            print(f"{n:>8} {elapsed:>8.2f} {1e3 * elapsed / n:>10.2f}")
        print(f"per-kernel cost, {sizes[-1]} vs {sizes[0]} kernels: {per[-1] / per[0]:.2f}x (1.00x = linear)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
