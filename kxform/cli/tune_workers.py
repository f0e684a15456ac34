"""`kxform tune --gpus all|N|LIST` and `kxform tune --ray ADDRESS`: the same search,
its evaluations spread over timing workers (one per GPU of this host, or Ray actors
over a cluster), the database written by this process alone.

The driver (this process) builds the space and the search and never touches a GPU:
each worker builds the objective itself from a recipe (`kxform.search.workers`), after
being pinned to its device. See docs/search.md, "Parallel and distributed tuning".
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

from kxform.cache import content_key
from kxform.cli.progress import interactive
from kxform.cli.tune import _check_kernel, _objective, _options, _print, _prior, _spec, say_left_out, tune_summary
from kxform.errors import CheckFailed, UsageError, printable
from kxform.frontend.source import SourceText, read_source
from kxform.log.passlog import PassLog
from kxform.log.report import Report
from kxform.search.db import TuneKey, TuningDB
from kxform.search.objective import Objective
from kxform.search.pool import Backend, WorkerPool
from kxform.search.progress import Progress
from kxform.search.space import SearchSpace
from kxform.search.spread import JobResult
from kxform.search.tuner import tune
from kxform.search.workers import KernelRecipe, Recipe, ReplayRecipe


def add_options(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--gpus",
        metavar="all|N|LIST",
        help="time on several GPUs of this host at once: all, a count, or device numbers (0,2,3); "
        "with --ray, the number of workers",
    )
    p.add_argument(
        "--ray",
        metavar="ADDRESS|auto|local",
        help="time on the GPUs of a Ray cluster (auto: the running one; local: start one here); "
        "needs kxform[distributed]",
    )


def wanted(args: argparse.Namespace) -> bool:
    """Whether this module runs the command: several timing workers (a directory without
    them is tuned kernel by kernel on this host: kxform.cli.tune_dir)."""
    return getattr(args, "gpus", None) is not None or getattr(args, "ray", None) is not None


def run(args: argparse.Namespace) -> int:
    if Path(args.file).is_dir():
        return _run_directory(args)
    if args.kernel is None:
        raise UsageError(f"{args.file}: --kernel K is required (a directory is tuned kernel by kernel)")
    options = _options(args)
    backend = _backend_check(args)  # option errors before any file is read
    source = read_source(args.file)
    _check_kernel(source, args.kernel)
    recipe, space, replay_path = _recipe(args, source)
    options = replace(options, start_at_defaults=replay_path is None)
    pool = WorkerPool(backend(recipe))
    try:
        default = space.default_row()  # the workers first, as one GPU's objective comes before the database
        identity = pool.start(space.config(default if default is not None else 0))
        with TuningDB(args.db) as db:
            kernel_hash = content_key(source.data, args.kernel, *([identity.measures] if identity.measures else []))
            key = TuneKey(kernel_hash, args.kernel, identity.hardware, space.names)
            prior = _prior(args, space, db, key)
            log = PassLog.open(args.log, hw=identity.hardware, pipeline=args.passes, argv=sys.argv[1:])
            drawn = not args.json and interactive(sys.stderr)  # never into a pipe or a CI log
            with Progress(enabled=drawn, total=options.budget, time_s=options.time_s) as progress:
                result = tune(space, None, options, db=db, key=key, prior=prior, on_step=progress.step, runner=pool.run)
    finally:
        pool.close()
    named = cast(Objective, SimpleNamespace(name=identity.objective, hardware=identity.hardware))
    summary = tune_summary(result, args, named, replay_path, str(db.path))
    summary["workers"] = pool.report().to_json()
    if args.write and result.best is not None:
        try:
            summary["written"] = _write(args, recipe, source, result.best.config)
        except CheckFailed as exc:
            summary["written"] = {"written": [], "refused": str(exc)}
    log.write({"type": "tune", "schema": 1, "run": log.run_id, **summary})
    log.close(Report())
    if args.json:
        print(json.dumps(summary, indent=2, default=str))
    else:
        _print(summary, log.path)
        report = summary["workers"]
        print(
            f"kxform: {len(report['workers'])} workers, {report['wall_s']:.1f} s, {report['resubmitted']} resubmitted",
            file=sys.stderr,
        )
    refused = (summary.get("written") or {}).get("refused")
    if refused:
        print(printable(f"kxform: --write: {args.file}: not written: {refused}"), file=sys.stderr)
        return 1
    return 0


def _backend_check(args: argparse.Namespace) -> Callable[[Recipe], Backend]:
    """A function recipe -> Backend for `--gpus`/`--ray`, the options checked first."""
    if args.ray is not None:
        from kxform.search.ray_pool import RayBackend, RayOptions, import_ray

        import_ray()
        workers = None
        if args.gpus not in (None, "all"):
            if not args.gpus.isdigit() or int(args.gpus) < 1:
                raise UsageError(f"--gpus {args.gpus} with --ray: the number of workers (device lists are per host)")
            workers = int(args.gpus)
        options = RayOptions(address=args.ray, workers=workers)
        return lambda recipe: RayBackend(recipe, options)
    from kxform.search.local_pool import LocalBackend, parse_gpus

    devices = parse_gpus(args.gpus)
    if args.objective in (None, "gpu"):
        _gpus_here(args.gpus)
    return lambda recipe: LocalBackend(recipe, devices)


def _gpus_here(asked: str) -> None:
    """Each worker of the GPU objective times on a GPU of this host: without a GPU runtime
    one line says so before any worker starts (a worker that finds no device says so
    itself, as one line too). A recorded space needs no GPU: its workers replay it."""
    import importlib.util

    if importlib.util.find_spec("pycuda") is None:
        raise UsageError(
            f"--gpus {asked}: no GPU runtime here (pycuda is not installed: pip install 'kxform[gpu]'); "
            "a recorded space replays without one (--objective replay:FILE, docs/search.md)"
        )


def _recipe(args: argparse.Namespace, source: SourceText) -> tuple[Recipe, SearchSpace, str]:
    """What the workers build (the GPU objective, or a recording) and the space the
    driver searches."""
    if args.objective not in (None, "gpu"):
        _, space, path = _objective(args, source)  # the recording, checked here first
        return ReplayRecipe(path), space, path
    from kxform.hw import load_profile
    from kxform.search.kernel_objective import MeasureOptions, TuneTarget, timing_size
    from kxform.search.kernel_space import kernel_space, parse_passes

    passes = parse_passes(args.passes) if args.passes else None
    if args.repeat < 1:
        raise UsageError(f"--repeat {args.repeat}: must be at least 1")
    spec = _spec(args, source)
    kspace = kernel_space(
        source.data,
        args.kernel,
        passes,
        path=source.path,
        hw=args.hw,
        build_dir=args.build_dir,
        require=tuple(args.require),
    )
    say_left_out(kspace, passes)
    target = TuneTarget(source.path, source.data, args.kernel, spec, args.hw, args.build_dir)
    measure = MeasureOptions(size=timing_size(spec, args.size), repeat=args.repeat, launch_budget_s=args.launch_budget)
    return KernelRecipe(target, kspace, measure), kspace.search(load_profile(args.hw)), ""


def _write(args: argparse.Namespace, recipe: Recipe, source: SourceText, config: dict[str, Any]) -> dict[str, Any]:
    """`--write`: the best configuration's pipeline through `apply`'s every check, verified
    again here on the CPU runtime (kxform.cli.tune_write); a replayed configuration typed
    into the passes' composed space first (kxform.search.recorded_values), never as text."""
    from kxform.cli.tune import _cpu_checker
    from kxform.cli.tune_write import write_pipeline
    from kxform.runtime.cpu import CpuRuntime
    from kxform.search.kernel_objective import KernelObjective
    from kxform.search.recorded_values import recorded_pipeline

    if isinstance(recipe, KernelRecipe):
        objective = KernelObjective(recipe.target, recipe.space, CpuRuntime(), recipe.measure)
        pipeline = recipe.space.spec(config)
    else:
        objective = _cpu_checker(args, source)  # type: ignore[assignment]
        pipeline = recorded_pipeline(objective.space, config, args.hw)
    try:
        if not pipeline:
            return {"written": [], "kept_original": True}
        return write_pipeline(args, objective, pipeline)
    finally:
        objective.close()


