"""`smem_tile`: shared-memory tiling and register blocking of a naive output nest.

A kernel of the form `nest.py` describes (one output per thread, a `+` reduction over k
of operands affine in the output's row or column and k) is rewritten so that a block
computes BM x BN outputs in warp tiles of WM x WN, each thread TM x TN of them in
registers, the reduction runs over BK-deep slices of the operands staged in shared
memory (padded by PAD) through STAGES buffers (cp.async where the GPU has it), and the
launch becomes block (BN/TN, BM/TM), grid ceil_div(cols, BN) x ceil_div(rows, BM). The
parameters are named by macros after the kernel (`GEMM_NAIVE_BM`). A configuration must
meet the derived constraints and ptxas's registers, pass the pass's own barrier check,
and verify differentially at its own launch before it is written. The pass proposes
nothing unasked (`smem_tile{BM=..,...}` sets a configuration, the others at the defaults:
the shape of a hand-written SGEMM, 128 x 128 x 8, 8 x 8 per thread, two stages);
`kxform tune --pass smem_tile` searches a small space around it (`tuning_space`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from kxform.analysis import AccessAnalysis
from kxform.build import resources
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
from kxform.engine.policy import LaunchBinding, VerifyPolicy
from kxform.engine.reorder import reordered_compare
from kxform.engine.rewritten import edited_file
from kxform.errors import CheckFailed
from kxform.frontend.model import Function, SourceModel
from kxform.hw import HwProfile
from kxform.engine.helper_placement import helper_offset
from kxform.passes.smem_tile import emit
from kxform.passes.smem_tile.barriers import missing_barriers
from kxform.passes.smem_tile.layout import PARAMS, shape_of, warp_tile
from kxform.passes.smem_tile.nest import Nest, NestAnalysis, Refusal

DEFAULTS = {"BM": 128, "BN": 128, "BK": 8, "TM": 8, "TN": 8, "WM": 32, "WN": 64, "STAGES": 2, "PAD": 4, "VEC": 4}
"""The shape of a hand-written SGEMM on current GPUs: 256 threads of 8 x 8 outputs in warp
tiles of 32 x 64 (lanes 4 x 8), 8-deep slices double-buffered, float4 loads, rows padded
by 4 floats (transposed stores without bank conflicts, 16-byte aligned rows)."""
POW2 = (1, 2, 4, 8, 16, 32, 64, 128, 256)
STATIC_SMEM = 48 * 1024
"""Bytes of static `__shared__` memory a block may declare (more needs dynamic shared memory)."""
TUNED = {
    "BM": (64, 128, 256),
    "BN": (64, 128, 256),
    "BK": (8, 16),
    "TM": (4, 8),
    "TN": (4, 8),
    "WM": (16, 32, 64),
    "WN": (32, 64),
    "STAGES": (1, 2, 3),
    "PAD": (4,),
}
"""What `kxform tune` times, with TUNED_RULES: the shapes of hand-written SGEMMs. 128 or
256 threads of 8 x 8, 8 x 4, 4 x 8 or 4 x 4 outputs (fewer outputs per thread leave the
shared loads, not the FMAs, the limit), lanes 4 x 8 in a warp, slices of 8 or 16, one to
three stages; rows padded by 4 (transposed stores free of bank conflicts, 16-byte
aligned rows) and float4 loads (their run-time scalar path handles unaligned rows and
the edges). About 70 points, nearly all within a small factor of the best on a current
GPU; the default (128 x 128 x 8, 8 x 8, two stages) among the best."""
TUNED_RULES = (
    ("(BM // TM) * (BN // TN) >= 128 and (BM // TM) * (BN // TN) <= 256", "128 or 256 threads per block"),
    ("WN // TN == 8", "a warp's lanes 4 x 8 (8 x 8 on 64-wide wavefronts) over its tile"),
)
CANDIDATES = (
    {"BM": 64, "BN": 64, "BK": 8, "TM": 4, "TN": 4, "STAGES": 2},
    {"BM": 128, "BN": 64, "BK": 8, "TM": 8, "TN": 4, "PAD": 0},
    {"BM": 64, "BN": 128, "BK": 16, "TM": 4, "TN": 8, "STAGES": 3},
    {"BM": 32, "BN": 32, "BK": 8, "TM": 2, "TN": 2, "STAGES": 1, "PAD": 1, "VEC": 1},
)
"""Other shapes, for `candidates` and the corpus table: square, tall, wide and deep, small
(the warp tile derived, the rest at the defaults)."""


@dataclass(frozen=True)
class SmemTile(ValuesPass):
    name = "smem-tile"
    option_names = tuple(DEFAULTS)
    description = "stage operand tiles of a naive reduction nest in shared memory, TM x TN outputs per thread"
    falls_back = False
    structural: ClassVar[bool] = True
    """It changes how the work is divided among threads (outputs per thread and per block,
    staged slices, the launch), not a value of the code as written: a staged search explores
    it first, starting from its tuning space's defaults (the known-good shape)."""
    excludes = ("launch", "coarsen")
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
            else:
                blockers = self.requested(kernel, space_of(found, ctx))[0]
            out[kernel.name] = KernelAnalysis(kernel, blockers)
        return out

    def default_proposal(self, ctx: PassContext, analysis: KernelAnalysis) -> Proposal | None:
        """Only a requested shape (the options not given at the defaults: the shape of a
        hand-written SGEMM): whether tiling pays at the kernel's sizes is measured
        (`kxform tune`), never assumed."""
        if not self.config:
            return None
        config = resolve(_space(ctx, analysis.kernel), dict(self.config), ctx.hw)
        return Proposal.of(
            self.name, analysis.kernel.name, config, f"tile {_label(config)} (requested)", Provenance(evidence="rule")
        )

    def missed_reason(self, analysis: KernelAnalysis, ctx: PassContext | None = None) -> tuple[str, str]:
        return (
            "NoEvidence",
            "no tile shape was requested; it is chosen by measurement (kxform tune --pass "
            "smem-tile) or given (smem-tile{BM=128,BN=128,BK=8,TM=8,TN=8,STAGES=2})",
        )

    def candidates(self, ctx: PassContext, analysis: KernelAnalysis) -> list[Proposal]:
        """The defaults first (the known-good shape), then the other shapes of CANDIDATES."""
        space = _space(ctx, analysis.kernel)
        configs = [resolve(space, c, ctx.hw) for c in ({}, *CANDIDATES)]
        return [
            self.proposal_for(ctx, analysis, c, Provenance(evidence="rule"))
            for c in configs
            if space.is_valid(c, ctx.hw)
        ]

    def space(self, ctx: PassContext, analysis: KernelAnalysis) -> ParamSpace:
        return _space(ctx, analysis.kernel)

    def tuning_space(self, ctx: PassContext, analysis: KernelAnalysis) -> ParamSpace:
        """TUNED's values under the same constraints; the defaults, the known-good shape, are
        what a search that starts from the pass's defaults times first."""
        return space_of(_nest(ctx, analysis.kernel.name), ctx, tuned=True)

    def proposal_for(
        self, ctx: PassContext, analysis: KernelAnalysis, config: Config, provenance: Provenance | None = None
    ) -> Proposal:
        resolved = resolve(_space(ctx, analysis.kernel), config, ctx.hw)
        return Proposal.of(self.name, analysis.kernel.name, resolved, f"tile {_label(resolved)}", provenance)

    def check(self, ctx: PassContext, proposal: Proposal) -> list[CheckRecord]:
        nest = _nest(ctx, proposal.kernel)
        space = space_of(nest, ctx)
        config = resolve_proposal(space, proposal.options)
        records = [check_constraints(space, config, ctx.hw, _label)]
        text = edited_file(ctx, self, [proposal]).source.data.decode("utf-8")
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
            edits += _edits(ctx, nest, resolve_proposal(space_of(nest, ctx), proposal.options))
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
                    f"'{kernel.name}': every store to a stage is separated from every read of it by a "
                    "__syncthreads() (after the wait for its copies), both ways round the slice loop",
                )
            )
        return records

    def verify_policy(self, ctx: PassContext, proposal: Proposal, rewritten: SourceModel) -> VerifyPolicy:
        nest = _nest(ctx, proposal.kernel)
        config = resolve_proposal(space_of(nest, ctx), proposal.options)
        grid, block = emit.binding_exprs(nest)
        values = tuple((emit.macro(nest, k), int(v)) for k, v in config.items())
        original = {"BM": nest.block[1], "BN": nest.block[0], "TM": 1, "TN": 1}
        # a block the launcher's caller sizes: the original's BM and BN are the spec's block
        inputs = tuple(
            (emit.macro(nest, k), dim) for k, dim in (("BN", "block.x"), ("BM", "block.y")) if not original[k]
        )
        defaults = tuple((emit.macro(nest, k), v) for k, v in original.items() if v or k not in ("BM", "BN"))
        line = ctx.model.source.line_col(nest.launch.site.span.start)[0]
        binding = LaunchBinding(grid, block, None, values, defaults, f"{ctx.model.source.path}:{line}", inputs=inputs)
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
    return missing_barriers(ctx.analysis(AccessAnalysis, kernel), ctx.model)


