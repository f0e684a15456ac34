"""The valid configurations of a `ParamSpace`, enumerated by backtracking or sampled.

Why a hand-written enumerator rather than a constraint library: kxform's constraints
are compiled closures of its own expression language (`kxform.expr`, with `hw.*`
names bound from a hardware profile); python-constraint2 compiles string constraints
with its own parser and would need every expression re-expressed in Python syntax it
executes. The spaces a kernel has (a handful of parameters, 10^3..10^6 valid points)
are exactly where plain backtracking is sufficient: parameters are bound one at a
time, most-constrained first, and each constraint is checked as soon as the last of
its parameters is bound, so a branch that breaks it is cut before its sub-product is
ever visited. Enumeration therefore costs about (valid configurations x parameters)
constraint checks, never the size of the product.

A configuration is held as a row of value indices (`codes`, one small integer per
parameter, in the space's parameter order); `config(row)` gives the typed mapping.
Above `max_valid` configurations a space is sampled instead (random dives that back
up on a violated constraint), and the strategies work on that sample.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from kxform.engine.params import Config, Constraint, ParamSpace, ParamValue, hw_env
from kxform.errors import SpecError, UsageError
from kxform.expr import Value

MAX_VALID = 2_000_000
"""Largest number of valid configurations enumerated; beyond it the space is sampled."""

SAMPLE_SIZE = 200_000
"""Configurations drawn from a space too large to enumerate."""


@dataclass(frozen=True)
class _Plan:
    """Binding order and, per depth, the constraints that become checkable there."""

    order: tuple[int, ...]
    checks: tuple[tuple[Constraint, ...], ...]


def _plan(space: ParamSpace) -> _Plan:
    """Most-constrained parameters first (ties: smaller domain first), so constraints
    are decided as early as possible; single-valued parameters go first of all."""
    names = space.names
    weight = {n: sum(n in c.params for c in space.constraints) for n in names}
    order = sorted(
        range(len(names)),
        key=lambda i: (len(space.params[i].values) > 1, -weight[names[i]], len(space.params[i].values), i),
    )
    bound: set[str] = set()
    pending = list(space.constraints)
    checks: list[tuple[Constraint, ...]] = []
    for index in order:
        bound.add(names[index])
        ready = tuple(c for c in pending if c.params <= bound)
        pending = [c for c in pending if c not in ready]
        checks.append(ready)
    if pending:  # constraints over no parameter at all (hardware only): check at depth 0
        checks[0] = checks[0] + tuple(pending)
    return _Plan(tuple(order), tuple(checks))


def _holds(constraint: Constraint, env: Mapping[str, Value]) -> bool:
    try:
        return constraint.holds(env)
    except SpecError as err:
        raise SpecError(f"constraint '{constraint.text}': {err.cause.split(': ', 1)[-1]} (at {_shown(env)})") from None


def _shown(env: Mapping[str, Value]) -> str:
    return ", ".join(f"{k}={v}" for k, v in env.items() if not k.startswith("hw."))


def iter_valid(space: ParamSpace, hw: object | None = None) -> Iterator[tuple[int, ...]]:
    """Value-index rows of every valid configuration, in lexicographic order of the
    binding plan. A constraint that cannot be evaluated (division by zero) is a
    SpecError naming it and the configuration."""
    plan = _plan(space)
    params = space.params
    names = space.names
    env: dict[str, Value] = dict(hw_env(hw))
    row = [0] * len(params)
    depth_count = len(plan.order)
    if depth_count == 0:
        return

    def descend(depth: int) -> Iterator[tuple[int, ...]]:
        index = plan.order[depth]
        name = names[index]
        checks = plan.checks[depth]
        last = depth == depth_count - 1
        for position, value in enumerate(params[index].values):
            env[name] = value  # type: ignore[assignment]
            if all(_holds(c, env) for c in checks):
                row[index] = position
                if last:
                    yield tuple(row)
                else:
                    yield from descend(depth + 1)
        del env[name]

    yield from descend(0)


def sample_valid(
    space: ParamSpace, rng: np.random.Generator, count: int, hw: object | None = None, max_tries: int | None = None
) -> list[tuple[int, ...]]:
    """Up to `count` distinct valid rows drawn by random dives: each parameter takes a
    random value, and a violated constraint restarts the dive from the top."""
    plan = _plan(space)
    params = space.params
    names = space.names
    base = hw_env(hw)
    found: dict[tuple[int, ...], None] = {}
    tries = max_tries if max_tries is not None else 50 * count
    for _ in range(tries):
        if len(found) >= count:
            break
        env: dict[str, Value] = dict(base)
        row = [0] * len(params)
        ok = True
        for depth, index in enumerate(plan.order):
            position = int(rng.integers(len(params[index].values)))
            env[names[index]] = params[index].values[position]  # type: ignore[assignment]
            row[index] = position
            if not all(_holds(c, env) for c in plan.checks[depth]):
                ok = False
                break
        if ok:
            found.setdefault(tuple(row), None)
    return list(found)


def encode(values: Sequence[ParamValue]) -> np.ndarray:
    """Each value's position in [0, 1] (see `SearchSpace.features`)."""
    return np.arange(len(values), dtype=np.float64) / max(len(values) - 1, 1)


