"""Tuning many kernels and shapes at once: each a whole tuning run on one GPU of a Ray
cluster, the database on the driver.

`kxform tune DIR --ray ADDRESS` finds every kernel of the harness specs under DIR
(`kxform-spec.toml`, `NAME.kxspec.toml`, and the older `kxform.toml`, `NAME.kxform.toml`) and, per kernel, every bench size of its spec (the
shapes it is tuned for); a kernel the passes find nothing to tune in is skipped with
the reason. Each (kernel, shape) is a `Job`: a Ray task that requests one GPU
(`num_gpus=1`), builds the objective from its recipe there, runs the search
sequentially (a library of kernels has more jobs than a cluster has GPUs, so the
parallelism is across jobs) and returns every evaluation; the driver writes them into
the tuning database as jobs finish, the only writer. A task lost with its worker or
node is run again by Ray (`max_retries`), from its start; a job that fails for a
reason of its own (no GPU on the node, a kernel that does not build) is reported with
that reason, and the others go on.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kxform.cache import content_key
from kxform.engine.params import ParamValue
from kxform.errors import KxformError
from kxform.harness.spec import LEGACY_NAMES, SPEC_NAME, SPEC_SUFFIX
from kxform.search.db import TuneKey, TuningDB
from kxform.search.objective import Evaluation
from kxform.search.space import SearchSpace
from kxform.search.tuner import TuneOptions, tune
from kxform.search.workers import KernelRecipe, Recipe

TASK_RETRIES = 2
"""Times Ray runs a job again after losing its worker or node."""


@dataclass(frozen=True)
class Job:
    """One tuning run: a kernel at one shape (or any recipe with its space)."""

    label: str
    recipe: Recipe
    search: SearchSpace
    kernel: str
    key_parts: tuple[str | bytes, ...]
    """What the database key's hash is made of, before what a time means (`measures`):
    for a kernel its source and name, as `kxform tune FILE --kernel K` keys it."""


@dataclass(frozen=True)
class JobResult:
    """What a job's worker sends back: every evaluation, or why there are none."""

    label: str
    hardware: str = ""
    measures: str = ""
    devices: str = ""
    host: str = ""
    steps: tuple[tuple[dict[str, ParamValue], Evaluation], ...] = ()
    stopped: str = ""
    error: str = ""

    def best(self) -> tuple[dict[str, ParamValue], Evaluation] | None:
        timed = [s for s in self.steps if s[1].time_ms is not None]
        return min(timed, key=lambda s: s[1].time_ms or 0.0) if timed else None


def find_jobs(
    folder: Path,
    passes: tuple[str, ...] | None,
    hw: str,
    *,
    kernel: str | None = None,
    build_dir: str | None = None,
    require: tuple[str, ...] = (),
    runtime: str = "gpu",
    measure: Any = None,
) -> tuple[list[Job], list[tuple[str, str]]]:
    """The jobs of every kernel and bench size under `folder`; the skipped, with reasons."""
    from kxform.harness.spec import load_spec
    from kxform.hw import load_profile
    from kxform.search.kernel_objective import MeasureOptions, TuneTarget
    from kxform.search.kernel_space import kernel_space

    jobs: list[Job] = []
    skipped: list[tuple[str, str]] = []
    specs = sorted(
        {
            *folder.rglob(SPEC_NAME),
            *folder.rglob(f"*{SPEC_SUFFIX}"),
            *folder.rglob(LEGACY_NAMES[0]),
            *folder.rglob(f"*{LEGACY_NAMES[1]}"),
        }
    )
    for spec_path in specs:
        try:
            spec = load_spec(spec_path)
        except KxformError as exc:
            skipped.append((str(spec_path), str(exc)))
            continue
        data = spec.source.read_bytes()
        for name, kspec in sorted(spec.kernels.items()):
            if kernel is not None and name != kernel:
                continue
            label = f"{spec.source}:{name}"
            try:
                space = kernel_space(
                    data, name, passes, path=str(spec.source), hw=hw, build_dir=build_dir, require=require
                )
                search = space.search(load_profile(hw))
            except KxformError as exc:
                skipped.append((label, exc.cause))
                continue
            target = TuneTarget(str(spec.source), data, name, kspec, hw, build_dir)
            for size in kspec.bench_sizes or kspec.check_sizes[-1:]:
                options = MeasureOptions(size=size) if measure is None else _with_size(measure, size)
                jobs.append(
                    Job(
                        f"{label}@{size.name}",
                        KernelRecipe(target, space, options, runtime),
                        search,
                        name,
                        (data, name),
                    )
                )
    return jobs, skipped


def _with_size(measure: Any, size: Any) -> Any:
    from dataclasses import replace

    return replace(measure, size=size)


def run_job(job: Job, options: TuneOptions) -> JobResult:
    """A job, inside its worker: build the objective on this GPU and search."""
    import os
    import socket

    where = {"devices": os.environ.get("CUDA_VISIBLE_DEVICES", ""), "host": socket.gethostname()}
    try:
        objective = job.recipe.make()
    except KxformError as exc:
        return JobResult(job.label, error=str(exc), **where)
    try:
        result = tune(job.search, objective, options)
    except KxformError as exc:
        return JobResult(job.label, objective.hardware, objective.measures, error=str(exc), **where)
    finally:
        objective.close()
    return JobResult(
        job.label,
        objective.hardware,
        objective.measures,
        steps=tuple((s.config, s.evaluation) for s in result.steps),
        stopped=result.stopped,
        **where,
    )


def spread(
    jobs: list[Job],
    options: TuneOptions,
    ray: Any,
    db: TuningDB,
    on_done: Callable[[JobResult], None] | None = None,
    num_gpus: float = 1.0,
) -> list[JobResult]:
    """Run every job as a Ray task (one GPU each, spread over the nodes; Ray already
    joined), storing each job's evaluations in `db` as it finishes."""
    task = ray.remote(run_job).options(
        num_gpus=num_gpus, max_retries=TASK_RETRIES, retry_exceptions=False, scheduling_strategy="SPREAD"
    )
    pending = {task.remote(job, options): job for job in jobs}
    results: list[JobResult] = []
    while pending:
        ready, _ = ray.wait(list(pending), num_returns=1)
        for ref in ready:
            job = pending.pop(ref)
            try:
                result: JobResult = ray.get(ref)
            except ray.exceptions.RayError as exc:
                lines = [line for line in str(exc).splitlines() if line.strip()]
                result = JobResult(job.label, error=f"lost ({type(exc).__name__}: {lines[-1] if lines else ''})")
            _store(db, job, result)
            results.append(result)
            if on_done is not None:
                on_done(result)
    return results


def _store(db: TuningDB, job: Job, result: JobResult) -> None:
    if not result.steps:
        return
    kernel_hash = content_key(*job.key_parts, *([result.measures] if result.measures else []))
    key = TuneKey(kernel_hash, job.kernel, result.hardware, job.search.names)
    for config, evaluation in result.steps:
        db.put(key, config, evaluation)
