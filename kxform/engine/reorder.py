"""How a rewrite that evaluates an accumulation in a new order is verified.

A floating-point sum of n terms, in any order, is within (n - 1) * u * sum|x_i| of the
exact sum (Higham, Accuracy and Stability of Numerical Algorithms, 2nd ed., section
4.2; u the unit roundoff, `UNIT_ROUNDOFF`). Where a pass derives no bound of its own, two
versions that accumulate in different orders are compared within twice the spec's
tolerance (`reordered_compare`): both are within it of the exact result (the spec's
reference check), so within twice it of each other.
"""

from __future__ import annotations

from kxform.engine.policy import OutputCompare

UNIT_ROUNDOFF = {"float": 2.0**-24, "double": 2.0**-53}
"""Unit roundoff of the floating-point types whose reordered sums have a derived bound."""


def reordered_compare(accumulation: str, why: str) -> OutputCompare:
    """The comparison of two versions that compute the accumulation `accumulation` (`'acc'
    (line 12)`) differently (`why`): both are within the spec's tolerance of the exact result
    (the spec's reference check), so within twice it of each other."""
    return OutputCompare(
        "spec",
        2.0,
        f"{why} for {accumulation}; both versions are within the spec's tolerance of "
        "the exact result, so within twice it of each other",
    )
