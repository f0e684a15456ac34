"""Prepare ahead, evaluate in turn: a bounded producer/consumer over an Objective.

Building a candidate (generating and compiling its code) uses the CPU; measuring it
uses the device. The pipeline keeps up to `ahead` candidates being prepared on a pool
of `jobs` threads while the calling thread evaluates the oldest prepared one, so the
device never waits for the compiler once the pipeline is full. Proposals are asked
for only when a slot frees, so a strategy sees every result that arrived before it
proposes (with `ahead=1` the search is strictly sequential, the replay default).

The pipeline knows nothing about strategies or databases: it pulls configurations
from `next_config` (None: no more), and hands each (configuration, evaluation) to
`on_result`, which returns False to stop. Exceptions from `prepare` or `evaluate`
propagate after the outstanding work is cancelled.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from kxform.search.objective import Evaluation, Objective, Prepared


@dataclass(frozen=True)
class PipelineOptions:
    jobs: int = 1
    """Threads preparing candidates."""
    ahead: int = 1
    """Candidates proposed but not yet evaluated, at most (1: sequential)."""

    def __post_init__(self) -> None:
        if self.jobs < 1 or self.ahead < 1:
            raise ValueError("jobs and ahead must be at least 1")


Ticket = Any
"""Whatever the caller attaches to a proposal (a row of the space, say)."""


def run_pipeline(
    objective: Objective,
    next_config: Callable[[], tuple[Ticket, dict[str, Any]] | None],
    on_result: Callable[[Ticket, Prepared, Evaluation], bool],
    options: PipelineOptions = PipelineOptions(),
) -> None:
    """Evaluate configurations from `next_config` until it returns None or
    `on_result` returns False."""
    if options.ahead == 1 and options.jobs == 1:
        _sequential(objective, next_config, on_result)
        return
    queue: deque[tuple[Ticket, Future[Prepared]]] = deque()
    exhausted = False
    with ThreadPoolExecutor(max_workers=options.jobs, thread_name_prefix="kxform-prepare") as pool:
        try:
            while True:
                while not exhausted and len(queue) < options.ahead:
                    item = next_config()
                    if item is None:
                        exhausted = True
                        break
                    ticket, config = item
                    queue.append((ticket, pool.submit(objective.prepare, config)))
                if not queue:
                    return
                ticket, future = queue.popleft()
                prepared = future.result()
                evaluation = prepared.failure or objective.evaluate(prepared)
                if not on_result(ticket, prepared, evaluation):
                    return
        finally:
            for _, future in queue:
                future.cancel()


def _sequential(
    objective: Objective,
    next_config: Callable[[], tuple[Ticket, dict[str, Any]] | None],
    on_result: Callable[[Ticket, Prepared, Evaluation], bool],
) -> None:
    while True:
        item = next_config()
        if item is None:
            return
        ticket, config = item
        prepared = objective.prepare(config)
        evaluation = prepared.failure or objective.evaluate(prepared)
        if not on_result(ticket, prepared, evaluation):
            return
