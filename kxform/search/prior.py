"""Warm start: what earlier measurements say about each configuration of a space.

A source is one earlier set of results (the same kernel on other hardware, a similar
kernel with the same parameters, from the tuning database or from recordings given
with `--prior`). Absolute times do not transfer between GPUs, ranks largely do: each
source's log times are standardised (failed configurations count as its slowest),
and a configuration's prior score is the mean of its standardised log time over the
sources that measured it. Each source's own scores are kept too: the model-guided
strategy starts from the configurations with the best scores and uses a weighted
mean of the sources as one more model input, each source weighted by how well its
ranking agrees with the times measured so far.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from kxform.engine.params import ParamValue
from kxform.search.space import SearchSpace
from kxform.search.strategy import Prior


@dataclass(frozen=True)
class PriorColumn:
    """A source already mapped onto the space: per row, a standardised log time (NaN where
    unknown), with the weight it starts with (kxform.search.transfer: how similar its
    kernel is)."""

    label: str
    scores: np.ndarray
    weight: float = 1.0


@dataclass(frozen=True)
class PriorSource:
    """Earlier results: configuration (a mapping name -> value) -> time in ms, None
    for a failed configuration."""

    label: str
    results: Sequence[tuple[Mapping[str, ParamValue], float | None]]


def build_prior(
    space: SearchSpace, sources: Sequence[PriorSource], columns: Sequence[PriorColumn] = ()
) -> Prior | None:
    """The prior over `space` from `sources` (each of weight 1) and `columns` (their own
    weights); None when nothing shares a configuration with the space."""
    used: list[str] = []
    scores: list[np.ndarray] = []
    weights: list[float] = []
    for source in sources:
        column = _column(space, source)
        if column is not None:
            used.append(source.label)
            scores.append(column)
            weights.append(1.0)
    for extra in columns:
        if np.isfinite(extra.scores).sum() >= 2 and extra.weight > 0:
            used.append(extra.label)
            scores.append(extra.scores)
            weights.append(extra.weight)
    if not used:
        return None
    stacked = np.vstack(scores)
    w = np.asarray(weights)[:, None] * ~np.isnan(stacked)
    with np.errstate(invalid="ignore", divide="ignore"):
        score = np.where(w.sum(0) > 0, np.nansum(stacked * w, axis=0) / w.sum(0), np.nan)
    return Prior(score, tuple(used), stacked, tuple(weights))


def _column(space: SearchSpace, source: PriorSource) -> np.ndarray | None:
    """Per row, the source's standardised log time (NaN where it did not measure the row);
    None when fewer than two of its results are rows of the space."""
    rows: list[int] = []
    logs: list[float] = []
    for config, time_ms in source.results:
        row = space.row_of(config)
        if row is None:
            continue
        rows.append(row)
        logs.append(math.log(time_ms) if time_ms is not None and time_ms > 0 else math.nan)
    values = np.asarray(logs, dtype=float)
    ok = ~np.isnan(values)
    if ok.sum() < 2:
        return None
    values = np.where(ok, values, values[ok].max())
    z = (values - values[ok].mean()) / (values[ok].std() or 1.0)
    total = np.zeros(len(space))
    count = np.zeros(len(space))
    index = np.asarray(rows)
    np.add.at(total, index, z)
    np.add.at(count, index, 1.0)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(count > 0, total / np.maximum(count, 1.0), np.nan)
