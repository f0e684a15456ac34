"""The tuning loop: a strategy proposes, the pipeline prepares and evaluates, the
database remembers.

Budgets count evaluations (`budget`) or seconds of evaluation cost (`time_s`: for a
replay the recorded GPU time, on a device the measured cost). A configuration the cost
model pruned (never built, verified nor timed) is recorded but not counted against the
budget of evaluations; a run stops all the same once it has recorded PRUNED_ALLOWANCE
times its budget. A configuration already
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
from dataclasses import replace

from kxform.search.cost import rank_agreement
from kxform.search.db import TuneKey, TuningDB
from kxform.search.objective import Evaluation, Objective, Prepared
from kxform.search.pipeline import PipelineOptions, run_pipeline
from kxform.search.space import SearchSpace
from kxform.search.strategy import DEFAULT, History, Prior, SearchHints, make_strategy

PRUNED_ALLOWANCE = 2
"""Configurations recorded (pruned ones included), at most, per evaluation of the budget."""


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
    stage: str = ""
    """The strategy's stage that proposed it (`structure`, `refine`, `open`; "" where the
    strategy has none, or the step was not proposed by it)."""

    def to_json(self) -> dict[str, Any]:
        return {
            "index": self.index,
            "config": self.config,
            "source": self.source,
            "stage": self.stage,
            **self.evaluation.to_json(),
        }


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
        return sum(1 for s in self.steps if s.source == "measured" and not s.evaluation.pruned)

    @property
    def counted(self) -> int:
        """Evaluations against the budget (pruned configurations are not)."""
        return sum(1 for s in self.steps if not s.evaluation.pruned)

    def model_agreement(self) -> dict[str, Any]:
        """How well the cost model's predictions ranked the measured times of this run:
        Kendall's tau over the configurations with both (timed to the end: a cut-off time
        is of a few launches)."""
        pairs = [
            (s.evaluation.prediction.estimate_ms, s.evaluation.time_ms)
            for s in self.steps
            if s.evaluation.prediction is not None and s.evaluation.time_ms is not None and not s.evaluation.cut_off
        ]
        return {"pairs": len(pairs), "kendall_tau": rank_agreement(pairs)}

    @property
    def stages(self) -> tuple[tuple[str, int], ...]:
        """The strategy's stages in the order they began, with their evaluations."""
        counts: dict[str, int] = {}
        for step in self.steps:
            if step.stage:
                counts[step.stage] = counts.get(step.stage, 0) + 1
        return tuple(counts.items())


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

    counted: int = 0
    stages: dict[int, str] = field(default_factory=dict)
    """Row -> the strategy's stage that proposed it."""

    def record(self, config: dict[str, ParamValue], evaluation: Evaluation, source: str, row: int) -> Step:
        self.history.add(row, evaluation.time_ms)
        if source == "measured":
            self.cost_s += evaluation.cost_s
        if not evaluation.pruned:
            self.counted += 1
        best_ms = self.best.evaluation.time_ms if self.best else None
        improved = evaluation.time_ms is not None and (best_ms is None or evaluation.time_ms < best_ms)
        step = Step(
            len(self.steps),
            config,
            evaluation,
            source,
            evaluation.time_ms if improved else best_ms,
            self.stages.get(row, ""),
        )
        if improved:
            self.best = step
        self.steps.append(step)
        return step

    def over_budget(self, in_flight: int = 0) -> bool:
        budget = self.options.budget
        if budget is not None and (
            self.counted + in_flight >= budget or len(self.steps) + in_flight >= budget * PRUNED_ALLOWANCE
        ):
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
    hints: SearchHints | None = None,
) -> TuneResult:
    """Search `space` for the fastest configuration under `options`' budget.

    `runner` evaluates what the search proposes (default: `objective` through the
    pipeline, `options.pipeline`); a pool of timing workers
    (`kxform.search.pool.WorkerPool.run`) evaluates several configurations at once,
    the strategy proposing while earlier ones are pending. Either way results come
    back to this thread, the only one that writes the database. `hints`: what the
    strategy may know of a kernel's space (kxform.search.strategy.SearchHints)."""
    if hints is not None:
        hints = replace(hints, budget=options.budget)
    strategy = make_strategy(options.strategy, space, options.seed, prior, hints)
    run = _Run(space, options, History(len(space)))

    def observed(step: Step) -> None:
        if objective is not None:
            objective.observe(step.evaluation)
        if on_step:
            on_step(step)

    if options.resume and db is not None and key is not None:
        for stored in db.all(key):
            row = space.row_of(stored.config)
            if row is not None and not run.history.visited[row]:
                observed(run.record(space.config(row), stored.evaluation, "resumed", row))

    start = space.default_row() if options.start_at_defaults else None

    def next_config() -> tuple[int, dict[str, Any]] | None:
        nonlocal start
        in_flight = len(run.history.pending)
        while True:
            if run.over_budget(in_flight):
                return None
            row, start = start, None
            if row is None or run.history.visited[row]:  # no defaults to start at, or resumed with them
                started = time.perf_counter()
                row = strategy.propose(run.history)
                run.strategy_s += time.perf_counter() - started
                if row is not None and strategy.stage:
                    run.stages[row] = strategy.stage
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
            observed(run.record(config, stored, "database", row))

    def on_result(row: int, prepared: Prepared, evaluation: Evaluation) -> bool:
        config = prepared.as_dict()
        if db is not None and key is not None and not evaluation.pruned:  # a prediction is no measurement
            db.put(key, config, evaluation)
        observed(run.record(config, evaluation, "measured", row))
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
