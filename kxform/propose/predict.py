"""Ranking without a GPU: a prediction of how much data the blocks that run together touch.

Without a GPU nothing can be timed, so verified attempts are ranked by a prediction,
and every record says so (`ranked_by: "prediction"`). The L2 model (kxform.locality,
built separately) is the prediction to use: when it offers `proposer_predictor()`
returning an object with `predict(kernel_ctx, order) -> Prediction | None` (`order`:
the pass's `block_order`), it replaces the fallback here.

The fallback, `WaveFootprint`, is deliberately simple: blocks are dispatched in waves
of `sm_count x blocks per SM` (blocks per SM from threads per block only); for each
wave of the bench grid it counts, per buffer, the distinct tiles the wave's logical
blocks touch (a buffer indexed by blockIdx.y alone has one tile per grid row, by both
axes one per block), weighted by the bytes of one tile at the bench size. Fewer bytes
per wave means more of what a wave reads is shared in L2. It ignores caches, timing
and everything else: it is a ranking aid, never a speedup claim.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from kxform.engine.pass_api import BlockOrder
from kxform.hw import HwProfile
from kxform.propose.access import Access

MAX_WAVES = 16
"""Waves averaged (the first ones of the grid): enough to see the pattern, cheap."""
MAX_BLOCKS_PER_SM = 32

Remap = BlockOrder
"""(bx, by arrays, gx, gy) -> (lx, ly) arrays: a block order over many blocks at once
(a pass supplies it: `Pass.block_order`)."""


@dataclass(frozen=True)
class Prediction:
    value: float
    """Bytes per wave (lower is better)."""
    baseline: float
    """The same for the original (row-major) order."""
    basis: str

    @property
    def ratio(self) -> float:
        return self.value / self.baseline if self.baseline else 1.0

    def describe(self) -> str:
        return (
            f"predicted {self.value / 1e6:.3f} MB touched per wave vs {self.baseline / 1e6:.3f} MB in the original "
            f"order ({self.ratio:.2f}x; {self.basis})"
        )


@dataclass(frozen=True)
class WaveFootprint:
    """The fallback predictor for one kernel at its bench size."""

    grid: tuple[int, int]
    wave: int
    tiles: tuple[tuple[str, frozenset[str], float], ...]
    """(buffer, block axes its subscript depends on, bytes of one tile)."""

    @classmethod
    def build(
        cls,
        accesses: Sequence[Access],
        grid: tuple[int, int],
        threads_per_block: int,
        hw: HwProfile,
        buffer_bytes: dict[str, int],
    ) -> WaveFootprint:
        per_sm = max(1, min(MAX_BLOCKS_PER_SM, hw.max_threads_per_sm // max(1, threads_per_block)))
        axes: dict[str, frozenset[str]] = {}
        for access in accesses:
            axes[access.buffer] = axes.get(access.buffer, frozenset()) | access.block_axes
        gx, gy = grid
        tiles = []
        for buffer, used in axes.items():
            count = {frozenset(): 1, frozenset("x"): gx, frozenset("y"): gy}.get(used, gx * gy)
            tiles.append((buffer, used, buffer_bytes.get(buffer, 0) / count))
        return cls(grid, hw.sm_count * per_sm, tuple(tiles))

    def bytes_per_wave(self, remap: Remap | None) -> float:
        gx, gy = self.grid
        total = gx * gy
        waves = min(MAX_WAVES, max(1, total // self.wave))
        pid = np.arange(min(total, waves * self.wave), dtype=np.uint64)
        bx, by = pid % np.uint64(gx), pid // np.uint64(gx)
        lx, ly = (bx, by) if remap is None else remap(bx, by, gx, gy)
        wave_of = pid // np.uint64(self.wave)
        footprint = 0.0
        for _, used, tile_bytes in self.tiles:
            key = (
                lx
                if used == frozenset("x")
                else ly
                if used == frozenset("y")
                else ly * np.uint64(gx) + lx
                if used
                else np.zeros_like(lx)
            )
            distinct = len(np.unique(wave_of * np.uint64(total + 1) + key))
            footprint += distinct / waves * tile_bytes
        return footprint

    def predict(self, remap: Remap) -> Prediction:
        gx, gy = self.grid
        basis = (
            f"wave-footprint heuristic, unmeasured: waves of {self.wave} blocks on the {gx}x{gy} bench grid, "
            f"first {min(MAX_WAVES, max(1, gx * gy // self.wave))} waves"
        )
        return Prediction(self.bytes_per_wave(remap), self.bytes_per_wave(None), basis)


def locality_predictor() -> object | None:
    """The L2 model's predictor when this build has one (the seam to kxform.locality)."""
    try:
        from kxform import locality  # type: ignore[attr-defined]
    except ImportError:
        return None
    factory = getattr(locality, "proposer_predictor", None)
    return factory() if callable(factory) else None
