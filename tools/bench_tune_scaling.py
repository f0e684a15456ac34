#!/usr/bin/env python3
"""How tuning scales with timing workers, on the CPU: a recorded space replayed by 1, 2
and 4 workers, each evaluation sleeping its recorded cost (compile + verification +
benchmark) times --pace, as a device would take it.

    python tools/bench_tune_scaling.py [--space FILE] [--backend local|ray|both] [--workers 1,2,4]
                                       [--budget N] [--pace F] [--strategy model|random] [--kill] [--out PATH]

Per backend (local worker processes, as `kxform tune --gpus`; Ray actors on a local
cluster with fake GPUs, as `--ray`) and worker count: the wall time of the search (the
workers already started and their reference timed), evaluations per minute, the speed-up
over one worker, the best time found and at which evaluation, the driver's time in the
strategy. `--kill`: one more run per backend with the largest count in which a worker
exits mid-evaluation (the fault drill of `kxform.search.workers.ReplayRecipe`): it must
finish with every evaluation recorded once. Default space: convolution_A100 from
../shared/bench-spaces (found as tools/bench_search.py finds it).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path
from typing import Any


from kxform.bench.paths import spaces_dir
from kxform.bench.output import write_json


def parse(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--space", help="a recording (default: convolution_A100 of ../shared/bench-spaces)")
    p.add_argument("--backend", choices=("local", "ray", "both"), default="both")
    p.add_argument("--workers", default="1,2,4", help="worker counts (default 1,2,4)")
    p.add_argument("--budget", type=int, default=60, help="evaluations per run (default 60)")
    p.add_argument("--pace", type=float, default=0.1, help="sleep per evaluation, times its recorded cost (0.1)")
    p.add_argument("--strategy", default="model")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--kill", action="store_true", help="add a run in which a worker dies mid-evaluation")
    p.add_argument("--out", metavar="PATH", help="write the results as JSON here")
    args = p.parse_args(argv)
    try:
        args.counts = [int(n) for n in args.workers.split(",")]
    except ValueError:
        p.error("--workers: a list of counts, e.g. 1,2,4")
    if args.budget < 1 or args.pace < 0 or min(args.counts) < 1:
        p.error("--budget and --workers must be at least 1, --pace not negative")
    return args


def default_space() -> Path:
    folder = spaces_dir()
    if folder is None or not (folder / "convolution_A100.json.gz").exists():
        raise SystemExit("bench_tune_scaling: no ../shared/bench-spaces/convolution_A100.json.gz; pass --space FILE")
    return folder / "convolution_A100.json.gz"


def backend_for(kind: str, recipe: Any, workers: int) -> Any:
    if kind == "ray":
        from kxform.search.ray_pool import RayBackend, RayOptions

        return RayBackend(recipe, RayOptions(address=None, workers=workers))
    from kxform.search.local_pool import LocalBackend

    return LocalBackend(recipe, tuple(str(i) for i in range(workers)))


def one_run(kind: str, space_path: Path, workers: int, args: argparse.Namespace, crash: str = "") -> dict[str, Any]:
    from kxform.search.db import TuneKey, TuningDB
    from kxform.search.pool import WorkerPool
    from kxform.search.recorded import load_recording
    from kxform.search.tuner import TuneOptions, tune
    from kxform.search.workers import ReplayRecipe

    recording = load_recording(space_path)
    recipe = ReplayRecipe(str(space_path), pace=args.pace, crash_at=5 if crash else 0, crash_marker=crash)
    pool = WorkerPool(backend_for(kind, recipe, workers))
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as folder:
        try:
            default = recording.search.default_row()
            identity = pool.start(recording.search.config(default if default is not None else 0))
            ready = time.perf_counter() - started
            key = TuneKey("bench", recording.kernel, identity.hardware, recording.search.names)
            with TuningDB(Path(folder) / "t.sqlite") as db:
                result = tune(
                    recording.search,
                    None,
                    TuneOptions(strategy=args.strategy, budget=args.budget, seed=args.seed),
                    db=db,
                    key=key,
                    runner=pool.run,
                )
                stored = len(db.all(key))
        finally:
            pool.close()
    report = pool.report()
    configs = {tuple(sorted(s.config.items())) for s in result.steps}
    best = result.best
    return {
        "backend": kind,
        "workers": workers,
        "fault_drill": bool(crash),
        "start_s": round(ready, 2),
        "wall_s": round(report.wall_s, 3),
        "evaluations": len(result.steps),
        "distinct": len(configs),
        "stored": stored,
        "evals_per_min": round(len(result.steps) / report.wall_s * 60, 1),
        "best_ms": best.evaluation.time_ms if best else None,
        "found_at": best.index + 1 if best else None,
        "strategy_s": round(result.strategy_s, 2),
        "resubmitted": report.resubmitted,
        "per_worker": [w.evaluations for w in report.workers],
        "crashed": bool(crash) and Path(crash).exists(),
    }


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    space = Path(args.space) if args.space else default_space()
    kinds = ("local", "ray") if args.backend == "both" else (args.backend,)
    rows: list[dict[str, Any]] = []
    for kind in kinds:
        if kind == "ray":
            try:
                import ray
            except ImportError:
                print("bench_tune_scaling: Ray is not installed: the ray backend is skipped", file=sys.stderr)
                continue
            most = max(args.counts)
            ray.init(num_cpus=most, num_gpus=most, include_dashboard=False, log_to_driver=False)
        for workers in args.counts:
            rows.append(one_run(kind, space, workers, args))
            print(_line(rows[-1], rows), file=sys.stderr)
        if args.kill:
            with tempfile.TemporaryDirectory() as folder:
                rows.append(one_run(kind, space, max(args.counts), args, crash=str(Path(folder) / "crashed")))
            print(_line(rows[-1], rows), file=sys.stderr)
        if kind == "ray":
            ray.shutdown()
    print(f"\n{space.name}: budget {args.budget}, strategy {args.strategy}, pace {args.pace} x recorded cost")
    print(
        f"{'backend':8} {'workers':>7} {'drill':>5} {'wall s':>8} {'evals/min':>10} {'speed-up':>8} "
        f"{'best ms':>10} {'at':>4} {'strategy s':>10} {'distinct':>8} {'stored':>6} {'resub':>5}"
    )
    for row in rows:
        print(_line(row, rows))
    write_json(
        args.out,
        {"space": str(space), "budget": args.budget, "pace": args.pace, "strategy": args.strategy, "runs": rows},
    )
    return 0


def _line(row: dict[str, Any], rows: list[dict[str, Any]]) -> str:
    base = next(
        (r for r in rows if r["backend"] == row["backend"] and r["workers"] == 1 and not r["fault_drill"]), None
    )
    speedup = f"{base['wall_s'] / row['wall_s']:.2f}x" if base else "-"
    best = f"{row['best_ms']:.4g}" if row["best_ms"] is not None else "-"
    return (
        f"{row['backend']:8} {row['workers']:>7} {'kill' if row['fault_drill'] else '':>5} {row['wall_s']:>8.2f} "
        f"{row['evals_per_min']:>10.1f} {speedup:>8} {best:>10} {row['found_at'] or '-':>4} "
        f"{row['strategy_s']:>10.2f} {row['distinct']:>8} {row['stored']:>6} {row['resubmitted']:>5}"
    )


if __name__ == "__main__":
    sys.exit(main())
