"""One small base class for search strategies, the history they read, and the registry.

A strategy proposes rows of a `SearchSpace` (valid configurations only, by
construction) one at a time; `History` tells it what has been measured (log time, or
NaN for a failed configuration, which is remembered as invalid and never proposed
again) and what is still pending in the pipeline. A strategy must never propose a
visited or pending row: the tuner asserts it. Strategies live one per module in
`kxform.search.strategies` and are imported only when chosen.
"""

from __future__ import annotations

import importlib
import math
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import ClassVar

import numpy as np

from kxform.errors import UsageError
from kxform.search.space import SearchSpace


@dataclass
class History:
    """Evaluations so far, in order, for one space. `value` is log(time in ms); NaN
    marks a configuration that failed (compile, launch, verification)."""

    size: int
    rows: list[int] = field(default_factory=list)
    values: list[float] = field(default_factory=list)
    pending: set[int] = field(default_factory=set)
    visited: np.ndarray = field(init=False)

    def __post_init__(self) -> None:
        self.visited = np.zeros(self.size, dtype=bool)

    def start(self, row: int) -> None:
        """`row` was proposed and is being evaluated."""
        self.pending.add(row)
        self.visited[row] = True

    def add(self, row: int, time_ms: float | None) -> None:
        """The result of `row` (None: failed)."""
        self.pending.discard(row)
        self.visited[row] = True
        self.rows.append(row)
        self.values.append(math.log(time_ms) if time_ms is not None and time_ms > 0 else math.nan)

    def __len__(self) -> int:
        return len(self.rows)

    @property
    def exhausted(self) -> bool:
        return bool(self.visited.all())

    def best(self) -> tuple[int, float] | None:
        """(row, log time) of the fastest configuration so far."""
        values = np.asarray(self.values)
        ok = ~np.isnan(values)
        if not ok.any():
            return None
        index = int(np.flatnonzero(ok)[np.argmin(values[ok])])
        return self.rows[index], float(values[index])

    def unvisited(self) -> np.ndarray:
        return np.flatnonzero(~self.visited)

    def restricted(self, allowed: np.ndarray) -> History:
        """This history as a strategy proposing among the `allowed` rows only sees it: the
        others count as visited (the measurements are the same lists, read only)."""
        view = replace(self)
        view.visited = self.visited | ~allowed
        return view


@dataclass(frozen=True)
class Prior:
    """Earlier results of the same (or a similar) kernel elsewhere: per row of the
    current space, a predicted standardised log time (NaN where nothing is known),
    the sources it combines and, per source, its own scores (one row per source; a
    strategy may weigh the sources by how well each predicts what it measures)."""

    score: np.ndarray
    sources: tuple[str, ...] = ()
    per_source: np.ndarray | None = None
    """Shape (sources, rows): each source's standardised log time, NaN where unknown."""
    weights: tuple[float, ...] = ()
    """Each source's initial weight (empty: all alike); `score` is the weighted mean."""

    def columns(self) -> np.ndarray:
        """Per-source scores, shape (sources, rows) (the mean alone when not kept)."""
        return self.per_source if self.per_source is not None else self.score[None, :]

    @property
    def known(self) -> np.ndarray:
        return ~np.isnan(self.score)


@dataclass(frozen=True)
class SearchHints:
    """What a strategy may know of a kernel's space beyond its rows (a recorded space has
    none): which parameters change the parallel structure of the kernel (a pass's switch
    and parameters, `Pass.structural`), the cost model's predicted milliseconds of
    a row (None where it cannot tell; computed on demand: a rewrite each), and the run's
    budget of evaluations (None: bounded by time)."""

    structure: tuple[bool, ...] = ()
    """Per parameter of the space, in order: whether it belongs to a structure pass."""
    predict: Callable[[int], float | None] | None = field(default=None, compare=False)
    budget: int | None = None


class Strategy(ABC):
    """Proposes the next configuration to evaluate."""

    name: ClassVar[str] = ""
    summary: ClassVar[str] = ""

    def __init__(
        self,
        space: SearchSpace,
        rng: np.random.Generator,
        prior: Prior | None = None,
        hints: SearchHints | None = None,
    ) -> None:
        self.space = space
        self.rng = rng
        self.prior = prior
        self.hints = hints
        self.stage = ""
        """The stage of the last proposal, for strategies that search in stages ("": none)."""

    @abstractmethod
    def propose(self, history: History) -> int | None:
        """A row not yet visited nor pending, or None when there is nothing left."""


STRATEGIES: dict[str, str] = {
    "model": "kxform.search.strategies.model",
    "random": "kxform.search.strategies.random_search",
    "exhaustive": "kxform.search.strategies.exhaustive",
}
"""Strategy name -> module defining it (imported when the strategy is chosen)."""

DEFAULT = "model"


def load_strategy(name: str) -> type[Strategy]:
    """The strategy class called `name`; an unknown name is a UsageError listing them."""
    try:
        module_name = STRATEGIES[name]
    except KeyError:
        raise UsageError(f"unknown strategy {name!r} (strategies: {', '.join(STRATEGIES)})") from None
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise UsageError(f"strategy {name!r} needs a missing package: {exc}") from None
    cls: type[Strategy] = module.STRATEGY
    return cls


def make_strategy(
    name: str, space: SearchSpace, seed: int, prior: Prior | None = None, hints: SearchHints | None = None
) -> Strategy:
    return load_strategy(name)(space, np.random.default_rng(seed), prior, hints)


StrategyFactory = Callable[[SearchSpace, np.random.Generator, Prior | None, SearchHints | None], Strategy]
