"""What one kernel teaches the next: a prior from the tuning database's other kernels.

A layer norm, an RMS norm and a softmax written one thread per row are tuned the same
way (a block of threads per row, no coarsening), and their composed spaces share the
names that say so (`rows`, `rows.lanes`, `coarsen.factor`: a pass's parameters are named
by the pass, kxform.search.compose). So every tuned kernel's features are stored beside
its evaluations (`kernel_features`: what one thread does at the timing size, from the
access analysis and its footprint), and a new kernel's prior takes, from each stored
kernel of similar features:

* its evaluations, mapped onto the new space by the parameters both spaces have (a
  configuration becomes every row that agrees with it on them: a good region, not a
  point), as standardised log times (a failure counts as its slowest);
* an initial weight: the similarity of the two kernels' features times the overlap of
  their parameter names. The model-guided strategy starts from the rows the weighted
  prior ranks best and, once it has measured some, weighs each source again by how well
  it ranked them (Kendall's tau, kxform.search.strategies.model), so a source that does
  not transfer is dropped.

So the second layer norm tuned starts where the first one ended. Kernels of the same name
and parameters, and the same kernel on other hardware, are the database's `related`
sources (kxform.orchestrate.tune_setup.prior_of); this module adds the others.
"""

from __future__ import annotations

import math
from collections.abc import Container, Mapping

import numpy as np

from kxform.analysis.access import AccessAnalysis
from kxform.analysis.footprint import Footprint
from kxform.search.cost import Launch
from kxform.search.db import TuneKey, TuningDB
from kxform.search.prior import PriorColumn
from kxform.search.space import SearchSpace

SIMILAR = 0.25
"""Sources weighed below this are left out."""
SCALE = 0.5
"""Feature distance at which the similarity falls to 1/e."""
MAX_SOURCES = 4
"""The most similar kernels taken, at most."""


def kernel_features(access: AccessAnalysis, fp: Footprint, launch: Launch) -> dict[str, float]:
    """What one thread of a kernel does at its timing size, as numbers in about [0, 1]."""
    threads = launch.threads_per_block * launch.blocks
    return {
        "reduces": 1.0 if access.reductions else 0.0,
        "depth": min(max((loop.depth + 1 for loop in access.loops), default=0), 4) / 4,
        "loads": min(math.log10(1.0 + fp.loads), 6.0) / 6,
        "coalesced": fp.useful_bytes / fp.sector_bytes if fp.sector_bytes else 1.0,
        "shared": 1.0 if fp.shared_bytes or fp.shared_accesses else 0.0,
        "barriers": 1.0 if fp.barriers else 0.0,
        "threads": min(math.log10(1.0 + threads), 9.0) / 9,
        "intensity": min(math.log10(1.0 + fp.ops / max(fp.useful_bytes, 1.0)), 3.0) / 3,
    }


def similarity(
    a: Mapping[str, float], b: Mapping[str, float], names_a: tuple[str, ...], names_b: tuple[str, ...]
) -> float:
    """How alike two kernels are: their features' closeness times the overlap of their
    spaces' parameter names (Jaccard)."""
    keys = sorted(set(a) & set(b))
    distance = math.sqrt(sum((a[k] - b[k]) ** 2 for k in keys)) if keys else math.inf
    shared, union = set(names_a) & set(names_b), set(names_a) | set(names_b)
    return math.exp(-((distance / SCALE) ** 2)) * (len(shared) / len(union) if union else 0.0)


def similar_columns(
    db: TuningDB,
    key: TuneKey,
    features: Mapping[str, float],
    space: SearchSpace,
    leave_out: Container[str] = (),
) -> list[PriorColumn]:
    """Prior columns over `space` from the database's kernels most like this one (other
    content hashes than `key`'s; kernels named in `leave_out` neither, as a benchmark
    leaves a family out), each with its initial weight; [] when none is similar."""
    ranked = []
    for kernel_hash, kernel, names, stored in db.kernels():
        if kernel_hash == key.kernel_hash or kernel in leave_out or not set(names) & set(space.names):
            continue
        weight = similarity(features, stored, key.param_names, names)
        if weight >= SIMILAR:
            ranked.append((weight, kernel_hash, kernel))
    columns = []
    for weight, kernel_hash, kernel in sorted(ranked, reverse=True)[:MAX_SOURCES]:
        results = [(s.config, s.evaluation.time_ms) for s in db.of_kernel(kernel_hash) if not s.evaluation.pruned]
        column = mapped_scores(space, results)
        if column is not None:
            columns.append(PriorColumn(f"{kernel} ({kernel_hash[:8]}, similar: {weight:.2f})", column, weight))
    return columns


def mapped_scores(space: SearchSpace, results: list[tuple[Mapping[str, object], float | None]]) -> np.ndarray | None:
    """Per row of `space`, the mean standardised log time of the results that agree with
    it on every parameter both have (NaN where none does); None when fewer than two
    results map onto the space at all."""
    names = [n for n in space.names if all(n in config for config, _ in results)]
    if not names or len(results) < 2:
        return None
    columns = [space.names.index(n) for n in names]
    params = [space.params.params[c] for c in columns]
    keys, groups = np.unique(space.codes[:, columns], axis=0, return_inverse=True)
    groups = groups.reshape(-1)
    index = {tuple(int(v) for v in k): g for g, k in enumerate(keys)}
    logs = np.array([math.log(t) if t is not None and t > 0 else math.nan for _, t in results])
    ok = ~np.isnan(logs)
    if ok.sum() < 2:
        return None
    logs = np.where(ok, logs, logs[ok].max())
    z = (logs - logs[ok].mean()) / (logs[ok].std() or 1.0)
    total = np.zeros(len(keys))
    count = np.zeros(len(keys))
    mapped = 0
    for (config, _), score in zip(results, z):
        try:
            code = tuple(p.values.index(config[p.name]) for p in params)
        except ValueError:  # a value this space does not offer
            continue
        group = index.get(code)
        if group is not None:
            total[group] += score
            count[group] += 1
            mapped += 1
    if mapped < 2:
        return None
    with np.errstate(invalid="ignore", divide="ignore"):
        per_group = np.where(count > 0, total / np.maximum(count, 1.0), np.nan)
    return per_group[groups]
