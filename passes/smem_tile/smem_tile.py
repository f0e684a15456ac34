"""`smem_tile`: shared-memory tiling and register blocking of a naive output nest.

A kernel of the form `nest.py` describes (one output per thread, a `+` reduction over k
of operands affine in the output's row or column and k) is rewritten so that a block
computes BM x BN outputs, each thread TM x TN of them in registers, the reduction runs
over BK-deep slices of the operands staged in shared memory (padded by PAD), and the
launch becomes block (BN/TN, BM/TM), grid ceil_div(cols, BN) x ceil_div(rows, BM). The
parameters are overridable macros named after the kernel (`GEMM_NAIVE_BM`; a build or a
tuner sets them with -D). A configuration must meet the derived constraints and ptxas's
registers, pass the pass's own barrier check, and verify differentially at its own
launch before it is written. The bare pass proposes the default configuration (the
shape of a hand-written SGEMM: 64 x 64 x 16, 4 x 4 per thread); `smem_tile{BM=..,...}`
sets one; `kxform tune --pass smem_tile` searches the space.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from kxform.analysis import AccessAnalysis
from kxform.build import resources
from kxform.engine import launch_site
from kxform.engine.edits import Edit, apply_edits
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
from kxform.errors import CheckFailed
from kxform.frontend.model import Function, SourceModel
from kxform.passes.smem_tile import emit
from kxform.passes.smem_tile.barriers import missing_barriers
from kxform.passes.smem_tile.nest import Nest, NestAnalysis, Refusal
from kxform.passes.tile.policy import reordered_compare

DEFAULTS = {"BM": 64, "BN": 64, "BK": 16, "TM": 4, "TN": 4, "PAD": 4, "VEC": 1}
POW2 = (1, 2, 4, 8, 16, 32, 64, 128)
STATIC_SMEM = 48 * 1024
"""Bytes of static `__shared__` memory a block may declare (more needs dynamic shared memory)."""
CANDIDATES = (
    {"BM": 32, "BN": 32, "BK": 8, "TM": 2, "TN": 2, "PAD": 1, "VEC": 1},
    {"BM": 128, "BN": 64, "BK": 8, "TM": 8, "TN": 4, "PAD": 0, "VEC": 4},
    {"BM": 64, "BN": 128, "BK": 16, "TM": 4, "TN": 8, "PAD": 4, "VEC": 4},
    {"BM": 16, "BN": 64, "BK": 32, "TM": 1, "TN": 2, "PAD": 1, "VEC": 1},
)
"""Other shapes, for `candidates` and the corpus table: small, tall, wide, deep."""


@dataclass(frozen=True)
class SmemTile(ValuesPass):
    name = "smem-tile"
    option_names = tuple(DEFAULTS)
    description = "stage operand tiles of a naive reduction nest in shared memory, TM x TN outputs per thread"
    falls_back = False
    excludes = ("launch", "coarsen")
    changes_structure = True
    """The block is derived from the tile shape (BN/TN x BM/TM): launch's would be a second name for it.
    TM x TN outputs per thread are this pass's own coarsening, and a coarsened nest no longer starts with
    its output coordinates (every such point of a tune was refused: NoOutputCoordinates)."""

    @classmethod
    def describe_options(cls) -> list[str]:
        return [f"{k}=N (default {v})" for k, v in DEFAULTS.items()]

    def analyse(self, ctx: PassContext) -> dict[str, KernelAnalysis]:
        out = {}
        for kernel in ctx.model.kernels:
            found = ctx.analysis(NestAnalysis, kernel).found
            blockers: tuple[Blocker, ...] = ()
            if (
                isinstance(found, Refusal)
                and found.key == "AlreadyShared"
                and ctx.model.macro(f"{kernel.name.upper()}_BM") is not None
            ):
                out[kernel.name] = KernelAnalysis(kernel, already_applied=True)  # tiled by this pass
                continue
            if isinstance(found, Refusal):
                blockers = (Blocker(found.key, found.message, found.offset),)
            else:  # a value outside a parameter's domain is a usage error, as for every pass
                space_of(found, ctx).resolve(dict(self.config))
            out[kernel.name] = KernelAnalysis(kernel, blockers)
        return out

    def default_proposal(self, ctx: PassContext, analysis: KernelAnalysis) -> Proposal | None:
        """Only a requested shape: no tile shape is good on every GPU and size, so one is
        chosen by measurement (`kxform tune --pass smem-tile`) or given, never by a rule."""
        if not self.config:
            return None
        config = _space(ctx, analysis.kernel).resolve(dict(self.config))
        return Proposal.of(
            self.name, analysis.kernel.name, config, f"tile {_label(config)} (requested)", Provenance(evidence="rule")
        )

    def missed_reason(self, analysis: KernelAnalysis, ctx: PassContext | None = None) -> tuple[str, str]:
        return (
            "NoEvidence",
            "no tile shape was requested; it is chosen by measurement (kxform tune --pass "
            "smem-tile) or given (smem-tile{BM=64,BN=64,BK=16,TM=4,TN=4})",
        )

    def candidates(self, ctx: PassContext, analysis: KernelAnalysis) -> list[Proposal]:
        space = _space(ctx, analysis.kernel)
        return [
            self.proposal_for(ctx, analysis, c, Provenance(evidence="rule"))
            for c in CANDIDATES
            if space.is_valid(c, ctx.hw)
        ]

    def space(self, ctx: PassContext, analysis: KernelAnalysis) -> ParamSpace:
        return _space(ctx, analysis.kernel)

    def proposal_for(
        self, ctx: PassContext, analysis: KernelAnalysis, config: Config, provenance: Provenance | None = None
    ) -> Proposal:
        resolved = _space(ctx, analysis.kernel).resolve(config)
        return Proposal.of(self.name, analysis.kernel.name, resolved, f"tile {_label(resolved)}", provenance)

    def check(self, ctx: PassContext, proposal: Proposal) -> list[CheckRecord]:
        nest = _nest(ctx, proposal.kernel)
        space = space_of(nest, ctx)
        config = resolve_proposal(space, proposal.options)
        records = [check_constraints(space, config, ctx.hw, _label)]
        text = apply_edits(ctx.model.source, _edits(ctx, nest, config)).data.decode("utf-8")
        block = (
            emit.macro(nest, "BN") + " / " + emit.macro(nest, "TN"),
            emit.macro(nest, "BM") + " / " + emit.macro(nest, "TM"),
        )
        ints = {emit.macro(nest, k): int(v) for k, v in config.items()}
        records.append(
            resources.check_resources(text, ctx.model.source.path, proposal.kernel, block, ints, ctx.hw, ctx.toolchain)
        )
        return records

    def edit(self, ctx: PassContext, proposals: Sequence[Proposal]) -> list[Edit]:
        edits: list[Edit] = []
        for proposal in proposals:
            nest = _nest(ctx, proposal.kernel)
            edits += _edits(ctx, nest, space_of(nest, ctx).resolve(proposal.options))
        return edits

    def check_result(
        self, new_model: SourceModel, proposals: Sequence[Proposal], ctx: PassContext | None = None
    ) -> list[CheckRecord]:
        """The pass's own barrier check on the rewritten kernels (kxform.passes.smem_tile.barriers)."""
        if ctx is None:
            return []
        records = []
        for proposal in proposals:
            kernel = next(k for k in new_model.kernels if k.name == proposal.kernel)
            probe = PassContext(new_model, ctx.hw, ctx.options, ctx.remarks, toolchain=ctx.toolchain)
            problems = barrier_problems(probe, kernel)
            if problems:
                raise CheckFailed("barriers", f"'{kernel.name}': {problems[0]}")
            records.append(
                CheckRecord(
                    "barriers",
                    True,
                    f"'{kernel.name}': every shared read and store is separated from the other by a __syncthreads()",
                )
            )
        return records

    def verify_policy(self, ctx: PassContext, proposal: Proposal) -> VerifyPolicy:
        nest = _nest(ctx, proposal.kernel)
        config = space_of(nest, ctx).resolve(proposal.options)
        grid, block = emit.binding_exprs(nest)
        values = tuple((emit.macro(nest, k), int(v)) for k, v in config.items())
        original = {"BM": nest.block[1], "BN": nest.block[0], "TM": 1, "TN": 1, "BK": 1, "PAD": 0, "VEC": 1}
        defaults = tuple((emit.macro(nest, k), v) for k, v in original.items())
        line = ctx.model.source.line_col(nest.launch.site.span.start)[0]
        binding = LaunchBinding(grid, block, None, values, defaults, f"{ctx.model.source.path}:{line}")
        compare = reordered_compare(
            f"'{nest.acc.var}' (line {ctx.model.source.line_col(nest.acc.updates[0].start)[0]})",
            "each output's terms keep their order over k, but the tiled accumulation is compiled apart from the "
            "original (another contraction into fused multiply-adds, another register schedule)",
        )
        return VerifyPolicy(binding, compare, required=True)

    def describe(self, ctx: PassContext, analysis: KernelAnalysis) -> dict[str, Any]:
        data = super().describe(ctx, analysis)
        if analysis.applicable:
            data.update(_space(ctx, analysis.kernel).to_json())
        return data


