"""The memory-access analysis a proposer reasons with: which buffers a kernel touches,
indexed by which block and thread indices, and what neighbouring blocks share.

Two sources, both kxform's own:
* the shared access analysis (kxform.analysis, static): every subscript of a global
  buffer in the kernel and the device functions it reaches, read or written, with its
  index as an affine form where it is one, followed through local definitions
  (`row = blockIdx.y * TILE + ty` makes `A[row * K + k]` depend on blockIdx.y);
* with a harness spec, the CPU runtime's sector traces (measured): the 32-byte sectors
  block (0,0) touches, and the share of them its x-neighbour (1,0) and y-neighbour
  (0,1) touch too, per buffer, at the spec's largest check size.
A buffer whose subscript does not depend on blockIdx.x is read alike by every block of
a grid row: that is the reuse a remap can bring into L2 together.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from kxform.analysis import AccessAnalysis, MemoryAccess
from kxform.engine.pass_api import PassContext
from kxform.frontend.model import Function

Access = MemoryAccess
"""One subscript of a global buffer (the shared analysis's record)."""


def describe(access: MemoryAccess) -> str:
    """One line of the prompt: the subscript, its mode and line, its index and dependences."""
    deps = ", ".join(sorted(access.depends)) or "no index builtin"
    via = f" (via {', '.join(access.via)})" if access.via else ""
    return f"{access.text}  [{access.mode}, line {access.line}] index {access.describe_index()}; depends on {deps}{via}"


@dataclass(frozen=True)
class Sharing:
    """Measured: the share of block (0,0)'s sectors of a buffer its neighbours touch too."""

    buffer: str
    sectors: int
    along_x: float | None
    along_y: float | None


@dataclass(frozen=True)
class AccessReport:
    kernel: str
    accesses: tuple[MemoryAccess, ...]
    sharing: tuple[Sharing, ...] = ()
    trace_note: str = ""

    def render(self) -> str:
        lines = []
        buffers = dict.fromkeys(a.buffer for a in self.accesses)
        for buffer in buffers:
            mine = [a for a in self.accesses if a.buffer == buffer]
            axes = frozenset().union(*(a.block_axes for a in mine))
            helpers = sorted({a.function for a in mine if a.function != self.kernel})
            if not axes and helpers:
                summary = (
                    f"subscripted in device function {', '.join(helpers)} through its parameters; its "
                    "dependence on the block index is not visible there (see the traces)"
                )
            else:
                summary = _reuse(axes)
            lines.append(f"- {buffer}: {summary}")
            lines.extend(f"    {describe(a)}" for a in mine[:8])
            if len(mine) > 8:
                lines.append(f"    ... and {len(mine) - 8} more subscripts")
        if not lines:
            lines.append("- no subscripted global buffer found in the kernel's source")
        if self.sharing:
            lines.append(
                "Measured on kxform's CPU runtime (sector traces, 32-byte sectors): share of block (0,0)'s "
                "sectors that its neighbours also touch:"
            )
            for s in self.sharing:
                lines.append(
                    f"- {s.buffer}: {s.sectors} sectors; x-neighbour (1,0) {_pct(s.along_x)}, "
                    f"y-neighbour (0,1) {_pct(s.along_y)}"
                )
        if self.trace_note:
            lines.append(self.trace_note)
        return "\n".join(lines)


def _pct(value: float | None) -> str:
    return "n/a" if value is None else f"{100 * value:.0f}%"


def _reuse(axes: frozenset[str]) -> str:
    if not axes:
        return "subscript independent of the block index: every block touches the same elements"
    if axes == {"y"}:
        return (
            "depends on blockIdx.y only: blocks of one grid row (same blockIdx.y) touch the same "
            "elements; neighbours along x share them"
        )
    if axes == {"x"}:
        return (
            "depends on blockIdx.x only: blocks of one grid column (same blockIdx.x) touch the same "
            "elements; neighbours along y share them"
        )
    return f"depends on blockIdx.{' and blockIdx.'.join(sorted(axes))}: each block has its own part (by the index)"


def static_accesses(ctx: PassContext, functions: Sequence[Function]) -> tuple[MemoryAccess, ...]:
    """Subscripts of global buffers in each function, from the shared access analysis."""
    out: list[MemoryAccess] = []
    for function in functions:
        out.extend(a for a in ctx.analysis(AccessAnalysis, function).accesses if a.space == "global")
    return tuple(out)
