"""Tuning with several timing workers: one per GPU of this host (`gpus`), or Ray actors
over a cluster (`ray`); the same search, its evaluations spread over the workers, the
database written by this process alone.

The driver (this process) builds the space and the search and never touches a GPU:
each worker builds the objective itself from a recipe (`kxform.search.workers`), after
being pinned to its device. A directory over a Ray cluster is one tuning job per
kernel and shape (kxform.search.spread). See docs/search.md, "Parallel and distributed
tuning".
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

from kxform.cache import content_key
from kxform.errors import CheckFailed, UsageError
from kxform.frontend.source import SourceText, read_source
from kxform.hw import load_profile
from kxform.log.report import Report
from kxform.orchestrate.tune_kernel import open_log, tune_options
from kxform.orchestrate.tune_request import QUIET, Listeners, RunKind, TuneOutcome, TuneRequest
from kxform.orchestrate.tune_setup import (
    check_kernel,
    cpu_checker,
    harness_spec,
    measure_options,
    objective_of,
    prior_of,
    space_of,
)
from kxform.orchestrate.tune_summary import tune_summary
from kxform.orchestrate.tune_write import write_pipeline
from kxform.runtime.cpu import CpuRuntime
from kxform.search.db import TuneKey, TuningDB
from kxform.search.kernel_objective import KernelObjective, TuneTarget, timing_size
from kxform.search.predictor import cost_model, kernel_hints
from kxform.search.local_pool import LocalBackend, parse_gpus
from kxform.search.objective import Objective
from kxform.search.pool import Backend, WorkerPool
from kxform.search.ray_pool import RayBackend, RayOptions, cluster_gpus, connect, import_ray
from kxform.search.recorded_values import recorded_pipeline
from kxform.search.space import SearchSpace
from kxform.search.strategy import SearchHints
from kxform.search.spread import JobResult, find_jobs, spread
from kxform.search.tuner import tune
from kxform.search.workers import KernelRecipe, Recipe, ReplayRecipe


def run_workers(request: TuneRequest, listeners: Listeners = QUIET) -> TuneOutcome:
    """One kernel's search over several workers, or (a directory) one job per kernel and shape."""
    if Path(request.path).is_dir():
        return _run_directory(request, listeners)
    if request.kernel is None:
        raise UsageError(f"{request.path}: --kernel K is required (a directory is tuned kernel by kernel)")
    backend = _backend_check(request)  # option errors before any file is read
    source = read_source(request.path)
    check_kernel(source, request.kernel)
    recipe, space = _recipe(request, source)
    if isinstance(recipe, KernelRecipe):
        listeners.left_out(request, recipe.space)
    replayed = isinstance(recipe, ReplayRecipe)
    options = tune_options(request, start_at_defaults=not replayed)
    pool = WorkerPool(backend(recipe))
    try:
        default = space.default_row()  # the workers first, as one GPU's objective comes before the database
        identity = pool.start(space.config(default if default is not None else 0))
        with TuningDB(request.search.db) as db:
            kernel_hash = content_key(source.data, request.kernel, *([identity.measures] if identity.measures else []))
            key = TuneKey(kernel_hash, request.kernel, identity.hardware, space.names)
            prior = prior_of(request, space, db, key)
            log = open_log(request, identity.hardware)
            hints = _hints(request, recipe, space)
            result = tune(
                space,
                None,
                options,
                db=db,
                key=key,
                prior=prior,
                on_step=listeners.on_step,
                runner=pool.run,
                hints=hints,
            )
    finally:
        pool.close()
    named = cast(Objective, SimpleNamespace(name=identity.objective, hardware=identity.hardware))
    summary = tune_summary(
        result, request.path, request.kernel, named, request.measure.recording, options.seed, str(db.path)
    )
    summary["workers"] = pool.report().to_json()
    if request.output.write and result.best is not None:
        try:
            summary["written"] = _write(request, recipe, source, result.best.config)
        except CheckFailed as exc:
            summary["written"] = {"written": [], "refused": str(exc)}
    log.write({"type": "tune", "schema": 1, "run": log.run_id, **summary})
    log.close(Report())
    refused = (summary.get("written") or {}).get("refused")
    return TuneOutcome(RunKind.KERNEL, summary, str(log.path), 1 if refused else 0)


