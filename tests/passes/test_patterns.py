"""Every swizzle pattern is a bijection: the Python references by property, the emitted C
helpers by the real host-compiled check."""

from __future__ import annotations

import shutil

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kxform.passes.swizzle.bijection import check_helper
from kxform.errors import CheckFailed, UsageError
from kxform.passes.swizzle.patterns import PATTERNS, get_pattern


def configs():
    for pattern in PATTERNS.values():
        yield pattern.resolve({})
        if any(p.name == "group" for p in pattern.params):
            yield pattern.resolve({"group": 3, "along": "x"})
            yield pattern.resolve({"group": 1})
        if any(p.name == "xcds" for p in pattern.params):
            yield pattern.resolve({"xcds": 3})


CONFIGS = list(configs())


@pytest.mark.parametrize("config", CONFIGS, ids=lambda c: c.label())
@settings(max_examples=60, deadline=None)
@given(gx=st.integers(1, 70), gy=st.integers(1, 70))
def test_reference_is_a_bijection(config, gx: int, gy: int) -> None:
    image = {config.apply(bx, by, gx, gy) for by in range(gy) for bx in range(gx)}
    assert len(image) == gx * gy
    assert all(0 <= x < gx and 0 <= y < gy for x, y in image)


def test_naive_xcd_formula_is_not_a_bijection() -> None:
    """The trap REFERENCE.md warns about: (pid % X) * (T / X) + pid / X when T % X != 0."""
    total, xcds = 10, 8
    image = {(pid % xcds) * (total // xcds) + pid // xcds for pid in range(total)}
    assert len(image) < total
    config = get_pattern("xcd").resolve({"xcds": 8})
    assert len({config.apply(b, 0, total, 1) for b in range(total)}) == total


def test_grouped_matches_triton_order_on_a_small_grid() -> None:
    config = get_pattern("grouped").resolve({"group": 2})
    order = [config.apply(pid % 3, pid // 3, 3, 4) for pid in range(12)]
    assert order[:6] == [(0, 0), (0, 1), (1, 0), (1, 1), (2, 0), (2, 1)]


@pytest.mark.skipif(shutil.which("g++") is None and shutil.which("c++") is None, reason="no host C++ compiler")
@pytest.mark.parametrize("config", CONFIGS, ids=lambda c: c.label())
def test_emitted_helper_is_a_bijection(config) -> None:
    report = check_helper(config.helper_source(), config.helper_name())
    assert report.ok and report.shapes > 4096


@pytest.mark.skipif(shutil.which("g++") is None and shutil.which("c++") is None, reason="no host C++ compiler")
def test_non_bijective_helper_is_caught_with_a_counterexample() -> None:
    config = get_pattern("grouped").resolve({})
    broken = config.helper_source().replace("first + in_group % size", "first + in_group % (size + 1)")
    with pytest.raises(CheckFailed, match=r"not a bijection: grid \d+x\d+: block"):
        check_helper(broken, config.helper_name())


def test_parameters_are_validated() -> None:
    with pytest.raises(UsageError, match="unknown parameter 'gruop'"):
        get_pattern("grouped").resolve({"gruop": 4})
    with pytest.raises(UsageError, match="out of range"):
        get_pattern("grouped").resolve({"group": 0})
    with pytest.raises(UsageError, match="not one of"):
        get_pattern("grouped").resolve({"along": "z"})
    with pytest.raises(UsageError, match="unknown swizzle pattern 'zigzag'"):
        get_pattern("zigzag")
