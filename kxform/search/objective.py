"""What the search optimises: a configuration in, a time with its spread (or a failure
class) and what the evaluation cost out.

An `Objective` works in two steps so that the pipeline (`kxform.search.pipeline`) can
overlap them: `prepare` is the CPU-side work for one configuration (generate the code,
compile it) and may run in worker threads, several ahead; `evaluate` is the device
part (verify the code once per distinct `code_key`, then time it) and is called from
one thread, one configuration at a time. A failure is a result, never an exception:
only input errors (a configuration the objective cannot know about) raise.

`ReplayObjective` answers from a recorded space (`kxform.search.recorded`): each
evaluation costs what the recording says it cost on the GPU, so budgets in seconds and
strategy comparisons mean the same as on the device.
"""

from __future__ import annotations

import enum
from abc import ABC, abstractmethod
from dataclasses import dataclass, field, replace
from typing import Any

from kxform.engine.params import Config, ParamValue
from kxform.errors import InputError
from kxform.search.cost import Prediction


class Failure(enum.Enum):
    """Why a configuration produced no time (Kernel Tuner's failure classes, plus
    verification, which kxform checks for every distinct code, and pruning)."""

    INVALID = "invalid"
    COMPILE = "compile_failed"
    VERIFY = "verification_failed"
    RUNTIME = "runtime_failed"
    PRUNED = "pruned"
    """Not verified nor timed: the cost model predicted it several times slower than the
    best measured so far, after its predictions had ranked this kernel's measurements
    well (kxform.search.kernel_objective). A prediction, not a measurement: never stored
    in the tuning database, not counted against the budget of evaluations."""


CUT_OFF = "cut_off"
"""The status of an evaluation whose timing stopped after its first launches."""


@dataclass(frozen=True)
class Evaluation:
    """One measured configuration: median time and spread (ms) or a failure class;
    `cost_s` is what obtaining it cost (compile + verification + benchmark).

    `cut_off`: the time is the median of the first timed launches only, which were
    already slower than the best configuration so far beyond both spreads, so the rest
    were not run (a time, and a slower one; never the best). `prediction`: what the cost
    model predicted before the configuration was built (kxform.search.cost)."""

    time_ms: float | None
    spread_ms: float = 0.0
    failure: Failure | None = None
    cost_s: float = 0.0
    detail: str = ""
    cut_off: bool = False
    prediction: Prediction | None = None

    def __post_init__(self) -> None:
        if (self.time_ms is None) == (self.failure is None):
            raise ValueError("an evaluation has either a time or a failure")
        if self.cut_off and self.time_ms is None:
            raise ValueError("a cut-off evaluation has the time of its first launches")

    @property
    def ok(self) -> bool:
        return self.failure is None

    @property
    def pruned(self) -> bool:
        return self.failure is Failure.PRUNED

    @property
    def status(self) -> str:
        """`ok`, `cut_off`, or the failure class (the log's `status`)."""
        return self.failure.value if self.failure else CUT_OFF if self.cut_off else "ok"

    @classmethod
    def failed(
        cls, failure: Failure, cost_s: float = 0.0, detail: str = "", prediction: Prediction | None = None
    ) -> Evaluation:
        return cls(None, 0.0, failure, cost_s, detail, prediction=prediction)

    def predicted(self, prediction: Prediction | None) -> Evaluation:
        """This evaluation with the prediction made for it."""
        return replace(self, prediction=prediction)

    def to_json(self) -> dict[str, Any]:
        return {
            "time_ms": self.time_ms,
            "spread_ms": self.spread_ms,
            "failure": self.failure.value if self.failure else None,
            "status": self.status,
            "cost_s": self.cost_s,
            "detail": self.detail,
            "predicted_ms": self.prediction.estimate_ms if self.prediction else None,
        }


@dataclass(frozen=True)
class Prepared:
    """The result of `prepare`: the configuration plus whatever the device step needs.
    Configurations that generate identical code share a `code_key` (verified once)."""

    config: tuple[tuple[str, ParamValue], ...]
    code_key: str = ""
    payload: Any = field(default=None, compare=False)
    failure: Evaluation | None = None
    """Set when preparing already failed (compile error): `evaluate` is then skipped."""

    def as_dict(self) -> dict[str, ParamValue]:
        return dict(self.config)


class Objective(ABC):
    """Evaluates configurations of one kernel on one piece of hardware."""

    name: str = "objective"
    hardware: str = ""
    """Identity of the hardware measured on (database key)."""
    measures: str = ""
    """What a time means beyond the kernel and the hardware (the timing size, the passes):
    part of the database key, so results of different measurements never mix."""

    def prepare(self, config: Config) -> Prepared:
        """CPU-side work for `config` (thread-safe; may run ahead of `evaluate`)."""
        return Prepared(tuple(config.items()))

    @abstractmethod
    def evaluate(self, prepared: Prepared) -> Evaluation:
        """Measure one prepared configuration (called from one thread at a time)."""

    def observe(self, evaluation: Evaluation) -> None:  # noqa: B027 (most objectives learn nothing from results)
        """A result of the run (measured here, or stored earlier): what the cut-off and the
        pruning compare against (kxform.search.kernel_objective)."""

    def close(self) -> None:  # noqa: B027 (most objectives hold nothing to release)
        """Release devices and workers."""


class ReplayObjective(Objective):
    """Answers from a recording: `records` maps Kernel Tuner cache keys (values joined
    by commas, in `order`) to evaluations."""

    name = "replay"

    def __init__(self, records: dict[str, Evaluation], order: tuple[str, ...], hardware: str, source: str) -> None:
        self.records = records
        self.order = order
        self.hardware = hardware
        self.source = source

    def key(self, config: Config) -> str:
        return ",".join(str(config[name]) for name in self.order)

    def prepare(self, config: Config) -> Prepared:
        key = self.key(config)
        return Prepared(tuple(config.items()), code_key=key)

    def evaluate(self, prepared: Prepared) -> Evaluation:
        try:
            return self.records[prepared.code_key]
        except KeyError:
            raise InputError(f"{self.source}: configuration {prepared.code_key} is not recorded") from None
