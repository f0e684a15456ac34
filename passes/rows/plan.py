"""Which loops of a kernel the `rows` pass shares out over a row's lanes, which
reductions it makes parallel, and why it refuses a kernel (each reason with its line).

A kernel qualifies when each thread runs, at the top level of its body, counted `for`
loops whose iterations are independent (kxform.analysis: no carried dependence other than
recognised reductions, no barrier, no exit, affine bound and step), counting up by a
constant step under `<` or `<=`; every reduction they carry uses an operator with a known
identity (+, max, min) on an element type a shuffle moves; no scalar other than those
reductions is assigned in such a loop and read after it (each lane would hold its own
value); the kernel has no atomics, barriers, shuffles or shared memory already (its
threads communicate in ways the pass does not model) and no update in place of global
memory outside the loops (G lanes would each apply it). Writes outside the loops store
the same value from every lane of a row (reductions are broadcast), which is well defined.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import ClassVar

from kxform.analysis import AccessAnalysis, Affine, Loop
from kxform.analysis.communication import Communication
from kxform.analysis.records import Reduction
from kxform.analysis.manager import AnalysisInput
from kxform.engine.pass_api import Blocker
from kxform.engine.rewrite import in_block
from kxform.frontend.model import Function
from kxform.passes.rows.reduce import OPERATORS, TYPES

LANE = "rows_lane"
"""The local the rewrite declares at the kernel's entry: the thread's lane within its row."""
_ASSIGN_RE = re.compile(
    rb"(?<![\w.\]>])([A-Za-z_]\w*)\s*(?:[-+*/%&|^]|<<|>>)?=(?!=)|(?:\+\+|--)\s*([A-Za-z_]\w*)|"
    rb"([A-Za-z_]\w*)\s*(?:\+\+|--)"
)


@dataclass(frozen=True)
class Plan:
    """The loops to distribute (program order) and the reductions to combine after each: an
    analysis (kxform.analysis.manager), computed once per kernel and source version."""

    positional: ClassVar[bool] = True

    loops: tuple[Loop, ...]
    reductions: tuple[Reduction, ...]
    blockers: tuple[Blocker, ...]
    applied: bool = False

    def reductions_of(self, loop: Loop) -> tuple[Reduction, ...]:
        return tuple(r for r in self.reductions if r.loop == loop.id)

    @classmethod
    def compute(cls, ctx: AnalysisInput, kernel: Function) -> Plan:
        return plan(ctx, kernel)


def plan(ctx: AnalysisInput, kernel: Function) -> Plan:
    data = ctx.model.source.data
    body = data[kernel.body.start : kernel.body.end]
    if re.search(rb"\b" + LANE.encode() + rb"\b", body):
        return Plan((), (), (), applied=True)
    analysis = ctx.analysis(AccessAnalysis, kernel)
    blockers: list[Blocker] = []

    def refuse(key: str, message: str, offset: int) -> None:
        blockers.append(Blocker(key, f"{message} (line {ctx.model.source.line_col(offset)[0]})", offset))

    for access in analysis.accesses:
        if access.atomic:
            refuse(
                "Atomic",
                f"'{access.text}' is an atomic update: its order over threads is not the pass's to change",
                access.span.start,
            )
        elif access.update_op and access.space == "global" and not access.loops:
            op = access.update_op if access.update_op.endswith("=") else access.update_op + "="
            refuse(
                "UpdateOutsideLoop",
                f"'{access.text} {op}' updates global memory outside the "
                "row's loops: each of the row's lanes would apply it",
                access.span.start,
            )
    found = ctx.analysis(Communication, kernel).found
    if found and not blockers:
        refuse(
            "Communicates",
            f"the threads already communicate ({found.what}): the pass does not model it",
            found.offset,
        )
    top = [loop for loop in analysis.loops if loop.parent is None]
    if not top:
        refuse("NoRowLoop", f"'{kernel.name}' has no loop for a row's lanes to share", kernel.span.start)
    for loop in top:
        if not in_block(ctx.model, loop):
            refuse(
                "LoopShape",
                f"the loop over '{loop.var or loop.kind}' is not a statement of a block (`if (...) for (...)` "
                "without braces): the combine the rewrite adds after it would run outside the `if`",
                loop.span.start,
            )
        for reason in _loop_blockers(loop):
            refuse(
                "Dependence" if reason in loop.carried else "LoopShape",
                f"the loop over '{loop.var or loop.kind}' cannot be shared out: {reason}",
                loop.span.start,
            )
    reductions = tuple(r for loop in top for r in loop.reductions if r.loop == loop.id)
    for r in reductions:
        if r.op not in OPERATORS:
            refuse(
                "UnknownOperator",
                f"'{r.var}' accumulates with '{r.op}': only {', '.join(OPERATORS)} are combined over lanes",
                r.updates[0].start,
            )
        elif r.ctype not in TYPES:
            refuse(
                "ReductionType",
                f"'{r.var}' is a {r.ctype}: lanes combine only {', '.join(sorted(TYPES))}",
                r.updates[0].start,
            )
    for loop in top:
        _live_out(ctx, kernel, loop, {r.var for r in loop.reductions} | {loop.var}, refuse)
    return Plan(tuple(top), reductions, tuple(blockers))


def _loop_blockers(loop: Loop) -> list[str]:
    out = list(loop.distribute_blockers)
    if out:
        return out
    if loop.op not in ("<", "<="):
        out.append(f"it runs while '{loop.op}' holds; lanes stride upwards under < or <=")
    if not (isinstance(loop.step, Affine) and loop.step.value is not None and loop.step.value > 0):
        out.append(f"its step '{loop.step}' is not a positive constant")
    return out


def _live_out(ctx: AnalysisInput, kernel: Function, loop: Loop, allowed: set[str], refuse) -> None:  # type: ignore[no-untyped-def]
    """A scalar declared before the loop, assigned in it and not a reduction: after the
    rewrite each lane would hold the value of its own last iteration."""
    data = ctx.model.source.data
    text = data[loop.body.start : loop.body.end]
    before = data[kernel.body.start : loop.span.start]
    for match in _ASSIGN_RE.finditer(text):
        name = next(g for g in match.groups() if g).decode()
        if name in allowed or _declared_in(text, name) or not _declared_in(before, name):
            continue
        refuse(
            "LiveOut",
            f"'{name}' is assigned in the loop over '{loop.var}' and is not a reduction: each lane would "
            "keep its own value",
            loop.body.start + match.start(),
        )
        return


def _declared_in(text: bytes, name: str) -> bool:
    return re.search(rb"\b[A-Za-z_][\w:<>]*[\s*&]+" + re.escape(name.encode()) + rb"\s*(?:=|;|\[|,)", text) is not None
