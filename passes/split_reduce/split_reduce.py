"""`split-reduce`: a reduction a thread runs alone over a dimension not mapped to threads
(one thread per column walking all rows: column sums, a bias gradient, a sum over the
batch, the same loop inside an element-wise kernel's guard) split over several workers
per column, deterministically.

`split-reduce{threads=T,blocks=S}` gives each column T x S workers: T threads of the
same block (the block's y axis) and S blocks (the grid's y axis), so the x axis, and
every index the kernel computes from it, stays as written and a warp still reads
consecutive columns of a row. Worker k runs iterations k, k + P, k + 2P, ... (P = T x
S) of the loop; each stores its partials in a workspace and counts its arrival, and the
column's last worker to arrive combines the partials of workers 0 .. P-1 in that order
and runs the rest of the kernel (the store of the result) as the original thread did.
No barrier is needed, so a guard that differs between the threads of a block (`if (c <
C)`) is no obstacle; the combination order is fixed, so the result does not depend on
which worker arrives last. The launch allocates the workspace on its stream.

The analysis is kxform.analysis (loops, reductions with their identities, dependences);
refusals name their reason and line (passes/split_reduce/plan.py). The rewrite reorders
float sums: verified within the bound kxform.engine.reorder derives (max, min and integer
sums bit-exact), with the workspace's counters checked to be left zero for the next
launch. No evidence, no rewrite: without values the pass proposes nothing; `kxform tune`
searches T and S and keeps what measures faster.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any, ClassVar

from kxform.engine import launch_site
from kxform.engine.edits import Edit
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
from kxform.analysis import AccessAnalysis
from kxform.engine.policy import LaunchBinding, OutputCompare, Scratch, VerifyPolicy, reordered_sums
from kxform.engine.rewrite import RewriteRefused
from kxform.engine.rewritten_launch import overridable_binding, readable
from kxform.errors import CheckFailed
from kxform.frontend.launches import launch_configs
from kxform.frontend.model import Function, SourceModel
from kxform.passes.split_reduce import rewrite
from kxform.passes.split_reduce.plan import SCRATCH_TYPES, Plan

THREADS = (1, 2, 4, 8, 16, 32)
BLOCKS = (1, 2, 4, 8, 16, 32, 64, 128, 256)


@dataclass(frozen=True)
class SplitReduce(ValuesPass):
    name = "split-reduce"
    option_names = ("threads", "blocks")
    structural: ClassVar[bool] = True
    """It changes how the work is divided among threads (the loop, the launch's y axis, a
    workspace), not a value of the code as written: a staged search explores it first."""
    description = (
        "split a thread's reduction loop over threads and blocks per column, partials combined in a fixed "
        "order; split-reduce{threads=T,blocks=S}"
    )
    requires = ("launch",)
    falls_back = False
    defaults_as_written = True  # one thread and one block per column: the kernel as written
    excludes = ("rows", "coarsen", "unroll")
    """rows gives a row's loop lanes along x where this pass gives a column's loop workers
    along y (composed, the loop would be split twice over); coarsen gives a thread several
    outputs, so the loop is no longer the thread's own; unroll numbers the loops as
    written, and the combination adds one."""

    @classmethod
    def describe_options(cls) -> list[str]:
        return [
            "threads=T: workers per column within a block (the block's y axis; 1 as written)",
            "blocks=S: workers per column across blocks (the grid's y axis; 1 as written)",
        ]

    # -- analyse and propose -----------------------------------------------------------

    def analyse(self, ctx: PassContext) -> dict[str, KernelAnalysis]:
        out = {}
        for kernel in ctx.model.kernels:
            found = ctx.analysis(Plan, kernel)
            blockers = list(found.blockers)
            if not blockers and not found.applied:
                try:
                    rewrite.launches(ctx.model, kernel)
                    blockers += self.requested(kernel, self.space(ctx, KernelAnalysis(kernel)))[0]
                except RewriteRefused as exc:
                    blockers.append(Blocker("Launch", exc.cause, kernel.span.start))
            out[kernel.name] = KernelAnalysis(kernel, tuple(blockers), already_applied=found.applied)
        return out

    def default_proposal(self, ctx: PassContext, analysis: KernelAnalysis) -> Proposal | None:
        space = self.space(ctx, analysis)
        wanted = self.requested(analysis.kernel, space)[1]
        if not wanted or wanted == space.defaults():
            return None
        return self.proposal_for(ctx, analysis, wanted, Provenance(evidence="requested"))

    def missed_reason(self, analysis: KernelAnalysis, ctx: PassContext | None = None) -> tuple[str, str]:
        return (
            "NoEvidence",
            "no workers per column were requested; they are chosen by measurement (kxform tune --pass "
            "split-reduce) or given (split-reduce{threads=8,blocks=16})",
        )

    def space(self, ctx: PassContext, analysis: KernelAnalysis) -> ParamSpace:
        kernel = analysis.kernel
        block = _block_size(ctx.model, kernel)
        threads: tuple[int, ...] = THREADS
        constraints = []
        if kernel.launch_bounds:
            threads = (1,)  # the block may not grow past its declared bound
        elif block is not None:
            threads = tuple(t for t in THREADS if t * block <= 1024)
            constraints.append(
                Constraint.parse(f"threads * {block} <= 1024", "a block has at most 1024 threads (block as written)")
            )
        origin = f"{ctx.model.source.path}:{ctx.model.source.line_col(kernel.span.start)[0]}"
        return ParamSpace(
            (
                Param.ints(
                    "threads", threads, 1, doc="workers per column within a block (1: as written)", origin=origin
                ),
                Param.ints("blocks", BLOCKS, 1, doc="workers per column across blocks (1: as written)", origin=origin),
            ),
            tuple(constraints),
        )

    def proposal_for(
        self, ctx: PassContext, analysis: KernelAnalysis, config: Config, provenance: Provenance | None = None
    ) -> Proposal:
        resolved = self.space(ctx, analysis).resolve(config)
        return Proposal.of(
            self.name,
            analysis.kernel.name,
            dict(resolved),
            f"{resolved['threads']} x {resolved['blocks']} workers per column",
            provenance,
        )

    # -- check, edit, verify ------------------------------------------------------------

    def check(self, ctx: PassContext, proposal: Proposal) -> list[CheckRecord]:
        kernel = _kernel(ctx, proposal.kernel)
        found = ctx.analysis(Plan, kernel)
        if found.blockers:
            raise CheckFailed("plan", found.blockers[0].message)
        space = self.space(ctx, KernelAnalysis(kernel))
        config = resolve_proposal(space, proposal.options)
        check_constraints(space, config, ctx.hw)
        loop = found.loop
        assert loop is not None
        sums = ", ".join(f"{r.var} ({r.op}, {r.ctype})" for r in found.reductions)
        compare = _compare(ctx, kernel, found, int(config["threads"]) * int(config["blocks"]))  # raises: no probe
        return [
            CheckRecord("constraints", True, f"{space.label(config)}: {len(space.constraints)} constraint(s) hold"),
            CheckRecord("tolerance", True, compare.describe()),
            CheckRecord(
                "loop",
                True,
                f"the loop over '{loop.var}' (line {ctx.model.source.line_col(loop.span.start)[0]}) split over "
                f"the workers; partials of {sums} combined in worker order",
            ),
        ]

    def edit(self, ctx: PassContext, proposals: Sequence[Proposal]) -> list[Edit]:
        out: list[Edit] = []
        for proposal in proposals:
            kernel = _kernel(ctx, proposal.kernel)
            threads, blocks = int(proposal.options["threads"]), int(proposal.options["blocks"])
            out += rewrite.edits(
                ctx.model, kernel, ctx.analysis(Plan, kernel), threads, blocks, f"split-reduce: {kernel.name}"
            )
        return out

    def verify_policy(self, ctx: PassContext, proposal: Proposal, rewritten: SourceModel) -> VerifyPolicy:
        """The rewritten launch read back from the rewritten file (at threads = blocks = 1
        it must give the spec's launch), its workspace, and the reordered sums' measured
        bound."""
        kernel = _kernel(ctx, proposal.kernel)
        found = ctx.analysis(Plan, kernel)
        threads, blocks = int(proposal.options["threads"]), int(proposal.options["blocks"])
        compare = _compare(ctx, kernel, found, threads * blocks)
        return VerifyPolicy(_binding(rewritten, kernel, found, threads, blocks), compare, required=True)

    def describe(self, ctx: PassContext, analysis: KernelAnalysis) -> dict[str, Any]:
        data = super().describe(ctx, analysis)
        found = ctx.analysis(Plan, analysis.kernel)
        if found.loop is not None:
            data["loop"] = f"{found.loop.var} (line {ctx.model.source.line_col(found.loop.span.start)[0]})"
        data["reductions"] = [f"{r.var}: {r.op} (identity {r.identity})" for r in found.reductions]
        if analysis.applicable:
            data.update(self.space(ctx, analysis).to_json())
        return data


def _compare(ctx: PassContext, kernel: Function, found: Plan, workers: int) -> OutputCompare:
    """Exact at one worker; else the bound kxform.engine.policy.reordered_sums measures with
    the original's reorder probe: each worker adds ceil(n / P) terms (worker 0 on top of the
    initial value), then P - 1 additions combine the partials in order. Raises ProbeRefused
    (a CheckFailed) when a sum cannot be probed."""
    if workers == 1:
        return OutputCompare("exact", reason="one worker per column: every element is computed as before")
    loops = {loop.id: loop for loop in ctx.analysis(AccessAnalysis, kernel).loops}
    how = f"splitting each column's loop over {workers} workers"
    return reordered_sums(
        ctx.model, kernel, found.reductions, loops, how, f"({{n}} + {workers - 1}) / {workers} + {workers - 1}"
    )


def _block_size(model: SourceModel, kernel: Function) -> int | None:
    """The largest block size the file's launches write as a literal or a macro of the file
    (None: a value from the launcher's caller)."""
    sizes = []
    for config in launch_configs(model, kernel.name):
        place = launch_site.written(model, config, 1, 0)
        if place is None:
            continue
        if place.kind == "literal" and place.value is not None:
            sizes.append(place.value)
            continue
        found = re.search(
            rb"#\s*define\s+" + re.escape(place.text.encode()) + rb"\s+\(?(\d+)\)?\s*$", model.source.data, re.M
        )
        if found is None:
            return None
        sizes.append(int(found.group(1)))
    return max(sizes) if sizes else None


def _binding(new: SourceModel, kernel: Function, found: Plan, threads: int, blocks: int) -> LaunchBinding:
    """The launch in the rewritten file `new` over the workers (at 1 and 1 the original's),
    with the workspace the rewrite takes."""
    names = rewrite.Names.of(kernel.name)
    binding = overridable_binding(new, kernel.name, {names.threads: threads, names.blocks: blocks})
    if binding is None:
        return readable(None)
    scratch = tuple(
        Scratch(rewrite.partial(r), SCRATCH_TYPES[r.ctype], "grid_x * block_x * grid_y * block_y")
        for r in found.reductions
    ) + (Scratch(rewrite.ARRIVALS, "uint32", "grid_x * block_x", restored=True),)
    return replace(binding, scratch=scratch)


def _kernel(ctx: PassContext, name: str) -> Function:
    return next(k for k in ctx.model.kernels if k.name == name)


PASS = SplitReduce