def _backend_check(request: TuneRequest) -> Callable[[Recipe], Backend]:
    """A function recipe -> Backend for `gpus`/`ray`, the options checked first."""
    gpus, ray = request.measure.gpus, request.measure.ray
    if ray is not None:
        import_ray()
        workers = None
        if gpus not in (None, "all"):
            if not gpus.isdigit() or int(gpus) < 1:
                raise UsageError(f"--gpus {gpus} with --ray: the number of workers (device lists are per host)")
            workers = int(gpus)
        options = RayOptions(address=ray, workers=workers)
        return lambda recipe: RayBackend(recipe, options)
    devices = parse_gpus(gpus)
    if request.measure.objective == "gpu":
        _gpus_here(str(gpus))
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


def _recipe(request: TuneRequest, source: SourceText) -> tuple[Recipe, SearchSpace]:
    """What the workers build (the GPU objective, or a recording) and the space the
    driver searches."""
    if request.measure.recording is not None:
        _, space = objective_of(request, source)  # the recording, checked here first
        return ReplayRecipe(request.measure.recording), space
    if request.measure.times is not None:
        raise UsageError(f"--objective {request.measure.objective}: several workers time on GPUs, or replay:FILE")
    spec = harness_spec(request, source)
    kspace = space_of(request, source)
    target = TuneTarget(source.path, source.data, str(request.kernel), spec, request.hw, request.build.build_dir)
    measure = measure_options(request, timing_size(spec, request.measure.size))
    return KernelRecipe(target, kspace, measure), kspace.search(load_profile(request.hw))


def _hints(request: TuneRequest, recipe: Recipe, space: SearchSpace) -> SearchHints | None:
    """The driver's hints for the strategy: the pass roles, and the cost model's
    predictions made here (the workers predict again for pruning, each on its own)."""
    if not isinstance(recipe, KernelRecipe):
        return None
    predictor = None
    if request.search.cost_model:
        target = recipe.target
        predictor = cost_model(target, recipe.space, recipe.measure.size or timing_size(target.spec, None))
    return kernel_hints(recipe.space, space, predictor)


def _write(request: TuneRequest, recipe: Recipe, source: SourceText, config: dict[str, Any]) -> dict[str, Any]:
    """`write`: the best configuration's pipeline through `apply`'s every check, verified
    again here on the CPU runtime (kxform.orchestrate.tune_write); a replayed configuration
    typed into the passes' composed space first (kxform.search.recorded_values), never as text."""
    if isinstance(recipe, KernelRecipe):
        objective = KernelObjective(recipe.target, recipe.space, CpuRuntime(), recipe.measure)
        pipeline = recipe.space.spec(config)
    else:
        objective = cpu_checker(request, source)
        pipeline = recorded_pipeline(objective.space, config, request.hw)
    try:
        if not pipeline:
            return {"written": [], "kept_original": True}
        return write_pipeline(request.spec, objective, pipeline)
    finally:
        objective.close()


def _run_directory(request: TuneRequest, listeners: Listeners) -> TuneOutcome:
    """Every kernel and bench size of the harness specs under the directory, each a
    tuning run on one GPU of the cluster (`kxform.search.spread`)."""
    address = request.measure.ray
    if address is None:
        raise UsageError(f"{request.path}: a directory is tuned over a Ray cluster (--ray ADDRESS|auto|local)")
    if request.measure.objective != "gpu" or request.output.write or request.search.resume or request.search.prior:
        raise UsageError(
            f"{request.path}: a directory is tuned on GPUs only, without --objective, --write, --resume or --prior"
        )
    ray = import_ray()
    options = tune_options(request, start_at_defaults=True)
    jobs, skipped = find_jobs(
        Path(request.path),
        request.passes,
        request.hw,
        kernel=request.kernel,
        build_dir=request.build.build_dir,
        require=request.search.require,
    )
    if not jobs:
        raise UsageError(
            f"{request.path}: nothing to tune ({len(skipped)} kernels skipped"
            f"{': ' + skipped[0][0] + ': ' + skipped[0][1] if skipped else ''})"
        )
    connect(ray, address)
    if cluster_gpus(ray) < 1:  # the jobs would wait for a GPU that never comes
        raise UsageError(f"--ray {address}: the cluster has no GPU")
    with TuningDB(request.search.db) as db:
        results = spread(jobs, options, ray, db, on_done=listeners.on_job)
    record = {
        "directory": request.path,
        "database": str(db.path),
        "jobs": [_job_json(r) for r in results],
        "skipped": [{"kernel": label, "reason": why} for label, why in skipped],
    }
    return TuneOutcome(RunKind.CLUSTER, record, None, sum(1 for r in results if r.error))


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
