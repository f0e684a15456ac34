"""`coarsen`: each thread computes F outputs along x or y instead of one, the grid divided by F.

A kernel whose body starts with its thread indices (`int j = blockIdx.x * blockDim.x +
threadIdx.x;`, one per axis, in any order) and then computes the outputs of that index
point, guards included, is rewritten so that the rest of the body runs once per output
in a loop over `kx_f < KERNEL_COARSEN`, the coarsened index being

    contiguous:  (blockIdx.x * blockDim.x + threadIdx.x) * F + kx_f    (a thread's F neighbours)
    strided:     (blockIdx.x * F + kx_f) * blockDim.x + threadIdx.x    (F blocks' worth, coalesced per step)

and every launch's grid along that axis becomes `((grid) + F - 1) / F`. The guards stay
as written inside the loop, so each output keeps its own; an early `return` becomes
`continue` (the next output). Each output is computed by the same statements as before,
so the result is bit-exact. Refused, with the line: threads that communicate (shared
memory, barriers, shuffles, atomics), a body that reads the coarsened axis's
`threadIdx`/`blockIdx`/`blockDim`/`gridDim` after the index (its meaning changes), an
early return inside a loop, a launch whose grid has no such axis.

`loads=once` (contiguous layout; offered where some element is read by two of a
thread's outputs, kxform.analysis.reuse) gives each such element a register that the
first output needing it fills and later ones read (passes/coarsen/loads.py): a stencil's
rows or columns are loaded once per thread, not once per output. Unless the cached and
stored buffers are all `__restrict__`, a thread whose cached and stored elements may
overlap runs the plain loop (checked at run time). Where the body is a guard,
declarations and one loop (a GEMM's k loop), `loads=once` runs the outputs' loops as one
instead and makes a load every output makes at an iteration once (passes/coarsen/jam.py:
a GEMM's row of A along x).

No evidence, no rewrite: without `factor` nothing is proposed; `kxform tune --pass
coarsen` searches factor (2, 4, 8: factor 1 is the kernel as it is, the space's "off"
point) x along x layout (x loads where offered).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from kxform.passes.coarsen.jam import Jam, find_jam, jam_lines
from kxform.passes.coarsen.loads import Cached, cache_loads
from kxform.passes.coarsen.stride import StrideShape, stride_edits, stride_shape
from kxform.passes.launch.launch import closure_of
from kxform.passes.launch.policy import communication
from kxform.passes.vectorize.pattern import index_axis, statements
from kxform.passes.vectorize.vectorize import rewritten_binding

from kxform.analysis import AccessAnalysis
from kxform.analysis.reuse import Reuse, analyse_reuse, cacheable
from kxform.engine import launch_site
from kxform.engine.edits import Edit, apply_edits, spliced
from kxform.engine.params import Config, Constraint, Param, ParamSpace
from kxform.engine.pass_api import (
    Blocker,
    CheckRecord,
    KernelAnalysis,
    PassContext,
    Proposal,
    Provenance,
    ValuesPass,
    check_constraints,
    resolve_proposal,
)
from kxform.engine.policy import LaunchBinding, OutputCompare, VerifyPolicy
from kxform.errors import CheckFailed, UsageError
from kxform.frontend.launches import launch_configs
from kxform.frontend.model import Function, SourceModel

FACTORS = ("1", "2", "4", "8")
LAYOUTS = ("contiguous", "strided")
LOADS = ("each", "once")
_INDEX_RE = re.compile(
    r"^(?P<type>(?:const\s+)?(?:unsigned\s+int|int|unsigned|size_t|long|long\s+long|int64_t))\s+"
    r"(?P<var>[A-Za-z_]\w*)\s*=\s*(?P<init>[^;]+);$",
    re.S,
)


@dataclass(frozen=True)
class Shape:
    """The leading index declarations (text, axis, var, type) and where the rest starts."""

    indices: tuple[tuple[str, str, str, str], ...]
    rest: str
    axes: tuple[str, ...] = ()
    """The axes (x, y) a thread may take several outputs along."""
    rest_at: int = 0
    """Where `rest` starts in the file (a byte offset)."""
    reuse: tuple[tuple[str, Reuse | str], ...] = ()
    """Per axis: the loads outside loops a thread's outputs share (kxform.analysis.reuse),
    or why none."""
    jams: tuple[tuple[str, Jam | str], ...] = ()
    """Per axis: the outputs' loops run as one with the loads they share hoisted
    (passes/coarsen/jam.py), or why not."""

    def reuse_along(self, axis: str) -> Reuse | str:
        return dict(self.reuse).get(axis, f"the kernel cannot be coarsened along {axis}")

    def jam_along(self, axis: str) -> Jam | str:
        return dict(self.jams).get(axis, f"the kernel cannot be coarsened along {axis}")

    def once_pairs(self, tuning: bool) -> tuple[tuple[str, str], ...]:
        """The (axis, layout) pairs at which `loads=once` shares something: a jam at either
        layout; registers across outputs at the contiguous layout only, and for tuning only
        where no run-time check is needed (it lost to `loads=each` with one)."""
        pairs = []
        for axis in self.axes:
            if isinstance(self.jam_along(axis), Jam):
                pairs += [(axis, layout) for layout in LAYOUTS]
            elif axis in (self.unchecked_reuse_axes if tuning else self.reuse_axes):
                pairs.append((axis, "contiguous"))
        return tuple(pairs)

    @property
    def reuse_axes(self) -> tuple[str, ...]:
        """The axes along which some element is read by two outputs (at the largest factor)."""
        top = int(FACTORS[-1])
        return tuple(a for a, r in self.reuse if isinstance(r, Reuse) and r.shared(top))

    @property
    def unchecked_reuse_axes(self) -> tuple[str, ...]:
        """The reuse axes whose cached and stored buffers are all `__restrict__` (no run-time
        overlap check, no second loop)."""
        top = int(FACTORS[-1])
        return tuple(a for a, r in self.reuse if a in self.reuse_axes and isinstance(r, Reuse) and r.restricted(top))


def name_of(kernel: str) -> str:
    return f"{kernel.upper()}_COARSEN"


def shape_of(ctx: PassContext, kernel: Function) -> Shape | StrideShape | Blocker:
    model = ctx.model
    line = model.source.line_col
    how = communication(model, closure_of(model, kernel))
    if how is not None:
        return Blocker(
            "Communicates",
            f"the threads communicate through {how}: which thread computes which output would change",
            kernel.span.start,
        )
    if not launch_configs(model, kernel.name):
        return Blocker(
            "NoLaunch", f"'{kernel.name}' is not launched in this file: the grid cannot follow", kernel.span.start
        )
    base = kernel.body.start + 1
    body = model.source.data[base : kernel.body.end - 1].decode("utf-8")
    indices: list[tuple[str, str, str, str]] = []
    stmts = statements(body)
    for _, text in stmts:
        match = _INDEX_RE.match(text)
        axis = index_axis(match.group("init")) if match else None
        if match is None or axis is None or any(a == axis for _, a, _, _ in indices):
            break
        indices.append((text, axis, match.group("var"), match.group("type")))
    if not indices:
        stride = stride_shape(ctx, kernel)
        if stride is not None:
            return stride
        at = stmts[0][0] if stmts else 0
        return Blocker(
            "NoThreadIndex",
            "the body does not start with a thread index `int j = blockIdx.x * blockDim.x "
            f"+ threadIdx.x;` (line {line(base + at)[0]})",
            base + at,
        )
    rest_at = stmts[len(indices)][0] if len(stmts) > len(indices) else len(body)
    rest = body[rest_at:]
    loops = [(lp.span.start - base, lp.span.end - base) for lp in ctx.analysis(AccessAnalysis, kernel).loops]
    for match in re.finditer(r"\breturn\b", body[rest_at:]):
        at = rest_at + match.start()
        if any(s <= at < e for s, e in loops):
            return Blocker(
                "ReturnInLoop",
                f"a `return` inside a loop (line {line(base + at)[0]}) cannot become the next output's `continue`",
                base + at,
            )
    rest_at = base + len(body[:rest_at].encode("utf-8"))
    shape = Shape(tuple(indices), rest)
    why = [_axis_blocker(model, kernel, shape, a) for a in "xy" if any(axis == a for _, axis, _, _ in indices)]
    axes = tuple(a for a, w in zip([a for a in "xy" if any(axis == a for _, axis, _, _ in indices)], why) if w is None)
    if not axes:
        return why[0] if why else Blocker("NoThreadIndex", "the kernel indexes neither x nor y", kernel.span.start)
    analysis = ctx.analysis(AccessAnalysis, kernel)
    able = cacheable(model, kernel, analysis)
    reuse = tuple((a, analyse_reuse(model, kernel, analysis, a, able)) for a in axes)
    jams = tuple((a, find_jam(model, kernel, analysis, a, shape.indices, able)) for a in axes)
    return Shape(shape.indices, rest, axes, rest_at, reuse, jams)


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
            (
                "factor=1|2|4|8 outputs per thread, along=x|y (an axis the kernel indexes), layout=contiguous|strided; "
                "no factor: nothing is proposed"
            ),
            (
                "loads=each|once: once loads an element two of a thread's contiguous outputs read into a register "
                "(offered where the kernel has such loads)"
            ),
        ]

    def analyse(self, ctx: PassContext) -> dict[str, KernelAnalysis]:
        out = {}
        for kernel in ctx.model.kernels:
            if re.search(rb"#\s*define\s+" + name_of(kernel.name).encode() + rb"\b", ctx.model.source.data):
                out[kernel.name] = KernelAnalysis(kernel, (), {}, already_applied=True)
                continue
            shape = shape_of(ctx, kernel)
            blockers = [shape] if isinstance(shape, Blocker) else []
            if not blockers and self.config:
                try:
                    space = self._space(shape, kernel)
                    if "loads" in dict(self.config) and "loads" not in space.names:
                        why = "; ".join(
                            f"along {a}: {shape.jam_along(a)}, and {shape.reuse_along(a)}" for a in shape.axes
                        )
                        raise UsageError(f"loads: no element is read by two of a thread's outputs ({why})")
                    config = space.resolve(dict(self.config))
                    broken = space.violations(config)
                    if broken:
                        raise UsageError(f"{space.label(config)}: {broken[0].reason} ({broken[0].text})")
                except UsageError as exc:
                    blockers.append(Blocker("BadOption", exc.cause, kernel.span.start))
            out[kernel.name] = KernelAnalysis(kernel, tuple(blockers), {"shape": shape})
        return out

    @staticmethod
    def _space(
        shape: Shape | StrideShape | Blocker | None,
        kernel: Function,
        factors: Sequence[str] = FACTORS,
        tuning: bool = False,
    ) -> ParamSpace:
        if isinstance(shape, StrideShape):
            return _stride_space(shape, kernel, factors)
        if not isinstance(shape, Shape):
            return ParamSpace()
        axes = list(shape.axes)
        params = [
            Param.enum("factor", factors, factors[0], doc=f"outputs per thread of '{kernel.name}'"),
            Param.enum("along", axes, axes[0], doc="the axis whose outputs a thread takes"),
            Param.enum("layout", LAYOUTS, "contiguous", doc="a thread's outputs adjacent, or a block apart"),
        ]
        pairs = shape.once_pairs(tuning)
        if not pairs:
            return ParamSpace(tuple(params))
        params.append(
            Param.enum(
                "loads",
                LOADS,
                "each",
                doc="an element two of a thread's outputs read: loaded by each output, or once into a register",
            )
        )
        if len(pairs) == len(axes) * len(LAYOUTS):
            return ParamSpace(tuple(params))
        where = " or ".join(f'(along == "{a}" and layout == "{lay}")' for a, lay in pairs)
        return ParamSpace(
            tuple(params),
            (
                Constraint.parse(
                    f'loads == "each" or {where}', "loads=once shares no element at the other axes and layouts"
                ),
            ),
        )

    def space(self, ctx: PassContext, analysis: KernelAnalysis) -> ParamSpace:
        shape = analysis.facts.get("shape") if analysis.facts else shape_of(ctx, analysis.kernel)
        return self._space(shape, analysis.kernel)

    def tuning_space(self, ctx: PassContext, analysis: KernelAnalysis) -> ParamSpace:
        """The factors worth timing while the pass is on: 2, 4, 8. Factor 1 is the kernel as
        it is under either layout, which the composed space's "off" point already times;
        kept, it would be timed twice more.

        `loads=once` only where it needs no run-time overlap check (every cached and stored
        buffer `__restrict__`): with the check and the plain loop beside it, it was slower
        than `loads=each` at every factor of jacobi2d on an H200 (5-16%; docs/vectorize.md),
        so timing it elsewhere spends the budget on points that lose. `kxform apply` still
        takes it where asked."""
        shape = analysis.facts.get("shape") if analysis.facts else shape_of(ctx, analysis.kernel)
        return self._space(shape, analysis.kernel, tuple(f for f in FACTORS if f != "1"), tuning=True)

    def default_proposal(self, ctx: PassContext, analysis: KernelAnalysis) -> Proposal | None:
        given = dict(self.config)
        if given.get("factor", "1") == "1":
            return None
        config = self.space(ctx, analysis).resolve(given)
        return Proposal.of(
            self.name, analysis.kernel.name, config, f"{self.space(ctx, analysis).label(config)} (requested)"
        )

    def candidates(self, ctx: PassContext, analysis: KernelAnalysis) -> list[Proposal]:
        return []

    def missed_reason(self, analysis: KernelAnalysis, ctx: PassContext | None = None) -> tuple[str, str]:
        return (
            "NoEvidence",
            "no factor was requested; factors are chosen by measurement (kxform tune) or given (coarsen{factor=2})",
        )

    def proposal_for(
        self, ctx: PassContext, analysis: KernelAnalysis, config: Config, provenance: Provenance | None = None
    ) -> Proposal:
        space = self.space(ctx, analysis)
        resolved = space.resolve(config)
        return Proposal.of(
            self.name, analysis.kernel.name, resolved, f"configuration {space.label(resolved)}", provenance
        )

    def check(self, ctx: PassContext, proposal: Proposal) -> list[CheckRecord]:
        kernel = _kernel(ctx.model, proposal.kernel)
        shape = shape_of(ctx, kernel)
        if isinstance(shape, Blocker):
            raise CheckFailed("shape", shape.message)
        space = self._space(shape, kernel)
        config = resolve_proposal(space, proposal.options)
        if isinstance(shape, StrideShape):
            return [check_constraints(space, config, ctx.hw), _stride_record(ctx.model, shape, config)]
        records = [
            check_constraints(space, config, ctx.hw),
            CheckRecord(
                "independent",
                True,
                "no communication between threads; the body reads the coarsened "
                f"axis ({config['along']}) only through its index",
            ),
            CheckRecord("guards", True, "every output keeps the guards as written"),
        ]
        if config.get("loads") == "once":
            records.append(_loads_record(ctx.model, shape, config))
        return records

    def edit(self, ctx: PassContext, proposals: Sequence[Proposal]) -> list[Edit]:
        return [e for p in proposals for e in _edits(ctx, p)]

    def verify_policy(self, ctx: PassContext, proposal: Proposal) -> VerifyPolicy:
        """Each output is computed by the same statements: bit-exact, at the rewritten launch."""
        compare = OutputCompare(
            "exact", reason="each output is computed by the same statements; only which thread computes it changes"
        )
        factor = int(proposal.options.get("factor", "1"))
        if factor == 1:
            return VerifyPolicy(compare=compare)
        kernel = _kernel(ctx.model, proposal.kernel)
        shape = shape_of(ctx, kernel)
        if isinstance(shape, StrideShape) and not _divides_grid(ctx.model, kernel, shape):
            return VerifyPolicy(compare=compare, required=True)  # the launch stays as written
        text = apply_edits(ctx.model.source, _edits(ctx, proposal)).data
        name = name_of(proposal.kernel)
        binding = rewritten_binding(ctx.model.source.path, text, proposal.kernel, name, factor)
        launch = binding if binding is not None else LaunchBinding(grid=("unknown",), origin="no readable launch")
        return VerifyPolicy(launch, compare, required=True)

    def describe(self, ctx: PassContext, analysis: KernelAnalysis) -> dict[str, Any]:
        data = super().describe(ctx, analysis)
        data.update(self.space(ctx, analysis).to_json())
        return data


def _axis_blocker(model: SourceModel, kernel: Function, shape: Shape, axis: str) -> Blocker | None:
    found = re.search(rf"\b(threadIdx|blockIdx|blockDim|gridDim)\s*\.\s*{axis}\b", shape.rest)
    if found is not None:
        at = model.source.data.index(shape.rest.encode("utf-8"), kernel.body.start) + len(
            shape.rest[: found.start()].encode("utf-8")
        )
        return Blocker(
            "ReadsThreadAxis",
            f"the body reads `{found.group(0)}` after the index (line "
            f"{model.source.line_col(at)[0]}): its meaning changes when a thread takes several outputs",
            at,
        )
    index = "xyz".index(axis)
    for config in launch_configs(model, kernel.name):
        spans, _ = launch_site.dim_spans(model, config, 0)
        if len(spans) <= index:
            return Blocker(
                "NoGridAxis",
                f"the launch at line {model.source.line_col(config.site.span.start)[0]} has no grid dimension {axis}",
                config.site.span.start,
            )
    return None


def _stride_space(shape: StrideShape, kernel: Function, factors: Sequence[str]) -> ParamSpace:
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


def _stride_record(model: SourceModel, shape: StrideShape, config: Config) -> CheckRecord:
    line = model.source.line_col
    loops = ", ".join(
        f"{loop.stride_loop}-stride over '{loop.var}' (line {line(loop.span.start)[0]})" for loop, _ in shape.loops
    )
    grid = "the grid divided by the factor" if shape.grid else "the launch as written"
    return CheckRecord(
        "stride",
        True,
        f"{loops}: {config['factor']} elements per turn, {config['layout']}; {grid}; each element computed as before",
    )


def _edits(ctx: PassContext, proposal: Proposal) -> list[Edit]:
    model = ctx.model
    kernel = _kernel(model, proposal.kernel)
    shape = shape_of(ctx, kernel)
    options = proposal.options
    factor, axis, layout = int(options["factor"]), str(options["along"]), str(options["layout"])
    name = name_of(kernel.name)
    origin = f"coarsen: {kernel.name}"
    if isinstance(shape, StrideShape):
        edits = [
            *launch_site.define_parameter(model, kernel.span.start, name, factor, f"{origin}: factor"),
            *stride_edits(model, shape, layout, name, f"{origin}: stride loop"),
        ]
        return edits + (_grid_edits(model, kernel, 0, name, origin) if _divides_grid(model, kernel, shape) else [])
    assert isinstance(shape, Shape)
    newline = model.source.newline
    data = model.source.data
    body = data[kernel.body.start + 1 : kernel.body.end - 1].decode("utf-8")
    ind = re.match(r"\r?\n*([ \t]*)", body).group(1) or "    "
    plain = _loop(shape, axis, layout, name, shape.rest, ind)
    once = options.get("loads") == "once"
    jam = shape.jam_along(axis) if once else None
    cached = _cached(model, shape, axis, factor, name) if once else None
    if isinstance(jam, Jam):
        lines = jam_lines(jam, data, shape.indices, axis, _index_line(shape, axis, layout, name), name, ind)
    elif isinstance(cached, Cached):
        rest = spliced(data, shape.rest_at, kernel.body.end - 1, cached.replacements)
        cached_loop = [ind + d for d in cached.declarations] + _loop(shape, axis, layout, name, rest, ind)
        if cached.check:
            lines = (
                [ind + c for c in cached.check]
                + [f"{ind}if (!kx_overlap) {{"]
                + [ind + x for x in cached_loop]
                + [f"{ind}}} else {{"]
                + [ind + x for x in plain]
                + [f"{ind}}}"]
            )
        else:
            lines = cached_loop
    else:
        lines = plain
    edits = [
        *launch_site.define_parameter(model, kernel.span.start, name, factor, f"{origin}: factor"),
        Edit(kernel.body.start + 1, kernel.body.end - 1, newline + newline.join(lines) + newline, f"{origin}: body"),
    ]
    return edits + _grid_edits(model, kernel, "xyz".index(axis), name, origin)


def _divides_grid(model: SourceModel, kernel: Function, shape: StrideShape) -> bool:
    """A grid-stride loop covers its elements whatever the grid: the grid is divided by the
    factor where the verifier can read the divided grid back from the launch (a ceil-div
    of the kernel's arguments), and left as written otherwise (a grid the launcher caps:
    its threads already take many turns)."""
    if not shape.grid:
        return False
    name = name_of(kernel.name)
    edits = [
        *launch_site.define_parameter(model, kernel.span.start, name, 2, ""),
        *_grid_edits(model, kernel, 0, name, ""),
    ]
    text = apply_edits(model.source, edits).data
    return rewritten_binding(model.source.path, text, kernel.name, name, 2) is not None


def _grid_edits(model: SourceModel, kernel: Function, index: int, name: str, origin: str) -> list[Edit]:
    """Every launch's grid along axis `index` divided by the factor `name`, rounding up."""
    edits = []
    for config in launch_configs(model, kernel.name):
        spans, _ = launch_site.dim_spans(model, config, 0)
        span = spans[index]
        text = model.source.data[span.start : span.end].decode("utf-8")
        edits.append(Edit(span.start, span.end, f"(({text}) + {name} - 1) / {name}", f"{origin}: grid"))
    return edits


