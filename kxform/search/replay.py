"""Replaying a strategy against a recording, and how fast a run reached the optimum.

The benchmark (`tools/bench_search.py`) and the tests use this: a run is the sequence
of distinct configurations a strategy evaluated, with each one's recorded time and
cost; `Reach` says after how many evaluations, and after how much recorded GPU time
(compile + verification + benchmark), the best time so far came within a fraction
of the space's optimum.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from kxform.search.objective import ReplayObjective
from kxform.search.space import SearchSpace
from kxform.search.strategy import History, Prior, make_strategy


@dataclass(frozen=True)
class Run:
    """One replayed search: per evaluation, the time (None: failed) and its cost."""

    times: tuple[float | None, ...]
    costs_s: tuple[float, ...]
    strategy_s: float = 0.0
    """Time the strategy itself spent proposing (seconds, all proposals)."""

    def reach(self, optimum: float, within: float) -> tuple[int, float] | None:
        """(evaluations, recorded GPU seconds) until the best time was within
        `within` (0.01: 1%) of `optimum`; None when the run never got there."""
        spent = 0.0
        limit = optimum * (1.0 + within)
        for index, (value, cost) in enumerate(zip(self.times, self.costs_s)):
            spent += cost
            if value is not None and value <= limit:
                return index + 1, spent
        return None


def replay(
    space: SearchSpace,
    objective: ReplayObjective,
    strategy: str,
    seed: int,
    budget: int,
    prior: Prior | None = None,
    stop_below: float | None = None,
) -> Run:
    """Run `strategy` for `budget` evaluations (or until a time <= `stop_below`)."""
    search = make_strategy(strategy, space, seed, prior)
    history = History(len(space))
    times: list[float | None] = []
    costs: list[float] = []
    spent = 0.0
    for _ in range(min(budget, len(space))):
        started = time.perf_counter()
        row = search.propose(history)
        spent += time.perf_counter() - started
        if row is None:
            break
        if history.visited[row]:
            raise AssertionError(f"strategy {strategy!r} proposed row {row} twice")
        history.start(row)
        result = objective.evaluate(objective.prepare(space.config(row)))
        history.add(row, result.time_ms)
        times.append(result.time_ms)
        costs.append(result.cost_s)
        if stop_below is not None and result.time_ms is not None and result.time_ms <= stop_below:
            break
    return Run(tuple(times), tuple(costs), spent)
