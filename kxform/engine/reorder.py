"""C for combining the partial results of a reduction that a rewrite evaluates in parts
(lanes of a row, workers of a column): one spelling per operator and element type, so
every pass that reorders a reduction combines it the way the original accumulated it.
How such a rewrite is verified is kxform.engine.policy.reordered_sums's."""

from __future__ import annotations


def combine_text(op: str, ctype: str, a: str, b: str) -> str:
    """C for combining two partial results of a reduction with operator `op` (+, max,
    min) on `ctype`: `a + b`, `fmaxf(a, b)` for float, `fmax` for double, `max(a, b)` for
    integers (CUDA's overloads)."""
    if op == "+":
        return f"{a} + {b}"
    suffix = {"float": "f", "double": ""}.get(ctype)
    return f"{op}({a}, {b})" if suffix is None else f"f{op}{suffix}({a}, {b})"
