"""The block order a swizzle proposal gives the grid, vectorised over many blocks: what
the locality predictions (kxform.propose.predict) rank attempts by, handed to them
through `Pass.block_order` so they never name this pass."""

from __future__ import annotations

import numpy as np

from kxform.engine.pass_api import BlockOrder
from kxform.passes.swizzle.formula import FormulaRemap
from kxform.passes.swizzle.formula_eval import Lanes, evaluate
from kxform.passes.swizzle.patterns import RemapConfig


def vectorised(config: RemapConfig | FormulaRemap) -> BlockOrder:
    """(bx, by arrays, gx, gy) -> (lx, ly) arrays for a library pattern or a custom formula."""
    if isinstance(config, FormulaRemap):

        def formula(bx: np.ndarray, by: np.ndarray, gx: int, gy: int) -> tuple[np.ndarray, np.ndarray]:
            n = len(bx)
            return evaluate(config.formula, Lanes(bx, by, np.full(n, gx, np.uint64), np.full(n, gy, np.uint64)))

        return formula

    def library(bx: np.ndarray, by: np.ndarray, gx: int, gy: int) -> tuple[np.ndarray, np.ndarray]:
        pairs = [config.apply(int(x), int(y), gx, gy) for x, y in zip(bx, by)]
        return (np.array([p[0] for p in pairs], dtype=np.uint64), np.array([p[1] for p in pairs], dtype=np.uint64))

    return library