def space_of(nest: Nest, ctx: PassContext, tuned: bool = False) -> ParamSpace:
    """The parameters with the constraints the rewrite needs and the hardware sets; `tuned`:
    the domains `kxform tune` times (TUNED), else every value the rewrite accepts."""
    line = f"{ctx.model.source.path}:{ctx.model.source.line_col(nest.loop.span.start)[0]}"
    elem = 4 if all(op.access.element == "float" for op in nest.operands) else 8
    rows = sum(1 for op in nest.operands if op.axis == "row")
    cols = len(nest.operands) - rows
    vec = ((4,) if tuned else (1, 4)) if elem == 4 else (1,)
    docs = {
        "BM": "output rows per block",
        "BN": "output columns per block",
        "BK": "reduction slice staged per step",
        "TM": "output rows per thread (registers)",
        "TN": "output columns per thread (registers)",
        "WM": "output rows per warp",
        "WN": "output columns per warp",
        "STAGES": "slices in flight (2 or more: the next slices load while one is summed)",
        "PAD": "shared-memory row padding (bank conflicts)",
        "VEC": "elements per staging load (4: one float4 where contiguous, whole and aligned)",
    }
    domains = {
        "BM": POW2,
        "BN": POW2,
        "BK": POW2[:7],
        "TM": POW2[:5],
        "TN": POW2[:5],
        "WM": POW2,
        "WN": POW2,
        "STAGES": (1, 2, 3, 4),
        "PAD": (0, 1, 2, 4, 8),
        "VEC": vec,
    }
    if tuned:
        domains.update({k: v for k, v in TUNED.items() if not (k == "VEC" and elem != 4)})
    defaults = {**DEFAULTS, "VEC": vec[-1]}
    params = tuple(Param.ints(k, domains[k], defaults[k], doc=docs[k], origin=line) for k in PARAMS)
    smem = f"{elem} * STAGES * BK * ({rows} * (BM + PAD) + {cols} * (BN + PAD))"
    rule = Constraint.parse
    constraints = (
        rule("BM % TM == 0 and BN % TN == 0", "a thread owns TM x TN outputs of the block's tile", line),
        rule("(BM // TM) * (BN // TN) <= hw.max_threads_per_block", "threads per block", line),
        rule("((BM // TM) * (BN // TN)) % hw.warp_size == 0", "whole warps (no idle lanes)", line),
        rule(
            "BM % WM == 0 and BN % WN == 0 and WM % TM == 0 and WN % TN == 0 and (WM // TM) * (WN // TN) == "
            "hw.warp_size",
            "warp tiles of WM x WN cover the block, one thread per TM x TN of a warp tile",
            line,
        ),
        rule(
            "BK % VEC == 0 and BM % VEC == 0 and BN % VEC == 0",
            "a staging step loads VEC elements of one slice row",
            line,
        ),
        rule("TM * TN <= 64", "accumulators fit in registers (ptxas checks the rest)", line),
        rule(
            f"{smem} <= hw.smem_per_block and {smem} <= {STATIC_SMEM}",
            "staged operand slices fit in "
            "shared memory (static __shared__ arrays: 48 KiB at most, whatever the opt-in limit)",
            line,
        ),
    )
    if tuned:
        constraints += tuple(rule(text, why, line) for text, why in TUNED_RULES)
    return ParamSpace(params, constraints)


