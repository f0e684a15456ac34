"""What runs on a timing worker: one objective on one device, built where it runs.

A worker process (local, `kxform.search.local_pool`) or a Ray actor
(`kxform.search.ray_pool`) cannot be handed a live objective: a GPU runtime holds a
device context and a child process, a recording holds megabytes of records. It is
handed a `Recipe` instead, a small frozen (picklable) description that builds the
objective inside the worker, after the worker was pinned to its device
(`CUDA_VISIBLE_DEVICES`), so that device 0 there is the worker's own GPU.

`EvalWorker` is the worker's side: `evaluate(config)` prepares (rewrite, compile,
CPU-side checks) and then measures under a lock, so that when a worker is given two
configurations at once the second compiles while the first is timed: the compile
pool sits beside the device, and the device times one configuration at a time.
Everything it returns is picklable (`Evaluation`, `Identity`).
"""

from __future__ import annotations

import os
import threading
import time
from abc import ABC, abstractmethod
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kxform.engine.params import ParamValue
from kxform.search.objective import Evaluation, Objective, Prepared, ReplayObjective


@dataclass(frozen=True)
class Identity:
    """What a worker reports once it has built its objective: the database key parts
    (hardware, what a time means), where it runs, and its reference time."""

    hardware: str
    measures: str
    objective: str
    host: str
    pid: int
    devices: str
    """The worker's `CUDA_VISIBLE_DEVICES` (empty where unset)."""


class Recipe(ABC):
    """Builds an objective inside a worker (a frozen dataclass in each subclass)."""

    @abstractmethod
    def make(self) -> Objective:
        """The objective, on this process's device."""


@dataclass(frozen=True)
class ReplayRecipe(Recipe):
    """A recorded space, answered with the recorded times.

    `pace`: each evaluation sleeps its recorded cost (compile + verification +
    benchmark) times `pace`, so a replay takes time as a device would (the scaling
    benchmark and the tests use 0.001-0.3). `slow_devices`: (device, factor) pairs:
    on the worker pinned to that device (`CUDA_VISIBLE_DEVICES`) times are multiplied
    by the factor, as on a card of the same model that runs slower (the reference
    check must undo it). `crash_at`/`crash_marker`: a fault drill: the first worker to
    start its `crash_at`-th evaluation while `crash_marker` does not exist writes the
    configuration it was given into it and exits at once (`os._exit`), as a killed
    process does; the run must still finish, with that configuration recorded once.
    `crash_key`: the configuration (its recording key, `1,2,0,3`) that kills every
    worker it is given, as a kernel that crashes its process would."""

    path: str
    pace: float = 0.0
    slow_devices: tuple[tuple[str, float], ...] = ()
    crash_at: int = 0
    crash_marker: str = ""
    crash_key: str = ""

    def slowdown(self) -> float:
        """The factor of this process's device (1.0 where it is not listed)."""
        return dict(self.slow_devices).get(os.environ.get("CUDA_VISIBLE_DEVICES", ""), 1.0)

    def make(self) -> Objective:
        from kxform.search.recorded import load_recording

        recording = load_recording(self.path)
        return PacedReplay(recording.objective, self)


class PacedReplay(ReplayObjective):
    """A replay objective that takes its recorded cost (scaled) to answer."""

    def __init__(self, base: ReplayObjective, recipe: ReplayRecipe) -> None:
        super().__init__(base.records, base.order, base.hardware, base.source)
        self.recipe = recipe
        self.slowdown = recipe.slowdown()
        self._count = 0
        self._lock = threading.Lock()

    def evaluate(self, prepared: Prepared) -> Evaluation:
        recipe = self.recipe
        with self._lock:
            self._count += 1
            count = self._count
        if recipe.crash_at and count == recipe.crash_at and recipe.crash_marker:
            try:
                with Path(recipe.crash_marker).open("x") as marker:
                    marker.write(prepared.code_key)
            except FileExistsError:
                pass
            else:
                os._exit(17)
        if recipe.crash_key and prepared.code_key == recipe.crash_key:
            os._exit(18)
        found = super().evaluate(prepared)
        if recipe.pace > 0:
            time.sleep(found.cost_s * recipe.pace)
        if found.time_ms is None or self.slowdown == 1.0:
            return found
        return Evaluation(
            found.time_ms * self.slowdown, found.spread_ms * self.slowdown, None, found.cost_s, found.detail
        )


@dataclass(frozen=True)
class KernelRecipe(Recipe):
    """The GPU objective: rewrite, compile, verify and time one kernel on the worker's
    GPU (`kxform.search.kernel_objective`). Fields are the objective's own frozen inputs."""

    target: Any
    """`TuneTarget`."""
    space: Any
    """`KernelSpace`."""
    measure: Any
    """`MeasureOptions`."""
    runtime: str = "gpu"
    """`gpu`; `cpu` rewrites, compiles and verifies on the CPU runtime, which cannot
    time (every configuration that verifies ends `runtime_failed`): the worker side of
    the GPU path, run where there is no GPU."""

    def make(self) -> Objective:
        from kxform.search.kernel_objective import KernelObjective, gpu_runtime

        if self.runtime == "cpu":
            from kxform.runtime.cpu import CpuRuntime

            return KernelObjective(self.target, self.space, CpuRuntime(), self.measure)
        return KernelObjective(self.target, self.space, gpu_runtime(), self.measure)


class EvalWorker:
    """The objective of one worker, on its device. Thread-safe: calls may overlap (a
    Ray actor with `max_concurrency`, the local worker's request threads); preparing
    runs concurrently, measuring one at a time."""

    def __init__(self, recipe: Recipe) -> None:
        self.objective = recipe.make()
        self._device = threading.Lock()

    def identity(self) -> Identity:
        import socket

        o = self.objective
        return Identity(
            o.hardware,
            o.measures,
            o.name,
            socket.gethostname(),
            os.getpid(),
            os.environ.get("CUDA_VISIBLE_DEVICES", ""),
        )

    def evaluate(self, config: dict[str, ParamValue]) -> Evaluation:
        """One configuration prepared and measured; the objective observes the result (the
        bar of its cut-off and pruning is the best this worker measured)."""
        prepared = self.objective.prepare(config)
        if prepared.failure is not None:
            return prepared.failure
        with self._device:
            evaluation = self.objective.evaluate(prepared)
        self.objective.observe(evaluation)
        return evaluation

    def close(self) -> None:
        self.objective.close()
