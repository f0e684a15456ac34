"""Enumeration of valid configurations (kxform.search.space) against brute force."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kxform.engine.params import Constraint, Param, ParamSpace
from kxform.errors import SpecError, UsageError
from kxform.hw import load_profile
from kxform.search.space import SearchSpace, iter_valid, sample_valid

CONSTRAINTS = [
    "a * b <= 24",
    "a % 2 == 0 or c == 0",
    "b + c != 5",
    "32 <= a * b * 4 <= 256",
    "c <= a",
    "is_pow2(b)",
    "a != b",
]


def brute_force(space: ParamSpace) -> set[tuple[object, ...]]:
    out = set()
    for values in itertools.product(*(p.values for p in space.params)):
        config = dict(zip(space.names, values))
        if space.is_valid(config):
            out.add(values)
    return out


@settings(max_examples=60, deadline=None)
@given(
    a=st.lists(st.integers(1, 12), min_size=1, max_size=5, unique=True),
    b=st.lists(st.integers(1, 12), min_size=1, max_size=5, unique=True),
    c=st.lists(st.integers(0, 6), min_size=1, max_size=4, unique=True),
    chosen=st.lists(st.sampled_from(CONSTRAINTS), max_size=3, unique=True),
)
def test_enumeration_matches_brute_force(a: list[int], b: list[int], c: list[int], chosen: list[str]) -> None:
    space = ParamSpace(
        (Param.ints("a", a, min(a)), Param.ints("b", b, min(b)), Param.ints("c", c, min(c))),
        tuple(Constraint.parse(text) for text in chosen),
    )
    expected = brute_force(space)
    rows = list(iter_valid(space))
    assert len(rows) == len(set(rows))  # no configuration twice
    got = {tuple(p.values[i] for p, i in zip(space.params, row)) for row in rows}
    assert got == expected
    if expected:
        built = SearchSpace.build(space)
        assert {tuple(built.config(r).values()) for r in range(len(built))} == expected
        for row in range(len(built)):
            assert built.row_of(built.config(row)) == row


def test_constraints_prune_before_the_product() -> None:
    """A constraint on two parameters is checked as soon as both are bound, before the others are
    bound: the number of checks stays far below the size of the product."""
    calls = {"n": 0}
    wide = [Param.int_range(f"p{i}", 0, 9, 0) for i in range(4)]
    space = ParamSpace(
        (Param.ints("x", [1, 2, 3, 4], 1), Param.ints("y", [1, 2, 3, 4], 1), *wide), (Constraint.parse("x * y == 1"),)
    )
    original = Constraint.holds

    def counting(self: Constraint, env: object) -> bool:
        calls["n"] += 1
        return original(self, env)  # type: ignore[arg-type]

    Constraint.holds = counting  # type: ignore[method-assign]
    try:
        rows = list(iter_valid(space))
    finally:
        Constraint.holds = original  # type: ignore[method-assign]
    assert len(rows) == 10**4  # x = y = 1, every value of the four wide parameters
    assert calls["n"] <= 4 * 4  # checked once per (x, y) pair, never per wide configuration


def test_hardware_names_in_constraints() -> None:
    hw = load_profile("h100-sxm")
    space = ParamSpace(
        (Param.ints("bx", [256, 512, 1024], 256), Param.ints("by", [1, 2, 4], 1)),
        (Constraint.parse("bx * by <= hw.max_threads_per_block"),),
    )
    built = SearchSpace.build(space, hw)
    assert sorted(tuple(built.config(r).values()) for r in range(len(built))) == [
        (256, 1),
        (256, 2),
        (256, 4),
        (512, 1),
        (512, 2),
        (1024, 1),
    ]


def test_division_by_zero_names_the_constraint() -> None:
    space = ParamSpace((Param.ints("n", [4, 8], 4), Param.ints("t", [0, 2], 2)), (Constraint.parse("n % t == 0"),))
    with pytest.raises(SpecError, match=r"constraint 'n % t == 0': division by zero \(at .*t=0"):
        SearchSpace.build(space)


def test_empty_space_is_an_error() -> None:
    space = ParamSpace((Param.ints("a", [1, 2], 1),), (Constraint.parse("a > 5"),))
    with pytest.raises(UsageError, match="no valid configuration.*a > 5"):
        SearchSpace.build(space)


def test_large_space_is_sampled_not_materialised() -> None:
    params = tuple(Param.int_range(f"p{i}", 0, 99, 0) for i in range(4))  # 10^8 configurations
    space = ParamSpace(params, (Constraint.parse("p0 + p1 < 150"),))
    built = SearchSpace.build(space, max_valid=5000, sample_size=3000, rng=np.random.default_rng(1))
    assert not built.complete and len(built) > 1000
    assert all(space.is_valid(built.config(r)) for r in range(0, len(built), 97))
    rows = sample_valid(space, np.random.default_rng(2), 50)
    assert len(rows) == 50 and len(set(rows)) == 50