def resolve(space: ParamSpace, given: Mapping[str, Any], hw: HwProfile) -> Config:
    """`given` completed to a point of `space`: the warp tile, where not given, derived from
    the tile and thread shapes (layout.warp_tile), everything else from the defaults."""
    config = space.resolve({k: v for k, v in given.items() if k not in ("WM", "WN")})
    derived = dict(zip(("WM", "WN"), warp_tile(config, hw.warp_size)))
    for name, value in derived.items():
        if name in given or value not in space.param(name).values:
            derived[name] = given.get(name, config[name])
    return space.resolve({**config, **derived})


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
    shape = shape_of(nest, config, ctx.hw)
    newline = model.source.newline
    edits: list[Edit] = []
    if shape.asynchronous and not any(i.target == emit.ASYNC_HEADER for i in model.includes):
        at = helper_offset(model, kernel.span.start)
        text = f"#include <{emit.ASYNC_HEADER}>  // __pipeline_memcpy_async (cp.async){newline}"
        edits.append(Edit(at, at, text, f"{origin}: include"))
    at = model.source.insertion_point(kernel.span.start)
    text = "".join(
        launch_site.define_parameter(model, kernel.span.start, emit.macro(nest, k), int(v), origin)[0].text
        for k, v in config.items()
    )
    if edits and edits[0].start == at:  # one insertion: the include, then the parameters
        edits = [Edit(at, at, edits[0].text + text, f"{origin}: include and parameters")]
    else:
        edits.append(Edit(at, at, text, f"{origin}: parameters"))
    indent = model.source.indent_at(kernel.span.start) + "    "
    edits.append(Edit(kernel.body.start, kernel.body.end, emit.body(shape, indent, newline), f"{origin}: body"))
    grid, block = emit.launch_texts(nest)
    edits.append(launch_site.replace_config(nest.launch.site, 0, grid, f"{origin}: grid"))
    edits.append(launch_site.replace_config(nest.launch.site, 1, block, f"{origin}: block"))
    return sorted(edits)


def _label(config: Config) -> str:
    return ",".join(f"{k}={v}" for k, v in config.items())


def threads(config: Config) -> int:
    return math.prod((int(config["BM"]) // int(config["TM"]), int(config["BN"]) // int(config["TN"])))


PASS = SmemTile
