"""Timing workers as Ray actors: every GPU of a Ray cluster, the database on the driver.

Each worker is a Ray actor (`EvalWorker` built from the recipe on the actor's node)
that requests one GPU (`num_gpus=1`: Ray pins it with `CUDA_VISIBLE_DEVICES`), spread
over the nodes. Fault tolerance is Ray's: an actor whose process or node dies is
restarted (`max_restarts=-1`, on any node with a free GPU) and the calls it held are
retried on it (`max_task_retries`), so a killed worker costs the evaluation it was
running, not the run. Only when Ray gives up on a call (retries exhausted: a
configuration that kills its worker every time) does the pool
(`kxform.search.pool`) see it lost and, after MAX_TRIES, record it as a runtime
failure.

Ray is optional (`pip install kxform[distributed]`); without it `--ray` is one line
and exit 2, and everything else works.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kxform.engine.params import ParamValue
from kxform.errors import InputError, UsageError
from kxform.search.pool import Backend, Done
from kxform.search.workers import EvalWorker, Identity, Recipe

TASK_RETRIES = 2
"""Times Ray retries one call on a restarted actor."""


def import_ray() -> Any:
    """The `ray` module; a UsageError saying how to get it when it is missing."""
    try:
        import ray
    except ImportError:
        raise UsageError("--ray needs Ray, which is not installed: pip install 'kxform[distributed]'") from None
    return ray


def connect(ray: Any, address: str | None) -> None:
    """Join the cluster at `address` (see `RayOptions.address`) unless this process has."""
    if ray.is_initialized():
        return
    quiet = {"include_dashboard": False, "log_to_driver": False, "logging_level": logging.ERROR}
    try:  # Ray's start-up notes would split kxform's one-line messages
        if address == "local":
            ray.init(**quiet)
        else:
            ray.init(address=address, **quiet)
    except (ConnectionError, RuntimeError, ValueError) as exc:
        raise UsageError(f"--ray {address}: cannot join the cluster ({' '.join(str(exc).split())})") from None


def cluster_gpus(ray: Any) -> float:
    """The GPUs of the cluster this process joined."""
    return float(ray.cluster_resources().get("GPU", 0.0))


@dataclass(frozen=True)
class RayOptions:
    """Where the cluster is and what each worker asks of it."""

    address: str | None = "auto"
    """`auto` (a running cluster), `ray://HOST:PORT` or `HOST:PORT`, `local` (start
    one on this machine), None (use the one this process already joined)."""
    workers: int | None = None
    """Timing workers (None: one per GPU of the cluster)."""
    num_gpus: float = 1.0
    num_cpus: float = 1.0
    resources: tuple[tuple[str, float], ...] = ()
    """Extra custom resources per worker."""
    threads: int = 2
    """Calls an actor runs at once (one compiles while one is timed)."""


class RayBackend(Backend):
    """The workers as Ray actors (see the module's docstring)."""

    def __init__(self, recipe: Recipe, options: RayOptions = RayOptions()) -> None:
        self.ray = import_ray()
        self.recipe = recipe
        self.options = options
        self._actors: list[Any] = []
        self._refs: dict[Any, tuple[int, int]] = {}

    def start(self) -> list[Identity]:
        ray, options = self.ray, self.options
        connect(ray, options.address)
        count = options.workers
        gpus = cluster_gpus(ray)
        if count is None:
            count = int(gpus // options.num_gpus) if options.num_gpus > 0 else 0
            if count < 1:
                where = f" {options.address}" if options.address else ""
                raise UsageError(f"--ray{where}: the cluster has no GPU, and each timing worker takes one")
        elif count * options.num_gpus > gpus:  # the actors would wait for GPUs that never come
            raise UsageError(f"--gpus {count} with --ray: the cluster has {gpus:g} GPUs")
        actor = ray.remote(EvalWorker).options(
            num_gpus=options.num_gpus,
            num_cpus=options.num_cpus,
            resources=dict(options.resources) or None,
            max_restarts=-1,
            max_task_retries=TASK_RETRIES,
            max_concurrency=options.threads,
            scheduling_strategy="SPREAD",
        )
        self._actors = [actor.remote(self.recipe) for _ in range(count)]
        try:
            identities: list[Identity] = ray.get([a.identity.remote() for a in self._actors])
        except self.ray.exceptions.RayError as exc:
            raise InputError(f"a Ray worker could not start: {_cause(exc)}") from None
        return identities

    def submit(self, worker: int, ticket: int, config: Mapping[str, ParamValue]) -> None:
        ref = self._actors[worker].evaluate.remote(dict(config))
        self._refs[ref] = (ticket, worker)

    def wait(self) -> list[Done]:
        ray = self.ray
        ready, _ = ray.wait(list(self._refs), num_returns=1)
        more, _ = (
            ray.wait([r for r in self._refs if r not in ready], num_returns=len(self._refs) - len(ready), timeout=0)
            if len(self._refs) > len(ready)
            else ([], [])
        )
        out = []
        for ref in [*ready, *more]:
            ticket, worker = self._refs.pop(ref)
            try:
                out.append(Done(ticket, worker, ray.get(ref)))
            except ray.exceptions.RayTaskError as exc:  # the objective raised: bad input, as in one process
                raise InputError(f"worker {worker}: {_cause(exc)}") from None
            except ray.exceptions.RayError as exc:  # the actor (or its node) died and Ray gave up on this call
                out.append(Done(ticket, worker, None, f"Ray worker {worker} lost ({type(exc).__name__})"))
        return out

    def kill(self, worker: int) -> None:
        """Kill one worker's process (Ray restarts it): the fault drill of the tests."""
        self.ray.kill(self._actors[worker], no_restart=False)

    def close(self) -> None:
        for actor in self._actors:
            try:
                self.ray.kill(actor)
            except Exception:  # already gone
                pass
        self._actors = []


def _cause(exc: BaseException) -> str:
    cause = getattr(exc, "cause", None) or exc
    lines = [line for line in str(cause).splitlines() if line.strip()]
    return lines[-1].strip() if lines else type(exc).__name__
