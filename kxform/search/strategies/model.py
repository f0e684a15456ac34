"""Model-guided search (the default): Bayesian optimisation with a Gaussian process on
log time, rotating expected improvement, the best predicted configuration and a
local step, over candidates drawn around the best configurations.

Why this design. Kernel run times over tuning parameters are mostly smooth in the
ordinal position of each value (block sizes, tile sizes) with a few strong
interactions, and they span orders of magnitude: a GP with one length scale per
parameter on log time models that with few points, and its uncertainty tells where
an unseen configuration may still win, which is what spends evaluations well when
each costs a compile and a GPU run. Failed configurations (compile or launch
failures) are given the worst observed time, so the model learns to avoid their
region, and are never proposed again.

Proposals rotate through three steps. Expected improvement explores where the model
is unsure and might win. The configuration with the best predicted time exploits:
greedy steps on the posterior mean are a strong default for small budgets (De Ath et
al., "Greed is good", ACM TELO 2021). The local step takes the best predicted of the
unvisited configurations adjacent to the best one so far (one parameter moved to the
next or previous of its values; any other value of an enum), falling back to the
next best ones: a trust region of radius one around the incumbent, as in local
Bayesian optimisation on combinatorial spaces (TuRBO, Eriksson et al. 2019;
CASMOPOLITAN, Wan et al. 2021). The global model smooths over the last few per cent
near the optimum, where neighbouring configurations differ by a single step in
one parameter; without the local step the search reached 5% of the optimum quickly
and 1% slowly. See docs/search.md for how this was measured.

Inputs: each parameter's position in its ordered values (`SearchSpace.features`) and,
for an integer parameter whose values are not all powers of two, the power of two
the value is a multiple of: GPUs reward multiples of the warp or wavefront size, of
a memory transaction, of a vector width, so run time can jump between neighbouring
values (a block width of 48 vs 64 on a 64-wide wavefront: 71x on one recorded
space), which a smooth function of the position cannot fit and a smooth function of
the alignment can.

Without a prior the search starts from a space-filling design of one point per
parameter plus one (as many points as a linear model of the parameters needs; per
parameter, not per input): the first at random, each next one the configuration
farthest from those evaluated (maximin distance in the parameters' positions, over a
random sample). Random points bunch together and leave regions unseen; spread points
give the first fit the widest view for the fewest evaluations.

On a kernel's composed space the strategy is told which parameters change the parallel
structure and, with the cost model, each row's predicted time (`SearchHints`); it then
proposes in stages (kxform.search.stages): the structure passes' configurations in the
predicted order, refinements of the best measured structure, then the whole space with
hopeless structures last. A prior from similar kernels leads the structure stage. A
recorded space has no hints, and its search is the one described here.

Cost per proposal is bounded whatever the size of the space: hyperparameters are
refitted only when the number of observations has grown by a fraction since the last
fit (between fits the Cholesky factor grows by rows), the model is fitted on at most
MAX_TRAIN observations (the best ones and a random share of the rest); the
acquisition is evaluated on a bounded pool: every unvisited neighbour (one parameter
changed) of the best configurations, the best candidates of the last full scoring,
and a fresh random sample; the local step scores at most two neighbours per parameter.

Warm start (`Prior`): earlier results of the same kernel on other hardware give each
configuration a predicted (standardised) log time per source. The first proposals
are the configurations the prior ranks best, and the prior enters the model as one
more input whose length scale the marginal likelihood fits. At each refit, once
PRIOR_CHECK configurations are measured, each source is weighed by the rank
correlation (Kendall's tau) of its scores with the measured times, negative
correlations counting as zero, and the input is rebuilt from the weighted sources:
the sources that agree with this device are leaned on, one that ranks configurations
the other way round is dropped, and where none agrees the input is constant and
ignored. (Ranking-weighted combination of earlier models, as in RGPE: Feurer et
al., "Scalable meta-learning for Bayesian optimization", 2018.) While some source
agrees, every fourth proposal is the next configuration of the weighted prior's
ranking: fitted to a few points among several inputs, the model leans on the prior
less than one that transfers deserves (on one recording the other GPUs' ranking put the
optimum 13th and the model alone took a median 78 evaluations to reach it), and a
quarter of the proposals is what walking it costs where it does not transfer.
"""

from __future__ import annotations

import math

import numpy as np
from scipy.special import ndtr
from scipy.stats import kendalltau

from kxform.search.gp import GaussianProcess, Hyper, fit_hyper
from kxform.search.space import SearchSpace
from kxform.search.stages import Stages
from kxform.search.strategy import History, Strategy

