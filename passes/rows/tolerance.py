"""How a rewrite of the `rows` pass compares with the original: the reductions it combines
over a row's lanes, through the engine's measured bound for reordered sums.

max and min give the same value in any order, and so do integer sums: a kernel whose
reordered reductions are only those verifies bit-exact (so does one that only distributes
writes). Float and double sums are held to the absolute per-output bound the original's
reorder probe measures (kxform.engine.policy.reordered_sums, kxform.verify.probe): the
lanes' partial sums and the butterfly are one more order of the same terms. The spec's
fills are what make a wrong reorder visible: normalisations fill rows with a non-zero
mean, so an error of one lost term is far above the bound.
"""

from __future__ import annotations

import math

from kxform.analysis import AccessAnalysis
from kxform.engine.pass_api import PassContext
from kxform.engine.policy import OutputCompare, reordered_sums
from kxform.frontend.model import Function
from kxform.passes.rows.plan import Plan


def compare_for(ctx: PassContext, kernel: Function, found: Plan, lanes: int) -> OutputCompare:
    """Exact at one lane (nothing is reordered); the reordered sums' measured bound otherwise."""
    if lanes == 1:
        return OutputCompare("exact", reason="one lane per row: every element is computed as before")
    loops = {loop.id: loop for loop in ctx.analysis(AccessAnalysis, kernel).loops}
    return reordered_sums(
        ctx.model, kernel, found.reductions, loops, f"sharing each row over {lanes} lanes", chain(lanes)
    )


def chain(lanes: int) -> str:
    """The height of the rewrite's summation tree over `{n}` terms: each lane adds its
    ceil(n / G) terms in a chain, then log2 G butterfly steps combine the lanes (G > 32:
    5 steps in each warp, then G / 32 - 1 additions of the warps' partials)."""
    steps = int(math.log2(lanes)) if lanes <= 32 else 5 + lanes // 32 - 1
    return f"({{n}} + {lanes - 1}) / {lanes} - 1 + {steps}"
