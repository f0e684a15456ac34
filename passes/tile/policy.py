"""How a rewritten tiling is verified: its launch, and how its outputs compare.

Launch: the grid, block and dynamic shared memory of the kernel's launch site, with the
host variables translated into the kernel parameters they are passed as (`N` passed as
the kernel's `N`), so the verifier can evaluate them per size from the harness spec's
arguments with the parameters bound. A grid dimension that reads something else (a host
variable the kernel never receives) and no parameter stays the spec's own.

Comparison: at the original values nothing is recomputed differently: bit-exact. At
other values, a floating-point accumulation inside a loop whose trip structure depends on
the parameters or on the block shape (`k < TILE`, `i += blockDim.x`, a tree over
`blockDim.x / 2`) is summed in another order. Both orders are within the spec's
tolerance of the exact result (the spec's reference check), so they are within twice
that of each other: the spec's tolerance doubled, and the reason, go to the log.
Without such an accumulation the outputs must still be bit-exact.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from kxform.analysis import AccessAnalysis
from kxform.engine import launch_site
from kxform.engine.params import Config
from kxform.engine.policy import LaunchBinding, OutputCompare, VerifyPolicy
from kxform.engine.reorder import reordered_compare
from kxform.frontend.model import SourceModel
from kxform.passes.tile.quantities import Tiling

WORD_RE = re.compile(r"[A-Za-z_]\w*")
FLOAT_TYPES = re.compile(r"\b(float|double|half|__half|__nv_bfloat16|bfloat16|T|scalar_t)\b")


def launch_binding(model: SourceModel, tiling: Tiling, config: Config) -> LaunchBinding | None:
    """The rewritten version's launch over kernel parameters; None when a dimension that
    depends on the parameters reads something the kernel does not receive."""
    if not tiling.launches:
        return None
    defaults = {q.name: q.value for q in tiling.quantities}
    values = {q.name: int(config.get(q.name, q.value)) for q in tiling.quantities}
    return launch_site.launch_binding(model, tiling.kernel, tiling.launches[0], tiling.names, values, defaults)


def reordered_sum(model: SourceModel, tiling: Tiling, analyses: Sequence[AccessAnalysis]) -> str | None:
    """The first floating-point accumulation whose order depends on the parameters or the
    block shape, as `name (line N)`; None when there is none. From the shared access
    analysis of each function of the kernel's closure (`analyses`): sums and products
    carried by a loop whose header reads a parameter or the block shape, in-place updates (`+=`,
    `-=`, `*=`) of memory inside such a loop (a shared-memory tree, a register array),
    and `atomicAdd`s there."""
    names = set(tiling.names) | {"blockDim", "gridDim", "hipBlockDim_x", "hipBlockDim_y"}
    data = model.source.data
    found: list[tuple[int, str]] = []
    for analysis in analyses:
        shaped = {
            loop.id
            for loop in analysis.loops
            if set(WORD_RE.findall(data[loop.header.start : loop.header.end].decode("utf-8", "replace"))) & names
        }
        for loop in (lp for lp in analysis.loops if lp.id in shaped):
            found += [
                (r.updates[0].start, r.var)
                for r in loop.reductions
                if r.op in ("+", "*") and FLOAT_TYPES.search(r.ctype)
            ]  # max and min are exact in any order
        found += [
            (a.span.start, a.buffer)
            for a in analysis.accesses
            if a.update_op in ("+=", "-=", "*=") and shaped & set(a.loops) and FLOAT_TYPES.search(a.element)
        ]
        found += [
            (span.start, "atomicAdd")
            for span in analysis.atomics
            if data[span.start : span.end].startswith(b"atomicAdd")
            and any(analysis.loop(i).body.contains(span) for i in shaped)
        ]
    if not found:
        return None
    offset, name = min(found)
    return f"'{name}' (line {model.source.line_col(offset)[0]})"


def verify_policy(
    model: SourceModel, tiling: Tiling, config: Config, analyses: Sequence[AccessAnalysis]
) -> VerifyPolicy:
    defaults = {q.name: q.value for q in tiling.quantities}
    if all(config.get(n, v) == v for n, v in defaults.items()):
        return VerifyPolicy(compare=OutputCompare("exact", reason="at the original values only names change"))
    binding = launch_binding(model, tiling, config)
    launch = binding if binding is not None else LaunchBinding(grid=("unknown",), origin="no readable launch")
    reordered = reordered_sum(model, tiling, analyses)
    if reordered is None:
        compare = OutputCompare("exact", reason="no floating-point accumulation depends on the tile sizes")
    else:
        compare = reordered_compare(reordered, "the summation order depends on the tile sizes")
    return VerifyPolicy(launch, compare, required=True)