def _loop(shape: Shape, axis: str, layout: str, name: str, rest: str, ind: str) -> list[str]:
    """The per-output loop over `rest` (the body after the indices), at indentation `ind`."""
    lines = [f"{ind}#pragma unroll", f"{ind}for (int kx_f = 0; kx_f < {name}; ++kx_f) {{"]
    for text, a, _, _ in shape.indices:
        lines.append(ind * 2 + (text if a != axis else _index_line(shape, a, layout, name)))
    rows = re.sub(r"\breturn\s*;", "continue;", rest.rstrip()).split("\n")
    lines += [ind * 2 + rows[0].lstrip()] + [(ind + row) if row.strip() else "" for row in rows[1:]]
    lines.append(f"{ind}}}")
    return lines


def _index_line(shape: Shape, axis: str, layout: str, name: str) -> str:
    """The coarsened axis's index declaration for output `kx_f`."""
    _, _, var, ctype = next(i for i in shape.indices if i[1] == axis)
    if layout == "contiguous":
        return f"{ctype} {var} = (blockIdx.{axis} * blockDim.{axis} + threadIdx.{axis}) * {name} + kx_f;"
    return f"{ctype} {var} = (blockIdx.{axis} * {name} + kx_f) * blockDim.{axis} + threadIdx.{axis};"


