"""Which loop of a kernel `split-reduce` splits, the reductions it combines, and why it
refuses a kernel (each reason with its line).

A kernel qualifies when exactly one of its loops that no other loop encloses carries
reductions (kxform.analysis: scalars accumulated with +, max or min, read nowhere else
in the loop), its iterations are otherwise independent (no carried dependence, barrier
or exit; affine bound, a positive constant step, `<` or `<=`), and splitting it changes
nothing else a thread does:

* every store to global memory lies in that loop or after it in the block that holds it:
  the workers of a column all run what comes before the loop (so it must not write), and
  only the worker that combines runs what follows (a thread that never reaches the loop,
  past the guard, runs the rest in every worker, so nothing there may write either);
* the threads do not communicate already (shared memory, barriers, warp operations,
  atomics, in the kernel or a function it calls) and no function it calls stores to
  memory where the analysis cannot see it;
* the kernel reads nothing of the y and z axes (the split is the y axis of the launch);
* where the loop writes global memory, the buffers it writes are `__restrict__` or passed
  apart from every other pointer at each of the file's launches (iterations of one column
  run on several workers, so a write another iteration reads through an alias would race).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import ClassVar

from kxform.analysis import AccessAnalysis, Affine, Loop
from kxform.analysis.access import closure_functions
from kxform.analysis.records import Reduction
from kxform.analysis.reuse import stores_memory
from kxform.analysis.communication import Communication
from kxform.analysis.manager import AnalysisInput
from kxform.engine.pass_api import Blocker
from kxform.engine.rewrite import in_block
from kxform.frontend.launches import launch_configs
from kxform.frontend.model import Function, SourceModel, Span

SPLIT = "kx_split"
"""The local the rewrite declares at the kernel's entry: this thread's worker of its column."""
OPERATORS = ("+", "max", "min")
SCRATCH_TYPES = {
    "float": "float32",
    "double": "float64",
    "int": "int32",
    "unsigned": "uint32",
    "unsigned int": "uint32",
    "long long": "int64",
    "long long int": "int64",
    "unsigned long long": "uint64",
    "unsigned long long int": "uint64",
}
"""Element types a partial is kept in, with the scratch buffer's harness dtype."""
_AXES_RE = re.compile(rb"\b(?:threadIdx|blockIdx|blockDim|gridDim)\s*\.\s*[yz]\b")


@dataclass(frozen=True)
class Plan:
    """The loop to split and the reductions it carries, or why not: an analysis
    (kxform.analysis.manager), computed once per kernel and source version."""

    positional: ClassVar[bool] = True

    loop: Loop | None
    reductions: tuple[Reduction, ...]
    blockers: tuple[Blocker, ...]
    applied: bool = False

    @classmethod
    def compute(cls, ctx: AnalysisInput, kernel: Function) -> Plan:
        return plan(ctx, kernel)


def plan(ctx: AnalysisInput, kernel: Function) -> Plan:
    model = ctx.model
    body = model.source.data[kernel.body.start : kernel.body.end]
    if re.search(rb"\b" + SPLIT.encode() + rb"\b", body):
        return Plan(None, (), (), applied=True)
    analysis = ctx.analysis(AccessAnalysis, kernel)
    blockers: list[Blocker] = []

    def refuse(key: str, message: str, offset: int) -> None:
        blockers.append(Blocker(key, f"{message} (line {model.source.line_col(offset)[0]})", offset))

    _communication(ctx, kernel, refuse)
    axis = _AXES_RE.search(body)
    if axis:
        refuse(
            "ReadsSplitAxis",
            f"'{kernel.name}' reads `{axis.group(0).decode()}`: the split workers are the launch's y axis",
            kernel.body.start + axis.start(),
        )
    carriers = [
        loop for loop in analysis.loops if loop.parent is None and any(r.loop == loop.id for r in loop.reductions)
    ]
    if len(carriers) > 1:
        refuse(
            "SeveralReductionLoops",
            f"{len(carriers)} loops of '{kernel.name}' carry reductions; the pass splits exactly one",
            carriers[1].span.start,
        )
        return Plan(None, (), tuple(blockers))
    if not carriers:
        carrying = next((lp for lp in analysis.loops if lp.parent is None and lp.carried), None)
        if carrying is not None:  # a running value stored or read in the loop is no reduction
            refuse(
                "Dependence",
                f"the loop over '{carrying.var or carrying.kind}' carries no reduction it could split: "
                f"{carrying.carried[0]}",
                carrying.span.start,
            )
        else:
            refuse("NoReductionLoop", f"no loop of '{kernel.name}' carries a reduction", kernel.span.start)
        return Plan(None, (), tuple(blockers))
    loop = carriers[0]
    if not in_block(model, loop):
        refuse(
            "LoopShape",
            f"the loop over '{loop.var or loop.kind}' is not a statement of a block (`if (...) for (...)` without "
            "braces): the statements the split adds around it would change what the `if` holds",
            loop.span.start,
        )
    for reason in _loop_blockers(loop):
        refuse("LoopShape", f"the loop over '{loop.var or loop.kind}' cannot be split: {reason}", loop.span.start)
    reductions = tuple(r for r in loop.reductions if r.loop == loop.id)
    for r in reductions:
        if r.op not in OPERATORS:
            refuse(
                "UnknownOperator",
                f"'{r.var}' accumulates with '{r.op}': only {', '.join(OPERATORS)} have an identity and a "
                "bound for a new order",
                r.updates[0].start,
            )
        elif r.ctype not in SCRATCH_TYPES or "[" in r.var:
            refuse(
                "ReductionType",
                f"'{r.var}' is a {r.ctype or 'value of unknown type'}: partials are kept only for scalars of "
                f"{', '.join(sorted({t for t in SCRATCH_TYPES if ' int' not in t}))}",
                r.updates[0].start,
            )
    _stores(model, analysis, loop, refuse)
    _aliases(model, kernel, analysis, loop, refuse)
    return Plan(loop, reductions, tuple(blockers))