def barrier_problems(ctx: PassContext, kernel: Function) -> list[str]:
    return missing_barriers(ctx.analysis(AccessAnalysis, kernel))


def space_of(nest: Nest, ctx: PassContext) -> ParamSpace:
    """BM, BN, BK, TM, TN and PAD with the constraints the rewrite needs and the hardware sets."""
    line = f"{ctx.model.source.path}:{ctx.model.source.line_col(nest.loop.span.start)[0]}"
    elem = 4 if all(op.access.element == "float" for op in nest.operands) else 8
    rows = sum(1 for op in nest.operands if op.axis == "row")
    cols = len(nest.operands) - rows
    params = (
        Param.ints("BM", POW2, DEFAULTS["BM"], doc="output rows per block", origin=line),
        Param.ints("BN", POW2, DEFAULTS["BN"], doc="output columns per block", origin=line),
        Param.ints("BK", POW2[:7], DEFAULTS["BK"], doc="reduction slice staged per step", origin=line),
        Param.ints("TM", POW2[:5], DEFAULTS["TM"], doc="output rows per thread (registers)", origin=line),
        Param.ints("TN", POW2[:5], DEFAULTS["TN"], doc="output columns per thread (registers)", origin=line),
        Param.ints(
            "PAD", (0, 1, 2, 4, 8), DEFAULTS["PAD"], doc="shared-memory row padding (bank conflicts)", origin=line
        ),
        Param.ints(
            "VEC",
            (1, 4) if elem == 4 else (1,),
            DEFAULTS["VEC"],
            doc="elements per staging load (4: one float4 where contiguous, whole and aligned)",
            origin=line,
        ),
    )
    smem = f"{elem} * BK * ({rows} * (BM + PAD) + {cols} * (BN + PAD))"
    constraints = (
        Constraint.parse("BM % TM == 0 and BN % TN == 0", "a thread owns TM x TN outputs of the block's tile", line),
        Constraint.parse("(BM // TM) * (BN // TN) <= hw.max_threads_per_block", "threads per block", line),
        Constraint.parse("((BM // TM) * (BN // TN)) % 32 == 0", "whole warps (no idle lanes)", line),
        Constraint.parse(
            "BK % VEC == 0 and BM % VEC == 0 and BN % VEC == 0",
            "a staging step loads VEC elements of one slice row",
            line,
        ),
        Constraint.parse("TM * TN <= 64", "accumulators fit in registers (ptxas checks the rest)", line),
        Constraint.parse(
            f"{smem} <= hw.smem_per_block and {smem} <= {STATIC_SMEM}",
            "staged operand slices fit in "
            "shared memory (static __shared__ arrays: 48 KiB at most, whatever the opt-in limit)",
            line,
        ),
    )
    return ParamSpace(params, constraints)


