"""`rows`: a kernel that gives each thread a row (one loop, or several, over the row's
elements) rewritten so that G threads share each row.

`rows{lanes=32,rows=8}` gives each row a warp and each block 8 rows: every top-level loop
of the thread is shared out over the row's lanes (element j by lane j % G, so the row's
loads and stores coalesce), every reduction those loops carry (+, max, min) is combined
over the lanes by a butterfly of warp shuffles (G <= 32) or shuffles plus shared memory
(G > 32, one row per block) and left in every lane, and the launch gets `rows * lanes`
threads per block and a grid over rows. The analysis is kxform.analysis (loops,
dependences, reductions with their identities); refusals name their reason and line.
No evidence, no rewrite: without values the pass proposes nothing; `kxform tune --pass
rows` searches `lanes` and `rows` and keeps what measures faster.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from kxform.engine.contracts import AxisItems, LaunchContract
from kxform.engine.edits import Edit
from kxform.engine.launch_site import run_time_inputs
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
from kxform.engine.policy import LaunchBinding, VerifyPolicy
from kxform.engine.rewritten_launch import readable, rewritten_launch
from kxform.engine.rewrite import RewriteRefused
from kxform.errors import CheckFailed
from kxform.frontend.model import Function, SourceModel
from kxform.passes.rows import rewrite
from kxform.passes.rows.plan import Names, Plan
from kxform.passes.rows.tolerance import compare_for

LANES = (1, 4, 8, 16, 32, 64, 128, 256, 512, 1024)
ROWS = (1, 2, 4, 8, 16, 32, 64, 128, 256)


@dataclass(frozen=True)
class Rows(ValuesPass):
    name = "rows"
    option_names = ("lanes", "rows")
    description = (
        "share each thread's row loops over G threads (a warp fraction, a warp or a block) with "
        "shuffle or block reductions; rows{lanes=G,rows=R}"
    )
    falls_back = False
    excludes = ("launch", "coarsen")
    structural = True
    """Rows per block is this pass's own block size: tuned together, launch's would be a second name for it.
    coarsen gives a thread several rows where this pass gives a row several threads; composed, the
    rewritten launch is one the verifier cannot read (every such point of a tune was "could not tell")."""

    @classmethod
    def describe_options(cls) -> list[str]:
        return [
            "lanes=G: threads per row (1 as written; 4..32 within a warp, 64..1024 a block per row)",
            "rows=R: rows per block (the block has R * G threads; R = 1 when G > 32); default: the block size "
            "as written",
        ]

    # -- analyse and propose -----------------------------------------------------------

    def analyse(self, ctx: PassContext) -> dict[str, KernelAnalysis]:
        out = {}
        for kernel in ctx.model.kernels:
            found = ctx.analysis(Plan, kernel)
            blockers = list(found.blockers)
            if not blockers and not found.applied:
                try:
                    rewrite.launch_sites(ctx.model, kernel)
                except RewriteRefused as exc:
                    blockers.append(Blocker("Launch", exc.cause, kernel.span.start))
            if not blockers and not found.applied and self.config:
                try:
                    blockers += self.requested(kernel, self.space(ctx, KernelAnalysis(kernel)))[0]
                except CheckFailed as exc:
                    blockers.append(Blocker("Launch", exc.cause, kernel.span.start))
            out[kernel.name] = KernelAnalysis(kernel, tuple(blockers), already_applied=found.applied)
        return out

    def default_proposal(self, ctx: PassContext, analysis: KernelAnalysis) -> Proposal | None:
        space = self.space(ctx, analysis)
        wanted = self.requested(analysis.kernel, space)[1]
        if not wanted or wanted == space.defaults():
            return None
        return self.proposal_for(ctx, analysis, wanted, Provenance(evidence="requested"))

    def candidates(self, ctx: PassContext, analysis: KernelAnalysis) -> list[Proposal]:
        return []

    def missed_reason(self, analysis: KernelAnalysis, ctx: PassContext | None = None) -> tuple[str, str]:
        return (
            "NoEvidence",
            "no lanes per row were requested; they are chosen by measurement (kxform tune --pass "
            "rows) or given (rows{lanes=32,rows=8})",
        )

    def space(self, ctx: PassContext, analysis: KernelAnalysis) -> ParamSpace:
        site = rewrite.launch_sites(ctx.model, analysis.kernel)[0]
        origin = f"{ctx.model.source.path}:{ctx.model.source.line_col(site.block.span.start)[0]}"
        lanes = Param.ints("lanes", LANES, 1, doc="threads per row (1: one thread per row, as written)", origin=origin)
        if site.run_time:
            return ParamSpace(
                (
                    lanes,
                    Param.ints(
                        "rows",
                        (0, *ROWS),
                        0,
                        doc=f"rows per block (0: the threads '{site.block.text}' the launcher's caller passes, "
                        "in whole warps, lanes to a row)",
                        origin=origin,
                    ),
                ),
                (
                    Constraint.parse("lanes * rows <= 1024", "a block has at most 1024 threads"),
                    Constraint.parse(
                        "lanes == 1 or (lanes * rows) % 32 == 0",
                        "whole warps: the shuffle masks name a warp's lanes (rows = 0 rounds the caller's block)",
                    ),
                    Constraint.parse(
                        "lanes <= 32 or rows <= 1",
                        "a block-level reduction's barriers need every thread of the block in the row",
                    ),
                ),
            )
        block = rewrite.block_value(ctx.model, site.block)
        if block is None:
            raise CheckFailed(
                "launch",
                f"the block size '{site.block.text}' of '{analysis.kernel.name}' is not a literal kxform can read",
            )
        rows = tuple(sorted(set(ROWS) | {block}))
        return ParamSpace(
            (
                lanes,
                Param.ints("rows", rows, block, doc="rows per block (as written: the block size)", origin=origin),
            ),
            (
                Constraint.parse("lanes * rows <= 1024", "a block has at most 1024 threads"),
                Constraint.parse(
                    "lanes == 1 or (lanes * rows) % 32 == 0", "whole warps: the shuffle masks name a warp's lanes"
                ),
                Constraint.parse(
                    "lanes <= 32 or rows == 1",
                    "a block-level reduction's barriers need every thread of the block in the row",
                ),
            ),
        )

    def proposal_for(
        self, ctx: PassContext, analysis: KernelAnalysis, config: Config, provenance: Provenance | None = None
    ) -> Proposal:
        space = self.space(ctx, analysis)
        resolved = space.resolve(config)
        site = rewrite.launch_sites(ctx.model, analysis.kernel)[0]
        rows = (
            f"rows per block from the caller's '{site.block.text}' threads (rounded to whole warps, at least one, "
            "where it is not a multiple of 32)"
            if site.run_time and resolved["rows"] == 0
            else f"{resolved['rows']} rows per block"
        )
        return Proposal.of(
            self.name, analysis.kernel.name, dict(resolved), f"{resolved['lanes']} lanes per row, {rows}", provenance
        )

    # -- check, edit, verify ------------------------------------------------------------

    def check(self, ctx: PassContext, proposal: Proposal) -> list[CheckRecord]:
        kernel = _kernel(ctx, proposal.kernel)
        found = ctx.analysis(Plan, kernel)
        if found.blockers:
            raise CheckFailed("plan", found.blockers[0].message)
        space = self.space(ctx, KernelAnalysis(kernel))
        config = resolve_proposal(space, proposal.options)
        check_constraints(space, config, ctx.hw)  # raises on the first broken constraint
        loops = ", ".join(
            f"'{loop.var}' (line {ctx.model.source.line_col(loop.span.start)[0]})" for loop in found.loops
        )
        sums = ", ".join(f"{r.var} ({r.op}, identity {r.identity})" for r in found.reductions) or "none"
        compare = compare_for(ctx, kernel, found, int(config["lanes"]))  # raises when a sum cannot be probed
        return [
            CheckRecord("constraints", True, f"{space.label(config)}: {len(space.constraints)} constraint(s) hold"),
            CheckRecord("loops", True, f"loops shared over the row's lanes: {loops}; reductions combined: {sums}"),
            CheckRecord("tolerance", True, compare.describe()),
        ]

    def edit(self, ctx: PassContext, proposals: Sequence[Proposal]) -> list[Edit]:
        out: list[Edit] = []
        for proposal in proposals:
            kernel = _kernel(ctx, proposal.kernel)
            out += rewrite.edits(
                ctx.model,
                kernel,
                ctx.analysis(Plan, kernel),
                int(proposal.options["lanes"]),
                int(proposal.options["rows"]),
                f"rows: {kernel.name}",
            )
        return out

    def verify_policy(self, ctx: PassContext, proposal: Proposal, rewritten: SourceModel) -> VerifyPolicy:
        """The rewritten launch (at the original values, rows = the block size and lanes = 1,
        it must give the spec's launch) and the derived tolerance (kxform.passes.rows.tolerance)."""
        kernel = _kernel(ctx, proposal.kernel)
        found = ctx.analysis(Plan, kernel)
        lanes, rows = int(proposal.options["lanes"]), int(proposal.options["rows"])
        compare = compare_for(ctx, kernel, found, lanes)
        return VerifyPolicy(_binding(ctx, rewritten, kernel, lanes, rows), compare, required=True, shares=lanes > 1)

    def launch_contract(self, ctx: PassContext, proposal: Proposal) -> LaunchContract:
        """The rewritten kernel needs rows * lanes threads per block and a grid over rows at
        every launch, and the row's buffers apart (or the run-time check of them). A block
        size the launcher's caller passes has no one value to prove the grid against: the
        rewrite reads the caller's threads in the block and the grid alike, and the verifier
        runs that launch; a launch elsewhere in the run is refused all the same."""
        kernel = _kernel(ctx, proposal.kernel)
        found = ctx.analysis(Plan, kernel)
        lanes, rows = int(proposal.options["lanes"]), int(proposal.options["rows"])
        site = rewrite.launch_sites(ctx.model, kernel)[0]
        block = None if site.run_time else rewrite.block_value(ctx.model, site.block) or 0
        return LaunchContract(
            kernel.name,
            geometry=True,
            distinct=found.overlap.pairs,
            checked_at_run_time=found.overlap.checked,
            why_distinct="the rewrite shares each row's loops over lanes, which reorders the row's reads and writes",
            axes=(AxisItems(0, block, rows),) if block is not None else (),
            block=(rows * lanes,) if block is not None else None,
            old_values=((site.block.text, block),) if block is not None and site.block.kind == "constant" else (),
        )

    def describe(self, ctx: PassContext, analysis: KernelAnalysis) -> dict[str, Any]:
        data = super().describe(ctx, analysis)
        found = ctx.analysis(Plan, analysis.kernel)
        data["loops"] = [f"{loop.var} (line {ctx.model.source.line_col(loop.span.start)[0]})" for loop in found.loops]
        data["reductions"] = [f"{r.var}: {r.op} (identity {r.identity})" for r in found.reductions]
        if analysis.applicable:
            data.update(self.space(ctx, analysis).to_json())
        return data


def _binding(ctx: PassContext, new: SourceModel, kernel: Function, lanes: int, rows: int) -> LaunchBinding:
    """The launch in the rewritten file `new` over the lanes and rows (at lanes 1 and rows
    the block as written, the original's)."""
    names = Names.of(kernel.name)
    site = rewrite.launch_sites(ctx.model, kernel)[0]
    block = 0 if site.run_time else rewrite.block_value(ctx.model, site.block) or 0
    values = {names.lanes: lanes, names.rows: rows}
    defaults = {names.lanes: 1, names.rows: block}
    inputs = run_time_inputs(ctx.model, site.config)
    return readable(rewritten_launch(new, kernel.name, (names.lanes, names.rows), values, defaults, inputs=inputs))


def _kernel(ctx: PassContext, name: str) -> Function:
    return next(k for k in ctx.model.kernels if k.name == name)


PASS = Rows
