"""Structure before polish: the stages of a search over a kernel's composed space.

A kernel's time is set first by its parallel structure (one thread per row or a block
per row, outputs per thread, shared-memory tiles, vector widths) and only then by the
values that refine a structure (block sizes, unroll factors, block orders): a good block
size for one thread per row says nothing about the block size for a warp per row, and
on a naive layer norm the structure is a 14x question, the block size a few per cent.
A search over all parameters at once spends its early evaluations on refinements of
structures that cannot win. So, when the space says which parameters belong to structure
passes (`SearchHints.structure`), the model-guided strategy proposes in three stages:

1. `structure`: configurations with every refining pass off (the structure passes alone
   and together), STRUCTURE_SHARE of the budget at most; ordered by the cost model's
   prediction where there is one (kxform.search.cost), best first, and stopped early
   when only *hopeless* structures are left: those predicted HOPELESS times slower than
   the best predicted one (coarsening a kernel that already has too few threads, one
   thread per row of a long row). Without predictions the Gaussian process chooses among
   them.
2. `refine`: configurations with the structure of the best configuration measured so far,
   the refining passes searched by the Gaussian process on every measurement made,
   REFINE_SHARE of the budget at most.
3. `open`: the whole space, hopeless structures last (left out while anything else is).

A space of one kind of parameters only is searched as one structure stage, ordered by the
predictions where there are some, else in one stage by the Gaussian process.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from kxform.search.cost import rank_agreement
from kxform.search.space import SearchSpace
from kxform.search.strategy import History, SearchHints

STRUCTURE_SHARE = 0.4
"""Of the budget, at most, for the structure stage."""
REFINE_SHARE = 0.4
"""Of the budget, at most, for refining the best structure."""
HOPELESS = 4.0
"""A structure predicted this many times slower than the best predicted one is tried last."""
TRUST_PAIRS = 6
TRUST_TAU = 0.3
"""Below this rank agreement over TRUST_PAIRS measurements, no structure is hopeless."""
PREDICT_MAX = 64
"""Structure configurations predicted at most (each prediction is a rewrite)."""
DEFAULT_BUDGET = 40
"""The budget the stages are sized for when the run is bounded by time."""


@dataclass(frozen=True)
class Stage:
    """The stage of the next proposal and the rows it may come from (None: any), and, in
    the structure stage with predictions, the row the prediction ranks next."""

    name: str
    allowed: np.ndarray | None = None
    ranked: int | None = None


class Stages:
    """Which stage a search is in, from what it has measured."""

    def __init__(self, space: SearchSpace, hints: SearchHints, rng: np.random.Generator) -> None:
        self.space = space
        self.hints = hints
        self.rng = rng
        structure = np.asarray(hints.structure, dtype=bool)
        if not structure.any():  # refining parameters only: ordered by prediction all the same
            structure = np.ones_like(structure)
        self.structure_columns = structure
        default = space.default_row()
        base = space.codes[default] if default is not None else np.zeros(space.codes.shape[1], dtype=space.codes.dtype)
        refine = ~structure
        self.structure_rows = np.all(space.codes[:, refine] == base[refine], axis=1)
        self._structure_of = np.unique(space.codes[:, structure], axis=0, return_inverse=True)[1].reshape(-1)
        """Row -> an id of its structure (the values of its structure parameters)."""
        budget = hints.budget or DEFAULT_BUDGET
        self.structure_quota = min(int(self.structure_rows.sum()), max(4, math.ceil(STRUCTURE_SHARE * budget)))
        self.refine_end = self.structure_quota + math.ceil(REFINE_SHARE * budget)
        self._ranking: list[int] | None = None
        self._hopeless: np.ndarray | None = None
        """Rows whose structure was predicted hopeless."""

    @staticmethod
    def applies(space: SearchSpace, hints: SearchHints | None) -> bool:
        """Whether the space has both structure and refining parameters, or predictions
        to order it by (a space of one kind only is one structure stage then)."""
        if hints is None or len(hints.structure) != space.codes.shape[1]:
            return False
        return hints.predict is not None or (any(hints.structure) and not all(hints.structure))

    def next(self, history: History) -> Stage:
        proposed = len(history) + len(history.pending)
        if proposed < self.structure_quota:
            stage = self._structure(history)
            if stage is not None:
                return stage
        if proposed < self.refine_end:
            allowed = self._refine(history)
            if allowed is not None:
                return Stage("refine", allowed)
        return Stage("open", self._open(history))

    # -- the structure stage ------------------------------------------------------------

    def _structure(self, history: History) -> Stage | None:
        if self.hints.predict is None:
            allowed = self.structure_rows & ~history.visited
            return Stage("structure", allowed) if allowed.any() else None
        for row in self._ranked():
            if not history.visited[row]:
                return Stage("structure", ranked=row)
        return None

    def _ranked(self) -> list[int]:
        """Structure rows, best predicted first; the hopeless ones and those without a
        prediction are not in it (the open stage meets them, hopeless last)."""
        if self._ranking is not None:
            return self._ranking
        assert self.hints.predict is not None
        rows = np.flatnonzero(self.structure_rows)
        if rows.size > PREDICT_MAX:
            default = self.space.default_row()
            keep = self.rng.choice(rows, PREDICT_MAX, replace=False)
            rows = np.unique(np.concatenate([keep, [default] if default is not None else []])).astype(np.int64)
        predicted = [(p, int(r)) for r in rows if (p := self.hints.predict(int(r))) is not None and math.isfinite(p)]
        best = min((p for p, _ in predicted), default=math.inf)
        ranking = sorted(predicted)
        self._ranking = [r for p, r in ranking if p < HOPELESS * best]
        hopeless = [self._structure_of[r] for p, r in ranking if p >= HOPELESS * best]
        self._hopeless = np.isin(self._structure_of, hopeless) if hopeless else None
        return self._ranking

    # -- refining the best structure and the open stage -----------------------------------

    def _refine(self, history: History) -> np.ndarray | None:
        best = history.best()
        incumbent = best[0] if best is not None else self.space.default_row()
        if incumbent is None:
            return None
        allowed = (self._structure_of == self._structure_of[incumbent]) & ~history.visited
        return allowed if allowed.any() else None

    def _open(self, history: History) -> np.ndarray | None:
        """Every unvisited row but those of a hopeless structure, while any other is left;
        the structure of the best configuration measured is never hopeless, and none is
        once the measurements show the model ranking them badly."""
        if self._hopeless is None or self._disagrees(history):
            return None
        hopeless = self._hopeless
        best = history.best()
        if best is not None:
            hopeless = hopeless & (self._structure_of != self._structure_of[best[0]])
        allowed = ~hopeless & ~history.visited
        return allowed if allowed.any() else None

    def _disagrees(self, history: History) -> bool:
        """The predictions rank the measured configurations badly (Kendall's tau below
        TRUST_TAU over at least TRUST_PAIRS of them)."""
        assert self.hints.predict is not None
        pairs = []
        for row, value in zip(history.rows, history.values):
            predicted = self.hints.predict(row) if not math.isnan(value) else None
            if predicted is not None and math.isfinite(predicted):
                pairs.append((predicted, math.exp(value)))
        tau = rank_agreement(pairs) if len(pairs) >= TRUST_PAIRS else None
        return tau is not None and tau < TRUST_TAU