def _space(ctx: PassContext, kernel: Function) -> ParamSpace:
    return space_of(_nest(ctx, kernel.name), ctx)


def _nest(ctx: PassContext, name: str) -> Nest:
    kernel = next(k for k in ctx.model.kernels if k.name == name)
    found = ctx.analysis(NestAnalysis, kernel).found
    if isinstance(found, Refusal):
        raise CheckFailed("recognise", found.message)
    return found


def _edits(ctx: PassContext, nest: Nest, config: Config) -> list[Edit]:
    model, kernel = ctx.model, nest.kernel
    origin = f"smem_tile: {kernel.name}"
    edits: list[Edit] = []
    at = model.source.insertion_point(kernel.span.start)
    text = "".join(
        launch_site.define_parameter(model, kernel.span.start, emit.macro(nest, k), int(v), origin)[0].text
        for k, v in config.items()
    )
    edits.append(Edit(at, at, text, f"{origin}: parameters"))
    indent = model.source.indent_at(kernel.span.start) + "    "
    edits.append(
        Edit(kernel.body.start, kernel.body.end, emit.body(nest, indent, model.source.newline), f"{origin}: body")
    )
    grid, block = emit.launch_texts(nest)
    edits.append(launch_site.replace_config(nest.launch.site, 0, grid, f"{origin}: grid"))
    edits.append(launch_site.replace_config(nest.launch.site, 1, block, f"{origin}: block"))
    return sorted(edits)


def _label(config: Config) -> str:
    return ",".join(f"{k}={v}" for k, v in config.items())


def threads(config: Config) -> int:
    return math.prod((int(config["BM"]) // int(config["TM"]), int(config["BN"]) // int(config["TN"])))


PASS = SmemTile
