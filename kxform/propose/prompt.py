"""What kxform says to the model: the standing instructions, the first message (the
kernel's context) and, after every attempt, the result that goes back as the tool's
result: accepted or rejected, at which stage and why, the figures, and the best
verified result so far. All of it is logged."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from kxform.engine.params import ParamSpace
from kxform.propose.context import KernelContext
from kxform.propose.tools import Tool

SYSTEM = """\
You are the proposer inside kxform, a checked source-to-source optimizer for CUDA and HIP kernels. \
You never edit code: you answer only by calling the tool you are given, once per turn, with one proposal \
for the kernel described. kxform treats every answer as untrusted input and checks it: the tool schema, \
every parameter's domain and constraints, the formula grammar and size limits, arithmetic safety \
(no unsigned wrap-around, division by zero or wide shift at any grid shape), a solver's proof that the \
remap is a bijection on every grid CUDA allows, that every read of the block index is \
rewritten, that the result compiles with nvcc, and that original and rewritten kernels produce the \
same outputs at every size of the kernel's harness. Only then is the rewrite timed on a GPU, or, \
without one, ranked by a prediction, and the best verified result is kept. After each attempt you get \
its result and, for a rejection, the reason: use them.

For a block-index remap (swizzle), the goal is that blocks which run at the same time (consecutive \
physical block ids, dispatched in waves of about SMs x resident blocks per SM) work on logical tiles \
that share input data, so it is read from DRAM once and then hit in L2. A remap must be a bijection \
from physical (bx, by) to logical (lx, ly) for every grid shape, including shapes that do not divide \
by your parameters and 1-wide grids. A faster order on one GPU can be slower on another: say in \
`expectation` what you expect and why; kxform measures or predicts, and reports back."""


@dataclass(frozen=True)
class AttemptNote:
    """One earlier attempt as the model is told about it."""

    index: int
    label: str
    status: str
    detail: str
    score: float | None = None


def space_text(tool: Tool, space: ParamSpace) -> str:
    """The parameter space in words (the same facts the tool schema encodes)."""
    lines = [tool.description, "", "Parameters (kxform checks domains and constraints, whatever the schema allows):"]
    for param in space.params:
        lines.append(
            f"- {param.name} ({param.kind}): {param.describe_values()}, default {param.format(param.default)}"
            + (f"; {param.doc}" if param.doc else "")
        )
    for constraint in space.constraints:
        lines.append(f"- constraint: {constraint.describe()}")
    if tool.payload is not None:
        lines += ["", f"{tool.payload.capitalize()} (`{tool.payload}` field): {tool.payload_help}"]
    return "\n".join(lines)


def first_message(context: KernelContext, tool: Tool, attempts: int) -> str:
    return f"{context.render()}\nYou have {attempts} attempt(s). Call `{tool.name}` with your first proposal."


def result_message(note: AttemptNote, best: AttemptNote | None, left: int, ranking: str, tool: Tool) -> str:
    """The tool result after an attempt (or the text after an answer that held no call)."""
    lines = [f"Attempt {note.index} ({note.label}): {note.status}. {note.detail}"]
    if best is None:
        lines.append("No verified result yet.")
    else:
        unit = "ms (measured)" if ranking == "time" else "bytes per wave (predicted, lower is better)"
        score = f"{best.score:.6g} {unit}" if best.score is not None else "no score"
        lines.append(f"Best verified so far: attempt {best.index} ({best.label}), {score}.")
    if left > 0:
        lines.append(f"{left} attempt(s) left: call `{tool.name}` with a proposal different from every earlier one.")
    return "\n".join(lines)


def history_text(notes: Sequence[AttemptNote]) -> str:
    """Every attempt of a session in one block (for the log and `inspect`)."""
    return "\n".join(f"{n.index}. {n.label}: {n.status}. {n.detail}" for n in notes) or "no attempts"
