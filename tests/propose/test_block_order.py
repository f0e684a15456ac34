"""Predictions without a GPU come from the pass's own `block_order`: the evaluator names no
pass, a pass that keeps the hardware's order gets no prediction, and any pass that
reorders blocks (not only swizzle) is ranked by the order it states."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from kxform.engine.pass_api import BlockOrder, Proposal, Provenance
from kxform.frontend.source import validate_bytes
from kxform.hw import load_profile
from kxform.orchestrate.runner import ApplyConfig
from kxform.passes.launch.launch import Launch
from kxform.passes.swizzle.patterns import get_pattern
from kxform.passes.swizzle.swizzle import Swizzle
from kxform.propose.evaluate import Evaluator
from kxform.propose.predict import WaveFootprint

GRID = (16, 12)
FOOTPRINT = WaveFootprint(GRID, 24, (("A", frozenset("y"), 4096.0), ("B", frozenset("x"), 4096.0)))
"""A GEMM-like kernel: A's tile chosen by blockIdx.y, B's by blockIdx.x."""


def _blocks() -> tuple[np.ndarray, np.ndarray]:
    pid = np.arange(GRID[0] * GRID[1], dtype=np.uint64)
    return pid % np.uint64(GRID[0]), pid // np.uint64(GRID[0])


def _evaluator(pass_: object) -> Evaluator:
    source = validate_bytes("k.cu", b"__global__ void k(float *a) {}\n")
    config = ApplyConfig("x", hw=load_profile("h100"), verify="cpu")
    return Evaluator(source, pass_, config, None, None, FOOTPRINT)  # type: ignore[arg-type]


def test_swizzle_states_the_order_of_its_pattern() -> None:
    proposal = Proposal.of("swizzle", "k", {"pattern": "grouped", "group": 4, "along": "y"}, "test")
    order = Swizzle().block_order(proposal)
    bx, by = _blocks()
    lx, ly = order(bx, by, *GRID)
    config = get_pattern("grouped").resolve({"group": 4, "along": "y"})
    expected = [config.apply(int(x), int(y), *GRID) for x, y in zip(bx, by)]
    assert list(zip(lx.tolist(), ly.tolist())) == expected
    assert expected != list(zip(bx.tolist(), by.tolist()))  # the pattern does reorder: the test could fail


def test_a_custom_formula_is_evaluated_as_written() -> None:
    proposal = Proposal.of(
        "swizzle", "k", {"pattern": "custom"}, "test", Provenance("fixed"), payload="lx = gx - 1 - bx\nly = by"
    )
    bx, by = _blocks()
    lx, ly = Swizzle().block_order(proposal)(bx, by, *GRID)
    assert (lx == np.uint64(GRID[0] - 1) - bx).all() and (ly == by).all()


def test_a_pass_that_keeps_the_hardware_order_gets_no_prediction() -> None:
    proposal = Proposal.of("launch", "k", {"K_BLOCK_X": 128}, "test")
    assert Launch().block_order(proposal) is None
    assert _evaluator(Launch())._predict(proposal) is None


def test_swizzle_is_ranked_by_the_footprint_of_its_order() -> None:
    proposal = Proposal.of("swizzle", "k", {"pattern": "grouped", "group": 4, "along": "y"}, "test")
    predicted = _evaluator(Swizzle())._predict(proposal)
    assert predicted is not None and predicted.value < predicted.baseline  # grouping shares A and B tiles per wave


@dataclass(frozen=True)
class _Transposed(Launch):
    """A pass the evaluator has never heard of that states a block order."""

    def block_order(self, proposal: Proposal) -> BlockOrder:
        def transposed(bx: np.ndarray, by: np.ndarray, gx: int, gy: int) -> tuple[np.ndarray, np.ndarray]:
            pid = by * np.uint64(gx) + bx
            return pid // np.uint64(gy), pid % np.uint64(gy)

        return transposed


def test_any_pass_that_states_an_order_is_predicted() -> None:
    proposal = Proposal.of("launch", "k", {}, "test")
    predicted = _evaluator(_Transposed())._predict(proposal)
    assert predicted is not None
    assert predicted.value == FOOTPRINT.bytes_per_wave(_Transposed().block_order(proposal))
    assert predicted.baseline == FOOTPRINT.bytes_per_wave(None)
