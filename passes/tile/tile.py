"""`tile`: lift a kernel's hard-coded tile sizes into checked, verified parameters.

`--pass tile` finds the constants a kernel uses as tile sizes (shared extents, loop bounds
and steps, index scales, block dimensions, unroll factors), refuses those that are also
something else, and lifts the rest: macros get an `#ifndef` guard (a build or a tuner can
override them, every launch stays consistent), `constexpr`s are already parameters. At
the original values that is the whole rewrite, and it verifies bit-exact.

`--pass 'tile{TILE=32}'` also sets values. A configuration must meet the constraints
derived from the code and the hardware profile (`kxform inspect` lists them), must not
spill or exceed the registers per block (ptxas), and must pass a differential run
against the original at its own launch before it is written.
"""

from __future__ import annotations

import functools
import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from kxform.analysis import AccessAnalysis
from kxform.analysis.manager import AnalysisInput
from kxform.engine.edits import Edit
from kxform.engine.params import Config, ParamSpace
from kxform.engine.pass_api import (
    Blocker,
    CheckRecord,
    KernelAnalysis,
    PassContext,
    Proposal,
    Provenance,
    UNKNOWN_PARAMETER,
    ValuesPass,
    check_constraints,
    resolve_proposal,
)
from kxform.engine.policy import VerifyPolicy
from kxform.engine.rewritten import edited_file
from kxform.engine.status import UNVERIFIABLE_LAUNCH
from kxform.errors import CheckFailed
from kxform.frontend.constants import evaluate_constants, fold_constants
from kxform.frontend.model import Function, SourceModel
from kxform.frontend.queries import constant_defs
from kxform.engine.remarks import RemarkKind
from kxform.build import resources
from kxform.passes.tile import policy
from kxform.passes.tile.constraints import block_exprs, derive_space, preferred
from kxform.passes.tile.lift import lift_edits
from kxform.passes.tile.quantities import Tiling, find_tiling

MAX_CANDIDATES = 24