@dataclass(frozen=True)
class SearchSpace:
    """The valid configurations of a ParamSpace as an integer matrix, with lookups.

    `codes[i]` holds the value index of each parameter for configuration `i`;
    `features` scales each index to [0, 1] per parameter (parameters with one value
    are dropped), the input the surrogate models use. `complete` is False when the
    space was too large to enumerate and `codes` is a sample of it.
    """

    params: ParamSpace
    codes: np.ndarray
    complete: bool = True
    hw: object | None = None
    _rows: dict[tuple[int, ...], int] = field(default_factory=dict, compare=False, repr=False)

    @classmethod
    def build(
        cls,
        space: ParamSpace,
        hw: object | None = None,
        *,
        max_valid: int = MAX_VALID,
        sample_size: int = SAMPLE_SIZE,
        rng: np.random.Generator | None = None,
    ) -> SearchSpace:
        """Enumerate (or, beyond `max_valid`, sample) the valid configurations.
        A space with no valid configuration is a UsageError naming the constraints."""
        rows = list(itertools.islice(iter_valid(space, hw), max_valid + 1))
        complete = len(rows) <= max_valid
        if not complete:
            rows = sample_valid(space, rng or np.random.default_rng(0), sample_size, hw)
        if not rows:
            shown = "; ".join(c.text for c in space.constraints) or "none"
            raise UsageError(f"the space has no valid configuration (constraints: {shown})")
        width = max((len(p.values) for p in space.params), default=1)
        dtype = np.int16 if width < 2**15 else np.int32
        codes = np.array(rows, dtype=dtype).reshape(len(rows), len(space.params))
        codes.setflags(write=False)
        return cls(space, codes, complete, hw)

    def __post_init__(self) -> None:
        self._rows.update({tuple(int(v) for v in r): i for i, r in enumerate(self.codes.tolist())})

    def __len__(self) -> int:
        return int(self.codes.shape[0])

    @property
    def names(self) -> tuple[str, ...]:
        return self.params.names

    def config(self, row: int) -> dict[str, ParamValue]:
        """The typed configuration of row `row`."""
        return {p.name: p.values[int(i)] for p, i in zip(self.params.params, self.codes[row])}

    def row_of(self, config: Config) -> int | None:
        """The row of `config`, or None when it is not a (valid, known) configuration."""
        try:
            key = tuple(p.values.index(config[p.name]) for p in self.params.params)  # type: ignore[union-attr]
        except (KeyError, ValueError):
            return None
        return self._rows.get(key)

    def row_of_codes(self, codes: Sequence[int]) -> int | None:
        return self._rows.get(tuple(int(c) for c in codes))

    def key(self, row: int) -> str:
        """Kernel Tuner's cache key: the values joined by commas, in parameter order."""
        return ",".join(str(v) for v in self.config(row).values())

    def features(self) -> np.ndarray:
        """The model inputs: one column per parameter with more than one value, its
        value's position in the parameter's (ordered) list scaled to [0, 1]. Ordinal
        rather than numeric: the list is the granularity the kernel's author chose
        (powers of two, multiples of 16), and a log or linear scale measured worse on
        the recorded spaces (tools/bench_search.py)."""
        columns = [encode(p.values)[self.codes[:, i]] for i, p in enumerate(self.params.params) if len(p.values) > 1]
        if not columns:
            return np.zeros((len(self), 0))
        return np.column_stack(columns)

    def default_row(self) -> int | None:
        """The row of the parameters' defaults, if that configuration is valid."""
        return self.row_of(self.params.defaults())
