"""How a rewrite that evaluates reductions in a new order is verified: bit-exact where the
order cannot change the result, a bound derived from the reordered sums otherwise.

max and min give the same value in any order, and integer sums are exact in any order
(wrap-around addition is associative): a rewrite that reorders only those verifies
bit-exact. A floating-point sum of n terms, in any order, is within (n - 1) * u *
sum|x_i| of the exact sum (Higham, Accuracy and Stability of Numerical Algorithms, 2nd
ed., section 4.2; u the unit roundoff: 2^-24 for float, 2^-53 for double). The original
sums in one chain of n - 1 additions; a rewrite that splits the sum (over lanes, threads
or blocks, then a tree or an ordered combination) has a shorter longest chain, `chain`.
Both lie within the bound of the exact sum, so they lie within ((n - 1) + chain) * u *
sum|x_i| of each other. That bound, as an expression over the kernel's scalar parameters
(n is the reduced loop's extent as written), is what verification enforces at each check
size (kxform.engine.policy.OutputCompare mode `bound`); several reordered sums: the
largest. Each pass states its own chain; this module turns the sums into the comparison.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from kxform.analysis.records import Reduction
from kxform.engine.policy import OutputCompare

UNIT_ROUNDOFF = {"float": 2.0**-24, "double": 2.0**-53}
"""Unit roundoff of the floating-point types whose reordered sums have a derived bound."""


@dataclass(frozen=True)
class ReorderedSum:
    """One floating-point sum a rewrite evaluates in a new order: `n` terms (an expression
    over the kernel's scalar parameters) and the rewritten order's longest chain of
    additions (`chain`, an expression too)."""

    var: str
    ctype: str
    n: str
    chain: str

    @property
    def terms(self) -> str:
        """The bound in units of u: both orders' chains."""
        return f"(({self.n}) - 1) + ({self.chain})"

    def describe(self) -> str:
        u = UNIT_ROUNDOFF[self.ctype]
        return (
            f"'{self.var}' ({self.ctype}, n = {self.n}): |rewritten - original| <= (({self.n} - 1) + "
            f"({self.chain})) * {u:.3g} * sum|x_i|"
        )


def bounded(reduction: Reduction) -> bool:
    """Whether reordering `reduction` can change its value (a floating-point sum)."""
    return reduction.op == "+" and reduction.ctype in UNIT_ROUNDOFF


def reorder_compare(reductions: Sequence[Reduction], sums: Sequence[ReorderedSum]) -> OutputCompare:
    """Exact where no floating-point sum is evaluated in a new order (the reason names the
    reductions that are); the derived bound otherwise, with each sum's bound stated."""
    if not sums:
        ops = sorted({r.op for r in reductions})
        why = (
            f"only {' and '.join(ops)} reductions are reordered: exact in any order"
            if reductions
            else "no reduction is reordered: every element is computed as before"
        )
        return OutputCompare("exact", reason=why)
    terms = sorted({s.terms for s in sums})
    bound = terms[0] if len(terms) == 1 else f"max({', '.join(terms)})"
    stated = "; ".join(s.describe() for s in sums)
    return OutputCompare(
        "bound",
        reason=f"reordered sums (Higham): {stated}; enforced per size relative to the outputs",
        bound=bound,
        unit=max(UNIT_ROUNDOFF[s.ctype] for s in sums),
    )


def combine_text(op: str, ctype: str, a: str, b: str) -> str:
    """C for combining two partial results of a reduction with operator `op` (+, max,
    min) on `ctype`: `a + b`, `fmaxf(a, b)` for float, `fmax` for double, `max(a, b)` for
    integers (CUDA's overloads)."""
    if op == "+":
        return f"{a} + {b}"
    suffix = {"float": "f", "double": ""}.get(ctype)
    return f"{op}({a}, {b})" if suffix is None else f"f{op}{suffix}({a}, {b})"