def _cached(model: SourceModel, shape: Shape, axis: str, factor: int, name: str) -> Cached | str:
    reuse = shape.reuse_along(axis)
    if isinstance(shape.jam_along(axis), Jam):
        return "the outputs' loop is jammed instead"
    if isinstance(reuse, str):
        return reuse
    return cache_loads(reuse, factor, axis, name, model.source.data)


def _loads_record(model: SourceModel, shape: Shape, config: Config) -> CheckRecord:
    """loads=once: which loads share registers, and how stores are kept from them."""
    jam = shape.jam_along(str(config["along"]))
    if isinstance(jam, Jam):
        count = sum(len(h.spans) for h in jam.hoisted)
        return CheckRecord(
            "loads",
            True,
            f"the outputs' loops run as one; {count} loads of an element every output "
            "reads at an iteration are made once per iteration, outside any condition the loop adds; "
            "nothing is stored inside the loop, so no check is needed",
        )
    if config["layout"] != "contiguous":
        raise CheckFailed("loads", "loads=once needs layout=contiguous: outputs a block apart share no element")
    cached = _cached(model, shape, str(config["along"]), int(str(config["factor"])), "F")
    if isinstance(cached, str):
        raise CheckFailed("loads", cached)
    shared = len(cached.replacements)
    if not cached.pairs:
        return CheckRecord(
            "loads",
            True,
            f"{shared} loads share registers; no store can write a cached element "
            "(every cached and stored buffer is __restrict__, or nothing is stored)",
        )
    pairs = ", ".join(f"{a}/{b}" for a, b in cached.pairs)
    return CheckRecord(
        "loads",
        True,
        f"{shared} loads share registers; a thread whose cached and stored elements "
        f"may overlap ({pairs}: not both __restrict__) runs the plain loop (checked at run time)",
    )


def _kernel(model: SourceModel, name: str) -> Function:
    return next(k for k in model.kernels if k.name == name)


PASS = Coarsen
