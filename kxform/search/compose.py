"""One tuning space out of several passes' spaces, and the pipeline at each of its points.

Each pass brings the space it wants timed for a kernel (`Pass.tuning_space`). In the
composed space its parameters are namespaced by the pass (`tile.TILE`,
`swizzle.pattern`; a `-` in a pass name becomes `_`) and it gets one more, a boolean
named by the namespace alone (`tile`, `swizzle`): whether the pass applies at all. The
search therefore chooses which passes run as well as their values, and the point with
every pass off is the code as it is (the space's defaults).

Each pass's constraints are kept, renamed and waived while the pass is off
(`not (tile) or (tile.TILE * tile.TILE <= hw.max_threads_per_block)`). A pass that is
off has its parameters pinned to their defaults, so "off" is one configuration, not one
per value of parameters that do nothing; the pinning is structural (the valid rows are
the product of each pass's valid rows plus its one "off" row), which is also how enum
parameters, which the expression language cannot compare, are pinned.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from kxform.engine.params import Config, Constraint, Param, ParamSpace, ParamValue
from kxform.engine.pass_api import Pass
from kxform.errors import SpecError, UsageError
from kxform.search.space import MAX_VALID, SAMPLE_SIZE, SearchSpace


def namespace(pass_name: str) -> str:
    """The prefix of a pass's parameters in a composed space (`my-pass` -> `my_pass`)."""
    return pass_name.replace("-", "_")


@dataclass(frozen=True)
class PassSpace:
    """One pass of a composed space: the pass (default options) and its space for the kernel."""

    pass_: Pass
    space: ParamSpace

    @property
    def name(self) -> str:
        return namespace(self.pass_.name)

    def qualified(self, param: str) -> str:
        return f"{self.name}.{param}"

    def params(self) -> tuple[Param, ...]:
        flag = Param.boolean(self.name, False, doc=f"apply the {self.pass_.name} pass")
        return (
            flag,
            *(Param(self.qualified(p.name), p.kind, p.values, p.default, p.doc, p.origin) for p in self.space.params),
        )

    def constraints(self) -> tuple[Constraint, ...]:
        names = {p.name: self.qualified(p.name) for p in self.space.params}
        return tuple(c.renamed(names, guard=self.name) for c in self.space.constraints)

    def own(self, config: Config) -> dict[str, ParamValue]:
        """This pass's values in `config`, by their own names."""
        return {p.name: config[self.qualified(p.name)] for p in self.space.params}


@dataclass(frozen=True)
class Composed:
    """Passes in pipeline order and their composed space."""

    parts: tuple[PassSpace, ...]
    space: ParamSpace
    required: tuple[Constraint, ...] = ()
    """The user's constraints (also in `space`): the only ones that span passes."""

    def active(self, config: Config) -> tuple[PassSpace, ...]:
        """The passes `config` applies, in pipeline order.

        A name the space does not have is an error, never ignored: a configuration
        written for another space (`TILE` where the space says `tile.TILE`) would
        otherwise evaluate the original under the label of a rewrite."""
        unknown = sorted(set(config) - set(self.space.names))
        if unknown:
            raise ValueError(
                f"not in this tuning space: {', '.join(unknown)} (its names: {', '.join(self.space.names)})"
            )
        return tuple(part for part in self.parts if config.get(part.name) is True)

    def pipeline(self, config: Config) -> tuple[Pass, ...]:
        """The pass instances that rewrite the kernel at `config` (none: the original)."""
        return tuple(part.pass_.configured(part.own(config)) for part in self.active(config))

    def spec(self, config: Config) -> str:
        """The `--pass` text of `pipeline(config)` ("" for the original)."""
        return ",".join(p.spec() for p in self.pipeline(config))

    def won(self, config: Config) -> dict[str, ParamValue]:
        """The values of the applied passes only (what a result reports)."""
        out: dict[str, ParamValue] = {}
        for part in self.active(config):
            out.update({part.qualified(k): v for k, v in part.own(config).items()})
        return out

    def exclusive_pairs(self) -> tuple[tuple[int, int], ...]:
        """Indices of the parts that never apply together (`Pass.excludes`, either way)."""
        names = [part.pass_.name for part in self.parts]
        return tuple(
            (i, j)
            for i, j in itertools.combinations(range(len(self.parts)), 2)
            if names[j] in type(self.parts[i].pass_).excludes or names[i] in type(self.parts[j].pass_).excludes
        )

    def search(self, hw: object | None = None, rng: np.random.Generator | None = None) -> SearchSpace:
        """The valid configurations: each pass off (one row) or at one of its own valid
        configurations, over every combination, filtered by the composed constraints that
        span passes (`--require`). Sampled beyond MAX_VALID combinations."""
        choices = [_choices(part, hw) for part in self.parts]
        total = math.prod(len(c) for c in choices)
        if total <= MAX_VALID:
            combos: Sequence[tuple[tuple[int, ...], ...]] = list(itertools.product(*choices))
            complete = True
        else:
            generator = rng or np.random.default_rng(0)
            drawn = {_draw(choices, generator) for _ in range(SAMPLE_SIZE)}
            combos = [tuple(c[i] for c, i in zip(choices, picks)) for picks in sorted(drawn)]
            complete = False
        exclusive = self.exclusive_pairs()
        if exclusive:  # both parts on (flag code 1) at once: never a point of the space
            combos = [c for c in combos if not any(c[i][0] == 1 and c[j][0] == 1 for i, j in exclusive)]
        rows = [tuple(itertools.chain.from_iterable(combo)) for combo in combos]
        spanning = self.required
        if spanning:
            check = ParamSpace(self.space.params, spanning)
            rows = [r for r in rows if not check.violations(_config(self.space, r), hw)]
        if not rows:
            shown = "; ".join(c.text for c in spanning) or "none"
            raise UsageError(f"the space has no valid configuration (constraints: {shown})")
        codes = np.array(rows, dtype=np.int32).reshape(len(rows), len(self.space.params))
        codes.setflags(write=False)
        return SearchSpace(self.space, codes, complete, hw)


