"""The one-element-per-thread kernel that `vectorize` and `coarsen` rewrite, recognised.

    int i = blockIdx.x * blockDim.x + threadIdx.x;      // the element index
    if (i < N) { ... }        or      if (i >= N) return; ...

The index declaration is the body's first statement, the guard the rest of it (a
trailing `if` holding the work, or an early `return` followed by it). Between the two,
declarations of constants and values computed from the index (`float eps = 1e-5f;`,
`int t = i % T;`: no memory read, no assignment, no thread or block index) are accepted:
those that do not read the index (nor another that does) are the thread's prelude, kept
once per thread; the others are per element, moved into the work under the guard (they
have no effect the guard could hide). What the work does is read from the shared access
analysis: every global access, its index form and its guards. Anything else (another
statement between the two, a second guard shape, an index from `threadIdx.y`) is refused
with the line that does not fit.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from kxform.analysis.prelude import THREAD_BUILTINS_RE, split_prelude
from kxform.analysis.statements import statements
from kxform.analysis.thread_index import INDEX_DECL_RE, index_axis
from kxform.frontend.model import Function, SourceModel

EXITS_RE = re.compile(r"\breturn\b|\bgoto\b|\bbreak\b")


@dataclass(frozen=True)
class Elementwise:
    """A recognised kernel: the index declaration and the guarded work, as text."""

    ctype: str
    var: str
    bound: str
    """The guard's bound, as written (`N`, `T * D`)."""
    work: str
    """The statements guarded by `var < bound`, without the guard."""
    guarded: str
    """The work with its guard, as a statement (`if (i < N) { ... }`)."""
    body_indent: str
    prelude: tuple[str, ...] = ()
    """Declarations before the guard that do not depend on the element, kept once per thread."""


class NotElementwise(Exception):
    """Why the kernel is not of the recognised shape, with a byte offset for the line."""

    def __init__(self, message: str, offset: int) -> None:
        super().__init__(message)
        self.offset = offset


def recognise(model: SourceModel, kernel: Function) -> Elementwise:
    data = model.source.data
    body = data[kernel.body.start + 1 : kernel.body.end - 1].decode("utf-8")
    base = kernel.body.start + 1
    stmts = statements(body)
    if not stmts:
        raise NotElementwise("the kernel's body is empty", kernel.span.start)
    at, first = stmts[0]
    decl = INDEX_DECL_RE.match(first)
    if decl is None or index_axis(decl.group("init")) != "x":
        raise NotElementwise(
            "the body does not start with the element index `int i = blockIdx.x * blockDim.x + threadIdx.x;`", base + at
        )
    var = decl.group("var")
    split = split_prelude(stmts[1:], {var})
    if split.refused is not None:
        raise NotElementwise(
            f"{split.refused[0]}: only constants and values of the index may come before it", base + split.refused[1]
        )
    prelude, per_element, rest = split.once, split.per_index, stmts[1 + split.rest :]
    if not rest:
        raise NotElementwise("nothing follows the element index", base + at)
    at, text = rest[0]
    guard = _split_if(text)
    if guard is None:
        raise NotElementwise(f"the statement after `{var}` is not its bounds guard", base + at)
    cond, then = guard
    less = re.fullmatch(rf"{re.escape(var)}\s*<\s*(?P<b>[^<>=&|?]+)", cond)
    early = re.fullmatch(rf"{re.escape(var)}\s*>=\s*(?P<b>[^<>=&|?]+)", cond)
    if less and len(rest) == 1 and "else" not in then:
        work = then.strip()
        if work.startswith("{") and work.endswith("}"):
            work = work[1:-1]
        bound = less.group("b").strip()
    elif early and re.fullmatch(r"\{?\s*return\s*;\s*\}?", then.strip()):
        bound = early.group("b").strip()
        work = body[rest[1][0] :] if len(rest) > 1 else ""
    else:
        raise NotElementwise(
            f"the guard `if ({cond})` is not `{var} < BOUND` around the work, or "
            f"`if ({var} >= BOUND) return;` before it",
            base + at,
        )
    if per_element:
        work = "\n".join(per_element) + "\n" + work
    if EXITS_RE.search(work):
        raise NotElementwise("the guarded work leaves early (return, break or goto)", base + at)
    if re.search(rf"(?<![\w.]){re.escape(var)}\s*(=[^=]|\+=|-=|\+\+|--)|(\+\+|--)\s*{re.escape(var)}\b", work):
        raise NotElementwise(f"the work assigns the element index `{var}`", base + at)
    builtin = THREAD_BUILTINS_RE.search(work)
    if builtin:
        raise NotElementwise(
            f"the work reads `{builtin.group(0)}`: a thread would read it for each of its elements", base + at
        )
    indent = re.match(r"\n*([ \t]*)", body).group(1) or "    "
    braced = work if work.lstrip().startswith("{") else f"{{{work}}}"
    guarded = f"if ({var} < {bound}) {braced}"
    return Elementwise(decl.group("type"), var, bound, work, guarded, indent, tuple(prelude))


def _split_if(text: str) -> tuple[str, str] | None:
    """`if (COND) STMT` as (COND, STMT), the condition's parentheses matched."""
    match = re.match(r"if\s*\(", text)
    if match is None:
        return None
    depth = 0
    for i in range(match.end() - 1, len(text)):
        depth += text[i] == "("
        depth -= text[i] == ")"
        if depth == 0:
            return text[match.end() : i].strip(), text[i + 1 :].strip()
    return None
