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

from kxform.engine import launch_site
from kxform.engine.params import Config
from kxform.engine.policy import LaunchBinding, OutputCompare, VerifyPolicy
from kxform.frontend.model import SourceModel
from kxform.passes.tile.quantities import Tiling

ACCUMULATE_RE = re.compile(r"([A-Za-z_]\w*)\s*(?:\[[^;=]*\])*\s*(\+=|-=|\*=)|\batomicAdd\s*\(")
FLOAT_TYPES = re.compile(r"\b(float|double|half|__half|__nv_bfloat16|bfloat16|T|scalar_t)\b")


def launch_binding(model: SourceModel, tiling: Tiling, config: Config) -> LaunchBinding | None:
    """The rewritten version's launch over kernel parameters; None when a dimension that
    depends on the parameters reads something the kernel does not receive."""
    if not tiling.launches:
        return None
    defaults = {q.name: q.value for q in tiling.quantities}
    values = {q.name: int(config.get(q.name, q.value)) for q in tiling.quantities}
    return launch_site.launch_binding(model, tiling.kernel, tiling.launches[0], tiling.names, values, defaults)


def reordered_sum(model: SourceModel, tiling: Tiling) -> str | None:
    """The first floating-point accumulation whose order depends on the parameters or the
    block shape, as `name (line N)`; None when there is none."""
    from kxform.frontend.queries import loops

    names = set(tiling.names) | {"blockDim", "gridDim", "hipBlockDim_x", "hipBlockDim_y"}
    for function in model.functions:
        if function.name not in tiling.closure:
            continue
        body = model.source.data[function.body.start:function.body.end].decode("utf-8", "replace")
        shaped = [lp for lp in loops(model, function.body)
                  if set(re.findall(r"[A-Za-z_]\w*", f"{lp.init} {lp.bound} {lp.step}")) & names]
        for match in ACCUMULATE_RE.finditer(body):
            offset = function.body.start + match.start()
            if not any(lp.body.start <= offset < lp.body.end for lp in shaped):
                continue
            target = match.group(1) or "atomicAdd"
            if target != "atomicAdd" and not _is_float(body, target, model, tiling):
                continue
            return f"'{target}' (line {model.source.line_col(offset)[0]})"
    return None


def _is_float(body: str, name: str, model: SourceModel, tiling: Tiling) -> bool:
    declared = re.search(rf"([\w:<>]+)\s*(?:\*\s*)?(?:__restrict__\s*)?\b{re.escape(name)}\b\s*(?:\[|=|;|,)", body)
    if declared is None:
        from kxform.frontend.queries import shared_decls

        decl = next((d for d in shared_decls(model) if d.name == name), None)
        return decl is None or bool(FLOAT_TYPES.search(decl.ctype))
    return bool(FLOAT_TYPES.search(declared.group(1)))


def verify_policy(model: SourceModel, tiling: Tiling, config: Config) -> VerifyPolicy:
    defaults = {q.name: q.value for q in tiling.quantities}
    if all(config.get(n, v) == v for n, v in defaults.items()):
        return VerifyPolicy(compare=OutputCompare("exact", reason="at the original values only names change"))
    binding = launch_binding(model, tiling, config)
    launch = binding if binding is not None else LaunchBinding(grid=("unknown",), origin="no readable launch")
    reordered = reordered_sum(model, tiling)
    if reordered is None:
        compare = OutputCompare("exact", reason="no floating-point accumulation depends on the tile sizes")
    else:
        compare = OutputCompare("spec", 2.0, f"the summation order of {reordered} depends on the tile sizes; both "
                                "orders are within the spec's tolerance of the exact result, so within twice it of "
                                "each other")
    return VerifyPolicy(launch, compare, required=True)
