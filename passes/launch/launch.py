"""`launch`: a kernel's block size, wherever its launch writes it, as a checked, verified parameter.

`--pass launch` follows each block dimension from the kernel's launches to where it is
written (a literal at the launch, a `dim3`, a constant local of the launcher, a macro of
an included header), makes it an overridable macro named after the kernel with the
original as its default, and makes the grids that divide by it follow it. At the
original values the rewrite verifies bit-exact. `--pass 'launch{GELU_FORWARD_BLOCK_X=128}'`
sets a value: it must meet the constraints derived from the kernel's code (kxform.passes
.launch.assumptions) and the hardware, fit ptxas's registers per block, and pass a
differential run against the original at its own launch before it is written.

Block sizes that are file-scope constants of the file are the tile pass's (it lifts them
with the kernel's own uses of them): one owner per value.
"""

from __future__ import annotations

import itertools
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from kxform.analysis.access import closure_names
from kxform.analysis.communication import Communication
from kxform.analysis.manager import AnalysisInput
from kxform.build import resources
from kxform.engine.edits import Edit
from kxform.engine.params import Config, Constraint, Param, ParamSpace, ParamValue
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
from kxform.engine.policy import VerifyPolicy
from kxform.engine.rewritten import edited_file
from kxform.engine.status import UNVERIFIABLE_LAUNCH
from kxform.errors import CheckFailed
from kxform.frontend.constants import evaluate_constants
from kxform.frontend.model import Function, SourceModel
from kxform.passes.launch import assumptions, policy
from kxform.passes.launch.bounds import ADDED_MIN_BLOCKS, RANGES, added_bound_name
from kxform.passes.launch.geometry import Geometry, constant_names, find_geometry
from kxform.passes.launch.rewrite import lift_edits

MAX_CANDIDATES = 24
POW2 = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024)
MIN_THREADS = 32
"""Candidates have at least a warp of threads (a smaller block leaves lanes idle)."""


@dataclass(frozen=True)
class Facts:
    """What the pass learned about one kernel: where its launches write the block, the
    parameter space with the kernel's constraints, and why it is refused (if it is). An
    analysis (kxform.analysis.manager): computed once per kernel and source version."""

    positional: ClassVar[bool] = True

    geometry: Geometry
    space: ParamSpace
    closure: frozenset[str]
    blockers: tuple[Blocker, ...]

    @classmethod
    def compute(cls, ctx: AnalysisInput, kernel: Function) -> Facts:
        return _compute_facts(ctx, kernel)


