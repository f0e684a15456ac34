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
class PriorSource:
    """Earlier results: configuration (a mapping name -> value) -> time in ms, None
    for a failed configuration."""

    label: str
    results: Sequence[tuple[Mapping[str, ParamValue], float | None]]


def build_prior(space: SearchSpace, sources: Sequence[PriorSource]) -> Prior | None:
    """The prior over `space` from `sources`; None when no source shares a
    configuration with the space."""
    total = np.zeros(len(space))
    count = np.zeros(len(space))
    used = []
    columns: list[np.ndarray] = []
    for source in sources:
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
            continue
        values = np.where(ok, values, values[ok].max())
        z = (values - values[ok].mean()) / (values[ok].std() or 1.0)
        index = np.asarray(rows)
        np.add.at(total, index, z)
        np.add.at(count, index, 1.0)
        column = np.full(len(space), np.nan)
        column[index] = z
        columns.append(column)
        used.append(source.label)
    if not used:
        return None
    with np.errstate(invalid="ignore", divide="ignore"):
        score = np.where(count > 0, total / np.maximum(count, 1.0), np.nan)
    return Prior(score, tuple(used), np.vstack(columns))
