"""How a rewrite of the `rows` pass is verified: its launch, and a tolerance derived from
the reductions it reorders.

max and min give the same value in any order: a kernel whose reordered reductions are
only those verifies bit-exact (so does one that only distributes writes). A sum of n
terms in floating point is within (n - 1) * u * sum|x_i| of the exact sum in any order
(Higham, Accuracy and Stability of Numerical Algorithms, 2nd ed., section 4.2; u the unit
roundoff: 2^-24 for float, 2^-53 for double). The original sums sequentially (n - 1
additions in a chain); the rewrite sums n / G terms per lane, then log2 G butterfly
steps (G > 32: log2 32 steps, then G / 32 - 1 additions of partials), so its chain is
shorter. Both lie within the bound of the exact sum, so they lie within
(n - 1 + chain) * u * sum|x_i| of each other: at most twice the spec's tolerance, which
states the single-order bound at its sizes for the original against the exact reference.
Integer sums are exact in any order (wrap-around addition is associative).

The spec's fills are what make a wrong reorder visible: normalisations fill rows with a
non-zero mean (a mean subtracted from the values cancels), so an error of one lost term
is far above the bound.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from kxform.analysis.records import Reduction
from kxform.engine.policy import OutputCompare

UNIT_ROUNDOFF = {"float": 2.0**-24, "double": 2.0**-53}


@dataclass(frozen=True)
class ReorderBound:
    """The bound for one reordered sum of `n` terms (`n` the loop's bound as written)."""

    var: str
    ctype: str
    n: str
    lanes: int

    @property
    def chain(self) -> str:
        steps = int(math.log2(self.lanes)) if self.lanes <= 32 else 5 + self.lanes // 32 - 1
        return f"{self.n}/{self.lanes} - 1 + {steps}"

    def describe(self) -> str:
        u = UNIT_ROUNDOFF[self.ctype]
        return (f"'{self.var}' ({self.ctype}, n = {self.n}): |rewritten - original| <= (({self.n} - 1) + "
                f"({self.chain})) * {u:.3g} * sum|x_i|")


def compare_for(reductions: Sequence[Reduction], bounds: Sequence[tuple[Reduction, str]], lanes: int) -> OutputCompare:
    """Exact where nothing is summed in a new order; twice the spec's tolerance otherwise,
    with each sum's bound stated."""
    sums = [(r, n) for r, n in bounds if r.op == "+" and r.ctype in UNIT_ROUNDOFF]
    if not sums or lanes == 1:
        ops = sorted({r.op for r in reductions})
        why = f"only {' and '.join(ops)} reductions are reordered: exact in any order" if reductions else \
            "no reduction is reordered: every element is computed as before"
        return OutputCompare("exact", reason=why)
    stated = "; ".join(ReorderBound(r.var, r.ctype, n, lanes).describe() for r, n in sums)
    return OutputCompare("spec", 2.0, f"reordered sums (Higham): {stated}; both orders lie within the spec's "
                         "single-order tolerance of the exact result, so within twice it of each other")
