"""Element counts read off measured extents: products of the size variables, plus one,
and whole multiples of a product (a row holding a gate and an up half is 2 * T * D)."""

from __future__ import annotations

from pathlib import Path

import pytest

from kxform.frontend.source import SourceText
from kxform.harness.infer import infer_spec
from kxform.harness.probe import count_expression
from kxform.runtime.cpu import CpuRuntime

SIZES = ({"T": 70, "D": 45}, {"T": 64, "D": 48})
ROOT = Path(__file__).resolve().parents[2]


def test_a_plain_product_is_preferred_to_a_multiple() -> None:
    assert count_expression([70 * 45, 64 * 48], SIZES, ["T", "D"]) == "T * D"
    assert count_expression([70 * 45 + 1, 64 * 48 + 1], SIZES, ["T", "D"]) == "T * D + 1"


def test_a_whole_multiple_of_a_product_is_found() -> None:
    assert count_expression([2 * 70 * 45, 2 * 64 * 48], SIZES, ["T", "D"]) == "2 * T * D"
    assert count_expression([3 * 45, 3 * 48], SIZES, ["T", "D"]) == "3 * D"


def test_extents_that_agree_at_one_size_only_match_nothing() -> None:
    # 2 * T * D at the first size, T * D + 7 at the second: no single expression fits both
    assert count_expression([2 * 70 * 45, 64 * 48 + 7], SIZES, ["T", "D"]) is None
    assert count_expression([5 * 70 * 45, 5 * 64 * 48], SIZES, ["T", "D"]) is None


@pytest.mark.slow
def test_silu_and_mul_draft_counts_its_input_as_twice_the_output() -> None:
    runtime = CpuRuntime()
    ok, why = runtime.available()
    if not ok:
        pytest.skip(f"no host compiler for the CPU runtime: {why}")
    path = ROOT / "corpora" / "naive" / "silu_and_mul" / "naive.cu"
    draft = infer_spec(SourceText(str(path), path.read_bytes()), "silu_and_mul_naive", runtime)
    assert 'count = "2 * T * D"  # measured' in draft.text
    assert 'count = "T * D"  # measured' in draft.text
    assert "# fill in:" not in draft.text
