"""Evaluating on several timing workers at once: the driver's side.

A `Backend` owns the workers (local processes pinned one per GPU,
`kxform.search.local_pool`; Ray actors, `kxform.search.ray_pool`) and only moves
configurations to them and evaluations back. `WorkerPool` is what the tuner drives,
with the pipeline's contract (`kxform.search.pipeline.run_pipeline`): it pulls
configurations from `next_config` whenever a worker has a free slot, so the strategy
proposes a batch at first (one per slot) and then one per result, seeing every
result that has arrived; each result goes to `on_result` on the driver's thread, the
only one that writes the database.

Nothing is lost or counted twice: every submitted configuration carries its ticket
(the row of the space); a result is accepted only for a ticket in flight, and a
worker that dies takes its tickets with it only until the backend reports them lost:
they are then submitted again (the backend's own restart, Ray's actor restarts and
task retries, comes first; this is the last resort once it gave up), and a
configuration that loses its worker MAX_TRIES times is recorded as `runtime_failed`,
so that a configuration that kills its worker cannot stall the run. A lost
configuration is submitted again *alone* (to an idle worker, which takes nothing else
until it is done): it may only have been in flight beside the one that killed the
worker, and alone it cannot be charged with another's kill. Only the killer goes on
losing its worker. After
`on_result` asks to stop, the evaluations in flight still come in and are recorded.

Reference check: before tuning, every worker evaluates one reference configuration
(the space's defaults). Times are then normalised to the first worker's scale: a
worker's times are multiplied by `reference on worker 0 / reference on this worker`.
Why normalise rather than keep results per device: the workers are GPUs of one model
(the pool refuses a mix: different models rank configurations differently, and one
database key holds one model's times), and the search compares configurations
measured on different cards; a card that runs a few per cent slower (clocks, power
or thermal limits) would otherwise make every configuration it happened to time look
worse. The factor of each worker is reported; the raw time is kept in the detail.
"""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from kxform.engine.params import ParamValue
from kxform.errors import InputError
from kxform.search.objective import Evaluation, Failure, Prepared
from kxform.search.workers import Identity

MAX_TRIES = 3
"""Workers a configuration may lose (a killed process, a lost node) before it is
recorded as a runtime failure."""


@dataclass(frozen=True)
class Done:
    """A finished submission: its evaluation, or None when its worker was lost."""

    ticket: int
    worker: int
    evaluation: Evaluation | None
    why: str = ""


class Backend(ABC):
    """Starts the workers and carries configurations and evaluations."""

    @abstractmethod
    def start(self) -> list[Identity]:
        """Start every worker; their identities, in worker order."""

    @abstractmethod
    def submit(self, worker: int, ticket: int, config: Mapping[str, ParamValue]) -> None:
        """Give `config` to `worker` (returns at once)."""

    @abstractmethod
    def wait(self) -> list[Done]:
        """Block until at least one submission finished (or was lost); those that did."""

    @abstractmethod
    def close(self) -> None:
        """Stop the workers."""

    def alive(self, worker: int) -> bool:
        """Whether `worker` can take work (False: gone for good)."""
        return True


@dataclass(frozen=True)
class WorkerInfo:
    identity: Identity
    reference_ms: float
    factor: float
    """Times of this worker are multiplied by this (1.0 for the first)."""
    evaluations: int = 0


@dataclass(frozen=True)
class PoolReport:
    """What the pool did: its workers, resubmissions, and the wall time of the search."""

    workers: tuple[WorkerInfo, ...]
    resubmitted: int
    lost: int
    """Configurations recorded as failed after losing MAX_TRIES workers."""
    wall_s: float

    def to_json(self) -> dict[str, Any]:
        return {
            "workers": [
                {
                    "host": w.identity.host,
                    "devices": w.identity.devices,
                    "pid": w.identity.pid,
                    "hardware": w.identity.hardware,
                    "reference_ms": w.reference_ms,
                    "factor": round(w.factor, 6),
                    "evaluations": w.evaluations,
                }
                for w in self.workers
            ],
            "resubmitted": self.resubmitted,
            "lost": self.lost,
            "wall_s": round(self.wall_s, 3),
        }


@dataclass
class _Flight:
    worker: int
    config: dict[str, ParamValue]
    tries: int = 1
    alone: bool = False
    """Submitted again after a loss: runs with no other configuration on its worker."""