@dataclass(frozen=True)
class Launch(ValuesPass):
    name = "launch"
    defaults_as_written = True  # its space starts at the values the code has
    description = (
        "lift a kernel's block size, wherever its launch writes it, into a checked parameter; "
        "launch{NAME=VALUE} sets it"
    )
    falls_back = False

    @classmethod
    def describe_options(cls) -> list[str]:
        return [
            "NAME=VALUE for a kernel's block and launch-bounds parameters (KERNEL_BLOCK_X, _Y, _Z, "
            "KERNEL_MAX_THREADS, KERNEL_MIN_BLOCKS: kxform inspect --pass launch lists them with their "
            "constraints); none: lift at the original values"
        ]

    # -- analyse and propose -----------------------------------------------------------

    def analyse(self, ctx: PassContext) -> dict[str, KernelAnalysis]:
        facts = {k.name: _facts(ctx, k.name) for k in ctx.model.kernels}
        known = {n for f in facts.values() for n in f.space.names}
        out = {}
        for kernel in ctx.model.kernels:
            fact = facts[kernel.name]
            refused, config = self.requested(kernel, fact.space, known)
            blockers = [*fact.blockers, *refused]
            if not blockers and not fact.geometry.dims:
                blockers.append(
                    Blocker(
                        "NoBlockSize",
                        f"every launch of '{kernel.name}' uses a block of one thread per dimension",
                        kernel.span.start,
                    )
                )
            defaults = {**fact.geometry.all_defaults(), **_added_defaults(fact)}
            done = (
                bool(fact.geometry.dims)
                and fact.geometry.lifted
                and all(config.get(n, v) == v for n, v in defaults.items())
            )
            out[kernel.name] = KernelAnalysis(kernel, tuple(blockers), already_applied=done)
        return out

    def default_proposal(self, ctx: PassContext, analysis: KernelAnalysis) -> Proposal | None:
        fact = _facts(ctx, analysis.kernel.name)
        config = self.requested(analysis.kernel, fact.space)[1]
        defaults = {**fact.geometry.all_defaults(), **_added_defaults(fact)}
        changed = {n: config[n] for n, v in defaults.items() if config.get(n, v) != v}
        why = (
            f"set {', '.join(f'{k}={v}' for k, v in changed.items())} (requested)"
            if changed
            else f"lift the block size {', '.join(f'{n} ({v})' for n, v in defaults.items())} into parameters"
        )
        return Proposal.of(self.name, analysis.kernel.name, changed, why)

    def candidates(self, ctx: PassContext, analysis: KernelAnalysis) -> list[Proposal]:
        """Valid block sizes other than the original over powers of two, nearest first."""
        fact = _facts(ctx, analysis.kernel.name)
        space, dims = fact.space, fact.geometry.dims
        defaults = space.defaults()
        names = [d.name for d in dims]
        points = [
            dict(zip(names, values)) for values in itertools.product(*(sorted(set(POW2) | {d.value}) for d in dims))
        ]
        for point in points:  # the launch bounds follow the block where it outgrows them
            for bound in fact.geometry.bounds:
                point[bound.name] = (
                    max(bound.value, math.prod(point[n] for n in names)) if bound.kind == "MAX_THREADS" else bound.value
                )
            point.update(_added_defaults(fact))
        valid = [
            p
            for p in points
            if p != defaults and math.prod(int(p[n]) for n in names) >= MIN_THREADS and space.is_valid(p, ctx.hw)
        ]
        callers = {d.name for d in dims if d.caller}
        reference = {n: int(v) or 256 for n, v in defaults.items()}  # a caller's block size: nearest 256 first
        measured = [n for n in space.names if int(defaults[n]) or n in callers]  # not an added bound's 0 (none)
        valid.sort(
            key=lambda p: (
                sum(abs(math.log2(max(1, int(p[n])) / reference[n])) for n in measured),
                sorted(p.items()),
            )
        )
        return [self.proposal_for(ctx, analysis, p, Provenance(evidence="rule")) for p in valid[:MAX_CANDIDATES]]

    def space(self, ctx: PassContext, analysis: KernelAnalysis) -> ParamSpace:
        fact = _facts(ctx, analysis.kernel.name)
        return fact.space

    def tuning_space(self, ctx: PassContext, analysis: KernelAnalysis) -> ParamSpace:
        """The block sizes worth timing (powers of two and the original), at least a warp of
        threads per block: a smaller block leaves lanes of every warp idle."""
        space = super().tuning_space(ctx, analysis)
        if not space.params:
            return space
        geometry = _facts(ctx, analysis.kernel.name).geometry
        block = [n for n in space.names if n in geometry.names]
        floor = _unless_caller(
            Constraint.parse(
                f"{' * '.join(block)} >= {MIN_THREADS}",
                "at least a warp of threads per block (a smaller one leaves lanes idle)",
            ),
            geometry,
        )
        return ParamSpace(space.params, (*space.constraints, floor))

    def proposal_for(
        self, ctx: PassContext, analysis: KernelAnalysis, config: Config, provenance: Provenance | None = None
    ) -> Proposal:
        fact = _facts(ctx, analysis.kernel.name)
        resolved = fact.space.resolve(config)
        changed = {k: v for k, v in resolved.items() if v != fact.space.param(k).default}
        return Proposal.of(
            self.name, analysis.kernel.name, changed, f"block size {fact.space.label(resolved)}", provenance
        )

    def missed_reason(self, analysis: KernelAnalysis) -> tuple[str, str]:
        return ("NoBlockSize", "nothing to lift")

    # -- check, edit, verify ------------------------------------------------------------

    def check(self, ctx: PassContext, proposal: Proposal) -> list[CheckRecord]:
        fact = _facts(ctx, proposal.kernel)
        config = resolve_proposal(fact.space, proposal.options)
        records = [check_constraints(fact.space, config, ctx.hw)]
        if config == fact.space.defaults():
            return records
        new = edited_file(ctx, self, [proposal])
        if policy.launch_binding(ctx.model, new.model, fact.geometry, config) is None:
            raise CheckFailed(
                "launch",
                f"the launch of '{proposal.kernel}' reads values the kernel does not receive, "
                "so the rewritten launch cannot be verified",
                key=UNVERIFIABLE_LAUNCH,
            )
        text = new.source.data.decode("utf-8")
        block = tuple(d.name for d in fact.geometry.dims)
        ints = {k: int(v) for k, v in config.items()}
        records.append(
            resources.check_resources(text, ctx.model.source.path, proposal.kernel, block, ints, ctx.hw, ctx.toolchain)
        )
        return records

    def edit(self, ctx: PassContext, proposals: Sequence[Proposal]) -> list[Edit]:
        edits: list[Edit] = []
        for proposal in proposals:
            fact = _facts(ctx, proposal.kernel)
            edits += lift_edits(ctx.model, fact.geometry, fact.space.resolve(proposal.options))
        return edits

    def verify_policy(self, ctx: PassContext, proposal: Proposal, rewritten: SourceModel) -> VerifyPolicy:
        fact = _facts(ctx, proposal.kernel)
        communicates = ctx.analysis(Communication, _kernel(ctx, proposal.kernel)).found
        return policy.verify_policy(
            ctx.model, rewritten, fact.geometry, communicates, fact.space.resolve(proposal.options)
        )

    def describe(self, ctx: PassContext, analysis: KernelAnalysis) -> dict[str, Any]:
        fact = _facts(ctx, analysis.kernel.name)
        line = ctx.model.source.line_col
        data = super().describe(ctx, analysis)
        data["status"] = "lifted" if analysis.already_applied else "liftable" if analysis.applicable else "refused"
        data.update(fact.space.to_json())
        data["launches"] = [
            {"line": line(lc.site.span.start)[0], "grid": list(lc.grid), "block": list(lc.block)}
            for lc in fact.geometry.launches
        ]
        data["written"] = [
            f"{d.name}: {p.kind} '{p.text}' (line {line(p.span.start)[0]})"
            for d in fact.geometry.dims
            for p in d.places
        ]
        data["checks"] = [resources.RULE] if fact.geometry.dims else []
        return data


