"""How a rewrite of the `rows` pass is verified: the chain of additions its lanes and
tree give a reordered sum; the bound itself is kxform.engine.reorder's.

The rewrite sums ceil(n / G) terms per lane, then log2 G butterfly steps (G > 32: log2
32 steps, then G / 32 - 1 additions of partials), so its chain is shorter than the
original's n - 1. The spec's fills are what make a wrong reorder visible:
normalisations fill rows with a non-zero mean (a mean subtracted from the values
cancels), so an error of one lost term is far above the bound.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from kxform.analysis.records import Reduction
from kxform.engine.policy import OutputCompare
from kxform.engine.reorder import ReorderedSum, bounded, reorder_compare


def chain(n: str, lanes: int) -> str:
    """The rewritten order's longest chain of additions: ceil(n / G) - 1 per lane, then
    the tree's steps."""
    steps = int(math.log2(lanes)) if lanes <= 32 else 5 + lanes // 32 - 1
    return f"({n} + {lanes - 1})/{lanes} - 1 + {steps}"


def compare_for(reductions: Sequence[Reduction], bounds: Sequence[tuple[Reduction, str]], lanes: int) -> OutputCompare:
    """Exact where nothing is summed in a new order; the derived bound otherwise, with each
    sum's bound stated (`bounds`: each reduction with its extent n)."""
    if lanes == 1:
        return reorder_compare(reductions, ())
    sums = [ReorderedSum(r.var, r.ctype, n, chain(n, lanes)) for r, n in bounds if bounded(r)]
    return reorder_compare(reductions, sums)
