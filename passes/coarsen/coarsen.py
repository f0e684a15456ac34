"""`coarsen`: each thread computes F outputs along x or y instead of one, the grid divided by F.

A kernel whose body starts with its thread indices (`int j = blockIdx.x * blockDim.x +
threadIdx.x;`, one per axis, in any order: kxform.analysis.thread_index) and then
computes the outputs of that index point, guards included, is rewritten so that the rest
of the body runs once per output in a loop over `kx_f < KERNEL_COARSEN`, the coarsened
index being

    contiguous:  (blockIdx.x * blockDim.x + threadIdx.x) * F + kx_f    (a thread's F neighbours)
    strided:     (blockIdx.x * F + kx_f) * blockDim.x + threadIdx.x    (F blocks' worth, coalesced per step)

and every launch's grid along that axis becomes `((grid) + F - 1) / F`. The guards stay
as written inside the loop, so each output keeps its own; an early `return` becomes
`continue` (the next output). Each output is computed by the same statements as before,
so the result is bit-exact. What is refused, and why: shape.py.

`loads=once` (offered where some element is read by two of a thread's outputs,
kxform.analysis.reuse) gives each such element a register that the first output needing
it fills and later ones read (loads.py), checked at run time against overlapping stores
unless every cached and stored buffer is `__restrict__`; where the body is a guard,
declarations and one loop (a GEMM's k loop) it runs the outputs' loops as one instead,
making a load every output makes at an iteration once (jam.py).

No evidence, no rewrite: without `factor` nothing is proposed; `kxform tune --pass
coarsen` searches factor (2, 4, 8: factor 1 is the kernel as it is, the space's "off"
point) x along x layout (x loads where offered).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from kxform.engine import launch_site
from kxform.engine.contracts import AxisItems, LaunchContract, block_dimension
from kxform.engine.edits import Edit, spliced
from kxform.engine.params import Constraint, Param, ParamSpace
from kxform.engine.pass_api import (
    BAD_VALUE,
    Blocker,
    CheckRecord,
    KernelAnalysis,
    PassContext,
    Proposal,
    ValuesPass,
    check_constraints,
    resolve_proposal,
)
from kxform.engine.policy import OutputCompare, VerifyPolicy
from kxform.engine.rewritten_launch import readable, rewritten_binding
from kxform.errors import CheckFailed
from kxform.frontend.launches import launch_configs
from kxform.frontend.model import Function, SourceModel
from kxform.passes.coarsen.jam import Jam, jam_lines
from kxform.passes.coarsen.loads import Cached, cached_along, loads_record
from kxform.passes.coarsen.shape import FACTORS, LAYOUTS, Shape
from kxform.passes.coarsen.stride import stride_edits, stride_record, stride_space

LOADS = ("each", "once")
EXACT = OutputCompare(
    "exact", reason="each output is computed by the same statements; only which thread computes it changes"
)


def name_of(kernel: str) -> str:
    return f"{kernel.upper()}_COARSEN"


@dataclass(frozen=True)
class Coarsen(ValuesPass):
    name = "coarsen"
    option_names = ("factor", "along", "layout", "loads")
    description = (
        "each thread computes F outputs along x or y, contiguous or strided by the block; the grid "
        "divided by F (coarsen{factor=2,along=x,layout=strided}; bit-exact)"
    )
    requires = ("launch", "vectorize")
    structural = True
    falls_back = False

    @classmethod
    def describe_options(cls) -> list[str]:
        return [
            "factor=1|2|4|8 outputs per thread, along=x|y (an axis the kernel indexes), layout=contiguous|strided; "
            "no factor: nothing is proposed",
            "loads=each|once: once loads an element two of a thread's contiguous outputs read into a register "
            "(offered where the kernel has such loads)",
        ]

    def analyse(self, ctx: PassContext) -> dict[str, KernelAnalysis]:
        out = {}
        for kernel in ctx.model.kernels:
            if ctx.model.macro(name_of(kernel.name)) is not None:
                out[kernel.name] = KernelAnalysis(kernel, already_applied=True)
                continue
            shape = ctx.analysis(Shape, kernel)
            blockers = (shape.blocker,) if shape.blocker is not None else self._refused(kernel, shape)
            out[kernel.name] = KernelAnalysis(kernel, blockers)
        return out

    def _refused(self, kernel: Function, shape: Shape) -> tuple[Blocker, ...]:
        space = _space(shape, kernel)
        if "loads" in dict(self.config) and "loads" not in space.names:
            why = "; ".join(f"along {a}: {shape.jam_along(a)}, and {shape.reuse_along(a)}" for a in shape.axes)
            why = f"loads: no element is read by two of a thread's outputs ({why})"
            return (Blocker(BAD_VALUE, why, kernel.span.start),)
        return self.requested(kernel, space)[0]

    def space(self, ctx: PassContext, analysis: KernelAnalysis) -> ParamSpace:
        return _space(ctx.analysis(Shape, analysis.kernel), analysis.kernel)

    def tuning_space(self, ctx: PassContext, analysis: KernelAnalysis) -> ParamSpace:
        """The factors worth timing while the pass is on: 2, 4, 8 (factor 1 is the kernel as
        it is, which the composed space's "off" point already times). `loads=once` only where
        it needs no run-time overlap check: with the check and the plain loop beside it, it
        was slower than `loads=each` at every factor of jacobi2d on an H200 (5-16%;
        docs/vectorize.md). `kxform apply` still takes it where asked."""
        return _space(ctx.analysis(Shape, analysis.kernel), analysis.kernel, FACTORS[1:], tuning=True)

    def default_proposal(self, ctx: PassContext, analysis: KernelAnalysis) -> Proposal | None:
        space = self.space(ctx, analysis)
        config = self.requested(analysis.kernel, space)[1]
        if str(config.get("factor", "1")) == "1":
            return None
        return Proposal.of(self.name, analysis.kernel.name, config, f"{space.label(config)} (requested)")

    def missed_reason(self, analysis: KernelAnalysis, ctx: PassContext | None = None) -> tuple[str, str]:
        return (
            "NoEvidence",
            "no factor was requested; factors are chosen by measurement (kxform tune) or given (coarsen{factor=2})",
        )

    def check(self, ctx: PassContext, proposal: Proposal) -> list[CheckRecord]:
        kernel = _kernel(ctx.model, proposal.kernel)
        shape = ctx.analysis(Shape, kernel)
        if shape.blocker is not None:
            raise CheckFailed("shape", shape.blocker.message)
        space = _space(shape, kernel)
        config = resolve_proposal(space, proposal.options)
        records = [
            check_constraints(space, config, ctx.hw),
            CheckRecord(
                "independent",
                True,
                f"no communication between threads; the body reads the coarsened axis ({config['along']}) "
                "only through its index",
            ),
            CheckRecord("guards", True, "every output keeps the guards as written"),
        ]
        if shape.stride is not None:
            return [records[0], stride_record(ctx.model, shape.stride, config)]
        if config.get("loads") == "once":
            records.append(loads_record(ctx.model.source.data, shape, config))
        return records

    def edit(self, ctx: PassContext, proposals: Sequence[Proposal]) -> list[Edit]:
        return [e for p in proposals for e in _edits(ctx, p)]

    def verify_policy(self, ctx: PassContext, proposal: Proposal, rewritten: SourceModel) -> VerifyPolicy:
        """Each output is computed by the same statements: bit-exact, at the rewritten launch."""
        factor = int(proposal.options.get("factor", "1"))
        if factor == 1:
            return VerifyPolicy(compare=EXACT)
        shape = ctx.analysis(Shape, _kernel(ctx.model, proposal.kernel))
        if shape.stride is not None and not shape.stride.divides_grid(ctx.model, proposal.kernel):
            return VerifyPolicy(compare=EXACT, required=True)  # the launch stays as written
        launch = rewritten_binding(rewritten, proposal.kernel, name_of(proposal.kernel), factor)
        return VerifyPolicy(readable(launch), EXACT, required=True)

    def launch_contract(self, ctx: PassContext, proposal: Proposal) -> LaunchContract | None:
        """The rewritten kernel computes several outputs per thread and the grids of this file count them: a
        launch of it in another file of the run would not."""
        items = int(proposal.options.get("factor", "1"))
        if items == 1:
            return None
        axis = "xyz".index(str(proposal.options.get("along", "x")))
        block = block_dimension(ctx.model, proposal.kernel, axis)
        axes = (AxisItems(axis, block, block * items),) if block else ()
        return LaunchContract(proposal.kernel, geometry=True, axes=axes)

    def describe(self, ctx: PassContext, analysis: KernelAnalysis) -> dict[str, Any]:
        return {**super().describe(ctx, analysis), **self.space(ctx, analysis).to_json()}


def _space(shape: Shape, kernel: Function, factors: Sequence[str] = FACTORS, tuning: bool = False) -> ParamSpace:
    if shape.blocker is not None:
        return ParamSpace()
    if shape.stride is not None:
        return stride_space(shape.stride, kernel, factors)
    params = (
        Param.enum("factor", factors, factors[0], doc=f"outputs per thread of '{kernel.name}'"),
        Param.enum("along", shape.axes, shape.axes[0], doc="the axis whose outputs a thread takes"),
        Param.enum("layout", LAYOUTS, "contiguous", doc="a thread's outputs adjacent, or a block apart"),
    )
    pairs = shape.once_pairs(tuning)
    if not pairs:
        return ParamSpace(params)
    doc = "an element two of a thread's outputs read: loaded by each output, or once into a register"
    params += (Param.enum("loads", LOADS, "each", doc=doc),)
    if len(pairs) == len(shape.axes) * len(LAYOUTS):
        return ParamSpace(params)
    where = " or ".join(f'(along == "{a}" and layout == "{lay}")' for a, lay in pairs)
    why = "loads=once shares no element at the other axes and layouts"
    return ParamSpace(params, (Constraint.parse(f'loads == "each" or {where}', why),))


def _edits(ctx: PassContext, proposal: Proposal) -> list[Edit]:
    model, kernel = ctx.model, _kernel(ctx.model, proposal.kernel)
    shape = ctx.analysis(Shape, kernel)
    assert shape.index is not None
    factor, axis, layout = (
        int(proposal.options["factor"]),
        str(proposal.options["along"]),
        str(proposal.options["layout"]),
    )
    name, origin, data = name_of(kernel.name), f"coarsen: {kernel.name}", model.source.data
    factor_edits = launch_site.define_parameter(model, kernel.span.start, name, factor, f"{origin}: factor")
    if shape.stride is not None:
        divided = shape.stride.divides_grid(model, kernel.name)
        grids = _grid_edits(model, kernel, 0, name, origin) if divided else []
        return [*factor_edits, *stride_edits(model, shape.stride, layout, name, f"{origin}: stride loop"), *grids]
    ind = re.match(r"\r?\n*([ \t]*)", data[kernel.body.start + 1 : kernel.body.end - 1].decode()).group(1) or "    "
    index = _index_line(shape, axis, layout, name)
    plain = _loop(shape, axis, index, name, shape.index.rest_text(model, kernel), ind)
    once = proposal.options.get("loads") == "once"
    jam = shape.jam_along(axis) if once else None
    cached = cached_along(shape, axis, factor, name, data) if once else None
    if isinstance(jam, Jam):
        lines = jam_lines(jam, data, shape.index.indices, axis, index, name, ind)
    elif isinstance(cached, Cached):
        rest = spliced(data, shape.index.rest_at, kernel.body.end - 1, cached.replacements)
        lines = [ind + d for d in cached.declarations] + _loop(shape, axis, index, name, rest, ind)
        if cached.check:
            indented = [ind + x for x in lines]
            lines = [ind + c for c in cached.check] + [f"{ind}if (!kx_overlap) {{", *indented, f"{ind}}} else {{"]
            lines += [ind + x for x in plain] + [f"{ind}}}"]
    else:
        lines = plain
    newline = model.source.newline
    body = Edit(kernel.body.start + 1, kernel.body.end - 1, newline + newline.join(lines) + newline, f"{origin}: body")
    return [*factor_edits, body, *_grid_edits(model, kernel, "xyz".index(axis), name, origin)]


def _grid_edits(model: SourceModel, kernel: Function, axis: int, name: str, origin: str) -> list[Edit]:
    """Every launch's grid along `axis` divided by the factor `name`, rounding up."""
    grids = [
        launch_site.divide_grid(model, c, axis, name, f"{origin}: grid") for c in launch_configs(model, kernel.name)
    ]
    return [e for e in grids if e is not None]


def _loop(shape: Shape, axis: str, index: str, name: str, rest: str, ind: str) -> list[str]:
    """The per-output loop over `rest` (the body after the indices), at indentation `ind`."""
    assert shape.index is not None
    lines = [f"{ind}#pragma unroll", f"{ind}for (int kx_f = 0; kx_f < {name}; ++kx_f) {{"]
    lines += [ind * 2 + (d.text if d.axis != axis else index) for d in shape.index.indices]
    rows = re.sub(r"\breturn\s*;", "continue;", rest.rstrip()).split("\n")
    lines += [ind * 2 + rows[0].lstrip()] + [(ind + row) if row.strip() else "" for row in rows[1:]]
    return [*lines, f"{ind}}}"]


def _index_line(shape: Shape, axis: str, layout: str, name: str) -> str:
    """The coarsened axis's index declaration for output `kx_f`."""
    assert shape.index is not None
    decl = shape.index.index(axis)
    assert decl is not None
    if layout == "contiguous":
        return f"{decl.ctype} {decl.var} = (blockIdx.{axis} * blockDim.{axis} + threadIdx.{axis}) * {name} + kx_f;"
    return f"{decl.ctype} {decl.var} = (blockIdx.{axis} * {name} + kx_f) * blockDim.{axis} + threadIdx.{axis};"


def _kernel(model: SourceModel, name: str) -> Function:
    return next(k for k in model.kernels if k.name == name)


PASS = Coarsen
