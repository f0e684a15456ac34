"""The parameter space of a tiled kernel: each lifted constant's domain, and the constraints
the code and the hardware put on a choice, each a readable expression with the source
line it was derived from.

Derived here (from the launch, the shared declarations, the loops and the operators):
threads per block within the profile's limit, and a multiple of the warp size where the
code assumes whole warps; powers of two where a reduction halves the block or the code
masks with a parameter minus one; static shared memory within the 48 KiB static limit
and static plus dynamic within the profile's per-block limit; divisibility where a loop
strides over a tile with no remainder; and couplings the indexing assumes (one thread per
tile column: blockDim.x == TILE). Register pressure needs the compiler: it is checked per
candidate with ptxas (kxform.build.resources).
"""

from __future__ import annotations

import re

from kxform.engine.params import Constraint, Param, ParamSpace
from kxform.frontend.c_expr import SIZEOF, c_to_expr
from kxform.frontend.model import SourceModel
from kxform.frontend.queries import builtin_uses, loops, shared_decls
from kxform.passes.tile.quantities import Quantity, Tiling

POW2 = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024)
UNROLL = (1, 2, 4, 8, 16)
STATIC_SHARED_LIMIT = 48 * 1024
WARP_RE = re.compile(r"\bwarpSize\b|>>\s*5\b|/\s*32\b|%\s*32\b|&\s*31\b|__shfl\w*|\blane\w*\b|__ballot\w*")


def preferred(quantity: Quantity) -> tuple[int, ...]:
    """The values candidates are drawn from: powers of two (unroll factors up to 16) and the original."""
    base = UNROLL if quantity.roles == ("unroll",) else POW2
    return tuple(sorted(set(base) | {quantity.value}))


def derive_space(model: SourceModel, tiling: Tiling) -> ParamSpace:
    """Every integer from 1 to 1024 (64 for unroll factors) is in a parameter's domain; the
    constraints decide which configurations are valid."""
    names = tiling.names
    params = tuple(
        Param.int_range(
            q.name,
            1,
            64 if q.roles == ("unroll",) else 1024,
            q.value,
            doc=", ".join(q.roles),
            origin=f"{model.source.path}:{q.line}",
        )
        for q in tiling.quantities
    )
    constraints: list[Constraint] = []
    constraints += _threads(model, tiling)
    constraints += _shared(model, tiling)
    constraints += _divisibility(model, tiling)
    constraints += _powers_of_two(model, tiling)
    constraints += _couplings(model, tiling)
    seen: set[str] = set()
    unique = []
    for constraint in constraints:
        if constraint.text not in seen and constraint.params <= set(names) and constraint.params:
            seen.add(constraint.text)
            unique.append(constraint)
    return ParamSpace(params, tuple(unique))


def _origin(model: SourceModel, offset: int) -> str:
    return f"{model.source.path}:{model.source.line_col(offset)[0]}"


def block_exprs(tiling: Tiling) -> tuple[str | None, ...]:
    """The launch's block dimensions over the parameters (None: not expressible)."""
    if not tiling.launches:
        return ()
    return tuple(c_to_expr(b, tiling.names, dict(tiling.fixed)) for b in tiling.launches[0].block)


def _threads(model: SourceModel, tiling: Tiling) -> list[Constraint]:
    dims = block_exprs(tiling)
    if (
        not dims
        or any(d is None for d in dims)
        or not any(set(re.findall(r"\w+", d or "")) & set(tiling.names) for d in dims)
    ):
        return []
    threads = " * ".join(f"({d})" if re.search(r"[-+]", d or "") else str(d) for d in dims if d != "1")
    block_var = tiling.launches[0].block_var
    where = _origin(model, block_var.span.start if block_var else tiling.launches[0].site.span.start)
    out = [Constraint.parse(f"{threads} <= hw.max_threads_per_block", "threads per block", where)]
    signal = _warp_signal(model, tiling)
    if signal is not None:
        out.append(
            Constraint.parse(
                f"({threads}) % 32 == 0", f"the code assumes whole warps ({signal[0]})", _origin(model, signal[1])
            )
        )
    for axis, dim in zip("xyz", dims):
        for loop in _closure_loops(model, tiling):
            if loop.step.replace(" ", "") == ">>1" and re.search(rf"blockDim\.{axis}\b", loop.init):
                out.append(
                    Constraint.parse(
                        f"is_pow2({dim})",
                        f"the reduction halves blockDim.{axis} down to 1",
                        _origin(model, loop.header.start),
                    )
                )
    return out


def _warp_signal(model: SourceModel, tiling: Tiling) -> tuple[str, int] | None:
    for function in model.functions:
        if function.name in tiling.closure:
            text = model.source.data[function.body.start : function.body.end].decode("utf-8", "replace")
            match = WARP_RE.search(text)
            if match:
                return match.group(0).strip(), function.body.start + match.start()
    return None


