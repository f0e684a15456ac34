"""The structural barrier check of a kernel that stages data in shared memory.

Every read of a shared array must be separated from every store to it by a
`__syncthreads()` on each path from the store to the read, and every store from the
reads of what it overwrites: in program order when both are in one pass of the code;
round the innermost loop that holds both otherwise.

Stages. An array indexed first by `(t + c) % S` or `t % S`, `t` the variable of an
enclosing loop counting by one (the slice loop), holds S stages: an access at iteration
t touches stage (t + c) mod S, so a store and a read touch the same stage only every
S iterations, d iterations apart (d from the offsets). The barrier must then lie on the
path from the store at iteration t to the read at iteration t + d (and from a read to
the next store into its stage): between them in the text when d = 0, after the first or
before the second when d = 1, anywhere in the loop's body when d >= 2. Only barriers,
commits and waits directly in the loop's body count there (one inside an `if` may not
run every iteration).

Asynchronous copies (`__pipeline_memcpy_async`) land when their thread waits for their
group: the store's group is closed by the first `__pipeline_commit()` after it, and it
has landed at the first `__pipeline_wait_prior(n)` with n groups or more committed after
it. A read of the stage must come after that wait, with a barrier between the two (the
other threads' copies land at their own waits, before the barrier); a copy that no
commit and wait in the loop completes is a problem too.

The CPU runtime may or may not expose a missing barrier, depending on how it schedules a
block's threads; this check does not depend on that, and the pass rejects its own
rewrite when it fails. What it cannot tell (a stage index of another form, an async copy
outside a slice loop) is reported as a problem, never passed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from kxform.analysis import AccessAnalysis, Loop, MemoryAccess
from kxform.expr import parse_expr
from kxform.frontend.model import SourceModel, Span

_STAGE = re.compile(r"^\(?\s*(?P<var>[A-Za-z_]\w*)\s*(?:\+\s*(?P<offset>[^()%]+?))?\s*\)?\s*%\s*(?P<mod>.+)$")
_WAIT = re.compile(r"\b__pipeline_wait_prior\s*\(")
_COMMIT = re.compile(r"\b__pipeline_commit\s*\(\s*\)")
_CONDITIONAL = frozenset(
    {"if_statement", "for_statement", "while_statement", "do_statement", "switch_statement", "conditional_expression"}
)
_HORIZON = 16
"""Iterations of the slice loop simulated to find when a copy lands (beyond: never)."""


@dataclass(frozen=True)
class Stage:
    """Where an access of a staged array is, in slice-loop terms."""

    loop: Loop
    offset: int
    """c: the access touches stage (t + c) mod `count` at iteration t."""
    count: int


@dataclass(frozen=True)
class Kernel:
    """What the check reads of one kernel: its analysis, its text and the events of its loops."""

    analysis: AccessAnalysis
    model: SourceModel

    def text(self, span: Span) -> str:
        return self.model.source.data[span.start : span.end].decode("utf-8", "replace")

    def value(self, expression: str) -> int | None:
        """An integer expression over literals and the file's object-like macros, or None."""
        names = {}
        for name in set(re.findall(r"[A-Za-z_]\w*", expression)):
            macro = self.model.macro(name)
            if macro is None or macro.is_function_like or not re.fullmatch(r"\s*\(?\s*-?\d+\s*\)?\s*", macro.body):
                return None
            names[name] = int(macro.body.strip().strip("()"))
        try:
            return int(parse_expr(expression.replace("/", "//")).evaluate(names))
        except Exception:  # noqa: BLE001 - anything the expression language refuses is "cannot tell"
            return None

    def barriers(self) -> list[Span]:
        return [b for b in self.analysis.barriers if self.text(b).startswith("__syncthreads")]

    def calls(self, pattern: re.Pattern[str]) -> list[tuple[Span, str]]:
        """Spans of the calls `pattern` starts, with their argument text."""
        body = self.analysis.function.body
        text = self.text(body)
        found = []
        for m in pattern.finditer(text):
            depth, end = 0, m.end() - 1
            for end in range(m.end() - 1, len(text)):
                depth += {"(": 1, ")": -1}.get(text[end], 0)
                if depth == 0:
                    break
            found.append((Span(body.start + m.start(), body.start + end + 1), text[m.end() : end]))
        return found

    def top_level(self, span: Span, loop: Loop) -> bool:
        """Whether `span` is a statement of `loop`'s body itself, not under a branch or an inner loop."""
        node = self.model.tree.root_node.descendant_for_byte_range(span.start, span.end)
        while node is not None and not (node.start_byte == loop.body.start and node.end_byte == loop.body.end):
            if node.type in _CONDITIONAL:
                return False
            node = node.parent
        return node is not None


def missing_barriers(analysis: AccessAnalysis, model: SourceModel) -> list[str]:
    """One sentence per store/read pair of a shared array that no barrier separates."""
    kernel = Kernel(analysis, model)
    problems: list[str] = []
    shared = [a for a in analysis.accesses if a.space == "shared"]
    for store in (a for a in shared if a.write):
        for read in (a for a in shared if a.read and a.buffer == store.buffer):
            for first, second, what in ((store, read, "read after its store"), (read, store, "store after a read")):
                why = _unseparated(kernel, first, second)
                if why:
                    problems.append(f"line {second.line}: `{second.text}` ({what} at line {first.line}) {why}")
    for copy in (a for a in shared if a.asynchronous):
        stage = _stage(kernel, copy)
        if stage is None:
            problems.append(f"line {copy.line}: `{copy.text}` is copied asynchronously outside a slice loop")
        elif _landing(kernel, copy, stage.loop) is None:
            problems.append(
                f"line {copy.line}: `{copy.text}` is copied asynchronously, but no __pipeline_commit() and "
                "__pipeline_wait_prior() in its loop make the copy land"
            )
    return sorted(set(problems))


