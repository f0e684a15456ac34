"""`vectorize`: a one-element-per-thread kernel's contiguous accesses widened to 4-, 8-
or 16-byte vector loads and stores, each thread handling the elements of its vector.

`vectorize{width=4}` on `int i = blockIdx.x*blockDim.x + threadIdx.x; if (i < N) out[i]
= f(inp[i]);` gives each thread 4 elements: one `uint4` load of `inp`, the work once per
element in order, one `uint4` store of `out` (kxform.passes.vectorize.rewrite), and the
grids count vectors (`N` -> `((N + W - 1) / W)` where the launch passes the bound). A
scalar path does the elements as written where the thread's vector runs past the bound
(the tail), a buffer is not aligned to the vector (checked at run time: a caller may
pass `x + 1`), or two buffers overlap (checked at run time unless both are
`__restrict__`). Widths are offered where every widened buffer moves 4, 8 or 16 bytes
(float: 2, 4; bf16/half: 2, 4, 8). Refused, with the line: another kernel shape,
threads that communicate, a write that is not contiguous in threadIdx.x, a buffer read
both ways, a non-contiguous read that may alias a written buffer.

No arithmetic is reordered: verified bit-exact. No evidence, no rewrite: without
`width` the pass proposes nothing; `kxform tune --pass vectorize` searches the width.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kxform.engine import launch_site
from kxform.engine.contracts import AxisItems, LaunchContract, block_dimension
from kxform.engine.edits import Edit
from kxform.engine.params import Config, Param, ParamSpace, ParamValue
from kxform.engine.pass_api import (
    BAD_VALUE,
    Blocker,
    CheckRecord,
    KernelAnalysis,
    Pass,
    PassContext,
    Proposal,
    Provenance,
    resolve_proposal,
)
from kxform.engine.policy import OutputCompare, VerifyPolicy
from kxform.engine.rewritten_launch import readable, rewritten_binding
from kxform.errors import CheckFailed, UsageError
from kxform.frontend.model import Function, SourceModel
from kxform.passes.vectorize.facts import KernelFacts
from kxform.passes.vectorize.rewrite import grid_edits, kernel_body, width_name
from kxform.passes.vectorize.stride import StrideFacts, stride_edits, stride_facts

OFF = "1"


@dataclass(frozen=True)
class Vectorize(Pass):
    name = "vectorize"
    description = (
        "widen a one-element-per-thread kernel's contiguous accesses to vector loads and stores "
        "(vectorize{width=4}; bit-exact)"
    )
    requires = ("launch",)
    structural = True
    falls_back = False

    width: str | None = None
    """Elements per thread (2, 4, 8 where the element type allows); None: nothing is proposed."""

    @classmethod
    def from_options(cls, options: Mapping[str, str | ParamValue]) -> Pass:
        unknown = sorted(set(options) - {"width"})
        if unknown:
            raise UsageError(f"vectorize has no option {unknown[0]!r} (options: width)")
        return cls(str(options["width"]) if "width" in options else None)

    def spec_items(self) -> list[tuple[str, str]]:
        return [("width", self.width)] if self.width is not None else []

    @classmethod
    def describe_options(cls) -> list[str]:
        return [
            "width=2|4|8: elements per thread, one 4-, 8- or 16-byte vector per buffer (kxform inspect --pass "
            "vectorize lists a kernel's widths); none: nothing is proposed"
        ]

    # -- analyse and propose -----------------------------------------------------------

    def analyse(self, ctx: PassContext) -> dict[str, KernelAnalysis]:
        out = {}
        for kernel in ctx.model.kernels:
            done = re.search(rb"#\s*define\s+" + width_name(kernel.name).encode() + rb"\b", ctx.model.source.data)
            if done:
                out[kernel.name] = KernelAnalysis(kernel, (), already_applied=True)
                continue
            facts = shape_facts(ctx, kernel)
            blockers = list(facts.blockers)
            if not blockers and not facts.widths():
                blockers.append(
                    Blocker(
                        "ElementType",
                        "no width moves 4, 8 or 16 bytes of every widened buffer or access",
                        kernel.span.start,
                    )
                )
            if not blockers and isinstance(facts, KernelFacts):
                grid = grid_edits(ctx.model, kernel, facts.shape.bound, width_name(kernel.name), "")
                if isinstance(grid, str):
                    blockers.append(Blocker("GridNotReadable", grid, kernel.span.start))
            if (
                not blockers
                and self.width is not None
                and self.width != OFF
                and self.width not in self._space(facts, kernel).param("width").values
            ):
                blockers.append(
                    Blocker(
                        BAD_VALUE,
                        f"width={self.width}: not one of "
                        f"{{{', '.join(self._space(facts, kernel).param('width').values)}}}",
                        kernel.span.start,
                    )
                )
            out[kernel.name] = KernelAnalysis(kernel, tuple(blockers))
        return out

    def default_proposal(self, ctx: PassContext, analysis: KernelAnalysis) -> Proposal | None:
        if self.width is None or self.width == OFF:
            return None
        return Proposal.of(self.name, analysis.kernel.name, {"width": self.width}, f"width {self.width} (requested)")

    def candidates(self, ctx: PassContext, analysis: KernelAnalysis) -> list[Proposal]:
        return []

    def missed_reason(self, analysis: KernelAnalysis, ctx: PassContext | None = None) -> tuple[str, str]:
        return (
            "NoEvidence",
            "no width was requested; widths are chosen by measurement (kxform tune) or given (vectorize{width=4})",
        )

    @staticmethod
    def _space(facts: KernelFacts | StrideFacts, kernel: Function) -> ParamSpace:
        if facts.blockers or not facts.widths():
            return ParamSpace()
        # No "1": the code as written is the composed space's pass-off point, never a
        # second configuration of this pass that measures the same kernel again.
        values = [str(w) for w in facts.widths()]
        return ParamSpace((Param.enum("width", values, values[0], doc=f"elements per thread of '{kernel.name}'"),))

    def space(self, ctx: PassContext, analysis: KernelAnalysis) -> ParamSpace:
        if analysis.already_applied:
            return ParamSpace()
        return self._space(shape_facts(ctx, analysis.kernel), analysis.kernel)

    def proposal_for(
        self, ctx: PassContext, analysis: KernelAnalysis, config: Config, provenance: Provenance | None = None
    ) -> Proposal:
        space = self.space(ctx, analysis)
        resolved = space.resolve(config)
        return Proposal.of(
            self.name, analysis.kernel.name, dict(resolved), f"configuration {space.label(resolved)}", provenance
        )

    # -- check, edit, verify ------------------------------------------------------------

    def check(self, ctx: PassContext, proposal: Proposal) -> list[CheckRecord]:
        kernel = _kernel(ctx.model, proposal.kernel)
        facts = shape_facts(ctx, kernel)
        if facts.blockers:
            raise CheckFailed("shape", facts.blockers[0].message)
        width = resolve_proposal(self._space(facts, kernel), proposal.options)["width"]
        if isinstance(facts, StrideFacts):
            return _stride_checks(ctx, facts, width)
        wide = ", ".join(f"{b.name} ({b.element} x{width})" for b in facts.widened)
        kept = [b.name for b in facts.buffers if not b.widened]
        checks = [
            CheckRecord(
                "contiguous", True, f"widened: {wide}" + (f"; read as written: {', '.join(kept)}" if kept else "")
            )
        ]
        restrict = all(b.restrict for b in facts.widened)
        checks.append(CheckRecord("alignment", True, "checked at run time per buffer; the scalar path otherwise"))
        checks.append(
            CheckRecord(
                "aliasing",
                True,
                "__restrict__ on every widened buffer"
                if restrict
                else "checked at run time over [0, bound); the scalar path where buffers overlap",
            )
        )
        checks.append(
            CheckRecord(
                "tail", True, f"elements past the last whole vector (bound {facts.shape.bound}) take the scalar path"
            )
        )
        return checks

    def edit(self, ctx: PassContext, proposals: Sequence[Proposal]) -> list[Edit]:
        edits: list[Edit] = []
        for proposal in proposals:
            edits += _edits(ctx, proposal)
        return edits

    def verify_policy(self, ctx: PassContext, proposal: Proposal, rewritten: SourceModel) -> VerifyPolicy:
        """Each element is computed by the same operations in the same order: bit-exact,
        at the rewritten launch (its grid counts vectors)."""
        width = int(proposal.options.get("width", OFF))
        compare = OutputCompare(
            "exact", reason="each element is computed by the same operations; only loads and stores are grouped"
        )
        if width == 1:
            return VerifyPolicy(compare=compare)
        if isinstance(shape_facts(ctx, _kernel(ctx.model, proposal.kernel)), StrideFacts):
            return VerifyPolicy(compare=compare, required=True)  # a stride loop's launch stays as written
        launch = readable(rewritten_binding(rewritten, proposal.kernel, width_name(proposal.kernel), width))
        return VerifyPolicy(launch, compare, required=True)

    def launch_contract(self, ctx: PassContext, proposal: Proposal) -> LaunchContract | None:
        """The rewritten kernel computes a vector per thread and the grids of this file count them: a
        launch of it in another file of the run would not."""
        items = int(proposal.options.get("width", "1"))
        if items == 1:
            return None
        axis = 0
        block = block_dimension(ctx.model, proposal.kernel, axis)
        axes = (AxisItems(axis, block, block * items),) if block else ()
        return LaunchContract(proposal.kernel, geometry=True, axes=axes)

    def describe(self, ctx: PassContext, analysis: KernelAnalysis) -> dict[str, Any]:
        data = super().describe(ctx, analysis)
        data.update(self.space(ctx, analysis).to_json())
        return data


def shape_facts(ctx: PassContext, kernel: Function) -> KernelFacts | StrideFacts:
    """The kernel as one element per thread, or, where it is not, as block- or
    grid-stride loops (passes/vectorize/stride.py); the element-wise refusal stands where
    the kernel has no stride loop either."""
    facts = ctx.analysis(KernelFacts, kernel)
    if not facts.blockers or facts.blockers[0].key != "NotElementwise":
        return facts
    stride = stride_facts(ctx, kernel)
    return facts if stride.blockers and stride.blockers[0].key == "NotElementwise" else stride


def _stride_checks(ctx: PassContext, facts: StrideFacts, width: ParamValue) -> list[CheckRecord]:
    line = ctx.model.source.line_col
    loops = ", ".join(
        f"{sl.kind}-stride over '{sl.loop.var}' (line {line(sl.loop.span.start)[0]})" for sl in facts.loops
    )
    wide = ", ".join(f"`{w.text}` ({w.element} x{width})" for sl in facts.loops for w in sl.widened)
    return [
        CheckRecord("contiguous", True, f"{loops}: widened {wide}"),
        CheckRecord("alignment", True, "checked at run time per access and turn; the scalar path otherwise"),
        CheckRecord("aliasing", True, "written vectors checked apart from the others per turn unless __restrict__"),
        CheckRecord("tail", True, "elements past the last whole vector take the scalar path; the launch is unchanged"),
    ]


def _edits(ctx: PassContext, proposal: Proposal) -> list[Edit]:
    model = ctx.model
    kernel = _kernel(model, proposal.kernel)
    facts = shape_facts(ctx, kernel)
    width = int(proposal.options["width"])
    name = width_name(kernel.name)
    origin = f"vectorize: {kernel.name}"
    if isinstance(facts, StrideFacts):
        return [
            *launch_site.define_parameter(model, kernel.span.start, name, width, f"{origin}: width"),
            *stride_edits(model, facts.loops, width, name, f"{origin}: stride loop"),
        ]
    grid = grid_edits(model, kernel, facts.shape.bound, name, f"{origin}: grid")
    if isinstance(grid, str):
        raise CheckFailed("launch", grid)
    body = kernel_body(facts, kernel, width, model.source.newline)
    return [
        *launch_site.define_parameter(model, kernel.span.start, name, width, f"{origin}: width"),
        Edit(kernel.body.start + 1, kernel.body.end - 1, body, f"{origin}: body"),
        *grid,
    ]


def _kernel(model: SourceModel, name: str) -> Function:
    return next(k for k in model.kernels if k.name == name)


PASS = Vectorize
