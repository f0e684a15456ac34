"""What `coarsen` knows of a kernel: its leading thread indices (kxform.analysis.thread_index),
the axes a thread may take several outputs along, and what `loads=once` can share along
each; or why the kernel cannot be coarsened, as a blocker with its line.

A body without a thread index may hold block- or grid-stride loops instead (stride.py).
Refused: threads that communicate (kxform.analysis.communication), a kernel not launched
in the file, a body that does not start with a thread index, an early `return` inside a
loop (it cannot become the next output's `continue`); per axis, a body that reads the
axis's `threadIdx`/`blockIdx`/`blockDim`/`gridDim` after the index (its meaning changes)
or a launch whose grid has no such dimension.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import ClassVar

from kxform.analysis import AccessAnalysis
from kxform.analysis.communication import Communication
from kxform.analysis.manager import AnalysisInput
from kxform.analysis.reuse import Reuse, analyse_reuse, cacheable
from kxform.analysis.thread_index import IndexShape
from kxform.engine import launch_site
from kxform.engine.pass_api import Blocker
from kxform.frontend.launches import launch_configs
from kxform.frontend.model import Function, SourceModel
from kxform.passes.coarsen.jam import Jam, find_jam
from kxform.passes.coarsen.stride import LAYOUTS, StrideShape, stride_shape

FACTORS = ("1", "2", "4", "8")


@dataclass(frozen=True)
class Shape:
    """The kernel's index shape and, per axis it may be coarsened along, the loads its
    outputs share (kxform.analysis.reuse) and the jam of its outputs' loops (jam.py), or
    why not. An analysis (kxform.analysis.manager): computed once per kernel and version."""

    positional: ClassVar[bool] = True

    index: IndexShape | None = None
    axes: tuple[str, ...] = ()
    blocker: Blocker | None = None
    stride: StrideShape | None = None
    """Block- or grid-stride loops where the body has no thread index (stride.py)."""
    reuse: tuple[tuple[str, Reuse | str], ...] = ()
    jams: tuple[tuple[str, Jam | str], ...] = ()

    def reuse_along(self, axis: str) -> Reuse | str:
        return dict(self.reuse).get(axis, f"the kernel cannot be coarsened along {axis}")

    def jam_along(self, axis: str) -> Jam | str:
        return dict(self.jams).get(axis, f"the kernel cannot be coarsened along {axis}")

    def once_pairs(self, tuning: bool) -> tuple[tuple[str, str], ...]:
        """The (axis, layout) pairs at which `loads=once` shares something: a jam at either
        layout; registers across outputs at the contiguous layout only, and for tuning only
        where no run-time check is needed (it lost to `loads=each` with one)."""
        top = int(FACTORS[-1])
        pairs = []
        for axis in self.axes:
            reuse = self.reuse_along(axis)
            if isinstance(self.jam_along(axis), Jam):
                pairs += [(axis, layout) for layout in LAYOUTS]
            elif isinstance(reuse, Reuse) and reuse.shared(top) and (not tuning or reuse.restricted(top)):
                pairs.append((axis, "contiguous"))
        return tuple(pairs)

    @classmethod
    def compute(cls, ctx: AnalysisInput, kernel: Function) -> Shape:
        model = ctx.model
        found = ctx.analysis(Communication, kernel).found
        if found is not None:
            why = f"the threads communicate through {found.how}: which thread computes which output would change"
            return cls(blocker=Blocker("Communicates", why, kernel.span.start))
        if not launch_configs(model, kernel.name):
            why = f"'{kernel.name}' is not launched in this file: the grid cannot follow"
            return cls(blocker=Blocker("NoLaunch", why, kernel.span.start))
        index = ctx.analysis(IndexShape, kernel)
        line = model.source.line_col
        if not index.indices:
            stride = stride_shape(ctx, kernel)
            if isinstance(stride, Blocker):
                return cls(index, blocker=stride)
            if stride is not None:
                return cls(index, stride=stride)
            at = index.statements[0].offset if index.statements else kernel.body.start + 1
            why = f"the body does not start with a thread index `int j = blockIdx.x * blockDim.x + threadIdx.x;` (line {line(at)[0]})"
            return cls(blocker=Blocker("NoThreadIndex", why, at))
        analysis = ctx.analysis(AccessAnalysis, kernel)
        rest = index.rest_text(model, kernel)
        for match in re.finditer(r"\breturn\b", rest):
            at = index.rest_at + len(rest[: match.start()].encode("utf-8"))
            if any(lp.span.start <= at < lp.span.end for lp in analysis.loops):
                why = f"a `return` inside a loop (line {line(at)[0]}) cannot become the next output's `continue`"
                return cls(blocker=Blocker("ReturnInLoop", why, at))
        indexed = [a for a in "xy" if index.index(a) is not None]
        why_not = [_axis_blocker(model, kernel, index, a) for a in indexed]
        axes = tuple(a for a, w in zip(indexed, why_not) if w is None)
        if not axes:
            return cls(
                index,
                blocker=why_not[0]
                if why_not
                else Blocker("NoThreadIndex", "the kernel indexes neither x nor y", kernel.span.start),
            )
        able = cacheable(model, kernel, analysis)
        reuse = tuple((a, analyse_reuse(model, kernel, analysis, a, able)) for a in axes)
        jams = tuple((a, find_jam(model, kernel, analysis, a, index.indices, able)) for a in axes)
        return cls(index, axes, reuse=reuse, jams=jams)


def _axis_blocker(model: SourceModel, kernel: Function, index: IndexShape, axis: str) -> Blocker | None:
    rest = index.rest_text(model, kernel)
    found = re.search(rf"\b(threadIdx|blockIdx|blockDim|gridDim)\s*\.\s*{axis}\b", rest)
    if found is not None:
        at = index.rest_at + len(rest[: found.start()].encode("utf-8"))
        return Blocker(
            "ReadsThreadAxis",
            f"the body reads `{found.group(0)}` after the index (line "
            f"{model.source.line_col(at)[0]}): its meaning changes when a thread takes several outputs",
            at,
        )
    for config in launch_configs(model, kernel.name):
        if len(launch_site.dim_spans(model, config, 0)[0]) <= "xyz".index(axis):
            at = config.site.span.start
            why = f"the launch at line {model.source.line_col(at)[0]} has no grid dimension {axis}"
            return Blocker("NoGridAxis", why, at)
    return None