def _unseparated(kernel: Kernel, first: MemoryAccess, second: MemoryAccess) -> str:
    """ "" when a barrier lies on every path from `first` to `second`, else why not."""
    a, b = _stage(kernel, first), _stage(kernel, second)
    common = set(first.loops) & set(second.loops)
    if a is not None and b is not None and a.loop == b.loop and a.count == b.count:
        inner = [i for i in common if kernel.analysis.loop(i).depth > a.loop.depth]
        if inner and not _separated(kernel, first.span, second.span, set(inner)):
            return "has no __syncthreads() between them in the loop that holds both"
        return _staged(kernel, first, second, a, b)
    if first.asynchronous and first.write:
        return "is copied asynchronously where kxform cannot tell when the copy lands"
    if not _separated(kernel, first.span, second.span, common):
        return "has no __syncthreads() between them"
    return ""


def _stage(kernel: Kernel, access: MemoryAccess) -> Stage | None:
    """The access's stage in a slice loop, when its first subscript is `(t + c) % S`."""
    first = _first_subscript(access.text)
    m = _STAGE.match(first) if first is not None else None
    if m is None:
        return None
    loops = [kernel.analysis.loop(i) for i in access.loops]
    loop = next((lp for lp in reversed(loops) if lp.var == m.group("var")), None)
    count = kernel.value(m.group("mod"))
    offset = kernel.value(m.group("offset")) if m.group("offset") else 0
    if loop is None or loop.kind != "for" or str(loop.step) != "1" or not count or count < 1 or offset is None:
        return None
    return Stage(loop, offset % count, count)


def _first_subscript(text: str) -> str | None:
    start = text.find("[")
    if start < 0:
        return None
    depth = 0
    for n in range(start, len(text)):
        depth += {"[": 1, "]": -1}.get(text[n], 0)
        if depth == 0:
            return text[start + 1 : n].strip()
    return None


def _staged(kernel: Kernel, first: MemoryAccess, second: MemoryAccess, a: Stage, b: Stage) -> str:
    """Why the stage `first` touches at iteration t is not separated from `second` at the
    iteration t + d that next touches it ("" when it is)."""
    d = (a.offset - b.offset) % a.count
    if d == 0 and second.span.start <= first.span.start:
        d = a.count
    begin = (0, first.span.end)
    if first.asynchronous and first.write and second.read:
        landed = _landing(kernel, first, a.loop)
        if landed is None:
            return "is copied asynchronously, and nothing in the loop makes the copy land"
        if landed >= (d, second.span.start):
            return f"is read {_when(d)}, before this thread waits for the copy"
        begin = landed
    if not _barrier_between(kernel, a.loop, begin, (d, second.span.start)):
        return f"touches the same stage {_when(d)} with no __syncthreads() between them"
    return ""


def _when(d: int) -> str:
    return "in the same iteration" if d == 0 else "in the next iteration" if d == 1 else f"{d} iterations later"


def _barrier_between(kernel: Kernel, loop: Loop, begin: tuple[int, int], end: tuple[int, int]) -> bool:
    """A barrier of the loop's body at some (iteration, offset) strictly between `begin` and `end`."""
    spans = [s for s in kernel.barriers() if loop.body.start <= s.start and kernel.top_level(s, loop)]
    return any(begin < (i, s.start) and (i, s.end) <= end for s in spans for i in range(begin[0], end[0] + 1))


def _landing(kernel: Kernel, copy: MemoryAccess, loop: Loop) -> tuple[int, int] | None:
    """(iterations later, offset) of the wait at which an asynchronous copy made at
    iteration 0 has landed, or None (no commit or wait in the loop completes it)."""
    inside = [
        (span, arg)
        for pattern in (_COMMIT, _WAIT)
        for span, arg in kernel.calls(pattern)
        if loop.body.start <= span.start and span.end <= loop.body.end and kernel.top_level(span, loop)
    ]
    commits = sorted(span.start for span, arg in inside if "commit" in kernel.text(span))
    waits = sorted((span.start, kernel.value(arg)) for span, arg in inside if "wait_prior" in kernel.text(span))
    if not commits or not waits or any(n is None for _, n in waits):
        return None
    events = sorted([(p, "commit", 0) for p in commits] + [(p, "wait", n or 0) for p, n in waits])
    closed, after = False, 0
    for iteration in range(_HORIZON):
        for position, kind, n in events:
            if (iteration, position) <= (0, copy.span.start):
                continue
            if kind == "commit":
                after += closed
                closed = True
            elif closed and after >= n:
                return (iteration, position)
    return None


def _separated(kernel: Kernel, first: Span, second: Span, common: set[int]) -> bool:
    """The rule without stages: a barrier between them in the text, or round the innermost
    loop that holds both."""
    barriers = kernel.barriers()
    if first.end <= second.start:  # straight line: a barrier between them
        return any(first.end <= b.start and b.end <= second.start for b in barriers)
    if not common:  # the second comes first in the text and no loop brings the first round to it
        return True
    loop = max((kernel.analysis.loop(i) for i in common), key=lambda lp: lp.depth)
    body = loop.body
    return any(
        (first.end <= b.start and b.end <= body.end) or (body.start <= b.start and b.end <= second.start)
        for b in barriers
    )