POOL_RANDOM = 128
"""Random unvisited configurations scored per proposal."""
MAX_TRAIN = 256
"""Observations the model is fitted on (the best ones and a random share of the rest)."""
FIT_MAX = 128
"""Observations the hyperparameters are fitted on (length scales need fewer points than
the posterior, and the fit costs cubically)."""
POOL_KEEP = 128
"""Best-scoring candidates of the last full scoring kept in the pool."""
FULL_SCORE_MAX = 2048
"""Configurations scored at each hyperparameter refit (all of them up to this size)."""
LOCAL_RADIUS = 3
"""Steps from the best configuration the local step may go when no adjacent
configuration is left (two parameters moved together, e.g. under an equality)."""
TOP_K = 3
"""Neighbourhoods of this many best configurations join the pool."""
REFIT_GROWTH = 1.25
"""Refit hyperparameters when the observations have grown by this factor."""
DESIGN_POOL = 512
"""Random unvisited configurations the space-filling design picks each point from."""
PRIOR_INIT = 3
"""Proposals taken straight from the prior's ranking before the model takes over."""
PRIOR_EVERY = 4
"""With a prior some source of which agrees with the measurements, every fourth proposal
is the unvisited configuration the weighted prior ranks best."""
PRIOR_CHECK = 8
"""Successful measurements before the prior's sources are weighed against them (Kendall's
tau of fewer points is mostly noise: its standard deviation is about 0.3 at 8)."""


