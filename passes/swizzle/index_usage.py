"""Where a kernel reads its block index: in its body, in the device functions it reaches
and in the macros they expand. The facts every block-index remap needs."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from kxform.analysis.manager import AnalysisInput
from kxform.frontend.cuda import macro_node
from kxform.frontend.semantic import BUILTIN_CALL_RE
from kxform.frontend.model import Function, FunctionKind, IndexRead, SourceModel
from kxform.engine.pass_api import Blocker


@dataclass(frozen=True)
class IndexUsage:
    """An analysis (kxform.analysis.manager): `ctx.analysis(IndexUsage, kernel)`."""

    positional: ClassVar[bool] = True

    kernel: Function
    functions: tuple[Function, ...]
    """The kernel and every device function of this file it reaches."""
    reads: tuple[IndexRead, ...]
    """blockIdx/gridDim reads in those functions and in the macros they expand."""
    carriers: tuple[Function, ...]
    """Device functions (not the kernel) that read blockIdx.x/.y themselves or through callees."""
    macros: tuple[str, ...]
    """Macros of this file, reached from the kernel, whose body reads blockIdx.x/.y."""
    external_calls: tuple[str, ...]
    """Callees that are neither defined in this file nor known built-ins."""
    blockers: tuple[Blocker, ...]

    @classmethod
    def compute(cls, ctx: AnalysisInput, kernel: Function) -> IndexUsage:
        return index_usage(ctx.model, kernel)

    @property
    def dims(self) -> int:
        axes = {r.axis for r in self.reads}
        return 3 if "z" in axes else 2 if "y" in axes else 1

    @property
    def remapped_reads(self) -> tuple[IndexRead, ...]:
        """The reads a 2-D remap rewrites: blockIdx.x and blockIdx.y (never z, never gridDim)."""
        return tuple(r for r in self.reads if r.builtin == "blockIdx" and r.axis in ("x", "y"))

    @property
    def uses_hip_spelling(self) -> bool:
        return any(r.spelling.startswith("hip") for r in self.reads)


def _reads_block_xy(reads: tuple[IndexRead, ...]) -> bool:
    return any(r.builtin == "blockIdx" and r.axis in ("x", "y") for r in reads)


def index_usage(model: SourceModel, kernel: Function) -> IndexUsage:
    """Collect the kernel's index reads over its call closure within this file."""
    reached = model.closure(kernel.name)
    functions = [kernel] + [
        f
        for name in sorted(reached - {kernel.name})
        for f in model.functions_named(name)
        if f.kind is not FunctionKind.HOST
    ]
    macro_names = tuple(sorted(n[len("<macro ") : -1] for n in reached if n.startswith("<macro ")))
    reads: list[IndexRead] = []
    for function in functions:
        reads.extend(r for r in model.reads_in(function.name) if function.body.contains(r.span))
    macro_reads = sorted((r for m in macro_names for r in model.reads_through(m)), key=lambda r: r.span.start)
    reads.extend(macro_reads)
    blockers: list[Blocker] = []
    for read in reads:
        if read.builtin == "blockIdx" and read.axis == "":
            blockers.append(
                Blocker(
                    "WholeIndexUse",
                    f"'{read.spelling}' is used as a whole; kxform remaps only blockIdx.x and blockIdx.y reads",
                    read.span.start,
                )
            )
    # Device functions that read x/y directly or via callees/macros must receive the logical index.
    reads_xy = {f.name for f in functions[1:] if _reads_block_xy(model.reads_in(f.name))}
    reads_xy |= {macro_node(m) for m in macro_names if _reads_block_xy(tuple(r for r in macro_reads if r.macro == m))}
    carriers = []
    for function in functions[1:]:
        reach = model.closure(function.name)
        if reach & reads_xy:
            carriers.append(function)
    type_names = frozenset().union(*(f.template_names for f in functions))
    callers = {f.name for f in functions}
    external = sorted(
        {
            c.callee
            for name in callers
            for c in model.calls_from(name)
            if not model.functions_named(c.callee)
            and c.callee not in type_names
            and not BUILTIN_CALL_RE.match(c.callee)
            and model.macro(c.callee) is None
        }
    )
    for name in {c.name for c in carriers}:
        defs = model.functions_named(name)
        if len(defs) > 1:
            blockers.append(
                Blocker(
                    "OverloadedCarrier",
                    f"device function '{name}' reads the block index and is "
                    "overloaded; kxform cannot tell which overload each call reaches",
                    defs[0].span.start,
                )
            )
    return IndexUsage(
        kernel,
        tuple(functions),
        tuple(sorted(reads, key=lambda r: r.span)),
        tuple(carriers),
        tuple(m for m in macro_names if _reads_block_xy(tuple(r for r in macro_reads if r.macro == m))),
        tuple(external),
        tuple(blockers),
    )
