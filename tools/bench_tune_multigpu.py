#!/usr/bin/env python3
"""Tuning one corpus kernel on 1, 2 and 4 GPUs of this host: evaluations per minute
and the best found with each count.

    python tools/bench_tune_multigpu.py --out results.json [--case sgemm_tiled/tile] [--gpus 1,2,4]
                                        [--budget N] [--jobs N] [--quick] [--hw NAME] [--seed N]

Each run is `kxform tune --gpus N` through the API: one worker process per GPU, pinned
with CUDA_VISIBLE_DEVICES, each configuration rewritten by the passes, compiled,
verified against the original on the GPU and timed (kxform.search.kernel_objective,
as tools/bench_tune_gpu.py tunes), the search on this process with the database
written here alone. Every run starts cold: a fresh database and a fresh nvcc cache (so
the second run's compiles are not cache hits). Printed per count: the wall time of
the search (workers started and their reference timed), evaluations per minute, the
speed-up over the first count, the best time and configuration and the evaluation it
was found at, failures, each worker's evaluations and reference factor. Counts above
the host's GPUs are skipped (said so). Needs no network and no Ray.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any


from kxform.bench.tune_cases import CASES, Loaded, load, pick, profile_for, require_gpu
from kxform.bench.output import write_json

NEAR = 0.02


def parse(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", required=True, metavar="PATH", help="write the results as JSON here")
    p.add_argument("--case", default="sgemm_tiled/tile", help=f"the kernel (cases: {', '.join(c.name for c in CASES)})")
    p.add_argument("--gpus", default="1,2,4", help="GPU counts to run with (default 1,2,4)")
    p.add_argument("--budget", type=int, default=60, help="evaluations per run (default 60)")
    p.add_argument("--jobs", type=int, default=2, help="configurations in flight per GPU (compiling beside timing)")
    p.add_argument("--quick", action="store_true", help="the case's smaller timing size")
    p.add_argument("--strategy", default=None, help="kxform strategy (default: the default strategy)")
    p.add_argument("--hw", help="hardware profile for the constraints (default: from the device)")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    try:
        args.counts = [int(n) for n in args.gpus.split(",")]
    except ValueError:
        p.error("--gpus: a list of counts, e.g. 1,2,4")
    if args.budget < 1 or args.jobs < 1 or min(args.counts) < 1:
        p.error("--budget, --jobs and the counts must be at least 1")
    return args


def one_run(loaded: Loaded, gpus: int, args: argparse.Namespace, strategy: str) -> dict[str, Any]:
    from kxform.search.db import TuneKey, TuningDB
    from kxform.search.kernel_objective import MeasureOptions
    from kxform.search.local_pool import LocalBackend, parse_gpus
    from kxform.search.pool import WorkerPool
    from kxform.search.tuner import TuneOptions, tune
    from kxform.search.workers import KernelRecipe

    measure = MeasureOptions(size=loaded.size, launch_budget_s=0.3 if args.quick else 0.5)  # as bench_tune_gpu
    recipe = KernelRecipe(loaded.target, loaded.space, measure)
    search = loaded.search
    with tempfile.TemporaryDirectory(prefix="kxform-multigpu-") as scratch:
        os.environ["KXFORM_CACHE_DIR"] = scratch  # the workers inherit it: a cold nvcc cache per run
        pool = WorkerPool(LocalBackend(recipe, parse_gpus(str(gpus)), threads=args.jobs), slots=args.jobs)
        started = time.perf_counter()
        try:
            default = search.default_row()
            identity = pool.start(search.config(default if default is not None else 0))
            ready = time.perf_counter() - started
            key = TuneKey("bench", loaded.case.kernel, identity.hardware, search.names)
            with TuningDB(Path(scratch) / "tuning.sqlite") as db:
                options = TuneOptions(strategy=strategy, budget=args.budget, seed=args.seed, start_at_defaults=True)
                result = tune(search, None, options, db=db, key=key, runner=pool.run)
        finally:
            pool.close()
    report = pool.report()
    best = result.best
    failures: dict[str, int] = {}
    for step in result.steps:
        if step.evaluation.failure is not None:
            failures[step.evaluation.failure.value] = failures.get(step.evaluation.failure.value, 0) + 1
    return {
        "gpus": gpus,
        "device": identity.hardware,
        "start_s": round(ready, 2),
        "wall_s": round(report.wall_s, 2),
        "evaluations": len(result.steps),
        "evals_per_min": round(len(result.steps) / report.wall_s * 60, 2),
        "best_ms": best.evaluation.time_ms if best else None,
        "best_config": best.config if best else None,
        "found_at": best.index + 1 if best else None,
        "failures": failures,
        "strategy_s": round(result.strategy_s, 2),
        **report.to_json(),
    }


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    runtime = require_gpu("bench_tune_multigpu")
    from kxform.errors import KxformError
    from kxform.search.local_pool import count_gpus
    from kxform.search.strategy import DEFAULT

    hw = profile_for(runtime, args.hw)
    runtime.close()  # the driver times nothing: the workers have the GPUs
    try:
        available = count_gpus()
    except KxformError as exc:
        print(f"bench_tune_multigpu: {exc}", file=sys.stderr)
        return 2
    strategy = args.strategy or DEFAULT
    [case] = pick([args.case], ())
    loaded = load(case, args.quick, hw)
    print(
        f"{case.name} at {loaded.size.name}: {len(loaded.search)} configurations; {available} GPUs here; "
        f"strategy {strategy}; budget {args.budget}; {args.jobs} in flight per GPU",
        flush=True,
    )
    runs: list[dict[str, Any]] = []
    skipped = [n for n in args.counts if n > available]
    for gpus in (n for n in args.counts if n <= available):
        runs.append(one_run(loaded, gpus, args, strategy))
        print(_line(runs[-1], runs[0]), flush=True)
        write_json(args.out, _document(case.name, loaded, strategy, args, runs, skipped))
    if skipped:
        print(f"skipped (more than the {available} GPUs here): {', '.join(map(str, skipped))}")
    print(
        f"\n{'gpus':>4} {'wall s':>8} {'evals/min':>10} {'speed-up':>8} {'best ms':>10} {'at':>4} "
        f"{'failed':>6} {'per GPU':>16} {'factors':>22}"
    )
    for run in runs:
        print(_line(run, runs[0]))
    bests = [r["best_ms"] for r in runs if r["best_ms"]]
    if bests:
        print(
            f"bests within {NEAR:.0%} of each other: {max(bests) <= min(bests) * (1 + NEAR)} "
            f"({min(bests):.4g} to {max(bests):.4g} ms)"
        )
    write_json(args.out, _document(case.name, loaded, strategy, args, runs, skipped))
    return 0


def _document(
    case: str, loaded: Loaded, strategy: str, args: argparse.Namespace, runs: list[dict[str, Any]], skipped: list[int]
) -> dict[str, Any]:
    return {
        "tool": "bench_tune_multigpu",
        "case": case,
        "size": loaded.size.name,
        "space": len(loaded.search),
        "strategy": strategy,
        "budget": args.budget,
        "jobs": args.jobs,
        "seed": args.seed,
        "runs": runs,
        "skipped_counts": skipped,
    }


def _line(run: dict[str, Any], first: dict[str, Any]) -> str:
    speedup = first["wall_s"] / run["wall_s"] * run["evaluations"] / first["evaluations"]
    best = f"{run['best_ms']:.4g}" if run["best_ms"] else "-"
    per = ",".join(str(w["evaluations"]) for w in run["workers"])
    factors = ",".join(f"{w['factor']:.3f}" for w in run["workers"])
    return (
        f"{run['gpus']:>4} {run['wall_s']:>8.1f} {run['evals_per_min']:>10.1f} {speedup:>7.2f}x {best:>10} "
        f"{run['found_at'] or '-':>4} {sum(run['failures'].values()):>6} {per:>16} {factors:>22}"
    )


if __name__ == "__main__":
    sys.exit(main())
