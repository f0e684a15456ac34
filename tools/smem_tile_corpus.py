"""The smem-tile pass over the naive corpus: what it tiles and refuses, and every rewrite verified.

For each entry of corpora/naive/index.toml: the pass's verdict (or
its reason for refusing), then `kxform apply --check --verify cpu` on a copy (the real
pipeline: constraints, ptxas, the barrier check, re-parse, idempotence, the differential
run against the original at its own launch on the CPU runtime) at the pass's default
configuration and at `--points` of its other candidate shapes. Then `smem-tile,swizzle`
in one pipeline on the GEMM. Prints a table; exit 1 if any verification failed.

`--space NAME` instead takes every point of the pass's tuning space (what `kxform tune`
times) for that entry's naive kernel on `--hw`: each is rewritten through the pass's
checks (the derived constraints, nvcc and ptxas for the profile's architecture: registers
and spills, the barrier check, re-parse, idempotence) and one line gives its registers;
`--verify` also runs each through the CPU differential run. Exit 1 if any point fails.

    .venv/bin/python tools/smem_tile_corpus.py [--points 3] [--hw h100] [--only NAME]
    .venv/bin/python tools/smem_tile_corpus.py --space gemm --hw h200 [--verify] [-j 2]
"""

from __future__ import annotations

import argparse
import sys
import time


from corpus_apply import ROOT, apply_config, naive_pairs  # noqa: E402

from kxform.api import explain, rewrite  # noqa: E402
from kxform.engine.pass_api import Outcome  # noqa: E402
from kxform.passes.smem_tile.smem_tile import CANDIDATES, DEFAULTS  # noqa: E402

NAME = "smem-tile"


def _spec(config: dict[str, int]) -> str:
    return f"{NAME}{{{','.join(f'{k}={v}' for k, v in config.items())}}}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--points", type=int, default=3, help="non-default configurations per kernel (default 3)")
    parser.add_argument("--hw", default="h100")
    parser.add_argument("--only", action="append", default=[], help="only these manifest entries")
    parser.add_argument("--space", metavar="NAME", help="every point of the tuning space of this entry's naive kernel")
    parser.add_argument("--verify", action="store_true", help="with --space: the CPU differential run of each point")
    parser.add_argument("-j", "--jobs", type=int, default=2, help="with --space: points checked at once (default 2)")
    args = parser.parse_args()
    if args.space:
        return space(args.space, args.hw, args.verify, args.jobs)
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
        for label in [_spec(DEFAULTS)] + [_spec(c) for c in CANDIDATES[: args.points]]:
            t0 = time.perf_counter()
            applied = apply_config(path, label, kernel, args.hw)
            failures += not applied.verified
            print(f"{'':<30}{label:<52} {applied.line()} ({time.perf_counter() - t0:.0f} s)")
    if not args.only or "gemm" in args.only:
        path = ROOT / "corpora" / "naive" / "gemm" / "naive.cu"
        pipeline = f"{_spec(DEFAULTS)},swizzle{{pattern=grouped}}"
        applied = apply_config(path, pipeline, "gemm_naive", args.hw)
        failures += not applied.verified
        print(f"{'gemm':<14} {'gemm_naive':<14} {pipeline}: {applied.line()}")
    print(f"{failures} failure(s); {time.perf_counter() - started:.0f} s")
    return 1 if failures else 0


def space(name: str, hw: str, verify: bool, jobs: int) -> int:
    """Every point of the tuning space through the pass's checks (and the CPU run)."""
    from concurrent.futures import ThreadPoolExecutor

    from kxform.hw import load_profile
    from kxform.search.kernel_space import kernel_space

    entry = next(e for e in naive_pairs() if e["name"] == name)
    path, kernel = ROOT / "corpora" / "naive" / entry["naive"], entry["naive_kernel"]
    data = path.read_bytes()
    tuned = kernel_space(data, kernel, (NAME,), path=str(path), hw=hw)
    valid = tuned.search(load_profile(hw))
    specs = [s for s in (tuned.spec(valid.config(r)) for r in range(len(valid))) if s]
    started = time.perf_counter()

    def one(spec: str) -> tuple[str, str, bool]:
        result = rewrite(data, spec, path=str(path), hw=hw)
        (done,) = [r for r in result.results if r.kernel == kernel]
        if done.outcome is not Outcome.APPLIED:
            return spec, f"{done.outcome.value}: {(done.reasons or ('',))[0][:140]}", False
        record = next(c for c in done.checks if c.name == "resources")
        line = f"{record.figure('registers')} registers" if record.figure("registers") else record.detail
        if verify:
            applied = apply_config(path, spec, kernel, hw)
            return spec, f"{line}; {applied.line()}", applied.verified
        return spec, line, True

    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        rows = list(pool.map(one, specs))
    for spec, line, _ in rows:
        print(f"{spec:<88} {line}")
    failures = sum(not ok for _, _, ok in rows)
    print(
        f"{len(rows)} points of the tuning space on {hw}: {failures} failure(s); {time.perf_counter() - started:.0f} s"
    )
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