@dataclass
class WorkerPool:
    """Drives a backend's workers for the tuner (see the module's docstring)."""

    backend: Backend
    slots: int = 2
    """Configurations in flight per worker (2: one compiles while one is timed)."""
    identities: list[Identity] = field(default_factory=list)
    factors: list[float] = field(default_factory=list)
    references: list[float] = field(default_factory=list)
    counts: list[int] = field(default_factory=list)
    resubmitted: int = 0
    lost: int = 0
    wall_s: float = 0.0

    def start(self, reference: Mapping[str, ParamValue]) -> Identity:
        """Start the workers and time `reference` on each; the first worker's identity.
        A mix of GPU models, or a reference that fails, is an InputError."""
        self.identities = self.backend.start()
        models = sorted({i.hardware for i in self.identities})
        if len(models) > 1:
            raise InputError(
                f"the workers are not one GPU model ({', '.join(models)}): their times cannot be "
                "compared; tune on each model separately"
            )
        for worker in range(len(self.identities)):
            self.backend.submit(worker, -1 - worker, dict(reference))
        results: dict[int, Evaluation] = {}
        while len(results) < len(self.identities):
            for done in self.backend.wait():
                if done.evaluation is None or done.evaluation.time_ms is None:
                    why = done.why or (done.evaluation.detail if done.evaluation else "")
                    raise InputError(
                        f"reference configuration {_label(reference)} failed on worker {done.worker} "
                        f"({self.identities[done.worker].devices or 'no device'}): {why}"
                    )
                results[done.worker] = done.evaluation
        self.references = [results[w].time_ms or 0.0 for w in range(len(self.identities))]
        self.factors = [self.references[0] / ref for ref in self.references]
        self.counts = [0] * len(self.identities)
        return self.identities[0]

    def run(
        self,
        next_config: Callable[[], tuple[int, dict[str, Any]] | None],
        on_result: Callable[[int, Prepared, Evaluation], bool],
    ) -> None:
        """Evaluate configurations from `next_config` until it returns None or
        `on_result` returns False; the evaluations in flight then still finish."""
        started = time.perf_counter()
        flights: dict[int, _Flight] = {}
        waiting: list[int] = []  # tickets lost once, to be submitted again alone
        load = [0] * len(self.identities)
        taking = True
        try:
            while True:
                self._submit_alone(waiting, flights, load)
                while taking and not waiting:  # lost configurations first, or an idle worker never comes
                    worker = self._free(load)
                    if worker is None:
                        if not flights and not any(map(self.backend.alive, range(len(load)))):
                            raise InputError("every worker was lost: the run cannot go on")
                        break
                    item = next_config()
                    if item is None:
                        taking = False
                        break
                    ticket, config = item
                    flights[ticket] = _Flight(worker, config)
                    load[worker] += 1
                    self.backend.submit(worker, ticket, config)
                if not flights:
                    return
                if len(waiting) == len(flights):  # nothing runs, and no idle worker is alive to take them
                    raise InputError("every worker was lost: the run cannot go on")
                for done in self.backend.wait():
                    flight = flights.get(done.ticket)
                    if flight is None or done.ticket in waiting:
                        continue  # not in flight: never accepted twice
                    load[flight.worker] -= self.slots if flight.alone else 1
                    evaluation = self._settle(done, flight, waiting)
                    if evaluation is None:
                        continue  # to be submitted again
                    del flights[done.ticket]
                    self.counts[done.worker] += 1
                    if not on_result(done.ticket, Prepared(tuple(flight.config.items())), evaluation):
                        taking = False
        finally:
            self.wall_s = time.perf_counter() - started

    def _settle(self, done: Done, flight: _Flight, waiting: list[int]) -> Evaluation | None:
        """The evaluation to record for `done`, or None when it waits to be submitted again."""
        if done.evaluation is not None:
            return self._normalised(done.worker, done.evaluation)
        if flight.tries >= MAX_TRIES:
            self.lost += 1
            return Evaluation.failed(Failure.RUNTIME, 0.0, f"lost its worker {flight.tries} times: {done.why}")
        flight.tries += 1
        flight.alone = True
        waiting.append(done.ticket)
        self.resubmitted += 1
        return None

    def _submit_alone(self, waiting: list[int], flights: dict[int, _Flight], load: list[int]) -> None:
        """Submit lost configurations again, each to an idle live worker that then takes
        nothing else until it is done (its load is all its slots)."""
        while waiting:
            idle = [w for w in range(len(load)) if load[w] == 0 and self.backend.alive(w)]
            if not idle:
                return
            ticket = waiting.pop(0)
            flight = flights[ticket]
            flight.worker = idle[0]
            load[idle[0]] += self.slots
            self.backend.submit(idle[0], ticket, flight.config)

    def _free(self, load: list[int]) -> int | None:
        """The live worker with the fewest configurations in flight (below `slots`)."""
        live = [w for w in range(len(load)) if self.backend.alive(w) and load[w] < self.slots]
        return min(live, key=lambda w: (load[w], w)) if live else None

    def _normalised(self, worker: int, evaluation: Evaluation) -> Evaluation:
        factor = self.factors[worker] if self.factors else 1.0
        if evaluation.time_ms is None or factor == 1.0:
            return evaluation
        detail = f"{evaluation.detail}; " if evaluation.detail else ""
        return Evaluation(
            evaluation.time_ms * factor,
            evaluation.spread_ms * factor,
            None,
            evaluation.cost_s,
            f"{detail}worker {worker}: {evaluation.time_ms:.6g} ms x {factor:.4f} (reference)",
        )

    def report(self) -> PoolReport:
        workers = tuple(
            WorkerInfo(i, r, f, c) for i, r, f, c in zip(self.identities, self.references, self.factors, self.counts)
        )
        return PoolReport(workers, self.resubmitted, self.lost, self.wall_s)

    def close(self) -> None:
        self.backend.close()


def _label(config: Mapping[str, ParamValue]) -> str:
    return ",".join(f"{k}={v}" for k, v in config.items())
