"""Block-stride and grid-stride loops: the second shape `coarsen` takes.

    for (int i = threadIdx.x; i < D; i += blockDim.x) { BODY }       // block-stride (a block per row)
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) { BODY }

(`Loop.stride_loop` of the shared access analysis). Each turn of the loop takes F
elements instead of one:

    strided:     for (i = START; i < B; i += (STEP) * F) for f < F: { i' = i + f * STEP; if (i' < B) BODY }
    contiguous:  for (i = (START) * F; i < B; i += (STEP) * F) for f < F: { i' = i + f; if (i' < B) BODY }

Strided keeps every thread's elements and their order (each step of the inner loop is
coalesced across the warp, and F loads are in flight per turn), so a loop that
accumulates may be coarsened so: its sums are made in the same order. Contiguous gives a
thread F neighbours and changes which thread takes which element: only a loop with no
carried value. A grid-stride loop covers its elements whatever the grid, so the launch's
grid is divided by F (each thread keeps as many turns as before); a block-stride loop's
grid (a block per row) stays. Bit-exact. Refused, with the line: a barrier or an exit in
the loop, a header other than `T i = START; i < B; i += STEP`, a carried value at the
contiguous layout (stated in the space), and for a grid-stride loop any memory access
outside it (a smaller grid would change what such code does).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from kxform.analysis import AccessAnalysis, Loop
from kxform.engine.edits import Edit
from kxform.engine.params import Config, Constraint, Param, ParamSpace
from kxform.analysis.manager import AnalysisInput
from kxform.engine.pass_api import Blocker, CheckRecord
from kxform.engine.rewrite import loop_header, scale_loop
from kxform.engine.rewritten_launch import divided_grid_readable
from kxform.frontend.model import Function, SourceModel

LAYOUTS = ("contiguous", "strided")
"""A thread's F outputs adjacent, or a block (a stride) apart."""


@dataclass(frozen=True)
class StrideShape:
    """The kernel's stride loops, each with whether it carries a value (then only the
    strided layout keeps its order)."""

    loops: tuple[tuple[Loop, bool], ...]

    @property
    def grid(self) -> bool:
        """Some loop strides over the grid: the launch's grid divides by the factor."""
        return any(loop.stride_loop == "grid" for loop, _ in self.loops)

    def divides_grid(self, model: SourceModel, kernel: str) -> bool:
        """A grid-stride loop covers its elements whatever the grid: the grid is divided by
        the factor where the verifier can read the divided grid back from the launch (a
        ceil-div of the kernel's arguments), and left as written otherwise (a grid the
        launcher caps: its threads already take many turns)."""
        return self.grid and divided_grid_readable(model, kernel, 0)

    @property
    def ordered(self) -> bool:
        """Some loop carries a value from one turn to the next (the contiguous layout would
        reorder it)."""
        return any(carries for _, carries in self.loops)


def stride_shape(ctx: AnalysisInput, kernel: Function) -> StrideShape | Blocker | None:
    """The kernel's stride loops, a refusal with its line, or None where it has none."""
    model = ctx.model
    analysis = ctx.analysis(AccessAnalysis, kernel)
    loops = [lp for lp in analysis.loops if lp.stride_loop]
    if not loops:
        return None
    line = model.source.line_col
    found = []
    for loop in loops:
        what = f"the {loop.stride_loop}-stride loop over '{loop.var}' (line {line(loop.span.start)[0]})"
        header = loop_header(model, loop)
        if loop.barrier or loop.exits:
            return Blocker("LoopShape", f"{what} holds a barrier, a warp operation or an exit", loop.span.start)
        if header is None or not header.bound or header.step is None:
            return Blocker(
                "LoopShape",
                f"{what} is not `for (T {loop.var} = START; {loop.var} < B; {loop.var} += STEP)`",
                loop.span.start,
            )
        found.append((loop, bool(loop.carried or loop.reductions)))
    if any(loop.stride_loop == "grid" for loop in loops):
        outside = next(
            (a for a in analysis.accesses if not any(lp.id in a.loops for lp in loops) and a.space != "local"), None
        )
        if outside is not None:
            return Blocker(
                "OutsideGridStride",
                f"`{outside.text}` (line {outside.line}) is outside the grid-stride loop: a smaller grid would "
                "change what it does",
                outside.span.start,
            )
    return StrideShape(tuple(found))


def stride_edits(model: SourceModel, shape: StrideShape, layout: str, name: str, origin: str) -> list[Edit]:
    """Each loop's turn made to take `name` elements, strided or contiguous."""
    data = model.source.data
    out: list[Edit] = []
    for loop, _ in shape.loops:
        header = loop_header(model, loop)
        assert header is not None and header.step is not None
        out += scale_loop(model, loop, name, layout == "contiguous", origin)
        step = header.text(model, header.step)
        nl, ind = model.source.newline, model.source.indent_at(loop.span.start)
        body = data[loop.body.start : loop.body.end].decode("utf-8").strip()
        offset = "kx_f" if layout == "contiguous" else f"kx_f * ({step})"
        lines = [
            "{",
            f"    const {header.ctype} kx_first = {loop.var};",
            "    #pragma unroll",
            f"    for (int kx_f = 0; kx_f < {name}; ++kx_f) {{",
            f"        const {header.ctype} {loop.var} = kx_first + {offset};",
            f"        if ({loop.var} < ({header.bound})) {{",
            *_indented(body[1:-1] if body.startswith("{") else body, "            "),
            "        }",
            "    }",
            "}",
        ]
        braced = body.startswith("{")
        start = loop.body.start if braced else header.end
        out.append(
            Edit(
                start,
                loop.body.end,
                ("" if braced else " ") + lines[0] + "".join(nl + ind + x for x in lines[1:]),
                origin,
            )
        )
    return out


def _indented(text: str, indent: str) -> list[str]:
    rows = [r.rstrip() for r in text.strip("\n").split("\n")]
    rows = [r for r in rows if r.strip()] or [""]
    common = min(len(r) - len(r.lstrip()) for r in rows)
    return [indent + r[common:] if r.strip() else "" for r in rows]


def stride_space(shape: StrideShape, kernel: Function, factors: Sequence[str]) -> ParamSpace:
    """A stride loop's space: the factor and the layout (x: the axis the loop strides along);
    a loop that carries a value keeps its order only strided."""
    params = (
        Param.enum("factor", factors, factors[0], doc=f"elements per turn of '{kernel.name}''s stride loop"),
        Param.enum("along", ("x",), "x", doc="the axis the stride loop deals out"),
        Param.enum("layout", LAYOUTS, "strided", doc="a turn's elements a stride apart, or adjacent"),
    )
    if not shape.ordered:
        return ParamSpace(params)
    ordered = Constraint.parse('layout == "strided"', "the loop carries a value: only strided keeps its order")
    return ParamSpace(params, (ordered,))


def stride_record(model: SourceModel, shape: StrideShape, config: Config) -> CheckRecord:
    """What the check established of a stride loop's coarsening."""
    line = model.source.line_col
    loops = ", ".join(
        f"{loop.stride_loop}-stride over '{loop.var}' (line {line(loop.span.start)[0]})" for loop, _ in shape.loops
    )
    grid = "the grid divided by the factor" if shape.grid else "the launch as written"
    why = f"{loops}: {config['factor']} elements per turn, {config['layout']}; {grid}; each element computed as before"
    return CheckRecord("stride", True, why)
