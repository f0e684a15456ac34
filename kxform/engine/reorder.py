"""Rewrites that evaluate a reduction or an accumulation in a new order.

C for combining the partial results of a reduction that a rewrite evaluates in parts
(lanes of a row, workers of a column): one spelling per operator and element type, so
every pass that reorders a reduction combines it the way the original accumulated it.
How such a rewrite is verified is kxform.engine.policy.reordered_sums's. Where a pass
derives no bound of its own, two versions that accumulate in different orders are
compared within twice the spec's tolerance (`reordered_compare`): both are within it of
the exact result (the spec's reference check), so within twice it of each other.
"""

from __future__ import annotations

from kxform.engine.policy import OutputCompare


def combine_text(op: str, ctype: str, a: str, b: str) -> str:
    """C for combining two partial results of a reduction with operator `op` (+, max,
    min) on `ctype`: `a + b`, `fmaxf(a, b)` for float, `fmax` for double, `max(a, b)` for
    integers (CUDA's overloads)."""
    if op == "+":
        return f"{a} + {b}"
    suffix = {"float": "f", "double": ""}.get(ctype)
    return f"{op}({a}, {b})" if suffix is None else f"f{op}{suffix}({a}, {b})"


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