def _closure_loops(model: SourceModel, tiling: Tiling):  # type: ignore[no-untyped-def]
    return [loop for f in model.functions if f.name in tiling.closure for loop in loops(model, f.body)]


def _shared(model: SourceModel, tiling: Tiling) -> list[Constraint]:
    terms, first = [], None
    for decl in shared_decls(model):
        if decl.function not in tiling.closure or decl.dynamic:
            continue
        size = SIZEOF.get(" ".join(decl.ctype.split()))
        extents = [c_to_expr(e, tiling.names, dict(tiling.fixed)) for e in decl.extents]
        if size is None or any(e is None for e in extents):
            return []  # an extent kxform cannot read: no bound rather than a wrong one
        terms.append(" * ".join([str(size), *(f"({e})" if re.search(r"[-+]", e or "") else str(e) for e in extents)]))
        first = first if first is not None else decl.span.start
    if not terms or first is None:
        return []
    static = " + ".join(terms)
    where = _origin(model, first)
    out = [Constraint.parse(f"{static} <= {STATIC_SHARED_LIMIT}", "static shared memory per block (48 KiB)", where)]
    shared = tiling.launches[0].shared if tiling.launches else None
    dynamic = c_to_expr(shared, tiling.names, dict(tiling.fixed)) if shared else None
    if dynamic is not None and dynamic != "0":
        out.append(
            Constraint.parse(
                f"{static} + {dynamic} <= hw.smem_per_block", "static plus dynamic shared memory per block", where
            )
        )
    return out


def _divisibility(model: SourceModel, tiling: Tiling) -> list[Constraint]:
    out = []
    for loop in _closure_loops(model, tiling):
        if loop.init.strip() != "0" or loop.op != "<":
            continue
        bound, step = c_to_expr(loop.bound, tiling.names), c_to_expr(loop.step, tiling.names)
        if bound is not None and step is not None and not set(re.findall(r"[A-Za-z_]\w*", bound)):
            continue  # a literal bound: the pass never changes it
        if bound is None or step is None or step == "1" or not re.search(r"[A-Za-z_]", step):
            continue
        out.append(
            Constraint.parse(
                f"({bound}) % ({step}) == 0",
                f"the loop strides over {loop.bound} in steps of {loop.step} and has no remainder case",
                _origin(model, loop.header.start),
            )
        )
    return out


def _powers_of_two(model: SourceModel, tiling: Tiling) -> list[Constraint]:
    out = []
    for use in tiling.uses:
        if use.function not in tiling.closure:
            continue
        statement = model.source.data[use.statement.start : use.statement.end].decode("utf-8", "replace")
        if re.search(rf"&\s*\(\s*{use.name}\s*-\s*1\s*\)|\(\s*{use.name}\s*-\s*1\s*\)\s*&", statement):
            out.append(
                Constraint.parse(
                    f"is_pow2({use.name})",
                    f"the code masks with {use.name} - 1 (a modulo only for powers of two)",
                    _origin(model, use.span.start),
                )
            )
    return out


def _couplings(model: SourceModel, tiling: Tiling) -> list[Constraint]:
    """`blockIdx.x * TILE + threadIdx.x` with no blockDim.x read: one thread per tile column,
    so the launch's block.x must equal TILE (stated only when the launch does not say so,
    and only when the original values meet it: a kernel whose threads each compute several
    elements, such as a register-blocked GEMM, is not read as one thread per element)."""
    dims = block_exprs(tiling)
    reads = {(u.builtin, u.axis) for u in builtin_uses(model) if u.function in tiling.closure}
    original = {q.name: q.value for q in tiling.quantities}
    out = []
    for use in tiling.uses:
        match = re.search(r"\bblockIdx\.([xyz])\b", use.other) if use.operator == "*" else None
        if match is None or use.function not in tiling.closure:
            continue
        axis = match.group(1)
        index = "xyz".index(axis)
        if ("blockDim", axis) in reads or ("threadIdx", axis) not in reads or index >= len(dims):
            continue
        dim = dims[index]
        covered = any(
            lp.step.replace(" ", "") in (f"blockDim.{axis}", (dim or "?").replace(" ", ""))
            for lp in _closure_loops(model, tiling)
        )
        if dim is not None and dim.replace(" ", "") != use.name and not covered:
            coupling = Constraint.parse(
                f"{dim} == {use.name}",
                f"one thread per tile element along {axis}: blockDim.{axis} must equal {use.name}",
                _origin(model, use.span.start),
            )
            if coupling.holds(original):  # else a misreading: threads cover several elements (register blocking)
                out.append(coupling)
    return out