def _kernel(ctx: PassContext, name: str) -> Function:
    return next(k for k in ctx.model.kernels if k.name == name)


def _facts(ctx: PassContext, kernel_name: str) -> Facts:
    """The kernel's geometry, space and blockers (through the context's analysis manager)."""
    return ctx.analysis(Facts, _kernel(ctx, kernel_name))


def _compute_facts(ctx: AnalysisInput, kernel: Function) -> Facts:
    from kxform.build.toolchain import Toolchain

    model = ctx.model
    kernel_name = kernel.name
    args = tuple((ctx.toolchain or Toolchain()).libclang_args(model.source.path))
    constants = constant_names(model, kernel)
    values = evaluate_constants(model.source.path, model.source.data, constants, list(args)) if constants else {}
    geometry = find_geometry(model, kernel, values)
    closure = closure_names(model, kernel)
    constraints, refusals = assumptions.derive(model, geometry, closure)
    blockers = tuple(Blocker(r.key, r.message, r.offset) for r in (*geometry.refusals, *refusals))
    params = tuple(
        Param.int_range(
            d.name,
            0 if d.caller else 1,
            1024,
            d.value,
            doc=f"block.{'xyz'[d.axis]} of '{kernel_name}'"
            + (f" (0: the '{d.caller}' its launcher's callers pass)" if d.caller else ""),
            origin=f"{model.source.path}:{d.line}",
        )
        for d in geometry.dims
    )
    constraints = [_unless_caller(c, geometry) for c in constraints]
    params += tuple(
        Param.int_range(
            b.name,
            RANGES[b.kind][0],
            max(RANGES[b.kind][1], b.value),
            b.value,
            doc=f"__launch_bounds__ {b.kind.lower()} of '{kernel_name}'",
            origin=f"{model.source.path}:{b.line}",
        )
        for b in geometry.bounds
    )
    if _may_add_bounds(model, kernel, geometry):
        params += (
            Param.ints(
                added_bound_name(kernel_name),
                ADDED_MIN_BLOCKS,
                0,
                doc=f"__launch_bounds__ added to '{kernel_name}' (its block, this many blocks per SM; 0: none)",
                origin=f"{model.source.path}:{model.source.line_col(kernel.span.start)[0]}",
            ),
        )
    known = {p.name for p in params}
    space = ParamSpace(params, tuple(c for c in constraints if c.params <= known))
    return Facts(geometry, space if not blockers else ParamSpace(), closure, blockers)


def _unless_caller(constraint: Constraint, geometry: Geometry) -> Constraint:
    """A constraint on a block size the callers pass holds where the parameter keeps their
    value (0): what they pass is theirs to keep valid."""
    callers = [d.name for d in geometry.dims if d.caller and d.name in constraint.params]
    if not callers:
        return constraint
    kept = " or ".join(f"{n} == 0" for n in callers)
    return Constraint.parse(f"{kept} or ({constraint.text})", constraint.reason, constraint.origin)


def _may_add_bounds(model: SourceModel, kernel: Function, geometry: Geometry) -> bool:
    """Launch bounds may be added where the kernel has none, every launch of the file takes
    the lifted block (the attribute's maximum), and the block's names can be defined before
    the kernel (a name already lifted must be defined there)."""
    if (
        geometry.bounds
        or not geometry.dims
        or any(d.caller for d in geometry.dims)
        or re.search(rb"__launch_bounds__", model.source.data[kernel.span.start : kernel.body.start])
    ):
        return False
    for dim in geometry.dims:
        if len(dim.places) != len(geometry.launches):
            return False
        macro = model.macro(dim.name) if dim.lifted else None
        if dim.lifted and (macro is None or macro.span.start > kernel.span.start):
            return False
    return True


def _added_defaults(fact: Facts) -> dict[str, ParamValue]:
    """The added launch-bounds parameter at its default (0: none), where the space has it."""
    return {p.name: p.default for p in fact.space.params if p.name == added_bound_name(fact.geometry.kernel.name)}


PASS = Launch