class ModelGuided(Strategy):
    name = "model"
    summary = "Bayesian optimisation: GP on log time, expected improvement, local + random candidates"

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        features = self.space.features()
        parameters = features.shape[1]
        features = np.column_stack([features, *_alignment_columns(self.space)])
        self._prior_order: np.ndarray | None = None
        self._sources: np.ndarray | None = None
        self.prior_weights: np.ndarray | None = None
        """Current weight of each prior source (None without a prior)."""
        if self.prior is not None and self.prior.known.any():
            column = np.where(self.prior.known, self.prior.score, np.nanmean(self.prior.score))
            self._prior_order = np.argsort(column, kind="stable")
            sources = self.prior.columns()
            self._sources = np.where(np.isnan(sources), np.nanmean(sources, axis=1, keepdims=True), sources)
            given = np.asarray(self.prior.weights, dtype=float) if len(self.prior.weights) == len(sources) else None
            self.prior_weights = given / given.sum() if given is not None else np.full(len(sources), 1.0 / len(sources))
            features = np.column_stack([features, _unit(column)])
        self.features = np.ascontiguousarray(features)
        self.dims = self.features.shape[1]
        self._parameters = parameters
        self.initial = parameters + 1 if self._prior_order is None else PRIOR_INIT
        self._hyper = Hyper.initial(max(self.dims, 1))
        self._fitted_at = 0
        self._refits = 0
        self._gp: GaussianProcess | None = None
        self._gp_rows = np.empty(0, dtype=np.int64)
        self._keep = np.empty(0, dtype=np.int64)
        self._distance_from = -1
        self._distances = np.empty(0, dtype=np.int64)
        self._ranking = np.argsort(self.features[:, -1], kind="stable") if self._sources is not None else None
        """The weighted prior's ranking (the prior input's order), renewed where that input is."""
        self._neighbours = _NeighbourIndex(
            self.space.codes, np.array([p.kind != "enum" for p in self.space.params.params], dtype=bool)
        )
        self._stages = Stages(self.space, self.hints, self.rng) if Stages.applies(self.space, self.hints) else None

    # ------------------------------------------------------------------ proposing

    def propose(self, history: History) -> int | None:
        if self._stages is not None:  # structure before polish (kxform.search.stages)
            stage = self._stages.next(history)
            self.stage = stage.name
            if stage.ranked is not None:
                # what similar kernels measured comes before what the model predicts
                primed = self._prior_structure(history) if len(history) + len(history.pending) <= PRIOR_INIT else None
                return stage.ranked if primed is None else primed
            if stage.allowed is not None:
                history = history.restricted(stage.allowed)
        left = history.unvisited()
        if left.size == 0:
            return None
        if left.size == 1:
            return int(left[0])
        ok = [i for i, v in enumerate(history.values) if not math.isnan(v)]
        if len(history) < self.initial or len(ok) < 2 or self.dims == 0:
            return self._initial(history, left)
        return self._by_model(history, left)

    def _prior_structure(self, history: History) -> int | None:
        """The unvisited structure configuration the prior ranks best, among those it
        knows to be faster than its average (unknown rows sit at the average in its
        order); None without a prior or such a row."""
        if self._prior_order is None or self._stages is None or self.prior is None:
            return None
        structure = self._stages.structure_rows
        for row in self._prior_order:
            if not self.prior.known[row]:
                return None
            if structure[row] and not history.visited[row]:
                return int(row)
        return None

    def _initial(self, history: History, left: np.ndarray) -> int:
        """The prior's best-ranked configurations, else a space-filling design: the
        first configuration at random, each next one the farthest (in the parameters'
        positions) from those evaluated, of a random sample of DESIGN_POOL."""
        if self._prior_order is not None:
            for row in self._prior_order:
                if not history.visited[row]:
                    return int(row)
        taken = [*history.rows, *sorted(history.pending)]  # pending: a batch spreads out too
        if not taken:
            return int(left[self.rng.integers(left.size)])
        pool = left if left.size <= DESIGN_POOL else self._sample(left, DESIGN_POOL)
        positions = self.features[:, : self._parameters]
        seen = positions[np.asarray(taken)]
        gaps = ((positions[pool][:, None, :] - seen[None, :, :]) ** 2).sum(-1).min(1)
        return int(pool[int(np.argmax(gaps))])

    def _by_model(self, history: History, left: np.ndarray) -> int:
        proposed = len(history) + len(history.pending)
        if self._sources is not None and proposed % PRIOR_EVERY == 0:
            ranked = self._prior_next(history)
            if ranked is not None:
                return ranked
        rows = np.asarray(history.rows)
        values = np.asarray(history.values, dtype=float)
        failed = np.isnan(values)
        values = np.where(failed, np.nanmax(values), values)
        refit = len(rows) >= self._fitted_at * REFIT_GROWTH or self._fitted_at == 0
        if refit and self._sources is not None:
            self._weigh_sources(rows[~failed], values[~failed])
        train = self._training_set(values)
        mean, std = values[train].mean(), values[train].std() or 1.0
        y = (values[train] - mean) / std
        x = self.features[rows[train]]
        if refit:
            self._refits += 1
            fresh = len(rows) < 64 or self._refits % 3 == 0
            fit = slice(None) if len(y) <= FIT_MAX else np.sort(self.rng.choice(len(y), FIT_MAX, replace=False))
            self._hyper = fit_hyper(x[fit], y[fit], self._hyper, fresh=fresh)
            self._fitted_at = len(rows)
        best = float((values[~failed].min() - mean) / std)
        model_rows, x, y = self._with_lies(history, rows[train], x, y, best)
        gp = self._posterior(model_rows, x, y)
        if refit:
            self._rescore(gp, best, left, history)
        step = proposed % 3
        if step == 2:  # local: the best predicted step from the best configurations
            local = self._local(history, rows[~failed], values[~failed])
            if local is not None:
                return int(local[int(np.argmin(gp.mean(self.features[local])))])
        pool = self._pool(history, left, rows[~failed], values[~failed])
        if step == 1:  # exploit: the best predicted configuration
            return int(pool[int(np.argmin(gp.mean(self.features[pool])))])
        mu, sigma = gp.predict(self.features[pool])  # explore: expected improvement
        return int(pool[int(np.argmax(_expected_improvement(mu, sigma, best)))])

    def _with_lies(
        self, history: History, rows: np.ndarray, x: np.ndarray, y: np.ndarray, best: float
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The training set plus the configurations still being evaluated, each told
        the best time so far (a constant liar, CL-min: Ginsbourger et al., "Kriging is
        well-suited to parallelize optimization", 2010). Several workers then get
        several different proposals without waiting for each result: the model's
        uncertainty collapses where a configuration is pending, so expected
        improvement looks elsewhere, and the optimistic lie keeps the exploiting and
        local steps near the incumbent instead of pushing them away. The lies enter
        the posterior only; hyperparameters are fitted on measurements alone."""
        if not history.pending:
            return rows, x, y
        pending = np.fromiter(sorted(history.pending), dtype=np.int64)
        return (
            np.concatenate([rows, pending]),
            np.vstack([x, self.features[pending]]),
            np.concatenate([y, np.full(pending.size, best)]),
        )

    def _weigh_sources(self, rows: np.ndarray, values: np.ndarray) -> None:
        """Weigh each prior source by the rank correlation (Kendall's tau) of its
        scores with the log times measured so far, negative correlations counting as
        zero, and rebuild the prior input from the weighted sources. Where no source
        agrees with the measurements the input becomes constant, which the model
        ignores: a prior that does not transfer costs no more than no prior."""
        assert self._sources is not None and self.prior_weights is not None
        if rows.size < PRIOR_CHECK:
            return
        taus = np.array([kendalltau(source[rows], values).statistic for source in self._sources])
        weights = np.clip(np.nan_to_num(taus, nan=0.0), 0.0, None)
        self.prior_weights = weights
        total = float(weights.sum())
        self.features[:, -1] = _unit(weights @ self._sources / total) if total > 0 else 0.0
        self._ranking = np.argsort(self.features[:, -1], kind="stable")

    def _prior_next(self, history: History) -> int | None:
        """The unvisited configuration the weighted prior ranks best; None when no
        source agrees with the measurements (all weights zero). The model uses the
        prior as one input among many and, fitted to a few points, leans on it less
        than a prior that transfers deserves: walking its ranking reaches the
        configurations it puts first, which the model may rank below its own guesses."""
        assert self.prior_weights is not None and self._ranking is not None
        if not self.prior_weights.sum() > 0:
            return None
        for row in self._ranking:
            if not history.visited[row]:
                return int(row)
        return None

    def _local(self, history: History, rows: np.ndarray, values: np.ndarray) -> np.ndarray | None:
        """The unvisited adjacent configurations (one parameter moved to the next or
        previous of its values) of the best configuration; when those are all visited
        (or invalid: a constraint such as THREADS == (BM / TM) * (BN / TN) ties
        parameters, so that no single one can move), the unvisited configurations
        nearest to it, up to LOCAL_RADIUS steps; else the adjacent ones of the next
        best (TOP_K); None when all of them are visited."""
        ranked = rows[np.argsort(values, kind="stable")[:TOP_K]]
        for index, row in enumerate(ranked):
            near = self._neighbours.adjacent(int(row))
            near = near[~history.visited[near]]
            if near.size:
                return near
            if index == 0:
                nearest = self._nearest(int(row), history)
                if nearest is not None:
                    return nearest
        return None

    def _nearest(self, row: int, history: History) -> np.ndarray | None:
        """The unvisited configurations at the fewest steps from `row` (steps summed
        over the parameters: positions moved along ordered values, 1 for another
        value of an enum), when that is at most LOCAL_RADIUS. The distances from one
        incumbent are computed once (one pass over the space) and kept while it
        stays the best."""
        if self._distance_from != row:
            self._distances = self._neighbours.steps(row)
            self._distance_from = row
        open_ = ~history.visited & (self._distances <= LOCAL_RADIUS)
        if not open_.any():
            return None
        closest = int(self._distances[open_].min())
        return np.flatnonzero(open_ & (self._distances == closest))

    def _posterior(self, train_rows: np.ndarray, x: np.ndarray, y: np.ndarray) -> GaussianProcess:
        """The GP on (x, y); grown from the previous one when only rows were appended."""
        last = self._gp
        n = 0 if last is None else len(last.x)
        if (
            last is not None
            and last.hyper is self._hyper
            and len(train_rows) > n
            and np.array_equal(self._gp_rows, train_rows[:n])
        ):
            gp = last.extended(x[n:], y)
        else:
            gp = GaussianProcess(x, y, self._hyper)
        self._gp, self._gp_rows = gp, train_rows
        return gp

    def _training_set(self, values: np.ndarray) -> np.ndarray:
        """All observations, or beyond MAX_TRAIN the best ones plus a random share of
        the rest: the model must be exact near the optimum and only roughly right
        elsewhere, and its cost then stays bounded however long the search runs."""
        if values.size <= MAX_TRAIN:
            return np.arange(values.size)  # appended in order: the posterior grows cheaply
        order = np.argsort(values, kind="stable")
        best = order[: MAX_TRAIN * 5 // 8]
        rest = order[MAX_TRAIN * 5 // 8 :]
        others = np.random.default_rng(values.size).choice(rest, MAX_TRAIN - best.size, replace=False)
        return np.sort(np.concatenate([best, others]))

    def _rescore(self, gp: GaussianProcess, best: float, left: np.ndarray, history: History) -> None:
        """Score all unvisited configurations (or a large sample) and keep the best."""
        sample = left if left.size <= FULL_SCORE_MAX else self._sample(left, FULL_SCORE_MAX)
        mu, sigma = gp.predict(self.features[sample])
        ei = _expected_improvement(mu, sigma, best)
        top = min(POOL_KEEP // 2, sample.size)
        self._keep = np.concatenate(
            [sample[np.argpartition(-ei, top - 1)[:top]], sample[np.argpartition(mu, top - 1)[:top]]]
        )

    def _sample(self, left: np.ndarray, count: int) -> np.ndarray:
        """About `count` distinct entries of `left`, in O(count) (a permutation of
        `left`, as `choice(replace=False)` draws, would cost O(len(left)))."""
        return np.unique(left[self.rng.integers(0, left.size, count)])

    def _pool(self, history: History, left: np.ndarray, rows: np.ndarray, values: np.ndarray) -> np.ndarray:
        parts = [self._keep]
        for row in rows[np.argsort(values)[:TOP_K]]:
            parts.append(self._neighbours.of(int(row)))
        parts.append(left if left.size <= POOL_RANDOM else self._sample(left, POOL_RANDOM))
        pool = np.unique(np.concatenate(parts))
        pool = pool[~history.visited[pool]]
        return pool if pool.size else left


def _alignment_columns(space: SearchSpace) -> list[np.ndarray]:
    """For each integer parameter, the power of two its value is a multiple of (log2,
    scaled to [0, 1]), where that is not already the value's order (a list of powers
    of two). GPUs reward values that are multiples of the warp or wavefront size, of a
    memory transaction, of a vector width: run time jumps between neighbouring values
    (48 vs 64 threads on a 64-wide wavefront), which a smooth model of the value's
    position cannot fit, and a smooth model of its alignment can."""
    out = []
    for index, param in enumerate(space.params.params):
        if param.kind != "int" or len(param.values) < 3:
            continue
        values = np.asarray(param.values, dtype=np.int64)
        twos = np.array([_twos(int(v)) for v in values], dtype=np.float64)
        if np.all(np.diff(twos) >= 0) or twos.max() == twos.min():
            continue  # powers of two (or all alike): the order already says it
        out.append(_unit(twos)[space.codes[:, index]])
    return out


def _twos(value: int) -> int:
    """The exponent of the largest power of two dividing `value` (0 for 0 and odd values; capped at 16)."""
    return 0 if value == 0 else min((abs(value) & -abs(value)).bit_length() - 1, 16)


def _unit(column: np.ndarray) -> np.ndarray:
    """`column` scaled to [0, 1]."""
    span = float(column.max() - column.min()) or 1.0
    return (column - column.min()) / span


def _expected_improvement(mu: np.ndarray, sigma: np.ndarray, best: float) -> np.ndarray:
    """EI for minimisation."""
    z = (best - mu) / sigma
    return (best - mu) * ndtr(z) + sigma * np.exp(-0.5 * z * z) / math.sqrt(2 * math.pi)


class _NeighbourIndex:
    """Rows that differ from a row in exactly one parameter. Per parameter, every row
    gets a mixed-radix key of its other parameters' values; rows sorted by key put
    each row's neighbours along that parameter next to it (built vectorised, once)."""

    def __init__(self, codes: np.ndarray, ordered: np.ndarray | None = None) -> None:
        self.codes = codes.astype(np.int64)
        self.ordered = np.ones(codes.shape[1], dtype=bool) if ordered is None else ordered
        radix = self.codes.max(0) + 1 if len(codes) else np.ones(codes.shape[1], dtype=np.int64)
        self._keys: list[np.ndarray] = []
        self._order: list[np.ndarray] = []
        self._sorted: list[np.ndarray] = []
        for column in range(codes.shape[1]):
            weights = np.cumprod(np.where(np.arange(codes.shape[1]) == column, 1, radix))
            weights = np.where(np.arange(codes.shape[1]) == column, 0, weights)
            keys = self.codes @ weights
            order = np.argsort(keys, kind="stable")
            self._keys.append(keys)
            self._order.append(order)
            self._sorted.append(keys[order])

    def adjacent(self, row: int) -> np.ndarray:
        """Neighbours whose one changed parameter moved by one position in its values
        (any other value of an unordered parameter, an enum)."""
        near = self.of(row)
        if near.size == 0:
            return near
        step = np.abs(self.codes[near] - self.codes[row])
        return near[(step.sum(1) == 1) | ~self.ordered[step.argmax(1)]]

    def steps(self, row: int) -> np.ndarray:
        """Steps from `row` to every row, summed over the parameters: positions moved
        along an ordered parameter's values, 1 for another value of an enum (the
        measure under which `adjacent` rows are one step away)."""
        step = np.abs(self.codes - self.codes[row])
        step[:, ~self.ordered] = np.minimum(step[:, ~self.ordered], 1)
        return step.sum(1)

    def of(self, row: int) -> np.ndarray:
        found = []
        for keys, order, ordered in zip(self._keys, self._order, self._sorted):
            low, high = np.searchsorted(ordered, keys[row], "left"), np.searchsorted(ordered, keys[row], "right")
            found.append(order[low:high])
        out = np.concatenate(found) if found else np.empty(0, dtype=np.int64)
        return out[out != row]


STRATEGY = ModelGuided
