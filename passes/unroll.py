"""`unroll`: the `#pragma unroll` factor of each loop of a kernel, as a tunable parameter.

Every counted `for` loop that starts its own line has one parameter, `loop<N>` (the
N-th such loop of the kernel, in source order: a name the pass's own pragmas do not
shift, unlike a line number): `auto` (no pragma: the compiler decides), a factor 1, 2, 4, ...
up to its trip count where the analysis knows it (16 otherwise), or `full` (a bare
`#pragma unroll`) where the trip count is a compile-time constant. The default is the
loop as written. Unrolling never reorders arithmetic, so the rewrite must verify
bit-exact. No evidence, no rewrite: without a requested value (`unroll{L12=4}`, or
`unroll{factor=4}` for every loop) the pass proposes nothing; `kxform tune` searches
its space and keeps what measures faster.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from kxform.analysis import AccessAnalysis, Loop
from kxform.engine.edits import Edit
from kxform.engine.params import Config, Param, ParamSpace, ParamValue
from kxform.engine.pass_api import (
    BAD_VALUE,
    Blocker,
    Pass,
    CheckRecord,
    KernelAnalysis,
    PassContext,
    Proposal,
    Provenance,
    ValuesPass,
    resolve_proposal,
)
from kxform.engine.policy import EXACT, VerifyPolicy
from kxform.engine.rewrite import set_unroll
from kxform.errors import UsageError
from kxform.frontend.model import Function, SourceModel

AUTO, FULL = "auto", "full"
MAX_FACTOR = 16
"""Largest factor offered for a loop whose trip count is not known."""


@dataclass(frozen=True)
class Unroll(ValuesPass):
    name = "unroll"
    defaults_as_written = True  # its space starts at the values the code has
    description = "set the #pragma unroll factor of a kernel's loops (a parameter per loop; bit-exact)"
    falls_back = False  # no factor is better without measuring it
    excludes = ("smem-tile", "rows", "coarsen")
    """Passes that restructure the loops: its space numbers the loops of the code as
    written, so in a pipeline after one of them its points would name other loops."""

    @classmethod
    def from_options(cls, options: Mapping[str, str | ParamValue]) -> Pass:
        """`factor` is checked here, before any kernel is read: `auto`, `full` or a positive
        integer (what a loop offers is checked against each loop's space)."""
        if "factor" in options:
            factor = str(options["factor"])
            if factor not in (AUTO, FULL) and not (factor.isdigit() and int(factor) > 0):
                raise UsageError(
                    f"pass unroll: factor={factor!r:.40}: expected {AUTO}, {FULL} or a positive integer (1, 2, 4, ...)"
                )
        return super().from_options(options)

    @classmethod
    def describe_options(cls) -> list[str]:
        return [
            "loop<N>=auto|full|1|2|4|... for the N-th loop (kxform inspect --pass unroll lists them), or "
            "factor=VALUE for every loop; none: nothing is proposed"
        ]

    # -- analyse and propose -----------------------------------------------------------

    def analyse(self, ctx: PassContext) -> dict[str, KernelAnalysis]:
        out = {}
        spaces = {k.name: self.space(ctx, KernelAnalysis(k)) for k in ctx.model.kernels}
        known = {n for space in spaces.values() for n in space.names}
        for kernel in ctx.model.kernels:
            space = spaces[kernel.name]
            blockers = (
                [
                    Blocker(
                        "NoUnrollableLoop",
                        f"'{kernel.name}' has no counted for loop that starts its own line",
                        kernel.span.start,
                    )
                ]
                if not len(space)
                else []
            )
            refused, wanted = self.requested(kernel, space, known)
            blockers += refused
            done = bool(wanted) and all(space.param(k).default == v for k, v in wanted.items())
            out[kernel.name] = KernelAnalysis(kernel, tuple(blockers), already_applied=done)
        return out

    def requested(
        self, kernel: Function, space: ParamSpace, known: Collection[str] | None = None
    ) -> tuple[tuple[Blocker, ...], Config]:
        """`factor=F` stands for F at every loop that admits it (a loop named on its own keeps its value)."""
        given = dict(self.config)
        factor = given.pop("factor", None)
        if factor is not None:
            fitting = {p.name: factor for p in space if p.name not in given and factor in (p.values or ())}
            if len(space) and not fitting and not set(given) & set(space.names):  # refused, not ignored
                offered = sorted({str(v) for p in space for v in p.values}, key=lambda v: (not v.isdigit(), len(v), v))
                why = f"factor={factor}: no loop of this kernel offers it ({', '.join(offered)})"
                return (Blocker(BAD_VALUE, why, kernel.span.start),), {}
            given.update(fitting)
        return super(Unroll, replace(self, config=tuple(given.items()))).requested(kernel, space, known)

    def default_proposal(self, ctx: PassContext, analysis: KernelAnalysis) -> Proposal | None:
        space = self.space(ctx, analysis)
        changed = {k: v for k, v in self.requested(analysis.kernel, space)[1].items() if v != space.param(k).default}
        if not changed:
            return None
        return Proposal.of(
            self.name,
            analysis.kernel.name,
            changed,
            f"set {', '.join(f'{k}={v}' for k, v in changed.items())} (requested)",
        )

    def candidates(self, ctx: PassContext, analysis: KernelAnalysis) -> list[Proposal]:
        return []

    def missed_reason(self, analysis: KernelAnalysis, ctx: PassContext | None = None) -> tuple[str, str]:
        return (
            "NoEvidence",
            "no unroll factor was requested; factors are chosen by measurement "
            "(kxform tune) or given (unroll{loop1=4})",
        )

    def space(self, ctx: PassContext, analysis: KernelAnalysis) -> ParamSpace:
        loops = eligible_loops(ctx, analysis.kernel)
        return ParamSpace(tuple(_param(ctx, n, loop) for n, loop in enumerate(loops, 1)))

    def proposal_for(
        self, ctx: PassContext, analysis: KernelAnalysis, config: Config, provenance: Provenance | None = None
    ) -> Proposal:
        space = self.space(ctx, analysis)
        resolved = space.resolve(config)
        changed = {k: v for k, v in resolved.items() if v != space.param(k).default}
        return Proposal.of(
            self.name, analysis.kernel.name, changed, f"configuration {space.label(resolved)}", provenance
        )

    # -- check, edit, verify ------------------------------------------------------------

    def check(self, ctx: PassContext, proposal: Proposal) -> list[CheckRecord]:
        kernel = _kernel(ctx, proposal.kernel)
        space = self.space(ctx, KernelAnalysis(kernel))
        config = resolve_proposal(space, proposal.options)
        return [CheckRecord("factors", True, f"{space.label(config)}: each factor within its loop's trip count")]

    def edit(self, ctx: PassContext, proposals: Sequence[Proposal]) -> list[Edit]:
        edits = []
        for proposal in proposals:
            kernel = _kernel(ctx, proposal.kernel)
            loops = {f"loop{n}": loop for n, loop in enumerate(eligible_loops(ctx, kernel), 1)}
            for key, value in proposal.options.items():
                factor = None if value == AUTO else "" if value == FULL else str(value)
                edits.append(set_unroll(ctx.model, loops[key], factor, f"unroll: {kernel.name}: {key}"))
        return edits

    def verify_policy(self, ctx: PassContext, proposal: Proposal, rewritten: SourceModel) -> VerifyPolicy:
        """Unrolling repeats the body; it never reorders the arithmetic: bit-exact."""
        return VerifyPolicy(compare=EXACT)

    def describe(self, ctx: PassContext, analysis: KernelAnalysis) -> dict[str, Any]:
        data = super().describe(ctx, analysis)
        data.update(self.space(ctx, analysis).to_json())
        return data


def eligible_loops(ctx: PassContext, kernel: Function) -> tuple[Loop, ...]:
    """Counted `for` loops of the kernel that start their line (a pragma can precede them)."""
    source = ctx.model.source
    return tuple(
        loop
        for loop in ctx.analysis(AccessAnalysis, kernel).loops
        if loop.kind == "for"
        and loop.var
        and loop.trip != 0
        and not source.data[source.line_start(loop.span.start) : loop.span.start].strip()
    )


def _param(ctx: PassContext, number: int, loop: Loop) -> Param:
    trip = loop.trip
    named = _named_bounds(ctx, loop)
    # a trip count through a name (`k < TM`) holds only while the name keeps its value: in a
    # composed tune the tile pass changes it, so the factors must not depend on it (a factor
    # past the trip count is a legal hint that unrolls the loop fully: the same arithmetic)
    limit = trip if trip is not None and not named else MAX_FACTOR
    factors = [str(2**i) for i in range(6) if 2**i <= limit]
    current = AUTO if loop.pragma is None else FULL if loop.pragma == "" else loop.pragma
    values = [AUTO, *factors] + ([FULL] if trip is not None else [])
    if current not in values:
        values.append(current)  # a factor spelled through a name (`#pragma unroll TM`) stays a choice
    extent = f"{trip} iterations" if trip is not None else "trip count not known"
    if trip is not None and named:
        extent += f" through {', '.join(named)} (factors up to {MAX_FACTOR} whatever its value)"
    return Param.enum(
        f"loop{number}", values, current, doc=f"line {_line(ctx, loop)}: `for ({loop.var} ...)`, {extent}"
    )


_NOT_NAMES = frozenset({"int", "unsigned", "long", "short", "char", "size_t", "const", "auto", "signed", "sizeof"})


def _named_bounds(ctx: PassContext, loop: Loop) -> tuple[str, ...]:
    """The names other than the loop variable its header reads (macros, constants)."""
    text = ctx.model.source.data[loop.header.start : loop.header.end].decode("utf-8", "replace")
    start = re.search(r"\bfor\s*\(", text)
    clauses = text[start.end() : text.rfind(")")] if start else ""
    names = dict.fromkeys(re.findall(r"\b[A-Za-z_]\w*\b", clauses))
    return tuple(n for n in names if n != loop.var and n not in _NOT_NAMES)


def _line(ctx: PassContext, loop: Loop) -> int:
    return ctx.model.source.line_col(loop.span.start)[0]


def _kernel(ctx: PassContext, name: str) -> Function:
    return next(k for k in ctx.model.kernels if k.name == name)


PASS = Unroll