def _communication(ctx: AnalysisInput, kernel: Function, refuse) -> None:  # type: ignore[no-untyped-def]
    """Atomics anywhere in the closure, any other way the threads communicate
    (kxform.analysis.communication), a callee that stores to memory."""
    model = ctx.model
    functions = closure_functions(model, kernel)
    for function in functions:
        atomics = ctx.analysis(AccessAnalysis, function).atomics
        if atomics:
            refuse(
                "Atomic",
                f"'{function.name}' already updates memory atomically: its order over threads is not the pass's "
                "to change",
                atomics[0].start,
            )
            return
    found = ctx.analysis(Communication, kernel).found
    if found is not None:
        refuse(
            "Communicates", f"the threads already communicate ({found.what}): the pass does not model it", found.offset
        )
        return
    for function in functions[1:]:
        if stores_memory(model, function):
            refuse(
                "CallStores",
                f"'{kernel.name}' calls '{function.name}', which stores to memory where the analysis does not "
                "see which worker runs it",
                function.span.start,
            )
            return


def _loop_blockers(loop: Loop) -> list[str]:
    out = list(loop.distribute_blockers)
    if out:
        return out
    if loop.op not in ("<", "<="):
        out.append(f"it runs while '{loop.op}' holds; workers stride upwards under < or <=")
    if not (isinstance(loop.step, Affine) and loop.step.value is not None and loop.step.value > 0):
        out.append(f"its step '{loop.step}' is not a positive constant")
    return out


def _stores(model: SourceModel, analysis: AccessAnalysis, loop: Loop, refuse) -> None:  # type: ignore[no-untyped-def]
    after = Span(loop.span.end, enclosing_block(model, loop).end)
    for access in analysis.accesses:
        if access.space != "global" or not access.write or loop.id in access.loops or after.contains(access.span):
            continue
        where = "before the loop" if access.span.start < loop.span.start else "outside the loop's block"
        refuse(
            "StoreOutsideSplit",
            f"'{access.text}' is stored {where}: every worker of a column would store it, where the original "
            "thread stored it once",
            access.span.start,
        )
        return


def enclosing_block(model: SourceModel, loop: Loop) -> Span:
    """The compound statement that holds the loop (the kernel's body at the top level)."""
    node = model.tree.root_node.descendant_for_byte_range(loop.span.start, loop.span.end)
    while node is not None and not (node.type == "compound_statement" and node.start_byte < loop.span.start):
        node = node.parent
    if node is None:
        return loop.span
    return Span(node.start_byte, node.end_byte - 1)


def _aliases(model: SourceModel, kernel: Function, analysis: AccessAnalysis, loop: Loop, refuse) -> None:  # type: ignore[no-untyped-def]
    written = {a.buffer for a in analysis.accesses if a.space == "global" and a.write and loop.id in a.loops}
    pointers = [i for i, p in enumerate(kernel.params) if "*" in p.ctype or "[" in p.ctype]
    for name in sorted(written):
        buffer = next((b for b in analysis.buffers if b.name == name), None)
        index = next((i for i, p in enumerate(kernel.params) if p.name == name), None)
        if buffer is None or buffer.restrict or index is None:
            continue
        for config in launch_configs(model, kernel.name):
            args = [a.strip() for a in config.site.args]
            if index >= len(args):
                continue
            same = [kernel.params[i].name for i in pointers if i != index and i < len(args) and args[i] == args[index]]
            if same:
                refuse(
                    "Aliased",
                    f"the launch passes '{args[index]}' as both '{name}', which the loop writes, and '{same[0]}': "
                    "iterations split over workers would race through the alias",
                    config.site.span.start,
                )
                return