@dataclass(frozen=True)
class Tile(ValuesPass):
    name = "tile"
    defaults_as_written = True  # its space starts at the values the code has
    description = "lift hard-coded tile sizes into checked, verified parameters; tile{NAME=VALUE} sets them"
    falls_back = False  # lifting at the original values has no alternative worth guessing

    @classmethod
    def describe_options(cls) -> list[str]:
        return [
            "NAME=VALUE for a kernel's lifted parameters (kxform inspect --pass tile lists them with their "
            "constraints); none: lift at the original values"
        ]

    # -- analyse and propose -----------------------------------------------------------

    def analyse(self, ctx: PassContext) -> dict[str, KernelAnalysis]:
        out = {}
        spaces = {k.name: _facts(ctx, k.name)[1] for k in ctx.model.kernels}
        known = {n for s in spaces.values() for n in s.names}
        unknown = sorted(set(dict(self.config)) - known)
        for kernel in ctx.model.kernels:
            tiling, space = _facts(ctx, kernel.name)
            blockers = [Blocker(r.key, r.message, r.offset) for r in tiling.refusals if r.name is None]
            refused, config = self.requested(kernel, space, known)
            lifted = next((r for r in tiling.refusals if unknown and r.name == unknown[0]), None)
            if lifted is not None:  # the constant is the kernel's, and not lifted: say why
                refused = tuple(b for b in refused if b.key != UNKNOWN_PARAMETER)
                blockers.append(Blocker(lifted.key, f"{unknown[0]} is not lifted: {lifted.message}", lifted.offset))
            blockers += refused
            if not tiling.quantities and not blockers:
                blockers = [Blocker(r.key, r.message, r.offset) for r in tiling.refusals] or [
                    Blocker(
                        "NoTileSize",
                        f"'{kernel.name}' uses no file-scope integer constant as a tile size (its block "
                        "size is a run-time value or a literal at the launch)",
                        kernel.span.start,
                    )
                ]
            if not blockers:
                for refusal in (r for r in tiling.refusals if r.name is not None):
                    ctx.remark(
                        RemarkKind.ANALYSIS,
                        self.name,
                        refusal.key,
                        refusal.offset,
                        kernel.name,
                        f"tile: {refusal.name} of '{kernel.name}' is not lifted: {refusal.message}",
                    )
            done = (
                bool(tiling.quantities)
                and all(q.guarded or q.kind != "macro" for q in tiling.quantities)
                and all(config.get(q.name, q.value) == q.value for q in tiling.quantities)
            )
            out[kernel.name] = KernelAnalysis(kernel, tuple(blockers), already_applied=done)
        return out

    def default_proposal(self, ctx: PassContext, analysis: KernelAnalysis) -> Proposal | None:
        tiling, space = _facts(ctx, analysis.kernel.name)
        config = self.requested(analysis.kernel, space)[1]
        changed = {q.name: config[q.name] for q in tiling.quantities if config.get(q.name, q.value) != q.value}
        if changed:
            why = f"set {', '.join(f'{k}={v}' for k, v in changed.items())} (requested)"
        else:
            why = f"lift {', '.join(f'{q.name} ({q.value})' for q in tiling.quantities)} into parameters"
        return Proposal.of(self.name, analysis.kernel.name, changed, why)

    def candidates(self, ctx: PassContext, analysis: KernelAnalysis) -> list[Proposal]:
        """Valid configurations other than the original over powers of two, nearest first."""
        tiling, space = _facts(ctx, analysis.kernel.name)
        defaults = space.defaults()
        points = (
            dict(zip(space.names, values)) for values in itertools.product(*(preferred(q) for q in tiling.quantities))
        )
        valid = [p for p in points if p != defaults and space.is_valid(p, ctx.hw)]
        valid.sort(key=lambda p: (sum(abs(math.log2(p[n] / defaults[n])) for n in space.names), sorted(p.items())))
        return [
            self.proposal_for(ctx, analysis, p, Provenance(evidence="rule"))
            for p in valid[:MAX_CANDIDATES]
            if tiling.quantities
        ]

    def space(self, ctx: PassContext, analysis: KernelAnalysis) -> ParamSpace:
        return _facts(ctx, analysis.kernel.name)[1]

    def proposal_for(
        self, ctx: PassContext, analysis: KernelAnalysis, config: Config, provenance: Provenance | None = None
    ) -> Proposal:
        space = _facts(ctx, analysis.kernel.name)[1]
        resolved = space.resolve(config)
        changed = {k: v for k, v in resolved.items() if v != space.param(k).default}
        return Proposal.of(
            self.name, analysis.kernel.name, changed, f"configuration {space.label(resolved)}", provenance
        )

    def missed_reason(self, analysis: KernelAnalysis, ctx: PassContext | None = None) -> tuple[str, str]:
        return ("NoTileSize", "nothing to lift")

    # -- check, edit, verify ------------------------------------------------------------

    def check(self, ctx: PassContext, proposal: Proposal) -> list[CheckRecord]:
        tiling, space = _facts(ctx, proposal.kernel)
        config = resolve_proposal(space, proposal.options)
        records = [check_constraints(space, config, ctx.hw)]
        if config == space.defaults():
            return records
        if policy.launch_binding(ctx.model, tiling, config) is None:
            raise CheckFailed(
                "launch",
                f"the launch of '{proposal.kernel}' reads values the kernel does not receive, "
                "so the rewritten launch cannot be verified",
                key=UNVERIFIABLE_LAUNCH,
            )
        text = edited_file(ctx, self, [proposal]).source.data.decode("utf-8")
        block = block_exprs(tiling)
        ints = {k: int(v) for k, v in config.items()}
        records.append(
            resources.check_resources(text, ctx.model.source.path, proposal.kernel, block, ints, ctx.hw, ctx.toolchain)
        )
        return records

    def edit(self, ctx: PassContext, proposals: Sequence[Proposal]) -> list[Edit]:
        edits: list[Edit] = []
        for proposal in proposals:
            tiling, space = _facts(ctx, proposal.kernel)
            edits += lift_edits(ctx.model, tiling, space.resolve(proposal.options))
        return edits

    def verify_policy(self, ctx: PassContext, proposal: Proposal, rewritten: SourceModel) -> VerifyPolicy:
        tiling, space = _facts(ctx, proposal.kernel)
        analyses = [ctx.analysis(AccessAnalysis, f) for f in ctx.model.functions if f.name in tiling.closure]
        return policy.verify_policy(ctx.model, tiling, space.resolve(proposal.options), analyses)

    def describe(self, ctx: PassContext, analysis: KernelAnalysis) -> dict[str, Any]:
        tiling, space = _facts(ctx, analysis.kernel.name)
        line = ctx.model.source.line_col
        data = super().describe(ctx, analysis)
        data["status"] = "lifted" if analysis.already_applied else "liftable" if analysis.applicable else "refused"
        data.update(space.to_json())
        data["not_lifted"] = [
            f"{r.name}: {r.key}: {r.message}"
            for r in tiling.refusals
            if r.name is not None and f"{r.key}: {r.message}" not in data["reasons"]
        ]
        data["launches"] = [
            {"line": line(lc.site.span.start)[0], "grid": list(lc.grid), "block": list(lc.block), "shared": lc.shared}
            for lc in tiling.launches
        ]
        data["checks"] = [resources.RULE] if tiling.quantities else []
        return data


@functools.lru_cache(maxsize=64)
def _evaluated(
    path: str, data: bytes, names: tuple[str, ...], texts: tuple[str, ...], args: tuple[str, ...]
) -> dict[str, int | None]:
    values = evaluate_constants(path, data, names, list(args))
    folded = fold_constants(dict(zip(names, texts)))
    return {n: values.get(n) if values.get(n) is not None else folded.get(n) for n in names}


@dataclass(frozen=True)
class TileFacts:
    """The kernel's tiling and parameter space: an analysis (kxform.analysis.manager),
    computed once per kernel and source version."""

    positional: ClassVar[bool] = True

    tiling: Tiling
    space: ParamSpace

    @classmethod
    def compute(cls, ctx: AnalysisInput, kernel: Function) -> TileFacts:
        from kxform.build.toolchain import Toolchain

        model = ctx.model
        args = tuple((ctx.toolchain or Toolchain()).libclang_args(model.source.path))
        defs = [d for d in constant_defs(model) if d.function is None]
        values = _evaluated(
            model.source.path, model.source.data, tuple(d.name for d in defs), tuple(d.text for d in defs), args
        )
        tiling = find_tiling(model, kernel, values)
        return cls(tiling, derive_space(model, tiling))


def _facts(ctx: PassContext, kernel: str) -> tuple[Tiling, ParamSpace]:
    """The kernel's tiling and space (through the context's analysis manager)."""
    facts = ctx.analysis(TileFacts, next(k for k in ctx.model.kernels if k.name == kernel))
    return facts.tiling, facts.space


PASS = Tile
