"""How a rewrite that evaluates an accumulation in a new order is verified.

Where a pass derives no bound of its own (kxform.engine.reorder_probe measures one for
sums a pass states), two versions that accumulate in different orders are compared
within twice the spec's tolerance (`reordered_compare`): both are within it of the exact
result (the spec's reference check), so within twice it of each other.
"""

from __future__ import annotations

from kxform.engine.policy import OutputCompare


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
