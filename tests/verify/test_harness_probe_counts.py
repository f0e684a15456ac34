"""Element counts read off measured extents: products of the size variables, plus one,
and whole multiples of a product (a row holding a gate and an up half is 2 * T * D)."""

from __future__ import annotations

from pathlib import Path

import pytest

from kxform.frontend.source import SourceText
from kxform.harness.infer import infer_spec
from kxform.harness.probe import count_expression, covering_expression
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


def test_a_product_with_a_halo_row_or_column_is_found_after_the_plain_ones() -> None:
    sizes = ({"nx": 45, "ny": 67}, {"nx": 48, "ny": 128})
    assert count_expression([45 * 68, 48 * 129], sizes, ["nx", "ny"]) == "nx * (ny + 1)"
    assert count_expression([46 * 67, 49 * 128], sizes, ["nx", "ny"]) == "ny * (nx + 1)"
    assert count_expression([45 * 67, 48 * 128], sizes, ["nx", "ny"]) == "nx * ny"


def test_an_input_read_short_of_its_last_row_is_covered_by_less_than_one_row() -> None:
    # logits[b * V + t]: the last row is read up to its target only
    assert covering_expression([69 * 45 + 12, 63 * 48 + 40], SIZES, ["T", "D"]) == "T * D"
    assert (
        covering_expression([45 * 68 - 1, 48 * 129 - 1], ({"nx": 45, "ny": 67}, {"nx": 48, "ny": 128}), ["nx", "ny"])
        == "nx * (ny + 1)"
    )
    # short by more than a row at one size: no count
    assert covering_expression([68 * 45, 63 * 48 + 40], SIZES, ["T", "D"]) is None


@pytest.mark.slow
def test_a_buffer_the_kernel_never_names_is_one_element() -> None:
    runtime = CpuRuntime()
    if not runtime.available()[0]:
        pytest.skip("no host compiler for the CPU runtime")
    path = ROOT / "corpora" / "fdtd2d" / "fdtd2d.cu"
    draft = infer_spec(SourceText(str(path), path.read_bytes()), "fdtd_step2_kernel", runtime)
    ey = draft.text.split('name = "ey"')[1].split("[[")[0]
    assert 'count = "1"  # review: the kernel never names this parameter' in ey
    assert 'count = "nx * (ny + 1)"  # measured' in draft.text and not draft.todos


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
