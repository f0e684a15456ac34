"""What `vectorize` knows of a kernel before rewriting it: its shape
(kxform.passes.vectorize.pattern), its buffers from the shared access analysis, and why
not, as blockers with their lines.

A buffer is *widened* when every access to it is `buf[i]` with `i` the element index
(stride 1 in threadIdx.x, offset 0: with the thread's first element a multiple of the
width, its vector starts aligned wherever the buffer's base is). A buffer read at any
other index is *kept scalar*: the lane reads it as written, so only a buffer that is
never written may be. Aliasing: the widened loads happen before the lanes and the
widened stores after them, so two buffers one of which is written must not overlap:
`__restrict__` on both, else a run-time check over their extents `[0, bound)` (the
scalar path when they overlap); a kept-scalar buffer has no known extent and needs
`__restrict__` when anything is written.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import ClassVar

from kxform.analysis import AccessAnalysis, MemoryAccess
from kxform.analysis.communication import Communication
from kxform.analysis.manager import AnalysisInput
from kxform.engine.pass_api import Blocker
from kxform.frontend.launches import launch_configs
from kxform.frontend.model import Function
from kxform.passes.vectorize.pattern import Elementwise, NotElementwise, recognise

SIZES = {
    "float": 4,
    "int": 4,
    "unsigned": 4,
    "unsigned int": 4,
    "uint32_t": 4,
    "int32_t": 4,
    "double": 8,
    "long long": 8,
    "int64_t": 8,
    "uint64_t": 8,
    "__nv_bfloat16": 2,
    "__half": 2,
    "half": 2,
    "nv_bfloat16": 2,
}
VECTOR_TYPES = {4: "unsigned int", 8: "uint2", 16: "uint4"}
"""Vector load/store types by bytes (the 4-byte one is a bf16x2 / half2 pair)."""
WIDTHS = (2, 4, 8)


@dataclass(frozen=True)
class BufferUse:
    name: str
    element: str
    widened: bool
    read: bool
    written: bool
    conditional_write: bool
    """A write under a condition other than the index guard, or in a loop: the vector is
    loaded first so that the lanes that do not write store back what was there."""
    restrict: bool

    @property
    def size(self) -> int:
        return SIZES[self.element]


@dataclass(frozen=True)
class KernelFacts:
    """The kernel's shape, its buffers and why not: an analysis (kxform.analysis.manager),
    computed once per kernel and source version."""

    positional: ClassVar[bool] = True

    shape: Elementwise | None
    buffers: tuple[BufferUse, ...]
    blockers: tuple[Blocker, ...]

    @property
    def widened(self) -> tuple[BufferUse, ...]:
        return tuple(b for b in self.buffers if b.widened)

    def widths(self) -> tuple[int, ...]:
        """Widths at which every widened buffer moves 4, 8 or 16 bytes per thread."""
        if not self.widened:
            return ()
        return tuple(w for w in WIDTHS if all(w * b.size in VECTOR_TYPES for b in self.widened))

    @classmethod
    def compute(cls, ctx: AnalysisInput, kernel: Function) -> KernelFacts:
        return kernel_facts(ctx, kernel)


def element_of(access: MemoryAccess) -> str:
    return re.sub(r"\bconst\b|\bvolatile\b|__restrict__", "", access.element).strip()


def kernel_facts(ctx: AnalysisInput, kernel: Function) -> KernelFacts:
    model = ctx.model
    line = model.source.line_col
    found = ctx.analysis(Communication, kernel).found
    if found is not None:
        return KernelFacts(
            None,
            (),
            (
                Blocker(
                    "Communicates",
                    f"the threads communicate through {found.how}: the rewrite changes which thread touches which element",
                    kernel.span.start,
                ),
            ),
        )
    try:
        shape = recognise(model, kernel)
    except NotElementwise as exc:
        return KernelFacts(None, (), (Blocker("NotElementwise", f"{exc} (line {line(exc.offset)[0]})", exc.offset),))
    if not launch_configs(model, kernel.name):
        return KernelFacts(
            shape,
            (),
            (
                Blocker(
                    "NoLaunch",
                    f"'{kernel.name}' is not launched in this file: the grid cannot follow",
                    kernel.span.start,
                ),
            ),
        )
    analysis = ctx.analysis(AccessAnalysis, kernel)
    accesses = [a for a in analysis.accesses if a.space != "local"]
    blockers: list[Blocker] = []
    if any(a.space in ("shared", "unknown") for a in accesses):
        bad = next(a for a in accesses if a.space in ("shared", "unknown"))
        blockers.append(
            Blocker(
                "Communicates",
                f"`{bad.text}` (line {bad.line}) is not a global buffer the analysis can follow",
                bad.span.start,
            )
        )
    restrict = {b.name: b.restrict for b in analysis.buffers}
    simple = re.compile(rf"^(?P<b>[A-Za-z_]\w*)\s*\[\s*{re.escape(shape.var)}\s*\]$")
    buffers: list[BufferUse] = []
    for name in dict.fromkeys(a.buffer for a in accesses if a.space == "global"):
        mine = [a for a in accesses if a.buffer == name]
        wide = [a for a in mine if _is_element(analysis, a, simple)]
        element = element_of(mine[0])
        written = any(a.write for a in mine)
        if wide and len(wide) != len(mine):
            odd = next(a for a in mine if a not in wide)
            blockers.append(
                Blocker(
                    "NotContiguous",
                    f"`{odd.text}` (line {odd.line}) is not `{name}[{shape.var}]` "
                    f"({_why(analysis, odd)}) while `{name}` is widened elsewhere",
                    odd.span.start,
                )
            )
        elif not wide and written:
            odd = next(a for a in mine if a.write)
            blockers.append(
                Blocker(
                    "NotContiguous",
                    f"the write `{odd.text}` (line {odd.line}) is not contiguous in "
                    f"threadIdx.x ({_why(analysis, odd)})",
                    odd.span.start,
                )
            )
        elif wide and element not in SIZES:
            blockers.append(
                Blocker(
                    "ElementType",
                    f"`{name}` holds `{element}`, whose size kxform does not know (line {mine[0].line})",
                    mine[0].span.start,
                )
            )
        conditional = any(a.write and (len(a.guards) > 1 or a.loops) for a in mine)
        buffers.append(
            BufferUse(
                name, element, bool(wide), any(a.read for a in mine), written, conditional, restrict.get(name, False)
            )
        )
    escaped = _escaped(kernel, shape, accesses)
    if escaped is not None and not blockers:
        blockers.append(
            Blocker(
                "Escapes",
                f"`{escaped}` is used other than by a subscript the analysis follows "
                "(passed on, or its address taken): what it reaches is not known",
                kernel.span.start,
            )
        )
    if not any(b.widened for b in buffers) and not blockers:
        first = accesses[0] if accesses else None
        blockers.append(
            Blocker(
                "NotContiguous",
                "no global access is contiguous in threadIdx.x"
                + (f" (line {first.line}: {_why(analysis, first)})" if first else ""),
                first.span.start if first else kernel.span.start,
            )
        )
    if any(b.written for b in buffers):
        for b in buffers:
            if not b.widened and not b.restrict and not blockers:
                other = next(o.name for o in buffers if o.written)
                blockers.append(
                    Blocker(
                        "MayAlias",
                        f"`{b.name}` is read at a non-contiguous index and may overlap "
                        f"`{other}`, which is written (no __restrict__ on both; its extent is not "
                        "known, so no run-time check can exclude it)",
                        kernel.span.start,
                    )
                )
    return KernelFacts(shape, tuple(buffers), tuple(blockers))


def _is_element(analysis: AccessAnalysis, access: MemoryAccess, simple: re.Pattern[str]) -> bool:
    stride = analysis.thread_stride(access)
    match = simple.match(access.text.strip())
    return (
        match is not None
        and match.group("b") == access.buffer
        and access.affine
        and str(stride) == "1"
        and not access.loops
    )


def _why(analysis: AccessAnalysis, access: MemoryAccess) -> str:
    if not access.affine:
        return str(access.index)
    return f"index {access.index}, stride {analysis.thread_stride(access)} in threadIdx.x"


def _escaped(kernel: Function, shape: Elementwise, accesses: list[MemoryAccess]) -> str | None:
    """The first pointer parameter the work names more often than its recorded accesses
    do: it is passed to a function or used through arithmetic the analysis does not see."""
    for param in kernel.params:
        if "*" not in param.ctype:
            continue
        word = re.compile(rf"(?<![\w.]){re.escape(param.name)}(?!\w)")
        named = len(word.findall(shape.work))
        seen = sum(len(word.findall(a.text)) for a in accesses if a.function == kernel.name)
        if named > seen:
            return param.name
    return None