def compose(parts: Sequence[PassSpace], require: Sequence[str] = (), kernel: str = "") -> Composed:
    """The composed space of `parts` (pipeline order) with the user's extra constraints
    `require`, whose names may be qualified (`tile.BX`) or, where only one pass has the
    parameter, bare (`BX`). A required constraint binds only while every pass it reads
    is applied."""
    params = tuple(itertools.chain.from_iterable(part.params() for part in parts))
    constraints = list(itertools.chain.from_iterable(part.constraints() for part in parts))
    try:
        base = ParamSpace(params, tuple(constraints))
    except SpecError as exc:
        raise UsageError(f"'{kernel}': the passes' spaces do not compose: {exc.cause}") from None
    required = tuple(_required(base, parts, text, kernel) for text in require)
    return Composed(tuple(parts), ParamSpace(params, (*constraints, *required)), required)


def _required(space: ParamSpace, parts: Sequence[PassSpace], text: str, kernel: str) -> Constraint:
    try:
        constraint = Constraint.parse(text, "required by the user")
    except SpecError as exc:
        raise UsageError(f"--require {text!r}: {exc.cause}") from None
    names = set(space.names)
    renames: dict[str, str] = {}
    for name in sorted(constraint.params - names):
        matches = [n for n in names if n.endswith(f".{name}")]
        if len(matches) != 1:
            shown = ", ".join(sorted(n for n in names if "." in n))
            why = "is not" if not matches else f"is ambiguous ({', '.join(sorted(matches))}): qualify it; it is not"
            raise UsageError(f"--require {text!r}: '{name}' {why} a parameter of '{kernel}' (parameters: {shown})")
        renames[name] = matches[0]
    qualified = constraint.renamed(renames) if renames else constraint
    owners = sorted({part.name for part in parts for n in qualified.params if n.startswith(f"{part.name}.")})
    guard = " and ".join(owners)
    return Constraint.parse(f"not ({guard}) or ({qualified.text})" if guard else qualified.text, qualified.reason)


def _draw(choices: Sequence[Sequence[tuple[int, ...]]], generator: np.random.Generator) -> tuple[int, ...]:
    """One sampled combination: each pass off (its row 0) with probability one half, else at
    one of its configurations drawn uniformly. Drawn uniformly over all rows, a pass of many
    configurations is almost never off, so in a space of several passes nearly every draw
    applied passes that exclude each other and was dropped: a naive GEMM's five passes left
    16 points of 200,000 draws, none with one pass alone."""
    picks = []
    for rows in choices:
        if len(rows) > 1 and generator.random() < 0.5:
            picks.append(0)
        else:
            picks.append(int(generator.integers(1, len(rows))) if len(rows) > 1 else 0)
    return tuple(picks)


def _choices(part: PassSpace, hw: object | None) -> list[tuple[int, ...]]:
    """Value-index rows of one pass in the composed space: off (flag 0, parameters at
    their defaults), then on at each of its own valid configurations, less its defaults
    where those are the code as written (`Pass.defaults_as_written`)."""
    defaults = tuple(p.values.index(p.default) for p in part.space.params)  # type: ignore[union-attr]
    rows: list[tuple[int, ...]] = [(0, *defaults)]
    if part.space.params:
        own = SearchSpace.build(part.space, hw)
        same = type(part.pass_).defaults_as_written
        rows += [
            (1, *row)
            for row in (tuple(int(v) for v in own.codes[r]) for r in range(len(own)))
            if not (same and row == defaults)
        ]
    return rows


def _config(space: ParamSpace, row: Sequence[int]) -> dict[str, ParamValue]:
    return {p.name: p.values[i] for p, i in zip(space.params, row)}


def label(config: Mapping[str, ParamValue]) -> str:
    return ", ".join(f"{k}={v}" for k, v in config.items())
