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
(n - 1 + chain) * u * sum|x_i| of each other. That bound, as an expression over the
kernel's scalar parameters (the row length), is what verification enforces: it is
evaluated at each check size as the relative tolerance (the spec's atol kept in its
stated proportion to rtol, for outputs that cancel to near zero), and each size's
evaluated bound is stated with its verdict. Several reordered sums: the largest bound.
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
        """The rewritten order's longest chain of additions: ceil(n / G) - 1 per lane, then
        the tree's steps."""
        steps = int(math.log2(self.lanes)) if self.lanes <= 32 else 5 + self.lanes // 32 - 1
        return f"({self.n} + {self.lanes - 1})/{self.lanes} - 1 + {steps}"

    @property
    def terms(self) -> str:
        """The bound in units of u, over the kernel's scalar parameters."""
        return f"(({self.n}) - 1) + ({self.chain})"

    def describe(self) -> str:
        u = UNIT_ROUNDOFF[self.ctype]
        return (
            f"'{self.var}' ({self.ctype}, n = {self.n}): |rewritten - original| <= (({self.n} - 1) + "
            f"({self.chain})) * {u:.3g} * sum|x_i|"
        )


def compare_for(reductions: Sequence[Reduction], bounds: Sequence[tuple[Reduction, str]], lanes: int) -> OutputCompare:
    """Exact where nothing is summed in a new order; the derived bound otherwise, with each
    sum's bound stated."""
    sums = [(r, n) for r, n in bounds if r.op == "+" and r.ctype in UNIT_ROUNDOFF]
    if not sums or lanes == 1:
        ops = sorted({r.op for r in reductions})
        why = (
            f"only {' and '.join(ops)} reductions are reordered: exact in any order"
            if reductions
            else "no reduction is reordered: every element is computed as before"
        )
        return OutputCompare("exact", reason=why)
    found = [ReorderBound(r.var, r.ctype, n, lanes) for r, n in sums]
    terms = sorted({b.terms for b in found})
    bound = terms[0] if len(terms) == 1 else f"max({', '.join(terms)})"
    stated = "; ".join(b.describe() for b in found)
    return OutputCompare(
        "bound",
        reason=f"reordered sums (Higham): {stated}; enforced per size relative to the outputs",
        bound=bound,
        unit=max(UNIT_ROUNDOFF[b.ctype] for b in found),
    )