def _run_directory(args: argparse.Namespace) -> int:
    """`kxform tune DIR --ray ADDRESS`: every kernel and bench size of the harness specs
    under DIR, each a tuning run on one GPU of the cluster (`kxform.search.spread`)."""
    from kxform.search.kernel_space import parse_passes
    from kxform.search.ray_pool import cluster_gpus, connect, import_ray
    from kxform.search.spread import find_jobs, spread

    if args.ray is None:
        raise UsageError(f"{args.file}: a directory is tuned over a Ray cluster (--ray ADDRESS|auto|local)")
    if args.objective not in (None, "gpu") or args.write or args.resume or args.prior:
        raise UsageError(
            f"{args.file}: a directory is tuned on GPUs only, without --objective, --write, --resume or --prior"
        )
    ray = import_ray()
    options = replace(_options(args), start_at_defaults=True)
    jobs, skipped = find_jobs(
        Path(args.file),
        parse_passes(args.passes) if args.passes else None,
        args.hw,
        kernel=args.kernel,
        build_dir=args.build_dir,
        require=tuple(args.require),
    )
    if not jobs:
        raise UsageError(
            f"{args.file}: nothing to tune ({len(skipped)} kernels skipped"
            f"{': ' + skipped[0][0] + ': ' + skipped[0][1] if skipped else ''})"
        )
    connect(ray, args.ray)
    if cluster_gpus(ray) < 1:  # the jobs would wait for a GPU that never comes
        raise UsageError(f"--ray {args.ray}: the cluster has no GPU")
    with TuningDB(args.db) as db:
        results = spread(jobs, options, ray, db, on_done=None if args.json else _job_line)
    summary = {
        "directory": args.file,
        "database": str(db.path),
        "jobs": [_job_json(r) for r in results],
        "skipped": [{"kernel": label, "reason": why} for label, why in skipped],
    }
    if args.json:
        print(json.dumps(summary, indent=2, default=str))
    else:
        for label, why in skipped:
            print(f"skipped {label}: {why}", file=sys.stderr)
    return 0 if all(not r.error for r in results) else 1  # as a check that found problems


def _job_json(result: JobResult) -> dict[str, Any]:
    best = result.best()
    return {
        "job": result.label,
        "hardware": result.hardware,
        "host": result.host,
        "devices": result.devices,
        "evaluated": len(result.steps),
        "stopped": result.stopped,
        "error": result.error or None,
        "best": None if best is None else {"config": best[0], "time_ms": best[1].time_ms},
    }


def _job_line(result: JobResult) -> None:
    best = result.best()
    if result.error:
        print(f"{result.label}: failed: {result.error}")
    elif best is None:
        print(f"{result.label}: no configuration ran ({len(result.steps)} evaluations) on {result.host}")
    else:
        values = ", ".join(f"{k}={v}" for k, v in best[0].items())
        print(
            f"{result.label}: best {best[1].time_ms:.4g} ms ({values}) of {len(result.steps)} evaluations "
            f"on {result.host} GPU {result.devices}"
        )
