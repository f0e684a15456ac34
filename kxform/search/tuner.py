"""The tuning loop: a strategy proposes, the pipeline prepares and evaluates, the
database remembers.

Budgets count evaluations (`budget`) or seconds of evaluation cost (`time_s`: for a
replay the recorded GPU time, on a device the measured cost). A configuration already
in the database for this key (kernel hash, hardware, kxform version) is never
evaluated again: its stored result is used and costs nothing. With `resume`, every
stored result for the key is given to the strategy first and counts against the
budget, so a killed run started again with the same options continues where it
stopped.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from kxform.engine.params import ParamValue
from kxform.errors import UsageError
from kxform.search.db import TuneKey, TuningDB
from kxform.search.objective import Evaluation, Objective, Prepared
from kxform.search.pipeline import PipelineOptions, run_pipeline
from kxform.search.space import SearchSpace
from kxform.search.strategy import DEFAULT, History, Prior, make_strategy


Runner = Callable[
    [Callable[[], "tuple[int, dict[str, Any]] | None"], Callable[[int, Prepared, Evaluation], bool]], None
]
"""Evaluates configurations from `next_config` until it returns None or `on_result`
returns False (`kxform.search.pipeline.run_pipeline`'s contract)."""


@dataclass(frozen=True)
class TuneOptions:
    strategy: str = DEFAULT
    budget: int | None = None
    """Evaluations, at most (resumed ones included)."""
    time_s: float | None = None
    """Seconds of evaluation cost after which no new evaluation starts."""
    seed: int = 0
    resume: bool = False
    pipeline: PipelineOptions = field(default_factory=PipelineOptions)
    start_at_defaults: bool = False
    """Evaluate the parameters' defaults first (the source's current values, where the
    space comes from a kernel): the strategy then starts from the code as it is, and the
    incumbent is never missed for want of budget."""

    def __post_init__(self) -> None:
        if self.budget is not None and self.budget < 1:
            raise UsageError(f"--budget {self.budget}: must be at least 1 evaluation")
        if self.time_s is not None and not self.time_s > 0:
            raise UsageError(f"--time {self.time_s:g}: must be more than 0 seconds")


@dataclass(frozen=True)
class Step:
    """One evaluation of the run, in order."""

    index: int
    config: dict[str, ParamValue]
    evaluation: Evaluation
    source: str
    """`measured` (this run), `database` (stored earlier: not repeated) or `resumed`."""
    best_ms: float | None

    def to_json(self) -> dict[str, Any]:
        return {"index": self.index, "config": self.config, "source": self.source, **self.evaluation.to_json()}


@dataclass(frozen=True)
class TuneResult:
    steps: tuple[Step, ...]
    best: Step | None
    space_size: int
    strategy: str
    stopped: str
    """Why the run ended: `budget`, `time`, `exhausted` (every configuration evaluated)."""
    cost_s: float
    strategy_s: float
    prior_sources: tuple[str, ...] = ()

    @property
    def measured(self) -> int:
        return sum(1 for s in self.steps if s.source == "measured")


@dataclass
class _Run:
    space: SearchSpace
    options: TuneOptions
    history: History
    steps: list[Step] = field(default_factory=list)
    cost_s: float = 0.0
    strategy_s: float = 0.0
    stopped: str = "exhausted"
    best: Step | None = None

    def record(self, config: dict[str, ParamValue], evaluation: Evaluation, source: str, row: int) -> Step:
        self.history.add(row, evaluation.time_ms)
        if source == "measured":
            self.cost_s += evaluation.cost_s
        best_ms = self.best.evaluation.time_ms if self.best else None
        improved = evaluation.time_ms is not None and (best_ms is None or evaluation.time_ms < best_ms)
        step = Step(len(self.steps), config, evaluation, source, evaluation.time_ms if improved else best_ms)
        if improved:
            self.best = step
        self.steps.append(step)
        return step

    def over_budget(self) -> bool:
        if self.options.budget is not None and len(self.steps) >= self.options.budget:
            self.stopped = "budget"
            return True
        if self.options.time_s is not None and self.cost_s >= self.options.time_s:
            self.stopped = "time"
            return True
        return False


def tune(
    space: SearchSpace,
    objective: Objective | None,
    options: TuneOptions,
    *,
    db: TuningDB | None = None,
    key: TuneKey | None = None,
    prior: Prior | None = None,
    on_step: Callable[[Step], None] | None = None,
    runner: Runner | None = None,
) -> TuneResult:
    """Search `space` for the fastest configuration under `options`' budget.

    `runner` evaluates what the search proposes (default: `objective` through the
    pipeline, `options.pipeline`); a pool of timing workers
    (`kxform.search.pool.WorkerPool.run`) evaluates several configurations at once,
    the strategy proposing while earlier ones are pending. Either way results come
    back to this thread, the only one that writes the database."""
    strategy = make_strategy(options.strategy, space, options.seed, prior)
    run = _Run(space, options, History(len(space)))
    if options.resume and db is not None and key is not None:
        for stored in db.all(key):
            row = space.row_of(stored.config)
            if row is not None and not run.history.visited[row]:
                step = run.record(space.config(row), stored.evaluation, "resumed", row)
                if on_step:
                    on_step(step)

    start = space.default_row() if options.start_at_defaults else None

    def next_config() -> tuple[int, dict[str, Any]] | None:
        nonlocal start
        in_flight = len(run.history.pending)
        while True:
            if run.options.budget is not None and len(run.steps) + in_flight >= run.options.budget:
                run.over_budget()
                return None
            if run.over_budget():
                return None
            row, start = start, None
            if row is None or run.history.visited[row]:  # no defaults to start at, or resumed with them
                started = time.perf_counter()
                row = strategy.propose(run.history)
                run.strategy_s += time.perf_counter() - started
            if row is None:
                run.stopped = "exhausted"
                return None
            if run.history.visited[row]:
                raise AssertionError(f"strategy {options.strategy!r} proposed configuration {space.key(row)} twice")
            config = space.config(row)
            stored = db.get(key, config) if db is not None and key is not None else None
            if stored is None:
                run.history.start(row)
                return row, config
            step = run.record(config, stored, "database", row)
            if on_step:
                on_step(step)

    def on_result(row: int, prepared: Prepared, evaluation: Evaluation) -> bool:
        config = prepared.as_dict()
        if db is not None and key is not None:
            db.put(key, config, evaluation)
        step = run.record(config, evaluation, "measured", row)
        if on_step:
            on_step(step)
        return not run.over_budget()

    if runner is None:
        assert objective is not None, "tune: an objective or a runner"
        run_pipeline(objective, next_config, on_result, options.pipeline)
    else:
        runner(next_config, on_result)
    if run.history.exhausted and run.stopped not in ("budget", "time"):
        run.stopped = "exhausted"
    return TuneResult(
        tuple(run.steps),
        run.best,
        len(space),
        options.strategy,
        run.stopped,
        run.cost_s,
        run.strategy_s,
        prior.sources if prior else (),
    )
